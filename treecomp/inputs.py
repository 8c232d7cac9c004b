"""Turning what a user passes (arrays, DataFrames, lists) into a checked row-major matrix."""

from __future__ import annotations

from typing import Any

import numpy as np

from .ir import Forest


#: float64 magnitudes from which a cast to the input dtype gives inf (float32: FLT_MAX plus half
#: an ulp rounds to even, i.e. up)
_INF_FROM = {"float32": float.fromhex("0x1.ffffffp+127"), "float64": np.inf}


def as_matrix(X: Any, forest: Forest, dtype: Any | None = None, keep_float: bool = False) -> np.ndarray:
    """Return X as a C-contiguous 2-D array of `dtype` (default: the forest's input dtype).

    With keep_float, float32 and float64 data keep their dtype (native kernels cast each value
    themselves, saving a copy); anything else is converted straight to the input dtype (never
    through float64: int64 -> float32 must round once, as the library's conversion does).

    Raises TypeError for non-numeric data and for scipy sparse matrices, and ValueError for a
    wrong shape, or for NaN or +/-inf (forest.allow_nan, forest.reject_inf) where the source
    library rejects it.

    DataFrame columns, never guessed: for a model trained with feature names (scikit-learn's
    ``feature_names_in_``, XGBoost's ``feature_names``), a DataFrame's column names (as strings)
    must equal the model's names in the model's order, or ValueError is raised. That is what
    scikit-learn (1.9: "The feature names should match those that were passed during fit") and
    XGBoost (3.2: "feature_names mismatch") do for reordered, renamed, extra and missing
    columns; neither reorders by name. One case is stricter than scikit-learn: a frame without
    string column names (e.g. ``pd.DataFrame(array)``) given to a model with names is refused
    (scikit-learn warns and reads it by position; XGBoost refuses it): pass ``X.to_numpy()`` to
    mean "by position". A model without feature names (LightGBM's frontend, which reads frames
    by position as LightGBM 4.7 does even when fitted on names, or a scikit-learn model fitted
    on an array) reads any DataFrame by position, as all three libraries do; arrays and lists
    are always read by position.
    """
    dtype = np.dtype(dtype or forest.input_dtype)
    if type(X).__module__.startswith("scipy.sparse"):
        # Libraries disagree on what an absent entry means (XGBoost: missing, i.e. NaN;
        # scikit-learn and LightGBM: 0.0), so densifying here could be silently wrong.
        raise TypeError(f"sparse input ({type(X).__name__}) is not supported: pass a dense array, "
                        "e.g. X.toarray() (absent entries become 0.0, as scikit-learn and LightGBM "
                        "read them; XGBoost reads absent entries as missing, so for an XGBoost "
                        "model set them to NaN)")
    if getattr(forest, "category_hashes", ()):  # CatBoost one-hot columns: values -> codes
        from .categories import encode
        X = encode(X, forest)
    if hasattr(X, "columns") and hasattr(X, "to_numpy"):  # pandas (or pandas-like) DataFrame
        X = numeric_frame(X, forest, forest.feature_names)
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
    with np.errstate(over="ignore"):  # 1e39 -> inf in float32: refused below where the library does
        out = np.ascontiguousarray(arr, dtype=dtype)
    if not forest.allow_nan and out.dtype.kind == "f" and np.isnan(out).any():
        raise ValueError("input contains NaN, which this model does not accept "
                         "(the source library rejects it too)")
    cols = forest.reject_inf
    if cols and out.dtype.kind == "f" and out.size:
        sub = out if len(cols) == out.shape[1] else out[:, list(cols)]
        # the smallest magnitude that is inf once cast to the input dtype (1e39 is, as float32);
        # fmax / fmin skip NaN, and two reductions copy nothing on this per-batch path
        lim = _INF_FROM[forest.input_dtype] if out.dtype == np.float64 else np.inf
        if np.fmax.reduce(sub, axis=None) >= lim or np.fmin.reduce(sub, axis=None) <= -lim:
            bad = sorted({cols[j] for j in np.flatnonzero((np.abs(sub) >= lim).any(axis=0))})
            raise ValueError(f"input contains infinity or a value too large for "
                             f"{forest.input_dtype} in feature(s) {bad[:10]}, which this model "
                             "does not accept (the source library rejects it too)")
    return out


def numeric_frame(X: Any, forest: Any, names: Any = None) -> np.ndarray:
    """A DataFrame of numeric columns as a float64 array (missing values NaN); pandas
    'category' columns only where forest.pandas_categories says what they mean; the column
    names checked against `names` (the model's feature names) unless None."""
    cats = [str(c) for c, dt in zip(X.columns, X.dtypes) if str(dt) == "category"]
    if cats and getattr(forest, "pandas_categories", "reject") != "values":
        # Libraries disagree on what a pandas category means (XGBoost and LightGBM use the
        # codes, scikit-learn the values), so guessing could be silently wrong.
        raise TypeError(f"categorical (pandas 'category' dtype) columns {cats[:5]} are not "
                        "accepted: pass the numbers the model was trained on (e.g. "
                        "df[col].cat.codes for XGBoost/LightGBM models)")
    if names is not None:
        _check_columns([str(c) for c in X.columns], list(names))
    try:
        return X.to_numpy(dtype=np.float64, na_value=np.nan)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"DataFrame columns must be numeric: {exc}") from None


def _check_columns(cols: list[str], names: list[str]) -> None:
    """Refuse a DataFrame whose columns are not exactly the model's feature names, in order."""
    if cols == names:
        return
    missing = [n for n in names if n not in cols]
    unseen = [c for c in cols if c not in names]
    if missing or unseen:
        why = "".join([f"; columns not seen at fit time: {unseen[:10]}" if unseen else "",
                       f"; model features missing from the frame: {missing[:10]}" if missing else ""])
    else:
        why = "; the columns are the model's features in another order (or repeated)"
    raise ValueError(f"the DataFrame's column names do not match the model's feature names "
                     f"{names[:20]}{' ...' if len(names) > 20 else ''}{why}. Select them in "
                     "the model's order (df[predictor.feature_names_in_]), or pass df.to_numpy() "
                     "to read the columns by position (scikit-learn and XGBoost refuse such a "
                     "frame too)")
