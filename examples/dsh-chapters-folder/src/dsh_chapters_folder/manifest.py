"""The folder pool on disk: the §2.2 layout as plain files, plus one manifest per writer.

A folder synced by something else (Syncthing, Dropbox, a network share) has no transactions
and no server to say what arrived. So each machine writes only its own files (§3.3: chapters,
artifacts and collections by session id, `edits/<harness-id>/` by harness id) and its own
manifest, `.folder-pool/manifests/<writer>.json`, listing the size and sha256 of every file it
published. Two machines never write the same file, so the synced folder never conflicts.

A reader trusts a file only when its bytes match a manifest's size and sha256. A file whose
bytes do not match (still copying, or its manifest is newer than its bytes) has not arrived
yet: it is pending, never a corrupt chapter, and the next pull looks again. A manifest that
does not parse is a half-synced manifest: pending too, until it parses.

Derived files (`index/`, `topics/`, `project.yml`) are rebuilt by every syncing machine (§3.3,
§10.2), so several manifests may claim one path: the bytes there are accepted when they match
any claim, and a loser of that race is rebuilt locally, never merged.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

POOL_DIR = ".folder-pool"  # the pool's own state: manifests and the same-host push lock
MANIFESTS = f"{POOL_DIR}/manifests"
LOCK_FILE = f"{POOL_DIR}/push.lock"
MANIFEST_FORMAT = 1
_WRITER_SAFE = re.compile(r"[^A-Za-z0-9._-]")
_TEMP_MARK = ".folder-tmp-"


@dataclass(frozen=True, slots=True)
class Claim:
    """One manifest's word on one path: the bytes it published there."""

    size: int
    sha256: str


@dataclass(frozen=True, slots=True)
class Manifest:
    writer: str
    generation: int
    files: Mapping[str, Claim]
    digest: str  # sha256 of the manifest's bytes: what the pool head is made of

    def to_bytes(self) -> bytes:
        data = {
            "format": MANIFEST_FORMAT,
            "writer": self.writer,
            "generation": self.generation,
            "files": {
                path: {"size": c.size, "sha256": c.sha256} for path, c in sorted(self.files.items())
            },
        }
        return (json.dumps(data, sort_keys=True, indent=1) + "\n").encode("utf-8")


@dataclass(frozen=True, slots=True)
class PoolView:
    """Every parseable manifest, and the writers whose manifest is still arriving."""

    manifests: tuple[Manifest, ...] = ()
    arriving_manifests: tuple[str, ...] = ()
    claims: Mapping[str, frozenset[Claim]] = field(default_factory=dict)

    @property
    def head(self) -> str:
        """The pool's version: a digest of the manifests ("" for a pool nobody published to)."""
        if not self.manifests:
            return ""
        lines = "".join(f"{m.writer}:{m.generation}:{m.digest}\n" for m in self.manifests)
        return hashlib.sha256(lines.encode("utf-8")).hexdigest()[:40]


def writer_file(writer: str) -> str:
    """The manifest path of one writer; a harness id is made safe for any filesystem."""
    return f"{MANIFESTS}/{_WRITER_SAFE.sub('_', writer) or '_'}.json"


def sha256_file(path: str) -> tuple[int, str]:
    digest = hashlib.sha256()
    size = 0
    with open(path, "rb") as handle:
        for piece in iter(lambda: handle.read(1 << 16), b""):
            size += len(piece)
            digest.update(piece)
    return size, digest.hexdigest()


def parse_manifest(raw: bytes) -> Manifest | None:
    """A manifest, or None when the bytes are not (yet) a whole one."""
    try:
        data = json.loads(raw.decode("utf-8"))
        if data.get("format") != MANIFEST_FORMAT:
            return None
        files = {
            str(path): Claim(int(entry["size"]), str(entry["sha256"]))
            for path, entry in data["files"].items()
        }
        return Manifest(
            writer=str(data["writer"]),
            generation=int(data["generation"]),
            files=files,
            digest=hashlib.sha256(raw).hexdigest(),
        )
    except (ValueError, KeyError, TypeError, AttributeError):
        return None


def read_pool(pool_root: str) -> PoolView:
    directory = os.path.join(pool_root, MANIFESTS)
    try:
        names = sorted(os.listdir(directory))
    except FileNotFoundError:
        return PoolView()
    manifests: list[Manifest] = []
    arriving: list[str] = []
    claims: dict[str, set[Claim]] = {}
    for name in names:
        if not name.endswith(".json") or name.startswith("."):
            continue  # a sync tool's temp file, a conflict copy or our own temp write
        with open(os.path.join(directory, name), "rb") as handle:
            manifest = parse_manifest(handle.read())
        if manifest is None:
            arriving.append(name.removesuffix(".json"))
            continue
        manifests.append(manifest)
        for path, claim in manifest.files.items():
            claims.setdefault(path, set()).add(claim)
    return PoolView(
        tuple(manifests),
        tuple(arriving),
        {path: frozenset(found) for path, found in claims.items()},
    )


def safe_pool_path(path: str) -> bool:
    """A relative, forward-slash pool path that stays inside the pool and off its state."""
    parts = path.split("/")
    return bool(path) and not path.startswith("/") and all(
        part not in ("", ".", "..") for part in parts
    ) and not parts[0].startswith(".")


def write_atomic(path: str, data: bytes) -> None:
    """Temp file beside the target, fsync, rename: a reader sees the old bytes or the new."""
    directory = os.path.dirname(path)
    os.makedirs(directory, exist_ok=True)
    temp = os.path.join(directory, f".{os.path.basename(path)}{_TEMP_MARK}{os.getpid()}")
    with open(temp, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temp, path)


def walk_files(root: str) -> Iterator[str]:
    """Relative paths of the plain files under `root`, minus top-level dot entries."""
    for directory, dirnames, filenames in os.walk(root):
        rel_dir = os.path.relpath(directory, root)
        if rel_dir == ".":
            dirnames[:] = [d for d in dirnames if not d.startswith(".")]
            filenames = [f for f in filenames if not f.startswith(".")]
        for name in filenames:
            if _TEMP_MARK in name:
                continue
            yield name if rel_dir == "." else f"{rel_dir}/{name}".replace(os.sep, "/")
