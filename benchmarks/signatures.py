"""Signature benchmark: the median cost of `sign_turn` per completed turn (§4.1: ≤ 1 ms).

Signatures are computed synchronously at every turn end, so their cost sits on the
conversation path. The workload is seeded synthetic coding turns shaped like real ones: a
request, reasoning, several tool calls (reads, shell commands, edits, searches) whose results
range from a line to past the artifact floor, the odd credential and host injection, and an
answer. Each turn is signed once per round; rounds alternate turn order to spread cache effects.

    python benchmarks/signatures.py [--turns 400 --repeat 5 --result-chars 6000 --seed 7]

Writes the median, p90 and max per turn, the target and their ratio, and the workload shape to
`benchmarks/results/signatures.json`. Exits 1 if the median misses the target.
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import statistics
import sys
import time
from pathlib import Path

from dsh_chapters_core.config import DEFAULTS
from dsh_chapters_core.events import (
    AssistantMessage,
    Event,
    HostInjection,
    InjectionKind,
    Reasoning,
    ToolCall,
    ToolResult,
    TurnEnd,
    TurnStart,
    UserMessage,
)
from dsh_chapters_core.signature import sign_turn
from dsh_chapters_core.turns import Turn, split_turns

RESULTS = Path(__file__).resolve().parent / "results" / "signatures.json"
TARGET_MS = 1.0

WORDS = (
    "auth", "middleware", "token", "refresh", "session", "cache", "index", "chapter", "render",
    "signature", "compose", "search", "scorer", "pool", "mirror", "sync", "provider", "artifact",
    "redact", "frontmatter", "notice", "rule", "topic", "parser", "config", "lock", "store",
    "commit", "push", "pull", "fetch", "merge", "branch", "test", "fixture", "error", "retry",
)
DIRS = ("src/auth", "src/render", "src/sync", "tests/core", "packages/core/src", "docs", "lib")
EXTS = (".py", ".ts", ".md", ".toml", ".json")
COMMANDS = ("npm test", "git diff --stat", "pytest -x tests/core", "git status", "ls -la",
            "hatch run test tests/core -q", "cargo build", "rg -n TODO src")


def _prose(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(words)).capitalize() + "."


def _path(rng: random.Random) -> str:
    return f"{rng.choice(DIRS)}/{rng.choice(WORDS)}_{rng.randint(1, 9)}{rng.choice(EXTS)}"


def _result(rng: random.Random, chars: int) -> str:
    lines: list[str] = []
    size = 0
    while size < chars:
        line = f"{_path(rng)}:{rng.randint(1, 400)}: {_prose(rng, rng.randint(4, 12))}"
        lines.append(line)
        size += len(line) + 1
    return "\n".join(lines)


def synthetic_events(turns: int, result_chars: int, seed: int) -> list[Event]:
    """Seeded coding turns: request, reasoning, 3–8 tool calls, answer."""
    rng = random.Random(seed)
    events: list[Event] = []
    seq = 0

    def nxt() -> int:
        nonlocal seq
        seq += 1
        return seq

    for turn in range(turns):
        events.append(TurnStart(seq=nxt(), time=f"2026-09-17T10:00:{turn % 60:02d}Z"))
        if rng.random() < 0.1:
            events.append(HostInjection(seq=nxt(), kind=InjectionKind.RUNTIME_CONTEXT,
                                        text=_prose(rng, 80)))
        request = _prose(rng, rng.randint(15, 60))
        if rng.random() < 0.05:
            request += " use key AKIAIOSFODNN7EXAMPLE"
        events.append(UserMessage(seq=nxt(), text=request))
        events.append(Reasoning(seq=nxt(), text=_prose(rng, rng.randint(40, 160))))
        for call in range(rng.randint(3, 8)):
            call_id = f"t{turn}c{call}"
            kind = rng.choice(("read", "bash", "edit", "grep"))
            if kind == "bash":
                name, args = "Bash", {"command": rng.choice(COMMANDS)}
            elif kind == "edit":
                name, args = "Edit", {"file_path": _path(rng), "old_string": _prose(rng, 10),
                                      "new_string": _prose(rng, 12)}
            elif kind == "grep":
                name, args = "Grep", {"pattern": rng.choice(WORDS), "path": rng.choice(DIRS)}
            else:
                name, args = "Read", {"file_path": _path(rng)}
            events.append(ToolCall(seq=nxt(), call_id=call_id, name=name,
                                   arguments=json.dumps(args)))
            # Mostly small results, some large, a few past the artifact floor.
            chars = int(result_chars * rng.choice((0.05, 0.1, 0.3, 0.5, 1.0, 2.0, 6.0)))
            events.append(ToolResult(seq=nxt(), call_id=call_id, text=_result(rng, chars)))
        events.append(AssistantMessage(seq=nxt(), text=_prose(rng, rng.randint(30, 120))))
        events.append(TurnEnd(seq=nxt(), time=f"2026-09-17T10:01:{turn % 60:02d}Z"))
    return events


def _percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def run(turns: list[Turn], repeat: int) -> list[float]:
    samples: list[float] = []
    for round_ in range(repeat):
        order = turns if round_ % 2 == 0 else list(reversed(turns))
        for turn in order:
            start = time.perf_counter_ns()
            sign_turn(turn, DEFAULTS)
            samples.append((time.perf_counter_ns() - start) / 1e6)
    return samples


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=400)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--result-chars", type=int, default=6000,
                        help="typical tool result size; results range 0.05x to 6x this")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--output", type=Path, default=RESULTS)
    args = parser.parse_args(argv)

    turns = list(split_turns(synthetic_events(args.turns, args.result_chars, args.seed)).complete)
    run(turns[: min(len(turns), 20)], 1)  # warm regex caches and the interpreter
    samples = run(turns, args.repeat)
    median = statistics.median(samples)
    chars = [sum(len(getattr(e, "text", "") or getattr(e, "arguments", "")) for e in t.events)
             for t in turns]
    report = {
        "benchmark": "signatures",
        "python": platform.python_version(),
        "machine": platform.machine(),
        "workload": {
            "turns": len(turns),
            "repeat": args.repeat,
            "result_chars": args.result_chars,
            "seed": args.seed,
            "median_turn_chars": statistics.median(chars),
            "max_turn_chars": max(chars),
            "median_events_per_turn": statistics.median(len(t.events) for t in turns),
        },
        "results": {
            "median_ms": round(median, 4),
            "p90_ms": round(_percentile(samples, 0.9), 4),
            "max_ms": round(max(samples), 4),
            "target_ms": TARGET_MS,
            "median_over_target": round(median / TARGET_MS, 3),
            "samples": len(samples),
            "pass": median <= TARGET_MS,
        },
    }
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    r = report["results"]
    print(f"sign_turn per turn: median {r['median_ms']} ms, p90 {r['p90_ms']} ms, "
          f"max {r['max_ms']} ms (target ≤ {TARGET_MS} ms) → {args.output}")
    return 0 if median <= TARGET_MS else 1


if __name__ == "__main__":
    sys.exit(main())
