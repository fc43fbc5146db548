"""The chapters of this machine's store: list them, name them with ids a person can type, and
resolve what a user typed back to one chapter.

A chapter's id is `<short-session>/<n>`: the first characters of its session's directory (eight,
or more where two sessions share them, as git shortens commit ids) and its number in that
session. `chapters list` prints these ids, and `show`, `artifact` and the viewer accept them
beside paths, so the README's `chapters show <id> --line L` works on a store of many sessions.

Reading goes through the read doors' one containment check (`reading.resolve`): a path names a
document of the store or of the pool mirror (what search prints), never another file of either.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from dsh_chapters_core.documents import Document, DocumentKind
from dsh_chapters_core.errors import ChaptersError, UsageError
from dsh_chapters_core.reading import read_text, resolve

from dsh_chapters.app import App

SHORT_SESSION_CHARS = 8  # as `git log --oneline`: enough to tell sessions apart at a glance


def chapters(app: App) -> list[Document]:
    return [d for d in app.store.documents() if d.kind is DocumentKind.CHAPTER]


def chapter_number(document: Document) -> int:
    return _number_of(document.path)


def _number_of(path: str) -> int:
    name = path.rsplit("/", 1)[-1]
    digits = name.split("-", 1)[0]
    return int(digits) if digits.isdigit() else 0


def _session_of(path: str) -> str:
    return path.split("/", 1)[0]


def short_sessions(sessions: Iterable[str]) -> dict[str, str]:
    """Each session directory's shortest prefix of at least SHORT_SESSION_CHARS characters that
    no other session starts with (the whole name when it is that short, or a prefix of
    another's)."""
    names = sorted(set(sessions))
    return {name: _short(names, i) for i, name in enumerate(names)}


def _short(names: Sequence[str], i: int) -> str:
    """`names[i]`'s short form among the sorted `names`: only its neighbours can clash."""
    name = names[i]
    neighbours = [*names[max(0, i - 1):i], *names[i + 1:i + 2]]
    length = SHORT_SESSION_CHARS
    while length < len(name) and any(n.startswith(name[:length]) for n in neighbours):
        length += 1
    return name[:length]


@dataclass(frozen=True, slots=True)
class SessionChapters:
    """One session's chapters in number order, as `chapters list` groups them."""

    session: str  # the session's directory in the store (its id)
    short: str  # what a person types
    chapters: tuple[Document, ...]

    @property
    def started(self) -> str:
        dates = [d.date for d in self.chapters if d.date]
        return min(dates) if dates else ""

    def chapter_id(self, document: Document) -> str:
        return f"{self.short}/{chapter_number(document)}"


def sessions_by_date(documents: Sequence[Document]) -> list[SessionChapters]:
    """The store's chapters grouped by session: sessions in the order they started (undated
    last, then by id), chapters by number."""
    grouped: dict[str, list[Document]] = {}
    for document in documents:
        grouped.setdefault(_session_of(document.path), []).append(document)
    shorts = short_sessions(grouped)
    sessions = [SessionChapters(name, shorts[name],
                                tuple(sorted(docs, key=lambda d: (chapter_number(d), d.path))))
                for name, docs in grouped.items()]
    return sorted(sessions, key=lambda s: (not s.started, s.started, s.session))


def chapter_ids(app: App, paths: Iterable[str] | None = None) -> Mapping[str, str]:
    """Each chapter's store path -> its typed id (`<short-session>/<n>`), from the paths alone
    (parsing every chapter's frontmatter for them took seconds in a store of a few thousand
    chapters). With `paths`, only those chapters are named, against one listing of the store's
    sessions: an archive names what it wrote after every turn, and listing every session's
    chapters for that took a second at 100,000 chapters."""
    if paths is None:
        return _ids_of(app.store.chapter_paths())
    wanted = list(paths)
    if not wanted:
        return {}
    names = app.store.sessions()
    out: dict[str, str] = {}
    for path in wanted:
        session = _session_of(path)
        at = bisect.bisect_left(names, session)
        found = at < len(names) and names[at] == session
        short = _short(names, at) if found else session[:SHORT_SESSION_CHARS]
        out[path] = f"{short}/{_number_of(path)}"
    return out


def expand_chapter_id(app: App, ident: str, paths: Sequence[str] | None = None) -> str | None:
    """The store path of the chapter a typed id names (`<short-session>/<n>`,
    `<session>/<NNN>`, or a bare `n` when one session has it), None when `ident` is no id form
    (a path, a sha); an id that names no chapter, or several, is an error that lists them.
    `paths` is the store's chapter paths when the caller has them already."""
    session, _, number = ident.strip().rstrip("/").rpartition("/")
    if not number.isdigit() or "/" in session:
        return None
    return _one_match(ident, session, int(number),
                      app.store.chapter_paths() if paths is None else paths)


def _one_match(ident: str, session: str, number: int, paths: Sequence[str]) -> str:
    matches = [p for p in paths if _number_of(p) == number and _session_of(p).startswith(session)]
    if len(matches) == 1:
        return matches[0]
    ids = _ids_of(paths)
    if not matches:
        sessions = {_session_of(p) for p in paths}
        where = (f"no session starts with {session!r}" if session and not any(
            s.startswith(session) for s in sessions) else f"no chapter {number} there")
        raise ChaptersError(
            f"no chapter {ident!r}: {where} ({len(paths)} chapter(s) in "
            f"{len(sessions)} session(s))",
            hint="run `chapters list` and copy an id from its first column, e.g. "
                 f"`chapters show {next(iter(ids.values()), '<session>/<n>')}`")
    shown = ", ".join(ids[m] for m in matches[:6]) + (", …" if len(matches) > 6 else "")
    raise UsageError(f"{ident!r} is chapter {number} of {len(matches)} sessions: {shown}",
                     hint=f"name the session: `chapters show {ids[matches[0]]}`")


def _ids_of(paths: Sequence[str]) -> Mapping[str, str]:
    shorts = short_sessions(_session_of(p) for p in paths)
    return {p: f"{shorts[_session_of(p)]}/{_number_of(p)}" for p in paths}


def resolve_chapter(app: App, ident: str, cwd: Path) -> str:
    """A store-relative chapter path from a file path, a store path or a typed id."""
    candidate = (cwd / ident).absolute()
    store_root = app.store_root.absolute()
    if candidate.is_file() and candidate.is_relative_to(store_root):
        return candidate.relative_to(store_root).as_posix()
    paths = app.store.chapter_paths()
    stripped = ident.removeprefix(f"{app.store_root.name}/")
    if stripped in paths:
        return stripped
    found = expand_chapter_id(app, stripped, paths)
    if found is not None:
        return found
    raise ChaptersError(f"no chapter {ident!r}: not an id (<session>/<n>) nor a chapter's path "
                        f"({len(paths)} chapter(s) in {app.store_root})",
                        hint="run `chapters list` and copy an id from its first column")


def _as_read_path(app: App, ident: str, cwd: Path) -> str | None:
    """`ident` as a workspace-relative path when it names a file by path (absolute, from the
    current directory, or as search prints it: `.dsh-chapters/…`, `.dsh-knowledge/…`); None
    for an id (`<short-session>/<n>`), which `resolve_chapter` reads."""
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
    path, as search printed it, or an id. Either way the read is the read doors' own: internal
    files (`config.toml`, `state/`, `.git/`, ...) and quarantined pool files are refused, never
    read."""
    path = _as_read_path(app, ident, cwd)
    if path is None:
        path = f"{app.store_dir()}/{resolve_chapter(app, ident, cwd)}"
    found = resolve(path, app.read_roots())
    return found.display, read_text(found)
