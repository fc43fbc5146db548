"""A `DocumentShelf` fake over a `FileTree`, for rules and notice tests (and plugins').

It reads the frontmatter the core writes (`dump_frontmatter`: one `key: <JSON>` line per key)
without a YAML library, and counts the documents it opened, so a test can prove the notice
never reads other sessions' chapters (§1 invariant 6).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from dsh_chapters_core.documents import Document, DocumentKind
from dsh_chapters_core.frontmatter import split_frontmatter
from dsh_chapters_core.ports.store import FileTree


def parse_core_frontmatter(yaml_text: str) -> dict[str, Any]:
    fields: dict[str, Any] = {}
    for line in yaml_text.splitlines():
        key, sep, raw = line.partition(": ")
        if not sep:
            continue
        try:
            fields[key.strip('"')] = json.loads(raw)
        except ValueError:
            fields[key.strip('"')] = raw
    return fields


def document_from_text(path: str, text: str) -> Document:
    """A Document from core-written frontmatter; unknown keys are kept in `extra`."""
    yaml_text, body = split_frontmatter(text)
    fm = parse_core_frontmatter(yaml_text)
    known = {
        "kind", "title", "summary", "topics", "date", "projectKey", "sessionId", "harnessId",
        "category", "status", "sha256", "messages",
    }
    messages = fm.get("messages", {})
    return Document(
        path=path,
        kind=DocumentKind(fm.get("kind", "chapter")),
        title=str(fm.get("title", "")),
        summary=str(fm.get("summary", "")),
        topics=tuple(str(t) for t in fm.get("topics", ())),
        date=str(fm.get("date", "")),
        project_key=str(fm.get("projectKey", "")),
        session_id=str(fm.get("sessionId", "")),
        harness_id=str(fm.get("harnessId", "")),
        category=str(fm.get("category", "")),
        status=str(fm.get("status", "")),
        body=body,
        sha256=str(fm.get("sha256", "")),
        body_sha256=hashlib.sha256(body.encode("utf-8")).hexdigest(),
        messages=tuple(sorted((str(k), int(v)) for k, v in dict(messages).items())),
        # Like the fs adapter: unknown keys keep their JSON text.
        extra=tuple(sorted((k, json.dumps(v, ensure_ascii=False, sort_keys=True))
                           for k, v in fm.items() if k not in known)),
    )


class TreeShelf:
    """Documents read from a tree by path, each read counted in `opened`."""

    def __init__(self, tree: FileTree) -> None:
        self.tree = tree
        self.opened: list[str] = []

    def document(self, path: str) -> Document:
        self.opened.append(path)
        return document_from_text(path, self.tree.read(path).decode("utf-8"))
