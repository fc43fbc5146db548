"""The domain imports nothing outside the standard library (ARCHITECTURE.md, "Shape").

Every core module is imported in a fresh, isolated interpreter; afterwards no loaded module may
come from outside the stdlib and the core itself. This runs in the core-only environment too,
where a third-party import would fail outright.
"""

from __future__ import annotations

import json
import pkgutil
import subprocess
import sys

import dsh_chapters_core

# Only what importing the core loads is judged: an interpreter may load modules of its own at
# start-up (Debian's Python 3 runs a `sitecustomize` from /etc/python3.X), before any core code.
PROBE = r"""
import importlib, json, pkgutil, sys
at_start = set(sys.modules)
import dsh_chapters_core
prefix = "dsh_chapters_core."
names = sorted(m.name for m in pkgutil.walk_packages(dsh_chapters_core.__path__, prefix))
for name in names:
    importlib.import_module(name)
roots = {m.split(".")[0] for m in set(sys.modules) - at_start}
allowed = set(sys.stdlib_module_names) | {"dsh_chapters_core", "__main__", "builtins"}
foreign = sorted(r for r in roots if r not in allowed and not r.startswith("_"))
print(json.dumps({"modules": names, "foreign": foreign}))
"""


def core_modules() -> list[str]:
    return sorted(
        m.name for m in pkgutil.walk_packages(dsh_chapters_core.__path__, "dsh_chapters_core.")
    )


def test_every_core_module_imports_with_the_stdlib_alone() -> None:
    out = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, check=True, timeout=120
    )
    report = json.loads(out.stdout)
    assert report["modules"] == core_modules()
    assert len(report["modules"]) >= 5
    assert report["foreign"] == []
