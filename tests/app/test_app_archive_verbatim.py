"""Verbatim: rebuild each fixture's conversation from the chapters and artifacts it became.

Every user and assistant text, every reasoning text and every tool result of a completed turn is
found in the store: exactly once where the text is distinctive, and byte for byte unless a
credential was redacted (§9) or host-injected context screened (amendment 2026-09-21), in which
case its redacted, screened form is found instead and the secret is found nowhere.
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

import pytest
from dsh_chapters.bootstrap import bootstrap
from dsh_chapters_core.events import (
    AssistantMessage,
    CommandRun,
    HostInjection,
    Reasoning,
    ToolCall,
    ToolResult,
    UserMessage,
)
from dsh_chapters_core.frontmatter import split_frontmatter
from dsh_chapters_core.injections import screened_event
from dsh_chapters_core.redact import redact
from dsh_chapters_core.signature import last_deliveries
from dsh_chapters_core.turns import split_turns

from tests.app.archive_workspace import (
    CLAUDE_MAIN,
    CLAUDE_SUBAGENT,
    CODEX_FILE,
    DSH_FILE,
    Runner,
    make_workspace,
    runner,
)
from tests.fixtures.conversation_script import FAKE_AWS_KEY_ID, FAKE_GITHUB_TOKEN

DISTINCTIVE_CHARS = 20


def _expected(event: object) -> tuple[str, str] | None:
    """(original text, the form the archive must hold) for a conversation event, else None."""
    if isinstance(event, UserMessage):
        screened = screened_event(event)
        if screened is None or screened.only_injection:
            return None
        return event.text, redact(screened.text).text
    if isinstance(event, AssistantMessage | Reasoning):
        return event.text, redact(event.text).text
    if isinstance(event, ToolResult):
        screened = screened_event(event)
        raw = event.text if screened is None else screened.text
        return event.text, redact(raw).text
    return None


def _call_lines(events: list[object]) -> list[str]:
    lines = []
    for event in events:
        if isinstance(event, ToolCall):
            lines.append(event.arguments)
            with contextlib.suppress(ValueError):
                lines.append(json.dumps(json.loads(event.arguments), ensure_ascii=False))
    return lines


@pytest.mark.parametrize("fixture", [CLAUDE_MAIN, CLAUDE_SUBAGENT, CODEX_FILE, DSH_FILE],
                         ids=["claude-code", "claude-code-subagent", "codex", "dsh"])
def test_every_message_and_result_is_found_in_the_store(
    fixture: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    ws = make_workspace(tmp_path / "ws")
    chapters: Runner = runner(ws, monkeypatch, capsys)
    result = chapters("archive", str(fixture), "--json")
    assert result.code == 0, result.err

    app = bootstrap(ws, {"DSH_HOME": str(tmp_path / "dsh-home")})
    reader = next(r for r in app.harnesses.values() if r.sniff(fixture.read_bytes()[:1 << 20]))
    transcript = reader.read(str(fixture))
    events = [e for turn in split_turns(transcript.events).complete for e in turn.events]
    kept = last_deliveries(events)

    store = ws / ".dsh-chapters"
    bodies = [split_frontmatter(p.read_text(encoding="utf-8"))[1]
              for p in sorted(store.glob("*/chapters/*.md"))]
    artifacts = [p.read_text(encoding="utf-8") for p in sorted(store.glob("artifacts/*/*.txt"))]
    corpus = bodies + artifacts
    assert bodies

    pairs = [_expected(e) for i, e in enumerate(events)
             if not isinstance(e, ToolResult) or i in kept]
    expected = [p for p in pairs if p is not None]
    forms = [form for _, form in expected]
    others = forms + _call_lines(events)
    exact = verbatim = modified = 0
    for original, form in expected:
        found = sum(doc.count(form) for doc in corpus)
        assert found >= 1, f"lost from the archive: {form[:120]!r}"
        if form == original:
            verbatim += 1
        else:
            modified += 1
        distinctive = (len(form) >= DISTINCTIVE_CHARS and forms.count(form) == 1
                       and not any(form in other for other in others if other != form))
        if distinctive:
            assert found == 1, f"found {found} times, expected once: {form[:120]!r}"
            exact += 1
    assert exact >= len(expected) // 2 and verbatim > 0
    if fixture == CODEX_FILE:
        # Codex wraps shell output as {"output": …, "metadata": …}: the tool result text is the
        # inner text the reader unwraps, and the wrapper itself is archived nowhere.
        results = [e for e in events if isinstance(e, ToolResult)]
        assert results and not any(r.text.startswith('{"output"') for r in results)
        assert not any('{"output": ' in doc or '"metadata": {"exit_code"' in doc
                       for doc in corpus)

    # No credential survives anywhere in the store (chapters, artifacts, signatures).
    everything = "\n".join(p.read_text(encoding="utf-8", errors="replace")
                           for p in store.rglob("*") if p.is_file())
    assert FAKE_GITHUB_TOKEN not in everything and FAKE_AWS_KEY_ID not in everything
    assert redact("\n".join(corpus)).total == 0
    if fixture != CLAUDE_SUBAGENT:
        # the fixtures carry secrets and host injections on purpose: some texts must differ,
        # or be screened out whole (a marker stands where they were)
        screened_whole = sum(1 for e in events if isinstance(e, HostInjection | UserMessage)
                             and _expected(e) is None)
        assert modified + screened_whole > 0
        assert "⟦omitted:host-injected" in "".join(bodies)

    # Host commands are never conversation (§7.2): their output is not archived.
    for event in transcript.events:
        if isinstance(event, CommandRun) and len(event.output) >= DISTINCTIVE_CHARS and not any(
                event.output in form for form in forms):
            assert not any(event.output in doc for doc in corpus)
