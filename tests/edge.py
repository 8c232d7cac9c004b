"""Rows that break tree compilers: on thresholds, one ULP either side, NaN, +/-inf, -0.0."""

from __future__ import annotations

import numpy as np

from treecomp.ir import Forest


def edge_rows(forest: Forest, X: np.ndarray, n: int = 200, seed: int = 0,
              nan: bool = True) -> np.ndarray:
    """`n` rows built from rows of X with some features replaced by threshold-adjacent values.

    Values are produced in the forest's input dtype (what the library compares), then returned
    as float64 so the same rows can be fed to the library and to treecomp.
    """
    rng = np.random.default_rng(seed)
    dt = np.dtype(forest.input_dtype)
    base = X[rng.integers(0, len(X), n)].astype(dt).copy()
    specials = [dt.type(0.0), dt.type(-0.0), dt.type(np.inf), dt.type(-np.inf)]
    if nan:
        specials.append(dt.type(np.nan))
    # where the library refuses +/-inf (forest.reject_inf: a ValueError, tested on its own), the
    # largest finite values stand in for them
    finite = [dt.type(np.finfo(dt).max) if np.isinf(v) and v > 0 else
              dt.type(-np.finfo(dt).max) if np.isinf(v) else v for v in specials]
    refused = set(getattr(forest, "reject_inf", ()))
    nodes = [(t.feature[i], t.threshold[i]) for t in forest.trees
             for i in np.flatnonzero((t.left >= 0) & (t.cat_index < 0))]
    for r in range(n):
        for _ in range(rng.integers(1, 4)):
            if nodes and rng.random() < 0.8:
                f, thr = nodes[rng.integers(len(nodes))]
                v = dt.type(thr)
                step = rng.integers(-1, 2)
                if step:
                    v = np.nextafter(v, dt.type(np.inf * step))
                if np.isinf(v) and f in refused:  # sklearn's "all non-missing left" is +inf
                    v = dt.type(np.finfo(dt).max * np.sign(v))
                base[r, f] = v
            else:
                j = rng.integers(forest.n_features)
                base[r, j] = (finite if j in refused else specials)[rng.integers(len(specials))]
    return base.astype(np.float64)


def assert_backend_matches_interp(predictor, forest: Forest, X: np.ndarray) -> None:
    """Oracle 2: a compiled predictor equals the interpreter bit for bit (raw, labels, proba,
    decision_function; values, dtypes and shapes): whole batches (native threads), then one row
    and a few through both small-batch paths (the compiled entry and the ctypes one)."""
    from treecomp import loader, native
    for Z in (X, X[:1], X[1:8]):
        for entry in ((None,) if len(Z) > loader.SMALL_BATCH else (loader._entry(), native.no_entry)):
            saved = loader._ENTRY
            loader._ENTRY = entry or saved
            try:
                _assert_outputs_equal(predictor, forest, Z)
            finally:
                loader._ENTRY = saved


def _assert_outputs_equal(predictor, forest: Forest, Z: np.ndarray) -> None:
    from treecomp import interp, outputs
    raw = interp.predict_raw(forest, Z)
    pairs = [(predictor.predict_raw(Z), raw), (predictor.predict(Z), interp.predict(forest, Z)),
             (predictor.decision_function(Z), outputs.decision_values(forest, raw))]
    if forest.is_classifier:
        want, got = interp.predict_proba(forest, Z), predictor.predict_proba(Z)
        want, got = (want, got) if isinstance(want, list) else ([want], [got])
        assert len(want) == len(got)
        pairs += list(zip(got, want))
    for got, want in pairs:
        np.testing.assert_array_equal(got, want)
        assert got.dtype == want.dtype and got.shape == want.shape
