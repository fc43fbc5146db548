"""`chapters serve`: bind 127.0.0.1 only, print the URL, serve until interrupted.

The socket is bound here, before uvicorn starts, so `--port 0` learns its real port and the
Host allow-list names exactly the address that was printed.
"""

from __future__ import annotations

import socket
import webbrowser
from collections.abc import Callable
from typing import Any

import uvicorn
from dsh_chapters_core.errors import ChaptersError
from dsh_chapters_core.ports.viewer import Viewer

from dsh_chapters_web.guard import allowed_hosts, new_csrf_token
from dsh_chapters_web.site import build_site

LOOPBACK = "127.0.0.1"  # never 0.0.0.0: the viewer is this machine's, not the network's


def bind_loopback(port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((LOOPBACK, port))
    except OSError as exc:
        sock.close()
        raise ChaptersError(f"cannot listen on {LOOPBACK}:{port}: {exc.strerror} "
                            f"(errno {exc.errno})",
                            hint="pass another --port, or --port 0 for any free one") from None
    sock.listen(128)
    return sock


def make_app(viewer: Viewer, port: int, *, csrf: str | None = None) -> Any:
    """The ASGI app for a server listening on `port` (a new CSRF token unless given)."""
    return build_site(viewer, csrf=csrf or new_csrf_token(), hosts=allowed_hosts(port))


def serve(viewer: Viewer, *, port: int, open_browser: bool = False,
          announce: Callable[[str], None] = print) -> None:
    sock = bind_loopback(port)
    bound = sock.getsockname()[1]
    url = f"http://{LOOPBACK}:{bound}/"
    app = make_app(viewer, bound)
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off")
    server = uvicorn.Server(config)
    announce(f"chapters viewer on {url} (127.0.0.1 only; Ctrl-C stops it)")
    if open_browser:
        webbrowser.open(url)
    try:
        server.run(sockets=[sock])
    finally:
        sock.close()
