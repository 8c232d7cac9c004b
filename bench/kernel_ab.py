"""Two arrays kernels side by side in one process, on the same tables and rows.

    python -m bench.kernel_ab --old OLD.so [--new NEW.so] [--cases xgb-binary,...] [--rows N]
        [--rounds R] [--isa avx512] [--shapes] [--calls C]

OLD.so / NEW.so: arrays kernel libraries (treecomp/_arrays_kernel*.so of two checkouts; the
default NEW is the one this treecomp loads). Each case's model is compiled once with the arrays
backend (this checkout's tables and derived tables: the tc_tables struct only grows at its end,
so an older kernel reads the fields it knows); then the two kernels' tc_arrays_predict run the
same raw-margin call on the same rows, alternating, `rounds` times. Reported: medians of ns/row
(wall and calling-thread CPU time: the machine is shared, and thread time leaves out the time
the thread was descheduled), the median of the per-round ratios old / new, whether the outputs
are the same bytes, and cycles at the core's measured clock (a dependent add chain timed in the
same process: the guest has no cycle counters; see core_ghz).

--shapes adds the issue's wide and deep shapes: XGBoost binary, 100 trees of depth 8 over
13 / 28 / 90 / 968 / 2,000 features (90: regression), trained here on synthetic data (cached in
the benchmark's cache directory).
"""

from __future__ import annotations

import argparse
import ctypes
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

_PROBE = r"""
#include <stdint.h>
#include <time.h>
/* n dependent adds (one cycle each on any x86 core of this century): ns for n of them */
double tc_probe(int64_t n) {
  struct timespec a, b;
  uint64_t x = 0;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &a);
  for (int64_t i = 0; i < n; i += 8)
    __asm__ volatile("add $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\t"
                     "add $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\tadd $1, %0" : "+r"(x));
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &b);
  return (double)(b.tv_sec - a.tv_sec) * 1e9 + (double)(b.tv_nsec - a.tv_nsec);
}
"""


def core_ghz() -> float:
    """The core's clock while busy (GHz): 80M dependent adds, median of 5, thread CPU time."""
    d = tempfile.mkdtemp()
    src, so = os.path.join(d, "probe.c"), os.path.join(d, "probe.so")
    with open(src, "w") as f:
        f.write(_PROBE)
    subprocess.check_call(["cc", "-O1", "-shared", "-fPIC", "-o", so, src])
    lib = ctypes.CDLL(so)
    lib.tc_probe.restype, lib.tc_probe.argtypes = ctypes.c_double, [ctypes.c_int64]
    n = 80_000_000
    lib.tc_probe(n)
    return n / statistics.median(lib.tc_probe(n) for _ in range(5))


def shape_model(n_features: int, seed: int = 0, regression: bool = False, n_trees: int = 100,
                depth: int = 8):
    """An XGBoost model of n_trees trees of depth `depth` over n_features features (binary, or
    regression), and 20,000 test rows; cached in the benchmark's cache directory."""
    import pickle
    import xgboost as xgb
    from treecomp.benchmark.cases import CACHE_DIR, make_data
    task = "regression" if regression else "binary"
    path = CACHE_DIR / f"shape-{task}-{n_trees}x{depth}-{n_features}f-{xgb.__version__}.pkl"
    Xte, _ = make_data(20_000, n_features, 2, task)
    if path.is_file():
        with open(path, "rb") as f:
            return pickle.load(f), Xte
    X, y = make_data(20_000, n_features, 1, task)
    kw = dict(n_estimators=n_trees, max_depth=depth, tree_method="hist", learning_rate=0.1,
              n_jobs=os.cpu_count() or 1, random_state=0)
    model = (xgb.XGBRegressor if regression else xgb.XGBClassifier)(**kw).fit(X, y)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as f:
        pickle.dump(model, f)
    return model, Xte


def load_lib(path: str):
    lib = ctypes.CDLL(os.path.abspath(path))
    lib.tc_arrays_predict.restype = ctypes.c_int32
    lib.tc_arrays_predict.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int32,
                                      ctypes.c_int64, ctypes.c_void_p, ctypes.c_int32, ctypes.c_int32]
    return lib


def ab(kernel, X: np.ndarray, libs: list, isa: int, rounds: int, calls: int = 1,
       rows: int = 0) -> dict:
    """Time each lib's raw-margin call on X, alternating; outputs compared byte for byte.
    calls > 1: each round times `calls` calls of `rows` rows each, cycling through X's
    consecutive windows of `rows` rows (small batches: one call is too short to time alone)."""
    rows = rows if calls > 1 and rows > 0 else len(X)
    wins = [np.ascontiguousarray(X[i:i + rows]) for i in range(0, len(X) - rows + 1, rows)]
    outs = [[np.empty((rows, kernel.head.n_outputs), kernel.tables.acc_dtype) for _ in wins]
            for _ in libs]
    sref = ctypes.addressof(kernel._struct)
    bits = X.dtype.itemsize * 8
    # the addresses once (numpy's .ctypes costs microseconds a call)
    xp = [w.ctypes.data for w in wins]
    op = [[o.ctypes.data for o in oi] for oi in outs]

    def call(i, w):
        rc = libs[i].tc_arrays_predict(sref, xp[w], bits, rows, op[i][w], isa, 0)
        if rc:
            raise RuntimeError(f"kernel {i}: rc {rc}")
    for i in range(len(libs)):
        for w in range(len(wins)):
            call(i, w)
    same = all(np.array_equal(outs[0][w].view(np.uint8), o[w].view(np.uint8))
               for o in outs[1:] for w in range(len(wins)))
    wall = [[] for _ in libs]
    cpu = [[] for _ in libs]
    nw = len(wins)
    for r in range(rounds):
        order = range(len(libs)) if r % 2 == 0 else reversed(range(len(libs)))
        for i in order:
            t0, c0 = time.perf_counter_ns(), time.thread_time_ns()
            for c in range(calls):
                call(i, c % nw)
            c1, t1 = time.thread_time_ns(), time.perf_counter_ns()
            wall[i].append((t1 - t0) / (rows * calls))
            cpu[i].append((c1 - c0) / (rows * calls))
    ratio = [statistics.median(a / b for a, b in zip(cpu[0], cpu[i])) for i in range(len(libs))]
    return {"same": same, "wall": [statistics.median(w) for w in wall],
            "cpu": [statistics.median(c) for c in cpu], "ratio": ratio}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--old", required=True)
    ap.add_argument("--new", default=None)
    ap.add_argument("--cases", default="xgb-binary,xgb-multiclass,xgb-nan-regression,rf-deep,"
                    "gb-regressor,gb-classifier,et-multiclass,hgb-nan-cat,lgbm-binary")
    ap.add_argument("--shapes", default="", help="comma-separated feature counts of the "
                    "100 x depth-8 XGBoost shapes (e.g. 13,28,90,968,2000; 90 is regression)")
    ap.add_argument("--rows", type=int, default=20_000)
    ap.add_argument("--rounds", type=int, default=11)
    ap.add_argument("--isa", default="avx512")
    ap.add_argument("--calls", type=int, default=1,
                    help="calls a round, each of --rows rows, cycling through 64 windows of the "
                    "case's rows (small batches; ctypes' ~1 us a call included in both)")
    args = ap.parse_args(argv)
    import treecomp
    from treecomp.backends.arrays import native
    from treecomp.backends.arrays.kernel import build
    from treecomp.benchmark.cases import build_case
    new = args.new or str(native.native_library()._name)
    libs = [load_lib(args.old), load_lib(new)]
    isa = native.NATIVE_ISAS.index(args.isa)
    ghz = core_ghz()
    print(f"core clock {ghz:.2f} GHz (dependent adds); isa {args.isa}; {args.rows} rows, "
          f"{args.rounds} rounds; old {args.old}, new {new}", flush=True)
    print(f"{'case':28s} {'old ns/row':>10s} {'new ns/row':>10s} {'old/new':>8s} "
          f"{'new cyc/row':>11s} {'wall old':>9s} {'wall new':>9s} same")
    todo = [(c, None) for c in args.cases.split(",") if c]
    todo += [(f"shape-{n}f", int(n)) for n in args.shapes.split(",") if n]
    for name, nf in todo:
        if nf is None:
            case = build_case(name)
            model, X = case.model, case.X
        else:
            model, X = shape_model(nf, regression=nf == 90)
        forest = treecomp.parse(model)
        X = np.ascontiguousarray(X[:args.rows * (64 if args.calls > 1 else 1)])
        k = build(forest, isa=args.isa)
        r = ab(k, X, libs, isa, args.rounds, args.calls, args.rows)
        print(f"{name:28s} {r['cpu'][0]:10.1f} {r['cpu'][1]:10.1f} {r['ratio'][1]:8.3f} "
              f"{r['cpu'][1] * ghz:11.0f} {r['wall'][0]:9.1f} {r['wall'][1]:9.1f} {r['same']}",
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
