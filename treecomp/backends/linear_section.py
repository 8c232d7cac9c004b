"""A model's linear section (LightGBM linear_tree leaves): the arrays that evaluate its leaves,
their validation, and their evaluation for a block of rows whose leaves a kernel found.

The section (arrays.format.SECTION: per tree its first node, per node its plain value, its
linear constant and its range of (feature, coefficient) pairs, the base margins and each
tree's output column) is what a .tc file of such a model carries (arrays.format) and what its
shared library links (backends/linear_so.py). SectionTables.margins evaluates it with
interp.tree_values' arithmetic (LightGBM's): natively by the arrays kernel library's
tc_linear_margins (runtime/kernels/linear.c: per row, per tree in order, const + coeff * x in
float64 in feature order, unfused, added to the row's margins from the base) or, where no native
kernel loads, in numpy: the (row, tree) pairs ordered by their leaf's feature count (a radix
sort), so step j of the sum runs over a prefix, the pairs with more than j features; then the
trees are added in order. treecomp.linear builds Predictors and artifacts on it.
"""

from __future__ import annotations

import ctypes
from typing import Any

import numpy as np

from ..errors import CompileError, UnsupportedModelError
from ..ir import LINEAR_ZERO, Forest
from .arrays import native as arrays_native
from .arrays.format import SECTION

#: rows per block: the (row, tree) pairs of a block stay within a few tens of MB
BLOCK_ROWS = 2048


def section_arrays(forest: Forest) -> dict[str, np.ndarray]:
    """The linear section of `forest` (SECTION's arrays; a plain tree's leaves: const = value,
    no features)."""
    trees = forest.trees
    plain = [t.value[:, 0] for t in trees]
    cnt = np.concatenate([np.diff(t.linear_ptr) if t.is_linear else np.zeros(t.n_nodes, np.int64)
                          for t in trees])
    lin = [t for t in trees if t.is_linear]
    arrays = {
        "node0": np.cumsum([0] + [t.n_nodes for t in trees]),
        "tree_out": forest.tree_output, "base": forest.base_score,
        "plain": np.concatenate(plain),
        "const": np.concatenate([t.leaf_const if t.is_linear else v for t, v in zip(trees, plain)]),
        "ptr": np.concatenate([[0], np.cumsum(cnt)]),
        "feat": np.concatenate([t.linear_feature for t in lin] + [np.zeros(0, np.int32)]),
        "coeff": np.concatenate([t.linear_coeff for t in lin] + [np.zeros(0)])}
    return {k: np.ascontiguousarray(arrays[k], np.dtype(dt)) for k, dt in SECTION.items()}


def section_fits(forest: Forest) -> bool:
    """Whether the linear section computes `forest`'s margins exactly: scalar float64 leaves
    (LightGBM's) and constant base margins."""
    return all(t.width == 1 for t in forest.trees) and forest.accumulate_dtype == "float64" \
        and forest.base_link == "identity"


def artifact_check(forest: Forest) -> None:
    """UnsupportedModelError unless the linear section computes `forest`'s margins exactly."""
    if not section_fits(forest):
        raise UnsupportedModelError(
            "an artifact of a model with linear leaves needs scalar float64 leaves and constant "
            "base margins (LightGBM's linear_tree); this one runs through treecomp.compile only")


class SectionTables:
    """The linear section as tc_linear_margins takes it (node after node, tree after tree), and
    padded to the widest leaf for numpy's evaluation."""

    def __init__(self, arrays: dict[str, np.ndarray], average: bool):
        A = {k: np.ascontiguousarray(v, np.dtype(SECTION[k]).newbyteorder("=")) for k, v in arrays.items()}
        self.arrays, self.average = A, average
        self.node0, self.tree_out, self.base = A["node0"], A["tree_out"], A["base"]
        self.plain, self.const, self.ptr = A["plain"], A["const"], A["ptr"]
        self.csr_feat, self.csr_coeff = A["feat"], A["coeff"]
        self.n_trees, self.n_outputs = len(self.tree_out), len(self.base)
        self.offset = self.node0[:-1].astype(np.intp)
        cnt = np.diff(self.ptr)
        self.kmax = int(cnt.max(initial=0))
        self.cnt = cnt.astype(np.uint8 if self.kmax < 256 else np.uint16)  # radix-sortable
        # numpy's form: padded to the widest leaf, (kmax, nodes): step j's rows
        used = np.arange(self.kmax) < cnt[:, None]
        feat, coeff = np.zeros(used.shape, np.intp), np.zeros(used.shape)
        feat[used], coeff[used] = self.csr_feat, self.csr_coeff  # C order: node, then j
        self.feat, self.coeff = feat.T.copy(), coeff.T.copy()
        self._native = native_margins()

    @classmethod
    def of(cls, forest: Forest) -> "SectionTables":
        return cls(section_arrays(forest), forest.average)

    def margins(self, X: np.ndarray, leaves: np.ndarray, native: bool = True) -> np.ndarray:
        """(n_rows, n_outputs) float64 raw margins of rows X that reached `leaves` (n_rows,
        n_trees: IR node indices, as float64). native=False: numpy's evaluation (the fallback
        where no native kernel loads; tests compare the two)."""
        n, T = leaves.shape
        if not (native and self._native is not None):
            acc = np.empty((n, self.n_outputs))
            acc[:] = self.base
            with np.errstate(invalid="ignore"):  # inf - inf: a linear leaf's output on inf inputs
                for t, v in enumerate(self._numpy_outputs(X, leaves)):
                    acc[:, self.tree_out[t]] += v
        else:
            x = np.ascontiguousarray(X, np.float64)
            lv = np.ascontiguousarray(leaves, np.float64)
            acc = np.empty((n, self.n_outputs))
            p = lambda a: a.ctypes.data  # noqa: E731
            if self._native(p(x), n, x.shape[1], p(lv), T, p(self.node0), p(self.tree_out),
                            self.n_outputs, p(self.base), p(self.plain), p(self.const), p(self.ptr),
                            p(self.csr_feat), p(self.csr_coeff), LINEAR_ZERO, p(acc)) != 0:
                raise RuntimeError("treecomp linear leaves: a leaf index outside its tree")
        if self.average:
            acc /= T
        return acc

    def _numpy_outputs(self, X: np.ndarray, leaves: np.ndarray) -> np.ndarray:
        n, T = leaves.shape
        lim = np.diff(self.node0)
        if not np.all((leaves >= 0) & (leaves < lim)):  # NaN fails both
            raise RuntimeError("treecomp linear leaves: a leaf index outside its tree")
        node = (leaves.T.astype(np.intp) + self.offset[:, None]).ravel()  # pair = tree * n + row
        cnt = self.cnt[node]
        order = np.argsort(cnt.dtype.type(self.kmax) - cnt, kind="stable")  # most features first
        nd = node[order]
        base = order % n * X.shape[1]  # the pair's row in X.ravel()
        active = np.cumsum(np.bincount(cnt, minlength=self.kmax + 1)[::-1])[::-1]  # count >= j
        x = X.astype(np.float64).ravel()
        x[np.abs(x) <= LINEAR_ZERO] = 0.0  # the C API's sparse zeros (NaN compares False)
        out = self.const.take(nd)
        with np.errstate(invalid="ignore", over="ignore"):
            for j in range(self.kmax):
                a = int(active[j + 1])  # the pairs with more than j features
                if a == 0:
                    break
                nj = nd[:a]
                f = self.feat[j].take(nj)
                f += base[:a]
                v = x.take(f)
                v *= self.coeff[j].take(nj)
                out[:a] += v
        # NaN inputs made their sums NaN: among those, the pairs that read a NaN take the
        # plain leaf value (the others, inf - inf, stay NaN as in LightGBM)
        cand = np.flatnonzero(np.isnan(out))
        if cand.size:
            nc, bc = nd[cand], base[cand]
            missing = np.zeros(cand.size, bool)
            for j in range(int(self.cnt[nc].max())):
                has = self.cnt[nc] > j
                missing |= has & np.isnan(x.take(bc + np.where(has, self.feat[j].take(nc), 0)))
            out[cand[missing]] = self.plain.take(nc[missing])
        res = np.empty_like(out)
        res[order] = out
        return res.reshape(T, n)


def native_margins() -> Any:
    """tc_linear_margins of the arrays kernel library, or None where none loads."""
    try:
        fn = arrays_native.native_library().tc_linear_margins
    except CompileError:  # no prebuilt kernel and no compiler: numpy evaluates the leaves
        return None
    P, I = ctypes.c_void_p, ctypes.c_int64
    fn.restype = ctypes.c_int32
    fn.argtypes = [P, I, I, P, I, P, P, I, P, P, P, P, P, P, ctypes.c_double, P]
    return fn


