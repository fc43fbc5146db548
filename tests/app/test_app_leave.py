"""The `chapters` script leaves without tearing Python down (cli.leave): what a normal exit does
for the user still happens (output flushed, exit handlers run, the exit code kept, a running
thread waited for), and a reader that closes the pipe early is not an error."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path


def _run(code: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, cwd=tmp_path, env=env, timeout=60)


def test_output_is_flushed_and_exit_handlers_run(tmp_path: Path) -> None:
    done = _run("""
        import atexit, sys
        from dsh_chapters.cli import leave
        atexit.register(lambda: open("handler-ran", "w").write("yes"))
        atexit.register(lambda: print("printed by a handler"))
        sys.stdout.write("no newline yet")  # still in the buffer
        sys.stderr.write("to stderr")
        leave(3)
        print("never")
    """, tmp_path)
    assert done.returncode == 3
    assert done.stdout == "no newline yetprinted by a handler\n"
    assert done.stderr == "to stderr"
    assert (tmp_path / "handler-ran").read_text() == "yes"


def test_a_running_thread_is_waited_for(tmp_path: Path) -> None:
    done = _run("""
        import threading, time
        from dsh_chapters.cli import leave
        def late():
            time.sleep(0.3)
            print("the thread finished")
        threading.Thread(target=late).start()
        leave(0)
    """, tmp_path)
    assert done.returncode == 0
    assert done.stdout == "the thread finished\n"


def test_the_script_leaves_with_the_command_s_exit_code(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["DSH_HOME"] = str(tmp_path / "home")
    ok = subprocess.run([sys.executable, "-m", "dsh_chapters", "search", "anything", "--json"],
                        capture_output=True, text=True, cwd=tmp_path, env=env, timeout=120)
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.startswith("{") and ok.stdout.endswith("}\n")
    bad = subprocess.run([sys.executable, "-m", "dsh_chapters", "show", "no/such.md", "--json"],
                         capture_output=True, text=True, cwd=tmp_path, env=env, timeout=120)
    assert bad.returncode == 1
    assert '"exitCode": 1' in bad.stdout and bad.stderr.startswith("chapters: ")


def test_a_reader_that_closes_the_pipe_early_is_not_an_error(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    writer = subprocess.Popen(
        [sys.executable, "-c", "import sys\nfrom dsh_chapters.cli import leave\n"
         "sys.stdout.write('x' * 1_000_000)\nleave(0)"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tmp_path, env=env)
    assert writer.stdout is not None and writer.stderr is not None
    assert writer.stdout.read(10) == b"x" * 10
    writer.stdout.close()  # the reader goes away with most of the output unread
    err = writer.stderr.read()
    writer.stderr.close()
    assert writer.wait(timeout=60) == 0
    assert b"Error" not in err and b"Exception" not in err
