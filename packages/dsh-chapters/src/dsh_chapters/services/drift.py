"""Format drift: what the harness readers met in a session file and did not know.

A reader counts a record of a type it does not know as `unknown` (docs/formats.md) and
archives the rest; the archive report names those types. So that a user sees drift the day a
harness starts writing something new, and not only in the output of one import, each session's
unknown types are kept in `state/formats.json` (machine-local, never published) with the
version of the harness that wrote the file, and `chapters doctor` reports them: per harness
and record type, the lines, the sessions, the versions. A log in a format version the reader
does not know at all (a DSH header `version` it was not built for) is kept there too.

Idempotent: a session read again with the same unknown types writes nothing, and a session
whose file now reads without any (a newer reader) has its record cleared.
"""

from __future__ import annotations

import contextlib
import json
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from dsh_chapters_core.errors import ChaptersError, InputError
from dsh_chapters_core.events import Transcript

from dsh_chapters.app import App

DRIFT_PATH = "state/formats.json"  # relative to the store; machine-local


@dataclass(frozen=True, slots=True)
class Drift:
    """One record type a reader did not know, over every session that holds it."""

    harness: str
    record_type: str
    lines: int
    sessions: int
    versions: tuple[str, ...]  # the harness versions that wrote it, "" when not recorded
    example: str  # one session file that holds it


@dataclass(frozen=True, slots=True)
class RefusedFormat:
    """A session file in a format version its reader does not read."""

    harness: str
    version: int | str
    source: str
    message: str


def _load(app: App) -> dict[str, Any]:
    try:
        data = json.loads(app.store_tree.read(DRIFT_PATH))
    except (OSError, ValueError, ChaptersError):
        return {}
    return data if isinstance(data, dict) else {}


def _save(app: App, data: dict[str, Any]) -> None:
    body = json.dumps(data, indent=1, sort_keys=True, ensure_ascii=False) + "\n"
    with app.lock.hold(app.config.lock_timeout_ms / 1000):
        app.store_tree.write(DRIFT_PATH, body.encode("utf-8"))


def _update(app: App, section: str, key: str, entry: dict[str, Any] | None) -> None:
    if entry is None and not app.store_tree.exists(DRIFT_PATH):
        return  # the usual case: nothing unknown, nothing recorded, nothing read
    data = _load(app)
    records = data.get(section)
    records = records if isinstance(records, dict) else {}
    if records.get(key) == entry:
        return
    if entry is None:
        records.pop(key, None)
    else:
        records[key] = entry
    data[section] = records
    _save(app, data)


def note_transcript(app: App, transcript: Transcript) -> None:
    """Keep (or clear) what one session's read did not know. Never raises: the archive has
    already succeeded, and drift bookkeeping must not undo that."""
    unknown = dict(transcript.account.unknown_types)
    entry = {"harness": transcript.harness, "version": transcript.harness_version,
             "source": transcript.source_path, "unknown": unknown} if unknown else None
    with contextlib.suppress(OSError, ChaptersError):
        _update(app, "sessions", f"{transcript.harness}/{transcript.session_id}", entry)


def note_refusal(app: App, path: str, error: InputError) -> None:
    """Keep a file refused for its format version (the reader says which, in the error's
    data); other refusals are the file's own problem and are reported where they happen."""
    if "formatVersion" not in error.data:
        return
    entry = {"harness": str(error.data.get("harness", "")),
             "formatVersion": error.data["formatVersion"], "message": error.message}
    with contextlib.suppress(OSError, ChaptersError):
        _update(app, "refused", path, entry)


def drifts(app: App) -> tuple[list[Drift], list[RefusedFormat]]:
    """Every record type a reader did not know, with counts, and every refused format."""
    data = _load(app)
    lines: dict[tuple[str, str], int] = defaultdict(int)
    sessions: dict[tuple[str, str], int] = defaultdict(int)
    versions: dict[tuple[str, str], set[str]] = defaultdict(set)
    example: dict[tuple[str, str], str] = {}
    recorded = data.get("sessions")
    for entry in (recorded.values() if isinstance(recorded, dict) else ()):
        if not isinstance(entry, dict) or not isinstance(entry.get("unknown"), dict):
            continue
        harness = str(entry.get("harness", ""))
        for name, count in entry["unknown"].items():
            key = (harness, str(name))
            lines[key] += count if isinstance(count, int) else 0
            sessions[key] += 1
            versions[key].add(str(entry.get("version", "")))
            example.setdefault(key, str(entry.get("source", "")))
    found = [Drift(h, t, lines[(h, t)], sessions[(h, t)],
                   tuple(sorted(versions[(h, t)])), example[(h, t)])
             for h, t in sorted(lines)]
    refused = data.get("refused")
    formats = [RefusedFormat(str(e.get("harness", "")), e.get("formatVersion", ""), source,
                             str(e.get("message", "")))
               for source, e in sorted(refused.items() if isinstance(refused, dict) else ())
               if isinstance(e, dict)]
    return found, formats
