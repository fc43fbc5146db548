"""Words, paths and commands: the raw material of signatures."""

from __future__ import annotations

import pytest
from dsh_chapters_core.text import (
    command_of,
    is_noise_path,
    names_file,
    normalize_commands,
    normalize_path,
    parse_arguments,
    paths_in_arguments,
    paths_in_text,
    project_relative,
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
        # dotfiles are files; a bare extension is prose about a type
        ("git rm --cached .env.production; edit .gitignore", [".env.production", ".gitignore"]),
        ("all .py and .md files ...and more", []),
        # JSON output keeps its escapes: they separate paths, never belong to one
        (r'{"output": "src/a.py\nsrc/b.py\n", "x": "\"docs/c.md\""}',
         ["src/a.py", "src/b.py", "docs/c.md"]),
        # a method call is not a file, a file in parentheses is
        ("console.log(x); request.json() fn(src/a.py) (docs/b.md)", ["src/a.py", "docs/b.md"]),
        # a credential with slashes (an AWS secret) is never a path
        ("AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYzQ8vN3tLs2Hk", []),
        ("objects/ab/cdef0123456789abcdef0123456789abcdef01", [
            "objects/ab/cdef0123456789abcdef0123456789abcdef01"]),
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
    ("path", "root", "relative"),
    [
        ("/home/dev/app/src/a.py", "/home/dev/app", "src/a.py"),
        ("/home/dev/app/src/a.py", "/home/dev/app/", "src/a.py"),
        ("/home/dev/app", "/home/dev/app", ""),
        ("/home/dev/app-old/src/a.py", "/home/dev/app", "/home/dev/app-old/src/a.py"),
        ("src/a.py", "/home/dev/app", "src/a.py"),
        ("/etc/hosts", "/home/dev/app", "/etc/hosts"),
        ("/home/dev/app/src/a.py", "", "/home/dev/app/src/a.py"),
    ],
)
def test_project_relative(path: str, root: str, relative: str) -> None:
    assert project_relative(path, root) == relative


@pytest.mark.parametrize(
    ("path", "noise"),
    [
        (".venv/bin/python", True),
        ("node_modules/react/index.js", True),
        ("src/__pycache__/a.cpython-311.pyc", True),
        ("/dev/null", True),
        ("/health", True),
        ("/openapi.json", True),
        ("", True),
        ("src/acme/auth/token.py", False),
        ("/etc/nginx/nginx.conf", False),
        (".env.production", False),
        ("venvironment/setup.py", False),
    ],
)
def test_noise_paths_name_no_task(path: str, noise: bool) -> None:
    assert is_noise_path(path) is noise


@pytest.mark.parametrize(
    ("path", "is_file"),
    [
        ("src/acme/auth/token.py", True),
        (".gitignore", True),
        ("deploy/.env.production", True),
        ("Makefile", True),
        ("docker/Dockerfile", True),
        ("src/acme", False),
        ("origin/feat/auth-refresh", False),
        ("src/", False),
        ("..", False),
    ],
)
def test_names_file(path: str, is_file: bool) -> None:
    assert names_file(path) is is_file


@pytest.mark.parametrize(
    ("name", "arguments", "script"),
    [
        ("Bash", {"command": "npm test"}, "npm test"),
        ("exec_command", {"cmd": ["bash", "-lc", "git diff"]}, "git diff"),
        ("shell", {"command": ["ls", "-la"]}, "ls -la"),
        ("Read", {"file_path": "a.py"}, ""),
        ("bash", "echo raw", "echo raw"),
        ("bash", ["x"], ""),
        # argv is quoted like a shell would, so a pattern's `|` stays inside its word
        ("shell", {"command": ["rg", "-n", "a|b", "src"]}, "rg -n 'a|b' src"),
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
        # the environment runner hands over to the program: that is the family
        ("uv run pytest tests/auth -q", ["pytest"]),
        ("poetry run --quiet alembic upgrade head", ["alembic"]),
        ("uv run", ["uv run"]),
        # loops and conditionals: keywords are not programs, `2>&1` is no separator
        ("for i in $(seq 50); do uv run pytest -x t.py >/dev/null 2>&1 || echo fail; done | wc -l",
         ["pytest", "wc"]),
        ("if grep -q x f; then make test; fi", ["grep", "make test"]),
        ("sleep 5 & wait", ["sleep", "wait"]),
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
