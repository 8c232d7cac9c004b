"""Interleaved single-thread timings: every strategy timed round-robin in one process.

What it adds to `treecomp bench`: the package's runner (treecomp.benchmark.runner) measures one
strategy after another; on a machine shared with other work (2 cores, other jobs compiling) the
load can change between two strategies' turns, which skews their ratio. Here each round makes
one 1-thread call of every strategy on the same rows (the order rotated from round to round),
then a burst of single-row calls of each, so every strategy sees the same load over the run.
The minimum over rounds estimates the unloaded figure, the median the typical one. Compile
figures and exactness are the runner's job, not this script's: the strategies are prepared
(compiled / converted) by the same engines (treecomp.benchmark.engines), but only timed here.

    python -m bench.interleaved --cases lgbm-binary,xgb-binary \
        --strategies library,c,llvm,arrays,lleaves,daal4py,onnxruntime --rows 20000 --rounds 9
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from treecomp.benchmark import cases as C
from treecomp.benchmark.engines import CaseContext, strategies
from treecomp.benchmark.measure import Settings, log
from treecomp.benchmark.runner import machine


def _time_case(case: Any, names: list[str], rounds: int, single_calls: int) -> dict:
    import treecomp
    forest = treecomp.parse(case.model)
    tmp = Path(tempfile.mkdtemp(prefix="treecomp-interleaved-"))
    try:
        ir = tmp / f"{case.name}.tcir"
        forest.save(ir)
        ctx = CaseContext(case, forest, ir, tmp, Settings.for_mode(False), os.cpu_count() or 1, {})
        ready, rows = [], {}
        for s in strategies(names):
            try:
                figs = s.prepare(ctx)
                with s.threads(1):
                    s.run(case.X, 1)                          # warm-up
                    s.run(np.ascontiguousarray(case.X[:1]), 1)
                ready.append(s)
                rows[s.name] = {"label": s.label, "compile_s": figs.get("compile_s"), "batch_s": [],
                                "single_us": []}
                log(f"[{case.name}] {s.name} ready")
            except Exception as exc:  # noqa: BLE001 - Skip or a broken engine: noted, not fatal
                rows[s.name] = {"label": s.label, "skipped": f"{type(exc).__name__}: {exc}"[:300]}
                log(f"[{case.name}] {s.name} skipped: {rows[s.name]['skipped']}")
        # single rows: distinct rows in turn (one row repeated lets branch predictors learn it)
        X, x1s = case.X, [np.ascontiguousarray(case.X[i:i + 1]) for i in range(64)]
        for r in range(rounds):
            k = r % max(1, len(ready))
            for s in ready[k:] + ready[:k]:
                row = rows[s.name]
                with s.threads(1):
                    t0 = time.perf_counter()
                    s.run(X, 1)
                    row["batch_s"].append(time.perf_counter() - t0)
                    ts = []
                    for i in range(single_calls):
                        x1 = x1s[i % len(x1s)]
                        t0 = time.perf_counter()
                        s.run(x1, 1)
                        ts.append(time.perf_counter() - t0)
                    row["single_us"].append(float(np.median(ts)) * 1e6)
            log(f"[{case.name}] round {r + 1}/{rounds}")
        for row in rows.values():
            if "skipped" in row:
                continue
            b = np.array(row.pop("batch_s")) / len(X) * 1e9
            row["ns_per_row_1t_min"], row["ns_per_row_1t_median"] = float(b.min()), float(np.median(b))
            row["latency_b1_us_median"] = float(np.median(row.pop("single_us")))
        return {"name": case.name, "title": case.title, "n_rows": int(len(X)), "rounds": rounds,
                "strategies": rows}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _markdown(res: dict) -> str:
    rows = res["strategies"]
    lib = rows.get("library", {})
    out = [f"### {res['name']}: {res['title']} ({res['n_rows']:,} rows, {res['rounds']} rounds, 1 thread)",
           "", "| strategy | ns/row min | ns/row median | x library (median) | x library (min) | "
           "single row us (median) | compile s |", "|---|---|---|---|---|---|---|"]
    for name, r in rows.items():
        if "skipped" in r:
            out.append(f"| {name} | skipped: {r['skipped']} | | | | | |")
            continue
        xm = xn = "-"
        if "ns_per_row_1t_median" in lib and name != "library":
            xm = f"{lib['ns_per_row_1t_median'] / r['ns_per_row_1t_median']:.2f}x"
            xn = f"{lib['ns_per_row_1t_min'] / r['ns_per_row_1t_min']:.2f}x"
        comp = "-" if r.get("compile_s") is None else f"{r['compile_s']:.2f}"
        out.append(f"| {name} | {r['ns_per_row_1t_min']:,.0f} | {r['ns_per_row_1t_median']:,.0f} | {xm} | {xn} "
                   f"| {r['latency_b1_us_median']:.1f} | {comp} |")
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.interleaved", description=__doc__.split("\n\n")[0])
    p.add_argument("--cases", required=True, help="comma-separated case names (treecomp bench --list)")
    p.add_argument("--strategies", required=True, help="comma-separated strategy names")
    p.add_argument("--rows", type=int, default=20000, help="rows per batch call (default 20000)")
    p.add_argument("--rounds", type=int, default=9, help="rounds (default 9)")
    p.add_argument("--single-calls", type=int, default=200, help="single-row calls per round (default 200)")
    p.add_argument("--quick", action="store_true", help="the cases' quick sizes")
    p.add_argument("--out", help="write the figures as JSON here")
    args = p.parse_args(argv)
    names = [s.strip() for s in args.strategies.split(",") if s.strip()]
    strategies(names)   # unknown names: ValueError before any training
    results = {"machine": machine(), "cases": []}
    for name in [c.strip() for c in args.cases.split(",") if c.strip()]:
        with C.quiet():
            case = C.build_case(name, quick=args.quick, n_rows=args.rows, log=log)
            res = _time_case(case, names, args.rounds, args.single_calls)
        results["cases"].append(res)
        print(_markdown(res), flush=True)
    if args.out:
        Path(args.out).write_text(json.dumps(results, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
