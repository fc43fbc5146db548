"""docs/redaction.md's family table is what the rules do: generated from them, and checked."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from dsh_chapters_core.redact import FAMILIES

ROOT = Path(__file__).resolve().parents[2]


def test_the_family_table_is_current_and_lists_every_family() -> None:
    done = subprocess.run([sys.executable, str(ROOT / "docs" / "gen_redaction_families.py"),
                           "--check"], capture_output=True, text=True, check=False, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    page = (ROOT / "docs" / "redaction.md").read_text(encoding="utf-8")
    assert all(f"| `{name}` |" in page for name in FAMILIES)
