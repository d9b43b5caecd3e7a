"""How file-reading and shell tools name what they read.

Everything here is a fact about some harness's output format; the detectors read it and
name no harness themselves."""

from __future__ import annotations

import re

# Tools that read a file, and the arguments that may hold the path.
READ_TOOLS: frozenset[str] = frozenset(
    {"read", "Read", "read_file", "file_read", "filesystem_read", "read_text_file", "view", "cat_file"}
)
PATH_ARGUMENTS: tuple[str, ...] = ("file_path", "path", "filename", "filepath", "file", "filePath")
# An editor tool reads when its command argument says so, whatever the tool's name:
# {"command": "view", "path": ...} (Strands' fileEditor, Anthropic's text editor tool).
READ_COMMAND_ARGUMENT = "command"
READ_COMMANDS: frozenset[str] = frozenset({"view"})
# Any other tool counts as a read when its result holds a SKILL.md, unless its name has one
# of these words (a write or edit echoing what it wrote), compared casefolded.
WRITE_TOOL_WORDS: tuple[str, ...] = (
    "write",
    "edit",
    "create",
    "replace",
    "patch",
    "delete",
    "remove",
    "move",
    "rename",
    "append",
    "insert",
    "save",
    "update",
)
# Shell tools, and the arguments that may hold the command line.
SHELL_TOOLS: frozenset[str] = frozenset(
    {"bash", "Bash", "shell", "command", "exec_command", "execute", "run_shell_command", "terminal", "sh"}
)
COMMAND_ARGUMENTS: tuple[str, ...] = ("command", "cmd", "full_command", "script")
# Verbs that print a file; each maps to flags that make it write instead (sed -i).
READ_VERBS: dict[str, frozenset[str]] = {
    "cat": frozenset(),
    "head": frozenset(),
    "tail": frozenset(),
    "less": frozenset(),
    "more": frozenset(),
    "bat": frozenset(),
    "nl": frozenset(),
    "sed": frozenset({"-i", "--in-place"}),
}
# Shells a command line may run a script in ("bash -lc 'cat x/SKILL.md'", as harnesses that
# pass argv arrays write it): the script after a flag holding "c" is read as a command line.
SHELL_INTERPRETERS: frozenset[str] = frozenset({"bash", "sh", "zsh", "dash", "ksh"})
# Flag prefixes that make a verb write, whatever follows: sed -i.bak joins the backup suffix.
WRITE_FLAG_PREFIXES: dict[str, str] = {"sed": "-i"}
# A shell tool's exit code in its output: "Process exited with code 0" (OpenAI Agents sandbox
# exec_command), "[Command succeeded with exit code 0]" and "exit_code": 0 (Deep Agents).
EXIT_CODE: re.Pattern[str] = re.compile(r"(?:exit(?:ed with)? code|exit_code)\W{0,3}(-?\d+)", re.IGNORECASE)
# How far from the end of the output the exit code is looked for.
EXIT_CODE_TAIL_CHARS = 200
# Exit codes that still mean the read worked: 141 is SIGPIPE from a paged read (cat | head).
OK_EXIT_CODES: frozenset[int] = frozenset({0, 141})
