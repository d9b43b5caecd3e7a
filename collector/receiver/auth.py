"""Who may talk to a listener: bearer tokens and TLS, shared by both receivers and the status API.

Pure decisions (``Bearer.tenant_of``) plus the two transport adapters: a gRPC server
interceptor and an aiohttp middleware, each handing the token's tenant to the handler (the
gRPC handler's ``tenant`` argument; ``request[TENANT]`` in aiohttp).  A refusal never
echoes what the client sent.
"""

from __future__ import annotations

import hmac
import ssl
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import grpc
from aiohttp import web

from collector.receiver.config import ALL_TENANTS, BearerAuth, Tls

CHALLENGE = 'Bearer realm="skillgauge"'
MESSAGE = "missing or invalid bearer token: send the header 'Authorization: Bearer <token>'"


TENANT = "skillgauge.tenant"  # where the aiohttp middleware puts the token's tenant


class Bearer:
    """Checks an ``Authorization`` header value against the configured tokens."""

    def __init__(self, auth: BearerAuth) -> None:
        self._tokens = auth.tokens_with_tenants

    def tenant_of(self, header: str | None) -> str | None:
        """The tenant of the token the header carries (``""`` default, ``"*"`` every
        tenant), or None when it carries no valid token."""
        if not header:
            return None
        scheme, _, credentials = header.strip().partition(" ")
        if scheme.lower() != "bearer":
            return None
        offered = credentials.strip().encode("utf-8", "replace")
        # Compare with every token, in constant time each, and without stopping at a match.
        found: str | None = None
        for token, tenant in self._tokens:
            if hmac.compare_digest(offered, token):
                found = tenant
        return found

    def allows(self, header: str | None) -> bool:
        return self.tenant_of(header) is not None


def sender_tenant(tenant: str) -> str:
    """The tenant a token's requests are in: its own; an operator token's (``"*"``) are in
    the default tenant ``""``."""
    return "" if tenant == ALL_TENANTS else tenant


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
    """Answers UNAUTHENTICATED before the handler (and before the body is read); calls a
    stream-unary handler that takes a ``tenant`` keyword with the token's tenant."""

    def __init__(self, bearer: Bearer, on_reject: OnReject) -> None:
        self._bearer = bearer
        self._on_reject = on_reject

        async def deny(_requests: Any, context: grpc.aio.ServicerContext) -> None:
            await context.abort(grpc.StatusCode.UNAUTHENTICATED, MESSAGE)

        self._deny = grpc.stream_unary_rpc_method_handler(deny)

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        metadata = handler_call_details.invocation_metadata or ()
        header = next((str(v) for k, v in metadata if k == "authorization"), None)
        tenant = self._bearer.tenant_of(header)
        if tenant is None:
            self._on_reject(str(handler_call_details.method))
            return self._deny
        handler = await continuation(handler_call_details)
        if handler is None or handler.stream_unary is None:
            return handler
        return _with_tenant(handler, tenant)


def _with_tenant(handler: grpc.RpcMethodHandler, tenant: str) -> grpc.RpcMethodHandler:
    inner = handler.stream_unary

    async def call(requests: Any, context: grpc.aio.ServicerContext) -> Any:
        return await inner(requests, context, tenant=tenant)

    return grpc.stream_unary_rpc_method_handler(
        call,
        request_deserializer=handler.request_deserializer,
        response_serializer=handler.response_serializer,
    )


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
    ``credentials`` finds the ``Authorization`` value a request offers (by default its header).
    A request let through carries its token's tenant in ``request[TENANT]``."""

    @web.middleware
    async def check(request: web.Request, handler: Handler) -> web.StreamResponse:
        if guarded(request.path):
            tenant = bearer.tenant_of(credentials(request))
            if tenant is None:
                response = refuse(request)
                response.headers["WWW-Authenticate"] = CHALLENGE
                return response
            request[TENANT] = tenant
        return await handler(request)

    return check
