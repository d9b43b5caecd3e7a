"""A refused or invalid request leaves no reference cycle behind: serve's collection policy
(``collector.gcpolicy``) leaves cyclic garbage to the full collection, so a cycle a refusal
made (its error, the error's frames, the call's state, the request when read) would pile up
at the rate requests are refused."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from aiohttp import web

from collector.component import Retryable
from collector.otlp.received import Received
from collector.receiver import grpc as grpc_receiver
from collector.receiver import http as http_receiver
from collector.receiver.config import GrpcListener, HttpListener

REQUESTS = 40
VALID = b"\x0a\x00" * 100  # 100 empty ResourceSpans
GARBLED = b"\xff\xff\xff\xffnot protobuf" * 50

# Sends REQUESTS requests over one connection (one channel, one keep-alive HTTP connection).
_CLIENT = r"""
import http.client, sys
import grpc
transport, port, count, body = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), bytes.fromhex(sys.argv[4])
if transport == "grpc":
    export = grpc.insecure_channel(f"127.0.0.1:{port}").unary_unary(
        "/opentelemetry.proto.collector.trace.v1.TraceService/Export",
        request_serializer=lambda b: b, response_deserializer=lambda b: b)
    for _ in range(count):
        try:
            export(body, timeout=10)
        except grpc.RpcError as err:
            print(err.code().name)
else:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    for _ in range(count):
        connection.request("POST", "/v1/traces", body, {"Content-Type": "application/x-protobuf"})
        reply = connection.getresponse()
        reply.read()
        print(reply.status)
"""


class _Refusing:
    """The chain's first stage, refusing every request it is handed (a full queue)."""

    async def consume(self, item: Received) -> None:
        raise Retryable("no room", retry_after=1.0, reason="backpressure")

    async def shutdown(self, timeout: float) -> None:
        return None


class _Taking:
    async def consume(self, item: Received) -> None:
        return None

    async def shutdown(self, timeout: float) -> None:
        return None


async def _refuse_all(tenant: str = "") -> None:
    raise Retryable("too many open sessions", retry_after=1.0, reason="backpressure")


async def _admit_all(tenant: str = "") -> None:
    return None


@contextlib.asynccontextmanager
async def _receivers(intake: Any, admit: Callable[[str], Any]) -> AsyncIterator[tuple[int, int]]:
    answers: list[tuple[str, str, str]] = []
    server, grpc_port = await grpc_receiver.start(
        GrpcListener(endpoint="127.0.0.1:0"), intake, lambda *a: answers.append(a), admit=admit
    )
    runner = web.AppRunner(
        http_receiver.app(
            HttpListener(endpoint="127.0.0.1:0"), intake, lambda *a: answers.append(a), admit=admit
        )
    )
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    http_port = runner.addresses[0][1]
    try:
        yield grpc_port, http_port
    finally:
        await server.stop(None)
        await runner.cleanup()


async def _garbage_of(transport: str, port: int, body: bytes) -> tuple[list[object], list[str]]:
    """The cyclic garbage the receiver's process made while answering REQUESTS requests, and
    the client's answers.  Collections are off meanwhile; the client is another process."""

    async def send(count: int) -> list[str]:
        client = await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            _CLIENT,
            transport,
            str(port),
            str(count),
            body.hex(),
            stdout=subprocess.PIPE,
        )
        out, _ = await client.communicate()
        return out.decode().split()

    await send(2)  # the first calls make what later ones reuse (gRPC's per-method state)
    gc.collect()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        answers = await send(REQUESTS)
        await asyncio.sleep(0.1)  # the server's last callbacks
        gc.collect()
        garbage = list(gc.garbage)
    finally:
        gc.garbage.clear()
        gc.set_debug(0)
        gc.enable()
    return garbage, answers


def _ours(garbage: list[object]) -> list[str]:
    """What a refusal's cycle held: frames, tracebacks, exceptions, requests."""
    kinds = (type(sys._getframe()), BaseException, Received)
    names = {"traceback", "ExportTraceServiceRequest", "RPCState", "_ServicerContext", "Request"}
    return sorted({type(o).__name__ for o in garbage if isinstance(o, kinds) or type(o).__name__ in names})


@pytest.mark.parametrize("transport", ["grpc", "http"])
@pytest.mark.parametrize(
    ("refused_at", "body", "answer"),
    [
        ("admission", VALID, {"grpc": "UNAVAILABLE", "http": "503"}),
        ("intake", VALID, {"grpc": "UNAVAILABLE", "http": "503"}),
        ("decode", GARBLED, {"grpc": "INVALID_ARGUMENT", "http": "400"}),
    ],
)
def test_a_refused_request_leaves_no_cycle(
    transport: str, refused_at: str, body: bytes, answer: dict[str, str]
) -> None:
    async def run() -> tuple[list[object], list[str]]:
        intake = _Refusing() if refused_at == "intake" else _Taking()
        admit = _refuse_all if refused_at == "admission" else _admit_all
        async with _receivers(intake, admit) as (grpc_port, http_port):
            return await _garbage_of(transport, grpc_port if transport == "grpc" else http_port, body)

    garbage, answers = asyncio.run(run())
    assert answers == [answer[transport]] * REQUESTS
    assert _ours(garbage) == []
    # What is left is the libraries' own: gRPC's method lookup leaves 5 small objects a call.
    assert len(garbage) <= 6 * REQUESTS
