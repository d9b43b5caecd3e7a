"""How each evaluated revision is stored for the status queries: one ``coverage`` row holding
its coverage line with every result (``record``), and beside it what the listing filters and
shows without parsing that line (the close time, framework, tenant, whether it is its
session's latest revision, a small ``summary``, the overview's ``TOTALS``) and one
``verdicts`` row per result.  ``index_revisions`` writes them, in the writer's transaction;
``collector.status.listing`` reads them.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from operator import itemgetter
from typing import Any
from urllib.parse import quote

import orjson

from collector.db.schema import TOTALS
from collector.db.shared import ROWS_PER_STATEMENT, Db
from evaluators.evidence import LOAD_STATUSES

# What ``quote(text, safe="")`` leaves as it is (most session ids).
_UNRESERVED = re.compile(r"[A-Za-z0-9_.~-]*")
EXPIRE = "DELETE FROM verdicts WHERE evaluated_at < :cutoff"
# Only the rows whose mark changes are written (a new session's only revision keeps the
# column's default, 1): an UPDATE rewrites every row it matches, with its whole record.
_MARK_LATEST = (
    "UPDATE coverage SET latest = 1 - latest WHERE session IN {in} AND latest <> CASE WHEN revision = "
    "(SELECT MAX(revision) FROM coverage c WHERE c.session = coverage.session) THEN 1 ELSE 0 END"
)
_COVERAGE = (
    "session",
    "revision",
    "record",
    "evaluated_at",
    "closed_at",
    "tenant",
    "framework",
    "summary",
    *TOTALS,
)
_VERDICTS = ("session", "revision", "evaluation", "status", "reason", "skill", "passed", "evaluated_at")
_REPLACE = "ON CONFLICT (session, revision) DO UPDATE SET " + ", ".join(
    f"{column} = excluded.{column}" for column in _COVERAGE[2:]
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
    path = f"/v1/sessions/{session_id if _UNRESERVED.fullmatch(session_id) else quote(session_id, safe='')}"
    return f"{path}?tenant={quote(tenant, safe='')}" if tenant else path


# (session, revision, record (a coverage line with its results), evaluated_at)
Indexed = tuple[str, int, str, float]


def index_revisions(db: Db, revisions: list[Indexed], *, replace: bool = True) -> None:
    """Store evaluated revisions with what the listing reads: ``coverage`` rows (inserted, or
    with ``replace=False`` only their listing columns updated) and their ``verdicts``; each
    session's latest revision marked.  The close time is the line's ``closed_at`` (unix
    seconds), else ``evaluated_at``.  Runs inside the caller's transaction."""
    store(db, prepare(revisions), replace=replace)


# The ``coverage`` rows and the ``verdicts`` rows of some revisions, ready to insert.
Prepared = tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]


def prepare(revisions: list[Indexed], lines: list[dict[str, Any]] | None = None) -> Prepared:
    """The rows ``store`` writes for ``revisions`` (``ValueError`` for a line that is not JSON).
    ``lines``: each revision's coverage line with its ``results`` as the caller already has
    it (the recorder), so that no record is parsed again; else each is read from its text."""
    rows: list[tuple[Any, ...]] = []
    verdicts: list[tuple[Any, ...]] = []
    if lines is not None:
        for (session, revision, record, evaluated_at), line in zip(revisions, lines, strict=True):
            _recorded(session, revision, record, evaluated_at, line, rows, verdicts)
        return rows, verdicts
    for session, revision, record, evaluated_at in revisions:
        line = orjson.loads(record)
        summary = summarize(line, _closed_at(line, evaluated_at))
        rows.append(_coverage_row(session, revision, record, evaluated_at, summary, _totals(summary, line)))
        for v in summary["evaluations"]:
            verdicts.append(_verdict_row(session, revision, evaluated_at, *_VERDICT(v)))
    return rows, verdicts


def _closed_at(line: dict[str, Any], evaluated_at: float) -> float:
    """The line's ``closed_at`` (unix seconds), else ``evaluated_at``."""
    closed_at = line.get("closed_at")
    return float(closed_at) if isinstance(closed_at, int | float) else evaluated_at


def _coverage_row(
    session: str,
    revision: int,
    record: str,
    evaluated_at: float,
    summary: dict[str, Any],
    totals: Iterable[float],
) -> tuple[Any, ...]:
    """A ``coverage`` row, in ``_COVERAGE``'s order (``totals``: ``TOTALS``' values)."""
    return (
        session,
        revision,
        record,
        evaluated_at,
        summary["closed_at"],
        summary["tenant"],
        summary["framework"],
        orjson.dumps(summary).decode(),
        *totals,
    )


def _verdict_row(
    session: str,
    revision: int,
    evaluated_at: float,
    evaluation: str,
    status: str,
    reason: str,
    skill: str | None,
    passed: bool | None,
) -> tuple[Any, ...]:
    """A ``verdicts`` row, in ``_VERDICTS``' order."""
    return (
        session,
        revision,
        evaluation,
        status,
        reason,
        skill,
        None if passed is None else int(passed),
        evaluated_at,
    )


# What the listing reads of each result, in ``summarize``'s order.
_VERDICT = itemgetter("evaluation", "status", "reason", "skill", "passed")
_OMISSION_JUDGED = ("skill_omission", "judged")


def _recorded(
    session: str,
    revision: int,
    record: str,
    evaluated_at: float,
    line: dict[str, Any],
    rows: list[tuple[Any, ...]],
    verdicts: list[tuple[Any, ...]],
) -> None:
    """``prepare``'s rows of one revision from the coverage line the recorder made
    (``Coverage.to_dict`` with ``closed_at`` and its results' ``to_dict``): every key
    present, every value of its type, so read directly; the same rows ``summarize`` and
    ``_totals`` make of its text (``tests/state/test_index.py``)."""
    evaluations = []
    judged = failed = 0
    for result in line["results"]:
        evaluation, status, reason, skill, passed = _VERDICT(result)
        evaluations.append(
            {"evaluation": evaluation, "status": status, "reason": reason, "skill": skill, "passed": passed}
        )
        verdicts.append(
            _verdict_row(session, revision, evaluated_at, evaluation, status, reason, skill, passed)
        )
        if (evaluation, status) == _OMISSION_JUDGED:
            judged += 1
            failed += passed is False
    expectations = line["expectations"]
    expected, missed = expectations["expected"], expectations["missed"]
    judge = line["judge"]
    loads = line["loads_by_status"]
    session_id = line["session_id"]
    tenant = line.get("tenant") or ""
    summary = {
        "session_id": session_id,
        "revision": line["revision"],
        "closed_at": _closed_at(line, evaluated_at),
        "tenant": tenant,
        "framework": line["framework"],
        "close_reason": line["close_reason"],
        "spans": line["spans"],
        "catalog": {"state": line["catalog"]["state"], "skills": len(line["catalog"]["skills"])},
        "loads_by_status": loads,
        "expectations": {"expected": list(expected), "missed": list(missed)},
        "judge_cost_usd": judge["cost_usd"],
        "evaluations": evaluations,
        "detail": detail_path(session_id, tenant),
    }
    totals = (
        1.0 if expected else 0.0,
        1.0 if missed else 0.0,
        float(judge["cost_usd"] or 0.0),
        float(judge["rows"] or 0),
        float(judged),
        float(failed),
        *[float(loads[status]) for status in LOAD_STATUSES],
    )
    rows.append(_coverage_row(session, revision, record, evaluated_at, summary, totals))


def store(db: Db, prepared: Prepared, *, replace: bool = True) -> int:
    """Write ``prepare``'s rows (see ``index_revisions``), in the caller's transaction; returns
    how many of their revisions were not stored before.  What is already stored of their
    sessions is read first: a revision recorded again has its verdicts replaced, and a
    session's rows are marked only when it has more than one (a new session's only revision
    keeps the column's default)."""
    rows, verdicts = prepared
    keys = [(r[0], r[1]) for r in rows]
    if replace:
        stored = stored_revisions(db, list(dict.fromkeys(s for s, _ in keys)))
        db.insert("coverage", _COVERAGE, rows, _REPLACE)
        again = [k for k in dict.fromkeys(keys) if k in stored]
        twice = {s for s, n in Counter(s for s, _ in keys).items() if n > 1}
        sessions = sorted({s for s, _ in stored} | twice)
    else:  # listing columns of stored rows: each may hold verdicts, each session may be unmarked
        db.executemany(
            "UPDATE coverage SET "
            + ", ".join(f"{column} = :{column}" for column in _COVERAGE[4:])
            + " WHERE session = :session AND revision = :revision",
            [dict(zip(_COVERAGE, row, strict=True)) for row in rows],
        )
        again = list(dict.fromkeys(keys))
        sessions = sorted({s for s, _ in keys})
    _delete_revisions(db, "verdicts", again)  # of a revision recorded again
    db.insert("verdicts", _VERDICTS, verdicts)
    for start in range(0, len(sessions), ROWS_PER_STATEMENT):
        names, params = db.in_("s", sessions[start : start + ROWS_PER_STATEMENT])
        db.execute(_MARK_LATEST.replace("{in}", names), params)
    return len(set(keys)) - len(again)


def stored_revisions(db: Db, sessions: list[str]) -> set[tuple[str, int]]:
    """Every (session, revision) the ``coverage`` table holds of ``sessions`` (found by its
    primary key), a chunk a statement."""
    found: set[tuple[str, int]] = set()
    for start in range(0, len(sessions), ROWS_PER_STATEMENT):
        names, params = db.in_("s", sessions[start : start + ROWS_PER_STATEMENT])
        found.update(
            (str(s), int(r))
            for s, r in db.rows(f"SELECT session, revision FROM coverage WHERE session IN {names}", params)
        )
    return found


def forget_revisions(db: Db, revisions: list[tuple[str, int]]) -> None:
    """Delete these (session, revision) pairs' coverage rows and verdicts, each found by its
    index (no scan of either table)."""
    _delete_revisions(db, "coverage", revisions)
    _delete_revisions(db, "verdicts", revisions)


def _delete_revisions(db: Db, table: str, revisions: list[tuple[str, int]]) -> None:
    """Delete ``table``'s rows of these (session, revision) pairs, a chunk a statement.  The
    ``session IN`` lets SQLite search the table's (session, revision) index."""
    for start in range(0, len(revisions), ROWS_PER_STATEMENT):
        chunk = revisions[start : start + ROWS_PER_STATEMENT]
        names, params = db.in_("s", [r[0] for r in chunk])
        pairs = [f"(:p{i}, :q{i})" for i in range(len(chunk))]
        for i, (session, revision) in enumerate(chunk):
            params[f"p{i}"], params[f"q{i}"] = session, revision
        # SQLite reads a list of row values from VALUES; PostgreSQL types a list of rows.
        listed = f"(VALUES {', '.join(pairs)})" if db.dialect == "sqlite" else f"({', '.join(pairs)})"
        db.execute(
            f"DELETE FROM {table} WHERE session IN {names} AND (session, revision) IN {listed}", params
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
