"""Errors a user can meet carry numbers and a next step; code branches on codes, never prose.

§5.2: a network error's message once contained "diverge" and triggered the rebuild path.
So every failure that code branches on is a `FailureCode` (transport) or a `Refusal`.
"""

from __future__ import annotations

import enum


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


class ChaptersError(Exception):
    """An explained error: the CLI prints it and exits 1. `hint` is the next step."""

    def __init__(self, message: str, *, hint: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return f"{self.message}\n  next: {self.hint}" if self.hint else self.message


class UsageError(ChaptersError):
    """Bad usage: the CLI exits 2."""


class TransportError(ChaptersError):
    """A provider failure. `code` is what callers branch on; the message is for humans only.

    The message must never contain a token: providers build it from codes and numbers.
    """

    def __init__(self, code: FailureCode, message: str, *, hint: str = "") -> None:
        super().__init__(message, hint=hint)
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

    def __init__(self, path: str, reason: str, *, hint: str = "") -> None:
        super().__init__(
            f"refused: {path} {reason}",
            hint=hint or "replace it with the regular file it should be, or remove it "
            "(`chapters doctor` lists every such file)",
        )
        self.path = path
        self.reason = reason
