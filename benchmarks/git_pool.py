"""Git pool benchmark: dulwich (the git provider) against the git CLI, side by side.

Two workloads, each run `--repeat` times with both sides alternating in the same run:

- publish: stage `--chapters` chapter files into an opened mirror, commit, push to a local
  bare pool. The CLI side writes the same files into a clone, `git add -A`, `git commit`,
  `git push`. Targets: dulwich median <= 1.5x the CLI's.
- fresh pull: materialize a mirror of a `--files`-file local pool from nothing (the
  provider's `open()` on an absent mirror) against `git clone <pool>`. Target: <= 3x.

    python benchmarks/git_pool.py [--chapters 1000 --files 5000 --repeat 5]

Writes medians, ratios and every sample to `benchmarks/results/git_pool.json`.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import dulwich
from dsh_chapters_core.config import Config
from dsh_chapters_core.ports.transport import ProviderContext
from dsh_chapters_git.provider import GitProviderFactory

RESULTS = Path(__file__).resolve().parent / "results" / "git_pool.json"
PUBLISH_TARGET = 1.5
PULL_TARGET = 3.0
PROJECT_KEY = "0b7c2f9e-5d7e-5a8e-9b43-2f3c1d9e4a10"
WORDS = [
    "alpha",
    "beta",
    "gamma",
    "delta",
    "sync",
    "pool",
    "mirror",
    "chapter",
    "archive",
    "rebuild",
    "token",
    "index",
    "search",
    "rules",
    "topic",
    "session",
    "harness",
    "commit",
    "push",
    "pull",
    "tree",
    "blob",
    "pack",
    "fast",
    "forward",
]


class _NoCredentials:
    """A local-path pool takes no token (§2.1), so the benchmark's store holds none."""

    def read(self, name: str) -> str | None:
        return None

    def write(self, name: str, secret: str) -> None:
        raise ValueError("the benchmark's local pool takes no token")

    def delete(self, name: str) -> None:
        return None


def _git_env(home: Path) -> dict[str, str]:
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_AUTHOR_NAME": "bench",
        "GIT_AUTHOR_EMAIL": "bench@dsh-chapters.invalid",
        "GIT_COMMITTER_NAME": "bench",
        "GIT_COMMITTER_EMAIL": "bench@dsh-chapters.invalid",
        # No detached auto-gc racing the timings (or the clean-up of a scratch clone).
        "GIT_CONFIG_COUNT": "1",
        "GIT_CONFIG_KEY_0": "gc.auto",
        "GIT_CONFIG_VALUE_0": "0",
    }


def _git(home: Path, *args: str | Path, cwd: Path | None = None) -> None:
    subprocess.run(
        ["git", *map(str, args)],
        cwd=cwd,
        env=_git_env(home),
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def chapter_files(count: int, seed: int, prefix: str = "chapters") -> dict[str, bytes]:
    """`count` chapter-like markdown files (frontmatter + a few KB of body), 10 per session."""
    rng = random.Random(seed)
    files: dict[str, bytes] = {}
    for n in range(count):
        session = f"{seed:04d}-{n // 10:05d}-4c1f-9a0e-{(seed * 7919 + n // 10):012x}"
        words = " ".join(rng.choice(WORDS) for _ in range(rng.randint(300, 1200)))
        text = (
            f"---\ntitle: chapter {n}\nprojectKey: {PROJECT_KEY}\nkind: chapter\n"
            f'harnessId: bench\ntopics: ["sync", "pool"]\n---\n\n## user\n\n{words}\n'
        )
        files[f"{prefix}/{PROJECT_KEY}/{session}/{n % 10 + 1:03d}-chapter-{n}.md"] = text.encode()
    return files


def _write_tree(root: Path, files: dict[str, bytes]) -> None:
    for rel, data in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)


def _context(workspace: Path, pool: Path) -> ProviderContext:
    return ProviderContext(
        remote=str(pool),
        workspace=str(workspace),
        mirror_root=str(workspace / ".dsh-knowledge"),
        project_key=PROJECT_KEY,
        harness_id="bench",
        config=Config(sync_timeout_ms=600_000),
        credentials=_NoCredentials(),
        credential_name=PROJECT_KEY,
    )


def _timed(action: Callable[[], object]) -> float:
    start = time.perf_counter()
    action()
    return time.perf_counter() - start


def _seed_pool(home: Path, pool: Path, work: Path, files: dict[str, bytes]) -> None:
    """A bare pool holding `files` in one commit, made with the git CLI (neutral ground)."""
    _git(home, "init", "--quiet", "--bare", "-b", "main", pool)
    _git(home, "clone", "--quiet", pool, work)
    _write_tree(work, files)
    _git(home, "add", "-A", cwd=work)
    _git(home, "commit", "--quiet", "-m", "seed", cwd=work)
    _git(home, "push", "--quiet", "origin", "main", cwd=work)
    shutil.rmtree(work)


def bench_publish(tmp: Path, home: Path, chapters: int, repeat: int) -> dict[str, object]:
    base = {"project.yml": f"projectKey: {PROJECT_KEY}\n".encode()}
    ours: list[float] = []
    cli: list[float] = []
    for round_no in range(repeat):
        files = chapter_files(chapters, seed=round_no + 1)
        # dulwich: an opened mirror of a seeded pool; time stage + commit + push.
        pool = tmp / f"pub-ours-{round_no}.git"
        _seed_pool(home, pool, tmp / "seed-work", base)
        provider = GitProviderFactory.create(_context(tmp / f"pub-ours-ws-{round_no}", pool))
        provider.open()

        def publish_ours(provider: object = provider, files: dict[str, bytes] = files) -> None:
            provider.stage(files)  # type: ignore[attr-defined]
            provider.commit(f"publish {len(files)} chapters", "bench")  # type: ignore[attr-defined]
            result = provider.push()  # type: ignore[attr-defined]
            assert result.pushed

        ours.append(_timed(publish_ours))
        provider.close()
        # git CLI: a clone of an identical pool; time write + add + commit + push.
        pool_cli = tmp / f"pub-cli-{round_no}.git"
        _seed_pool(home, pool_cli, tmp / "seed-work", base)
        work = tmp / f"pub-cli-ws-{round_no}"
        _git(home, "clone", "--quiet", pool_cli, work)

        def publish_cli(work: Path = work, files: dict[str, bytes] = files) -> None:
            _write_tree(work, files)
            _git(home, "add", "-A", cwd=work)
            _git(home, "commit", "--quiet", "-m", f"publish {len(files)} chapters", cwd=work)
            _git(home, "push", "--quiet", "origin", "main", cwd=work)

        cli.append(_timed(publish_cli))
    return _summary("publish", {"chapters": chapters}, ours, cli, PUBLISH_TARGET)


def bench_fresh_pull(tmp: Path, home: Path, files_count: int, repeat: int) -> dict[str, object]:
    pool = tmp / "pull-pool.git"
    files = chapter_files(files_count, seed=9001)
    _seed_pool(home, pool, tmp / "seed-work", files)
    ours: list[float] = []
    cli: list[float] = []
    for round_no in range(repeat):
        workspace = tmp / f"pull-ours-{round_no}"
        provider = GitProviderFactory.create(_context(workspace, pool))
        ours.append(_timed(provider.open))
        provider.close()
        got = sum(1 for p in (workspace / ".dsh-knowledge").rglob("*.md"))
        assert got == files_count, f"materialized {got} of {files_count} files"
        shutil.rmtree(workspace)
        target = tmp / f"pull-cli-{round_no}"
        cli.append(_timed(lambda target=target: _git(home, "clone", "--quiet", pool, target)))
        shutil.rmtree(target)
    return _summary("fresh_pull", {"files": files_count}, ours, cli, PULL_TARGET)


def _summary(
    name: str, size: dict[str, int], ours: list[float], cli: list[float], target: float
) -> dict[str, object]:
    ours_median = statistics.median(ours)
    cli_median = statistics.median(cli)
    ratio = ours_median / cli_median
    return {
        "workload": name,
        **size,
        "dulwich_median_s": round(ours_median, 4),
        "git_cli_median_s": round(cli_median, 4),
        "ratio": round(ratio, 3),
        "target_ratio": target,
        "met": ratio <= target,
        "dulwich_samples_s": [round(x, 4) for x in ours],
        "git_cli_samples_s": [round(x, 4) for x in cli],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chapters", type=int, default=1000, help="chapters per publish")
    parser.add_argument("--files", type=int, default=5000, help="files in the fresh-pull pool")
    parser.add_argument("--repeat", type=int, default=5, help="rounds per workload")
    parser.add_argument("--output", type=Path, default=RESULTS, help="where the JSON goes")
    args = parser.parse_args(argv)
    git_version = subprocess.run(
        ["git", "--version"], capture_output=True, text=True, check=True
    ).stdout.strip()
    with tempfile.TemporaryDirectory(prefix="dsh-git-bench-") as scratch:
        tmp = Path(scratch)
        home = tmp / "home"
        home.mkdir()
        publish = bench_publish(tmp, home, args.chapters, args.repeat)
        pull = bench_fresh_pull(tmp, home, args.files, args.repeat)
    report = {
        "benchmark": "git_pool",
        "repeat": args.repeat,
        "python": platform.python_version(),
        "dulwich": ".".join(map(str, dulwich.__version__)),
        "git": git_version,
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform()},
        "results": [publish, pull],
    }
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    for row in (publish, pull):
        verdict = "met" if row["met"] else "NOT met"
        print(
            f"{row['workload']:<11} dulwich {row['dulwich_median_s']:.3f}s  "
            f"git {row['git_cli_median_s']:.3f}s  ratio {row['ratio']:.2f} "
            f"(target <= {row['target_ratio']}: {verdict})"
        )
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
