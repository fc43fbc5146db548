"""Plugins come in by entry points (ARCHITECTURE.md, "Plugins"); one loader serves every group.

Plain `importlib.metadata` (STYLE.md, "Boundaries", after fsspec's registry and keyring's
backend loading): a name already seen is skipped, a plugin that fails to import is logged and
skipped, and what it hands back is checked against the runtime-checkable port before anything
calls it. A class is instantiated with no arguments; anything else is taken as it is.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, TypeVar

from dsh_chapters_core.errors import UsageError

if TYPE_CHECKING:
    # Loaded with the plugins, not with the module: every command composes the App, and one
    # that reads no transcript and opens no pool (search, status) needs neither.
    import logging
    from importlib.metadata import EntryPoint

    from dsh_chapters_core.ports.harness import HarnessReader
    from dsh_chapters_core.ports.transport import ProviderFactory

HARNESS_GROUP = "dsh_chapters.harnesses"
PROVIDER_GROUP = "dsh_chapters.providers"


def _log() -> logging.Logger:
    # logging is imported when a plugin misbehaves, not by every command that composes the App.
    import logging

    return logging.getLogger("dsh_chapters.plugins")

P = TypeVar("P")


def _plugin_from(entry: EntryPoint, port: type[P]) -> P | None:
    try:
        loaded = entry.load()
    except Exception as exc:  # a broken plugin must not take the CLI down with it
        _log().warning("plugin %r (%s) failed to import: %s", entry.name, entry.value,
                       type(exc).__name__)
        return None
    candidate: object = loaded
    if isinstance(loaded, type):
        try:
            candidate = loaded()
        except Exception as exc:
            _log().warning("plugin %r: %s() failed: %s", entry.name, loaded.__name__,
                           type(exc).__name__)
            return None
    if not isinstance(candidate, port):
        _log().warning("plugin %r returned %s, which is not a %s", entry.name,
                       type(candidate).__name__, port.__name__)
        return None
    return candidate


def entry_points(*, group: str) -> Iterable[EntryPoint]:
    """The installed entry points of `group` (importlib.metadata, loaded on first use)."""
    from importlib.metadata import entry_points as installed

    return installed(group=group)


def load_plugins(group: str, port: type[P],
                 entries: Iterable[EntryPoint] | None = None) -> dict[str, P]:
    """Installed plugins of one group by entry-point name; the first of a name wins."""
    plugins: dict[str, P] = {}
    seen: set[str] = set()
    for entry in entry_points(group=group) if entries is None else entries:
        if entry.name in seen:
            _log().debug("plugin %r registered twice in %s; keeping the first", entry.name, group)
            continue
        seen.add(entry.name)
        plugin = _plugin_from(entry, port)
        if plugin is not None:
            plugins[entry.name] = plugin
    return plugins


def load_harness_readers(group: str = HARNESS_GROUP,
                         entries: Iterable[EntryPoint] | None = None) -> dict[str, HarnessReader]:
    """Transcript readers by name, in registration order."""
    from dsh_chapters_core.ports.harness import HarnessReader

    return load_plugins(group, HarnessReader, entries)  # type: ignore[type-abstract]


def load_provider_factories(group: str = PROVIDER_GROUP,
                            entries: Iterable[EntryPoint] | None = None
                            ) -> tuple[ProviderFactory, ...]:
    """Transport providers, in registration order (amendment 2026-09-21)."""
    from dsh_chapters_core.ports.transport import ProviderFactory

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


# Pick-and-mix installs (README): a remote whose provider ships in a package that is not
# installed names that package, instead of the generic "no installed provider" refusal.
# (provider name, the schemes its factory declares, the package that ships it); the
# providers' own declarations are checked against these rows by the tests.
PROVIDER_PACKAGES: tuple[tuple[str, tuple[str, ...], str], ...] = (
    ("treedx", ("treedx+https", "treedx+http"), "dsh-chapters-treedx"),
    ("folder", ("folder",), "dsh-chapters-folder"),
    ("git", ("file", "http", "https"), "dsh-chapters-git"),
)
# §2.3 as amended 2026-09-21: a compound scheme's `<name>+` is a projectKey namespace
# (`treedx/host/repo`). Read from the table, not from the installed plugins: a key must be the
# same on a machine that lacks the provider, and composing the App loads no plugin.
KEY_NAMESPACES: frozenset[str] = frozenset(
    scheme.split("+", 1)[0] for _, schemes, _ in PROVIDER_PACKAGES for scheme in schemes
    if "+" in scheme)
READER_PACKAGES: dict[str, str] = {
    "dsh": "dsh-chapters-harness",
    "claude-code": "dsh-chapters-harness",
    "codex": "dsh-chapters-harness",
    "gemini-cli": "dsh-chapters-harness",
    "opencode": "dsh-chapters-harness",
    "pi": "dsh-chapters-harness",
    "cursor": "dsh-chapters-harness",
    "copilot-cli": "dsh-chapters-harness",
    "aider": "dsh-chapters-harness",
    "specstory": "dsh-chapters-specstory",
}


def missing_provider_error(remote: str,
                           factories: Iterable[ProviderFactory]) -> UsageError | None:
    """The refusal for a remote whose provider package is absent; None if it is installed
    (or the scheme is nobody's we know), so the caller's own refusal stands."""
    from dsh_chapters_core.remote import parse_remote  # only a refused remote is parsed here

    installed = sorted(f.name for f in factories)
    parsed = parse_remote(remote)
    for name, schemes, package in PROVIDER_PACKAGES:
        if parsed.scheme in schemes and name not in installed:
            scheme = "a local path or https://" if "file" in schemes else f"{name}+"
            return UsageError(
                f"the remote {remote!r} needs the {name} provider ({scheme}), from the package "
                f"{package}, which is not installed (installed providers: "
                f"{', '.join(installed) or 'none'}; {len(installed)} found)",
                hint=f"pip install {package}",
            )
    return None


def missing_reader_hint(name: str) -> str:
    """The next step for a reader that is not installed ("" when no package is known)."""
    package = READER_PACKAGES.get(name)
    return f"pip install {package}" if package else ""
