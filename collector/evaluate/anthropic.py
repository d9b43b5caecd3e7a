"""The Claude judge: the SDK's own client for the configured provider (``AsyncAnthropic``,
``AsyncAnthropicBedrock`` or ``AsyncAnthropicVertex``) asking for the verdict as structured
output (or, on the older models ``collector.evaluate.models`` marks so, a forced verdict
tool), with prompt caching of the system prompt and the stable data blocks.

This is the only module that imports ``anthropic``.  Bedrock signs each request with SigV4
from the AWS credential chain (boto3); Vertex sends a Google OAuth token from Application
Default Credentials (google-auth); both resolve credentials per call, so a rotated key
is picked up and a missing one fails the call, not the start.  The SDK's own retries are off
(``max_retries=0``) so that the policy is ours and testable: ``RetryPolicy`` decides, this
module waits (``sleep`` is injectable) and reports every attempt to the observer.  Each
attempt has a hard deadline (``timeout``), enforced both by the HTTP client and by
``asyncio.timeout`` around the call.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any, Literal

import anthropic
import orjson

from collector.evaluate.models import judge_model
from collector.evaluate.retry import RetryPolicy, retryable
from evaluators.judge.base import (
    VERDICT_TOOL,
    FailureKind,
    JudgeFailure,
    JudgeObserver,
    JudgeReply,
    JudgeRequest,
    NullObserver,
)

Sleep = Callable[[float], Awaitable[None]]
Provider = Literal["anthropic", "bedrock", "vertex"]
_EPHEMERAL: dict[str, Any] = {"type": "ephemeral"}
# The body's anthropic_version the platforms document for the Messages API on InvokeModel /
# rawPredict (the SDK would send the Claude API's own version date there).
PLATFORM_VERSIONS: dict[Provider, str] = {"bedrock": "bedrock-2023-05-31", "vertex": "vertex-2023-10-16"}


def make_client(
    provider: Provider,
    *,
    api_key: str | None,
    base_url: str | None,
    timeout: float,
    aws_region: str | None = None,
    project_id: str | None = None,
    region: str | None = None,
) -> anthropic.AsyncAnthropic | anthropic.AsyncAnthropicBedrock | anthropic.AsyncAnthropicVertex:
    """The SDK's client for ``provider``, its own retries off.  The aiohttp transport costs
    less CPU a call than the default httpx one (tests/perf/judge_call_cost.py: 2.3-2.8
    against 2.5-3.8 ms on a slow machine)."""
    common: dict[str, Any] = {
        "base_url": base_url,
        "timeout": timeout,
        "max_retries": 0,
        "open_telemetry": False,
        "http_client": anthropic.DefaultAioHttpClient(timeout=timeout),
    }
    if provider == "bedrock":
        return anthropic.AsyncAnthropicBedrock(aws_region=aws_region, **common)
    if provider == "vertex":
        assert region and project_id  # the config requires both
        return anthropic.AsyncAnthropicVertex(region=region, project_id=project_id, **common)
    # An explicit credential keeps the SDK from looking for profiles or other credentials on
    # disk; a gateway given by base_url alone gets a placeholder key.
    return anthropic.AsyncAnthropic(api_key=api_key or "unset", **common)


def _kind(status: int | None, timed_out: bool) -> FailureKind:
    if timed_out:
        return "timeout"
    if status == 429:
        return "rate_limited"
    if status == 529:
        return "overloaded"
    return "error"


def _blocks(blocks: tuple[Any, ...]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for block in blocks:
        item: dict[str, Any] = {"type": "text", "text": block.text}
        if block.cache:
            item["cache_control"] = dict(_EPHEMERAL)
        out.append(item)
    return out


def message_params(request: JudgeRequest, provider: Provider = "anthropic") -> dict[str, Any]:
    """The Messages API body for a request (also what tests compare the wire against): the
    verdict schema as ``output_config.format``, or as a forced tool where the model's row
    says so, plus the row's thinking and effort (collector/evaluate/models.py)."""
    row = judge_model(provider, request.model)
    params: dict[str, Any] = {
        "model": request.model,
        "max_tokens": request.max_tokens,
        "system": _blocks(request.system),
        "messages": [{"role": "user", "content": _blocks(request.content)}],
    }
    output: dict[str, Any] = {}
    if row.verdict == "json":
        output["format"] = {"type": "json_schema", "schema": request.tool_schema}
    else:
        params["tools"] = [
            {
                "name": VERDICT_TOOL,
                "description": request.tool_description,
                "input_schema": request.tool_schema,
            }
        ]
        params["tool_choice"] = {"type": "tool", "name": VERDICT_TOOL, "disable_parallel_tool_use": True}
    if row.effort is not None:
        output["effort"] = row.effort
    if output:
        params["output_config"] = output
    if row.thinking is not None:
        params["thinking"] = dict(row.thinking)
    return params


class AnthropicJudge:
    def __init__(
        self,
        *,
        api_key: str | None,
        base_url: str | None,
        timeout: float,
        retry: RetryPolicy,
        observer: JudgeObserver | None = None,
        sleep: Sleep = asyncio.sleep,
        client: anthropic.AsyncAnthropic
        | anthropic.AsyncAnthropicBedrock
        | anthropic.AsyncAnthropicVertex
        | None = None,
        provider: Provider = "anthropic",
        aws_region: str | None = None,
        project_id: str | None = None,
        region: str | None = None,
    ) -> None:
        self._client = client or make_client(
            provider,
            api_key=api_key,
            base_url=base_url,
            timeout=timeout,
            aws_region=aws_region,
            project_id=project_id,
            region=region,
        )
        self._provider = provider
        self._extra_body = (
            {"anthropic_version": PLATFORM_VERSIONS[provider]} if provider in PLATFORM_VERSIONS else None
        )
        self._timeout = timeout
        self._retry = retry
        self._observer = observer or NullObserver()
        self._sleep = sleep

    async def close(self) -> None:
        await self._client.close()

    async def complete(self, request: JudgeRequest) -> JudgeReply:
        params = message_params(request, self._provider)
        spent = 0.0
        attempt = 0
        while True:
            started = time.monotonic()
            status: int | None = None
            headers: dict[str, str] = {}
            timed_out = False
            answered = False  # a 200 whose body is no verdict: the judge was reached
            try:
                async with asyncio.timeout(self._timeout):
                    # The raw reply, read with orjson: the SDK's models cost more than the
                    # verdict is worth (a quarter of a call's CPU, for a few fields).
                    raw = await self._client.messages.with_raw_response.create(
                        **params, extra_body=self._extra_body
                    )
                    message = orjson.loads(await raw.read())
            except (TimeoutError, anthropic.APITimeoutError) as err:
                timed_out, detail = True, f"no answer within {self._timeout:g}s ({type(err).__name__})"
            except anthropic.APIStatusError as err:
                status, headers = err.status_code, dict(err.response.headers)
                detail = f"HTTP {status}: {err.message}"
            except anthropic.APIConnectionError as err:
                detail = f"connection failed: {err}"
            except orjson.JSONDecodeError as err:
                answered, detail = True, f"the reply is not JSON: {err}"
            except Exception as err:  # the provider's credentials (boto3, google-auth) before sending
                latency = time.monotonic() - started
                self._observer.request(request.model, "error", latency)
                raise JudgeFailure(
                    "error",
                    f"the {self._provider} client could not send the request: {type(err).__name__}: {err}",
                    attempts=attempt + 1,
                    latency_s=spent + latency,
                ) from err
            else:
                if isinstance(message, dict):
                    return _reply(request.model, message, time.monotonic() - started)
                answered, detail = True, f"the reply is JSON but not an object: {type(message).__name__}"
            latency = time.monotonic() - started
            spent += latency
            kind = _kind(status, timed_out)
            self._observer.request(request.model, kind, latency)
            wait = self._retry.delay(attempt, status, headers)
            if wait is None:
                raise JudgeFailure(
                    kind,
                    detail,
                    attempts=attempt + 1,
                    latency_s=spent,
                    extra={"transient": retryable(status) and not answered},
                )
            await self._sleep(wait)
            attempt += 1


# Why a reply holds no verdict, by stop_reason: a refusal or a cut reply is not retried.
_STOPPED = {
    "refusal": ("refused", "the judge model declined to answer (stop_reason refusal)"),
    "max_tokens": (
        "truncated",
        "the reply reached max_tokens before the verdict was complete (stop_reason max_tokens); "
        "raise judge.max_tokens",
    ),
}


def _reply(model: str, message: dict[str, Any], latency: float) -> JudgeReply:
    """The verdict, any text, and the usage, from a Messages API reply body.  The verdict is
    the first text block parsed as a JSON object (structured outputs) or the verdict tool's
    input (forced tool); thinking blocks are skipped."""
    verdict: dict[str, Any] | None = None
    problem = ""
    text: list[str] = []
    for block in message.get("content") or ():
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "tool_use" and block.get("name") == VERDICT_TOOL:
            given = block.get("input")
            verdict = given if isinstance(given, dict) else None
        elif kind == "text":
            words = str(block.get("text", ""))
            if not text and verdict is None:
                verdict, problem = _json_verdict(words)
            text.append(words)
    stopped = _STOPPED.get(str(message.get("stop_reason")))
    usage = message.get("usage") or {}
    return JudgeReply(
        model=model,
        tool_input=None if stopped else verdict,
        input_tokens=usage.get("input_tokens") or 0,
        output_tokens=usage.get("output_tokens") or 0,
        cache_read_tokens=usage.get("cache_read_input_tokens") or 0,
        cache_write_tokens=usage.get("cache_creation_input_tokens") or 0,
        latency_s=latency,
        stop_reason=message.get("stop_reason"),
        text="".join(text),
        stopped=stopped[0] if stopped else "",
        problem=stopped[1] if stopped else ("" if verdict is not None else problem),
    )


def _json_verdict(words: str) -> tuple[dict[str, Any] | None, str]:
    try:
        value = orjson.loads(words)
    except orjson.JSONDecodeError:
        return None, "the reply's text is not a JSON verdict"
    if not isinstance(value, dict):
        return None, f"the reply's JSON is a {type(value).__name__}, not a verdict object"
    return value, ""
