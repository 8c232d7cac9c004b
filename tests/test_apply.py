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
        want = m.predict(xgb.DMatrix(rows, missing=np.nan), pred_leaf=True)
    else:  # the wrapper's apply honours best_iteration, as its predict and the IR do
        want = m.apply(rows)
    ours = interp.apply(f, rows)
    assert ours.shape == (len(rows), f.n_trees)
    np.testing.assert_array_equal(ours, want.reshape(ours.shape))
    p = treecomp.compile(f, backend="arrays")
    for Z, w in ((rows, ours), (rows[:1], ours[:1])):  # native kernel over the leaf-id forest
        got = p.apply(Z)
        assert got.dtype == np.int64
        np.testing.assert_array_equal(got, w)
    if name == "pruned_exact":  # renumbered trees keep XGBoost's ids
        assert any(not np.array_equal(t.node_ids, np.arange(t.n_nodes)) for t in f.trees)


@pytest.mark.parametrize("name", LGB)
def test_lightgbm_pred_leaf(name):
    pytest.importorskip("lightgbm")
    case = zoo.get(f"lightgbm:{name}")
    f = treecomp.parse(case.path or case.model)
    rows = np.vstack([case.X, edge_rows(f, case.X, n=120, seed=2)])
    ours = interp.apply(f, rows)
    np.testing.assert_array_equal(ours, np.asarray(case.model.predict(rows, pred_leaf=True))
                                  .reshape(ours.shape))
    np.testing.assert_array_equal(treecomp.compile(f, backend="arrays").apply(rows), ours)


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
    np.testing.assert_array_equal(interp.apply(f, rows), want)
    np.testing.assert_array_equal(treecomp.compile(f, backend="arrays").apply(rows), want)
