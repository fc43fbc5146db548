"""The composition root: the one place that names concrete adapters (ARCHITECTURE.md).

`bootstrap(cwd, env)` finds the workspace, loads the config layers, derives the projectKey and
wires the real adapters. Every adapter is a keyword argument whose default is the real one, so
tests pass fakes (STYLE.md, "Boundaries": cosmicpython's bootstrap).
"""

from __future__ import annotations

import re
import socket
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path

from dsh_chapters_core.config import Config
from dsh_chapters_core.enrich.queue import ModelRoute
from dsh_chapters_core.ports.agents import AgentArchive
from dsh_chapters_core.ports.clock import Clock
from dsh_chapters_core.ports.harness import HarnessReader
from dsh_chapters_core.ports.model import DrainLock, ModelDoor
from dsh_chapters_core.ports.store import ChapterStore, CredentialStore, FileTree, WriterLock
from dsh_chapters_core.ports.transport import ProviderFactory
from dsh_chapters_core.projectkey import ProjectIdentity, derive_project_key
from dsh_chapters_core.reading import ReadRoot
from dsh_chapters_core.rules import core_rule_ids, load_rules
from dsh_chapters_core.search.index import DoorLayout, SplitTree
from dsh_chapters_core.search.service import DoorName, SearchDoor, SearchService
from dsh_chapters_fs.clock import SystemClock
from dsh_chapters_fs.configfile import HARNESS_ID_PATTERN, load_config
from dsh_chapters_fs.credentials import FileCredentialStore
from dsh_chapters_fs.home import resolve_dsh_home, user_config_path
from dsh_chapters_fs.lock import FileWriterLock
from dsh_chapters_fs.search_cache import SqliteSearchCache
from dsh_chapters_fs.search_tree import FrontmatterReader, SearchTree
from dsh_chapters_fs.store import STORE_DIRNAME, FsChapterStore
from dsh_chapters_fs.storelog import StoreLog
from dsh_chapters_fs.tree import DirectoryTree
from dsh_chapters_harness.install import Installer

from dsh_chapters.commands.identity import remotes_in_config
from dsh_chapters.plugins import load_harness_readers, load_provider_factories

MIRROR_DIRNAME = ".dsh-knowledge"
PROJECT_CONFIG_NAME = "config.toml"


@dataclass
class App:
    """Everything a command needs, composed once. A plain dataclass: add a field per service."""

    workspace: Path  # the git root containing cwd, else cwd
    store_root: Path  # <workspace>/.dsh-chapters
    dsh_home: Path
    config: Config
    config_origins: Mapping[str, str]  # camelCase key -> the file or env var that set it
    harness_id: str
    identity: ProjectIdentity
    store: ChapterStore
    lock: WriterLock
    clock: Clock
    credentials: CredentialStore
    harnesses: Mapping[str, HarnessReader]  # by binding name, registration order
    store_tree: FileTree  # the store as files (sync's copy-out source, copy-in target)
    mirror_tree: FileTree  # the provider's mirror `.dsh-knowledge/`
    log: StoreLog
    env: Mapping[str, str] = field(default_factory=dict)
    # Transport plugins import their HTTP and git stacks: loaded on first use, so the archive
    # path (hooks, §1 invariant 1) never pays for them.
    provider_loader: Callable[[], tuple[ProviderFactory, ...]] = load_provider_factories
    _providers: tuple[ProviderFactory, ...] | None = field(default=None, init=False, repr=False)

    @property
    def provider_factories(self) -> tuple[ProviderFactory, ...]:
        if self._providers is None:
            self._providers = self.provider_loader()
        return self._providers


def find_workspace(cwd: Path) -> Path:
    """The nearest directory at or above `cwd` holding `.git` (a dir, or a worktree's file)."""
    start = cwd.absolute()
    for directory in (start, *start.parents):
        if (directory / ".git").exists():
            return directory
    return start


def _git_config(workspace: Path) -> Path | None:
    dotgit = workspace / ".git"
    if dotgit.is_dir():
        return dotgit / "config"
    if dotgit.is_file():  # a worktree or submodule: `gitdir: <path>`, maybe with a commondir
        pointer = dotgit.read_text(encoding="utf-8", errors="replace").strip()
        if pointer.startswith("gitdir:"):
            gitdir = (workspace / pointer.removeprefix("gitdir:").strip()).resolve()
            common = gitdir / "commondir"
            if common.is_file():
                gitdir = (gitdir / common.read_text(encoding="utf-8").strip()).resolve()
            return gitdir / "config"
    return None


def project_remote(workspace: Path) -> str | None:
    """§2.3 step 1: the `origin` remote, else the first one; None without git or remotes."""
    config = _git_config(workspace)
    if config is None or not config.is_file():
        return None
    remotes = dict(remotes_in_config(config.read_text(encoding="utf-8", errors="replace")))
    return remotes.get("origin") or next(iter(remotes.values()), None)


def default_harness_id() -> str:
    """The hostname, made a plain name (it names directories in the pool)."""
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", socket.gethostname()).strip("-._")[:100]
    return name if name and HARNESS_ID_PATTERN.match(name) else "localhost"


def bootstrap(
    cwd: Path,
    env: Mapping[str, str],
    *,
    store: ChapterStore | None = None,
    lock: WriterLock | None = None,
    clock: Clock | None = None,
    credentials: CredentialStore | None = None,
    harnesses: Mapping[str, HarnessReader] | None = None,
    store_tree: FileTree | None = None,
    mirror_tree: FileTree | None = None,
    log: StoreLog | None = None,
    provider_factories: tuple[ProviderFactory, ...] | None = None,
    config: Config | None = None,
) -> App:
    """Compose the App for a command run at `cwd` with environment `env`."""
    workspace = find_workspace(cwd)
    store_root = workspace / STORE_DIRNAME
    dsh_home = resolve_dsh_home(env)
    origins: Mapping[str, str] = {}
    if config is None:
        loaded = load_config(user_file=user_config_path(dsh_home),
                             project_file=store_root / PROJECT_CONFIG_NAME, env=env)
        config, origins = loaded.config, loaded.origins
    # §2.3: a configured projectKey wins, then the git remote, then the path (flagged).
    identity = derive_project_key(remote=project_remote(workspace), path=str(workspace),
                                  override=config.project_key)
    return App(
        workspace=workspace,
        store_root=store_root,
        dsh_home=dsh_home,
        config=config,
        config_origins=origins,
        harness_id=config.harness_id or default_harness_id(),
        identity=identity,
        store=store if store is not None else FsChapterStore(store_root),
        lock=lock if lock is not None else FileWriterLock(
            store_root, stale_seconds=config.lock_stale_seconds),
        clock=clock if clock is not None else SystemClock(),
        credentials=credentials if credentials is not None else FileCredentialStore(dsh_home),
        harnesses=harnesses if harnesses is not None else load_harness_readers(),
        store_tree=store_tree if store_tree is not None else DirectoryTree(store_root),
        mirror_tree=mirror_tree if mirror_tree is not None else DirectoryTree(
            workspace / MIRROR_DIRNAME),
        log=log if log is not None else StoreLog(store_root),
        env=dict(env),
        provider_loader=(load_provider_factories if provider_factories is None
                         else lambda: provider_factories),
    )


# ---------------------------------------------------------------------------------------------
# Search (issue #5): built on demand, so a command that does not search opens no SQLite file.


def open_search(app: App, *, cached: bool = True) -> SearchService:
    """Search's doors: the pool mirror first when it exists (linked and pulled), then the store.

    The mirror is transport and must stay clean, so its derived index and every cache live in
    the store's machine-local `cache/`. Close the service when done (it holds SQLite files).
    """
    reader = FrontmatterReader()
    store_tree = SearchTree(app.store_root)
    cache_dir = app.store_root / "cache"
    doors: list[SearchDoor] = []
    mirror_root = app.workspace / MIRROR_DIRNAME
    if mirror_root.is_dir():
        doors.append(SearchDoor(
            name=DoorName.MIRROR, layout=DoorLayout.MIRROR,
            tree=SplitTree(SearchTree(mirror_root), SearchTree(cache_dir / "mirror")),
            reader=reader, prefix=f"{MIRROR_DIRNAME}/",
            cache=SqliteSearchCache(cache_dir / "search-mirror.sqlite") if cached else None,
            state=store_tree, state_path="cache/index-mirror.tokens.json"))
    doors.append(SearchDoor(
        name=DoorName.STORE, layout=DoorLayout.STORE, tree=store_tree, reader=reader,
        prefix=f"{STORE_DIRNAME}/",
        cache=SqliteSearchCache(cache_dir / "search-store.sqlite") if cached else None,
        state=store_tree, state_path="cache/index-store.tokens.json"))
    def core_rules() -> frozenset[str]:
        # The per-machine core bonus (§8) follows the rules use case exactly: this machine's
        # own approvals, bound to the bytes the human approved (amendment 2026-09-20).
        return core_rule_ids(load_rules(app.store_tree, app.store, app.harness_id))

    return SearchService(doors=doors, config=app.config, harness_id=app.harness_id,
                         clock_now=app.clock.now, core_rules=core_rules)


def read_roots(app: App) -> tuple[ReadRoot, ...]:
    """Where `chapters artifact` and the MCP readers look: the store first, then the mirror."""
    roots = [ReadRoot("store", STORE_DIRNAME, SearchTree(app.store_root))]
    mirror_root = app.workspace / MIRROR_DIRNAME
    if mirror_root.is_dir():
        roots.append(ReadRoot("mirror", MIRROR_DIRNAME, SearchTree(mirror_root),
                              project_key=app.identity.project_key, mirror_layout=True))
    return tuple(roots)


# ---------------------------------------------------------------------------------------------
# Agents (issue #8): the MCP server and the agent installer, named here and nowhere else.

INSTALL_LEDGER = "dsh-chapters/installs.json"  # under DSH_HOME: what `chapters install` added


def serve_mcp(archive: AgentArchive, *, instructions: str = "") -> None:
    """Run the MCP server on stdio. Imported on use: the server is an optional extra."""
    try:
        from dsh_chapters_mcp.server import serve_stdio
    except ImportError:
        from dsh_chapters_core.errors import ChaptersError

        raise ChaptersError("the MCP server is not installed (package dsh-chapters-mcp, 0 found)",
                            hint="pip install 'dsh-chapters[mcp]'") from None
    serve_stdio(archive, instructions=instructions)


def agent_installer(app: App, command: tuple[str, ...], *, hook_timeout_s: int) -> Installer:
    """Claude Code and Codex configuration edits, recorded in the ledger under DSH_HOME."""
    return Installer(command=command, ledger_path=app.dsh_home / INSTALL_LEDGER,
                     hook_timeout_s=hook_timeout_s)


# ---------------------------------------------------------------------------------------------
# Enrichment (issue #9): the model door and the drain locks, named here and nowhere else. The
# door's module (httpx) is imported on use, so the archive path never pays for it (§1 inv. 1).

ENRICH_RUN_LOCK = "state/enrich-run.lock"  # one drain at a time
ENRICH_IDLE_LOCK = "state/enrich-idle.lock"  # one idle waiter at a time


def open_model_door(app: App, route: ModelRoute) -> ModelDoor:
    """The OpenAI-compatible door for `route`; its key (if stored) from the credential store."""
    from dsh_chapters_harness.model_door import OpenAIChatDoor

    key = app.credentials.read(model_key_name(route.route))
    return OpenAIChatDoor(route.route, route.base_url, api_key=key)


def model_key_name(route: str) -> str:
    """The credential name of a route's key (`enrichment-<provider>`, 0600 under DSH_HOME)."""
    from dsh_chapters_harness.model_door import credential_name

    return credential_name(route)


def model_base_url(route: str, base_url: str = "") -> str:
    """The base URL a route resolves to; UsageError when neither it nor its provider names one."""
    from dsh_chapters_harness.model_door import resolve_base_url

    return resolve_base_url(route, base_url)


def enrichment_lock(app: App, relpath: str) -> DrainLock:
    from dsh_chapters_fs.runlock import FileRunLock

    return FileRunLock(app.store_root / relpath)


# -- containment of bad input (one poisoned file never stops a machine) -----------------------
def document_check(config: Config) -> Callable[[str, bytes], str]:
    """Copy-in's frontmatter check: the fs store's own parser, with this machine's bound."""
    from dsh_chapters_fs.chapterfile import frontmatter_problem

    limit, depth = config.frontmatter_max_bytes, config.frontmatter_max_depth
    return lambda path, data: frontmatter_problem(path, data, limit, depth)


def store_quarantine(app: App) -> list[tuple[str, str]]:
    """(store path, reason) of each chapter or rule that cannot be read (fs store only)."""
    scan = getattr(app.store, "quarantined", None)
    return list(scan()) if callable(scan) else []


def reader_limits(config: Config) -> AbstractContextManager[None]:
    """The readers' boundary limits (line size, JSON depth, id length) for one read."""
    from dsh_chapters_harness import input_guard

    return input_guard.limits(input_guard.GuardLimits.of(config))
