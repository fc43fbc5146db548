"""Moving objects between object stores without a porcelain in the way.

- `write_objects`: a computed closure goes in as loose objects when it is small (git's own
  `receive.unpackLimit` rule, so a pool fed by many small syncs does not grow one pack per
  sync) and as one pack otherwise.
- `add_loose`: one loose object, written the way git writes one (a private temp file renamed
  onto its name), so two machines adding the same object to one pool never collide.
- `copy_object_files`: a fresh mirror of a local-path pool copies the pool's pack and loose
  files as they are (what `git clone` of a local path does), instead of re-packing them.
"""

from __future__ import annotations

import os
import secrets
import shutil
from collections.abc import Sequence
from dataclasses import dataclass

from dulwich.object_format import DEFAULT_OBJECT_FORMAT
from dulwich.object_store import DiskObjectStore
from dulwich.objects import ShaFile
from dulwich.pack import full_unpacked_object, write_pack_data, write_pack_index

_PACK_FILE_MODE = 0o444  # pack files are immutable, as git makes them


@dataclass(frozen=True, slots=True)
class WrittenPack:
    """A pack this process wrote: its object ids and its path without the suffix."""

    ids: frozenset[bytes]
    base: str


def write_pack(pack_dir: str, objects: Sequence[ShaFile]) -> WrittenPack:
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
    return WrittenPack(frozenset(bytes(o.id) for o in objects), base)


def copy_pack(pack: WrittenPack, pack_dir: str) -> None:
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


def write_objects(
    store: DiskObjectStore, objects: Sequence[ShaFile], loose_limit: int
) -> WrittenPack | None:
    """Add `objects` to `store`: loose below `loose_limit` objects, else one pack."""
    if not objects:
        return None
    if len(objects) < loose_limit:
        for obj in objects:
            add_loose(store, obj)
        return None
    return write_pack(str(store.pack_dir), objects)


def add_loose(store: DiskObjectStore, obj: ShaFile) -> None:
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
    except FileNotFoundError:
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
