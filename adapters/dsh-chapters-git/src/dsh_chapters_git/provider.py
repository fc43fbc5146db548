"""The git `KnowledgeProvider`: six verbs over dulwich, for local-path and smart-HTTP pools.

Head strings are 40-hex commit ids of the pool's `refs/heads/main` ("" for an empty pool).
Every verb runs under one `Deadline` (`syncTimeoutMs`) and raises only `TransportError` for
transport failures, chosen by exception type and status code (`failures.classify`).
"""

from __future__ import annotations

import glob
import os
import secrets
from collections.abc import Iterator, Mapping
from contextlib import contextmanager

from dsh_chapters_core.errors import FailureCode, TransportError
from dsh_chapters_core.ports.transport import (
    HealthFinding,
    HistoryFile,
    KnowledgeProvider,
    MirrorState,
    ProviderContext,
    PullResult,
    PushResult,
    StageResult,
)
from dsh_chapters_core.remote import parse_remote
from dulwich.repo import Repo

# The entry point lives in factory.py (loaded without this module); importable here too.
from dsh_chapters_git.factory import GitProviderFactory as GitProviderFactory
from dsh_chapters_git.failures import (
    BAD_GIT_DATA,
    Deadline,
    MirrorDamaged,
    PoolDamaged,
    classify,
    failure,
)
from dsh_chapters_git.history import is_ancestor
from dsh_chapters_git.history_scan import history_files
from dsh_chapters_git.mirror import Mirror, identity, move_aside, remove_tree
from dsh_chapters_git.packs import stale_temp_files, sweep_temp_files
from dsh_chapters_git.trees import UnsafePathError, check_path
from dsh_chapters_git.upstream import (
    HttpPool,
    LocalPool,
    Upstream,
    local_path,
    lock_holders,
    stale_lock_age_ms,
)


def _hex(sha: bytes | None) -> str:
    return sha.decode("ascii") if sha is not None else ""


def _tmp_pid(path: str) -> int:
    """The pid a `<mirror>.tmp-<pid>-<hex>` clone names (0 when it names none)."""
    tail = path.rsplit(".tmp-", 1)[-1].split("-", 1)[0]
    return int(tail) if tail.isdigit() else 0


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


class GitProvider:
    """A pool mirrored in `.dsh-knowledge/` (see `dsh_chapters_git.mirror`)."""

    name = "git"

    def __init__(self, context: ProviderContext, upstream: Upstream) -> None:
        self.mirror_root = os.path.abspath(context.mirror_root)
        self._context = context
        self._upstream = upstream
        self._timeout_ms = context.config.sync_timeout_ms
        self._loose_limit = context.config.git_unpack_limit
        self._mirror: Mirror | None = None

    # ---- plumbing --------------------------------------------------------------------
    @contextmanager
    def _call(self, verb: str) -> Iterator[Deadline]:
        """One verb under one budget; any failure leaves as a `TransportError` with a code."""
        deadline = Deadline(verb, self._timeout_ms)
        try:
            yield deadline
        except TransportError:
            raise
        except UnsafePathError:
            raise failure(verb, FailureCode.REFUSED, "the pool holds an unsafe path") from None
        except Exception as exc:
            if isinstance(exc, MirrorDamaged) and self._mirror is not None:
                # §5.2: the mirror is transport. Marked, the next open moves it aside and
                # clones again, as the failure's next step says (never a wedged mirror).
                self._mirror.mark_damaged(str(exc))
            mapped = classify(verb, exc, self._timeout_ms)
            if mapped is None:
                raise
            raise mapped from None

    def _state(
        self, mirror: Mirror, *, cloned: bool = False, created: bool = False, moved: str = ""
    ) -> MirrorState:
        return MirrorState(
            root=self.mirror_root,
            head=_hex(mirror.pool_head()),
            cloned=cloned,
            created_pool=created,
            moved_aside=moved,
            unsafe_paths=mirror.unsafe_paths(),
        )

    def _synced_before(self) -> bool:
        """Whether the mirror on disk ever saw pool history (then a missing pool is an error)."""
        if self._mirror is not None:
            return self._mirror.pool_head() is not None
        if not os.path.isdir(os.path.join(self.mirror_root, ".git")):
            return False
        probe = Mirror(self.mirror_root)
        try:
            return probe.remote() == self._upstream.display and probe.pool_head() is not None
        except Exception:  # an unreadable mirror proves nothing: treat it as new
            return False  # (a FIFO in .git is refused by type before dulwich opens it)
        finally:
            probe.close()

    def _open(self, deadline: Deadline) -> MirrorState:
        created = self._upstream.prepare(deadline, may_create=not self._synced_before())
        moved = ""
        if os.path.lexists(self.mirror_root):
            mirror = Mirror(self.mirror_root)
            if not mirror.problem(self._upstream.display):
                self._mirror = mirror
                return self._state(mirror, created=created)
            mirror.close()
            moved = move_aside(self.mirror_root)  # a dirty or corrupt mirror is kept for a look
        mirror = self._materialize(deadline)
        return self._state(mirror, cloned=True, created=created, moved=moved)

    def _materialize(self, deadline: Deadline) -> Mirror:
        """Clone into a temp sibling and rename it in: a reader never sees half a mirror."""
        for leftover in glob.glob(glob.escape(self.mirror_root) + ".tmp-*"):
            remove_tree(leftover)  # a crashed clone (the writer lock makes this safe)
        os.makedirs(os.path.dirname(self.mirror_root), exist_ok=True)
        temp = f"{self.mirror_root}.tmp-{os.getpid()}-{secrets.token_hex(4)}"
        fresh = Mirror.init(temp, self._upstream.display)
        try:
            head = self._upstream.clone_into(fresh, deadline)
            if head is not None:
                try:
                    fresh.materialize(head, deadline)
                except BAD_GIT_DATA as exc:
                    # a fresh copy of the pool: what it lacks, the pool lacks
                    raise PoolDamaged(f"its head {head[:12].decode()} names an object it does "
                                      f"not hold whole ({type(exc).__name__})") from exc
            fresh.close()
            if self._mirror is not None:
                self._mirror.close()
                self._mirror = None
            if os.path.lexists(self.mirror_root):
                trash = f"{self.mirror_root}.tmp-{os.getpid()}-{secrets.token_hex(4)}"
                os.rename(self.mirror_root, trash)
                os.rename(temp, self.mirror_root)
                remove_tree(trash)
            else:
                os.rename(temp, self.mirror_root)
        except BaseException:
            fresh.close()
            remove_tree(temp)
            raise
        self._mirror = Mirror(self.mirror_root)
        return self._mirror

    def _ready(self, deadline: Deadline) -> Mirror:
        if self._mirror is None:
            self._open(deadline)
        assert self._mirror is not None
        return self._mirror

    # ---- the six verbs ---------------------------------------------------------------
    def open(self) -> MirrorState:
        with self._call("open") as deadline:
            return self._open(deadline)

    def pull(self) -> PullResult:
        with self._call("pull") as deadline:
            mirror = self._ready(deadline)
            before = mirror.pool_head()
            local = mirror.head()
            requests_before = self._upstream.requests
            head = self._upstream.fetch_into(mirror, deadline)
            requests = self._upstream.requests - requests_before
            if head == before:
                return PullResult(_hex(before), _hex(before), (), requests)
            if head is not None and head == local:
                mirror.set_pool_head(head)  # our own push landed; only the bookmark lagged
                return PullResult(_hex(before), _hex(head), (), requests)
            store = mirror.repo.object_store
            with mirror.reads():
                rewritten = head is None or (
                    before is not None and not is_ancestor(store, before, head))
            if rewritten or head is None:
                raise failure("pull", FailureCode.DIVERGED, "the pool's history was rewritten")
            if local != before:
                raise failure(
                    "pull",
                    FailureCode.DIVERGED,
                    "the mirror has unpushed commits and the pool moved",
                )
            with mirror.reads():
                changed = mirror.fast_forward(before, head, deadline)
            return PullResult(_hex(before), _hex(head), changed, requests,
                              unsafe_paths=mirror.unsafe_paths())

    def stage(self, files: Mapping[str, bytes]) -> StageResult:
        for path in files:
            check_path(path)  # a bad path is the caller's bug: ValueError, not a transport code
        with self._call("stage") as deadline:
            return self._ready(deadline).stage(files)

    def commit(self, message: str, author: str) -> str | None:
        with self._call("commit") as deadline:
            mirror = self._ready(deadline)
            who = identity(author or self._context.harness_id)
            with mirror.reads():
                return mirror.commit(message, who, self._loose_limit)

    def push(self) -> PushResult:
        with self._call("push") as deadline:
            mirror = self._ready(deadline)
            local = mirror.head()
            before = mirror.pool_head()
            if local is None or local == before:
                return PushResult(head=_hex(before), pushed=False)
            with mirror.reads():  # the closure is read from the mirror
                pushed = self._upstream.push_from(mirror, local, before, deadline)
            mirror.set_pool_head(local)
            mirror.forget_fresh()
            return PushResult(head=_hex(local), pushed=pushed)

    def rebuild(self) -> MirrorState:
        """§5.2: rebuild, never merge. Uncommitted staged files are dropped: re-stage them."""
        with self._call("rebuild") as deadline:
            created = self._upstream.prepare(deadline, may_create=not self._synced_before())
            if self._mirror is not None:
                self._mirror.discard_staged()
            mirror = self._materialize(deadline)
            return self._state(mirror, cloned=True, created=created)

    # ---- doctor (ports.transport.ProviderDoctor) ---------------------------------------
    def diagnose(self) -> tuple[HealthFinding, ...]:
        """Local checks only: the mirror's health and its refs' whole closure (`git fsck`'s
        connectivity), a local pool's ref closure and stale ref lock, and temp files that
        killed transfers left in either object store."""
        found: list[HealthFinding] = []
        rebuild = "move the mirror aside and clone it again from the pool (§5.2)"
        if os.path.lexists(self.mirror_root):
            probe = Mirror(self.mirror_root)
            try:
                problem = probe.problem(self._upstream.display)
                if not problem and os.path.isdir(os.path.join(self.mirror_root, ".git")):
                    broken = probe.connectivity_problem()
                    problem = f"corrupt: {broken}" if broken else ""
                unsafe = probe.unsafe_paths()
            finally:
                probe.close()
            if problem:
                found.append(HealthFinding(
                    "mirror-corrupt" if problem.startswith(("corrupt", "unreadable"))
                    else "mirror-unusable", self.mirror_root, problem, rebuild))
            for path in unsafe:
                found.append(HealthFinding(
                    "pool-unsafe-path", path, "an unsafe path element in the pool; never "
                    "checked out", ""))
        if isinstance(self._upstream, LocalPool):
            found.extend(self._local_pool_findings())
        found.extend(self._temp_findings())
        return tuple(found)

    def _local_pool_findings(self) -> list[HealthFinding]:
        assert isinstance(self._upstream, LocalPool)
        found: list[HealthFinding] = []
        damage = self._upstream.closure_problem()
        if damage:
            missing = self._upstream.missing_objects(self._mirror_store_or_none())
            can = missing is not None and missing.restorable
            found.append(HealthFinding(
                "pool-damaged", self._upstream.path,
                f"its head's history is not whole: {damage}",
                f"write the {len(missing.objects) if missing else 0} missing object(s) back "
                "from this machine's mirror" if can else ""))
        lock = self._upstream.ref_lock()
        age_ms = stale_lock_age_ms(lock, self._timeout_ms)
        if age_ms is not None:
            holders = lock_holders(lock)
            found.append(HealthFinding(
                "pool-lock-stale", lock,
                f"{age_ms // 1000} s old, over syncTimeoutMs = {self._timeout_ms} ms"
                + (f"; held open by pid {', '.join(map(str, holders))}" if holders else
                   "; no process holds it"),
                "" if holders else "remove the lock file"))
        return found

    def _mirror_store_or_none(self) -> Mirror | None:
        if not os.path.isdir(os.path.join(self.mirror_root, ".git")):
            return None
        return Mirror(self.mirror_root)

    def _object_dirs(self) -> list[tuple[str, str]]:
        """(label, objects directory) of the mirror and, for a local path, the pool."""
        dirs = [("mirror", os.path.join(self.mirror_root, ".git", "objects"))]
        if isinstance(self._upstream, LocalPool):
            dirs.append(("pool", os.path.join(self._upstream.path, "objects")))
        return [(label, d) for label, d in dirs if os.path.isdir(d)]

    def _temp_findings(self) -> list[HealthFinding]:
        found: list[HealthFinding] = []
        for label, objects in self._object_dirs():
            temps = stale_temp_files(objects, self._timeout_ms / 1000)
            if temps:
                size = sum(t.size for t in temps)
                found.append(HealthFinding(
                    f"{label}-temp-files", objects,
                    f"{len(temps)} temp file(s) of killed transfers, {size} bytes "
                    f"(first: {os.path.basename(temps[0].path)})",
                    "remove them (no live process writes them)"))
        leftovers = [p for p in glob.glob(glob.escape(self.mirror_root) + ".tmp-*")
                     if not _pid_alive(_tmp_pid(p))]
        if leftovers:
            found.append(HealthFinding(
                "mirror-temp-clone", leftovers[0],
                f"{len(leftovers)} half-made mirror clone(s) of a killed sync",
                "remove them (no live process writes them)"))
        return found

    def repair(self, finding: HealthFinding) -> str:
        if finding.code in ("mirror-corrupt", "mirror-unusable"):
            moved = ""
            with self._call("rebuild") as deadline:
                self._upstream.prepare(deadline, may_create=False)
                if self._mirror is not None:
                    self._mirror.close()
                    self._mirror = None
                if os.path.lexists(self.mirror_root):
                    moved = move_aside(self.mirror_root)
                self._materialize(deadline)
            return f"rebuilt the mirror from the pool (the old one is at {moved})"
        if finding.code == "pool-lock-stale" and isinstance(self._upstream, LocalPool):
            lock = self._upstream.ref_lock()
            # Cleared only when still stale and no process holds it open (checked again now).
            if stale_lock_age_ms(lock, self._timeout_ms) is None or lock_holders(lock):
                return "left alone: a writer holds it, or it is no longer stale"
            os.unlink(lock)
            return f"removed {lock}"
        if finding.code == "pool-damaged" and isinstance(self._upstream, LocalPool):
            mirror = self._mirror_store_or_none()
            try:
                written = self._upstream.restore_from(mirror)
            finally:
                if mirror is not None:
                    mirror.close()
            return (f"wrote {written} missing object(s) back into the pool from this mirror"
                    if written else "")
        if finding.code.endswith("-temp-files"):
            removed = sweep_temp_files(finding.path, self._timeout_ms / 1000)
            return f"removed {len(removed)} temp file(s), {sum(t.size for t in removed)} bytes"
        if finding.code == "mirror-temp-clone":
            gone = 0
            for path in glob.glob(glob.escape(self.mirror_root) + ".tmp-*"):
                if not _pid_alive(_tmp_pid(path)):
                    remove_tree(path)
                    gone += 1
            return f"removed {gone} half-made clone(s)"
        return ""

    # ---- chapters scan (ports.transport.PoolHistory) -----------------------------------
    def history_files(self) -> Iterator[HistoryFile]:
        """The mirror's objects, then a local-path pool's own (commits not pulled yet);
        read only, no network."""
        seen: set[bytes] = set()
        sources = []
        if os.path.isdir(os.path.join(self.mirror_root, ".git")):
            sources.append(("mirror", self.mirror_root, False))
        if isinstance(self._upstream, LocalPool) and os.path.isdir(self._upstream.path):
            sources.append(("pool", self._upstream.path, True))
        for where, path, bare in sources:
            repo = Repo(path, bare=bare)
            try:
                yield from history_files(repo, where, seen)
            finally:
                repo.close()

    def close(self) -> None:
        if self._mirror is not None:
            self._mirror.close()
            self._mirror = None
        self._upstream.close()


def create_provider(context: ProviderContext) -> KnowledgeProvider:
    """The git provider for `context.remote` (`GitProviderFactory.create`, factory.py)."""
    remote = context.remote.strip()
    if not GitProviderFactory.matches(remote):
        raise TransportError(
            FailureCode.REFUSED,
            "open: refused (the git provider takes a local path or an https URL)",
            hint="run `chapters link <path>` or `chapters link <https-url> < token-file`",
        )
    upstream: Upstream
    if parse_remote(remote).url:
        # Read once, kept in memory by the HTTP client only (never in the mirror's config).
        token = context.credentials.read(context.credential_name) or None
        upstream = HttpPool(remote, token)
    else:
        upstream = LocalPool(
            local_path(remote, context.workspace), context.config.git_unpack_limit
        )
    return GitProvider(context, upstream)
