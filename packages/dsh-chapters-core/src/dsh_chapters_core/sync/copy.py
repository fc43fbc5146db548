"""Copy-in and copy-out (§3.1): what crosses between the store and the mirror, and whose.

Copy-in validates before it writes (§2.2, §3.3). A pool is written by every machine, so a
file is accepted only when its path keeps to the §2.2 grammar (no store-reserved name, no
climbing), it fits `poolFileMaxBytes`, its frontmatter reads, an artifact hashes to its name,
and it lands in the namespace of the machine that wrote it: its `harnessId` and its path agree
and neither is this machine's. Anything else is quarantined with a code, the reason and the
pool head it was seen at; it is never copied, and the rest of the sync goes on.
"""

from __future__ import annotations

import enum
import hashlib
import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from dsh_chapters_core.config import DEFAULTS, Config
from dsh_chapters_core.errors import ChaptersError
from dsh_chapters_core.frontmatter import split_frontmatter
from dsh_chapters_core.pool_layout import (
    SESSION_FILE,
    Ownership,
    PoolEntry,
    PoolFileKind,
    frontmatter_value,
    is_session_id,
    pool_prefixes,
    session_record,
    to_pool,
    to_store,
)
from dsh_chapters_core.ports.store import FileTree

# Copy-in writes its accepted files in batches of this many (or this many bytes), their syncs
# made together: a second machine's first sync copies every file of the pool.
_BATCH_FILES = 256
_BATCH_BYTES = 16 << 20

# Why one store path's bytes cannot be read as a document ("" when they can): the edge's
# frontmatter parser, injected by the composition root (the core has no YAML reader).
DocumentCheck = Callable[[str, bytes], str]


class QuarantineCode(enum.StrEnum):
    """Why copy-in refused a pool file. Stable: `chapters doctor --json` reports these."""

    PATH = "path"  # not a §2.2 pool path of this project (grammar, reserved name, `..`)
    SIZE = "size"  # over poolFileMaxBytes
    FRONTMATTER = "frontmatter"  # a chapter or rule whose frontmatter does not read
    NAMESPACE = "namespace"  # the writer and the path disagree, or it is this machine's
    ARTIFACT = "artifact"  # the bytes do not hash to the artifact's name
    UNREADABLE = "unreadable"  # the mirror file cannot be read (a symlink, not a file)


@dataclass(frozen=True, slots=True)
class Quarantined:
    """One pool file copy-in set aside: never copied, listed by `status` and `doctor`."""

    path: str  # pool-relative
    code: QuarantineCode
    reason: str
    commit: str = ""  # the pool head at which copy-in found it

    def to_json(self) -> dict[str, str]:
        return {"path": self.path, "code": str(self.code), "reason": self.reason,
                "commit": self.commit}


@dataclass(frozen=True, slots=True)
class CopyLimits:
    """The limits copy-in holds a pool file to: its bytes, its frontmatter bytes, its session id."""

    max_bytes: int = DEFAULTS.pool_file_max_bytes
    frontmatter_max_bytes: int = DEFAULTS.frontmatter_max_bytes
    session_id_max_chars: int = DEFAULTS.session_id_max_chars

    @classmethod
    def of(cls, config: Config) -> CopyLimits:
        return cls(config.pool_file_max_bytes, config.frontmatter_max_bytes,
                   config.session_id_max_chars)


@dataclass(frozen=True, slots=True)
class CopyIn:
    """What one copy-in did: files new to the store, files changed, and pool files quarantined."""

    new: int = 0
    changed: int = 0
    quarantined: tuple[Quarantined, ...] = ()


def store_ownership(store_tree: FileTree, harness_id: str,
                    paths: Iterable[str] | None = None) -> Ownership:
    """Who owns each session in the store, from its `session.json` (§3.3). `paths` is the
    store's listing when the caller has just taken it (one walk of the store, not two)."""
    owners: list[tuple[str, str]] = []
    for path in store_tree.list() if paths is None else paths:
        parts = path.split("/")
        if len(parts) == 2 and parts[1] == SESSION_FILE and is_session_id(parts[0]):
            try:
                meta = json.loads(store_tree.read(path).decode("utf-8"))
                owner = str(meta.get("harnessId", "")) if isinstance(meta, dict) else ""
            except (ValueError, RecursionError, OSError, ChaptersError):
                continue  # unreadable: treat as written here, like a session without one
            owners.append((parts[0], owner))
    return Ownership(harness_id=harness_id, session_owners=tuple(sorted(owners)))


@dataclass(frozen=True, slots=True)
class Outgoing:
    """What copy-out would publish now, and how much is already in the mirror."""

    files: tuple[str, ...]  # store paths, sorted
    pool_paths: tuple[str, ...]
    new: int
    changed: int
    unchanged: int
    # Pool paths of our chapters cut short on disk (their bytes a strict beginning of the copy
    # already published, their body no longer what their sha256 records): damage, never
    # published as "changed" (`chapters doctor` restores them).
    held_back: tuple[str, ...] = ()


def body_changed(data: bytes) -> bool:
    """True when a chapter's body does not hash to the sha256 its frontmatter records (a
    chapter without the key is not judged: the archive always writes it)."""
    recorded = frontmatter_value(data, "sha256")
    if not recorded:
        return False
    _, body = split_frontmatter(data.decode("utf-8", "surrogateescape"))
    return hashlib.sha256(body.encode("utf-8", "surrogateescape")).hexdigest() != recorded


def cut_short(data: bytes, published: bytes) -> bool:
    """A chapter truncated on disk: its bytes begin the published copy and stop short of it,
    and its body fails its sha256. A chapter changed on purpose (a credential redacted where
    it stands, docs/redaction.md) is not a beginning of the old copy, so it still travels."""
    return len(data) < len(published) and published.startswith(data) and body_changed(data)


def outgoing(
    store_tree: FileTree, mirror_tree: FileTree, project_key: str, harness_id: str
) -> Outgoing:
    """Our store files that the mirror lacks or holds with other bytes (chapters are
    append-only; the only changed chapter bytes are the enrichment frontmatter write). A
    chapter cut short on disk is held back, and a file that does not read is left for the
    doctor: neither stops the others. The store is listed once, for its owners and its files;
    the mirror once, where this project's files go."""
    files: list[str] = []
    pool_paths: list[str] = []
    held: list[str] = []
    new = changed = unchanged = 0
    paths = sorted(store_tree.list())
    ownership = store_ownership(store_tree, harness_id, paths)
    mirrored = _mirrored(mirror_tree, project_key)
    for store_path in paths:
        entry = to_pool(store_path, project_key)
        if entry is None or not ownership.is_ours(entry):
            continue
        try:
            if entry.pool_path in mirrored:
                if entry.kind is PoolFileKind.ARTIFACT or (
                    mirror_tree.digest(entry.pool_path) == store_tree.digest(store_path)
                ):
                    unchanged += 1
                    continue
                is_new = False
                if entry.kind is PoolFileKind.CHAPTER and cut_short(
                        store_tree.read(store_path), mirror_tree.read(entry.pool_path)):
                    held.append(entry.pool_path)
                    continue
            else:
                is_new = True
        except (ChaptersError, OSError):
            held.append(entry.pool_path)  # unreadable or not a file: `chapters doctor` names it
            continue
        new += is_new
        changed += not is_new
        files.append(store_path)
        pool_paths.append(entry.pool_path)
    return Outgoing(tuple(files), tuple(pool_paths), new, changed, unchanged, tuple(held))


def _mirrored(mirror_tree: FileTree, project_key: str) -> frozenset[str]:
    """The mirror's files where this project's go, listed once: a tree's `list` names the
    files `exists` finds (regular, reached without a symlink), and one walk of those subtrees
    costs less than looking up each of our thousands of files in them one by one."""
    return frozenset(path for prefix in pool_prefixes(project_key)
                     for path in mirror_tree.list(prefix))


def pending_paths(
    store_tree: FileTree,
    mirror_tree: FileTree,
    project_key: str,
    harness_id: str,
    unpushed: tuple[str, ...] = (),
) -> tuple[str, ...]:
    """Pool paths of store files not yet in the pool: unmirrored, or mirrored but unpushed."""
    out = outgoing(store_tree, mirror_tree, project_key, harness_id)
    return tuple(sorted(set(out.pool_paths) | set(out.held_back) | set(unpushed)))


def _size(tree: FileTree, path: str) -> int:
    """A file's size when the tree can tell it without reading (-1 when it cannot)."""
    size = getattr(tree, "size", None)  # an optional capability of a tree (DirectoryTree's)
    return int(size(path)) if callable(size) else -1


def _write_batch(tree: FileTree, files: Sequence[tuple[str, bytes]]) -> None:
    """`files` written into `tree`: together when the tree can (DirectoryTree's `write_many`,
    its syncs made at once), else one by one."""
    many = getattr(tree, "write_many", None)  # an optional capability, as `size` is
    if callable(many):
        many(files)
        return
    for path, data in files:
        tree.write(path, data)


def _first_chapter(mirror_tree: FileTree, project_key: str, session_id: str,
                   max_bytes: int = DEFAULTS.pool_file_max_bytes) -> bytes | None:
    names = sorted(mirror_tree.list(f"chapters/{project_key}/{session_id}/"))
    for name in names:
        if _size(mirror_tree, name) > max_bytes:
            continue  # never read whole to learn who wrote the session
        try:
            return mirror_tree.read(name)
        except (ChaptersError, OSError):
            continue
    return None


def _core_frontmatter_problem(data: bytes, max_bytes: int) -> str:
    """What the core can tell without a YAML parser: a fenced block, within its size."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return f"not UTF-8 at byte {exc.start}"
    fm_text, _ = split_frontmatter(text)
    if not fm_text:
        return "no `---` frontmatter block"
    size = len(fm_text.encode("utf-8"))
    if size > max_bytes:
        return f"frontmatter is {size} bytes, over frontmatterMaxBytes = {max_bytes}"
    return ""


class _CopyIn:
    """One copy-in pass: session writers named once, every candidate judged before a write."""

    def __init__(self, store_tree: FileTree, mirror_tree: FileTree, project_key: str,
                 harness_id: str, check: DocumentCheck | None, limits: CopyLimits,
                 commit: str) -> None:
        self.store, self.mirror, self.key = store_tree, mirror_tree, project_key
        self.harness_id, self.check, self.limits, self.commit = harness_id, check, limits, commit
        # The store as it was before this pass: each pool file has one store twin, visited
        # once, so what the pass itself writes is never looked up again.
        self.present = frozenset(store_tree.list())
        self.owners = dict(store_ownership(store_tree, harness_id, self.present).session_owners)
        self.quarantined: list[Quarantined] = []
        self._writers: dict[str, str] = {}
        self._records: list[tuple[str, bytes]] = []  # session writer records waiting
        self._files: list[tuple[str, bytes]] = []  # judged files waiting
        self._bytes = 0

    def refuse(self, path: str, code: QuarantineCode, reason: str) -> None:
        self.quarantined.append(Quarantined(path, code, reason, self.commit))

    def entries(self) -> list[PoolEntry]:
        found: list[PoolEntry] = []
        for prefix in pool_prefixes(self.key):
            for pool_path in sorted(self.mirror.list(prefix)):
                entry = to_store(pool_path, self.key)
                if entry is None:
                    self.refuse(pool_path, QuarantineCode.PATH,
                                "not a §2.2 pool path (grammar, a reserved name or an unsafe "
                                "segment)")
                elif entry.session_id and len(entry.session_id) > self.limits.session_id_max_chars:
                    self.refuse(pool_path, QuarantineCode.PATH,
                                f"session id of {len(entry.session_id)} characters, over "
                                f"sessionIdMaxChars = {self.limits.session_id_max_chars}")
                else:
                    found.append(entry)
        return found

    def session_owner(self, sid: str) -> str:
        """The harnessId that writes this session: ours, a foreign one, or "" (unknown)."""
        if self.owners.get(sid):
            return self.owners[sid]
        if sid not in self.owners and any(True for _ in self.store.list(f"{sid}/")):
            return self.harness_id  # archived here before any session.json: ours
        if sid not in self._writers:
            first = _first_chapter(self.mirror, self.key, sid, self.limits.max_bytes)
            self._writers[sid] = frontmatter_value(first, "harnessId") if first else ""
        return self._writers[sid]

    def _namespace(self, entry: PoolEntry, data: bytes) -> str:
        """Why this file is outside its writer's namespace (§3.3), or ""."""
        mine = self.harness_id
        if entry.kind in (PoolFileKind.RULE, PoolFileKind.EDITS):
            if entry.harness_id == mine:
                return (f"{entry.pool_path.split('/')[0]}/…/{mine}/ is this machine's namespace; "
                        "only this machine writes there")
            if entry.kind is PoolFileKind.RULE:
                claimed = frontmatter_value(data, "harnessId")
                if claimed != entry.harness_id:
                    return (f"its frontmatter says harnessId {claimed!r}, its path says "
                            f"{entry.harness_id!r}")
            return ""
        if entry.kind is PoolFileKind.ARTIFACT:
            return ""
        owner = self.session_owner(entry.session_id)
        if owner == mine:
            return f"writes into session {entry.session_id}, which this machine archived"
        if entry.kind is PoolFileKind.CHAPTER:
            claimed = frontmatter_value(data, "harnessId")
            if not claimed:
                return "its frontmatter names no harnessId (no writer)"
            if claimed == mine:
                return f"its frontmatter claims this machine's harnessId {mine!r}"
            if owner and claimed != owner:
                return (f"harnessId {claimed or '(none)'!r} writes into session "
                        f"{entry.session_id} of {owner!r}")
        return ""

    def judge(self, entry: PoolEntry) -> bytes | None:
        """The bytes to copy, or None after quarantining the file with its reason."""
        size = _size(self.mirror, entry.pool_path)
        if size > self.limits.max_bytes:  # refused by its size, never read into memory
            self.refuse(entry.pool_path, QuarantineCode.SIZE,
                        f"{size} bytes, over poolFileMaxBytes = {self.limits.max_bytes}")
            return None
        try:
            data = self.mirror.read(entry.pool_path)
        except (ChaptersError, OSError) as exc:
            reason = exc.message if isinstance(exc, ChaptersError) else type(exc).__name__
            self.refuse(entry.pool_path, QuarantineCode.UNREADABLE, reason)
            return None
        if len(data) > self.limits.max_bytes:
            self.refuse(entry.pool_path, QuarantineCode.SIZE,
                        f"{len(data)} bytes, over poolFileMaxBytes = {self.limits.max_bytes}")
            return None
        if entry.kind is PoolFileKind.ARTIFACT:
            actual = hashlib.sha256(data).hexdigest()
            if actual != entry.pool_path.rsplit("/", 1)[-1]:
                self.refuse(entry.pool_path, QuarantineCode.ARTIFACT,
                            f"its {len(data)} bytes hash to {actual[:12]}…, not its name")
                return None
        if entry.kind in (PoolFileKind.CHAPTER, PoolFileKind.RULE):
            problem = _core_frontmatter_problem(data, self.limits.frontmatter_max_bytes)
            if not problem and self.check is not None:
                problem = self.check(entry.store_path, data)
            if problem:
                self.refuse(entry.pool_path, QuarantineCode.FRONTMATTER, problem)
                return None
        why = self._namespace(entry, data)
        if why:
            self.refuse(entry.pool_path, QuarantineCode.NAMESPACE, why)
            return None
        return data

    def name_writer(self, entry: PoolEntry) -> None:
        """§3.3: a session first seen in the pool gets a `session.json` naming its writer, so
        it is never published as ours; written with the session's first accepted file."""
        sid = entry.session_id
        if not sid or self.owners.get(sid):
            return
        first = _first_chapter(self.mirror, self.key, sid, self.limits.max_bytes)
        harness = frontmatter_value(first, "harness") if first is not None else ""
        writer = self.session_owner(sid)
        self._records.append((f"{sid}/{SESSION_FILE}", session_record(
            session_id=sid, harness_id=writer, harness=harness, project_key=self.key)))
        self.owners[sid] = writer

    def keep(self, store_path: str, data: bytes) -> None:
        """Copy a judged file into the store with the batch it joins."""
        self._files.append((store_path, data))
        self._bytes += len(data)
        if len(self._files) >= _BATCH_FILES or self._bytes >= _BATCH_BYTES:
            self.flush()

    def flush(self) -> None:
        """The waiting files written: first the writer records of the sessions they begin, so a
        session's writer is on disk before any of its files (§3.3), then the files."""
        for batch in (self._records, self._files):
            _write_batch(self.store, batch)
            batch.clear()
        self._bytes = 0

    def run(self) -> CopyIn:
        ownership = Ownership(self.harness_id, tuple(sorted(self.owners.items())))
        new = changed = 0
        for entry in self.entries():
            exists = entry.store_path in self.present
            if exists and (entry.kind is PoolFileKind.ARTIFACT or ownership.is_ours(entry)):
                continue  # content-addressed, or ours: never overwritten from the pool
            try:
                if exists and self.store.digest(entry.store_path) == self.mirror.digest(
                    entry.pool_path
                ):
                    continue
            except (ChaptersError, OSError) as exc:
                reason = exc.message if isinstance(exc, ChaptersError) else type(exc).__name__
                self.refuse(entry.pool_path, QuarantineCode.UNREADABLE, reason)
                continue
            data = self.judge(entry)
            if data is None:
                continue
            named = self.owners.get(entry.session_id)
            self.name_writer(entry)
            if self.owners.get(entry.session_id) != named:  # its writer is named now: rebuilt
                ownership = Ownership(self.harness_id, tuple(sorted(self.owners.items())))
            self.keep(entry.store_path, data)
            if exists:
                changed += 1
            else:
                new += 1
        self.flush()
        return CopyIn(new, changed, tuple(sorted(self.quarantined, key=lambda q: q.path)))


def copy_in(
    store_tree: FileTree,
    mirror_tree: FileTree,
    project_key: str,
    harness_id: str,
    *,
    check: DocumentCheck | None = None,
    limits: CopyLimits = CopyLimits(),
    commit: str = "",
    unsafe: tuple[str, ...] = (),
) -> CopyIn:
    """Bring other machines' files into the store: new files, and changed foreign files (their
    edits grow, their chapters get enriched). Our own files are never overwritten from the pool,
    and a file that fails validation is quarantined, never copied, never raised."""
    run = _CopyIn(store_tree, mirror_tree, project_key, harness_id, check, limits, commit)
    for path in unsafe:  # the provider never materialized these: name them all the same
        run.refuse(path, QuarantineCode.PATH, "an unsafe path element; never checked out")
    return run.run()


@dataclass(frozen=True, slots=True)
class PoolChapter:
    """A chapter in the mirror, as `chapters list --pool` shows it."""

    path: str  # pool-relative
    session_id: str
    harness_id: str
    title: str
    date: str


def pool_chapters(mirror_tree: FileTree, project_key: str,
                  served: Callable[[str], bool] | None = None) -> tuple[PoolChapter, ...]:
    """Every chapter of this project in the mirror, across machines, sorted by path; with
    `served`, only the paths it allows (quarantine means never served: a file copy-in set
    aside is not listed, and its bytes are not read)."""
    out: list[PoolChapter] = []
    for path in sorted(mirror_tree.list(f"chapters/{project_key}/")):
        entry = to_store(path, project_key)
        if entry is None or entry.kind is not PoolFileKind.CHAPTER:
            continue
        if served is not None and not served(path):
            continue
        try:
            text = mirror_tree.read(path)
        except (ChaptersError, OSError):
            continue  # not a readable file (copy-in quarantines it on the next sync)
        out.append(
            PoolChapter(
                path=path,
                session_id=entry.session_id,
                harness_id=frontmatter_value(text, "harnessId"),
                title=frontmatter_value(text, "title"),
                date=frontmatter_value(text, "date"),
            )
        )
    return tuple(out)

