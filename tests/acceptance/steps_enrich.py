"""Steps of `enrichment.feature`: machines, the recorded-tape model server, real pools.

The model is the tape server on loopback (real HTTP, canned answers keyed by the request's
hash, a loud 503 for any request no tape knows). A scenario fails at teardown if the server
saw a request it had no tape for, so a drifted prompt is named, never silently skipped.
"""

from __future__ import annotations

import hashlib
import json
import re
import secrets
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from dsh_chapters.services import enrich as enrichment
from dsh_chapters_core.enrich.chapter import parse_chapter_file
from dsh_chapters_core.enrich.queue import DrainCause
from dsh_chapters_harness.testing.tape_server import TapeServer, load_tape
from pytest_bdd import given, parsers, then, when

from tests.acceptance.steps_common import CliResult, Machine, MakeMachine, sample_session_text
from tests.acceptance.steps_pool import Pool
from tests.adapters.git.conftest import GitCli

TAPES = Path(__file__).resolve().parents[1] / "fixtures" / "tapes"
TEST_TIMEOUT_MS = 1000  # the slow tape answers after 5000 ms


# ---------------------------------------------------------------------------------------------
# The model server


@dataclass
class ModelServers:
    started: list[TapeServer] = field(default_factory=list)


@pytest.fixture
def model_servers() -> Iterator[ModelServers]:
    servers = ModelServers()
    yield servers
    misses = [m for s in servers.started for m in s.misses]
    for server in servers.started:
        server.stop()
    assert not misses, "the model server got requests no tape answers:\n" + "\n".join(misses)


@given(parsers.parse('a model server playing the tape "{tape}"'), target_fixture="model_server")
def model_server(model_servers: ModelServers, tape: str) -> TapeServer:
    server = TapeServer(tapes=(load_tape(TAPES / f"{tape}.json"),)).start()
    model_servers.started.append(server)
    return server


@when("the model server stops")
def model_server_stops(model_server: TapeServer) -> None:
    model_server.stop()


@then("the model got no request")
def no_request(model_server: TapeServer) -> None:
    assert model_server.count == 0, model_server.requests


@then(parsers.parse('the model got {per:d} requests per chapter of machine "{name}"'))
def requests_per_chapter(make_machine: MakeMachine, model_server: TapeServer, per: int,
                         name: str) -> None:
    chapters = chapter_files(make_machine(name))
    assert chapters and model_server.count == per * len(chapters)


# ---------------------------------------------------------------------------------------------
# Machine configuration


def set_key(machine: Machine, key: str, literal: str) -> None:
    """`key = <TOML literal>` in the project config, replacing an earlier value of the key."""
    path = machine.store / "config.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = path.read_text(encoding="utf-8").splitlines() if path.is_file() else []
    lines = [line for line in lines if line.split("=", 1)[0].strip() != key]
    lines.append(f"{key} = {literal}")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def _enrich_with(machine: Machine, server: TapeServer, route: str, trigger: str) -> None:
    set_key(machine, "enrichmentModel", json.dumps(route))
    set_key(machine, "enrichmentBaseUrl", json.dumps(server.url))
    set_key(machine, "enrichmentTrigger", json.dumps(trigger))
    set_key(machine, "enrichmentTimeoutMs", str(TEST_TIMEOUT_MS))


@given(parsers.parse('machine "{name}" enriches with the model "{route}"'))
def enriches_with(make_machine: MakeMachine, model_server: TapeServer, name: str,
                  route: str) -> None:
    # Drained by hand in these scenarios: a background drain would race the assertions.
    _enrich_with(make_machine(name), model_server, route, "manual")


@given(parsers.parse('machine "{name}" enriches with the model "{route}" on the trigger '
                     '"{trigger}"'))
def enriches_on_trigger(make_machine: MakeMachine, model_server: TapeServer, name: str,
                        route: str, trigger: str) -> None:
    _enrich_with(make_machine(name), model_server, route, trigger)


@when(parsers.parse('machine "{name}" switches to the model "{route}"'))
def switch_model(make_machine: MakeMachine, name: str, route: str) -> None:
    result = make_machine(name).ok("enrich", "model", route, "--json")
    assert result.json()["model"] == route and result.json()["origin"] == "override"


@given(parsers.parse('machine "{name}" turns enrichment off'))
def turns_off(make_machine: MakeMachine, name: str) -> None:
    set_key(make_machine(name), "enrichmentEnabled", "false")


@given(parsers.parse('machine "{name}" applies vocabulary merges'))
def applies_vocabulary(make_machine: MakeMachine, name: str) -> None:
    set_key(make_machine(name), "vocabApply", "true")


@dataclass
class Launches:
    causes: list[str] = field(default_factory=list)


@given("background enrichment drains are recorded, not started", target_fixture="launches")
def record_launches(monkeypatch: pytest.MonkeyPatch) -> Launches:
    launches = Launches()

    def record(app: Any, cause: DrainCause) -> int:
        launches.causes.append(str(cause))
        return 0

    monkeypatch.setattr(enrichment, "launch_worker", record)
    return launches


@then(parsers.parse('machine "{name}" started a drain "{first}" and a drain "{second}"'))
def started_drains(launches: Launches, name: str, first: str, second: str) -> None:
    assert {first, second} <= set(launches.causes), launches.causes


# ---------------------------------------------------------------------------------------------
# Archiving and running


@given(parsers.parse('machine "{name}" archives a fork "{label}" of session "{parent}"'),
       target_fixture="last_archive")
@when(parsers.parse('machine "{name}" archives a fork "{label}" of session "{parent}"'),
      target_fixture="last_archive")
def archives_fork(make_machine: MakeMachine, name: str, label: str, parent: str) -> CliResult:
    machine = make_machine(name)
    parent_sid = machine.sessions[parent]
    sid = machine.sessions.setdefault(label, hashlib.sha256(label.encode()).hexdigest()[:32])
    lines = []
    for line in sample_session_text(sid).splitlines():
        event = json.loads(line)
        if event["type"] == "session":
            event["parentSession"] = parent_sid  # a DSH fork's header names its parent
        lines.append(json.dumps(event))
    path = machine.workspace.parent / f"{machine.name}-{label}.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    result = machine.ok("archive", str(path), "--json")
    assert result.json()["rootSessionId"] == parent_sid
    return result


@then("the last archive wrote chapters and the model got no request")
def last_archive_wrote(last_archive: CliResult, model_server: TapeServer) -> None:
    assert last_archive.code == 0 and last_archive.json()["chapters"]
    assert model_server.count == 0


@dataclass
class EnrichRun:
    result: CliResult
    chapters_after: dict[str, bytes]
    requests_after: int


def chapter_files(machine: Machine) -> dict[str, bytes]:
    return {p: b for p, b in machine.store_files().items() if "/chapters/" in p}


def _run(machine: Machine, server: TapeServer, *argv: str, expect: int = 0) -> EnrichRun:
    result = machine.run("enrich", "run", *argv, "--json")
    assert result.code == expect, result.text
    return EnrichRun(result, chapter_files(machine), server.count)


@given(parsers.parse('machine "{name}" runs the enrichment'), target_fixture="enrich_run")
@when(parsers.parse('machine "{name}" runs the enrichment'), target_fixture="enrich_run")
def runs_enrichment(make_machine: MakeMachine, model_server: TapeServer, name: str) -> EnrichRun:
    return _run(make_machine(name), model_server)


@when(parsers.parse('machine "{name}" runs the enrichment, which reports a server failure'),
      target_fixture="enrich_run")
def runs_enrichment_failing(make_machine: MakeMachine, model_server: TapeServer,
                            name: str) -> EnrichRun:
    run = _run(make_machine(name), model_server, expect=1)
    assert "the model server failed" in run.result.err and "next: " in run.result.err
    return run


@when(parsers.parse('machine "{name}" runs the enrichment again over all its chapters'),
      target_fixture="enrich_again")
def runs_again(make_machine: MakeMachine, model_server: TapeServer, name: str) -> EnrichRun:
    return _run(make_machine(name), model_server, "--all")


# ---------------------------------------------------------------------------------------------
# Checks on chapters


def _chapters(machine: Machine) -> dict[str, Any]:
    out = {}
    for rel, data in chapter_files(machine).items():
        chapter = parse_chapter_file(rel, data.decode("utf-8"))
        assert chapter is not None, f"{rel}: the frontmatter left the archive's form"
        out[rel] = chapter
    return out


@then(parsers.parse('every chapter of machine "{name}" was enriched by "{route}" in {calls:d} '
                    'model call each'))
@then(parsers.parse('every chapter of machine "{name}" was enriched by "{route}" in {calls:d} '
                    'model calls each'))
def enriched_all(make_machine: MakeMachine, enrich_run: EnrichRun, model_server: TapeServer,
                 name: str, route: str, calls: int) -> None:
    chapters = _chapters(make_machine(name))
    summary = enrich_run.result.json()["summary"]
    assert chapters and summary["enriched"] == len(chapters), summary
    assert summary["calls"] == calls * len(chapters) == model_server.count
    assert summary["model"] == route
    for chapter in chapters.values():
        assert chapter.head("title").model == route
        assert chapter.fields["topics"] and chapter.fields["title"] and chapter.fields["summary"]
        assert chapter.fields["unvetted"] == chapter.fields["topics"]  # no vocabulary yet


@then(parsers.parse('every chapter of machine "{name}" keeps its body byte for byte'))
def bodies_kept(make_machine: MakeMachine, name: str) -> None:
    for chapter in _chapters(make_machine(name)).values():
        # `sha256` was written at archive time and is never a model-owned field.
        assert chapter.claimed_sha256 == chapter.body_sha256, chapter.path


@then(parsers.parse('no chapter file of machine "{name}" changed and the model got no new '
                    'request'))
def nothing_changed(make_machine: MakeMachine, model_server: TapeServer, enrich_run: EnrichRun,
                    enrich_again: EnrichRun, name: str) -> None:
    assert enrich_again.chapters_after == enrich_run.chapters_after
    assert enrich_again.requests_after == enrich_run.requests_after
    assert enrich_again.result.json()["summary"]["skipped"] == len(enrich_run.chapters_after)


@then(parsers.parse('no chapter file of machine "{name}" changed since its archive'))
def as_archived(make_machine: MakeMachine, name: str) -> None:
    chapters = _chapters(make_machine(name))
    assert chapters
    for chapter in chapters.values():
        # Only the enrichment write changes a chapter, and it always prepends provenance.
        assert chapter.claimed_sha256 == chapter.body_sha256
        assert "unvetted" not in chapter.fields
        assert [len(chapter.chain(fc)) for fc in ("title", "summary", "topics")] == [1, 1, 1]
        assert chapter.fields["title"] and chapter.fields["summary"]


@then(parsers.parse('every chapter of machine "{name}" has the provenance chain "{chain}"'))
def provenance_chain(make_machine: MakeMachine, name: str, chain: str) -> None:
    expected = [part.strip() for part in chain.split(",")]
    for chapter in _chapters(make_machine(name)).values():
        for field_class in ("title", "summary", "topics"):
            links = chapter.chain(field_class)
            assert [p.model or p.by for p in links] == expected, (chapter.path, links)
            assert all(p.at for p in links if p.by == "model")


@then(parsers.parse('the enrichment report of machine "{name}" lists every chapter '
                    '"{status}" by "{values_by}"'))
def report_by(make_machine: MakeMachine, name: str, status: str, values_by: str) -> None:
    machine = make_machine(name)
    rows = machine.ok("enrich", "report", "--json").json()["chapters"]
    matching = [r for r in rows if r["status"] == status and r["valuesBy"] == values_by]
    assert rows and len(matching) == len(rows) == len(chapter_files(machine)), rows
    for row in matching:
        assert row["generated"]["title"][0]["by"] == "model"
        assert row["generated"]["title"][-1] == {"by": "deterministic"}


def _report_because(machine: Machine, count: int, status: str, reason: str) -> None:
    rows = machine.ok("enrich", "report", "--json").json()["chapters"]
    matching = [r for r in rows if r["status"] == status
                and r["lastOutcome"]["reason"] == reason]
    assert len(matching) == count, rows
    for row in matching:
        assert row["valuesBy"] == "deterministic"
        assert row["generated"]["title"] == [{"by": "deterministic"}]
    text = machine.ok("enrich", "report").out
    assert f"{status:<12} deterministic" in text and f"({reason}" in text


@then(parsers.parse('the enrichment report of machine "{name}" lists every chapter '
                    '"{status}" because "{reason}"'))
def report_every_because(make_machine: MakeMachine, name: str, status: str, reason: str) -> None:
    machine = make_machine(name)
    _report_because(machine, len(chapter_files(machine)), status, reason)


@then(parsers.parse('the enrichment report of machine "{name}" lists {count:d} chapter '
                    '"{status}" because "{reason}"'))
def report_because(make_machine: MakeMachine, name: str, count: int, status: str,
                   reason: str) -> None:
    _report_because(make_machine(name), count, status, reason)


@then(parsers.parse('every chapter of machine "{name}" is still queued'))
def still_queued(make_machine: MakeMachine, name: str) -> None:
    machine = make_machine(name)
    count = len(chapter_files(machine))
    assert count and machine.ok("status", "--json").json()["enrich"]["queued"] == count
    assert f"enrich     {count} queued" in machine.ok("status").out


# ---------------------------------------------------------------------------------------------
# Off


@then(parsers.parse('machine "{name}" has no enrichment queue and its status says enrichment '
                    'is off'))
def status_off(make_machine: MakeMachine, name: str, enrich_run: EnrichRun) -> None:
    machine = make_machine(name)
    assert not (machine.store / "state" / "enrich.json").exists()
    assert enrich_run.result.json()["ran"] is False
    assert "enrich     off (enrichmentEnabled = false)" in machine.ok("status").out
    rows = machine.ok("enrich", "report", "--json").json()["chapters"]
    assert rows and {r["status"] for r in rows} == {"not-enriched"}


@then(parsers.parse('machine "{name}"\'s notice for session "{label}" lists all its chapters'))
def notice_lists(make_machine: MakeMachine, name: str, label: str) -> None:
    machine = make_machine(name)
    sid = machine.sessions[label]
    count = len([p for p in chapter_files(machine) if p.startswith(f"{sid}/")])
    data = machine.ok("notice", "--session", sid, "--json").json()
    assert data["session"] == sid and data["chapters"] == count and data["refused"] is False
    assert data["notice"].count(f".dsh-chapters/{sid}/chapters/") == count


# ---------------------------------------------------------------------------------------------
# Two machines


@then(parsers.parse('machine "{reader}" holds machine "{writer}"\'s chapters of session '
                    '"{label}" byte for byte'))
def holds_chapters(machines: dict[str, Machine], reader: str, writer: str, label: str) -> None:
    sid = machines[writer].sessions[label]
    theirs = {p: b for p, b in chapter_files(machines[writer]).items() if p.startswith(f"{sid}/")}
    mine = {p: b for p, b in chapter_files(machines[reader]).items() if p.startswith(f"{sid}/")}
    assert theirs and mine == theirs
    listed = [c for c in machines[reader].ok("list", "--json").json() if c["sessionId"] == sid]
    assert len(listed) == len(theirs)


@then(parsers.parse('the pool holds machine "{name}"\'s enriched chapters of session "{label}" '
                    'byte for byte'))
def pool_has_enriched(make_machine: MakeMachine, pool: Pool, git_cli: GitCli, tmp_path: Path,
                      name: str, label: str) -> None:
    from tests.acceptance.steps_pool import pool_clone

    machine = make_machine(name)
    sid = machine.sessions[label]
    files = pool_clone(pool, git_cli, tmp_path)
    ours = {rel.rsplit("/", 1)[1]: data for rel, data in chapter_files(machine).items()
            if rel.startswith(f"{sid}/")}
    theirs = {p.rsplit("/", 1)[1]: data for p, data in files.items()
              if p.startswith("chapters/") and f"/{sid}/" in p}
    assert ours and ours == theirs
    assert all(b'"by": "model"' in data for data in theirs.values())


@then(parsers.parse('machine "{reader}"\'s index files A\'s chapters of session "{label}" under '
                    'the topic "{topic}"'))
def index_topic(machines: dict[str, Machine], reader: str, label: str, topic: str) -> None:
    sid = machines["A"].sessions[label]
    answer = machines[reader].ok("search", "--topic", topic, "--json").json()
    paths = [m["path"] for m in answer["matches"]]
    assert paths and all(f"/{sid}/" in p for p in paths), answer
    shards = list(machines[reader].store.rglob(f"index/{topic}.md"))
    assert shards and any(sid in s.read_text(encoding="utf-8") for s in shards)


@then(parsers.parse('machine "{reader}" finds "{title}" first by searching "{query}"'))
def finds_title(machines: dict[str, Machine], reader: str, title: str, query: str) -> None:
    answer = machines[reader].ok("search", *query.split(), "--json").json()
    assert answer["matches"] and answer["matches"][0]["title"] == title, answer


@then(parsers.parse('machine "{reader}" does not enrich machine "{writer}"\'s chapters'))
def reader_does_not_enrich(make_machine: MakeMachine, model_server: TapeServer, reader: str,
                           writer: str) -> None:
    machine = make_machine(reader)
    _enrich_with(machine, model_server, "tape/enricher-2", "manual")
    before = chapter_files(machine)
    count = model_server.count
    result = machine.ok("enrich", "run", "--all", "--json").json()
    assert result["queuedByAll"] == 0 and model_server.count == count
    assert chapter_files(machine) == before
    rows = machine.ok("enrich", "report", "--json").json()["chapters"]
    assert rows and {r["status"] for r in rows} == {"not-ours"}
    assert {r["harnessId"] for r in rows} == {writer}


# ---------------------------------------------------------------------------------------------
# The vocabulary, git-visible and revertible (§6.3)


@given(parsers.parse('machine "{name}" merges the topic "{source}" into "{target}" by hand'))
def merges_by_hand(make_machine: MakeMachine, name: str, source: str, target: str) -> None:
    make_machine(name).ok("topic", "merge", source, target)


@given(parsers.parse('machine "{name}" syncs and rebuilds its index'))
@when(parsers.parse('machine "{name}" syncs and rebuilds its index'))
def sync_and_rebuild(make_machine: MakeMachine, name: str) -> None:
    machine = make_machine(name)
    assert machine.ok("sync", "--json").json()["ok"]
    machine.ok("index", "--rebuild")


def vocabularies(machine: Machine) -> dict[str, bytes]:
    """Every derived `topics/vocabulary.json` of the machine (the store door's and the mirror
    door's, which lives in the store's machine-local cache)."""
    return {p.relative_to(machine.store).as_posix(): p.read_bytes()
            for p in sorted(machine.store.rglob("topics/vocabulary.json"))}


@given(parsers.parse('machine "{name}"\'s vocabulary is remembered'),
       target_fixture="remembered_vocabulary")
def remember_vocabulary(make_machine: MakeMachine, name: str) -> dict[str, bytes]:
    remembered = vocabularies(make_machine(name))
    # The store door's, and the mirror door's (derived into the store's machine-local cache).
    assert sorted(remembered) == ["cache/mirror/topics/vocabulary.json", "topics/vocabulary.json"]
    for data in remembered.values():
        assert json.loads(data)["aliases"] == {"pypi": "packaging"}
    return remembered


@when(parsers.parse('machine "{name}" builds its index'), target_fixture="index_result")
def builds_index(make_machine: MakeMachine, name: str) -> CliResult:
    result = make_machine(name).ok("index", "--json")
    return result


@then(parsers.parse('the pool\'s history shows a commit by "{author}" adding the plugin\'s '
                    'topic-alias "{source}" -> "{target}"'), target_fixture="alias_commit")
def alias_commit(pool: Pool, git_cli: GitCli, author: str, source: str, target: str) -> str:
    edits = f"edits/{author}/curation.jsonl"
    log = git_cli("log", "--format=%H %an", "-p", "main", "--", edits, cwd=pool.path)
    commits = re.split(r"^(?=[0-9a-f]{40} )", log, flags=re.MULTILINE)
    for commit in commits:
        added = [json.loads(line[1:]) for line in commit.splitlines()
                 if line.startswith("+{")]
        facts = [f for f in added if f.get("type") == "topic-alias" and f.get("author") == "plugin"]
        if facts:
            sha, who = commit.split("\n", 1)[0].split(" ", 1)
            assert who == author
            assert facts == [f for f in facts if f["from"] == source and f["to"] == target]
            assert "co-occurrence in" in facts[0]["reason"]
            return sha
    raise AssertionError(f"no commit adds a plugin topic-alias to {edits}:\n{log}")


@then(parsers.parse('machine "{name}"\'s vocabulary maps "{source}" to "{target}"'))
def vocabulary_maps(make_machine: MakeMachine, name: str, source: str, target: str) -> None:
    found = vocabularies(make_machine(name))
    assert found
    for data in found.values():
        assert json.loads(data)["aliases"].get(source) == target


@when("that commit is reverted with git in a clone of the pool and pushed back")
def revert_commit(pool: Pool, git_cli: GitCli, tmp_path: Path, alias_commit: str) -> None:
    clone = tmp_path / f"revert-{secrets.token_hex(4)}"
    git_cli("clone", "--quiet", pool.path, clone)
    git_cli("revert", "--no-edit", alias_commit, cwd=clone)
    git_cli("push", "--quiet", "origin", "HEAD:main", cwd=clone)
    subject = git_cli("log", "-1", "--format=%s", "main", cwd=pool.path)
    assert subject.startswith("Revert ")


@then(parsers.parse('machine "{name}"\'s vocabulary is byte for byte the remembered one'))
def vocabulary_restored(make_machine: MakeMachine, name: str,
                        remembered_vocabulary: dict[str, bytes]) -> None:
    assert vocabularies(make_machine(name)) == remembered_vocabulary
