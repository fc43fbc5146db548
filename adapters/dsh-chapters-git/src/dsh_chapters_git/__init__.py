"""Git knowledge-pool transport for dsh-chapters, over dulwich."""

from dsh_chapters_git.__about__ import __version__

__all__ = ["__version__"]
