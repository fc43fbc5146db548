"""Hostile pool: a third "machine" commits each poisoned case into a real local-path pool;
every honest machine keeps syncing, quarantines exactly the poisoned files, loses nothing.

The honest machines are real workspaces run through the composition root (`Machine`); the
pool is a bare git repository written by the git provider; the poison is planted with plain
git objects (`pool_poison.plant`), as any process with write access to the pool could.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.acceptance.steps_common import Machine, session_id_for
from tests.reliability.pool_poison import FILE, LINK, alias_bomb, chapter, plant

ORIGIN = "https://github.com/acme/widgets.git"
POOL_FILE_MAX = 65536  # the honest machines' poolFileMaxBytes: the oversized case is above it


def _machine(root: Path, name: str) -> Machine:
    workspace = root / name / "widgets"
    (workspace / ".git").mkdir(parents=True)
    (workspace / ".git" / "config").write_text(f'[remote "origin"]\n\turl = {ORIGIN}\n')
    home = root / name / "home"
    home.mkdir()
    env = {"DSH_HOME": str(home), "DSH_CHAPTERS_HARNESS_ID": name, "HOME": str(root / name),
           "PATH": "/usr/bin:/bin"}
    return Machine(name, workspace, home, env)


def _sid(label: str) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"dsh-chapters-reliability/{label}"))


def _sync(m: Machine) -> dict[str, Any]:
    data: dict[str, Any] = m.ok("sync", "--json").json()
    assert data["ok"], f"{m.name}: sync went local-only: {data['line']}"
    return data


def _quarantine(m: Machine) -> dict[str, str]:
    path = m.store / "state" / "quarantine.json"
    rows = json.loads(path.read_text())["quarantined"] if path.exists() else []
    return {r["path"]: r["code"] for r in rows}


def _poison(key: str, a1: str, rounds: int) -> tuple[dict[str, tuple[int, bytes]], dict[str, Any]]:
    """Every poisoned case of the issue, and what each honest machine must do with it:
    a quarantine code, or "copy" (indistinguishable from honest content for that machine)."""
    files: dict[str, tuple[int, bytes]] = {}
    expect: dict[str, Any] = {}

    def add(path: str, data: bytes, mode: int = FILE, entry: str = "", **verdicts: str) -> None:
        # `entry`: an unsafe tree entry is quarantined as git holds it (the directory entry
        # whose name is unsafe), since nothing under it is ever checked out
        files[path] = (mode, data)
        expect[entry or path] = verdicts

    for r in range(rounds):
        s = {n: _sid(f"m{r}-{n}") for n in ("date", "bomb", "big", "link", "claim", "good",
                                             "type", "deep")}
        c = f"chapters/{key}"
        add(f"{c}/{s['date']}/001-bad-date.md",
            chapter("mallory", s["date"], "bad date", date="2026-13-45"),
            a="frontmatter", b="frontmatter")
        add(f"{c}/{s['bomb']}/001-alias-bomb.md",
            chapter("mallory", s["bomb"], "bomb", extra=alias_bomb()),
            a="frontmatter", b="frontmatter")
        add(f"{c}/{s['type']}/001-wrong-type.md",
            chapter("mallory", s["type"], "types", extra="? [a, b]\n: 1"),
            a="frontmatter", b="frontmatter")
        add(f"{c}/{s['deep']}/001-deep.md",
            chapter("mallory", s["deep"], "deep", extra="nest: " + "[" * 3000 + "]" * 3000),
            a="frontmatter", b="frontmatter")
        add(f"{c}/config.toml/00{r}-reserved.md", chapter("mallory", "config.toml", "reserved"),
            a="path", b="path")
        add(f"{c}/state/00{r}-reserved.md", chapter("mallory", "state", "reserved"),
            a="path", b="path")
        add(f"{c}/../00{r}-climb.md", chapter("mallory", "x", "climb"), entry=f"{c}/..",
            a="path", b="path")
        add(f"{c}/{s['good']}/../../../00{r}-deeper.md", b"x", entry=f"{c}/{s['good']}/..",
            a="path", b="path")
        add(f"{c}/{'9' * 300}/001-long-id.md", chapter("mallory", "9" * 300, "long"),
            entry=f"{c}/{'9' * 300}", a="path", b="path")
        add(f"rules/{key}/box-a/9{r}0-testing-evil.md",
            b'---\nharnessId: "mallory"\nkind: "rule"\ntitle: "evil"\n---\nevil\n',
            a="namespace", b="namespace")
        add(f"rules/{key}/box-b/9{r}1-testing-evil.md",
            b'---\nkind: "rule"\ntitle: "no writer"\n---\nevil\n',
            a="namespace", b="namespace")
        add(f"{c}/{a1}/09{r}-injected.md", chapter("mallory", a1, "injected"),
            a="namespace", b="namespace")
        add(f"{c}/{s['claim']}/001-claims-box-b.md", chapter("box-b", s["claim"], "forged b"),
            a="copy", b="namespace")
        add(f"{c}/{s['big']}/001-oversized.md",
            chapter("mallory", s["big"], "big", body="x" * (POOL_FILE_MAX + 1)),
            a="size", b="size")
        add(f"{c}/{s['link']}/001-symlink.md", b"/etc/passwd", LINK,
            a="frontmatter", b="frontmatter")
        wrong = hashlib.sha256(f"other {r}".encode()).hexdigest()
        add(f"artifacts/{key}/{wrong[:2]}/{wrong}", b"not what the name says",
            a="artifact", b="artifact")
        add(f"{c}/{s['good']}/001-fair.md", chapter("mallory", s["good"], "a fair chapter"),
            a="copy", b="copy")
    return files, expect


@pytest.mark.slow
def test_honest_machines_keep_syncing_and_quarantine_exactly_the_poison(
    tmp_path: Path, size: Any, record: Any
) -> None:
    rounds = size("hostile_rounds")
    pool = tmp_path / "drive" / "widgets.git"
    a, b = _machine(tmp_path, "box-a"), _machine(tmp_path, "box-b")
    for m in (a, b):
        m.ok("link", str(pool))
        m.set_config(f"poolFileMaxBytes = {POOL_FILE_MAX}")
    a.archive("a-1")
    _sync(a)
    b.archive("b-1")
    _sync(b)
    _sync(a)
    key = a.app().identity.project_key
    a1 = a.sessions["a-1"]
    honest = {p for p in a.store_files() if "/chapters/" in p}
    assert honest and honest == {p for p in b.store_files() if "/chapters/" in p}

    files, expect = _poison(key, a1, rounds)
    commit = plant(pool, files)

    for m in (a, b, a, b):
        _sync(m)
    for m, who in ((a, "a"), (b, "b")):
        quarantined = _quarantine(m)
        wanted = {p: v[who] for p, v in expect.items() if v[who] != "copy"}
        # the unsafe path is reported as git holds it, segment by segment
        assert quarantined == wanted, f"{m.name}: {set(quarantined) ^ set(wanted)}"
        rows = json.loads((m.store / "state" / "quarantine.json").read_text())["quarantined"]
        # the pool head at which this machine first saw the poison: box-a pulled mallory's
        # commit itself; box-b first saw it under box-a's next commit, which descends from it
        seen = {r["commit"] for r in rows}
        assert len(seen) == 1, seen
        if m is a:
            assert seen == {commit}
        else:
            subprocess.run(["git", "-C", str(pool), "merge-base", "--is-ancestor", commit,
                            seen.pop()], check=True)
        status = m.ok("status").out
        assert f"quarantine {len(wanted)} file(s) set aside" in status
        doctor = m.run("doctor", "--json")
        assert doctor.code == 1
        assert {f["path"] for f in doctor.json()["findings"]} >= set(wanted)
        for argv in (("list",), ("search", "refresh"), ("index",), ("notice",),
                     ("list", "--pool")):
            m.ok(*argv)
        assert (m.store / "config.toml").is_file()  # a reserved name never became a directory
        stored = m.store_files()
        assert honest <= set(stored), f"{m.name} lost chapters"
        assert not any(b"root:x:0:0" in data for data in stored.values())
        assert not any("evil" in p or "injected" in p or "oversized" in p or "climb" in p
                       for p in stored)

    # the fair chapter and the one only box-b can tell is forged reached box-a
    assert any(p.endswith("001-fair.md") for p in a.store_files())
    assert any(p.endswith("001-claims-box-b.md") for p in a.store_files())
    assert not any(p.endswith("001-claims-box-b.md") for p in b.store_files())

    # and both keep syncing: new honest work still travels both ways
    a.archive("a-2")
    _sync(a)
    _sync(b)
    b.archive("b-2")
    _sync(b)
    _sync(a)
    for m in (a, b):
        chapters = {p for p in m.store_files() if "/chapters/" in p and "fair" not in p
                    and "claims" not in p}
        for label in ("a-1", "a-2", "b-1", "b-2"):
            sid = (a.sessions.get(label) or b.sessions.get(label) or session_id_for(label))
            assert any(p.startswith(f"{sid}/chapters/") for p in chapters), (m.name, label)
    record("poisoned files planted", len(files))
    record("quarantined by box-a / box-b",
           f"{len(_quarantine(a))} / {len(_quarantine(b))}")
    record("honest chapters lost", 0)
    record("syncs that went local-only", 0)
