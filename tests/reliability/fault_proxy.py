"""A fault-injecting HTTP proxy on 127.0.0.1, in front of a pool server (`git http-backend`
or the TreeDX fake), for the faults part of the reliability suite.

It speaks just enough HTTP/1.1 to see one request and one answer per connection (it asks the
upstream to close after each answer), so it can break the answer in the ways a real network
or a real front end does: a refused port, a reset in the middle of a body, an error status
the server never chose, a 503 with Retry-After, a body that stalls past the client's budget,
and a body cut short under a Content-Length that agrees with the cut (a JSON document that
simply ends). Every wait is bounded; `stop()` ends the listener and every live connection.
"""

from __future__ import annotations

import contextlib
import json
import socket
import struct
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass

FAULTS = ("refused", "reset", "401", "403", "500", "503", "slow", "truncated")
_IO_TIMEOUT_S = 30.0  # no single socket operation of the proxy waits longer than this
_HEAD_MAX = 64 * 1024  # a request or answer head larger than this is not a pool's


@dataclass(frozen=True)
class _Message:
    head: list[str]  # the start line, then the header lines
    body: bytes

    def header(self, name: str) -> str:
        wanted = name.lower() + ":"
        for line in self.head[1:]:
            if line.lower().startswith(wanted):
                return line.split(":", 1)[1].strip()
        return ""

    def encode(self, *, drop: tuple[str, ...] = (), add: tuple[str, ...] = ()) -> bytes:
        """The head (minus `drop`ped headers, plus `add`) with a Content-Length for `body`."""
        gone = {"content-length", "transfer-encoding", "connection", *drop}
        lines = [self.head[0]] + [h for h in self.head[1:]
                                  if h.split(":", 1)[0].strip().lower() not in gone]
        lines += [*add, f"Content-Length: {len(self.body)}", "Connection: close"]
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


class _Reader:
    """Buffered reads off one socket, each bounded by the socket's timeout."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        self._buf = b""

    def _fill(self) -> bool:
        data = self._sock.recv(65536)
        self._buf += data
        return bool(data)

    def until(self, marker: bytes, limit: int) -> bytes:
        while marker not in self._buf:
            if len(self._buf) > limit or not self._fill():
                raise ConnectionError("the peer closed before a whole head")
        out, _, self._buf = self._buf.partition(marker)
        return out

    def exactly(self, n: int) -> bytes:
        while len(self._buf) < n:
            if not self._fill():
                raise ConnectionError(f"the peer closed {n - len(self._buf)} bytes short")
        out, self._buf = self._buf[:n], self._buf[n:]
        return out

    def rest(self) -> bytes:
        while self._fill():
            pass
        out, self._buf = self._buf, b""
        return out

    def message(self, *, to_eof: bool) -> _Message:
        head = self.until(b"\r\n\r\n", _HEAD_MAX).decode("latin-1").split("\r\n")
        msg = _Message(head, b"")
        if msg.header("Transfer-Encoding").lower() == "chunked":
            chunks = []
            while True:
                size = int(self.until(b"\r\n", 1024).split(b";")[0].strip(), 16)
                if size == 0:
                    self.until(b"\r\n", _HEAD_MAX)  # the (empty) trailer
                    break
                chunks.append(self.exactly(size))
                self.exactly(2)
            return _Message(head, b"".join(chunks))
        length = msg.header("Content-Length")
        if length:
            return _Message(head, self.exactly(int(length)))
        return _Message(head, self.rest() if to_eof else b"")


def _status(code: int, reason: str, body: bytes, *extra: str) -> bytes:
    lines = [f"HTTP/1.1 {code} {reason}", *extra, f"Content-Length: {len(body)}",
             "Connection: close"]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


class FaultProxy:
    """`fault` is None (pass through) or one of FAULTS; set it with `inject`, clear with
    `clear`. `flavor` ("git" or "treedx") picks the error bodies a front end of that server
    would send. `stall_s` bounds the slow fault: it must exceed the client's budget."""

    def __init__(self, target_port: int, flavor: str, *, stall_s: float,
                 retry_after_s: int = 1) -> None:
        assert flavor in ("git", "treedx")
        self.target = target_port
        self.flavor = flavor
        self.stall_s = stall_s
        self.retry_after_s = retry_after_s
        self.fault: str | None = None
        self.only = ""  # break only requests whose start line holds this ("" = every one)
        self.times = 0  # break at most this many answers (0 = no limit)
        self.port = 0
        self.faulted = 0  # answers this proxy broke on purpose
        self.seen = 0  # requests read, since the last `park_at`
        self.parked = threading.Event()  # set while a request is held by `park_at`
        self._park: tuple[int, str, str] | None = None
        self._release = threading.Event()
        self.errors: list[str] = []  # unexpected proxy failures: a test asserts none
        self._stop = threading.Event()
        self._listener: socket.socket | None = None
        self._acceptor: threading.Thread | None = None
        self._live: set[socket.socket] = set()
        self._workers: set[threading.Thread] = set()
        self._guard = threading.Lock()
        self._listen()

    # --- switches ------------------------------------------------------------------------
    def inject(self, fault: str, *, only: str = "", times: int = 0) -> None:
        """Break answers with `fault`; with `only`, just the requests whose start line holds
        it (a push, not the pull before it), at most `times` of them when `times` > 0."""
        assert fault in FAULTS, fault
        assert not (fault == "refused" and only), "a refused port refuses every request"
        self.fault, self.only, self.times = fault, only, times
        if fault == "refused":
            self._close_listener()

    def clear(self) -> None:
        self.fault, self.only, self.times = None, "", 0
        if self._listener is None:
            self._listen()

    def park_at(self, number: int, stage: str, *, only: str = "") -> None:
        """Hold the `number`-th request from now (with `only`, counting just the requests whose
        start line holds it): before forwarding it (`request`: the server never sees it),
        after (`answer`: the server did the work, the client never hears), or in the middle
        of a body (`request-half`: the server gets the head and half the request body, then
        its connection closes; `answer-half`: the client gets the head and half the answer's
        body), until `release()`; `parked` is set while it is held (a test kills the client
        there)."""
        assert stage in ("request", "answer", "request-half", "answer-half") and number >= 1
        with self._guard:
            self.seen = 0
            self._park = (number, stage, only)
            self.parked.clear()
            self._release.clear()

    def release(self) -> None:
        """Let a held request go (its connection is closed unanswered) and stop parking."""
        with self._guard:
            self._park = None
        self._release.set()

    def stop(self) -> None:
        self._release.set()
        self._close_listener()
        with self._guard:
            live, workers = list(self._live), list(self._workers)
        for sock in live:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        for worker in workers:
            worker.join(timeout=_IO_TIMEOUT_S)

    def __enter__(self) -> FaultProxy:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # --- listening -----------------------------------------------------------------------
    def _listen(self) -> None:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))  # the same port again after a refusal
        listener.listen(64)
        listener.settimeout(0.05)
        self.port = int(listener.getsockname()[1])
        self._listener = listener
        self._stop.clear()
        self._acceptor = threading.Thread(target=self._accept, args=(listener,), daemon=True,
                                          name=f"fault-proxy-{self.port}")
        self._acceptor.start()

    def _close_listener(self) -> None:
        self._stop.set()
        if self._acceptor is not None:
            self._acceptor.join(timeout=10)
            self._acceptor = None
        if self._listener is not None:
            self._listener.close()
            self._listener = None

    def _accept(self, listener: socket.socket) -> None:
        while not self._stop.is_set():
            try:
                client, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            worker = threading.Thread(target=self._serve, args=(client,), daemon=True)
            with self._guard:
                self._live.add(client)
                self._workers.add(worker)
            worker.start()

    @contextlib.contextmanager
    def _tracked(self, sock: socket.socket) -> Iterator[socket.socket]:
        with self._guard:
            self._live.add(sock)
        try:
            yield sock
        finally:
            with self._guard:
                self._live.discard(sock)
            sock.close()

    # --- one exchange --------------------------------------------------------------------
    def _serve(self, client: socket.socket) -> None:
        try:
            with self._tracked(client):
                client.settimeout(_IO_TIMEOUT_S)
                try:
                    request = _Reader(client).message(to_eof=False)
                except (OSError, ConnectionError, ValueError):
                    return  # the client gave up first: nothing to answer
                stage = self._parking(request.head[0])
                if stage == "request":
                    self._hold()
                    return
                if stage.endswith("-half"):
                    self._halfway(client, request, stage)
                    return
                fault = self._take(request.head[0])
                canned = self._canned(fault)
                if canned is not None:
                    self.faulted += 1
                    with contextlib.suppress(OSError):
                        client.sendall(canned)
                    return
                answer = self._forward(request)
                if answer is None:
                    return
                if stage == "answer":
                    self._hold()
                    return
                self._answer(client, answer, fault)
        except Exception as exc:  # a proxy bug must fail the test, not hang it
            self.errors.append(f"{type(exc).__name__}: {exc}")
        finally:
            with self._guard:
                self._workers.discard(threading.current_thread())

    def _parking(self, start_line: str) -> str:
        """The park stage this request meets ("" for none)."""
        with self._guard:
            if self._park is not None and self._park[2] not in start_line:
                return ""
            self.seen += 1
            if self._park is not None and self._park[0] == self.seen:
                return self._park[1]
        return ""

    def _halfway(self, client: socket.socket, request: _Message, stage: str) -> None:
        """Half of a transfer, then hold: half the request body reaches the server (then its
        connection closes), or half the answer's body reaches the client."""
        if stage == "request-half":
            try:
                with self._tracked(socket.create_connection(("127.0.0.1", self.target),
                                                            timeout=_IO_TIMEOUT_S)) as up:
                    up.sendall(request.encode() + request.body[: len(request.body) // 2])
                    self._hold()
            except (OSError, ConnectionError):
                self._hold()
            return
        answer = self._forward(request)
        if answer is None:
            return
        with contextlib.suppress(OSError):
            client.sendall(answer.encode() + answer.body[: len(answer.body) // 2])
        self._hold()

    def _hold(self) -> None:
        self.parked.set()
        self._release.wait(timeout=_IO_TIMEOUT_S * 2)

    def _take(self, start_line: str) -> str | None:
        """The fault this request gets (None: pass it through), counting a limited fault."""
        with self._guard:
            fault = self.fault
            if fault is None or (self.only and self.only not in start_line):
                return None
            if self.times:
                self.times -= 1
                if self.times == 0:
                    self.fault = None
            return fault

    def _forward(self, request: _Message) -> _Message | None:
        try:
            with self._tracked(socket.create_connection(("127.0.0.1", self.target),
                                                        timeout=_IO_TIMEOUT_S)) as upstream:
                upstream.sendall(request.encode() + request.body)
                return _Reader(upstream).message(to_eof=True)
        except (OSError, ConnectionError):
            return None  # the server itself went away: the client sees a closed connection

    def _answer(self, client: socket.socket, answer: _Message, fault: str | None) -> None:
        body = answer.body
        try:
            if fault == "reset" and body:
                # the whole length announced, half the body sent, then RST (SO_LINGER 0)
                self.faulted += 1
                client.sendall(answer.encode() + body[: len(body) // 2])
                client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                return
            if fault == "truncated" and len(body) > 1:
                # a document that simply ends: the length agrees with the cut
                self.faulted += 1
                cut = _Message(answer.head, body[: len(body) // 2])
                client.sendall(cut.encode() + cut.body)
                return
            if fault == "slow" and body:
                # a trickle, then a stall past the client's budget, then the rest (bounded)
                self.faulted += 1
                client.sendall(answer.encode() + body[:8])
                time.sleep(self.stall_s)
                client.sendall(body[8:])
                return
            client.sendall(answer.encode() + body)
        except OSError:
            pass  # the client gave up (its timeout): what the slow fault is for

    def _canned(self, fault: str | None) -> bytes | None:
        """An answer the proxy makes up, as a front end of this server would."""
        if fault not in ("401", "403", "500", "503"):
            return None
        code = int(fault)
        reason = {401: "Unauthorized", 403: "Forbidden", 500: "Internal Server Error",
                  503: "Service Unavailable"}[code]
        extra: list[str] = []
        if code == 503:
            extra.append(f"Retry-After: {self.retry_after_s}")
        if code == 401:
            extra.append('WWW-Authenticate: Basic realm="dsh-pool"' if self.flavor == "git"
                         else 'WWW-Authenticate: Bearer realm="treedx"')
        if self.flavor == "git":
            return _status(code, reason, f"{reason}\n".encode(), "Content-Type: text/plain",
                           *extra)
        wire = {401: "authentication_required", 403: "permission_denied",
                500: "internal_error", 503: "server_busy"}[code]
        details: dict[str, object] = {}
        if code == 503:
            details["retryAfterMs"] = self.retry_after_s * 1000
        body = json.dumps({"ok": False, "error": {"code": wire, "message": reason.lower(),
                                                  "details": details}}).encode()
        return _status(code, reason, body, "Content-Type: application/json", *extra)
