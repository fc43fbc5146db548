"""The TreeDX provider: the six transport verbs over TreeDX's no-clone HTTP API.

Amendment 2026-09-21: the mirror is a provider-materialized plain directory, not a clone
(§3.1 holds: the store is the truth, the mirror is transport). The verbs map as follows:

- `open`: with a state file of this origin, nothing to do; otherwise resolve-or-create the
  managed repository (`POST /repos`, idempotent) and materialize the pool's files.
- `pull`: read the head (`paths/list` limit 1). Unchanged: done, one request. Moved: walk
  `paths/list` page by page (restart if `resolvedRef` changes between pages) and fetch, in
  batches, only files whose git blob id differs from the mirror's bytes. Fast-forward only:
  with local changes waiting, a moved head is `DIVERGED` (§5.2).
- `stage`/`commit`: local only. Files over 1 MiB or not UTF-8 are refused with their size.
- `push`: open a writable workspace (the lease), compare its `baseCommitSha` with the head
  last pulled (the server does not compare-and-swap at commit, CONTRACT.md), PUT, commit.
- `rebuild`: forget local changes and re-materialize the pool's head (§5.2: never merge).

Heads are reported as the port defines them: "" for an empty pool. A new TreeDX repository
is never commit-less (its first commit adds `.treedxkeep`), so while the pool holds no pool
file the reported head is "" and the real sha stays in the state file, where pushes use it.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import logging
import re
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

import attrs
import httpx
from dsh_chapters_core.errors import ChaptersError, FailureCode, TransportError
from dsh_chapters_core.ports.transport import (
    HealthFinding,
    MirrorState,
    ProviderContext,
    PullResult,
    PushResult,
    StageResult,
)

from dsh_chapters_treedx.client import CallError, TreeDXClient

# The entry point moved to factory.py; still importable from here, where it was.
from dsh_chapters_treedx.factory import TreeDXProviderFactory as TreeDXProviderFactory
from dsh_chapters_treedx.mirror import (
    STATE_FILE,
    git_blob_id,
    has_entries,
    is_bookkeeping,
    is_pool_path,
    list_files,
    move_aside,
    read_file,
    remove_file,
    unsafe_element,
    write_file,
)
from dsh_chapters_treedx.remote import REPOSITORY_NAME, TreeDXRemote, parse_remote
from dsh_chapters_treedx.state import (
    Lease,
    Offline,
    Pending,
    StateUnreadable,
    TreeDXState,
    load_state,
    save_state,
)
from dsh_chapters_treedx.wire import (
    Author,
    CommitRequest,
    ListPathsRequest,
    OpenWorkspaceRequest,
    PathEntry,
    ReadFilesRequest,
    Workspace,
)

log = logging.getLogger("dsh_chapters_treedx")

BRANCH = "refs/heads/main"
FILE_LIMIT_BYTES = 1 << 20  # CONTRACT.md: the server answers 413 over 1 MiB
_LEASE_TAKEN = "conflict"  # CONTRACT.md: 409 conflict, "writable lease already exists"
_NO_CHANGES = "validation_error"  # CONTRACT.md: 422 on a commit with no changes
_AUTHOR_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
_NETWORK_VERBS = ("open", "pull", "push", "rebuild")


class _HeadMoved(Exception):
    """The pool head moved while we were reading it: restart the listing."""


class TreeDXProvider:
    """Satisfies `KnowledgeProvider`. One instance per sync; `close()` ends its HTTP client."""

    name = "treedx"

    def __init__(
        self,
        context: ProviderContext,
        *,
        sleep: Callable[[float], None] = time.sleep,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        remote = parse_remote(context.remote)
        if remote is None:
            raise TransportError(
                FailureCode.REFUSED,
                "the remote is not a treedx+http(s)://host[:port]/<repo> remote",
                hint="link a TreeDX pool as `chapters link treedx+https://host/repo TOKEN`",
            )
        self.mirror_root = context.mirror_root
        self.last_refused: tuple[tuple[str, int], ...] = ()  # 413s met by the last push
        self._context = context
        self._config = context.config
        self._remote: TreeDXRemote = remote
        self._root = Path(context.mirror_root)
        self._sleep = sleep
        self._transport = transport
        self._client: TreeDXClient | None = None
        self._state: TreeDXState | None = None
        self._damaged = False  # the mirror's files are not the state's: the next pull walks

    @property
    def requests(self) -> int:
        """HTTP round trips made by this provider so far (for request-count tests)."""
        return 0 if self._client is None else self._client.requests

    # --- the six verbs ---------------------------------------------------------------------

    def open(self) -> MirrorState:
        with self._guard("open"):
            self._check_remote()
            state = self._load_own_state()
            if state is not None:
                self._state = state
                # A file removed or added by hand: a directory walk, no hashing. The next
                # pull re-walks the pool and repairs only what differs (the mirror is
                # transport, §3.1; no request is spent here).
                expected = set(state.baseline) | _waiting(state)
                self._damaged = set(list_files(self._root)) != expected
                return MirrorState(root=self.mirror_root, head=_pool_head(state),
                                   unsafe_paths=state.unsafe)
            moved = str(move_aside(self._root)) if has_entries(self._root) else ""
            self._materialize()
            state = self._require_state()
            return MirrorState(root=self.mirror_root, head=_pool_head(state), cloned=True,
                               moved_aside=moved, unsafe_paths=state.unsafe)

    def pull(self) -> PullResult:
        with self._guard("pull"):
            state = self._require_state()
            before = _pool_head(state)
            start = self.requests
            head = self._read_head()
            if head == state.head and not self._damaged:
                return PullResult(before, before, (), requests=self.requests - start)
            if head != state.head and not state.staged.empty:
                waiting = len(state.staged.paths) + len(state.staged.committed)
                raise TransportError(
                    FailureCode.DIVERGED,
                    f"the pool moved from {_short(state.head)} to {_short(head)} while {waiting} "
                    "local changes wait to be pushed",
                    hint="the sync rebuilds the mirror from the store and publishes again (§5.2)",
                )
            _head, changed = self._follow_remote(state)
            state = self._require_state()
            return PullResult(before, _pool_head(state), changed, requests=self.requests - start,
                              unsafe_paths=state.unsafe)

    def stage(self, files: Mapping[str, bytes]) -> StageResult:
        with self._guard("stage"):
            state = self._require_state()
            new = changed = unchanged = 0
            refused: list[tuple[str, int]] = []
            staged = set(state.staged.paths)
            for path in sorted(files):
                data = files[path]
                if not is_pool_path(path) or len(data) > FILE_LIMIT_BYTES or not _is_utf8(data):
                    refused.append((path, len(data)))
                    continue
                local = read_file(self._root, path)
                if local == data:
                    unchanged += 1
                    continue
                write_file(self._root, path, data)
                staged.add(path)
                if local is None:
                    new += 1
                else:
                    changed += 1
            for path, size in refused:
                log.warning("treedx: refused %s (%d bytes; limit %d, UTF-8 only)", path, size,
                            FILE_LIMIT_BYTES)
            pending = attrs.evolve(state.staged, paths=tuple(sorted(staged)))
            self._save(attrs.evolve(state, staged=pending))
            return StageResult(new=new, changed=changed, unchanged=unchanged,
                               refused=tuple(refused))

    def commit(self, message: str, author: str) -> str | None:
        with self._guard("commit"):
            state = self._require_state()
            pending = state.staged
            if not pending.paths:
                return None
            committed = tuple(sorted(set(pending.committed) | set(pending.paths)))
            listing = "\n".join(
                f"{path} {git_blob_id(read_file(self._root, path) or b'')}" for path in committed
            )
            # There is no local commit object in TreeDX mode: the id names the change set.
            changeset = hashlib.sha1(f"{state.head}\n{listing}".encode(),
                                     usedforsecurity=False).hexdigest()
            joined = f"{pending.message}\n\n{message}" if pending.committed else message
            self._save(attrs.evolve(state, staged=Pending(
                paths=(), committed=committed, message=joined, author=author)))
            return changeset

    def push(self) -> PushResult:
        with self._guard("push"):
            state = self._require_state()
            self.last_refused = ()
            if not state.staged.committed:
                return PushResult(head=_pool_head(state), pushed=False)
            workspace = self._take_lease()
            # Recorded before the first write: a push killed while it holds the lease leaves
            # this, and `chapters doctor --repair` closes that workspace (CONTRACT.md: a
            # crashed writer otherwise blocks the branch until its TTL runs out).
            self._save(attrs.evolve(state, lease=Lease(workspace.workspace_id,
                                                       workspace.expires_at or "")))
            released = False
            try:
                if workspace.base_commit_sha != state.head:
                    # CONTRACT.md: commit does not compare-and-swap, so this check is ours.
                    # Never write over a head we have not seen (§5.2: rebuild, never merge).
                    raise TransportError(
                        FailureCode.DIVERGED,
                        f"the pool moved: the workspace opened at "
                        f"{_short(workspace.base_commit_sha)} but the head last pulled is "
                        f"{_short(state.head)}",
                        hint="the sync rebuilds the mirror from the store and publishes again "
                             "(§5.2)",
                    )
                written = self._write_files(workspace, state.staged.committed)
                head = state.head
                if written:
                    head = self._commit_workspace(workspace, state)
                    released = head != state.head
                baseline = dict(state.baseline)
                baseline.update(written)
                self._save(attrs.evolve(state, head=head, baseline=baseline,
                                        staged=Pending(paths=state.staged.paths),
                                        lease=None if released else self._require_state().lease))
                return PushResult(head=_pool_head(self._require_state()),
                                  pushed=head != state.head)
            finally:
                if not released and self._release(workspace):
                    self._save(attrs.evolve(self._require_state(), lease=None))

    def rebuild(self) -> MirrorState:
        with self._guard("rebuild"):
            self._check_remote()
            state = self._load_own_state()
            moved = ""
            if state is None:
                if has_entries(self._root):
                    moved = str(move_aside(self._root))
                self._materialize()
            else:
                # Forget local changes first: if the network fails now, the next pull
                # re-walks the pool (head "") and the sync re-publishes from the store.
                state = attrs.evolve(state, head="", staged=Pending())
                self._save(state)
                self._follow_remote(state)
            state = self._require_state()
            return MirrorState(root=self.mirror_root, head=_pool_head(state), cloned=True,
                               moved_aside=moved, unsafe_paths=state.unsafe)

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    # --- doctor (ports.transport.ProviderDoctor) -------------------------------------------

    def diagnose(self) -> tuple[HealthFinding, ...]:
        """The mirror and its state file (local), then what only the service knows, in at most
        three bounded requests (treedxFetchTimeoutMs each): is it reachable, does it take the
        token, and is a lease this mirror's killed push left still held (CONTRACT.md)."""
        found: list[HealthFinding] = []
        state_path = str(self._root / STATE_FILE)
        state: TreeDXState | None = None
        try:
            state = load_state(self._root)
        except StateUnreadable as exc:
            found.append(HealthFinding(
                "mirror-unusable", state_path, f"the state file does not read ({exc})",
                "move the mirror aside and materialize it from the pool (§5.2)"))
        if state is not None and (state.origin != self._remote.origin or not state.repo_id):
            found.append(HealthFinding(
                "mirror-unusable", state_path, "the mirror belongs to another pool "
                f"({state.origin[:120]})",
                "move the mirror aside and materialize it from the pool (§5.2)"))
            state = None
        if state is not None:
            try:
                found += self._mirror_health(state)
            except OSError as exc:  # a directory where a file belongs, a permission
                found.append(HealthFinding(
                    "mirror-unusable", self.mirror_root,
                    f"the mirror does not read ({type(exc).__name__}, errno {exc.errno})",
                    "move the mirror aside and materialize it from the pool (§5.2)"))
            for path in state.unsafe:
                found.append(HealthFinding("pool-unsafe-path", path, "an unsafe path element "
                                           "in the pool; never materialized", ""))
        found += self._service_health(state)
        return tuple(found)

    def _mirror_health(self, state: TreeDXState) -> list[HealthFinding]:
        waiting = _waiting(state)
        missing = differ = 0
        for path, object_id in state.baseline.items():
            if path in waiting:
                continue
            data = read_file(self._root, path)
            if data is None:
                missing += 1
            elif git_blob_id(data) != object_id:
                differ += 1
        extra = sum(1 for p in list_files(self._root) if p not in state.baseline
                    and p not in waiting)
        lost = sum(1 for p in waiting if read_file(self._root, p) is None)
        if not (missing or differ or extra or lost):
            return []
        return [HealthFinding(
            "mirror-corrupt", self.mirror_root,
            f"{missing} file(s) missing, {differ} changed, {extra} extra against pool head "
            f"{_short(state.head)} ({len(state.baseline)} files); {lost} of {len(waiting)} "
            "waiting to be pushed lost",
            "re-read the pool's files into the mirror (§5.2: the mirror is transport; the next "
            "sync publishes from the store again)")]

    def _service_health(self, state: TreeDXState | None) -> list[HealthFinding]:
        origin = self._remote.origin
        try:
            api = self._api()
        except TransportError as exc:
            return [HealthFinding("pool-token-missing", origin, exc.message, "")]
        try:
            api.health()
        except (CallError, TransportError) as exc:
            code = exc.code.value if isinstance(exc, TransportError) else f"HTTP {exc.status}"
            return [HealthFinding(
                "pool-unreachable", origin,
                f"GET /health failed ({code}) within {self._config.treedx_fetch_timeout_ms} ms; "
                "syncs stay local-only until it answers", "")]
        if state is None:
            return []
        try:
            api.list_paths(state.repo_id, ListPathsRequest(ref=BRANCH, limit=1))
        except CallError as exc:
            failure = self._failure(exc, "doctor")
            code = "pool-token-rejected" if failure.code is FailureCode.AUTH else (
                "pool-not-found" if failure.code is FailureCode.NOT_FOUND else
                "pool-unreachable")
            return [HealthFinding(code, origin, f"{failure.message}; next: {failure.hint}", "")]
        except TransportError as exc:
            return [HealthFinding("pool-unreachable", origin,
                                  f"{exc.message} ({exc.code.value})", "")]
        if state.lease is None:
            return []
        lease = state.lease
        try:
            workspace = api.get_workspace(lease.workspace_id)
        except (CallError, TransportError):
            return []  # gone, expired or ended: the record is stale, the next push drops it
        if workspace.status != "ready":
            return []
        until = workspace.expires_at or lease.expires_at or "its TTL"
        return [HealthFinding(
            "pool-lease-held", lease.workspace_id,
            f"a push from this machine that did not finish left workspace {lease.workspace_id} "
            f"holding the pool's writable lease (until {until}, ttl "
            f"{self._config.treedx_workspace_ttl_seconds} s); every machine's push waits for it",
            "close that workspace: the lease ends now, nothing is committed")]

    def repair(self, finding: HealthFinding) -> str:
        if finding.code in ("mirror-unusable", "mirror-corrupt"):
            moved = ""
            if finding.code == "mirror-corrupt":
                self.rebuild()  # re-reads only what differs, drops what the pool lacks
            else:
                with self._guard("rebuild"):
                    self._state = None
                    moved = str(move_aside(self._root)) if has_entries(self._root) else ""
                    self._materialize()
            return "re-read the mirror from the pool" + (
                f" (the old one is at {moved})" if moved else "")
        if finding.code == "pool-lease-held":
            state = self._load_own_state()
            if state is None or state.lease is None or \
                    state.lease.workspace_id != finding.path:
                return "left alone: the push that held it has finished"
            try:
                self._api().close_workspace(state.lease.workspace_id)
            except CallError as exc:
                if exc.status not in (404, 409):
                    raise self._failure(exc, "doctor") from None
            self._save(attrs.evolve(state, lease=None))
            return f"closed workspace {finding.path}: the pool's writable lease is free"
        return ""

    # --- read side -------------------------------------------------------------------------

    def _materialize(self) -> None:
        repo = self._api().create_repository(self._remote.repository, BRANCH)
        self._root.mkdir(parents=True, exist_ok=True)
        state = TreeDXState(origin=self._remote.origin, repo_id=repo.repo_id)
        self._save(state)
        self._follow_remote(state)

    def _read_head(self) -> str:
        """CONTRACT.md: every query carries `resolvedRef`; refs misses packed refs."""
        state = self._require_state()
        page = self._api().list_paths(state.repo_id, ListPathsRequest(ref=BRANCH, limit=1))
        return page.resolved_ref

    def _follow_remote(self, state: TreeDXState) -> tuple[str, tuple[str, ...]]:
        """Make the mirror the pool's head; returns the head and the paths that changed."""
        attempts = self._config.sync_rebuild_retries + 1
        for _attempt in range(attempts):
            try:
                return self._apply_listing(state)
            except _HeadMoved:
                log.info("treedx: the pool head moved during a listing; restarting")
        raise TransportError(
            FailureCode.TIMEOUT,
            f"the pool head moved during each of {attempts} listings of {self._remote.origin}",
            hint="the pool is busy; the sync stays local-only and retries next time",
        )

    def _apply_listing(self, state: TreeDXState) -> tuple[str, tuple[str, ...]]:
        head, entries = self._walk(state.repo_id)
        remote: dict[str, str] = {}
        unsafe: set[str] = set()
        for entry in entries:
            if entry.kind != "blob" or is_bookkeeping(entry.path):
                continue
            bad = unsafe_element(entry.path)
            if bad is None:
                remote[entry.path] = entry.object_id
            else:
                # never materialized; reported so copy-in quarantines it and the sync goes on
                # (an overlong name would otherwise fail every pull with ENAMETOOLONG)
                unsafe.add(bad)
        keep = _waiting(state)  # files waiting to be pushed stay as staged
        wanted = []
        for path, object_id in sorted(remote.items()):
            if path in keep:
                continue
            local = read_file(self._root, path)
            if local is None or git_blob_id(local) != object_id:
                wanted.append(path)
        batch = self._config.treedx_read_batch
        for start in range(0, len(wanted), batch):
            self._fetch(state.repo_id, wanted[start : start + batch], remote)
        gone = [path for path in list_files(self._root) if path not in remote and path not in keep]
        for path in gone:
            remove_file(self._root, path)
        self._save(attrs.evolve(state, head=head, baseline=remote,
                                unsafe=tuple(sorted(unsafe))))
        self._damaged = False
        return head, tuple(sorted(wanted + gone))

    def _walk(self, repo_id: str) -> tuple[str, list[PathEntry]]:
        """Every blob at the head, page by page; `_HeadMoved` if the head moves between pages."""
        resolved: str | None = None
        cursor: str | None = None
        seen_cursors: set[str] = set()
        entries: list[PathEntry] = []
        while True:
            request = ListPathsRequest(ref=BRANCH, limit=self._config.treedx_page_size,
                                       cursor=cursor)
            page = self._api().list_paths(repo_id, request)
            if resolved is None:
                resolved = page.resolved_ref
            elif page.resolved_ref != resolved:
                raise _HeadMoved  # CONTRACT.md: offset cursors; a moved head shifts them
            entries.extend(page.entries)
            if not page.page.has_more:
                return resolved, entries
            cursor = page.page.next_cursor
            if not cursor or cursor in seen_cursors:
                raise TransportError(
                    FailureCode.CORRUPT,
                    f"TreeDX paged {len(entries)} paths with hasMore but no new cursor",
                    hint="report this server; the sync stays local-only meanwhile",
                )
            seen_cursors.add(cursor)

    def _fetch(self, repo_id: str, paths: Sequence[str], remote: Mapping[str, str]) -> None:
        """One batched read; non-UTF-8 files make the server answer 415, so re-read as base64."""
        api = self._api()
        try:
            try:
                batch = api.read_files(repo_id, ReadFilesRequest(ref=BRANCH, paths=tuple(paths)))
            except CallError as exc:
                if exc.status != 415:
                    raise
                batch = api.read_files(
                    repo_id, ReadFilesRequest(ref=BRANCH, paths=tuple(paths), encoding="base64"))
        except CallError as exc:
            if exc.status == 404:
                raise _HeadMoved from None  # a listed path is gone: the head moved since
            raise
        got: set[str] = set()
        for file in batch.files:
            expected = remote.get(file.path)
            if expected is None or file.path not in paths:
                raise TransportError(FailureCode.CORRUPT,
                                     f"TreeDX returned a path that was not asked for "
                                     f"({len(batch.files)} files for {len(paths)} paths)",
                                     hint="report this server; the sync stays local-only meanwhile")
            data = _decode(file.content, file.encoding, file.path)
            actual = git_blob_id(data)
            if actual != expected:
                if file.object_id and file.object_id == expected:
                    raise TransportError(
                        FailureCode.CORRUPT,
                        f"{file.path}: {len(data)} bytes whose blob id {_short(actual)} is not "
                        f"the listed {_short(expected)}",
                        hint="run `chapters sync` again; report the server if it persists")
                raise _HeadMoved
            write_file(self._root, file.path, data)
            got.add(file.path)
        if len(got) != len(set(paths)):
            raise TransportError(FailureCode.CORRUPT,
                                 f"TreeDX returned {len(got)} of {len(set(paths))} files asked for",
                                 hint="report this server; the sync stays local-only meanwhile")

    # --- write side ------------------------------------------------------------------------

    def _take_lease(self) -> Workspace:
        """One writable lease per (repo, branch): a 409 retries a bounded number of times."""
        state = self._require_state()
        request = OpenWorkspaceRequest(base_ref=BRANCH, branch_name=BRANCH,
                                       ttl_seconds=self._config.treedx_workspace_ttl_seconds)
        retries = self._config.treedx_lease_retries
        delay_ms = self._config.treedx_lease_retry_delay_ms
        for attempt in range(retries + 1):
            try:
                return self._api().open_workspace(state.repo_id, request)
            except CallError as exc:
                if exc.status != 409 or exc.error.code != _LEASE_TAKEN:
                    raise
                if attempt < retries:
                    log.info("treedx: lease taken; retry %d of %d in %d ms",
                             attempt + 1, retries, delay_ms)
                    self._sleep(delay_ms / 1000)
        # Another machine holds the lease: time ran out, nothing was refused (TIMEOUT, not
        # REFUSED). The store keeps everything; the next sync publishes it (§5.3).
        raise TransportError(
            FailureCode.TIMEOUT,
            f"the pool's writable lease stayed taken: {retries + 1} attempts, "
            f"{retries} waits of {delay_ms} ms",
            hint="another machine is publishing; the next sync retries (a crashed writer's "
                 f"lease lasts at most {self._config.treedx_workspace_ttl_seconds} s)",
        )

    def _write_files(self, workspace: Workspace, paths: Sequence[str]) -> dict[str, str]:
        """PUT each file; a 413 refuses that file (path and size) and the rest goes on."""
        written: dict[str, str] = {}
        refused: list[tuple[str, int]] = []
        for path in paths:
            data = read_file(self._root, path)
            if data is None:
                raise TransportError(
                    FailureCode.CORRUPT,
                    f"the mirror lost {path}, staged for publishing",
                    hint="the sync rebuilds the mirror from the store (`chapters sync`)",
                )
            try:
                self._api().write_file(workspace.workspace_id, path, data.decode("utf-8"))
            except CallError as exc:
                if exc.status != 413:
                    raise self._in_workspace(exc) from None
                refused.append((path, len(data)))
                log.warning("treedx: the server refused %s (%d bytes): too large", path, len(data))
                continue
            written[path] = git_blob_id(data)
        self.last_refused = tuple(refused)
        return written

    def _commit_workspace(self, workspace: Workspace, state: TreeDXState) -> str:
        """The new head, or the old one when the server found nothing to change."""
        pending = state.staged
        who = pending.author or self._context.harness_id or "dsh-chapters"
        email = f"{_AUTHOR_UNSAFE.sub('-', who).strip('-') or 'harness'}@dsh-chapters.invalid"
        message = pending.message or f"dsh-chapters: publish {len(pending.committed)} files"
        api = self._api()
        try:
            outcome = api.commit(workspace.workspace_id,
                                 CommitRequest(message=message, author=Author(who, email)))
        except CallError as exc:
            # CONTRACT.md: a commit with no changes gets 422 (the pool already holds these
            # bytes). Other validation failures share the code, so ask the workspace, not prose.
            if exc.status != 422 or exc.error.code != _NO_CHANGES:
                raise self._in_workspace(exc) from None
            if api.workspace_changes(workspace.workspace_id):
                raise
            return state.head

        return outcome.commit_sha

    def _in_workspace(self, exc: CallError) -> TransportError | CallError:
        """Inside our own workspace, a 409 `conflict` means the lease ended (TTL) under us."""
        if exc.status == 409 and exc.error.code == _LEASE_TAKEN:
            return TransportError(
                FailureCode.TIMEOUT,
                f"the writable workspace ended before the commit ({exc.route}, HTTP 409; "
                f"ttl {self._config.treedx_workspace_ttl_seconds} s)",
                hint="the next sync publishes again; raise treedxWorkspaceTtlSeconds if it recurs",
            )
        return exc

    def _release(self, workspace: Workspace) -> bool:
        """Best effort: a lease we cannot close ends at its TTL (CONTRACT.md). True when the
        server took the close, so the lease record can go."""
        if self._client is None:
            return False
        try:
            self._client.close_workspace(workspace.workspace_id)
        except (CallError, TransportError) as exc:
            log.info("treedx: could not close workspace (%s); its lease ends at the TTL",
                     type(exc).__name__)
            return False
        return True

    # --- state, credentials, failures --------------------------------------------------------

    def _check_remote(self) -> None:
        if self._remote.has_userinfo:
            raise TransportError(
                FailureCode.REFUSED,
                f"the remote {self._remote.origin} carries credentials in its URL",
                hint=f"link as `chapters link {self._remote.origin} TOKEN`; the token is stored "
                     "0600 and never written into a URL",
            )
        if REPOSITORY_NAME.match(self._remote.repository) is None:
            raise TransportError(
                FailureCode.REFUSED,
                f"{self._remote.repository[:140]!r} is not a TreeDX repository name "
                f"({len(self._remote.repository)} characters; allowed: {REPOSITORY_NAME.pattern})",
                hint="pick a name of lowercase letters, digits, '.', '_' and '-'",
            )

    def _load_own_state(self) -> TreeDXState | None:
        try:
            state = load_state(self._root)
        except StateUnreadable:
            return None
        if state is None or state.origin != self._remote.origin or not state.repo_id:
            return None
        return state

    def _require_state(self) -> TreeDXState:
        if self._state is None:
            self.open()
        assert self._state is not None
        return self._state

    def _save(self, state: TreeDXState) -> None:
        save_state(self._root, state)
        self._state = state

    def _api(self) -> TreeDXClient:
        if self._client is None:
            try:
                token = self._context.credentials.read(self._context.credential_name)
            except ChaptersError as exc:
                raise TransportError(FailureCode.AUTH, exc.message, hint=exc.hint) from None
            if not token:
                raise TransportError(
                    FailureCode.AUTH,
                    f"no token is stored for {self._remote.origin}",
                    hint=f"run `chapters link {self._remote.origin} TOKEN`",
                )
            self._client = TreeDXClient(
                self._remote.base_url, token, timeout_ms=self._config.treedx_fetch_timeout_ms,
                sleep=self._sleep, transport=self._transport,
            )
        return self._client

    @contextmanager
    def _guard(self, verb: str) -> Iterator[None]:
        """Every failure leaves as a `TransportError` with a code, recorded as `offline`."""
        start = self.requests
        try:
            yield
        except CallError as exc:
            failure = self._failure(exc, verb)
            self._mark_offline(failure.code)
            raise failure from None
        except TransportError as exc:
            self._mark_offline(exc.code)
            raise
        except OSError as exc:
            raise TransportError(
                FailureCode.CORRUPT,
                f"the mirror {self.mirror_root} failed during {verb} "
                f"({type(exc).__name__}, errno {exc.errno})",
                hint="check disk space and permissions; `chapters sync` rebuilds the mirror",
            ) from None
        if verb in _NETWORK_VERBS and self.requests > start:
            self._mark_offline(None)

    def _mark_offline(self, code: FailureCode | None) -> None:
        if self._state is None or code is FailureCode.DIVERGED:
            return
        stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        offline = None if code is None else Offline(code=code.value, at=stamp)
        current = self._state.offline
        if (current is None and offline is None) or (
                current is not None and offline is not None and current.code == offline.code):
            return
        try:
            self._save(attrs.evolve(self._state, offline=offline))
        except OSError:
            log.info("treedx: could not record the offline state")

    def _failure(self, exc: CallError, verb: str) -> TransportError:
        """An error envelope as a `FailureCode` (the status and the wire code, never prose)."""
        origin = self._remote.origin
        detail = f"HTTP {exc.status} {exc.error.code}"
        said = self._client.scrub(exc.error.message) if self._client else ""
        relink = f"run `chapters link {origin} TOKEN` again with a valid token"
        if exc.status == 401:
            return TransportError(
                FailureCode.AUTH,
                f"TreeDX rejected the token for {origin} during {verb} ({detail})",
                hint=relink,
            )
        if exc.status == 403:
            return TransportError(
                FailureCode.AUTH,
                f"the token for {origin} lacks a permission {verb} needs ({detail}: {said})",
                hint=relink + " that grants files:read, files:write, workspace:create, git:commit",
            )
        if exc.status == 404:
            return TransportError(
                FailureCode.NOT_FOUND,
                f"TreeDX found nothing for {exc.route} in {origin} ({detail})",
                hint="check the repository name; with the mirror `.dsh-knowledge/` removed, "
                     "`chapters sync` resolves (or re-creates) it",
            )
        if exc.status in (409, 413, 415, 422):
            return TransportError(FailureCode.REFUSED,
                                  f"TreeDX refused {exc.route} during {verb} ({detail}: {said})",
                                  hint="the store keeps everything; see docs/pool-treedx.md")
        return TransportError(
            FailureCode.NETWORK,
            f"TreeDX failed {exc.route} during {verb} ({detail})",
            hint="the sync stays local-only; `chapters sync` retries when the service recovers",
        )


def _decode(content: str, encoding: str, path: str) -> bytes:
    if encoding in ("utf8", "utf-8", ""):
        return content.encode("utf-8")
    if encoding == "base64":
        try:
            return base64.b64decode(content, validate=True)
        except binascii.Error:
            pass
    raise TransportError(FailureCode.CORRUPT,
                         f"{path}: content in encoding {encoding[:20]!r} could not be decoded",
                         hint="report this server; the sync stays local-only meanwhile")


def _is_utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _waiting(state: TreeDXState) -> set[str]:
    return set(state.staged.paths) | set(state.staged.committed)


def _pool_head(state: TreeDXState) -> str:
    """The head as the port reports it: "" while the pool holds no pool file."""
    return state.head if state.baseline else ""


def _short(sha: str) -> str:
    return sha[:12] if sha else "(empty)"
