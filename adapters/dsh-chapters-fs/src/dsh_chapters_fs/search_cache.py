"""The persistent search cache: stdlib `sqlite3` with an FTS5 table for candidate retrieval.

Lives at `.dsh-chapters/cache/search-<door>.sqlite` (derived, machine-local, never published).
Rows hold each entry's fields and its canonical terms; the FTS5 table (the `ascii` tokenizer,
so a core term is exactly one FTS token) answers "which rows hold any of these terms". It only
narrows: `rank_entries` scores the candidates exactly, so the cache cannot change a ranking.
A missing, corrupt or older-schema file is dropped and rebuilt; staleness against the index
manifest and the alias table is the use case's call (`SearchService.ensure_cache`).
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path

from dsh_chapters_core.config import DEFAULTS
from dsh_chapters_core.documents import DocumentKind
from dsh_chapters_core.ports.search import (
    BoundedCandidates,
    CandidatePage,
    DoorMaxima,
    Holding,
)
from dsh_chapters_core.search.entries import SearchEntry
from dsh_chapters_core.search.passages import (
    BodyBound,
    BodyProfile,
    BodyStats,
    body_profile,
    body_shape,
)
from dsh_chapters_core.search.scorer import LexicalWeights
from dsh_chapters_core.search.stitching import is_legacy_fragment
from dsh_chapters_core.search.terms import QueryWord

SCHEMA_VERSION = 11
_SEP = "\x1f"  # joins labels in a column; never part of a label (labels are slugs)
_BUSY_TIMEOUT_MS = 10_000
# A round that lists the holders of every one of its elements reads them by key when they are
# at most one entry in this many; more are read by scanning each term's rows.
_FEW_HOLDERS = 16
_BOUND_DIGITS = 6  # the lexical bound is compared rounded, so float noise never reorders it
_KINDS = {k.value: k for k in DocumentKind}
_COLUMNS = ("path, kind, title, date, date_key, topics, summary, category, project_key, "
            "session_id, rule_id, raw_topics, t_topic, t_title, t_summary, t_category, "
            "body, body_line")
_E_COLUMNS = ", ".join(f"e.{c.strip()}" for c in _COLUMNS.split(","))
# One FTS5 token per (term, field): `auth·t` is "auth" in a topic. U+00B7 is never part of a
# core term (terms are runs of letters and digits) and the `ascii` tokenizer keeps non-ASCII
# characters inside tokens, so each such token is exactly one FTS5 token.
_MARK = "\u00b7"
_FIELD_MARKS = ("t", "i", "s", "c")  # topic, title, summary, category
_BODY_MARK = "b"  # a chapter body's code-aware terms (search/terms.py), listed once each
# Row tokens: `·p<hash>` names the row's project and `·legacy` marks a legacy fragment, so
# scoping and setting fragments aside are doclist intersections inside FTS5, not joins. No
# term token starts with the mark, so these never collide with a term.
_LEGACY = f"{_MARK}legacy"
_SCHEMA = f"""
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS entries (
  id INTEGER PRIMARY KEY,
  sha256 TEXT NOT NULL,
  session_dir TEXT NOT NULL,
  legacy INTEGER NOT NULL,
  tokens TEXT NOT NULL,
  path TEXT NOT NULL UNIQUE, kind TEXT NOT NULL, title TEXT NOT NULL, date TEXT NOT NULL,
  date_key REAL NOT NULL, topics TEXT NOT NULL, summary TEXT NOT NULL, category TEXT NOT NULL,
  project_key TEXT NOT NULL, session_id TEXT NOT NULL, rule_id TEXT NOT NULL,
  raw_topics TEXT NOT NULL, t_topic TEXT NOT NULL, t_title TEXT NOT NULL, t_summary TEXT NOT NULL,
  t_category TEXT NOT NULL, body TEXT NOT NULL, body_line INTEGER NOT NULL,
  body_words INTEGER NOT NULL, body_lines INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS entries_fragments ON entries(session_dir) WHERE legacy = 1;
-- What ordering and scoping read for every match: narrow rows, so a scan stays in few pages.
CREATE TABLE IF NOT EXISTS keys (
  id INTEGER PRIMARY KEY, date_key REAL NOT NULL, path TEXT NOT NULL, project_key TEXT NOT NULL,
  legacy INTEGER NOT NULL, rule_id TEXT NOT NULL, body_words INTEGER NOT NULL,
  body_lines INTEGER NOT NULL
);
-- A body's profile (passages.BodyProfile): per term, the most words holding it in any one
-- passage (m) and the fewest words of a passage holding it (l). A query bounds every body in
-- SQL from these, so only the bodies that can reach the answer's top are read back and
-- scored (search.md "Reading few bodies").
CREATE TABLE IF NOT EXISTS bodytf (
  term TEXT NOT NULL, id INTEGER NOT NULL, m INTEGER NOT NULL, l INTEGER NOT NULL,
  PRIMARY KEY (term, id)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS bodytf_rows ON bodytf(id);
-- Per term, the largest m and the smallest l of any body: what a query word can add at most,
-- so a query skips the bodies that hold only words too weak to reach its answer. A removed
-- body leaves its values behind: still bounds, only looser, until the next rebuild.
-- And n, the bodies holding the term (its document frequency, exact: kept on every write),
-- so a query reads a word's df in one row instead of counting a doclist of every body.
CREATE TABLE IF NOT EXISTS termmax (
  term TEXT PRIMARY KEY, m INTEGER NOT NULL, l INTEGER NOT NULL, n INTEGER NOT NULL
) WITHOUT ROWID;
-- What the profiles were built for; another passage size drops the file (see _connect).
CREATE TABLE IF NOT EXISTS settings (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS entries_rules ON entries(rule_id);
-- Row counts per project and of legacy fragments, kept by triggers: when the whole door is in
-- one scope and has no fragment, a query needs no join to count or to find its threshold.
CREATE TABLE IF NOT EXISTS tallies (name TEXT PRIMARY KEY, n INTEGER NOT NULL);
-- The body totals too (`=words`, `=lines`; `=` is never a project key's first character
-- here, being kept apart by the prefix): a query's statistics read three rows, not every key.
CREATE TRIGGER IF NOT EXISTS keys_in AFTER INSERT ON keys BEGIN
  INSERT INTO tallies VALUES ('project:' || new.project_key, 1)
    ON CONFLICT(name) DO UPDATE SET n = n + 1;
  INSERT INTO tallies SELECT 'legacy', 1 WHERE new.legacy = 1
    ON CONFLICT(name) DO UPDATE SET n = n + 1;
  INSERT INTO tallies VALUES ('=documents', 1) ON CONFLICT(name) DO UPDATE SET n = n + 1;
  INSERT INTO tallies VALUES ('=words', new.body_words)
    ON CONFLICT(name) DO UPDATE SET n = n + new.body_words;
  INSERT INTO tallies VALUES ('=lines', new.body_lines)
    ON CONFLICT(name) DO UPDATE SET n = n + new.body_lines;
END;
CREATE TRIGGER IF NOT EXISTS keys_out AFTER DELETE ON keys BEGIN
  UPDATE tallies SET n = n - 1 WHERE name = 'project:' || old.project_key;
  UPDATE tallies SET n = n - 1 WHERE name = 'legacy' AND old.legacy = 1;
  UPDATE tallies SET n = n - 1 WHERE name = '=documents';
  UPDATE tallies SET n = n - old.body_words WHERE name = '=words';
  UPDATE tallies SET n = n - old.body_lines WHERE name = '=lines';
END;
CREATE VIRTUAL TABLE IF NOT EXISTS terms USING fts5(
  tokens, content='', tokenize='ascii', detail='none', columnsize=0
);
PRAGMA user_version = {SCHEMA_VERSION};
"""


def _terms(values: frozenset[str]) -> str:
    return " ".join(sorted(values))


def _project_token(project_key: str) -> str:
    return f"{_MARK}p" + hashlib.sha256(project_key.encode("utf-8")).hexdigest()[:16]


def _tokens(entry: SearchEntry, legacy: bool, profile: BodyProfile) -> str:
    fields = (entry.topic_terms, entry.title_terms, entry.summary_terms, entry.category_terms)
    words = [f"{t}{_MARK}{mark}" for mark, terms in zip(_FIELD_MARKS, fields, strict=True)
             for t in sorted(terms)]
    words += sorted({_body_token(t) for t in profile.counts})
    words.append(_project_token(entry.project_key))
    if legacy:
        words.append(_LEGACY)
    return " ".join(words)


def _row(entry: SearchEntry, sha: str, profile: BodyProfile) -> tuple[object, ...]:
    legacy = is_legacy_fragment(entry)
    return (
        sha, entry.session_dir, 1 if legacy else 0, _tokens(entry, legacy, profile),
        entry.path, str(entry.kind), entry.title, entry.date, entry.date_key,
        _SEP.join(entry.topics), entry.summary, entry.category, entry.project_key,
        entry.session_id, entry.rule_id, _SEP.join(entry.raw_topics),
        _terms(entry.topic_terms), _terms(entry.title_terms), _terms(entry.summary_terms),
        _terms(entry.category_terms), entry.body, entry.body_line, *body_shape(entry.body),
    )


def _labels(text: str) -> tuple[str, ...]:
    return tuple(text.split(_SEP)) if text else ()


def _entry(row: tuple[object, ...]) -> SearchEntry:
    (path, kind, title, date, date_key, topics, summary, category, project_key, session_id,
     rule_id, raw_topics, t_topic, t_title, t_summary, t_category, body, body_line) = row
    return SearchEntry(
        path=str(path), kind=_KINDS[str(kind)], title=str(title), date=str(date),
        topics=_labels(str(topics)), summary=str(summary), category=str(category),
        project_key=str(project_key), session_id=str(session_id), rule_id=str(rule_id),
        date_key=float(date_key),  # type: ignore[arg-type]
        topic_terms=frozenset(str(t_topic).split()), title_terms=frozenset(str(t_title).split()),
        summary_terms=frozenset(str(t_summary).split()),
        category_terms=frozenset(str(t_category).split()), raw_topics=_labels(str(raw_topics)),
        body=str(body), body_line=int(body_line),  # type: ignore[call-overload]
    )


def _body_token(term: str) -> str:
    """A body term as one FTS5 token: the `ascii` tokenizer splits at `.`/`-`/`/`/`_`, so a
    joined term (`src/app.py`) is listed by a digest of its spelling instead."""
    if not term.isalnum():
        term = "j" + hashlib.sha256(term.encode("utf-8")).hexdigest()[:16]
    return f"{term}{_MARK}{_BODY_MARK}"


def _phrase(term: str, mark: str) -> str:
    return '"' + (term + _MARK + mark).replace('"', '""') + '"'


def _any_of(terms: Iterable[str], body_terms: Iterable[str] = ()) -> str:
    """An FTS5 query for "any of these terms in any frontmatter field, or any of these body
    terms" ("" for none)."""
    arms = [_phrase(t, m) for t in dict.fromkeys(terms) for m in _FIELD_MARKS]
    arms += [f'"{_body_token(t)}"' for t in dict.fromkeys(body_terms)]
    return " OR ".join(arms)


def _holders(within: Holding, body: BodyBound | None) -> str:
    """An FTS5 query for the entries a round lists ("" when none can be): any of its terms
    and words, or with `all_of`, one of each part's."""
    if within.all_of:
        parts = [_holders(part, body) for part in within.all_of]
        return "" if not all(parts) else " AND ".join(f"({part})" for part in parts)
    return _any_of(sorted(within.terms), [
        t for i in sorted(within.words) for t in body.terms[i]] if body else ())


def _in_scope(project_key: str) -> str:
    """An FTS5 query for "of this project, or of none named"."""
    return f'("{_project_token(project_key)}" OR "{_project_token("")}")'


def _other_projects(tallies: Mapping[str, int], project_key: str) -> bool:
    """Whether scoping to `project_key` leaves anything out: the door holds another project."""
    projects = {name.removeprefix("project:") for name in tallies if name.startswith("project:")}
    return bool(project_key) and not projects <= {project_key, ""}


def _field_hits(terms: Sequence[str], weights: LexicalWeights,
                match: Callable[[str, str], str]) -> tuple[list[str], list[object]]:
    """One SELECT per term and field, each row an (id, weight, category hit) of the lexical
    bound; `match` words the FTS5 query of one (term, field)."""
    arms: list[str] = []
    params: list[object] = []
    field_weights = (weights.topic, weights.title, weights.summary)
    for term in dict.fromkeys(terms):
        for mark, weight in zip(_FIELD_MARKS, field_weights, strict=False):
            arms.append("SELECT rowid AS id, ? AS w, 0 AS cat FROM terms WHERE terms MATCH ?")
            params += [weight, match(term, mark)]
        arms.append("SELECT rowid, 0.0, 1 FROM terms WHERE terms MATCH ?")
        params.append(match(term, _FIELD_MARKS[3]))
    return arms, params


class SqliteSearchCache:
    """A SearchCache in one SQLite file. Opened lazily; `close()` releases it."""

    def __init__(self, path: str | Path, *,
                 passage_lines: int = DEFAULTS.search_passage_lines) -> None:
        self.path = Path(path)
        self.passage_lines = passage_lines  # the size body profiles are cut at
        self.few_holders = _FEW_HOLDERS
        self._db: sqlite3.Connection | None = None
        self._counter: sqlite3.Connection | None = None  # a second reader: see `_count_aside`

    # -- connection ------------------------------------------------------------------------

    def _connect(self) -> sqlite3.Connection:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        db = sqlite3.connect(self.path, timeout=_BUSY_TIMEOUT_MS / 1000, isolation_level=None)
        try:
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")  # derived data: a crash means a rebuild
            version = db.execute("PRAGMA user_version").fetchone()[0]
            if version not in (0, SCHEMA_VERSION):
                db.close()
                self._drop_files()
                db = sqlite3.connect(self.path, timeout=_BUSY_TIMEOUT_MS / 1000,
                                     isolation_level=None)
                db.execute("PRAGMA journal_mode=WAL")
            db.executescript(_SCHEMA)
            lines = db.execute("SELECT value FROM settings WHERE key = 'passageLines'").fetchone()
            if lines is None and not db.execute("SELECT 1 FROM entries LIMIT 1").fetchone():
                db.execute("INSERT INTO settings VALUES ('passageLines', ?)",
                           (str(self.passage_lines),))
            elif lines is None or lines[0] != str(self.passage_lines):
                # Profiles cut at another passage size would bound wrongly: derived, so start
                # over; the use case finds the cache empty and refills it.
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
                # A corrupt cache is derived data: drop it and start over.
                self._drop_files()
                self._db = self._connect()
        return self._db

    def close(self) -> None:
        if self._counter is not None:
            self._counter.close()
            self._counter = None
        if self._db is not None:
            self._db.close()
            self._db = None

    def __enter__(self) -> SqliteSearchCache:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the SearchCache port --------------------------------------------------------------

    def state(self) -> Mapping[str, str]:
        return {str(k): str(v) for k, v in self.db.execute("SELECT key, value FROM meta")}

    def shas(self) -> Mapping[str, str]:
        return {str(p): str(s) for p, s in self.db.execute("SELECT path, sha256 FROM entries")}

    def apply(
        self,
        *,
        upserts: Iterable[tuple[SearchEntry, str]],
        removed: Iterable[str],
        state: Mapping[str, str],
        reset: bool = False,
    ) -> None:
        db = self.db
        pending = list(upserts)
        paths = [entry.path for entry, _ in pending]
        db.execute("BEGIN IMMEDIATE")
        try:
            if reset:
                db.execute("DELETE FROM entries")
                db.execute("DELETE FROM keys")
                db.execute("DELETE FROM tallies")
                db.execute("DELETE FROM bodytf")
                db.execute("DELETE FROM termmax")
                db.execute("INSERT INTO terms(terms) VALUES('delete-all')")
            else:
                # A contentless FTS5 row is deleted by repeating the text it was indexed with.
                for chunk in _chunks([*removed, *paths]):
                    marks = ",".join("?" * len(chunk))
                    old = db.execute(f"SELECT id, tokens FROM entries WHERE path IN ({marks})",
                                     chunk).fetchall()
                    db.executemany("INSERT INTO terms(terms, rowid, tokens) "
                                   "VALUES('delete', ?, ?)", old)
                    db.executemany("DELETE FROM entries WHERE id = ?", [(r[0],) for r in old])
                    db.executemany("DELETE FROM keys WHERE id = ?", [(r[0],) for r in old])
                    db.executemany("UPDATE termmax SET n = n - 1 WHERE term IN "
                                   "(SELECT term FROM bodytf WHERE id = ?)", [(r[0],) for r in old])
                    db.executemany("DELETE FROM bodytf WHERE id = ?", [(r[0],) for r in old])
            insert = (f"INSERT INTO entries(sha256, session_dir, legacy, tokens, {_COLUMNS}, "
                      f"body_words, body_lines) VALUES ({','.join('?' * 24)})")
            # One entry at a time: a body's profile holds a pair per distinct term, so a batch
            # of them at once is what bounded a rebuild's memory, not the bodies themselves.
            for entry, sha in pending:
                profile = body_profile(entry.body, self.passage_lines)
                row_id = db.execute(insert, _row(entry, sha, profile)).lastrowid
                db.executemany("INSERT INTO bodytf(term, id, m, l) VALUES (?, ?, ?, ?)",
                               ((term, row_id, n, profile.shortest[term])
                                for term, n in profile.counts.items()))
                if not reset:
                    db.executemany(
                        "INSERT INTO termmax VALUES (?, ?, ?, 1) ON CONFLICT(term) DO UPDATE "
                        "SET m = max(m, excluded.m), l = min(l, excluded.l), n = n + 1",
                        ((term, n, profile.shortest[term])
                         for term, n in profile.counts.items()))
            to_terms = "INSERT INTO terms(rowid, tokens) SELECT id, tokens FROM entries"
            to_keys = ("INSERT INTO keys SELECT id, date_key, path, project_key, legacy, rule_id, "
                       "body_words, body_lines FROM entries")
            if reset:
                db.execute(to_terms)
                db.execute(to_keys)
                # One pass in key order once everything is in, not an upsert per body.
                db.execute("INSERT INTO termmax SELECT term, max(m), min(l), count(*) "
                           "FROM bodytf GROUP BY term")
            else:
                for chunk in _chunks(paths):
                    marks = ",".join("?" * len(chunk))
                    db.execute(f"{to_terms} WHERE path IN ({marks})", chunk)
                    db.execute(f"{to_keys} WHERE path IN ({marks})", chunk)
            db.execute("DELETE FROM meta")
            db.executemany("INSERT INTO meta(key, value) VALUES (?, ?)", sorted(state.items()))
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise

    def candidates(self, terms: Sequence[str],
                   body_terms: Sequence[str] = ()) -> list[SearchEntry]:
        if not terms and not body_terms:
            return []
        rows = self.db.execute(
            f"SELECT {_COLUMNS} FROM entries WHERE id IN "
            "(SELECT rowid FROM terms WHERE terms MATCH ?)", (_any_of(terms, body_terms),))
        return [_entry(r) for r in rows]

    def body_stats(self, words: Sequence[QueryWord]) -> BodyStats:
        db = self.db
        # Kept by the `keys` triggers: summing every key would read the whole table.
        totals = dict(db.execute("SELECT name, n FROM tallies WHERE name LIKE '=%'").fetchall())
        documents, total_words, total_lines = (
            totals.get("=documents", 0), totals.get("=words", 0), totals.get("=lines", 0))
        df: dict[str, int] = {}
        single = sorted({t for word in words if len(word.terms) == 1 for t in word.terms})
        held = dict.fromkeys(single, 0)
        for chunk in _chunks(single):
            marks = ",".join("?" * len(chunk))
            held.update(db.execute(f"SELECT term, n FROM termmax WHERE term IN ({marks})",
                                   chunk).fetchall())
        for word in words:
            if len(word.terms) == 1:  # a body holds a term once in bodytf: n is its df
                df[word.text] = int(held[next(iter(word.terms))])
            else:  # a body holding any of several terms: FTS5 counts the union
                df[word.text] = int(db.execute(
                    "SELECT count(*) FROM terms WHERE terms MATCH ?",
                    (_any_of((), sorted(word.terms)),)).fetchone()[0])
        return BodyStats(int(documents), df,
                         int(total_words) / int(total_lines) if total_lines else 0.0)

    def top_candidates(
        self,
        terms: Sequence[str],
        *,
        weights: LexicalWeights,
        limit: int,
        project_key: str = "",
        special: frozenset[str] = frozenset(),
    ) -> CandidatePage:
        """FTS5 finds, per term and field, the plain in-scope rows holding it; SQLite sums the
        weights into each row's lexical bound, counts those rows, and keeps the best `limit`
        (bound, then date, then path). Legacy fragments that match and the `special` rules
        come along whatever their bound. Python never touches the rest, and `rank_entries`
        re-scores what is kept."""
        if not terms:
            return CandidatePage(entries=[], plain_total=0)
        tallies = dict(self.db.execute("SELECT name, n FROM tallies WHERE n > 0").fetchall())
        has_legacy = bool(tallies.get("legacy"))
        scoped = _other_projects(tallies, project_key)

        def arm(term: str, mark: str) -> str:
            query = _phrase(term, mark)
            if scoped:  # the caller's project, or none named (`·p` of "")
                query = f"({query} AND {_in_scope(project_key)})"
            if has_legacy:  # fragments are stitched first, scoped after: handed over apart
                query = f'({query} NOT "{_LEGACY}")'
            return query

        hits, params = _field_hits(terms, weights, arm)
        # Every scored row is plain and in scope: count it as is, and join only the rows at
        # or above the `limit`-th bound (ties there are ordered by date, then path).
        sql = f"""
        WITH hits(id, w, cat) AS ({" UNION ALL ".join(hits)}),
        scored AS MATERIALIZED (
          SELECT id, round(sum(w) + (CASE WHEN max(cat) = 1 THEN ? ELSE 0.0 END), ?) AS bound
          FROM hits GROUP BY id
        )
        SELECT {_E_COLUMNS}, -1 FROM (
          SELECT s.id FROM scored s JOIN keys k ON k.id = s.id
          WHERE s.bound >= coalesce(
            (SELECT bound FROM scored ORDER BY bound DESC LIMIT 1 OFFSET ?), -1e308)
          ORDER BY s.bound DESC, k.date_key DESC, k.path LIMIT ?
        ) t JOIN entries e ON e.id = t.id"""
        params += [weights.category, _BOUND_DIGITS, limit - 1, limit]
        if has_legacy:
            sql += f"""
            UNION ALL SELECT {_E_COLUMNS}, -1 FROM entries e
            WHERE e.id IN (SELECT rowid FROM terms WHERE terms MATCH ?)"""
            params.append(f'({_any_of(terms)}) AND "{_LEGACY}"')
        if special:
            specials = json.dumps(sorted(special))
            sql += f"""
            UNION ALL SELECT {_E_COLUMNS}, -1 FROM entries e
            WHERE e.rule_id IN (SELECT value FROM json_each(?))
               OR e.path IN (SELECT value FROM json_each(?))"""
            params += [specials, specials]
        sql += f"""
        UNION ALL SELECT {", ".join(["NULL"] * 18)}, (SELECT count(*) FROM scored)"""
        rows = self.db.execute(sql, params).fetchall()
        plain_total = int(rows[-1][-1]) if rows else 0
        seen: set[str] = set()
        entries: list[SearchEntry] = []
        for row in rows[:-1]:
            if row[0] not in seen:  # a core rule can be both a plain best and a special
                seen.add(str(row[0]))
                entries.append(_entry(row[:-1]))
        return CandidatePage(entries=entries, plain_total=plain_total)

    def bounded(
        self,
        terms: Sequence[str],
        body: BodyBound | None,
        *,
        weights: LexicalWeights,
        body_weight: float,
        slack: float,
        project_key: str = "",
        within: Holding | None = None,
        count: bool = True,
    ) -> BoundedCandidates | None:
        """The ceilings in SQL: FTS5 gives the frontmatter hits (as `top_candidates`), the
        `bodytf` profiles give each body's m_i, and `BodyBound.ceiling`'s expression is
        evaluated per row; SQLite sorts, Python reads rows only as far as it needs. With
        `within`, FTS5 lists the holders of those elements first and every other lookup is
        by their row ids, so the cost follows the holders, not every match."""
        db = self.db
        tallies = dict(db.execute("SELECT name, n FROM tallies WHERE n > 0").fetchall())
        if tallies.get("legacy"):
            return None  # fragments are stitched before they are scored
        if body is not None and body.lines != self.passage_lines:
            return None
        if not terms and (body is None or not body.terms):
            return BoundedCandidates(total=0, rows=iter(()))
        ctes: list[str] = []
        head_params: list[object] = []
        params: list[object] = []
        few = False  # a round's holders are few: read theirs by key, not every term's rows
        if within is not None:
            listed = _holders(within, body)
            if not listed:
                return BoundedCandidates(
                    total=self._match_total(terms, body, project_key) if count else 0,
                    rows=iter(()))
            ctes.append("cand(id) AS MATERIALIZED "
                        "(SELECT rowid FROM terms WHERE terms MATCH ?)")
            head_params.append(listed)
            if within.all_of:
                holders = db.execute("SELECT count(*) FROM terms WHERE terms MATCH ?",
                                     (listed,)).fetchone()[0]
                few = holders * self.few_holders <= tallies.get("=documents", 0)
        # One row per frontmatter hit and one per (entry, held word), grouped once by entry.
        parts: list[str] = []
        if terms and few:
            # Each holder's own frontmatter terms, instead of every holder of a common term.
            hits, cats, cat_params = [], [], []
            for term in dict.fromkeys(terms):
                padded = f" {term} "
                hits += [f"? * (instr(' ' || e.{column} || ' ', ?) > 0)"
                         for column in ("t_topic", "t_title", "t_summary")]
                params += [weights.topic, padded, weights.title, padded, weights.summary, padded]
                cats.append("instr(' ' || e.t_category || ' ', ?) > 0")
                cat_params.append(padded)
            params += cat_params
            parts.append(f"SELECT c.id AS id, {' + '.join(hits)} AS fw, ({' OR '.join(cats)}) "
                         f"AS cat, 0.0 AS bm, 0 AS held, 0 AS mask "
                         f"FROM cand c JOIN entries e ON e.id = c.id")
        elif terms:
            match = _phrase
            if within is not None:
                # A round's frontmatter hits are its holders' only: FTS5 intersects the
                # doclists itself, instead of every holder of a common term being checked.
                def match(term: str, mark: str) -> str:
                    return f"({_phrase(term, mark)}) AND ({listed})"
            arms, arm_params = _field_hits(terms, weights, match)
            # Materialized: a filter pushed into an FTS5 arm would seek once per row.
            ctes.append(f"fm(id, w, cat) AS MATERIALIZED ({' UNION ALL '.join(arms)})")
            head_params += arm_params
            parts.append("SELECT id, w AS fw, cat, 0.0 AS bm, 0 AS held, 0 AS mask FROM fm")
        n = len(body.terms) if body is not None else 0
        if body is not None and n:
            # The query's words as a table, read out of JSON once (not once per profile row).
            ctes.append("w(i, term, idf) AS MATERIALIZED (SELECT value ->> 0, value ->> 1, "
                        "value ->> 2 FROM json_each(?))")
            head_params.append(json.dumps([[i, t, body.idf[i]]
                                           for i, ts in enumerate(body.terms) for t in ts]))
            # Each term's profiles are read in key order; a round keeps its holders' rows only.
            # (`+b.id`: never as a key lookup per holder and term: one scan per term is less.)
            scan = ("w JOIN bodytf b ON b.term = w.term"
                    + (" WHERE +b.id IN (SELECT id FROM cand)" if within is not None else ""))
            if few:  # a key lookup per holder and term is less than a scan of each term's rows
                scan = "cand CROSS JOIN w CROSS JOIN bodytf b ON b.term = w.term AND b.id = cand.id"
            if all(len(ts) == 1 for ts in body.terms):
                per_word = ("SELECT b.id AS id, w.i AS i, w.idf AS idf, b.m AS m, b.l AS l "
                            f"FROM {scan}")
            else:  # a word with several terms holds the sum of their m (BodyBound)
                per_word = (f"SELECT b.id AS id, w.i AS i, w.idf AS idf, sum(b.m) AS m, "
                            f"min(b.l) AS l FROM {scan} GROUP BY b.id, w.i")
            parts.append(f"""
            SELECT q.id, 0.0, 0, q.idf * q.m * ? / (q.m + ? * (1.0 - ? + ? * q.l / ?)), 1,
                   1 << q.i
            FROM ({per_word}) q""")
            params += [body.k1 + 1.0, body.k1, body.b, body.b, body.expected]
        # Adjacent held pairs from the bitmask of held words (the phrase ceiling).
        pairs = " + ".join(f"((mask >> {i}) & 3 = 3)" for i in range(n - 1)) or "0"
        body_part = f"(CASE WHEN held > 0 THEN bm * held / {n}.0 + ? * ({pairs}) ELSE 0.0 END)"
        # Scoped only when the door holds another project; else the rows need no key at all,
        # and only the paths of the rows read are looked up.
        scoped = _other_projects(tallies, project_key)
        listing = "(SELECT count(*) FROM u)" if within is None else "0"
        head = "WITH " + ", ".join([*ctes, f"""u AS MATERIALIZED (
          SELECT id, s + (CASE WHEN cat = 1 THEN ? ELSE 0.0 END) + ?
                 + ? * {body_part if n else "0.0"} AS ceiling
          FROM (SELECT id, sum(fw) AS s, max(cat) AS cat, sum(bm) AS bm, sum(held) AS held,
                       sum(mask) AS mask
                FROM ({" UNION ALL ".join(parts)}) GROUP BY id)
          {"WHERE id IN (SELECT id FROM keys WHERE project_key IN (?, ''))" if scoped else ""})"""])
        sql = f"""{head}
        SELECT NULL, {listing} UNION ALL
        SELECT * FROM (SELECT id, ceiling FROM u ORDER BY ceiling DESC, id)"""
        params = [*head_params, weights.category, slack, body_weight,
                  *([body.phrase_bonus] if body is not None and n else []), *params]
        if scoped:
            params.append(project_key)
        # A round counts every match on the side (`_count_aside`); the last one lists them all.
        counted = None
        if within is not None and count:
            counted = self._count_aside(terms, body, project_key)
        cursor = db.execute(sql, params)
        _, listed_total = cursor.fetchone()
        total = int(listed_total) if within is None else 0
        if counted is not None:
            total = counted()

        def rows() -> Iterator[tuple[str, float]]:
            while chunk := cursor.fetchmany(64):
                marks = ",".join("?" * len(chunk))
                paths = dict(db.execute(f"SELECT id, path FROM keys WHERE id IN ({marks})",
                                        [row_id for row_id, _ in chunk]).fetchall())
                for row_id, ceiling in chunk:
                    yield str(paths[row_id]), float(ceiling)

        return BoundedCandidates(total=total, rows=rows())

    def _match_total(self, terms: Sequence[str], body: BodyBound | None,
                     project_key: str, db: sqlite3.Connection | None = None) -> int:
        """Every entry in scope holding a frontmatter term or a body word: one FTS5 count."""
        listed = _any_of(terms, [t for ts in body.terms for t in ts] if body else ())
        if not listed:
            return 0
        query = f"({listed})" + (f" AND {_in_scope(project_key)}" if project_key else "")
        return int((db or self.db).execute("SELECT count(*) FROM terms WHERE terms MATCH ?",
                                           (query,)).fetchone()[0])

    def _count_aside(self, terms: Sequence[str], body: BodyBound | None,
                     project_key: str) -> Callable[[], int]:
        """`_match_total` on a second connection in a thread, while this one lists a round:
        SQLite releases the GIL while it steps, so the count of every match (a union of
        nearly every doclist for common words) costs no wall time beside the listing. Each
        statement reads its own snapshot either way (autocommit). Returns the join."""
        import threading  # only a round that counts needs it

        if self._counter is None:
            self.db  # noqa: B018 - opened (schema checked, rebuilt if stale) before a reader
            self._counter = sqlite3.connect(self.path, timeout=_BUSY_TIMEOUT_MS / 1000,
                                            isolation_level=None, check_same_thread=False)
            self._counter.execute("PRAGMA query_only = 1")
        counter = self._counter
        result: list[int | BaseException] = []

        def work() -> None:
            try:
                result.append(self._match_total(terms, body, project_key, counter))
            except BaseException as exc:  # re-raised where the count is read
                result.append(exc)

        thread = threading.Thread(target=work, name="chapters-count", daemon=True)
        thread.start()

        def joined() -> int:
            thread.join()
            if isinstance(result[0], BaseException):
                raise result[0]
            return result[0]

        return joined

    def maxima(self, terms: Sequence[str], body: BodyBound | None) -> DoorMaxima:
        db = self.db
        fields: dict[str, str] = {}
        for term in dict.fromkeys(terms):
            fields[term] = "".join(
                mark for mark in _FIELD_MARKS
                if db.execute("SELECT 1 FROM terms WHERE terms MATCH ? LIMIT 1",
                              (_phrase(term, mark),)).fetchone())
        wanted = sorted({t for ts in body.terms for t in ts}) if body is not None else []
        found: dict[str, tuple[int, int]] = {}
        for chunk in _chunks(wanted):
            marks = ",".join("?" * len(chunk))
            for term, most, fewest in db.execute(
                    f"SELECT term, m, l FROM termmax WHERE term IN ({marks})", chunk):
                found[str(term)] = (int(most), int(fewest))
        return DoorMaxima(fields=fields, body=found)

    def fragments(self, session_dirs: Iterable[str]) -> list[SearchEntry]:
        out: list[SearchEntry] = []
        for chunk in _chunks(list(session_dirs)):
            marks = ",".join("?" * len(chunk))
            out.extend(_entry(r) for r in self.db.execute(
                f"SELECT {_COLUMNS} FROM entries WHERE legacy = 1 AND session_dir IN ({marks})",
                chunk))
        return out

    def by_paths(self, paths: Iterable[str]) -> list[SearchEntry]:
        out: list[SearchEntry] = []
        for chunk in _chunks(list(paths)):
            marks = ",".join("?" * len(chunk))
            out.extend(_entry(r) for r in self.db.execute(
                f"SELECT {_COLUMNS} FROM entries WHERE path IN ({marks})", chunk))
        return out

    def count(self) -> int:
        return int(self.db.execute("SELECT count(*) FROM entries").fetchone()[0])


def _chunks(items: list[str], size: int = 500) -> Iterator[list[str]]:
    for start in range(0, len(items), size):
        yield items[start:start + size]
