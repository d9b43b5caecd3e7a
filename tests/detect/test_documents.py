"""A read succeeded when it returned a SKILL.md, whatever wraps it; a non-zero exit code and
a refusal fail it, wherever the result says so, but not words inside the SKILL.md itself.

The wrapping shapes are a text rule: each is tested on the SKILL.md results that real
harnesses returned in the recordings, and, for shapes no recording has yet, on result strings.
"""

from __future__ import annotations

import asyncio
import json
import shlex
from collections.abc import Callable
from functools import cache
from typing import Any

import pytest
from support import FRAMEWORKS

from collector.config import parse
from collector.detect import documents, file_reads, shell_reads
from collector.detect.content import flatten_text, parse_json
from collector.detect.outcome import text_outcome
from collector.replay import replay
from evaluators.evidence import ToolCall

SKILL = "---\nname: pdf-report\ndescription: Make a PDF report from a table.\n---\n\n# PDF report\n\n1. Read the table.\n"


def gutter(mark: str) -> Callable[[str], str]:
    return lambda text: "\n".join(f"{n:>6}{mark}{line}" for n, line in enumerate(text.split("\n"), 1))


WRAPPERS: dict[str, Callable[[str], str]] = {
    "bare": lambda text: text,
    "header line naming the path": lambda text: f"Content of /work/.skills/pdf-report/SKILL.md:\n{text}",
    "tab gutter": gutter("\t"),
    "colon gutter": gutter(": "),
    "pipe gutter": gutter("| "),
    "header then gutter": lambda text: "/skills/pdf-report/SKILL.md\n" + gutter("\t")(text),
    "xml envelope": lambda text: f'<file path="/skills/pdf-report/SKILL.md">\n{text}\n</file>',
    "json envelope": lambda text: json.dumps({"content": text}),
    "json envelope in xml": lambda text: f"<result>{json.dumps({'output': text})}</result>",
    "exit-code header": lambda text: f"Exit code: 0\nWall time: 0.2 seconds\nOutput:\n{text}",
    "process exited header": lambda text: f"Process exited with code 0\n{text}",
    "truncation marker": lambda text: f"{text}\n[... 120 more lines truncated ...]",
    "exit-code footer": lambda text: f"{text}\n[Command succeeded with exit code 0]",
}


@cache
def recorded_skill_reads() -> tuple[tuple[str, str, str], ...]:
    """(skill, body, the tool's result text) of every successful SKILL.md read recorded."""
    outcome = asyncio.run(replay([str(FRAMEWORKS)], parse({})))
    found = set()
    for coverage in outcome.coverages:
        session = coverage.session
        results = {c.span_id: c.result for c in session.tool_calls if c.result}
        for load in session.skill_loads:
            if load.signal in ("file_read", "shell_read") and load.status == "loaded" and load.body:
                raw = results.get(load.span_id)
                if raw is not None:
                    parsed = documents.find(raw)
                    assert parsed is not None
                    found.add((load.skill, load.body, raw))
    return tuple(sorted(found))


def read_call(result: str, name: str = "read_file", arguments: object = None) -> ToolCall:
    args = arguments if arguments is not None else {"path": "/skills/pdf-report/SKILL.md"}
    return ToolCall(
        name=name,
        span_id="1" * 16,
        trace_id="2" * 32,
        start_unix_nano=1,
        arguments=json.dumps(args),
        result=result,
    )


def test_the_recordings_hold_skill_reads_to_wrap() -> None:
    assert len(recorded_skill_reads()) >= 5


@pytest.mark.parametrize("wrapper", list(WRAPPERS))
def test_a_recorded_skill_read_still_loads_however_it_is_wrapped(wrapper: str) -> None:
    for skill, body, raw in recorded_skill_reads():
        text = _text_of(raw)
        if "gutter" in wrapper and not text.startswith("---"):
            continue  # numbered by the harness already
        wrapped = WRAPPERS[wrapper](text)
        load = file_reads.detect(read_call(wrapped, arguments={"path": f"/skills/{skill}/SKILL.md"}))
        assert load is not None
        assert (load.skill, load.status, load.body) == (skill, "loaded", body), wrapper


def _text_of(raw: str) -> str:
    """The SKILL.md text a recorded result holds, from its front matter to the end of its
    body (what the harness printed after it, a footer or an envelope's closing tag, is left
    out: the wrappers put their own around it)."""
    parsed = parse_json(raw)
    text = flatten_text(parsed) if parsed is not None else raw
    start = documents.head(text)
    rest = text[len(start) :]
    document = documents.find(text)
    end = rest.rfind(document.body) if document is not None and document.body else -1
    return rest if end < 0 else rest[: end + len(document.body)]  # type: ignore[union-attr]


@pytest.mark.parametrize("wrapper", list(WRAPPERS))
def test_a_wrapped_skill_md_is_found_with_its_body(wrapper: str) -> None:
    document = documents.find(WRAPPERS[wrapper](SKILL))
    assert document is not None
    assert (document.name, document.body) == ("pdf-report", "# PDF report\n\n1. Read the table.")


@pytest.mark.parametrize(
    ("result", "status"),
    [
        (
            "Exit code: 1\nWall time: 0 seconds\nOutput:\ncat: /skills/pdf-report/SKILL.md: No such file",
            "failed",
        ),
        (f"Exit code: 2\nOutput:\n{SKILL}", "failed"),  # printed, but the command failed
        (json.dumps({"output": SKILL, "metadata": {"exit_code": 1, "duration_seconds": 0.1}}), "failed"),
        (json.dumps({"output": SKILL, "metadata": {"exit_code": 0}}), "loaded"),
        (f"{SKILL}\nProcess exited with code 1", "failed"),
        ("Rejected by user", "denied"),
        ("exec command rejected by policy", "denied"),
        ("Tool execution denied by policy.", "denied"),
        (
            SKILL.replace("1. Read the table.", "Error: never print the raw table.\nexit code 1 means retry"),
            "loaded",
        ),
        (SKILL + "If a write is denied, stop.\n", "loaded"),
    ],
)
def test_exit_codes_and_refusals_are_read_outside_the_skill_md(result: str, status: str) -> None:
    assert text_outcome(result, json.loads(result) if result[:1] == "{" else None)[0] == status
    load = shell_reads.detect(read_call(result, "shell", {"command": "cat /skills/pdf-report/SKILL.md"}))
    assert load is not None and load.status == status


@pytest.mark.parametrize(
    ("command", "paths"),
    [
        ("cat /s/pdf-report/SKILL.md", ["/s/pdf-report/SKILL.md"]),
        ("bash -lc 'cat /s/pdf-report/SKILL.md'", ["/s/pdf-report/SKILL.md"]),  # argv arrays, joined
        ("/bin/sh -c \"sed -n '1,80p' /s/pdf-report/SKILL.md\"", ["/s/pdf-report/SKILL.md"]),
        ("bash -lc 'sed -i s/a/b/ /s/pdf-report/SKILL.md'", []),
        ("bash -lc 'cat /s/pdf-report/SKILL.md > /tmp/x'", []),
        ("bash script.sh /s/pdf-report/SKILL.md", []),
    ],
)
def test_a_shell_read_inside_a_shell_script_is_a_read(command: str, paths: list[str]) -> None:
    assert shell_reads.skill_paths(command) == paths


def test_a_recorded_shell_read_run_through_bash_lc_is_the_same_read() -> None:
    from support import trace_requests

    from collector.sessions.assembler import Assembler

    def loads(traces: list[Any]) -> list[tuple[str, str, str, bool]]:
        closed: list[Any] = []
        asm = Assembler(parse({}).sessions, lambda s, _r: closed.append(s))
        for request in traces:
            asm.add_spans(request)
        asm.close_all()
        return [(x.skill, x.status, x.signal, x.has_body) for s in closed for x in s.skill_loads]

    traces = trace_requests(FRAMEWORKS / "claude_code" / "shell_read.traces.jsonl")
    before = loads(traces)
    for request in traces:
        for rs in request.resource_spans:
            for ss in rs.scope_spans:
                for span in ss.spans:
                    for kv in span.attributes:
                        if kv.key == "full_command":
                            kv.value.string_value = shlex.join(["bash", "-lc", kv.value.string_value])
    assert before == [("incident-report", "loaded", "shell_read", True)]
    assert loads(traces) == before


def test_a_label_before_the_opening_line_and_a_shell_footer_are_wrapping() -> None:
    # Gemini CLI's run_shell_command output, as its history records it.
    result = f"<untrusted_context>\nOutput: {SKILL}Process Group PGID: 1385\n</untrusted_context>"
    document = documents.find(result)
    assert document is not None
    assert (document.name, document.body) == ("pdf-report", "# PDF report\n\n1. Read the table.")
