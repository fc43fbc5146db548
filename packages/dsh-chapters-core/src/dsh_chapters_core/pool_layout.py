"""Where a store file lives in the pool, and whose it is (§2.2, §3.1, §3.3).

The store (`.dsh-chapters/`) is the truth; the pool mirror (`.dsh-knowledge/`) is transport.
This module is the pure mapping between the two layouts plus the ownership rule that keeps
two machines from ever writing the same pool file:

    <sid>/chapters/NNN-x.md        <->  chapters/<pk>/<sid>/NNN-x.md
    artifacts/<aa>/<sha>.txt       <->  artifacts/<pk>/<aa>/<sha>
    <sid>/collections.jsonl        <->  collections/<pk>/<sid>.jsonl
    rules/<h>/...                  <->  rules/<pk>/<h>/...
    edits/<h>/curation.jsonl       <->  edits/<h>/curation.jsonl

Nothing else crosses: `index/`, `topics/`, `state/`, `logs/`, `cache/`, `config.toml` and
`session.json` are machine-local or derived (§10.2), and `project.yml` is written once into
the pool by whoever syncs first.
"""

from __future__ import annotations

import enum
import json
import re
from dataclasses import dataclass, field

from dsh_chapters_core.errors import InputError

# Store top-level names that are not sessions. The last five never leave the machine.
RULES_DIR = "rules"  # rules/<harnessId>/NNN-….md (§7)
SHARED_STORE_DIRS: tuple[str, ...] = ("artifacts", RULES_DIR, "edits")
LOCAL_STORE_DIRS: tuple[str, ...] = ("index", "topics", "state", "logs", "cache")
# Files the store keeps at its top level (or inside a session), by name: a session id in the
# pool that collides with one would write a chapter under a file (§2.2, store-reserved names).
STORE_RESERVED_NAMES: tuple[str, ...] = (
    "config.toml", "sessions", "chapters", "session.json", "collections.jsonl", "project.yml",
)
_NOT_SESSIONS = frozenset(SHARED_STORE_DIRS + LOCAL_STORE_DIRS + STORE_RESERVED_NAMES)

SESSION_FILE = "session.json"
COLLECTIONS_FILE = "collections.jsonl"
CURATION_FILE = "curation.jsonl"
PROJECT_FILE = "project.yml"
STORE_ARTIFACT_SUFFIX = ".txt"

_CHAPTER_NAME = re.compile(r"^[0-9]{3,}-[^/]*\.md$")

# §2.2: one element of a pool path, in bytes. NAME_MAX is 255 on every filesystem we write to,
# and each writer adds a temp suffix to a name while it writes it (the store's
# `.<name>.<pid>-<hex>.tmp`, the mirror's `.<name>.tmp-<pid>`: up to 31 bytes), so a name over
# 224 bytes fails every write with ENAMETOOLONG; 200 leaves room for any suffix. A format
# limit, not a tunable: every machine of a pool must judge a name alike.
POOL_NAME_MAX_BYTES = 200
# Names a filesystem or git treats as something else: `.git` (any case, and the 8.3 and
# trailing-dot forms Windows and macOS fold onto it), and the DOS device names (`con`,
# `nul.md`), which name no file on a Windows machine sharing the pool.
_GIT_ALIASES = frozenset({".git", "git~1"})
_DEVICE_NAMES = frozenset(
    {"con", "prn", "aux", "nul", "conin$", "conout$"}
    | {f"{d}{n}" for d in ("com", "lpt") for n in "123456789"}
)
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_PLAIN_NAME = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]*")  # ASCII: one byte a character
_PLAIN_PATH = re.compile(r"[A-Za-z0-9_./-]+")  # a path of such names: one C pass
# A withheld-paths key (quarantine, read doors) that withholds a whole tree: the list of what
# copy-in quarantined does not read, so no one can tell which pool files are safe to serve.
WITHHOLD_ALL = "/"
_SHA256 = re.compile(r"^[0-9a-f]{64}$")


class PoolFileKind(enum.StrEnum):
    CHAPTER = "chapter"
    ARTIFACT = "artifact"
    COLLECTION = "collection"
    RULE = "rule"
    EDITS = "edits"


@dataclass(frozen=True, slots=True)
class PoolEntry:
    """One file that exists on both sides, under its two names."""

    kind: PoolFileKind
    store_path: str  # relative to `.dsh-chapters/`
    pool_path: str  # relative to the mirror root
    session_id: str = ""  # chapters and collections
    harness_id: str = ""  # rules and edits: the writer named by the path


def name_problem(name: str | bytes) -> str:
    """Why one path element cannot name a pool file on every machine ("" when it can): not
    UTF-8, over POOL_NAME_MAX_BYTES, a control character, a slash or backslash, or a reserved
    name. A pool is written by other machines: such a name is quarantined and named, never
    checked out, listed, read or served (a name a filesystem gives back undecodable arrives
    here with lone surrogates, and fails the same way)."""
    if (isinstance(name, str) and len(name) <= POOL_NAME_MAX_BYTES and _PLAIN_NAME.fullmatch(name)
            and name[-1] != "." and name.split(".", 1)[0].lower() not in _DEVICE_NAMES):
        return ""  # the common case (a uuid, `001-slug.md`), decided without encoding
    if isinstance(name, bytes):
        raw = name
        try:
            name = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            return f"not UTF-8 (byte {exc.start} of {len(raw)})"
    else:
        try:
            raw = name.encode("utf-8")
        except UnicodeEncodeError as exc:
            return f"not UTF-8 (character {exc.start})"
    if name in ("", ".", ".."):
        return "an empty, `.` or `..` element"
    if len(raw) > POOL_NAME_MAX_BYTES:
        return f"a name of {len(raw)} bytes, over {POOL_NAME_MAX_BYTES}"
    if "/" in name or "\\" in name:
        return "a slash or backslash inside a name"
    if _CONTROL.search(name):
        return "a control character in a name"
    folded = name.lower().rstrip(". ")
    if folded in _GIT_ALIASES:
        return "a reserved name (git's own directory)"
    if name != name.rstrip(". "):
        return "a name ending in a dot or a space (a reserved form)"
    if folded.split(".", 1)[0] in _DEVICE_NAMES:
        return "a reserved name (a device name)"
    return ""


def path_problem(path: str | bytes) -> str:
    """`name_problem` of the first element of a `/`-separated path that has one."""
    if isinstance(path, str) and _PLAIN_PATH.fullmatch(path):
        # The common case of every walk (`chapters/<uuid>/<uuid>/001-slug.md`): plain ASCII,
        # so only the length, the dots and the device names are left to look at.
        for part in path.split("/"):
            if (not part or part[0] == "." or part[-1] == "." or len(part) > POOL_NAME_MAX_BYTES
                    or part.split(".", 1)[0].lower() in _DEVICE_NAMES):
                break
        else:
            return ""
    elements: list[bytes] | list[str] = (
        path.split(b"/") if isinstance(path, bytes) else path.split("/"))
    for element in elements:
        problem = name_problem(element)
        if problem:
            return problem
    return ""


def _safe(segment: str) -> bool:
    # A pool is written by other machines: never let a path climb out of the store, and never
    # take a name some machine cannot create (non-UTF-8, too long for a temp suffix, reserved).
    return not name_problem(segment)


def is_session_id(name: str) -> bool:
    # Case-folded: on a case-insensitive disk `Config.toml` is the same file as `config.toml`.
    # Called for every path of every walk: `_safe` already refuses a slash and a control
    # character, by one regular expression for a plain name.
    return _safe(name) and not name.startswith(".") and name.lower() not in _NOT_SESSIONS


def check_session_id(session_id: str, path: str, limit: int) -> None:
    """A session id read from `path` names a store directory: a plain name of at most `limit`
    characters (`sessionIdMaxChars`), else InputError and nothing is archived."""
    if len(session_id) > limit:
        raise InputError(f"{path}: session id of {len(session_id)} characters, over "
                         f"sessionIdMaxChars = {limit}; nothing was archived",
                         hint="this is not a session file a harness wrote; check the path")
    size = len(session_id.encode("utf-8", "surrogatepass"))
    if size + len(".jsonl") > POOL_NAME_MAX_BYTES:
        # its pool twin `collections/<pk>/<sid>.jsonl` must be a name every machine can write
        raise InputError(f"{path}: session id of {size} bytes; with `.jsonl` it is over the "
                         f"{POOL_NAME_MAX_BYTES} bytes a pool name holds; nothing was archived",
                         hint="this is not a session file a harness wrote; check the path")
    if not is_session_id(session_id) or any(0xD800 <= ord(c) <= 0xDFFF for c in session_id):
        raise InputError(f"{path}: session id {session_id[:40]!r} cannot name a directory "
                         "(a reserved name, '/', '..' or a control character); nothing was "
                         "archived", hint="this is not a session file a harness wrote")


def to_pool(store_path: str, project_key: str) -> PoolEntry | None:
    """The pool twin of a store file, or None if the file never leaves this machine."""
    parts = store_path.split("/")
    if not project_key or path_problem(store_path):
        return None
    head = parts[0]
    if head == "artifacts":
        if len(parts) != 3 or not parts[2].endswith(STORE_ARTIFACT_SUFFIX):
            return None
        sha = parts[2][: -len(STORE_ARTIFACT_SUFFIX)]
        if not _SHA256.match(sha) or parts[1] != sha[:2]:
            return None
        return PoolEntry(
            PoolFileKind.ARTIFACT, store_path, f"artifacts/{project_key}/{sha[:2]}/{sha}"
        )
    if head == "rules":
        if len(parts) < 3:
            return None
        return PoolEntry(
            PoolFileKind.RULE,
            store_path,
            f"rules/{project_key}/{'/'.join(parts[1:])}",
            harness_id=parts[1],
        )
    if head == "edits":
        if len(parts) != 3 or parts[2] != CURATION_FILE:
            return None
        return PoolEntry(PoolFileKind.EDITS, store_path, store_path, harness_id=parts[1])
    if not is_session_id(head):
        return None
    if len(parts) == 3 and parts[1] == "chapters" and _CHAPTER_NAME.match(parts[2]):
        return PoolEntry(
            PoolFileKind.CHAPTER,
            store_path,
            f"chapters/{project_key}/{head}/{parts[2]}",
            session_id=head,
        )
    if len(parts) == 2 and parts[1] == COLLECTIONS_FILE:
        return PoolEntry(
            PoolFileKind.COLLECTION,
            store_path,
            f"collections/{project_key}/{head}.jsonl",
            session_id=head,
        )
    return None


def to_store(pool_path: str, project_key: str) -> PoolEntry | None:
    """The store twin of a pool file of THIS project, or None (derived files, other projects)."""
    parts = pool_path.split("/")
    if not project_key or path_problem(pool_path):
        return None
    head = parts[0]
    if head == "edits":
        if len(parts) != 3 or parts[2] != CURATION_FILE:
            return None
        return PoolEntry(PoolFileKind.EDITS, pool_path, pool_path, harness_id=parts[1])
    # §2.3: the projectKey keeps a session out of a foreign corpus sharing the pool.
    if len(parts) < 3 or parts[1] != project_key:
        return None
    if head == "chapters":
        if (len(parts) != 4 or not is_session_id(parts[2])
                or not _CHAPTER_NAME.match(parts[3])):
            return None
        return PoolEntry(
            PoolFileKind.CHAPTER, f"{parts[2]}/chapters/{parts[3]}", pool_path, session_id=parts[2]
        )
    if head == "artifacts":
        if len(parts) != 4 or not _SHA256.match(parts[3]) or parts[2] != parts[3][:2]:
            return None
        return PoolEntry(
            PoolFileKind.ARTIFACT,
            f"artifacts/{parts[2]}/{parts[3]}{STORE_ARTIFACT_SUFFIX}",
            pool_path,
        )
    if head == "collections":
        if len(parts) != 3 or not parts[2].endswith(".jsonl"):
            return None
        sid = parts[2][: -len(".jsonl")]
        if not is_session_id(sid):
            return None
        return PoolEntry(
            PoolFileKind.COLLECTION, f"{sid}/{COLLECTIONS_FILE}", pool_path, session_id=sid
        )
    if head == "rules":
        # rules/<pk>/<harnessId>/NNN-….md: the store reads exactly `rules/<h>/<file>.md`
        if len(parts) != 4 or not parts[3].endswith(".md") or parts[2].startswith("."):
            return None
        return PoolEntry(
            PoolFileKind.RULE, f"rules/{'/'.join(parts[2:])}", pool_path, harness_id=parts[2]
        )
    return None


def pool_prefixes(project_key: str) -> tuple[str, ...]:
    """The mirror subtrees copy-in reads (everything else in the pool is derived or foreign)."""
    return (
        f"chapters/{project_key}/",
        f"artifacts/{project_key}/",
        f"collections/{project_key}/",
        f"rules/{project_key}/",
        "edits/",
    )


@dataclass(frozen=True, slots=True)
class Ownership:
    """§3.3: a session belongs to exactly one machine; `edits/<h>/` and `rules/<h>/` to `h`.

    `session_owners` maps a session id to the harnessId its `session.json` names. A session
    without a `session.json` was written here (copy-in always writes one), so it is ours.
    """

    harness_id: str
    session_owners: tuple[tuple[str, str], ...] = ()
    # The same, looked up: every file of a sync or a status asks, so a dict built per question
    # made a store of many sessions quadratic (8,052 files x 1,264 sessions in the haystack).
    _by_session: dict[str, str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_by_session", dict(self.session_owners))

    def owner_of(self, entry: PoolEntry) -> str:
        """The harness id that writes this file ("" = unknown, so not ours; artifacts: anyone)."""
        if entry.kind in (PoolFileKind.RULE, PoolFileKind.EDITS):
            return entry.harness_id
        if entry.kind is PoolFileKind.ARTIFACT:
            return self.harness_id
        return self._by_session.get(entry.session_id, self.harness_id)

    def is_ours(self, entry: PoolEntry) -> bool:
        """Ours to publish. Artifacts are content-addressed: every holder may publish them."""
        return self.owner_of(entry) == self.harness_id


def session_record(*, session_id: str, harness_id: str, harness: str, project_key: str) -> bytes:
    """The `session.json` copy-in writes for a session another machine archived.

    It names the writer so ownership stays clear: we never publish a foreign session's files.
    """
    record = {
        "harness": harness,
        "harnessId": harness_id,
        "projectKey": project_key,
        "sessionId": session_id,
        "source": "pool",
        "watermark": -1,  # nothing of it is archived here (the fs store's NO_WATERMARK)
    }
    return (json.dumps(record, ensure_ascii=False, sort_keys=True, indent=2) + "\n").encode("utf-8")


def frontmatter_value(text: bytes, key: str) -> str:
    """A top-level scalar of a chapter's frontmatter, without a YAML parser.

    `dump_frontmatter` writes one `key: <JSON value>` line per key, so a line scan is exact for
    strings; anything else is returned as its raw text. "" when absent.
    """
    lines = text.decode("utf-8", errors="replace").splitlines()
    if not lines or lines[0].strip() != "---":
        return ""
    prefix = f"{key}:"
    for line in lines[1:]:
        if line.strip() == "---":
            break
        if not line.startswith(prefix):
            continue
        raw = line[len(prefix) :].strip()
        try:
            value = json.loads(raw)
        except ValueError:
            return raw.strip("'\"")
        return value if isinstance(value, str) else raw
    return ""


def project_manifest(
    *, project_key: str, slug: str, derivation: str, created_by: str, created_at: str
) -> bytes:
    """`project.yml` (§2.2): sorted keys, JSON-quoted scalars, so it is valid, stable YAML."""
    fields = {
        "created-at": created_at,
        "created-by": created_by,
        "derivation": derivation,
        "projectKey": project_key,
        "slug": slug,
    }
    return "".join(
        f"{k}: {json.dumps(v, ensure_ascii=False)}\n" for k, v in sorted(fields.items())
    ).encode()
