"""`chapters serve [--port N] [--open]`: the local web viewer (docs/viewer.md).

Composes the App once for the server's life and hands the web adapter a `Viewer` over it
(the adapter never imports the app). The adapter is an optional extra, imported here on use,
so `chapters --help` and every other command never pay for Starlette or uvicorn.
"""

from __future__ import annotations

import argparse
import contextlib
from typing import Any

from dsh_chapters_core.errors import ChaptersError, UsageError

from dsh_chapters.commands.invocation import Invocation

MAX_PORT = 65_535


def run_serve(args: argparse.Namespace, inv: Invocation) -> int:
    from dsh_chapters.services.web_viewer import AppViewer  # the viewer's own service

    app = inv.app
    port = app.config.viewer_port if args.port is None else args.port
    if not 0 <= port <= MAX_PORT:
        raise UsageError(f"--port {port} is outside 0–{MAX_PORT}",
                         hint=f"pass a port in 1–{MAX_PORT}, or 0 for any free one")
    try:
        from dsh_chapters_web.server import serve
    except ImportError:
        raise ChaptersError("the web viewer is not installed (package dsh-chapters-web, 0 found)",
                            hint="pip install 'dsh-chapters[web]'") from None

    def announce(line: str) -> None:
        inv.stdout.write(line + "\n")
        inv.stdout.flush()

    viewer = AppViewer(app, refresh_interval_s=app.config.viewer_index_refresh_ms / 1000)
    viewer.start()
    try:
        with contextlib.suppress(KeyboardInterrupt):  # Ctrl-C is how a viewer is stopped
            serve(viewer, port=port, open_browser=args.open, announce=announce)
    finally:
        viewer.close()
    return 0


def register(subparsers: Any, common: argparse.ArgumentParser) -> None:
    serve = subparsers.add_parser(
        "serve", parents=[common], help="browse, search and curate the archive in a browser",
        description="Serve the local web viewer on 127.0.0.1 only and print its URL: sessions, "
                    "chapters, search, rules (approve/revoke), topics and the pool. Every page "
                    "also answers `Accept: application/json`.")
    serve.add_argument("--port", type=int, default=None, metavar="N",
                       help="the port (default: viewerPort, 8765; 0 picks a free one)")
    serve.add_argument("--open", action="store_true", help="open the URL in a browser")
    serve.set_defaults(run=run_serve)
