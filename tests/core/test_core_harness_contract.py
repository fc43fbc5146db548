"""The harness kit itself: a small, correct reader of a toy format passes every check, and each
way of breaking the contract is caught by the check that names it."""

from __future__ import annotations

import dataclasses

import pytest
from dsh_chapters_core.errors import InputError
from dsh_chapters_core.events import (
    AssistantMessage,
    Event,
    LineAccount,
    Transcript,
    TurnEnd,
    TurnStart,
    UserMessage,
)
from dsh_chapters_core.testing.harness_contract import (
    HARNESS_CHECKS,
    HarnessContractError,
    HarnessSample,
    check_harness,
    run_harness_check,
)

# The toy format: `> prompt`, `< reply`, `.` ends the turn, `#` comments are skipped.
SAMPLE = HarnessSample(
    filename="toy/session.toy",
    data=b"# toy session s-1\n> first prompt\n< first reply\n.\n> second prompt\n"
    b"< second reply\n.\n> third, still running\n< partial\n",
    texts=("first prompt", "first reply", "second prompt", "second reply"),
    turns=2,
)


class ToyReader:
    name = "toy"
    close_at_eof = False
    raise_on_bad = False
    count_comments = True

    def sniff(self, head: bytes) -> bool:
        return head.startswith(b"# toy session")

    def discover(self, source: str | None, cwd: str) -> list[str]:
        return []

    def read(self, path: str) -> Transcript:
        try:
            with open(path, "rb") as handle:
                raw = handle.read()
        except OSError as exc:
            raise InputError(f"{path}: cannot read ({exc.strerror})",
                             hint="check the path") from None
        if not raw.startswith(b"# toy session"):
            if self.raise_on_bad:
                raise ValueError("not toy")
            lines = raw.count(b"\n")
            raise InputError(f"{path}: not a toy session (0 of {lines} lines)",
                             hint="pass a toy session file")
        text = raw.decode("utf-8", "replace")
        events: list[Event] = []
        imported = skipped = malformed = 0
        is_open = False
        for seq, line in enumerate(text.splitlines()):
            if line.startswith("#"):
                skipped += self.count_comments
            elif line.startswith("> "):
                if is_open:
                    events.append(TurnEnd(seq))
                events += [TurnStart(seq), UserMessage(seq, line[2:])]
                is_open, imported = True, imported + 1
            elif line.startswith("< "):
                events.append(AssistantMessage(seq, line[2:]))
                imported += 1
            elif line == "." and is_open:
                events.append(TurnEnd(seq))
                is_open, imported = False, imported + 1
            else:
                malformed += 1
        if is_open and self.close_at_eof:
            events.append(TurnEnd(len(events)))
        account = LineAccount(imported=imported, skipped=skipped, malformed=malformed,
                              skip_rules=(("comment", skipped),) if skipped else (),
                              malformed_lines=tuple(range(malformed)))
        return Transcript("s-1", "toy", tuple(events), account)


def test_a_correct_reader_passes_every_check() -> None:
    assert check_harness(ToyReader, SAMPLE) == tuple(c.name for c in HARNESS_CHECKS)


def _check(name: str):  # type: ignore[no-untyped-def]
    return next(c for c in HARNESS_CHECKS if c.name == name)


@pytest.mark.parametrize(
    ("flaw", "check"),
    [
        ({"close_at_eof": True}, "completeness_guard"),
        ({"raise_on_bad": True}, "bad_input"),
        ({"count_comments": False}, "every_line_accounted"),
    ],
)
def test_each_flaw_is_caught_by_its_check(flaw: dict[str, bool], check: str) -> None:
    broken = type("Broken", (ToyReader,), flaw)
    with pytest.raises(HarnessContractError, match=f"^{check}: "):
        run_harness_check(_check(check), broken, SAMPLE)


def test_a_reader_that_rewrites_text_fails_verbatim() -> None:
    class Stripping(ToyReader):
        def read(self, path: str) -> Transcript:
            t = super().read(path)
            events = tuple(dataclasses.replace(e, text=e.text.upper())
                           if isinstance(e, UserMessage) else e for e in t.events)
            return dataclasses.replace(t, events=events)

    with pytest.raises(HarnessContractError, match=r"^verbatim_text: 2 of 4 texts"):
        run_harness_check(_check("verbatim_text"), Stripping, SAMPLE)
