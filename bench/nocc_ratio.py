"""The compiler-free fast path against the normal install, side by side in one process.

What it measures: batch prediction (raw margins, one thread, ns/row) of the arrays backend's
normal kernel (the prebuilt C kernel, isa "auto": AVX-512 / AVX2 / scalar as the CPU has) and of
the compiler-free llvm-vec kernel (the byte walks as LLVM vector code, what ``backend="auto"``
runs on a host with neither a C compiler nor a prebuilt kernel), on the benchmark's 500-tree
XGBoost binary and LightGBM binary models (treecomp.benchmark.cases, the full sizes), the same
rows for both. Calls alternate (normal, llvm-vec, normal, ...) so both see the same machine
load; the median of the rounds is reported, and their ratio. Also the first compile of the
llvm-vec kernel in a fresh process with an empty cache (a subprocess per case: JIT of the
kernel + the model's tables), and from the object cache.

    python -m bench.nocc_ratio [--rows 30000] [--rounds 11] [--cases xgb-binary,lgbm-binary]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time

import numpy as np


def _first_compile(case: str, cache: str) -> float:
    code = (
        "import time, sys\n"
        "t0 = time.perf_counter()\n"
        "import treecomp\n"
        "from treecomp.benchmark import cases as C\n"
        f"c = C.build_case({case!r})\n"
        "t1 = time.perf_counter()\n"
        "p = treecomp.compile(c.model, backend='arrays', isa='llvm-vec')\n"
        "p.predict_raw(c.X[:10])\n"
        "print(time.perf_counter() - t1)\n")
    env = dict(os.environ, TREECOMP_CACHE_DIR=cache)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         check=True)
    return float(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=30_000)
    ap.add_argument("--rounds", type=int, default=11)
    ap.add_argument("--cases", default="xgb-binary,lgbm-binary")
    ap.add_argument("--no-compile-time", action="store_true")
    args = ap.parse_args(argv)
    import treecomp
    from treecomp.backends import arrays
    from treecomp.benchmark import cases as C
    from treecomp.benchmark.runner import machine
    report = {"host": machine(), "date": time.strftime("%Y-%m-%d"), "rows": args.rows,
              "rounds": args.rounds, "cases": {}}
    for name in args.cases.split(","):
        case = C.build_case(name, n_rows=args.rows)
        X = case.X
        normal = treecomp.compile(case.model, backend="arrays")
        free = treecomp.compile(case.model, backend="arrays", isa="llvm-vec")
        kn, kf = normal._kernel, free._kernel
        outs = {}
        times = {"normal": [], "llvm-vec": []}
        for k, label in ((kn, "normal"), (kf, "llvm-vec")):
            out = np.empty((len(X), k.head.n_outputs), k.tables.acc_dtype)
            k.run(X, out)  # warm-up
            outs[label] = out
        assert np.array_equal(outs["normal"], outs["llvm-vec"]), name
        for r in range(args.rounds):
            order = ((kn, "normal"), (kf, "llvm-vec")) if r % 2 == 0 else ((kf, "llvm-vec"), (kn, "normal"))
            for k, label in order:
                t0 = time.perf_counter()
                k.run(X, outs[label])
                times[label].append((time.perf_counter() - t0) / len(X) * 1e9)
        med = {k: float(np.median(v)) for k, v in times.items()}
        row = {"normal_isa": kn.isa, "normal_ns_row": round(med["normal"], 1),
               "llvm_vec_ns_row": round(med["llvm-vec"], 1),
               "speed_ratio": round(med["normal"] / med["llvm-vec"], 3),
               "vec_shape": list(kf._vec.shape) if kf._vec is not None else None}
        if not args.no_compile_time:
            with tempfile.TemporaryDirectory() as cache:
                row["first_compile_s"] = round(_first_compile(name, cache), 2)
                row["cached_compile_s"] = round(_first_compile(name, cache), 2)
        report["cases"][name] = row
        print(name, json.dumps(row), flush=True)
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
