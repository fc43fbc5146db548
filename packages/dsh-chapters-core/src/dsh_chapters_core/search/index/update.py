"""Bringing the index up to date (§10.2): O(delta) updates and byte-identical rebuilds.

An update reads only new or changed inputs (O(delta)); a full rebuild reads everything and
gives byte-identical files: both render shards from the same records with the same function.
A derived file found divergent (hand-edited, or a different build pulled) is re-rendered,
never merged (§3.3, §5.2).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from dsh_chapters_core.documents import Document
from dsh_chapters_core.ports.search import DerivedTree, DocumentReader
from dsh_chapters_core.search.index.layout import (
    INDEX_DIR,
    NOT_INPUT_TOKENS,
    DoorLayout,
    is_document_path,
    scan_documents,
)
from dsh_chapters_core.search.index.manifest import (
    MANIFEST_PATH,
    Curation,
    IndexManifest,
    IndexRecord,
    canonical_topics,
    edits_paths,
    load_manifest,
    normalize_document,
    patch_shard,
    read_curation,
    record_of,
    render_shard,
    shard_path,
)
from dsh_chapters_core.search.vocabulary import VOCABULARY_PATH, vocabulary_document


@dataclass(frozen=True, slots=True)
class IndexUpdate:
    """What bringing a door's index up to date did: the manifest it left, the paths it added,
    changed, removed or skipped, the shards it wrote, and what it read on the way."""

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
    loaded_all: bool = True  # False when some were read but not kept (KEEP_LOADED)
    prior_key: str = ""  # the manifest key before this update ("" on a rebuild)
    fingerprints: Mapping[str, str] = field(default_factory=dict)
    # The paths whose token this update set or dropped, when it kept count (the delta path);
    # None: compare `fingerprints` with the tokens it was given.
    touched: frozenset[str] | None = None
    # No index existed before this update (a store that came from elsewhere, or the first
    # write): it was built, not rebuilt from something unreadable.
    first: bool = False

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
    progress: Callable[[int, int], None] | None = None,
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
    # The manifest our last update wrote, unchanged since (its token says so), is not hashed
    # again to check its key: at a hundred thousand inputs that is a 43 MB pass per update.
    token = tree.fingerprint(MANIFEST_PATH)
    ours = bool(token) and fingerprints is not None and fingerprints.get(MANIFEST_PATH) == token
    prior = None if rebuild else load_manifest(tree, trusted=ours)
    if prior is not None and prior.curation == curation.key and fingerprints:
        delta = _update_delta(tree, layout, reader, prior, curation, _Tokens(fingerprints),
                              None if changed is None else list(changed))
        if delta is not None:
            return delta
    full = _update_full(tree, layout, reader, prior, curation, fingerprints, changed, progress)
    return dataclasses.replace(full, first=not token) if not token else full


class _Tokens(dict[str, str]):
    """The change tokens a delta update works on, remembering every path it set or dropped:
    the caller records those alone (`IndexUpdate.touched`) instead of comparing 100k tokens."""

    def __init__(self, tokens: Mapping[str, str]) -> None:
        super().__init__(tokens)
        self.touched: set[str] = set()

    def __setitem__(self, path: str, token: str) -> None:
        self.touched.add(path)
        super().__setitem__(path, token)

    def pop(self, path: str, default: Any = None) -> Any:
        self.touched.add(path)
        return super().pop(path, default)


@dataclass
class _Reads:
    """What reading the candidates found (mutable bookkeeping of one update)."""

    added: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    loaded: list[tuple[Document, str]] = field(default_factory=list)
    dropped: int = 0  # read but not kept: the cache reads those again, a batch at a time


# Documents an update keeps in memory for the search cache; a rebuild of a big corpus keeps
# none past this, so building never holds the corpus (the cache re-reads, batch by batch).
KEEP_LOADED = 1000
_PROGRESS_EVERY = 250  # files read between two progress reports
_TOKENS_A_CHUNK = 5000  # change tokens encoded together when they are written
_COMPACT = json.JSONEncoder(separators=(",", ":"))


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
        if len(reads.loaded) < KEEP_LOADED:
            reads.loaded.append((dataclasses.replace(
                doc, extra=(), messages=(), sha256="", body_sha256=""), sha))
        else:
            reads.dropped += 1
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
        known = [p for p in tokens if not p.startswith(NOT_INPUT_TOKENS)]
        if len(known) != prior.count:
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

    # Each old record's topics once, inverted too: a shard drops only the paths it lists (an
    # import's new chapters are in no shard, and looking each up in every shard it touched
    # was most of a batch's patching).
    leaving: dict[str, list[str]] = {}
    for path, old in old_records.items():
        if not old.skipped:
            for topic in canonical_topics(old, curation):
                leaving.setdefault(topic, []).append(path)
    affected: set[str] = set(leaving)
    # Each new record's topics once, inverted: a batch of many chapters touches many topics,
    # and asking every record for every topic was quadratic in the batch.
    joining: dict[str, list[IndexRecord]] = {}
    for new in changes.values():
        if new is not None and not new.skipped:
            for topic in canonical_topics(new, curation):
                joining.setdefault(topic, []).append(new)
    affected.update(joining)

    divergent: list[str] = []
    # Every shard's token in one walk of `index/`, not a stat chain a shard: a store of
    # thousands of topics asks this on every refresh, changed or not.
    shard_tokens = tree.fingerprints(INDEX_DIR) if prior.shards else {}
    for shard, sha in prior.shards.items():
        token = shard_tokens.get(shard, "")
        if token and tokens.get(shard) == token:
            continue
        if not token or tree.digest(shard) != sha:
            return None  # §3.3: a divergent shard is re-derived from every record (full path)
        tokens[shard] = token

    shards = dict(prior.shards)
    written: list[str] = []
    for topic in sorted(affected):
        path = shard_path(topic)
        members = joining.get(topic, [])
        if path in prior.shards:  # patched as text: a big topic's rows are never parsed
            data = patch_shard(topic, tree.read(path), leaving.get(topic, ()), members)
        else:
            data = render_shard(topic, members) if members else None
        if data is None:
            shards.pop(path, None)
            continue
        shards[path] = hashlib.sha256(data).hexdigest()
        if shards[path] != prior.shards.get(path) or not tree.exists(path):
            tree.write(path, data)
            written.append(path)
        tokens[path] = tree.fingerprint(path)
    # What this update wrote is in `shards`: a stray is among the files the walk found.
    removed_shards = _drop_strays(tree, shards, tokens, divergent, prior,
                                  listed=shard_tokens if prior.shards else None)

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
    progress: Callable[[int, int], None] | None = None,
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
    for done, (path, token) in enumerate(candidates.items()):
        if progress is not None and done % _PROGRESS_EVERY == 0:
            progress(done, len(candidates))
        old = records.get(path)
        if old is not None and token and tokens.get(path) == token:
            continue
        new = _read_candidate(tree, layout, reader, path, old, reads)
        tokens[path] = token
        if new is not None:
            records[path] = new
    if progress is not None:
        progress(len(candidates), len(candidates))
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

    shards, written = _write_shards(tree, records, curation, prior, tokens)
    removed_shards = _drop_strays(tree, shards, tokens, divergent, prior)
    manifest = IndexManifest.of(records, edits=curation.digests, shards=shards,
                                curation=curation.key)  # empties `records`
    return _finish(tree, prior, manifest, curation, tokens,
                   everything=prior is None or prior.curation != curation.key, reads=reads,
                   removed=tuple(removed), written=written, removed_shards=removed_shards,
                   divergent=divergent)


def _write_shards(tree: DerivedTree, records: Mapping[str, IndexRecord], curation: Curation,
                  prior: IndexManifest | None, tokens: dict[str, str]
                  ) -> tuple[dict[str, str], list[str]]:
    """Every shard rendered from every record; written where the disk differs. Returns the
    shard hashes and the paths written. Its topic lists are gone when it returns, so the
    manifest that follows can free each record as it makes its line."""
    members = _shard_members(records.values(), curation, None)
    shards: dict[str, str] = {}
    written: list[str] = []
    for topic in sorted(members):
        path = shard_path(topic)
        data = render_shard(topic, members.pop(topic))
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
    return shards, written


def _drop_strays(tree: DerivedTree, shards: Mapping[str, str], tokens: dict[str, str],
                 divergent: list[str], prior: IndexManifest | None,
                 listed: Iterable[str] | None = None) -> list[str]:
    """Remove shard files no build produced (or whose topic is gone). `listed` is `index/`
    as the caller just walked it, when it did."""
    removed: list[str] = []
    for path in sorted(tree.list(INDEX_DIR) if listed is None else listed):
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
        tree.write_chunks(MANIFEST_PATH, manifest.dump_chunks())
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
        loaded_all=not reads.dropped,
        prior_key=prior.key if prior is not None else "",
        fingerprints=tokens,
        touched=frozenset(tokens.touched) if isinstance(tokens, _Tokens) else None,
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
    known = sum(1 for p in fingerprints if not p.startswith(NOT_INPUT_TOKENS))
    return known == len(listed) and all(fingerprints.get(p) == t for p, t in listed.items())


def fingerprint_chunks(fingerprints: Mapping[str, str]) -> Iterator[bytes]:
    """The change tokens as compact JSON with sorted keys, in chunks: the same bytes as
    `json.dumps(dict(fingerprints), sort_keys=True, separators=(",", ":"))`, without the
    whole string (a hundred thousand paths) ever being held next to the mapping."""
    paths = sorted(fingerprints)
    if not paths:
        yield b"{}"
        return
    for start in range(0, len(paths), _TOKENS_A_CHUNK):
        # One C encoder pass a chunk (a dict keeps the sorted order), not two calls a path:
        # at 100k paths that was a third of a second on every update.
        chunk = {p: fingerprints[p] for p in paths[start:start + _TOKENS_A_CHUNK]}
        part = _COMPACT.encode(chunk)[1:-1]  # the braces are the whole file's, added below
        opening = "{" if start == 0 else ","
        closing = "}" if start + _TOKENS_A_CHUNK >= len(paths) else ""
        yield (opening + part + closing).encode("utf-8")
