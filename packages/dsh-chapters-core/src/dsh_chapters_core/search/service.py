"""The search use case: two doors, one scorer (search.md "Two doors, one scorer", §8).

The pool mirror answers when the project is linked and pulled (`.dsh-knowledge/` exists);
otherwise, or when the mirror had no match, the local store does. The answer names its door.
"Nothing matched" (documents exist, the query missed) and "nothing here" (no archive at all)
are different statuses. By default only the caller's projectKey is searched.

With a `SearchCache`, candidates come from the cache and `rank_entries` scores them exactly;
without one, every document is read (the plain full scan the cache is tested against).
"""

from __future__ import annotations

import dataclasses
import enum
import hashlib
import json
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from dsh_chapters_core.config import Config
from dsh_chapters_core.curation import (
    CurationFact,
    FactLog,
    FactType,
    append_facts,
    make_fact,
)
from dsh_chapters_core.documents import Document
from dsh_chapters_core.errors import Argument, ArgumentError, ChaptersError, NextStep, UsageError
from dsh_chapters_core.ports.search import (
    NO_FIELD_HITS,
    DerivedTree,
    DocumentReader,
    SearchIndex,
)
from dsh_chapters_core.ports.store import FileTree
from dsh_chapters_core.search.aliases import slugify
from dsh_chapters_core.search.curated import RankFacts, rank_facts
from dsh_chapters_core.search.dates import TimeWindow, time_window
from dsh_chapters_core.search.entries import SearchEntry, entry_from_document, make_entry
from dsh_chapters_core.search.index import (
    INDEX_DIR,
    MANIFEST_PATH,
    Curation,
    DoorLayout,
    IndexManifest,
    fingerprint_chunks,
    index_is_current,
    list_documents,
    load_manifest,
    manifest_key,
    normalize_document,
    read_curation,
    record_topic_sets,
    shard_member_paths,
    shard_path,
    update_index,
)
from dsh_chapters_core.search.packing import (
    OVERLAY_MARK,
    SOURCE_WORDS,
    AnswerStatus,
    SearchAnswer,
    max_lines,
    pack_results,
)
from dsh_chapters_core.search.passages import (
    Anchor,
    BodyMatch,
    BodyStats,
    body_passages,
    body_stats,
    cut_anchor,
)
from dsh_chapters_core.search.scorer import (
    LexicalWeights,
    ScoredEntry,
    body_terms,
    frontmatter_score,
    frontmatter_terms,
    passage_rules,
    rank_entries,
    recency,
)
from dsh_chapters_core.search.stitching import is_legacy_fragment, stitch_fragments
from dsh_chapters_core.search.terms import QueryCut, bound_query
from dsh_chapters_core.search.topk import BodyQuery, Ranking, matching, top_matches
from dsh_chapters_core.search.vocabulary import (
    VOCABULARY_PATH,
    VocabularyCandidate,
    vocabulary_candidates,
)

if TYPE_CHECKING:
    # Annotations only: the updater is imported when an index is brought current.
    from dsh_chapters_core.search.index import IndexUpdate

STATUS_PATH = "cache/search-status.json"  # machine-local, under the store root
# How the mirror door's index names a store chapter not yet published (search.md "Two doors").
OVERLAY = OVERLAY_MARK
NOTES_MAX_BYTES = 256 * 1024  # the notes no query has read yet, at most (then it walks)
# The change tokens' journal (what the updates since the tokens file was written changed) is
# kept under this many bytes per token (about an eighth of the tokens file), or 64 KiB for a
# small store; past it, the tokens file is written whole again and the journal dropped.
TOKENS_JOURNAL_BYTES_PER_TOKEN = 16
TOKENS_JOURNAL_MIN_BYTES = 64 * 1024


class DoorName(enum.StrEnum):
    MIRROR = "mirror"
    STORE = "store"


@dataclass(frozen=True, slots=True)
class SearchDoor:
    """One corpus: its tree, how to read it, and its optional cache.

    `prefix` turns a door-relative path into a workspace-relative one (`.dsh-chapters/`),
    so every returned path opens with a plain `read`. `state` is the store tree, where the
    machine-local change tokens live (`state_path`), never the mirror.
    """

    name: DoorName
    layout: DoorLayout
    tree: DerivedTree
    reader: DocumentReader
    prefix: str = ""
    cache: SearchIndex | None = None
    state: DerivedTree | None = None
    state_path: str = ""
    # Where the store generation this door's index was last brought current at is kept (in
    # `state`): a query that reads the same generation from the store knows, without walking
    # the store, that nothing was written since.
    generation_path: str = ""
    # Where writers note the documents they wrote, per generation (in `state`), so the next
    # query reads exactly those instead of walking the door.
    notes_path: str = ""


@dataclass(frozen=True, slots=True)
class SearchRequest:
    """One question as a caller asks it: the words, the budget and what to show."""

    query: str
    max_tokens: int | None = None
    topic: str = ""
    cross_project: bool = False
    project_key: str = ""  # the caller's; "" searches every project
    snippets: bool = True  # each match's anchor line (`--no-snippets` drops it)
    explain: bool = False  # each match's score taken apart (`--explain`)


@dataclass(frozen=True, slots=True)
class DoorRanking:
    """What one door ranked for a question, and how many documents it matched."""

    door: SearchDoor
    # All matches, or (bounded) the best `limit` of them, certified as they are read.
    ranked: Sequence[ScoredEntry]
    total: int  # every match
    documents: int  # documents the door holds, any project (counted only when none ranked)


@dataclass(frozen=True, slots=True)
class RefreshReport:
    """What bringing one door's index current did, and the vocabulary it proposed."""

    door: DoorName
    update: IndexUpdate
    candidates: tuple[VocabularyCandidate, ...] = ()
    applied: tuple[CurationFact, ...] = ()

    def to_json(self) -> dict[str, Any]:
        u = self.update
        return {
            "door": str(self.door),
            "rebuilt": u.rebuilt,
            "documents": u.manifest.documents,
            "added": len(u.added),
            "changed": len(u.changed),
            "removed": len(u.removed),
            "skipped": list(u.skipped),
            "shards": u.shard_count,
            "shardsWritten": len(u.shards_written),
            "shardsRemoved": len(u.shards_removed),
            "divergent": list(u.divergent),
            "malformedFacts": u.curation.log.malformed,
            "vocabulary": {
                "candidates": [c.to_json() for c in self.candidates],
                "applied": len(self.applied),
            },
        }

    def line(self) -> str:
        u = self.update
        docs = u.manifest.documents
        verb = "rebuilt" if u.rebuilt else "updated"
        where = SOURCE_WORDS.get(str(self.door), str(self.door))
        text = (
            f"index of {where} {verb}: {docs} documents, {u.shard_count} shards; "
            f"+{len(u.added)} new, {len(u.changed)} changed, {len(u.removed)} removed, "
            f"{len(u.shards_written)} shards written"
        )
        if u.skipped:
            text += f", {len(u.skipped)} unreadable skipped"
        if u.divergent:
            text += f", {len(u.divergent)} divergent derived files rebuilt"
        if u.curation.log.malformed:
            text += f", {u.curation.log.malformed} malformed curation lines skipped"
        mode = "applied" if self.applied else "suggested only"
        text += f"; topic merges: {len(self.candidates)} ({mode})"
        return text


def core_rule_ids_from_facts(log: FactLog, harness_id: str) -> frozenset[str]:
    """Rules effective-core on THIS machine, by the rules use case's own status resolution
    (one interpretation of `rule-status` facts). The app injects `core_rules` built from
    `rules.load_rules`, which also binds approval to the rule's bytes; this is the fallback for
    a service built without it."""
    # Imported on use: the rules package (proposals, selection, the text screens) is a lot to
    # load, and a search built by the app never comes here.
    from dsh_chapters_core.rules import RuleStatus, effective_statuses

    statuses = effective_statuses(log.facts, harness_id)
    return frozenset(rid for rid, fact in statuses.items() if fact.status is RuleStatus.CORE)


@dataclass
class SearchService:
    """Search, refresh and curate over the doors a workspace has (mirror first, then store)."""

    doors: Sequence[SearchDoor]
    config: Config
    harness_id: str = ""
    clock_now: Callable[[], str] = field(default=lambda: "")
    core_rules: Callable[[], frozenset[str]] | None = None  # injected by the rules use case
    # The store's writer generation (bumped as each writer section starts); "" = unknown.
    generation: Callable[[], str] | None = None
    # Told (phase, done, total) while a whole door is read or cached: "read" then "cache".
    # A caller on a terminal draws a progress bar with it; words are the caller's.
    progress: Callable[[str, int, int], None] | None = None
    # A store chapter's path in the pool mirror once it is published (None: never published);
    # with it, the mirror door's answers include this machine's unpublished chapters.
    published_as: Callable[[str], str | None] | None = None

    def close(self) -> None:
        for door in self.doors:
            if door.cache is not None:
                door.cache.close()

    # -- doors -----------------------------------------------------------------------------

    def door(self, name: DoorName) -> SearchDoor | None:
        return next((d for d in self.doors if d.name is name), None)

    @property
    def store(self) -> SearchDoor:
        door = self.door(DoorName.STORE)
        if door is None:
            raise UsageError("search needs the local store door")
        return door

    # -- search ----------------------------------------------------------------------------

    def search(self, request: SearchRequest) -> SearchAnswer:
        """Rank in the first door that has a match; say which door answered."""
        config = self.config
        max_tokens = request.max_tokens or config.search_default_max_tokens
        if max_tokens < 1:
            raise ArgumentError(Argument.MAX_TOKENS, f"must be at least 1, got {max_tokens}",
                                hint=f"the default is {config.search_default_max_tokens}")
        if not request.query.strip() and not request.topic.strip():
            raise UsageError("empty query", step=NextStep.PASS_QUERY_OR_TOPIC)
        # A question is bounded before anything reads it (search.md "Long questions").
        query, cut = bound_query(request.query, max_chars=config.search_query_max_chars,
                                 max_words=config.search_query_max_words)
        if cut.cut:
            request = dataclasses.replace(request, query=query)
        try:
            return self._answer(request, max_tokens, cut)
        finally:
            self.release()

    def release(self) -> None:
        """Let go of what the last question read in every door's index (see `SearchIndex`)."""
        for door in self.doors:
            if door.cache is not None:
                door.cache.release()

    def _answer(self, request: SearchRequest, max_tokens: int, cut: QueryCut) -> SearchAnswer:
        config = self.config
        core = self._core_rule_ids()
        store = self.door(DoorName.STORE)
        overlay_prefix = store.prefix if store is not None else ""
        rankings: list[DoorRanking] = []
        for door in self.doors:
            limit = max_lines(max_tokens, config, door.prefix)
            ranking = self.rank_door(door, request, core_rule_ids=core, limit=limit)
            if ranking.ranked:
                answer = pack_results(ranking.ranked, max_tokens=max_tokens, config=config,
                                      door=str(door.name), path_prefix=door.prefix,
                                      overlay_prefix=overlay_prefix, total=ranking.total,
                                      snippets=request.snippets, explain=request.explain)
                unpublished = (door.cache.count(OVERLAY) if door.cache is not None
                               and door.name is DoorName.MIRROR else 0)
                return dataclasses.replace(answer, cut=cut if cut.cut else None,
                                           unpublished=unpublished)
            rankings.append(ranking)
        documents = sum(r.documents for r in rankings)
        first = self.doors[0] if self.doors else None
        answer = pack_results(
            (), max_tokens=max_tokens, config=config,
            door=str(first.name) if first else "", path_prefix=first.prefix if first else "",
            status=AnswerStatus.NO_MATCH if documents else AnswerStatus.EMPTY,
            searched=documents,
        )
        return dataclasses.replace(answer, cut=cut if cut.cut else None)

    def rank_door(
        self,
        door: SearchDoor,
        request: SearchRequest,
        *,
        core_rule_ids: frozenset[str] = frozenset(),
        limit: int | None = None,
    ) -> DoorRanking:
        """The door's ranking, best first: from the index when the door has one (read lazily,
        each match as soon as it is certain), else from every document read now (the plain
        scan the index is tested against). `total` counts every match."""
        curation = read_curation(door.tree)
        index = door.cache
        if index is not None:
            index.release()  # this question reads the index as it is now
            self.ensure_cache(door, curation)
        aliases = curation.aliases
        query = request.query
        topic = aliases.canonical(request.topic) if request.topic.strip() else ""
        if topic and not aliases.query_terms(query):
            query = topic  # a bare --topic lists the whole shard, each member hitting its topic
        terms = aliases.query_terms(query)
        if not (topic and query == topic):  # a shard's label is matched as it is named
            terms = frontmatter_terms(terms, self.config)
        scope = request.project_key if not request.cross_project else ""
        facts = rank_facts(curation.log.facts, aliases)
        # The body is read unless weighted out; a bare --topic lists a shard, no body needed.
        words = body_terms(query, self.config) if not (topic and query == topic) else ()
        window = self._window(query)
        if index is not None and not topic and not facts.groups and not facts.topic_weights \
                and not index.has_legacy():
            return self._rank_top(door, index, terms, words, scope=scope,
                                  core_rule_ids=core_rule_ids, snippets=request.snippets,
                                  window=window)
        stats: BodyStats | None = None
        bodies: dict[str, BodyMatch] | None = None
        if index is not None:
            stats = index.stats(words)
            if topic:
                entries: list[SearchEntry] = self._topic_entries(door, topic, curation)
            else:  # every match is scored: curated weights, groups or legacy fragments
                entries = self._matches(index, terms, words, stats, scope)
            bodies = self._bodies(index, entries, words, stats)
        elif topic:
            entries = self._topic_entries(door, topic, curation)
        else:
            entries = list(stitch_fragments(scan_entries(door, curation)))
        if facts.groups and not topic:
            entries = [*entries, *self._group_siblings(door, entries, facts, curation)]
        if scope:
            entries = [e for e in entries if e.project_key in (scope, "")]
        if words and stats is None:  # the plain scan or a shard: stats of the whole door
            stats = body_stats((body_passages(e.body, self.config.search_passage_lines)
                                for e in scan_entries(door, curation)), words)
        ranked: Sequence[ScoredEntry] = rank_entries(
            entries, terms, config=self.config, aliases=aliases, core_rule_ids=core_rule_ids,
            now_hint=self.clock_now(), text=query if words else "", stats=stats, facts=facts,
            bodies=bodies, window=window)
        total = len(ranked)
        # The count only matters when nothing matched ("no-match" vs "empty").
        documents = 0 if ranked else self._document_count(door)
        if bodies is not None and request.snippets and words:
            ranked = Ranking(self._anchored(door, ranked, words))
        return DoorRanking(door=door, ranked=ranked, total=total, documents=documents)

    def _window(self, query: str) -> TimeWindow | None:
        """The times the question names (search.md "Dates"), read against the clock."""
        if self.config.search_date_bonus <= 0:
            return None
        now = self.clock_now()
        try:
            today = datetime.fromisoformat(now.replace("Z", "+00:00")).date() if now else None
        except ValueError:
            today = None
        window = time_window(query, today)
        return window if window else None

    def _rank_top(self, door: SearchDoor, index: SearchIndex, terms: Sequence[str],
                  words: Sequence[str], *, scope: str, core_rule_ids: frozenset[str],
                  snippets: bool, window: TimeWindow | None = None) -> DoorRanking:
        """The index's top matches (topk.py): postings of the query's terms only, the best
        matches scored exactly and handed out as they are certain."""
        config = self.config
        stats = index.stats(words)
        body = BodyQuery(index.postings(words), tuple(stats.idf(t) for t in words),
                         stats.expected, passage_rules(config), config.search_body_weight)
        weights = LexicalWeights.of(config)
        core_bonus = config.rules_core_bonus
        hits = index.field_hits(terms)
        # The index hands out one FieldHits per distinct hit count (a handful), so each is
        # scored once, found by identity: hashing every document's hits cost more than the
        # scoring when a common word is in nearly every title (99,000 of them at 100k).
        scores: dict[int, float] = {}
        front: dict[int, float] = {}
        for doc, h in hits.items():
            score = scores.get(id(h))
            if score is None:
                score = scores[id(h)] = frontmatter_score(
                    h.topic, h.title, h.summary, h.category,
                    core_bonus if core_rule_ids and not core_rule_ids.isdisjoint(h.rule) else 0.0,
                    weights)
            front[doc] = score
        excluded = index.excluded(scope)
        total = matching(body, front, excluded)
        bonus = config.search_date_bonus
        dated = dict.fromkeys(index.dated(window), bonus) if window else {}
        found = top_matches(body, front, excluded=excluded, facts=index.facts, dated=dated)
        now = self.clock_now()
        half_life = config.search_recency_half_life_days

        def scored() -> Iterator[ScoredEntry]:
            for hit in found:
                entry = index.entries([hit.doc]).get(hit.doc)
                if entry is None:
                    continue
                h = hits.get(hit.doc, NO_FIELD_HITS)
                core = core_bonus if core_rule_ids and not core_rule_ids.isdisjoint(
                    h.rule) else 0.0
                yield ScoredEntry(hit.score, entry, h.topic, h.title, h.summary, h.category,
                                  core, recency(entry.date_key, now, half_life),
                                  hit.body.score, None, hit.body, hit.dated)

        items: Iterator[ScoredEntry] = scored()
        if snippets and words:
            items = self._anchored(door, items, words)
        ranked = Ranking(items)
        documents = 0 if ranked else index.count()
        return DoorRanking(door=door, ranked=ranked, total=total, documents=documents)

    def _matches(self, index: SearchIndex, terms: Sequence[str], words: Sequence[str],
                 stats: BodyStats, scope: str) -> list[SearchEntry]:
        """Every matching entry of the door (legacy fragments with their session's siblings,
        stitched; scoped after stitching, as a span takes its first member's project)."""
        body = BodyQuery(index.postings(words), tuple(stats.idf(t) for t in words),
                         stats.expected, passage_rules(self.config),
                         self.config.search_body_weight)
        ids: set[int] = set(index.field_hits(terms))
        for p in body.postings:
            if p is not None:
                ids.update(p.docs)
        ids -= index.excluded("")
        found = list(index.entries(sorted(ids)).values())
        entries = [e for e in found if is_legacy_fragment(e)
                   or not scope or e.project_key in (scope, "")]
        sessions = {c.session_dir for c in entries if is_legacy_fragment(c)}
        if not sessions:
            return entries
        return [*[c for c in entries if not is_legacy_fragment(c)],
                *stitch_fragments(index.fragments(sorted(sessions)))]

    def _bodies(self, index: SearchIndex, entries: Sequence[SearchEntry],
                words: Sequence[str], stats: BodyStats) -> dict[str, BodyMatch]:
        """The best passage of each entry, from the index."""
        if not words or self.config.search_body_weight <= 0:
            return {}
        body = BodyQuery(index.postings(words), tuple(stats.idf(t) for t in words),
                         stats.expected, passage_rules(self.config),
                         self.config.search_body_weight)
        ids = index.ids(e.path for e in entries)
        known = index.facts(list(ids.values()))
        out: dict[str, BodyMatch] = {}
        for path, doc in ids.items():
            info = known.get(doc)
            if info is not None:
                out[path] = body.best(doc, info)
        return out

    def _anchored(self, door: SearchDoor, items: Iterable[ScoredEntry],
                  words: Sequence[str]) -> Iterator[ScoredEntry]:
        """Each match with its anchor, cut from its chapter file as it is handed out: the
        only time a query reads a chapter, and only for what an answer shows."""
        snippet_chars = self.config.search_snippet_chars
        for item in items:
            if item.anchor is None and item.body.matched:
                item = dataclasses.replace(item, anchor=self._cut(door, item, words,
                                                                  snippet_chars))
            yield item

    def _cut(self, door: SearchDoor, item: ScoredEntry, words: Sequence[str],
             snippet_chars: int) -> Anchor | None:
        entry = item.entry
        tree, path = door.tree, entry.path
        if path.startswith(OVERLAY):  # an unpublished chapter: its file is in the store
            store = self.door(DoorName.STORE)
            if store is None:
                return None
            tree, path = store.tree, path.removeprefix(OVERLAY)
        try:
            text = tree.read(path).decode("utf-8", errors="replace")
        except (OSError, ChaptersError):
            return None  # gone since it was indexed: the match stands, without a snippet
        lines = text.split("\n")[max(entry.body_line - 1, 0):]
        return cut_anchor(lines, item.body, words, body_line=entry.body_line,
                          snippet_chars=snippet_chars)

    def _topic_entries(self, door: SearchDoor, topic: str, curation: Curation) -> list[SearchEntry]:
        """§8.1: `topic` reads a whole shard."""
        shard = shard_path(topic)
        if not door.tree.exists(shard):
            return []
        paths = shard_member_paths(door.tree.read(shard))
        if door.cache is not None:
            members = door.cache.by_paths(paths)
            sessions = {m.session_dir for m in members if is_legacy_fragment(m)}
            members += [f for f in door.cache.fragments(sorted(sessions)) if f.path not in paths]
        else:
            members = load_entries(door, paths, curation)
            sessions = {m.session_dir for m in members if is_legacy_fragment(m)}
            extra = [p for p in list_documents(door.tree, door.layout)
                     if p.rsplit("/", 1)[0] in sessions and p not in paths]
            members += [e for e in load_entries(door, extra, curation) if is_legacy_fragment(e)]
        return list(stitch_fragments(members))

    def _group_siblings(self, door: SearchDoor, entries: list[SearchEntry], facts: RankFacts,
                        curation: Curation) -> list[SearchEntry]:
        """Members of `group` facts that are not candidates yet (a group lifts its members
        even when only one matched). Store layout: `<session>/chapters/<file>`."""
        if door.layout is not DoorLayout.STORE:
            return []
        have = {e.path for e in entries}
        wanted = sorted({f"{sid}/chapters/{name}" for _, members in facts.groups
                         for sid, _, name in (m.partition("/") for m in members)} - have)
        if not wanted:
            return []
        if door.cache is not None:
            return door.cache.by_paths(wanted)
        return load_entries(door, [p for p in wanted if door.tree.exists(p)], curation)

    def _document_count(self, door: SearchDoor) -> int:
        if door.cache is not None:
            return door.cache.count()
        return len(list_documents(door.tree, door.layout))

    def _core_rule_ids(self) -> frozenset[str]:
        if self.core_rules is not None:
            return self.core_rules()
        store = self.door(DoorName.STORE)
        if store is None or not self.harness_id:
            return frozenset()
        return core_rule_ids_from_facts(read_curation(store.tree).log, self.harness_id)

    # -- the cache -------------------------------------------------------------------------

    def ensure_cache(self, door: SearchDoor, curation: Curation | None = None) -> None:
        """Make the door's cache agree with its manifest and facts; cheap when it already does."""
        cache = door.cache
        if cache is None:
            return
        curation = curation or read_curation(door.tree)
        token = door.tree.fingerprint(MANIFEST_PATH)
        state = cache.state()
        if (token and state.get("manifestFingerprint") == token
                and state.get("curation") == curation.key):
            return
        key = manifest_key(door.tree) if token else ""
        if key and state.get("manifest") == key and state.get("curation") == curation.key:
            cache.apply(upserts=(), removed=(), state={**state, "manifestFingerprint": token})
            return
        manifest = load_manifest(door.tree) if key else None
        if manifest is None or manifest.curation != curation.key:
            self.refresh(door)  # no index yet, or facts changed since it was built
            return
        self._patch_cache(door, manifest, curation, loaded=[])

    def _patch_cache(
        self,
        door: SearchDoor,
        manifest: IndexManifest,
        curation: Curation,
        loaded: list[tuple[Document, str]],
        *,
        reset: bool = False,
        delta: IndexUpdate | None = None,
    ) -> None:
        """Bring the cache to `manifest`: from the update's delta when the cache was current
        before it (O(delta)), else by comparing every row's hash (O(N) rows, O(delta) reads).
        `loaded` is emptied: each of its documents is let go once the cache has taken it in
        (a rebuild's first thousand bodies would otherwise stay in memory to its end)."""
        fresh_docs = {doc.path: (doc, sha) for doc, sha in loaded}
        loaded.clear()
        cache = door.cache
        if cache is None:
            return
        state = cache.state()
        new_state = {
            "manifest": manifest.key,
            "manifestFingerprint": door.tree.fingerprint(MANIFEST_PATH),
            "curation": curation.key,
        }
        realias = state.get("curation") != curation.key  # every row's terms must be re-derived
        if not reset and not realias and state.get("manifest") == manifest.key:
            if dict(state) != new_state:
                cache.apply(upserts=(), removed=(), state=new_state)
            return
        batch = self.config.search_cache_batch_rows
        if (not reset and not realias and delta is not None and delta.prior_key
                and delta.loaded_all and state.get("manifest") == delta.prior_key
                and len(fresh_docs) <= batch):
            delta_rows = [(entry_from_document(doc, aliases=curation.aliases,
                                               pins=curation.pins_of(doc.path)), sha)
                          for doc, sha in fresh_docs.values()]
            cache.apply(upserts=delta_rows, removed=(*delta.removed, *delta.skipped),
                        state=new_state)
            return
        # The mirror door's index also holds this machine's unpublished chapters (`OVERLAY`):
        # they are not the manifest's to remove; `_overlay` keeps them.
        have = {} if reset else {p: sha for p, sha in cache.shas().items()
                                 if not p.startswith(OVERLAY)}
        if not have and self._seed(door, manifest):
            have = {p: sha for p, sha in cache.shas().items() if not p.startswith(OVERLAY)}
            reset = False  # the rows taken stand in for a rebuild's first pass
            realias = True  # taken with the store's curation: every row's terms re-derived
        wanted: set[str] = set()
        # Where the manifest lines start, not (path, sha) pairs: a rebuild of a big corpus
        # would hold one of those for every document. The lines are in path order already.
        stale: list[int] = []
        for at, record in manifest.located_records():
            if record.skipped:
                continue
            if have:
                wanted.add(record.path)
            if realias or have.get(record.path) != record.sha256:
                stale.append(at)
        removed = sorted(p for p in have if p not in wanted)
        # Written in batches (bounded memory on a rebuild); the state is recorded with the
        # last one only, so an interrupted rebuild is found stale and resumed next time.
        for start in range(0, max(len(stale), 1), batch):
            chunk = [(r.path, r.sha256) for r in
                     (manifest.record_at(at) for at in stale[start:start + batch])]
            kept = {}
            if realias and not reset:  # same bytes, other aliases: re-derive from the rows
                kept = {e.path: e for e in cache.by_paths([p for p, _ in chunk])}
            upserts: list[tuple[SearchEntry, str]] = []
            for path, sha in chunk:
                if path in kept and have.get(path) == sha:
                    upserts.append((rebuild_entry(kept[path], curation), sha))
                    continue
                doc_sha = fresh_docs.pop(path, None)
                if doc_sha is None or doc_sha[1] != sha:
                    doc_sha = load_document(door, path)
                if doc_sha is None:
                    continue
                doc, actual = doc_sha
                upserts.append((entry_from_document(doc, aliases=curation.aliases,
                                                    pins=curation.pins_of(path)), actual))
            last = start + batch >= len(stale)
            if self.progress is not None and len(stale) > batch:
                self.progress("cache", min(start + batch, len(stale)), len(stale))
            cache.apply(upserts=upserts, removed=removed if start == 0 else (),
                        reset=reset and start == 0, state=new_state if last else {})

    def _seed(self, door: SearchDoor, manifest: IndexManifest) -> int:
        """§12 "Two doors": the mirror door's first index starts from the store door's, for
        every chapter the pool holds byte for byte as this machine does (a first sync publishes
        them all, a new machine's copies them all in), so each body is cut into passages and
        counted once, not once per door. Rows whose bytes differ, and the pool's other files,
        are read as always. Returns how many rows were taken."""
        store = self.door(DoorName.STORE)
        if (door.name is not DoorName.MIRROR or door.cache is None or store is None
                or store.cache is None or self.published_as is None):
            return 0
        self.ensure_cache(store)
        wanted = {record.path: record.sha256 for _, record in manifest.located_records()
                  if not record.skipped}
        paths: dict[str, str] = {}
        for path, sha in store.cache.chapter_shas().items():
            twin = self.published_as(path)
            if twin is not None and wanted.get(twin) == sha:
                paths[path] = twin
        return door.cache.seed_from(store.cache, paths) if paths else 0

    # -- refresh (the index) ---------------------------------------------------------------

    def refresh(
        self,
        door: SearchDoor,
        *,
        rebuild: bool = False,
        changed: Iterable[str] | None = None,
        vocabulary: bool = False,
    ) -> RefreshReport:
        """Update the door's index (O(delta)), then its cache; `rebuild` is the recovery path.
        A walk of the whole door (no `changed`) leaves the index current as of the generation
        read before it began; a writer that started since has bumped it past that."""
        generation = self._generation() if changed is None else ""
        if door.name is DoorName.MIRROR and door.cache is not None and not door.cache.state():
            # The mirror's first index starts from the store's (`_seed`): the store's is made
            # current first, before this door's documents are read and held.
            store = self.door(DoorName.STORE)
            if store is not None:
                self.ensure_cache(store)
        tokens = {} if rebuild else self._load_tokens(door)  # a rebuild reads none of them
        told = self.progress
        # No index at all yet (files that came from elsewhere): a first build, said so.
        phase = "build" if not door.tree.fingerprint(MANIFEST_PATH) else "read"
        update = update_index(door.tree, layout=door.layout, reader=door.reader,
                              fingerprints=tokens, rebuild=rebuild, changed=changed,
                              progress=None if told is None else (
                                  lambda done, total: told(phase, done, total)))
        if door.state is not None and door.state_path and update.fingerprints != tokens:
            self._save_tokens(door, tokens, update, whole=rebuild)
        before = door.cache.state().get("curation") if door.cache is not None else None
        loaded = list(update.loaded)
        update = dataclasses.replace(update, loaded=())  # the cache's alone, to let go of
        self._patch_cache(door, update.manifest, update.curation, loaded, reset=rebuild,
                          delta=update)
        if door.name is DoorName.MIRROR:
            self._overlay(door, rederive=rebuild or before != update.curation.key)
        self._record_generation(door, generation)
        report = RefreshReport(door=door.name, update=update)
        if vocabulary:
            report = self._vocabulary(door, report)
        self._save_status(door, report)
        return report

    def bring_current(self, door: SearchDoor, *, walk: bool = False) -> RefreshReport | None:
        """Refresh the door only if something was written since its last update; None when
        it was already current. What `chapters search` runs.

        The freshness rule (search.md): when the store's writer generation is the one the
        index recorded, no writer has run since and nothing is looked at. When every writer
        section since then noted the documents it wrote (`note_written`), exactly those are
        read. Otherwise the door is walked (stats only) and what changed is read. A file
        copied in by hand, behind every writer, is found by `chapters index`, or by a caller
        that asks to `walk` whatever the generation (the viewer's background pass)."""
        generation = self._generation()
        indexed = self._index_generation(door)
        if not walk and generation and generation == indexed:
            return None
        noted = None if walk else self._noted_since(door, indexed, generation)
        if noted is not None:
            report = self.refresh(door, changed=noted)
            self._record_generation(door, generation)
        elif not index_is_current(door.tree, door.layout, self._load_tokens(door)):
            report = self.refresh(door)
        else:
            report = None
            if door.name is DoorName.MIRROR:
                self._overlay(door)  # the store moved on: its unpublished chapters may have
            self._record_generation(door, generation)
        self._forget_notes(door)
        return report

    def bring_all(self, *, walk: bool = False) -> list[RefreshReport]:
        """Every door current (see `bring_current`): the store first, as the mirror door takes
        this machine's unpublished chapters from the store's index. The reports of the doors
        that were refreshed."""
        reports = []
        for door in sorted(self.doors, key=lambda d: d.name is not DoorName.STORE):
            report = self.bring_current(door, walk=walk)
            if report is not None:
                reports.append(report)
        return reports

    def _overlay(self, mirror: SearchDoor, *, rederive: bool = False) -> None:
        """§12 "Two doors": a linked search sees everything this machine has. The mirror door's
        index also holds the store's chapters that the pool does not have yet (their path
        marked `OVERLAY`), one entry per chapter: a chapter that is published is found at its
        pool path and leaves the overlay. Never in the mirror's derived files (the pool's)."""
        store = self.door(DoorName.STORE)
        if (mirror.cache is None or store is None or store.cache is None
                or self.published_as is None):
            return
        self.ensure_cache(store)
        shas = dict(mirror.cache.shas())
        in_pool = {p for p in shas if not p.startswith(OVERLAY)}
        wanted: dict[str, str] = {}
        for path, sha in store.cache.chapter_shas().items():
            twin = self.published_as(path)
            if twin is not None and twin not in in_pool:
                wanted[OVERLAY + path] = sha
        have = {p: sha for p, sha in shas.items() if p.startswith(OVERLAY)}
        removed = [p for p in have if p not in wanted]
        fresh = [p for p, sha in wanted.items() if rederive or have.get(p) != sha]
        if not removed and not fresh:
            return
        curation = read_curation(mirror.tree)
        upserts: list[tuple[SearchEntry, str]] = []
        for path in fresh:
            loaded = load_document(store, path.removeprefix(OVERLAY))
            if loaded is not None:
                doc, sha = loaded
                entry = entry_from_document(doc, aliases=curation.aliases,
                                            pins=curation.pins_of(doc.path))
                upserts.append((dataclasses.replace(entry, path=path), sha))
        mirror.cache.apply(upserts=upserts, removed=removed, state={})

    def note_written(self, door: SearchDoor, changed: Iterable[str]) -> None:
        """Where documents are written: a writer section that just wrote `changed` notes them
        under its generation, one appended line (O(1), so archiving stays O(new turns)). The
        next query reads exactly these instead of walking the door. Paths that are not
        documents (a facts file, the enrichment queue) are noted too: the section is then
        covered, and the query re-reads the curation facts as every update does."""
        generation = self._generation()
        if door.state is None or not door.notes_path or not generation.isdigit():
            return
        indexed = self._index_generation(door)
        if not indexed or indexed == generation:
            return  # no index yet (the first query builds it whole), or current at this number
        line = json.dumps({"generation": int(generation), "paths": sorted(set(changed))},
                          sort_keys=True, separators=(",", ":")) + "\n"
        # Read and rewritten whole: the file holds only the notes no query consumed yet. A
        # note lost to a concurrent query leaves its generation uncovered, and that query's
        # successor walks (never a wrong answer).
        before = door.state.read(door.notes_path) if door.state.exists(door.notes_path) else b""
        if len(before) + len(line) > NOTES_MAX_BYTES:
            # Hours of writers and no query (a live archive left running): rewriting the
            # notes would cost more each time. Dropped, they leave their numbers uncovered,
            # and the next query walks once instead.
            door.state.remove(door.notes_path)
            return
        door.state.write(door.notes_path, before + line.encode("utf-8"))

    def _noted_since(self, door: SearchDoor, indexed: str, generation: str) -> list[str] | None:
        """The documents written since generation `indexed`, if every writer section since
        noted what it wrote; None when one did not (or the numbers are not a plain run)."""
        if not (indexed.isdigit() and generation.isdigit()) or int(generation) <= int(indexed):
            return None
        if door.state is None or not door.notes_path or not door.state.exists(door.notes_path):
            return None
        if int(generation) - int(indexed) > NOTES_MAX_BYTES:
            # More numbers than the notes could hold lines (a damaged log restarts them from
            # the clock): never all noted, and never a set that size in memory.
            return None
        wanted = set(range(int(indexed) + 1, int(generation) + 1))
        paths: set[str] = set()
        seen: set[int] = set()
        try:
            text = door.state.read(door.notes_path).decode("utf-8")
        except (OSError, UnicodeDecodeError, ChaptersError):
            return None
        for line in text.splitlines():
            try:
                note = json.loads(line)
                number, noted = int(note["generation"]), note["paths"]
            except (ValueError, KeyError, TypeError, RecursionError):
                continue  # a line cut short by a crash: its section is then not covered
            if number in wanted and isinstance(noted, list):
                seen.add(number)
                paths.update(str(p) for p in noted)
        return sorted(paths) if seen == wanted else None

    def _forget_notes(self, door: SearchDoor) -> None:
        if door.state is not None and door.notes_path and door.state.exists(door.notes_path):
            door.state.remove(door.notes_path)

    def _generation(self) -> str:
        return self.generation() if self.generation is not None else ""

    def _index_generation(self, door: SearchDoor) -> str:
        if door.state is None or not door.generation_path:
            return ""
        try:
            return door.state.read(door.generation_path).decode("ascii").strip()
        except (OSError, KeyError, UnicodeDecodeError, ChaptersError):
            return ""

    def _record_generation(self, door: SearchDoor, generation: str) -> None:
        if door.state is not None and door.generation_path and generation:
            door.state.write(door.generation_path, f"{generation}\n".encode("ascii"))

    def _vocabulary(self, door: SearchDoor, report: RefreshReport) -> RefreshReport:
        update = report.update
        candidates = vocabulary_candidates(record_topic_sets(update.manifest, update.curation),
                                           config=self.config)
        if not self.config.vocab_apply or not candidates:
            return RefreshReport(door.name, update, candidates)  # §6.3: shadow by default
        at = self.clock_now()
        facts = tuple(c.to_fact(at) for c in candidates)
        append_facts(self.store.tree, self.harness_id, facts)
        # The facts live in the store; the door re-derives its shards under the new aliases.
        again = self.refresh(door)
        if door.name is not DoorName.STORE:
            self.refresh(self.store)
        return RefreshReport(door.name, again.update, candidates, facts)

    def _load_tokens(self, door: SearchDoor) -> dict[str, str]:
        """The change tokens: the tokens file, then its journal's lines applied in order."""
        if door.state is None or not door.state_path or not door.state.exists(door.state_path):
            return {}
        try:
            data = json.loads(door.state.read(door.state_path))
        except (ValueError, RecursionError):
            return {}
        if not isinstance(data, dict):
            return {}
        # Used as parsed, not checked value by value (100k tokens at 100k chapters): a value
        # that is not a string never equals a token, so its file is only read again.
        journal = _journal_path(door.state_path)
        if door.state.exists(journal):
            for line in door.state.read(journal).splitlines():
                try:
                    changed = json.loads(line)
                except (ValueError, RecursionError):
                    continue  # cut short by a crash: the tokens it held are only hints
                for path, token in changed.items() if isinstance(changed, dict) else ():
                    if token is None:
                        data.pop(path, None)
                    else:
                        data[str(path)] = str(token)
        return data

    def _save_tokens(self, door: SearchDoor, before: Mapping[str, str], update: IndexUpdate,
                     *, whole: bool) -> None:
        """Record the update's tokens. One that changed a few appends them to the journal
        (O(delta): at 100k chapters the tokens file is 13 MB); the file is written whole on a
        rebuild, or once the journal outgrows its share of it. A token lost with a torn
        journal line, or to a concurrent update, is only a hint: its file is read again and
        found unchanged by its hash."""
        assert door.state is not None
        state, path, journal = door.state, door.state_path, _journal_path(door.state_path)
        after = update.fingerprints
        if not whole and before and state.exists(path):
            changed: dict[str, str | None]
            if update.touched is not None:  # the update kept count: no pass over every token
                changed = {p: after.get(p) for p in update.touched if before.get(p) != after.get(p)}
            else:  # set operations on the views: one C pass each, not a Python loop
                changed = dict(after.items() - before.items())
                changed.update(dict.fromkeys(before.keys() - after.keys()))
            line = json.dumps(changed, sort_keys=True, separators=(",", ":")).encode("utf-8")
            kept = state.read(journal) if state.exists(journal) else b""
            kept = kept[:kept.rfind(b"\n") + 1]  # a line torn by a crash is not carried on
            cap = max(TOKENS_JOURNAL_MIN_BYTES, len(before) * TOKENS_JOURNAL_BYTES_PER_TOKEN)
            if len(kept) + len(line) < cap:
                state.write(journal, kept + line + b"\n")
                return
        state.write_chunks(path, fingerprint_chunks(after))
        state.remove(journal)

    def _save_status(self, door: SearchDoor, report: RefreshReport) -> None:
        store = self.door(DoorName.STORE)
        if store is None:
            return
        status = read_search_status(store.tree)
        status[str(door.name)] = {
            "shards": report.update.shard_count,
            "documents": report.update.manifest.documents,
            "candidates": len(report.candidates),
            "applied": len(report.applied),
            "vocabApply": self.config.vocab_apply,
        }
        data = json.dumps(status, sort_keys=True, indent=2) + "\n"
        if not store.tree.exists(STATUS_PATH) or store.tree.read(STATUS_PATH) != data.encode():
            store.tree.write(STATUS_PATH, data.encode("utf-8"))

    # -- curation --------------------------------------------------------------------------

    def merge_topics(self, source: str, target: str) -> CurationFact:
        """`chapters topic merge <a> <b>`: a user-authored `topic-alias` fact (§6.3)."""
        # §9: redacted before slugging, whose lower case would hide a key from the rules
        from dsh_chapters_core.chokepoint import redact_for_store  # the write path only

        a, b = slugify(redact_for_store(source)), slugify(redact_for_store(target))
        if not a or not b:
            raise UsageError(
                f"topic merge needs two topic names with words, got {source!r} {target!r}",
                step=NextStep.NAME_TWO_TOPICS)
        if a == b:
            raise UsageError(f"topic merge: {a!r} and {b!r} are the same topic",
                             hint="name two different topics")
        fact = make_fact(FactType.TOPIC_ALIAS, author="user", at=self.clock_now(),
                         **{"from": a, "to": b})
        append_facts(self.store.tree, self.harness_id, (fact,))
        return fact


def derived_files(door: SearchDoor, held: Callable[[str], str] | None = None) -> dict[str, bytes]:
    """The door's derived index as files (`index/…`, `topics/vocabulary.json`), e.g. for sync
    to stage into the pool after `refresh` (§10.2: rebuilt and committed, never merged).

    `held(path)` is the sha256 of the file where they go ("" when there is none): a file
    holding these very bytes already is left out, so an unchanged index of thousands of shards
    is neither read nor staged again."""
    paths = [p for p in door.tree.list(INDEX_DIR) if p.count("/") == 1]
    if door.tree.exists(VOCABULARY_PATH):
        paths.append(VOCABULARY_PATH)
    if held is not None:
        paths = [p for p in paths if held(p) != door.tree.digest(p)]
    return {p: door.tree.read(p) for p in paths}


def read_search_status(tree: FileTree) -> dict[str, Any]:
    """The last refresh per door (shards, vocabulary candidates), for `chapters status`."""
    if not tree.exists(STATUS_PATH):
        return {}
    try:
        data = json.loads(tree.read(STATUS_PATH))
    except (ValueError, RecursionError):
        return {}
    return data if isinstance(data, dict) else {}


def status_line(tree: FileTree, *, build_index: str) -> str:
    """One line for `chapters status`: shard count and vocabulary candidates per door.
    `build_index` is how the caller names the indexing step (the core names no command)."""
    status = read_search_status(tree)
    if not status:
        return f"search     no index yet (run {build_index})"
    parts = []
    for door in (DoorName.MIRROR, DoorName.STORE):
        s = status.get(str(door))
        if isinstance(s, Mapping):
            mode = "applied" if s.get("vocabApply") else "suggested only"
            parts.append(f"{SOURCE_WORDS.get(str(door), str(door))}: {s.get('documents', 0)} "
                         f"documents in {s.get('shards', 0)} topic shards, "
                         f"{s.get('candidates', 0)} topic merges ({mode})")
    return "search     " + "; ".join(parts)


def rebuild_entry(entry: SearchEntry, curation: Curation) -> SearchEntry:
    """The same document under new aliases and pins, from the entry's own raw fields (an
    entry read back from the index has no body, and keeps where its body starts in the file)."""
    return make_entry(path=entry.path, kind=entry.kind, title=entry.title, summary=entry.summary,
                      topics=entry.raw_topics, date=entry.date, category=entry.category,
                      project_key=entry.project_key, session_id=entry.session_id,
                      aliases=curation.aliases, pins=curation.pins_of(entry.path),
                      body=entry.body, body_line=entry.body_line)


def load_document(door: SearchDoor, path: str) -> tuple[Document, str] | None:
    if not door.tree.exists(path):
        return None
    data = door.tree.read(path)
    doc = door.reader.parse(path, data)
    if doc is None:
        return None
    return normalize_document(door.layout, path, doc), hashlib.sha256(data).hexdigest()


def load_entries(door: SearchDoor, paths: Iterable[str], curation: Curation) -> list[SearchEntry]:
    out: list[SearchEntry] = []
    for path in paths:
        loaded = load_document(door, path)
        if loaded is not None:
            out.append(entry_from_document(loaded[0], aliases=curation.aliases,
                                           pins=curation.pins_of(path)))
    return out


def scan_entries(door: SearchDoor, curation: Curation) -> Iterator[SearchEntry]:
    """The plain full scan: every document of the door, read and parsed now (no index, no cache)."""
    yield from load_entries(door, list_documents(door.tree, door.layout), curation)


def _journal_path(tokens_path: str) -> str:
    """Where the journal of the tokens file `cache/<door>.tokens.json` is kept."""
    return tokens_path.removesuffix(".json") + ".journal.jsonl"

