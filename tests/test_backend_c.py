"""The C backend: bit-exact against the interpreter (oracle 2), the ABI from plain C, the cache."""

import subprocess
import textwrap

import numpy as np
import pytest

import treecomp
from treecomp import interp, outputs, toolchain
from treecomp.backends import c as cbackend
from treecomp.errors import CompileError
from tests import zoo
from tests.randforest import FOREST_VARIANTS, chain_tree, random_forest, random_rows

pytestmark = pytest.mark.skipif(not toolchain.have_compiler(), reason="no C compiler")


LAYOUTS = {  # every tree shape the C backend emits: heap tables, if/goto code, node tables
    "auto": {},
    "goto": {"heap_max_depth": 0, "goto_max_nodes": 10**9},
    "table": {"heap_max_depth": 0, "goto_max_nodes": 0},
}


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
@pytest.mark.parametrize("variant", sorted(FOREST_VARIANTS))
def test_random_forests_bit_exact(variant, layout):
    f = random_forest(100 + sorted(FOREST_VARIANTS).index(variant), **FOREST_VARIANTS[variant])
    X = random_rows(f, 400)
    # odd block size: exercise the single-row tail of the interleaved kernels
    p = treecomp.compile(f, backend="c", block_rows=7, **LAYOUTS[layout])
    want = interp.predict_raw(f, X)
    for Xin in (X, X.astype(np.float32), np.asfortranarray(X)):
        got = p.predict_raw(Xin)
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, interp.predict_raw(f, Xin))
    np.testing.assert_array_equal(p.predict_raw(X, n_threads=2), want)


@pytest.mark.parametrize("variant", ["sigmoid-acc32", "exp", "multi-output", "f32-le"])
def test_native_transform_close_to_numpy(variant):
    f = random_forest(7, **FOREST_VARIANTS[variant])
    X = random_rows(f, 300)
    p = treecomp.compile(f, backend="c")
    raw = p.predict_raw(X)
    native = np.empty_like(raw)
    p._kernel.run(np.ascontiguousarray(X), native, 1)
    want = outputs.transform(f, raw)
    # libm exp vs numpy: documented bound of 2 ULP (softmax sums sequentially in C)
    ulp = np.spacing(np.abs(want).astype(want.dtype))
    assert np.all(np.abs(native - want) <= 2 * ulp)


@pytest.mark.parametrize("variant", ["f32-lt-acc32", "f64-le", "vector-leaf-average", "deep"])
def test_node_tables_walk_rows_in_lockstep(variant):
    """TC_WALK_KERNEL walks 8 rows in lockstep (a leaf is its own two children, so a row that
    finished stays put) and a block's last rows one by one: blocks of 8 rows exactly, 8 + 5
    and 64, rows on thresholds, NaN both ways: the same leaves as the interpreter."""
    f = random_forest(300 + sorted(FOREST_VARIANTS).index(variant), **FOREST_VARIANTS[variant])
    X = random_rows(f, 203)
    want = interp.predict_raw(f, X)
    src = cbackend.emit(f, cbackend.options(heap_max_depth=0, goto_max_nodes=0))
    assert "TC_WALK_KERNEL(" in src["unit0.c"] and "tree_0(" not in src["unit0.c"]
    for block in (8, 13, 64):
        p = treecomp.compile(f, backend="c", block_rows=block, heap_max_depth=0, goto_max_nodes=0)
        np.testing.assert_array_equal(p.predict_raw(X), want)


def test_default_shapes_numeric_tables_categorical_goto():
    """By default a numeric tree deeper than heap_max_depth is a lockstep node table at any
    size; a categorical one is if/goto code up to CAT_GOTO_MAX_NODES nodes; an explicit
    goto_max_nodes applies to both."""
    num = random_forest(11, max_depth=11, n_trees=4)
    small = [i for i, t in enumerate(num.trees) if t.max_depth > 8 and t.n_nodes <= 1024]
    assert small  # what goto code was by default (up to 1024 nodes)
    src = cbackend.emit(num)["unit0.c"]
    assert "TC_WALK_KERNEL(" in src and "static void tree_" not in src
    src = cbackend.emit(num, cbackend.options(goto_max_nodes=1024))["unit0.c"]
    assert all(f"static void tree_{i}(" in src for i in small)
    cat = random_forest(12, p_cat=0.3, max_depth=10, n_trees=3)
    deep = [i for i, t in enumerate(cat.trees) if t.has_categorical and t.max_depth > 8]
    assert deep and all(cat.trees[i].n_nodes <= cbackend.CAT_GOTO_MAX_NODES for i in deep)
    src = cbackend.emit(cat)["unit0.c"]
    assert all(f"static void tree_{i}(" in src for i in deep)


def test_depth_1000_tree():
    rng = np.random.default_rng(5)
    t = chain_tree(1000, 4, rng)
    f = treecomp.Forest(trees=(t,), n_features=4, n_outputs=1, tree_output=[0], base_score=[0.25])
    X = rng.uniform(-1.2, 1.2, size=(500, 4))
    np.testing.assert_array_equal(treecomp.compile(f, backend="c").predict_raw(X), interp.predict_raw(f, X))


def test_many_translation_units():
    f = random_forest(8, n_trees=40)
    src = cbackend.emit(f, cbackend.options(nodes_per_unit=200))
    assert len(src) > 5
    X = random_rows(f, 200)
    p = treecomp.compile(f, backend="c", nodes_per_unit=200)
    np.testing.assert_array_equal(p.predict_raw(X), interp.predict_raw(f, X))


@pytest.mark.parametrize("name", zoo.names())
def test_zoo_bit_exact(name):
    case = zoo.get(name)
    f = treecomp.parse(case.path or case.model)
    p = treecomp.compile(f, backend="c")
    from tests.edge import assert_backend_matches_interp, edge_rows
    for X in (case.X, edge_rows(f, case.X, n=100, nan=f.allow_nan)):
        assert_backend_matches_interp(p, f, X)


def test_cache_hit_skips_compiler(monkeypatch):
    f = random_forest(21)
    treecomp.compile(f, backend="c")
    def boom(*a, **k):
        raise AssertionError("compiler ran on a cache hit")
    monkeypatch.setattr(toolchain, "build_shared_library", boom)
    treecomp.compile(f, backend="c")
    with pytest.raises(AssertionError):  # a different option is a different artifact
        treecomp.compile(f, backend="c", block_rows=3)


def test_compiler_error_and_missing_compiler(monkeypatch):
    f = random_forest(22)
    monkeypatch.setenv("CC", "/nonexistent/cc")
    toolchain._probe.cache_clear()
    with pytest.raises(CompileError, match="llvm.*arrays"):
        treecomp.compile(f, backend="c")
    monkeypatch.setenv("CC", "cc -fno-such-flag-xyz")
    toolchain._probe.cache_clear()
    with pytest.raises(CompileError, match="fno-such-flag"):
        treecomp.compile(f, backend="c", opt="-O1")
    toolchain._probe.cache_clear()


def test_c_driver_uses_only_the_header(tmp_path):
    f = random_forest(31, transform="sigmoid")
    so = tmp_path / "model.so"
    treecomp.compile(f, backend="c").save(so)
    X = random_rows(f, 50).astype(np.float64)
    X[np.isinf(X)] = 0.0
    np.savetxt(tmp_path / "x.txt", X.ravel(), fmt="%.17g")
    driver = tmp_path / "driver.c"
    driver.write_text(textwrap.dedent("""
        #include <stdio.h>
        #include <stdlib.h>
        #include "treecomp.h"
        int main(int argc, char **argv) {
          int n = atoi(argv[1]), nf = treecomp_n_features(), no = treecomp_n_outputs();
          if (treecomp_abi_version() != TREECOMP_ABI_VERSION || treecomp_out_dtype() != TREECOMP_F64) return 3;
          double *x = malloc(sizeof(double) * n * nf), *out = malloc(sizeof(double) * n * no);
          FILE *fp = fopen(argv[2], "r");
          for (int i = 0; i < n * nf; ++i) if (fscanf(fp, "%lf", &x[i]) != 1) return 4;
          if (treecomp_predict(x, TREECOMP_F64, n, out, TREECOMP_RAW) != TREECOMP_OK) return 5;
          if (treecomp_predict(x, 16, n, out, TREECOMP_RAW) != TREECOMP_EINVAL) return 6;
          for (int i = 0; i < n * no; ++i) printf("%a\\n", out[i]);
          printf("%s\\n", treecomp_digest());
          return 0;
        }"""))
    header = tmp_path / "treecomp.h"
    from treecomp.cli import write_header
    write_header(str(header))
    exe = tmp_path / "driver"
    subprocess.run(["cc", str(driver), "-I", str(tmp_path), str(so), "-o", str(exe),
                    f"-Wl,-rpath,{tmp_path}"], check=True)
    res = subprocess.run([str(exe), str(len(X)), str(tmp_path / "x.txt")], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    lines = res.stdout.split()
    got = np.array([float.fromhex(v) for v in lines[:-1]])
    np.testing.assert_array_equal(got, interp.predict_raw(f, X).ravel())
    assert lines[-1] == f.digest()


@pytest.mark.parametrize("backend", ["c", "arrays", "llvm"])
def test_c_callers_check_the_seal(tmp_path, backend):
    """A C caller checks a library before loading it (treecomp_check_file, the header's
    TREECOMP_CHECK_IMPLEMENTATION) and after (the library's own treecomp_verify): the same
    check the Python loader makes; a damaged copy, a missing file, a replaced file fail it."""
    import shutil
    f = random_forest(32, n_trees=3)
    so = tmp_path / "model.so"
    treecomp.compile(f, backend=backend).save(so)
    data = so.read_bytes()
    (tmp_path / "flipped.so").write_bytes(data[:1000] + bytes([data[1000] ^ 4]) + data[1001:])
    (tmp_path / "cut.so").write_bytes(data[:len(data) - 100])
    driver = tmp_path / "driver.c"
    driver.write_text(textwrap.dedent("""
        #include <dlfcn.h>
        #include <stdio.h>
        #define TREECOMP_CHECK_IMPLEMENTATION
        #include "treecomp.h"
        int main(int argc, char **argv) {
          for (int i = 2; i < argc; ++i) printf("%d\\n", treecomp_check_file(argv[i]));
          void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
          if (!h) return 3;
          int32_t (*verify)(void) = (int32_t (*)(void))dlsym(h, "treecomp_verify");
          if (!verify) return 4;
          printf("%d\\n", verify());
          fflush(stdout);
          if (rename(argv[argc - 1], argv[1]) != 0) return 5;  /* another file in its place */
          printf("%d\\n", verify());
          return 0;
        }"""))
    from treecomp.cli import write_header
    write_header(str(tmp_path / "treecomp.h"))
    exe = tmp_path / "driver"
    subprocess.run(["cc", "-Wall", "-Werror", str(driver), "-I", str(tmp_path), "-o", str(exe),
                    "-ldl"], check=True)
    shutil.copyfile(so, tmp_path / "copy.so")
    treecomp.compile(random_forest(33, n_trees=3), backend=backend).save(tmp_path / "other.so")
    args = [str(so), str(so), str(tmp_path / "flipped.so"), str(tmp_path / "cut.so"),
            str(tmp_path / "missing.so"), str(tmp_path / "other.so")]
    res = subprocess.run([str(exe), *args], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    ok, corrupt, eio = "0", str(-3), str(-4)
    assert res.stdout.split() == [ok, corrupt, corrupt, eio, ok, ok, corrupt]


def test_generated_source_is_readable():
    f = random_forest(2, n_trees=2, max_depth=12)
    src = cbackend.emit(f, cbackend.options(goto_max_nodes=10**6))
    unit = src["unit0.c"]
    assert "static void tree_0(" in unit and "goto n" in unit and "0x" in unit
    assert "treecomp_predict" in src["model.c"]
    shallow = cbackend.emit(random_forest(2, n_trees=2, max_depth=3))["unit0.c"]
    assert "TC_HEAP_KERNEL(" in shallow and "static const tc_node T0[" in shallow


@pytest.mark.parametrize("backend", ["c", "llvm"])
@pytest.mark.parametrize("transform, n_outputs", [("sigmoid", 1), ("exp", 1), ("softmax", 4)])
def test_native_float32_transforms_are_xgboosts(backend, transform, n_outputs):
    """XGBoost's float32 transforms through the C ABI (flags=1) equal outputs.py bit for bit,
    including margins below -88.7 where XGBoost's sigmoid clamps."""
    f = random_forest(8, accumulate_dtype="float32", transform=transform, n_outputs=n_outputs)
    shift = {"sigmoid": -95.0, "exp": -80.0, "softmax": 3.0}[transform]
    f = f.replace(base_score=(f.base_score + np.float32(shift)).astype(np.float32))
    X = random_rows(f, 300)
    p = treecomp.compile(f, backend=backend)
    raw = p.predict_raw(X)
    native = np.empty_like(raw)
    p._kernel.run(np.ascontiguousarray(X), native, 1)
    np.testing.assert_array_equal(native, outputs.transform(f, raw))


def test_native_builds_are_keyed_by_the_host_cpu(monkeypatch):
    """-march=native code runs only on CPUs with those instructions: a cache shared between
    machines must not hand one machine's native build to another."""
    f = random_forest(7, n_features=3)
    a = cbackend.build(f, native=True).path
    monkeypatch.setattr(cbackend, "host_cpu", lambda: "another CPU")
    b = cbackend.build(f, native=True).path
    assert a != b
    assert cbackend.build(f).path == cbackend.build(f).path  # portable builds are shared


def _symmetric_forest(comparison, input_dtype, seed):
    """Complete depth-4 trees whose levels each test one column: numeric levels (NaN left or
    right) and one-hot levels "category == k" (every category but k goes left, as
    frontends/catboost.py builds them), in random orders; one tree whose level is not uniform."""
    from treecomp.ir import Forest, Tree
    rng = np.random.default_rng(seed)
    D, n_int = 4, 15
    trees = []
    for i in range(6):
        feat, thr, dl = np.full(31, -1), np.zeros(31), np.zeros(31, bool)
        cat_index, bits, k_of = np.full(31, -1), [], {}
        for d in range(D):
            lo, hi = (1 << d) - 1, (2 << d) - 1
            if rng.random() < 0.4:  # one-hot level on column 3
                k = int(rng.integers(0, 40))
                if k not in k_of:
                    k_of[k] = len(bits)
                    row = np.full(2, 0xFFFFFFFF, np.uint32)
                    row[k // 32] &= ~np.uint32(1 << (k % 32))
                    bits.append(row)
                feat[lo:hi], cat_index[lo:hi], dl[lo:hi] = 3, k_of[k], True
            else:
                f = int(rng.integers(0, 3))
                feat[lo:hi], thr[lo:hi], dl[lo:hi] = f, rng.choice([-0.5, 0.0, 0.25, 1.0]), rng.random() < 0.5
        if i == 5:
            thr[n_int - 1] = 7.0 if cat_index[n_int - 1] < 0 else thr[n_int - 1]  # not uniform
            feat[n_int - 1] = 0 if cat_index[n_int - 1] >= 0 else feat[n_int - 1]
            cat_index[n_int - 1] = -1
        idx = np.arange(n_int)
        left, right = np.full(31, -1), np.full(31, -1)
        left[:n_int], right[:n_int] = 2 * idx + 1, 2 * idx + 2
        value = np.zeros((31, 2))
        value[n_int:] = rng.normal(size=(16, 2))
        trees.append(Tree(left=left, right=right, feature=feat, threshold=thr, default_left=dl, value=value,
                          cat_index=cat_index, cat_bits=np.array(bits or np.zeros((0, 2)), np.uint32).reshape(-1, 2),
                          cat_other_left=np.ones(len(bits), bool)))
    return Forest(trees=trees, n_features=4, n_outputs=2, tree_output=np.zeros(6), base_score=np.zeros(2),
                  comparison=comparison, input_dtype=input_dtype)


@pytest.mark.parametrize("comparison,input_dtype", [("<=", "float32"), ("<", "float64")])
def test_symmetric_trees_bit_exact(comparison, input_dtype):
    """The symmetric kernel (TC_OBL_KERNEL: leaf index from the levels' bits) routes as the
    interpreter: numeric levels on / next to their thresholds, NaN either way, one-hot levels
    on their category, its neighbours (k +- 0.5, +- 1 ULP), negative, huge and NaN values."""
    f = _symmetric_forest(comparison, input_dtype, seed=4)
    flags = [cbackend.symmetric_levels(t, f, 8) is not None for t in f.trees]
    assert flags == [True] * 5 + [False]
    src = cbackend.emit(f, cbackend.options())["unit0.c"]
    assert "TC_OBL_KERNEL(4, 2, 2, 1)" in src
    rng = np.random.default_rng(5)
    vals = np.array([-0.5, 0.0, 0.25, 1.0, 7.0, np.nan, -0.0, np.inf, -np.inf, -1.0, 1e9])
    cats = np.concatenate([np.arange(-1, 41, dtype=float), [0.5, 2.5, 39.99, 64.0, 1e9, np.nan, -0.0]])
    cats = np.concatenate([cats, np.nextafter(cats, np.inf), np.nextafter(cats, -np.inf)])
    X = np.empty((3000, 4))
    X[:, :3] = np.where(rng.random((3000, 3)) < 0.7, rng.choice(vals, (3000, 3)), rng.normal(size=(3000, 3)))
    X[:, 3] = rng.choice(cats, 3000)
    for symmetric in (True, False):
        p = treecomp.compile(f, backend="c", symmetric=symmetric)
        np.testing.assert_array_equal(p.predict_raw(X), interp.predict_raw(f, X))
