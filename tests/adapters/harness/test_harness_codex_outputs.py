"""Codex call outputs: the exec wrapper is unwrapped to its text, anything ambiguous kept whole.

Shapes as Codex CLI writes them (codex-rs): a shell/exec result is `serde_json::to_string` of
`{"output", "metadata": {"exit_code", "duration_seconds"}}`; the freeform shell and
`apply_patch` write plain text; `function_call_output.output` may also be a list of content
items (MCP results with images), and older CLIs wrote `{"content", "success"}`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from dsh_chapters_core.events import ToolResult
from dsh_chapters_harness.codex import CodexReader

READER = CodexReader()
INNER = 'line one\n"quoted" \\ back\\slash\ttab é ✓ \u2028\n'


def results(tmp_path: Path, *outputs: tuple[str, Any]) -> list[ToolResult]:
    """The ToolResults of a rollout holding one call and output item per (item type, output)."""
    lines: list[dict[str, Any]] = [
        {
            "timestamp": "2026-01-01T00:00:00.000Z",
            "type": "session_meta",
            "payload": {"id": "0199bbbb-1111-7222-8333-444455556666", "cwd": "/w"},
        }
    ]
    for i, (kind, output) in enumerate(outputs):
        call_kind = "custom_tool_call" if kind == "custom_tool_call_output" else "function_call"
        for item in (
            {
                "type": call_kind,
                "name": "shell",
                "arguments": "{}",
                "input": "",
                "call_id": f"c{i}",
            },
            {"type": kind, "call_id": f"c{i}", "output": output},
        ):
            lines.append({"timestamp": "t", "type": "response_item", "payload": item})
    path = tmp_path / "rollout-2026-01-01T00-00-00-0199bbbb-1111-7222-8333-444455556666.jsonl"
    path.write_text("".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines))
    found = [e for e in READER.read(str(path)).events if isinstance(e, ToolResult)]
    assert [r.call_id for r in found] == [f"c{i}" for i in range(len(outputs))]
    return found


def serde(payload: dict[str, Any]) -> str:
    """The compact JSON Codex's serde_json writes."""
    return json.dumps(payload, ensure_ascii=False, separators=(",", ":"))


@pytest.mark.parametrize("kind", ["function_call_output", "custom_tool_call_output"])
def test_the_exec_wrapper_is_unwrapped_verbatim(tmp_path: Path, kind: str) -> None:
    ok = serde({"output": INNER, "metadata": {"exit_code": 0, "duration_seconds": 0.4}})
    failed = serde({"output": "boom\n", "metadata": {"exit_code": 2, "duration_seconds": 1.0}})
    spaced = json.dumps({"output": INNER, "metadata": {"exit_code": 0}})  # \u escapes, spaces
    got = results(tmp_path, (kind, ok), (kind, failed), (kind, spaced))
    assert [(r.text, r.is_error) for r in got] == [
        (INNER, False),
        ("boom\n", True),
        (INNER, False),
    ]


def test_the_wrapper_without_metadata_or_exit_code_is_not_an_error(tmp_path: Path) -> None:
    kind = "function_call_output"
    got = results(
        tmp_path,
        (kind, serde({"output": "a"})),
        (kind, serde({"output": "b", "metadata": {}})),
        (kind, serde({"output": "c", "metadata": {"duration_seconds": 3.0}})),
        (kind, serde({"output": "d", "metadata": {"exit_code": -1}})),
    )
    assert [(r.text, r.is_error) for r in got] == [
        ("a", False),
        ("b", False),
        ("c", False),
        ("d", True),
    ]


AMBIGUOUS = [
    serde({"output": "x", "metadata": {"exit_code": 0}, "executed_command": ["ls"]}),
    serde({"output": "x", "metadata": {"exit_code": 0, "sandbox": "seatbelt"}}),
    serde({"output": "x", "metadata": "exit 0"}),
    serde({"output": "x", "metadata": {"exit_code": "0"}}),
    serde({"output": "x", "metadata": {"exit_code": True}}),
    serde({"output": ["x"], "metadata": {"exit_code": 0}}),
    serde({"metadata": {"exit_code": 0}}),
    '{"output":"first","output":"second"}',
    ' {"output":"x"}',
    '{"output":"x"}\n',
    '{"output":"x"',
    '["output","x"]',
    '{"content":"x","success":true}',
]


@pytest.mark.parametrize("raw", AMBIGUOUS)
def test_anything_ambiguous_is_kept_whole(tmp_path: Path, raw: str) -> None:
    (got,) = results(tmp_path, ("function_call_output", raw))
    assert got.text == raw


def test_a_wrapper_kept_whole_still_reports_its_exit_code(tmp_path: Path) -> None:
    raw = serde({"output": "x", "metadata": {"exit_code": 1}, "executed_command": ["false"]})
    (got,) = results(tmp_path, ("function_call_output", raw))
    assert got.text == raw and got.is_error


def test_plain_text_outputs_are_kept_verbatim(tmp_path: Path) -> None:
    freeform_ok = "Exit code: 0\nWall time: 0.2 seconds\nOutput:\nok\n"
    freeform_failed = "Exit code: 1\nWall time: 0.1 seconds\nOutput:\nno such file\n"
    patch = "Success. Updated the following files:\nM src/app.py\n"
    got = results(
        tmp_path,
        ("function_call_output", freeform_ok),
        ("function_call_output", freeform_failed),
        ("custom_tool_call_output", patch),
        ("function_call_output", "{not json at all}"),
        ("function_call_output", ""),
    )
    assert [(r.text, r.is_error) for r in got] == [
        (freeform_ok, False),
        (freeform_failed, True),
        (patch, False),
        ("{not json at all}", False),
        ("", False),
    ]


def test_content_items_and_the_older_content_success_payload(tmp_path: Path) -> None:
    wrapped = serde({"output": "inner", "metadata": {"exit_code": 3}})
    got = results(
        tmp_path,
        ("function_call_output", [{"type": "input_text", "text": "from mcp"}]),
        ("function_call_output", {"content": "denied", "success": False}),
        ("function_call_output", {"content": wrapped, "success": True}),
        ("function_call_output", {"content": '{"output":"x","extra":1}', "success": True}),
    )
    assert [(r.text, r.is_error) for r in got] == [
        ("from mcp", False),
        ("denied", True),
        ("inner", True),
        ('{"output":"x","extra":1}', False),
    ]
