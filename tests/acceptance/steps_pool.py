"""Steps of `shared_pool.feature`: machines, real pools, and the real `git` CLI as the judge.

Pools are real: a bare repository on a local path, or `git http-backend` on loopback (the git
adapter's test server, token-checked) behind a TCP switch that can refuse connections, as an
unreachable host does. Every check of the pool's history is made by the `git` binary.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import socket
import stat
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from dsh_chapters.plugins import load_provider_factories
from dsh_chapters.services import pool as knowledge_pool
from dsh_chapters_core.sync.state import SyncReport
from pytest_bdd import given, parsers, then, when

from tests.acceptance.steps_common import (
    CliResult,
    GatedFactory,
    Machine,
    MakeMachine,
    published_files,
)
from tests.adapters.git.conftest import GitCli, GitHttpServer

POOL_REPO = "widgets.git"


# ---------------------------------------------------------------------------------------------
# Real pools


class LoopbackSwitch:
    """A TCP forwarder on a fixed 127.0.0.1 port in front of a server. `down()` closes the
    port (connections are refused, as from an unreachable host); `up()` opens it again."""

    def __init__(self, target_port: int) -> None:
        self.target = target_port
        self.port = 0
        self._stop = threading.Event()
        self._listener: socket.socket | None = None
        self._acceptor: threading.Thread | None = None
        self._live: set[socket.socket] = set()
        self._guard = threading.Lock()
        self.up()

    def up(self) -> None:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(64)
        listener.settimeout(0.05)
        self.port = int(listener.getsockname()[1])
        self._listener = listener
        self._stop.clear()
        self._acceptor = threading.Thread(target=self._accept, args=(listener,), daemon=True)
        self._acceptor.start()

    def down(self) -> None:
        self._stop.set()
        if self._acceptor is not None:
            self._acceptor.join(timeout=10)
            self._acceptor = None
        if self._listener is not None:
            self._listener.close()
            self._listener = None
        with self._guard:
            live = list(self._live)
        for sock in live:  # established connections drop too
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def _accept(self, listener: socket.socket) -> None:
        while not self._stop.is_set():
            try:
                client, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            client.settimeout(None)
            try:
                upstream = socket.create_connection(("127.0.0.1", self.target), timeout=30)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            with self._guard:
                self._live.update((client, upstream))
            threading.Thread(target=self._pipe, args=(client, upstream), daemon=True).start()

    def _pipe(self, client: socket.socket, upstream: socket.socket) -> None:
        back = threading.Thread(target=self._pump, args=(upstream, client), daemon=True)
        back.start()
        self._pump(client, upstream)
        back.join(timeout=60)
        with self._guard:
            self._live.difference_update((client, upstream))
        client.close()
        upstream.close()

    @staticmethod
    def _pump(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        with contextlib.suppress(OSError):
            dst.shutdown(socket.SHUT_WR)


@dataclass
class Pool:
    remote: str
    path: Path  # the bare repository the pool is
    token: str = ""
    server: GitHttpServer | None = None
    switch: LoopbackSwitch | None = None


@dataclass
class PoolServers:
    started: list[tuple[GitHttpServer, LoopbackSwitch]] = field(default_factory=list)


@pytest.fixture
def pool_servers() -> Iterator[PoolServers]:
    servers = PoolServers()
    yield servers
    for server, switch in servers.started:
        switch.down()
        server.stop()


@pytest.fixture
def git_cli(tmp_path: Path) -> GitCli:
    home = tmp_path / "git-cli-home"
    home.mkdir(exist_ok=True)
    return GitCli(home)


@given("a local-path pool", target_fixture="pool")
def local_path_pool(tmp_path: Path) -> Pool:
    path = tmp_path / "shared-drive" / POOL_REPO  # absent: the first sync creates it
    return Pool(remote=str(path), path=path)


@given("an HTTP pool served by git http-backend on loopback", target_fixture="pool")
def http_pool(tmp_path: Path, pool_servers: PoolServers, git_cli: GitCli) -> Pool:
    root = tmp_path / "served"
    root.mkdir()
    backend_home = tmp_path / "backend-home"
    backend_home.mkdir()
    token = "tok-" + secrets.token_hex(16)
    server = GitHttpServer(root, backend_home, token).start()
    switch = LoopbackSwitch(server.port)
    pool_servers.started.append((server, switch))
    path = server.create_repo(POOL_REPO, git_cli)
    return Pool(
        remote=f"http://127.0.0.1:{switch.port}/{POOL_REPO}",
        path=path,
        token=token,
        server=server,
        switch=switch,
    )


@given(parsers.parse('machine "{name}" linked to the pool'))
def linked(make_machine: MakeMachine, pool: Pool, name: str) -> None:
    result = make_machine(name).ok("link", pool.remote)
    assert "linked" in result.out


@given(parsers.parse('machine "{name}" linked to the pool with the pool\'s token'))
def linked_with_token(make_machine: MakeMachine, pool: Pool, name: str) -> None:
    result = make_machine(name).ok("link", pool.remote, pool.token)
    assert pool.token not in result.text


@given(parsers.parse('machine "{name}" linked to the pool with the token "{token}"'))
def linked_with_given_token(make_machine: MakeMachine, pool: Pool, name: str, token: str) -> None:
    machine = make_machine(name)
    result = machine.ok("link", pool.remote, token)
    assert token not in result.text
    # §2.1: the token lives in the credential store, 0600, outside the workspace.
    stored = next((machine.home / "dsh-chapters" / "credentials").iterdir())
    assert stat.S_IMODE(stored.stat().st_mode) == 0o600
    assert stored.read_text(encoding="utf-8").strip() == token


@given(parsers.parse('machine "{name}" pushes right after every archive'))
def no_debounce(make_machine: MakeMachine, name: str) -> None:
    make_machine(name).set_config("syncDebounceMs = 0")


@given(parsers.parse('machine "{name}" syncs'), target_fixture="last_sync")
@when(parsers.parse('machine "{name}" syncs'), target_fixture="last_sync")
def machine_syncs(make_machine: MakeMachine, name: str) -> CliResult:
    return make_machine(name).run("sync", "--json")


@when("the pool goes offline")
def pool_offline(pool: Pool) -> None:
    assert pool.switch is not None
    pool.switch.down()


@when("the pool comes back")
def pool_back(pool: Pool) -> None:
    assert pool.switch is not None
    pool.switch.up()


# ---------------------------------------------------------------------------------------------
# Two pushes at the same moment: both machines commit on the same pool head, then push together.


@when(
    parsers.parse('machines "{first}" and "{second}" sync at the same moment'),
    target_fixture="race",
)
def sync_together(machines: dict[str, Machine], first: str, second: str) -> dict[str, SyncReport]:
    barrier = threading.Barrier(2, timeout=60)
    reports: dict[str, SyncReport] = {}
    errors: list[BaseException] = []

    def run(machine: Machine) -> None:
        try:
            gated = tuple(GatedFactory(f, barrier) for f in load_provider_factories())
            reports[machine.name] = knowledge_pool.run_sync(machine.app(provider_factories=gated))
        except BaseException as exc:
            errors.append(exc)
            barrier.abort()

    threads = [threading.Thread(target=run, args=(machines[n],)) for n in (first, second)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not errors, errors
    return reports


# ---------------------------------------------------------------------------------------------
# Checks


def _project_key(machine: Machine) -> str:
    return str(machine.app().identity.project_key)


def pool_clone(pool: Pool, git_cli: GitCli, tmp_path: Path) -> dict[str, bytes]:
    target = tmp_path / f"clone-{secrets.token_hex(4)}"
    git_cli("clone", "--quiet", pool.path, target)
    files = {
        p.relative_to(target).as_posix(): p.read_bytes()
        for p in sorted(target.rglob("*"))
        if p.is_file() and not p.relative_to(target).as_posix().startswith(".git/")
    }
    shutil.rmtree(target)
    return files


@then(
    parsers.parse(
        'machine "{reader}" lists the pool\'s chapters of session "{label}" written by "{writer}"'
    )
)
def lists_pool(machines: dict[str, Machine], reader: str, label: str, writer: str) -> None:
    sid = machines[writer].sessions[label]
    listed = [
        c for c in machines[reader].ok("list", "--pool", "--json").json() if c["sessionId"] == sid
    ]
    assert len(listed) == 2 and {c["harnessId"] for c in listed} == {writer}  # 3 turns, 2 tasks
    text = machines[reader].ok("list", "--pool").out
    assert f"{writer}  {sid[:8]}" in text and "from 1 machine(s)" in text


@then(parsers.parse('machine "{reader}" has the chapters of session "{label}" in its own store'))
def has_chapters(machines: dict[str, Machine], reader: str, label: str) -> None:
    writer = next(m for m in machines.values() if label in m.sessions)
    sid = writer.sessions[label]
    own = [c for c in machines[reader].ok("list", "--json").json() if c["sessionId"] == sid]
    assert len(own) == 2  # the demo session: 3 turns, 2 tasks
    theirs = {k: v for k, v in writer.store_files().items() if k.startswith(f"{sid}/chapters/")}
    mine = {
        k: v for k, v in machines[reader].store_files().items() if k.startswith(f"{sid}/chapters/")
    }
    assert mine == theirs and len(mine) == 2  # verbatim, byte for byte


@then(
    parsers.parse(
        'machine "{reader}" finds the chapters of session "{label}" by searching "{query}"'
    )
)
def finds_by_search(machines: dict[str, Machine], reader: str, label: str, query: str) -> None:
    writer = next(m for m in machines.values() if label in m.sessions)
    sid = writer.sessions[label]
    answer = machines[reader].ok("search", *query.split(), "--json").json()
    paths = [m["path"] for m in answer["matches"]]
    assert answer["total"] >= 1 and paths and f"/{sid}/" in paths[0], (
        answer
    )  # A's chapter ranks first


@then(parsers.parse('machine "{reader}" does not publish machine "{writer}"\'s files as its own'))
def not_republished(
    machines: dict[str, Machine], reader: str, writer: str, last_sync: CliResult
) -> None:
    assert last_sync.code == 0 and last_sync.json()["publishedNew"] == 0
    record = json.loads(next(machines[reader].store.glob("*/session.json")).read_text())
    assert record["harnessId"] == writer and record["source"] == "pool"
    again = machines[reader].ok("sync", "--json").json()
    assert again["publishedNew"] == 0 and again["publishedChanged"] == 0


@then(parsers.parse('the pool passes "git fsck --strict"'))
def fsck(pool: Pool, git_cli: GitCli) -> None:
    git_cli("fsck", "--strict", "--no-dangling", cwd=pool.path)


def _history(pool: Pool, git_cli: GitCli) -> list[tuple[str, list[str]]]:
    log = git_cli("log", "--format=%an%x09%P", "main", cwd=pool.path)
    return [(line.split("\t")[0], line.split("\t")[1].split()) for line in log.splitlines() if line]


@then(parsers.parse('the pool\'s history is fast-forward only and authored by "{author}"'))
def history_one(pool: Pool, git_cli: GitCli, author: str) -> None:
    history = _history(pool, git_cli)
    assert history and all(len(parents) <= 1 for _, parents in history)  # never a merge
    assert {a for a, _ in history} == {author}


@then(
    parsers.parse(
        'the pool\'s history is fast-forward only and authored by "{first}" and "{second}"'
    )
)
def history_two(pool: Pool, git_cli: GitCli, first: str, second: str) -> None:
    history = _history(pool, git_cli)
    assert history and all(len(parents) <= 1 for _, parents in history)
    assert {a for a, _ in history} == {first, second}


@then("a git clone of the pool shows the pool layout")
def clone_layout(pool: Pool, git_cli: GitCli, tmp_path: Path, machines: dict[str, Machine]) -> None:
    files = pool_clone(pool, git_cli, tmp_path)
    key = _project_key(machines["A"])
    sid = machines["A"].sessions["a-1"]
    assert f'projectKey: "{key}"' in files["project.yml"].decode()
    chapters = [p for p in files if p.startswith(f"chapters/{key}/{sid}/")]
    assert len(chapters) == 2 and all(
        p.rsplit("/", 1)[1][:4].rstrip("-").isdigit() for p in chapters
    )
    assert f"collections/{key}/{sid}.jsonl" in files
    assert {p.split("/", 1)[0] for p in files} <= {
        "project.yml",
        "chapters",
        "collections",
        "artifacts",
        "rules",
        "edits",
        "index",  # §10.2: the derived Layer-2 index sync commits
        "topics",
    }


@then(parsers.parse("the archive succeeded and wrote {count:d} chapters"))
def archive_ok(last_archive: CliResult, count: int) -> None:
    data = last_archive.json()
    assert last_archive.code == 0 and len(data["chapters"]) == count
    assert data["pool"]["ok"] is False and data["pool"]["failureCode"] == "network"


@then(
    parsers.parse(
        'machine "{name}"\'s status says local-only with the code "{code}" and {pending:d} pending'
    )
)
def status_local_only(make_machine: MakeMachine, name: str, code: str, pending: int) -> None:
    machine = make_machine(name)
    data = machine.ok("status", "--json").json()["pool"]
    assert data["localOnly"] is True and data["pending"] == pending
    assert data["lastSync"]["failureCode"] == code
    text = " ".join(machine.ok("status").out.split())  # a line past 100 columns folds
    assert "local-only — " in text and f": {code} (" in text and f"· {pending} pending" in text
    assert "next: " in text


@then("the sync pushed and nothing is pending")
def pushed_clean(last_sync: CliResult) -> None:
    data = last_sync.json()
    assert last_sync.code == 0 and data["ok"] and data["pushed"] and data["pending"] == 0


@then(parsers.parse('the pool holds every file machine "{name}" published'))
def pool_holds(
    pool: Pool, git_cli: GitCli, tmp_path: Path, machines: dict[str, Machine], name: str
) -> None:
    files = pool_clone(pool, git_cli, tmp_path)
    ours = published_files(machines[name])
    assert ours and {p: files.get(p) for p in ours} == ours


@then("exactly one of them diverged, rebuilt and pushed")
def one_diverged(race: dict[str, SyncReport]) -> None:
    assert all(r.ok and r.pushed for r in race.values()), {n: r.line() for n, r in race.items()}
    diverged = [n for n, r in race.items() if "push diverged" in r.steps]
    assert len(diverged) == 1 and race[diverged[0]].rebuilds == 1, {
        n: r.line() for n, r in race.items()
    }


@then("after one more sync each, both mirrors hold the same files")
def converge(machines: dict[str, Machine]) -> None:
    for machine in machines.values():
        machine.ok("sync")
    mirrors = [m.mirror_files() for m in machines.values()]
    assert mirrors[0] == mirrors[1] and len(mirrors[0]) > 1


@then("no file of either store is missing from the pool")
def nothing_lost(pool: Pool, git_cli: GitCli, tmp_path: Path, machines: dict[str, Machine]) -> None:
    files = pool_clone(pool, git_cli, tmp_path)
    for machine in machines.values():
        ours = published_files(machine)
        assert ours and {p: files.get(p) for p in ours} == ours, machine.name
    # and every machine's store holds every other machine's chapters
    chapters = {p for p in files if p.startswith("chapters/")}
    for machine in machines.values():
        key = _project_key(machine)
        have = {
            f"chapters/{key}/{rel.split('/')[0]}/{rel.rsplit('/', 1)[1]}"
            for rel in machine.store_files()
            if "/chapters/" in rel
        }
        assert chapters <= have, machine.name


@then(parsers.parse('the sync fails with the code "{code}" and a re-link instruction'))
def sync_fails(last_sync: CliResult, code: str) -> None:
    data = last_sync.json()
    assert last_sync.code == 1 and data["ok"] is False and data["failureCode"] == code
    assert "chapters link <url> < new-token-file" in last_sync.err


@then(
    parsers.parse('the token "{token}" appears in no output, no workspace file and no server log')
)
def token_never_echoed(machines: dict[str, Machine], pool: Pool, token: str) -> None:
    needle = token.encode()
    for machine in machines.values():
        for result in machine.results:
            assert token not in result.text, result.argv
        leaked = [
            str(p) for p in machine.workspace.rglob("*") if p.is_file() and needle in p.read_bytes()
        ]
        assert not leaked, leaked
        assert (machine.mirror / ".git").is_dir() or not machine.mirror.exists()
    assert pool.server is not None and not any(token in line for line in pool.server.log)
    assert os.path.isdir(pool.path)
