"""A knowledge pool's remote, parsed once into one value (§2.1; amendment 2026-09-21).

The core knows the shapes of a remote, never a scheme's owner: providers declare the schemes
they own (`ProviderFactory.schemes`, as fsspec's registry maps a protocol to its filesystem),
and the composition root picks the one provider whose declaration holds `Remote.scheme`.

- a local path (`/srv/pool.git`, `~/pool`, `./pool`, `.`) or `file://…`: scheme `file`;
- a URL `<scheme>://host[:port]/path`: its scheme (`https`, or a compound `<name>+https`,
  whose inner URL is `url`);
- `<name>+<path>` (a plugin's directory pool, e.g. `folder+~/Sync/pool`): scheme `<name>`;
- `<name>:<rest>` without `//` (an opaque remote, e.g. a test pool `fake:pool`): `<name>`;
- anything else (`pool`, `git@host:org/repo`): no scheme (`""`), so no provider claims it.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Collection
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

_URL = re.compile(r"^(?P<scheme>[a-z][a-z0-9+.-]*)://", re.IGNORECASE)
_NAMED_PATH = re.compile(r"^(?P<name>[a-z][a-z0-9-]*)\+(?P<path>[/~.].*)$", re.IGNORECASE)
# Two letters at least, so a Windows drive (`c:\pool`) is never a scheme.
_OPAQUE = re.compile(r"^(?P<name>[a-z][a-z0-9+.-]+):(?!//)(?P<rest>.+)$", re.IGNORECASE)
_LOCAL_PREFIXES = ("/", "~", "./", "../")
_LOOPBACK_NAMES = frozenset({"localhost", "localhost.", "localhost.localdomain"})
LOCAL_SCHEME = "file"  # what a bare local path is, as fsspec calls it


def is_loopback_host(host: str) -> bool:
    """127.0.0.0/8, ::1 and `localhost`: exempt from the token rule (§2.1: local test forges)."""
    host = host.strip().lower()
    if host in _LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


@dataclass(frozen=True, slots=True)
class Remote:
    """One remote, as linked. `text` is kept verbatim; the rest is derived from it."""

    text: str
    scheme: str  # lowercase; "file" for a local path, "" when no shape fits
    url: str = ""  # the network URL inside (`treedx+https://h/r` → `https://h/r`)
    host: str = ""  # lowercase, without brackets; "" for a path
    path: str = ""  # a local pool's path (as written, `~` unexpanded), or the URL's path
    has_credentials: bool = False  # `user:token@` in the URL: never to be stored
    is_local: bool = False  # a directory on this machine: a path, `file://`, `<name>+<path>`

    @property
    def url_scheme(self) -> str:
        """The network URL's own scheme (`https` for `treedx+https://…`), "" for a path."""
        return self.url.split("://", 1)[0].lower() if self.url else ""

    @property
    def is_loopback(self) -> bool:
        return bool(self.host) and is_loopback_host(self.host)


def parse_remote(text: str) -> Remote:
    """The remote's one value. Never raises: a remote no shape fits has scheme ""."""
    raw = text.strip()
    url = _URL.match(raw)
    if url is not None:
        scheme = url.group("scheme").lower()
        if scheme == LOCAL_SCHEME:
            return Remote(raw, scheme, path=unquote(urlsplit(raw).path), is_local=True)
        inner = raw.split("+", 1)[1] if "+" in scheme else raw
        parts = urlsplit(inner)
        return Remote(raw, scheme, url=inner, host=(parts.hostname or "").lower(),
                      path=parts.path, has_credentials=bool(parts.username or parts.password))
    named = _NAMED_PATH.match(raw)
    if named is not None:
        return Remote(raw, named.group("name").lower(), path=named.group("path"), is_local=True)
    if raw.startswith(_LOCAL_PREFIXES) or raw in (".", ".."):
        return Remote(raw, LOCAL_SCHEME, path=raw, is_local=True)
    opaque = _OPAQUE.match(raw)
    if opaque is not None and "/" not in opaque.group("name"):
        return Remote(raw, opaque.group("name").lower(), path=opaque.group("rest"))
    return Remote(raw, "")


def key_namespace(url: str, namespaces: Collection[str]) -> str:
    """§2.3 as amended: the namespace a `<name>+<scheme>://` remote keeps in its canonical key
    (`treedx+https://h/r` → `treedx`) when a provider declares `<name>` one; "" otherwise, so
    `git+ssh://` stays a plain git remote."""
    match = _URL.match(url.strip())
    if match is None or "+" not in match.group("scheme"):
        return ""
    name = match.group("scheme").lower().split("+", 1)[0]
    return name if name in namespaces else ""
