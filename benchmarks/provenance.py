"""Which code a benchmark measured, for the figures it writes."""

from __future__ import annotations

import subprocess
from pathlib import Path

# What a benchmark measures is the members' code. Result files and docs that an earlier
# benchmark of the same run wrote into the work tree do not make the measured code "dirty".
CODE_PATHS = (":/packages", ":/adapters")


def code_version(where: Path) -> str:
    """The commit checked out at `where`, `-dirty` when the members' code has changes there."""
    head = subprocess.run(["git", "-C", str(where), "describe", "--always"],
                          capture_output=True, text=True, check=False).stdout.strip()
    if not head:
        return "unknown"
    changed = subprocess.run(["git", "-C", str(where), "status", "--porcelain", "--",
                              *CODE_PATHS], capture_output=True, text=True, check=False)
    return f"{head}-dirty" if changed.stdout.strip() else head
