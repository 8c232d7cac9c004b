"""The per-model specialised byte walk (arrays backend, spec=True: backends/arrays_spec.py)
against the generic kernel's walk, one thread, in one process:
`python bench/spec_speed.py [--cases a,b] [--rows N] [--reps R] [--isa avx512|avx2]`
(issue 23, target 3: faster than the generic kernel, built in <= 5 s for 500 trees).

Per case (treecomp.benchmark.cases, full-size models): the model compiled for the arrays
backend twice, generic and spec=True, the second from a cold cache (a fresh
TREECOMP_CACHE_DIR once the generic kernel is loaded: its build time is a real build);
exactness: the two decision_function outputs byte equal; speed: the CPU time of this thread (time.thread_time: the kernel runs in
the calling thread with n_threads=1, and time spent descheduled by other jobs on a shared
machine is not counted) over decision_function(n_threads=1), the two alternating, `--reps`
rounds (the order swapping from round to round), medians, and the median of the rounds' own
ratios (spec time / generic time: < 1 is a gain). Cases whose tables the specialised walk does
not take (the interval walk: LightGBM's unbalanced trees) are reported as such.

On a shared machine wall-clock ratios scattered 0.6-1.5 between rounds; thread CPU time
kept a run's rounds within a few per cent, though runs still differed by up to 20% (the other
jobs' share of the caches).
"""

from __future__ import annotations

import argparse
import datetime as _dt
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import treecomp  # noqa: E402
from treecomp.backends import arrays_native  # noqa: E402
from treecomp.benchmark import cases as bench_cases  # noqa: E402

CASES = "xgb-binary,gb-regressor,cb-binary,lgbm-binary"


def bench_case(name: str, n_rows: int, reps: int, isa: str) -> dict:
    case = bench_cases.build_case(name, n_rows=n_rows, log=lambda s: print(s, file=sys.stderr, flush=True))
    forest = treecomp.parse(case.model)
    X = np.ascontiguousarray(case.X, np.float32)
    generic = treecomp.compile(forest, backend="arrays", isa=isa)
    t0 = time.perf_counter()
    spec = treecomp.compile(forest, backend="arrays", isa=isa, spec=True)
    build_s = time.perf_counter() - t0
    res = {"case": name, "n_trees": forest.n_trees, "rows": len(X), "isa": generic._kernel.isa,
           "spec": spec._kernel.spec, "build_s": build_s}
    if not spec._kernel.spec:
        return res
    a = generic.decision_function(X, n_threads=1)
    b = spec.decision_function(X, n_threads=1)
    res["exact"] = a.dtype == b.dtype and a.tobytes() == b.tobytes()
    tg, ts = [], []
    steps = [(generic, tg), (spec, ts)]
    for r in range(reps):
        for p, acc in (steps if r % 2 == 0 else steps[::-1]):
            t = time.thread_time()
            p.decision_function(X, n_threads=1)
            acc.append(time.thread_time() - t)
    n = len(X)
    res.update(generic_ns=statistics.median(tg) / n * 1e9, spec_ns=statistics.median(ts) / n * 1e9,
               ratio=statistics.median(s / g for s, g in zip(ts, tg)))
    return res


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", default=CASES)
    ap.add_argument("--rows", type=int, default=50_000, help="test rows per case (default 50000)")
    ap.add_argument("--reps", type=int, default=15, help="alternating rounds (default 15)")
    ap.add_argument("--isa", default="auto", help="the kernel's instruction set (default auto)")
    args = ap.parse_args(argv)
    # the generic kernel (prebuilt, or built once into the usual cache) loaded outside the
    # timing; then a fresh cache, so that every specialised walk's build is a real one
    arrays_native.native_library()
    os.environ["TREECOMP_CACHE_DIR"] = tempfile.mkdtemp(prefix="tc-spec-speed-")
    print(f"# {platform.node()} {platform.processor() or platform.machine()}, "
          f"{os.cpu_count()} cores, {_dt.datetime.now(_dt.timezone.utc):%Y-%m-%d %H:%M} UTC; "
          f"one thread, {args.rows} rows, medians of {args.reps} alternating rounds, paired ratios")
    print("| case | trees | isa | spec build s | generic ns/row | spec ns/row | spec / generic | bit-exact |")
    print("|---|---:|---|---:|---:|---:|---:|---|")
    for name in [c for c in args.cases.split(",") if c]:
        spec = bench_cases.SPECS[name]
        if not bench_cases.available(spec):
            print(f"| {name} | skipped: {spec.module} is not installed |")
            continue
        r = bench_case(name, args.rows, args.reps, args.isa)
        if not r["spec"]:
            print(f"| {name} | {r['n_trees']} | {r['isa']} | - | - | - | no specialised walk "
                  f"(not quantised heaps of scalar leaves) | - |", flush=True)
            continue
        print(f"| {name} | {r['n_trees']} | {r['isa']} | {r['build_s']:.1f} | {r['generic_ns']:.0f} | "
              f"{r['spec_ns']:.0f} | {r['ratio']:.3f} | {'yes' if r['exact'] else 'NO'} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
