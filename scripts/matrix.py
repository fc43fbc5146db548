# ruff: noqa: E501 - the scenarios are scripts held as data: their long lines run in the venvs
"""The pick-and-mix install matrix: fresh venvs from wheels, one short scenario each.

    hatch run matrix [--dist DIR] [--keep]

Builds every wheel (`hatch build --all -t wheel`, plus the two example plugins, which are no
workspace members), then for each combination makes a fresh virtual environment, installs the
combination's third-party requirements from the package index and our wheels with
`pip install --no-index --find-links`, runs a scenario there and prints one line saying what it
proved. A scenario that fails prints its output and the script exits 1.
"""

from __future__ import annotations

import argparse
import email.parser
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ("examples/dsh-chapters-folder", "examples/dsh-chapters-specstory")
OURS = re.compile(r"^dsh[-_]chapters")
ABSENT = ("dulwich", "httpx", "mcp")  # the optional adapters' third-party libraries


@dataclass(frozen=True)
class Combo:
    name: str
    packages: tuple[str, ...]  # distribution names of our wheels
    scenario: str  # Python run inside the venv; prints the proof line's details
    extra: tuple[str, ...] = ()  # third-party requirements the scenario itself uses


CORE = ("dsh-chapters-core",)
LOCAL = (*CORE, "dsh-chapters-fs", "dsh-chapters-harness", "dsh-chapters")
GIT = (*LOCAL, "dsh-chapters-git")
TREEDX = (*GIT, "dsh-chapters-treedx")
MCP = (*TREEDX, "dsh-chapters-mcp")
EVERYTHING = (*MCP, "dsh-chapters-folder", "dsh-chapters-specstory")

# Shared by the scenarios: run `chapters` in a workspace of its own, check absent imports.
PRELUDE = r'''
import importlib.util, json, os, subprocess, sys, tempfile
from pathlib import Path
from importlib.resources import files

def absent(*names):
    found = [n for n in names if importlib.util.find_spec(n) is not None]
    assert not found, f"importable but not installed on purpose: {found}"
    return "no " + "/".join(names) + " importable"

def workspace(root, name):
    ws = Path(root) / name / "widgets"
    (ws / ".git").mkdir(parents=True)
    (ws / ".git" / "config").write_text('[remote "origin"]\n\turl = https://example.org/acme/widgets.git\n')
    env = {**os.environ, "DSH_HOME": str(Path(root) / name / "home"), "HOME": str(Path(root) / name),
           "DSH_CHAPTERS_HARNESS_ID": name}
    return ws, env

def chapters(ws, env, *argv, code=0):
    done = subprocess.run([sys.executable, "-m", "dsh_chapters", "-C", str(ws), *argv],
                          env=env, capture_output=True, text=True, timeout=180)
    assert done.returncode == code, f"chapters {argv}: exit {done.returncode}\n{done.stdout}{done.stderr}"
    return done

def sample(root):
    path = Path(root) / "session.jsonl"
    path.write_text((files("dsh_chapters") / "samples" / "demo-session.jsonl").read_text("utf-8"))
    return path

root = tempfile.mkdtemp(prefix="dsh-matrix-")
'''

SCENARIOS = {
    "core": r'''
import importlib, pkgutil
import dsh_chapters_core
from dsh_chapters_core.archive import archive_transcript
from dsh_chapters_core.config import Config
from dsh_chapters_core.events import (AssistantMessage, LineAccount, ToolCall, ToolResult,
                                      Transcript, TurnEnd, TurnStart, UserMessage)
from dsh_chapters_core.projectkey import ProjectIdentity
from dsh_chapters_core.redact import redact
from dsh_chapters_core.testing.fakes_store import FakeChapterStore, FakeWriterLock, FixedClock

token = "ghp_" + "Zq7RkW2mXo9TfB4nLc8VyD1sHa6JpE3uGi5K"
events = []
for i, (prompt, output) in enumerate([("read the config loader", "def load(): ..."),
                                      ("why does CI fail?", f"GITHUB_TOKEN={token} leaked")]):
    s = i * 10
    events += [TurnStart(s), UserMessage(s + 1, prompt), ToolCall(s + 2, f"c{i}", "bash", "{}"),
               ToolResult(s + 3, f"c{i}", output), AssistantMessage(s + 4, "done"), TurnEnd(s + 5)]
transcript = Transcript("s-1", "script", tuple(events), LineAccount(imported=len(events)))
lock = FakeWriterLock()
store = FakeChapterStore(lock=lock)
report = archive_transcript(transcript, store=store, lock=lock, clock=FixedClock(),
                            config=Config(), identity=ProjectIdentity("pk", "example.org/x", "remote"),
                            harness_id="script")
text = "\n".join(store.files.values())
assert report.turns_archived == 2 and report.chapters and token not in text, report
assert redact(f"key {token}").total == 1
names = [m.name for m in pkgutil.walk_packages(dsh_chapters_core.__path__, "dsh_chapters_core.")]
for name in names:
    importlib.import_module(name)
print(f"composed {len(report.chapters)} chapter(s) from {report.turns_archived} turns and "
      f"redacted {sum(n for _, n in report.redactions)} credential(s) in a script; "
      f"{len(names)} modules import; " + absent("attrs", "yaml", *ABSENT))
''',
    "local": r'''
ws, env = workspace(root, "box-a")
archived = json.loads(chapters(ws, env, "archive", str(sample(root)), "--json").stdout)
found = chapters(ws, env, "search", "retry loop gives up after one attempt").stdout
assert archived["chapters"] and "http_client" in found, (archived, found)
refused = chapters(ws, env, "link", str(Path(root) / "pool.git"), code=2)
assert "pip install dsh-chapters-git" in refused.stderr, refused.stderr
tdx = chapters(ws, env, "link", "treedx+https://treedx.example.org/acme/k", "tok", code=2)
assert "pip install dsh-chapters-treedx" in tdx.stderr, tdx.stderr
mcp = chapters(ws, env, "mcp", code=1)
assert "dsh-chapters-mcp" in mcp.stderr, mcp.stderr
print(f"archived {len(archived['chapters'])} chapter(s) and found the retry-loop chapter by search; "
      f"a local-path pool, a treedx+ pool and `chapters mcp` each name their package; "
      + absent(*ABSENT))
''',
    "git": r'''
a, a_env = workspace(root, "box-a")
b, b_env = workspace(root, "box-b")
pool = Path(root) / "pools" / "widgets.git"
chapters(a, a_env, "link", str(pool))
chapters(a, a_env, "archive", str(sample(root)))
chapters(a, a_env, "sync")
chapters(b, b_env, "link", str(pool))
got = json.loads(chapters(b, b_env, "sync", "--json").stdout)
assert got["ok"] and got["copiedInNew"] > 0, got
tdx = chapters(a, a_env, "link", "treedx+https://treedx.example.org/acme/k", "tok", code=2)
assert "pip install dsh-chapters-treedx" in tdx.stderr, tdx.stderr
print(f"two machines synced through a local git pool ({got['copiedInNew']} file(s) copied in); "
      "a treedx+ pool names dsh-chapters-treedx; " + absent("httpx", "mcp"))
''',
    "treedx": r'''
from dsh_chapters_treedx.testing import FakeTreeDX
with FakeTreeDX() as fake:
    token = fake.issue_token()
    remote = fake.remote("widgets-knowledge")
    a, a_env = workspace(root, "box-a")
    b, b_env = workspace(root, "box-b")
    chapters(a, a_env, "link", remote, token)
    chapters(a, a_env, "archive", str(sample(root)))
    chapters(a, a_env, "sync")
    chapters(b, b_env, "link", remote, token)
    got = json.loads(chapters(b, b_env, "sync", "--json").stdout)
assert got["ok"] and got["provider"] == "treedx" and got["copiedInNew"] > 0, got
folder = chapters(a, a_env, "link", f"folder+{Path(root) / 'Sync'}", code=2)
assert "pip install dsh-chapters-folder" in folder.stderr, folder.stderr
print(f"two machines synced through a loopback TreeDX pool ({got['copiedInNew']} file(s) "
      "copied in); a folder+ pool names dsh-chapters-folder; " + absent("mcp"))
''',
    "mcp": r'''
import anyio
from mcp import ClientSession, StdioServerParameters, stdio_client
ws, env = workspace(root, "box-a")
chapters(ws, env, "archive", str(sample(root)))
params = StdioServerParameters(command=sys.executable, args=["-m", "dsh_chapters", "-C", str(ws), "mcp"],
                               env=env, cwd=str(ws))
async def main():
    with open(os.devnull, "w") as err:
        async with stdio_client(params, errlog=err) as (read, write), ClientSession(read, write) as s:
            await s.initialize()
            tools = [t.name for t in (await s.list_tools()).tools]
            found = await s.call_tool("chapters_search", {"query": "retry loop gives up"})
            return tools, found
tools, found = anyio.run(main)
assert "chapters_search" in tools and not found.is_error, found
assert "http_client" in json.dumps(found.structured_content), found
specstory = chapters(ws, env, "import", "specstory", code=2)
assert "pip install dsh-chapters-specstory" in specstory.stderr, specstory.stderr
print(f"`chapters mcp` served {len(tools)} tools over stdio and answered chapters_search; "
      "`chapters import specstory` names dsh-chapters-specstory")
''',
    "everything": r'''
tests = [str(Path(EXAMPLES_ROOT) / e / "tests") for e in ("dsh-chapters-folder", "dsh-chapters-specstory")]
ini = Path(root) / "pytest.ini"  # the kits' own settings, not the repository's
ini.write_text("[pytest]\nmarkers =\n    slow: starts subprocesses\nfilterwarnings = error\n")
done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                       "-c", str(ini), "--rootdir", root, "--import-mode=importlib",
                       "--strict-markers", *tests],
                      capture_output=True, text=True, cwd=root, timeout=600)
assert done.returncode == 0, done.stdout + done.stderr
summary = done.stdout.strip().splitlines()[-1]
from dsh_chapters.plugins import load_harness_readers, load_provider_factories
providers = sorted(f.name for f in load_provider_factories())
readers = sorted(load_harness_readers())
assert providers == ["folder", "git", "treedx"] and "specstory" in readers, (providers, readers)
print(f"both example kits, a two-machine folder+ sync with a half-synced chapter and "
      f"`chapters import specstory` pass from wheels ({summary}); providers {providers}, "
      f"readers {readers}")
''',
}

COMBOS = (
    Combo("core alone", CORE, "core"),
    Combo("core + fs + app", LOCAL, "local"),
    Combo("core + fs + app + git", GIT, "git"),
    Combo("+ treedx", TREEDX, "treedx"),
    Combo("+ mcp", MCP, "mcp"),
    Combo("everything + both examples", EVERYTHING, "everything", extra=("pytest>=8.3",)),
)


def _run(argv: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, check=True, capture_output=True, text=True, **kwargs)  # type: ignore[call-overload, no-any-return]


def build(dist: Path) -> None:
    dist.mkdir(parents=True, exist_ok=True)
    if not list(dist.glob("dsh_chapters_core-*.whl")):
        _run(["hatch", "build", "--all", "-t", "wheel", str(dist.resolve())], cwd=ROOT)
    for example in EXAMPLES:
        _run(["hatch", "build", "-t", "wheel", str(dist.resolve())], cwd=ROOT / example)


def wheels(dist: Path) -> dict[str, Path]:
    found: dict[str, Path] = {}
    for wheel in sorted(dist.glob("*.whl")):
        found[wheel.name.split("-")[0].replace("_", "-")] = wheel
    return found


def third_party(wheel: Path) -> list[str]:
    """A wheel's unconditional requirements that are not ours (ours come from --find-links)."""
    with zipfile.ZipFile(wheel) as archive:
        name = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        metadata = email.parser.Parser().parsestr(archive.read(name).decode("utf-8"))
    return [req for req in metadata.get_all("Requires-Dist") or []
            if ";" not in req and not OURS.match(req)]


def prove(combo: Combo, found: dict[str, Path], scratch: Path) -> tuple[bool, str]:
    venv = scratch / re.sub(r"\W+", "-", combo.name).strip("-")
    _run([sys.executable, "-m", "venv", str(venv)])
    python = str(venv / "bin" / "python")
    picked = [found[name] for name in combo.packages]
    requirements = sorted({r for w in picked for r in third_party(w)} | set(combo.extra))
    pip = [python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    if requirements:
        _run([*pip, *requirements])
    _run([*pip, "--no-index", "--find-links", str(picked[0].parent), *map(str, picked)])
    script = venv / "scenario.py"
    script.write_text(f"ABSENT = {ABSENT!r}\nEXAMPLES_ROOT = {str(ROOT / 'examples')!r}\n"
                      + PRELUDE + SCENARIOS[combo.scenario], encoding="utf-8")
    done = subprocess.run([python, str(script)], capture_output=True, text=True, timeout=900,
                          env={k: v for k, v in os.environ.items()
                               if k not in ("PYTHONPATH", "VIRTUAL_ENV")},
                          cwd=str(scratch))
    if done.returncode != 0:
        return False, (done.stdout + done.stderr).strip()
    return True, done.stdout.strip().splitlines()[-1]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dist", help="where the wheels are (built there when absent)")
    parser.add_argument("--keep", action="store_true", help="keep the venvs for a post-mortem")
    parser.add_argument("--jobs", type=int, default=2, help="venvs made at the same time")
    parser.add_argument("--figures", help="write each venv's outcome and seconds here (JSON)")
    parser.add_argument("--only", action="append", default=[],
                        help="run only the combination of this scenario name (repeatable)")
    args = parser.parse_args(argv)
    scratch = Path(tempfile.mkdtemp(prefix="dsh-matrix-"))
    # Our examples are built beside the project's wheels, into a directory of their own so a
    # caller's `dist/` keeps exactly the project's wheels.
    dist = scratch / "dist"
    if args.dist:
        shutil.copytree(args.dist, dist)
    started = time.monotonic()
    build(dist)
    found = wheels(dist)
    failed = 0
    chosen = [c for c in COMBOS if not args.only or c.scenario in args.only]
    figures: list[dict[str, object]] = []

    def timed(combo: Combo) -> tuple[bool, str, float]:
        at = time.monotonic()
        ok, line = prove(combo, found, scratch)
        return ok, line, time.monotonic() - at

    try:
        # Two venvs at a time: most of a venv's time is pip and subprocesses waiting.
        with ThreadPoolExecutor(max_workers=args.jobs) as pool:
            for combo, (ok, line, took) in zip(chosen, pool.map(timed, chosen), strict=True):
                print(f"{'ok  ' if ok else 'FAIL'} {combo.name:<28} {took:5.1f}s  {line}",
                      flush=True)
                failed += not ok
                figures.append({"venv": combo.name, "packages": list(combo.packages), "ok": ok,
                                "seconds": round(took, 1), "proved": line if ok else ""})
    finally:
        if not args.keep:
            shutil.rmtree(scratch, ignore_errors=True)
    total = time.monotonic() - started
    print(f"matrix: {len(chosen) - failed} of {len(chosen)} venvs proved their line in "
          f"{total:.0f}s")
    if args.figures:
        Path(args.figures).write_text(json.dumps(
            {"venvs": figures, "totalSeconds": round(total, 1), "jobs": args.jobs,
             "cpus": os.cpu_count()}, indent=2) + "\n", encoding="utf-8")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
