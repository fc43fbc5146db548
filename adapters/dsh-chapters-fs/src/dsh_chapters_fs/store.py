"""The workspace store `.dsh-chapters/` (§3.1: the store is the truth). Satisfies ChapterStore.

    <rootSessionId>/chapters/NNN-<slug>.md     chapters, never rewritten (§1 invariant 3)
    <rootSessionId>/collections.jsonl          one signature line per completed turn (§4.1)
    <rootSessionId>/session.json               the session's record and watermark
    <rootSessionId>/sessions/<sessionId>.json  the record of a fork or continuation of it
    artifacts/<aa>/<sha256>.txt                content-addressed tool output
    state/reservations/<rootSessionId>.json    the last chapter number reserved (never reused)

Every write is atomic (temp file, fsync, rename, fsync dir); the caller holds the writer lock.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from stat import S_ISDIR, S_ISLNK
from typing import Any

from dsh_chapters_core.config import DEFAULTS
from dsh_chapters_core.documents import ChapterTally, Document, DocumentKind
from dsh_chapters_core.errors import BodyChangedError, ChaptersError, UnsafePathError
from dsh_chapters_core.frontmatter import split_frontmatter
from dsh_chapters_core.pool_layout import (
    COLLECTIONS_FILE,
    LOCAL_STORE_DIRS,
    SESSION_FILE,
    SHARED_STORE_DIRS,
    STORE_ARTIFACT_SUFFIX,
    is_session_id,
)

from dsh_chapters_fs.atomic import is_temp_name, write_atomic, write_atomic_many
from dsh_chapters_fs.chapterfile import (
    DOCUMENT_FACT,
    body_digest,
    document_from_record,
    document_record,
    frontmatter_error,
    parse_document,
    quarantined_document,
)
from dsh_chapters_fs.containment import read_contained, read_small_file
from dsh_chapters_fs.filefacts import FileFacts
from dsh_chapters_fs.search_tree import FrontmatterReader
from dsh_chapters_fs.tree import checked_relpath

STORE_DIRNAME = ".dsh-chapters"
NO_WATERMARK = -1  # nothing of the session is archived yet
_SLUG = re.compile(r"^[a-z0-9][a-z0-9-]{0,199}$")
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_CHAPTER_FILE = re.compile(r"^(?P<number>[0-9]{3,})-(?P<slug>[^/]*)\.md$")
_SESSION_KEYS = ("harness", "harnessId", "projectKey", "sessionId", "source", "watermark")


def _json_bytes(data: Mapping[str, Any]) -> bytes:
    return (json.dumps(data, ensure_ascii=False, sort_keys=True, indent=2) + "\n").encode("utf-8")


def utf8(text: str) -> bytes:
    """A transcript read with surrogateescape keeps its original bytes (as the renderer hashes)."""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogateescape")


def chapter_number(name: str) -> int | None:
    match = _CHAPTER_FILE.match(name)
    return int(match.group("number")) if match else None


class FsChapterStore:
    """The append-only archive on disk. Methods that write assume the writer lock is held."""

    def __init__(self, root: str | os.PathLike[str], *, facts: FileFacts | None = None,
                 document_facts: FileFacts | None = None) -> None:
        self.root = str(Path(root).absolute())
        self._base = Path(self.root)
        self._facts = facts  # what each file's bytes said, kept by its stat (filefacts)
        # Each file's parsed Document, kept the same way in a file of its own (the judged facts
        # above are loaded by every status and sync; these only by what lists documents).
        self._document_facts = document_facts
        self._records: dict[str, tuple[str, Path]] | None = None  # sessionId -> (root, file)
        self._head_bytes = DEFAULTS.frontmatter_max_bytes + 8  # the frontmatter, and its fence

    # -- paths ---------------------------------------------------------------------------
    def _session_dir(self, root_session_id: str) -> Path:
        if not is_session_id(root_session_id) or "/" in root_session_id:
            raise ChaptersError(
                f"session id {root_session_id!r} cannot name a store directory",
                hint="a session id must be a plain name, not one of "
                     + ", ".join(SHARED_STORE_DIRS + LOCAL_STORE_DIRS),
            )
        return self._base / root_session_id

    # -- sessions and watermarks ---------------------------------------------------------
    def _scan_records(self) -> dict[str, tuple[str, Path]]:
        if self._records is None:
            records: dict[str, tuple[str, Path]] = {}
            for root_id in self.sessions():
                try:
                    main = self._base / root_id / SESSION_FILE
                    if main.is_file():
                        records[root_id] = (root_id, main)
                    children = self._base / root_id / "sessions"
                    if children.is_dir():
                        for child in sorted(children.glob("*.json")):
                            records.setdefault(child.stem, (root_id, child))
                except OSError:
                    continue  # a session folder that cannot be read: `quarantined` names it
            self._records = records
        return self._records

    def _find_record(self, session_id: str,
                     root_session_id: str = "") -> tuple[str, Path] | None:
        """With the root known, a record is at a known path and nothing is scanned (the archive
        path stays O(new turns)); without it, a fork child's root is found by the scan."""
        if self._records is None and root_session_id:
            root_dir = self._session_dir(root_session_id)
            path = (root_dir / SESSION_FILE if session_id == root_session_id
                    else root_dir / "sessions" / f"{self._session_dir(session_id).name}.json")
            return (root_session_id, path) if path.is_file() else None
        return self._scan_records().get(session_id)

    def _load_record(self, path: Path) -> dict[str, Any]:
        raw = read_small_file(path, _RECORD_MAX_BYTES)
        try:
            data = json.loads(raw.decode("utf-8")) if raw is not None else {}
        except (ValueError, RecursionError):  # garbage, or nested past the parser's stack
            return {}
        return data if isinstance(data, dict) else {}

    def sessions(self) -> list[str]:
        """Root session ids with a directory in the store, sorted."""
        if not self._base.is_dir():
            return []
        with os.scandir(self._base) as entries:  # a symlinked directory is not a session
            return sorted(p.name for p in entries
                          if p.is_dir(follow_symlinks=False) and is_session_id(p.name))

    def record_session(
        self, root_session_id: str, session_id: str, meta: Mapping[str, str]
    ) -> None:
        """Write the session's record once (its watermark starts at none); later calls keep it."""
        session_dir = self._session_dir(root_session_id)
        path = (session_dir / SESSION_FILE if session_id == root_session_id
                else session_dir / "sessions" / f"{self._session_dir(session_id).name}.json")
        if path.is_file():
            return
        record: dict[str, Any] = {k: str(meta.get(k, "")) for k in _SESSION_KEYS
                                  if k != "watermark"}
        record["sessionId"] = session_id
        record["watermark"] = NO_WATERMARK
        if session_id != root_session_id:
            record["rootSessionId"] = root_session_id
        write_atomic(path, _json_bytes(record))
        if self._records is not None:
            self._records[session_id] = (root_session_id, path)

    def watermark(self, session_id: str, *, root_session_id: str = "") -> int:
        found = self._find_record(session_id, root_session_id)
        if found is None:
            return NO_WATERMARK
        value = self._load_record(found[1]).get("watermark", NO_WATERMARK)
        return value if isinstance(value, int) and not isinstance(value, bool) else NO_WATERMARK

    def set_watermark(self, session_id: str, seq: int, *, root_session_id: str = "") -> None:
        found = self._find_record(session_id, root_session_id)
        if found is None:
            raise ChaptersError(f"session {session_id} has no record in {self.root}",
                                hint="record the session before archiving its turns")
        record = self._load_record(found[1])
        if record.get("watermark") == seq:
            return
        record["watermark"] = seq
        write_atomic(found[1], _json_bytes(record))

    def session_meta(self) -> Mapping[str, Mapping[str, str]]:
        """Every session record, by session id, values as strings (plus `rootSessionId`)."""
        meta: dict[str, Mapping[str, str]] = {}
        for session_id, (root_id, path) in sorted(self._scan_records().items()):
            record = self._load_record(path)
            values = {k: str(v) for k, v in record.items() if not isinstance(v, dict | list)}
            values.setdefault("rootSessionId", root_id)
            meta[session_id] = values
        return meta

    # -- chapters ------------------------------------------------------------------------
    def _reservation_path(self, root_session_id: str) -> Path:
        name = self._session_dir(root_session_id).name
        return self._base / "state" / "reservations" / f"{name}.json"

    def chapter_numbers(self, root_session_id: str) -> list[int]:
        chapters = self._session_dir(root_session_id) / "chapters"
        if not chapters.is_dir():
            return []
        numbers = (chapter_number(p.name) for p in chapters.iterdir() if not is_temp_name(p.name))
        return sorted(n for n in numbers if n is not None)

    def session_chapters(self, root_session_id: str) -> Iterator[Document]:
        """The chapters of one root session, newest first, parsed one at a time on demand:
        the archive's crash check reads the last one or two, never the corpus."""
        chapters = self._session_dir(root_session_id) / "chapters"
        if not chapters.is_dir():
            return
        named = [(n, p) for p in chapters.iterdir() if not is_temp_name(p.name) and p.is_file()
                 for n in (chapter_number(p.name),) if n is not None]
        for _, path in sorted(named, reverse=True):
            relpath = path.relative_to(self._base).as_posix()
            try:
                text = path.read_bytes().decode("utf-8", "surrogateescape")
            except FileNotFoundError:
                continue
            yield parse_document(relpath, text)

    def reserve_chapter_number(self, root_session_id: str, count: int = 1) -> int:
        """The first of `count` numbers after every one reserved or written; the reservation
        is durable first, so a writer killed before its chapters land leaves a gap, never a
        reused number. One write for an archive's chapters, not one each: a file written
        atomically costs a create and two fsyncs."""
        path = self._reservation_path(root_session_id)
        reserved = 0
        raw = read_small_file(path, _RECORD_MAX_BYTES)
        try:
            data = json.loads(raw.decode("utf-8")) if raw is not None else None
            if isinstance(data, dict) and isinstance(data.get("last"), int):
                reserved = data["last"]
        except (ValueError, RecursionError):
            reserved = 0  # the chapters on disk still bound the next number
        written = self.chapter_numbers(root_session_id)
        number = max([reserved, *written]) + 1
        last = number + max(count, 1) - 1
        write_atomic(path, _json_bytes({"last": last, "sessionId": root_session_id}))
        return number

    def write_chapter(self, root_session_id: str, number: int, slug: str, text: str) -> str:
        """Create `NNN-<slug>.md`; an existing chapter of that number is never replaced."""
        if not _SLUG.match(slug):
            raise ChaptersError(f"chapter slug {slug!r} is not lowercase letters, digits and '-'",
                                hint="render the slug with the core's slugger")
        if number in self.chapter_numbers(root_session_id):
            raise ChaptersError(f"chapter {number:03d} of session {root_session_id} already exists",
                                hint="reserve a new number: chapters are never rewritten")
        name = f"{number:03d}-{slug}.md"
        path = self._session_dir(root_session_id) / "chapters" / name
        try:
            write_atomic(path, utf8(text), exclusive=True)
        except FileExistsError:
            raise ChaptersError(f"chapter {path} already exists",
                                hint="reserve a new number: chapters are never rewritten") from None
        return f"{root_session_id}/chapters/{name}"

    # -- artifacts -----------------------------------------------------------------------
    def artifact_path(self, sha256: str) -> str:
        if not _SHA256.match(sha256):
            raise ChaptersError(f"artifact id {sha256!r} is not a sha256 hex digest",
                                hint="artifacts are named by the sha256 of their text")
        return f"artifacts/{sha256[:2]}/{sha256}{STORE_ARTIFACT_SUFFIX}"

    def has_artifact(self, sha256: str) -> bool:
        return (self._base / self.artifact_path(sha256)).is_file()

    def write_artifacts(self, artifacts: Sequence[tuple[str, str]]) -> int:
        """Content-addressed: each (sha256, text) is named by its text's sha256, so a file of
        that name is the same text and is kept. The ones missing are written together, their
        syncs at once (`write_atomic_many`); how many were written."""
        missing: dict[Path, bytes] = {}
        for sha256, text in artifacts:
            path = self._base / self.artifact_path(sha256)
            data = utf8(text)
            actual = hashlib.sha256(data).hexdigest()
            if actual != sha256:
                raise ChaptersError(f"artifact {sha256[:12]}… hashes to {actual[:12]}… "
                                    f"({len(data)} bytes)",
                                    hint="this is a bug in rendering; report it")
            if path not in missing and not path.is_file():
                missing[path] = data
        write_atomic_many(list(missing.items()))
        return len(missing)

    def artifact_count(self) -> int:
        directory = self._base / "artifacts"
        if not directory.is_dir():
            return 0
        return sum(1 for p in directory.glob(f"*/*{STORE_ARTIFACT_SUFFIX}")
                   if not is_temp_name(p.name))

    # -- signatures ----------------------------------------------------------------------
    def append_signatures(self, root_session_id: str, lines: tuple[str, ...]) -> None:
        """Append turn signatures. A line whose `seqs` are already recorded is skipped, so a
        retry after a crash never doubles a turn; earlier bytes are kept as they were."""
        path = self._session_dir(root_session_id) / COLLECTIONS_FILE
        try:
            # contained: a FIFO, a directory or an unreadable file is refused by name (its
            # bytes cannot be kept, so it is never replaced), never waited on
            existing = read_contained(self.root, path.relative_to(self._base).as_posix())
        except FileNotFoundError:
            existing = b""
        seen = {_seqs_of(line) for line in existing.decode("utf-8", errors="replace").splitlines()}
        fresh: list[str] = []
        for line in lines:
            key = _seqs_of(line)
            if key is not None and key in seen:
                continue
            seen.add(key)
            fresh.append(line.rstrip("\n") + "\n")
        if not fresh:
            return
        if existing and not existing.endswith(b"\n"):
            existing += b"\n"
        write_atomic(path, existing + "".join(fresh).encode("utf-8"))

    # -- reading -------------------------------------------------------------------------
    def chapter_paths(self) -> list[str]:
        """Store-relative paths of every chapter, by session then number (regular files only:
        a symlink in place of a chapter is never listed, so never read or published)."""
        found: list[tuple[str, int, str]] = []
        for root_id in self.sessions():
            chapters = f"{self.root}/{root_id}/chapters"  # plain strings: status walks them all
            try:
                if not S_ISDIR(os.lstat(chapters).st_mode):  # a symlink is not a folder here
                    continue
                with os.scandir(chapters) as entries:
                    for p in entries:
                        number = chapter_number(p.name)
                        if (number is not None and p.is_file(follow_symlinks=False)
                                and not is_temp_name(p.name)):
                            found.append((root_id, number, f"{root_id}/chapters/{p.name}"))
            except OSError:
                continue  # a folder that cannot be read: `quarantined` names it
        return [path for _, _, path in sorted(found)]

    def rule_paths(self) -> list[str]:
        rules = self._base / "rules"
        if rules.is_symlink() or not rules.is_dir():
            return []
        return sorted(p.relative_to(self._base).as_posix() for p in rules.glob("*/*.md")
                      if not p.is_symlink() and not p.parent.is_symlink() and p.is_file()
                      and not is_temp_name(p.name))

    def _read(self, relpath: str) -> str:
        # surrogateescape, as every read here: the same bytes give the same body_sha256
        return read_contained(self.root, relpath).decode("utf-8", "surrogateescape")

    def documents(self) -> Iterator[Document]:
        """Every chapter and rule, frontmatter parsed with yaml.safe_load at this edge. A file
        that cannot be read (bad frontmatter, unsafe) comes back quarantined, never raised."""
        for relpath in [*self.chapter_paths(), *self.rule_paths()]:
            try:
                yield self._parsed(relpath)
            except FileNotFoundError:
                continue
            except UnsafePathError as exc:
                yield quarantined_document(relpath, exc.reason)

    def _parsed(self, relpath: str) -> Document:
        """One file's Document: a function of its bytes, so while its stat is unchanged the
        one kept from its last read (`chapters list` of thousands of chapters reads none of
        them again). Raises as `read_contained` does."""
        if self._document_facts is None:
            return parse_document(relpath, self._read(relpath))
        parsed: list[Document] = []

        def read() -> dict[str, Any]:
            parsed.append(parse_document(relpath, self._read(relpath)))
            return {DOCUMENT_FACT: document_record(parsed[0])}

        facts = self._document_facts.recall(relpath, {DOCUMENT_FACT: dict}, read)
        if parsed:
            return parsed[0]
        try:
            return document_from_record(facts[DOCUMENT_FACT])
        except (KeyError, TypeError, ValueError):
            return parse_document(relpath, self._read(relpath))  # a damaged cache: read it

    def quarantined(self) -> list[tuple[str, str]]:
        """(store path, reason) of every chapter or rule that cannot be read: what `chapters
        status` and `chapters doctor` name. A file is judged by its frontmatter, and read only
        when it changed since it was last judged (filefacts)."""
        found: list[tuple[str, str]] = []
        for root_id in self.sessions():
            chapters = self._base / root_id / "chapters"
            try:
                try:
                    mode = os.lstat(chapters).st_mode
                except (FileNotFoundError, NotADirectoryError):
                    continue
                if S_ISLNK(mode):
                    found.append((f"{root_id}/chapters", "is a symlink"))
                    continue
                if not S_ISDIR(mode):
                    continue
                with os.scandir(chapters) as entries:
                    for p in entries:
                        if chapter_number(p.name) is None or is_temp_name(p.name):
                            continue
                        if p.is_symlink():
                            found.append((f"{root_id}/chapters/{p.name}", "is a symlink"))
                        elif not p.is_file(follow_symlinks=False):
                            found.append((f"{root_id}/chapters/{p.name}",
                                          "is not a regular file"))
            except OSError as exc:
                where = chapters if os.access(self._base / root_id, os.X_OK) else chapters.parent
                found.append((where.relative_to(self._base).as_posix(),
                              f"cannot be read ({exc.strerror})"))
        for relpath in [*self.chapter_paths(), *self.rule_paths()]:
            try:
                reason = str(self._judged(relpath)["problem"])
            except FileNotFoundError:
                continue
            except UnsafePathError as exc:
                reason = exc.reason
            if reason:
                found.append((relpath, reason))
        return sorted(found)

    def chapter_tally(self) -> ChapterTally:
        """How many chapters the store holds, and how many were modified since archived, as
        `documents()` would count them; only the files changed since the last count are read."""
        chapters = modified = 0
        for relpath in [*self.chapter_paths(), *self.rule_paths()]:
            try:
                facts = self._judged(relpath)
            except FileNotFoundError:
                continue
            except UnsafePathError as exc:  # documents() yields it quarantined, kind by path
                facts = {"kind": str(quarantined_document(relpath, exc.reason).kind)}
            if facts["kind"] == DocumentKind.CHAPTER:
                chapters += 1
                modified += bool(facts.get("modified"))
        return ChapterTally(chapters=chapters, modified=modified)

    def _judged(self, relpath: str) -> Mapping[str, Any]:
        """What `quarantined`, `chapter_tally` and a digest need of one chapter or rule, from
        one read of it, or from the facts kept while its stat is unchanged. Raises as
        `read_contained` does for a file that is gone or does not read."""
        def read() -> dict[str, Any]:
            return _judge(relpath, read_contained(self.root, relpath), self._head_bytes)

        return read() if self._facts is None else self._facts.recall(relpath, _JUDGED, read)

    def document(self, path: str) -> Document:
        """One chapter or rule by store-relative path (ports.rules.DocumentShelf): the notice
        reads this session's chapters and the rules this way, never the whole corpus."""
        relpath = checked_relpath(path)
        try:
            text = self._read(relpath)
        except FileNotFoundError:
            raise ChaptersError(f"{relpath} is not in the store {self.root}",
                                hint="run `chapters list` to see what is archived") from None
        return parse_document(relpath, text)

    # -- the enrichment write (§6.1: the one sanctioned mutation) ----------------------------
    def rewrite_frontmatter(self, path: str, frontmatter: str, expected_body_sha256: str) -> None:
        """Replace a chapter's frontmatter block, atomically, keeping the body byte for byte.

        Refuses (BodyChangedError) when the body on disk does not hash to the expected digest:
        enrichment labels the body it read, never another one. The caller holds the lock.
        """
        relpath = checked_relpath(path)
        parts = relpath.split("/")
        if len(parts) != 3 or parts[1] != "chapters" or chapter_number(parts[2]) is None:
            raise ChaptersError(f"{relpath} is not a chapter path (<session>/chapters/NNN-x.md)",
                                hint="only chapters carry model-owned frontmatter")
        target = self._base / relpath
        try:
            text = self._read(relpath)
        except FileNotFoundError:
            raise ChaptersError(f"{relpath} is not in the store {self.root}",
                                hint="run `chapters list` to see what is archived") from None
        _, body = split_frontmatter(text)
        actual = body_digest(body)
        if actual != expected_body_sha256:
            raise BodyChangedError(
                f"{relpath}: the body hashes to {actual[:12]}…, not {expected_body_sha256[:12]}… "
                f"({len(utf8(body))} bytes); the enrichment write refuses",
                hint="the chapter's body changed since it was read; run `chapters enrich run` "
                     "again to label the body as it is")
        if not frontmatter.startswith("---\n") or split_frontmatter(frontmatter + body) != (
            frontmatter[4:-4], body
        ):
            raise ChaptersError(f"{relpath}: the new frontmatter is not one `---` block",
                                hint="this is a bug in enrichment; report it")
        write_atomic(target, utf8(frontmatter + body))

    def read_text(self, path: str) -> str:
        relpath = checked_relpath(path)
        try:
            return self._read(relpath)
        except FileNotFoundError:
            raise ChaptersError(f"{relpath} is not in the store {self.root}",
                                hint="run `chapters list` to see what is archived") from None


# A session record or a reservation is a few hundred bytes; a bigger one is damage.
_RECORD_MAX_BYTES = 1024 * 1024
_FIRST_HEAD = 8192  # most frontmatter blocks close within this; longer ones are read further


_JUDGED = {"sha256": str, "problem": str, "kind": str, "modified": bool}  # a fact's type


def _judge(relpath: str, data: bytes, head_bytes: int) -> dict[str, Any]:
    """A chapter's or rule's facts from its bytes. Its problem is judged from its head, as far
    as its frontmatter reaches, exactly as `chapters status` always judged it; its kind and
    whether its body changed, from the whole file as `documents()` reads it."""
    head = data[:_FIRST_HEAD]
    if len(head) == _FIRST_HEAD and not _closes(head):
        head = data[:head_bytes]
        if len(head) == head_bytes and not _closes(head):
            head = data  # judge all of it
    document = FrontmatterReader().parse(relpath, head)  # the core's lines in microseconds
    doc = parse_document(relpath, data.decode("utf-8", "surrogateescape"))
    return {"sha256": hashlib.sha256(data).hexdigest(),
            "problem": frontmatter_error(document) if document is not None else "",
            "kind": str(doc.kind), "modified": doc.modified_since_archived}


def _closes(head: bytes) -> bool:
    """Whether a frontmatter block opens and closes within these first bytes."""
    fm_text, _ = split_frontmatter(head.decode("utf-8", "surrogateescape"))
    return bool(fm_text) or not head.startswith(b"---\n")


def _seqs_of(line: str) -> tuple[int, ...] | None:
    try:
        data = json.loads(line)
    except (ValueError, RecursionError):
        return None
    seqs = data.get("seqs") if isinstance(data, dict) else None
    if isinstance(seqs, list) and all(isinstance(s, int) for s in seqs):
        return tuple(seqs)
    return None
