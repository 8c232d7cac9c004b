"""LightGBM linear_tree models (leaves holding linear models): bit-exact against lightgbm.

LightGBM 4.7's Tree::Predict: output = leaf_const[leaf] + coeff * x over the leaf's features in
order (float64; the C API turns |x| <= kZeroThreshold into 0.0 first), or the plain leaf_value
where one of them is NaN. treecomp reads the linear leaves into the IR (Tree.leaf_const ...),
interp.tree_values is the reference, treecomp.linear predicts around each backend's leaf kernel.
"""

from __future__ import annotations

import io
import pickle
import zipfile

import numpy as np
import pytest

lgb = pytest.importorskip("lightgbm")

import treecomp  # noqa: E402
from treecomp import backends, interp, linear  # noqa: E402
from treecomp.errors import InvalidModelError, UnsupportedModelError  # noqa: E402
from treecomp.frontends.lightgbm import parse_lightgbm_string  # noqa: E402
from treecomp.ir import Forest, Tree, leaf_tree  # noqa: E402
from tests.edge import edge_rows  # noqa: E402
from tests.test_frontend_lightgbm import BASE, lib_model_text, special_rows, tree_text  # noqa: E402

BACKENDS = ("arrays", "c", "llvm")


def _data(n: int, p: int, seed: int, nan: float = 0.05):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, p))
    y = 2 * X[:, 0] + np.sin(3 * X[:, 1]) + X[:, 2] * X[:, 3] + 0.1 * rng.normal(size=n)
    X[rng.random(X.shape) < nan] = np.nan
    return X, y


def _train(objective: str, rounds: int, seed: int, **params) -> tuple[lgb.Booster, np.ndarray]:
    X, y = _data(600, 5, seed)
    if objective == "binary":
        y = (y > 0).astype(float)
    elif objective == "multiclass":
        y = np.digitize(y, [-1, 1]).astype(float)
        params["num_class"] = 3
    b = lgb.train({**BASE, "objective": objective, "linear_tree": True, "num_leaves": 8,
                   "min_data_in_leaf": 10, **params}, lgb.Dataset(X, y), rounds)
    return b, X


@pytest.fixture(scope="module")
def models():
    Xc, y = _data(600, 5, 9)
    Xc[:, 4] = np.random.default_rng(9).integers(0, 6, 600)          # a categorical column
    y = y + (Xc[:, 4] == 3)
    cat = lgb.train({**BASE, "objective": "regression", "linear_tree": True, "num_leaves": 8,
                     "min_data_in_leaf": 10, "linear_lambda": 1.0},
                    lgb.Dataset(Xc, y, categorical_feature=[4]), 10)
    return {
        "regression": _train("regression", 20, 1, linear_lambda=0.1),
        "binary": _train("binary", 12, 2),
        "multiclass": _train("multiclass", 6, 3, linear_lambda=0.5),
        "categorical": (cat, Xc),
    }


def _rows(b: lgb.Booster, X: np.ndarray, seed: int) -> np.ndarray:
    """Training rows, threshold-edge rows (on, +-1 ULP of the thresholds), special values in
    single features (NaN, +-0, +-inf, the zero band), whole-NaN rows."""
    f = treecomp.parse(b)
    rows = [X[:200], edge_rows(f, X, 200, seed), special_rows(X[:, :], seed),
            np.full((2, X.shape[1]), np.nan)]
    return np.vstack(rows)


def _raw(b: lgb.Booster, X: np.ndarray) -> np.ndarray:
    return b.predict(X, raw_score=True).reshape(len(X), -1)


@pytest.mark.parametrize("name", ["regression", "binary", "multiclass", "categorical"])
def test_reference_is_bit_exact(models, name):
    b, X = models[name]
    f = treecomp.parse(b)
    assert f.is_linear and any(len(t.linear_feature) for t in f.trees)
    Z = _rows(b, X, 5)
    np.testing.assert_array_equal(interp.predict_raw(f, Z), _raw(b, Z), strict=True)
    np.testing.assert_array_equal(interp.predict(f, Z), b.predict(Z), strict=True)
    np.testing.assert_array_equal(interp.walk_raw(f, Z[::7]), _raw(b, Z[::7]), strict=True)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", ["regression", "binary", "multiclass", "categorical"])
def test_compiled_is_bit_exact(models, name, backend):
    b, X = models[name]
    p = treecomp.compile(b, backend=backend)
    Z = _rows(b, X, 6)
    assert p.backend == backend
    np.testing.assert_array_equal(p.predict_raw(Z), _raw(b, Z), strict=True)
    np.testing.assert_array_equal(p.predict(Z), b.predict(Z), strict=True)
    for one in (Z[:1], Z[-1:], Z[:3].astype(np.float32)):   # small batches; float32 input
        np.testing.assert_array_equal(p.predict(one), b.predict(one), strict=True)
    # more rows than one block of treecomp.linear, over 2 threads
    big = np.tile(Z, (linear.BLOCK_ROWS // len(Z) + 2, 1))
    np.testing.assert_array_equal(p.predict(big, n_threads=2), b.predict(big), strict=True)


def test_sklearn_wrappers_and_text_files(models, tmp_path):
    X, y = _data(400, 5, 11)
    clf = lgb.LGBMClassifier(**BASE, n_estimators=8, num_leaves=6, linear_tree=True,
                             linear_lambda=0.2).fit(X, np.digitize(y, [0.0]))
    reg = lgb.LGBMRegressor(**BASE, n_estimators=8, num_leaves=6, linear_tree=True).fit(X, y)
    Z = np.vstack([X[:100], special_rows(X, 3)])
    pc, pr = treecomp.compile(clf, backend="arrays"), treecomp.compile(reg, backend="arrays")
    np.testing.assert_array_equal(pc.predict_proba(Z), clf.predict_proba(Z), strict=True)
    np.testing.assert_array_equal(pc.predict(Z), clf.predict(Z), strict=True)
    np.testing.assert_array_equal(pr.predict(Z), reg.predict(Z), strict=True)
    # the text file parses to the same forest as the Booster; the IR file keeps it
    b, _ = models["regression"]
    b.save_model(tmp_path / "m.txt")
    f = treecomp.parse(tmp_path / "m.txt")
    assert f.digest() == treecomp.parse(b).digest()
    f.save(tmp_path / "m.tcir")
    g = Forest.load(tmp_path / "m.tcir")
    assert g.digest() == f.digest() and g.is_linear
    np.testing.assert_array_equal(interp.predict_raw(g, X), _raw(b, X), strict=True)


def test_backends_alone_refuse_linear_leaves(models, tmp_path):
    # artifacts (.so / .tc, the CLI): tests/test_linear_artifacts.py
    b, X = models["regression"]
    f = treecomp.parse(b)
    p = treecomp.compile(f, backend="arrays")
    for name in BACKENDS:  # no backend builds a kernel that would ignore the linear leaves
        with pytest.raises(UnsupportedModelError, match="linear_tree models .* treecomp.compile"):
            backends.get(name).build(f)
    # pickling rebuilds from the IR; apply gives LightGBM's leaf indices
    q = pickle.loads(pickle.dumps(p))
    np.testing.assert_array_equal(q.predict(X), b.predict(X), strict=True)
    np.testing.assert_array_equal(p.apply(X), b.predict(X, pred_leaf=True))
    with pytest.raises(UnsupportedModelError, match="linear-tree models"):
        p.contributions(X[:3])  # TreeSHAP would explain only the constant part


# -- hand-written text models: corner semantics against lgb.Booster(model_str=...) --------------
def _linear_lines(const, counts, feats, coeffs) -> str:
    j = lambda a: " ".join(repr(float(v)) for v in a)  # noqa: E731
    per_leaf, k = [], 0
    for c in counts:
        per_leaf.append((" ".join(map(str, feats[k:k + c])), j(coeffs[k:k + c])))
        k += c
    return (f"leaf_const={j(const)}\nnum_features={' '.join(map(str, counts))}\n"
            f"leaf_features={''.join(a + '  ' if a else ' ' for a, _ in per_leaf)}\n"
            f"leaf_coeff={''.join(c + '  ' if c else ' ' for _, c in per_leaf)}")


def _lib_vs_ours(text: str, Z: np.ndarray) -> None:
    b = lgb.Booster(model_str=text)
    f = parse_lightgbm_string(text)
    np.testing.assert_array_equal(interp.predict_raw(f, Z)[:, 0], b.predict(Z, raw_score=True),
                                  strict=True)
    p = treecomp.compile(f, backend="arrays")
    np.testing.assert_array_equal(p.predict_raw(Z)[:, 0], b.predict(Z, raw_score=True), strict=True)


def _with_linear(tree: str, linear: str) -> str:
    return tree.replace("is_linear=0", "is_linear=1\n" + linear)


def test_single_leaf_linear_tree_and_zero_band():
    # num_leaves=1 with is_linear=1: LightGBM evaluates leaf 0's linear model (no early return)
    one = _with_linear(tree_text([], [], [], [], [], [0.75]),
                       _linear_lines([0.5], [2], [1, 0], [2.5, -1.25]))
    split = _with_linear(tree_text([0], [0.25], [2], [-1], [-2], [1.0, -1.0]),
                         _linear_lines([0.0, 3.0], [1, 0], [1], [1e30]))
    text = lib_model_text([one, split], n_features=2)
    v = [0.0, -0.0, 1e-36, -1e-36, 1.0000000180025095e-35, 1.0000000180025097e-35, 0.25,
         np.nextafter(0.25, 1), np.nan, np.inf, -np.inf, 3.0]
    Z = np.array([[a, c] for a in v for c in v])
    _lib_vs_ours(text, Z)
    f = parse_lightgbm_string(text)
    assert f.trees[0].n_nodes == 1 and f.trees[0].is_linear
    # the zero band: 1e30 * 1e-36 would add 1e-6; LightGBM reads the value as 0.0
    assert interp.predict_raw(f, np.array([[0.0, 1e-36]]))[0, 0] == 0.5


def test_zero_missing_expansion_copies_linear_leaves():
    # missing_type=Zero splits whose zero band opposes the default are expanded into three IR
    # nodes with the subtrees copied (frontends/lightgbm.py): each copy keeps its linear model
    # (LightGBM refuses to train zero_as_missing linear trees, but reads and predicts them)
    tree = _with_linear(tree_text([0, 1], [0.5, -0.5], [4, 6], [1, -1], [-3, -2], [1.0, -1.0, 7.0]),
                        _linear_lines([0.5, 0.25, -2.0], [2, 1, 0], [1, 0, 1], [3.0, -1.5, 0.75]))
    text = lib_model_text([tree], n_features=2)
    f = parse_lightgbm_string(text)
    assert f.trees[0].n_leaves > 3 and f.trees[0].is_linear
    v = [0.0, -0.0, 1e-36, 1.0000000180025097e-35, -0.5, np.nextafter(-0.5, 0), 0.5,
         np.nextafter(0.5, 1), np.nan, 2.0, -3.0]
    _lib_vs_ours(text, np.array([[a, c] for a in v for c in v]))


def test_missing_linear_lines_read_as_lightgbm_reads_them():
    base = tree_text([0], [0.0], [2], [-1], [-2], [1.0, -1.0])
    Z = np.array([[-1.0], [1.0], [np.nan]])
    _lib_vs_ours(lib_model_text([_with_linear(base, "shrinkage=1")], n_features=1), Z)  # all 0.0
    _lib_vs_ours(lib_model_text([_with_linear(base, "leaf_const=0.5 0.25\nnum_features=1 1")],
                                n_features=1), Z)  # no leaf_features: constants only


@pytest.mark.parametrize("linear, match", [
    (_linear_lines([0.5, 1.0], [1, 0], [3], [1.0]), "linear leaves read feature 3"),
    (_linear_lines([0.5, 1.0], [1, 1], [0], [1.0]), "'leaf_features' must hold 2"),
    (_linear_lines([0.5], [0, 0], [], []), "'leaf_const' must hold 2"),
    (_linear_lines([0.5, 1.0], [1, 0], [0], [1.0]).replace("1.0  ", "nan  "), "non-finite"),
    (_linear_lines([0.5, 1.0], [1, 0], [-1], [1.0]), "negative linear_feature"),
    ("leaf_const=0 0\nnum_features=1 0\nleaf_features=0  ", "no leaf_coeff"),
])
def test_corrupt_linear_lines(linear, match):
    text = lib_model_text([_with_linear(tree_text([0], [0.0], [2], [-1], [-2], [1.0, -1.0]), linear)],
                          n_features=2)
    with pytest.raises(InvalidModelError, match=match):
        parse_lightgbm_string(text)


# -- the IR ------------------------------------------------------------------------------------
def _stump(**linear) -> Tree:
    return Tree(left=[1, -1, -1], right=[2, -1, -1], feature=[0, -1, -1], threshold=[0.0, 0, 0],
                default_left=[True, False, False], value=[0.0, 1.0, 2.0], **linear)


def test_ir_linear_arrays_are_validated_and_optional():
    ok = dict(leaf_const=[0, 1, 2], linear_ptr=[0, 0, 1, 1], linear_feature=[1], linear_coeff=[0.5])
    t = _stump(**ok)
    assert t.is_linear and not _stump().is_linear
    for bad, match in [(dict(ok, linear_ptr=[0, 1, 0, 1]), "rise from 0"),
                       (dict(ok, linear_ptr=[0, 1, 1, 1]), "internal nodes"),
                       (dict(ok, leaf_const=[1, 1, 2]), "internal nodes"),
                       (dict(ok, linear_coeff=[np.inf]), "non-finite"),
                       (dict(ok, linear_coeff=[0.5, 1.0]), "linear_coeff as many"),
                       ({k: v for k, v in ok.items() if k != "linear_coeff"}, "need all of")]:
        with pytest.raises(InvalidModelError, match=match):
            _stump(**bad)
    with pytest.raises(InvalidModelError, match="linear leaves read feature 1"):
        Forest(trees=[t], n_features=1, n_outputs=1, tree_output=[0], base_score=[0.0])
    f = Forest(trees=[t, leaf_tree(3.0)], n_features=2, n_outputs=1, tree_output=[0, 0],
               base_score=[0.0], input_dtype="float64")
    # leaf 1: 1 + 0.5 * x1 (its plain value 1 where x1 is NaN); leaf 2: 2; the stump: 3
    X = np.array([[-1.0, 4.0], [1.0, 4.0], [-1.0, np.nan], [1.0, np.nan]])
    np.testing.assert_array_equal(interp.predict_raw(f, X)[:, 0], [3 + 3, 2 + 3, 1 + 3, 2 + 3.0])
    data = f.to_bytes()
    names = zipfile.ZipFile(io.BytesIO(data)).namelist()
    assert "t0.linear_coeff.npy" in names and not any(n.startswith("t1.linear") for n in names)
    assert Forest.from_bytes(data).digest() == f.digest()
    # a forest without linear leaves: no linear members, digest as before (a different forest)
    plain = f.replace(trees=[_stump(), leaf_tree(3.0)])
    assert not any("linear" in n or "leaf_const" in n
                   for n in zipfile.ZipFile(io.BytesIO(plain.to_bytes())).namelist())
    assert plain.digest() != f.digest()
    # every backend's predictor, and beside a vector-leaf tree (treecomp.linear's reference path)
    wide = Tree(left=[1, -1, -1], right=[2, -1, -1], feature=[1, -1, -1], threshold=[0.5, 0, 0],
                default_left=[False] * 3, value=[[0, 0], [0.25, -1], [4, 8]])
    g = Forest(trees=[t, wide, t], n_features=2, n_outputs=2, tree_output=[1, 0, 0],
               base_score=[0.5, 0.0], input_dtype="float64")
    Z = np.vstack([X, -X, X * 1e-37])
    for h in (f, g):
        for name in BACKENDS:
            np.testing.assert_array_equal(treecomp.compile(h, backend=name).predict_raw(Z),
                                          interp.predict_raw(h, Z), strict=True)
    # a file missing one of the four members is corrupt
    buf = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as src, zipfile.ZipFile(buf, "w") as dst:
        for n in names:
            if n != "t0.linear_ptr.npy":
                dst.writestr(n, src.read(n))
    with pytest.raises(InvalidModelError, match="need all of"):
        Forest.from_bytes(buf.getvalue())


def _fused_raw(f: Forest, X: np.ndarray) -> np.ndarray:
    """The margins with every coeff * x + acc rounded once (a fused multiply-add), exactly."""
    from fractions import Fraction
    out = np.zeros(len(X))
    for t in f.trees:
        leaves = interp.leaf_indices(t, X, False, f.category_rule)
        for r, leaf in enumerate(leaves):
            a, b = t.linear_ptr[leaf], t.linear_ptr[leaf + 1]
            acc = float(t.leaf_const[leaf])
            for fe, c in zip(t.linear_feature[a:b], t.linear_coeff[a:b]):
                acc = float(Fraction(float(c)) * Fraction(float(X[r, fe])) + Fraction(acc))
            out[r] += acc
    return out


def test_no_fused_multiply_add(models):
    # LightGBM's wheels compute coeff * x, round, then add: a fused multiply-add (one rounding)
    # differs in the last bit on some rows, so the bit-exact tests above would catch one
    b, X = models["regression"]
    f = treecomp.parse(b)
    Z = X[:200][~np.isnan(X[:200]).any(axis=1)]
    want = b.predict(Z, raw_score=True)
    np.testing.assert_array_equal(interp.predict_raw(f, Z)[:, 0], want, strict=True)
    assert np.count_nonzero(_fused_raw(f, Z) != want) > 0


@pytest.mark.parametrize("name", ["regression", "binary", "multiclass", "categorical"])
def test_native_and_numpy_linear_leaves_agree(models, name):
    """The arrays kernel's tc_linear_margins and the numpy fallback (used where no native
    kernel loads) give the same bits, NaN / inf / zero-band rows included."""
    b, X = models[name]
    p = treecomp.compile(b, backend="arrays")
    k = p._kernel
    assert k.tables is not None and k.tables._native is not None
    Z = _rows(b, X, 8)
    Z[::11, 0] = 1e-36
    Z[::13, 1] = np.inf
    lv = np.empty((len(Z), k.forest.n_trees))
    k.leaves.run(Z, lv, 0)
    native = k.tables.margins(Z, lv)
    np.testing.assert_array_equal(native, k.tables.margins(Z, lv, native=False), strict=True)
    np.testing.assert_array_equal(native, _raw(b, Z).reshape(native.shape), strict=True)
    for v in (1e9, -1.0, np.nan):
        bad = lv.copy()
        bad[3, 2] = v
        with pytest.raises(RuntimeError, match="outside its tree"):
            k.tables.margins(Z, bad)


def test_random_forest_mode_linear_trees(tmp_path):
    """rf mode with linear trees: raw margins undivided (raw_score), predict divided by the
    iterations, through the Predictor and every backend's .so (TREECOMP_RAW / _TRANSFORM)."""
    import ctypes
    b, X = _train("binary", 5, 4, boosting="rf", bagging_freq=1, bagging_fraction=0.6)
    f = treecomp.parse(b)
    assert f.is_linear and f.output_divisor == 5
    rows = _rows(b, X, 5)
    for backend in BACKENDS:
        p = treecomp.compile(b, backend=backend)
        np.testing.assert_array_equal(p.predict(rows), b.predict(rows), strict=True)
        np.testing.assert_array_equal(p.decision_function(rows), b.predict(rows, raw_score=True),
                                      strict=True)
        p.save(tmp_path / f"{backend}.so")
        lib = ctypes.CDLL(str(tmp_path / f"{backend}.so"))
        lib.treecomp_predict.argtypes = [ctypes.c_void_p, ctypes.c_int32, ctypes.c_int64,
                                         ctypes.c_void_p, ctypes.c_uint32]
        Z = np.ascontiguousarray(rows)
        for flags, want in ((0, b.predict(rows, raw_score=True)), (1, b.predict(rows))):
            out = np.zeros(len(Z))
            assert lib.treecomp_predict(Z.ctypes.data, 64, len(Z), out.ctypes.data, flags) == 0
            np.testing.assert_array_equal(out, want)
