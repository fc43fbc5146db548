"""Rules: chapters of `kind: rule` (§7), approved per machine (amendment 2026-09-20).

A proposal is a file written once under `rules/<harnessId>/NNN-<category>-<slug>.md`; its
frontmatter says `status: proposed` forever. Approval and revocation are `rule-status` facts
appended to THIS machine's own `edits/<harnessId>/curation.jsonl`; the effective status on a
machine is the last such fact in its own file, else `proposed`. Other machines' facts arrive
by sync and never count (§11.3: a rule affects no machine until that machine's human approves).

`select_rules` is the one selector of what the notice renders (search has its own single
ranker, `rank_entries`; there is no third rule-picker). Over budget it refuses with numbers and
never clips (§1 invariant 2).
"""

from __future__ import annotations

import difflib
import enum
import hashlib
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from dsh_chapters_core.config import Config
from dsh_chapters_core.curation import (
    CurationFact,
    FactType,
    append_facts,
    edits_path,
    make_fact,
    parse_facts,
)
from dsh_chapters_core.documents import Document, DocumentKind
from dsh_chapters_core.errors import ChaptersError, UsageError
from dsh_chapters_core.frontmatter import dump_frontmatter
from dsh_chapters_core.ports.clock import Clock
from dsh_chapters_core.ports.rules import DocumentShelf
from dsh_chapters_core.ports.store import FileTree, WriterLock
from dsh_chapters_core.text import top_terms

RULES_DIR = "rules"
EDITS_DIR = "edits"
STATE_DIR = "state"  # machine-local, never published (pool_layout.LOCAL_STORE_DIRS)
NUMBER_WIDTH = 3  # NNN, zero-padded like chapter numbers (wider past 999, never reused)

_RULE_NAME = re.compile(r"^(?P<number>[0-9]{3,})-(?P<rest>.*)\.md$")
_NOT_SLUG = re.compile(r"[^a-z0-9]+")
_SPACE = re.compile(r"\s+")
_TOKEN_SPLIT = re.compile(r"[^a-z0-9]+")


class RuleStatus(enum.StrEnum):
    """Effective status on one machine. Only `core` renders into that machine's notice."""

    PROPOSED = "proposed"
    CORE = "core"
    REVOKED = "revoked"


class RuleAuthor(enum.StrEnum):
    """Who wrote the proposal: a human command, or an agent's derivation from a session."""

    USER = "user"
    AGENT = "agent"


@dataclass(frozen=True, slots=True)
class Rule:
    """One rule file, with its effective status on the machine that resolved it."""

    id: str  # "<harnessId>/<NNN>"
    harness_id: str  # the authoring machine (from the path: one writer per directory, §3.3)
    number: int
    category: str
    title: str
    text: str  # the body, verbatim
    path: str  # relative to the store root, forward slashes
    source_session: str = ""
    authored_at: str = ""
    author: str = ""
    project_key: str = ""
    status: RuleStatus = RuleStatus.PROPOSED
    modified: bool = False  # the body no longer matches the frontmatter's sha256
    digest: str = ""  # sha256 of the body as it is now; approval is bound to it
    changed_since_approved: bool = False  # approved, then the body changed: proposed again

    @property
    def one_line(self) -> str:
        """The text on one line, for tables (the file keeps it verbatim)."""
        return _SPACE.sub(" ", self.text).strip()


# -- identity -----------------------------------------------------------------------------------


def format_rule_id(harness_id: str, number: int) -> str:
    return f"{harness_id}/{number:0{NUMBER_WIDTH}d}"


def parse_rule_path(path: str) -> tuple[str, int] | None:
    """(harnessId, NNN) of a rule file in the store (`rules/<h>/NNN-…md`) or the mirror
    (`rules/<projectKey>/<h>/NNN-…md`): the writer is always the file's parent directory."""
    parts = path.split("/")
    if len(parts) < 3 or parts[0] != RULES_DIR:
        return None
    match = _RULE_NAME.match(parts[-1])
    if match is None or not parts[-2]:
        return None
    return parts[-2], int(match.group("number"))


def _normalize_id(raw: str) -> tuple[str, int] | None:
    head, sep, tail = raw.strip().strip("/").rpartition("/")
    if not sep or not head or not tail.isdigit():
        return None
    return head.rsplit("/", 1)[-1], int(tail)


def category_slug(raw: str) -> str:
    """A category is a lowercase slug: it names files and matches session topics."""
    return _NOT_SLUG.sub("-", raw.strip().lower()).strip("-")


def _slug(text: str, limit: int) -> str:
    slug = category_slug(text)[:limit].strip("-")
    return slug or "rule"


def rule_title(text: str, config: Config) -> str:
    """The first line of the text, capped at `titleMaxChars` (the body stays verbatim)."""
    first = next((line.strip() for line in text.splitlines() if line.strip()), "")
    first = _SPACE.sub(" ", first)
    if len(first) <= config.title_max_chars:
        return first
    cut = first[: config.title_max_chars - 1].rstrip()
    return cut + "…"


def body_sha256(body: str) -> str:
    return hashlib.sha256(body.encode("utf-8")).hexdigest()


# -- reading ------------------------------------------------------------------------------------


def _extra(doc: Document, key: str) -> str:
    """An unknown frontmatter key's value; edges keep it as JSON text (a string is quoted)."""
    for k, v in doc.extra:
        if k == key:
            try:
                value = json.loads(v)
            except ValueError:
                return v
            return value if isinstance(value, str) else v
    return ""


def rule_from_document(doc: Document) -> Rule | None:
    """A rule document as a Rule (status `proposed` until facts resolve it), or None."""
    if doc.kind is not DocumentKind.RULE:
        return None
    parsed = parse_rule_path(doc.path)
    if parsed is None:
        return None
    harness_id, number = parsed
    return Rule(
        id=format_rule_id(harness_id, number),
        harness_id=harness_id,
        number=number,
        category=doc.category,
        title=doc.title,
        text=doc.body,
        path=doc.path,
        source_session=_extra(doc, "sourceSession") or doc.session_id,
        authored_at=_extra(doc, "authoredAt") or doc.date,
        author=_extra(doc, "author"),
        project_key=doc.project_key,
        modified=doc.modified_since_archived,
        digest=doc.body_sha256 or body_sha256(doc.body),
    )


def rule_facts_path(harness_id: str) -> str:
    """This machine's own Layer 1 file (§10.1), relative to the store root."""
    return edits_path(harness_id)


def read_own_facts(tree: FileTree, harness_id: str) -> tuple[CurationFact, ...]:
    """The facts of THIS machine's edits file; other machines' files are never opened."""
    path = rule_facts_path(harness_id)
    if not tree.exists(path):
        return ()
    return parse_facts(harness_id, tree.read(path).decode("utf-8", errors="replace")).facts


@dataclass(frozen=True, slots=True)
class StatusFact:
    status: RuleStatus
    sha256: str = ""  # the body the human approved; "" in facts that predate the binding


def effective_statuses(facts: Iterable[CurationFact], harness_id: str) -> dict[str, StatusFact]:
    """rule id → status by THIS machine's facts: the last fact wins; absent means proposed.

    Facts from any other machine's file are ignored by construction (amendment 2026-09-20).
    """
    out: dict[str, StatusFact] = {}
    for fact in facts:
        if fact.type is not FactType.RULE_STATUS or fact.harness_id != harness_id:
            continue
        rule = fact.get("rule")
        status = fact.get("status")
        sha = fact.get("sha256", "")
        parsed = _normalize_id(rule) if isinstance(rule, str) else None
        if parsed is None or status not in {s.value for s in RuleStatus}:
            continue
        digest = sha if isinstance(sha, str) else ""
        out[format_rule_id(*parsed)] = StatusFact(RuleStatus(status), digest)
    return out


def _effective(rule: Rule, fact: StatusFact | None) -> Rule:
    if fact is None:
        return replace(rule, status=RuleStatus.PROPOSED)
    if fact.status is RuleStatus.CORE and fact.sha256 and fact.sha256 != rule.digest:
        # §11.3: the human approved other bytes. A changed rule needs a new approval.
        return replace(rule, status=RuleStatus.PROPOSED, changed_since_approved=True)
    return replace(rule, status=fact.status)


def resolve_rules(
    documents: Iterable[Document], facts: Iterable[CurationFact], harness_id: str
) -> tuple[Rule, ...]:
    """Every rule document with its effective status on `harness_id`, ordered by id.

    A rule id seen twice (the same file reached through two paths) keeps its first path in
    sorted order, so resolution is deterministic.
    """
    statuses = effective_statuses(facts, harness_id)
    by_id: dict[str, Rule] = {}
    for doc in sorted(documents, key=lambda d: d.path):
        rule = rule_from_document(doc)
        if rule is None or rule.id in by_id:
            continue
        by_id[rule.id] = _effective(rule, statuses.get(rule.id))
    return tuple(sorted(by_id.values(), key=lambda r: (r.harness_id, r.number)))


def rule_paths(tree: FileTree) -> tuple[str, ...]:
    """Store paths of rule files (`rules/<h>/NNN-…md`): O(rules), never the chapters."""
    return tuple(
        p for p in tree.list(f"{RULES_DIR}/") if p.count("/") == 2 and parse_rule_path(p)
    )


def load_rules(tree: FileTree, shelf: DocumentShelf, harness_id: str) -> tuple[Rule, ...]:
    """Every rule in the store (ours and those sync copied in), resolved for THIS machine."""
    documents = [shelf.document(path) for path in rule_paths(tree)]
    return resolve_rules(documents, read_own_facts(tree, harness_id), harness_id)


def find_rule(rules: Sequence[Rule], rule_id: str) -> Rule:
    """The rule named `rule_id` (`host/7` and `host/007` are the same id).

    An unknown id is an error listing the nearest ids, so a typo costs one more command.
    """
    parsed = _normalize_id(rule_id)
    if parsed is not None:
        wanted = format_rule_id(*parsed)
        for rule in rules:
            if rule.id == wanted:
                return rule
    ids = [r.id for r in rules]
    nearest = nearest_ids(rule_id, ids)
    if not ids:
        raise ChaptersError(
            f"no rule {rule_id!r}: this store holds 0 rules",
            hint='propose one with `chapters rule add <category> "<text>"`, or `chapters sync`',
        )
    shown = ", ".join(nearest) if nearest else ", ".join(ids[:5])
    raise ChaptersError(
        f"no rule {rule_id!r} among {len(ids)} rules; nearest: {shown}",
        hint="run `chapters rule list --all` to see every id",
    )


def nearest_ids(rule_id: str, ids: Sequence[str], limit: int = 5) -> list[str]:
    """Ids closest to a mistyped one: same machine first, then by string similarity."""
    parsed = _normalize_id(rule_id)
    candidates = list(ids)
    if parsed is not None:
        same_host = [i for i in candidates if i.split("/", 1)[0] == parsed[0]]
        if same_host:
            return sorted(same_host, key=lambda i: (abs(int(i.rsplit("/", 1)[1]) - parsed[1]), i))[
                :limit
            ]
    return difflib.get_close_matches(rule_id, candidates, n=limit, cutoff=0.3)


# -- proposing (write-once) ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RuleProposal:
    """What a human (`chapters rule add`) or an agent proposes. There is no status field:
    every proposal is `proposed` (§7.2); only a human's `approve` makes it core, per machine."""

    category: str
    text: str
    source_session: str = ""
    author: RuleAuthor = RuleAuthor.USER


@dataclass(frozen=True, slots=True)
class ProposalResult:
    rule: Rule
    created: bool  # False: an identical rule (same category and text) already exists


def render_rule_file(
    proposal: RuleProposal,
    *,
    number: int,
    harness_id: str,
    project_key: str,
    authored_at: str,
    config: Config,
) -> tuple[str, str, Rule]:
    """(store path, file text, rule) of a proposal. Deterministic: same inputs, same bytes."""
    category = category_slug(proposal.category)
    text = proposal.text.strip()
    if not category:
        raise UsageError(
            f"category {proposal.category!r} has no letters or digits",
            hint='name a category such as "testing" or "git-workflow"',
        )
    if not text:
        raise UsageError("the rule text is empty", hint='pass the rule in quotes: "Always …"')
    if proposal.author is RuleAuthor.AGENT and not proposal.source_session:
        # §7.2: an agent's proposal is provenance-tagged with the session it came from.
        raise UsageError("an agent's rule proposal must name its source session",
                         hint="pass the session id the rule was derived from")
    title = rule_title(text, config)
    body = text + "\n"
    digest = body_sha256(body)
    name = f"{number:0{NUMBER_WIDTH}d}-{category}-{_slug(title, config.slug_max_chars)}.md"
    path = f"{RULES_DIR}/{harness_id}/{name}"
    fields: dict[str, object] = {
        "kind": str(DocumentKind.RULE),
        "category": category,
        "title": title,
        "status": str(RuleStatus.PROPOSED),  # forever: approval is a fact (amendment 2026-09-20)
        "sourceSession": proposal.source_session,
        "authoredAt": authored_at,
        "author": str(proposal.author),
        "harnessId": harness_id,
        "projectKey": project_key,
        "sha256": digest,
    }
    rule = Rule(
        id=format_rule_id(harness_id, number),
        harness_id=harness_id,
        number=number,
        category=category,
        title=title,
        text=text + "\n",
        path=path,
        source_session=proposal.source_session,
        authored_at=authored_at,
        author=str(proposal.author),
        project_key=project_key,
        digest=digest,
    )
    return path, dump_frontmatter(fields) + body, rule


def _reservation_path(harness_id: str) -> str:
    return f"{STATE_DIR}/rule-numbers/{harness_id}.json"


def next_rule_number(tree: FileTree, harness_id: str) -> int:
    """One past every number written or reserved by this machine: never reused, even if a
    file is lost, so an old approval can never name a new rule."""
    highest = 0
    reservation = _reservation_path(harness_id)
    if tree.exists(reservation):
        try:
            last = json.loads(tree.read(reservation).decode("utf-8")).get("last", 0)
        except (ValueError, AttributeError):
            last = 0
        highest = last if isinstance(last, int) and not isinstance(last, bool) else 0
    for path in tree.list(f"{RULES_DIR}/{harness_id}/"):
        parsed = parse_rule_path(path)
        if parsed is not None and parsed[0] == harness_id:
            highest = max(highest, parsed[1])
    return highest + 1


def _reserve(tree: FileTree, harness_id: str, number: int) -> None:
    data = json.dumps({"harnessId": harness_id, "last": number}, sort_keys=True) + "\n"
    tree.write(_reservation_path(harness_id), data.encode("utf-8"))


def _same_rule(a: str, b: str) -> bool:
    return _SPACE.sub(" ", a).strip() == _SPACE.sub(" ", b).strip()


def propose_rule(
    tree: FileTree,
    proposal: RuleProposal,
    *,
    harness_id: str,
    project_key: str,
    clock: Clock,
    config: Config,
    existing: Iterable[Rule] = (),
) -> ProposalResult:
    """Write a proposal file once, under the caller's writer lock (§5.2).

    Proposing the same text in the same category again returns the rule that exists, so an
    agent re-deriving rules from a session adds nothing twice.
    """
    category = category_slug(proposal.category)
    for rule in existing:
        if rule.category == category and _same_rule(rule.text, proposal.text):
            return ProposalResult(rule=rule, created=False)
    number = next_rule_number(tree, harness_id)
    path, text, rule = render_rule_file(
        proposal,
        number=number,
        harness_id=harness_id,
        project_key=project_key,
        authored_at=clock.now(),
        config=config,
    )
    if tree.exists(path):  # write-once: a rule file is never rewritten (§1 invariant 3)
        raise ChaptersError(
            f"rule file {path} already exists; rule files are written once",
            hint="retry: the next number is taken from the directory",
        )
    _reserve(tree, harness_id, number)  # durable first: a crash leaves a gap, never a reuse
    tree.write(path, text.encode("utf-8"))
    return ProposalResult(rule=rule, created=True)


# -- approving and revoking (facts, never file rewrites) ---------------------------------------


@dataclass(frozen=True, slots=True)
class StatusChange:
    rule: Rule  # with its status after the change
    before: RuleStatus
    after: RuleStatus
    fact: CurationFact | None  # None when the status already was `after`: nothing written

    @property
    def changed(self) -> bool:
        return self.fact is not None




def change_rule_status(
    tree: FileTree,
    rules: Sequence[Rule],
    rule_id: str,
    status: RuleStatus,
    *,
    harness_id: str,
    clock: Clock,
) -> StatusChange:
    """Approve (`core`) or revoke a rule on THIS machine by appending a `rule-status` fact.

    `rules` must be resolved for `harness_id`. The rule file is never touched.
    """
    rule = find_rule(rules, rule_id)
    if rule.status is status:
        return StatusChange(rule=rule, before=status, after=status, fact=None)
    # The approval names the bytes approved, so a later edit of the file un-approves it.
    fact = make_fact(
        FactType.RULE_STATUS,
        author="user",
        at=clock.now(),
        rule=rule.id,
        status=str(status),
        sha256=rule.digest,
    )
    append_facts(tree, harness_id, (fact,))
    return StatusChange(
        rule=replace(rule, status=status), before=rule.status, after=status, fact=fact
    )


def approve_rule(
    tree: FileTree, rules: Sequence[Rule], rule_id: str, *, harness_id: str, clock: Clock
) -> StatusChange:
    return change_rule_status(
        tree, rules, rule_id, RuleStatus.CORE, harness_id=harness_id, clock=clock
    )


def revoke_rule(
    tree: FileTree, rules: Sequence[Rule], rule_id: str, *, harness_id: str, clock: Clock
) -> StatusChange:
    return change_rule_status(
        tree, rules, rule_id, RuleStatus.REVOKED, harness_id=harness_id, clock=clock
    )


# -- the use cases, under the writer lock (§5.2) ----------------------------------------------


def add_rule(
    tree: FileTree,
    shelf: DocumentShelf,
    lock: WriterLock,
    proposal: RuleProposal,
    *,
    harness_id: str,
    project_key: str,
    clock: Clock,
    config: Config,
) -> ProposalResult:
    """Propose a rule on this machine: `chapters rule add`, or an agent (always `proposed`)."""
    with lock.hold(config.lock_timeout_ms / 1000):
        existing = load_rules(tree, shelf, harness_id)
        return propose_rule(
            tree,
            proposal,
            harness_id=harness_id,
            project_key=project_key,
            clock=clock,
            config=config,
            existing=existing,
        )


def set_rule_status(
    tree: FileTree,
    shelf: DocumentShelf,
    lock: WriterLock,
    rule_id: str,
    status: RuleStatus,
    *,
    harness_id: str,
    clock: Clock,
    config: Config,
) -> StatusChange:
    """`chapters rule approve|revoke`: one fact in this machine's own edits file."""
    with lock.hold(config.lock_timeout_ms / 1000):
        rules = load_rules(tree, shelf, harness_id)
        return change_rule_status(tree, rules, rule_id, status, harness_id=harness_id, clock=clock)


# -- the one selector ---------------------------------------------------------------------------


def render_rule_entry(rule: Rule) -> str:
    """How one rule appears in the notice: its text verbatim, with category and id."""
    lines = rule.text.rstrip("\n").split("\n")
    head = f"- [{rule.category}] {lines[0]}"
    rest = [f"  {line}" if line else "" for line in lines[1:]]
    return "\n".join([head, *rest, f"  ({rule.id})"]) + "\n"


@dataclass(frozen=True, slots=True)
class SizedRule:
    rule: Rule
    tokens: int  # estimated tokens of its notice entry (`charsPerToken`, §4.1)


@dataclass(frozen=True, slots=True)
class RuleBlock:
    """A budgeted set of rules: rendered whole, or refused with every number. Never clipped."""

    rules: tuple[SizedRule, ...]
    budget: int

    @property
    def total(self) -> int:
        return sum(r.tokens for r in self.rules)

    @property
    def refused(self) -> bool:
        return self.total > self.budget

    @property
    def over_by(self) -> int:
        return max(0, self.total - self.budget)


@dataclass(frozen=True, slots=True)
class CategoryLine:
    """One line of the category index: name, count, essence, an example path."""

    name: str
    count: int
    essence: str  # the category's most frequent words: a pointer, never a clipped rule
    example_path: str
    matched: bool  # this session's topics overlap the category (P3b, §7.4)


@dataclass(frozen=True, slots=True)
class RuleSelection:
    """What the notice renders of rules, decided in one place (`select_rules`).

    - `core`: every rule that is core on this machine, verbatim, under `coreRulesBudgetTokens`.
    - `topic`: P3b (§7.4). When the core block is refused, the categories that overlap this
      session's topics are inlined whole under the same budget and the same refusal rule.
      When the core block renders, those rules are already in it and `topic` is empty.
    - `categories`: the index, one line per category of the core set.
    """

    core: RuleBlock
    topic: RuleBlock
    matched_categories: tuple[str, ...]
    categories: tuple[CategoryLine, ...]

    @property
    def empty(self) -> bool:
        """No core rule: the notice is byte-identical to one from a build without rules."""
        return not self.core.rules


def _tokens(words_of: str) -> set[str]:
    return {t for t in _TOKEN_SPLIT.split(words_of.lower()) if t}


def category_matches(category: str, topics: Iterable[str]) -> bool:
    """A category overlaps the session when a word of its name is a word of some topic."""
    words = _tokens(category)
    return any(words & _tokens(topic) for topic in topics)


def category_essence(rules: Sequence[Rule], config: Config) -> str:
    """The words a category's rules use most (ties alphabetical): one line, deterministic."""
    terms = top_terms(
        (r.text for r in rules), limit=config.rule_essence_terms, min_chars=config.term_min_chars
    )
    return ", ".join(terms) or rules[0].category


def select_rules(
    rules: Iterable[Rule],
    *,
    config: Config,
    session_topics: Iterable[str] = (),
) -> RuleSelection:
    """The one selector of what the notice renders (§7.3, §7.4; search.md: one selector).

    Only rules that are `core` on this machine are ever considered: proposed and revoked
    rules affect nothing (§11.3). Sizes are estimated tokens of each rule's rendered entry.
    """
    core = sorted(
        (r for r in rules if r.status is RuleStatus.CORE),
        key=lambda r: (r.category, r.harness_id, r.number),
    )
    sized = tuple(SizedRule(r, config.estimate_tokens(render_rule_entry(r))) for r in core)
    budget = config.core_rules_budget_tokens
    core_block = RuleBlock(rules=sized, budget=budget)
    topics = tuple(session_topics)
    by_category: dict[str, list[SizedRule]] = {}
    for entry in sized:
        by_category.setdefault(entry.rule.category, []).append(entry)
    matched = tuple(c for c in sorted(by_category) if category_matches(c, topics))
    topic_rules: tuple[SizedRule, ...] = ()
    if core_block.refused:
        topic_rules = tuple(e for c in matched for e in by_category[c])
    index = tuple(
        CategoryLine(
            name=name,
            count=len(entries),
            essence=category_essence([e.rule for e in entries], config),
            example_path=entries[0].rule.path,
            matched=name in matched,
        )
        for name, entries in sorted(by_category.items())
    )
    return RuleSelection(
        core=core_block,
        topic=RuleBlock(rules=topic_rules, budget=budget),
        matched_categories=matched,
        categories=index,
    )


def core_rule_ids(rules: Iterable[Rule]) -> frozenset[str]:
    """Ids of the rules core on the machine they were resolved for (search's core bonus)."""
    return frozenset(r.id for r in rules if r.status is RuleStatus.CORE)


def rules_of_category(rules: Iterable[Rule], category: str) -> tuple[Rule, ...]:
    slug = category_slug(category)
    return tuple(r for r in rules if r.category == slug)


def status_counts(rules: Iterable[Rule]) -> Mapping[str, int]:
    counts = {str(s): 0 for s in RuleStatus}
    for rule in rules:
        counts[str(rule.status)] += 1
    return counts


def rule_json(rule: Rule) -> dict[str, Any]:
    """A rule as data: one shape for `chapters rule list --json` and the MCP tools."""
    return {
        "id": rule.id,
        "status": str(rule.status),
        "category": rule.category,
        "title": rule.title,
        "text": rule.text.rstrip("\n"),
        "path": rule.path,
        "harnessId": rule.harness_id,
        "author": rule.author,
        "sourceSession": rule.source_session,
        "authoredAt": rule.authored_at,
        "changedSinceApproved": rule.changed_since_approved,
    }
