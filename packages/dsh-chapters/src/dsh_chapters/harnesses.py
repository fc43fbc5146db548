"""Transcript readers: every `dsh_chapters.harnesses` entry point (ARCHITECTURE.md, "Plugins").

Plain `importlib.metadata` (STYLE.md, "Boundaries"): a name already seen is skipped, a plugin
that fails to import is logged and skipped, and what it hands back is checked against the
runtime-checkable `HarnessReader` before anything calls it.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from importlib.metadata import EntryPoint, entry_points

from dsh_chapters_core.ports.harness import HarnessReader

HARNESS_GROUP = "dsh_chapters.harnesses"

log = logging.getLogger("dsh_chapters.harnesses")


def _reader_from(entry: EntryPoint) -> HarnessReader | None:
    try:
        loaded = entry.load()
    except Exception as exc:  # a broken plugin must not take the CLI down with it
        log.warning("harness plugin %r (%s) failed to import: %s", entry.name, entry.value,
                    type(exc).__name__)
        return None
    candidate: object = loaded
    if isinstance(loaded, type):
        try:
            candidate = loaded()
        except Exception as exc:
            log.warning("harness plugin %r: %s() failed: %s", entry.name, loaded.__name__,
                        type(exc).__name__)
            return None
    if not isinstance(candidate, HarnessReader):
        log.warning("harness plugin %r returned %s, which is not a HarnessReader "
                    "(name, sniff, read, discover)", entry.name, type(candidate).__name__)
        return None
    return candidate


def load_harness_readers(
    group: str = HARNESS_GROUP, entries: Iterable[EntryPoint] | None = None
) -> dict[str, HarnessReader]:
    """Installed readers by name, in registration order; the first of a name wins."""
    readers: dict[str, HarnessReader] = {}
    seen: set[str] = set()
    for entry in entry_points(group=group) if entries is None else entries:
        if entry.name in seen:
            log.debug("harness plugin %r registered twice; keeping the first", entry.name)
            continue
        seen.add(entry.name)
        reader = _reader_from(entry)
        if reader is not None:
            readers[entry.name] = reader
    return readers
