"""Transcript lines read by orjson (input_guard.fast_record) give exactly the records and the
line account that `json` gives: the same values of the same types, every odd line (a lone
surrogate, bytes that are not UTF-8, an integer past 64 bits, `NaN`, two records on a line,
nesting past the limit) read as before, through the full path."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from typing import Any

import pytest
from dsh_chapters_harness import input_guard, transcript_lines
from hypothesis import given, settings
from hypothesis import strategies as st

ODD_LINES = [
    b'{"a": 18446744073709551616}\n',  # past 64 bits: orjson would give a float
    b'{"a": -9223372036854775809}\n',
    b'{"a": 18446744073709551615, "b": -9223372036854775808}\n',
    b'{"a": 12345678901234567890123.5}\n',
    b'{"a": "\\ud800 lone"}\n',
    b'{"a": "\\ud83d\\ude00 a pair"}\n',
    b'{"a": "\xed\xa0\x80 encoded surrogate"}\n',
    b'{"a": "\xff not utf-8"}\n',
    b'{"a": NaN, "b": Infinity, "c": -Infinity}\n',
    b'{"a": 1e999}\n',
    b'{"a": 1}{"b": 2}\n',
    b'{"a": 1} {"b": 2}\r\n',
    b'{"a": 1} \x0c\n',
    b'\x0c{"a": 1}\n',
    b'  {"a": 1}  \r\n',
    b'{"a": 1, "a": 2}\n',
    b'{"a": "x\x01y"}\n',
    b'{"a": 1,}\n',
    b'\xef\xbb\xbf{"a": 1}\n',
    b'[1, 2]\n',
    b'{"a": ' + b"[" * 300 + b"]" * 300 + b"}\n",
    b'{"a": ' + b"[" * 2000 + b"]" * 2000 + b"}\n",
    b'{"n": -0, "f": -0.0, "e": 1E5, "g": 0.1e-400, "s": "\\u0000\\u00e9"}\n',
    b'{"a": "1234567890123456789 in a string"}\n',
    b'{"a": "' + b"x" * 100_000 + b'", "n": 7}\n',  # read in pieces: a bytearray
    b'{"a": "' + b"x" * (1 << 20) + b'", "n": 7}\n',  # over 1 MiB: the full path
    b"\n",
    b'{"a": 1',  # a partial last line
]


def _read(data: bytes, fast: bool, monkeypatch: pytest.MonkeyPatch) -> tuple[str, str]:
    """(repr of every line's records, repr of the line account), by one path."""
    with monkeypatch.context() as patch:
        if not fast:
            patch.setattr(input_guard, "fast_record", lambda line, limits=None: None)
        ledger = transcript_lines.LineLedger()
        found = list(transcript_lines.iter_line_records(io.BytesIO(data), ledger))
    # repr tells 1 from 1.0 and keeps a big int whole; nan compares equal in it.
    return repr(found), repr(ledger.account())


@pytest.mark.parametrize("line", ODD_LINES, ids=range(len(ODD_LINES)))
def test_an_odd_line_reads_as_json_reads_it(line: bytes, monkeypatch: pytest.MonkeyPatch
                                            ) -> None:
    data = b'{"before": 1}\n' + line + (b"" if not line.endswith(b"\n") else b'{"after": 2}\n')
    assert _read(data, True, monkeypatch) == _read(data, False, monkeypatch)


def test_a_line_read_in_pieces_is_read_by_orjson(monkeypatch: pytest.MonkeyPatch) -> None:
    line = b'{"a": "' + b"x" * 100_000 + b'"}\n'
    seen: list[type] = []
    real = input_guard.fast_record

    def spy(found: bytes | bytearray, limits: input_guard.GuardLimits | None = None
            ) -> dict[str, Any] | None:
        seen.append(type(found))
        return real(found, limits)

    monkeypatch.setattr(input_guard, "fast_record", spy)
    ledger = transcript_lines.LineLedger()
    found = list(transcript_lines.iter_line_records(io.BytesIO(line), ledger))
    assert seen == [bytearray]
    assert found == [(1, [{"a": "x" * 100_000}])]
    assert real(bytearray(line)) == {"a": "x" * 100_000}


def test_an_integer_past_64_bits_stays_an_int(monkeypatch: pytest.MonkeyPatch) -> None:
    ledger = transcript_lines.LineLedger()
    found = list(transcript_lines.iter_line_records(
        io.BytesIO(b'{"a": 18446744073709551616, "b": 1.5}\n'), ledger))
    assert found == [(1, [{"a": 18446744073709551616, "b": 1.5}])]
    assert isinstance(found[0][1][0]["a"], int)


_SCALARS = st.one_of(
    st.none(), st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.integers(min_value=-(2**63), max_value=2**64 - 1),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(alphabet=st.characters(min_codepoint=0, max_codepoint=0x10FFFF), max_size=30),
)
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.lists(inner, max_size=4)
    | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)


def _lines(records: list[dict[str, Any]], ascii_only: list[bool]) -> Iterator[bytes]:
    for record, ascii_only_ in zip(records, ascii_only, strict=True):
        text = json.dumps(record, ensure_ascii=ascii_only_)
        yield text.encode("utf-8", "surrogatepass") + b"\n"


@settings(max_examples=300, deadline=None)
@given(records=st.lists(st.dictionaries(st.text(max_size=8), _VALUES, max_size=5),
                        min_size=1, max_size=6),
       ascii_only=st.lists(st.booleans(), min_size=6, max_size=6),
       odd=st.lists(st.sampled_from(ODD_LINES[:-1]), max_size=3))
def test_any_lines_read_as_json_reads_them(records: list[dict[str, Any]],
                                           ascii_only: list[bool], odd: list[bytes]) -> None:
    data = b"".join(_lines(records, ascii_only[:len(records)])) + b"".join(odd)
    with pytest.MonkeyPatch.context() as monkeypatch:
        assert _read(data, True, monkeypatch) == _read(data, False, monkeypatch)
