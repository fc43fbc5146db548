"""Steps of `treedx_pool.feature`: machines sharing a TreeDX pool served by the adapter's fake.

The fake (`dsh_chapters_treedx.testing.FakeTreeDX`) is a real HTTP server on 127.0.0.1 that
behaves like the real service (treedx/CONTRACT.md); machines reach it only through `chapters`
and the composition root. The fake is also the judge: its tree, commit log, per-route
request counts and its record of heads a commit dropped (the server has no compare-and-swap).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest
from dsh_chapters.plugins import load_provider_factories
from dsh_chapters.services import pool as knowledge_pool
from dsh_chapters_core.sync.state import SyncReport
from dsh_chapters_treedx.testing import FakeTreeDX
from pytest_bdd import given, parsers, then, when

from tests.acceptance.steps_common import (
    CliResult,
    GatedFactory,
    Machine,
    MakeMachine,
    published_files,
)

TREEDX_REPOSITORY = "widgets-pool"
LIST_ROUTE = "/paths/list"
WORKSPACES_ROUTE = "POST /api/v1/repos/{repo_id}/workspaces"


@dataclass
class TreeDXPool:
    """What the generic pool steps read (`remote`, `token`), plus the fake behind it."""

    fake: FakeTreeDX
    remote: str
    token: str
    repository: str = TREEDX_REPOSITORY
    tokens: list[str] = field(default_factory=list)  # every token ever handed out
    out_of_band: dict[str, bytes] = field(default_factory=dict)


@pytest.fixture
def treedx_service() -> Iterator[FakeTreeDX]:
    fake = FakeTreeDX().start()
    try:
        yield fake
    finally:
        fake.stop()
    assert fake.errors == []


@given("a TreeDX pool served by the fake on loopback", target_fixture="pool")
def treedx_pool(treedx_service: FakeTreeDX) -> TreeDXPool:
    token = treedx_service.issue_token()
    return TreeDXPool(treedx_service, treedx_service.remote(TREEDX_REPOSITORY), token,
                      tokens=[token])


def _mirror_pool_files(machine: Machine) -> dict[str, bytes]:
    """The mirror as the read path sees it: pool files, not the provider's dot-files."""
    root = machine.mirror
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and not p.relative_to(root).parts[0].startswith(".")}


# --- machines and the service -----------------------------------------------------------------


@given(parsers.parse('machine "{name}" gives each TreeDX request {ms:d} ms'))
def treedx_request_budget(make_machine: MakeMachine, name: str, ms: int) -> None:
    make_machine(name).set_config(f"treedxFetchTimeoutMs = {ms}")


@given(parsers.parse('machines "{a}", "{b}" and "{c}" linked to the pool, retrying a taken lease '
                     'every {ms:d} ms'))
def treedx_three_linked(make_machine: MakeMachine, pool: TreeDXPool, a: str, b: str, c: str,
                 ms: int) -> None:
    for name in (a, b, c):
        machine = make_machine(name)
        machine.set_config(f"treedxLeaseRetryDelayMs = {ms}")
        machine.set_config("treedxLeaseRetries = 20")
        result = machine.ok("link", pool.remote, pool.token)
        assert pool.token not in result.text


@when("the TreeDX service goes down")
def treedx_service_down(pool: TreeDXPool) -> None:
    pool.fake.stop()


@when("the TreeDX service comes back")
def treedx_service_back(pool: TreeDXPool) -> None:
    pool.fake.start()


@when(parsers.parse('the TreeDX service answers "server_busy" {times:d} times with retryAfterMs '
                    '{ms:d}'))
def treedx_service_busy(pool: TreeDXPool, times: int, ms: int) -> None:
    pool.fake.reset_counts()
    pool.fake.busy(times, ms)


@when("the TreeDX service is no longer busy")
def treedx_service_not_busy(pool: TreeDXPool) -> None:
    pool.fake.busy(0, 0)


@when("the TreeDX pool's token is revoked")
def treedx_revoke(pool: TreeDXPool) -> None:
    pool.fake.revoke(pool.token)


@when(parsers.parse('machine "{name}" links the pool again with a fresh token'))
@when(parsers.parse('machine "{name}" links the pool with a fresh token'))
def treedx_relink(make_machine: MakeMachine, pool: TreeDXPool, name: str) -> None:
    fresh = pool.fake.issue_token()
    pool.tokens.append(fresh)
    pool.token = fresh
    result = make_machine(name).ok("link", pool.remote, fresh)
    assert fresh not in result.text


@when(parsers.parse('the TreeDX pool\'s head moves out of band right after machine "{name}"\'s '
                    'next pull'))
def treedx_head_moves(make_machine: MakeMachine, pool: TreeDXPool, name: str) -> None:
    key = make_machine(name).app().identity.project_key
    path = f"chapters/{key}/0b5e55ed-0000-4000-8000-00000000000b/001-out-of-band.md"
    data = (b'---\nharnessId: "Z"\ntitle: "written by another client"\n---\n\n'
            b"a commit no machine of this scenario made\n")
    pool.out_of_band = {path: data}
    # The pull's first request reads the head; the move lands right after it is answered.
    pool.fake.after(LIST_ROUTE, 1, lambda: pool.fake.move_head(pool.repository, {path: data}))


# --- three pushes at once ---------------------------------------------------------------------


@when(parsers.parse('machines "{a}", "{b}" and "{c}" sync at the same moment while each commit '
                    'holds the lease {ms:d} ms'), target_fixture="treedx_race")
def treedx_three_at_once(machines: dict[str, Machine], pool: TreeDXPool, a: str, b: str, c: str,
                  ms: int) -> dict[str, SyncReport]:
    names = (a, b, c)
    barrier = threading.Barrier(len(names), timeout=60)
    reports: dict[str, SyncReport] = {}
    errors: list[BaseException] = []

    def run(machine: Machine) -> None:
        try:
            gated = tuple(GatedFactory(f, barrier) for f in load_provider_factories())
            reports[machine.name] = knowledge_pool.run_sync(machine.app(provider_factories=gated))
        except BaseException as exc:
            errors.append(exc)
            barrier.abort()

    pool.fake.reset_counts()
    pool.fake.slow(ms / 1000, route="/commit")  # the winner holds the lease that long
    threads = [threading.Thread(target=run, args=(machines[n],)) for n in names]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=120)
    finally:
        pool.fake.slow(0)
    assert not errors, errors
    return reports


# --- checks -----------------------------------------------------------------------------------


@then(parsers.parse('machine "{reader}" finds the chapters of session "{label}" by searching '
                    '"{query}"'))
def treedx_finds(machines: dict[str, Machine], reader: str, label: str, query: str) -> None:
    writer = next(m for m in machines.values() if label in m.sessions)
    sid = writer.sessions[label]
    answer = machines[reader].ok("search", query, "--json").json()
    hits = [m for m in answer["matches"] if f"/{sid}/" in m["path"]]
    assert hits and answer["total"] >= len(hits), answer


@then(parsers.parse('the TreeDX pool holds every file machine "{name}" published'))
def treedx_pool_holds(machines: dict[str, Machine], pool: TreeDXPool, name: str) -> None:
    tree = pool.fake.tree(pool.repository)
    ours = published_files(machines[name])
    assert ours and {p: tree.get(p) for p in ours} == ours


@then("no mirror holds the TreeDX keep file or a token")
def treedx_clean_mirrors(machines: dict[str, Machine], pool: TreeDXPool) -> None:
    assert ".treedxkeep" in pool.fake.tree(pool.repository)
    for machine in machines.values():
        assert not (machine.mirror / ".treedxkeep").exists()
        state = json.loads((machine.mirror / ".treedx-state.json").read_text(encoding="utf-8"))
        assert set(state) == {"origin", "head", "baseline", "staged", "offline", "repoId",
                              "unsafe", "lease"}
        assert state["lease"] is None  # every push saw its lease end
        assert ".treedxkeep" not in state["baseline"]
        for path in machine.mirror.rglob("*"):
            if path.is_file():
                assert pool.token.encode() not in path.read_bytes(), path


@then(parsers.parse("the TreeDX lease was contended, and every machine pushed after at most "
                    "{rebuilds:d} rebuilds"))
def treedx_contended(treedx_race: dict[str, SyncReport], pool: TreeDXPool, rebuilds: int) -> None:
    lines = {n: r.line() for n, r in treedx_race.items()}
    assert all(r.ok and r.pushed for r in treedx_race.values()), lines
    refused = [e for e in pool.fake.exchanges
               if f"{e.method} {e.route}" == WORKSPACES_ROUTE and e.status == 409]
    assert refused, "no second writer ever met the lease"
    assert all(e.body["error"]["code"] == "conflict" for e in refused)
    counts = sorted(r.rebuilds for r in treedx_race.values())
    assert counts[0] == 0 and counts[-1] <= rebuilds and sum(counts) >= 2, lines


@then("after one more sync each, the three mirrors hold the same files")
def treedx_three_converge(machines: dict[str, Machine]) -> None:
    for machine in machines.values():
        machine.ok("sync")
    mirrors = [_mirror_pool_files(m) for m in machines.values()]
    assert len(mirrors) == 3 and mirrors[0] == mirrors[1] == mirrors[2]
    assert len(mirrors[0]) > 3


@then("every store holds every machine's chapters and the TreeDX pool lost nothing")
def treedx_nothing_lost(machines: dict[str, Machine], pool: TreeDXPool) -> None:
    tree = pool.fake.tree(pool.repository)
    chapters = {p for p in tree if p.startswith("chapters/")}
    written = set()
    for machine in machines.values():
        ours = published_files(machine)
        assert ours and {p: tree.get(p) for p in ours} == ours, machine.name
        written |= {p for p in ours if p.startswith("chapters/")}
    assert chapters == written and len({p.split("/")[2] for p in chapters}) == len(machines)
    for machine in machines.values():
        key = machine.app().identity.project_key
        have = {f"chapters/{key}/{rel.split('/')[0]}/{rel.rsplit('/', 1)[1]}"
                for rel in machine.store_files() if "/chapters/" in rel}
        assert chapters <= have, machine.name


@then("no TreeDX commit was written over a head its writer had not seen")
def treedx_never_overwritten(pool: TreeDXPool) -> None:
    assert pool.fake.overwritten(pool.repository) == []
    log = pool.fake.commit_log(pool.repository)
    assert log[-1][1] == "treedx"  # the repository's own .treedxkeep commit, at the root


@then(parsers.parse('machine "{name}"\'s sync saw the push diverge, rebuilt the mirror and pushed'))
def treedx_diverged_and_rebuilt(last_sync: CliResult) -> None:
    data = last_sync.json()
    assert last_sync.code == 0 and data["ok"] and data["pushed"], data["line"]
    steps = data["steps"]
    assert "push diverged" in steps and "rebuilt" in steps and data["rebuilds"] == 1, steps
    assert steps.index("push diverged") < steps.index("rebuilt") < steps.index("pushed")


@then("the TreeDX pool still holds the out-of-band file")
def treedx_out_of_band_kept(pool: TreeDXPool) -> None:
    tree = pool.fake.tree(pool.repository)
    assert pool.out_of_band and all(tree.get(p) == d for p, d in pool.out_of_band.items())


@then(parsers.parse("the TreeDX service answered busy {times:d} times"))
def treedx_answered_busy(pool: TreeDXPool, times: int) -> None:
    busy = [e for e in pool.fake.exchanges
            if e.status == 503 and e.body["error"]["code"] == "server_busy"]
    assert len(busy) == times


@then("no TreeDX token appears in any output, workspace file or answer of the service")
def treedx_no_token_anywhere(machines: dict[str, Machine], pool: TreeDXPool) -> None:
    assert len(pool.tokens) >= 2
    answers = json.dumps([e.body for e in pool.fake.exchanges])
    for token in pool.tokens:
        needle = token.encode()
        assert token not in answers
        for machine in machines.values():
            for result in machine.results:
                assert token not in result.text, result.argv
            leaked = [str(p) for p in machine.workspace.rglob("*")
                      if p.is_file() and needle in p.read_bytes()]
            assert not leaked, leaked


@given(parsers.parse('machine "{name}" sets knowledgeProvider to "{value}"'))
@when(parsers.parse('machine "{name}" sets knowledgeProvider to "{value}"'))
def treedx_knowledge_provider(make_machine: MakeMachine, name: str, value: str) -> None:
    machine = make_machine(name)
    machine.app().factories.write_project_setting(machine.store, "knowledgeProvider", value)


@then(parsers.parse('linking machine "{name}" to the pool is refused, naming the "{provider}" '
                    'provider'))
def treedx_link_refused(make_machine: MakeMachine, pool: TreeDXPool, name: str,
                        provider: str) -> None:
    machine = make_machine(name)
    result = machine.run("link", pool.remote, pool.token)
    assert result.code == 2 and f"belongs to {provider}" in result.err, result.text
    assert pool.token not in result.text
    config = (machine.store / "config.toml").read_text(encoding="utf-8")
    assert "knowledgeRemote" not in config
    assert not (machine.home / "dsh-chapters" / "credentials").exists() or not any(
        (machine.home / "dsh-chapters" / "credentials").iterdir())


# --- counts taken from the stores, so the composer's chapter count never leaks in here ------


def _session_pool_files(machine: Machine, label: str) -> dict[str, bytes]:
    """What this machine publishes for one session: its chapters and its collections file."""
    sid = machine.sessions[label]
    return {p: d for p, d in published_files(machine).items() if f"/{sid}" in p}


@then(parsers.parse('machine "{reader}" lists every chapter of session "{label}" from the pool, '
                    'written by "{writer}"'))
def treedx_lists_pool(machines: dict[str, Machine], reader: str, label: str, writer: str) -> None:
    sid = machines[writer].sessions[label]
    published = _session_pool_files(machines[writer], label)
    chapters = [p for p in published if p.startswith("chapters/")]
    listed = [c for c in machines[reader].ok("list", "--pool", "--json").json()
              if c["sessionId"] == sid]
    assert chapters and len(listed) == len(chapters)
    assert {c["harnessId"] for c in listed} == {writer}


@then(parsers.parse('the archive of session "{label}" succeeded while the pool was unreachable'))
def treedx_archive_ok(machines: dict[str, Machine], last_archive: CliResult, label: str) -> None:
    data = last_archive.json()
    assert last_archive.code == 0 and data["chapters"], last_archive.text
    assert data["pool"]["ok"] is False and data["pool"]["failureCode"] == "network"


@then(parsers.parse('machine "{name}"\'s status says local-only with the code "{code}" and '
                    'session "{label}" pending'))
def treedx_status_pending(machines: dict[str, Machine], pool: TreeDXPool, name: str, code: str,
                          label: str) -> None:
    machine = machines[name]
    waiting = _session_pool_files(machine, label)
    tree = pool.fake.tree(pool.repository)
    assert waiting and not set(waiting) & set(tree)  # none of it reached the pool
    data = machine.ok("status", "--json").json()["pool"]
    assert data["localOnly"] is True and data["lastSync"]["failureCode"] == code
    assert data["pending"] == len(waiting), (data["pending"], sorted(waiting))
    text = machine.ok("status").out
    assert f": {code} (" in text and f"· {len(waiting)} pending" in text and "next: " in text


@then(parsers.parse('machine "{reader}" holds every chapter of session "{label}" in its own '
                    'store, byte for byte'))
def treedx_has_chapters(machines: dict[str, Machine], reader: str, label: str) -> None:
    writer = next(m for m in machines.values() if label in m.sessions)
    sid = writer.sessions[label]
    theirs = {k: v for k, v in writer.store_files().items() if k.startswith(f"{sid}/chapters/")}
    mine = {k: v for k, v in machines[reader].store_files().items()
            if k.startswith(f"{sid}/chapters/")}
    own = [c for c in machines[reader].ok("list", "--json").json() if c["sessionId"] == sid]
    assert theirs and mine == theirs and len(own) == len(theirs)  # verbatim
