"""OTLP/HTTP receiver: POST /v1/traces and /v1/logs, protobuf or JSON, optionally gzip.

Answers in the request's content type.  Errors carry a ``google.rpc.Status`` body; the
mapping from failure to status code lives in ``errors``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from aiohttp import web
from google.protobuf import json_format
from google.protobuf.message import Message

from collector.otlp import classes
from collector.otlp.received import Received
from collector.pausing import pause
from collector.receiver import auth as listener_auth
from collector.receiver import codings, decode, not_found
from collector.receiver.config import BearerAuth, HttpListener
from collector.receiver.errors import (
    ANSWERED,
    ReadTimeout,
    ReceiveError,
    TooLarge,
    Unauthenticated,
    answer,
    sorted_error,
)
from collector.receiver.responses import response_for
from collector.receiver.types import Admit, Intake, OnAnswer, admits_all

log = logging.getLogger("skillgauge")

_MEDIA = {"protobuf": "application/x-protobuf", "json": "application/json"}


def _encode(message: Message, encoding: decode.Encoding) -> bytes:
    if encoding == "json":
        return bytes(json_format.MessageToJson(message, indent=None).encode())
    return bytes(message.SerializeToString())


def _error_response(error: ReceiveError, encoding: decode.Encoding) -> web.Response:
    reply = answer(error)
    headers = {}
    if reply.retry_after is not None:
        headers["Retry-After"] = str(max(1, round(reply.retry_after)))
    return web.Response(
        status=reply.http_status,
        body=_encode(reply.status, encoding),
        content_type=_MEDIA[encoding],
        headers=headers,
    )


def make_handler(
    signal: decode.Signal, listener: HttpListener, intake: Intake, on_answer: OnAnswer, admit: Admit
) -> Callable[[web.Request], Awaitable[web.Response]]:
    limit = listener.max_request_bytes

    async def handle(request: web.Request) -> web.Response:
        encoding: decode.Encoding = "protobuf"
        try:
            encoding = decode.media_encoding(request.content_type)
            tenant = listener_auth.sender_tenant(request.get(listener_auth.TENANT, ""))
            await admit(tenant)  # refuse under backpressure before reading and decoding the body
            body = await _read_body(request, limit, listener.read_timeout)
            if encoding == "json":  # converted in slices: the event loop runs in between
                parsed = await _with_pauses(decode.parsing_json(decode.REQUEST_TYPES[signal], body))
                message = classes.received(parsed)  # as the chain reads it
            else:
                message = decode.decode(signal, body, encoding)
            raw = body if encoding == "protobuf" else None
            item = Received(signal, message, "http", raw=raw, tenant=tenant)
            await intake.consume(item)
            result = item.outcome
        except ANSWERED as failure:
            return _refused(signal, failure, encoding, on_answer)
        except ConnectionResetError:  # aiohttp's "Connection lost" while the body was read
            on_answer(signal, "error", "client_disconnected")
            log.info(
                "OTLP/HTTP %s: client %s disconnected before its request was read; nothing was kept",
                request.path,
                request.remote,
            )
            return web.Response(status=499)  # nobody is left to read it
        on_answer(signal, "partial" if result.rejected else "ok", "")
        return web.Response(
            body=_encode(response_for(signal, result), encoding), content_type=_MEDIA[encoding]
        )

    return handle


def _refused(
    signal: decode.Signal, failure: Exception, encoding: decode.Encoding, on_answer: OnAnswer
) -> web.Response:
    """The answer to a request refused with ``failure``, counted.  Made in a frame of its own,
    so that no frame in ``failure``'s traceback holds ``failure`` (the handler's frame would
    make a reference cycle of the error, its traceback and the request: garbage only the
    collector could free)."""
    error = sorted_error(failure)
    on_answer(signal, "error", error.reason)
    response = _error_response(error, encoding)
    if isinstance(error, ReadTimeout):
        response.force_close()  # a stalled client does not keep its connection
    return response


async def _with_pauses(steps: decode.Steps[Message]) -> Message:
    """What ``steps`` return, the event loop running at each of their pauses."""
    while True:
        try:
            next(steps)
        except StopIteration as done:
            return done.value
        await pause()


async def _read_body(request: web.Request, limit: int, timeout: float) -> bytes:
    try:
        async with asyncio.timeout(timeout):
            return await _read(request, limit)
    except TimeoutError:
        raise ReadTimeout(f"request body not received within {timeout:g}s") from None


async def _read(request: web.Request, limit: int) -> bytes:
    coding = codings.supported(request.headers.get("Content-Encoding", ""))  # before the body is read
    if request.content_length is not None and request.content_length > limit:
        raise TooLarge(f"request of {request.content_length} bytes exceeds the {limit}-byte limit")
    # The pieces as they arrived, joined once: growing one buffer copied a 1 MB body
    # several times over and touched fresh pages at each growth.
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.content.iter_any():
        chunks.append(chunk)
        size += len(chunk)
        if size > limit:
            raise TooLarge(f"request exceeds the {limit}-byte limit")
    body = chunks[0] if len(chunks) == 1 else b"".join(chunks)
    return codings.decompress(coding, body, limit)


_SIGNALS: dict[str, decode.Signal] = {"/v1/traces": "traces", "/v1/logs": "logs"}


def _unauthenticated(on_answer: OnAnswer) -> listener_auth.Refusal:
    def refuse(request: web.Request) -> web.Response:
        # Before the body is read; the answer is in the request's encoding when it names one.
        encoding: decode.Encoding = "json" if request.content_type == "application/json" else "protobuf"
        on_answer(_SIGNALS.get(request.path, "unknown"), "error", Unauthenticated.reason)
        return _error_response(Unauthenticated(listener_auth.MESSAGE), encoding)

    return refuse


def app(
    listener: HttpListener,
    intake: Intake,
    on_answer: OnAnswer,
    auth: BearerAuth | None = None,
    admit: Admit = admits_all,
) -> web.Application:
    """The OTLP/HTTP application; with ``auth``, every request needs the bearer token."""
    middlewares = []
    if auth is not None:
        middlewares.append(listener_auth.middleware(listener_auth.Bearer(auth), _unauthenticated(on_answer)))
    middlewares.append(not_found.http_middleware(not_found.NotFound("http", on_answer)))
    application = web.Application(client_max_size=listener.max_request_bytes + 1, middlewares=middlewares)
    application.router.add_post("/v1/traces", make_handler("traces", listener, intake, on_answer, admit))
    application.router.add_post("/v1/logs", make_handler("logs", listener, intake, on_answer, admit))
    return application
