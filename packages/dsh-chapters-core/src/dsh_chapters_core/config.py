"""Every tunable with its documented default (§12). No other literal thresholds anywhere.

Config files use the record's camelCase keys (`mergeThreshold`); code reads the snake_case
attribute of `Config`. `SETTINGS` is the one table both come from: the fs adapter validates
files against it (name, type, range), and `docs/configuration.md` is generated from it.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class Setting:
    """One row of the settings table (§12): its key, default, documentation and bounds."""

    key: str  # the camelCase key in config files
    attr: str  # the Config attribute
    default: Any
    doc: str
    minimum: float | None = None
    maximum: float | None = None
    choices: tuple[str, ...] = ()

    @property
    def kind(self) -> type:
        return type(self.default)

    def allowed(self) -> str:
        """The allowed range in words, for error messages."""
        if self.choices:
            return "one of " + ", ".join(self.choices)
        if isinstance(self.default, bool):
            return "true or false"
        if self.minimum is not None or self.maximum is not None:
            lo = "-inf" if self.minimum is None else _bound(self.minimum)
            hi = "inf" if self.maximum is None else _bound(self.maximum)
            kind = "an integer" if self.kind is int else "a number"
            return f"{kind} in [{lo}, {hi}]"
        if isinstance(self.default, tuple):
            return "a list of strings"
        return f"a {self.kind.__name__}"


def _bound(value: float) -> str:
    """`1000000`, not `1e+06`: ranges are read by people fixing a config file."""
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


def _camel_to_snake(key: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", key).lower()


def _s(key: str, default: Any, doc: str, **kw: Any) -> Setting:
    return Setting(key=key, attr=_camel_to_snake(key), default=default, doc=doc, **kw)


SETTINGS: tuple[Setting, ...] = (
    # identity and transport (§2, §3, amendment 2026-09-21). This is the settings table of the
    # spec (§12), so it names the first-party providers' settings (`knowledgeProvider`'s
    # choices, the `treedx*` tunables) as §12 does; no code here branches on them: providers
    # declare their own schemes (`ProviderFactory.schemes`) and read their own settings.
    _s("harnessId", "", "this machine's writer id; empty means the hostname"),
    _s("projectKey", "", "overrides the §2.3 derivation (monorepo subfolders, many remotes)"),
    _s("knowledgeRemote", "", "the pool: a local path, an https URL or treedx+<url>/<repo>"),
    _s(
        "knowledgeProvider",
        "auto",
        "transport policy; an explicit value must agree with the remote's scheme",
        choices=("auto", "git", "treedx"),
    ),
    # composition (§4)
    _s(
        "mergeThreshold",
        0.075,
        "τ: weighted signature overlap at or above which a turn joins the open chapter "
        "(measured: benchmarks/composition_quality.py)",
        minimum=0.0,
        maximum=1.0,
    ),
    _s(
        "chapterLimit",
        8000,
        "estimated tokens after which a chapter is closed (forced split)",
        minimum=100,
        maximum=1_000_000,
    ),
    _s(
        "overlapPathWeight",
        3.0,
        "weight of a shared path in the overlap (§4.2: same file, same task)",
        minimum=0.0,
        maximum=100.0,
    ),
    _s(
        "overlapCommandWeight",
        2.0,
        "weight of a shared command family in the overlap",
        minimum=0.0,
        maximum=100.0,
    ),
    _s(
        "overlapTermWeight",
        1.0,
        "weight of a shared term in the overlap",
        minimum=0.0,
        maximum=100.0,
    ),
    _s(
        "overlapWindowTurns",
        3,
        "the overlap compares a turn with the open chapter's last this-many turns; 0 = all of them",
        minimum=0,
        maximum=10_000,
    ),
    _s(
        "continuationMaxTerms",
        8,
        "a turn naming no file with at most this many terms continues the open chapter; -1 = off",
        minimum=-1,
        maximum=200,
    ),
    _s(
        "signatureTopTerms",
        12,
        "how many terms a turn signature keeps (top-N by frequency)",
        minimum=1,
        maximum=200,
    ),
    _s("chapterTopics", 8, "how many topics a chapter's frontmatter lists", minimum=1, maximum=50),
    _s(
        "signatureScanChars",
        4000,
        "how much of each tool result a signature reads for paths (its head, cut at whitespace)",
        minimum=100,
        maximum=1_000_000,
    ),
    _s(
        "signatureMaxPaths",
        24,
        "how many paths a turn signature keeps, in order of first touch",
        minimum=1,
        maximum=1000,
    ),
    _s(
        "signatureMaxCommands",
        12,
        "how many normalized commands a turn signature keeps",
        minimum=1,
        maximum=1000,
    ),
    _s("termMinChars", 3, "shortest word that can be a signature term", minimum=1, maximum=32),
    _s(
        "charsPerToken",
        4,
        "the cross-machine token estimate: characters per token",
        minimum=1,
        maximum=16,
    ),
    # rendering (§2.4, amendment 2026-09-21)
    _s(
        "toolResultDeferFloorTokens",
        2000,
        "tool results at or above this many estimated tokens move to a content-addressed artifact",
        minimum=1,
        maximum=10_000_000,
    ),
    _s("titleMaxChars", 80, "deterministic title length cap", minimum=10, maximum=400),
    _s(
        "titleMinPromptChars",
        3,
        "a prompt shorter than this (a menu choice: `c`, `2`, `y`) titles its chapter with the "
        "reply it got, after the prompt",
        minimum=1,
        maximum=100,
    ),
    _s("summaryMaxChars", 240, "deterministic summary length cap", minimum=20, maximum=4000),
    _s(
        "slugMaxChars",
        48,
        "cap on a chapter file's slug (ascii, lowercase, hyphens)",
        minimum=8,
        maximum=200,
    ),
    # redaction (§9)
    _s(
        "redactionPatterns",
        (),
        "extra regular expressions redacted like credentials (additive to built-ins)",
    ),
    # sync (§5)
    _s(
        "syncDebounceMs",
        30000,
        "coalesce window for pushes after an archive",
        minimum=0,
        maximum=3_600_000,
    ),
    _s("syncTimeoutMs", 20000, "hard timeout of one transport call", minimum=100, maximum=600_000),
    _s(
        "syncRebuildRetries",
        3,
        "bounded retries of rebuild-and-push on divergence (§5.2)",
        minimum=0,
        maximum=20,
    ),
    _s(
        "gitUnpackLimit",
        100,
        "git pool: a transfer of fewer objects is stored loose, more as one pack "
        "(git's receive.unpackLimit)",
        minimum=1,
        maximum=1_000_000,
    ),
    _s(
        "sessionStartPullTimeoutMs",
        3000,
        "a SessionStart hook's best-effort pull budget",
        minimum=0,
        maximum=60_000,
    ),
    _s(
        "sessionFinalAfterMinutes",
        120,
        "a session file idle this long is over: import and watch archive its unfinished last "
        "turn (0: only an explicit final archive and SessionEnd do)",
        minimum=0,
        maximum=525_600,
    ),
    _s(
        "watchDebounceMs",
        800,
        "the session watcher coalesces a burst of writes for this long before it archives",
        minimum=50,
        maximum=60_000,
    ),
    _s(
        "watchIdleCheckSeconds",
        60,
        "how often an idle session watcher wakes to finalize idle sessions and run a "
        "deferred push (no file is polled)",
        minimum=1,
        maximum=3600,
    ),
    _s(
        "hookTimeoutMs",
        20000,
        "a hook's whole time budget; past it the hook exits and the agent goes on",
        minimum=100,
        maximum=600_000,
    ),
    _s(
        "lockTimeoutMs",
        10000,
        "how long an archive or sync waits for the writer lock before it refuses",
        minimum=0,
        maximum=600_000,
    ),
    _s(
        "lockStaleSeconds",
        600,
        "a writer-lock holder older than this whose pid is gone is stale",
        minimum=1,
        maximum=86_400,
    ),
    # containment of bad input: one poisoned file never stops a machine (§3.3, §11)
    _s(
        "frontmatterMaxBytes",
        65536,
        "largest frontmatter block read; a bigger one quarantines its file",
        minimum=1024,
        maximum=16_777_216,
    ),
    _s(
        "frontmatterMaxDepth",
        32,
        "deepest `[`/`{` nesting a frontmatter block may have (the core writes 3); deeper "
        "quarantines its file before YAML spends seconds on it",
        minimum=4,
        maximum=1000,
    ),
    _s(
        "poolFileMaxBytes",
        33_554_432,
        "largest pool file copy-in accepts; a bigger one is quarantined, never copied",
        minimum=4096,
        maximum=4_294_967_296,
    ),
    _s(
        "readerLineMaxBytes",
        268_435_456,
        "largest transcript record line a reader holds; a longer one stops it with the numbers",
        minimum=1024,
        maximum=1_073_741_824,
    ),
    _s(
        "readerJsonMaxDepth",
        200,
        "deepest JSON nesting a transcript line may have",
        minimum=8,
        maximum=10_000,
    ),
    _s(
        "readerDecompressedMaxBytes",
        8_589_934_592,
        "most bytes a compressed session log may decompress to (a bomb stops here)",
        minimum=1_048_576,
        maximum=1_099_511_627_776,
    ),
    _s(
        "readerDecompressionMaxRatio",
        1000,
        "most a compressed session log may expand, in decompressed bytes per compressed "
        "byte, once past 1 MiB (JSONL expands about 10x; a bomb, thousands)",
        minimum=10,
        maximum=1_000_000,
    ),
    _s(
        "readerSideFileMaxBytes",
        268_435_456,
        "largest side file (a tool output a harness moved out of its log) a reader takes in",
        minimum=1024,
        maximum=4_294_967_296,
    ),
    _s(
        "sessionIdMaxChars",
        200,
        "longest session id a reader or the pool may use (it names a directory)",
        minimum=16,
        maximum=240,
    ),
    # search and index (§8, §10)
    _s(
        "searchDefaultMaxTokens",
        400,
        "default pack size of a search answer",
        minimum=16,
        maximum=1_000_000,
    ),
    _s(
        "rulesCoreBonus",
        0.15,
        "query-time rank bonus of rules that are core on this machine",
        minimum=0.0,
        maximum=10.0,
    ),
    _s(
        "searchTopicWeight",
        2.0,
        "score of each query term that hits a topic (§8: topic hits x2)",
        minimum=0.0,
        maximum=100.0,
    ),
    _s(
        "searchTitleWeight",
        1.0,
        "score of each query term that hits the title",
        minimum=0.0,
        maximum=100.0,
    ),
    _s(
        "searchSummaryWeight",
        1.0,
        "score of each query term that hits the summary (a rule's body)",
        minimum=0.0,
        maximum=100.0,
    ),
    _s(
        "searchCategoryBonus",
        1.5,
        "score added once when a query term hits a rule's category",
        minimum=0.0,
        maximum=100.0,
    ),
    _s(
        "searchRecencyHalfLifeDays",
        30.0,
        "half-life of the reported recency decay; recency only breaks ties",
        minimum=0.001,
        maximum=100_000.0,
    ),
    _s(
        "searchBodyWeight",
        3.0,
        "weight of a chapter's best body passage (BM25) next to its frontmatter hits; 0 ranks "
        "on the frontmatter alone, exactly as before the body was read (every word of the "
        "question counts there, stopwords too; above 0 a stopword is matched nowhere unless "
        "the question has nothing else)",
        minimum=0.0,
        maximum=100.0,
    ),
    _s(
        "searchBm25K1",
        1.2,
        "BM25 term-frequency saturation of body passages (k1)",
        minimum=0.0,
        maximum=10.0,
    ),
    _s(
        "searchBm25B",
        0.75,
        "BM25 length normalization of body passages (b): 0 none, 1 full",
        minimum=0.0,
        maximum=1.0,
    ),
    _s(
        "searchPassageLines",
        48,
        "lines per scored body passage (best-passage scoring; passages overlap by half)",
        minimum=2,
        maximum=100_000,
    ),
    _s(
        "searchDateBonus",
        2.0,
        "score added to a match dated when the question says (`in March 2023`, `last week`)",
        minimum=0.0,
        maximum=100.0,
    ),
    _s(
        "searchPhraseBonus",
        0.0,
        "passage score added per pair of query words typed next to each other whose first "
        "mentions in the passage are close (within searchPhraseTerms terms)",
        minimum=0.0,
        maximum=100.0,
    ),
    _s(
        "searchChapterShare",
        0.15,
        "share of a word the best passage holds that a query word found only in another "
        "passage of the same chapter counts toward the passage's coverage (0: only its own)",
        minimum=0.0,
        maximum=1.0,
    ),
    _s(
        "searchSecondPassageShare",
        0.3,
        "share of a chapter's second-best passage score added to its best passage's (0: the "
        "best passage alone)",
        minimum=0.0,
        maximum=1.0,
    ),
    _s(
        "searchPhraseTerms",
        3,
        "how close two query words' first mentions in a passage must be, in distinct terms, "
        "to earn searchPhraseBonus",
        minimum=1,
        maximum=1000,
    ),
    _s(
        "searchQueryMaxChars",
        2000,
        "longest question a search reads; a longer one is cut there and the answer says so",
        minimum=16,
        maximum=1_000_000,
    ),
    _s(
        "searchQueryMaxWords",
        64,
        "most distinct words a search asks for; the rest are cut and the answer says so",
        minimum=1,
        maximum=10_000,
    ),
    _s(
        "searchSnippetChars",
        160,
        "longest anchor snippet shown per match",
        minimum=20,
        maximum=10_000,
    ),
    _s(
        "searchGroupShare",
        0.5,
        "share of the best member's score a `group` fact's other members rank at (§10.1)",
        minimum=0.0,
        maximum=1.0,
    ),
    _s(
        "searchCacheBatchRows",
        500,
        "documents the search index writes per transaction; bounds memory on a rebuild",
        minimum=1,
        maximum=1_000_000,
    ),
    _s(
        "importBatchBytes",
        67_108_864,
        "transcript bytes an import archives in one writer section; the search index takes in "
        "each batch as it ends, so the first search after an import builds nothing",
        minimum=1,
        maximum=68_719_476_736,
    ),
    _s(
        "searchSegmentBytes",
        8_388_608,
        "body text the search index gathers before it writes a segment of postings; bounds "
        "memory while a store is indexed",
        minimum=1024,
        maximum=1_073_741_824,
    ),
    _s(
        "vocabMinLabelChars",
        3,
        "shortest topic label the prefix alias pattern may merge (§6.3)",
        minimum=1,
        maximum=64,
    ),
    _s(
        "artifactReadDefaultLines",
        200,
        "lines an artifact or chapter read returns by default",
        minimum=1,
        maximum=100_000,
    ),
    _s(
        "artifactReadMaxLines",
        400,
        "hard cap on lines of one artifact or chapter read",
        minimum=1,
        maximum=100_000,
    ),
    _s(
        "vocabApply",
        False,
        "false = shadow: vocabulary candidates are reported, nothing is written",
    ),
    _s(
        "vocabCoMin",
        3,
        "co-occurrences before two labels are a merge candidate",
        minimum=1,
        maximum=10_000,
    ),
    _s(
        "vocabOverlapMin",
        0.5,
        "token-overlap Jaccard before two labels are a merge candidate",
        minimum=0.0,
        maximum=1.0,
    ),
    # rules and notice (§7)
    _s(
        "coreRulesBudgetTokens",
        1200,
        "cap on the notice's core-rules block; overflow refuses with numbers",
        minimum=0,
        maximum=1_000_000,
    ),
    _s(
        "ruleEssenceTerms",
        6,
        "words of a rule category's one-line essence in the notice's index",
        minimum=1,
        maximum=50,
    ),
    _s(
        "noticeChapterLimit",
        12,
        "chapters of this session the notice lists (keeps it O(1))",
        minimum=0,
        maximum=1000,
    ),
    # enrichment (§6)
    _s("enrichmentEnabled", True, "kill switch: false makes enrichment a pure no-op"),
    _s("enrichmentModel", "", "provider/model route; empty means no model is configured"),
    _s("enrichmentBaseUrl", "", "OpenAI-compatible base URL of the model door"),
    _s(
        "enrichmentTrigger",
        "both",
        "when the queue drains",
        choices=("both", "afterPush", "idle", "manual"),
    ),
    _s("enrichmentIdleMs", 60000, "idle debounce before a batch", minimum=0, maximum=86_400_000),
    _s("enrichmentBatchCap", 5, "chapters per batch", minimum=1, maximum=1000),
    _s(
        "enrichmentSliceChars",
        1200,
        "cap on each message of the enrichment slice",
        minimum=100,
        maximum=100_000,
    ),
    _s(
        "enrichmentBodyTokens",
        200,
        "tokens of body the slice carries for grounding",
        minimum=0,
        maximum=10_000,
    ),
    _s(
        "enrichmentMaxTokens",
        300,
        "max_tokens of the one structured call",
        minimum=16,
        maximum=8000,
    ),
    _s("enrichmentTimeoutMs", 30000, "hard timeout of a model call", minimum=100, maximum=600_000),
    _s(
        "enrichmentMaxTopics",
        10,
        "most topics one enrichment answer may propose (§6.1: up to 10)",
        minimum=1,
        maximum=50,
    ),
    # TreeDX (amendment 2026-09-21, provider.md)
    _s(
        "treedxFetchTimeoutMs", 15000, "timeout of one TreeDX request", minimum=100, maximum=600_000
    ),
    _s("treedxWorkspaceTtlSeconds", 900, "writable lease TTL", minimum=10, maximum=86_400),
    _s("treedxLeaseRetries", 3, "retries of a 409 lease conflict", minimum=0, maximum=50),
    _s("treedxLeaseRetryDelayMs", 1000, "delay between lease retries", minimum=0, maximum=600_000),
    _s("treedxPageSize", 500, "entries per paths/list page", minimum=1, maximum=500),
    _s("treedxReadBatch", 50, "paths per batched files/read", minimum=1, maximum=500),
    # the local web viewer (`chapters serve`); it binds 127.0.0.1 only
    _s("viewerPort", 8765, "port the local viewer listens on when none is given",
       minimum=0, maximum=65_535),
    _s(
        "viewerSearchMaxTokens",
        4000,
        "pack size of a viewer search page (the CLI's is searchDefaultMaxTokens)",
        minimum=16,
        maximum=1_000_000,
    ),
    _s(
        "viewerIndexRefreshMs",
        2000,
        "how often the local viewer brings the search index current in the background "
        "(0: every search page does it first, as a CLI search does)",
        minimum=0,
        maximum=3_600_000,
    ),
)

SETTINGS_BY_KEY: Mapping[str, Setting] = {s.key: s for s in SETTINGS}


@dataclass(frozen=True, slots=True)
class Config:
    """Every setting's value: the defaults, or a config file's over them (`SETTINGS`)."""

    harness_id: str = ""
    project_key: str = ""
    knowledge_remote: str = ""
    knowledge_provider: str = "auto"
    merge_threshold: float = 0.075
    chapter_limit: int = 8000
    overlap_path_weight: float = 3.0
    overlap_command_weight: float = 2.0
    overlap_term_weight: float = 1.0
    overlap_window_turns: int = 3
    continuation_max_terms: int = 8
    signature_top_terms: int = 12
    chapter_topics: int = 8
    signature_scan_chars: int = 4000
    signature_max_paths: int = 24
    signature_max_commands: int = 12
    term_min_chars: int = 3
    chars_per_token: int = 4
    tool_result_defer_floor_tokens: int = 2000
    title_max_chars: int = 80
    title_min_prompt_chars: int = 3
    summary_max_chars: int = 240
    slug_max_chars: int = 48
    redaction_patterns: tuple[str, ...] = field(default=())
    sync_debounce_ms: int = 30000
    sync_timeout_ms: int = 20000
    sync_rebuild_retries: int = 3
    git_unpack_limit: int = 100
    session_start_pull_timeout_ms: int = 3000
    session_final_after_minutes: int = 120
    watch_debounce_ms: int = 800
    watch_idle_check_seconds: int = 60
    hook_timeout_ms: int = 20000
    lock_timeout_ms: int = 10000
    lock_stale_seconds: int = 600
    frontmatter_max_bytes: int = 65536
    frontmatter_max_depth: int = 32
    pool_file_max_bytes: int = 33_554_432
    reader_line_max_bytes: int = 268_435_456
    reader_json_max_depth: int = 200
    reader_decompressed_max_bytes: int = 8_589_934_592
    reader_decompression_max_ratio: int = 1000
    reader_side_file_max_bytes: int = 268_435_456
    session_id_max_chars: int = 200
    search_default_max_tokens: int = 400
    rules_core_bonus: float = 0.15
    search_topic_weight: float = 2.0
    search_title_weight: float = 1.0
    search_summary_weight: float = 1.0
    search_category_bonus: float = 1.5
    search_recency_half_life_days: float = 30.0
    search_cache_batch_rows: int = 500
    import_batch_bytes: int = 67_108_864
    search_segment_bytes: int = 8_388_608
    search_body_weight: float = 3.0
    search_bm25_k1: float = 1.2
    search_bm25_b: float = 0.75
    search_passage_lines: int = 48
    search_date_bonus: float = 2.0
    search_phrase_bonus: float = 0.0
    search_phrase_terms: int = 3
    search_chapter_share: float = 0.15
    search_second_passage_share: float = 0.3
    search_query_max_chars: int = 2000
    search_query_max_words: int = 64
    search_snippet_chars: int = 160
    search_group_share: float = 0.5
    vocab_min_label_chars: int = 3
    artifact_read_default_lines: int = 200
    artifact_read_max_lines: int = 400
    vocab_apply: bool = False
    vocab_co_min: int = 3
    vocab_overlap_min: float = 0.5
    core_rules_budget_tokens: int = 1200
    rule_essence_terms: int = 6
    notice_chapter_limit: int = 12
    enrichment_enabled: bool = True
    enrichment_model: str = ""
    enrichment_base_url: str = ""
    enrichment_trigger: str = "both"
    enrichment_idle_ms: int = 60000
    enrichment_batch_cap: int = 5
    enrichment_slice_chars: int = 1200
    enrichment_body_tokens: int = 200
    enrichment_max_tokens: int = 300
    enrichment_timeout_ms: int = 30000
    enrichment_max_topics: int = 10
    treedx_fetch_timeout_ms: int = 15000
    treedx_workspace_ttl_seconds: int = 900
    treedx_lease_retries: int = 3
    treedx_lease_retry_delay_ms: int = 1000
    treedx_page_size: int = 500
    treedx_read_batch: int = 50
    viewer_port: int = 8765
    viewer_search_max_tokens: int = 4000
    viewer_index_refresh_ms: int = 2000

    def replace(self, **changes: Any) -> Config:
        return dataclasses.replace(self, **changes)

    def estimate_tokens(self, text: str) -> int:
        """The cross-machine heuristic (§4.1): fine for budgets, never shown as a count."""
        return (len(text) + self.chars_per_token - 1) // self.chars_per_token


DEFAULTS = Config()


def _check_table() -> None:
    # The table and the dataclass must agree, or a key would be silently ignored.
    attrs = {f.name: f.default for f in dataclasses.fields(Config)}
    for s in SETTINGS:
        if s.attr not in attrs:
            raise AssertionError(f"setting {s.key} has no Config attribute {s.attr}")
        if attrs[s.attr] != s.default:
            raise AssertionError(
                f"setting {s.key}: default {s.default!r} != Config {attrs[s.attr]!r}"
            )
    if len(attrs) != len(SETTINGS):
        raise AssertionError("Config has attributes that SETTINGS does not document")


_check_table()
