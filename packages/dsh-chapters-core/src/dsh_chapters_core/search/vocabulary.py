"""The emergent vocabulary (§6.3): merge candidates found in the corpus, shadow by default.

Signals, over the canonical topic labels of every document:
- co-occurrence: two labels tag the same document at least `vocabCoMin` times;
- token overlap: the Jaccard index of the labels' singularized words is at least
  `vocabOverlapMin` (`auth-token` / `auth-tokens` is 1.0);
- alias patterns: singular/plural (`test` / `tests`) or prefix (`auth` ⊂ `authentication`,
  single-word labels of at least `vocabMinLabelChars`).
A pair is a candidate when it co-occurs enough AND its labels look alike (overlap or pattern):
co-occurrence alone would merge `auth` into `middleware`. The source is the rarer label.

With `vocabApply` false (the default) candidates are only reported. Applied, each becomes a
`topic-alias` fact (author `plugin`, a reason with the counts) in this machine's edits file,
and `topics/vocabulary.json` is derived from the alias facts alone.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import combinations

from dsh_chapters_core.config import Config
from dsh_chapters_core.curation import CurationFact, FactType, make_fact
from dsh_chapters_core.search.aliases import AliasMap

VOCABULARY_PATH = "topics/vocabulary.json"


@dataclass(frozen=True, slots=True)
class VocabularyCandidate:
    """A proposed topic merge, with the evidence that suggested it."""

    source: str  # the label to merge ("from")
    target: str  # the label it merges into ("to")
    co_occurrences: int
    overlap: float
    pattern: str  # "plural" | "prefix" | ""

    @property
    def reason(self) -> str:
        parts = [f"co-occurrence in {self.co_occurrences} chapters"]
        if self.pattern:
            parts.append(f"alias pattern {self.pattern}")
        parts.append(f"token overlap {self.overlap:.2f}")
        return "; ".join(parts)

    def to_json(self) -> dict[str, object]:
        return {"from": self.source, "to": self.target, "coOccurrences": self.co_occurrences,
                "overlap": round(self.overlap, 4), "pattern": self.pattern, "reason": self.reason}

    def to_fact(self, at: str) -> CurationFact:
        return make_fact(FactType.TOPIC_ALIAS, author="plugin", at=at,
                         **{"from": self.source, "to": self.target, "reason": self.reason})


def _singular(word: str) -> str:
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 3 and word.endswith(("ses", "xes", "zes", "ches", "shes")):
        return word[:-2]
    if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
        return word[:-1]
    return word


def label_overlap(a: str, b: str) -> float:
    """Jaccard index of the two labels' singularized words."""
    wa = {_singular(w) for w in a.split("-") if w}
    wb = {_singular(w) for w in b.split("-") if w}
    if not wa or not wb:
        return 0.0
    return len(wa & wb) / len(wa | wb)


def alias_pattern(a: str, b: str, *, min_chars: int) -> str:
    """"plural" when one label is the other's plural, "prefix" when one starts the other."""
    if a == b:
        return ""
    if _singular(a) == _singular(b):
        return "plural"
    short, long_ = (a, b) if len(a) <= len(b) else (b, a)
    single_words = "-" not in short and "-" not in long_
    if single_words and len(short) >= min_chars and long_.startswith(short):
        return "prefix"
    return ""


def vocabulary_candidates(
    topic_sets: Iterable[Sequence[str]], *, config: Config
) -> tuple[VocabularyCandidate, ...]:
    """Merge candidates over canonical topic labels (one sequence per document), sorted."""
    frequency: Counter[str] = Counter()
    together: Counter[tuple[str, str]] = Counter()
    for topics in topic_sets:
        labels = sorted(set(topics))
        frequency.update(labels)
        together.update(combinations(labels, 2))
    best: dict[str, VocabularyCandidate] = {}
    for (a, b), count in together.items():
        if count < config.vocab_co_min:
            continue
        overlap = label_overlap(a, b)
        pattern = alias_pattern(a, b, min_chars=config.vocab_min_label_chars)
        if not pattern and overlap < config.vocab_overlap_min:
            continue
        # The more frequent label is the target; ties go to the longer, then the smaller label.
        target = min((a, b), key=lambda x: (-frequency[x], -len(x), x))
        source = b if target == a else a
        candidate = VocabularyCandidate(source, target, count, overlap, pattern)
        held = best.get(source)
        if held is None or (-candidate.co_occurrences, -candidate.overlap, candidate.target) < (
            -held.co_occurrences, -held.overlap, held.target
        ):
            best[source] = candidate
    return tuple(sorted(best.values(), key=lambda c: (c.source, c.target)))


def vocabulary_document(aliases: AliasMap) -> bytes:
    """`topics/vocabulary.json`: derived from the alias facts only, deterministic, diffable."""
    canonical: dict[str, list[str]] = {}
    for source, target in aliases.pairs:
        canonical.setdefault(target, []).append(source)
    data = {
        "version": 1,
        "aliases": dict(aliases.pairs),
        "canonical": {k: sorted(v) for k, v in sorted(canonical.items())},
    }
    return (json.dumps(data, ensure_ascii=False, sort_keys=True, indent=2) + "\n").encode("utf-8")
