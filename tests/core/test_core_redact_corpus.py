"""§9 at the chokepoint, on the generated corpora: every credential of every family is
redacted in every place of a session (where it stands plain and JSON-escaped) and every form
of that place (as is, JSON-escaped, inside a tool call's JSON input); and alone, JSON-escaped
twice and with `\\u0022` quotes. The benign corpus (code, hashes,
UUIDs, git SHAs, base64 images, paths, type annotations, documented example keys) is left
alone: at most 0.1% of its lines may change (the issue's bound; today none do)."""

from __future__ import annotations

import json
from collections.abc import Callable

from dsh_chapters_core.redact import FAMILIES as RULE_FAMILIES
from dsh_chapters_core.redact import redact

from tests.core.benign_corpus import KINDS as BENIGN_KINDS
from tests.core.benign_corpus import benign_lines
from tests.core.credential_corpus import (
    FAMILIES,
    KINDS,
    Credential,
    corpus,
    json_escaped,
    places,
    unicode_escaped,
)

SEED = 16
# A place's text already holds the credential JSON-escaped once: these forms take it to two
# levels at most (a JSON string inside a JSON string, as a tool's JSON output quoted in JSONL).
FORMS: dict[str, Callable[[str], str]] = {
    "plain": lambda t: t,
    "json-escaped": json_escaped,
    "tool input": lambda t: json.dumps({"command": t, "description": "run it"}),
}
ALONE: dict[str, Callable[[str], str]] = {
    "json-escaped twice": lambda t: json_escaped(json_escaped(t)),
    "unicode quotes": unicode_escaped,
}
BENIGN_LINES = 12_000
MAX_BENIGN_CHANGED = BENIGN_LINES // 1000  # 0.1%


def _leaks(cred: Credential, text: str) -> bool:
    out = redact(text).text
    return any(probe in out for probe in cred.probes())


def test_the_corpus_spans_the_families() -> None:
    creds = corpus(5 * len(KINDS), SEED)
    assert len(creds) >= 300
    assert len(FAMILIES) >= 30
    assert set(FAMILIES) <= set(RULE_FAMILIES)


def test_every_credential_is_redacted_in_every_place_and_form() -> None:
    missed: list[tuple[str, str, str]] = []
    for cred in corpus(5 * len(KINDS), SEED):
        texts = {"context": cred.context, **vars(places(cred, filler_lines=3))}
        for place, text in texts.items():
            for form, spell in FORMS.items():
                if _leaks(cred, spell(text)):
                    missed.append((cred.family, place, form))
        for form, spell in ALONE.items():
            if _leaks(cred, spell(cred.context)):
                missed.append((cred.family, "alone", form))
    assert not missed, missed[:10]


def test_each_family_is_counted_under_its_own_name() -> None:
    counted: set[str] = set()
    for cred in corpus(len(KINDS), SEED):
        counted |= {name for name, _ in redact(cred.context).counts}
    assert counted >= set(FAMILIES)


def test_the_benign_corpus_is_left_alone() -> None:
    lines = benign_lines(BENIGN_LINES, SEED)
    assert len({k.__code__.co_firstlineno for k in BENIGN_KINDS}) == len(BENIGN_KINDS)
    changed = [line for line in lines if redact(line).text != line]
    escaped = [line for line in lines if redact(json_escaped(line)).text != json_escaped(line)]
    assert len(changed) <= MAX_BENIGN_CHANGED, changed[:10]
    assert len(escaped) <= MAX_BENIGN_CHANGED, escaped[:10]
    assert not changed and not escaped, (changed + escaped)[:10]  # today: none at all
