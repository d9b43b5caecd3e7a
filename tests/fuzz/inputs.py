"""What the fuzz targets and property tests feed the decoders and detectors.

Every target has one contract: any input yields a value or a clear rejection (the error
types below), never any other exception.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable

from collector.config import parse
from collector.detect import catalogs, shell_reads
from collector.detect.transcript import blocks, injections
from collector.otlp import classes
from collector.receiver import codings, decode
from collector.receiver.errors import ReceiveError
from collector.sessions.assembler import Assembler
from evaluators import skill_md

CLEAR_REJECTIONS: tuple[type[Exception], ...] = (ReceiveError, skill_md.SkillFormatError)
_SESSIONS = parse({}).sessions


def otlp_json(data: bytes) -> None:
    for signal in ("traces", "logs"):
        with contextlib.suppress(ReceiveError):
            decode.decode(signal, data, "json")


def otlp_protobuf_and_detect(data: bytes) -> None:
    """Decode a protobuf request and run the whole assembler + detectors over it."""
    try:
        request = decode.decode("traces", data, "protobuf")
    except ReceiveError:
        return
    assert type(request) is classes.TraceRequest
    assembler = Assembler(_SESSIONS, lambda session, reason: None)
    result = assembler.add_spans(request)
    total = sum(len(ss.spans) for rs in request.resource_spans for ss in rs.scope_spans)
    assert result.accepted + result.rejected == total
    assembler.close_all()


def content_codings(data: bytes) -> None:
    """Any body in every coding: at most the limit's bytes out, or a clear rejection."""
    for coding in codings.CODINGS:
        with contextlib.suppress(ReceiveError):
            assert len(codings.decompress(coding, data, 1 << 20)) <= 1 << 20


def skill_markdown(data: bytes) -> None:
    text = data.decode("utf-8", "replace")
    skill_md.try_parse(text)
    try:
        document = skill_md.parse(text)
    except skill_md.SkillFormatError:
        return
    skill_md.spec_problems(document, "x")


def catalog_text(data: bytes) -> None:
    text = data.decode("utf-8", "replace")
    for marker in catalogs.MARKERS:
        catalogs.find(marker + "\n" + text)
    catalogs.find(text)


def shell_command(data: bytes) -> None:
    shell_reads.skill_paths(data.decode("utf-8", "replace"))


def transcript(data: bytes) -> None:
    text = data.decode("utf-8", "replace")
    list(blocks(text))
    list(injections(text))



TARGETS: dict[str, Callable[[bytes], None]] = {
    "otlp_json": otlp_json,
    "otlp_protobuf": otlp_protobuf_and_detect,
    "codings": content_codings,
    "skill_md": skill_markdown,
    "catalogs": catalog_text,
    "shell": shell_command,
    "transcript": transcript,
}
