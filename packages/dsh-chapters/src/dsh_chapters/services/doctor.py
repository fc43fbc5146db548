"""`chapters doctor`: check the store, the mirror, the index and the credentials; say what was
found and what `--repair` would do, and do it only when asked.

Every chapter's body is checked against the sha256 its frontmatter records, and every
artifact against the sha256 that names it; the provider checks its mirror (and a local-path
pool) down to every object its refs name, and the temp files killed transfers leave.

Repairs never lose stored content: a symlink standing in for a chapter is removed (it is not
ours; its target is left alone), a corrupt mirror is moved aside and rebuilt from the pool
(§5.2: the mirror is transport), an index that does not read is rebuilt from the chapters
(§10.2: it is derived), a stale pool lock is cleared only when no process holds it, a TreeDX
lease this machine's killed push left is closed (CONTRACT.md: it would block every machine's
push until its TTL), temp files no live process writes are removed, a damaged chapter or
artifact is restored from a whole copy in the pool mirror (the damaged bytes are kept under
`state/doctor/`), and credential files go back to 0600. A chapter whose frontmatter does not
read, or that the pool holds no whole copy of, is listed, never rewritten (§1 invariant 3): a
person fixes it.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from dsh_chapters_core.documents import DocumentKind
from dsh_chapters_core.errors import ChaptersError
from dsh_chapters_core.pool_layout import frontmatter_value, to_pool
from dsh_chapters_core.ports.transport import HealthFinding, ProviderDoctor
from dsh_chapters_core.redact import MARKER_PATTERN
from dsh_chapters_core.search.index import MANIFEST_PATH
from dsh_chapters_core.sync.copy import body_changed

from dsh_chapters.app import App
from dsh_chapters.services import drift
from dsh_chapters.services import pool as knowledge_pool
from dsh_chapters.services.quarantine import quarantined

CREDENTIAL_FILE_MODE = 0o600  # §11.1, as the fs credential store writes them
CREDENTIAL_DIR_MODE = 0o700


@dataclass(frozen=True, slots=True)
class Finding:
    """One thing `chapters doctor` found: its area, code, path and detail, and what `--repair` would
    do or did."""

    area: str  # store | pool | lock | mirror | index | credentials | formats
    code: str  # stable, for scripts: "bad-frontmatter", "symlink", "mirror-corrupt", …
    path: str
    detail: str
    repair: str = ""  # what --repair does ("" when a person has to)
    repaired: str = ""  # what --repair did

    def to_json(self) -> dict[str, str]:
        from dsh_chapters.wire import to_json  # only `--json` pays for the converter

        return to_json(self)


@dataclass(frozen=True, slots=True)
class DoctorReport:
    """Everything `chapters doctor` found, and whether this run was asked to repair."""

    findings: tuple[Finding, ...]
    repaired: bool

    @property
    def healthy(self) -> bool:
        """True when nothing is left to fix (every finding repaired, or none)."""
        return all(f.repaired for f in self.findings)

    def to_json(self) -> dict[str, Any]:
        return {"healthy": self.healthy, "repair": self.repaired,
                "findings": [f.to_json() for f in self.findings]}


# -- the checks ---------------------------------------------------------------------------
def _store_findings(app: App) -> list[Finding]:
    found: list[Finding] = []
    for row in quarantined(app):
        if row.where == "pool":
            found.append(Finding("pool", f"quarantined-{row.code or 'file'}", row.path,
                                 row.reason + (f" (pool at {row.commit[:12]})" if row.commit
                                               else "")))
        elif row.reason in ("is a symlink", "is not a regular file"):
            found.append(Finding("store", "symlink" if "symlink" in row.reason else "not-a-file",
                                 row.path, row.reason, "remove it (its target is left alone)"))
        else:
            found.append(Finding("store", "bad-frontmatter", row.path, row.reason))
    root = Path(app.store_root)
    if root.is_dir():
        with os.scandir(root) as entries:
            for entry in entries:
                if entry.is_symlink():
                    found.append(Finding("store", "symlink", entry.name, "is a symlink in the "
                                         "store's top level", "remove it (its target is left "
                                         "alone)"))
    return found


DAMAGED_KEPT = "state/doctor"  # where a repair keeps the damaged bytes it replaced


def _whole_pool_copy(app: App, store_path: str, artifact: bool) -> bytes | None:
    """The pool mirror's copy of a store file when it is whole: an artifact that hashes to its
    name, a chapter whose body hashes to the sha256 its own frontmatter records."""
    entry = to_pool(store_path, app.identity.project_key)
    if entry is None:
        return None
    try:
        data = app.mirror_tree.read(entry.pool_path)
    except (ChaptersError, OSError):
        return None
    if artifact:
        name = entry.pool_path.rsplit("/", 1)[-1]
        return data if hashlib.sha256(data).hexdigest() == name else None
    return None if body_changed(data) or not frontmatter_value(data, "sha256") else data


def _current(app: App, store_path: str) -> bytes | None:
    try:
        return app.store_tree.read(store_path)
    except (ChaptersError, OSError):
        return None  # does not read: named with the store's quarantine


def _judged(app: App, path: str, what: str, detail: str, artifact: bool) -> Finding | None:
    """A chapter or artifact that fails its sha256: cut short (a beginning of the pool's whole
    copy: restored from it), or changed (named; never overwritten, it may be a person's
    redaction, docs/redaction.md). One whose changed bytes hold a redaction marker is a
    redaction made where it stands, not damage."""
    current = _current(app, path)
    if current is None:
        return None
    whole = _whole_pool_copy(app, path, artifact)
    if whole is not None and len(current) < len(whole) and whole.startswith(current):
        return Finding("store", f"{what}-cut-short", path,
                       f"{detail}: cut short ({len(current)} of the {len(whole)} bytes the pool "
                       "holds)", "restore it from the pool mirror's whole copy (the damaged "
                       f"bytes are kept in {DAMAGED_KEPT}/)")
    if MARKER_PATTERN.search(current.decode("utf-8", "replace")):
        return None
    return Finding("store", f"{what}-changed", path,
                   f"{detail}: changed since it was archived, and the pool mirror holds no "
                   "copy it is the beginning of; a person compares it (it is never overwritten)")


def _integrity_findings(app: App) -> list[Finding]:
    """Chapters whose body no longer hashes to their recorded sha256, and artifacts whose bytes
    do not hash to their name (a store that `status` calls modified since archived)."""
    found: list[Finding] = []
    for doc in app.store.documents():
        if doc.kind is not DocumentKind.CHAPTER or not doc.modified_since_archived:
            continue
        finding = _judged(app, doc.path, "chapter", f"its body hashes to {doc.body_sha256[:12]}, "
                          f"its frontmatter records {doc.sha256[:12]}", artifact=False)
        if finding is not None:
            found.append(finding)
    for path in app.store_tree.list("artifacts/"):
        name = path.rsplit("/", 1)[-1]
        if not name.endswith(".txt") or path.count("/") != 2:
            continue
        try:
            actual = app.store_tree.digest(path)
        except (ChaptersError, OSError):
            continue  # not a readable file: named with the store's quarantine
        if actual != name[: -len(".txt")]:
            finding = _judged(app, path, "artifact", f"its bytes hash to {actual[:12]}, not to "
                              "its name", artifact=True)
            if finding is not None:
                found.append(finding)
    return found


def _restore(app: App, finding: Finding) -> str:
    data = _whole_pool_copy(app, finding.path, artifact=finding.code.startswith("artifact"))
    if data is None:
        return ""
    with app.lock.hold(app.config.sync_timeout_ms / 1000):
        current = _current(app, finding.path)
        if current is None or not (len(current) < len(data) and data.startswith(current)):
            return ""  # changed since the check: left for a person
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        kept = f"{DAMAGED_KEPT}/{finding.path}.{stamp}"
        app.store_tree.write(kept, current)
        app.store_tree.write(finding.path, data)
    return f"restored from the pool mirror (the damaged bytes are at {kept})"


def _lock_findings(app: App) -> list[Finding]:
    state = app.lock.state()
    if state.stale:
        return [Finding("lock", "writer-lock-stale", state.path,
                        f"pid {state.pid} died holding it {state.age_seconds:.0f} s ago",
                        "nothing: the next archive or sync takes it over")]
    return []


def _provider(app: App) -> Any:
    if not knowledge_pool.is_linked(app):
        return None
    try:
        return knowledge_pool.open_provider(app)
    except ChaptersError:
        return None


def _mirror_findings(provider: Any) -> list[tuple[Finding, HealthFinding]]:
    if not isinstance(provider, ProviderDoctor):
        return []
    out = []
    for health in provider.diagnose():
        area = "pool" if health.code.startswith("pool-") else "mirror"
        out.append((Finding(area, health.code, health.path, health.detail, health.repair),
                    health))
    return out


def _index_findings(app: App) -> list[Finding]:
    manifest = Path(app.store_root) / MANIFEST_PATH
    try:
        if not manifest.exists():
            return []
        data = json.loads(manifest.read_bytes().decode("utf-8"))
        if not isinstance(data, dict):
            raise ValueError("not an object")
    except (OSError, ValueError, RecursionError) as exc:
        return [Finding("index", "index-unreadable", MANIFEST_PATH,
                        f"the index manifest does not read ({type(exc).__name__})",
                        "rebuild the index from the chapters (`chapters index --rebuild`)")]
    return []


def _credential_findings(app: App) -> list[Finding]:
    root = Path(app.dsh_home) / "dsh-chapters" / "credentials"
    found: list[Finding] = []
    if not root.is_dir():
        return found
    mode = stat.S_IMODE(root.stat().st_mode)
    if mode & 0o077:
        found.append(Finding("credentials", "credentials-mode", str(root),
                             f"directory mode {mode:04o}, not {CREDENTIAL_DIR_MODE:04o}",
                             f"chmod {CREDENTIAL_DIR_MODE:04o}"))
    for entry in sorted(root.iterdir()):
        if entry.is_symlink() or not entry.is_file():
            found.append(Finding("credentials", "credential-not-a-file", str(entry),
                                 "is a symlink or not a regular file"))
            continue
        mode = stat.S_IMODE(entry.stat().st_mode)
        if mode & 0o077:
            found.append(Finding("credentials", "credentials-mode", str(entry),
                                 f"file mode {mode:04o}, not {CREDENTIAL_FILE_MODE:04o}",
                                 f"chmod {CREDENTIAL_FILE_MODE:04o}"))
    return found


def _format_findings(app: App) -> list[Finding]:
    """Record types a reader met and did not know (format drift), and logs refused for their
    format version: nothing to repair here, a newer reader archives them."""
    found, refused = drift.drifts(app)
    out = []
    for d in found:
        versions = ", ".join(v for v in d.versions if v) or "an unrecorded version"
        out.append(Finding(
            "formats", "unknown-record-type", f"{d.harness}: {d.record_type}",
            f"{d.lines} line(s) in {d.sessions} session(s) written by {d.harness} {versions} "
            f"(e.g. {d.example}); counted, not archived: a newer dsh-chapters may read them"))
    for r in refused:
        out.append(Finding("formats", "unknown-format-version", r.source,
                           f"{r.harness} log format version {r.version}: {r.message}"))
    return out


# -- the repairs --------------------------------------------------------------------------
def _repair(app: App, finding: Finding, provider: Any, health: HealthFinding | None) -> str:
    if finding.code in ("symlink", "not-a-file") and finding.area == "store":
        target = Path(app.store_root) / finding.path
        if target.is_symlink() or (target.exists() and not target.is_dir()
                                   and not target.is_file()):
            target.unlink()
            return f"removed {finding.path}"
        return ""
    if finding.code in ("chapter-cut-short", "artifact-cut-short"):
        return _restore(app, finding)
    if finding.code == "credentials-mode":
        is_dir = Path(finding.path).is_dir()
        os.chmod(finding.path, CREDENTIAL_DIR_MODE if is_dir else CREDENTIAL_FILE_MODE)
        return f"chmod {CREDENTIAL_DIR_MODE if is_dir else CREDENTIAL_FILE_MODE:04o}"
    if finding.code == "index-unreadable":
        service = app.open_search()
        try:
            with app.lock.hold(app.config.sync_timeout_ms / 1000):
                for door in service.doors:
                    service.refresh(door, rebuild=True)
        finally:
            service.close()
        return "rebuilt the index from the chapters"
    if health is not None and isinstance(provider, ProviderDoctor) and finding.repair:
        with app.lock.hold(app.config.sync_timeout_ms / 1000):
            return provider.repair(health)
    return ""


def run_doctor(app: App, *, repair: bool) -> DoctorReport:
    """Every check; with `repair`, every repair that needs no person, under the writer lock
    where it writes the store or the mirror."""
    provider = _provider(app)
    try:
        pairs: list[tuple[Finding, HealthFinding | None]] = [
            (f, None) for f in _store_findings(app) + _integrity_findings(app)
            + _lock_findings(app)
        ]
        pairs += _mirror_findings(provider)
        pairs += [(f, None) for f in _index_findings(app) + _credential_findings(app)
                  + _format_findings(app)]
        findings: list[Finding] = []
        for finding, health in pairs:
            if repair and finding.repair:
                try:
                    done = _repair(app, finding, provider, health)
                except (ChaptersError, OSError) as exc:
                    done = ""
                    why = exc.message if isinstance(exc, ChaptersError) else (
                        f"{type(exc).__name__} ({exc.strerror or 'no detail'})")
                    finding = replace(finding, detail=f"{finding.detail}; repair failed: {why}")
                finding = replace(finding, repaired=done)
            findings.append(finding)
    finally:
        if provider is not None:
            provider.close()
    return DoctorReport(tuple(findings), repair)
