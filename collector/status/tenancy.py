"""Whose sessions a status request may read: the tenant of its bearer token.

The auth middleware puts the token's tenant on the request (``receiver.auth.TENANT``; none
without auth: the default tenant ``""``).  A tenant's token reads only its own tenant's
sessions, whatever the request names; an operator's token (``tenant: "*"``) reads the
tenant that ``?tenant=`` names.
"""

from __future__ import annotations

from aiohttp import web

from collector.receiver import auth as listener_auth
from collector.receiver.config import ALL_TENANTS


def _token_tenant(request: web.Request) -> str:
    return str(request.get(listener_auth.TENANT, ""))


def detail_tenant(request: web.Request) -> str:
    """The tenant of the session ``/v1/sessions/{id}`` (or its page) reads: the token's; for
    an operator's token, ``?tenant=`` (the default tenant without it)."""
    tenant = _token_tenant(request)
    return request.query.get("tenant", "") if tenant == ALL_TENANTS else tenant


def listing_tenant(request: web.Request, asked: str | None) -> str | None:
    """The tenant a listing or overview is held to: the token's; for an operator's token the
    one ``asked`` (None: every tenant's)."""
    tenant = _token_tenant(request)
    return asked if tenant == ALL_TENANTS else tenant
