"""A config file read with the line of every key, so each problem names its file and line.

``read`` parses YAML once into nodes (PyYAML ``compose``, which keeps each node's position)
and builds the plain data from them; ``Lines`` maps a validation location (a path of keys
and list indexes) back to the node it came from.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from collector.configerrors import Loc
from collector.configtypes import ConfigError


@dataclass(frozen=True)
class Lines:
    """Where each key and value of a YAML document starts (lines counted from 1)."""

    root: yaml.Node | None

    def line(self, loc: Loc, key: bool = False) -> int | None:
        """The line of ``loc``'s value (of its key when ``key`` or when the value is a mapping
        or a list), or of the deepest part of ``loc`` the file has (a missing key: the
        mapping that lacks it)."""
        node, line = self.root, None
        if node is None:
            return None
        line = node.start_mark.line + 1
        for part in loc:
            child = _child(node, part)
            if child is None:
                return line
            key_node, node = child
            # A mapping or list is named by its key's line (its content starts below it).
            at_key = key or isinstance(node, yaml.MappingNode | yaml.SequenceNode)
            line = (key_node if at_key and key_node is not None else node).start_mark.line + 1
        return line


def _child(node: yaml.Node, part: int | str) -> tuple[yaml.Node | None, yaml.Node] | None:
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            if isinstance(key_node, yaml.ScalarNode) and key_node.value == str(part):
                return key_node, value_node
    if isinstance(node, yaml.SequenceNode) and isinstance(part, int) and 0 <= part < len(node.value):
        return None, node.value[part]
    return None


def read(path: str | Path) -> tuple[Any, Lines]:
    """The file's data and its ``Lines``; a ConfigError naming file, line and column when the
    file cannot be read or is not YAML, or when a key appears twice in one mapping."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as err:
        raise ConfigError(f"{path}: cannot read config file ({err.strerror})") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not UTF-8 text - save the config file as UTF-8") from None
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
        _no_duplicate_keys(root, str(path), "")
        data = yaml.safe_load(text)
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark or err.context_mark
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else str(path)
        what = " ".join(p for p in (err.context, err.problem) if p)
        raise ConfigError(
            f"{where}: not valid YAML - {what} - check the indentation and quoting on this line and the one before"
        ) from None
    except yaml.YAMLError as err:
        raise ConfigError(f"{path}: not valid YAML - {err}") from None
    return data, Lines(root)


def _no_duplicate_keys(node: yaml.Node | None, path: str, field: str) -> None:
    # YAML loaders keep the last of two equal keys; in a config that hides a mistake.
    if isinstance(node, yaml.MappingNode):
        seen: dict[str, int] = {}
        for key_node, value_node in node.value:
            if isinstance(key_node, yaml.ScalarNode):
                line = key_node.start_mark.line + 1
                if key_node.value in seen:
                    raise ConfigError(
                        f"{path}:{line}: {field}{key_node.value}: appears twice in one mapping (first on line "
                        f"{seen[key_node.value]}) - keep one of them"
                    )
                seen[key_node.value] = line
            _no_duplicate_keys(value_node, path, f"{field}{key_node.value}.")
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _no_duplicate_keys(item, path, f"{field}{i}.")
