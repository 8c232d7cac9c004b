"""Categorical input columns -> codes: CatBoost's one-hot features by hash (`encode`), and pandas
'category' columns (and, for scikit-learn, values in object arrays) by the categories the model
was trained on (`recode`), each as its library does it.

CatBoost (1.2.10) turns a categorical value into a string, hashes it with CityHash64 (the
v1.0.x algorithm of its util/digest/city.h) and keeps the low 32 bits (CalcCatFeatureHash); a
one-hot split is "hash == value". The value's string, as catboost's Python package builds it
(checked by tests/test_frontend_catboost.py against catboost's predictions):

- str (numpy str_ too): its UTF-8 bytes; bytes: as they are;
- int, numpy integers, bool (Python's and numpy's): the decimal form of the integer, so
  True -> "1", -3 -> "-3";
- any float (1.0 included), NaN, None: catboost raises ("cat_features must be integer or
  string"); so does treecomp (TypeError). A float numpy array is refused likewise (catboost:
  "numpy array of floating point numerical type, it means no categorical features").

A Forest whose `category_hashes` is non-empty reads such a column as a category code: the index
of the value's hash among that column's known hashes (the hashes its splits compare), and
len(hashes) for every other value, which no split matches (CatBoost's "unknown category": every
one-hot test false). `encode` builds that matrix; treecomp.inputs.as_matrix calls it first.

`recode` (Forest.pandas_categories, Forest.category_values; checked against the libraries by
tests/test_categories.py, a seeded fuzz among them):

- XGBoost >= 3.1 keeps the categories of a model trained on a DataFrame in the model
  (``gradient_booster.model.cats``) and re-codes a frame's category columns by them: a
  category's code is its index among the model's categories of that feature, whatever its
  code in the frame; NaN is missing. The frame's category index must have the type the
  model's has (an int32 index for an int64-trained feature is refused, float indexes always;
  strings are strings); a category column where the model has a numeric feature, or the
  reverse, is refused. A category the model never saw is refused (ValueError), as XGBoost
  3.3+ does for every unseen category; 3.2 raises only for one above every known category and
  silently gives one below the code of the next known category (dmlc/xgboost#12193): treecomp
  refuses those rather than guess. ``Booster.predict`` (pandas_categories "xgboost") reads a
  frame without category columns as numbers (codes); the sklearn wrappers' inplace_predict
  ("xgboost_inplace") refuses it.
- LightGBM keeps ``pandas_categorical`` (one list per category column of the training frame,
  in column order) at the end of the text model; ``Booster.predict`` takes the frame's category
  columns in order, sets each to its list (``cat.set_categories``) unless it equals it already,
  and reads the codes, -1 (missing or unknown) as NaN. A different number of category columns
  is refused. A model without the lists (trained on an array: "pandas_categorical:null") reads
  the frame's own codes: refused here (pandas_categories "reject"), as no list says what they
  mean.
- scikit-learn's HistGradientBoosting (a preprocessor: ``categorical_features`` given or
  "from_dtype") runs an OrdinalEncoder over its categorical columns, for every kind of input:
  a value becomes the index of the category it equals (Python equality: 3.0 and True equal 3,
  the string "3" does not), anything else NaN (the missing way). For string categories (kind
  "obj") numeric columns are refused (TypeError, as sklearn's isnan); numeric categories (kind
  "num") keep the value itself, which the splits compare, and strings are refused in a string
  array (ValueError, as the encoder's "previously unseen labels") but unknown in an object one.
  The preprocessor takes a frame's columns by name: reordered and extra columns are accepted
  (missing ones refused), as scikit-learn does for these models.
"""

from __future__ import annotations

import functools
import struct
from typing import Any

import numpy as np

from .frames import category_positions, check_names, is_frame, is_pandas, numeric_frame

_M = (1 << 64) - 1
_K0, _K1, _K2, _K3 = 0xc3a5c85c97cb3127, 0xb492b66fbe98f273, 0x9ae16a3b2f90404f, 0xc949d7c7509e6557
_KMUL = 0x9ddfea08eb382d69


def _f64(s: bytes, i: int) -> int:
    return struct.unpack_from("<Q", s, i)[0]


def _rot(v: int, r: int) -> int:
    return v if r == 0 else ((v >> r) | (v << (64 - r))) & _M


def _mix(v: int) -> int:
    return v ^ (v >> 47)


def _h16(u: int, v: int) -> int:
    a = ((u ^ v) * _KMUL) & _M
    a ^= a >> 47
    b = ((v ^ a) * _KMUL) & _M
    b ^= b >> 47
    return (b * _KMUL) & _M


def _weak(s: bytes, i: int, a: int, b: int) -> tuple[int, int]:
    w, x, y, z = struct.unpack_from("<4Q", s, i)
    a = (a + w) & _M
    b = _rot((b + a + z) & _M, 21)
    c = a
    a = (a + x + y) & _M
    b = (b + _rot(a, 44)) & _M
    return (a + z) & _M, (b + c) & _M


def _len0to16(s: bytes, n: int) -> int:
    if n > 8:
        a, b = _f64(s, 0), _f64(s, n - 8)
        return _h16(a, _rot((b + n) & _M, n)) ^ b
    if n >= 4:
        a = struct.unpack_from("<I", s, 0)[0]
        return _h16((n + (a << 3)) & _M, struct.unpack_from("<I", s, n - 4)[0])
    if n > 0:
        y = s[0] + (s[n >> 1] << 8)
        z = n + (s[n - 1] << 2)
        return (_mix(((y * _K2) ^ (z * _K3)) & _M) * _K2) & _M
    return _K2


def _len17to32(s: bytes, n: int) -> int:
    a = (_f64(s, 0) * _K1) & _M
    b = _f64(s, 8)
    c = (_f64(s, n - 8) * _K2) & _M
    d = (_f64(s, n - 16) * _K0) & _M
    return _h16((_rot((a - b) & _M, 43) + _rot(c, 30) + d) & _M,
                (a + _rot(b ^ _K3, 20) - c + n) & _M)


def _len33to64(s: bytes, n: int) -> int:
    z = _f64(s, 24)
    a = (_f64(s, 0) + (n + _f64(s, n - 16)) * _K0) & _M
    b = _rot((a + z) & _M, 52)
    c = _rot(a, 37)
    a = (a + _f64(s, 8)) & _M
    c = (c + _rot(a, 7)) & _M
    a = (a + _f64(s, 16)) & _M
    vf, vs = (a + z) & _M, (b + _rot(a, 31) + c) & _M
    a = (_f64(s, 16) + _f64(s, n - 32)) & _M
    z = _f64(s, n - 8)
    b = _rot((a + z) & _M, 52)
    c = _rot(a, 37)
    a = (a + _f64(s, n - 24)) & _M
    c = (c + _rot(a, 7)) & _M
    a = (a + _f64(s, n - 16)) & _M
    wf, ws = (a + z) & _M, (b + _rot(a, 31) + c) & _M
    r = _mix(((vf + ws) * _K2 + (wf + vs) * _K0) & _M)
    return (_mix((r * _K0 + vs) & _M) * _K2) & _M


def cityhash64(s: bytes) -> int:
    """CityHash64 v1.0.x (Google's 2011 release, as Yandex's util/digest/city.h keeps it; v1.1
    changed the results): an unsigned 64-bit int. Pure Python, for a column's distinct values."""
    n = len(s)
    if n <= 16:
        return _len0to16(s, n)
    if n <= 32:
        return _len17to32(s, n)
    if n <= 64:
        return _len33to64(s, n)
    x = _f64(s, 0)
    y = _f64(s, n - 16) ^ _K1
    z = _f64(s, n - 56) ^ _K0
    v = _weak(s, n - 64, n, y)
    w = _weak(s, n - 32, (n * _K1) & _M, _K0)
    z = (z + _mix(v[1]) * _K1) & _M
    x = (_rot((z + x) & _M, 39) * _K1) & _M
    y = (_rot(y, 33) * _K1) & _M
    for p in range(0, (n - 1) & ~63, 64):  # 64-byte chunks, the tail was hashed first
        x = (_rot((x + y + v[0] + _f64(s, p + 16)) & _M, 37) * _K1) & _M
        y = (_rot((y + v[1] + _f64(s, p + 48)) & _M, 42) * _K1) & _M
        x ^= w[1]
        y ^= v[0]
        z = _rot(z ^ w[0], 33)
        v = _weak(s, p, (v[1] * _K1) & _M, (x + w[0]) & _M)
        w = _weak(s, p + 32, (z + w[1]) & _M, y)
        z, x = x, z
    return _h16((_h16(v[0], w[0]) + _mix(y) * _K1 + z) & _M, (_h16(v[1], w[1]) + x) & _M)


def catboost_hash(value: Any) -> int:
    """CatBoost's CalcCatFeatureHash of a categorical value (uint32), from the string catboost's
    Python package makes of it; TypeError where catboost refuses the value."""
    if isinstance(value, (str, np.str_)):
        b = str(value).encode("utf-8")
    elif isinstance(value, (bytes, np.bytes_)):
        b = bytes(value)
    elif isinstance(value, (int, np.integer, np.bool_)):  # bool is an int: True -> "1"
        b = str(int(value)).encode()
    else:
        raise TypeError(f"categorical value {str(value)[:40]!r} of type {type(value).__name__}: "
                        "CatBoost's categorical features take integers or strings (catboost "
                        "refuses floats, NaN and None too; convert them to strings as in training)")
    return _hash_bytes(b)


@functools.lru_cache(maxsize=1 << 16)
def _hash_bytes(b: bytes) -> int:
    """The low 32 bits of CityHash64, remembered per process: a request handler scoring one row
    at a time hashes each category once, not once per call (pure Python: ~10 us a string)."""
    return cityhash64(b) & 0xFFFFFFFF


def _codes(values: np.ndarray, hashes: tuple[int, ...]) -> np.ndarray:
    """Float64 codes of a column's values (see the module docstring), hashing each distinct
    value once."""
    index = {h: i for i, h in enumerate(hashes)}
    unknown = len(hashes)
    kind = values.dtype.kind
    if kind in "biuUS":  # one dtype: hash the distinct values
        uniq, inv = np.unique(values, return_inverse=True)
        if kind == "b":
            uniq = uniq.astype(np.int64)
        table = np.array([index.get(catboost_hash(v.item() if kind != "U" else str(v)), unknown)
                          for v in uniq], np.float64)
        return table[inv.reshape(-1)] if len(uniq) else np.zeros(len(values))
    if kind != "O":
        raise TypeError(f"a categorical column of dtype {values.dtype}: CatBoost's categorical "
                        "features take integers or strings (catboost refuses float arrays too)")
    cache: dict[tuple[type, Any], float] = {}
    out = np.empty(len(values))
    for i, v in enumerate(values.tolist()):
        key = (type(v), v)  # by type: 1.0 == 1 == True, but catboost refuses 1.0
        code = cache.get(key)
        if code is None:
            code = cache[key] = float(index.get(catboost_hash(v), unknown))
        out[i] = code
    return out


def _frame_column(col: Any) -> np.ndarray:
    """A DataFrame column's values as catboost reads them: category columns by their values,
    pandas strings as str objects; float columns (nullable Int64 too: catboost reads its values
    as floats) are refused by _codes."""
    dt = col.dtype
    if str(dt) == "category":
        return np.asarray(col.astype(object).to_numpy(), dtype=object)
    if isinstance(dt, np.dtype):
        return col.to_numpy()
    if getattr(dt, "kind", "O") in "O" or str(dt).startswith("string"):
        return col.to_numpy(dtype=object)
    raise TypeError(f"a categorical column of dtype {dt}: CatBoost reads its values as floats and "
                    "refuses them; pass integers or strings")


#: DataFrames of up to this many rows (of numpy dtypes) are read as one object array
SMALL_FRAME = 64


def encode(X: Any, forest: Any) -> np.ndarray:
    """X (DataFrame, array or list of rows) as a float64 matrix: categorical columns as codes
    (forest.category_hashes), the others as numbers. DataFrame column names are checked first,
    as as_matrix checks them."""
    nf = forest.n_features
    cats = dict(forest.category_hashes)
    if hasattr(X, "columns") and hasattr(X, "to_numpy"):
        if not hasattr(X, "iloc"):  # a pandas-like frame (polars): its pandas form
            if not hasattr(X, "to_pandas"):
                raise TypeError(f"a {type(X).__name__} with categorical columns: pass a pandas "
                                "DataFrame, an object array or a list of rows")
            X = X.to_pandas()
        check_names(X, forest.feature_names)
        if X.shape[1] != nf:
            raise ValueError(f"input has {X.shape[1]} features, but the model expects {nf}")
        if len(X) <= SMALL_FRAME and all(_plain_dtype(dt) for dt in X.dtypes):
            # a few rows of plain numpy columns: one conversion to Python values, read as an
            # object array below (the same numbers and categories; pandas' column indexing
            # cost ~300 us a call, most of a single row's time)
            X = X.to_numpy(dtype=object)
        else:
            out = np.empty(X.shape, np.float64)
            num = [j for j in range(nf) if j not in cats]
            if num:
                out[:, num] = numeric_frame(X.iloc[:, num], forest)  # names: checked above
            for j, hashes in cats.items():
                out[:, j] = _codes(_frame_column(X.iloc[:, j]), hashes)
            return out
    arr = X if isinstance(X, np.ndarray) else np.array(X, dtype=object)  # lists: keep the types
    if arr.ndim != 2:
        raise ValueError(f"input must be 2-D (n_rows, {nf}); got shape {arr.shape}"
                         + ("; use X.reshape(1, -1) for a single row" if arr.ndim == 1 else ""))
    if arr.shape[1] != nf:
        raise ValueError(f"input has {arr.shape[1]} features, but the model expects {nf}")
    if arr.dtype.kind == "f":
        raise TypeError(f"a float array ({arr.dtype}) for a model with categorical features "
                        f"(columns {sorted(cats)[:10]}): catboost refuses it too; pass an integer "
                        "array, an object array, a list of rows or a DataFrame with integer or "
                        "string categories")
    out = np.empty(arr.shape, np.float64)
    num = [j for j in range(nf) if j not in cats]
    if num:
        sub = arr[:, num]
        try:
            out[:, num] = sub.astype(np.float64) if sub.dtype.kind in "Ofiub" else _not_numeric(sub)
        except (TypeError, ValueError):
            raise TypeError(f"numeric columns must hold numbers; got {arr.dtype} values that are "
                            "not") from None
    for j, hashes in cats.items():
        out[:, j] = _codes(arr[:, j], hashes)
    return out


def _plain_dtype(dt: Any) -> bool:
    """numpy dtypes and pandas' string dtypes: their to_numpy(dtype=object) values are what
    _frame_column reads (unlike 'category', nullable integers and other extension dtypes)."""
    return isinstance(dt, np.dtype) or str(dt) == "str" or str(dt).startswith("string")


def _not_numeric(sub: np.ndarray) -> np.ndarray:
    raise TypeError(f"numeric columns of dtype {sub.dtype}")


# -- pandas categories by the model's lists (recode) --------------------------------------------
def recodes(X: Any, forest: Any) -> bool:
    """Whether `recode` reads X for this model (else X is plain numbers, or refused elsewhere):
    pandas frames for the re-coding modes; for scikit-learn's encoder anything but a numeric
    array (which it refuses where a column has string categories)."""
    mode = getattr(forest, "pandas_categories", "reject")
    if mode in ("xgboost", "xgboost_inplace", "lightgbm"):
        return is_pandas(X)
    if mode != "sklearn":
        return False
    if isinstance(X, np.ndarray) and X.dtype.kind in "fiub":
        objs = [c for c, k, _ in forest.category_values if k == "obj"]
        if objs:
            raise TypeError(f"a numeric array ({X.dtype}) for a model whose categorical "
                            f"feature(s) {_names(forest, objs)} have string categories: "
                            "scikit-learn refuses it too (its encoder compares values: pass an "
                            "object array, a list of rows or a DataFrame with the categories)")
        return False
    return True


def _names(forest: Any, cols: list[int]) -> list:
    names = forest.feature_names
    return [names[c] if names is not None else c for c in cols[:5]]


def recode(X: Any, forest: Any) -> np.ndarray:
    """X with its categorical columns as codes, as the model's library re-codes them (see the
    module docstring), in a matrix of the forest's input dtype (the other columns converted as
    treecomp.frames.numeric_frame converts them)."""
    mode = forest.pandas_categories
    if mode == "sklearn":
        return _sklearn(X, forest)
    check_names(X, forest.feature_names)
    dtypes = list(X.dtypes)  # (a Series built on each read)
    cats = category_positions(X, dtypes)
    if mode == "lightgbm":
        return _lightgbm(X, forest, cats, dtypes)
    return _xgboost(X, forest, cats, dtypes)


def _frame_out(X: Any, forest: Any, cats: list[int], dtype: Any, dtypes: list) -> np.ndarray:
    """A matrix for X's values: the non-category columns already converted."""
    if not cats:  # (no copy of the frame's columns)
        return np.asarray(numeric_frame(X, forest, dtypes=dtypes), dtype)
    out = np.empty(X.shape, dtype)
    coded = set(cats)
    num = [j for j in range(X.shape[1]) if j not in coded]
    if num:
        out[:, num] = numeric_frame(X.iloc[:, num], forest)  # names: checked by the caller
    return out


def _lightgbm(X: Any, forest: Any, cats: list[int], dtypes: list) -> np.ndarray:
    lists = [list(v) for _, _, v in forest.category_values]
    if len(cats) != len(lists):
        raise ValueError(f"the DataFrame has {len(cats)} category column(s), but the model was "
                         f"trained on a frame with {len(lists)} (LightGBM refuses it too: train "
                         "and valid dataset categorical_feature do not match)")
    out = _frame_out(X, forest, cats, np.float64, dtypes)
    for j, known in zip(cats, lists):
        col = X.iloc[:, j]
        if list(col.cat.categories) != known:  # LightGBM 4.7's _data_from_pandas, verbatim
            col = col.cat.set_categories(known)
        codes = col.cat.codes.to_numpy().astype(np.float64)
        codes[codes == -1] = np.nan
        out[:, j] = codes
    return out


def _xgboost(X: Any, forest: Any, cats: list[int], dtypes: list) -> np.ndarray:
    known = {c: (k, v) for c, k, v in forest.category_values}
    if not cats and forest.pandas_categories == "xgboost":
        return numeric_frame(X, forest, dtypes=dtypes)  # a DMatrix without categories: numbers
    if X.shape[1] != forest.n_features:
        raise ValueError(f"input has {X.shape[1]} features, but the model expects {forest.n_features}")
    for j in range(X.shape[1]):
        if (j in cats) != (j in known):
            raise ValueError(
                f"column {str(X.columns[j])!r} is {'a category' if j in cats else 'a numeric'} "
                f"column where the model has a {'categorical' if j in known else 'numeric'} "
                "feature (XGBoost refuses it too: both should be either numeric or categorical)")
    out = _frame_out(X, forest, cats, np.float32, dtypes)
    for j in cats:
        col = X.iloc[:, j]
        table = _xgboost_table(col.cat.categories, *known[j], str(X.columns[j]))
        # code -1 (missing) reads the NaN appended at the end
        out[:, j] = np.append(table, np.float32(np.nan))[col.cat.codes.to_numpy()]
    return out


def _xgboost_table(index: Any, kind: str, values: tuple, name: str) -> np.ndarray:
    """The model's code (float32) of each category of a frame column's category index, as
    XGBoost's re-coder finds them (pd_cat_inf: an integer index keeps its type, anything else
    is strings)."""
    dt = getattr(index, "dtype", None)
    if isinstance(dt, np.dtype) and dt.kind == "f":
        raise ValueError(f"column {name!r}: a category index of floating point dtype ({dt}); "
                         "XGBoost refuses it too (use strings or integers)")
    if isinstance(dt, np.dtype) and dt.kind in "iu":
        frame_kind, items = dt.name, index.tolist()
    else:
        frame_kind, items = "str", []
        for v in index.tolist():
            if isinstance(v, bytes):
                v = v.decode("utf-8", "surrogateescape")
            if not isinstance(v, str):
                raise TypeError(f"column {name!r}: category {v!r} of type {type(v).__name__}: "
                                "XGBoost takes integer or string categories (it fails on this "
                                "one too)")
            items.append(v)
    if frame_kind != kind:
        raise ValueError(f"column {name!r}: its categories are {frame_kind}, the model's {kind} "
                         "(XGBoost refuses it too: the category index type must match between "
                         "the training and the test set)")
    lookup = {v: i for i, v in enumerate(values)}
    table = np.empty(len(items), np.float32)
    for i, v in enumerate(items):
        code = lookup.get(v)
        if code is None:
            raise ValueError(
                f"column {name!r}: category {v!r} was not seen in training (XGBoost 3.3 and later "
                "refuse it too; 3.2 silently gives it the code of a neighbouring category). Map "
                "it to a known category or to NaN; a category the frame lists but never uses "
                "counts too: df[col].cat.remove_unused_categories() drops those")
        table[i] = code
    return table


def _sklearn(X: Any, forest: Any) -> np.ndarray:
    """HistGradientBoosting's preprocessor: categorical columns through its OrdinalEncoder, the
    others as check_array(dtype=float64) reads them."""
    known = {c: (k, v) for c, k, v in forest.category_values}
    nf = forest.n_features
    if is_frame(X):
        names = forest.feature_names
        cols = [str(c) for c in X.columns]
        if names is not None and cols != list(names) and len(set(cols)) == len(cols) \
                and set(names) <= set(cols):
            # the preprocessor (a ColumnTransformer fitted on a frame) takes its columns by
            # name: other orders and extra columns are read as scikit-learn reads them
            where = {c: j for j, c in enumerate(cols)}
            pos = [where[n] for n in names]
            X = X.iloc[:, pos] if is_pandas(X) else X.select([X.columns[j] for j in pos])
        check_names(X, names)
        if not is_pandas(X):  # polars: the values (Categorical columns as strings)
            X = np.asarray(X.to_numpy())
    if is_pandas(X):
        if X.shape[1] != nf:
            raise ValueError(f"input has {X.shape[1]} features, but the model expects {nf}")
        out = np.empty(X.shape, np.float64)
        num = [j for j in range(nf) if j not in known]
        if num:
            out[:, num] = numeric_frame(X.iloc[:, num], forest)
        for j, (kind, values) in known.items():
            col, name = X.iloc[:, j], str(X.columns[j])
            if type(col.dtype).__name__ == "CategoricalDtype":  # each category once; -1: NaN
                table = _encoder_codes(np.asarray(col.cat.categories), kind, values, name)
                out[:, j] = np.append(table, np.nan)[col.cat.codes.to_numpy()]
            else:
                out[:, j] = _encoder_codes(_column_values(col), kind, values, name)
        return out
    # arrays, lists (ColumnTransformer: check_array(X, dtype=object) for a list)
    arr = X if isinstance(X, np.ndarray) else np.array(X, dtype=object)
    if arr.ndim != 2:
        raise ValueError(f"input must be 2-D (n_rows, {nf}); got shape {arr.shape}"
                         + ("; use X.reshape(1, -1) for a single row" if arr.ndim == 1 else ""))
    if arr.shape[1] != nf:
        raise ValueError(f"input has {arr.shape[1]} features, but the model expects {nf}")
    out = np.empty(arr.shape, np.float64)
    num = [j for j in range(nf) if j not in known]
    if num:
        try:
            out[:, num] = np.asarray(arr[:, num], dtype=np.float64)
        except (TypeError, ValueError) as exc:
            raise TypeError(f"numeric columns must hold numbers ({exc})") from None
    for j, (kind, values) in known.items():
        out[:, j] = _encoder_codes(arr[:, j], kind, values, j)
    return out


def _column_values(col: Any) -> np.ndarray:
    """A frame column's values as the OrdinalEncoder sees them (nullable and string columns:
    objects)."""
    if isinstance(col.dtype, np.dtype):
        return col.to_numpy()
    return col.to_numpy(dtype=object)


def _encoder_codes(vals: np.ndarray, kind: str, values: tuple, name: Any) -> np.ndarray:
    """sklearn 1.9's OrdinalEncoder(handle_unknown="use_encoded_value", unknown_value=nan,
    encoded_missing_value=nan) over one column, for the IR: kind "obj" -> the code, kind "num"
    -> the category value itself (the splits compare values); NaN for everything else."""
    k = vals.dtype.kind
    if kind == "obj":
        if k in "biufc":
            raise TypeError(f"categorical feature {name!r} has string categories but the input "
                            f"column is numeric ({vals.dtype}); scikit-learn refuses it too")
        lookup = {v: float(i) for i, v in enumerate(values)}
    else:
        if k in "biuf":
            return vals.astype(np.float64)
        if k in "US":
            raise ValueError(f"categorical feature {name!r} has numeric categories but the input "
                             f"is a string array ({vals.dtype}); scikit-learn refuses it too "
                             "(previously unseen labels)")
        lookup = {v: float(v) for v in values}
    out = np.empty(len(vals))
    for i, v in enumerate(vals.tolist()):
        try:
            out[i] = lookup.get(v, np.nan)
        except TypeError:  # unhashable: no category
            out[i] = np.nan
    return out
