"""Code-aware body terms (search.md "Body terms"): identifiers whole and split, a light stemmer,
numbers and versions kept."""

from __future__ import annotations

import pytest
from dsh_chapters_core.search.terms import query_words, stem, word_terms, words


@pytest.mark.parametrize(("word", "terms"), [
    ("GitService.repoName", ("gitservice.reponame", "git", "service", "repo", "name")),
    ("snake_case_name", ("snake_case_name", "snake", "case", "name")),
    ("kebab-case", ("kebab-case", "kebab", "case")),
    ("src/app/main.py", ("src/app/main.py", "src", "app", "main", "py")),
    ("HTTPServer", ("httpserver", "http", "server")),
    ("localStorage", ("localstorage", "local", "storage")),
    ("503", ("503",)),
    ("9.0.1", ("9.0.1",)),
    ("PRs", ("pr",)),
    ("Migrations", ("migration",)),
    # hex of one case with a digit, four or more: a hash, a commit, a UUID's group, whole
    ("9b5a3f25dd", ("9b5a3f25dd",)),
    ("artifacts/2f/2f75100049a9.txt", ("artifacts/2f/2f75100049a9.txt", "artifact", "2f",
                                       "2f75100049a9", "txt")),
    ("019f1fdd-25d6-7772", ("019f1fdd-25d6-7772", "019f1fdd", "25d6", "7772")),
    ("DEADBEEF01", ("deadbeef01",)),
    ("e2e", ("e2e", "e", "2e")),  # shorter: split as before
    ("Abc123", ("abc123", "abc", "123")),  # two cases: an identifier's humps
])
def test_identifiers_are_terms_whole_and_split(word: str, terms: tuple[str, ...]) -> None:
    assert word_terms(word) == terms


@pytest.mark.parametrize(("word", "stemmed"), [
    ("migrations", "migration"), ("queries", "query"), ("running", "run"), ("fixed", "fix"),
    ("uploading", "upload"), ("classes", "class"), ("boxes", "box"), ("status", "status"),
    ("need", "need"), ("api", "api"),
])
def test_the_stemmer_is_light(word: str, stemmed: str) -> None:
    assert stem(word) == stemmed


def test_words_keep_their_offsets_and_joints() -> None:
    line = "ran `alembic upgrade head` in src/db.py: exit 1"
    found = list(words(line))
    assert [w for _, w in found] == ["ran", "alembic", "upgrade", "head", "in", "src/db.py",
                                     "exit", "1"]
    assert all(line[i:i + len(w)] == w for i, w in found)


def test_a_query_word_matches_a_body_word_by_any_shared_term() -> None:
    (plural,) = query_words("migrations")
    assert plural.terms & set(word_terms("migration"))
    whole, *parts = query_words("GitService")
    assert all(w.terms & set(word_terms("gitService.repoName")) for w in parts)
    assert not whole.terms & set(word_terms("gitService.repoName"))  # another identifier


def test_a_compound_query_word_asks_for_the_whole_and_each_part() -> None:
    assert [(w.text, sorted(w.terms)) for w in query_words("flushCursorClient")] == [
        ("flushcursorclient", ["flushcursorclient"]), ("flush", ["flush"]),
        ("cursor", ["cursor"]), ("client", ["client"])]
    # A part that is a stopword is dropped like a typed one; a part typed twice is one word.
    assert [w.text for w in query_words("FileNotFoundError file")] == [
        "filenotfounderror", "file", "found", "error"]
    assert [w.text for w in query_words("9.0.1 HTTPServer")] == [
        "9.0.1", "httpserver", "http", "server"]


def test_a_hash_asks_for_itself_not_for_the_pieces_other_hashes_share() -> None:
    """Split at its humps, a commit would ask for `9b`, `5a`, `3f`, ... that any other hash may
    hold: it is one word, and only the same hash matches it."""
    (commit,) = query_words("9b5a3f25dd")
    assert commit.terms == {"9b5a3f25dd"}
    assert not commit.terms & set(word_terms("19b5a3f2ab"))
    assert commit.terms & set(word_terms("9b5a3f25dd"))
