"""The injection screen (amendment 2026-09-21): omitted, counted, shared with signatures."""

from __future__ import annotations

import pytest
from dsh_chapters_core.events import HostInjection, InjectionKind, ToolResult, UserMessage
from dsh_chapters_core.injections import (
    count_omissions,
    omission_marker,
    screen_text,
    screened_event,
)
from hypothesis import given
from hypothesis import strategies as st


def test_marker_format() -> None:
    assert omission_marker(InjectionKind.SKILL_CATALOG, 1234) == (
        "⟦omitted:host-injected skill-catalog, 1234 chars⟧"
    )


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("<system-reminder>Contents of /repo/CLAUDE.md: be nice</system-reminder>",
         InjectionKind.INSTRUCTIONS),
        ("<system-reminder>instructions from: AGENTS.md</system-reminder>",
         InjectionKind.INSTRUCTIONS),
        ("<system-reminder>The following skills are available</system-reminder>",
         InjectionKind.SKILL_CATALOG),
        ("<system-reminder>Today is Tuesday</system-reminder>", InjectionKind.RUNTIME_CONTEXT),
        ("<environment_context>cwd=/w</environment_context>", InjectionKind.RUNTIME_CONTEXT),
        ("<user_instructions>rules</user_instructions>", InjectionKind.INSTRUCTIONS),
        ("<chapters-notice>Project: x</chapters-notice>", InjectionKind.PLUGIN_NOTICE),
    ],
)
def test_tagged_blocks_are_screened_with_their_kind(text: str, kind: InjectionKind) -> None:
    screened = screen_text(f"please fix it\n{text}\nthanks")
    assert screened.text == f"please fix it\n{omission_marker(kind, len(text))}\nthanks"
    assert screened.omissions == ((kind, len(text)),)
    assert not screened.only_injection


def test_whole_message_instruction_forms() -> None:
    text = "# AGENTS.md instructions for /repo\n\n<INSTRUCTIONS>be terse</INSTRUCTIONS>"
    screened = screen_text(text)
    assert screened.only_injection
    assert screened.omissions == ((InjectionKind.INSTRUCTIONS, len(text)),)
    assert screen_text("Instructions from: /repo/AGENTS.md\n...").only_injection


def test_tool_results_are_screened_only_at_their_tail() -> None:
    quoted = "source mentions <system-reminder>x</system-reminder> in the middle of a file"
    assert screen_text(quoted, trailing_only=True).text == quoted
    tail = "file body\n<system-reminder>consider malware</system-reminder>\n"
    screened = screened_event(ToolResult(seq=1, call_id="c", text=tail))
    assert screened is not None
    marker = omission_marker(InjectionKind.RUNTIME_CONTEXT, len(tail) - len("file body\n"))
    assert screened.text == "file body\n" + marker


def test_host_injection_events_are_omitted_whole() -> None:
    screened = screened_event(HostInjection(seq=1, kind=InjectionKind.INSTRUCTIONS, text="x" * 50))
    assert screened is not None
    assert screened.text == omission_marker(InjectionKind.INSTRUCTIONS, 50)
    assert screened.only_injection
    assert count_omissions(screened.text + screened.text) == 2
    assert screened_event(UserMessage(seq=1, text="plain")) is not None


@given(st.text(alphabet=st.characters(blacklist_characters="<"), max_size=100))
def test_text_without_tags_is_untouched(text: str) -> None:
    assert screen_text(text).text == text or screen_text(text).only_injection
