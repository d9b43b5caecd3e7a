"""Signal: a shell command that prints a SKILL.md (``cat``, ``head``, ``tail``, ``sed`` ...).

Only reads count: ``sed -i``, redirections and pipes into writers are not loads.  The
command is split with ``shlex``; nothing here ever runs it.
"""

from __future__ import annotations

import posixpath
import shlex

from collector.detect.facts import reads as read_facts
from collector.detect.families import Family
from collector.detect.file_reads import read_load
from evaluators.bytecache import memo_by_text
from evaluators.evidence import SkillLoad, ToolCall

_SEPARATORS = frozenset({"&&", "||", ";", "|"})
_MAX_DEPTH = 2  # shells inside shells


def _command_of(family: Family) -> str | None:
    """The command a shell tool's arguments hold, or None (no shell tool, or none recorded)."""
    if not family.shell:
        return None
    arguments = family.arguments
    if isinstance(arguments, str):
        return arguments
    if isinstance(arguments, dict):
        for key in read_facts.COMMAND_ARGUMENTS:
            value = arguments.get(key)
            if isinstance(value, str):
                return value
            if isinstance(value, list) and all(isinstance(v, str) for v in value):
                return shlex.join(value)
    return None


def skill_paths(command: str, depth: int = 0) -> list[str]:
    """SKILL.md paths that a read verb in ``command`` prints to stdout (also inside a
    script a shell runs: ``bash -lc '...'``)."""
    if ">" in command or depth > _MAX_DEPTH:
        return []  # a redirection writes; never a load
    try:
        lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        tokens = list(lexer)
    except ValueError:
        return []
    paths: list[str] = []
    words: list[str] = []
    for token in [*tokens, ";"]:
        if token not in _SEPARATORS:
            words.append(token)
            continue
        if words:
            verb = posixpath.basename(words[0])
            if verb in read_facts.SHELL_INTERPRETERS:
                script = _script(words[1:])
                if script is not None:
                    paths += skill_paths(script, depth + 1)
                words = []
                continue
            writes = read_facts.READ_VERBS.get(verb)
            joined = read_facts.WRITE_FLAG_PREFIXES.get(verb)
            if writes is not None and not any(
                w in writes or (joined is not None and w.startswith(joined)) for w in words[1:]
            ):
                paths += [w for w in words[1:] if w.endswith("SKILL.md") and not w.startswith("-")]
        words = []
    return paths


def _script(arguments: list[str]) -> str | None:
    """The script of ``sh -c SCRIPT`` (any short flag group holding "c": -c, -lc, -ic)."""
    for i, word in enumerate(arguments[:-1]):
        if word.startswith("-") and not word.startswith("--") and "c" in word:
            return arguments[i + 1]
    return None


# The same command (``cat <skills>/x/SKILL.md``) comes back in every session that reads the
# skill: each is split once.  Shared; not modified.
@memo_by_text("shell_paths", 1024 * 1024, value_factor=0.5)
def _printed_paths(command: str) -> list[str]:
    return skill_paths(command)


def detect(call: ToolCall) -> SkillLoad | None:
    return detect_family(Family(call))


def detect_family(family: Family) -> SkillLoad | None:
    """``detect`` of a call's ``Family``."""
    command = _command_of(family)
    if command is None or "SKILL.md" not in command:
        return None
    paths = _printed_paths(command)
    if not paths:
        return None
    return read_load(family.call, paths[0], "shell_read", family.text())
