"""`chapters scan` (§9): a credential an older version archived is found in the store, the
mirror and the pool's history (a real local-path git pool), by file, line and family, and
never printed; after it is gone from every file, the history still names it."""

from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path

import pytest
from dsh_chapters_core.frontmatter import dump_frontmatter

from tests.acceptance.steps_common import Machine, sample_session_text, session_id_for

KEY_ID = "AKIA" + "QX4TNB7ZLM2KWP9R"
TOKEN = "ghp_" + "Zq7RkW2mXo9TfB4nLc8VyD1sHa6JpE3uGi5K"
SESSION = session_id_for("scan-old")


def _machine(root: Path) -> Machine:
    workspace = root / "box" / "widgets"
    (workspace / ".git").mkdir(parents=True)
    (workspace / ".git" / "config").write_text(
        '[remote "origin"]\n\turl = https://github.com/acme/widgets.git\n')
    home = root / "box" / "home"
    home.mkdir()
    return Machine("box", workspace, home, {"DSH_HOME": str(home),
                                            "DSH_CHAPTERS_HARNESS_ID": "box",
                                            "HOME": str(root / "box"), "PATH": "/usr/bin:/bin"})


def _plant(m: Machine, body: str) -> Path:
    """A chapter as a version without today's rules would have written it."""
    text = dump_frontmatter({
        "kind": "chapter", "title": "deploy keys", "sessionId": SESSION, "harnessId": "box",
        "sha256": hashlib.sha256(body.encode()).hexdigest()}) + body
    path = m.store / SESSION / "chapters" / "001-deploy-keys.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.slow
def test_scan_finds_an_old_chapter_and_the_pools_history(tmp_path: Path) -> None:
    m = _machine(tmp_path)
    clean = m.ok("scan")
    assert "no credential found" in clean.out
    session = tmp_path / "session.jsonl"
    session.write_text(sample_session_text(session_id_for("scan-new")), encoding="utf-8")
    m.ok("archive", str(session), "--harness", "dsh")
    old = _plant(m, f"## Turn\n\nthe deploy key is {KEY_ID}\n\nexport GH_TOKEN={TOKEN}\n")
    pool = tmp_path / "drive" / "widgets.git"
    m.ok("link", str(pool))
    m.ok("sync")

    found = m.run("scan", "--json")
    assert found.code == 1
    assert KEY_ID not in found.text and TOKEN not in found.text
    report = found.json()
    assert report["counts"] == {"store": 2, "mirror": 2, "pool history": 2}
    store_hits = {(h["line"], h["family"]) for h in report["hits"] if h["where"] == "store"}
    body_line = old.read_text().splitlines().index(f"the deploy key is {KEY_ID}") + 1
    assert store_hits == {(body_line, "aws-access-key"), (body_line + 2, "github-token")}
    assert {h["path"] for h in report["hits"] if h["where"] == "store"} == {
        f"{SESSION}/chapters/001-deploy-keys.md"}
    history = [h for h in report["hits"] if h["where"] == "pool history"]
    assert all(len(h["commit"]) == 40 and h["path"].endswith("/001-deploy-keys.md")
               for h in history)
    digest = hashlib.sha256(KEY_ID.encode()).hexdigest()[:8]
    assert digest in {h["sha256"] for h in report["hits"]}

    # The human report: no credential, one line per hit, the next step.
    text = m.run("scan")
    assert text.code == 1 and KEY_ID not in text.text and TOKEN not in text.text
    assert "rotate each credential" in text.out and "docs/redaction.md" in text.out
    assert all(len(line) <= 100 for line in text.out.splitlines())

    # The file is redacted where it stands (as docs/redaction.md says) and published again:
    # the store and the mirror are clean, the history still holds the old version.
    result = m.run("redact", stdin=old.read_text(encoding="utf-8"))
    assert result.code == 0, result.text
    redacted = result.out
    old.write_text(redacted, encoding="utf-8")
    m.ok("sync")
    after = m.run("scan", "--json").json()
    assert after["counts"] == {"store": 0, "mirror": 0, "pool history": 2}
    log = subprocess.run(["git", "--git-dir", str(pool), "log", "--format=%H"],
                         capture_output=True, text=True, check=True).stdout.split()
    assert {h["commit"] for h in after["hits"]} <= set(log)


@pytest.mark.slow
def test_scan_reads_the_pools_own_objects_and_unnamed_ones(tmp_path: Path) -> None:
    m = _machine(tmp_path)
    pool = tmp_path / "drive" / "widgets.git"
    m.ok("link", str(pool))
    m.ok("sync")
    # Another machine pushed a file this mirror has not pulled yet, and a blob no commit
    # names sits in the pool (a push cut off after its objects landed).
    work = tmp_path / "other"
    subprocess.run(["git", "clone", "-q", str(pool), str(work)], check=True)
    (work / "notes.md").write_text(f"token {TOKEN}\n", encoding="utf-8")
    env = {"GIT_AUTHOR_NAME": "o", "GIT_AUTHOR_EMAIL": "o@x", "GIT_COMMITTER_NAME": "o",
           "GIT_COMMITTER_EMAIL": "o@x", "PATH": "/usr/bin:/bin"}
    subprocess.run(["git", "-C", str(work), "add", "notes.md"], check=True, env=env)
    subprocess.run(["git", "-C", str(work), "commit", "-qm", "n"], check=True, env=env)
    subprocess.run(["git", "-C", str(work), "push", "-q", "origin", "HEAD:main"], check=True,
                   env=env)
    subprocess.run(["git", "--git-dir", str(pool), "hash-object", "-w", "--stdin"],
                   input=f"key {KEY_ID}\n", text=True, check=True, capture_output=True)
    report = m.run("scan", "--json").json()
    history = {(h["objects"], h["path"], h["family"]) for h in report["hits"]
               if h["where"] == "pool history"}
    assert ("pool", "notes.md", "github-token") in history
    assert ("pool", "", "aws-access-key") in history
    assert json.dumps(report).count(TOKEN) == 0
