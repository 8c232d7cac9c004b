"""Predictors for forests with linear leaves (LightGBM linear_tree), which no backend computes.

A native kernel, built by the requested backend over interp.leaf_id_forest(forest,
node_index=True) (the same routing, leaves holding their own node index, one output per tree),
finds every row's leaf in every tree. The leaves' linear models are then evaluated for a block
of rows and all trees at once, with interp.tree_values' arithmetic (LightGBM's), by the native
kernel's tc_linear_margins (runtime/kernels/linear.c: per row, per tree in order, const +
coeff * x in float64 in feature order, unfused, added to the row's margins from the base) or,
where no native kernel loads, in numpy: the (row, tree) pairs ordered by their leaf's feature
count (a radix sort), so step j of the sum runs over a prefix, the pairs with more than j
features; interp.accumulate then adds the trees in order. The Predictor applies the transform
as for any model.

The result is a loader.Predictor in every other respect (threads, outputs, `apply`; pickling
rebuilds it from the IR); `save` raises UnsupportedModelError: a standalone artifact would need
the linear leaves in native code.
"""

from __future__ import annotations

import ctypes
from typing import Any, Callable

import numpy as np

from . import backends, interp
from .errors import CompileError, UnsupportedModelError
from .ir import LINEAR_NO_ARTIFACT, LINEAR_ZERO, Forest, head_of
from .loader import Predictor

#: rows per block: the (row, tree) pairs of a block stay within a few tens of MB
BLOCK_ROWS = 2048


class _Tables:
    """Every node of the forest, numbered tree after tree: its linear model padded to the widest
    leaf (a plain tree's leaves: leaf_const = value, no features)."""

    def __init__(self, forest: Forest):
        trees = forest.trees
        self.offset = np.cumsum([0] + [t.n_nodes for t in trees[:-1]]).astype(np.intp)
        plain = [t.value[:, 0] for t in trees]
        counts = [np.diff(t.linear_ptr) if t.is_linear else np.zeros(t.n_nodes, np.int64)
                  for t in trees]
        self.plain = np.concatenate(plain)
        self.const = np.concatenate([t.leaf_const if t.is_linear else v for t, v in zip(trees, plain)])
        cnt = np.concatenate(counts)
        self.kmax = int(cnt.max(initial=0))
        self.cnt = cnt.astype(np.uint8 if self.kmax < 256 else np.uint16)  # radix-sortable
        # the native kernel's form: per node a range of (feature, coeff) pairs, node after node
        lin = [t for t in trees if t.is_linear]
        self.node0 = np.append(self.offset, self.offset[-1] + trees[-1].n_nodes).astype(np.int64)
        self.ptr = np.concatenate([[0], np.cumsum(cnt)]).astype(np.int64)
        self.csr_feat = np.concatenate([t.linear_feature for t in lin] + [np.zeros(0, np.int32)])
        self.csr_feat = self.csr_feat.astype(np.int32)
        self.csr_coeff = np.concatenate([t.linear_coeff for t in lin] + [np.zeros(0)]).astype(np.float64)
        # numpy's form: padded to the widest leaf, (kmax, nodes): step j's rows
        used = np.arange(self.kmax) < cnt[:, None]
        feat, coeff = np.zeros(used.shape, np.intp), np.zeros(used.shape)
        feat[used], coeff[used] = self.csr_feat, self.csr_coeff  # C order: node, then j
        self.feat, self.coeff = feat.T.copy(), coeff.T.copy()
        self.forest, self.base = forest, np.ascontiguousarray(forest.base_score, np.float64)
        self.tree_out = np.ascontiguousarray(forest.tree_output, np.int32)
        self._native = _native_fn()

    def margins(self, X: np.ndarray, leaves: np.ndarray, native: bool = True) -> np.ndarray:
        """(n_rows, n_outputs) raw margins of rows X that reached `leaves` (n_rows, n_trees: IR
        node indices, as float64). native=False: numpy's evaluation (the fallback where no
        native kernel loads; tests compare the two)."""
        f = self.forest
        if not (native and self._native is not None and str(f.accumulate_dtype) == "float64"):
            return interp.accumulate(f, len(X), (v[:, None] for v in self._numpy_outputs(X, leaves)))
        n, T = leaves.shape
        x = np.ascontiguousarray(X, np.float64)
        lv = np.ascontiguousarray(leaves, np.float64)
        acc = np.empty((n, f.n_outputs))
        p = lambda a: a.ctypes.data  # noqa: E731
        if self._native(p(x), n, x.shape[1], p(lv), T, p(self.node0), p(self.tree_out), f.n_outputs,
                        p(self.base), p(self.plain), p(self.const), p(self.ptr), p(self.csr_feat),
                        p(self.csr_coeff), LINEAR_ZERO, p(acc)) != 0:
            raise RuntimeError("treecomp linear leaves: a leaf index outside its tree")
        if f.average:
            acc /= f.n_trees
        return acc

    def _numpy_outputs(self, X: np.ndarray, leaves: np.ndarray) -> np.ndarray:
        n, T = leaves.shape
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


def _native_fn() -> Any:
    """tc_linear_margins of the arrays kernel library, or None where none loads."""
    from .backends import arrays_native
    try:
        fn = arrays_native.native_library().tc_linear_margins
    except CompileError:  # no prebuilt kernel and no compiler: numpy evaluates the leaves
        return None
    P, I = ctypes.c_void_p, ctypes.c_int64
    fn.restype = ctypes.c_int32
    fn.argtypes = [P, I, I, P, I, P, P, I, P, P, P, P, P, P, ctypes.c_double, P]
    return fn


class LinearKernel:
    """A loader kernel (run(X, out, flags) -> raw margins) for a forest with linear leaves."""

    kind = "linear"
    entry = None
    native_transform = False

    def __init__(self, forest: Forest, backend: str, progress: Callable[[str], None] | None = None,
                 **options: Any):
        self.forest, self.backend_name, self.options = forest, backend, options
        self.head = head_of(forest, linear_ok=True)
        self.leaves = backends.get(backend).build(interp.leaf_id_forest(forest, node_index=True),
                                                  progress=progress, **options)
        self.backend = self.leaves.backend
        self.tables = _Tables(forest) if all(t.width == 1 for t in forest.trees) else None

    def run(self, X: np.ndarray, out: np.ndarray, flags: int = 0) -> None:
        leaves = np.empty((min(len(X), BLOCK_ROWS), self.forest.n_trees))
        for a in range(0, len(X), BLOCK_ROWS):
            Xb = X[a:a + BLOCK_ROWS]
            lv = leaves[:len(Xb)]
            self.leaves.run(Xb, lv, 0)
            if self.tables is None:  # vector leaves beside linear ones: the reference
                out[a:a + len(Xb)] = interp.raw_from_leaves(self.forest, Xb.astype(np.float64),
                                                            lv.astype(np.intp))
            else:
                out[a:a + len(Xb)] = self.tables.margins(Xb, lv)

    def save(self, path: Any) -> None:
        raise UnsupportedModelError(LINEAR_NO_ARTIFACT)

    def to_bytes(self) -> bytes:
        raise UnsupportedModelError(LINEAR_NO_ARTIFACT)


class LinearPredictor(Predictor):
    """A Predictor over a LinearKernel; pickles as its IR and backend (rebuilt on load)."""

    def __reduce__(self):
        k = self._kernel
        return (_restore, (k.forest.to_bytes(), k.backend_name, k.options, self.n_threads))


def compile(forest: Forest, backend: str, n_threads: int | None = None,
            progress: Callable[[str], None] | None = None, **options: Any) -> LinearPredictor:
    return LinearPredictor(LinearKernel(forest, backend, progress, **options), n_threads=n_threads,
                           forest=forest)


def _restore(ir: bytes, backend: str, options: dict, n_threads: int | None) -> LinearPredictor:
    return compile(Forest.from_bytes(ir), backend, n_threads, **options)
