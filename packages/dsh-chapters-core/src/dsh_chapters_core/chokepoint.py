"""The chokepoint (§9): nothing reaches the store unredacted.

Chapters and artifacts: a turn's texts are screened for host injections and redacted twice
over in one archive: once to sign the turn (§4.1) and once to render its chapter (§2.4).
`TextChokepoint` memoizes both for the length of one archive call, so each text goes through
the screen and the redaction families once, and the signature and the chapter see the very
same redacted text.

Everything else that is written goes through `redact_for_store` (or `redact_json` for a
fact's fields) before anything is derived from it: a rule's text and category (its title,
slug and file name come from them), curation facts (notes, group labels, topic names),
enrichment's titles, summaries and topics, and the reasons enrichment records. A topic name
is redacted before it is slugged, since a slug's lower case would hide a key from the rules.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from dsh_chapters_core.events import Event
from dsh_chapters_core.injections import Screened, screened_event
from dsh_chapters_core.redact import Redaction, redact


def redact_for_store(text: str, patterns: tuple[str, ...] = ()) -> str:
    """`text` as it may be written anywhere in the store or the pool."""
    return redact(text, patterns).text


def redact_json(value: Any, patterns: tuple[str, ...] = ()) -> Any:
    """A JSON value with every string in it (keys too) redacted."""
    if isinstance(value, str):
        return redact(value, patterns).text
    if isinstance(value, Mapping):
        return {redact_json(k, patterns): redact_json(v, patterns) for k, v in value.items()}
    if isinstance(value, Sequence) and not isinstance(value, (bytes, bytearray)):
        return [redact_json(v, patterns) for v in value]
    return value


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
