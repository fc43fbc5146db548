"""The `treedx` entry point of `dsh_chapters.providers`: what the app loads to learn which
remotes this provider takes, apart from the provider itself.

Every command that reads the link (`chapters status`, a sync, a session's start) loads each
installed provider's factory to pick the one a remote names; the provider, with httpx and the
service's wire format, is imported only by `create`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from dsh_chapters_treedx.remote import parse_remote

if TYPE_CHECKING:
    from dsh_chapters_core.ports.transport import ProviderContext

    from dsh_chapters_treedx.provider import TreeDXProvider


class TreeDXProviderFactory:
    """The `treedx` entry point in `dsh_chapters.providers`.

    Static methods, so the loaded class and an instance of it both satisfy `ProviderFactory`.
    """

    name: ClassVar[str] = "treedx"
    # The schemes this provider owns, as the core's `parse_remote` names them; `treedx+` is
    # also a projectKey namespace (§2.3 as amended 2026-09-21).
    schemes: ClassVar[tuple[str, ...]] = ("treedx+https", "treedx+http")
    # Optional declarations the app reads (ports/transport.py): a TreeDX pool always needs a
    # token, and `chapters link` resolves or creates the managed repository.
    token_always_required: ClassVar[bool] = True
    link_resolves_pool: ClassVar[bool] = True

    @staticmethod
    def matches(remote: str) -> bool:
        return parse_remote(remote) is not None

    @staticmethod
    def create(context: ProviderContext) -> TreeDXProvider:
        from dsh_chapters_treedx.provider import TreeDXProvider

        return TreeDXProvider(context)
