"""TreeDX pull benchmark: the provider's batched pull against the TS plugin's N+1, side by side.

Both sides talk real HTTP to the adapter's fake TreeDX server on loopback, with `--latency-ms`
added to every answer (a network round trip). Workloads, each run `--repeat` times with the
two sides alternating:

- fresh: materialize a mirror of a `--files`-file pool from nothing. The provider walks
  `paths/list` pages and reads changed files in `files/read` batches; the N+1 side lists the
  same pages and then reads every file with its own request.
- changed: `--changed` files of the pool move on; pull them into an up-to-date mirror. The N+1
  side re-lists and re-reads every file (it had no object ids to compare).
- quiet: nothing moved. The provider reads the head (one request).

    python benchmarks/treedx_pull.py [--files 1000 --changed 40 --latency-ms 2 --repeat 3]

Writes request counts, medians, ratios and every sample to `benchmarks/results/treedx_pull.json`.
"""

from __future__ import annotations

import argparse
import json
import platform
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from dsh_chapters_core.config import Config
from dsh_chapters_core.ports.transport import ProviderContext
from dsh_chapters_treedx.client import TreeDXClient
from dsh_chapters_treedx.provider import BRANCH, TreeDXProvider
from dsh_chapters_treedx.testing import FakeTreeDX
from dsh_chapters_treedx.wire import ListPathsRequest, ReadFilesRequest

RESULTS = Path(__file__).resolve().parent / "results" / "treedx_pull.json"
REPOSITORY = "bench-pool"


class _Credentials:
    def __init__(self, token: str) -> None:
        self._token = token

    def read(self, name: str) -> str | None:
        return self._token

    def write(self, name: str, secret: str) -> None:
        self._token = secret

    def delete(self, name: str) -> None:
        self._token = ""


def _files(n: int, generation: int = 0) -> dict[str, bytes]:
    return {
        f"chapters/pk/s{i % 50:02d}/{i:05d}-turn.md": (
            f"---\ntitle: chapter {i}\n---\n\n" + "verbatim turn text " * 40 + f"\n{generation}\n"
        ).encode()
        for i in range(n)
    }


def _provider(fake: FakeTreeDX, token: str, mirror: Path, config: Config) -> TreeDXProvider:
    context = ProviderContext(
        remote=fake.remote(REPOSITORY), workspace=str(mirror.parent), mirror_root=str(mirror),
        project_key="pk", harness_id="bench", config=config, credentials=_Credentials(token),
        credential_name="pool")
    return TreeDXProvider(context)


def _n_plus_one(fake: FakeTreeDX, token: str, mirror: Path, config: Config) -> None:
    """The TS plugin's pull: list every path, then one read per file."""
    client = TreeDXClient(fake.base_url, token, timeout_ms=config.treedx_fetch_timeout_ms)
    try:
        repo = client.create_repository(REPOSITORY, BRANCH)
        paths: list[str] = []
        cursor: str | None = None
        while True:
            page = client.list_paths(repo.repo_id, ListPathsRequest(
                ref=BRANCH, limit=config.treedx_page_size, cursor=cursor))
            paths.extend(e.path for e in page.entries if e.path != ".treedxkeep")
            if not page.page.has_more:
                break
            cursor = page.page.next_cursor
        for path in paths:
            request = ReadFilesRequest(ref=BRANCH, paths=(path,))
            (file,) = client.read_files(repo.repo_id, request).files
            target = mirror / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(file.content, encoding="utf-8")
    finally:
        client.close()


def _timed(fake: FakeTreeDX, run: Callable[[], None]) -> tuple[float, int]:
    fake.reset_counts()
    started = time.perf_counter()
    run()
    return time.perf_counter() - started, fake.count()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=1000)
    parser.add_argument("--changed", type=int, default=40)
    parser.add_argument("--latency-ms", type=float, default=2.0)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    config = Config()
    samples: dict[str, list[float]] = {k: [] for k in (
        "fresh_batched", "fresh_n_plus_one", "changed_batched", "changed_n_plus_one",
        "quiet_batched")}
    requests: dict[str, int] = {}
    scratch = Path(tempfile.mkdtemp(prefix="dsh-treedx-bench-"))
    fake = FakeTreeDX().start()
    try:
        token = fake.issue_token()
        fake.seed(REPOSITORY, _files(args.files))
        fake.slow(args.latency_ms / 1000)
        for round_ in range(args.repeat):
            mirror = scratch / f"batched-{round_}" / ".dsh-knowledge"
            naive = scratch / f"naive-{round_}" / ".dsh-knowledge"
            provider = _provider(fake, token, mirror, config)
            try:
                secs, n = _timed(fake, provider.open)
                samples["fresh_batched"].append(secs)
                requests["fresh_batched"] = n
                secs, n = _timed(fake, lambda m=naive: _n_plus_one(fake, token, m, config))
                samples["fresh_n_plus_one"].append(secs)
                requests["fresh_n_plus_one"] = n
                moved = dict(list(_files(args.files, round_ + 1).items())[: args.changed])
                fake.slow(0)
                fake.move_head(REPOSITORY, moved)
                fake.slow(args.latency_ms / 1000)
                secs, n = _timed(fake, provider.pull)
                samples["changed_batched"].append(secs)
                requests["changed_batched"] = n
                secs, n = _timed(fake, lambda m=naive: _n_plus_one(fake, token, m, config))
                samples["changed_n_plus_one"].append(secs)
                requests["changed_n_plus_one"] = n
                secs, n = _timed(fake, provider.pull)
                samples["quiet_batched"].append(secs)
                requests["quiet_batched"] = n
            finally:
                provider.close()
            shutil.rmtree(mirror.parent)
            shutil.rmtree(naive.parent)
    finally:
        fake.stop()
        shutil.rmtree(scratch, ignore_errors=True)
    medians = {k: statistics.median(v) for k, v in samples.items()}
    result = {
        "benchmark": "treedx_pull",
        "params": vars(args),
        "page_size": config.treedx_page_size,
        "read_batch": config.treedx_read_batch,
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "requests": requests,
        "median_seconds": medians,
        "speedup_fresh": medians["fresh_n_plus_one"] / medians["fresh_batched"],
        "speedup_changed": medians["changed_n_plus_one"] / medians["changed_batched"],
        "samples_seconds": samples,
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    for key in samples:
        print(f"{key:20} {requests[key]:6d} requests  median {medians[key] * 1000:9.1f} ms")
    print(f"batched vs N+1: fresh {result['speedup_fresh']:.1f}x faster, "
          f"changed {result['speedup_changed']:.1f}x faster -> {RESULTS}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
