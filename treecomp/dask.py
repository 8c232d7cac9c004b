"""Scoring Dask collections with a compiled Predictor (the optional ``treecomp[dask]`` extra).

``predict(predictor, data, method)`` maps the predictor over the partitions of a
``dask.dataframe.DataFrame`` or the row blocks of a 2-D ``dask.array.Array`` and returns a lazy
collection with the right meta (Series / 1-D array for one output, DataFrame / 2-D array for
probabilities or several outputs).

Why the predictor goes into the graph once, as its own key: a Predictor pickles as its compiled
artifact (the .so bytes, see treecomp.loader), so a graph that embedded it in every task would
ship and hash those bytes once per partition. As a single keyed node that every task depends on,
distributed sends it to each worker once; unpickling there loads the shared library once per
worker process and graph (treecomp.loader.kernel_from_bytes shares it by content hash while a
Predictor holds it) and needs no C compiler. The key is derived from the artifact's content, so re-scoring with the same model
reuses the same node instead of hashing a pickle on every call.

Threads: Dask already runs one task per worker thread, so by default each partition is scored
on the calling thread only (``n_threads=1``); pass more to let each task split its batch.

dask is imported inside the functions: ``import treecomp.dask`` works without it, and a call
without it raises an ImportError that says which extra to install.
"""

from __future__ import annotations

import hashlib
from typing import Any, Sequence

import numpy as np

from .errors import UnsupportedModelError
from .ir import MULTILABEL_DECISIONS

__all__ = ["predict", "METHODS"]

#: accepted `method` values and the Predictor method each one calls ("raw" is the margin shaped
#: like the library's decision_function / output_margin=True)
METHODS = {"predict": "predict", "predict_proba": "predict_proba", "raw": "decision_function",
           "decision_function": "decision_function"}

_DEFAULT_NAMES = {"predict": "prediction", "predict_proba": "probability", "raw": "raw",
                  "decision_function": "raw"}


def _require_dask():
    try:
        import dask  # noqa: F401
        import dask.array  # noqa: F401
        import dask.dataframe  # noqa: F401
        import pandas  # noqa: F401
    except ImportError as exc:
        raise ImportError("treecomp.dask needs dask: pip install 'treecomp[dask]' "
                          f"({exc})") from None


# -- helpers shared with treecomp.spark (plain numpy/pandas, no dask) ---------------------------
def check_method(predictor: Any, method: str) -> str:
    """The Predictor method name for `method`, or a ValueError / AttributeError saying why not."""
    if method not in METHODS:
        raise ValueError(f"method must be one of {sorted(METHODS)}; got {method!r}")
    head = predictor.head
    if METHODS[method] == "predict_proba":
        if not head.is_classifier:
            raise AttributeError("method='predict_proba' needs a classifier; this model is a "
                                 "regressor (use method='predict' or 'raw')")
        if len(head.classes) != 1 and head.decision not in MULTILABEL_DECISIONS:
            raise UnsupportedModelError(
                f"method='predict_proba' on a multi-target classifier ({len(head.classes)} "
                "targets, one probability array each) is not supported by the scale-out helpers; "
                "supported: single-target classifiers (use method='predict' or 'raw' here)")
    return METHODS[method]


def output_names(predictor: Any, method: str, name: str | None) -> tuple[list[str], bool]:
    """Column names of the output and whether it is a single column (a Series)."""
    fn = METHODS[method]
    base = name or _DEFAULT_NAMES[method]
    head = predictor.head
    if fn == "predict_proba" and head.decision in MULTILABEL_DECISIONS:
        # multi-label: one probability per target (predict_proba is (n, targets))
        return [f"{base}_{i}" for i in range(head.n_outputs)], False
    if fn == "predict_proba":
        # one column per class, named after the label (what predict_proba's columns mean)
        return [f"{base}_{c}" for c in head.classes[0].tolist()], False
    if fn == "predict" and head.is_classifier:
        k = len(head.classes)  # one label per target
    elif fn == "predict" and head.transform == "weighted_median":
        k = 1  # AdaBoostRegressor: one median of its trees' outputs
    else:
        k = head.n_outputs
    if k == 1:
        return [base], True
    return [f"{base}_{i}" for i in range(k)], False


def empty_output(predictor: Any, method: str) -> np.ndarray:
    """The method's output for zero rows: its exact dtype and trailing shape, computed by the
    predictor itself (so labels keep the classes' dtype and float32 models stay float32)."""
    head = predictor.head  # integer rows: a model with categorical columns refuses floats there
    dtype = np.int64 if head.category_hashes else np.float64
    return getattr(predictor, METHODS[method])(np.zeros((0, head.n_features), dtype), n_threads=1)


def feature_columns(predictor: Any, available: Sequence[Any], columns: Sequence[Any] | None,
                    what: str) -> list[Any] | None:
    """The input columns to score, in the model's order; None means "all of them, positionally".

    Order of preference: explicit `columns`; the model's feature names (which must all be
    present); else every column of the frame, positionally (which must then number exactly
    n_features).
    """
    head = predictor.head
    avail = list(available)
    if columns is not None:
        columns = list(columns)
        if len(columns) != head.n_features:
            raise ValueError(f"columns names {len(columns)} columns, but the model expects "
                             f"{head.n_features} features")
        missing = [c for c in columns if c not in avail]
        if missing:
            raise ValueError(f"{what} has no column(s) {missing}; it has {avail}")
        return columns
    if head.feature_names is not None:
        names = list(head.feature_names)
        by_str = {str(c): c for c in avail}
        missing = [n for n in names if n not in by_str]
        if missing:
            raise ValueError(f"{what} lacks column(s) the model was trained on: {missing} "
                             f"(model features, in order: {names}); rename the columns or pass "
                             "columns=[...] to choose them")
        return [by_str[n] for n in names]
    if len(avail) != head.n_features:
        raise ValueError(f"the model was trained without feature names, so columns are taken "
                         f"positionally: {what} has {len(avail)} columns, but the model expects "
                         f"{head.n_features}; pass columns=[...] to choose them")
    return None


def _digest_key(predictor: Any) -> str:
    kernel = predictor.kernel
    h = hashlib.sha256(kernel.to_bytes())
    h.update(repr((kernel.kind, predictor.n_threads)).encode())
    return "treecomp-predictor-" + h.hexdigest()[:32]


def _shared(predictor: Any):
    """The predictor as one Delayed node of the graph (see the module docstring)."""
    import dask
    return dask.delayed(predictor, name=_digest_key(predictor), pure=True)


def as_model_columns(predictor: Any, frame: Any) -> Any:
    """`frame`'s columns (chosen by the caller's columns=[...], in the model's order) labelled
    with the model's feature names, which the Predictor requires of a DataFrame."""
    names = predictor.head.feature_names
    if names is None or list(frame.columns) == list(names):
        return frame
    if set(map(str, frame.columns)) == set(names):  # the model's own names, in another order
        raise ValueError(f"columns={list(frame.columns)[:20]} are the model's feature names in "
                         f"another order; pass them in the model's order {list(names)[:20]}")
    return frame.set_axis(list(names), axis=1)


# -- partition functions (module level: pickled by reference) -----------------------------------
def _score_frame(part, predictor, fn: str, columns, names: list[str], single: bool,
                 n_threads: int | None):
    import pandas as pd
    X = part if columns is None else as_model_columns(predictor, part[columns])
    values = getattr(predictor, fn)(X, n_threads=n_threads)
    if single:
        return pd.Series(values, index=part.index, name=names[0])
    return pd.DataFrame(values, index=part.index, columns=names)


def _score_block(block, predictor, fn: str, n_threads: int | None):
    return getattr(predictor, fn)(block, n_threads=n_threads)


# -- public -------------------------------------------------------------------------------------
def predict(predictor: Any, data: Any, method: str = "predict", *, columns: Sequence[Any] | None = None,
            name: str | None = None, n_threads: int | None = 1):
    """Score a Dask DataFrame or 2-D Dask Array lazily, partition by partition.

    predictor: a treecomp.Predictor (from treecomp.compile or treecomp.load).
    data: a dask.dataframe.DataFrame (columns picked by the model's feature names when it has
        them, else by `columns`, else positionally) or a 2-D dask.array.Array of rows.
    method: "predict" (labels / values), "predict_proba" (classifiers) or "raw" (margins like
        decision_function).
    name: output name (default "prediction" / "probability" / "raw"); probability columns are
        "<name>_<class label>", several outputs "<name>_<i>".
    n_threads: threads per partition (default 1: Dask parallelises over partitions).

    Returns, for a DataFrame: a Series (one output) or a DataFrame with the same divisions, so it
    can be assigned back (``ddf["prediction"] = predict(p, ddf)``); for an Array: a 1-D or 2-D
    array chunked by the same rows. Nothing is computed until you compute / persist / write it.
    """
    _require_dask()
    import dask.array as da
    import dask.dataframe as dd
    import pandas as pd

    fn = check_method(predictor, method)
    empty = empty_output(predictor, method)
    head = predictor.head

    if isinstance(data, dd.DataFrame):
        cols = feature_columns(predictor, data.columns, columns, "the dask DataFrame")
        meta_in = data._meta if cols is None else data._meta[cols]
        bad = {str(c): str(t) for c, t in meta_in.dtypes.items()
               if not (pd.api.types.is_numeric_dtype(t) or pd.api.types.is_bool_dtype(t))}
        if bad:
            raise TypeError(f"feature columns must be numeric; these are not: {bad}")
        names, single = output_names(predictor, method, name)
        if single:
            meta = pd.Series(empty.reshape(0), name=names[0], index=data._meta.index)
        else:
            meta = pd.DataFrame(empty.reshape(0, len(names)), columns=names, index=data._meta.index)
        return data.map_partitions(_score_frame, _shared(predictor), fn, cols, names, single,
                                   n_threads, meta=meta)

    if isinstance(data, dd.Series):
        raise TypeError("a dask Series is one column; pass a DataFrame (data.to_frame()) or a 2-D array")

    if isinstance(data, da.Array):
        if columns is not None:
            raise ValueError("columns= selects DataFrame columns; a dask Array is taken positionally")
        if data.ndim != 2:
            raise ValueError(f"a dask Array to score must be 2-D (n_rows, {head.n_features}); "
                             f"got {data.ndim}-D with shape {data.shape}")
        if not np.isnan(data.shape[1]) and data.shape[1] != head.n_features:
            raise ValueError(f"the dask Array has {data.shape[1]} columns, but the model expects "
                             f"{head.n_features} features")
        if data.dtype.kind not in "fiub":
            raise TypeError(f"a dask Array to score must be numeric; got dtype {data.dtype}")
        if len(data.chunks[1]) != 1:
            # every task needs whole rows: keep the row chunks, merge the column chunks
            data = data.rechunk({1: -1})
        if empty.ndim == 1:
            return data.map_blocks(_score_block, _shared(predictor), fn, n_threads,
                                   drop_axis=1, dtype=empty.dtype, meta=empty)
        return data.map_blocks(_score_block, _shared(predictor), fn, n_threads,
                               chunks=(data.chunks[0], (empty.shape[1],)), dtype=empty.dtype,
                               meta=empty)

    raise TypeError(f"treecomp.dask.predict scores a dask.dataframe.DataFrame or a 2-D "
                    f"dask.array.Array; got {type(data).__module__}.{type(data).__name__} "
                    "(for in-memory data call predictor.predict directly)")
