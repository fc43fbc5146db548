"""Harness bindings for dsh-chapters: DSH, Claude Code and Codex transcripts, hooks, model door."""

from dsh_chapters_harness.__about__ import __version__

__all__ = ["__version__"]
