"""Closed sessions kept for reopening, and forgotten.

A session closed for a reason that lets it reopen whole (``idle_timeout``, ``end_attribute``)
is kept (``_keep``), so a late item reopens it as the next revision carrying the earlier
ones, and a re-sent item is known as taken.  With a store that keeps requests
(``rebuild_kept``), it is kept as what reopening needs: its revision, request ids and
traces (``_dormant``, as a restart finds it in the store), and a late item has it rebuilt
from its spooled requests first (``Restart.restore``); an eviction then frees a small
tuple, not an evidence graph.  In memory, its evidence, traces and item ids are kept
(``_recent``).  ``_recent`` and ``_dormant`` share ``sessions.reopen_cache``, dormant ones out
first; ``_recent`` is also held to ``reopen_cache_bytes``, the oldest out first.

``on_keep``/``on_forget`` (the store's reopenable rows) hear of a session as it is kept and
as it leaves; ``on_forget`` hears only of sessions ``on_keep`` (or a restart) told the store
about.  The store writes a kept revision's rows when a checkpoint would otherwise delete its
requests (``Spool.keep_reopenable``); a restart rebuilds from its closed rows a kept revision
whose reopenable row was not written (``collector.state.revisions.unwritten_kept``).
"""

from __future__ import annotations

from collector.sessions.held import Held, OpenSession, Recent
from collector.state.types import Reopenable


class Kept(Held):
    """Keeps closed sessions for reopening, within ``reopen_cache``, and forgets them."""

    def seed_revision(self, key: str, revision: int) -> None:
        """The next session under ``key`` gets ``revision + 1`` (restored after a restart)."""
        self._revisions[key] = max(self._revisions.get(key, 0), revision)

    def _keep(self, session: OpenSession, traces: tuple[str, ...]) -> None:
        """Keep a session just closed, for reopening whole; ``traces``: its traces' ids (hex),
        sorted."""
        key = session.key
        entry = Reopenable(
            key,
            session.revision,
            session.first_request,
            tuple(session.requests),
            traces,
            session.spans,
        )
        if self._on_keep is not None and self._config.reopen_cache:
            self._on_keep(entry)
            self._announced.add(key)
        if self.rebuild_kept:
            dormant = self._dormant
            if key in dormant:
                self._drop_dormant(key)
            dormant[key] = entry
            self._dormant_ids[key] = session.traces
            owners = self._dormant_traces
            for trace_id in session.traces:
                owners[trace_id] = key
        else:
            self._recent[key] = Recent(
                session.evidence,
                session.revision,
                session.first_request,
                session.traces,
                session.spans,
                session.ids,
                session.requests,
                session.bytes + session.carried,
            )
            self.recent_bytes += session.bytes + session.carried
            for trace_id in session.traces:
                self._recent_owner[trace_id] = key
        if (
            len(self._recent) + len(self._dormant) > self._config.reopen_cache
            or self.recent_bytes > self._config.reopen_cache_bytes
        ):
            self._trim_reopenable()

    def _forget_rows(self, key: str) -> None:
        """``key`` is no longer reopenable: its store rows go, if the store was told of it."""
        if key in self._announced:
            self._announced.discard(key)
            if self._on_forget is not None:
                self._on_forget(key)

    def _trim_reopenable(self) -> None:
        """Hold ``_recent`` and ``_dormant`` together to ``reopen_cache``, dormant ones first,
        and ``_recent`` to ``reopen_cache_bytes``, the oldest out first."""
        dormant = self._dormant
        while dormant and len(self._recent) + len(dormant) > self._config.reopen_cache:
            key, _ = dormant.popitem(last=False)
            self._drop_traces(key)
            self._forget_rows(key)
            self.reopen_evicted += 1
        limit = self._config.reopen_cache_bytes
        while self._recent and (len(self._recent) > self._config.reopen_cache or self.recent_bytes > limit):
            key = next(iter(self._recent))
            self._forget_recent(key)
            self._forget(key)
            self.reopen_evicted += 1

    def _forget_recent(self, key: str) -> Recent | None:
        recent = self._recent.pop(key, None)
        if recent is not None:
            self.recent_bytes -= recent.bytes
            for trace_id in recent.traces:
                if self._recent_owner.get(trace_id) == key:
                    del self._recent_owner[trace_id]
        return recent

    def _forget(self, key: str) -> None:
        self._drop_dormant(key)
        self._forget_rows(key)

    def _drop_dormant(self, key: str) -> None:
        if self._dormant.pop(key, None) is not None:
            self._drop_traces(key)

    def _drop_traces(self, key: str) -> None:
        """The traces of ``key``'s dormant entry (just out of ``_dormant``) no longer lead to
        ``key``."""
        traces = self._dormant_traces
        for trace_id in self._dormant_ids.pop(key, ()):
            if traces.get(trace_id) == key:
                del traces[trace_id]
