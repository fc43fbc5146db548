"""Readers bound their inputs. Each case runs `chapters archive` as its own process, under a
time limit (a read that waits forever fails here, it does not hang the suite), and checks the
exit code, that no traceback was printed, and what reached the store:

- 100,000 nested `{`: refused with a named error (the format sniff included).
- Claude Code side files (`<session>/tool-results/<id>.txt`) that are a FIFO, a symlink to
  `/dev/zero`, a symlink to `/etc/passwd`, reached through a symlinked `tool-results/`, or
  over `readerSideFileMaxBytes`: refused unread, counted in the report, the log's stub kept.
- A Zstandard bomb (32 KB of RLE blocks that decompress to 1 GiB, as one line or as blank
  lines): stopped at `readerDecompressionMaxRatio` or `readerDecompressedMaxBytes`, with the
  numbers, in bounded time and memory.
"""

from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.acceptance.steps_common import Machine, project_clone

FIXTURE = (Path(__file__).resolve().parents[1] / "fixtures" / "claude-code"
           / "-home-dev-work-acme-api")
SESSION = "5f0c2a9e-8d3b-4e61-9a7c-2b1d4e6f8a10"
SIDE = "toolu_01qmLVeMJghPBGH1Cd9VjHG8hg.txt"
RUN_LIMIT_S = 120


def _archive(m: Machine, path: Path, *extra: str) -> tuple[int, str, str, int, float]:
    """(exit code, stdout, stderr, peak RSS in KiB, seconds) of `chapters archive PATH` run as
    its own process, measured by a wrapper that has no other child."""
    probe = ("import resource, subprocess, sys, time; t = time.monotonic(); "
             "p = subprocess.run(sys.argv[1:], capture_output=True, text=True); "
             "sys.stdout.write(str(p.returncode) + '\\0' + p.stdout + '\\0' + p.stderr + '\\0' "
             "+ str(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss) + '\\0' "
             "+ str(time.monotonic() - t))")
    done = subprocess.run([sys.executable, "-c", probe, sys.executable, "-m", "dsh_chapters",
                           "-C", str(m.workspace), "archive", str(path), "--json", *extra],
                          capture_output=True, text=True, timeout=RUN_LIMIT_S,
                          env={**os.environ, **m.env}, check=False)
    code, out, err, rss, seconds = done.stdout.split("\0")
    return int(code), out, err, int(rss), float(seconds)


def _side_file_session(root: Path, variant: str) -> Path:
    """The Claude Code fixture copied to `root`, its one side file replaced by `variant`."""
    target = root / "claude"
    shutil.copytree(FIXTURE, target, symlinks=True)
    results = target / SESSION / "tool-results"
    side = results / SIDE
    side.unlink()
    if variant == "fifo":
        os.mkfifo(side)
    elif variant == "dev-zero":
        side.symlink_to("/dev/zero")
    elif variant == "etc-passwd":
        side.symlink_to("/etc/passwd")
    elif variant == "linked-dir":
        outside = root / "outside"
        outside.mkdir()
        (outside / SIDE).write_text("root:x:0:0:outside the session folder\n")
        shutil.rmtree(results)
        results.symlink_to(outside, target_is_directory=True)
    elif variant == "too-big":
        side.write_bytes(b"y" * 4096)
    else:
        raise ValueError(variant)
    return target / f"{SESSION}.jsonl"


@pytest.mark.slow
@pytest.mark.parametrize("variant", ["fifo", "dev-zero", "etc-passwd", "linked-dir", "too-big"])
def test_side_files_are_read_only_when_regular_and_inside_the_session(
    variant: str, tmp_path: Path, record: Any
) -> None:
    m = project_clone(tmp_path, "box-a")
    m.set_config("readerSideFileMaxBytes = 1024")  # the too-big case is over it
    session = _side_file_session(tmp_path, variant)
    code, out, err, rss, seconds = _archive(m, session)
    assert code == 0 and "Traceback" not in err, err
    report = json.loads(out)
    assert report["lines"]["sideFilesRefused"] == 1, report["lines"]
    stored = b"".join(p.read_bytes() for p in m.store.rglob("*") if p.is_file()
                      and "cache" not in p.relative_to(m.store).parts)  # a database's zeros
    assert b"root:x:0:0" not in stored
    assert b"\0" * 1024 not in stored
    assert b"saved to:" in stored, "the log's own stub is kept in place of the output"
    record(f"side file: {variant}", f"refused unread and counted (sideFilesRefused 1), "
           f"archive exit 0 in {seconds:.1f} s, peak RSS {rss // 1024} MB")


def _rle_frame(byte: int, blocks: int) -> bytes:
    """A Zstandard frame of `blocks` RLE blocks of 128 KiB each: 4 bytes in, 128 KiB out."""
    out = bytearray(struct.pack("<I", 0xFD2FB528)) + bytes([0x00, 0x38])  # window 128 KiB
    for i in range(blocks):
        header = (131072 << 3) | (1 << 1) | (1 if i == blocks - 1 else 0)
        out += header.to_bytes(3, "little") + bytes([byte])
    return bytes(out)


def _dsh_bomb(root: Path, byte: int) -> Path:
    """A DSH log (`session.jsonl.zstd`): its header line in one frame, then 1 GiB of `byte`
    in 32 KB (8,192 RLE blocks)."""
    import zstandard

    header = json.dumps({"type": "session", "version": 0,
                         "id": "7b1e0c2a-1d3b-4c8e-9a61-0d2f3b4c5a6e", "createdAt": 1796029200000,
                         "cwd": str(root), "delegationDepth": 0}) + "\n"
    path = root / "bomb" / "session.jsonl.zstd"
    path.parent.mkdir()
    path.write_bytes(zstandard.ZstdCompressor().compress(header.encode()) +
                     _rle_frame(byte, 8192))
    return path


BOMBS = {  # shape -> (byte the 1 GiB holds, config lines, the cap that must stop it)
    "one line": (ord("a"), (), "readerDecompressionMaxRatio"),
    "blank lines": (ord("\n"), (), "readerDecompressionMaxRatio"),
    "under the ratio": (ord("\n"), ("readerDecompressionMaxRatio = 1000000",
                                     "readerDecompressedMaxBytes = 8388608"),
                        "readerDecompressedMaxBytes"),
}


@pytest.mark.slow
@pytest.mark.parametrize("shape", list(BOMBS))
def test_a_zstd_bomb_stops_at_its_cap_in_bounded_time_and_memory(
    shape: str, tmp_path: Path, record: Any
) -> None:
    byte, config, cap = BOMBS[shape]
    m = project_clone(tmp_path, "box-a")
    for line in config:
        m.set_config(line)
    bomb = _dsh_bomb(tmp_path, byte)
    assert bomb.stat().st_size < 64 * 1024
    code, _out, err, rss, seconds = _archive(m, bomb, "--harness", "dsh")
    assert code == 1 and "Traceback" not in err, err
    assert cap in err, err
    assert seconds < 60, f"{seconds:.0f} s"
    assert rss < 400_000, f"peak RSS {rss // 1024} MB"
    record(f"zstd bomb ({shape})", f"{bomb.stat().st_size // 1024} KB that decompress to "
           f"1 GiB: stopped at {cap}, exit 1 named, in {seconds:.1f} s, peak RSS "
           f"{rss // 1024} MB")


@pytest.mark.slow
def test_nesting_past_the_parser_is_a_named_error_not_a_traceback(
    tmp_path: Path, record: Any
) -> None:
    m = project_clone(tmp_path, "box-a")
    deep = tmp_path / "deep.jsonl"
    deep.write_text("{" * 100_000 + "\n")
    for extra in ((), ("--harness", "claude-code"), ("--harness", "codex"), ("--harness", "dsh")):
        code, _out, err, _rss, _s = _archive(m, deep, *extra)
        assert code == 1 and "Traceback" not in err, (extra, err)
        assert err.startswith("chapters: "), err
    record("100,000 nested {", "refused with a named error by the sniff and by each reader")
