"""`chapters mcp`, `hook`, `install` and `uninstall`: the archive inside the agents people run
(issue #8).

`mcp` serves the five tools over stdio; `hook` is Claude Code's SessionStart / PreCompact /
SessionEnd entry point (it always exits 0: a hook never breaks the agent); `install` and
`uninstall` edit Claude Code's and Codex's own configuration, idempotently, never clobbering
another tool's entries, and print every file they changed.
"""

from __future__ import annotations

import argparse
import math
import os
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dsh_chapters_core.errors import ChaptersError, UsageError

from dsh_chapters.app import App
from dsh_chapters.commands.invocation import Invocation
from dsh_chapters.hooks import HookPayload, after_archive, run_hook, safe_message
from dsh_chapters.present import display_path, error_text, fold
from dsh_chapters.services.agents import AppArchive, project_line

if TYPE_CHECKING:
    from dsh_chapters.services.importing import ImportResult

AGENTS = ("claude-code", "codex", "dsh")
# Agents whose MCP configuration is one JSON file (pi and aider read none: install says so).
MCP_CONFIG_AGENTS = ("gemini-cli", "opencode", "pi", "cursor", "copilot-cli", "aider")
INSTALL_AGENTS = (*AGENTS, *MCP_CONFIG_AGENTS)
# The scope an agent's install takes when none is named: its user file, where that is the one
# the agent's own docs point to.
DEFAULT_SCOPES = {"copilot-cli": "user"}
SCOPES = ("project", "local", "user")
# What the committed project-scope files run: the `chapters` on each teammate's PATH (README,
# "chapters on your PATH"), never this machine's absolute path, which breaks everyone else's.
PORTABLE_COMMAND = ("chapters",)
# Claude Code's own kill switch sits past the hook's budget, so our watchdog always speaks first.
CLAUDE_TIMEOUT_MARGIN_S = 10
SCRIPT_NAMES = ("chapters", "chapters.exe")

MCP_INSTRUCTIONS = (
    "dsh-chapters keeps this project's past agent sessions as verbatim chapters, shared by "
    "every machine of the project. Before redoing work, call chapters_search with a few words; "
    "open a hit with chapters_read {{path}}. Rules in effect: chapters_rules. {project}"
)


# ---------------------------------------------------------------------------------------------
# chapters mcp


def run_mcp(args: argparse.Namespace, inv: Invocation) -> int:
    archive = AppArchive(lambda: inv.app)  # composed once, on first use
    try:
        app = inv.app
        project = project_line(app)
        serve = app.factories.serve_mcp
    except ChaptersError as exc:  # a broken config must not keep the tools away: each says why
        project = f"(the project could not be read: {exc.message})"
        from dsh_chapters.bootstrap import FACTORIES  # the server itself needs no project

        serve = FACTORIES.serve_mcp
    serve(archive, MCP_INSTRUCTIONS.format(project=project))
    return 0


# ---------------------------------------------------------------------------------------------
# chapters hook


def run_hook_command(args: argparse.Namespace, inv: Invocation) -> int:
    if args.after_archive:  # the background half of PreCompact (hooks.pre_compact starts it)
        app: App | None = None
        try:
            app = inv.app
            after_archive(app)
        except Exception as exc:  # a background job reports to its log, and ends
            inv.stderr.write(f"chapters hook --after-archive: {safe_message(app, exc)}\n")
        return 0
    isatty = getattr(inv.stdin, "isatty", None)
    if isatty is not None and isatty():
        raise UsageError("`chapters hook` reads a Claude Code hook payload (JSON) on stdin",
                         hint="`chapters install claude-code` wires it into Claude Code")
    try:
        payload = HookPayload.parse(inv.stdin.read(), harness=args.agent)
    except ChaptersError as exc:
        inv.stderr.write(f"chapters hook: {error_text(exc)}\n")
        return 0  # never break the agent, not even over a payload we cannot read
    cwd = Path(payload.cwd) if payload.cwd and Path(payload.cwd).is_dir() else inv.cwd
    try:
        app = inv.app if cwd == inv.cwd else inv.compose(cwd, inv.env)
    except Exception as exc:
        inv.stderr.write(f"chapters hook: {payload.event} skipped: {safe_message(None, exc)}\n")
        return 0
    inv.stdout.write(run_hook(app, payload).output)
    inv.stdout.flush()
    return 0


# ---------------------------------------------------------------------------------------------
# chapters install / uninstall


def chapters_command(scope: str = "user") -> tuple[str, ...]:
    """The argv that runs `chapters`. In files a team commits (the project scope): `chapters`,
    found on each machine's PATH. In this machine's own files (user and local scopes, DSH's and
    Codex's user config): the script beside this Python, else `python -m`, by absolute path, so
    the hooks run without a shell PATH."""
    if scope == "project":
        return PORTABLE_COMMAND
    here = Path(sys.executable).parent
    for name in SCRIPT_NAMES:
        script = here / name
        if script.is_file():
            return (str(script.absolute()),)
    return (str(Path(sys.executable).absolute()), "-m", "dsh_chapters")


def _home(inv: Invocation) -> Path:
    return Path(inv.env["HOME"]) if inv.env.get("HOME") else Path.home()


def codex_home(inv: Invocation) -> Path:
    """CODEX_HOME, else ~/.codex (where Codex keeps config.toml)."""
    return Path(inv.env["CODEX_HOME"]) if inv.env.get("CODEX_HOME") else _home(inv) / ".codex"


def dsh_home(inv: Invocation) -> Path:
    """DSH_HOME, else ~/.dsh (where DSH keeps cordis.patch.yml and its sessions)."""
    return Path(inv.env["DSH_HOME"]) if inv.env.get("DSH_HOME") else _home(inv) / ".dsh"


DSH_STEPS = ["next: start a new DSH session: its tools include mcp__dsh-chapters__*; DSH runs no "
             "command at compaction or session end, so archive with `chapters import dsh` "
             "(docs/agents.md)"]


def claude_config_dir(inv: Invocation) -> Path | None:
    """CLAUDE_CONFIG_DIR when set: Claude Code keeps its user settings and servers in it."""
    return Path(inv.env["CLAUDE_CONFIG_DIR"]) if inv.env.get("CLAUDE_CONFIG_DIR") else None


def _installer(app: App, scope: str = "user") -> Any:
    timeout = math.ceil(app.config.hook_timeout_ms / 1000) + CLAUDE_TIMEOUT_MARGIN_S
    return app.factories.installer(app, chapters_command(scope), timeout)


def _path_warning(inv: Invocation) -> list[str]:
    """Project-scope entries run `chapters` from the PATH: say so when this machine has none."""
    found = shutil.which(PORTABLE_COMMAND[0], path=inv.env.get("PATH", os.defpath))
    if found is not None:
        return []
    return ["warning: `chapters` is not on this machine's PATH, so these hooks and the server "
            "cannot start here yet: put it there (README: pipx install or uv tool install), or "
            "run `chapters install claude-code --scope local`, which names this machine's "
            "`chapters` by its full path in files git does not track"]


def _scope(args: argparse.Namespace) -> str:
    if args.agent == "dsh":
        if args.scope is not None:
            raise UsageError(f"--scope {args.scope}: DSH has one cordis.patch.yml per user "
                             "(DSH_HOME or ~/.dsh)", hint="run `chapters install dsh`")
        return "user"
    if args.agent == "codex":
        if args.scope is not None:
            raise UsageError(f"--scope {args.scope}: Codex has one config.toml per user "
                             "(CODEX_HOME or ~/.codex)", hint="run `chapters install codex`")
        return "user"
    return str(args.scope or "project")


def _emit_changes(inv: Invocation, verb: str, agent: str, scope: str,
                  changes: Sequence[Any], next_steps: Sequence[str],
                  imported: ImportResult | None = None) -> None:
    rows = [{"path": c.path, "action": c.action, "detail": c.detail, "backup": c.backup}
            for c in changes]
    changed = sum(1 for c in changes if c.action != "unchanged")
    app = inv.app

    def shown(path: str) -> str:
        return display_path(path, app.workspace, _home(inv))

    lines = [f"{c.action:9} {shown(c.path)}: {c.detail}"
             + (f" (backup: {shown(c.backup)})" if c.backup else "") for c in changes]
    lines.append(f"{verb} {agent} ({scope}): {changed} of {len(changes)} file(s) changed")
    data: dict[str, Any] = {"agent": agent, "scope": scope, "changed": changed, "files": rows}
    if imported is not None:
        from dsh_chapters.commands.archive import import_json  # the install's import only

        data["import"] = import_json(imported)
        lines.extend(_import_summary(inv, imported))
    lines.extend(next_steps)
    inv.emit(data, fold("\n".join(lines)))


def _import_summary(inv: Invocation, result: ImportResult) -> list[str]:
    """What the install's import archived: the totals, never each session's report."""
    if not result.files:
        return [f"imported no {result.harness} session: none of this project under "
                f"{display_path(result.where, inv.app.workspace, _home(inv))} yet"]
    from dsh_chapters.commands.archive import import_lines

    return import_lines(inv.app, result, reports=False)


def _import_existing(args: argparse.Namespace, inv: Invocation) -> ImportResult | None:
    """History already on disk, archived now: Claude Code deletes transcripts older than
    cleanupPeriodDays (30 by default), and a hook only sees the sessions after install."""
    if args.no_import:
        return None
    # Imported here: the hooks this family also runs (a session's start) never import.
    from dsh_chapters.services.importing import import_sessions

    try:
        return import_sessions(inv.app, args.agent)
    except ChaptersError as exc:  # the install stands; the import says why it did not run
        inv.stderr.write(f"chapters: the import after install stopped: {error_text(exc)}\n")
        return None


def _mcp_config(args: argparse.Namespace, inv: Invocation, verb: str) -> int:
    """`install`/`uninstall` gemini-cli|opencode|cursor|copilot-cli (pi, aider: none): the MCP
    server in the agent's JSON configuration."""
    if args.agent != "codex" and getattr(args, "enable_hooks", False):
        raise UsageError(f"--enable-hooks is for Codex; {args.agent} runs no hook of ours",
                         hint=f"run `chapters {verb} {args.agent}`")
    scope = str(args.scope or DEFAULT_SCOPES.get(args.agent, "project"))
    if scope == "local":
        raise UsageError(f"--scope local is Claude Code's; {args.agent} has project and user "
                         "configuration", hint=f"run `chapters {verb} {args.agent}`")
    app = inv.app
    # project scope: files a team commits, so the PATH's `chapters`, as for Claude Code
    installer = app.factories.mcp_config_installer(app, chapters_command(scope))
    run = installer.install if verb == "install" else installer.uninstall
    changes = run(args.agent, scope, app.workspace, _home(inv), inv.env)
    if verb == "install":
        steps = [*(_path_warning(inv) if scope == "project" else []),
                 f"next: restart {args.agent} to load the server; `chapters watch` archives "
                 "its sessions as they are written"]
        _emit_changes(inv, "installed", args.agent, scope, changes, steps,
                      _import_existing(args, inv))
    else:
        _emit_changes(inv, "uninstalled", args.agent, scope, changes,
                      ["the archive itself (.dsh-chapters/) is untouched"])
    return 0


def run_install(args: argparse.Namespace, inv: Invocation) -> int:
    if args.agent in MCP_CONFIG_AGENTS:
        return _mcp_config(args, inv, "install")
    scope = _scope(args)
    app = inv.app
    if args.agent == "dsh":
        changes = app.factories.dsh_installer(app, chapters_command()).install(dsh_home(inv))
        _emit_changes(inv, "installed", args.agent, scope, changes, DSH_STEPS,
                      _import_existing(args, inv))
        return 0
    installer = _installer(app, scope)
    if args.agent == "codex":
        changes = installer.install_codex(codex_home(inv), enable_hooks=args.enable_hooks)
        steps = ["next: restart Codex (it may ask you to review the new hooks in /hooks); "
                 "`chapters watch` archives its sessions as they are written"]
    else:
        if args.enable_hooks:
            raise UsageError("--enable-hooks is for Codex, whose hooks sit behind a feature "
                             "flag; Claude Code runs its hooks as installed",
                             hint="run `chapters install codex --enable-hooks`")
        changes = installer.install_claude(scope, app.workspace, _home(inv),
                                           claude_config_dir(inv))
        if scope == "local":
            app.factories.exclude_from_git(app.workspace, [".claude/settings.local.json"])
        steps = ["next: restart Claude Code (or /hooks and /mcp); `chapters link <pool>` shares "
                 "the archive"]
        if scope == "project":
            steps = [*_path_warning(inv), *steps]
    _emit_changes(inv, "installed", args.agent, scope, changes, steps,
                  _import_existing(args, inv))
    return 0


def run_uninstall(args: argparse.Namespace, inv: Invocation) -> int:
    if args.agent in MCP_CONFIG_AGENTS:
        return _mcp_config(args, inv, "uninstall")
    scope = _scope(args)
    app = inv.app
    installer = _installer(app, scope)
    if args.agent == "dsh":
        changes = app.factories.dsh_installer(app, chapters_command()).uninstall(dsh_home(inv))
    elif args.agent == "codex":
        changes = installer.uninstall_codex(codex_home(inv))
    else:
        changes = installer.uninstall_claude(scope, app.workspace, _home(inv),
                                             claude_config_dir(inv))
    _emit_changes(inv, "uninstalled", args.agent, scope, changes,
                  ["the archive itself (.dsh-chapters/) is untouched"])
    return 0


def register(subparsers: Any, common: argparse.ArgumentParser) -> None:
    mcp = subparsers.add_parser(
        "mcp", parents=[common], help="run the MCP server on stdio (for agents)",
        description="Serve chapters_search, chapters_read, chapters_artifact, chapters_rules and "
                    "chapters_rule_propose over stdio. An agent starts it; it calls no model and "
                    "writes nothing but rule proposals (and search's derived index).")
    mcp.set_defaults(run=run_mcp)

    hook = subparsers.add_parser(
        "hook", parents=[common], help="Claude Code's hook entry point (payload on stdin)",
        description="Read a Claude Code hook payload on stdin. SessionStart: pull (bounded by "
                    "sessionStartPullTimeoutMs) and print the notice for the session's context; "
                    "PreCompact: archive, then schedule the push; SessionEnd: archive and push. "
                    "Bounded by hookTimeoutMs; always exits 0.")
    hook.add_argument("--after-archive", action="store_true", help=argparse.SUPPRESS)
    hook.add_argument("--agent", choices=AGENTS, default="claude-code", metavar="|".join(AGENTS),
                      help="whose hook payload this is (default claude-code; `chapters install "
                           "codex` writes --agent codex for Codex's SessionStart and Stop)")
    hook.set_defaults(run=run_hook_command)

    for verb, run, what in (("install", run_install, "wire dsh-chapters into an agent"),
                            ("uninstall", run_uninstall, "remove exactly what install added")):
        parser = subparsers.add_parser(
            verb, parents=[common], help=what,
            description="claude-code: the SessionStart, PreCompact and SessionEnd hooks in "
                        "settings.json and the MCP server in .mcp.json (project) or "
                        "~/.claude.json (user; $CLAUDE_CONFIG_DIR when set). codex: the MCP "
                        "server and the SessionStart and Stop hooks in $CODEX_HOME/config.toml; "
                        "the hooks flag only with --enable-hooks. "
                        "dsh: a @deepseek-ai/dsh-mcp-client row in $DSH_HOME/cordis.patch.yml. "
                        "gemini-cli: the MCP server in .gemini/settings.json (project) or "
                        "~/.gemini/settings.json (user). opencode: the MCP server in "
                        "opencode.json (project) or ~/.config/opencode/opencode.json (user). "
                        "pi reads no MCP configuration: nothing to install. "
                        "cursor: the MCP server in .cursor/mcp.json (project) or "
                        "~/.cursor/mcp.json (user). copilot-cli: the MCP server in "
                        "$COPILOT_HOME/mcp-config.json (user; ~/.copilot) or .github/mcp.json "
                        "(project). aider reads no MCP configuration. "
                        "A backup is written before the first change; other entries are kept.")
        parser.add_argument("agent", choices=INSTALL_AGENTS, metavar="|".join(INSTALL_AGENTS),
                            help="which agent")
        parser.add_argument("--scope", choices=SCOPES, default=None,
                            help="project (files a team commits, which run `chapters` from "
                                 "the PATH; the default but for copilot-cli), local "
                                 "(claude-code only: .claude/settings.local.json and your "
                                 "~/.claude.json, this machine's full path) or user (your own "
                                 "files, every project of yours; copilot-cli's default)")
        if verb == "install":
            parser.add_argument("--no-import", action="store_true",
                                help="do not import this project's existing sessions now")
            parser.add_argument("--enable-hooks", action="store_true",
                                help="codex only: also turn on Codex's hooks feature flag "
                                     "([features] hooks = true) in config.toml")
        parser.set_defaults(run=run)
