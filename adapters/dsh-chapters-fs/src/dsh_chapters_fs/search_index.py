"""The search index of one door, in one SQLite file (search.md "The search index").

Lives at `.dsh-chapters/cache/search-<door>.sqlite`: derived, machine-local, never published;
deleting it is always safe (the next search or `chapters index` builds it again).

- `docs`: one row per document: its frontmatter fields and terms, and its passages (per
  passage its words, first body line and line count), so a query never reads a chapter.
- `fields`: the frontmatter postings, one row per (term, document) with the fields it is in.
- `postings`: the body postings, one row per (segment, term): a blob of the term's postings
  over the segment's documents, packed column by column, and where the segment holds the term
  in many documents, the list of its strongest holders (search_postings.py). A rowid table,
  its key in an index of its own: in a table without rowid, a blob spilling over pages is its
  own key, and SQLite reads a key whole to compare it, so a seek that met a common word's blob
  of megabytes on its way down read it all (2 ms to find a rare word in 14 segments of
  100,000 chapters, 0.02 ms now).

Documents are written in *segments*, a batch at a time, so writing a chapter appends rows and
never rewrites a long posting list (the way Lucene writes). A document gets an id larger than
any before it and lands in the newest segment, so a term's rows read in segment order are in
document order. A removed or rewritten document's id is recorded as dead; its postings stay
until their segment is merged. Segments are merged by size tier, adjacent ones only (eight of
one tier make one of the next), so a term is a few rows to read however the door grew.
"""

from __future__ import annotations

import dataclasses
import heapq
import itertools
import sqlite3
from array import array
from collections.abc import Iterable, Iterator, Mapping, Sequence
from collections.abc import Set as AbstractSet
from datetime import UTC, datetime
from operator import itemgetter
from pathlib import Path

from dsh_chapters_core.config import DEFAULTS
from dsh_chapters_core.documents import DocumentKind
from dsh_chapters_core.ports.search import FieldHits
from dsh_chapters_core.search.dates import TimeWindow
from dsh_chapters_core.search.entries import SearchEntry
from dsh_chapters_core.search.passages import BodyStats, body_passages
from dsh_chapters_core.search.stitching import is_legacy_fragment
from dsh_chapters_core.search.topk import DocFacts, Postings

from dsh_chapters_fs.search_postings import (
    HEAD,
    LAZY_BYTES,
    U32,
    BlobPostings,
    merge_blobs,
    pack_rows,
    read_postings,
)

SCHEMA_VERSION = 21
_SEP = "\x1f"  # joins labels in a column; never part of a label (labels are slugs)
_BUSY_TIMEOUT_MS = 10_000
_KINDS = {k.value: k for k in DocumentKind}
# Eight segments of one size tier are merged into one of the next (a tier is a power of
# eight of rows): a term is at most a few rows per tier to read.
_MERGE_FANIN = 8
_TIER_BASE_ROWS = 4096
_MERGE_PENDING_BYTES = 8 << 20
_FIELD_MARKS = ("t", "i", "s", "c")  # topic, title, summary, category
_RULE_MARK = "r"
# SQLite's page cache, per connection: larger while writing, small while reading (see _connect).
# A write walks each table in key order (`_FieldRows`, postings by term), so 8 MB is as fast as
# 64 MB was and holds 116 MB less at the peak of a 10k rebuild (SQLite's pages cost more than
# their size).
_WRITE_CACHE_KIB = 8_192
_READ_CACHE_KIB = 2_048
_first = itemgetter(0)
_ENTRY_COLUMNS = ("path, kind, title, date, date_key, topics, summary, category, project_key, "
                  "session_id, rule_id, raw_topics, t_topic, t_title, t_summary, t_category, "
                  "body_line")
_SCHEMA = f"""
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS docs (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  path TEXT NOT NULL UNIQUE, sha256 TEXT NOT NULL, seg INTEGER NOT NULL,
  kind TEXT NOT NULL, title TEXT NOT NULL, date TEXT NOT NULL, date_key REAL NOT NULL,
  topics TEXT NOT NULL, summary TEXT NOT NULL, category TEXT NOT NULL,
  project_key TEXT NOT NULL, session_id TEXT NOT NULL, rule_id TEXT NOT NULL,
  raw_topics TEXT NOT NULL, t_topic TEXT NOT NULL, t_title TEXT NOT NULL,
  t_summary TEXT NOT NULL, t_category TEXT NOT NULL, legacy INTEGER NOT NULL,
  session_dir TEXT NOT NULL, body_line INTEGER NOT NULL,
  words INTEGER NOT NULL, passages BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS docs_fragments ON docs(session_dir) WHERE legacy = 1;
CREATE INDEX IF NOT EXISTS docs_project ON docs(project_key);
CREATE INDEX IF NOT EXISTS docs_segment ON docs(seg);
CREATE INDEX IF NOT EXISTS docs_date ON docs(date_key);
CREATE TABLE IF NOT EXISTS fields (
  term TEXT NOT NULL, id INTEGER NOT NULL, marks TEXT NOT NULL, PRIMARY KEY (term, id)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS segments (
  seg INTEGER PRIMARY KEY, docs INTEGER NOT NULL, rows INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS postings (
  seg INTEGER NOT NULL, term TEXT NOT NULL, data BLOB NOT NULL, PRIMARY KEY (seg, term)
);
CREATE TABLE IF NOT EXISTS dead (id INTEGER PRIMARY KEY, seg INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS tallies (name TEXT PRIMARY KEY, n INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS settings (key TEXT PRIMARY KEY, value TEXT NOT NULL);
PRAGMA user_version = {SCHEMA_VERSION};
"""


def _pack(values: Iterable[int]) -> bytes:
    return array(U32, values).tobytes()


class _Segment:
    """The postings of a batch of documents being written: per term, its rows as one flat
    list (document, passage, frequency, passage words, first mention), in document order."""

    def __init__(self) -> None:
        self.terms: dict[str, list[int]] = {}
        self.docs = 0
        self.rows = 0

    def add(self, doc: int, passages: Sequence[tuple[int, Mapping[str, int]]]) -> None:
        """A document's passages as (words, term frequencies), in order."""
        terms = self.terms
        get = terms.get
        for k, (length, tf) in enumerate(passages):
            # `tf` is in first-mention order (passages.Passage): a term's place is its mention.
            for mention, (term, n) in enumerate(tf.items()):
                rows = get(term)
                if rows is None:
                    terms[term] = [doc, k, n, length, mention]
                else:
                    rows += (doc, k, n, length, mention)
            self.rows += len(tf)
        self.docs += 1

    def blobs(self, expected: float) -> Iterator[tuple[str, bytes]]:
        for term in sorted(self.terms):
            yield term, pack_rows(self.terms[term], expected)


class _FieldRows:
    """New documents' frontmatter rows, written to `fields` in key order a batch at a time.

    The table's key is (term, document). Written a document at a time, a batch of documents
    lands on a page of the table for every term it holds, all over the table, and each page is
    written again for the next document that holds one of its terms unless SQLite's cache still
    has it: at 100,000 chapters that took a 64 MB cache. Sorted, a batch walks the table once,
    each page once, whatever the cache. New documents have the largest ids, so each row goes
    at the end of its term's run."""

    MAX_ROWS = 65_536  # about 5 MB of tuples waiting

    def __init__(self, db: sqlite3.Connection) -> None:
        self.db = db
        self.rows: list[tuple[str, int, str]] = []

    def add(self, rows: list[tuple[str, int, str]]) -> None:
        self.rows += rows
        if len(self.rows) >= self.MAX_ROWS:
            self.write()

    def write(self) -> None:
        if self.rows:
            self.rows.sort()
            self.db.executemany("INSERT INTO fields(term, id, marks) VALUES (?, ?, ?)",
                                self.rows)
            self.rows = []


def _labels(text: str) -> tuple[str, ...]:
    return tuple(text.split(_SEP)) if text else ()


def _entry(row: Sequence[object]) -> SearchEntry:
    (path, kind, title, date, date_key, topics, summary, category, project_key, session_id,
     rule_id, raw_topics, t_topic, t_title, t_summary, t_category, body_line) = row
    return SearchEntry(
        path=str(path), kind=_KINDS[str(kind)], title=str(title), date=str(date),
        topics=_labels(str(topics)), summary=str(summary), category=str(category),
        project_key=str(project_key), session_id=str(session_id), rule_id=str(rule_id),
        date_key=float(date_key),  # type: ignore[arg-type]
        topic_terms=frozenset(str(t_topic).split()), title_terms=frozenset(str(t_title).split()),
        summary_terms=frozenset(str(t_summary).split()),
        category_terms=frozenset(str(t_category).split()), raw_topics=_labels(str(raw_topics)),
        body_line=int(body_line),  # type: ignore[call-overload]
    )


def _field_rows(doc: int, entry: SearchEntry) -> list[tuple[str, int, str]]:
    marks: dict[str, str] = {}
    for mark, terms in zip(_FIELD_MARKS, (entry.topic_terms, entry.title_terms,
                                          entry.summary_terms, entry.category_terms),
                           strict=True):
        for term in terms:
            marks[term] = marks.get(term, "") + mark
    rule = _RULE_MARK if entry.kind is DocumentKind.RULE else ""
    return [(term, doc, m + rule) for term, m in marks.items()]


def _field_hits(marks: str, rule: tuple[str, str] = ("", "")) -> FieldHits:
    """A document's frontmatter hits from its matching rows' marks, joined."""
    return FieldHits(marks.count("t"), marks.count("i"), marks.count("s"), "c" in marks, rule)


def _field_terms(entry_terms: Sequence[str]) -> set[str]:
    return {t for text in entry_terms for t in text.split()}


def _chunks(items: Sequence[object], size: int = 500) -> Iterator[Sequence[object]]:
    for start in range(0, len(items), size):
        yield items[start:start + size]


# The tables a seed copies whole (`SqliteSearchIndex.seed_from`): all but the state (`meta`,
# left empty for the caller to compare) and `settings` (the same passage size, checked first).
_SEEDED_TABLES = ("docs", "fields", "segments", "postings", "dead", "tallies")


class SqliteSearchIndex:
    """A SearchIndex in one SQLite file. Opened lazily; `close()` releases it."""

    def __init__(self, path: str | Path, *,
                 passage_lines: int = DEFAULTS.search_passage_lines,
                 segment_bytes: int = DEFAULTS.search_segment_bytes,
                 lazy_bytes: int = LAZY_BYTES) -> None:
        self.path = Path(path)
        self.passage_lines = passage_lines  # where long blocks are cut into passages
        self.segment_bytes = segment_bytes  # body text a segment holds before it is written
        self._db: sqlite3.Connection | None = None
        self.lazy_bytes = lazy_bytes  # a term with a blob past this is read as asked
        self._loaded: dict[str, Postings | None] = {}  # the last query's postings
        self._open: list[BlobPostings] = []  # postings reading their blobs as asked
        self._dead: frozenset[int] | None = None
        self._segs: list[int] | None = None

    # -- connection ------------------------------------------------------------------------

    def _connect(self) -> sqlite3.Connection:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        db = sqlite3.connect(self.path, timeout=_BUSY_TIMEOUT_MS / 1000, isolation_level=None)
        try:
            db.execute("PRAGMA synchronous=NORMAL")  # derived data: a crash means a rebuild
            # Every caller opens the index for one question and closes it after (the command
            # line, the MCP server, the viewer), and a query reads each page of its postings
            # once: a large cache only holds what was read. With 2 MB, a 100k search holds
            # 52 MB less and is as fast, a question at a time; `apply` raises it for writes.
            db.execute(f"PRAGMA cache_size = -{_READ_CACHE_KIB}")
            version = db.execute("PRAGMA user_version").fetchone()[0]
            if version == SCHEMA_VERSION:
                # An index of this schema: no DDL to run, so a query opens it in a few reads
                # (the MCP server opens it once a question). WAL mode is kept in the file.
                lines = db.execute(
                    "SELECT value FROM settings WHERE key = 'passageLines'").fetchone()
                if lines is not None and lines[0] == str(self.passage_lines):
                    return db
            if version not in (0, SCHEMA_VERSION):
                db.close()
                self._drop_files()
                db = sqlite3.connect(self.path, timeout=_BUSY_TIMEOUT_MS / 1000,
                                     isolation_level=None)
            db.execute("PRAGMA journal_mode=WAL")
            db.executescript(_SCHEMA)
            lines = db.execute("SELECT value FROM settings WHERE key = 'passageLines'").fetchone()
            if lines is None and not db.execute("SELECT 1 FROM docs LIMIT 1").fetchone():
                db.execute("INSERT OR REPLACE INTO settings VALUES ('passageLines', ?)",
                           (str(self.passage_lines),))
            elif lines is None or lines[0] != str(self.passage_lines):
                # Passages cut at another size would score differently: derived, so start
                # over; the use case finds the index empty and fills it.
                db.close()
                self._drop_files()
                return self._connect()
        except sqlite3.DatabaseError:
            db.close()
            raise
        return db

    def _drop_files(self) -> None:
        for suffix in ("", "-wal", "-shm"):
            Path(str(self.path) + suffix).unlink(missing_ok=True)

    @property
    def db(self) -> sqlite3.Connection:
        if self._db is None:
            try:
                self._db = self._connect()
            except sqlite3.DatabaseError:
                # A corrupt index is derived data: drop it and start over.
                self._drop_files()
                self._db = self._connect()
        return self._db

    def close(self) -> None:
        self.release()
        if self._db is not None:
            self._db.close()
            self._db = None

    def _pin(self) -> sqlite3.Connection:
        """The connection, in a read transaction from the first read of a question on: the
        segments, dead documents and every postings blob a question reads are of one state of
        the index, whatever another process writes meanwhile (WAL: it never waits on us)."""
        db = self.db
        if not db.in_transaction:
            db.execute("BEGIN")
        return db

    def release(self) -> None:
        """What `_pin` held: open blobs closed, the read transaction ended, cached reads let go."""
        for found in self._open:
            found.close()
        self._open = []
        if self._db is not None and self._db.in_transaction:
            self._db.execute("COMMIT")
        self._loaded = {}
        self._dead = None
        self._segs = None

    def __enter__(self) -> SqliteSearchIndex:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- writing ---------------------------------------------------------------------------

    def state(self) -> Mapping[str, str]:
        return {str(k): str(v) for k, v in self.db.execute("SELECT key, value FROM meta")}

    def shas(self) -> Mapping[str, str]:
        return {str(p): str(s) for p, s in self.db.execute("SELECT path, sha256 FROM docs")}

    def apply(
        self,
        *,
        upserts: Iterable[tuple[SearchEntry, str]],
        removed: Iterable[str],
        state: Mapping[str, str],
        reset: bool = False,
    ) -> None:
        self.release()
        db = self.db
        db.execute(f"PRAGMA cache_size = -{_WRITE_CACHE_KIB}")
        db.execute("BEGIN IMMEDIATE")
        try:
            if reset:
                for table in ("docs", "fields", "segments", "postings", "dead", "tallies"):
                    db.execute(f"DELETE FROM {table}")
            for path in removed:
                self._remove(db, path)
            segment = _Segment()
            seg = self._next_segment(db)
            pending = 0
            fields = _FieldRows(db)
            for entry, sha in upserts:
                old = db.execute("SELECT id, sha256 FROM docs WHERE path = ?",
                                 (entry.path,)).fetchone()
                if old is not None:
                    fields.write()  # its rows may still be waiting: in the table first
                if old is not None and old[1] == sha:
                    self._refield(db, int(old[0]), entry)  # same bytes, other aliases or pins
                    continue
                if old is not None:
                    self._remove(db, entry.path)
                pending += self._insert(db, segment, seg, entry, sha, fields)
                if pending >= self.segment_bytes:
                    self._flush(db, segment, seg)
                    segment, seg, pending = _Segment(), self._next_segment(db), 0
            fields.write()
            self._flush(db, segment, seg)
            if state:
                db.execute("DELETE FROM meta")
                db.executemany("INSERT INTO meta(key, value) VALUES (?, ?)",
                               sorted(state.items()))
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
        finally:
            db.execute(f"PRAGMA cache_size = -{_READ_CACHE_KIB}")

    def seed_from(self, other: object, paths: Mapping[str, str]) -> int:
        """`other`'s rows copied in, its documents renamed to this index's paths and the
        others dropped as `_remove` drops one, all in one transaction: a reader sees this
        index empty, then seeded. Postings, passages and fields stay as `other` computed them
        from the same bytes; its id counter comes too, so an id it retired is never reused."""
        if (not isinstance(other, SqliteSearchIndex) or not paths
                or other.passage_lines != self.passage_lines):
            return 0
        self.release()
        other.release()
        db = self.db
        db.execute("ATTACH DATABASE ? AS seed", (str(other.path),))
        try:
            db.execute("BEGIN IMMEDIATE")
            try:
                taken = self._seed(db, paths)
                db.execute("COMMIT" if taken else "ROLLBACK")
            except BaseException:
                db.execute("ROLLBACK")
                raise
        finally:
            db.execute("DETACH DATABASE seed")
        return taken

    def _seed(self, db: sqlite3.Connection, paths: Mapping[str, str]) -> int:
        if (db.execute("SELECT 1 FROM main.docs LIMIT 1").fetchone()
                or db.execute("SELECT 1 FROM main.meta LIMIT 1").fetchone()):
            return 0  # not empty: only a first index takes a seed
        for table in _SEEDED_TABLES:  # what an emptied index may still hold (dead segments)
            db.execute(f"DELETE FROM main.{table}")
            db.execute(f"INSERT INTO main.{table} SELECT * FROM seed.{table}")
        db.execute("DELETE FROM main.sqlite_sequence WHERE name = 'docs'")
        db.execute("INSERT INTO main.sqlite_sequence(name, seq) "
                   "SELECT name, seq FROM seed.sqlite_sequence WHERE name = 'docs'")
        taken = 0
        for doc, path in db.execute("SELECT id, path FROM main.docs").fetchall():
            twin = paths.get(path)
            if twin is None:
                self._remove(db, path)
                continue
            db.execute("UPDATE main.docs SET path = ?, session_dir = ? WHERE id = ?",
                       (twin, twin.rsplit("/", 1)[0] if "/" in twin else "", doc))
            taken += 1
        return taken

    @staticmethod
    def _next_segment(db: sqlite3.Connection) -> int:
        row = db.execute("SELECT max(seg) FROM (SELECT seg FROM segments UNION ALL "
                         "SELECT seg FROM dead)").fetchone()
        return int(row[0] or 0) + 1

    def _insert(self, db: sqlite3.Connection, segment: _Segment, seg: int, entry: SearchEntry,
                sha: str, fields: _FieldRows) -> int:
        """Index one new document into `segment`; returns the body bytes it held."""
        passages = body_passages(entry.body, self.passage_lines) if entry.body else []
        layout = array(U32)
        for p in passages:
            layout += array(U32, (p.length, p.first, p.lines))
        words = sum(p.length for p in passages)
        legacy = is_legacy_fragment(entry)
        cursor = db.execute(
            f"INSERT INTO docs(sha256, seg, legacy, session_dir, words, passages, "
            f"{_ENTRY_COLUMNS}) VALUES ({','.join('?' * 23)})",
            (sha, seg if passages else 0, 1 if legacy else 0, entry.session_dir, words,
             layout.tobytes(), *self._columns(entry)))
        doc = int(cursor.lastrowid or 0)
        fields.add(_field_rows(doc, entry))
        if passages:
            segment.add(doc, [(p.length, p.tf) for p in passages])
        self._tally(db, entry, legacy, len(passages), words, +1)
        return len(entry.body)

    @staticmethod
    def _columns(entry: SearchEntry) -> tuple[object, ...]:
        return (entry.path, str(entry.kind), entry.title, entry.date, entry.date_key,
                _SEP.join(entry.topics), entry.summary, entry.category, entry.project_key,
                entry.session_id, entry.rule_id, _SEP.join(entry.raw_topics),
                " ".join(sorted(entry.topic_terms)), " ".join(sorted(entry.title_terms)),
                " ".join(sorted(entry.summary_terms)), " ".join(sorted(entry.category_terms)),
                entry.body_line)

    def _refield(self, db: sqlite3.Connection, doc: int, entry: SearchEntry) -> None:
        """A document whose bytes are unchanged, under new aliases or pins: its frontmatter
        rows change, its passages and postings stay."""
        old = db.execute("SELECT t_topic, t_title, t_summary, t_category, project_key, legacy "
                         "FROM docs WHERE id = ?", (doc,)).fetchone()
        db.executemany("DELETE FROM fields WHERE term = ? AND id = ?",
                       [(t, doc) for t in _field_terms(old[:4])])
        db.execute(f"UPDATE docs SET ({_ENTRY_COLUMNS}) = ({','.join('?' * 17)}) WHERE id = ?",
                   (*self._columns(entry), doc))
        db.executemany("INSERT INTO fields(term, id, marks) VALUES (?, ?, ?)",
                       _field_rows(doc, entry))

    def _remove(self, db: sqlite3.Connection, path: str) -> None:
        row = db.execute("SELECT id, seg, t_topic, t_title, t_summary, t_category, project_key, "
                         "legacy, words, length(passages) FROM docs WHERE path = ?",
                         (path,)).fetchone()
        if row is None:
            return
        doc, seg = int(row[0]), int(row[1])
        db.executemany("DELETE FROM fields WHERE term = ? AND id = ?",
                       [(t, doc) for t in _field_terms(row[2:6])])
        db.execute("DELETE FROM docs WHERE id = ?", (doc,))
        if seg:
            db.execute("INSERT INTO dead(id, seg) VALUES (?, ?)", (doc, seg))
        for name, n in ((f"project:{row[6]}", -1), ("legacy", -int(row[7])),
                        ("=documents", -1), ("=passages", -int(row[9]) // 12),
                        ("=words", -int(row[8]))):
            db.execute("UPDATE tallies SET n = n + ? WHERE name = ?", (n, name))

    @staticmethod
    def _tally(db: sqlite3.Connection, entry: SearchEntry, legacy: bool, passages: int,
               words: int, sign: int) -> None:
        db.executemany(
            "INSERT INTO tallies VALUES (?, ?) ON CONFLICT(name) DO UPDATE SET n = n + excluded.n",
            [(f"project:{entry.project_key}", sign), ("legacy", sign * int(legacy)),
             ("=documents", sign), ("=passages", sign * passages), ("=words", sign * words)])

    def _flush(self, db: sqlite3.Connection, segment: _Segment, seg: int) -> None:
        if not segment.terms:
            return
        db.executemany("INSERT INTO postings(seg, term, data) VALUES (?, ?, ?)",
                       ((seg, term, blob) for term, blob in segment.blobs(_expected(db))))
        db.execute("INSERT INTO segments(seg, docs, rows) VALUES (?, ?, ?)",
                   (seg, segment.docs, segment.rows))
        self._merge(db)

    def _merge(self, db: sqlite3.Connection) -> None:
        """Merge while some size level holds `_MERGE_FANIN` adjacent segments.

        A segment's level is the largest tier of it and every newer one, so levels never rise
        toward the newest: a small segment left behind a bigger newer one is merged with that
        level's next run instead of staying on its own."""
        while True:
            segs = [(int(s), int(r)) for s, r in
                    db.execute("SELECT seg, rows FROM segments ORDER BY seg")]
            levels: list[int] = []
            top = 0
            for _, rows in reversed(segs):
                top = max(top, _tier(rows))
                levels.append(top)
            levels.reverse()
            run: list[int] = []
            end = len(segs)
            while end > 0:
                begin = end - 1
                while begin > 0 and levels[begin - 1] == levels[end - 1]:
                    begin -= 1
                if end - begin >= _MERGE_FANIN:
                    run = [s for s, _ in segs[end - _MERGE_FANIN:end]]
                    break
                end = begin
            if not run:
                return
            self._merge_run(db, run)

    def _merge_run(self, db: sqlite3.Connection, run: Sequence[int]) -> None:
        """One segment from adjacent ones (the last id kept), the dead documents dropped. The
        runs' rows are read term by term in one pass (each segment's rows are in term order)
        and the merged rows go through a temporary table, never all in memory."""
        target = run[-1]
        marks = ",".join("?" * len(run))
        dead = frozenset(int(r[0]) for r in db.execute(
            f"SELECT id FROM dead WHERE seg IN ({marks})", run))
        db.execute("CREATE TEMP TABLE IF NOT EXISTS merged (term TEXT NOT NULL, data BLOB)")
        db.execute("DELETE FROM merged")
        rows_query = "SELECT term, ?, data FROM postings WHERE seg = ? ORDER BY term"
        if not dead:
            # Without dead documents (every merge an import makes) a term one segment of the
            # run holds keeps its blob as it is (`merge_blobs`), and most terms are rare: SQLite
            # copies those, from the (seg, term) index alone to find them, and only the terms
            # several segments hold are read and joined here.
            db.execute("CREATE TEMP TABLE IF NOT EXISTS shared (term TEXT PRIMARY KEY) "
                       "WITHOUT ROWID")
            db.execute("DELETE FROM shared")
            db.execute(f"INSERT INTO shared SELECT term FROM postings WHERE seg IN ({marks}) "
                       "GROUP BY term HAVING count(*) > 1", run)
            db.execute(f"INSERT INTO merged SELECT term, data FROM postings WHERE seg IN "
                       f"({marks}) AND term NOT IN shared", run)
            rows_query = ("SELECT term, ?, data FROM postings WHERE seg = ? AND term IN shared "
                          "ORDER BY term")
        readers = [db.execute(rows_query, (k, seg)) for k, seg in enumerate(run)]
        total_rows = 0
        # (term, position in the run, blob) tuples compare as they are: a term's rows meet in
        # run order, and no two rows share a term and a position, so blobs are never compared.
        pending: list[tuple[str, bytes]] = []
        held = 0  # bytes of the blobs in `pending`: a common word's blob alone can be megabytes
        expected = _expected(db)
        for term, group in itertools.groupby(heapq.merge(*readers), key=_first):
            blob = merge_blobs([r[2] for r in group], dead, expected)
            if blob:
                pending.append((term, blob))
                held += len(blob)
                if dead:  # else the rows are the run's, counted below
                    total_rows += HEAD.unpack_from(blob)[0]
            if len(pending) >= 4096 or held >= _MERGE_PENDING_BYTES:
                db.executemany("INSERT INTO merged VALUES (?, ?)", pending)
                pending, held = [], 0
        db.executemany("INSERT INTO merged VALUES (?, ?)", pending)
        if not dead:  # nothing dropped: the run's rows, copied or joined
            total_rows = int(db.execute(
                f"SELECT coalesce(sum(rows), 0) FROM segments WHERE seg IN ({marks})",
                run).fetchone()[0])
        docs = int(db.execute(f"SELECT sum(docs) FROM segments WHERE seg IN ({marks})",
                              run).fetchone()[0] or 0) - len(dead)
        db.execute(f"DELETE FROM postings WHERE seg IN ({marks})", run)
        db.execute(f"DELETE FROM segments WHERE seg IN ({marks})", run)
        db.execute(f"DELETE FROM dead WHERE seg IN ({marks})", run)
        db.execute("INSERT INTO postings(seg, term, data) SELECT ?, term, data FROM merged "
                   "ORDER BY term", (target,))
        db.execute("DELETE FROM merged")
        db.execute("INSERT INTO segments(seg, docs, rows) VALUES (?, ?, ?)",
                   (target, docs, total_rows))
        db.execute(f"UPDATE docs SET seg = ? WHERE seg IN ({marks})", (target, *run))

    # -- reading ---------------------------------------------------------------------------

    def _dead_ids(self) -> frozenset[int]:
        if self._dead is None:
            self._dead = frozenset(int(r[0]) for r in self._pin().execute("SELECT id FROM dead"))
        return self._dead

    def _segments(self) -> list[int]:
        if self._segs is None:
            self._segs = [int(r[0]) for r in
                          self._pin().execute("SELECT seg FROM segments ORDER BY seg")]
        return self._segs

    def _postings(self, term: str) -> Postings | None:
        if term in self._loaded:
            return self._loaded[term]
        segs = self._segments()
        found: Postings | None = None
        if segs:
            # One seek per segment (the key is (seg, term)): a few rows however the door grew.
            # A blob's length is in its record's header, so a large blob is not read here.
            marks = ",".join("?" * len(segs))
            rows = self.db.execute(
                f"SELECT rowid, CASE WHEN length(data) <= ? THEN data END FROM postings "
                f"WHERE seg IN ({marks}) AND term = ? ORDER BY seg",
                (self.lazy_bytes, *segs, term)).fetchall()
            if any(data is None for _, data in rows):
                found = BlobPostings(self.db, [r for r, _ in rows])
                self._open.append(found)
            elif rows:
                found = read_postings(data for _, data in rows)
        if len(self._loaded) > 256:
            self._loaded = {}
        self._loaded[term] = found
        return found

    def postings(self, terms: Sequence[str]) -> list[Postings | None]:
        return [self._postings(t) for t in terms]

    def stats(self, terms: Sequence[str]) -> BodyStats:
        dead = self._dead_ids()
        df: dict[str, int] = {}
        for term in dict.fromkeys(terms):
            p = self._postings(term)
            if p is None:
                df[term] = 0
            else:  # the distinct holders, less the documents gone since
                df[term] = len(p.holders) - (len(dead.intersection(p.holders)) if dead else 0)
        return dataclasses.replace(_totals(self.db), df=df)

    def field_hits(self, terms: Sequence[str]) -> Mapping[int, FieldHits]:
        wanted = list(dict.fromkeys(terms))
        if not wanted:
            return {}
        # Per document, the marks of its rows joined: each row is one term and holds each
        # field's mark at most once, so a mark's count is how many terms hit that field.
        joined: dict[int, str] = {}
        get = joined.get
        marks_sql = ",".join("?" * len(wanted))
        for doc, marks in self.db.execute(
                f"SELECT id, marks FROM fields WHERE term IN ({marks_sql})", wanted):
            joined[doc] = get(doc, "") + marks
        rules = [doc for doc, marks in joined.items() if _RULE_MARK in marks]
        named: dict[int, tuple[str, str]] = {}
        for chunk in _chunks(rules):
            named.update((int(d), (str(r), str(p))) for d, r, p in self.db.execute(
                f"SELECT id, rule_id, path FROM docs WHERE id IN ({','.join('?' * len(chunk))})",
                chunk))
        # Most matches share a handful of hit counts: one FieldHits for each (a common word in
        # every title would otherwise make one object per document).
        shared: dict[str, FieldHits] = {}
        out: dict[int, FieldHits] = {}
        for doc, marks in joined.items():
            if _RULE_MARK in marks:
                out[doc] = _field_hits(marks, named.get(doc, ("", "")))
                continue
            hits = shared.get(marks)
            if hits is None:
                hits = shared[marks] = _field_hits(marks)
            out[doc] = hits
        return out

    def excluded(self, project_key: str) -> AbstractSet[int]:
        dead = self._dead_ids()
        if not project_key:
            return dead
        projects = [str(r[0]).removeprefix("project:") for r in self.db.execute(
            "SELECT name FROM tallies WHERE name LIKE 'project:%' AND n > 0")]
        if set(projects) <= {project_key, ""}:
            return dead
        return dead | {int(r[0]) for r in self.db.execute(
            "SELECT id FROM docs WHERE project_key NOT IN (?, '')", (project_key,))}

    def facts(self, ids: Sequence[int]) -> Mapping[int, DocFacts]:
        out: dict[int, DocFacts] = {}
        for chunk in _chunks(list(ids)):
            for doc, path, key, blob in self.db.execute(
                    "SELECT id, path, date_key, passages FROM docs WHERE id IN "
                    f"({','.join('?' * len(chunk))})", chunk):
                layout = array(U32)
                layout.frombytes(blob)
                out[int(doc)] = DocFacts(str(path), float(key), layout[1::3], layout[2::3])
        return out

    def entries(self, ids: Sequence[int]) -> Mapping[int, SearchEntry]:
        out: dict[int, SearchEntry] = {}
        for chunk in _chunks(list(ids)):
            for row in self.db.execute(
                    f"SELECT id, {_ENTRY_COLUMNS} FROM docs WHERE id IN "
                    f"({','.join('?' * len(chunk))})", chunk):
                out[int(row[0])] = _entry(row[1:])
        return out

    def ids(self, paths: Iterable[str]) -> Mapping[str, int]:
        out: dict[str, int] = {}
        for chunk in _chunks(list(paths)):
            out.update((str(p), int(d)) for p, d in self.db.execute(
                f"SELECT path, id FROM docs WHERE path IN ({','.join('?' * len(chunk))})",
                chunk))
        return out

    def dated(self, window: TimeWindow) -> frozenset[int]:
        found: set[int] = set()
        for start, end in window.ranges:
            low = datetime(start.year, start.month, start.day, tzinfo=UTC).timestamp()
            high = datetime(end.year, end.month, end.day, tzinfo=UTC).timestamp() + 86_400
            found.update(int(r[0]) for r in self.db.execute(
                "SELECT id FROM docs WHERE date_key >= ? AND date_key < ?", (low, high)))
        if window.months:
            months = ",".join(f"'{m:02d}'" for m in sorted(window.months))
            found.update(int(r[0]) for r in self.db.execute(
                "SELECT id FROM docs WHERE date_key > 0 AND "
                f"strftime('%m', date_key, 'unixepoch') IN ({months})"))
        return frozenset(found)

    def has_legacy(self) -> bool:
        row = self.db.execute("SELECT n FROM tallies WHERE name = 'legacy'").fetchone()
        return bool(row and row[0] > 0)

    def fragments(self, session_dirs: Iterable[str]) -> list[SearchEntry]:
        out: list[SearchEntry] = []
        for chunk in _chunks(list(session_dirs)):
            out.extend(_entry(r) for r in self.db.execute(
                f"SELECT {_ENTRY_COLUMNS} FROM docs WHERE legacy = 1 AND session_dir IN "
                f"({','.join('?' * len(chunk))})", chunk))
        return out

    def by_paths(self, paths: Iterable[str]) -> list[SearchEntry]:
        out: list[SearchEntry] = []
        for chunk in _chunks(list(paths)):
            out.extend(_entry(r) for r in self.db.execute(
                f"SELECT {_ENTRY_COLUMNS} FROM docs WHERE path IN "
                f"({','.join('?' * len(chunk))})", chunk))
        return out

    def chapter_shas(self) -> Mapping[str, str]:
        return {str(p): str(s) for p, s in self.db.execute(
            "SELECT path, sha256 FROM docs WHERE kind = 'chapter'")}

    def count(self, prefix: str = "") -> int:
        if not prefix:
            return int(self.db.execute("SELECT count(*) FROM docs").fetchone()[0])
        # A range on the unique path index: every path that starts with `prefix`.
        return int(self.db.execute("SELECT count(*) FROM docs WHERE path >= ? AND path < ?",
                                   (prefix, prefix + "\U0010ffff")).fetchone()[0])


def _totals(db: sqlite3.Connection) -> BodyStats:
    """The door's documents, passages and words, from the tallies (no term's df)."""
    found = dict(db.execute("SELECT name, n FROM tallies WHERE name LIKE '=%'").fetchall())
    return BodyStats(int(found.get("=documents", 0)), {}, int(found.get("=passages", 0)),
                     int(found.get("=words", 0)))


def _expected(db: sqlite3.Connection) -> float:
    """The door's average passage length now, as a search reads it, 0 without passages:
    what a list written now is computed at."""
    totals = _totals(db)
    return totals.expected if totals.passages > 0 else 0.0


def _tier(rows: int) -> int:
    """A segment's size tier: how many times `_MERGE_FANIN` its rows are past the base."""
    tier = 0
    while rows >= _TIER_BASE_ROWS:
        rows //= _MERGE_FANIN
        tier += 1
    return tier
