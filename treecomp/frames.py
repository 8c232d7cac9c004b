"""DataFrames (pandas, polars) as numbers: the column names checked against the model's feature
names, the columns converted as the model's library converts them (Forest.input_rule).

treecomp.inputs (any input) and treecomp.categories (the numeric columns of frames with
categorical columns) both read frames through here; this module imports nothing of treecomp.
pandas and polars are never imported: a frame is only handled when the user passes one.

What each library does with a frame of numbers (checked against the libraries in
tests/test_inputs.py; the array rules are in treecomp.inputs):

- scikit-learn (``check_array``): frames with a bool or a nullable (Int64, Float64, boolean)
  column are first converted by ``DataFrame.astype(dtype)``; then ``np.asarray(frame, dtype)``:
  a frame of one numpy dtype converts straight to the input dtype, a mixed one through pandas'
  common dtype (an int64 and a float64 column: through float64). Polars frames: ``to_numpy()``,
  then the array's conversion.
- XGBoost (``pandas_transform_data``): column by column, float32 / float64 columns as they are,
  other numeric columns ``to_numpy(float32, na_value=nan)``; object, string and other columns
  are refused.
- LightGBM (``_data_from_pandas``): only int, float and bool columns (object, string and
  float128 ones are refused); it converts to float32 only frames whose columns all fit float32
  exactly, so float64 is the same numbers.
  A polars frame goes through Arrow, each column straight to float64 (XGBoost: to float32).
- CatBoost, ONNX and files of earlier treecomp (rule "cast"): ``to_numpy(input dtype,
  na_value=nan)``, each value straight to it (what catboost does; ONNX Runtime takes no frame).
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np


def is_frame(X: Any) -> bool:
    """A pandas or pandas-like (polars) DataFrame. (Asked of the type: a DataFrame's dtypes
    property builds a Series each time it is read.)"""
    t = type(X)
    return hasattr(t, "columns") and hasattr(t, "to_numpy")


def is_pandas(X: Any) -> bool:
    """A pandas DataFrame (positional columns, dtypes per column)."""
    t = type(X)
    return is_frame(X) and hasattr(t, "iloc") and hasattr(t, "dtypes")


def check_columns(cols: list[str], names: list[str]) -> None:
    """Refuse a DataFrame whose columns are not exactly the model's feature names, in order."""
    if cols == names:
        return
    have, want = set(cols), set(names)
    missing = [n for n in names if n not in have]
    unseen = [c for c in cols if c not in want]
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


def check_names(X: Any, names: Any) -> None:
    """check_columns for a frame, unless the model has no feature names (names None)."""
    if names is not None:
        check_columns([str(c) for c in X.columns], list(names))


def category_positions(X: Any, dtypes: Any = None) -> list[int]:
    """Positions of a pandas frame's 'category' columns (dtypes: X.dtypes, if already read)."""
    return [j for j, dt in enumerate(X.dtypes if dtypes is None else dtypes) if _is_category(dt)]


def _is_category(dt: Any) -> bool:
    return type(dt).__name__ == "CategoricalDtype"


def polars_categorical(X: Any) -> list[str]:
    """Names of a polars frame's Categorical / Enum columns."""
    return [str(c) for c, dt in zip(X.columns, X.dtypes)
            if str(dt).startswith(("Categorical", "Enum"))]


#: why a frame's 'category' columns are refused where the model records no categories
REJECT_ADVICE = (
    "this model records no categories to read them by (what a code means cannot be checked). "
    "Pass the numbers the model was trained on: XGBoost and LightGBM read a frame's codes "
    "(df[col].cat.codes), which mean the training categories only when the frame lists exactly "
    "those categories in the same order (df[col].cat.set_categories(training_categories) makes "
    "it so); scikit-learn reads the category values")


def reject_categories(cols: list[str]) -> TypeError:
    return TypeError(f"categorical (pandas 'category' dtype) columns {cols[:5]} are not accepted: "
                     + REJECT_ADVICE)


def numeric_frame(X: Any, forest: Any, names: Any = None, dtypes: list | None = None) -> np.ndarray:
    """A frame of numbers as an array, as forest.input_rule converts it (pandas 'category'
    columns only where forest.pandas_categories is "values" or "sklearn": by their values;
    elsewhere treecomp.categories re-codes them first or they are refused); the column names
    checked against `names` (the model's feature names) unless None. Missing values are NaN.
    dtypes: list(X.dtypes), where the caller has it (reading it builds a Series).
    A polars frame becomes its to_numpy() array (the caller converts that as an array)."""
    check_names(X, names)
    rule = getattr(forest, "input_rule", "cast")
    if not is_pandas(X):  # polars (or another pandas-like frame)
        cats = polars_categorical(X) if hasattr(X, "dtypes") else []
        if cats:
            raise TypeError(f"categorical (polars Categorical / Enum) columns {cats[:5]} are "
                            "not accepted for this model: pass a pandas DataFrame with "
                            "'category' columns, or the numbers the model was trained on")
        if rule in ("xgboost", "lightgbm", "lightgbm_sklearn"):
            # both read a polars frame through Arrow, each column straight to their dtype
            # (XGBoost float32, LightGBM float64: not an int64 array's float32), numeric and
            # boolean columns only
            bad = [f"{c}: {dt}" for c, dt in zip(X.columns, X.dtypes)
                   if not (str(dt) == "Boolean" or getattr(dt, "is_numeric", lambda: False)())]
            if bad:
                raise ValueError("polars columns must be numeric or boolean for this model "
                                 f"(its library refuses the others); got {', '.join(bad[:10])}")
            import polars as pl
            to = pl.Float32 if rule == "xgboost" else pl.Float64
            return np.asarray(X.select(pl.all().cast(to)).to_numpy())
        return np.asarray(X.to_numpy())
    dtypes = list(X.dtypes) if dtypes is None else dtypes
    cats = [str(X.columns[j]) for j in category_positions(X, dtypes)]
    # scikit-learn reads a category column by its values (HistGradientBoosting's numeric
    # features too); elsewhere treecomp.categories re-codes them before this
    if cats and getattr(forest, "pandas_categories", "reject") not in ("values", "sklearn"):
        raise reject_categories(cats)
    try:
        if rule == "sklearn":
            return _sklearn_frame(X, dtypes, np.dtype(forest.input_dtype))
        if rule == "xgboost":
            return _xgboost_frame(X, dtypes)
        if rule in ("lightgbm", "lightgbm_sklearn"):
            _lightgbm_dtypes(X, dtypes)
            return X.to_numpy(dtype=np.float64, na_value=np.nan)
        return X.to_numpy(dtype=np.dtype(forest.input_dtype), na_value=np.nan)
    except (TypeError, ValueError, COMPLEX_WARNING) as exc:
        if isinstance(exc, _Refused):
            raise ValueError(str(exc)) from None
        raise TypeError(f"DataFrame columns must be numeric: {exc}") from None


#: numpy's ComplexWarning (np.exceptions from numpy 1.25 on)
COMPLEX_WARNING = getattr(getattr(np, "exceptions", np), "ComplexWarning")


class _Refused(ValueError):
    """A frame the library refuses (its own message), re-raised as a plain ValueError."""


def _early_conversion(dt: Any) -> bool:
    """sklearn 1.9's _pandas_dtype_needs_early_conversion: bool columns (numpy's too) and
    nullable numeric ones are converted by DataFrame.astype before np.asarray."""
    from pandas.api.types import (is_bool_dtype, is_extension_array_dtype, is_float_dtype,
                                  is_integer_dtype)
    if is_bool_dtype(dt):
        return True
    if type(dt).__name__ == "SparseDtype" or not is_extension_array_dtype(dt):
        return False
    return is_float_dtype(dt) or is_integer_dtype(dt)


def _sklearn_frame(X: Any, dtypes: list, dtype: np.dtype) -> np.ndarray:
    if any(getattr(dt, "kind", "") == "c" for dt in dtypes):
        raise _Refused("complex columns are not supported (scikit-learn refuses them too)")
    if any(_early_conversion(dt) for dt in dtypes):
        X = X.astype(dtype)
    with warnings.catch_warnings():
        warnings.simplefilter("error", COMPLEX_WARNING)
        return np.asarray(X, dtype=dtype)


def _xgboost_frame(X: Any, dtypes: list) -> np.ndarray:
    """XGBoost 3.2's pandas_transform_data converts column by column: float32 / float64 columns
    as they are (cast to float32 one by one later), the others to_numpy(float32): each value
    straight to float32. DataFrame.to_numpy(float32) does the same per block, in one call."""
    for j, dt in enumerate(dtypes):
        numpy_ok = isinstance(dt, np.dtype) and dt.kind in "biuf" and dt.itemsize <= 8
        nullable_ok = not isinstance(dt, np.dtype) and getattr(dt, "kind", "O") in "biuf"
        if not (numpy_ok or nullable_ok) or _is_category(dt):
            raise _Refused(f"column {str(X.columns[j])!r} has dtype {dt}: XGBoost reads only "
                           "int, float, bool and category columns (DataFrame.dtypes for data "
                           "must be int, float, bool or category)")
    return X.to_numpy(dtype=np.float32, na_value=np.nan)


def _lightgbm_dtypes(X: Any, dtypes: list) -> None:
    """LightGBM 4.7's _check_for_bad_pandas_dtypes."""
    f128 = getattr(np, "float128", type(None))
    bad = [f"{X.columns[j]}: {dt}" for j, dt in enumerate(dtypes)
           if not (isinstance(dt.type, type) and issubclass(dt.type, (np.integer, np.floating, np.bool_))
                   and not issubclass(dt.type, (np.timedelta64, f128)))]
    if bad:
        raise _Refused("pandas dtypes must be int, float or bool (LightGBM refuses the others "
                       f"too); fields with bad pandas dtypes: {', '.join(bad[:10])}")
