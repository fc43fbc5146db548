"""The credential corpus through the whole pipeline (§9): a Claude Code session holding every
credential in the seven places, archived on one machine, synced through a real local-path git
pool, pulled by a second machine; then every byte that was written is searched for every
credential: both stores, both mirrors, and every git object of the pool and both mirrors
(`git cat-file --batch-all-objects --batch`, so packed, deleted and unreachable objects too).

Shared by the app suite (`test_app_redaction_corpus.py`) and the reliability suite, which runs
it at a larger size.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from tests.acceptance.steps_common import Machine
from tests.core.credential_corpus import Credential, json_escaped, places
from tests.fixtures.conversation_script import Step, Turn
from tests.fixtures.make_fixtures import CLAUDE_PROJECT_DIR, CLAUDE_SESSION_ID, ClaudeWriter

ORIGIN = "https://github.com/acme/widgets.git"
PLACES = ("prompt", "reply", "thinking", "command", "file_write", "tool_output", "large_output")


def machine(root: Path, name: str) -> Machine:
    workspace = root / name / "widgets"
    (workspace / ".git").mkdir(parents=True)
    (workspace / ".git" / "config").write_text(f'[remote "origin"]\n\turl = {ORIGIN}\n')
    home = root / name / "home"
    home.mkdir()
    return Machine(name, workspace, home, {"DSH_HOME": str(home),
                                           "DSH_CHAPTERS_HARNESS_ID": name,
                                           "HOME": str(root / name), "PATH": "/usr/bin:/bin"})


def write_session(out: Path, creds: list[Credential], filler_lines: int = 200) -> Path:
    """A Claude Code session (records as Claude Code writes them: `make_fixtures`), one turn
    per credential: the prompt, thinking, a Bash command and its output, a file write, a
    large output that becomes an artifact, and the reply."""
    writer = ClaudeWriter(out)
    tool_results: dict[str, str] = {}
    for index, cred in enumerate(creds):
        p = places(cred, filler_lines)
        steps = (
            Step("think", p.thinking),
            Step("bash", p.command, output=p.tool_output),
            Step("write", path=f"config/settings-{index}.env", new=p.file_write,
                 output=f"File created successfully at: config/settings-{index}.env"),
            Step("bash", "cat logs/deploy.log", output=p.large_output),
            Step("say", p.reply),
        )
        writer.user(p.prompt)
        writer.run_steps(Turn(task="deploy", prompt=p.prompt, steps=steps), index, tool_results)
    path = out / "claude-code" / CLAUDE_PROJECT_DIR / f"{CLAUDE_SESSION_ID}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(writer.lines) + "\n", encoding="utf-8")
    return path


def _files(root: Path) -> dict[str, bytes]:
    out: dict[str, bytes] = {}
    if not root.exists():
        return out
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        if path.is_file() and not path.is_symlink() and not rel.startswith(".git/"):
            out[rel] = path.read_bytes()
    return out


def git_objects(git_dir: Path) -> bytes:
    """Every object of a repository, decompressed and delta-resolved, as one byte string."""
    done = subprocess.run(["git", "--git-dir", str(git_dir), "cat-file",
                           "--batch-all-objects", "--batch"], capture_output=True, check=True)
    return done.stdout


@dataclass
class Outcome:
    outputs: dict[str, bytes]  # "<where>/<path>" -> bytes, files and git object dumps
    leaks: list[tuple[str, str, str]] = field(default_factory=list)  # (where, family, probe)
    families: dict[str, int] = field(default_factory=dict)  # the archive report's counts
    chapters: int = 0
    artifacts: int = 0
    objects: dict[str, int] = field(default_factory=dict)  # git dump -> bytes


def run_pipeline(root: Path, creds: list[Credential]) -> Outcome:
    a, b = machine(root, "laptop"), machine(root, "desktop")
    session = write_session(root / "input", creds)
    report = a.ok("archive", str(session), "--harness", "claude-code", "--json").json()
    a.ok("index")
    pool = root / "drive" / "widgets.git"
    for m in (a, b):
        m.ok("link", str(pool))
    a.ok("sync")
    b.ok("sync")
    outputs: dict[str, bytes] = {}
    for m in (a, b):
        outputs |= {f"{m.name}-store/{k}": v for k, v in _files(m.store).items()}
        outputs |= {f"{m.name}-mirror/{k}": v for k, v in _files(m.mirror).items()}
    dumps = {"pool-objects": git_objects(pool),
             "laptop-mirror-objects": git_objects(a.mirror / ".git"),
             "desktop-mirror-objects": git_objects(b.mirror / ".git")}
    outputs |= dumps
    outcome = Outcome(outputs=outputs, families=dict(report.get("redactions", {})),
                      objects={k: len(v) for k, v in dumps.items()})
    outcome.chapters = sum(1 for k in outputs if k.startswith("laptop-store/")
                           and "/chapters/" in k)
    outcome.artifacts = sum(1 for k in outputs if k.startswith("laptop-store/artifacts/"))
    # Case-folded too: a signature's terms and a slug are lower case.
    folded = {where: data.lower() for where, data in outputs.items()}
    for cred in creds:
        for probe in cred.probes():
            needles = {probe.encode(), json_escaped(probe).encode()}
            for where, data in outputs.items():
                if any(n in data for n in needles) or probe.lower().encode() in folded[where]:
                    outcome.leaks.append((where, cred.family, probe[:12] + "…"))
    return outcome


def detect_secrets_exe() -> str:
    """detect-secrets from the environment (the `reliability` dependency group, which the
    default environment installs): a missing scanner fails the test that needs it."""
    exe = shutil.which("detect-secrets") or str(Path(sys.executable).parent / "detect-secrets")
    if not Path(exe).exists():
        raise AssertionError("detect-secrets is not installed: it comes with the `reliability` "
                             "dependency group (`hatch run test` installs it)")
    return exe


def detect_secrets(directory: Path) -> list[dict[str, object]]:
    """Every finding of `detect-secrets scan --all-files` under `directory`."""
    # detect-secrets reports nothing for an absolute path outside the cwd: scan "." inside it
    scan = subprocess.run([detect_secrets_exe(), "scan", "--all-files", "."], cwd=directory,
                          capture_output=True, text=True, check=True)
    return [{"file": name, **finding} for name, found in json.loads(scan.stdout)[
        "results"].items() for finding in found]


def planted_hashes(creds: list[Credential]) -> set[str]:
    """What detect-secrets would call each planted secret (it hashes with SHA-1)."""
    return {hashlib.sha1(p.encode()).hexdigest() for c in creds for p in c.probes()}
