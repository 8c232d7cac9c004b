"""Standalone artifacts of LightGBM linear_tree models (treecomp.linear, backends/linear_so.py):
.tc files and the arrays, c and llvm backends' .so, loaded in a fresh process and called
through the C ABI, bit for bit against lightgbm; corrupt linear sections refused on load."""

from __future__ import annotations

import ctypes
import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

lgb = pytest.importorskip("lightgbm")

import treecomp  # noqa: E402
from treecomp import linear  # noqa: E402
from treecomp.backends import arrays  # noqa: E402
from treecomp.backends.arrays import format as arrays_format  # noqa: E402
from treecomp.errors import ArtifactError, UnsupportedModelError  # noqa: E402
from tests.test_frontend_lightgbm import BASE  # noqa: E402
from tests.test_frontend_lightgbm_linear import _data, _raw, _rows  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
#: (backend, file name): every artifact kind a linear model saves as
KINDS = [("arrays", "m.tc"), ("arrays", "m.so"), ("c", "m.so"), ("llvm", "m.so")]
NAMES = ["regression", "binary", "multiclass", "random forest"]  # the last: predict divides


@pytest.fixture(scope="module")
def models():
    X, y = _data(500, 5, 21)
    reg = lgb.train({**BASE, "objective": "regression", "linear_tree": True, "num_leaves": 8,
                     "min_data_in_leaf": 10, "linear_lambda": 0.1}, lgb.Dataset(X, y), 10)
    kw = dict(**BASE, num_leaves=6, min_child_samples=10, linear_tree=True)
    binary = lgb.LGBMClassifier(n_estimators=8, **kw).fit(X, np.where(y > 0, "yes", "no"))
    multi = lgb.LGBMClassifier(n_estimators=5, linear_lambda=0.5, **kw).fit(X, np.digitize(y, [-1, 1]))
    rf = lgb.train({**BASE, "objective": "regression", "boosting": "rf", "bagging_fraction": 0.7,
                    "bagging_freq": 1, "linear_tree": True, "num_leaves": 6}, lgb.Dataset(X, y), 4)
    return {"regression": (reg, X), "binary": (binary, X), "multiclass": (multi, X),
            "random forest": (rf, X)}


def _booster(m):
    return m if isinstance(m, lgb.Booster) else m.booster_


def _lib_raw(m, Z: np.ndarray) -> np.ndarray:
    """lightgbm's raw margins (raw_score=True; in rf mode the undivided sum, as treecomp's raw,
    its predict dividing by the iterations)."""
    return _raw(m, Z)


def _want(m, Z: np.ndarray) -> dict[str, np.ndarray]:
    """lightgbm's outputs: raw margins, predict (values / probabilities / labels), proba."""
    out = {"raw": _lib_raw(m, Z), "pred": m.predict(Z)}
    if not isinstance(m, lgb.Booster):
        out["proba"] = m.predict_proba(Z)
    return out


_LOAD_ALL = """
import json, sys, numpy as np, treecomp
for path in json.loads(sys.argv[1]):
    Z = np.load(path + ".rows.npy")
    p = treecomp.load(path)
    out = {"raw": p.predict_raw(Z), "pred": p.predict(Z), "one": p.predict(Z[-1:]),
           "f32": p.predict_raw(Z[:7].astype(np.float32)), "backend": np.array(p.backend)}
    if p.head.is_classifier:
        out["proba"] = p.predict_proba(Z)
    np.savez(path + ".out.npz", **out)
"""


@pytest.fixture(scope="module")
def loaded(models, tmp_path_factory):
    """Every model saved as every artifact kind, then loaded and predicted in ONE fresh
    process: {(name, backend, file): its outputs}, with the rows they were given."""
    d = tmp_path_factory.mktemp("linart")
    paths, rows = {}, {}
    for name, (m, X) in models.items():
        rows[name] = Z = _rows(m, X, 31)
        for backend, fname in KINDS:
            path = d / f"{name.replace(' ', '_')}-{backend}-{fname}"
            treecomp.compile(m, backend=backend).save(path)
            np.save(str(path) + ".rows.npy", Z)
            paths[(name, backend, fname)] = path
    proc = subprocess.run([sys.executable, "-c", _LOAD_ALL, json.dumps([str(p) for p in paths.values()])],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return {k: dict(np.load(str(p) + ".out.npz")) for k, p in paths.items()}, rows


@pytest.mark.parametrize("backend, fname", KINDS)
@pytest.mark.parametrize("name", NAMES)
def test_saved_and_loaded_in_a_fresh_process_is_bit_exact(models, loaded, name, backend, fname):
    got, rows = loaded
    out, (m, _), Z = got[(name, backend, fname)], models[name], rows[name]
    assert (treecomp.parse(m).output_divisor > 1) == (name == "random forest")
    assert str(out["backend"]) == backend
    want = _want(m, Z)
    np.testing.assert_array_equal(out["raw"], want["raw"], strict=True)
    np.testing.assert_array_equal(out["pred"], want["pred"], strict=True)
    np.testing.assert_array_equal(out["one"], want["pred"][-1:], strict=True)
    np.testing.assert_array_equal(out["f32"], _lib_raw(m, Z[:7].astype(np.float32)), strict=True)
    if "proba" in want:
        np.testing.assert_array_equal(out["proba"], want["proba"], strict=True)
    assert np.isnan(Z).any() and np.isinf(Z).any()  # NaN rows and +-inf went through


def _abi(path: Path):
    lib = ctypes.CDLL(str(path))
    lib.treecomp_predict.restype = ctypes.c_int32
    lib.treecomp_predict.argtypes = [ctypes.c_void_p, ctypes.c_int32, ctypes.c_int64,
                                     ctypes.c_void_p, ctypes.c_uint32]
    for fn in ("treecomp_n_features", "treecomp_n_outputs", "treecomp_out_dtype"):
        getattr(lib, fn).restype = ctypes.c_int32
    lib.treecomp_digest.restype = lib.treecomp_meta_json.restype = ctypes.c_char_p
    return lib


@pytest.mark.parametrize("backend", ["arrays", "c", "llvm"])
def test_c_abi_gives_lightgbm_margins_and_probabilities(models, backend, tmp_path):
    for name in ("binary", "multiclass"):
        m, X = models[name]
        path = tmp_path / f"{name}.so"
        treecomp.compile(m, backend=backend).save(path)
        lib = _abi(path)
        b = _booster(m)
        Z = np.ascontiguousarray(_rows(m, X, 32))
        n, no = len(Z), lib.treecomp_n_outputs()
        assert (lib.treecomp_n_features(), no, lib.treecomp_out_dtype()) == (5, 1 if name == "binary" else 3, 64)
        assert lib.treecomp_digest().decode() == treecomp.parse(m).digest()
        assert json.loads(lib.treecomp_meta_json())["backend"] == backend
        for x in (Z, np.ascontiguousarray(Z.astype(np.float32))):
            for flags, want in ((0, b.predict(x, raw_score=True)), (1, b.predict(x))):
                out = np.full((n, no), -7.0)
                assert lib.treecomp_predict(x.ctypes.data, x.dtype.itemsize * 8, n, out.ctypes.data, flags) == 0
                np.testing.assert_array_equal(out, want.reshape(n, no), strict=True)
        out = np.empty((n, no))
        assert lib.treecomp_predict(Z.ctypes.data, 64, 0, out.ctypes.data, 0) == 0
        for args in ((16, n, 0), (64, -1, 0), (64, n, 2)):  # bad dtype, negative rows, unknown flag
            assert lib.treecomp_predict(Z.ctypes.data, args[0], args[1], out.ctypes.data, args[2]) == -1
        assert lib.treecomp_predict(None, 64, n, out.ctypes.data, 0) == -1


_DRIVER = r"""
#include <stdio.h>
#include <stdlib.h>
#include "treecomp.h"
/* argv: n_rows, a file of n_rows x n_features values; prints RAW then TRANSFORM for float64
 * rows, then both for float32 rows, as hex floats */
int main(int argc, char **argv) {
  int n = atoi(argv[1]), nf = treecomp_n_features(), no = treecomp_n_outputs();
  if (argc != 3 || treecomp_out_dtype() != TREECOMP_F64) return 2;
  double *x = malloc(sizeof(double) * n * nf), *out = malloc(sizeof(double) * n * no);
  float *x32 = malloc(sizeof(float) * n * nf);
  FILE *fp = fopen(argv[2], "r");
  for (int i = 0; i < n * nf; ++i) { if (fscanf(fp, "%lf", &x[i]) != 1) return 3; x32[i] = (float)x[i]; }
  for (int dt = 0; dt < 2; ++dt)
    for (unsigned flags = 0; flags < 2; ++flags) {
      if (treecomp_predict(dt ? (const void *)x32 : (const void *)x, dt ? TREECOMP_F32 : TREECOMP_F64,
                           n, out, flags) != TREECOMP_OK) return 4;
      for (int i = 0; i < n * no; ++i) printf("%a\n", out[i]);
    }
  return 0;
}
"""


def test_a_c_program_gets_lightgbm_values(models, tmp_path):
    """A C caller compiled against treecomp.h alone and linked with each backend's .so."""
    from treecomp import toolchain
    from treecomp.cli import write_header
    if not toolchain.have_compiler():
        pytest.skip("no C compiler")
    m, X = models["multiclass"]
    b = _booster(m)
    Z = _rows(m, X, 35)
    np.savetxt(tmp_path / "x.txt", Z.ravel(), fmt="%.17g")
    (tmp_path / "driver.c").write_text(_DRIVER)
    write_header(str(tmp_path / "treecomp.h"))
    want = [b.predict(x, raw_score=True) if raw else b.predict(x)
            for x in (Z, Z.astype(np.float32)) for raw in (True, False)]
    for backend in ("arrays", "c", "llvm"):
        so = tmp_path / f"{backend}.so"
        treecomp.compile(m, backend=backend).save(so)
        exe = tmp_path / f"driver-{backend}"
        subprocess.run([*toolchain.find_compiler().argv, str(tmp_path / "driver.c"), "-I", str(tmp_path),
                        str(so), "-o", str(exe), f"-Wl,-rpath,{tmp_path}"], check=True)
        res = subprocess.run([str(exe), str(len(Z)), str(tmp_path / "x.txt")], capture_output=True,
                             text=True, timeout=60)
        assert res.returncode == 0, (backend, res.returncode, res.stderr)
        got = np.array([float.fromhex(v) for v in res.stdout.split()]).reshape(4, len(Z), 3)
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g, w, strict=True)


def test_cli_compiles_a_linear_model_file(models, tmp_path):
    from click.testing import CliRunner
    from treecomp.cli import main
    b, X = models["regression"]
    b.save_model(tmp_path / "m.txt")
    Z = _rows(b, X, 33)
    want = b.predict(Z)
    for out, extra in (("auto.so", []), ("c.so", ["--backend", "c"]), ("m.tc", []),
                       ("ir.so", ["--backend", "arrays", "--ir"]), ("ir.tc", ["--ir"])):
        res = CliRunner().invoke(main, ["compile", str(tmp_path / "m.txt"), "-o", str(tmp_path / out), *extra])
        assert res.exit_code == 0, res.output
        p = treecomp.load(tmp_path / out)
        np.testing.assert_array_equal(p.predict(Z), want, strict=True)
        # what `treecomp inspect` reads: the linear model's own shapes, the leaf kernel's backend
        meta = p.metadata
        assert meta["treecomp_version"] == treecomp.__version__ and meta["backend"] == p.backend
        assert meta["n_trees"] == b.num_trees() and meta["n_features"] == X.shape[1]
        res = CliRunner().invoke(main, ["inspect", str(tmp_path / out)])
        assert res.exit_code == 0 and f"written by: treecomp {treecomp.__version__}" in res.output, res.output
        if out.startswith("ir"):  # the model's IR travels: LightGBM's leaf indices
            np.testing.assert_array_equal(p.apply(Z), b.predict(Z, pred_leaf=True))
        else:
            with pytest.raises(UnsupportedModelError, match="carries no IR"):
                p.apply(Z)
    res = CliRunner().invoke(main, ["compile", str(tmp_path / "m.txt"), "-o", str(tmp_path / "e.so"),
                                    "--backend", "c", "--emit-source", str(tmp_path / "src")])
    assert res.exit_code == 2 and "sources are not emitted" in res.output, res.output


def test_pickles_and_predictor_save_round_trip(models, tmp_path):
    import pickle
    m, X = models["multiclass"]
    Z = _rows(m, X, 34)
    p = treecomp.compile(m, backend="arrays", ir=True)
    p.save(tmp_path / "m.tc")
    q = treecomp.load(tmp_path / "m.tc")
    r = pickle.loads(pickle.dumps(q))  # a loaded .tc pickles as its file
    for pred in (q, r):
        np.testing.assert_array_equal(pred.predict_proba(Z), m.predict_proba(Z), strict=True)
        np.testing.assert_array_equal(pred.predict(Z), m.predict(Z), strict=True)
    np.testing.assert_array_equal(r.apply(Z), m.predict(Z, pred_leaf=True))
    q.save(tmp_path / "again.tc")  # the same file
    assert (tmp_path / "again.tc").read_bytes() == (tmp_path / "m.tc").read_bytes()
    q.save(tmp_path / "from_tc.so")  # its tables and section in a library, the IR with them
    s = treecomp.load(tmp_path / "from_tc.so")
    assert s.backend == "arrays" and s._kernel.kind == "so"
    np.testing.assert_array_equal(s.predict_proba(Z), m.predict_proba(Z), strict=True)
    np.testing.assert_array_equal(s.apply(Z), m.predict(Z, pred_leaf=True))
    # dask keys a Predictor by its artifact's bytes: the .tc, or the .so that save writes
    assert p._kernel.to_bytes() == (tmp_path / "m.tc").read_bytes()
    c = treecomp.compile(m, backend="c")
    c.save(tmp_path / "c.so")
    assert c._kernel.to_bytes() == (tmp_path / "c.so").read_bytes()


# -- corrupt linear sections ----------------------------------------------------------------------
def _parts(data: bytes):
    hdr, body, _ = arrays_format.split_file(data)
    return hdr, body


def _join(hdr, body, version=arrays_format.FORMAT_VERSION) -> bytes:
    # format 3 sealed again (an edited file's digest matches): the section's own checks refuse it
    return arrays_format.join_file(hdr, body, version)


def _poke(name, index, value):
    def edit(hdr, body):
        d = next(d for d in hdr["linear"]["arrays"] if d["name"] == name)
        dt = np.dtype(d["dtype"])
        off = d["offset"] + index * dt.itemsize
        body[off:off + dt.itemsize] = np.array([value], dt).tobytes()
    return edit


def _header(fn):
    def edit(hdr, body):
        fn(hdr["linear"])
    return edit


def _head_field(key, value):
    def edit(hdr, body):
        head = json.loads(hdr["linear"]["head"])
        head[key] = value
        hdr["linear"]["head"] = json.dumps(head)
    return edit


CORRUPT = {
    "feature outside the model": (_poke("feat", 0, 5), "reads a feature"),
    "negative feature": (_poke("feat", 1, -1), "reads a feature"),
    "output column outside": (_poke("tree_out", 0, 3), "output column"),
    "ptr falls": (_poke("ptr", 3, 10 ** 6), "ptr must rise"),
    "node0 falls": (_poke("node0", 1, 0), "node0 must rise"),
    "NaN coefficient": (_poke("coeff", 0, np.nan), "non-finite"),
    "inf base": (_poke("base", 0, np.inf), "non-finite"),
    "missing array": (_header(lambda lin: lin["arrays"].pop(0)), "expected"),
    "unknown array": (_header(lambda lin: lin["arrays"][0].update(name="bogus")), "unexpected"),
    "array twice": (_header(lambda lin: lin["arrays"].append(dict(lin["arrays"][0]))), "unexpected"),
    "wrong dtype": (_header(lambda lin: lin["arrays"][-1].update(dtype="<i8")), "coeff is int64"),
    "past the end": (_header(lambda lin: lin["arrays"][0].update(length=10 ** 9)), "outside the file"),
    "misaligned": (_header(lambda lin: lin["arrays"][0].update(offset=lin["arrays"][0]["offset"] + 8)),
                   "outside the file"),
    "average not a bool": (_header(lambda lin: lin.update(average=1)), "true or false"),
    "head of another shape": (_head_field("n_trees", 3), "disagree"),
    "unreadable head": (_header(lambda lin: lin.update(head="{")), "descriptor"),
}


@pytest.fixture(scope="module")
def linear_tc(models):
    return treecomp.compile(models["multiclass"][0], backend="arrays")._kernel.to_bytes()


@pytest.mark.parametrize("case", sorted(CORRUPT))
def test_corrupt_linear_section_is_refused(linear_tc, case):
    edit, match = CORRUPT[case]
    hdr, body = _parts(linear_tc)
    edit(hdr, body)
    with pytest.raises(ArtifactError, match=match):
        arrays.load_bytes(_join(hdr, body))


def test_truncated_and_mislabelled_linear_files_are_refused(models, linear_tc):
    arrays.load_bytes(_join(*_parts(linear_tc)))  # the helpers keep a good file good
    for cut in (len(linear_tc) - 1, len(linear_tc) - 64, len(linear_tc) // 2, 100):
        with pytest.raises(ArtifactError):
            arrays.load_bytes(linear_tc[:cut])
    hdr, body = _parts(linear_tc)
    # the older formats' rule (1 without a linear section, 2 with one) still holds for them
    with pytest.raises(ArtifactError, match="has no linear section"):  # read as leaf ids: refused
        arrays.load_bytes(_join(hdr, body, 1))
    del hdr["linear"]
    with pytest.raises(ArtifactError, match="needs linear section"):
        arrays.load_bytes(_join(hdr, body, arrays_format.LINEAR_FORMAT_VERSION))
    # leaf tables that reach a node the section does not hold: refused when the walk finds it
    k = linear.loaded_kernel(arrays.load_bytes(linear_tc))
    walk = k.leaves.run

    def far(X, out, flags):
        walk(X, out, flags)
        out[3, 1] = 1e6
    k.leaves = SimpleNamespace(run=far)
    with pytest.raises(ArtifactError, match="outside its tree"):
        treecomp.Predictor(k).predict_raw(models["multiclass"][1][:20])


def test_damaged_linear_libraries_are_refused(models, tmp_path):
    m, _ = models["binary"]
    treecomp.compile(m, backend="c").save(tmp_path / "m.so")
    data = (tmp_path / "m.so").read_bytes()
    (tmp_path / "cut.so").write_bytes(data[:len(data) // 2])
    (tmp_path / "junk.so").write_bytes(data[:4] + bytes(200))
    for name in ("cut.so", "junk.so"):
        with pytest.raises(ArtifactError):
            treecomp.load(tmp_path / name)


def test_unsupported_linear_artifacts_say_why(models, tmp_path):
    from treecomp import linear
    f = treecomp.parse(models["regression"][0])
    with pytest.raises(UnsupportedModelError, match="float64 leaves"):
        linear.artifact_check(f.replace(accumulate_dtype="float32"))
    for name in ("arrays", "c", "llvm"):  # a backend alone would ignore the linear leaves
        with pytest.raises(UnsupportedModelError, match="linear_tree"):
            treecomp.backends.get(name).build(f)
