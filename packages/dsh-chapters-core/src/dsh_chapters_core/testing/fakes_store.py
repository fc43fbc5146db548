"""In-memory fakes of the store side: `FakeChapterStore`, `FakeWriterLock`, `FixedClock`.

They keep the real store's rules (append-only, numbers never reused, writes only under the
lock) so a use case that breaks one fails its core test, not only its adapter test.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from dsh_chapters_core.documents import ChapterTally, Document, DocumentKind
from dsh_chapters_core.errors import BodyChangedError, ChaptersError
from dsh_chapters_core.frontmatter import split_frontmatter
from dsh_chapters_core.pool_layout import is_session_id
from dsh_chapters_core.ports.store import LockState


class SimulatedCrash(Exception):
    """Raised by `FakeChapterStore` at its `crash_after`-th write, like a SIGKILL mid-archive."""


@dataclass
class FakeWriterLock:
    """Counts holds and knows whether it is held; `busy` makes `hold` refuse like a timeout."""

    held: bool = False
    holds: int = 0
    busy: bool = False

    @contextmanager
    def hold(self, timeout_s: float) -> Iterator[None]:
        if self.busy:
            raise ChaptersError(
                f"the writer lock is held by another writer; waited {timeout_s:g} s",
                hint="wait, then run the command again")
        if self.held:
            raise AssertionError("FakeWriterLock.hold re-entered")
        self.held = True
        self.holds += 1
        try:
            yield
        finally:
            self.held = False

    def state(self) -> LockState:
        return LockState(held=self.held or self.busy, path="fake:writer.lock")


@dataclass
class FixedClock:
    """`now()` is fixed; `monotonic()` advances by `step` per call."""

    at: str = "2026-09-17T10:00:00Z"
    step: float = 0.001
    ticks: float = 0.0

    def now(self) -> str:
        return self.at

    def monotonic(self) -> float:
        self.ticks += self.step
        return self.ticks


_DOCUMENT_FIELDS = frozenset({"title", "summary", "topics", "date", "projectKey", "sessionId",
                              "harnessId", "sha256", "seqRange", "messages", "kind"})


def _frontmatter_values(fm_text: str) -> dict[str, Any]:
    """`dump_frontmatter` writes one `key: <JSON>` line per key: JSON reads each value back."""
    values: dict[str, Any] = {}
    for line in fm_text.splitlines():
        key, sep, raw = line.partition(": ")
        if not sep:
            continue
        try:
            values[json.loads(key) if key.startswith('"') else key] = json.loads(raw)
        except ValueError:
            values[key] = raw
    return values


@dataclass
class FakeChapterStore:
    """A ChapterStore in memory. `writes` lists every write in order (path or `watermark:<id>`)."""

    root: str = "/fake/.dsh-chapters"
    lock: FakeWriterLock | None = None  # when given, every write asserts it is held
    crash_after: int | None = None  # raise SimulatedCrash instead of the Nth write (1-based)
    files: dict[str, str] = field(default_factory=dict)
    records: dict[str, dict[str, Any]] = field(default_factory=dict)
    reserved: dict[str, int] = field(default_factory=dict)
    writes: list[str] = field(default_factory=list)

    def _write(self, what: str) -> None:
        if self.lock is not None and not self.lock.held:
            raise AssertionError(f"write {what} outside the writer lock")
        if self.crash_after is not None and len(self.writes) + 1 >= self.crash_after:
            raise SimulatedCrash(what)
        self.writes.append(what)

    def record_session(
        self, root_session_id: str, session_id: str, meta: Mapping[str, str]
    ) -> None:
        if session_id in self.records:
            return
        self._write(f"session:{session_id}")
        self.records[session_id] = {**meta, "sessionId": session_id, "watermark": -1,
                                    "rootSessionId": root_session_id}

    def watermark(self, session_id: str, *, root_session_id: str = "") -> int:
        value = self.records.get(session_id, {}).get("watermark", -1)
        return int(value)

    def set_watermark(self, session_id: str, seq: int, *, root_session_id: str = "") -> None:
        if session_id not in self.records:
            raise ChaptersError(f"session {session_id} has no record")
        self._write(f"watermark:{session_id}")
        self.records[session_id]["watermark"] = seq

    def chapter_numbers(self, root_session_id: str) -> list[int]:
        prefix = f"{root_session_id}/chapters/"
        return sorted(int(p[len(prefix):].split("-", 1)[0])
                      for p in self.files if p.startswith(prefix))

    def reserve_chapter_number(self, root_session_id: str, count: int = 1) -> int:
        last = self.reserved.get(root_session_id, 0)
        number = max([last, *self.chapter_numbers(root_session_id)]) + 1
        self._write(f"reserve:{root_session_id}:{number}:{count}")
        self.reserved[root_session_id] = number + max(count, 1) - 1
        return number

    def write_chapter(self, root_session_id: str, number: int, slug: str, text: str) -> str:
        if number in self.chapter_numbers(root_session_id):
            raise ChaptersError(f"chapter {number:03d} of {root_session_id} already exists")
        path = f"{root_session_id}/chapters/{number:03d}-{slug}.md"
        self._write(path)
        self.files[path] = text
        return path

    def write_artifacts(self, artifacts: Sequence[tuple[str, str]]) -> int:
        written = 0
        for sha256, text in artifacts:
            path = f"artifacts/{sha256[:2]}/{sha256}.txt"
            if hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest() != sha256:
                raise ChaptersError(f"artifact {sha256[:12]} does not hash to its name")
            if path not in self.files:
                self._write(path)
                self.files[path] = text
                written += 1
        return written

    def append_signatures(self, root_session_id: str, lines: tuple[str, ...]) -> None:
        path = f"{root_session_id}/collections.jsonl"
        existing = self.files.get(path, "")
        seen = {tuple(json.loads(line)["seqs"]) for line in existing.splitlines() if line}
        fresh = [line for line in lines if tuple(json.loads(line)["seqs"]) not in seen]
        if fresh:
            self._write(path)
            self.files[path] = existing + "".join(line + "\n" for line in fresh)

    def artifact_count(self) -> int:
        return sum(1 for p in self.files if p.startswith("artifacts/"))

    def documents(self) -> Iterator[Document]:
        for path in sorted(self.files):
            if "/chapters/" not in path or not path.endswith(".md"):
                continue
            yield self.document(path)

    def chapter_paths(self) -> list[str]:
        return [p for p in sorted(self.files) if "/chapters/" in p and p.endswith(".md")]

    def chapter_tally(self) -> ChapterTally:
        chapters = [d for d in self.documents() if d.kind is DocumentKind.CHAPTER]
        return ChapterTally(len(chapters), sum(d.modified_since_archived for d in chapters))

    def sessions(self) -> list[str]:
        return sorted({p.split("/", 1)[0] for p in self.files
                       if is_session_id(p.split("/", 1)[0])})

    def session_chapters(self, root_session_id: str) -> Iterator[Document]:
        prefix = f"{root_session_id}/chapters/"
        for number in reversed(self.chapter_numbers(root_session_id)):
            (path,) = [p for p in self.files
                       if p.startswith(f"{prefix}{number:03d}-") and p.endswith(".md")]
            yield self.document(path)

    def document(self, path: str) -> Document:
        if path not in self.files:
            raise ChaptersError(f"{path} is not in the store")
        fm_text, body = split_frontmatter(self.files[path])
        data = _frontmatter_values(fm_text)
        seq_range = data.get("seqRange", [0, 0])
        return Document(
            path=path,
            kind=DocumentKind(data.get("kind", "chapter")),
            title=str(data.get("title", "")),
            summary=str(data.get("summary", "")),
            topics=tuple(data.get("topics", ())),
            date=str(data.get("date", "")),
            project_key=str(data.get("projectKey", "")),
            session_id=str(data.get("sessionId", "")),
            harness_id=str(data.get("harnessId", "")),
            sha256=str(data.get("sha256", "")),
            body_sha256=hashlib.sha256(body.encode("utf-8", "surrogateescape")).hexdigest(),
            seq_range=(int(seq_range[0]), int(seq_range[1])),
            messages=tuple(sorted(data.get("messages", {}).items())),
            # Frontmatter beyond the known fields, as the fs store keeps it (`ended`, …).
            extra=tuple(sorted((k, json.dumps(v, ensure_ascii=False, sort_keys=True))
                               for k, v in data.items() if k not in _DOCUMENT_FIELDS)),
        )

    def read_text(self, path: str) -> str:
        try:
            return self.files[path]
        except KeyError:
            raise ChaptersError(f"{path} is not in the store") from None

    def session_meta(self) -> Mapping[str, Mapping[str, str]]:
        return {sid: {k: str(v) for k, v in rec.items()}
                for sid, rec in sorted(self.records.items())}

    def rewrite_frontmatter(self, path: str, frontmatter: str, expected_body_sha256: str) -> None:
        """The enrichment write (§6.1): new frontmatter, the body kept, guarded by its hash."""
        if path not in self.files or "/chapters/" not in path:
            raise ChaptersError(f"{path} is not a chapter in the store")
        _, body = split_frontmatter(self.files[path])
        actual = hashlib.sha256(body.encode("utf-8", "surrogateescape")).hexdigest()
        if actual != expected_body_sha256:
            raise BodyChangedError(f"{path}: the body hashes to {actual[:12]}…, expected "
                                   f"{expected_body_sha256[:12]}…")
        if split_frontmatter(frontmatter + body)[1] != body:
            raise ChaptersError(f"{path}: the new frontmatter is not one `---` block")
        self._write(f"frontmatter:{path}")
        self.files[path] = frontmatter + body
