"""The benchmark's PNG plots (matplotlib, Agg backend, so no display is needed; optional:
``pip install 'treecomp[bench]'``), drawn from a run's results (the dict results.json holds):

- speedup.png: per case, every strategy's 1-thread throughput as a speedup over the library's
  own predict, library = 1x, the value printed on each bar; over the Python walker for a case
  where no library was measured, and the title, labels and captions say which
  (:func:`speedup_data`, :func:`speedup_title`, :func:`plot_caption`);
- latency.png: latency per call against batch size, one panel per case;
- compile_time.png: cold compile or conversion time per case and strategy.

Each strategy keeps one colour in all three (:func:`colour_map`). :func:`write_plots` draws
them; :mod:`treecomp.benchmark.report` writes them beside report.md.
"""

from __future__ import annotations

import math
import textwrap
from pathlib import Path
from typing import Any

#: one colour per strategy / engine, never reused: treecomp's in blues and greens, the library in
#: dark grey (the reference), the other engines in warm colours and purple (and hatched in bars)
COLOURS = {
    "library": "#4d4d4d",
    "c": "#1f77b4", "llvm": "#17becf", "arrays": "#2ca02c", "arrays-float": "#98df8a",
    "arrays-naive": "#637939",
    "tl2cgen": "#ff7f0e", "onnxruntime": "#9467bd", "lleaves": "#e377c2", "daal4py": "#d62728",
    "walker": "#8c564b", "interp": "#bcbd22",
}
#: for strategies not named above (new backends): colours no entry of COLOURS uses
SPARE_COLOURS = ("#aec7e8", "#ffbb78", "#c5b0d5", "#f7b6d2", "#9edae5", "#c49c94", "#dbdb8d",
                 "#ff9896", "#7f7f7f", "#393b79", "#843c39", "#7b4173")
MARKERS = {"library": "s", "c": "o", "llvm": "D", "arrays": "^", "arrays-float": "v",
           "arrays-naive": "<", "tl2cgen": "P", "onnxruntime": "X", "lleaves": "*", "daal4py": "h",
           "walker": "p", "interp": "d"}
DISPLAY = {"walker": "Python walker", "interp": "numpy interpreter", "library": "library's own predict",
           "tl2cgen": "TL2cgen", "onnxruntime": "ONNX Runtime", "lleaves": "lleaves",
           "daal4py": "oneDAL (daal4py)"}
_GROUP_ORDER = {"library": 0, "treecomp": 1, "external": 2, "baseline": 3}


def display_name(name: str, group: str = "treecomp") -> str:
    """How the plots name a strategy: treecomp's backends as "treecomp <name>"."""
    if name in DISPLAY:
        return DISPLAY[name]
    return f"treecomp {name}" if group == "treecomp" else name


def colour_map(names: list[str]) -> dict[str, str]:
    """A distinct colour per name: the fixed ones, then spare colours for any others."""
    spare = iter(c for c in SPARE_COLOURS if c not in COLOURS.values())
    out = {}
    for n in names:
        out[n] = COLOURS.get(n) or next(spare, None) or "#000000"
    return out


def _strategy_names(results: dict) -> list[tuple[str, str]]:
    """(name, group) of every strategy that ran somewhere, library first, then treecomp's, then
    the other engines, then the baselines (each in the runner's order)."""
    seen: dict[str, str] = {}
    for c in results["cases"]:
        for r in c["strategies"]:
            if r["status"] == "ok" and r["name"] not in seen:
                seen[r["name"]] = r["group"]
    order = list(seen)
    return sorted(seen.items(), key=lambda kv: (_GROUP_ORDER.get(kv[1], 9), order.index(kv[0])))


def _fmt_x(v: float) -> str:
    return f"{v:,.0f}x" if v >= 100 else (f"{v:.1f}x" if v >= 1 else
                                          (f"{v:.2f}x" if v >= 0.01 else f"{v:.1g}x"))


def speedup_data(results: dict) -> list[dict]:
    """The main plot's numbers: per case, 1-thread batch throughput of every strategy as a
    speedup over the library's own predict (library = 1.0); where the case has no library
    figure (a bare model file), over the Python walker instead. One dict per case:
    {"case", "reference" ("library" or "walker"), "reference_label", "bars": [(name, group,
    speedup or None when it did not run, note)]}. Baselines (walker, interpreter) are left out
    where the library is the reference: they are in the tables."""
    names = _strategy_names(results)
    out = []
    for c in results["cases"]:
        by = {r["name"]: r for r in c["strategies"]}
        lib = by.get("library", {})
        if lib.get("status") == "ok" and lib.get("ns_per_row_1t"):
            ref, ref_ns = "library", lib["ns_per_row_1t"]
            ref_label = f"{c.get('library') or 'library'} {c.get('library_call') or 'predict'}"
        elif by.get("walker", {}).get("status") == "ok":
            ref, ref_ns = "walker", by["walker"]["ns_per_row_1t"]
            ref_label = "Python walker (no library measured)"
        else:
            continue
        bars = []
        for name, group in names:
            if group == "baseline" and not (ref == "walker" and name == "walker"):
                continue
            if name == "library" and ref != "library":
                continue
            r = by.get(name)
            if r and r["status"] == "ok" and r.get("ns_per_row_1t"):
                bars.append((name, group, ref_ns / r["ns_per_row_1t"], ""))
            else:
                bars.append((name, group, None, "skipped" if r else "not run"))
        out.append({"case": c["name"], "reference": ref, "reference_label": ref_label, "bars": bars})
    return out


def speedup_title(data: list[dict]) -> str:
    """The speedup plot's title, naming the reference its panels use (speedup_data)."""
    refs = {d["reference"] for d in data}
    if refs == {"library"}:
        return ("Batch throughput, 1 thread: speedup over the library's own predict "
                "(library = 1x; higher is faster)")
    if refs == {"walker"}:
        return ("Batch throughput, 1 thread: speedup over the Python walker (walker = 1x; "
                "higher is faster); no library was measured")
    return ("Batch throughput, 1 thread: speedup over each case's reference, the library's own "
            "predict or, where no library was measured, the Python walker (reference = 1x; "
            "higher is faster)")


def _reference_phrase(ref: str) -> str:
    return "the library" if ref == "library" else "the Python walker"


def _wrap(text: str, width_in: float, fontsize: float) -> str:
    """text broken into lines that fit width_in inches at fontsize points (DejaVu Sans)."""
    return textwrap.fill(text, max(20, int(width_in * 72 / (fontsize * 0.58))))


def _legend_cols(n: int, width_in: float, entry_in: float) -> int:
    return max(1, min(6, n, int(width_in / entry_in)))


def have_matplotlib() -> bool:
    try:
        import matplotlib  # noqa: F401
        return True
    except ImportError:
        return False


def _speedup_plot(plt, results: dict, colours: dict, out: Path) -> str | None:
    data = speedup_data(results)
    if not data:
        return None
    n = len(data)
    ncol = min(3, n)
    nrow = math.ceil(n / ncol)
    nbars = max(len(d["bars"]) for d in data)
    panel_h = 0.36 * nbars + 1.25
    fig_w = max(7.5, 5.8 * ncol)
    fig, axes = plt.subplots(nrow, ncol, figsize=(fig_w, panel_h * nrow + 1.3), squeeze=False)
    box = dict(facecolor="white", edgecolor="none", pad=0.6, alpha=0.85)  # over the 1x line
    for ax, d in zip(axes.flat, data):
        bars = d["bars"]
        ys = list(range(len(bars)))[::-1]           # first bar on top
        vals = [b[2] for b in bars]
        top = max([v for v in vals if v is not None] + [1.0])
        for y, (name, group, v, note) in zip(ys, bars):
            ref_bar = name == d["reference"]
            if v is None:
                ax.text(0.02 * top, y, note, va="center", ha="left", fontsize=9, color="#777777",
                        style="italic", bbox=box)
                continue
            ax.barh(y, v, height=0.72, color=colours[name],
                    hatch="///" if group == "external" else None,
                    edgecolor="white" if group == "external" else colours[name], linewidth=0)
            ax.text(v + 0.015 * top, y, _fmt_x(v) + (" (reference)" if ref_bar else ""),
                    va="center", ha="left", fontsize=9.5, bbox=box,
                    fontweight="bold" if group == "treecomp" else "normal")
        ax.axvline(1.0, color="#333333", lw=0.8, ls="--", zorder=0)
        ax.set_yticks(ys)
        ax.set_yticklabels([_bar_label(b[0], b[1], d) for b in bars], fontsize=9.5)
        ax.set_xlim(0, top * 1.32)
        ax.set_ylim(-0.6, len(bars) - 0.4)
        ref = textwrap.fill(f"1x = {d['reference_label']}", 52)
        ax.annotate(ref, xy=(0.5, 1), xycoords="axes fraction", xytext=(0, 5),
                    textcoords="offset points", ha="center", va="bottom", fontsize=8.5,
                    color="#333333")
        ax.set_title(d["case"], fontsize=11, fontweight="bold", pad=9 + 11 * (ref.count("\n") + 1))
        ax.tick_params(axis="x", labelsize=9)
        ax.grid(axis="x", color="#dddddd", lw=0.6)
        ax.set_axisbelow(True)
        for side in ("top", "right"):
            ax.spines[side].set_visible(False)
    for ax in list(axes.flat)[n:]:
        ax.axis("off")
    for ax, d in zip(axes.flat, data):  # each panel names its own reference
        if ax in axes[-1] or d["reference"] != "library":
            ax.set_xlabel(f"speedup over {_reference_phrase(d['reference'])} (x times faster, "
                          "1 thread)", fontsize=9.5)
    # the legend: every strategy shown, in the bars' order
    from matplotlib.patches import Patch
    shown = {name for d in data for name, _, v, _ in d["bars"] if v is not None}
    refs = {d["reference"] for d in data}
    handles = [Patch(facecolor=colours[nm], hatch="///" if g == "external" else None,
                     edgecolor="white" if g == "external" else colours[nm],
                     label=display_name(nm, g) + (" = 1x" if nm in refs else ""))
               for nm, g in _strategy_names(results) if nm in shown]
    leg_cols = _legend_cols(len(handles), fig_w, 2.75)
    legend_rows = math.ceil(len(handles) / leg_cols)
    plain_title = speedup_title(data)
    title = _wrap(plain_title, fig_w - 0.4, 13)
    title_in = 0.25 * (title.count("\n") + 1)
    fig.set_figheight(fig.get_figheight() + title_in + 0.2 * legend_rows - 0.45)
    head_in = 0.3 + title_in + 0.2 * legend_rows      # title + legend above the panels
    # placed by hand, with the legend: out of tight_layout's sums, which would add it twice
    fig.suptitle(title, fontsize=13, y=1 - 0.12 / fig.get_figheight()).set_in_layout(False)
    fig.legend(handles=handles, loc="upper center", ncol=leg_cols, fontsize=10, frameon=False,
               bbox_to_anchor=(0.5, 1 - (0.17 + title_in) / fig.get_figheight()))
    fig.tight_layout(rect=(0, 0, 1, 1 - head_in / fig.get_figheight()), h_pad=1.6, w_pad=1.2)
    fig.savefig(out / "speedup.png", dpi=110, metadata={"Title": plain_title})
    plt.close(fig)
    return "speedup.png"


def _bar_label(name: str, group: str, d: dict) -> str:
    if name == "library":
        return d["reference_label"].split(" ")[0] + " (library)"
    return display_name(name, group)


def _latency_plot(plt, results: dict, colours: dict, out: Path) -> str | None:
    cases = [c for c in results["cases"] if any(r.get("latency_us") for r in c["strategies"])]
    if not cases:
        return None
    groups = dict(_strategy_names(results))
    order = list(groups)
    ncol = min(3, len(cases))
    nrow = math.ceil(len(cases) / ncol)
    fig_w = max(7.5, 4.6 * ncol)
    fig, axes = plt.subplots(nrow, ncol, figsize=(fig_w, 3.6 * nrow + 1.2), squeeze=False)
    handles: dict[str, Any] = {}
    for ax, c in zip(axes.flat, cases):
        rows = sorted((r for r in c["strategies"] if r["status"] == "ok" and r.get("latency_us")),
                      key=lambda r: order.index(r["name"]) if r["name"] in order else 99)
        for r in rows:
            lat = r["latency_us"]
            bs = sorted(int(b) for b in lat)
            (line,) = ax.plot(bs, [lat[str(b)] for b in bs], marker=MARKERS.get(r["name"], "o"),
                              ms=4.5, lw=1.4, color=colours[r["name"]],
                              ls="--" if r["group"] == "baseline" else "-",
                              label=display_name(r["name"], r["group"]))
            handles.setdefault(r["name"], line)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_title(c["name"], fontsize=10)
        ax.set_xlabel("batch size (rows per call, log scale)", fontsize=8.5)
        ax.set_ylabel("latency per call (µs, log scale)", fontsize=8.5)
        ax.tick_params(labelsize=8)
        ax.grid(color="#e5e5e5", lw=0.6, which="major")
    for ax in list(axes.flat)[len(cases):]:
        ax.axis("off")
    hs = [handles[n] for n in order if n in handles]
    ncols_leg = _legend_cols(len(hs), fig_w, 2.5)
    legend_rows = math.ceil(len(hs) / ncols_leg)
    fig.set_figheight(fig.get_figheight() + 0.22 * legend_rows - 0.45)
    fig.suptitle(_wrap("Latency per call from Python, 1 thread (lower is faster)", fig_w - 0.4, 12),
                 fontsize=12, y=1 - 0.15 / fig.get_figheight()).set_in_layout(False)
    fig.legend(handles=hs, labels=[h.get_label() for h in hs], loc="lower center", ncol=ncols_leg,
               fontsize=9, frameon=False)
    fig.tight_layout(rect=(0, (0.15 + 0.22 * legend_rows) / fig.get_figheight(), 1,
                           1 - 0.45 / fig.get_figheight()), h_pad=1.2)
    fig.savefig(out / "latency.png", dpi=110)
    plt.close(fig)
    return "latency.png"


def _compile_plot(plt, results: dict, colours: dict, out: Path) -> str | None:
    groups = dict(_strategy_names(results))
    order = [n for n in groups]
    cases = [c for c in results["cases"]
             if any(r["status"] == "ok" and r.get("compile_s") is not None for r in c["strategies"])]
    if not cases:
        return None
    names = [n for n in order if any(r["name"] == n and r["status"] == "ok" and r.get("compile_s") is not None
                                     for c in cases for r in c["strategies"])]
    fig_w = max(8.0, 1.5 * len(cases) + 2.8)
    fig, ax = plt.subplots(figsize=(fig_w, 5.0))
    w = 0.8 / max(1, len(names))
    for j, n in enumerate(names):
        xs, ys = [], []
        for i, c in enumerate(cases):
            r = next((r for r in c["strategies"] if r["name"] == n), None)
            if r and r["status"] == "ok" and r.get("compile_s") is not None:
                xs.append(i + (j - (len(names) - 1) / 2) * w)
                ys.append(r["compile_s"])
        ax.scatter(xs, ys, marker=MARKERS.get(n, "o"), s=80 if MARKERS.get(n) == "*" else 46,
                   color=colours[n], zorder=3,
                   edgecolor="black" if groups.get(n) == "external" else "none", linewidth=0.5,
                   label=display_name(n, groups.get(n, "treecomp")))
    for i in range(1, len(cases)):
        ax.axvline(i - 0.5, color="#dddddd", lw=0.8, zorder=0)
    ax.set_xticks(range(len(cases)))

    def size(c: dict) -> str:
        nodes = c.get("n_nodes")
        if not nodes:
            return ""
        return f"\n{nodes / 1000:.1f}k nodes" if nodes >= 1000 else f"\n{nodes} nodes"
    ax.set_xticklabels([c["name"] + size(c) for c in cases], fontsize=8.5)
    ax.set_xlim(-0.6, len(cases) - 0.4)
    vals = [r["compile_s"] for c in cases for r in c["strategies"]
            if r["status"] == "ok" and r.get("compile_s")]
    if vals and max(vals) / max(min(vals), 1e-9) > 20:
        ax.set_yscale("log")
        ax.set_ylabel("cold compile / conversion time (seconds, log scale)", fontsize=9)
    else:
        ax.set_ylim(bottom=0)
        ax.set_ylabel("cold compile / conversion time (seconds)", fontsize=9)
    ax.set_xlabel("case (model size in tree nodes)", fontsize=9)
    ax.grid(axis="y", color="#e5e5e5", lw=0.6, which="both")
    ax.set_axisbelow(True)
    ax.tick_params(axis="y", labelsize=8.5)
    ax.set_title(_wrap("Compile time per case (treecomp: cold, fresh process; lower is faster)",
                       fig_w - 3.2, 11), fontsize=11)
    ax.legend(fontsize=8.5, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    fig.tight_layout()
    fig.savefig(out / "compile_time.png", dpi=110)
    plt.close(fig)
    return "compile_time.png"


def write_plots(results: dict, out: Path) -> list[str]:
    """speedup.png, latency.png and compile_time.png (each where it has data) written into
    `out`; returns their file names. Needs matplotlib (:func:`have_matplotlib`)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    colours = colour_map([n for n, _ in _strategy_names(results)])
    written = []
    for fn in (_speedup_plot, _latency_plot, _compile_plot):
        name = fn(plt, results, colours, out)
        if name:
            written.append(name)
    return written


def plot_caption(name: str, results: dict) -> str | None:
    """The report's caption of plot `name`, naming the speedup plot's references as drawn."""
    if name != "speedup.png":
        return PLOT_CAPTIONS.get(name)
    refs = {d["reference"] for d in speedup_data(results)}
    if refs == {"walker"}:
        return ("Per case, each strategy's 1-thread batch throughput as a speedup over the "
                "Python walker (the Python walker = 1x; bars right of the dashed line are "
                "faster): no library was measured, so no bar compares with the library's own "
                "predict. treecomp's strategies solid, other engines hatched.")
    if refs == {"library"}:
        return PLOT_CAPTIONS[name]
    return ("Per case, each strategy's 1-thread batch throughput as a speedup over the case's "
            "reference, named above its panel: the library's own predict (the library = 1x), or "
            "the Python walker where no library was measured (the Python walker = 1x). "
            "treecomp's strategies solid, other engines hatched.")


PLOT_CAPTIONS = {
    "speedup.png": "Per case, each strategy's 1-thread batch throughput as a speedup over the "
                   "library's own predict (the library = 1x; bars right of the dashed line are "
                   "faster). treecomp's strategies solid, other engines hatched. The Python "
                   "walker and numpy interpreter baselines are in the tables.",
    "latency.png": "Latency of one call against batch size, 1 thread, same colours as above.",
    "compile_time.png": "Cold compile (treecomp: fresh process, empty cache) or conversion "
                        "(other engines) time per case.",
}
