"""`.treedx-state.json`: the provider's bookkeeping inside the mirror. It never holds a token.

`{origin, head, baseline, staged, offline, repoId}`:
- `origin`: the remote the mirror belongs to (a different one means the mirror is moved aside);
- `head`: the pool commit last pulled or pushed (`resolvedRef`, `commitSha`);
- `baseline`: path -> git blob id of the pool's files at `head`;
- `staged`: paths written by `stage` (`paths`) and recorded by `commit` (`committed`), not yet
  pushed, with the commit message and author;
- `offline`: the failure code and time of the last failed call, or null once a call succeeds;
- `repoId`: the managed repository `POST /repos` resolved;
- `unsafe`: pool paths at `head` that are never materialized (an unsafe element such as `..`
  or a name over 255 bytes), cut at that element; copy-in quarantines them;
- `lease`: the writable workspace a push opened and has not yet seen end (null otherwise).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import attrs
import cattrs
from cattrs.gen import make_dict_structure_fn, make_dict_unstructure_fn, override
from cattrs.preconf.json import make_converter

from dsh_chapters_treedx.mirror import STATE_FILE, write_file


@attrs.frozen
class Pending:
    """Mirror files staged or committed but not yet pushed, with the commit message and author."""

    paths: tuple[str, ...] = ()  # staged, not yet committed
    committed: tuple[str, ...] = ()  # committed locally, not yet pushed
    message: str = ""
    author: str = ""

    @property
    def empty(self) -> bool:
        return not self.paths and not self.committed


@attrs.frozen
class Offline:
    """The last failed call to the server: its failure code and when it happened."""

    code: str
    at: str  # ISO-8601 UTC


@attrs.frozen
class Lease:
    """The writable workspace a push holds while it writes (CONTRACT.md: the lease). Recorded
    before the first write and cleared once the lease has ended, so a push killed in between
    leaves a record `chapters doctor` can find and close."""

    workspace_id: str
    expires_at: str = ""  # as the server sent it ("" when it sent none)


@attrs.frozen
class TreeDXState:
    """The provider's bookkeeping in the mirror (`.treedx-state.json`); it never holds a token."""

    origin: str
    repo_id: str
    head: str = ""
    baseline: dict[str, str] = attrs.field(factory=dict)
    staged: Pending = attrs.field(factory=Pending)
    offline: Offline | None = None
    unsafe: tuple[str, ...] = ()  # pool paths at `head` never materialized (`..`, overlong)
    lease: Lease | None = None  # a writable workspace this mirror's push opened, not yet ended


class StateUnreadable(Exception):
    """The state file exists but is not ours: the mirror is moved aside and rebuilt."""


def _make_state_converter() -> cattrs.Converter:
    conv = make_converter(forbid_extra_keys=True)  # our own file: anything else is corruption
    lease: dict[str, Any] = {"workspace_id": override(rename="workspaceId"),
                             "expires_at": override(rename="expiresAt")}
    conv.register_structure_hook(Lease, make_dict_structure_fn(Lease, conv, **lease))
    conv.register_unstructure_hook(Lease, make_dict_unstructure_fn(Lease, conv, **lease))
    rename: dict[str, Any] = {"repo_id": override(rename="repoId")}
    conv.register_structure_hook(TreeDXState, make_dict_structure_fn(TreeDXState, conv, **rename))
    conv.register_unstructure_hook(
        TreeDXState, make_dict_unstructure_fn(TreeDXState, conv, **rename)
    )
    return conv


_state = _make_state_converter()


def load_state(root: Path) -> TreeDXState | None:
    """The state, None when absent; `StateUnreadable` when present but damaged."""
    try:
        raw = (root / STATE_FILE).read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise StateUnreadable(type(exc).__name__) from None
    try:
        return _state.structure(json.loads(raw), TreeDXState)
    except (ValueError, cattrs.BaseValidationError, KeyError, TypeError) as exc:
        raise StateUnreadable(type(exc).__name__) from None


def save_state(root: Path, state: TreeDXState) -> None:
    data = json.dumps(_state.unstructure(state), indent=2, sort_keys=True) + "\n"
    write_file(root, STATE_FILE, data.encode("utf-8"), durable=True)
