"""A host with no C compiler and no prebuilt arrays kernel: the compiler-free fast path (the
arrays backend's byte walks as LLVM vector code, isa "llvm-vec": backends/arrays/vec.py), what
backend="auto" picks there, the slow-path warnings, and `treecomp compile -o model.so`.

How such a host is simulated (the `no_kernel` fixture): the arrays kernel is unloaded and its
prebuilt copy refused (native._load_prebuilt -> None), and toolchain.find_compiler /
have_compiler say there is no compiler; errors.reset_slow_path_warnings() so each test sees its
warnings.
"""

import warnings

import numpy as np
import pytest
from click.testing import CliRunner

import treecomp
from treecomp import backends, errors, interp, toolchain
from treecomp.backends import arrays
from treecomp.backends.arrays import kernel as arrays_kernel, native as arrays_native, vec
from treecomp.errors import CompileError, SlowPathWarning
from tests.edge import edge_rows
from tests.randforest import FOREST_VARIANTS, random_forest, random_rows

try:
    from tests import zoo
    ZOO = zoo.names()
except Exception:  # a zoo module being written right now may be broken: skip, do not fail
    zoo, ZOO = None, []

pytestmark = pytest.mark.skipif(not vec.available(), reason="llvmlite does not target this host")


@pytest.fixture
def no_kernel(monkeypatch):
    """This process as a host without a C compiler and without a prebuilt arrays kernel."""
    def no_cc():
        raise CompileError("no working C compiler (test: none simulated)")
    monkeypatch.setattr(arrays_native, "_LIB", None)
    monkeypatch.setattr(arrays_native, "KERNEL_ORIGIN", None)
    monkeypatch.setattr(arrays_native, "_load_prebuilt", lambda: None)
    monkeypatch.setattr(toolchain, "find_compiler", no_cc)
    monkeypatch.setattr(toolchain, "have_compiler", lambda: False)
    errors.reset_slow_path_warnings()
    yield
    errors.reset_slow_path_warnings()


def _rows(f, n, seed=0):
    return random_rows(f, max(n, 2), seed=seed)[:n]


def _host_has(flavour):
    if flavour == "generic":
        return True
    return vec._NEEDS[flavour] <= set(vec.target()[2].split(","))


@pytest.fixture(params=["host", "generic", "avx2"])
def vec_flavour(request, monkeypatch):
    """The llvm-vec IR flavour a test runs: the host's (on an AVX-512 VBMI host the avx512vbmi
    intrinsics, vec.FLAVOURS), the generic IR forced by $TREECOMP_LLVM_VEC_GENERIC=1, and the
    avx2 flavour forced by $TREECOMP_LLVM_VEC_FLAVOUR=avx2 (skipped without AVX2). Returns the
    flavour the kernel must have."""
    monkeypatch.delenv(vec.ENV_GENERIC, raising=False)
    monkeypatch.delenv(vec.ENV_FLAVOUR, raising=False)
    if request.param == "generic":
        monkeypatch.setenv(vec.ENV_GENERIC, "1")
    elif request.param == "avx2":
        if not _host_has("avx2"):
            pytest.skip("the avx2 flavour needs an AVX2 host")
        monkeypatch.setenv(vec.ENV_FLAVOUR, "avx2")
        assert vec.host_flavour() == "avx2"
    return vec.host_flavour()


# -- bit for bit: llvm-vec against the interpreter and the C kernel ------------------------------
@pytest.mark.parametrize("variant", sorted(FOREST_VARIANTS))
def test_llvm_vec_bit_exact_random_forests(variant, vec_flavour):
    """Every random-forest variant (float32 / float64 input and sums, NaN, categories,
    multiclass, vector leaves, averaging), both byte-walk layouts, 1 / 7 / 2000 rows, float32
    and float64 rows, both IR flavours: the llvm-vec kernel equals the interpreter and the C
    kernel."""
    f = random_forest(500 + sorted(FOREST_VARIANTS).index(variant), **FOREST_VARIANTS[variant])
    X = np.vstack([_rows(f, 1960, seed=3), edge_rows(f, _rows(f, 100), n=40, nan=f.allow_nan)])
    ran = 0
    for layout in ("auto", "quant", "bitvec"):
        try:
            p = treecomp.compile(f, backend="arrays", layout=layout, isa="llvm-vec")
        except treecomp.UnsupportedModelError:
            continue
        assert p._kernel.isa == "llvm-vec"
        assert p._kernel._vec is None or p._kernel._vec.flavour == vec_flavour
        c = treecomp.compile(f, backend="arrays", layout=layout)
        ran += p._kernel._vec is not None
        for Xin in (X, X.astype(np.float32)):
            for n in (1, 7, len(Xin)):
                want = interp.predict_raw(f, Xin[:n])
                got = p.predict_raw(Xin[:n])
                assert got.dtype == want.dtype
                np.testing.assert_array_equal(got, want)
                np.testing.assert_array_equal(got, c.predict_raw(Xin[:n]))
    if variant != "deep":  # every other variant takes a byte walk
        assert ran


def test_llvm_vec_odd_blocks_and_threads(vec_flavour):
    """Block sizes that leave partial groups and partial sweep chunks, several threads, both IR
    flavours."""
    f = random_forest(77, **FOREST_VARIANTS["categorical"])
    g = random_forest(78, **FOREST_VARIANTS["f32-le"])
    for forest, layout in ((f, "bitvec"), (g, "quant")):
        X = _rows(forest, 1000, seed=4)
        want = interp.predict_raw(forest, X)
        for block in (1, 31, 64, 65, 130, 4096):
            p = treecomp.compile(forest, backend="arrays", layout=layout, isa="llvm-vec",
                                 block_rows=block)
            np.testing.assert_array_equal(p.predict_raw(X), want)
        np.testing.assert_array_equal(p.predict_raw(X, n_threads=2), want)


@pytest.mark.parametrize("cmp_, x_dtype, acc_dtype", [("<=", "float32", "float64"),
                                                     ("<", "float32", "float32"),
                                                     ("<=", "float64", "float64"),
                                                     ("<", "float64", "float32")])
def test_llvm_vec_heaps_and_wide_columns_bit_exact(vec_flavour, cmp_, x_dtype, acc_dtype):
    """The steps the avx512vbmi flavour replaces, against the interpreter and the C kernel, in
    both flavours: heaps of every depth 1..8 (thresholds by vpermb / vpermi2b, leaves from byte
    planes on whole 64-row groups, gathered on partial ones), quantiser columns of 16..256
    thresholds (P 32..256: the level tables), rows on thresholds, one ULP either side, NaN,
    -0.0, +-inf, float32 and float64 rows, 1 / 7 / 64 / 2000 rows."""
    seen_p, seen_d = set(), set()
    for i, (n_trees, n_feat, depth) in enumerate([(1, 3, 1), (2, 3, 2), (3, 2, 3), (3, 3, 4),
                                                   (4, 3, 5), (6, 2, 6), (5, 3, 7), (12, 3, 8),
                                                   (40, 2, 8), (3, 2, 5)]):
        f = random_forest(900 + i, n_trees=n_trees, n_features=n_feat, max_depth=depth,
                          comparison=cmp_, input_dtype=x_dtype, accumulate_dtype=acc_dtype)
        p = treecomp.compile(f, backend="arrays", layout="quant", isa="llvm-vec")
        k = p._kernel
        assert k._vec is not None and k._vec.flavour == vec_flavour
        seen_p |= set(int(v) for v in k._quant["q_len"])
        seen_d |= set(int(v) for v in k.tables.arrays["tree_depth"])
        c = treecomp.compile(f, backend="arrays", layout="quant")
        X = np.vstack([_rows(f, 1400, seed=i), edge_rows(f, _rows(f, 100, seed=i), n=600,
                                                          seed=i, nan=f.allow_nan)])
        X = X[np.random.default_rng(i).permutation(len(X))]  # edge rows in short batches too
        for Xin in (X, X.astype(np.float32)):
            for n in (1, 7, 64, len(Xin)):
                want = interp.predict_raw(f, Xin[:n])
                got = p.predict_raw(Xin[:n])
                np.testing.assert_array_equal(got, want)
                np.testing.assert_array_equal(got, c.predict_raw(Xin[:n]))
    assert {32, 64, 128, 256} <= seen_p, seen_p       # every level-table column function ran
    assert set(range(1, 9)) <= seen_d, seen_d         # every heap depth ran


def _close_threshold_forest(k, comparison, seed):
    """k stumps on feature 0 whose float64 thresholds (1 + i 2^-44, i < k) all round to the
    same float32 (the avx2 quantiser's first guess counts none of them: the exact climb does it
    all, up to the table's last real threshold when k = P - 1), and a few trees on feature 1."""
    from treecomp.ir import Forest, Tree
    rng = np.random.default_rng(seed)
    thr = 1.0 + np.arange(k) * 2.0 ** -44
    trees = []
    for i, t in enumerate(rng.permutation(thr)):
        trees.append(Tree(left=np.array([1, -1, -1]), right=np.array([2, -1, -1]),
                          feature=np.array([0, -1, -1]), threshold=np.array([t, 0.0, 0.0]),
                          default_left=np.array([bool(i % 2), False, False]),
                          value=np.array([0.0, *rng.normal(size=2)]).reshape(3, 1)))
    return Forest(trees=tuple(trees), n_features=2, n_outputs=1,
                  tree_output=np.zeros(len(trees), np.int32), base_score=[0.25],
                  input_dtype="float64", comparison=comparison, accumulate_dtype="float64",
                  provenance="close thresholds")


@pytest.mark.parametrize("cmp_", ["<", "<="])
def test_llvm_vec_float64_thresholds_closer_than_float32(vec_flavour, cmp_):
    """float64 thresholds closer together than float32 resolves, columns of exactly P - 1 of
    them (15, 31, .., 255: tables with one NaN pad) and fewer: rows on each threshold, one
    float64 ULP either side, below and above them all, NaN; every flavour against the
    interpreter and the C kernel."""
    for i, k in enumerate((1, 9, 15, 31, 63, 100, 127, 255)):
        f = _close_threshold_forest(k, cmp_, i)
        p = treecomp.compile(f, backend="arrays", layout="quant", isa="llvm-vec")
        kk = p._kernel
        assert kk._vec is not None and kk._vec.flavour == vec_flavour
        assert int(kk._quant["q_count"][0]) == k
        thr = 1.0 + np.arange(k) * 2.0 ** -44
        col = np.concatenate([thr, np.nextafter(thr, np.inf), np.nextafter(thr, -np.inf),
                              [thr[-1] + 1e-9, 2.0, np.inf, 0.5, -np.inf, np.nan, 1.0]])
        X = np.column_stack([col, np.zeros_like(col)])
        X = X[np.random.default_rng(i).permutation(len(X))]
        c = treecomp.compile(f, backend="arrays", layout="quant")
        for n in (1, 7, len(X)):
            want = interp.predict_raw(f, X[:n])
            np.testing.assert_array_equal(p.predict_raw(X[:n]), want, err_msg=f"k={k} n={n}")
            np.testing.assert_array_equal(c.predict_raw(X[:n]), want)


def test_llvm_vec_other_shapes_bit_exact():
    """The kernel's other vector shapes on this host, run on the same packed tables: 32-row
    groups (what AVX2 and NEON hosts get), four sweep groups at once (a batch's last groups
    one at a time); each flavour this host has; both byte-walk layouts, short batches too."""
    shapes = [((32, 2, 16), "generic"), ((64, 4, 16), "generic")]
    if _host_has("avx512vbmi"):
        shapes += [((64, 2, 16), "avx512vbmi"), ((64, 1, 16), "avx512vbmi")]
    if _host_has("avx2"):
        shapes += [((32, 2, 8), "avx2"), ((32, 1, 8), "avx2"), ((32, 4, 16), "avx2")]
    for seed, (layout, variant) in enumerate((("quant", "f64-lt"), ("bitvec", "categorical"),
                                               ("bitvec", "f32-lt-acc32"))):
        f = random_forest(950 + seed, **FOREST_VARIANTS[variant])
        p = treecomp.compile(f, backend="arrays", layout=layout, isa="llvm-vec")
        k = p._kernel
        assert k._vec is not None
        X = np.vstack([_rows(f, 700, seed=seed), edge_rows(f, _rows(f, 100), n=300, nan=f.allow_nan)])
        X = X[np.random.default_rng(seed).permutation(len(X))]
        for shape, flavour in shapes:
            kv = vec.vec_kernel(f.input_dtype, k.tables.acc_dtype.name, shape, flavour=flavour)
            assert (kv.shape, kv.flavour) == (shape, flavour)
            for n in (1, 7, 65, 300, len(X)):
                Xn = np.ascontiguousarray(X[:n], dtype=f.input_dtype)
                out = np.empty((n, f.n_outputs), k.tables.acc_dtype)
                vec.run(kv, k._sref, Xn, out)
                np.testing.assert_array_equal(out, interp.predict_raw(f, Xn), err_msg=f"{shape} {flavour} {n}")


def test_llvm_vec_object_cache_keyed_by_flavour(tmp_path):
    """The object cache is keyed by the IR text: each flavour its own entry, compiled once (a
    fresh process with an empty cache), then loaded by the next process."""
    flavours = [fl for fl in ("avx512vbmi", "avx2") if _host_has(fl)]
    if not flavours:
        pytest.skip("the x86 flavours need an AVX2 host")
    assert vec.module_ir("float32", "float32", 64, flavour="generic") != \
        vec.module_ir("float32", "float32", 64, flavour="avx512vbmi")
    assert vec.module_ir("float32", "float32", 32, 4, 8, flavour="generic") != \
        vec.module_ir("float32", "float32", 32, 4, 8, flavour="avx2")
    import os
    import subprocess
    import sys
    code = ("from treecomp.backends.arrays import vec\n"
            "ks = [vec.vec_kernel('float32', 'float32', (64, 2, 16) if f == 'avx512vbmi' else\n"
            "                     (32, 4, 8), flavour=f)\n"
            f"      for f in {flavours + ['generic']!r}]\n"
            "print(*[(k.flavour, k.origin) for k in ks])\n")
    env = {k: v for k, v in os.environ.items() if k not in (vec.ENV_GENERIC, vec.ENV_FLAVOUR)}
    env["TREECOMP_CACHE_DIR"] = str(tmp_path)
    runs = [subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                           check=True).stdout.split() for _ in range(2)]
    assert " ".join(runs[0]) == " ".join(f"('{fl}', 'compiled')" for fl in flavours + ["generic"])
    assert " ".join(runs[1]) == " ".join(f"('{fl}', 'cached')" for fl in flavours + ["generic"])
    assert len(list(tmp_path.rglob("*.o"))) == len(flavours) + 1


def test_llvm_vec_flavour_choice(monkeypatch):
    """Which flavour a host gets: avx512vbmi with AVX-512 F/BW/VBMI, avx2 with AVX2 (an
    AVX2-only CPU, or AVX-512 without VBMI: Skylake-X), else generic;
    $TREECOMP_LLVM_VEC_GENERIC=1 and $TREECOMP_LLVM_VEC_FLAVOUR force one the CPU runs (and
    nothing it does not); the avx2 flavour is compiled without AVX-512, its shape 32-row groups."""
    monkeypatch.delenv(vec.ENV_GENERIC, raising=False)
    monkeypatch.delenv(vec.ENV_FLAVOUR, raising=False)
    zen4 = "+sse4.2,+avx,+avx2,+fma,+avx512f,+avx512bw,+avx512vl,+avx512vbmi,+gfni,+vaes,+popcnt"
    skx = "+sse4.2,+avx,+avx2,+fma,+avx512f,+avx512bw,+avx512vl,-avx512vbmi,+popcnt"
    zen2 = "+sse4.2,+avx,+avx2,+fma,-avx512f,-avx512bw,-avx512vbmi,+popcnt"
    old = "+sse4.2,+avx,-avx2,+popcnt"
    arm = "+neon,+fp-armv8"
    assert [vec.host_flavour(x) for x in (zen4, skx, zen2, old, arm)] == \
        ["avx512vbmi", "avx2", "avx2", "generic", "generic"]
    monkeypatch.setenv(vec.ENV_FLAVOUR, "avx2")
    assert [vec.host_flavour(x) for x in (zen4, skx, old, arm)] == ["avx2", "avx2", "generic", "generic"]
    monkeypatch.setenv(vec.ENV_FLAVOUR, "avx512vbmi")
    assert [vec.host_flavour(x) for x in (zen4, skx, old)] == ["avx512vbmi", "avx2", "generic"]
    monkeypatch.setenv(vec.ENV_FLAVOUR, "generic")
    assert vec.host_flavour(zen4) == "generic"
    monkeypatch.setenv(vec.ENV_FLAVOUR, "no-such")
    assert vec.host_flavour(zen4) == "avx512vbmi"
    monkeypatch.setenv(vec.ENV_FLAVOUR, "avx2")
    monkeypatch.setenv(vec.ENV_GENERIC, "1")
    assert vec.host_flavour(zen4) == "generic"
    assert vec.flavour_features(zen4, "avx2") == \
        "+sse4.2,+avx,+avx2,+fma,-avx512f,-avx512bw,-avx512vl,-avx512vbmi,-gfni,-vaes,+popcnt"
    assert vec.flavour_features(zen4, "avx512vbmi") == zen4
    assert vec.host_shape(zen4, "avx2") == vec.host_shape(zen2, "avx2") == (32, 4, 8)
    assert vec.host_shape(zen4, "avx512vbmi")[0] == 64 and vec.host_shape(zen2, "generic")[0] == 32
    with pytest.raises(ValueError, match="flavour"):
        vec.module_ir("float32", "float32", 64, flavour="avx2")


@pytest.mark.skipif(not ZOO, reason="no zoo")
def test_llvm_vec_zoo_bit_exact():
    """The library zoo (XGBoost, LightGBM, sklearn, CatBoost models) through llvm-vec: predict,
    predict_proba and raw margins equal the interpreter's."""
    failures = []
    for name in ZOO:
        case = zoo.get(name)
        f = treecomp.parse(case.path or case.model)
        X = np.vstack([case.X, edge_rows(f, case.X, n=100, nan=f.allow_nan)])
        p = treecomp.compile(f, backend="arrays", isa="llvm-vec")
        try:
            np.testing.assert_array_equal(p.predict_raw(X), interp.predict_raw(f, X))
            np.testing.assert_array_equal(p.predict(X), interp.predict(f, X))
            np.testing.assert_array_equal(p.predict_raw(X[:1]), interp.predict_raw(f, X[:1]))
        except AssertionError as exc:
            failures.append(f"{name}: {exc}")
    assert not failures, "\n".join(failures)


def test_llvm_vec_rejects_bad_arguments():
    f = random_forest(5, **FOREST_VARIANTS["f32-le"])
    p = treecomp.compile(f, backend="arrays", isa="llvm-vec", layout="quant")
    k = p._kernel
    assert k._vec is not None
    rc = k._vec.run(k._sref, None, 32, 5, None, None)  # NULL buffers with rows to do
    assert rc == -1
    X = _rows(f, 3)
    out = np.empty((3, 1), k.tables.acc_dtype)
    assert k._vec.run(k._sref, X.ctypes.data, 16, 3, out.ctypes.data, out.ctypes.data) == -1
    assert k._vec.run(k._sref, X.ctypes.data, 64, -1, out.ctypes.data, out.ctypes.data) == -1


# -- the host without a compiler or a prebuilt kernel ------------------------------------------
def test_auto_without_any_kernel_runs_the_byte_walks(no_kernel):
    many = random_forest(3, n_trees=300, n_features=4, max_depth=6)
    assert backends.byte_walk_pays(many)
    assert backends.choose(many) == "arrays"
    X = _rows(many, 500)
    with pytest.warns(SlowPathWarning, match="no native arrays kernel.*LLVM vector code.*gcc or clang"):
        p = treecomp.compile(many)
    assert p.backend == "arrays" and p._kernel.isa == "llvm-vec" and p._kernel._vec is not None
    np.testing.assert_array_equal(p.predict_raw(X), interp.predict_raw(many, X))
    # few trees over many features: generated code (llvm) still wins there
    few = random_forest(3, n_trees=2, n_features=40, max_depth=6)
    assert backends.choose(few) == ("llvm" if "llvm" in backends.names() else "arrays")
    # tables without a byte walk: the llvmlite walker, named so
    deep = random_forest(4, **FOREST_VARIANTS["deep"])
    with pytest.warns(SlowPathWarning, match="llvmlite tree walker"):
        q = treecomp.compile(deep, backend="arrays")
    assert q._kernel.isa == "llvm"
    Xd = _rows(deep, 50)
    np.testing.assert_array_equal(q.predict_raw(Xd), interp.predict_raw(deep, Xd))
    assert "llvm-vec" in arrays.supported_isas() and "scalar" not in arrays.supported_isas()


def test_slow_path_warning_once_per_cause(no_kernel):
    f = random_forest(6, n_trees=20, n_features=4, max_depth=4)
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        for _ in range(3):
            treecomp.compile(f, backend="arrays")
    slow = [w for w in got if issubclass(w.category, SlowPathWarning)]
    assert len(slow) == 1, [str(w.message) for w in slow]
    text = str(slow[0].message)
    assert "no working C compiler" in text and "install gcc or clang" in text
    assert slow[0].filename == __file__  # it points at the caller's line, not into treecomp
    # a forced compiler-free path is what the user asked for: no warning
    errors.reset_slow_path_warnings()
    with warnings.catch_warnings():
        warnings.simplefilter("error", SlowPathWarning)
        treecomp.compile(f, backend="arrays", isa="llvm-vec")
        treecomp.compile(f, backend="arrays", isa="numpy")


def test_vec_kernel_failure_falls_back_to_the_walker(no_kernel, monkeypatch):
    """Should LLVM fail to build the kernel, auto runs the llvmlite walker (exact, named)."""
    def broken(*a, **k):
        raise CompileError("the arrays backend's llvm-vec kernel cannot be built here: test")
    monkeypatch.setattr(vec, "vec_kernel", broken)
    f = random_forest(7, n_trees=30, n_features=4, max_depth=5)
    with pytest.warns(SlowPathWarning, match="llvmlite tree walker"):
        p = treecomp.compile(f, backend="arrays")
    assert p._kernel.isa == "llvm"
    X = _rows(f, 100)
    np.testing.assert_array_equal(p.predict_raw(X), interp.predict_raw(f, X))
    with pytest.raises(CompileError, match="llvm-vec"):  # forced: the error, not a fallback
        treecomp.compile(f, backend="arrays", isa="llvm-vec")


def test_vec_self_test_guards_auto(no_kernel, monkeypatch):
    """A kernel that disagrees with the numpy walker is not used by auto."""
    monkeypatch.setattr(arrays_kernel, "SELF_TEST",
                        {f"llvm-vec:{vec.host_flavour()}:float32:float32": False})
    f = random_forest(8, n_trees=30, n_features=4, max_depth=5, accumulate_dtype="float32")
    p = treecomp.compile(f, backend="arrays")
    assert p._kernel.isa == "llvm"
    assert arrays_kernel.vec_self_test("float32", "float64")  # the real self-test passes


def test_loaded_artifact_asking_for_a_missing_isa_warns(no_kernel):
    f = random_forest(9, n_trees=20, n_features=4, max_depth=4)
    k = treecomp.compile(f, backend="arrays", isa="llvm-vec")._kernel
    data = k.to_bytes()
    import json
    assert json.loads(k.meta_json)["isa"] == "llvm-vec"
    # a table file written on a machine with AVX2 asks for it; here: no C kernel at all
    q = arrays.load_bytes(data)
    assert q.isa in ("llvm-vec", "llvm", "numpy")
    with pytest.warns(SlowPathWarning, match="'avx2'.*no C kernel here"):
        assert arrays_kernel.resolve_isa("avx2", strict=False) == "llvm-vec"
    with warnings.catch_warnings():
        warnings.simplefilter("error", SlowPathWarning)
        arrays_kernel.resolve_isa("avx2", strict=False)  # once per process


def test_refused_cc_flag_warns_once(monkeypatch):
    """CC with a flag that breaks exact floating point makes the host compiler-less: say so,
    once."""
    monkeypatch.setenv("CC", "gcc -ffast-math")
    errors.reset_slow_path_warnings()
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        assert not toolchain.have_compiler()
        assert not toolchain.have_compiler()
    slow = [str(w.message) for w in got if issubclass(w.category, SlowPathWarning)]
    assert len(slow) == 1 and "-ffast-math" in slow[0] and "CC" in slow[0]
    errors.reset_slow_path_warnings()


# -- `treecomp compile -o model.so` without a C compiler ---------------------------------------
def test_cli_so_without_a_compiler_says_what_to_do(no_kernel, tmp_path):
    from treecomp.cli import main
    model = tmp_path / "m.json"
    pytest.importorskip("xgboost")
    import xgboost as xgb
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 4)).astype(np.float32)
    b = xgb.train({"max_depth": 3, "objective": "binary:logistic"},
                  xgb.DMatrix(X, label=(X[:, 0] > 0).astype(int)), num_boost_round=5)
    b.save_model(str(model))
    res = CliRunner().invoke(main,
                             ["compile", str(model), "-o", str(tmp_path / "m.so")])
    assert res.exit_code != 0
    msg = res.output
    assert "C compiler" in msg and "gcc or clang" in msg and ".tc" in msg, msg
    assert "compiling with the" not in msg  # said before any compile work
    assert not (tmp_path / "m.so").exists()
    # the .tc it recommends works here and loads back on the compiler-free path
    res = CliRunner().invoke(main,
                             ["compile", str(model), "-o", str(tmp_path / "m.tc")])
    assert res.exit_code == 0, res.output
    p = treecomp.load(tmp_path / "m.tc")
    np.testing.assert_array_equal(p.predict_raw(X), treecomp.compile(str(model), backend="arrays",
                                                                     isa="numpy").predict_raw(X))


def test_save_so_without_a_compiler_says_what_to_do(no_kernel, tmp_path):
    f = random_forest(11, n_trees=20, n_features=4, max_depth=4)
    for backend in ("arrays", "llvm"):
        if backend not in backends.names():
            continue
        p = treecomp.compile(f, backend=backend)
        with pytest.raises(CompileError, match=r"C compiler.*gcc or clang.*\.tc"):
            p.save(tmp_path / f"{backend}.so")
