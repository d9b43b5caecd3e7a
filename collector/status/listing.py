"""Reads of evaluated sessions from the store's tables (``collector.state.index`` writes
them): one session's revisions (``GET /v1/sessions/{id}``), the session listing
(``SessionQuery``) and the overview totals.

The listing is keyset-paged over (closed_at, session, revision), newest first: a cursor names
the last row served, so rows stored meanwhile never shift a page.
"""

from __future__ import annotations

import time
from typing import Any

import orjson

from collector.db.schema import TOTALS
from collector.db.shared import Db
from collector.status.view import SessionPage, SessionQuery, decode_cursor, encode_cursor
from evaluators.evidence import LOAD_STATUSES


def revisions(db: Db, session: str, not_before: float) -> list[list[dict[str, Any]]]:
    """Each stored revision's records (its results, then ``{"coverage": line}``), oldest first."""
    out: list[list[dict[str, Any]]] = []
    for (record,) in db.rows(
        "SELECT record FROM coverage WHERE session = :session AND evaluated_at >= :not_before ORDER BY revision",
        {"session": session, "not_before": not_before},
    ):
        line = orjson.loads(record)
        results = line.pop("results", [])
        out.append([*results, {"coverage": line}])
    return out


def list_sessions(db: Db, query: SessionQuery, not_before: float) -> SessionPage:
    """``query``'s page: latest revisions evaluated at or after ``not_before``, newest first."""
    where = ["c.latest = 1", "c.evaluated_at >= :not_before", "c.summary IS NOT NULL"]
    args: dict[str, Any] = {"not_before": not_before, "limit": query.limit + 1}
    for condition, name, value in (
        ("c.closed_at >= :since", "since", query.since),
        ("c.closed_at < :until", "until", query.until),
        ("c.framework = :framework", "framework", query.framework),
        ("c.tenant = :tenant", "tenant", query.tenant),
    ):
        if value is not None:
            where.append(condition)
            args[name] = value
    if query.cursor is not None:
        where.append("(c.closed_at, c.session, c.revision) < (:c_closed_at, :c_session, :c_revision)")
        args["c_closed_at"], args["c_session"], args["c_revision"] = decode_cursor(query.cursor)
    verdict: list[str] = []
    if query.status is not None:
        names, statuses = db.in_("v_status", query.status.split(","))
        verdict.append(f"v.status IN {names}")
        args.update(statuses)
    for column, value in (
        ("evaluation", query.evaluation),
        ("reason", query.reason),
        ("skill", query.skill),
        ("passed", None if query.passed is None else int(query.passed)),
    ):
        if value is not None:
            verdict.append(f"v.{column} = :v_{column}")
            args[f"v_{column}"] = value
    if verdict:
        where.append(
            "EXISTS (SELECT 1 FROM verdicts v WHERE v.session = c.session AND v.revision = c.revision AND "
            + " AND ".join(verdict)
            + ")"
        )
    rows = db.rows(
        f"SELECT c.summary, c.closed_at, c.session, c.revision FROM coverage c WHERE {' AND '.join(where)} "
        "ORDER BY c.closed_at DESC, c.session DESC, c.revision DESC LIMIT :limit",
        args,
    )
    page = rows[: query.limit]
    next_cursor = None
    if len(rows) > query.limit:
        _, closed_at, session, revision = page[-1]
        next_cursor = encode_cursor(closed_at, session, revision)
    return SessionPage([orjson.loads(summary) for summary, _, _, _ in page], next_cursor)


def overview(db: Db, since: float, not_before: float, tenant: str | None = None) -> dict[str, Any]:
    """The ``StatusView.overview`` totals over revisions closed at or after ``since`` (of
    ``tenant``'s sessions, or every tenant's with None): sessions, loads and rates from each
    session's latest revision, judge spend from every revision (each was billed)."""
    since = max(since, not_before)
    where = "c.closed_at >= :since AND c.evaluated_at >= :not_before AND c.summary IS NOT NULL"
    args: dict[str, Any] = {"since": since, "not_before": not_before}
    if tenant is not None:
        where += " AND c.tenant = :tenant"
        args["tenant"] = tenant
    sums = ", ".join(f"COALESCE(SUM(c.{t}), 0)" for t in TOTALS)
    latest = db.rows(f"SELECT COUNT(*), {sums} FROM coverage c WHERE c.latest = 1 AND {where}", args)[0]
    spend, judge_rows = db.rows(
        f"SELECT COALESCE(SUM(c.judge_cost), 0), COALESCE(SUM(c.judge_rows), 0) FROM coverage c WHERE {where}",
        args,
    )[0]
    sessions, totals = int(latest[0]), dict(zip(TOTALS, latest[1:], strict=True))
    expects, missed = int(totals["expects"]), int(totals["missed"])
    judged, failed = int(totals["omission_judged"]), int(totals["omission_failed"])
    return {
        "since": since,
        "until": time.time(),
        "sessions": sessions,
        "loads_by_status": {status: int(totals[f"loads_{status}"]) for status in LOAD_STATUSES},
        "sessions_with_expectations": expects,
        "sessions_missing_expected": missed,
        "skipped_skill_rate": missed / expects if expects else None,
        "omission_verdicts": judged,
        "omission_rate": failed / judged if judged else None,
        "judge_cost_usd": round(float(spend), 8),
        "judge_rows": int(judge_rows),
    }
