"""Build hook (hatchling, ``pyproject.toml``): compiles ``collector/wire_scan.c`` into an
extension module beside it, with the C compiler Python was built with.  Skipped, as the mypyc
hook is, with HATCH_BUILD_NO_HOOKS=true: the code then reads through protobuf instead."""

from __future__ import annotations

import shlex
import subprocess
import sysconfig
from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

SOURCE = Path("collector") / "wire_scan.c"


class NativeBuildHook(BuildHookInterface):  # type: ignore[misc, type-arg, unused-ignore]
    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        suffix = sysconfig.get_config_var("EXT_SUFFIX") or ".so"
        target = SOURCE.with_name(SOURCE.stem + suffix)
        compiler = shlex.split(sysconfig.get_config_var("CC") or "cc")
        flags = shlex.split(sysconfig.get_config_var("CCSHARED") or "-fPIC")
        include = sysconfig.get_paths()["include"]
        command = [*compiler, *flags, "-O2", "-shared", f"-I{include}", str(SOURCE), "-o", str(target)]
        self.app.display_info(f"compiling {SOURCE}")
        subprocess.run(command, cwd=self.root, check=True)
        # An editable install imports it from the tree, where it was built; a wheel carries it.
        build_data["pure_python"] = False
        build_data["infer_tag"] = True
        if version != "editable":
            build_data["artifacts"].append(f"/{target.as_posix()}")
