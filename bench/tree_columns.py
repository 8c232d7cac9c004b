"""How many distinct features the trees of a model read: per group of consecutive trees and per
top levels (the ceiling of binning only the columns a tree group, or a walk's first levels, reads).

    python -m bench.tree_columns [--cases xgb-d8-968,xgb-d8-2000] [--groups 1,8,16,32]

For each case: the features its nodes read; for each group size G, the distinct features of each
group of G consecutive trees (mean, max) and their sum over the groups, which is what a
quantiser binning per tree group would bin per row (against the model's features, which the
quantiser bins per row now); and the distinct features of levels 0..k of every tree. Feature
counts, not the quantiser's columns (a feature of > 255 thresholds, or read with NaN going both
ways, is several columns): the two agree on the bench's wide XGBoost cases.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np


def node_depths(left: np.ndarray, right: np.ndarray) -> np.ndarray:
    """Each node's depth (root 0), by a pass in node order (a parent precedes its children in
    the IR's node order), no recursion."""
    depth = np.zeros(len(left), np.int64)
    for i in range(len(left)):
        if left[i] >= 0:
            depth[left[i]] = depth[right[i]] = depth[i] + 1
    return depth


def tree_features(forest) -> list[list[tuple[int, int]]]:
    """Per tree, its internal nodes' (feature, depth)."""
    out = []
    for tree in forest.trees:
        left, right = np.asarray(tree.left), np.asarray(tree.right)
        feat, depth = np.asarray(tree.feature), node_depths(left, right)
        internal = left >= 0
        out.append(list(zip(feat[internal].tolist(), depth[internal].tolist())))
    return out


def report(name: str, per_tree: list[list[tuple[int, int]]], groups: list[int]) -> None:
    used = {f for t in per_tree for f, _ in t}
    print(f"{name}: {len(per_tree)} trees, {len(used)} features read")
    for g in groups:
        n = [len({f for t in per_tree[i:i + g] for f, _ in t}) for i in range(0, len(per_tree), g)]
        print(f"  groups of {g:3d} trees: distinct features a group mean {np.mean(n):7.1f} max "
              f"{max(n):5d}; summed over the groups {sum(n):6d} ({sum(n) / len(used):.2f}x the model's)")
    deepest = max((d for t in per_tree for _, d in t), default=-1)
    for k in range(deepest + 1):
        n = len({f for t in per_tree for f, d in t if d <= k})
        print(f"  levels 0..{k}: {n} features ({n / len(used):.2f})")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", default="xgb-d8-90-regression,xgb-d8-968,xgb-d8-2000")
    ap.add_argument("--groups", default="1,8,16,32")
    args = ap.parse_args(argv)
    import treecomp
    from treecomp.benchmark.cases import build_case
    groups = [int(g) for g in args.groups.split(",") if g]
    for name in args.cases.split(","):
        report(name, tree_features(treecomp.parse(build_case(name).model)), groups)
    return 0


if __name__ == "__main__":
    sys.exit(main())
