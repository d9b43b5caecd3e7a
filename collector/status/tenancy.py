"""Whose sessions a status request may read: the tenant of its bearer token.

The auth middleware puts the token's tenant on the request (``receiver.auth.TENANT``; none
without auth: the default tenant ``""``).  A tenant's token reads only its own tenant's
sessions, whatever the request names; an operator's token (``tenant: "*"``) reads the
tenant that ``?tenant=`` names.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any
from urllib.parse import quote, urlencode

from aiohttp import web

from collector.receiver import auth as listener_auth
from collector.receiver.config import ALL_TENANTS
from collector.status.view import SessionQuery, StatusView


def _token_tenant(request: web.Request) -> str:
    return str(request.get(listener_auth.TENANT, ""))


def detail_tenant(request: web.Request) -> str:
    """The tenant of the session ``/v1/sessions/{id}`` (or its page) reads: the token's; for
    an operator's token, ``?tenant=`` (the default tenant without it)."""
    tenant = _token_tenant(request)
    return request.query.get("tenant", "") if tenant == ALL_TENANTS else tenant


def listing_tenant(request: web.Request, asked: str | None) -> str | None:
    """The tenant an overview is held to: the token's; for an operator's token the one
    ``asked`` (None: every tenant's)."""
    tenant = _token_tenant(request)
    return asked if tenant == ALL_TENANTS else tenant


def held(request: web.Request, query: SessionQuery) -> SessionQuery | None:
    """``query`` held to the token's tenant; None when it names another tenant than a
    tenant's token may read (its answer is an empty page, as for a tenant with no sessions)."""
    tenant = _token_tenant(request)
    if tenant == ALL_TENANTS:
        return query
    if query.tenant is not None and query.tenant != tenant:
        return None
    return replace(query, tenant=tenant)


def open_rows(view: StatusView, query: SessionQuery) -> list[dict[str, Any]]:
    """The open sessions a ``held`` query may read (``query.limit`` of them, soonest to
    close first), each with ``detail``, the path of its ``GET /v1/sessions/{id}``."""
    rows = view.open_sessions(query.tenant)[: query.limit]
    for row in rows:
        row["detail"] = session_path(row["session_id"], row["tenant"])
    return rows


def session_path(session_id: str, tenant: str) -> str:
    path = f"/v1/sessions/{quote(session_id, safe='')}"
    return f"{path}?{urlencode({'tenant': tenant})}" if tenant else path
