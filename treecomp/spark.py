"""Scoring Spark DataFrames with a compiled Predictor (the optional ``treecomp[spark]`` extra).

``predict(predictor, df, method)`` returns ``df`` with the prediction column(s) appended, scored
by ``DataFrame.mapInPandas`` (Arrow batches of pandas rows in the Python workers).

Why a broadcast: a Predictor pickles as its compiled artifact (the .so bytes, see
treecomp.loader). Broadcasting it ships those bytes to each executor once instead of once per
task inside the closure; a Python worker unpickles it once (Spark caches a broadcast's value per
worker process, and treecomp.loader.kernel_from_bytes shares the loaded shared library by
content hash while that value holds it), so no task recompiles or reloads it and executors need no C compiler. On Spark
Connect, where there is no SparkContext to broadcast from, the predictor travels inside the
function's closure instead (same bytes, once per task).

Types: output columns carry the predictor's exact dtype (float64 -> DoubleType, float32 ->
FloatType, int64 labels -> LongType, string labels -> StringType, bool -> BooleanType), so the
values equal ``predictor.predict`` on the same rows bit for bit. Spark nulls in feature columns
arrive as NaN (Arrow -> pandas) and follow the model's missing-value rule, or raise if the model
rejects NaN.

pyspark is imported inside the functions: ``import treecomp.spark`` works without it.
"""

from __future__ import annotations

from typing import Any, Iterator, Sequence

import numpy as np

from .dask import as_model_columns, check_method, empty_output, feature_columns, output_names
from .errors import UnsupportedModelError

__all__ = ["predict"]


def _require_spark():
    try:
        import pandas  # noqa: F401
        import pyarrow  # noqa: F401
        import pyspark  # noqa: F401
    except ImportError as exc:
        raise ImportError("treecomp.spark needs pyspark, pandas and pyarrow: "
                          f"pip install 'treecomp[spark]' ({exc})") from None


def _spark_type(dtype: np.dtype, sample_labels: Sequence[np.ndarray]):
    """The Spark SQL type that holds values of `dtype` without changing them."""
    from pyspark.sql import types as T
    dtype = np.dtype(dtype)
    if dtype == np.float64:
        return T.DoubleType()
    if dtype == np.float32:
        return T.FloatType()
    if dtype.kind == "b":
        return T.BooleanType()
    if dtype.kind in "i" or (dtype.kind == "u" and dtype.itemsize < 8):
        return T.LongType() if dtype.itemsize > 4 or dtype.kind == "u" else T.IntegerType()
    if dtype.kind == "U":
        return T.StringType()
    if dtype.kind == "O" and all(isinstance(v, str) for c in sample_labels for v in c.tolist()):
        return T.StringType()
    raise UnsupportedModelError(
        f"labels of dtype {dtype} ({[c.tolist()[:5] for c in sample_labels]}) have no exact Spark "
        "type; supported labels: integers, booleans, floats, strings (use method='raw' or "
        "'predict_proba' for such models)")


def _numeric(dt) -> bool:
    from pyspark.sql import types as T
    return isinstance(dt, (T.NumericType, T.BooleanType))


def _scorer(get_predictor, fn: str, columns: list[str], names: list[str], n_threads: int | None,
            casts: list[Any]):
    def score(batches: Iterator[Any]) -> Iterator[Any]:
        predictor = get_predictor()
        for pdf in batches:
            values = getattr(predictor, fn)(as_model_columns(predictor, pdf[columns]), n_threads=n_threads)
            values = values.reshape(len(pdf), -1)
            for k, nm in enumerate(names):
                col = values[:, k]
                # unsigned and object labels go out as the Spark type chosen for them
                pdf[nm] = col if casts[k] is None else col.astype(casts[k])
            yield pdf
    return score


def predict(predictor: Any, df: Any, method: str = "predict", *, columns: Sequence[str] | None = None,
            name: str | None = None, n_threads: int | None = 1):
    """Return `df` with the model's output appended, computed on the executors.

    predictor: a treecomp.Predictor.
    df: a pyspark.sql.DataFrame. Feature columns are the model's feature names when it has them,
        else `columns`, else all columns positionally (then they must number n_features).
    method: "predict" (labels / values), "predict_proba" (one column per class) or "raw"
        (margins like decision_function).
    name: output column name (default "prediction" / "probability" / "raw"); probability
        columns are "<name>_<class label>", several outputs "<name>_<i>". Must not clash with
        an existing column.
    n_threads: native threads per task (default 1: Spark runs one task per core).

    Lazy like any Spark transformation: write or collect the result to run it.
    """
    _require_spark()
    from pyspark.sql import types as T

    fn = check_method(predictor, method)
    empty = empty_output(predictor, method)
    names, _ = output_names(predictor, method, name)
    clash = [n for n in names if n in df.columns]
    if clash:
        raise ValueError(f"the DataFrame already has column(s) {clash}; pass name=... to choose "
                         "another output name")
    cols = feature_columns(predictor, df.columns, columns, "the Spark DataFrame")
    if cols is None:
        cols = list(df.columns)
    types = dict(zip(df.columns, (f.dataType for f in df.schema.fields)))
    bad = {c: types[c].simpleString() for c in cols if not _numeric(types[c])}
    if bad:
        raise TypeError(f"feature columns must be numeric; these are not: {bad}")

    labels = predictor.head.classes if (fn == "predict" and predictor.head.is_classifier) else ()
    spark_types, casts = [], []
    for k in range(len(names)):
        dt = empty.dtype
        st = _spark_type(dt, labels[k:k + 1] if labels else ())
        spark_types.append(st)
        # what the column becomes before Arrow: object / unsigned labels get a plain type
        casts.append(str if isinstance(st, T.StringType) and dt.kind == "O"
                     else np.int64 if dt.kind == "u" else None)
    schema = T.StructType(list(df.schema.fields)
                          + [T.StructField(n, t, True) for n, t in zip(names, spark_types)])

    if type(df).__module__.startswith("pyspark.sql.connect"):
        # Spark Connect has no SparkContext to broadcast from: the closure carries the predictor
        def get(p=predictor):
            return p
    else:
        bc = df.sparkSession.sparkContext.broadcast(predictor)

        def get():
            return bc.value  # unpickled once per Python worker, then cached by Spark
    return df.mapInPandas(_scorer(get, fn, cols, names, n_threads, casts), schema)
