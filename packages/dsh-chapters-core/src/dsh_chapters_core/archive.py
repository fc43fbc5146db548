"""The archive use case: events → turns → signatures → composition → render (+ redaction) → store.

No model and no network (§1 invariant 1). Everything runs under the writer lock (§5.2). Only
completed turns past the session's watermark are archived (§4.3), so running it twice writes
nothing new and a transcript that grew archives only its new turns. The chapter file is the
commit point of each chapter: after a crash, a chapter already on disk raises the effective
watermark past its turns, so they are never archived twice.

A session that is over (`final`) has no next archive: its unfinished tail is archived as a last
turn marked `ended: incomplete-turn`. If that session is resumed, its new events go to the next
chapter, which names the final one in `continues`; events at or below the watermark are never
archived again and no chapter is rewritten (§1 invariant 3).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

from dsh_chapters_core.chokepoint import TextChokepoint
from dsh_chapters_core.compose import ChapterPlan, Decision, compose_chapters
from dsh_chapters_core.config import Config
from dsh_chapters_core.documents import Document
from dsh_chapters_core.events import LineAccount, Transcript
from dsh_chapters_core.ports.clock import Clock
from dsh_chapters_core.ports.store import ChapterStore, WriterLock
from dsh_chapters_core.projectkey import ProjectIdentity
from dsh_chapters_core.render import RenderedChapter, render_chapter
from dsh_chapters_core.signature import Signature, sign_turn
from dsh_chapters_core.turns import Turn, has_conversation, split_turns

NO_WATERMARK = -1
# The rendered text (chapters and their artifacts) an archive run holds before it writes them:
# enough that a run's artifacts are usually written in one call, little beside a transcript.
WAITING_CHAPTER_BYTES = 8 << 20


@dataclass(frozen=True, slots=True)
class ArchivedChapter:
    """One chapter an archive run wrote: its store path, title, turns and seq range, and the
    composition rule that opened it."""

    path: str  # store-relative
    title: str
    turns: int
    seq_range: tuple[int, int]
    rule: str  # the composition rule that opened it ("first", "below-threshold", "chapter-limit")
    overlap: float = 0.0  # the opening turn's overlap with the chapter before it


@dataclass(frozen=True, slots=True)
class ArchiveReport:
    """What one archive did, with numbers (the CLI prints it on every archive and import)."""

    session_id: str
    root_session_id: str
    harness: str
    source_path: str
    account: LineAccount
    started_at: str
    turns_complete: int  # complete turns in the transcript
    turns_archived: int  # of those, archived by this run
    turns_already: int  # of those, at or below the watermark: archived before
    watermark_before: int
    watermark_after: int
    chapters: tuple[ArchivedChapter, ...] = ()
    artifacts_written: int = 0
    artifacts_present: int = 0
    redactions: tuple[tuple[str, int], ...] = ()  # (family, count), sorted
    omissions: tuple[tuple[str, int], ...] = ()  # (injection kind, count) screened, sorted
    decisions: tuple[Decision, ...] = ()
    clamp: str = ""  # §4.3: the in-flight turn left for the next archive
    final: bool = False  # the session was archived as over: its unfinished tail is a turn
    ended: str = ""  # what became of that tail ("" when there was none)
    harness_version: str = ""  # the harness version that wrote the file, where it says

    @property
    def wrote_nothing(self) -> bool:
        return not self.chapters and self.artifacts_written == 0

    def to_dict(self) -> dict[str, Any]:
        a = self.account
        return {
            "sessionId": self.session_id,
            "rootSessionId": self.root_session_id,
            "harness": self.harness,
            "harnessVersion": self.harness_version,
            "source": self.source_path,
            "at": self.started_at,
            "lines": {
                "total": a.total, "imported": a.imported, "skipped": a.skipped,
                "unknown": a.unknown, "malformed": a.malformed,
                "skipRules": dict(a.skip_rules), "unknownTypes": dict(a.unknown_types),
                "malformedLines": list(a.malformed_lines), "truncatedTail": a.truncated_tail,
                "replacedBytes": a.replaced_bytes,
                "split": a.split, "splitLines": list(a.split_lines),
                "splitRecords": a.split_records, "sideFilesRefused": a.side_files_refused,
            },
            "turns": {"complete": self.turns_complete, "archived": self.turns_archived,
                      "alreadyArchived": self.turns_already},
            "watermark": {"before": self.watermark_before, "after": self.watermark_after},
            "chapters": [
                {"path": c.path, "title": c.title, "turns": c.turns,
                 "seqRange": list(c.seq_range), "rule": c.rule, "overlap": c.overlap}
                for c in self.chapters
            ],
            "artifacts": {"written": self.artifacts_written, "present": self.artifacts_present},
            "redactions": dict(self.redactions),
            "omissions": dict(self.omissions),
            "decisions": [
                {"turn": d.turn_index, "action": d.action, "rule": d.rule,
                 "overlap": d.overlap, "size": d.size}
                for d in self.decisions
            ],
            "clamp": self.clamp,
            "final": self.final,
            "ended": self.ended,
        }


def _archived_through(
    store: ChapterStore, transcript: Transcript
) -> tuple[int, int, Document | None]:
    """(the recorded watermark, the effective one, this session's latest chapter): a crash
    between a chapter and the watermark write leaves the chapter ahead of the record, and the
    chapter wins."""
    recorded = store.watermark(transcript.session_id, root_session_id=transcript.root_id)
    # Seq ranges grow with chapter numbers within a session, so the newest chapter of this
    # session is the only one that can be ahead of the record: O(1) in the corpus, not O(N).
    for document in store.session_chapters(transcript.root_id):
        if document.session_id == transcript.session_id:
            return recorded, max(recorded, document.seq_range[1]), document
    return recorded, recorded, None


def _ended(document: Document | None) -> bool:
    return document is not None and any(key == "ended" for key, _ in document.extra)


def _after(turn: Turn, mark: int) -> Turn | None:
    """The part of `turn` past the watermark. A turn runs across it only when a session
    archived as over was resumed: what the final chapter holds is never archived twice."""
    if turn.start_seq > mark:
        return turn
    events = tuple(e for e in turn.events if e.seq > mark)
    return replace(turn, events=events) if has_conversation(events) else None


def _counts(pairs: Iterable[tuple[str, int]]) -> tuple[tuple[str, int], ...]:
    total: Counter[str] = Counter()
    for name, count in pairs:
        total[name] += count
    return tuple(sorted((k, v) for k, v in total.items() if v))


def archive_transcript(
    transcript: Transcript,
    *,
    store: ChapterStore,
    lock: WriterLock,
    clock: Clock,
    config: Config,
    identity: ProjectIdentity,
    harness_id: str,
    final: bool = False,
) -> ArchiveReport:
    """Archive the completed, not yet archived turns of one transcript; with `final` (the
    session is over), its unfinished tail too."""
    split = split_turns(transcript.events)
    started_at = clock.now()
    clamp = ended = ""
    tail = split.final_turn() if final else None
    candidates = split.complete + ((tail,) if tail is not None else ())
    if split.clamped:
        seqs = [e.seq for e in split.incomplete]
        span = f"seq {min(seqs)}–{max(seqs)}, {len(seqs)} events"
        if tail is not None:
            ended = f"the unfinished last turn ({span}) was archived as the session's end " \
                    "(ended: incomplete-turn)"
        else:
            # §4.3: a live session's last turn is archived once it has ended.
            clamp = f"the last turn ({span}) has not ended, so it was held back"
    with lock.hold(config.lock_timeout_ms / 1000):
        recorded, before, latest = _archived_through(store, transcript)
        trimmed = (_after(t, before) for t in candidates if t.end_seq > before)
        fresh: tuple[Turn, ...] = tuple(t for t in trimmed if t is not None)
        after_final = fresh and _ended(latest)
        report = ArchiveReport(
            session_id=transcript.session_id,
            root_session_id=transcript.root_id,
            harness=transcript.harness,
            source_path=transcript.source_path,
            account=transcript.account,
            started_at=started_at,
            turns_complete=len(candidates),
            turns_archived=len(fresh),
            turns_already=len(candidates) - len(fresh),
            watermark_before=before,
            watermark_after=before,
            clamp=clamp,
            final=final,
            ended=ended if tail is not None and tail.end_seq > before else "",
            harness_version=transcript.harness_version,
        )
        if not fresh:
            mark = max([before, *(t.end_seq for t in candidates)]) if final else before
            if mark > recorded:
                store.set_watermark(transcript.session_id, mark,  # repair after a crash
                                    root_session_id=transcript.root_id)
            return report
        store.record_session(transcript.root_id, transcript.session_id, {
            "harnessId": harness_id,
            "harness": transcript.harness,
            "projectKey": identity.project_key,
            "source": transcript.source_path,
        })
        # One screen and one redaction per text, shared by the signatures and the chapters.
        texts = TextChokepoint(config.redaction_patterns)
        signatures: tuple[Signature, ...] = tuple(
            sign_turn(t, config, cwd=transcript.cwd, chokepoint=texts) for t in fresh
        )
        composition = compose_chapters(signatures, config)
        opening = {d.turn_index: d for d in composition.decisions if d.action != "merge"}
        chapters: list[ArchivedChapter] = []
        written = present = 0
        redactions: list[tuple[str, int]] = []
        omissions: list[tuple[str, int]] = []
        # One signature line per completed turn (§4.1); a retry after a crash skips the
        # turns already recorded, so this may run before the chapters it describes.
        store.append_signatures(transcript.root_id, tuple(s.to_json_line() for s in signatures))
        # The run's numbers reserved at once: one durable write, however many chapters.
        first = (store.reserve_chapter_number(transcript.root_id, len(composition.chapters))
                 if composition.chapters else 0)
        # Rendered chapters wait, a few MB at most, so their artifacts are written in one
        # call (a store syncs them together); each chapter follows its artifacts, in order.
        waiting: list[tuple[int, ChapterPlan, RenderedChapter]] = []
        waiting_bytes = 0

        def write_waiting() -> None:
            nonlocal written, present, waiting_bytes
            artifacts = [(a.sha256, a.text) for _, _, r in waiting for a in r.artifacts]
            fresh_files = store.write_artifacts(artifacts) if artifacts else 0
            written += fresh_files
            present += len(artifacts) - fresh_files
            for number, plan, rendered in waiting:
                # The chapter file is the commit point: once it exists its turns count as
                # archived.
                path = store.write_chapter(transcript.root_id, number, rendered.slug,
                                           rendered.text)
                chapters.append(ArchivedChapter(
                    path=path, title=rendered.title, turns=len(plan.turn_indices),
                    seq_range=rendered.seq_range, rule=opening[plan.turn_indices[0]].rule,
                    overlap=opening[plan.turn_indices[0]].overlap,
                ))
            waiting.clear()
            waiting_bytes = 0

        for number, plan in enumerate(composition.chapters, first):
            turns = tuple(fresh[i] for i in plan.turn_indices)
            signed = tuple(signatures[i] for i in plan.turn_indices)
            rendered = render_chapter(
                turns, signed, session_id=transcript.session_id,
                project_key=identity.project_key, harness_id=harness_id, config=config,
                extra_patterns=config.redaction_patterns, chokepoint=texts,
                continues=latest.path if after_final and latest is not None
                and number == first else "",
                session_title=transcript.title, cwd=transcript.cwd,
                git_branch=transcript.git_branch,
            )
            redactions.extend(rendered.redactions)
            omissions.extend(rendered.omitted)
            waiting.append((number, plan, rendered))
            waiting_bytes += len(rendered.text) + sum(len(a.text) for a in rendered.artifacts)
            if waiting_bytes >= WAITING_CHAPTER_BYTES:
                write_waiting()
        write_waiting()
        mark = max(t.end_seq for t in candidates if t.end_seq > before)
        store.set_watermark(transcript.session_id, mark, root_session_id=transcript.root_id)
    return ArchiveReport(
        session_id=report.session_id,
        root_session_id=report.root_session_id,
        harness=report.harness,
        source_path=report.source_path,
        account=report.account,
        started_at=started_at,
        turns_complete=report.turns_complete,
        turns_archived=report.turns_archived,
        turns_already=report.turns_already,
        watermark_before=before,
        watermark_after=mark,
        chapters=tuple(chapters),
        artifacts_written=written,
        artifacts_present=present,
        redactions=_counts(redactions),
        omissions=_counts(omissions),
        # Decisions count turns within this run; the report names them by transcript turn.
        decisions=tuple(replace(d, turn_index=fresh[d.turn_index].index)
                        for d in composition.decisions),
        clamp=clamp,
        final=final,
        ended=report.ended,
        harness_version=report.harness_version,
    )
