"""The words a session-start notice names its doors in (§9), given by each caller.

Apart from the notice itself so that a caller can hold its words without loading the rules
and composition use cases the notice is built from (every CLI command imports its wording).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class NoticeWords:
    """How the notice's reader reaches each door, in the caller's words (the CLI's are
    `chapters rule list` and so on). The core names no caller's command; these neutral
    defaults name the use cases, for callers that have no words of their own."""

    list_rules: str = "rule list"  # every rule's text
    list_category: str = "rule list <category>"  # one category's rules
    revoke_rule: str = "rule revoke <id>"
    add_rule: str = "rule add"
    list_chapters: str = "chapter list"  # every chapter of the store
    search: str = 'search "<query>"'
    raise_budget: str = "max_tokens=N"  # ask again with a larger token budget
    search_topic: str = "search topic=<topic>"  # one whole topic shard
