"""Per-turn signatures (§4.1): content, serialization, screening and redaction."""

from __future__ import annotations

import json

import pytest
from dsh_chapters_core.config import DEFAULTS
from dsh_chapters_core.events import InjectionKind
from dsh_chapters_core.signature import Signature, sign_turn
from dsh_chapters_core.turns import split_turns
from hypothesis import given
from hypothesis import strategies as st

from tests.core.conversation import Conversation

ROOT = "/home/dev/work/acme-api"


def _sign(c: Conversation, *, cwd: str = "", **config: object) -> Signature:
    (turn,) = split_turns(c.events).complete
    return sign_turn(turn, DEFAULTS.replace(**config), cwd=cwd)


def test_signature_holds_paths_commands_terms_size() -> None:
    c = Conversation().turn(
        "The JWT refresh in the auth middleware fails; fix the auth token refresh.",
        "Fixed the refresh: the middleware now renews the JWT token before expiry.",
        ("Read", {"file_path": "src/auth/middleware.ts"}, "export function refresh() {}"),
        ("Bash", {"command": "npm test && git diff"}, "FAIL src/auth/token.ts\n1 failed"),
        ("Edit", {"file_path": "./src/auth/middleware.ts", "old_string": "a", "new_string": "b"},
         "ok"),
    )
    sig = _sign(c)
    assert sig.seqs == tuple(range(1, 11))
    assert sig.paths == ("src/auth/middleware.ts", "src/auth/token.ts")
    assert sig.commands == ("npm test", "git diff")
    assert sig.terms[:4] == ("refresh", "auth", "jwt", "middleware")
    assert sig.size > 0
    assert sig.by == "deterministic"
    assert sig.at == c.events[-1].time


def test_paths_are_spelled_relative_to_the_transcripts_cwd() -> None:
    c = Conversation().turn(
        "why does the refresh fail?", "found it",
        ("Read", {"file_path": f"{ROOT}/src/acme/auth/token.py"}, "def refresh(): ..."),
        ("Bash", {"command": "pytest"}, f"FAILED src/acme/auth/token.py::test_refresh\n"
         f"rootdir: {ROOT}\n{ROOT}/.venv/bin/python -m pytest"),
        ("Edit", {"file_path": f"{ROOT}/src/acme/auth/middleware.py", "old_string": "a",
                  "new_string": "b"}, f"The file {ROOT}/src/acme/auth/middleware.py was updated."),
    )
    sig = _sign(c, cwd=ROOT)
    # one spelling per file; the project root and the tool's own binary are noise
    assert sig.paths == ("src/acme/auth/token.py", "src/acme/auth/middleware.py")
    unrooted = _sign(c)
    assert f"{ROOT}/src/acme/auth/token.py" in unrooted.paths
    assert "src/acme/auth/token.py" in unrooted.paths
    assert _sign(c, cwd=ROOT + "/") == sig


def test_the_primary_is_a_project_file_not_a_directory_or_an_outside_path() -> None:
    c = Conversation().turn(
        "where is decode_token called?", "twice in the middleware",
        ("Grep", {"pattern": "decode_token", "path": "src/acme"},
         "src/acme/auth/middleware.py:9:from acme.auth.token import decode_token"),
        ("Bash", {"command": "cat /etc/nginx/nginx.conf > /dev/null"}, ""),
        ("Read", {"file_path": f"{ROOT}/src/acme/auth/token.py"}, ""),
    )
    sig = _sign(c, cwd=ROOT)
    assert sig.paths == (
        "src/acme/auth/middleware.py", "src/acme/auth/token.py",  # files first, in touch order
        "src/acme", "/etc/nginx/nginx.conf",  # then a directory, then outside the project
    )


def test_noise_never_uses_up_the_path_limit() -> None:
    noise = "\n".join(f"{ROOT}/.venv/lib/m{i}.py /dev/null /route{i}" for i in range(30))
    c = Conversation().turn(
        "run it", "ok",
        ("Bash", {"command": "make"}, noise + "\nsrc/app.py"),
        ("Grep", {"pattern": "x", "path": "lib"}, "lib/a/b"),
    )
    sig = _sign(c, cwd=ROOT, signature_max_paths=2)
    assert sig.paths == ("src/app.py", "lib")


def test_to_json_line_is_the_records_shape() -> None:
    sig = Signature(seqs=(41, 42), paths=("src/a.ts",), commands=("npm test",), terms=("auth",),
                    size=1830, at="2026-09-17T10:00:00Z")
    line = sig.to_json_line()
    assert line == (
        '{"seqs":[41,42],"paths":["src/a.ts"],"commands":["npm test"],"terms":["auth"],'
        '"size":1830,"by":"deterministic","at":"2026-09-17T10:00:00Z"}'
    )
    assert "\n" not in line
    assert Signature.from_json_line(line) == sig


@pytest.mark.parametrize(
    "line",
    [
        "[]",
        '{"seqs":[1],"paths":[],"commands":[],"terms":[]}',
        '{"seqs":["1"],"paths":[],"commands":[],"terms":[],"size":1}',
        '{"seqs":[1],"paths":[3],"commands":[],"terms":[],"size":1}',
        '{"seqs":[1],"paths":[],"commands":[],"terms":[],"size":true}',
        "not json",
    ],
)
def test_from_json_line_rejects_malformed(line: str) -> None:
    with pytest.raises(ValueError):
        Signature.from_json_line(line)


def test_host_injections_never_reach_the_signature() -> None:
    c = (
        Conversation()
        .start()
        .inject(InjectionKind.INSTRUCTIONS, "kubernetes kubernetes kubernetes deployment")
        .user("<system-reminder>kubernetes helm chart</system-reminder>rename the parser module")
        .assistant("renamed the parser module")
        .end()
    )
    sig = _sign(c)
    assert "kubernetes" not in sig.terms
    assert sig.terms[:2] == ("module", "parser")


def test_secrets_never_reach_the_signature() -> None:
    secret = "ghp_" + "A1b2C3d4E5" * 4
    pem = "-----BEGIN PRIVATE KEY-----\nMIIE/abc/def/ghi+jkl\n-----END PRIVATE KEY-----"
    c = Conversation().turn(
        f"use token {secret} for the deploy",
        "deployed",
        ("Bash", {"command": f"curl -H 'Authorization: Bearer {secret}' https://h/x"}, pem),
    )
    line = _sign(c).to_json_line()
    assert secret.lower() not in line.lower()
    assert "MIIE" not in line
    assert "redacted" not in json.loads(line)["terms"]


def test_repeated_delivery_counts_once_and_large_results_count_as_a_stub() -> None:
    c = Conversation().start().user("go").call("Read", {"file_path": "a.py"}, "x" * 400)
    c.result("call-1", "y" * 40).assistant("done").end()
    small = _sign(c)
    c2 = Conversation().start().user("go").call("Read", {"file_path": "a.py"}, "y" * 40)
    c2.assistant("done").end()
    assert small.size == _sign(c2).size
    big = Conversation().start().user("go")
    big.call("Read", {"file_path": "a.py"}, "z" * 100_000)
    big.assistant("done").end()
    assert _sign(big).size < 100


def test_limits_come_from_config() -> None:
    c = Conversation().turn(
        "alpha beta gamma delta", "epsilon",
        ("Read", {"paths": [f"src/m{i}.py" for i in range(10)]}, ""),
        ("Bash", {"command": "; ".join(f"tool{i} x" for i in range(10))}, ""),
    )
    sig = _sign(c, signature_max_paths=3, signature_max_commands=2, signature_top_terms=2)
    assert sig.paths == ("src/m0.py", "src/m1.py", "src/m2.py")
    assert sig.commands == ("tool0", "tool1")
    assert len(sig.terms) == 2


_word = st.text(alphabet="abcdefghij /._-", max_size=30)


@given(st.lists(st.tuples(_word, _word, _word), min_size=1, max_size=5))
def test_signing_is_deterministic_and_round_trips(turns: list[tuple[str, str, str]]) -> None:
    c = Conversation()
    for user, path, answer in turns:
        c.turn(user, answer, ("Read", {"file_path": path}, path))
    for turn in split_turns(c.events).complete:
        sig = sign_turn(turn, DEFAULTS)
        assert sign_turn(turn, DEFAULTS) == sig
        assert Signature.from_json_line(sig.to_json_line()) == sig
