"""`chapters link`, `sync`, `list --pool`, `demo` and the archive's sync point, through the
composition root against real local-path pools (the git provider, real files)."""

from __future__ import annotations

import json
import logging
import os
import stat
import subprocess
import time
from importlib.metadata import EntryPoint
from pathlib import Path

import pytest
from dsh_chapters import plugins as providers
from dsh_chapters.cli import main
from dsh_chapters.services.pool import (
    check_token_rules,
    is_loopback_host,
    normalize_remote,
)
from dsh_chapters_core.errors import UsageError
from dsh_chapters_fs.workspace import set_project_setting  # the App's write_project_setting

from tests.acceptance.steps_common import Machine, session_id_for

ORIGIN = "https://github.com/acme/widgets.git"
TOKEN = "tok-never-echo-5d1c0b7a"


def machine(root: Path, name: str) -> Machine:
    workspace = root / name / "widgets"
    (workspace / ".git").mkdir(parents=True)
    (workspace / ".git" / "config").write_text(f'[remote "origin"]\n\turl = {ORIGIN}\n')
    home = root / name / "home"
    home.mkdir()
    env = {
        "DSH_HOME": str(home),
        "DSH_CHAPTERS_HARNESS_ID": name,
        "HOME": str(root / name),
        "PATH": "/usr/bin:/bin",
    }
    return Machine(name, workspace, home, env)


@pytest.fixture
def a(tmp_path: Path) -> Machine:
    return machine(tmp_path, "box-a")


@pytest.fixture
def b(tmp_path: Path) -> Machine:
    return machine(tmp_path, "box-b")


@pytest.fixture
def pool(tmp_path: Path) -> Path:
    return tmp_path / "drive" / "widgets.git"


# ---------------------------------------------------------------------------------------------
# link


def test_link_without_arguments_shows_the_six_facts(a: Machine) -> None:
    text = a.ok("link").out
    for label in ("upstream", "projectKey", "mirror", "sync", "pending", "harness id"):
        assert label in text
    assert "none (local-only)" in text and "box-a" in text and "never synced" in text
    data = a.ok("link", "--json").json()
    assert data["remote"] == "" and data["harnessId"] == "box-a" and data["pending"] == 0
    assert data["derivation"] == "remote" and data["canonical"] == "github.com/acme/widgets"


def test_link_a_path_writes_the_project_config(a: Machine, pool: Path) -> None:
    (a.store).mkdir()
    (a.store / "config.toml").write_text("# mine\nmergeThreshold = 0.4\n\nchapterLimit = 9000\n")
    out = a.ok("link", str(pool)).out
    assert f"linked {pool} (git)" in out and "chapters sync" in out
    text = (a.store / "config.toml").read_text()
    assert text == (
        f'# mine\nmergeThreshold = 0.4\n\nchapterLimit = 9000\nknowledgeRemote = "{pool}"\n'
    )
    shown = a.ok("link", "--json").json()
    assert shown["remote"] == str(pool) and shown["provider"] == "git"


def test_link_a_relative_path_stores_it_absolute(a: Machine) -> None:
    a.ok("link", "../pool.git")
    assert a.ok("link", "--json").json()["remote"] == str((a.workspace / "../pool.git").resolve())


def test_link_a_url_stores_the_token_0600_and_never_prints_it(a: Machine) -> None:
    result = a.ok("link", "https://git.example.com/acme/knowledge.git", TOKEN, "--json")
    assert TOKEN not in result.text and result.json()["tokenStored"] is True
    key = result.json()["projectKey"]
    stored = a.home / "dsh-chapters" / "credentials" / key
    assert stat.S_IMODE(stored.stat().st_mode) == 0o600 and stored.read_text().strip() == TOKEN
    shown = a.ok("link")
    status = a.ok("status")
    assert TOKEN not in shown.text + status.text
    assert not [
        p for p in a.workspace.rglob("*") if p.is_file() and TOKEN.encode() in p.read_bytes()
    ]


def test_link_reads_the_token_from_stdin(a: Machine) -> None:
    result = a.run("link", "https://git.example.com/acme/k.git", "-", stdin=TOKEN + "\n")
    assert result.code == 0 and TOKEN not in result.text
    assert next((a.home / "dsh-chapters" / "credentials").iterdir()).read_text().strip() == TOKEN


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (("https://git.example.com/k.git",), "is a network host: a pool there needs a token"),
        (("http://git.example.com/k.git", TOKEN), "would send the token in clear text"),
        ((f"https://me:{TOKEN}@git.example.com/k.git",), "the pool URL carries credentials"),
        (("/srv/pool.git", TOKEN), "a local-path pool takes no token"),
        (("ftp://git.example.com/k.git", TOKEN), "no installed provider takes the remote"),
    ],
)
def test_link_refusals(a: Machine, argv: tuple[str, ...], message: str) -> None:
    result = a.run("link", *argv)
    assert result.code == 2 and message in result.err and "next:" in result.err
    assert TOKEN not in result.text
    assert not (a.store / "config.toml").exists()


def test_loopback_needs_no_token() -> None:
    check_token_rules("http://127.0.0.1:8080/pool.git", None)
    check_token_rules("https://localhost/pool.git", None)
    check_token_rules("https://[::1]:9/p.git", None)
    assert is_loopback_host("127.0.0.2") and not is_loopback_host("10.0.0.1")
    with pytest.raises(UsageError):
        check_token_rules("treedx+https://tree.example.com/widgets", None)


def test_a_provider_policy_that_contradicts_the_remote_refuses(a: Machine, pool: Path) -> None:
    a.set_config('knowledgeProvider = "treedx"')
    result = a.run("link", str(pool))
    assert result.code == 2 and "contradicts" in result.err
    a.store.joinpath("config.toml").write_text(
        f'knowledgeProvider = "treedx"\nknowledgeRemote = "{pool}"\n'
    )
    refused = a.run("sync")
    assert refused.code == 2 and "contradicts" in refused.err
    assert not pool.exists()  # nothing fell back into a git pool


def test_relinking_drops_the_old_mirror_and_state(a: Machine, tmp_path: Path, pool: Path) -> None:
    a.ok("link", str(pool))
    a.archive("s-1")
    assert a.mirror.is_dir()
    other = tmp_path / "drive" / "other.git"
    out = a.ok("link", str(other)).out
    assert f"replaced {pool}" in out and "mirror was removed" in out and not a.mirror.exists()
    shown = a.ok("link", "--json").json()
    assert shown["lastSync"] is None and shown["pending"] == 3
    assert a.ok("sync", "--json").json()["publishedNew"] == 3


def test_status_reads_again_only_the_chapter_that_changed(
        a: Machine, pool: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`chapters status` keeps what each chapter's bytes said by the file's stat (the store's
    `cache/`): run again, it reads no chapter and says the same. A chapter changed in place,
    its size and modification time as they were, is read again, counted as modified since
    archived and pending for the pool."""
    from dsh_chapters_fs import filefacts, store, tree

    monkeypatch.setattr(filefacts, "RACY_SECONDS", 0)  # the test waits a tick instead
    a.ok("link", str(pool))
    a.archive("s-1")
    a.archive("s-2")
    a.ok("sync")
    time.sleep(0.03)

    def said() -> tuple[int, int, int, int]:
        data = a.ok("status", "--json").json()
        return (data["store"]["chapters"], data["store"]["modifiedSinceArchived"],
                data["pool"]["pending"], data["quarantine"]["count"])

    first = said()
    filefacts.save_all()  # as the process does when it ends
    assert (a.store / "cache" / "facts-store.json").is_file()
    assert (a.store / "cache" / "facts-mirror.json").is_file()
    reads: list[str] = []
    real_read, real_digest = store.read_contained, tree.digest_contained
    monkeypatch.setattr(store, "read_contained", lambda root, rel, limit=None: (
        reads.append(rel), real_read(root, rel, limit))[1])
    monkeypatch.setattr(tree, "digest_contained", lambda root, rel: (
        reads.append(rel), real_digest(root, rel))[1])
    assert said() == first and first[0] >= 2 and first[1:] == (0, 0, 0)
    assert not [r for r in reads if "/chapters/" in r]

    chapter = sorted(a.store.glob("*/chapters/*.md"))[-1]
    st = chapter.stat()
    time.sleep(0.03)
    data = chapter.read_bytes()
    chapter.write_bytes(data[:-2] + (b"x" if data[-2:-1] != b"x" else b"y") + data[-1:])
    os.utime(chapter, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert said() == (first[0], 1, 1, 0)
    relpath = chapter.relative_to(a.store).as_posix()
    assert sorted({r for r in reads if "/chapters/" in r}) == [relpath]


def test_set_project_setting_replaces_in_place(tmp_path: Path) -> None:
    path = set_project_setting(tmp_path, "knowledgeRemote", "/a")
    set_project_setting(tmp_path, "knowledgeRemote", 'we"ird\\path')
    assert path.read_text() == 'knowledgeRemote = "we\\"ird\\\\path"\n'
    tabled = tmp_path / "t"
    tabled.mkdir()
    (tabled / "config.toml").write_text("# top\n[section]\nkey = 1\n")
    set_project_setting(tabled, "knowledgeRemote", "/p")
    assert (
        tabled / "config.toml"
    ).read_text() == '# top\nknowledgeRemote = "/p"\n[section]\nkey = 1\n'
    assert normalize_remote("~/x", tmp_path).startswith("/")
    assert normalize_remote("https://h/r.git", tmp_path) == "https://h/r.git"


# ---------------------------------------------------------------------------------------------
# sync, status, the archive's sync point


def test_sync_without_a_pool_explains(a: Machine) -> None:
    result = a.run("sync")
    assert result.code == 1 and "no knowledge pool is linked" in result.err
    assert "chapters link <path>" in result.err


def test_first_sync_adds_the_mirror_to_gitignore_once(a: Machine, pool: Path) -> None:
    (a.workspace / ".gitignore").write_text("node_modules/")
    a.ok("link", str(pool))
    first = a.ok("sync")
    assert "created the pool → cloned" in first.out and "→ pushed" in first.out
    assert (a.workspace / ".gitignore").read_text() == (
        "node_modules/\n.dsh-knowledge/\n.dsh-knowledge.*/\n"
    )
    (a.workspace / ".gitignore").write_text("node_modules/\n")  # the user took it out
    a.ok("sync")
    assert (a.workspace / ".gitignore").read_text() == "node_modules/\n"


def test_archive_pushes_then_defers_within_the_window(a: Machine, pool: Path) -> None:
    a.ok("link", str(pool))
    first = a.archive("s-1").json()["pool"]
    assert first["ok"] and first["pushed"] and first["publishedNew"] == 3
    second = a.archive("s-2").json()["pool"]
    assert second["deferred"] is True and second["dueAt"]
    text = a.ok("status").out
    assert "push deferred until" in text and "· 3 pending" in text
    assert a.ok("sync", "--json").json()["publishedNew"] == 3
    assert "push deferred" not in a.ok("status").out


def test_archive_succeeds_when_the_sync_point_cannot_run(a: Machine, pool: Path) -> None:
    a.store.mkdir()
    a.store.joinpath("config.toml").write_text(
        f'knowledgeProvider = "treedx"\nknowledgeRemote = "{pool}"\n'
    )
    result = a.ok("archive", str(a.write_session("s-1")))
    assert "chapters   2 written" in result.out and "pool       not synced:" in result.out


def test_an_unreachable_pool_leaves_the_archive_alone(a: Machine, tmp_path: Path) -> None:
    drive = tmp_path / "drive"
    pool = drive / "widgets.git"
    a.ok("link", str(pool))
    a.archive("s-1")
    drive.rename(tmp_path / "unplugged")
    a.set_config("syncDebounceMs = 0")
    archived = a.ok("archive", str(a.write_session("s-2")), "--json").json()
    assert len(archived["chapters"]) == 2 and archived["pool"]["ok"] is False
    result = a.run("sync")
    assert result.code == 1 and "local-only — open: " in result.out and "· 3 pending" in result.out
    assert "file(s) pending" in result.err and "next:" in result.err
    status = a.ok("status").out
    assert "local-only" in status and "next: " in status
    (tmp_path / "unplugged").rename(drive)
    back = a.ok("sync", "--json").json()
    assert back["pushed"] and back["pending"] == 0 and back["publishedNew"] == 3


def test_list_pool_names_every_writer(a: Machine, b: Machine, pool: Path) -> None:
    a.ok("link", str(pool))
    b.ok("link", str(pool))
    a.archive("s-a")
    b.archive("s-b")
    a.ok("sync")
    listed = a.ok("list", "--pool", "--json").json()
    assert {(c["harnessId"], c["sessionId"]) for c in listed} == {
        ("box-a", session_id_for("s-a")),
        ("box-b", session_id_for("s-b")),
    }
    assert all(c["path"].startswith(".dsh-knowledge/chapters/") for c in listed)
    text = a.ok("list", "--pool").out
    assert "4 chapter(s) from 2 machine(s)" in text


def test_sync_commits_the_derived_index_deterministically(
    a: Machine, b: Machine, pool: Path, tmp_path: Path
) -> None:
    a.ok("link", str(pool))
    b.ok("link", str(pool))
    a.archive("s-a")
    a.ok("sync")
    b.archive("s-b")
    b.ok("sync")
    # §10.2: A re-derives from the same corpus and B again: the same bytes, nothing to commit.
    assert a.ok("sync", "--json").json()["commit"] == ""
    again = b.ok("sync", "--json").json()
    assert again["commit"] == "" and again["movedAside"] == ""  # the mirror stayed clean
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(pool), str(clone)], check=True, capture_output=True)
    shards = list((clone / "index").glob("*.md"))
    assert (clone / "index" / "manifest.json").is_file() and shards
    assert (clone / "topics" / "vocabulary.json").is_file()
    derived = b.store / "cache" / "mirror"
    for path in [*shards, clone / "index" / "manifest.json", clone / "topics" / "vocabulary.json"]:
        rel = path.relative_to(clone)
        assert path.read_bytes() == (derived / rel).read_bytes(), rel


def _git(*args: str, cwd: Path) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True)
    return done.stdout


def test_a_divergent_shard_is_replaced_when_this_machines_index_did_not_change(
    a: Machine, pool: Path, tmp_path: Path
) -> None:
    a.ok("link", str(pool))
    a.archive("s-a")
    a.ok("sync")
    derived = a.store / "cache" / "mirror"
    assert a.ok("sync", "--json").json()["commit"] == ""  # nothing derived differs: no commit
    # Another machine (an older build, a hand edit) pushes other bytes for one shard.
    clone = tmp_path / "other"
    _git("clone", "-q", str(pool), str(clone), cwd=tmp_path)
    shard = sorted((clone / "index").glob("*.md"))[0]
    ours = (derived / "index" / shard.name).read_bytes()
    shard.write_bytes(ours + b"a row no build wrote\n")
    _git("-c", "user.name=z", "-c", "user.email=z@example.invalid", "commit", "-qam", "edit",
         cwd=clone)
    _git("push", "-q", "origin", "HEAD", cwd=clone)
    # §10.2: this machine's index did not change, yet the divergent shard is replaced.
    assert a.ok("sync", "--json").json()["commit"] != ""
    _git("pull", "-q", "--ff-only", cwd=clone)
    assert shard.read_bytes() == ours


def test_list_pool_before_any_sync(a: Machine) -> None:
    assert "no pool linked" in a.ok("list", "--pool").out


# ---------------------------------------------------------------------------------------------
# demo and plugins


def test_demo_runs_two_machines_and_cleans_up(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    lines = [step["text"] for step in data["steps"]]
    said = [t for step in data["steps"] for t in (step["text"], *step.get("more", []))]
    assert any(t.startswith("sync: created the pool → cloned") for t in said)
    assert any("reads 2 chapters from the pool, written by machine-a" in t for t in lines)
    assert any("local-only — " in t and "· 2 pending" in t for t in lines)
    assert (
        lines[-1].endswith("→ nothing to push")
        and "now reads 3 chapters" in data["steps"][-1]["more"][0]
    )
    assert not Path(data["root"]).exists() and data["kept"] is False
    assert main(["demo"]) == 0
    text = capsys.readouterr().out
    assert text.startswith("chapters demo: two machines, one pool") and "(--keep keeps it)" in text


def test_demo_keep_keeps_the_directory(capsys: pytest.CaptureFixture[str]) -> None:
    import shutil

    assert main(["demo", "--keep", "--json"]) == 0
    root = Path(json.loads(capsys.readouterr().out)["root"])
    try:
        assert (root / "shared-drive" / "widgets.git" / "HEAD").is_file()
        assert (root / "machine-b" / "widgets" / ".dsh-knowledge").is_dir()
    finally:
        shutil.rmtree(root)


def test_provider_plugins_skip_duplicates_broken_and_foreign(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    group = providers.PROVIDER_GROUP
    fake = "dsh_chapters_core.testing.fakes_transport:FakeProviderFactory"
    points = [
        EntryPoint("fake", fake, group),
        EntryPoint("fake", "dsh_chapters_git.provider:GitProviderFactory", group),  # duplicate name
        EntryPoint("broken", "dsh_chapters_no_such_module:Factory", group),
        EntryPoint("foreign", "json:JSONDecoder", group),  # not a ProviderFactory
    ]
    monkeypatch.setattr(providers, "entry_points", lambda group: points)
    with caplog.at_level(logging.WARNING, logger="dsh_chapters.plugins"):
        loaded = providers.load_provider_factories()
    assert [f.name for f in loaded] == ["fake"]
    messages = " ".join(r.getMessage() for r in caplog.records)
    assert "'broken'" in messages and "failed to import" in messages and "'foreign'" in messages


def test_installed_providers_include_git() -> None:
    names = [f.name for f in providers.load_provider_factories()]
    assert "git" in names and len(names) == len(set(names))


def test_before_archive_pulls_and_after_archive_is_quiet_without_a_pool(
    a: Machine, b: Machine, pool: Path
) -> None:
    from dsh_chapters.services import pool as knowledge_pool

    assert knowledge_pool.before_archive(a.app()) is None
    assert knowledge_pool.after_archive(a.app()) is None
    assert knowledge_pool.describe_sync_point(None) == ""
    a.ok("link", str(pool))
    b.ok("link", str(pool))
    a.archive("s-a")
    pulled = knowledge_pool.before_archive(b.app())
    assert isinstance(pulled, knowledge_pool.SyncReport) and pulled.ok
    assert pulled.copied_in_new == 3 and not pulled.pushed and pulled.mode == "pull"


# ---------------------------------------------------------------------------------------------
# link: TreeDX pools (issue #7: a token is always required; the link resolves or creates)


def test_treedx_link_requires_a_token_even_on_loopback(a: Machine) -> None:
    from dsh_chapters_treedx.testing import FakeTreeDX

    with FakeTreeDX() as service:
        result = a.run("link", service.remote("widgets-kb"))
        assert result.code == 2
        assert "always needs a token" in result.text
        assert service.count("/api/v1/repos") == 0
        assert not (a.workspace / ".dsh-chapters" / "config.toml").exists()


def test_treedx_link_resolves_or_creates_the_repository(a: Machine, b: Machine) -> None:
    from dsh_chapters_treedx.testing import FakeTreeDX

    with FakeTreeDX() as service:
        token = service.issue_token()
        remote = service.remote("widgets-kb")
        a.ok("link", remote, token)
        assert service.count("/api/v1/repos") == 1  # created at link time, not at first sync
        b.ok("link", remote, token)
        assert service.count("/api/v1/repos") == 2  # idempotent: the same repository
        assert (a.workspace / ".dsh-knowledge" / ".treedx-state.json").is_file()
        for m in (a, b):
            assert token not in (m.workspace / ".dsh-knowledge" / ".treedx-state.json").read_text()


def test_treedx_link_with_a_bad_token_links_nothing(a: Machine) -> None:
    from dsh_chapters_treedx.testing import FakeTreeDX

    with FakeTreeDX() as service:
        result = a.run("link", service.remote("widgets-kb"), "not-a-token-3f9")
        assert result.code == 1
        assert "auth" in result.text and "chapters link" in result.text
        assert "not-a-token-3f9" not in result.text
        assert not (a.workspace / ".dsh-chapters" / "config.toml").exists()
        assert not list((a.home / "dsh-chapters" / "credentials").glob("*"))
