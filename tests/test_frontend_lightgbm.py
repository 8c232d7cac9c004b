"""LightGBM frontend: bit-exact differential tests against the installed lightgbm.

Every zoo case is compared on its rows, threshold-edge rows and special values; hand-written
text models pin the corner semantics (zero band, missing types, categorical casts, deep trees)
directly against `lgb.Booster(model_str=...)`.
"""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

lgb = pytest.importorskip("lightgbm")

import treecomp  # noqa: E402
from treecomp import interp, outputs  # noqa: E402
from treecomp.errors import InvalidModelError, NotFittedError, UnsupportedModelError  # noqa: E402
from treecomp.frontends.lightgbm import K_ZERO, parse_lightgbm_string  # noqa: E402
from tests import zoo  # noqa: E402
from tests.edge import edge_rows  # noqa: E402

BASE = dict(verbose=-1, num_threads=1, seed=3, deterministic=True, force_row_wise=True)
OURS = {"predict": interp.predict, "predict_proba": interp.predict_proba,
        "raw": interp.decision_function}
#: values that land in LightGBM's zero band (|x| <= kZeroThreshold) or just outside it
BAND = [0.0, -0.0, K_ZERO, -K_ZERO, np.nextafter(K_ZERO, 1), np.nextafter(-K_ZERO, -1),
        5e-36, -5e-36, 1e-40, -1e-40, 5e-324, -5e-324]


def assert_same(want, got):
    want, got = np.asarray(want), np.asarray(got)
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, got.shape, want.dtype, want.shape)
    np.testing.assert_array_equal(got, want, strict=True)


def special_rows(X: np.ndarray, seed: int, values=(np.nan, 0.0, -0.0, np.inf, -np.inf, *BAND)) -> np.ndarray:
    rng = np.random.default_rng(seed)
    rows = []
    for j in range(X.shape[1]):
        base = X[rng.integers(0, len(X), len(values))].copy()
        base[:, j] = values
        rows.append(base)
    return np.vstack(rows)


def lib_model_text(body_trees: list[str], *, objective: str = "regression", n_features: int = 1,
                   extra_header: str = "") -> str:
    names = " ".join(f"f{i}" for i in range(n_features))
    infos = " ".join(["[-1:1]"] * n_features)
    trees = "".join(f"Tree={i}\n{t}\n\n" for i, t in enumerate(body_trees))
    return (f"tree\nversion=v4\nnum_class=1\nnum_tree_per_iteration=1\nlabel_index=0\n"
            f"max_feature_idx={n_features - 1}\nobjective={objective}\n{extra_header}"
            f"feature_names={names}\nfeature_infos={infos}\n\n{trees}end of trees\n")


def tree_text(split_feature, threshold, decision_type, left, right, leaf_value, *, cats=None,
              is_linear=0) -> str:
    j = lambda a: " ".join(repr(float(v)) if isinstance(v, float) else str(v) for v in a)  # noqa: E731
    n = len(leaf_value)
    lines = [f"num_leaves={n}", f"num_cat={0 if cats is None else len(cats[0]) - 1}",
             f"split_feature={j(split_feature)}", f"split_gain={j([1] * (n - 1))}",
             f"threshold={j(threshold)}", f"decision_type={j(decision_type)}",
             f"left_child={j(left)}", f"right_child={j(right)}", f"leaf_value={j(leaf_value)}",
             f"leaf_weight={j([1] * n)}", f"leaf_count={j([1] * n)}",
             f"internal_value={j([0] * (n - 1))}", f"internal_weight={j([1] * (n - 1))}",
             f"internal_count={j([1] * (n - 1))}"]
    if cats is not None:
        lines += [f"cat_boundaries={j(cats[0])}", f"cat_threshold={j(cats[1])}"]
    lines += [f"is_linear={is_linear}", "shrinkage=1"]
    return "\n".join(lines)


# -- the zoo ----------------------------------------------------------------------------------
@pytest.mark.parametrize("name", zoo.names("lightgbm"))
def test_zoo_case_bit_exact(name):
    case = zoo.get(name)
    f = treecomp.parse(case.path or case.model)
    assert f.input_dtype == "float64" and f.comparison == "<=" and f.accumulate_dtype == "float64"
    X = np.vstack([case.X, edge_rows(f, case.X, n=150, seed=1), special_rows(case.X, 2)])
    cat_cols = sorted({int(t.feature[i]) for t in f.trees for i in np.flatnonzero(t.cat_index >= 0)})
    if cat_cols:
        # odd category values in the categorical columns (negative, fractional, at and past the
        # bitsets' width, past int32, NaN): what LightGBM does with each is the oracle
        odd = np.array([-1.0, -0.5, 0.5, 1.5, 2.99, 31.0, 32.0, 64.0, 1e3, 2.0**31 - 1, 2.0**31,
                        -2.0**31, 1e10, np.nan])
        rows = np.repeat(X[:1], len(odd) * len(cat_cols), axis=0)
        for k, c in enumerate(cat_cols):
            rows[k * len(odd):(k + 1) * len(odd), c] = odd
        X = np.vstack([X, rows])
    for key, lib in case.library.items():
        assert_same(lib(X), OURS[key](f, X))


def test_zoo_covers_what_it_claims():
    forests = {n.split(":")[1]: treecomp.parse(zoo.get(n).path or zoo.get(n).model)
               for n in zoo.names("lightgbm")}
    assert ({f.transform.replace("softmax_seq", "softmax") for f in forests.values()}
            == {"identity", "exp", "sigmoid", "sigmoid2", "softmax"})
    assert forests["categorical"].stats()["categorical"]
    assert forests["file_binary_categorical"].stats()["categorical"]
    assert forests["wrapper_classifier_binary"].decision == "proba_gt_half"
    assert forests["wrapper_classifier_multiclass"].decision == "argmax_proba"
    assert all(forests[n].output_divisor == 10 for n in ("rf_regression", "rf_binary"))
    assert forests["rf_multiclass"].output_divisor == 6 and forests["rf_multiclass"].n_outputs == 3
    assert forests["constant"].trees[0].n_nodes == 1
    # early stopping really cut trees, and the parsed forest follows best_iteration
    b = zoo.get("lightgbm:early_stopping_booster").model
    assert 0 < b.best_iteration < b.num_trees() and forests["early_stopping_booster"].n_trees == b.best_iteration
    m = zoo.get("lightgbm:wrapper_regressor_early_stopping").model
    # (the wrapper, like lgb.train without keep_training_booster, keeps only the best trees)
    assert 0 < m.best_iteration_ < m.n_estimators
    assert forests["wrapper_regressor_early_stopping"].n_trees == m.best_iteration_
    X = zoo.get("lightgbm:early_stopping_booster").X
    assert not np.array_equal(b.predict(X, num_iteration=-1), interp.predict(forests["early_stopping_booster"], X))


def test_num_iteration_argument():
    case = zoo.get("lightgbm:multiclass")
    text = case.model.model_to_string(num_iteration=-1)
    for k in (1, 3):
        f = parse_lightgbm_string(text, num_iteration=k)
        assert f.n_trees == 3 * k
        assert_same(case.model.predict(case.X, num_iteration=k), interp.predict(f, case.X))


@pytest.mark.parametrize("objective", ["regression", "binary", "multiclass", "poisson"])
def test_random_forest_mode_divides_in_predict_only(objective, tmp_path):
    """LightGBM 4.7's rf mode (average_output): GBDT::Predict divides by the number of
    iterations before the transform; raw_score=True, pred_contrib=True and pred_leaf=True do
    not divide. Every Predictor path (the small-batch entry, batches, each backend, a
    num_iteration cut) and the artifacts' C entry point, raw and transformed."""
    import ctypes
    rng = np.random.default_rng(11)
    X = rng.normal(size=(300, 4))
    X[rng.random(X.shape) < 0.05] = np.nan
    s = np.nan_to_num(X[:, 0]) + np.nan_to_num(X[:, 1]) ** 2
    y = {"regression": s, "binary": s > 1, "poisson": np.abs(s),
         "multiclass": np.digitize(s, [0.3, 1.5])}[objective].astype(float)
    b = lgb.train({**BASE, "objective": objective, "boosting": "rf", "bagging_freq": 1,
                   "bagging_fraction": 0.6, "num_leaves": 6, "min_data_in_leaf": 5,
                   **({"num_class": 3} if objective == "multiclass" else {})},
                  lgb.Dataset(X, y), 7)
    f = treecomp.parse(b)
    assert f.output_divisor == 7 and not f.average
    rows = np.vstack([X[:80], special_rows(X, 4)])
    raw = b.predict(rows, raw_score=True)
    assert not np.array_equal(raw.reshape(-1), b.predict(rows).reshape(-1))  # it does divide
    assert_same(b.predict(rows), interp.predict(f, rows))
    assert_same(raw, interp.decision_function(f, rows))
    for k in (1, 3):
        g = parse_lightgbm_string(b.model_to_string(), num_iteration=k)
        assert_same(b.predict(rows, num_iteration=k), interp.predict(g, rows))
        assert_same(b.predict(rows, num_iteration=k, raw_score=True), interp.decision_function(g, rows))
    leaves = b.predict(rows, pred_leaf=True)
    contrib = b.predict(rows, pred_contrib=True)
    for backend in ("arrays", "c", "llvm"):
        p = treecomp.compile(f, backend=backend)
        for Z in (rows, rows[:1], rows[:5]):
            assert_same(b.predict(Z), p.predict(Z))
            assert_same(b.predict(Z, raw_score=True), p.decision_function(Z))
        assert_same(leaves, p.apply(rows))
        c = p.contributions(rows).reshape(contrib.shape)  # TreeSHAP: a few ULP, undivided
        np.testing.assert_allclose(c, contrib, rtol=0, atol=1e-9 * np.abs(contrib).max())
        # the artifact's C entry point: TREECOMP_RAW the undivided sum, TREECOMP_TRANSFORM
        # predict's values (the division, then the link)
        so = tmp_path / f"{backend}.so"
        p.save(so)
        lib = ctypes.CDLL(str(so))
        lib.treecomp_predict.argtypes = [ctypes.c_void_p, ctypes.c_int32, ctypes.c_int64,
                                         ctypes.c_void_p, ctypes.c_uint32]
        Z = np.ascontiguousarray(rows)
        for flags, want in ((0, raw), (1, b.predict(rows))):
            out = np.zeros((len(Z), f.n_outputs))
            assert lib.treecomp_predict(Z.ctypes.data, 64, len(Z), out.ctypes.data, flags) == 0
            assert_same(np.asarray(want).reshape(out.shape), out)


def test_random_forest_mode_classifier_wrapper():
    """LGBMClassifier(boosting_type="rf"): probabilities and labels from the divided sums,
    decision_function (raw_score) from the undivided ones."""
    rng = np.random.default_rng(12)
    X = rng.normal(size=(300, 4))
    y = np.digitize(X[:, 0] + X[:, 1] ** 2, [0.3, 1.5])
    for yy in (y > 0, y):
        m = lgb.LGBMClassifier(boosting_type="rf", subsample=0.6, subsample_freq=1, n_estimators=5,
                               num_leaves=6, min_child_samples=5, verbose=-1, n_jobs=1).fit(X, yy)
        p = treecomp.compile(m, backend="arrays")
        for Z in (X, X[:2]):
            assert_same(m.predict_proba(Z), p.predict_proba(Z))
            assert_same(m.predict(Z), p.predict(Z))
            assert_same(m.predict(Z, raw_score=True), p.decision_function(Z))


def test_random_forest_ir_round_trip_and_old_artifacts():
    """output_divisor is saved with the IR and the artifact's head; IR files and heads without
    it (every other model, older files) read as 1."""
    from treecomp import ir
    f = treecomp.parse(zoo.get("lightgbm:rf_binary").model)
    g = ir.Forest.from_bytes(f.to_bytes())
    assert g.output_divisor == f.output_divisor > 1 and g.digest() == f.digest()
    h = ir.head_of(f)
    assert ir.Head.from_json(h.to_json()).output_divisor == f.output_divisor
    plain = f.replace(output_divisor=1)
    assert "output_divisor" not in plain.meta() and plain.digest() != f.digest()
    for bad in (0, -3, 2.0, True, 1 << 40):
        with pytest.raises(InvalidModelError, match="output_divisor"):
            f.replace(output_divisor=bad)
    with pytest.raises(InvalidModelError, match="output_divisor"):
        f.replace(average=True)


# -- categorical corner cases -----------------------------------------------------------------
def _cat_booster():
    case = zoo.get("lightgbm:categorical")
    return case.model, treecomp.parse(case.model), case.X


def test_categorical_nan_negative_huge_and_unseen_go_right():
    b, f, X = _cat_booster()
    odd = [np.nan, -1.0, -2.5, -1e300, -np.inf, np.inf, 1e300, 2.0 ** 31, 2.0 ** 32 + 1, 1e10,
           63.0, 64.0, 100.0, 1000.0, 2.9, 9.99]
    for j in (0, 4):
        R = special_rows(X, 5, values=odd)
        assert_same(b.predict(R), interp.predict(f, R))
        # pin the claim: NaN and huge values behave exactly like a negative category
        rows = X[:40].copy()
        rows[:, j] = -1.0
        want = b.predict(rows)
        for v in (np.nan, 2.0 ** 31, 2.0 ** 32 + 1, np.inf, 1000.0):
            rows[:, j] = v
            np.testing.assert_array_equal(b.predict(rows), want)


def test_negative_fraction_is_category_zero():
    """x in (-1, 0) on a categorical column: LightGBM casts (int)x == 0, i.e. category 0; the
    forest's category_rule="trunc" says the same."""
    b, f, X = _cat_booster()
    rows = X[:100].copy()
    differs_from_minus_one = 0
    for v in (-0.5, -0.999, -1e-300, -K_ZERO, -5e-324):
        rows[:, 0] = v
        rows0, rows_neg = rows.copy(), rows.copy()
        rows0[:, 0], rows_neg[:, 0] = 0.0, -1.0
        lib = b.predict(rows)
        np.testing.assert_array_equal(lib, b.predict(rows0))         # LightGBM: category 0
        np.testing.assert_array_equal(interp.predict(f, rows), lib)
        differs_from_minus_one += int(np.sum(lib != b.predict(rows_neg)))
    assert differs_from_minus_one > 0  # category 0 goes left in this model, so it matters


# -- zero band and missing types, against hand-written models ---------------------------------
THRESHOLDS = [-K_ZERO, -1e-36, -0.0, 0.0, 1e-36, K_ZERO, np.nextafter(K_ZERO, 1),
              np.nextafter(-K_ZERO, -1), -1.0, 1.0, 1e-300, -1e-300]


@pytest.mark.parametrize("decision_type", [0, 2, 4, 6, 8, 10])
def test_numeric_split_zero_band_and_missing(decision_type):
    vals = np.array([np.nan, np.inf, -np.inf, -1.0, 1.0, 2.0, -2.0, *BAND,
                     *THRESHOLDS, *[np.nextafter(t, s) for t in THRESHOLDS for s in (-1, 1)]])[:, None]
    grew = False
    for thr in THRESHOLDS:
        text = lib_model_text([tree_text([0], [float(thr)], [decision_type], [-1], [-2], [1.0, 2.0])])
        f = parse_lightgbm_string(text)
        assert_same(lgb.Booster(model_str=text).predict(vals), interp.predict(f, vals))
        grew |= f.trees[0].n_nodes > 3
    # missing_type=Zero against the threshold needs the three-node expansion
    assert grew == (decision_type in (4, 6))


def test_zero_as_missing_trained_model_is_exact():
    rng = np.random.default_rng(8)
    X = rng.normal(size=(300, 4))
    X[rng.random(X.shape) < 0.3] = 0.0
    X[rng.random(X.shape) < 0.05] = np.nan
    y = X[:, 0] + np.nan_to_num(X[:, 1]) + (X[:, 2] == 0) + rng.normal(size=300) * 0.1
    b = lgb.train({**BASE, "objective": "regression", "zero_as_missing": True, "num_leaves": 8,
                   "min_data_in_leaf": 5}, lgb.Dataset(X, y), 10)
    f = treecomp.parse(b)
    sizes = [2 * t["num_leaves"] - 1 for t in b.dump_model()["tree_info"]]
    assert any(t.n_nodes > s for t, s in zip(f.trees, sizes))  # some nodes were expanded
    R = np.vstack([X, edge_rows(f, X, n=300, seed=3), special_rows(X, 4)])
    assert_same(b.predict(R), interp.predict(f, R))


def test_zero_as_missing_expansion_is_bounded():
    # a right-leaning chain of "zero goes right against the threshold" (missing Zero, default
    # right, t > kZ) nodes: each one copies the rest of the chain twice
    d = 20

    def chain(decision_types):
        return lib_model_text([tree_text([0] * d, [1.0 + i for i in range(d)], decision_types,
                                         [-(i + 1) for i in range(d)],
                                         [i + 1 for i in range(d - 1)] + [-(d + 1)],
                                         [float(i) for i in range(d + 1)])])

    with pytest.raises(UnsupportedModelError, match=r"missing_type=Zero \(zero_as_missing=True\)"):
        parse_lightgbm_string(chain([4] * d))   # 2**20 nodes: refused
    text = chain([4] * 5 + [8] * (d - 5))         # 5 expanding nodes: ~32x, accepted and exact
    f = parse_lightgbm_string(text)
    assert f.trees[0].n_nodes > 16 * (2 * d + 1)
    vals = np.array([np.nan, *BAND, *np.arange(-1, 22, 0.5)])[:, None]
    assert_same(lgb.Booster(model_str=text).predict(vals), interp.predict(f, vals))


def test_missing_none_nan_goes_where_zero_goes():
    case = zoo.get("lightgbm:no_missing_zeros")
    f = treecomp.parse(case.model)
    assert all(not (t.default_left[i] ^ (0.0 <= t.threshold[i]))
               for t in f.trees for i in np.flatnonzero(t.left >= 0))
    rows = case.X[:80].copy()
    for j in range(rows.shape[1]):
        r_nan, r_zero = rows.copy(), rows.copy()
        r_nan[:, j], r_zero[:, j] = np.nan, 0.0
        np.testing.assert_array_equal(case.model.predict(r_nan), case.model.predict(r_zero))
        assert_same(case.model.predict(r_nan), interp.predict(f, r_nan))


def test_categorical_bitsets_of_different_widths():
    # two categorical splits in one tree: a 1-word set {0, 5} and a 2-word set {33, 40}
    t = tree_text([0, 0], [0.0, 1.0], [1, 1], [-1, -2], [1, -3], [1.0, 2.0, 3.0],
                  cats=([0, 1, 3], [(1 << 0) | (1 << 5), 0, (1 << 1) | (1 << 8)]))
    text = lib_model_text([t])
    f = parse_lightgbm_string(text)
    assert f.trees[0].cat_bits.shape == (2, 2)
    vals = np.array([np.nan, -1.0, 0.0, -0.0, 0.7, 5.0, 5.9, 6.0, 31.0, 32.0, 33.0, 33.5, 40.0, 41.0,
                     63.0, 64.0, 1e9, 2.0 ** 31, np.inf, -np.inf])[:, None]
    assert_same(lgb.Booster(model_str=text).predict(vals), interp.predict(f, vals))


def _random_tree(rng: np.random.Generator, n_leaves: int, shuffle: bool) -> str:
    """A random tree in LightGBM's layout: features 0, 1 numeric (every missing type, thresholds
    on and around the zero band), feature 2 categorical. With shuffle, internal node ids are
    permuted (root stays 0), so children may precede parents and the frontend must renumber."""
    lc, rc, parent_of_leaf = [], [], {0: None}
    for new in range(n_leaves - 1):          # split a random leaf, like LightGBM's Split()
        leaf = int(rng.choice(list(parent_of_leaf)))
        p = parent_of_leaf.pop(leaf)
        if p is not None:
            (lc if p[1] == 0 else rc)[p[0]] = new
        lc.append(~leaf)
        rc.append(~(new + 1))
        parent_of_leaf[leaf], parent_of_leaf[new + 1] = (new, 0), (new, 1)
    k = n_leaves - 1
    perm = np.concatenate([[0], 1 + rng.permutation(k - 1)]) if shuffle else np.arange(k)
    remap = lambda c: int(perm[c]) if c >= 0 else c  # noqa: E731
    L, R = [0] * k, [0] * k
    for i in range(k):
        L[perm[i]], R[perm[i]] = remap(lc[i]), remap(rc[i])
    feats = rng.integers(0, 3, k)
    pool = [-K_ZERO, K_ZERO, -1e-36, 0.0, 1e-36, -0.5, 0.5, 1.5, -1.5]
    thr, dt, bounds, words = [], [], [0], []
    for f in feats:
        if f == 2:
            thr.append(float(len(bounds) - 1))
            dt.append(1 | int(rng.integers(0, 3)) << 2)
            w = [int(x) for x in rng.integers(0, 2 ** 32, int(rng.integers(1, 3)), dtype=np.uint64)]
            words += w
            bounds.append(bounds[-1] + len(w))
        else:
            thr.append(float(rng.choice(pool)))
            dt.append(int(rng.integers(0, 2)) << 1 | int(rng.integers(0, 3)) << 2)
    cats = (bounds, words) if len(bounds) > 1 else None
    return tree_text(list(feats), thr, dt, L, R, list(rng.normal(size=n_leaves)), cats=cats)


def test_random_trees_against_lightgbm():
    rng = np.random.default_rng(12)
    vals = np.array([np.nan, -np.inf, np.inf, -2.0, -1.0, -1.5, 1.5, 0.5, 3.0, 5.0, 33.0, 40.0,
                     63.0, 100.0, *BAND])
    X = rng.choice(vals, size=(400, 3))
    expanded = 0
    for m in range(12):
        trees = [_random_tree(rng, int(rng.integers(2, 24)), shuffle=m % 2 == 1) for _ in range(3)]
        text = lib_model_text(trees, n_features=3)
        f = parse_lightgbm_string(text)
        assert_same(lgb.Booster(model_str=text).predict(X), interp.predict(f, X))
        sizes = [int(t.split("\n", 1)[0].split("=")[1]) for t in trees]  # num_leaves
        expanded += sum(t.n_leaves > n for t, n in zip(f.trees, sizes))
    assert expanded > 0


# -- outputs ----------------------------------------------------------------------------------
def test_binary_label_tie_at_half():
    """LGBMClassifier labels are argmax([1 - p, p]), i.e. p > 0.5 ('proba_gt_half')."""
    t = tree_text([0, 0], [0.0, 1.0], [2, 2], [-1, -2], [1, -3], [0.0, 1e-17, -1e-17])
    text = lib_model_text([t], objective="binary sigmoid:1")
    f = parse_lightgbm_string(text, classes=np.array([0, 1]))
    X = np.array([[-1.0], [0.5], [2.0]])
    p = lgb.Booster(model_str=text).predict(X)
    assert_same(np.argmax(np.vstack((1.0 - p, p)).T, axis=1), interp.predict(f, X))
    assert interp.predict(f, X).tolist() == [0, 0, 0] and p[0] == 0.5


def test_many_classes_softmax_sums_sequentially():
    """LightGBM's Softmax sums exp() left to right; numpy's row sum is pairwise from 8 terms on.
    The raw margins are exact; with the IR's "softmax" the probabilities are within a proven
    bound, and a sequential float64 sum (a "softmax_seq" transform) reproduces LightGBM bit for
    bit."""
    rng = np.random.default_rng(9)
    X = rng.normal(size=(400, 4))
    K = 10
    y = np.clip(np.floor((X[:, 0] + 2.5) * K / 5), 0, K - 1)
    b = lgb.train({**BASE, "objective": "multiclass", "num_class": K, "num_leaves": 4,
                   "min_data_in_leaf": 5}, lgb.Dataset(X, y), 5)
    f = treecomp.parse(b)
    raw = interp.decision_function(f, X)
    assert_same(b.predict(X, raw_score=True), raw)
    want, got = b.predict(X), interp.predict(f, X)
    if f.transform == "softmax_seq":
        assert_same(want, got)
    else:  # numpy's pairwise row sum: |relative error| < (2K - 1) * eps / 2 per probability
        assert f.transform == "softmax"
        assert np.all(np.abs(got - want) <= K * np.finfo(float).eps * want)
        assert not np.array_equal(got, want)  # (so this test notices when outputs.py changes)
    e = outputs.libm_exp(raw - raw.max(axis=1, keepdims=True))  # LightGBM's std::exp is libm's
    s = np.zeros(len(X))
    for k in range(K):
        s += e[:, k]
    assert_same(want, e / s[:, None])


@pytest.mark.parametrize("objective", ["binary sigmoid:1", "binary sigmoid:2", "cross_entropy",
                                       "poisson", "tweedie"])
def test_transforms_bit_exact_over_many_margins(objective):
    """numpy's exp (outputs.py) against LightGBM's std::exp on 2000 distinct margins."""
    d = 2000
    rng = np.random.default_rng(6)
    leaves = rng.uniform(-40, 40, d + 1)
    t = tree_text([0] * d, [-float(i) for i in range(d)], [2] * d,
                  [i + 1 for i in range(d - 1)] + [-(d + 1)], [-(i + 1) for i in range(d)],
                  list(leaves))
    text = lib_model_text([t], objective=objective)
    f = parse_lightgbm_string(text)
    X = np.concatenate([[0.5], -np.arange(d) - 0.5])[:, None]
    assert_same(lgb.Booster(model_str=text).predict(X), interp.predict(f, X))


def test_integer_arrays_are_cast_to_float32_by_lightgbm():
    """LightGBM's predict casts non-float numpy input to float32 (4.7, basic._np2d_to_np1d):
    integers beyond 2**24 round; so does treecomp (Forest.input_rule "lightgbm"), while
    float64 input keeps its value."""
    t = tree_text([0], [16777216.5], [2], [-1], [-2], [1.0, 2.0])
    text = lib_model_text([t])
    f = parse_lightgbm_string(text)
    assert f.input_rule == "lightgbm"
    Xi = np.array([[16777217], [3]], dtype=np.int64)
    b = lgb.Booster(model_str=text)
    assert b.predict(Xi).tolist() == [1.0, 1.0]              # 16777217 -> float32 16777216
    assert b.predict(Xi.astype(np.float64)).tolist() == [2.0, 1.0]
    assert interp.predict(f, Xi).tolist() == [1.0, 1.0]
    assert interp.predict(f, Xi.astype(np.float64)).tolist() == [2.0, 1.0]
    assert treecomp.compile(f, backend="arrays").predict(Xi).tolist() == [1.0, 1.0]


# -- structure: deep trees, many trees --------------------------------------------------------
def test_deep_chain_tree_no_recursion():
    d = 3000  # left-leaning chain: node i splits x <= -i, right child is a leaf
    t = tree_text([0] * d, [-float(i) for i in range(d)], [2] * d,
                  [i + 1 for i in range(d - 1)] + [-(d + 1)], [-(i + 1) for i in range(d)],
                  [float(i) for i in range(d + 1)])
    text = lib_model_text([t])
    f = parse_lightgbm_string(text)
    assert f.trees[0].max_depth == d
    vals = np.array([[1.0], [-0.5], [-1500.0], [-2998.5], [-2999.0], [-5000.0], [np.nan]])
    assert_same(lgb.Booster(model_str=text).predict(vals), interp.predict(f, vals))


def test_thousand_trees_parse_fast():
    case = zoo.get("lightgbm:multiclass")
    text = case.model.model_to_string()
    head, rest = text.split("Tree=0\n", 1)
    body, tail = rest.split("end of trees", 1)
    blocks = ("Tree=0\n" + body).split("\n\n\n")
    blocks = [blk for blk in blocks if blk.strip()]
    reps = -(-1002 // len(blocks))
    trees = [blk.split("\n", 1)[1] for blk in blocks] * reps
    head = "\n".join(l for l in head.splitlines() if not l.startswith("tree_sizes")) + "\n"
    big = head + "".join(f"Tree={i}\n{t}\n\n\n" for i, t in enumerate(trees)) + "end of trees" + tail
    # a guard against per-tree quadratic work, on the thread's CPU time (a loaded machine's
    # descheduling does not count)
    t0 = time.thread_time()
    f = parse_lightgbm_string(big)
    elapsed = time.thread_time() - t0
    assert f.n_trees == len(trees) >= 1000
    assert elapsed < 2.0, f"parsing {f.n_trees} trees took {elapsed:.2f}s"
    X = case.X[:50]
    assert_same(lgb.Booster(model_str=big).predict(X, raw_score=True), interp.decision_function(f, X))


# -- files ------------------------------------------------------------------------------------
def test_text_file_parse_does_not_import_lightgbm(tmp_path):
    case = zoo.get("lightgbm:file_binary_categorical")
    code = textwrap.dedent(f"""
        import sys
        import treecomp
        f = treecomp.parse({case.path!r})
        assert "lightgbm" not in sys.modules, "lightgbm was imported"
        print(f.digest())
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == treecomp.parse(case.model).digest()


def test_booster_and_its_saved_file_agree(tmp_path):
    case = zoo.get("lightgbm:early_stopping_booster")
    path = tmp_path / "m.txt"
    case.model.save_model(str(path))  # saves best_iteration trees, like predict uses
    assert treecomp.parse(path).digest() == treecomp.parse(case.model).digest()


# -- errors -----------------------------------------------------------------------------------
def _small_text(**params) -> str:
    rng = np.random.default_rng(4)
    X = rng.normal(size=(200, 3))
    y = X[:, 0] + rng.normal(size=200) * 0.1
    if params.get("objective") in ("binary", "cross_entropy_lambda", "multiclass"):
        y = (y > 0).astype(float)
    return lgb.train({**BASE, "num_leaves": 4, "min_data_in_leaf": 5, **params},
                     lgb.Dataset(X, y), 3).model_to_string()


# linear trees (linear_tree=True): tests/test_frontend_lightgbm_linear.py


@pytest.mark.parametrize("params, match", [
    ({"objective": "regression", "reg_sqrt": True}, "reg_sqrt"),
    ({"objective": "binary", "sigmoid": 0.5}, "sigmoid scale"),
    ({"objective": "cross_entropy_lambda"}, "cross_entropy_lambda"),
])
def test_unsupported_objectives(params, match):
    with pytest.raises(UnsupportedModelError, match=match):
        parse_lightgbm_string(_small_text(**params))


def test_corrupt_files(tmp_path):
    good = _small_text(objective="regression")
    cases = {
        "truncated.txt": good[: good.index("end of trees") - 40],
        "truncated_header.txt": good[: good.index("Tree=0")],
        "garbage.txt": "hello world\n",
        "empty.txt": "",
        "badnum.txt": good.replace("leaf_value=", "leaf_value=abc ", 1),
        "badchild.txt": good.replace("left_child=", "left_child=7", 1),
        "cycle.txt": good.replace("left_child=1", "left_child=0", 1),
        "nofeat.txt": good.replace("max_feature_idx=2", "max_feature_idx=x"),
    }
    for name, text in cases.items():
        p = tmp_path / name
        p.write_text(text)
        with pytest.raises(InvalidModelError):
            treecomp.parse(p)
    (tmp_path / "binary.txt").write_bytes(b"\x80\x81\xff\x00")
    with pytest.raises(InvalidModelError):
        treecomp.parse(tmp_path / "binary.txt")
    with pytest.raises(UnsupportedModelError, match="version"):
        parse_lightgbm_string(good.replace("version=v4", "version=v9"))


def test_wrapper_errors():
    with pytest.raises(NotFittedError):
        treecomp.parse(lgb.LGBMRegressor())
    rng = np.random.default_rng(5)
    X, y = rng.normal(size=(100, 3)), rng.integers(0, 2, 100)

    def logloss(y_true, raw):
        p = 1.0 / (1.0 + np.exp(-raw))
        return p - y_true, p * (1.0 - p)

    m = lgb.LGBMClassifier(objective=logloss, n_estimators=3, **BASE).fit(X, y)
    with pytest.raises(UnsupportedModelError, match="custom"):
        treecomp.parse(m)
    f = treecomp.parse(m.booster_)  # the Booster itself predicts raw scores: supported
    assert_same(m.booster_.predict(X), interp.predict(f, X))


# -- files as LightGBM itself reads them (issue 20 items 5, 10) ----------------------------------
def _multiclass_text() -> str:
    return _small_text(objective="multiclass", num_class=3)


def _rows3(seed: int) -> np.ndarray:
    X = np.random.default_rng(seed).normal(size=(60, 3))
    X[::7, 1] = np.nan
    return X


def _same_as_lightgbm(text: str, X: np.ndarray, same_trees: bool = True) -> None:
    f = parse_lightgbm_string(text)
    b = lgb.Booster(model_str=text)
    assert f.n_trees == b.num_trees() or not same_trees
    assert_same(b.predict(X, raw_score=True), interp.decision_function(f, X))


def test_no_end_of_trees_line():
    """LightGBM stops at the first line after the trees that is not a "Tree=" block: files
    without an "end of trees" line (older writers, treelite's toy_categorical) load."""
    text = _small_text(objective="regression")
    head, tail = text.split("end of trees", 1)
    for variant in (head, head + "\nfeature importances:\nColumn_0=3\n",
                    "\n".join(l for l in head.splitlines() if not l.startswith("tree_sizes")) + "\n"):
        _same_as_lightgbm(variant, _rows3(1))


def test_tree_sizes_decide_which_trees_load():
    """With a tree_sizes line LightGBM loads exactly the trees it lists, at those offsets:
    fewer sizes than trees -> the extra trees are ignored."""
    text = _small_text(objective="regression")
    line = next(l for l in text.splitlines() if l.startswith("tree_sizes="))
    sizes = line.split("=")[1].split()
    assert len(sizes) == 3
    fewer = text.replace(line, "tree_sizes=" + " ".join(sizes[:2]))
    _same_as_lightgbm(fewer, _rows3(2))
    assert parse_lightgbm_string(fewer).n_trees == 2
    # two sizes merged: the second offset lands on Tree=2, so LightGBM loads trees 0 and 2
    skip = text.replace(line, f"tree_sizes={int(sizes[0]) + int(sizes[1])} {sizes[2]}")
    _same_as_lightgbm(skip, _rows3(2))
    assert parse_lightgbm_string(skip).n_trees == 2


@pytest.mark.parametrize("edit, match", [
    (lambda s: s + [s[0]] * 5, "tree_sizes puts tree 3"),     # LightGBM: "expect a tree here"
    (lambda s: s + ["99999999"], "tree_sizes lists 4 trees"),  # LightGBM reads past its buffer
    (lambda s: [str(int(s[0]) - 3)] + s[1:], "tree 0 does not end"),  # ... into the next tree
    (lambda s: [str(int(s[0]) + 3)] + s[1:], "tree_sizes puts tree 1"),
])
def test_tree_sizes_that_lightgbm_cannot_follow_are_invalid(edit, match):
    text = _small_text(objective="regression")
    line = next(l for l in text.splitlines() if l.startswith("tree_sizes="))
    bad = text.replace(line, "tree_sizes=" + " ".join(edit(line.split("=")[1].split())))
    with pytest.raises(InvalidModelError, match=match):
        parse_lightgbm_string(bad)


def test_tree_sizes_without_closing_empty_line_is_invalid():
    """A last tree cut right after its last line: LightGBM would read past its buffer."""
    text = _small_text(objective="regression")
    cut = text[:text.index("end of trees")].rstrip("\n") + "\n"
    no_sizes = "\n".join(l for l in cut.splitlines() if not l.startswith("tree_sizes")) + "\n"
    for bad in (cut, no_sizes):
        with pytest.raises(InvalidModelError, match="truncated"):
            parse_lightgbm_string(bad)


@pytest.mark.parametrize("old, new, match", [
    ("num_class=3", "num_class=2", "num_class=2 disagrees with num_tree_per_iteration=3"),
    ("num_class=3", "num_class=4", "num_class=4 disagrees"),
    ("num_tree_per_iteration=3", "num_tree_per_iteration=1", "disagrees"),
    ("multiclass num_class:3", "multiclass num_class:2", "num_class:2 but the header num_class=3"),
])
def test_num_class_disagreements_are_invalid(old, new, match):
    """LightGBM loads these and returns uninitialised memory or reads past its output buffer
    (checked on 4.7): nothing to reproduce, refused."""
    text = _multiclass_text()
    assert old in text
    with pytest.raises(InvalidModelError, match=match):
        parse_lightgbm_string(text.replace(old, new, 1))


@pytest.mark.parametrize("params, old, new", [
    ({"objective": "multiclass", "num_class": 3}, "multiclass num_class:3", "multiclass"),
    ({"objective": "binary"}, "binary sigmoid:1", "binary"),
    ({"objective": "binary"}, "binary sigmoid:1", "binary sigmoid:0"),
    ({"objective": "regression"}, "feature_names=", "feature_namesX="),
    ({"objective": "regression"}, "label_index=0\n", ""),
])
def test_what_lightgbm_refuses_is_invalid(params, old, new):
    text = _small_text(**params)
    assert old in text
    bad = text.replace(old, new, 1)
    with pytest.raises(lgb.basic.LightGBMError):
        lgb.Booster(model_str=bad)
    with pytest.raises(InvalidModelError):
        parse_lightgbm_string(bad)


def test_incomplete_last_iteration_is_ignored_like_lightgbm():
    """LightGBM predicts with len(trees) // num_tree_per_iteration iterations."""
    text = _multiclass_text()
    head, rest = text.split("Tree=0\n", 1)
    head = "\n".join(l for l in head.splitlines() if not l.startswith("tree_sizes")) + "\n"
    body, tail = rest.split("end of trees", 1)
    blocks = [b for b in ("Tree=0\n" + body).split("\n\n\n") if b.strip()]
    assert len(blocks) == 9
    partial = head + "".join(b + "\n\n\n" for b in blocks[:7]) + "end of trees" + tail
    _same_as_lightgbm(partial, _rows3(3), same_trees=False)  # num_trees() counts the 7th
    assert parse_lightgbm_string(partial).n_trees == 6


def test_lightgbm_file_named_model_is_read_by_content(tmp_path):
    text = _small_text(objective="regression")
    for name in ("m.model", "m.bin", "m"):
        (tmp_path / name).write_text(text)
        f = treecomp.parse(tmp_path / name)
        assert_same(lgb.Booster(model_str=text).predict(_rows3(4)), interp.predict(f, _rows3(4)))


# -- what LightGBM reads token by token (frontend fuzz findings) --------------------------------
def _tree_line(text: str, key: str, tree: int = 1) -> str:
    block = text.split(f"Tree={tree}\n", 1)[1]
    return next(l for l in block.splitlines() if l.startswith(key + "="))


@pytest.mark.parametrize("key, edit", [
    ("split_feature", lambda v: v.replace(" ", "\t ", 1)),   # Atoi stops at the tab: 0s after it
    ("split_feature", lambda v: v.replace(" ", "  ", 1)),
    ("split_feature", lambda v: v + " "),
    ("split_feature", lambda v: v.replace("0", "\u0660", 1) if "0" in v else "\u0661" + v[1:]),
    ("left_child", lambda v: v.replace("1", "1_0", 1)),
    ("threshold", lambda v: v.replace(" ", "\t", 1)),
    ("threshold", lambda v: v.replace(" ", " 1_0 ", 1)[: len(v) + 2]),
    ("leaf_value", lambda v: v.replace(" ", "x ", 1)),
    ("num_leaves", lambda v: "4.0"),
    ("num_cat", lambda v: "0x"),
])
def test_arrays_must_be_plain_numbers(key, edit):
    """LightGBM reads arrays with Atoi / AtofPrecise token by token: a tab ("0 1\t 1 1 1"
    reads [0, 1, 0, 0, 0]), '_', non-ASCII digits or trailing junk are read differently from
    Python's int() / float(): refused instead of guessed."""
    text = _small_text(objective="regression")
    line = _tree_line(text, key)
    k, v = line.split("=", 1)
    bad = text.replace(line, f"{k}={edit(v)}", 1)
    assert bad != text
    with pytest.raises(InvalidModelError, match=key):
        parse_lightgbm_string(bad.replace(next(l for l in bad.splitlines()
                                               if l.startswith("tree_sizes=")) + "\n", ""))


def test_tab_in_split_feature_reads_like_lightgbm_would_not():
    """The fuzz case: LightGBM predicts with zeros after the tab; treecomp must not predict."""
    text = _small_text(objective="regression")
    text = text.replace(next(l for l in text.splitlines() if l.startswith("tree_sizes=")) + "\n", "")
    line = _tree_line(text, "split_feature")
    tabbed = text.replace(line, line.replace(" ", "\t ", 1), 1)
    with pytest.raises(InvalidModelError, match="single spaces"):
        parse_lightgbm_string(tabbed)


@pytest.mark.parametrize("edit, match", [
    (lambda t: t.replace("num_cat=0", "num_cat=1", 1), "no cat_boundaries"),
    (lambda t: t.replace("num_cat=0\n", "", 1), "num_cat"),
])
def test_num_cat_is_required_and_needs_cat_boundaries(edit, match):
    """Tree::Tree(const char*): "Tree model should contain num_cat field" / "... cat_boundaries
    field" (LightGBM aborts the process: the Fatal is thrown inside OpenMP)."""
    text = _small_text(objective="regression")
    text = text.replace(next(l for l in text.splitlines() if l.startswith("tree_sizes=")) + "\n", "")
    with pytest.raises(InvalidModelError, match=match):
        parse_lightgbm_string(edit(text))


def test_crlf_files_are_read_as_bytes(tmp_path):
    """tree_sizes are byte offsets: a CRLF file whose sizes were computed for LF (LightGBM
    aborts: 'Model format error, expect a tree here') is refused; CRLF without tree_sizes, or
    with sizes that land, reads like LightGBM."""
    text = _small_text(objective="regression")
    sizes_line = next(l for l in text.splitlines() if l.startswith("tree_sizes="))
    stale = tmp_path / "stale.txt"
    stale.write_bytes(text.replace("\n", "\r\n").encode())
    with pytest.raises(InvalidModelError):
        treecomp.parse(stale)
    X = _rows3(5)
    no_sizes = tmp_path / "no_sizes.txt"
    no_sizes.write_bytes(text.replace(sizes_line + "\n", "").replace("\n", "\r\n").encode())
    assert_same(lgb.Booster(model_file=str(no_sizes)).predict(X, raw_score=True),
                interp.decision_function(treecomp.parse(no_sizes), X))
    # sizes recomputed for CRLF: every tree line gains one byte
    blocks = text.split("end of trees")[0].split("Tree=")[1:]
    crlf_sizes = [len(("Tree=" + b).encode()) + ("Tree=" + b).count("\n") for b in blocks]
    good = tmp_path / "crlf_sizes.txt"
    good.write_bytes(text.replace(sizes_line, "tree_sizes=" + " ".join(map(str, crlf_sizes)))
                     .replace("\n", "\r\n").encode())
    assert_same(lgb.Booster(model_file=str(good)).predict(X, raw_score=True),
                interp.decision_function(treecomp.parse(good), X))


def test_empty_objective_and_malformed_parameters_are_invalid():
    """LightGBM segfaults on both: CreateObjectiveFunction("") takes Split("")[0];
    GetLoadedParam takes Split(line, ":")[1] of a parameters line without a value."""
    text = _small_text(objective="regression")
    obj = next(l for l in text.splitlines() if l.startswith("objective="))
    with pytest.raises(InvalidModelError, match="objective"):
        parse_lightgbm_string(text.replace(obj, "objective="))
    param = next(l for l in text.splitlines() if l.startswith("[boosting: "))
    with pytest.raises(InvalidModelError, match="parameters"):
        parse_lightgbm_string(text.replace(param, "[boost\ning: gbdt]"))
    parse_lightgbm_string(text.replace(param, "[boosting: ]"))  # a parameter without a value: fine


def test_objective_line_is_split_on_spaces_only(tmp_path):
    """LightGBM splits `objective=` on ' ': with a tab, "binary\tsigmoid:1" is one unknown name
    to it ("Unknown objective type name"), so it is refused here too, never read as binary."""
    rng = np.random.default_rng(4)
    X = rng.normal(size=(200, 3))
    b = lgb.train({**BASE, "objective": "binary"}, lgb.Dataset(X, (X[:, 0] > 0).astype(float)), 2)
    text = b.model_to_string()
    assert "objective=binary sigmoid:1\n" in text
    p = tmp_path / "tab.txt"
    p.write_text(text.replace("objective=binary sigmoid:1\n", "objective=binary\tsigmoid:1\n"))
    with pytest.raises(UnsupportedModelError, match="objective"):
        treecomp.parse(p)


def test_node_counts_are_cover_only():
    """leaf_count / internal_count only feed SHAP's cover: a single-leaf tree's empty
    leaf_count line (what LightGBM writes for a constant tree) is not read, and counts that
    cannot be parsed leave the model without cover (contributions refused), never unparsable."""
    split = tree_text([0], [0.5], [2], [-1], [-2], [1.0, 2.0])
    const = tree_text([], [], [], [], [], [0.25]).replace("leaf_count=1", "leaf_count=")
    f = parse_lightgbm_string(lib_model_text([split, const]))
    assert f.trees[0].cover is not None
    X = np.array([[0.0], [1.0], [np.nan]])
    np.testing.assert_array_equal(interp.predict_raw(f, X)[:, 0], [1.25, 2.25, 1.25])
    c = treecomp.compile(f, backend="arrays").contributions(X)
    np.testing.assert_array_equal(c.sum(axis=1), [1.25, 2.25, 1.25])
    bad = parse_lightgbm_string(lib_model_text([split.replace("leaf_count=1 1", "leaf_count=1 x"), const]))
    assert all(t.cover is None for t in bad.trees)
    np.testing.assert_array_equal(interp.predict_raw(bad, X), interp.predict_raw(f, X))
    with pytest.raises(UnsupportedModelError, match="cover"):
        treecomp.compile(bad, backend="arrays").contributions(X)


def test_bulk_numbers_fast_path_equals_float(monkeypatch):
    """_bulk reads plain-number lines with one np.fromstring; the result must be what float() /
    int() of every token gives (the list path), on a real model and on edge spellings."""
    import re as _re

    from treecomp.frontends import lightgbm as lgbm_frontend
    rng = np.random.default_rng(5)
    X = rng.normal(size=(400, 4))
    b = lgb.train({"objective": "regression", "num_leaves": 15, "verbose": -1},
                  lgb.Dataset(X, X[:, 0] * 2 + rng.normal(size=400)), num_boost_round=5)
    text = b.model_to_string()
    # edge spellings of the same thresholds / leaf values, as LightGBM's grammar allows them
    text = _re.sub(r"tree_sizes=[^\n]*\n", "", text)  # (byte offsets: the edits move them)
    edge = _re.sub(r"leaf_value=\S+", "leaf_value=+.5e0", text, 1)
    edge = _re.sub(r"threshold=\S+", "threshold=1.", edge, 1)
    edge = _re.sub(r"(\nleaf_value=\S+ )\S+", r"\g<1>-0000.25E+1", edge, 1)
    assert edge != text and "+.5e0" in edge and "-0000.25E+1" in edge
    for t in (text, edge):
        fast = parse_lightgbm_string(t).digest()
        with monkeypatch.context() as m:  # every line through the list path
            m.setattr(lgbm_frontend, "_NAMED_FLOAT", _re.compile(r""))
            m.setattr(lgbm_frontend, "_LONG_INT", _re.compile(r""))
            try:
                slow = parse_lightgbm_string(t).digest()
            except InvalidModelError as exc:
                slow = str(exc)
        assert fast == slow
    # a 25-digit integer is no int64: refused as before, not clamped
    big = text.replace("split_feature=", "split_feature=1234567890123456789012345 ", 1)
    with pytest.raises(InvalidModelError):
        parse_lightgbm_string(big)


# -- the bulk path (ir.build_trees over all plain trees at once) ----------------------------------
def _parse_ways(text: str, monkeypatch) -> list:
    """The Forest's digest (or the error): as parsed, and with every tree built on its own."""
    from treecomp.frontends import lightgbm as lgb_frontend
    from treecomp.ir import TreeBuildError

    def refuse(*a, **k):
        raise TreeBuildError("forced", 0)
    out = []
    for forced in (False, True):
        with monkeypatch.context() as m:
            if forced:
                m.setattr(lgb_frontend, "build_trees", refuse)
                m.setattr(lgb_frontend, "_plain_trees", refuse)
            try:
                out.append(parse_lightgbm_string(text).digest())
            except InvalidModelError as exc:
                out.append(f"{type(exc).__name__}: {exc}")
    return out


def test_bulk_trees_same_forest_as_tree_by_tree(monkeypatch):
    rng = np.random.default_rng(21)
    trees = []
    for i in range(40):
        if i % 7 == 3:
            trees.append(tree_text([], [], [], [], [], [float(rng.normal())]))  # a single leaf
        elif i % 5 == 0:  # numeric splits only, NaN as missing: the common, plain tree
            t = _random_tree(rng, int(rng.integers(2, 12)), shuffle=False)
            trees.append(re.sub(r"decision_type=.*", lambda m: "decision_type=" + " ".join(
                ["10"] * len(m.group(0).split("=")[1].split())), t).replace(
                "split_feature=2", "split_feature=1"))
        else:
            trees.append(_random_tree(rng, int(rng.integers(2, 12)), shuffle=i % 2 == 1))
    text = lib_model_text(trees, n_features=3)
    a, b = _parse_ways(text, monkeypatch)
    assert a == b and not a.startswith("Invalid"), (a, b)
    # the IR is the same data, and predicts what LightGBM predicts
    f = parse_lightgbm_string(text)
    X = special_rows(np.random.default_rng(0).normal(size=(300, 3)), 1)
    assert_same(lgb.Booster(model_str=text).predict(X), interp.predict(f, X))


@pytest.mark.parametrize("where", [0, 2])
def test_bulk_trees_errors_are_tree_by_tree_errors(where, monkeypatch):
    good = tree_text([0, 0], [0.5, 1.5], [10, 10], [1, -2], [-1, -3], [1.0, 2.0, 3.0])
    # internal node 1's children are both leaf 1 (leaf 2 is an orphan): Tree() refuses it
    bad = tree_text([0, 0], [0.5, 1.5], [10, 10], [1, -2], [-1, -2], [1.0, 2.0, 3.0])
    trees = [good] * 4
    trees[where] = bad
    a, b = _parse_ways(lib_model_text(trees), monkeypatch)
    assert a == b and a.startswith("InvalidModelError") and f"tree {where}" in a, (a, b)


@pytest.mark.parametrize("counts", ["5 3 2", "5 -0 2", "5 3.5 2", "5 3e0 2", "5 +3 2",
                                    "5 1234567890123456789012 2", "5 x 2"])
def test_count_lines_read_as_before(counts, monkeypatch):
    """leaf_count / internal_count (the cover) are read as integers where that gives the same
    float64 values as reading them as floats (-0 and non-integers take the float path); a line
    neither reads means no cover, as before."""
    from treecomp.frontends import lightgbm as lgb_frontend
    t = tree_text([0, 0], [0.5, 1.5], [10, 10], [1, -2], [-1, -3], [1.0, 2.0, 3.0])
    t = t.replace("leaf_count=1 1 1", f"leaf_count={counts}")
    text = lib_model_text([t, t])
    got = parse_lightgbm_string(text)
    with monkeypatch.context() as m:  # every count line through the float parse
        m.setattr(lgb_frontend, "_bulk_counts", lambda kvs, names, key, counts:
                  lgb_frontend._bulk(kvs, names, key, counts, np.float64))
        want = parse_lightgbm_string(text)
    assert got.digest() == want.digest()
    for a, b in zip(got.trees, want.trees):
        assert (a.cover is None) == (b.cover is None)
        if a.cover is not None:
            assert a.cover.tobytes() == b.cover.tobytes()  # -0.0 kept

