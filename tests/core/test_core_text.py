"""Words, paths and commands: the raw material of signatures."""

from __future__ import annotations

import pytest
from dsh_chapters_core.text import (
    command_of,
    normalize_commands,
    normalize_path,
    parse_arguments,
    paths_in_arguments,
    paths_in_text,
    top_terms,
    words,
)
from hypothesis import given
from hypothesis import strategies as st


def test_words_drop_stopwords_and_short_words() -> None:
    assert list(words("The JWT refresh middleware is in an auth module", min_chars=3)) == [
        "jwt", "refresh", "middleware", "auth", "module",
    ]


def test_top_terms_rank_by_frequency_then_alphabet() -> None:
    texts = ["auth auth token refresh", "token auth middleware", "zebra apple"]
    assert top_terms(texts, limit=3, min_chars=3) == ("auth", "token", "apple")


@pytest.mark.parametrize(
    ("text", "paths"),
    [
        ("edit src/auth/middleware.ts:42:7 now", ["src/auth/middleware.ts"]),
        ("see ./README.md, then package.json.", ["README.md", "package.json"]),
        ("/usr/local/bin/python3 and ~/work/notes", ["/usr/local/bin/python3", "~/work/notes"]),
        ("tests/core/unit/ has files", ["tests/core/unit"]),
        ("and/or e.g. i.e. v1.2.3 3.14 10/20/2024", []),
        ("https://example.com/a/b.html is a URL", []),
        ("mail adrian@example.com", []),
        ('"src/render.ts" (src/app.py)', ["src/render.ts", "src/app.py"]),
    ],
)
def test_paths_in_text(text: str, paths: list[str]) -> None:
    assert list(paths_in_text(text)) == paths


@pytest.mark.parametrize(
    ("raw", "normal"),
    [("./src/x.py", "src/x.py"), ("src/x.py:10", "src/x.py"), ("`a/b.md`,", "a/b.md"),
     ("src/dir/", "src/dir"), ("/", "/")],
)
def test_normalize_path(raw: str, normal: str) -> None:
    assert normalize_path(raw) == normal


def test_paths_in_arguments_trust_path_keys_and_skip_bodies() -> None:
    args = parse_arguments(
        '{"file_path": "./src/render", "content": "import lib/other/module.py", '
        '"pattern": "look in docs/guide/intro.md"}'
    )
    assert list(paths_in_arguments(args)) == ["src/render", "docs/guide/intro.md"]
    assert parse_arguments("not json {") == "not json {"
    assert list(paths_in_arguments("cat src/a.py")) == ["src/a.py"]


@pytest.mark.parametrize(
    ("name", "arguments", "script"),
    [
        ("Bash", {"command": "npm test"}, "npm test"),
        ("exec_command", {"cmd": ["bash", "-lc", "git diff"]}, "git diff"),
        ("shell", {"command": ["ls", "-la"]}, "ls -la"),
        ("Read", {"file_path": "a.py"}, ""),
        ("bash", "echo raw", "echo raw"),
        ("bash", ["x"], ""),
    ],
)
def test_command_of(name: str, arguments: object, script: str) -> None:
    assert command_of(name, arguments) == script


@pytest.mark.parametrize(
    ("script", "families"),
    [
        ("npm test", ["npm test"]),
        ("cd /repo && git diff --stat | head -20", ["git diff", "head"]),
        ("FOO=1 sudo python3 -m pytest -x tests/core", ["python -m pytest"]),
        ("python script.py; ./scripts/build.sh --fast", ["python", "build.sh"]),
        ("git commit -m 'fix: a && b; c'", ["git commit"]),
        ("cat <<'EOF' > f.txt\nrm -rf /\nEOF\nls", ["cat", "ls"]),
        ("/usr/bin/GIT status", ["git status"]),
        ("echo hi; export X=1", []),
        ("hatch run test tests/core -x -q", ["hatch run"]),
    ],
)
def test_normalize_commands(script: str, families: list[str]) -> None:
    assert list(normalize_commands(script)) == families


@given(st.text(max_size=200))
def test_extractors_never_fail_and_are_deterministic(text: str) -> None:
    assert list(paths_in_text(text)) == list(paths_in_text(text))
    assert list(normalize_commands(text)) == list(normalize_commands(text))
    for path in paths_in_text(text):
        assert path and not path[0].isspace()
