"""Faults: a loopback proxy in front of a `git http-backend` pool and of the TreeDX fake breaks
the network in each way the issue names (refused connections, a reset mid-body, 401, 403,
500, 503 with Retry-After, a body that stalls past the budget, a truncated body).

For each fault (§5.3: failures degrade to local-only, with numbers): `chapters archive` never
fails; `chapters sync`, as a real process, exits 1 with one line naming its failure code, no
traceback and no token; `chapters status` says the pool is behind with the pending count;
and the next sync, the fault removed, delivers the backlog to the other machine.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.acceptance.steps_common import Machine
from tests.acceptance.steps_common import project_clone as make_machine
from tests.reliability.fault_proxy import FAULTS
from tests.reliability.served_pools import (
    POOL_KINDS,
    ServedPool,
    pick,
    served_pool,
    token_leaks,
)

# The client budgets the faults run under: small, so a stalled body fails fast, yet roomy
# enough that an honest sync on a loaded 2-core runner stays inside them; the proxy's stall
# exceeds them by a margin. git: syncTimeoutMs is one call's whole budget; TreeDX:
# treedxFetchTimeoutMs is one request's (its Retry-After waits count against it too).
SYNC_TIMEOUT_MS = 8000
TREEDX_FETCH_TIMEOUT_MS = 3000
STALL_S = {"git-http": SYNC_TIMEOUT_MS / 1000 + 3, "treedx": TREEDX_FETCH_TIMEOUT_MS / 1000 + 3}
# What each fault must be reported as, per pool kind (FailureCode values, never prose).
EXPECTED_CODE: dict[str, dict[str, set[str]]] = {
    "git-http": {"refused": {"network"}, "reset": {"network"}, "401": {"auth"},
                 "403": {"auth"}, "500": {"network"}, "503": {"network"},
                 "slow": {"timeout"}, "truncated": {"network"}},
    "treedx": {"refused": {"network"}, "reset": {"network"}, "401": {"auth"},
               "403": {"auth"}, "500": {"network"}, "503": {"timeout"},
               "slow": {"timeout"}, "truncated": {"corrupt"}},
}
PUSH_EXPECTED: dict[str, dict[str, set[str]]] = {
    "git-http": {"reset": {"network"}, "401": {"auth"}, "403": {"auth"}, "500": {"network"},
                 "503": {"network"}, "slow": {"timeout"}, "truncated": {"network"}},
    "treedx": {"reset": {"network"}, "401": {"auth"}, "403": {"auth"}, "500": {"network"},
               "503": {"ok"}, "slow": {"timeout"}, "truncated": {"corrupt"}},
}
# The push's first write: git's receive-pack POST; TreeDX's first file PUT in the lease.
PUSH_REQUEST = {"git-http": "POST /widgets.git/git-receive-pack",
                "treedx": "PUT /api/v1/workspaces/"}
CASES = [(f, "pull") for f in FAULTS] + [(f, "push") for f in FAULTS if f != "refused"]
_CODE_LINE = re.compile(r"chapters: sync degraded to local-only \((?P<code>[a-z_-]+)\); "
                        r"(?P<pending>\d+) file\(s\) pending")


def _cli(m: Machine, *argv: str) -> subprocess.CompletedProcess[str]:
    """`chapters ARGV` as a real process: its exit code and its words are the user's."""
    env = {**os.environ, **m.env}
    return subprocess.run([sys.executable, "-m", "dsh_chapters", "-C", str(m.workspace), *argv],
                          capture_output=True, text=True, env=env, timeout=120, check=False)


def _one_case(kind: str, pool: ServedPool, a: Machine, b: Machine, label: str, fault: str,
              phase: str) -> str:
    """One archive under `fault`, one sync that meets it, one that recovers; the outcome."""
    proxy = pool.proxy
    assert proxy is not None
    expected = EXPECTED_CODE[kind][fault] if phase == "pull" else PUSH_EXPECTED[kind][fault]
    before = proxy.faulted
    if phase == "pull":
        proxy.inject(fault)
    else:  # the pull goes through; the push's first request meets the fault, once
        proxy.inject(fault, only=PUSH_REQUEST[kind], times=1)
    try:
        a.archive(label)  # never fails: archive waits on no network (§1)
        pending = _pending(a)
        assert pending > 0, f"{kind} {fault}: nothing pending after an archive"
        done = _cli(a, "sync")
        words = done.stdout + done.stderr
        assert "Traceback" not in words, words
        assert not any(t in words for t in pool.tokens), f"{kind} {fault}: a token in the output"
        assert fault == "refused" or proxy.faulted > before, f"{kind} {fault}: nothing broken"
        if done.returncode == 0:
            # only where the client may retry by itself (TreeDX honours a busy 503's wait)
            assert "ok" in expected, f"{kind} {fault} ({phase}): sync passed: {words}"
            proxy.clear()
            outcome = "sync retried after Retry-After and passed"
        else:
            assert done.returncode == 1, f"{kind} {fault}: sync exited {done.returncode}: {words}"
            line = _CODE_LINE.search(done.stderr)
            assert line, f"{kind} {fault}: no failure line in {done.stderr!r}"
            code = line["code"]
            assert code in expected, f"{kind} {fault} ({phase}): {code}: {words}"
            assert int(line["pending"]) == pending
            status = a.ok("status")
            # the sync line, with the lines it folds into past 100 columns
            rows = status.out.splitlines()
            at = next(n for n, x in enumerate(rows) if x.startswith("sync"))
            folded = [rows[at], *(x for x in rows[at + 1:at + 4] if x.startswith("           "))]
            sync_line = " ".join(" ".join(folded).split())
            assert "local-only" in sync_line and f": {code}" in sync_line, sync_line
            assert f"· {pending} pending" in sync_line, sync_line
            outcome = f"exit 1 ({code}), {pending} pending"
    finally:
        proxy.clear()
    broken = proxy.faulted - before
    if kind == "treedx" and fault == "503" and phase == "pull":
        # the client came back after each Retry-After until its budget was spent (the push
        # case meets one busy answer, and its retry passed)
        assert broken >= 2, f"treedx 503: {broken} busy answer(s), no retry"
    a.ok("sync")
    assert _pending(a) == 0, f"{kind} {fault}: the backlog stayed after recovery"
    b.ok("sync")
    delivered = _chapters(a, label)
    assert delivered and delivered <= set(b.store_files()), \
        f"{kind} {fault}: the backlog did not reach box-b"
    hit = f"{broken} answer(s) broken, " if fault != "refused" else ""
    return f"{outcome}; {hit}recovered, {len(delivered)} delivered"


def _pending(m: Machine) -> int:
    return int(m.ok("status", "--json").json()["pool"]["pending"])


def _chapters(m: Machine, label: str) -> set[str]:
    sid = m.sessions[label]
    return {p for p in m.store_files() if p.startswith(f"{sid}/chapters/")}


@pytest.mark.slow
@pytest.mark.parametrize("kind", POOL_KINDS)
def test_every_fault_degrades_to_local_only_and_the_next_sync_recovers(
    kind: str, tmp_path: Path, results: Any, record: Any
) -> None:
    rounds = pick(results, "fault_rounds")
    with served_pool(kind, tmp_path / "pool", proxy_stall_s=STALL_S[kind]) as pool:
        proxy = pool.proxy
        assert proxy is not None
        a, b = make_machine(tmp_path, "box-a"), make_machine(tmp_path, "box-b")
        for m in (a, b):
            m.set_config(f"syncTimeoutMs = {SYNC_TIMEOUT_MS}")
            m.set_config(f"treedxFetchTimeoutMs = {TREEDX_FETCH_TIMEOUT_MS}")
            pool.link(m)
        a.archive("a-0")
        a.ok("sync")
        b.ok("sync")
        assert _chapters(a, "a-0") <= set(b.store_files())
        outcomes: dict[str, list[str]] = {}
        for r in range(rounds):
            for fault, phase in CASES:
                label = f"a-{fault}-{phase}-{r}"
                outcome = _one_case(kind, pool, a, b, label, fault, phase)
                outcomes.setdefault(f"{fault} ({phase})", []).append(outcome)
        leaks = token_leaks(pool.tokens, tmp_path / "box-a", tmp_path / "box-b")
        assert leaks == [], leaks
        if pool.git_path is not None:  # a push cut mid-way left no broken object behind
            fsck = subprocess.run(["git", "-C", str(pool.git_path), "fsck", "--strict"],
                                  capture_output=True, text=True, timeout=120, check=False)
            assert fsck.returncode == 0, fsck.stderr
        else:
            assert pool.fake is not None and pool.fake.lease_holders("widgets-pool") == 0
        for case, seen in outcomes.items():
            record(f"{kind} {case}", "; ".join(sorted(set(seen)))
                   + (f" (x{rounds})" if rounds > 1 else ""))
