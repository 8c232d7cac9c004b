"""Turning what a user passes (arrays, DataFrames, lists) into a checked row-major matrix."""

from __future__ import annotations

from typing import Any

import numpy as np

from .ir import Forest


def as_matrix(X: Any, forest: Forest, dtype: Any | None = None, keep_float: bool = False) -> np.ndarray:
    """Return X as a C-contiguous 2-D array of `dtype` (default: the forest's input dtype).

    With keep_float, float32 and float64 data keep their dtype (native kernels cast each value
    themselves, saving a copy); anything else is converted straight to the input dtype (never
    through float64: int64 -> float32 must round once, as the library's conversion does).

    Raises TypeError for non-numeric data and ValueError for a wrong shape or for NaN where the
    source library rejects it. A DataFrame whose columns carry the model's feature names is
    reordered to the model's order; other DataFrames are taken positionally.
    """
    dtype = np.dtype(dtype or forest.input_dtype)
    if hasattr(X, "columns") and hasattr(X, "to_numpy"):  # pandas (or pandas-like) DataFrame
        cats = [str(c) for c, dt in zip(X.columns, X.dtypes) if str(dt) == "category"]
        if cats and getattr(forest, "pandas_categories", "reject") != "values":
            # Libraries disagree on what a pandas category means (XGBoost and LightGBM use the
            # codes, scikit-learn the values), so guessing could be silently wrong.
            raise TypeError(f"categorical (pandas 'category' dtype) columns {cats[:5]} are not "
                            "accepted: pass the numbers the model was trained on (e.g. "
                            "df[col].cat.codes for XGBoost/LightGBM models)")
        cols = [str(c) for c in X.columns]
        names = forest.feature_names
        if names is not None and set(names) <= set(cols) and cols != list(names):
            X = X[list(names)]
        try:
            X = X.to_numpy(dtype=np.float64, na_value=np.nan)
        except (TypeError, ValueError) as exc:
            raise TypeError(f"DataFrame columns must be numeric: {exc}") from None
    arr = np.asarray(X)
    if arr.dtype.kind not in "fiub":
        if arr.dtype == object:
            try:
                arr = arr.astype(np.float64)
            except (TypeError, ValueError):
                raise TypeError(f"input must be numeric; got an array of dtype {arr.dtype} "
                                "holding non-numbers") from None
        else:
            raise TypeError(f"input must be numeric; got dtype {arr.dtype}")
    if arr.ndim != 2:
        raise ValueError(f"input must be 2-D (n_rows, {forest.n_features}); got shape {arr.shape}"
                         + ("; use X.reshape(1, -1) for a single row" if arr.ndim == 1 else ""))
    if arr.shape[1] != forest.n_features:
        raise ValueError(f"input has {arr.shape[1]} features, but the model expects {forest.n_features}")
    if keep_float and arr.dtype in (np.float32, np.float64):
        dtype = arr.dtype
    out = np.ascontiguousarray(arr, dtype=dtype)
    if not forest.allow_nan and out.dtype.kind == "f" and np.isnan(out).any():
        raise ValueError("input contains NaN, which this model does not accept "
                         "(the source library rejects it too)")
    return out
