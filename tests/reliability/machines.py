"""Machines of the reliability suite: real workspaces (own DSH_HOME, harness id, config) that
run `chapters` in-process through its parser and the composition root, as the acceptance
steps' `Machine` does, plus what the soak needs on top: pushes at the same moment and views
of what a machine publishes and holds (§2.2, §3.3).
"""

from __future__ import annotations

import io
import threading
from collections.abc import Mapping
from importlib.resources import files
from pathlib import Path
from typing import Any

from dsh_chapters.app import App
from dsh_chapters.bootstrap import bootstrap
from dsh_chapters.cli import Invocation, build_parser
from dsh_chapters.plugins import load_provider_factories
from dsh_chapters_core.errors import ChaptersError, UsageError
from dsh_chapters_core.pool_layout import PoolFileKind, to_pool

from tests.acceptance.steps_common import CliResult, GatedFactory, Machine

RACE_TIMEOUT_S = 120




def sample_text(sample: str, session_id: str) -> str:
    """A bundled demo session (`dsh_chapters/samples/<sample>`) under another session id; the
    recorded model tapes answer its chapters whatever the id (tests/fixtures/tapes)."""
    text = (files("dsh_chapters") / "samples" / sample).read_text(encoding="utf-8")
    header = text.split('"id":"', 1)[1].split('"', 1)[0]
    return text.replace(header, session_id)


def run_composed(machine: Machine, argv: tuple[str, ...], **fakes: Any) -> CliResult:
    """`chapters ARGV` in `machine`, composed with `fakes` passed to the composition root;
    the same exit codes as `cli.main`, and the result kept with the machine's outputs."""
    out, err = io.StringIO(), io.StringIO()

    def compose(cwd: Path, env: Mapping[str, str]) -> App:
        return bootstrap(cwd, env, **fakes)

    try:
        args = build_parser().parse_args(list(argv))
        inv = Invocation(cwd=machine.workspace, json=bool(getattr(args, "json", False)),
                         env=dict(machine.env), stdin=io.StringIO(""), stdout=out, stderr=err,
                         compose=compose)
        code = int(args.run(args, inv))
    except UsageError as exc:
        err.write(f"chapters: {exc}\n")
        code = 2
    except ChaptersError as exc:
        err.write(f"chapters: {exc}\n")
        code = 1
    result = CliResult(argv, code, out.getvalue(), err.getvalue())
    machine.results.append(result)
    return result


def sync_at_once(machines: list[Machine]) -> list[CliResult]:
    """`chapters sync --json` in every machine at the same moment: each real provider's first
    push waits at one barrier until all are ready to push, so they race on one pool head."""
    barrier = threading.Barrier(len(machines), timeout=RACE_TIMEOUT_S)
    results: dict[str, CliResult] = {}
    errors: list[BaseException] = []

    def run(machine: Machine) -> None:
        try:
            gated = tuple(GatedFactory(f, barrier) for f in load_provider_factories())
            results[machine.name] = run_composed(machine, ("sync", "--json"),
                                                 provider_factories=gated)
        except BaseException as exc:  # handed to the test thread below
            errors.append(exc)
            barrier.abort()

    threads = [threading.Thread(target=run, args=(m,), daemon=True) for m in machines]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=RACE_TIMEOUT_S)
    assert not any(t.is_alive() for t in threads), "a racing sync did not finish"
    assert not errors, errors
    return [results[m.name] for m in machines]


def project_key(machine: Machine) -> str:
    return str(machine.app().identity.project_key)


def shared_view(machine: Machine, key: str) -> dict[str, bytes]:
    """Pool path -> bytes of every store file that crosses the pool, whoever wrote it."""
    out: dict[str, bytes] = {}
    for rel, data in machine.store_files().items():
        entry = to_pool(rel, key)
        if entry is not None:
            out[entry.pool_path] = data
    return out


def publishable(machine: Machine, key: str) -> dict[str, bytes]:
    """Pool path -> bytes of the files only this machine writes (§3.3: per-machine namespaces),
    and the content-addressed artifacts it holds (any holder may publish those)."""
    meta = machine.app().store.session_meta()
    out: dict[str, bytes] = {}
    for rel, data in machine.store_files().items():
        entry = to_pool(rel, key)
        if entry is None:
            continue
        if entry.kind is PoolFileKind.ARTIFACT:
            writer = machine.name
        elif entry.harness_id:
            writer = entry.harness_id
        else:
            writer = meta.get(entry.session_id, {}).get("harnessId", machine.name)
        if writer == machine.name:
            out[entry.pool_path] = data
    return out


def mirror_pool_files(machine: Machine) -> dict[str, bytes]:
    """The mirror as the read path sees it: pool files, not `.git` or a provider's dot-files."""
    root = machine.mirror
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and not p.relative_to(root).parts[0].startswith(".")}
