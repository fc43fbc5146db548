"""Moving objects between object stores without a porcelain in the way.

- `write_objects`: a computed closure goes in as loose objects when it is small (git's own
  `receive.unpackLimit` rule, so a pool fed by many small syncs does not grow one pack per
  sync) and as one pack otherwise.
- `add_loose`: one loose object, written the way git writes one (a private temp file renamed
  onto its name), so two machines adding the same object to one pool never collide.
- `copy_object_files`: a fresh mirror of a local-path pool copies the pool's pack and loose
  files as they are (what `git clone` of a local path does), instead of re-packing them.
- `stale_temp_files` / `sweep_temp_files`: what a writer killed mid-write leaves in an object
  store (our `tmp_obj_*` and `tmp-<pid>-*` names, dulwich's `tmp_pack_*`, a `.pack` without
  its `.idx`), found for `chapters doctor` and removed once its writer is gone.

Callers hand `write_objects` a closure in children-first order (blobs, trees, then the
commit, oldest commit first: `history.closure`), so a store killed mid-way holds a commit only
when it holds everything under it.

Test hook (not a user setting): with `DSH_CHAPTERS_GIT_TRACE_OBJECTS=1` every object that
lands prints `git-object <where> <n> <sha>` to stderr (`where`: commit, push, fetch; n counts
that kind in the process; a pack prints once, as one object). `DSH_CHAPTERS_GIT_OBJECT_PAUSE_MS`
sleeps there, with `DSH_CHAPTERS_GIT_OBJECT_PAUSE_AT=<where>:<n>` only at that one: the
reliability suite SIGKILLs a real push or pull while it sleeps.
"""

from __future__ import annotations

import itertools
import os
import re
import secrets
import shutil
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from dulwich.object_format import DEFAULT_OBJECT_FORMAT
from dulwich.object_store import DiskObjectStore
from dulwich.objects import ShaFile
from dulwich.pack import full_unpacked_object, write_pack_data, write_pack_index

_PACK_FILE_MODE = 0o444  # pack files are immutable, as git makes them
TRACE_ENV = "DSH_CHAPTERS_GIT_TRACE_OBJECTS"
PAUSE_ENV = "DSH_CHAPTERS_GIT_OBJECT_PAUSE_MS"
PAUSE_AT_ENV = "DSH_CHAPTERS_GIT_OBJECT_PAUSE_AT"
_counters: dict[str, itertools.count[int]] = {}


def _trace(where: str, sha: bytes | str) -> None:
    """The kill-test hook (module docstring): free when the variables are unset."""
    trace = os.environ.get(TRACE_ENV) == "1"
    pause = os.environ.get(PAUSE_ENV, "")
    if not trace and not pause:
        return
    number = next(_counters.setdefault(where, itertools.count(1)))
    text = sha.decode("ascii") if isinstance(sha, bytes) else sha
    if trace:
        sys.stderr.write(f"git-object {where} {number} {text}\n")
        sys.stderr.flush()
    if pause.isdigit() and int(pause) > 0:
        at = os.environ.get(PAUSE_AT_ENV, "")
        if not at or at == f"{where}:{number}":
            time.sleep(int(pause) / 1000)


@dataclass(frozen=True, slots=True)
class WrittenPack:
    """A pack this process wrote: its object ids and its path without the suffix."""

    ids: frozenset[bytes]
    base: str


def write_pack(pack_dir: str, objects: Sequence[ShaFile], where: str = "") -> WrittenPack:
    """Write `objects` as one pack plus its index in a single pass (no read-back to index it).

    Both are written to temp names and renamed in, `.pack` first and `.idx` last: a reader
    only uses a pack whose index exists, so it never sees half of one.
    """
    os.makedirs(pack_dir, exist_ok=True)
    stem = os.path.join(pack_dir, f"tmp-{os.getpid()}-{secrets.token_hex(6)}")
    try:
        with open(stem + ".pack", "wb") as handle:
            entries, checksum = write_pack_data(
                handle.write,
                (full_unpacked_object(o) for o in objects),
                num_records=len(objects),
                object_format=DEFAULT_OBJECT_FORMAT,
            )
        with open(stem + ".idx", "wb") as handle:
            write_pack_index(
                handle, sorted((sha, off, crc) for sha, (off, crc) in entries.items()), checksum
            )
        base = os.path.join(pack_dir, f"pack-{checksum.hex()}")
        for suffix in (".pack", ".idx"):
            os.chmod(stem + suffix, _PACK_FILE_MODE)
            os.replace(stem + suffix, base + suffix)
    finally:
        for suffix in (".pack", ".idx"):
            if os.path.exists(stem + suffix):
                os.unlink(stem + suffix)
    if where:
        _trace(where, os.path.basename(base))
    return WrittenPack(frozenset(bytes(o.id) for o in objects), base)


def copy_pack(pack: WrittenPack, pack_dir: str, where: str = "") -> None:
    """Copy a pack this process wrote into another store (same bytes: no re-encoding)."""
    stem = os.path.join(pack_dir, f"tmp-{os.getpid()}-{secrets.token_hex(6)}")
    name = os.path.basename(pack.base)
    try:
        for suffix in (".pack", ".idx"):
            shutil.copyfile(pack.base + suffix, stem + suffix)
            os.chmod(stem + suffix, _PACK_FILE_MODE)
            os.replace(stem + suffix, os.path.join(pack_dir, name + suffix))
    finally:
        for suffix in (".pack", ".idx"):
            if os.path.exists(stem + suffix):
                os.unlink(stem + suffix)
    if where:
        _trace(where, name)


def write_objects(
    store: DiskObjectStore, objects: Sequence[ShaFile], loose_limit: int, where: str = ""
) -> WrittenPack | None:
    """Add `objects` to `store`: loose below `loose_limit` objects, else one pack.

    Loose objects land in the order given, which must be children first (blobs, trees, then
    the commit): a killed writer then leaves a commit only with all it names. A pack lands
    whole or not at all (its index is renamed in last)."""
    if not objects:
        return None
    if len(objects) < loose_limit:
        for obj in objects:
            add_loose(store, obj, where)
        return None
    return write_pack(str(store.pack_dir), objects, where)


def add_loose(store: DiskObjectStore, obj: ShaFile, where: str = "") -> None:
    """Add one loose object; a no-op (bar a fresher mtime) when it is already there.

    Not dulwich's `add_object`: that takes `<object>.lock` with O_EXCL, so two machines
    pushing the same blob at once make one of them fail, and a writer killed mid-write
    leaves a lock that fails every later writer of that object. An object's bytes are
    fixed by its name, so a private temp file renamed onto the name is always safe: the
    last rename wins with identical content.
    """
    sha = obj.id.decode("ascii")
    fan = os.path.join(str(store.path), sha[:2])
    path = os.path.join(fan, sha[2:])
    try:
        os.utime(path, None)  # fresh mtime: a concurrent gc must not prune it before the ref
        return
    except (FileNotFoundError, NotADirectoryError):
        pass
    os.makedirs(fan, exist_ok=True)
    temp = os.path.join(fan, f"tmp_obj_{os.getpid()}_{secrets.token_hex(6)}")
    try:
        with open(temp, "wb") as handle:
            handle.write(obj.as_legacy_object())
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(temp, _PACK_FILE_MODE)
        os.replace(temp, path)
    finally:
        if os.path.exists(temp):
            os.unlink(temp)
    if where:
        _trace(where, sha)


def copy_object_files(source_objects: str, target_objects: str) -> int:
    """Copy pack files and loose objects that `target_objects` lacks; returns files copied.

    A pack is copied `.pack` first and `.idx` last: dulwich and git only read a pack whose
    index exists, so a reader never sees half of one. Pool object files are immutable (every
    writer renames them into place), so copying by name is exact.
    """
    copied = 0
    source_packs = os.path.join(source_objects, "pack")
    target_packs = os.path.join(target_objects, "pack")
    os.makedirs(target_packs, exist_ok=True)
    try:
        names = set(os.listdir(source_packs))
    except FileNotFoundError:
        names = set()
    present = set(os.listdir(target_packs))
    for name in sorted(names):
        if not name.endswith(".pack"):
            continue
        base = name[: -len(".pack")]
        if base + ".idx" not in names or base + ".idx" in present:
            continue
        for suffix in (".pack", ".idx"):
            shutil.copyfile(
                os.path.join(source_packs, base + suffix), os.path.join(target_packs, base + suffix)
            )
            copied += 1
    for fan in os.listdir(source_objects):
        if len(fan) != 2:
            continue
        source_dir = os.path.join(source_objects, fan)
        target_dir = os.path.join(target_objects, fan)
        loose = os.listdir(source_dir)
        if not loose:
            continue
        have = set(os.listdir(target_dir)) if os.path.isdir(target_dir) else set()
        os.makedirs(target_dir, exist_ok=True)
        for name in loose:
            if name not in have and len(name) == 38:
                shutil.copyfile(os.path.join(source_dir, name), os.path.join(target_dir, name))
                copied += 1
    return copied


# -- what killed writers leave behind -------------------------------------------------------
# Our loose-object temp names carry the writer's pid; dulwich's do not (its `tmp_pack_*` and
# the `tmp*.pack` of a fetch), so those are judged by age: a transfer is bounded by
# syncTimeoutMs, so a temp file older than that has no live writer.
_OWN_TEMP = re.compile(r"^(?:tmp_obj_|tmp-)(\d+)[_-]")
_PACK_TEMP = re.compile(r"^(?:tmp_pack_.*|tmp[^/]*\.(?:pack|idx)|[^/]*\.(?:idx|pack)\.lock)$")


@dataclass(frozen=True, slots=True)
class TempFile:
    """A temp file a writer left in an object store: its path, size, age and the writer's pid."""

    path: str
    size: int
    age_s: int
    pid: int  # the writer's pid when the name carries one, else 0


def _pid_alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _temp_candidates(objects_dir: str) -> Iterator[tuple[str, int]]:
    """(path, writer pid or 0) of every temp-shaped name in an object store."""
    try:
        top = os.listdir(objects_dir)
    except OSError:
        return
    for name in top:
        full = os.path.join(objects_dir, name)
        if name.startswith("tmp_pack_"):
            yield full, 0
        elif len(name) == 2 and os.path.isdir(full):
            try:
                inner = os.listdir(full)
            except OSError:
                continue
            for item in inner:
                own = _OWN_TEMP.match(item)
                if own:
                    yield os.path.join(full, item), int(own.group(1))
                elif item.endswith(".lock"):
                    yield os.path.join(full, item), 0  # dulwich's `add_object` lock
    pack_dir = os.path.join(objects_dir, "pack")
    try:
        names = set(os.listdir(pack_dir))
    except OSError:
        return
    for name in names:
        own = _OWN_TEMP.match(name)
        if own:
            yield os.path.join(pack_dir, name), int(own.group(1))
        elif _PACK_TEMP.match(name):
            yield os.path.join(pack_dir, name), 0
        elif name.endswith(".pack") and name[: -len(".pack")] + ".idx" not in names:
            yield os.path.join(pack_dir, name), 0  # a pack whose index never landed


def stale_temp_files(objects_dir: str, older_than_s: float) -> tuple[TempFile, ...]:
    """Temp files no live writer owns: a dead pid's, or (no pid in the name) older than
    `older_than_s`. A live writer's are never listed, so a sweep cannot cut a transfer."""
    now = time.time()
    found: list[TempFile] = []
    me = os.getpid()
    for path, pid in _temp_candidates(objects_dir):
        try:
            st = os.lstat(path)
        except OSError:
            continue
        age = now - st.st_mtime
        if pid:
            if pid == me or _pid_alive(pid):
                continue
        elif age < older_than_s:
            continue
        found.append(TempFile(path, st.st_size, int(age), pid))
    return tuple(sorted(found, key=lambda t: t.path))


def sweep_temp_files(objects_dir: str, older_than_s: float) -> tuple[TempFile, ...]:
    """Remove what `stale_temp_files` lists; returns what was removed."""
    removed: list[TempFile] = []
    for temp in stale_temp_files(objects_dir, older_than_s):
        try:
            os.unlink(temp.path)
        except FileNotFoundError:
            continue
        except OSError:
            continue  # named again by the next doctor run
        removed.append(temp)
    return tuple(removed)
