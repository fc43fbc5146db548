"""Steps of features/finished_sessions.feature: a Claude Code 1.0.x session archived live,
then as finished, then resumed; state passes by `target_fixture`."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from pytest_bdd import given, parsers, then, when

from tests.acceptance.steps_common import CliResult, Machine, MakeMachine
from tests.fixtures import make_real_shapes as shapes

V1 = shapes.ROOT / "claude-code" / shapes.PROJECT_DIR / f"{shapes.V1_SESSION}.jsonl"
RESUMED_PROMPT = "One more: log how many rows were exported."
RESUMED_REPLY = "Logged: `exported 12000 rows` at INFO."


@dataclass
class FinishedSession:
    machine: Machine
    transcript: Path
    before: dict[str, bytes] | None = None


def bodies(machine: Machine) -> str:
    return "".join(p.read_text(encoding="utf-8").split("---\n", 2)[2]
                   for p in sorted(machine.store.glob("*/chapters/*.md")))


def chapter_files(machine: Machine) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(machine.store.glob("*/chapters/*.md"))}


@given(parsers.parse('machine "{name}" has a Claude Code 1.0.x session that never marks a turn '
                     "as ended"), target_fixture="finished")
def a_v1_session(make_machine: MakeMachine, name: str) -> FinishedSession:
    machine = make_machine(name)
    transcript = machine.home / "claude" / V1.name
    transcript.parent.mkdir(parents=True, exist_ok=True)
    transcript.write_bytes(V1.read_bytes())
    return FinishedSession(machine, transcript)


@when(parsers.parse('machine "{name}" archives that session as live'))
def archive_live(finished: FinishedSession, name: str) -> CliResult:
    return finished.machine.ok("archive", str(finished.transcript))


@when(parsers.parse('machine "{name}" archives that session as finished'))
def archive_final(finished: FinishedSession, name: str) -> CliResult:
    finished.before = chapter_files(finished.machine)
    return finished.machine.ok("archive", str(finished.transcript), "--final")


@then(parsers.parse("its chapters hold the first {count:d} prompts and not the last reply"))
def first_prompts_only(finished: FinishedSession, count: int) -> None:
    body = bodies(finished.machine)
    assert all(p in body for p in shapes.V1_PROMPTS[:count])
    assert shapes.V1_PROMPTS[count] not in body and shapes.V1_REPLIES[-1] not in body


@then("its chapters hold every prompt and the last reply verbatim, each once")
def every_prompt(finished: FinishedSession) -> None:
    body = bodies(finished.machine)
    for text in (*shapes.V1_PROMPTS, *shapes.V1_REPLIES):
        assert body.count(text) == 1, text


@then("exactly one chapter is marked ended: incomplete-turn")
def one_marked(finished: FinishedSession) -> None:
    marked = [n for n, raw in chapter_files(finished.machine).items()
              if b'\nended: "incomplete-turn"\n' in raw]
    assert len(marked) == 1
    listing = finished.machine.ok("list").out
    assert listing.count("(last turn unfinished)") == 1


@when("the session is resumed with one more turn and machine \"A\" archives it again")
def resumed(finished: FinishedSession) -> None:
    finished.before = chapter_files(finished.machine)
    last = json.loads(finished.transcript.read_text().splitlines()[-1])
    records = [
        {**last, "type": "user", "uuid": "resume-1", "parentUuid": last["uuid"],
         "message": {"role": "user", "content": RESUMED_PROMPT}},
        {**last, "uuid": "resume-2", "parentUuid": "resume-1",
         "message": {**last["message"], "content": [{"type": "text", "text": RESUMED_REPLY}],
                     "stop_reason": "end_turn"}},
    ]
    with finished.transcript.open("a", encoding="utf-8") as handle:
        handle.write("".join(json.dumps(r) + "\n" for r in records))
    report = finished.machine.ok("archive", str(finished.transcript), "--json").json()
    assert report["turns"]["archived"] == 1


@then("only that turn is archived, in a chapter that continues the final one")
def continues(finished: FinishedSession) -> None:
    assert finished.before is not None
    after = chapter_files(finished.machine)
    [new] = [raw.decode() for n, raw in after.items() if n not in finished.before]
    [final] = [n for n, raw in finished.before.items() if b"\nended: " in raw]
    assert f"/chapters/{final}\"" in new.split("---\n", 2)[1]
    assert RESUMED_REPLY in new and shapes.V1_REPLIES[-1] not in new.split("---\n", 2)[2]


@then("no chapter archived before was changed")
def unchanged(finished: FinishedSession) -> None:
    assert finished.before is not None
    after = chapter_files(finished.machine)
    assert {n: after[n] for n in finished.before} == finished.before
