"""The `git` entry point of `dsh_chapters.providers`: what the app loads to learn which remotes
this provider takes, apart from the provider itself.

Every command that reads the link (`chapters status`, a sync, a session's start) loads each
installed provider's factory to pick the one a remote names; the provider, with dulwich and
its HTTP stack, is imported only by `create`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dsh_chapters_core.remote import parse_remote

if TYPE_CHECKING:
    from dsh_chapters_core.ports.transport import KnowledgeProvider, ProviderContext


class GitProviderFactory:
    """The `git` entry point of `dsh_chapters.providers`.

    `matches` and `create` are class methods, so the loaded class and an instance of it both
    satisfy `ProviderFactory`.
    """

    name = "git"
    schemes: tuple[str, ...] = ("file", "http", "https")  # as the core's `parse_remote` names

    @classmethod
    def matches(cls, remote: str) -> bool:
        """A local path (absolute, `~`, `./`, `../`, `file://`) or an http(s) URL."""
        parsed = parse_remote(remote)
        return parsed.scheme in cls.schemes and (parsed.is_local or bool(parsed.url))

    @classmethod
    def create(cls, context: ProviderContext) -> KnowledgeProvider:
        from dsh_chapters_git.provider import create_provider

        return create_provider(context)
