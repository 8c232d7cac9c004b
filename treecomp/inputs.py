"""Turning what a user passes (arrays, DataFrames, lists) into a checked row-major matrix."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from .categories import encode, recode, recodes
from .frames import COMPLEX_WARNING, is_frame, numeric_frame
from .ir import Forest


#: float64 magnitudes from which a cast to the input dtype gives inf (float32: FLT_MAX plus half
#: an ulp rounds to even, i.e. up)
_INF_FROM = {"float32": float.fromhex("0x1.ffffffp+127"), "float64": np.inf}


def as_matrix(X: Any, forest: Forest, dtype: Any | None = None, keep_float: bool = False) -> np.ndarray:
    """Return X as a C-contiguous 2-D array of `dtype` (default: the forest's input dtype).

    Numbers are converted as the model's library converts them (forest.input_rule, see
    treecomp.ir.INPUT_RULES and treecomp.frames): e.g. LightGBM rounds an int64 array to float32
    first, XGBoost converts int64 straight to float32 (never through float64) and refuses
    big-endian arrays, which it would misread. With keep_float, float32 and float64 data keep
    their dtype where that is the same numbers (native kernels cast each value themselves,
    saving a copy).

    Categorical columns: CatBoost's one-hot columns (forest.category_hashes) and pandas
    'category' columns (forest.pandas_categories: re-coded by the categories the model was
    trained on, as the library re-codes them; refused where the model records none) become
    codes first: treecomp.categories.

    Raises TypeError for non-numeric data and for scipy sparse matrices, and ValueError for a
    wrong shape, for input the library refuses, or for NaN or +/-inf (forest.allow_nan,
    forest.reject_inf) where the source library rejects it.

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
    are always read by position. polars DataFrames are read like pandas ones (names checked),
    through their to_numpy() array. A HistGradientBoosting model with categorical features
    takes a frame's columns by name (other orders and extra columns too), as its preprocessor,
    a ColumnTransformer, does.
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
        X = encode(X, forest)
    elif recodes(X, forest):  # pandas category columns (sklearn HGB: object values too)
        X = recode(X, forest)
    elif is_frame(X):
        X = numeric_frame(X, forest, forest.feature_names)
    arr = library_array(X, getattr(forest, "input_rule", "cast"), np.dtype(forest.input_dtype))
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


def _not_numeric(what: Any, exc: Exception | None = None) -> TypeError:
    return TypeError(f"input must be numeric; got {what}" + (f" ({exc})" if exc else ""))


def library_array(X: Any, rule: str, dtype: Any) -> np.ndarray:
    """X (an array, a list of rows, or an array a frame was converted to) as an array of
    numbers the way the library of `rule` (treecomp.ir.INPUT_RULES) makes one: the same
    numbers once cast to the input dtype `dtype`. Only the conversions that change numbers are done
    here; as_matrix then casts float32 / float64 data to the input dtype."""
    if rule == "sklearn":  # check_array(dtype=float32 / float64): np.asarray(X, dtype) at once
        if isinstance(X, np.ndarray) and X.dtype.kind in "fiub":
            return X  # (as_matrix's cast to the input dtype is that same conversion)
        kind = X.dtype.kind if isinstance(X, np.ndarray) else ""
        if kind and kind in "cmMV":
            raise _not_numeric(f"dtype {X.dtype}")
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("error", COMPLEX_WARNING)
                return np.asarray(X, dtype=dtype)
        except (TypeError, ValueError, COMPLEX_WARNING) as exc:
            raise _not_numeric("values that are not numbers", exc) from None
    if isinstance(X, np.ndarray):
        arr = X
    else:
        try:  # XGBoost and LightGBM: np.array(rows); sklearn's check_array: np.asarray(rows)
            arr = np.array(X)
        except (TypeError, ValueError) as exc:
            raise _not_numeric("rows that do not form a matrix of numbers", exc) from None
    kind = arr.dtype.kind
    if rule == "xgboost":
        if kind in "fiub" and not arr.dtype.isnative:
            # XGBoost 3.2 passes the bytes on as little-endian numbers: silently wrong
            raise ValueError(f"a big-endian array ({arr.dtype}): XGBoost reads its bytes as "
                             "little-endian numbers, which gives wrong predictions; convert it "
                             "first, e.g. X.astype(X.dtype.newbyteorder('='))")
        if kind == "O":  # _ensure_np_dtype: astype(float32)
            return _converted(arr, np.float32)
        if kind in "fiub":  # the rest value by value, straight to float32
            return arr
        raise _not_numeric(f"dtype {arr.dtype}")
    if rule in ("lightgbm", "lightgbm_sklearn"):
        if rule == "lightgbm_sklearn":  # check_array(dtype="numeric") first
            if kind in "USV":
                raise _not_numeric(f"dtype {arr.dtype} (LightGBM's scikit-learn wrapper refuses "
                                   "strings: dtype='numeric' is not compatible with arrays of "
                                   "bytes/strings)")
            if kind == "O":
                arr = _converted(arr, np.float64)
                kind = "f"
        if arr.dtype in (np.float32, np.float64):  # _np2d_to_np1d: native float32 / float64 kept
            return arr
        if kind in "cmM":
            raise _not_numeric(f"dtype {arr.dtype}")
        return _converted(arr, np.float32)  # every other dtype first to float32 (int64 rounds)
    # "cast" (CatBoost, ONNX, files of earlier treecomp): numbers straight to the input dtype;
    # a list as np.asarray(rows, dtype) converts it (Python ints through float64), big-endian
    # and long double arrays through float64 (as catboost 1.2 reads all three)
    if kind in "fiub":
        if not isinstance(X, np.ndarray):
            return np.asarray(X, dtype=dtype)
        if not arr.dtype.isnative or arr.dtype.itemsize > 8:
            return arr.astype(np.float64)
        return arr
    if kind == "O":
        return _converted(arr, np.float64)
    raise _not_numeric(f"dtype {arr.dtype}")


def _converted(arr: np.ndarray, dtype: Any) -> np.ndarray:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", COMPLEX_WARNING)
            return arr.astype(dtype)
    except (TypeError, ValueError, COMPLEX_WARNING) as exc:
        raise _not_numeric(f"an array of dtype {arr.dtype} holding non-numbers", exc) from None
