"""OTLP/gRPC receiver: TraceService/Export and LogsService/Export.

Requests arrive as raw bytes and are parsed here, so a body that is not valid protobuf
gets OTLP's INVALID_ARGUMENT instead of gRPC's generic INTERNAL.  gRPC enforces the size
limit itself (``grpc.max_receive_message_length`` applies after decompression and answers
RESOURCE_EXHAUSTED without RetryInfo) and handles gzip.

Export is served as a client-streaming method (the wire is the same as a unary call's), so
that the wait for the request's message is ours: a call whose message does not arrive
within ``read_timeout`` is answered DEADLINE_EXCEEDED, and its stream and what it buffered
are freed.  The connection limits (``max_connections``, ``handshake_timeout``,
``max_concurrent_streams``, keepalive) are gRPC core's own, set as server options
(``server_options``): a connection beyond ``max_connections`` is closed by gRPC core as soon
as it is accepted, before anything is read from it.
"""

from __future__ import annotations

import asyncio
import errno
import socket

import grpc
from google.protobuf.message import Message
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceResponse
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

from collector.otlp.received import Received
from collector.receiver import auth as listener_auth
from collector.receiver import decode, not_found
from collector.receiver.config import BearerAuth, GrpcListener, Listener
from collector.receiver.errors import ANSWERED, ReadTimeout, Unauthenticated, answer, sorted_error
from collector.receiver.responses import response_for
from collector.receiver.types import Admit, Intake, OnAnswer, admits_all

SERVICES: dict[decode.Signal, str] = {
    "traces": "opentelemetry.proto.collector.trace.v1.TraceService",
    "logs": "opentelemetry.proto.collector.logs.v1.LogsService",
}

EMPTY_RESPONSES: dict[decode.Signal, type[Message]] = {
    "traces": ExportTraceServiceResponse,
    "logs": ExportLogsServiceResponse,
}


async def _message(context: grpc.aio.ServicerContext, timeout: float) -> bytes:
    """The call's one request message, read within ``timeout``.  Read with ``context.read``:
    the request iterator kept each message referenced past the call (RSS grew by the bodies
    of calls long answered)."""
    try:
        async with asyncio.timeout(timeout):
            body = await context.read()
    except TimeoutError:
        raise ReadTimeout(f"request message not received within {timeout:g}s") from None
    return b"" if body is grpc.aio.EOF else bytes(body)  # no message: an empty request, as gRPC reads it


def _export(
    signal: decode.Signal, intake: Intake, on_answer: OnAnswer, admit: Admit, read_timeout: float
) -> grpc.RpcMethodHandler:
    async def export(_requests: object, context: grpc.aio.ServicerContext, tenant: str = "") -> Message:
        # ``tenant``: the bearer token's, passed by ``BearerInterceptor`` ("" without auth).
        try:
            sender = listener_auth.sender_tenant(tenant)
            await admit(sender)  # refuse under backpressure before paying for the read and the decode
            body = await _message(context, read_timeout)
            request = decode.decode(signal, body, "protobuf")
            item = Received(signal, request, "grpc", raw=body, tenant=sender)
            await intake.consume(item)
            result = item.outcome
        except ANSWERED as failure:
            return _refused(signal, failure, context, on_answer)
        on_answer(signal, "partial" if result.rejected else "ok", "")
        return response_for(signal, result)

    return grpc.stream_unary_rpc_method_handler(
        export, request_deserializer=None, response_serializer=lambda m: m.SerializeToString()
    )


def _refused(
    signal: decode.Signal, failure: Exception, context: grpc.aio.ServicerContext, on_answer: OnAnswer
) -> Message:
    """The call answered with ``failure``'s status, counted; the empty response returned is
    not sent (a call whose code is not OK sends none).

    Set on the context rather than raised with ``context.abort``: the exception ``abort``
    raises is kept by the call's state, which its traceback's frames hold, so every refused
    call left a reference cycle (its context, state and frames, and the request if read)
    that only the collector could free.  Answered from a frame of its own, so that no frame
    in ``failure``'s traceback holds ``failure``."""
    error = sorted_error(failure)
    on_answer(signal, "error", error.reason)
    reply = answer(error)
    context.set_code(reply.grpc_code)
    context.set_details(reply.message)
    context.set_trailing_metadata(reply.grpc_trailers())
    return EMPTY_RESPONSES[signal]()


def _ms(seconds: float | None) -> int:
    """A duration as gRPC core's milliseconds; None (never) as its largest."""
    return 2**31 - 1 if seconds is None else max(1, round(seconds * 1000))


def server_options(listener: Listener) -> list[tuple[str, int]]:
    """gRPC core's options for ``listener``: the size limit and, for a ``GrpcListener``, its
    connection limits, handshake timeout and keepalive (as the Collector's configgrpc)."""
    options = [
        ("grpc.max_receive_message_length", listener.max_request_bytes),
        ("grpc.so_reuseport", 0),  # a second process on the same port fails instead of sharing it
    ]
    if not isinstance(listener, GrpcListener):
        return options
    server = listener.keepalive.server_parameters
    policy = listener.keepalive.enforcement_policy
    return [
        *options,
        ("grpc.max_allowed_incoming_connections", listener.max_connections),
        # The handshake ends with the client's HTTP/2 SETTINGS: a connection that sends
        # nothing is closed at this deadline.
        ("grpc.server_handshake_timeout_ms", _ms(listener.handshake_timeout)),
        ("grpc.max_concurrent_streams", listener.max_concurrent_streams),
        ("grpc.max_connection_idle_ms", _ms(server.max_connection_idle)),
        ("grpc.max_connection_age_ms", _ms(server.max_connection_age)),
        ("grpc.max_connection_age_grace_ms", _ms(server.max_connection_age_grace)),
        ("grpc.keepalive_time_ms", _ms(server.time)),
        ("grpc.keepalive_timeout_ms", _ms(server.timeout)),
        ("grpc.http2.min_ping_interval_without_data_ms", _ms(policy.min_time)),
        ("grpc.keepalive_permit_without_calls", int(policy.permit_without_stream)),
        ("grpc.http2.max_ping_strikes", 2),
    ]


def _signal_of(method: str) -> str:
    service = method.strip("/").partition("/")[0]
    return next((signal for signal, name in SERVICES.items() if name == service), "unknown")


async def start(
    listener: Listener,
    intake: Intake,
    on_answer: OnAnswer,
    auth: BearerAuth | None = None,
    admit: Admit = admits_all,
) -> tuple[grpc.aio.Server, int]:
    """Start the server; returns it and the bound port (useful with port 0).

    With ``listener.tls`` the port speaks TLS (mutual TLS with ``client_ca_file``); with
    ``auth`` every call needs ``authorization: Bearer <token>`` metadata."""
    interceptors = []
    if auth is not None:
        interceptors.append(
            listener_auth.BearerInterceptor(
                listener_auth.Bearer(auth),
                lambda method: on_answer(_signal_of(method), "error", Unauthenticated.reason),
            )
        )
    server = grpc.aio.server(interceptors=interceptors, options=server_options(listener))
    read_timeout = listener.read_timeout if isinstance(listener, GrpcListener) else 30.0
    for signal, service in SERVICES.items():
        server.add_generic_rpc_handlers(
            (
                grpc.method_handlers_generic_handler(
                    service, {"Export": _export(signal, intake, on_answer, admit, read_timeout)}
                ),
            )
        )
    # Last: a method no service above claimed is counted and answered UNIMPLEMENTED.
    server.add_generic_rpc_handlers((not_found.GrpcFallback(not_found.NotFound("grpc", on_answer)),))
    try:
        if listener.tls is not None:
            port = server.add_secure_port(listener.endpoint, listener_auth.grpc_credentials(listener.tls))
        else:
            port = server.add_insecure_port(listener.endpoint)
    except (OSError, RuntimeError):  # grpc raises RuntimeError when it cannot bind
        port = 0
    if port == 0:
        raise OSError(
            f"receivers.otlp.grpc.endpoint: cannot listen on {listener.endpoint} - {_bind_fix(listener)}"
        )
    await server.start()
    return server, port


def _bind_fix(listener: Listener) -> str:
    """Why gRPC could not bind (it says only that it failed), found by binding a plain socket."""
    try:
        family = socket.AF_INET6 if ":" in listener.host else socket.AF_INET
        with socket.socket(family, socket.SOCK_STREAM) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind((listener.host, listener.port))
    except OSError as err:
        if err.errno == errno.EADDRINUSE:
            return f"another process listens on port {listener.port}: stop it, or choose another port"
        if err.errno in (errno.EADDRNOTAVAIL, errno.EACCES):
            return f"{err.strerror}: use an address of this host, e.g. 127.0.0.1 or 0.0.0.0, or a port above 1023"
        return f"{err.strerror or err}"
    return "check that the address belongs to this host and the port is free"
