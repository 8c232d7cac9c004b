"""The reference interpreter: what the IR means, in vectorised numpy; plus the naive walker.

`predict_raw` is the oracle every backend is tested against. It walks all rows through one tree
at a time, level by level, with only the rows that have not reached a leaf still active, so deep
trees cost a loop iteration per level and never recursion. `walk_raw` is the deliberately naive
baseline of the benchmarks: one row, one node at a time, in pure Python.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from . import outputs
from .errors import UnsupportedModelError
from .inputs import as_matrix
from .ir import LINEAR_ZERO, Forest, Tree


def go_left(tree: Tree, nodes: np.ndarray, x: np.ndarray, strict: bool,
             category_rule: str = "nonneg") -> np.ndarray:
    """Direction at `nodes` for values `x` (float64 holding input-dtype values)."""
    thr = tree.threshold[nodes]
    with np.errstate(invalid="ignore"):
        left = (x < thr) if strict else (x <= thr)
    ci = tree.cat_index[nodes]
    cat = ci >= 0
    if cat.any():
        xc, cc = x[cat], ci[cat]
        nbits = 32 * tree.cat_bits.shape[1]
        with np.errstate(invalid="ignore"):
            valid = ((xc > -1) if category_rule == "trunc" else (xc >= 0)) & (xc < nbits)
            if category_rule == "integral":
                valid &= xc == np.trunc(xc)
        c = np.where(valid, xc, 0).astype(np.int64)  # trunc toward zero, like a C cast
        bit = (tree.cat_bits[cc, c >> 5] >> (c & 31).astype(np.uint32)) & 1
        left[cat] = np.where(valid, bit.astype(bool), tree.cat_other_left[cc])
    nan = np.isnan(x)
    if nan.any():
        left[nan] = tree.default_left[nodes[nan]]
    return left


def leaf_indices(tree: Tree, X64: np.ndarray, strict: bool, category_rule: str = "nonneg") -> np.ndarray:
    """Leaf reached by every row of X64 (float64 holding values of the forest's input dtype)."""
    n = X64.shape[0]
    node = np.zeros(n, np.int64)
    active = np.arange(n) if tree.n_nodes > 1 else np.arange(0)
    while active.size:
        nd = node[active]
        x = X64[active, tree.feature[nd]]
        left = go_left(tree, nd, x, strict, category_rule)
        nxt = np.where(left, tree.left[nd], tree.right[nd])
        node[active] = nxt
        active = active[tree.left[nxt] >= 0]
    return node


def tree_values(tree: Tree, leaves: np.ndarray, X64: np.ndarray) -> np.ndarray:
    """What `tree` adds for rows X64 (float64) that reached `leaves`: its leaf values or, for a
    linear tree, LightGBM's Tree::Predict: leaf_const + coeff * x feature by feature in order
    (float64, no fused multiply-add; |x| <= LINEAR_ZERO reads as 0.0, as LightGBM's C API drops
    it), and the plain leaf value for a row with NaN in any of the leaf's features."""
    if not tree.is_linear:
        return tree.value[leaves]
    ptr = tree.linear_ptr
    start, count = ptr[leaves].astype(np.int64), np.diff(ptr)[leaves]
    out = tree.leaf_const[leaves]
    nan = np.zeros(len(leaves), bool)
    rows = np.arange(len(leaves))
    for j in range(int(count.max(initial=0))):  # one step per feature position: sums in order
        rows = rows[count[rows] > j]
        pos = start[rows] + j
        x = X64[rows, tree.linear_feature[pos]]
        nan[rows] |= np.isnan(x)
        x[np.abs(x) <= LINEAR_ZERO] = 0.0
        with np.errstate(invalid="ignore", over="ignore"):
            out[rows] += tree.linear_coeff[pos] * x
    out[nan] = tree.value[leaves[nan], 0]
    return out[:, None]


def accumulate(forest: Forest, n_rows: int, leaf_value_rows) -> np.ndarray:
    """The raw margins from what each tree adds (one (n_rows, width) array per tree, in order):
    the base margins, then tree by tree in the accumulation dtype, then the average."""
    acc_t = np.dtype(forest.accumulate_dtype)
    acc = np.empty((n_rows, forest.n_outputs), acc_t)
    acc[:] = outputs.base_margins(forest).astype(acc_t)
    for i, (tree, vals) in enumerate(zip(forest.trees, leaf_value_rows)):
        o = int(forest.tree_output[i])
        with np.errstate(invalid="ignore"):  # inf - inf: a linear leaf's output on inf inputs
            acc[:, o:o + tree.width] += vals.astype(acc_t)
    if forest.average:
        acc /= acc_t.type(forest.n_trees)
    return acc


def predict_raw(forest: Forest, X: Any) -> np.ndarray:
    """Raw margins, shape (n_rows, n_outputs), dtype = forest.accumulate_dtype."""
    X64 = as_matrix(X, forest).astype(np.float64)
    strict = forest.comparison == "<"
    return accumulate(forest, X64.shape[0],
                       (tree_values(t, leaf_indices(t, X64, strict, forest.category_rule), X64)
                        for t in forest.trees))


def raw_from_leaves(forest: Forest, X64: np.ndarray, leaves: np.ndarray) -> np.ndarray:
    """predict_raw's margins from the leaf (IR node index) every row reached in every tree,
    leaves (n_rows, n_trees): treecomp.linear finds them natively."""
    return accumulate(forest, X64.shape[0],
                       (tree_values(t, leaves[:, i], X64) for i, t in enumerate(forest.trees)))


def _require_node_ids(forest: Forest) -> None:
    missing = [i for i, t in enumerate(forest.trees) if t.node_ids is None]
    if missing:
        raise UnsupportedModelError(
            f"leaf indices need the library's node ids, which this model's IR does not carry "
            f"(tree {missing[0]}; parse the model again to record them)")


def apply(forest: Forest, X: Any) -> np.ndarray:
    """Leaf ids numbered as the source library numbers its nodes (Tree.node_ids): sklearn's
    `apply`, XGBoost's and LightGBM's pred_leaf=True (the latter's leaf index), shaped and typed
    as the library returns them (Forest.leaf_layout, outputs.leaf_ids; (n_rows, n_trees) int64
    for the IR's own "trees"); trees in IR order (sklearn GradientBoosting: stage by stage,
    class by class within a stage). Rows are checked as the library's apply checks them
    (outputs.apply_allows_nan). UnsupportedModelError where the IR does not carry the ids (IR
    files written before they were recorded)."""
    _require_node_ids(forest)
    nan_ok = outputs.apply_allows_nan(forest)
    X64 = as_matrix(X, forest if nan_ok == forest.allow_nan else forest.replace(allow_nan=nan_ok))
    X64 = X64.astype(np.float64)
    strict = forest.comparison == "<"
    out = np.empty((X64.shape[0], forest.n_trees), np.int64)
    for i, t in enumerate(forest.trees):
        out[:, i] = t.node_ids[leaf_indices(t, X64, strict, forest.category_rule)]
    return outputs.leaf_ids(forest, out)


def leaf_id_forest(forest: Forest, node_index: bool = False) -> Forest:
    """The forest whose raw margins are its leaf ids: tree i's leaves hold its node_ids (exact
    small integers in float64; with node_index=True their own IR node index) in output column
    i, from 0; routing unchanged, no linear leaves; rows checked as the library's apply checks
    them (outputs.apply_allows_nan). Any backend compiles it, so leaf ids come at native speed
    (loader.Predictor.apply, treecomp.linear)."""
    if not node_index:
        _require_node_ids(forest)
    no_linear = dict.fromkeys(("leaf_const", "linear_ptr", "linear_feature", "linear_coeff"))
    trees = tuple(dataclasses.replace(
        t, value=np.where(t.left[:, None] < 0, np.arange(t.n_nodes)[:, None] if node_index
                          else t.node_ids[:, None], 0), **no_linear) for t in forest.trees)
    return forest.replace(trees=trees, n_outputs=forest.n_trees,
                          tree_output=np.arange(forest.n_trees), base_score=np.zeros(forest.n_trees),
                          accumulate_dtype="float64", average=False, transform="identity",
                          decision="none", classes=(), exp_lib="libm", transform_params=(),
                          base_link="identity", output_divisor=1, leaf_layout="trees", label_shape="rows",
                          allow_nan=outputs.apply_allows_nan(forest))


def walk_raw(forest: Forest, X: Any) -> np.ndarray:
    """The naive baseline: a pure-Python node walk per row and tree (same results, slowly)."""
    X64 = as_matrix(X, forest).astype(np.float64)
    strict = forest.comparison == "<"
    rule = forest.category_rule
    per_tree = []
    for t in forest.trees:
        left, right, feat, thr = t.left.tolist(), t.right.tolist(), t.feature.tolist(), t.threshold.tolist()
        dleft, cidx = t.default_left.tolist(), t.cat_index.tolist()
        nbits = 32 * t.cat_bits.shape[1]
        leaves = np.empty(X64.shape[0], np.int64)
        for r, row in enumerate(X64.tolist()):
            nd = 0
            while left[nd] >= 0:
                v = row[feat[nd]]
                if v != v:  # NaN
                    go = dleft[nd]
                elif cidx[nd] >= 0:
                    if (-1 < v if rule == "trunc" else 0 <= v) and v < nbits and \
                            (rule != "integral" or v == int(v)):
                        c = int(v)
                        go = bool((int(t.cat_bits[cidx[nd], c >> 5]) >> (c & 31)) & 1)
                    else:
                        go = bool(t.cat_other_left[cidx[nd]])
                else:
                    go = v < thr[nd] if strict else v <= thr[nd]
                nd = left[nd] if go else right[nd]
            leaves[r] = nd
        per_tree.append(tree_values(t, leaves, X64))
    return accumulate(forest, X64.shape[0], per_tree)


# -- library-shaped outputs ---------------------------------------------------------------------
def predict(forest: Forest, X: Any) -> np.ndarray:
    return outputs.predict_values(forest, predict_raw(forest, X))


def predict_proba(forest: Forest, X: Any):
    return outputs.predict_proba(forest, predict_raw(forest, X))


def decision_function(forest: Forest, X: Any) -> np.ndarray:
    return outputs.decision_values(forest, predict_raw(forest, X))


def score_samples(forest: Forest, X: Any) -> np.ndarray:
    """IsolationForest's score_samples (TypeError for other models)."""
    return outputs.score_samples(forest, predict_raw(forest, X))
