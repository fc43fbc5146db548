"""A chapter file as enrichment sees it: its frontmatter fields, its body, its provenance.

The core parses no YAML, but it wrote this frontmatter itself (`dump_frontmatter`: one
`key: <JSON>` line per key), so JSON reads every value back. A file that does not round-trip
byte for byte (a human edited it into other YAML) is not ours to rewrite: enrichment refuses it
rather than reformat a line it did not write.

Provenance (§2.4) is a chain per field class, newest first. The archive writes one link per
class (`generated: {title: {by: deterministic}, ...}`); the first enrichment turns each class
into a list and prepends to it (`{by: model, model, at}`), so every value traces to the pass
that produced it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from dsh_chapters_core.documents import Provenance
from dsh_chapters_core.frontmatter import dump_frontmatter, split_frontmatter

# The model-owned fields (§6.1): the only ones the enrichment write may change.
MODEL_FIELDS: tuple[str, ...] = ("title", "summary", "topics", "unvetted", "generated")
FIELD_CLASSES: tuple[str, ...] = ("title", "summary", "topics")
BY_MODEL = "model"
BY_DETERMINISTIC = "deterministic"


@dataclass(frozen=True, slots=True)
class ChapterFile:
    """A chapter split into its frontmatter (as JSON values) and its verbatim body."""

    path: str
    fields: Mapping[str, Any]
    frontmatter: str  # the exact `---\n...---\n` block as read
    body: str

    @property
    def body_sha256(self) -> str:
        try:
            data = self.body.encode("utf-8")
        except UnicodeEncodeError:  # read with surrogateescape: hash the original bytes
            data = self.body.encode("utf-8", "surrogateescape")
        return hashlib.sha256(data).hexdigest()

    @property
    def claimed_sha256(self) -> str:
        value = self.fields.get("sha256", "")
        return value if isinstance(value, str) else ""

    @property
    def harness_id(self) -> str:
        value = self.fields.get("harnessId", "")
        return value if isinstance(value, str) else ""

    @property
    def kind(self) -> str:
        value = self.fields.get("kind", "chapter")
        return value if isinstance(value, str) else ""

    def chain(self, field_class: str) -> tuple[Provenance, ...]:
        return provenance_chain(self.fields.get("generated"), field_class)

    def head(self, field_class: str) -> Provenance | None:
        chain = self.chain(field_class)
        return chain[0] if chain else None

    def head_link(self, field_class: str) -> Mapping[str, Any]:
        """The newest link as written (with any extra keys, e.g. the topics' `vocabulary`)."""
        links = _links(self.fields.get("generated"), field_class)
        return links[0] if links else {}


def _parse_line(line: str) -> tuple[str, Any] | None:
    decoder = json.JSONDecoder()
    try:
        if line.startswith('"'):
            key, end = decoder.raw_decode(line)
            if not isinstance(key, str) or line[end : end + 2] != ": ":
                return None
            rest = line[end + 2 :]
        else:
            key, sep, rest = line.partition(": ")
            if not sep or not key:
                return None
        return key, json.loads(rest)
    except (ValueError, RecursionError):
        return None


def parse_chapter_file(path: str, text: str) -> ChapterFile | None:
    """The chapter's fields and body, or None when its frontmatter is not in the form the core
    writes (no frontmatter, a line that is not `key: <JSON>`, or no byte-exact round trip)."""
    fm_text, body = split_frontmatter(text)
    if not fm_text:
        return None
    fields: dict[str, Any] = {}
    for line in fm_text.splitlines():
        parsed = _parse_line(line)
        if parsed is None or parsed[0] in fields:
            return None
        fields[parsed[0]] = parsed[1]
    try:
        block = dump_frontmatter(fields)
    except (TypeError, ValueError):
        return None
    if block + body != text:
        return None
    return ChapterFile(path=path, fields=fields, frontmatter=block, body=body)


def _links(generated: Any, field_class: str) -> tuple[Mapping[str, Any], ...]:
    if not isinstance(generated, Mapping):
        return ()
    value = generated.get(field_class)
    if isinstance(value, Mapping):
        return (value,)
    if isinstance(value, list):
        return tuple(v for v in value if isinstance(v, Mapping))
    return ()


def provenance_chain(generated: Any, field_class: str) -> tuple[Provenance, ...]:
    """The chain of one field class, newest first; a single mapping is a one-link chain."""
    return tuple(
        Provenance(by=str(link.get("by", "")), model=str(link.get("model", "")),
                   at=str(link.get("at", "")))
        for link in _links(generated, field_class)
    )


def prepend_links(generated: Any, links: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """`generated` with each class's new link in front of its chain (lists from now on).

    Classes not in `links` and keys that are not field classes are kept as they were.
    """
    out: dict[str, Any] = dict(generated) if isinstance(generated, Mapping) else {}
    for field_class, link in links.items():
        out[field_class] = [dict(link), *(dict(x) for x in _links(generated, field_class))]
    return out


def provenance_json(chapter: ChapterFile) -> dict[str, list[dict[str, Any]]]:
    """Every field class's chain as plain JSON, for reports."""
    return {fc: [dict(link) for link in _links(chapter.fields.get("generated"), fc)]
            for fc in FIELD_CLASSES}
