"""The model door against the recorded-tape server: real HTTP on loopback (§6.1)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from dsh_chapters_core.config import DEFAULTS
from dsh_chapters_core.enrich.chapter import ChapterFile
from dsh_chapters_core.enrich.ladder import ask_model
from dsh_chapters_core.enrich.outcome import EnrichReason
from dsh_chapters_core.enrich.slice import cheap_slice, first_call
from dsh_chapters_core.errors import UsageError
from dsh_chapters_core.ports.model import ChatMessage, ModelCall, ModelError, ModelFailure
from dsh_chapters_core.search.aliases import EMPTY_ALIASES
from dsh_chapters_harness.model_door import (
    KNOWN_PROVIDERS,
    OpenAIChatDoor,
    chat_request_body,
    credential_name,
    resolve_base_url,
)
from dsh_chapters_harness.testing.tape_server import (
    Tape,
    TapeEntry,
    TapeResponse,
    TapeServer,
    load_tape,
    request_key,
)

from tests.fixtures.tapes import make_tapes

TAPES = Path(__file__).resolve().parents[2] / "fixtures" / "tapes"
CHAT = "/v1/chat/completions"
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def chapters() -> list[make_tapes.SampleChapter]:
    return make_tapes.sample_chapters()


def _chapter(sample: make_tapes.SampleChapter) -> ChapterFile:
    return ChapterFile(path=sample.path, fields={}, frontmatter="", body=sample.body)


@pytest.fixture
def serve() -> Iterator[callable]:
    started: list[TapeServer] = []

    def start(*names: str, tapes: tuple[Tape, ...] = (), key: str | None = None) -> TapeServer:
        server = TapeServer(tapes=(*tapes, *(load_tape(TAPES / f"{n}.json") for n in names)),
                            expected_key=key)
        started.append(server.start())
        return server

    yield start
    for server in started:
        server.stop()


def _door(server: TapeServer, route: str, **kw) -> OpenAIChatDoor:
    return OpenAIChatDoor(route, server.url, **kw)


def test_the_committed_tapes_are_what_make_tapes_writes() -> None:
    texts = make_tapes.tape_texts()
    for name, text in texts.items():
        committed = (TAPES / name).read_text(encoding="utf-8")
        assert committed == text, (
            f"tests/fixtures/tapes/{name} is stale: the chapters, the prompt or the request "
            "changed. Run `hatch run python tests/fixtures/tapes/make_tapes.py`.")


def test_a_valid_answer_round_trips_over_real_http(serve, chapters) -> None:
    server = serve("enrich-valid")
    with _door(server, make_tapes.MODEL) as door:
        result = ask_model(_chapter(chapters[0]), door, config=DEFAULTS, aliases=EMPTY_ALIASES)
    assert result.proposal is not None and result.calls == 1
    assert result.proposal.title.startswith("Make the HTTP client retry 503")
    assert server.count == 1 and server.misses == []
    assert server.requests[0].path == CHAT


def test_invalid_json_is_answered_by_valid_json_on_the_retry(serve, chapters) -> None:
    server = serve("enrich-invalid-then-valid")
    with _door(server, make_tapes.FLAKY_MODEL) as door:
        result = ask_model(_chapter(chapters[1]), door, config=DEFAULTS, aliases=EMPTY_ALIASES)
    assert result.proposal is not None and result.calls == 2
    assert server.count == 2 and server.misses == []


def test_twice_invalid_json_gives_up_after_two_calls(serve, chapters) -> None:
    server = serve("enrich-invalid-twice")
    with _door(server, make_tapes.BROKEN_MODEL) as door:
        result = ask_model(_chapter(chapters[2]), door, config=DEFAULTS, aliases=EMPTY_ALIASES)
    assert result.proposal is None and result.failure is EnrichReason.INVALID_TWICE
    assert server.count == 2 and server.misses == []


def test_a_slow_server_meets_the_hard_deadline(serve, chapters) -> None:
    server = serve("enrich-timeout")
    config = DEFAULTS.replace(enrichment_timeout_ms=300)
    started = time.monotonic()
    with _door(server, make_tapes.SLOW_MODEL) as door:
        result = ask_model(_chapter(chapters[0]), door, config=config, aliases=EMPTY_ALIASES)
    elapsed = time.monotonic() - started
    assert result.failure is EnrichReason.TIMEOUT and result.calls == 1
    assert elapsed < make_tapes.SLOW_DELAY_MS / 1000 / 2, elapsed
    assert "0.3 s" in result.detail


def test_a_server_that_is_down_is_one_quick_failure(serve, chapters) -> None:
    server = serve("enrich-down")
    with _door(server, make_tapes.MODEL) as door:
        result = ask_model(_chapter(chapters[0]), door, config=DEFAULTS, aliases=EMPTY_ALIASES)
    assert result.failure is EnrichReason.DOWN and result.calls == 1
    assert server.count == 0


def test_a_stopped_server_is_down(serve, chapters) -> None:
    server = serve("enrich-valid")
    server.stop()
    call = first_call(cheap_slice(chapters[0].body, DEFAULTS), DEFAULTS)
    with _door(server, make_tapes.MODEL) as door, pytest.raises(ModelError) as caught:
        door.complete(call)
    assert caught.value.code is ModelFailure.DOWN


def test_an_unknown_request_is_a_loud_503_named_in_the_output(serve, capsys) -> None:
    server = serve("enrich-valid")
    call = ModelCall((ChatMessage("user", "a request no tape has"),), 50, 5.0)
    with _door(server, make_tapes.MODEL) as door, pytest.raises(ModelError) as caught:
        door.complete(call)
    assert caught.value.code is ModelFailure.HTTP
    key = request_key("POST", CHAT, chat_request_body("enricher-1", call))
    assert "HTTP 503" in caught.value.message and key in caught.value.message
    assert "TAPE MISS" in capsys.readouterr().err
    assert server.misses and key in server.misses[0] and server.count == 1


def _one_shot(call: ModelCall, response: TapeResponse, *, model: str = "m",
              reasoning: bool = True) -> Tape:
    key = request_key("POST", CHAT, chat_request_body(model, call, reasoning=reasoning))
    return Tape("inline", (TapeEntry(key, response, "inline"),))


def test_the_key_is_sent_as_a_bearer_token_and_never_shown(serve) -> None:
    secret = "sk-test-5b0e7c1d9a"
    call = ModelCall((ChatMessage("user", "hello"),), 50, 5.0)
    server = serve(tapes=(_one_shot(call, TapeResponse(content="ok")),), key=secret)
    with _door(server, "openai/m", api_key=secret) as door:
        assert door.complete(call) == "ok"
        assert secret not in repr(door)
    with _door(server, "openai/m", api_key="sk-wrong") as door, \
            pytest.raises(ModelError) as caught:
        door.complete(call)
    assert caught.value.code is ModelFailure.AUTH
    assert "sk-wrong" not in caught.value.message and secret not in caught.value.message
    assert [r.authorized for r in server.requests] == [True, False]


def test_a_server_without_reasoning_effort_is_asked_again_without_it(serve) -> None:
    call = ModelCall((ChatMessage("user", "hello"),), 50, 5.0)
    rejected = _one_shot(call, TapeResponse(status=400, body={
        "error": {"message": "Unrecognized request argument supplied: reasoning_effort"}}))
    plain = _one_shot(call, TapeResponse(content="plain"), reasoning=False)
    server = serve(tapes=(rejected, plain))
    with _door(server, "vllm/m") as door:
        assert door.complete(call) == "plain"
        assert door.complete(call) == "plain"  # remembered: no second 400
    assert [r.status for r in server.requests] == [400, 200, 200]


@pytest.mark.parametrize(("response", "code"), [
    (TapeResponse(body={"choices": []}), ModelFailure.MALFORMED),
    (TapeResponse(text="<html>proxy error</html>"), ModelFailure.MALFORMED),
    (TapeResponse(body={"choices": [{"message": {"content": None},
                                     "finish_reason": "length"}]}), ModelFailure.MALFORMED),
    (TapeResponse(status=500, body={"error": {"message": "model not loaded"}}),
     ModelFailure.HTTP),
])
def test_answers_that_are_not_completions_fail_with_a_code(serve, response, code) -> None:
    call = ModelCall((ChatMessage("user", "hello"),), 50, 5.0)
    server = serve(tapes=(_one_shot(call, response),))
    with _door(server, "vllm/m") as door, pytest.raises(ModelError) as caught:
        door.complete(call)
    assert caught.value.code is code


def test_the_request_is_small_and_structured(serve, chapters) -> None:
    call = first_call(cheap_slice(chapters[0].body, DEFAULTS), DEFAULTS)
    body = chat_request_body("qwen3:8b", call)
    assert body["max_tokens"] == DEFAULTS.enrichment_max_tokens
    assert body["reasoning_effort"] == "low" and body["temperature"] == 0
    assert body["response_format"] == {"type": "json_object"}
    assert len(json.dumps(body)) < 4 * (DEFAULTS.enrichment_slice_chars * 3 + 2000)


def test_routes_resolve_to_a_base_url_or_refuse() -> None:
    assert resolve_base_url("ollama/qwen3:8b") == KNOWN_PROVIDERS["ollama"]
    assert resolve_base_url("mybox/m", "http://10.0.0.2:8000/v1/") == "http://10.0.0.2:8000/v1"
    with pytest.raises(UsageError, match="known providers"):
        resolve_base_url("mybox/m")
    with pytest.raises(UsageError, match="not provider/model"):
        resolve_base_url("ollama/")
    assert credential_name("openai/gpt-4o-mini") == "enrichment-openai"
    assert credential_name("llama.cpp/q") == "enrichment-llama.cpp"
