"""SHAP contributions, one thread, in ONE process: treecomp's Predictor.contributions against
XGBoost's own predict(pred_contribs=True), LightGBM's own predict(pred_contrib=True) and, where
daal4py is installed, oneDAL's (daal4py.mb.convert_model(...).predict(X, pred_contribs=True)).

`python bench/shap_speed.py [n_rows] [reps]` on the bench's 500-tree cases (treecomp.benchmark.
cases: xgb-binary, 500 trees of depth 6 over 50 features; lgbm-binary, 500 trees of 63 leaves):
calls interleaved, each timed `reps` times, medians; the largest difference to each library's
values is printed too (relative to the row's largest |value| and to its sum of |values|).
The bench runner measures the same in its report: `python -m bench --strategies shap`.
"""

from __future__ import annotations

import statistics
import sys
import time

import numpy as np

import treecomp
from treecomp.benchmark.cases import build_case


def timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def rel_diff(a: np.ndarray, b: np.ndarray) -> str:
    """The largest difference over the rows, relative to the row's largest |value| and to the
    row's sum of |values|."""
    a, b = a.reshape(len(a), -1), b.reshape(len(b), -1)
    d = np.abs(a - b).max(axis=1)
    return (f"max diff / row max {(d / np.abs(b).max(axis=1)).max():.1e}, "
            f"/ row L1 {(d / np.abs(b).sum(axis=1)).max():.1e}")


def main() -> None:
    n_rows = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
    reps = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    for name in ("xgb-binary", "lgbm-binary"):
        case = build_case(name, log=print)
        X = np.ascontiguousarray(case.X[:n_rows])
        p = treecomp.compile(case.model, backend="arrays")
        t0 = time.perf_counter()
        p.contributions(X[:1], n_threads=1)  # tables prepared once per model
        prep = time.perf_counter() - t0
        runs = {"treecomp": lambda: p.contributions(X, n_threads=1)}
        if name.startswith("xgb"):
            import xgboost as xgb
            booster = case.model.get_booster()
            booster.set_param({"nthread": 1})
            dm = xgb.DMatrix(X, nthread=1)
            runs["xgboost"] = lambda: booster.predict(dm, pred_contribs=True)
            try:
                import daal4py
                daal4py.daalinit(1)  # one thread, as the others
                d4p = daal4py.mb.convert_model(booster)
                runs["daal4py"] = lambda: d4p.predict(X, pred_contribs=True)
            except Exception as exc:  # noqa: BLE001 - not installed, or no SHAP in this version
                print(f"  daal4py: not measured ({type(exc).__name__}: {exc})"[:200])
        else:
            booster = case.model.booster_
            runs["lightgbm"] = lambda: booster.predict(X, pred_contrib=True, num_threads=1)
        times: dict[str, list[float]] = {k: [] for k in runs}
        outs = {}
        for _ in range(reps):
            for k, fn in runs.items():
                dt, outs[k] = timed(fn)
                times[k].append(dt)
        med = {k: statistics.median(v) for k, v in times.items()}
        print(f"{case.title}: {n_rows} rows, 1 thread, median of {reps} "
              f"(treecomp: {p.feature_state['explainer'].isa} path, prepared in {prep:.2f} s)")
        ours = outs["treecomp"]
        for k, v in med.items():
            line = f"  {k:9s} {v * 1e3 / n_rows:9.3f} ms/row  x{v / med['treecomp']:6.1f}"
            if k != "treecomp":
                line += "  " + rel_diff(ours, np.asarray(outs[k], np.float64))
            print(line)


if __name__ == "__main__":
    main()
