"""`chapters rule …` and `chapters notice` through the real CLI entry point, real store."""

from __future__ import annotations

import hashlib
import json
from importlib.resources import files
from pathlib import Path

import pytest
from dsh_chapters.cli import main
from dsh_chapters_core.frontmatter import dump_frontmatter

Capture = pytest.CaptureFixture[str]
SESSION = "sess-1"


@pytest.fixture
def workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "w"
    root.mkdir()
    monkeypatch.setenv("DSH_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("DSH_CHAPTERS_HARNESS_ID", "hostA")
    return root


def _run(ws: Path, capsys: Capture, *argv: str) -> tuple[int, str, str]:
    code = main(["-C", str(ws), *argv])
    out = capsys.readouterr()
    return code, out.out, out.err


def _json(ws: Path, capsys: Capture, *argv: str) -> dict[str, object]:
    code, out, err = _run(ws, capsys, *argv, "--json")
    assert code == 0, err
    data = json.loads(out)
    assert isinstance(data, dict)
    return data


def _chapter(ws: Path, number: int, title: str, *, tamper: bool = False,
             session: str = SESSION) -> Path:
    body = f"## user\n\nabout {title}\n"
    text = dump_frontmatter({
        "kind": "chapter", "title": title, "summary": f"{title} in short",
        "topics": ["testing"], "sessionId": session, "messages": {"user": 2, "assistant": 3},
        "sha256": hashlib.sha256(body.encode()).hexdigest(),
    }) + body + ("tampered\n" if tamper else "")
    path = ws / ".dsh-chapters" / session / "chapters" / f"{number:03d}-{title.lower()}.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def test_add_list_approve_revoke_and_the_notice(workspace: Path, capsys: Capture) -> None:
    code, out, _ = _run(workspace, capsys, "rule", "add", "testing", "Run the suite with -x.")
    assert code == 0
    assert "proposed hostA/001 [testing]" in out and "chapters rule approve hostA/001" in out
    rule_file = next((workspace / ".dsh-chapters" / "rules" / "hostA").glob("001-*.md"))
    before = rule_file.read_bytes()

    listed = _json(workspace, capsys, "rule", "list")
    assert [(r["id"], r["status"]) for r in listed["rules"]] == [("hostA/001", "proposed")]
    assert "Run the suite with -x." not in _json(workspace, capsys, "notice")["notice"]

    code, out, _ = _run(workspace, capsys, "rule", "approve", "hostA/1")
    assert code == 0 and "proposed → core" in out
    assert rule_file.read_bytes() == before  # approval is a fact, never a rewrite
    notice = _json(workspace, capsys, "notice")
    assert "- [testing] Run the suite with -x." in notice["notice"]
    assert notice["coreRules"]["count"] == 1 and not notice["refused"]

    code, out, _ = _run(workspace, capsys, "rule", "revoke", "hostA/001")
    assert code == 0 and "core → revoked" in out
    assert "Run the suite with -x." not in _json(workspace, capsys, "notice")["notice"]
    facts = (workspace / ".dsh-chapters/edits/hostA/curation.jsonl").read_text().splitlines()
    assert [json.loads(line)["status"] for line in facts] == ["core", "revoked"]


def test_the_table_has_id_status_category_text_and_provenance(
    workspace: Path, capsys: Capture
) -> None:
    _run(workspace, capsys, "rule", "add", "git-workflow", "Rebase feature branches.\nNever merge.",
         "--session", "s-42")
    code, out, _ = _run(workspace, capsys, "rule", "list")
    assert code == 0
    # Too long for one line of 100 columns: the provenance goes under the text.
    header, row, where, summary = out.splitlines()
    assert header.split()[:4] == ["ID", "STATUS", "CATEGORY", "TEXT"]
    assert row == "hostA/001  proposed  git-workflow  Rebase feature branches. Never merge."
    assert where.strip().startswith("(user@hostA, session s-42, ")
    assert where.index("(") == row.index("Rebase")
    wide = _run(workspace, capsys, "rule", "list", "--wide")[1].splitlines()[1]
    assert wide.startswith(row) and "(user@hostA, session s-42, " in wide
    assert summary == "1 of 1 rules shown · on hostA: 0 core, 1 proposed, 0 revoked"


def test_list_filters(workspace: Path, capsys: Capture) -> None:
    for category, text in [("testing", "A."), ("testing", "B."), ("docs", "C.")]:
        _run(workspace, capsys, "rule", "add", category, text)
    _run(workspace, capsys, "rule", "approve", "hostA/001")
    _run(workspace, capsys, "rule", "revoke", "hostA/002")

    def ids(*flags: str) -> list[object]:
        return [r["id"] for r in _json(workspace, capsys, "rule", "list", *flags)["rules"]]

    assert ids() == ["hostA/001", "hostA/003"]
    assert ids("--all") == ["hostA/001", "hostA/002", "hostA/003"]
    assert ids("--proposed") == ["hostA/003"]
    assert ids("--all", "--category", "Testing") == ["hostA/001", "hostA/002"]
    code, _, err = _run(workspace, capsys, "rule", "list", "--all", "--proposed")
    assert code == 2 and "not allowed with" in err


def test_an_unknown_id_is_exit_1_with_the_nearest_ids(workspace: Path, capsys: Capture) -> None:
    for text in ("A.", "B.", "C."):
        _run(workspace, capsys, "rule", "add", "misc", text)
    code, out, err = _run(workspace, capsys, "rule", "approve", "hostA/042")
    assert code == 1 and out == ""
    assert "no rule 'hostA/042' among 3 rules; nearest: hostA/003, hostA/002, hostA/001" in err
    code, _, err = _run(workspace, capsys, "rule", "revoke", "hsotA/001")
    assert code == 1 and "hostA/001" in err
    assert not (workspace / ".dsh-chapters/edits").exists()


def test_adding_the_same_rule_twice_writes_one_file(workspace: Path, capsys: Capture) -> None:
    _run(workspace, capsys, "rule", "add", "testing", "Run the suite with -x.")
    data = _json(workspace, capsys, "rule", "add", "testing", "Run the suite  with -x.")
    assert data["created"] is False and data["rule"]["id"] == "hostA/001"
    assert len(list((workspace / ".dsh-chapters/rules/hostA").iterdir())) == 1


def test_an_empty_category_is_a_usage_error(workspace: Path, capsys: Capture) -> None:
    code, _, err = _run(workspace, capsys, "rule", "add", "--", "!!", "text")
    assert code == 2 and "category" in err


def test_notice_lists_this_sessions_chapters_with_counts_and_the_modified_mark(
    workspace: Path, capsys: Capture
) -> None:
    _chapter(workspace, 1, "Setup")
    _chapter(workspace, 2, "Retry", tamper=True)
    _chapter(workspace, 1, "Elsewhere", session="other-session")
    code, out, _ = _run(workspace, capsys, "notice", "--session", SESSION, "--title", "Retries",
                        "--handoff", "Writing the retry test.")
    assert code == 0
    lines = out.splitlines()
    assert lines[2].startswith("Project: w · ")
    assert "Continuing: Retries" in lines
    assert "## In flight" in lines and "Writing the retry test." in lines
    assert ("  .dsh-chapters/sess-1/chapters/001-setup.md · 5 messages (assistant 3, user 2)"
            in lines)
    # Past 100 columns: what follows the path goes on the next line, the path stays whole.
    at = lines.index("  .dsh-chapters/sess-1/chapters/002-retry.md")
    assert lines[at + 1] == "  5 messages (assistant 3, user 2) · ⚠ modified since archived"
    assert "Elsewhere" not in out
    assert ".dsh-chapters/index/<topic>.md" in out
    assert lines[-1] == "Ancestry: sess-1 → this continuation."


def test_with_only_proposed_rules_the_notice_is_byte_identical(
    workspace: Path, capsys: Capture
) -> None:
    _chapter(workspace, 1, "Setup")
    _, plain, _ = _run(workspace, capsys, "notice", "--session", SESSION)
    _run(workspace, capsys, "rule", "add", "testing", "Run the suite with -x.")
    _, proposed, _ = _run(workspace, capsys, "notice", "--session", SESSION)
    assert proposed == plain
    _run(workspace, capsys, "rule", "approve", "hostA/001")
    _, core, _ = _run(workspace, capsys, "notice", "--session", SESSION)
    assert core != plain and "## Core rules (approved on this machine)" in core
    _run(workspace, capsys, "rule", "revoke", "hostA/001")
    _, revoked, _ = _run(workspace, capsys, "notice", "--session", SESSION)
    assert revoked == plain


def test_over_budget_the_notice_refuses_with_numbers(workspace: Path, capsys: Capture) -> None:
    (workspace / ".dsh-chapters").mkdir()
    (workspace / ".dsh-chapters/config.toml").write_text("coreRulesBudgetTokens = 20\n")
    _run(workspace, capsys, "rule", "add", "testing", "Run the suite with -x before committing.")
    _run(workspace, capsys, "rule", "add", "docs", "Docs use the user's words, real commands.")
    _run(workspace, capsys, "rule", "approve", "hostA/001")
    _run(workspace, capsys, "rule", "approve", "hostA/002")
    code, out, err = _run(workspace, capsys, "notice")
    assert code == 0
    assert "## Core rules: refused, over budget" in out
    data = _json(workspace, capsys, "notice")
    assert data["refused"] is True
    sizes = data["coreRules"]["sizes"]
    assert [s["id"] for s in sizes] == ["hostA/002", "hostA/001"]  # by category, then id
    total = sum(s["tokens"] for s in sizes)
    assert data["coreRules"]["tokens"] == total > 20 == data["coreRules"]["budget"]
    for s in sizes:
        assert f"- {s['id']} [" in out and f"] {s['tokens']} tokens\n" in out
    assert f"Total: {total} tokens · budget: 20 tokens." in out
    assert "chapters rule revoke <id>" in out
    assert "Run the suite with -x before committing." not in out  # nothing clipped, none shown
    assert "Docs use the user's words" not in out
    assert f"core rules refused: {total} tokens > budget 20" in err


def test_notice_without_session_lists_the_last_archived_session(
    workspace: Path, capsys: Capture
) -> None:
    sample = files("dsh_chapters") / "samples" / "demo-session.jsonl"
    transcript = workspace.parent / "demo.jsonl"
    transcript.write_text(sample.read_text(encoding="utf-8"), encoding="utf-8")
    code, _, err = _run(workspace, capsys, "archive", str(transcript))
    assert code == 0, err
    data = _json(workspace, capsys, "notice")
    assert data["chapters"] >= 1 and data["session"]
    lines = data["notice"].splitlines()
    assert f"## Chapters of this session ({data['chapters']})" in lines
    links = [line.split(" · ")[0].strip() for line in lines
             if line.startswith("  .dsh-chapters/")]
    assert len(links) == data["chapters"]
    for link in links:  # every link opens with a plain read, relative to the workspace
        assert (workspace / link).is_file()
    # each with its message counts, on its line or (past 100 columns) the line under it
    assert all(" messages (" in line or " messages (" in lines[n + 1]
               for n, line in enumerate(lines) if line.startswith("  .dsh-chapters/"))
    assert data == _json(workspace, capsys, "notice", "--session", data["session"])


def _core_cache(ws: Path) -> dict[str, object]:
    data = json.loads((ws / ".dsh-chapters/cache/core-rules.json").read_text())
    assert isinstance(data, dict)
    return data


def test_a_writer_that_touches_no_rule_keeps_the_resolved_core_rules(
        workspace: Path, capsys: Capture, monkeypatch: pytest.MonkeyPatch) -> None:
    """Search's core bonus (§8) is resolved from the rule files and this machine's facts.
    A writer that wrote neither (an index update here, an archive in life) carries the kept
    ids to its generation without parsing a rule; one that did is resolved again."""
    import dsh_chapters.services.rules as rules_service

    for text in ("Pin the quokka fixtures.", "Name quokka tests for behaviour."):
        assert _run(workspace, capsys, "rule", "add", "testing", text)[0] == 0
    assert _run(workspace, capsys, "rule", "approve", "hostA/001")[0] == 0
    _chapter(workspace, 1, "Quokka")
    assert _run(workspace, capsys, "search", "quokka")[0] == 0
    first = _core_cache(workspace)
    assert first["ids"] == ["hostA/001"]

    resolved: list[int] = []
    real = rules_service.rules_here
    monkeypatch.setattr(rules_service, "rules_here",
                        lambda app: resolved.append(1) or real(app))
    _chapter(workspace, 2, "Quokka-two")
    assert _run(workspace, capsys, "index")[0] == 0  # a writer: the generation moves on
    assert _run(workspace, capsys, "search", "quokka")[0] == 0
    carried = _core_cache(workspace)
    assert resolved == [] and carried["ids"] == ["hostA/001"]
    assert carried["generation"] != first["generation"]

    assert _run(workspace, capsys, "rule", "approve", "hostA/002")[0] == 0  # the facts grow
    assert _run(workspace, capsys, "search", "quokka")[0] == 0
    assert resolved == [1] and _core_cache(workspace)["ids"] == ["hostA/001", "hostA/002"]

    # A rule file changed behind the writers is seen at the next writer's generation.
    rule_file = next((workspace / ".dsh-chapters/rules/hostA").glob("002-*.md"))
    rule_file.write_text(rule_file.read_text() + "edited by hand\n")
    assert _run(workspace, capsys, "index")[0] == 0
    assert _run(workspace, capsys, "search", "quokka")[0] == 0
    assert resolved == [1, 1]
    # The approval is bound to the bytes approved: the edited rule is no longer core.
    assert _core_cache(workspace)["ids"] == ["hostA/001"]


def test_a_store_with_no_known_generation_parses_its_rules_only_when_they_change(
        workspace: Path, capsys: Capture, monkeypatch: pytest.MonkeyPatch) -> None:
    """No writer line in reach of the log's tail makes the generation unknown (""). The kept
    core rules then stand on the rule inputs alone: searches parse no rule until a rule file
    or the facts change, and the cache is not rewritten by a search that changed nothing."""
    import dsh_chapters.services.rules as rules_service

    assert _run(workspace, capsys, "rule", "add", "testing", "Pin the quokka fixtures.")[0] == 0
    assert _run(workspace, capsys, "rule", "approve", "hostA/001")[0] == 0
    _chapter(workspace, 1, "Quokka")
    (workspace / ".dsh-chapters/logs/chapters.log").write_text("")  # no writer line left
    resolved: list[int] = []
    real = rules_service.rules_here
    monkeypatch.setattr(rules_service, "rules_here",
                        lambda app: resolved.append(1) or real(app))
    assert _run(workspace, capsys, "search", "quokka")[0] == 0
    kept = workspace / ".dsh-chapters/cache/core-rules.json"
    assert _core_cache(workspace)["generation"] == "" and resolved == [1]
    written = kept.stat().st_mtime_ns
    for _ in range(2):
        assert _run(workspace, capsys, "search", "quokka")[0] == 0
    assert resolved == [1] and kept.stat().st_mtime_ns == written

    rule_file = next((workspace / ".dsh-chapters/rules/hostA").glob("001-*.md"))
    rule_file.write_text(rule_file.read_text() + "edited by hand\n")
    assert _run(workspace, capsys, "search", "quokka")[0] == 0
    assert resolved == [1, 1] and _core_cache(workspace)["ids"] == []


def test_a_rule_holding_a_credential_is_stored_redacted(workspace: Path, capsys: Capture) -> None:
    # §9: the rule file, its name, `rule list` and the notice (rules reach every machine).
    secret = "wJalrXUtnFEMI/K7MDENG/" + "bPxRfiCYzQ8vN3tLs2Hk"
    key_id = "AKIA" + "QX4TNB7ZLM2KWP9R"
    code, out, _ = _run(workspace, capsys, "rule", "add", "security",
                        f"{key_id}: never paste AWS_SECRET_ACCESS_KEY={secret} in chat")
    assert code == 0 and secret not in out and key_id not in out
    (rule_file,) = (workspace / ".dsh-chapters" / "rules" / "hostA").glob("001-*.md")
    assert key_id.lower() not in rule_file.name.lower()
    text = rule_file.read_text(encoding="utf-8")
    assert secret not in text and key_id not in text
    assert "⟦redacted:credential sha256=" in text
    listed = json.dumps(_json(workspace, capsys, "rule", "list"))
    assert secret not in listed and key_id not in listed
    assert _run(workspace, capsys, "rule", "approve", "hostA/001")[0] == 0
    code, notice, _ = _run(workspace, capsys, "notice")
    assert code == 0 and secret not in notice and key_id not in notice
