"""TreeDX knowledge-pool transport for dsh-chapters, over httpx."""

from dsh_chapters_treedx.__about__ import __version__

__all__ = ["__version__"]
