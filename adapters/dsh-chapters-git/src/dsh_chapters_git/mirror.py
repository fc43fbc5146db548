"""The mirror: `.dsh-knowledge/`, a normal git repository whose working files are the pool.

§3.1: the mirror is transport, never the truth, so it may always be thrown away and rebuilt.
Readers (search, copy-in, `chapters list --pool`) see plain files in the §2.2 layout; git's
own state is under `.git/`, which they skip.

Invariants kept here:
- Branch `main` is the local history; `refs/remotes/pool/main` is the pool head the mirror
  last synced to. Unpushed commits are the ones between the two.
- The git index always describes `main`'s tree and the working files (clean), except between
  `stage` and `commit`. Refs move before the index is written, so a crash in between leaves
  files that disagree with the index: `problem()` reports it dirty and it is rebuilt.
- Files are materialized straight from the object store (no porcelain checkout), and a
  commit builds only the trees on changed paths (no per-file `add`).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import stat
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from dsh_chapters_core.ports.transport import StageResult
from dulwich.errors import ObjectMissing
from dulwich.index import Index, IndexEntry, index_entry_from_stat
from dulwich.objects import Blob, Commit, ObjectID, ShaFile
from dulwich.refs import Ref
from dulwich.repo import Repo

from dsh_chapters_git.failures import BAD_GIT_DATA, Deadline, MirrorDamaged
from dsh_chapters_git.history import read_commit
from dsh_chapters_git.packs import WrittenPack, write_objects
from dsh_chapters_git.trees import (
    DIR_MODE,
    EXEC_MODE,
    FILE_MODE,
    GITLINK_MODE,
    ObjectReader,
    Overlay,
    TreeEntry,
    blob_id,
    build_tree,
    check_path,
    diff_trees,
    iter_files,
    read_tree,
)

MAIN = Ref(b"refs/heads/main")
POOL_HEAD = Ref(b"refs/remotes/pool/main")
HEAD = Ref(b"HEAD")
REMOTE_SECTION = (b"remote", b"pool")
IDENTITY_DOMAIN = "dsh-chapters.invalid"
_DEADLINE_STRIDE = 256  # files between two deadline checks
UNSAFE_FILE = "dsh-chapters-unsafe.json"  # under `.git/`: pool entries never checked out
VERIFIED_FILE = "dsh-chapters-verified"  # under `.git/`: what the last integrity check saw
# Under `.git/`: why a verb found this mirror's own objects damaged. The next open reads it as
# a problem, so the mirror is moved aside and cloned again (what the failure promised).
DAMAGED_FILE = "dsh-chapters-damaged"


def _hex_or_none(sha: bytes | None) -> str:
    return sha.decode("ascii") if sha is not None else "-"


@dataclass(frozen=True, slots=True)
class _Staged:
    """A file `stage` wrote into the mirror and no commit has recorded yet: its blob id and the
    stat of the written file. Its bytes are read back by the commit, not held: a first sync
    stages every file of the store, then builds the pool's derived index (§10.2) before it
    commits, and held, the chapters of 1.4 GB of real sessions were 150 MB beside that build."""

    sha: bytes
    stat: os.stat_result


def identity(harness_id: str) -> bytes:
    """`<harnessId> <harnessId@dsh-chapters.invalid>`: commits are attributable per machine."""
    clean = "".join(ch for ch in harness_id if ch not in "<>\n\r\0").strip() or "unknown"
    return f"{clean} <{clean.replace(' ', '-')}@{IDENTITY_DOMAIN}>".encode()


def _mtime_ns(value: int | float | tuple[int, int]) -> int:
    if isinstance(value, tuple):
        return value[0] * 1_000_000_000 + value[1]
    return int(value * 1_000_000_000)


def _raw(store: ObjectReader, sha: bytes) -> bytes:
    """A blob's bytes; a missing one is `ObjectMissing` (named, classified), never KeyError."""
    try:
        obj = store[ObjectID(sha)]
    except KeyError:
        raise ObjectMissing(ObjectID(sha)) from None
    return obj.as_raw_string()


def _write_new(path: bytes, data: bytes, mode: int) -> os.stat_result:
    """Create a file that does not exist yet (fresh materialization)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o755 if mode == EXEC_MODE else 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        return os.fstat(fd)
    finally:
        os.close(fd)


def _write_atomic(path: bytes, data: bytes, mode: int) -> os.stat_result:
    """Replace a file atomically (temp + rename), so a reader never sees half of it.

    No fsync: the mirror is disposable transport (§3.1); a crash leaves files that disagree
    with the index, which `problem()` reports so the mirror is rebuilt.
    """
    directory, name = os.path.split(path)
    temp = os.path.join(directory, b".%s.tmp-%d" % (name, os.getpid()))
    try:
        st = _write_new(temp, data, mode)
        os.replace(temp, path)
    except BaseException:
        if os.path.lexists(temp):
            os.unlink(temp)
        raise
    return st


class Mirror:
    """One `.dsh-knowledge/` directory and its repository. Not thread-safe (the writer lock)."""

    def __init__(self, root: str) -> None:
        self.root = os.path.abspath(root)
        self._root_b = os.fsencode(self.root)
        self._repo: Repo | None = None
        self._index: Index | None = None
        self._dirs: set[bytes] | None = None
        self._staged: dict[bytes, _Staged] = {}
        # What the last commit wrote, kept until it is pushed: the push then reads nothing
        # back from disk, and a local pool gets a byte copy of the same pack.
        self.fresh: dict[bytes, ShaFile] = {}
        self.fresh_pack: WrittenPack | None = None

    # ---- lifecycle -------------------------------------------------------------------
    @classmethod
    def init(cls, root: str, remote: str) -> Mirror:
        """A new, empty mirror at `root` (which must not exist), bound to `remote`."""
        repo = Repo.init(root, mkdir=True, default_branch=b"main")
        try:
            config = repo.get_config()
            config.set(REMOTE_SECTION, b"url", remote.encode("utf-8"))
            config.set(REMOTE_SECTION, b"fetch", b"+refs/heads/*:refs/remotes/pool/*")
            # Symlinks in the pool are written as plain files: nothing in the mirror points out.
            config.set((b"core",), b"symlinks", False)
            config.write_to_path()
        finally:
            repo.close()
        return cls(root)

    @property
    def repo(self) -> Repo:
        if self._repo is None:
            odd = irregular_git_file(os.path.join(self.root, ".git"))
            if odd:  # dulwich would wait forever on a FIFO there: damage, named
                raise MirrorDamaged(odd)
            self._repo = Repo(self.root)
        return self._repo

    def close(self) -> None:
        if self._repo is not None:
            self._repo.close()
            self._repo = None
        self._index = None
        self._dirs = None
        self.forget_fresh()

    def discard_staged(self) -> None:
        self._staged.clear()

    def forget_fresh(self) -> None:
        self.fresh = {}
        self.fresh_pack = None

    def reader(self) -> Overlay:
        """The object store with this process's fresh objects in front of it."""
        return Overlay(self.fresh, self.repo.object_store)

    @property
    def has_staged(self) -> bool:
        return bool(self._staged)

    # ---- refs ------------------------------------------------------------------------
    def _ref(self, name: Ref) -> bytes | None:
        try:
            return bytes(self.repo.refs[name])
        except KeyError:
            return None

    def head(self) -> bytes | None:
        """The local `main` (pool history plus unpushed commits), None when empty."""
        return self._ref(MAIN)

    def pool_head(self) -> bytes | None:
        """The pool head this mirror last synced to, None for an empty pool."""
        return self._ref(POOL_HEAD)

    def set_pool_head(self, sha: bytes | None) -> None:
        if sha is None:
            self.repo.refs.remove_if_equals(POOL_HEAD, None)
        else:
            self.repo.refs[POOL_HEAD] = ObjectID(sha)

    def set_head(self, sha: bytes) -> None:
        self.repo.refs[MAIN] = ObjectID(sha)

    def tree_of(self, commit: bytes | None) -> bytes | None:
        return None if commit is None else bytes(read_commit(self.repo.object_store, commit).tree)

    def remote(self) -> str:
        try:
            return self.repo.get_config().get(REMOTE_SECTION, b"url").decode("utf-8")
        except KeyError:
            return ""

    # ---- index -----------------------------------------------------------------------
    def index(self) -> Index:
        if self._index is None:
            self._index = Index(os.path.join(self.repo.controldir(), "index"))
        return self._index

    def _tracked_dirs(self) -> set[bytes]:
        if self._dirs is None:
            dirs: set[bytes] = set()
            for path in list(self.index()) + list(self._staged):
                parts = path.split(b"/")
                for depth in range(1, len(parts)):
                    dirs.add(b"/".join(parts[:depth]))
            self._dirs = dirs
        return self._dirs

    def _entry(self, path: bytes) -> IndexEntry | None:
        try:
            entry = self.index()[path]
        except KeyError:
            return None
        return entry if isinstance(entry, IndexEntry) else None

    # ---- unsafe pool entries ---------------------------------------------------------
    def _unsafe_file(self) -> str:
        return os.path.join(self.root, ".git", UNSAFE_FILE)

    def _record_unsafe(self, found: list[bytes], *, replace: bool) -> None:
        """Tree entries never checked out (`..`, `.git`, a slash in a name): kept beside the
        repository, so every sync names them to copy-in's quarantine, not only the first."""
        known = set() if replace else set(self.unsafe_paths())
        known |= {p.decode("utf-8", "replace") for p in found}
        path = self._unsafe_file()
        if not known:
            if os.path.lexists(path):
                os.unlink(path)
            return
        with open(path, "w", encoding="utf-8") as handle:
            json.dump(sorted(known), handle)

    def unsafe_paths(self) -> tuple[str, ...]:
        try:
            with open(self._unsafe_file(), encoding="utf-8") as handle:
                data = json.load(handle)
        except (OSError, ValueError):
            return ()
        return tuple(str(p) for p in data) if isinstance(data, list) else ()

    # ---- health ----------------------------------------------------------------------
    def integrity_problem(self) -> str:
        """§5.2: a cheap check that what the refs name is whole ("" when it is): every tree
        reachable from `main` and the pool head reads, every blob is present, and every pack's
        trailing checksum matches its bytes. Corruption routes to the rebuild path."""
        token = self._integrity_token()
        verified = os.path.join(self.root, ".git", VERIFIED_FILE)
        try:
            with open(verified, encoding="utf-8") as handle:
                seen = handle.read().split("\n")
        except OSError:
            seen = []
        if seen == token:
            return ""  # nothing the check reads changed since it last passed
        # Packs never change once written: only a pack not verified before (by name, size
        # and mtime) is checksummed, so a sync pays for what it fetched, not the whole pool.
        broken = self._check_integrity(verified_packs=set(seen))
        if not broken:
            with open(verified, "w", encoding="utf-8") as handle:
                handle.write("\n".join(token))
        return broken

    def _integrity_token(self) -> list[str]:
        """What the check depends on, by stat: the refs, each pack's size and mtime, and the
        mtime of every loose-object directory (a deleted loose object changes its dir)."""
        objects = os.path.join(self.root, ".git", "objects")
        parts = [_hex_or_none(self.head()), _hex_or_none(self.pool_head())]
        with os.scandir(objects) as entries:
            for entry in sorted(entries, key=lambda e: e.name):
                if entry.is_dir(follow_symlinks=False):
                    parts.append(f"{entry.name}:{entry.stat().st_mtime_ns}")
        pack_dir = os.path.join(objects, "pack")
        if os.path.isdir(pack_dir):
            with os.scandir(pack_dir) as entries:
                for entry in sorted(entries, key=lambda e: e.name):
                    st = entry.stat()
                    parts.append(f"pack/{entry.name}:{st.st_size}:{st.st_mtime_ns}")
        return parts

    def connectivity_problem(self) -> str:
        """`git fsck`-level connectivity of the refs sync uses ("" when whole): every commit of
        `main` and the pool head's history, every tree and blob they name, each object read
        and its bytes checked against its name. For `chapters doctor`: it reads the whole
        history, which the per-sync check above never does."""
        odd = irregular_object_file(os.path.join(self.root, ".git", "objects"))
        if odd:
            return odd
        try:
            return closure_problem(self.repo.object_store, (self.head(), self.pool_head()))
        except Exception as exc:  # any failure to read the repository is damage here
            return f"the repository does not read ({type(exc).__name__})"

    def _check_integrity(self, verified_packs: set[str]) -> str:
        odd = irregular_object_file(os.path.join(self.root, ".git", "objects"))
        if odd:  # read by dulwich, a FIFO would block forever: found by type first
            return odd
        store = self.repo.object_store
        seen: set[bytes] = set()
        for ref in (self.head(), self.pool_head()):
            if ref is None:
                continue
            stack = [bytes(read_commit(store, ref).tree)]
            while stack:
                sha = stack.pop()
                if sha in seen:
                    continue
                seen.add(sha)
                for _name, mode, child in read_tree(store, sha).iteritems():
                    if mode == DIR_MODE:
                        stack.append(bytes(child))
                    elif mode != GITLINK_MODE and ObjectID(child) not in store:
                        return f"object {bytes(child)[:12].decode()} is missing"
        for pack in store.packs:
            # `PackData.filename` is the bare name; `path` is where the pack lies (a stat of
            # the bare name looked in the current directory and called every fetched pack gone).
            path = os.fspath(pack.data.path)
            name = os.path.basename(path)
            try:
                st = os.stat(path)
            except OSError:
                return f"pack {name} is gone"
            if f"pack/{name}:{st.st_size}:{st.st_mtime_ns}" in verified_packs:
                continue
            try:
                pack.data.check()
            except Exception:  # any checksum or read failure: the pack is not whole
                return f"pack {name} fails its checksum"
        return ""

    def mark_damaged(self, detail: str) -> None:
        """Record that a verb found this mirror's objects damaged (see DAMAGED_FILE)."""
        try:
            with open(os.path.join(self.root, ".git", DAMAGED_FILE), "w",
                      encoding="utf-8") as handle:
                handle.write(detail[:500] + "\n")
        except OSError:
            pass  # a mirror whose .git cannot be written fails `problem()` anyway

    def damaged(self) -> str:
        try:
            with open(os.path.join(self.root, ".git", DAMAGED_FILE), encoding="utf-8",
                      errors="replace") as handle:
                return handle.read(500).strip() or "damaged"
        except OSError:
            return ""

    @contextlib.contextmanager
    def reads(self) -> Iterator[None]:
        """Reads of this mirror's objects: a missing or mangled one is `MirrorDamaged`."""
        try:
            yield
        except BAD_GIT_DATA as exc:
            raise MirrorDamaged(_what_is_damaged(exc)) from exc

    def problem(self, remote: str) -> str:
        """Why this mirror cannot be used as is ("" when it can): corrupt, dirty or foreign."""
        if not os.path.isdir(os.path.join(self.root, ".git")):
            return "not a git repository"
        odd = irregular_git_file(os.path.join(self.root, ".git"))
        if odd:
            return f"corrupt: {odd}"
        damaged = self.damaged()
        if damaged:
            return f"corrupt: {damaged}"
        # Any failure to read the mirror is corruption for our purposes: it is disposable.
        try:
            if self.remote() != remote:
                return "mirror of another pool"
            if self.repo.refs.read_ref(HEAD) != b"ref: " + MAIN:
                return "HEAD is not main"
            # First: an object file that is not a regular file (a FIFO would block any read
            # below forever) is found by type, whenever the object directories changed.
            broken = self.integrity_problem()
            if broken:
                return f"corrupt: {broken}"
            head = self.head()
            if head is not None:
                read_tree(self.repo.object_store, read_commit(self.repo.object_store, head).tree)
            pool = self.pool_head()
            if pool is not None:
                read_commit(self.repo.object_store, pool)
            index = self.index()
            if head is None and len(index):
                return "index without commits"
        except Exception:  # see above
            return "unreadable repository"
        changed = self._first_dirty_path()
        return f"uncommitted change in {changed!r}" if changed else ""

    def _first_dirty_path(self) -> str:
        index = self.index()
        for path, entry in index.items():
            if not isinstance(entry, IndexEntry):
                return path.decode("utf-8", "replace")
            if entry.mode == GITLINK_MODE:
                continue
            full = os.path.join(self._root_b, path)
            try:
                st = os.lstat(full)
            except FileNotFoundError:
                return path.decode("utf-8", "replace")
            if not stat.S_ISREG(st.st_mode) or st.st_size != entry.size:
                return path.decode("utf-8", "replace")
            # The index keeps 32 bits of the inode number; equal stat means unchanged.
            if st.st_mtime_ns == _mtime_ns(entry.mtime) and st.st_ino & 0xFFFFFFFF == entry.ino:
                continue
            try:
                with open(full, "rb") as handle:
                    if blob_id(handle.read()) != entry.sha:
                        return path.decode("utf-8", "replace")
            except OSError:  # unreadable: the mirror cannot vouch for it, so it is rebuilt
                return path.decode("utf-8", "replace")
        for path in self._walk_files(self._root_b, b""):
            if path not in index:
                return path.decode("utf-8", "replace")
        return ""

    def _walk_files(self, directory: bytes, prefix: bytes) -> Iterator[bytes]:
        with os.scandir(directory) as entries:
            for item in entries:
                if not prefix and item.name == b".git":
                    continue
                if item.is_dir(follow_symlinks=False):
                    yield from self._walk_files(item.path, prefix + item.name + b"/")
                else:
                    yield prefix + item.name

    # ---- materialization ------------------------------------------------------------
    def materialize(self, commit: bytes, deadline: Deadline) -> int:
        """Write every file of `commit` into this (fresh, empty) mirror; returns files written."""
        store = self.repo.object_store
        tree = read_commit(store, commit).tree
        entries: dict[bytes, IndexEntry] = {}
        made: set[bytes] = set()
        skipped: list[bytes] = []
        for count, (path, entry) in enumerate(iter_files(store, tree, b"", skipped)):
            if count % _DEADLINE_STRIDE == 0:
                deadline.check()
            if entry.mode == GITLINK_MODE:
                continue
            full = os.path.join(self._root_b, path)
            parent = os.path.dirname(full)
            if parent not in made:
                os.makedirs(parent, exist_ok=True)
                made.add(parent)
            st = _write_new(full, _raw(store, entry.sha), entry.mode)
            entries[path] = index_entry_from_stat(st, entry.sha, entry.mode)
        self._record_unsafe(skipped, replace=True)
        self.set_head(commit)
        self.set_pool_head(commit)
        index = Index(os.path.join(self.repo.controldir(), "index"), read=False)
        index.update(dict(entries))
        index.write()
        self._index = index
        self._dirs = None
        return len(entries)

    def fast_forward(self, old: bytes | None, new: bytes, deadline: Deadline) -> tuple[str, ...]:
        """Move the working files from commit `old` to `new`; returns the changed paths."""
        store = self.repo.object_store
        skipped: list[bytes] = []
        changes = list(diff_trees(store, self.tree_of(old), self.tree_of(new), b"", skipped))
        self._record_unsafe(skipped, replace=False)
        index = self.index()
        # Removals first: a file that became a directory must be gone before the directory.
        for change in changes:
            if change.new is None:
                self._remove_file(change.path)
                if change.path in index:
                    del index[change.path]
        for count, change in enumerate(changes):
            if count % _DEADLINE_STRIDE == 0:
                deadline.check()
            if change.new is None or change.new.mode == GITLINK_MODE:
                continue
            full = os.path.join(self._root_b, change.path)
            os.makedirs(os.path.dirname(full), exist_ok=True)
            st = _write_atomic(full, _raw(store, change.new.sha), change.new.mode)
            index[change.path] = index_entry_from_stat(st, change.new.sha, change.new.mode)
        self.set_head(new)
        self.set_pool_head(new)
        index.write()
        self._dirs = None
        return tuple(sorted({c.path.decode("utf-8", "replace") for c in changes}))

    def _remove_file(self, path: bytes) -> None:
        full = os.path.join(self._root_b, path)
        if os.path.isdir(full) and not os.path.islink(full):
            shutil.rmtree(full)
        elif os.path.lexists(full):
            os.unlink(full)
        parent = os.path.dirname(full)
        while parent != self._root_b:
            try:
                os.rmdir(parent)
            except OSError:
                break
            parent = os.path.dirname(parent)

    # ---- publishing ------------------------------------------------------------------
    def stage(self, files: Mapping[str, bytes]) -> StageResult:
        """Write pool-relative files atomically; count new, changed and unchanged ones."""
        new = changed = unchanged = 0
        refused: list[tuple[str, int]] = []
        for path in sorted(files):
            data = files[path]
            raw = check_path(path)
            sha = blob_id(data)
            staged = self._staged.get(raw)
            entry = self._entry(raw)
            current = staged.sha if staged is not None else (entry.sha if entry else None)
            if current == sha:
                unchanged += 1
                continue
            if current is None and self._collides(raw):
                refused.append((path, len(data)))
                continue
            full = os.path.join(self._root_b, raw)
            os.makedirs(os.path.dirname(full), exist_ok=True)
            st = _write_atomic(full, data, FILE_MODE)
            self._staged[raw] = _Staged(sha, st)
            if current is None:
                new += 1
                self._note_dirs(raw)
            else:
                changed += 1
        return StageResult(new=new, changed=changed, unchanged=unchanged, refused=tuple(refused))

    def _staged_bytes(self, path: bytes, item: _Staged) -> bytes:
        """A staged file as `stage` wrote it. Nothing else writes the mirror while the writer
        lock is held, so a file gone or changed since is damage: the next sync moves the mirror
        aside and stages the store's files again."""
        try:
            with open(os.path.join(self._root_b, path), "rb") as handle:
                data = handle.read()
        except OSError as exc:
            raise MirrorDamaged(f"{os.fsdecode(path)}, staged for the next commit, cannot be "
                                f"read ({exc.strerror or type(exc).__name__})") from None
        if blob_id(data) != item.sha:
            raise MirrorDamaged(f"{os.fsdecode(path)} changed after it was staged")
        return data

    def _collides(self, path: bytes) -> bool:
        """A file where a directory is tracked, or under a tracked file: git cannot hold both."""
        if path in self._tracked_dirs():
            return True
        parts = path.split(b"/")
        for depth in range(1, len(parts)):
            prefix = b"/".join(parts[:depth])
            if self._entry(prefix) is not None or prefix in self._staged:
                return True
        return False

    def _note_dirs(self, path: bytes) -> None:
        dirs = self._tracked_dirs()
        parts = path.split(b"/")
        for depth in range(1, len(parts)):
            dirs.add(b"/".join(parts[:depth]))

    def commit(self, message: str, author: bytes, loose_limit: int) -> str | None:
        """Commit what `stage` wrote, on top of `main`; None when nothing changed."""
        if not self._staged:
            return None
        store = self.repo.object_store
        parent = self.head()
        base_tree = self.tree_of(parent)
        changes = {path: TreeEntry(FILE_MODE, item.sha) for path, item in self._staged.items()}
        tree_id, trees = build_tree(store, base_tree, changes)
        if tree_id == base_tree:
            self._staged.clear()
            return None
        commit = Commit()
        commit.tree = ObjectID(tree_id)
        commit.parents = [ObjectID(parent)] if parent is not None else []
        commit.author = commit.committer = author
        commit.author_time = commit.commit_time = int(time.time())
        commit.author_timezone = commit.commit_timezone = 0
        commit.message = (
            message.encode("utf-8") if message.endswith("\n") else (message + "\n").encode()
        )
        blobs = []
        for path, item in self._staged.items():
            blob = Blob()
            blob.data = self._staged_bytes(path, item)
            blobs.append(blob)
        # Children first (`build_tree` lists subtrees before their parents): a kill leaves no
        # commit without its tree, and `main` moves only after the commit is in.
        objects: list[ShaFile] = [*blobs, *trees, commit]
        pack = write_objects(store, objects, loose_limit, "commit")
        if parent is None:
            ok = self.repo.refs.add_if_new(MAIN, commit.id)
        else:
            ok = self.repo.refs.set_if_equals(MAIN, ObjectID(parent), commit.id)
        if not ok:
            raise RuntimeError("main moved during commit")  # the writer lock makes this a bug
        index = self.index()
        for path, item in self._staged.items():
            index[path] = index_entry_from_stat(item.stat, item.sha, FILE_MODE)
        index.write()
        self._staged.clear()
        # Accumulates across unpushed commits; a push reuses the last pack only if it holds
        # the whole closure (checked there).
        self.fresh_pack = pack
        self.fresh.update((bytes(o.id), o) for o in objects)
        return commit.id.decode("ascii")


# The files of a repository dulwich opens with a plain `open()`: each must be a regular file
# (a FIFO would block it forever, a directory fail it with a traceback).
_GIT_FILES = ("config", "HEAD", "index", "packed-refs", "refs/heads/main",
              "refs/remotes/pool/main", VERIFIED_FILE, UNSAFE_FILE, DAMAGED_FILE)


def irregular_git_file(git_dir: str, names: tuple[str, ...] = _GIT_FILES) -> str:
    """The first of a repository's own files that exists and is not a regular file ("")."""
    for name in names:
        try:
            mode = os.lstat(os.path.join(git_dir, name)).st_mode
        except FileNotFoundError:
            continue
        except OSError as exc:
            return f"{name} cannot be read ({exc.strerror})"
        if not stat.S_ISREG(mode):
            return f"{name} is not a regular file"
    return ""


def irregular_object_file(objects_dir: str) -> str:
    """The first loose object or pack file that is not a regular file (""): one scan of the
    object directory's names and types, no object read."""
    try:
        with os.scandir(objects_dir) as top:
            fans = [e for e in top if len(e.name) == 2 or e.name == "pack"]
    except OSError as exc:
        return f"objects/ cannot be read ({exc.strerror})"
    for fan in fans:
        if not fan.is_dir(follow_symlinks=False):
            return f"objects/{fan.name} is not a directory"
        try:
            with os.scandir(fan.path) as entries:
                for entry in entries:
                    if not entry.is_file(follow_symlinks=False):
                        return f"object file {fan.name}/{entry.name} is not a regular file"
        except OSError as exc:
            return f"objects/{fan.name} cannot be read ({exc.strerror})"
    return ""


def _what_is_damaged(exc: BaseException) -> str:
    if isinstance(exc, ObjectMissing):
        sha = exc.args[0] if exc.args else b""
        text = sha.decode("ascii", "replace") if isinstance(sha, bytes) else str(sha)
        return f"object {text[:12]} is missing"
    return f"an object does not read ({type(exc).__name__})"


def closure_problem(store: ObjectReader, heads: tuple[bytes | None, ...]) -> str:
    """The first thing missing or mangled in the closure of `heads` ("" when it is whole): a
    walk of every commit, tree and blob, each read, parsed and hashed against its id (`git
    fsck`'s connectivity, without its style checks)."""
    seen: set[bytes] = set()
    todo: list[tuple[bytes, str]] = [(h, "commit") for h in heads if h is not None]
    while todo:
        sha, kind = todo.pop()
        if sha in seen:
            continue
        seen.add(sha)
        try:
            # Parsed and hashed, not style-checked: another machine's tree may hold a name
            # we never check out (`..`), which is quarantine's business, not damage.
            obj = store[ObjectID(sha)]
            obj.as_raw_string()
        except KeyError:
            return f"{kind} {sha[:12].decode('ascii', 'replace')} is missing"
        except Exception as exc:  # a mangled object: checksum, format, zlib
            return (f"{kind} {sha[:12].decode('ascii', 'replace')} does not read "
                    f"({type(exc).__name__})")
        if obj.id != sha:
            return f"{kind} {sha[:12].decode('ascii', 'replace')} holds another object"
        if isinstance(obj, Commit):
            todo.append((bytes(obj.tree), "tree"))
            todo.extend((bytes(p), "commit") for p in obj.parents)
        elif kind == "commit":
            return f"commit {sha[:12].decode('ascii', 'replace')} is a {obj.type_name.decode()}"
        elif kind == "tree":
            for _name, mode, child in read_tree(store, sha).iteritems():
                if mode == DIR_MODE:
                    todo.append((bytes(child), "tree"))
                elif mode != GITLINK_MODE:
                    todo.append((bytes(child), "blob"))
    return ""


def move_aside(root: str) -> str:
    """Rename a mirror to `<root>.stale-<UTC timestamp>` beside it; returns the new path."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    target = f"{root}.stale-{stamp}"
    suffix = 1
    while os.path.lexists(target):
        suffix += 1
        target = f"{root}.stale-{stamp}-{suffix}"
    os.rename(root, target)
    return target


def remove_tree(path: str) -> None:
    """Delete a mirror directory tree (read-only pack files unlink fine: the dirs are ours)."""
    if os.path.lexists(path):
        shutil.rmtree(path)
