"""The standard benchmark cases: models trained on seeded synthetic data, cached on disk.

Each case is a fitted library model, a test matrix and a :class:`Library` adapter (the library's
own single- or multi-threaded predict, and its outputs for the exactness check). Nothing is
downloaded: data come from numpy's seeded generator, so every run of a given mode benchmarks the
same models on the same rows. Trained models are pickled to :data:`CACHE_DIR` (``bench/.cache/``
in a source checkout, else ``~/.cache/treecomp/bench-models``; ``TREECOMP_BENCH_CACHE`` overrides)
under a key made of the case name, its parameters and the library's version, so only the first
run pays for training.

`--quick` uses the same recipes with fewer trees and rows (the whole quick suite runs in about a
minute); the full mode uses the sizes of the case titles on 100k test rows.

A user's own model file becomes a case through :func:`user_case`: rows of the right width are
synthesised around the model's own thresholds (so every branch gets exercised) unless a data
file is given.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import json
import os
import pickle
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np



def _default_cache_dir() -> Path:
    """bench/.cache next to the package in a source checkout (as before the benchmark moved into
    the package), else the user's cache directory: an installed package must not write into
    site-packages."""
    checkout = Path(__file__).resolve().parents[2] / "bench"
    if (checkout / "__main__.py").is_file():
        return checkout / ".cache"
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "treecomp" / "bench-models"


CACHE_DIR = Path(os.environ.get("TREECOMP_BENCH_CACHE") or _default_cache_dir())


# -- the library's own predict ------------------------------------------------------------------
@dataclass
class Library:
    """How the source library predicts: what is timed and what exactness is checked against.

    predict(X) is the call that is timed (the library's fastest ordinary predict: XGBoost's
    inplace_predict, sklearn's predict_proba / predict, LightGBM's predict), inside
    `with threads(k):`, which sets the library's thread count for a whole timed block (setting it
    per call would time the setting too: threadpoolctl takes milliseconds per change).
    outputs maps a kind ("raw" margins, "proba", "predict") to a callable giving the library's
    answer on X; every strategy is compared with each kind (see treecomp.benchmark.measure.compare).
    """

    name: str                                     # e.g. "xgboost 3.2.0"
    call: str                                     # the timed call, for the report
    predict: Callable[[np.ndarray], Any]
    threads: Callable[[int], Any]                 # k -> a context manager
    outputs: dict[str, Callable[[np.ndarray], Any]]
    #: the library's model object (TL2cgen, ONNX, daal4py convert from it)
    model: Any = None
    #: a LightGBM text model file, for lleaves
    model_file: str | None = None


def _version(module: str) -> str:
    try:
        return importlib.import_module(module).__version__
    except Exception:  # noqa: BLE001 - a version is informative only
        return "?"


def _xgboost_library(model: Any) -> Library:
    booster = model.get_booster() if hasattr(model, "get_booster") else model
    # The sklearn wrapper predicts with best_iteration after early stopping; inplace_predict
    # takes the tree range explicitly, so honour it the same way.
    rng = (0, int(model.best_iteration) + 1) if getattr(model, "best_iteration", None) is not None \
        and hasattr(model, "get_booster") else (0, 0)

    def predict(X):
        return booster.inplace_predict(X, iteration_range=rng)

    @contextlib.contextmanager
    def threads(k):
        booster.set_param({"nthread": int(k)})
        yield

    def raw(X):
        return booster.inplace_predict(X, iteration_range=rng, predict_type="margin")

    outputs: dict[str, Callable] = {"raw": raw}
    if hasattr(model, "predict_proba"):
        outputs["proba"] = model.predict_proba
    elif hasattr(model, "get_booster"):
        outputs["predict"] = model.predict
    return Library(f"xgboost {_version('xgboost')}", "Booster.inplace_predict", predict, threads,
                   outputs, model=model)


def _sklearn_library(model: Any) -> Library:
    name = type(model).__name__
    clf = hasattr(model, "predict_proba")
    fn_name = "predict_proba" if clf else "predict"
    jobs = "n_jobs" in model.get_params()
    if jobs:                                     # RandomForest / ExtraTrees: joblib threads
        @contextlib.contextmanager
        def threads(k):
            model.set_params(n_jobs=int(k))
            yield
    elif name.startswith("HistGradientBoosting"):  # OpenMP threads
        def threads(k):
            from threadpoolctl import threadpool_limits
            return threadpool_limits(int(k), user_api="openmp")
    else:                                        # GradientBoosting: single-threaded Cython
        def threads(k):
            return contextlib.nullcontext()

    def one_thread(f):
        # RandomForest / ExtraTrees add the trees' outputs in whatever order their joblib
        # threads finish (scikit-learn 1.9: `out += prediction` under a lock), so with n_jobs > 1
        # the sum's rounding can vary from call to call. The reference is the deterministic
        # n_jobs=1 order, which is tree order (what treecomp computes).
        def call(X):
            if jobs:
                model.set_params(n_jobs=1)
            return f(X)
        return call

    outputs: dict[str, Callable] = {"predict": one_thread(model.predict)}
    if clf:
        outputs["proba"] = one_thread(model.predict_proba)
    if hasattr(model, "decision_function") and name.startswith("GradientBoosting"):
        outputs["raw"] = model.decision_function
    return Library(f"scikit-learn {_version('sklearn')}", f"{name}.{fn_name}",
                   getattr(model, fn_name), threads, outputs, model=model)


def _thread_count_setter(n_threads: list) -> Callable[[int], Any]:
    """threads(k) for a library that takes its thread count per call: sets n_threads[0]."""
    @contextlib.contextmanager
    def threads(k):
        old, n_threads[0] = n_threads[0], int(k)
        try:
            yield
        finally:
            n_threads[0] = old
    return threads


def _lightgbm_library(model: Any, model_file: str | None = None) -> Library:
    booster = model.booster_ if hasattr(model, "booster_") else model
    n_threads = [os.cpu_count() or 1]

    def predict(X):
        return booster.predict(X, num_threads=n_threads[0])

    threads = _thread_count_setter(n_threads)

    outputs: dict[str, Callable] = {"raw": lambda X: booster.predict(X, raw_score=True)}
    if hasattr(model, "predict_proba"):
        outputs["proba"] = model.predict_proba
    return Library(f"lightgbm {_version('lightgbm')}", "Booster.predict", predict, threads,
                   outputs, model=model, model_file=model_file)


def _catboost_library(model: Any) -> Library:
    n_threads = [os.cpu_count() or 1]
    fn = "predict_proba" if hasattr(model, "predict_proba") else "predict"

    def predict(X):
        return getattr(model, fn)(X, thread_count=n_threads[0])

    threads = _thread_count_setter(n_threads)

    outputs: dict[str, Callable] = {"raw": lambda X: model.predict(X, prediction_type="RawFormulaVal"),
                                    "proba" if fn == "predict_proba" else "predict": getattr(model, fn)}
    return Library(f"catboost {_version('catboost')}", f"{type(model).__name__}.{fn}", predict,
                   threads, outputs, model=model)


def library_for(model: Any, model_file: str | None = None) -> Library | None:
    """The adapter for a fitted model object, or None for a library we do not know."""
    for cls in type(model).__mro__:
        top = (cls.__module__ or "").split(".")[0]
        if top == "xgboost":
            return _xgboost_library(model)
        if top == "sklearn":
            return _sklearn_library(model)
        if top == "lightgbm":
            return _lightgbm_library(model, model_file)
        if top == "catboost":
            return _catboost_library(model)
    return None


# -- cases -----------------------------------------------------------------------------------
@dataclass
class BenchCase:
    name: str
    title: str
    model: Any                 # what treecomp.parse is given (model object or file path)
    X: np.ndarray              # the test matrix
    library: Library | None    # None: a bare model file (no library predict to compare with)
    params: dict = field(default_factory=dict)


@dataclass(frozen=True)
class CaseSpec:
    title: str                           # formatted with the mode's parameters
    module: str                          # the library it needs
    full: dict
    quick: dict
    train: Callable[[dict], tuple[Any, np.ndarray]]   # params -> (fitted model, test rows)
    #: run by `--quick` without --cases (the big shapes are left to the full run)
    in_quick: bool = True


def _signal(X: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """A smooth nonlinear target with interactions, so trees of every depth have work to do."""
    Xf = np.nan_to_num(X.astype(np.float64))
    d = X.shape[1]
    w = rng.normal(size=d) / np.sqrt(d)
    return (Xf @ w + 0.8 * np.sin(2.0 * Xf[:, 0]) * Xf[:, 1 % d] + 0.5 * Xf[:, 2 % d] * Xf[:, 3 % d]
            + 0.3 * np.abs(Xf[:, 4 % d]))


def make_data(n: int, d: int, seed: int, task: str = "regression", n_classes: int = 2,
              nan_frac: float = 0.0, n_cat: int = 0, cat_card: int = 12):
    """Seeded synthetic (X float32, y). task: regression | binary | multiclass.

    The first `n_cat` columns hold integer categories 0..cat_card-1 with their own effects.
    The target's weights depend only on (d, n_cat), not on the seed, so a test matrix drawn with
    another seed comes from the same distribution.
    """
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)).astype(np.float32)
    wrng = np.random.default_rng(1000 + d + n_cat)
    y = _signal(X, wrng)
    if n_cat:
        X[:, :n_cat] = rng.integers(0, cat_card, size=(n, n_cat)).astype(np.float32)
        effects = wrng.normal(size=(n_cat, cat_card))
        for j in range(n_cat):
            y = y + effects[j, X[:, j].astype(np.int64)]
    y = y + 0.3 * rng.normal(size=n)
    if task == "binary":
        y = (y > np.median(y)).astype(np.int64)
    elif task == "multiclass":
        edges = np.quantile(y, np.linspace(0, 1, n_classes + 1)[1:-1])
        y = np.searchsorted(edges, y).astype(np.int64)
    if nan_frac:
        mask = rng.random(X.shape) < nan_frac
        if n_cat:
            mask[:, :n_cat] &= rng.random((n, n_cat)) < 0.5   # fewer missing categories
        X[mask] = np.nan
    return X, y


def _xgb(p: dict, task: str):
    import xgboost as xgb
    kw = dict(n_estimators=p["n_trees"], max_depth=p["depth"], tree_method="hist",
              learning_rate=0.1, n_jobs=os.cpu_count() or 1, random_state=0)
    Xtr, ytr = make_data(p["n_train"], p["n_features"], 1, task, p.get("n_classes", 2),
                         p.get("nan_frac", 0.0))
    Xte, _ = make_data(p["n_test"], p["n_features"], 2, task, p.get("n_classes", 2),
                       p.get("nan_frac", 0.0))
    model = (xgb.XGBRegressor(**kw) if task == "regression" else xgb.XGBClassifier(**kw))
    return lambda: model.fit(Xtr, ytr), Xte


def _sk(p: dict, est: Callable[[], Any], task: str, **data_kw):
    Xtr, ytr = make_data(p["n_train"], p["n_features"], 1, task, p.get("n_classes", 2),
                         p.get("nan_frac", 0.0), **data_kw)
    Xte, _ = make_data(p["n_test"], p["n_features"], 2, task, p.get("n_classes", 2),
                       p.get("nan_frac", 0.0), **data_kw)
    model = est()
    return lambda: model.fit(Xtr, ytr), Xte


def _xgb_binary(p):
    return _xgb(p, "binary")


def _xgb_multiclass(p):
    return _xgb(p, "multiclass")


def _xgb_nan_regression(p):
    return _xgb(p, "regression")


def _xgb_regression(p):
    return _xgb(p, "regression")


def _rf_deep(p):
    from sklearn.ensemble import RandomForestRegressor
    return _sk(p, lambda: RandomForestRegressor(n_estimators=p["n_trees"], max_depth=None,
                                                n_jobs=os.cpu_count() or 1, random_state=0),
               "regression")


def _gbr(p):
    from sklearn.ensemble import GradientBoostingRegressor
    return _sk(p, lambda: GradientBoostingRegressor(n_estimators=p["n_trees"], max_depth=p["depth"],
                                                    random_state=0), "regression")


def _gbc(p):
    from sklearn.ensemble import GradientBoostingClassifier
    return _sk(p, lambda: GradientBoostingClassifier(n_estimators=p["n_trees"], max_depth=p["depth"],
                                                     random_state=0), "binary")


def _et_multiclass(p):
    from sklearn.ensemble import ExtraTreesClassifier
    return _sk(p, lambda: ExtraTreesClassifier(n_estimators=p["n_trees"], max_depth=p["depth"],
                                               n_jobs=os.cpu_count() or 1, random_state=0),
               "multiclass")


def _hgb_nan_cat(p):
    from sklearn.ensemble import HistGradientBoostingClassifier
    n_cat = p["n_cat"]
    return _sk(p, lambda: HistGradientBoostingClassifier(
        max_iter=p["n_trees"], max_leaf_nodes=p["leaves"], early_stopping=False,
        categorical_features=list(range(n_cat)), random_state=0), "binary", n_cat=n_cat)


def _lgbm_binary(p):
    import lightgbm as lgb
    Xtr, ytr = make_data(p["n_train"], p["n_features"], 1, "binary")
    Xte, _ = make_data(p["n_test"], p["n_features"], 2, "binary")
    model = lgb.LGBMClassifier(n_estimators=p["n_trees"], num_leaves=p["leaves"], max_depth=-1,
                               learning_rate=0.1, n_jobs=os.cpu_count() or 1, verbose=-1,
                               random_state=0)
    return lambda: model.fit(Xtr, ytr), Xte


def _cb_binary(p):
    import catboost
    Xtr, ytr = make_data(p["n_train"], p["n_features"], 1, "binary")
    Xte, _ = make_data(p["n_test"], p["n_features"], 2, "binary")
    model = catboost.CatBoostClassifier(iterations=p["n_trees"], depth=p["depth"], verbose=0,
                                        thread_count=os.cpu_count() or 1, random_seed=0,
                                        allow_writing_files=False)
    return lambda: model.fit(Xtr, ytr), Xte


SPECS: dict[str, CaseSpec] = {
    "xgb-binary": CaseSpec(
        "XGBoost binary: {n_trees} trees, depth {depth}, {n_features} float32 features", "xgboost",
        full=dict(n_trees=500, depth=6, n_features=50, n_train=20000, n_test=100_000),
        quick=dict(n_trees=50, depth=6, n_features=50, n_train=3000, n_test=8000),
        train=_xgb_binary),
    "xgb-multiclass": CaseSpec(
        "XGBoost multiclass: {n_classes} classes x {n_trees} rounds, depth {depth}", "xgboost",
        full=dict(n_trees=100, n_classes=10, depth=6, n_features=30, n_train=20000, n_test=100_000),
        quick=dict(n_trees=8, n_classes=10, depth=6, n_features=30, n_train=3000, n_test=8000),
        train=_xgb_multiclass),
    "xgb-nan-regression": CaseSpec(
        "XGBoost regression with 15% NaN: {n_trees} trees, depth {depth}", "xgboost",
        full=dict(n_trees=300, depth=8, n_features=30, nan_frac=0.15, n_train=20000, n_test=100_000),
        quick=dict(n_trees=20, depth=8, n_features=30, nan_frac=0.15, n_train=3000, n_test=8000),
        train=_xgb_nan_regression),
    "rf-deep": CaseSpec(
        "scikit-learn RandomForestRegressor: {n_trees} trees, unlimited depth, {n_train} training rows", "sklearn",
        full=dict(n_trees=20, n_features=20, n_train=3000, n_test=100_000),
        quick=dict(n_trees=3, n_features=20, n_train=400, n_test=8000),
        train=_rf_deep),
    "gb-regressor": CaseSpec(
        "scikit-learn GradientBoostingRegressor: {n_trees} trees, depth {depth}", "sklearn",
        full=dict(n_trees=300, depth=4, n_features=20, n_train=10000, n_test=100_000),
        quick=dict(n_trees=30, depth=4, n_features=20, n_train=2000, n_test=8000),
        train=_gbr),
    "gb-classifier": CaseSpec(
        "scikit-learn GradientBoostingClassifier (binary): {n_trees} trees, depth {depth}", "sklearn",
        full=dict(n_trees=300, depth=4, n_features=20, n_train=10000, n_test=100_000),
        quick=dict(n_trees=30, depth=4, n_features=20, n_train=2000, n_test=8000),
        train=_gbc),
    "et-multiclass": CaseSpec(
        "scikit-learn ExtraTreesClassifier, {n_classes} classes: {n_trees} trees, depth {depth}", "sklearn",
        full=dict(n_trees=50, depth=10, n_classes=5, n_features=20, n_train=10000, n_test=100_000),
        quick=dict(n_trees=6, depth=8, n_classes=5, n_features=20, n_train=2000, n_test=8000),
        train=_et_multiclass),
    "hgb-nan-cat": CaseSpec(
        "scikit-learn HistGradientBoostingClassifier, NaN + {n_cat} categorical features: "
        "{n_trees} iterations, {leaves} leaves", "sklearn",
        full=dict(n_trees=200, leaves=31, n_cat=4, nan_frac=0.1, n_features=20, n_train=20000,
                  n_test=100_000),
        quick=dict(n_trees=15, leaves=31, n_cat=4, nan_frac=0.1, n_features=20, n_train=3000,
                   n_test=8000),
        train=_hgb_nan_cat),
    "lgbm-binary": CaseSpec(
        "LightGBM binary: {n_trees} trees, {leaves} leaves", "lightgbm",
        full=dict(n_trees=500, leaves=63, n_features=50, n_train=20000, n_test=100_000),
        quick=dict(n_trees=20, leaves=63, n_features=50, n_train=3000, n_test=8000),
        train=_lgbm_binary),
    "cb-binary": CaseSpec(
        "CatBoost binary: {n_trees} symmetric trees, depth {depth}", "catboost",
        full=dict(n_trees=500, depth=6, n_features=50, n_train=20000, n_test=100_000),
        quick=dict(n_trees=50, depth=6, n_features=50, n_train=3000, n_test=8000),
        train=_cb_binary),

    # public-benchmark-shaped XGBoost models (100 trees of depth 8, binary unless named) from
    # narrow to wide rows, and a deep ExtraTrees forest (where treecomp led the other engines
    # least, 2026-11-27);
    # the wide ones keep fewer test rows (2,000 float32 features: 8 kB a row)
    "xgb-d8-13": CaseSpec(
        "XGBoost binary: {n_trees} trees, depth {depth}, {n_features} features", "xgboost",
        full=dict(n_trees=100, depth=8, n_features=13, n_train=20000, n_test=100_000),
        quick=dict(n_trees=10, depth=8, n_features=13, n_train=3000, n_test=8000),
        train=_xgb_binary, in_quick=False),
    "xgb-d8-28": CaseSpec(
        "XGBoost binary: {n_trees} trees, depth {depth}, {n_features} features", "xgboost",
        full=dict(n_trees=100, depth=8, n_features=28, n_train=20000, n_test=100_000),
        quick=dict(n_trees=10, depth=8, n_features=28, n_train=3000, n_test=8000),
        train=_xgb_binary, in_quick=False),
    "xgb-d8-90-regression": CaseSpec(
        "XGBoost regression: {n_trees} trees, depth {depth}, {n_features} features", "xgboost",
        full=dict(n_trees=100, depth=8, n_features=90, n_train=20000, n_test=100_000),
        quick=dict(n_trees=10, depth=8, n_features=90, n_train=3000, n_test=8000),
        train=_xgb_regression, in_quick=False),
    "xgb-d8-968": CaseSpec(
        "XGBoost binary: {n_trees} trees, depth {depth}, {n_features} features", "xgboost",
        full=dict(n_trees=100, depth=8, n_features=968, n_train=20000, n_test=20_000),
        quick=dict(n_trees=10, depth=8, n_features=968, n_train=1000, n_test=4000),
        train=_xgb_binary, in_quick=False),
    "xgb-d8-2000": CaseSpec(
        "XGBoost binary: {n_trees} trees, depth {depth}, {n_features} features", "xgboost",
        full=dict(n_trees=100, depth=8, n_features=2000, n_train=20000, n_test=10_000),
        quick=dict(n_trees=10, depth=8, n_features=2000, n_train=1000, n_test=2000),
        train=_xgb_binary, in_quick=False),
    # LightGBM's num_leaves=255 (a common setting): trees of 129-255 leaves, which the
    # interval walk took only from 2026-11-28 (before: the float walk, ~10x slower)
    "lgbm-255": CaseSpec(
        "LightGBM binary: {n_trees} trees, {leaves} leaves, {n_features} features", "lightgbm",
        full=dict(n_trees=300, leaves=255, n_features=100, n_train=50000, n_test=50_000),
        quick=dict(n_trees=10, leaves=255, n_features=100, n_train=10000, n_test=4000),
        train=_lgbm_binary, in_quick=False),
    "et-deep-multiclass": CaseSpec(
        "scikit-learn ExtraTreesClassifier, {n_classes} classes: {n_trees} trees, depth {depth}", "sklearn",
        full=dict(n_trees=200, depth=12, n_classes=5, n_features=20, n_train=20000, n_test=100_000),
        quick=dict(n_trees=10, depth=12, n_classes=5, n_features=20, n_train=3000, n_test=8000),
        train=_et_multiclass, in_quick=False),
}

#: a tiny case for the smoke test and for `--cases tiny`: seconds end to end
TINY = CaseSpec("scikit-learn GradientBoostingClassifier, tiny: {n_trees} trees, depth {depth}", "sklearn",
                full=dict(n_trees=10, depth=3, n_features=8, n_train=400, n_test=2000),
                quick=dict(n_trees=10, depth=3, n_features=8, n_train=400, n_test=2000),
                train=_gbc)


def module_available(module: str) -> bool:
    """Whether `module` imports (a broken install counts as missing: its cases cannot run)."""
    try:
        importlib.import_module(module)
        return True
    except Exception:  # noqa: BLE001 - ImportError, or a library failing on import
        return False


def available(spec: CaseSpec) -> bool:
    return module_available(spec.module)


def case_names(quick: bool = False) -> list[str]:
    """The cases a run without --cases takes (quick: those marked in_quick)."""
    return [n for n, s in SPECS.items() if s.in_quick or not quick]


def _cache_path(name: str, spec: CaseSpec, params: dict) -> Path:
    key = json.dumps({"name": name, "params": params,
                      "version": _version(spec.module), "numpy": np.__version__}, sort_keys=True)
    return CACHE_DIR / f"{name}-{hashlib.sha256(key.encode()).hexdigest()[:16]}.pkl"


def build_case(name: str, quick: bool = False, n_rows: int | None = None,
               log: Callable[[str], None] = lambda s: None) -> BenchCase:
    """Train (or load from CACHE_DIR) the case `name` and return it with its test rows."""
    spec = TINY if name == "tiny" else SPECS[name]
    params = dict(spec.quick if quick else spec.full)
    fit, X = spec.train(params)
    title = spec.title.format(**params)
    path = _cache_path(name, spec, params)
    model = None
    if path.is_file():
        try:
            with open(path, "rb") as f:
                model = pickle.load(f)
        except Exception as exc:  # noqa: BLE001 - a stale or torn cache file: retrain
            log(f"  cache file {path.name} unreadable ({type(exc).__name__}); retraining")
    if model is None:
        log(f"  training {name} ({title}) ...")
        model = fit()
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        with open(tmp, "wb") as f:
            pickle.dump(model, f, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(tmp, path)
    if n_rows is not None:
        X = X[:n_rows]
    model_file = None
    if spec.module == "lightgbm":  # lleaves compiles from the text model file
        model_file = str(path.with_suffix(".txt"))
        if not os.path.isfile(model_file):
            model.booster_.save_model(model_file)
    return BenchCase(name=name, title=title, model=model, X=np.ascontiguousarray(X),
                     library=library_for(model, model_file), params=params)


# -- a user's model ---------------------------------------------------------------------------
def rows_around_thresholds(forest, n: int, seed: int = 0) -> np.ndarray:
    """Synthetic rows for a bare model: each feature uniform over the span of its thresholds
    (widened by 10%), integers over the categories for categorical features, so that rows take
    every kind of path; unused features get standard normals."""
    rng = np.random.default_rng(seed)
    d = forest.n_features
    lo = np.full(d, np.inf)
    hi = np.full(d, -np.inf)
    cat_max = np.full(d, -1)
    for t in forest.trees:
        inner = t.left >= 0
        num = inner & (t.cat_index < 0)
        f, thr = t.feature[num], t.threshold[num]
        ok = np.isfinite(thr)
        np.minimum.at(lo, f[ok], thr[ok])
        np.maximum.at(hi, f[ok], thr[ok])
        cat = inner & (t.cat_index >= 0)
        if cat.any():
            np.maximum.at(cat_max, t.feature[cat], 32 * t.cat_bits.shape[1] - 1)
    X = rng.normal(size=(n, d))
    seen = np.isfinite(lo)
    span = hi[seen] - lo[seen]
    a, b = lo[seen] - 0.1 * span - 1e-3, hi[seen] + 0.1 * span + 1e-3
    X[:, seen] = a + rng.random((n, int(seen.sum()))) * (b - a)
    for j in np.flatnonzero(cat_max >= 0):
        X[:, j] = rng.integers(0, min(int(cat_max[j]) + 1, 64), n)
    return X.astype(np.dtype(forest.input_dtype))


def load_data(path: str, n_features: int, feature_names: Any = None, header: bool | None = None,
              delimiter: str = ",", log: Callable[[str], None] = lambda s: None) -> np.ndarray:
    """Rows from a .npy file or delimited text, read as `treecomp predict` reads them
    (treecomp.datafile: a header only where certain, pandas' index column left out)."""
    from treecomp.datafile import read_rows
    p = Path(path)
    X = np.asarray(read_rows(p, n_features, feature_names, header=header, delimiter=delimiter,
                             note=lambda msg: log(f"note: {msg}")))
    if X.ndim != 2 or X.shape[1] != n_features:
        raise ValueError(f"{p.name}: expected a 2-D table with {n_features} columns (the model's "
                         f"features), got shape {X.shape}")
    if X.dtype.kind not in "fiu":
        raise ValueError(f"{p.name}: data must be numeric, got dtype {X.dtype}")
    return np.ascontiguousarray(X)


def user_case(path: str, forest, data: str | None = None, n_rows: int = 100_000,
              log: Callable[[str], None] = lambda s: None, header: bool | None = None,
              delimiter: str = ",") -> BenchCase:
    """A case for a user's model file: the library is measured when the file is a pickle."""
    from treecomp.frontends import PICKLE_SUFFIXES, load_pickle
    library = None
    p = Path(path)
    model: Any = str(p)
    if p.suffix.lower() in PICKLE_SUFFIXES:
        obj = load_pickle(p)
        library = library_for(obj)
        model = obj
        if library is None:
            log(f"  {type(obj).__name__} is no known library model: its own predict is skipped")
    X = (load_data(data, forest.n_features, forest.feature_names, header, delimiter, log) if data
         else rows_around_thresholds(forest, n_rows))
    return BenchCase(name=p.stem, title=f"user model {p.name}", model=model, X=X, library=library,
                     params={"path": str(p), "data": data})


@contextlib.contextmanager
def quiet():
    """Silence library chatter (warnings) while cases train."""
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield
