"""The judge: protocol, prompts, verdicts, budgets, sampling, retries.

``collector.evaluate.anthropic`` (the Claude client) is imported only by whoever builds one,
so the rest of ``evaluators`` stays free of the SDK.
"""

from evaluators.judge.base import Judge, JudgeFailure, JudgeObserver, JudgeReply, JudgeRequest

__all__ = ["Judge", "JudgeFailure", "JudgeObserver", "JudgeReply", "JudgeRequest"]
