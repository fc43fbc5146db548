"""The chapters of this machine's store: list them, resolve a user's reference, read one."""

from __future__ import annotations

from pathlib import Path

from dsh_chapters_core.documents import Document, DocumentKind
from dsh_chapters_core.errors import ChaptersError, UsageError

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
