"""The Claude judge: ``anthropic.AsyncAnthropic`` with a forced verdict tool and prompt caching.

This is the only module that imports ``anthropic``.  The SDK's own retries are off
(``max_retries=0``) so that the policy is ours and testable: ``RetryPolicy`` decides, this
module waits (``sleep`` is injectable) and reports every attempt to the observer.  Each
attempt has a hard deadline (``timeout``), enforced both by the HTTP client and by
``asyncio.timeout`` around the call.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

import anthropic
import orjson

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
_EPHEMERAL: dict[str, Any] = {"type": "ephemeral"}


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


def message_params(request: JudgeRequest) -> dict[str, Any]:
    """The Messages API body for a request (also what tests compare the wire against)."""
    return {
        "model": request.model,
        "max_tokens": request.max_tokens,
        "system": _blocks(request.system),
        "messages": [{"role": "user", "content": _blocks(request.content)}],
        "tools": [
            {
                "name": VERDICT_TOOL,
                "description": request.tool_description,
                "input_schema": request.tool_schema,
            }
        ],
        "tool_choice": {"type": "tool", "name": VERDICT_TOOL, "disable_parallel_tool_use": True},
    }


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
        client: anthropic.AsyncAnthropic | None = None,
    ) -> None:
        # An explicit credential keeps the SDK from looking for profiles or other
        # credentials on disk; a gateway given by base_url alone gets a placeholder key.
        # The aiohttp transport costs less CPU a call than the default httpx one
        # (tests/perf/judge_call_cost.py: 2.3-2.8 against 2.5-3.8 ms on a slow machine).
        self._client = client or anthropic.AsyncAnthropic(
            api_key=api_key or "unset",
            base_url=base_url,
            timeout=timeout,
            max_retries=0,
            open_telemetry=False,
            http_client=anthropic.DefaultAioHttpClient(timeout=timeout),
        )
        self._timeout = timeout
        self._retry = retry
        self._observer = observer or NullObserver()
        self._sleep = sleep

    async def close(self) -> None:
        await self._client.close()

    async def complete(self, request: JudgeRequest) -> JudgeReply:
        params = message_params(request)
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
                    raw = await self._client.messages.with_raw_response.create(**params)
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


def _reply(model: str, message: dict[str, Any], latency: float) -> JudgeReply:
    """The verdict tool's input, any text, and the usage, from a Messages API reply body."""
    tool_input: dict[str, Any] | None = None
    text: list[str] = []
    for block in message.get("content") or ():
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "tool_use" and block.get("name") == VERDICT_TOOL:
            given = block.get("input")
            tool_input = given if isinstance(given, dict) else None
        elif kind == "text":
            text.append(str(block.get("text", "")))
    usage = message.get("usage") or {}
    return JudgeReply(
        model=model,
        tool_input=tool_input,
        input_tokens=usage.get("input_tokens") or 0,
        output_tokens=usage.get("output_tokens") or 0,
        cache_read_tokens=usage.get("cache_read_input_tokens") or 0,
        cache_write_tokens=usage.get("cache_creation_input_tokens") or 0,
        latency_s=latency,
        stop_reason=message.get("stop_reason"),
        text="".join(text),
    )
