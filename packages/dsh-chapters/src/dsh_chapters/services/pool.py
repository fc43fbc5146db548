"""The knowledge pool as the app runs it: link, sync, the archive's sync points, status.

The use case is the core's `sync`; this module only wires it to the composed `App` (its
store and mirror trees, lock, clock, credentials and provider plugins) and does the few
workspace edits a user expects of the first sync: `.dsh-knowledge/` in `.gitignore`, once.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dsh_chapters_core.errors import ChaptersError, FailureCode, TransportError, UsageError
from dsh_chapters_core.ports.transport import KnowledgeProvider, ProviderContext, ProviderFactory
from dsh_chapters_core.remote import LOCAL_SCHEME, is_loopback_host, parse_remote
from dsh_chapters_core.search.index import MANIFEST_PATH
from dsh_chapters_core.search.service import DoorName, derived_files
from dsh_chapters_core.sync.copy import pending_paths
from dsh_chapters_core.sync.run import PushDecision, push_after_archive, select_provider, sync
from dsh_chapters_core.sync.state import (
    STATE_PATH,
    SyncMode,
    SyncReport,
    SyncState,
    iter_pool_lines,
    read_sync_state,
)

from dsh_chapters.app import MIRROR_DIRNAME, App
from dsh_chapters.present import SYNC_NOW, display_path, hint_text
from dsh_chapters.services import enrich, search

GITIGNORE_ENTRIES = (f"{MIRROR_DIRNAME}/", f"{MIRROR_DIRNAME}.*/")
GITIGNORE_STATE = "state/gitignore.json"  # records that the hint was written (so: once)

# What to do next, per failure code (§5.3; amendment 2026-09-21: auth surfaces a re-link).
NEXT_STEP: dict[str, str] = {
    FailureCode.AUTH: "the pool refused the token: run `chapters link <url> < new-token-file`",
    FailureCode.NETWORK: "the archive is safe here; run `chapters sync` when the pool is reachable",
    FailureCode.TIMEOUT: "the archive is safe here; raise syncTimeoutMs or retry `chapters sync`",
    FailureCode.DIVERGED: "the pool kept moving; run `chapters sync` again",
    FailureCode.CORRUPT: "the next `chapters sync` moves the mirror aside and clones again",
    FailureCode.REFUSED: "check the pool's path or URL and its permissions with `chapters link`",
    FailureCode.NOT_FOUND: "check the pool's path or URL with `chapters link`",
}


# ---------------------------------------------------------------------------------------------
# Remotes and tokens (§2.1)


def normalize_remote(remote: str, cwd: Path) -> str:
    """A local path becomes absolute (the config outlives the shell's cwd); URLs stay."""
    parsed = parse_remote(remote)
    if parsed.url:
        return remote
    if parsed.is_local and parsed.scheme != LOCAL_SCHEME:  # `<name>+<path>`: its path part
        return f"{parsed.scheme}+{normalize_remote(parsed.path, cwd)}"
    path = parsed.path if parsed.is_local else remote
    return str((cwd / Path(path).expanduser()).resolve())


def check_token_rules(remote: str, token: str | None, *, always: bool = False) -> None:
    """§2.1: a token is required for network hosts (loopback exempt, unless the provider says
    `token_always_required`), never for a local path, and never inside the URL (it would land in
    the config file and in error messages)."""
    if token:
        check_token_text(token)
    if always and not token:
        raise UsageError(
            f"a {remote.split('+', 1)[0]} pool always needs a token, on loopback too",
            hint=f"run `chapters link {remote} <token>`",
        )
    parsed = parse_remote(remote)
    if not parsed.url:
        if token:
            raise UsageError(
                "a local-path pool takes no token",
                hint="run `chapters link <path>` without a token",
            )
        return
    if parsed.has_credentials:
        raise UsageError(
            "the pool URL carries credentials; they would be stored in plain text",
            hint="pass the URL without `user:token@`, and the token on stdin or in "
                 "DSH_CHAPTERS_TOKEN",
        )
    host = parsed.host
    if not host:
        raise UsageError(
            f"the pool URL {remote!r} has no host", hint="pass https://host/org/repo.git"
        )
    if not token and not is_loopback_host(host):
        raise UsageError(
            f"{host} is a network host: a pool there needs a token",
            hint="run `chapters link <https-url> < token-file` (loopback hosts need none)",
        )
    if parsed.url_scheme == "http" and not is_loopback_host(host):
        raise UsageError(
            f"http:// to {host} would send the token in clear text", hint="use an https:// URL"
        )


def check_token_text(token: str) -> None:
    """A token is one word of printable characters: whitespace or a control character means
    a paste gone wrong (a newline, a second word) and would be sent as is to the pool. Refused
    with its position and length, never its text (§2.1: a token is never echoed)."""
    for at, ch in enumerate(token):
        if ch.isspace() or ord(ch) < 32 or 0x7F <= ord(ch) < 0xA0:
            kind = "whitespace" if ch.isspace() else "a control character"
            raise UsageError(
                f"the token holds {kind} at character {at + 1} of {len(token)}; nothing was "
                "linked", hint="pass the token alone, one line with no spaces (from "
                "DSH_CHAPTERS_TOKEN or stdin: `chapters link <url> < token-file`)")


# ---------------------------------------------------------------------------------------------
# Providers and sync


def choose_factory(app: App, remote: str | None = None) -> ProviderFactory:
    target = remote if remote is not None else app.config.knowledge_remote
    try:
        return select_provider(app.provider_factories, target, app.config.knowledge_provider)
    except UsageError:
        from dsh_chapters.plugins import missing_provider_error  # only on the refusal path

        missing = missing_provider_error(target, app.provider_factories)
        if missing is not None:
            raise missing from None
        raise


def open_provider(app: App, remote: str | None = None) -> KnowledgeProvider:
    target = app.config.knowledge_remote if remote is None else remote
    factory = choose_factory(app, target)
    context = ProviderContext(
        remote=target,
        workspace=str(app.workspace),
        mirror_root=str(Path(app.mirror_tree.root)),
        project_key=app.identity.project_key,
        harness_id=app.harness_id,
        config=app.config,
        credentials=app.credentials,
        credential_name=app.identity.project_key,
    )
    return factory.create(context)


def _hint_gitignore(app: App) -> tuple[str, ...]:
    """§3.1: the first sync adds the mirror to the project's `.gitignore`, once (and the
    `.dsh-knowledge.stale-*`/`.tmp-*` siblings a provider may leave). Returns what it added."""
    if app.store_tree.exists(GITIGNORE_STATE):
        return ()
    path = app.workspace / ".gitignore"
    text = path.read_text(encoding="utf-8") if path.is_file() else ""
    present = {line.strip().lstrip("/").rstrip("/") for line in text.splitlines()}
    added = tuple(e for e in GITIGNORE_ENTRIES if e.rstrip("/") not in present)
    if added:
        sep = "" if not text or text.endswith("\n") else "\n"
        path.write_text(text + sep + "".join(f"{e}\n" for e in added), encoding="utf-8")
    record = {"entries": list(GITIGNORE_ENTRIES), "added": list(added)}
    app.store_tree.write(GITIGNORE_STATE, json.dumps(record, sort_keys=True).encode() + b"\n")
    return added


def _scrub(report: SyncReport, token: str | None) -> SyncReport:
    """Defence in depth: providers never put a token in a message; if one did, it stops here."""
    if not token or token not in json.dumps(report.to_json()):
        return report
    data = report.to_json()
    data.pop("line", None)
    cleaned = json.loads(json.dumps(data).replace(token, "[token]"))
    return SyncReport.from_json(cleaned)


def run_sync(app: App, mode: str | SyncMode = SyncMode.FULL) -> SyncReport:
    """One sync of the linked pool. Refuses (ChaptersError) only when nothing is linked or the
    provider policy contradicts the remote; transport failures come back as local-only."""
    provider = open_provider(app)
    try:
        _hint_gitignore(app)
        report = sync(
            store_tree=app.store_tree,
            provider=provider,
            mirror_tree=app.mirror_tree,
            lock=app.lock,
            clock=app.clock,
            config=app.config,
            identity=app.identity,
            harness_id=app.harness_id,
            mode=mode,
            derive=_derive_index(app),
            check=_document_check(app),
        )
    finally:
        provider.close()
    if report.copied_in_new or report.copied_in_changed or report.pulled:
        # Search's freshness rule: the copy-in wrote documents, so both doors are brought
        # current here, once, and the next query walks nothing.
        search.bring_current(app)
    return _scrub(report, app.credentials.read(app.identity.project_key))


def _document_check(app: App) -> Callable[[str, bytes], str]:
    return app.factories.document_check(app.config)


def _derive_index(app: App) -> Callable[[], Mapping[str, bytes]] | None:
    """§10.2: the mirror door's derived index (shards, manifest, vocabulary), refreshed from
    the mirror as sync leaves it, for sync to stage into the pool commit."""

    def published(path: str) -> str:
        # The mirror is clean when sync derives (a dirty one was set aside at open), so its
        # file is what the pool holds.
        try:
            return app.mirror_tree.digest(path)
        except (ChaptersError, OSError):
            return ""

    def derive() -> Mapping[str, bytes]:
        service = app.open_search()
        try:
            door = service.door(DoorName.MIRROR)
            if door is None:
                return {}
            # A lost derived dir with kept change tokens would yield a partial index: rebuild.
            service.refresh(door, rebuild=not door.tree.exists(MANIFEST_PATH))
            return derived_files(door, held=published)
        finally:
            service.close()

    return derive


@dataclass(frozen=True, slots=True)
class SyncRefused:
    """A sync point that could not run at all (no provider for the remote, lock timeout)."""

    message: str
    hint: str = ""


def is_linked(app: App) -> bool:
    return bool(app.config.knowledge_remote)


def before_archive(app: App) -> SyncReport | SyncRefused | None:
    """§5.1: pull before an archive point, best effort (None when no pool is linked)."""
    if not is_linked(app):
        return None
    try:
        return run_sync(app, SyncMode.PULL)
    except ChaptersError as exc:
        return SyncRefused(exc.message, hint_text(exc))


SyncPointOutcome = SyncReport | PushDecision | SyncRefused | None


def after_archive(app: App) -> SyncPointOutcome:
    """§5.1: the debounced push after an archive. Never raises: the archive already succeeded
    and stays so (§5.3). None when no pool is linked."""
    if not is_linked(app):
        return None
    try:
        outcome = push_after_archive(
            store_tree=app.store_tree,
            lock=app.lock,
            clock=app.clock,
            config=app.config,
            run_push=lambda: run_sync(app, SyncMode.PUSH),
        )
    except ChaptersError as exc:
        return SyncRefused(exc.message, hint_text(exc))
    # §6.2: a completed push is an enrichment trigger; the drain runs detached, never here.
    _after_push(app, outcome)
    return outcome


def _after_push(app: App, outcome: SyncReport | PushDecision) -> None:
    enrich.after_push(app, outcome)


def describe_sync_point(outcome: SyncReport | PushDecision | SyncRefused | None) -> str:
    """One line for an archive command's output ("" when no pool is linked)."""
    if outcome is None:
        return ""
    if isinstance(outcome, PushDecision):
        return (
            f"pool       push deferred until {outcome.due_at} (syncDebounceMs); "
            "`chapters sync` pushes now"
        )
    if isinstance(outcome, SyncRefused):
        hint = f" (next: {outcome.hint})" if outcome.hint else ""
        return f"pool       not synced: {outcome.message}{hint}"
    return f"pool       {outcome.line()}"


def sync_point_json(
    outcome: SyncReport | PushDecision | SyncRefused | None,
) -> dict[str, Any] | None:
    """The same, for `--json` output."""
    if outcome is None:
        return None
    if isinstance(outcome, PushDecision):
        return {"deferred": True, "dueAt": outcome.due_at, "reason": outcome.reason}
    if isinstance(outcome, SyncRefused):
        return {"refused": outcome.message, "hint": outcome.hint}
    return outcome.to_json()


# ---------------------------------------------------------------------------------------------
# Link (§2.1)


@dataclass(frozen=True, slots=True)
class LinkResult:
    """What `chapters link` did: the remote and its provider, the projectKey, the config file
    written, and what it replaced."""

    remote: str
    provider: str
    project_key: str
    config_file: str
    token_stored: bool
    previous: str = ""  # the remote this replaced ("" if none or the same)
    mirror_removed: bool = False

    def to_json(self) -> dict[str, Any]:
        from dsh_chapters.wire import to_json  # only `--json` pays for the converter

        return to_json(self)


def link_pool(
    app: App, store_root: Path, remote: str, token: str | None, cwd: Path
) -> LinkResult:
    """Bind the project to a pool: a local path, or a network URL with its token.

    The token goes to the credential store (`<DSH_HOME>/dsh-chapters/credentials/<projectKey>`,
    0600) and nowhere else. Re-linking to another pool drops the old mirror (it is transport,
    §3.1) and the old sync state, so nothing of one pool is ever pushed into another."""
    target = normalize_remote(remote.strip(), cwd)
    factory = choose_factory(app, target)
    # Optional provider declarations (ports/transport.py): TreeDX wants a token even on
    # loopback, and resolves or creates its managed repository at link time (the explicit
    # human act, record §2.1 mode 4) rather than at the first sync.
    check_token_rules(target, token, always=bool(getattr(factory, "token_always_required", False)))
    key = app.identity.project_key
    if token:
        app.credentials.write(key, token)
    else:
        app.credentials.delete(key)  # a token for another pool must never reach this one
    previous = app.config.knowledge_remote
    removed = False
    if previous and previous != target:
        mirror = Path(app.mirror_tree.root)
        if mirror.is_dir():
            shutil.rmtree(mirror)
            removed = True
        app.store_tree.write(STATE_PATH, SyncState().to_bytes())
    if getattr(factory, "link_resolves_pool", False):
        _resolve_pool_at_link(app, target)
    config_file = app.factories.write_project_setting(store_root, "knowledgeRemote", target)
    return LinkResult(
        remote=target,
        provider=factory.name,
        project_key=key,
        config_file=str(config_file),
        token_stored=bool(token),
        previous=previous if previous != target else "",
        mirror_removed=removed,
    )


def _resolve_pool_at_link(app: App, target: str) -> None:
    """Open the pool once so a bad token or a missing service fails the link, not a later sync.
    On failure the stored token is removed and the config is left as it was."""
    provider = open_provider(app, target)
    try:
        with app.lock.hold(app.config.lock_timeout_ms / 1000):  # §5.2: the mirror is written
            provider.open()
    except TransportError as exc:
        app.credentials.delete(app.identity.project_key)
        raise ChaptersError(
            f"link refused: {exc.code.value} ({exc.message}); nothing was linked",
            hint=exc.hint
            or f"check the URL and the token, then run `chapters link {target} <token>`",
        ) from None
    finally:
        provider.close()


# ---------------------------------------------------------------------------------------------
# Status


@dataclass(frozen=True, slots=True)
class PoolStatus:
    """The pool as `chapters status` reports it: remote, provider, projectKey, mirror, pending files
    and the last sync."""

    remote: str
    provider: str
    project_key: str
    derivation: str
    canonical: str
    mirror: str
    mirror_present: bool
    harness_id: str
    pending: int
    state: SyncState
    refusal: str = ""  # why no provider can serve the remote, if so

    def to_json(self) -> dict[str, Any]:
        report = self.state.report
        return {
            "remote": self.remote,
            "provider": self.provider,
            "projectKey": self.project_key,
            "derivation": self.derivation,
            "canonical": self.canonical,
            "mirror": self.mirror,
            "mirrorPresent": self.mirror_present,
            "harnessId": self.harness_id,
            "pending": self.pending,
            "lastSync": report.to_json() if report else None,
            "pushDueAt": self.state.push_due_at,
            "localOnly": bool(report and report.local_only),
            "refusal": self.refusal,
        }

    def lines(self) -> Iterator[str]:
        yield from iter_pool_lines(self.state.report, self.pending, self.state,
                                   sync_now=SYNC_NOW)


def pool_status(app: App) -> PoolStatus:
    state = read_sync_state(app.store_tree)
    pending = len(
        pending_paths(
            app.store_tree,
            app.mirror_tree,
            app.identity.project_key,
            app.harness_id,
            state.unpushed,
        )
    )
    provider, refusal = "", ""
    if app.config.knowledge_remote:
        try:
            provider = choose_factory(app).name
        except ChaptersError as exc:
            refusal = exc.message
    mirror = Path(app.mirror_tree.root)
    return PoolStatus(
        remote=app.config.knowledge_remote,
        provider=provider,
        project_key=app.identity.project_key,
        derivation=app.identity.derivation,
        canonical=app.identity.canonical,
        mirror=str(mirror),
        mirror_present=mirror.is_dir(),
        harness_id=app.harness_id,
        pending=pending,
        state=state,
        refusal=refusal,
    )


def status_lines(app: App, status: PoolStatus) -> list[str]:
    """The pool lines of `chapters status` (the archive family's command prints them), from
    the caller's `pool_status`: counting what is pending reads the whole store."""
    if not status.remote:
        return [
            f"pool       none: this archive is on this machine only ({status.pending} file(s) "
            "to share); `chapters link <path>` shares it"
        ]
    lines = [
        f"pool       {status.remote} ({status.provider or 'no provider'}) · "
        f"mirror {display_path(status.mirror, app.workspace)}"
        + ("" if status.mirror_present else " (not yet cloned)")
    ]
    if status.refusal:
        lines.append(f"           refused: {status.refusal}")
    lines.extend(status.lines())
    report = status.state.report
    if report is not None and report.local_only:
        lines.append(
            "           next: " + NEXT_STEP.get(report.failure_code, "run `chapters sync`")
        )
    return lines
