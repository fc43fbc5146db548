"""Redaction throughput on real transcripts, and the import rate it leaves (§9).

    hatch run bench redaction [-- --haystack DIR --mb 100 --sessions 20 --rounds 3]
    python benchmarks/redaction.py [--haystack DIR] [--baseline REV] ...

The texts are what the archive chokepoint redacts: every message, reasoning, tool input and
tool output of real public Claude Code and Codex transcripts, read with the installed harness
readers. Three figures, each measured side by side with the rules of `--baseline` (the
redaction module as it was at that git revision, loaded from git; default: before the wider
rules) in alternating rounds, medians reported:
- `redact()` throughput in MB of UTF-8 text per CPU second, on one core (target >= 30 MB/s);
- the import of `--sessions` whole transcripts through the real pipeline (reader, signatures,
  composition, render, redaction, fs store, index), in MB of transcript per second, and the
  share of it spent in redaction (the search-at-scale issue's >= 15 MB/s must still hold);
- what the rules redact in the real text, per family (a measure of false positives to read).

The transcripts are other people's text: never commit them. They are found by `--haystack`,
else `$DSH_HAYSTACK`, else `<checkout>/../data/haystack`; `shared/eval/README.md` ("The real
haystack") says how to fetch them (`fetch_haystack.py`). Without them the benchmark says so
and exits 0 with no figures, so `hatch run bench` still runs anywhere.
Writes `benchmarks/results/redaction.json`.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import types
from collections.abc import Callable, Iterator
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

from dsh_chapters_core import chokepoint, signature
from dsh_chapters_core import redact as current

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RESULTS = HERE / "results"
BASELINE_REV = "52afbba"  # main before the wider rules (8 families, 36 MB/s on this haystack)
TARGET_REDACT_MBS = 30.0
TARGET_IMPORT_MBS = 15.0
REDACT_PATH = "packages/dsh-chapters-core/src/dsh_chapters_core/redact.py"
Redactor = Callable[..., Any]


def _haystack(arg: str) -> Path:
    if arg:
        return Path(arg)
    env = os.environ.get("DSH_HAYSTACK")
    return Path(env) if env else ROOT.parent / "data" / "haystack"


def _files(haystack: Path) -> list[Path]:
    """Claude Code and Codex transcripts, interleaved so any prefix holds both."""
    claude = sorted((haystack / "claude-code").glob("*.jsonl"))
    codex = sorted((haystack / "codex").glob("*.jsonl"))
    out: list[Path] = []
    for i in range(max(len(claude), len(codex))):
        out += [f[i] for f in (claude, codex) if i < len(f)]
    return out


def _readers() -> dict[str, Any]:
    return {ep.name: ep.load()() for ep in entry_points(group="dsh_chapters.harnesses")}


def _kind(path: Path) -> str:
    return "codex" if path.parent.name == "codex" else "claude-code"


def _texts(files: list[Path], limit_mb: float) -> tuple[list[str], int, int]:
    """The chokepoint's inputs: (texts, their UTF-8 bytes, transcripts read)."""
    readers = _readers()
    texts: list[str] = []
    size = read = 0
    for path in files:
        try:
            transcript = readers[_kind(path)].read(str(path))
        except Exception as exc:  # a transcript a reader refuses is not this benchmark's
            print(f"  skipped {path.name}: {type(exc).__name__}", file=sys.stderr)
            continue
        read += 1
        for event in transcript.events:
            for attr in ("text", "arguments"):
                value = getattr(event, attr, None)
                if isinstance(value, str) and value:
                    texts.append(value)
                    size += len(value.encode("utf-8", "surrogatepass"))
        if size >= limit_mb * 1e6:
            break
    return texts, size, read


def _baseline(rev: str) -> types.ModuleType | None:
    """The redaction module as it was at `rev`, from git (None when git cannot show it)."""
    done = subprocess.run(["git", "-C", str(ROOT), "show", f"{rev}:{REDACT_PATH}"],
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        print(f"  no baseline: git show {rev}:{REDACT_PATH} failed", file=sys.stderr)
        return None
    module = types.ModuleType("baseline_redact")
    sys.modules[module.__name__] = module  # dataclasses look their module up
    exec(compile(done.stdout, f"{rev}:{REDACT_PATH}", "exec"), module.__dict__)
    return module


def _redact_seconds(redact: Redactor, texts: list[str]) -> float:
    started = time.process_time()
    for text in texts:
        redact(text)
    return time.process_time() - started


def _families(texts: list[str]) -> dict[str, int]:
    counts: collections.Counter[str] = collections.Counter()
    for text in texts:
        for name, n in current.redact(text).counts:
            counts[name] += n
    return dict(counts.most_common())


class _Timed:
    """`redact` wrapped to add up the CPU time spent in it (the chokepoint's and the
    signatures' calls both)."""

    def __init__(self, redact: Redactor) -> None:
        self.redact = redact
        self.seconds = 0.0

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        started = time.process_time()
        try:
            return self.redact(*args, **kwargs)
        finally:
            self.seconds += time.process_time() - started


@contextlib.contextmanager
def _swapped(redact: Redactor) -> Iterator[None]:
    saved = (chokepoint.redact, signature.redact)
    chokepoint.redact = signature.redact = redact  # type: ignore[assignment]
    try:
        yield
    finally:
        chokepoint.redact, signature.redact = saved  # type: ignore[assignment]


def _import(files: list[Path], redact: Redactor, root: Path) -> tuple[float, float]:
    """Archive `files` into a fresh workspace: (CPU seconds in all, in redaction)."""
    from dsh_chapters.bootstrap import bootstrap
    from dsh_chapters.services.archive import archive_and_log, read_transcript

    workspace = root / f"ws-{time.monotonic_ns()}"
    (workspace / ".git").mkdir(parents=True)
    (workspace / ".dsh-chapters").mkdir()
    (workspace / ".dsh-chapters" / "config.toml").write_text(
        'projectKey = "github.com/bench/haystack"\nharnessId = "bench"\n', encoding="utf-8")
    app = bootstrap(workspace, {**os.environ, "DSH_HOME": str(root / "home")})
    timed = _Timed(redact)
    with _swapped(timed):
        started = time.process_time()
        for path in files:
            archive_and_log(app, read_transcript(app, path, _kind(path)), final=True)
        return time.process_time() - started, timed.seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--haystack", default="", help="the haystack directory (see above)")
    parser.add_argument("--mb", type=float, default=100.0, help="MB of text for throughput")
    parser.add_argument("--sessions", type=int, default=20, help="transcripts to import")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--baseline", default=BASELINE_REV, help="git revision to compare")
    args = parser.parse_args(argv)
    haystack = _haystack(args.haystack)
    files = _files(haystack)
    if not files:
        print(f"redaction: no transcripts under {haystack}. Fetch the real haystack as "
              "shared/eval/README.md says (fetch_haystack.py), then pass --haystack DIR or set "
              "DSH_HAYSTACK; no figures written.")
        return 0
    started = time.perf_counter()
    texts, size, read = _texts(files, args.mb)
    print(f"{len(texts)} texts, {size / 1e6:.1f} MB, from {read} transcripts "
          f"({time.perf_counter() - started:.0f} s to read)", flush=True)
    baseline = _baseline(args.baseline)
    rules: dict[str, Redactor] = {"current": current.redact}
    if baseline is not None:
        rules["baseline"] = baseline.redact
    seconds: dict[str, list[float]] = {name: [] for name in rules}
    for _ in range(args.rounds):  # alternating, so the machine's noise hits both alike
        for name, redact in rules.items():
            seconds[name].append(_redact_seconds(redact, texts))
    mbs = {name: round(size / 1e6 / statistics.median(s), 1) for name, s in seconds.items()}
    print(f"redact(): {mbs}", flush=True)

    sessions = files[: args.sessions]
    session_bytes = sum(p.stat().st_size for p in sessions)
    imports: dict[str, list[tuple[float, float]]] = {name: [] for name in rules}
    with tempfile.TemporaryDirectory(prefix="bench-redaction-") as tmp:
        for _ in range(args.rounds):
            for name, redact in rules.items():
                imports[name].append(_import(sessions, redact, Path(tmp)))
    import_figures: dict[str, dict[str, float]] = {}
    for name, rows in imports.items():
        total = statistics.median(r[0] for r in rows)
        spent = statistics.median(r[1] for r in rows)
        import_figures[name] = {"mb_per_s": round(session_bytes / 1e6 / total, 2),
                                "redaction_share": round(spent / total, 3),
                                "cpu_seconds": round(total, 2)}
    print(f"import of {len(sessions)} transcripts ({session_bytes / 1e6:.1f} MB): "
          f"{import_figures}", flush=True)
    families = _families(texts)
    result = {
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count()},
        "haystack": {"texts": len(texts), "mb": round(size / 1e6, 1), "transcripts": read},
        "baseline": args.baseline if baseline is not None else None,
        "redact_mb_per_s": mbs,
        "redact_target_mb_per_s": TARGET_REDACT_MBS,
        "redact_met": mbs["current"] >= TARGET_REDACT_MBS,
        "import": {"transcripts": len(sessions), "mb": round(session_bytes / 1e6, 1),
                   **import_figures},
        "import_target_mb_per_s": TARGET_IMPORT_MBS,
        "import_met": import_figures["current"]["mb_per_s"] >= TARGET_IMPORT_MBS,
        "rounds": args.rounds,
        "redactions_per_family": families,
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "redaction.json").write_text(json.dumps(result, indent=2) + "\n")
    print(f"figures: {RESULTS / 'redaction.json'}")
    return 0 if result["redact_met"] else 1


if __name__ == "__main__":
    sys.exit(main())
