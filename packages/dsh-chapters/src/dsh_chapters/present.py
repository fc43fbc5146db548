"""CLI wording: the text a terminal user reads for the services' results.

The services return data; each caller words it (STYLE.md, "wording belongs to each caller").
"""

from __future__ import annotations

from collections.abc import Sequence

from dsh_chapters_core.archive import ArchivedChapter, ArchiveReport


def _pairs(pairs: Sequence[tuple[str, int]]) -> str:
    return ", ".join(f"{name} {count}" for name, count in pairs)


def _opened_by(chapter: ArchivedChapter) -> str:
    """The composition rule behind the split that opened this chapter (§4.4: inspectable)."""
    if chapter.rule == "first":
        return "opened by: first turn of this archive"
    return f"split by: {chapter.rule}, overlap {chapter.overlap:.3f}"


def report_lines(report: ArchiveReport, store_prefix: str = ".dsh-chapters") -> list[str]:
    a = report.account
    lines = [f"archived {report.source_path or report.session_id} "
             f"({report.harness}, session {report.session_id})"]
    malformed = f"{a.malformed} malformed"
    if a.malformed_lines:
        shown = ", ".join(str(n) for n in a.malformed_lines[:10])
        more = f", +{len(a.malformed_lines) - 10} more" if len(a.malformed_lines) > 10 else ""
        malformed += f" (line {shown}{more})"
    lines.append(f"  lines      {a.total} total · {a.imported} imported · {a.skipped} skipped · "
                 f"{a.unknown} unknown · {malformed}")
    if a.split:
        shown = ", ".join(str(n) for n in a.split_lines[:10])
        lines[-1] += f" · {a.split} split (line {shown}: {a.split_records} records read)"
    if a.skip_rules:
        lines.append(f"             skipped by rule: {_pairs(a.skip_rules)}")
    if a.unknown_types:
        lines.append(f"             unknown types: {_pairs(a.unknown_types)}")
    if a.truncated_tail:
        lines.append("             the last line is incomplete (a session being written): "
                     f"read stopped after line {a.total}, the last complete one")
    if a.replaced_bytes:
        lines.append(f"             {a.replaced_bytes} non-UTF-8 byte(s) became U+FFFD")
    lines.append(f"  turns      {report.turns_complete} complete · {report.turns_archived} "
                 f"archived now · {report.turns_already} archived before")
    lines.append(f"  chapters   {len(report.chapters)} written")
    for chapter in report.chapters:
        lines.append(f"    {store_prefix}/{chapter.path}  ({chapter.turns} turn(s), "
                     f"seq {chapter.seq_range[0]}–{chapter.seq_range[1]}, {_opened_by(chapter)})")
    lines.append(f"  artifacts  {report.artifacts_written} written · "
                 f"{report.artifacts_present} already present")
    lines.append(f"  redactions {_pairs(report.redactions) or 'none'}")
    if report.omissions:
        lines.append(f"  screened   {_pairs(report.omissions)} (host-injected context)")
    if report.clamp:
        lines.append(f"  clamp      {report.clamp}")
    if report.ended:
        lines.append(f"  final      {report.ended}")
    if report.wrote_nothing and report.turns_complete:
        lines.append("  nothing new: every completed turn was already archived")
    return lines
