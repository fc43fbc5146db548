"""Chapter and rule files into `Document`s: frontmatter read with `yaml.safe_load` (the edge).

A file a human edited into invalid YAML still yields a document (titled by its file name, the
error kept in `extra`), so one bad file never hides the rest of the store from search. Every
way frontmatter can be bad ends there, never in an exception: an impossible date, a value of
the wrong type, an alias (refused outright, so an alias bomb never expands), nesting deeper
than the parser's stack, or a block over `frontmatterMaxBytes`. `frontmatter_problem` names
the reason, so copy-in can refuse a pool file before it is written and `chapters status`
can list what it quarantined.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
import hashlib
import json
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from dsh_chapters_core.config import DEFAULTS
from dsh_chapters_core.documents import Document, DocumentKind
from dsh_chapters_core.frontmatter import load_core_frontmatter, split_frontmatter

if TYPE_CHECKING:
    import yaml

_KNOWN = frozenset({"title", "summary", "topics", "date", "projectKey", "sessionId", "harnessId",
                    "category", "status", "sha256", "seqRange", "messages", "kind"})


FRONTMATTER_ERROR = "frontmatterError"  # the `extra` key naming why a file's frontmatter is bad


class FrontmatterProblem(ValueError):
    """Frontmatter that cannot be read; `reason` is one line a person can act on."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@functools.cache
def _bounded_loader() -> type[yaml.SafeLoader]:
    """Built on first use, with PyYAML itself: the frontmatter the core writes is read by the
    JSON fast path, so a search over an index that is current never imports the YAML parser."""
    import yaml

    class _BoundedLoader(yaml.SafeLoader):
        """`yaml.safe_load`'s loader, minus aliases: a reference to an anchor is refused
        where it stands, so `a: &x [..] b: [*x, *x, ...]` never expands (an alias bomb
        costs nothing)."""

        def compose_node(self, parent: Any, index: Any) -> Any:
            if self.check_event(yaml.AliasEvent):
                event = self.peek_event()  # type: ignore[no-untyped-call]  # PyYAML's stubs
                raise FrontmatterProblem(
                    f"alias *{event.anchor} at line {event.start_mark.line + 2}: frontmatter "
                    "aliases are refused"
                )
            return super().compose_node(parent, index)

    def _timestamp(loader: yaml.SafeLoader, node: yaml.Node) -> Any:
        # `date: 2026-13-45` matches YAML's timestamp shape, then datetime refuses it: name it.
        try:
            return yaml.SafeLoader.construct_yaml_timestamp(loader, node)  # type: ignore[arg-type]
        except ValueError as exc:
            raise FrontmatterProblem(
                f"invalid date {node.value!r} at line {node.start_mark.line + 2} ({exc})"
            ) from None

    _BoundedLoader.add_constructor("tag:yaml.org,2002:timestamp", _timestamp)
    return _BoundedLoader


_OPENERS = re.compile(r"[\[{]")


def _flow_depth(fm_text: str, limit: int) -> int:
    """The deepest `[`/`{` nesting (quotes ignored: an over-estimate is only ever safe),
    stopping as soon as it passes `limit`. PyYAML takes seconds on thousands of levels."""
    if len(_OPENERS.findall(fm_text)) <= limit:
        return 0
    depth = deepest = 0
    for ch in fm_text:
        if ch in "[{":
            depth += 1
            if depth > deepest:
                deepest = depth
                if deepest > limit:
                    return deepest
        elif ch in "]}" and depth:
            depth -= 1
    return deepest


def load_frontmatter(
    fm_text: str, max_bytes: int = DEFAULTS.frontmatter_max_bytes,
    max_depth: int = DEFAULTS.frontmatter_max_depth,
) -> Any:
    """The YAML of one frontmatter block, or FrontmatterProblem (never another exception)."""
    size = len(fm_text.encode("utf-8", "surrogateescape"))
    if size > max_bytes:
        raise FrontmatterProblem(
            f"frontmatter is {size} bytes, over frontmatterMaxBytes = {max_bytes}"
        )
    if _flow_depth(fm_text, max_depth) > max_depth:
        raise FrontmatterProblem(
            f"frontmatter nests deeper than frontmatterMaxDepth = {max_depth}"
        )
    import yaml

    try:
        return yaml.load(fm_text, Loader=_bounded_loader())
    except FrontmatterProblem:
        raise
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 2}" if mark is not None else "frontmatter"
        raise FrontmatterProblem(f"invalid YAML at {where}") from None
    except RecursionError:
        raise FrontmatterProblem("frontmatter nests deeper than the parser allows") from None
    except (ValueError, TypeError, OverflowError) as exc:
        raise FrontmatterProblem(f"frontmatter value cannot be read ({exc})") from None


def frontmatter_problem(
    relpath: str, data: bytes, max_bytes: int = DEFAULTS.frontmatter_max_bytes,
    max_depth: int = DEFAULTS.frontmatter_max_depth,
) -> str:
    """Why this chapter or rule file cannot be read ("" when it can): copy-in's check."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return f"not UTF-8 at byte {exc.start}"
    fm_text, body = split_frontmatter(text)
    fast = _core_fields(fm_text, max_bytes, max_depth)
    if fast is not None:
        # What the core wrote (a pool's files nearly always): read as `parse_document` reads
        # it, without PyYAML, which took 9 ms a chapter when a new machine copied in a pool.
        try:
            document_from_fields(relpath, fast, body, "")
            return ""
        except (ValueError, TypeError, RecursionError):
            pass  # a shape the mapping cannot hold: the YAML path below names the problem
    try:
        fields = load_frontmatter(fm_text, max_bytes, max_depth) if fm_text else {}
        if fields is not None and not isinstance(fields, dict):
            return f"frontmatter is a {type(fields).__name__}, not a mapping"
        document_from_fields(relpath, fields or {}, body, body_digest(body))
    except FrontmatterProblem as exc:
        return exc.reason
    except (ValueError, TypeError, RecursionError) as exc:
        return f"frontmatter value cannot be read ({type(exc).__name__})"
    return ""


def _core_fields(fm_text: str, max_bytes: int, max_depth: int) -> dict[str, object] | None:
    """The fields of frontmatter as the core writes it, read with `json` (None for anything
    else: hand-edited YAML goes to PyYAML). Only within the bounds `load_frontmatter`
    enforces, so both ways of reading refuse the same files."""
    if not fm_text or len(fm_text.encode("utf-8", "surrogateescape")) > max_bytes:
        return None
    if _flow_depth(fm_text, max_depth) > max_depth:
        return None
    return load_core_frontmatter(fm_text)


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


# What `json.dumps(v, ensure_ascii=False, sort_keys=True, default=_scalar)` builds on every
# call, built once: a chapter keeps four or five keys this way.
_EXTRA = json.JSONEncoder(ensure_ascii=False, sort_keys=True, default=_scalar)


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


def quarantined_document(relpath: str, reason: str, body_sha256: str = "") -> Document:
    """The stand-in for a file whose frontmatter cannot be read: titled by its file name,
    the reason in `extra`, so search still finds the path and status can name it."""
    return Document(path=relpath, kind=_kind(None, relpath), title=_stem(relpath),
                    body_sha256=body_sha256, extra=((FRONTMATTER_ERROR, reason),))


def frontmatter_error(document: Document) -> str:
    """The reason a document was quarantined, or ""."""
    return next((v for k, v in document.extra if k == FRONTMATTER_ERROR), "")


def parse_document(
    relpath: str, text: str, max_bytes: int = DEFAULTS.frontmatter_max_bytes
) -> Document:
    """One store file as a Document. `relpath` is relative to `.dsh-chapters/`."""
    fm_text, body = split_frontmatter(text)
    digest = body_digest(body)
    fast = _core_fields(fm_text, max_bytes, DEFAULTS.frontmatter_max_depth)
    try:
        if fast is not None:
            return document_from_fields(relpath, fast, body, digest)
    except (ValueError, TypeError, RecursionError):
        pass  # a shape the mapping cannot hold: the YAML path below names the problem
    try:
        data = load_frontmatter(fm_text, max_bytes) if fm_text else {}
        return document_from_fields(relpath, data if isinstance(data, dict) else {}, body, digest)
    except FrontmatterProblem as exc:
        return quarantined_document(relpath, exc.reason, digest)
    except (ValueError, TypeError, RecursionError) as exc:
        # a value of a shape the mapping cannot hold (a mixed-type mapping, nesting past the
        # stack): the same quarantine as invalid YAML, never an exception past this edge
        return quarantined_document(
            relpath, f"frontmatter value cannot be read ({type(exc).__name__})", digest
        )


# A parsed Document as JSON, for the store's stat-keyed cache of them (filefacts): every field,
# tuples as lists. Its fact name carries a version, raised whenever Document's fields change,
# so a record of an older shape is never asked for and each file is parsed once more.
DOCUMENT_FACT = "document1"


def document_record(document: Document) -> dict[str, Any]:
    return {f.name: getattr(document, f.name) for f in dataclasses.fields(Document)}


def document_from_record(record: Mapping[str, Any]) -> Document:
    """The Document a `document_record` holds; KeyError, TypeError or ValueError for a record
    of another shape (a hand-edited cache), which the caller reads the file again for."""
    return Document(
        **{**record, "kind": DocumentKind(record["kind"]),
           "topics": tuple(str(t) for t in record["topics"]),
           "seq_range": (int(record["seq_range"][0]), int(record["seq_range"][1])),
           "messages": tuple((str(r), int(n)) for r, n in record["messages"]),
           "extra": tuple((str(k), str(v)) for k, v in record["extra"])})


def document_from_fields(relpath: str, data: Mapping[str, Any], body: str,
                         body_sha256: str) -> Document:
    """Parsed frontmatter fields as a Document: the one mapping, whichever parser read them."""
    kind = _kind(data.get("kind"), relpath)
    extra = tuple(sorted(
        (str(k), _EXTRA.encode(v))
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
