"""The arrays backend's layouts side by side on sparse heaps: when does the quantised heap walk
("quant") pay for its padding?

layout="auto" takes the byte walk over heaps only while the padding is bounded
(tables.quant_heaps); otherwise a forest of trees of <= 128 leaves takes the interval walk
("bitvec"), else float heaps or the compact / deep walk. This script times, per forest, the
layout auto takes and every other layout the forest can take (quant, bitvec, compact), in one
process, on the same rows, 1 thread: the layouts alternate within each round, a round's time is
the thread's CPU time, the median of the rounds is kept (bench.calibrate_auto.time_paths).

Forests: seeded synthetic XGBoost-like trees (float32 input, thresholds on a 256-bin grid),
depths 6, 7, 8, leaves from the full 2^depth down to 1/8 of it (grown leaf-wise with a random
leaf split 60% of the time, so sparse trees still reach the depth limit, as XGBoost's do),
13, 50, 100, 200 and 500 features; and XGBoost models trained with varied min_child_weight (the issue's
100-tree depth-8 model over 13 features among them).

    python -m bench.layout_ab              # ~3 minutes on a quiet core
    python -m bench.layout_ab --quick      # a few forests
    python -m bench.layout_ab --save t.json
    python -m bench.layout_ab --held-out 30 --save h.json   # forests off the grid
    python -m bench.layout_ab --fit t.json --validate h.json  # refit tables.QUANT_VS_BITVEC

The timings of 2026-11-28 are in bench/layout_ab-grid-2026-11-28.json and
bench/layout_ab-heldout-2026-11-28.json.
"""

from __future__ import annotations

import argparse
import json

import numpy as np

from bench.calibrate_auto import GRID_BINS, _tree, rows_for, time_paths


def sparse_forest(n_trees: int, depth: int, n_features: int, share: float, seed: int):
    """`n_trees` XGBoost-like trees of depth <= `depth` with about share x 2^depth leaves."""
    from scipy.stats import norm
    from treecomp.ir import Forest
    rng = np.random.default_rng(seed)
    grid = norm.ppf((np.arange(GRID_BINS) + 1.0) / (GRID_BINS + 1)).astype(np.float32).astype(np.float64)
    feats = np.arange(n_features)
    leaves = max(2, int(round(share * 2 ** depth)))
    trees = [_tree(rng, depth, leaves, feats, grid, 0.0 if share >= 1 else 0.6) for _ in range(n_trees)]
    return Forest(trees=tuple(trees), n_features=n_features, n_outputs=1,
                  tree_output=np.zeros(n_trees, np.int32), base_score=[0.0],
                  input_dtype="float32", comparison="<", accumulate_dtype="float32",
                  provenance=f"layout_ab depth={depth} share={share} seed={seed}")


def chain_forest(n_trees: int, depth: int, n_features: int, share: float, seed: int):
    """`n_trees` chains of `depth` splits (every right child a leaf, thresholds on the 256-bin
    grid, random features): the sparsest trees of that depth, depth + 1 leaves."""
    from scipy.stats import norm
    from treecomp.ir import Forest, Tree
    rng = np.random.default_rng(seed)
    grid = norm.ppf((np.arange(GRID_BINS) + 1.0) / (GRID_BINS + 1)).astype(np.float32).astype(np.float64)
    trees = []
    for _ in range(n_trees):
        n = 2 * depth + 1
        left, right = np.full(n, -1), np.full(n, -1)
        feat, thr = np.full(n, -1), np.zeros(n)
        for d in range(depth):
            left[2 * d], right[2 * d] = 2 * d + 2, 2 * d + 1
            feat[2 * d] = rng.integers(n_features)
            thr[2 * d] = grid[rng.integers(GRID_BINS // 10, GRID_BINS - GRID_BINS // 10)]
        value = rng.normal(size=(n, 1)).astype(np.float32).astype(np.float64)
        value[left >= 0] = 0.0
        trees.append(Tree(left=left, right=right, feature=feat, threshold=thr,
                          default_left=rng.random(n) < 0.5, value=value))
    return Forest(trees=tuple(trees), n_features=n_features, n_outputs=1,
                  tree_output=np.zeros(n_trees, np.int32), base_score=[0.0],
                  input_dtype="float32", comparison="<", accumulate_dtype="float32",
                  provenance=f"layout_ab chains depth={depth} seed={seed}")


def trained_forest(n_trees: int, depth: int, nf: int, mcw: float, n_train: int = 4000):
    """An XGBoost binary model (hist, max_depth `depth`, min_child_weight `mcw`) on the
    benchmark's data, as treecomp's IR, and its test rows."""
    import xgboost as xgb
    import treecomp
    from treecomp.benchmark.cases import make_data
    Xtr, ytr = make_data(n_train, nf, 1, "binary", 2)
    Xte, _ = make_data(20_000, nf, 2, "binary", 2)
    m = xgb.XGBClassifier(n_estimators=n_trees, max_depth=depth, min_child_weight=mcw,
                          tree_method="hist", n_jobs=2, random_state=0).fit(Xtr, ytr)
    return treecomp.frontends.parse(m), np.ascontiguousarray(Xte, np.float32)


def describe(forest) -> dict:
    from treecomp.backends import cost
    from treecomp.backends.arrays import tables
    d = np.array([t.max_depth for t in forest.trees])
    n = np.array([t.n_leaves for t in forest.trees])
    return {"trees": len(d), "depth": int(d.max()), "leaves_mean": float(n.mean()),
            "leaves_max": int(n.max()), "features": forest.n_features,
            "slots": int((2 ** d).sum()), "slots_per_leaf": float((2 ** d).sum() / n.sum()),
            "auto": cost.arrays_path(forest), "inner": int((n - 1).sum()),
            "used": tables.used_features([t.feature[t.left >= 0] for t in forest.trees],
                                         forest.n_features),
            "old_bound": int(np.maximum(64, 4 * n).sum()),
            "bitvec_ok": bool(n.max() <= tables.BITVEC_MAX_LEAVES)}


def measure_one(forest, X=None, reps: int = 7) -> dict:
    info = describe(forest)
    paths = {"auto": ("arrays", {}), "quant": ("arrays", {"layout": "quant"}),
             "compact": ("arrays", {"layout": "compact"})}
    if info["bitvec_ok"]:
        paths["bitvec"] = ("arrays", {"layout": "bitvec"})
    info["ns"] = time_paths(forest, paths, reps=reps, X=X)
    return info


def specs(quick: bool) -> list[tuple]:
    out = []
    for depth in (6, 7, 8):
        for share in ((1.0, 0.25) if quick else (1.0, 0.5, 0.25, 0.125, 0.0625)):
            for nf in ((13,) if quick else (13, 50, 100, 200, 500)):
                out.append(("syn", 100, depth, nf, share))
    out += [] if quick else [("chain", 100, 8, nf, 1.0) for nf in (13, 200)]
    out += [("xgb", 100, 8, 13, 1.0)] if quick else \
        [("xgb", 100, 8, 13, mcw) for mcw in (1.0, 5.0, 20.0)] + [("xgb", 100, 8, 200, 1.0),
                                                                   ("xgb", 100, 6, 13, 5.0)]
    return out


def held_out(n: int = 30, seed: int = 1033) -> list[tuple]:
    """`n` seeded specs off the grid (to validate a rule fitted on specs()): trees log-uniform
    over 10-400, depth 6-8, leaves a share of 2^depth log-uniform over 1/10-1, features
    log-uniform over 10-1,000; every fifth a trained XGBoost model (min_child_weight 1-30)."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        trees = int(round(np.exp(rng.uniform(np.log(10), np.log(400)))))
        depth = int(rng.integers(6, 9))
        nf = int(round(np.exp(rng.uniform(np.log(10), np.log(1000)))))
        if i % 5 == 4:
            out.append(("xgb", trees, depth, nf, float(np.round(np.exp(rng.uniform(0, np.log(30))), 1))))
        else:
            out.append(("syn", trees, depth, nf, float(np.round(np.exp(rng.uniform(np.log(0.1), 0)), 3))))
    return out


# -- the rule: quantised heap walk or interval walk (treecomp.backends.arrays.tables.quant_pays) --
def design(rows: list[dict]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(terms, quant ns, bitvec ns, trees) of the rows where both walks ran; the terms in
    QUANT_VS_BITVEC's order, signed so that quant - bitvec ~ terms @ constants."""
    rows = [r for r in rows if "bitvec" in r["ns"]]
    T = np.array([r["trees"] for r in rows], float)
    S = np.array([r["slots"] for r in rows], float)
    I = np.array([r["inner"] for r in rows], float)
    U = np.array([r["used"] for r in rows], float)
    A = np.stack([S, S * U, -T, -I, -I * U], 1)
    return A, np.array([r["ns"]["quant"] for r in rows]), np.array([r["ns"]["bitvec"] for r in rows]), T


def fit_rule(rows: list[dict]) -> dict[str, float]:
    """QUANT_VS_BITVEC's constants: least squares on quant - bitvec relative to the faster."""
    A, q, b, _ = design(rows)
    best = np.minimum(q, b)
    w = np.linalg.lstsq(A / best[:, None], (q - b) / best, rcond=None)[0]
    return dict(zip(("slot", "slot_feat", "tree", "inner", "inner_feat"), (float(x) for x in w)))


def score_rule(rows: list[dict], k: dict[str, float]) -> str:
    """How often the rule with constants `k` picks a walk within 10% of the faster one."""
    A, q, b, _ = design(rows)
    pick_q = A @ np.array([k["slot"], k["slot_feat"], k["tree"], k["inner"], k["inner_feat"]]) <= 0
    r = np.where(pick_q, q, b) / np.minimum(q, b)
    rq = q / np.minimum(q, b)
    return (f"within 10% on {int((r <= 1.1).sum())} of {len(r)}, worst {r.max():.2f}x "
            f"(always quant: {int((rq <= 1.1).sum())}, worst {rq.max():.2f}x)")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--held-out", type=int, default=0, help="time N specs off the grid instead")
    ap.add_argument("--save")
    ap.add_argument("--fit", metavar="GRID.json", help="fit quant_pays's constants on saved timings")
    ap.add_argument("--validate", metavar="HELDOUT.json", help="with --fit: score them here too")
    a = ap.parse_args(argv)
    if a.fit:
        from treecomp.backends.arrays.tables import QUANT_VS_BITVEC
        with open(a.fit) as fh:
            grid_rows = json.load(fh)
        k = fit_rule(grid_rows)
        print("fit:", {n: float(f"{v:.3g}") for n, v in k.items()})
        for label, consts in (("fit", k), ("tables.QUANT_VS_BITVEC", QUANT_VS_BITVEC)):
            print(f"{label} on {a.fit}: {score_rule(grid_rows, consts)}")
            if a.validate:
                with open(a.validate) as fh:
                    print(f"{label} on {a.validate}: {score_rule(json.load(fh), consts)}")
        return
    rows = []
    todo = held_out(a.held_out) if a.held_out else specs(a.quick)
    for i, (kind, trees, depth, nf, x) in enumerate(todo):
        if kind in ("syn", "chain"):
            f = (sparse_forest if kind == "syn" else chain_forest)(
                trees, depth, nf, x, seed=(1033 if a.held_out else 33) + i)
            X = rows_for(f)
        else:
            f, X = trained_forest(trees, depth, nf, x)
        r = measure_one(f, X, a.reps)
        r.update(kind=kind, param=x)
        rows.append(r)
        ns = "  ".join(f"{k} {v:7.1f}" for k, v in r["ns"].items())
        print(f"{kind} t{trees} d{depth} nf{nf} {x:<5} leaves {r['leaves_mean']:6.1f} "
              f"slots/leaf {r['slots_per_leaf']:5.2f} auto={r['auto']:7s} | {ns}", flush=True)
    if a.save:
        with open(a.save, "w") as fh:
            json.dump(rows, fh, indent=1)


if __name__ == "__main__":
    main()
