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
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import chain

# A word: alphanumeric runs joined by one of `._-/:` (never ending on a joint).
_WORD = re.compile(r"[^\W_]+(?:[._\-/:][^\W_]+)*")
WORD_PATTERN = _WORD
_JOINT = re.compile(r"[._\-/:]")
# camelCase humps: `repoName` -> repo, Name; `HTTPServer` -> HTTP, Server; `v2Api` -> v2, Api.
_HUMP = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+[a-z]*")
_PLURAL_CAPS = re.compile(r"^[A-Z]{2,}s$")
# Four or more hex digits of one case, a digit among them: a hash, a commit, a UUID's group.
# Split at the humps `2f75100049a9` is `2f`, `75100049a`, `9`: parts no one types, in every
# chapter that names an artifact or a commit, so it stays one word. (`ec2`, `e2e` still split.)
_HEX = re.compile(r"(?=[0-9a-f]*[0-9])[0-9a-f]{4,}|(?=[0-9A-F]*[0-9])[0-9A-F]{4,}")
_NUMERIC = re.compile(r"^[0-9][0-9.]*$")
# The longest part of a word split at camelCase humps; longer ones stay whole (see `_humps`).
HUMP_MAX_CHARS = 64

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
    if word.isascii() and word.isalpha() and word[1:].islower():
        return (stem(word.lower()),)  # a plain word, or one with a capital: no hump, no joint
    whole = word.casefold()
    if _NUMERIC.match(whole):
        return (whole,)  # `503`, `9.0.1`: a number is one term
    parts = [term for chunk in _JOINT.split(word) for term in _chunk_terms(chunk)]
    if len(parts) <= 1:
        return (stem(whole),)
    out = [whole]
    for term in parts:
        if term not in out:
            out.append(term)
    return tuple(out)


@functools.lru_cache(maxsize=1 << 15)
def _chunk_terms(chunk: str) -> tuple[str, ...]:
    """The stemmed parts of a word's piece between joints. Remembered apart from whole words:
    a store spells its paths and identifiers in many ways from few pieces (`src`, `Service`),
    and splitting and stemming a piece costs more than the lookup."""
    return tuple(stem(piece.casefold()) for piece in _humps(chunk))


def _humps(chunk: str) -> list[str]:
    if _PLURAL_CAPS.match(chunk) or len(chunk) > HUMP_MAX_CHARS or _HEX.fullmatch(chunk):
        # `PRs`, `URLs`: an acronym's plural, one word. A chunk longer than any identifier
        # (a hash, a base64 run) is one word too: the all-caps hump backtracks on a long run,
        # so splitting one would cost time quadratic in its length.
        return [chunk]
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


# ---------------------------------------------------------------------------------------------
# Counting a body's terms fast (the index reads every chapter as it is written).
#
# `words` above is the definition; this is the same count in C-speed steps: every ASCII byte
# that is neither a letter, a digit nor a joint becomes a space, the bytes are split at spaces
# and counted, and only each distinct token goes through the regular expression (a token
# holding a non-ASCII byte, a doubled or hanging joint, is cut into its words there). A word
# never spans an ASCII byte that is not part of a word, so the words are exactly `words`'.

_WORD_BYTES = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-/:"
_TOKEN_TABLE = bytes(i if i >= 128 or i in _WORD_BYTES else 32 for i in range(256))
_ASCII_WORD = re.compile(rb"[A-Za-z0-9]+(?:[._\-/:][A-Za-z0-9]+)*")
# Distinct tokens remembered across bodies (a corpus repeats most of its spellings); the memo
# is dropped whole when it grows past this many, so a long import stays bounded in memory.
_TOKEN_MEMO_MAX = 1 << 17


def _token_terms(token: bytes) -> tuple[tuple[str, ...], int]:
    """The terms of one raw token (every term of every word in it, a word's terms once each)
    and how many words it holds."""
    if token.isascii():
        found = ([token.decode("ascii")] if _ASCII_WORD.fullmatch(token)
                 else [w.decode("ascii") for w in _ASCII_WORD.findall(token)])
    else:
        found = _WORD.findall(token.decode("utf-8", errors="replace"))
    out: list[str] = []
    for word in found:
        out.extend(word_terms(word))
    return tuple(out), len(found)


class _TokenMemo(dict[bytes, tuple[str, ...]]):
    """Token -> its terms, a token met for the first time worked out as it is looked up (in
    the C loop that counts a passage's terms: no pass of its own to find the new ones), its
    word count kept beside it in `words`."""

    def __init__(self) -> None:
        super().__init__()
        self.words: dict[bytes, int] = {}

    def __missing__(self, token: bytes) -> tuple[str, ...]:
        terms, self.words[token] = _token_terms(token)
        self[token] = terms
        return terms


_token_memo = _TokenMemo()


def count_terms(text: bytes) -> tuple[int, Counter[str]]:
    """(words, term frequencies) of a piece of UTF-8 text: a term's frequency is how many of
    its words hold the term (`token_refresh` counts once for `token`, once for `refresh`)."""
    tokens = text.translate(_TOKEN_TABLE).split()
    memo = _token_memo
    if len(memo) > _TOKEN_MEMO_MAX:
        memo.clear()
        memo.words.clear()
    counts = Counter(chain.from_iterable(map(memo.__getitem__, tokens)))
    return sum(map(memo.words.__getitem__, tokens)), counts


# ---------------------------------------------------------------------------------------------
# A question's size is bounded (search.md "Long questions").


@dataclass(frozen=True, slots=True)
class QueryCut:
    """How a question was cut to the bound: its characters and distinct words, before and
    after. `cut` is False when it was within the bound."""

    chars: int
    kept_chars: int
    words: int
    kept_words: int

    @property
    def cut(self) -> bool:
        return self.kept_chars < self.chars or self.kept_words < self.words

    def to_json(self) -> dict[str, int]:
        return {"chars": self.chars, "keptChars": self.kept_chars, "words": self.words,
                "keptWords": self.kept_words}


def bound_query(query: str, *, max_chars: int, max_words: int) -> tuple[str, QueryCut]:
    """The question as searched: its first `max_chars` characters (cut at the last space
    before the bound, when there is one), then its first `max_words` distinct words. Linear in
    the question's length: one pass of a regular expression that cannot backtrack."""
    chars = len(query)
    text = query
    if chars > max_chars:
        head = query[:max_chars]
        space = head.rfind(" ")
        text = head[:space] if space > max_chars // 2 else head
    found = query_words(text)
    if len(found) <= max_words and len(text) == chars:
        return text, QueryCut(chars, chars, len(found), len(found))
    # What was typed, counted in one C pass (every word's terms would cost a long paste more).
    every = max(len({w.casefold() for w in _WORD.findall(query)}), len(found))
    if len(found) <= max_words:
        return text, QueryCut(chars, len(text), every, len(found))
    # Cut after the word that brings the count to the bound (words are in typed order).
    kept: set[frozenset[str]] = set()
    end = 0
    for offset, word in words(text):
        terms = {item.terms for item in query_words(word)}
        if len(kept | terms) > max_words:
            break
        kept |= terms
        end = offset + len(word)
    text = text[:end]
    return text, QueryCut(chars, len(text), every, len(query_words(text)))
