"""The DSH session-log binding (docs/formats.md, "DSH"), built from DSH's own writer and types.

A log is one header line `{type: "session", id, createdAt, cwd, parentSession?, seedLength?,
origin?, delegationDepth, …}` and then one storage record per line: a `SessionEvent`
`{type, seq, time, data, ignorable?, surfaceOp?, sourceEventSeqs?}` with contiguous `seq` from 0
and epoch-ms `time`, or a packed chunk row (`text-chunks`, `reasoning-chunks`,
`tool-call-chunks`) standing for a run of `assistant/chunk` events.

DSH records its own turns (`turn/start` … `turn/end {reason}`), so a turn is complete exactly at
its `turn/end`, whatever the reason (§4.3). A step's answer is its `assistant/message`; a log
that holds a step only as `assistant/chunk` deltas (DSH 0.1.1 writes answers so) has it
assembled from its text and reasoning deltas, or from the chunk stream's `block-end` blocks,
and the step's `finish` chunk ends it as the message would; a last turn whose final step
finished and whose `turn/end` never came is complete at that `finish`. A header whose format
`version` this reader does not know is refused by name, never guessed at.

Host commands are never conversation (§7.2). Host context arrives as `user/message` events
told apart by their `source` (amendment 2026-09-21): workspace instructions, the skill catalog,
the system-prompt plugin's runtime snapshot, hook and plugin notices (ours included) become
host injections, and the compaction plugin's checkpoint is the compaction, never a prompt.
Every line is accounted: imported, skipped by a named rule (the log-only vocabulary DSH
documents), unknown by type, or malformed.
"""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeGuard

from dsh_chapters_core.errors import InputError
from dsh_chapters_core.events import (
    AssistantMessage,
    CommandRun,
    CompactionMarker,
    HostInjection,
    InjectionKind,
    Reasoning,
    ToolCall,
    ToolResult,
    Transcript,
    UserMessage,
)

from dsh_chapters_harness.dsh_discovery import discover_logs, is_log_name
from dsh_chapters_harness.dsh_log import ZSTD_MAGIC, is_compressed, open_log, torn_frame
from dsh_chapters_harness.transcript_lines import (
    IMPORTED,
    MALFORMED,
    LineLedger,
    Outcome,
    head_records,
    read_records,
    skipped,
    unknown,
)
from dsh_chapters_harness.turns import TurnAssembler

NAME = "dsh"
LABEL = "DSH session log"
EXPECTED = (
    'a header line {"type": "session", "id", "createdAt", …} and then JSON lines '
    '{"type": "turn/start"|"user/message"|"assistant/message"|…, "seq": N, "time": MS, "data"}'
)
HEADER = "session"
_SNIFF_LINES = 8
# The log format versions this reader knows (`SESSION_FORMAT_VERSION` in DSH's
# packages/core/session/src/types.ts, 0 up to dsh 0.1.1-rc.2); DSH itself refuses any other.
KNOWN_FORMAT_VERSIONS = frozenset({0})
_CHUNK_TEXT_KINDS = {"text-delta": "text", "reasoning-delta": "reasoning"}
_ROW_KINDS = {"text-chunks": "text", "reasoning-chunks": "reasoning"}

# Packed storage rows: one line standing for a run of `assistant/chunk` delta events. The
# assembled `assistant/message` of the same step carries the full text, so a row is skipped.
_CHUNK_ROWS = {"text-chunks": "texts", "reasoning-chunks": "texts", "tool-call-chunks": "args"}

# Log-only event types DSH documents (docs/persistence-catalog.md at the cited commit), each
# skipped by a named rule: none of them is conversation, and none changes what was said.
_LOG_ONLY_PREFIXES = {
    "step/": "step-boundary",
    "request/": "request-envelope",
    "session/title": "session-title",
    "approval/": "approval",
    "agent/inbox/": "inbox",
    "agent-preset/": "agent-preset",
    "hook/": "hook-audit",
    "llm/retry": "llm-retry",
    "todo/": "todo",
    "sandbox/": "policy",
    "permission/": "policy",
    "plan/": "policy",
    "goal/": "goal",
    "schedule/": "schedule",
    "subagent/": "subagent-descriptor",
    "tool/code-dispatch": "code-dispatch",
    "tool-workflow/": "workflow",
    "team/": "team",
    "feedback/": "feedback",
    "web/": "web-request",
}
CHUNK_RULE = "stream-chunk"
SEED_RULE = "fork-seed"

# `source.kind` / `source.plugin` / `source.form` of host context (llm/src/message.ts).
_SYSTEM_PROMPT_PLUGIN = "@deepseek-ai/dsh-system-prompt"
_CHECKPOINT_PLUGIN = "compact"  # compaction/src/checkpoint.ts: {kind: plugin, plugin: compact}
_PROMPT = "prompt"
_CHECKPOINT = "checkpoint"
_FORM_KINDS = {
    "instructions": InjectionKind.INSTRUCTIONS,
    "catalog": InjectionKind.SKILL_CATALOG,
    "snapshot": InjectionKind.RUNTIME_CONTEXT,
    "notice": InjectionKind.PLUGIN_NOTICE,
}
_KIND_KINDS = {
    "agent-instructions": InjectionKind.INSTRUCTIONS,
    "skill-catalog": InjectionKind.SKILL_CATALOG,
}


def iso_time(ms: Any) -> str:
    """DSH's epoch milliseconds as the ISO-8601 UTC text the core carries; "" if not a time."""
    if not isinstance(ms, int | float) or isinstance(ms, bool) or ms < 0:
        return ""
    try:
        moment = datetime.fromtimestamp(ms / 1000, tz=UTC)
    except (OverflowError, OSError, ValueError):
        return ""
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _is_int(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def blocks_text(blocks: Any) -> str:
    """The text of a `ContentBlock[]`: its text blocks joined by blank lines, images named."""
    if not isinstance(blocks, list):
        return ""
    parts: list[str] = []
    for block in blocks:
        if not isinstance(block, dict):
            continue
        if block.get("type") == "text" and isinstance(block.get("text"), str):
            parts.append(block["text"])
        elif block.get("type") == "image":
            parts.append("[image]")
    return "\n\n".join(parts)


def source_role(source: Any) -> str | InjectionKind:
    """What a `user/message` is, by its `source`: a prompt, the checkpoint, or host context."""
    if not isinstance(source, dict):
        return _PROMPT  # DSH always writes one; a message without it is the user's
    kind, plugin, form = source.get("kind"), source.get("plugin"), source.get("form")
    if kind == "user" or form == "relay":  # relay: another agent addressed this one
        return _PROMPT
    if kind == "plugin" and plugin == _CHECKPOINT_PLUGIN:
        return _CHECKPOINT
    if kind in _KIND_KINDS:
        return _KIND_KINDS[kind]
    if kind == "plugin" and plugin == _SYSTEM_PROMPT_PLUGIN:
        return InjectionKind.RUNTIME_CONTEXT
    if isinstance(form, str) and form in _FORM_KINDS:
        return _FORM_KINDS[form]
    return InjectionKind.PLUGIN_NOTICE  # hooks, goal rounds, job notices: the host talking


def _log_only_rule(kind: str) -> str | None:
    if kind == "assistant/chunk":
        return CHUNK_RULE
    if kind == "session/end-seed":
        return "end-seed"
    for prefix, rule in _LOG_ONLY_PREFIXES.items():
        if kind.startswith(prefix):
            return rule
    return None


def is_header(record: dict[str, Any]) -> bool:
    return record.get("type") == HEADER and isinstance(record.get("id"), str)


def _is_dsh_record(record: dict[str, Any]) -> bool:
    if is_header(record):
        return _is_int(record.get("createdAt"))
    kind = record.get("type")
    if kind in _CHUNK_ROWS:
        return _is_int(record.get("seq0"))
    return (
        isinstance(kind, str)
        and "/" in kind
        and _is_int(record.get("seq"))
        and _is_int(record.get("time"))
        and isinstance(record.get("data"), dict)
    )


class _Step:
    """One model step seen as its chunk stream (`assistant/chunk`, packed rows), assembled as
    DSH's `BlockAssembler` does: deltas per block index, a `block-end` block wins."""

    __slots__ = ("blocks", "final", "finish_line", "finish_seq", "last_seq", "order", "time")

    def __init__(self) -> None:
        self.order: list[int] = []
        self.blocks: dict[int, list[Any]] = {}  # index -> [kind, [texts], final block | None]
        self.finish_seq: int | None = None
        self.finish_line = 0
        self.final = False  # finished with no tool call: the turn's answer
        self.last_seq = 0
        self.time = ""

    def block(self, index: int, kind: str) -> list[Any]:
        entry = self.blocks.get(index)
        if entry is None:
            entry = self.blocks[index] = [kind, [], None]
            self.order.append(index)
        return entry

    def texts(self) -> list[tuple[str, str]]:
        """(kind, text) of the text and reasoning blocks, in stream order."""
        out = []
        for index in self.order:
            kind, pieces, final = self.blocks[index]
            if isinstance(final, dict):
                kind = final.get("type", kind)
                text = final.get("text")
                text = text if isinstance(text, str) else ""
            else:
                text = "".join(pieces)
            if kind in ("text", "reasoning") and text.strip():
                out.append((kind, text))
        return out


class _DshRead:
    """The state of one read: the header's facts, the assembler, open commands, compaction."""

    def __init__(self) -> None:
        self.turns = TurnAssembler()
        self.session_id = ""
        self.parent_session = ""
        self.cwd = ""
        self.started_at = ""
        self.seed_length = 0
        self.last_seq: int | None = None
        self.header_seen = False
        self.runs: dict[str, CommandRun] = {}
        self.summarized: set[str] = set()  # compactionIds whose summary became a marker
        self.after_prune = False  # the previous event was compaction/prune
        self.steps: dict[tuple[Any, Any], _Step] = {}  # chunk streams not yet settled
        self.final_finish: tuple[int, str] | None = None  # a last answer with no turn/end
        self.ledger: LineLedger | None = None  # set by the reader: a chunk line may turn out
        # to hold the only copy of an answer

    # ------------------------------------------------------------------ lines
    def handle(self, line: int, record: dict[str, Any]) -> Outcome:
        kind = record.get("type")
        if kind == HEADER:
            return self._header(line, record)
        if not isinstance(kind, str):
            return unknown("<no type>")
        if kind in _CHUNK_ROWS:
            return self._chunk_row(kind, record)
        seq, time, data = record.get("seq"), record.get("time"), record.get("data")
        if not _is_int(seq):
            return unknown(kind)  # not a DSH event: another harness's record, counted by type
        if not isinstance(data, dict):
            return MALFORMED
        if self.last_seq is not None and seq <= self.last_seq:
            return MALFORMED  # seq is contiguous and increasing: a chapter cites spans by it
        self.last_seq = seq
        if seq < self.seed_length:
            return skipped(SEED_RULE)  # the parent's events: they belong to its chapters
        after_prune, self.after_prune = self.after_prune, False
        return self._event(kind, seq, iso_time(time), data, record, after_prune, line)

    def _header(self, line: int, record: dict[str, Any]) -> Outcome:
        if self.header_seen or line != 1 or not is_header(record):
            return MALFORMED  # the header is the first line, once (format.ts, isHeaderLine)
        version = record.get("version")
        if _is_int(version) and version not in KNOWN_FORMAT_VERSIONS:
            known = ", ".join(str(v) for v in sorted(KNOWN_FORMAT_VERSIONS))
            raise InputError(
                f"DSH session {record['id']} uses log format version {version}; this reader "
                f"knows version {known} (DSH up to 0.1.1-rc.2), so it reads nothing of it "
                "rather than guess",
                hint="update dsh-chapters (its DSH reader) to a release that reads this format; "
                     "the log is left as it is",
                data={"harness": NAME, "formatVersion": version})
        self.header_seen = True
        self.session_id = record["id"]
        cwd, parent = record.get("cwd"), record.get("parentSession")
        self.cwd = cwd if isinstance(cwd, str) else ""
        self.parent_session = parent if isinstance(parent, str) else ""
        self.started_at = iso_time(record.get("createdAt"))
        seed = record.get("seedLength")
        self.seed_length = seed if _is_int(seed) and seed > 0 else 0
        return IMPORTED

    def _chunk_row(self, kind: str, record: dict[str, Any]) -> Outcome:
        seq0, data = record.get("seq0"), record.get("data")
        members = data.get(_CHUNK_ROWS[kind]) if isinstance(data, dict) else None
        if not _is_int(seq0) or not isinstance(members, list) or not members:
            return MALFORMED
        if self.last_seq is not None and seq0 <= self.last_seq:
            return MALFORMED
        self.last_seq = seq0 + len(members) - 1  # member k is seq0 + k (chunk-rows.ts)
        self.after_prune = False
        if seq0 < self.seed_length:
            return skipped(SEED_RULE)
        kind_of_text = _ROW_KINDS.get(kind)
        if kind_of_text is not None and isinstance(data, dict):
            step = self._step(data)
            step.block(data.get("index", 0), kind_of_text)[1].extend(
                m for m in members if isinstance(m, str))
            step.last_seq = self.last_seq
        return skipped(CHUNK_RULE)

    def _step(self, data: dict[str, Any]) -> _Step:
        key = (data.get("turn"), data.get("step"))
        step = self.steps.get(key)
        if step is None:
            step = self.steps[key] = _Step()
        return step

    def _chunk(self, line: int, seq: int, time: str, data: dict[str, Any]) -> Outcome:
        """One `assistant/chunk` event: assembled per step, kept only if no message comes."""
        chunk = data.get("chunk")
        if not isinstance(chunk, dict):
            return skipped(CHUNK_RULE)
        kind = chunk.get("type")
        step = self._step(data)
        step.last_seq, step.time = seq, time
        index = chunk.get("index", 0)
        if kind in _CHUNK_TEXT_KINDS:
            text = chunk.get("text")
            if isinstance(text, str):
                step.block(index, _CHUNK_TEXT_KINDS[kind])[1].append(text)
        elif kind == "block-start":
            step.block(index, str(chunk.get("blockType", "")))
        elif kind == "block-end" and isinstance(chunk.get("block"), dict):
            entry = step.block(index, str(chunk["block"].get("type", "")))
            if entry[2] is None:  # the first close wins (assembler.ts)
                entry[2] = chunk["block"]
        elif kind == "tool-call-delta":
            step.block(index, "tool-call")
        elif kind == "finish":
            reason = chunk.get("reason")
            why = reason.get("kind") if isinstance(reason, dict) else None
            step.finish_seq, step.finish_line = seq, line
            step.final = why != "tool-calls" and all(
                entry[0] != "tool-call" for entry in step.blocks.values())
        return skipped(CHUNK_RULE)

    def settle_steps(self, keep: tuple[Any, Any] | None = None, *, at_end: bool = False) -> None:
        """Steps whose chunks hold the only copy of their answer become its events. At the
        end of the file a finished step may still get its message (a live log read between
        the two lines): its answer is kept, but it ends no turn."""
        for key in [k for k in self.steps if k != keep]:
            step = self.steps.pop(key)
            texts = step.texts()
            if not texts:
                continue
            seq = step.finish_seq if step.finish_seq is not None else step.last_seq
            for kind, text in texts:
                if kind == "reasoning":
                    self.turns.conversation(Reasoning(seq, text, step.time))
                else:
                    self.turns.conversation(AssistantMessage(seq, text, step.time))
            if step.finish_line and self.ledger is not None:
                self.ledger.move(step.finish_line, skipped(CHUNK_RULE), IMPORTED)
            self.final_finish = (seq, step.time) if step.final and not at_end else None

    def finish(self) -> None:
        self.settle_steps(at_end=True)
        if self.final_finish is not None and self.turns.turn_open:
            last = self.turns.last_conversation
            seq, time = self.final_finish
            if last is not None and last.seq <= seq:
                self.turns.end_here(seq, time)  # the finish of its answer: as turn/end would

    # ----------------------------------------------------------------- events
    def _event(self, kind: str, seq: int, time: str, data: dict[str, Any],
               record: dict[str, Any], after_prune: bool, line: int = 0) -> Outcome:
        if kind == "assistant/chunk":
            return self._chunk(line, seq, time, data)
        if self.steps:
            # The step's own message carries its answer; any other event settles the steps
            # whose message never came (a chunk-only log).
            self.settle_steps((data.get("turn"), data.get("step"))
                              if kind == "assistant/message" else None)
            if kind == "assistant/message":
                self.steps.pop((data.get("turn"), data.get("step")), None)
        if kind in ("turn/start", "turn/end", "user/message"):
            self.final_finish = None
        if kind == "turn/start":
            self.turns.start(seq, time)
            return IMPORTED
        if kind == "turn/end":
            reason = data.get("reason")
            why = reason.get("kind") if isinstance(reason, dict) else None
            why = why if isinstance(why, str) and why != "completed" else ""
            self.turns.end_here(seq, time, why)  # every reason ends the turn; the odd ones say so
            return IMPORTED
        if kind == "user/message":
            return self._user(seq, time, data)
        if kind == "assistant/message":
            return self._assistant(seq, time, data)
        if kind == "tool/call":
            return self._tool_call(seq, time, data)
        if kind == "tool/result":
            if after_prune and isinstance(record.get("surfaceOp"), dict):
                # compaction/prune's replacement of an earlier result: the original stays
                return skipped("pruned-replacement")
            return self._tool_result(seq, time, data)
        if kind == "command/run":
            return self._command_run(seq, time, data)
        if kind == "command/done":
            return self._command_done(seq, time, data)
        if kind == "compaction/summary":
            return self._compaction_summary(seq, time, data)
        if kind == "compaction/prune":
            self.after_prune = True
            return skipped("compaction-prune")
        if kind.startswith("compaction/"):
            return skipped("compaction-phase")  # start/end bracket the summary's marker
        rule = _log_only_rule(kind)
        if rule is not None:
            return skipped(rule)
        if record.get("ignorable") is True:
            return skipped("ignorable")  # DSH: a reader may skip an ignorable unknown type
        return unknown(kind)

    def _user(self, seq: int, time: str, data: dict[str, Any]) -> Outcome:
        text = blocks_text(data.get("content"))
        role = source_role(data.get("source"))
        if role == _CHECKPOINT:
            compaction = data.get("source", {}).get("compactionId")
            if compaction in self.summarized:
                return skipped("compaction-checkpoint")  # the marker already holds its summary
            self.turns.ambient(CompactionMarker(seq, text, time))
            return IMPORTED
        if isinstance(role, InjectionKind):
            self.turns.ambient(HostInjection(seq, role, text, time))
            return IMPORTED
        if not text:
            return skipped("empty-message")
        self.turns.conversation(UserMessage(seq, text, time))
        return IMPORTED

    def _assistant(self, seq: int, time: str, data: dict[str, Any]) -> Outcome:
        message = data.get("message")
        # An earlier DSH wrote the blocks straight into `data` (its web snapshots still do).
        blocks = message.get("content") if isinstance(message, dict) else data.get("content")
        if not isinstance(blocks, list):
            return MALFORMED
        emitted = calls = False
        for block in blocks:
            if not isinstance(block, dict):
                continue
            text = block.get("text")
            if block.get("type") == "tool-call":
                calls = True  # its own tool/call event carries it, once
            elif not isinstance(text, str) or not text:
                continue
            elif block.get("type") == "reasoning":
                self.turns.conversation(Reasoning(seq, text, time))
                emitted = True
            elif block.get("type") == "text":
                self.turns.conversation(AssistantMessage(seq, text, time))
                emitted = True
        if emitted:
            return IMPORTED
        return skipped("tool-calls-as-events" if calls else "empty-message")

    def _tool_call(self, seq: int, time: str, data: dict[str, Any]) -> Outcome:
        arguments = data.get("arguments", "")
        if not isinstance(arguments, str):  # DSH keeps the model's raw string; be lenient
            arguments = json.dumps(arguments, ensure_ascii=False)
        self.turns.conversation(
            ToolCall(seq, str(data.get("callId", "")), str(data.get("name", "")), arguments, time)
        )
        return IMPORTED

    def _tool_result(self, seq: int, time: str, data: dict[str, Any]) -> Outcome:
        message = data.get("message")
        content = message.get("content") if isinstance(message, dict) else None
        block = next((b for b in content or () if isinstance(b, dict)
                      and b.get("type") == "tool-result"), None)
        if block is None and isinstance(data.get("content"), list):  # the earlier flat shape
            block = {"toolCallId": data.get("callId"), "content": data["content"],
                     "isError": data.get("isError")}
        if block is None:
            return MALFORMED
        self.turns.conversation(ToolResult(
            seq, str(block.get("toolCallId", "")), blocks_text(block.get("content")),
            bool(block.get("isError")) or isinstance(data.get("error"), dict), time,
        ))
        return IMPORTED

    def _command_run(self, seq: int, time: str, data: dict[str, Any]) -> Outcome:
        name, args = data.get("name"), data.get("args")
        command = f"/{name if isinstance(name, str) else ''}{args if isinstance(args, str) else ''}"
        run = CommandRun(seq, command, "", time)
        self.turns.ambient(run)
        self.runs[str(data.get("commandId", ""))] = run
        return IMPORTED

    def _command_done(self, seq: int, time: str, data: dict[str, Any]) -> Outcome:
        text = data.get("text")
        output = text if isinstance(text, str) else ""
        if data.get("kind") == "error":
            output = f"error: {output}" if output else "error"
        run = self.runs.pop(str(data.get("commandId", "")), None)
        if run is not None:
            self.turns.amend(run, CommandRun(run.seq, run.command, output, run.time))
        else:  # an outcome whose run is not in this file: keep it, never drop it
            self.turns.ambient(CommandRun(seq, "", output, time))
        return IMPORTED

    def _compaction_summary(self, seq: int, time: str, data: dict[str, Any]) -> Outcome:
        self.turns.ambient(CompactionMarker(seq, blocks_text(data.get("summary")), time))
        compaction = data.get("compactionId")
        if isinstance(compaction, str):
            self.summarized.add(compaction)
        return IMPORTED


def _compressed_refusal(path: str, exc: InputError) -> InputError:
    """A zstd file whose frames give no DSH record: say so in its own terms, with its size."""
    if not os.path.isfile(path):  # a FIFO or a device was refused already; never open it
        return exc
    try:
        with open(path, "rb") as f:
            compressed = is_compressed(path, f.read(len(ZSTD_MAGIC)))
        size = os.path.getsize(path)
    except OSError:
        return exc
    if not compressed:
        return exc
    return InputError(
        f"{path} is a Zstandard file ({size} bytes) whose complete frames hold no DSH record "
        f"({exc.message})",
        hint="a log DSH has only begun to write holds no frame yet: wait for its first turn; "
             "otherwise check that the file is a DSH session log (session.jsonl.zstd)",
    )


def fallback_session_id(path: str) -> str:
    """A header-less log's id: its session directory's name, else the file's stem."""
    p = Path(path)
    return p.parent.name if is_log_name(p.name) else p.name.split(".", 1)[0]


class DshReader:
    """`dsh_chapters.harnesses` entry point `dsh`."""

    name = NAME

    def sniff(self, head: bytes) -> bool:
        if head.startswith(ZSTD_MAGIC):
            return True  # no other harness we read writes zstd frames
        return any(_is_dsh_record(r) for r in head_records(head, limit=_SNIFF_LINES))

    def read(self, path: str) -> Transcript:
        state = _DshRead()
        state.ledger = LineLedger()
        try:
            ledger = read_records(path, state.handle, label=LABEL, expected=EXPECTED,
                                  ledger=state.ledger, open_stream=open_log,
                                  stopped_early=torn_frame)
        except InputError as exc:
            if "formatVersion" in exc.data:
                raise
            raise _compressed_refusal(path, exc) from None
        state.finish()
        return Transcript(
            session_id=state.session_id or fallback_session_id(path),
            harness=NAME,
            events=state.turns.finish(),  # no turn/end, no completed turn (§4.3)
            account=ledger.account(),
            root_session_id=state.parent_session
            if state.parent_session != state.session_id
            else "",
            cwd=state.cwd,
            source_path=str(path),
            started_at=state.started_at,
        )

    def discover(self, source: str | None, cwd: str) -> list[str]:
        """Logs under `source`, or this workspace's logs under `$DSH_HOME/sessions`."""
        return discover_logs(source, cwd)
