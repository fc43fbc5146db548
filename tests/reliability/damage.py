"""The damage matrix: every file of a store, its mirror and its local-path pool, damaged one at
a time in each way a disk, a person or a killed writer damages a file, then every command run
against it. A command may refuse with a named error (exit 1 or 2); it may never end in a
traceback or hang, the archive never fails for a broken pool or mirror, and search answers
when only derived files (`cache/`, `index/`) were damaged.

The template (one machine linked to a local-path pool, another machine's chapters copied in,
a rule, artifacts, an index, a warm search cache) is built once at a fixed path and restored
there before each scenario, so every absolute path it records stays true.

The scenarios run in one child process (`python -m tests.reliability.damage SPEC OUT`), each
command through `cli.main` in-process, exactly as a user's shell would reach it; an exception
that escapes `main` is a traceback. Run as root, the child drops CAP_DAC_OVERRIDE and
CAP_DAC_READ_SEARCH (`setpriv`), so a mode-000 file is unreadable to it as to any user.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import time
import traceback
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

DAMAGES = ("unreadable", "wrong-type", "garbage", "too-deep", "too-big")
BIG_BYTES = 64 * 1024 * 1024  # sparse: costs no disk, but a whole read costs 64 MiB
COMMAND_TIMEOUT_S = 40  # a command still running after this is a hang

# (area, what, glob under the template root). Each glob names one existing file or directory.
TARGETS: tuple[tuple[str, str, str], ...] = (
    ("store", "own chapter", "box-a/widgets/.dsh-chapters/{a}/chapters/001-*.md"),
    ("store", "copied-in chapter", "box-a/widgets/.dsh-chapters/{b}/chapters/001-*.md"),
    ("store", "artifact", "box-a/widgets/.dsh-chapters/artifacts/*/*.txt"),
    ("store", "a session folder", "box-a/widgets/.dsh-chapters/{a}"),
    ("store", "a chapters folder", "box-a/widgets/.dsh-chapters/{b}/chapters"),
    ("store", "session.json", "box-a/widgets/.dsh-chapters/{a}/session.json"),
    ("store", "collections.jsonl", "box-a/widgets/.dsh-chapters/{a}/collections.jsonl"),
    ("store", "rule", "box-a/widgets/.dsh-chapters/rules/box-a/001-*.md"),
    ("store", "curation facts", "box-a/widgets/.dsh-chapters/edits/box-a/curation.jsonl"),
    ("store", "config.toml", "box-a/widgets/.dsh-chapters/config.toml"),
    ("store", "sync state", "box-a/widgets/.dsh-chapters/state/sync.json"),
    ("store", "quarantine list", "box-a/widgets/.dsh-chapters/state/quarantine.json"),
    ("store", "writer lock", "box-a/widgets/.dsh-chapters/state/writer.lock"),
    ("store", "writer release mark", "box-a/widgets/.dsh-chapters/state/writer.released"),
    ("store", "rule numbers", "box-a/widgets/.dsh-chapters/state/rule-numbers/box-a.json"),
    ("store", "reservation", "box-a/widgets/.dsh-chapters/state/reservations/{a}.json"),
    ("store", "state/", "box-a/widgets/.dsh-chapters/state"),
    ("store", "log", "box-a/widgets/.dsh-chapters/logs/chapters.log"),
    ("store", "index manifest", "box-a/widgets/.dsh-chapters/index/manifest.json"),
    ("store", "topic shard", "box-a/widgets/.dsh-chapters/index/*.md"),
    ("store", "index/", "box-a/widgets/.dsh-chapters/index"),
    ("store", "search cache", "box-a/widgets/.dsh-chapters/cache/search-store.sqlite"),
    ("store", "mirror search cache", "box-a/widgets/.dsh-chapters/cache/search-mirror.sqlite"),
    ("store", "mirror index manifest",
     "box-a/widgets/.dsh-chapters/cache/mirror/index/manifest.json"),
    ("store", "vocabulary", "box-a/widgets/.dsh-chapters/topics/vocabulary.json"),
    ("store", "cache/", "box-a/widgets/.dsh-chapters/cache"),
    ("store", "user config", "box-a/home/dsh-chapters/config.toml"),
    ("mirror", "pool chapter", "box-a/widgets/.dsh-knowledge/chapters/*/{b}/001-*.md"),
    ("mirror", ".git/config", "box-a/widgets/.dsh-knowledge/.git/config"),
    ("mirror", ".git/HEAD", "box-a/widgets/.dsh-knowledge/.git/HEAD"),
    ("mirror", ".git/index", "box-a/widgets/.dsh-knowledge/.git/index"),
    ("mirror", "main ref", "box-a/widgets/.dsh-knowledge/.git/refs/heads/main"),
    ("mirror", "pool head ref", "box-a/widgets/.dsh-knowledge/.git/refs/remotes/pool/main"),
    ("mirror", "an object", "box-a/widgets/.dsh-knowledge/.git/objects/{tree2}/{tree38}"),
    ("mirror", ".git/", "box-a/widgets/.dsh-knowledge/.git"),
    ("pool", "config", "drive/widgets.git/config"),
    ("pool", "HEAD", "drive/widgets.git/HEAD"),
    ("pool", "main ref", "drive/widgets.git/refs/heads/main"),
    ("pool", "an object", "drive/widgets.git/objects/{tree2}/{tree38}"),
    ("pool", "objects/", "drive/widgets.git/objects"),
)

# Every door of the archive: the CLI's commands, the MCP tools and the viewer's pages.
COMMANDS: tuple[tuple[str, ...], ...] = (
    ("status",), ("list",), ("show", "{chapter}"), ("show", "{chapter}", "--line", "3"),
    ("search", "retry", "503"), ("search", "--json", "http_client"), ("index",),
    ("notice",), ("list", "--pool"), ("artifact", "{artifact}"),
    ("artifact", "{mirror_chapter}", "toc"), ("rule", "list"), ("link",), ("key",),
    ("enrich", "report"), ("archive", "{session}"), ("sync",), ("doctor",),
    ("mcp:search",), ("mcp:read",), ("mcp:artifact",), ("viewer:sessions",),
    ("viewer:chapter",), ("viewer:search",), ("doctor", "--repair"), ("search", "retry"),
)


@dataclass
class Outcome:
    target: str
    damage: str
    command: str
    code: int  # exit code; -1 a traceback, -2 a hang
    error: str = ""  # the traceback's type and innermost frame, or the stderr's first line


@dataclass
class Scenario:
    area: str
    what: str
    damage: str
    outcomes: list[Outcome] = field(default_factory=list)


# -- the template -------------------------------------------------------------------------------
@dataclass
class Template:
    root: Path  # where it was built, and where each scenario runs
    saved: Path  # the pristine copy restored before each scenario
    env: dict[str, str]
    workspace: Path
    values: dict[str, str]  # {a}, {b}, {chapter}, ... for TARGETS and COMMANDS


def build_template(root: Path, saved: Path) -> Template:
    from tests.acceptance.steps_common import project_clone, session_id_for

    pool = root / "drive" / "widgets.git"
    a, b = project_clone(root, "box-a"), project_clone(root, "box-b")
    for m in (a, b):
        m.ok("link", str(pool))
    a.set_config("toolResultDeferFloorTokens = 20")  # tool output goes to artifacts
    (a.home / "dsh-chapters").mkdir(parents=True, exist_ok=True)
    (a.home / "dsh-chapters" / "config.toml").write_text("syncDebounceMs = 0\n")
    b.archive("b-1")
    b.ok("sync")
    a.archive("a-1")
    a.ok("rule", "add", "testing", "run the retry tests before a push")
    a.ok("rule", "approve", "box-a/001")
    a.ok("sync")
    b.ok("sync")
    a.ok("sync")
    a.ok("index")
    a.ok("search", "retry")
    a.ok("sync", "--pull")
    store, mirror = a.store, a.mirror
    sid_a, sid_b = session_id_for("a-1"), session_id_for("b-1")
    chapter = sorted((store / sid_a / "chapters").glob("001-*.md"))[0]
    artifact = sorted((store / "artifacts").glob("*/*.txt"))[0]
    mirror_chapter = sorted(mirror.glob(f"chapters/*/{sid_b}/001-*.md"))[0]
    tree = _main_tree(pool)
    session = a.write_session("a-new")
    # A quarantine list and a reservation exist in a store that has seen both.
    if not (store / "state" / "quarantine.json").exists():
        (store / "state" / "quarantine.json").write_text('{"quarantined": []}\n')
    values = {
        "a": sid_a, "b": sid_b, "tree2": tree[:2], "tree38": tree[2:],
        "chapter": chapter.relative_to(a.workspace).as_posix(),
        "artifact": artifact.stem,
        "mirror_chapter": mirror_chapter.relative_to(a.workspace).as_posix(),
        "session": str(session),
    }
    # The pool's and the mirror's objects of main's root tree are loose (small syncs).
    for rel in ("drive/widgets.git/objects", "box-a/widgets/.dsh-knowledge/.git/objects"):
        assert (root / rel / tree[:2] / tree[2:]).is_file(), rel
    if saved.exists():
        shutil.rmtree(saved)
    shutil.copytree(root, saved, symlinks=True)
    return Template(root, saved, dict(a.env), a.workspace, values)


def _main_tree(pool: Path) -> str:
    from dulwich.objects import Commit
    from dulwich.repo import Repo

    repo = Repo(str(pool))
    try:
        commit = repo[repo.refs[b"refs/heads/main"]]
        assert isinstance(commit, Commit)
        return commit.tree.decode()
    finally:
        repo.close()


def locate(template_root: Path, pattern: str, values: dict[str, str]) -> Path:
    found = sorted(template_root.glob(pattern.format(**values)))
    assert found, f"no {pattern} in the template"
    return found[0]


# -- the damage ---------------------------------------------------------------------------------
def _deep(path: Path) -> bytes:
    nest = 100_000
    if path.suffix == ".md":
        return b"---\nnest: " + b"[" * nest + b"\n---\nbody\n"
    if path.suffix == ".toml":
        return b"key = " + b"[" * nest + b"\n"
    if path.suffix in (".jsonl", ".log"):
        return b'{"a":' * nest + b"\n"
    return b"[" * nest


def _garbage(path: Path) -> bytes:
    return bytes(range(256)) * 16 + b"\xff\xfe\x00\x80" * 64


def damage(path: Path, kind: str) -> None:
    """Damage one file or directory in place (see DAMAGES)."""
    is_dir = path.is_dir() and not path.is_symlink()
    if kind == "unreadable":
        path.chmod(0)
        return
    if kind == "wrong-type":
        if is_dir:  # a directory becomes a file
            shutil.rmtree(path)
            path.write_bytes(b"not a directory\n")
        else:  # a file becomes a FIFO: a naive open() would wait forever for a writer
            path.unlink()
            os.mkfifo(path)
        return
    files = [p for p in path.rglob("*") if p.is_file()] if is_dir else [path]
    for file in files:
        if kind == "garbage":
            file.chmod(0o644)
            file.write_bytes(_garbage(file))
        elif kind == "too-deep":
            file.chmod(0o644)
            file.write_bytes(_deep(file))
        elif kind == "too-big":
            file.chmod(0o644)
            with file.open("r+b") as handle:
                handle.seek(0, os.SEEK_END)
                handle.write(b"\n" + _garbage(file))
                handle.truncate(BIG_BYTES)  # the rest is a hole: 64 MiB to whoever reads it


def restore(template: Template, damaged: Path | None) -> None:
    if damaged is not None and damaged.exists():
        with contextlib.suppress(OSError):
            damaged.chmod(0o755 if damaged.is_dir() else 0o644)
    if template.root.exists():
        for dirpath, dirnames, _files in os.walk(template.root):
            for name in dirnames:
                with contextlib.suppress(OSError):
                    os.chmod(os.path.join(dirpath, name), 0o755)
        shutil.rmtree(template.root)
    shutil.copytree(template.saved, template.root, symlinks=True)


# -- running one command ------------------------------------------------------------------------
def _innermost(exc: BaseException) -> str:
    """The exception's type, the innermost frame of ours that raised it, and its text."""
    frames = traceback.extract_tb(exc.__traceback__)
    ours = [f for f in frames if "/dsh_chapters" in f.filename] or frames
    where = f"{Path(ours[-1].filename).name}:{ours[-1].lineno}" if ours else "?"
    return f"{type(exc).__name__} at {where}: {str(exc)[:160]}"


def _pseudo(name: str, template: Template) -> int:
    """An MCP tool or a viewer page, through the same services the server and site call; a
    ChaptersError is the named answer they turn into a tool error or an error page."""
    from dsh_chapters.bootstrap import bootstrap
    from dsh_chapters_core.errors import ChaptersError
    from dsh_chapters_core.ports.agents import ArtifactAction

    values = template.values
    try:
        app = bootstrap(template.workspace, template.env)
        if name.startswith("mcp:"):
            from dsh_chapters.services.agents import AppArchive

            archive = AppArchive(lambda: app)
            if name == "mcp:search":
                archive.search("retry 503", max_tokens=None, topic="", cross_project=False)
            elif name == "mcp:read":
                archive.read(values["mirror_chapter"], offset=0, limit=None)
            else:
                archive.artifact(values["artifact"], ArtifactAction.READ, query="", offset=0,
                                 limit=None, max_tokens=None)
            return 0
        from dsh_chapters.services.web_viewer import AppViewer
        from dsh_chapters_core.ports.viewer import SearchFilters

        viewer = AppViewer(app)
        try:
            if name == "viewer:sessions":
                viewer.sessions()
            elif name == "viewer:chapter":
                viewer.chapter(values["chapter"])
            else:
                viewer.search("retry", SearchFilters())
        finally:
            viewer.close()
        return 0
    except ChaptersError:
        return 1


def _run_here(words: tuple[str, ...], template: Template) -> tuple[int, str]:
    from dsh_chapters.cli import main

    err = io.StringIO()
    os.environ.clear()
    os.environ.update(template.env)
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
            if words[0].startswith(("mcp:", "viewer:")):
                code = _pseudo(words[0], template)
            else:
                code = main(["-C", str(template.workspace), *words])
    except SystemExit as exc:
        return int(exc.code or 0) if not isinstance(exc.code, str) else 1, ""
    except BaseException as exc:  # a traceback: what the matrix counts
        return -1, _innermost(exc)
    first = next((line for line in err.getvalue().splitlines() if line.strip()), "")
    if "Traceback (most recent call last)" in err.getvalue():
        return -1, "a traceback printed to stderr: " + first[:200]
    return code, first[:200]


def run_command(argv: tuple[str, ...], template: Template) -> tuple[int, str]:
    """(exit code, what went wrong) of one command against the damaged template, in a forked
    child: a command blocked inside C code (sqlite opening a FIFO) is still stopped, and no
    module state carries over from one command to the next."""
    words = tuple(w.format(**template.values) for w in argv)
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: run, report, and leave without running any cleanup
        os.close(read_end)
        try:
            code, error = _run_here(words, template)
            os.write(write_end, json.dumps([code, error]).encode())
        finally:
            os._exit(0)
    os.close(write_end)
    deadline = time.monotonic() + COMMAND_TIMEOUT_S
    chunks: list[bytes] = []
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([read_end], [], [], left)[0]:
                os.kill(pid, signal.SIGKILL)
                return -2, f"no answer in {COMMAND_TIMEOUT_S} s"
            chunk = os.read(read_end, 65536)
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(read_end)
        os.waitpid(pid, 0)
    if not chunks:
        return -1, "the command's process died without an answer"
    code, error = json.loads(b"".join(chunks))
    return int(code), str(error)


def _preload() -> None:
    """Import every command family and service once, so each forked command starts warm."""
    from dsh_chapters.cli import build_parser
    from dsh_chapters.services import agents, doctor, pool, search, web_viewer  # noqa: F401

    build_parser()


def run_scenarios(spec: dict[str, Any]) -> list[dict[str, Any]]:
    template = Template(Path(spec["root"]), Path(spec["saved"]), spec["env"],
                        Path(spec["workspace"]), spec["values"])
    out: list[dict[str, Any]] = []
    for area, what, pattern, kind in spec["scenarios"]:
        restore(template, None)
        target = locate(template.root, pattern, template.values)
        damage(target, kind)
        scenario = Scenario(area, what, kind)
        for argv in spec["commands"]:
            code, error = run_command(tuple(argv), template)
            scenario.outcomes.append(Outcome(f"{area} {what}", kind, " ".join(argv), code,
                                             error))
        restore(template, target)
        out.append(asdict(scenario))
    return out


def run_matrix(template: Template, scenarios: list[tuple[str, str, str, str]],
               commands: tuple[tuple[str, ...], ...], work: Path) -> list[dict[str, Any]]:
    """Run `scenarios` in a child process (unprivileged for file modes, see the docstring)."""
    spec = {"root": str(template.root), "saved": str(template.saved), "env": template.env,
            "workspace": str(template.workspace), "values": template.values,
            "scenarios": scenarios, "commands": [list(c) for c in commands]}
    spec_path, out_path = work / "damage-spec.json", work / "damage-out.json"
    spec_path.write_text(json.dumps(spec))
    root = Path(__file__).resolve().parents[2]
    argv = [sys.executable, "-m", "tests.reliability.damage", str(spec_path), str(out_path)]
    if os.geteuid() == 0:
        drop = "-dac_override,-dac_read_search"
        argv = ["setpriv", "--bounding-set", drop, "--inh-caps", drop, "--", *argv]
    paths = [p for p in (os.environ.get("PYTHONPATH", ""), str(root)) if p]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}
    done = subprocess.run(argv, cwd=root, env=env, capture_output=True, text=True,
                          timeout=COMMAND_TIMEOUT_S * len(commands) * len(scenarios) + 600,
                          check=False)
    assert done.returncode == 0, done.stderr[-4000:]
    result: list[dict[str, Any]] = json.loads(out_path.read_text())
    return result


def iter_outcomes(scenarios: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    for scenario in scenarios:
        yield from scenario["outcomes"]


def _main(argv: list[str]) -> int:
    spec = json.loads(Path(argv[0]).read_text())
    _preload()
    started = time.monotonic()
    scenarios = run_scenarios(spec)
    Path(argv[1]).write_text(json.dumps(scenarios))
    sys.stderr.write(f"{len(scenarios)} scenarios in {time.monotonic() - started:.0f} s\n")
    return 0


def scenarios_for(per_file: int) -> list[tuple[str, str, str, str]]:
    """Each target in `per_file` of the ways, taken in turn from a different start for each
    target (all of them at len(DAMAGES)), so every way meets every area."""
    out: list[tuple[str, str, str, str]] = []
    for n, (area, what, pattern) in enumerate(TARGETS):
        kinds = [DAMAGES[(n + k) % len(DAMAGES)] for k in range(min(per_file, len(DAMAGES)))]
        out.extend((area, what, pattern, kind) for kind in kinds)
    return out


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
