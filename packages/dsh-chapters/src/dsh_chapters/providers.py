"""Transport plugins: every `dsh_chapters.providers` entry point (amendment 2026-09-21).

Plain `importlib.metadata` (STYLE.md, "Boundaries"): a name already seen is skipped, a plugin
that fails to import is logged and skipped, and what it hands back is checked against the
runtime-checkable `ProviderFactory` before anything calls it. Which factory serves a remote is
the core's `select_provider` (by scheme; `knowledgeProvider` must agree).
"""

from __future__ import annotations

import logging
from importlib.metadata import EntryPoint, entry_points

from dsh_chapters_core.ports.transport import ProviderFactory

PROVIDER_GROUP = "dsh_chapters.providers"

log = logging.getLogger("dsh_chapters.providers")


def _factory_from(entry: EntryPoint) -> ProviderFactory | None:
    try:
        loaded = entry.load()
    except Exception as exc:  # a broken plugin must not take the CLI down with it
        log.warning(
            "provider plugin %r (%s) failed to import: %s",
            entry.name,
            entry.value,
            type(exc).__name__,
        )
        return None
    candidate: object = loaded
    if isinstance(loaded, type):
        try:
            candidate = loaded()
        except Exception as exc:
            log.warning(
                "provider plugin %r: %s() failed: %s",
                entry.name,
                loaded.__name__,
                type(exc).__name__,
            )
            return None
    if not isinstance(candidate, ProviderFactory):
        log.warning(
            "provider plugin %r returned %s, which is not a ProviderFactory "
            "(name, matches, create)",
            entry.name,
            type(candidate).__name__,
        )
        return None
    return candidate


def load_provider_factories(group: str = PROVIDER_GROUP) -> tuple[ProviderFactory, ...]:
    """Installed transport providers, first registration of a name wins."""
    seen: set[str] = set()
    factories: list[ProviderFactory] = []
    for entry in entry_points(group=group):
        if entry.name in seen:
            log.debug("provider plugin %r registered twice; keeping the first", entry.name)
            continue
        seen.add(entry.name)
        factory = _factory_from(entry)
        if factory is not None:
            factories.append(factory)
    return tuple(factories)
