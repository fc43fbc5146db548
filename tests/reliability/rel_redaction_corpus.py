"""Redaction corpus (§9): every family, each credential in plain, JSON-escaped and tool-input
form, archived through the real pipeline (DSH reader → render → redact → fs store → index →
local-path pool): none survives in chapters, artifacts, collections, the index, the mirror or
the pool. Benign look-alikes are never changed. A second scanner (detect-secrets), when it is
installed, finds none of the planted secrets in the output.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from dsh_chapters_core.redact import redact

from tests.acceptance.steps_common import Machine
from tests.fixtures.dsh_logs import DshLog, text_blocks
from tests.reliability.credentials import (
    FAMILIES,
    Credential,
    benign_lines,
    corpus,
    json_escaped,
    unicode_escaped,
)

ORIGIN = "https://github.com/acme/widgets.git"
SEED = 16
SESSION = "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d"


def _machine(root: Path) -> Machine:
    workspace = root / "box" / "widgets"
    (workspace / ".git").mkdir(parents=True)
    (workspace / ".git" / "config").write_text(f'[remote "origin"]\n\turl = {ORIGIN}\n')
    home = root / "box" / "home"
    home.mkdir()
    return Machine("box", workspace, home, {"DSH_HOME": str(home),
                                            "DSH_CHAPTERS_HARNESS_ID": "box",
                                            "HOME": str(root / "box"), "PATH": "/usr/bin:/bin"})


def _tool_input(cred: Credential) -> dict[str, Any]:
    if cred.family == "bearer":
        return {"url": "https://api.example.test/v1/me",
                "headers": {"Authorization": cred.context.split(": ", 1)[1]}}
    return {"command": f"deploy --env prod --note {json.dumps(cred.context)}",
            "payload": json.dumps({"note": cred.context})}


def _session(creds: list[Credential]) -> str:
    """A DSH session log as DSH writes it (tests/fixtures/dsh/README.md): one turn per
    credential, the credential in the prompt, the tool call's input and its result."""
    log = DshLog(SESSION, "/home/ada/src/widgets")
    for i, cred in enumerate(creds):
        turn = i + 1
        log.open_turn(turn, f"Turn {i}: {cred.context}", inbox=False)
        call = {"type": "tool-call", "id": f"c{i}", "name": "shell",
                "arguments": json.dumps(_tool_input(cred))}
        log.assistant(turn, 1, [call], finish="tool-calls")
        result = (f'{{"status": "ok", "echo": "{json_escaped(cred.context)}", '
                  f'"raw": "{unicode_escaped(cred.context)}"}}')
        if i % 10 == 0:  # large enough to become an artifact
            result += "\n" + "\n".join(f"log line {n} of the deploy" for n in range(900))
        log.tool(turn, 1, call, result)
        log.assistant(turn, 2, text_blocks(f"Done with turn {i}."))
        log.end_turn(turn)
    return "\n".join(log.lines) + "\n"


def _files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and "/.git/" not in f"/{p.relative_to(root).as_posix()}"}


@pytest.mark.slow
def test_every_planted_credential_is_redacted_everywhere(
    tmp_path: Path, size: Any, record: Any
) -> None:
    creds = corpus(size("redaction_credentials"), SEED)
    assert {c.family for c in creds} == set(FAMILIES) and len(creds) >= 300

    # 1. the chokepoint itself, on each form
    forms = {"plain": lambda c: c.context, "json-escaped": lambda c: json_escaped(c.context),
             "unicode-escaped": lambda c: unicode_escaped(c.context),
             "tool-input": lambda c: json.dumps(_tool_input(c))}
    missed: list[tuple[str, str]] = []
    for cred in creds:
        for form, spell in forms.items():
            out = redact(spell(cred)).text
            if any(probe in out for probe in cred.probes()):
                missed.append((cred.family, form))
    assert not missed, missed[:10]

    # 2. the whole pipeline, every store and pool file
    m = _machine(tmp_path)
    source = tmp_path / "input" / "session.jsonl"
    source.parent.mkdir()
    source.write_text(_session(creds), encoding="utf-8")
    m.ok("archive", str(source), "--harness", "dsh")
    m.ok("index")
    pool = tmp_path / "drive" / "widgets.git"
    m.ok("link", str(pool))
    m.ok("sync")
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "--quiet", str(pool), str(clone)], check=True)
    outputs = {f"store/{k}": v for k, v in _files(m.store).items()}
    outputs |= {f"mirror/{k}": v for k, v in _files(m.mirror).items()}
    outputs |= {f"pool/{k}": v for k, v in _files(clone).items()}
    kinds = {"chapters": 0, "artifacts": 0, "collections": 0, "index": 0}
    for path in outputs:
        for kind in kinds:
            if f"/{kind}/" in path or path.endswith(f"{kind}.jsonl"):
                kinds[kind] += 1
    assert all(kinds.values()), kinds
    leaks = [(path, cred.family) for cred in creds for probe in cred.probes()
             for path, data in outputs.items() if probe.encode() in data]
    assert not leaks, leaks[:10]
    markers = sum(data.count("⟦redacted:credential".encode()) for path, data in outputs.items()
                  if path.startswith("store/") and "/chapters/" in path)
    assert markers >= len(creds) * 3

    # 3. a second scanner on the archive output (when it is installed)
    checked = _detect_secrets(source.parent, m.store, creds)
    record("credentials planted", f"{len(creds)} over {len(FAMILIES)} families")
    record("forms per credential", ", ".join(forms))
    record("redacted at the chokepoint", f"{len(creds) * len(forms) - len(missed)} of "
                                         f"{len(creds) * len(forms)}")
    record("files scanned (store, mirror, pool)", len(outputs))
    record("planted secrets found in any output", len(leaks))
    record("detect-secrets cross-check", checked)


def _scan(exe: str, directory: Path) -> set[str]:
    # detect-secrets reports nothing for an absolute path outside the cwd: scan "." inside it
    scan = subprocess.run([exe, "scan", "--all-files", "."], cwd=directory, capture_output=True,
                          text=True, check=True)
    return {s["hashed_secret"] for files in json.loads(scan.stdout)["results"].values()
            for s in files}


def _detect_secrets(source_dir: Path, store: Path, creds: list[Credential]) -> str:
    exe = shutil.which("detect-secrets") or str(Path(sys.executable).parent / "detect-secrets")
    if not Path(exe).exists():
        return "not installed (skipped)"
    planted = {hashlib.sha1(probe.encode()).hexdigest() for c in creds for probe in c.probes()}
    seen_in_input = _scan(exe, source_dir) & planted
    assert seen_in_input, "detect-secrets found no planted secret in the input: check its use"
    found = _scan(exe, store)
    assert not found & planted, "detect-secrets found a planted secret in the archive"
    return (f"finds {len(seen_in_input)} planted secrets in the input transcript, "
            f"0 in the archive ({len(found)} other finding(s))")


def test_benign_look_alikes_are_never_changed(size: Any, record: Any) -> None:
    lines = benign_lines(size("redaction_benign_lines"), SEED)
    changed = [line for line in lines if redact(line).text != line]
    assert not changed, changed[:10]
    escaped = [line for line in lines[:2000] if redact(json_escaped(line)).text
               != json_escaped(line)]
    assert not escaped, escaped[:10]
    record("benign look-alike lines", len(lines))
    record("benign lines changed (plain / JSON-escaped)", f"{len(changed)} / {len(escaped)}")
