"""Redaction corpus (§9): the generated credentials of every family (tests/core/
credential_corpus.py), each in the seven places of a real-shaped Claude Code session, plain
and JSON-escaped with their command-line and URL forms, archived through the real pipeline
(reader → signatures → render → redact → fs store → index → local-path pool → a second
machine): none survives in either store, either mirror, or any git object of the pool and
both mirrors. The benign corpus is never changed. detect-secrets, a second scanner, finds none
of the planted secrets in the archive, and nothing else it finds is a secret.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from dsh_chapters_core.redact import redact

from tests.app.redaction_pipeline import detect_secrets, planted_hashes, run_pipeline
from tests.app.test_app_redaction_corpus import explain
from tests.core.benign_corpus import benign_lines
from tests.core.credential_corpus import FAMILIES, corpus, json_escaped

SEED = 16


@pytest.mark.slow
def test_every_planted_credential_is_redacted_everywhere(
    tmp_path: Path, size: Any, record: Any
) -> None:
    creds = corpus(size("redaction_credentials"), SEED)
    assert {c.family for c in creds} == set(FAMILIES) and len(creds) >= 300
    outcome = run_pipeline(tmp_path, creds)
    assert not outcome.leaks, outcome.leaks[:10]
    store = tmp_path / "laptop" / "widgets" / ".dsh-chapters"
    findings = detect_secrets(store)
    planted = planted_hashes(creds)
    assert not [f for f in findings if f["hashed_secret"] in planted]
    probes = [p for c in creds for p in c.probes()]
    unexplained = [f for f in findings if not explain(store, f, probes)]
    assert not unexplained, unexplained[:5]
    record("credentials planted", f"{len(creds)} over {len(FAMILIES)} families")
    record("places per credential", "prompt, reply, thinking, Bash command, file write, "
                                    "tool output, large output (artifact); plain and escaped")
    record("families counted by the archive", len(outcome.families))
    record("files and git dumps searched (2 stores, 2 mirrors, 3 object stores)",
           len(outcome.outputs))
    record("planted secrets found in any output", len(outcome.leaks))
    record("detect-secrets findings in the store (none a planted secret, none a secret)",
           len(findings))


def test_benign_look_alikes_are_never_changed(size: Any, record: Any) -> None:
    lines = benign_lines(size("redaction_benign_lines"), SEED)
    changed = [line for line in lines if redact(line).text != line]
    assert not changed, changed[:10]
    escaped = [line for line in lines[:2000] if redact(json_escaped(line)).text
               != json_escaped(line)]
    assert not escaped, escaped[:10]
    record("benign look-alike lines", len(lines))
    record("benign lines changed (plain / JSON-escaped)", f"{len(changed)} / {len(escaped)}")
