"""Errors a user can meet carry numbers and a next step; code branches on codes, never prose.

§5.2: a network error's message once contained "diverge" and triggered the rebuild path.
So every failure that code branches on is a `FailureCode` (transport) or a `Refusal`.

The core names no caller's command or flag. A next step that is a command is a `NextStep` code
with its numbers as data, and an argument a message names is an `Argument` code; each caller
words them in its own terms (the CLI `--max-tokens 600`, an MCP tool `maxTokens=600`), so no
caller rewrites another's words.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping


class FailureCode(enum.StrEnum):
    """Transport failures (the KnowledgeProvider seam). Machine-readable, stable, documented."""

    DIVERGED = "diverged"
    AUTH = "auth"
    NETWORK = "network"
    TIMEOUT = "timeout"
    CORRUPT = "corrupt"
    REFUSED = "refused"
    NOT_FOUND = "not_found"
    LOCKED = "locked"  # a pool ref lock older than syncTimeoutMs: a writer died holding it


class Argument(enum.StrEnum):
    """An argument a caller sets on a use case. The value is the neutral name; each caller
    words it (the CLI as a flag, an MCP tool as its parameter)."""

    MAX_TOKENS = "max_tokens"
    OFFSET = "offset"
    LIMIT = "limit"
    TOPIC = "topic"


# How a caller words an argument, with the value it should take (None: the argument alone).
ArgumentWords = Callable[[Argument, int | None], str]


def plain_argument(argument: Argument, value: int | None = None) -> str:
    """The neutral wording: `max_tokens`, `offset=200` (logs, and callers that have none)."""
    return str(argument) if value is None else f"{argument}={value}"


class NextStep(enum.StrEnum):
    """A next step that is something to run: each caller words it in its own commands.

    The numbers and names it needs are `ChaptersError.data` (named in each member's comment).
    """

    REPAIR_UNSAFE_FILE = "repair-unsafe-file"  # replace or remove it; doctor lists every one
    PASS_REMOTE_OR_PATH = "pass-remote-or-path"  # §2.3: a projectKey needs one of them
    NAME_FILE = "name-file"  # a read needs a path or a sha
    COPY_SEARCH_PATH = "copy-search-path"  # a path from search's answer, or a sha256
    READ_FROM_TOP = "read-from-top"  # offset 0 reads from the top
    NAME_LINE_WORDS = "name-line-words"  # a line search of a file needs words
    PROPOSE_RULE_OR_SYNC = "propose-rule-or-sync"  # §7: no rule yet; propose one or pull some
    LIST_ALL_RULES = "list-all-rules"  # every rule id, revoked ones included
    RAISE_MAX_TOKENS = "raise-max-tokens"  # data: needed (§1 invariant 2: refuse, never clip)
    PASS_QUERY_OR_TOPIC = "pass-query-or-topic"  # search needs words or a topic
    NAME_TWO_TOPICS = "name-two-topics"  # §6.3: a topic merge names two topics with words
    LINK_POOL = "link-pool"  # §5: local-only until a pool is linked
    USE_PROVIDER_SCHEME = "use-provider-scheme"  # data: schemes (the installed ones declare)


class ChaptersError(Exception):
    """An explained error: the CLI prints it and exits 1. The next step is `hint` (words that
    name no caller's command) or `step` with its `data` (words each caller chooses)."""

    def __init__(self, message: str, *, hint: str = "", step: NextStep | None = None,
                 data: Mapping[str, int | str] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.step = step
        self.data: Mapping[str, int | str] = dict(data or {})

    def __str__(self) -> str:
        """Neutral words (logs): the step's code and data when no caller worded it."""
        nxt = self.hint
        if not nxt and self.step is not None:
            facts = ", ".join(f"{k}={v}" for k, v in self.data.items())
            nxt = f"{self.step}" + (f" ({facts})" if facts else "")
        return f"{self.message}\n  next: {nxt}" if nxt else self.message


class UsageError(ChaptersError):
    """Bad usage: the CLI exits 2."""


class ArgumentError(UsageError):
    """An argument out of its range: `argument` (with `value` when the message shows it) and
    what is wrong with it; each caller names the argument in its own words."""

    def __init__(self, argument: Argument, problem: str, *, value: int | None = None,
                 hint: str = "", step: NextStep | None = None,
                 data: Mapping[str, int | str] | None = None) -> None:
        super().__init__(f"{plain_argument(argument, value)} {problem}", hint=hint, step=step,
                         data=data)
        self.argument = argument
        self.value = value
        self.problem = problem

    def worded(self, words: ArgumentWords) -> str:
        """The message with the argument in a caller's words."""
        return f"{words(self.argument, self.value)} {self.problem}"


class TransportError(ChaptersError):
    """A provider failure. `code` is what callers branch on; the message is for humans only.

    The message must never contain a token: providers build it from codes and numbers.
    """

    def __init__(self, code: FailureCode, message: str, *, hint: str = "",
                 step: NextStep | None = None,
                 data: Mapping[str, int | str] | None = None) -> None:
        super().__init__(message, hint=hint, step=step, data=data)
        self.code = code


class ConfigError(ChaptersError):
    """A bad config key or value: names the key, the file and the allowed range."""


class InputError(ChaptersError):
    """A transcript that cannot be read as one: says what was found, with line numbers."""


class RefusalError(ChaptersError):
    """§1 invariant 2: refuse with numbers, never truncate."""


class BodyChangedError(RefusalError):
    """§1 invariant 3: the enrichment frontmatter write found another body than the one it
    labelled (or than the frontmatter's `sha256`), so it refuses instead of writing."""


class UnsafePathError(ChaptersError):
    """A store or mirror file that is a symlink, not a regular file, or resolves outside its
    root: refused, never read or published (one check for every tree, as `artifact` has)."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"refused: {path} {reason}", step=NextStep.REPAIR_UNSAFE_FILE)
        self.path = path
        self.reason = reason
