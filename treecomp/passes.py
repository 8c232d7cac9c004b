"""Pure IR rewrites and derived tables: Forest in, Forest (or arrays) out, no I/O.

`comparison_thresholds` lowers float64 thresholds to the precision the library compares in so
that backends can compare in that precision exactly (see SEMANTICS.md): for `x <= t` the largest
float32 that is <= t, for `x < t` the smallest float32 that is >= t. Rounding to nearest instead
is the classic bug of older tree compilers.
"""

from __future__ import annotations

import numpy as np

from .ir import Forest, Tree


def comparison_thresholds(tree: Tree, forest: Forest) -> np.ndarray:
    """Thresholds in forest.input_dtype such that `x OP t_low` == `float64(x) OP t` for every x."""
    return lowered_thresholds(tree.threshold, forest)


def lowered_thresholds(t64: np.ndarray, forest: Forest) -> np.ndarray:
    """comparison_thresholds of any float64 thresholds of `forest` (element by element: the
    thresholds of many trees at once, e.g. concatenated)."""
    if forest.input_dtype == "float64":
        return t64.copy()
    with np.errstate(over="ignore", invalid="ignore"):
        t32 = t64.astype(np.float32)
        if forest.comparison == "<=":
            fix = t32.astype(np.float64) > t64
            t32[fix] = np.nextafter(t32[fix], np.float32(-np.inf))
        else:
            fix = t32.astype(np.float64) < t64
            t32[fix] = np.nextafter(t32[fix], np.float32(np.inf))
    return t32
