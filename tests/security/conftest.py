from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from fake_anthropic import FakeAnthropic
from tls_certs import Pki, make_pki

sys.path.insert(0, str(Path(__file__).parent.parent / "export"))  # downstream.py: a test OTLP receiver


@pytest.fixture(scope="session")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(Path(tmp_path_factory.mktemp("pki")))


@pytest.fixture(scope="module")
def fake_judge() -> Iterator[FakeAnthropic]:
    judge = FakeAnthropic().start()
    yield judge
    judge.stop()
