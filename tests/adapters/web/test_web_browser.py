"""`chapters serve` in a real browser: headless Debian Chromium driven by Playwright, against
a live uvicorn server on 127.0.0.1 over a two-machine pool. Each test's failure screenshot is
saved under its tmp dir; with CHAPTERS_VIEWER_SCREENSHOTS set, the docs' screenshots too."""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from tests.acceptance.steps_common import Machine
from tests.adapters.web.conftest import REBOUND_HOST, LiveServer, Pool, keep_screenshot

pytestmark = pytest.mark.slow

LiveFor = Callable[[Machine], LiveServer]


@contextmanager
def _other_site(html: str) -> Iterator[str]:
    """A page served from another origin (another loopback port), as any web site would."""
    body = html.encode()

    class Page(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Page)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def test_open_a_session_and_a_chapter_of_the_other_machine(
        two_machines: Pool, live_for: LiveFor, browser_page: Any) -> None:
    live, page = live_for(two_machines.a), browser_page
    page.goto(live.url + "/")
    assert page.locator('section.machine[data-machine="box-a"]').count() == 1
    machine_b = page.locator('section.machine[data-machine="box-b"]')
    assert machine_b.count() == 1
    keep_screenshot(page, "sessions")
    session = machine_b.locator("details.session").first
    if session.get_attribute("open") is None:
        session.locator("summary").click()
    assert "2 chapter(s)" in session.locator("summary").inner_text()
    session.locator("a.chapter-link").first.click()
    page.wait_for_url(re.compile(r"/chapter/.+/chapters/001-"))
    assert page.locator("article.chapter h1").inner_text().startswith("The retry loop")
    assert page.locator("details.block.user").count() >= 1
    results = page.locator("details.block.tool-result")
    assert results.count() >= 1 and results.first.get_attribute("open") is None  # folded
    results.first.locator("summary").click()
    assert results.first.get_attribute("open") is not None
    assert "def fetch(url, attempts=3):" in results.first.inner_text()
    assert page.locator("aside.frontmatter .topics a.topic").count() >= 3
    page.locator("a[rel=next]").click()
    page.wait_for_url(re.compile(r"/chapters/002-"))
    assert page.locator("a[rel=prev]").count() == 1


def test_a_chapter_shows_markers_provenance_and_opens_an_artifact_inline(
        two_machines: Pool, live_for: LiveFor, browser_page: Any) -> None:
    live, page = live_for(two_machines.a), browser_page
    page.goto(f"{live.url}/chapter/{two_machines.marked}")
    assert page.locator("mark.redaction").first.inner_text().startswith("⟦redacted:credential")
    assert page.locator("mark.screened").first.inner_text().startswith("⟦omitted:host-injected")
    assert "small-1" in page.locator("aside.frontmatter .provenance").inner_text()
    assert "pull/7" in page.locator("aside.frontmatter .prlinks").inner_text()
    keep_screenshot(page, "chapter")
    artifact = page.locator("details.block.artifact")
    artifact.locator("summary").click()
    artifact.locator("a.open-artifact").click()
    body = artifact.locator(".artifact-body pre")
    body.wait_for()
    assert "artifact line 40: the retry budget" in body.inner_text()
    assert page.url.endswith(two_machines.marked)  # opened in the same view


def test_a_folded_tool_call_says_its_command_and_the_frontmatter_reads_as_fields(
        two_machines: Pool, live_for: LiveFor, browser_page: Any) -> None:
    live, page = live_for(two_machines.a), browser_page
    page.goto(f"{live.url}/chapter/{two_machines.marked}")
    call = page.locator("details.block.tool-call").first
    assert call.get_attribute("open") is None  # folded, and still says what it did
    assert call.locator("summary code.detail").inner_text() == "deploy.log"
    assert "→ tool read_file" in call.locator("summary").inner_text()
    messages = page.locator("aside.frontmatter dd.field-messages").inner_text()
    assert "{" not in messages and re.search(r"\d+ user", messages), messages
    assert "–" in page.locator("aside.frontmatter dd.field-seqRange").inner_text()
    page.goto(live.url + "/")
    item = page.locator("ol.chapters li").first
    assert item.evaluate("li => getComputedStyle(li).listStyleType") == "none"
    row = item.inner_text()
    assert re.match(r"^\d+\s+\S", row) and not re.match(r"^\d+\.", row), row  # one number
    assert not re.match(r"^\d", item.locator("a.chapter-link").inner_text())  # the title alone


def test_a_chapter_opens_by_the_id_chapters_list_prints(
        two_machines: Pool, live_for: LiveFor, browser_page: Any) -> None:
    live, page = live_for(two_machines.a), browser_page
    session = two_machines.marked.split("/", 1)[0]
    page.goto(f"{live.url}/chapter/{session[:8]}/1")
    assert page.locator("article.chapter h1").inner_text() == "Deploy key and the retry budget"


def test_search_and_follow_a_hit_to_the_highlighted_line(
        two_machines: Pool, live_for: LiveFor, browser_page: Any) -> None:
    live, page = live_for(two_machines.a), browser_page
    page.goto(live.url + "/")
    page.fill("header.top input[name=q]", "retry")
    page.press("header.top input[name=q]", "Enter")
    page.wait_for_url(re.compile(r"/search\?q=retry"))
    # The page shows what the search service answers (one scorer): the same JSON, same numbers.
    data = page.evaluate("fetch(location.href, {headers: {Accept: 'application/json'}})"
                         ".then(r => r.json())")
    assert data["shown"] >= 1 and data["total"] >= data["shown"]
    assert page.locator("#answer .shown").inner_text() == str(data["shown"])
    assert page.locator("#answer .total").inner_text() == str(data["total"])
    assert page.locator("#answer .door").get_attribute("data-door") == "mirror"
    assert page.locator("#answer .door").inner_text() == "the pool's copy"
    keep_screenshot(page, "search")
    hit = page.locator("ol.hits a.hit").first
    href = hit.get_attribute("href")
    hit.click()
    page.wait_for_load_state()
    assert "/chapter/.dsh-knowledge/chapters/" in page.url
    if "?line=" not in (href or ""):
        # Without the search service's anchors on this branch, build the hit's line link the
        # way an anchor does: the line that holds the matched words.
        text = page.evaluate("fetch(location.href, {headers: {Accept: 'application/json'}})"
                             ".then(r => r.json()).then(d => d.text)")
        number = next(n for n, line in enumerate(text.splitlines(), 1)
                      if "raise RetryExhausted" in line)
        page.goto(f"{page.url.split('?')[0]}?line={number}")
    else:
        number = int(href.split("?line=")[1].split("#")[0])
    line = page.locator(f"#L{number}")
    assert "hit" in (line.get_attribute("class") or "")
    assert page.locator("body").get_attribute("data-scrolled-to") == str(number)
    assert line.locator("xpath=ancestor::details[1]").get_attribute("open") is not None
    box, viewport = line.bounding_box(), page.viewport_size
    assert box is not None and 0 <= box["y"] <= viewport["height"]
    keep_screenshot(page, "highlight")


def test_approve_a_proposed_rule_and_the_notice_changes(
        two_machines: Pool, live_for: LiveFor, browser_page: Any) -> None:
    a = two_machines.a
    before = a.ok("notice", "--json").json()
    assert before["coreRules"]["count"] == 0
    live, page = live_for(a), browser_page
    page.goto(live.url + "/rules")
    rule = page.locator('article.rule[data-rule="box-b/001"]')
    assert "author machine box-b" in rule.locator(".provenance").inner_text()
    assert rule.locator(".status").inner_text() == "proposed"
    keep_screenshot(page, "rules")
    rule.locator("button.approve").click()
    page.wait_for_url(re.compile(r"/rules\?done=approve"))
    assert "approved box-b/001: proposed → core on box-a" in page.locator("#done").inner_text()
    assert page.locator('article.rule[data-rule="box-b/001"] .status').inner_text() == "core"
    assert page.locator("#budget .core-count").inner_text() == "1"
    after = a.ok("notice", "--json").json()
    assert after["coreRules"]["count"] == 1
    assert "Run the retry tests with -x before a push." in after["notice"]
    assert "Run the retry tests" not in before["notice"]


def test_a_post_without_the_token_and_a_cross_site_post_are_refused(
        two_machines: Pool, live_for: LiveFor, browser_page: Any) -> None:
    a = two_machines.a
    live, page = live_for(a), browser_page
    page.goto(live.url + "/rules")
    page.evaluate("""() => { const f = document.createElement('form'); f.method = 'post';
        f.action = '/rules/approve'; const i = document.createElement('input'); i.name = 'id';
        i.value = 'box-b/001'; f.appendChild(i); document.body.appendChild(f); f.submit(); }""")
    page.wait_for_url(re.compile(r"/rules/approve$"))
    assert page.locator("#error h1").inner_text() == "403"
    assert "CSRF" in page.locator("#error .message").inner_text()
    # Another site (another origin: its own server on another port) posts a form at the
    # viewer. It cannot read this process's token, so it sends a guess.
    with _other_site(f"""<form id=f method=post action="{live.url}/rules/approve">
        <input name=id value="box-b/001"><input name=csrf value="guess"></form>""") as evil:
        page.goto(evil)
        with page.expect_navigation():
            page.evaluate("document.getElementById('f').submit()")
    assert page.url == f"{live.url}/rules/approve"
    assert page.locator("body").inner_text().startswith("refused: a POST from origin")
    assert "cross-site" in page.content()
    assert not (a.store / "edits" / "box-a" / "curation.jsonl").exists()
    assert a.ok("notice", "--json").json()["coreRules"]["count"] == 0


def test_a_foreign_host_header_is_refused(
        two_machines: Pool, live_for: LiveFor, browser_page: Any) -> None:
    live, page = live_for(two_machines.a), browser_page
    response = page.goto(f"http://{REBOUND_HOST}:{live.port}/rules")
    assert response is not None and response.status == 421
    assert f"Host '{REBOUND_HOST}:{live.port}' is not this viewer" in page.content()
    ok = page.goto(f"http://localhost:{live.port}/")
    assert ok is not None and ok.status == 200


def test_a_path_traversal_url_is_refused(
        two_machines: Pool, live_for: LiveFor, browser_page: Any) -> None:
    live, page = live_for(two_machines.a), browser_page
    encoded = page.goto(f"{live.url}/chapter/..%2F..%2F..%2Fetc%2Fpasswd")
    assert encoded is not None and encoded.status == 403
    assert "leaves the archive" in page.locator("#error .message").inner_text()
    assert "root:x:0:0" not in page.content()
    dotted = page.goto(f"{live.url}/chapter/../../../../etc/passwd")  # the browser folds `..`
    assert dotted is not None and dotted.status == 404 and "root:x:0:0" not in page.content()
