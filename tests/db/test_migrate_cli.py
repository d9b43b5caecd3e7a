"""``skillgauge migrate``: the store's migrations applied and named, under the data directory's
lock; a directory a serve holds is refused (exit 2), as is one whose database is broken."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import psycopg
import yaml
from postgres import Postgres, postgres_server  # noqa: F401 - the module's own server

from collector.db import migrate
from collector.state.lock import DataDirLock


def _migrate(tmp_path: Path, **storage: str) -> subprocess.CompletedProcess[str]:
    config = tmp_path / "skillgauge.yaml"
    config.write_text(yaml.safe_dump({"storage": {"path": str(tmp_path / "data"), **storage}}))
    return subprocess.run(
        [sys.executable, "-m", "collector", "migrate", "--config", str(config)],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_migrate_brings_a_new_store_to_the_newest_revision(tmp_path: Path) -> None:
    done = _migrate(tmp_path)
    assert done.returncode == 0, done.stderr
    assert f"at schema revision {migrate.head()} (the newest)" in done.stdout
    assert (tmp_path / "data" / "skillgauge.sqlite").stat().st_size > 0


def test_migrate_waits_for_no_one_and_refuses_a_held_directory(tmp_path: Path) -> None:
    held = DataDirLock(tmp_path / "data").acquire()
    try:
        done = _migrate(tmp_path)
    finally:
        held.release()
    assert done.returncode == 2, done.stderr
    assert "in use by another skillgauge serve" in done.stderr
    assert not (tmp_path / "data" / "skillgauge.sqlite").exists()


def test_migrate_refuses_a_broken_database_beside_request_segments(tmp_path: Path) -> None:
    (tmp_path / "data" / "requests").mkdir(parents=True)
    (tmp_path / "data" / "requests" / "00000001.seg").write_bytes(b"held")
    (tmp_path / "data" / "skillgauge.sqlite").write_bytes(b"")
    done = _migrate(tmp_path)
    assert done.returncode == 1
    assert "skillgauge recover" in done.stderr
    assert (tmp_path / "data" / "skillgauge.sqlite").read_bytes() == b""


def test_migrate_brings_the_shared_postgresql_store_to_the_newest_revision(
    tmp_path: Path,
    postgres_server: Postgres,  # noqa: F811
) -> None:
    url = postgres_server.url()
    done = _migrate(tmp_path, shared=url)
    assert done.returncode == 0, done.stderr
    assert f"storage.shared {url}: at schema revision {migrate.head()} (the newest)" in done.stdout
    with psycopg.connect(url) as db:
        assert db.execute("SELECT version_num FROM alembic_version").fetchone() == (migrate.head(),)


def test_check_config_names_a_shared_url_that_is_not_postgresql(tmp_path: Path) -> None:
    config = tmp_path / "skillgauge.yaml"
    config.write_text("storage:\n  shared: mysql://user@db/skillgauge\n")
    done = subprocess.run(
        [sys.executable, "-m", "collector", "check-config", str(config)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2
    assert f"{config}:2: storage.shared: mysql:// is not a PostgreSQL URL - write postgresql://" in (
        done.stdout + done.stderr
    )
