"""scikit-learn cases of the test zoo: small, seeded models of every supported estimator.

Each factory trains one model on seeded synthetic data (a few hundred rows, <= 20 trees) and
returns a :class:`tests.zoo.Case` whose ``library`` holds the estimator's own predict /
predict_proba / decision_function. Covered: single trees (regression, binary, multiclass with
string labels, NaN in training, single leaf, a depth-79 chain, multi-output), random forests and
extra trees (same variety, multi-output classifiers whose targets have different class counts),
GradientBoosting with every loss and init kind (default Dummy, 'zero', user Dummy, early
stopping), HistGradientBoosting with every loss, NaN, categorical features (non-contiguous raw
categories; rows with unknown, negative, >= 256 and NaN categories), multiclass and early
stopping; AdaBoostClassifier (binary, string labels, 9 classes over extra trees),
AdaBoostRegressor (trees, extra trees with tied predictions) and
IsolationForest (feature and row subsampling with NaN, contamination with bootstrap).
"""

from __future__ import annotations

import numpy as np
from sklearn.datasets import make_classification, make_regression
from sklearn.dummy import DummyRegressor
from sklearn.ensemble import (AdaBoostClassifier, AdaBoostRegressor, ExtraTreesClassifier, ExtraTreesRegressor,
                              GradientBoostingClassifier, GradientBoostingRegressor,
                              HistGradientBoostingClassifier, HistGradientBoostingRegressor,
                              IsolationForest, RandomForestClassifier, RandomForestRegressor)
from sklearn.tree import (DecisionTreeClassifier, DecisionTreeRegressor, ExtraTreeClassifier,
                          ExtraTreeRegressor)
from threadpoolctl import threadpool_limits

from tests.zoo import Case

N = 300
NAMES = np.array(["ant", "bee", "cat", "dog", "eel"])


def _reg(seed=0, n=N, d=6, targets=1):
    X, y = make_regression(n_samples=n, n_features=d, n_informative=4, n_targets=targets,
                           noise=5.0, random_state=seed)
    return X, y


def _clf(seed=0, n=N, d=6, k=2):
    X, y = make_classification(n_samples=n, n_features=d, n_informative=4, n_redundant=1,
                               n_classes=k, n_clusters_per_class=1, random_state=seed)
    return X, y


def _with_nan(X, seed=0, frac=0.15, cols=(0, 2)):
    X = X.copy()
    rng = np.random.default_rng(seed)
    for c in cols:
        X[rng.random(len(X)) < frac, c] = np.nan
    return X


def _fit(model, X, y):
    # one OpenMP thread: HistGradientBoosting's thread pool only slows small fits on a busy
    # machine (its results do not depend on the thread count)
    with threadpool_limits(1, user_api="openmp"):
        return model.fit(X, y)


def _case(model, X):
    lib = {"predict": model.predict}
    if hasattr(model, "predict_proba") and hasattr(model, "classes_"):
        lib["predict_proba"] = model.predict_proba
    if hasattr(model, "decision_function"):
        lib["raw"] = model.decision_function
    return Case(model=model, X=np.asarray(X, np.float64), library=lib)


# -- single trees ------------------------------------------------------------------------------
def dt_reg():
    X, y = _reg(1)
    return _case(DecisionTreeRegressor(max_depth=8, random_state=0).fit(X, y), X)


def dt_clf_binary():
    X, y = _clf(2)
    return _case(DecisionTreeClassifier(max_depth=7, random_state=0).fit(X, y), X)


def dt_clf_multiclass_str():
    X, y = _clf(3, k=4)
    return _case(DecisionTreeClassifier(max_depth=8, random_state=0).fit(X, NAMES[y]), X)


def dt_reg_nan():
    X, y = _reg(4)
    X = _with_nan(X, 4)
    return _case(DecisionTreeRegressor(max_depth=8, random_state=0).fit(X, y), X)


def dt_clf_nan():
    X, y = _clf(5, k=3)
    X = _with_nan(X, 5, frac=0.25)
    return _case(DecisionTreeClassifier(max_depth=8, random_state=0).fit(X, y), X)


def dt_single_leaf():
    X, _ = _reg(6)
    return _case(DecisionTreeRegressor().fit(X, np.full(len(X), 3.25)), X)


def dt_clf_single_class():
    X, _ = _clf(7)
    return _case(DecisionTreeClassifier().fit(X, np.array(["only"] * len(X))), X)


def dt_deep_chain():
    # y = 3**i on x = i: every best split peels off the largest point -> a chain of depth 79
    x = np.arange(80.0)[:, None]
    y = 3.0 ** np.arange(80)
    m = DecisionTreeRegressor(random_state=0).fit(x, y)
    assert m.get_depth() >= 60
    return _case(m, x)


def dt_clf_deep_alternating():
    x = np.arange(100.0)[:, None]
    y = np.arange(100) % 2
    m = DecisionTreeClassifier(random_state=0).fit(x, y)
    assert m.get_depth() >= 60
    return _case(m, x)


def dt_reg_multioutput():
    X, y = _reg(8, targets=3)
    return _case(DecisionTreeRegressor(max_depth=6, random_state=0).fit(X, y), X)


def dt_clf_multioutput():
    X, y = _clf(9, k=4)
    Y = np.c_[y % 2, y, (y * 7 + (X[:, 0] > 0)) % 3]  # 2, 4 and 3 classes (padded value array)
    return _case(DecisionTreeClassifier(max_depth=6, random_state=0).fit(X, Y), X)


def extra_tree_reg():
    X, y = _reg(10)
    return _case(ExtraTreeRegressor(max_depth=10, random_state=0).fit(X, y), X)


def extra_tree_clf_nan():
    X, y = _clf(11, k=3)
    X = _with_nan(X, 11)
    return _case(ExtraTreeClassifier(max_depth=10, random_state=0).fit(X, y), X)


def extra_tree_reg_best_splitter():
    # splitter="best": sklearn's tags then refuse NaN at predict time (allow_nan=False)
    X, y = _reg(12)
    return _case(ExtraTreeRegressor(splitter="best", max_depth=6, random_state=0).fit(X, y), X)


# -- forests -----------------------------------------------------------------------------------
def rf_reg():
    X, y = _reg(20)
    return _case(RandomForestRegressor(n_estimators=12, max_depth=7, random_state=0).fit(X, y), X)


def rf_reg_nan():
    X, y = _reg(21)
    X = _with_nan(X, 21)
    return _case(RandomForestRegressor(n_estimators=10, max_depth=7, random_state=0).fit(X, y), X)


def rf_clf_binary():
    X, y = _clf(22)
    return _case(RandomForestClassifier(n_estimators=15, max_depth=6, random_state=0).fit(X, y), X)


def rf_clf_multiclass_str():
    X, y = _clf(23, k=5)
    m = RandomForestClassifier(n_estimators=12, max_depth=8, random_state=0).fit(X, NAMES[y])
    return _case(m, X)


def rf_clf_nan():
    X, y = _clf(24, k=3)
    X = _with_nan(X, 24, frac=0.3, cols=(0, 1, 3))
    return _case(RandomForestClassifier(n_estimators=10, max_depth=8, random_state=0).fit(X, y), X)


def rf_clf_unbounded_depth():
    X, y = _clf(25, k=3)
    m = RandomForestClassifier(n_estimators=5, random_state=0, bootstrap=False,
                               max_features=None).fit(X, y)
    return _case(m, X)


def rf_reg_multioutput():
    X, y = _reg(26, targets=2)
    m = RandomForestRegressor(n_estimators=8, max_depth=6, random_state=0).fit(X, y)
    return _case(m, X)


def rf_clf_multioutput():
    X, y = _clf(27, k=3)
    Y = np.c_[y, (X[:, 1] > 0).astype(int) + 2 * (X[:, 2] > 0.5) + 3 * (X[:, 0] > 1)]
    m = RandomForestClassifier(n_estimators=8, max_depth=6, random_state=0).fit(X, Y)
    return _case(m, X)


def et_reg():
    X, y = _reg(28)
    return _case(ExtraTreesRegressor(n_estimators=10, max_depth=8, random_state=0).fit(X, y), X)


def et_clf():
    X, y = _clf(29, k=3)
    return _case(ExtraTreesClassifier(n_estimators=10, max_depth=8, random_state=0).fit(X, y), X)


def et_clf_nan():
    X, y = _clf(30)
    X = _with_nan(X, 30)
    return _case(ExtraTreesClassifier(n_estimators=10, max_depth=8, random_state=0).fit(X, y), X)


# -- GradientBoosting --------------------------------------------------------------------------
def _gbr(loss, seed, **kw):
    X, y = _reg(seed)
    m = GradientBoostingRegressor(loss=loss, n_estimators=15, max_depth=3, learning_rate=0.2,
                                  random_state=0, **kw).fit(X, y)
    return _case(m, X)


def gb_reg_squared_error():
    return _gbr("squared_error", 40)


def gb_reg_absolute_error():
    return _gbr("absolute_error", 41)


def gb_reg_huber():
    return _gbr("huber", 42, alpha=0.8)


def gb_reg_quantile():
    return _gbr("quantile", 43, alpha=0.3)


def gb_reg_init_zero():
    return _gbr("squared_error", 44, init="zero", subsample=0.7)


def gb_reg_init_dummy_median():
    return _gbr("squared_error", 45, init=DummyRegressor(strategy="median"))


def gb_reg_early_stopped():
    X, y = _reg(46)
    m = GradientBoostingRegressor(n_estimators=200, max_depth=2, learning_rate=0.5,
                                  n_iter_no_change=2, validation_fraction=0.3, tol=1e-1,
                                  random_state=0).fit(X, y)
    assert m.n_estimators_ < 200
    return _case(m, X)


def gb_clf_binary():
    X, y = _clf(47)
    m = GradientBoostingClassifier(n_estimators=15, max_depth=3, random_state=0).fit(X, y)
    return _case(m, X)


def gb_clf_binary_str():
    X, y = _clf(48)
    m = GradientBoostingClassifier(n_estimators=10, max_depth=2, learning_rate=0.3,
                                   random_state=0).fit(X, NAMES[y + 2])
    return _case(m, X)


def gb_clf_exponential():
    X, y = _clf(49)
    m = GradientBoostingClassifier(loss="exponential", n_estimators=15, max_depth=3,
                                   random_state=0).fit(X, y)
    return _case(m, X)


def gb_clf_multiclass():
    X, y = _clf(50, k=3)
    m = GradientBoostingClassifier(n_estimators=8, max_depth=3, random_state=0).fit(X, NAMES[y])
    return _case(m, X)


def gb_clf_many_classes():
    # 9 classes: sklearn's softmax sums >= 8 C-ordered columns pairwise
    X, y = _clf(51, n=450, d=8, k=9)
    m = GradientBoostingClassifier(n_estimators=3, max_depth=2, random_state=0).fit(X, y)
    return _case(m, X)


# -- HistGradientBoosting ----------------------------------------------------------------------
def _hgbr(loss, seed, y_map=None, **kw):
    X, y = _reg(seed)
    if y_map is not None:
        y = y_map(y)
    m = _fit(HistGradientBoostingRegressor(loss=loss, max_iter=15, max_leaf_nodes=15,
                                           random_state=0, **kw), X, y)
    return _case(m, X)


def hgb_reg_squared_error():
    return _hgbr("squared_error", 60)


def hgb_reg_absolute_error():
    return _hgbr("absolute_error", 61)


def hgb_reg_quantile():
    return _hgbr("quantile", 62, quantile=0.8)


def hgb_reg_poisson():
    return _hgbr("poisson", 63, y_map=lambda y: np.floor(np.exp(y / 100.0) * 3))


def hgb_reg_gamma():
    return _hgbr("gamma", 64, y_map=lambda y: np.exp(y / 80.0))


def hgb_reg_nan():
    X, y = _reg(65)
    X = _with_nan(X, 65, frac=0.2)
    m = _fit(HistGradientBoostingRegressor(max_iter=15, random_state=0), X, y)
    return _case(m, X)


def hgb_reg_early_stopped():
    X, y = _reg(66, n=400)
    m = _fit(HistGradientBoostingRegressor(max_iter=300, learning_rate=0.5, early_stopping=True,
                                           n_iter_no_change=2, validation_fraction=0.3,
                                           random_state=0), X, y)
    assert m.n_iter_ < 300
    return _case(m, X)


def hgb_clf_binary():
    X, y = _clf(67)
    m = _fit(HistGradientBoostingClassifier(max_iter=15, max_leaf_nodes=10, random_state=0), X, y)
    return _case(m, X)


def hgb_clf_binary_nan_str():
    X, y = _clf(68)
    X = _with_nan(X, 68, frac=0.25)
    m = _fit(HistGradientBoostingClassifier(max_iter=12, random_state=0), X, NAMES[y])
    return _case(m, X)


def hgb_clf_multiclass():
    X, y = _clf(69, k=4)
    m = _fit(HistGradientBoostingClassifier(max_iter=8, max_leaf_nodes=8, random_state=0), X, y)
    return _case(m, X)


def _categorical_data(seed, n=N):
    """Column 0: raw categories {0, 2, 5, 7, 11, 30, 200}; column 3: {1..6} with NaN."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 5))
    c0 = rng.choice([0, 2, 5, 7, 11, 30, 200], size=n)
    c3 = rng.integers(1, 7, size=n).astype(float)
    c3[rng.random(n) < 0.1] = np.nan
    X[:, 0], X[:, 3] = c0, c3
    effect0 = np.isin(c0, [2, 11, 200]) * 2.0 - (c0 == 30) * 1.5
    effect3 = np.where(np.isnan(c3), 1.0, np.isin(c3, [2, 3]) * -1.7)
    return X, effect0 + effect3 + 0.5 * X[:, 1] + 0.1 * rng.normal(size=n)


def _with_unknown_categories(X, seed):
    """Extra rows: categories never seen in training, negative, >= 256, -0.0."""
    rng = np.random.default_rng(seed)
    extra = X[rng.integers(0, len(X), 40)].copy()
    extra[:, 0] = rng.choice([1, 3, 4, 9, 255, 256, 300, -1, -0.0, 1e9], size=40)
    extra[:10, 3] = rng.choice([0, 7, 100, -3], size=10)
    return np.vstack([X, extra])


def hgb_reg_categorical():
    X, y = _categorical_data(70)
    m = _fit(HistGradientBoostingRegressor(max_iter=12, categorical_features=[0, 3],
                                           random_state=0), X, y)
    return _case(m, _with_unknown_categories(X, 70))


def hgb_clf_categorical():
    X, y = _categorical_data(71)
    m = _fit(HistGradientBoostingClassifier(
        max_iter=12, categorical_features=[False, False, False, True, False], random_state=0),
        X, y > np.median(y))
    return _case(m, _with_unknown_categories(X, 71))


def hgb_clf_multiclass_categorical():
    X, y = _categorical_data(72, n=400)
    yc = np.digitize(y, np.quantile(y, [0.33, 0.66]))
    m = _fit(HistGradientBoostingClassifier(max_iter=6, max_leaf_nodes=12,
                                            categorical_features=[0, 3], random_state=0), X, yc)
    return _case(m, _with_unknown_categories(X, 72))


# -- AdaBoostClassifier (SAMME) and IsolationForest ---------------------------------------------
def ada_clf_binary():
    X, y = _clf(81)
    return _case(AdaBoostClassifier(n_estimators=12, random_state=0).fit(X, y), X)


def ada_clf_multiclass_str():
    X, y = _clf(82, k=4)
    m = AdaBoostClassifier(DecisionTreeClassifier(max_depth=3), n_estimators=10, learning_rate=0.7,
                           random_state=0).fit(X, NAMES[y])
    return _case(m, X)


def ada_clf_many_classes_extra_trees():
    # 9 classes: sklearn's softmax sums them pairwise for one row, left to right for more
    X, y = _clf(83, d=8, k=9)
    m = AdaBoostClassifier(ExtraTreeClassifier(max_depth=5, random_state=0), n_estimators=8,
                           random_state=0).fit(X, y)
    return _case(m, X)


def ada_reg():
    X, y = _reg(86)
    return _case(AdaBoostRegressor(n_estimators=12, random_state=0).fit(X, y), X)


def ada_reg_ties_extra_trees():
    # a coarse target: many trees predict the same value for a row (argsort ties)
    X, y = _reg(87, d=5)
    m = AdaBoostRegressor(ExtraTreeRegressor(max_depth=3, random_state=0), n_estimators=10,
                          loss="square", random_state=0).fit(X, np.round(y / 60))
    return _case(m, X)


def iforest_subsampled():
    X, _ = _clf(84)
    X = _with_nan(X, 84, frac=0.05)
    m = IsolationForest(n_estimators=10, max_samples=40, max_features=0.5, random_state=0).fit(X)
    return _case(m, X)


def iforest_contamination_bootstrap():
    X, _ = _clf(85, d=5)
    m = IsolationForest(n_estimators=8, max_samples=1.0, contamination=0.1, bootstrap=True,
                        random_state=0).fit(X)
    return _case(m, X)


CASES = {f.__name__: f for f in [
    dt_reg, dt_clf_binary, dt_clf_multiclass_str, dt_reg_nan, dt_clf_nan, dt_single_leaf,
    dt_clf_single_class, dt_deep_chain, dt_clf_deep_alternating, dt_reg_multioutput,
    dt_clf_multioutput, extra_tree_reg, extra_tree_clf_nan, extra_tree_reg_best_splitter,
    rf_reg, rf_reg_nan, rf_clf_binary, rf_clf_multiclass_str, rf_clf_nan, rf_clf_unbounded_depth,
    rf_reg_multioutput, rf_clf_multioutput, et_reg, et_clf, et_clf_nan,
    gb_reg_squared_error, gb_reg_absolute_error, gb_reg_huber, gb_reg_quantile, gb_reg_init_zero,
    gb_reg_init_dummy_median, gb_reg_early_stopped, gb_clf_binary, gb_clf_binary_str,
    gb_clf_exponential, gb_clf_multiclass, gb_clf_many_classes,
    hgb_reg_squared_error, hgb_reg_absolute_error, hgb_reg_quantile, hgb_reg_poisson,
    hgb_reg_gamma, hgb_reg_nan, hgb_reg_early_stopped, hgb_clf_binary, hgb_clf_binary_nan_str,
    hgb_clf_multiclass, hgb_reg_categorical, hgb_clf_categorical,
    hgb_clf_multiclass_categorical, ada_clf_binary, ada_clf_multiclass_str,
    ada_clf_many_classes_extra_trees, ada_reg, ada_reg_ties_extra_trees, iforest_subsampled, iforest_contamination_bootstrap,
]}
