"""`chapters scan`: the current rules over everything already written (§9).

The store, the mirror's files, and the pool's history as far as this machine holds it (a git
pool's objects in the mirror, and a local-path pool's own objects), each distinct content
once. It reads; it never writes, fetches or rewrites anything. What to do with what it finds
(rotate, then drop the file from the pool) is docs/redaction.md's.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from dsh_chapters_core.errors import ChaptersError
from dsh_chapters_core.pool_layout import to_store
from dsh_chapters_core.ports.transport import PoolHistory
from dsh_chapters_core.secret_scan import SecretHit, SecretScan

from dsh_chapters.app import App
from dsh_chapters.services import pool as knowledge_pool

STORE = "store"
MIRROR = "mirror"
HISTORY = "pool history"


@dataclass(frozen=True, slots=True)
class ScanReport:
    """What `chapters scan` found: every credential hit, with files, hits and families counted per
    place, and what could not be read."""

    hits: tuple[SecretHit, ...]
    files: dict[str, int]  # place -> files (or file versions) scanned
    counts: dict[str, int]  # place -> credentials found
    families: dict[str, int]
    unreadable: tuple[str, ...]  # store or mirror paths that could not be read
    history: str  # "scanned", or why the pool's history was not

    @property
    def clean(self) -> bool:
        return not self.hits

    def to_json(self) -> dict[str, Any]:
        return {"clean": self.clean, "total": len(self.hits), "counts": self.counts,
                "families": self.families, "files": self.files, "history": self.history,
                "unreadable": list(self.unreadable), "hits": [h.to_json() for h in self.hits]}


def _tree(scan: SecretScan, where: str, tree: Any, unreadable: list[str]) -> None:
    scan.files.setdefault(where, 0)
    for path in tree.list(""):
        if path.startswith(".git/"):
            continue  # the mirror's git state: its objects are the history's to scan
        try:
            data = tree.read(path)
        except (ChaptersError, OSError):
            unreadable.append(f"{where}:{path}")
            continue
        scan.add(where, path, data)


def _history(app: App, scan: SecretScan) -> str:
    if not knowledge_pool.is_linked(app):
        return "not linked to a pool"
    try:
        provider = knowledge_pool.open_provider(app)
    except ChaptersError as exc:
        return f"not read: {exc.message}"
    try:
        if not isinstance(provider, PoolHistory):
            return f"not kept on this machine by the {app.config.knowledge_remote} pool"
        scan.files.setdefault(HISTORY, 0)
        for version in provider.history_files():
            scan.add(HISTORY, version.path, version.data, commit=version.commit,
                     source=version.where)
        return "scanned"
    finally:
        provider.close()


def scan(app: App) -> ScanReport:
    """Every credential the current rules find in the store, the mirror and the history."""
    secrets = SecretScan(patterns=app.config.redaction_patterns)
    unreadable: list[str] = []
    _tree(secrets, STORE, app.store_tree, unreadable)
    _tree(secrets, MIRROR, app.mirror_tree, unreadable)
    history = _history(app, secrets)
    key = app.identity.project_key
    hits = []
    for hit in secrets.hits:
        twin = to_store(hit.path, key) if hit.where != STORE and hit.path else None
        hits.append(replace(hit, store_path=twin.store_path) if twin is not None else hit)
    return ScanReport(hits=tuple(hits), files=dict(secrets.files),
                      counts=secrets.counts(), families=secrets.families(),
                      unreadable=tuple(unreadable), history=history)
