"""The README's "Use it on your own sessions" commands run as written, on a store of several
sessions: this repository's Claude Code, Codex and DSH fixtures, laid where each harness keeps
its sessions for a workspace of our own (their recorded working directory rewritten to it),
with the home directory, CODEX_HOME and DSH_HOME of a user who set nothing else."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from dsh_chapters.cli import main
from dsh_chapters_harness.dsh_discovery import project_key

from tests.app.archive_workspace import CLAUDE_MAIN, CODEX_FILE, DSH_FILE, make_workspace

README = Path(__file__).resolve().parents[2] / "README.md"
RECORDED_CWD = "/home/dev/work/acme-api"  # where the fixtures' sessions ran
LONG_RUNNING = {"serve"}  # a server until Ctrl-C: tests/adapters/web drives it
LAID = {"claude-code", "codex", "dsh"}  # the harnesses whose fixtures this test lays


def readme_commands(heading: str) -> list[list[str]]:
    """The `$ chapters …` lines of the first console block under `heading`, comments cut."""
    text = README.read_text(encoding="utf-8")
    section = text[text.index(heading):]
    block = section[section.index("```console"):]
    block = block[:block.index("\n```", 10)]
    commands = []
    for line in block.splitlines():
        if line.startswith("$ chapters "):
            words = re.split(r"\s{2,}#", line[2:], maxsplit=1)[0].split()
            commands.append([w.strip('"') for w in _join_quoted(words)])
    return commands


def _join_quoted(words: list[str]) -> list[str]:
    """`"token refresh middleware"` back into one argument, as the shell would."""
    joined: list[str] = []
    quoted: list[str] = []
    for word in words:
        if quoted:
            quoted.append(word)
            if word.endswith('"'):
                joined.append(" ".join(quoted))
                quoted = []
        elif word.startswith('"') and not (word.endswith('"') and len(word) > 1):
            quoted.append(word)
        else:
            joined.append(word)
    return joined


@pytest.fixture
def user(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    workspace = make_workspace(home / "src" / "widgets")
    for name in ("CLAUDE_CONFIG_DIR", "CODEX_HOME", "DSH_HOME", "DSH_CHAPTERS_HARNESS_ID"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("COLUMNS", "100")
    here = str(workspace)

    def laid(source: Path, target: Path) -> None:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(source.read_text(encoding="utf-8").replace(RECORDED_CWD, here),
                          encoding="utf-8")

    laid(CLAUDE_MAIN, home / ".claude" / "projects" / re.sub(r"[^A-Za-z0-9]", "-", here)
         / CLAUDE_MAIN.name)
    laid(CODEX_FILE, home / ".codex" / "sessions" / "2026" / "11" / "20" / CODEX_FILE.name)
    laid(DSH_FILE, home / ".dsh" / "sessions" / project_key(here) / DSH_FILE.parent.name
         / "session.jsonl")
    monkeypatch.chdir(workspace)
    return workspace


def test_the_readmes_own_commands_run_as_written_on_three_sessions(
        user: Path, capsys: pytest.CaptureFixture[str]) -> None:
    commands = readme_commands("## Use it on your own sessions")
    assert [c[1] for c in commands][:2] == ["key", "import"] and ["list"] in [
        c[1:2] for c in commands]
    ran = []
    for argv in commands:
        if argv[1] in LONG_RUNNING:
            continue
        capsys.readouterr()
        code = main(argv[1:])
        out, err = capsys.readouterr()
        if argv[1] == "import" and argv[2] not in LAID:
            # a harness whose sessions this test lays none of: the error names where it looked
            assert code == 1 and f"no {argv[2]} session of {user} found under " in err, err
            continue
        assert code == 0, f"`{' '.join(argv)}` exited {code}:\n{out}{err}"
        ran.append((argv, out))
    assert {a[2] for a, _ in ran if a[1] == "import"} == LAID
    listing = dict((" ".join(a), o) for a, o in ran)["chapters list"]
    sessions = [line.split()[0] for line in listing.splitlines() if re.match(r"^\S+  \d{4}-", line)]
    assert len(sessions) == 3, listing  # Claude Code, Codex and DSH, one line each
    shown = next(o for a, o in ran if a[1] == "show")
    assert shown.strip(), "show printed nothing"
    assert (user / ".dsh-chapters").is_dir()
