"""Who may talk to a listener: bearer tokens and TLS, shared by both receivers and the status API.

Pure decisions (``Bearer.allows``) plus the two transport adapters: a gRPC server
interceptor and an aiohttp middleware.  A refusal never echoes what the client sent.
"""

from __future__ import annotations

import hmac
import ssl
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import grpc
from aiohttp import web

from collector.receiver.config import BearerAuth, Tls

CHALLENGE = 'Bearer realm="skillgauge"'
MESSAGE = "missing or invalid bearer token: send the header 'Authorization: Bearer <token>'"


class Bearer:
    """Checks an ``Authorization`` header value against the configured tokens."""

    def __init__(self, auth: BearerAuth) -> None:
        self._tokens = auth.tokens

    def allows(self, header: str | None) -> bool:
        if not header:
            return False
        scheme, _, credentials = header.strip().partition(" ")
        if scheme.lower() != "bearer":
            return False
        offered = credentials.strip().encode("utf-8", "replace")
        # Compare with every token, in constant time each, and without stopping at a match.
        matched = False
        for token in self._tokens:
            matched |= hmac.compare_digest(offered, token)
        return matched


def server_context(tls: Tls) -> ssl.SSLContext:
    """An aiohttp server context; client certificates required when ``client_ca_file`` is set."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_3 if tls.min_version == "1.3" else ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(tls.cert_file, tls.key_file)
    if tls.client_ca_file is not None:
        context.load_verify_locations(cafile=tls.client_ca_file)
        context.verify_mode = ssl.CERT_REQUIRED
    return context


def grpc_credentials(tls: Tls) -> grpc.ServerCredentials:
    """gRPC server credentials; with ``client_ca_file``, the client must present a certificate."""
    ca = Path(tls.client_ca_file).read_bytes() if tls.client_ca_file is not None else None
    return grpc.ssl_server_credentials(
        [(Path(tls.key_file).read_bytes(), Path(tls.cert_file).read_bytes())],
        root_certificates=ca,
        require_client_auth=ca is not None,
    )


OnReject = Callable[[str], None]  # called with the gRPC method or HTTP path refused


class BearerInterceptor(grpc.aio.ServerInterceptor):  # type: ignore[misc]
    """Answers UNAUTHENTICATED before the handler (and before the body is decoded)."""

    def __init__(self, bearer: Bearer, on_reject: OnReject) -> None:
        self._bearer = bearer
        self._on_reject = on_reject

        async def deny(_request: Any, context: grpc.aio.ServicerContext) -> None:
            await context.abort(grpc.StatusCode.UNAUTHENTICATED, MESSAGE)

        self._deny = grpc.unary_unary_rpc_method_handler(deny)

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        metadata = handler_call_details.invocation_metadata or ()
        header = next((str(v) for k, v in metadata if k == "authorization"), None)
        if self._bearer.allows(header):
            return await continuation(handler_call_details)
        self._on_reject(str(handler_call_details.method))
        return self._deny


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
Refusal = Callable[[web.Request], web.Response]


def authorization(request: web.Request) -> str | None:
    return request.headers.get("Authorization")


def middleware(
    bearer: Bearer,
    refuse: Refusal,
    guarded: Callable[[str], bool] = lambda _path: True,
    credentials: Callable[[web.Request], str | None] = authorization,
) -> Any:
    """An aiohttp middleware: requests to ``guarded`` paths need the token; ``refuse`` answers.
    ``credentials`` finds the ``Authorization`` value a request offers (by default its header)."""

    @web.middleware
    async def check(request: web.Request, handler: Handler) -> web.StreamResponse:
        if guarded(request.path) and not bearer.allows(credentials(request)):
            response = refuse(request)
            response.headers["WWW-Authenticate"] = CHALLENGE
            return response
        return await handler(request)

    return check
