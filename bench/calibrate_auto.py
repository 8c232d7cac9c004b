"""Check (and refit) backend="auto"'s choice between the byte walks and generated code.

What it adds to `treecomp bench`: the runner times the standard cases; this trains a grid of
small models that spans the cost model's terms and prints a refit of treecomp.backends'
BYTE_WALK_COST, a tool for whoever changes the arrays kernels or the auto rule.

treecomp.backends.byte_walk_pays estimates per row  cols * a + levels * b  (quantise the row's
columns, then walk) against  levels * c  (generated code), with (a, b, c) = BYTE_WALK_COST per
input dtype. This script trains small XGBoost (float32 input) and LightGBM (float64 input)
models over a grid of trees x depth x features, times the arrays backend with the byte walks
and the c backend on the same rows in one process (1 thread, the minimum of several calls
each), and prints per model: the rule's pick, the faster backend, and what picking by the rule
costs; then a least-squares refit of (a, b) and c for the kind.

    python -m bench.calibrate_auto            # both kinds, ~5-10 minutes on 2 cores
    python -m bench.calibrate_auto --kind xgboost --rows 20000
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import treecomp
from treecomp import backends, frontends
from treecomp.backends.arrays import tables as arrays_tables

TREES = (5, 20, 80)
DEPTHS = (3, 6, 10, 14)
FEATURES = (10, 50, 200)


def _time(p, X, reps: int) -> float:
    p.predict_raw(X[:64])
    best = float("inf")
    for _ in range(reps):
        t = time.perf_counter()
        p.predict_raw(X)
        best = min(best, time.perf_counter() - t)
    return best / len(X) * 1e9


def _model(kind: str, trees: int, depth: int, nf: int, seed: int):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(4000, nf)).astype(np.float32)
    y = (X[:, : min(nf, 8)] @ rng.normal(size=min(nf, 8)) + 0.5 * rng.normal(size=len(X)) > 0).astype(int)
    if kind == "xgboost":
        import xgboost as xgb
        m = xgb.XGBClassifier(n_estimators=trees, max_depth=depth, tree_method="hist", n_jobs=1,
                              learning_rate=0.2, random_state=seed)
    else:
        import lightgbm as lgb
        m = lgb.LGBMClassifier(n_estimators=trees, num_leaves=min(2 ** depth, 128), max_depth=depth,
                               min_child_samples=5, n_jobs=1, verbose=-1, random_state=seed)
    return m.fit(X, y)


def run(kind: str, n_rows: int, reps: int) -> list[dict]:
    rows = []
    seed = 0
    for trees in TREES:
        for depth in DEPTHS:
            for nf in FEATURES:
                seed += 1
                model = _model(kind, trees, depth, nf, seed)
                forest = frontends.parse(model)
                if not arrays_tables.quant_eligible(forest):
                    continue
                X = np.random.default_rng(seed).normal(size=(n_rows, nf))
                X = X.astype(np.float32 if kind == "xgboost" else np.float64)
                pa = treecomp.compile(forest, backend="arrays", n_threads=1)
                pc = treecomp.compile(forest, backend="c", n_threads=1)
                ta, tc = _time(pa, X, reps), _time(pc, X, reps)
                cols, levels = backends.byte_walk_terms(forest)
                pick = "arrays" if backends.byte_walk_pays(forest) else "c"
                cost = (ta if pick == "arrays" else tc) / min(ta, tc)
                rows.append(dict(trees=trees, depth=depth, nf=nf, cols=cols, levels=levels,
                                 arrays=ta, c=tc, pick=pick, cost=cost))
                print(f"{kind:8} {trees:3} trees d{depth:<2} {nf:3} feats  cols {cols:4} levels {levels:5}  "
                      f"arrays {ta:8.1f}  c {tc:8.1f} ns/row  rule: {pick:6} x{cost:.2f}", flush=True)
    return rows


def refit(rows: list[dict]) -> tuple[float, float, float]:
    """least squares: arrays ~ cols * a + levels * b, c ~ levels * c"""
    A = np.array([[r["cols"], r["levels"]] for r in rows], float)
    (a, b), *_ = np.linalg.lstsq(A, np.array([r["arrays"] for r in rows]), rcond=None)
    L = np.array([r["levels"] for r in rows], float)
    c = float(L @ np.array([r["c"] for r in rows]) / (L @ L))
    return float(a), float(b), c


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kind", choices=["xgboost", "lightgbm", "both"], default="both")
    ap.add_argument("--rows", type=int, default=20000)
    ap.add_argument("--reps", type=int, default=5)
    args = ap.parse_args(argv)
    kinds = ["xgboost", "lightgbm"] if args.kind == "both" else [args.kind]
    for kind in kinds:
        rows = run(kind, args.rows, args.reps)
        costs = np.array([r["cost"] for r in rows])
        dtype = "float32" if kind == "xgboost" else "float64"
        print(f"{kind}: current BYTE_WALK_COST[{dtype!r}] = {backends.BYTE_WALK_COST[dtype]}: "
              f"within 10% of the faster on {int((costs <= 1.10).sum())} of {len(rows)}, "
              f"worst x{costs.max():.2f}")
        a, b, c = refit(rows)
        print(f"{kind}: refit (a, b, c) = ({a:.2f}, {b:.3f}, {c:.2f})")


if __name__ == "__main__":
    main()
