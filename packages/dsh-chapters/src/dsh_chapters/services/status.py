"""The sections of `chapters status`, one small function each.

The composition root lists them, in print order, in `Factories.status_sections`; nothing
appends to a global at import time.
"""

from __future__ import annotations

from dsh_chapters_core.errors import ChaptersError
from dsh_chapters_core.search.service import read_search_status, status_line

from dsh_chapters.app import App, StatusSection
from dsh_chapters.present import BUILD_INDEX
from dsh_chapters.services import enrich, pool, quarantine


def store_section(app: App) -> StatusSection:
    tally = app.store.chapter_tally()  # reads only what changed since the last status
    meta = app.store.session_meta()
    artifacts = app.store.artifact_count()
    modified = tally.modified
    last = app.log.last("archive")
    data = {
        "root": str(app.store_root), "projectKey": app.identity.project_key,
        "derivation": app.identity.derivation, "canonical": app.identity.canonical,
        "harnessId": app.harness_id, "chapters": tally.chapters, "artifacts": artifacts,
        "sessions": len(meta), "modifiedSinceArchived": modified,
        "lastArchive": last,
    }
    last_text = (f"{last.get('at', '?')} ({last.get('harness', '?')} session "
                 f"{last.get('sessionId', '?')}, {len(last.get('chapters', []))} chapter(s))"
                 if last else "never")
    lines = [
        f"store      {app.store_root}",
        f"projectKey {app.identity.project_key} ({app.identity.derivation}: "
        f"{app.identity.canonical})",
        f"harnessId  {app.harness_id}",
        f"archive    {tally.chapters} chapter(s) · {artifacts} artifact(s) · "
        f"{len(meta)} session(s)" + (f" · {modified} modified since archived" if modified else ""),
        f"last       {last_text}",
    ]
    return StatusSection("store", data, lines)


def lock_section(app: App) -> StatusSection:
    state = app.lock.state()
    data = {"held": state.held, "pid": state.pid, "ageSeconds": round(state.age_seconds, 1),
            "stale": state.stale, "path": state.path}
    if state.held:
        text = f"held by pid {state.pid} for {state.age_seconds:.0f} s"
    elif state.stale:
        text = (f"free; a stale holder (pid {state.pid}, {state.age_seconds:.0f} s ago) was killed "
                "mid-write; the next archive takes over")
    else:
        text = "free"
    return StatusSection("lock", data, [f"lock       {text}"])


def pool_section(app: App) -> StatusSection:
    try:
        status = pool.pool_status(app)
        return StatusSection("pool", status.to_json(), pool.status_lines(app, status))
    except ChaptersError as exc:  # the pool never breaks the local status (§5.3)
        return StatusSection("pool", {"error": exc.message}, [f"pool: {exc.message}"])


def quarantine_section(app: App) -> StatusSection:
    """What every command skipped, and why: unreadable store files, refused pool files."""
    data, lines = quarantine.status_section(app)
    return StatusSection("quarantine", data, lines)


def search_section(app: App) -> StatusSection:
    """Shard count and vocabulary candidates per door (as of the last refresh)."""
    return StatusSection("search", read_search_status(app.store_tree),
                         [status_line(app.store_tree, build_index=BUILD_INDEX)])


def enrich_section(app: App) -> StatusSection:
    """The queue length, the route and the last run."""
    try:
        return StatusSection("enrich", enrich.queue_summary(app), enrich.status_lines(app))
    except ChaptersError as exc:  # enrichment never breaks the local status
        return StatusSection("enrich", {"error": exc.message}, [f"enrich     {exc.message}"])


def status(app: App) -> list[StatusSection]:
    return [section(app) for section in app.factories.status_sections()]
