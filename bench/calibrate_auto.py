"""Refit and validate backend="auto"'s cost model (treecomp.backends.cost) on a grid of forests.

treecomp.backends.cost estimates what each path costs per row (the arrays backend's byte walk,
interval walk, float heap walk and compact / deep walk; generated code from c and llvm) as a
dot product of constants with a few terms of the forest (columns quantised, levels, heap slots,
internal nodes, expected node steps, row width). This script:

1. builds a grid of synthetic forests (seeded; no training, so a grid of a hundred models takes
   seconds) over 10-5,000 features, depths 4-12 and 2-500 trees, in the shapes the libraries
   make: "xgb" depth-wise heaps with float32 input and thresholds on a 256-bin grid (XGBoost's
   hist), "lgbm" leaf-wise trees of 31-255 leaves with float64 input (LightGBM), "rf" deep
   leaf-wise trees with continuous thresholds (scikit-learn's forests);
2. times the arrays backend (on the path it picks itself: cost.arrays_path) and the c
   backend (llvm with --llvm) on every forest, in one process, on the same rows (more than
   the last-level cache holds, see rows_for), 1 thread: the backends alternate within each
   round, each round's time is the thread's CPU time (other processes of a shared machine
   do not count), and the median of the rounds is kept;
3. fits each path's constants (cost.PATH_TERMS) by non-negative least squares on relative
   error on a training subset (a seeded random two thirds of the models) and reports, in
   sample and out of sample (the other third, and with --validate a second grid of trained
   models: TRAINED), how often `auto`'s pick (choose's node limits, then the cheaper
   estimate) is within 10% of the faster backend measured, and the worst ratio; the previous
   rule (PREVIOUS) and the current constants are scored the same way;
4. prints the refit (COST's shape, to paste into treecomp/backends/cost.py) and the
   out-of-sample table in Markdown.

    python -m bench.calibrate_auto                   # the grid, ~10 minutes on 2 cores
    python -m bench.calibrate_auto --quick           # a dozen models, a minute: a smoke test
    python -m bench.calibrate_auto --save t.json     # keep the timings ...
    python -m bench.calibrate_auto --load t.json     # ... and refit from them without timing
    python -m bench.calibrate_auto --trained --save v.json   # time the second grid ...
    python -m bench.calibrate_auto --load t.json --validate v.json   # ... and validate on it

Run it on a quiet machine after the kernels change; the constants are in ns per row on that
machine, but `auto` only compares paths, so the host's clock cancels.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

#: bins of the synthetic thresholds (XGBoost's and LightGBM's histograms: 256)
GRID_BINS = 256


# -- synthetic forests ---------------------------------------------------------------------------
def _tree(rng: np.random.Generator, depth: int, n_leaves: int, feats: np.ndarray,
          grid: np.ndarray | None, p_stop: float, width: int = 1):
    """One tree grown leaf by leaf: `n_leaves` leaves at most, `depth` levels at most; each
    split takes a random leaf above the depth limit (the shallowest first with probability
    1 - p_stop, so p_stop = 0 grows a complete heap), a random feature of `feats`, a threshold
    from `grid` (a bin edge between the 10% and 90% quantiles) or, without a grid, continuous."""
    from treecomp.ir import Tree
    left, right, feat, thr, dep = [-1], [-1], [-1], [0.0], [0]
    open_ = [0]
    while len(open_) and (len(left) + 1) // 2 < n_leaves:
        if rng.random() < p_stop:
            k = int(rng.integers(len(open_)))
        else:
            k = 0  # breadth first
        i = open_.pop(k)
        feat[i] = int(feats[rng.integers(len(feats))])
        if grid is not None:
            thr[i] = float(grid[rng.integers(GRID_BINS // 10, GRID_BINS - GRID_BINS // 10)])
        else:
            thr[i] = float(rng.normal() * 0.8)
        left[i], right[i] = len(left), len(left) + 1
        for _ in range(2):
            left.append(-1); right.append(-1); feat.append(-1); thr.append(0.0); dep.append(dep[i] + 1)
            if dep[i] + 1 < depth:
                open_.append(len(left) - 1)
    n = len(left)
    value = rng.normal(size=(n, width)).astype(np.float32).astype(np.float64)
    value[np.array(left) >= 0] = 0.0
    return Tree(left=left, right=right, feature=feat, threshold=thr,
                default_left=rng.random(n) < 0.5, value=value)


def synthetic_forest(kind: str, n_trees: int, depth: int, n_features: int, seed: int,
                     used: float = 1.0, leaves: int | None = None):
    """A seeded forest of one of the libraries' shapes (see the module docstring): `used` of
    the features are split on; `leaves` caps the leaves of a tree (default: "xgb" 2^depth,
    "lgbm" 63, "rf" 2^depth / 3)."""
    from scipy.stats import norm
    from treecomp.ir import Forest
    rng = np.random.default_rng(seed)
    feats = rng.permutation(n_features)[:max(1, int(round(used * n_features)))]
    grid = norm.ppf((np.arange(GRID_BINS) + 1.0) / (GRID_BINS + 1))
    if kind == "xgb":
        grid = grid.astype(np.float32).astype(np.float64)
        trees = [_tree(rng, depth, leaves or 2 ** depth, feats, grid, 0.1) for _ in range(n_trees)]
        return Forest(trees=tuple(trees), n_features=n_features, n_outputs=1,
                      tree_output=np.zeros(n_trees, np.int32), base_score=[0.0],
                      input_dtype="float32", comparison="<", accumulate_dtype="float32",
                      provenance=f"calibrate_auto {kind} seed={seed}")
    if kind == "lgbm":
        trees = [_tree(rng, depth, leaves or 63, feats, grid, 0.6) for _ in range(n_trees)]
        return Forest(trees=tuple(trees), n_features=n_features, n_outputs=1,
                      tree_output=np.zeros(n_trees, np.int32), base_score=[0.0],
                      input_dtype="float64", comparison="<=", accumulate_dtype="float64",
                      provenance=f"calibrate_auto {kind} seed={seed}")
    if kind == "rf":
        trees = [_tree(rng, depth, leaves or max(2, 2 ** depth // 3), feats, None, 0.5)
                 for _ in range(n_trees)]
        return Forest(trees=tuple(trees), n_features=n_features, n_outputs=1,
                      tree_output=np.zeros(n_trees, np.int32), base_score=[0.0],
                      input_dtype="float32", comparison="<=", accumulate_dtype="float64",
                      average=True, provenance=f"calibrate_auto {kind} seed={seed}")
    raise ValueError(f"unknown kind {kind!r}")


# -- the paths -----------------------------------------------------------------------------------
def rows_for(forest, max_rows: int = 20_000, max_bytes: int = 96 << 20, seed: int = 0):
    """Normal rows (the synthetic thresholds are normal quantiles): max_rows, or fewer to keep
    within max_bytes, which is well above the last-level cache (32 MB on the dev box): repeated
    calls over rows that stay in cache flatter generated code on wide rows (its scattered
    reads of a row wait on memory; the quantiser's sequential ones are prefetched), and
    `treecomp bench`'s 100k rows never stay in cache."""
    dt = np.dtype(forest.input_dtype)
    n = int(max(500, min(max_rows, max_bytes // (forest.n_features * dt.itemsize))))
    return np.random.default_rng(seed).normal(size=(n, forest.n_features)).astype(dt)


def time_paths(forest, paths: dict[str, tuple[str, dict]], reps: int = 5, X=None,
               min_call_s: float = 0.004) -> dict[str, float]:
    """ns per row of every path on the same rows, 1 thread: one round calls every path in
    turn (each repeated until min_call_s), `reps` rounds, the median per path."""
    import treecomp
    if X is None:
        X = rows_for(forest)
    preds = {}
    for name, (backend, opts) in paths.items():
        preds[name] = treecomp.compile(forest, backend=backend, n_threads=1, **opts)
        preds[name].predict_raw(X[:256])
    calls = {}
    for name, p in preds.items():  # how many calls make one timing
        t0 = time.perf_counter()
        p.predict_raw(X)
        calls[name] = max(1, int(min_call_s / max(time.perf_counter() - t0, 1e-9)))
    times: dict[str, list[float]] = {k: [] for k in preds}  # thread CPU time: a shared box's
    # other processes do not count, its cache and frequency effects still do
    for _ in range(reps):
        for name, p in preds.items():
            t0 = time.thread_time()
            for _ in range(calls[name]):
                p.predict_raw(X)
            times[name].append((time.thread_time() - t0) / calls[name] / len(X) * 1e9)
    return {k: float(np.median(v)) for k, v in times.items()}


# -- the grid ------------------------------------------------------------------------------------
def grid(n: int = 48, seed: int = 33, max_nodes: int = 100_000) -> list[dict]:
    """`n` seeded model specs: kind (xgb / lgbm / rf, in turn), features log-uniform over
    10-5,000, depth 4-12, trees log-uniform over 2-500 (fewer where the forest would pass
    max_nodes nodes: generated code is only weighed up to CODEGEN_MAX_NODES_F64), a used
    share of the features of 0.3-1."""
    rng = np.random.default_rng(seed)
    kinds = ("xgb", "lgbm", "rf")
    out = []
    for i in range(n):
        kind = kinds[i % 3]
        nf = int(round(np.exp(rng.uniform(np.log(10), np.log(5000)))))
        depth = int(rng.integers(4, 13))
        trees = int(round(np.exp(rng.uniform(np.log(2), np.log(500)))))
        leaves = {"xgb": 2 ** depth, "lgbm": 63, "rf": max(2, 2 ** depth // 3)}[kind]
        trees = max(2, min(trees, max_nodes // (2 * leaves)))
        out.append(dict(kind=kind, trees=trees, depth=depth, features=nf,
                        used=round(float(rng.uniform(0.3, 1.0)), 2), seed=1000 + i))
    return out


def measure(specs: list[dict], reps: int, llvm: bool = False) -> list[dict]:
    """Time arrays (its own layout choice) and c (and llvm) on every spec; with the terms."""
    from treecomp import backends, toolchain
    from treecomp.backends import cost
    rows = []
    for s in specs:
        f = synthetic_forest(s["kind"], s["trees"], s["depth"], s["features"], s["seed"], s["used"])
        paths = {"arrays": ("arrays", {})}
        if toolchain.have_compiler():
            paths["c"] = ("c", {})
        if llvm and "llvm" in backends.names():
            paths["llvm"] = ("llvm", {})
        t = time_paths(f, paths, reps=reps)
        r = dict(s, nodes=sum(tr.n_nodes for tr in f.trees), dtype=str(f.input_dtype),
                 path=cost.arrays_path(f), terms=cost.terms(f), ns=t)
        rows.append(r)
        print(f"{s['kind']:4} {s['trees']:3} trees d{s['depth']:<2} {s['features']:4} feats "
              f"({r['path']:7}) " + "  ".join(f"{k} {v:9.1f}" for k, v in t.items()), flush=True)
    return rows


# -- the second grid: trained models ------------------------------------------------------------
#: (library, task, trees, depth or leaves, features): models trained on the benchmark's seeded
#: data (treecomp.benchmark.cases.make_data), timed on its test rows: real thresholds and
#: real branch statistics, the out-of-sample check of a fit on the synthetic grid
TRAINED = (
    ("xgb", "binary", 2, 6, 100), ("xgb", "binary", 5, 6, 37), ("xgb", "binary", 20, 6, 177),
    ("xgb", "binary", 10, 4, 500), ("xgb", "binary", 30, 4, 3000), ("xgb", "binary", 300, 6, 50),
    ("xgb", "binary", 50, 10, 50), ("xgb", "binary", 100, 8, 13), ("xgb", "binary", 100, 8, 28),
    ("xgb", "regression", 100, 8, 90), ("xgb", "binary", 100, 8, 968),
    ("xgb", "binary", 100, 8, 2000),
    ("lgbm", "binary", 5, 31, 200), ("lgbm", "binary", 100, 63, 50), ("lgbm", "binary", 40, 255, 500),
    ("rf", "regression", 20, 10, 20), ("et", "multiclass", 10, 12, 20), ("rf", "binary", 10, 8, 1000),
)


def trained_model(lib: str, task: str, trees: int, size: int, nf: int, n_train: int = 4000):
    """A fitted model of TRAINED's shape and its test rows (seeded)."""
    from treecomp.benchmark.cases import make_data
    Xtr, ytr = make_data(n_train, nf, 1, task, 5 if task == "multiclass" else 2)
    n_test = int(min(20_000, max(4000, (96 << 20) // (4 * nf))))  # see rows_for
    Xte, _ = make_data(n_test, nf, 2, task, 5 if task == "multiclass" else 2)
    if lib == "xgb":
        import xgboost as xgb
        cls = xgb.XGBRegressor if task == "regression" else xgb.XGBClassifier
        m = cls(n_estimators=trees, max_depth=size, tree_method="hist", n_jobs=2, random_state=0)
    elif lib == "lgbm":
        import lightgbm as lgb
        m = lgb.LGBMClassifier(n_estimators=trees, num_leaves=size, n_jobs=2, verbose=-1,
                               min_child_samples=5, random_state=0)
        Xte = Xte.astype(np.float64)
    else:
        from sklearn import ensemble
        cls = {("rf", "regression"): ensemble.RandomForestRegressor,
               ("rf", "binary"): ensemble.RandomForestClassifier,
               ("et", "multiclass"): ensemble.ExtraTreesClassifier}[(lib, task)]
        m = cls(n_estimators=trees, max_depth=size, n_jobs=2, random_state=0)
    return m.fit(Xtr, ytr), Xte


def measure_trained(reps: int, specs=TRAINED, codegen_max: int = 100_000) -> list[dict]:
    import treecomp
    from treecomp.backends import cost
    rows = []
    for lib, task, trees, size, nf in specs:
        model, X = trained_model(lib, task, trees, size, nf)
        f = treecomp.parse(model)
        X = np.ascontiguousarray(X.astype(f.input_dtype))
        paths = {"arrays": ("arrays", {})}
        nodes = sum(tr.n_nodes for tr in f.trees)
        if nodes <= codegen_max:
            paths["c"] = ("c", {})
        t = time_paths(f, paths, reps=reps, X=X)
        r = dict(kind=f"{lib}-{task}", trees=trees, depth=size, features=nf, nodes=nodes,
                 dtype=str(f.input_dtype), path=cost.arrays_path(f), terms=cost.terms(f), ns=t,
                 trained=True)
        rows.append(r)
        print(f"{lib}-{task} {trees} trees size {size} {nf} feats ({r['path']}) "
              + "  ".join(f"{k} {v:9.1f}" for k, v in t.items()), flush=True)
    return rows


# -- fit and validation --------------------------------------------------------------------------
def fit(rows: list[dict], base: dict | None = None) -> dict:
    """COST refitted on `rows`: per dtype and path, the constants of cost.PATH_TERMS[path] by
    non-negative least squares on relative error. A path with fewer than two timings a
    constant in one dtype is fitted on both dtypes' timings together; one without enough in
    either keeps base's constants (default COST); llvm, when not timed, takes c's."""
    import copy
    from treecomp.backends import cost
    out = copy.deepcopy(base or cost.COST)

    def points(path, dtypes):
        return [(r["terms"], r["ns"]["arrays" if path in cost.ARRAYS_PATHS else path])
                for r in rows if r["dtype"] in dtypes and
                (r["path"] == path if path in cost.ARRAYS_PATHS else path in r["ns"])]

    for dtype in ("float32", "float64"):
        for path, used in cost.PATH_TERMS.items():
            pts = points(path, (dtype,))
            if len(pts) < 2 * len(used):
                pts = points(path, ("float32", "float64"))
            if len(pts) < 2 * len(used):
                if path == "llvm":
                    out[dtype]["llvm"] = dict(out[dtype]["c"])
                continue
            out[dtype][path] = nnls_relative(pts, used)
    return out


def nnls_relative(pts: list[tuple[dict, float]], used: tuple[str, ...]) -> dict[str, float]:
    """Non-negative constants c minimising the squared relative error sum((c . t) / y - 1)^2."""
    from scipy.optimize import nnls
    A = np.array([[t[k] for k in used] for t, _ in pts], float)
    y = np.array([v for _, v in pts], float)
    scale = A.max(axis=0)
    scale[scale == 0] = 1.0
    x, _ = nnls(A / scale / y[:, None], np.ones(len(y)))
    x = x / scale
    return {k: float(f"{v:.4g}") for k, v in zip(used, x) if v > 0}


#: the rule the cost model replaced (treecomp 2026-11-21): quantisable forests (byte walk or
#: interval walk) went to arrays where cols * a + levels * b <= levels * c, every other forest
#: within the node limits to c; (a, b, c) per input dtype
PREVIOUS = {"float32": (2.11, 0.198, 1.87), "float64": (2.7, 0.26, 1.8)}


def previous_pick(r: dict) -> str:
    """The previous rule's pick for a timed model `r` (PREVIOUS)."""
    a, b, c = PREVIOUS[r["dtype"]]
    t = r["terms"]
    if r["path"] in ("quant", "bitvec"):
        return "arrays" if t["cols"] * a + t["levels"] * b <= t["levels"] * c else "c"
    return "c"


def score(rows: list[dict], table) -> list[dict]:
    """Per model: auto's pick under `table` (COST's shape: arrays or c by the cheaper estimate;
    "previous": the previous rule), the fastest measured backend, and the ratio of the pick's
    time to the fastest."""
    from treecomp import backends
    from treecomp.backends import cost
    out = []
    for r in rows:
        if "c" not in r["ns"]:
            continue
        limit = backends.CODEGEN_MAX_NODES_F64 if r["path"] in ("quant", "bitvec") or \
            r["dtype"] == "float64" else backends.CODEGEN_MAX_NODES
        limited = r["nodes"] > limit
        if limited:  # choose sends it to arrays whatever the estimates (build time)
            pick = "arrays"
        elif table == "previous":
            pick = previous_pick(r)
        else:
            pick = cost.pick(r["terms"], r["path"], r["dtype"], table)
        fastest = min(("arrays", "c"), key=lambda k: r["ns"][k])
        out.append(dict(r, pick=pick, fastest=fastest, limited=limited,
                        ratio=r["ns"][pick] / r["ns"][fastest]))
    return out


def summary(scored: list[dict], label: str) -> str:
    if not scored:
        return f"{label}: no models"
    ratios = np.array([s["ratio"] for s in scored])
    limited = sum(1 for s in scored if s["ratio"] > 1.10 and s["limited"])
    free = [s for s in scored if not s["limited"]]
    free_ok = sum(1 for s in free if s["ratio"] <= 1.10)
    worst = scored[int(ratios.argmax())]
    return (f"{label}: within 10% of the fastest on {int((ratios <= 1.10).sum())} of {len(scored)} "
            f"({(ratios <= 1.10).mean():.0%}), worst x{ratios.max():.2f} ({worst['kind']} "
            f"{worst['trees']} trees d{worst['depth']} {worst['features']} features: picked "
            f"{worst['pick']}); {limited} of the misses above choose's node limit (build "
            f"time decides there); where the estimate decides: {free_ok} of {len(free)}")


def table_md(scored: list[dict]) -> str:
    lines = ["| kind | trees | depth | features | path | arrays ns/row | c ns/row | pick | fastest | ratio |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for s in scored:
        lines.append(f"| {s['kind']} | {s['trees']} | {s['depth']} | {s['features']} | {s['path']} | "
                     f"{s['ns']['arrays']:.0f} | {s['ns']['c']:.0f} | {s['pick']} | {s['fastest']} | "
                     f"{s['ratio']:.2f} |")
    return "\n".join(lines)


def refresh_terms(rows: list[dict]) -> list[dict]:
    """Recompute the terms of saved timings whose terms are not cost.TERMS (the model grew a
    term since): the synthetic forests are made again from their seeds, the trained models
    trained again (seeded)."""
    import treecomp
    from treecomp.backends import cost
    for r in rows:
        if set(r["terms"]) == set(cost.TERMS):
            continue
        if r.get("trained"):
            lib, task = r["kind"].split("-", 1)
            f = treecomp.parse(trained_model(lib, task, r["trees"], r["depth"], r["features"])[0])
        else:
            f = synthetic_forest(r["kind"], r["trees"], r["depth"], r["features"], r["seed"], r["used"])
        r["terms"] = cost.terms(f)
    return rows


def load_rows(name: str) -> list[dict]:
    """Timings saved by --save, their terms refreshed (and saved back) where the model grew."""
    with open(name) as fh:
        rows = json.load(fh)
    before = json.dumps([r["terms"] for r in rows])
    refresh_terms(rows)
    if json.dumps([r["terms"] for r in rows]) != before:
        with open(name, "w") as fh:
            json.dump(rows, fh, indent=1)
    return rows


def main(argv=None) -> None:
    from treecomp.backends import cost
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", type=int, default=48)
    ap.add_argument("--quick", action="store_true", help="a dozen small models (a smoke test)")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--llvm", action="store_true", help="time the llvm backend too (slow builds)")
    ap.add_argument("--trained", action="store_true",
                    help="time the second grid (trained models, TRAINED) instead")
    ap.add_argument("--save")
    ap.add_argument("--load", nargs="+", help="timings saved by --save (the synthetic grid)")
    ap.add_argument("--validate", nargs="+", help="timings of a second grid (--trained --save): "
                    "every one out of sample")
    ap.add_argument("--seed", type=int, default=33)
    args = ap.parse_args(argv)
    if args.trained:
        rows = measure_trained(args.reps)
        if args.save:
            with open(args.save, "w") as fh:
                json.dump(rows, fh, indent=1)
        print(summary(score(rows, "previous"), "previous rule"))
        print(summary(score(rows, cost.COST), "current constants"))
        return
    if args.load:
        rows = []
        for name in args.load:
            rows += load_rows(name)
    else:
        specs = grid(12 if args.quick else args.models, args.seed,
                     max_nodes=5_000 if args.quick else 100_000)
        rows = measure(specs, 3 if args.quick else args.reps, args.llvm)
        if args.save:
            with open(args.save, "w") as fh:
                json.dump(rows, fh, indent=1)
    split = np.random.default_rng(args.seed).random(len(rows)) < 2 / 3
    train = [r for r, s in zip(rows, split) if s]
    test = [r for r, s in zip(rows, split) if not s]
    new = fit(train)
    print("refit COST = " + json.dumps(new, indent=4))
    for label, table in (("previous rule", "previous"), ("current", cost.COST), ("refit", new)):
        print(summary(score(train, table), f"{label}, in sample ({len(train)} models)"))
        print(summary(score(test, table), f"{label}, out of sample ({len(test)} models)"))
    second = []
    for name in args.validate or ():
        second += load_rows(name)
    if second:
        for label, table in (("previous rule", "previous"), ("current", cost.COST), ("refit", new)):
            print(summary(score(second, table), f"{label}, second grid ({len(second)} trained models)"))
    print("\nout of sample, refit:\n" + table_md(score(test + second, new)))


if __name__ == "__main__":
    main()
