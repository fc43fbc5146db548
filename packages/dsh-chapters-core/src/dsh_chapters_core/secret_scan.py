"""Finding credentials already written (§9): what `chapters scan` reports.

A store archived by an older version holds whatever that version's rules let through, and so
do the mirror and the pool's history on every machine. The scan runs the current rules over
each file (and each version of each file in the history) and reports where each credential
stands: the place, the path, the line, the family and the 8 hex digits of the secret's
SHA-256 (what its marker would show), never the secret. Identical contents are scanned once
(the store, the mirror and the history mostly hold the same bytes).
"""

from __future__ import annotations

import bisect
import hashlib
from dataclasses import dataclass, field
from typing import Any

from dsh_chapters_core.redact import find_secrets

# A file whose first bytes hold a NUL is not text (an index cache, an image): not scanned.
_BINARY_PROBE = 8192


@dataclass(frozen=True, slots=True)
class SecretHit:
    """One credential found: where it stands, never what it is."""

    where: str  # "store", "mirror", "pool history"
    path: str  # relative to the store, the mirror or the pool ("" for an unnamed git object)
    line: int  # 1-based
    family: str
    sha256: str  # the first 8 hex digits of the secret's SHA-256, as in its marker
    commit: str = ""  # pool history: the commit the version was met at ("" if none names it)
    source: str = ""  # pool history: "mirror" or "pool" (whose objects held it)
    store_path: str = ""  # a pool path's twin in the store, when it has one (for people)

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"where": self.where, "path": self.path, "line": self.line,
                                "family": self.family, "sha256": self.sha256}
        if self.store_path:
            data["storePath"] = self.store_path
        if self.commit or self.source:
            data |= {"commit": self.commit, "objects": self.source}
        return data


def _line_starts(text: str) -> list[int]:
    starts = [0]
    at = text.find("\n")
    while at >= 0:
        starts.append(at + 1)
        at = text.find("\n", at + 1)
    return starts


def content_key(data: bytes) -> bytes:
    """The git blob id of `data`: equal contents in the store, the mirror and the history
    share it, so each is scanned once."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).digest()


def findings_in(data: bytes, patterns: tuple[str, ...] = ()) -> tuple[tuple[int, str, str], ...]:
    """(line, family, sha256 prefix) of each credential in `data`; () for binary data."""
    if b"\0" in data[:_BINARY_PROBE]:
        return ()
    text = data.decode("utf-8", "surrogateescape")
    found = find_secrets(text, patterns)
    if not found:
        return ()
    starts = _line_starts(text)
    return tuple((bisect.bisect_right(starts, f.start), f.family, f.sha256) for f in found)


@dataclass(slots=True)
class SecretScan:
    """Accumulates hits over many files, scanning each distinct content once."""

    patterns: tuple[str, ...] = ()
    hits: list[SecretHit] = field(default_factory=list)
    files: dict[str, int] = field(default_factory=dict)  # where -> files scanned
    bytes_scanned: int = 0
    _memo: dict[bytes, tuple[tuple[int, str, str], ...]] = field(default_factory=dict)

    def add(self, where: str, path: str, data: bytes, *, commit: str = "",
            source: str = "") -> None:
        key = content_key(data)
        found = self._memo.get(key)
        if found is None:
            found = findings_in(data, self.patterns)
            self._memo[key] = found
            self.bytes_scanned += len(data)
        self.files[where] = self.files.get(where, 0) + 1
        self.hits.extend(SecretHit(where, path, line, family, digest, commit, source)
                         for line, family, digest in found)

    def counts(self) -> dict[str, int]:
        """Hits per place, in the order places were scanned."""
        out = dict.fromkeys(self.files, 0)
        for hit in self.hits:
            out[hit.where] = out.get(hit.where, 0) + 1
        return out

    def families(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for hit in self.hits:
            out[hit.family] = out.get(hit.family, 0) + 1
        return dict(sorted(out.items()))
