"""Failure mapping: by exception type and HTTP status, never by message text (§5.2)."""

from __future__ import annotations

import errno
import socket

import pytest
import urllib3.exceptions
from dsh_chapters_core.errors import FailureCode, TransportError
from dsh_chapters_git.failures import AnswerCutShort, Deadline, HttpStatusError, classify
from dulwich.errors import ChecksumMismatch, GitProtocolError, HangupException, NotGitRepository


def _chained(outer: BaseException, cause: BaseException) -> BaseException:
    outer.__cause__ = cause
    return outer


def _refused_connection() -> BaseException:
    # What urllib3 2.x raises for a refused connection, wrapped the way dulwich wraps it.
    cause = ConnectionRefusedError(errno.ECONNREFUSED, "diverged (a decoy: text is never read)")
    new_conn = _chained(urllib3.exceptions.NewConnectionError(None, "failed"), cause)  # type: ignore[arg-type]
    return _chained(GitProtocolError("diverge! not a fast-forward"), new_conn)


@pytest.mark.parametrize(
    ("exc", "code"),
    [
        (_refused_connection(), FailureCode.NETWORK),
        (urllib3.exceptions.NameResolutionError("h", None, socket.gaierror()), FailureCode.NETWORK),  # type: ignore[arg-type]
        (urllib3.exceptions.ReadTimeoutError(None, "/", "read timed out"), FailureCode.TIMEOUT),  # type: ignore[arg-type]
        (urllib3.exceptions.ConnectTimeoutError("connect timed out"), FailureCode.TIMEOUT),
        (TimeoutError(), FailureCode.TIMEOUT),
        (HttpStatusError(401), FailureCode.AUTH),
        (HttpStatusError(403), FailureCode.AUTH),
        (HttpStatusError(404), FailureCode.NOT_FOUND),
        (HttpStatusError(418), FailureCode.REFUSED),
        (HttpStatusError(502), FailureCode.NETWORK),
        (NotGitRepository("x"), FailureCode.NOT_FOUND),
        (ChecksumMismatch(b"a" * 40, b"b" * 40), FailureCode.CORRUPT),
        (HangupException(), FailureCode.NETWORK),
        (GitProtocolError("auth failed, 401, diverged"), FailureCode.REFUSED),
        # the same protocol error, raised after the answer's body ran out mid-read
        (_chained(AnswerCutShort(), GitProtocolError("length mismatch")), FailureCode.NETWORK),
        (_chained(AnswerCutShort(), ChecksumMismatch(b"a" * 40, b"b" * 40)),
         FailureCode.NETWORK),
        (PermissionError(errno.EACCES, "denied"), FailureCode.REFUSED),
        (OSError(errno.EIO, "io"), FailureCode.NETWORK),
        (FileNotFoundError(errno.ENOENT, "gone"), FailureCode.NOT_FOUND),
    ],
    ids=lambda v: type(v).__name__ if isinstance(v, BaseException) else str(v),
)
def test_exceptions_map_to_codes_by_type(exc: BaseException, code: FailureCode) -> None:
    mapped = classify("pull", exc, 20000)
    assert mapped is not None and mapped.code is code
    assert mapped.message.startswith(f"pull: {code.value} (")
    assert mapped.hint


def test_a_network_error_that_says_diverge_is_still_network() -> None:
    mapped = classify("push", _refused_connection(), 20000)
    assert mapped is not None
    assert mapped.code is FailureCode.NETWORK and "diverge" not in mapped.message


def test_bugs_are_not_transport_failures() -> None:
    assert classify("push", TypeError("bug"), 20000) is None
    assert classify("push", KeyError("bug"), 20000) is None


def test_an_existing_transport_error_passes_through() -> None:
    original = TransportError(FailureCode.DIVERGED, "push: diverged (x)")
    assert classify("push", _chained(RuntimeError("wrap"), original), 1) is original


def test_a_spent_deadline_is_timeout() -> None:
    deadline = Deadline("pull", 0)
    with pytest.raises(TransportError) as caught:
        deadline.check()
    assert caught.value.code is FailureCode.TIMEOUT and "0 ms" in caught.value.message
    assert Deadline("pull", 60_000).remaining() > 59
