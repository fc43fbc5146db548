"""A recorded-tape model server on loopback: real HTTP, canned answers, loud misses.

Each tape (a JSON file) maps the hash of a normalized request to one response:

    {"name": "enrich-valid", "mode": "replay",
     "entries": [{"key": "<16 hex>", "note": "<what it answers, for humans>",
                  "response": {"status": 200, "content": "<the model's text>", "delayMs": 0}}]}

`content` is wrapped in a chat completion; `body` (any JSON) or `text` is sent as it is.
`delayMs` holds the answer back (a timeout tape). A tape with `"mode": "down"` makes the server
refuse connections, as a server that is not running does.

The key is `sha256("<METHOD> <path>\\n<body as canonical JSON>")[:16]`: sorted keys, no
whitespace, so the same call always finds the same answer. A request no tape knows gets a loud
503 (`TAPE MISS …` on stderr, in the answer, and in `misses`), so a test that drifted from its
tapes names the request instead of passing on a default. Every request is counted.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import socket
import sys
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

KEY_CHARS = 16
MODE_REPLAY = "replay"
MODE_DOWN = "down"


def canonical_json(data: bytes) -> str:
    try:
        return json.dumps(json.loads(data), sort_keys=True, separators=(",", ":"),
                          ensure_ascii=False)
    except ValueError:
        return data.decode("utf-8", "replace")


def request_key(method: str, path: str, body: bytes | dict[str, Any]) -> str:
    """The tape key of one request (the body as bytes on the wire, or as a JSON object)."""
    raw = json.dumps(body).encode() if isinstance(body, dict) else body
    text = f"{method.upper()} {path}\n{canonical_json(raw)}"
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:KEY_CHARS]


@dataclass(frozen=True)
class TapeResponse:
    """One canned answer of a tape: its status and the model's content, a JSON body or plain text,
    held back by an optional delay."""

    status: int = 200
    content: str | None = None
    body: Any = None
    text: str | None = None
    delay_ms: int = 0

    def payload(self, model: str) -> tuple[bytes, str]:
        if self.text is not None:
            return self.text.encode("utf-8"), "text/plain; charset=utf-8"
        if self.body is not None:
            return json.dumps(self.body).encode("utf-8"), "application/json"
        completion = {
            "id": "chatcmpl-tape", "object": "chat.completion", "created": 0, "model": model,
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": self.content}}],
            "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
        }
        return json.dumps(completion).encode("utf-8"), "application/json"

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"status": self.status}
        for key, value in (("content", self.content), ("body", self.body), ("text", self.text)):
            if value is not None:
                data[key] = value
        if self.delay_ms:
            data["delayMs"] = self.delay_ms
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TapeResponse:
        return cls(status=int(data.get("status", 200)), content=data.get("content"),
                   body=data.get("body"), text=data.get("text"),
                   delay_ms=int(data.get("delayMs", 0)))


@dataclass(frozen=True)
class TapeEntry:
    """One tape entry: the key of the request it answers, its response and a note for humans."""

    key: str
    response: TapeResponse
    note: str = ""


@dataclass(frozen=True)
class Tape:
    """A recorded tape: its name, its entries and its mode (replay, or down: refuse connections)."""

    name: str
    entries: tuple[TapeEntry, ...] = ()
    mode: str = MODE_REPLAY
    description: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "mode": self.mode, "description": self.description,
                "entries": [{"key": e.key, "note": e.note, "response": e.response.to_json()}
                            for e in self.entries]}

    def dump(self, path: Path) -> None:
        path.write_text(json.dumps(self.to_json(), indent=2, ensure_ascii=False) + "\n",
                        encoding="utf-8")


def load_tape(path: str | Path) -> Tape:
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    return Tape(
        name=str(data.get("name", Path(path).stem)),
        mode=str(data.get("mode", MODE_REPLAY)),
        description=str(data.get("description", "")),
        entries=tuple(TapeEntry(key=str(e["key"]), note=str(e.get("note", "")),
                                response=TapeResponse.from_json(e["response"]))
                      for e in data.get("entries", ())),
    )


@dataclass(frozen=True)
class TapeRequest:
    """One request the tape server received: its key, path and arrival time, whether a tape matched
    it, the status it got and whether it was authorized."""

    key: str
    path: str
    at: float  # time.monotonic() when it arrived
    matched: bool
    status: int
    authorized: bool  # the Authorization header matched the expected key (if one is expected)


@dataclass
class TapeServer:
    """The server. `start()` binds 127.0.0.1:0; `url` is the OpenAI-style base (`…/v1`)."""

    tapes: tuple[Tape, ...]
    expected_key: str | None = None  # when set, a request without `Bearer <key>` gets a 401
    requests: list[TapeRequest] = field(default_factory=list)
    misses: list[str] = field(default_factory=list)
    port: int = 0
    _server: ThreadingHTTPServer | None = field(default=None, repr=False)
    _thread: threading.Thread | None = field(default=None, repr=False)
    _stopping: threading.Event = field(default_factory=threading.Event, repr=False)
    _guard: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @classmethod
    def from_files(cls, paths: Iterable[str | Path], **kw: Any) -> TapeServer:
        return cls(tapes=tuple(load_tape(p) for p in paths), **kw)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def count(self) -> int:
        with self._guard:
            return len(self.requests)

    @property
    def down(self) -> bool:
        return any(t.mode == MODE_DOWN for t in self.tapes)

    def _answers(self) -> dict[str, tuple[str, TapeEntry]]:
        table: dict[str, tuple[str, TapeEntry]] = {}
        for tape in self.tapes:
            for entry in tape.entries:
                table.setdefault(entry.key, (tape.name, entry))
        return table

    def start(self) -> TapeServer:
        if self.down:
            # A port nothing listens on: bind, learn the number, close (connections refused).
            with contextlib.closing(_bind_probe()) as probe:
                self.port = int(probe.getsockname()[1])
            return self
        answers = self._answers()
        server = ThreadingHTTPServer(("127.0.0.1", self.port), _handler_for(self, answers))
        server.daemon_threads = True
        self.port = int(server.server_address[1])
        self._server = server
        self._stopping.clear()
        self._thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05},
                                        daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving; the port then refuses connections (the server is down)."""
        self._stopping.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None

    def __enter__(self) -> TapeServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def record(self, request: TapeRequest, miss: str = "") -> None:
        with self._guard:
            self.requests.append(request)
            if miss:
                self.misses.append(miss)

    def requests_between(self, start: float, end: float) -> list[TapeRequest]:
        with self._guard:
            return [r for r in self.requests if start <= r.at <= end]

    def wait_for(self, count: int, timeout_s: float) -> bool:
        """Wait until `count` requests arrived (a background drain's), or the timeout."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.count >= count:
                return True
            time.sleep(0.02)
        return self.count >= count


def _bind_probe() -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    return sock


def _first_user_line(body: bytes) -> str:
    try:
        data = json.loads(body)
        users = [m.get("content", "") for m in data.get("messages", []) if m.get("role") == "user"]
        return " ".join(str(users[0]).split())[:100] if users else ""
    except (ValueError, AttributeError, TypeError):
        return ""


def _handler_for(
    server: TapeServer, answers: dict[str, tuple[str, TapeEntry]]
) -> type[BaseHTTPRequestHandler]:
    names = ", ".join(t.name for t in server.tapes) or "no tape"

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            return  # quiet: the requests list is the log, and headers are never printed

        def _send(self, status: int, payload: bytes, content_type: str) -> None:
            with contextlib.suppress(OSError):
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        def do_POST(self) -> None:
            arrived = time.monotonic()
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            key = request_key("POST", self.path, body)
            authorized = server.expected_key is None or (
                self.headers.get("Authorization") == f"Bearer {server.expected_key}")
            if not authorized:
                server.record(TapeRequest(key, self.path, arrived, False, 401, False))
                self._send(401, b'{"error": {"message": "invalid api key"}}', "application/json")
                return
            found = answers.get(key)
            if found is None:
                note = _first_user_line(body)
                miss = f"TAPE MISS ({names}): POST {self.path} key={key} first user line: {note!r}"
                sys.stderr.write(miss + "\n")
                sys.stderr.flush()
                server.record(TapeRequest(key, self.path, arrived, False, 503, True), miss)
                error = {"error": {"message": miss, "type": "tape_miss", "key": key}}
                self._send(503, json.dumps(error).encode(), "application/json")
                return
            _, entry = found
            response = entry.response
            server.record(TapeRequest(key, self.path, arrived, True, response.status, True))
            if response.delay_ms and server._stopping.wait(response.delay_ms / 1000):
                return  # stopped while holding the answer back: the client sees a closed socket
            try:
                model = str(json.loads(body).get("model", ""))
            except (ValueError, AttributeError):
                model = ""
            payload, content_type = response.payload(model)
            self._send(response.status, payload, content_type)

    return Handler


@contextlib.contextmanager
def serving(*tape_files: str | Path, expected_key: str | None = None) -> Iterator[TapeServer]:
    """`with serving(path, ...) as server:` — started, and stopped on exit."""
    server = TapeServer.from_files(tape_files, expected_key=expected_key)
    server.start()
    try:
        yield server
    finally:
        server.stop()
