"""Reads of evaluated sessions from the store's tables (``collector.state.index`` writes
them): one session's revisions (``GET /v1/sessions/{id}``), the session listing
(``SessionQuery``) and the overview totals.

The listing is keyset-paged over (closed_at, session, revision), newest first: a cursor names
the last row served, so rows stored meanwhile never shift a page.
"""

from __future__ import annotations

import sqlite3
import time
from typing import Any

import orjson

from collector.db.schema import TOTALS
from collector.status.view import SessionPage, SessionQuery, decode_cursor, encode_cursor
from evaluators.evidence import LOAD_STATUSES


def revisions(db: sqlite3.Connection, session: str, not_before: float) -> list[list[dict[str, Any]]]:
    """Each stored revision's records (its results, then ``{"coverage": line}``), oldest first."""
    out: list[list[dict[str, Any]]] = []
    for (record,) in db.execute(
        "SELECT record FROM coverage WHERE session = ? AND evaluated_at >= ? ORDER BY revision",
        (session, not_before),
    ):
        line = orjson.loads(record)
        results = line.pop("results", [])
        out.append([*results, {"coverage": line}])
    return out


def list_sessions(db: sqlite3.Connection, query: SessionQuery, not_before: float) -> SessionPage:
    """``query``'s page: latest revisions evaluated at or after ``not_before``, newest first."""
    where = ["c.latest = 1", "c.evaluated_at >= ?", "c.summary IS NOT NULL"]
    args: list[Any] = [not_before]
    if query.since is not None:
        where.append("c.closed_at >= ?")
        args.append(query.since)
    if query.until is not None:
        where.append("c.closed_at < ?")
        args.append(query.until)
    if query.framework is not None:
        where.append("c.framework = ?")
        args.append(query.framework)
    if query.tenant is not None:
        where.append("c.tenant = ?")
        args.append(query.tenant)
    if query.cursor is not None:
        where.append("(c.closed_at, c.session, c.revision) < (?, ?, ?)")
        args.extend(decode_cursor(query.cursor))
    verdict: list[str] = []
    for column, value in (
        ("evaluation", query.evaluation),
        ("status", query.status),
        ("reason", query.reason),
        ("skill", query.skill),
        ("passed", None if query.passed is None else int(query.passed)),
    ):
        if value is not None:
            verdict.append(f"v.{column} = ?")
            args.append(value)
    if verdict:
        where.append(
            "EXISTS (SELECT 1 FROM verdicts v WHERE v.session = c.session AND v.revision = c.revision AND "
            + " AND ".join(verdict)
            + ")"
        )
    rows = db.execute(
        f"SELECT c.summary, c.closed_at, c.session, c.revision FROM coverage c WHERE {' AND '.join(where)} "
        "ORDER BY c.closed_at DESC, c.session DESC, c.revision DESC LIMIT ?",
        [*args, query.limit + 1],
    ).fetchall()
    page = rows[: query.limit]
    next_cursor = None
    if len(rows) > query.limit:
        _, closed_at, session, revision = page[-1]
        next_cursor = encode_cursor(closed_at, session, revision)
    return SessionPage([orjson.loads(summary) for summary, _, _, _ in page], next_cursor)


def overview(
    db: sqlite3.Connection, since: float, not_before: float, tenant: str | None = None
) -> dict[str, Any]:
    """The ``StatusView.overview`` totals over revisions closed at or after ``since`` (of
    ``tenant``'s sessions, or every tenant's with None): sessions, loads and rates from each
    session's latest revision, judge spend from every revision (each was billed)."""
    since = max(since, not_before)
    where = "c.closed_at >= ? AND c.evaluated_at >= ? AND c.summary IS NOT NULL"
    args: tuple[Any, ...] = (since, not_before)
    if tenant is not None:
        where += " AND c.tenant = ?"
        args = (*args, tenant)
    latest = db.execute(
        f"SELECT COUNT(*), {', '.join(f'TOTAL(c.{t})' for t in TOTALS)} FROM coverage c WHERE c.latest = 1 AND {where}",
        args,
    ).fetchone()
    spend, judge_rows = db.execute(
        f"SELECT TOTAL(c.judge_cost), TOTAL(c.judge_rows) FROM coverage c WHERE {where}", args
    ).fetchone()
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
