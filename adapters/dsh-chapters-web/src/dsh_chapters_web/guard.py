"""What keeps a loopback viewer from being someone else's: the Host allow-list and the CSRF token.

A server on 127.0.0.1 is still reachable from any web page the user opens: a DNS-rebinding page
names its own host in `Host`, and a cross-site form can POST to 127.0.0.1. So every request must
name an allowed host, and every state-changing request must carry this process's CSRF token
(a new one per `chapters serve`, never stored) and, when the browser sends one, an allowed
`Origin`.
"""

from __future__ import annotations

import hmac
import secrets
from collections.abc import Iterable

import attrs
from starlette.datastructures import Headers
from starlette.responses import PlainTextResponse
from starlette.types import ASGIApp, Receive, Scope, Send

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
CSRF_FIELD = "csrf"  # the form field
CSRF_HEADER = "x-csrf-token"  # the header a script may send instead
LOOPBACK_NAMES = ("127.0.0.1", "localhost")


def new_csrf_token() -> str:
    return secrets.token_urlsafe(32)


def allowed_hosts(port: int, names: Iterable[str] = LOOPBACK_NAMES) -> frozenset[str]:
    """`Host` values a browser sends for this server: each loopback name with the port."""
    return frozenset(f"{name}:{port}" for name in names)


def csrf_matches(expected: str, given: str) -> bool:
    return bool(given) and hmac.compare_digest(expected.encode(), given.encode())


@attrs.frozen
class HostGuard:
    """ASGI middleware: refuse (421) a request whose `Host` is not one of ours (rebinding),
    and (403) a state-changing one whose `Origin` is foreign."""

    app: ASGIApp
    hosts: frozenset[str]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        host = headers.get("host", "")
        if host not in self.hosts:
            allowed = ", ".join(sorted(self.hosts))
            response = PlainTextResponse(
                f"refused: Host {host!r} is not this viewer ({len(self.hosts)} allowed: "
                f"{allowed})\nnext: open the URL `chapters serve` printed", status_code=421)
            await response(scope, receive, send)
            return
        origin = headers.get("origin", "")
        if scope["method"] not in SAFE_METHODS and origin and origin not in {
                f"http://{h}" for h in self.hosts}:
            response = PlainTextResponse(
                f"refused: a {scope['method']} from origin {origin!r} (cross-site)\n"
                "next: use the viewer's own pages", status_code=403)
            await response(scope, receive, send)
            return
        await self.app(scope, receive, send)
