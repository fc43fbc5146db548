"""The `Viewer` the web adapter answers from, built from the composed App (`chapters serve`).

One more thin caller of the use cases the CLI runs, never a second way of doing them:
search is the search service and its one scorer (`chapters search`), a page is read through
the core's contained reader (`chapters artifact`), rules go through the rules use case
(`chapters rule list|approve|revoke`, `chapters notice` for the budget), topics through
`topic merge`, the pool through `chapters link|sync`. Every write takes the writer lock (the
rules and sync use cases take it themselves; a topic merge takes it here, as the CLI does).
"""

from __future__ import annotations

import json
import os
import re
import stat
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from dsh_chapters_core.curation import edits_path
from dsh_chapters_core.documents import Document, DocumentKind
from dsh_chapters_core.errors import ChaptersError, UsageError
from dsh_chapters_core.frontmatter import split_frontmatter
from dsh_chapters_core.pool_layout import PoolFileKind, to_store
from dsh_chapters_core.ports.search import DocumentReader
from dsh_chapters_core.ports.viewer import SearchFilters
from dsh_chapters_core.reading import read_text, resolve
from dsh_chapters_core.rules import (
    RuleStatus,
    core_rule_ids,
    load_rules,
    rule_json,
    status_counts,
)
from dsh_chapters_core.search.index import (
    canonical_topics,
    load_manifest,
    read_curation,
    record_topic_sets,
)
from dsh_chapters_core.search.packing import AnswerStatus, SearchAnswer, pack_results
from dsh_chapters_core.search.scorer import ScoredEntry
from dsh_chapters_core.search.service import DoorName, SearchRequest, SearchService
from dsh_chapters_core.search.vocabulary import vocabulary_candidates

from dsh_chapters.app import MIRROR_DIRNAME, App
from dsh_chapters.present import cli_argument, hint_text
from dsh_chapters.services import pool as knowledge_pool
from dsh_chapters.services.library import expand_chapter_id
from dsh_chapters.services.rules import notice, provenance, rules_here, set_status

_CHAPTERS_DIR = "/chapters/"


@dataclass
class _HarnessLookup:
    """harnessId of a door-relative document path, read once per path from its frontmatter."""

    service: SearchService
    seen: dict[tuple[str, str], str] = field(default_factory=dict)

    def __call__(self, door: DoorName, path: str) -> str:
        key = (str(door), path)
        if key not in self.seen:
            found = self.service.door(door)
            harness = ""
            if found is not None and found.tree.exists(path):
                doc = found.reader.parse(path, found.tree.read(path))
                harness = doc.harness_id if doc is not None else ""
            if not harness and path.startswith("rules/"):
                parts = path.split("/")
                harness = parts[-2] if len(parts) >= 3 else ""
            self.seen[key] = harness
        return self.seen[key]


def _keep(scored: ScoredEntry, filters: SearchFilters, door: DoorName,
          harness_of: Callable[[DoorName, str], str]) -> bool:
    entry = scored.entry
    if filters.kind and str(entry.kind) != filters.kind:
        return False
    day = entry.date[:10]
    if filters.since and (not day or day < filters.since):
        return False
    if filters.until and (not day or day > filters.until):
        return False
    return not filters.machine or harness_of(door, entry.path) == filters.machine


def filtered_search(service: SearchService, request: SearchRequest, filters: SearchFilters,
                    *, max_tokens: int) -> SearchAnswer:
    """`SearchService.search` with the viewer's extra filters applied to the one ranking.

    Without kind/machine/date filters this IS `service.search`. With them, each door's full
    ranking (the same `rank_door`) is filtered and packed by the same `pack_results`, so
    `total` counts the filtered matches and `shown` what fits the page's budget.
    """
    if not filters.narrowing:
        return service.search(request)
    try:
        return _filtered(service, request, filters, max_tokens=max_tokens)
    finally:
        service.release()  # the viewer keeps its service: it holds nothing between questions


def _filtered(service: SearchService, request: SearchRequest, filters: SearchFilters,
              *, max_tokens: int) -> SearchAnswer:
    harness_of = _HarnessLookup(service)
    core = service.core_rules() if service.core_rules else frozenset()  # as `search` applies
    documents = 0
    for door in service.doors:
        ranking = service.rank_door(door, request, core_rule_ids=core, limit=None)
        kept = [s for s in ranking.ranked if _keep(s, filters, door.name, harness_of)]
        if kept:
            store = service.door(DoorName.STORE)
            return pack_results(kept, max_tokens=max_tokens, config=service.config,
                                door=str(door.name), path_prefix=door.prefix,
                                overlay_prefix=store.prefix if store is not None else "",
                                total=len(kept))
        documents += ranking.documents or len(ranking.ranked)
    first = service.doors[0]
    return pack_results((), max_tokens=max_tokens, config=service.config, door=str(first.name),
                        path_prefix=first.prefix,
                        status=AnswerStatus.NO_MATCH if documents else AnswerStatus.EMPTY,
                        searched=documents)


def _chapter_row(doc: Document, link: str, origin: str) -> dict[str, Any]:
    name = link.rsplit("/", 1)[-1]
    digits = name.split("-", 1)[0]
    return {"path": link, "number": int(digits) if digits.isdigit() else 0, "title": doc.title,
            "date": doc.date, "messages": dict(doc.messages), "topics": list(doc.topics),
            "origin": origin}


_SessionRow = tuple[str, str, str, dict[str, Any]]  # machine, session, harness, chapter row


def group_sessions(rows: Iterable[_SessionRow]) -> dict[str, Any]:
    """(machine, session, harness, chapter row) -> machines › days › sessions, newest first."""
    sessions: dict[tuple[str, str], dict[str, Any]] = {}
    for machine, session_id, harness, row in rows:
        s = sessions.setdefault((machine, session_id), {
            "sessionId": session_id, "harnessId": machine, "harness": harness,
            "chapters": [], "messages": defaultdict(int)})
        s["chapters"].append(row)
        for role, count in row["messages"].items():
            s["messages"][role] += count
    machines: dict[str, dict[str, list[dict[str, Any]]]] = defaultdict(lambda: defaultdict(list))
    for (machine, _), s in sessions.items():
        s["chapters"].sort(key=lambda r: (r["number"], r["path"]))
        dates = [r["date"] for r in s["chapters"] if r["date"]]
        s["date"] = min(dates) if dates else ""
        s["chapterCount"] = len(s["chapters"])
        s["messages"] = dict(sorted(s["messages"].items()))
        machines[machine][s["date"][:10] or "undated"].append(s)
    out: list[dict[str, Any]] = []
    for machine in sorted(machines):
        days = machines[machine]
        out.append({"harnessId": machine, "days": [
            {"date": day, "sessions": sorted(days[day], key=lambda row: str(row["date"]),
                                                 reverse=True)}
            for day in sorted(days, reverse=True)]})
    return {"machines": out, "sessions": len(sessions),
            "chapters": sum(s["chapterCount"] for s in sessions.values())}


_FLOW_KEY = re.compile(r'^("(?:[^"\\]|\\.)*"|[A-Za-z_][A-Za-z0-9_]*): (.*)$')


def flow_frontmatter(text: str) -> dict[str, Any] | None:
    """The frontmatter the archive writes (`dump_frontmatter`: one `key: <JSON>` line a key),
    read without a YAML parser; None when any line is not in that form (a hand edit), so the
    caller falls back to the YAML reader and reads the file exactly as `chapters show` does."""
    head, _ = split_frontmatter(text)
    if not head:
        return None
    fields: dict[str, Any] = {}
    for line in head.splitlines():
        match = _FLOW_KEY.match(line)
        if match is None:
            return None
        key = match.group(1)
        try:
            fields[json.loads(key) if key.startswith('"') else key] = json.loads(match.group(2))
        except (ValueError, RecursionError):
            return None
    return fields


def _as_document(path: str, fields: dict[str, Any]) -> Document | None:
    kind, messages, topics = fields.get("kind"), fields.get("messages", {}), fields.get("topics")
    if kind != str(DocumentKind.CHAPTER) or not isinstance(messages, dict):
        return None
    return Document(path=path, kind=DocumentKind.CHAPTER, title=str(fields.get("title", "")),
                    date=str(fields.get("date", "")), session_id=str(fields.get("sessionId", "")),
                    harness_id=str(fields.get("harnessId", "")),
                    topics=tuple(str(t) for t in topics) if isinstance(topics, list) else (),
                    messages=tuple((str(k), int(v)) for k, v in messages.items()
                                   if isinstance(v, int)))


def _store_chapters(root: str) -> Iterator[tuple[str, os.stat_result, str]]:
    """(file, lstat, store-relative path) of every `<session>/chapters/*.md`, by scandir:
    one listing per session directory, the stat from the listing itself."""
    try:
        top = os.scandir(root)
    except OSError:
        return
    with top:
        sessions = [d for d in top if d.is_dir(follow_symlinks=False)]
    for session in sorted(sessions, key=lambda d: d.name):
        try:
            listing = os.scandir(os.path.join(session.path, "chapters"))
        except OSError:
            continue
        with listing:
            for entry in sorted(listing, key=lambda e: e.name):
                if entry.name.endswith(".md"):
                    yield (entry.path, entry.stat(follow_symlinks=False),
                           f"{session.name}/chapters/{entry.name}")


@dataclass
class _ChapterHeads:
    """The sessions page's view of each chapter's frontmatter, re-read only when the file's
    stat changed: listing a 10k store is a directory walk, not 10k YAML parses."""

    reader: DocumentReader  # the store's own (the composition root builds it)
    seen: dict[str, tuple[int, int, Document | None]] = field(default_factory=dict)
    guard: threading.Lock = field(default_factory=threading.Lock)

    def document(self, file: str, path: str, st: os.stat_result) -> Document | None:
        """`st` is the file's lstat: a symlink is never followed (§9 containment)."""
        if stat.S_ISLNK(st.st_mode) or not stat.S_ISREG(st.st_mode):
            return None
        key = file
        with self.guard:
            cached = self.seen.get(key)
        if cached is not None and cached[:2] == (st.st_mtime_ns, st.st_size):
            return cached[2]
        try:
            with open(file, "rb") as handle:
                data = handle.read()
        except OSError:
            return None
        text = data.decode("utf-8", errors="replace")
        fields = flow_frontmatter(text)
        doc = _as_document(path, fields) if fields is not None else None
        if fields is None or (doc is None and fields.get("kind") == str(DocumentKind.CHAPTER)):
            doc = self.reader.parse(path, data)
        with self.guard:
            self.seen[key] = (st.st_mtime_ns, st.st_size, doc)
        return doc


@dataclass
class _CoreRuleCache:
    """This machine's core rule ids, re-resolved only when a rule or an edits file changed.

    The search service asks for them on every query (the §8 core bonus); resolving them parses
    every rule file. A long-lived viewer keys the answer on the files' stat signatures, so a
    query pays a directory walk of `rules/` and `edits/`, not a YAML parse per rule.
    """

    app: App
    key: tuple[tuple[str, int, int], ...] | None = None
    ids: frozenset[str] = frozenset()
    guard: threading.Lock = field(default_factory=threading.Lock)

    def signature(self) -> tuple[tuple[str, int, int], ...]:
        root = self.app.store_root
        found = []
        for top in ("rules", "edits"):
            for path in sorted((root / top).rglob("*")) if (root / top).is_dir() else ():
                if path.is_file():
                    st = path.stat()
                    found.append((path.relative_to(root).as_posix(), st.st_mtime_ns, st.st_size))
        return tuple(found)

    def __call__(self) -> frozenset[str]:
        key = self.signature()
        with self.guard:
            if key != self.key:
                self.ids = core_rule_ids(load_rules(self.app.store_tree, self.app.store,
                                                    self.app.harness_id))
                self.key = key
            return self.ids


@dataclass
class AppViewer:
    """The port over one App, composed once per server process (STYLE: compose once).

    With `refresh_interval_s` > 0 and `start()` called, a background thread brings every
    search door current on that interval (the viewer is long-lived: STYLE, "keep the index
    current where documents are written, so a query never walks the corpus"), and pages only
    query. Without it, each search brings the doors current first, as `chapters search` does.
    """

    app: App
    search_max_tokens: int = 0
    refresh_interval_s: float = 0.0
    _core_rules: _CoreRuleCache = field(init=False)
    _heads: _ChapterHeads = field(init=False)
    _refreshed: threading.Event = field(default_factory=threading.Event, init=False)
    _stop: threading.Event = field(default_factory=threading.Event, init=False)
    _thread: threading.Thread | None = field(default=None, init=False)
    last_refresh_ms: float = field(default=0.0, init=False)
    _local: threading.local = field(default_factory=threading.local, init=False)
    _services: list[SearchService] = field(default_factory=list, init=False)
    _open_lock: threading.Lock = field(default_factory=threading.Lock, init=False)

    def __post_init__(self) -> None:
        self._core_rules = _CoreRuleCache(self.app)
        self._heads = _ChapterHeads(self.app.factories.document_reader())

    # -- the index, kept current -----------------------------------------------------------

    def start(self) -> None:
        if self.refresh_interval_s <= 0 or self._thread is not None:
            return
        self._thread = threading.Thread(target=self._refresh_loop, name="viewer-index",
                                        daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(30)
            self._thread = None

    def refresh_now(self) -> None:
        started = time.perf_counter()
        service = self._open()
        # A walk of stats whatever the generation: this pass also finds files put in the
        # store behind every writer. It reads only what changed.
        service.bring_all(walk=True)
        self.last_refresh_ms = (time.perf_counter() - started) * 1000
        self._refreshed.set()

    def _refresh_loop(self) -> None:
        while not self._stop.is_set():
            try:
                self.refresh_now()
            except ChaptersError:  # an unreadable door is reported by the page that asks
                self._refreshed.set()
            self._stop.wait(self.refresh_interval_s)

    def _open(self) -> SearchService:
        """This thread's search service, opened once (its SQLite caches are per-thread) and
        closed by `close()`: a page pays for its query, not for opening the caches."""
        service: SearchService | None = getattr(self._local, "service", None)
        mirrored = (self.app.workspace / MIRROR_DIRNAME).is_dir()
        if service is not None and (service.door(DoorName.MIRROR) is not None) != mirrored:
            service.close()  # the first sync made the mirror (or it went): doors changed
            with self._open_lock:
                self._services.remove(service)
            service = None
        if service is None:
            service = self.app.open_search()
            service.core_rules = self._core_rules  # the same resolution, cached on changes
            self._local.service = service
            with self._open_lock:
                self._services.append(service)
        return service

    def close(self) -> None:
        """Close every thread's search service (the server is done)."""
        self.stop()
        with self._open_lock:
            services, self._services = self._services, []
        here = getattr(self._local, "service", None)
        for service in services:
            if service is here:
                service.close()
            # Another thread's SQLite connection can only be closed by that thread; the server's
            # worker threads end with the process, which closes them.

    def _current_search(self) -> SearchService:
        """A search service over doors that are current (or as current as the last pass)."""
        if self._thread is None:
            self.refresh_now()
        else:
            self._refreshed.wait()  # the first pass builds the index; later ones patch it
        return self._open()

    # -- sessions ------------------------------------------------------------------------------

    def sessions(self) -> dict[str, Any]:
        app = self.app
        meta = app.store.session_meta()
        rows: list[_SessionRow] = []
        seen: set[tuple[str, str]] = set()
        for file, st, path in _store_chapters(str(app.store_root)):
            doc = self._heads.document(file, path, st)
            if doc is None or doc.kind is not DocumentKind.CHAPTER:
                continue
            session = path.split("/", 1)[0]
            seen.add((session, path.rsplit("/", 1)[-1]))
            machine = doc.harness_id or meta.get(session, {}).get("harnessId", "") or "?"
            harness = meta.get(session, {}).get("harness", "")
            rows.append((machine, session, harness, _chapter_row(doc, path, "store")))
        rows.extend(self._mirror_rows(seen))
        data = group_sessions(rows)
        data.update({"projectKey": app.identity.project_key, "harnessId": app.harness_id,
                     "linked": bool(app.config.knowledge_remote)})
        return data

    def _mirror_rows(self, seen: set[tuple[str, str]]) -> list[_SessionRow]:
        app = self.app
        mirror = app.workspace / MIRROR_DIRNAME
        if not mirror.is_dir():
            return []
        rows = []
        # Quarantine means never served: a pool file the last sync set aside is not listed.
        held = next((r for r in app.read_roots() if r.mirror_layout), None)
        for path in sorted(app.mirror_tree.list(f"chapters/{app.identity.project_key}/")):
            entry = to_store(path, app.identity.project_key)
            if entry is None or entry.kind is not PoolFileKind.CHAPTER:
                continue
            if held is not None and held.withheld_reason(path):
                continue
            if (entry.session_id, path.rsplit("/", 1)[-1]) in seen:
                continue  # copied into the store already: listed once, from the store
            try:
                st = (mirror / path).lstat()
            except OSError:
                continue
            doc = self._heads.document(str(mirror / path), path, st)
            if doc is None:
                continue
            link = f"{MIRROR_DIRNAME}/{path}"
            rows.append((doc.harness_id or "?", entry.session_id, "",
                         _chapter_row(doc, link, "mirror")))
        return rows

    # -- a chapter or artifact -----------------------------------------------------------------

    def chapter(self, path: str) -> dict[str, Any]:
        path = expand_chapter_id(self.app, path) or path  # /chapter/<session>/<n>, as `show`
        roots = self.app.read_roots()
        found = resolve(path, roots)  # §9 containment: `..`, absolute paths, symlinks refused
        text = read_text(found)
        directory = found.path.rsplit("/", 1)[0] if "/" in found.path else ""
        is_chapter = f"/{directory}/".endswith(_CHAPTERS_DIR) or (
            found.root.mirror_layout and found.path.startswith("chapters/"))
        siblings: list[str] = []
        if is_chapter:
            siblings = sorted(p for p in found.root.tree.list(directory + "/")
                              if p.count("/") == found.path.count("/") and p.endswith(".md"))
        here = siblings.index(found.path) if found.path in siblings else -1
        prefix = found.root.directory

        def link(p: str) -> str:
            return p if found.root.name == "store" else f"{prefix}/{p}"

        return {
            "path": f"{prefix}/{found.path}",
            "link": link(found.path),
            "root": found.root.name,
            "kind": "chapter" if is_chapter else "artifact",
            "text": text,
            "lines": text.count("\n") + (0 if text.endswith("\n") or not text else 1),
            "previous": link(siblings[here - 1]) if here > 0 else None,
            "next": link(siblings[here + 1]) if 0 <= here < len(siblings) - 1 else None,
        }

    # -- search --------------------------------------------------------------------------------

    def search(self, query: str, filters: SearchFilters) -> dict[str, Any]:
        app = self.app
        max_tokens = self.search_max_tokens or app.config.viewer_search_max_tokens
        service = self._current_search()
        request = SearchRequest(query=query, max_tokens=max_tokens, topic=filters.topic,
                                cross_project=filters.cross_project,
                                project_key=app.identity.project_key)
        answer = filtered_search(service, request, filters, max_tokens=max_tokens)
        data = answer.to_json()
        data["query"] = query
        data["filters"] = {"kind": filters.kind, "topic": filters.topic,
                           "machine": filters.machine, "since": filters.since,
                           "until": filters.until, "crossProject": filters.cross_project}
        data["text"] = answer.text(cli_argument)
        return data

    # -- rules ---------------------------------------------------------------------------------

    def rules(self) -> dict[str, Any]:
        app = self.app
        every = rules_here(app)
        shown = tuple(r for r in every if r.status is not RuleStatus.REVOKED)
        rows = [{**rule_json(r), "provenance": provenance(r)} for r in shown]
        return {"harnessId": app.harness_id, "rules": rows, "shown": len(shown),
                "total": len(every), "counts": dict(status_counts(every)),
                "budget": self._budget()}

    def _budget(self) -> dict[str, Any]:
        core = notice(self.app).rules.core
        return {"count": len(core.rules), "tokens": core.total, "budget": core.budget,
                "refused": core.refused, "overBy": max(core.total - core.budget, 0),
                "sizes": [{"id": s.rule.id, "tokens": s.tokens} for s in core.rules]}

    def set_rule_status(self, rule_id: str, approve: bool) -> dict[str, Any]:
        if not rule_id.strip():
            raise UsageError("no rule id given", hint="pick a rule on /rules (<harnessId>/<NNN>)")
        status = RuleStatus.CORE if approve else RuleStatus.REVOKED
        change = set_status(self.app, rule_id.strip(), status)  # takes the writer lock
        return {"id": change.rule.id, "before": str(change.before), "after": str(change.after),
                "changed": change.changed, "harnessId": self.app.harness_id,
                "budget": self._budget()}

    # -- topics --------------------------------------------------------------------------------

    def topics(self) -> dict[str, Any]:
        app = self.app
        service = self._current_search()
        door = service.doors[0]
        curation = read_curation(door.tree)
        manifest = load_manifest(door.tree)
        # A merge made here lands in the store's edits first; the mirror door follows once
        # `chapters sync` publishes it (§6.3), so the page says which aliases still wait.
        local = read_curation(service.store.tree).aliases.pairs
        counts: dict[str, int] = defaultdict(int)
        candidates: list[dict[str, object]] = []
        if manifest is not None:
            for record in manifest.inputs.values():
                for topic in canonical_topics(record, curation):
                    counts[topic] += 1
            found = vocabulary_candidates(record_topic_sets(manifest, curation),
                                          config=app.config)
            candidates = [c.to_json() for c in found]
        vocabulary = [{"topic": t, "documents": n}
                      for t, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))]
        return {"door": str(door.name), "vocabulary": vocabulary,
                "aliases": [{"from": a, "to": b} for a, b in curation.aliases.pairs],
                "pendingAliases": [{"from": a, "to": b} for a, b in local
                                   if (a, b) not in curation.aliases.pairs],
                "candidates": candidates, "vocabApply": app.config.vocab_apply}

    def merge_topics(self, source: str, target: str) -> dict[str, Any]:
        app = self.app
        service = self._open()
        with app.lock.hold(app.config.sync_timeout_ms / 1000):  # as `chapters topic merge`
            fact = service.merge_topics(source, target)
            for door in service.doors:
                service.refresh(door)
        return {"fact": {"type": str(fact.type), **dict(fact.fields), "author": fact.author,
                         "at": fact.at}, "path": f"{app.store_dir()}/{edits_path(app.harness_id)}"}

    # -- the pool ------------------------------------------------------------------------------

    def pool(self) -> dict[str, Any]:
        status = knowledge_pool.pool_status(self.app)
        data = status.to_json()
        report = status.state.report
        data["localOnlyReason"] = (
            knowledge_pool.NEXT_STEP.get(report.failure_code, "")
            if report is not None and report.local_only else "")
        data["failureCode"] = (str(report.failure_code)
                               if report is not None and report.local_only else "")
        return data

    def sync(self) -> dict[str, Any]:
        try:
            report = knowledge_pool.run_sync(self.app)
        except ChaptersError as exc:  # nothing linked, or a refused remote: say so, keep going
            return {"ok": False, "error": exc.message, "next": hint_text(exc)}
        data = report.to_json()
        data["ok"] = report.ok
        data["line"] = report.line()
        if not report.ok:
            data["next"] = knowledge_pool.NEXT_STEP.get(report.failure_code,
                                                        "run `chapters link` to check the pool")
        return data

    def secrets(self) -> tuple[str, ...]:
        token = self.app.credentials.read(self.app.identity.project_key)
        return (token,) if token else ()

    def next_step(self, error: ChaptersError) -> str:
        # `chapters serve` runs from a terminal, so its pages word next steps as the CLI does.
        return hint_text(error)
