"""Categorical input columns compared by hash (CatBoost's one-hot features): values -> codes.

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
"""

from __future__ import annotations

import functools
import struct
from typing import Any

import numpy as np

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
    from .inputs import _check_columns, numeric_frame

    nf = forest.n_features
    cats = dict(forest.category_hashes)
    if hasattr(X, "columns") and hasattr(X, "to_numpy"):
        if not hasattr(X, "iloc"):  # a pandas-like frame (polars): its pandas form
            if not hasattr(X, "to_pandas"):
                raise TypeError(f"a {type(X).__name__} with categorical columns: pass a pandas "
                                "DataFrame, an object array or a list of rows")
            X = X.to_pandas()
        if forest.feature_names is not None:
            _check_columns([str(c) for c in X.columns], list(forest.feature_names))
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
