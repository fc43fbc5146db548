"""`chapters link`, `chapters sync` and `chapters list --pool` (§2.1, §5).

Every command calls the pool service (`dsh_chapters.services.pool`) over the composed App. A
token given to `link` goes to the credential store and is never printed, logged or written
into the workspace.
"""

from __future__ import annotations

import argparse
from typing import Any

from dsh_chapters_core.errors import UsageError
from dsh_chapters_core.remote import is_loopback_host, parse_remote
from dsh_chapters_core.sync.copy import pool_chapters
from dsh_chapters_core.sync.state import SyncMode

from dsh_chapters.app import MIRROR_DIRNAME, App
from dsh_chapters.commands.invocation import Invocation
from dsh_chapters.present import clip, display_path, fold
from dsh_chapters.services import pool as knowledge_pool

# ---------------------------------------------------------------------------------------------
# chapters link


TOKEN_ENV = "DSH_CHAPTERS_TOKEN"  # the token of `chapters link <url>` when none is given


def _read_token(args: argparse.Namespace, inv: Invocation) -> str | None:
    """The token for a network pool, kept out of the process arguments (where every process
    of the machine can read it): from `DSH_CHAPTERS_TOKEN`, else one line of stdin when it is
    piped, else a prompt that does not echo (a terminal, a network host). `-` still reads
    stdin; a token given as an argument still works."""
    token: str | None = args.token
    if token == "-":
        token = _stdin_line(inv)
        if not token:
            raise UsageError(
                "`-` reads the token from stdin, but stdin was empty",
                hint=f"pipe the token in: `chapters link <url> < token-file`, or set {TOKEN_ENV}",
            )
        return token
    if token or not parse_remote(args.remote.strip()).url:
        return token or None  # a local path takes no token (check_token_rules says so)
    if inv.env.get(TOKEN_ENV):
        return inv.env[TOKEN_ENV]
    isatty = getattr(inv.stdin, "isatty", None)
    if isatty is not None and isatty():
        host = parse_remote(args.remote.strip()).host
        if is_loopback_host(host):
            return None  # a loopback pool needs none: never block on a prompt for it
        import getpass  # only a terminal link asks

        return getpass.getpass(f"token for {host} (not echoed): ", stream=inv.stderr) or None
    return _stdin_line(inv) or None


def _stdin_line(inv: Invocation) -> str:
    """One line of stdin without its line ending (nothing else is stripped: a token with
    spaces is refused, never trimmed into another token)."""
    return inv.stdin.readline().removesuffix("\n").removesuffix("\r")


def run_link(args: argparse.Namespace, inv: Invocation) -> int:
    app = inv.app
    if args.remote is None:
        return _show_link(app, inv)
    token = _read_token(args, inv)
    result = knowledge_pool.link_pool(app, app.store_root, args.remote, token, inv.cwd)
    lines = [f"linked {result.remote} ({result.provider}) for projectKey {result.project_key}"]
    if result.token_stored:
        lines.append(f"token stored in the credential store under {result.project_key} (mode 0600)")
    if result.previous:
        lines.append(
            f"replaced {result.previous}"
            + ("; its mirror was removed (the store is the truth)" if result.mirror_removed else "")
        )
    lines.append(f"config: {result.config_file}")
    lines.append(
        "next: `chapters sync` publishes this workspace's chapters and fetches the others'"
    )
    inv.emit(result.to_json(), "\n".join(lines))
    return 0


def _show_link(app: App, inv: Invocation) -> int:
    status = knowledge_pool.pool_status(app)
    report = status.state.report
    upstream = (
        f"{status.remote} ({status.provider or 'no provider'})"
        if status.remote
        else "none (local-only); `chapters link <path>` or `chapters link <https-url> < token-file`"
    )
    mirror_state = "present" if status.mirror_present else "not yet cloned"
    if report and report.head:
        mirror_state += f", head {report.head[:12]}"
    rows = [
        ("upstream", upstream),
        ("projectKey", f"{status.project_key} ({status.derivation}: {status.canonical})"),
        ("mirror", f"{display_path(status.mirror, app.workspace)} ({mirror_state})"),
        ("sync", f"{report.at} {report.line()}" if report else "never synced"),
        ("pending", f"{status.pending} file(s) not yet in the pool"),
        ("harness id", status.harness_id),
    ]
    if status.refusal:
        rows.insert(1, ("refused", status.refusal))
    if status.state.push_due_at:
        rows.append(("push due", f"{status.state.push_due_at} (syncDebounceMs)"))
    width = max(len(k) for k, _ in rows)
    inv.emit(status.to_json(), fold("\n".join(f"{k.ljust(width)}  {v}" for k, v in rows)))
    return 0


# ---------------------------------------------------------------------------------------------
# chapters sync


def run_sync(args: argparse.Namespace, inv: Invocation) -> int:
    app = inv.app
    mode = SyncMode.PULL if args.pull else SyncMode.PUSH if args.push else SyncMode.FULL
    report = knowledge_pool.run_sync(app, mode)
    inv.emit(report.to_json(), fold(report.line()))
    if report.ok:
        return 0
    hint = knowledge_pool.NEXT_STEP.get(
        report.failure_code, "run `chapters link` to check the pool"
    )
    inv.stderr.write(
        f"chapters: sync degraded to local-only ({report.failure_code}); "
        f"{report.pending} file(s) pending\n  next: {hint}\n"
    )
    return 1


# ---------------------------------------------------------------------------------------------
# chapters list --pool (the `list` parser is the archive family's; it dispatches here)


def run_list_pool(args: argparse.Namespace, inv: Invocation) -> int:
    app = inv.app
    mirror = next((r for r in app.read_roots() if r.mirror_layout), None)
    chapters = pool_chapters(
        app.mirror_tree, app.identity.project_key,
        served=None if mirror is None else lambda p: not mirror.withheld_reason(p))
    data = [
        {
            "path": f"{MIRROR_DIRNAME}/{c.path}",
            "sessionId": c.session_id,
            "harnessId": c.harness_id,
            "title": c.title,
            "date": c.date,
        }
        for c in chapters
    ]
    if not chapters:
        text = (
            "the mirror holds no chapters of this project yet; run `chapters sync`"
            if app.config.knowledge_remote
            else "no pool linked (local-only); run `chapters link <path>` then `chapters sync`"
        )
    else:
        width = max(len(c.harness_id) for c in chapters)
        machines = len({c.harness_id for c in chapters})
        rows = [
            clip(f"{c.harness_id.ljust(width)}  {c.session_id[:8]}  "
                 f"{c.path.rsplit('/', 1)[-1].split('-', 1)[0]}  {c.title}")
            for c in chapters
        ]
        rows.append(
            f"{len(chapters)} chapter(s) from {machines} machine(s) in {app.mirror_tree.root}"
        )
        text = "\n".join(rows)
    inv.emit(data, text)
    return 0


def register(subparsers: Any, common: argparse.ArgumentParser) -> None:
    link = subparsers.add_parser(
        "link",
        parents=[common],
        help="show or bind the project's knowledge pool",
        description="Without arguments: the upstream, projectKey, mirror, sync state, pending "
        "count and harness id. With a path: bind a local-path pool (a bare git "
        "repository, created by the first sync). With an https URL: bind a network pool; its "
        f"token comes from {TOKEN_ENV}, else from stdin (piped, or typed unechoed at a "
        "prompt), and goes to the credential store, 0600.",
    )
    link.add_argument(
        "remote", nargs="?", help="a local path, an https:// URL or treedx+<url>/<repo>"
    )
    link.add_argument("token", nargs="?",
                      help=f"the pool's token; better left out (read from {TOKEN_ENV} or "
                           "stdin), since an argument is visible to every process")
    link.set_defaults(run=run_link)

    sync = subparsers.add_parser(
        "sync",
        parents=[common],
        help="pull, publish and push the knowledge pool now",
        description="Pull (fast-forward only), copy other machines' files in, publish this "
        "machine's new files, commit and push. Failures degrade to local-only "
        "(exit 1) and never touch the archive.",
    )
    which = sync.add_mutually_exclusive_group()
    which.add_argument("--pull", action="store_true", help="only pull and copy in")
    which.add_argument("--push", action="store_true", help="only publish and push")
    sync.set_defaults(run=run_sync)
