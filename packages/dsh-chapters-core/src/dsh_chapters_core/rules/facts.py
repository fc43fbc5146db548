"""Reading rules and this machine's status facts: the effective status of every rule here
(amendment 2026-09-20: approval is a per-machine curation fact, never a file rewrite)."""

from __future__ import annotations

import difflib
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

from dsh_chapters_core.curation import (
    CurationFact,
    FactType,
    edits_path,
    parse_facts,
)
from dsh_chapters_core.documents import Document, DocumentKind
from dsh_chapters_core.errors import ChaptersError, NextStep
from dsh_chapters_core.ports.rules import DocumentShelf
from dsh_chapters_core.ports.store import FileTree
from dsh_chapters_core.rules.model import (
    RULES_DIR,
    Rule,
    RuleStatus,
    _normalize_id,
    body_sha256,
    format_rule_id,
    parse_rule_path,
)

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
    """A rule's status by this machine's last fact on it, with the body hash the human approved."""

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
            step=NextStep.PROPOSE_RULE_OR_SYNC,
        )
    shown = ", ".join(nearest) if nearest else ", ".join(ids[:5])
    raise ChaptersError(
        f"no rule {rule_id!r} among {len(ids)} rules; nearest: {shown}",
        step=NextStep.LIST_ALL_RULES,
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
