"""The room a store keeps for finishing what it acknowledged (``collector.state.reserve``):
held in a file from the start, let go when one of the writer's own writes fails for want of
room (those writes then go again at once), requests refused while it is out, and written
back by the probe of failing storage, after which requests are taken again.  A real full
disk is ``tests/durability/test_full_disk_exit.py``."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest

from collector.component import Retryable
from collector.state.facade import Store
from collector.state.reserve import NAME, RESERVE_BYTES, Reserve, reserve_for


def test_a_store_holds_its_reserve_from_the_start(tmp_path: Path) -> None:
    async def run() -> None:
        store = Store(tmp_path)
        await store.append("traces", b"r")
        await store.shutdown()

    asyncio.run(run())
    assert (tmp_path / NAME).stat().st_size == RESERVE_BYTES
    assert reserve_for(2 * 1024**2) == 128 * 1024 and reserve_for(1000) == 64 * 1024


def test_a_write_that_finds_no_room_releases_the_reserve_and_goes_again(tmp_path: Path) -> None:
    async def run() -> tuple[int, bool, bool]:
        store = Store(tmp_path)
        tries = 0

        def write(db: sqlite3.Connection) -> None:  # fails while the reserve is held
            nonlocal tries
            tries += 1
            if (tmp_path / NAME).exists():
                raise sqlite3.OperationalError("database or disk is full")

        store._writer.put(write)
        await store.transact(lambda db: None)  # committed after the write's first try
        refused = False
        try:
            await store.append("traces", b"r")
        except Retryable:
            refused = True
        # The probe of failing storage writes the reserve back: requests are taken again.
        for _ in range(200):
            if store.faults.unavailable is None and (tmp_path / NAME).exists():
                break
            await asyncio.sleep(0.05)
        taken = True
        try:
            await store.append("traces", b"again")
        except Retryable:
            taken = False
        await store.shutdown()
        return tries, refused, taken

    tries, refused, taken = asyncio.run(run())
    assert tries == 2  # once with the reserve held, once without, at once (not a second later)
    assert refused
    assert taken
    assert (tmp_path / NAME).stat().st_size == RESERVE_BYTES


def test_the_reserve_comes_back_only_with_room_for_it_twice_over(tmp_path: Path) -> None:
    reserve = Reserve(tmp_path, size=1024**5)  # more than any disk here has
    assert reserve.released
    with pytest.raises(OSError):
        reserve.restore()
    assert reserve.released and not (tmp_path / NAME).exists()
