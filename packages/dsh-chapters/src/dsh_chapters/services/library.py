"""The chapters of this machine's store: list them, resolve a user's reference, read one.

Reading goes through the read doors' one containment check (`reading.resolve`): a path names a
document of the store or of the pool mirror (what search prints), never another file of either.
"""

from __future__ import annotations

from pathlib import Path

from dsh_chapters_core.documents import Document, DocumentKind
from dsh_chapters_core.errors import ChaptersError, UsageError
from dsh_chapters_core.reading import read_text, resolve

from dsh_chapters.app import App


def chapters(app: App) -> list[Document]:
    return [d for d in app.store.documents() if d.kind is DocumentKind.CHAPTER]


def chapter_number(document: Document) -> int:
    name = document.path.rsplit("/", 1)[-1]
    digits = name.split("-", 1)[0]
    return int(digits) if digits.isdigit() else 0


def resolve_chapter(app: App, ident: str, cwd: Path) -> str:
    """A store-relative chapter path from a file path, a store path, `<session>/<NNN>` or `NNN`."""
    candidate = (cwd / ident).absolute()
    store_root = app.store_root.absolute()
    if candidate.is_file() and candidate.is_relative_to(store_root):
        return candidate.relative_to(store_root).as_posix()
    paths = [d.path for d in chapters(app)]
    stripped = ident.removeprefix(f"{app.store_root.name}/")
    if stripped in paths:
        return stripped
    session, _, number = stripped.rpartition("/")
    matches = [p for p in paths
               if number.isdigit() and p.rsplit("/", 1)[-1].split("-", 1)[0] == f"{int(number):03d}"
               and (not session or p.split("/", 1)[0].startswith(session))]
    if len(matches) == 1:
        return matches[0]
    if not matches:
        raise ChaptersError(f"no chapter matches {ident!r} ({len(paths)} chapter(s) in the store)",
                            hint="run `chapters list` and pass a path or <session>/<NNN>")
    raise UsageError(f"{ident!r} matches {len(matches)} chapters: " + ", ".join(matches[:5]),
                     hint="add the session: `chapters show <session>/<NNN>`")


def _as_read_path(app: App, ident: str, cwd: Path) -> str | None:
    """`ident` as a workspace-relative path when it names a file by path (absolute, from the
    current directory, or as search prints it: `.dsh-chapters/…`, `.dsh-knowledge/…`); None
    for a short id (`<session>/<NNN>`, `NNN`), which `resolve_chapter` reads."""
    workspace = app.workspace.absolute()
    candidate = (cwd / ident).absolute()
    try:
        is_file = candidate.is_file()
    except OSError:  # a folder above it cannot be read: the read door names it
        is_file = False
    if candidate.is_relative_to(workspace) and (is_file or ident.endswith(".md")):
        rel = candidate.relative_to(workspace).as_posix()
        if rel.startswith((f"{app.store_dir()}/", ".dsh-knowledge/")):
            return rel
    if ident.startswith((f"{app.store_dir()}/", ".dsh-knowledge/")):
        return ident
    return None


def read_chapter(app: App, ident: str, cwd: Path) -> tuple[str, str]:
    """(the workspace-relative path, the text) of the chapter `ident` names: a store or mirror
    path, as search printed it, or a short id. Either way the read is the read doors' own:
    internal files (`config.toml`, `state/`, `.git/`, ...) and quarantined pool files are
    refused, never read."""
    path = _as_read_path(app, ident, cwd)
    if path is None:
        path = f"{app.store_dir()}/{resolve_chapter(app, ident, cwd)}"
    found = resolve(path, app.read_roots())
    return found.display, read_text(found)
