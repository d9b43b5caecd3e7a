"""``FakeJudge``: an in-process judge for tests of evaluators and the runner (no HTTP)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from evaluators.judge.base import JudgeFailure, JudgeReply, JudgeRequest

Script = Callable[[JudgeRequest], dict[str, Any] | JudgeFailure | None]


class FakeJudge:
    """Answers each request with ``script(request)``: a tool input, a failure to raise, or None."""

    def __init__(self, script: Script, input_tokens: int = 100, output_tokens: int = 20) -> None:
        self.script = script
        self.requests: list[JudgeRequest] = []
        self._tokens = (input_tokens, output_tokens)

    async def complete(self, request: JudgeRequest) -> JudgeReply:
        self.requests.append(request)
        answer = self.script(request)
        if isinstance(answer, JudgeFailure):
            raise answer
        return JudgeReply(request.model, answer, self._tokens[0], self._tokens[1], latency_s=0.001)

    async def close(self) -> None:
        pass
