"""Code-aware terms of a chapter's body and of a question (search.md "Body terms").

A chapter's body is a verbatim transcript: commands, error messages, file paths, identifiers.
So a word is a run of letters and digits that may be joined by `.`, `_`, `-`, `/` or `:`
(`GitService.repoName`, `snake_case`, `kebab-case`, `src/app.py`, `9.0.1`). Each word is a term
whole (case-folded) and, split at its joints and at camelCase humps, one term per part, each
part through a light stemmer (plurals, -ing, -ed). Numbers and versions are kept whole.
Deterministic and stdlib only: the same text gives the same terms on every machine.

`word_terms` is what both sides share: the body is tokenized with it and so is the query, so a
query word matches a body word when any of their terms agree.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator
from dataclasses import dataclass

# A word: alphanumeric runs joined by one of `._-/:` (never ending on a joint).
_WORD = re.compile(r"[^\W_]+(?:[._\-/:][^\W_]+)*")
WORD_PATTERN = _WORD
_JOINT = re.compile(r"[._\-/:]")
# camelCase humps: `repoName` -> repo, Name; `HTTPServer` -> HTTP, Server; `v2Api` -> v2, Api.
_HUMP = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+[a-z]*")
_PLURAL_CAPS = re.compile(r"^[A-Z]{2,}s$")
_NUMERIC = re.compile(r"^[0-9][0-9.]*$")

# Function words a question is typed with; they carry no evidence of where the answer is.
# Only the query drops them (the body keeps every word, so phrases stay adjacent).
STOPWORDS = frozenset((
    "a", "about", "after", "again", "all", "also", "am", "an", "and", "any", "are", "as", "at",
    "be", "been", "before", "being", "both", "but", "by", "can", "could", "did", "do", "does",
    "doing", "done", "for", "from", "had", "has", "have", "having", "he", "her", "here", "him",
    "his", "how", "i", "if", "in", "into", "is", "it", "its", "itself", "just", "me", "my", "no",
    "nor", "not", "now", "of", "off", "on", "once", "only", "or", "other", "our", "out", "over",
    "own", "same", "she", "should", "so", "some", "such", "than", "that", "the", "their", "them",
    "then", "there", "these", "they", "this", "those", "through", "to", "too", "under", "until",
    "up", "very", "was", "we", "were", "what", "when", "where", "which", "while", "who", "whom",
    "why", "will", "with", "would", "you", "your", "yours",
))


def stem(word: str) -> str:
    """A light, deterministic suffix stripper: plurals, -ing, -ed (never below 3 letters)."""
    if not word.isalpha():
        return word
    if len(word) == 3 and word[2] == "s" and word[1] not in "aeiousy":
        return word[:2]  # `prs`, `ids`: a short plural
    if len(word) <= 3:
        return word
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"
    if word.endswith("sses"):
        return word[:-2]
    if word.endswith("ing") and len(word) > 5:
        return _undouble(word[:-3])
    if word.endswith("ed") and len(word) > 4 and not word.endswith("eed"):
        return _undouble(word[:-2])
    if (word.endswith("es") and word[-3:-2] in ("x", "z")) or word.endswith(("ches", "shes")):
        return word[:-2]
    if word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


def _undouble(base: str) -> str:
    if len(base) > 3 and base[-1] == base[-2] and base[-1] not in "lsz":
        return base[:-1]
    return base


@functools.lru_cache(maxsize=1 << 16)
def word_terms(word: str) -> tuple[str, ...]:
    """The terms of one word: whole (case-folded, stemmed when it is one plain word), then its
    stemmed parts. `GitService.repoName` -> gitservice.reponame, git, service, repo, name."""
    whole = word.casefold()
    if _NUMERIC.match(whole):
        return (whole,)  # `503`, `9.0.1`: a number is one term
    pieces = [p for chunk in _JOINT.split(word) for p in _humps(chunk)]
    if len(pieces) <= 1:
        return (stem(whole),)
    out = [whole]
    for piece in pieces:
        term = stem(piece.casefold())
        if term not in out:
            out.append(term)
    return tuple(out)


def _humps(chunk: str) -> list[str]:
    if _PLURAL_CAPS.match(chunk):
        return [chunk]  # `PRs`, `URLs`: an acronym's plural, one word
    return _HUMP.findall(chunk) or [chunk]


def words(text: str) -> Iterator[tuple[int, str]]:
    """(offset, word) of every word of `text`, in order."""
    for match in _WORD.finditer(text):
        yield match.start(), match.group(0)


@dataclass(frozen=True, slots=True)
class QueryWord:
    """One distinct word of a question and the terms any of which counts as a hit."""

    text: str
    terms: frozenset[str]


def query_words(query: str) -> tuple[QueryWord, ...]:
    """Distinct non-stopword words of a query, in order of first appearance. When every word is
    a stopword the query is taken as typed (a question made of function words still asks).

    A compound word asks for each of its terms: `flushCursorClient` is the words
    `flushcursorclient`, `flush`, `cursor` and `client`. The whole is rare where its parts are
    everywhere, so it has its own document frequency: a body holding the identifier itself
    holds every one of the words (and their phrase), and outranks one that only says `client`;
    as one word of four terms, both would count alike."""
    found: dict[frozenset[str], QueryWord] = {}
    allwords: dict[frozenset[str], QueryWord] = {}
    for _, word in words(query):
        key = word.casefold()
        whole, *parts = word_terms(word)
        items = [(key, QueryWord(key, frozenset((whole,))))]
        items += [(part, QueryWord(part, frozenset((part,)))) for part in parts]
        for name, item in items:
            allwords.setdefault(item.terms, item)
            if name not in STOPWORDS:
                found.setdefault(item.terms, item)
    return tuple((found or allwords).values())
