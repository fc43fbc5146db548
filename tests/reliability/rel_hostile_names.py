"""Hostile file names in a local-path pool: a name that is not UTF-8, one of 240 bytes (the
temp-file suffix every writer adds takes it past NAME_MAX), one of 255 bytes, reserved names
(a device name, a `.git` alias, a trailing dot) and a control character. A third "machine"
commits them straight into the pool (pool_poison.plant); every honest machine, and a freshly
linked one, keeps syncing, quarantines and names each one, and every command still runs.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.acceptance.steps_common import Machine, project_clone
from tests.reliability.pool_poison import FILE, chapter, plant


def _sid(label: str) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"dsh-chapters-reliability/names/{label}"))


def _sync(m: Machine) -> dict[str, Any]:
    data: dict[str, Any] = m.run("sync", "--json").json()
    assert data["ok"], f"{m.name}: {data['line']}"
    return data


def _quarantined(m: Machine) -> dict[str, str]:
    path = m.store / "state" / "quarantine.json"
    rows = json.loads(path.read_text())["quarantined"] if path.exists() else []
    return {r["path"]: r["reason"] for r in rows}


def _padded(prefix: str, size: int) -> str:
    """`prefix`…`.md`, exactly `size` bytes."""
    return prefix + "x" * (size - len(prefix) - len(".md")) + ".md"


def hostile_names(key: str) -> dict[str, tuple[bytes, bytes]]:
    """What each case plants: (pool path as git holds it, the entry copy-in names: the path up
    to the first element no machine can hold)."""
    c = f"chapters/{key}".encode()
    cases: dict[str, tuple[bytes, bytes]] = {}

    def add(label: str, directory: bytes, name: bytes) -> None:
        cases[label] = (directory + b"/" + name, directory + b"/" + name)

    add("not UTF-8", c + f"/{_sid('latin1')}".encode(), b"001-caf\xe9-\xff\xfe.md")
    add("240 bytes", c + f"/{_sid('240')}".encode(), _padded("001-", 240).encode())
    add("255 bytes", c + f"/{_sid('255')}".encode(), _padded("001-", 255).encode())
    add("201 bytes", c + f"/{_sid('201')}".encode(), _padded("001-", 201).encode())
    add("a control character", c + f"/{_sid('nl')}".encode(), b"001-line\nbreak.md")
    add("a trailing dot", c + f"/{_sid('dot')}".encode(), b"001-dot.md.")
    for label, directory in (("a device name", b"aux"), ("a .git alias", b".GIT"),
                             ("git's 8.3 alias", b"GIT~1")):
        path = c + b"/" + directory + b"/001-reserved.md"
        cases[label] = (path, c + b"/" + directory)
    return cases


@pytest.mark.slow
def test_hostile_names_are_quarantined_and_stop_no_machine(tmp_path: Path, record: Any) -> None:
    pool = tmp_path / "drive" / "widgets.git"
    a, b = project_clone(tmp_path, "box-a"), project_clone(tmp_path, "box-b")
    for m in (a, b):
        m.ok("link", str(pool))
    a.archive("a-1")
    _sync(a)
    b.archive("b-1")
    _sync(b)
    _sync(a)
    key = a.app().identity.project_key
    cases = hostile_names(key)
    files = {path: (FILE, chapter("mallory", "x", f"zqxmark {label}", body="zqxmark body\n"))
             for label, (path, _entry) in cases.items()}
    plant(pool, files)

    for m in (a, b, a, b):
        _sync(m)
    fresh = project_clone(tmp_path, "box-c")
    fresh.ok("link", str(pool))
    _sync(fresh)
    for m in (a, b, fresh):
        held = _quarantined(m)
        for label, (_path, entry) in cases.items():
            shown = entry.decode("utf-8", "replace")
            assert shown in held, f"{m.name}: {label} ({shown!r}) is not quarantined: {held}"
        doctor = m.run("doctor", "--json").json()
        named = {f["path"] for f in doctor["findings"]}
        assert {e.decode("utf-8", "replace") for _p, e in cases.values()} <= named
        for argv in (("status",), ("list",), ("list", "--pool"), ("search", "zqxmark"),
                     ("search", "retry"), ("index",), ("notice",), ("index", "--rebuild")):
            result = m.run(*argv)
            assert result.code == 0, f"{m.name}: chapters {' '.join(argv)}: {result.text}"
            assert "zqxmark" not in result.out, f"{m.name}: {argv} served a hostile file"
        mirrored = [p for p in m.mirror.rglob("*") if ".git" not in p.relative_to(m.mirror).parts
                    and ("caf" in p.name or "xxxx" in p.name or "reserved" in p.name)]
        assert not mirrored, f"{m.name} checked out {mirrored}"

    # honest work still travels every way
    a.archive("a-2")
    _sync(a)
    for m in (b, fresh):
        _sync(m)
        chapters = {p.split("/", 1)[0] for p in m.store_files() if "/chapters/" in p}
        assert {a.sessions["a-1"], a.sessions["a-2"], b.sessions["b-1"]} <= chapters
    record("hostile names planted", f"{len(cases)} ({', '.join(cases)})")
    record("hostile names quarantined and named", "every one, on 2 machines and a freshly "
           "linked one; 0 syncs went local-only; status, list, search, index, notice ran")
