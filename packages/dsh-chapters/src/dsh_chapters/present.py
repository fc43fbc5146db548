"""CLI wording: the text a terminal user reads for the services' results.

The services return data; each caller words it (STYLE.md, "wording belongs to each caller").
The core names no command or flag: its errors carry a `NextStep` code and an `Argument` code,
and this module is where they become `chapters …` commands and `--flags` (the MCP server words
the same codes as its tools and their arguments).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from dsh_chapters_core.errors import Argument, ArgumentError, ChaptersError, NextStep

if TYPE_CHECKING:
    # Annotations only: every command imports this module (for its error text), and the
    # archive use case is heavy to load for a command that never archives.
    from dsh_chapters_core.archive import ArchivedChapter, ArchiveReport
    from dsh_chapters_core.notice_words import NoticeWords

# Default output fits this many columns (a terminal, a review comment, a log viewer); `--wide`
# and `--json` give everything, however long.
OUTPUT_COLUMNS = 100


def clip(line: str, *, keep: str = "", wide: bool = False, width: int = OUTPUT_COLUMNS) -> str:
    """`line` cut with `…` so that it and `keep` (a note that must stay whole) fit `width`."""
    room = width - len(keep)
    if wide or len(line) <= room:
        return line + keep
    return line[:max(0, room - 1)].rstrip() + "…" + keep


# Where a folded line's continuation starts: under the text after a label (`store      `,
# `  chapters   `), a list mark or `next: `; else two columns in from the line's own indent.
_HANG = re.compile(r"^( *)(- |next: |[\w.-]+(?: [\w.-]+)? {2,}|)")


def fold(text: str, *, wide: bool = False, width: int = OUTPUT_COLUMNS) -> str:
    """Each line of `text` wider than `width` wrapped at spaces, its continuation lines hung
    under the line's text. A word longer than a line (a path, a URL) is never cut: a cut path
    cannot be copied."""
    if wide:
        return text
    out: list[str] = []
    for line in text.split("\n"):
        if len(line) <= width:
            out.append(line)
            continue
        match = _HANG.match(line)
        lead, label = (match.group(1), match.group(2)) if match else ("", "")
        hang = " " * (len(lead) + (len(label) if label else 2))
        if len(hang) > width // 2:
            hang = " " * (len(lead) + 2)
        import textwrap  # a wide line only: `--json` and short lines never pay for it

        out.extend(textwrap.wrap(line, width=width, subsequent_indent=hang,
                                 break_long_words=False, break_on_hyphens=False,
                                 drop_whitespace=True) or [line])
    return "\n".join(out)


# The design record's section numbers (`(§4.3)`) belong in code comments, not in what a user
# reads; the core's texts that cite one are shown without it.
_SECTION_REF = re.compile(r"\s*\((?:design record )?§[\d.]+\)|\s*§[\d.]+")


def plain(text: str) -> str:
    """`text` without the design record's section numbers."""
    return _SECTION_REF.sub("", text)


def display_path(path: str | Path, workspace: Path, home: Path | None = None) -> str:
    """A path as a person reads it: relative to the workspace inside it, `~/…` inside the home
    directory, else as it is."""
    target = Path(path)
    try:
        relative = target.relative_to(workspace)
        return relative.as_posix() if relative.parts else "."
    except ValueError:
        pass
    home = home if home is not None else Path.home()
    try:
        return "~/" + target.relative_to(home).as_posix()
    except ValueError:
        return str(target)


_FLAGS: Mapping[Argument, str] = {
    Argument.MAX_TOKENS: "--max-tokens",
    Argument.OFFSET: "--offset",
    Argument.LIMIT: "--limit",
    Argument.TOPIC: "--topic",
}


def cli_argument(argument: Argument, value: int | None = None) -> str:
    """An argument as the CLI takes it: `--max-tokens`, `--offset 200`."""
    flag = _FLAGS[argument]
    return flag if value is None else f"{flag} {value}"


# Each next step as the CLI says it; `{name}` fields come from the error's data.
_STEPS: Mapping[NextStep, str] = {
    NextStep.REPAIR_UNSAFE_FILE: "replace it with the regular file it should be, or remove it "
                                 "(`chapters doctor` lists every such file)",
    NextStep.PASS_REMOTE_OR_PATH: "pass --remote URL or --path DIR",
    NextStep.NAME_FILE: "chapters artifact <path|sha>",
    NextStep.COPY_SEARCH_PATH: "copy a path from `chapters search`, or pass the artifact's sha256",
    NextStep.READ_FROM_TOP: f"{cli_argument(Argument.OFFSET, 0)} reads from the top",
    NextStep.NAME_LINE_WORDS: "chapters artifact <ref> search <words>",
    NextStep.PROPOSE_RULE_OR_SYNC: 'propose one with `chapters rule add <category> "<text>"`, '
                                   "or `chapters sync`",
    NextStep.LIST_ALL_RULES: "run `chapters rule list --all` to see every id",
    NextStep.RAISE_MAX_TOKENS: f"ask again with {cli_argument(Argument.MAX_TOKENS)} {{needed}} "
                               "or more",
    NextStep.PASS_QUERY_OR_TOPIC: "pass words to search for, or "
                                  f"{cli_argument(Argument.TOPIC)} <name>",
    NextStep.NAME_TWO_TOPICS: "chapters topic merge auth authentication",
    NextStep.LINK_POOL: "run `chapters link <path>` or `chapters link <https-url> < token-file`",
    NextStep.USE_PROVIDER_SCHEME: "use a local path, an https:// URL or treedx+<url>/<repo>",
}


def step_text(step: NextStep, data: Mapping[str, int | str]) -> str:
    return _STEPS[step].format_map(data)


def hint_text(exc: ChaptersError) -> str:
    """The error's next step in CLI words ("" when it has none)."""
    if exc.hint or exc.step is None:
        return exc.hint
    return step_text(exc.step, exc.data)


def error_text(exc: ChaptersError) -> str:
    """What `chapters` prints after `chapters: `: the message, then `next:` and the step."""
    message = exc.worded(cli_argument) if isinstance(exc, ArgumentError) else exc.message
    hint = hint_text(exc)
    return f"{message}\n  next: {hint}" if hint else message


def _notice_words() -> NoticeWords:
    # The notice tells an agent how to reach each door through the CLI (§7.3).
    from dsh_chapters_core.notice_words import NoticeWords

    return NoticeWords(
        list_rules="`chapters rule list`",
        list_category="`chapters rule list --category <name>`",
        revoke_rule="`chapters rule revoke <id>`",
        add_rule="`chapters rule add`",
        list_chapters="`chapters list`",
        search='`chapters search "<query>"`',
        raise_budget="`--max-tokens N`",
        search_topic="`chapters search --topic <topic>`",
    )


if TYPE_CHECKING:
    NOTICE_WORDS: NoticeWords


def __getattr__(name: str) -> object:
    # NOTICE_WORDS is built on first use (then kept, one object): every command imports this
    # module for its error text, and only the notice's paths read these words.
    if name == "NOTICE_WORDS":
        words = globals()["NOTICE_WORDS"] = _notice_words()
        return words
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


SYNC_NOW = "`chapters sync`"  # a deferred push, delivered now (`chapters status`)
BUILD_INDEX = "`chapters index`"  # no search index yet (`chapters status`)
MANUAL_DRAIN = "chapters enrich run"  # why a drain ran when asked (`chapters enrich run --json`)


_KEEP = "\xa0"  # joins a name to its count while a line is folded, so no fold parts them


def _pairs(pairs: Sequence[tuple[str, int]], joint: str = " ") -> str:
    return ", ".join(f"{name}{joint}{count}" for name, count in pairs)


_OPENED_BY = {
    "first": "the first turn of this archive",
    "below-threshold": "a new topic (word overlap {overlap:.3f}, below mergeThreshold)",
    "chapter-limit": "the last chapter was full (chapterLimit)",
}


def _opened_by(chapter: ArchivedChapter) -> str:
    """Why this chapter began where it did, in words (the composition rule, for `--wide`)."""
    words = _OPENED_BY.get(chapter.rule, chapter.rule + " (word overlap {overlap:.3f})")
    return "opened by " + words.format(overlap=chapter.overlap)


def _turns(count: int) -> str:
    return f"{count} turn" + ("s" if count != 1 else "")


def report_lines(report: ArchiveReport, store_prefix: str = ".dsh-chapters", *,
                 ids: Mapping[str, str] | None = None, wide: bool = False) -> list[str]:
    """An archive's report. By default a chapter is named by its id (`<session>/<n>`, as
    `chapters list` prints it) and its title, and each line fits OUTPUT_COLUMNS; `wide` gives
    the paths, full session ids and why each chapter began, however long."""
    ids = ids or {}
    a = report.account
    session = report.session_id
    if not wide:
        shown = [ids[c.path] for c in report.chapters if c.path in ids]
        session = shown[0].split("/", 1)[0] if shown else session[:8]
    source = report.source_path or report.session_id
    if not wide and report.source_path:
        source = Path(report.source_path).name
    lines = [f"archived {report.harness} session {session} from {source}"]
    malformed = f"{a.malformed} malformed"
    if a.malformed_lines:
        shown_lines = ", ".join(str(n) for n in a.malformed_lines[:10])
        more = f", +{len(a.malformed_lines) - 10} more" if len(a.malformed_lines) > 10 else ""
        malformed += f" (line {shown_lines}{more})"
    lines.append(f"  lines      {a.total} total · {a.imported} imported · {a.skipped} skipped · "
                 f"{a.unknown} unknown · {malformed}")
    if a.split:
        shown_lines = ", ".join(str(n) for n in a.split_lines[:10])
        lines[-1] += f" · {a.split} split (line {shown_lines}: {a.split_records} records read)"
    if a.skip_rules:
        lines.append(f"             skipped by rule: {_pairs(a.skip_rules, _KEEP)}")
    if a.unknown_types:
        writer = f"{report.harness} {report.harness_version}".strip()
        lines.append(f"             unknown record types (written by {writer}): "
                     f"{_pairs(a.unknown_types, _KEEP)}")
        lines.append("             counted, not archived: `chapters doctor` keeps the list")
    if a.truncated_tail:
        lines.append("             the last line is incomplete (a session being written): "
                     f"read stopped after line {a.total}, the last complete one")
    if a.replaced_bytes:
        lines.append(f"             {a.replaced_bytes} non-UTF-8 byte(s) became U+FFFD")
    if a.side_files_refused:
        lines.append(f"             {a.side_files_refused} side file(s) refused unread (not a "
                     "regular file in the session folder, or too big); the log's stub kept")
    lines.append(f"  turns      {report.turns_complete} complete · {report.turns_archived} "
                 f"archived now · {report.turns_already} archived before")
    lines.append(f"  chapters   {len(report.chapters)} written")
    width = max((len(ids.get(c.path, "")) for c in report.chapters), default=0)
    for chapter in report.chapters:
        seqs = f"seq {chapter.seq_range[0]}–{chapter.seq_range[1]}"
        if wide or chapter.path not in ids:
            lines.append(f"    {store_prefix}/{chapter.path}  ({_turns(chapter.turns)}, {seqs}, "
                         f"{_opened_by(chapter)})")
        else:
            lines.append(clip(f"    {ids[chapter.path]:<{width}}  {chapter.title}",
                              keep=f"  ({_turns(chapter.turns)})"))
    lines.append(f"  artifacts  {report.artifacts_written} written · "
                 f"{report.artifacts_present} already present")
    lines.append(f"  redactions {_pairs(report.redactions) or 'none'}")
    if report.omissions:
        lines.append(f"  screened   {_pairs(report.omissions, _KEEP)} (host-injected context)")
    if report.clamp:
        lines.append(f"  held back  {plain(report.clamp)}")
        if "--final" not in report.clamp:
            lines.append("             if the session is over, run the same command with --final "
                         "to archive it")
    if report.ended:
        lines.append(f"  final      {plain(report.ended)}")
    if report.wrote_nothing and report.turns_complete:
        lines.append("  nothing new: every completed turn was already archived")
    return fold("\n".join(lines), wide=wide).replace(_KEEP, " ").split("\n")


PROGRESS_PHASES = {"read": "reading chapters", "cache": "filling the search index",
                   "build": "building the search index ({total:,} chapters)"}


def progress_words(phase: str, total: int) -> str:
    """What a phase of an index build is called, in words: `building the search index (2,204
    chapters)`."""
    return PROGRESS_PHASES.get(phase, phase).format(total=total)


def progress_line(phase: str, done: int, total: int, width: int = 24) -> str:
    """One redrawn line of a terminal progress bar: `search: reading chapters [####    ] 40%`."""
    share = done / total if total else 1.0
    filled = min(width, int(share * width))
    bar = "#" * filled + " " * (width - filled)
    return f"\rsearch: {progress_words(phase, total)} [{bar}] {done}/{total} ({share:.0%})"
