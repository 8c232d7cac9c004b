"""The aarch64 lane's own checks, run by the emulated arm64 Python (tests/aarch64/suite.py starts
them under QEMU with the CPU model in QEMU_CPU; docs/aarch64.md). Everything here runs on the
emulated host: treecomp as setup.py built it there, and the libraries' aarch64 wheels there as
the oracle, in this same process.

- the host: aarch64; the package's own kernel and small-batch entry are the ones in use; the
  CPU model's hardware capabilities are what QEMU_CPU promises (`max`: NEON, SVE, SVE2;
  `cortex-a72`: NEON only; SVE's vector length), and `isa="auto"` takes the best native path
  offered (sve where SVE's vectors hold 32 bytes or more, else neon);
- a seeded zoo (scikit-learn random forest, gradient boosting and HistGradientBoosting with
  categories, XGBoost and LightGBM binary / multiclass / regression, NaN in the rows), trained
  here, predicted bit for bit for 1, 7 and 2,000 rows (threshold-adjacent edge rows among them)
  by the c and llvm backends and by the arrays backend on every instruction set treecomp offers
  here (supported_isas(): scalar, llvm, numpy today; each ARM path as it is added), and `auto`
  (the llvm backend on four of the models: its compile is emulated LLVM);
- every model file in shared/realmodels (tests/test_realfiles.py's rows), full batches and
  single rows, on every native path;
- `treecomp compile -o model.so` (arrays, c, llvm) in a subprocess of this Python, which runs
  emulated too, the library called through ctypes.
"""

from __future__ import annotations

import ctypes
import functools
import json
import os
import platform
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import treecomp
from treecomp import native
from treecomp.backends import arrays
from tests.edge import edge_rows
from tests.randforest import random_forest, random_rows

CPU = os.environ.get("QEMU_CPU", "")
HAVE = arrays.supported_isas()
NATIVE = [i for i in HAVE if i not in arrays.kernel.FREE_ISAS]
ROWS = (1, 7, 2000)
#: what the lane writes for the host's report (suite.py reads it)
REPORT = os.environ.get("TREECOMP_AARCH64_REPORT")

# AT_HWCAP / AT_HWCAP2 bits (Linux arch/arm64/include/uapi/asm/hwcap.h)
AT_HWCAP, AT_HWCAP2 = 16, 26
HWCAP_ASIMD, HWCAP_SVE, HWCAP2_SVE2 = 1 << 1, 1 << 22, 1 << 1
#: what each CPU model the lane uses must report
_SVE = {"neon": True, "sve": True, "sve2": True}
EXPECTED_HWCAPS = {"max": _SVE, "max,sve128=on": _SVE, "max,sve256=on": _SVE,
                   "cortex-a72": {"neon": True, "sve": False, "sve2": False}}
#: SVE's vector length in bytes on each CPU model (prctl PR_SVE_GET_VL; 0: no SVE): QEMU's `max`
#: runs 512 bits in user mode
EXPECTED_SVE_BYTES = {"max": 64, "max,sve128=on": 16, "max,sve256=on": 32, "cortex-a72": 0}
#: the arrays kernel's native paths each CPU model must offer (tc_arrays_isa_mask: getauxval's
#: HWCAP_ASIMD and HWCAP_SVE), and the one isa="auto" must pick there (tc_arrays_auto_mask: sve
#: where its vectors hold 32 bytes or more, its heap walk's width; neon at 128 bits)
EXPECTED_PATHS = {"max": (["scalar", "neon", "sve"], "sve"),
                  "max,sve128=on": (["scalar", "neon", "sve"], "neon"),
                  "max,sve256=on": (["scalar", "neon", "sve"], "sve"),
                  "cortex-a72": (["scalar", "neon"], "neon")}


def hwcaps() -> dict[str, bool]:
    libc = ctypes.CDLL(None)
    libc.getauxval.restype = ctypes.c_ulong
    libc.getauxval.argtypes = [ctypes.c_ulong]
    hw, hw2 = libc.getauxval(AT_HWCAP), libc.getauxval(AT_HWCAP2)
    return {"neon": bool(hw & HWCAP_ASIMD), "sve": bool(hw & HWCAP_SVE), "sve2": bool(hw2 & HWCAP2_SVE2)}


def sve_bytes() -> int:
    """SVE's vector length in bytes on this thread (prctl PR_SVE_GET_VL), 0 without SVE."""
    libc = ctypes.CDLL(None)
    libc.prctl.restype = ctypes.c_int
    vl = libc.prctl(51, 0, 0, 0, 0)  # PR_SVE_GET_VL: the length in bits 0-15, flags above
    return vl & 0xFFFF if vl > 0 else 0


def test_emulated_host():
    assert platform.machine() == "aarch64"
    caps = hwcaps()
    if REPORT:
        Path(REPORT).write_text(json.dumps({"cpu": CPU, "hwcaps": caps, "supported_isas": HAVE,
                                            "auto": arrays.resolve_isa("auto"),
                                            "sve_bytes": sve_bytes(),
                                            "executable": sys.executable}))
    # sys.executable is the lane's wrapper script (the host execs it: a child Python is emulated)
    with open(sys.executable, "rb") as f:
        assert f.read(2) == b"#!", sys.executable
    assert CPU in EXPECTED_HWCAPS, f"QEMU_CPU={CPU!r}: not one of the lane's CPU models"
    assert caps == EXPECTED_HWCAPS[CPU]
    assert sve_bytes() == EXPECTED_SVE_BYTES[CPU], (sve_bytes(), CPU)
    # the package's own native parts, built by setup.py on this host, are the ones in use
    arrays.native.native_library()
    assert arrays.native.KERNEL_ORIGIN == "prebuilt", arrays.native.PREBUILT_ERROR
    f = random_forest(0)
    treecomp.compile(f, backend="arrays").predict(random_rows(f, 1))  # loads the entry
    assert native.ENTRY_ORIGIN == "prebuilt", (native.ENTRY_PREBUILT_ERROR, native.ENTRY_ERROR)
    assert NATIVE and NATIVE[0] == "scalar" and "llvm" in HAVE
    # the ARM vector paths the CPU has, and auto's pick among them (each passes its self-test)
    paths, best = EXPECTED_PATHS[CPU]
    assert NATIVE == paths, (NATIVE, paths)
    assert arrays.native.auto_isas() == [i for i in paths if i != "sve" or best == "sve"]
    assert arrays.resolve_isa("auto") == best


# -- the zoo --------------------------------------------------------------------------------------
def _data(seed: int, n: int = 800, d: int = 8, nan: float = 0.08, n_cls: int = 0,
          cats: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(training rows, their target, 1,700 more rows to predict): rounded (many ties on
    thresholds), NaN at rate `nan`, column 0 integer categories 0..cats-1 when `cats`; the target
    a regression one or `n_cls` classes."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n + 1700, d)).round(2)
    if cats:
        X[:, 0] = rng.integers(0, cats, len(X))
    Z = np.nan_to_num(X)
    y = Z[:, 1] * Z[:, 2] + np.sin(2 * Z[:, 3]) + (Z[:, 0] % 3 if cats else 0) \
        + rng.normal(scale=0.2, size=len(X))
    X[rng.random(X.shape) < nan] = np.nan
    if n_cls:
        y = np.digitize(y, np.quantile(y, np.linspace(0, 1, n_cls + 1)[1:-1]))
    return X[:n], y[:n], X[n:]


def _sklearn(kind: str):
    from sklearn.ensemble import (GradientBoostingRegressor, HistGradientBoostingClassifier,
                                  RandomForestClassifier)
    if kind == "rf":
        X, y, T = _data(1, n_cls=2)
        m = RandomForestClassifier(n_estimators=6, max_depth=8, random_state=0, n_jobs=1).fit(X, y)
        return m, T, {"predict": m.predict, "predict_proba": m.predict_proba}
    if kind == "gb":
        X, y, T = _data(2, nan=0.0)
        m = GradientBoostingRegressor(n_estimators=20, max_depth=3, random_state=0).fit(X, y)
        return m, T, {"predict": m.predict}
    X, y, T = _data(3, n_cls=3, cats=6)
    m = HistGradientBoostingClassifier(max_iter=8, max_leaf_nodes=15, categorical_features=[0],
                                       random_state=0).fit(X, y)
    return m, T, {"predict": m.predict, "predict_proba": m.predict_proba,
                  "decision_function": m.decision_function}


def _xgboost(kind: str):
    import xgboost as xgb
    if kind == "binary":
        X, y, T = _data(4, n_cls=2)
        b = xgb.train({"objective": "binary:logistic", "max_depth": 5, "nthread": 1, "seed": 0},
                      xgb.DMatrix(X, label=y, nthread=1), 15)
        dm = lambda Z: xgb.DMatrix(Z, nthread=1)  # noqa: E731  (it refuses infinities)
        return b, T, {"predict": lambda Z: b.predict(dm(Z)),
                      "decision_function": lambda Z: b.predict(dm(Z), output_margin=True)}
    X, y, T = _data(5, n_cls=3)
    m = xgb.XGBClassifier(n_estimators=6, max_depth=4, n_jobs=1, random_state=0).fit(X, y)
    return m, T, {"predict": m.predict, "predict_proba": m.predict_proba,
                  "decision_function": lambda Z: m.predict(Z, output_margin=True)}


def _lightgbm(kind: str):
    import lightgbm as lgb
    if kind == "binary":
        X, y, T = _data(6, n_cls=2, cats=8)
        b = lgb.train({"objective": "binary", "num_leaves": 15, "verbose": -1, "num_threads": 1,
                       "seed": 0}, lgb.Dataset(X, y, categorical_feature=[0]), 15)
        return b, T, {"predict": lambda Z: b.predict(Z, num_threads=1),
                      "decision_function": lambda Z: b.predict(Z, raw_score=True, num_threads=1)}
    if kind == "multiclass":
        X, y, T = _data(7, n_cls=3)
        m = lgb.LGBMClassifier(n_estimators=6, num_leaves=15, n_jobs=1, verbose=-1,
                               random_state=0).fit(X, y)
        return m, T, {"predict": m.predict, "predict_proba": m.predict_proba}
    X, y, T = _data(8)
    m = lgb.LGBMRegressor(n_estimators=15, num_leaves=31, n_jobs=1, verbose=-1, random_state=0).fit(X, y)
    return m, T, {"predict": m.predict}


#: name: (factory, its argument, whether the library refuses infinities in the rows)
ZOO = {"sklearn-rf": (_sklearn, "rf", True), "sklearn-gb": (_sklearn, "gb", True),
       "sklearn-hgb": (_sklearn, "hgb", True), "xgboost-binary": (_xgboost, "binary", True),
       "xgboost-multiclass": (_xgboost, "multiclass", False),
       "lightgbm-binary": (_lightgbm, "binary", False),
       "lightgbm-multiclass": (_lightgbm, "multiclass", False),
       "lightgbm-regression": (_lightgbm, "regression", False)}
#: the llvm backend and the arrays backend's LLVM vector code (isa "llvm-vec") on one model of
#: each library and kind (their compile is emulated LLVM: ~1-8 s a model here); every other
#: backend and path on every model
LLVM_ZOO = ("sklearn-gb", "xgboost-binary", "xgboost-multiclass", "lightgbm-binary")
#: (backend, options): the arrays backend on each path treecomp offers here and on auto, c, llvm
BACKENDS = [("arrays", {"isa": i}) for i in HAVE] + [("arrays", {}), ("c", {}), ("llvm", {})]
#: auto (host check: the best path, forced above on every model) on the llvm backend's models
AUTO_ZOO = LLVM_ZOO
#: the float node walk (layout "compact") is the portable C in every unit: on the portable path
#: and on SVE (a unit built with target("+sve"), which the compiler may vectorise differently);
#: the NEON unit's is built with the portable unit's flags
COMPACT_ISAS = ("scalar", "sve")


@functools.cache
def _case(name: str):
    """(model, [1, 7 and 2,000 rows], the library's outputs on each: {output: array})."""
    make, kind, finite = ZOO[name]
    model, T, calls = make(kind)
    f = treecomp.parse(model)
    Z = np.vstack([T, edge_rows(f, T, n=ROWS[-1] - len(T), nan=f.allow_nan, seed=3)])
    if finite:  # where the library refuses infinities: the largest floats instead
        Z[np.isinf(Z)] = np.sign(Z[np.isinf(Z)]) * np.finfo(np.float32).max
    batches = [Z[:1], Z[1:1 + ROWS[1]], Z]
    assert [len(B) for B in batches] == list(ROWS)
    want = [{k: call(B) for k, call in calls.items()} for B in batches]
    return model, batches, want


def _bid(b) -> str:
    return b[0] + (f"-{b[1]['isa']}" if b[1] else ("-auto" if b[0] == "arrays" else ""))


@pytest.mark.parametrize("name,backend", [(n, b) for n in ZOO for b in BACKENDS
                                          if (b[0] != "llvm" and b[1].get("isa") != "llvm-vec"
                                              or n in LLVM_ZOO)
                                          and (b != ("arrays", {}) or n in AUTO_ZOO)],
                         ids=lambda v: _bid(v) if isinstance(v, tuple) else v)
def test_zoo_bit_exact(name, backend):
    """On a native path the layout `auto` picks (a byte walk or interval sweep, mostly), and
    on COMPACT_ISAS the float node walk (layout "compact") too."""
    model, batches, want = _case(name)
    layouts = ["auto", "compact"] if backend[1].get("isa") in NATIVE and \
        (backend[1]["isa"] in COMPACT_ISAS or NATIVE == ["scalar"]) else ["auto"]
    failures = []
    for layout in layouts:
        opts = {**backend[1], "layout": layout} if backend[0] == "arrays" else {}
        pred = treecomp.compile(model, backend=backend[0], **opts)
        if backend[1]:
            assert pred._kernel.isa == backend[1]["isa"]
        for B, outs in zip(batches, want):
            for key, w in outs.items():
                got = getattr(pred, key)(B)
                try:
                    np.testing.assert_array_equal(got, w, strict=True)
                except AssertionError as exc:
                    failures.append(f"{key} on {len(B)} rows, layout {layout}: {exc}")
    assert not failures, "\n".join(failures)


# -- the real model files -------------------------------------------------------------------------
def _realfiles():
    os.environ.setdefault("TREECOMP_REALMODELS", "")
    if not os.environ["TREECOMP_REALMODELS"] or not Path(os.environ["TREECOMP_REALMODELS"]).is_dir():
        return None
    from tests import test_realfiles
    return test_realfiles


RF = _realfiles()


@pytest.mark.skipif(RF is None, reason="no shared/realmodels (TREECOMP_REALMODELS)")
@pytest.mark.parametrize("rel", RF.FILES if RF else [])
def test_real_file_every_native_path(rel):
    """tests/test_realfiles.py's checks on each native path (the file parsed and the library
    run once): full batches (raw margins and predict) and 40 single rows (raw margins: the
    few-row walks), bit for bit against the library here."""
    if rel in RF.REFUSED:
        exc, match = RF.REFUSED[rel]
        with pytest.raises(exc, match=match):
            treecomp.parse(RF.ROOT / rel)
        return
    forest = treecomp.parse(RF.ROOT / rel)
    X = RF.threshold_rows(forest, seed=len(rel), n_max=RF.MAX_ROWS.get(rel, 2000),
                          float32=forest.input_dtype == "float32")
    want_raw, want = RF.library_outputs(rel, X)
    for isa in NATIVE:
        pred = treecomp.compile(forest, backend="arrays", isa=isa)
        assert pred._kernel.isa == isa
        np.testing.assert_array_equal(pred.decision_function(X), want_raw, strict=True, err_msg=isa)
        np.testing.assert_array_equal(pred.predict(X), want, strict=True, err_msg=isa)
        for i in range(40):
            np.testing.assert_array_equal(pred.decision_function(X[i:i + 1]), want_raw[i:i + 1],
                                          strict=True, err_msg=f"{isa}, row {i}")


# -- treecomp compile -o model.so, in a subprocess (emulated too) ---------------------------------
EM_AARCH64 = 183


@pytest.mark.parametrize("name,backend", [("xgboost-binary", "arrays"), ("xgboost-binary", "c"),
                                          ("xgboost-binary", "llvm"), ("lightgbm-binary", "arrays")])
def test_compile_so_in_a_subprocess(name, backend, tmp_path):
    model, batches, want = _case(name)
    src = tmp_path / ("model.json" if "xgboost" in name else "model.txt")
    model.save_model(str(src))
    out = tmp_path / "model.so"
    # sys.executable is the lane's wrapper: the child Python runs under QEMU with this CPU model
    res = subprocess.run([sys.executable, "-m", "treecomp.cli", "compile", str(src), "-o", str(out),
                          "--backend", backend], capture_output=True, text=True, timeout=900)
    assert res.returncode == 0, res.stderr + res.stdout
    data = out.read_bytes()
    head = data[:20]
    assert head[:4] == b"\x7fELF" and int.from_bytes(head[18:20], "little") == EM_AARCH64
    if backend == "arrays":  # the kernel archive linked in carries the ARM vector paths
        for isa in ("neon", "sve"):
            assert f"run_f32_f32_{isa}".encode() in data, f"no {isa} path in the .so"
    lib = ctypes.CDLL(str(out))
    lib.treecomp_predict.restype = ctypes.c_int32
    lib.treecomp_predict.argtypes = [ctypes.c_void_p, ctypes.c_int32, ctypes.c_int64,
                                     ctypes.c_void_p, ctypes.c_uint32]
    lib.treecomp_n_outputs.restype = lib.treecomp_out_dtype.restype = ctypes.c_int32
    no, dt = lib.treecomp_n_outputs(), {32: np.float32, 64: np.float64}[lib.treecomp_out_dtype()]
    p = treecomp.load(out)  # and through treecomp's loader, the library's outputs
    for B, outs in zip(batches, want):
        B = np.ascontiguousarray(B, np.float64)
        raw = np.empty((len(B), no), dt)
        assert lib.treecomp_predict(B.ctypes.data, 64, len(B), raw.ctypes.data, 0) == 0
        if "decision_function" in outs:
            np.testing.assert_array_equal(raw.reshape(outs["decision_function"].shape),
                                          outs["decision_function"], strict=True)
        for key, w in outs.items():
            np.testing.assert_array_equal(getattr(p, key)(B), w, strict=True)
