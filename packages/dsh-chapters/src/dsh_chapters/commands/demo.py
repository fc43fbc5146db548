"""`chapters demo`: two machines share one pool, in temporary workspaces, in a few seconds.

Each machine has its own workspace, harness id and DSH_HOME; both name the same project
(a `projectKey` line, as two clones of one repository would derive it, §2.3) and link the same
embedded local-path pool. Every step runs the real `chapters` commands through the composition
root; the demo only summarizes what they answered.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import tempfile
import time
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path
from typing import Any

from dsh_chapters_core.errors import ChaptersError
from dsh_chapters_core.search.packing import SOURCE_WORDS

from dsh_chapters.commands import build_parser
from dsh_chapters.commands.invocation import Invocation
from dsh_chapters.present import error_text, fold

SAMPLES = ("demo-session.jsonl", "demo-session-2.jsonl")
DEMO_PROJECT = "github.com/ada/widgets"
DEMO_QUERY = "retry 503 backoff"


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")


@dataclass
class DemoMachine:
    """One machine of the demo: its name, its own workspace and the environment its commands see."""

    name: str
    workspace: Path
    env: dict[str, str]

    def run(self, *argv: str) -> tuple[int, Any, str]:
        """`chapters ARGV --json` here: (exit code, data, stderr)."""
        out, err = io.StringIO(), io.StringIO()
        args = build_parser().parse_args([*argv, "--json"])
        inv = Invocation(
            cwd=self.workspace, json=True, env=self.env, stdin=io.StringIO(), stdout=out, stderr=err
        )
        try:
            code = int(args.run(args, inv))
        except ChaptersError as exc:
            return 1, None, error_text(exc)
        text = out.getvalue().strip()
        return code, json.loads(text) if text else None, err.getvalue()

    def must(self, *argv: str) -> Any:
        code, data, err = self.run(*argv)
        if code != 0:
            raise ChaptersError(
                f"demo: `chapters {' '.join(argv)}` on {self.name} exited {code}: {err.strip()}",
                hint="run `chapters demo --keep` and look inside",
            )
        return data


def _machine(root: Path, name: str) -> DemoMachine:
    workspace = root / name / "widgets"
    (workspace / ".dsh-chapters").mkdir(parents=True)
    # Two clones of one repository derive one projectKey (§2.3); here the override says so.
    (workspace / ".dsh-chapters" / "config.toml").write_text(
        f'projectKey = "{DEMO_PROJECT}"\n', encoding="utf-8"
    )
    home = root / name / "dsh-home"
    home.mkdir()
    env = {
        "DSH_HOME": str(home),
        "DSH_CHAPTERS_HARNESS_ID": name,
        "HOME": str(root / name),
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
    }
    return DemoMachine(name, workspace, env)


def _sample(root: Path, name: str) -> Path:
    target = root / "samples" / name
    target.parent.mkdir(exist_ok=True)
    target.write_bytes((files("dsh_chapters") / "samples" / name).read_bytes())
    return target


class _Story:
    """The readable lines, and the same as data for --json."""

    def __init__(self, inv: Invocation) -> None:
        self.inv = inv
        self.lines: list[str] = []
        self.steps: list[dict[str, Any]] = []

    def say(self, who: str, text: str, **data: Any) -> None:
        self.lines.append(f"  {who:<10} {text}")
        self.steps.append({"who": who, "text": text, **data})

    def more(self, text: str) -> None:
        self.lines.append(f"  {'':<10} {text}")
        self.steps[-1].setdefault("more", []).append(text)


def _clip(text: str, width: int) -> str:
    """Shorten for a one-line display, saying so with an ellipsis (the files stay whole)."""
    return text if len(text) <= width else text[: width - 1] + "…"


def _pool_chapters_text(listed: list[dict[str, Any]], limit: int) -> list[str]:
    rows = [
        f"{c['harnessId']}  {c['path'].rsplit('/', 1)[-1].split('-', 1)[0]}  "
        f"{_clip(c['title'], 60)}"
        for c in listed[:limit]
    ]
    if len(listed) > limit:
        rows.append(f"… and {len(listed) - limit} more")
    return rows


def run_two_machine_demo(inv: Invocation, *, keep: bool) -> int:
    started = time.monotonic()
    root = Path(tempfile.mkdtemp(prefix="chapters-demo-"))
    story = _Story(inv)
    try:
        share = root / "shared-drive"
        pool = share / "widgets.git"
        a, b = _machine(root, "machine-a"), _machine(root, "machine-b")
        story.say("pool", f"{pool} (a local-path pool: the first sync creates it)")

        a.must("link", str(pool))
        archived = a.must("archive", str(_sample(root, SAMPLES[0])))
        story.say(
            a.name,
            f"archived the sample session: {archived['turns']['archived']} turns "
            f"into {_count(len(archived['chapters']), 'chapter')}",
            chapters=[c["path"] for c in archived["chapters"]],
        )
        story.more(f"sync: {(archived.get('pool') or {}).get('line', 'not linked')}")

        b.must("link", str(pool))
        code, report, _ = b.run("sync")
        story.say(b.name, f"sync: {report['line']}", exit=code)
        listed = b.must("list", "--pool")
        story.say(
            b.name,
            f"reads {_count(len(listed), 'chapter')} from the pool, written by "
            f"{', '.join(sorted({c['harnessId'] for c in listed}))}:",
        )
        for row in _pool_chapters_text(listed, 3):
            story.more(row)
        found = b.must("search", *DEMO_QUERY.split())
        matches = found.get("matches", [])
        story.say(
            b.name,
            f"searches {DEMO_QUERY!r}: shown {found.get('shown', 0)} of "
            f"{found.get('total', 0)} in {SOURCE_WORDS.get(found.get('door', ''), 'its archive')}",
            matches=[m.get("path", "") for m in matches],
        )
        for match in matches[:2]:
            number = match.get("path", "").rsplit("/", 1)[-1].split("-", 1)[0]
            story.more(f"chapter {number}: {_clip(match.get('title', ''), 60)}")
        # Offline: the pool's drive goes away (a dropped mount). The mirror knows its pool, so
        # the next sync reports it missing instead of creating a new, empty one.
        away = root / "shared-drive.unplugged"
        share.rename(away)
        story.say("offline", "the pool's drive is unplugged")
        archived = a.must("archive", str(_sample(root, SAMPLES[1])))
        story.say(
            a.name,
            f"archived a second session: {_count(len(archived['chapters']), 'chapter')} "
            "(the archive never waits on the pool)",
        )
        code, report, _ = a.run("sync")
        story.say(a.name, f"sync: {report['line']}", exit=code)
        status = a.must("status")
        story.more(
            f"status: local-only={status['pool']['localOnly']}, {status['pool']['pending']} pending"
        )

        away.rename(share)
        story.say("online", "the drive is back")
        code, report, _ = a.run("sync")
        story.say(a.name, f"sync: {report['line']}", exit=code)
        code, report, _ = b.run("sync")
        story.say(b.name, f"sync: {report['line']}", exit=code)
        listed = b.must("list", "--pool")
        story.more(f"now reads {_count(len(listed), 'chapter')} of machine-a from the pool")
    finally:
        elapsed = time.monotonic() - started
        if keep:
            where = f"kept {root}"
        else:
            shutil.rmtree(root, ignore_errors=True)
            where = "removed the temporary directory (--keep keeps it)"
    header = "chapters demo: two machines, one pool"
    footer = f"done in {elapsed:.1f} s · {where}"
    story.inv.emit(
        {"root": str(root), "kept": keep, "seconds": round(elapsed, 2), "steps": story.steps},
        fold("\n".join([header, *story.lines, footer])),
    )
    return 0


def run_demo(args: argparse.Namespace, inv: Invocation) -> int:
    return run_two_machine_demo(inv, keep=args.keep)


def register(subparsers: Any, common: argparse.ArgumentParser) -> None:
    demo = subparsers.add_parser(
        "demo",
        parents=[common],
        help="two machines share one pool, in temporary workspaces",
        description="Creates two machines and a local-path pool in a temporary directory, "
        "archives a bundled sample session on A, syncs both, shows B reading A's "
        "chapters, then the offline case degrading and recovering.",
    )
    demo.add_argument("--keep", action="store_true", help="keep the temporary directory")
    demo.set_defaults(run=run_demo)
