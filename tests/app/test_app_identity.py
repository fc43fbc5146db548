"""`chapters key` and `chapters redact`, through the real CLI entry point."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from dsh_chapters.cli import main
from dsh_chapters_fs.workspace import remotes_in_config

KEY = str(uuid.uuid5(uuid.NAMESPACE_OID, "github.com/org/repo"))
GHP = "ghp_" + "Z" * 36


@pytest.fixture(autouse=True)
def _home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # No user-level config of the machine running the tests may leak in.
    monkeypatch.setenv("DSH_HOME", str(tmp_path / "dsh-home"))


def _repo(root: Path, config: str) -> Path:
    (root / ".git").mkdir(parents=True)
    (root / ".git" / "config").write_text(config, encoding="utf-8")
    return root


ORIGIN_SECOND = """\
[core]
\trepositoryformatversion = 0
[remote "upstream"]
\turl = https://gitlab.com/org/repo.git
\tfetch = +refs/heads/*:refs/remotes/upstream/*
[remote "origin"]
\turl = https://user:tok@GitHub.com/Org/Repo.git ; a comment
"""


@pytest.mark.parametrize(
    ("config", "remotes"),
    [
        (ORIGIN_SECOND, [("upstream", "https://gitlab.com/org/repo.git"),
                         ("origin", "https://user:tok@GitHub.com/Org/Repo.git")]),
        ('[remote "a"] url = "git@h:o/r" # c\n', [("a", "git@h:o/r")]),
        ("[core]\n\tbare = false\n", []),
        ('[remote "x"]\n\tfetch = +refs\n[Remote "y"]\n\tURL = h/o/r\n', [("y", "h/o/r")]),
    ],
)
def test_remotes_in_config(config: str, remotes: list[tuple[str, str]]) -> None:
    assert remotes_in_config(config) == remotes


def test_key_reads_origin_first(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    repo = _repo(tmp_path / "w", ORIGIN_SECOND)
    (repo / "sub").mkdir()
    assert main(["-C", str(repo / "sub"), "key", "--json"]) == 0
    out = capsys.readouterr().out
    assert json.loads(out) == {"projectKey": KEY, "canonical": "github.com/org/repo",
                               "derivation": "remote"}
    assert "tok" not in out


def test_key_falls_back_to_the_first_remote_then_the_path(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    first = _repo(tmp_path / "a", '[remote "upstream"]\n\turl = git@github.com:org/repo\n')
    assert main(["-C", str(first), "key", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["projectKey"] == KEY
    bare = _repo(tmp_path / "b", "[core]\n")
    assert main(["-C", str(bare / ".git"), "key", "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["derivation"] == "path-derived"
    assert got["canonical"] == str(bare.resolve())


def test_key_in_a_worktree_follows_gitdir(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    main_repo = _repo(tmp_path / "main", ORIGIN_SECOND)
    worktree_git = main_repo / ".git" / "worktrees" / "wt"
    worktree_git.mkdir(parents=True)
    (worktree_git / "commondir").write_text("../..\n", encoding="utf-8")
    wt = tmp_path / "wt"
    wt.mkdir()
    (wt / ".git").write_text(f"gitdir: {worktree_git}\n", encoding="utf-8")
    assert main(["-C", str(wt), "key", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["projectKey"] == KEY


def test_key_honours_the_config_override(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = _repo(tmp_path / "w", ORIGIN_SECOND)
    (repo / ".dsh-chapters").mkdir()
    override = "1c3f0000-0000-5000-8000-000000000001"
    (repo / ".dsh-chapters" / "config.toml").write_text(f'projectKey = "{override}"\n')
    assert main(["-C", str(repo), "key", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {
        "projectKey": override, "canonical": override, "derivation": "override",
    }


def test_key_options(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["key", "--remote", "ssh://git@github.com/org/repo.git/"]) == 0
    out = capsys.readouterr().out
    assert out == f"projectKey  {KEY}\ncanonical   github.com/org/repo\nderivation  remote\n"
    assert main(["-C", str(tmp_path), "key", "--path", ".", "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got == {
        "projectKey": str(uuid.uuid5(uuid.NAMESPACE_OID, str(tmp_path.resolve()))),
        "canonical": str(tmp_path.resolve()),
        "derivation": "path-derived",
    }
    assert main(["-C", str(tmp_path), "key", "--path", "."]) == 0
    assert "differ between machines" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("argv", "code", "message"),
    [
        (["key", "--remote", "x", "--path", "y"], 2, "not allowed with"),
        (["key", "--remote", "  "], 2, "no remote"),
        (["key", "--path", "missing-dir"], 1, "not a directory"),
    ],
)
def test_key_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str],
                    code: int, message: str) -> None:
    assert main(["-C", str(tmp_path), *argv]) == code
    assert message in capsys.readouterr().err


def test_key_treedx_remote(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["key", "--json", "--remote", "treedx+https://user:secret@h:8443/pool"]) == 0
    out = capsys.readouterr().out
    assert json.loads(out)["canonical"] == "treedx/h:8443/pool"
    assert json.loads(out)["derivation"] == "treedx"
    assert "secret" not in out


def test_redact_stdin_to_stdout_with_report(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    text = f"push with {GHP}\nAuthorization: Bearer abcdefgh12345678\nplain line\n"
    monkeypatch.setattr(sys, "stdin", io.StringIO(text))
    assert main(["redact", "--report"]) == 0
    captured = capsys.readouterr()
    assert GHP not in captured.out
    assert "abcdefgh12345678" not in captured.out + captured.err
    assert captured.out.endswith("plain line\n")
    assert captured.out.count("⟦redacted:credential sha256=") == 2
    report = dict(line.rsplit(None, 1) for line in captured.err.splitlines())
    # The families that matched, then the total (--json lists every family).
    assert report == {"github-token": "1", "authorization-header": "1", "total": "2"}


def test_redact_uses_configured_patterns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / ".dsh-chapters").mkdir()
    (tmp_path / ".dsh-chapters" / "config.toml").write_text(
        "redactionPatterns = ['EMP-\\d{6}']\n"
    )
    monkeypatch.setattr(sys, "stdin", io.StringIO("badge EMP-778812 ok"))
    assert main(["-C", str(tmp_path), "redact", "--report"]) == 0
    captured = capsys.readouterr()
    assert captured.out.startswith("badge ⟦redacted:credential sha256=")
    assert captured.out.endswith("⟧ ok")
    assert captured.err.splitlines() == ["custom  1", "total   1"]


def test_redact_report_as_json_and_line_endings_kept(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    raw = b"crlf line\r\nsecret: " + GHP.encode() + b"\r\nend"
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(raw), encoding="utf-8"))
    assert main(["redact", "--report", "--json"]) == 0
    captured = capsys.readouterr()
    assert captured.out.startswith("crlf line\r\nsecret: ⟦redacted:credential sha256=")
    assert captured.out.endswith("⟧\r\nend")
    report = json.loads(captured.err)
    assert report["families"]["github-token"] == 1
    assert report["total"] == 1
    assert set(report["families"]) >= {"aws-access-key", "pem-private-key", "custom"}


def test_redact_subprocess_keeps_every_other_byte(tmp_path: Path) -> None:
    raw = b"crlf line\r\nnot utf-8: \xff\xfe " + GHP.encode() + b" tail\r\n\x00end"
    done = subprocess.run(
        [sys.executable, "-m", "dsh_chapters", "redact", "--report"],
        input=raw, capture_output=True, check=False, cwd=tmp_path, timeout=60,
        env={**os.environ, "DSH_HOME": str(tmp_path / "home")},
    )
    assert done.returncode == 0, done.stderr
    head, _, tail = done.stdout.partition("⟦redacted:credential sha256=".encode())
    assert head == b"crlf line\r\nnot utf-8: \xff\xfe "
    assert tail.endswith(b"\xe2\x9f\xa7 tail\r\n\x00end")
    assert GHP.encode() not in done.stdout + done.stderr
    assert b"github-token" in done.stderr


def test_key_subprocess(tmp_path: Path) -> None:
    repo = _repo(tmp_path / "w", ORIGIN_SECOND)
    done = subprocess.run(
        [sys.executable, "-m", "dsh_chapters", "key", "--json"],
        capture_output=True, text=True, check=False, cwd=repo, timeout=60,
        env={**os.environ, "DSH_HOME": str(tmp_path / "home")},
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["projectKey"] == KEY
