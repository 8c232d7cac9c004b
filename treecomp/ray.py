"""Scoring Ray Data Datasets with a compiled Predictor (the optional ``treecomp[ray]`` extra).

``predict(predictor, dataset, method)`` returns a new ``ray.data.Dataset``: ``dataset`` with the
prediction column(s) appended, scored by ``Dataset.map_batches`` in pandas batches: plain tasks by
default, or a pool of Ray actors (``concurrency=``). Like every Ray Data transformation it is lazy: write, materialize or iterate the
result to run it.

How the predictor reaches the workers: a Predictor pickles as its compiled artifact (the .so
bytes, see treecomp.loader). ``predict`` puts it in the object store once (``ray.put``). Tasks get
the reference wrapped in a list (so Ray does not fetch it for every batch) and each worker
process fetches and unpickles it once, keeping it in a small per-process cache; an actor pool
gets it as a constructor argument, resolved once per actor. Either way
treecomp.loader.kernel_from_bytes then caches the loaded library by content hash, no batch
carries the bytes, and the workers need no C compiler.

Why pandas batches: the Predictor reads a DataFrame directly (checking feature names when the
model has them), Arrow nulls arrive as NaN and follow the model's missing-value rule (as in
treecomp.spark), and the appended columns go back to Arrow with the predictor's exact dtypes
(float32 stays float, string labels become strings, integer labels stay integers). The "numpy"
format would give a dict of separate columns, so it would save no copy on the way in.

Errors: a bad method and, when the Dataset's schema is known without running anything (a
Dataset read from files or built from memory), missing / non-numeric / wrong-count feature
columns and output-name clashes are raised by ``predict`` itself. After a transformation whose
output schema Ray only learns by running it (another map_batches, select_columns, ...), the same
checks run on the first batch in the workers, rather than executing part of the pipeline here
(call ``dataset.materialize()`` first to have them raised eagerly).

ray is imported inside the functions: ``import treecomp.ray`` works without it.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from .dask import as_model_columns, check_method, empty_output, feature_columns, output_names

__all__ = ["predict"]

#: map_batches arguments that predict sets itself
_OWN_ARGS = {"fn", "batch_format", "batch_size", "compute", "concurrency", "num_cpus",
             "fn_args", "fn_kwargs", "fn_constructor_args", "fn_constructor_kwargs"}


def _require_ray():
    try:
        import pandas  # noqa: F401
        import pyarrow  # noqa: F401
        import ray  # noqa: F401
        import ray.data  # noqa: F401
    except ImportError as exc:
        raise ImportError("treecomp.ray needs ray[data], pandas and pyarrow: "
                          f"pip install 'treecomp[ray]' ({exc})") from None


def _is_numeric(t: Any) -> bool:
    """Whether a Ray schema type (a pyarrow DataType, or a numpy / pandas dtype for pandas
    blocks) holds numbers or booleans."""
    import pyarrow as pa
    if isinstance(t, pa.DataType):
        return pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_boolean(t)
    import pandas as pd
    try:
        return bool(pd.api.types.is_numeric_dtype(t) or pd.api.types.is_bool_dtype(t))
    except TypeError:
        return False


def _resolve(predictor: Any, available: Sequence[str], types: Sequence[Any] | None,
             columns: Sequence[str] | None, names: list[str]) -> list[str]:
    """The feature columns to score, in the model's order, after the checks predict makes."""
    clash = [n for n in names if n in available]
    if clash:
        raise ValueError(f"the Dataset already has column(s) {clash}; pass name=... to choose "
                         "another output name")
    cols = feature_columns(predictor, available, columns, "the Ray Dataset")
    if cols is None:
        cols = list(available)
    if types is not None:
        by_name = dict(zip(available, types))
        bad = {c: str(by_name[c]) for c in cols if not _is_numeric(by_name[c])}
        if bad:
            raise TypeError(f"feature columns must be numeric; these are not: {bad}")
    return cols


def _score(predictor: Any, batch: Any, fn: str, cols: list[str] | None, columns: list[str] | None,
           names: list[str], n_threads: int | None) -> Any:
    if cols is None:
        types = [batch[c].dtype for c in batch.columns]
        cols = _resolve(predictor, list(batch.columns), types, columns, names)
    X = as_model_columns(predictor, batch[cols])
    values = getattr(predictor, fn)(X, n_threads=n_threads).reshape(len(batch), -1)
    out = batch.copy(deep=False)  # the input batch may be a zero-copy view: leave it be
    for k, nm in enumerate(names):
        out[nm] = values[:, k]
    return out


#: per worker process: the predictors its tasks have fetched (object ref hex -> Predictor)
_PREDICTORS: dict[str, Any] = {}


def _score_task(batch: Any, holder: list, fn: str, cols: list[str] | None,
                columns: list[str] | None, names: list[str], n_threads: int | None) -> Any:
    """The default map_batches UDF: a plain task. The reference arrives inside a list, which Ray
    does not resolve per task, and each worker process fetches and unpickles it once."""
    import ray
    ref = holder[0]
    predictor = _PREDICTORS.get(ref.hex())
    if predictor is None:
        if len(_PREDICTORS) >= 8:  # a long-lived worker: keep the latest few
            _PREDICTORS.pop(next(iter(_PREDICTORS)))
        predictor = _PREDICTORS[ref.hex()] = ray.get(ref)
    return _score(predictor, batch, fn, cols, columns, names, n_threads)


class _Scorer:
    """The map_batches UDF of an actor pool (concurrency=...): built once per actor."""

    def __init__(self, predictor: Any, fn: str, cols: list[str] | None, columns: list[str] | None,
                 names: list[str], n_threads: int | None):
        import ray
        if isinstance(predictor, ray.ObjectRef):  # Ray resolves top-level args; be sure anyway
            predictor = ray.get(predictor)
        self.predictor = predictor
        self.fn = fn
        self.cols = cols            # None: the schema was unknown in predict; resolved below
        self.columns = columns
        self.names = names
        self.n_threads = n_threads

    def __call__(self, batch):
        if self.cols is None:
            types = [batch[c].dtype for c in batch.columns]
            self.cols = _resolve(self.predictor, list(batch.columns), types, self.columns,
                                 self.names)
        return _score(self.predictor, batch, self.fn, self.cols, self.columns, self.names,
                      self.n_threads)


def _compute(concurrency: Any):
    from ray.data import ActorPoolStrategy
    if isinstance(concurrency, (int, np.integer)) and not isinstance(concurrency, bool):
        return ActorPoolStrategy(size=int(concurrency))
    if isinstance(concurrency, tuple) and len(concurrency) == 2:
        return ActorPoolStrategy(min_size=concurrency[0], max_size=concurrency[1])
    raise TypeError(f"concurrency must be an int (a fixed pool of that many actors), a "
                    f"(min, max) tuple or None; got {concurrency!r}")


def predict(predictor: Any, dataset: Any, method: str = "predict", *,
            columns: Sequence[str] | None = None, name: str | None = None,
            n_threads: int | None = 1, batch_size: int | None = 4096,
            concurrency: int | tuple[int, int] | None = None, num_cpus: float | None = None,
            **map_batches_args: Any):
    """Return `dataset` with the model's output appended, computed by Ray tasks (or actors: concurrency=).

    predictor: a treecomp.Predictor (from treecomp.compile or treecomp.load).
    dataset: a ray.data.Dataset. Feature columns are `columns` if given (taken in the model's
        feature order, whatever their names), else the model's feature names (which must all be
        present), else, for a model trained without names, all columns positionally (then they
        must number n_features).
    method: "predict" (labels / values), "predict_proba" (one column per class) or "raw"
        (margins like decision_function).
    name: output column name (default "prediction" / "probability" / "raw"); probability
        columns are "<name>_<class label>", several outputs "<name>_<i>". Must not clash with
        an existing column.
    n_threads: native threads per batch (default 1: Ray runs one actor per reserved CPU).
    batch_size: rows per pandas batch (None: whole blocks).
    concurrency: None (default): plain tasks, each worker process fetching the predictor once
        and keeping it; no CPU stays reserved between batches, so any number of chained
        predict calls fit a small cluster. n: a fixed pool of n actors, (min, max) an
        autoscaling one; an actor holds its CPUs for the whole run, so chained pools whose
        CPUs exceed the cluster's wait for ever (Ray's scheduling): size them to fit.
    num_cpus: CPUs each task or actor reserves (default: n_threads, or 1 when None).
    map_batches_args: passed on to Dataset.map_batches (e.g. memory=..., runtime_env=...).

    Lazy, like any Ray Data transformation: nothing runs until the result is consumed.
    """
    _require_ray()
    import ray
    import ray.data

    fn = check_method(predictor, method)
    empty_output(predictor, method)  # the model can produce this method's output at all
    names, _ = output_names(predictor, method, name)
    if not isinstance(dataset, ray.data.Dataset):
        raise TypeError(f"treecomp.ray.predict scores a ray.data.Dataset; got "
                        f"{type(dataset).__module__}.{type(dataset).__name__} (for in-memory "
                        "data call predictor.predict directly)")
    own = sorted(_OWN_ARGS & set(map_batches_args))
    if own:
        raise TypeError(f"treecomp.ray.predict sets {own} itself")
    if columns is not None:
        columns = list(columns)
    if n_threads is not None:
        from .loader import check_threads
        check_threads(n_threads)
    compute = None if concurrency is None else _compute(concurrency)

    # eager checks when the schema is known without running the pipeline (module docstring)
    schema = dataset.schema(fetch_if_missing=False)
    cols = None
    if schema is not None:
        cols = _resolve(predictor, list(schema.names), list(schema.types), columns, names)

    ref = ray.put(predictor)  # the artifact's bytes go into the object store once
    cpus = num_cpus if num_cpus is not None else (n_threads or 1)
    if compute is None:
        return dataset.map_batches(
            _score_task, batch_format="pandas", batch_size=batch_size, num_cpus=cpus,
            fn_args=([ref], fn, cols, columns, names, n_threads), **map_batches_args)
    return dataset.map_batches(
        _Scorer, batch_format="pandas", batch_size=batch_size, compute=compute, num_cpus=cpus,
        fn_constructor_args=(ref, fn, cols, columns, names, n_threads), **map_batches_args)
