"""Proposing (write once), approving and revoking, and the use cases under the writer lock."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

from dsh_chapters_core.config import Config
from dsh_chapters_core.curation import (
    CurationFact,
    FactType,
    append_facts,
    make_fact,
)
from dsh_chapters_core.documents import DocumentKind
from dsh_chapters_core.errors import ChaptersError, UsageError
from dsh_chapters_core.frontmatter import dump_frontmatter
from dsh_chapters_core.ports.clock import Clock
from dsh_chapters_core.ports.rules import DocumentShelf
from dsh_chapters_core.ports.store import FileTree, WriterLock
from dsh_chapters_core.rules.facts import (
    find_rule,
    load_rules,
)
from dsh_chapters_core.rules.model import (
    _SPACE,
    NUMBER_WIDTH,
    RULES_DIR,
    STATE_DIR,
    Rule,
    RuleAuthor,
    RuleStatus,
    _slug,
    body_sha256,
    category_slug,
    format_rule_id,
    parse_rule_path,
    rule_title,
)

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
    """The rule a proposal wrote, or the identical one that already existed (`created` is False)."""

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
    """(store path, file text, rule) of a proposal. Deterministic: same inputs, same bytes.

    The category and the text are redacted first (§9): the title, the slug and the file name
    are derived from them, and a rule reaches every machine's notice through the pool."""
    proposal = redacted_proposal(proposal, config)
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


def redacted_proposal(proposal: RuleProposal, config: Config) -> RuleProposal:
    """The proposal with every credential in its category and text replaced by a marker."""
    # Imported by the steps that write or compare a proposal: the rules package is read at
    # every session's start (the notice), and the engine's patterns take tens of
    # milliseconds to build.
    from dsh_chapters_core.chokepoint import redact_for_store

    patterns = config.redaction_patterns
    return replace(proposal, category=redact_for_store(proposal.category, patterns),
                   text=redact_for_store(proposal.text, patterns))


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
    proposal = redacted_proposal(proposal, config)  # compared as it would be stored
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
    """An approval or revocation of one rule: its status before and after, and the curation fact
    written for it."""

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
