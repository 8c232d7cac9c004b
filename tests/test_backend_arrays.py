"""The arrays backend: bit-exact against the interpreter on every layout and every ISA path the
CPU has, the table file (round trip, corruption, truncation), pickling, and backend="auto"."""

import dataclasses
import itertools
import pickle
import subprocess
import sys
import textwrap
import os
from pathlib import Path

import numpy as np
import pytest

import treecomp
from treecomp import backends, interp, outputs, toolchain
from treecomp.backends import arrays
from treecomp.backends.arrays import derived as arrays_derived, format as arrays_format, native as arrays_native, tables as arrays_tables
from treecomp.errors import ArtifactError, CompileError, UnsupportedModelError
from treecomp.ir import Forest, Tree, leaf_tree
from tests.edge import assert_backend_matches_interp, edge_rows
from tests.randforest import FOREST_VARIANTS, chain_tree, random_forest, random_rows
from tests.memtrace import traced_peak

try:
    from tests import zoo
    ZOO = zoo.names()
except Exception:  # a zoo module being written right now may be broken: skip, do not fail
    zoo, ZOO = None, []

#: this architecture's native paths (x86-64: scalar, avx2, avx512; aarch64: scalar, neon, sve)
ALL_ISAS = (*arrays_native.arch_isas(), "llvm-vec", "llvm", "numpy")
HAVE = arrays.supported_isas()
ISAS = [pytest.param(i, marks=pytest.mark.skipif(i not in HAVE, reason=f"CPU/host lacks {i}"))
        for i in ALL_ISAS]
LAYOUTS = ("auto", "heap", "compact", "naive")
NATIVE = [i for i in arrays_native.arch_isas() if i in HAVE]


def _check(p, f, X):
    for Xin in (X, X.astype(np.float32)):
        want = interp.predict_raw(f, Xin)
        got = p.predict_raw(Xin)
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("variant", sorted(FOREST_VARIANTS))
def test_random_forests_bit_exact(variant, isa):
    f = random_forest(300 + sorted(FOREST_VARIANTS).index(variant), **FOREST_VARIANTS[variant])
    X = random_rows(f, 150)  # 300 rows: several 64-row blocks plus a tail
    for layout in LAYOUTS + ("quant", "bitvec"):
        try:
            p = treecomp.compile(f, backend="arrays", layout=layout, isa=isa)
        except UnsupportedModelError as exc:  # byte walks: numeric trees, depth / leaves bounded
            assert layout in ("quant", "bitvec")
            assert "categorical" in str(exc) or "depth 14" in str(exc) or "leaves" in str(exc)
            continue
        assert p.backend == "arrays" and p._kernel.isa == isa
        _check(p, f, X)
    # odd block sizes: every tail path (vector groups, 8-row groups, single rows; blocks of
    # under 4 rows walk several compact trees per row at once)
    for block in (1, 3, 7, 45, 100):
        for layout in ("auto", "compact"):
            p = treecomp.compile(f, backend="arrays", isa=isa, block_rows=block, layout=layout)
            np.testing.assert_array_equal(p.predict_raw(X), interp.predict_raw(f, X))


def _random_leaves(rng, left, right, feat, thr) -> Tree:
    """A Tree of the given shape with random leaf values and NaN directions."""
    n = len(left)
    val = rng.normal(size=n)
    val[np.array(left) >= 0] = 0
    return Tree(left=left, right=right, feature=feat, threshold=thr,
                default_left=rng.random(n) < 0.5, value=val)


def _complete_tree(rng, depth, nf, p_leaf=0.0):
    """A BFS tree of the given depth (p_leaf > 0: some nodes above the bottom are leaves)."""
    left, right, feat, thr, d = [-1], [-1], [-1], [0.0], [0]
    i = 0
    while i < len(left):
        if d[i] < depth and (i == 0 or rng.random() >= p_leaf):
            feat[i] = int(rng.integers(nf))
            thr[i] = float(rng.normal())
            left[i], right[i] = len(left), len(left) + 1
            for _ in range(2):
                left.append(-1); right.append(-1); feat.append(-1); thr.append(0.0); d.append(d[i] + 1)
        i += 1
    return _random_leaves(rng, left, right, feat, thr)


def _symmetric_tree(rng, depth, nf, flaw=""):
    """A complete tree whose every level splits on one feature and threshold and sends NaN one
    way (CatBoost's symmetric trees); flaw "thr" / "nan": the last level's last node splits at
    another threshold / sends NaN the other way."""
    t = _complete_tree(rng, depth, nf)
    feat, thr, dl = t.feature.copy(), t.threshold.copy(), t.default_left.copy()
    for l in range(depth):  # BFS numbering of a complete tree: level l is nodes 2^l - 1 ..
        lo, hi = (1 << l) - 1, (2 << l) - 1
        feat[lo:hi], thr[lo:hi], dl[lo:hi] = feat[lo], thr[lo], dl[lo]
    last = (1 << depth) - 2
    if flaw == "thr":
        thr[last] = thr[last] + 0.25
    elif flaw == "nan":
        dl[last] = not dl[last]
    return dataclasses.replace(t, feature=feat, threshold=thr, default_left=dl)


@pytest.mark.parametrize("isa", ISAS)
def test_symmetric_heaps(isa):
    """Symmetric (oblivious) heaps of depth 1..8 are flagged at load (oblivious_heaps) and, on
    AVX-512, walked one column a level (quant_impl.c, zobl); a tree with one node off its
    level's threshold or NaN direction, and a one-leaf tree, are not. Bit-exact against the
    interpreter: both accumulation dtypes, one and several outputs (the fused leaf planes and
    the leaf-index path), whole and short 64-row groups, blocks of 96 rows and auto."""
    rng = np.random.default_rng(77)
    for acc, n_out in (("float32", 1), ("float64", 1), ("float64", 2)):
        trees = [_symmetric_tree(rng, d, 6) for d in (1, 2, 3, 4, 5, 6, 6, 7, 8)]
        trees += [_symmetric_tree(rng, 6, 6, "thr"), _symmetric_tree(rng, 5, 6, "nan"), leaf_tree(0.5)]
        if acc == "float32":
            trees = [dataclasses.replace(t, value=t.value.astype(np.float32).astype(np.float64))
                     for t in trees]
        f = Forest(trees=tuple(trees), n_features=6, n_outputs=n_out,
                   tree_output=np.arange(len(trees)) % n_out, base_score=[0.25] * n_out,
                   comparison="<=" if acc == "float64" else "<", accumulate_dtype=acc)
        tab = arrays_tables.flatten(f, layout="quant")
        q = arrays_derived.quant_tables(tab.arrays["h_ff"], tab.arrays["h_thr"])
        flags = arrays_derived.oblivious_heaps(q["h_qcol"], q["h_qthr"], tab.arrays["tree_layout"] == 0,
                                               tab.arrays["tree_nint"])
        assert flags.tolist() == [1] * 9 + [0, 0, 0]
        X = random_rows(f, 150, seed=4)
        X = X[np.random.default_rng(6).permutation(len(X))]
        for block in (0, 96):
            p = treecomp.compile(f, backend="arrays", layout="auto", isa=isa, block_rows=block)
            assert p._kernel.tables.meta["quant"]
            if isa in NATIVE:
                assert p._kernel._keep["h_qobl"].tolist() == flags.tolist()
            for n in (1, 63, 64, 65, 130, 257, len(X)):
                _check(p, f, X[:n])


@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("comparison", ["<", "<="])
def test_heap_every_depth(isa, comparison):
    """Heap trees of depth 0..9 (the vector walks switch lookup strategy by level), complete and
    unbalanced (padding), with many rows so that the interleaved vector groups run."""
    rng = np.random.default_rng(11)
    trees = [leaf_tree(0.5)]
    for depth in range(1, 10):
        trees.append(_complete_tree(rng, depth, 7))
        trees.append(_complete_tree(rng, depth, 7, p_leaf=0.3))
    f = Forest(trees=tuple(trees), n_features=7, n_outputs=1, tree_output=np.zeros(len(trees)),
               base_score=[0.1], comparison=comparison, accumulate_dtype="float32")
    X = random_rows(f, 200)
    p = treecomp.compile(f, backend="arrays", layout="heap", heap_max_depth=9, isa=isa)
    assert np.all(p._kernel.tables.arrays["tree_layout"] == 0)
    _check(p, f, X)


@pytest.mark.parametrize("isa", ISAS)
def test_depth_1000_tree_and_single_leaves(isa):
    rng = np.random.default_rng(5)
    t = chain_tree(1000, 4, rng)
    f = Forest(trees=(leaf_tree(1.5), t, leaf_tree(-0.25)), n_features=4, n_outputs=1,
               tree_output=[0, 0, 0], base_score=[0.25], average=True)
    X = rng.uniform(-1.2, 1.2, size=(300, 4))
    X[::17, 1] = np.nan
    for layout in LAYOUTS:  # "heap" keeps the chain compact (deeper than heap_max_depth)
        p = treecomp.compile(f, backend="arrays", layout=layout, isa=isa)
        np.testing.assert_array_equal(p.predict_raw(X), interp.predict_raw(f, X))


# -- the quantised walk (layout="quant"; auto for numeric forests of depth <= 8) -------------
@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("comparison,x,acc", [("<", "float32", "float32"), ("<=", "float32", "float64"),
                                              ("<=", "float64", "float64"), ("<", "float64", "float32")])
def test_quant_every_depth(isa, comparison, x, acc):
    """Depths 0..8 (one byte-blend mux per level, every leaf-shuffle width), complete and
    unbalanced, every block tail (32-row vector groups, 4-row and single-row scalar tails)."""
    rng = np.random.default_rng(12)
    trees = [leaf_tree(0.5)]
    for depth in range(1, 9):
        trees.append(_complete_tree(rng, depth, 7))
        trees.append(_complete_tree(rng, depth, 7, p_leaf=0.3))
    if acc == "float32":
        trees = [dataclasses.replace(t, value=t.value.astype(np.float32).astype(np.float64)) for t in trees]
    f = Forest(trees=tuple(trees), n_features=7, n_outputs=1, tree_output=np.zeros(len(trees)),
               base_score=[0.1], comparison=comparison, input_dtype=x, accumulate_dtype=acc)
    X = random_rows(f, 200)
    for block in (0, 1, 7, 33, 100):
        p = treecomp.compile(f, backend="arrays", layout="quant", isa=isa, block_rows=block)
        assert p._kernel.tables.meta["quant"]
        _check(p, f, X)


@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("nf,both,width,x64", [(8, True, 16, False), (14, False, 16, False),
                                               (30, True, 32, False), (30, True, 32, True),
                                               (40, True, 64, False), (40, False, 64, False),
                                               (70, True, 0, False)])
def test_quant_levels_wider_than_the_columns(isa, nf, both, width, x64):
    """Heap levels with more nodes than the model has columns are muxed by column (each row's
    node's column index looked up, then the columns rounded up to 16 / 32 / 64 muxed; depths 5
    and 6 with <= 16 columns, 7 and 8 with <= 64): every column read somewhere, NaN rows in every
    feature, every block tail. Nodes sending NaN both ways (`both`) give a feature two columns;
    for the column mux they are one whose NaN bin goes right unless the node's column index
    says left (merge_nan_columns): 40 such features fit 64, 70 keep the node mux. x64: float64
    rows and margins, "<=" splits."""
    rng = np.random.default_rng(31)
    trees = []
    for depth in (5, 6, 7, 8, 8):
        t = _complete_tree(rng, depth, nf)
        internal = t.left >= 0
        feat = np.where(internal, np.arange(t.n_nodes) % nf, -1)  # every feature in every tree
        dl = t.default_left if both else np.ones(t.n_nodes, bool)
        val = t.value if x64 else t.value.astype(np.float32).astype(np.float64)
        trees.append(dataclasses.replace(t, feature=feat, value=val, default_left=dl))
    f = Forest(trees=tuple(trees), n_features=nf, n_outputs=1, tree_output=np.zeros(len(trees)),
               base_score=[0.0], comparison="<=" if x64 else "<",
               input_dtype="float64" if x64 else "float32",
               accumulate_dtype="float64" if x64 else "float32")
    X = random_rows(f, 150)
    X[rng.random(X.shape) < 0.15] = np.nan
    for block in (0, 33, 100):
        p = treecomp.compile(f, backend="arrays", layout="quant", isa=isa, block_rows=block)
        k = p._kernel
        assert k.tables.meta["quant"]
        if isa not in ("llvm", "numpy"):  # the native kernel's derived tables
            assert len(k._keep["q_feat"]) == (2 if both else 1) * nf
            assert k._struct.q_cmux == width and ("h_qcix" in k._keep) == (width > 0)
            assert k._struct.q_cnan == (both and width > 0)
        _check(p, f, X)


@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("acc", ["float32", "float64"])
def test_quant_node_mux_over_many_columns(isa, acc):
    """Heaps of depth 1..6 over more columns than the column mux's 16 (every level by the node
    mux: the heap walk of XGBoost-shaped models, on NEON and SVE their register walks), complete
    and with padding, NaN both ways; one output (leaves from byte planes, 4 or 8) and three (leaf
    indices), batches of whole and short 32-row groups, every block tail: bit for bit against
    the interpreter."""
    rng = np.random.default_rng(37)
    nf = 40
    for n_out in (1, 3):
        depths = [1, 2, 3, 4, 5, 6, 6, 5, 6, 3, 6, 4]
        trees = [_complete_tree(rng, d, nf, p_leaf=0.25 * (i % 2)) for i, d in enumerate(depths)]
        if acc == "float32":
            trees = [dataclasses.replace(t, value=t.value.astype(np.float32).astype(np.float64)) for t in trees]
        f = Forest(trees=tuple(trees), n_features=nf, n_outputs=n_out,
                   tree_output=np.arange(len(trees)) % n_out, base_score=[0.25] * n_out,
                   comparison="<" if acc == "float32" else "<=", accumulate_dtype=acc)
        X = random_rows(f, 150, seed=n_out)
        for block in (0, 33, 100):
            p = treecomp.compile(f, backend="arrays", layout="quant", isa=isa, block_rows=block)
            k = p._kernel
            assert k.tables.meta["quant"]
            if isa not in ("llvm", "numpy"):  # not the column mux of <= 16 columns at depths 5, 6
                assert k._struct.q_cmux != 16 and len(k._keep["q_feat"]) > 16
            _check(p, f, X)
            for n in (31, 32, 33, 65):
                np.testing.assert_array_equal(p.predict_raw(X[:n]), interp.predict_raw(f, X[:n]))


@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("layout", ["quant", "bitvec"])
@pytest.mark.parametrize("acc", ["float32", "float64"])
def test_byte_walks_several_outputs(isa, layout, acc):
    """A tree per class (XGBoost / LightGBM multiclass): the byte walks add into class-major
    margins (float32: through the leaf byte planes) and copy them back per block; every block
    tail, blocks below the vector walk's 8 rows (row-major), trees of mixed depths."""
    rng = np.random.default_rng(21)
    trees = [leaf_tree(0.25)] + [_complete_tree(rng, int(d), 7, p_leaf=0.2)
                                 for d in rng.integers(1, 8, size=29)]
    if acc == "float32":
        trees = [dataclasses.replace(t, value=t.value.astype(np.float32).astype(np.float64)) for t in trees]
    f = Forest(trees=tuple(trees), n_features=7, n_outputs=5, tree_output=np.arange(30) % 5,
               base_score=[0.5, -1.0, 0.0, 2.0, 0.125], comparison="<", accumulate_dtype=acc)
    X = random_rows(f, 100)
    for block in (0, 3, 8, 33, 100):
        p = treecomp.compile(f, backend="arrays", layout=layout, isa=isa, block_rows=block)
        assert p._kernel.tables.meta[layout]
        _check(p, f, X)
        for n in (1, 7, 9):
            np.testing.assert_array_equal(p.predict_raw(X[:n]), interp.predict_raw(f, X[:n]))


def _many_threshold_forest(comparison, acc, n_thr=600):
    """Feature 0 splits on n_thr - 1 distinct values (-0.0 and 0.0 both appear, one threshold),
    half the nodes sending NaN right; features 1, 2 have few thresholds."""
    rng = np.random.default_rng(7)
    pool = np.unique(rng.normal(size=n_thr).astype(np.float32)).astype(np.float64)
    pool[:2] = [0.0, -0.0]
    trees = []
    for i in range(60):
        t = _complete_tree(rng, 6, 3)
        internal = t.left >= 0
        feat = np.where(internal, np.where(rng.random(t.n_nodes) < 0.7, 0, t.feature), -1)
        thr = np.where(feat == 0, rng.choice(pool, t.n_nodes), np.round(t.threshold, 1))
        val = t.value.astype(np.float32).astype(np.float64) if acc == "float32" else t.value
        trees.append(dataclasses.replace(t, feature=feat, threshold=np.where(internal, thr, 0.0), value=val))
    return Forest(trees=tuple(trees), n_features=3, n_outputs=1, tree_output=np.zeros(len(trees)),
                  base_score=[0.0], comparison=comparison, accumulate_dtype=acc), pool


@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("comparison,n_thr", [("<", 600), ("<=", 256)])
def test_quant_many_thresholds(isa, comparison, n_thr):
    """Feature 0 in chunks of 254 thresholds (about 600 of them: 254 + 254 + the rest) or in
    one of 255, NaN both ways; rows on every threshold and beside it, NaN, +-inf."""
    f, pool = _many_threshold_forest(comparison, "float32" if comparison == "<" else "float64", n_thr)
    q = arrays_derived.quant_tables(*(arrays_tables.flatten(f, "quant").arrays[k] for k in ("h_ff", "h_thr")))
    f0 = q["q_feat"] == 0  # NaN both ways: a column of each (NaN's bin 0 / the count), copies
    counts = sorted(q["q_count"][f0][::2])  # (the pairs' first columns)
    assert (counts[1:] == [254, 254] and counts[0] < 254) if n_thr == 600 else counts == [255]
    assert (q["q_nanc"][f0] == 0).any() and (q["q_nanc"][f0] == q["q_count"][f0]).any()
    assert (q["q_src"][f0] >= 0).any()
    rng = np.random.default_rng(3)
    X = rng.normal(size=(500, 3))
    on = rng.choice(pool, 300)  # exactly on thresholds, and one float32 ULP either side
    X[:300, 0] = np.where(rng.random(300) < 0.5, on, np.nextafter(on.astype(np.float32),
                          np.where(rng.random(300) < 0.5, np.inf, -np.inf).astype(np.float32)))
    X[::11, 0] = np.nan
    X[::13, 0] = np.inf
    X[::17, 0] = -np.inf
    X = np.vstack([X, random_rows(f, 100)])
    p = treecomp.compile(f, backend="arrays", layout="quant", isa=isa)
    if isa not in ("llvm", "numpy"):  # the column mux over merged NaN columns (and, beside them,
        # a pair of 255 thresholds, whose bin 255 is no NaN code: not merged)
        k = p._kernel
        assert (k._struct.q_cmux, k._struct.q_cnan) == (16, 1)
        assert (k._keep["q_count"][k._keep["q_src"] >= 0] == 255).any() == (n_thr == 256)
    _check(p, f, X)
    # the interval walk reads the same columns (chunks of 254, a column per NaN direction)
    pb = treecomp.compile(f, backend="arrays", layout="bitvec", isa=isa)
    assert pb._kernel.tables.meta["bitvec"]
    _check(pb, f, X)


@pytest.mark.parametrize("isa", ISAS[:3])
@pytest.mark.parametrize("layout", ["quant", "bitvec"])
def test_byte_walks_every_row_group(isa, layout):
    """The byte walks' row groups: 32 rows a vector on AVX2; 64 on AVX-512 (its blocks laid out
    in 64-row groups, two at once in the heap walk, up to four in the interval sweep). Batches
    of 1, 63, 64, 65, 127, 128, 130 and 257 rows (whole groups, short last groups, the few-row
    scalar walk), one block or several, float32 and float64 rows with NaN, exact thresholds
    and categories (interval walk), both accumulation dtypes: bit-exact against the
    interpreter."""
    rng = np.random.default_rng(64)
    for acc in ("float32", "float64"):
        if layout == "quant":  # heaps of depth 0..8: the 64-row walk (<= 6), the 32-row one (7,
            # 8); few rows: eight trees of depth <= 6 at once, then a group with deeper ones
            depths = [0, 1, 2, 3, 4, 5, 6, 6, 5, 3, 6, 1, 2, 4, 6, 6, 7, 2, 8, 1, 3]
            trees = [leaf_tree(0.75) if d == 0 else _complete_tree(rng, d, 9, p_leaf=0.2 * (d % 2))
                     for d in depths]
            if acc == "float32":
                trees = [dataclasses.replace(t, value=t.value.astype(np.float32).astype(np.float64))
                         for t in trees]
            f = Forest(trees=tuple(trees), n_features=9, n_outputs=1, tree_output=np.zeros(len(trees)),
                       base_score=[0.25], comparison="<" if acc == "float32" else "<=",
                       accumulate_dtype=acc)
        else:
            f = random_forest(7, n_trees=12, n_features=9, p_cat=0.3, accumulate_dtype=acc,
                              comparison="<" if acc == "float32" else "<=")
        X = random_rows(f, 200, seed=3)
        X = X[np.random.default_rng(5).permutation(len(X))]  # edge rows among the first ones
        for block in (0, 96, 320):
            p = treecomp.compile(f, backend="arrays", layout=layout, isa=isa, block_rows=block)
            assert p._kernel.isa == isa and p._kernel.tables.meta[layout]
            assert layout == "quant" or p._kernel._bitvec  # the byte walk, not the float one
            if layout == "quant" and isa != "scalar":  # the few-row walk's column indices, and
                # merged NaN columns (nodes of a feature send NaN both ways)
                assert p._kernel._struct.h_qcix and p._kernel._struct.q_cnan
            for n in (1, 63, 64, 65, 127, 128, 130, 257):
                _check(p, f, X[:n])
        # the few-row walks (below 8 rows; AVX-512: below 12), over rows with NaN, edges,
        # categories
        for i, n in zip(range(0, 200, 5), itertools.cycle((5, 8, 9, 1))):
            _check(p, f, X[i:i + n])


@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("comparison", ["<", "<="])
@pytest.mark.parametrize("layout", ["quant", "bitvec"])
def test_quant_every_table_size(isa, comparison, layout):
    """Float32 bins of 32 rows at once (three levels: broadcast compares, permuted tables,
    gathers) for every padded table size P = 16 .. 256: feature k splits on n[k] distinct
    thresholds; rows hold every threshold, the float32 values beside each, NaN, +-inf, +-0."""
    n = [1, 7, 15, 16, 31, 32, 47, 63, 64, 100, 127, 128, 200, 254, 255]
    rng = np.random.default_rng(17)
    pools = [np.unique(rng.normal(size=k).astype(np.float32)) for k in n]
    for pool in pools[1::2]:
        pool[0] = 0.0                                     # -0.0 in the rows meets 0.0 here
    trees = []
    weight = (np.array(n) + 8) / (np.sum(n) + 8 * len(n))  # nodes enough to use most thresholds
    for i in range(60):
        t = _complete_tree(rng, 6, len(n))
        internal = t.left >= 0
        t = dataclasses.replace(t, feature=np.where(internal, rng.choice(len(n), t.n_nodes, p=weight), -1))
        thr = [rng.choice(pools[k]) if internal[j] else 0.0 for j, k in enumerate(t.feature)]
        nanr = rng.random(t.n_nodes) < 0.5              # both NaN directions: two columns
        trees.append(dataclasses.replace(t, threshold=np.array(thr, np.float64), default_left=~nanr,
                                         value=t.value.astype(np.float32).astype(np.float64)))
    f = Forest(trees=tuple(trees), n_features=len(n), n_outputs=1, tree_output=np.zeros(len(trees)),
               base_score=[0.0], comparison=comparison, accumulate_dtype="float32")
    cols = []
    for pool in pools:
        v = np.concatenate([pool, np.nextafter(pool, np.float32(np.inf)),
                            np.nextafter(pool, np.float32(-np.inf)),
                            [np.nan, np.inf, -np.inf, -0.0, 0.0, 9.0, -9.0]]).astype(np.float32)
        cols.append(rng.permutation(np.resize(v, 800)))
    X = np.stack(cols, 1)
    p = treecomp.compile(f, backend="arrays", layout=layout, isa=isa)
    assert p._kernel.tables.meta[layout]
    assert set(p._kernel._quant["q_len"].tolist()) >= {16, 32, 64, 128, 256}
    want = interp.predict_raw(f, X)
    for block in (0, 33, 64):
        p = treecomp.compile(f, backend="arrays", layout=layout, isa=isa, block_rows=block)
        np.testing.assert_array_equal(p.predict_raw(X), want)
    # batches below 8 rows (single-row latency: no cleared block, the coarse level's
    # thresholds gathered): every table size, every edge value
    for i, n in zip(range(0, 800, 5), itertools.cycle(range(1, 8))):
        np.testing.assert_array_equal(p.predict_raw(X[i:i + n]), want[i:i + n])


@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("x", ["float32", "float64"])
@pytest.mark.parametrize("layout", ["quant", "bitvec"])
def test_quant_wide_rows_few_features_used(isa, x, layout):
    """Rows of 30 features of which the trees read 3 (one in the 4-feature tail): only those
    are transposed for the lane quantiser; the rest are never read."""
    rng = np.random.default_rng(23)
    used = np.array([0, 9, 29])
    trees = []
    for i in range(6):
        t = _complete_tree(rng, 5, 3)
        trees.append(dataclasses.replace(t, feature=np.where(t.left >= 0, used[np.maximum(t.feature, 0)], -1),
                                         value=t.value.astype(np.float32).astype(np.float64)))
    f = Forest(trees=tuple(trees), n_features=30, n_outputs=1, tree_output=np.zeros(6),
               base_score=[0.0], input_dtype=x, accumulate_dtype="float32")
    X = rng.normal(size=(300, 30)).astype(x)
    X[::7, 9] = np.nan
    for block in (0, 64, 100):
        p = treecomp.compile(f, backend="arrays", layout=layout, isa=isa, block_rows=block)
        assert p._kernel.tables.meta[layout]
        np.testing.assert_array_equal(p.predict_raw(X), interp.predict_raw(f, X))


@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("comparison", ["<", "<="])
@pytest.mark.parametrize("layout", ["quant", "bitvec"])
def test_quant_float64_thresholds_closer_than_float32(isa, comparison, layout):
    """Float64 bins start from a float32 guess and climb by double compares: thresholds a few
    double ULPs apart (one float32 value), beyond float32's range, subnormal, +-0; values on,
    just beside and between them."""
    near = 1.0 + np.arange(40) * 2.0 ** -40                       # all round to 1.0f
    pool = np.concatenate([near, -near[:5], [0.0, 5e-324, 1e-310, -1e-310, 3.4e38, 3.5e38,
                                             1e300, -1e300, 2.0 ** 128, np.nextafter(1.0, 0)]])
    rng = np.random.default_rng(5)
    trees = []
    for i in range(12):
        t = _complete_tree(rng, 6, 2)
        internal = t.left >= 0
        thr = np.where(internal, rng.choice(pool, t.n_nodes), 0.0)
        trees.append(dataclasses.replace(t, feature=np.where(internal, 0, -1), threshold=thr))
    f = Forest(trees=tuple(trees), n_features=2, n_outputs=1, tree_output=np.zeros(len(trees)),
               base_score=[0.0], comparison=comparison, input_dtype="float64")
    v = np.concatenate([pool, np.nextafter(pool, np.inf), np.nextafter(pool, -np.inf),
                        [np.nan, np.inf, -np.inf, -0.0, 1.0 + 2.0 ** -41]])
    X = np.stack([np.repeat(v, 3), rng.normal(size=3 * len(v))], 1)
    p = treecomp.compile(f, backend="arrays", layout=layout, isa=isa)
    assert p._kernel.tables.meta[layout]
    np.testing.assert_array_equal(p.predict_raw(X), interp.predict_raw(f, X))


def _unbalanced_tree(rng, n_leaves, nf):
    """A random binary tree with exactly n_leaves leaves (a random leaf split each step)."""
    left, right, feat, thr = [-1], [-1], [-1], [0.0]
    leaves = [0]
    while len(leaves) < n_leaves:
        i = leaves.pop(int(rng.integers(len(leaves))))
        feat[i], thr[i] = int(rng.integers(nf)), float(np.round(rng.normal(), 2))
        left[i], right[i] = len(left), len(left) + 1
        for _ in range(2):
            left.append(-1); right.append(-1); feat.append(-1); thr.append(0.0)
        leaves += [left[i], right[i]]
    return _random_leaves(rng, left, right, feat, thr)


SHAPE_CASES = [("<", "float32", "float32", 1), ("<=", "float32", "float64", 1),
               ("<=", "float64", "float64", 1), ("<", "float64", "float32", 3)]


@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("comparison,x,acc,width", SHAPE_CASES)
def test_bitvec_any_shape(isa, comparison, x, acc, width):
    """The interval walk: trees of 1..128 leaves of any shape (random, deep chains), every tail
    (64-row pairs, a lone 32-row group, fewer than 8 rows: the float walk)."""
    _bitvec_shapes(isa, False, comparison, x, acc, width)


@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("comparison,x,acc,width", SHAPE_CASES)
def test_interval_walk_biased_positions(isa, comparison, x, acc, width):
    """The same with trees of 129..255 leaves too, whose positions the walk biases
    (derived.interval_bias: -127; the paths without a biased sweep, NEON and llvm-vec, walk the
    float tables). Not in the aarch64 lane's families (its time budget): there such forests
    take the float node walk, which the lane's families cover."""
    _bitvec_shapes(isa, True, comparison, x, acc, width)


def _bitvec_shapes(isa, big, comparison, x, acc, width):
    rng = np.random.default_rng(13)
    trees = [leaf_tree(0.5 if width == 1 else np.full(width, 0.5))]
    for n_leaves in (2, 3, 7, 31, 63, 64, 100, 128) + ((129, 200, 255) if big else ()):
        trees.append(_unbalanced_tree(rng, n_leaves, 5))
    trees.append(chain_tree(254 if big else 127, 5, rng))   # 255 (128) leaves, as deep
    if width > 1:
        trees = [dataclasses.replace(t, value=rng.normal(size=(t.n_nodes, width))) for t in trees]
    if acc == "float32":
        trees = [dataclasses.replace(t, value=t.value.astype(np.float32).astype(np.float64)) for t in trees]
    f = Forest(trees=tuple(trees), n_features=5, n_outputs=width, tree_output=np.zeros(len(trees)),
               base_score=np.zeros(width), comparison=comparison, input_dtype=x, accumulate_dtype=acc,
               average=width > 1)
    assert max(t.n_leaves for t in trees) == (arrays_tables.BITVEC_MAX_LEAVES if big else 128)
    X = random_rows(f, 200)
    for block in (0, 5, 32, 96, 100):
        p = treecomp.compile(f, backend="arrays", layout="bitvec", isa=isa, block_rows=block)
        assert p._kernel.tables.meta["bitvec"]
        assert p._kernel._bv_bias == (-127 if big else 0)
        _check(p, f, X)
    if big:
        bigger = f.replace(trees=f.trees + (_unbalanced_tree(rng, 256, 5),), tree_output=np.zeros(len(trees) + 1))
        with pytest.raises(UnsupportedModelError, match="256 leaves"):
            arrays_tables.flatten(bigger, "bitvec")


@pytest.mark.parametrize("isa", NATIVE)
def test_interval_walk_of_255_leaf_trees_against_the_libraries(isa):
    """LightGBM's num_leaves=255 (numeric, NaN, categorical splits; a multiclass model's class-
    major margins) and HistGradientBoosting with max_leaf_nodes=200 and categories: trees of
    129-255 leaves take the interval walk with biased positions (auto's layout), bit for bit
    against the libraries for 1, 7, 40, 100 and 700 rows (was: the float walk, ~10x slower)."""
    lgb = pytest.importorskip("lightgbm")
    from sklearn.ensemble import HistGradientBoostingRegressor
    rng = np.random.default_rng(29)
    X = rng.normal(size=(6000, 12))
    X[:, 11] = rng.integers(0, 20, len(X))
    X[rng.random(X.shape) < 0.05] = np.nan
    y = np.nan_to_num(X[:, 0]) * np.nan_to_num(X[:, 1]) + np.sin(3 * np.nan_to_num(X[:, 2])) \
        + (np.nan_to_num(X[:, 11]) % 3) + rng.normal(size=len(X)) * 0.1
    rows = np.vstack([rng.normal(size=(700, 12)), X[:300]])
    rows[:700, 11] = rng.integers(-1, 25, 700)
    rows[rng.random(rows.shape) < 0.05] = np.nan
    params = {"num_leaves": 255, "min_data_in_leaf": 2, "min_sum_hessian_in_leaf": 0,
              "verbose": -1, "num_threads": 1, "max_cat_to_onehot": 1}
    reg = lgb.train(params, lgb.Dataset(X, y, categorical_feature=[11]), 6)
    # numeric, >= BV_LANES_MIN_TREES trees over <= 128 byte columns: the few-row lanes walk's
    # shape, which takes unbiased positions only (it gave such forests wrong leaves)
    num = lgb.train(params, lgb.Dataset(X[:, :11], y), 40)
    yc = rng.integers(0, 3, len(X))  # noise: every tree splits to its 255 leaves
    clf = lgb.train({**params, "objective": "multiclass", "num_class": 3},
                    lgb.Dataset(X, yc, categorical_feature=[11]), 3)
    hgb = HistGradientBoostingRegressor(max_iter=4, max_leaf_nodes=200, min_samples_leaf=2,
                                        categorical_features=[11], random_state=0).fit(X, y)
    for model, predict in ((reg, reg.predict), (clf, clf.predict), (hgb, hgb.predict),
                           (num, lambda r: num.predict(r[:, :11]))):
        f = treecomp.parse(model)
        assert 128 < max(t.n_leaves for t in f.trees) <= 255
        p = treecomp.compile(f, backend="arrays", isa=isa)
        assert p._kernel._bitvec and p._kernel._bv_bias == -127
        cols = rows[:, :f.n_features]
        for n in (1, 2, 7, 9, 27, 40, 100, len(rows)):
            np.testing.assert_array_equal(p.predict(cols[:n]), predict(rows[:n]))


@pytest.mark.parametrize("rule", ["nonneg", "trunc", "integral"])
def test_bitvec_categories_beyond_the_byte_codes(rule):
    """Category codes are bytes (254: any other value, 255: NaN): sets of 320 bits whose bits from
    254 up agree with cat_other_left take the interval walk; others fall back to the float walk.
    Both are exact on values around 0, 253..256, 300, 319.5, negatives, NaN and huge ones."""
    rng = np.random.default_rng(17)
    walks = []
    for consistent in (True, False):
        trees = []
        for _ in range(6):
            bits = rng.integers(0, 2**32, (3, 10), dtype=np.uint64).astype(np.uint32)
            other = rng.random(3) < 0.5
            if consistent:  # codes >= 254 all go where invalid values go
                for k in range(3):
                    fill = np.uint32(0xFFFFFFFF) if other[k] else np.uint32(0)
                    bits[k, 8:] = fill
                    bits[k, 7] = (bits[k, 7] & np.uint32(0x3FFFFFFF)) | (fill & np.uint32(0xC0000000))
            trees.append(Tree(left=[1, 3, 5, -1, -1, -1, -1], right=[2, 4, 6, -1, -1, -1, -1],
                              feature=[0, 1, 0, -1, -1, -1, -1], threshold=[0, 0.5, 0, 0, 0, 0, 0],
                              default_left=rng.random(7) < 0.5, value=rng.normal(size=7),
                              cat_index=[0, -1, 1, -1, -1, -1, -1] if consistent else [0, 2, 1, -1, -1, -1, -1],
                              cat_bits=bits, cat_other_left=other))
        f = Forest(trees=tuple(trees), n_features=2, n_outputs=1, tree_output=np.zeros(6),
                   base_score=[0.0], input_dtype="float64", category_rule=rule)
        X = rng.normal(size=(300, 2)) * 0.4
        vals = np.array([0, 1, 7.5, 31, 32, 253, 253.5, 254, 255, 256, 300, 319, 319.5, 320, -0.5,
                         -1, -0.0, np.nan, 1e9, -1e9, np.inf])
        X[:, 0] = rng.choice(vals, 300)
        X[::3, 1] = rng.choice(vals, 100)
        p = treecomp.compile(f, backend="arrays", layout="bitvec")
        walks.append(bool(p._kernel._bitvec))
        np.testing.assert_array_equal(p.predict_raw(X), interp.predict_raw(f, X))
    assert walks == [True, False]


def test_bitvec_intervals_of_a_small_tree():
    """Leaves numbered left to right; each node's interval is its left subtree's leaves."""
    #        0: x0 <= 0
    #      /           \
    #   1: x1 <= 0      2: leaf C
    #   /      \
    #  3: A    4: x0 <= -1
    #           /     \
    #         5: B     6: D
    t = Tree(left=[1, 3, -1, -1, 5, -1, -1], right=[2, 4, -1, -1, 6, -1, -1],
             feature=[0, 1, -1, -1, 0, -1, -1], threshold=[0, 0, 0, 0, -1, 0, 0],
             default_left=[True] * 7, value=[0, 0, 30, 10, 0, 20, 40])
    f = Forest(trees=(t,), n_features=2, n_outputs=1, tree_output=[0], base_score=[0.0])
    A = arrays_tables.flatten(f, "bitvec").arrays
    bv = arrays_derived.bitvec_tables(A)
    # in order: A(10) B(20) D(40) C(30); nodes by lo: node0 [0,3), node1 [0,1), node4 [1,2)
    np.testing.assert_array_equal(bv["bv_leaf"], [10, 20, 40, 30])
    got = sorted(zip((bv["bv_lo1"] + 1).tolist(), bv["bv_hi"].tolist()))
    assert got == [(0, 1), (0, 3), (1, 2)]
    assert np.all(np.diff(bv["bv_lo1"]) >= 0)


def test_quant_tables_and_choice():
    f, _ = _many_threshold_forest("<=", "float64", n_thr=40)
    tab = arrays_tables.flatten(f, "auto")
    assert tab.meta["quant"] and not arrays_tables.flatten(f, "heap").meta["quant"]
    q = arrays_derived.quant_tables(tab.arrays["h_ff"], tab.arrays["h_thr"])
    # one column per (feature, NaN direction) here; each table sorted, NaN-padded to >= 16
    for c in range(len(q["q_feat"])):
        u = q["q_thr"][q["q_off"][c]:q["q_off"][c] + q["q_len"][c]]
        k = q["q_count"][c]
        assert q["q_len"][c] >= max(16, k + 1) and np.all(np.diff(u[:k]) > 0) and np.isnan(u[k:]).all()
    # padding slots get 255 (always left), real slots their threshold's index in the column
    real = ~np.isnan(tab.arrays["h_thr"])
    assert np.all(q["h_qthr"][~real] == 255)
    col = q["h_qcol"][real]
    got = q["q_thr"][q["q_off"][col] + q["h_qthr"][real]]
    np.testing.assert_array_equal(got, tab.arrays["h_thr"][real])
    # auto: categorical or deeper than 8 levels -> the float walks; quant refuses them by name
    with pytest.raises(UnsupportedModelError, match="categorical"):
        arrays_tables.flatten(random_forest(1, p_cat=0.5), "quant")
    deep = random_forest(2, max_depth=12, n_trees=2)
    assert not arrays_tables.flatten(deep, "auto").meta["quant"]
    with pytest.raises(UnsupportedModelError, match="depth"):
        arrays_tables.flatten(deep, "quant")


def test_layout_choice_and_table_size():
    rng = np.random.default_rng(2)
    complete = _complete_tree(rng, 6, 5)
    sparse = chain_tree(8, 5, rng)  # depth 8, 9 leaves: 256 slots would be 28x its leaves
    f = random_forest(1, p_cat=0.5, n_trees=3)
    # a 256-leaf tree rules out the byte walks: the float layouts are then chosen per tree
    f = f.replace(trees=(complete, sparse) + f.trees[:1] + (chain_tree(255, 5, rng),),
                  tree_output=[0, 0, 0, 0])
    tab = arrays_tables.flatten(f, "auto")
    assert not tab.meta["quant"] and not tab.meta["bitvec"]
    assert tab.arrays["tree_layout"].tolist() == [0, 1, int(f.trees[2].has_categorical), 1]
    assert arrays_tables.flatten(f, "heap").arrays["tree_layout"].tolist()[:2] == [0, 0]
    assert set(arrays_tables.flatten(f, "compact").arrays["tree_layout"].tolist()) == {1}
    # memory: auto tables stay within a small factor of the IR's own arrays
    big = random_forest(3, n_trees=50, max_depth=8)
    ir_bytes = sum(a.nbytes for _, a in big._arrays())
    assert arrays_tables.flatten(big).nbytes < 2 * ir_bytes


@pytest.mark.parametrize("isa", ISAS[:3])
def test_a_sparse_tree_keeps_the_byte_walk(isa):
    """One sparse depth-8 tree (a chain of 9 leaves) among full ones is padded into a heap too:
    the forest keeps the quantised walk, where it used to send every tree to the float walk;
    a forest of only such trees takes the interval walk (tables.quant_pays: 100 such chains
    over 12 features, 8 used: bitvec 120 vs quant 142 ns/row, 2026-11-28)."""
    rng = np.random.default_rng(81)
    trees = [_complete_tree(rng, 8, 12) for _ in range(5)]
    trees.insert(2, chain_tree(8, 12, rng))
    f = Forest(trees=tuple(trees), n_features=12, n_outputs=1, tree_output=np.zeros(len(trees)),
               base_score=[0.5])
    assert arrays_tables.quant_eligible(f)
    p = treecomp.compile(f, backend="arrays", isa=isa)
    assert p._kernel.tables.meta["quant"] and set(p._kernel.tables.arrays["tree_layout"]) == {0}
    _few_row_checks(p, f, random_rows(f, 60, seed=5))
    chains = f.replace(trees=tuple(chain_tree(8, 12, rng) for _ in range(4)), tree_output=np.zeros(4))
    meta = arrays_tables.flatten(chains, "auto").meta  # (the interval walk: quant_pays)
    assert not meta["quant"] and meta["bitvec"]


def test_transform_flag_and_threads():
    f = random_forest(9, **FOREST_VARIANTS["multi-output"])
    X = np.ascontiguousarray(random_rows(f, 3000))
    p = treecomp.compile(f, backend="arrays")
    raw = p.predict_raw(X)
    np.testing.assert_array_equal(p.predict_raw(X, n_threads=2), raw)
    out = np.empty_like(raw)
    p._kernel.run(X, out, 1)
    np.testing.assert_array_equal(out, outputs.transform(f, raw))


@pytest.mark.skipif(not ZOO, reason="no zoo")
def test_zoo_bit_exact():
    """Every zoo case on every C-kernel ISA this CPU has and on the llvmlite walker (one test:
    the zoo trains once per worker), and the numpy walker on a third of the cases."""
    native = NATIVE
    failures = []
    for n, name in enumerate(ZOO):
        case = zoo.get(name)
        f = treecomp.parse(case.path or case.model)
        X = np.vstack([case.X, edge_rows(f, case.X, n=100, nan=f.allow_nan)])
        want_raw, want = interp.predict_raw(f, X), interp.predict(f, X)
        want_p = interp.predict_proba(f, X) if f.is_classifier else None
        runs = [(isa, "auto") for isa in native + [i for i in ("llvm",) if i in HAVE]]
        runs += [("numpy", "auto")] if n % 3 == 0 else []
        meta = arrays_tables.flatten(f).meta
        if meta["quant"] or meta["bitvec"]:  # auto took a byte walk: the float walk too
            runs += [(native[-1], "heap" if meta["quant"] else "compact")]
        for isa, layout in runs:
            p = treecomp.compile(f, backend="arrays", isa=isa, layout=layout)
            try:
                np.testing.assert_array_equal(p.predict_raw(X), want_raw)
                np.testing.assert_array_equal(p.predict(X), want)
                if want_p is not None:
                    got = p.predict_proba(X)
                    for a, b in zip(want_p if isinstance(want_p, list) else [want_p],
                                    got if isinstance(got, list) else [got]):
                        np.testing.assert_array_equal(b, a)
                        assert a.dtype == b.dtype
                if n % 3 == 0:  # the small-batch path (native transform, (1 - p, p) rows) too
                    assert_backend_matches_interp(p, f, X[:9])
            except AssertionError as exc:
                failures.append(f"{name} [{isa}, {layout}]: {exc}")
    assert not failures, "\n".join(failures)


# -- few rows (single-row latency): the AVX-512 walks of a row's slot / node decisions ------------
def _few_row_checks(p, f, X):
    """Single rows and batches of 1..15 rows (the few-row walks below 12 and 17 rows, the vector walks
    above) bit for bit against the interpreter and against the same rows in one large batch."""
    for Xin in (X, X.astype(np.float32)):
        want = interp.predict_raw(f, Xin)
        np.testing.assert_array_equal(p.predict_raw(Xin), want)
        for i in range(0, 40):
            np.testing.assert_array_equal(p.predict_raw(Xin[i:i + 1]), want[i:i + 1])
        for i, n in zip(range(40, len(X), 9), itertools.cycle(range(1, 16))):
            np.testing.assert_array_equal(p.predict_raw(Xin[i:i + n]), want[i:i + n])


@pytest.mark.parametrize("isa", ISAS[:3])
@pytest.mark.parametrize("nf,both,c7", [(20, True, "mux"), (80, False, "cols"), (140, False, None)])
def test_few_rows_deep_heaps(isa, nf, both, c7):
    """Heaps of depth 7 and 8 among shallower ones, a row at a time: on AVX-512 the slots'
    decisions in four 64-slot masks, the row's bytes looked up in a 128-byte table (h_qc7):
    the column mux's columns with merged NaN twins (NaN-left slots read the table's upper half),
    or up to 128 columns; more columns walk bytes a tree at a time. Rows on thresholds, +-1 ULP,
    NaN, -0.0, infinities."""
    rng = np.random.default_rng(71)
    depths = [8, 8, 7, 8, 3, 8, 6, 8, 7, 7, 8, 8, 8, 8, 8, 8, 0, 8, 5, 8]
    trees = []
    for d in depths:
        t = leaf_tree(0.25) if d == 0 else _complete_tree(rng, d, nf, p_leaf=0.1 if d == 7 else 0.0)
        dl = t.default_left if both else np.ones(t.n_nodes, bool)
        trees.append(dataclasses.replace(t, value=t.value.astype(np.float32).astype(np.float64),
                                         default_left=dl))
    f = Forest(trees=tuple(trees), n_features=nf, n_outputs=1, tree_output=np.zeros(len(trees)),
               base_score=[0.5], comparison="<", accumulate_dtype="float32")
    X = random_rows(f, 100, seed=4)
    X = X[np.random.default_rng(2).permutation(len(X))]  # edge rows among the first ones
    p = treecomp.compile(f, backend="arrays", layout="quant", isa=isa)
    k = p._kernel
    assert k.isa == isa and k.tables.meta["quant"]
    assert ("h_qc7" in k._keep) == (c7 is not None)
    assert ("h_zq" in k._keep) == (c7 is not None)  # the depth <= 6 trees' aligned slot bytes
    assert ("h_zq8" in k._keep) == (c7 is not None)  # ... and the depth 7 / 8 trees' windows
    assert "h_zt" not in k._keep  # trees in lanes: every tree of depth <= 6 only
    assert bool(k._struct.q_cnan) == (c7 == "mux") and (k._struct.q_cmux > 0) == (c7 == "mux")
    _few_row_checks(p, f, X)


@pytest.mark.parametrize("isa", ISAS[:3])
@pytest.mark.parametrize("nf,both,no,acc,cmp", [(20, True, 1, "float32", "<"),
                                                (80, False, 1, "float64", "<="),
                                                (30, True, 3, "float32", "<=")])
def test_few_rows_trees_in_lanes(isa, nf, both, no, acc, cmp):
    """Forests whose every tree is a heap of depth <= 8: on AVX-512 a row walks 64 trees a
    vector (h_zt: the trees' slot bytes side by side, each level's decision selected by the
    earlier levels', shallower trees' missing slots always left), the last group padded, leaves
    added in tree order; a last group of < 32 trees and forests of < 32 trees eight trees at a
    time (or one by one). 1, 2, 13, 31, 32, 40, 64, 65, 70, 100 and 130 trees, the deepest 6, 4,
    7, 5, 8, 3 or 1 (the lanes walk's levels: the deepest tree's, h_ztd, 3 at least; at depth 6-8
    the last level from the trees' records, h_zr; level 6 of a depth-8 forest depth first; the
    NEON walk's the same way); the column mux with merged NaN twins (20, 30 features) or plain
    columns (80); several outputs; float32 and float64 margins. Single rows and 1..15-row
    batches bit for bit against the interpreter, rows on thresholds, +-1 ULP, NaN, -0.0,
    infinities."""
    rng = np.random.default_rng(37 + nf)
    mux = set()
    deepest = {32: 4, 40: 7, 65: 5, 70: 8, 100: 3, 130: 1}
    for n_trees in (1, 2, 13, 31, 32, 40, 64, 65, 70, 100, 130):
        dmax = deepest.get(n_trees, 6)
        depths = rng.integers(0, dmax + 1, n_trees)
        depths[:min(n_trees, 2)] = dmax
        trees = []
        for d in depths:
            t = leaf_tree(0.25) if d == 0 else _complete_tree(rng, int(d), nf, p_leaf=0.15 if d == dmax else 0.0)
            # thresholds on a grid: few per feature (one column each, the row table's 128 bytes)
            value = t.value.astype(np.float32).astype(np.float64) if acc == "float32" else t.value
            trees.append(dataclasses.replace(
                t, threshold=np.round(t.threshold * 8) / 8, value=value,
                default_left=t.default_left if both else np.ones(t.n_nodes, bool)))
        f = Forest(trees=tuple(trees), n_features=nf, n_outputs=no,
                   tree_output=np.arange(n_trees) % no, base_score=np.full(no, 0.5),
                   comparison=cmp, accumulate_dtype=acc)
        X = random_rows(f, 60, seed=n_trees)
        X = X[np.random.default_rng(n_trees).permutation(len(X))]
        p = treecomp.compile(f, backend="arrays", layout="quant", isa=isa)
        k = p._kernel
        assert k.isa == isa and k.tables.meta["quant"]
        if n_trees < arrays_derived.ZLANES_MIN_TREES:  # eight trees at a time
            assert "h_zt" not in k._keep
        else:
            slots = 127 if dmax == 8 else 63
            assert "h_zt" in k._keep and len(k._keep["h_zt"]) == -(-n_trees // 64) * slots * 128
            assert k._struct.h_ztd == max(int(t.depths().max()) for t in trees) == dmax
            # a depth 6-8 forest's last level from the trees' records (zrow_records)
            assert ("h_zr" in k._keep) == (dmax >= arrays_derived.ZREC_DEPTH == 6)
        mux.add(k._struct.q_cmux > 0)
        _few_row_checks(p, f, X)
    assert mux == ({True} if nf <= 64 else {True, False})  # the column mux, and plain columns


@pytest.mark.parametrize("isa", ISAS[:3])
@pytest.mark.parametrize("nf,x,cmp,both,rq", [(12, "float32", "<", True, True),
                                              (90, "float64", "<=", False, True),
                                              (40, "float32", "<=", True, True),
                                              (140, "float64", "<", True, False),
                                              (300, "float32", "<=", True, False)])
def test_few_rows_quantiser_columns_at_once(isa, nf, x, cmp, both, rq):
    """Below 16 rows the AVX-512 quantiser bins a row's columns 16 a vector (8 for float64
    rows), a lane's binary search one gather a step: tables of every length (16 .. 256, and
    chunks of 254 past 255 thresholds: half the nodes split features 0-5 on pools of 120, 255,
    600, 40, 20 and 70 values), NaN both ways (q_src copies, merged columns) or left only, a
    last partial vector of columns; up to 128 columns into the few-row walk's contiguous row
    tables (rq), more (> 128, > 256) into the block's layout. Rows on thresholds, +-1 ULP
    (float32 and float64), NaN, -0.0, infinities, single rows and 1..16-row batches bit for bit
    against the interpreter."""
    rng = np.random.default_rng(nf)
    sizes = np.concatenate([[120, 255, 600, 40, 20, 70], rng.choice([1, 3, 15, 16, 17, 31, 40, 100, 200], nf - 6)])
    pools = [np.unique(rng.normal(size=int(n)).astype(np.float32)).astype(np.float64) for n in sizes]
    trees = []
    for _ in range(100):  # one group of 64 trees in lanes, a last one of 36
        t = _complete_tree(rng, 6, nf, p_leaf=0.05)
        internal = t.left >= 0
        feat = np.where(internal, np.where(rng.random(t.n_nodes) < 0.5, rng.integers(0, 6, t.n_nodes),
                                           t.feature), -1)
        thr = np.array([rng.choice(pools[f]) if f >= 0 else 0.0 for f in feat])
        value = t.value.astype(np.float32).astype(np.float64) if x == "float32" else t.value
        trees.append(dataclasses.replace(t, feature=feat, threshold=thr, value=value,
                                         default_left=t.default_left if both else np.ones(t.n_nodes, bool)))
    f = Forest(trees=tuple(trees), n_features=nf, n_outputs=1, tree_output=np.zeros(len(trees)),
               base_score=[0.5], comparison=cmp, input_dtype=x, accumulate_dtype=x)
    X = random_rows(f, 40, seed=nf)
    on = np.stack([rng.choice(pools[j], 30) for j in range(nf)], axis=1)  # on thresholds, +-1 ULP
    up = np.where(rng.random(on.shape) < 0.5, np.inf, -np.inf)
    ulp32 = np.nextafter(on.astype(np.float32), up.astype(np.float32)).astype(np.float64)
    pick = rng.random(on.shape)
    near = np.where(pick < 0.4, on, np.where(pick < 0.7, ulp32, np.nextafter(on, up)))
    X = np.vstack([near[:15], X, near[15:]])
    X = X[np.random.default_rng(1).permutation(len(X))]
    p = treecomp.compile(f, backend="arrays", layout="quant", isa=isa)
    k = p._kernel
    assert k.isa == isa and k.tables.meta["quant"]
    q_len = k._keep["q_len"]
    assert set(q_len.tolist()) >= {16, 32, 64, 128, 256} and (k._keep["q_count"] == 254).any()
    assert (len(q_len) <= 128 and "h_zq" in k._keep and "h_zt" in k._keep) == rq
    _few_row_checks(p, f, X)
    for Xin in (X, X.astype(np.float32)):
        want = interp.predict_raw(f, Xin)
        for i in range(0, len(X) - 16, 16):
            np.testing.assert_array_equal(p.predict_raw(Xin[i:i + 16]), want[i:i + 16])


@pytest.mark.parametrize("isa", ISAS[:3])
@pytest.mark.parametrize("variant", ["categorical", "categorical-trunc", "categorical-integral"])
def test_few_rows_quantiser_category_codes(isa, variant):
    """The interval walk's category-code columns (q_kind) in 8..15-row batches, which the
    AVX-512 quantiser bins a vector of columns at a time (the category columns by the scalar
    rule beside the others'): against the interpreter bit for bit."""
    f = random_forest(5, n_trees=24, n_features=9, max_depth=6, **FOREST_VARIANTS[variant])
    p = treecomp.compile(f, backend="arrays", layout="bitvec", isa=isa)
    k = p._kernel
    assert k.tables.meta["bitvec"] and k._keep["q_kind"].any()
    X = random_rows(f, 150, seed=3)
    for Xin in (X, X.astype(np.float32)):
        want = interp.predict_raw(f, Xin)
        for i, n in zip(range(0, len(X), 16), itertools.cycle(range(1, 17))):
            np.testing.assert_array_equal(p.predict_raw(Xin[i:i + n]), want[i:i + n])


@pytest.mark.parametrize("isa", ISAS[:3])
@pytest.mark.parametrize("comparison,x,acc,no", [("<=", "float64", "float64", 1),
                                                 ("<", "float32", "float32", 1),
                                                 ("<=", "float64", "float64", 3)])
def test_few_rows_interval_walk(isa, comparison, x, acc, no):
    """The interval walk's trees (<= 64 leaves, any shape: deep chains, 64-leaf complete trees,
    single leaves), a row at a time: on AVX-512 the nodes' decisions as one mask and the exit
    leaf as the lowest leaf no right-going node's left-subtree mask covers (bv_lmask). Several
    outputs (a tree per output): leaves into their own margins."""
    rng = np.random.default_rng(23)
    trees = [leaf_tree(0.5)]
    for n_leaves in (2, 3, 9, 31, 63, 64, 64, 40, 17):
        trees.append(_unbalanced_tree(rng, n_leaves, 50))
    trees += [_complete_tree(rng, 6, 50), chain_tree(63, 50, rng), _complete_tree(rng, 5, 50, p_leaf=0.3)]
    trees = [dataclasses.replace(t, default_left=rng.random(t.n_nodes) < 0.5) for t in trees]
    if acc == "float32":
        trees = [dataclasses.replace(t, value=t.value.astype(np.float32).astype(np.float64)) for t in trees]
    f = Forest(trees=tuple(trees), n_features=50, n_outputs=no, tree_output=np.arange(len(trees)) % no,
               base_score=np.full(no, 0.125), comparison=comparison, input_dtype=x, accumulate_dtype=acc)
    assert max(t.n_leaves for t in trees) == 64
    X = random_rows(f, 100, seed=6)
    X = X[np.random.default_rng(3).permutation(len(X))]
    p = treecomp.compile(f, backend="arrays", layout="bitvec", isa=isa)
    k = p._kernel
    assert k.isa == isa and k._bitvec
    assert "bv_lmask" in k._keep  # (the scalar and AVX2 paths walk the float tables)
    _few_row_checks(p, f, X)
    # a tree of 65 leaves: no masks, the float walk
    g = f.replace(trees=f.trees + (_unbalanced_tree(rng, 65, 50),),
                  tree_output=np.arange(len(trees) + 1) % no)
    pg = treecomp.compile(g, backend="arrays", layout="bitvec", isa=isa)
    assert "bv_lmask" not in pg._kernel._keep
    _few_row_checks(pg, g, X[:60])


@pytest.mark.parametrize("isa", ISAS[:3])
@pytest.mark.parametrize("comparison,x,acc,no", [("<=", "float64", "float64", 1),
                                                 ("<", "float32", "float32", 1),
                                                 ("<=", "float64", "float64", 3)])
@pytest.mark.parametrize("n_trees", [40, 90, 130])
def test_few_rows_interval_lanes(isa, comparison, x, acc, no, n_trees):
    """The AVX-512 few-row interval walk with 64 trees in a vector's lanes (bv_zl, zbvlanes):
    forests of >= 32 trees of 1..128 leaves mixed in each 64-tree group (single leaves, chains,
    complete and unbalanced trees; the group's slots are its largest tree's nodes, the others
    padded), fewer than 64 trees, 65..128 and 129..192 (a last group alone or in a pair); NaN
    sent both ways, rows on thresholds, +-1 ULP; 1..15 rows, bit for bit against the
    interpreter. Several outputs: the leaves added into their own margins in tree order."""
    rng = np.random.default_rng(31 + n_trees)
    sizes = [1, 2, 3, 9, 31, 63, 64, 65, 100, 128]
    trees = []
    for i in range(n_trees):
        k = sizes[rng.integers(len(sizes))] if i % 9 else (1, 64, 128)[i % 3]
        if k == 1:
            trees.append(leaf_tree(float(rng.normal())))
        elif i % 11 == 5 and k <= 64:
            trees.append(chain_tree(k - 1, 30, rng))
        elif i % 7 == 3:
            trees.append(_complete_tree(rng, 6, 30, p_leaf=0.2))
        else:
            trees.append(_unbalanced_tree(rng, k, 30))
    trees = [dataclasses.replace(t, default_left=rng.random(t.n_nodes) < 0.5) for t in trees]
    if acc == "float32":
        trees = [dataclasses.replace(t, value=t.value.astype(np.float32).astype(np.float64)) for t in trees]
    f = Forest(trees=tuple(trees), n_features=30, n_outputs=no, tree_output=np.arange(n_trees) % no,
               base_score=np.full(no, 0.125), comparison=comparison, input_dtype=x, accumulate_dtype=acc)
    assert max(t.n_leaves for t in trees) == 128
    X = random_rows(f, 100, seed=9)
    X = X[np.random.default_rng(4).permutation(len(X))]
    p = treecomp.compile(f, backend="arrays", layout="bitvec", isa=isa)
    k = p._kernel
    assert k.isa == isa and k._bitvec
    # (built on every ISA: the AVX-512 path reads it)
    zlo, nint = k._keep["bv_zlo"], k.tables.arrays["tree_nint"]
    groups = -(-n_trees // 64)
    assert len(zlo) == groups + 1
    for g in range(groups):
        assert zlo[g + 1] - zlo[g] == nint[64 * g:64 * g + 64].max()
    assert len(k._keep["bv_zl"]) == 256 * zlo[-1]
    if n_trees == 130 and isa == "scalar":  # filled 64 trees at a time: the same table
        q = k._quant
        args = (q["h_qcol"].astype(np.uint8), k._keep["h_qthr"], k._bitvec["bv_lo1"],
                k._bitvec["bv_hi"], k.tree_node, k.tables.arrays["tree_nint"])
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(arrays_derived, "LANES_CHUNK", 64)
            small = arrays_derived.interval_lanes(*args)
        assert np.array_equal(small["bv_zl"], k._keep["bv_zl"])
    _few_row_checks(p, f, X)
    # fewer than BV_LANES_MIN_TREES trees: no lanes table
    few = f.replace(trees=f.trees[:20], tree_output=np.arange(20) % no)
    assert "bv_zl" not in treecomp.compile(few, backend="arrays", layout="bitvec", isa=isa)._kernel._keep


@pytest.mark.parametrize("isa", ISAS[:3])
@pytest.mark.parametrize("variant", ["categorical", "categorical-acc32", "categorical-trunc"])
def test_few_rows_interval_lanes_categorical(isa, variant):
    """The lanes walk with categorical nodes: their byte compares never fire (threshold 127)
    and their decisions come from the row's codes' rows (bv_zcatd, the nodes numbered in
    (slot, lane) order), deposited per slot at its categorical lanes (bv_zcatk, bv_zk0).
    70 trees (a pair of groups, the second short); rows with unseen, negative, fractional,
    NaN and huge categories, on thresholds, +-1 ULP; 1..15 rows against the interpreter."""
    f = random_forest(760 + len(variant), n_trees=70, n_features=9, max_depth=6,
                      **FOREST_VARIANTS[variant])
    assert max(t.n_leaves for t in f.trees) <= 64
    X = random_rows(f, 100, seed=13)
    X[::7, 0] = 1e30
    X = X[np.random.default_rng(8).permutation(len(X))]
    p = treecomp.compile(f, backend="arrays", layout="bitvec", isa=isa)
    k = p._kernel
    assert k.isa == isa and k._bitvec and k._keep["q_kind"].any()
    catk = k._keep["bv_zcatk"]
    assert len(catk) == k._keep["bv_zlo"][-1] and catk.any() and (catk != catk.max()).any()
    # every categorical node once, in (slot, lane) order
    assert sum(bin(int(c)).count("1") for c in catk) == len(k._keep["q_cat"]) // 32
    _few_row_checks(p, f, X)


def test_few_rows_interval_lanes_lightgbm():
    """LightGBM models on the lanes walk (bv_zl): binary, 70 trees of 2..63 leaves, and 3
    classes x 30 rounds of 7..100 leaves (> 64: no leaf masks, only the lanes walk); float64 rows with NaN, on thresholds, +-1 ULP; 1, 2 and 7 rows at a time on
    every native ISA, bit for bit against LightGBM's raw scores and predict_proba."""
    lgb = pytest.importorskip("lightgbm")
    rng = np.random.default_rng(15)
    X = rng.normal(size=(3000, 40))
    X[:, 5] = rng.integers(0, 6, len(X))
    X[rng.random(X.shape) < 0.1] = np.nan
    s = np.nan_to_num(X[:, 0]) + np.nan_to_num(X[:, 1]) * np.nan_to_num(X[:, 2]) + rng.normal(0, 0.3, len(X))
    kw = dict(min_child_samples=3, min_split_gain=1.0, n_jobs=1, verbose=-1, random_state=0)
    binary = lgb.LGBMClassifier(n_estimators=70, num_leaves=63, **kw).fit(X, s > 0)
    multi = lgb.LGBMClassifier(n_estimators=30, num_leaves=100, **kw).fit(X, np.digitize(s, [-0.5, 0.5]))
    for model in (binary, multi):
        f = treecomp.parse(model)
        assert len({t.n_leaves for t in f.trees}) > 5
        assert (max(t.n_leaves for t in f.trees) > 64) == (model is multi)
        Z = edge_rows(f, X[:300], n=120, seed=3)
        want = model.booster_.predict(Z, raw_score=True)
        for isa in NATIVE:
            p = treecomp.compile(model, backend="arrays", isa=isa)
            assert p._kernel.isa == isa and "bv_zl" in p._kernel._keep
            for i, n in zip(range(0, len(Z), 5), itertools.cycle((1, 2, 7))):
                np.testing.assert_array_equal(p.predict_raw(Z[i:i + n]).reshape(want[i:i + n].shape),
                                              want[i:i + n])
                np.testing.assert_array_equal(p.predict_proba(Z[i:i + n]), model.predict_proba(Z[i:i + n]))


@pytest.mark.parametrize("isa", ISAS[:3])
@pytest.mark.parametrize("variant", ["categorical", "categorical-acc32", "categorical-trunc",
                                     "categorical-integral"])
def test_few_rows_interval_walk_categorical(isa, variant):
    """Forests with categorical nodes a row at a time on the interval walk (trees of <= 64
    leaves): on AVX-512 the row's categorical decisions are its codes' rows of bv_catd OR-ed
    (one per category column), each tree's bits deposited at its categorical nodes (bv_catk),
    the numeric nodes by the byte compare. Rows with unseen, negative, fractional, NaN and huge
    categories, on thresholds, +-1 ULP, NaN; 1..15 rows, bit for bit against the interpreter."""
    f = random_forest(700 + len(variant), n_trees=30, n_features=9, max_depth=6,
                      **FOREST_VARIANTS[variant])
    assert max(t.n_leaves for t in f.trees) <= 64
    X = random_rows(f, 100, seed=11)
    X[::7, 0] = 1e30
    X = X[np.random.default_rng(7).permutation(len(X))]
    p = treecomp.compile(f, backend="arrays", layout="bitvec", isa=isa)
    k = p._kernel
    assert k.isa == isa and k._bitvec and k._keep["q_kind"].any()
    if isa == "avx512":  # (the other ISAs walk the float tables below 8 rows)
        assert {"bv_lmask", "bv_catd", "bv_catk"} <= set(k._keep)
        catk = k._keep["bv_catk"]
        assert catk.any() and (catk != catk.max()).any()  # trees with and without such nodes
    _few_row_checks(p, f, X)


@pytest.mark.parametrize("isa", ISAS[:3])
def test_few_rows_interval_walk_many_categorical_nodes(isa):
    """Trees of 50..64 leaves whose every node is categorical, between trees of a few: some
    trees' decision bits span two of the row's 8-byte words (bv_catd's k0 & 7 plus their
    count past 64 bits), bit for bit against the interpreter."""
    trees = []
    for seed in range(40):  # (<= 30 big trees: bv_catd stays under CAT_ROWS_MAX_BYTES)
        g = random_forest(900 + seed, n_trees=12, n_features=9, max_depth=7, p_cat=1.0)
        trees += [t for t in g.trees if (50 <= t.n_leaves <= 64 and len(trees) < 60) or t.n_leaves <= 4]
    assert sum(t.n_leaves >= 59 for t in trees) >= 8
    f = g.replace(trees=tuple(trees), tree_output=np.zeros(len(trees), np.int32))
    X = random_rows(f, 80, seed=4)
    p = treecomp.compile(f, backend="arrays", layout="bitvec", isa=isa)
    if isa == "avx512":
        catk = p._kernel._keep["bv_catk"]
        cnt = np.array([bin(int(c)).count("1") for c in catk])
        k0 = np.cumsum(cnt) - cnt
        assert np.sum(k0 % 8 + cnt > 64) >= 3  # bits from the second word
    _few_row_checks(p, f, X)


@pytest.mark.parametrize("max_iter", [30, 40])
def test_few_rows_interval_walk_categorical_library(max_iter):
    """sklearn HistGradientBoosting with categorical features and missing values, one row, two
    and seven at a time on every native ISA: bit for bit against the library's own margins
    (its category re-coding: unknown, negative and NaN categories go its way). On AVX-512, 30
    trees take the per-tree mask walk, 40 the lanes walk (>= 32 trees: bv_zcatd)."""
    ens = pytest.importorskip("sklearn.ensemble")
    rng = np.random.default_rng(12)
    n = 1500
    X = rng.normal(size=(n, 6))
    X[:, 0] = rng.integers(0, 12, n)
    X[:, 3] = rng.integers(0, 40, n)
    y = (X[:, 1] + np.isin(X[:, 0], [1, 4, 7]) + (X[:, 3] % 3 == 0) + rng.normal(0, 0.5, n)) > 0.8
    X[rng.random(X.shape) < 0.1] = np.nan
    m = ens.HistGradientBoostingClassifier(categorical_features=[0, 3], max_iter=max_iter,
                                           max_leaf_nodes=31, random_state=0).fit(X, y)
    f = treecomp.parse(m)
    assert f.n_trees == max_iter
    Z = edge_rows(f, X[:200], n=80, seed=2)
    Z[::5, 0] = rng.choice([-1.0, 12.0, 99.0, 2.5, np.nan], len(Z[::5]))
    Z[1::5, 3] = rng.choice([-3.0, 40.0, 300.0, np.nan], len(Z[1::5]))
    want = m.decision_function(Z)
    for isa in NATIVE:
        p = treecomp.compile(m, backend="arrays", isa=isa)
        if isa == "avx512":
            assert "bv_catd" in p._kernel._keep
            assert ("bv_zcatd" in p._kernel._keep) == (max_iter >= 32)
        for i, k in zip(range(0, len(Z), 5), itertools.cycle((1, 2, 7))):
            np.testing.assert_array_equal(p.predict_raw(Z[i:i + k]).ravel(), want[i:i + k])
            np.testing.assert_array_equal(p.predict_proba(Z[i:i + k]), m.predict_proba(Z[i:i + k]))


@pytest.mark.parametrize("isa", ISAS[:3])
@pytest.mark.parametrize("variant", ["categorical", "categorical-acc32", "categorical-trunc",
                                     "categorical-integral", "f32-le", "f64-lt"])
def test_few_rows_eight_trees_at_once(isa, variant):
    """Single rows and small batches of forests the byte walks leave to the float node walk
    (categorical nodes; trees of > 64 leaves): eight trees' walks at once, their nodes in
    registers, then the rest of the trees. Rows with unseen, negative, fractional, NaN and huge
    categories, on thresholds, +-1 ULP, NaN, -0.0."""
    f = random_forest(500 + len(variant), n_trees=21, n_features=9, max_depth=9,
                      **FOREST_VARIANTS[variant])
    X = random_rows(f, 100, seed=7)
    X[::7, 0] = 1e30
    X = X[np.random.default_rng(5).permutation(len(X))]
    p = treecomp.compile(f, backend="arrays", isa=isa, layout="compact")
    assert p._kernel.isa == isa and set(p._kernel.tables.arrays["tree_layout"]) == {1}
    _few_row_checks(p, f, X)


@pytest.mark.parametrize("isa", ISAS[:3])
@pytest.mark.parametrize("variant", ["f32-le", "f64-lt", "vector-leaf-average", "multi-output"])
def test_few_rows_plain_walks(isa, variant):
    """Forests without categorical nodes (c_plain): a NaN-free row's walks step on the node's
    feature, value and one compare, up to ten trees at once in equal batches (1, 5, 10, 11, 23
    and 31 trees; heap trees among the compact ones under layout "auto"); rows with NaN take the
    general steps. Bit for bit against the interpreter, on thresholds, +-1 ULP, -0.0, infinities."""
    for k, n_trees in enumerate((1, 5, 10, 11, 23, 31)):
        f = random_forest(640 + k, n_trees=n_trees, n_features=9, max_depth=10,
                          **FOREST_VARIANTS[variant])
        X = random_rows(f, 60, seed=k)
        X = X[np.random.default_rng(k).permutation(len(X))]
        clean = X[~np.isnan(X).any(axis=1)]
        assert len(clean) >= 40 and len(clean) < len(X)  # both kinds of rows
        for layout in ("compact", "auto"):
            p = treecomp.compile(f, backend="arrays", isa=isa, layout=layout)
            assert p._kernel.isa == isa and p._kernel._struct.c_plain == 1
            if layout == "compact":
                assert set(p._kernel.tables.arrays["tree_layout"]) == {1}
            _few_row_checks(p, f, np.concatenate([clean[:40], X]))
    # any categorical node: no plain steps
    g = random_forest(650, n_trees=12, n_features=9, max_depth=9, **FOREST_VARIANTS["categorical"])
    assert treecomp.compile(g, backend="arrays", isa=isa, layout="compact")._kernel._struct.c_plain == 0


def test_few_rows_against_the_libraries():
    """The few-row walks on models the libraries trained (XGBoost depth-8 heaps with missing
    values; LightGBM trees of 63 leaves, float64 rows): single rows and small batches of rows on
    thresholds, +-1 ULP, NaN, -0.0, bit for bit against the library's own margins."""
    xgb = pytest.importorskip("xgboost")
    lgb = pytest.importorskip("lightgbm")
    rng = np.random.default_rng(8)
    X = rng.normal(size=(2000, 24))
    y = X[:, 0] * X[:, 1] + np.sin(3 * X[:, 2]) + rng.normal(scale=0.1, size=len(X))
    X[rng.random(X.shape) < 0.15] = np.nan
    xm = xgb.XGBRegressor(n_estimators=24, max_depth=8, tree_method="hist", n_jobs=1,
                          random_state=0).fit(X, y)
    lm = lgb.LGBMRegressor(n_estimators=24, num_leaves=63, min_child_samples=3, n_jobs=1,
                           verbose=-1, random_state=0).fit(X, y)
    # (layout "quant": one of the XGBoost trees is sparse enough that "auto" would not pad it)
    for model, layout, want_of in ((xm, "quant", lambda Z: xm.predict(Z, output_margin=True)),
                                   (lm, "auto", lambda Z: lm.booster_.predict(Z, raw_score=True))):
        f = treecomp.parse(model)
        Z = edge_rows(f, X[:300], n=120, seed=5)
        want = want_of(Z)
        for isa in NATIVE:
            p = treecomp.compile(model, backend="arrays", isa=isa, layout=layout)
            assert p._kernel.isa == isa and "h_qc7" in p._kernel._keep
            assert ("bv_lmask" in p._kernel._keep) == (model is lm)
            np.testing.assert_array_equal(p.predict_raw(Z).reshape(want.shape), want)
            for i, n in zip(range(0, len(Z), 7), itertools.cycle((1, 1, 2, 5, 9, 15))):
                np.testing.assert_array_equal(p.predict_raw(Z[i:i + n]).reshape(want[i:i + n].shape),
                                              want[i:i + n])


# -- the artifact -------------------------------------------------------------------------------
def _model():
    return random_forest(21, **FOREST_VARIANTS["categorical"])


def test_save_load_round_trip(tmp_path):
    f = random_forest(4, **FOREST_VARIANTS["vector-leaf-average"])
    X = random_rows(f, 200)
    for layout in ("auto", "naive"):
        p = treecomp.compile(f, backend="arrays", layout=layout)
        path = tmp_path / f"m-{layout}.tc"
        p.save(path)
        data = path.read_bytes()
        assert data.startswith(arrays_format.MAGIC)
        q = treecomp.load(path)
        assert q.backend == "arrays" and q.digest == f.digest() and q.head.n_trees == f.n_trees
        assert q._kernel.tables.meta["naive"] == (layout == "naive")
        np.testing.assert_array_equal(q.predict_raw(X), interp.predict_raw(f, X))
        assert q._kernel.to_bytes() == data


def test_corrupt_and_truncated_files_raise(tmp_path):
    f = _model()
    data = treecomp.compile(f, backend="arrays").__reduce__()[1][1]
    for cut in sorted({0, 4, 8, 20, 30, 100, len(data) // 2, len(data) - 64, len(data) - 1}):
        with pytest.raises(ArtifactError):
            arrays.load_bytes(data[:cut])
    path = tmp_path / "bad.tc"
    path.write_bytes(data[:len(data) // 3])
    with pytest.raises(ArtifactError):
        treecomp.load(path)
    # a future format version
    with pytest.raises(ArtifactError, match="format"):
        arrays.load_bytes(data[:8] + (99).to_bytes(4, "little") + data[12:])


@pytest.mark.parametrize("name, value", [
    ("c_left", 10**6), ("c_right", -10**6), ("c_left", 0), ("c_ff", 99), ("c_cat", 10**5),
    ("tree_nint", 10**9), ("tree_width", 0), ("tree_out", 5), ("tree_layout", 7),
    ("cat_nwords", 10**6), ("tree_nleaf", -3),
])
def test_bad_indices_raise(name, value):
    f = _model()
    t = arrays_tables.flatten(f)
    arrs = {k: v.copy() for k, v in t.arrays.items()}
    if name == "c_cat":  # only categorical nodes' set indices are followed
        is_cat = (arrs["c_ff"].view(np.uint32) & arrays_tables.FF_CAT) != 0
        arrs[name][np.flatnonzero(is_cat)[0]] = value
    else:
        arrs[name][0] = value
    bad = arrays_tables.Tables(meta=t.meta, arrays=arrs)
    head = treecomp.ir.head_of(f)
    with pytest.raises(ArtifactError):
        arrays.load_bytes(arrays_format.tables_to_bytes(bad, head, {"isa": "auto", "block_rows": 64}))


def test_random_byte_flips_never_crash():
    f = _model()
    data = bytearray(treecomp.compile(f, backend="arrays").__reduce__()[1][1])
    X = random_rows(f, 20)
    rng = np.random.default_rng(0)
    for _ in range(300):
        d = bytearray(data)
        for pos in rng.integers(0, len(d), 3):
            d[pos] = int(rng.integers(256))
        if d != data:  # corrupt: the digest refuses it
            with pytest.raises(ArtifactError):
                arrays.load_bytes(bytes(d))
        try:  # sealed again (a file edited on purpose): the checks behind the digest
            k = arrays.load_bytes(arrays_format.seal(d))
        except ArtifactError:
            continue
        treecomp.Predictor(k).predict_raw(X)  # valid tables (perhaps other numbers): must run


def _rewrite_header(data: bytes, edit) -> bytes:
    """The table file with its JSON header edited (the arrays keep their place after it)."""
    import json
    _, _, _, hlen = arrays_format._PREFIX.unpack_from(data, 0)
    hdr = json.loads(data[arrays_format._PREFIX.size:arrays_format._PREFIX.size + hlen])
    body = data[-(-(arrays_format._PREFIX.size + hlen) // 64) * 64:]
    edit(hdr)
    h = json.dumps(hdr).encode()
    start = -(-(arrays_format._PREFIX.size + len(h)) // 64) * 64
    buf = bytearray(start)
    arrays_format._PREFIX.pack_into(buf, 0, arrays_format.MAGIC, arrays_format.FORMAT_VERSION, 0, len(h))
    buf[arrays_format._PREFIX.size:arrays_format._PREFIX.size + len(h)] = h
    return arrays_format.seal(bytes(buf) + body)  # digest and all: a file edited on purpose


@pytest.mark.parametrize("field, value", [
    ("transform", 7), ("transform", "tanh"), ("decision", "argmax_raw"), ("classes", [[0, 1]]),
    ("n_features", "6"), ("allow_nan", "no"), ("feature_names", ["a"]), ("input_dtype", "float16"),
    ("exp_lib", "musl"),
])
def test_corrupt_head_fails_at_load(field, value):
    """A .tc whose embedded Head is corrupt loaded, then failed in predict (AssertionError
    'unknown transform', IndexError on labels): now ArtifactError when loading."""
    import json
    f = random_forest(5, n_trees=3)
    data = treecomp.compile(f, backend="arrays").__reduce__()[1][1]
    arrays.load_bytes(_rewrite_header(data, lambda h: None))  # the rewrite itself is harmless

    def edit(h):
        head = json.loads(h["head"])
        head[field] = value
        h["head"] = json.dumps(head)
    with pytest.raises(ArtifactError, match="corrupt"):
        arrays.load_bytes(_rewrite_header(data, edit))


@pytest.mark.parametrize("case", ["nan-leaf", "inf-base", "nan-split", "float-n_trees",
                                  "string-average", "float-length", "trailing"])
def test_inconsistent_tables_are_refused(case):
    """Values every path would read differently, or silently coerced: refused by validate."""
    f = random_forest(6, n_trees=4)
    p = treecomp.compile(f, backend="arrays", layout="compact")
    t = p._kernel.tables
    A = {k: v.copy() for k, v in t.arrays.items()}
    meta = dict(t.meta)
    if case == "nan-leaf":
        A["leaf_values"][3] = np.nan
    elif case == "inf-base":
        A["base"][0] = np.inf
    elif case == "nan-split":  # NaN: padding to the byte walks, a comparison to the float walks
        A["c_thr"][np.flatnonzero((A["c_ff"].view(np.uint32) & arrays_tables.FF_CAT) == 0)[0]] = np.nan
    elif case == "float-n_trees":
        meta["n_trees"] = float(meta["n_trees"])
    elif case == "string-average":
        meta["average"] = "false"
    data = arrays_format.tables_to_bytes(arrays_tables.Tables(meta=meta, arrays=A), p.head, {"isa": "auto", "block_rows": 0})
    if case == "float-length":
        data = _rewrite_header(data, lambda h: h["arrays"][0].update(length=h["arrays"][0]["length"] + 0.5))
    elif case == "trailing":  # sealed again: past the digest, the arrays' own checks refuse it
        data = arrays_format.seal(data + bytes(64))
    with pytest.raises(ArtifactError, match="corrupt arrays artifact"):
        arrays.load_bytes(data)


def test_pickle_in_fresh_process(tmp_path):
    f = random_forest(6, **FOREST_VARIANTS["f64-lt"])
    X = random_rows(f, 100)
    p = treecomp.compile(f, backend="arrays", layout="compact")
    (tmp_path / "p.pkl").write_bytes(pickle.dumps(p))
    np.save(tmp_path / "X.npy", X)
    code = textwrap.dedent(f"""
        import pickle, numpy as np
        p = pickle.loads(open({str(tmp_path / 'p.pkl')!r}, 'rb').read())
        assert p.backend == 'arrays', p.backend
        np.save({str(tmp_path / 'out.npy')!r}, p.predict_raw(np.load({str(tmp_path / 'X.npy')!r})))
    """)
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)
    np.testing.assert_array_equal(np.load(tmp_path / "out.npy"), interp.predict_raw(f, X))


# -- options and the choice of backend ----------------------------------------------------------
def test_options_are_checked():
    f = random_forest(1)
    with pytest.raises(TypeError, match="unknown arrays backend option"):
        treecomp.compile(f, backend="arrays", opt="-O3")
    with pytest.raises(ValueError, match="layout"):
        treecomp.compile(f, backend="arrays", layout="zigzag")
    with pytest.raises(ValueError, match="heap_max_depth"):
        treecomp.compile(f, backend="arrays", heap_max_depth=40)
    missing = [i for i in arrays_native.arch_isas() if i not in HAVE]
    for isa in missing:
        with pytest.raises(CompileError, match=isa):
            treecomp.compile(f, backend="arrays", isa=isa)


def test_without_a_compiler_tables_still_work(monkeypatch):
    f = random_forest(2, **FOREST_VARIANTS["categorical-acc32"])
    X = random_rows(f, 100)

    def no_cc():
        raise CompileError("no working C compiler (test)")
    monkeypatch.setattr(arrays_native, "_LIB", None)
    monkeypatch.setattr(arrays_native, "KERNEL_ORIGIN", None)
    monkeypatch.setattr(arrays_native, "_load_prebuilt", lambda: None)  # nor a prebuilt kernel
    monkeypatch.setattr(toolchain, "find_compiler", no_cc)
    monkeypatch.setattr(toolchain, "have_compiler", lambda: False)
    # byte-walk-eligible and paying: the arrays backend, its byte walks as LLVM vector code
    assert backends.choose(f) == "arrays" and backends.byte_walk_pays(f)
    big = Forest(trees=f.trees * 40_000, n_features=f.n_features, n_outputs=1,
                 tree_output=np.zeros(len(f.trees) * 40_000), base_score=[0.0])
    assert backends.choose(big) == "arrays"
    p = treecomp.compile(f, backend="arrays")
    assert p._kernel.isa == ("llvm-vec" if "llvm-vec" in HAVE else "llvm" if "llvm" in HAVE else "numpy")
    np.testing.assert_array_equal(p.predict_raw(X), interp.predict_raw(f, X))
    q = treecomp.compile(f, backend="arrays", layout="compact")  # no byte walk: the walker
    assert q._kernel.isa == ("llvm" if "llvm" in HAVE else "numpy")
    np.testing.assert_array_equal(q.predict_raw(X), interp.predict_raw(f, X))
    # a table file written here loads on such a host and runs on the compiler-free path
    q = arrays.load_bytes(treecomp.compile(f, backend="arrays", isa="numpy")._kernel.to_bytes())
    np.testing.assert_array_equal(treecomp.Predictor(q).predict_raw(X), interp.predict_raw(f, X))
    with pytest.raises(CompileError, match="compiler"):
        treecomp.compile(f, backend="arrays", isa="scalar")


@pytest.mark.skipif(not toolchain.have_compiler(), reason="no C compiler")
def test_auto_uses_the_prebuilt_kernel_without_a_compiler(monkeypatch):
    """A wheel's prebuilt arrays kernel needs no compiler: auto still picks the byte walks
    where they pay, and llvm (not c) where generated code would."""
    if arrays_native.kernel_origin() != "prebuilt":
        pytest.skip("this install has no prebuilt arrays kernel")
    monkeypatch.setattr(toolchain, "have_compiler", lambda: False)
    many = random_forest(3, n_trees=300, n_features=4, max_depth=6)
    assert arrays_tables.quant_eligible(many) and backends.byte_walk_pays(many)
    assert backends.choose(many) == "arrays"
    few = random_forest(3, n_trees=2, n_features=40, max_depth=6)
    assert backends.choose(few) == ("llvm" if "llvm" in backends.names() else "arrays")


def test_auto_choice():
    shallow = random_forest(1, n_trees=5)  # numeric, depth <= 6: the quantised walk
    assert arrays_tables.quant_eligible(shallow) and backends.choose(shallow) == "arrays"
    cat = random_forest(1, n_trees=5, p_cat=0.3)  # <= 128 leaves: the interval walk
    assert arrays_tables.quant_eligible(cat) and backends.choose(cat) == "arrays"
    rng = np.random.default_rng(0)
    big_cat = cat.replace(trees=cat.trees + (chain_tree(255, 6, rng),), tree_output=np.zeros(6))  # 256 leaves
    assert not arrays_tables.quant_eligible(big_cat) and backends.choose(big_cat) == "c"
    # the cost model: two trees over ~100 used features do not pay for quantising every row
    # (generated code wins); a hundred trees over the same features do
    few = random_forest(2, n_trees=2, n_features=200)
    assert arrays_tables.quant_eligible(few) and not backends.byte_walk_pays(few)
    assert backends.choose(few) == "c"
    many = random_forest(2, n_trees=100, n_features=200)
    assert backends.byte_walk_pays(many) and backends.choose(many) == "arrays"
    rng = np.random.default_rng(0)
    deep = tuple(_complete_tree(rng, 10, 5, p_leaf=0.2) for _ in range(60))
    n_nodes = sum(t.n_nodes for t in deep)
    assert backends.CODEGEN_MAX_NODES < n_nodes <= backends.CODEGEN_MAX_NODES_F64
    for x, want in (("float32", "arrays"), ("float64", "c")):  # float64 walks are scalar
        f = Forest(trees=deep, n_features=5, n_outputs=1, tree_output=np.zeros(60),
                   base_score=[0.0], input_dtype=x)
        assert backends.choose(f) == want
    big = Forest(trees=deep * 10, n_features=5, n_outputs=1, tree_output=np.zeros(600),
                 base_score=[0.0], input_dtype="float64")
    assert backends.choose(big) == "arrays"  # code generation would take minutes


def test_auto_starts_no_codegen_build_past_the_time_limit(monkeypatch):
    """c / llvm builds grow with the nodes (c 17-34 s, llvm 110 s on millions): auto sends
    them only models whose estimated build fits CODEGEN_MAX_SECONDS, also for a .so on a host
    without a C compiler (where it used to pick llvm at any size)."""
    assert backends.codegen_fits("c", backends.CODEGEN_MAX_NODES_F64)
    assert backends.codegen_fits("llvm", backends.LLVM_MAX_NODES)
    assert backends.codegen_fits("llvm", backends.CODEGEN_MAX_NODES_F64)
    assert not backends.codegen_fits("llvm", 10_000_000) and not backends.codegen_fits("c", 10_000_000)
    assert backends.codegen_fits("arrays", 10_000_000)
    monkeypatch.setattr(toolchain, "have_compiler", lambda: False)
    f = random_forest(2, n_trees=3, n_features=6, max_depth=4)
    n = sum(t.n_nodes for t in f.trees)
    if "llvm" in backends.names():
        assert backends.choose(f, "so") == "llvm"
    monkeypatch.setitem(backends.CODEGEN_SECONDS_PER_NODE, "llvm", 31.0 / n)  # "too big"
    assert backends.choose(f, "so") == "arrays"
    assert backends.choose(f) != "llvm"


def test_auto_isa_self_test(monkeypatch):
    native = NATIVE
    if not native:
        pytest.skip("no C compiler")
    # the best path auto may take here (aarch64's "sve" only at vectors of 32 bytes or more)
    auto = arrays.native.auto_isas()
    assert auto[0] == "scalar" and set(auto) <= set(native)
    assert set(native) - set(auto) <= {"sve"}
    assert arrays.resolve_isa("auto") == auto[-1]
    for isa in native[1:]:
        assert arrays.kernel.self_test(isa)
    # a vector path that failed its self-test is never picked by "auto"
    monkeypatch.setattr(arrays.kernel, "SELF_TEST", {i: False for i in native[1:]})
    assert arrays.resolve_isa("auto") == "scalar"


def test_shared_children_are_rejected_before_the_interval_walk():
    """Bounds-valid tables whose tree shares a child between two parents (a corrupt file) would
    put leaf positions outside the tree in the interval walk: refused by validate (the file
    reader's check), before any table is derived."""
    f = random_forest(3, n_trees=4)
    p = treecomp.compile(f, backend="arrays", layout="bitvec")
    A = {k: v.copy() for k, v in p._kernel.tables.arrays.items()}
    A["c_right"][0] = A["c_left"][0]
    bad = arrays_tables.Tables(meta=p._kernel.tables.meta, arrays=A)
    with pytest.raises(ArtifactError, match="do not form a tree"):
        arrays_tables.validate(bad)
    with pytest.raises(ArtifactError, match="do not form a tree"):
        arrays.ArraysKernel(bad, p.head)


@pytest.mark.parametrize("layout", ["bitvec", "compact", "naive"])
def test_orphan_leaf_is_rejected(layout):
    """A leaf shared by two parents orphans another leaf: every index stays in bounds and the
    node structure still counts right, but the interval walk's leaf table (bv_leaf) kept the
    orphan's slot unwritten (uninitialised memory). validate refuses it, also in a file."""
    f = random_forest(3, n_trees=4)
    p = treecomp.compile(f, backend="arrays", layout=layout)
    t = p._kernel.tables
    A = {k: v.copy() for k, v in t.arrays.items()}
    both = np.flatnonzero((A["c_left"] < 0) & (A["c_right"] < 0))[0]
    A["c_right"][both] = A["c_left"][both]
    bad = arrays_tables.Tables(meta=t.meta, arrays=A)
    with pytest.raises(ArtifactError, match="do not form a tree"):
        arrays_tables.validate(bad)
    with pytest.raises(ArtifactError, match="do not form a tree"):
        arrays.load_bytes(arrays_format.tables_to_bytes(bad, p.head, {"isa": "auto", "block_rows": 0}))
    # a compact tree claiming one leaf more than its nodes can reach (width-1 leaves here)
    A = {k: v.copy() for k, v in t.arrays.items()}
    A["tree_nleaf"][0] += 1
    A["leaf_values"] = np.concatenate([A["leaf_values"][:1], A["leaf_values"]])
    with pytest.raises(ArtifactError, match="leaf count"):
        arrays_tables.validate(arrays_tables.Tables(meta=t.meta, arrays=A))


# -- the deep path of compact trees (float32 input: top heap + lockstep walk over leaf records) --
def _deep_forest(comparison: str, seed: int = 21) -> Forest:
    """Deep float32 trees (leaves from depth 1 on, so top heaps of every depth), thresholds at
    +-0.0 and near 1, plus trees that must keep the slot walk (categorical, single leaf)."""
    from tests.randforest import random_tree
    rng = np.random.default_rng(seed)
    trees = []
    for i in range(6):
        # tree 4: complete to depth 9 (the deepest top heap, then lockstep below it)
        t = random_tree(rng, 5, max_depth=9 if i == 4 else 16, p_leaf=[0.05, 0.15, 0.3, 0.5, 0.0, 0.2][i])
        thr = np.asarray(t.threshold, np.float64).copy()
        internal = np.asarray(t.left) >= 0
        pick = internal & (rng.random(len(thr)) < 0.2)
        thr[pick] = rng.choice([0.0, -0.0, 1.0, np.float32(1.0) + np.float32(1e-7)], pick.sum())
        trees.append(dataclasses.replace(t, threshold=thr))
    trees.append(random_tree(rng, 5, max_depth=9, p_cat=0.3))   # categorical: slot walk
    trees.append(leaf_tree(0.75))
    return Forest(trees=tuple(trees), n_features=5, n_outputs=1, tree_output=np.zeros(len(trees)),
                  base_score=[0.5], comparison=comparison, average=True)


def min_leaf_depth(t: Tree) -> int:
    left, right = np.asarray(t.left), np.asarray(t.right)
    depth = np.zeros(len(left), int)
    for i in range(len(left)):  # BFS-ordered test trees: parents come first
        if left[i] >= 0:
            depth[left[i]] = depth[right[i]] = depth[i] + 1
    return int(depth[left < 0].min())


def _deep_rows(f: Forest, n: int) -> np.ndarray:
    rng = np.random.default_rng(3)
    X = rng.normal(size=(n, f.n_features))
    specials = np.array([0.0, -0.0, np.inf, -np.inf, 1.0, 1.0 + 1e-7, 1e-45, -1e-45])
    mask = rng.random(X.shape) < 0.15
    X[mask] = rng.choice(specials, mask.sum())
    X[n // 2:][rng.random((n - n // 2, f.n_features)) < 0.05] = np.nan  # NaN in later blocks only
    return np.vstack([X, edge_rows(f, X[:200], n=100, seed=4)])


@pytest.mark.parametrize("isa", ISAS[:3])
@pytest.mark.parametrize("comparison", ["<", "<="])
def test_deep_path_bit_exact(isa, comparison):
    f = _deep_forest(comparison)
    X = _deep_rows(f, 1037)  # odd: lockstep groups of 8 plus tails, NaN-free and NaN blocks
    want = interp.predict_raw(f, X)
    for block in (0, 64, 203):
        p = treecomp.compile(f, backend="arrays", layout="compact", isa=isa, block_rows=block)
        k = p._kernel
        topd = k._keep["d_topd"]
        # the path is really taken: deep trees have top heaps, the others keep the slot walk
        assert (topd[:6] >= 1).all() and topd[6:].tolist() == [0, 0]
        assert topd.max() == arrays_derived.DEEP_TOP_MAX
        # padded tops too: a leaf above the top's depth (levels only half full)
        assert any(min_leaf_depth(f.trees[i]) < topd[i] for i in range(6))
        for Xin in (X, X.astype(np.float32)):
            np.testing.assert_array_equal(p.predict_raw(Xin), interp.predict_raw(f, Xin))
        np.testing.assert_array_equal(p.predict_raw(X), want)


def test_deep_path_float_keys_order():
    rng = np.random.default_rng(8)
    v = np.concatenate([rng.normal(size=300) * 10.0 ** rng.integers(-40, 38, 300),
                        [0.0, -0.0, np.inf, -np.inf, 1e-45, -1e-45, 3.4e38, -3.4e38]]).astype(np.float32)
    k = arrays_derived.float_keys(v)
    a, b = np.meshgrid(np.arange(len(v)), np.arange(len(v)))
    with np.errstate(invalid="ignore"):
        assert np.array_equal(v[a] > v[b], k[a] > k[b])
        assert np.array_equal(v[a] >= v[b], k[a] >= k[b])


def test_deep_path_not_for_float64_or_naive():
    f = _deep_forest("<=").replace(input_dtype="float64")
    p = treecomp.compile(f, backend="arrays", layout="compact")
    assert "d_recs" not in p._kernel._keep
    X = _deep_rows(f, 300)
    np.testing.assert_array_equal(p.predict_raw(X), interp.predict_raw(f, X))
    p = treecomp.compile(_deep_forest("<="), backend="arrays", layout="naive")
    assert "d_recs" not in p._kernel._keep


# -- forests whose every split is categorical (issue 20, item 8) -----------------------------
#: category edge values: NaN, negatives (-0.5 is category 0 for LightGBM only), non-integers,
#: unseen categories, the byte walks' codes 253..256 and far beyond
_CAT_EDGE = np.array([np.nan, -1.0, -0.5, -0.0, 0.0, 0.5, 1.0, 1.5, 2.999, 5.0, 5.5, 6.0, 7.0,
                      31.0, 32.0, 63.5, 64.0, 200.0, 253.0, 253.9, 254.0, 255.0, 256.0, 1e9, -1e9])


def _cat_only_data():
    rng = np.random.default_rng(0)
    c = rng.integers(0, 6, 400)
    y = np.array([0.5, -1.0, 2.0, 0.1, -0.7, 1.3])[c] + rng.normal(0, 0.05, 400)
    return c, y, np.r_[_CAT_EDGE, c[:20].astype(np.float64)][:, None]


def _cat_only_models():
    """(name, model, rows, raw margins as the library returns them) of tiny models over one
    categorical feature: sklearn HGB, LightGBM, XGBoost trained on a pandas category column."""
    c, y, X = _cat_only_data()
    out = []
    ens = pytest.importorskip("sklearn.ensemble")
    m = ens.HistGradientBoostingRegressor(categorical_features=[0], max_iter=5, random_state=0)
    m.fit(c[:, None].astype(np.float64), y)
    out.append(("hgb", m, X, m.predict(X)))
    mc = ens.HistGradientBoostingClassifier(categorical_features=[0], max_iter=4, random_state=0)
    mc.fit(c[:, None].astype(np.float64), y > 0.3)
    out.append(("hgb-clf", mc, X, mc.decision_function(X)))
    lgb = pytest.importorskip("lightgbm")
    b = lgb.train({"objective": "regression", "verbose": -1, "min_data_in_leaf": 5, "num_leaves": 4,
                   "min_data_per_group": 5, "cat_smooth": 1},
                  lgb.Dataset(c[:, None].astype(np.float64), y, categorical_feature=[0]), 5)
    out.append(("lightgbm", b, X, b.predict(X, raw_score=True)))
    xgb = pytest.importorskip("xgboost")
    pd = pytest.importorskip("pandas")
    bx = xgb.train({"max_depth": 3, "tree_method": "hist", "max_cat_to_onehot": 1},
                   xgb.DMatrix(pd.DataFrame({"c": pd.Categorical(c)}), y, enable_categorical=True), 5)
    dm = xgb.DMatrix(X, feature_names=["c"], feature_types=["c"], enable_categorical=True)
    out.append(("xgboost", bx, X, bx.predict(dm, output_margin=True)))
    return out


def test_all_categorical_forests_every_isa():
    """Splits that are all categorical left the byte walk's quantiser without a numeric column
    (IndexError in quant_tables under the default layout): bit-exact raw margins against each
    library on every ISA path, edge categories included."""
    failures = []
    for name, model, X, want in _cat_only_models():
        for isa in HAVE:
            p = treecomp.compile(model, backend="arrays", isa=isa)
            assert p._kernel.isa == isa
            got = p.predict_raw(X).reshape(want.shape)
            if got.dtype != want.dtype or not np.array_equal(got, want):
                failures.append(f"{name} [{isa}]: {got.dtype} {got[got != want]} != {want[got != want]}")
            if isa in NATIVE:  # the byte walk really ran (not the float fallback)
                assert p._kernel.tables.meta["bitvec"] and p._kernel._bitvec, name
    assert not failures, "\n".join(failures)


XGB_TOY_CAT = Path(os.environ.get("TREECOMP_REALMODELS")
                   or Path(__file__).resolve().parents[2] / "shared/realmodels") / "treelite/xgb_toy_categorical"


@pytest.mark.skipif(not XGB_TOY_CAT.is_dir(), reason="shared/realmodels not present")
def test_real_all_categorical_xgboost_model():
    """treelite's xgb_toy_categorical (XGBoost JSON, two categorical features, every split
    categorical) with its test rows plus edge categories: bit-exact output_margin."""
    import warnings
    xgb = pytest.importorskip("xgboost")
    with warnings.catch_warnings():  # "model saved before XGBoost 1.6"
        warnings.simplefilter("ignore")
        b = xgb.Booster(model_file=str(XGB_TOY_CAT / "xgb_toy_categorical_model.json"))
    rows = [ln.split() for ln in (XGB_TOY_CAT / "xgb_toy_categorical.test").read_text().splitlines() if ln]
    X = np.array([[float(t.split(":")[1]) for t in r[1:]] for r in rows])
    X = np.vstack([X, np.c_[_CAT_EDGE, np.roll(_CAT_EDGE, 7)], np.c_[np.resize(X[:, 0], len(_CAT_EDGE)), _CAT_EDGE]])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = b.predict(xgb.DMatrix(X, feature_types=["c", "c"], enable_categorical=True),
                         output_margin=True)
    for isa in HAVE:
        p = treecomp.compile(b, backend="arrays", isa=isa)
        got = p.predict_raw(X)
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got.reshape(want.shape), want)


def _complete_forest(n_trees: int, depth: int, n_features: int = 100, seed: int = 0) -> Forest:
    """n_trees complete trees of the given depth (random features and thresholds), built in
    bulk (ir.build_trees): a big forest in a fraction of a second."""
    from treecomp.ir import build_trees
    rng = np.random.default_rng(seed)
    n_int = (1 << depth) - 1
    n = 2 * n_int + 1
    idx = np.arange(n)
    inner = idx < n_int
    left = np.tile(np.where(inner, 2 * idx + 1, -1), n_trees)
    right = np.tile(np.where(inner, 2 * idx + 2, -1), n_trees)
    internal = np.tile(inner, n_trees)
    feature = np.where(internal, rng.integers(0, n_features, n * n_trees), -1)
    threshold = np.where(internal, rng.normal(size=n * n_trees).astype(np.float32), 0.0)
    value = np.where(internal, 0.0, rng.normal(size=n * n_trees).astype(np.float32))
    trees = build_trees(np.full(n_trees, n), left, right, feature, threshold,
                        rng.random(n * n_trees) < 0.5, value)
    return Forest(trees=trees, n_features=n_features, n_outputs=1,
                  tree_output=np.zeros(n_trees, np.int32), base_score=[0.0],
                  input_dtype="float32", comparison="<", accumulate_dtype="float32")


def test_flatten_peak_memory_per_node():
    """flatten's temporaries for a forest of 150k nodes: 188 bytes a node above the forest
    before they were narrowed and freed as used (2026-11-28), about 100 after; 63 (auto) and
    69 (compact) with the node-wide indices (children, depth, heap position, ranks) in int32."""
    forest = _complete_forest(300, 8)
    n = sum(t.n_nodes for t in forest.trees)
    for layout in ("auto", "compact"):
        _, peak = traced_peak(lambda: arrays_tables.flatten(forest, layout))
        assert peak / n < 80, (layout, peak / n)


def test_used_features_is_its_definition_without_node_sized_temporaries():
    """used_features counts the distinct features the splits test (features past n_features
    too), marking a bounded chunk of arrays at a time: backend="auto"'s choice on a forest of
    1.27M nodes allocated int64 copies of every split's feature, 13 bytes a node, which left
    the compile's peak RSS 10 bytes a node higher (LightGBM 10,000 x 64 leaves, 2026-11-28)."""
    rng = np.random.default_rng(4)
    for _ in range(40):
        arrays = [rng.integers(0, int(rng.integers(1, 60)), int(rng.integers(0, 30)))
                  for _ in range(int(rng.integers(0, 20)))]
        want = len(set(np.concatenate(arrays + [np.zeros(0, np.int64)]).tolist()))
        assert arrays_tables.used_features(arrays, 10) == want
        assert arrays_tables.used_features(iter(arrays), 100) == want
    big = [rng.integers(0, 1000, 40000).astype(np.int32) for _ in range(5)]  # several chunks
    assert arrays_tables.used_features(big, 1000) == len(np.unique(np.concatenate(big)))
    with pytest.raises(ValueError):
        arrays_tables.used_features([np.array([1, -1])], 5)
    forest = _complete_forest(300, 8)
    n = sum(t.n_nodes for t in forest.trees)
    walk, peak = traced_peak(lambda: arrays_tables.forest_byte_walk(forest))
    assert walk == "quant" and peak / n < 6, peak / n


@pytest.mark.parametrize("isa", ISAS[:3])
@pytest.mark.parametrize("layout,nf,x,cmp,no", [("quant", 400, "float32", "<", 1),
                                                ("quant", 260, "float64", "<=", 3),
                                                ("heap", 30, "float32", "<=", 2)])
def test_few_rows_heap_walks_in_flight(isa, layout, nf, x, cmp, no):
    """1-3 rows over heap trees walk up to 8 trees at once (heap_trees), each row's leaves then
    added in tree order; a quantised model over many columns (q_ncols x 3 > its trees' depths
    summed) takes that float walk for 1-15 rows instead of binning every column of the rows. Trees of depth
    0-8 mixed in each run of 8 (a walk ends before the others), several outputs, NaN both
    ways, rows on thresholds, +-1 ULP, NaN, -0.0, infinities: against the interpreter and the
    same rows in one large batch (the byte walk), bit for bit."""
    rng = np.random.default_rng(nf + no)
    depths = rng.choice([0, 1, 3, 5, 6, 7, 8], 21 if layout == "quant" else 30)
    trees = []
    for d in depths:
        t = leaf_tree(0.25) if d == 0 else _complete_tree(rng, int(d), nf, p_leaf=0.1)
        internal = t.left >= 0
        thr = np.where(internal, np.round(t.threshold, 1), 0.0)  # shared values: rows land on them
        value = t.value.astype(np.float32).astype(np.float64) if x == "float32" else t.value
        trees.append(dataclasses.replace(t, threshold=thr, value=value))
    f = Forest(trees=tuple(trees), n_features=nf, n_outputs=no,
               tree_output=np.arange(len(trees)) % no, base_score=[0.5] * no, comparison=cmp,
               input_dtype=x, accumulate_dtype=x)
    p = treecomp.compile(f, backend="arrays", layout=layout, isa=isa)
    k = p._kernel
    assert k.isa == isa and bool(k.tables.meta["quant"]) == (layout == "quant")
    if layout == "quant":  # the rule's side: float walks for a few rows
        assert len(k._keep["q_len"]) * 3 > int(depths.sum())
    X = random_rows(f, 60, seed=nf)
    on = np.round(rng.normal(size=(30, nf)), 1)
    up = np.where(rng.random(on.shape) < 0.5, np.inf, -np.inf)
    pick = rng.random(on.shape)
    near = np.where(pick < 0.5, on, np.where(pick < 0.75, np.nextafter(on.astype(np.float32),
                    up.astype(np.float32)).astype(np.float64), np.nextafter(on, up)))
    X = np.vstack([near, X])
    for Xin in (X, X.astype(np.float32)):
        want = interp.predict_raw(f, Xin)
        np.testing.assert_array_equal(p.predict_raw(Xin), want)
        for i in range(0, len(X) - 3, 3):
            for n in (1, 2, 3):
                np.testing.assert_array_equal(p.predict_raw(Xin[i:i + n]), want[i:i + n])
        for i, n in zip(range(0, len(X) - 16, 5), itertools.cycle(range(4, 17))):
            np.testing.assert_array_equal(p.predict_raw(Xin[i:i + n]), want[i:i + n])


def test_bitvec_tables_peak_memory_per_node():
    """bitvec_tables' temporaries for a forest of 38k nodes (64-leaf trees): 101 bytes a node
    above its input while every int64 temporary lived to the end (2026-11-28), 40 with each
    freed once used and one-wide leaves moved without the general gather."""
    rng = np.random.default_rng(3)
    forest = Forest(trees=tuple(_complete_tree(rng, 6, 20) for _ in range(300)), n_features=20,
                    n_outputs=1, tree_output=np.zeros(300, np.int32), base_score=[0.0])
    n = sum(t.n_nodes for t in forest.trees)
    A = arrays_tables.flatten(forest, "bitvec").arrays
    _, peak = traced_peak(lambda: arrays_derived.bitvec_tables(A))
    assert peak / n < 60, peak / n


@pytest.mark.parametrize("isa", [i for i in ("scalar", NATIVE[-1] if NATIVE else "scalar", "llvm-vec", "llvm",
                                         "numpy") if i in HAVE])
@pytest.mark.parametrize("variant", ["f32-le", "f64-lt", "categorical"])
def test_global_children_are_not_kept_beside_the_records(isa, variant):
    """The compact nodes' forest-wide children (c_left_global / c_right_global, which the
    walkers without the C kernel read) are no second copy beside the packed node records
    (4 bytes a node of a huge LightGBM model's compile peak, 2026-11-28): where the tables are
    packed (a native or llvm-vec kernel) they are the records' own fields, else derived once,
    when a walker first asks; either way what the tables say (children_global)."""
    f = random_forest(71, n_trees=12, **FOREST_VARIANTS[variant])
    X = random_rows(f, 70)
    for layout in ("compact", "bitvec"):
        if layout == "bitvec" and variant == "categorical":
            continue  # (the interval walk: numeric trees)
        k = treecomp.compile(f, backend="arrays", layout=layout, isa=isa)._kernel
        want = k.children_global()
        assert len(want[0]) == len(k.tables.arrays["c_ff"]) > 0
        packed = "c_nodes" in k._keep
        assert packed == (k._struct is not None), (isa, layout)
        # nothing derived yet, packed or not (the llvmlite walker copied them into its table)
        assert k._c_children is None
        for got, w in zip((k.c_left_global, k.c_right_global), want):
            assert got.dtype == np.int32 and np.array_equal(got, w) and not got.flags.writeable
            assert np.shares_memory(got, k._keep["c_nodes"]) if packed else got is not w
        if packed:
            assert k._c_children is None
        else:  # derived once (above), kept for the numpy walker
            assert k.c_left_global is k.c_left_global and k._c_children is not None
        out = np.empty((len(X), f.n_outputs), k.tables.acc_dtype)
        k.run(np.ascontiguousarray(X, np.dtype(f.input_dtype)), out)
        np.testing.assert_array_equal(out, interp.predict_raw(f, X.astype(f.input_dtype)))


def _wide_forest(nf, x, cmp, depth=8, n_trees=12, seed=0):
    """Heap trees of `depth` over nf features (> 256 columns) whose columns hold 1 threshold
    (feature 1), 15-16 and 31 thresholds (the AVX-512 batch quantiser's P = 16 / 32 columns),
    100 (P = 128) and 300 (two chunks, P = 256), the rest a few: thresholds on a 0.1 grid so
    that rows land on them; NaN sent both ways (twin columns) on some features."""
    rng = np.random.default_rng(seed)
    grid = {1: [0.5], 2: np.round(np.linspace(-1.5, 1.5, 15), 1), 3: np.round(np.linspace(-1.5, 1.5, 31), 1),
            4: np.round(np.linspace(-5, 5, 100), 1), 5: np.round(np.linspace(-15, 15, 300), 1)}
    trees = []
    for _ in range(n_trees):
        t = _complete_tree(rng, depth, nf)
        internal = t.left >= 0
        feat = t.feature.copy()
        thr = np.round(t.threshold, 1)
        k = np.flatnonzero(internal)
        pick = rng.integers(0, 10, len(k))   # 0, 6-9: a random feature and value
        for j, g in zip(k, pick):
            if 1 <= g <= 5:
                feat[j] = g
                thr[j] = rng.choice(grid[g])
            else:  # (features 0-5: only their grids' thresholds)
                feat[j] = 6 + feat[j] % (nf - 6)
        thr = np.where(internal, thr, 0.0)
        feat = np.where(internal, feat, t.feature)
        # NaN left on feature 2, both ways on feature 3 (twin columns), random elsewhere
        dl = np.where(feat == 2, True, np.where(feat == 3, np.arange(len(feat)) % 2 == 0, t.default_left))
        value = t.value.astype(np.float32).astype(np.float64) if x == "float32" else t.value
        trees.append(dataclasses.replace(t, feature=feat, threshold=thr, value=value, default_left=dl))
    return Forest(trees=tuple(trees), n_features=nf, n_outputs=1, tree_output=np.zeros(len(trees), np.int64),
                  base_score=[0.5], comparison=cmp,
                  input_dtype=x, accumulate_dtype=x)


def _wide_rows(f, n, seed):
    """Rows of f: on the thresholds' grid, +- 1 ULP (float32 and float64), NaN, +-inf, -0.0."""
    rng = np.random.default_rng(seed)
    on = np.round(rng.normal(scale=4.0, size=(n, f.n_features)), 1)
    up = np.where(rng.random(on.shape) < 0.5, np.inf, -np.inf)
    pick = rng.random(on.shape)
    X = np.where(pick < 0.5, on, np.where(pick < 0.7, np.nextafter(on.astype(np.float32),
                 up.astype(np.float32)).astype(np.float64), np.nextafter(on, up)))
    X[pick > 0.96] = np.nan
    X[(pick > 0.94) & (pick <= 0.95)] = -0.0
    X[(pick > 0.93) & (pick <= 0.94)] = up[(pick > 0.93) & (pick <= 0.94)]
    return X


@pytest.mark.parametrize("isa", ISAS[:3])
@pytest.mark.parametrize("nf,x,cmp", [(300, "float32", "<"), (700, "float32", "<="),
                                      (300, "float64", "<")])
def test_wide_depth8_byte_walk(isa, nf, x, cmp):
    """Wide models (300-700 features, > 256 columns: no column mux) of depth-8 heap trees: the
    quantiser over columns of 1 to 300 thresholds (the AVX-512 batch quantiser for float32
    tables: rows in lanes from 16 x 16 tiles, P = 16 / 32 by an in-register binary search in
    batches, P >= 64 by the level tables; twin columns for NaN both ways) and the 64-row node
    mux of depth 7-8 heaps; 1 / 7 / 17 / 64 / 2,000 rows and a short last group, float32 and
    float64 input, against the interpreter bit for bit."""
    f = _wide_forest(nf, x, cmp, seed=nf)
    p = treecomp.compile(f, backend="arrays", layout="quant", isa=isa)
    k = p._kernel
    assert k.isa == isa and k.tables.meta["quant"]
    q = k._keep
    P = q["q_len"][q["q_kind"] == 0]
    assert len(q["q_len"]) > 256 and {16, 32, 128, 256} <= set(P.tolist())
    assert np.any(q["q_src"] >= 0) and np.any(q["q_count"] == 1)
    X = _wide_rows(f, 2000, seed=nf + 1)
    for Xin in (X, X.astype(np.float32)):
        want = interp.predict_raw(f, Xin)
        np.testing.assert_array_equal(p.predict_raw(Xin), want)
        for i, n in ((0, 1), (3, 7), (20, 17), (50, 64), (200, 100), (300, 131)):
            np.testing.assert_array_equal(p.predict_raw(Xin[i:i + n]), want[i:i + n])


def _float_walk_taken(p, Z) -> bool:
    """Does the arrays kernel walk the float heaps (heap_trees / heap_s) for a call of len(Z)
    rows? Only those walks read h_thr (the byte walks read the quantised tables derived from it
    at load), so with every heap threshold spoilt in place (+inf: each finite value goes left)
    the call's margins change exactly when the float walk runs."""
    thr = p._kernel._keep["h_thr"]
    good = p.predict_raw(Z)
    saved = thr.copy()
    try:
        thr[:] = np.inf
        spoilt = p.predict_raw(Z)
    finally:
        thr[:] = saved
    np.testing.assert_array_equal(p.predict_raw(Z), good)  # (restored)
    return not np.array_equal(spoilt, good)


def _wide_xgb_model(nf):
    """A small XGBoost binary model of 6 trees of depth 8 over nf features, most of them used,
    missing values in the training rows; and rows on its thresholds, +-1 ULP, NaN, +-inf."""
    xgb = pytest.importorskip("xgboost")
    rng = np.random.default_rng(nf)
    X = rng.normal(size=(1200, nf)).astype(np.float32)
    w = rng.normal(size=nf)
    y = (X @ w + rng.normal(scale=0.5, size=len(X)) > 0).astype(int)
    X[rng.random(X.shape) < 0.05] = np.nan
    m = xgb.XGBClassifier(n_estimators=6, max_depth=8, tree_method="hist", n_jobs=1,
                          learning_rate=0.3, min_child_weight=0, random_state=0).fit(X, y)
    f = treecomp.parse(m)
    Z = edge_rows(f, X[:200], n=90, seed=nf).astype(np.float32)
    nodes = [(t.feature[i], np.float32(t.threshold[i])) for t in f.trees
             for i in np.flatnonzero(t.left >= 0)]
    for r in range(0, len(Z), 2):  # every other row: a third of the nodes' features on or next to them
        for k in rng.choice(len(nodes), len(nodes) // 3, replace=False):
            feat, thr = nodes[k]
            Z[r, feat] = np.nextafter(thr, np.float32(rng.choice([-np.inf, np.inf]))) \
                if rng.random() < 0.5 else thr
    return m, f, Z


@pytest.mark.parametrize("isa", ISAS[:3])
def test_wide_model_few_rows_float_walk_against_xgboost(isa):
    """A few rows of a quantised model over many used columns walk the float heaps instead of
    binning every column of the rows (arrays_impl.c, float_few: q_ncols x 3 > the trees' depths
    summed, from 128 columns, below TC_FLOATFEW_ROWS rows); a narrow model's rows and a wide
    model's larger batches keep the byte walk. Both give XGBoost's margins and probabilities bit
    for bit (1, 2, 7 rows and a batch; float32 and float64 rows), and the path each call takes
    is checked (_float_walk_taken), so a rule broken either way fails here."""
    wide = _wide_xgb_model(480)
    narrow = _wide_xgb_model(40)
    for (m, f, Z), is_wide in ((wide, True), (narrow, False)):
        p = treecomp.compile(m, backend="arrays", layout="quant", isa=isa)
        k = p._kernel
        assert k.isa == isa and k.tables.meta["quant"]
        n_cols, steps = len(k._keep["q_len"]), int(k.tables.arrays["tree_depth"].sum())
        assert (n_cols >= 128 and n_cols * 3 > steps and 15 * steps < 7 * n_cols) == is_wide, \
            (n_cols, steps)
        want = m.predict(Z, output_margin=True).reshape(-1, 1)
        want_p = m.predict_proba(Z)
        for Zin in (Z, Z.astype(np.float64)):
            np.testing.assert_array_equal(p.predict_raw(Zin), want)
            np.testing.assert_array_equal(p.predict_proba(Zin), want_p)
            for n in (1, 2, 7):
                for i in range(0, len(Z) - n, 3 * n + 1):
                    np.testing.assert_array_equal(p.predict_raw(Zin[i:i + n]), want[i:i + n])
                    np.testing.assert_array_equal(p.predict_proba(Zin[i:i + n]), want_p[i:i + n])
        # (8 and 15 rows on AVX-512: 15 x 48 steps < q_ncols x 7, tc_zquant's price loses)
        for n in (1, 2, 7, 8, 15):
            assert _float_walk_taken(p, Z[:n]) == is_wide, (isa, is_wide, n)
        assert not _float_walk_taken(p, Z[:64])  # a batch: the byte walk


@pytest.mark.parametrize("isa", ISAS[:3])
def test_float_walk_row_limits(isa):
    """The float heap walk's row limits per path (arrays_impl.c, float_rows / float_few): below
    the rows from which each path's quantiser bins rows in lanes (AVX2 32, AVX-512 16 and, for
    float32 rows from 8 rows, while rows x the trees' depths summed < q_ncols x 7: tc_zquant's
    price a column against the float walk's a step; the portable path 64: it bins a row at a
    time; NEON / SVE 16). 40 trees of depth 8 over 140 columns: the float walk for one row
    (140 x 3 > 320 steps), on AVX-512 the byte walk from 8 float32 rows (8 x 320 >= 140 x 7).
    Checked by which walk each call takes (_float_walk_taken) and bit for bit against the
    interpreter."""
    rng = np.random.default_rng(40)
    nf = 140
    trees = []
    for _ in range(40):
        t = _complete_tree(rng, 8, nf)
        thr = np.where(t.left >= 0, np.round(t.threshold, 1), 0.0).astype(np.float32).astype(np.float64)
        trees.append(dataclasses.replace(t, threshold=thr,
                                         value=t.value.astype(np.float32).astype(np.float64)))
    f = Forest(trees=tuple(trees), n_features=nf, n_outputs=1, tree_output=np.zeros(40, int),
               base_score=[0.5], comparison="<", input_dtype="float32", accumulate_dtype="float32")
    p = treecomp.compile(f, backend="arrays", layout="quant", isa=isa)
    k = p._kernel
    assert k.isa == isa and k.tables.meta["quant"]
    n_cols, steps = len(k._keep["q_len"]), int(k.tables.arrays["tree_depth"].sum())
    assert n_cols >= 128 and n_cols * 3 > steps and 8 * steps >= 7 * n_cols, (n_cols, steps)
    X = random_rows(f, 40, seed=3).astype(np.float32)
    want = interp.predict_raw(f, X)
    limit = {"scalar": 64, "avx2": 32}.get(isa, 16)
    for n in (1, 7, 8, 15, 16, 31, 32, 63, 64):
        float_walk = n < limit and not (isa == "avx512" and n >= 8 and n * steps >= 7 * n_cols)
        assert _float_walk_taken(p, X[:n]) == float_walk, (isa, n)
        np.testing.assert_array_equal(p.predict_raw(X[:n]), want[:n])
        np.testing.assert_array_equal(p.predict_raw(X[:n].astype(np.float64)), want[:n])
