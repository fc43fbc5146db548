"""dsh-chapters: the composition root and the `chapters` CLI."""

from dsh_chapters.__about__ import __version__

__all__ = ["__version__"]
