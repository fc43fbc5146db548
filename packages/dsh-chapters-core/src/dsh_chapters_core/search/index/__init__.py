"""Layer 2 of the index (§10.2): topic shards and the build manifest, derived and incremental.

Split along its seams: `layout` (where inputs are, document identity, the split tree),
`manifest` (curation, records, the manifest, shards) and `update` (O(delta) updates and
rebuilds). This package re-exports their public names, so callers import from one place.
"""

from typing import TYPE_CHECKING

from dsh_chapters_core.search.index.layout import (
    INDEX_DIR,
    DoorLayout,
    SplitTree,
    document_identity,
    document_prefixes,
    is_document_path,
    list_documents,
    path_project,
    path_session,
    scan_documents,
)
from dsh_chapters_core.search.index.manifest import (
    MANIFEST_PATH,
    MANIFEST_VERSION,
    Curation,
    IndexManifest,
    IndexRecord,
    canonical_topics,
    edits_paths,
    kind_of,
    load_manifest,
    manifest_key,
    normalize_document,
    patch_shard,
    read_curation,
    recency_hint,
    record_of,
    record_topic_sets,
    render_shard,
    shard_member_paths,
    shard_path,
)

if TYPE_CHECKING:
    from dsh_chapters_core.search.index.update import (
        IndexUpdate,
        fingerprint_chunks,
        index_is_current,
        update_index,
    )
else:
    # The updater is imported on first call: a query on a current index reads the manifest
    # and the curation only, and `chapters search` pays on every query for what it imports.

    def update_index(*args, **kwargs):
        from dsh_chapters_core.search.index import update

        return update.update_index(*args, **kwargs)

    def index_is_current(*args, **kwargs):
        from dsh_chapters_core.search.index import update

        return update.index_is_current(*args, **kwargs)

    def fingerprint_chunks(*args, **kwargs):
        from dsh_chapters_core.search.index import update

        return update.fingerprint_chunks(*args, **kwargs)

    def __getattr__(name):
        if name == "IndexUpdate":
            from dsh_chapters_core.search.index.update import IndexUpdate

            return IndexUpdate
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

__all__ = [
    "INDEX_DIR",
    "MANIFEST_PATH",
    "MANIFEST_VERSION",
    "Curation",
    "DoorLayout",
    "IndexManifest",
    "IndexRecord",
    "IndexUpdate",
    "SplitTree",
    "canonical_topics",
    "document_identity",
    "document_prefixes",
    "edits_paths",
    "fingerprint_chunks",
    "index_is_current",
    "is_document_path",
    "kind_of",
    "list_documents",
    "load_manifest",
    "manifest_key",
    "normalize_document",
    "patch_shard",
    "path_project",
    "path_session",
    "read_curation",
    "recency_hint",
    "record_of",
    "record_topic_sets",
    "render_shard",
    "scan_documents",
    "shard_member_paths",
    "shard_path",
    "update_index",
]
