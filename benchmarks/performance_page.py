"""`docs/performance.md` and its plot, written from the figures in `benchmarks/results/`.

`benchmarks/run.py` calls `write_page()` after a run (`hatch run bench`); `hatch run bench
--page-only` rewrites the page from the figures already there. matplotlib comes from the
`bench` environment only; it is never a dependency of a package.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
DOCS = HERE.parent / "docs"
PAGE = DOCS / "performance.md"
PLOT = DOCS / "performance" / "search-latency.png"


def _size(n: int) -> str:
    return f"{n // 1000}k" if n >= 1000 and n % 1000 == 0 else str(n)


def _ms(value: float | None) -> str:
    if value is None:
        return "–"
    if value >= 1000:
        return f"{value / 1000:.2f} s"
    return f"{value:.1f} ms" if value < 100 else f"{value:.0f} ms"


def _s(value: float | None) -> str:
    return "–" if value is None else f"{value:.2f} s" if value < 100 else f"{value:.0f} s"


def _x(value: float | None) -> str:
    return "–" if value is None else f"{value:.2f}×" if value < 10 else f"{value:.0f}×"


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{value * 100:.1f}%"


def _mb(value: float | None) -> str:
    return "–" if value is None else f"{value:.0f} MB"


def _verdict_value(row: dict[str, Any]) -> str:
    value = row["value"]
    name = row["target"]
    if value is None:
        return "–"
    if name.startswith("process_p50"):
        return _ms(value)
    if name.startswith("update"):
        return _pct(value)
    if name.startswith("build_peak"):
        return _mb(value)
    ratio = {"process_vs_rg_at_10k": "process ÷ rg", "rg_vs_process_at_100k": "rg ÷ process",
             "inprocess_vs_fts5_at_100k": "ours ÷ FTS5"}.get(name, "")
    return f"{ratio} = {_x(value)}" if ratio else _x(value)


def _state(met: bool | None) -> str:
    return {True: "met", False: "**not met**", None: "not measured"}[met]


def search_section(report: dict[str, Any]) -> list[str]:
    machine = report.get("machine", {})
    results = sorted(report["results"], key=lambda r: r["size"])
    sizes = [_size(r["size"]) for r in results]
    out = [
        "## Search speed",
        "",
        f"Measured {report.get('date', '?')} on the code of commit "
        f"`{report.get('code', '?')}`, with `{report.get('command', '')}`, on "
        f"{machine.get('cpus', '?')} cores (load {machine.get('load_at_start', '?')} at the "
        f"start), Python {machine.get('python', '?')}, SQLite {machine.get('sqlite', '?')}, "
        f"{machine.get('ripgrep') or 'no ripgrep'}."
        + (f" Note: {report['note']}." if report.get("note") else ""),
        "",
        "Each corpus is generated from a seed: chapters laid out as `chapters archive` writes "
        "them, as long as real ones (sizes drawn from a log-normal with the real haystack's "
        "median of 17 KB, p90 about 61 KB, cut at 360 KB; the mean body is in the table), "
        "with turns holding tool output, file paths, shell commands, error messages with "
        "numbers, stack traces, camelCase and snake_case identifiers, and rare identifiers "
        "that only a few chapters hold, plus 1% rules. The queries are typed the way a "
        "developer asks a week later: questions, identifiers, error names with status codes, "
        "paths, commands, rare identifiers. The real sessions' figures are in the next "
        "section.",
        "",
        "- **`chapters search <q> --json` as a process**: the installed entry point in a "
        "subprocess, cwd the workspace, the index already current; wall time of the process.",
        "- **Bytecode, as installed**: the workspace's sources are byte-compiled "
        "(`python -m compileall`) before the processes are timed, and each runs without "
        "`PYTHONDONTWRITEBYTECODE`, so it loads `.pyc` files instead of recompiling its modules.",
        "- **`rg -il`**: `rg -i -l -e <word>…` over the same chapter files, run right after "
        "each `chapters search`, so both see the same machine load.",
        "- **In-process**: our `SearchService.search` (from the composition root), and an "
        "SQLite FTS5 `bm25()` query over the same text (title, summary, topics, body; the "
        "query's words OR-ed; top 20), query by query in one process.",
        "- **Full rebuild**: `chapters index --rebuild`, timed inside its own process; its peak "
        "RSS is the kernel's `ru_maxrss` of that process.",
        "- **Update after archiving one chapter**: `chapters archive` of a one-chapter session "
        "plus the next `chapters search`, minus a search on an index that was already current. "
        "The archive's own work is counted too, so this is an upper bound.",
        "",
        "The queries of this run (the first ones also run as processes and with `rg`): "
        + ", ".join(f"`{q}`" for q in (results[-1].get("queries") or [])) + ".",
        "",
        "### Targets",
        "",
        "| target | measured | |",
        "|---|---|---|",
    ]
    for row in report.get("verdict", []):
        out.append(f"| {row['text']} | {_verdict_value(row)} | {_state(row['met'])} |")
    head = "| | " + " | ".join(sizes) + " |"
    rule = "|---|" + "---|" * len(sizes)

    def line(label: str, fn: Callable[[dict[str, Any]], str]) -> str:
        cells = []
        for r in results:
            try:
                cells.append(fn(r))
            except (KeyError, TypeError, ZeroDivisionError):
                cells.append("–")
        return f"| {label} | " + " | ".join(cells) + " |"

    out += [
        "",
        "### Latency by corpus size",
        "",
        f"![Search latency against corpus size, log-log](performance/{PLOT.name})",
        "",
        head,
        rule,
        line("chapters (MB on disk; mean body)",
             lambda r: f"{r['documents']:,} ({r['corpus_mb']:.0f} MB; "
                       f"{r['body_bytes_mean'] / 1024:.1f} KB)"),
        line("`chapters search --json` process, median (p90)",
             lambda r: f"{_ms(r['process_p50_ms'])} ({_ms(r['process_p90_ms'])})"),
        line("`rg -il`, median (p90)",
             lambda r: f"{_ms(r['rg_p50_ms'])} ({_ms(r['rg_p90_ms'])})"),
        line("process ÷ `rg -il`", lambda r: _x(r["ratio_process_vs_rg"])),
        line("in-process `SearchService.search`, median (p90)",
             lambda r: f"{_ms(r['inprocess_p50_ms'])} ({_ms(r['inprocess_p90_ms'])})"),
        line("FTS5 `bm25()` top 20, median (p90)",
             lambda r: f"{_ms(r['fts5_p50_ms'])} ({_ms(r['fts5_p90_ms'])})"),
        line("in-process ÷ FTS5", lambda r: _x(r["ratio_inprocess_vs_fts5"])),
        line("matches per query, median (queries with none)",
             lambda r: f"{r['matches_median']:,.0f} ({r['no_match_queries']})"),
        line("samples: processes; in-process",
             lambda r: f"{r['process_queries']}; {r['inprocess_samples']}"),
        line("full rebuild (`chapters index --rebuild`)", lambda r: _s(r["rebuild_s"])),
        line("full rebuild peak RSS", lambda r: _mb(r["build_peak_rss_mb"])),
        line("update after archiving one chapter", lambda r: _s(r["update_s"])),
        line("… as a share of the full rebuild", lambda r: _pct(r["ratio_update_vs_rebuild"])),
        line("… of which the archive itself (into an empty store)",
             lambda r: f"{_s(r['update_archive_s'])} ({_s(r['archive_into_empty_s'])})"),
        line("`chapters search` process peak RSS", lambda r: _mb(r["process_peak_rss_mb"])),
        line("FTS5 table build (not ours; for scale)", lambda r: _s(r["fts5_build_s"])),
        "",
        "A query loop stops at its time budget (`--budget`, 120 s) once it has 5 samples, so a "
        "slow build cannot stretch the run; the samples row says how many were taken. The "
        "figures are from one run on a shared machine: compare within a column, where the "
        "numbers were measured side by side.",
    ]
    return out


def plot(report: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter

    results = sorted(report["results"], key=lambda r: r["size"])
    targets = [(10_000, 100.0), (100_000, 150.0)]
    ticks = sorted({r["size"] for r in results} | {size for size, _ in targets})
    fig, ax = plt.subplots(figsize=(8, 5.2), dpi=120)
    series = [
        ("process_p50_ms", "chapters search (process)", "o", "-", "#1f77b4"),
        ("inprocess_p50_ms", "our search, in-process", "s", "-", "#2ca02c"),
        ("fts5_p50_ms", "SQLite FTS5 bm25(), in-process", "^", "--", "#9467bd"),
        ("rg_p50_ms", "rg -il (process)", "D", "--", "#d62728"),
    ]
    labels: list[tuple[int, float, str]] = []
    for key, label, marker, style, color in series:
        points = [(r["size"], r[key]) for r in results if r.get(key)]
        if not points:
            continue
        xs, ys = zip(*points, strict=True)
        ax.plot(xs, ys, marker=marker, linestyle=style, color=color, label=label)
        labels += [(x, y, color) for x, y in points]
    for x, y, color in labels:
        # Two values close on the log axis: the larger's label goes above, the smaller's below.
        near = [other for ox, other, _ in labels if ox == x and other != y
                and max(other, y) / min(other, y) < 2.5]
        dy = -3 if not near else (5 if y > max(near) else -11)
        ax.annotate(_ms(y), (x, y), textcoords="offset points", xytext=(7, dy), fontsize=7,
                    color=color)
    ax.plot(*zip(*targets, strict=True), linestyle="none", marker="_", markersize=26,
            markeredgewidth=2.5, color="#1f77b4", alpha=0.45,
            label="process target (100 ms at 10k, 150 ms at 100k)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xticks(ticks)
    ax.set_xticklabels([_size(s) for s in ticks])
    ax.set_xlim(ticks[0] / 1.6, ticks[-1] * 2.2)
    ax.minorticks_off()
    ax.yaxis.set_major_formatter(FuncFormatter(
        lambda v, _: f"{v:g} ms" if v < 1000 else f"{v / 1000:g} s"))
    ax.set_xlabel("chapters in the store")
    ax.set_ylabel("median time per query")
    ax.set_title(f"Search latency against corpus size, log-log\n(code {report.get('code', '?')}, "
                 f"{report.get('date', '')[:10]})", fontsize=11)
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.13), ncol=2, fontsize=8,
              frameon=False)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)


def _get(data: dict[str, Any], *keys: str) -> Any:
    for key in keys:
        data = data[key]
    return data


def _yes(flag: object) -> str:
    return "met" if flag else "**not met**"


# One line of headline figures per other benchmark; the result file holds the rest.
HEADLINES: dict[str, Callable[[dict[str, Any]], str]] = {
    "retrieval": lambda d: (
        f"recall@1 / @3 on {d['chapters']['overall']['n']} real-session questions: ours "
        f"{d['chapters']['overall']['recall@1']:.3f} / {d['chapters']['overall']['recall@3']:.3f}"
        f", FTS5 {d['fts5_bm25']['overall']['recall@1']:.3f} / "
        f"{d['fts5_bm25']['overall']['recall@3']:.3f} (targets ≥ "
        f"{d['targets']['recall_at_1_min']} / ≥ {d['targets']['recall_at_3_min']})"),
    "archive_scaling": lambda d: (
        f"archive into a {d['chapters']:,}-chapter store {d['fullStoreMs']:.0f} ms against "
        f"{d['emptyStoreMs']:.0f} ms into an empty one ({d['ratio']:.2f}×, target "
        f"{d['target']}: {_yes(d['met'])})"),
    "signatures": lambda d: (
        f"turn signature median {d['results']['median_ms']:.2f} ms (target "
        f"{d['results']['target_ms']} ms: {_yes(d['results']['pass'])})"),
    "git_pool": lambda d: "; ".join(
        f"{r['workload']}: dulwich {r['dulwich_median_s']:.2f} s against git "
        f"{r['git_cli_median_s']:.2f} s ({r['ratio']:.2f}×, target ≤ {r['target_ratio']}×: "
        f"{_yes(r['met'])})" for r in d["results"]),
    "treedx_pull": lambda d: (
        f"batched pull {d['speedup_fresh']:.1f}× faster than one request per file fresh, "
        f"{d['speedup_changed']:.0f}× on a change"),
    "enrich_archive": lambda d: (
        f"archive with the enrichment queue {d['ratioToOff']['queue']:.2f}× the time with "
        f"enrichment off (idle waiter {d['ratioToOff']['idle']:.2f}×)"),
    "viewer": lambda d: f"{d['target']}: {_yes(d['pass'])}",
    "watch_idle": lambda d: (
        f"`chapters watch` idle CPU {d['cpuSecondsWhileIdle']} s in {d['idleSeconds']:.0f} s "
        f"(limit {d['cpuLimitSeconds']} s); a turn lands in {d['turnLandedMedianSeconds']} s"),
    "composition_quality": lambda d: (
        f"default chaptering: {_get(d, 'variants')[0]['atDefaultTau']['chapters']} chapters, "
        f"boundary recall {d['variants'][0]['atDefaultTau']['boundaryRecall']}, purity "
        f"{d['variants'][0]['atDefaultTau']['purity']}"),
}


def _met(value: float | None, limit: float, at_least: bool) -> str:
    if value is None:
        return "not measured"
    return _yes(value >= limit if at_least else value <= limit)


def _all_but(differ: int, n: int) -> str:
    return f"all {n:,}" if not differ else f"all but {differ:,} of {n:,}"


LOCOMO_ORDER = ("single-hop", "temporal", "multi-hop", "open-domain")


def locomo_section(report: dict[str, Any]) -> list[str]:
    """LoCoMo by deja-vu's protocol, our figures beside its published ones."""
    protocol, timing, machine = report["protocol"], report["timing"], report.get("machine", {})
    peer, targets = report["peer"], report["targets"]
    overall = report["overall"]
    from_processes = protocol.get("answers_from") == "processes"
    out = [
        "## LoCoMo: session retrieval beside deja-vu",
        "",
        f"Measured {report.get('at', '?')} on the code of commit `{report.get('code', '?')}`, "
        f"with `{report.get('command', 'python benchmarks/locomo.py')}`, on "
        f"{machine.get('cpus', '?')} cores shared with other "
        f"work (load {machine.get('load_at_start', '?')} at the start, "
        f"{machine.get('load_at_end', '?')} at the end: the times are noisy, the hit rates are "
        "not), Python " + str(machine.get("python", "?")) + ".",
        "",
        "[LoCoMo](https://github.com/snap-research/locomo) (`data/locomo10.zip`) holds 10 long "
        "dialogs between two people, 19 to 32 dated sessions each, and questions whose "
        "evidence names the turns that answer them (`D<session>:<turn>`). The protocol is the "
        "one [deja-vu](https://github.com/vshulcz/deja-vu), the strongest lexical peer, "
        "publishes (its `scripts/locomo/main.go`): each dialog's sessions are written as Claude "
        "Code transcripts, one `Speaker: text` line per turn on the session's own date, speaker "
        "A as the user and speaker B as the assistant; each dialog is imported into a store of "
        "its own with `chapters import claude-code --final`; every question with evidence is "
        f"asked verbatim, `{protocol['command']}`. A question is a hit@k when a session its "
        "evidence names is among the first k distinct sessions the search ranks (each chapter "
        "mapped to its session by its `sessionId`); MRR counts the first such session's rank "
        f"up to {protocol.get('mrr_depth', 20)}. Adversarial questions (category 5) are "
        "counted in the total and shown apart. `benchmarks/locomo.py` says how to get the data "
        "(it is never committed); `hatch run bench:python benchmarks/locomo.py --no-processes` "
        "gives the same hit rates from the in-process answers alone, in about a minute, for a "
        "loop while ranking changes.",
        "",
        f"{protocol['dialogs']} dialog{'' if protocol['dialogs'] == 1 else 's'}, "
        f"{protocol['sessions']} sessions, "
        f"{protocol['turns']:,} turns, {protocol['chapters']:,} chapters; "
        f"{protocol['questions']:,} questions asked"
        + (f" ({protocol['per_dialog_limit']} of each dialog only, spread over its list: a smoke "
              "run)"
           if protocol.get("per_dialog_limit") else "")
        + (f", {protocol['not_asked_without_evidence']} without evidence left out"
           if protocol.get("not_asked_without_evidence") else "")
        + "." + ("" if from_processes else
                 " The hit rates of this run come from the in-process answers (`--no-processes`)"
                 ", which rank as the processes do; no process was timed."),
        "",
        "| | questions | hit@1 | hit@5 | MRR |",
        "|---|---|---|---|---|",
    ]
    def row(label: str, r: dict[str, Any]) -> str:
        return f"| {label} | {r['n']:,} | {r['hit@1']:.3f} | {r['hit@5']:.3f} | {r['mrr']:.3f} |"

    categories = report["categories"]
    out += [row(name, categories[name]) for name in LOCOMO_ORDER if name in categories]
    out += [
        row("all but adversarial", report["without_adversarial"]),
        *([row("adversarial", categories["adversarial"])] if "adversarial" in categories
          else []),
        f"| **all** | **{overall['n']:,}** | **{overall['hit@1']:.3f}** | "
        f"**{overall['hit@5']:.3f}** | **{overall['mrr']:.3f}** |",
        f"| deja-vu {peer['version']}, as published | {peer['questions']:,} | "
        f"{peer['hit@1']:.3f} | {peer['hit@5']:.3f} | {peer['mrr']:.3f} |",
        "",
        "| search time, median (p90) | ours | deja-vu, as published |",
        "|---|---|---|",
        f"| `chapters search --json` as a process | {_ms(timing.get('process_ms_p50'))} "
        f"({_ms(timing.get('process_ms_p90'))}) | – |",
        f"| in process, one composed App (as the MCP server holds it) | "
        f"{_ms(timing.get('in_process_ms_p50'))} ({_ms(timing.get('in_process_ms_p90'))}) | "
        f"about {peer['in_process_ms_p50']:.0f} ms |",
        "",
        f"deja-vu's figures are its own, from its repository ({peer['source']}): version "
        f"{peer['version']}, measured by its author on {peer['machine']}, retrieval only (no "
        "LLM, no embeddings), as ours are. Its search time is in process; ours is given both "
        "ways, on a slower, shared machine.",
    ]
    answer, agreement = report["answer"], report["agreement"]
    differs = agreement.get("in_process_differs")
    out += [
        "",
        f"hit@5 and MRR read each question's whole ranking, as deja-vu reads its first 20 "
        f"hits. The answer at the search's default budget ({answer['budget_tokens']} tokens) "
        f"shows {answer['sessions_mean']} sessions on average (a gold one among them for "
        f"{answer['gold_in_answer']:.3f} of the questions), so each question is asked once more "
        "in process with a budget that holds every chapter, without snippets (they change no "
        f"rank). That ranking began with the answer's own sessions for "
        f"{_all_but(agreement['ranking_differs'], agreement['questions'])} questions"
        + ("" if differs is None else
           "; the in-process answers showed the processes' sessions for "
           f"{_all_but(differs, agreement['questions'])}")
        + ".",
    ]
    out += [
        "",
        "| target | measured | |",
        "|---|---|---|",
        f"| hit@1 ≥ {targets['hit_at_1_min']:.2f} | {overall['hit@1']:.3f} | "
        f"{_met(overall['hit@1'], targets['hit_at_1_min'], True)} |",
        f"| hit@5 ≥ {targets['hit_at_5_min']:.2f} | {overall['hit@5']:.3f} | "
        f"{_met(overall['hit@5'], targets['hit_at_5_min'], True)} |",
        f"| a search process, median ≤ {targets['process_p50_ms_max']:.0f} ms | "
        f"{_ms(timing.get('process_ms_p50'))} | "
        f"{_met(timing.get('process_ms_p50'), targets['process_p50_ms_max'], False)} |",
        f"| in process, median ≤ {targets['in_process_p50_ms_max']:.0f} ms | "
        f"{_ms(timing.get('in_process_ms_p50'))} | "
        f"{_met(timing.get('in_process_ms_p50'), targets['in_process_p50_ms_max'], False)} |",
    ]
    return out


def others_section() -> list[str]:
    out = ["## The other benchmarks", "",
           "Headline figures from the last run of each (its result file has the rest).", "",
           "| benchmark | headline | figures |", "|---|---|---|"]
    for name, headline in HEADLINES.items():
        path = RESULTS / f"{name}.json"
        if not path.exists():
            continue
        try:
            text = headline(json.loads(path.read_text()))
        except (KeyError, IndexError, TypeError, ValueError):
            text = "(its figures have another shape; see the file)"
        out.append(f"| {name} | {text} | [`{name}.json`](../benchmarks/results/{name}.json) |")
    return out


def locomo_lines() -> list[str]:
    path = RESULTS / "locomo.json"
    if not path.exists():
        return []
    try:
        return [*locomo_section(json.loads(path.read_text())), ""]
    except (KeyError, TypeError, ValueError):
        return ["## LoCoMo: session retrieval beside deja-vu", "",
                "(`benchmarks/results/locomo.json` has another shape; rerun "
                "`hatch run bench locomo`)", ""]


def haystack_section() -> list[str]:
    """One store of the real haystack (benchmarks/haystack.py): the figures the search
    issues ask for, per size, next to their targets."""
    path = RESULTS / "haystack.json"
    if not path.exists():
        return []
    data = json.loads(path.read_text())
    sizes = data.get("sizes", {})
    if not sizes:
        return []
    t = data["targets"]
    names = list(sizes)
    machine = data.get("machine", {})
    out = [
        "## Search in one store of real sessions",
        "",
        f"Measured {data.get('at', '')} with `python benchmarks/haystack.py`, on "
        f"{machine.get('cores', '?')} cores (load {machine.get('load', '?')} at the start), "
        f"Python {machine.get('python', '?')}, SQLite {machine.get('sqlite', '?')}.",
        "",
        "Genuine public Claude Code and Codex transcripts (`../shared/eval/haystack.tsv`, "
        "1,260 files, 1.4 GB; never committed) imported into ONE workspace with `chapters "
        "import … --final`, with the four sessions of the question set archived beside them; "
        "then the 65 questions of `../shared/eval/queries.json`, each as a `chapters search` "
        "process (the default budget), in process through one composed App (as the MCP server "
        "holds it), and with `--max-tokens 4000` for recall, next to SQLite FTS5 `bm25()` over "
        "the same chapter files.",
        "",
        "| | " + " | ".join(names) + " | target |",
        "|---|" + "---|" * len(names) + "---|",
    ]

    def row(label: str, fn: Callable[[dict[str, Any]], str], target: str) -> None:
        out.append(f"| {label} | " + " | ".join(fn(sizes[n]) for n in names) + f" | {target} |")

    row("transcripts (MB)", lambda r: f"{r['transcripts']:,} ({r['transcript_mb']:,.0f} MB)", "")
    row("chapters (MB; median, p90, max KB)", lambda r: (
        f"{r['chapters']:,} ({r['chapter_mb']:.0f} MB; {r['chapter_kb']['median']:.0f}, "
        f"{r['chapter_kb']['p90']:.0f}, {r['chapter_kb']['max']:.0f})"), "")
    row("import", lambda r: f"{r['import_mb_per_s']:.1f} MB/s ({r['import_s']:.0f} s)",
        f"≥ {t['import_mb_per_s_min']:.0f} MB/s")
    if all(sizes[n].get("import_by_harness") for n in names):
        for kind in sorted({k for n in names for k in sizes[n]["import_by_harness"]}):
            row(f"… of which `import {kind}`", lambda r, kind=kind: (
                "–" if kind not in r["import_by_harness"] else
                f"{r['import_by_harness'][kind]['mb_per_s']:.1f} MB/s "
                f"({r['import_by_harness'][kind]['mb']:.0f} MB in "
                f"{r['import_by_harness'][kind]['s']:.0f} s)"), "")
    row("import peak RSS", lambda r: _mb(r["import_rss_mb"]), f"≤ {t['build_rss_mb_max']:.0f} MB")
    row("first search after the import", lambda r: _s(r["first_search_s"]) + (
        " (built nothing)" if not r.get("first_search_said") else
        f" ({r['first_search_said']})"), f"≤ {t['first_search_s_max']:.0f} s")
    row("search process p50 / p95", lambda r: (
        f"{_ms(r['process_ms_p50'])} / {_ms(r['process_ms_p95'])}"),
        f"≤ {t['process_p50_ms_max']:.0f} / {t['process_p95_ms_max']:.0f} ms")
    row("in process p50 / p95", lambda r: (
        f"{_ms(r['in_process_ms_p50'])} / {_ms(r['in_process_ms_p95'])}"),
        f"p50 ≤ {t['in_process_p50_ms_max']:.0f} ms")
    row("search process peak RSS", lambda r: _mb(r["search_rss_mb"]),
        f"≤ {t['search_rss_mb_max']:.0f} MB")
    row("search index on disk", lambda r: _mb(r["index_mb"]), "")
    row("recall@1 / @3", lambda r: f"{r['recall_at_1']:.2f} / {r['recall_at_3']:.2f}",
        f"≥ {t['recall_at_1_min']} / ≥ {t['recall_at_3_min']}, above FTS5")
    row("FTS5 `bm25()` recall@1 / @3", lambda r: (
        f"{r['fts5']['recall_at_1']:.2f} / {r['fts5']['recall_at_3']:.2f}"), "")
    if all(sizes[n].get("pool") for n in names):
        def step(name: str) -> Callable[[dict[str, Any]], str]:
            def cell(r: dict[str, Any]) -> str:
                seconds = r["pool"][name]["s"]
                wall = f"{seconds:.1f} s" if seconds < 100 else f"{seconds:,.0f} s"
                return f"{wall}, {_mb(r['pool'][name]['rss_mb'])}"
            return cell

        row("first sync to a local-path pool (time, peak RSS)", step("first_sync"), "")
        if all("status_again" in sizes[n]["pool"] for n in names):
            row("`chapters status` after it: first, then again", lambda r: (
                f"{step('status_first')(r)}; {step('status_again')(r)}"), "")
        row("a second machine's first sync", step("second_machine_sync"), "")
        row("… and its first search", lambda r: step("second_machine_first_search")(r) + (
            " (built nothing)" if not r["pool"]["second_machine_first_search"].get("said")
            else f" ({r['pool']['second_machine_first_search']['said']})"), "")
    if all(sizes[n].get("pool", {}).get("linked_search") for n in names):
        def linked(r: dict[str, Any]) -> dict[str, Any]:
            return dict(r["pool"]["linked_search"])

        row("linked: search process p50 / p95", lambda r: (
            f"{_ms(linked(r)['process_ms_p50'])} / {_ms(linked(r)['process_ms_p95'])}"),
            f"≤ {t['process_p50_ms_max']:.0f} / {t['process_p95_ms_max']:.0f} ms")
        row("linked: recall@1 / @3", lambda r: (
            f"{linked(r)['recall_at_1']:.2f} / {linked(r)['recall_at_3']:.2f} "
            f"(from the {' and '.join(linked(r)['doors'])})"), "")
    return out


def write_page() -> Path:
    search = json.loads((RESULTS / "search.json").read_text())
    lines = [
        "# Performance",
        "",
        "<!-- Written by `hatch run bench` (benchmarks/run.py); edits here are overwritten. -->",
        "",
        "This page is written by `hatch run bench` from the figures in `benchmarks/results/`. "
        "Run every benchmark with `hatch run bench`, one with `hatch run bench search`, a "
        "smoke run with `hatch run bench --quick`, or only rewrite this page from the last "
        "figures with `hatch run bench --page-only`. The search benchmark alone, with its "
        "sizes: `hatch run bench:python benchmarks/search.py --sizes 1000,10000,100000`.",
        "",
        *search_section(search),
        "",
        *haystack_section(),
        "",
        *locomo_lines(),
        *others_section(),
        "",
    ]
    if search.get("results"):
        plot(search, PLOT)
    PAGE.write_text("\n".join(lines))
    return PAGE
