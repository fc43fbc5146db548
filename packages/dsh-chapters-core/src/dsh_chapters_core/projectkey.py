"""projectKey (§2.3): one UUIDv5 per project, identical on every machine.

Local paths differ between machines, so the key comes from the normalized remote. A workspace
without a remote falls back to its absolute path (flagged `path-derived`: unstable across
machines), and a configured override wins over both.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Collection
from dataclasses import dataclass

from dsh_chapters_core.errors import NextStep, UsageError

# A key's derivation: one of these, or the key namespace of the remote's provider (§2.3 as
# amended 2026-09-21, e.g. a TreeDX remote's), which the caller declares.
DERIVATIONS: tuple[str, ...] = ("remote", "path-derived", "override")

_SCHEME = re.compile(r"^[a-z][a-z0-9+.-]*://")
_SCP_FORM = re.compile(r"^(?P<host>[^/:]+):(?P<path>(?!//).*)$")


@dataclass(frozen=True, slots=True)
class ProjectIdentity:
    """A projectKey and how it was derived (§2.3)."""

    project_key: str
    canonical: str  # the string the key was derived from (never holds a credential)
    derivation: str  # one of DERIVATIONS, or a key namespace


def _strip_credentials(rest: str) -> str:
    """Drop `user:token@` from the authority; the token must never reach the canonical form."""
    authority_end = rest.find("/")
    authority = rest if authority_end < 0 else rest[:authority_end]
    at = authority.rfind("@")
    return rest if at < 0 else rest[at + 1 :]


def remote_namespace(url: str, namespaces: Collection[str]) -> str:
    """The key namespace of a `<name>+<scheme>://` remote (remote.py's `key_namespace`).

    Only a scheme that holds a `+` can name one, so a plain remote (`https://`, `git@host:`)
    never loads the remote grammar: compiling its patterns cost every command's start, a
    search's included, a few milliseconds."""
    scheme, found, _ = url.strip().partition("://")
    if not found or "+" not in scheme:
        return ""
    from dsh_chapters_core.remote import key_namespace

    return key_namespace(url, frozenset(namespaces))


def canonicalize_remote(url: str, *, namespaces: Collection[str] = ()) -> str:
    """§2.3 exactly: lowercase, strip the scheme, `git@host:org/repo` → `host/org/repo`,
    strip a trailing `/` and `.git`, keep the host (and port).

    A `<name>+<scheme>://host[:port]/repo` remote whose `<name>` is one of `namespaces` (key
    namespaces the providers declare) becomes `<name>/host[:port]/repo` (amendment
    2026-09-21), so a TreeDX service at a git-colliding URL is never the same pool.
    """
    text = url.strip()
    if not text:
        raise UsageError("the remote URL is empty",
                         hint="pass a remote such as github.com/org/repo")
    text = text.lower()
    namespace = remote_namespace(text, namespaces)
    if namespace:
        text = text[len(namespace) + 1 :]
    scheme = _SCHEME.match(text)
    rest = text[scheme.end() :] if scheme else text
    # Credentials go first, before anything else looks at the string.
    rest = _strip_credentials(rest)
    if scheme is None:
        scp = _SCP_FORM.match(rest)
        if scp is not None and "/" not in scp.group("host"):
            rest = f"{scp.group('host')}/{scp.group('path').lstrip('/')}"
    while True:
        trimmed = rest.rstrip("/")
        trimmed = trimmed.removesuffix(".git")
        if trimmed == rest:
            break
        rest = trimmed
    if not rest:
        raise UsageError("the remote URL has no host or path", hint="pass host/org/repo")
    return f"{namespace}/{rest}" if namespace else rest


# The uuid module imports `platform` (milliseconds on every command's start) for the node
# and time based UUIDs; a projectKey only needs RFC 4122's name-based SHA-1 form and the
# canonical spelling of a given UUID, both written out here as uuid.py does them.
_NAMESPACE_OID = bytes.fromhex("6ba7b8129dad11d180b400c04fd430c8")  # uuid.NAMESPACE_OID


def _spelled(value: int) -> str:
    text = f"{value:032x}"
    return f"{text[:8]}-{text[8:12]}-{text[12:16]}-{text[16:20]}-{text[20:]}"


def _key(canonical: str) -> str:
    """`str(uuid.uuid5(uuid.NAMESPACE_OID, canonical))`."""
    digest = hashlib.sha1(_NAMESPACE_OID + canonical.encode("utf-8"), usedforsecurity=False)
    value = int.from_bytes(digest.digest()[:16], "big")
    value &= ~(0xC000 << 48)  # the variant: RFC 4122
    value |= 0x8000 << 48
    value &= ~(0xF000 << 64)  # the version: 5
    value |= 5 << 76
    return _spelled(value)


def _uuid_text(text: str) -> str:
    """`str(uuid.UUID(text))`: the same accepted spellings, ValueError for anything else."""
    hexdigits = text.replace("urn:", "").replace("uuid:", "").strip("{}").replace("-", "")
    if len(hexdigits) != 32:
        raise ValueError("badly formed hexadecimal UUID string")
    value = int(hexdigits, 16)
    if not 0 <= value < 1 << 128:
        raise ValueError("int is out of range (need a 128-bit value)")
    return _spelled(value)


def derive_project_key(
    *, remote: str | None = None, path: str | None = None, override: str = "",
    namespaces: Collection[str] = (),
) -> ProjectIdentity:
    """The §2.3 ladder: override, then the remote, then the absolute path (`path-derived`).

    An override that is a UUID is the key itself; any other override string is hashed like a
    canonical remote, so it is still a valid path segment in the pool.
    """
    chosen = override.strip()
    if chosen:
        try:
            key = _uuid_text(chosen)
        except ValueError:
            key = _key(chosen)
        return ProjectIdentity(project_key=key, canonical=chosen, derivation="override")
    if remote is not None and remote.strip():
        canonical = canonicalize_remote(remote, namespaces=namespaces)
        derivation = remote_namespace(remote.lower(), namespaces) or "remote"
        return ProjectIdentity(project_key=_key(canonical), canonical=canonical,
                               derivation=derivation)
    if path is not None and path.strip():
        if not os.path.isabs(path):
            raise UsageError(f"path {path!r} is not absolute", hint="pass an absolute directory")
        canonical = os.path.normpath(path)
        return ProjectIdentity(project_key=_key(canonical), canonical=canonical,
                               derivation="path-derived")
    raise UsageError("no remote, path or override to derive a projectKey from",
                     step=NextStep.PASS_REMOTE_OR_PATH)


def project_slug(identity: ProjectIdentity) -> str:
    """A human name for the project: the repository (or directory) name."""
    canonical = identity.canonical.replace("\\", "/").rstrip("/")
    segment = canonical.rsplit("/", 1)[-1]
    return segment or identity.project_key
