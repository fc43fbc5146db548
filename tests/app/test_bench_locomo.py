"""`benchmarks/locomo.py` on a small LoCoMo-shaped dataset of our own text: the transcripts it
writes are what Claude Code writes, the real CLI archives and answers them, and the figures
count what the protocol says (the real data is never in the repository; the benchmark's own
run measures it)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import zipfile
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

BENCH = Path(__file__).parents[2] / "benchmarks"


def load(name: str) -> ModuleType:
    if str(BENCH) not in sys.path:  # a benchmark imports its siblings, as a script run does
        sys.path.insert(0, str(BENCH))
    spec = importlib.util.spec_from_file_location(f"bench_{name}", BENCH / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


locomo = load("locomo")


def turn(session: int, index: int, speaker: str, text: str) -> dict[str, Any]:
    return {"speaker": speaker, "dia_id": f"D{session}:{index}", "text": text}


# Three sessions between Ines (speaker A) and Tomas (speaker B); the second opens with Tomas.
DIALOG: dict[str, Any] = {
    "speaker_a": "Ines",
    "speaker_b": "Tomas",
    "session_1_date_time": "2:10 pm on 3 March, 2024",
    "session_1": [
        turn(1, 1, "Ines", "I repaired the hull of my old sailboat with epoxy this weekend."),
        turn(1, 2, "Tomas", "Nice work! Where do you keep the boat?"),
        turn(1, 3, "Ines", "At the Harbour Point marina, next to the lighthouse."),
    ],
    "session_2_date_time": "9:05 am on 17 April, 2024",
    "session_2": [
        turn(2, 1, "Tomas", "I baked a rye sourdough loaf with my new starter."),
        turn(2, 2, "Ines", "How long did the rye starter take to get going?"),
        turn(2, 3, "Tomas", "Eleven days of feeding before the loaf rose properly."),
        turn(2, 4, "Ines", "   "),  # an empty turn: no line in the transcript
    ],
    "session_3_date_time": "7:45 pm on 2 June, 2024",
    "session_3": [
        turn(3, 1, "Ines", "My violin teacher gave me the Bruch concerto to practise."),
        turn(3, 2, "Tomas", "The Bruch concerto in G minor is a wonderful piece to learn."),
    ],
    "qa": [
        {"question": "Which marina keeps Ines's sailboat?", "evidence": ["D1:3"],
         "category": 4, "answer": "Harbour Point"},
        {"question": "How many days did the rye starter need?", "evidence": ["D2:3"],
         "category": 2, "answer": "eleven"},
        {"question": "What did Ines repair with epoxy and which concerto does she practise?",
         "evidence": ["D1:1; D3:1"], "category": 1, "answer": "hull; Bruch"},
        {"question": "Which concerto did Tomas practise on the violin?", "evidence": ["D3:2"],
         "category": 5, "adversarial_answer": "Bruch"},
        {"question": "Would Ines enjoy sailing lessons?", "evidence": [], "category": 3,
         "answer": "likely yes"},
    ],
}


@pytest.fixture
def data(tmp_path: Path) -> Path:
    """The zip's layout: one JSON file per dialog, named by its number."""
    path = tmp_path / "locomo10.zip"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("data/multimodal_dialog/locomo10_v2/", "")
        archive.writestr("data/multimodal_dialog/locomo10_v2/7.json", json.dumps(DIALOG))
    return path


def test_both_published_shapes_load_alike(data: Path, tmp_path: Path) -> None:
    conversation = {k: v for k, v in DIALOG.items() if k != "qa"}
    flat = tmp_path / "locomo10.json"
    flat.write_text(json.dumps([{"sample_id": "conv-7", "conversation": conversation,
                                 "qa": DIALOG["qa"]}]))
    from_zip, from_json = locomo.load_dialogs(data), locomo.load_dialogs(flat)
    assert from_zip == from_json
    dialog = from_zip[0]
    assert dialog.name == "conv-7"
    assert [len(s.turns) for s in dialog.sessions] == [3, 3, 2]  # the blank turn is dropped
    assert dialog.unanswerable == 1  # no evidence id: never asked
    assert [q.gold for q in dialog.questions] == [{1}, {2}, {1, 3}, {3}]
    assert dialog.sessions[1].started.isoformat() == "2024-04-17T09:05:00+00:00"


def test_transcripts_have_claude_codes_record_shape(data: Path, tmp_path: Path) -> None:
    dialog = locomo.load_dialogs(data)[0]
    ws = tmp_path / "ws"
    ids = locomo.write_transcripts(dialog, tmp_path / "claude", ws)
    folder = tmp_path / "claude" / "projects" / locomo.project_dir_name(str(ws))
    files = sorted(folder.glob("*.jsonl"))
    assert sorted(ids.values()) == [1, 2, 3] and len(files) == 3
    records = [json.loads(line) for line in (folder / f"{locomo.session_id('conv-7', 2)}.jsonl")
               .read_text().splitlines()]
    assert [r["type"] for r in records] == ["assistant", "user", "assistant"]
    assert records[0]["parentUuid"] is None
    assert [r["parentUuid"] for r in records[1:]] == [r["uuid"] for r in records[:-1]]
    assert {r["sessionId"] for r in records} == {locomo.session_id("conv-7", 2)}
    assert {r["cwd"] for r in records} == {str(ws)}
    assert [r["timestamp"] for r in records] == [
        "2024-04-17T09:05:00.000Z", "2024-04-17T09:06:00.000Z", "2024-04-17T09:07:00.000Z"]
    assert records[1]["message"] == {"role": "user",
                                     "content": "Ines: How long did the rye starter take to "
                                                "get going?"}
    reply = records[0]["message"]
    assert reply["role"] == "assistant" and reply["type"] == "message"
    assert reply["content"] == [{"type": "text", "text": "Tomas: I baked a rye sourdough loaf "
                                                         "with my new starter."}]
    assert reply["id"].startswith("msg_01") and records[0]["requestId"].startswith("req_01")


@pytest.mark.slow
def test_a_run_counts_what_the_protocol_says(data: Path, tmp_path: Path) -> None:
    out, log = tmp_path / "locomo.json", tmp_path / "answers.jsonl"
    done = subprocess.run([sys.executable, str(BENCH / "locomo.py"), "--data", str(data),
                           "--out", str(out), "--log", str(log)],
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    figures = json.loads(out.read_text())
    assert figures["protocol"]["questions"] == 4
    assert figures["protocol"]["not_asked_without_evidence"] == 1
    assert figures["protocol"]["sessions"] == 3
    assert figures["protocol"]["answers_from"] == "processes"
    answers = [json.loads(line) for line in log.read_text().splitlines()]
    # Each question's words are in one session only: the search must put it first.
    assert [(a["category"], a["rank"]) for a in answers] == [
        ("single-hop", 1), ("temporal", 1), ("multi-hop", 1), ("adversarial", 1)]
    assert figures["overall"] == {"n": 4, "hit@1": 1.0, "hit@5": 1.0, "mrr": 1.0,
                                  "not_in_answer": 0}
    assert figures["categories"]["adversarial"]["n"] == 1  # in the total, and shown apart
    assert figures["without_adversarial"]["n"] == 3
    assert set(figures["categories"]) == {"single-hop", "temporal", "multi-hop", "adversarial"}
    # The processes, the in-process answers and the whole rankings agree.
    assert figures["agreement"] == {"questions": 4, "in_process_differs": 0,
                                    "ranking_differs": 0, "rankings_cut_short": 0}
    assert figures["answer"]["gold_in_answer"] == 1.0 and figures["answer"]["hit@1"] == 1.0
    assert figures["answer"]["budget_tokens"] > 0
    assert figures["timing"]["process_samples"] == 4
    assert figures["timing"]["in_process_samples"] == 4
    assert figures["peer"]["hit@1"] == 0.696 and figures["peer"]["hit@5"] == 0.857

    page = load("performance_page")
    text = "\n".join(page.locomo_section(figures))
    assert "| single-hop | 1 | 1.000 | 1.000 | 1.000 |" in text
    assert "| deja-vu 0.18.0, as published | 1,982 | 0.696 | 0.857 | 0.766 |" in text
    assert text.index("| all but adversarial |") < text.index("| adversarial |")


def test_gold_rank_reads_distinct_sessions_in_order() -> None:
    assert locomo.gold_rank([4, 2, 9], frozenset({9, 2})) == 2
    assert locomo.gold_rank([4], frozenset({2})) == 0
    assert locomo.gold_rank(list(range(1, 30)), frozenset({25})) == 0  # past the 20th
    tally = locomo.Tally()
    for rank in (1, 3, 0, 6):
        tally.add(rank)
    assert tally.figures() == {"n": 4, "hit@1": 0.25, "hit@5": 0.5,
                               "mrr": round((1 + 1 / 3 + 1 / 6) / 4, 3), "not_in_answer": 1}


def test_without_the_data_it_says_how_to_get_it(tmp_path: Path) -> None:
    out = tmp_path / "locomo.json"
    done = subprocess.run([sys.executable, str(BENCH / "locomo.py"), "--data",
                           str(tmp_path / "absent.zip"), "--out", str(out)],
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0
    assert "data/locomo10.zip" in done.stdout and "snap-research/locomo" in done.stdout
    assert not out.exists()


def test_a_smoke_run_spreads_its_questions_over_each_dialog(data: Path) -> None:
    questions = locomo.load_dialogs(data)[0].questions
    assert locomo.spread(questions, 2) == (questions[0], questions[2])
    assert locomo.spread(questions, 9) == questions
