"""The arrays backend: bit-exact against the interpreter on every layout and every ISA path the
CPU has, the table file (round trip, corruption, truncation), pickling, and backend="auto"."""

import dataclasses
import pickle
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import treecomp
from treecomp import backends, interp, outputs, toolchain
from treecomp.backends import arrays
from treecomp.errors import ArtifactError, CompileError
from treecomp.ir import Forest, Tree, leaf_tree
from tests.edge import edge_rows
from tests.randforest import FOREST_VARIANTS, chain_tree, random_forest, random_rows

try:
    from tests import zoo
    ZOO = zoo.names()
except Exception:  # a zoo module being written right now may be broken: skip, do not fail
    zoo, ZOO = None, []

ALL_ISAS = ("scalar", "avx2", "avx512", "llvm", "numpy")
HAVE = arrays.supported_isas()
ISAS = [pytest.param(i, marks=pytest.mark.skipif(i not in HAVE, reason=f"CPU/host lacks {i}"))
        for i in ALL_ISAS]
LAYOUTS = ("auto", "heap", "compact", "naive")


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
    for layout in LAYOUTS:
        p = treecomp.compile(f, backend="arrays", layout=layout, isa=isa)
        assert p.backend == "arrays" and p._kernel.isa == isa
        _check(p, f, X)
    # odd block sizes: every tail path (vector groups, 8-row groups, single rows)
    for block in (1, 7, 45, 100):
        p = treecomp.compile(f, backend="arrays", isa=isa, block_rows=block)
        np.testing.assert_array_equal(p.predict_raw(X), interp.predict_raw(f, X))


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
    n = len(left)
    val = rng.normal(size=n)
    val[np.array(left) >= 0] = 0
    return Tree(left=left, right=right, feature=feat, threshold=thr,
                default_left=rng.random(n) < 0.5, value=val)


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


def test_layout_choice_and_table_size():
    rng = np.random.default_rng(2)
    complete = _complete_tree(rng, 6, 5)
    sparse = chain_tree(8, 5, rng)  # depth 8, 9 leaves: 256 slots would be 28x its leaves
    f = random_forest(1, p_cat=0.5, n_trees=3)
    f = f.replace(trees=(complete, sparse) + f.trees[:1], tree_output=[0, 0, 0])
    lay = arrays.flatten(f, "auto").arrays["tree_layout"]
    assert lay.tolist() == [0, 1, int(f.trees[2].has_categorical)]
    assert arrays.flatten(f, "heap").arrays["tree_layout"].tolist()[:2] == [0, 0]
    assert set(arrays.flatten(f, "compact").arrays["tree_layout"].tolist()) == {1}
    # memory: auto tables stay within a small factor of the IR's own arrays
    big = random_forest(3, n_trees=50, max_depth=8)
    ir_bytes = sum(a.nbytes for _, a in big._arrays())
    assert arrays.flatten(big).nbytes < 2 * ir_bytes


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
    native = [i for i in ("scalar", "avx2", "avx512") if i in HAVE]
    failures = []
    for n, name in enumerate(ZOO):
        case = zoo.get(name)
        f = treecomp.parse(case.path or case.model)
        X = np.vstack([case.X, edge_rows(f, case.X, n=100, nan=f.allow_nan)])
        want_raw, want = interp.predict_raw(f, X), interp.predict(f, X)
        want_p = interp.predict_proba(f, X) if f.is_classifier else None
        for isa in native + [i for i in ("llvm",) if i in HAVE] + (["numpy"] if n % 3 == 0 else []):
            p = treecomp.compile(f, backend="arrays", isa=isa)
            try:
                np.testing.assert_array_equal(p.predict_raw(X), want_raw)
                np.testing.assert_array_equal(p.predict(X), want)
                if want_p is not None:
                    got = p.predict_proba(X)
                    for a, b in zip(want_p if isinstance(want_p, list) else [want_p],
                                    got if isinstance(got, list) else [got]):
                        np.testing.assert_array_equal(b, a)
            except AssertionError as exc:
                failures.append(f"{name} [{isa}]: {exc}")
    assert not failures, "\n".join(failures)


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
        assert data.startswith(arrays.MAGIC)
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
    t = arrays.flatten(f)
    arrs = {k: v.copy() for k, v in t.arrays.items()}
    if name == "c_cat":  # only categorical nodes' set indices are followed
        is_cat = (arrs["c_ff"].view(np.uint32) & arrays.FF_CAT) != 0
        arrs[name][np.flatnonzero(is_cat)[0]] = value
    else:
        arrs[name][0] = value
    bad = arrays.Tables(meta=t.meta, arrays=arrs)
    head = treecomp.ir.head_of(f)
    with pytest.raises(ArtifactError):
        arrays.load_bytes(arrays.tables_to_bytes(bad, head, {"isa": "auto", "block_rows": 64}))


def test_random_byte_flips_never_crash():
    f = _model()
    data = bytearray(treecomp.compile(f, backend="arrays").__reduce__()[1][1])
    X = random_rows(f, 20)
    rng = np.random.default_rng(0)
    for _ in range(300):
        d = bytearray(data)
        for pos in rng.integers(0, len(d), 3):
            d[pos] = int(rng.integers(256))
        try:
            k = arrays.load_bytes(bytes(d))
        except ArtifactError:
            continue
        treecomp.Predictor(k).predict_raw(X)  # valid tables (perhaps other numbers): must run


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
    missing = [i for i in ("avx2", "avx512") if i not in HAVE]
    for isa in missing:
        with pytest.raises(CompileError, match=isa):
            treecomp.compile(f, backend="arrays", isa=isa)


def test_without_a_compiler_tables_still_work(monkeypatch):
    f = random_forest(2, **FOREST_VARIANTS["categorical-acc32"])
    X = random_rows(f, 100)

    def no_cc():
        raise CompileError("no working C compiler (test)")
    monkeypatch.setattr(arrays, "_LIB", None)
    monkeypatch.setattr(toolchain, "find_compiler", no_cc)
    monkeypatch.setattr(toolchain, "have_compiler", lambda: False)
    assert backends.choose(f) == ("llvm" if "llvm" in backends.names() else "arrays")
    big = Forest(trees=f.trees * 40_000, n_features=f.n_features, n_outputs=1,
                 tree_output=np.zeros(len(f.trees) * 40_000), base_score=[0.0])
    assert backends.choose(big) == "arrays"
    p = treecomp.compile(f, backend="arrays")
    assert p._kernel.isa == ("llvm" if "llvm" in HAVE else "numpy")
    np.testing.assert_array_equal(p.predict_raw(X), interp.predict_raw(f, X))
    # a table file written here loads on such a host and runs on the compiler-free path
    q = arrays.load_bytes(treecomp.compile(f, backend="arrays", isa="numpy")._kernel.to_bytes())
    np.testing.assert_array_equal(treecomp.Predictor(q).predict_raw(X), interp.predict_raw(f, X))
    with pytest.raises(CompileError, match="compiler"):
        treecomp.compile(f, backend="arrays", isa="scalar")


@pytest.mark.skipif(not toolchain.have_compiler(), reason="no C compiler")
def test_auto_choice():
    small = random_forest(1, n_trees=5)
    assert backends.choose(small) == "c"
    rng = np.random.default_rng(0)
    big = Forest(trees=tuple(_complete_tree(rng, 8, 5) for _ in range(400)), n_features=5,
                 n_outputs=1, tree_output=np.zeros(400), base_score=[0.0])
    assert backends.choose(big) == "arrays"  # ~200k nodes: code generation would take minutes


def test_auto_isa_self_test(monkeypatch):
    native = [i for i in ("scalar", "avx2", "avx512") if i in HAVE]
    if not native:
        pytest.skip("no C compiler")
    assert arrays.resolve_isa("auto") == native[-1]
    for isa in native[1:]:
        assert arrays._self_test(isa)
    # a vector path that failed its self-test is never picked by "auto"
    monkeypatch.setattr(arrays, "_SELF_TEST", {"avx2": False, "avx512": False})
    assert arrays.resolve_isa("auto") == "scalar"


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
        assert topd.max() == arrays.DEEP_TOP_MAX
        # padded tops too: a leaf above the top's depth (levels only half full)
        assert any(min_leaf_depth(f.trees[i]) < topd[i] for i in range(6))
        for Xin in (X, X.astype(np.float32)):
            np.testing.assert_array_equal(p.predict_raw(Xin), interp.predict_raw(f, Xin))
        np.testing.assert_array_equal(p.predict_raw(X), want)


def test_deep_path_float_keys_order():
    rng = np.random.default_rng(8)
    v = np.concatenate([rng.normal(size=300) * 10.0 ** rng.integers(-40, 38, 300),
                        [0.0, -0.0, np.inf, -np.inf, 1e-45, -1e-45, 3.4e38, -3.4e38]]).astype(np.float32)
    k = arrays.float_keys(v)
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
