"""Predictors for forests with linear leaves (LightGBM linear_tree), which no backend computes.

A native kernel, built by the requested backend over interp.leaf_id_forest(forest,
node_index=True) (the same routing, leaves holding their own node index, one output per tree),
finds every row's leaf in every tree; interp.raw_from_leaves then adds each tree's output (the
leaf's linear model, LightGBM's arithmetic: interp.tree_values) in tree order in numpy, a block
of rows at a time, and the Predictor applies the transform as for any model. The result is a
loader.Predictor in every other respect (threads, outputs, `apply`, pickling, which rebuilds
from the IR); `save` raises UnsupportedModelError: a standalone artifact would need the linear
leaves in native code.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from . import backends, interp
from .errors import UnsupportedModelError
from .ir import LINEAR_NO_ARTIFACT, Forest, head_of
from .loader import Predictor

#: rows per block: the leaf matrix (rows x trees, float64) stays within a few MB
BLOCK_ROWS = 2048


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

    def run(self, X: np.ndarray, out: np.ndarray, flags: int = 0) -> None:
        leaves = np.empty((min(len(X), BLOCK_ROWS), self.forest.n_trees))
        for a in range(0, len(X), BLOCK_ROWS):
            Xb = X[a:a + BLOCK_ROWS]
            lv = leaves[:len(Xb)]
            self.leaves.run(Xb, lv, 0)
            out[a:a + len(Xb)] = interp.raw_from_leaves(self.forest, Xb.astype(np.float64, copy=False),
                                                        lv.astype(np.intp))

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
