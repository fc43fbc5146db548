"""Chapter and rule files into `Document`s: frontmatter read with `yaml.safe_load` (the edge).

A file a human edited into invalid YAML still yields a document (titled by its file name, the
error kept in `extra`), so one bad file never hides the rest of the store from search.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from collections.abc import Mapping
from typing import Any

import yaml
from dsh_chapters_core.documents import Document, DocumentKind
from dsh_chapters_core.frontmatter import split_frontmatter

_KNOWN = frozenset({"title", "summary", "topics", "date", "projectKey", "sessionId", "harnessId",
                    "category", "status", "sha256", "seqRange", "messages", "kind"})


def body_digest(body: str) -> str:
    try:
        data = body.encode("utf-8")
    except UnicodeEncodeError:
        data = body.encode("utf-8", "surrogateescape")
    return hashlib.sha256(data).hexdigest()


def _scalar(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, dt.datetime | dt.date):
        return value.isoformat().replace("+00:00", "Z")
    return str(value)


def _seq_range(value: Any) -> tuple[int, int]:
    if (isinstance(value, list | tuple) and len(value) == 2
            and all(isinstance(v, int) and not isinstance(v, bool) for v in value)):
        return (value[0], value[1])
    return (0, 0)


def _messages(value: Any) -> tuple[tuple[str, int], ...]:
    if not isinstance(value, dict):
        return ()
    return tuple(sorted((str(k), v) for k, v in value.items()
                        if isinstance(v, int) and not isinstance(v, bool)))


def _topics(value: Any) -> tuple[str, ...]:
    if isinstance(value, list | tuple):
        return tuple(str(v) for v in value if v is not None)
    if isinstance(value, str) and value:
        return (value,)
    return ()


def _kind(value: Any, relpath: str) -> DocumentKind:
    try:
        return DocumentKind(str(value))
    except ValueError:
        return DocumentKind.RULE if relpath.startswith("rules/") else DocumentKind.CHAPTER


def _stem(relpath: str) -> str:
    return relpath.rsplit("/", 1)[-1].removesuffix(".md")


def parse_document(relpath: str, text: str) -> Document:
    """One store file as a Document. `relpath` is relative to `.dsh-chapters/`."""
    fm_text, body = split_frontmatter(text)
    digest = body_digest(body)
    try:
        data = yaml.safe_load(fm_text) if fm_text else {}
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 2}" if mark is not None else "frontmatter"
        return Document(path=relpath, kind=_kind(None, relpath), title=_stem(relpath),
                        body_sha256=digest,
                        extra=(("frontmatterError", f"invalid YAML at {where}"),))
    return document_from_fields(relpath, data if isinstance(data, dict) else {}, body, digest)


def document_from_fields(relpath: str, data: Mapping[str, Any], body: str,
                         body_sha256: str) -> Document:
    """Parsed frontmatter fields as a Document: the one mapping, whichever parser read them."""
    kind = _kind(data.get("kind"), relpath)
    extra = tuple(sorted(
        (str(k), json.dumps(v, ensure_ascii=False, sort_keys=True, default=_scalar))
        for k, v in data.items() if k not in _KNOWN
    ))
    return Document(
        path=relpath,
        kind=kind,
        title=_scalar(data.get("title")) or _stem(relpath),
        summary=_scalar(data.get("summary")),
        topics=_topics(data.get("topics")),
        date=_scalar(data.get("date")),
        project_key=_scalar(data.get("projectKey")),
        session_id=_scalar(data.get("sessionId")),
        harness_id=_scalar(data.get("harnessId")),
        category=_scalar(data.get("category")),
        status=_scalar(data.get("status")),
        body=body if kind is DocumentKind.RULE else "",
        sha256=_scalar(data.get("sha256")),
        body_sha256=body_sha256,
        seq_range=_seq_range(data.get("seqRange")),
        messages=_messages(data.get("messages")),
        extra=extra,
    )
