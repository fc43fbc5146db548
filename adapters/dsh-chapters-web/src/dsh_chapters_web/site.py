"""The viewer's routes: a contract, like the CLI's command names (docs/viewer.md).

    GET  /                          sessions, by machine and date
    GET  /chapter/<path>?line=N     a chapter (or artifact) verbatim, line N highlighted
    GET  /search?q=…                `chapters search`, with kind/topic/machine/date filters
    GET  /rules                     proposed and core rules, the core budget
    POST /rules/approve, /rules/revoke   id + csrf
    GET  /topics                    vocabulary, aliases, shadow candidates
    POST /topics/merge              from + to + csrf
    GET  /pool                      link state, pending, last sync
    POST /pool/sync                 csrf

Every GET page answers `Accept: application/json` with the data the `Viewer` returned, the
same data the CLI prints under `--json`. Each page is one call into the port: nothing is
ranked, read or decided here.
"""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable, Callable, Mapping
from datetime import date
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote, urlencode

from dsh_chapters_core.errors import ChaptersError, RefusalError, UsageError
from dsh_chapters_core.ports.viewer import SearchFilters, Viewer
from dsh_chapters_core.reading import check_relative
from dsh_chapters_core.search.packing import SOURCE_WORDS
from jinja2 import Environment, FileSystemLoader, select_autoescape
from markdown_it import MarkdownIt
from markupsafe import Markup
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from dsh_chapters_web.chapter_view import (
    frontmatter_fields,
    iter_markers,
    mark_line,
    parse_chapter,
    plain_lines,
)
from dsh_chapters_web.guard import CSRF_FIELD, CSRF_HEADER, HostGuard, csrf_matches

PACKAGE_DIR = Path(__file__).parent
REDACTED_SECRET = "⟦redacted:credential⟧"
_DAY = 10  # len("YYYY-MM-DD")

Handler = Callable[[Request], Awaitable[Response]]


def wants_json(request: Request) -> bool:
    accept = request.headers.get("accept", "")
    return "application/json" in accept and "text/html" not in accept


def _status_of(exc: ChaptersError, method: str) -> int:
    """By the error's class, never its wording: bad input 400, a refusal 409; any other
    explained error is "not there" (404) for a read and "could not be done" (409) for a write
    (an unknown rule id, a writer lock held past its timeout)."""
    if isinstance(exc, UsageError):
        return 400
    if isinstance(exc, RefusalError):
        return 409
    return 404 if method in ("GET", "HEAD") else 409


def _frontmatter_value(value: object) -> str:
    """A frontmatter value as the file's flow style writes it (JSON), strings bare."""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _is_day(value: str) -> bool:
    try:
        date.fromisoformat(value)
    except ValueError:
        return False
    return len(value) == _DAY


class Site:
    """The pages over one `Viewer`. `csrf` is this process's token; `hosts` the allow-list."""

    def __init__(self, viewer: Viewer, *, csrf: str, hosts: frozenset[str]) -> None:
        self.viewer = viewer
        self.csrf = csrf
        self.hosts = hosts
        self.env = Environment(loader=FileSystemLoader(PACKAGE_DIR / "templates"),
                               autoescape=select_autoescape(["html"]), trim_blocks=True,
                               lstrip_blocks=True)
        markdown = MarkdownIt("commonmark", {"html": False})  # rule text: no raw HTML, ever
        self.env.filters["markdown"] = lambda text: Markup(markdown.render(text or ""))
        self.env.filters["mark_line"] = mark_line
        self.env.filters["urlpath"] = lambda path: quote(path, safe="/")
        self.env.filters["fmvalue"] = _frontmatter_value
        self.env.filters["fmfields"] = frontmatter_fields
        self.env.filters["source"] = lambda door: SOURCE_WORDS.get(str(door), str(door))
        self.env.globals["csrf_field"] = CSRF_FIELD

    # -- plumbing ------------------------------------------------------------------------------

    def _scrub(self, body: str) -> str:
        """The last check before a byte leaves: no stored secret is ever rendered."""
        for secret in self.viewer.secrets():
            if secret and secret in body:
                body = body.replace(secret, REDACTED_SECRET)
        return body

    def page(self, request: Request, template: str, data: Mapping[str, Any], *,
             status: int = 200, **extra: Any) -> Response:
        started = request.scope.get("viewer.started", time.perf_counter())
        if wants_json(request):
            body = self._scrub(json.dumps(data, ensure_ascii=False))
            response: Response = Response(body, status_code=status,
                                          media_type="application/json")
        else:
            html = self.env.get_template(template).render(
                data=data, csrf=self.csrf, path=request.url.path, **extra)
            response = HTMLResponse(self._scrub(html), status_code=status)
        elapsed = (time.perf_counter() - started) * 1000
        response.headers["Server-Timing"] = f"app;dur={elapsed:.1f}"
        response.headers["Cache-Control"] = "no-store"
        response.headers["X-Content-Type-Options"] = "nosniff"
        response.headers["Content-Security-Policy"] = (
            "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; "
            "form-action 'self'; frame-ancestors 'none'")
        return response

    def error(self, request: Request, exc: ChaptersError, status: int | None = None) -> Response:
        code = status or _status_of(exc, request.method)
        return self.page(request, "error.html",
                         {"error": exc.message, "next": self.viewer.next_step(exc),
                          "status": code}, status=code)

    async def call(self, request: Request, fn: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        # The port is synchronous (files, SQLite, the writer lock): run it off the event loop.
        return await run_in_threadpool(fn)

    async def form(self, request: Request) -> dict[str, str]:
        body = (await request.body()).decode("utf-8", errors="replace")
        if request.headers.get("content-type", "").startswith("application/json"):
            try:
                data = json.loads(body) if body else {}
            except ValueError:
                data = {}
            return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}
        return {k: v[-1] for k, v in parse_qs(body, keep_blank_values=True).items()}

    def csrf_ok(self, request: Request, fields: Mapping[str, str]) -> bool:
        given = fields.get(CSRF_FIELD, "") or request.headers.get(CSRF_HEADER, "")
        return csrf_matches(self.csrf, given)

    def refuse_csrf(self, request: Request) -> Response:
        return self.error(request, ChaptersError(
            "refused: this request carries no valid CSRF token (0 of 1 required)",
            hint="submit the form from the viewer's own page; a new `chapters serve` "
                 "issues a new token, so reload the page"), status=403)

    # -- pages ---------------------------------------------------------------------------------

    async def sessions(self, request: Request) -> Response:
        try:
            data = await self.call(request, self.viewer.sessions)
        except ChaptersError as exc:
            return self.error(request, exc)
        return self.page(request, "sessions.html", data)

    async def chapter(self, request: Request) -> Response:
        raw = request.path_params["path"]
        try:
            check_relative(raw)  # §9 containment, as `chapters artifact`: no `..`, no `/x`
        except ChaptersError as exc:
            return self.error(request, exc, status=403)
        line = request.query_params.get("line", "")
        if line and not line.isdigit():
            return self.error(request, UsageError(
                f"?line={line!r} is not a line number", hint="pass ?line=N with N ≥ 1"))
        try:
            data = await self.call(request, lambda: self.viewer.chapter(raw))
        except ChaptersError as exc:
            return self.error(request, exc)
        highlight = int(line) if line else 0
        if wants_json(request):
            return self.page(request, "chapter.html", data)
        if data["kind"] == "chapter":
            view = parse_chapter(data["text"])
            markers = list(iter_markers(view))
            return self.page(request, "chapter.html", data, view=view, plain=None,
                             highlight=highlight, markers=markers)
        return self.page(request, "chapter.html", data, view=None,
                         plain=plain_lines(data["text"]), highlight=highlight, markers=[])

    async def search(self, request: Request) -> Response:
        q = request.query_params
        filters = SearchFilters(
            kind=q.get("kind", "").strip(), topic=q.get("topic", "").strip(),
            machine=q.get("machine", "").strip(), since=q.get("since", "").strip(),
            until=q.get("until", "").strip(),
            cross_project=q.get("cross", "") in ("1", "on", "true"))
        for name, value in (("since", filters.since), ("until", filters.until)):
            if value and not _is_day(value):
                return self.error(request, UsageError(
                    f"{name}={value!r} is not a date (YYYY-MM-DD, 10 characters)",
                    hint=f"pass {name}=2026-11-30, or leave it empty for any date"))
        query = q.get("q", "")
        if not query.strip() and not filters.topic:
            return self.page(request, "search.html", {"query": "", "matches": [],
                                                      "filters": {}, "status": "idle"})
        try:
            data = await self.call(request, lambda: self.viewer.search(query, filters))
        except ChaptersError as exc:
            return self.error(request, exc)
        return self.page(request, "search.html", data, params=dict(q))

    async def rules(self, request: Request) -> Response:
        try:
            data = await self.call(request, self.viewer.rules)
        except ChaptersError as exc:
            return self.error(request, exc)
        done = {k: request.query_params.get(k, "") for k in ("done", "id", "after", "before")}
        return self.page(request, "rules.html", data, done=done)

    def _rule_action(self, approve: bool) -> Handler:
        async def act(request: Request) -> Response:
            fields = await self.form(request)
            if not self.csrf_ok(request, fields):
                return self.refuse_csrf(request)
            rule_id = fields.get("id", "")
            try:
                data = await self.call(
                    request, lambda: self.viewer.set_rule_status(rule_id, approve))
            except ChaptersError as exc:
                return self.error(request, exc)
            if wants_json(request):
                return self.page(request, "", data)
            query = urlencode({"done": "approve" if approve else "revoke", "id": data["id"],
                               "before": data["before"], "after": data["after"]})
            return RedirectResponse(f"/rules?{query}", status_code=303)
        return act

    async def topics(self, request: Request) -> Response:
        try:
            data = await self.call(request, self.viewer.topics)
        except ChaptersError as exc:
            return self.error(request, exc)
        merged = {k: request.query_params.get(k, "") for k in ("merged", "to")}
        return self.page(request, "topics.html", data, merged=merged)

    async def topic_merge(self, request: Request) -> Response:
        fields = await self.form(request)
        if not self.csrf_ok(request, fields):
            return self.refuse_csrf(request)
        source, target = fields.get("from", ""), fields.get("to", "")
        try:
            data = await self.call(request, lambda: self.viewer.merge_topics(source, target))
        except ChaptersError as exc:
            return self.error(request, exc)
        if wants_json(request):
            return self.page(request, "", data)
        fact = data["fact"]
        query = urlencode({"merged": fact.get("from", ""), "to": fact.get("to", "")})
        return RedirectResponse(f"/topics?{query}", status_code=303)

    async def pool(self, request: Request) -> Response:
        try:
            data = await self.call(request, self.viewer.pool)
        except ChaptersError as exc:
            return self.error(request, exc)
        return self.page(request, "pool.html", data, synced=None)

    async def pool_sync(self, request: Request) -> Response:
        fields = await self.form(request)
        if not self.csrf_ok(request, fields):
            return self.refuse_csrf(request)
        try:
            report = await self.call(request, self.viewer.sync)
            data = await self.call(request, self.viewer.pool)
        except ChaptersError as exc:
            return self.error(request, exc)
        if wants_json(request):
            return self.page(request, "", report)
        return self.page(request, "pool.html", data, synced=report)


def _timed(app: Starlette) -> Callable[..., Awaitable[None]]:
    async def timed(scope: Any, receive: Any, send: Any) -> None:
        scope["viewer.started"] = time.perf_counter()
        await app(scope, receive, send)
    return timed


def build_site(viewer: Viewer, *, csrf: str, hosts: frozenset[str]) -> Any:
    """The ASGI app: the routes above behind the Host guard."""
    site = Site(viewer, csrf=csrf, hosts=hosts)
    routes = [
        Route("/", site.sessions),
        Route("/chapter/{path:path}", site.chapter),
        Route("/search", site.search),
        Route("/rules", site.rules),
        Route("/rules/approve", site._rule_action(True), methods=["POST"]),
        Route("/rules/revoke", site._rule_action(False), methods=["POST"]),
        Route("/topics", site.topics),
        Route("/topics/merge", site.topic_merge, methods=["POST"]),
        Route("/pool", site.pool),
        Route("/pool/sync", site.pool_sync, methods=["POST"]),
        Mount("/static", StaticFiles(directory=PACKAGE_DIR / "static"), name="static"),
    ]
    app = Starlette(routes=routes)
    return HostGuard(_timed(app), hosts)
