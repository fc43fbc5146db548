"""The injection screen (amendment 2026-09-21): host-injected context is not conversation.

Project instruction files, the skill catalog, the runtime-context snapshot and this plugin's
own notice are re-derivable project state. At the render chokepoint each is replaced by a
countable `⟦omitted:host-injected <kind>, N chars⟧` marker, before redaction (§9). Signatures
use the very same predicate (`screen_text`, `screened_event`), so the two never drift.

Bindings that know a record is an injection emit `HostInjection`. Some harnesses deliver
injections inside user messages (a `<system-reminder>` block, Codex's
`<environment_context>`); those tagged blocks are screened here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from dsh_chapters_core.events import Event, HostInjection, InjectionKind, ToolResult, UserMessage

OMISSION_PATTERN = re.compile(r"⟦omitted:host-injected ([a-z-]+), (\d+) chars⟧")

# The plugin wraps its own session-start notice in these tags, so a later archive screens it.
NOTICE_OPEN = "<chapters-notice>"
NOTICE_CLOSE = "</chapters-notice>"


def omission_marker(kind: InjectionKind, chars: int) -> str:
    """The countable marker that stands in for `chars` characters of host-injected context."""
    return f"⟦omitted:host-injected {kind.value}, {chars} chars⟧"


@dataclass(frozen=True, slots=True)
class Screened:
    """A text after the screen: what stays, and each omission as (kind, chars)."""

    text: str
    omissions: tuple[tuple[InjectionKind, int], ...]

    @property
    def only_injection(self) -> bool:
        """Nothing but markers and whitespace is left: the message was never conversation."""
        return bool(self.omissions) and not OMISSION_PATTERN.sub("", self.text).strip()


def _reminder_kind(block: str) -> InjectionKind:
    head = block[:400].lower()
    if "instructions from:" in head or "claude.md" in head or "agents.md" in head:
        return InjectionKind.INSTRUCTIONS
    if "skill" in head:
        return InjectionKind.SKILL_CATALOG
    return InjectionKind.RUNTIME_CONTEXT


# (tag name, kind or None for "classify the block's content")
_TAGS: tuple[tuple[str, InjectionKind | None], ...] = (
    ("system-reminder", None),
    ("environment_context", InjectionKind.RUNTIME_CONTEXT),
    ("user_instructions", InjectionKind.INSTRUCTIONS),
    ("INSTRUCTIONS", InjectionKind.INSTRUCTIONS),
    ("available_skills", InjectionKind.SKILL_CATALOG),
    ("skills_instructions", InjectionKind.SKILL_CATALOG),
    ("chapters-notice", InjectionKind.PLUGIN_NOTICE),
)
_KIND_OF_TAG = dict(_TAGS)
_BLOCK = re.compile(
    r"<(?P<tag>" + "|".join(re.escape(tag) for tag, _ in _TAGS) + r")>[\s\S]*?</(?P=tag)>"
)
# Codex delivers AGENTS.md as a user message that opens with this heading (0.142.5+ write it
# without the "for <dir>").
_AGENTS_HEADING = re.compile(r"\A\s*# AGENTS\.md instructions(?: for [^\n]*)?\n")
_INSTRUCTIONS_FROM = re.compile(r"\A\s*instructions from:", re.IGNORECASE)


def _kind_of(match: re.Match[str]) -> InjectionKind:
    fixed = _KIND_OF_TAG[match.group("tag")]
    return fixed if fixed is not None else _reminder_kind(match.group(0))


def screen_text(text: str, *, trailing_only: bool = False) -> Screened:
    """Replace host-injected blocks in one message by omission markers.

    `trailing_only` screens only blocks at the very end: hosts append reminders to tool output,
    while a tool result that merely quotes such a tag (reading this file) stays verbatim.
    """
    if not trailing_only and (_AGENTS_HEADING.match(text) or _INSTRUCTIONS_FROM.match(text)):
        kind = InjectionKind.INSTRUCTIONS
        return Screened(text=omission_marker(kind, len(text)), omissions=((kind, len(text)),))
    if "<" not in text:
        return Screened(text=text, omissions=())
    omissions: list[tuple[InjectionKind, int]] = []
    if trailing_only:
        stripped = text.rstrip()
        last: re.Match[str] | None = None
        for last in _BLOCK.finditer(stripped):  # noqa: B007 - only the final block matters
            pass
        if last is None or last.end() != len(stripped):
            return Screened(text=text, omissions=())
        kind = _kind_of(last)
        chars = len(text) - last.start()
        omissions.append((kind, chars))
        return Screened(text=text[: last.start()] + omission_marker(kind, chars),
                        omissions=tuple(omissions))

    def replace(match: re.Match[str]) -> str:
        kind = _kind_of(match)
        chars = match.end() - match.start()
        omissions.append((kind, chars))
        return omission_marker(kind, chars)

    screened = _BLOCK.sub(replace, text)
    return Screened(text=screened, omissions=tuple(omissions))


def screened_event(event: Event) -> Screened | None:
    """The screen applied to one event; None for events that carry no screened text.

    `HostInjection` is omitted whole; user messages are screened anywhere; tool results only
    at their tail.
    """
    if isinstance(event, HostInjection):
        chars = len(event.text)
        return Screened(text=omission_marker(event.kind, chars), omissions=((event.kind, chars),))
    if isinstance(event, UserMessage):
        return screen_text(event.text)
    if isinstance(event, ToolResult):
        return screen_text(event.text, trailing_only=True)
    return None


def count_omissions(text: str) -> int:
    """How many omission markers a rendered text carries."""
    return len(OMISSION_PATTERN.findall(text))
