"""The provider conformance suite: what every `KnowledgeProvider` must do, as plain functions.

A provider package (the git and TreeDX adapters here, or a third party's) calls these from
its own tests, against real pools of its kind:

    from dsh_chapters_core.testing.conformance import CHECKS, run_check

    @pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.name)
    def test_conformance(check, make_pool, make_provider):
        run_check(check, make_pool, make_provider)

or all at once with `check_provider(make_pool, make_provider)`. Stdlib only: no pytest here.

- `make_pool()` makes a fresh, empty pool and returns its remote string.
- `make_provider(remote, mirror_root, harness_id)` returns a provider for one machine whose
  mirror is the directory `mirror_root` (absent at first).

The mirror is read from disk as a plain directory of files (§2.2 layout); top-level entries
starting with "." (a provider's own state, such as `.git/`) are not part of it.
"""

from __future__ import annotations

import os
import tempfile
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass

from dsh_chapters_core.errors import FailureCode, TransportError
from dsh_chapters_core.ports.transport import KnowledgeProvider

MakePool = Callable[[], str]
MakeProvider = Callable[[str, str, str], KnowledgeProvider]

PROJECT = "0f0e0d0c-0b0a-5908-8706-050403020100"

# The kit's own version, separate from the package's: a plugin pins the rules it passed.
KIT_VERSION = "1.0"


class ConformanceError(AssertionError):
    """A provider broke the contract; the message names the check and what was seen."""


@dataclass(frozen=True, slots=True)
class Check:
    """One check of the provider conformance suite: its name, what it checks and the function
    running it."""

    name: str
    doc: str
    run: Callable[[_Pool], None]


def _chapter(session: str, number: int, body: str) -> tuple[str, bytes]:
    path = f"chapters/{PROJECT}/{session}/{number:03d}-conformance.md"
    return path, f"---\ntitle: {body}\n---\n\n{body}\n".encode()


def mirror_files(root: str) -> dict[str, bytes]:
    """The mirror as the read path sees it: every file, minus top-level dot entries."""
    out: dict[str, bytes] = {}
    for directory, dirnames, filenames in os.walk(root):
        rel_dir = os.path.relpath(directory, root)
        if rel_dir == ".":
            dirnames[:] = [d for d in dirnames if not d.startswith(".")]
            filenames = [f for f in filenames if not f.startswith(".")]
        for name in filenames:
            rel = name if rel_dir == "." else f"{rel_dir}/{name}".replace(os.sep, "/")
            with open(os.path.join(directory, name), "rb") as handle:
                out[rel] = handle.read()
    return out


def _expect(condition: bool, message: str) -> None:
    if not condition:
        raise ConformanceError(message)


def _expect_code(code: FailureCode, action: Callable[[], object], what: str) -> TransportError:
    try:
        action()
    except TransportError as exc:
        _expect(exc.code is code, f"{what}: expected {code.value}, got {exc.code.value}")
        return exc
    raise ConformanceError(f"{what}: expected TransportError({code.value}), nothing was raised")


class _Pool:
    """One fresh pool and the machines of one check; closes every provider it made."""

    def __init__(self, make_pool: MakePool, make_provider: MakeProvider, scratch: str) -> None:
        self.remote = make_pool()
        self._make_provider = make_provider
        self._scratch = scratch
        self._made: list[KnowledgeProvider] = []

    def mirror_root(self, machine: str) -> str:
        return os.path.join(self._scratch, machine, ".dsh-knowledge")

    def machine(self, name: str) -> KnowledgeProvider:
        os.makedirs(os.path.join(self._scratch, name), exist_ok=True)
        provider = self._make_provider(self.remote, self.mirror_root(name), name)
        self._made.append(provider)
        return provider

    def files(self, name: str) -> dict[str, bytes]:
        return mirror_files(self.mirror_root(name))

    def close(self) -> None:
        for provider in self._made:
            provider.close()


@contextmanager
def _pool(make_pool: MakePool, make_provider: MakeProvider) -> Iterator[_Pool]:
    with tempfile.TemporaryDirectory(prefix="dsh-conformance-") as scratch:
        pool = _Pool(make_pool, make_provider, scratch)
        try:
            yield pool
        finally:
            pool.close()


def _publish(provider: KnowledgeProvider, files: Mapping[str, bytes], who: str) -> str:
    provider.stage(files)
    sha = provider.commit(f"publish {len(files)} files", who)
    _expect(bool(sha), f"{who}: commit of {len(files)} new files returned {sha!r}")
    pushed = provider.push()
    _expect(pushed.pushed and bool(pushed.head), f"{who}: push returned {pushed}")
    return pushed.head


# ---- the checks ------------------------------------------------------------------------
def check_open_creates(pool: _Pool) -> None:
    """A first open of an empty pool materializes an empty mirror directory."""
    a = pool.machine("machine-a")
    state = a.open()
    _expect(state.cloned, f"first open: cloned is {state.cloned}")
    _expect(state.head == "", f"first open of an empty pool: head {state.head!r}")
    _expect(os.path.isdir(pool.mirror_root("machine-a")), "first open: no mirror directory")
    _expect(pool.files("machine-a") == {}, "an empty pool's mirror holds files")
    again = pool.machine("machine-a").open()
    _expect(not again.cloned and not again.moved_aside, f"re-open of a clean mirror: {again}")


def check_round_trip(pool: _Pool) -> None:
    """A publishes; B opens and sees A's files; B publishes; A pulls B's files."""
    a = pool.machine("machine-a")
    a.open()
    first = dict([_chapter("s-a", 1, "from a"), ("project.yml", b"projectKey: x\n")])
    head_a = _publish(a, first, "machine-a")
    b = pool.machine("machine-b")
    state = b.open()
    _expect(state.head == head_a, f"B opened head {state.head!r}, A pushed {head_a!r}")
    _expect(pool.files("machine-b") == first, "B's mirror does not hold exactly A's files")
    quiet = b.pull()
    _expect(
        quiet.head_before == quiet.head_after == head_a and not quiet.changed_paths,
        f"a pull with nothing new: {quiet}",
    )
    path, data = _chapter("s-b", 1, "from b")
    head_b = _publish(b, {path: data}, "machine-b")
    pulled = a.pull()
    _expect(pulled.head_before == head_a and pulled.head_after == head_b, f"A's pull: {pulled}")
    _expect(path in pulled.changed_paths, f"A's pull changed {pulled.changed_paths}, not {path}")
    _expect(pool.files("machine-a") == {**first, path: data}, "A's mirror after the pull")


def check_stage_counts(pool: _Pool) -> None:
    """Stage reports new, changed and unchanged files, and writes them into the mirror."""
    a = pool.machine("machine-a")
    a.open()
    p1, d1 = _chapter("s-a", 1, "one")
    p2, d2 = _chapter("s-a", 2, "two")
    r1 = a.stage({p1: d1, p2: d2})
    _expect((r1.new, r1.changed, r1.unchanged) == (2, 0, 0), f"first stage: {r1}")
    a.commit("two", "machine-a")
    r2 = a.stage({p1: d1, p2: d2 + b"more\n"})
    _expect((r2.new, r2.changed, r2.unchanged) == (0, 1, 1), f"second stage: {r2}")
    _expect(pool.files("machine-a")[p2] == d2 + b"more\n", "stage did not write the mirror")


def check_empty_commit(pool: _Pool) -> None:
    """A commit with nothing new returns None; a push with nothing to push does nothing."""
    a = pool.machine("machine-a")
    a.open()
    _expect(a.commit("nothing", "machine-a") is None, "commit with nothing staged")
    nothing = a.push()
    _expect(not nothing.pushed, f"push with nothing committed: {nothing}")
    path, data = _chapter("s-a", 1, "once")
    _publish(a, {path: data}, "machine-a")
    same = a.stage({path: data})
    _expect(same.unchanged == 1 and same.new == same.changed == 0, f"re-stage: {same}")
    _expect(a.commit("again", "machine-a") is None, "commit of unchanged files")


def check_push_diverged(pool: _Pool) -> None:
    """Push is fast-forward only: when the pool moved since the last pull, DIVERGED."""
    a = pool.machine("machine-a")
    b = pool.machine("machine-b")
    a.open()
    b.open()
    _publish(a, dict([_chapter("s-a", 1, "a wins")]), "machine-a")
    path, data = _chapter("s-b", 1, "b is late")
    b.stage({path: data})
    _expect(bool(b.commit("late", "machine-b")), "B's commit")
    _expect_code(FailureCode.DIVERGED, b.push, "B's push after A moved the pool")


def check_pull_ff_only(pool: _Pool) -> None:
    """Pull is fast-forward only: unpushed local commits and a moved pool are DIVERGED."""
    a = pool.machine("machine-a")
    b = pool.machine("machine-b")
    a.open()
    b.open()
    _publish(a, dict([_chapter("s-a", 1, "a")]), "machine-a")
    b.stage(dict([_chapter("s-b", 1, "b")]))
    b.commit("b", "machine-b")
    _expect_code(FailureCode.DIVERGED, b.pull, "B's pull with an unpushed commit")


def check_rebuild_converges(pool: _Pool) -> None:
    """§5.2: after DIVERGED, rebuild + re-stage + push lands; both mirrors converge."""
    a = pool.machine("machine-a")
    b = pool.machine("machine-b")
    a.open()
    b.open()
    a_path, a_data = _chapter("s-a", 1, "a")
    _publish(a, {a_path: a_data}, "machine-a")
    b_path, b_data = _chapter("s-b", 1, "b")
    b.stage({b_path: b_data})
    b.commit("b", "machine-b")
    _expect_code(FailureCode.DIVERGED, b.push, "B's push")
    state = b.rebuild()
    _expect(state.cloned, f"rebuild: {state}")
    _expect(pool.files("machine-b") == {a_path: a_data}, "a rebuilt mirror is the pool, exactly")
    head = _publish(b, {b_path: b_data}, "machine-b")
    pulled = a.pull()
    _expect(pulled.head_after == head, f"A's pull after B's rebuild: {pulled}")
    both = {a_path: a_data, b_path: b_data}
    _expect(pool.files("machine-a") == both == pool.files("machine-b"), "mirrors differ")


def check_concurrent_push(pool: _Pool) -> None:
    """Two pushes at the same moment: exactly one lands, the other is DIVERGED."""
    a = pool.machine("machine-a")
    b = pool.machine("machine-b")
    a.open()
    b.open()
    a.stage(dict([_chapter("s-a", 1, "a")]))
    b.stage(dict([_chapter("s-b", 1, "b")]))
    a.commit("a", "machine-a")
    b.commit("b", "machine-b")
    barrier = threading.Barrier(2)
    outcomes: dict[str, str] = {}

    def push(name: str, provider: KnowledgeProvider) -> None:
        barrier.wait(timeout=30)
        try:
            outcomes[name] = "pushed" if provider.push().pushed else "nothing"
        except TransportError as exc:
            outcomes[name] = exc.code.value
        except Exception as exc:  # reported in the failure message, not swallowed
            outcomes[name] = f"raised {type(exc).__name__}"

    threads = [threading.Thread(target=push, args=(n, p)) for n, p in (("a", a), ("b", b))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    _expect(sorted(outcomes.values()) == ["diverged", "pushed"], f"concurrent pushes: {outcomes}")


def check_reopen_keeps_state(pool: _Pool) -> None:
    """A new provider on an existing, clean mirror reopens it (no clone) at the same head."""
    a = pool.machine("machine-a")
    a.open()
    head = _publish(a, dict([_chapter("s-a", 1, "a")]), "machine-a")
    a.close()
    again = pool.machine("machine-a")
    state = again.open()
    _expect(not state.cloned and state.head == head, f"re-open: {state}")
    _expect(not again.push().pushed, "re-open then push: nothing to push")


CHECKS: tuple[Check, ...] = tuple(
    Check(fn.__name__.removeprefix("check_"), (fn.__doc__ or "").strip(), fn)
    for fn in (
        check_open_creates,
        check_round_trip,
        check_stage_counts,
        check_empty_commit,
        check_push_diverged,
        check_pull_ff_only,
        check_rebuild_converges,
        check_concurrent_push,
        check_reopen_keeps_state,
    )
)


def run_check(check: Check, make_pool: MakePool, make_provider: MakeProvider) -> None:
    """Run one check on a fresh pool; ConformanceError names the check on failure."""
    with _pool(make_pool, make_provider) as pool:
        try:
            check.run(pool)
        except ConformanceError as exc:
            raise ConformanceError(f"{check.name}: {exc}") from None


def check_provider(make_pool: MakePool, make_provider: MakeProvider) -> tuple[str, ...]:
    """Run every check; returns the names that passed, raises at the first failure."""
    passed: list[str] = []
    for check in CHECKS:
        run_check(check, make_pool, make_provider)
        passed.append(check.name)
    return tuple(passed)
