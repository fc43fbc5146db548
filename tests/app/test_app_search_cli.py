"""`chapters search | index | topic merge | artifact` through the real CLI, real files."""

from __future__ import annotations

import hashlib
import io
import json
import os
from pathlib import Path

import pytest
from dsh_chapters.cli import main
from dsh_chapters.commands.invocation import Invocation
from dsh_chapters.commands.search import PROGRESS_MIN_FILES, progress_bar
from dsh_chapters.present import progress_line
from dsh_chapters_core.frontmatter import dump_frontmatter
from dsh_chapters_fs.lock import read_generation

Capture = pytest.CaptureFixture[str]
DEMO = (Path(__file__).parents[2]
        / "packages/dsh-chapters/src/dsh_chapters/samples/demo-session.jsonl")


@pytest.fixture
def workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "w"
    root.mkdir()
    monkeypatch.setenv("DSH_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("DSH_CHAPTERS_HARNESS_ID", "hostA")
    return root


def run(ws: Path, capsys: Capture, *argv: str) -> tuple[int, str, str]:
    code = main(["-C", str(ws), *argv])
    out = capsys.readouterr()
    return code, out.out, out.err


def as_json(ws: Path, capsys: Capture, *argv: str) -> dict:
    code, out, err = run(ws, capsys, *argv, "--json")
    assert code == 0, err
    return json.loads(out)


def archived(ws: Path, capsys: Capture) -> Path:
    code, _, err = run(ws, capsys, "archive", str(DEMO))
    assert code == 0, err
    return ws


def corpus(ws: Path, capsys: Capture) -> Path:
    """Three chapters with known topics, written as the archive writes them."""
    key = project_key(ws, capsys)
    for session, number, title, topics, date in (
        ("s1", 1, "Retry loop gives up after one attempt", ["retry", "backoff"], "2026-11-01"),
        ("s1", 2, "Backoff jitter for the http client", ["backoff", "http-client"],
         "2026-11-02"),
        ("s2", 1, "Release 1.4.2 changelog", ["release", "changelog"], "2026-11-03"),
    ):
        write_doc(ws / f".dsh-chapters/{session}/chapters/{number:03d}-x.md", title=title,
                  summary=title.lower(), topics=topics, projectKey=key, sessionId=session,
                  date=f"{date}T10:00:00Z")
    return ws


def project_key(ws: Path, capsys: Capture) -> str:
    return as_json(ws, capsys, "status")["store"]["projectKey"]


def write_doc(path: Path, **fields: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(dump_frontmatter({"kind": "chapter", **fields}) + "## user\n\nbody\n",
                    encoding="utf-8")


def test_search_answers_from_the_store_with_the_json_contract(workspace: Path,
                                                              capsys: Capture) -> None:
    ws = archived(workspace, capsys)  # the real archive of the demo session
    data = as_json(ws, capsys, "search", "retry", "backoff")
    assert list(data) == ["matches", "shown", "total", "budget", "door", "status"]
    assert data["door"] == "store" and data["status"] == "ok" and data["total"] >= 1
    first = data["matches"][0]
    # The issue on full-text search added `anchor` {line, text}: where the body matched.
    assert set(first) == {"score", "date", "kind", "title", "path", "topics", "anchor"}
    assert first["kind"] == "chapter" and "backoff" in first["topics"]
    assert (ws / first["path"]).is_file()  # every hit is a path `read` opens from the workspace
    assert data["budget"]["requested"] == 400
    assert data["budget"]["used"] + data["budget"]["remaining"] == 400
    code, out, _ = run(ws, capsys, "search", "retry", "backoff", "--wide")
    assert code == 0 and out.splitlines()[1].startswith(f"{first['score']:.2f} | ")
    assert f"| {first['path']} (topics: " in out
    # Without --wide the same line folds to 100 columns, its path whole on one line.
    code, folded, _ = run(ws, capsys, "search", "retry", "backoff")
    assert code == 0 and all(len(line) <= 100 or " " not in line.strip()
                             for line in folded.splitlines())
    assert any(line.strip().startswith(first["path"]) for line in folded.splitlines())


def test_nothing_here_and_nothing_matched(workspace: Path, capsys: Capture) -> None:
    assert as_json(workspace, capsys, "search", "retry")["status"] == "empty"
    ws = corpus(workspace, capsys)
    missed = as_json(ws, capsys, "search", "kubernetes")
    assert (missed["status"], missed["total"], missed["matches"]) == ("no-match", 0, [])
    code, _, err = run(ws, capsys, "search")
    assert code == 2 and "nothing to search for" in err


def test_a_budget_too_small_for_one_line_refuses_with_numbers(workspace: Path,
                                                              capsys: Capture) -> None:
    ws = corpus(workspace, capsys)
    code, out, err = run(ws, capsys, "search", "backoff", "--max-tokens", "3")
    assert code == 1 and out == ""
    assert "budget is 3 tokens" in err and "--max-tokens" in err
    code, out, _ = run(ws, capsys, "search", "backoff", "--wide")  # the lines the budget counts
    first_line = out.splitlines()[1]
    need = (len(first_line) + 1 + 3) // 4  # charsPerToken 4, the newline counted
    assert f"needs {need} tokens" in run(ws, capsys, "search", "backoff", "--max-tokens",
                                         str(need - 1))[2]
    paged = as_json(ws, capsys, "search", "backoff", "--max-tokens", str(need))
    assert (paged["shown"], paged["total"], paged["budget"]["used"]) == (1, 2, need)


def test_index_rebuild_is_byte_identical_and_status_reports_it(workspace: Path,
                                                               capsys: Capture) -> None:
    ws = corpus(archived(workspace, capsys), capsys)
    report = as_json(ws, capsys, "index")["doors"][0]
    assert report["door"] == "store" and report["shards"] > 0
    index = ws / ".dsh-chapters/index"
    before = {p.name: p.read_bytes() for p in index.iterdir()}
    rebuilt = as_json(ws, capsys, "index", "--rebuild")["doors"][0]
    assert rebuilt["rebuilt"] is True
    assert {p.name: p.read_bytes() for p in index.iterdir()} == before
    status = as_json(ws, capsys, "status")
    assert status["search"]["store"]["shards"] == report["shards"]
    _, out, _ = run(ws, capsys, "status")
    words = " ".join(out.split())  # a line past 100 columns folds
    assert (f"search this machine's archive: {status['search']['store']['documents']} "
            f"documents in {report['shards']} topic shards" in words)
    assert "(suggested only)" in words


def test_topic_merge_appends_a_user_fact_and_search_follows(workspace: Path,
                                                            capsys: Capture) -> None:
    ws = corpus(workspace, capsys)
    data = as_json(ws, capsys, "topic", "merge", "backoff", "retry")
    assert data["path"] == ".dsh-chapters/edits/hostA/curation.jsonl"
    (line,) = (ws / data["path"]).read_text().splitlines()
    fact = json.loads(line)
    assert (fact["type"], fact["from"], fact["to"], fact["author"]) == (
        "topic-alias", "backoff", "retry", "user")
    assert not (ws / ".dsh-chapters/index/backoff.md").exists()
    topic = as_json(ws, capsys, "search", "--topic", "backoff")
    assert topic["total"] == 2 and all("backoff" not in m["topics"] for m in topic["matches"])
    assert all("retry" in m["topics"] for m in topic["matches"])


def test_the_mirror_answers_when_it_exists_and_stays_clean(workspace: Path,
                                                           capsys: Capture) -> None:
    ws = corpus(workspace, capsys)
    key = project_key(ws, capsys)
    write_doc(ws / f".dsh-knowledge/chapters/{key}/s9/001-pool.md", title="pool-only zeppelin",
              topics=["zeppelin"], projectKey=key, date="2026-10-01T00:00:00Z")
    write_doc(ws / ".dsh-knowledge/chapters/other-key/s8/001-foreign.md",
              title="foreign zeppelin", topics=["zeppelin"], projectKey="other-key")
    data = as_json(ws, capsys, "search", "zeppelin")
    assert data["door"] == "mirror" and data["total"] == 1
    assert data["matches"][0]["path"] == f".dsh-knowledge/chapters/{key}/s9/001-pool.md"
    assert as_json(ws, capsys, "search", "zeppelin", "--cross-project")["total"] == 2
    # What only this machine has is answered by the pool's door too, at its store path.
    retry = as_json(ws, capsys, "search", "retry")
    assert retry["door"] == "mirror" and retry["unpublished"] == 3
    assert all(m["path"].startswith(".dsh-chapters/") for m in retry["matches"])
    mirror_files = sorted(str(p.relative_to(ws / ".dsh-knowledge"))
                          for p in (ws / ".dsh-knowledge").rglob("*") if p.is_file())
    assert mirror_files == [f"chapters/{key}/s9/001-pool.md",
                            "chapters/other-key/s8/001-foreign.md"]  # search wrote nothing there


def test_artifact_reads_with_caps_toc_and_search(workspace: Path, capsys: Capture) -> None:
    ws = archived(workspace, capsys)  # a real chapter to read back
    text = "".join(f"line {n}\n" for n in range(1, 501))
    sha = hashlib.sha256(text.encode()).hexdigest()
    blob = ws / f".dsh-chapters/artifacts/{sha[:2]}/{sha}.txt"
    blob.parent.mkdir(parents=True)
    blob.write_text(text)
    page = as_json(ws, capsys, "artifact", sha)
    assert (page["root"], page["returned"], page["totalLines"], page["nextOffset"]) == (
        "store", 200, 500, 200)
    capped = as_json(ws, capsys, "artifact", sha, "read", "--offset", "50", "--limit", "1000")
    assert (capped["returned"], capped["capped"], capped["lines"][0]) == (400, True, "line 51")
    found = as_json(ws, capsys, "artifact", sha, "search", "line", "49")
    assert found["totalMatches"] == len([n for n in range(1, 501) if "49" in str(n)])
    assert found["matches"][0] == {"line": 49, "text": "line 49"}
    chapter = as_json(ws, capsys, "search", "retry")["matches"][0]["path"]
    toc = as_json(ws, capsys, "artifact", chapter, "toc")
    assert toc["entries"] and toc["entries"][0]["title"]
    code, out, _ = run(ws, capsys, "artifact", chapter, "read", "--limit", "3")
    assert code == 0 and "lines 1-3 of" in out and "next: --offset 3" in out


def test_artifact_refuses_escapes_and_names_both_roots_on_a_miss(workspace: Path,
                                                                 capsys: Capture) -> None:
    ws = archived(workspace, capsys)
    (ws / ".dsh-knowledge").mkdir()
    code, _, err = run(ws, capsys, "artifact", "f" * 64)
    assert code == 1 and "store (.dsh-chapters)" in err and "mirror (.dsh-knowledge)" in err
    for ref in ("../../etc/passwd", "/etc/passwd"):
        code, _, err = run(ws, capsys, "artifact", ref)
        assert code == 1 and "refused" in err
    secret = ws.parent / "secret.txt"
    secret.write_text("token")
    name = "ee" + "0" * 62  # an artifact's name: the read door's check passes, the link's not
    link = ws / f".dsh-chapters/artifacts/ee/{name}.txt"
    link.parent.mkdir(parents=True)
    os.symlink(secret, link)
    code, out, err = run(ws, capsys, "artifact", f".dsh-chapters/artifacts/ee/{name}.txt")
    assert code == 1 and "symlink" in err and "token" not in out + err
    code, _, err = run(ws, capsys, "artifact", "f" * 64, "dance")
    assert code == 2 and "unknown action" in err


def test_the_anchor_line_really_holds_the_snippet_and_show_opens_there(
        workspace: Path, capsys: Capture) -> None:
    ws = archived(workspace, capsys)
    data = as_json(ws, capsys, "search", "retry", "backoff")
    for match in data["matches"]:
        anchor = match["anchor"]
        lines = (ws / match["path"]).read_text(encoding="utf-8").splitlines()
        assert anchor["text"].strip("…") in lines[anchor["line"] - 1]
        assert len(anchor["text"]) <= 160
    first = data["matches"][0]
    code, out, err = run(ws, capsys, "search", "retry", "backoff")
    assert code == 0, err
    assert f"    L{first['anchor']['line']}: " in out
    code, out, _ = run(ws, capsys, "search", "retry", "backoff", "--no-snippets")
    assert "    L" not in out
    code, out, err = run(ws, capsys, "show", first["path"], "--line", str(first["anchor"]["line"]))
    assert code == 0, err
    assert first["anchor"]["text"].strip("…") in out.splitlines()[0]
    code, _, err = run(ws, capsys, "show", first["path"], "--line", "999999")
    assert code != 0 and "outside the chapter" in err


def test_a_word_only_in_a_chapter_body_is_found(workspace: Path, capsys: Capture) -> None:
    key = project_key(workspace, capsys)
    path = workspace / ".dsh-chapters/s9/chapters/001-x.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(dump_frontmatter({"kind": "chapter", "title": "Session work",
                                      "summary": "session work", "topics": ["work"],
                                      "projectKey": key, "sessionId": "s9",
                                      "date": "2026-11-05T10:00:00Z"})
                    + "## user\n\nplease look\n\nthen `alembic upgrade head` fixed the 401\n",
                    encoding="utf-8")
    data = as_json(workspace, capsys, "search", "alembic", "401")
    assert [m["path"] for m in data["matches"]] == [".dsh-chapters/s9/chapters/001-x.md"]
    anchor = data["matches"][0]["anchor"]
    lines = path.read_text(encoding="utf-8").splitlines()
    line = lines.index("then `alembic upgrade head` fixed the 401") + 1
    assert anchor == {"line": line, "text": lines[line - 1]}


def test_a_file_copied_in_by_hand_is_answered_after_chapters_index(
        workspace: Path, capsys: Capture) -> None:
    ws = corpus(workspace, capsys)
    code, _, err = run(ws, capsys, "search", "retry")
    # Files written by hand: the first search builds the index and says so, in plain words.
    assert code == 0 and err == "search: building the search index (3 chapters)\n"
    assert run(ws, capsys, "search", "retry")[2] == ""  # then nothing is built or said
    key = project_key(ws, capsys)
    write_doc(ws / ".dsh-chapters/s7/chapters/001-x.md", title="Zeppelin mooring checklist",
              summary="zeppelin", topics=["zeppelin"], projectKey=key, sessionId="s7",
              date="2026-11-04T10:00:00Z")
    code, _, err = run(ws, capsys, "index")
    assert code == 0, err
    data = as_json(ws, capsys, "search", "zeppelin")
    assert [m["path"] for m in data["matches"]] == [".dsh-chapters/s7/chapters/001-x.md"]
    code, _, err = run(ws, capsys, "search", "zeppelin")
    assert "rebuilt" not in err  # current: no rebuild, no message


def generations(ws: Path) -> tuple[str, str]:
    """(the store's writer generation, the store door index's recorded one)."""
    store = ws / ".dsh-chapters"
    return (read_generation(store), (store / "cache/index-store.generation").read_text().strip())


def test_an_archive_reads_what_it_wrote_into_the_index_and_the_next_query_builds_nothing(
        workspace: Path, capsys: Capture) -> None:
    ws = corpus(workspace, capsys)
    code, _, err = run(ws, capsys, "index")
    assert code == 0, err
    writer, indexed = generations(ws)
    assert writer == indexed  # `chapters index` held the lock, walked, and recorded it
    before = set((ws / ".dsh-chapters").glob("*/chapters/*.md"))
    archived(ws, capsys)
    notes = ws / ".dsh-chapters/cache/index-store.written.jsonl"
    after_writer, indexed = generations(ws)
    # The archive's section noted what it wrote and read it into the index as it ended:
    # the index is current at the archive's own number, and the note is consumed.
    assert after_writer == indexed and int(after_writer) > int(writer)
    assert not notes.exists()
    noted_chapters = {p.relative_to(ws / ".dsh-chapters").as_posix()
                      for p in set((ws / ".dsh-chapters").glob("*/chapters/*.md")) - before}
    assert noted_chapters
    code, _, err = run(ws, capsys, "search", "retry", "--json")
    assert code == 0 and err == ""
    assert generations(ws) == (after_writer, after_writer)  # the query built nothing
    tokens = json.loads((ws / ".dsh-chapters/cache/index-store.tokens.json").read_text())
    journal = ws / ".dsh-chapters/cache/index-store.tokens.journal.jsonl"
    for line in journal.read_text().splitlines() if journal.exists() else ():
        tokens.update(json.loads(line))  # what the updates since the tokens file changed
    assert noted_chapters <= set(tokens)


def test_every_writer_section_indexes_what_it_wrote_and_the_query_walks_nothing(
        workspace: Path, capsys: Capture) -> None:
    """A rule written, then approved: each writer section reads its files into the index as it
    ends, so the next query builds nothing and walks nothing. A chapter copied in by hand at the
    same time is therefore not seen until `chapters index`: proof that nothing was walked."""
    ws = corpus(workspace, capsys)
    assert run(ws, capsys, "index")[0] == 0
    key = project_key(ws, capsys)
    hand = ws / ".dsh-chapters/s9/chapters/001-x.md"
    write_doc(hand, title="Quokka by hand", summary="quokka", topics=["quokka"],
              projectKey=key, sessionId="s9", date="2026-11-06T10:00:00Z")
    assert run(ws, capsys, "rule", "add", "testing", "Feed the quokka fixtures first.")[0] == 0
    assert run(ws, capsys, "rule", "approve", "hostA/001")[0] == 0
    notes = ws / ".dsh-chapters/cache/index-store.written.jsonl"
    writer, indexed = generations(ws)
    # Each section read what it wrote into the index as it ended: current at its number.
    assert writer == indexed and not notes.exists()
    found = [m["path"] for m in as_json(ws, capsys, "search", "quokka")["matches"]]
    assert any(p.startswith(".dsh-chapters/rules/hostA/001-") for p in found)
    assert ".dsh-chapters/s9/chapters/001-x.md" not in found  # nothing was walked
    assert generations(ws) == (writer, writer) and not notes.exists()
    assert run(ws, capsys, "index")[0] == 0
    found = [m["path"] for m in as_json(ws, capsys, "search", "quokka")["matches"]]
    assert ".dsh-chapters/s9/chapters/001-x.md" in found


def test_a_query_trusts_the_generation_and_chapters_index_walks(
        workspace: Path, capsys: Capture) -> None:
    """The freshness rule: equal generations mean no writer ran, so the query walks nothing;
    a file copied in by hand, behind every writer, is found by `chapters index`."""
    ws = corpus(workspace, capsys)
    assert run(ws, capsys, "index")[0] == 0
    key = project_key(ws, capsys)
    write_doc(ws / ".dsh-chapters/s8/chapters/001-x.md", title="Quokka feeding rota",
              summary="quokka", topics=["quokka"], projectKey=key, sessionId="s8",
              date="2026-11-06T10:00:00Z")
    assert as_json(ws, capsys, "search", "quokka")["status"] == "no-match"
    assert run(ws, capsys, "index")[0] == 0
    data = as_json(ws, capsys, "search", "quokka")
    assert [m["path"] for m in data["matches"]] == [".dsh-chapters/s8/chapters/001-x.md"]
    # A damaged generation is "unknown": the query walks, as before the rule.
    with (ws / ".dsh-chapters/logs/chapters.log").open("a") as log:
        log.write('{"event":"writer","generation":"damaged"}\n')
    write_doc(ws / ".dsh-chapters/s8/chapters/002-x.md", title="Quokka vet visit",
              summary="quokka vet", topics=["quokka"], projectKey=key, sessionId="s8",
              date="2026-11-07T10:00:00Z")
    assert as_json(ws, capsys, "search", "quokka")["total"] == 2


def test_the_rebuild_bar_is_drawn_on_a_terminal_only(workspace: Path) -> None:
    """`chapters search` draws its progress bar on a terminal's stderr, never into a pipe."""
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    pipe = io.StringIO()
    quiet = progress_bar(Invocation(cwd=workspace, json=False, env={}, stderr=pipe))
    assert quiet is not None
    quiet("read", 600, 1200)
    assert pipe.getvalue() == ""  # no bar in a pipe; a first build is said once, in words
    quiet("build", 0, 2204)
    quiet("build", 1000, 2204)
    assert pipe.getvalue() == "search: building the search index (2,204 chapters)\n"
    screen = Terminal()
    draw = progress_bar(Invocation(cwd=workspace, json=False, env={}, stderr=screen))
    assert draw is not None
    draw("read", 5, PROGRESS_MIN_FILES - 1)  # too small to be worth a bar
    assert screen.getvalue() == ""
    total = PROGRESS_MIN_FILES * 2
    draw("read", total // 2, total)
    draw("read", total, total)
    assert screen.getvalue() == (progress_line("read", total // 2, total)
                                 + progress_line("read", total, total) + "\n")
    assert progress_line("read", total // 2, total).endswith(f"{total // 2}/{total} (50%)")


def test_an_index_that_cannot_be_written_never_fails_the_archive(
        workspace: Path, capsys: Capture, monkeypatch: pytest.MonkeyPatch) -> None:
    """The archive stands when its index update fails: the section's note stays, and the next
    query reads exactly what it names."""
    from dsh_chapters_core.search.service import SearchService

    ws = corpus(workspace, capsys)
    assert run(ws, capsys, "index")[0] == 0

    def broken(self: SearchService) -> None:
        raise OSError("disk full")

    with monkeypatch.context() as patched:
        patched.setattr(SearchService, "bring_all", broken)
        archived(ws, capsys)
    writer, indexed = generations(ws)
    assert int(writer) > int(indexed)
    notes = ws / ".dsh-chapters/cache/index-store.written.jsonl"
    assert notes.exists()
    data = as_json(ws, capsys, "search", "exponential", "backoff")
    assert data["matches"] and generations(ws) == (writer, writer) and not notes.exists()


def test_a_very_long_question_is_cut_and_answered_at_once(workspace: Path,
                                                          capsys: Capture) -> None:
    """A pasted log as a question (30,000 characters, thousands of distinct words) is cut to
    what a search reads, answered within two seconds, and the answer says what was cut."""
    import time

    ws = archived(workspace, capsys)
    words = " ".join(f"w{n}Token{n % 7}_{n}" for n in range(3000))
    question = ("why does the retry loop give up " + words)[:30_000]
    started = time.monotonic()
    data = as_json(ws, capsys, "search", question)
    assert time.monotonic() - started < 2.0
    cut = data["queryCut"]
    assert cut["chars"] == len(question) and cut["keptChars"] <= 2000
    assert cut["keptWords"] <= 64 < cut["words"]
    assert data["matches"]  # the first words still find the chapter
    code, out, _ = run(ws, capsys, "search", question)
    assert code == 0 and "the question was cut" in out


def test_explain_takes_each_score_apart(workspace: Path, capsys: Capture) -> None:
    ws = archived(workspace, capsys)
    data = as_json(ws, capsys, "search", "retry", "backoff", "--explain")
    for match in data["matches"]:
        parts = match["explain"]
        total = sum(parts[k] for k in ("topics", "title", "summary", "category", "coreRule",
                                       "body"))
        assert abs(total - match["score"]) < 1e-3
        if parts["body"]:
            assert parts["passage"]["line"] >= 1 and parts["passage"]["lines"] >= 1
    code, out, _ = run(ws, capsys, "search", "retry", "backoff", "--explain")
    assert code == 0 and "    why: " in out and " = " in out
