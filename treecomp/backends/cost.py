"""backend="auto"'s per-row cost model: what each way of running a forest costs, estimated
from the forest alone (no timing at compile time).

Every path treecomp can run a forest on costs, per row, a sum of a few terms of the forest
(:func:`terms`), each times a constant fitted on timings (:data:`COST`, refit by
``python -m bench.calibrate_auto``):

- ``base``: 1: what a row costs whatever the forest (the call, the output head);
- ``feats``: the row's width in features: the deep walk first transposes every feature of a
  group of rows (derived.deep_tables), used or not, and generated code's row loop pays for
  the width too (measured: about 1-1.5 ns a feature beyond 300 features);
- ``cols``: the columns a row is quantised into before a byte walk (one per used feature and
  chunk of up to 255 distinct thresholds): the byte walks' up-front price;
- ``lines``: the row's 64-byte cache lines that hold a feature the forest splits on: what every
  path brings in from memory per row, whichever order it reads it in;
- ``levels``: the trees' depths summed: one step a level for the walks that run every row to
  the bottom of a padded heap (the byte walk, the float heap walk);
- ``slots``: the heap slots summed (2^depth a tree): the level-at-a-time byte walk compares
  every node of a level, so a depth-8 tree costs 4x a depth-6 one, not 8/6;
- ``inner``: the internal nodes summed: the interval walk ("bitvec") sweeps every node;
- ``walk``: the expected depth of the leaf a row reaches, summed over the trees (each split
  taken either way with the training cover where the model records it, else half and half):
  the node steps of the walks that stop at a leaf (generated code, the compact / deep walk);
- ``wide``: ``walk`` times log2(1 + the row's width in 64-byte lines): a step that reads a
  feature of a wide row misses the nearer caches (generated code, the float walks); at least
  ``walk``, so that a path weighed by it pays for its steps on narrow rows too;
- ``touch``: the expected distinct lines of ``lines`` that ``walk`` random steps read (each
  step a feature of a used line, drawn alike), times the row's width over a 4 kB page (at
  most 1): what a walk that reads a row's features where its path goes waits for when the
  rows are not in cache. Rows narrower than a page are read in an order the prefetcher
  follows (row after row); in a wide row the walk's reads jump about pages it has not read;
- ``big``: ``walk`` times log2 of the forest's nodes over 2,048 (32 kB of 16-byte records): a
  step of a walk over tables (or code) beyond the first-level cache waits for a farther one.

A path's estimate is the dot product of its constants with these terms, in ns per row on the
machine the constants were fitted on; :func:`estimates` gives every path the forest can take,
:func:`arrays_path` the layout the arrays backend picks by itself (between its two byte walks
by a rule of its own, measured layout against layout: tables.byte_walk, bench/layout_ab.py,
docs/internals/performance-notes.md). Only ratios between paths
matter to `choose`, so the host's clock cancels. The "records" path (compact records walked as
they are: float64 input or categorical splits beyond the byte walks) has no constants: the
grid holds no such forests, and generated code keeps them, as before.

The fit (bench/calibrate_auto.py, 2026-11-28, the shared 2-core AMD EPYC (Zen 4) KVM guest,
1 thread, thread CPU time, medians of 5 rounds with arrays and c alternating, rows beyond the
32 MB L3): 96 seeded synthetic forests, XGBoost-like heaps (float32, 256-bin thresholds),
LightGBM-like leaf-wise trees of 63 leaves (float64) and random-forest-like trees (float32,
continuous thresholds), 10-5,000 features (30-100% of them used), depths 4-12, 2-500 trees
within 100k nodes; NNLS on relative error over a seeded two thirds (65 forests), each path's
constants per input dtype, pooled over both where one dtype has fewer than two timings a
constant (float32 "bitvec": none; float64 "quant": 4); "heap" (only forests without splits
take it) keeps its guess, and llvm takes c's constants (its code ran 0.93-1.23x c's time).
`auto`'s pick (choose's node limits, then the cheaper estimate) against the faster of arrays
and c, measured:

- in sample: within 10% on 52 of 65 (80%; where the estimate decides, not a node limit: 48
  of 55), worst 1.82x (6 LightGBM-like trees of depth 12 over 123 features: c 1.8x slower);
- out of sample (the other 31): within 10% on 28 of 31 (90%; where the estimate decides: 24
  of 26), worst 1.77x (24 heaps of depth 11 over 338 features, 98k nodes: above the 20k
  nodes up to which choose weighs generated code for such forests, for its build time);
- a second grid, all out of sample: 18 models trained by XGBoost, LightGBM and scikit-learn
  on the benchmark's data (bench/calibrate_auto.TRAINED: 2-300 trees, depths 4-12, 13-3,000
  features, the issue's 100-tree depth-8 shapes over 13, 28, 90, 968 and 2,000 features
  among them), timed on their test rows: within 10% on 16 of 18 (89%), worst 1.38x (5
  LightGBM trees of 31 leaves over 200 features: c 714 vs arrays 519 ns/row); the 968- and
  2,000-feature models go to arrays (2,731 vs c 2,839; 4,297 vs 5,658);
- the rule it replaced (cols * a + levels * b against levels * c, byte-walk forests only):
  37 of 65, 20 of 31 and 8 of 18, worst 3.31x, 3.56x and 5.08x (wide forests sent to c).

The timings are in bench/calibrate_auto-grid-2026-11-28.json and
bench/calibrate_auto-trained-2026-11-28.json: ``python -m bench.calibrate_auto --load
bench/calibrate_auto-grid-2026-11-28.json --validate bench/calibrate_auto-trained-2026-11-28.json``
refits and scores them without timing.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

#: the terms of the estimate, in the order COST's tuples use
TERMS = ("base", "feats", "cols", "lines", "levels", "slots", "inner", "walk", "wide", "big", "touch")

#: the paths: "quant" the byte walk over heaps, "bitvec" the interval walk, "heap" the float
#: heap walk, "compact" the deep walk over compact trees, "records" the compact records walked
#: as they are (the arrays backend's, arrays_path); "c" and "llvm" generated code
PATHS = ("quant", "bitvec", "heap", "compact", "records", "c", "llvm")

#: ns per row per unit of each term (TERMS; a term not named: 0), per input dtype and path;
#: fitted by bench/calibrate_auto.py (see the module docstring for the fit and its validation)
COST: dict[str, dict[str, dict[str, float]]] = {
    "float32": {
        "quant": {"feats": 0.3082, "cols": 0.7007, "lines": 3.809,
            "levels": 0.08373, "slots": 0.009867},
        "bitvec": {"feats": 0.02957, "cols": 2.354, "lines": 10.25, "inner": 0.03194},
        "heap": {"levels": 1.0},
        "compact": {"base": 2.246, "feats": 2.101, "big": 0.3676},
        "c": {"walk": 1.618, "wide": 0.3988, "touch": 45.85},
        "llvm": {"walk": 1.618, "wide": 0.3988, "touch": 45.85},
    },
    "float64": {
        "quant": {"feats": 0.2404, "cols": 0.657, "lines": 5.995,
            "levels": 0.07217, "slots": 0.01029},
        "bitvec": {"feats": 0.02957, "cols": 2.354, "lines": 10.25, "inner": 0.03194},
        "heap": {"levels": 1.0},
        "compact": {"base": 2.246, "feats": 2.101, "big": 0.3676},
        "c": {"walk": 0.9578, "wide": 0.8733, "touch": 33.01},
        "llvm": {"walk": 0.9578, "wide": 0.8733, "touch": 33.01},
    },
}


def used_lines(forest: Any) -> int:
    """The 64-byte lines of a row (in the input dtype) that hold a feature some split tests."""
    used = np.unique(np.concatenate([t.feature[t.left >= 0] for t in forest.trees]))
    if not len(used):
        return 0
    return len(np.unique(used.astype(np.int64) * np.dtype(forest.input_dtype).itemsize // 64))


def quant_columns(forest: Any) -> int:
    """The columns a row is quantised into for a byte walk: one per feature and chunk of up to
    255 distinct thresholds (arrays.derived.quant_chunk_size); 0 without numeric splits."""
    from .arrays.derived import quant_chunk_size
    feats, thrs = [], []
    for t in forest.trees:
        inner = (t.feature >= 0) & (t.cat_index < 0)
        feats.append(t.feature[inner])
        thrs.append(t.threshold[inner])
    f, th = np.concatenate(feats), np.concatenate(thrs)
    if not len(f):
        return 0
    pairs = np.unique(np.stack([f.astype(np.float64), th]), axis=1)
    _, per_feature = np.unique(pairs[0], return_counts=True)
    return int(np.ceil(per_feature / quant_chunk_size(per_feature)).sum())


def node_depths(forest: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(depth of every node, first node of every tree, tree of every node) over the forest's
    nodes concatenated: all trees at once, one numpy step a level."""
    trees = forest.trees
    nn = np.fromiter((t.n_nodes for t in trees), np.int64, len(trees))
    start = np.zeros(len(trees) + 1, np.int64)
    np.cumsum(nn, out=start[1:])
    tree_of = np.repeat(np.arange(len(trees)), nn)
    left = np.concatenate([t.left for t in trees]).astype(np.int64)
    right = np.concatenate([t.right for t in trees]).astype(np.int64)
    inner = left >= 0
    gl = np.where(inner, left + start[tree_of], -1)
    gr = np.where(inner, right + start[tree_of], -1)
    depth = np.zeros(len(left), np.int64)
    level, d = start[:-1], 0
    while level.size:
        depth[level] = d
        fr = level[inner[level]]
        level = np.concatenate([gl[fr], gr[fr]])
        d += 1
    return depth, start[:-1], tree_of


def expected_walk(forest: Any, depth: np.ndarray | None = None) -> float:
    """The expected number of node steps of a row, summed over the trees: each leaf's depth
    weighted by the share of rows that reach it, from the training cover where every tree
    records it, else 2^-depth (every split taken either way half the time)."""
    if depth is None:
        depth, _, _ = node_depths(forest)
    trees = forest.trees
    leaf = np.concatenate([t.left < 0 for t in trees])
    nn = np.fromiter((t.n_nodes for t in trees), np.int64, len(trees))
    tree_of = np.repeat(np.arange(len(trees)), nn)
    w = None
    if all(t.cover is not None for t in trees):
        cover = np.concatenate([t.cover for t in trees]).astype(np.float64)
        w = np.where(leaf, np.maximum(cover, 0.0), 0.0)
        tot = np.bincount(tree_of, weights=w, minlength=len(trees))
        if not (np.all(tot > 0) and np.all(np.isfinite(tot))):
            w = None
        else:
            w = w / tot[tree_of]
    if w is None:
        w = np.where(leaf, np.exp2(-np.minimum(depth, 1000).astype(np.float64)), 0.0)
        w = w / np.bincount(tree_of, weights=w, minlength=len(trees))[tree_of]
    return float((w * depth).sum())


def terms(forest: Any) -> dict[str, float]:
    """The forest's terms of the estimate (TERMS), per row."""
    depth, firsts, _ = node_depths(forest)
    tdepth = np.maximum.reduceat(depth, firsts) if len(firsts) else np.zeros(0, np.int64)
    inner = sum(int((t.left >= 0).sum()) for t in forest.trees)
    walk = expected_walk(forest, depth)
    itemsize = np.dtype(forest.input_dtype).itemsize
    lines = max(1.0, forest.n_features * itemsize / 64.0)
    used = float(max(1, used_lines(forest)))
    return {"base": 1.0, "feats": float(forest.n_features), "cols": float(quant_columns(forest)),
            "lines": used, "touch": min(1.0, forest.n_features * itemsize / 4096.0)
            * (used * -math.expm1(walk * math.log1p(-1.0 / used)) if used > 1 else min(1.0, walk)),
            "levels": float(tdepth.sum()),
            "slots": float(np.exp2(np.minimum(tdepth, 30)).sum()), "inner": float(inner),
            "walk": walk, "wide": walk * math.log2(1.0 + lines),
            "big": walk * math.log2(max(1.0, len(depth) / 2048.0))}


def estimate(path: str, t: dict[str, float], dtype: str = "float32",
             cost: dict | None = None) -> float:
    """ns per row of `path` for a forest of terms `t` (cost: COST's shape; default COST)."""
    consts = (cost or COST)["float64" if dtype == "float64" else "float32"][path]
    return float(sum(c * t[k] for k, c in consts.items()))


#: the terms each path's estimate uses (the others' constants are 0); what the refit fits
PATH_TERMS: dict[str, tuple[str, ...]] = {
    "quant": ("base", "feats", "cols", "lines", "levels", "slots"),
    "bitvec": ("base", "feats", "cols", "lines", "inner"),
    "heap": ("base", "feats", "levels", "wide", "big", "touch"),
    "compact": ("base", "feats", "walk", "big"),
    "c": ("walk", "wide", "touch"),
    "llvm": ("walk", "wide", "touch"),
}
#: the paths the arrays backend runs (it picks one itself: arrays_path)
ARRAYS_PATHS = ("quant", "bitvec", "heap", "compact", "records")


def arrays_path(forest: Any) -> str:
    """The path the arrays backend's layout="auto" runs `forest` on (its tables.flatten rule):
    the byte walk tables.byte_walk picks, "quant" (numeric heaps of depth <= 8) or "bitvec"
    (trees of <= 255 leaves), the faster by its measured rule where both can run (the cost
    model's own "quant" and "bitvec" estimates are fitted against generated code, not against
    each other: on the 72 synthetic forests of bench/layout_ab-grid-2026-11-28.json where both
    walks ran they picked one over 10% slower 19 times, worst 3.1x; that rule: once, 1.12x),
    else "heap" (every tree a float heap), else "compact" (some tree compact: float32 input
    without categorical splits takes the deep walk, derived.deep_tables), else "records" (the
    compact records walked as they are: float64 input or categorical splits)."""
    from .arrays import tables
    walk = tables.forest_byte_walk(forest)
    if walk is not None:
        return walk
    trees = forest.trees
    depth = [t.max_depth for t in trees]
    leaves = [t.n_leaves for t in trees]
    if all(not t.has_categorical and d <= 8 and 2 ** d <= max(64, 4 * n)
           for t, d, n in zip(trees, depth, leaves)):
        return "heap"
    if str(forest.input_dtype) == "float32" and not any(t.has_categorical for t in trees):
        return "compact"
    return "records"


def pick(t: dict[str, float], path: str, dtype: str = "float32", cost: dict | None = None,
         gen: str = "c") -> str:
    """"arrays" where its path `path` is estimated no dearer than generated code (`gen`: "c"
    or "llvm") for a forest of terms `t`, else `gen`. The "records" path has no constants (the
    grid has no such forests): generated code, as before the cost model (categorical trees
    of a chain of 200 levels: c 124 vs arrays 176 ns/row, 2026-11-28)."""
    if path not in (cost or COST)["float32"]:
        return gen
    return "arrays" if estimate(path, t, dtype, cost) <= estimate(gen, t, dtype, cost) else gen


def arrays_pays(forest: Any, gen: str = "c") -> bool:
    """Does the arrays backend (on the path it picks itself) beat generated code (`gen`) on
    `forest`, per row, by the cost model?"""
    dtype = "float64" if str(forest.input_dtype) == "float64" else "float32"
    return pick(terms(forest), arrays_path(forest), dtype, gen=gen) == "arrays"
