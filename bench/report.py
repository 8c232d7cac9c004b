"""Benchmark outputs: report.md (machine, headline table, a section per case), PNG plots and the
raw results.json, all written to one directory; plus the terminal summary.

Plots (matplotlib, Agg backend, so no display is needed): speedup.png (speedup over the Python
walker per strategy and case, 1 thread), latency.png (latency per call against batch size, one
panel per case), compile_time.png (cold compile time against model size, per strategy).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

NO_LIBRARY = "-"


# -- formatting ---------------------------------------------------------------------------------
def _num(v: float | None, unit: str = "") -> str:
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


def _ratio(v: float | None) -> str:
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


def headline(results: dict) -> str:
    """One row per case: the library's ns/row, then each strategy's ns/row and its speedup over
    the library (over the walker where there is no library), 1 thread; and the exactness."""
    cols = _headline_columns(results)
    header = ["case", "trees", "nodes", "library ns/row"] + [f"{n} ns/row (speedup)" for _, n in cols] \
        + ["treecomp exact vs library"]
    rows = []
    for c in results["cases"]:
        by = {r["name"]: r for r in c["strategies"]}
        lib = by.get("library", {})
        lib_ns = lib.get("ns_per_row_1t") if lib.get("status") == "ok" else None
        row = [c["name"], str(c.get("n_trees", "-")), _num(c.get("n_nodes")), _num(lib_ns)]
        for name, _ in cols:
            r = by.get(name)
            if not r or r["status"] != "ok":
                row.append("skipped" if r else "-")
                continue
            sp = r.get("speedup_vs_library") if lib_ns else r.get("speedup_vs_walker")
            row.append(f"{_num(r['ns_per_row_1t'])} ({_ratio(sp)})")
        tc = [r for r in c["strategies"] if r["group"] == "treecomp" and r["status"] == "ok"]
        if not tc:
            row.append("-")
        elif all(r.get("bit_exact") for r in tc):
            row.append("all bit-exact")
        else:
            row.append("; ".join(f"{r['name']}: {_exact(r)}" for r in tc if not r.get("bit_exact")))
        rows.append(row)
    note = ("ns/row: median batch throughput at 1 thread on the case's test rows; (speedup) is over "
            "the library's own predict at 1 thread (over the Python walker where no library "
            "object was given).")
    return _table(header, rows) + "\n\n" + note


def case_section(c: dict, batches: list[int]) -> str:
    lines = [f"### {c['name']}: {c['title']}", ""]
    facts = [f"{c['n_rows']:,} test rows x {c['n_features']} features"]
    if "n_trees" in c:
        facts.append(f"{c['n_trees']} trees, {c['n_nodes']:,} nodes, max depth {c['max_depth']}, "
                     f"{c['n_outputs']} output(s), input {c['input_dtype']}, sums in {c['accumulate_dtype']}")
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
        mem = _num(r.get("compile_rss_mib"))
        if r.get("compiler_rss_mib") is not None:
            mem += f" / {'<=' if r.get('compiler_rss_upper_bound') else ''}{_num(r['compiler_rss_mib'])}"
        art = _num(r["artifact_bytes"] / 1024) if r.get("artifact_bytes") else "-"
        rows.append([r["name"], _num(r.get("compile_s")), _num(r.get("load_s")), mem, art,
                     _num(r.get("ns_per_row_1t")), _num(r.get("ns_per_row_all")),
                     _ratio(r.get("speedup_vs_walker")), _ratio(r.get("speedup_vs_library")),
                     _ratio(r.get("speedup_vs_library_all")), _exact(r)])
    if rows:
        lines.append(_table(["strategy", "compile s", "load s", "peak MiB (build / compiler)",
                             "artifact KiB", "ns/row 1 thread", "ns/row all cores", "x walker",
                             "x library", "x library (all cores)", "exact vs reference"], rows))
        lines.append("")
        lat_rows = []
        for r in ok:
            lat = r.get("latency_us", {})
            ex = set(r.get("latency_extrapolated", []))
            lat_rows.append([r["name"]] + [("~" if b in ex else "") + _num(lat.get(str(b)))
                                           for b in batches] + [_num(r.get("native_us_1row")),
                                                                _num(r.get("api_us_1row_paired"))])
        lines.append("Latency per call from Python, 1 thread (us; calls cycle through distinct "
                     "batches; ~ = scaled from the per-row time; native: treecomp's kernel call "
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
    return "\n".join(lines)


def markdown(results: dict, plots: list[str]) -> str:
    m = results["machine"]
    keys = ("numpy", "scikit-learn", "xgboost", "lightgbm", "llvmlite", "lleaves", "daal4py",
            "onnxruntime", "tl2cgen")
    libs = ", ".join(f"{k} {m[k]}" for k in keys if k in m)
    out = [f"# treecomp benchmark ({results['mode']} mode)", "",
           f"- date: {m['date']}; wall time {results.get('wall_s', 0):.0f} s",
           f"- CPU: {m['cpu']}, {m['cores']} cores; {m['platform']}",
           f"- Python {m['python']}; treecomp {m['treecomp']}; {libs}",
           f"- C compiler: {m.get('compiler') or 'none found'}"]
    setup = results.get("setup") or {}
    if setup:
        out.append("- one-time backend setup (a trivial model into an empty cache; not counted in "
                   "the compile times below): " + ", ".join(
                       f"{k} {_num(v['setup_s'])} s" if "setup_s" in v else f"{k} failed ({v.get('error')})"
                       for k, v in setup.items()))
    out += ["",
            "## Headline", "", headline(results), ""]
    if plots:
        out += ["## Plots", ""] + [f"![{p}]({p})" for p in plots] + [""]
    out += ["## Cases", ""]
    for c in results["cases"]:
        out += [case_section(c, results["batches"]), ""]
    for s in results.get("skipped_cases", []):
        out.append(f"- case {s['name']} skipped: {s['note']}")
    out += ["", "## Method", "",
            "- Throughput: median of repeated calls after one warm-up on the whole test matrix "
            "(treecomp: `predict_proba(X, n_threads=k)` for classifiers, `predict` for regressors; the library's call at k threads). The "
            "Python walker and the interpreter run on a subsample sized to the time budget, "
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
            "- Exactness: outputs in every form the library offers (raw margin, predict_proba, "
            "predict) compared with the library's on the same rows; bit-exact means same dtype and "
            "same bits.",
            "- The machine may have been shared with other work: compare ratios within a run.", ""]
    return "\n".join(out)


# -- plots --------------------------------------------------------------------------------------
def _plots(results: dict, out: Path) -> list[str]:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written = []
    cases = results["cases"]
    names: list[str] = []
    for c in cases:
        for r in c["strategies"]:
            if r["status"] == "ok" and r["name"] not in names:
                names.append(r["name"])
    colours = {n: plt.get_cmap("tab10")(i % 10) for i, n in enumerate(names)}

    # speedup over the walker, grouped bars
    bars = [n for n in names if n != "walker"]
    if cases and bars and any(r.get("speedup_vs_walker") for c in cases for r in c["strategies"]):
        fig, ax = plt.subplots(figsize=(max(6, 1.4 * len(cases) + 2), 4.5))
        w = 0.8 / len(bars)
        for j, n in enumerate(bars):
            ys = []
            for c in cases:
                r = next((r for r in c["strategies"] if r["name"] == n), None)
                ys.append((r.get("speedup_vs_walker") or math.nan) if r and r["status"] == "ok" else math.nan)
            ax.bar([i + (j - (len(bars) - 1) / 2) * w for i in range(len(cases))], ys, w,
                   label=n, color=colours[n])
        ax.set_yscale("log")
        ax.set_xticks(range(len(cases)))
        ax.set_xticklabels([c["name"] for c in cases], rotation=30, ha="right")
        ax.set_ylabel("speedup over the Python walker (1 thread)")
        ax.axhline(1, color="grey", lw=0.5)
        ax.legend(fontsize=8, ncol=2)
        ax.set_title("Batch throughput, 1 thread")
        fig.tight_layout()
        fig.savefig(out / "speedup.png", dpi=110)
        plt.close(fig)
        written.append("speedup.png")

    # latency vs batch size
    with_lat = [c for c in cases if any(r.get("latency_us") for r in c["strategies"])]
    if with_lat:
        ncol = min(3, len(with_lat))
        nrow = math.ceil(len(with_lat) / ncol)
        fig, axes = plt.subplots(nrow, ncol, figsize=(4.2 * ncol, 3.4 * nrow), squeeze=False)
        for ax, c in zip(axes.flat, with_lat):
            for r in c["strategies"]:
                lat = r.get("latency_us")
                if r["status"] != "ok" or not lat:
                    continue
                bs = sorted(int(b) for b in lat)
                ax.plot(bs, [lat[str(b)] for b in bs], marker="o", ms=3, label=r["name"],
                        color=colours[r["name"]])
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.set_title(c["name"], fontsize=9)
            ax.set_xlabel("batch size (rows)")
            ax.set_ylabel("us per call")
        for ax in list(axes.flat)[len(with_lat):]:
            ax.axis("off")
        handles, labels = axes.flat[0].get_legend_handles_labels()
        fig.legend(handles, labels, loc="lower center", ncol=min(6, len(labels)), fontsize=8)
        fig.tight_layout(rect=(0, 0.06, 1, 1))
        fig.savefig(out / "latency.png", dpi=110)
        plt.close(fig)
        written.append("latency.png")

    # compile time vs model size
    pts: dict[str, list[tuple[float, float]]] = {}
    for c in cases:
        for r in c["strategies"]:
            if r["status"] == "ok" and r.get("compile_s") is not None and c.get("n_nodes"):
                pts.setdefault(r["name"], []).append((c["n_nodes"], r["compile_s"]))
    if pts:
        fig, ax = plt.subplots(figsize=(6, 4.2))
        markers = "osD^vP*X"
        for j, (n, xy) in enumerate(pts.items()):
            # points, not lines: the cases differ in more than size (depth, outputs, categories)
            ax.scatter([p[0] for p in xy], [p[1] for p in xy], marker=markers[j % len(markers)],
                       label=n, color=colours.get(n), alpha=0.8)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("model size (tree nodes)")
        ax.set_ylabel("cold compile time (s)")
        ax.legend(fontsize=8)
        ax.set_title("Compile time vs model size")
        fig.tight_layout()
        fig.savefig(out / "compile_time.png", dpi=110)
        plt.close(fig)
        written.append("compile_time.png")
    return written


def write(results: dict, out: Path, plots: bool = True) -> list[Path]:
    """Write results.json, the PNG plots and report.md into `out`; returns the paths."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    (out / "results.json").write_text(json.dumps(results, indent=1, default=_json_default))
    paths.append(out / "results.json")
    pngs = _plots(results, out) if plots else []
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


def rewrite(out: Path) -> list[Path]:
    """Regenerate report.md and the plots from an existing results.json (after editing this
    module, say): ``python -c "from bench.report import rewrite; rewrite('bench/out')"``."""
    results = json.loads((Path(out) / "results.json").read_text())
    return write(results, Path(out))
