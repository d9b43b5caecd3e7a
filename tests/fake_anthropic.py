"""A fake Anthropic Messages API on loopback, for the real ``anthropic`` clients (via base_url).

Three providers' routes (non-streaming), each checked as its platform would:

- Claude API: ``POST /v1/messages``.
- Bedrock runtime: ``POST /model/{modelId}/invoke``; the body is a Messages body without
  ``model`` and with ``anthropic_version: bedrock-2023-05-31``; the request must carry a
  SigV4 ``Authorization`` header for service ``bedrock`` in ``aws_region`` by ``access_key``.
- Vertex AI: ``POST /v1/projects/{project}/locations/{region}/publishers/anthropic/models/
  {model}:rawPredict``; no ``model`` in the body, ``anthropic_version: vertex-2023-10-16``, and a
  bearer token that ``POST /token`` issued.  ``/token`` is a Google OAuth token endpoint: it
  takes a service account's JWT assertion, checks its RS256 signature against the key that
  ``service_account()`` wrote, and answers with an access token.  So real google-auth does
  the whole exchange over loopback.

A request that fails a platform's check is answered as the platform would (403 / 401 / 400)
and recorded with ``rejected`` set.  So is a body the Messages API itself would refuse
(400 invalid_request_error on every route), by the rules ``api_problem`` applies per model,
written from Anthropic's model pages (not from the judge's own table): forced
``tool_choice`` (``tool`` / ``any``) on Claude Sonnet 5.5 and Opus 5.5; ``thinking``
``disabled`` or ``enabled`` on those two; ``between_tools`` anywhere but Sonnet 5.5 or at
effort ``xhigh`` / ``max``; structured outputs on a model without them (Sonnet 4, Opus 4.1);
an ``output_config.format`` schema outside the structured-output subset (not a
``json_schema`` of an object, an object without ``additionalProperties: false``, a numeric
or length constraint, an enum of objects).  It runs in its own thread and event loop, so the
same fake serves in-process async tests and ``skillgauge`` subprocesses.

Scripting: ``queue(*actions)`` answers the next requests in order (a matcher may restrict
an action to one evaluation kind or skill); after the queue, ``script(seen)`` decides,
and the default script gives a plausible verdict for each evaluator.  Actions:
``verdict(input)``, ``status(code, retry_after=...)``, ``delay(seconds, then)``,
``text(...)`` (prose, no verdict), ``stopped(stop_reason, text)`` (a reply cut short or a
refusal).  A verdict answers a structured-output request (``output_config.format``) as the
API does, with one text block holding the verdict as JSON, and a forced-tool request with a
``tool_use`` block.

Every request is recorded (headers, JSON body, in-flight count).  ``usage`` is realistic:
tokens are ~4 characters each, and the prompt-caching fields are computed from the
``cache_control`` breakpoints seen before (tools, then system, then messages): the longest
cached prefix is read, the rest up to the last breakpoint is written, the remainder is
plain input.  So caching is measurable.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import itertools
import json
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiohttp import web
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa

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
    route: str = "anthropic"  # anthropic | bedrock | vertex
    path: str = "/v1/messages"
    wire: dict[str, Any] = field(default_factory=dict)  # the body exactly as sent
    rejected: str = ""  # why the platform's check refused it (nothing was judged)

    @property
    def structured(self) -> bool:
        """The request asks for structured output (else for a forced verdict tool)."""
        return "format" in (self.body.get("output_config") or {})

    @property
    def schema(self) -> dict[str, Any]:
        if self.structured:
            return dict(self.body["output_config"]["format"].get("schema") or {})
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


def stopped(stop_reason: str, words: str = "", **match: str) -> Action:
    """A 200 reply that stopped with ``stop_reason`` (``refusal``, ``max_tokens``) after ``words``."""
    return Action("stopped", {"stop_reason": stop_reason, "text": words}, **match)


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


_SIGV4 = re.compile(
    r"^AWS4-HMAC-SHA256 Credential=(?P<key>[^/]+)/(?P<date>\d{8})/(?P<region>[a-z0-9-]+)/(?P<service>[a-z0-9-]+)"
    r"/aws4_request, SignedHeaders=(?P<signed>[a-z0-9;-]+), Signature=[0-9a-f]{64}$"
)
PLATFORM_VERSIONS = {"bedrock": "bedrock-2023-05-31", "vertex": "vertex-2023-10-16"}


# -- what the Messages API refuses, per model (Claude API name) ---------------------------
# From platform.claude.com/docs/en/models/sonnet-5-5/whats-new-sonnet-5-5 and
# .../opus-5-5/whats-new-opus-5-5 (forced tool use and thinking), and the structured
# outputs page (its JSON Schema subset; Claude Sonnet 4 and Opus 4.1 are not listed).
FORCED_TOOL_REJECTED = frozenset({"claude-sonnet-5-5", "claude-opus-5-5"})
THINKING_REJECTED = {
    "claude-sonnet-5-5": frozenset({"disabled", "enabled"}),
    "claude-opus-5-5": frozenset({"disabled", "enabled"}),
}
BETWEEN_TOOLS = frozenset({"claude-sonnet-5-5"})
# Adaptive thinking unless switched off: a verdict from these comes after a thinking block
# (empty, as at the default display "omitted") when the request leaves thinking on.
THINKS = frozenset(
    {"claude-opus-5-5", "claude-opus-5", "claude-sonnet-5-5", "claude-sonnet-5", "claude-haiku-5-5"}
)
NO_STRUCTURED_OUTPUTS = frozenset({"claude-sonnet-4", "claude-opus-4-1"})
EFFORTS = frozenset({"low", "medium", "high", "xhigh", "max"})
_UNSUPPORTED_KEYWORDS = frozenset(
    {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"}
    | {"minLength", "maxLength", "pattern", "maxItems", "uniqueItems", "minProperties", "maxProperties"}
)
_MODEL_ID = re.compile(
    r"^(?:[a-z]{2,6}\.)?(?:anthropic\.)?(?P<name>claude-[a-z0-9-]+?)(?:-\d{8})?(?:@\d{8})?(?:-v\d+(?::\d+)?)?$"
)


def api_name(model: str) -> str:
    """The Claude API name behind a Claude API, Bedrock (id, profile or ARN) or Vertex model id."""
    match = _MODEL_ID.match(model.rsplit("/", 1)[-1])
    return match.group("name") if match else model


def schema_problem(schema: Any, where: str = "schema") -> str:
    """Why ``schema`` is outside the structured-output JSON Schema subset, or ''."""
    if not isinstance(schema, dict):
        return f"{where}: not a schema object"
    bad = sorted(_UNSUPPORTED_KEYWORDS & schema.keys())
    if bad:
        return f"{where}: {', '.join(bad)} is not supported"
    types = schema.get("type")
    types = types if isinstance(types, list) else [types]
    if "enum" in schema and any(isinstance(v, dict | list) for v in schema["enum"]):
        return f"{where}.enum: only strings, numbers, booleans and null"
    if "object" in types:
        if schema.get("additionalProperties") is not False:
            return f"{where}: additionalProperties must be false"
        props = schema.get("properties") or {}
        for name, sub in props.items():
            problem = schema_problem(sub, f"{where}.properties.{name}")
            if problem:
                return problem
    if "array" in types and "items" in schema:
        return schema_problem(schema["items"], f"{where}.items")
    return ""


def api_problem(model: str, body: dict[str, Any]) -> str:
    """Why the Messages API would answer ``body`` for ``model`` with 400, or ''."""
    name = api_name(model)
    choice = (body.get("tool_choice") or {}).get("type")
    if choice in ("tool", "any") and name in FORCED_TOOL_REJECTED:
        return f"tool_choice: forced tool use ({choice!r}) is not supported for {name}; use 'auto' or 'none'"
    output = body.get("output_config") or {}
    effort = output.get("effort")
    if effort is not None and effort not in EFFORTS:
        return f"output_config.effort: {effort!r} is not one of {', '.join(sorted(EFFORTS))}"
    thinking = (body.get("thinking") or {}).get("type")
    if thinking in THINKING_REJECTED.get(name, ()):
        fix = "between_tools" if name in BETWEEN_TOOLS else "adaptive"
        return f'"thinking.type.{thinking}" is not supported for this model. Use "thinking.type.{fix}"'
    if thinking == "between_tools":
        if name not in BETWEEN_TOOLS:
            return f'"thinking.type.between_tools" is not supported for {name}'
        if effort in ("xhigh", "max"):
            return f"thinking.type.between_tools is not supported at effort {effort}"
    if "format" in output:
        if name in NO_STRUCTURED_OUTPUTS:
            return f"output_config.format: structured outputs are not supported for {name}"
        fmt = output["format"] or {}
        if fmt.get("type") != "json_schema" or not isinstance(fmt.get("schema"), dict):
            return "output_config.format: type must be json_schema with a schema"
        if fmt["schema"].get("type") != "object":
            return "output_config.format.schema: the root must be an object schema"
        return schema_problem(fmt["schema"], "output_config.format.schema")
    return ""


def _b64url(data: str) -> bytes:
    return base64.urlsafe_b64decode(data + "=" * (-len(data) % 4))


class FakeAnthropic:
    def __init__(
        self,
        min_cache_tokens: int = 0,
        aws_region: str = "eu-west-1",
        access_key: str = "AKIAFAKEFAKEFAKE0001",
    ) -> None:
        self.aws_region = aws_region
        self.access_key = access_key
        self.token_requests: list[dict[str, Any]] = []  # the JWT claims of each token exchange
        self._tokens: set[str] = set()
        self._key: rsa.RSAPrivateKey | None = None
        self._client_email = ""
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
        app.router.add_post("/model/{model}/invoke", self._bedrock)
        app.router.add_post(
            "/v1/projects/{project}/locations/{region}/publishers/anthropic/models/{model_action}",
            self._vertex,
        )
        app.router.add_post("/token", self._token)
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

    def of_route(self, route: str) -> list[Seen]:
        return [s for s in self.requests if s.route == route]

    # -- Google credentials ---------------------------------------------------------------------

    def service_account(self, path: Path, project: str = "fake-project") -> Path:
        """Write a service-account key file whose ``token_uri`` is this fake's ``/token``."""
        self._key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self._client_email = f"judge@{project}.iam.gserviceaccount.com"
        pem = self._key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        ).decode()
        info = {
            "type": "service_account",
            "project_id": project,
            "private_key_id": "fake-key-1",
            "private_key": pem,
            "client_email": self._client_email,
            "client_id": "1234567890",
            "token_uri": f"{self.base_url}/token",
        }
        path.write_text(json.dumps(info))
        return path

    def _assertion_problem(self, assertion: str) -> tuple[str, dict[str, Any]]:
        try:
            header_b64, claims_b64, signature_b64 = assertion.split(".")
            header, claims = json.loads(_b64url(header_b64)), json.loads(_b64url(claims_b64))
        except ValueError:
            return "the assertion is not a JWT", {}
        if self._key is None:
            return "no service account was issued", claims
        try:
            self._key.public_key().verify(
                _b64url(signature_b64),
                f"{header_b64}.{claims_b64}".encode(),
                padding.PKCS1v15(),
                hashes.SHA256(),
            )
        except Exception:
            return "bad signature", claims
        if header.get("alg") != "RS256" or claims.get("iss") != self._client_email:
            return "wrong algorithm or issuer", claims
        # google-auth addresses the assertion to Google's token endpoint whatever token_uri says
        audiences = {f"{self.base_url}/token", "https://oauth2.googleapis.com/token"}
        if claims.get("aud") not in audiences or not claims.get("exp", 0) > time.time():
            return "wrong audience or expired", claims
        if "cloud-platform" not in str(claims.get("scope", "")):
            return "no cloud-platform scope", claims
        return "", claims

    async def _token(self, request: web.Request) -> web.Response:
        form = await request.post()
        problem, claims = self._assertion_problem(str(form.get("assertion", "")))
        if form.get("grant_type") != "urn:ietf:params:oauth:grant-type:jwt-bearer":
            problem = problem or "unsupported grant_type"
        with self._lock:
            self.token_requests.append({**claims, "problem": problem})
        if problem:
            return web.json_response({"error": "invalid_grant", "error_description": problem}, status=400)
        token = f"ya29.fake-{next(self._ids)}"
        with self._lock:
            self._tokens.add(token)
        return web.json_response({"access_token": token, "expires_in": 3600, "token_type": "Bearer"})

    # -- the APIs ---------------------------------------------------------------------------

    def _bedrock_problem(self, headers: dict[str, str], body: dict[str, Any]) -> str:
        match = _SIGV4.match(headers.get("authorization", ""))
        if match is None or "x-amz-date" not in headers:
            return "no SigV4 Authorization header"
        if (match["service"], match["region"], match["key"]) != ("bedrock", self.aws_region, self.access_key):
            return f"signed for {match['service']} in {match['region']} by {match['key']}"
        if "host" not in match["signed"].split(";") or "x-amz-date" not in match["signed"].split(";"):
            return "host and x-amz-date are not signed"
        if "model" in body or body.get("anthropic_version") != PLATFORM_VERSIONS["bedrock"]:
            return f"body: model must be absent and anthropic_version {PLATFORM_VERSIONS['bedrock']}"
        return ""

    async def _bedrock(self, request: web.Request) -> web.Response:
        body = await request.json()
        headers = {k.lower(): v for k, v in request.headers.items()}
        model = request.match_info["model"]
        return await self._handle(request, body, "bedrock", model, self._bedrock_problem(headers, body))

    async def _vertex(self, request: web.Request) -> web.Response:
        body = await request.json()
        model, _, action = request.match_info["model_action"].partition(":")
        bearer = request.headers.get("authorization", "").removeprefix("Bearer ")
        problem = ""
        if bearer not in self._tokens:
            problem = "the bearer token was not issued by /token"
        elif action != "rawPredict":
            problem = f"unsupported method {action!r}"
        elif "model" in body or body.get("anthropic_version") != PLATFORM_VERSIONS["vertex"]:
            problem = f"body: model must be absent and anthropic_version {PLATFORM_VERSIONS['vertex']}"
        return await self._handle(request, body, "vertex", model, problem)

    async def _messages(self, request: web.Request) -> web.Response:
        body = await request.json()
        return await self._handle(request, body, "anthropic", str(body.get("model")), "")

    async def _handle(
        self, request: web.Request, wire: dict[str, Any], route: str, model: str, problem: str
    ) -> web.Response:
        body = {**wire, "model": model}
        loop = asyncio.get_running_loop()
        with self._lock:
            self._in_flight += 1
            seen = Seen(
                {k.lower(): v for k, v in request.headers.items()},
                body,
                self._in_flight,
                loop.time(),
                route=route,
                path=request.path,
                wire=wire,
                rejected=problem,
            )
            self.requests.append(seen)
        try:
            if problem:
                code = {"bedrock": 403, "vertex": 401}.get(route, 400)
                return self._error(route, code, problem)
            refused = api_problem(model, body)
            if refused:
                seen.rejected = refused
                return self._error(route, 400, refused)
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
            headers = {}
            if action.payload["retry_after"] is not None:
                headers["retry-after"] = f"{action.payload['retry_after']:g}"
            return self._error(seen.route, code, action.payload["message"] or f"scripted {code}", headers)
        if action.kind == "text":
            content: list[dict[str, Any]] = [{"type": "text", "text": action.payload["text"]}]
            stop = "end_turn"
        elif action.kind == "stopped":
            words = action.payload["text"]
            content = [{"type": "text", "text": words}] if words else []
            stop = action.payload["stop_reason"]
        elif seen.structured:
            content = [*self._thought(seen), {"type": "text", "text": json.dumps(action.payload["input"])}]
            stop = "end_turn"
        else:
            content = [
                *self._thought(seen),
                {
                    "type": "tool_use",
                    "id": f"toolu_{next(self._ids):06d}",
                    "name": "record_verdict",
                    "input": action.payload["input"],
                },
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

    def _thought(self, seen: Seen) -> list[dict[str, Any]]:
        """The thinking block a thinking model puts before its answer (empty: display omitted)."""
        thinking = (seen.body.get("thinking") or {}).get("type")
        if api_name(str(seen.body.get("model"))) not in THINKS or thinking in ("disabled", "between_tools"):
            return []
        return [{"type": "thinking", "thinking": "", "signature": f"sig{next(self._ids):06d}"}]

    def _error(
        self, route: str, code: int, message: str, headers: dict[str, str] | None = None
    ) -> web.Response:
        """An error as each platform shapes it."""
        headers = dict(headers or {})
        if route == "bedrock":
            kinds = {403: "AccessDeniedException", 429: "ThrottlingException", 400: "ValidationException"}
            headers["x-amzn-errortype"] = kinds.get(code, "InternalServerException")
            headers["x-amzn-requestid"] = f"fake-{next(self._ids)}"
            return web.json_response({"message": message}, status=code, headers=headers)
        if route == "vertex":
            statuses = {401: "UNAUTHENTICATED", 429: "RESOURCE_EXHAUSTED", 400: "INVALID_ARGUMENT"}
            error = {"code": code, "message": message, "status": statuses.get(code, "INTERNAL")}
            return web.json_response({"error": error}, status=code, headers=headers)
        headers["request-id"] = f"req_{next(self._ids)}"
        error = {"type": _ERROR_TYPES.get(code, "api_error"), "message": message}
        return web.json_response({"type": "error", "error": error}, status=code, headers=headers)

    def _usage(self, body: dict[str, Any], content: list[dict[str, Any]]) -> dict[str, int]:
        segments: list[tuple[str, bool]] = [
            (json.dumps(t, sort_keys=True), "cache_control" in t) for t in body.get("tools", [])
        ]
        if "format" in (body.get("output_config") or {}):  # the schema is part of the prompt
            segments.append((json.dumps(body["output_config"]["format"], sort_keys=True), False))
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
