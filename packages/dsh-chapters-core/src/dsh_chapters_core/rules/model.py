"""The rule model (§7): statuses, authors, the Rule record, ids, and its data shape."""

from __future__ import annotations

import enum
import hashlib
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from dsh_chapters_core.config import Config
from dsh_chapters_core.pool_layout import RULES_DIR as RULES_DIR

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
