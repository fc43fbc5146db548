"""Composition quality benchmark: how close topic-sequential chapters (§4.2) come to the tasks.

The three realistic fixtures (Claude Code, Codex, DSH; one working day of six tasks) are read
through the harness readers, split into complete turns and signed exactly as an archive does.
Every turn is labelled with its ground-truth task from the script the fixtures are generated
from (`tests/fixtures/conversation_script.py`, matched by the turn's prompt). Then, for a
range of τ (`mergeThreshold`), the composer runs and is scored:

- `chapters` against `taskSegments` (runs of consecutive turns of one task: the ideal count);
- boundary precision: of the composer's splits, how many fall where the task changes;
- boundary recall: of the task changes, how many the composer split at. A missed change is a
  wrong merge, and a wrong merge is permanent (§4.4), so recall 1.0 is the bar a default must
  clear; precision says how much over-splitting is left;
- purity: the share of turns whose chapter's majority task is their own task.

Variants switch off one improvement each (project-relative paths, the recent-members window,
the continuation rule) so every change is measured, side by side, in the same run.

    python benchmarks/composition_quality.py [--tau-min 0 --tau-max 0.5 --tau-step 0.025]

Writes `benchmarks/results/composition_quality.json` and prints one table per variant.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script: make `tests.fixtures` importable
    sys.path.insert(0, str(ROOT))

from dsh_chapters_core.compose import compose_chapters  # noqa: E402
from dsh_chapters_core.config import DEFAULTS, Config  # noqa: E402
from dsh_chapters_core.events import UserMessage  # noqa: E402
from dsh_chapters_core.signature import Signature, sign_turn  # noqa: E402
from dsh_chapters_core.turns import Turn, split_turns  # noqa: E402
from dsh_chapters_harness.claude_code import ClaudeCodeReader  # noqa: E402
from dsh_chapters_harness.codex import CodexReader  # noqa: E402
from dsh_chapters_harness.dsh import DshReader  # noqa: E402

from tests.fixtures import ALL_TRANSCRIPTS  # noqa: E402
from tests.fixtures.conversation_script import TURNS  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results" / "composition_quality.json"
READERS = {"claude-code": ClaudeCodeReader(), "codex": CodexReader(), "dsh": DshReader()}
PROMPT_TASKS = {turn.prompt: turn.task for turn in TURNS}
SCRIPT_ORDER = {turn.prompt: position for position, turn in enumerate(TURNS)}


@dataclass(frozen=True)
class Variant:
    name: str
    description: str
    with_cwd: bool
    settings: dict[str, Any]


VARIANTS = (
    Variant("default", "everything on: project-relative paths, recent window, continuation",
            True, {}),
    Variant("no-cwd", "paths not relativized against the transcript's cwd", False, {}),
    Variant("whole-chapter", "overlap against the whole chapter's union (overlapWindowTurns=0)",
            True, {"overlap_window_turns": 0}),
    Variant("no-continuation", "continuation rule off (continuationMaxTerms=-1)", True,
            {"continuation_max_terms": -1}),
    Variant("record-r28", "only the record's rules as first written: no cwd, whole chapter, "
            "no continuation", False, {"overlap_window_turns": 0, "continuation_max_terms": -1}),
)


@dataclass(frozen=True)
class Fixture:
    name: str
    source: str
    cwd: str
    turns: tuple[Turn, ...]
    labels: tuple[str, ...]


def label_of(turn: Turn) -> tuple[str, int]:
    """The task and script position of a turn: its first user message that is a script prompt.

    An interrupted turn joins the next one (§4.3), so a turn may hold two prompts; the first
    one names it, and both always belong to one task in the script.
    """
    for event in turn.events:
        if isinstance(event, UserMessage):
            text = event.text.strip()
            if text in PROMPT_TASKS:
                return PROMPT_TASKS[text], SCRIPT_ORDER[text]
    raise SystemExit(f"turn {turn.index} carries no prompt of the script: cannot label it")


def load_fixtures() -> list[Fixture]:
    fixtures: list[Fixture] = []
    for name, path in ALL_TRANSCRIPTS.items():
        transcript = READERS[name].read(str(path))
        turns = split_turns(transcript.events).complete
        labelled = [label_of(turn) for turn in turns]
        positions = [position for _, position in labelled]
        if positions != sorted(positions):
            raise SystemExit(f"{name}: turns are out of script order; the labels would be wrong")
        fixtures.append(Fixture(name, str(path.relative_to(ROOT)), transcript.cwd, turns,
                                tuple(task for task, _ in labelled)))
    return fixtures


def task_changes(labels: Sequence[str]) -> set[int]:
    return {i for i in range(1, len(labels)) if labels[i] != labels[i - 1]}


def score(labels: Sequence[str], chapters: Sequence[Sequence[int]]) -> dict[str, Any]:
    """Chapter count, boundary precision and recall, purity and wrong merges of one plan."""
    changes = task_changes(labels)
    splits = {chapter[0] for chapter in chapters[1:]}
    hits = len(changes & splits)
    majority = sum(Counter(labels[i] for i in chapter).most_common(1)[0][1]
                   for chapter in chapters)
    return {
        "chapters": len(chapters),
        "taskSegments": len(changes) + 1 if labels else 0,
        "splits": len(splits),
        "correctSplits": hits,
        "boundaryPrecision": round(hits / len(splits), 4) if splits else 1.0,
        "boundaryRecall": round(hits / len(changes), 4) if changes else 1.0,
        "purity": round(majority / len(labels), 4) if labels else 1.0,
        "wrongMerges": len(changes - splits),
        "mixedChapters": sum(len({labels[i] for i in chapter}) > 1 for chapter in chapters),
    }


def total(rows: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Pooled over the fixtures (micro-averaged: every turn and boundary counts once)."""
    splits = sum(r["splits"] for r in rows.values())
    hits = sum(r["correctSplits"] for r in rows.values())
    changes = sum(r["taskSegments"] - 1 for r in rows.values())
    turns = sum(r["turns"] for r in rows.values())
    return {
        "chapters": sum(r["chapters"] for r in rows.values()),
        "taskSegments": sum(r["taskSegments"] for r in rows.values()),
        "boundaryPrecision": round(hits / splits, 4) if splits else 1.0,
        "boundaryRecall": round(hits / changes, 4) if changes else 1.0,
        "purity": round(sum(r["purity"] * r["turns"] for r in rows.values()) / turns, 4),
        "wrongMerges": sum(r["wrongMerges"] for r in rows.values()),
        "boundaryOverlapMax": max(r["boundaryOverlapMax"] for r in rows.values()),
    }


def sweep(fixtures: list[Fixture], signed: dict[str, list[Signature]], config: Config,
          taus: list[float]) -> list[dict[str, Any]]:
    rows = []
    for tau in taus:
        per_fixture: dict[str, dict[str, Any]] = {}
        for fixture in fixtures:
            plan = compose_chapters(signed[fixture.name], config.replace(merge_threshold=tau))
            rules = Counter(d.rule for d in plan.decisions)
            changes = task_changes(fixture.labels)
            per_fixture[fixture.name] = {
                "turns": len(fixture.turns),
                **score(fixture.labels, [c.turn_indices for c in plan.chapters]),
                # The highest overlap a turn that starts a new task had with the chapter
                # before it: τ must stay clear of it, or that task merges into the last one.
                "boundaryOverlapMax": max(
                    (d.overlap for d in plan.decisions if d.turn_index in changes), default=0.0
                ),
                "rules": dict(sorted(rules.items())),
            }
        rows.append({"tau": tau, "total": total(per_fixture), "fixtures": per_fixture})
    return rows


def choose(rows: list[dict[str, Any]], margin: float) -> dict[str, Any]:
    """The τ a default should take: no wrong merge, at least `margin` times the highest
    overlap any task-starting turn had, and the fewest chapters (ties: the larger τ)."""
    safe = [row for row in rows if row["total"]["wrongMerges"] == 0]
    clear = [row for row in safe
             if row["tau"] >= margin * row["total"]["boundaryOverlapMax"] and row["tau"] > 0]
    if not clear:
        return {"noWrongMerge": [r["tau"] for r in safe], "recommended": None}
    best = min(clear, key=lambda row: (row["total"]["chapters"], -row["tau"]))
    return {
        "noWrongMerge": [r["tau"] for r in safe],
        "margin": margin,
        "recommended": best["tau"],
        "chaptersAtRecommended": best["total"]["chapters"],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tau-min", type=float, default=0.0)
    parser.add_argument("--tau-max", type=float, default=0.3)
    parser.add_argument("--tau-step", type=float, default=0.0125)
    parser.add_argument("--margin", type=float, default=3.0,
                        help="a recommended τ is at least this many times the highest overlap "
                        "of a task-starting turn")
    parser.add_argument("--output", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    steps = round((args.tau_max - args.tau_min) / args.tau_step)
    taus = sorted({round(args.tau_min + i * args.tau_step, 4) for i in range(steps + 1)}
                  | {DEFAULTS.merge_threshold})

    fixtures = load_fixtures()
    signed_with = {f.name: [sign_turn(t, DEFAULTS, cwd=f.cwd) for t in f.turns] for f in fixtures}
    signed_without = {f.name: [sign_turn(t, DEFAULTS) for t in f.turns] for f in fixtures}
    variants = []
    for variant in VARIANTS:
        config = DEFAULTS.replace(**variant.settings)
        rows = sweep(fixtures, signed_with if variant.with_cwd else signed_without, config, taus)
        at_default = next(r for r in rows if r["tau"] == DEFAULTS.merge_threshold)
        variants.append({
            "name": variant.name,
            "description": variant.description,
            "cwd": variant.with_cwd,
            "settings": {k: getattr(config, k) for k in (
                "overlap_window_turns", "continuation_max_terms", "overlap_path_weight",
                "overlap_command_weight", "overlap_term_weight")},
            "atDefaultTau": at_default["total"],
            "choice": choose(rows, args.margin),
            "sweep": rows,
        })
    report = {
        "benchmark": "composition_quality",
        "python": platform.python_version(),
        "defaultTau": DEFAULTS.merge_threshold,
        "fixtures": {
            f.name: {"source": f.source, "cwd": f.cwd, "turns": len(f.turns),
                     "tasks": list(dict.fromkeys(f.labels))}
            for f in fixtures
        },
        "variants": variants,
    }
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")

    segments = {f.name: score(f.labels, [[0]])["taskSegments"] for f in fixtures}
    print("task segments: " + ", ".join(f"{k} {v}" for k, v in segments.items())
          + f" (turns: {', '.join(f'{f.name} {len(f.turns)}' for f in fixtures)})")
    for variant in variants:
        print(f"\n{variant['name']}: {variant['description']}")
        print("    τ     chapters (cc/codex/dsh)  precision  recall  purity  wrong  boundary-max")
        for row in variant["sweep"]:
            t, fx = row["total"], row["fixtures"]
            counts = "/".join(str(fx[f.name]["chapters"]) for f in fixtures)
            mark = "  <- default" if row["tau"] == DEFAULTS.merge_threshold else ""
            print(f"  {row['tau']:.4f}  {t['chapters']:3d} ({counts:>9s})"
                  f"       {t['boundaryPrecision']:.3f}    {t['boundaryRecall']:.3f}"
                  f"   {t['purity']:.3f}  {t['wrongMerges']:5d}  {t['boundaryOverlapMax']:.4f}"
                  f"{mark}")
        choice = variant["choice"]
        print(f"  recommended τ (no wrong merge, ≥ {args.margin}x boundary max, fewest chapters):"
              f" {choice['recommended']} → {choice.get('chaptersAtRecommended')} chapters")
    print(f"\n→ {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
