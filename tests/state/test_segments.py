"""Segment files describe themselves: each request framed with its signal, tenant and length,
so that ``frames`` finds every whole request without the database."""

from __future__ import annotations

from pathlib import Path

import pytest

from collector.state.segments import HEADER_BYTES, Segments


def test_frames_give_back_every_whole_request_with_its_signal_and_tenant(tmp_path: Path) -> None:
    segments = Segments(tmp_path)
    written = [
        segments.append(b"one", "traces", ""),
        segments.append(b"two", "logs", "team-a"),
        segments.append(b"three", "traces", "team-b"),
    ]
    segments.close()
    frames = list(segments.frames(1))
    assert [(f.signal, f.tenant, f.where) for f in frames] == [
        ("traces", "", written[0]),
        ("logs", "team-a", written[1]),
        ("traces", "team-b", written[2]),
    ]
    assert [segments.read(f.where) for f in frames] == [b"one", b"two", b"three"]


def test_frames_stop_at_a_torn_or_overwritten_request(tmp_path: Path) -> None:
    segments = Segments(tmp_path)
    segments.append(b"kept")
    torn = segments.append(b"torn by a crash")
    segments.close()
    path = tmp_path / "00000001.seg"
    path.write_bytes(path.read_bytes()[: torn.offset + 3])
    assert [segments.read(f.where) for f in segments.frames(1)] == [b"kept"]
    data = bytearray(path.read_bytes())
    second = HEADER_BYTES + len(b"kept")
    data[second : second + 4] = b"\0\0\0\0"  # the second frame's magic overwritten
    path.write_bytes(bytes(data) + b"more after it")
    assert [segments.read(f.where) for f in segments.frames(1)] == [b"kept"]


def test_a_file_written_without_frames_is_named(tmp_path: Path) -> None:
    (tmp_path / "00000001.seg").write_bytes(b"\x0a\x03abc")
    with pytest.raises(ValueError, match="written without frames"):
        list(Segments(tmp_path).frames(1))


def test_a_trimmed_append_leaves_the_file_as_it_was(tmp_path: Path) -> None:
    segments = Segments(tmp_path)
    segments.append(b"kept")
    size = (tmp_path / "00000001.seg").stat().st_size
    segments.trim(segments.append(b"undone", "logs", "team"))
    assert (tmp_path / "00000001.seg").stat().st_size == size
    assert [segments.read(f.where) for f in segments.frames(1)] == [b"kept"]
