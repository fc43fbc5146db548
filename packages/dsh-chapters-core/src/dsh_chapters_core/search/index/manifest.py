"""What the index derives (§10.2): the curation facts it is built under, one record per
input, the build manifest kept as its bytes, and the topic shards rendered from records.

- `index/<topic-slug>.md`: one shard per canonical topic. A header line (topic, count,
  last-updated) then `date | title | path | (kind) | recency-hint` lines sorted by path. Every
  byte is a function of the corpus and the curation facts (never of the clock or the machine):
  last-updated is the newest date in the shard and the recency hint is an age against it.
- `index/manifest.json`: per input file the content hash processed, and what the shards need
  from it, plus the hash of every shard. One input a line, so git diffs stay readable.
"""

from __future__ import annotations

import bisect
import dataclasses
import datetime as dt
import hashlib
import json
import re
import sys
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from dsh_chapters_core.curation import FactLog, FactType, merge_logs
from dsh_chapters_core.documents import Document, DocumentKind
from dsh_chapters_core.pool_layout import (
    CURATION_FILE,
)
from dsh_chapters_core.ports.store import FileTree
from dsh_chapters_core.search.aliases import AliasMap, slugify
from dsh_chapters_core.search.index.layout import (
    INDEX_DIR,
    DoorLayout,
    document_identity,
    path_project,
    path_session,
)

MANIFEST_PATH = "index/manifest.json"
MANIFEST_VERSION = 2
_KEY_LINE = re.compile(rb'"key": "([0-9a-f]{64})"')
# A file name must stay under the filesystem's 255-byte limit; longer slugs get a digest tail.
_SLUG_FILE_BYTES = 120


@dataclass(frozen=True, slots=True)
class Curation:
    """Every machine's facts under a door, and what the index derives from them."""

    log: FactLog
    digests: tuple[tuple[str, str], ...]  # (harness id, sha256 of its edits file)
    aliases: AliasMap
    pins: tuple[tuple[str, tuple[str, ...]], ...]  # (document identity, pinned canonical topics)

    @property
    def key(self) -> str:
        """What shards depend on: the alias table and the pins (not notes, not rule status)."""
        text = self.aliases.key + "\n" + json.dumps(self.pins, ensure_ascii=False)
        return hashlib.sha256(text.encode("utf-8")).hexdigest()

    def pins_of(self, path: str) -> tuple[str, ...]:
        return dict(self.pins).get(document_identity(path), ())


def edits_paths(tree: FileTree) -> list[str]:
    return [p for p in tree.list("edits/")
            if p.count("/") == 2 and p.endswith("/" + CURATION_FILE)]


def read_curation(tree: FileTree) -> Curation:
    """Parse `edits/*/curation.jsonl`; malformed lines are skipped and counted (§10.1)."""
    texts: dict[str, str] = {}
    digests: list[tuple[str, str]] = []
    for path in edits_paths(tree):
        harness = path.split("/")[1]
        data = tree.read(path)
        texts[harness] = data.decode("utf-8", errors="replace")
        digests.append((harness, hashlib.sha256(data).hexdigest()))
    log = merge_logs(texts)
    aliases = AliasMap.from_facts(log.facts)
    pinned: dict[str, set[str]] = {}
    for fact in log.facts:
        if fact.type is FactType.TOPIC_PIN:
            topic = aliases.canonical(str(fact.get("topic", "")))
            target = str(fact.get("path", ""))
            if topic and target:
                pinned.setdefault(document_identity(target), set()).add(topic)
    pins = tuple(sorted((k, tuple(sorted(v))) for k, v in pinned.items()))
    return Curation(log=log, digests=tuple(sorted(digests)), aliases=aliases, pins=pins)


# ---------------------------------------------------------------------------------------------
# The manifest


@dataclass(frozen=True, slots=True)
class IndexRecord:
    """What the index keeps of one input: enough to render its shard lines without a re-read."""

    path: str
    sha256: str
    kind: str = ""  # "" marks a file that did not parse (skipped, counted, not re-read)
    title: str = ""
    date: str = ""
    project: str = ""
    topics: tuple[str, ...] = ()  # slugified labels as the file has them (before aliases)
    line: bytes = field(default=b"", compare=False, repr=False)  # its manifest line, when read

    @property
    def skipped(self) -> bool:
        return not self.kind

    def manifest_line(self) -> bytes:
        """`"<path>": {…}` in UTF-8: one input a line, keys sorted (the same bytes on every
        machine)."""
        return self.line or (
            f"{json.dumps(self.path, ensure_ascii=False)}: "
            f"{json.dumps(self.to_json(), ensure_ascii=False, sort_keys=True)}").encode()

    def to_json(self) -> dict[str, Any]:
        return {"date": self.date, "kind": self.kind, "project": self.project,
                "sha256": self.sha256, "title": self.title, "topics": list(self.topics)}


def normalize_document(layout: DoorLayout, path: str, doc: Document) -> Document:
    """The door decides a document's path and, in the mirror, its project (the directory)."""
    project = path_project(layout, path) or doc.project_key
    session = doc.session_id or path_session(layout, path)
    if doc.path == path and doc.project_key == project and doc.session_id == session:
        return doc
    return dataclasses.replace(doc, path=path, project_key=project, session_id=session)


def record_of(path: str, sha: str, doc: Document | None) -> IndexRecord:
    if doc is None:
        return IndexRecord(path=path, sha256=sha)
    # Kinds, projects and topic labels repeat across the corpus: one copy each, not one a
    # record (a rebuild holds every record at once).
    topics = tuple(dict.fromkeys(sys.intern(s) for s in (slugify(t) for t in doc.topics) if s))
    return IndexRecord(path=path, sha256=sha, kind=sys.intern(str(doc.kind)),
                       title=" ".join(doc.title.split()), date=doc.date,
                       project=sys.intern(doc.project_key), topics=topics)


_SEPARATOR = b",\n"  # between two input lines; a line is JSON, so it holds no raw newline


@dataclass(frozen=True, slots=True)
class IndexManifest:
    """The build manifest, its inputs section kept as the bytes of the file: an update finds
    the lines it touches by binary search on those bytes and splices them, and never splits,
    decodes or re-encodes the rest, so its cost follows the delta, not the corpus (at a
    hundred thousand inputs the section is 43 MB)."""

    inputs_text: bytes = b""  # one record a line, sorted by path, lines joined by ",\n"
    edits: tuple[tuple[str, str], ...] = ()
    shards: Mapping[str, str] = field(default_factory=dict)  # shard path -> sha256
    curation: str = ""  # Curation.key the shards were built under
    documents: int = 0  # inputs that parsed as documents
    key: str = ""

    @classmethod
    def of(cls, records: dict[str, IndexRecord], *, edits: tuple[tuple[str, str], ...],
           shards: Mapping[str, str], curation: str) -> IndexManifest:
        """The manifest of `records`, which it empties as it goes: each record is dropped once
        its line is made, so a rebuild never holds every record and every line at once."""
        documents = sum(1 for r in records.values() if not r.skipped)
        text = _SEPARATOR.join([records.pop(p).manifest_line() for p in sorted(records)])
        return cls(text, edits, dict(shards), curation, documents).with_key()

    @property
    def count(self) -> int:
        """How many inputs (documents and skipped files) the manifest lists."""
        return self.inputs_text.count(b"\n") + 1 if self.inputs_text else 0

    def records(self) -> Iterator[IndexRecord]:
        """Every record in path order, parsed a line at a time (never the section at once)."""
        for _, record in self.located_records():
            yield record

    def located_records(self) -> Iterator[tuple[int, IndexRecord]]:
        """(where its line starts, record) in path order: `record_at` takes the first back."""
        text, at = self.inputs_text, 0
        while at < len(text):
            end = _line_end(text, at)
            yield at, _parsed(text[at:end])
            at = end + len(_SEPARATOR)

    def record_at(self, at: int) -> IndexRecord:
        """The record whose line starts at byte `at` (from `located_records` or `find`)."""
        return _parsed(self.inputs_text[at:_line_end(self.inputs_text, at)])

    @property
    def inputs(self) -> dict[str, IndexRecord]:
        """Every record, parsed now (O(N): for rebuilds, the vocabulary and reports)."""
        return {r.path: r for r in self.records()}

    def find(self, path: str) -> tuple[int, IndexRecord | None]:
        """Binary search on the bytes: where the line of `path` starts, or where it would go,
        and its record. Each probe backs up to the start of the line it landed in."""
        text = self.inputs_text
        lo, hi = 0, len(text)  # both always the start of a line (or the end)
        while lo < hi:
            start = text.rfind(b"\n", lo, (lo + hi) // 2) + 1 or lo
            end = _line_end(text, start)
            if _line_path(text[start:end]) < path:
                lo = end + len(_SEPARATOR) if end < len(text) else end
            else:
                hi = start
        if lo < len(text):
            end = _line_end(text, lo)
            line = text[lo:end]
            if _line_path(line) == path:
                return lo, _parsed(line)
        return lo, None

    def patched(self, changes: Mapping[str, IndexRecord | None], *,
                edits: tuple[tuple[str, str], ...], shards: Mapping[str, str],
                documents: int) -> IndexManifest:
        """These records replaced, added (a record) or dropped (None); everything else as is,
        copied as bytes."""
        if (not changes and edits == self.edits and dict(shards) == dict(self.shards)
                and documents == self.documents):
            return self  # nothing moved: no re-serialization, no re-hash
        text = self.inputs_text
        view = memoryview(text)
        spots = sorted((self.find(path)[0], path) for path in changes)
        pieces: list[bytes | memoryview] = []  # runs of untouched lines, and new lines
        at = 0
        for index, path in spots:
            if index > at:  # the untouched lines before this one, less their separator
                pieces.append(view[at:index - len(_SEPARATOR) if index < len(text) else index])
            after = index  # where the next untouched line starts
            if index < len(text):
                end = _line_end(text, index)
                if _line_path(text[index:end]) == path:  # the old line is left out
                    after = min(end + len(_SEPARATOR), len(text))
            new = changes[path]
            if new is not None:
                pieces.append(new.manifest_line())
            at = max(at, after)
        if at < len(text):
            pieces.append(view[at:])
        return IndexManifest(_SEPARATOR.join(pieces), edits, dict(shards), self.curation,
                             documents).with_key()

    def body_chunks(self) -> Iterator[bytes]:
        """Everything but the key line, as UTF-8 chunks; the key is the sha256 of their
        concatenation. The inputs section goes as it is kept: one buffer, never re-encoded."""
        yield (f'"curation": {json.dumps(self.curation)},\n'
               f'"documents": {self.documents},\n'
               f'"edits": {json.dumps(dict(self.edits), sort_keys=True)},\n'
               '"inputs": {\n').encode()
        if self.inputs_text:
            yield self.inputs_text
            yield b"\n"
        yield b'},\n"shards": {\n'
        shards = [f"{json.dumps(p, ensure_ascii=False)}: {json.dumps(s)}"
                  for p, s in sorted(self.shards.items())]
        if shards:
            yield (",\n".join(shards) + "\n").encode("utf-8")
        yield f'}},\n"version": {MANIFEST_VERSION}\n'.encode()

    def with_key(self) -> IndexManifest:
        digest = hashlib.sha256()
        for chunk in self.body_chunks():
            digest.update(chunk)
        return IndexManifest(self.inputs_text, self.edits, self.shards, self.curation,
                             self.documents, digest.hexdigest())

    def dump_chunks(self) -> Iterator[bytes]:
        """The file, in chunks (`DerivedTree.write_chunks` streams them to disk)."""
        yield f'{{\n"key": "{self.key}",\n'.encode("ascii")
        yield from self.body_chunks()
        yield b"}\n"

    def dump(self) -> bytes:
        return b"".join(self.dump_chunks())


def _line_end(text: bytes, start: int) -> int:
    """Where the line that starts at `start` ends (before its separator, or the end)."""
    newline = text.find(b"\n", start)
    return len(text) if newline < 0 else newline - 1


_DECODER = json.JSONDecoder()


def _line_path(line: bytes) -> str:
    path = _DECODER.raw_decode(line.decode("utf-8"))[0]
    return path if isinstance(path, str) else ""


def _parsed(line: bytes) -> IndexRecord:
    """One manifest line (`"<path>": {…}`) as its record."""
    text = line.decode("utf-8")
    path, end = _DECODER.raw_decode(text)
    if not isinstance(path, str) or text[end:end + 2] != ": ":
        raise ValueError(f"not a manifest line: {text[:80]!r}")
    return _record(path, _DECODER.raw_decode(text, end + 2)[0], line)


def _record(path: str, r: Mapping[str, Any], line: bytes = b"") -> IndexRecord:
    return IndexRecord(path, r["sha256"], sys.intern(r["kind"]), r["title"], r["date"],
                       sys.intern(r["project"]), tuple(sys.intern(t) for t in r["topics"]), line)


_INPUTS_OPEN = b'"inputs": {\n'
_INPUTS_CLOSE = b'},\n"shards": {\n'


def load_manifest(tree: FileTree, *, trusted: bool = False) -> IndexManifest | None:
    """The manifest, or None if it is missing, unreadable or not what its key says (then the
    update is a rebuild). Only the small sections are parsed; the inputs are kept as bytes.

    `trusted`: the file is the one this machine's last update wrote (its change token says
    so), so hashing it again to check the key is skipped; any other file is checked."""
    if not tree.exists(MANIFEST_PATH):
        return None
    raw = tree.read(MANIFEST_PATH)
    try:
        first = raw.find(b"\n")
        second = raw.find(b"\n", first + 1)
        match = _KEY_LINE.fullmatch(raw[first + 1:second].rstrip(b","))
        if (first < 0 or second < 0 or raw[:first] != b"{" or match is None
                or not raw.endswith(b"}\n")):
            return None
        key = match.group(1).decode("ascii")
        if not trusted and hashlib.sha256(memoryview(raw)[second + 1:-2]).hexdigest() != key:
            return None  # hand-edited or torn: derived, so rebuild rather than trust it
        opened = raw.find(_INPUTS_OPEN, second + 1)
        head = raw[second + 1:opened]
        if opened < 0 or head.count(b"\n") != 3 or not head.endswith(b",\n"):
            return None
        begin = opened + len(_INPUTS_OPEN)
        if raw.startswith(_INPUTS_CLOSE, begin):
            inputs, closed = b"", begin
        else:
            # Looked for from the end: only the shards section (small) follows it.
            closed = raw.rfind(b"\n" + _INPUTS_CLOSE, begin) + 1
            if not closed:
                return None
            inputs = raw[begin:closed - 1]
        head_data = json.loads(b"{" + head.rstrip(b",\n") + b"}")
        tail = raw[closed + len(_INPUTS_CLOSE):-2].decode("utf-8").split("\n")
        if len(tail) < 3 or tail[-2:] != [f'"version": {MANIFEST_VERSION}', ""]:
            return None
        end_shards = tail.index("},")
        if end_shards != len(tail) - 3:
            return None
        shards = json.loads("{" + "".join(tail[:end_shards]) + "}")
        return IndexManifest(
            inputs_text=inputs,
            edits=tuple(sorted((str(k), str(v)) for k, v in head_data["edits"].items())),
            shards={str(k): str(v) for k, v in shards.items()},
            curation=str(head_data["curation"]),
            documents=int(head_data["documents"]),
            key=key,
        )
    except (ValueError, KeyError, TypeError, AttributeError, UnicodeError, RecursionError):
        return None


def manifest_key(tree: FileTree) -> str:
    """The manifest's key from its first line, without parsing the whole file."""
    if not tree.exists(MANIFEST_PATH):
        return ""
    match = _KEY_LINE.search(tree.read(MANIFEST_PATH)[:200])
    return match.group(1).decode("ascii") if match else ""


# ---------------------------------------------------------------------------------------------
# Shards


def shard_path(topic: str) -> str:
    slug = topic
    if len(slug.encode("utf-8")) > _SLUG_FILE_BYTES:
        digest = hashlib.sha256(slug.encode("utf-8")).hexdigest()[:12]
        slug = slug.encode("utf-8")[:_SLUG_FILE_BYTES - 13].decode("utf-8", "ignore") + "-" + digest
    return f"{INDEX_DIR}{slug}.md"


def _day(date: str) -> int | None:
    """The proleptic ordinal of an ISO date's day, or None."""
    try:
        return dt.date.fromisoformat(date[:10]).toordinal()
    except ValueError:
        return None


def recency_hint(date: str, newest: str) -> str:
    """Age against the shard's newest entry (a pure function of the shard, never the clock)."""
    then, last = _day(date), _day(newest)
    if then is None or last is None:
        return "-"
    return _age(max(0, last - then))


def _age(days: int) -> str:
    if days < 14:
        return f"{days}d"
    if days < 60:
        return f"{days // 7}w"
    if days < 730:
        return f"{days // 30}mo"
    return f"{days // 365}y"


def render_shard(topic: str, records: Iterable[IndexRecord]) -> bytes:
    return _shard_text(topic, [_shard_head(r) for r in sorted(records, key=lambda r: r.path)])


def patch_shard(topic: str, shard: bytes, drop: Iterable[str],
                add: Iterable[IndexRecord]) -> bytes | None:
    """`render_shard` of the rows of `shard` (bytes `render_shard` wrote: the caller checked
    its digest) without the paths in `drop` and with `add`; None when no row is left.

    A kept row stays text: the few rows dropped or added are found by binary search on the
    path order, so a topic held by half the corpus is patched without parsing its lines into
    records. When the shard's newest date stays what it was (another chapter of the same
    day, the common case), no kept row's recency hint changes and the rows are spliced as
    they are; otherwise every hint is made again."""
    text = shard.decode("utf-8", errors="replace")
    header, _, body = text.partition("\n")
    rows = body.split("\n")[:-1]  # the shard ends with a newline
    newest = header.rpartition(" · last-updated: ")[2]
    newest = "" if newest == "-" else newest
    dropped_newest = False
    for path in drop:
        at = bisect.bisect_left(rows, path, key=_row_path)
        if at < len(rows) and _row_path(rows[at]) == path:
            dropped_newest = dropped_newest or (bool(newest) and _row_date(rows[at]) == newest)
            del rows[at]
    heads = [_shard_head(record) for record in add]
    if dropped_newest or _newest([newest, *map(_row_date, heads)]) != newest:
        kept = [row.rpartition(" | ")[0] for row in rows]
        for head in heads:
            kept.insert(bisect.bisect_left(kept, _head_path(head), key=_head_path), head)
        return _shard_text(topic, kept) if kept else None
    for head in heads:
        rows.insert(bisect.bisect_left(rows, _head_path(head), key=_row_path),
                    f"{head} | {recency_hint(_row_date(head), newest)}")
    if not rows:
        return None
    lines = [f"# topic: {topic} · count: {len(rows)} · last-updated: {newest or '-'}", *rows]
    return ("\n".join(lines) + "\n").encode("utf-8")


def _row_path(row: str) -> str:
    """The path of a shard line (`date | title | path | (kind) | hint`; a title may hold
    ` | `, so it is counted from the end)."""
    return row.rsplit(" | ", 3)[1]


def _row_date(row: str) -> str:
    """The date field of a shard line or of a line before its hint."""
    return row[:row.find(" | ")]


def _newest(dates: Iterable[str]) -> str:
    """The newest of these date fields, which recency hints count from; "" when none is a date."""
    known = [(day, date) for date in dates if date and (day := _day(date)) is not None]
    return max(known)[1] if known else ""


def _shard_head(r: IndexRecord) -> str:
    """A shard line before its recency hint."""
    return f"{r.date[:10] if r.date else '-'} | {r.title} | {r.path} | ({r.kind})"


def _head_path(head: str) -> str:
    return head.rsplit(" | ", 2)[1]


def _shard_text(topic: str, heads: list[str]) -> bytes:
    """The shard of these lines (in path order): each gets the hint of its date field."""
    dates = [_row_date(head) for head in heads]
    days = {date: _day(date) for date in set(dates)}
    newest = _newest(days)
    newest_day = days[newest] if newest else None
    hints = {date: "-" if d is None or newest_day is None else _age(max(0, newest_day - d))
             for date, d in days.items()}
    lines = [f"# topic: {topic} · count: {len(heads)} · last-updated: {newest or '-'}"]
    lines.extend(f"{head} | {hints[date]}" for head, date in zip(heads, dates, strict=True))
    return ("\n".join(lines) + "\n").encode("utf-8")


def shard_member_paths(data: bytes) -> list[str]:
    """The paths a shard lists (the topic filter reads a whole shard, §8.1)."""
    paths: list[str] = []
    for line in data.decode("utf-8", errors="replace").splitlines()[1:]:
        fields = line.split(" | ")
        if len(fields) >= 5:
            paths.append(fields[-3])
    return paths


def canonical_topics(record: IndexRecord, curation: Curation) -> tuple[str, ...]:
    lookup = curation.aliases.lookup
    topics = {lookup.get(t, t) for t in record.topics}
    topics.update(curation.pins_of(record.path))
    return tuple(sorted(topics))


def record_topic_sets(manifest: IndexManifest, curation: Curation) -> list[tuple[str, ...]]:
    """Canonical topics of every parsed input (the vocabulary's co-occurrence input)."""
    return [canonical_topics(r, curation) for r in manifest.records() if not r.skipped]


def kind_of(record: IndexRecord) -> DocumentKind | None:
    try:
        return DocumentKind(record.kind)
    except ValueError:
        return None
