"""Sync's persisted state: the last report, the push schedule, the unpushed files and what
copy-in quarantined (`.dsh-chapters/state/`, machine-local, never published), and the lines
`chapters status` prints from them (§5.3: local-only says so with numbers).
"""

from __future__ import annotations

import enum
import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any, Protocol

from dsh_chapters_core.errors import ChaptersError, TransportError
from dsh_chapters_core.ports.store import FileTree

STATE_PATH = "state/sync.json"  # relative to the store root; machine-local, never published
QUARANTINE_PATH = "state/quarantine.json"  # the pool files the last copy-in refused, and why
# A list of every pool file refused fits far below this; a bigger one is damage, not a list.
QUARANTINE_MAX_BYTES = 64 * 1024 * 1024


class SyncMode(enum.StrEnum):
    FULL = "full"  # pull → copy-in → copy-out → push (`chapters sync`, a fork-like archive)
    PULL = "pull"  # before an archive point, or a session start
    PUSH = "push"  # the (debounced) push after an archive


class ProjectIdentityView(Protocol):
    """What sync reads of the project's identity (§2.3)."""

    @property
    def project_key(self) -> str: ...

    @property
    def canonical(self) -> str: ...

    @property
    def derivation(self) -> str: ...


@dataclass(frozen=True, slots=True)
class SyncReport:
    """What one sync did, in numbers; `line()` is what `chapters status` prints."""

    mode: str
    at: str
    harness_id: str
    remote: str = ""
    provider: str = ""
    ok: bool = True
    steps: tuple[str, ...] = ()
    failure_code: str = ""  # a FailureCode value when local-only
    failure_step: str = ""  # open | pull | rebuild | stage | commit | push
    failure_detail: str = ""  # the provider's message (built from codes, never a token)
    cloned: bool = False
    created_pool: bool = False
    moved_aside: str = ""
    pulled: int = 0
    copied_in_new: int = 0
    copied_in_changed: int = 0
    published_new: int = 0
    published_changed: int = 0
    already_mirrored: int = 0
    refused: tuple[tuple[str, int], ...] = ()
    commit: str = ""
    pushed: bool = False
    rebuilds: int = 0
    pending: int = 0
    head: str = ""
    quarantined: int = 0  # pool files copy-in refused (listed in QUARANTINE_PATH)
    arriving: int = 0  # pool files listed but not yet fully arrived (a synced folder pool)

    @property
    def local_only(self) -> bool:
        return not self.ok

    def line(self) -> str:
        """`cloned → published 12 new, 3 already mirrored → pushed`, or the local-only form."""
        if self.ok:
            return " → ".join(self.steps) if self.steps else "nothing to do"
        detail = f" ({self.failure_detail})" if self.failure_detail else ""
        cause = f"{self.failure_step}: {self.failure_code}{detail}"
        return f"local-only — {cause} · {self.pending} pending"

    def to_json(self) -> dict[str, Any]:
        """camelCase keys, like every `--json` answer of the CLI, plus the rendered `line`."""
        data = {_camel(k): v for k, v in asdict(self).items()}
        data["steps"] = list(self.steps)
        data["refused"] = [list(r) for r in self.refused]
        data["line"] = self.line()
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> SyncReport:
        known = {_camel(f.name): f.name for f in fields(cls)}
        kwargs = {known[k]: v for k, v in data.items() if k in known}
        kwargs["steps"] = tuple(str(s) for s in data.get("steps", ()))
        kwargs["refused"] = tuple((str(p), int(n)) for p, n in data.get("refused", ()))
        return cls(**kwargs)


def _failure_detail(exc: TransportError) -> str:
    """The provider's detail for the status line: `push: network (connection refused)` gives
    `connection refused`, so the line does not say the step and code twice. Display only:
    nothing branches on it (the code does that)."""
    first = exc.message.strip().splitlines()[0] if exc.message.strip() else ""
    match = re.match(rf"^(?:[\w-]+: )?{re.escape(str(exc.code))}\s*\((.*)\)$", first)
    return match.group(1) if match else first


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


@dataclass(frozen=True, slots=True)
class SyncState:
    """`.dsh-chapters/state/sync.json`: the last report, the push schedule, unpushed files."""

    report: SyncReport | None = None
    last_push_at: str = ""  # ISO time of the last successful push step
    push_due_at: str = ""  # a deferred (debounced) push waits until then
    unpushed: tuple[str, ...] = ()  # pool paths committed in the mirror but not yet pushed

    def to_bytes(self) -> bytes:
        data = {
            "report": self.report.to_json() if self.report else None,
            "lastPushAt": self.last_push_at,
            "pushDueAt": self.push_due_at,
            "unpushed": sorted(self.unpushed),
        }
        return (json.dumps(data, ensure_ascii=False, sort_keys=True, indent=2) + "\n").encode(
            "utf-8"
        )


def read_sync_state(store_tree: FileTree) -> SyncState:
    """The persisted state; an absent or unreadable file is a fresh state (it is derived)."""
    try:
        if not store_tree.exists(STATE_PATH):
            return SyncState()
        data = json.loads(store_tree.read(STATE_PATH).decode("utf-8"))
        raw = data.get("report")
        return SyncState(
            report=SyncReport.from_json(raw) if isinstance(raw, dict) else None,
            last_push_at=str(data.get("lastPushAt", "")),
            push_due_at=str(data.get("pushDueAt", "")),
            unpushed=tuple(str(p) for p in data.get("unpushed", ())),
        )
    except (ValueError, TypeError, AttributeError, OSError, RecursionError, ChaptersError):
        return SyncState()  # unreadable, not a file, garbage or too deep: derived, so fresh


def write_sync_state(store_tree: FileTree, state: SyncState) -> None:
    store_tree.write(STATE_PATH, state.to_bytes())



STATUS_LABEL_WIDTH = 11  # `chapters status` aligns its values after an 11-column label


def iter_pool_lines(report: SyncReport | None, pending: int, state: SyncState, *,
                    sync_now: str = "a sync") -> Iterator[str]:
    """The sync lines of `chapters status` (no I/O). `sync_now` is how the caller names a sync
    it can run now (the core names no command)."""
    label, more = "sync".ljust(STATUS_LABEL_WIDTH), " " * STATUS_LABEL_WIDTH
    if report is None:
        yield f"{label}never synced · {pending} pending"
    elif report.ok:
        yield f"{label}{report.at} {report.line()} · {pending} pending"
    else:
        yield f"{label}{report.at} {report.line()}"
        if pending != report.pending:
            yield f"{more}now {pending} pending"
    if state.push_due_at:
        yield (
            f"{more}push deferred until {state.push_due_at} (syncDebounceMs); "
            f"{sync_now} delivers it now"
        )



def write_quarantine(store_tree: FileTree, records: list[dict[str, str]]) -> None:
    """The pool files the last copy-in refused: replaced by every copy-in, which judges every
    file it did not copy again (so a file fixed in the pool leaves the list by itself)."""
    if not records and not store_tree.exists(QUARANTINE_PATH):
        return  # nothing was ever quarantined here: no file at all
    data = {"quarantined": sorted(records, key=lambda r: r.get("path", ""))}
    payload = (json.dumps(data, ensure_ascii=False, sort_keys=True, indent=2) + "\n").encode()
    try:
        if store_tree.exists(QUARANTINE_PATH) and store_tree.read(QUARANTINE_PATH) == payload:
            return
    except (OSError, ChaptersError):
        pass  # unreadable or not a file: replaced below (a rename replaces it whole)
    store_tree.write(QUARANTINE_PATH, payload)


def read_quarantine(store_tree: FileTree) -> list[dict[str, str]]:
    """What `write_quarantine` recorded; an absent or unreadable file is an empty list."""
    return quarantine_rows(store_tree) or []


def quarantine_rows(store_tree: FileTree) -> list[dict[str, str]] | None:
    """What `write_quarantine` recorded ([] when absent), or None when the list is there but
    does not read (garbage, too deep, not a file): then no one can tell which pool files are
    quarantined, and the read doors serve nothing of the mirror until a sync writes it again."""
    try:
        if not store_tree.exists(QUARANTINE_PATH):
            # A directory where the list should be: files under it. (Listing the bare path
            # would walk all of `state/`, a reservation per session, at every linked search.)
            if any(True for _ in store_tree.list(QUARANTINE_PATH + "/")):
                return None
            return []
        raw = store_tree.read(QUARANTINE_PATH)
        if len(raw) > QUARANTINE_MAX_BYTES:
            return None
        data = json.loads(raw.decode("utf-8"))
        rows = data.get("quarantined") if isinstance(data, dict) else None
        if not isinstance(rows, list):
            return None
        return [{str(k): str(v) for k, v in r.items()} for r in rows if isinstance(r, dict)]
    except (ValueError, TypeError, AttributeError, OSError, RecursionError, ChaptersError):
        return None
