"""`chapters rule add|list|approve|revoke` and `chapters notice` (§7).

Rules are read from the store (other machines' proposals arrive there by sync copy-in);
approval and revocation are facts in this machine's own edits file, so they change this
machine's notice and no other's (amendment 2026-09-20). The notice is the core's
`build_notice`: O(1) in corpus size, refusing with numbers when core rules overflow.
"""

from __future__ import annotations

import argparse
from typing import Any

from dsh_chapters_core.errors import UsageError
from dsh_chapters_core.rules import (
    Rule,
    RuleStatus,
    category_slug,
    rule_json,
    status_counts,
)

from dsh_chapters.commands.invocation import Invocation
from dsh_chapters.present import OUTPUT_COLUMNS, clip, fold
from dsh_chapters.services.rules import notice, propose, provenance, rules_here, set_status

# -- rendering ----------------------------------------------------------------------------------


def _status_text(rule: Rule) -> str:
    if rule.changed_since_approved:
        return "proposed*"
    return str(rule.status)




def _table(rules: tuple[Rule, ...], *, wide: bool = False) -> str:
    """One row a rule; by default the text is cut to fit the line, the whole rule is one
    `chapters rule list --wide` (or its file) away."""
    header = ("ID", "STATUS", "CATEGORY", "TEXT", "PROVENANCE")
    rows = [(r.id, _status_text(r), r.category, r.one_line, provenance(r)) for r in rules]
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(3)]
    lines = []
    for row in [header, *rows]:
        lead = "  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row[:3]))
        line = f"{lead}  {row[3]}  ({row[4]})"
        if wide or len(line) <= OUTPUT_COLUMNS:
            lines.append(line)
        else:  # the provenance under the text, and the text cut only if it alone is too long
            lines.append(clip(f"{lead}  {row[3]}"))
            lines.append(clip(" " * (len(lead) + 2) + f"({row[4]})"))
    return "\n".join(lines)


# -- commands -----------------------------------------------------------------------------------


def run_add(args: argparse.Namespace, inv: Invocation) -> int:
    app = inv.app
    result = propose(app, args.category, args.text, session=args.session or "")
    rule = result.rule
    data = {"created": result.created, "rule": rule_json(rule)}
    if result.created:
        text = (f"proposed {rule.id} [{rule.category}]: {rule.path}\n"
                f"it affects no notice until a human approves it on each machine: "
                f"`chapters rule approve {rule.id}`")
    else:
        text = (f"the same rule already exists as {rule.id} ({rule.status} here): {rule.path}; "
                f"nothing written")
    inv.emit(data, fold(text))
    return 0


def run_list(args: argparse.Namespace, inv: Invocation) -> int:
    app = inv.app
    every = rules_here(app)
    shown = every
    if args.proposed:
        shown = tuple(r for r in shown if r.status is RuleStatus.PROPOSED)
    elif not args.all:
        shown = tuple(r for r in shown if r.status is not RuleStatus.REVOKED)
    if args.category:
        wanted = category_slug(args.category)
        shown = tuple(r for r in shown if r.category == wanted)
    counts = status_counts(every)
    summary = (f"{len(shown)} of {len(every)} rules shown · on {app.harness_id}: "
               f"{counts['core']} core, {counts['proposed']} proposed, {counts['revoked']} revoked")
    if not args.all and counts["revoked"] and not args.proposed:
        summary += " (`--all` shows revoked)"
    data = {"harnessId": app.harness_id, "rules": [rule_json(r) for r in shown],
            "shown": len(shown), "total": len(every), "counts": dict(counts)}
    if not every:
        text = 'no rules in this store; propose one with `chapters rule add <category> "<text>"`'
    elif not shown:
        text = summary
    else:
        text = _table(shown, wide=args.wide) + "\n" + summary
        if any(r.changed_since_approved for r in shown):
            text += "\n* changed since approved here: approve it again to make it core"
    inv.emit(data, text)
    return 0


def _run_status(args: argparse.Namespace, inv: Invocation, status: RuleStatus) -> int:
    app = inv.app
    change = set_status(app, args.id, status)
    rule = change.rule
    verb = "approved" if status is RuleStatus.CORE else "revoked"
    if change.changed:
        text = (f"{verb} {rule.id} [{rule.category}] on {app.harness_id}: {change.before} → "
                f"{change.after}; recorded in edits/{app.harness_id}/curation.jsonl "
                f"(the rule file is unchanged; other machines decide for themselves)")
    else:
        text = f"{rule.id} is already {change.after} on {app.harness_id}; nothing written"
    inv.emit({"id": rule.id, "before": str(change.before), "after": str(change.after),
              "changed": change.changed, "harnessId": app.harness_id}, fold(text))
    return 0


def run_approve(args: argparse.Namespace, inv: Invocation) -> int:
    return _run_status(args, inv, RuleStatus.CORE)


def run_revoke(args: argparse.Namespace, inv: Invocation) -> int:
    return _run_status(args, inv, RuleStatus.REVOKED)


def run_notice(args: argparse.Namespace, inv: Invocation) -> int:
    if args.session is not None and not args.session.strip():
        raise UsageError("--session is empty", hint="pass a session id, or leave --session out")
    app = inv.app
    result = notice(app, session=args.session or "", title=args.title or "",
                    handoff=args.handoff or "")
    selection = result.rules
    data = {
        "notice": result.text,
        "session": result.session,
        "chapters": result.chapters,
        "refused": result.refused,
        "coreRules": {
            "count": len(selection.core.rules),
            "tokens": selection.core.total,
            "budget": selection.core.budget,
            "refused": selection.core.refused,
            "sizes": [{"id": s.rule.id, "tokens": s.tokens} for s in selection.core.rules],
        },
        "topicRules": {
            "categories": list(selection.matched_categories),
            "count": len(selection.topic.rules),
            "tokens": selection.topic.total,
            "refused": selection.topic.refused,
        },
    }
    inv.emit(data, result.text.rstrip("\n"))
    if result.refused and not inv.json:
        # The notice itself says why; stderr tells a human at a terminal too.
        inv.stderr.write(
            f"chapters: core rules refused: {selection.core.total} tokens > budget "
            f"{selection.core.budget}; see the notice for each rule's size\n"
        )
    return 0


def register(subparsers: Any, common: argparse.ArgumentParser) -> None:
    rule = subparsers.add_parser(
        "rule", parents=[common], help="propose, list, approve and revoke rules",
        description="Rules are proposed once and approved per machine: a rule affects no "
                    "machine's notice until that machine's human approves it.",
    )
    subs = rule.add_subparsers(dest="rule_command", metavar="ACTION", required=True)

    add = subs.add_parser("add", parents=[common], help="propose a rule (status: proposed)")
    add.add_argument("category", help="a category such as testing or git-workflow")
    add.add_argument("text", help="the rule, in quotes")
    add.add_argument("--session", metavar="ID", help="the session this rule came from")
    add.set_defaults(run=run_add)

    listing = subs.add_parser("list", parents=[common],
                              help="rules with their status on this machine")
    which = listing.add_mutually_exclusive_group()
    which.add_argument("--all", action="store_true", help="include revoked rules")
    which.add_argument("--proposed", action="store_true", help="only rules awaiting approval here")
    listing.add_argument("--category", metavar="C", help="only this category")
    listing.add_argument("--wide", action="store_true",
                         help="each rule's whole text, however long the line")
    listing.set_defaults(run=run_list)

    approve = subs.add_parser("approve", parents=[common],
                              help="make a rule core on this machine (a curation fact)")
    approve.add_argument("id", help="the rule id, <harnessId>/<NNN>")
    approve.set_defaults(run=run_approve)

    revoke = subs.add_parser("revoke", parents=[common],
                             help="take a rule out of this machine's notice (a curation fact)")
    revoke.add_argument("id", help="the rule id, <harnessId>/<NNN>")
    revoke.set_defaults(run=run_revoke)

    notice_parser = subparsers.add_parser(
        "notice", parents=[common], help="print what a new session is told at its start",
    )
    notice_parser.add_argument("--session", metavar="ID",
                               help="the root session whose chapters are listed")
    notice_parser.add_argument("--title", metavar="T", help="what the continuation is about")
    notice_parser.add_argument("--handoff", metavar="TEXT",
                               help='the work in flight ("In flight" section)')
    notice_parser.set_defaults(run=run_notice)
