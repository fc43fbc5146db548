"""The app's `AppViewer` on its own: the background index pass, the cached core-rule set, the
serve command's port checks. The pages over it are in test_web_routes.py."""

from __future__ import annotations

import threading
import time

import pytest
from dsh_chapters.services.web_viewer import AppViewer
from dsh_chapters_core.ports.viewer import SearchFilters

from tests.adapters.web.conftest import Pool

pytestmark = pytest.mark.slow


def test_the_background_pass_keeps_search_current(two_machines: Pool) -> None:
    a = two_machines.a
    viewer = AppViewer(a.app(), refresh_interval_s=0.05)
    viewer.start()
    try:
        assert viewer.search("zeppelin", SearchFilters())["status"] == "no-match"
        import shutil

        shutil.rmtree(a.mirror)  # answer from the store door, where the new chapter lands
        path = a.store / "feed0000-0000-4000-8000-000000000001" / "chapters" / "001-z.md"
        path.parent.mkdir(parents=True)
        path.write_text('---\nkind: "chapter"\ntitle: "The zeppelin hangar"\n'
                        f'projectKey: "{a.app().identity.project_key}"\n---\nbody\n')
        deadline = time.monotonic() + 10
        found = viewer.search("zeppelin", SearchFilters())
        while found["total"] == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
            found = viewer.search("zeppelin", SearchFilters())
        assert found["total"] == 1 and found["door"] == "store"
        assert viewer.last_refresh_ms > 0
    finally:
        viewer.close()
    assert not any(t.name == "viewer-index" for t in threading.enumerate())


def test_the_viewer_holds_no_read_transaction_between_questions(two_machines: Pool) -> None:
    """The viewer keeps its search service open; a question, narrowed by the viewer's own
    filters or not, lets go of the index's read transaction when it is answered (a writer's
    log could not be checkpointed past one held while the page sits idle)."""
    viewer = AppViewer(two_machines.a.app())
    try:
        for filters in (SearchFilters(), SearchFilters(kind="chapter", since="2020-01-01")):
            viewer.search("zeppelin retry", filters)
            service = viewer._current_search()
            caches = [d.cache for d in service.doors if d.cache is not None]
            assert caches and all(c._db is None or not c._db.in_transaction for c in caches)
    finally:
        viewer.close()


def test_the_core_rule_set_follows_an_approval(two_machines: Pool) -> None:
    viewer = AppViewer(two_machines.a.app())
    cache = viewer._core_rules
    assert cache() == frozenset()
    first_key = cache.key
    viewer.set_rule_status("box-b/001", approve=True)
    assert cache() == frozenset({"box-b/001"}) and cache.key != first_key
    hits = viewer.search("retry", SearchFilters(kind="rule"))["matches"]
    cli = two_machines.a.ok("search", "retry", "--max-tokens", "4000", "--json").json()
    rule_cli = next(m for m in cli["matches"] if m["kind"] == "rule")
    assert hits[0]["score"] == rule_cli["score"]  # the same core bonus as `chapters search`
    viewer.set_rule_status("box-b/001", approve=False)
    assert cache() == frozenset()


def test_serve_refuses_a_port_out_of_range(two_machines: Pool) -> None:
    result = two_machines.a.run("serve", "--port", "70000")
    assert result.code == 2 and "--port 70000 is outside 0–65535" in result.err


def test_serve_refuses_a_port_in_use(two_machines: Pool) -> None:
    from dsh_chapters_web.server import bind_loopback

    taken = bind_loopback(0)
    try:
        port = taken.getsockname()[1]
        result = two_machines.a.run("serve", "--port", str(port))
        assert result.code == 1 and f"cannot listen on 127.0.0.1:{port}" in result.err
        assert "--port 0" in result.err
    finally:
        taken.close()


def test_chapters_serve_prints_its_loopback_url_and_serves(two_machines: Pool) -> None:
    import os
    import re
    import signal
    import subprocess
    import sys
    import urllib.request

    a = two_machines.a
    env = {**os.environ, **a.env}
    proc = subprocess.Popen([sys.executable, "-m", "dsh_chapters", "-C", str(a.workspace),
                             "serve", "--port", "0"], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        match = re.match(r"chapters viewer on (http://127\.0\.0\.1:(\d+)/) \(127\.0\.0\.1 only",
                         line)
        assert match, line
        with urllib.request.urlopen(match.group(1) + "rules", timeout=30) as page:
            assert page.status == 200 and b'data-rule="box-b/001"' in page.read()
    finally:
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err


def test_sessions_read_the_archive_s_flow_frontmatter_and_yaml_hand_edits(
        two_machines: Pool) -> None:
    from dsh_chapters.services.web_viewer import flow_frontmatter

    a = two_machines.a
    hand = a.store / "ed170000-0000-4000-8000-000000000001" / "chapters" / "001-hand.md"
    hand.parent.mkdir(parents=True)
    hand.write_text("---\nkind: chapter\ntitle: Edited by hand\nharnessId: box-a\n"
                    "date: '2026-11-28T08:00:00Z'\ntopics:\n  - hand\n  - edit\n"
                    "messages:\n  user: 1\n---\nbody\n", encoding="utf-8")
    assert flow_frontmatter(hand.read_text()) is None  # block style: the YAML reader reads it
    machine_written = next(a.store.glob("*/chapters/001-the-retry-*.md")).read_text()
    fields = flow_frontmatter(machine_written)
    assert fields is not None and fields["messages"] == {"assistant": 4, "tool": 3, "user": 2}
    viewer = AppViewer(a.app())
    data = viewer.sessions()
    rows = {c["title"]: c for m in data["machines"] for d in m["days"] for s in d["sessions"]
            for c in s["chapters"]}
    assert rows["Edited by hand"]["topics"] == ["hand", "edit"]
    assert rows["Edited by hand"]["messages"] == {"user": 1}
    hand.write_text(hand.read_text().replace("Edited by hand", "Edited twice"), encoding="utf-8")
    titles = {c["title"] for m in viewer.sessions()["machines"] for d in m["days"]
              for s in d["sessions"] for c in s["chapters"]}
    assert "Edited twice" in titles and "Edited by hand" not in titles
