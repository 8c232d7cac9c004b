"""IsolationForest, AdaBoostClassifier (SAMME) and AdaBoostRegressor, differentially against scikit-learn 1.9.1.

Every output (score_samples, decision_function, predict, predict_proba) must equal sklearn's bit
for bit (values, signs of zeros, dtypes, shapes) from the interpreter and every backend (c,
llvm, arrays), on whole batches and single rows, on rows on / next to the thresholds, NaN and
+/-inf. The zoo (tests/zoo_sklearn.py) holds a few of these models too, so the backend test
files cover them as well; here are the configurations and refusals in detail.
"""

from __future__ import annotations

import copy
import warnings

import numpy as np
import pytest
from sklearn.datasets import make_classification
from sklearn.ensemble import AdaBoostClassifier, AdaBoostRegressor, IsolationForest
from sklearn.linear_model import LinearRegression, LogisticRegression
from sklearn.tree import DecisionTreeClassifier, DecisionTreeRegressor, ExtraTreeRegressor

import treecomp
from treecomp import interp, ir, loader, native, outputs
from treecomp.errors import InvalidModelError, NotFittedError, UnsupportedModelError
from tests.edge import edge_rows

BACKENDS = ("c", "llvm", "arrays")
# sklearn's float32 cast of the 1e39 edge rows
pytestmark = [pytest.mark.filterwarnings("ignore:overflow encountered in cast:RuntimeWarning"),
              # sklearn's input validation sums X, which warns on rows holding inf and -inf
              pytest.mark.filterwarnings("ignore:invalid value encountered in reduce:RuntimeWarning")]


def _bits(a: np.ndarray) -> np.ndarray:
    """Exact comparison, -0.0 and +0.0 told apart (assert_array_equal takes them as equal)."""
    a = np.asarray(a)
    return a.view(np.uint64) if a.dtype == np.float64 else a


def _same(ours, theirs, what=""):
    assert isinstance(ours, np.ndarray), what
    assert ours.dtype == theirs.dtype and ours.shape == theirs.shape, (what, ours.dtype, theirs.dtype,
                                                                        ours.shape, theirs.shape)
    np.testing.assert_array_equal(_bits(ours), _bits(theirs), err_msg=what)


def _data(n=400, d=6, k=2, seed=0):
    X, y = make_classification(n_samples=n, n_features=d, n_informative=4, n_redundant=1,
                               n_classes=k, n_clusters_per_class=1, random_state=seed)
    return X, y


def _check_all(model, f, X, methods):
    """Interpreter and every backend against the model: whole X, one row, a few rows."""
    preds = [(f"interp", lambda name, Z: getattr(interp, name)(f, Z))] + [
        (b, lambda name, Z, p=treecomp.compile(f, backend=b): getattr(p, name)(Z)) for b in BACKENDS]
    for Z in (X, X[:1], X[3:9]):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # sklearn's float32 cast of 1e39
            want = {m: getattr(model, m)(Z) for m in methods}
        for who, fn in preds:
            for m in methods:
                _same(fn(m, Z), want[m], f"{who} {m} rows={len(Z)}")


# -- IsolationForest ---------------------------------------------------------------------------
IFOREST = {
    "auto_256": dict(n_estimators=6),                             # max_samples = 256 of 600
    "small_subsample": dict(n_estimators=9, max_samples=16, max_features=0.5),
    "two_samples": dict(n_estimators=5, max_samples=2, max_features=2),
    "one_sample": dict(n_estimators=4, max_samples=1),             # denominator 0: score -0.5
    "contamination_bootstrap": dict(n_estimators=7, max_samples=0.3, contamination=0.05,
                                    bootstrap=True, max_features=0.8),
    "contamination_all_rows": dict(n_estimators=5, max_samples=1.0, contamination=0.2),
}


@pytest.mark.parametrize("name", IFOREST)
def test_isolation_forest_bit_exact(name):
    X, _ = _data(n=600, seed=5)
    X[::11, 1] = np.nan  # NaN in training: the trees learn where it goes
    m = IsolationForest(random_state=0, **IFOREST[name]).fit(X)
    f = treecomp.parse(m)
    assert (f.transform, f.decision, f.allow_nan, f.reject_inf) == ("iforest", "outlier", True, ())
    assert f.n_trees == len(m.estimators_) and not f.is_classifier and not f.classes
    # rows on, and one float32 ULP either side of, the thresholds; NaN; +/-inf; -0.0; 1e39
    rows = np.vstack([X[:60], edge_rows(f, X, n=150, nan=True)])
    rows[5, 0], rows[6, 2] = 1e39, -1e39
    assert np.isinf(rows).any() and np.isnan(rows).any()
    _check_all(m, f, rows, ("score_samples", "decision_function", "predict"))
    assert set(np.unique(m.predict(rows)).tolist()) <= {-1, 1}


def test_isolation_forest_structure_and_parameters():
    X, _ = _data(n=300, seed=6)
    m = IsolationForest(n_estimators=4, max_samples=50, max_features=3, contamination=0.1,
                        random_state=0).fit(X)
    f = treecomp.parse(m)
    from sklearn.ensemble._iforest import _average_path_length
    # the denominator 4 * c(50) is evaluated where the model predicts (sklearn's np.log)
    assert f.transform_params == (4.0, 50.0, float(m.offset_))
    assert outputs.iforest_denominator(f) == 4 * float(_average_path_length([50])[0])
    legacy = f.replace(transform_params=(4 * float(_average_path_length([50])[0]), float(m.offset_)))
    _same(interp.score_samples(legacy, X), m.score_samples(X))  # files of older treecomp
    # feature subsets: the IR's features are the model's columns, not the subset's
    for t, e, fs in zip(f.trees, m.estimators_, m.estimators_features_):
        inner = e.tree_.children_left != -1
        assert sorted(set(t.feature[t.left >= 0].tolist())) == \
            sorted(set(np.asarray(fs)[e.tree_.feature[inner]].tolist()))
    p = treecomp.compile(f, backend="c")
    assert "outlier detector" in repr(p)
    with pytest.raises(AttributeError, match="classifiers"):
        p.predict_proba(X)
    with pytest.raises(AttributeError, match="classes_"):
        p.classes_
    g = ir.Forest.from_bytes(f.to_bytes())
    assert g.transform_params == f.transform_params and g.digest() == f.digest()
    _same(interp.score_samples(g, X), m.score_samples(X))


def test_isolation_forest_feature_names_and_pickled_predictor():
    pd = pytest.importorskip("pandas")
    import pickle
    X, _ = _data(n=200, d=5, seed=7)
    df = pd.DataFrame(X, columns=list("abcde"))
    m = IsolationForest(n_estimators=5, max_samples=64, random_state=0).fit(df)
    f = treecomp.parse(m)
    assert f.feature_names == tuple("abcde")
    q = pickle.loads(pickle.dumps(treecomp.compile(f, backend="arrays")))
    _same(q.score_samples(df), m.score_samples(df))
    _same(q.predict(df), m.predict(df))


# -- AdaBoostClassifier ------------------------------------------------------------------------
ADA = {
    "binary_stumps": (2, dict(n_estimators=20)),
    "binary_depth3_lr": (2, dict(estimator=DecisionTreeClassifier(max_depth=3), n_estimators=9,
                                 learning_rate=0.3)),
    "multiclass_3": (3, dict(estimator=DecisionTreeClassifier(max_depth=2), n_estimators=12)),
    "multiclass_8": (8, dict(estimator=DecisionTreeClassifier(max_depth=4), n_estimators=6)),
}


@pytest.mark.parametrize("name", ADA)
def test_adaboost_bit_exact(name):
    k, kw = ADA[name]
    X, y = _data(n=500, d=8, k=k, seed=k)
    m = AdaBoostClassifier(random_state=0, **kw).fit(X, y)
    f = treecomp.parse(m)
    assert (f.transform, f.decision, f.exp_lib) == ("samme", "samme", "numpy")
    assert f.n_outputs == (1 if k == 2 else k) and f.transform_params == (float(m.estimator_weights_.sum()),)
    rows = np.vstack([X[:80], edge_rows(f, X, n=150, nan=False)])
    _check_all(m, f, rows, ("decision_function", "predict", "predict_proba"))


def test_adaboost_zero_decisions_keep_sklearns_sign():
    """Equal weights on an even number of disagreeing stumps make many margins exactly 0: the
    binary decision_function is then +0.0, also with a negative weight sum (-0.0 halves)."""
    X, y = _data(n=300, seed=9)
    m = AdaBoostClassifier(n_estimators=6, random_state=0).fit(X, y)
    for w in (1.0, -1.0):
        m2 = copy.deepcopy(m)
        m2.estimator_weights_ = np.full(len(m2.estimators_), w)
        d = m2.decision_function(X)
        assert np.any(d == 0)
        f = treecomp.parse(m2)
        _check_all(m2, f, X, ("decision_function", "predict", "predict_proba"))


def test_adaboost_string_labels_and_early_stop():
    X, y = _data(n=300, k=3, seed=10)
    labels = np.array(["x", "y", "z"], dtype=object)[y]
    m = AdaBoostClassifier(DecisionTreeClassifier(), n_estimators=50,
                           random_state=0).fit(X, labels)
    f = treecomp.parse(m)
    # a perfect tree stops the boosting: estimator_weights_ keeps zeros for the unfitted rest,
    # and sklearn divides by the sum over all of them
    assert f.n_trees == len(m.estimators_) < len(m.estimator_weights_)
    np.testing.assert_array_equal(f.classes[0], m.classes_)
    _check_all(m, f, X[:100], ("decision_function", "predict", "predict_proba"))


def test_adaboost_refuses_nan_and_infinity_like_sklearn():
    X, y = _data(n=200, seed=11)
    m = AdaBoostClassifier(n_estimators=5, random_state=0).fit(X, y)
    f = treecomp.parse(m)
    assert not f.allow_nan and f.reject_inf == tuple(range(X.shape[1]))
    p = treecomp.compile(f, backend="arrays")
    for v, match in ((np.nan, "NaN"), (np.inf, "infinity"), (1e39, "infinity")):
        Z = X[:3].copy()
        Z[1, 2] = v
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with pytest.raises(ValueError, match=match):
                m.predict(Z)
        for fn in (lambda Z: interp.predict(f, Z), p.predict, p.decision_function):
            with pytest.raises(ValueError, match=match):
                fn(Z)


# -- AdaBoostRegressor --------------------------------------------------------------------------
ADA_REG = {
    "linear_stumps": dict(estimator=DecisionTreeRegressor(max_depth=1), n_estimators=25),
    "square_depth3": dict(n_estimators=15, loss="square", learning_rate=0.5),
    "exponential_extra": dict(estimator=ExtraTreeRegressor(max_depth=4, random_state=0),
                              n_estimators=12, loss="exponential"),
}


@pytest.mark.parametrize("name", ADA_REG)
def test_adaboost_regressor_bit_exact(name):
    X, _ = _data(n=400, d=6, seed=21)
    y = X[:, 0] * 3 + np.sin(X[:, 1] * 2) + np.round(X[:, 2])
    m = AdaBoostRegressor(random_state=0, **ADA_REG[name]).fit(X, y)
    f = treecomp.parse(m)
    E = len(m.estimators_)
    assert (f.transform, f.decision, f.n_outputs, f.n_trees) == ("weighted_median", "none", E, E)
    assert f.transform_params == tuple(m.estimator_weights_[:E])
    rows = np.vstack([X[:80], edge_rows(f, X, n=150, nan=False)])
    _check_all(m, f, rows, ("predict",))
    # the raw outputs are the estimators' own predictions
    np.testing.assert_array_equal(treecomp.compile(f, backend="arrays").predict_raw(rows),
                                  np.array([e.predict(rows) for e in m.estimators_]).T)


def test_adaboost_regressor_ties_signed_zeros_and_early_stop():
    """Tied predictions (argsort's order decides which weights accumulate first), leaves of
    -0.0 and +0.0 (the median keeps the sign: raw outputs start from -0.0), and an early stop
    (estimator_weights_ longer than estimators_, its tail unused)."""
    X, _ = _data(n=300, d=5, seed=22)
    y = X[:, 0] * 0.4 + np.random.default_rng(0).normal(size=len(X)) * 0.5
    m = AdaBoostRegressor(DecisionTreeRegressor(max_depth=2), n_estimators=16,
                          random_state=0).fit(X, y)
    for i, e in enumerate(m.estimators_):  # integral leaves: ties; np.round(-0.3) is -0.0
        v = e.tree_.value  # (the tree's own memory)
        v[:] = np.round(v) if i % 3 else np.abs(np.round(v))
    ref = m.predict(X)
    assert np.any(ref == 0) and np.any(np.signbit(ref[ref == 0])) and len(np.unique(ref)) < 8
    _check_all(m, treecomp.parse(m), X[:150], ("predict",))
    # an early stop: sklearn leaves the unfitted estimators' weights 0
    m2 = copy.deepcopy(m)
    m2.estimators_ = m2.estimators_[:5]
    f2 = treecomp.parse(m2)
    assert f2.n_trees == f2.n_outputs == 5
    _check_all(m2, f2, X[:100], ("predict",))


def test_adaboost_regressor_refusals():
    X, _ = _data(n=200, seed=23)
    m = AdaBoostRegressor(n_estimators=4, random_state=0).fit(X, X[:, 0])
    f = treecomp.parse(m)
    p = treecomp.compile(f, backend="arrays")
    with pytest.raises(UnsupportedModelError, match="weighted median"):
        p.contributions(X[:2])
    Z = X[:3].copy()
    Z[1, 2] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        m.predict(Z)
    with pytest.raises(ValueError, match="NaN"):
        p.predict(Z)
    with pytest.raises(UnsupportedModelError, match="LinearRegression"):
        treecomp.parse(AdaBoostRegressor(LinearRegression(), n_estimators=3).fit(X, X[:, 0]))
    bad = copy.deepcopy(m)
    bad.estimator_weights_ = -bad.estimator_weights_
    with pytest.raises(InvalidModelError, match="weights"):
        treecomp.parse(bad)
    with pytest.raises(InvalidModelError, match="weighted_median"):
        ir.Forest(**{**{k: getattr(f, k) for k in ("trees", "n_features", "n_outputs",
                                                    "tree_output", "base_score", "transform")},
                     "transform_params": f.transform_params[:-1]})


def test_adaboost_other_bases_are_refused():
    X, y = _data(n=120, seed=12)
    with pytest.raises(UnsupportedModelError, match="LogisticRegression"):
        treecomp.parse(AdaBoostClassifier(LogisticRegression(), n_estimators=3).fit(X, y))
    with pytest.raises(UnsupportedModelError, match="single class"):
        treecomp.parse(AdaBoostClassifier(n_estimators=3).fit(X, np.zeros(len(X), int)))
    for cls in (AdaBoostClassifier, IsolationForest):
        with pytest.raises(NotFittedError, match=f"{cls.__name__} is not fitted"):
            treecomp.parse(cls())
    names = treecomp.supported_models()
    assert "sklearn.AdaBoostClassifier" in names and "sklearn.IsolationForest" in names
    assert "sklearn.AdaBoostRegressor" in names


def test_corrupt_adaboost_and_iforest_are_invalid():
    X, y = _data(n=150, seed=13)
    m = AdaBoostClassifier(n_estimators=4, random_state=0).fit(X, y)
    m2 = copy.deepcopy(m)
    m2.estimator_weights_ = m2.estimator_weights_[:2]
    with pytest.raises(InvalidModelError, match="weights"):
        treecomp.parse(m2)
    i = IsolationForest(n_estimators=3, max_samples=30, max_features=0.5, random_state=0).fit(X)
    i2 = copy.deepcopy(i)
    i2.estimators_features_[1] = np.array([0, 99, 2])
    with pytest.raises(InvalidModelError, match="estimators_features_"):
        treecomp.parse(i2)
    i3 = copy.deepcopy(i)
    del i3._decision_path_lengths
    with pytest.raises(UnsupportedModelError, match="_decision_path_lengths"):
        treecomp.parse(i3)


# -- the IR and the C ABI ----------------------------------------------------------------------
def _stump_forest(**kw):
    t = ir.Tree(left=[1, -1, -1], right=[2, -1, -1], feature=[0, -1, -1], threshold=[0.5, 0, 0],
                default_left=[False] * 3, value=[[0.0], [1.0], [-1.0]])
    args = dict(trees=(t,), n_features=2, n_outputs=1, tree_output=[0], base_score=[0.0])
    args.update(kw)
    return ir.Forest(**args)


def test_transform_params_are_validated():
    ok = _stump_forest(transform="iforest", decision="outlier", transform_params=(2.0, -0.5))
    assert ok.meta()["transform_params"] == [2.0, -0.5]
    assert "transform_params" not in _stump_forest().meta()  # other digests are unchanged
    assert ok.replace(transform_params=(2.0, -0.25)).digest() != ok.digest()
    for kw, match in [(dict(transform="iforest", decision="outlier", transform_params=(2.0,)), "takes 2"),
                      (dict(transform="iforest", decision="none", transform_params=(2.0, 0.0)), "outlier"),
                      (dict(transform="identity", decision="outlier"), "outlier"),
                      (dict(transform="iforest", decision="outlier", transform_params=(np.inf, 0.0)), "finite"),
                      (dict(transform="iforest", decision="outlier", transform_params=(-1.0, 0.0)), "denominator"),
                      (dict(transform="iforest", decision="outlier", transform_params=("2", 0.0)), "numbers"),
                      (dict(transform="iforest", decision="outlier", transform_params=(2.0, 2.5, 0.0)), "integers"),
                      (dict(transform="iforest", decision="outlier", transform_params=(2.0, -3.0, 0.0)), "integers"),
                      (dict(transform="sigmoid", transform_params=(1.0,)), "takes 0"),
                      (dict(transform="samme", decision="samme", classes=(np.array([0, 1]),),
                            transform_params=(0.0,)), "non-zero"),
                      (dict(transform="samme", decision="samme", n_outputs=2, base_score=[0.0, 0.0],
                            classes=(np.array([0, 1]),), transform_params=(1.0,)), "one margin")]:
        with pytest.raises(InvalidModelError, match=match):
            _stump_forest(**kw)
    # a corrupt artifact description is refused when loaded
    head = ir.head_of(ok)
    bad = head.to_json().replace('"transform_params": [2.0, -0.5]', '"transform_params": [2.0]')
    with pytest.raises(InvalidModelError, match="corrupt model metadata"):
        ir.Head.from_json(bad)
    assert ir.Head.from_json(head.to_json()).transform_params == (2.0, -0.5)


def test_ir_file_without_transform_params_still_loads():
    f = _stump_forest(transform="sigmoid")
    data = f.to_bytes()
    assert b"transform_params" not in data
    assert ir.Forest.from_bytes(data).digest() == f.digest()


@pytest.mark.parametrize("backend", ["c", "llvm", "arrays_so"])
def test_artifacts_refuse_treecomp_transform(backend, tmp_path):
    """TREECOMP_TRANSFORM needs numpy's power / exp in the calling process for these models:
    the .so answers TREECOMP_EINVAL; TREECOMP_RAW gives the margins the Predictor transforms."""
    X, y = _data(n=200, seed=14)
    models = [IsolationForest(n_estimators=3, max_samples=32, random_state=0).fit(X),
              AdaBoostClassifier(n_estimators=4, random_state=0).fit(X, y),
              AdaBoostRegressor(n_estimators=4, random_state=0).fit(X, X[:, 0])]
    for m in models:
        f = treecomp.parse(m)
        p = treecomp.compile(f, backend="arrays" if backend == "arrays_so" else backend)
        path = tmp_path / f"{type(m).__name__}.so"
        p.save(path)
        q = treecomp.load(path)
        assert type(q._kernel) is native.SharedLibrary
        Z = np.ascontiguousarray(X[:5])
        out = np.empty((5, f.n_outputs))
        q._kernel.run(Z, out, native.TREECOMP_RAW)
        _same(out, interp.predict_raw(f, Z))
        with pytest.raises(RuntimeError, match="code -1"):
            q._kernel.run(Z, out, native.TREECOMP_TRANSFORM)
        _same(q.predict(Z), m.predict(Z))
        if hasattr(m, "decision_function"):
            _same(q.decision_function(Z), m.decision_function(Z))
        assert outputs.accepted_flags(f) == 0


def test_hgb_many_classes_single_rows():
    """sklearn's softmax sums Fortran-ordered margins class by class, except one row (contiguous
    either way), which numpy sums pairwise from 8 classes on: single-row batches must agree."""
    from sklearn.ensemble import HistGradientBoostingClassifier
    from threadpoolctl import threadpool_limits
    X, y = _data(n=400, d=8, k=9, seed=15)
    with threadpool_limits(1, user_api="openmp"):  # tiny inputs: OpenMP threads only cost
        m = HistGradientBoostingClassifier(max_iter=3, max_leaf_nodes=6, random_state=0).fit(X, y)
        f = treecomp.parse(m)
        p = treecomp.compile(f, backend="arrays")
        differs = 0
        for i in range(16):
            want = m.predict_proba(X[i:i + 1])
            _same(interp.predict_proba(f, X[i:i + 1]), want)
            _same(p.predict_proba(X[i:i + 1]), want)
            differs += not np.array_equal(want, np.asfortranarray(m.predict_proba(X[i:i + 2]))[:1])
        assert differs  # the one-row sum is not the many-row sum for some of these rows
        _same(p.predict_proba(X), m.predict_proba(X))


# -- leaf indices ------------------------------------------------------------------------------
def _apply_models():
    from sklearn.ensemble import (ExtraTreesRegressor, GradientBoostingClassifier,
                                  GradientBoostingRegressor, RandomForestClassifier,
                                  RandomForestRegressor)
    from sklearn.tree import DecisionTreeClassifier, DecisionTreeRegressor
    X, y = _data(n=300, k=3, seed=16)
    X[::9, 2] = np.nan
    Xf = np.nan_to_num(X)
    yb = y > 0
    return [(RandomForestClassifier(n_estimators=4, max_depth=6, random_state=0).fit(X, y), X),
            (GradientBoostingClassifier(n_estimators=3, max_depth=3, random_state=0).fit(Xf, y), Xf),
            (ExtraTreesRegressor(n_estimators=3, max_depth=5, random_state=0).fit(Xf, Xf[:, 0]), Xf),
            (DecisionTreeRegressor(max_depth=7, random_state=0).fit(X, Xf[:, 1]), X),
            (GradientBoostingClassifier(n_estimators=4, max_depth=2, random_state=0).fit(Xf, yb), Xf),
            (GradientBoostingRegressor(n_estimators=3, max_depth=3, random_state=0).fit(Xf, Xf[:, 1]), Xf),
            (GradientBoostingRegressor(n_estimators=1, max_depth=2, random_state=0).fit(Xf, Xf[:, 1]), Xf),
            (DecisionTreeClassifier(max_depth=5, random_state=0).fit(X, y), X),
            (RandomForestRegressor(n_estimators=1, max_depth=4, random_state=0).fit(X, Xf[:, 0]), X)]


@pytest.mark.parametrize("i", range(9))
def test_apply_numbers_leaves_as_sklearn(i):
    """Values, shape and dtype of sklearn's own apply: (n,) int64 for one tree, (n, trees)
    int64 for forests, float64 (n, stages, K) / (n, stages) for GradientBoosting, whose apply
    takes NaN (its trees route it by missing_go_to_left) though its predict refuses it."""
    m, X = _apply_models()[i]
    f = treecomp.parse(m)
    rows = np.vstack([X[:50], edge_rows(f, np.nan_to_num(X), n=100, nan=f.allow_nan)])
    if f.leaf_layout in ("stages", "stages_classes"):
        assert not f.allow_nan
        rows[::7, 1] = np.nan
        rows[1::5, 3] = np.nan
        with pytest.raises(ValueError, match="NaN"):
            m.predict(rows)
        with pytest.raises(ValueError, match="NaN"):
            treecomp.compile(f, backend="arrays").predict(rows)
    want = m.apply(rows)
    _same(interp.apply(f, rows), want)
    # Predictor.apply runs an arrays kernel over interp.leaf_id_forest whatever the backend
    p = treecomp.compile(f, backend="llvm")
    _same(p.apply(rows), want)
    _same(p.apply(rows[:1]), m.apply(rows[:1]))
    g = ir.Forest.from_bytes(f.to_bytes())
    assert g.leaf_layout == f.leaf_layout
    _same(interp.apply(g, rows), want)
    # an IR file from before leaf_layout: the IR's own (n, n_trees) int64
    old = ir.Forest.from_bytes(f.replace(leaf_layout="trees").to_bytes())
    plain = rows if f.allow_nan else np.nan_to_num(rows)
    _same(interp.apply(old, plain), m.apply(plain).reshape(len(rows), -1).astype(np.int64))
    with pytest.raises(ValueError, match="inf"):  # sklearn's apply refuses inf, so do we
        bad = rows[:3].copy()
        bad[0, 0] = np.inf
        p.apply(bad)


def test_apply_of_models_without_an_apply():
    """IsolationForest, AdaBoost and HistGradientBoosting have no apply in sklearn: (n,
    n_trees) int64 of each estimator's own node ids (estimators_[i].apply)."""
    from sklearn.ensemble import HistGradientBoostingRegressor
    X, y = _data(n=200, seed=17)
    for m in (IsolationForest(n_estimators=3, max_samples=64, random_state=0).fit(X),
              AdaBoostClassifier(DecisionTreeClassifier(max_depth=2), n_estimators=3,
                                 random_state=0).fit(X, y),
              HistGradientBoostingRegressor(max_iter=3, max_leaf_nodes=5).fit(X, X[:, 0])):
        assert not hasattr(m, "apply")
        f = treecomp.parse(m)
        assert f.leaf_layout == "trees"
        got = treecomp.compile(f, backend="arrays").apply(X)
        assert got.dtype == np.int64 and got.shape == (len(X), f.n_trees)
        if not isinstance(m, HistGradientBoostingRegressor):
            feats = getattr(m, "estimators_features_", [None] * len(m.estimators_))
            want = np.stack([e.apply(np.ascontiguousarray(X[:, fs] if fs is not None
                                                          and len(fs) < X.shape[1] else X,
                                                          np.float32))
                             for e, fs in zip(m.estimators_, feats)], axis=1)
            _same(got, want)


def test_apply_keeps_the_librarys_ids_through_a_renumbering():
    """A tree whose ids are not parent-before-child is renumbered by the frontend: apply still
    answers the source's ids."""
    from treecomp.frontends import sklearn as sk_frontend
    m, X = _apply_models()[3]
    t = m.tree_
    n = t.node_count
    perm = np.r_[0, np.random.default_rng(1).permutation(np.arange(1, n))]  # old id -> new id
    inv = np.argsort(perm)                                                   # new id -> old id
    ch = lambda a: np.where(a[inv] >= 0, perm[np.maximum(a[inv], 0)], -1)  # noqa: E731
    tree = sk_frontend._make_tree(ch(t.children_left), ch(t.children_right), t.feature[inv],
                                  t.threshold[inv], t.missing_go_to_left[inv].astype(bool),
                                  t.value[inv, 0, :])
    assert not np.array_equal(tree.node_ids, np.arange(n))
    f = treecomp.parse(m).replace(trees=(tree,))
    _same(interp.apply(f, X), perm[m.apply(X)])  # one tree: (n,) int64, as sklearn
    import dataclasses
    assert f.replace(trees=(dataclasses.replace(tree, node_ids=None),)).digest() != f.digest()


def test_apply_refused_without_ids_or_ir():
    f = _stump_forest()
    with pytest.raises(UnsupportedModelError, match="node ids"):  # e.g. an older IR file
        interp.apply(f, np.zeros((2, 2)))
    with pytest.raises(UnsupportedModelError, match="node ids"):
        treecomp.compile(f, backend="arrays").apply(np.zeros((2, 2)))
    m, X = _apply_models()[0]
    p = treecomp.compile(treecomp.parse(m), backend="arrays", ir=True)
    import pickle
    from treecomp.backends.arrays import format as arrays_format
    # with ir=True a pickle carries the IR (the .tc inside it); a table file without it cannot apply
    np.testing.assert_array_equal(pickle.loads(pickle.dumps(p)).apply(X), p.apply(X))
    k = p._kernel
    bare = arrays_format.tables_to_bytes(k.tables, k.head, {"isa": "auto", "block_rows": 0})
    with pytest.raises(UnsupportedModelError, match=r"leaf indices \(apply\) need the model's trees"):
        treecomp.Predictor(loader.kernel_from_bytes("arrays", bare)).apply(X)


def test_transform_blocks_keep_sklearns_row_sums(monkeypatch):
    """outputs.transform runs over blocks of rows; sklearn's softmax of Fortran-ordered margins
    (AdaBoost, HistGradientBoosting) sums a single row pairwise and several rows class by class,
    so no block may hold one row unless the batch does: with 10 classes and blocks of 2 rows
    (the last of 3), every probability is still sklearn's."""
    from sklearn.ensemble import HistGradientBoostingClassifier
    X, y = _data(n=300, d=6, k=10, seed=23)
    monkeypatch.setattr(outputs, "TRANSFORM_BLOCK", 1)
    for m in (AdaBoostClassifier(DecisionTreeClassifier(max_depth=3), n_estimators=4,
                                 random_state=0).fit(X, y),
              HistGradientBoostingClassifier(max_iter=2, max_leaf_nodes=4, random_state=0).fit(X, y)):
        f = treecomp.parse(m)
        p = treecomp.compile(f, backend="arrays")
        for Z in (X[:1], X[:2], X[:3], X[5:10], X[:41]):
            _same(p.predict_proba(Z), m.predict_proba(Z))
            _same(interp.predict_proba(f, Z), m.predict_proba(Z))
