"""LightGBM linear_tree models: treecomp against lightgbm's own predict, one thread, in ONE
process: `python bench/linear_speed.py [n_trees] [n_rows]`.

What it adds to `treecomp bench`: the standard cases have no linear_tree model, and the runner
times predictors built in-process; this also loads each backend's saved artifact back.

Model: a regression Booster, linear_tree=True, 200 trees of up to 31 leaves over 10 features
(10k training rows, 2% NaN). 100k fresh rows (2% NaN). Each treecomp backend (treecomp.linear:
a native leaf kernel, then the arrays kernel library's tc_linear_margins), each one's saved
artifact loaded back (a .so for every backend, backends/linear_so.py; a .tc for arrays) and
lightgbm predict(num_threads=1) run alternately: medians of 7, outputs checked bit for bit.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import lightgbm as lgb

import treecomp


def data(n: int, d: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    y = X[:, 0] * 2 + np.sin(X[:, 1] * 3) + X[:, 2] * X[:, 3] + rng.normal(scale=0.3, size=n)
    X[rng.random(X.shape) < 0.02] = np.nan
    return X, y


def main(n_trees: int = 200, n_rows: int = 100_000) -> None:
    X, y = data(10_000, 10, 0)
    t0 = time.perf_counter()
    b = lgb.train({"objective": "regression", "linear_tree": True, "num_leaves": 31,
                   "linear_lambda": 0.1, "verbose": -1, "num_threads": 1, "seed": 1},
                  lgb.Dataset(X, y), n_trees)
    f = treecomp.parse(b)
    k = [len(t.linear_feature) / max(t.n_leaves, 1) for t in f.trees]
    print(f"trained {n_trees} trees in {time.perf_counter() - t0:.1f}s; "
          f"{sum(t.n_leaves for t in f.trees)} leaves, {np.mean(k):.2f} features per leaf")
    Z, _ = data(n_rows, 10, 1)
    preds = {}
    tmp = Path(tempfile.mkdtemp(prefix="linear-speed-"))
    for be in ("arrays", "c", "llvm"):
        t0 = time.perf_counter()
        preds[be] = treecomp.compile(b, backend=be)
        print(f"compile {be}: {time.perf_counter() - t0:.2f}s")
        for suffix in (".so", ".tc") if be == "arrays" else (".so",):
            t0 = time.perf_counter()
            preds[be].save(tmp / f"{be}{suffix}")
            preds[f"{be}{suffix}"] = treecomp.load(tmp / f"{be}{suffix}")
            print(f"save + load {be}{suffix}: {time.perf_counter() - t0:.2f}s")
    want = b.predict(Z, num_threads=1)
    for be, p in preds.items():
        assert np.array_equal(p.predict(Z, n_threads=1), want), be
    times: dict[str, list[float]] = {k: [] for k in ["lightgbm", *preds]}
    for _ in range(7):
        t0 = time.perf_counter()
        b.predict(Z, num_threads=1)
        times["lightgbm"].append(time.perf_counter() - t0)
        for be, p in preds.items():
            t0 = time.perf_counter()
            p.predict(Z, n_threads=1)
            times[be].append(time.perf_counter() - t0)
    base = statistics.median(times["lightgbm"])
    for name, ts in times.items():
        m = statistics.median(ts)
        print(f"{name:10s} {m * 1e3:8.1f} ms  {m / n_rows * 1e9:7.0f} ns/row  "
              f"lightgbm/this {base / m:5.2f}x")


if __name__ == "__main__":
    main(*map(int, sys.argv[1:]))
