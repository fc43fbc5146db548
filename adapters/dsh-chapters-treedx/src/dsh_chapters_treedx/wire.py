"""TreeDX wire shapes, as the server sends them (CONTRACT.md), not as the spec draws them.

Responses are flat where `openapi.yaml` shows a wrapper key (workspace, commit, file, query),
and `paths/list` answers `entries` + `page`. The server adds keys freely, so structuring ignores
extras. One private converter serves this boundary; field names map to camelCase wire names.
"""

from __future__ import annotations

from typing import Any, TypeVar

import attrs
import cattrs
from cattrs.gen import make_dict_structure_fn, make_dict_unstructure_fn, override
from cattrs.preconf.json import make_converter

T = TypeVar("T")


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


# --- responses ---------------------------------------------------------------------------


@attrs.frozen
class ApiError:
    """The error a TreeDX response carries: its code, message and details."""

    code: str
    message: str = ""
    details: dict[str, Any] = attrs.field(factory=dict)


@attrs.frozen
class Repository:
    """A TreeDX repository as the server describes it: its id, name, default ref and status."""

    repo_id: str
    name: str = ""
    default_ref: str = "refs/heads/main"
    status: str = ""


@attrs.frozen
class CreatedRepository:
    """The answer to `POST /repos`: the repository it resolved or created."""

    repo: Repository


@attrs.frozen
class PathEntry:
    """One entry of a `paths/list` answer: a path with its object id, kind and size."""

    path: str
    object_id: str = ""
    kind: str = "blob"
    size: int = 0


@attrs.frozen
class PageInfo:
    """The paging of a `paths/list` answer: the limit and the cursor of the next page, if any."""

    limit: int = 0
    next_cursor: str | None = None
    has_more: bool = False


@attrs.frozen
class PathsPage:
    """One page of a `paths/list` answer: the commit the ref resolved to, its entries and paging."""

    resolved_ref: str
    entries: tuple[PathEntry, ...] = ()
    page: PageInfo = attrs.field(factory=PageInfo)


@attrs.frozen
class RepoFile:
    """One file of a batch read: its path, object id and size, and its content in that encoding."""

    path: str
    object_id: str = ""
    size: int = 0
    encoding: str = "utf8"
    content: str = ""


@attrs.frozen
class FileBatch:
    """The answer to a batch file read: the files read."""

    files: tuple[RepoFile, ...] = ()


@attrs.frozen
class Workspace:
    """Flat, as the server sends it (the spec wraps it in `workspace`)."""

    workspace_id: str
    base_commit_sha: str
    branch_name: str | None = None
    mode: str = ""
    status: str = ""
    expires_at: str | None = None


@attrs.frozen
class WorkspaceChange:
    """One path a workspace changed, and how (added, modified or deleted)."""

    path: str
    status: str = ""


@attrs.frozen
class WorkspaceStatus:
    """The answer to a workspace status request: the paths the workspace changed."""

    changes: tuple[WorkspaceChange, ...] = ()


@attrs.frozen
class CommitOutcome:
    """Flat, as the server sends it (the spec wraps it in `commit`)."""

    commit_sha: str
    changed_paths: tuple[str, ...] = ()
    status: str = ""


# --- requests ----------------------------------------------------------------------------


@attrs.frozen
class CreateRepositoryRequest:
    """The body of `POST /repos`: the repository's name and its default ref."""

    repository_name: str
    default_ref: str


@attrs.frozen
class ListPathsRequest:
    """The body of a `paths/list` request: the ref, the path patterns, the kinds, the page size and
    the cursor."""

    ref: str
    limit: int
    paths: tuple[str, ...] = ("**",)
    kinds: tuple[str, ...] = ("blob",)
    cursor: str | None = None


@attrs.frozen
class ReadFilesRequest:
    """The body of a batch file read: the ref, the paths and the encoding to send them in."""

    ref: str
    paths: tuple[str, ...]
    encoding: str | None = None  # None: the server's utf8 default


@attrs.frozen
class OpenWorkspaceRequest:
    """The body of a workspace open: the base ref, the branch, the lease's TTL and the mode."""

    base_ref: str
    branch_name: str
    ttl_seconds: int
    mode: str = "writable"  # CONTRACT.md: the default is read_only, so always send writable


@attrs.frozen
class WriteFileRequest:
    """The body of a workspace file write: the file's content."""

    content: str


@attrs.frozen
class Author:
    """A commit's author: a name and an email."""

    name: str
    email: str


@attrs.frozen
class CommitRequest:
    """The body of a workspace commit: the commit message and its author."""

    message: str
    author: Author


_RESPONSES = (ApiError, Repository, CreatedRepository, PathEntry, PageInfo, PathsPage, RepoFile,
              FileBatch, Workspace, WorkspaceChange, WorkspaceStatus, CommitOutcome)
_REQUESTS = (CreateRepositoryRequest, ListPathsRequest, ReadFilesRequest, OpenWorkspaceRequest,
             WriteFileRequest, Author, CommitRequest)


def _make_wire_converter() -> cattrs.Converter:
    conv = make_converter(forbid_extra_keys=False)  # the server adds keys; never fail on them
    for response in _RESPONSES:
        renames: dict[str, Any] = {
            f.name: override(rename=_camel(f.name)) for f in attrs.fields(response)
        }
        conv.register_structure_hook(response, make_dict_structure_fn(response, conv, **renames))
    for request in _REQUESTS:
        renames = {
            f.name: override(rename=_camel(f.name), omit_if_default=f.default is None)
            for f in attrs.fields(request)
        }
        conv.register_unstructure_hook(request, make_dict_unstructure_fn(request, conv, **renames))
    return conv


_wire = _make_wire_converter()


class WireShapeError(Exception):
    """A response that does not carry the shape CONTRACT.md records (a proxy, a new server)."""


def to_wire(request: Any) -> dict[str, Any]:
    body = _wire.unstructure(request)
    assert isinstance(body, dict)
    return body


def from_wire(body: Any, cls: type[T]) -> T:
    """Structure a response body; raises `WireShapeError` when the server's shape is not ours."""
    try:
        return _wire.structure(body, cls)
    except (cattrs.BaseValidationError, KeyError, TypeError, ValueError) as exc:
        raise WireShapeError(cls.__name__) from exc
