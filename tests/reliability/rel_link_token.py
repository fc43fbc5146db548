"""`chapters link URL` takes its token from `DSH_CHAPTERS_TOKEN` or stdin, so it never sits in
the process arguments, and refuses a token holding whitespace or a control character (a paste
gone wrong) with its position, never its text. Against `git http-backend` behind a token check
on loopback: a token linked either way syncs; a refused one leaves no trace.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.acceptance.steps_common import Machine, project_clone
from tests.reliability.served_pools import served_pool


def _credential(m: Machine) -> str | None:
    key = m.app().identity.project_key
    path = m.home / "dsh-chapters" / "credentials" / key
    return path.read_text().removesuffix("\n") if path.exists() else None


def _link(m: Machine, *argv: str, stdin: str = "", env: dict[str, str] | None = None
          ) -> subprocess.CompletedProcess[str]:
    """`chapters link ARGV` as its own process (stdin piped), as a user's shell runs it."""
    return subprocess.run([sys.executable, "-m", "dsh_chapters", "-C", str(m.workspace),
                           "link", *argv], input=stdin, capture_output=True, text=True,
                          timeout=120, check=False, env={**os.environ, **m.env, **(env or {})})


@pytest.mark.slow
def test_link_reads_the_token_from_the_environment_or_stdin_and_refuses_bad_ones(
    tmp_path: Path, record: Any
) -> None:
    with served_pool("git-http", tmp_path / "pool") as pool:
        token = pool.token
        by_env, by_stdin, bad = (project_clone(tmp_path, name)
                                 for name in ("box-env", "box-stdin", "box-bad"))
        done = _link(by_env, pool.remote, env={"DSH_CHAPTERS_TOKEN": token})
        assert done.returncode == 0, done.stderr
        assert _credential(by_env) == token
        done = _link(by_stdin, pool.remote, stdin=token + "\n")
        assert done.returncode == 0, done.stderr
        assert _credential(by_stdin) == token
        for m in (by_env, by_stdin):
            m.archive(f"{m.name}-1")
            data = m.run("sync", "--json").json()
            assert data["ok"], data["line"]
            assert token not in m.run("link").text
        refused = 0
        for argv, stdin, env in (
            ((pool.remote, " "), "", {}),
            ((pool.remote, "a\nb"), "", {}),
            ((pool.remote, token + " "), "", {}),
            ((pool.remote,), "a b\n", {}),
            ((pool.remote,), token[:5] + "\x1b" + token[5:] + "\n", {}),
            ((pool.remote,), "", {"DSH_CHAPTERS_TOKEN": "tok\tsecond"}),
            ((pool.remote, "-"), "\u00a0" + token + "\n", {}),
        ):
            done = _link(bad, *argv, stdin=stdin, env=env)
            assert done.returncode == 2, (argv, done.stdout, done.stderr)
            assert "whitespace" in done.stderr or "control character" in done.stderr
            assert "nothing was linked" in done.stderr
            assert token not in done.stdout + done.stderr
            assert _credential(bad) is None
            assert not (bad.store / "config.toml").exists() or "knowledgeRemote" not in (
                bad.store / "config.toml").read_text()
            refused += 1
    record("link token", f"from DSH_CHAPTERS_TOKEN and from stdin: stored 0600 and synced; "
           f"{refused} tokens with whitespace or a control character refused (as an argument, "
           "on stdin, in the environment), nothing stored, the token never echoed")
