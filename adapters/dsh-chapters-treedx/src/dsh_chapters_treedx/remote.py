"""The `treedx+http(s)://host[:port][/prefix]/<repo>` remote (amendment 2026-09-21).

The last path segment names the managed repository; everything before it is the service's base
URL. Credentials never ride in the URL: the token is stored by `chapters link` (§2.1).
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

import attrs

SCHEME_PREFIX = "treedx+"
# CONTRACT.md: names are lowercased and must match this; the server is the judge of reserved ones.
REPOSITORY_NAME = re.compile(r"^[a-z0-9][a-z0-9._-]{0,127}$")


@attrs.frozen
class TreeDXRemote:
    """A parsed remote. `origin` is the remote as recorded in the state file (no credentials)."""

    base_url: str  # e.g. https://host:8443 or https://host/prefix
    repository: str  # the managed repository name, lowercased
    has_userinfo: bool  # `user:secret@` in the authority: refused, never echoed

    @property
    def origin(self) -> str:
        return f"{SCHEME_PREFIX}{self.base_url}/{self.repository}"

    @property
    def name_is_valid(self) -> bool:
        return REPOSITORY_NAME.match(self.repository) is not None


def parse_remote(remote: str) -> TreeDXRemote | None:
    """The remote parsed, or None when it is not a TreeDX remote at all."""
    text = remote.strip()
    if not text.lower().startswith(SCHEME_PREFIX):
        return None
    parts = urlsplit(text[len(SCHEME_PREFIX) :])
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        return None
    segments = [s for s in parts.path.split("/") if s]
    if not segments or parts.query or parts.fragment:
        return None
    host = parts.hostname.lower()
    if ":" in host:  # an IPv6 literal keeps its brackets
        host = f"[{host}]"
    try:
        port = parts.port
    except ValueError:
        return None
    authority = host if port is None else f"{host}:{port}"
    prefix = "".join(f"/{s}" for s in segments[:-1])
    return TreeDXRemote(
        base_url=f"{parts.scheme.lower()}://{authority}{prefix}",
        repository=segments[-1].lower(),
        has_userinfo="@" in parts.netloc,
    )
