"""Steps and fixtures every feature shares: machines (workspaces with their own DSH_HOME and
harness id), run through the composition root.

A `Machine` runs `chapters` in-process with its own environment (never `os.environ`, so two
machines can run at the same moment in two threads) and the CLI's exit-code contract. All
machines of one test are clones of the same project: their `.git/config` names the same
`origin`, so §2.3 gives them the same projectKey from different local paths.
"""

from __future__ import annotations

import io
import json
import threading
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from importlib.resources import files
from pathlib import Path
from typing import Any

import pytest
from dsh_chapters.bootstrap import App, bootstrap
from dsh_chapters.cli import Invocation, build_parser
from dsh_chapters.present import error_text
from dsh_chapters_core.errors import ChaptersError, UsageError
from dsh_chapters_core.pool_layout import to_pool
from dsh_chapters_core.ports.transport import KnowledgeProvider, ProviderContext, PushResult
from pytest_bdd import given, parsers, when

PROJECT_ORIGIN = "https://github.com/acme/widgets.git"
SAMPLE_SESSION_ID = "5e1f0a2c-7d3b-4c8e-9a61-0d2f3b4c5a6e"


@dataclass(frozen=True)
class CliResult:
    argv: tuple[str, ...]
    code: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)

    @property
    def text(self) -> str:
        return self.out + self.err


def session_id_for(label: str) -> str:
    """A stable UUID per human label ("a-1"), like a harness would mint."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"dsh-chapters-test/{label}"))


def sample_session_text(session_id: str) -> str:
    """The bundled demo session (3 turns on 2 tasks → 2 chapters), under another id."""
    text = (files("dsh_chapters") / "samples" / "demo-session.jsonl").read_text(encoding="utf-8")
    return text.replace(SAMPLE_SESSION_ID, session_id)


@dataclass
class Machine:
    """One machine: its own workspace, DSH_HOME and harness id."""

    name: str
    workspace: Path
    home: Path
    env: dict[str, str]
    results: list[CliResult] = field(default_factory=list)
    sessions: dict[str, str] = field(default_factory=dict)  # label -> session id

    @property
    def store(self) -> Path:
        return self.workspace / ".dsh-chapters"

    @property
    def mirror(self) -> Path:
        return self.workspace / ".dsh-knowledge"

    def app(self, **fakes: Any) -> App:
        return bootstrap(self.workspace, self.env, **fakes)

    def run(self, *argv: str, stdin: str = "") -> CliResult:
        """`chapters ARGV` in this machine, with `cli.main`'s exit codes (0, 1, 2)."""
        out, err = io.StringIO(), io.StringIO()
        try:
            args = build_parser().parse_args(list(argv))
            inv = Invocation(
                cwd=self.workspace,
                json=bool(getattr(args, "json", False)),
                env=dict(self.env),
                stdin=io.StringIO(stdin),
                stdout=out,
                stderr=err,
            )
            code = int(args.run(args, inv))
        except UsageError as exc:
            err.write(f"chapters: {error_text(exc)}\n")  # as cli.main words it
            code = 2
        except ChaptersError as exc:
            err.write(f"chapters: {error_text(exc)}\n")  # as cli.main words it
            code = 1
        result = CliResult(tuple(argv), code, out.getvalue(), err.getvalue())
        self.results.append(result)
        return result

    def ok(self, *argv: str) -> CliResult:
        result = self.run(*argv)
        assert result.code == 0, f"chapters {' '.join(argv)} exited {result.code}: {result.text}"
        return result

    def set_config(self, line: str) -> None:
        """Append one `key = value` line to the project config."""
        path = self.store / "config.toml"
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a", encoding="utf-8") as handle:
            handle.write(line.rstrip("\n") + "\n")

    def write_session(self, label: str) -> Path:
        sid = self.sessions.setdefault(label, session_id_for(label))
        path = self.workspace.parent / f"{self.name}-{label}.jsonl"
        path.write_text(sample_session_text(sid), encoding="utf-8")
        return path

    def archive(self, label: str) -> CliResult:
        return self.ok("archive", str(self.write_session(label)), "--json")

    def store_files(self) -> dict[str, bytes]:
        return {
            p.relative_to(self.store).as_posix(): p.read_bytes()
            for p in sorted(self.store.rglob("*"))
            if p.is_file()
        }

    def mirror_files(self) -> dict[str, bytes]:
        return {
            p.relative_to(self.mirror).as_posix(): p.read_bytes()
            for p in sorted(self.mirror.rglob("*"))
            if p.is_file() and not p.relative_to(self.mirror).as_posix().startswith(".git/")
        }


MakeMachine = Callable[[str], Machine]


def project_clone(root: Path, name: str) -> Machine:
    """A clone of the same project (§2.3: one origin, one projectKey) at `root/<name>`, with
    its own DSH_HOME and harness id: the machine the reliability and viewer suites start from."""
    workspace = root / name / "widgets"
    (workspace / ".git").mkdir(parents=True)
    (workspace / ".git" / "config").write_text(f'[remote "origin"]\n\turl = {PROJECT_ORIGIN}\n')
    home = root / name / "home"
    home.mkdir()
    env = {"DSH_HOME": str(home), "DSH_CHAPTERS_HARNESS_ID": name, "HOME": str(root / name),
           "PATH": "/usr/bin:/bin"}
    return Machine(name, workspace, home, env)


@pytest.fixture
def machines(tmp_path: Path) -> dict[str, Machine]:
    """The machines of this scenario, by name."""
    return {}


@pytest.fixture
def make_machine(tmp_path: Path, machines: dict[str, Machine]) -> Iterator[MakeMachine]:
    def make(name: str) -> Machine:
        if name in machines:
            return machines[name]
        root = tmp_path / "machines" / name
        workspace = root / "widgets"
        (workspace / ".git").mkdir(parents=True)
        (workspace / ".git" / "config").write_text(
            f'[remote "origin"]\n\turl = {PROJECT_ORIGIN}\n', encoding="utf-8"
        )
        home = root / "dsh-home"
        home.mkdir()
        env = {
            "DSH_HOME": str(home),
            "DSH_CHAPTERS_HARNESS_ID": name,
            "HOME": str(root),
            "PATH": "/usr/bin:/bin",
        }
        machines[name] = Machine(name, workspace, home, env)
        return machines[name]

    yield make


@given(parsers.parse('machine "{name}" archives session "{label}"'), target_fixture="last_archive")
@when(parsers.parse('machine "{name}" archives session "{label}"'), target_fixture="last_archive")
def machine_archives(make_machine: MakeMachine, name: str, label: str) -> CliResult:
    return make_machine(name).archive(label)


# Pushes at the same moment (shared by the git and TreeDX pool features).


class GatedProvider:
    """The real provider; its first push waits at a barrier until every racing machine is
    ready to push too, so pushes really happen at the same moment."""

    def __init__(self, inner: KnowledgeProvider, barrier: threading.Barrier) -> None:
        self._inner = inner
        self._barrier = barrier
        self._waited = False
        self.name = inner.name
        self.mirror_root = inner.mirror_root

    def __getattr__(self, verb: str) -> Any:
        return getattr(self._inner, verb)

    def push(self) -> PushResult:
        if not self._waited:
            self._waited = True
            self._barrier.wait()
        return self._inner.push()


class GatedFactory:
    def __init__(self, inner: Any, barrier: threading.Barrier) -> None:
        self._inner = inner
        self._barrier = barrier
        self.name = inner.name
        self.schemes = inner.schemes

    def matches(self, remote: str) -> bool:
        return bool(self._inner.matches(remote))

    def create(self, context: ProviderContext) -> KnowledgeProvider:
        return GatedProvider(self._inner.create(context), self._barrier)  # type: ignore[return-value]


def published_files(machine: Machine) -> dict[str, bytes]:
    """Pool path -> bytes of every store file this machine may publish (its own and artifacts)."""
    app = machine.app()
    key = app.identity.project_key
    meta = app.store.session_meta()
    out: dict[str, bytes] = {}
    for rel, data in machine.store_files().items():
        entry = to_pool(rel, key)
        if entry is None:
            continue
        owner = meta.get(entry.session_id, {}).get("harnessId", machine.name)
        if entry.session_id and owner != machine.name:
            continue
        out[entry.pool_path] = data
    return out
