"""Topic aliases from Layer 1 (§10.1 `topic-alias` facts) as one canonicalizer.

Both sides of a match go through it: a query term and an entry's topics, title, summary and
category. So `auth` aliased to `authentication` finds a chapter that says either word, on every
machine that holds the same facts. Resolution is deterministic: the newest fact for a label
wins (by `at`, then harness id, then line); chains are followed; a cycle resolves to its
alphabetically smallest label.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from dsh_chapters_core.curation import CurationFact, FactType

_TOKEN = re.compile(r"[^\W_]+")
# A hyphenated compound. It may start only where a word starts and its runs are possessive,
# so finding them all is linear in the query's length (a 30,000-character query once took
# half a minute here, retrying inside every long run).
_COMPOUND = re.compile(r"(?<![^\W_])[^\W_]++(?:-[^\W_]++)+")


def tokenize(text: str) -> tuple[str, ...]:
    """Words of `text`, case-folded: runs of letters and digits. The same on every machine."""
    return tuple(_TOKEN.findall(text.casefold()))


def slugify(label: str) -> str:
    """A topic label's canonical spelling: case-folded words joined by hyphens."""
    return "-".join(tokenize(label))


@dataclass(frozen=True, slots=True)
class AliasMap:
    """`pairs` are (label, canonical label), sorted; chains and cycles already resolved."""

    pairs: tuple[tuple[str, str], ...] = ()
    lookup: Mapping[str, str] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def from_pairs(cls, pairs: Iterable[tuple[str, str]]) -> AliasMap:
        """Resolve raw `from -> to` pairs (later pairs override earlier ones for a label)."""
        raw: dict[str, str] = {}
        for src, dst in pairs:
            a, b = slugify(src), slugify(dst)
            if a and b and a != b:
                raw[a] = b
        resolved = {label: _resolve(label, raw) for label in raw}
        table = tuple(sorted((a, b) for a, b in resolved.items() if a != b))
        return cls(pairs=table, lookup=dict(table))

    @classmethod
    def from_facts(cls, facts: Iterable[CurationFact]) -> AliasMap:
        aliases = [f for f in facts if f.type is FactType.TOPIC_ALIAS]
        aliases.sort(key=lambda f: (f.at, f.harness_id, f.line))
        return cls.from_pairs(
            (str(f.get("from", "")), str(f.get("to", ""))) for f in aliases
        )

    @property
    def key(self) -> str:
        """A digest of the resolved table: derived files built under other aliases are stale."""
        text = "\n".join(f"{a}\t{b}" for a, b in self.pairs)
        return hashlib.sha256(text.encode("utf-8")).hexdigest()

    def canonical(self, label: str) -> str:
        """The canonical slug of a topic label ("" if the label has no words)."""
        slug = slugify(label)
        return self.lookup.get(slug, slug)

    def text_terms(self, text: str) -> tuple[str, ...]:
        """Canonical words of free text: each word is mapped through the aliases."""
        lookup = self.lookup
        words = _TOKEN.findall(text.casefold())
        if not lookup:
            return tuple(words)
        out: list[str] = []
        for word in words:
            target = lookup.get(word)
            if target is None:
                out.append(word)
            else:
                out.extend(target.split("-"))
        return tuple(out)

    def label_terms(self, label: str) -> tuple[str, ...]:
        """Canonical words of a label: the whole label is resolved first, then each word."""
        return self.text_terms(self.canonical(label).replace("-", " "))

    def query_terms(self, query: str) -> tuple[str, ...]:
        """Distinct canonical terms of a query, in order of first appearance.

        A hyphenated compound (or the whole query) that is itself an alias source is resolved
        as a label too, so `token-refresh` aliased to `jwt-refresh` finds `jwt`.
        """
        found = list(self.text_terms(query))
        compounds = _COMPOUND.findall(query.casefold())
        compounds.append(query)
        for compound in compounds:
            if slugify(compound) in self.lookup:
                found.extend(self.label_terms(compound))
        return tuple(dict.fromkeys(found))


EMPTY_ALIASES = AliasMap()


def _resolve(label: str, raw: Mapping[str, str]) -> str:
    seen: list[str] = []
    current = label
    while current in raw:
        if current in seen:
            cycle = seen[seen.index(current):]
            return min(cycle)
        seen.append(current)
        current = raw[current]
    return current
