"""A fake Anthropic Messages API on loopback, for the real ``anthropic`` client (via base_url).

``POST /v1/messages`` (non-streaming).  It runs in its own thread and event loop, so the
same fake serves in-process async tests and ``skillgauge`` subprocesses.

Scripting: ``queue(*actions)`` answers the next requests in order (a matcher may restrict
an action to one evaluation kind or skill); after the queue, ``script(seen)`` decides,
and the default script gives a plausible verdict for each evaluator.  Actions:
``verdict(input)``, ``status(code, retry_after=...)``, ``delay(seconds, then)``,
``text(...)`` (no tool call).

Every request is recorded (headers, JSON body, in-flight count).  ``usage`` is realistic:
tokens are ~4 characters each, and the prompt-caching fields are computed from the
``cache_control`` breakpoints seen before (tools, then system, then messages): the longest
cached prefix is read, the rest up to the last breakpoint is written, the remainder is
plain input.  So caching is measurable.
"""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import json
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

_FENCE = re.compile(r"<<<UNTRUSTED (\S+) (\S+)>>>\n(.*?)\n<<<END UNTRUSTED \1 \2>>>", re.DOTALL)


def tokens(text: str) -> int:
    return max((len(text) + 3) // 4, 1) if text else 0


@dataclass
class Seen:
    """One recorded request."""

    headers: dict[str, str]
    body: dict[str, Any]
    in_flight: int  # requests being served when this one arrived (itself included)
    at: float

    @property
    def schema(self) -> dict[str, Any]:
        tools = self.body.get("tools") or [{}]
        return dict(tools[0].get("input_schema") or {})

    @property
    def kind(self) -> str:
        props = self.schema.get("properties", {})
        if "should_have_used_skill" in props:
            return "skill_omission"
        if "steps" in props:
            return "skill_instruction_following"
        if props.get("rating", {}).get("enum") == ["Yes", "No"]:
            return "skill_selection_accuracy"
        return "custom"

    @property
    def system_text(self) -> str:
        return "\n".join(b.get("text", "") for b in self.body.get("system", []))

    @property
    def user_text(self) -> str:
        content = self.body["messages"][0]["content"]
        return "\n".join(b.get("text", "") for b in content) if isinstance(content, list) else str(content)

    def blocks(self) -> dict[str, str]:
        """The fenced data blocks of the user message, by name."""
        return {m.group(1): m.group(3) for m in _FENCE.finditer(self.user_text)}

    def nonces(self) -> set[str]:
        return {m.group(2) for m in _FENCE.finditer(self.user_text)}

    @property
    def skill(self) -> str | None:
        blocks = self.blocks()
        if "invoked_skill" in blocks:
            return blocks["invoked_skill"].strip()
        match = re.search(r"^invoked_skill: (.*)$", blocks.get("decision_under_evaluation", ""), re.MULTILINE)
        return match.group(1).strip() if match else None


@dataclass
class Action:
    kind: str  # verdict | status | delay | text
    payload: dict[str, Any] = field(default_factory=dict)
    evaluation: str | None = None  # only for requests of this kind
    skill: str | None = None

    def matches(self, seen: Seen) -> bool:
        return (self.evaluation is None or self.evaluation == seen.kind) and (
            self.skill is None or self.skill == seen.skill
        )


def verdict(tool_input: dict[str, Any], **match: str) -> Action:
    return Action("verdict", {"input": tool_input}, **match)


def status(code: int, retry_after: float | None = None, message: str = "", **match: str) -> Action:
    return Action("status", {"code": code, "retry_after": retry_after, "message": message}, **match)


def delay(seconds: float, then: Action | None = None, **match: str) -> Action:
    return Action("delay", {"seconds": seconds, "then": then}, **match)


def text(words: str, **match: str) -> Action:
    return Action("text", {"text": words}, **match)


def garbled(body: str, **match: str) -> Action:
    """A 200 whose body is this text (a broken gateway or proxy), not a Messages API reply."""
    return Action("garbled", {"body": body}, **match)


_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    429: "rate_limit_error",
    500: "api_error",
    503: "api_error",
    529: "overloaded_error",
}


def default_verdict(seen: Seen) -> Action:
    """A plausible, valid verdict for each evaluator."""
    if seen.kind == "skill_selection_accuracy":
        return verdict({"reasoning": "The skill matches the request.", "rating": "Yes"})
    if seen.kind == "skill_instruction_following":
        body = seen.blocks().get("skill_content", "")
        steps = [s.strip() for s in re.findall(r"^\s*\d+\.\s+(.*)$", body, re.MULTILINE)]
        return verdict(
            {
                "reasoning": "Each step is visible in the answer.",
                "steps": [{"step": s, "status": "covered", "evidence": "in the final answer"} for s in steps],
                "rating": "Fully Followed",
            }
        )
    if seen.kind == "skill_omission":
        return verdict(
            {
                "reasoning": "No advertised skill fits the request.",
                "should_have_used_skill": False,
                "skill": None,
            }
        )
    enum = seen.schema.get("properties", {}).get("rating", {}).get("enum", [])
    return verdict({"reasoning": "Scripted custom verdict.", "rating": enum[0] if enum else None})


class FakeAnthropic:
    def __init__(self, min_cache_tokens: int = 0) -> None:
        self.requests: list[Seen] = []
        self.script: Callable[[Seen], Action] = default_verdict
        self.min_cache_tokens = min_cache_tokens
        self._queue: list[Action] = []
        self._cache: set[str] = set()
        self._lock = threading.Lock()
        self._in_flight = 0
        self._ids = itertools.count(1)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._runner: web.AppRunner | None = None
        self.port = 0

    # -- lifecycle --------------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> FakeAnthropic:
        ready = threading.Event()

        def run() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            loop.run_until_complete(self._serve())
            ready.set()
            loop.run_forever()
            loop.run_until_complete(self._runner.cleanup() if self._runner else asyncio.sleep(0))
            loop.close()

        self._thread = threading.Thread(target=run, name="fake-anthropic", daemon=True)
        self._thread.start()
        if not ready.wait(10):
            raise RuntimeError("fake Anthropic server did not start")
        return self

    def stop(self) -> None:
        if self._loop is not None and self._thread is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)

    async def _serve(self) -> None:
        app = web.Application()
        app.router.add_post("/v1/messages", self._messages)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]

    # -- scripting --------------------------------------------------------------------------

    def queue(self, *actions: Action) -> None:
        with self._lock:
            self._queue.extend(actions)

    def of_kind(self, kind: str) -> list[Seen]:
        return [s for s in self.requests if s.kind == kind]

    @property
    def max_in_flight(self) -> int:
        return max((s.in_flight for s in self.requests), default=0)

    def _next(self, seen: Seen) -> Action:
        with self._lock:
            for i, action in enumerate(self._queue):
                if action.matches(seen):
                    return self._queue.pop(i)
        return self.script(seen)

    # -- the API ----------------------------------------------------------------------------

    async def _messages(self, request: web.Request) -> web.Response:
        body = await request.json()
        loop = asyncio.get_running_loop()
        with self._lock:
            self._in_flight += 1
            seen = Seen(
                {k.lower(): v for k, v in request.headers.items()}, body, self._in_flight, loop.time()
            )
            self.requests.append(seen)
        try:
            action = self._next(seen)
            while action.kind == "delay":
                await asyncio.sleep(action.payload["seconds"])
                action = action.payload["then"] or self.script(seen)
            return self._answer(seen, action)
        finally:
            with self._lock:
                self._in_flight -= 1

    def _answer(self, seen: Seen, action: Action) -> web.Response:
        if action.kind == "garbled":
            return web.Response(text=action.payload["body"], content_type="application/json")
        if action.kind == "status":
            code = action.payload["code"]
            headers = {"request-id": f"req_{next(self._ids)}"}
            if action.payload["retry_after"] is not None:
                headers["retry-after"] = f"{action.payload['retry_after']:g}"
            error = {
                "type": _ERROR_TYPES.get(code, "api_error"),
                "message": action.payload["message"] or f"scripted {code}",
            }
            return web.json_response({"type": "error", "error": error}, status=code, headers=headers)
        if action.kind == "text":
            content: list[dict[str, Any]] = [{"type": "text", "text": action.payload["text"]}]
            stop = "end_turn"
        else:
            content = [
                {
                    "type": "tool_use",
                    "id": f"toolu_{next(self._ids):06d}",
                    "name": "record_verdict",
                    "input": action.payload["input"],
                }
            ]
            stop = "tool_use"
        usage = self._usage(seen.body, content)
        return web.json_response(
            {
                "id": f"msg_{next(self._ids):06d}",
                "type": "message",
                "role": "assistant",
                "model": seen.body.get("model"),
                "content": content,
                "stop_reason": stop,
                "stop_sequence": None,
                "usage": usage,
            }
        )

    def _usage(self, body: dict[str, Any], content: list[dict[str, Any]]) -> dict[str, int]:
        segments: list[tuple[str, bool]] = [
            (json.dumps(t, sort_keys=True), "cache_control" in t) for t in body.get("tools", [])
        ]
        system = body.get("system", [])
        if isinstance(system, str):
            segments.append((system, False))
        else:
            segments += [(b.get("text", ""), "cache_control" in b) for b in system]
        for message in body.get("messages", []):
            blocks = message["content"]
            if isinstance(blocks, str):
                segments.append((blocks, False))
            else:
                segments += [
                    (b.get("text", json.dumps(b, sort_keys=True)), "cache_control" in b) for b in blocks
                ]
        total = 0
        digest = hashlib.sha256(str(body.get("model")).encode())
        breakpoints: list[tuple[str, int]] = []
        for seg, is_breakpoint in segments:
            digest.update(seg.encode())
            total += tokens(seg)
            if is_breakpoint and total >= self.min_cache_tokens:
                breakpoints.append((digest.copy().hexdigest(), total))
        read = write = 0
        with self._lock:
            hit = [n for h, n in breakpoints if h in self._cache]
            read = max(hit, default=0)
            if breakpoints and breakpoints[-1][1] > read:
                write = breakpoints[-1][1] - read
            self._cache.update(h for h, _ in breakpoints)
        out = sum(tokens(json.dumps(c.get("input", c.get("text", "")))) for c in content) + 10
        return {
            "input_tokens": total - read - write,
            "output_tokens": out,
            "cache_creation_input_tokens": write,
            "cache_read_input_tokens": read,
        }
