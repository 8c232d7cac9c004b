"""Benchmark outputs: report.md (machine, headline table, a section per case), PNG plots
(:mod:`treecomp.benchmark.plots`) and the raw results.json, all written to one directory
(:func:`write`); plus the terminal summary (:func:`summary`).

``python -m treecomp.benchmark.report DIR`` re-renders report.md and the plots from
DIR/results.json without touching it (how docs/bench is refreshed after a change here).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from .plots import have_matplotlib, plot_caption, write_plots

NO_LIBRARY = "-"


# -- formatting ---------------------------------------------------------------------------------
def fmt_num(v: float | None, unit: str = "") -> str:
    """A figure as the report prints it: 3 significant digits or so, thousands separated,
    "-" for none."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    if v == 0:
        return f"0{unit}"
    if abs(v) >= 1000:
        s = f"{v:,.0f}"
    elif abs(v) >= 100:
        s = f"{v:.0f}"
    elif abs(v) >= 10:
        s = f"{v:.1f}"
    elif abs(v) >= 0.01:
        s = f"{v:.2f}"
    else:
        s = f"{v:.2g}"
    return s + unit


def fmt_ratio(v: float | None) -> str:
    """A speedup as the report prints it: "12x", "3.4x", "0.52x"; "-" for none."""
    if v is None:
        return "-"
    return f"{v:,.0f}x" if v >= 100 else (f"{v:.1f}x" if v >= 1 else f"{v:.2f}x")


def _exact(r: dict) -> str:
    ex = r.get("exact")
    if not ex:
        return "n/a"
    if r.get("bit_exact"):
        return "bit-exact"
    parts = []
    for kind, e in ex.items():
        if e["bit_exact"]:
            continue
        if e.get("mismatches"):
            parts.append(f"{kind}: {e['mismatches']} labels differ")
        elif e.get("max_abs_diff") is not None:
            parts.append(f"{kind}: max diff {e['max_abs_diff']:.3g}" + (f" ({e['note']})" if e.get("note") else ""))
        else:
            parts.append(f"{kind}: {e.get('note', 'differs')}")
    return "no (" + "; ".join(parts) + ")"


def _table(header: list[str], rows: list[list[str]]) -> str:
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(c.replace("|", "/") for c in r) + " |" for r in rows]
    return "\n".join(out)


def _headline_columns(results: dict) -> list[tuple[str, str]]:
    """(name, label) of every non-library strategy that ran somewhere, in report order."""
    seen: dict[str, str] = {}
    for c in results["cases"]:
        for r in c["strategies"]:
            if r["status"] == "ok" and r["group"] != "library" and r["name"] not in seen:
                seen[r["name"]] = r["name"]
    return list(seen.items())


def _library_reference(c: dict) -> bool:
    """Whether a case's exactness reference is its library (a results.json from before the
    "reference" key: whenever it names a library)."""
    ref = c.get("reference")
    return bool(c.get("library")) and (ref is None or ref == c.get("library"))


def _speedup_note(results: dict) -> str:
    """What the headline's (speedup) is over: the library's own predict, the Python walker where
    no library was measured (named, never implied)."""
    lib = [c["name"] for c in results["cases"] if _has_library_figure(c)]
    bare = [c["name"] for c in results["cases"] if not _has_library_figure(c)]
    if not bare:
        return "(speedup) is over the library's own predict at 1 thread."
    why = ("no library was measured (a model file: the library's own predict is timed for a "
           "pickled model object)")
    if not lib:
        return f"(speedup) is over the Python walker at 1 thread: {why}."
    return ("(speedup) is over the library's own predict at 1 thread, and over the Python walker "
            f"for {', '.join(bare)}, where {why}.")


def _has_library_figure(c: dict) -> bool:
    lib = next((r for r in c["strategies"] if r["name"] == "library"), {})
    return lib.get("status") == "ok" and bool(lib.get("ns_per_row_1t"))


def headline(results: dict) -> str:
    """One row per case: the library's ns/row, then each strategy's ns/row and its speedup over
    the library (over the walker where there is no library), 1 thread; and the exactness
    against the case's reference (the library; the treecomp interpreter without one), named
    wherever it is not the library."""
    cols = _headline_columns(results)
    all_lib = all(_library_reference(c) for c in results["cases"])
    header = ["case", "trees", "nodes", "node steps/row", "library ns/row"] \
        + [f"{n} ns/row (speedup)" for _, n in cols] + ["treecomp auto cycles/row (/node step)"] \
        + ["treecomp exact vs library" if all_lib else "treecomp exact vs reference"]
    rows = []
    for c in results["cases"]:
        by = {r["name"]: r for r in c["strategies"]}
        lib = by.get("library", {})
        lib_ns = lib.get("ns_per_row_1t") if lib.get("status") == "ok" else None
        row = [c["name"], str(c.get("n_trees", "-")), fmt_num(c.get("n_nodes")),
               fmt_num(c.get("node_steps_per_row")), fmt_num(lib_ns)]
        for name, _ in cols:
            r = by.get(name)
            if not r or r["status"] != "ok":
                row.append("skipped" if r else "-")
                continue
            sp = r.get("speedup_vs_library") if lib_ns else r.get("speedup_vs_walker")
            row.append(f"{fmt_num(r['ns_per_row_1t'])} ({fmt_ratio(sp)})")
        row.append(_auto_cycles(c))
        tc = [r for r in c["strategies"] if r["group"] == "treecomp" and r["status"] == "ok"]
        vs = "" if all_lib else f" vs {_reference_name(c)}"
        if not tc:
            row.append("-")
        elif all(r.get("bit_exact") for r in tc):
            row.append("all bit-exact" + vs)
        else:
            row.append(("" if all_lib else f"vs {_reference_name(c)}: ")
                       + "; ".join(f"{r['name']}: {_exact(r)}" for r in tc if not r.get("bit_exact")))
        rows.append(row)
    note = ("ns/row: median batch throughput at 1 thread on the case's test rows; "
            + _speedup_note(results) + " " + _cycles_note(results))
    return _table(header, rows) + "\n\n" + note


def _auto_cycles(c: dict) -> str:
    """The headline's cycles cell: cycles per row (per node step) of the strategy that
    backend="auto" picks, named where it is not the case's only treecomp row."""
    r = next((r for r in c["strategies"] if r["name"] == c.get("auto_backend") and r["status"] == "ok"), None)
    if r is None or r.get("cycles_per_row") is None:
        return "-"
    step = f" ({fmt_num(r['cycles_per_step'])})" if r.get("cycles_per_step") is not None else ""
    return f"{fmt_num(r['cycles_per_row'])}{step} {r['name']}"


def clock_line(results: dict) -> str:
    """The header's line on the core's clock: the figure the cycles come from, and how it was
    measured (treecomp.benchmark.measure.core_clock); or why there are no cycles."""
    clk = results["machine"].get("clock") or {}
    if not clk.get("ghz"):
        return f"- core clock: not measured ({clk.get('note', 'a results.json from before cycles')}): no cycle figures"
    tsc = f"; the TSC ticks at {clk['tsc_ghz']:.2f} GHz" if clk.get("tsc_ghz") else ""
    return (f"- core clock: {clk['ghz']:.2f} GHz, from {clk['method']}{tsc}; cycles = ns x "
            "this clock")


def _cycles_note(results: dict) -> str:
    clk = (results["machine"].get("clock") or {}).get("ghz")
    if not clk:
        return "No cycles: the core's clock was not measured."
    return (f"Node steps/row: the sum over the trees of the depth of the leaf a row reaches, "
            f"averaged over the case's first test rows; cycles: ns/row x the core's clock "
            f"({clk:.2f} GHz), per row and per node step, for the backend `auto` picks.")


def latency_section(results: dict) -> str:
    """Latency per batch size: per case, treecomp as treecomp.compile builds it beside the
    fastest other engine at each batch size (runner.latency_table), single-threaded, us."""
    cases = [c for c in results["cases"] if c.get("latency_table")]
    measured = {e["batch"] for c in cases for e in c["latency_table"]}
    batches = [b for b in results["batches"] if b in measured]  # no case that large: no column
    if not cases:
        return ""
    header = ["case", "us per call, 1 thread"] + [f"{b} row{'s' if b > 1 else ''}" for b in batches]
    rows = []
    for c in cases:
        by = {e["batch"]: e for e in c["latency_table"]}
        names = {e["treecomp"] for e in by.values() if "treecomp" in e}
        all_auto = all(e.get("auto") for e in by.values() if "treecomp" in e)
        one = len(names) == 1 and all_auto
        label = f"treecomp ({next(iter(names))}, auto)" if one else "treecomp (fastest backend measured)"
        tc_row, other_row, ratio_row = [c["name"], label], ["", "fastest other engine"], ["", "treecomp faster by"]
        for b in batches:
            e = by.get(b, {})
            if "treecomp_us" in e:
                tc_row.append(fmt_num(e["treecomp_us"]) + ("" if one else f" ({e['treecomp']})"))
            else:
                tc_row.append("-")
            other_row.append(f"{fmt_num(e['other_us'])} ({e['other']})" if "other_us" in e else "-")
            ratio_row.append(fmt_ratio(e.get("other_over_treecomp")))
        rows += [tc_row, other_row, ratio_row]
    note = ("One call of b rows from Python on one thread (treecomp: `predict_proba` for "
            "classifiers, `predict` for regressors, as `treecomp.compile` builds it with "
            "backend=\"auto\"; the others: the library's call and the other compilers' own), "
            "calls cycling through distinct batches of the test rows; the engines timed side "
            "by side in one process (rounds in which each engine in turn makes a block of calls "
            "for 1/8 of its time budget, the first call of a block, made on caches another "
            "engine filled, dropped), medians; fastest other engine: the quickest of the library and the other compilers "
            "at that batch size.")
    return note + "\n\n" + _table(header, rows)


def _reference_name(c: dict) -> str:
    """The case's exactness reference as the report names it."""
    ref = c.get("reference") or c.get("library") or "no reference"
    if ref == "treecomp interpreter":
        return "treecomp interpreter (raw margins; no library measured)"
    return ref


def case_section(c: dict, batches: list[int]) -> str:
    lines = [f"### {c['name']}: {c['title']}", ""]
    facts = [f"{c['n_rows']:,} test rows x {c['n_features']} features"]
    if "n_trees" in c:
        facts.append(f"{c['n_trees']} trees, {c['n_nodes']:,} nodes, max depth {c['max_depth']}, "
                     f"{c['n_outputs']} output(s), input {c['input_dtype']}, sums in {c['accumulate_dtype']}")
    if c.get("node_steps_per_row") is not None:
        facts.append(f"{fmt_num(c['node_steps_per_row'])} node steps a row (over its first "
                     f"{c['node_steps_rows']:,} rows)")
    if c.get("auto_backend"):
        facts.append(f"backend=\"auto\" picks {c['auto_backend']}")
    if c.get("parse_s") is not None:
        facts.append(f"parse (model -> IR) {c['parse_s'] * 1e3:.0f} ms")
    if c.get("parse_error"):
        facts.append(f"treecomp cannot parse it: {c['parse_error']}")
    if c.get("library"):
        facts.append(f"library: {c['library']} `{c['library_call']}`")
    if c.get("reference"):
        facts.append(f"exactness reference: {c['reference']} ({', '.join(c.get('reference_kinds', []))})")
    lines += ["; ".join(facts) + ".", ""]
    ok = [r for r in c["strategies"] if r["status"] == "ok"]
    rows = []
    for r in ok:
        mem = fmt_num(r.get("compile_rss_mib"))
        if r.get("compiler_rss_mib") is not None:
            mem += f" / {'<=' if r.get('compiler_rss_upper_bound') else ''}{fmt_num(r['compiler_rss_mib'])}"
        art = fmt_num(r["artifact_bytes"] / 1024) if r.get("artifact_bytes") else "-"
        rows.append([r["name"], fmt_num(r.get("compile_s")), fmt_num(r.get("load_s")), mem, art,
                     fmt_num(r.get("ns_per_row_1t")), fmt_num(r.get("cycles_per_row")),
                     fmt_num(r.get("cycles_per_step")), fmt_num(r.get("ns_per_row_all")),
                     fmt_ratio(r.get("speedup_vs_walker")), fmt_ratio(r.get("speedup_vs_library")),
                     fmt_ratio(r.get("speedup_vs_library_all")), _exact(r)])
    if rows:
        lines.append(_table(["strategy", "compile s", "load s", "peak MiB (build / compiler)",
                             "artifact KiB", "ns/row 1 thread", "cycles/row", "cycles/node step",
                             "ns/row all cores", "x walker",
                             "x library", "x library (all cores)", "exact vs reference"], rows))
        lines.append("")
        lat_rows = []
        for r in ok:
            lat = r.get("latency_us", {})
            ex = set(r.get("latency_extrapolated", []))
            lat_rows.append([r["name"]] + [("~" if b in ex else "") + fmt_num(lat.get(str(b)))
                                           for b in batches] + [fmt_num(r.get("native_us_1row")),
                                                                fmt_num(r.get("api_us_1row_paired"))])
        lines.append("Latency per call from Python, 1 thread (us; calls cycle through distinct "
                     "batches, the engines side by side, the walker and interpreter on their own; "
                     "~ = scaled from the per-row time; native: treecomp's kernel call "
                     "on one row alone, over distinct rows, timed in C; API, paired: the same "
                     "rows through Python in rounds alternating with the native ones, so their "
                     "difference is what the Python API adds):")
        lines.append("")
        lines.append(_table(["strategy"] + [f"batch {b}" for b in batches]
                            + ["native, 1 row", "API, 1 row (paired)"], lat_rows))
        lines.append("")
    thr = [r for r in ok if r.get("scaling_paired") is not None]
    if thr:
        lines.append("All cores against one thread, calls alternating (median of the pairs' "
                     "ratios; ceiling: one independent one-thread call of the whole batch per "
                     "core, all at once, against one alone: what the cores give that kernel at "
                     "that moment, without treecomp's split):")
        lines.append("")

        def x2(v: float | None) -> str:
            return "-" if v is None else f"{v:.2f}x"
        lines.append(_table(["strategy", "pairs", "all cores vs 1 thread", "ceiling"],
                            [[r["name"], str(r.get("scaling_pairs", "")),
                              x2(r["scaling_paired"]), x2(r.get("ceiling_paired"))]
                             for r in thr]))
        lines.append("")
    skipped = [r for r in c["strategies"] if r["status"] != "ok"]
    if skipped:
        lines.append("Skipped: " + "; ".join(f"**{r['name']}**: {r.get('note', '')}" for r in skipped) + ".")
        lines.append("")
    if c.get("shap"):
        lines += [shap_section(c["shap"]), ""]
    return "\n".join(lines)


def shap_section(sh: dict) -> str:
    """The SHAP contributions of a case: treecomp's beside the libraries' and oneDAL's."""
    if sh.get("status") == "skipped":
        return f"SHAP contributions: not measured ({sh.get('note', '')})."
    ok = [e for e in sh["engines"] if e["status"] == "ok" and "ms_per_row" in e]
    lines = [f"SHAP contributions (path-dependent TreeSHAP, bias column included), 1 thread, "
             f"{sh['n_rows']} rows, calls interleaved, medians (treecomp's tables prepared once "
             f"per model in {sh['prepare_s']:.2f} s, not counted); difference: the largest over "
             "the rows of |engine - treecomp| / the row's sum of |values|:", ""]

    def diff(e: dict) -> str:
        if e["name"] == "treecomp":
            return "-"
        v = e.get("max_diff_of_row_l1")
        return f"{v:.1e}" if v is not None else e.get("note", "-")
    lines.append(_table(["engine", "ms/row, 1 thread", "treecomp faster by", "difference"],
                        [[e["label"], fmt_num(e["ms_per_row"]), fmt_ratio(e["slower_than_treecomp"]),
                          diff(e)] for e in ok]))
    bad = [e for e in sh["engines"] if e not in ok]
    if bad:
        lines += ["", "Not measured: " + "; ".join(f"**{e['name']}**: {e.get('note', '')}"
                                                   for e in bad) + "."]
    return "\n".join(lines)


def markdown(results: dict, plots: list[str]) -> str:
    m = results["machine"]
    keys = ("numpy", "scikit-learn", "xgboost", "lightgbm", "llvmlite", "lleaves", "daal4py",
            "onnxruntime", "tl2cgen")
    libs = ", ".join(f"{k} {m[k]}" for k in keys if k in m)
    out = [f"# treecomp benchmark ({results['mode']} mode)", "",
           f"- date: {m['date']}; wall time {results.get('wall_s', 0):.0f} s"
           + (f"; each engine's build of a model stopped after {results['compile_limit_s']:.0f} s"
              if results.get("compile_limit_s") else ""),
           f"- CPU: {m['cpu']}, {m['cores']} cores; {m['platform']}",
           f"- Python {m['python']}; treecomp {m['treecomp']}; {libs}",
           f"- C compiler: {m.get('compiler') or 'none found'}", clock_line(results)]
    setup = results.get("setup") or {}
    if setup:
        out.append("- one-time backend setup (a trivial model into an empty cache; not counted in "
                   "the compile times below): " + ", ".join(
                       f"{k} {fmt_num(v['setup_s'])} s" if "setup_s" in v else f"{k} failed ({v.get('error')})"
                       for k, v in setup.items()))
    out += ["",
            "## Headline", "", headline(results), ""]
    lat = latency_section(results)
    if lat:
        out += ["## Latency per batch size", "", lat, ""]
    if plots:
        out += ["## Plots", ""]
        for p in plots:
            caption = plot_caption(p, results)
            out += [f"![{p}]({p})", ""] + ([caption, ""] if caption else [])
    out += ["## Cases", ""]
    for c in results["cases"]:
        out += [case_section(c, results["batches"]), ""]
    for s in results.get("skipped_cases", []):
        out.append(f"- case {s['name']} skipped: {s['note']}")
    out += ["", "## Method", "",
            "- Throughput: one call on the whole test matrix "
            "(treecomp: `predict_proba(X, n_threads=k)` for classifiers, `predict` for regressors; the library's call at k threads). "
            "At one thread every engine but the walker and the interpreter is timed side by "
            "side: a warm-up call each, then rounds in which each engine in turn makes one call "
            "(the order reversed every other round; at least 5 rounds, up to 40 or the time "
            "budget), medians, so that a drift in the machine's speed moves every engine alike "
            "and the ratios hold. The "
            "Python walker and the interpreter run on their own on a subsample sized to the time budget, "
            "scaled to ns/row. Thread scaling: calls at 1 thread and at all cores alternate "
            "(at least 5 pairs, up to 25 or twice the budget) and the median pair ratio is "
            "reported, so a drift in the machine's speed cancels (the all-cores ns/row is the median of "
            "those pairs' all-cores calls); for treecomp strategies a "
            "third call per round runs one one-thread call per core at once on the whole batch "
            "(the ceiling those cores give that kernel at that moment).",
            "- Compile: cold, in a fresh subprocess with an empty `TREECOMP_CACHE_DIR`; peak MiB is "
            "the build's RSS growth in that process (high-water mark reset just before the build) "
            "/ the largest compiler or linker subprocess (`<=`: an upper bound, as Linux counts "
            "the forking process's RSS in a child's peak). `load s` is loading the built artifact "
            "in the benchmark process. Other compilers are converted in-process.",
            "- Latency: one call of each batch size on one thread, cycling through distinct "
            "batches of the test rows; every engine but the walker and the interpreter timed side "
            "by side (rounds in which each engine in turn makes a block of calls for 1/8 of its "
            "time budget, the order reversed every other round; the first call of a block, made "
            "on caches another engine filled, is dropped: warm calls, as in a loop, while all "
            "engines share the same minutes), medians.",
            "- Cycles: the core's clock is measured once per run by a chain of dependent integer "
            "adds (one cycle each) timed on the thread's CPU clock (a virtual machine's guest has "
            "no perf cycle counters, and the TSC ticks at a fixed rate whatever the boost); "
            "cycles/row = ns/row at 1 thread x that clock, cycles/node step = cycles/row over "
            "the node steps a row takes (the sum over the trees of the depth of the leaf it "
            "reaches, counted by treecomp's interpreter on the case's first rows). The "
            "ns/row is wall time: a busy machine inflates the cycles too.",
            _exactness_method(results),
            "- The machine may have been shared with other work: compare ratios within a run.", ""]
    return "\n".join(out)


def _exactness_method(results: dict) -> str:
    """The Method section's exactness line: what the outputs were compared with."""
    lib = "in every form the library offers (raw margin, predict_proba, predict) compared with " \
        "the library's on the same rows"
    if all(_library_reference(c) for c in results["cases"]):
        return f"- Exactness: outputs {lib}; bit-exact means same dtype and same bits."
    interp = ("raw margins compared with the treecomp interpreter's (treecomp.interp, the IR's "
              "reference semantics) on the same rows, as no library was measured")
    if not any(_library_reference(c) for c in results["cases"]):
        return f"- Exactness: {interp}; bit-exact means same dtype and same bits."
    return (f"- Exactness: where a library was measured, outputs {lib}; elsewhere {interp}; "
            "bit-exact means same dtype and same bits.")


def write(results: dict, out: Path, plots: bool = True, write_json: bool = True) -> list[Path]:
    """Write results.json (unless write_json is false), the PNG plots and report.md into `out`;
    returns the paths."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    if write_json:
        (out / "results.json").write_text(json.dumps(results, indent=1, default=_json_default))
        paths.append(out / "results.json")
    pngs = write_plots(results, out) if plots else []
    paths += [out / p for p in pngs]
    (out / "report.md").write_text(markdown(results, pngs))
    paths.append(out / "report.md")
    return paths


def _json_default(o: Any) -> Any:
    try:
        import numpy as np
        if isinstance(o, np.generic):
            return o.item()
        if isinstance(o, np.ndarray):
            return o.tolist()
    except ImportError:
        pass
    return str(o)


def summary(results: dict) -> str:
    """The terminal summary: the headline table plus one line per skipped strategy kind."""
    lines = [f"treecomp benchmark, {results['mode']} mode, {results['machine']['cpu']} "
             f"({results['machine']['cores']} cores)", "", headline(results)]
    notes: dict[str, str] = {}
    for c in results["cases"]:
        for r in c["strategies"]:
            if r["status"] != "ok":
                notes.setdefault(r["name"], r.get("note", ""))
    if notes:
        lines += ["", "skipped: " + "; ".join(f"{k} ({v[:100]})" for k, v in notes.items())]
    return "\n".join(lines)


def rewrite(src: Path, out: Path | None = None, plots: bool = True) -> list[Path]:
    """Re-render report.md and the plots from an existing results.json in `src` (after editing
    this module, say), into `out` (default: `src` itself). results.json is only read, never
    rewritten, so its numbers stay as measured."""
    src = Path(src)
    results = json.loads((src / "results.json").read_text())
    return write(results, Path(out) if out is not None else src, plots=plots, write_json=False)


def main(argv: list[str] | None = None) -> int:
    """`python -m treecomp.benchmark.report DIR [--to OUT]`: re-render a report from
    DIR/results.json, e.g. docs/bench."""
    import argparse
    import sys
    p = argparse.ArgumentParser(prog="python -m treecomp.benchmark.report", description=(
        "Re-render report.md and the PNG plots from a benchmark run's results.json (the "
        "JSON itself is not rewritten)."))
    p.add_argument("dir", help="a folder holding results.json (a `treecomp bench` output)")
    p.add_argument("--to", help="write report.md and the plots here instead (default: DIR)")
    p.add_argument("--no-plots", action="store_true", help="only report.md")
    try:
        args = p.parse_args(list(sys.argv[1:] if argv is None else argv))
    except SystemExit as exc:
        return int(exc.code or 0)
    if not (Path(args.dir) / "results.json").is_file():
        print(f"error: no results.json in {args.dir}", file=sys.stderr)
        return 2
    plots = not args.no_plots
    if plots and not have_matplotlib():
        print("note: matplotlib is not installed: no plots (pip install 'treecomp[bench]')",
              file=sys.stderr)
        plots = False
    for path in rewrite(Path(args.dir), Path(args.to) if args.to else None, plots=plots):
        print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
