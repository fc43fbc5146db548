"""`chapters enrich …` and the background drains, as real processes against the tape server.

Every `chapters` here is a real subprocess, so the drains an archive starts are real detached
processes too: the tests wait for them through the queue state, never by sleeping blindly.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path
from typing import Any

import pytest
from dsh_chapters_core.enrich.chapter import parse_chapter_file
from dsh_chapters_harness.testing.tape_server import TapeServer, load_tape

from tests.app.archive_workspace import make_workspace
from tests.fixtures.tapes import make_tapes

TAPES = Path(__file__).resolve().parents[1] / "fixtures" / "tapes"
SAMPLE_SID = "5e1f0a2c-7d3b-4c8e-9a61-0d2f3b4c5a6e"
WAIT_S = 60.0
pytestmark = pytest.mark.slow


@dataclass
class Done:
    code: int
    out: str
    err: str
    elapsed: float
    ended_at: float  # time.monotonic() when the process had exited

    def json(self) -> Any:
        return json.loads(self.out)


@dataclass
class Workspace:
    root: Path
    env: dict[str, str]

    @property
    def store(self) -> Path:
        return self.root / ".dsh-chapters"

    def chapters(self, *argv: str, stdin: str = "") -> Done:
        started = time.monotonic()
        done = subprocess.run([sys.executable, "-m", "dsh_chapters", "-C", str(self.root), *argv],
                              env=self.env, input=stdin, capture_output=True, text=True,
                              timeout=120, check=False)
        ended = time.monotonic()
        return Done(done.returncode, done.stdout, done.stderr, ended - started, ended)

    def ok(self, *argv: str, stdin: str = "") -> Done:
        done = self.chapters(*argv, stdin=stdin)
        assert done.code == 0, f"chapters {' '.join(argv)}: {done.out}{done.err}"
        return done

    def configure(self, **settings: object) -> None:
        lines = [f"{key} = {json.dumps(value)}" for key, value in settings.items()]
        self.store.mkdir(parents=True, exist_ok=True)
        (self.store / "config.toml").write_text("\n".join(lines) + "\n", encoding="utf-8")

    def session_file(self, name: str, *, fork_of: str = "") -> Path:
        text = (files("dsh_chapters") / "samples" / "demo-session.jsonl").read_text("utf-8")
        sid = f"{name}-0000-4000-8000-000000000000"
        lines = []
        for line in text.replace(SAMPLE_SID, sid).splitlines():
            event = json.loads(line)
            if fork_of and event["type"] == "session":
                event["parentSession"] = fork_of  # the header names the session it forks
            lines.append(json.dumps(event))
        path = self.root.parent / f"{name}.jsonl"
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        return path

    def state(self) -> dict[str, Any]:
        path = self.store / "state" / "enrich.json"
        return json.loads(path.read_text("utf-8")) if path.is_file() else {}

    def chapter_texts(self) -> dict[str, str]:
        return {p.relative_to(self.store).as_posix(): p.read_text("utf-8")
                for p in sorted(self.store.glob("*/chapters/*.md"))}

    def wait_for_drains(self, predicate: Any) -> dict[str, Any]:
        """Wait until no background drain holds a lock and `predicate(state)` is true."""
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline:
            state = self.state()
            busy = any((self.store / "state" / f"enrich-{n}.pid").exists() for n in ("run", "idle"))
            if not busy and predicate(state):
                return state
            time.sleep(0.1)
        log = self.store / "logs" / "enrich.log"
        raise AssertionError(f"the background drain did not finish: {self.state()}\n"
                             + (log.read_text("utf-8") if log.is_file() else "no log"))


@pytest.fixture
def workspace(tmp_path: Path) -> Workspace:
    root = make_workspace(tmp_path / "widgets", remote="https://github.com/acme/widgets.git")
    home = tmp_path / "dsh-home"
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp_path),
           "DSH_HOME": str(home), "DSH_CHAPTERS_HARNESS_ID": "laptop"}
    return Workspace(root, env)


@pytest.fixture
def servers() -> Iterator[list[TapeServer]]:
    started: list[TapeServer] = []
    yield started
    misses = [m for s in started for m in s.misses]
    for server in started:
        server.stop()
    assert not misses, misses


def _serve(servers: list[TapeServer], tape: str, key: str | None = None) -> TapeServer:
    server = TapeServer(tapes=(load_tape(TAPES / f"{tape}.json"),), expected_key=key).start()
    servers.append(server)
    return server


def _deterministic(text: str) -> bool:
    chapter = parse_chapter_file("x/chapters/001-x.md", text)
    assert chapter is not None
    return [p.by for p in chapter.chain("title")] == ["deterministic"]


# ---------------------------------------------------------------------------------------------


def test_archive_and_fork_complete_with_the_model_server_stopped(workspace, servers) -> None:
    server = _serve(servers, "enrich-valid")
    server.stop()  # the route points at a port that now refuses connections
    workspace.configure(enrichmentModel=make_tapes.MODEL, enrichmentBaseUrl=server.url,
                        enrichmentTrigger="both", enrichmentIdleMs=200)
    first = workspace.ok("archive", str(workspace.session_file("aaaaaaaa")), "--json")
    fork = workspace.ok("archive", str(workspace.session_file("bbbbbbbb", fork_of=(
        "aaaaaaaa-0000-4000-8000-000000000000"))), "--json")
    written = len(first.json()["chapters"]) + len(fork.json()["chapters"])
    assert first.json()["chapters"] and fork.json()["chapters"]
    assert fork.json()["rootSessionId"] == "aaaaaaaa-0000-4000-8000-000000000000"
    # The background drain tried, found nothing listening, kept everything and stopped.
    state = workspace.wait_for_drains(lambda s: s.get("lastRun") is not None)
    reasons = {o["reason"] for o in state["outcomes"].values()}
    assert reasons == {"down"} and state["lastRun"]["enriched"] == 0
    assert len(state["queued"]) == written  # a server failure leaves every chapter queued
    texts = workspace.chapter_texts()
    assert len(texts) == written and all(_deterministic(t) for t in texts.values())
    assert server.count == 0


def test_no_request_during_an_archive_and_the_idle_drain_enriches_after(workspace,
                                                                         servers) -> None:
    server = _serve(servers, "enrich-valid")
    workspace.configure(enrichmentModel=make_tapes.MODEL, enrichmentBaseUrl=server.url,
                        enrichmentTrigger="idle", enrichmentIdleMs=2500)
    done = workspace.ok("archive", str(workspace.session_file("cccccccc")), "--json")
    assert server.count == 0  # the archive returned; the idle drain waits out its window
    count = len(done.json()["chapters"])
    status = workspace.ok("status").out
    assert f"enrich     {count} queued · model tape/enricher-1 (config) · trigger idle" in status
    state = workspace.wait_for_drains(
        lambda s: (s.get("lastRun") or {}).get("enriched") == count)
    assert state["lastRun"]["cause"] == "idle" and state["queued"] == []
    assert server.count == count and all(r.at > done.ended_at for r in server.requests)
    assert not any(_deterministic(t) for t in workspace.chapter_texts().values())
    assert "last run" in workspace.ok("status").out


def test_a_push_triggers_a_drain_and_the_next_sync_publishes_it(workspace, servers,
                                                               tmp_path: Path) -> None:
    server = _serve(servers, "enrich-valid")
    workspace.configure(enrichmentModel=make_tapes.MODEL, enrichmentBaseUrl=server.url,
                        enrichmentTrigger="afterPush", syncDebounceMs=0, enrichmentBatchCap=1)
    workspace.ok("link", str(tmp_path / "pool.git"))
    archived = workspace.ok("archive", str(workspace.session_file("dddddddd")), "--json")
    assert archived.json()["pool"]["pushed"] is True
    count = len(archived.json()["chapters"])
    assert count >= 2, "the demo session must give a batch and a rest"
    state = workspace.wait_for_drains(lambda s: s.get("lastRun") is not None)
    assert state["lastRun"]["cause"] == "after-push"
    assert state["lastRun"]["enriched"] == 1 and len(state["queued"]) == count - 1  # one batch
    synced = workspace.ok("sync", "--json").json()
    assert synced["publishedChanged"] == 1 and synced["pushed"]


def test_manual_run_reports_progress_and_the_report_names_provenance(workspace,
                                                                     servers) -> None:
    server = _serve(servers, "enrich-valid")
    workspace.configure(enrichmentModel=make_tapes.MODEL, enrichmentBaseUrl=server.url,
                        enrichmentTrigger="manual")
    n = len(workspace.ok("archive", str(workspace.session_file("eeeeeeee")),
                         "--json").json()["chapters"])
    run = workspace.ok("enrich", "run")
    lines = run.out.splitlines()
    assert [line.split()[0] for line in lines[:n]] == [f"[{i}/{n}]" for i in range(1, n + 1)]
    assert all(" enriched " in line for line in lines[:n])
    assert (f"{n} enriched, 0 fallback, 0 skipped, 0 refused; {n} model call(s); "
            "0 still queued") in run.out
    report = workspace.ok("enrich", "report", "--json").json()
    assert report["counts"] == {"enriched": n}
    row = report["chapters"][0]
    assert row["valuesBy"] == "model tape/enricher-1"
    assert row["generated"]["topics"][0]["vocabulary"]
    text = workspace.ok("enrich", "report").out
    assert f"{n} chapter(s): {n} enriched; 0 queued" in text


def test_the_model_route_is_durable_and_its_key_is_stored_0600_never_echoed(workspace,
                                                                          servers) -> None:
    secret = "sk-enrich-7f3e9a1c5b"
    server = _serve(servers, "enrich-valid", key=secret)
    workspace.configure(enrichmentTrigger="manual")
    assert "enrichment model: none" in workspace.ok("enrich", "model").out
    missing = workspace.chapters("enrich", "run")
    assert missing.code == 1 and "chapters enrich model <provider/model>" in missing.err
    route = workspace.ok("enrich", "model", make_tapes.MODEL, "--base-url", server.url,
                         "--key-stdin", stdin=secret + "\n")
    assert "a key is stored (0600)" in route.out
    key_file = Path(workspace.env["DSH_HOME"]) / "dsh-chapters" / "credentials" / "enrichment-tape"
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    workspace.ok("archive", str(workspace.session_file("ffffffff")))
    run = workspace.ok("enrich", "run", "--json")
    assert run.json()["summary"]["enriched"] == len(workspace.chapter_texts()) > 0
    assert all(r.authorized for r in server.requests)
    shown = workspace.ok("enrich", "model", "--json").json()
    assert shown == {**shown, "model": make_tapes.MODEL, "origin": "override", "keyStored": True}
    cleared = workspace.ok("enrich", "model", "clear")
    assert "cleared the override tape/enricher-1" in cleared.out and not key_file.exists()
    leaked = [p for p in workspace.root.rglob("*") if p.is_file()
              and secret.encode() in p.read_bytes()]
    assert leaked == []
    for done in (route, run, cleared):
        assert secret not in done.out + done.err


def test_a_server_failure_on_a_manual_run_exits_1_with_a_next_step(workspace, servers) -> None:
    server = _serve(servers, "enrich-down")
    workspace.configure(enrichmentModel=make_tapes.MODEL, enrichmentBaseUrl=server.url,
                        enrichmentTrigger="manual")
    workspace.ok("archive", str(workspace.session_file("abababab")))
    n = len(workspace.chapter_texts())
    failed = workspace.chapters("enrich", "run")
    assert failed.code == 1
    assert "the model server failed (down:" in failed.err
    assert f"{n} chapter(s) stay queued" in failed.err
    assert "next: check that http://127.0.0.1:" in failed.err
    assert f"[1/{n}] fallback" in failed.out


def test_the_kill_switch_makes_enrich_run_a_no_op(workspace, servers) -> None:
    server = _serve(servers, "enrich-valid")
    workspace.configure(enrichmentModel=make_tapes.MODEL, enrichmentBaseUrl=server.url,
                        enrichmentEnabled=False)
    workspace.ok("archive", str(workspace.session_file("cdcdcdcd")))
    run = workspace.ok("enrich", "run", "--all")
    assert "enrichment is off (enrichmentEnabled = false)" in run.out
    assert server.count == 0 and not (workspace.store / "state" / "enrich.json").exists()
    assert not (workspace.store / "logs" / "enrich.log").exists()  # no drain was ever started
