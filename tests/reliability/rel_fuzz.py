"""Fuzzing (hypothesis, derandomized so every run is the same): the three transcript readers,
frontmatter, curation lines, config files and TreeDX responses. No exception escapes a
boundary (only the boundary's own error: InputError, ConfigError, TransportError), and
nothing is written outside the store.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import httpx
import pytest
from dsh_chapters.services.transcripts import read_guarded
from dsh_chapters_core.curation import parse_facts
from dsh_chapters_core.errors import ConfigError, InputError, TransportError
from dsh_chapters_fs.chapterfile import frontmatter_problem, parse_document
from dsh_chapters_fs.configfile import read_config_file
from dsh_chapters_treedx.client import CallError, TreeDXClient
from dsh_chapters_treedx.wire import ListPathsRequest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.acceptance.steps_common import Machine

ORIGIN = "https://github.com/acme/widgets.git"
KEYS = ["type", "message", "content", "role", "text", "stop_reason", "sessionId", "uuid",
        "source", "turn", "seedLength", "parentSession", "toolCallId", "createdAt",
        "parentUuid", "timestamp", "payload", "id", "data", "seq", "time", "blocks", "name",
        "arguments", "callId", "tool_use_id", "input", "cwd", "isSidechain", "toolUseResult"]
TYPES = ["user", "assistant", "summary", "session_meta", "response_item", "event_msg",
         "turn_context", "user/message", "assistant/message", "tool/call", "tool/result",
         "turn/start", "turn/end", "session", "session/end-seed", "command/run",
         "command/done", "compaction/summary", "text", "tool_use", "tool_result",
         "message", "function_call", "function_call_output", "reasoning"]

_scalars = (st.none() | st.booleans() | st.integers(-(2**70), 2**70)
            | st.floats(allow_nan=True) | st.text(max_size=20) | st.sampled_from(TYPES)
            | st.just("\ud800") | st.just("x" * 300))
_values = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=4)
    | st.dictionaries(st.sampled_from(KEYS) | st.text(max_size=6), inner, max_size=5),
    max_leaves=25,
)
_records = st.dictionaries(st.sampled_from(KEYS), _values, min_size=1, max_size=8)


def _line(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=True).encode()


_lines = st.one_of(
    _records.map(_line),
    st.binary(max_size=200),
    st.integers(1, 4000).map(lambda n: b'{"type": "user", "x": ' + b"[" * n + b"]" * n + b"}"),
    st.just(b'{"type": "user", "sessionId": "' + b"9" * 5000 + b'"}'),
    st.just(b'{"type": "assistant", "message": {"content": "\\ud800\\udfff"}}'),
)
_files = st.lists(_lines, min_size=1, max_size=12).map(lambda ls: b"\n".join(ls) + b"\n")


def _machine(root: Path) -> Machine:
    workspace = root / "box" / "widgets"
    (workspace / ".git").mkdir(parents=True)
    (workspace / ".git" / "config").write_text(f'[remote "origin"]\n\turl = {ORIGIN}\n')
    home = root / "box" / "home"
    home.mkdir()
    return Machine("box", workspace, home, {"DSH_HOME": str(home),
                                            "DSH_CHAPTERS_HARNESS_ID": "box",
                                            "HOME": str(root / "box"), "PATH": "/usr/bin:/bin"})


def _outside(root: Path, store: Path, inputs: Path) -> set[str]:
    found = set()
    for dirpath, _dirs, names in os.walk(root):
        here = Path(dirpath)
        if here in (store, inputs) or store in here.parents or inputs in here.parents:
            continue
        found |= {str(here / n) for n in names}
    return found


def _run(examples: int, strategy: Any, check: Any) -> None:
    settings(max_examples=examples, deadline=None, derandomize=True, database=None,
             suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])(
        given(strategy)(check))()


@pytest.mark.slow
def test_transcript_readers_raise_only_input_errors(tmp_path: Path, size: Any,
                                                    record: Any) -> None:
    from dsh_chapters.services.archive import archive_and_log

    m = _machine(tmp_path)
    app = m.app()
    inputs = tmp_path / "inputs"
    inputs.mkdir()
    before = _outside(tmp_path, m.store, inputs)
    outcomes = {"read": 0, "refused": 0}
    counter = iter(range(10**9))

    def check(data: bytes) -> None:
        path = inputs / f"s-{next(counter)}.jsonl"
        path.write_bytes(data)
        for reader in app.harnesses.values():
            try:
                transcript = read_guarded(app, reader, str(path))
                archive_and_log(app, transcript)
                outcomes["read"] += 1
            except InputError:
                outcomes["refused"] += 1

    examples = size("fuzz_examples")
    _run(examples, _files, check)
    assert _outside(tmp_path, m.store, inputs) - before <= {str(m.store)}
    record("transcript files x readers", f"{examples} x {len(app.harnesses)}: "
           f"{outcomes['read']} read, {outcomes['refused']} refused with InputError, 0 raised")


_yaml_bits = st.sampled_from([
    "date: 2026-13-45", "date: 2026-02-30T25:61:00Z", "title: &a [x, *a]", "a: &x [1]\nb: *x",
    "topics: 5", "seqRange: [1, two]", "messages: {user: [1]}", "? [a, b]\n: 1", "{1: a, b: 2}",
    "title: !!python/object:os.system x", "kind: rule", "- a\n- b", "title: [[[[[[[[[[",
    "nest: " + "[" * 2000 + "]" * 2000, "n: " + "[" * 30 + "]" * 30,
    "title: \"\\ud800\"", "x: 1e999", ": :", "\t\x00",
])
_frontmatter = st.lists(_yaml_bits | st.text(max_size=40), max_size=6).map(
    lambda parts: "---\n" + "\n".join(parts) + "\n---\nbody\n")


def test_frontmatter_never_raises(size: Any, record: Any) -> None:
    problems = {"quarantined": 0, "read": 0}

    def check(text: str) -> None:
        doc = parse_document("s1/chapters/001-x.md", text)
        reason = frontmatter_problem("s1/chapters/001-x.md",
                                     text.encode("utf-8", "surrogatepass"))
        quarantined = any(k == "frontmatterError" for k, _ in doc.extra)
        problems["quarantined" if quarantined or reason else "read"] += 1

    examples = size("fuzz_examples") * 5
    _run(examples, _frontmatter, check)
    record("frontmatter blocks", f"{examples}: {problems['read']} read, "
           f"{problems['quarantined']} quarantined, 0 raised")


def test_curation_lines_never_raise(size: Any, record: Any) -> None:
    lines = st.lists(_records.map(lambda r: json.dumps(r)) | st.text(max_size=60)
                     | st.integers(1, 3000).map(lambda n: "[" * n + "]" * n), max_size=10)
    seen = {"malformed": 0, "facts": 0}

    def check(parts: list[str]) -> None:
        log = parse_facts("box", "\n".join(parts))
        seen["malformed"] += log.malformed
        seen["facts"] += len(log.facts)

    examples = size("fuzz_examples") * 5
    _run(examples, lines, check)
    record("curation logs", f"{examples}: {seen['facts']} facts, {seen['malformed']} malformed "
           "lines counted, 0 raised")


def test_config_files_raise_only_config_errors(tmp_path: Path, size: Any, record: Any) -> None:
    toml_bits = st.sampled_from([
        "mergeThreshold = 2.0", "chapterLimit = \"x\"", "harnessId = \"../x\"", "[a]\nb = 1",
        "redactionPatterns = [\"(\"]", "poolFileMaxBytes = 1", "x = [" * 50, "= =", "\x00",
        "readerLineMaxBytes = 99999999999999", "knowledgeProvider = \"svn\"", "a = 1\na = 2",
    ])
    files = st.lists(toml_bits | st.text(max_size=40), max_size=5).map("\n".join)
    counter = iter(range(10**9))
    seen = {"ok": 0, "refused": 0}

    def check(text: str) -> None:
        path = tmp_path / f"c{next(counter)}.toml"
        path.write_bytes(text.encode("utf-8", "surrogatepass"))
        try:
            read_config_file(path)
            seen["ok"] += 1
        except ConfigError:
            seen["refused"] += 1

    examples = size("fuzz_examples") * 5
    _run(examples, files, check)
    directory = tmp_path / "config.toml"
    directory.mkdir()
    with pytest.raises(ConfigError, match="is a directory"):
        read_config_file(directory)
    record("config files", f"{examples}: {seen['ok']} valid, {seen['refused']} refused with "
           "ConfigError, 0 raised; a config.toml directory is a ConfigError")


def test_treedx_responses_raise_only_transport_errors(size: Any, record: Any) -> None:
    bodies = st.one_of(
        st.binary(max_size=80),
        _values.map(lambda v: json.dumps(v).encode()),
        st.dictionaries(st.sampled_from(["ok", "error", "entries", "page", "code", "message",
                                         "retryAfterMs", "nextCursor", "paths"]),
                        _values, max_size=5).map(lambda v: json.dumps(v).encode()),
        st.just(b'{"ok": true, "entries": [{"path": 1}]'),  # truncated JSON
    )
    answers = st.tuples(st.sampled_from([200, 201, 400, 401, 403, 404, 409, 429, 500, 503]),
                        bodies)
    seen = {"answered": 0, "refused": 0}

    def check(answer: tuple[int, bytes]) -> None:
        status, body = answer
        transport = httpx.MockTransport(lambda request: httpx.Response(status, content=body))
        client = TreeDXClient("http://127.0.0.1:9", "tok-fuzz", timeout_ms=200,
                              sleep=lambda _s: None, transport=transport)
        try:
            client.list_paths("r1", ListPathsRequest(ref="main", limit=50))
            seen["answered"] += 1
        except (TransportError, CallError):
            seen["refused"] += 1
        finally:
            client.close()

    examples = size("fuzz_examples") * 5
    _run(examples, answers, check)
    record("TreeDX responses", f"{examples}: {seen['answered']} shaped, {seen['refused']} "
           "refused with a transport error, 0 raised")
