"""Huge-but-legal model shapes through the code-generating backends (issue 20, items 6 and 9):
thousands of single-leaf trees, category ids in the millions, big categorical trees, deep
chains. Each must build in seconds (never crash LLVM or stall gcc) and stay bit-exact."""

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

import treecomp
from treecomp import interp, toolchain
from treecomp.backends import c as cbackend
from treecomp.backends import llvm as llvmbackend
from treecomp.ir import Forest, Tree, leaf_tree
from tests.randforest import chain_tree, random_rows, random_tree

REPO = Path(__file__).resolve().parents[1]
SPARSE = Path(os.environ.get("TREECOMP_REALMODELS") or REPO.parent / "shared/realmodels") \
    / "treelite/sparse_categorical/sparse_categorical_model.txt"
needs_cc = pytest.mark.skipif(not toolchain.have_compiler(), reason="no C compiler")


def constant_forest(n_const: int = 3000, seed: int = 0) -> Forest:
    """float32 margins (XGBoost's summation) over 2 outputs: leading constants (folded into the
    base score), runs of constants between real trees, trailing constants. Constants are tiny
    against a large base so each float32 add rounds: pre-summing them would change results."""
    rng = np.random.default_rng(seed)
    real = [random_tree(rng, 4, max_depth=3, values_f32=True) for _ in range(12)]
    consts = [leaf_tree(float(np.float32(v))) for v in rng.normal(0, 3e-5, n_const)]
    trees, out = [], []
    cut = np.sort(rng.choice(np.arange(5, n_const - 5), len(real), replace=False))
    k = 0
    for j, t in enumerate(real):
        trees.extend(consts[k:cut[j]]); out.extend(rng.integers(0, 2, cut[j] - k).tolist())
        k = cut[j]
        trees.append(t); out.append(j % 2)
        if j == 3:  # two real trees back to back
            trees.append(real[0]); out.append(1)
    trees.extend(consts[k:]); out.extend(rng.integers(0, 2, n_const - k).tolist())
    return Forest(trees=tuple(trees), n_features=4, n_outputs=2, tree_output=out,
                  base_score=[1000.0, -1000.5], accumulate_dtype="float32", comparison="<")


def _rows(f: Forest, n: int = 300) -> np.ndarray:
    return random_rows(f, n)


def test_constant_forest_is_order_sensitive():
    """The test model is a real test: summing its constant runs first changes float32 results."""
    f = constant_forest()
    X = _rows(f)
    want = interp.predict_raw(f, X)
    lead = cbackend.n_leading_constants(f)
    assert lead >= 5 and any(s[0] == "const" and len(s[1]) > 1 for s in cbackend.steps(f, list(range(f.n_trees))))
    # the same trees with every run of constants pre-summed in float64 and added once
    trees, outs, run = [], [], {}
    for t, o in zip(f.trees, f.tree_output):
        if t.n_nodes == 1:
            run[int(o)] = run.get(int(o), 0.0) + float(np.float32(t.value[0, 0]))
            continue
        for oo, v in run.items():
            trees.append(leaf_tree(v)); outs.append(oo)
        run = {}
        trees.append(t); outs.append(int(o))
    for oo, v in run.items():
        trees.append(leaf_tree(v)); outs.append(oo)
    g = f.replace(trees=tuple(trees), tree_output=outs)
    assert not np.array_equal(interp.predict_raw(g, X), want)


@needs_cc
def test_c_constant_trees_fast_and_bit_exact(tmp_path, monkeypatch):
    """3,000 single-leaf trees took gcc 80-127 s and 858 MB (a function each, all inlined);
    now they are table entries added one by one."""
    monkeypatch.setenv("TREECOMP_CACHE_DIR", str(tmp_path))  # a cold build
    f = constant_forest()
    X = _rows(f)
    src = cbackend.emit(f)
    assert sum(len(s) for s in src.values()) < 1_000_000
    assert sum(s.count("static void tree_") for s in src.values()) == 0
    t0 = time.perf_counter()
    p = treecomp.compile(f, backend="c")
    assert time.perf_counter() - t0 < 60
    got = p.predict_raw(X)
    assert got.dtype == np.float32 and got.shape == (len(X), 2)
    np.testing.assert_array_equal(got, interp.predict_raw(f, X))
    np.testing.assert_array_equal(p.predict_raw(X.astype(np.float32)), interp.predict_raw(f, X))
    # goto code and node tables for the real trees too
    for opts in ({"heap_max_depth": 0}, {"heap_max_depth": 0, "goto_max_nodes": 0}):
        np.testing.assert_array_equal(treecomp.compile(f, backend="c", **opts).predict_raw(X),
                                      interp.predict_raw(f, X))


def test_leading_constants_fold_into_base_exactly():
    f = constant_forest(n_const=40, seed=3)
    lead = cbackend.n_leading_constants(f)
    acc = f.base_score.astype(np.float32)
    for t, o in zip(f.trees[:lead], f.tree_output[:lead]):
        acc[o] = np.float32(acc[o] + np.float32(t.value[0, 0]))
    np.testing.assert_array_equal(cbackend.folded_base(f), acc)
    assert cbackend.folded_base(f).dtype == np.float32
    allconst = Forest(trees=(leaf_tree(0.1), leaf_tree(0.2)), n_features=1, n_outputs=1,
                      tree_output=[0, 0], base_score=[0.3], average=True)
    X = np.zeros((3, 1))
    for backend in (["c"] if toolchain.have_compiler() else []) + ["llvm"]:
        np.testing.assert_array_equal(treecomp.compile(allconst, backend=backend).predict_raw(X),
                                      interp.predict_raw(allconst, X))


_SUBPROCESS_SCRIPT = """
import sys, numpy as np, treecomp, xgboost
from treecomp import interp
from tests.test_backend_shapes import constant_forest, _rows
from tests.randforest import random_tree
backend = sys.argv[1]
if backend == "llvm":  # (test_c_constant_trees_fast_and_bit_exact covers these for c)
    f = constant_forest()
    X = _rows(f)
    for opts in ({}, {"heap_max_depth": 0}, {"heap_max_depth": 0, "goto_max_nodes": 0}, {"opt": 0}):
        got = treecomp.compile(f, backend="llvm", **opts).predict_raw(X)
        assert got.dtype == np.float32 and np.array_equal(got, interp.predict_raw(f, X)), opts
    # 2,000 real one-split trees as basic blocks: 2,000 row loops, no longer in one function
    rng = np.random.default_rng(4)
    g = treecomp.Forest(trees=tuple(random_tree(rng, 3, max_depth=1) for _ in range(2000)),
                        n_features=3, n_outputs=1, tree_output=[0] * 2000, base_score=[0.0])
    Xg = _rows(g)
    assert np.array_equal(treecomp.compile(g, backend="llvm", heap_max_depth=0).predict_raw(Xg),
                          interp.predict_raw(g, Xg))
# the issue's model: most of 3,000 XGBoost rounds on 20 rows are single leaves
rng = np.random.default_rng(0)
Xt = rng.normal(size=(20, 5)).astype(np.float32)
m = xgboost.XGBRegressor(n_estimators=3000, max_depth=3, random_state=0, n_jobs=1)
m.fit(Xt, rng.normal(size=20))
assert sum(t.n_nodes == 1 for t in treecomp.parse(m).trees) > 2000
Xq = np.vstack([Xt, rng.normal(size=(200, 5)).astype(np.float32)])
p = treecomp.compile(m, backend=backend)
assert np.array_equal(p.predict_raw(Xq)[:, 0], m.predict(Xq, output_margin=True))
assert np.array_equal(p.predict(Xq), m.predict(Xq))
print("OK")
"""


@pytest.mark.parametrize("backend", ["llvm", pytest.param("c", marks=needs_cc)])
def test_3000_single_leaf_xgboost_in_subprocess(tmp_path, backend):
    """LLVM overflowed its stack (ScalarEvolution, a segfault) on 3,000 row loops in one
    function: run in a fresh process with a cold cache so a crash fails only this test."""
    pytest.importorskip("xgboost")
    env = {**os.environ, "TREECOMP_CACHE_DIR": str(tmp_path / "cache")}
    res = subprocess.run([sys.executable, "-c", textwrap.dedent(_SUBPROCESS_SCRIPT), backend],
                         cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0 and res.stdout.strip().endswith("OK"), (res.returncode, res.stderr[-3000:])


# -- categorical bitsets: empty, trimmed, sparse; big categorical trees ---------------------------
def bitset_forest(rule: str, input_dtype: str = "float64") -> Forest:
    """Splits on feature 0..3 whose bitsets are empty, trimmed-dense (far below the tree's
    width), sparse (two words far apart) and full, in a tree 300 words wide."""
    nw = 300
    bits = np.zeros((4, nw), np.uint32)
    bits[1, 2] = 0x80000001            # categories 64 and 95
    bits[2, 7] = 0x10                  # category 228
    bits[2, 250] = 0x1                 # category 8000
    bits[3, :] = 0x55555555            # every even category
    # root: cat split k on feature k at nodes 0..3 (right chain), leaves hang left
    left, right = [1, -1, 3, -1, 5, -1, 7, -1, -1], [2, -1, 4, -1, 6, -1, 8, -1, -1]
    t = Tree(left=left, right=right, feature=[0, -1, 1, -1, 2, -1, 3, -1, -1],
             threshold=[0.0] * 9, default_left=[True, False, False, False, True, False, False, False, False],
             value=[0, 1, 0, 2, 0, 4, 0, 8, 16], cat_index=[0, -1, 1, -1, 2, -1, 3, -1, -1],
             cat_bits=bits, cat_other_left=[False, True, False, True])
    return Forest(trees=(t,), n_features=4, n_outputs=1, tree_output=[0], base_score=[0.5],
                  input_dtype=input_dtype, category_rule=rule)


def bitset_rows(f: Forest, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    nbits = 32 * f.trees[0].cat_bits.shape[1]
    vals = np.array([0, 1, 2, 63, 64, 64.5, 65, 95, 96, 127, 128, 227, 228, 229, 228.25, 7999, 8000,
                     8001, nbits - 2, nbits - 1, nbits, nbits + 1, 1e9, -0.5, -1, -0.0, np.nan,
                     np.inf, -np.inf, 3.999], np.float64)
    return rng.choice(vals, size=(600, 4))


LAYOUT_CASES = [("c", {}), ("c", {"goto_max_nodes": 0}), ("llvm", {}), ("llvm", {"opt": 0})]


@pytest.mark.parametrize("rule", ["nonneg", "trunc", "integral"])
@pytest.mark.parametrize("backend, opts", LAYOUT_CASES)
def test_bitset_layouts_bit_exact(backend, opts, rule):
    if backend == "c" and not toolchain.have_compiler():
        pytest.skip("no C compiler")
    f = bitset_forest(rule)
    layouts = [cbackend.bitset_layout(r)[0] for r in f.trees[0].cat_bits]
    assert layouts == ["empty", "dense", "sparse", "dense"]
    X = bitset_rows(f)
    p = treecomp.compile(f, backend=backend, **opts)
    np.testing.assert_array_equal(p.predict_raw(X), interp.predict_raw(f, X))
    np.testing.assert_array_equal(p.predict_raw(X), interp.walk_raw(f, X))


@pytest.mark.parametrize("backend", [pytest.param("c", marks=needs_cc), "llvm"])
def test_sparse_categorical_real_model(backend, tmp_path, monkeypatch):
    """One 509-node LightGBM tree over 5,057 features whose bitsets are 257,049 words wide but
    hold <= 14 nonzero words: 110 MB of C (22-29 s of gcc) before; now ~100 kB."""
    if not SPARSE.exists():
        pytest.skip("shared/realmodels not available")
    lgb = pytest.importorskip("lightgbm")
    monkeypatch.setenv("TREECOMP_CACHE_DIR", str(tmp_path))
    f = treecomp.parse(str(SPARSE))
    t = f.trees[0]
    if backend == "c":
        assert sum(len(s) for s in cbackend.emit(f).values()) < 2_000_000
    else:
        text = llvmbackend._chunk_text(f, [0], "tcx", 0, llvmbackend.options())
        assert len(text) < 2_000_000
    rng = np.random.default_rng(0)
    X = np.zeros((400, f.n_features))
    X[:, rng.integers(0, f.n_features, 50)] = rng.normal(size=(400, 50))
    cat_nodes = np.flatnonzero(t.cat_index >= 0)
    for r in range(len(X)):  # feed each categorical split its own categories and neighbours
        for nd in rng.choice(cat_nodes, 8):
            words = t.cat_bits[t.cat_index[nd]]
            nz = np.flatnonzero(words)
            w = int(rng.choice(nz)) if nz.size else 0
            bit = int(rng.integers(32))
            X[r, t.feature[nd]] = rng.choice([32 * w + bit, 32 * w + bit + 0.5, 32 * len(words) + 3,
                                              np.nan, -2.0, 32 * (w + 1)])
    t0 = time.perf_counter()
    p = treecomp.compile(f, backend=backend)
    assert time.perf_counter() - t0 < 60
    got = p.predict_raw(X)
    np.testing.assert_array_equal(got, interp.predict_raw(f, X))
    booster = lgb.Booster(model_file=str(SPARSE))
    np.testing.assert_array_equal(got[:, 0], booster.predict(X, raw_score=True))


@needs_cc
def test_c_big_categorical_tree_uses_a_table(tmp_path, monkeypatch):
    """A 5,291-node tree with categorical splits was goto code: 19 s of gcc. Above
    goto_max_nodes it is now a node table like numeric trees."""
    monkeypatch.setenv("TREECOMP_CACHE_DIR", str(tmp_path))
    rng = np.random.default_rng(3)
    trees = (random_tree(rng, 10, max_depth=12, p_leaf=0.05, p_cat=0.3),
             random_tree(rng, 10, max_depth=9, p_leaf=0.1, p_cat=0.3, width=1))
    for rule, dt in (("nonneg", "float32"), ("trunc", "float64"), ("integral", "float64")):
        f = Forest(trees=trees, n_features=10, n_outputs=1, tree_output=[0, 0], base_score=[0.0],
                   category_rule=rule, input_dtype=dt)
        src = cbackend.emit(f, cbackend.options(goto_max_nodes=100))["unit0.c"]
        assert "TC_CATWALK_KERNEL(1)" in src and "static void tree_0(" not in src
        X = random_rows(f, 300)
        p = treecomp.compile(f, backend="c", goto_max_nodes=100)
        np.testing.assert_array_equal(p.predict_raw(X), interp.predict_raw(f, X))


def test_no_depth_pass_over_big_trees(monkeypatch):
    """Tree.max_depth costs O(nodes x depth) on a chain (3.3 s for depth 20,000): the backends
    only ask it of trees small enough for the heap layout."""
    rng = np.random.default_rng(6)
    f = Forest(trees=(chain_tree(5000, 4, rng), random_tree(rng, 4, max_depth=4)), n_features=4,
               n_outputs=1, tree_output=[0, 0], base_score=[0.0])

    def depths(self):
        raise AssertionError(f"depth pass over a {self.n_nodes}-node tree")
    small = Tree.depths
    monkeypatch.setattr(Tree, "depths", lambda self: small(self) if self.n_nodes < 1024 else depths(self))
    src = cbackend.emit(f)
    assert "TC_HEAP_KERNEL(" in src["unit0.c"] and "TC_WALK_KERNEL(" in src["unit0.c"]
    opts = llvmbackend.options()
    assert "@tcx.w1_" in llvmbackend._chunk_text(f, [0, 1], "tcx", 0, opts)


@pytest.mark.parametrize("isa", ["auto", "llvm", "numpy"])
def test_constant_forest_arrays_backend(isa):
    """The arrays backend over 3,000 single-leaf trees between real ones: bit-exact on the C
    kernel and on both compiler-free paths, built in well under a minute."""
    from treecomp.backends import arrays
    if isa == "auto" and not arrays.supported_isas()[0] in arrays.native.NATIVE_ISAS:
        pytest.skip("no native arrays kernel here")
    f = constant_forest()
    X = _rows(f)
    t0 = time.perf_counter()
    p = treecomp.compile(f, backend="arrays", isa=isa)
    assert time.perf_counter() - t0 < 60
    np.testing.assert_array_equal(p.predict_raw(X), interp.predict_raw(f, X))
    np.testing.assert_array_equal(p.predict_raw(X[:1]), interp.predict_raw(f, X[:1]))
