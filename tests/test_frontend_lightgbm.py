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
    # counts LightGBM reads and predicts with but no TreeSHAP can use: no cover either
    for counts in ("1 inf", "1 nan", "1 -1", "-inf 1"):
        odd = parse_lightgbm_string(lib_model_text([split.replace("leaf_count=1 1", f"leaf_count={counts}"),
                                                     const]))
        assert all(t.cover is None for t in odd.trees), counts
        np.testing.assert_array_equal(interp.predict_raw(odd, X), interp.predict_raw(f, X))
    odd = parse_lightgbm_string(lib_model_text([split.replace("internal_count=1", "internal_count=inf"),
                                                 const]))
    assert all(t.cover is None for t in odd.trees)


@pytest.mark.parametrize("reader", ["native", "python"])
def test_bulk_numbers_fast_path_equals_float(reader, monkeypatch):
    """_bulk reads plain-number lines with one np.fromstring (the native reader: with
    treecomp.numparse); the result must be what float() / int() of every token gives (the
    Python reader's list path), on a real model and on edge spellings."""
    import re as _re

    from treecomp.frontends import lightgbm as lgbm_frontend
    _use_reader(reader, monkeypatch)
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
            m.setattr(lgbm_frontend, "NATIVE", False)
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


def _use_reader(reader: str, monkeypatch) -> None:
    """Parse with the native reader (treecomp.numparse; skipped where it is not built) or the
    Python reader (lightgbm.NATIVE = False)."""
    from treecomp import numparse
    from treecomp.frontends import lightgbm as lgb_frontend
    if reader == "native" and not numparse.available():
        pytest.skip(f"the native number parser is not built: {numparse.UNAVAILABLE}")
    monkeypatch.setattr(lgb_frontend, "NATIVE", reader == "native")


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


@pytest.mark.parametrize("reader", ["native", "python"])
@pytest.mark.parametrize("counts", ["5 3 2", "5 -0 2", "5 3.5 2", "5 3e0 2", "5 +3 2",
                                    "5 1234567890123456789012 2", "5 x 2", "5 inf 2", "5 nan 2",
                                    "5 -1 2",
                                    "5 123456789012345678 2", "5 1234567890123456789 2"])
def test_count_lines_read_as_before(counts, reader, monkeypatch):
    """leaf_count / internal_count (the cover) are read as integers where that gives the same
    float64 values as reading them as floats (-0 and non-integers take the float path); a line
    neither reads means no cover, as before. The native reader parses them as floats."""
    from treecomp.frontends import lightgbm as lgb_frontend
    _use_reader(reader, monkeypatch)
    t = tree_text([0, 0], [0.5, 1.5], [10, 10], [1, -2], [-1, -3], [1.0, 2.0, 3.0])
    t = t.replace("leaf_count=1 1 1", f"leaf_count={counts}")
    text = lib_model_text([t, t])
    got = parse_lightgbm_string(text)
    with monkeypatch.context() as m:  # every count line through the float parse
        m.setattr(lgb_frontend, "NATIVE", False)
        m.setattr(lgb_frontend, "_bulk_counts", lambda kvs, names, key, counts:
                  lgb_frontend._bulk(kvs, names, key, counts, np.float64))
        want = parse_lightgbm_string(text)
    assert got.digest() == want.digest()
    for a, b in zip(got.trees, want.trees):
        assert (a.cover is None) == (b.cover is None)
        if a.cover is not None:
            assert a.cover.tobytes() == b.cover.tobytes()  # -0.0 kept



# -- the native reader (treecomp.numparse's LightGBM functions) ------------------------------------
def _native_or_skip():
    from treecomp import numparse
    if not numparse.available():
        pytest.skip(f"the native number parser is not built: {numparse.UNAVAILABLE}")
    return numparse


def _near_halfway_tokens(rng, n: int) -> list[str]:
    """Decimals of 16-20 significant digits within a few units of their last digit of the
    midpoint between two adjacent doubles (where a once-rounded wider quotient can land
    exactly on the midpoint while the decimal is not), over exponents 1e-27..1e27."""
    import decimal
    out = []
    for _ in range(n):
        x = float(rng.normal()) * 10.0 ** int(rng.integers(-27, 27))
        mid = (decimal.Decimal(x) + decimal.Decimal(float(np.nextafter(x, np.inf)))) / 2
        with decimal.localcontext() as c:
            c.prec = int(rng.integers(16, 21))
            c.rounding = (decimal.ROUND_DOWN, decimal.ROUND_UP, decimal.ROUND_HALF_EVEN)[int(rng.integers(3))]
            out.append(str(+mid))
    return out


def _float_tokens(rng, n: int) -> list[str]:
    out = []
    for i in range(n):
        r = rng.random()
        if r < 0.45:  # what LightGBM writes: %.17g
            out.append("%.17g" % (float(rng.normal()) * 10.0 ** int(rng.integers(-40, 40))))
        elif r < 0.6:  # plain decimals of 1-25 digits, any spelling the grammar allows
            digits = "".join(map(str, rng.integers(0, 10, int(rng.integers(1, 26)))))
            cut = int(rng.integers(0, len(digits) + 1))
            body = (digits[:cut] + "." + digits[cut:]) if rng.random() < 0.7 else digits
            exp = ("", "e7", "E-3", "e+22", "e-22", "e23", "e-400", "e400", "e0")[int(rng.integers(9))]
            out.append(("", "-", "+")[int(rng.integers(3))] + body + exp)
        elif r < 0.75:  # integers near 2^53 .. 2^64 (exact in a long double, midpoints of doubles)
            v = (1 << int(rng.integers(53, 64))) + int(rng.integers(-4096, 4096))
            k = int(rng.integers(0, 8))
            s = str(v)
            out.append(s[:len(s) - k] + "." + s[len(s) - k:] if k else s)
        else:
            out.append("%.17g" % float(rng.choice([5e-324, 2.2250738585072014e-308, 1.7976931348623157e308,
                                                    0.1, 1 / 3, 2.0 ** -1074, 9007199254740993.0])))
    return out


EXACT_TOKENS = [
    "9007199254740993", "9007199254740993.0", "90071992547409930e-1", "9.007199254740993e15",
    "900719925474099.3e1", "9007199254740995", "9007199254740997", "18014398509481987",
    "4611686018427388416", "4611686018427388415", "4611686018427388417", "4611686018427389440",
    "9223372036854775807", "9223372036854775808", "18446744073709551615", "18446744073709551616",
    "0.1", "0.30000000000000004", "1e22", "1e23", "1e-22", "1e-23", "1e27", "1e-27", "1e28",
    "123456789012345678e-27", "1234567890123456789e27", "2.2250738585072011e-308",
    "2.2250738585072014e-308", "4.9406564584124654e-324", "2.4703282292062327e-324",
    "2.4703282292062328e-324", "1.7976931348623157e308", "1.7976931348623159e308", "1e400",
    "-0", "-0.0", "+0", "0e999999999", "-0e-999999999", "0000000000000000000000001", "1.",
    ".5", "+.5e0", "-0000.25E+1", "00.0000000000000000000000000123", "1e-99999999999",
    "1e99999999999", "-1e-400", "0.9999999999999999999999999", "3.9858935073887669",
    "-0.071821823813025779", "1.0000000180025095e-35", "-1.0000000180025095e-35",
]


def test_native_numbers_are_float_of_each_token():
    """numparse.lgbm_numbers gives float(token) bit for bit: what LightGBM writes (%.17g),
    decimals near the midpoint of two doubles (the wider-quotient path's one hazard), integers
    around 2^53..2^64, subnormals, overflow, signed zeros, every spelling of the grammar."""
    numparse = _native_or_skip()
    rng = np.random.default_rng(38)
    toks = EXACT_TOKENS + _near_halfway_tokens(rng, 20000) + _float_tokens(rng, 30000)
    line = " ".join(toks).encode()
    got = numparse.lgbm_numbers(line, [[0, len(line)]], [len(toks)], np.float64)
    assert got is not None
    want = np.array([float(t) for t in toks])
    bad = np.flatnonzero(got.view(np.int64) != want.view(np.int64))
    assert not bad.size, [(toks[i], got[i], want[i]) for i in bad[:5]]
    # split over many spans (trees), with counts, some spans read with count 0
    cut = sorted(set(rng.integers(0, len(toks), 200).tolist()) | {0, len(toks)})
    offs = np.cumsum([0] + [len(t) + 1 for t in toks])
    spans = [[offs[a], offs[b] - 1] for a, b in zip(cut[:-1], cut[1:])]
    counts = [b - a for a, b in zip(cut[:-1], cut[1:])]
    got = numparse.lgbm_numbers(line, spans + [[0, 3]], counts + [0], np.float64)
    assert got is not None and got.view(np.int64).tolist() == want.view(np.int64).tolist()


@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.float64])
def test_native_numbers_refuse_what_they_do_not_read(dtype):
    """Anything but single-space-separated tokens of the kind's grammar, a count that does not
    match, or a missing line gives None (the Python reader then decides, words errors)."""
    numparse = _native_or_skip()
    ints = np.dtype(dtype).kind == "i"

    def read(text: str, n: int):
        b = text.encode()
        return numparse.lgbm_numbers(b, [[0, len(b)]], [n], dtype)
    good = {"1 2 3": [1, 2, 3], "+1 -0 007": [1, 0, 7], "-5": [-5],
            "123456789012345678 -123456789012345678": [123456789012345678, -123456789012345678]}
    if np.dtype(dtype) == np.int32:
        good = {"2147483647 -2147483648": [2147483647, -2147483648], "+1 -0 007": [1, 0, 7]}
    for text, want in good.items():
        got = read(text, len(want))
        assert got is not None and got.dtype == dtype, text
        assert got.tolist() == [float(t) if not ints else int(t) for t in text.split(" ")], text
    bad = ["", " 1", "1 ", "1  2", "1\t2", "1\n2", "1,2", "0x10", "1_0", "\u0663", "+", "-",
           "--1", "1-", "inf", "-inf", "nan", "NaN", "Infinity", "1e", "e1", ".", "1.2.3", "1e+",
           "1 2 3 4", "1", "abc", "1 x"]
    bad_ints = ["1.5", "1e3", "1.", ".5", "1234567890123456789", "0000000000000000001"]
    if np.dtype(dtype) == np.int32:
        bad_ints += ["2147483648", "-2147483649"]
    for text in bad + (bad_ints if ints else []):
        n = 2 if text in ("1 ", "1  2", "1\t2", "1\n2", "1,2", "1 x") else (3 if text == "1 2 3 4" else 1)
        if text == "1":
            n = 2
        assert read(text, n) is None, text
    # a missing line is refused even where its count is 0; a present one is not read then
    assert numparse.lgbm_numbers(b"1 2", [[-1, -1]], [0], dtype) is None
    assert numparse.lgbm_numbers(b"x y", [[0, 3]], [0], dtype).size == 0


def test_native_ints_read_as_atoi_reads_a_field():
    from treecomp.frontends.lightgbm import _atoi
    numparse = _native_or_skip()
    vals = ["12", " 12 ", "+3", "-0", "-7  ", "", " ", "1 2", "1.0", "abc", "\t1", "1\t",
            "123456789012345678", "1234567890123456789", "-12345678901234567", "+", "\u0663", "007"]
    data = "|".join(vals).encode()
    offs = np.cumsum([0] + [len(v.encode()) + 1 for v in vals])
    spans = [[offs[i], offs[i + 1] - 1] for i in range(len(vals))] + [[-1, -1]]
    got, state = numparse.lgbm_ints(data, spans)
    assert state[-1] == 0
    for v, g, st in zip(vals, got.tolist(), state.tolist()):
        want = _atoi(v)
        if st == 1:
            assert g == want, v
        else:  # left to the Python reader: a value _atoi refuses, or one past 18 characters
            assert st == 2 and (want is None or len(v.strip()) > 18), v


def _outcomes(text: str) -> tuple:
    """(native reader alone, Python reader alone, the public parse): each the Forest's digest or
    the error; the native reader's is None where it leaves the file to the Python reader."""
    from treecomp.errors import TreecompError
    from treecomp.frontends import lightgbm as lgb_frontend

    def run(fn):
        try:
            return fn().digest()
        except lgb_frontend._NotNative:
            return None
        except (TreecompError, ValueError, TypeError) as exc:
            return f"{type(exc).__name__}: {exc}"
    data = text.encode("utf-8")
    return (run(lambda: lgb_frontend._parse_trees([data], True)),
            run(lambda: lgb_frontend._parse_trees([data], False)),
            run(lambda: parse_lightgbm_string(text)))


_NUMBER_KEYS = ("threshold", "leaf_value", "split_feature", "left_child", "right_child",
                "decision_type", "leaf_count", "internal_count", "num_leaves", "num_cat",
                "is_linear", "leaf_const", "leaf_coeff", "leaf_features", "num_features",
                "cat_threshold", "cat_boundaries")


def _respell(tok: str, rng) -> str:
    """`tok` spelt another way: the same value (most), or something near what readers differ on."""
    r = rng.random()
    try:
        v = float(tok)
    except ValueError:
        v = None
    if v is not None and r < 0.5:
        forms = ["+" + tok, "00" + tok.lstrip("+-") if not tok.startswith("-") else tok,
                 "%.17e" % v, "%.25g" % v, "%.19g" % v, "%.20e" % v, tok.upper(), repr(v) + "0" * 5,
                 "%.0f." % v if abs(v) < 1e15 and v == int(v) else tok, tok + "e0",
                 ("%.17g" % v).replace("e-", "E-")]
        return forms[int(rng.integers(len(forms)))]
    weird = ["inf", "-inf", "nan", "-nan", "Infinity", "INF", "1e400", "-1e-400", "1e999999999999",
             "123456789012345678901234", "1234567890123456789", "123456789012345678", "-0", "+0",
             "0000", "2147483648", "-2147483649", "1.", ".5", "1e", "", "1\t", "\u00b2",
             "1_0", "0x1", str(rng.integers(-3, 70)), "%.17g" % float(rng.normal())]
    return weird[int(rng.integers(len(weird)))]


def _mutate_tokens(text: str, rng) -> str:
    """One to three edits of tree lines' numbers, spacing and line structure."""
    lines = text.split("\n")
    for _ in range(int(rng.integers(1, 4))):
        idx = [i for i, ln in enumerate(lines) if ln.split("=", 1)[0] in _NUMBER_KEYS]
        if not idx:
            break
        i = idx[int(rng.integers(len(idx)))]
        key, _, val = lines[i].partition("=")
        toks = val.split(" ")
        how = rng.random()
        if how < 0.55 and toks:
            j = int(rng.integers(len(toks)))
            toks[j] = _respell(toks[j], rng)
            lines[i] = f"{key}=" + " ".join(toks)
        elif how < 0.65:
            lines[i] = f"{key}=" + ("  " if rng.random() < 0.5 else " ").join(toks) + \
                ("", " ", "\t", "\r")[int(rng.integers(4))]
        elif how < 0.75:
            lines.insert(i + 1, f"{key}={' '.join(toks[::-1])}")  # a second line: the last counts
        elif how < 0.8:
            lines.insert(i, ("unknown_key=1 2", " threshold=0.5", "Tree=99", "noequals",
                             "=5")[int(rng.integers(5))])
        elif how < 0.85:
            for k in range(int(rng.integers(1, 9))):  # blocks past LightGBM's 22 lines
                lines.insert(i, f"pad{k}=0")
        elif how < 0.9:
            lines[i] = f"{key}="
        elif how < 0.95:
            del lines[i]
        else:
            lines[i] = f"{key}=" + " ".join(toks[:-1] if len(toks) > 1 else toks + toks)
    return "\n".join(lines)


@pytest.fixture(scope="module")
def reader_seeds(tmp_path_factory):
    """Small models of every kind the reader meets: tree_sizes or not, CRLF, v3, categorical,
    linear, zero-as-missing, multiclass, single leaves."""
    from tests.test_fuzz_frontends import LgbTxt
    sd = tmp_path_factory.mktemp("lgb-seeds")
    LgbTxt().make_seeds(sd)
    texts = {n: (sd / f"{n}.txt").read_text() for n in ("reg", "bin", "multi", "zero", "cat")}
    rng = np.random.default_rng(7)
    X = rng.normal(size=(300, 3))
    b = lgb.train({**BASE, "objective": "regression", "linear_tree": True, "num_leaves": 5},
                  lgb.Dataset(X, X[:, 0] * 3 + X[:, 1]), 3)
    texts["linear"] = b.model_to_string()
    b = lgb.train({**BASE, "objective": "regression", "num_leaves": 31, "min_data_in_leaf": 2},
                  lgb.Dataset(X, rng.normal(size=300)), 4)
    texts["wide"] = b.model_to_string()
    texts["nosizes"] = re.sub(r"tree_sizes=[^\n]*\n", "", texts["wide"])
    texts["crlf"] = texts["bin"].replace("\n", "\r\n")
    texts["v3"] = texts["nosizes"].replace("version=v4", "version=v3")
    texts["single"] = lib_model_text([tree_text([], [], [], [], [], [0.25]),
                                      tree_text([0], [0.5], [2], [-1], [-2], [1.0, 2.0])])
    return texts


def test_native_reader_reads_what_the_python_reader_reads(reader_seeds):
    """Seeded, bounded fuzz: every model, mutated by line-level edits (tests.test_fuzz_frontends'
    lgb_mutate) and by edits of numbers, spacing and tree lines, parses to the same Forest or
    the same error with the native reader as with the Python reader (it reads the file itself
    where the native one leaves it). Both kinds of case must occur."""
    from tests.test_fuzz_frontends import lgb_fix_tree_sizes, lgb_mutate
    _native_or_skip()
    rng = np.random.default_rng(3833)
    names = sorted(reader_seeds)
    decided = left = 0
    for case in range(900):
        name = names[case % len(names)]
        text = reader_seeds[name]
        if case >= len(names):
            if rng.random() < 0.4:
                text, _, _ = lgb_mutate(text, rng)
            else:
                text = _mutate_tokens(text, rng)
            if "tree_sizes=" in text and rng.random() < 0.7:
                text = lgb_fix_tree_sizes(text)
        native, python, public = _outcomes(text)
        assert public == python, (case, name, public, python)
        if native is None:
            left += 1
        else:
            decided += 1
            assert native == python, (case, name, native, python)
    assert decided > 400 and left > 50, (decided, left)


def test_native_reader_real_files_and_file_reads(tmp_path):
    """The real-model files (TREECOMP_REALMODELS) and the bench's LightGBM model parse to the
    same Forest (or error) with both readers, all decided natively where valid; a file's bytes
    are checked as UTF-8 as before (ASCII needs no decoded copy)."""
    import os
    from pathlib import Path as _Path
    from treecomp.frontends import lightgbm as lgb_frontend
    _native_or_skip()
    root = os.environ.get("TREECOMP_REALMODELS")
    files = sorted(_Path(root).rglob("*.txt")) if root else []
    for f in files:
        head = f.read_bytes()[:5]
        if head != b"tree\n" and head[:4] != b"tree":
            continue
        native, python, public = _outcomes(f.read_bytes().decode("utf-8"))
        assert public == python and native in (python, None), f
        assert native is not None or " " in python, f  # (a valid file is decided natively)
    text = lib_model_text([tree_text([0], [0.5], [2], [-1], [-2], [1.0, 2.0])])
    p = tmp_path / "m.txt"
    p.write_bytes(text.replace("feature_names=f0", "feature_names=f\u00e9").encode())
    assert lgb_frontend.parse_lightgbm_file(p).digest() == parse_lightgbm_string(text).digest()
    p.write_bytes(text.encode().replace(b"feature_names=f0", b"feature_names=f\xe9"))
    with pytest.raises(InvalidModelError, match="not UTF-8"):
        lgb_frontend.parse_lightgbm_file(p)


def _blocks_cases() -> dict[str, str]:
    """Hand-made tree sections at the edges of Tree(const char*)'s block reading."""
    t0 = tree_text([0], [0.5], [2], [-1], [-2], [1.0, 2.0])
    t1 = tree_text([0, 0], [0.25, 1.5], [2, 2], [1, -2], [-1, -3], [3.0, 4.0, 5.0])
    base = lib_model_text([t0, t1])
    n_lines = t0.count("\n") + 1
    pad = lambda k: "\n".join(f"pad{i}=0" for i in range(k))  # noqa: E731
    out = {
        "plain": base,
        "22 lines": lib_model_text([t0 + "\n" + pad(22 - n_lines), t1]),
        "23 lines": lib_model_text([t0 + "\n" + pad(23 - n_lines), t1]),
        "23 lines, key last": lib_model_text([pad(23 - n_lines) + "\n" + t0, t1]),
        "30 lines": lib_model_text([pad(30 - n_lines) + "\n" + t0, t1]),
        "threshold 23rd": lib_model_text([pad(23 - n_lines) + "\n" + t0.replace("threshold=0.5\n", "")
                                          + "\nthreshold=0.5", t1]),
        "threshold 22nd": lib_model_text([pad(22 - n_lines) + "\n" + t0.replace("threshold=0.5\n", "")
                                          + "\nthreshold=0.5", t1]),
        "last key wins": base.replace("threshold=0.5", "threshold=0.5\nthreshold=0.75", 1),
        "first of two bad": base.replace("threshold=0.5", "threshold=x\nthreshold=0.75", 1),
        "last of two bad": base.replace("threshold=0.5", "threshold=0.75\nthreshold=x", 1),
        "key with a space": base.replace("threshold=0.5", " threshold=0.5", 1),
        "key then space": base.replace("threshold=0.5", "threshold =0.5", 1),
        "no '='": base.replace("shrinkage=1", "shrinkage", 1),
        "'=' in a value": base.replace("threshold=0.5", "threshold=0.5=1", 1),
        "empty value": base.replace("leaf_count=1 1", "leaf_count=", 1),
        "Tree= inside": base.replace("shrinkage=1", "Tree=7", 1),
        "CRLF": base.replace("\n", "\r\n"),
        "CR only": base.replace("\n", "\r"),
        "LF CR": base.replace("\n", "\n\r"),
        "blank lines between": base.replace("\n\nTree=1", "\n\n\n\n\r\nTree=1"),
        "no end line": base.replace("end of trees\n", ""),
        "no final newline": base.replace("\n\nend of trees\n", "\n"),
        "ends inside a tree": base[:base.index("leaf_value=3")],
        "name spaces": base.replace("Tree=1", "Tree= 1 \t"),
        "name non-ASCII": base.replace("Tree=1", "Tree=\u00e9\u4e00"),
        "value non-ASCII": base.replace("threshold=0.25", "threshold=0.25\u00e9"),
        "tab in numbers": base.replace("left_child=1 -2", "left_child=1\t-2"),
        "spaces in ints": base.replace("num_leaves=3", "num_leaves= 3 "),
        "num_leaves 19 digits": base.replace("num_leaves=3", "num_leaves=0000000000000000003"),
        "num_leaves huge": base.replace("num_leaves=3", "num_leaves=123456789012345678"),
        "num_leaves past int64": base.replace("num_leaves=3", "num_leaves=99999999999999999999"),
        "num_leaves below int64": base.replace("num_leaves=3", "num_leaves=-9999999999999999999"),
        "is_linear blank": base.replace("is_linear=0", "is_linear= "),
        "is_linear tab": base.replace("is_linear=0", "is_linear=\t"),
        "is_linear word": base.replace("is_linear=0", "is_linear=no"),
        "is_linear absent": base.replace("is_linear=0\n", ""),
        "num_cat absent": base.replace("num_cat=0\n", ""),
        "num_cat negative": base.replace("num_cat=0", "num_cat=-1", 1),
        "num_cat without sets": base.replace("num_cat=0", "num_cat=1", 1),
        "no leaf_value": base.replace("leaf_value=1.0 2.0\n", ""),
        "no threshold": base.replace("threshold=0.5\n", ""),
        "single leaf without splits": lib_model_text(["num_leaves=1\nnum_cat=0\nleaf_value=0.5"]),
        "no trees": lib_model_text([]),
    }
    sized = lambda text: lgb_fix_tree_sizes(text.replace(  # noqa: E731
        "feature_infos=[-1:1]\n", "feature_infos=[-1:1]\ntree_sizes=0 0\n"))
    from tests.test_fuzz_frontends import lgb_fix_tree_sizes
    for name in list(out):
        if "non-ASCII" not in name:
            out[name + ", tree_sizes"] = sized(out[name])
    out["tree_sizes short"] = out["plain, tree_sizes"].replace("tree_sizes=", "tree_sizes=1 ")
    out["tree_sizes zero"] = re.sub(r"tree_sizes=\d+", "tree_sizes=0", out["plain, tree_sizes"])
    out["tree_sizes one tree"] = re.sub(r"tree_sizes=(\d+) \d+", r"tree_sizes=\1", out["plain, tree_sizes"])
    out["tree_sizes spaced"] = out["plain, tree_sizes"].replace("tree_sizes=", "tree_sizes= ")
    out["tree_sizes signed"] = out["plain, tree_sizes"].replace("tree_sizes=", "tree_sizes=+")
    return out


def test_native_reader_tree_blocks_as_python_reader():
    """Every hand-made edge of the tree blocks (22-line limit, repeated keys, line endings,
    tree_sizes offsets, odd integer fields...) reads the same with both readers; the valid
    ones are decided natively, and the 22-line limit cuts the trees where LightGBM does."""
    _native_or_skip()
    seen = {}
    for name, text in _blocks_cases().items():
        native, python, public = _outcomes(text)
        assert public == python, (name, public, python)
        assert native in (python, None), (name, native, python)
        seen[name] = (native, python)
    for name in ("plain", "22 lines", "23 lines", "threshold 22nd", "last key wins",
                 "first of two bad", "Tree= inside", "CRLF", "CR only", "blank lines between",
                 "no end line", "name spaces", "name non-ASCII", "spaces in ints",
                 "is_linear blank", "is_linear tab", "is_linear absent",
                 "single leaf without splits", "plain, tree_sizes", "22 lines, tree_sizes",
                 "23 lines, tree_sizes", "threshold 22nd, tree_sizes", "last key wins, tree_sizes",
                 "tree_sizes one tree", "tree_sizes spaced", "tree_sizes signed"):
        assert seen[name][0] is not None and " " not in seen[name][0], (name, seen[name])
    # (a block is read to its 22nd line: without tree_sizes the trees end at a 23rd line)
    assert seen["22 lines"][1] == seen["threshold 22nd"][1] == seen["plain"][1]
    assert seen["23 lines"][1] != seen["plain"][1]
    assert "no 'threshold' line" in seen["threshold 23rd, tree_sizes"][1]
    # (an integer Atoi's 20 characters read past int64: refused, not an OverflowError)
    assert "num_leaves=99999999999999999999 is out of range" in seen["num_leaves past int64"][1]
    assert "out of range" in seen["num_leaves below int64"][1]


def test_model_text_passed_as_a_path_is_named(tmp_path):
    """A str is a model file's path: one holding a model's text instead (LightGBM's
    model_to_string, an XGBoost JSON document) gets an error saying so, a name too long for the
    OS a FileNotFoundError (not a bare OSError), and a real file whose name starts with '{' is
    still read as the file it is."""
    text = lib_model_text([tree_text([0], [0.5], [2], [-1], [-2], [1.0, 2.0])])
    for s in (text, '{"learner": {"gradient_booster": {}}}'):
        with pytest.raises(UnsupportedModelError, match="holds text.*write the model's text to a file"):
            treecomp.parse(s)
    with pytest.raises(FileNotFoundError, match=r"model file not found: x{200}\.\.\. \(300 characters\)"):
        treecomp.parse("x" * 300)
    odd = tmp_path / "{odd}.txt"
    odd.write_text(text)
    assert treecomp.parse(str(odd)).digest() == parse_lightgbm_string(text).digest()
