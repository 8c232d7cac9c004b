"""Seeded random IR forests for backend tests: every IR feature, no library needed."""

from __future__ import annotations

import numpy as np

from treecomp.ir import Forest, Tree


def random_tree(rng: np.random.Generator, n_features: int, width: int = 1, max_depth: int = 6,
                p_leaf: float = 0.2, p_cat: float = 0.0, n_words: int = 2,
                values_f32: bool = False) -> Tree:
    """A random tree in breadth-first order (children > parent), built without recursion."""
    left, right, feat, thr, dl, cat_index = [], [], [], [], [], []
    depth = []
    cat_bits, cat_other = [], []
    left.append(-1); right.append(-1); feat.append(-1); thr.append(0.0); dl.append(False)
    cat_index.append(-1); depth.append(0)
    i = 0
    while i < len(left):
        if depth[i] < max_depth and (i == 0 or rng.random() > p_leaf):
            f = int(rng.integers(n_features))
            feat[i] = f
            dl[i] = bool(rng.random() < 0.5)
            if rng.random() < p_cat:
                cat_index[i] = len(cat_bits)
                cat_bits.append(rng.integers(0, 2**32, n_words, dtype=np.uint64).astype(np.uint32))
                cat_other.append(bool(rng.random() < 0.5))
            else:
                thr[i] = float(np.float32(rng.normal())) if rng.random() < 0.5 else float(rng.normal())
            for side in (left, right):
                side[i] = len(left)
                left.append(-1); right.append(-1); feat.append(-1); thr.append(0.0); dl.append(False)
                cat_index.append(-1); depth.append(depth[i] + 1)
        i += 1
    n = len(left)
    value = rng.normal(size=(n, width))
    if values_f32:
        value = value.astype(np.float32).astype(np.float64)
    value[np.array(left) >= 0] = 0.0
    return Tree(left=left, right=right, feature=feat, threshold=thr, default_left=dl, value=value,
                cat_index=cat_index,
                cat_bits=np.array(cat_bits, np.uint32).reshape(-1, n_words) if cat_bits else None,
                cat_other_left=cat_other if cat_bits else None)


def chain_tree(depth: int, n_features: int, rng: np.random.Generator) -> Tree:
    """A degenerate tree of the given depth (each node has one leaf child)."""
    n = 2 * depth + 1
    left = np.full(n, -1); right = np.full(n, -1); feat = np.full(n, -1); thr = np.zeros(n)
    for d in range(depth):
        node = 2 * d
        left[node], right[node] = node + 1, node + 2  # left is a leaf, right continues
        feat[node] = d % n_features
        thr[node] = rng.normal() * 0.01 - 1.0 + 2.0 * d / depth
    value = rng.normal(size=n)
    value[left >= 0] = 0.0
    return Tree(left=left, right=right, feature=feat, threshold=thr,
                default_left=rng.random(n) < 0.5, value=value)


def random_forest(seed: int, n_trees: int = 8, n_features: int = 6, n_outputs: int = 1,
                  width: int = 1, input_dtype: str = "float32", comparison: str = "<=",
                  accumulate_dtype: str = "float64", average: bool = False, p_cat: float = 0.0,
                  max_depth: int = 6, transform: str = "identity",
                  category_rule: str = "nonneg") -> Forest:
    rng = np.random.default_rng(seed)
    trees = [random_tree(rng, n_features, width=width, max_depth=max_depth, p_cat=p_cat,
                         values_f32=accumulate_dtype == "float32") for _ in range(n_trees)]
    if width == n_outputs:
        tree_output = np.zeros(n_trees, np.int32)
    else:
        tree_output = np.arange(n_trees) % n_outputs
    base = rng.normal(size=n_outputs)
    if accumulate_dtype == "float32":
        base = base.astype(np.float32).astype(np.float64)
    return Forest(trees=tuple(trees), n_features=n_features, n_outputs=n_outputs,
                  tree_output=tree_output, base_score=base, input_dtype=input_dtype,
                  comparison=comparison, accumulate_dtype=accumulate_dtype, average=average,
                  transform=transform, category_rule=category_rule,
                  provenance=f"random seed={seed}")


def random_rows(forest: Forest, n: int, seed: int = 0) -> np.ndarray:
    """Normal rows plus threshold-adjacent values, NaN, infinities, -0.0 and category ids."""
    from tests.edge import edge_rows
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, forest.n_features))
    cats = rng.random(X.shape) < 0.3
    X[cats] = rng.integers(-3, 70, cats.sum()) + rng.choice([0.0, 0.5, -0.5], cats.sum())
    return np.vstack([X, edge_rows(forest, X, n=n, seed=seed)])


FOREST_VARIANTS = {
    "f32-le": dict(),
    "f32-lt-acc32": dict(comparison="<", accumulate_dtype="float32"),
    "f64-le": dict(input_dtype="float64"),
    "f64-lt": dict(input_dtype="float64", comparison="<"),
    "categorical": dict(p_cat=0.3),
    "categorical-acc32": dict(p_cat=0.3, accumulate_dtype="float32", comparison="<"),
    "categorical-trunc": dict(p_cat=0.3, input_dtype="float64", category_rule="trunc"),
    "categorical-integral": dict(p_cat=0.3, input_dtype="float64", category_rule="integral"),
    "multi-output": dict(n_outputs=3, width=1, transform="softmax"),
    "softmax-seq": dict(n_outputs=9, width=1, transform="softmax_seq"),
    "vector-leaf-average": dict(n_outputs=3, width=3, average=True),
    "sigmoid-acc32": dict(transform="sigmoid", accumulate_dtype="float32"),
    "exp": dict(transform="exp"),
    "deep": dict(max_depth=14, n_trees=3),
}
