"""SHAP contributions (treecomp.shap, Predictor.contributions) against XGBoost's pred_contribs,
LightGBM's pred_contrib and the reference TreeSHAP; the bound is documented in treecomp/shap.py
(XGBoost computes in float32: 1e-6 of a row's sum of |contributions|; LightGBM float64)."""

from __future__ import annotations

import numpy as np
import pytest

import treecomp
from treecomp import shap
from treecomp.errors import InvalidModelError, UnsupportedModelError
from treecomp.interp import predict_raw
from treecomp.ir import Forest, Tree

xgb = pytest.importorskip("xgboost")
lgb = pytest.importorskip("lightgbm")


@pytest.fixture(params=["tables", "linear"], autouse=True)
def kernel(request, monkeypatch):
    """Every test runs twice: with tables for the trees whose tables are small (treecomp's
    default on the one-row path; the several-row paths run them a row per lane) and Linear
    TreeSHAP with each node's 1 / g kept with the model for the others, and with Linear TreeSHAP
    for every tree, computing 1 / g per row (no memory kept)."""
    monkeypatch.setattr(shap, "TABLES", request.param == "tables")
    if request.param == "linear":
        monkeypatch.setattr(shap, "TABLE_BUDGET", 0)
        monkeypatch.setattr(shap, "INVERSE_BUDGET", 0)
    return request.param


def close(ours: np.ndarray, lib: np.ndarray, rel: float) -> None:
    """Per row: |ours - lib| <= rel * the row's sum of |values| (the documented bound)."""
    ours, lib = ours.reshape(len(ours), -1), np.asarray(lib, np.float64).reshape(len(lib), -1)
    assert ours.shape == lib.shape
    scale = np.abs(lib).sum(axis=1, keepdims=True)
    assert np.all(np.abs(ours - lib) <= rel * scale), np.abs(ours - lib).max()


def data(n=400, d=6, seed=0, nan=0.1):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)).astype(np.float32)
    y = X[:, 0] * 2 + X[:, 1] ** 2 + X[:, 2] * X[:, 3] + rng.normal(size=n) * 0.1
    X[rng.random(X.shape) < nan] = np.nan
    return X, y


def edge_rows(forest: Forest, X: np.ndarray) -> np.ndarray:
    """Rows with values exactly on thresholds and one float32 ULP either side, plus NaN."""
    rows = X[:30].copy()
    t = forest.trees[0]
    for k, node in enumerate(np.flatnonzero(t.left >= 0)[:10]):
        thr = np.float32(t.threshold[node])
        for j, v in enumerate((thr, np.nextafter(thr, np.float32(-np.inf)), np.nextafter(thr, np.float32(np.inf)))):
            rows[3 * k + j, t.feature[node]] = v
    rows[-1] = np.nan
    return np.ascontiguousarray(np.concatenate([rows, X[30:80]]))


def test_xgboost_regression_nan_and_thresholds():
    X, y = data()
    b = xgb.train({"max_depth": 5, "eta": 0.3, "base_score": 0.7}, xgb.DMatrix(X, y), 25)
    p = treecomp.compile(b, backend="arrays")
    R = edge_rows(p._forest, X)
    c = p.contributions(R)
    assert c.shape == (len(R), X.shape[1] + 1) and c.dtype == np.float64
    dm = xgb.DMatrix(R)
    close(c, b.predict(dm, pred_contribs=True, approx_contribs=False), 1e-6)
    margin = b.predict(dm, output_margin=True)
    # additivity, to XGBoost's float32 rounding of the margin's partial sums
    assert np.all(np.abs(c.sum(axis=1) - margin) <= 1e-6 * np.abs(c).sum(axis=1))
    np.testing.assert_allclose(c, shap.reference_contributions(p._forest, R), rtol=1e-12, atol=1e-12)


def test_xgboost_binary_and_multiclass_layout():
    X, y = data(seed=1)
    Xb = np.ascontiguousarray(X[:60])
    b = xgb.train({"max_depth": 4, "objective": "binary:logistic"}, xgb.DMatrix(X, y > 0.5), 15)
    close(treecomp.compile(b, backend="arrays").contributions(Xb),
          b.predict(xgb.DMatrix(Xb), pred_contribs=True), 1e-6)
    k = np.digitize(y, [0, 1.5])
    m = xgb.train({"max_depth": 4, "objective": "multi:softprob", "num_class": 3},
                  xgb.DMatrix(X, k), 8)
    c = treecomp.compile(m, backend="arrays").contributions(Xb)
    lib = m.predict(xgb.DMatrix(Xb), pred_contribs=True)
    assert c.shape == lib.shape == (60, 3, X.shape[1] + 1)   # XGBoost's layout
    close(c, lib, 1e-6)


def test_lightgbm_regression_binary_multiclass():
    X, y = data(seed=2)
    Xt = np.ascontiguousarray(X[:80])
    params = {"verbose": -1, "num_leaves": 15, "min_data_in_leaf": 5}
    cases = [(lgb.train(params, lgb.Dataset(X, y), 20), 1),
             (lgb.train({**params, "objective": "binary"}, lgb.Dataset(X, y > 0.5), 20), 1),
             (lgb.train({**params, "objective": "multiclass", "num_class": 3},
                        lgb.Dataset(X, np.digitize(y, [0, 1.5])), 10), 3)]
    for booster, k in cases:
        p = treecomp.compile(booster, backend="arrays")
        c = p.contributions(Xt)
        lib = booster.predict(Xt, pred_contrib=True)
        # LightGBM's layout for k outputs: (n, k * (n_features + 1)), each output's block
        assert c.shape == lib.shape and c.dtype == lib.dtype
        close(c, lib, 1e-9)
        raw = booster.predict(Xt, raw_score=True).reshape(len(Xt), k)
        close(c.reshape(len(Xt), k, -1).sum(axis=2), raw, 1e-9)


def test_lightgbm_categorical():
    rng = np.random.default_rng(3)
    X = np.column_stack([rng.integers(0, 12, 500), rng.normal(size=500)]).astype(np.float64)
    y = (X[:, 0] % 3) + X[:, 1] + rng.normal(size=500) * 0.1
    b = lgb.train({"verbose": -1, "num_leaves": 8, "min_data_per_group": 5, "cat_smooth": 1},
                  lgb.Dataset(X, y, categorical_feature=[0]), 10)
    Xt = X[:50].copy()
    Xt[:5, 0] = [np.nan, -1, 40, 2.5, 11]
    p = treecomp.compile(b, backend="arrays")
    assert any(t.has_categorical for t in p._forest.trees)
    close(p.contributions(Xt), b.predict(Xt, pred_contrib=True), 1e-9)


def test_lightgbm_long_paths_repeated_features(kernel):
    """63-leaf trees over 3 features: paths past the tables' length (Linear TreeSHAP), each
    feature split on many times along a path."""
    rng = np.random.default_rng(9)
    X = rng.normal(size=(2000, 3))
    y = np.sin(3 * X[:, 0]) + X[:, 1] * X[:, 2] + rng.normal(size=2000) * 0.1
    X[rng.random(X.shape) < 0.05] = np.nan
    b = lgb.train({"verbose": -1, "num_leaves": 63, "min_data_in_leaf": 3, "max_bin": 255},
                  lgb.Dataset(X, y), 6)
    Xt = np.ascontiguousarray(X[:120])
    p = treecomp.compile(b, backend="arrays")
    c = p.contributions(Xt)
    prep = p.feature_state['explainer'].prep
    assert np.all(prep["tree_nq"] > 0)
    assert np.all(prep["tree_ioff"] >= 0) == (kernel == "tables")   # 1 / g kept, or per row
    assert max(t.max_depth for t in p._forest.trees) > shap.TABLE_MAX_D
    close(c, b.predict(Xt, pred_contrib=True), 1e-12)
    np.testing.assert_allclose(c[:25], shap.reference_contributions(p._forest, Xt[:25]),
                               rtol=1e-9, atol=1e-12)
    close(c.sum(axis=1, keepdims=True), b.predict(Xt, raw_score=True)[:, None], 1e-12)


def chain_forest(depth: int, n_features: int, rng, short: int = 0) -> Forest:
    """A chain (left child a leaf at every level) of `depth` splits, features cycling, twice;
    `short`: the second one has that many splits."""
    n = 2 * depth + 1
    left, right = np.full(n, -1), np.full(n, -1)
    inner = np.arange(0, 2 * depth, 2)
    left[inner], right[inner] = inner + 1, inner + 2
    feat = np.where(left >= 0, np.arange(n) // 2 % n_features, -1)
    cover = np.zeros(n)
    cover[-1] = 3.0
    for i in inner[::-1]:  # a leaf's cover, then each parent the sum of its children
        cover[i + 1] = rng.integers(1, 5)
        cover[i] = cover[i + 1] + cover[i + 2]
    t = Tree(left=left, right=right, feature=feat, threshold=rng.normal(size=n).round(1),
             default_left=rng.random(n) < 0.5, value=np.where(left >= 0, 0, rng.normal(size=n)),
             cover=cover)
    if short:
        t2 = chain_forest(short, n_features, rng).trees[0]
        return Forest(trees=(t, t2), n_features=n_features, n_outputs=1, tree_output=[0, 0],
                      base_score=[0.25], input_dtype="float64", comparison="<=")
    return Forest(trees=(t, t), n_features=n_features, n_outputs=1, tree_output=[0, 0],
                  base_score=[0.25], input_dtype="float64", comparison="<=")


@pytest.mark.parametrize("n_features", [30, 7])  # 30 distinct features: per-row recurrences
def test_deep_chain_kernel_vs_reference(n_features, kernel):
    rng = np.random.default_rng(4)
    f = chain_forest(30, n_features, rng, short=5)
    X = rng.normal(size=(40, n_features)) * 0.8
    X[rng.random(X.shape) < 0.1] = np.nan
    p = treecomp.compile(f, backend="arrays")
    c = p.contributions(X)
    # the long chain runs Linear TreeSHAP; the short one a table unless they are turned off
    assert list(p.feature_state['explainer'].prep["tree_nq"] > 0) == [True, kernel == "linear"]
    np.testing.assert_allclose(c, shap.reference_contributions(f, X), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(c.sum(axis=1), predict_raw(f, X)[:, 0], rtol=1e-9, atol=1e-12)


def test_zero_cover_leaf():
    """A leaf with zero training cover: rows that do not reach it get nothing from it (its
    cover ratio is 0), rows that do get their Shapley values; as the reference computes."""
    rng = np.random.default_rng(10)
    f = chain_forest(14, 5, rng)
    t = f.trees[0]
    cover = t.cover.copy()
    leaf = 2 * 9 + 1  # the left leaf under the 10th split
    cover[:leaf][t.left[:leaf] >= 0] -= cover[leaf]
    cover[leaf] = 0.0
    t0 = Tree(left=t.left, right=t.right, feature=t.feature, threshold=t.threshold,
              default_left=t.default_left, value=t.value, cover=cover)
    f = f.replace(trees=(t0, t))
    X = rng.normal(size=(60, 5)) * 0.8
    X[:20] = np.where(np.arange(5) == t.feature[leaf - 1], t.threshold[leaf - 1] - 1, 9.0)
    c = treecomp.compile(f, backend="arrays").contributions(X)
    assert np.isfinite(c).all()
    np.testing.assert_allclose(c, shap.reference_contributions(f, X), rtol=1e-9, atol=1e-12)


def test_threads_split_rows_identically():
    X, y = data(n=300, seed=5)
    b = xgb.train({"max_depth": 6}, xgb.DMatrix(X, y), 10)
    p = treecomp.compile(b, backend="arrays")
    assert p.contributions(X, n_threads=1).tobytes() == p.contributions(X, n_threads=4).tobytes()


def test_cover_is_optional_serialised_and_validated(tmp_path):
    X, y = data(n=200, seed=6)
    f = treecomp.frontends.parse(xgb.train({"max_depth": 3}, xgb.DMatrix(X, y), 3))
    assert all(t.cover is not None for t in f.trees)
    g = Forest.from_bytes(f.to_bytes())
    assert all(np.array_equal(a.cover, b.cover) for a, b in zip(f.trees, g.trees))
    assert g.digest() == f.digest()
    bare = f.replace(trees=tuple(Tree(**{k: getattr(t, k) for k in (
        "left", "right", "feature", "threshold", "default_left", "value")}) for t in f.trees))
    assert bare.digest() != f.digest()
    assert all(t.cover is None for t in Forest.from_bytes(bare.to_bytes()).trees)
    with pytest.raises(UnsupportedModelError, match="cover"):
        treecomp.compile(bare, backend="arrays").contributions(X[:3])
    t = f.trees[0]
    for bad in (-t.cover, t.cover[:-1], np.where(t.left >= 0, np.nan, t.cover)):
        with pytest.raises(InvalidModelError, match="cover"):
            Tree(left=t.left, right=t.right, feature=t.feature, threshold=t.threshold,
                 default_left=t.default_left, value=t.value, cover=bad)
    p = treecomp.compile(f, backend="arrays", ir=True)
    p.save(tmp_path / "m.tc")  # carries the IR, covers included
    np.testing.assert_array_equal(treecomp.load(tmp_path / "m.tc").contributions(X[:3]),
                                  p.contributions(X[:3]))
    treecomp.compile(f, backend="arrays").save(tmp_path / "bare.tc")  # the default: no IR
    with pytest.raises(UnsupportedModelError, match="artifact"):
        treecomp.load(tmp_path / "bare.tc").contributions(X[:3])


def test_sklearn_random_forest_and_gradient_boosting():
    from sklearn.ensemble import GradientBoostingClassifier, RandomForestClassifier, RandomForestRegressor
    X, y = data(n=300, seed=7, nan=0)
    Xt = np.ascontiguousarray(X[:40])
    for model in (RandomForestRegressor(n_estimators=4, max_depth=7, random_state=0).fit(X, y),
                  GradientBoostingClassifier(n_estimators=5, max_depth=3).fit(X, y > 0.5),
                  RandomForestClassifier(n_estimators=3, max_depth=6, random_state=0).fit(
                      X, np.digitize(y, [0, 1.5]))):  # vector leaves: 3 outputs per tree
        p = treecomp.compile(model, backend="arrays")
        c = p.contributions(Xt)
        np.testing.assert_allclose(c, shap.reference_contributions(p._forest, Xt), rtol=1e-9, atol=1e-12)
        raw = predict_raw(p._forest, Xt)
        np.testing.assert_allclose(c.sum(axis=-1).reshape(raw.shape), raw, rtol=1e-9, atol=1e-12)


def test_refused_where_no_library_cover_exists():
    """LightGBM zero_as_missing splits that treecomp expands into synthetic nodes, and XGBoost
    vector-leaf trees (no SHAP in XGBoost either), carry no cover: refused, never guessed."""
    rng = np.random.default_rng(8)
    X = rng.normal(size=(300, 3))
    X[rng.random(X.shape) < 0.2] = 0
    y = X[:, 0] + (X[:, 1] == 0) * 3 + rng.normal(size=300) * 0.1
    zam = lgb.train({"verbose": -1, "zero_as_missing": True, "num_leaves": 8}, lgb.Dataset(X, y), 3)
    vec = xgb.XGBRegressor(n_estimators=2, max_depth=3, tree_method="hist",
                           multi_strategy="multi_output_tree").fit(X, np.column_stack([y, -y]))
    for model in (zam, vec):
        with pytest.raises(UnsupportedModelError, match="cover"):
            treecomp.compile(model, backend="arrays").contributions(X[:2])


def isa_paths() -> list[str]:
    from treecomp.backends.arrays.native import native_isas
    return native_isas()


def test_row_groups_every_isa_bitwise_equal_to_one_row_path(kernel):
    """The several-row kernels (a row per vector lane: 4 with AVX2, NEON and SVE, 8 with
    AVX-512; the aarch64 lane runs this test on its emulated host), forced one
    by one, against the one-row path bit for bit and the libraries within the bound: row counts
    around the groups (1, 7, 8, 9, 17), NaN rows, rows on thresholds, categories, several
    outputs, vector leaves, an averaged forest."""
    from sklearn.ensemble import RandomForestClassifier
    X, y = data(n=300, seed=11)
    b = xgb.train({"max_depth": 6, "base_score": 0.2, "nthread": 1}, xgb.DMatrix(X, y), 12)
    R = edge_rows(treecomp.compile(b, backend="arrays")._forest, X)
    R[3] = np.nan
    rng = np.random.default_rng(12)
    Xc = np.column_stack([rng.integers(0, 12, 400), rng.normal(size=400)]).astype(np.float64)
    yc = np.digitize((Xc[:, 0] % 3) + Xc[:, 1], [0.5, 2])
    Xct = Xc[:40].copy()
    Xct[:6, 0] = [np.nan, -1, 40, 2.5, 11, 0]
    Xct[6:9, 1] = np.nan
    mc = lgb.train({"verbose": -1, "num_leaves": 8, "min_data_per_group": 5, "cat_smooth": 1,
                    "objective": "multiclass", "num_class": 3, "num_threads": 1},
                   lgb.Dataset(Xc, yc, categorical_feature=[0]), 5)
    rf = RandomForestClassifier(n_estimators=3, max_depth=6, random_state=0).fit(
        np.nan_to_num(X), np.digitize(y, [0, 1.5]))
    cases = [(b, R, lambda Z: b.predict(xgb.DMatrix(Z), pred_contribs=True), 1e-6),
             (mc, Xct, lambda Z: mc.predict(Z, pred_contrib=True), 1e-9),
             (rf, np.nan_to_num(R), None, 0)]
    isas = isa_paths()
    for model, Z, lib, rel in cases:
        p = treecomp.compile(model, backend="arrays")
        if isinstance(model, lgb.Booster):
            assert any(t.has_categorical for t in p._forest.trees)
        ex = {isa: shap.Explainer(p._forest, isa=isa) for isa in isas}
        nq = ex["scalar"].prep["tree_nq"]
        # "linear": Linear TreeSHAP for every tree; "tables": tables for these small trees
        assert np.all(nq > 0) if kernel == "linear" else np.any(nq == 0)
        ref = shap.reference_contributions(p._forest, Z[:17]) if lib is None else None
        for n in (1, 7, 8, 9, 17, len(Z)):
            Zn = np.ascontiguousarray(Z[:n])
            one = ex["scalar"].contributions(Zn, 1, None)
            for isa in isas[1:]:
                assert ex[isa].contributions(Zn, 1, None).tobytes() == one.tobytes(), (isa, n)
            if lib is not None:
                close(one, lib(Zn), rel)
            elif n <= len(ref):
                np.testing.assert_allclose(one, ref[:n], rtol=1e-9, atol=1e-12)
        # Predictor.contributions runs the best path here
        assert p.contributions(Z[:2]) is not None and p.feature_state['explainer'].isa == isas[-1]


def test_default_tables_only_on_the_one_row_path(monkeypatch):
    """By default (TABLES None) the one-row path uses tables where they fit and the several-row
    paths run Linear TreeSHAP for every tree: the same values to rounding. (Under "linear" the
    several-row paths compute 1 / g per row.)"""
    monkeypatch.setattr(shap, "TABLES", None)
    monkeypatch.setattr(shap, "TABLE_BUDGET", 256 << 20)
    X, y = data(n=300, seed=14)
    b = xgb.train({"max_depth": 4, "nthread": 1}, xgb.DMatrix(X, y), 10)
    f = treecomp.compile(b, backend="arrays")._forest
    R = edge_rows(f, X)
    isas = isa_paths()
    ex = {isa: shap.Explainer(f, isa=isa) for isa in isas}
    assert [e.tables for e in ex.values()] == [isa == "scalar" for isa in isas]
    assert np.all(ex["scalar"].prep["tree_nq"] == 0)
    one = ex["scalar"].contributions(R, 1, None)
    close(one, b.predict(xgb.DMatrix(R), pred_contribs=True), 1e-6)
    for isa in isas[1:]:
        assert np.all(ex[isa].prep["tree_nq"] > 0)
        close(ex[isa].contributions(R, 1, None), one, 1e-14)


def test_isa_argument_validated():
    X, y = data(n=100, seed=13)
    f = treecomp.compile(xgb.train({"max_depth": 2, "nthread": 1}, xgb.DMatrix(X, y), 2),
                         backend="arrays")._forest
    for bad in ("avx9", "numpy", "llvm"):
        with pytest.raises(ValueError, match="isa"):
            shap.Explainer(f, isa=bad)
