"""The archive chokepoint's work, done once per text (§9, amendment 2026-09-21).

A turn's texts are screened for host injections and redacted twice over in one archive: once
to sign the turn (§4.1) and once to render its chapter (§2.4). `TextChokepoint` memoizes both
for the length of one archive call, so each text goes through the screen and the redaction
families once, and the signature and the chapter see the very same redacted text.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from dsh_chapters_core.events import Event
from dsh_chapters_core.injections import Screened, screened_event
from dsh_chapters_core.redact import Redaction, redact


@dataclass(slots=True)
class TextChokepoint:
    """Screen and redact with memory: one instance per archive call (texts are not kept)."""

    patterns: tuple[str, ...] = ()
    _screened: dict[int, tuple[Event, Screened | None]] = field(default_factory=dict)
    _redacted: dict[str, Redaction] = field(default_factory=dict)

    def screened(self, event: Event) -> Screened | None:
        # Keyed by identity, holding the event so its id cannot be reused while cached.
        hit = self._screened.get(id(event))
        if hit is None or hit[0] is not event:
            hit = (event, screened_event(event))
            self._screened[id(event)] = hit
        return hit[1]

    def redact(self, text: str) -> Redaction:
        hit = self._redacted.get(text)
        if hit is None:
            hit = redact(text, self.patterns)
            self._redacted[text] = hit
        return hit
