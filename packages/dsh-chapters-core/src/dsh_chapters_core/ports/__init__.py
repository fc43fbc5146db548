"""Ports: `typing.Protocol`s that adapters satisfy structurally (they never subclass them)."""

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
