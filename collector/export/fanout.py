"""Every finished session account to every exporter, in turn (the Collector's fan-out)."""

from __future__ import annotations

from collections.abc import Sequence

from collector.component import Consumer
from evaluators.result import Coverage


class Fanout:
    def __init__(self, exporters: Sequence[Consumer[Coverage]] = ()) -> None:
        self.exporters = list(exporters)

    async def consume(self, item: Coverage) -> None:
        """Returns once every exporter holds the account (durably, for a queued one)."""
        for exporter in self.exporters:
            await exporter.consume(item)

    async def shutdown(self, timeout: float) -> None:
        for exporter in self.exporters:
            await exporter.shutdown(timeout)
