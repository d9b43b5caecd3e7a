"""The ``skillgauge`` command: serve | replay | check-config | config | recover | migrate."""

from __future__ import annotations

import argparse
import asyncio
import errno
import json
import logging
import os
import sqlite3
import sys
from pathlib import Path
from typing import TextIO

import yaml

from collector import __version__, configfile
from collector.config import JUDGE_ENV, Config, ConfigError, parse
from collector.configerrors import locate
from collector.progress import ProgressLine
from evaluators.result import Coverage


def load(
    path: str | Path | None,
    anthropic_env: bool = True,
    unset: list[str] | None = None,
    every_model_priced: bool = False,
) -> Config:
    """The config file at ``path`` (None: the defaults), parsed and validated; each problem
    names the file and line.  ``anthropic_env``: apply ANTHROPIC_API_KEY / ANTHROPIC_BASE_URL
    when the file leaves them out; ``unset``: see ``collector.config.parse``."""
    if path is None:
        return parse({}, anthropic_env=anthropic_env, every_model_priced=every_model_priced)
    data, lines = configfile.read(path)
    return parse(
        data,
        str(path),
        anthropic_env=anthropic_env,
        line_of=lines.line,
        unset=unset,
        every_model_priced=every_model_priced,
    )


def _config(path: str | None, anthropic_env: bool = True, unset: list[str] | None = None) -> Config:
    try:
        # check-config (no ANTHROPIC_* read): every model priced, as serve would with a judge.
        return load(path, anthropic_env, unset, every_model_priced=not anthropic_env)
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


# serve stopped with its storage full or failing: what it acknowledged is kept for the next
# start, but the sessions it closed may not all be recorded (sysexits' EX_TEMPFAIL).
EXIT_STORAGE_FULL = 75
_FULL = (errno.ENOSPC, errno.EDQUOT)


def _storage_full(err: BaseException) -> bool:
    if isinstance(err, OSError):
        return err.errno in _FULL
    return isinstance(err, sqlite3.OperationalError) and "full" in str(err)


def cmd_serve(args: argparse.Namespace) -> int:
    from collector.service import serve
    from collector.state.lock import DataDirLocked

    config = _config(args.config)
    setup_logging(config.log_level)
    log = logging.getLogger("skillgauge")
    try:
        failing = asyncio.run(serve(config))
    except DataDirLocked as err:  # a usage error, like an invalid config: exit 2
        log.error("%s", err)
        return 2
    except (OSError, RuntimeError, sqlite3.Error) as err:
        if _storage_full(err):
            failing = str(err)
        elif isinstance(err, sqlite3.Error):
            raise
        else:
            log.error("%s", err)
            return 1
    if failing is None:
        return 0
    log.error(
        "stopped with storage failing (%s) in %s: what was acknowledged stays in the request log and"
        " the sessions closed at shutdown are evaluated again at the next start - free space on that"
        " disk and start serve again (exit %d)",
        failing,
        config.storage.path,
        EXIT_STORAGE_FULL,
    )
    return EXIT_STORAGE_FULL


def cmd_replay(args: argparse.Namespace) -> int:
    from collector.gcpolicy import collected
    from collector.replay import replay
    from collector.state.results import replay_records

    config = _config(args.config)
    line = ProgressLine(sys.stderr)
    try:
        # Collected as serve collects (``collector.gcpolicy``).
        outcome = asyncio.run(collected(replay(args.paths, config, progress=line)))
    finally:
        line.finish()
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
    # Without ANTHROPIC_API_KEY / ANTHROPIC_BASE_URL, and with an unset ${env:VAR} read as
    # absent: a file passes or fails the same, key or no key.
    unset: list[str] = []
    try:
        config = _config(args.config, anthropic_env=False, unset=unset)
    finally:
        if unset:  # the file was read and parsed as YAML before any variable was expanded
            line_of = configfile.read(args.config)[1].line
            for note in unset:
                print(f"note: {locate(note, args.config, line_of)}")
    print(f"{args.config}: ok")
    print(
        f"  receivers: grpc {config.receivers.otlp.grpc.endpoint if config.receivers.otlp.grpc else 'off'}, "
        f"http {config.receivers.otlp.http.endpoint if config.receivers.otlp.http else 'off'}; status {config.status.endpoint}"
    )
    print(
        f"  judge: {'configured' if config.judge.configured else 'no api_key or base_url in the file (serve reads ANTHROPIC_API_KEY / ANTHROPIC_BASE_URL; without them judge evaluators are skipped)'}"
    )
    return 0


def _data_dir(args: argparse.Namespace, command: str) -> tuple[Config, str] | int:
    """The config of ``skillgauge <command>`` (recover, migrate) and its data directory; or,
    said on stderr, the exit status when it has none (``storage.path`` ":memory:": 1)."""
    config = _config(args.config)
    path = config.storage.path
    if path == ":memory:":
        print(f'skillgauge {command}: storage.path is ":memory:": nothing to {command}', file=sys.stderr)
        return 1
    return config, path


def _refused(command: str, err: Exception) -> int:
    """Say why ``skillgauge <command>`` could not take or use the data directory; its exit
    status: 2 while a serve holds the directory's lock (a usage error), else 1."""
    from collector.state.lock import DataDirLocked

    print(f"skillgauge {command}: {err}", file=sys.stderr)
    return 2 if isinstance(err, DataDirLocked) else 1


def cmd_recover(args: argparse.Namespace) -> int:
    from collector.state.lock import DataDirLocked
    from collector.state.recover import recover

    found = _data_dir(args, "recover")
    if isinstance(found, int):
        return found
    try:
        done = recover(found[1], force=args.force)  # under the directory's lock
    except (DataDirLocked, OSError, RuntimeError) as err:
        return _refused("recover", err)
    if done.sound:
        print(f"{done.database}: sound; nothing to recover (--force rebuilds it anyway)")
        return 0
    for aside in done.moved_aside:
        print(f"moved aside: {aside}")
    print(
        f"{done.database}: rebuilt with {done.requests} requests from {done.files} segment files; "
        "the next serve replays them and evaluates their sessions again"
    )
    for file in done.unframed:
        print(f"not recovered (written without frames, left in place): {file}", file=sys.stderr)
    return 0


def cmd_migrate(args: argparse.Namespace) -> int:
    from collector.db import migrate
    from collector.state.lock import DataDirLock, DataDirLocked
    from collector.state.vouch import StoreRefused, vouch

    found = _data_dir(args, "migrate")
    if isinstance(found, int):
        return found
    config, path = found
    try:
        lock = DataDirLock(path).acquire()
    except (DataDirLocked, RuntimeError) as err:
        return _refused("migrate", err)
    database = Path(path) / "skillgauge.sqlite"
    try:
        vouch(path)
        revision = migrate.upgrade_sqlite(database)
    except StoreRefused as err:
        print(f"skillgauge migrate: {err}", file=sys.stderr)
        return 1
    except Exception as err:  # a driver's error: named, not a traceback
        print(f"skillgauge migrate: {database}: {err}", file=sys.stderr)
        return 1
    finally:
        lock.release()
    print(f"{database}: at schema revision {revision} (the newest)")
    shared = config.storage.shared
    if shared is not None:
        from collector.db import engine as engines
        from collector.db.location import redacted

        try:
            engine = engines.create(shared)
            try:
                revision = migrate.upgrade(engine)  # under PostgreSQL's advisory lock
            finally:
                engine.dispose()
        except Exception as err:  # a driver's error: named, not a traceback
            print(f"skillgauge migrate: storage.shared {redacted(shared)}: {err}", file=sys.stderr)
            return 1
        print(f"storage.shared {redacted(shared)}: at schema revision {revision} (the newest)")
    return 0


def cmd_config(args: argparse.Namespace) -> int:
    sys.stdout.write(defaults_yaml())
    return 0


def defaults_yaml() -> str:
    """The whole default configuration as YAML, from the config models themselves."""
    data = Config().model_dump(mode="json")
    from_env = [
        f"#   {provider}: " + ", ".join(f"judge.{key} from {' or '.join(envs)}" for key, envs in settings)
        for provider, settings in JUDGE_ENV.items()
    ]
    return (
        f"# skillgauge {__version__}: the whole default configuration. Every key is optional.\n"
        "# Judge settings left unset are read from the environment, by judge.provider:\n"
        + "\n".join(from_env)
        + "\n"
        + yaml.safe_dump(data, sort_keys=False, default_flow_style=False)
    )


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="skillgauge", description="Online evaluator for agents that use Agent Skills."
    )
    p.add_argument("--version", action="version", version=f"skillgauge {__version__}")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    config_help = "YAML config file; every key is optional (default: the built-in defaults, see 'skillgauge config --defaults')"
    serve = sub.add_parser(
        "serve",
        help="receive OTLP, evaluate sessions as they close",
        description="Receive OTLP traces and logs, evaluate each session as it closes, serve /metrics and the status API.",
        epilog="Exit codes: 0 stopped cleanly (SIGTERM/SIGINT); 1 could not start (a port, a file);"
        " 2 invalid config or the data directory is another serve's;"
        f" {EXIT_STORAGE_FULL} stopped with its storage full or failing (what was acknowledged is kept"
        " and evaluated at the next start).",
    )
    serve.add_argument("--config", metavar="FILE", help=config_help)
    serve.set_defaults(func=cmd_serve)
    rp = sub.add_parser(
        "replay",
        help="evaluate recorded OTLP files or directories",
        description="Evaluate recorded OTLP as if it had just been received, with the store in memory; "
        "progress is shown on stderr when it is a terminal.",
    )
    rp.add_argument(
        "paths",
        nargs="+",
        metavar="PATH",
        help="OTLP/JSON files (.json, one request; .jsonl, one per line), binary .binpb/.pb "
        "trace requests, .logs.binpb logs requests, or directories of them",
    )
    rp.add_argument("--config", metavar="FILE", help=config_help)
    rp.add_argument(
        "--format",
        choices=("json", "table"),
        default="table",
        help="table: one readable block per session (default); json: one JSON line per result, "
        "then one coverage line per session",
    )
    rp.set_defaults(func=cmd_replay)
    check = sub.add_parser(
        "check-config",
        help="validate a config file",
        description="Validate a config file; each problem names its line, field and fix. "
        "ANTHROPIC_API_KEY and ANTHROPIC_BASE_URL are not read and every judge model must have a price, "
        "so a file passes or fails the same with or without a key.",
    )
    check.add_argument("config", metavar="FILE", help="the YAML config file to validate")
    check.set_defaults(func=cmd_check_config)
    rec = sub.add_parser(
        "recover",
        help="rebuild a missing or damaged database from the request segments",
        description="Move the data directory's database aside (never deleted) and rebuild it from "
        "the request segment files, so that the next serve replays every request they hold. "
        "Run it when serve refuses to start because its database is missing, empty or damaged.",
    )
    rec.add_argument("--config", metavar="FILE", help=config_help)
    rec.add_argument("--force", action="store_true", help="rebuild even a sound database")
    rec.set_defaults(func=cmd_recover)
    mig = sub.add_parser(
        "migrate",
        help="bring the store's tables to this version's schema",
        description="Apply the store's schema migrations (Alembic) under the data directory's lock "
        "and exit; serve also applies them at start.",
    )
    mig.add_argument("--config", metavar="FILE", help=config_help)
    mig.set_defaults(func=cmd_migrate)
    show = sub.add_parser(
        "config",
        help="print configuration",
        description="Print configuration as YAML that check-config and serve accept.",
    )
    show.add_argument(
        "--defaults",
        action="store_true",
        required=True,
        help="print the whole default configuration, every section and evaluator",
    )
    show.set_defaults(func=cmd_config)
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        return int(args.func(args))
    except BrokenPipeError:
        # The reader went away (``skillgauge replay ... | head``): stop quietly, as a shell
        # tool does, and keep the interpreter's final flush from raising again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141  # 128 + SIGPIPE, what a shell reports for a process the pipe stopped
