"""Rules and the notice (§7): propose, approve, revoke, and the session-start notice.

Rules are read from the store (other machines' proposals arrive there by sync copy-in);
approval and revocation are facts in this machine's own edits file, so they change this
machine's notice and no other's (amendment 2026-09-20). The CLI, the hooks, the MCP server and
the viewer all call these.
"""

from __future__ import annotations

import os
from pathlib import Path

from dsh_chapters_core.notice import Notice, NoticeContext, build_notice
from dsh_chapters_core.projectkey import project_slug
from dsh_chapters_core.rules import (
    ProposalResult,
    Rule,
    RuleAuthor,
    RuleProposal,
    RuleStatus,
    StatusChange,
    add_rule,
    load_rules,
    set_rule_status,
)

from dsh_chapters.app import App
from dsh_chapters.present import NOTICE_WORDS

MIRROR_INDEX = "index"  # the pool's derived shards (§10.2), relative to the mirror


def _relative(app: App, root: str) -> str:
    """A workspace-relative path, so every link in the notice opens with a plain `read`."""
    try:
        return Path(root).resolve().relative_to(Path(app.workspace).resolve()).as_posix()
    except ValueError:
        return Path(root).as_posix()


def propose(app: App, category: str, text: str, *, session: str = "",
            author: RuleAuthor = RuleAuthor.USER) -> ProposalResult:
    """Write a proposal on this machine. An agent's is `proposed` like any other (§11.3)."""
    return add_rule(
        app.store_tree, app.store, app.lock,
        RuleProposal(category=category, text=text, source_session=session, author=author),
        harness_id=app.harness_id, project_key=app.identity.project_key, clock=app.clock,
        config=app.config,
    )


def set_status(app: App, rule_id: str, status: RuleStatus) -> StatusChange:
    return set_rule_status(
        app.store_tree, app.store, app.lock, rule_id, status, harness_id=app.harness_id,
        clock=app.clock, config=app.config,
    )


def rules_here(app: App) -> tuple[Rule, ...]:
    """Every rule in the store, with its effective status on this machine."""
    return load_rules(app.store_tree, app.store, app.harness_id)


def notice_context(
    app: App, *, session: str = "", title: str = "", handoff: str = ""
) -> NoticeContext:
    store_dir = _relative(app, app.store_tree.root)
    mirror_root = app.mirror_tree.root
    # search.md: the pool mirror is the door once the project is linked and pulled.
    linked = os.path.isdir(os.path.join(mirror_root, MIRROR_INDEX))
    shard_dir = (f"{_relative(app, mirror_root)}/{MIRROR_INDEX}" if linked
                 else f"{store_dir}/{MIRROR_INDEX}")
    return NoticeContext(
        project_slug=project_slug(app.identity),
        project_key=app.identity.project_key,
        derivation=app.identity.derivation,
        session_id=session,
        title=title,
        handoff=handoff,
        store_dir=store_dir,
        shard_dir=shard_dir,
        words=NOTICE_WORDS,
    )


def root_session(app: App, session: str) -> str:
    """The store directory holding `session`'s chapters: itself, or the root it was forked
    from (its record names it). Without a session: the one the last archive wrote."""
    if not session:
        last = app.log.last("archive") or {}
        paths = [p for p in last.get("chapters", ()) if isinstance(p, str) and "/" in p]
        return paths[0].split("/", 1)[0] if paths else str(last.get("sessionId", ""))
    if os.path.isdir(os.path.join(app.store_tree.root, session)):
        return session
    record = app.store.session_meta().get(session, {})
    return str(record.get("rootSessionId", "")) or session


def notice(app: App, *, session: str = "", title: str = "", handoff: str = "") -> Notice:
    """The continuation notice for `session` on this machine (reads no other session)."""
    ctx = notice_context(app, session=root_session(app, session), title=title, handoff=handoff)
    return build_notice(app.store_tree, app.store, ctx, config=app.config,
                        harness_id=app.harness_id)


def provenance(rule: Rule) -> str:
    who = f"{rule.author or 'user'}@{rule.harness_id}"
    parts = [who]
    if rule.source_session:
        parts.append(f"session {rule.source_session}")
    if rule.authored_at:
        parts.append(rule.authored_at)
    return ", ".join(parts)
