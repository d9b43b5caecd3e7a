"""Content codings of OTLP/HTTP bodies, each encoded by an encoder other than the decoder:
the stdlib's zlib, the reference zstd and lz4 libraries' bindings, and snappy's block format
written out by hand beside a snappy library's framed stream."""

from __future__ import annotations

import gzip
import zlib
from collections.abc import Callable

import cramjam
import lz4.frame
import pytest
import zstandard
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from collector.receiver import codings
from collector.receiver.errors import InvalidRequest, TooLarge


def _zstd_streamed(data: bytes) -> bytes:
    """As a streaming writer (the Collector's) makes it: no content size in the frame header."""
    writer = zstandard.ZstdCompressor().compressobj()
    return writer.compress(data) + writer.flush()


ENCODERS: dict[str, Callable[[bytes], bytes]] = {
    "gzip": gzip.compress,
    "zlib": zlib.compress,
    "deflate": zlib.compress,  # HTTP's deflate is zlib-wrapped (RFC 9110); the Python SDK sends this
    "zstd": zstandard.ZstdCompressor().compress,
    "lz4": lz4.frame.compress,
    "snappy": lambda data: bytes(cramjam.snappy.compress_raw(data)),
    "x-snappy-framed": lambda data: bytes(cramjam.snappy.compress(data)),
}


def _body() -> bytes:
    request = ExportTraceServiceRequest()
    span = request.resource_spans.add().scope_spans.add().spans.add()
    span.trace_id, span.span_id, span.name = bytes(range(16)), bytes(range(8)), "chat"
    kv = span.attributes.add()
    kv.key, kv.value.string_value = "session.id", "coded"
    return request.SerializeToString()


BODY = _body()


def test_the_codings_are_the_collectors() -> None:
    assert set(codings.CODINGS) == set(ENCODERS)


@pytest.mark.parametrize("coding", sorted(ENCODERS))
def test_each_coding_decodes_exactly(coding: str) -> None:
    assert codings.decompress(coding, ENCODERS[coding](BODY), 10_000) == BODY
    assert codings.decompress(coding.upper(), ENCODERS[coding](BODY), 10_000) == BODY


@pytest.mark.parametrize("coding", ["gzip", "zstd", "lz4"])
def test_every_frame_or_member_is_decoded(coding: str) -> None:
    encode = ENCODERS[coding]
    assert codings.decompress(coding, encode(b"abc") + encode(b"") + encode(b"def"), 10) == b"abcdef"


def test_zstd_without_a_stated_size_and_snappy_framed_under_its_old_name() -> None:
    assert codings.decompress("zstd", _zstd_streamed(BODY), 10_000) == BODY
    assert codings.decompress("snappy", ENCODERS["x-snappy-framed"](BODY), 10_000) == BODY


def test_a_snappy_block_written_by_hand() -> None:
    # Length 12, a literal "abcd", then a copy of 8 bytes from 4 back (snappy format_description.txt).
    assert codings.decompress("snappy", b"\x0c\x0cabcd\x11\x04", 100) == b"abcdabcdabcd"


@pytest.mark.parametrize("coding", sorted(ENCODERS))
def test_output_far_larger_than_the_body_decodes_up_to_the_limit(coding: str) -> None:
    zeros = b"\0" * 3_000_000  # compresses far past the first buffer's ratio
    assert codings.decompress(coding, ENCODERS[coding](zeros), 3_000_000) == zeros


@pytest.mark.parametrize("coding", sorted(ENCODERS))
def test_a_bomb_is_too_large_and_the_limit_counts_output_not_input(coding: str) -> None:
    body = ENCODERS[coding](b"\0" * 1000)
    assert codings.decompress(coding, body, 1000) == b"\0" * 1000
    with pytest.raises(TooLarge):
        codings.decompress(coding, body, 999)


def test_a_snappy_block_stating_a_huge_length_is_refused_before_decoding() -> None:
    with pytest.raises(TooLarge):
        codings.decompress("snappy", b"\xff\xff\xff\xff\x0f\x0cabcd", 1 << 20)  # states 4 GiB


@pytest.mark.parametrize("coding", sorted(ENCODERS))
def test_truncated_trailing_or_foreign_bytes_are_invalid(coding: str) -> None:
    body = ENCODERS[coding](BODY)
    for bad in (body[: len(body) // 2], body + b"trailing bytes", b"not compressed at all"):
        with pytest.raises(InvalidRequest):
            codings.decompress(coding, bad, 10_000)


def test_an_unsupported_coding_names_the_supported_ones() -> None:
    with pytest.raises(InvalidRequest, match="unsupported Content-Encoding 'br': send gzip, zstd, zlib"):
        codings.supported("br")
    assert codings.supported(" Identity ") == "identity"
    assert codings.supported("") == ""


def test_gunzip_inflates_every_member_or_refuses() -> None:
    assert codings.gunzip(gzip.compress(b"abc") + gzip.compress(b"") + gzip.compress(b"def"), 10) == b"abcdef"
    with pytest.raises(TooLarge):  # the limit counts every member
        codings.gunzip(gzip.compress(b"a" * 6) + gzip.compress(b"b" * 6), 10)
    with pytest.raises(InvalidRequest):
        codings.gunzip(gzip.compress(b"abc") + b"trailing", 10)
    with pytest.raises(InvalidRequest):
        codings.gunzip(gzip.compress(b"abc") + gzip.compress(b"def")[:-4], 10)


def test_gunzip_limits_output_not_input() -> None:
    assert codings.gunzip(gzip.compress(b"abc"), 10) == b"abc"
    with pytest.raises(TooLarge):
        codings.gunzip(gzip.compress(b"\0" * 1000), 999)
    with pytest.raises(InvalidRequest):
        codings.gunzip(b"not gzip", 100)
    with pytest.raises(InvalidRequest):
        codings.gunzip(gzip.compress(b"abcdef" * 100)[:-12], 10_000)
