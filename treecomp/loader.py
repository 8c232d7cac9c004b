"""Predictors: a loaded native kernel plus the output head, with input checks and threads.

Every backend hands back a *kernel*: an object with ``head`` (treecomp.ir.Head), ``backend``,
``run(X, out, flags)`` over a C-contiguous float32/float64 matrix (the treecomp.h ABI: raw
margins into a preallocated buffer, GIL released during the native call) and ``to_bytes()`` /
``kind`` for pickling and saving. The Predictor turns raw margins into the library's outputs
with treecomp.outputs (the same numpy arithmetic as the library), so every output is exact.

Batches of up to SMALL_BATCH rows go through the compiled entry point (treecomp.native: a
CPython extension shipped prebuilt in the package, or built on first use) that checks the
array, calls the kernel and returns the outputs in one step; where it cannot be built they go
through ctypes like larger batches.

Artifacts are loaded through the backend registry (kind_of_artifact, kernel_loader,
library_checker); shared libraries through treecomp.native. The features over predictions
(leaf indices, SHAP, linear leaves) register themselves in FEATURES: the loader calls them
without importing them.
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import mmap
import os
import threading
import weakref
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable

import numpy as np

from . import native, numparse, outputs
from .backends import kernel_loader, kind_of_artifact, library_checker, loads_mapped
from .errors import ArtifactError, CompileError, InvalidModelError, UnsupportedModelError
from .inputs import as_matrix
from .ir import Forest, Head
from .toolchain import cached
from .native import (ELF_MAGIC, LAB_ARGMAX, LAB_GE0, LAB_GT0, LAB_GT_HALF, OUT_1D, OUT_2D, PAIRS,
                     TREECOMP_RAW, TREECOMP_TRANSFORM, EntryCfg, SharedLibrary, kernel_error,
                     verify_artifact)

#: below this many rows per thread, splitting a batch costs more than it saves
MIN_ROWS_PER_THREAD = 2048
#: batches up to this many rows go through the compiled entry or, without it, through
#: per-thread staging buffers whose addresses are known in advance (numpy's `.ctypes.data`
#: costs ~1.5 us per array, more than copying a row)
SMALL_BATCH = 64
_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))
_char_buffer, _addressof = ctypes.c_char.from_buffer, ctypes.addressof


#: the small-batch entry's run() (native.entry()), read once: a single row's Python time
_ENTRY: Any = None


def _entry() -> Any:
    global _ENTRY
    if _ENTRY is None:
        _ENTRY = native.entry()
    return _ENTRY


_LABEL_MODES = {"raw_ge_0": LAB_GE0, "raw_gt_0": LAB_GT0, "argmax_raw": LAB_ARGMAX,
                "proba_gt_half": LAB_GT_HALF, "argmax_proba": LAB_ARGMAX}


def native_parts() -> dict[str, str]:
    """Where each native part this process uses comes from, loading each as its first use
    would (building it, once per machine, where the package's prebuilt one does not match: see
    docs/build.md): the arrays kernel, its static archive (what an arrays-backend .so links),
    the small-batch entry and the JSON number parser (never built on first use). Each value is a sentence: "prebuilt (<file>)", "built on first
    use (<cached file>); the package's prebuilt one was not used: <why>", or "unavailable:
    <why> (<what serves instead>)"."""
    from .backends.arrays import native as arrays_native

    def origin(how: str | None, path: Any, why: str | None) -> str:
        if how == "prebuilt":
            return f"prebuilt ({path})"
        return f"built on first use ({path}); the package's prebuilt one was not used: {why}"

    def failed(exc: BaseException) -> str:
        return " ".join(str(exc).split()) or type(exc).__name__

    parts: dict[str, str] = {}
    try:
        arrays_native.native_library()
        parts["arrays kernel"] = origin(arrays_native.KERNEL_ORIGIN, arrays_native.KERNEL_PATH,
                                        arrays_native.PREBUILT_ERROR)
    except (CompileError, OSError) as exc:
        parts["arrays kernel"] = (f"unavailable: {failed(exc)} (the arrays backend runs its "
                                  "llvmlite or numpy walkers instead)")
    try:
        path = arrays_native.kernel_archive()
        parts["arrays kernel archive"] = origin(arrays_native.ARCHIVE_ORIGIN, path,
                                                arrays_native.ARCHIVE_ERROR)
    except (CompileError, OSError) as exc:
        parts["arrays kernel archive"] = (f"unavailable: {failed(exc)} (an arrays-backend .so "
                                          "cannot be linked here)")
    if _entry() is native.no_entry:
        parts["small-batch entry"] = (f"unavailable: {native.ENTRY_ERROR} (small batches go through "
                                      "ctypes instead)")
    else:
        parts["small-batch entry"] = origin(native.ENTRY_ORIGIN,
                                            getattr(native.ENTRY_MODULE, "__file__", "?"),
                                            native.ENTRY_PREBUILT_ERROR)
    if numparse.available():
        parts["JSON number parser"] = f"prebuilt ({numparse.PATH})"
    else:
        parts["JSON number parser"] = (f"unavailable: {numparse.UNAVAILABLE} (JSON model files' "
                                       "number arrays are read by numpy instead)")
    return parts


def native_call_ns(predictor: "Predictor", X: np.ndarray, reps: int = 2000) -> float | None:
    """Nanoseconds per single-row kernel call, cycling through X's rows (<= SMALL_BATCH; the
    transform applied when the kernel applies it natively), timed in C with no Python in
    between: what a single row costs below the Python API. None without the compiled entry."""
    plan = predictor._plans.get("raw")
    if plan is None or _entry() is native.no_entry:
        return None
    flags = TREECOMP_TRANSFORM if predictor._tf else TREECOMP_RAW
    return native.ENTRY_MODULE.native_ns(np.ascontiguousarray(X), plan[0], flags, reps)


def _usable_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):  # not Linux
        return os.cpu_count() or 1


#: read once: os.cpu_count() costs ~7 us a call here, more than a small model's whole prediction
CPUS = _usable_cpus()


_POOL: ThreadPoolExecutor | None = None
_POOL_LOCK = threading.Lock()


def pool() -> ThreadPoolExecutor:
    """The process's thread pool for batches split over threads (one thread per usable core;
    recreated in a forked child)."""
    global _POOL
    with _POOL_LOCK:
        if _POOL is None:
            _POOL = ThreadPoolExecutor(max_workers=CPUS, thread_name_prefix="treecomp")
        return _POOL


def _after_fork_in_child() -> None:
    """A forked child (gunicorn, Celery, multiprocessing workers) inherits the pool object but
    none of its threads: work submitted to it would wait forever. Drop it (recreated on first
    use) and renew the locks, which another parent thread may have held at the fork."""
    global _POOL, _POOL_LOCK, _LOADED_LOCK
    _POOL = None
    _POOL_LOCK, _LOADED_LOCK = threading.Lock(), threading.Lock()


if hasattr(os, "register_at_fork"):  # not on Windows, which cannot fork
    os.register_at_fork(after_in_child=_after_fork_in_child)


#: The features over predictions register their implementations here when their modules are
#: imported (treecomp/__init__.py imports them): "apply" (treecomp.leaves: fn(predictor, X)),
#: "contributions" (treecomp.shap: fn(predictor, X, n_threads)) and "linear" (treecomp.linear:
#: fn(kernel) -> kernel, for an artifact whose kernel carries a linear section). The loader
#: calls them and never imports them: imports point down only.
FEATURES: dict[str, Callable[..., Any]] = {}


def register_feature(name: str, fn: Callable[..., Any]) -> None:
    """Make `fn` the implementation of feature `name` (see FEATURES)."""
    FEATURES[name] = fn


def feature(name: str) -> Callable[..., Any]:
    """The registered implementation of feature `name` (see FEATURES)."""
    try:
        return FEATURES[name]
    except KeyError:
        raise RuntimeError(f"treecomp's {name!r} feature is not registered (import treecomp, "
                           "which imports every feature module)") from None


def check_threads(n_threads: Any) -> int | None:
    """n_threads as given (None: all cores), refused with a clear error unless an int >= 1."""
    if n_threads is None:
        return None
    if isinstance(n_threads, (bool, np.bool_)) or not isinstance(n_threads, (int, np.integer)):
        raise TypeError(f"n_threads must be a positive int or None (all cores); got "
                        f"{type(n_threads).__name__} {n_threads!r}")
    if n_threads < 1:
        raise ValueError(f"n_threads must be >= 1 (or None for all cores); got {n_threads}")
    return int(n_threads)


class Predictor:
    """A compiled model: `predict`, `predict_proba`, `decision_function` like the source library.

    Batches are split over `n_threads` (default: all cores) with the GIL released in native
    code; a Predictor is safe to call from many Python threads at once. It pickles with its
    compiled artifact inside and unpickles in a fresh process on the same platform.
    """

    def __init__(self, kernel: Any, n_threads: int | None = None, forest: Any = None):
        self._kernel = kernel
        #: the IR the kernel was built from (treecomp.compile), for `apply`; None when loaded
        #: (then read from the artifact on first use: forest())
        self._forest = forest
        #: what the features over predictions keep for this Predictor (treecomp.leaves' leaf-id
        #: kernel, treecomp.shap's explainer), built on their first use
        self.feature_state: dict[str, Any] = {}
        self.head: Head = kernel.head
        self.n_threads = n_threads  # checked by the property's setter
        self._run_ptr = getattr(kernel, "run_ptr", None)
        self._acc = np.dtype(self.head.accumulate_dtype)
        self._tls = threading.local()
        # the kernel applies the inverse link itself, bit for bit (outputs.NATIVE_TRANSFORMS):
        # probabilities then need no numpy pass over the margins
        self._tf = bool(getattr(kernel, "native_transform", False))
        self._pairs = bool(getattr(kernel, "native_pairs", False))
        # rows that need no check of their values (NaN accepted, no +/-inf refused); columns
        # of categories by hash (CatBoost one-hot) are encoded by as_matrix first, and columns
        # of string categories (sklearn's encoder) refuse numbers, so such models take neither
        # the unchecked path nor the small-batch entry
        hashed = bool(self.head.category_hashes) or any(
            kind == "obj" for _, kind, _ in self.head.category_values)
        self._nf = self.head.n_features
        self._nan_ok = self.head.allow_nan and not self.head.reject_inf and not hashed
        self._plans = {} if hashed else self._entry_plans(getattr(kernel, "entry", None))

    def _entry_plans(self, entry: tuple | None) -> dict[str, tuple]:
        """Per method, the arguments after X of the small-batch entry (runtime/pyentry.c) for
        the outputs the kernel computes natively, exactly; methods without one use numpy."""
        h = self.head
        if entry is None:
            return {}
        fn, ctx, isa, tkind = entry
        cfg = bytes(EntryCfg(fn=fn, ctx=ctx, n_features=h.n_features, n_outputs=h.n_outputs,
                              max_rows=SMALL_BATCH, isa=isa, tkind=tkind,
                              acc_bits=self._acc.itemsize * 8,
                              # bit 0: NaN accepted; bit 1: some feature refuses +/-inf
                              allow_nan=int(h.allow_nan) | (2 if h.reject_inf else 0)))
        one = OUT_1D if h.n_outputs == 1 else OUT_2D
        plans = {"raw": (cfg, TREECOMP_RAW, OUT_2D, None)}
        if h.transform in outputs.PYTHON_TRANSFORMS:  # decision_function computed from margins
            return plans
        plans["decision"] = (cfg, TREECOMP_RAW, one, None)
        if h.output_divisor != 1:  # predict divides the margins first: numpy (outputs.transform)
            return plans
        # the flags giving transformed outputs (None: numpy applies this inverse link)
        tf = TREECOMP_RAW if h.transform == "identity" else TREECOMP_TRANSFORM if self._tf else None
        if not h.is_classifier:
            if tf is not None:
                plans["predict"] = (cfg, tf, one, None)
            return plans
        if len(h.classes) != 1:  # multi-target classifiers: lists / stacked labels in numpy
            return plans
        classes, d = h.classes[0], h.decision
        if tf is not None:
            if h.n_outputs == 1 and h.n_classes == (2,):
                plans["proba"] = (cfg, tf | PAIRS, OUT_2D, None)
            else:
                plans["proba"] = (cfg, tf, OUT_2D, None)
        mode = _LABEL_MODES.get(d) if h.label_shape == "rows" else None  # a column: numpy
        if mode is not None and (d in outputs.RAW_DECISIONS or tf is not None) \
                and (mode != LAB_ARGMAX or h.n_outputs == len(classes)):
            plans["predict"] = (cfg, TREECOMP_RAW if d in outputs.RAW_DECISIONS else tf, mode,
                                classes)
        return plans

    # -- description --------------------------------------------------------------------------
    @property
    def n_threads(self) -> int | None:
        """Default threads per batch (None: all usable cores); a call's n_threads overrides it."""
        return self._n_threads

    @n_threads.setter
    def n_threads(self, value: int | None) -> None:
        self._n_threads = check_threads(value)

    @property
    def backend(self) -> str:
        return self._kernel.backend

    @property
    def n_features(self) -> int:
        return self.head.n_features

    @property
    def n_outputs(self) -> int:
        return self.head.n_outputs

    @property
    def digest(self) -> str:
        return self.head.digest

    @property
    def kernel(self) -> Any:
        """The compiled kernel behind this predictor (its ``kind``, ``to_bytes()``: the artifact
        ``save`` writes), for layers built on predictions (treecomp.dask keys graphs by it)."""
        return self._kernel

    @property
    def classes_(self):
        if not self.head.is_classifier:
            raise AttributeError("classes_ is only defined for classifiers")
        return self.head.classes[0] if len(self.head.classes) == 1 else list(self.head.classes)

    @property
    def feature_names_in_(self):
        if self.head.feature_names is None:
            raise AttributeError("the model was trained without feature names")
        return np.array(self.head.feature_names, dtype=object)

    @property
    def metadata(self) -> dict[str, Any]:
        """What the compiled artifact records about itself (a .so's treecomp_meta_json, a .tc
        file's header; for a Predictor from treecomp.compile, what its artifact would record),
        as a new dict: the Head's fields ("n_features", "n_outputs", "n_trees",
        "input_dtype", "accumulate_dtype", "transform", "decision", "classes",
        "feature_names", "digest", ...), "backend", and where the artifact holds them
        "treecomp_version" (the treecomp that wrote it) and "isa" (the arrays kernel's
        instruction set in this process)."""
        meta = json.loads(self.head.to_json())
        text = getattr(self._kernel, "meta_json", None)
        if text:
            for key, value in json.loads(text).items():
                meta.setdefault(key, value)
        meta.setdefault("backend", self.backend)
        return meta

    def __repr__(self) -> str:
        kind = "classifier" if self.head.is_classifier else \
            "outlier detector" if self.head.decision == "outlier" else "regressor"
        return (f"<treecomp.Predictor {kind} backend={self.backend!r} trees={self.head.n_trees} "
                f"features={self.n_features} outputs={self.n_outputs} digest={self.digest[:12]}>")

    # -- prediction ---------------------------------------------------------------------------
    def _via_entry(self, X: Any, kind: str) -> np.ndarray | None:
        """Output `kind` of a small batch through the compiled entry; None where it declines
        (not a plain float matrix of 1..SMALL_BATCH rows) or where numpy computes the output."""
        plan = self._plans.get(kind)
        if plan is None:
            return None
        cfg, flags, mode, classes = plan  # (not X, *plan: a tuple per call, and the GC it feeds)
        return (_ENTRY or _entry())(X, cfg, flags, mode, classes)

    def predict_raw(self, X: Any, n_threads: int | None = None) -> np.ndarray:
        """Raw margins, shape (n_rows, n_outputs), in the library's accumulation dtype."""
        if n_threads is not None and (type(n_threads) is not int or n_threads < 1):
            check_threads(n_threads)  # (a plain int >= 1 needs no call: a single row's time)
        out = self._via_entry(X, "raw")
        if out is not None:
            return out
        return self._run(X, TREECOMP_RAW, n_threads)

    def _run(self, X: Any, flags: int, n_threads: int | None) -> np.ndarray:
        if type(X) is np.ndarray and X.ndim == 2 and X.dtype in _FLOATS \
                and X.shape[1] == self._nf and X.flags.c_contiguous and self._nan_ok:
            Xm = X  # what as_matrix would return, without its general checks (single rows)
        else:
            Xm = as_matrix(X, self.head, keep_float=True)
        n = Xm.shape[0]
        if n <= SMALL_BATCH and n and self._run_ptr is not None:
            return self._run_small(Xm, n, flags)
        out = np.empty((n, 2 if flags & PAIRS else self.head.n_outputs), self._acc)
        threads = min(n_threads or self.n_threads or CPUS, n // MIN_ROWS_PER_THREAD)
        if threads <= 1:
            self._kernel.run(Xm, out, flags)
            return out
        bounds = np.linspace(0, n, threads + 1).astype(int)
        futs = [pool().submit(self._kernel.run, Xm[a:b], out[a:b], flags)
                for a, b in zip(bounds[:-1], bounds[1:]) if b > a]
        for f in futs:
            f.result()
        return out

    def _run_small(self, Xm: np.ndarray, n: int, flags: int) -> np.ndarray:
        """Few rows (single-row latency): the kernel writes into this thread's staging buffer
        (address taken once) and the outputs are copied out; the rows are passed where they are
        (a writable array) or copied into the staging buffer (read-only ones)."""
        try:
            xs, os_, xp, op, bits = self._tls.stages[flags & PAIRS | Xm.dtype.num]
        except (AttributeError, KeyError):
            xs, os_, xp, op, bits = self._new_stage(Xm.dtype, flags)
        if Xm.flags.writeable:  # its own address, through the buffer protocol (~0.4 us)
            xp = _addressof(_char_buffer(Xm))
        else:
            xs[:n] = Xm
        rc = self._run_ptr(xp, bits, n, op, flags)
        if rc != 0:
            raise kernel_error(rc)
        return os_[:n].copy()

    def _new_stage(self, dtype: np.dtype, flags: int) -> tuple:
        """This thread's staging buffers for rows of `dtype` and outputs of `flags`' width."""
        stages = getattr(self._tls, "stages", None)
        if stages is None:
            stages = self._tls.stages = {}
        xs = np.empty((SMALL_BATCH, self.head.n_features), dtype)
        os_ = np.empty((SMALL_BATCH, 2 if flags & PAIRS else self.head.n_outputs), self._acc)
        stage = stages[flags & PAIRS | dtype.num] = (xs, os_, xs.ctypes.data, os_.ctypes.data,
                                                     dtype.itemsize * 8)
        return stage

    def predict(self, X: Any, n_threads: int | None = None) -> np.ndarray:
        """What the library's predict returns (labels for classifiers)."""
        if n_threads is not None and (type(n_threads) is not int or n_threads < 1):
            check_threads(n_threads)  # (a plain int >= 1 needs no call: a single row's time)
        plan = self._plans.get("predict")  # _via_entry inlined: a single row's Python time
        if plan is not None:
            cfg, flags, mode, classes = plan
            out = (_ENTRY or _entry())(X, cfg, flags, mode, classes)
            if out is not None:
                return out
        if self._tf and outputs.needs_transform(self.head, "predict"):
            return outputs.predict_values(self.head, self._run(X, TREECOMP_TRANSFORM, n_threads), True)
        return outputs.predict_values(self.head, self.predict_raw(X, n_threads))

    def predict_proba(self, X: Any, n_threads: int | None = None):
        plan = self._plans.get("proba")  # only a classifier has one
        if plan is None and not self.head.is_classifier:
            raise AttributeError("predict_proba is only available for classifiers")
        if n_threads is not None and (type(n_threads) is not int or n_threads < 1):
            check_threads(n_threads)  # (a plain int >= 1 needs no call: a single row's time)
        if plan is not None:  # _via_entry inlined: a single row's Python time
            cfg, flags, mode, classes = plan
            out = (_ENTRY or _entry())(X, cfg, flags, mode, classes)
            if out is not None:
                return out
        if self._pairs:
            return self._run(X, TREECOMP_TRANSFORM | PAIRS, n_threads)
        if self._tf:
            return outputs.predict_proba(self.head, self._run(X, TREECOMP_TRANSFORM, n_threads), True)
        return outputs.predict_proba(self.head, self.predict_raw(X, n_threads))

    def decision_function(self, X: Any, n_threads: int | None = None) -> np.ndarray:
        """What the library's decision_function returns: the raw margins shaped like it (or
        like output_margin=True), or for AdaBoost / IsolationForest the values it computes from
        them (treecomp.outputs.decision_values)."""
        if n_threads is not None and (type(n_threads) is not int or n_threads < 1):
            check_threads(n_threads)  # (a plain int >= 1 needs no call: a single row's time)
        out = self._via_entry(X, "decision")
        if out is not None:
            return out
        return outputs.decision_values(self.head, self.predict_raw(X, n_threads))

    def score_samples(self, X: Any, n_threads: int | None = None) -> np.ndarray:
        """IsolationForest's score_samples (an AttributeError for other models)."""
        if self.head.transform != "iforest":
            raise AttributeError("score_samples is only available for IsolationForest models")
        return outputs.score_samples(self.head, self.predict_raw(X, n_threads))

    def forest(self, purpose: str = "this") -> Forest:
        """The model's IR: the Forest treecomp.compile was given, else the one the artifact
        carries (read on first use and checked against the artifact's digest). `purpose` names
        what needs it in the error raised when the artifact carries none (compiled without
        ir=True, or an LLVM .so)."""
        if self._forest is not None:
            return self._forest
        data = getattr(self._kernel, "ir_bytes", lambda: None)()
        if data is None:
            raise UnsupportedModelError(
                f"{purpose} need the model's trees: this Predictor's artifact carries no IR "
                "(artifacts and pickles carry it when compiled with ir=True, e.g. "
                "treecomp.compile(model, ir=True), except an LLVM .so); use the Predictor that "
                "treecomp.compile(model) returns, or recompile with ir=True")
        try:
            forest = Forest.from_bytes(data)
        except InvalidModelError as exc:
            raise ArtifactError(f"the artifact's embedded model IR is corrupt: {exc}") from None
        if forest.digest() != self.head.digest:
            raise ArtifactError("the artifact's embedded model IR is not the model it was compiled "
                                f"from (digest {forest.digest()[:12]}, the artifact's "
                                f"{self.head.digest[:12]}): a corrupt or tampered artifact")
        self._forest = forest
        return forest

    def apply(self, X: Any) -> np.ndarray:
        """Each row's leaf in each tree, numbered, shaped and typed as the source library's
        own apply returns them (the model's Forest.leaf_layout, treecomp.outputs.leaf_ids):

        - scikit-learn DecisionTree* / ExtraTree*: (n_rows,) int64; RandomForest* /
          ExtraTrees*: (n_rows, n_estimators) int64;
        - GradientBoostingRegressor: (n_rows, n_stages) float64; GradientBoostingClassifier:
          (n_rows, n_stages, K) float64, K = 1 for two classes; NaN is accepted here as
          scikit-learn's apply accepts it, though its predict refuses it;
        - XGBoost (Booster.predict(pred_leaf=True), the wrappers' apply): (n_rows, n_trees)
          float32, (n_rows,) for a model of one tree; multiclass and num_parallel_tree models
          list every tree, round by round;
        - LightGBM (predict(pred_leaf=True)): (n_rows, n_trees) int32, one tree included;
        - models whose library has no apply (IsolationForest, AdaBoost, HistGradientBoosting:
          each estimator's own node ids) and IR files that do not say: (n_rows, n_trees) int64.
        CatBoost and ONNX models carry no node ids: UnsupportedModelError.

        Whatever this Predictor's backend, the ids come from an arrays-backend kernel built
        once, on first use, over interp.leaf_id_forest (the same routing, leaves holding their
        ids: native speed, held to interp.apply by the tests): available on a Predictor made by
        treecomp.compile, and on one loaded or unpickled from an artifact that carries the
        model's IR (.tc, the c and arrays backends' .so, a pickled Predictor; not an LLVM .so)."""
        return feature("apply")(self, X)

    def contributions(self, X: Any, n_threads: int | None = None) -> np.ndarray:
        """SHAP values as XGBoost's pred_contribs / LightGBM's pred_contrib (treecomp.shap):
        (n_rows, n_features + 1); for several outputs (n_rows, n_outputs, n_features + 1) as
        XGBoost lays them out, (n_rows, n_outputs * (n_features + 1)) as LightGBM does
        (shap.library_layout); float64, bias column last.
        Needs the model's trees with their cover: a Predictor from treecomp.compile, or one
        loaded from an artifact that carries the IR (see apply)."""
        return feature("contributions")(self, X, n_threads)

    # -- persistence --------------------------------------------------------------------------
    def save(self, path: str | os.PathLike) -> None:
        """Write the artifact (a .so for the c/llvm backends) so `treecomp.load` reads it back."""
        self._kernel.save(path)

    def __reduce__(self):
        return (_restore, (self._kernel.kind, self._kernel.to_bytes(), self.n_threads))


def _restore(kind: str, data: bytes, n_threads: int | None) -> Predictor:
    return Predictor(kernel_from_bytes(kind, data), n_threads)


#: the kernels loaded in this process by content (sha256 of the artifact's bytes), each held
#: only as long as a Predictor (or anything else) holds it: loading the same bytes again while
#: one is in use shares it; once every Predictor of a model is dropped its tables, code and
#: mapping are freed (a service reloading models does not grow)
_LOADED: "weakref.WeakValueDictionary[str, Any]" = weakref.WeakValueDictionary()
_LOADED_LOCK = threading.Lock()


def check_library(library: SharedLibrary) -> None:
    """The checks of the backend that wrote `library` (the backend registry's
    library_checker: the arrays backend's tables), run before its first call."""
    check = library_checker(library.backend)
    if check is not None:
        check(library)


def _holds(path: Path, data: Any) -> bool:
    """Does the file at `path` hold exactly `data` (bytes or a mapping)? Compared a block at a
    time: no copy of the whole file."""
    block = 1 << 20
    try:
        with open(path, "rb") as f:
            if os.fstat(f.fileno()).st_size != len(data):
                return False
            for pos in range(0, len(data), block):
                if f.read(block) != data[pos:pos + block]:
                    return False
            return True
    except OSError:
        return False


def kernel_from_bytes(kind: str, data: Any) -> Any:
    """A kernel from artifact bytes, shared while in use (keyed by content: _LOADED). A shared
    library is verified first (its seal's digest, once checked, is its key)."""
    # before anything is written or loaded
    key = "so-" + verify_artifact(data) if kind == "so" else hashlib.sha256(data).hexdigest()
    with _LOADED_LOCK:
        k = _LOADED.get(key)
        if k is None:
            if kind == "so":
                # a cache hit is trusted by content only (compared with the bytes the caller
                # gave): a damaged or replaced copy must not run instead of them
                path = cached(f"artifact-{key[3:43]}", ".so", lambda p: p.write_bytes(data),
                              intact=lambda p: _holds(p, data))
                # (found holding these bytes, or written with them just now: not read again)
                k = SharedLibrary(path, check=check_library, verified=True)
            else:
                k = kernel_loader(kind)(data)
                if getattr(k, "linear_section", None) is not None:  # a .tc of linear leaves
                    k = feature("linear")(k)
            _LOADED[key] = k
        return k


def load(path: str | os.PathLike, n_threads: int | None = None, mmap: bool = False) -> Predictor:
    """Load a compiled artifact written by `treecomp compile` / `Predictor.save`.

    A .so is verified first (verify_artifact: its seal, the digest of the file its build
    wrote into it; a damaged, truncated or unsealed library raises ArtifactError without being
    loaded), then loaded through a content-addressed copy (dlopen caches by path, so a file
    replaced in place must not return the old code). Loading a shared library runs its code:
    only load artifacts you trust.

    mmap: False (the default) reads the file into the process once (its tables are views of
    that one copy), so the loaded model is immune to the file being rewritten in place (`cp
    new.tc model.tc` while a service runs). True maps it read-only instead (map_file): the
    tables stay in the page cache, shared by every process that maps the file, and pages are
    read as they are touched; the file must then only ever be replaced (write elsewhere and
    rename, as treecomp's own saves do): a file truncated under a mapping kills the process
    with SIGBUS on the next prediction. Reading costs what copying the file costs (about 85 ms
    per 100 MB from the page cache on a Zen 4 guest).
    """
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"artifact not found: {p}")
    with open(p, "rb") as f:
        start = f.read(64)
    read = map_file if mmap else read_file
    if start[:4] == ELF_MAGIC:  # verified and copied into the cache (dlopen maps that copy)
        return Predictor(kernel_from_bytes("so", read(p)), n_threads)
    kind = kind_of_artifact(start)
    if kind is None:
        raise ArtifactError(f"{p.name} is not a treecomp artifact (neither a shared library nor "
                            "a known table file)")
    data = read(p) if loads_mapped(kind) else p.read_bytes()
    return Predictor(kernel_from_bytes(kind, data), n_threads)


def read_file(path: Path) -> bytes:
    """The file's bytes, read once into the process (load's default): what is loaded from them
    does not change, whatever later happens to the file."""
    return path.read_bytes()


def map_file(path: Path) -> Any:
    """The file's bytes as a read-only mapping (mmap.mmap; b"" for an empty file): a table
    file's arrays become views of it, read from disk as they are touched, never copied; the
    mapping lives as long as something uses them. The file must not be changed in place while
    it is loaded (treecomp writes artifacts by replacing the file, toolchain.publish, which a
    mapping of the old one survives); a file truncated under a mapping faults on access."""
    with open(path, "rb") as f:
        try:
            return mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        except ValueError:  # an empty file cannot be mapped
            return b""
