"""The store's config section (``storage``)."""

from __future__ import annotations

from collector.configtypes import Bytes, Seconds, Strict


class Storage(Strict):
    path: str = "./skillgauge-data"  # ":memory:" turns durability off
    # Beyond this the receivers answer with backpressure until sessions close and the spool
    # is trimmed; raise it, or add replicas, if skillgauge_spool_bytes sits near it.
    max_bytes: Bytes = 4 * 1024**3
    checkpoint_interval: Seconds = 5.0  # how often spooled requests no session needs are deleted
    retention: Seconds = 7 * 86400.0  # evaluation results and coverage lines kept this long
