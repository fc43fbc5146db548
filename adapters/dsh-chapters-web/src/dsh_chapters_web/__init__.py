"""Local web viewer for dsh-chapters: browse, search and curate an agent's archive.

`build_site(viewer, ...)` / `serve(viewer, ...)` take a `Viewer` (the port in
`dsh_chapters_core.ports.viewer`); the app builds one from its composed App.
"""

from dsh_chapters_web.__about__ import __version__

__all__ = ["__version__"]
