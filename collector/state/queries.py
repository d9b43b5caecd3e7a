"""Reads of evaluated sessions from the store's tables: one revision's records (the status
API's detail), the session listing (``SessionQuery``) and the overview totals.

Each evaluated revision is one ``coverage`` row: its coverage line with every result
(``record``), and beside it what the listing filters and shows without parsing that line:
the close time, framework, tenant, whether it is its session's latest revision, a small
``summary`` (a ``SessionPage`` row) and one ``verdicts`` row per result.  ``index_revisions``
makes those from the record, in the writer's transaction.

The listing is keyset-paged over (closed_at, session, revision), newest first: a cursor names
the last row served, so rows stored meanwhile never shift a page.
"""

from __future__ import annotations

import sqlite3
import time
from typing import Any
from urllib.parse import quote

import orjson

from collector.db import sql
from collector.status.view import SessionPage, SessionQuery, decode_cursor, encode_cursor
from evaluators.evidence import LOAD_STATUSES

# What the overview sums, one column each (summing JSON fields parsed every row per query
# took seconds for a day of sessions).
TOTALS = (
    "expects",  # 1: the session expected a skill
    "missed",  # 1: it missed one
    "judge_cost",
    "judge_rows",
    "omission_judged",
    "omission_failed",
    *(f"loads_{status}" for status in LOAD_STATUSES),
)
EXPIRE = "DELETE FROM verdicts WHERE evaluated_at < ?"
_MARK_LATEST = (
    "UPDATE coverage SET latest = (revision = (SELECT MAX(revision) FROM coverage c "
    "WHERE c.session = coverage.session)) WHERE session IN ({in})"
)


def summarize(line: dict[str, Any], closed_at: float) -> dict[str, Any]:
    """A ``SessionPage`` row from a coverage line that holds its ``results``."""
    catalog = line.get("catalog") or {}
    expectations = line.get("expectations") or {}
    session_id = str(line.get("session_id", ""))
    tenant = str(line.get("tenant") or "")  # a coverage line names only a tenant other than ""
    return {
        "session_id": session_id,
        "revision": line.get("revision"),
        "closed_at": closed_at,
        "tenant": tenant,
        "framework": line.get("framework"),
        "close_reason": line.get("close_reason"),
        "spans": line.get("spans"),
        "catalog": {"state": catalog.get("state"), "skills": len(catalog.get("skills") or ())},
        "loads_by_status": line.get("loads_by_status") or {},
        "expectations": {
            "expected": list(expectations.get("expected") or ()),
            "missed": list(expectations.get("missed") or ()),
        },
        "judge_cost_usd": (line.get("judge") or {}).get("cost_usd", 0.0),
        "evaluations": [
            {
                "evaluation": str(r.get("evaluation") or ""),
                "status": str(r.get("status") or ""),
                "reason": str(r.get("reason") or ""),
                "skill": r.get("skill") if isinstance(r.get("skill"), str) else None,
                "passed": r.get("passed") if isinstance(r.get("passed"), bool) else None,
            }
            for r in line.get("results") or ()
            if isinstance(r, dict)
        ],
        "detail": detail_path(session_id, tenant),
    }


def detail_path(session_id: str, tenant: str = "") -> str:
    """``GET /v1/sessions/{id}`` of a session; a tenant's names it (``?tenant=``), which an
    operator's token needs and a tenant's own token may send."""
    path = f"/v1/sessions/{quote(session_id, safe='')}"
    return f"{path}?tenant={quote(tenant, safe='')}" if tenant else path


# (session, revision, record (a coverage line with its results), evaluated_at)
Indexed = tuple[str, int, str, float]


def index_revisions(db: sqlite3.Connection, revisions: list[Indexed], *, replace: bool = True) -> None:
    """Store evaluated revisions with what the listing reads: ``coverage`` rows (inserted, or
    with ``replace=False`` only their listing columns updated) and their ``verdicts``; each
    session's latest revision marked.  The close time is the line's ``closed_at`` (unix
    seconds), else ``evaluated_at``.  Runs inside the caller's transaction."""
    rows: list[tuple[Any, ...]] = []
    verdicts: list[tuple[Any, ...]] = []
    for session, revision, record, evaluated_at in revisions:
        line = orjson.loads(record)
        closed_at = line.get("closed_at")
        closed_at = float(closed_at) if isinstance(closed_at, int | float) else evaluated_at
        summary = summarize(line, closed_at)
        rows.append(
            (
                session,
                revision,
                record,
                evaluated_at,
                closed_at,
                summary["tenant"],
                line.get("framework"),
                orjson.dumps(summary).decode(),
                *_totals(summary, line),
            )
        )
        for v in summary["evaluations"]:
            passed = v["passed"]
            verdicts.append(
                (
                    session,
                    revision,
                    v["evaluation"],
                    v["status"],
                    v["reason"],
                    v["skill"],
                    None if passed is None else int(bool(passed)),
                    evaluated_at,
                )
            )
    if replace:
        sql.insert_rows(
            db,
            f"INSERT OR REPLACE INTO coverage (session, revision, record, evaluated_at, closed_at, tenant, "
            f"framework, summary, {', '.join(TOTALS)})",
            rows,
        )
    else:
        db.executemany(
            f"UPDATE coverage SET closed_at = ?, tenant = ?, framework = ?, summary = ?, "
            f"{', '.join(f'{t} = ?' for t in TOTALS)} "
            "WHERE session = ? AND revision = ?",
            [(*row[4:], row[0], row[1]) for row in rows],
        )
    _delete_revisions(db, "verdicts", [(r[0], r[1]) for r in rows])  # of a revision recorded again
    sql.insert_rows(db, "INSERT INTO verdicts", verdicts)
    sql.where_in(db, _MARK_LATEST, sorted({r[0] for r in rows}))


def forget_revisions(db: sqlite3.Connection, revisions: list[tuple[str, int]]) -> None:
    """Delete these (session, revision) pairs' coverage rows and verdicts, each found by its
    index (no scan of either table)."""
    _delete_revisions(db, "coverage", revisions)
    _delete_revisions(db, "verdicts", revisions)


def _delete_revisions(db: sqlite3.Connection, table: str, revisions: list[tuple[str, int]]) -> None:
    """Delete ``table``'s rows of these (session, revision) pairs, a chunk a statement.  The
    ``session IN`` lets SQLite search the table's (session, revision) index."""
    for start in range(0, len(revisions), sql.ROWS_PER_STATEMENT):
        chunk = revisions[start : start + sql.ROWS_PER_STATEMENT]
        db.execute(
            f"DELETE FROM {table} WHERE session IN ({', '.join('?' * len(chunk))}) "
            f"AND (session, revision) IN (VALUES {', '.join(['(?, ?)'] * len(chunk))})",
            [r[0] for r in chunk] + [v for r in chunk for v in r],
        )


def _totals(summary: dict[str, Any], line: dict[str, Any]) -> tuple[float, ...]:
    """``TOTALS`` of one revision, in order."""
    expectations = summary["expectations"]
    omission = [
        e for e in summary["evaluations"] if e["evaluation"] == "skill_omission" and e["status"] == "judged"
    ]
    judge = line.get("judge") or {}
    loads = summary["loads_by_status"]
    return (
        1.0 if expectations["expected"] else 0.0,
        1.0 if expectations["missed"] else 0.0,
        float(judge.get("cost_usd") or 0.0),
        float(judge.get("rows") or 0),
        float(len(omission)),
        float(sum(1 for e in omission if e["passed"] is False)),
        *(float(loads.get(status) or 0) if isinstance(loads, dict) else 0.0 for status in LOAD_STATUSES),
    )


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
