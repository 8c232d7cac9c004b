"""The README's and docs/benchmarks.md's tables, written from a full run's results.json, so that
the documents quote one run and nothing is copied by hand.

    python -m bench.doc_tables bench/out/full/results.json [--previous docs/bench/results.json]

Prints Markdown: the README's headline table (treecomp as `auto` builds it, the library, the
fastest other engine), then docs/benchmarks.md's batch, cycles, single-row and two-thread
tables; with --previous, each case's batch and single-row time against that earlier run's (the
same case name; the cases' parameters must match, else the ratio is left out and said why).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

#: the documents' names for the bench cases (treecomp/benchmark/cases.py); others use the title
LABELS = {
    "xgb-binary": "XGBoost binary, depth 6",
    "xgb-multiclass": "XGBoost 10 classes",
    "xgb-nan-regression": "XGBoost NaN regression, depth 8",
    "rf-deep": "sklearn random forest, unlimited depth",
    "gb-regressor": "sklearn GradientBoostingRegressor",
    "gb-classifier": "sklearn GradientBoostingClassifier",
    "et-multiclass": "sklearn ExtraTrees, 5 classes",
    "hgb-nan-cat": "sklearn HistGradientBoosting, NaN + categorical",
    "lgbm-binary": "LightGBM binary, 63 leaves",
    "lgbm-255": "LightGBM binary, 255 leaves",
    "cb-binary": "CatBoost binary, depth 6",
    "xgb-d8-13": "XGBoost binary, depth 8, 13 features",
    "xgb-d8-28": "XGBoost binary, depth 8, 28 features",
    "xgb-d8-90-regression": "XGBoost regression, depth 8, 90 features",
    "xgb-d8-968": "XGBoost binary, depth 8, 968 features",
    "xgb-d8-2000": "XGBoost binary, depth 8, 2,000 features",
    "et-deep-multiclass": "sklearn ExtraTrees, depth 12, 5 classes",
}
#: the other engines, as the documents name them, in the tables' order
ENGINES = {"daal4py": "oneDAL (daal4py)", "lleaves": "lleaves", "onnxruntime": "ONNX Runtime",
           "tl2cgen": "TL2cgen"}
SHORT = {"daal4py": "oneDAL", "lleaves": "lleaves", "onnxruntime": "ONNX Runtime",
         "tl2cgen": "TL2cgen", "library": "library"}
TREECOMP = ("arrays", "arrays-float", "c", "llvm")


def num(v: float | None) -> str:
    if v is None:
        return "-"
    if v >= 100:
        return f"{v:,.0f}"
    if v >= 10:
        return f"{v:.1f}"
    return f"{v:.2f}"


def ratio(v: float | None) -> str:
    return "-" if v is None else (f"{v:.1f}x" if v >= 0.95 else f"{v:.2f}x")


def table(header: list[str], rows: list[list[str]]) -> str:
    return "\n".join(["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
                     + ["| " + " | ".join(r) + " |" for r in rows])


def label(c: dict) -> str:
    return LABELS.get(c["name"], c["title"])


def strategies(c: dict) -> dict[str, dict]:
    return {r["name"]: r for r in c["strategies"] if r["status"] == "ok"}


def auto_name(c: dict) -> str:
    """The strategy treecomp.compile's backend="auto" builds (arrays where the run did not say)."""
    return c.get("auto_backend") or "arrays"


def fastest_other(c: dict, key=lambda r: r.get("ns_per_row_1t")) -> tuple[str, float] | None:
    """The fastest of the library and the other engines by `key` (smaller is faster)."""
    s = strategies(c)
    got = [(SHORT[n], key(s[n])) for n in ("library", *ENGINES) if n in s and key(s[n]) is not None]
    return min(got, key=lambda t: t[1]) if got else None


def readme_table(res: dict) -> str:
    rows = []
    for c in res["cases"]:
        s = strategies(c)
        a, lib = s.get(auto_name(c)), s.get("library")
        if a is None:
            continue
        t = a["ns_per_row_1t"]
        lib_s = num(lib["ns_per_row_1t"]) if lib else "-"
        sp = f" ({ratio(lib['ns_per_row_1t'] / t)})" if lib else ""
        fo = fastest_other(c)
        other = f"{fo[0]} {num(fo[1])} ({ratio(fo[1] / t)})" if fo else "-"
        rows.append([label(c), str(c.get("n_trees", "-")), lib_s, f"**{num(t)}{sp}**", other])
    return table(["case", "trees", "library", "treecomp", "fastest other engine (treecomp's lead)"], rows)


def batch_table(res: dict) -> str:
    header = ["case", "trees", "library", "**auto**", "arrays", "arrays, float walks", "c", "llvm",
              *ENGINES.values(), "naive native walk", "Python walker"]
    rows = []
    for c in res["cases"]:
        s = strategies(c)
        lib = s.get("library", {}).get("ns_per_row_1t")

        def cell(n: str, bold: bool = False) -> str:
            r = s.get(n)
            if r is None:
                return "n/a"
            t = r["ns_per_row_1t"]
            sp = f" ({ratio(lib / t)})" if lib else ""
            star = "" if r.get("bit_exact", True) else "*"
            txt = f"{num(t)}{sp}{star}"
            return f"**{txt}**" if bold else txt
        a = auto_name(c)
        rows.append([label(c), str(c.get("n_trees", "-")), num(lib), f"{cell(a, True)} {a}",
                     *[cell(n) for n in TREECOMP], *[cell(n) for n in ENGINES],
                     num(s.get("arrays-naive", {}).get("ns_per_row_1t")),
                     num(s.get("walker", {}).get("ns_per_row_1t"))])
    return table(header, rows)


def cycles_table(res: dict) -> str:
    rows = []
    for c in res["cases"]:
        r = strategies(c).get(auto_name(c))
        if r is None:
            continue
        rows.append([label(c), auto_name(c), num(c.get("node_steps_per_row")), num(r["ns_per_row_1t"]),
                     num(r.get("cycles_per_row")), num(r.get("cycles_per_step"))])
    return table(["case", "auto", "node steps/row", "ns/row", "cycles/row", "cycles/node step"], rows)


def single_row_table(res: dict) -> str:
    header = ["case", "auto (kernel)", "c (kernel)", "llvm (kernel)", *[SHORT[n] for n in ENGINES],
              "library", "fastest other / auto"]
    rows = []
    for c in res["cases"]:
        s = strategies(c)

        def one(n: str, kernel: bool = False) -> str:
            r = s.get(n)
            if r is None or "1" not in r.get("latency_us", {}):
                return "n/a"
            k = f" ({num(r['native_us_1row'])})" if kernel and r.get("native_us_1row") else ""
            return f"{num(r['latency_us']['1'])}{k}"
        a = auto_name(c)
        fo = fastest_other(c, key=lambda r: r.get("latency_us", {}).get("1"))
        mine = s.get(a, {}).get("latency_us", {}).get("1")
        last = f"{fo[0]} {ratio(fo[1] / mine)}" if fo and mine else "-"
        rows.append([label(c), f"{one(a, True)} {a}", one("c", True), one("llvm", True),
                     *[one(n) for n in ENGINES], one("library"), last])
    return table(header, rows)


def threads_table(res: dict) -> str:
    rows = []
    for c in res["cases"]:
        s = strategies(c)

        def x(n: str) -> str:
            r = s.get(n, {})
            if r.get("scaling_paired") is None:
                return "-"
            ceil = f" ({r['ceiling_paired']:.2f}x)" if r.get("ceiling_paired") is not None else ""
            return f"{r['scaling_paired']:.2f}x{ceil}"
        rows.append([label(c), x(auto_name(c)), x("c"), x("llvm"), x("library")])
    return table(["case", "auto (ceiling)", "c (ceiling)", "llvm (ceiling)", "library"], rows)


def against_previous(res: dict, prev: dict) -> str:
    old = {c["name"]: c for c in prev["cases"]}
    rows = []
    for c in res["cases"]:
        o = old.get(c["name"])
        a = strategies(c).get(auto_name(c))
        if a is None:
            continue
        if o is None:
            rows.append([label(c), "-", num(a["ns_per_row_1t"]), "-", "-", "-", "new case"])
            continue
        if o.get("params") != c.get("params"):
            rows.append([label(c), "-", num(a["ns_per_row_1t"]), "-", "-", "-",
                         "parameters differ: not compared"])
            continue
        oa = strategies(o).get(auto_name(o))
        if oa is None:
            continue
        b_new, b_old = a["ns_per_row_1t"], oa["ns_per_row_1t"]
        r_new, r_old = a.get("latency_us", {}).get("1"), oa.get("latency_us", {}).get("1")
        rows.append([label(c), num(b_old), num(b_new), ratio(b_old / b_new),
                     f"{num(r_old)} -> {num(r_new)}" if r_old and r_new else "-",
                     ratio(r_old / r_new) if r_old and r_new else "-", ""])
    return table(["case", f"ns/row {prev['machine'].get('date', 'before')}",
                  f"ns/row {res['machine'].get('date', 'now')}", "faster by",
                  "1 row, us", "faster by", "note"], rows)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.doc_tables", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("results", type=Path)
    ap.add_argument("--previous", type=Path, help="an earlier run's results.json to compare with")
    a = ap.parse_args(argv)
    res = json.loads(a.results.read_text())
    m = res["machine"]
    print(f"<!-- from {a.results} ({res.get('mode')} mode, {m.get('date')}, {m.get('cpu')}, "
          f"wall {res.get('wall_s', 0) / 60:.0f} min) -->\n")
    sections = [("README: batch, one thread", readme_table(res)),
                ("batch, one thread, every strategy", batch_table(res)),
                ("cycles (auto)", cycles_table(res)),
                ("single rows, us", single_row_table(res)),
                ("two threads against one", threads_table(res))]
    if a.previous:
        sections.append((f"against {a.previous}", against_previous(res, json.loads(a.previous.read_text()))))
    for title, body in sections:
        print(f"## {title}\n\n{body}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
