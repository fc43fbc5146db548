"""The dependency-free domain of dsh-chapters: composition, scorer, redaction, rules."""

from dsh_chapters_core.__about__ import __version__

__all__ = ["__version__"]
