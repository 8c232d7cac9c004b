"""LightGBM zoo: small deterministic models (seeded data, <= 20 rounds, one thread).

Covers every objective the frontend maps, NaN / None / categorical missing handling, early
stopping (best_iteration), random-forest mode, the scikit-learn wrappers and text-model files.
Rows in `Case.X` include NaN, zeros and, for categorical cases, negative, unseen, huge and
non-integer categories (but never values in (-1, 0): see test_frontend_lightgbm.py for that
documented gap).

Random-forest cases: LightGBM's `raw_score=True` is the undivided sum of the trees, as the IR's
raw margin; `predict` divides it by the number of iterations (Forest.output_divisor).
"""

from __future__ import annotations

import atexit
import functools
import shutil
import tempfile
from pathlib import Path

import lightgbm as lgb
import numpy as np

from tests.zoo import Case

BASE = dict(verbose=-1, num_threads=1, seed=7, deterministic=True, force_row_wise=True)
N = 300


def _X(seed: int, n: int = N, d: int = 5, nan: float = 0.08, zeros: float = 0.25) -> np.ndarray:
    """Seeded features: column 1 has NaN, column 2 many exact zeros, the rest normal."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    X[rng.random(n) < nan, 1] = np.nan
    X[rng.random(n) < zeros, 2] = 0.0
    return X


def _signal(X: np.ndarray) -> np.ndarray:
    return X[:, 0] + 0.5 * np.nan_to_num(X[:, 1], nan=-1.0) + (X[:, 2] == 0) - 0.3 * X[:, 3] ** 2


def _test_rows(X: np.ndarray, seed: int, cat_cols: tuple[int, ...] = ()) -> np.ndarray:
    """Training-like rows plus rows with NaN, zeros, and odd categories."""
    rng = np.random.default_rng(seed + 1000)
    extra = X[rng.integers(0, len(X), 60)].copy()
    for r in range(len(extra)):
        j = rng.integers(X.shape[1])
        if j in cat_cols:
            extra[r, j] = rng.choice([np.nan, -1.0, -3.0, 50.0, 1000.0, 2.0 ** 31, 2.5, 0.0, -0.0,
                                      np.inf, -np.inf])
        else:
            extra[r, j] = rng.choice([np.nan, 0.0, -0.0, np.inf, -np.inf])
    return np.vstack([X[:150], extra])


def _booster_case(b: lgb.Booster, X: np.ndarray, raw: bool = True, path: str | None = None) -> Case:
    lib = {"predict": b.predict}
    if raw:
        lib["raw"] = lambda Z: b.predict(Z, raw_score=True)
    return Case(model=b, X=X, library=lib, path=path)


def _wrapper_case(m, X: np.ndarray, raw: bool = True) -> Case:
    lib = {"predict": m.predict}
    if hasattr(m, "predict_proba"):
        lib["predict_proba"] = m.predict_proba
    if raw:
        lib["raw"] = lambda Z: m.predict(Z, raw_score=True)
    return Case(model=m, X=X, library=lib)


def _train(params: dict, X, y, rounds: int = 10, **ds) -> lgb.Booster:
    return lgb.train({**BASE, **params}, lgb.Dataset(X, y, **ds), rounds)


def _objective_case(objective: str, seed: int, **params) -> Case:
    X = _X(seed)
    s = _signal(X)
    rng = np.random.default_rng(seed)
    if objective in ("poisson", "tweedie"):
        y = rng.poisson(np.exp(0.5 * s).clip(0, 20)).astype(float)
    elif objective == "gamma":
        y = np.exp(0.3 * s) * rng.gamma(2.0, 0.5, len(s)) + 0.01
    elif objective == "mape":
        y = 5 + s + rng.normal(size=len(s)) * 0.1
    elif objective in ("binary", "cross_entropy"):
        y = (s + rng.normal(size=len(s)) * 0.3 > 0.5).astype(float)
        if objective == "cross_entropy":
            y = np.clip(0.5 * y + 0.5 * rng.random(len(s)), 0, 1)
    else:
        y = s + rng.normal(size=len(s)) * 0.2
    b = _train({"objective": objective, "num_leaves": 8, "min_data_in_leaf": 5, **params}, X, y, 10)
    return _booster_case(b, _test_rows(X, seed))


def _multiclass(objective: str, seed: int) -> Case:
    X = _X(seed)
    y = np.digitize(_signal(X), [-0.5, 0.7]).astype(float)
    b = _train({"objective": objective, "num_class": 3, "num_leaves": 6, "min_data_in_leaf": 5},
               X, y, 8)
    return _booster_case(b, _test_rows(X, seed))


def _ranking(objective: str, seed: int, wrapper: bool) -> Case:
    X = _X(seed)
    rng = np.random.default_rng(seed)
    y = np.digitize(_signal(X) + rng.normal(size=N) * 0.3, [-0.5, 0.5, 1.5])
    group = [20] * (N // 20)
    params = {"objective": objective, "num_leaves": 6, "min_data_in_leaf": 5}
    if wrapper:
        m = lgb.LGBMRanker(n_estimators=10, **params, **BASE).fit(X, y, group=group)
        return _wrapper_case(m, _test_rows(X, seed))
    return _booster_case(_train(params, X, y, 10, group=group), _test_rows(X, seed))


def _cat_data(seed: int, n: int = N):
    """Column 0 categorical (0..9, category 0 strongly 'left'), column 4 categorical (0..5)."""
    X = _X(seed, n)
    rng = np.random.default_rng(seed)
    X[:, 0] = rng.integers(0, 10, n)
    X[:, 4] = rng.integers(0, 6, n)
    y = (np.isin(X[:, 0], [0, 3, 7]) * 2.0 + (X[:, 4] == 2) - np.nan_to_num(X[:, 1])
         + rng.normal(size=n) * 0.2)
    return X, y


_CAT = dict(min_data_per_group=5, cat_smooth=1.0, cat_l2=1.0, max_cat_to_onehot=2,
            min_data_in_leaf=5, num_leaves=8)


def categorical() -> Case:
    X, y = _cat_data(11)
    b = _train({"objective": "regression", **_CAT}, X, y, 12, categorical_feature=[0, 4])
    return _booster_case(b, _test_rows(X, 11, cat_cols=(0, 4)))


def no_missing_zeros() -> Case:
    """use_missing=False: every numeric split has missing_type None, so NaN acts as 0.0."""
    X = _X(12, nan=0.0, zeros=0.4)
    X[:, 3] = np.where(np.random.default_rng(12).random(N) < 0.4, 0.0, X[:, 3])
    y = _signal(X) + 2.0 * (X[:, 3] == 0)
    b = _train({"objective": "regression", "use_missing": False, "num_leaves": 8,
                "min_data_in_leaf": 5}, X, y, 10)
    return _booster_case(b, _test_rows(X, 12))


def early_stopping_booster() -> Case:
    """keep_training_booster=True keeps all trees; predict then uses best_iteration."""
    X = _X(13)
    y = _signal(X) + np.random.default_rng(13).normal(size=N)
    Xv, yv = X[200:], y[200:]
    b = lgb.train({**BASE, "objective": "regression", "num_leaves": 16, "min_data_in_leaf": 3,
                   "learning_rate": 0.5},
                  lgb.Dataset(X[:200], y[:200]), 20, valid_sets=[lgb.Dataset(Xv, yv)],
                  callbacks=[lgb.early_stopping(3, verbose=False)], keep_training_booster=True)
    return _booster_case(b, _test_rows(X, 13))


def rf_regression() -> Case:
    X = _X(14)
    y = _signal(X)
    b = _train({"objective": "regression", "boosting": "rf", "bagging_freq": 1,
                "bagging_fraction": 0.7, "feature_fraction": 0.8, "num_leaves": 8,
                "min_data_in_leaf": 5}, X, y, 10)
    return _booster_case(b, _test_rows(X, 14))


def rf_binary() -> Case:
    X = _X(15)
    y = (_signal(X) > 0.5).astype(float)
    b = _train({"objective": "binary", "boosting": "rf", "bagging_freq": 1,
                "bagging_fraction": 0.7, "num_leaves": 8, "min_data_in_leaf": 5}, X, y, 10)
    return _booster_case(b, _test_rows(X, 15))


def rf_multiclass() -> Case:
    X = _X(35)
    y = np.digitize(_signal(X), [-0.5, 0.7]).astype(float)
    b = _train({"objective": "multiclass", "num_class": 3, "boosting": "rf", "bagging_freq": 1,
                "bagging_fraction": 0.7, "num_leaves": 6, "min_data_in_leaf": 5}, X, y, 6)
    return _booster_case(b, _test_rows(X, 35))


def wrapper_regressor_early_stopping() -> Case:
    X = _X(16)
    y = _signal(X) + np.random.default_rng(16).normal(size=N)
    m = lgb.LGBMRegressor(n_estimators=20, num_leaves=16, min_child_samples=3, learning_rate=0.5,
                          **BASE)
    m.fit(X[:200], y[:200], eval_X=(X[200:],), eval_y=(y[200:],),
          callbacks=[lgb.early_stopping(3, verbose=False)])
    return _wrapper_case(m, _test_rows(X, 16))


def wrapper_classifier_binary() -> Case:
    """String labels and a categorical column through the sklearn wrapper."""
    X, y = _cat_data(17)
    labels = np.where(y > 1.0, "yes", "no")
    m = lgb.LGBMClassifier(n_estimators=12, **_CAT, **BASE)
    m.fit(X, labels, categorical_feature=[0, 4])
    return _wrapper_case(m, _test_rows(X, 17, cat_cols=(0, 4)))


def wrapper_classifier_multiclass() -> Case:
    X = _X(18)
    y = np.array([3, 7, 11])[np.digitize(_signal(X), [-0.5, 0.7])]
    m = lgb.LGBMClassifier(n_estimators=8, num_leaves=6, min_child_samples=5, **BASE).fit(X, y)
    return _wrapper_case(m, _test_rows(X, 18))


def constant() -> Case:
    """A constant target: one single-leaf tree (LightGBM stops after it)."""
    X = _X(19)
    b = _train({"objective": "regression"}, X, np.full(N, 3.25), 5)
    return _booster_case(b, _test_rows(X, 19))


@functools.cache
def _tmpdir() -> Path:
    path = Path(tempfile.mkdtemp(prefix="treecomp-zoo-lightgbm-"))
    atexit.register(shutil.rmtree, path, ignore_errors=True)
    return path


def _file_case(name: str, b: lgb.Booster, X: np.ndarray) -> Case:
    path = _tmpdir() / f"{name}.txt"
    b.save_model(str(path))
    loaded = lgb.Booster(model_file=str(path))
    return _booster_case(loaded, X, path=str(path))


def file_binary_categorical() -> Case:
    X, y = _cat_data(20)
    b = _train({"objective": "binary", **_CAT}, X, (y > 1.0).astype(float), 12,
               categorical_feature=[0, 4])
    return _file_case("binary_categorical", b, _test_rows(X, 20, cat_cols=(0, 4)))


def file_multiclass_early_stopped() -> Case:
    """Saved after early stopping: save_model writes only the best iterations."""
    X = _X(21)
    y = np.digitize(_signal(X) + np.random.default_rng(21).normal(size=N), [-0.5, 0.7])
    b = lgb.train({**BASE, "objective": "multiclass", "num_class": 3, "num_leaves": 8,
                   "min_data_in_leaf": 3, "learning_rate": 0.5},
                  lgb.Dataset(X[:200], y[:200]), 20,
                  valid_sets=[lgb.Dataset(X[200:], y[200:])],
                  callbacks=[lgb.early_stopping(2, verbose=False)])
    return _file_case("multiclass_early_stopped", b, _test_rows(X, 21))


CASES = {
    "regression": lambda: _objective_case("regression", 1),
    "regression_l1": lambda: _objective_case("regression_l1", 2),
    "huber": lambda: _objective_case("huber", 3, alpha=0.8),
    "fair": lambda: _objective_case("fair", 4),
    "quantile": lambda: _objective_case("quantile", 5, alpha=0.3),
    "mape": lambda: _objective_case("mape", 6),
    "poisson": lambda: _objective_case("poisson", 7),
    "gamma": lambda: _objective_case("gamma", 8),
    "tweedie": lambda: _objective_case("tweedie", 9),
    "binary": lambda: _objective_case("binary", 10),
    "binary_sigmoid2": lambda: _objective_case("binary", 22, sigmoid=2.0),
    "cross_entropy": lambda: _objective_case("cross_entropy", 23),
    "multiclass": lambda: _multiclass("multiclass", 24),
    "multiclassova": lambda: _multiclass("multiclassova", 25),
    "lambdarank": lambda: _ranking("lambdarank", 26, wrapper=False),
    "rank_xendcg_ranker": lambda: _ranking("rank_xendcg", 27, wrapper=True),
    "categorical": categorical,
    "no_missing_zeros": no_missing_zeros,
    "early_stopping_booster": early_stopping_booster,
    "rf_regression": rf_regression,
    "rf_binary": rf_binary,
    "rf_multiclass": rf_multiclass,
    "wrapper_regressor_early_stopping": wrapper_regressor_early_stopping,
    "wrapper_classifier_binary": wrapper_classifier_binary,
    "wrapper_classifier_multiclass": wrapper_classifier_multiclass,
    "constant": constant,
    "file_binary_categorical": file_binary_categorical,
    "file_multiclass_early_stopped": file_multiclass_early_stopped,
}
