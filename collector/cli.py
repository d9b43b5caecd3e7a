"""The ``skillgauge`` command: serve | replay | check-config."""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import sys
from pathlib import Path
from typing import TextIO

import yaml

from collector import __version__
from collector.config import Config, ConfigError, parse
from evaluators.result import Coverage


def load(path: str | Path | None) -> Config:
    """The config file at ``path`` (None: the defaults), parsed and validated."""
    if path is None:
        return parse({})
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as err:
        raise ConfigError(f"{path}: cannot read config file ({err.strerror})") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as err:
        raise ConfigError(f"{path}: not valid YAML - {err}") from None
    return parse(data, str(path))


def _config(path: str | None) -> Config:
    try:
        return load(path)
    except ConfigError as err:
        print(f"skillgauge: invalid config\n{err}", file=sys.stderr)
        raise SystemExit(2) from None


def setup_logging(level: str, name: str = "%(name)s") -> None:
    """Log lines on stderr; ``name`` stands before each message."""
    logging.basicConfig(
        level=level.upper(), format=f"%(asctime)s %(levelname)s {name}: %(message)s", stream=sys.stderr
    )
    # The judge's HTTP client logs every request at INFO: hundreds of lines a second.
    logging.getLogger("httpx2").setLevel(max(logging.WARNING, logging.getLogger().level))


def cmd_serve(args: argparse.Namespace) -> int:
    from collector.service import serve
    from collector.state.lock import DataDirLocked

    config = _config(args.config)
    setup_logging(config.log_level)
    try:
        asyncio.run(serve(config))
    except DataDirLocked as err:  # a usage error, like an invalid config: exit 2
        logging.getLogger("skillgauge").error("%s", err)
        return 2
    except (OSError, RuntimeError) as err:
        logging.getLogger("skillgauge").error("%s", err)
        return 1
    return 0


def cmd_replay(args: argparse.Namespace) -> int:
    from collector.replay import replay
    from collector.state.results import replay_records

    config = _config(args.config)
    outcome = asyncio.run(replay(args.paths, config))
    for problem in outcome.problems:
        print(f"skillgauge replay: {problem}", file=sys.stderr)
    for note in outcome.notes:
        print(f"skillgauge replay: note: {note}", file=sys.stderr)
    if args.format == "json":
        for coverage in outcome.coverages:
            for record in replay_records(coverage)[:-1]:
                print(json.dumps(record, sort_keys=True))
        for coverage in outcome.coverages:
            print(json.dumps({"coverage": coverage.to_dict()}, sort_keys=True))
    else:
        write_table(outcome.coverages, sys.stdout)
    return 1 if outcome.problems else 0


def write_table(coverages: list[Coverage], out: TextIO) -> None:
    for coverage in coverages:
        c = coverage.to_dict()
        out.write(
            f"session {c['session_id']}  rev {c['revision']}  {c['framework']}  closed: {c['close_reason']}"
            f"  spans: {c['spans']}\n"
            f"  catalog: {c['catalog']['state']} ({len(c['catalog']['skills'])} skills)"
            f"  content capture: {c['content_capture']}"
            f"  expected: {', '.join(c['expectations']['expected']) or 'none'}\n"
        )
        for row in c["skill_loads"]:
            body = "body" if row["has_body"] else "no body"
            out.write(
                f"  load    {row['skill'] or '(empty)':<24} {row['status']:<10} {row['signal']:<14} {body:<8} span {row['span_id']}\n"
            )
        if not c["skill_loads"]:
            out.write("  load    (none)\n")
        for r in coverage.results:
            verdict = {True: "PASS", False: "FAIL", None: "-"}[r.passed]
            score = "" if r.score is None else f" score {r.score:g}"
            out.write(
                f"  result  {r.evaluation:<28} {r.skill or '':<20} {r.status:<14} {verdict:<5}{score}  {r.reason}: {r.explanation}\n"
            )
        out.write("\n")


def cmd_check_config(args: argparse.Namespace) -> int:
    config = _config(args.config)
    print(f"{args.config}: ok")
    print(
        f"  receivers: grpc {config.receivers.otlp.grpc.endpoint if config.receivers.otlp.grpc else 'off'}, "
        f"http {config.receivers.otlp.http.endpoint if config.receivers.otlp.http else 'off'}; status {config.status.endpoint}"
    )
    print(
        f"  judge: {'configured' if config.judge.configured else 'not configured (judge evaluators skipped)'}"
    )
    return 0


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="skillgauge", description="Online evaluator for agents that use Agent Skills."
    )
    p.add_argument("--version", action="version", version=f"skillgauge {__version__}")
    sub = p.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="receive OTLP, evaluate sessions as they close")
    serve.add_argument("--config", help="YAML config file (every key optional)")
    serve.set_defaults(func=cmd_serve)
    rp = sub.add_parser("replay", help="evaluate recorded OTLP files or directories")
    rp.add_argument("paths", nargs="+", metavar="PATH")
    rp.add_argument("--config")
    rp.add_argument("--format", choices=("json", "table"), default="table")
    rp.set_defaults(func=cmd_replay)
    check = sub.add_parser("check-config", help="validate a config file")
    check.add_argument("config", metavar="FILE")
    check.set_defaults(func=cmd_check_config)
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    return int(args.func(args))
