"""What a new user meets first: ids they can type, installs a team can commit, an import that
says where it looked, errors a program can read, and a store git leaves alone."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from dsh_chapters.cli import main
from dsh_chapters.services.library import short_sessions

from tests.app.archive_workspace import (
    CLAUDE_MAIN,
    CLAUDE_SESSION,
    CODEX_FILE,
    DSH_FILE,
    Runner,
    make_workspace,
    runner,
)

GIT = shutil.which("git")


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("CLAUDE_CONFIG_DIR", raising=False)
    monkeypatch.setenv("CODEX_HOME", str(home / ".codex"))
    return home


@pytest.fixture
def run(tmp_path: Path, home: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> Runner:
    return runner(make_workspace(tmp_path / "acme-api"), monkeypatch, capsys)


def _json(run: Runner, *args: str) -> Any:
    result = run("--json", *args)
    assert result.code == 0, result.err
    return json.loads(result.out)


# -- ids ---------------------------------------------------------------------------------------


def test_short_session_ids_are_eight_characters_unless_two_sessions_share_them() -> None:
    shorts = short_sessions(["5f0c2a9e-aaaa", "5f0c2a9e-bbbb", "019a8f3c-cccc", "dsh-1"])
    assert shorts == {"5f0c2a9e-aaaa": "5f0c2a9e-a", "5f0c2a9e-bbbb": "5f0c2a9e-b",
                      "019a8f3c-cccc": "019a8f3c", "dsh-1": "dsh-1"}


def test_every_id_list_prints_opens_its_chapter_in_show_and_artifact(run: Runner) -> None:
    for file in (CLAUDE_MAIN, CODEX_FILE, DSH_FILE):
        assert run("archive", "--final", str(file)).code == 0
    rows = _json(run, "list")
    sessions = [r["sessionId"] for r in rows]
    assert sessions == sorted(sessions, key=lambda s: min(
        r["date"] for r in rows if r["sessionId"] == s))  # sessions in the order they started
    for row in rows[::5]:
        shown = _json(run, "show", row["id"])
        assert shown["path"] == row["path"]
        read = _json(run, "artifact", row["id"], "read", "--limit", "3")
        assert read["path"].endswith(row["path"].split("/", 1)[1])
    first = rows[0]
    padded = f"{first['session']}/{first['number']:03d}"  # the old <session>/<NNN> form
    assert _json(run, "show", padded)["path"] == first["path"]
    assert _json(run, "show", first["path"])["path"] == first["path"]


def test_an_archive_names_what_it_wrote_by_the_ids_list_prints(run: Runner,
                                                               tmp_path: Path) -> None:
    """The archive's report names its chapters from one listing of the store's sessions, not
    of every chapter: the same ids `chapters list` prints, a longer one where two sessions
    share their first eight characters."""
    assert run("archive", "--final", str(CODEX_FILE)).code == 0
    session = _json(run, "list")[0]["path"].split("/")[1]  # its folder: the whole id
    store = tmp_path / "acme-api" / ".dsh-chapters"
    twin = store / (session[:8] + "-0000-twin")  # shares its first eight characters
    (twin / "chapters").mkdir(parents=True)
    shutil.copy(next((store / session / "chapters").glob("*.md")),
                twin / "chapters")
    printed = run("archive", "--final", str(CLAUDE_MAIN))
    assert printed.code == 0, printed.err
    listed = {r["id"]: r["title"] for r in _json(run, "list")}
    lines = printed.out.split("  chapters ")[1].splitlines()[1:]
    named = [line.split()[0] for line in lines if line.startswith("    ")]
    assert named and all(name in listed for name in named), (named, sorted(listed))
    assert any(name.startswith(session[:8]) for name in listed)
    again = run("archive", "--final", str(CODEX_FILE))  # nothing new: no chapter to name
    assert again.code == 0 and "0 written" in again.out
    shorts = {name.split("/")[0] for name in listed}
    assert session[:8] not in shorts and len(shorts) == 3  # the twins are told apart


def test_a_number_several_sessions_have_is_refused_with_the_ids_it_could_mean(
        run: Runner) -> None:
    for file in (CLAUDE_MAIN, CODEX_FILE):
        assert run("archive", str(file)).code == 0
    refused = run("show", "1")
    assert refused.code == 2
    assert "'1' is chapter 1 of 2 sessions: 019a8f3c/1, 5f0c2a9e/1" in refused.err
    unknown = run("show", "ffff/1")
    assert unknown.code == 1 and "no session starts with 'ffff'" in unknown.err


# -- --json errors -----------------------------------------------------------------------------


def test_a_json_error_is_json_on_stdout_with_the_same_exit_code(run: Runner) -> None:
    failed = run("--json", "show", "9/9")
    assert failed.code == 1
    error = json.loads(failed.out)
    assert error["exitCode"] == 1 and "no chapter '9/9'" in error["error"]
    assert error["next"].startswith("run `chapters list`")
    usage = run("show", "--line", "x", "1", "--json")
    assert usage.code == 2 and json.loads(usage.out)["exitCode"] == 2
    plain = run("show", "9/9")
    assert plain.out == "" and "no chapter" in plain.err  # without --json: stderr only


# -- import: where it looked -------------------------------------------------------------------


def test_an_import_that_finds_nothing_names_the_folder_it_looked_in(
        run: Runner, home: Path, tmp_path: Path) -> None:
    failed = run("import", "claude-code")
    assert failed.code == 1
    name = re.sub(r"[^A-Za-z0-9]", "-", str(tmp_path / "acme-api"))
    folder = home / ".claude" / "projects" / name
    assert f"found under {folder} (0 files)" in failed.err.replace("\n", " ")


# -- install: portable at project scope, this machine's path kept local -----------------------


def test_a_project_install_names_chapters_from_the_path_and_imports_the_sessions(
        run: Runner, home: Path, tmp_path: Path) -> None:
    workspace = tmp_path / "acme-api"
    folder = home / ".claude" / "projects" / re.sub(r"[^A-Za-z0-9]", "-", str(workspace))
    folder.mkdir(parents=True)
    shutil.copy(CLAUDE_MAIN, folder / CLAUDE_MAIN.name)
    installed = _json(run, "install", "claude-code")
    settings = (workspace / ".claude" / "settings.json").read_text()
    servers = json.loads((workspace / ".mcp.json").read_text())["mcpServers"]
    assert '"command": "chapters hook"' in settings and str(tmp_path) not in settings
    assert servers["dsh-chapters"] == {"command": "chapters", "args": ["mcp"]}
    assert installed["import"]["sessions"] == 1 and installed["import"]["turnsArchived"] == 54
    again = _json(run, "install", "claude-code")
    assert again["changed"] == 0 and again["import"]["turnsArchived"] == 0
    removed = _json(run, "uninstall", "claude-code")
    assert removed["changed"] == 2 and not (workspace / ".mcp.json").exists()


def test_without_chapters_on_the_path_a_project_install_says_so(
        run: Runner, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    said = run("install", "claude-code", "--no-import")
    assert said.code == 0
    assert "warning: `chapters` is not on this machine's PATH" in said.out
    assert "--scope local" in said.out


def test_a_local_install_keeps_the_full_path_out_of_committed_files_and_out_of_git(
        run: Runner, home: Path, tmp_path: Path) -> None:
    workspace = tmp_path / "acme-api"
    user_file = home / ".claude.json"
    original = json.dumps({"numStartups": 4, "projects": {"/elsewhere": {"mcpServers": {}}}})
    user_file.write_text(original, encoding="utf-8")
    _json(run, "install", "claude-code", "--scope", "local", "--no-import")
    local = json.loads((workspace / ".claude" / "settings.local.json").read_text())
    command = local["hooks"]["SessionStart"][0]["hooks"][0]["command"]
    assert command.endswith(" hook") and Path(command.split(" ")[0]).is_absolute()
    entry = json.loads(user_file.read_text())["projects"][str(workspace)]["mcpServers"]
    assert Path(entry["dsh-chapters"]["command"]).is_absolute()
    assert not (workspace / ".claude" / "settings.json").exists()
    assert not (workspace / ".mcp.json").exists()
    exclude = (workspace / ".git" / "info" / "exclude").read_text()
    assert "/.claude/settings.local.json/" in exclude.splitlines() or \
        "/.claude/settings.local.json" in exclude
    _json(run, "uninstall", "claude-code", "--scope", "local")
    assert user_file.read_text(encoding="utf-8") == original  # byte for byte
    assert not (workspace / ".claude").exists()


def test_an_earlier_absolute_install_is_replaced_in_place_not_doubled(
        run: Runner, tmp_path: Path) -> None:
    """A project installed by a release that wrote this machine's path: a new install swaps
    the entries for the portable ones, and uninstall still restores the original bytes."""
    workspace = tmp_path / "acme-api"
    settings, servers = workspace / ".claude" / "settings.json", workspace / ".mcp.json"
    settings.parent.mkdir()
    settings.write_text('{"permissions": {"allow": []}}\n', encoding="utf-8")
    original = settings.read_bytes()
    old = "/home/dev/.venvs/chapters/bin/chapters"
    settings.write_text(json.dumps({"permissions": {"allow": []}, "hooks": {
        e: [{"hooks": [{"type": "command", "command": f"{old} hook", "timeout": 30}]}]
        for e in ("SessionStart", "PreCompact", "SessionEnd")}}, indent=2) + "\n")
    servers.write_text(json.dumps({"mcpServers": {"dsh-chapters": {"command": old,
                                                                   "args": ["mcp"]}}}))
    ledger = Path(str(tmp_path / "dsh-home")) / "dsh-chapters" / "installs.json"
    ledger.parent.mkdir(parents=True)
    backup = settings.with_name("settings.json.dsh-chapters.bak")
    backup.write_bytes(original)
    ledger.write_text(json.dumps({"files": {
        str(settings): {"kind": "claude-hooks", "existed": True, "backup": str(backup),
                        "createdDirs": []},
        str(servers): {"kind": "claude-mcp", "existed": False, "createdDirs": []}}}))
    _json(run, "install", "claude-code", "--no-import")
    hooks = json.loads(settings.read_text())["hooks"]
    assert {h["command"] for g in hooks.values() for group in g for h in group["hooks"]} == {
        "chapters hook"}
    assert json.loads(servers.read_text())["mcpServers"]["dsh-chapters"]["command"] == "chapters"
    _json(run, "uninstall", "claude-code")
    assert settings.read_bytes() == original and not servers.exists()


# -- the store and git --------------------------------------------------------------------------


@pytest.mark.skipif(GIT is None, reason="needs the git command")  # CI installs it (.ci/run)
def test_the_first_archive_keeps_the_store_out_of_git_status(run: Runner,
                                                              tmp_path: Path) -> None:
    workspace = tmp_path / "repo"
    workspace.mkdir()
    subprocess.run([GIT or "git", "init", "-q"], cwd=workspace, check=True)
    code = main(["-C", str(workspace), "archive", str(CLAUDE_MAIN)])
    assert code == 0
    status = subprocess.run([GIT or "git", "status", "--porcelain", "--untracked-files=all"],
                            cwd=workspace, capture_output=True, text=True, check=True).stdout
    assert status == "", status
    exclude = workspace / ".git" / "info" / "exclude"
    lines = exclude.read_text().splitlines()
    assert "/.dsh-chapters/" in lines and "/.dsh-knowledge/" in lines
    # Removed by the user: the next archive does not put it back.
    exclude.write_text("\n".join(line for line in lines if "dsh" not in line) + "\n")
    assert main(["-C", str(workspace), "archive", "--final", str(CODEX_FILE)]) == 0
    assert "dsh-chapters" not in exclude.read_text()
    assert not (workspace / ".gitignore").exists()


def test_a_worktree_writes_the_common_exclude_file(tmp_path: Path) -> None:
    from dsh_chapters_fs.git_exclude import exclude_from_git

    common = tmp_path / "main" / ".git"
    gitdir = common / "worktrees" / "feature"
    gitdir.mkdir(parents=True)
    (gitdir / "commondir").write_text("../..\n")
    tree = tmp_path / "feature"
    tree.mkdir()
    (tree / ".git").write_text(f"gitdir: {gitdir}\n")
    assert exclude_from_git(tree, [".dsh-chapters"]) == [".dsh-chapters"]
    assert "/.dsh-chapters/" in (common / "info" / "exclude").read_text().splitlines()
    assert exclude_from_git(tree, [".dsh-chapters"]) == []  # never twice


def test_the_dsh_watch_root_follows_dsh_home(monkeypatch: pytest.MonkeyPatch,
                                             tmp_path: Path) -> None:
    from dsh_chapters.bootstrap import session_files

    monkeypatch.setenv("DSH_HOME", str(tmp_path / "dsh"))
    files = session_files()
    assert files.roots["dsh"] == tmp_path / "dsh" / "sessions"
    folder = files.project_folder("claude-code", "/home/dev/work/acme-api")
    assert folder is not None and folder.name == "-home-dev-work-acme-api"
    assert CLAUDE_SESSION  # the fixture the other tests archive


def test_gemini_and_opencode_project_files_name_chapters_from_the_path_too(
        run: Runner, tmp_path: Path, home: Path) -> None:
    workspace = tmp_path / "acme-api"
    assert run("install", "gemini-cli", "--no-import").code == 0
    assert run("install", "opencode", "--no-import").code == 0
    for committed in (workspace / ".gemini" / "settings.json", workspace / "opencode.json"):
        text = committed.read_text(encoding="utf-8")
        assert str(tmp_path) not in text and '"chapters"' in text, text
    assert run("install", "opencode", "--scope", "user", "--no-import").code == 0
    user = (home / ".config" / "opencode" / "opencode.json").read_text(encoding="utf-8")
    assert '"chapters"' not in user  # this machine's own file: the full path
    for agent in ("gemini-cli", "opencode"):
        assert run("uninstall", agent).code == 0
    assert not (workspace / "opencode.json").exists()
