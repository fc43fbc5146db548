"""Filesystem store, writer lock, credentials and config files for dsh-chapters."""

from dsh_chapters_fs.__about__ import __version__

__all__ = ["__version__"]
