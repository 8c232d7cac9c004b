"""The arrays backend as one self-contained shared library (backends/arrays_so.py): `treecomp
compile -o model.so` / Predictor.save("x.so") of an arrays predictor. Bit-exact with the
interpreter (and so the libraries) through treecomp.load and through a C caller that has only
runtime/treecomp.h; exports the ABI only; two models in one process; builds in seconds."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

import treecomp
from treecomp import backends, interp, native, outputs, toolchain
from treecomp.backends import arrays
from treecomp.backends.arrays import kernel as arrays_kernel, native as arrays_native, so as arrays_so
from tests.edge import assert_backend_matches_interp, edge_rows
from tests.randforest import FOREST_VARIANTS, random_forest, random_rows

pytestmark = pytest.mark.skipif(not toolchain.have_compiler(), reason="no C compiler / linker")

try:
    from tests import zoo
    ZOO = set(zoo.names())
except Exception:  # a zoo module being written right now may be broken: skip, do not fail
    zoo, ZOO = None, set()

#: XGBoost binary / multiclass with NaN, categorical; sklearn GB / RF / HGB (float64 input,
#: categories, numpy-exp links); LightGBM (float64 input) with categories, multiclass, poisson
CASES = ["xgboost:binary_logistic", "xgboost:multi_softprob", "xgboost:categorical",
         "xgboost:survival_aft", "xgboost:reg_quantileerror_multi",
         "sklearn:gb_clf_binary", "sklearn:gb_clf_multiclass", "sklearn:gb_clf_exponential",
         "sklearn:rf_clf_nan", "sklearn:rf_reg_multioutput", "sklearn:hgb_clf_categorical",
         "sklearn:hgb_reg_poisson", "sklearn:dt_deep_chain",
         "lightgbm:categorical", "lightgbm:multiclass", "lightgbm:poisson", "lightgbm:binary"]


def _save_load(p, path: Path):
    p.save(path)
    assert path.read_bytes()[:4] == b"\x7fELF"
    q = treecomp.load(path)
    assert type(q._kernel) is native.SharedLibrary and q.backend == "arrays"
    return q


def _run(kernel, X: np.ndarray, flags: int) -> np.ndarray:
    out = np.empty((X.shape[0], kernel.head.n_outputs), np.dtype(kernel.head.accumulate_dtype))
    kernel.run(np.ascontiguousarray(X), out, flags)
    return out


@pytest.mark.parametrize("name", CASES)
def test_zoo_bit_exact(name, tmp_path):
    """Raw, predict, proba and decision_function (whole batches and the small-batch entries),
    float32 and float64 rows, equal the interpreter's; TREECOMP_TRANSFORM equals the in-process
    kernel's native transform, or where numpy applies the link in Python, a c-backend .so's."""
    if name not in ZOO:
        pytest.skip(f"{name} not in the zoo (library missing)")
    case = zoo.get(name)
    f = treecomp.parse(case.path or case.model)
    X = np.vstack([case.X, edge_rows(f, case.X, n=150, nan=f.allow_nan)])
    p = treecomp.compile(f, backend="arrays")
    q = _save_load(p, tmp_path / "m.so")
    assert q.digest == f.digest() and json.loads(q._kernel.meta_json)["backend"] == "arrays"
    for dt in (np.float64, np.float32):
        with np.errstate(over="ignore"):
            Xd = X.astype(dt)
        if dt == np.float32 and f.reject_inf:
            continue  # float32 rounding may make +/-inf of rows the library refuses
        assert_backend_matches_interp(q, f, Xd)
    raw = _run(q._kernel, X, native.TREECOMP_RAW)
    np.testing.assert_array_equal(raw, interp.predict_raw(f, X))
    for library_call in ("predict", "predict_proba"):  # the library itself, where the zoo has it
        if library_call in case.library and f.n_outputs == 1 and not f.reject_inf:
            got = getattr(q, library_call)(case.X)
            np.testing.assert_array_equal(np.asarray(got), np.asarray(case.library[library_call](case.X)))
    tf = _run(q._kernel, X, native.TREECOMP_TRANSFORM)
    if outputs.native_transform(f):
        np.testing.assert_array_equal(tf, _run(p._kernel, X, native.TREECOMP_TRANSFORM))
        np.testing.assert_array_equal(tf, outputs.transform(f, raw))
    elif f.transform == "identity":
        np.testing.assert_array_equal(tf, raw)
    else:  # the C arithmetic of the c backend (libm exp): the same bits
        c = treecomp.compile(f, backend="c")
        np.testing.assert_array_equal(tf, _run(c._kernel, X, native.TREECOMP_TRANSFORM))


@pytest.mark.parametrize("variant", ["vector-leaf-average", "categorical", "float64-strict"])
def test_layouts_and_isas(variant, tmp_path):
    """Random forests through every layout, and a forced instruction set, bit-exact."""
    kw = dict(FOREST_VARIANTS.get(variant, {}))
    if variant == "float64-strict":
        kw = dict(input_dtype="float64", comparison="<", transform="sigmoid")
    f = random_forest(5, n_trees=12, **kw)
    X = random_rows(f, 333)
    layouts = ["auto", "compact", "naive"] + ([] if any(t.has_categorical for t in f.trees) else ["heap"])
    for layout in layouts:
        for isa in ("auto", "scalar"):
            p = treecomp.compile(f, backend="arrays", layout=layout, isa=isa)
            q = _save_load(p, tmp_path / f"m-{layout}-{isa}.so")
            np.testing.assert_array_equal(q.predict_raw(X), interp.predict_raw(f, X))
            np.testing.assert_array_equal(q.predict_raw(X[:3]), interp.predict_raw(f, X[:3]))


def test_row_counts_flags_and_errors(tmp_path):
    f = random_forest(8, n_trees=30, transform="sigmoid", accumulate_dtype="float32")
    q = _save_load(treecomp.compile(f, backend="arrays"), tmp_path / "m.so")
    k = q._kernel
    X = random_rows(f, 5001)
    for n in (0, 1, 7, 33, 64, 65, 999, 5001):
        for dt in (np.float32, np.float64):
            Z = np.ascontiguousarray(X[:n].astype(dt))
            raw = _run(k, Z, 0)
            np.testing.assert_array_equal(raw, interp.predict_raw(f, Z))
            np.testing.assert_array_equal(_run(k, Z, 1), outputs.transform(f, raw))
    out = np.empty((5, 1), np.float32)
    Z = np.ascontiguousarray(X[:5])
    assert k.run_ptr(Z.ctypes.data, 16, 5, out.ctypes.data, 0) == -1       # bad dtype code
    assert k.run_ptr(Z.ctypes.data, 32, -1, out.ctypes.data, 0) == -1      # negative rows
    assert k.run_ptr(Z.ctypes.data, 32, 5, out.ctypes.data, 2) == -1       # unknown flag
    assert k.run_ptr(Z.ctypes.data, 32, 5, out.ctypes.data, 0x100) == -1   # loader-internal PAIRS
    assert k.run_ptr(0, 32, 5, out.ctypes.data, 0) == -1                   # NULL rows
    assert k.run_ptr(0, 32, 0, 0, 0) == 0                                  # no rows: fine


def _defined_dynamic_symbols(path: Path) -> list[str]:
    res = subprocess.run(["nm", "-D", "--defined-only", str(path)], capture_output=True, text=True)
    if res.returncode != 0:
        pytest.skip(f"nm -D does not work here: {res.stderr.strip()}")
    return sorted(line.split()[-1] for line in res.stdout.splitlines() if line.strip())


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="ELF dynamic symbols")
@pytest.mark.parametrize("ir", [False, True])
def test_exports_are_the_abi_only(tmp_path, ir):
    q = _save_load(treecomp.compile(random_forest(2), backend="arrays", ir=ir), tmp_path / "m.so")
    syms = _defined_dynamic_symbols(q._kernel.path)
    assert syms == sorted(["treecomp_abi_version", "treecomp_version", "treecomp_digest",
                           "treecomp_backend", "treecomp_n_features", "treecomp_n_outputs",
                           "treecomp_out_dtype", "treecomp_n_classes", "treecomp_meta_json",
                           "treecomp_predict", "treecomp_verify", "treecomp_arrays_tc_size",
                           "treecomp_arrays_tc", "treecomp_arrays_model"]
                          + ["treecomp_ir_size", "treecomp_ir"] * ir)
    res = subprocess.run(["nm", "-D", "--undefined-only", str(q._kernel.path)], capture_output=True,
                         text=True)
    assert "tc_" not in res.stdout  # the kernel is inside, not looked up elsewhere


@pytest.mark.parametrize("table, layout", [("h_thr", "heap"), ("leaf_values", "heap"),
                                           ("c_nodes", "compact"), ("q_thr", "quant"),
                                           ("tc_file", "heap")])
def test_tables_are_checked_as_a_tc_is(tmp_path, table, layout):
    """A threshold, leaf, node or the tables' own .tc copy changed in a library that was then
    sealed again (the seal vouches for it): refused when loaded, by the check of its tables
    against the .tc it carries (+1 on a few threshold bytes changed 598 of 600 outputs; a
    corrupted node index crashed the process)."""
    f = random_forest(6, n_trees=4, max_depth=4)
    p = treecomp.compile(f, backend="arrays", layout=layout)
    so = tmp_path / "m.so"
    p.save(so)
    data = so.read_bytes()
    k = arrays_kernel.so_kernel(f, layout=layout)
    _, keep = k.pack_arrays()
    src, blob = arrays_so.emit(k)
    arrays = {n: v for n, v in keep.items() if v.size}
    arrays["tc_test_x"] = arrays_so.test_rows(k)
    arrays["tc_file"] = np.frombuffer(k.file_bytes(None), np.uint8)
    _, offs = arrays_so.pack_blob(arrays)
    at = data.find(blob) + offs[table]
    assert data.find(blob) > 0
    bad = bytearray(data)
    bad[at + 3] = (bad[at + 3] + 1) & 0xFF
    so.write_bytes(bytes(bad))
    toolchain.seal(so)
    with pytest.raises(treecomp.errors.ArtifactError, match="tables"):
        treecomp.load(so)


def test_two_models_in_one_process(tmp_path):
    """Two arrays .so files (and the in-process kernel) in one process, loaded RTLD_GLOBAL in a
    fresh interpreter so that any exported kernel symbol would interpose: each runs its own
    tables."""
    fa, fb = random_forest(11, n_trees=20), random_forest(12, n_trees=25, input_dtype="float64",
                                                          n_outputs=3, p_cat=0.2)
    paths = []
    for name, f in (("a", fa), ("b", fb)):
        treecomp.compile(f, backend="arrays").save(tmp_path / f"{name}.so")
        X = np.ascontiguousarray(random_rows(f, 300))
        np.save(tmp_path / f"{name}_x.npy", X)
        np.save(tmp_path / f"{name}_y.npy", interp.predict_raw(f, X))
        paths.append(tmp_path / f"{name}.so")
    script = textwrap.dedent(f"""
        import ctypes, sys
        import numpy as np
        import treecomp
        from treecomp.backends import arrays
        arrays.native.native_library()  # the in-process kernel too (its tc_ symbols are global here)
        d = {str(tmp_path)!r}
        libs = [ctypes.CDLL(f"{{d}}/{{n}}.so", mode=ctypes.RTLD_GLOBAL) for n in "ab"]
        for n, lib in zip("ab", libs):
            X, want = np.load(f"{{d}}/{{n}}_x.npy"), np.load(f"{{d}}/{{n}}_y.npy")
            out = np.empty_like(want)
            lib.treecomp_predict.argtypes = [ctypes.c_void_p, ctypes.c_int32, ctypes.c_int64,
                                             ctypes.c_void_p, ctypes.c_uint32]
            rc = lib.treecomp_predict(X.ctypes.data, 64, len(X), out.ctypes.data, 0)
            assert rc == 0 and np.array_equal(out, want), n
            p = treecomp.load(f"{{d}}/{{n}}.so")
            assert np.array_equal(p.predict_raw(X), want), n
        print("ok")
    """)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
    res = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env)
    assert res.returncode == 0 and res.stdout.strip() == "ok", res.stderr


_DRIVER = r"""
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "treecomp.h"
/* argv: n, rows file (n x nf float64 values); prints raw and transformed outputs for float64
 * and float32 rows, in blocks (0, 1, odd, the rest) */
int main(int argc, char **argv) {
  int n = atoi(argv[1]), nf = treecomp_n_features(), no = treecomp_n_outputs();
  if (treecomp_abi_version() != TREECOMP_ABI_VERSION) return 3;
  if (strcmp(treecomp_backend(), "arrays") != 0 || !strstr(treecomp_meta_json(), "\"arrays\"")) return 4;
  int f64 = treecomp_out_dtype() == TREECOMP_F64;
  size_t osz = f64 ? sizeof(double) : sizeof(float);
  double *x = malloc(sizeof(double) * n * nf);
  float *x32 = malloc(sizeof(float) * n * nf);
  char *out = malloc(osz * n * no + 1);
  FILE *fp = fopen(argv[2], "r");
  for (int i = 0; i < n * nf; ++i) { if (fscanf(fp, "%lf", &x[i]) != 1) return 5; x32[i] = (float)x[i]; }
  if (treecomp_predict(x, 16, n, out, TREECOMP_RAW) != TREECOMP_EINVAL) return 6;
  if (treecomp_predict(x, TREECOMP_F64, n, out, 4u) != TREECOMP_EINVAL) return 7;
  if (treecomp_predict(NULL, TREECOMP_F64, 0, NULL, TREECOMP_RAW) != TREECOMP_OK) return 8;
  int cuts[4] = {0, 1, 8, n};  /* blocks [0,0) [0,1) [1,8) [8,n): 0, 1, 7 (odd) and the rest */
  for (int dt = 0; dt < 2; ++dt)
    for (unsigned flags = 0; flags < 2; ++flags)
      for (int b = 0; b < 4; ++b) {
        int r0 = b ? cuts[b - 1] : 0, r1 = cuts[b];
        const void *xs = dt ? (const void *)(x32 + (size_t)r0 * nf) : (const void *)(x + (size_t)r0 * nf);
        if (treecomp_predict(xs, dt ? TREECOMP_F32 : TREECOMP_F64, r1 - r0, out + osz * r0 * no,
                             flags) != TREECOMP_OK) return 9;
        if (b == 3)
          for (int i = 0; i < n * no; ++i)
            printf("%a\n", f64 ? ((double *)out)[i] : (double)((float *)out)[i]);
      }
  printf("%s %d %d %d\n", treecomp_digest(), nf, no, treecomp_n_classes());
  return 0;
}
"""


@pytest.mark.parametrize("name", ["xgboost:multi_softprob", "lightgbm:categorical",
                                  "sklearn:gb_clf_multiclass"])
def test_c_driver_uses_only_the_header(name, tmp_path):
    """A C program compiled against runtime/treecomp.h alone: float64 and float32 rows, RAW and
    TRANSFORM, 0 / 1 / odd / many rows, the getters and EINVAL."""
    if name not in ZOO:
        pytest.skip(f"{name} not in the zoo (library missing)")
    case = zoo.get(name)
    f = treecomp.parse(case.path or case.model)
    so = tmp_path / "model.so"
    treecomp.compile(f, backend="arrays").save(so)
    X = np.vstack([case.X, edge_rows(f, case.X, n=100, nan=f.allow_nan)]).astype(np.float64)
    if f.reject_inf:
        X[np.isinf(X)] = 0.0
    np.savetxt(tmp_path / "x.txt", X.ravel(), fmt="%.17g")
    (tmp_path / "driver.c").write_text(_DRIVER)
    from treecomp.cli import write_header
    write_header(str(tmp_path / "treecomp.h"))
    exe = tmp_path / "driver"
    subprocess.run(["cc", str(tmp_path / "driver.c"), "-I", str(tmp_path), str(so), "-o", str(exe),
                    f"-Wl,-rpath,{tmp_path}"], check=True)
    res = subprocess.run([str(exe), str(len(X)), str(tmp_path / "x.txt")], capture_output=True, text=True)
    assert res.returncode == 0, (res.returncode, res.stderr)
    lines = res.stdout.split("\n")
    tail = lines[-2].split()
    assert tail == [f.digest(), str(f.n_features), str(f.n_outputs), str(sum(f.n_classes))]
    vals = np.array([float.fromhex(v) for v in lines[:-2]]).reshape(4, len(X), f.n_outputs)
    c = treecomp.compile(f, backend="c")  # TRANSFORM: the C arithmetic of a c-backend .so
    acc = np.dtype(f.accumulate_dtype)
    for i, Xd in enumerate((X, X.astype(np.float32))):
        raw = interp.predict_raw(f, Xd)
        np.testing.assert_array_equal(vals[2 * i].astype(acc), raw)
        np.testing.assert_array_equal(vals[2 * i + 1].astype(acc),
                                      _run(c._kernel, Xd, native.TREECOMP_TRANSFORM))


def test_build_time_of_500_trees(tmp_path, monkeypatch):
    """A cold build (empty cache) of a 500-tree depth-6 model: the unit and the link only (the
    kernel archive is the package's, or built once before the timing)."""
    arrays_native.kernel_archive()
    monkeypatch.setenv("TREECOMP_CACHE_DIR", str(tmp_path / "cache"))
    f = random_forest(1, n_trees=500, n_features=20, max_depth=6)
    p = treecomp.compile(f, backend="arrays")
    t0 = time.perf_counter()
    p.save(tmp_path / "m.so")
    took = time.perf_counter() - t0
    print(f"\narrays .so build, 500 trees of depth <= 6: {took:.2f} s "
          f"({(tmp_path / 'm.so').stat().st_size / 1e6:.2f} MB, archive {arrays_native.ARCHIVE_ORIGIN})")
    assert took < 30
    X = random_rows(f, 200)
    np.testing.assert_array_equal(treecomp.load(tmp_path / "m.so").predict_raw(X), interp.predict_raw(f, X))


def test_auto_picks_the_arrays_so_where_python_would_pick_arrays(tmp_path):
    big = random_forest(3, n_trees=200, n_features=8, max_depth=6)
    # two trees over 40 features: generated code wins (c 23 vs arrays 34 ns/row, 2026-11-28;
    # two trees of depth 3 over 8 features no longer do: arrays 9.7 vs c 14.3)
    small = random_forest(3, n_trees=2, n_features=40, max_depth=6)
    assert backends.choose(big) == "arrays" and backends.choose(big, "so") == "arrays"
    assert backends.choose(small) == "c" and backends.choose(small, "so") == "c"


def test_cli_writes_the_arrays_so(tmp_path):
    from click.testing import CliRunner
    from treecomp.cli import main
    f = random_forest(6, n_trees=40, max_depth=5)
    f.save(tmp_path / "m.tcir")
    X = random_rows(f, 100)
    for args in (["--backend", "arrays"], []):
        out = tmp_path / f"m{len(args)}.so"
        res = CliRunner().invoke(main, ["compile", str(tmp_path / "m.tcir"), "-o", str(out), *args])
        assert res.exit_code == 0, res.output
        assert "arrays backend" in res.output
        q = treecomp.load(out)
        assert type(q._kernel) is native.SharedLibrary and q.backend == "arrays"
        np.testing.assert_array_equal(q.predict_raw(X), interp.predict_raw(f, X))
    res = CliRunner().invoke(main, ["compile", str(tmp_path / "m.tcir"), "-o", str(tmp_path / "c.so"),
                                    "--backend", "c"])
    assert res.exit_code == 0 and treecomp.load(tmp_path / "c.so").backend == "c"


def test_pickle_round_trip(tmp_path):
    import pickle
    f = random_forest(9, n_trees=10)
    q = _save_load(treecomp.compile(f, backend="arrays"), tmp_path / "m.so")
    r = pickle.loads(pickle.dumps(q))
    X = random_rows(f, 50)
    assert r.backend == "arrays"
    np.testing.assert_array_equal(r.predict_raw(X), interp.predict_raw(f, X))


def test_archive_check_and_fallback_build(tmp_path, monkeypatch):
    """A stale or foreign archive is refused (its embedded source hash); without a usable one the
    kernel is archived once into the cache, reported through progress (the build is faked: it
    copies the package's archive, or builds it for real in a source tree)."""
    stale = tmp_path / "stale.a"
    stale.write_bytes(b"!<arch>\nnot the kernel")
    assert "other kernel sources" in arrays_native._archive_matches(stale)
    (tmp_path / "x.a").write_bytes(b"\x7fELF")
    assert "not a static archive" in arrays_native._archive_matches(tmp_path / "x.a")
    real = arrays_native.kernel_archive()
    assert arrays_native._archive_matches(real) is None
    calls = []

    def fake(sources, out, cflags=(), jobs=None, compiler=None, progress=None):
        calls.append(sources)
        assert len(sources) == arrays_native.KERNEL_PARTS
        assert tuple(cflags)[:len(arrays.native.KERNEL_CFLAGS)] == arrays.native.KERNEL_CFLAGS
        Path(out).write_bytes(real.read_bytes())
    for name in ("_ARCHIVE", "ARCHIVE_ORIGIN", "ARCHIVE_ERROR"):  # restored afterwards
        monkeypatch.setattr(arrays_native, name, None)
    monkeypatch.setattr(arrays_native, "prebuilt_archive_path", lambda: stale)
    monkeypatch.setattr(toolchain, "build_static_archive", fake)
    monkeypatch.setenv("TREECOMP_CACHE_DIR", str(tmp_path / "cache"))
    msgs = []
    f = random_forest(4, n_trees=6)
    p = treecomp.compile(f, backend="arrays")
    arrays_so.save(p._kernel, tmp_path / "m.so", progress=msgs.append)
    assert arrays_native.ARCHIVE_ORIGIN == "built" and len(calls) == 1
    assert any("building the arrays kernel archive" in m and "other kernel sources" in m for m in msgs)
    X = random_rows(f, 60)
    np.testing.assert_array_equal(treecomp.load(tmp_path / "m.so").predict_raw(X), interp.predict_raw(f, X))
    arrays_so.save(p._kernel, tmp_path / "m2.so")  # the cached archive: no second build
    assert len(calls) == 1


def test_prebuilt_archive_is_used():
    """This install (pip install -e .) archived the kernel's objects next to the kernel, and a
    model's .so links that archive (no kernel build)."""
    path = arrays_native.prebuilt_archive_path()
    assert path is not None, ("the package has no treecomp/_arrays_kernel.a: `pip install -e .` "
                              "should have built it (see docs/build.md)")
    why = arrays_native._archive_matches(path)
    if why is not None and "other kernel sources" in why:
        pytest.skip("runtime/kernels changed since the install (rerun `pip install -e .`)")
    assert why is None
    saved = arrays_native._ARCHIVE
    try:
        arrays_native._ARCHIVE = None
        assert arrays_native.kernel_archive() == path and arrays_native.ARCHIVE_ORIGIN == "prebuilt"
    finally:
        arrays_native._ARCHIVE = saved
