"""The store's config section (``storage``)."""

from __future__ import annotations

from urllib.parse import urlsplit

from pydantic import field_validator

from collector.configtypes import Bytes, Seconds, Strict

_EXAMPLE = "postgresql://skillgauge:PASSWORD@db.example:5432/skillgauge"


class Storage(Strict):
    path: str = "./skillgauge-data"  # ":memory:" turns durability off
    # Beyond this the receivers answer with backpressure until sessions close and the spool
    # is trimmed; raise it, or add replicas, if skillgauge_spool_bytes sits near it.
    max_bytes: Bytes = 4 * 1024**3
    # Acknowledge a request only once its bytes are fdatasynced (one sync for the requests
    # of an event-loop turn): a power cut loses no acknowledged request.  Off, a request is
    # acknowledged once written (kill -9 still loses nothing): a sender with one request in
    # flight saves a sync a request (~2 ms here, ~100 ms at p99 on a busy disk).
    sync: bool = True
    checkpoint_interval: Seconds = 5.0  # how often spooled requests no session needs are deleted
    retention: Seconds = 7 * 86400.0  # evaluation results and coverage lines kept this long
    # Where the shared tables live (closed revisions' verdicts and coverage, the judge queue,
    # the export outbox: what every replica reads).  None: the SQLite database in ``path``.
    shared: str | None = None
    # How long an export entry or a revision's judge work a replica took stays its own without
    # being renewed (a live replica renews every third of it): after a replica dies, what it
    # was sending or judging is taken over by another this much later.
    lease: Seconds = 30.0

    @field_validator("shared")
    @classmethod
    def _postgresql(cls, value: str | None) -> str | None:
        if not value:  # ``${env:VAR:-}`` left empty: the default
            return None
        parts = urlsplit(value)
        if parts.scheme not in ("postgresql", "postgres"):
            said = f"{parts.scheme}://" if parts.scheme else "no scheme"
            raise ValueError(
                f"{said} is not a PostgreSQL URL - write {_EXAMPLE} (or leave it out for SQLite)"
            )
        if not parts.hostname and "host=" not in parts.query:
            raise ValueError(f"the URL names no host - write {_EXAMPLE}")
        if not parts.path.strip("/"):
            raise ValueError(f"the URL names no database - write {_EXAMPLE}")
        try:
            _ = parts.port
        except ValueError:
            raise ValueError(f"the URL's port is not a number - write {_EXAMPLE}") from None
        return value
