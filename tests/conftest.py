from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from support import Server

from collector import compiled


def pytest_configure(config: pytest.Config) -> None:
    stale = compiled.stale()
    if stale:
        raise pytest.UsageError(
            f"{len(stale)} source files changed after they were compiled (first: {stale[0]}), so the "
            "tests would run the old code: rebuild with `pip install -e .`, or delete the compiled "
            "modules (`git clean -fX -- '*.so'`) to run the sources as they are"
        )


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    srv = Server(tmp_path)
    yield srv
    srv.stop()
