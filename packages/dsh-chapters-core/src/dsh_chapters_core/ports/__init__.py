"""Ports: `typing.Protocol`s that adapters satisfy structurally (they never subclass them).

The names below resolve on first use. Importing one port module (`ports.store` for `FileTree`)
runs this package first, and eager re-exports would make `chapters search` pay for every port
and what it drags in (the harness events, the transport results) on each start.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dsh_chapters_core.ports.clock import Clock
    from dsh_chapters_core.ports.harness import HarnessReader
    from dsh_chapters_core.ports.model import DrainLock, ModelDoor
    from dsh_chapters_core.ports.rules import DocumentShelf
    from dsh_chapters_core.ports.store import (
        ChapterStore,
        CredentialStore,
        FileTree,
        LockState,
        WriterLock,
    )
    from dsh_chapters_core.ports.transport import (
        KnowledgeProvider,
        MirrorState,
        ProviderContext,
        ProviderFactory,
        PullResult,
        PushResult,
        StageResult,
    )

# Each exported name -> the port module that defines it.
_HOMES: dict[str, str] = {
    "Clock": "clock",
    "HarnessReader": "harness",
    "DrainLock": "model",
    "ModelDoor": "model",
    "DocumentShelf": "rules",
    "ChapterStore": "store",
    "CredentialStore": "store",
    "FileTree": "store",
    "LockState": "store",
    "WriterLock": "store",
    "KnowledgeProvider": "transport",
    "MirrorState": "transport",
    "ProviderContext": "transport",
    "ProviderFactory": "transport",
    "PullResult": "transport",
    "PushResult": "transport",
    "StageResult": "transport",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
    globals()[name] = value  # resolved once
    return value


__all__ = [
    "ChapterStore",
    "Clock",
    "CredentialStore",
    "DocumentShelf",
    "DrainLock",
    "FileTree",
    "HarnessReader",
    "KnowledgeProvider",
    "LockState",
    "MirrorState",
    "ModelDoor",
    "ProviderContext",
    "ProviderFactory",
    "PullResult",
    "PushResult",
    "StageResult",
    "WriterLock",
]
