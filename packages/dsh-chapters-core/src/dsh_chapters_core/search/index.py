"""Layer 2 of the index (§10.2): topic shards and the build manifest, derived and incremental.

- `index/<topic-slug>.md`: one shard per canonical topic. A header line (topic, count,
  last-updated) then `date | title | path | (kind) | recency-hint` lines sorted by path. Every
  byte is a function of the corpus and the curation facts (never of the clock or the machine):
  last-updated is the newest date in the shard and the recency hint is an age against it.
- `index/manifest.json`: per input file the content hash processed, and what the shards need
  from it, plus the hash of every shard. One input a line, so git diffs stay readable.

An update reads only new or changed inputs (O(delta)); a full rebuild reads everything and
gives byte-identical files: both render shards from the same records with the same function.
A derived file found divergent (hand-edited, or a different build pulled) is re-rendered,
never merged (§3.3, §5.2).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
import hashlib
import json
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from dsh_chapters_core.curation import FactLog, FactType, merge_logs
from dsh_chapters_core.documents import Document, DocumentKind
from dsh_chapters_core.pool_layout import (
    CURATION_FILE,
    LOCAL_STORE_DIRS,
    SHARED_STORE_DIRS,
    is_session_id,
)
from dsh_chapters_core.ports.search import DerivedTree, DocumentReader
from dsh_chapters_core.ports.store import FileTree
from dsh_chapters_core.search.aliases import AliasMap, slugify
from dsh_chapters_core.search.vocabulary import VOCABULARY_PATH, vocabulary_document

INDEX_DIR = "index/"
# Tokens an update keeps besides its inputs': derived files and the edits files.
_NOT_INPUT_TOKENS = (INDEX_DIR, "topics/", "edits/")
# Top-level store directories that never hold a chapter or a rule (pool_layout.py).
_NOT_DOCUMENT_DIRS = frozenset(d for d in (*SHARED_STORE_DIRS, *LOCAL_STORE_DIRS) if d != "rules")
MANIFEST_PATH = "index/manifest.json"
MANIFEST_VERSION = 2
_NUMBERED_MD = re.compile(r"^[0-9]{3,}-[^/]*\.md$")
_KEY_LINE = re.compile(rb'"key": "([0-9a-f]{64})"')
# A file name must stay under the filesystem's 255-byte limit; longer slugs get a digest tail.
_SLUG_FILE_BYTES = 120


class DoorLayout(enum.StrEnum):
    """Where documents live under a door's root (§2.2 pool, §3.1 store)."""

    STORE = "store"  # <sid>/chapters/NNN-x.md, rules/<h>/NNN-c-x.md
    MIRROR = "mirror"  # chapters/<pk>/<sid>/NNN-x.md, rules/<pk>/<h>/NNN-c-x.md


def is_document_path(layout: DoorLayout, path: str) -> bool:
    if not path.endswith(".md") or " | " in path:
        return False  # " | " could not be told apart from a shard line's separators
    parts = path.split("/")
    if layout is DoorLayout.STORE:
        if len(parts) == 3 and parts[0] == "rules":
            return parts[2].endswith(".md") and not parts[2].startswith(".")
        return (len(parts) == 3 and parts[1] == "chapters" and is_session_id(parts[0])
                and bool(_NUMBERED_MD.match(parts[2])))
    if len(parts) == 4 and parts[0] == "rules":
        return parts[3].endswith(".md") and not parts[3].startswith(".")
    return len(parts) == 4 and parts[0] == "chapters" and bool(_NUMBERED_MD.match(parts[3]))


def document_prefixes(layout: DoorLayout) -> tuple[str, ...]:
    return ("",) if layout is DoorLayout.STORE else ("chapters/", "rules/")


def path_project(layout: DoorLayout, path: str) -> str:
    """The projectKey a mirror path names (`chapters/<pk>/…`); "" in the store."""
    parts = path.split("/")
    return parts[1] if layout is DoorLayout.MIRROR and len(parts) >= 3 else ""


def path_session(layout: DoorLayout, path: str) -> str:
    parts = path.split("/")
    if parts[0] == "rules":
        return ""
    if layout is DoorLayout.STORE:
        return parts[0]
    return parts[2] if len(parts) >= 4 else ""


def document_identity(path: str) -> str:
    """The same chapter's name in both layouts: `<sid>/<file>`, or `<harnessId>/<file>` for rules.

    `topic-pin` facts travel through the pool, so a pin written against a store path must
    find the mirror copy too.
    """
    parts = path.split("/")
    if parts[0] == "rules" and len(parts) >= 3:
        return f"{parts[-2]}/{parts[-1]}"
    if len(parts) == 3 and parts[1] == "chapters":
        return f"{parts[0]}/{parts[2]}"
    if len(parts) == 4 and parts[0] == "chapters":
        return f"{parts[2]}/{parts[3]}"
    return path


def scan_documents(tree: DerivedTree, layout: DoorLayout) -> dict[str, str]:
    """Every document path with its change token, from one walk that skips what is not a
    document's directory (artifacts, caches, derived files)."""
    found: dict[str, str] = {}
    skip = _NOT_DOCUMENT_DIRS if layout is DoorLayout.STORE else frozenset()
    for prefix in document_prefixes(layout):
        for path, token in tree.fingerprints(prefix, skip=skip).items():
            if is_document_path(layout, path):
                found[path] = token
    return dict(sorted(found.items()))


def list_documents(tree: FileTree, layout: DoorLayout) -> list[str]:
    found: list[str] = []
    for prefix in document_prefixes(layout):
        found.extend(p for p in tree.list(prefix) if is_document_path(layout, p))
    return sorted(set(found))


class SplitTree:
    """Documents from one tree, derived files (`index/`, `topics/`) in another.

    The pool mirror is transport: a file the provider did not commit makes it dirty (it is
    then moved aside and rebuilt), so search never writes into it. Its derived index lives in
    a machine-local directory instead; sync stages the same bytes when it publishes them.
    """

    DERIVED = (INDEX_DIR, "topics/")

    def __init__(self, documents: DerivedTree, derived: DerivedTree) -> None:
        self.documents = documents
        self.derived = derived
        self.root = documents.root

    def _side(self, path: str) -> DerivedTree:
        return self.derived if path.startswith(self.DERIVED) else self.documents

    def list(self, prefix: str = "") -> Iterator[str]:
        if prefix.startswith(self.DERIVED):
            return self.derived.list(prefix)
        own = [p for p in self.documents.list(prefix) if not p.startswith(self.DERIVED)]
        derived = [p for d in self.DERIVED if d.startswith(prefix) for p in self.derived.list(d)]
        return iter(sorted(own + derived))

    def exists(self, path: str) -> bool:
        return self._side(path).exists(path)

    def read(self, path: str) -> bytes:
        return self._side(path).read(path)

    def digest(self, path: str) -> str:
        return self._side(path).digest(path)

    def write(self, path: str, data: bytes) -> None:
        if not path.startswith(self.DERIVED):
            raise ValueError(f"the index writes only derived files, not {path!r}")
        self.derived.write(path, data)

    def remove(self, path: str) -> None:
        if path.startswith(self.DERIVED):
            self.derived.remove(path)

    def fingerprint(self, path: str) -> str:
        return self._side(path).fingerprint(path)

    def fingerprints(self, prefix: str = "", *, skip: Iterable[str] = ()) -> Mapping[str, str]:
        if prefix.startswith(self.DERIVED):
            return self.derived.fingerprints(prefix, skip=skip)
        skipped = (*skip, *(d.rstrip("/") for d in self.DERIVED))
        return self.documents.fingerprints(prefix, skip=skipped)


# ---------------------------------------------------------------------------------------------
# Layer 1 as the index reads it


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
    line: str = field(default="", compare=False, repr=False)  # its manifest line, when read

    @property
    def skipped(self) -> bool:
        return not self.kind

    def manifest_line(self) -> str:
        """`"<path>": {…}`: one input a line, keys sorted (the same bytes on every machine)."""
        return self.line or (
            f"{json.dumps(self.path, ensure_ascii=False)}: "
            f"{json.dumps(self.to_json(), ensure_ascii=False, sort_keys=True)}")

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
    topics = tuple(dict.fromkeys(s for s in (slugify(t) for t in doc.topics) if s))
    return IndexRecord(path=path, sha256=sha, kind=str(doc.kind), title=" ".join(doc.title.split()),
                       date=doc.date, project=doc.project_key, topics=topics)


@dataclass(frozen=True, slots=True)
class IndexManifest:
    """The build manifest, kept as its lines: an update patches the lines it touches and never
    parses the rest, so its cost follows the delta, not the corpus."""

    lines: tuple[str, ...] = ()  # the inputs section: one record a line, sorted by path
    edits: tuple[tuple[str, str], ...] = ()
    shards: Mapping[str, str] = field(default_factory=dict)  # shard path -> sha256
    curation: str = ""  # Curation.key the shards were built under
    documents: int = 0  # inputs that parsed as documents
    key: str = ""
    text: str = field(default="", compare=False, repr=False)  # body(), once computed

    @classmethod
    def of(cls, records: Mapping[str, IndexRecord], *, edits: tuple[tuple[str, str], ...],
           shards: Mapping[str, str], curation: str) -> IndexManifest:
        lines = tuple(records[p].manifest_line() for p in sorted(records))
        documents = sum(1 for r in records.values() if not r.skipped)
        return cls(lines, edits, dict(shards), curation, documents).with_key()

    @property
    def inputs(self) -> dict[str, IndexRecord]:
        """Every record, parsed now (O(N): for rebuilds, the vocabulary and reports)."""
        if not self.lines:
            return {}
        data = json.loads("{" + ",".join(self.lines) + "}")
        return {path: _record(path, r, line)
                for (path, r), line in zip(data.items(), self.lines, strict=True)}

    def find(self, path: str) -> tuple[int, IndexRecord | None]:
        """Binary search: the line index where `path` is or would go, and its record."""
        lo, hi = 0, len(self.lines)
        while lo < hi:
            mid = (lo + hi) // 2
            if _line_path(self.lines[mid]) < path:
                lo = mid + 1
            else:
                hi = mid
        if lo < len(self.lines) and _line_path(self.lines[lo]) == path:
            line = self.lines[lo]
            data = json.loads("{" + line + "}")
            return lo, _record(path, data[path], line)
        return lo, None

    def patched(self, changes: Mapping[str, IndexRecord | None], *,
                edits: tuple[tuple[str, str], ...], shards: Mapping[str, str],
                documents: int) -> IndexManifest:
        """These records replaced, added (a record) or dropped (None); everything else as is."""
        if (not changes and edits == self.edits and dict(shards) == dict(self.shards)
                and documents == self.documents):
            return self  # nothing moved: no re-serialization, no re-hash
        spots = sorted((*self.find(path)[:1], path) for path in changes)
        lines: list[str] = []
        at = 0
        for index, path in spots:
            lines.extend(self.lines[at:index])
            present = index < len(self.lines) and _line_path(self.lines[index]) == path
            new = changes[path]
            if new is not None:
                lines.append(new.manifest_line())
            at = max(at, index + (1 if present else 0))
        lines.extend(self.lines[at:])
        return IndexManifest(tuple(lines), edits, dict(shards), self.curation,
                             documents).with_key()

    def body(self) -> str:
        """Everything but the key line; the key is the sha256 of this text."""
        if self.text:
            return self.text
        parts = [f'"curation": {json.dumps(self.curation)},',
                 f'"documents": {self.documents},',
                 f'"edits": {json.dumps(dict(self.edits), sort_keys=True)},',
                 '"inputs": {']
        parts.append(",\n".join(self.lines))
        parts.append("},")
        parts.append('"shards": {')
        parts.append(",\n".join(f"{json.dumps(p, ensure_ascii=False)}: {json.dumps(s)}"
                                for p, s in sorted(self.shards.items())))
        parts.append("},")
        parts.append(f'"version": {MANIFEST_VERSION}')
        return "\n".join(part for part in parts if part) + "\n"

    def with_key(self) -> IndexManifest:
        body = self.body()
        key = hashlib.sha256(body.encode("utf-8")).hexdigest()
        return IndexManifest(self.lines, self.edits, self.shards, self.curation, self.documents,
                             key, body)

    def dump(self) -> bytes:
        return (f'{{\n"key": "{self.key}",\n' + self.body() + "}\n").encode("utf-8")


_DECODER = json.JSONDecoder()


def _line_path(line: str) -> str:
    path = _DECODER.raw_decode(line)[0]
    return path if isinstance(path, str) else ""


def _record(path: str, r: Mapping[str, Any], line: str = "") -> IndexRecord:
    return IndexRecord(path, r["sha256"], r["kind"], r["title"], r["date"], r["project"],
                       tuple(r["topics"]), line)


def load_manifest(tree: FileTree) -> IndexManifest | None:
    """The manifest as lines, or None if it is missing, unreadable or not what its key says
    (then the update is a rebuild). Only the small sections are parsed here."""
    if not tree.exists(MANIFEST_PATH):
        return None
    raw = tree.read(MANIFEST_PATH)
    try:
        text = raw.decode("utf-8")
        head, _, rest = text.partition("\n")
        key_line, _, rest = rest.partition("\n")
        match = _KEY_LINE.fullmatch(key_line.rstrip(",").encode("ascii"))
        if head != "{" or match is None or not rest.endswith("}\n"):
            return None
        body = rest[:-2]
        key = match.group(1).decode("ascii")
        if hashlib.sha256(body.encode("utf-8")).hexdigest() != key:
            return None  # hand-edited or torn: derived, so rebuild rather than trust it
        lines = body.split("\n")
        if (len(lines) < 9 or lines[3] != '"inputs": {'
                or lines[-2] != f'"version": {MANIFEST_VERSION}' or lines[-1] != ""):
            return None
        head_data = json.loads("{" + "".join(lines[:3]).rstrip(",") + "}")
        end_inputs = lines.index("},", 4)
        inputs = tuple(line.removesuffix(",") for line in lines[4:end_inputs])
        if lines[end_inputs + 1] != '"shards": {':
            return None
        end_shards = lines.index("},", end_inputs + 2)
        shards = json.loads("{" + "".join(lines[end_inputs + 2:end_shards]) + "}")
        return IndexManifest(
            lines=inputs,
            edits=tuple(sorted((str(k), str(v)) for k, v in head_data["edits"].items())),
            shards={str(k): str(v) for k, v in shards.items()},
            curation=str(head_data["curation"]),
            documents=int(head_data["documents"]),
            key=key,
            text=body,
        )
    except (ValueError, KeyError, TypeError, AttributeError, UnicodeError):
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
    rows = sorted(records, key=lambda r: r.path)
    days = [_day(r.date) for r in rows]
    known = [(d, r.date[:10]) for d, r in zip(days, rows, strict=True) if d is not None]
    newest_day, newest = max(known) if known else (None, "")
    lines = [f"# topic: {topic} · count: {len(rows)} · last-updated: {newest or '-'}"]
    for r, d in zip(rows, days, strict=True):
        date = r.date[:10] if r.date else "-"
        hint = "-" if d is None or newest_day is None else _age(max(0, newest_day - d))
        lines.append(f"{date} | {r.title} | {r.path} | ({r.kind}) | {hint}")
    return ("\n".join(lines) + "\n").encode("utf-8")


def shard_rows(data: bytes) -> list[IndexRecord]:
    """A shard's lines back as records: all `render_shard` needs to render them again."""
    rows: list[IndexRecord] = []
    for line in data.decode("utf-8", errors="replace").splitlines()[1:]:
        fields = line.split(" | ")
        if len(fields) >= 5:
            date = "" if fields[0] == "-" else fields[0]
            kind = fields[-2].removeprefix("(").removesuffix(")")
            rows.append(IndexRecord(fields[-3], "", kind, " | ".join(fields[1:-3]), date))
    return rows


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


# ---------------------------------------------------------------------------------------------
# The update


@dataclass(frozen=True, slots=True)
class IndexUpdate:
    manifest: IndexManifest
    curation: Curation
    rebuilt: bool
    added: tuple[str, ...] = ()
    changed: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    skipped: tuple[str, ...] = ()  # inputs that did not parse as documents
    shards_written: tuple[str, ...] = ()
    shards_removed: tuple[str, ...] = ()
    divergent: tuple[str, ...] = ()  # derived files found divergent and re-rendered
    loaded: tuple[tuple[Document, str], ...] = ()  # (document, sha256) of what was read
    prior_key: str = ""  # the manifest key before this update ("" on a rebuild)
    fingerprints: Mapping[str, str] = field(default_factory=dict)

    @property
    def shard_count(self) -> int:
        return len(self.manifest.shards)


def update_index(
    tree: DerivedTree,
    *,
    layout: DoorLayout,
    reader: DocumentReader,
    fingerprints: Mapping[str, str] | None = None,
    rebuild: bool = False,
    changed: Iterable[str] | None = None,
) -> IndexUpdate:
    """Bring `index/` and `topics/vocabulary.json` up to date under `tree`'s root.

    `fingerprints` are the machine-local change tokens of the last update (path -> token);
    an input whose token is unchanged is not read. `changed` narrows the scan to paths a
    caller knows it wrote (archive, copy-in); without it every document path is walked.
    `rebuild` ignores the manifest: the recovery path, byte-identical to incremental.

    The delta path reads only changed inputs and the shards of their topics, and patches the
    manifest's lines; anything it cannot vouch for (facts changed, a shard found divergent,
    tokens from another build) falls back to the full derivation from the manifest.
    """
    curation = read_curation(tree)
    prior = None if rebuild else load_manifest(tree)
    if prior is not None and prior.curation == curation.key and fingerprints:
        delta = _update_delta(tree, layout, reader, prior, curation, dict(fingerprints),
                              None if changed is None else list(changed))
        if delta is not None:
            return delta
    return _update_full(tree, layout, reader, prior, curation, fingerprints, changed)


@dataclass
class _Reads:
    """What reading the candidates found (mutable bookkeeping of one update)."""

    added: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    loaded: list[tuple[Document, str]] = field(default_factory=list)


def _read_candidate(tree: DerivedTree, layout: DoorLayout, reader: DocumentReader, path: str,
                    old: IndexRecord | None, reads: _Reads) -> IndexRecord | None:
    """The new record of a changed input, or None if its bytes are what the manifest has."""
    data = tree.read(path)
    sha = hashlib.sha256(data).hexdigest()
    if old is not None and old.sha256 == sha:
        return None
    parsed = reader.parse(path, data)
    doc = normalize_document(layout, path, parsed) if parsed is not None else None
    if doc is None:
        reads.skipped.append(path)
    else:
        # Kept for the search cache: only what an entry is built from (bounded memory).
        reads.loaded.append((dataclasses.replace(
            doc, extra=(), messages=(), sha256="", body_sha256=""), sha))
    (reads.added if old is None else reads.updated).append(path)
    return record_of(path, sha, doc)


def _update_delta(
    tree: DerivedTree,
    layout: DoorLayout,
    reader: DocumentReader,
    prior: IndexManifest,
    curation: Curation,
    tokens: dict[str, str],
    changed: list[str] | None,
) -> IndexUpdate | None:
    if changed is None:
        listed = scan_documents(tree, layout)
        known = [p for p in tokens if not p.startswith(_NOT_INPUT_TOKENS)]
        if len(known) != len(prior.lines):
            return None  # these tokens are not from the build that wrote this manifest
        removed = sorted(p for p in known if p not in listed)
        candidates = {p: t for p, t in listed.items() if tokens.get(p) != t}
    else:
        wanted = sorted({p for p in changed if is_document_path(layout, p)})
        current = {p: tree.fingerprint(p) for p in wanted}
        removed = [p for p in wanted if not current[p]]
        candidates = {p: t for p, t in current.items() if t and tokens.get(p) != t}

    reads = _Reads()
    changes: dict[str, IndexRecord | None] = {}
    old_records: dict[str, IndexRecord] = {}
    for path, token in candidates.items():
        _, old = prior.find(path)
        new = _read_candidate(tree, layout, reader, path, old, reads)
        tokens[path] = token
        if new is not None:
            changes[path] = new
            if old is not None:
                old_records[path] = old
    for path in removed:
        _, old = prior.find(path)
        tokens.pop(path, None)
        if old is not None:
            changes[path] = None
            old_records[path] = old

    affected: set[str] = set()
    for old in old_records.values():
        if not old.skipped:
            affected.update(canonical_topics(old, curation))
    for new in changes.values():
        if new is not None and not new.skipped:
            affected.update(canonical_topics(new, curation))

    divergent: list[str] = []
    for shard, sha in prior.shards.items():
        token = tree.fingerprint(shard)
        if token and tokens.get(shard) == token:
            continue
        if not token or tree.digest(shard) != sha:
            return None  # §3.3: a divergent shard is re-derived from every record (full path)
        tokens[shard] = token

    shards = dict(prior.shards)
    written: list[str] = []
    for topic in sorted(affected):
        path = shard_path(topic)
        rows: dict[str, IndexRecord] = {}
        if path in prior.shards:
            rows = {r.path: r for r in shard_rows(tree.read(path))}
        for touched in changes:
            rows.pop(touched, None)
        for touched, new in changes.items():
            if new is not None and not new.skipped and topic in canonical_topics(new, curation):
                rows[touched] = new
        if not rows:
            shards.pop(path, None)
            continue
        data = render_shard(topic, rows.values())
        shards[path] = hashlib.sha256(data).hexdigest()
        if shards[path] != prior.shards.get(path) or not tree.exists(path):
            tree.write(path, data)
            written.append(path)
        tokens[path] = tree.fingerprint(path)
    removed_shards = _drop_strays(tree, shards, tokens, divergent, prior)

    gone = sum(1 for r in old_records.values() if not r.skipped)
    came = sum(1 for r in changes.values() if r is not None and not r.skipped)
    manifest = prior.patched(changes, edits=curation.digests, shards=shards,
                             documents=prior.documents - gone + came)
    return _finish(tree, prior, manifest, curation, tokens, everything=False, reads=reads,
                   removed=tuple(p for p in removed if p in old_records), written=written,
                   removed_shards=removed_shards, divergent=divergent)


def _update_full(
    tree: DerivedTree,
    layout: DoorLayout,
    reader: DocumentReader,
    prior: IndexManifest | None,
    curation: Curation,
    fingerprints: Mapping[str, str] | None,
    changed: Iterable[str] | None,
) -> IndexUpdate:
    """Every shard derived from every record: the recovery path, and the path after the
    curation facts changed. Inputs whose bytes the manifest already has are not re-parsed."""
    tokens: dict[str, str] = dict(fingerprints or {}) if prior is not None else {}
    records: dict[str, IndexRecord] = prior.inputs if prior is not None else {}
    if changed is None or prior is None:
        listed = scan_documents(tree, layout)  # one walk: paths and their change tokens
        removed = sorted(p for p in records if p not in listed)
        candidates: Mapping[str, str] = listed
    else:
        wanted = sorted({p for p in changed if is_document_path(layout, p)})
        current = {p: tree.fingerprint(p) for p in wanted}
        removed = [p for p in wanted if p in records and not current[p]]
        candidates = {p: t for p, t in current.items() if t}

    reads = _Reads()
    for path, token in candidates.items():
        old = records.get(path)
        if old is not None and token and tokens.get(path) == token:
            continue
        new = _read_candidate(tree, layout, reader, path, old, reads)
        tokens[path] = token
        if new is not None:
            records[path] = new
    for path in removed:
        records.pop(path)
        tokens.pop(path, None)

    divergent: list[str] = []
    if prior is not None:
        for shard, sha in prior.shards.items():
            token = tree.fingerprint(shard)
            if token and tokens.get(shard) != token and tree.digest(shard) != sha:
                divergent.append(shard)  # §3.3: rebuilt below like every shard, never merged
            elif not token:
                divergent.append(shard)

    members = _shard_members(records.values(), curation, None)
    shards: dict[str, str] = {}
    written: list[str] = []
    for topic, rows in sorted(members.items()):
        path = shard_path(topic)
        data = render_shard(topic, rows)
        sha = hashlib.sha256(data).hexdigest()
        shards[path] = sha
        token = tree.fingerprint(path)
        same = prior is not None and prior.shards.get(path) == sha
        if same and token and tokens.get(path) == token:
            continue  # on disk as we last wrote it, and the same content
        if not token or tree.digest(path) != sha:
            tree.write(path, data)
            written.append(path)
            token = tree.fingerprint(path)
        tokens[path] = token
    removed_shards = _drop_strays(tree, shards, tokens, divergent, prior)
    manifest = IndexManifest.of(records, edits=curation.digests, shards=shards,
                                curation=curation.key)
    return _finish(tree, prior, manifest, curation, tokens,
                   everything=prior is None or prior.curation != curation.key, reads=reads,
                   removed=tuple(removed), written=written, removed_shards=removed_shards,
                   divergent=divergent)


def _drop_strays(tree: DerivedTree, shards: Mapping[str, str], tokens: dict[str, str],
                 divergent: list[str], prior: IndexManifest | None) -> list[str]:
    """Remove shard files no build produced (or whose topic is gone)."""
    removed: list[str] = []
    for path in tree.list(INDEX_DIR):
        if path.endswith(".md") and path.count("/") == 1 and path not in shards:
            tree.remove(path)
            tokens.pop(path, None)
            removed.append(path)
            if prior is not None and path not in prior.shards:
                divergent.append(path)  # a stray shard no build produced
    return sorted(removed)


def _finish(tree: DerivedTree, prior: IndexManifest | None, manifest: IndexManifest,
            curation: Curation, tokens: dict[str, str], *, everything: bool, reads: _Reads,
            removed: tuple[str, ...], written: list[str], removed_shards: list[str],
            divergent: list[str]) -> IndexUpdate:
    if prior is None or prior.key != manifest.key or not tree.exists(MANIFEST_PATH):
        tree.write(MANIFEST_PATH, manifest.dump())
    tokens[MANIFEST_PATH] = tree.fingerprint(MANIFEST_PATH)
    for path in edits_paths(tree):
        tokens[path] = tree.fingerprint(path)
    # topics/vocabulary.json is derived from the alias facts alone (§6.3).
    token = tree.fingerprint(VOCABULARY_PATH)
    if everything or not token or tokens.get(VOCABULARY_PATH) != token:
        vocabulary = vocabulary_document(curation.aliases)
        if not token or tree.digest(VOCABULARY_PATH) != hashlib.sha256(vocabulary).hexdigest():
            tree.write(VOCABULARY_PATH, vocabulary)
        tokens[VOCABULARY_PATH] = tree.fingerprint(VOCABULARY_PATH)
    return IndexUpdate(
        manifest=manifest,
        curation=curation,
        rebuilt=prior is None,
        added=tuple(reads.added),
        changed=tuple(reads.updated),
        removed=removed,
        skipped=tuple(reads.skipped),
        shards_written=tuple(written),
        shards_removed=tuple(removed_shards),
        divergent=tuple(sorted(set(divergent))),
        loaded=tuple(reads.loaded),
        prior_key=prior.key if prior is not None else "",
        fingerprints=tokens,
    )


def _shard_members(
    records: Iterable[IndexRecord], curation: Curation, only: set[str] | None
) -> dict[str, list[IndexRecord]]:
    """Topic -> records, for every topic (`only` None) or just the affected ones."""
    lookup = curation.aliases.lookup
    pinned = dict(curation.pins)
    members: dict[str, list[IndexRecord]] = {}
    for record in records:
        if record.skipped:
            continue
        if only is None or pinned:
            topics: Iterable[str] = canonical_topics(record, curation)
        elif lookup:
            topics = {lookup.get(t, t) for t in record.topics}
        else:
            topics = record.topics  # slugified and distinct already
        for topic in topics:
            if only is None or topic in only:
                members.setdefault(topic, []).append(record)
    return members


def index_is_current(tree: DerivedTree, layout: DoorLayout,
                     fingerprints: Mapping[str, str]) -> bool:
    """True when no document, edits file or manifest changed since the update that left
    these tokens: one walk of stats, no file read, so a search can afford to ask."""
    if not fingerprints or fingerprints.get(MANIFEST_PATH) != tree.fingerprint(MANIFEST_PATH):
        return False
    edits = edits_paths(tree)
    if any(fingerprints.get(p) != tree.fingerprint(p) for p in edits):
        return False
    known_edits = sum(1 for p in fingerprints if p.startswith("edits/"))
    if known_edits != len(edits):
        return False
    listed = scan_documents(tree, layout)
    known = sum(1 for p in fingerprints if not p.startswith(_NOT_INPUT_TOKENS))
    return known == len(listed) and all(fingerprints.get(p) == t for p, t in listed.items())


def record_topic_sets(manifest: IndexManifest, curation: Curation) -> list[tuple[str, ...]]:
    """Canonical topics of every parsed input (the vocabulary's co-occurrence input)."""
    return [canonical_topics(r, curation) for r in manifest.inputs.values() if not r.skipped]


def kind_of(record: IndexRecord) -> DocumentKind | None:
    try:
        return DocumentKind(record.kind)
    except ValueError:
        return None
