"""dsh-chapters: the composition root and the `chapters` CLI."""

from dsh_chapters import startup

# First, before any domain record is defined: their methods compile once, not per process.
startup.install()

from dsh_chapters.__about__ import __version__  # noqa: E402

__all__ = ["__version__"]
