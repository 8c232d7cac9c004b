"""Leaf indices (interp.apply, the reference; Predictor.apply, a native kernel over
interp.leaf_id_forest) against XGBoost's and LightGBM's pred_leaf=True.

The frontends renumber nodes (pruned XGBoost trees, LightGBM's separate leaf numbering, its
zero_as_missing expansion that copies subtrees); Tree.node_ids keeps each library's own ids.
scikit-learn's apply is checked in tests/test_frontend_sklearn_more.py.
"""

from __future__ import annotations

import numpy as np
import pytest

import treecomp
from treecomp import interp
from tests import zoo
from tests.edge import edge_rows

XGB = ["binary_logistic", "multi_softprob", "pruned_exact", "dart_booster", "categorical",
       "random_forest_booster", "single_leaf_trees", "multi_target", "early_stopping_regressor"]
LGB = ["multiclass", "categorical", "no_missing_zeros", "constant",
       "wrapper_regressor_early_stopping", "rf_binary"]


def same(got, want):
    """Values, dtype and shape of the library's own leaf indices."""
    assert isinstance(got, np.ndarray) and got.dtype == want.dtype and got.shape == want.shape, \
        (got.dtype, got.shape, want.dtype, want.shape)
    np.testing.assert_array_equal(got, want)


def _rows(f, X, seed):
    rows = np.vstack([X, edge_rows(f, np.nan_to_num(X, posinf=0.0, neginf=0.0), n=120, seed=seed)])
    return np.where(np.isinf(rows), np.nan, rows)  # XGBoost's DMatrix refuses inf


@pytest.mark.parametrize("name", XGB)
def test_xgboost_pred_leaf(name):
    xgb = pytest.importorskip("xgboost")
    case = zoo.get(f"xgboost:{name}")
    m = case.model
    f = treecomp.parse(m)
    rows = _rows(f, case.X, 1)
    if isinstance(m, xgb.Booster):
        lib = lambda Z: m.predict(xgb.DMatrix(Z, missing=np.nan), pred_leaf=True)  # noqa: E731
    else:  # the wrapper's apply honours best_iteration, as its predict and the IR do
        lib = m.apply
    want = lib(rows)
    ours = interp.apply(f, rows)
    assert ours.shape == (len(rows), f.n_trees) and ours.dtype == np.float32
    same(ours, want)
    p = treecomp.compile(f, backend="arrays")
    for Z in (rows, rows[:1]):  # native kernel over the leaf-id forest
        same(p.apply(Z), lib(Z))
    if name == "pruned_exact":  # renumbered trees keep XGBoost's ids
        assert any(not np.array_equal(t.node_ids, np.arange(t.n_nodes)) for t in f.trees)


@pytest.mark.parametrize("name", LGB)
def test_lightgbm_pred_leaf(name):
    pytest.importorskip("lightgbm")
    case = zoo.get(f"lightgbm:{name}")
    f = treecomp.parse(case.path or case.model)
    rows = np.vstack([case.X, edge_rows(f, case.X, n=120, seed=2)])
    want = case.model.predict(rows, pred_leaf=True)
    same(interp.apply(f, rows), want)
    p = treecomp.compile(f, backend="arrays")
    same(p.apply(rows), want)
    same(p.apply(rows[:1]), case.model.predict(rows[:1], pred_leaf=True))


def test_lightgbm_pred_leaf_through_the_zero_as_missing_expansion():
    lgb = pytest.importorskip("lightgbm")
    rng = np.random.default_rng(8)
    X = rng.normal(size=(300, 4))
    X[rng.random(X.shape) < 0.3] = 0.0
    X[rng.random(X.shape) < 0.05] = np.nan
    y = X[:, 0] + np.nan_to_num(X[:, 1]) + (X[:, 2] == 0) + rng.normal(size=300) * 0.1
    b = lgb.train(dict(verbose=-1, num_threads=1, seed=3, deterministic=True, force_row_wise=True,
                       objective="regression", zero_as_missing=True, num_leaves=8,
                       min_data_in_leaf=5), lgb.Dataset(X, y), 6)
    f = treecomp.parse(b)
    sizes = [2 * t["num_leaves"] - 1 for t in b.dump_model()["tree_info"]]
    assert any(t.n_nodes > s for t, s in zip(f.trees, sizes))  # subtrees were copied
    rows = np.vstack([X, edge_rows(f, X, n=200, seed=3), np.zeros((3, 4)), -np.zeros((3, 4))])
    want = b.predict(rows, pred_leaf=True)
    same(interp.apply(f, rows), want)
    same(treecomp.compile(f, backend="arrays").apply(rows), want)


@pytest.mark.parametrize("params, rounds", [
    ({"objective": "binary:logistic"}, 1),                      # one tree: (n,)
    ({"objective": "reg:squarederror"}, 3),
    ({"objective": "multi:softprob", "num_class": 3}, 1),       # one round, three trees
    ({"objective": "multi:softprob", "num_class": 3}, 2),
    ({"objective": "reg:squarederror", "num_parallel_tree": 2}, 1),
    ({"objective": "multi:softprob", "num_class": 3, "num_parallel_tree": 2}, 2),
    ({"objective": "reg:squarederror", "multi_strategy": "multi_output_tree"}, 1),  # one vector tree
    ({"objective": "reg:squarederror", "multi_strategy": "multi_output_tree"}, 3),
])
def test_xgboost_pred_leaf_shapes(params, rounds):
    """XGBoost 3.2's pred_leaf=True and the wrappers' apply: float32 (n, n_trees), squeezed to
    (n,) for a model of one tree; every tree of every round and class."""
    xgb = pytest.importorskip("xgboost")
    rng = np.random.default_rng(4)
    X = rng.normal(size=(200, 4))
    X[rng.random(X.shape) < 0.05] = np.nan
    y = np.nan_to_num(X[:, 0]) + np.nan_to_num(X[:, 1]) ** 2
    if params["objective"].startswith("multi:"):
        y = np.digitize(y, [0.2, 1.5])
    elif params["objective"].startswith("binary"):
        y = y > 1
    elif "multi_strategy" in params:
        y = np.c_[y, -y]
    b = xgb.train({**params, "max_depth": 3, "tree_method": "hist", "nthread": 1},
                  xgb.DMatrix(X, y), rounds)
    f = treecomp.parse(b)
    p = treecomp.compile(f, backend="arrays")
    for Z in (X, X[:1], X[:3]):
        want = b.predict(xgb.DMatrix(Z, missing=np.nan), pred_leaf=True)
        same(interp.apply(f, Z), want)
        same(p.apply(Z), want)


def test_wrappers_apply_and_pred_leaf_of_one_tree():
    """One-tree models, where the libraries disagree: XGBoost squeezes to (n,), LightGBM keeps
    (n, 1); sklearn's single tree is (n,), its one-tree forest (n, 1)."""
    xgb = pytest.importorskip("xgboost")
    lgb = pytest.importorskip("lightgbm")
    from sklearn.ensemble import RandomForestRegressor
    from sklearn.tree import DecisionTreeRegressor
    rng = np.random.default_rng(5)
    X = rng.normal(size=(150, 3))
    y = X[:, 0] > 0
    models = [(xgb.XGBClassifier(n_estimators=1, max_depth=2).fit(X, y), lambda m, Z: m.apply(Z)),
              (lgb.LGBMClassifier(n_estimators=1, num_leaves=4, verbose=-1).fit(X, y),
               lambda m, Z: m.predict(Z, pred_leaf=True)),
              (DecisionTreeRegressor(max_depth=3).fit(X, X[:, 1]), lambda m, Z: m.apply(Z)),
              (RandomForestRegressor(n_estimators=1, max_depth=3).fit(X, X[:, 1]),
               lambda m, Z: m.apply(Z))]
    for m, lib in models:
        p = treecomp.compile(m, backend="arrays")
        for Z in (X, X[:1]):
            same(p.apply(Z), lib(m, Z))


def test_saved_artifacts_keep_the_layout(tmp_path):
    """apply on a loaded artifact (its embedded IR carries leaf_layout) and on a pickle."""
    import pickle
    xgb = pytest.importorskip("xgboost")
    rng = np.random.default_rng(6)
    X = rng.normal(size=(100, 3))
    m = xgb.XGBRegressor(n_estimators=1, max_depth=2).fit(X, X[:, 0])
    p = treecomp.compile(m, backend="arrays", ir=True)
    p.save(tmp_path / "m.tc")
    for q in (treecomp.load(tmp_path / "m.tc"), pickle.loads(pickle.dumps(p))):
        same(q.apply(X), m.apply(X))
