"""Scale-out throughput: treecomp vs the library's own predict, mapped over Dask partitions.

What it adds to `treecomp bench`: the package's runner measures engines inside one process;
this measures treecomp.dask across Dask worker processes (it needs the dask extra and
xgboost), as docs/scale-out.md describes.

``python -m bench.scaleout [--rows N] [--trees T] [--partitions P] [--repeats R]``

For 1 and 2 Dask workers (a LocalCluster of processes, one thread each) it scores the same
persisted dask array of rows with

- ``treecomp``: ``treecomp.dask.predict(compiled, x)`` (C backend, one native thread per task);
- ``xgboost``: ``XGBRegressor.predict`` (n_jobs=1) mapped over the same blocks with
  ``map_blocks``, the model shared as one graph node exactly like the Predictor,

and prints rows/s (best of R runs; each run persists the predictions on the workers and waits,
so neither the input transfer nor gathering results to the client is timed). The outputs of
both are checked to be identical first. Absolute numbers depend on the machine and on whatever
else runs on it: compare the rows within one table.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

import numpy as np


def _xgb_block(block, model):
    return model.predict(block)


def _forgotten(keys, dask_scheduler=None) -> bool:
    return not any(k in dask_scheduler.tasks for k in keys)


def _measure(client, make, repeats: int) -> float:
    from distributed import futures_of, wait
    best = float("inf")
    for i in range(repeats + 1):  # run 0 is a warm-up (ships and loads the model)
        t0 = time.perf_counter()
        y = make().persist()
        wait(y)
        if i:
            best = min(best, time.perf_counter() - t0)
        keys = [f.key for f in futures_of(y)]
        del y
        # every run builds the same keys: wait until the scheduler has dropped the last run's
        # results, or the next "run" would just find them in memory
        while not client.run_on_scheduler(_forgotten, keys):
            time.sleep(0.01)
    return best


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.scaleout", description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--features", type=int, default=20)
    ap.add_argument("--trees", type=int, default=200)
    ap.add_argument("--depth", type=int, default=6)
    ap.add_argument("--partitions", type=int, default=16)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args(argv)

    import dask
    import dask.array as da
    import xgboost as xgb
    from distributed import Client, LocalCluster

    import treecomp
    from treecomp import dask as tdask

    os.environ.setdefault("TREECOMP_CACHE_DIR", os.path.join(tempfile.gettempdir(), "treecomp-bench-cache"))
    rng = np.random.default_rng(0)
    Xtr = rng.normal(size=(20_000, args.features)).astype(np.float32)
    ytr = Xtr[:, 0] * 2 + np.sin(Xtr[:, 1] * 3) + rng.normal(scale=0.1, size=len(Xtr))
    model = xgb.XGBRegressor(n_estimators=args.trees, max_depth=args.depth, n_jobs=1).fit(Xtr, ytr)
    compiled = treecomp.compile(model, backend="c")
    chunk = -(-args.rows // args.partitions)

    print(f"XGBRegressor: {args.trees} trees, depth {args.depth}, {args.features} features; "
          f"{args.rows:,} float32 rows in {args.partitions} partitions; best of {args.repeats}")
    print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at start\n")
    rows = []
    for n_workers in (1, 2):
        with LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=True,
                          dashboard_address=":0") as cluster, Client(cluster) as client:
            # rows generated on the workers (same seed, same rows for both cluster sizes)
            x = da.random.default_rng(1).standard_normal((args.rows, args.features),
                                                         chunks=(chunk, args.features),
                                                         dtype=np.float32).persist()
            model_node = dask.delayed(model, name="bench-xgb-model", pure=True)

            def lib():
                return x.map_blocks(_xgb_block, model_node, drop_axis=1, dtype=np.float32,
                                    meta=np.empty((0,), np.float32))

            def tc():
                return tdask.predict(compiled, x)

            got, want = tc().compute(), lib().compute()
            if not np.array_equal(got, want):
                raise SystemExit(f"treecomp and xgboost disagree on {np.sum(got != want)} rows")
            for name, make in (("xgboost predict", lib), ("treecomp (c)", tc)):
                s = _measure(client, make, args.repeats)
                rows.append((n_workers, name, args.rows / s))

    base = {w: r for w, n, r in rows if n == "xgboost predict"}
    print(f"| {'workers':>7} | {'scorer':<16} | {'rows/s':>12} | {'vs xgboost':>10} |")
    print(f"|{'-' * 9}|{'-' * 18}|{'-' * 14}|{'-' * 12}|")
    for w, n, r in rows:
        print(f"| {w:>7} | {n:<16} | {r:>12,.0f} | {r / base[w]:>9.2f}x |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
