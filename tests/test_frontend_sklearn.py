"""The scikit-learn frontend, differentially against the installed scikit-learn (1.9.1).

Every zoo case is parsed and the reference interpreter's predict / predict_proba /
decision_function must equal sklearn's bit for bit (values and dtype), on the case's rows and on
edge rows (thresholds, 1 ULP either side, NaN, +/-inf, -0.0). sklearn's trees, forests and
GradientBoosting reject +/-inf (and HGB's category encoder rejects it in categorical columns);
for those rows sklearn is fed +/-(largest finite value of the input dtype) instead, which goes the
same way as +/-inf at every node of these models (a threshold is a finite midpoint of two
training values, or +inf where sklearn sends every non-missing value left; a huge category value
is an unknown category, like inf). treecomp thus answers inf rows
exactly as sklearn answers the nearest finite rows.
"""

from __future__ import annotations

import pickle

import numpy as np
import pytest
import sklearn
from hypothesis import given
from hypothesis import strategies as st
from threadpoolctl import threadpool_limits

import treecomp
from treecomp import interp, ir
from treecomp.errors import InvalidModelError, NotFittedError, UnsupportedModelError
from treecomp.frontends import sklearn as sk_frontend
from tests import zoo
from tests.edge import edge_rows

# sklearn's input validation sums X, which warns on rows holding both inf and -inf
pytestmark = pytest.mark.filterwarnings("ignore:invalid value encountered in reduce:RuntimeWarning")

CASES = zoo.names("sklearn")
OURS = {"predict": interp.predict, "predict_proba": interp.predict_proba,
        "raw": interp.decision_function}


@pytest.fixture(autouse=True)
def _one_openmp_thread():
    """HistGradientBoosting predicts through OpenMP; on a small, busy machine one thread is
    much faster for these tiny inputs (results do not depend on the thread count)."""
    with threadpool_limits(1, user_api="openmp"):
        yield


def _assert_same(ours, theirs):
    if isinstance(theirs, list):  # multi-output predict_proba
        assert isinstance(ours, list) and len(ours) == len(theirs)
        for a, b in zip(ours, theirs):
            _assert_same(a, b)
        return
    assert isinstance(ours, np.ndarray)
    assert ours.dtype == theirs.dtype, (ours.dtype, theirs.dtype)
    np.testing.assert_array_equal(ours, theirs)


def _finite_stand_in(forest, rows):
    big = np.finfo(forest.input_dtype).max.astype(np.float64)
    return np.where(np.isinf(rows), np.sign(rows) * big, rows)


def _library(fn, forest, rows):
    """sklearn's output on rows; +/-inf replaced by +/-max finite where sklearn refuses inf."""
    try:
        return fn(rows)
    except ValueError as exc:
        if "infinity" not in str(exc) or not np.isinf(rows).any():
            raise
        return fn(_finite_stand_in(forest, rows))


@pytest.mark.parametrize("name", CASES)
def test_zoo_case_bit_exact(name):
    case = zoo.get(name)
    model = case.model
    f = treecomp.parse(model)
    assert f.provenance == f"sklearn {sklearn.__version__} {type(model).__name__}"
    assert f.n_features == model.n_features_in_
    if f.is_classifier:
        labels = model.classes_ if getattr(model, "n_outputs_", 1) == 1 else None
        for ours, theirs in zip(f.classes, [labels] if labels is not None else model.classes_):
            assert ours.dtype == np.asarray(theirs).dtype
            np.testing.assert_array_equal(ours, theirs)
    rows = edge_rows(f, case.X, nan=f.allow_nan)
    # +/-inf only where sklearn takes it (HGB's numeric features; test_infinity_refused_... )
    assert np.isinf(rows).any() == (len(f.reject_inf) < f.n_features)
    assert np.isnan(rows).any() == f.allow_nan
    for key, fn in case.library.items():
        _assert_same(OURS[key](f, case.X), fn(case.X))
        _assert_same(OURS[key](f, rows), _library(fn, f, rows))
    g = ir.Forest.from_bytes(f.to_bytes())
    assert g.digest() == f.digest()
    np.testing.assert_array_equal(interp.predict_raw(g, rows), interp.predict_raw(f, rows))


@pytest.mark.parametrize("name", ["dt_clf_nan", "dt_deep_chain", "rf_clf_multioutput",
                                  "gb_clf_multiclass", "hgb_reg_categorical", "hgb_clf_binary_nan_str"])
def test_walk_equals_predict_raw(name):
    case = zoo.get(f"sklearn:{name}")
    f = treecomp.parse(case.model)
    X = np.vstack([case.X[:40], edge_rows(f, case.X, n=60, nan=f.allow_nan)])
    np.testing.assert_array_equal(interp.walk_raw(f, X), interp.predict_raw(f, X))


# -- semantics pinned explicitly -----------------------------------------------------------------
def test_allow_nan_follows_sklearn():
    for name, allowed in [("dt_reg", True), ("extra_tree_clf_nan", True), ("rf_reg", True),
                          ("et_clf", True), ("extra_tree_reg_best_splitter", False),
                          ("gb_reg_squared_error", False), ("gb_clf_binary", False),
                          ("hgb_reg_squared_error", True)]:
        case = zoo.get(f"sklearn:{name}")
        f = treecomp.parse(case.model)
        assert f.allow_nan is allowed, name
        X = case.X[:5].copy()
        X[0, 0] = np.nan
        if allowed:
            _assert_same(interp.predict(f, X), case.model.predict(X))
        else:
            with pytest.raises(ValueError, match="NaN"):
                case.model.predict(X)
            with pytest.raises(ValueError, match="NaN"):
                interp.predict(f, X)


def test_sklearn_rejects_inf_but_hgb_takes_it():
    tree = zoo.get("sklearn:dt_reg").model
    X = zoo.get("sklearn:dt_reg").X[:3].copy()
    X[0, 1] = np.inf
    with pytest.raises(ValueError, match="infinity"):
        tree.predict(X)
    hgb = zoo.get("sklearn:hgb_reg_nan")
    X = hgb.X[:3].copy()
    X[:, 1] = [np.inf, -np.inf, 1e308]
    _assert_same(interp.predict(treecomp.parse(hgb.model), X), hgb.model.predict(X))


def test_classifier_leaves_are_stored_fractions():
    # sklearn 1.9.1 predict_proba returns tree_.value as stored (no normalisation at predict)
    m = zoo.get("sklearn:dt_clf_multiclass_str").model
    f = treecomp.parse(m)
    leaves = m.tree_.children_left == -1
    np.testing.assert_array_equal(f.trees[0].value[leaves], m.tree_.value[leaves, 0, :])
    np.testing.assert_allclose(f.trees[0].value[leaves].sum(axis=1), 1.0)


def test_gradient_boosting_structure():
    m = zoo.get("sklearn:gb_clf_multiclass").model
    f = treecomp.parse(m)
    assert f.n_trees == m.estimators_.size and f.n_outputs == 3
    assert f.tree_output.tolist() == [0, 1, 2] * m.n_estimators_
    assert (f.transform, f.decision) == ("softmax", "argmax_raw")
    e = zoo.get("sklearn:gb_clf_exponential").model
    assert (treecomp.parse(e).transform, treecomp.parse(e).decision) == ("sigmoid2", "raw_ge_0")
    es = zoo.get("sklearn:gb_reg_early_stopped").model
    assert treecomp.parse(es).n_trees == es.n_estimators_ < es.n_estimators


def test_hgb_structure():
    m = zoo.get("sklearn:hgb_clf_binary").model
    f = treecomp.parse(m)
    assert (f.input_dtype, f.transform, f.decision) == ("float64", "sigmoid", "raw_gt_0")
    assert f.n_trees == m.n_iter_
    for name, transform in [("hgb_reg_poisson", "exp"), ("hgb_reg_gamma", "exp"),
                            ("hgb_reg_quantile", "identity")]:
        assert treecomp.parse(zoo.get(f"sklearn:{name}").model).transform == transform


def test_hgb_categorical_folding():
    """Known categories go by the bitset; unknown, negative, >= 256 values the missing way."""
    case = zoo.get("sklearn:hgb_reg_categorical")
    m = case.model
    f = treecomp.parse(m)
    assert any(t.has_categorical for t in f.trees)
    base = np.repeat(case.X[:1], 11, axis=0)
    for col in (0, 3):
        X = base.copy()
        X[:, col] = [0, 1, 2, 5, 7, 30, 200, 255, 256, 1e6, -0.0]
        _assert_same(interp.predict(f, X), m.predict(X))
        X[:, col] = [np.nan, -1, -0.5, 3, 4, 6, 11, 42, 254, 299, 1e9]
        _assert_same(interp.predict(f, X), m.predict(X))


def test_hgb_categorical_non_integral_values():
    case = zoo.get("sklearn:hgb_reg_categorical")
    f = treecomp.parse(case.model)
    X = np.repeat(case.X[:40], 6, axis=0)
    X[:, 0] = np.tile([0.5, 2.5, 5.5, 7.25, 11.5, 30.5], 40)
    _assert_same(interp.predict(f, X), case.model.predict(X))


def test_hgb_many_classes():
    from sklearn.datasets import make_classification
    from sklearn.ensemble import HistGradientBoostingClassifier
    X, y = make_classification(n_samples=400, n_features=8, n_informative=6, n_classes=9,
                               n_clusters_per_class=1, random_state=3)
    m = HistGradientBoostingClassifier(max_iter=3, max_leaf_nodes=6, random_state=0).fit(X, y)
    if "softmax_seq" not in ir.TRANSFORMS:
        with pytest.raises(UnsupportedModelError, match="9 classes"):
            treecomp.parse(m)
        return
    f = treecomp.parse(m)
    for ours, theirs in [(interp.predict, m.predict), (interp.predict_proba, m.predict_proba),
                         (interp.decision_function, m.decision_function)]:
        _assert_same(ours(f, X), theirs(X))


def test_hgb_pandas_categorical_dtype():
    pd = pytest.importorskip("pandas")
    from sklearn.ensemble import HistGradientBoostingRegressor
    rng = np.random.default_rng(4)
    n = 300
    cat = rng.choice([1, 4, 9, 16], size=n)
    df = pd.DataFrame({"a": rng.normal(size=n), "c": pd.Categorical(cat), "b": rng.normal(size=n)})
    y = np.isin(cat, [4, 16]) * 2.0 + df["a"].to_numpy()
    m = HistGradientBoostingRegressor(max_iter=8, random_state=0).fit(df, y)
    f = treecomp.parse(m)
    assert f.feature_names == ("a", "c", "b") and any(t.has_categorical for t in f.trees)
    _assert_same(interp.predict(f, df), m.predict(df))
    s = pd.DataFrame({"a": rng.normal(size=n), "b": rng.normal(size=n),
                      "c": pd.Categorical(cat, categories=[1, 4, 9, 16])})
    s.loc[:5, "c"] = np.nan  # missing
    _assert_same(interp.predict(f, s[["a", "c", "b"]]), m.predict(s[["a", "c", "b"]]))
    # string categories cannot be represented as numbers in [0, 255]
    df["c"] = pd.Categorical(np.array(["x", "y", "z", "w"])[cat % 4])
    m2 = HistGradientBoostingRegressor(max_iter=3, random_state=0).fit(df, y)
    with pytest.raises(UnsupportedModelError, match="categorical feature 'c'"):
        treecomp.parse(m2)


def test_feature_names_from_dataframe():
    pd = pytest.importorskip("pandas")
    from sklearn.ensemble import RandomForestRegressor
    case = zoo.get("sklearn:rf_reg")
    cols = [f"f{i}" for i in range(case.X.shape[1])]
    df = pd.DataFrame(case.X, columns=cols)
    m = RandomForestRegressor(n_estimators=3, max_depth=4, random_state=0).fit(df, case.model.predict(case.X))
    f = treecomp.parse(m)
    assert f.feature_names == tuple(cols)
    _assert_same(interp.predict(f, df), m.predict(df))
    # a reordered frame is refused, as scikit-learn refuses it (never read by position)
    with pytest.raises(ValueError, match="feature names"):
        m.predict(df[cols[::-1]])
    with pytest.raises(ValueError, match="feature names"):
        interp.predict(f, df[cols[::-1]])


def test_renumbering_keeps_semantics():
    """A tree whose node ids are not parent-before-child is renumbered (explicit stack)."""
    case = zoo.get("sklearn:dt_clf_nan")
    f = treecomp.parse(case.model)
    t = f.trees[0]
    n = t.n_nodes
    perm = np.r_[0, np.random.default_rng(0).permutation(np.arange(1, n))[::-1]]  # new -> old
    inv = np.empty(n, np.int64)
    inv[perm] = np.arange(n)  # old -> new
    remap = lambda a: np.where(a >= 0, inv[np.maximum(a, 0)], -1)  # noqa: E731
    shuffled = sk_frontend._make_tree(remap(t.left[perm]), remap(t.right[perm]),
                                      t.feature[perm].astype(np.int64), t.threshold[perm],
                                      t.default_left[perm], t.value[perm])
    g = f.replace(trees=(shuffled,))
    X = np.vstack([case.X, edge_rows(f, case.X)])
    np.testing.assert_array_equal(interp.predict_raw(g, X), interp.predict_raw(f, X))
    with pytest.raises(InvalidModelError):  # a cycle is refused, not looped on
        sk_frontend._make_tree(np.array([1, 0]), np.array([1, 0]), np.zeros(2, np.int64),
                               np.zeros(2), np.zeros(2, bool), np.zeros((2, 1)))


# -- property test: rows made of threshold-adjacent values ----------------------------------------
def _hyp_models():
    from sklearn.ensemble import RandomForestClassifier
    from sklearn.tree import DecisionTreeRegressor
    rng = np.random.default_rng(11)
    X = np.round(rng.normal(size=(200, 3)), 2)  # ties: many rows sit on the split points
    X[rng.random(200) < 0.1, 1] = np.nan
    y = (X[:, 0] > 0.1).astype(int) + (np.nan_to_num(X[:, 1]) > -0.3)
    rf = RandomForestClassifier(n_estimators=6, max_depth=6, random_state=0).fit(X, y)
    dt = DecisionTreeRegressor(max_depth=7, random_state=0).fit(X, X[:, 2] * 3 + y)
    out = []
    for m in (rf, dt):
        f = treecomp.parse(m)
        vals = []
        for j in range(3):
            thr = np.concatenate([t.threshold[(t.left >= 0) & (t.feature == j)] for t in f.trees])
            t32 = thr.astype(np.float32)
            cand = np.concatenate([thr, t32, np.nextafter(t32, np.float32(np.inf)),
                                   np.nextafter(t32, np.float32(-np.inf)),
                                   [0.0, -0.0]]).astype(np.float64)
            # sklearn refuses inf rows (a threshold can be +inf: "all non-missing values left")
            cand = cand[np.isfinite(cand)]
            vals.append(sorted(set(cand.tolist())) + [np.nan])
        out.append((m, f, vals))
    return out


_HYP = _hyp_models()


@given(st.data())
def test_property_threshold_adjacent_rows(data):
    for m, f, vals in _HYP:
        n = data.draw(st.integers(1, 8))
        X = np.array([[data.draw(st.sampled_from(vals[j])) for j in range(3)] for _ in range(n)])
        _assert_same(interp.predict(f, X), m.predict(X))
        if hasattr(m, "predict_proba"):
            _assert_same(interp.predict_proba(f, X), m.predict_proba(X))


# -- files and errors ------------------------------------------------------------------------------
@pytest.mark.parametrize("suffix", [".pkl", ".joblib"])
def test_pickled_estimator_file(tmp_path, suffix):
    import joblib
    case = zoo.get("sklearn:hgb_clf_categorical")
    path = tmp_path / f"model{suffix}"
    if suffix == ".pkl":
        path.write_bytes(pickle.dumps(case.model))
    else:
        joblib.dump(case.model, path)
    f = treecomp.parse(path)
    assert f.digest() == treecomp.parse(case.model).digest()
    _assert_same(interp.predict_proba(f, case.X), case.model.predict_proba(case.X))


def test_corrupt_pickle_file(tmp_path):
    bad = tmp_path / "bad.pkl"
    bad.write_bytes(b"this is not a pickle")
    with pytest.raises(InvalidModelError):
        treecomp.parse(bad)
    trunc = tmp_path / "trunc.joblib"
    trunc.write_bytes(pickle.dumps(zoo.get("sklearn:rf_reg").model)[:500])
    with pytest.raises(InvalidModelError):
        treecomp.parse(trunc)


def test_unsupported_types_say_what_to_pass():
    """One short line naming the type and what is supported (not every class, ~1,000
    characters); a Pipeline: pass its last step, whose preprocessing is not compiled; a
    search: its best_estimator_."""
    from sklearn.linear_model import LinearRegression
    from sklearn.model_selection import GridSearchCV
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler
    from sklearn.tree import DecisionTreeRegressor
    X, y = np.random.default_rng(0).normal(size=(40, 3)), np.arange(40.0)
    pipe = make_pipeline(StandardScaler(), DecisionTreeRegressor(max_depth=2)).fit(X, y)
    with pytest.raises(UnsupportedModelError) as e:
        treecomp.parse(pipe)
    msg = str(e.value)
    assert "sklearn.pipeline.Pipeline" in msg and "supported_models()" in msg and "\n" not in msg
    assert "pipeline[-1]" in msg and "DecisionTreeRegressor" in msg and "standardscaler" in msg
    assert len(msg) < 600 and "catboost features" not in msg
    treecomp.parse(pipe[-1])  # what the message says to pass
    search = GridSearchCV(DecisionTreeRegressor(), {"max_depth": [1, 2]}, cv=2).fit(X, y)
    with pytest.raises(UnsupportedModelError, match="best_estimator_ .here a DecisionTreeRegressor"):
        treecomp.parse(search)
    for obj in (LinearRegression().fit(X, y), {"a": 1}):
        with pytest.raises(UnsupportedModelError) as e:
            treecomp.parse(obj)
        assert type(obj).__qualname__ in str(e.value) and len(str(e.value)) < 300


@pytest.mark.parametrize("module, hint", [
    ("lightgbm.nope_xyz", "pip install 'treecomp[lightgbm]'"),
    ("catboost.core_xyz", "pip install 'treecomp[catboost]'"),
    ("xgboost.sklearn_xyz", "pip install 'treecomp[xgboost]'"),
    ("sklearn.ensemble._nope_xyz", "pip install 'treecomp[sklearn]'"),
    ("somepkg_xyz.models", "pip install somepkg_xyz"),
])
def test_pickle_of_a_missing_library_names_its_extra(module, hint, tmp_path):
    p = tmp_path / "m.pkl"
    p.write_bytes(f"c{module}\nThing\n.".encode())  # a protocol-0 pickle of module.Thing
    with pytest.raises(UnsupportedModelError, match="needs the module") as e:
        treecomp.parse(p)
    assert hint in str(e.value)


def test_model_files_under_a_pickle_name_are_read_by_content(tmp_path):
    """An XGBoost JSON / UBJSON, a LightGBM text model or a CatBoost / ONNX file renamed .pkl is
    read as what it is (it said `KeyError: 123`); what is neither a pickle nor a model says so."""
    xgb = pytest.importorskip("xgboost")
    lgb = pytest.importorskip("lightgbm")
    X, y = np.random.default_rng(1).normal(size=(100, 3)), np.arange(100.0)
    b = xgb.train({"max_depth": 2}, xgb.DMatrix(X, y), 3)
    lb = lgb.train({"verbose": -1, "num_leaves": 4}, lgb.Dataset(X, y), 3)
    for ext, write in (("json", lambda q: b.save_model(str(q))), ("ubj", lambda q: b.save_model(str(q))),
                       ("txt", lambda q: lb.save_model(str(q)))):
        src = tmp_path / f"m.{ext}"
        write(src)
        want = treecomp.parse(src)
        for suffix in (".pkl", ".joblib", ".pickle"):
            dst = tmp_path / f"renamed_{ext}{suffix}"
            dst.write_bytes(src.read_bytes())
            assert treecomp.parse(dst).digest() == want.digest()
    for data in (b"\x00\x01\x02garbage", b"\xff\xfe{not json", b"#!/bin/sh\necho hi\n"):
        (tmp_path / "junk.pkl").write_bytes(data)
        with pytest.raises(InvalidModelError, match="not a pickle"):
            treecomp.parse(tmp_path / "junk.pkl")


def test_unfitted_estimators():
    from sklearn import ensemble, tree
    for cls in [tree.DecisionTreeRegressor, tree.DecisionTreeClassifier, tree.ExtraTreeRegressor,
                tree.ExtraTreeClassifier, ensemble.RandomForestRegressor,
                ensemble.RandomForestClassifier, ensemble.ExtraTreesRegressor,
                ensemble.ExtraTreesClassifier, ensemble.GradientBoostingRegressor,
                ensemble.GradientBoostingClassifier, ensemble.HistGradientBoostingRegressor,
                ensemble.HistGradientBoostingClassifier]:
        with pytest.raises(NotFittedError, match=f"{cls.__name__} is not fitted"):
            treecomp.parse(cls())


def test_unsupported_estimator():
    from sklearn.linear_model import LinearRegression
    X, y = np.arange(20.0).reshape(10, 2), np.arange(10.0)
    with pytest.raises(UnsupportedModelError, match="LinearRegression"):
        treecomp.parse(LinearRegression().fit(X, y))


def test_unsupported_init_estimators():
    from sklearn.dummy import DummyClassifier
    from sklearn.ensemble import GradientBoostingClassifier, GradientBoostingRegressor
    from sklearn.linear_model import LinearRegression
    case = zoo.get("sklearn:gb_reg_squared_error")
    X, y = case.X, case.model.predict(case.X)
    m = GradientBoostingRegressor(init=LinearRegression(), n_estimators=3).fit(X, y)
    with pytest.raises(UnsupportedModelError, match="init estimator .*LinearRegression"):
        treecomp.parse(m)
    c = GradientBoostingClassifier(init=DummyClassifier(strategy="stratified"),
                                   n_estimators=3).fit(X, y > 0)
    with pytest.raises(UnsupportedModelError, match="stratified"):
        treecomp.parse(c)
    # constant user-supplied Dummy inits are fine (and exact)
    c = GradientBoostingClassifier(init=DummyClassifier(strategy="most_frequent"),
                                   n_estimators=3, random_state=0).fit(X, y > 0)
    _assert_same(interp.decision_function(treecomp.parse(c), X), c.decision_function(X))


def test_supported_models_lists_sklearn():
    names = treecomp.supported_models()
    for cls in sk_frontend.PARSERS:
        assert f"sklearn.{cls}" in names


def test_hgb_negative_feature_idx_is_invalid():
    """A corrupt HGB predictor node with feature_idx < 0 would be read from the end by numpy
    indexing (and out of bounds by sklearn's own predictor): refused."""
    import copy

    from sklearn.ensemble import HistGradientBoostingRegressor

    rng = np.random.default_rng(21)
    X = rng.normal(size=(120, 3))
    m = HistGradientBoostingRegressor(max_iter=2, max_leaf_nodes=4, random_state=0).fit(X, X[:, 0])
    for bad in (-1, 3):
        m2 = copy.deepcopy(m)
        nodes = m2._predictors[0][0].nodes
        nodes["feature_idx"][np.flatnonzero(~nodes["is_leaf"].astype(bool))[0]] = bad
        with pytest.raises(InvalidModelError, match="feature_idx"):
            treecomp.parse(m2)


def test_infinity_refused_where_sklearn_refuses_it():
    """sklearn's trees refuse +/-inf (and a float64 beyond float32's range: it becomes inf in
    the float32 cast) in every feature, HistGradientBoosting only in categorical ones; treecomp
    raises ValueError exactly where the library does and agrees elsewhere, on every path."""
    import warnings

    from sklearn.ensemble import (GradientBoostingRegressor, HistGradientBoostingRegressor,
                                  RandomForestRegressor)
    from sklearn.tree import DecisionTreeRegressor
    rng = np.random.default_rng(3)
    X = rng.normal(size=(300, 3))
    X[:, 0] = rng.integers(0, 5, 300)
    y = X[:, 1] + X[:, 0]
    f32max = float(np.finfo(np.float32).max)
    models = [DecisionTreeRegressor(max_depth=4).fit(X, y),
              RandomForestRegressor(n_estimators=3, max_depth=4, random_state=0).fit(X, y),
              GradientBoostingRegressor(n_estimators=3).fit(X, y),
              HistGradientBoostingRegressor(max_iter=3, categorical_features=[0]).fit(X, y)]
    for m in models:
        f = treecomp.parse(m)
        preds = [lambda Z, f=f: interp.predict(f, Z)] + [
            treecomp.compile(f, backend=b).predict for b in ("arrays", "c")]
        for col in (0, 1):
            for v in (np.inf, -np.inf, 1e39, f32max, -f32max, 3.4028235e38 * (1 + 2 ** -30)):
                Z = X[:4].copy()
                Z[1, col] = v
                for rows in (Z, Z[1:2], Z.astype(np.float32)):
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        try:
                            want = m.predict(rows)
                        except ValueError:
                            want = None
                    for p in preds:
                        if want is None:
                            with pytest.raises(ValueError, match="infinity"):
                                p(rows)
                        else:
                            _assert_same(p(rows), want)


# -- estimator attributes sklearn's predict relies on (frontend fuzz findings) -------------------
def _rf3():
    from sklearn.ensemble import RandomForestClassifier

    rng = np.random.default_rng(31)
    X = rng.normal(size=(150, 4))
    y = (X[:, 0] > 0).astype(int) + (X[:, 1] > 0.5)
    return RandomForestClassifier(n_estimators=3, max_depth=3, random_state=0).fit(X, y), X


def test_classes_shorter_than_the_trees_is_invalid():
    """A 3-class forest with classes_=[0, 1]: sklearn's predict_proba has 3 columns (n_classes_),
    treecomp would have dropped the third."""
    import copy

    m, _ = _rf3()
    for edit in (lambda m: setattr(m, "classes_", np.array([0, 1])),
                 lambda m: setattr(m, "n_classes_", 5),
                 lambda m: setattr(m.estimators_[1], "n_classes_", 2)):
        m2 = copy.deepcopy(m)
        edit(m2)
        with pytest.raises(InvalidModelError, match="n_classes_"):
            treecomp.parse(m2)


@pytest.mark.parametrize("edit", ["tree_n_outputs", "tree_n_features", "forest_n_features"])
def test_forest_tree_attributes_must_agree(edit):
    """sklearn 1.9.1 checks X against each tree's n_features_in_ and indexes tree_.predict by
    n_outputs_: a forest whose trees disagree fails there (ValueError / IndexError)."""
    import copy

    m, X = _rf3()
    m2 = copy.deepcopy(m)
    if edit == "tree_n_outputs":
        m2.estimators_[0].n_outputs_ = 2
    elif edit == "tree_n_features":
        m2.estimators_[1].n_features_in_ = 6
    else:
        m2.n_features_in_ = 6
    with pytest.raises((ValueError, IndexError)):
        m2.predict_proba(np.zeros((2, m2.n_features_in_)))
    with pytest.raises(InvalidModelError, match="n_outputs_|n_features_in_"):
        treecomp.parse(m2)


def test_tree_regressor_n_outputs_must_match_its_tree():
    from sklearn.tree import DecisionTreeRegressor

    X = np.random.default_rng(32).normal(size=(80, 3))
    m = DecisionTreeRegressor(max_depth=3, random_state=0).fit(X, X[:, 0])
    m.n_outputs_ = 2
    with pytest.raises(IndexError):
        m.predict(X)
    with pytest.raises(InvalidModelError, match="n_outputs_"):
        treecomp.parse(m)


@pytest.mark.parametrize("flag", [1, 2, 255])
def test_hgb_is_categorical_on_a_numeric_feature_is_invalid(flag):
    """sklearn's predictor treats any non-zero is_categorical as a categorical split and casts
    the value to uint8 for the bitsets (not reproducible): refused."""
    import copy

    from sklearn.ensemble import HistGradientBoostingClassifier

    rng = np.random.default_rng(33)
    X = rng.normal(size=(150, 3))
    m = HistGradientBoostingClassifier(max_iter=2, max_leaf_nodes=4, random_state=0).fit(X, X[:, 0] > 0)
    m2 = copy.deepcopy(m)
    nodes = m2._predictors[0][0].nodes
    nodes["is_categorical"][np.flatnonzero(~nodes["is_leaf"].astype(bool))[0]] = flag
    with pytest.raises(InvalidModelError, match="is_categorical"):
        treecomp.parse(m2)
    # and the reverse: a categorical feature's split marked numeric
    Xc = np.c_[rng.integers(0, 4, 150), X[:, :2]]
    mc = HistGradientBoostingClassifier(max_iter=2, max_leaf_nodes=4, categorical_features=[0],
                                        random_state=0).fit(Xc, Xc[:, 0] >= 2)
    nodes = mc._predictors[0][0].nodes
    cat_nodes = np.flatnonzero(nodes["is_categorical"].astype(bool) & ~nodes["is_leaf"].astype(bool))
    assert cat_nodes.size
    treecomp.parse(mc)
    nodes["is_categorical"][cat_nodes[0]] = 0
    with pytest.raises(InvalidModelError, match="is_categorical"):
        treecomp.parse(mc)


def test_boosting_classes_must_match_the_margins():
    from sklearn.ensemble import GradientBoostingClassifier, HistGradientBoostingClassifier

    rng = np.random.default_rng(34)
    X = rng.normal(size=(150, 3))
    y = (X[:, 0] > 0).astype(int) + (X[:, 1] > 0.5)
    for m in (GradientBoostingClassifier(n_estimators=2, max_depth=2, random_state=0).fit(X, y),
              HistGradientBoostingClassifier(max_iter=2, max_leaf_nodes=4, random_state=0).fit(X, y),
              HistGradientBoostingClassifier(max_iter=2, max_leaf_nodes=4, random_state=0).fit(X, y > 0)):
        treecomp.parse(m)
        m.classes_ = m.classes_[:-1]
        with pytest.raises(InvalidModelError, match="classes_"):
            treecomp.parse(m)
