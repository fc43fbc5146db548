"""`chapters enrich run|report|model` (issue #9, §6): model enrichment, off the critical path.

`run` drains the queue now (progress per chapter); `--all` first queues every chapter this
machine wrote, to re-annotate with a newer model or vocabulary (current ones are skipped
without a call). `report` lists per chapter the last action and its provenance. `model` sets
the route durably on this machine (`.dsh-chapters/state/enrich-model.json`), with an optional
key read from stdin into the credential store (0600 under DSH_HOME, never echoed).
"""

from __future__ import annotations

import argparse
from typing import Any

from dsh_chapters_core.enrich.outcome import ChapterOutcome, EnrichAction
from dsh_chapters_core.enrich.queue import (
    MODEL_STATE_PATH,
    DrainCause,
    read_model_override,
    read_state,
    write_model_override,
)
from dsh_chapters_core.enrich.run import DrainReport, enqueue_own_chapters, enrichment_report
from dsh_chapters_core.errors import ChaptersError, UsageError

from dsh_chapters.app import App
from dsh_chapters.commands.invocation import Invocation
from dsh_chapters.present import fold
from dsh_chapters.services import enrich as enrichment
from dsh_chapters.services.library import chapter_ids

CLEAR = "clear"


def _outcome_line(index: int, total: int, outcome: ChapterOutcome) -> str:
    calls = f", {outcome.calls} call(s)" if outcome.calls else ""
    detail = f": {outcome.detail}" if outcome.detail and outcome.action is not \
        EnrichAction.ENRICHED else ""
    return (f"[{index}/{total}] {outcome.action:<8} .dsh-chapters/{outcome.path} "
            f"({outcome.reason}{calls}){detail}")


# ---------------------------------------------------------------------------------------------
# chapters enrich run [--all] [--auto after-push|idle]


def run_enrich(args: argparse.Namespace, inv: Invocation) -> int:
    app = inv.app
    if args.auto:
        return _run_auto(app, DrainCause(args.auto), inv)
    if not app.config.enrichment_enabled:
        inv.emit({"ran": False, "reason": "enrichmentEnabled is false", "outcomes": []},
                 "enrichment is off (enrichmentEnabled = false): nothing was queued or sent")
        return 0
    route = enrichment.route_of(app)
    if not route.configured:
        raise ChaptersError(
            f"no enrichment model is configured ({len(read_state(app.store_tree).queued)} "
            "chapter(s) queued)",
            hint="run `chapters enrich model <provider/model>` (e.g. ollama/qwen3:8b) or set "
                 "enrichmentModel in .dsh-chapters/config.toml")
    added = 0
    if args.all:
        added = enqueue_own_chapters(store=app.store, store_tree=app.store_tree, lock=app.lock,
                                     clock=app.clock, config=app.config,
                                     harness_id=app.harness_id)

    def progress(index: int, total: int, outcome: ChapterOutcome) -> None:
        if not inv.json:
            inv.stdout.write(_outcome_line(index, total, outcome) + "\n")
            inv.stdout.flush()

    report = enrichment.run_drain(app, DrainCause.MANUAL, progress)
    data = {**report.to_json(), "queuedByAll": added}
    inv.emit(data, _summary_text(report, added))
    failed = [o for o in report.outcomes if o.server_failed]
    if failed:
        summary = report.summary
        left = summary.left if summary else 0
        raise ChaptersError(
            f"the model server failed ({failed[0].reason}: {failed[0].detail}); "
            f"{left} chapter(s) stay queued, their deterministic values kept",
            hint=f"check that {route.base_url or route.route} answers, then run "
                 "`chapters enrich run` again")
    return 0


def _summary_text(report: DrainReport, added: int) -> str:
    lines = []
    if added:
        lines.append(f"queued {added} chapter(s) of this machine (--all)")
    if not report.decision.run:
        lines.append(f"nothing to do: {report.decision.reason}")
    elif report.summary is not None:
        s = report.summary
        lines.append(f"enrich run ({s.model}): {s.enriched} enriched, {s.fallback} fallback, "
                     f"{s.skipped} skipped, {s.refused} refused"
                     + (f", {s.deferred} deferred" if s.deferred else "")
                     + f"; {s.calls} model call(s); {s.left} still queued")
    return "\n".join(lines)


def _run_auto(app: App, cause: DrainCause, inv: Invocation) -> int:
    """The background drain an archive starts: quiet, logged, exit 0 whatever happens."""
    def progress(index: int, total: int, outcome: ChapterOutcome) -> None:
        inv.stdout.write(f"{app.clock.now()} {cause} " + _outcome_line(index, total, outcome)
                         + "\n")
        inv.stdout.flush()

    if cause is DrainCause.IDLE:
        reports = enrichment.idle_drain(app, progress=progress)
    else:
        reports = [enrichment.run_drain(app, cause, progress)]
    for report in reports:
        inv.stdout.write(f"{app.clock.now()} {cause} {_summary_text(report, 0)}\n")
    return 0


# ---------------------------------------------------------------------------------------------
# chapters enrich report


def run_report(args: argparse.Namespace, inv: Invocation) -> int:
    app = inv.app
    rows = enrichment_report(store=app.store, store_tree=app.store_tree,
                             harness_id=app.harness_id)
    state = read_state(app.store_tree)
    counts: dict[str, int] = {}
    for row in rows:
        counts[row.status] = counts.get(row.status, 0) + 1
    data = {"chapters": [r.to_json() for r in rows], "counts": counts,
            "queued": list(state.queued),
            "lastRun": state.last_run.to_json() if state.last_run else None,
            **enrichment.queue_summary(app)}
    lines = []
    ids = chapter_ids(app)
    for row in rows:
        outcome = row.outcome
        why = f" ({outcome.reason}{': ' + outcome.detail if outcome.detail else ''})" \
            if outcome and outcome.action is not EnrichAction.ENRICHED else ""
        name = ids.get(row.path, f".dsh-chapters/{row.path}")
        lines.append(f"{name:<12} {row.status:<12} {row.values_by:<28}{why}")
    total = ", ".join(f"{n} {status}" for status, n in sorted(counts.items())) or "no chapters"
    lines.append(f"{len(rows)} chapter(s): {total}; {len(state.queued)} queued")
    lines.extend(enrichment.status_lines(app))
    inv.emit(data, fold("\n".join(lines)))
    return 0


# ---------------------------------------------------------------------------------------------
# chapters enrich model [<provider/model>|clear] [--base-url URL] [--key-stdin]


def _model_data(app: App) -> dict[str, Any]:
    route = enrichment.route_of(app)
    key_name = app.factories.model_key_name(route.route) if route.configured else ""
    return {"model": route.route, "baseUrl": route.base_url, "origin": route.origin,
            "keyStored": bool(key_name and app.credentials.read(key_name) is not None),
            "stateFile": f".dsh-chapters/{MODEL_STATE_PATH}"}


def _model_text(data: dict[str, Any]) -> str:
    if not data["model"]:
        return ("enrichment model: none (set enrichmentModel, or run "
                "`chapters enrich model <provider/model>`)")
    base = data["baseUrl"] or "the provider's default URL"
    key = "a key is stored (0600)" if data["keyStored"] else "no key stored"
    return f"enrichment model: {data['model']} at {base} ({data['origin']}; {key})"


def run_model(args: argparse.Namespace, inv: Invocation) -> int:
    app = inv.app
    if args.route is None:
        if args.key_stdin or args.base_url:
            raise UsageError("--key-stdin and --base-url go with a route",
                             hint="chapters enrich model <provider/model> --key-stdin")
        data = _model_data(app)
        inv.emit(data, _model_text(data))
        return 0
    with app.lock.hold(app.config.lock_timeout_ms / 1000):
        if args.route == CLEAR:
            previous = read_model_override(app.store_tree).get("model", "")
            if previous:
                app.credentials.delete(app.factories.model_key_name(previous))
            write_model_override(app.store_tree, "", "")
            data = {**_model_data(app), "cleared": previous}
            inv.emit(data, (f"cleared the override {previous}; " if previous else
                            "no override was set; ") + _model_text(data))
            return 0
        # Refuses a route that names no base URL, before anything is stored.
        app.factories.model_base_url(args.route,
                                     args.base_url or app.config.enrichment_base_url)
        if args.key_stdin:
            key = inv.stdin.readline().strip()
            if not key:
                raise UsageError("--key-stdin read an empty line",
                                 hint="echo \"$KEY\" | chapters enrich model <route> --key-stdin")
            app.credentials.write(app.factories.model_key_name(args.route), key)
        write_model_override(app.store_tree, args.route, args.base_url or "")
    data = _model_data(app)
    inv.emit(data, _model_text(data) + "; durable on this machine "
                                       f"(`chapters enrich model {CLEAR}` removes it)")
    return 0


# ---------------------------------------------------------------------------------------------


def register(subparsers: Any, common: argparse.ArgumentParser) -> None:
    enrich = subparsers.add_parser(
        "enrich", parents=[common], help="relabel chapters with a model (off the archive path)",
        description="Relabel archived chapters (title, summary, topics) with a model, after the "
                    "fact: the archive never waits for it, a failing model keeps the "
                    "deterministic values, and the body is never touched.")
    subs = enrich.add_subparsers(dest="enrich_command", metavar="run|report|model", required=True)

    run = subs.add_parser(
        "run", parents=[common], help="drain the enrichment queue now",
        description="Enrich every queued chapter now, one line of progress per chapter. A model "
                    "that answers invalid JSON twice, times out or is down leaves the "
                    "deterministic values; a down server stops the run, the rest stays queued.")
    run.add_argument("--all", action="store_true",
                     help="first queue every chapter this machine wrote (re-annotate with a "
                          "newer model or vocabulary; current chapters are skipped)")
    run.add_argument("--auto", choices=[str(DrainCause.AFTER_PUSH), str(DrainCause.IDLE)],
                     help=argparse.SUPPRESS)  # the background drains an archive starts
    run.set_defaults(run=run_enrich)

    report = subs.add_parser(
        "report", parents=[common], help="per chapter: the last action and its provenance",
        description="Every chapter with its last enrichment action (enriched, fallback, "
                    "skipped, refused; else queued or not-enriched) and who produced its "
                    "current values (provenance, newest first, in --json).")
    report.set_defaults(run=run_report)

    model = subs.add_parser(
        "model", parents=[common], help="show or set the enrichment model (durable here)",
        description="Without an argument, show the route in use. With provider/model (ollama/…, "
                    "llamacpp/…, vllm/…, lmstudio/…, openai/…), override enrichmentModel on "
                    "this machine until `chapters enrich model clear`.")
    model.add_argument("route", nargs="?", metavar="provider/model|clear")
    model.add_argument("--base-url", metavar="URL",
                       help="the OpenAI-compatible base URL (default: the provider's)")
    model.add_argument("--key-stdin", action="store_true",
                       help="read an API key from stdin into the credential store (0600)")
    model.set_defaults(run=run_model)
