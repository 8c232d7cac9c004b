"""The LLVM backend: bit-exact against the interpreter (oracle 2), JIT without a C compiler,
pickling into a fresh process, .so output through the system linker, the object-code cache."""

import ctypes
import dataclasses
import os
import pickle
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import treecomp
from treecomp import interp, outputs, toolchain
from treecomp.backends import llvm as llvmbackend
from treecomp.errors import ArtifactError
from treecomp.ir import Forest, leaf_tree
from tests.randforest import FOREST_VARIANTS, chain_tree, random_forest, random_rows

try:  # the zoo is being filled by other modules; a broken one must not hide these tests
    from tests import zoo
    ZOO = zoo.names()
except Exception:  # pragma: no cover - depends on the state of the zoo modules
    zoo, ZOO = None, []

REPO = Path(__file__).resolve().parents[1]
needs_cc = pytest.mark.skipif(not toolchain.have_compiler(), reason="no C compiler / linker")

#: code paths: defaults (branch-free complete-tree kernel for shallow trees, node tables for
#: big ones, one basic block per node for the rest), basic blocks for every tree (LLVM's fast
#: instruction selector and the default -O2), node tables for every numeric tree, many modules
#: + odd block sizes (tails everywhere), the full O3 pipeline tuned for this CPU
PATHS = {"defaults": dict(block_rows=7),
         "blocks-opt0": dict(heap_max_depth=0, goto_max_nodes=10**9, opt=0),
         "blocks-opt2": dict(heap_max_depth=0, goto_max_nodes=10**9),
         "tables": dict(heap_max_depth=0, goto_max_nodes=0, block_rows=5),
         "split-opt1": dict(nodes_per_module=60, block_rows=5, interleave=3, opt=1),
         "native-opt3": dict(native=True, opt=3)}


def assert_exact(p, f, X):
    want = interp.predict_raw(f, X)
    for Xin in (X, X.astype(np.float32), np.asfortranarray(X)):
        got = p.predict_raw(Xin)
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, interp.predict_raw(f, Xin))


@pytest.mark.parametrize("path", sorted(PATHS))
@pytest.mark.parametrize("variant", sorted(FOREST_VARIANTS))
def test_random_forests_bit_exact(variant, path):
    if variant == "deep" and path == "blocks-opt2":
        pytest.skip("10k nodes of basic blocks cost ~1.5 s of codegen at -O2; -O0 covers them")
    f = random_forest(300 + sorted(FOREST_VARIANTS).index(variant), **FOREST_VARIANTS[variant])
    X = random_rows(f, 300)
    p = treecomp.compile(f, backend="llvm", **PATHS[path])
    assert p.backend == "llvm" and p._kernel.kind == "llvm"
    assert_exact(p, f, X)
    Xbig = np.tile(X, (8, 1))  # enough rows for the Predictor to really use two threads
    np.testing.assert_array_equal(p.predict_raw(Xbig, n_threads=2), np.tile(interp.predict_raw(f, X), (8, 1)))


@pytest.mark.parametrize("comparison", ["<", "<="])
def test_heap_kernel_nan_modes(comparison):
    """All-NaN-left (MODE 0), all-NaN-right (MODE 1) and mixed (MODE 2) heap and walk kernels."""
    base = random_forest(71, n_trees=6, max_depth=4, comparison=comparison)
    trees = []
    for k, t in enumerate(base.trees):
        dl = np.full(t.n_nodes, True) if k % 3 == 0 else np.full(t.n_nodes, False) if k % 3 == 1 \
            else t.default_left
        trees.append(dataclasses.replace(t, default_left=dl))
    f = base.replace(trees=tuple(trees))
    X = random_rows(f, 300)
    assert_exact(treecomp.compile(f, backend="llvm", interleave=4), f, X)
    assert_exact(treecomp.compile(f, backend="llvm", heap_max_depth=0, goto_max_nodes=0), f, X)


def test_split_modules_really_split():
    f = random_forest(5, n_trees=12, p_cat=0.2)
    objs = llvmbackend.compile_objects(f, nodes_per_module=60)
    assert len(objs) > 3 and all(o[:4] == b"\x7fELF" for o in objs)


def test_single_leaf_and_depth_1000_chain():
    rng = np.random.default_rng(5)
    trees = (chain_tree(1000, 4, rng), leaf_tree(0.75), random_forest(1, n_trees=1, n_features=4).trees[0],
             leaf_tree(-0.125))
    f = Forest(trees=trees, n_features=4, n_outputs=1, tree_output=[0] * 4, base_score=[0.25])
    X = np.vstack([rng.uniform(-1.2, 1.2, size=(400, 4)), random_rows(f, 100)])
    assert_exact(treecomp.compile(f, backend="llvm"), f, X)  # the chain becomes a node table
    assert_exact(treecomp.compile(f, backend="llvm", goto_max_nodes=10**9), f, X)  # 2001 blocks


@pytest.mark.parametrize("variant", [v for v in ("sigmoid-acc32", "exp", "multi-output", "softmax-seq",
                                                  "f32-le") if v in FOREST_VARIANTS])
def test_native_transform_close_to_numpy(variant):
    f = random_forest(7, **FOREST_VARIANTS[variant])
    if f.transform == "identity":
        f = f.replace(transform="sigmoid")
    X = random_rows(f, 300)
    p = treecomp.compile(f, backend="llvm")
    raw = p.predict_raw(X)
    native = np.empty_like(raw)
    p._kernel.run(np.ascontiguousarray(X), native, 1)
    want = outputs.transform(f, raw)
    # libm exp vs numpy: bound of 2 ULP (softmax sums sequentially, numpy pairwise)
    ulp = np.spacing(np.abs(want).astype(want.dtype))
    assert np.all(np.abs(native - want) <= 2 * ulp)
    assert not np.array_equal(native, raw)


def test_bad_arguments_are_rejected_by_the_entry_point():
    f = random_forest(9)
    k = treecomp.compile(f, backend="llvm")._kernel
    X = np.zeros((3, f.n_features))
    out = np.zeros((3, 1))
    assert k._predict(X.ctypes.data, 16, 3, out.ctypes.data, 0) == -1       # bad dtype code
    assert k._predict(X.ctypes.data, 64, -1, out.ctypes.data, 0) == -1      # negative n_rows
    assert k._predict(None, 64, 3, out.ctypes.data, 0) == -1                # NULL input
    assert k._predict(X.ctypes.data, 64, 3, out.ctypes.data, 2) == -1       # unknown flag
    assert k._predict(None, 64, 0, None, 0) == 0                            # zero rows: fine
    with pytest.raises(TypeError, match="unknown LLVM backend option"):
        treecomp.compile(f, backend="llvm", olevel=3)
    with pytest.raises(ValueError, match="opt"):
        treecomp.compile(f, backend="llvm", opt=7)


@pytest.mark.skipif(not ZOO, reason="no zoo cases available")
@pytest.mark.parametrize("name", ZOO)
def test_zoo_bit_exact(name):
    from tests.edge import assert_backend_matches_interp, edge_rows
    case = zoo.get(name)
    f = treecomp.parse(case.path or case.model)
    p = treecomp.compile(f, backend="llvm")
    for X in (case.X, edge_rows(f, case.X, n=100, nan=f.allow_nan)):
        assert_backend_matches_interp(p, f, X)


def test_cache_hit_runs_no_codegen(monkeypatch):
    f = random_forest(21, n_trees=20, p_cat=0.1)
    X = random_rows(f, 100)
    want = treecomp.compile(f, backend="llvm", nodes_per_module=200).predict_raw(X)

    def boom(*a, **k):
        raise AssertionError("LLVM code generation ran on a cache hit")
    monkeypatch.setattr(llvmbackend, "_compile_text", boom)
    monkeypatch.setattr(llvmbackend, "_main_text", boom)
    monkeypatch.setattr(llvmbackend, "_chunk_text", boom)
    p = treecomp.compile(f, backend="llvm", nodes_per_module=200)
    np.testing.assert_array_equal(p.predict_raw(X), want)
    with pytest.raises(AssertionError, match="cache hit"):  # other options: other object code
        treecomp.compile(f, backend="llvm", nodes_per_module=200, block_rows=3)


def _run_py(code: str, env=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, cwd=REPO, env=env, timeout=120)


def test_pickle_round_trip_in_fresh_process(tmp_path):
    f = random_forest(41, transform="sigmoid", p_cat=0.2)
    X = random_rows(f, 200)
    p = treecomp.compile(f, backend="llvm")
    blob = pickle.dumps(p)
    assert llvmbackend.MAGIC in blob
    (tmp_path / "p.pkl").write_bytes(blob)
    np.save(tmp_path / "x.npy", X)
    res = _run_py(f"""
        import pickle, numpy as np
        p = pickle.loads(open({str(tmp_path / 'p.pkl')!r}, 'rb').read())
        np.save({str(tmp_path / 'raw.npy')!r}, p.predict_raw(np.load({str(tmp_path / 'x.npy')!r})))
        print(p.backend, p.digest)
    """)
    assert res.returncode == 0, res.stderr
    assert res.stdout.split() == ["llvm", f.digest()]
    np.testing.assert_array_equal(np.load(tmp_path / "raw.npy"), interp.predict_raw(f, X))
    # in-process too, through the registry and the artifact magic
    k = llvmbackend.load_bytes(p._kernel.to_bytes())
    out = np.empty((len(X), 1))
    k.run(np.ascontiguousarray(X), out, 0)
    np.testing.assert_array_equal(out, interp.predict_raw(f, X))


def test_corrupt_artifact_bytes():
    data = treecomp.compile(random_forest(42), backend="llvm")._kernel.to_bytes()
    with pytest.raises(ArtifactError):
        llvmbackend.load_bytes(data[:-10])
    with pytest.raises(ArtifactError):
        llvmbackend.load_bytes(b"nonsense" + data)
    # a byte of the object code, the header or the digest: refused before the JIT links
    # anything (a damaged object can crash the JIT linker, or load and answer wrongly)
    start = data.index(b"\x7fELF")
    for pos in (start + 17, start + len(data) // 3, len(data) // 2, len(llvmbackend.MAGIC) + 6,
                len(data) - 1):
        bad = bytearray(data)
        bad[pos] ^= 0x10
        with pytest.raises(ArtifactError, match="digest"):
            llvmbackend.load_bytes(bytes(bad))


@pytest.mark.parametrize("opts", [{}, dict(heap_max_depth=0, goto_max_nodes=0, block_rows=5),
                                  dict(heap_max_depth=0, goto_max_nodes=10**9),
                                  dict(heap_max_depth=0, goto_max_nodes=10**9, opt=0),
                                  dict(interleave=3, block_rows=7)])
@pytest.mark.parametrize("acc, p_cat", [("float64", 0.0), ("float32", 0.3)])
def test_wide_leaves_loop_bit_exact(opts, acc, p_cat):
    """Leaf vectors wider than UNROLL_MAX_WIDTH are added in a loop (heap, table and
    basic-block trees): the same margins as the interpreter's."""
    w = llvmbackend.UNROLL_MAX_WIDTH + 9
    f = random_forest(9, n_trees=4, n_outputs=w, width=w, accumulate_dtype=acc, p_cat=p_cat,
                      max_depth=5)
    assert_exact(treecomp.compile(f, backend="llvm", **opts), f, random_rows(f, 200))


def test_build_time_is_linear_in_the_outputs():
    """A 3-node tree with vector leaves: 1.0 s of CPU at 250 outputs, 12.4 s at 2,000 (and 479 s
    at 5,000) while leaf adds were unrolled; now a loop: a fraction of a second at 5,000."""
    import time
    from treecomp.ir import Tree
    rng = np.random.default_rng(0)
    k = 5000
    value = rng.normal(size=(3, k))
    value[0] = 0.0
    t = Tree(left=[1, -1, -1], right=[2, -1, -1], feature=[0, -1, -1], threshold=[0.5, 0, 0],
             default_left=[True, False, False], value=value)
    f = Forest(trees=(t,), n_features=2, n_outputs=k, tree_output=[0], base_score=np.zeros(k))
    for opts in ({}, dict(heap_max_depth=0, goto_max_nodes=10**9),
                 dict(heap_max_depth=0, goto_max_nodes=0)):
        t0 = time.process_time()
        p = treecomp.compile(f, backend="llvm", **opts)
        assert time.process_time() - t0 < 5, opts
        X = np.array([[0.0, 0.0], [1.0, 0.0], [np.nan, 0.0]])
        np.testing.assert_array_equal(p.predict_raw(X), interp.predict_raw(f, X))


@needs_cc
def test_save_shared_library_and_load(tmp_path):
    f = random_forest(51, n_outputs=3, width=1, transform="softmax", p_cat=0.2)
    X = random_rows(f, 300)
    p = treecomp.compile(f, backend="llvm", nodes_per_module=150)
    assert len(p._kernel._objects) > 1
    so = tmp_path / "model.so"
    p.save(so)
    assert so.read_bytes()[:4] == b"\x7fELF"
    q = treecomp.load(so)
    assert q.backend == "llvm" and q._kernel.kind == "so"
    np.testing.assert_array_equal(q.predict_raw(X), interp.predict_raw(f, X))
    np.testing.assert_array_equal(q.predict(X), p.predict(X))
    lib = ctypes.CDLL(str(so))
    lib.treecomp_backend.restype = lib.treecomp_digest.restype = ctypes.c_char_p
    assert lib.treecomp_backend() == b"llvm" and lib.treecomp_digest() == f.digest().encode()
    assert lib.treecomp_n_outputs() == 3 and lib.treecomp_out_dtype() == 64


def test_no_c_compiler_needed(tmp_path):
    """PATH reduced to the venv's bin and CC pointing nowhere: llvm compiles, c explains."""
    env = {**os.environ, "PATH": os.path.dirname(sys.executable), "CC": "/nonexistent/cc",
           "TREECOMP_CACHE_DIR": str(tmp_path / "cache")}
    res = _run_py("""
        import numpy as np, treecomp
        from treecomp import interp, toolchain
        from treecomp.errors import CompileError
        from tests.randforest import random_forest, random_rows
        assert not toolchain.have_compiler()
        f = random_forest(61, p_cat=0.2, transform="sigmoid")
        X = random_rows(f, 200)
        p = treecomp.compile(f, backend="llvm")
        assert np.array_equal(p.predict_raw(X), interp.predict_raw(f, X))
        assert np.array_equal(p.predict_proba(X) if f.is_classifier else p.predict(X),
                              interp.predict(f, X))
        try:
            treecomp.compile(f, backend="c")
        except CompileError as e:
            print("C:", e)
        try:
            p.save("model.so")
        except CompileError as e:
            print("SAVE:", e)
        print("OK")
    """, env=env)
    assert res.returncode == 0, res.stderr
    out = res.stdout
    assert out.rstrip().endswith("OK")
    c_msg = next(ln for ln in out.splitlines() if ln.startswith("C:"))
    assert "llvm" in c_msg and "arrays" in c_msg
    assert "SAVE:" in out and "linker" in out
