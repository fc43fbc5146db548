"""§9 end to end: 330 generated credentials of every family, each in the seven places of a
Claude Code session (plain and JSON-escaped, with their command-line and URL forms), archived,
indexed, synced through a real local-path git pool and pulled by a second machine: no
credential in either store, either mirror, or any git object of the pool and both mirrors.
detect-secrets, run over the archived store, finds none of them, and nothing else it finds is
part of one (the archive's own digests, public key lines lower-cased into a signature's terms,
the BEGIN line of a private key whose body is a marker)."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import pytest

from tests.app.redaction_pipeline import detect_secrets, planted_hashes, run_pipeline
from tests.core.credential_corpus import FAMILIES, KINDS, corpus

SEED = 16
COUNT = 5 * len(KINDS)  # every kind five times: 330 credentials
_TOKEN = re.compile(r"[A-Za-z0-9+/=_.~-]{8,}")
_MARKER_START = "⟦redacted:credential"


def explain(store: Path, finding: dict[str, object], probes: list[str]) -> str:
    """Why a detect-secrets finding in the archive is no secret, or "" when it may be one."""
    lines = (store / str(finding["file"])).read_text(encoding="utf-8").splitlines()
    at = int(str(finding["line_number"])) - 1
    if finding["type"] == "Private Key":
        # detect-secrets flags the BEGIN line (or `PuTTY-User-Key-File`) itself, also quoted
        # in a title: the key is safe when a marker stands in for its body.
        if any(_MARKER_START in line for line in lines[at : at + 12]):
            return "a private key's BEGIN line, its body a marker"
        return ""
    # A high-entropy string: find which one it hashed, and make sure it is no part of any
    # planted secret, in any case (the archive's digests, a public key's lower-cased term).
    for token in set(_TOKEN.findall(lines[at])):
        if hashlib.sha1(token.encode()).hexdigest() == finding["hashed_secret"]:
            folded = token.lower()
            if not any(folded in p.lower() or p.lower() in folded for p in probes):
                return "no part of any planted secret"
    return ""


@pytest.mark.slow
def test_no_credential_of_the_corpus_reaches_any_store_mirror_or_git_object(
        tmp_path: Path) -> None:
    creds = corpus(COUNT, SEED)
    assert len(creds) >= 300 and len({c.family for c in creds}) >= 30
    outcome = run_pipeline(tmp_path, creds)
    assert outcome.chapters and outcome.artifacts >= len(creds)  # each large output
    assert all(size > 0 for size in outcome.objects.values())
    assert not outcome.leaks, outcome.leaks[:10]
    # The archive report counts each family it redacted.
    assert set(outcome.families) >= set(FAMILIES)

    store = tmp_path / "laptop" / "widgets" / ".dsh-chapters"
    findings = detect_secrets(store)
    planted = planted_hashes(creds)
    assert not [f for f in findings if f["hashed_secret"] in planted]
    probes = [p for c in creds for p in c.probes()]
    unexplained = [f for f in findings if not explain(store, f, probes)]
    assert not unexplained, unexplained[:5]
