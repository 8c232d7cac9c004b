"""XGBoost zoo: small deterministic models (seeded data, <= 20 rounds, nthread=1).

Covers every objective the frontend maps, NaN in training, categorical splits, DART (Booster and
sklearn wrapper: they add DART trees differently), random forests (num_parallel_tree), early
stopping (best_iteration), single-leaf trees, the sklearn wrappers, and model files (.json, .ubj,
one saved by a wrapper, one with the pre-2.1 plain-number base_score).

Library callables take a float64 matrix. Booster cases call ``Booster.predict`` on a DMatrix,
which refuses +/-inf ("Input data contains `inf`"): those calls replace +/-inf by +/-FLT_MAX,
which takes the same path through every split (``x < t`` has the same outcome for every finite
float32 t, and both are invalid categories). Wrapper cases call the wrapper's own predict
(``inplace_predict``, which takes inf as it is).
"""

from __future__ import annotations

import atexit
import json
import shutil
import tempfile
import warnings
from pathlib import Path

import numpy as np
import xgboost as xgb

from tests.zoo import Case

N = 300
BASE = dict(nthread=1, seed=7, max_depth=3, eta=0.3)
_FLT_MAX = float(np.finfo(np.float32).max)
_TMP: list[Path] = []


def tmpdir() -> Path:
    """One private directory per process for the file cases (removed at exit)."""
    if not _TMP:
        d = Path(tempfile.mkdtemp(prefix="treecomp-zoo-xgb-"))
        atexit.register(shutil.rmtree, d, True)
        _TMP.append(d)
    return _TMP[0]


def _X(seed: int, n: int = N, d: int = 5, nan: float = 0.08) -> np.ndarray:
    """Seeded features: column 1 has NaN, column 2 repeated values, the rest normal."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    if d > 2:
        X[rng.random(n) < nan, 1] = np.nan
        X[:, 2] = np.round(X[:, 2] * 2) / 2
    return X


def _signal(X: np.ndarray) -> np.ndarray:
    return X[:, 0] + 0.5 * np.nan_to_num(X[:, 1], nan=-1.0) + X[:, 2] - 0.3 * X[:, 3] ** 2


def _rows(X: np.ndarray, seed: int, cat_cols: tuple[int, ...] = ()) -> np.ndarray:
    """Training-like rows plus rows with NaN, +/-0, +/-inf and odd categories."""
    rng = np.random.default_rng(seed + 1000)
    extra = X[rng.integers(0, len(X), 80)].copy()
    for r in range(len(extra)):
        j = int(rng.integers(X.shape[1]))
        if j in cat_cols:
            extra[r, j] = rng.choice([np.nan, -1.0, -0.5, -0.0, 0.0, 0.5, 3.999, 31.0, 32.0, 33.0,
                                      63.0, 64.0, 1000.0, 2.0 ** 24 - 1, 2.0 ** 24, 1e9, 2.5,
                                      np.inf, -np.inf])
        else:
            extra[r, j] = rng.choice([np.nan, 0.0, -0.0, np.inf, -np.inf])
    return np.vstack([X[:150], extra])


def _finite(Z: np.ndarray) -> np.ndarray:
    return np.where(np.isposinf(Z), _FLT_MAX, np.where(np.isneginf(Z), -_FLT_MAX, Z))


def _dmatrix(b: xgb.Booster, Z: np.ndarray) -> xgb.DMatrix:
    Z = _finite(Z)
    types = b.feature_types
    if types is not None and "c" in types:
        return xgb.DMatrix(Z, feature_types=types, enable_categorical=True, nthread=1)
    return xgb.DMatrix(Z, nthread=1)


def booster_case(b: xgb.Booster, X: np.ndarray, path: str | None = None) -> Case:
    lib = {"predict": lambda Z: b.predict(_dmatrix(b, Z)),
           "raw": lambda Z: b.predict(_dmatrix(b, Z), output_margin=True)}
    return Case(model=b, X=X, library=lib, path=path)


def wrapper_case(m, X: np.ndarray, proba: bool = True, path: str | None = None) -> Case:
    lib = {"predict": m.predict, "raw": lambda Z: m.predict(Z, output_margin=True)}
    if proba and hasattr(m, "predict_proba"):
        lib["predict_proba"] = m.predict_proba
    return Case(model=m, X=X, library=lib, path=path)


def train(params: dict, X, y, rounds: int = 10, **dm) -> xgb.Booster:
    return xgb.train({**BASE, **params}, xgb.DMatrix(X, label=y, nthread=1, **dm), rounds)


def _labels(objective: str, X: np.ndarray, seed: int) -> np.ndarray:
    s = _signal(X)
    rng = np.random.default_rng(seed)
    if objective in ("count:poisson",):
        return rng.poisson(np.exp(0.4 * s).clip(0, 20)).astype(float)
    if objective in ("reg:gamma", "reg:tweedie", "reg:squaredlogerror", "survival:cox"):
        return np.exp(0.3 * s) * rng.gamma(2.0, 0.5, len(s)) + 0.01
    if objective.startswith("binary:") or objective == "reg:logistic":
        return (s + rng.normal(size=len(s)) * 0.3 > 0.3).astype(float)
    return s + rng.normal(size=len(s)) * 0.2


def _objective(objective: str, seed: int, rounds: int = 10, **params):
    def factory() -> Case:
        X = _X(seed)
        b = train({"objective": objective, **params}, X, _labels(objective, X, seed), rounds)
        return booster_case(b, _rows(X, seed))
    return factory


def _multiclass(objective: str, seed: int, k: int = 4):
    def factory() -> Case:
        X = _X(seed)
        y = np.digitize(_signal(X), np.quantile(_signal(X), np.linspace(0, 1, k + 1)[1:-1]))
        b = train({"objective": objective, "num_class": k}, X, y.astype(float), 8)
        return booster_case(b, _rows(X, seed))
    return factory


def _ranking(objective: str, seed: int, wrapper: bool = False):
    def factory() -> Case:
        X = _X(seed)
        rng = np.random.default_rng(seed)
        y = np.digitize(_signal(X) + rng.normal(size=N) * 0.3, [-0.5, 0.5, 1.5])
        if objective == "rank:map":  # needs binary relevance labels
            y = (y >= 2).astype(int)
        qid = np.repeat(np.arange(N // 20), 20)
        if wrapper:
            m = xgb.XGBRanker(objective=objective, n_estimators=8, max_depth=3, n_jobs=1,
                              random_state=7).fit(X, y, qid=qid)
            return wrapper_case(m, _rows(X, seed))
        b = train({"objective": objective}, X, y, 8, qid=qid)
        return booster_case(b, _rows(X, seed))
    return factory


def survival_aft() -> Case:
    X = _X(19)
    rng = np.random.default_rng(19)
    y = np.exp(0.5 * _signal(X) + 0.3 * rng.normal(size=N))
    d = xgb.DMatrix(X, nthread=1)
    d.set_float_info("label_lower_bound", y)
    d.set_float_info("label_upper_bound", np.where(rng.random(N) < 0.3, np.inf, y))  # censored
    b = xgb.train({**BASE, "objective": "survival:aft", "aft_loss_distribution": "logistic"}, d, 8)
    return booster_case(b, _rows(X, 19))


def quantile_multi() -> Case:
    """Three quantiles: num_target=3, one tree per target and iteration."""
    X = _X(20)
    b = train({"objective": "reg:quantileerror", "quantile_alpha": [0.1, 0.5, 0.9]}, X,
              _labels("reg:squarederror", X, 20), 8)
    return booster_case(b, _rows(X, 20))


def multi_target() -> Case:
    X = _X(21)
    y = np.c_[_signal(X), np.sin(X[:, 3]) + X[:, 4]]
    return booster_case(train({"objective": "reg:squarederror"}, X, y, 8), _rows(X, 21))


def _cat_data(seed: int, n: int = N):
    """Column 0: 40 categories (bitsets of two words); column 3: 5 categories."""
    X = _X(seed, n)
    rng = np.random.default_rng(seed)
    X[:, 0] = rng.integers(0, 40, n)
    X[:, 3] = rng.integers(0, 5, n)
    y = (np.isin(X[:, 0], [1, 4, 9, 16, 25, 36, 33]) * 2.0 + (X[:, 3] == 2)
         - np.nan_to_num(X[:, 1]) + rng.normal(size=n) * 0.2)
    return X, y


def categorical() -> Case:
    X, y = _cat_data(22)
    types = ["c", "q", "q", "c", "q"]
    b = train({"objective": "reg:squarederror", "max_cat_to_onehot": 1, "max_depth": 4}, X, y, 10,
              feature_types=types, enable_categorical=True)
    return booster_case(b, _rows(X, 22, cat_cols=(0, 3)))


def categorical_onehot_multiclass() -> Case:
    """Small categories split one-hot (max_cat_to_onehot), three classes."""
    X, y = _cat_data(23)
    y = np.digitize(y, [0.0, 1.5]).astype(float)
    types = ["c", "q", "q", "c", "q"]
    b = train({"objective": "multi:softprob", "num_class": 3, "max_cat_to_onehot": 8}, X, y, 6,
              feature_types=types, enable_categorical=True)
    return booster_case(b, _rows(X, 23, cat_cols=(0, 3)))


def dart_booster() -> Case:
    X = _X(24)
    b = train({"objective": "reg:squarederror", "booster": "dart", "rate_drop": 0.3,
               "skip_drop": 0.0}, X, _labels("reg:squarederror", X, 24), 12)
    return booster_case(b, _rows(X, 24))


def dart_wrapper_regressor() -> Case:
    X = _X(25)
    m = xgb.XGBRegressor(booster="dart", rate_drop=0.3, skip_drop=0.0, n_estimators=12,
                         max_depth=3, n_jobs=1, random_state=7)
    m.fit(X, _labels("reg:squarederror", X, 25))
    return wrapper_case(m, _rows(X, 25))


def dart_wrapper_multiclass() -> Case:
    """inplace_predict adds ((base + leaf) - base) * weight per class (not leaf * weight)."""
    X = _X(26)
    y = np.digitize(_signal(X), [-0.5, 0.7])
    m = xgb.XGBClassifier(booster="dart", rate_drop=0.3, skip_drop=0.0, n_estimators=8,
                          max_depth=3, n_jobs=1, random_state=7).fit(X, y)
    return wrapper_case(m, _rows(X, 26))


def random_forest_booster() -> Case:
    X = _X(27)
    b = train({"objective": "binary:logistic", "num_parallel_tree": 4, "subsample": 0.7,
               "colsample_bynode": 0.8, "eta": 1.0}, X, _labels("binary:logistic", X, 27), 3)
    return booster_case(b, _rows(X, 27))


def rf_regressor() -> Case:
    X = _X(28)
    m = xgb.XGBRFRegressor(n_estimators=6, max_depth=4, n_jobs=1, random_state=7)
    m.fit(X, _labels("reg:squarederror", X, 28))
    return wrapper_case(m, _rows(X, 28))


def rf_classifier() -> Case:
    X = _X(29)
    m = xgb.XGBRFClassifier(n_estimators=6, max_depth=4, n_jobs=1, random_state=7)
    m.fit(X, _labels("binary:logistic", X, 29))
    return wrapper_case(m, _rows(X, 29))


def early_stopping_regressor() -> Case:
    X = _X(30)
    y = _signal(X) + np.random.default_rng(30).normal(size=N)
    m = xgb.XGBRegressor(n_estimators=20, max_depth=4, learning_rate=0.6, n_jobs=1,
                         random_state=7, early_stopping_rounds=2)
    m.fit(X[:200], y[:200], eval_set=[(X[200:], y[200:])], verbose=False)
    return wrapper_case(m, _rows(X, 30))


def early_stopping_multiclass() -> Case:
    X = _X(31)
    y = np.digitize(_signal(X) + np.random.default_rng(31).normal(size=N), [-0.5, 0.7])
    m = xgb.XGBClassifier(n_estimators=20, max_depth=4, learning_rate=0.8, n_jobs=1,
                          random_state=7, early_stopping_rounds=2)
    m.fit(X[:200], y[:200], eval_set=[(X[200:], y[200:])], verbose=False)
    return wrapper_case(m, _rows(X, 31))


def wrapper_regressor() -> Case:
    X = _X(32)
    m = xgb.XGBRegressor(n_estimators=10, max_depth=3, n_jobs=1, random_state=7)
    return wrapper_case(m.fit(X, _labels("reg:squarederror", X, 32)), _rows(X, 32))


def wrapper_classifier_binary() -> Case:
    X = _X(33)
    m = xgb.XGBClassifier(n_estimators=10, max_depth=3, n_jobs=1, random_state=7)
    return wrapper_case(m.fit(X, _labels("binary:logistic", X, 33).astype(int)), _rows(X, 33))


def wrapper_classifier_multiclass() -> Case:
    X = _X(34)
    y = np.digitize(_signal(X), [-1.0, 0.0, 1.0])
    m = xgb.XGBClassifier(n_estimators=8, max_depth=3, n_jobs=1, random_state=7).fit(X, y)
    return wrapper_case(m, _rows(X, 34))


def wrapper_classifier_softmax() -> Case:
    """objective="multi:softmax": predict = int32 class index; predict_proba is scipy's
    float32 softmax of the margins (numpy's exp), not XGBoost's softmax."""
    X = _X(35)
    y = np.digitize(_signal(X), [-0.5, 0.7])
    m = xgb.XGBClassifier(objective="multi:softmax", n_estimators=6, max_depth=3, n_jobs=1,
                          random_state=7).fit(X, y)
    return wrapper_case(m, _rows(X, 35))


def wrapper_classifier_categorical() -> Case:
    """A pandas category column through the wrapper (rows are then given as codes)."""
    import pandas as pd

    X, y = _cat_data(36)
    df = pd.DataFrame(X, columns=[f"f{i}" for i in range(X.shape[1])])
    df["f0"] = pd.Categorical(X[:, 0].astype(int), categories=range(40))
    m = xgb.XGBClassifier(n_estimators=8, max_depth=3, n_jobs=1, random_state=7,
                          enable_categorical=True, max_cat_to_onehot=1)
    m.fit(df, (y > 1.0).astype(int))
    return wrapper_case(m, _rows(X, 36, cat_cols=(0,)))


def single_leaf_trees() -> Case:
    """min_split_loss so large that no tree ever splits."""
    X = _X(37)
    b = train({"objective": "binary:logistic", "gamma": 1e9}, X, _labels("binary:logistic", X, 37), 4)
    return booster_case(b, _rows(X, 37))


def pruned_exact() -> Case:
    """The exact method with the prune updater leaves deleted nodes in the arrays."""
    X = _X(38)
    with warnings.catch_warnings():  # "You have manually specified the `updater` parameter"
        warnings.simplefilter("ignore", UserWarning)
        b = train({"objective": "reg:squarederror", "tree_method": "exact",
                   "updater": "grow_colmaker,prune", "gamma": 3.0, "max_depth": 6}, X,
                  _labels("reg:squarederror", X, 38) + np.random.default_rng(38).normal(size=N), 8)
    return booster_case(b, _rows(X, 38))


def feature_names() -> Case:
    X = _X(39)
    names = [f"col_{i}" for i in range(X.shape[1])]
    b = train({"objective": "reg:squarederror"}, X, _labels("reg:squarederror", X, 39), 5,
              feature_names=names)

    def dm(Z):
        return xgb.DMatrix(_finite(Z), feature_names=names, nthread=1)

    lib = {"predict": lambda Z: b.predict(dm(Z)),
           "raw": lambda Z: b.predict(dm(Z), output_margin=True)}
    return Case(model=b, X=_rows(X, 39), library=lib)


# -- files ---------------------------------------------------------------------------------------
def file_json_multiclass() -> Case:
    case = _multiclass("multi:softprob", 40, k=3)()
    path = tmpdir() / "multiclass.json"
    case.model.save_model(path)
    b = xgb.Booster({"nthread": 1}, model_file=str(path))
    return booster_case(b, case.X, path=str(path))


def file_ubj_categorical_dart() -> Case:
    X, y = _cat_data(41)
    types = ["c", "q", "q", "c", "q"]
    b = train({"objective": "reg:squarederror", "booster": "dart", "rate_drop": 0.2,
               "skip_drop": 0.0, "max_cat_to_onehot": 1}, X, y, 8, feature_types=types,
              enable_categorical=True)
    path = tmpdir() / "cat_dart.ubj"
    b.save_model(path)
    return booster_case(xgb.Booster({"nthread": 1}, model_file=str(path)), _rows(X, 41, cat_cols=(0, 3)),
                        path=str(path))


def file_ubj_wrapper_early_stopping() -> Case:
    """Saved by XGBClassifier: the file remembers it (attributes.scikit_learn) and its
    best_iteration, and loading it back into XGBClassifier predicts labels with those trees."""
    X = _X(42)
    y = np.digitize(_signal(X) + np.random.default_rng(42).normal(size=N), [-0.5, 0.7])
    m = xgb.XGBClassifier(n_estimators=20, max_depth=4, learning_rate=0.8, n_jobs=1,
                          random_state=7, early_stopping_rounds=2)
    m.fit(X[:200], y[:200], eval_set=[(X[200:], y[200:])], verbose=False)
    path = tmpdir() / "wrapper_es.ubj"
    m.save_model(path)
    loaded = xgb.XGBClassifier(n_jobs=1)
    loaded.load_model(path)
    return wrapper_case(loaded, _rows(X, 42), path=str(path))


def file_json_plain_base_score() -> Case:
    """base_score in the pre-2.1 plain-number form ("0.3" instead of "[3E-1]")."""
    X = _X(43)
    b = train({"objective": "binary:logistic", "base_score": 0.3}, X,
              _labels("binary:logistic", X, 43), 6)
    doc = json.loads(b.save_raw("json"))
    lmp = doc["learner"]["learner_model_param"]
    assert lmp["base_score"] == "[3E-1]", lmp["base_score"]
    lmp["base_score"] = "0.3"
    path = tmpdir() / "plain_base_score.json"
    path.write_text(json.dumps(doc))
    return booster_case(xgb.Booster({"nthread": 1}, model_file=str(path)), _rows(X, 43), path=str(path))


CASES = {
    "reg_squarederror": _objective("reg:squarederror", 1),
    "reg_squaredlogerror": _objective("reg:squaredlogerror", 2),
    "reg_absoluteerror": _objective("reg:absoluteerror", 3),
    "reg_pseudohubererror": _objective("reg:pseudohubererror", 4),
    "reg_quantileerror": _objective("reg:quantileerror", 5, quantile_alpha=0.3),
    "reg_quantileerror_multi": quantile_multi,
    "reg_logistic": _objective("reg:logistic", 6),
    "binary_logistic": _objective("binary:logistic", 7, rounds=20),
    "binary_logitraw": _objective("binary:logitraw", 8),
    "binary_hinge": _objective("binary:hinge", 9),
    "count_poisson": _objective("count:poisson", 10),
    "reg_gamma": _objective("reg:gamma", 11),
    "reg_tweedie": _objective("reg:tweedie", 12, tweedie_variance_power=1.3),
    "survival_cox": _objective("survival:cox", 13),
    "survival_aft": survival_aft,
    "multi_softprob": _multiclass("multi:softprob", 14),
    "multi_softmax": _multiclass("multi:softmax", 15, k=3),
    "rank_pairwise": _ranking("rank:pairwise", 16),
    "rank_ndcg": _ranking("rank:ndcg", 17, wrapper=True),
    "rank_map": _ranking("rank:map", 18),
    "multi_target": multi_target,
    "categorical": categorical,
    "categorical_onehot_multiclass": categorical_onehot_multiclass,
    "dart_booster": dart_booster,
    "dart_wrapper_regressor": dart_wrapper_regressor,
    "dart_wrapper_multiclass": dart_wrapper_multiclass,
    "random_forest_booster": random_forest_booster,
    "rf_regressor": rf_regressor,
    "rf_classifier": rf_classifier,
    "early_stopping_regressor": early_stopping_regressor,
    "early_stopping_multiclass": early_stopping_multiclass,
    "wrapper_regressor": wrapper_regressor,
    "wrapper_classifier_binary": wrapper_classifier_binary,
    "wrapper_classifier_multiclass": wrapper_classifier_multiclass,
    "wrapper_classifier_softmax": wrapper_classifier_softmax,
    "wrapper_classifier_categorical": wrapper_classifier_categorical,
    "single_leaf_trees": single_leaf_trees,
    "pruned_exact": pruned_exact,
    "feature_names": feature_names,
    "file_json_multiclass": file_json_multiclass,
    "file_ubj_categorical_dart": file_ubj_categorical_dart,
    "file_ubj_wrapper_early_stopping": file_ubj_wrapper_early_stopping,
    "file_json_plain_base_score": file_json_plain_base_score,
}
