"""What the local web viewer needs of the archive: a driving port the app implements.

The web adapter (`dsh_chapters_web`) never imports the app; `chapters serve` hands it a
`Viewer` built from the composed App. Every method answers with JSON-shaped data, the same
data the matching CLI command prints under `--json` (one scorer, one rules path, one
containment), so a page and its `Accept: application/json` twin can never disagree. Failures
are `ChaptersError`s with numbers and a next step; the adapter maps them to status codes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from dsh_chapters_core.errors import ChaptersError


@dataclass(frozen=True, slots=True)
class SearchFilters:
    """The viewer's search form. Empty strings mean "any"; dates are ISO `YYYY-MM-DD`."""

    kind: str = ""  # "chapter" | "rule" | "plan" ...
    topic: str = ""
    machine: str = ""  # a harnessId
    since: str = ""  # inclusive
    until: str = ""  # inclusive
    cross_project: bool = False

    @property
    def narrowing(self) -> bool:
        """True when a filter beyond the core's own (topic, cross-project) is set."""
        return bool(self.kind or self.machine or self.since or self.until)


class Viewer(Protocol):
    """The archive as a person browses it; the only writes are curation facts and a sync."""

    def sessions(self) -> dict[str, Any]:
        """Every session of this project (store, and the mirror when linked), by machine."""
        ...

    def chapter(self, path: str) -> dict[str, Any]:
        """A chapter or artifact by its store/mirror path, contained as `chapters artifact`."""
        ...

    def search(self, query: str, filters: SearchFilters) -> dict[str, Any]:
        """`chapters search`'s answer (`matches`, `shown`, `total`, `door`), filtered."""
        ...

    def rules(self) -> dict[str, Any]:
        """Proposed and core rules on this machine, with the core budget's numbers."""
        ...

    def set_rule_status(self, rule_id: str, approve: bool) -> dict[str, Any]:
        """`chapters rule approve|revoke`: a curation fact, written under the writer lock."""
        ...

    def topics(self) -> dict[str, Any]:
        """The vocabulary, its aliases and the shadow candidates with their signals."""
        ...

    def merge_topics(self, source: str, target: str) -> dict[str, Any]:
        """`chapters topic merge`: a user-authored topic-alias fact, under the writer lock."""
        ...

    def pool(self) -> dict[str, Any]:
        """`chapters link`'s status: link state, pending count, last sync, local-only reason."""
        ...

    def sync(self) -> dict[str, Any]:
        """`chapters sync`: the report; a failure degrades to local-only and says why."""
        ...

    def secrets(self) -> tuple[str, ...]:
        """Values that must never reach a page (the pool token), for the adapter's last check."""
        ...

    def next_step(self, error: ChaptersError) -> str:
        """A failure's next step in the words of the person at the viewer ("" when none): the
        core's errors carry a code, and the app that serves the page words it."""
        ...
