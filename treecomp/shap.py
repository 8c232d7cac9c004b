"""SHAP contributions: exact path-dependent TreeSHAP over the IR (Predictor.contributions).

What is computed is what XGBoost's ``predict(pred_contribs=True)`` (``approx_contribs=False``)
and LightGBM's ``predict(pred_contrib=True)`` compute: the Shapley values of the tree's
expectation game E[f(x) | x_S] estimated by the training cover of each node (Lundberg et al.
2020, "From local explanations to global understanding with explainable AI for trees",
Algorithm 2), summed over the trees, plus a bias column = base_score + every tree's
cover-weighted mean leaf value. The cover is each node's training weight: XGBoost's
``sum_hessian``, LightGBM's ``internal_count`` / ``leaf_count`` (what each library's TreeSHAP
reads; scikit-learn's weighted_n_node_samples, as the shap package reads); a model whose
trees carry none (Tree.cover is None) is refused.

Shapes: (n_rows, n_features + 1) for one output; (n_rows, n_outputs, n_features + 1) for
several (XGBoost's layout for multiclass; LightGBM's is this reshaped to (n_rows, -1)). The
bias is the last column. float64 throughout.

Exactness: rows are routed exactly as the model predicts (thresholds, NaN, categories), but
the arithmetic differs from the libraries': XGBoost runs the recurrences in float32, LightGBM
in float64 in its own order, and this module precomputes per leaf (below). Shapley values are
sums of products of cover ratios, so the results agree to rounding: against XGBoost each
value within 1e-6 of the row's sum of |contributions| (XGBoost's float32: ~6e-8 per operation,
accumulated over the trees; measured 2.5e-7 on 500 trees of depth 6, 1.3e-6 of the row's
largest |contribution|), against LightGBM within 1e-9 of it (measured 2e-15 on the bench's
500 trees of 63 leaves, 1.2e-14 of the row's largest |contribution|); oneDAL's (daal4py) are
~1e-6 of the row's sum from either; each row sums to the raw margin as closely.
A child with zero cover gives 0 here where XGBoost's float division by it gives NaN.

Algorithm (runtime/kernels/shap.c): for one leaf with d distinct features on its root path,
feature k has a zero fraction z_k (the product of cover(child) / cover(parent) over the path's
nodes on k) and a one fraction o_k in {0, 1} (does the row take the path's way at all of them).
Two ways, chosen per tree:
- tables (trees whose paths all have up to TABLE_MAX_D nodes, while the model's tables stay
  within TABLE_BUDGET, the smallest trees first): the leaf's Shapley values depend on the row
  only through the mask of the o_k, so the coefficients of every pattern of nodes the row does
  not follow are computed once per model (Fast TreeSHAP v2, Yang 2021: 2^path length x d
  float64 per leaf); a row's patterns come from one pass over each tree's nodes, and then a row
  costs d multiply-adds per leaf.
- Linear TreeSHAP (Bifet et al. 2022) for the other trees: the leaf's term for feature k is
  value * (o_k - z_k) * integral_0^1 prod_{i != k} (o_i u + z_i (1 - u)) du, a polynomial of
  degree < d integrated exactly by ceil(d / 2) Gauss-Legendre points; the products are carried
  down the tree and the value-weighted sums up it, so a row costs O(nodes x points) per tree
  against the recurrences' O(leaves x d^2). All its terms are products of positive factors
  except the (o - z) differences, so it keeps the recurrences' accuracy (measured above).
The kernel runs a row at a time (isa "scalar", portable) or, on CPUs with AVX2 / AVX-512 /
NEON (chosen at run time as the arrays backend chooses its path; SVE runs the NEON code),
Linear TreeSHAP for 4 / 8 / 4 rows at once, a row per vector lane: the same arithmetic in the
same order per lane, so the same bits given the same tables, 4-5x faster on x86 (on ARM,
1.3-1.9x cheaper by instruction-count estimates: docs/benchmarks.md). Tables then lose to Linear TreeSHAP (TABLES): by default
only the one-row path uses them.
reference_contributions runs the recurrences themselves.
Paths are prepared with vectorised numpy steps, one per tree level (no recursion).
"""

from __future__ import annotations

import ctypes
from typing import Any

import numpy as np

from .backends.arrays.kernel import resolve_isa
from .backends.arrays.native import NATIVE_ISAS, native_isas, native_library
from .errors import UnsupportedModelError
from .inputs import as_matrix
from .interp import go_left
from .ir import Forest
from .loader import CPUS, check_threads, pool, register_feature
from .outputs import base_margins

#: trees whose root-to-leaf paths have at most this many nodes get per-pattern tables
#: (2^path length x d float64 per leaf; beyond 8, Linear TreeSHAP is as fast: measured on the
#: bench's LightGBM model, 2026-11-24) ...
TABLE_MAX_D = 8
#: ... and a table of at most this many bytes per tree: larger ones (a full depth-6 tree over
#: distinct features: ~190 KB) miss the cache per row, and Linear TreeSHAP was faster there
#: (the bench's XGBoost model, 2026-11-24) ...
TABLE_TREE_BYTES = 64 << 10
#: ... while the model's tables stay within this many bytes (the other trees: Linear TreeSHAP)
TABLE_BUDGET = 256 << 20
#: tables at all: True, False, or None = on the one-row (scalar) path only. The several-row
#: kernels (AVX2, AVX-512) run Linear TreeSHAP 3-4x faster than a row at a time, which is faster
#: than the tables from depth 3 on (300 XGBoost trees over 50 features, 512 rows, AVX-512,
#: 2026-11-24: depth 3 0.0075 vs 0.0215 ms/row with tables, depth 5 0.050 vs 0.171)
TABLES: bool | None = None
#: Linear TreeSHAP trees keep 1 / g per node and point (2 x points float64 per node) within this
INVERSE_BUDGET = 256 << 20
#: SHAP costs ~0.1 ms a row on a 500-tree model: threads pay off from a few rows on
MIN_ROWS_PER_THREAD = 16
_RULES = {"nonneg": 0, "trunc": 1, "integral": 2}
_P = ctypes.c_void_p


class _Model(ctypes.Structure):
    _fields_ = [(n, ctypes.c_int64) for n in ("n_trees", "n_features", "n_outputs", "strict",
                                               "cat_rule", "max_nodes", "max_nq")] + [
        (n, _P) for n in ("node0", "leaf0", "tree_out", "tree_width", "feat", "left", "right",
                          "cat", "thr", "dleft", "cat_words", "cat_off", "cat_nw",
                          "cat_other_left", "leaf_d", "leaf_plen", "leaf_poff", "leaf_uoff",
                          "leaf_toff", "leaf_voff", "p_node", "p_left", "p_slot", "u_feat", "u_z",
                          "values", "tables", "depth", "leaf_node", "p_pos", "tree_nq", "tree_qoff",
                          "quad_u", "quad_w", "n_prev", "n_z", "tree_ioff", "n_inv")] + [
        ("scale", ctypes.c_double)]


def check_cover(forest: Forest) -> None:
    """UnsupportedModelError unless every tree that splits records its nodes' cover (and no
    leaf holds a linear model: TreeSHAP explains constant leaves)."""
    if forest.is_linear:
        raise UnsupportedModelError("SHAP contributions of linear-tree models (LightGBM "
                                    "linear_tree) are not supported: TreeSHAP explains constant leaves")
    if forest.transform == "weighted_median":
        raise UnsupportedModelError("SHAP contributions of AdaBoostRegressor are not supported: its "
                                    "prediction is a weighted median of its trees, not a sum")
    for i, t in enumerate(forest.trees):
        if t.n_nodes > 1 and t.cover is None:
            raise UnsupportedModelError(
                f"SHAP contributions need each node's training cover, and tree {i} records none "
                "(XGBoost sum_hessian, LightGBM internal_count / leaf_count, scikit-learn "
                "weighted_n_node_samples; XGBoost vector-leaf trees, LightGBM zero_as_missing "
                "trees expanded by treecomp, CatBoost models and IR files written without cover "
                "have none)")
        if t.n_nodes > 1 and np.any(t.cover[t.left >= 0] <= 0):
            raise UnsupportedModelError(f"SHAP contributions: tree {i} has a split node with zero "
                                        "cover (its cover ratios are undefined)")


def _paths(forest: Forest, tables: bool = True) -> dict[str, np.ndarray]:
    """Per leaf of the whole forest: its path entries and distinct features (see module doc);
    tables: give the trees that qualify per-pattern tables (else Linear TreeSHAP for all)."""
    sizes = np.array([t.n_nodes for t in forest.trees], np.int64)
    node0 = np.concatenate([[0], np.cumsum(sizes)])
    cat = lambda f: np.concatenate([f(t) for t in forest.trees])  # noqa: E731
    left, right = cat(lambda t: t.left).astype(np.int64), cat(lambda t: t.right).astype(np.int64)
    tree_of = np.repeat(np.arange(len(sizes)), sizes)
    internal = left >= 0
    gl, gr = left + node0[tree_of], right + node0[tree_of]
    cover = cat(lambda t: t.cover if t.cover is not None else np.ones(t.n_nodes))
    parent = np.full(node0[-1], -1, np.int64)
    parent[gl[internal]] = np.flatnonzero(internal)
    parent[gr[internal]] = np.flatnonzero(internal)
    is_left = np.zeros(node0[-1], bool)
    is_left[gl[internal]] = True
    feat = cat(lambda t: t.feature).astype(np.int64)
    leaves = np.flatnonzero(~internal)  # in tree order
    # walk every leaf up to its root at once, one numpy step per level
    e_leaf, e_node, e_left, e_ratio = [], [], [], []
    cur, who = leaves.copy(), np.arange(len(leaves))
    while cur.size:
        par = parent[cur]
        up = par >= 0
        cur, who, par = cur[up], who[up], par[up]
        e_leaf.append(who); e_node.append(par); e_left.append(is_left[cur])  # noqa: E702
        e_ratio.append(cover[cur] / cover[par])
        cur = par
    e_leaf, e_node, e_left, e_ratio = (np.concatenate(a) if a else np.zeros(0, t) for a, t in zip(
        (e_leaf, e_node, e_left, e_ratio), (np.int64, np.int64, bool, np.float64)))
    order = np.lexsort((feat[e_node], e_leaf))  # by leaf, then feature
    e_leaf, e_node, e_left, e_ratio = e_leaf[order], e_node[order], e_left[order], e_ratio[order]
    ef = feat[e_node]
    new = np.ones(len(ef), bool)
    new[1:] = (e_leaf[1:] != e_leaf[:-1]) | (ef[1:] != ef[:-1])
    group = np.cumsum(new) - 1                  # distinct (leaf, feature) pairs
    starts = np.flatnonzero(new)
    u_leaf = e_leaf[starts]
    u_z = np.multiply.reduceat(e_ratio, starts) if len(starts) else np.zeros(0)
    n_leaves = len(leaves)
    leaf_d = np.bincount(u_leaf, minlength=n_leaves)
    leaf_uoff = np.concatenate([[0], np.cumsum(leaf_d)])[:-1]
    leaf_plen = np.bincount(e_leaf, minlength=n_leaves)
    leaf_poff = np.concatenate([[0], np.cumsum(leaf_plen)])[:-1]
    slot = group - leaf_uoff[e_leaf]
    # tables: per pattern of path depths where the row turns away (2^path length) x d, given
    # to whole trees (a tree without them runs Linear TreeSHAP), the smallest trees first
    leaf_tree = tree_of[leaves]
    n_trees = len(sizes)
    tsize = np.where(leaf_plen <= TABLE_MAX_D, (1 << np.minimum(leaf_plen, TABLE_MAX_D)) * leaf_d, 0)
    tree_tsize = np.bincount(leaf_tree, tsize, minlength=n_trees).astype(np.int64)
    short = np.bincount(leaf_tree, leaf_plen > TABLE_MAX_D, minlength=n_trees) == 0
    short &= tree_tsize * 8 <= TABLE_TREE_BYTES
    by_size = np.argsort(np.where(short, tree_tsize, np.iinfo(np.int64).max), kind="stable")
    tree_use = np.zeros(n_trees, bool)
    tree_use[by_size] = np.cumsum(tree_tsize[by_size]) * 8 <= TABLE_BUDGET
    tree_use &= short & tables
    use = tree_use[leaf_tree]
    tsize = np.where(use, tsize, 0)
    leaf_toff = np.where(use, np.concatenate([[0], np.cumsum(tsize)])[:-1], -1)
    # Linear TreeSHAP: ceil(d / 2) Gauss-Legendre points integrate its degree < d exactly
    tree_d = np.zeros(n_trees, np.int64)
    np.maximum.at(tree_d, leaf_tree, leaf_d)
    tree_nq = np.where(tree_use, 0, np.maximum(1, (tree_d + 1) // 2)).astype(np.int32)
    quad_u, quad_w, qoff = [np.zeros(1)], [np.zeros(1)], {}
    for nq in np.unique(tree_nq[tree_nq > 0]):
        qoff[nq] = sum(map(len, quad_u))
        x, wq = np.polynomial.legendre.leggauss(int(nq))
        quad_u.append((x + 1) / 2)
        quad_w.append(wq / 2)
    tree_qoff = np.array([qoff.get(n, 0) for n in tree_nq], np.int64)
    # their nodes' 1 / g at each point (o = 0, 1), while within the budget: no division per row
    isize = np.where(tree_nq > 0, 2 * sizes * tree_nq, 0)
    keep = np.cumsum(isize) * 8 <= INVERSE_BUDGET
    tree_ioff = np.where(keep & (tree_nq > 0), np.concatenate([[0], np.cumsum(isize)])[:-1], -1)
    n_inv = np.zeros(max(1, int(isize[keep].sum())))
    ratio = np.ones(node0[-1])
    ratio[gl[internal]] = cover[gl[internal]] / cover[internal]
    ratio[gr[internal]] = cover[gr[internal]] / cover[internal]
    widths = np.array([t.width for t in forest.trees], np.int64)
    values = np.concatenate([t.value[t.left < 0].ravel() for t in forest.trees])
    leaf_voff = np.concatenate([[0], np.cumsum(widths[leaf_tree])])[:-1]
    # each leaf's expected value: value * prod of its cover ratios (z over its features)
    zprod = np.ones(n_leaves)
    np.multiply.at(zprod, u_leaf, u_z)
    depth = np.concatenate([t.depths() for t in forest.trees])
    return {"node0": node0, "depth": depth.astype(np.int32), "p_pos": depth[e_node].astype(np.int32),
            "leaf_node": (leaves - node0[leaf_tree]).astype(np.int32), "leaf0": np.concatenate([[0], np.cumsum(np.bincount(leaf_tree, minlength=len(sizes)))]),
            "leaf_d": leaf_d.astype(np.int32), "leaf_plen": leaf_plen.astype(np.int32),
            "leaf_poff": leaf_poff, "leaf_uoff": leaf_uoff, "leaf_toff": leaf_toff,
            "leaf_voff": leaf_voff, "p_node": (e_node - node0[tree_of[e_node]]).astype(np.int32),
            "p_left": e_left.astype(np.uint8), "p_slot": slot.astype(np.int32),
            "u_feat": feat[e_node[starts]].astype(np.int32), "u_z": u_z, "values": values,
            "tables": np.zeros(int(tsize.sum())), "widths": widths.astype(np.int32),
            "leaf_ev": values * np.repeat(zprod, widths[leaf_tree]), "leaf_tree": leaf_tree,
            "tree_nq": tree_nq, "tree_qoff": tree_qoff, "quad_u": np.concatenate(quad_u),
            "quad_w": np.concatenate(quad_w), "n_prev": np.zeros(node0[-1], np.int32), "n_z": ratio,
            "tree_ioff": tree_ioff.astype(np.int64), "n_inv": n_inv}


def expected_values(forest: Forest, prep: dict | None = None) -> np.ndarray:
    """The bias column: the base margins + each tree's cover-weighted mean leaf value (per
    output)."""
    prep = prep or _paths(forest)
    ev = base_margins(forest)
    scale = 1.0 / forest.n_trees if forest.average else 1.0
    lt, widths = prep["leaf_tree"], prep["widths"]
    col = np.repeat(forest.tree_output[lt], widths[lt]) + (
        np.arange(len(prep["values"])) - np.repeat(prep["leaf_voff"], widths[lt]))
    sums = np.zeros(forest.n_outputs)
    np.add.at(sums, col, prep["leaf_ev"])
    return ev + sums * scale


class Explainer:
    """A forest's SHAP tables, prepared once per Predictor (contributions below)."""

    def __init__(self, forest: Forest, isa: str = "auto", tables: bool | None = None):
        """isa: the kernel's path, "scalar" (a row at a time), "avx2", "avx512", "neon" or "sve"
        (several rows per group, a row per vector lane; "sve" runs the NEON code: the same
        values bit for bit, given the same tables),
        or "auto" (the best this CPU runs, as the arrays backend's isa="auto" picks it).
        tables: per-pattern tables for the trees that qualify (default: TABLES)."""
        check_cover(forest)
        self.forest, self.lib = forest, native_library()
        if isa == "auto":
            isa = resolve_isa("auto")
            isa = isa if isa in NATIVE_ISAS else "scalar"
        elif isa not in native_isas():
            raise ValueError(f"SHAP kernel: isa={isa!r} is not available here (one of "
                             f"{', '.join(native_isas())}, or 'auto')")
        self.isa = isa
        tables = TABLES if tables is None else tables
        self.tables = isa == "scalar" if tables is None else bool(tables)
        p = self.prep = _paths(forest, self.tables)
        trees = forest.trees
        flat = lambda f, dt: np.ascontiguousarray(np.concatenate([f(t) for t in trees]), dt)  # noqa: E731
        k_off = np.concatenate([[0], np.cumsum([t.cat_bits.shape[0] for t in trees])])[:-1]
        p["feat"] = flat(lambda t: t.feature, np.int32)
        p["left"], p["right"] = flat(lambda t: t.left, np.int32), flat(lambda t: t.right, np.int32)
        p["cat"] = np.ascontiguousarray(np.concatenate(
            [np.where(t.cat_index >= 0, t.cat_index + k, -1) for t, k in zip(trees, k_off)]), np.int32)
        p["thr"], p["dleft"] = flat(lambda t: t.threshold, np.float64), flat(lambda t: t.default_left, np.uint8)
        p["cat_nw"] = np.array([t.cat_bits.shape[1] for t in trees for _ in range(t.cat_bits.shape[0])] or [1], np.int32)
        p["cat_words"] = np.concatenate([t.cat_bits.ravel() for t in trees] + [np.zeros(1, np.uint32)])
        p["cat_off"] = np.concatenate([[0], np.cumsum(p["cat_nw"].astype(np.int64))])[:-1]
        p["cat_other_left"] = np.concatenate([t.cat_other_left for t in trees] + [np.zeros(1, bool)]).astype(np.uint8)
        p["tree_out"] = np.ascontiguousarray(forest.tree_output, np.int32)
        p["tree_width"] = p["widths"]
        for k in ("node0", "leaf0", "leaf_poff", "leaf_uoff", "leaf_toff", "leaf_voff", "cat_off",
                  "tree_qoff"):
            p[k] = np.ascontiguousarray(p[k], np.int64)
        self._keep = p
        self.model = _Model(n_trees=forest.n_trees, n_features=forest.n_features,
                            n_outputs=forest.n_outputs, strict=int(forest.comparison == "<"),
                            cat_rule=_RULES[forest.category_rule],
                            max_nodes=int(max(t.n_nodes for t in trees)),
                            max_nq=int(p["tree_nq"].max(initial=0)),
                            scale=1.0 / forest.n_trees if forest.average else 1.0,
                            **{n: p[n].ctypes.data for n, _ in _Model._fields_[7:-1]})
        if self.lib.tc_shap_sizeof_model() != ctypes.sizeof(_Model):
            raise RuntimeError("the SHAP kernel does not match treecomp/shap.py (struct layout)")
        fn = self.lib.tc_shap_tables
        fn.restype, fn.argtypes = ctypes.c_int32, [_P, ctypes.c_int64]
        if fn(ctypes.byref(self.model), len(p["leaf_d"])) != 0:
            raise RuntimeError("treecomp SHAP kernel: table preparation failed")
        self._rows = self.lib.tc_shap_rows
        self._rows.restype = ctypes.c_int32
        self._rows.argtypes = [_P, _P, ctypes.c_int64, _P, ctypes.c_int32]
        self.bias = expected_values(forest, p)
        self._isa = NATIVE_ISAS.index(self.isa)

    def rows(self, X64: np.ndarray, out: np.ndarray) -> None:
        """Add rows' contributions (no bias) into out[(n, n_outputs, n_features + 1)]; the GIL
        is released (ctypes), so threads may run disjoint row ranges."""
        rc = self._rows(ctypes.byref(self.model), X64.ctypes.data, len(X64), out.ctypes.data,
                        self._isa) if len(X64) else 0
        if rc == -2:
            raise MemoryError("treecomp SHAP kernel: out of memory")
        if rc != 0:
            raise RuntimeError(f"treecomp SHAP kernel: the {self.isa} path does not run on this "
                               f"CPU (code {rc})")

    def matrix(self, X: Any) -> np.ndarray:
        """X as float64 holding values of the model's input dtype (as it is routed)."""
        return np.ascontiguousarray(as_matrix(X, self.forest), np.float64)

    def contributions(self, X: Any, threads: int, submit: Any) -> np.ndarray:
        """Predictor.contributions: rows split over up to `threads` calls of `submit`."""
        X64 = self.matrix(X)
        n = len(X64)
        out = np.zeros((n, self.forest.n_outputs, self.forest.n_features + 1))
        threads = max(1, min(threads, n // MIN_ROWS_PER_THREAD))
        b = np.linspace(0, n, threads + 1).astype(int)
        if threads == 1:
            self.rows(X64, out)
        for f in [submit(self.rows, X64[i:j], out[i:j]) for i, j in zip(b[:-1], b[1:])] if threads > 1 else []:
            f.result()
        return self.shaped(out)

    def shaped(self, out: np.ndarray) -> np.ndarray:
        out[:, :, -1] += self.bias
        return library_layout(self.forest, out)


def library_layout(forest: Forest, out: np.ndarray) -> np.ndarray:
    """Contributions (n, n_outputs, n_features + 1) laid out as the source library returns them:
    (n, n_features + 1) for one output; several outputs (n, n_outputs, n_features + 1) as
    XGBoost's pred_contribs, (n, n_outputs * (n_features + 1)) as LightGBM's pred_contrib (each
    output's block in turn). Always float64 (XGBoost's own are float32: computed in float32)."""
    if forest.n_outputs == 1:
        return out[:, 0, :]
    return out.reshape(len(out), -1) if forest.leaf_layout == "lightgbm" else out


# -- the reference: Algorithm 2 as the libraries write it, with an explicit stack ----------------
def reference_contributions(forest: Forest, X: Any) -> np.ndarray:
    """Slow, independent TreeSHAP (Lundberg et al. 2020, Algorithm 2, the recursion of XGBoost's
    CalculateContributions / LightGBM's TreeSHAP run on an explicit stack of path copies), in
    float64, shaped like Predictor.contributions. For tests."""
    check_cover(forest)
    X64 = as_matrix(X, forest).astype(np.float64)
    nf, no = forest.n_features, forest.n_outputs
    out = np.zeros((len(X64), no, nf + 1))
    scale = 1.0 / forest.n_trees if forest.average else 1.0
    strict = forest.comparison == "<"
    for ti, t in enumerate(forest.trees):
        o = int(forest.tree_output[ti])
        if t.n_nodes == 1:
            continue
        for r, x in enumerate(X64):
            phi = out[r, o:o + t.width]
            # stack: (node, path [feature, z, o, w] rows, z, o, feature)
            stack = [(0, [], 1.0, 1.0, -1)]
            while stack:
                node, path, pz, po, pf = stack.pop()
                path = [list(e) for e in path]
                _extend(path, pz, po, pf)
                if t.left[node] < 0:
                    for i in range(1, len(path)):
                        w = _unwound_sum(path, i)
                        phi[:, path[i][0]] += w * (path[i][2] - path[i][1]) * t.value[node] * scale
                    continue
                f = int(t.feature[node])
                hot_left = bool(go_left(t, np.array([node]), np.array([x[f]]), strict,
                                         forest.category_rule)[0])
                hot, cold = (t.left[node], t.right[node]) if hot_left else (t.right[node], t.left[node])
                iz, io = 1.0, 1.0
                k = next((k for k in range(1, len(path)) if path[k][0] == f), None)
                if k is not None:  # a feature seen before on the path: merge, as the libraries do
                    iz, io = path[k][1], path[k][2]
                    _unwind(path, k)
                c = t.cover[node]
                stack.append((int(cold), path, iz * t.cover[cold] / c, 0.0, f))
                stack.append((int(hot), path, iz * t.cover[hot] / c, io, f))
    bias = base_margins(forest)
    for ti, t in enumerate(forest.trees):  # the bias: base margins + cover-weighted node means
        mean = t.value.copy()
        for node in range(t.n_nodes - 1, -1, -1):  # children after parents: bottom-up
            if t.left[node] >= 0:
                lc, rc = t.left[node], t.right[node]
                mean[node] = (mean[lc] * t.cover[lc] + mean[rc] * t.cover[rc]) / t.cover[node]
        o = int(forest.tree_output[ti])
        bias[o:o + t.width] += mean[0] * scale
    out[:, :, -1] = bias
    return library_layout(forest, out)


def _extend(path: list, pz: float, po: float, pf: int) -> None:
    m = len(path)
    path.append([pf, pz, po, 1.0 if m == 0 else 0.0])
    for i in range(m - 1, -1, -1):
        path[i + 1][3] += po * path[i][3] * (i + 1) / (m + 1)
        path[i][3] = pz * path[i][3] * (m - i) / (m + 1)


def _unwind(path: list, k: int) -> None:
    m = len(path) - 1
    one, zero = path[k][2], path[k][1]
    nxt = path[m][3]
    for j in range(m - 1, -1, -1):
        if one != 0:
            tmp = path[j][3]
            path[j][3] = nxt * (m + 1) / ((j + 1) * one)
            nxt = tmp - path[j][3] * zero * (m - j) / (m + 1)
        else:
            path[j][3] = path[j][3] * (m + 1) / (zero * (m - j))
    for j in range(k, m):
        path[j][:3] = path[j + 1][:3]
    path.pop()


def _unwound_sum(path: list, k: int) -> float:
    m = len(path) - 1
    one, zero = path[k][2], path[k][1]
    nxt, total = path[m][3], 0.0
    for j in range(m - 1, -1, -1):
        if one != 0:
            tmp = nxt * (m + 1) / ((j + 1) * one)
            total += tmp
            nxt = path[j][3] - tmp * zero * ((m - j) / (m + 1))
        elif zero != 0:
            total += (path[j][3] / zero) / ((m - j) / (m + 1))
    return total


def contributions(predictor: Any, X: Any, n_threads: int | None = None) -> np.ndarray:
    """The loader's "contributions" feature (Predictor.contributions): the Predictor's
    Explainer, prepared on first use and kept in its feature_state."""
    ex = predictor.feature_state.get("explainer")
    if ex is None:
        ex = predictor.feature_state["explainer"] = Explainer(predictor.forest("SHAP contributions"))
    return ex.contributions(X, check_threads(n_threads) or predictor.n_threads or CPUS, pool().submit)


register_feature("contributions", contributions)
