"""The composed application: what every service receives (ARCHITECTURE.md, "One composition root").

`App` is plain data plus the factories only the composition root (`dsh_chapters.bootstrap`)
can build, because they name concrete adapters: the search service over SQLite caches, the
read roots, the model door, the drain locks, the agent installer and the MCP server. Services
call `app.open_search()` and never import an adapter, so a test composes an App with fakes and
every caller (CLI, hooks, MCP, viewer) gets the same wiring.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    # Annotations only (the module uses postponed evaluation): a command that composes the
    # App imports none of these ports until it uses them, which keeps `chapters search` lean.
    from dsh_chapters_core.config import Config
    from dsh_chapters_core.enrich.queue import ModelRoute
    from dsh_chapters_core.ports.agents import AgentArchive
    from dsh_chapters_core.ports.clock import Clock
    from dsh_chapters_core.ports.harness import HarnessReader
    from dsh_chapters_core.ports.model import DrainLock, ModelDoor
    from dsh_chapters_core.ports.search import DocumentReader
    from dsh_chapters_core.ports.store import ChapterStore, CredentialStore, FileTree, WriterLock
    from dsh_chapters_core.ports.transport import ProviderFactory
    from dsh_chapters_core.projectkey import ProjectIdentity
    from dsh_chapters_core.reading import ReadRoot
    from dsh_chapters_core.search.service import SearchService
    from dsh_chapters_fs.storelog import StoreLog
    from dsh_chapters_harness.dsh_install import DshInstaller
    from dsh_chapters_harness.install import Installer
    from dsh_chapters_harness.mcp_config import McpConfigInstaller

MIRROR_DIRNAME = ".dsh-knowledge"


@dataclass(frozen=True)
class StatusSection:
    """One section of `chapters status`: its key in `--json`, its data and its text lines."""

    key: str
    data: Any
    lines: list[str]


StatusContributor = Callable[["App"], StatusSection]


@dataclass(frozen=True)
class SessionFiles:
    """What `chapters watch` knows of the built-in readers' session files: where each reader's
    sessions live, and the harness adapter's own checks (built by the composition root)."""

    roots: Mapping[str, Path]  # reader name -> the directory its sessions are written under
    rollout_cwd: Callable[[str], str]  # a Codex rollout's working directory, from its header
    same_directory: Callable[[str, str], bool]
    read_head: Callable[[str], bytes]  # the head the readers sniff
    # reader name, workspace -> the folder `chapters import <reader>` looks in for this
    # project's sessions (what an error names when it finds none)
    project_folder: Callable[[str, str], Path | None] = lambda harness, workspace: None


@dataclass(frozen=True)
class Factories:
    """Adapters built on use, by the composition root (so the archive path never pays for the
    HTTP, git or MCP stacks, §1 invariant 1)."""

    open_search: Callable[[App, bool], SearchService]
    read_roots: Callable[[App], tuple[ReadRoot, ...]]
    model_door: Callable[[App, ModelRoute], ModelDoor]
    drain_lock: Callable[[App, str], DrainLock]
    installer: Callable[[App, tuple[str, ...], int], Installer]
    dsh_installer: Callable[[App, tuple[str, ...]], DshInstaller]
    serve_mcp: Callable[[AgentArchive, str], None]
    model_key_name: Callable[[str], str]
    model_base_url: Callable[[str, str], str]
    # `chapters status`, in print order: filled once by the composition root, never appended
    # to at import time, so the order cannot depend on which module was imported first.
    status_sections: Callable[[], tuple[StatusContributor, ...]]
    # Containment of bad input (one poisoned file never stops a machine): copy-in's
    # frontmatter check, the store's unreadable documents, the readers' boundary limits.
    document_check: Callable[[Config], Callable[[str, bytes], str]]
    store_quarantine: Callable[[App], list[tuple[str, str]]]
    reader_limits: Callable[[Config], AbstractContextManager[None]]
    # The store's own frontmatter reader (the viewer's sessions page), the project config
    # writer (`chapters link`) and the session files `chapters watch` follows: adapters, so
    # built here and handed to the services, which import none (pyproject's contract).
    document_reader: Callable[[], DocumentReader]
    write_project_setting: Callable[[Path, str, str], Path]
    session_files: Callable[[], SessionFiles]
    # `.git/info/exclude` gains the workspace-relative directories it lacks; returns those.
    exclude_from_git: Callable[[Path, Sequence[str]], list[str]]
    # Gemini CLI's and OpenCode's JSON MCP configuration (`chapters install gemini-cli|opencode`).
    mcp_config_installer: Callable[[App, tuple[str, ...]], McpConfigInstaller]


@dataclass
class App:
    """Everything a service needs, composed once per process."""

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
    factories: Factories
    env: Mapping[str, str] = field(default_factory=dict)
    # Transport plugins import their HTTP and git stacks: loaded on first use, so the archive
    # path (hooks, §1 invariant 1) never pays for them.
    provider_loader: Callable[[], tuple[ProviderFactory, ...]] = tuple
    _providers: tuple[ProviderFactory, ...] | None = field(default=None, init=False, repr=False)

    @property
    def provider_factories(self) -> tuple[ProviderFactory, ...]:
        if self._providers is None:
            self._providers = self.provider_loader()
        return self._providers

    @property
    def mirror_root(self) -> Path:
        return self.workspace / MIRROR_DIRNAME

    def open_search(self, *, cached: bool = True) -> SearchService:
        """Search's doors (mirror first when pulled, then the store). Close it when done."""
        return self.factories.open_search(self, cached)

    def read_roots(self) -> tuple[ReadRoot, ...]:
        return self.factories.read_roots(self)

    def store_dir(self) -> str:
        """The store as a workspace-relative path, as every printed path starts."""
        try:
            return self.store_root.relative_to(self.workspace).as_posix()
        except ValueError:
            return self.store_root.as_posix()
