"""What the store vouches for at start: a fresh directory, or a sound database; and what it
refuses, naming the file, with nothing changed."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from collector.state.vouch import StoreRefused, vouch


def _segment(data: Path) -> None:
    (data / "requests").mkdir(parents=True, exist_ok=True)
    (data / "requests" / "00000001.seg").write_bytes(b"acknowledged")


def test_a_fresh_or_empty_directory_is_a_fresh_start(tmp_path: Path) -> None:
    vouch(tmp_path)
    (tmp_path / "skillgauge.sqlite").write_bytes(b"")
    (tmp_path / "requests").mkdir()
    (tmp_path / "requests" / "00000001.seg").write_bytes(b"")  # a file that holds nothing
    vouch(tmp_path)


@pytest.mark.parametrize(
    ("make", "problem"),
    [
        (lambda db: db.write_bytes(b""), "is empty (0 bytes)"),
        (lambda db: None, "is missing"),
        (lambda db: db.mkdir(), "cannot be read"),
        (lambda db: sqlite3.connect(db).execute("CREATE TABLE other (x)").connection.close(), "has none of"),
    ],
    ids=["empty", "missing", "unreadable", "not-ours"],
)
def test_a_database_that_says_nothing_of_the_segments_beside_it_is_refused(
    tmp_path: Path, make: object, problem: str
) -> None:
    _segment(tmp_path)
    db = tmp_path / "skillgauge.sqlite"
    make(db)  # type: ignore[operator]
    with pytest.raises(StoreRefused) as refused:
        vouch(tmp_path)
    message = str(refused.value)
    assert f"the database {db} {problem}" in message
    assert "1 request segment file in" in message and "holds acknowledged requests" in message
    assert "skillgauge recover" in message
    assert (tmp_path / "requests" / "00000001.seg").read_bytes() == b"acknowledged"


def test_a_damaged_database_is_refused_even_with_no_segment(tmp_path: Path) -> None:
    db = tmp_path / "skillgauge.sqlite"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE t (x)")
        conn.executemany("INSERT INTO t VALUES (?)", [("x" * 500,)] * 200)
    conn.close()
    data = bytearray(db.read_bytes())
    data[4096:8192] = b"\xa5" * 4096  # a page scribbled over
    db.write_bytes(bytes(data))
    with pytest.raises(StoreRefused, match=r"is damaged"):
        vouch(tmp_path)
