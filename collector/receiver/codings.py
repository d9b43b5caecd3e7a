"""OTLP/HTTP request bodies' content codings, inflated to at most ``limit`` bytes.

The codings are those the OpenTelemetry Collector's own OTLP/HTTP receiver takes
(``confighttp``), so that an exporter configured for either one works against the other:

- ``gzip``: every member (RFC 1952 allows several, concatenated);
- ``zlib`` and ``deflate``: a zlib stream (RFC 1950; HTTP's "deflate" is zlib-wrapped);
- ``zstd``: every frame;
- ``snappy``: a block, or the framed format when the body starts with its stream
  identifier (the Collector wrote framed bodies under this name until v0.125);
- ``x-snappy-framed``: the framed format;
- ``lz4``: every lz4 frame.

Each refuses a body with anything but its own data in it (truncated, or trailing bytes),
and refuses to produce more than ``limit`` bytes in all (zip bombs) with ``TooLarge``.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from typing import Any

import cramjam

from collector.receiver.errors import InvalidRequest, TooLarge

IDENTITY = ("", "identity")
# What the Collector's confighttp calls each coding, in its order.
CODINGS = ("gzip", "zstd", "zlib", "snappy", "deflate", "lz4", "x-snappy-framed")
_SNAPPY_STREAM = b"\xff\x06\x00\x00sNaPpY"  # the first chunk of every framed snappy stream
# An output buffer starts this many times the body's size (OTLP bodies compress 5-15x) and
# doubles, up to the limit, while the output does not fit.
_FIRST_RATIO = 16
_FIRST_MIN = 64 * 1024
# How the codecs say the output did not fit in its buffer (tests pin it: an upgrade that
# changed it would turn large bodies into 400s, and a test would fail).
_OUT_OF_ROOM = "failed to write whole buffer"


def supported(coding: str) -> str:
    """``coding`` (a Content-Encoding value, any case) as ``decompress`` takes it; an
    unsupported one is refused, naming those that are."""
    coding = coding.strip().lower()
    if coding not in IDENTITY and coding not in CODINGS:
        raise InvalidRequest(
            f"unsupported Content-Encoding {coding!r}: send {', '.join(CODINGS)} or no encoding"
        )
    return coding


def decompress(coding: str, body: bytes, limit: int) -> bytes:
    """``body`` decoded from ``coding`` (a Content-Encoding value)."""
    coding = supported(coding)
    if coding in IDENTITY:
        return body
    if coding == "gzip":
        return gunzip(body, limit)
    if coding in ("zlib", "deflate"):
        return _inflate(coding, zlib.decompressobj(zlib.MAX_WBITS), body, limit)
    if coding == "zstd":
        return _bounded(coding, cramjam.zstd.decompress_into, body, limit)
    if coding == "lz4":
        return _bounded(coding, cramjam.lz4.decompress_into, body, limit)
    if coding == "x-snappy-framed" or (coding == "snappy" and body.startswith(_SNAPPY_STREAM)):
        return _bounded(coding, cramjam.snappy.decompress_into, body, limit)
    return _snappy_block(body, limit)


def gunzip(body: bytes, limit: int) -> bytes:
    """Inflate a gzip body, every member of it, refusing a body with anything but gzip
    members in it: never only the first member."""
    out = bytearray()
    rest = body
    while True:
        rest = _inflate_into(out, "gzip", zlib.decompressobj(16 + zlib.MAX_WBITS), rest, limit)
        if not rest:
            return bytes(out)


def _inflate(coding: str, inflater: Any, body: bytes, limit: int) -> bytes:
    out = bytearray()
    if _inflate_into(out, coding, inflater, body, limit):
        raise InvalidRequest(f"{coding} body has bytes after its end")
    return bytes(out)


def _inflate_into(out: bytearray, coding: str, inflater: Any, body: bytes, limit: int) -> bytes:
    """Append one zlib or gzip stream from ``body`` to ``out``; what follows it."""
    try:
        out += inflater.decompress(body, limit + 1 - len(out))
    except zlib.error as err:
        raise InvalidRequest(f"body is not valid {coding}: {err}") from None
    if len(out) > limit or inflater.unconsumed_tail:
        raise TooLarge(f"request exceeds {limit} bytes after decompression")
    if not inflater.eof:
        raise InvalidRequest(f"{coding} body is truncated")
    rest: bytes = inflater.unused_data
    return rest


def _bounded(
    coding: str, decompress_into: Callable[[bytes, bytearray], int], body: bytes, limit: int
) -> bytes:
    """Decode into a buffer that grows while the output does not fit, up to ``limit`` + 1
    bytes: the codec cannot write past a buffer's end, so no body makes more than that."""
    size = min(limit + 1, max(_FIRST_MIN, _FIRST_RATIO * len(body)))
    while True:
        out = bytearray(size)
        try:
            written = decompress_into(body, out)
        except cramjam.DecompressionError as err:
            if _OUT_OF_ROOM not in str(err):
                raise InvalidRequest(f"body is not valid {coding}: {err}") from None
            if size > limit:
                raise TooLarge(f"request exceeds {limit} bytes after decompression") from None
            size = min(limit + 1, 2 * size)
            continue
        if written > limit:
            raise TooLarge(f"request exceeds {limit} bytes after decompression")
        return bytes(memoryview(out)[:written])


def _snappy_block(body: bytes, limit: int) -> bytes:
    """A snappy block states its decoded length first: checked before anything is decoded."""
    try:
        size = cramjam.snappy.decompress_raw_len(body)
        if size > limit:
            raise TooLarge(f"request exceeds {limit} bytes after decompression")
        out = bytearray(size)
        written = cramjam.snappy.decompress_raw_into(body, out)
    except cramjam.DecompressionError as err:
        raise InvalidRequest(f"body is not valid snappy: {err}") from None
    if written != size:
        raise InvalidRequest(f"body is not valid snappy: {written} bytes decoded, {size} stated")
    return bytes(out)
