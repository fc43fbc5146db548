"""The model door (§6): an OpenAI-compatible chat-completions client over httpx.

It serves llama.cpp, Ollama, vLLM, LM Studio and OpenAI alike: `POST <base>/chat/completions`
with a JSON-object answer requested, a low `max_tokens`, `temperature` 0 and a low reasoning
effort. A server that rejects `reasoning_effort` (HTTP 400) is asked once more without it and
never again by this door. Every call has a hard deadline: the whole answer, not each read,
must arrive within `timeout_s`.

A route is `provider/model` (`ollama/qwen3:8b`): the provider picks a default base URL
(`KNOWN_PROVIDERS`), the rest is the model name the server sees, and the whole route is what
provenance records. The optional key is sent as a bearer token and never appears in a message,
a repr or a log: this module builds its errors from codes, statuses and numbers.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from http import HTTPStatus
from typing import TYPE_CHECKING, Any

import attrs
import cattrs
from cattrs.preconf.json import make_converter
from dsh_chapters_core.errors import UsageError
from dsh_chapters_core.ports.model import ModelCall, ModelError, ModelFailure

if TYPE_CHECKING:  # httpx is the `model` extra: imported where a request is made, on use
    import httpx

# Where each provider's OpenAI-compatible endpoint listens by default.
KNOWN_PROVIDERS: Mapping[str, str] = {
    "openai": "https://api.openai.com/v1",
    "ollama": "http://127.0.0.1:11434/v1",
    "llamacpp": "http://127.0.0.1:8080/v1",
    "vllm": "http://127.0.0.1:8000/v1",
    "lmstudio": "http://127.0.0.1:1234/v1",
}
REASONING_EFFORT = "low"  # §6.1: thinking models run at low effort; not a tunable
_DETAIL_CHARS = 200  # how much of a server's error text a message quotes


def split_route(route: str) -> tuple[str, str]:
    """(`provider`, `model`) of `provider/model`; a route without a slash has no provider."""
    provider, sep, model = route.partition("/")
    if not sep:
        return "", route
    return provider, model


def resolve_base_url(route: str, base_url: str = "") -> str:
    """The explicit base URL, else the provider's default; refuses when there is neither."""
    if base_url:
        return base_url.rstrip("/")
    provider, model = split_route(route)
    if not route or not model:
        raise UsageError(f"enrichment model {route!r} is not provider/model",
                         hint="chapters enrich model ollama/qwen3:8b (or llamacpp/…, vllm/…, "
                              "openai/…)")
    if provider in KNOWN_PROVIDERS:
        return KNOWN_PROVIDERS[provider]
    known = ", ".join(sorted(KNOWN_PROVIDERS))
    raise UsageError(
        f"enrichment model {route!r}: no base URL, and {provider or 'no provider'!r} is not one "
        f"of the known providers ({known})",
        hint="set enrichmentBaseUrl, or run `chapters enrich model <provider/model> "
             "--base-url http://host:port/v1`")


def credential_name(route: str) -> str:
    """The credential store's name for this route's key (one per provider)."""
    provider, _ = split_route(route)
    cleaned = "".join(ch if ch.isalnum() or ch in "._-" else "-" for ch in provider or "model")
    return f"enrichment-{cleaned.strip('-._') or 'model'}"


# --- the wire: a chat completion, as servers send it (extra keys ignored) -------------------


@attrs.frozen
class _Message:
    """A chat completion's message: the model's text (None when the server sent none), its role."""

    content: str | None = None
    role: str = "assistant"


@attrs.frozen
class _Choice:
    """One choice of a chat completion: its message and why the server stopped generating."""

    message: _Message = attrs.field(factory=_Message)
    finish_reason: str | None = None


@attrs.frozen
class _Completion:
    """A chat completion as the server sends it; only its choices are read."""

    choices: list[_Choice] = attrs.field(factory=list)


_converter = make_converter(forbid_extra_keys=False)


def chat_request_body(model: str, call: ModelCall, *, reasoning: bool = True) -> dict[str, Any]:
    """The JSON body of one call (the tape server keys its recordings on this)."""
    body: dict[str, Any] = {
        "model": model,
        "messages": [{"role": m.role, "content": m.content} for m in call.messages],
        "max_tokens": call.max_tokens,
        "temperature": 0,
        "response_format": {"type": "json_object"},
        "stream": False,
    }
    if reasoning:
        body["reasoning_effort"] = REASONING_EFFORT
    return body


class OpenAIChatDoor:
    """Satisfies ports.model.ModelDoor."""

    def __init__(
        self,
        route: str,
        base_url: str = "",
        *,
        api_key: str | None = None,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self._route = route
        self._model = split_route(route)[1]
        self.base_url = resolve_base_url(route, base_url)
        self._key = api_key or None
        self._reasoning = True
        import httpx

        self._client = httpx.Client(transport=transport, follow_redirects=False)

    def __repr__(self) -> str:  # never the key
        return f"OpenAIChatDoor(route={self._route!r}, base_url={self.base_url!r})"

    @property
    def route(self) -> str:
        return self._route

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> OpenAIChatDoor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _scrub(self, text: str) -> str:
        return text.replace(self._key, "[key]") if self._key else text

    def complete(self, call: ModelCall) -> str:
        deadline = time.monotonic() + call.timeout_s
        status, payload = self._post(call, deadline)
        if status == HTTPStatus.BAD_REQUEST and self._reasoning:
            # A server that does not know `reasoning_effort` refuses the whole request: ask
            # once more without it, and leave it out from now on.
            self._reasoning = False
            status, payload = self._post(call, deadline)
        if status in (HTTPStatus.UNAUTHORIZED, HTTPStatus.FORBIDDEN):
            raise ModelError(ModelFailure.AUTH,
                             f"{self.base_url} answered HTTP {status}: the key is missing or "
                             "wrong (`chapters enrich model <route> --key-stdin` stores one)")
        if not 200 <= status < 300:
            detail = self._scrub(_error_text(payload))[:_DETAIL_CHARS]
            raise ModelError(ModelFailure.HTTP,
                             f"{self.base_url} answered HTTP {status}" + (
                                 f": {detail}" if detail else ""))
        return self._content(payload)

    def _post(self, call: ModelCall, deadline: float) -> tuple[int, bytes]:
        import httpx

        body = chat_request_body(self._model, call, reasoning=self._reasoning)
        headers = {"Accept": "application/json"}
        if self._key:
            headers["Authorization"] = f"Bearer {self._key}"
        url = f"{self.base_url}/chat/completions"
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise self._timeout(call)
        try:
            with self._client.stream("POST", url, json=body, headers=headers,
                                     timeout=httpx.Timeout(remaining)) as response:
                chunks: list[bytes] = []
                for chunk in response.iter_bytes():
                    chunks.append(chunk)
                    if time.monotonic() > deadline:  # a slow drip still meets the deadline
                        raise self._timeout(call)
                return response.status_code, b"".join(chunks)
        except httpx.TimeoutException:
            raise self._timeout(call) from None
        except (httpx.ConnectError, httpx.RemoteProtocolError, httpx.ReadError,
                httpx.WriteError) as exc:
            raise ModelError(ModelFailure.DOWN,
                             f"{self.base_url} did not answer ({type(exc).__name__})") from None

    def _timeout(self, call: ModelCall) -> ModelError:
        return ModelError(ModelFailure.TIMEOUT,
                          f"{self.base_url} gave no full answer within {call.timeout_s:g} s "
                          "(enrichmentTimeoutMs)")

    def _content(self, payload: bytes) -> str:
        try:
            completion = _converter.structure(json.loads(payload), _Completion)
        except (ValueError, TypeError, cattrs.BaseValidationError) as exc:
            raise ModelError(ModelFailure.MALFORMED,
                             f"{self.base_url} answered {len(payload)} bytes that are not a chat "
                             f"completion ({type(exc).__name__})") from None
        if not completion.choices:
            raise ModelError(ModelFailure.MALFORMED, f"{self.base_url} answered no choices")
        choice = completion.choices[0]
        if not choice.message.content:
            raise ModelError(ModelFailure.MALFORMED,
                             f"{self.base_url} answered no text (finish_reason "
                             f"{choice.finish_reason or 'none'}; enrichmentMaxTokens may be too "
                             "low for a thinking model)")
        return choice.message.content


def _error_text(payload: bytes) -> str:
    """A server's error message (`{"error": {"message": ...}}` or plain text), one line."""
    try:
        data = json.loads(payload)
    except ValueError:
        return " ".join(payload.decode("utf-8", "replace").split())
    if isinstance(data, dict):
        error = data.get("error")
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            return " ".join(error["message"].split())
        if isinstance(error, str):
            return " ".join(error.split())
    return ""
