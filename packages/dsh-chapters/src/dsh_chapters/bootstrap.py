"""The composition root: the one place that names concrete adapters (ARCHITECTURE.md).

`bootstrap(cwd, env)` finds the workspace, loads the config layers, derives the projectKey and
wires the real adapters. Every adapter is a keyword argument whose default is the real one, so
tests pass fakes (STYLE.md, "Boundaries": cosmicpython's bootstrap).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING

from dsh_chapters_core.curation import edits_path
from dsh_chapters_core.pool_layout import RULES_DIR, to_pool
from dsh_chapters_core.projectkey import derive_project_key
from dsh_chapters_core.search.index import DoorLayout, SplitTree
from dsh_chapters_core.search.service import DoorName, SearchDoor, SearchService
from dsh_chapters_fs.clock import SystemClock
from dsh_chapters_fs.configfile import HARNESS_ID_PATTERN, load_config
from dsh_chapters_fs.credentials import FileCredentialStore
from dsh_chapters_fs.filefacts import FileFacts
from dsh_chapters_fs.home import resolve_dsh_home, user_config_path
from dsh_chapters_fs.lock import FileWriterLock, read_generation
from dsh_chapters_fs.search_index import SqliteSearchIndex
from dsh_chapters_fs.search_tree import FrontmatterReader, SearchTree
from dsh_chapters_fs.served_tree import WITHHOLD_ALL, ServedTree
from dsh_chapters_fs.store import STORE_DIRNAME, FsChapterStore
from dsh_chapters_fs.storelog import StoreLog
from dsh_chapters_fs.tree import DirectoryTree
from dsh_chapters_fs.workspace import (
    PROJECT_CONFIG,
    find_workspace,
    project_remote,
    set_project_setting,
)

from dsh_chapters.app import MIRROR_DIRNAME, App, Factories, SessionFiles, StatusContributor
from dsh_chapters.plugins import (
    KEY_NAMESPACES,
    LazyPlugins,
    load_harness_readers,
    load_provider_factories,
)

if TYPE_CHECKING:
    # Annotations only: every command composes the App, and most never touch these ports.
    from dsh_chapters_core.config import Config
    from dsh_chapters_core.enrich.queue import ModelRoute
    from dsh_chapters_core.ports.agents import AgentArchive
    from dsh_chapters_core.ports.clock import Clock
    from dsh_chapters_core.ports.harness import HarnessReader
    from dsh_chapters_core.ports.model import DrainLock, ModelDoor
    from dsh_chapters_core.ports.search import DocumentReader
    from dsh_chapters_core.ports.store import ChapterStore, CredentialStore, FileTree, WriterLock
    from dsh_chapters_core.ports.transport import ProviderFactory
    from dsh_chapters_core.reading import ReadRoot
    from dsh_chapters_harness.dsh_install import DshInstaller
    from dsh_chapters_harness.install import Installer
    from dsh_chapters_harness.mcp_config import McpConfigInstaller

PROJECT_CONFIG_NAME = PROJECT_CONFIG
FACTS_DIR = "cache"  # machine-local and derived: never published, always safe to delete


def _hostname() -> str:
    # uname's node name is what gethostname(2) returns on Linux and macOS; the socket module
    # (milliseconds to import, on every compose) is only needed where there is no uname.
    uname = getattr(os, "uname", None)
    if uname is not None:
        return str(uname().nodename)
    import socket

    return socket.gethostname()


def default_harness_id() -> str:
    """The hostname, made a plain name (it names directories in the pool)."""
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", _hostname()).strip("-._")[:100]
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
    factories: Factories | None = None,
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
                                  override=config.project_key, namespaces=KEY_NAMESPACES)

    def tell_index(paths: list[str]) -> None:
        # Each writer section notes what it wrote as it ends, under its own generation, so the
        # next query reads those files and walks nothing (search.md, "The freshness rule").
        # Imported on a write only: a search never writes a note.
        from dsh_chapters.services.search import index_written

        index_written(app, paths)

    # What each chapter's bytes said, kept by its stat in the store's machine-local cache, so
    # status and sync read only the files changed since their last run (filefacts).
    store_facts = FileFacts(store_root / FACTS_DIR / "facts-store.json", store_root)
    app = App(
        workspace=workspace,
        store_root=store_root,
        dsh_home=dsh_home,
        config=config,
        config_origins=origins,
        harness_id=config.harness_id or default_harness_id(),
        identity=identity,
        store=store if store is not None else FsChapterStore(
            store_root, facts=store_facts, document_facts=FileFacts(
                store_root / FACTS_DIR / "facts-documents.json", store_root)),
        lock=lock if lock is not None else FileWriterLock(
            store_root, stale_seconds=config.lock_stale_seconds, on_written=tell_index),
        clock=clock if clock is not None else SystemClock(),
        credentials=credentials if credentials is not None else FileCredentialStore(dsh_home),
        harnesses=harnesses if harnesses is not None else LazyPlugins(load_harness_readers),
        store_tree=store_tree if store_tree is not None else DirectoryTree(
            store_root, facts=store_facts),
        mirror_tree=mirror_tree if mirror_tree is not None else DirectoryTree(
            workspace / MIRROR_DIRNAME, facts=FileFacts(
                store_root / FACTS_DIR / "facts-mirror.json", workspace / MIRROR_DIRNAME)),
        log=log if log is not None else StoreLog(store_root),
        env=dict(env),
        factories=FACTORIES if factories is None else factories,
        provider_loader=(load_provider_factories if provider_factories is None
                         else lambda: provider_factories),
    )
    return app


# ---------------------------------------------------------------------------------------------
# Search (issue #5): built on demand, so a command that does not search opens no SQLite file.


def open_search(app: App, cached: bool = True) -> SearchService:
    """Search's doors: the pool mirror first when it exists (linked and pulled), then the store.

    The mirror is transport and must stay clean, so its derived index and every cache live in
    the store's machine-local `cache/`. Close the service when done (it holds SQLite files).
    """
    reader = FrontmatterReader(bodies=True)  # the body is scored and anchored (search.md)
    store_tree = SearchTree(app.store_root)
    cache_dir = usable_derived_dirs(app.store_root)
    lines = app.config.search_passage_lines  # long blocks are cut into passages this long
    segment = app.config.search_segment_bytes
    doors: list[SearchDoor] = []
    mirror_root = app.workspace / MIRROR_DIRNAME
    if mirror_root.is_dir():
        # Quarantine means never served: the mirror door never lists, tokens or reads a pool
        # file copy-in set aside, a name no machine can hold, or a file over poolFileMaxBytes.
        served = ServedTree(SearchTree(mirror_root), withheld_pool_paths(app),
                            max_bytes=app.config.pool_file_max_bytes)
        doors.append(SearchDoor(
            name=DoorName.MIRROR, layout=DoorLayout.MIRROR,
            # Its derived files' digests are kept by their stat: sync compares each with the
            # pool's copy and stages only those that differ (services/pool.py).
            tree=SplitTree(served, ServedTree(SearchTree(cache_dir / "mirror", facts=FileFacts(
                cache_dir / "facts-derived.json", cache_dir / "mirror")))),
            reader=reader, prefix=f"{MIRROR_DIRNAME}/",
            cache=SqliteSearchIndex(cache_dir / "search-mirror.sqlite", passage_lines=lines,
                                    segment_bytes=segment) if cached else None,
            state=store_tree, state_path="cache/index-mirror.tokens.json",
            generation_path="cache/index-mirror.generation"))
    doors.append(SearchDoor(
        name=DoorName.STORE, layout=DoorLayout.STORE, tree=ServedTree(store_tree), reader=reader,
        prefix=f"{STORE_DIRNAME}/",
        cache=SqliteSearchIndex(cache_dir / "search-store.sqlite", passage_lines=lines,
                                segment_bytes=segment) if cached else None,
        state=store_tree, state_path="cache/index-store.tokens.json",
        generation_path="cache/index-store.generation",
        notes_path="cache/index-store.written.jsonl"))
    def generation() -> str:
        return read_generation(app.store_root)

    def core_rules() -> frozenset[str]:
        # The per-machine core bonus (§8) follows the rules use case exactly: this machine's
        # own approvals, bound to the bytes the human approved (amendment 2026-09-20).
        # Imported on use: only a search asks (the search service is built on demand).
        from dsh_chapters.services.search import core_rule_ids_at

        return core_rule_ids_at(app, generation(), rule_inputs)

    def rule_inputs() -> str:
        # What core rules are resolved from, as stat tokens: O(rules), never the chapters.
        facts = edits_path(app.harness_id)
        tokens = sorted(store_tree.fingerprints(f"{RULES_DIR}/").items())
        tokens.append((facts, store_tree.fingerprint(facts)))
        return hashlib.sha256(json.dumps(tokens).encode("utf-8")).hexdigest()

    def published_as(path: str) -> str | None:
        # A store chapter's twin in the pool (§2.2), under this workspace's projectKey.
        twin = to_pool(path, app.identity.project_key)
        return twin.pool_path if twin is not None else None

    return SearchService(doors=doors, config=app.config, harness_id=app.harness_id,
                         clock_now=app.clock.now, core_rules=core_rules, generation=generation,
                         published_as=published_as)


DERIVED_DIRS = ("cache", "index", "topics")  # docs/store.md: derived, safe to delete


def usable_derived_dirs(store_root: Path) -> Path:
    """The store's derived directories as search can use them; returns `cache/`. Derived
    (docs/store.md: safe to delete), so damage is cleared and rebuilt, never a failure: one
    that is not a directory this user can read, write and enter is removed (the next search
    builds it again), and a database that is not a regular file (sqlite would wait forever on
    a FIFO) is removed."""
    import stat  # shutil (and its bz2, lzma) only on the damage path: a search never pays it

    for name in DERIVED_DIRS:
        path = store_root / name
        try:
            mode = os.lstat(path).st_mode
        except FileNotFoundError:
            continue
        except OSError:
            mode = 0
        if stat.S_ISDIR(mode) and os.access(path, os.R_OK | os.W_OK | os.X_OK):
            continue
        import shutil

        try:
            if stat.S_ISDIR(mode):
                os.chmod(path, 0o700)  # ours: enough to list and remove what is under it
                for below, dirs, _files in os.walk(path):
                    for entry in dirs:
                        os.chmod(os.path.join(below, entry), 0o700)
                shutil.rmtree(path)
            else:
                os.unlink(path)
        except OSError as exc:
            from dsh_chapters_core.errors import ChaptersError

            raise ChaptersError(f"{path} is damaged and cannot be cleared ({exc.strerror})",
                                hint=f"remove {path}: it is derived, and the next search "
                                     "builds it again") from None
    cache_dir = store_root / "cache"
    for name in ("search-store.sqlite", "search-mirror.sqlite"):
        for suffix in ("", "-wal", "-shm", "-journal"):
            db = cache_dir / (name + suffix)
            try:
                if not stat.S_ISREG(os.lstat(db).st_mode):
                    if db.is_dir() and not db.is_symlink():
                        import shutil

                        shutil.rmtree(db)
                    else:
                        os.unlink(db)
            except OSError:
                continue
    return cache_dir


def read_roots(app: App) -> tuple[ReadRoot, ...]:
    """Where `chapters artifact` and the MCP readers look: the store first, then the mirror."""
    from dsh_chapters_core.reading import ReadRoot  # not on a search's path

    roots = [ReadRoot("store", STORE_DIRNAME, SearchTree(app.store_root))]
    mirror_root = app.workspace / MIRROR_DIRNAME
    if mirror_root.is_dir():
        roots.append(ReadRoot("mirror", MIRROR_DIRNAME, SearchTree(mirror_root),
                              project_key=app.identity.project_key, mirror_layout=True,
                              withheld=withheld_pool_paths(app)))
    return tuple(roots)


def withheld_pool_paths(app: App) -> dict[str, str]:
    """Pool paths copy-in quarantined, with why: never served by a read door or search. A list
    that does not read withholds the whole mirror until the next sync writes it again."""
    from dsh_chapters_core.sync.state import QUARANTINE_PATH, quarantine_rows

    rows = quarantine_rows(app.store_tree)
    if rows is None:
        return {WITHHOLD_ALL: f"{STORE_DIRNAME}/{QUARANTINE_PATH} does not read; the next "
                              "`chapters sync` writes it again"}
    return {r.get("path", ""): r.get("reason", "") or r.get("code", "") for r in rows
            if r.get("path")}


# ---------------------------------------------------------------------------------------------
# Agents (issue #8): the MCP server and the agent installer, named here and nowhere else.

INSTALL_LEDGER = "dsh-chapters/installs.json"  # under DSH_HOME: what `chapters install` added


def serve_mcp(archive: AgentArchive, instructions: str = "") -> None:
    """Run the MCP server on stdio. Imported on use: the server is an optional extra."""
    try:
        from dsh_chapters_mcp.server import serve_stdio
    except ImportError:
        from dsh_chapters_core.errors import ChaptersError

        raise ChaptersError("the MCP server is not installed (package dsh-chapters-mcp, 0 found)",
                            hint="pip install 'dsh-chapters[mcp]'") from None
    serve_stdio(archive, instructions=instructions)


def agent_installer(app: App, command: tuple[str, ...], hook_timeout_s: int) -> Installer:
    """Claude Code and Codex configuration edits, recorded in the ledger under DSH_HOME."""
    from dsh_chapters_harness.install import Installer  # only `install`/`uninstall` pay for it

    return Installer(command=command, ledger_path=app.dsh_home / INSTALL_LEDGER,
                     hook_timeout_s=hook_timeout_s)


def dsh_installer(app: App, command: tuple[str, ...]) -> DshInstaller:
    """The row in DSH's own cordis.patch.yml; the MCP server it starts sees our DSH_HOME."""
    from dsh_chapters_harness.dsh_install import DshInstaller

    return DshInstaller(command=command, ledger_path=app.dsh_home / INSTALL_LEDGER,
                        workspace=app.workspace, chapters_home=app.dsh_home)


def mcp_config_installer(app: App, command: tuple[str, ...]) -> McpConfigInstaller:
    """Our MCP server in Gemini CLI's settings.json and OpenCode's opencode.json."""
    from dsh_chapters_harness.mcp_config import McpConfigInstaller

    return McpConfigInstaller(command=command, ledger_path=app.dsh_home / INSTALL_LEDGER)


# ---------------------------------------------------------------------------------------------
# Enrichment (issue #9): the model door and the drain locks, named here and nowhere else. The
# door's module (httpx) is imported on use, so the archive path never pays for it (§1 inv. 1).



def open_model_door(app: App, route: ModelRoute) -> ModelDoor:
    """The OpenAI-compatible door for `route`; its key (if stored) from the credential store."""
    from dsh_chapters_harness.model_door import OpenAIChatDoor

    key = app.credentials.read(model_key_name(route.route))
    try:
        return OpenAIChatDoor(route.route, route.base_url, api_key=key)
    except ImportError:  # a pick-and-mix install without the model extra (httpx, 0 found)
        from dsh_chapters_core.errors import ChaptersError

        raise ChaptersError("the model door needs httpx (the `model` extra of "
                            "dsh-chapters-harness), which is not installed (0 found)",
                            hint="pip install 'dsh-chapters[enrich]'") from None


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
    scan = getattr(app.store, "quarantined", None)  # an optional capability of a store
    return list(scan()) if callable(scan) else []


def reader_limits(config: Config) -> AbstractContextManager[None]:
    """The readers' boundary limits (line size, JSON depth, id length) for one read."""
    from dsh_chapters_harness import input_guard

    return input_guard.limits(input_guard.GuardLimits.of(config))


def status_sections() -> tuple[StatusContributor, ...]:
    """`chapters status`, in print order. Imported on use: the sections reach into the pool
    and enrichment services, which a search or an archive never needs."""
    from dsh_chapters.services import status

    return (status.store_section, status.lock_section, status.pool_section,
            status.quarantine_section, status.search_section, status.enrich_section)


def document_reader() -> DocumentReader:
    """The store's frontmatter reader: the core's JSON lines fast, anything else as YAML."""
    return FrontmatterReader()


def exclude_from_git(workspace: Path, entries: Sequence[str]) -> list[str]:
    from dsh_chapters_fs.git_exclude import exclude_from_git as add

    return add(workspace, entries)


def session_files() -> SessionFiles:
    """Where the built-in readers' sessions live (a plugin's reader is archived by its
    discover() but not watched: its folders are its own). Imported on use: only `watch`."""
    from dsh_chapters_harness.claude_code import claude_config_dir, project_dir_name
    from dsh_chapters_harness.codex import codex_home, rollout_cwd
    from dsh_chapters_harness.discovery import read_head, same_directory
    from dsh_chapters_harness.dsh_discovery import dsh_home
    from dsh_chapters_harness.dsh_discovery import project_key as dsh_project_key
    from dsh_chapters_harness.gemini_cli import gemini_dir
    from dsh_chapters_harness.opencode import data_dir
    from dsh_chapters_harness.pi import agent_dir

    roots = {"claude-code": claude_config_dir() / "projects",
             "codex": codex_home() / "sessions",
             "dsh": dsh_home() / "sessions",  # $DSH_HOME, as `chapters import dsh` reads
             "gemini-cli": gemini_dir() / "tmp",
             "opencode": data_dir(),
             "pi": agent_dir() / "sessions"}

    def project_folder(harness: str, workspace: str) -> Path | None:
        if harness == "claude-code":
            return roots[harness] / project_dir_name(os.path.abspath(workspace))
        if harness == "dsh":
            return roots[harness] / dsh_project_key(os.path.abspath(workspace))
        return roots.get(harness)  # one tree for every project, matched by each session's cwd

    return SessionFiles(roots=roots, rollout_cwd=rollout_cwd, same_directory=same_directory,
                        read_head=read_head, project_folder=project_folder)


# The factories every App carries.
FACTORIES = Factories(
    open_search=open_search,
    read_roots=read_roots,
    model_door=open_model_door,
    drain_lock=enrichment_lock,
    installer=agent_installer,
    dsh_installer=dsh_installer,
    serve_mcp=serve_mcp,
    model_key_name=model_key_name,
    model_base_url=model_base_url,
    status_sections=status_sections,
    document_check=document_check,
    store_quarantine=store_quarantine,
    reader_limits=reader_limits,
    document_reader=document_reader,
    write_project_setting=set_project_setting,
    session_files=session_files,
    exclude_from_git=exclude_from_git,
    mcp_config_installer=mcp_config_installer,
)

__all__ = ["App", "bootstrap", "default_harness_id", "enrichment_lock", "find_workspace"]
