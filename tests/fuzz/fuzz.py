"""Coverage-guided fuzzing of the decoders, parsers and detectors with atheris.

    python tests/fuzz/fuzz.py otlp_protobuf -atheris_runs=200000     # a longer run
    python tests/fuzz/fuzz.py all -atheris_runs=3000                  # what CI runs

Seeds come from the real framework recordings, so the fuzzer starts from real spans.  A
single target keeps what it finds in ``/tmp/skillgauge-fuzz-<target>`` (a longer run goes on
from the last); ``all`` starts every target from the seeds alone, in a directory it removes.
Coverage is traced in skillgauge's own code (``collector``, ``evaluators``, the targets), not
in its dependencies: instrumenting those cost about 50 s a target and guides nothing here.
"""

from __future__ import annotations

import sys
from pathlib import Path

import atheris

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

with atheris.instrument_imports(include=["collector", "evaluators", "inputs"]):
    import inputs


def seeds(target: str) -> list[bytes]:
    from support import FRAMEWORKS, trace_requests

    recordings = sorted(FRAMEWORKS.glob("*/*.traces.jsonl"))[:12]
    if target == "otlp_json":
        return [path.read_bytes().splitlines()[0] for path in recordings]
    if target == "otlp_protobuf":
        return [trace_requests(path)[0].SerializeToString() for path in recordings]
    if target == "codings":  # a recorded request in each coding
        import gzip
        import zlib

        import cramjam

        body = trace_requests(recordings[0])[0].SerializeToString()
        return [gzip.compress(body), zlib.compress(body)] + [
            bytes(encode(body))
            for encode in (cramjam.zstd.compress, cramjam.lz4.compress, cramjam.snappy.compress, cramjam.snappy.compress_raw)
        ]
    skills = sorted((FRAMEWORKS.parent / "skills").glob("*/SKILL.md"))
    return [path.read_bytes() for path in skills] + [b"cat /a/SKILL.md | head", b"<available_skills></available_skills>"]


def run(target: str, argv: list[str], corpus: Path) -> None:
    function = inputs.TARGETS[target]

    def one(data: bytes) -> None:
        function(data)

    corpus.mkdir(exist_ok=True)
    for n, seed in enumerate(seeds(target)):
        (corpus / f"seed-{n}").write_bytes(seed)
    atheris.Setup([sys.argv[0], *argv, str(corpus)], one)
    atheris.Fuzz()


if __name__ == "__main__":
    name, rest = sys.argv[1], sys.argv[2:]
    if name == "all":
        import subprocess
        import tempfile

        with tempfile.TemporaryDirectory(prefix="skillgauge-fuzz-") as scratch:
            for target in inputs.TARGETS:
                corpus = f"--corpus={scratch}/{target}"
                code = subprocess.call([sys.executable, __file__, target, corpus, *rest])
                if code:
                    raise SystemExit(code)
    else:
        given = [arg for arg in rest if arg.startswith("--corpus=")]
        corpus = Path(given[-1].partition("=")[2]) if given else Path(f"/tmp/skillgauge-fuzz-{name}")
        run(name, [arg for arg in rest if not arg.startswith("--corpus=")], corpus)
