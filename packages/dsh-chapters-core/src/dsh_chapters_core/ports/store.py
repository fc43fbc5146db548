"""The store side: the workspace's `.dsh-chapters/` (§3.1: the store is the truth)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Protocol

from dsh_chapters_core.documents import ChapterTally, Document


@dataclass(frozen=True, slots=True)
class LockState:
    """The writer lock as `chapters status` reports it."""

    held: bool
    pid: int = 0
    age_seconds: float = 0.0
    stale: bool = False
    path: str = ""


class WriterLock(Protocol):
    """One per-workspace writer lock (§5.2), shared by archive and sync.

    A pull never lands mid-write and a push never ships a half-written store.
    """

    def hold(self, timeout_s: float) -> AbstractContextManager[None]: ...

    def state(self) -> LockState: ...


class CredentialStore(Protocol):
    """Tokens under `<DSH_HOME>/dsh-chapters/credentials/<name>`, mode 0600, never echoed."""

    def read(self, name: str) -> str | None: ...

    def write(self, name: str, secret: str) -> None: ...

    def delete(self, name: str) -> None: ...


class FileTree(Protocol):
    """A directory seen as relative, forward-slash paths: the store, or a provider's mirror.

    `write` is atomic (temp file, fsync, rename). `digest` is the sha256 hex of the bytes.
    """

    root: str

    def list(self, prefix: str = "") -> Iterator[str]: ...

    def exists(self, path: str) -> bool: ...

    def read(self, path: str) -> bytes: ...

    def digest(self, path: str) -> str: ...

    def write(self, path: str, data: bytes) -> None: ...


class ChapterStore(Protocol):
    """The append-only archive (§1 invariant 3). Every method that writes runs under the lock.

    Chapter numbers are reserved and never reused; a chapter file is never rewritten (the one
    sanctioned mutation, the enrichment frontmatter write, goes through `rewrite_frontmatter`).
    """

    root: str  # absolute path of `.dsh-chapters/`

    def record_session(
        self, root_session_id: str, session_id: str, meta: Mapping[str, str]
    ) -> None:
        """Write the session's record (harnessId, harness, projectKey, source) once."""
        ...

    def watermark(self, session_id: str, *, root_session_id: str = "") -> int:
        """The last archived seq of the session; -1 when nothing is archived yet. Naming the
        root lets a store find the record without looking at any other session."""
        ...

    def set_watermark(self, session_id: str, seq: int, *, root_session_id: str = "") -> None: ...

    def reserve_chapter_number(self, root_session_id: str, count: int = 1) -> int:
        """The first of `count` consecutive numbers after every one reserved or written, the
        reservation durable before it returns: a writer killed before its chapters land leaves
        a gap, never a reused number."""
        ...

    def write_chapter(self, root_session_id: str, number: int, slug: str, text: str) -> str: ...

    def write_artifacts(self, artifacts: Sequence[tuple[str, str]]) -> int:
        """Store each (sha256, text) the store lacks, all durable before it returns (before
        the chapter that cites them is written); how many were written. One call for many,
        so a store may sync them together."""
        ...

    def append_signatures(self, root_session_id: str, lines: tuple[str, ...]) -> None: ...

    def artifact_count(self) -> int:
        """How many artifacts the store holds (`chapters status`)."""
        ...

    def documents(self) -> Iterator[Document]: ...

    def chapter_tally(self) -> ChapterTally:
        """How many chapters the store holds and how many were modified since archived, as
        `documents()` counts them (`chapters status`); a store may keep what it read of each
        file and read again only what changed."""
        ...

    def chapter_paths(self) -> list[str]:
        """Store-relative paths of every chapter, by session then number, none read: what a
        typed id (`<short-session>/<n>`) needs, at the cost of listing folders."""
        ...

    def sessions(self) -> list[str]:
        """The root session ids with a folder in the store, sorted: one listing, no chapter
        folder opened (what names a few chapters by typed id needs)."""
        ...

    def document(self, path: str) -> Document:
        """One chapter or rule by store-relative path, without reading the others."""
        ...

    def session_chapters(self, root_session_id: str) -> Iterator[Document]:
        """The chapters of one root session, newest first, each parsed only when reached."""
        ...

    def read_text(self, path: str) -> str: ...

    def session_meta(self) -> Mapping[str, Mapping[str, str]]: ...

    def rewrite_frontmatter(
        self, path: str, frontmatter: str, expected_body_sha256: str
    ) -> None:
        """The one sanctioned mutation (§6.1): replace a chapter's frontmatter block with
        `frontmatter` (`---\n...---\n`), atomically, keeping the body byte for byte. Raises
        `BodyChangedError` when the body on disk does not hash to `expected_body_sha256`."""
        ...
