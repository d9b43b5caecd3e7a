"""The receivers' own event loop, on a thread of its own.

Acknowledging an Export takes little Python time (decode, check, wait for the spool commit),
but on the loop that also assembles, detects and records sessions it waits for its turn
between their slices and callbacks: at half load that put p99 above 100 ms against ~25 ms on
an idle server.  On their own loop, receivers only wait for the GIL, which the interpreter
hands over within its switch interval (``serve`` shortens it).  What a receiver takes in
reaches the main loop through ``Pipeline.consume``, which hands it over thread-safely.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


class ReceiverLoop:
    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name="skillgauge-receivers", daemon=True)

    def start(self) -> None:
        self._thread.start()

    async def call(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` on the receivers' loop; return (or raise) what it does."""
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, self.loop))

    async def stop(self, timeout: float = 10.0) -> None:
        if self._thread.is_alive():
            self.loop.call_soon_threadsafe(self.loop.stop)
            await asyncio.to_thread(self._thread.join, timeout)

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        try:
            self.loop.run_forever()
        finally:
            pending = asyncio.all_tasks(self.loop)
            for task in pending:
                task.cancel()
            self.loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            self.loop.run_until_complete(self.loop.shutdown_asyncgens())
            self.loop.close()
