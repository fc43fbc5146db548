"""The two kinds of git pool: a local path (a bare repository) and a smart-HTTP URL.

Both move objects by an explicit closure and move `refs/heads/main` fast-forward only, by
compare-and-swap: a pool that moved underneath us is `DIVERGED`, never forced (§5.2).
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import shutil
import time
from collections.abc import Callable, Iterator, Mapping
from collections.abc import Set as AbstractSet
from typing import Protocol
from urllib.parse import unquote, urlsplit, urlunsplit

from dsh_chapters_core.errors import FailureCode, TransportError
from dsh_chapters_core.remote import is_loopback_host
from dulwich.client import Urllib3HttpGitClient
from dulwich.errors import HangupException, NotGitRepository
from dulwich.file import FileLocked
from dulwich.objects import ObjectID
from dulwich.pack import UnpackedObject, full_unpacked_object
from dulwich.refs import Ref
from dulwich.repo import Repo

from dsh_chapters_git.failures import (
    BAD_GIT_DATA,
    RELINK_HINT,
    AnswerCutShort,
    Deadline,
    PoolDamaged,
    failure,
)
from dsh_chapters_git.history import Missing, closure, is_ancestor, known_heads, missing_in
from dsh_chapters_git.mirror import (
    HEAD,
    MAIN,
    Mirror,
    closure_problem,
    irregular_git_file,
    irregular_object_file,
)
from dsh_chapters_git.packs import copy_object_files, copy_pack, write_objects
from dsh_chapters_git.smart_http import BudgetedPool, open_client

_LOCK_RETRY_S = 0.01  # a ref lock is held for microseconds; poll until the deadline
_COMMIT_ID = re.compile(rb"[0-9a-f]{40}")


class Upstream(Protocol):
    """What the provider needs from a pool, whatever carries it."""

    display: str  # the remote as stored in the mirror's config: never a credential

    def prepare(self, deadline: Deadline, *, may_create: bool) -> bool: ...

    def clone_into(self, mirror: Mirror, deadline: Deadline) -> bytes | None: ...

    def fetch_into(self, mirror: Mirror, deadline: Deadline) -> bytes | None: ...

    def push_from(
        self, mirror: Mirror, local: bytes, expected: bytes | None, deadline: Deadline
    ) -> bool: ...

    @property
    def requests(self) -> int: ...

    def close(self) -> None: ...


def local_path(remote: str, workspace: str) -> str:
    """The absolute pool directory a local remote names (relative ones: from the workspace)."""
    if remote.startswith("file://"):
        path = unquote(urlsplit(remote).path)
    else:
        path = os.path.expanduser(remote)
    return os.path.normpath(os.path.join(workspace, path))


def public_url(url: str) -> str:
    """The URL without userinfo, so a credential typed into it is never stored or shown."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, ""))


def _main_of(refs: Mapping[Ref, ObjectID] | Mapping[Ref, ObjectID | None]) -> bytes | None:
    sha = refs.get(MAIN)
    return bytes(sha) if sha is not None else None


def _diverged(verb: str, detail: str) -> Exception:
    return failure(verb, FailureCode.DIVERGED, detail)


class LocalPool:
    """A bare repository on a path: objects move by closure, refs by a locked CAS."""

    def __init__(self, path: str, loose_limit: int) -> None:
        self.path = path
        self.display = path
        self._loose_limit = loose_limit

    @property
    def requests(self) -> int:
        return 0

    def close(self) -> None:
        return None

    def prepare(self, deadline: Deadline, *, may_create: bool) -> bool:
        """Create the bare pool if absent (True when created), on a first sync only: a pool
        that vanished after we synced with it (an unmounted drive) is NOT_FOUND, not silently
        replaced by an empty one. Two first syncs may race: each builds in a temp sibling and
        renames; the loser adopts the winner's pool."""
        if os.path.isdir(self.path) and os.listdir(self.path):
            self._check_bare()
            return False
        if not may_create:
            raise failure(
                "open",
                FailureCode.NOT_FOUND,
                "the pool this mirror synced with is gone",
                hint="reconnect the pool's drive, or `chapters link <path>` to a new pool",
            )
        parent = os.path.dirname(self.path)
        os.makedirs(parent, exist_ok=True)
        temp = f"{self.path}.tmp-{os.getpid()}-{secrets.token_hex(4)}"
        Repo.init_bare(temp, mkdir=True, default_branch=b"main").close()
        try:
            os.rename(temp, self.path)  # replaces an empty directory, fails on a full one
        except OSError:
            _remove_quietly(temp)
            self._check_bare()
            return False
        deadline.check()
        return True

    def _check_bare(self) -> None:
        if not (
            os.path.isdir(os.path.join(self.path, "objects"))
            and os.path.isfile(os.path.join(self.path, "HEAD"))
        ):
            raise failure(
                "open",
                FailureCode.REFUSED,
                "the pool path exists and is not a bare git repository",
                hint="point `chapters link` at an empty or absent directory, or a bare repository",
            )

    def _open(self) -> Repo:
        odd = irregular_git_file(self.path, ("config", "HEAD", "packed-refs", "refs/heads/main"))
        if odd:  # dulwich would wait forever on a FIFO there
            raise failure("open", FailureCode.REFUSED, f"the pool's {odd}",
                          hint=f"repair or restore the pool at {self.path}")
        try:
            return Repo(self.path, bare=True)
        except NotGitRepository:
            raise failure("open", FailureCode.NOT_FOUND, "no git pool at the linked path") from None
        except (ValueError, KeyError, UnicodeDecodeError, RecursionError, PermissionError) as exc:
            # dulwich parses the pool's `config` as it opens it: garbage there is the pool's
            # damage, named, never a traceback (and never the archive's failure, §5.3)
            raise failure(
                "open", FailureCode.REFUSED,
                f"the pool's git config does not read ({type(exc).__name__})",
                hint=f"repair or restore {os.path.join(self.path, 'config')} (a bare "
                     "repository's config: `[core] bare = true`)") from None

    # ---- doctor --------------------------------------------------------------------------
    def closure_problem(self) -> str:
        """What the pool's `main` names that the pool does not hold whole ("" when whole)."""
        odd = irregular_object_file(os.path.join(self.path, "objects"))
        if odd:
            return odd
        try:
            repo = self._open()
        except TransportError as exc:
            return exc.message
        try:
            return closure_problem(repo.object_store, (self._head(repo),))
        except PoolDamaged as exc:
            return str(exc)
        except Exception as exc:  # a pool that does not read is damage to report, not raise
            return f"the pool does not read ({type(exc).__name__})"
        finally:
            repo.close()

    def missing_objects(self, mirror: Mirror | None) -> Missing | None:
        """The objects the pool's head names and lacks, children first, and whether `mirror`
        holds every one of them (then `restore_from` can write them back)."""
        if irregular_object_file(os.path.join(self.path, "objects")):
            return None  # an object file that is not a file: a person looks at the pool
        try:
            repo = self._open()
        except TransportError:
            return None
        try:
            head = self._head(repo)
            if head is None:
                return Missing((), True)
            helper = mirror.repo.object_store if mirror is not None else None
            return missing_in(repo.object_store, helper, head)
        except Exception:
            return None
        finally:
            repo.close()

    def restore_from(self, mirror: Mirror | None) -> int:
        """Write back what the pool's head lacks, children first, from `mirror`; returns the
        objects written (0 when the mirror does not hold them all: nothing is written)."""
        missing = self.missing_objects(mirror)
        if missing is None or not missing.restorable or not missing.objects:
            return 0
        repo = self._open()
        try:
            write_objects(repo.object_store, missing.objects, self._loose_limit, "push")
        finally:
            repo.close()
        return len(missing.objects)

    def _head(self, repo: Repo) -> bytes | None:
        try:
            head = bytes(repo.refs[MAIN])
        except KeyError:
            return None
        except (ValueError, OSError) as exc:
            raise PoolDamaged(f"its refs/heads/main does not read ({type(exc).__name__})") \
                from exc
        if not _COMMIT_ID.fullmatch(head):
            raise PoolDamaged("its refs/heads/main does not hold a commit id")
        return head

    def clone_into(self, mirror: Mirror, deadline: Deadline) -> bytes | None:
        """Copy the pool's object files as they are (git's local clone); returns the head."""
        repo = self._open()
        try:
            head = self._head(repo)  # read before copying: its objects are already in place
        finally:
            repo.close()
        if head is not None:
            copy_object_files(
                os.path.join(self.path, "objects"),
                os.path.join(mirror.repo.controldir(), "objects"),
            )
            deadline.check()
        return head

    def fetch_into(self, mirror: Mirror, deadline: Deadline) -> bytes | None:
        """Bring the pool head's closure into the mirror, children first. Only the commits the
        mirror's refs name are taken as whole: a commit object a killed pull left without its
        tree is fetched again with everything under it, never trusted for being there."""
        repo = self._open()
        try:
            head = self._head(repo)
            trusted = (mirror.pool_head(), mirror.head())
            if head is not None and head not in trusted:
                odd = irregular_object_file(os.path.join(self.path, "objects"))
                if odd:
                    raise PoolDamaged(odd)
                try:
                    objects = closure(repo.object_store, head, known_heads(*trusted))
                except BAD_GIT_DATA as exc:
                    raise PoolDamaged(f"its head {head[:12].decode()} names an object it does "
                                      f"not hold whole ({type(exc).__name__})") from exc
                deadline.check()
                write_objects(mirror.repo.object_store, objects, self._loose_limit, "fetch")
            return head
        finally:
            repo.close()

    def push_from(
        self, mirror: Mirror, local: bytes, expected: bytes | None, deadline: Deadline
    ) -> bool:
        store = mirror.repo.object_store
        repo = self._open()
        try:
            current = self._head(repo)
            if current == local:
                return False
            if current != expected and (current is None or not is_ancestor(store, current, local)):
                raise _diverged("push", "the pool moved since the last pull")
            # §3.2: the closure down to the pool's head (its ref vouches for its history), never
            # "whatever objects the pool happens to hold": a commit a killed push left there
            # without its tree is not whole, and the ref below must never name it so.
            objects = closure(mirror.reader(), local, known_heads(current))
            deadline.check()
            fresh = mirror.fresh_pack
            ids = {bytes(o.id) for o in objects}
            if fresh is not None and len(objects) >= self._loose_limit and ids <= fresh.ids:
                # same bytes, no re-encoding; a pack lands whole (its index last)
                copy_pack(fresh, str(repo.object_store.pack_dir), "push")
            else:
                write_objects(repo.object_store, objects, self._loose_limit, "push")
            self._ensure_head_symref(repo)
            while True:
                try:
                    if current is None:
                        moved = repo.refs.add_if_new(MAIN, ObjectID(local))
                    else:
                        moved = repo.refs.set_if_equals(MAIN, ObjectID(current), ObjectID(local))
                    break
                except FileLocked:
                    self._refuse_stale_lock(deadline)
                    deadline.check()
                    time.sleep(_LOCK_RETRY_S)
            if not moved:
                raise _diverged("push", "another machine pushed first")
            return True
        finally:
            repo.close()

    def ref_lock(self) -> str:
        """The pool's `refs/heads/main.lock`: git's (and dulwich's) lock on the branch."""
        return os.path.join(self.path, "refs", "heads", "main.lock")

    def _refuse_stale_lock(self, deadline: Deadline) -> None:
        # A ref lock is held for microseconds; one older than a whole call's budget was left
        # by a writer that died. Waiting can never help, so say so, with the path and age.
        age_ms = stale_lock_age_ms(self.ref_lock(), deadline.timeout_ms)
        if age_ms is not None:
            raise failure(
                "push", FailureCode.LOCKED,
                f"{self.ref_lock()} is {age_ms // 1000} s old, over syncTimeoutMs = "
                f"{deadline.timeout_ms} ms",
            )

    def _ensure_head_symref(self, repo: Repo) -> None:
        # A pool made by `git init --bare` may point HEAD at a missing `master`: clones of the
        # pool should check out main. A HEAD naming an existing branch is left alone.
        target = repo.refs.read_ref(HEAD)
        if target == b"ref: " + MAIN:
            return
        if target is not None and target.startswith(b"ref: "):
            try:
                repo.refs[Ref(target[len(b"ref: ") :])]
                return
            except KeyError:
                pass
        with contextlib.suppress(FileLocked):  # another machine is repointing it right now
            repo.refs.set_symbolic_ref(HEAD, MAIN)


def stale_lock_age_ms(path: str, timeout_ms: int) -> int | None:
    """The age of a lock file older than `timeout_ms`, or None (absent, or young)."""
    try:
        age_ms = int((time.time() - os.stat(path).st_mtime) * 1000)
    except OSError:
        return None
    return age_ms if age_ms > timeout_ms else None


def lock_holders(path: str) -> tuple[int, ...]:
    """Pids of this host's processes holding `path` open (Linux `/proc`; () elsewhere): a lock
    is cleared only when no writer holds it."""
    target = os.path.realpath(path)
    found: list[int] = []
    try:
        pids = [int(p) for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return ()
    for pid in pids:
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink(f"/proc/{pid}/fd/{fd}") == target:
                    found.append(pid)
                    break
            except OSError:
                continue
    return tuple(found)


def _remove_quietly(path: str) -> None:
    shutil.rmtree(path, ignore_errors=True)


class HttpPool:
    """A smart-HTTP pool (`git http-backend`, any forge) reached with a per-call budget."""

    def __init__(self, url: str, token: str | None) -> None:
        self.url = url
        self.display = public_url(url)
        parts = urlsplit(url)
        self.loopback = is_loopback_host(parts.hostname or "")
        self.scheme = parts.scheme
        self._token = token
        self._client: Urllib3HttpGitClient | None = None
        self._pool: BudgetedPool | None = None

    @property
    def requests(self) -> int:
        return self._pool.requests if self._pool is not None else 0

    def prepare(self, deadline: Deadline, *, may_create: bool = False) -> bool:
        if not self.loopback and self.scheme != "https":
            raise failure(
                "open",
                FailureCode.REFUSED,
                "plain http is only used for loopback pools",
                hint="link the pool with an https:// URL",
            )
        if not self.loopback and not self._token:
            raise failure(
                "open", FailureCode.AUTH, "no token stored for this pool", hint=RELINK_HINT
            )
        return False

    def _session(self, deadline: Deadline) -> tuple[Urllib3HttpGitClient, BudgetedPool]:
        self.prepare(deadline)
        if self._client is None or self._pool is None:
            self._client, self._pool = open_client(
                self.display, self._token, loopback=self.loopback
            )
        self._pool.deadline = deadline
        return self._client, self._pool

    @contextlib.contextmanager
    def _whole_answers(self, pool: BudgetedPool) -> Iterator[None]:
        """An error raised after an answer's body ran out mid-read is that answer cut short
        (a proxy or a server that died mid-answer), whatever dulwich made of the rest."""
        before = pool.short_reads
        try:
            yield
        except (TransportError, HangupException):
            raise  # ours already, or a hang-up: worded as such
        except Exception as exc:
            if pool.short_reads > before:
                raise AnswerCutShort() from exc
            raise

    def clone_into(self, mirror: Mirror, deadline: Deadline) -> bytes | None:
        return self.fetch_into(mirror, deadline)

    def fetch_into(self, mirror: Mirror, deadline: Deadline) -> bytes | None:
        client, pool = self._session(deadline)
        store = mirror.repo.object_store
        seen: dict[str, bytes | None] = {}

        def wants(refs: Mapping[Ref, ObjectID], depth: int | None = None) -> list[ObjectID]:
            head = _main_of(refs)
            seen["head"] = head
            return [ObjectID(head)] if head is not None and ObjectID(head) not in store else []

        with self._whole_answers(pool):
            result = client.fetch("", mirror.repo, determine_wants=wants)
        return seen.get("head", _main_of(result.refs))

    def push_from(
        self, mirror: Mirror, local: bytes, expected: bytes | None, deadline: Deadline
    ) -> bool:
        client, pool = self._session(deadline)
        store = mirror.repo.object_store
        seen: dict[str, bytes | None] = {}

        def update_refs(refs: dict[Ref, ObjectID]) -> dict[Ref, ObjectID]:
            current = _main_of(refs)
            seen["current"] = current
            if current == local:
                return refs
            if current != expected and (current is None or not is_ancestor(store, current, local)):
                raise _diverged("push", "the pool moved since the last pull")
            return {**refs, MAIN: ObjectID(local)}

        def pack_data(
            have: AbstractSet[ObjectID],
            want: AbstractSet[ObjectID],
            *,
            ofs_delta: bool = False,
            progress: Callable[[bytes], None] | None = None,
        ) -> tuple[int, Iterator[UnpackedObject]]:
            haves = {bytes(h) for h in have}
            objects = closure(mirror.reader(), local, lambda sha: sha in haves)
            deadline.check()
            return len(objects), (full_unpacked_object(o) for o in objects)

        with self._whole_answers(pool):
            result = client.send_pack("", update_refs, pack_data)
        if seen.get("current") == local:
            return False
        status = (result.ref_status or {}).get(MAIN)
        if status is not None:
            # Rejected: the pool moved (a concurrent push won the ref lock) or refused us.
            refs = client.get_refs("").refs
            if _main_of(refs) != seen.get("current"):
                raise _diverged("push", "another machine pushed first")
            raise failure("push", FailureCode.REFUSED, "the pool rejected the update of main")
        return True

    def close(self) -> None:
        if self._pool is not None:
            self._pool.clear()
        self._client = None
        self._pool = None
