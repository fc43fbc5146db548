"""Every route of `chapters serve` without a browser: status codes, the JSON twin of each page,
containment, the Host allow-list, CSRF, and writes that match the CLI's."""

from __future__ import annotations

import json
import os
import re
import threading
from pathlib import Path
from typing import Any, ClassVar

import pytest
from dsh_chapters.commands.serve import register as register_serve
from dsh_chapters_web.guard import allowed_hosts, csrf_matches
from starlette.testclient import TestClient

from tests.adapters.web.conftest import (
    ARTIFACT_SHA,
    BASE,
    CSRF,
    JSON,
    MARKED_SESSION,
    TOKEN,
    ClientFor,
    Pool,
)

pytestmark = pytest.mark.slow  # two machines sync through a real local-path pool


def _edits(pool: Pool) -> Path:
    return pool.a.store / "edits" / "box-a" / "curation.jsonl"


# -- sessions ---------------------------------------------------------------------------------


def test_sessions_group_both_machines_with_counts(two_machines: Pool, client: TestClient) -> None:
    page = client.get("/")
    assert page.status_code == 200 and "text/html" in page.headers["content-type"]
    assert 'data-machine="box-a"' in page.text and 'data-machine="box-b"' in page.text
    data = client.get("/", headers=JSON).json()
    by_machine = {m["harnessId"]: m for m in data["machines"]}
    assert set(by_machine) == {"box-a", "box-b"}
    b_sessions = [s for d in by_machine["box-b"]["days"] for s in d["sessions"]]
    assert len(b_sessions) == 1 and b_sessions[0]["chapterCount"] == 2
    assert b_sessions[0]["messages"] == {"assistant": 5, "tool": 5, "user": 3}
    a_days = [d["date"] for d in by_machine["box-a"]["days"]]
    assert a_days == sorted(a_days, reverse=True) and "2026-11-29" in a_days
    a_session = next(s for d in by_machine["box-a"]["days"] for s in d["sessions"]
                     if s["chapterCount"] == 2)
    assert a_session["harness"] == "dsh"
    assert data["sessions"] == 3 and data["chapters"] == 5 and data["harnessId"] == "box-a"


def test_sessions_list_the_mirror_when_the_store_lacks_a_chapter(
        two_machines: Pool, client_for: ClientFor) -> None:
    b = two_machines.b  # b synced before a's second sync: a's chapters are in b's mirror only
    data = client_for(b).get("/", headers=JSON).json()
    rows = [c for m in data["machines"] for d in m["days"] for s in d["sessions"]
            for c in s["chapters"]]
    origins = {r["origin"] for r in rows}
    assert {m["harnessId"] for m in data["machines"]} == {"box-a", "box-b"}
    assert len(rows) == 4 and len({r["path"] for r in rows}) == 4
    assert origins <= {"store", "mirror"}


# -- a chapter --------------------------------------------------------------------------------


def test_chapter_renders_roles_folded_markers_and_the_side_panel(
        two_machines: Pool, client: TestClient) -> None:
    page = client.get(f"/chapter/{two_machines.marked}")
    assert page.status_code == 200
    html = page.text
    for role in ("user", "assistant", "reasoning", "tool-call", "artifact"):
        assert f'class="block {role}"' in html, role
    assert re.search(r'<details class="block tool-call" >', html)  # tool calls start folded
    assert '<mark class="redaction"' in html and "⟦redacted:credential sha256=0badc0de⟧" in html
    assert '<mark class="screened"' in html
    assert 'class="provenance"' in html and "small-1" in html
    assert 'class="ended"' in html and "pull/7" in html
    assert f'href="/chapter/{ARTIFACT_SHA}"' in html
    assert 'class="line hit"' not in html


def test_chapter_line_highlight_and_neighbours(two_machines: Pool, client: TestClient) -> None:
    listing = client.get("/", headers=JSON).json()
    session = next(s for m in listing["machines"] if m["harnessId"] == "box-a"
                   for d in m["days"] for s in d["sessions"] if s["chapterCount"] == 2)
    first, second = (c["path"] for c in session["chapters"])
    text = (two_machines.a.store / first).read_text()
    number = next(n for n, line in enumerate(text.splitlines(), 1)
                  if "raise RetryExhausted" in line)
    page = client.get(f"/chapter/{first}?line={number}")
    assert page.status_code == 200
    hit = re.search(rf'<span class="line hit" id="L{number}" data-line="{number}">([^<]*)<',
                    page.text)
    assert hit is not None and "raise RetryExhausted" in hit.group(1)
    assert f'data-highlight="{number}"' in page.text
    assert f'rel="next" class="next" href="/chapter/{second}"' in page.text
    back = client.get(f"/chapter/{second}")
    assert f'rel="prev" class="prev" href="/chapter/{first}"' in back.text
    data = client.get(f"/chapter/{first}", headers=JSON).json()
    assert data["text"] == text and data["next"] == second and data["previous"] is None
    assert data["path"] == f".dsh-chapters/{first}" and data["kind"] == "chapter"
    assert client.get(f"/chapter/{first}?line=x").status_code == 400


def test_artifact_opens_by_sha_as_json_for_the_inline_view(
        two_machines: Pool, client: TestClient) -> None:
    data = client.get(f"/chapter/{ARTIFACT_SHA}", headers=JSON).json()
    assert data["kind"] == "artifact" and data["lines"] == 40
    assert data["text"].startswith("artifact line 1: the retry budget")
    page = client.get(f"/chapter/artifacts/{ARTIFACT_SHA[:2]}/{ARTIFACT_SHA}.txt?line=7")
    assert page.status_code == 200 and 'class="line hit" id="L7"' in page.text


def test_mirror_chapter_opens_by_its_mirror_path(two_machines: Pool, client: TestClient) -> None:
    hits = client.get("/search?q=retry", headers=JSON).json()["matches"]
    mirror = next(m["path"] for m in hits if m["kind"] == "chapter")
    assert mirror.startswith(".dsh-knowledge/chapters/")
    data = client.get(f"/chapter/{mirror}", headers=JSON).json()
    assert data["root"] == "mirror" and data["path"] == mirror


@pytest.mark.parametrize("path", [
    "/chapter/..%2F..%2F..%2Fetc%2Fpasswd",
    "/chapter/%2Fetc%2Fpasswd",
    "/chapter/sess/..%2F..%2Fconfig.toml",
])
def test_path_traversal_is_refused(two_machines: Pool, client: TestClient, path: str) -> None:
    response = client.get(path)
    assert response.status_code == 403
    assert "leaves the archive" in response.text and "root:" not in response.text


def test_a_symlink_out_of_the_store_is_refused(
        two_machines: Pool, client: TestClient, tmp_path: Path) -> None:
    secret = tmp_path / "outside.txt"
    secret.write_text("outside the archive\n")
    link = two_machines.a.store / MARKED_SESSION / "chapters" / "002-link.md"
    os.symlink(secret, link)
    response = client.get(f"/chapter/{MARKED_SESSION}/chapters/002-link.md")
    assert response.status_code == 404 and "outside the archive" not in response.text
    assert "refused" in response.text


def test_unknown_chapter_is_404_with_a_next_step(two_machines: Pool, client: TestClient) -> None:
    response = client.get("/chapter/nope/chapters/009-x.md", headers=JSON)
    assert response.status_code == 404
    body = response.json()
    assert "not found" in body["error"] and "2 roots" in body["error"] and body["next"]


# -- search -----------------------------------------------------------------------------------


def test_search_is_the_cli_search(two_machines: Pool, client: TestClient) -> None:
    page = client.get("/search?q=retry")
    data = client.get("/search?q=retry", headers=JSON).json()
    assert page.status_code == 200 and f'class="shown">{data["shown"]}<' in page.text
    cli = two_machines.a.ok("search", "retry", "--max-tokens", str(data["budget"]["requested"]),
                            "--json").json()
    assert data["matches"] == cli["matches"]
    assert (data["shown"], data["total"], data["door"]) == (cli["shown"], cli["total"], "mirror")


def test_search_filters_kind_machine_dates_topic(two_machines: Pool, client: TestClient) -> None:
    rules = client.get("/search?q=retry&kind=rule", headers=JSON).json()
    assert [m["kind"] for m in rules["matches"]] == ["rule"] and rules["total"] == 1
    every = client.get("/search?q=retry", headers=JSON).json()
    b_only = client.get("/search?q=retry&machine=box-b", headers=JSON).json()
    assert 0 < b_only["total"] < every["total"]
    assert all("/box-b/" in m["path"] or m["kind"] == "chapter" for m in b_only["matches"])
    nothing = client.get("/search?q=retry&machine=box-z", headers=JSON).json()
    assert nothing["status"] == "no-match" and nothing["shown"] == 0
    later = client.get("/search?q=retry&since=2027-01-01", headers=JSON).json()
    assert later["status"] == "no-match"
    chapters = client.get("/search?q=retry&kind=chapter", headers=JSON).json()
    window = client.get("/search?q=retry&kind=chapter&since=2026-11-30&until=2026-11-30",
                        headers=JSON).json()
    assert 0 < window["total"] <= chapters["total"]
    assert data_filters(window) == ("chapter", "2026-11-30")
    topic = client.get("/search?topic=changelog", headers=JSON).json()
    assert topic["total"] == 2 and all("changelog" in m["topics"] for m in topic["matches"])
    cross = client.get("/search?q=retry&cross=1", headers=JSON).json()
    # One project in this pool: across projects finds what the project search finds.
    assert cross["filters"]["crossProject"] is True and cross["total"] == every["total"]


def data_filters(answer: dict[str, object]) -> tuple[object, object]:
    filters = answer["filters"]
    assert isinstance(filters, dict)
    return filters["kind"], filters["since"]


def test_search_renders_anchor_links_and_empty_states(
        two_machines: Pool, client: TestClient, client_for: ClientFor, tmp_path: Path) -> None:
    idle = client.get("/search")
    assert idle.status_code == 200 and 'id="answer"' not in idle.text
    missed = client.get("/search?q=zebra")
    assert missed.status_code == 200 and "no-match" in missed.text
    from tests.adapters.web.conftest import machine

    empty = client_for(machine(tmp_path / "fresh", "box-c")).get("/search?q=retry")
    assert empty.status_code == 200 and "status: empty" in empty.text


def test_a_hit_with_an_anchor_links_to_its_line(two_machines: Pool) -> None:
    from dsh_chapters_web.site import Site

    site = Site(_AnchoredViewer(), csrf=CSRF, hosts=allowed_hosts(8765))
    html = site.env.get_template("search.html").render(
        data=_AnchoredViewer().search_data, csrf=CSRF, path="/search")
    assert 'href="/chapter/.dsh-chapters/s/chapters/001-x.md?line=42#L42"' in html
    assert "line 42" in html and '<mark class="redaction"' in html


class _AnchoredViewer:
    """Only what the search template reads, with an `anchor` as the search service adds it."""

    search_data: ClassVar[dict[str, Any]] = {
        "query": "retry", "status": "ok", "shown": 1, "total": 1, "door": "store",
        "budget": {"requested": 4000, "used": 40, "remaining": 3960},
        "filters": {"kind": "", "topic": "", "machine": "", "since": "", "until": "",
                    "crossProject": False},
        "matches": [{"score": 4.0, "date": "2026-11-30", "kind": "chapter", "title": "x",
                     "path": ".dsh-chapters/s/chapters/001-x.md", "topics": ["retry"],
                     "anchor": {"line": 42,
                                "text": "retry with ⟦redacted:credential sha256=0badc0de⟧"}}],
    }

    def secrets(self) -> tuple[str, ...]:
        return ()


def test_bad_search_input_is_400(two_machines: Pool, client: TestClient) -> None:
    response = client.get("/search?q=retry&since=yesterday", headers=JSON)
    assert response.status_code == 400
    assert "'yesterday' is not a date" in response.json()["error"]
    assert "since=2026-11-30" in response.json()["next"]
    assert client.get("/search?q=retry&until=2026-13-40").status_code == 400


# -- rules ------------------------------------------------------------------------------------


def test_rules_page_shows_text_author_machine_provenance_and_budget(
        two_machines: Pool, client: TestClient) -> None:
    page = client.get("/rules")
    assert page.status_code == 200
    assert 'data-rule="box-b/001"' in page.text and "author machine <b>box-b</b>" in page.text
    assert "Run the retry tests with -x before a push." in page.text
    assert 'class="core-budget">1200<' in page.text
    data = client.get("/rules", headers=JSON).json()
    assert data["rules"][0]["provenance"].startswith("user@box-b")
    assert data["budget"] == {"count": 0, "tokens": 0, "budget": 1200, "refused": False,
                              "overBy": 0, "sizes": []}


def test_approve_without_csrf_is_refused_and_writes_nothing(
        two_machines: Pool, client: TestClient) -> None:
    for body in ({"id": "box-b/001"}, {"id": "box-b/001", "csrf": "wrong"}):
        response = client.post("/rules/approve", data=body)
        assert response.status_code == 403 and "CSRF" in response.text
    assert not _edits(two_machines).exists()
    notice = two_machines.a.ok("notice", "--json").json()
    assert notice["coreRules"]["count"] == 0


def test_approve_and_revoke_write_the_cli_facts(two_machines: Pool, client: TestClient) -> None:
    a = two_machines.a
    before = a.ok("notice", "--json").json()
    response = client.post("/rules/approve", data={"id": "box-b/001", "csrf": CSRF})
    assert response.status_code == 303
    assert response.headers["location"].startswith("/rules?done=approve&id=box-b%2F001")
    page = client.get(response.headers["location"])
    assert "approved box-b/001: proposed → core on box-a" in page.text
    after = a.ok("notice", "--json").json()
    assert before["coreRules"]["count"] == 0 and after["coreRules"]["count"] == 1
    assert "Run the retry tests with -x before a push." in after["notice"]
    facts = [json.loads(line) for line in _edits(two_machines).read_text().splitlines()]
    assert [(f["type"], f["rule"], f["status"]) for f in facts] == [
        ("rule-status", "box-b/001", "core")]
    again = client.post("/rules/approve", data={"id": "box-b/001"},
                        headers={**JSON, "X-CSRF-Token": CSRF}).json()
    assert again["changed"] is False and again["after"] == "core"
    revoked = client.post("/rules/revoke", json={"id": "box-b/001", "csrf": CSRF},
                          headers=JSON).json()
    assert (revoked["before"], revoked["after"], revoked["changed"]) == ("core", "revoked", True)
    assert a.ok("notice", "--json").json()["coreRules"]["count"] == 0
    assert a.ok("rule", "list", "--all", "--json").json()["counts"]["revoked"] == 1


def test_unknown_rule_is_refused_with_the_nearest_ids(
        two_machines: Pool, client: TestClient) -> None:
    response = client.post("/rules/approve", data={"id": "box-b/009", "csrf": CSRF},
                           headers=JSON)
    assert response.status_code == 409
    assert "among 1 rules" in response.json()["error"] and "box-b/001" in response.json()["error"]
    empty = client.post("/rules/approve", data={"id": " ", "csrf": CSRF}, headers=JSON)
    assert empty.status_code == 400


def test_budget_overflow_is_shown_with_numbers(two_machines: Pool, client_for: ClientFor) -> None:
    a = two_machines.a
    a.set_config("coreRulesBudgetTokens = 5")
    client = client_for(a)
    data = client.post("/rules/approve", data={"id": "box-b/001", "csrf": CSRF},
                       headers=JSON).json()
    budget = data["budget"]
    assert budget["refused"] is True and budget["budget"] == 5 and budget["tokens"] > 5
    assert budget["overBy"] == budget["tokens"] - 5
    page = client.get("/rules").text
    assert f"refused: core rules need {budget['tokens']} tokens, the budget is 5" in page
    assert a.ok("notice", "--json").json()["refused"] is True


def test_a_write_waits_for_the_writer_lock(two_machines: Pool, client_for: ClientFor) -> None:
    a = two_machines.a
    a.set_config("lockTimeoutMs = 200")
    client = client_for(a)
    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        with a.app().lock.hold(5):
            held.set()
            release.wait(10)

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert held.wait(5)
        response = client.post("/rules/approve", data={"id": "box-b/001", "csrf": CSRF},
                               headers=JSON)
        assert response.status_code == 409 and "writer lock" in response.json()["error"]
        assert not _edits(two_machines).exists()
    finally:
        release.set()
        holder.join()
    ok = client.post("/rules/approve", data={"id": "box-b/001", "csrf": CSRF}, headers=JSON)
    assert ok.status_code == 200 and ok.json()["changed"] is True


# -- topics -----------------------------------------------------------------------------------


def test_topics_page_and_merge(two_machines: Pool, client: TestClient) -> None:
    page = client.get("/topics")
    assert page.status_code == 200 and "changelog" in page.text
    data = client.get("/topics", headers=JSON).json()
    assert {"topic": "retry", "documents": 2} in data["vocabulary"]
    assert data["vocabApply"] is False and data["door"] == "mirror"
    refused = client.post("/topics/merge", data={"from": "pypi", "to": "publish"})
    assert refused.status_code == 403 and not _edits(two_machines).exists()
    merged = client.post("/topics/merge", data={"from": "pypi", "to": "publish", "csrf": CSRF})
    assert merged.status_code == 303
    assert merged.headers["location"] == "/topics?merged=pypi&to=publish"
    fact = json.loads(_edits(two_machines).read_text().splitlines()[-1])
    assert (fact["type"], fact["from"], fact["to"], fact["author"]) == (
        "topic-alias", "pypi", "publish", "user")
    after = client.get("/topics", headers=JSON).json()  # the mirror door follows on sync
    assert {"from": "pypi", "to": "publish"} in after["pendingAliases"]
    assert "pypi → publish" in client.get("/topics").text
    two_machines.a.ok("sync")
    synced = client.get("/topics", headers=JSON).json()
    assert {"from": "pypi", "to": "publish"} in synced["aliases"]
    assert synced["pendingAliases"] == []
    assert "pypi" not in {v["topic"] for v in synced["vocabulary"]}
    same = client.post("/topics/merge", data={"from": "x", "to": "x", "csrf": CSRF}, headers=JSON)
    assert same.status_code == 400 and "same topic" in same.json()["error"]


def test_topics_show_shadow_candidates_with_signals(
        two_machines: Pool, client_for: ClientFor) -> None:
    a = two_machines.a
    for n, topics in enumerate((["auth", "authentication"], ["auth", "authentication"],
                                ["auth", "authentication"]), start=1):
        path = a.store / "c0ffee00-0000-4000-8000-000000000001" / "chapters" / f"00{n}-a.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f'---\nkind: "chapter"\ntitle: "auth {n}"\ntopics: {json.dumps(topics)}\n'
                        f'harnessId: "box-a"\n---\n## Turn\n\nbody {n}\n', encoding="utf-8")
    import shutil

    shutil.rmtree(a.mirror)  # the store door answers, so the new chapters are counted
    data = client_for(a).get("/topics", headers=JSON).json()
    assert data["door"] == "store"
    pairs = {(c["from"], c["to"]): c for c in data["candidates"]}
    assert ("auth", "authentication") in pairs or ("authentication", "auth") in pairs
    candidate = next(iter(pairs.values()))
    assert candidate["coOccurrences"] >= 3 and "reason" in candidate
    assert not _edits(two_machines).exists()  # shadow: showing them writes nothing


# -- pool -------------------------------------------------------------------------------------


def test_pool_page_and_sync_now(two_machines: Pool, client: TestClient) -> None:
    page = client.get("/pool")
    assert page.status_code == 200 and "widgets.git (git)" in page.text
    data = client.get("/pool", headers=JSON).json()
    assert data["provider"] == "git" and data["lastSync"]["ok"] is True
    assert data["pending"] >= 1 and data["localOnly"] is False
    assert client.post("/pool/sync", data={}).status_code == 403
    synced = client.post("/pool/sync", data={"csrf": CSRF})
    assert synced.status_code == 200 and 'class="sync-result ok"' in synced.text
    after = client.get("/pool", headers=JSON).json()
    assert after["pending"] == 0 and after["lastSync"]["at"]


def test_sync_degrades_to_local_only_and_says_why(
        two_machines: Pool, client: TestClient) -> None:
    import shutil

    shutil.move(two_machines.pool, two_machines.pool.with_name("moved.git"))
    report = client.post("/pool/sync", data={"csrf": CSRF}, headers=JSON).json()
    assert report["ok"] is False and report["failureCode"] and report["next"]
    page = client.get("/pool").text
    assert 'class="local-only"' in page


def test_pool_without_a_link_is_local_only(tmp_path: Path, client_for: ClientFor) -> None:
    from tests.adapters.web.conftest import machine

    lone = machine(tmp_path, "box-c")
    client = client_for(lone)
    assert "none (local-only)" in client.get("/pool").text
    report = client.post("/pool/sync", data={"csrf": CSRF}, headers=JSON).json()
    assert report["ok"] is False and report["error"]


# -- safety -----------------------------------------------------------------------------------


def test_a_foreign_host_is_refused_on_every_route(two_machines: Pool, client: TestClient) -> None:
    for path in ("/", "/search?q=retry", "/rules", "/topics", "/pool",
                 f"/chapter/{two_machines.marked}"):
        response = client.get(path, headers={"Host": "evil.example:8765"})
        assert response.status_code == 421, path
        assert "evil.example" in response.text and "2 allowed" in response.text
    response = client.post("/rules/approve", data={"id": "box-b/001", "csrf": CSRF},
                           headers={"Host": "attacker.test"})
    assert response.status_code == 421 and not _edits(two_machines).exists()
    assert client.get("/", headers={"Host": "localhost:8765"}).status_code == 200


def test_a_cross_site_post_is_refused_even_with_the_token(
        two_machines: Pool, client: TestClient) -> None:
    response = client.post("/rules/approve", data={"id": "box-b/001", "csrf": CSRF},
                           headers={"Origin": "https://evil.example"})
    assert response.status_code == 403 and not _edits(two_machines).exists()
    same = client.post("/rules/approve", data={"id": "box-b/001", "csrf": CSRF},
                       headers={"Origin": BASE})
    assert same.status_code == 303


def test_the_stored_token_is_never_rendered(two_machines: Pool, client: TestClient) -> None:
    pages = ["/", f"/chapter/{two_machines.marked}", "/search?q=retry", "/rules", "/topics",
             "/pool"]
    for path in pages:
        for headers in ({}, JSON):
            body = client.get(path, headers=headers).text
            assert TOKEN not in body, path
    chapter = client.get(f"/chapter/{two_machines.marked}").text
    assert "The old token was ⟦redacted:credential⟧." in chapter


def test_each_process_has_its_own_csrf_token(two_machines: Pool) -> None:
    from dsh_chapters.services.web_viewer import AppViewer
    from dsh_chapters_web.server import make_app

    one = make_app(AppViewer(two_machines.a.app()), 8765)
    two = make_app(AppViewer(two_machines.a.app()), 8765)
    tokens = set()
    for app in (one, two):
        with TestClient(app, base_url=BASE) as c:
            html = c.get("/rules").text
            tokens.add(re.search(r'name="csrf" value="([^"]+)"', html).group(1))  # type: ignore[union-attr]
    assert len(tokens) == 2 and CSRF not in tokens
    assert csrf_matches("a", "a") and not csrf_matches("a", "") and not csrf_matches("a", "b")


def test_pages_forbid_inline_script_and_framing(two_machines: Pool, client: TestClient) -> None:
    headers = client.get("/").headers
    assert "script-src 'self'" in headers["content-security-policy"]
    assert "frame-ancestors 'none'" in headers["content-security-policy"]
    assert headers["server-timing"].startswith("app;dur=")


def test_serve_parser_is_registered_in_the_cli() -> None:
    import argparse

    from dsh_chapters.cli import COMMANDS, build_parser

    assert "serve" in {entry.name for entry in COMMANDS}
    args = build_parser().parse_args(["serve", "--port", "0", "--open"])
    assert args.port == 0 and args.open is True
    subs = argparse.ArgumentParser().add_subparsers()
    register_serve(subs, argparse.ArgumentParser(add_help=False))
