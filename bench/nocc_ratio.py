"""The compiler-free fast path against the normal install, side by side in one process.

What it measures: batch prediction (raw margins, one thread, ns/row) of the arrays backend's
normal kernel (the prebuilt C kernel, isa "auto": AVX-512 / AVX2 / scalar as the CPU has) and of
the compiler-free llvm-vec kernel (the byte walks as LLVM vector code, what ``backend="auto"``
runs on a host with neither a C compiler nor a prebuilt kernel), on the benchmark's 500-tree
XGBoost binary and LightGBM binary models (treecomp.benchmark.cases, the full sizes), the same
rows for both. Calls alternate (normal, llvm-vec, normal, ...) so both see the same machine
load; the median of the rounds is reported, and their ratio. Also the first compile of the
llvm-vec kernel in a fresh process with an empty cache (a subprocess per case: JIT of the
kernel for the model's dtypes + the model's tables + the self-test auto runs first), and from
the object cache.

    python -m bench.nocc_ratio [--rows 30000] [--rounds 11] [--cases xgb-binary,lgbm-binary]
                               [--clock wall|cpu]

Also timed, where they apply: the AVX2 path (the normal install on a CPU without AVX-512 VBMI:
AVX2-only CPUs and Skylake-X alike, the C kernel's AVX-512 unit needing VBMI), the llvm-vec
kernel's generic IR where the host runs an x86 flavour (vec.FLAVOURS), what a host with AVX2
but not AVX-512 VBMI runs without a compiler: the avx2 flavour and the generic IR before it,
both compiled without AVX-512 (vec.flavour_features; *_to_avx2: against the AVX2 C kernel), and
the llvm backend's generated code (what backend="auto" ran without a C compiler before).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np


def _first_compile(case: str, cache: str, flavour: str | None = None) -> float:
    code = (
        "import time, sys\n"
        "t0 = time.perf_counter()\n"
        "import treecomp\n"
        "from treecomp.benchmark import cases as C\n"
        f"c = C.build_case({case!r})\n"
        "t1 = time.perf_counter()\n"
        "p = treecomp.compile(c.model, backend='arrays', isa='llvm-vec')\n"
        "p.predict_raw(c.X[:10])\n"
        "from treecomp.backends.arrays.kernel import vec_self_test\n"  # what auto adds
        "m = p._kernel.tables.meta\n"
        "assert vec_self_test(m['x_dtype'], m['acc_dtype'])\n"
        "print(time.perf_counter() - t1)\n")
    env = dict(os.environ, TREECOMP_CACHE_DIR=cache)
    if flavour:  # the IR flavour of another host class (vec.ENV_FLAVOUR)
        env["TREECOMP_LLVM_VEC_FLAVOUR"] = flavour
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         check=True)
    return float(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=30_000)
    ap.add_argument("--rounds", type=int, default=11)
    ap.add_argument("--cases", default="xgb-binary,lgbm-binary")
    ap.add_argument("--no-compile-time", action="store_true")
    ap.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                    help="cpu: this thread's CPU time (time.thread_time; the calls run on the "
                         "calling thread), steadier than the wall clock on a shared machine")
    ap.add_argument("--no-llvm", action="store_true", help="skip the llvm backend (slow to build)")
    args = ap.parse_args(argv)
    import treecomp
    from treecomp.backends import arrays
    from treecomp.benchmark import cases as C
    from treecomp.benchmark.runner import machine
    clock = time.thread_time if args.clock == "cpu" else time.perf_counter
    report = {"host": machine(), "date": time.strftime("%Y-%m-%d"), "rows": args.rows,
              "rounds": args.rounds, "clock": args.clock, "cases": {}}
    for name in args.cases.split(","):
        case = C.build_case(name, n_rows=args.rows)
        X = case.X
        normal = treecomp.compile(case.model, backend="arrays")
        free = treecomp.compile(case.model, backend="arrays", isa="llvm-vec")
        kn, kf = normal._kernel, free._kernel
        runs = {"normal": kn.run, "llvm-vec": kf.run}
        if kf._vec is not None and kf._vec.flavour != "generic":  # the portable IR, same host
            from treecomp.backends.arrays import vec
            kg = vec.vec_kernel(kn.tables.meta["x_dtype"], kn.tables.meta["acc_dtype"],
                                flavour="generic")
            runs["llvm-vec-generic"] = lambda X, out, kg=kg: vec.run(kg, kf._sref, X, out)
        if "avx2" in arrays.supported_isas() and kn.isa != "avx2":  # an AVX2-only install
            runs["avx2"] = treecomp.compile(case.model, backend="arrays", isa="avx2")._kernel.run
        if "avx2" in arrays.supported_isas():
            # what a host with AVX2 but not AVX-512 VBMI runs without a compiler: the avx2
            # flavour, and the generic IR before it, both compiled without AVX-512 (32-row groups)
            from treecomp.backends.arrays import vec
            md = kn.tables.meta
            trip, cpu, feats = vec.target()
            ka = vec.vec_kernel(md["x_dtype"], md["acc_dtype"], flavour="avx2")
            kg2 = vec.vec_kernel(md["x_dtype"], md["acc_dtype"], (32, 2, 16), flavour="generic",
                                 features=vec.flavour_features(feats, "avx2"))
            if kf._vec is None or kf._vec.flavour != "avx2":
                runs["llvm-vec-avx2"] = lambda X, out, k=ka: vec.run(k, kf._sref, X, out)
            runs["llvm-vec-generic-avx2"] = lambda X, out, k=kg2: vec.run(k, kf._sref, X, out)
        if not args.no_llvm:  # what auto ran on such a host before llvm-vec: generated code
            p_gen = treecomp.compile(case.model, backend="llvm")
            runs["llvm-backend"] = lambda X, out, p=p_gen: p.predict_raw(X)
        outs = {label: np.empty((len(X), kn.head.n_outputs), kn.tables.acc_dtype) for label in runs}
        for label, run in runs.items():
            run(X, outs[label])  # warm-up
        for label in outs:
            if label != "llvm-backend":
                assert np.array_equal(outs["normal"], outs[label]), (name, label)
        times = {label: [] for label in runs}
        labels = list(runs)
        for r in range(args.rounds):
            for label in (labels if r % 2 == 0 else labels[::-1]):
                t0 = clock()
                runs[label](X, outs[label])
                times[label].append((clock() - t0) / len(X) * 1e9)
        med = {k: float(np.median(v)) for k, v in times.items()}
        row = {"normal_isa": kn.isa, **{f"{k}_ns_row": round(v, 1) for k, v in med.items()},
               "speed_ratio": round(med["normal"] / med["llvm-vec"], 3),
               **({"ratio_to_avx2": round(med["avx2"] / med["llvm-vec"], 3)} if "avx2" in med else {}),
               **({"speedup_over_llvm_backend": round(med["llvm-backend"] / med["llvm-vec"], 2)}
                  if "llvm-backend" in med else {}),
               **({"ratio_generic": round(med["normal"] / med["llvm-vec-generic"], 3)}
                  if "llvm-vec-generic" in med else {}),
               **{f"{k}_to_avx2": round(med.get("avx2", med["normal"]) / med[k], 3)
                  for k in ("llvm-vec-avx2", "llvm-vec-generic-avx2") if k in med},
               **({"llvm-vec-avx2_to_normal": round(med["normal"] / med["llvm-vec-avx2"], 3)}
                  if "llvm-vec-avx2" in med else {}),
               "vec_shape": list(kf._vec.shape) if kf._vec is not None else None,
               "vec_flavour": kf._vec.flavour if kf._vec is not None else None}
        if not args.no_compile_time:
            with tempfile.TemporaryDirectory() as cache:
                row["first_compile_s"] = round(_first_compile(name, cache), 2)
                row["cached_compile_s"] = round(_first_compile(name, cache), 2)
            if "llvm-vec-avx2" in med:
                with tempfile.TemporaryDirectory() as cache:
                    row["first_compile_avx2_s"] = round(_first_compile(name, cache, "avx2"), 2)
                    row["cached_compile_avx2_s"] = round(_first_compile(name, cache, "avx2"), 2)
        report["cases"][name] = row
        print(name, json.dumps(row), flush=True)
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
