"""Words, paths and commands in conversation text: the raw material of signatures (§4.1).

Deterministic and cheap (a signature must cost well under a millisecond per turn): regular
expressions and set lookups, no parsing beyond JSON arguments.
"""

from __future__ import annotations

import json
import re
import shlex
from collections import Counter
from collections.abc import Iterable, Iterator
from functools import lru_cache


def _vocabulary(text: str) -> frozenset[str]:
    """A word list written as prose, one word per whitespace-separated token."""
    return frozenset(text.split())


STOPWORDS: frozenset[str] = _vocabulary(
    """
    a about above after again against all also am an and any are aren't as at be because been
    before being below between both but by can can't cannot could couldn't did didn't do does
    doesn't doing don't down during each few for from further had hadn't has hasn't have
    haven't having he her here hers herself him himself his how i if in into is isn't it it's
    its itself just let let's me more most mustn't my myself no nor not now of off on once only
    or other ought our ours ourselves out over own same shan't she should shouldn't so some
    such than that the their theirs them themselves then there these they this those through to
    too under until up very was wasn't we were weren't what when where which while who whom why
    will with won't would wouldn't you your yours yourself yourselves able actually already
    always another anything around away back else even ever every get gets getting got going
    gone good great however instead keep know like likely look looks lot made make makes making
    many may maybe might much must need needs new next none nothing okay one others please put
    really right said say says see seem seems since still sure take tell thank thanks thing
    things think though two use used uses using via want wants way well whether yes yet also ok
    let's i'm i've i'll you're you've we're we'll that's there's here's what's true false null
    none self return def import from class var const let function async await file files line
    lines code run runs ran done work works working first last start end step
    src http https www com org
    """
)

_WORD = re.compile(r"[a-z][a-z0-9_]*")

# Path-like tokens: runs of path characters, judged one by one in `_as_path`.
# Only runs with a slash, or with a dot before a letter (`name.ext`), are candidates: prose
# words never reach Python code, which keeps a signature well under a millisecond.
_TRIM = "\"'`()[]{}<>,;|*!?"
_PATH_TOKEN = re.compile(r"[A-Za-z0-9_.~+@/-]+")
# Inside an odd token: runs with a slash, or with a dot before a letter (`name.ext`).
_PATH_RUN = re.compile(
    r"(?<![A-Za-z0-9_.~+@/-])"
    r"(?:[A-Za-z0-9_.~+@-]*(?:/[A-Za-z0-9_.~+@-]*)+"
    r"|[A-Za-z0-9_+@-][A-Za-z0-9_.+@-]*\.[A-Za-z][A-Za-z0-9]{0,9}(?![A-Za-z0-9_+@(-]))"
)
_ESCAPE = re.compile(r'\\[nrt"]?')
_LINE_SUFFIX = re.compile(r"(?::\d+)+$")
_EXTENSION = re.compile(r"\.([A-Za-z0-9]{1,10})$")
_HAS_LETTER = re.compile(r"[A-Za-z]")
# A bare dotfile: `.gitignore`, `.env.production` (no slash, no known extension needed).
_DOTFILE = re.compile(r"\.[A-Za-z][A-Za-z0-9_-]*(?:\.[A-Za-z0-9_-]+)*")
# A path segment shaped like a credential (long, no separators, upper, lower and digits
# mixed): an `AWS_SECRET_ACCESS_KEY` value has slashes too, and is never a file.
_TOKEN_SEGMENT = re.compile(r"(?=[A-Za-z0-9+]*[A-Z])(?=[A-Za-z0-9+]*[a-z])(?=[A-Za-z0-9+]*[0-9])"
                            r"[A-Za-z0-9+]{16,}")

# A bare file name (no slash) counts as a path only with a well-known extension.
KNOWN_EXTENSIONS: frozenset[str] = _vocabulary(
    """
    py pyi ts tsx js jsx mjs cjs json jsonl md mdx rst toml yaml yml txt ini cfg conf env lock
    rs go java kt kts scala c h cc cpp cxx hpp cs rb php pl sh bash zsh fish ps1 sql html htm
    css scss sass less vue svelte swift m mm dart ex exs erl hs ml lua r jl ipynb xml proto
    graphql tf tfvars gradle cmake mk dockerfile csv tsv log patch diff
    """
)

# Extensionless names that are files, not directories (a primary must name a file, §4.2).
KNOWN_FILENAMES: frozenset[str] = _vocabulary(
    """
    Makefile makefile GNUmakefile Dockerfile Containerfile Vagrantfile Jenkinsfile Procfile
    Gemfile Rakefile Brewfile Justfile justfile Pipfile Caddyfile LICENSE LICENCE COPYING
    NOTICE README CHANGELOG AUTHORS CODEOWNERS OWNERS
    """
)

# Directories whose contents are tooling, never the project's own files: a path through one
# of them is noise (`.venv/bin/python` in a pytest header names no task).
NOISE_DIRS: frozenset[str] = _vocabulary(
    """
    .venv venv .tox .nox node_modules __pycache__ site-packages dist-packages .git .hg .svn
    .pytest_cache .mypy_cache .ruff_cache .hypothesis .cache .idea .vscode .next .turbo
    .gradle .terraform
    """
)
# Absolute paths outside any project: devices and the kernel's views.
_SYSTEM_ROOTS = ("/dev/", "/proc/", "/sys/")

# Argument keys whose string values name a file the call touches.
PATH_KEYS: frozenset[str] = frozenset(
    {
        "path", "paths", "file", "files", "file_path", "filepath", "filePath", "filename",
        "notebook_path", "target_file", "target", "relative_workspace_path", "dir", "directory",
        "source", "destination",
    }
)
# Argument keys that carry a file's body, not references to files: never mined for paths.
BODY_KEYS: frozenset[str] = frozenset(
    {"content", "contents", "new_string", "old_string", "new_str", "old_str", "file_text", "text"}
)
COMMAND_KEYS: tuple[str, ...] = ("command", "cmd", "script")

# Tools that run shell commands (across harnesses); matched lowercased.
SHELL_TOOLS: frozenset[str] = frozenset(
    {
        "bash", "shell", "exec_command", "local_shell", "run_terminal_cmd", "terminal",
        "run_command", "execute_command", "shell_command", "container.exec", "run_shell_command",
    }
)

# Programs whose second word is a subcommand (`git diff`, `npm test`): their family is both.
SUBCOMMAND_PROGRAMS: frozenset[str] = _vocabulary(
    """
    git npm pnpm yarn bun deno npx cargo go docker podman kubectl helm hatch uv pip pip3 poetry
    make gh dotnet mvn gradle terraform brew apt apt-get systemctl conda rustup chapters tox
    nox
    """
)
_PREFIX_PROGRAMS = frozenset({"sudo", "env", "time", "nohup", "exec", "command", "builtin"})
_SKIP_PROGRAMS = frozenset(
    {"cd", "export", "set", "unset", "echo", "true", "false", ":", "source", ".", "done", "fi",
     "esac"}
)
# Shell keywords in front of a command (`do uv run pytest`, `if grep -q x f`): skipped.
_KEYWORD_PREFIXES = frozenset({"do", "then", "else", "elif", "if", "while", "until", "!", "{"})
# Loop and case headers (`for i in $(seq 50)`): no command of their own.
_HEADERS = frozenset({"for", "select", "case"})
# Environment runners whose `run` hands over to the real program: `uv run pytest` is pytest
# (the runner is the same in every task, the program says what the turn did).
_RUNNERS = frozenset({"uv", "poetry", "pipenv", "pdm", "rye"})
_HEREDOC = re.compile(r"<<-?\s*['\"]?(\w+)['\"]?[^\n]*\n[\s\S]*?\n\s*\1[ \t]*(?=\n|$)")
_QUOTED = re.compile(r"'[^']*'|\"(?:[^\"\\]|\\.)*\"")
# `2>&1`, `>&2` and `&>` are redirections, not a background `&`.
_SEPARATOR = re.compile(r"&&|\|\||\|&|(?<![<>])&(?!>)|[;|\n]")
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_PROGRAM = re.compile(r"^[A-Za-z0-9_.+-]+$")
_SUBCOMMAND = re.compile(r"^[a-z][a-z0-9-]*$")
_PYTHON = re.compile(r"python[0-9.]*")
_SHELLS = frozenset({"bash", "sh", "zsh"})
_SHELL_FLAGS = frozenset({"-c", "-lc", "-ic"})


def words(text: str, *, min_chars: int) -> Iterator[str]:
    """Lowercase words of `text` that are long enough and no stopword."""
    for word in _WORD.findall(text.lower()):
        if len(word) >= min_chars and word not in STOPWORDS:
            yield word


def top_terms(texts: Iterable[str], *, limit: int, min_chars: int) -> tuple[str, ...]:
    """Stopword-filtered keyword frequency, top-N; ties break alphabetically (deterministic)."""
    # Count every word in C, then filter the (few) distinct ones.
    counts = Counter(_WORD.findall("\n".join(texts).lower()))
    ranked = sorted(
        ((word, n) for word, n in counts.items()
         if len(word) >= min_chars and word not in STOPWORDS),
        key=lambda item: (-item[1], item[0]),
    )
    return tuple(word for word, _ in ranked[:limit])


def normalize_path(raw: str) -> str:
    """One spelling per file: no `./`, no trailing punctuation or `:line:col`."""
    path = raw.strip().strip("\"'`()[]{}<>,;")
    path = _LINE_SUFFIX.sub("", path).rstrip(".,:;")
    while path.startswith("./"):
        path = path[2:]
    if len(path) > 1:
        path = path.rstrip("/")
    return path


def _as_path(token: str) -> str:
    """A token of path characters judged as a path: "" when it is prose, a number or a URL."""
    path = token.rstrip(".,")
    while path.startswith("./"):
        path = path[2:]
    if len(path) > 1:
        path = path.rstrip("/")
    if not path or path[0] == "@" or path.startswith("//"):
        return ""
    if "/" in path:
        inner = path[1:] if path[0] == "/" else path
        if not inner or "//" in inner:
            return ""
        last = inner.rsplit("/", 1)[-1]
        shaped = (
            path[0] in "/~" or path.startswith("../") or _EXTENSION.search(last) is not None
            or inner.count("/") >= 2
        )
        if not inner.islower() and len(inner) >= 16 and any(
            len(part) >= 16 and _TOKEN_SEGMENT.fullmatch(part) for part in inner.split("/")
        ):
            return ""  # a credential with slashes in it (§9: never into a signature)
        return path if shaped and _HAS_LETTER.search(path) else ""
    ext = _EXTENSION.search(path)
    if ext and ext.group(1).lower() in KNOWN_EXTENSIONS and len(path) > len(ext.group(0)):
        return path
    if path[0] == "." and _DOTFILE.fullmatch(path) and path[1:].lower() not in KNOWN_EXTENSIONS:
        return path  # `.env.production`, `.gitignore`; a bare `.py` is prose about a type
    return ""


def paths_in_text(text: str) -> Iterator[str]:
    """File paths mentioned in free text (tool output, a command line, a patch).

    Whitespace splitting (C speed) finds candidates; only tokens with a slash or a dot reach
    Python, and only odd ones (`fn(src/a.py)`) fall back to the regex.
    """
    if "/" not in text and "." not in text:
        return
    seen: set[str] = set()
    for raw in text.split():
        if ("/" not in raw and "." not in raw) or raw in seen:
            continue
        seen.add(raw)
        if "\\" in raw:
            # Output that is itself JSON (`{"output": "a.py\nb.py"}`) keeps its escapes: an
            # escape separates two paths, it never belongs to one.
            yield from paths_in_text(_ESCAPE.sub(" ", raw.replace("\\/", "/")))
            continue
        # `console.log(x)`, `request.json()`: a call, not a file (the regex sees the paren)
        token = raw.lstrip(_TRIM) if "(" in raw else raw.strip(_TRIM)
        if "=" in token:  # --file=src/a.py, path=src/a.py
            token = token.rsplit("=", 1)[1]
        if ":" in token:  # src/a.py:12:3; a URL's scheme leaves no path behind
            token = token.split(":", 1)[0]
        candidates = (token,) if _PATH_TOKEN.fullmatch(token) else _PATH_RUN.findall(token)
        for candidate in candidates:
            path = _as_path(candidate)
            if path:
                yield path


def project_relative(path: str, root: str) -> str:
    """One spelling per project file: a path under `root` (the transcript's cwd) relative to
    it, so `/home/dev/app/src/a.py` and `src/a.py` are one file; "" for the root itself."""
    root = root.rstrip("/")
    if not root or not path.startswith(root):
        return path
    if len(path) == len(root):
        return ""
    if path[len(root)] != "/":
        return path  # `/repo-other/x` is not under `/repo`
    return path[len(root) + 1 :].lstrip("/")


NOISE, FILE, OTHER = "noise", "file", "other"


@lru_cache(maxsize=16384)  # a session names the same files turn after turn
def path_kind(path: str) -> str:
    """NOISE (names no task), FILE (an extension, a dotfile or a known name) or OTHER (a
    directory, a ref): one split decides both, since every path of every turn is judged."""
    if not path or path.startswith(_SYSTEM_ROOTS):
        return NOISE
    if path[0] == "/" and path.find("/", 1) < 0:
        return NOISE  # `/health`, `/users`: routes and root-level names, not project files
    parts = path.split("/")
    if not NOISE_DIRS.isdisjoint(parts):
        return NOISE
    last = parts[-1]
    if not last:
        return OTHER
    if last[0] == ".":
        return FILE if len(last) > 1 and last[1] != "." else OTHER
    return FILE if "." in last[1:] or last in KNOWN_FILENAMES else OTHER


def is_noise_path(path: str) -> bool:
    """A path that names no task: tooling directories, devices, `/route`-shaped literals."""
    return path_kind(path) == NOISE


def names_file(path: str) -> bool:
    """True when a path names a file (an extension, a dotfile or a known name), not a directory."""
    return path_kind(path) == FILE


def _walk_arguments(value: object, key: str) -> Iterator[str]:
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _walk_arguments(v, str(k))
    elif isinstance(value, list):
        for item in value:
            yield from _walk_arguments(item, key)
    elif isinstance(value, str) and key not in BODY_KEYS:
        if key in PATH_KEYS and "\n" not in value:
            path = normalize_path(value)
            if path and _HAS_LETTER.search(path):
                yield path
        else:
            yield from paths_in_text(value)


def parse_arguments(arguments: str) -> object:
    """A tool call's arguments as JSON, or the raw string when they are not JSON."""
    stripped = arguments.lstrip()
    if stripped[:1] in ("{", "["):
        try:
            parsed: object = json.loads(arguments)
        except ValueError:
            return arguments
        return parsed
    return arguments


def paths_in_arguments(arguments: object) -> Iterator[str]:
    """Paths a tool call touches: path-named keys verbatim, other strings mined as text."""
    if isinstance(arguments, str):
        yield from paths_in_text(arguments)
    else:
        yield from _walk_arguments(arguments, "")


def command_of(name: str, arguments: object) -> str:
    """The shell script a tool call runs, or "" when the tool is not a shell."""
    if name.lower() not in SHELL_TOOLS:
        return ""
    if isinstance(arguments, str):
        return arguments
    if not isinstance(arguments, dict):
        return ""
    for key in COMMAND_KEYS:
        value = arguments.get(key)
        if isinstance(value, str):
            return value
        if isinstance(value, list) and all(isinstance(v, str) for v in value):
            argv = [str(v) for v in value]
            # ["bash", "-lc", "<script>"]: the script is the command.
            shell = argv[0].rsplit("/", 1)[-1] if argv else ""
            if len(argv) >= 3 and argv[1] in _SHELL_FLAGS and shell in _SHELLS:
                return argv[2]
            # Quoted like a shell would, so a pattern's `|` or `;` is not a separator.
            return " ".join(shlex.quote(v) for v in argv)
    return ""


def _command_words(argv: list[str]) -> list[str]:
    """The words from the program on: assignments, prefixes, keywords and runners dropped."""
    while argv:
        head = argv[0]
        if head in _HEADERS:
            return []
        if _ASSIGNMENT.match(head) or head in _PREFIX_PROGRAMS or head in _KEYWORD_PREFIXES:
            argv = argv[1:]
        elif head.rsplit("/", 1)[-1] in _RUNNERS and len(argv) >= 3 and argv[1] == "run":
            argv = argv[2:]
            while argv and argv[0].startswith("-"):
                argv = argv[1:]
        else:
            break
    return argv


def normalize_commands(script: str) -> Iterator[str]:
    """Command families of a shell script: `git diff`, `npm test`, `python -m pytest`, `ls`."""
    script = _HEREDOC.sub("\n", script)
    script = _QUOTED.sub("", script)
    for simple in _SEPARATOR.split(script):
        argv = _command_words(simple.split())
        if not argv:
            continue
        program = argv[0].rsplit("/", 1)[-1].lower()
        if program in _SKIP_PROGRAMS or not _PROGRAM.match(program) or program.startswith("-"):
            continue
        if _PYTHON.fullmatch(program):
            program = "python"
            if len(argv) >= 3 and argv[1] == "-m":
                yield f"python -m {argv[2].lower()}"
                continue
        if program in SUBCOMMAND_PROGRAMS and len(argv) >= 2 and _SUBCOMMAND.match(argv[1]):
            yield f"{program} {argv[1]}"
        else:
            yield program
