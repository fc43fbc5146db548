"""Exceptions from dulwich, urllib3 and the OS, mapped to `FailureCode`s by type and status.

§5.2: a network error's message once contained "diverge" and triggered the rebuild path, so
nothing here reads exception text. Messages are built from the verb, the code and a fixed
detail (an HTTP status, an errno name): a token can never reach them. The original exception is
dropped (`from None`) because its text is the server's and the URL's, not ours.
"""

from __future__ import annotations

import errno
import socket
import ssl
import time
import zlib
from collections.abc import Iterator

import urllib3.exceptions
from dsh_chapters_core.errors import FailureCode, TransportError
from dulwich.client import HTTPProxyUnauthorized, HTTPUnauthorized
from dulwich.errors import (
    ApplyDeltaError,
    ChecksumMismatch,
    GitProtocolError,
    HangupException,
    NotGitRepository,
    ObjectFormatException,
    ObjectMissing,
    SendPackError,
)
from dulwich.pack import UnresolvedDeltas

RELINK_HINT = "run `chapters link <url> < token-file` (or with DSH_CHAPTERS_TOKEN set)"

_HINTS: dict[FailureCode, str] = {
    FailureCode.AUTH: RELINK_HINT,
    FailureCode.NETWORK: "the archive keeps working locally; the next sync delivers the backlog",
    FailureCode.TIMEOUT: "raise syncTimeoutMs if the pool is slow; the next sync retries",
    FailureCode.CORRUPT: "the next sync moves the mirror aside and clones it again",
    FailureCode.DIVERGED: "the pool moved: rebuild the mirror and publish again (§5.2)",
    FailureCode.REFUSED: "check the pool's URL or path with `chapters link`",
    FailureCode.NOT_FOUND: "check the pool's URL or path with `chapters link`",
    FailureCode.LOCKED: "`chapters doctor --repair` clears a pool lock no writer holds",
}

# Filesystem errnos that mean "the pool's storage is not reachable right now" (NFS, FUSE).
_UNREACHABLE_ERRNOS = frozenset(
    {errno.EIO, errno.ESTALE, errno.ENOTCONN, errno.EHOSTDOWN, errno.EHOSTUNREACH, errno.ENETDOWN}
)
_REFUSED_ERRNOS = frozenset(
    {errno.EACCES, errno.EPERM, errno.EROFS, errno.ENOSPC, errno.EDQUOT, errno.ENOTDIR}
)


class HttpStatusError(Exception):
    """A smart-HTTP answer other than 200. Raised by our urllib3 wrapper, carries the status."""

    def __init__(self, status: int) -> None:
        super().__init__(f"HTTP {status}")
        self.status = status


# What a damaged object store raises when it is read (a missing or mangled object).
BAD_GIT_DATA: tuple[type[BaseException], ...] = (
    ChecksumMismatch, ObjectFormatException, ApplyDeltaError, UnresolvedDeltas, ObjectMissing,
    zlib.error,
)


class PoolDamaged(Exception):
    """The pool itself does not hold what its head names (a local-path pool a writer was
    killed in before this fix, or damaged by hand): recloning the mirror cannot help, so the
    mirror is left alone and `chapters doctor` names what is missing."""


class MirrorDamaged(Exception):
    """The mirror's own objects do not read: it is transport (§3.1), so it is marked and the
    next sync moves it aside and clones again."""


class AnswerCutShort(Exception):
    """The pool's answer ended before it was whole (its body ran out mid-read): whatever
    dulwich made of the rest is the connection's failure, retried by the next sync."""


class Deadline:
    """The hard budget of one provider call (`syncTimeoutMs`), checked between steps."""

    def __init__(self, verb: str, timeout_ms: int) -> None:
        self.verb = verb
        self.timeout_ms = timeout_ms
        self._end = time.monotonic() + timeout_ms / 1000.0

    def remaining(self) -> float:
        """Seconds left; raises TIMEOUT once the budget is spent."""
        left = self._end - time.monotonic()
        if left <= 0:
            raise failure(self.verb, FailureCode.TIMEOUT, f"over {self.timeout_ms} ms")
        return left

    def check(self) -> None:
        self.remaining()


def failure(verb: str, code: FailureCode, detail: str, *, hint: str = "") -> TransportError:
    """Build the one message shape: `push: network (connection refused)`."""
    return TransportError(code, f"{verb}: {code.value} ({detail})", hint=hint or _HINTS[code])


def _chain(exc: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        if isinstance(current, urllib3.exceptions.MaxRetryError) and current.reason is not None:
            current = current.reason
        else:
            current = current.__cause__ or current.__context__


def _http_status(verb: str, status: int) -> TransportError:
    if status in (401, 403, 407):
        return failure(verb, FailureCode.AUTH, f"HTTP {status}: the pool rejected the token")
    if status == 404:
        return failure(verb, FailureCode.NOT_FOUND, "HTTP 404: no repository at that URL")
    if status in (408, 504):
        return failure(verb, FailureCode.TIMEOUT, f"HTTP {status}")
    if status in (502, 503):
        return failure(verb, FailureCode.NETWORK, f"HTTP {status}: the pool is unavailable")
    if 500 <= status < 600 and status not in (501, 505):
        # The server failed this request, not our link: retried by the next sync, as
        # TreeDX's 5xx are. 501 and 505 say it will never do what we ask: a refusal.
        return failure(verb, FailureCode.NETWORK, f"HTTP {status}: the pool's server failed")
    return failure(verb, FailureCode.REFUSED, f"HTTP {status}")


def _os_error(verb: str, exc: OSError) -> TransportError:
    name = errno.errorcode.get(exc.errno or 0, "unknown") if exc.errno else type(exc).__name__
    if isinstance(exc, ConnectionRefusedError):
        return failure(verb, FailureCode.NETWORK, "connection refused")
    if isinstance(exc, ConnectionError):
        return failure(verb, FailureCode.NETWORK, f"connection lost, {name}")
    if isinstance(exc, FileNotFoundError):
        return failure(verb, FailureCode.NOT_FOUND, "no such file or directory")
    if exc.errno in _UNREACHABLE_ERRNOS:
        return failure(verb, FailureCode.NETWORK, f"storage unreachable, {name}")
    if exc.errno in _REFUSED_ERRNOS or isinstance(exc, PermissionError):
        return failure(verb, FailureCode.REFUSED, f"filesystem refused, {name}")
    return failure(verb, FailureCode.CORRUPT, f"filesystem error, {name}")


def _classify_link(verb: str, link: BaseException, timeout_ms: int) -> TransportError | None:
    """One exception of the chain, or None when its type says nothing (keep walking)."""
    if isinstance(link, TransportError):
        return link
    if isinstance(link, HttpStatusError):
        return _http_status(verb, link.status)
    if isinstance(link, AnswerCutShort):
        return failure(verb, FailureCode.NETWORK, "the pool's answer ended before it was whole")
    if isinstance(link, PoolDamaged):
        return failure(verb, FailureCode.CORRUPT, f"the pool is damaged: {link}",
                       hint="`chapters doctor` names what the pool lacks; `chapters doctor "
                            "--repair` on a machine whose mirror holds it writes it back")
    if isinstance(link, MirrorDamaged):
        return failure(verb, FailureCode.CORRUPT, f"the mirror is damaged: {link}")
    if isinstance(link, HTTPUnauthorized | HTTPProxyUnauthorized):
        return _http_status(verb, 401)
    if isinstance(link, NotGitRepository):
        return failure(verb, FailureCode.NOT_FOUND, "not a git repository")
    # urllib3 2.x: NewConnectionError subclasses ConnectTimeoutError, so these come first.
    if isinstance(link, urllib3.exceptions.NameResolutionError | socket.gaierror):
        return failure(verb, FailureCode.NETWORK, "host name not resolved")
    if isinstance(link, urllib3.exceptions.NewConnectionError):
        return None  # its cause (refused, unreachable) is more precise
    if isinstance(link, urllib3.exceptions.TimeoutError | TimeoutError):
        return failure(verb, FailureCode.TIMEOUT, f"no answer within {timeout_ms} ms")
    if isinstance(link, ssl.SSLError | urllib3.exceptions.SSLError):
        return failure(verb, FailureCode.NETWORK, "TLS handshake failed")
    if isinstance(link, OSError):
        return _os_error(verb, link)
    if isinstance(
        link,
        ChecksumMismatch
        | ObjectFormatException
        | ApplyDeltaError
        | UnresolvedDeltas
        | ObjectMissing
        | zlib.error,
    ):
        return failure(verb, FailureCode.CORRUPT, f"bad git data, {type(link).__name__}")
    return None


def _classify_fallback(verb: str, link: BaseException) -> TransportError | None:
    """Wrappers whose cause said nothing more precise."""
    if isinstance(
        link,
        HangupException | urllib3.exceptions.ProtocolError | urllib3.exceptions.HTTPError,
    ):
        return failure(verb, FailureCode.NETWORK, "the connection was cut")
    if isinstance(link, SendPackError):
        return failure(verb, FailureCode.REFUSED, "the pool refused the pack")
    if isinstance(link, GitProtocolError):
        return failure(verb, FailureCode.REFUSED, "the pool did not answer as a git server")
    return None


def classify(verb: str, exc: BaseException, timeout_ms: int) -> TransportError | None:
    """The `TransportError` for an exception a git call raised, by type and status only.

    None means the type is not a transport failure (a bug): the caller re-raises it as is.
    """
    links = list(_chain(exc))
    for link in links:
        found = _classify_link(verb, link, timeout_ms)
        if found is not None:
            return found
    for link in links:
        found = _classify_fallback(verb, link)
        if found is not None:
            return found
    return None
