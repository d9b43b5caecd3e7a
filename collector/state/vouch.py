"""Whether the data directory's database can be trusted with the request log beside it.

The database says which spooled requests still matter; the segment files under
``requests/`` hold their bytes.  A database that is missing, empty, unreadable, truncated or
scribbled over while segment files exist says nothing true about them: opened as if fresh,
it would replay none of them and then delete them as unneeded.  ``vouch`` refuses such a
directory before anything is opened for writing, naming the file and the two ways out:
``skillgauge recover`` (rebuild the database from what the segments hold) or moving the
directory aside.  Nothing is deleted here, ever.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

DATABASE = "skillgauge.sqlite"
REQUESTS = "requests"
# Tables a database of ours holds from its first start: without them it is not the request
# log's database.
_REQUIRED = ("spooled", "state")


class StoreRefused(RuntimeError):
    """The data directory's database cannot be vouched for; nothing was changed."""


def segment_files(directory: Path) -> list[Path]:
    """The request segment files holding bytes (empty ones hold nothing to lose)."""
    found = []
    for path in sorted((directory / REQUESTS).glob("*.seg")):
        try:
            if path.stat().st_size > 0:
                found.append(path)
        except OSError:
            continue
    return found


def vouch(directory: str | Path) -> None:
    """Raise ``StoreRefused`` unless ``directory``'s database is sound, or absent (or empty)
    with no segment file beside it (a fresh start)."""
    directory = Path(directory)
    path = directory / DATABASE
    segments = segment_files(directory)
    problem = _problem(path, bool(segments))
    if problem is None:
        return
    held = (
        f"; {len(segments)} request segment file{'s' if len(segments) != 1 else ''} in "
        f"{directory / REQUESTS} {'hold' if len(segments) != 1 else 'holds'} acknowledged requests"
        if segments
        else ""
    )
    raise StoreRefused(
        f"storage.path: refusing to start: the database {path} {problem}{held}. Nothing was "
        f"changed or deleted. Either run `skillgauge recover --config FILE` to move the database "
        f"aside and rebuild it from the request segments (sessions are evaluated again as they "
        f"are replayed), or move {directory} aside to start with an empty store"
    )


def _problem(path: Path, segments: bool) -> str | None:
    """What is wrong with the database at ``path`` (None: nothing that loses data)."""
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        return "is missing" if segments else None
    except OSError as err:
        return f"cannot be read ({err.strerror or err})"
    if size == 0:
        return "is empty (0 bytes)" if segments else None
    try:
        with open(path, "rb") as file:  # an unreadable file: SQLite would say less
            file.read(1)
        db = sqlite3.connect(f"file:{path}?mode=rw", uri=True)
    except (OSError, sqlite3.Error) as err:
        return f"cannot be read ({getattr(err, 'strerror', None) or err})"
    try:
        try:
            verdict = [str(row[0]) for row in db.execute("PRAGMA quick_check(5)")]
            tables = {
                str(row[0]) for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
            }
        except sqlite3.Error as err:
            return f"is damaged ({err})"
        if verdict != ["ok"]:
            return f"is damaged (truncated or overwritten: {'; '.join(verdict)})"
        missing = [name for name in _REQUIRED if name not in tables]
        if missing and segments:
            return f"has none of the request log's tables ({', '.join(missing)} missing)"
        return None
    finally:
        db.close()
