"""Hostile pool: a third "machine" commits each poisoned case into a real pool of each kind;
every honest machine keeps syncing, quarantines exactly the poisoned files, loses nothing.

The honest machines are real workspaces run through the composition root (`Machine`). The
pools: a bare git repository on a local path, the same served by `git http-backend` on
loopback, and the TreeDX fake. The poison goes straight into the pool's backing store, as any
process with write access to it could: plain git objects (`pool_poison.plant`) for git, an
out-of-band commit on the fake's branch for TreeDX (which has no symlink mode: the symlink
case is a blob holding the target path there, and is refused for its frontmatter).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.acceptance.steps_common import Machine, project_clone, session_id_for
from tests.reliability.pool_poison import FILE, LINK, alias_bomb, chapter, plant
from tests.reliability.served_pools import TREEDX_REPO, ServedPool, served_pool

POOL_KINDS = ("local", "git-http", "treedx")
POOL_FILE_MAX = 65536  # the honest machines' poolFileMaxBytes: the oversized case is above it


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


@contextlib.contextmanager
def _pool(kind: str, root: Path) -> Iterator[tuple[str, str, ServedPool | None]]:
    """(remote, token, served pool) of `kind`; a local-path pool is a path and no server."""
    if kind == "local":
        yield str(root / "drive" / "widgets.git"), "", None
        return
    with served_pool(kind, root / "served-pool") as served:
        yield served.remote, served.token, served


def _plant(kind: str, remote: str, served: ServedPool | None,
           files: dict[str, tuple[int, bytes]]) -> str:
    """Mallory's commit, straight into the pool's backing store; returns its id."""
    if served is not None and served.fake is not None:
        # TreeDX has no symlink mode: a link is a blob holding its target's path
        return served.fake.move_head(TREEDX_REPO, {p: d for p, (_m, d) in files.items()},
                                     message="mallory")
    return plant(Path(remote) if served is None else _git_path(served), files)


def _git_path(served: ServedPool) -> Path:
    assert served.git_path is not None
    return served.git_path


def _descends(kind: str, remote: str, served: ServedPool | None, ancestor: str,
              head: str) -> bool:
    if served is not None and served.fake is not None:
        return ancestor in {sha for sha, _a, _m in served.fake.commit_log(TREEDX_REPO)} and \
            head in {sha for sha, _a, _m in served.fake.commit_log(TREEDX_REPO)}
    path = Path(remote) if served is None else _git_path(served)
    return subprocess.run(["git", "-C", str(path), "merge-base", "--is-ancestor", ancestor,
                           head], check=False).returncode == 0


@pytest.mark.slow
@pytest.mark.parametrize("kind", POOL_KINDS)
def test_honest_machines_keep_syncing_and_quarantine_exactly_the_poison(
    kind: str, tmp_path: Path, size: Any, record: Any
) -> None:
    with _pool(kind, tmp_path) as (remote, token, served):
        _honest_machines_against(kind, remote, token, served, tmp_path, size, record)


def _honest_machines_against(kind: str, remote: str, token: str, served: ServedPool | None,
                             tmp_path: Path, size: Any, record: Any) -> None:
    rounds = size("hostile_rounds")
    a, b = project_clone(tmp_path, "box-a"), project_clone(tmp_path, "box-b")
    for m in (a, b):
        m.ok("link", remote, *([token] if token else []))
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
    commit = _plant(kind, remote, served, files)

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
            assert _descends(kind, remote, served, commit, seen.pop())
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
    where = "" if kind == "local" else f" ({kind})"
    record(f"poisoned files planted{where}", len(files))
    record(f"quarantined by box-a / box-b{where}",
           f"{len(_quarantine(a))} / {len(_quarantine(b))}")
    record(f"honest chapters lost{where}", 0)
    record(f"syncs that went local-only{where}", 0)
