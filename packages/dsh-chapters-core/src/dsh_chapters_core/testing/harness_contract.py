"""The harness reader conformance kit: what every `HarnessReader` must do, as plain functions.

A reader package (our DSH, Claude Code and Codex readers, or a third party's) calls these from
its own tests with a sample of its format:

    from dsh_chapters_core.testing.harness_contract import (
        HARNESS_CHECKS, HarnessSample, run_harness_check)

    SAMPLE = HarnessSample(filename="session.jsonl", data=..., texts=(...), turns=3)

    @pytest.mark.parametrize("check", HARNESS_CHECKS, ids=lambda c: c.name)
    def test_harness_contract(check):
        run_harness_check(check, MyReader, SAMPLE)

or all at once with `check_harness(MyReader, SAMPLE)`. Stdlib only: no pytest here.

- `make_reader()` returns a fresh reader (a reader class with a no-argument constructor fits).
- The sample is a finished session in the reader's format, as bytes, written under a fresh
  temporary directory at `filename` (a relative path: a reader may key on its directories).

The rules (§4.3 and the line-accounting rule of the archive report):

- every line is accounted: imported, skipped by a named rule, unknown or malformed, so
  `account.total` is the file's line count; a partial last line is the only exception, and it
  is flagged `truncated_tail`;
- prompts and replies are verbatim: each of `texts` is the exact text of one message event;
- the completeness guard: a turn is complete only once the file shows it ended, so reading any
  line-boundary prefix of the file never yields a complete turn that the whole file does not
  have, event for event (a turn once complete never changes as the file grows);
- a re-read of an unchanged file gives an equal transcript;
- bad input never raises past the reader: it reads with its lines accounted, or raises the
  core's `InputError` (numbers and a next step), never anything else.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from dsh_chapters_core.errors import InputError
from dsh_chapters_core.events import AssistantMessage, Transcript, UserMessage
from dsh_chapters_core.ports.harness import HarnessReader
from dsh_chapters_core.turns import Turn, split_turns

# The kit's own version, separate from the package's: a plugin pins the rules it passed.
KIT_VERSION = "1.0"

MakeReader = Callable[[], HarnessReader]

_SNIFF_BYTES = 4096  # the head a reader is shown, as the detector shows it
_GARBAGE = b"\x00\x9f\xff not a session \xfe\n\x01\x02\x03\n"


class HarnessContractError(AssertionError):
    """A reader broke the contract; the message names the check and what was seen."""


@dataclass(frozen=True, slots=True)
class HarnessSample:
    """One finished session in the reader's format, and what the kit must find in it."""

    filename: str  # relative path the kit writes the bytes to (e.g. `.specstory/history/x.md`)
    data: bytes
    texts: tuple[str, ...]  # prompts and replies the file holds, each exactly as written
    turns: int  # complete turns the whole file holds
    max_prefixes: int = 48  # line-boundary prefixes the completeness check reads (evenly spread)


@dataclass(frozen=True, slots=True)
class HarnessCheck:
    """One check of the harness reader contract: its name, what it checks, and its function."""

    name: str
    doc: str
    run: Callable[[_Bench], None]


def line_count(data: bytes) -> int:
    """Lines as a reader must account them: a last line without a newline counts as one."""
    return data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)


def _expect(condition: bool, message: str) -> None:
    if not condition:
        raise HarnessContractError(message)


class _Bench:
    """One scratch directory, the reader under test, and its sample."""

    def __init__(self, make_reader: MakeReader, sample: HarnessSample, scratch: str) -> None:
        self.make_reader = make_reader
        self.sample = sample
        self._scratch = scratch
        self._written = 0

    def write(self, data: bytes, filename: str | None = None) -> str:
        """The bytes at the sample's relative path, under a directory of their own."""
        self._written += 1
        relative = filename or self.sample.filename
        path = os.path.join(self._scratch, f"case-{self._written}", relative)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as handle:
            handle.write(data)
        return path

    def read(self, data: bytes, what: str) -> Transcript | InputError:
        """Read bytes; an `InputError` is returned, any other exception fails the check."""
        path = self.write(data)
        try:
            transcript = self.make_reader().read(path)
        except InputError as exc:
            _expect(bool(exc.message), f"{what}: InputError without a message")
            return exc
        except Exception as exc:
            raise HarnessContractError(
                f"{what}: the reader raised {type(exc).__name__}: {exc}"[:400]
            ) from None
        _expect(isinstance(transcript, Transcript), f"{what}: read returned {transcript!r}"[:300])
        return transcript

    def read_ok(self, data: bytes, what: str) -> Transcript:
        got = self.read(data, what)
        if isinstance(got, InputError):
            raise HarnessContractError(f"{what}: refused with InputError: {got.message}")
        return got


@contextmanager
def _bench(make_reader: MakeReader, sample: HarnessSample) -> Iterator[_Bench]:
    with tempfile.TemporaryDirectory(prefix="dsh-harness-contract-") as scratch:
        yield _Bench(make_reader, sample, scratch)


def _turn_key(turn: Turn) -> tuple[object, ...]:
    return turn.events


def _line_prefixes(data: bytes, limit: int) -> list[bytes]:
    """Line-boundary prefixes of `data`, at most `limit`, spread evenly, the shortest first."""
    ends = [i + 1 for i, byte in enumerate(data) if byte == 0x0A]
    if data and not data.endswith(b"\n"):
        ends.append(len(data))
    ends = ends[:-1]  # the whole file is not a prefix
    if len(ends) > limit > 0:
        step = len(ends) / limit
        ends = sorted({ends[int(i * step)] for i in range(limit)} | {ends[-1]})
    return [data[:end] for end in ends]


# ---- the checks ------------------------------------------------------------------------
def check_sniff(bench: _Bench) -> None:
    """The reader claims its own format's head and refuses garbage bytes."""
    reader = bench.make_reader()
    _expect(isinstance(reader, HarnessReader), f"{type(reader).__name__} is not a HarnessReader")
    _expect(bool(reader.name), "the reader has no name")
    _expect(reader.sniff(bench.sample.data[:_SNIFF_BYTES]), "sniff refused the sample's head")
    _expect(not reader.sniff(_GARBAGE), "sniff claimed garbage bytes")
    _expect(not reader.sniff(b""), "sniff claimed an empty head")


def check_every_line_accounted(bench: _Bench) -> None:
    """Every line of the sample is imported, skipped by a rule, unknown or malformed."""
    transcript = bench.read_ok(bench.sample.data, "the sample")
    account = transcript.account
    lines = line_count(bench.sample.data)
    _expect(account.total == lines, f"{lines} lines in the file, {account.total} accounted "
            f"({account.imported} imported, {account.skipped} skipped, {account.unknown} "
            f"unknown, {account.malformed} malformed)")
    _expect(not account.truncated_tail, "a finished sample was read as a truncated tail")
    _expect(account.imported > 0, "no line of the sample was imported")
    _expect(sum(n for _, n in account.skip_rules) == account.skipped,
            f"skip rules {account.skip_rules} do not add up to {account.skipped} skipped")
    _expect(sum(n for _, n in account.unknown_types) == account.unknown,
            f"unknown types {account.unknown_types} do not add up to {account.unknown} unknown")
    _expect(len(account.malformed_lines) == account.malformed,
            f"{account.malformed} malformed, but line numbers {account.malformed_lines}")
    _expect(transcript.session_id != "", "the transcript has no session id")
    seqs = [event.seq for event in transcript.events]
    _expect(seqs == sorted(seqs), "event seq decreases somewhere")


def check_verbatim_text(bench: _Bench) -> None:
    """Each prompt and reply the sample holds is one message event's text, byte for byte."""
    transcript = bench.read_ok(bench.sample.data, "the sample")
    said = {e.text for e in transcript.events if isinstance(e, UserMessage | AssistantMessage)}
    missing = [text for text in bench.sample.texts if text not in said]
    _expect(not missing, f"{len(missing)} of {len(bench.sample.texts)} texts are not verbatim "
            f"message events; first: {missing[0][:120]!r}" if missing else "")


def check_completeness_guard(bench: _Bench) -> None:
    """§4.3: a prefix of the file never completes a turn the whole file does not have."""
    whole = split_turns(bench.read_ok(bench.sample.data, "the sample").events)
    _expect(len(whole.complete) == bench.sample.turns,
            f"the sample holds {bench.sample.turns} complete turns, the reader found "
            f"{len(whole.complete)}")
    full = [_turn_key(turn) for turn in whole.complete]
    for prefix in _line_prefixes(bench.sample.data, bench.sample.max_prefixes):
        what = f"the first {line_count(prefix)} lines"
        got = bench.read(prefix, what)
        if isinstance(got, InputError):
            continue  # too short to be a session yet: refused with numbers, which is allowed
        split = split_turns(got.events)
        _expect(len(split.complete) <= len(full),
                f"{what}: {len(split.complete)} complete turns, the whole file has {len(full)}")
        for index, turn in enumerate(split.complete):
            _expect(_turn_key(turn) == full[index],
                    f"{what}: turn {index} is complete but differs from the whole file's "
                    f"(seq {turn.start_seq}..{turn.end_seq} vs "
                    f"{whole.complete[index].start_seq}..{whole.complete[index].end_seq})")


def check_idempotent_reread(bench: _Bench) -> None:
    """Reading the same unchanged file twice gives equal transcripts."""
    path = bench.write(bench.sample.data)
    first = bench.make_reader().read(path)
    second = bench.make_reader().read(path)
    _expect(first == second, "two reads of one unchanged file differ")
    again = bench.make_reader()
    _expect(again.read(path) == again.read(path), "one reader reading twice gives two answers")


def check_truncated_last_line(bench: _Bench) -> None:
    """A live session's half-written last line: accounted or flagged, and never completes a
    turn the whole file does not have."""
    data = bench.sample.data.rstrip(b"\n")
    last = data.rfind(b"\n") + 1
    cut = last + max(1, (len(data) - last) // 2)
    if cut >= len(data):
        cut = len(data)
    truncated = data[:cut]
    what = "the sample cut mid-way through its last line"
    transcript = bench.read_ok(truncated, what)
    complete_lines = truncated.count(b"\n")
    account = transcript.account
    expected = complete_lines if account.truncated_tail else complete_lines + 1
    _expect(account.total == expected,
            f"{what}: {complete_lines} complete lines + a partial one, {account.total} accounted "
            f"(truncated_tail={account.truncated_tail})")
    full = split_turns(bench.read_ok(bench.sample.data, "the sample").events).complete
    split = split_turns(transcript.events)
    for index, turn in enumerate(split.complete):
        _expect(index < len(full) and _turn_key(turn) == _turn_key(full[index]),
                f"{what}: turn {index} is complete but is not the whole file's turn {index}")


def _bad_inputs(data: bytes) -> Iterator[tuple[str, bytes]]:
    yield "an empty file", b""
    yield "binary garbage", _GARBAGE * 64
    yield "one 1 MiB line without a newline", b"x" * (1 << 20)
    lines = data.splitlines(keepends=True)
    yield "the sample with invalid UTF-8 in every line", b"".join(
        line[: len(line) // 2] + b"\xff\xfe" + line[len(line) // 2 :] for line in lines
    )
    yield "the sample with every other line dropped", b"".join(lines[::2])
    yield "the sample with its lines reversed", b"".join(reversed(lines))
    yield "the sample with NUL bytes", data.replace(b"\n", b"\x00\n")


def check_bad_input(bench: _Bench) -> None:
    """Bad input reads with every line accounted, or raises InputError: never anything else."""
    for what, data in _bad_inputs(bench.sample.data):
        got = bench.read(data, what)
        if isinstance(got, InputError):
            continue
        lines = line_count(data)
        partial = 1 if got.account.truncated_tail else 0
        _expect(got.account.total + partial == lines,
                f"{what}: {lines} lines, {got.account.total} accounted "
                f"(truncated_tail={got.account.truncated_tail})")
    reader = bench.make_reader()
    for what, path in (("a path that does not exist", os.path.join(bench.write(b""), "absent")),):
        try:
            reader.read(path)
        except InputError:
            continue
        except Exception as exc:
            raise HarnessContractError(f"{what}: the reader raised {type(exc).__name__}") from None
        raise HarnessContractError(f"{what}: the reader returned a transcript")


HARNESS_CHECKS: tuple[HarnessCheck, ...] = tuple(
    HarnessCheck(fn.__name__.removeprefix("check_"), (fn.__doc__ or "").strip(), fn)
    for fn in (
        check_sniff,
        check_every_line_accounted,
        check_verbatim_text,
        check_completeness_guard,
        check_idempotent_reread,
        check_truncated_last_line,
        check_bad_input,
    )
)


def run_harness_check(check: HarnessCheck, make_reader: MakeReader, sample: HarnessSample) -> None:
    """Run one check in a fresh scratch directory; the error names the check on failure."""
    with _bench(make_reader, sample) as bench:
        try:
            check.run(bench)
        except HarnessContractError as exc:
            raise HarnessContractError(f"{check.name}: {exc}") from None


def check_harness(make_reader: MakeReader, sample: HarnessSample) -> tuple[str, ...]:
    """Run every check; returns the names that passed, raises at the first failure."""
    passed: list[str] = []
    for check in HARNESS_CHECKS:
        run_harness_check(check, make_reader, sample)
        passed.append(check.name)
    return tuple(passed)
