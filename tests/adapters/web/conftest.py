"""A two-machine pool (box-a, box-b) synced through a real local-path pool, and a viewer client
on box-a: the fixtures every web test shares. Chapters come from the bundled demo session; the
marked chapter and the artifact are our own text."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from dsh_chapters.services.web_viewer import AppViewer
from dsh_chapters_core.frontmatter import dump_frontmatter
from dsh_chapters_web.server import make_app
from starlette.testclient import TestClient

from tests.acceptance.steps_common import Machine
from tests.acceptance.steps_common import project_clone as machine

PORT = 8765
CSRF = "csrf-test-token-of-this-process"
BASE = f"http://127.0.0.1:{PORT}"
TOKEN = "tok-never-render-7b3e9a1c"
MARKED_SESSION = "0a1b2c3d-0000-4000-8000-00000000beef"
ARTIFACT_TEXT = "".join(f"artifact line {n}: the retry budget\n" for n in range(1, 41))
ARTIFACT_SHA = hashlib.sha256(ARTIFACT_TEXT.encode()).hexdigest()






@dataclass
class Pool:
    a: Machine
    b: Machine
    pool: Path
    marked: str  # store-relative path of the chapter with markers and an artifact


def _marked_chapter(store: Path, harness: str) -> str:
    """A chapter in the shapes the core writes, with a redaction marker, a screened marker, an
    artifact stub and a leaked copy of the stored token (which no page may show)."""
    body = (
        "## Turn · seq 1–6 · 2026-11-29T10:00:00Z\n\n"
        "**User:**\n\n```text\nDeploy with key ⟦redacted:credential sha256=0badc0de⟧ please.\n"
        f"The old token was {TOKEN}.\n```\n\n"
        "**Reasoning:**\n\n```text\nThe deploy script reads the key from the environment.\n```\n\n"
        "**Assistant:**\n\n```text\n⟦omitted:host-injected system-reminder, 120 chars⟧\n"
        "Reading the deploy log.\n```\n\n"
        '→ tool read_file({"path": "deploy.log"})\n\n'
        f"← result read_file: artifacts/{ARTIFACT_SHA[:2]}/{ARTIFACT_SHA}.txt "
        f"({len(ARTIFACT_TEXT)} chars, 40 lines)\n\n"
        "**Assistant:**\n\n```text\nThe deploy waits on the retry budget.\n```\n"
    )
    text = dump_frontmatter({
        "kind": "chapter", "title": "Deploy key and the retry budget",
        "summary": "deploy waits on the retry budget", "topics": ["deploy", "retry"],
        "sessionId": MARKED_SESSION, "harnessId": harness, "date": "2026-11-29T10:00:00Z",
        "messages": {"user": 1, "assistant": 2, "tool": 1}, "seqRange": [1, 6],
        "generated": {"title": {"by": "deterministic"},
                      "topics": {"by": "model", "model": "small-1"}},
        "ended": "2026-11-29T10:05:00Z", "prLinks": ["https://example.test/acme/widgets/pull/7"],
        "sha256": hashlib.sha256(body.encode()).hexdigest(),
    }) + body
    rel = f"{MARKED_SESSION}/chapters/001-deploy-key-and-the-retry-budget.md"
    (store / rel).parent.mkdir(parents=True, exist_ok=True)
    (store / rel).write_text(text, encoding="utf-8")
    artifact = store / "artifacts" / ARTIFACT_SHA[:2] / f"{ARTIFACT_SHA}.txt"
    artifact.parent.mkdir(parents=True, exist_ok=True)
    artifact.write_text(ARTIFACT_TEXT, encoding="utf-8")
    return rel


@pytest.fixture
def two_machines(tmp_path: Path) -> Pool:
    a, b = machine(tmp_path, "box-a"), machine(tmp_path, "box-b")
    pool = tmp_path / "drive" / "widgets.git"
    a.archive("a-1")
    b.archive("b-1")
    b.ok("rule", "add", "testing", "Run the retry tests with -x before a push.")
    for m in (a, b):
        m.ok("link", str(pool))
    a.ok("sync")
    b.ok("sync")
    a.ok("sync")
    marked = _marked_chapter(a.store, "box-a")
    app = a.app()
    app.credentials.write(app.identity.project_key, TOKEN)
    return Pool(a, b, pool, marked)


ClientFor = Callable[[Machine], TestClient]


@pytest.fixture
def client_for() -> Iterator[ClientFor]:
    clients: list[TestClient] = []

    def make(m: Machine) -> TestClient:
        app = make_app(AppViewer(m.app()), PORT, csrf=CSRF)
        client = TestClient(app, base_url=BASE, follow_redirects=False)
        clients.append(client)
        return client

    yield make
    for client in clients:
        client.close()


@pytest.fixture
def client(two_machines: Pool, client_for: ClientFor) -> TestClient:
    return client_for(two_machines.a)


JSON = {"Accept": "application/json"}


# -- a live server and a real browser ---------------------------------------------------------

# An installed Chromium, never a download: Debian's package (`.ci/run` installs it), else
# macOS's (`brew install --cask chromium`), or the one DSH_CHAPTERS_CHROMIUM names.
CHROMIUM_PLACES = ("/usr/bin/chromium", "/Applications/Chromium.app/Contents/MacOS/Chromium")
CHROMIUM = os.environ.get("DSH_CHAPTERS_CHROMIUM") or next(
    (p for p in CHROMIUM_PLACES if Path(p).exists()), CHROMIUM_PLACES[0])
CHROMIUM_ARGS = (
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
)
REBOUND_HOST = "rebound.test"  # resolved to 127.0.0.1 by the browser: a DNS-rebinding page
# Set to a directory to keep the screenshots docs/viewer.md shows (docs/viewer/).
SCREENSHOTS_ENV = "CHAPTERS_VIEWER_SCREENSHOTS"


@dataclass
class LiveServer:
    url: str
    port: int


@pytest.fixture
def live_for() -> Iterator[Callable[[Machine], LiveServer]]:
    import threading

    import uvicorn
    from dsh_chapters_web.server import bind_loopback

    running: list[tuple[uvicorn.Server, threading.Thread, object]] = []

    def start(m: Machine) -> LiveServer:
        sock = bind_loopback(0)
        port = sock.getsockname()[1]
        app = make_app(AppViewer(m.app()), port)  # its own CSRF token, as `chapters serve`
        server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False,
                                               lifespan="off"))
        thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
        thread.start()
        for _ in range(200):
            if server.started:
                break
            threading.Event().wait(0.025)
        running.append((server, thread, sock))
        return LiveServer(f"http://127.0.0.1:{port}", port)

    yield start
    for server, thread, sock in running:
        server.should_exit = True
        thread.join(10)
        sock.close()  # type: ignore[attr-defined]


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[Any]:
    report = yield
    if report.when == "call":
        item.stash[_FAILED] = report.failed
    return report


_FAILED = pytest.StashKey[bool]()


@pytest.fixture
def browser_page(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    """A Chromium page; on failure its screenshot is saved under the test's tmp dir."""
    from playwright import sync_api as playwright_api

    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: `apt-get install -y chromium` (.ci/run does), "
                    "on macOS `brew install --cask chromium`, or set DSH_CHAPTERS_CHROMIUM")
    with playwright_api.sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path=CHROMIUM,
            args=[*CHROMIUM_ARGS, f"--host-resolver-rules=MAP {REBOUND_HOST} 127.0.0.1"])
        context = browser.new_context(viewport={"width": 1280, "height": 860})
        page = context.new_page()
        try:
            yield page
        finally:
            if request.node.stash.get(_FAILED, False):
                shot = tmp_path / f"{request.node.name}-failure.png"
                page.screenshot(path=str(shot), full_page=True)
                print(f"screenshot of the failure: {shot}")
            context.close()
            browser.close()


def keep_screenshot(page: Any, name: str) -> None:
    """Save a screenshot for docs/viewer.md when CHAPTERS_VIEWER_SCREENSHOTS names a folder."""
    folder = os.environ.get(SCREENSHOTS_ENV, "")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(folder) / f"{name}.png"))
