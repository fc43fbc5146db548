"""Plugins come in by entry points (ARCHITECTURE.md, "Plugins"); one loader serves every group.

Plain `importlib.metadata` (STYLE.md, "Boundaries", after fsspec's registry and keyring's
backend loading): a name already seen is skipped, a plugin that fails to import is logged and
skipped, and what it hands back is checked against the runtime-checkable port before anything
calls it. A class is instantiated with no arguments; anything else is taken as it is.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator, Mapping
from importlib.metadata import EntryPoint, entry_points
from typing import TypeVar

from dsh_chapters_core.ports.harness import HarnessReader
from dsh_chapters_core.ports.transport import ProviderFactory

HARNESS_GROUP = "dsh_chapters.harnesses"
PROVIDER_GROUP = "dsh_chapters.providers"

log = logging.getLogger("dsh_chapters.plugins")

P = TypeVar("P")


def _plugin_from(entry: EntryPoint, port: type[P]) -> P | None:
    try:
        loaded = entry.load()
    except Exception as exc:  # a broken plugin must not take the CLI down with it
        log.warning("plugin %r (%s) failed to import: %s", entry.name, entry.value,
                    type(exc).__name__)
        return None
    candidate: object = loaded
    if isinstance(loaded, type):
        try:
            candidate = loaded()
        except Exception as exc:
            log.warning("plugin %r: %s() failed: %s", entry.name, loaded.__name__,
                        type(exc).__name__)
            return None
    if not isinstance(candidate, port):
        log.warning("plugin %r returned %s, which is not a %s", entry.name,
                    type(candidate).__name__, port.__name__)
        return None
    return candidate


def load_plugins(group: str, port: type[P],
                 entries: Iterable[EntryPoint] | None = None) -> dict[str, P]:
    """Installed plugins of one group by entry-point name; the first of a name wins."""
    plugins: dict[str, P] = {}
    seen: set[str] = set()
    for entry in entry_points(group=group) if entries is None else entries:
        if entry.name in seen:
            log.debug("plugin %r registered twice in %s; keeping the first", entry.name, group)
            continue
        seen.add(entry.name)
        plugin = _plugin_from(entry, port)
        if plugin is not None:
            plugins[entry.name] = plugin
    return plugins


def load_harness_readers(group: str = HARNESS_GROUP,
                         entries: Iterable[EntryPoint] | None = None) -> dict[str, HarnessReader]:
    """Transcript readers by name, in registration order."""
    return load_plugins(group, HarnessReader, entries)  # type: ignore[type-abstract]


def load_provider_factories(group: str = PROVIDER_GROUP,
                            entries: Iterable[EntryPoint] | None = None
                            ) -> tuple[ProviderFactory, ...]:
    """Transport providers, in registration order (amendment 2026-09-21)."""
    return tuple(load_plugins(group, ProviderFactory, entries).values())  # type: ignore[type-abstract]


class LazyPlugins(Mapping[str, P]):
    """A plugin mapping loaded on first use: a command that reads no transcript (search,
    status) imports no reader."""

    def __init__(self, load: Callable[[], Mapping[str, P]]) -> None:
        self._load = load
        self._loaded: Mapping[str, P] | None = None

    def _plugins(self) -> Mapping[str, P]:
        if self._loaded is None:
            self._loaded = self._load()
        return self._loaded

    def __getitem__(self, name: str) -> P:
        return self._plugins()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._plugins())

    def __len__(self) -> int:
        return len(self._plugins())
