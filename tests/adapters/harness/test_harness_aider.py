"""The Aider reader: how each kind of line of `.aider.chat.history.md` is read, where turns end,
and where `discover` looks (docs/formats.md, Aider)."""

from __future__ import annotations

from pathlib import Path

import pytest
from dsh_chapters_core.errors import InputError
from dsh_chapters_core.events import (
    AssistantMessage,
    CommandRun,
    HostInjection,
    Reasoning,
    ToolCall,
    ToolResult,
    Transcript,
    TurnEnd,
    UserMessage,
)
from dsh_chapters_core.turns import split_turns
from dsh_chapters_harness.aider import AiderReader, history_files

from tests.fixtures import make_agent_fixtures as fx

FIXTURE = Path(fx.__file__).parent / "agents" / fx.AIDER_FILE


def _read(tmp_path: Path, text: str, name: str = ".aider.chat.history.md") -> Transcript:
    path = tmp_path / name
    path.write_bytes(text.encode("utf-8"))
    return AiderReader().read(str(path))


def test_the_fixture_reads_as_its_turns_each_prompt_with_its_reply() -> None:
    transcript = AiderReader().read(str(FIXTURE))
    assert transcript.session_id == "aider-20261120-091403"
    assert transcript.started_at == "2026-11-20T09:14:03"
    assert not any(e.time for e in transcript.events)  # aider times its runs, not its records
    assert transcript.cwd == str(FIXTURE.parent)
    account = transcript.account
    assert (account.unknown, account.malformed, account.truncated_tail) == (0, 0, False)
    assert dict(account.skip_rules) == {"blank-line": 21, "blank-input": 1}
    split = split_turns(transcript.events)
    assert len(split.complete) == 3
    said = [(type(e).__name__, e.text) for e in split.complete[0].events
            if isinstance(e, UserMessage | AssistantMessage | Reasoning)]
    assert said == [("UserMessage", fx.AIDER_PROMPTS[0]), ("Reasoning", fx.AIDER_REASONING),
                    ("AssistantMessage", fx.AIDER_REPLIES[0])]
    assert [e.text for e in split.incomplete if isinstance(e, UserMessage)] == [
        fx.AIDER_PROMPTS[3]]  # the last turn waits for the session to end


def test_a_reply_keeps_its_own_quotes_and_headings() -> None:
    replies = [e.text for e in AiderReader().read(str(FIXTURE)).events
               if isinstance(e, AssistantMessage)]
    assert "#### Why\n\n> The settings file has always called it `retry_limit`." in replies[0]
    assert ">>>>>>> REPLACE" in replies[0]


def test_aider_s_output_in_a_turn_is_the_result_of_a_tool_named_aider() -> None:
    events = AiderReader().read(str(FIXTURE)).events
    results = [e for e in events if isinstance(e, ToolResult)]
    first = results[0].text.split("\n")
    assert first[:3] == ["Tokens: 3.1k sent, 240 received. Cost: $0.01 message, $0.01 session.",
                         "Applied edit to src/acme/client.py",
                         "Commit 4e5f6a7 fix: read retry_limit from the settings"]
    # A message with line breaks runs to the line that ends with two spaces.
    assert first[3] == "# 1 SEARCH/REPLACE block failed to match!"
    assert first[-1] == ("The SEARCH section must exactly match an existing block of lines "
                         "including all white space.")
    calls = {e.call_id: e.name for e in events if isinstance(e, ToolCall)}
    assert all(calls[r.call_id] == "aider" for r in results)
    assert len({r.call_id for r in results}) == len(results)


def test_commands_keep_their_output_and_never_enter_a_turn() -> None:
    events = AiderReader().read(str(FIXTURE)).events
    runs = [(e.command, e.output) for e in events if isinstance(e, CommandRun)]
    assert runs == [
        ("/add src/acme/client.py", "Added src/acme/client.py to the chat"),
        ("/run uv run pytest tests/test_client.py -q",
         "..\n2 passed in 0.38s\nAdd command output to the chat? (Y)es/(N)o/(D)on't ask again "
         "[Yes]: n"),
        ("!git log -2 --oneline", "8b9c0d1 docs: changelog for the retry fix\n4e5f6a7 fix: read "
         "retry_limit from the settings"),
    ]
    banners = [e.text for e in events if isinstance(e, HostInjection)]
    assert banners[0].startswith("Aider v0.86.2\nModel: ")
    assert len(banners) == 2  # one per run, outside any turn


def test_ask_is_a_prompt_and_a_confirmation_logged_as_input_is_aider_s(tmp_path: Path) -> None:
    events = AiderReader().read(str(FIXTURE)).events
    assert fx.AIDER_PROMPTS[1] in [e.text for e in events if isinstance(e, UserMessage)]
    answers = [e.text for e in events if isinstance(e, ToolResult) and "(Y)es/(N)o" in e.text]
    assert answers == ["Create new file? (Y)es/(N)o/(A)ll/(S)kip all/(D)on't ask again [Yes]: "
                       "all"]


def test_every_input_ends_the_turn_before_it_and_so_does_a_new_run(tmp_path: Path) -> None:
    history = ("\n# aider chat started at 2026-01-02 10:00:00\n\n"
               "\n#### first  \n\nreply one\n\n"
               "\n#### /tokens  \n> 1k tokens  \n"
               "\n#### second  \n\nreply two\n\n"
               "\n# aider chat started at 2026-01-02 11:00:00\n\n"
               "\n#### /ex  \n")
    transcript = _read(tmp_path, history)
    ends = [e.seq for e in transcript.events if isinstance(e, TurnEnd)]
    assert ends == [7, 15]  # at each reply's line, whatever closed the turn
    assert [e.command for e in transcript.events if isinstance(e, CommandRun)] == [
        "/tokens", "/ex"]  # a unique prefix of /exit is a command too


def test_a_last_line_of_spaces_is_an_empty_line(tmp_path: Path) -> None:
    transcript = _read(tmp_path, "\n# aider chat started at 2026-01-02 10:00:00\n\n"
                                 "\n#### Fix these:  \n####   \n#### - the import  \n####  \n")
    assert [e.text for e in transcript.events if isinstance(e, UserMessage)] == [
        "Fix these:\n\n- the import\n"]


def test_words_that_only_look_like_a_command_are_a_prompt(tmp_path: Path) -> None:
    transcript = _read(tmp_path, "\n# aider chat started at 2026-01-02 10:00:00\n\n"
                                 "\n#### /usr/bin/env is missing on the runner  \n")
    assert [e.text for e in transcript.events if isinstance(e, UserMessage)] == [
        "/usr/bin/env is missing on the runner"]


def test_windows_line_ends_and_a_half_written_line(tmp_path: Path) -> None:
    history = ("\r\n# aider chat started at 2026-01-02 10:00:00\r\n\r\n"
               "\r\n#### fix it  \r\n####   \r\n#### please  \r\n\r\nDone.\r\n\r\n> Applied")
    transcript = _read(tmp_path, history)
    assert [e.text for e in transcript.events if isinstance(e, UserMessage)] == [
        "fix it\n\nplease"]
    assert [e.text for e in transcript.events if isinstance(e, AssistantMessage)] == ["Done."]
    assert transcript.account.truncated_tail
    assert transcript.account.total == 10


def test_a_file_without_a_header_is_named_by_its_first_line(tmp_path: Path) -> None:
    one = _read(tmp_path, "#### hello  \n\nhi\n", name="a.md")
    two = _read(tmp_path, "#### hello  \n\nhi\n\n#### more  \n", name="b.md")
    assert one.session_id == two.session_id and one.session_id.startswith("aider-")


def test_text_that_is_not_an_aider_history_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="3 complete lines"):
        _read(tmp_path, "# Notes\n\nJust a markdown file.\n", name="notes.md")


def test_discover_looks_where_aider_writes(tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AIDER_CHAT_HISTORY_FILE", raising=False)
    project = tmp_path / "acme"
    project.mkdir()
    assert AiderReader().discover(None, str(project)) == []
    default = project / ".aider.chat.history.md"
    default.write_text("\n# aider chat started at 2026-01-02 10:00:00\n\n")
    assert AiderReader().discover(None, str(project)) == [str(default)]
    (project / ".aider.conf.yml").write_text("chat-history-file: logs/aider.md\n")
    custom = project / "logs" / "aider.md"
    custom.parent.mkdir()
    custom.write_text(default.read_text())
    assert AiderReader().discover(None, str(project)) == [str(custom)]
    monkeypatch.setenv("AIDER_CHAT_HISTORY_FILE", str(default))
    assert AiderReader().discover(None, str(project)) == [str(default)]
    assert history_files(str(project), {}) == [custom]
    (project / "readme.md").write_text("# readme\n")
    assert sorted(AiderReader().discover(str(project), "/x")) == sorted(
        [str(default), str(custom)])


def test_a_logged_confirmation_is_never_a_prompt(tmp_path: Path) -> None:
    confirm = ("#### Add file to the chat? (Y)es/(N)o/(A)ll/(S)kip all/(D)on't ask again "
               "[Yes]: all  \n")
    transcript = _read(tmp_path, "\n# aider chat started at 2026-01-02 10:00:00\n\n"
                                 f"\n#### /add src  \n> Added src/a.py to the chat  \n\n{confirm}"
                                 f"\n{confirm}")
    assert not [e for e in transcript.events if isinstance(e, UserMessage)]
    [run] = [e for e in transcript.events if isinstance(e, CommandRun)]
    assert run.output.startswith("Added src/a.py to the chat\nAdd file to the chat?")
    assert run.output.count("[Yes]: all") == 2  # both answers belong to the command
    alone = _read(tmp_path, f"\n# aider chat started at 2026-01-02 10:00:00\n\n\n{confirm}",
                  name="b.md")
    assert [type(e).__name__ for e in alone.events] == ["HostInjection"]
