"""The arrays .so (backends/arrays_so.py) against the in-process arrays path on the nine bench
cases, one thread: `python bench/arrays_so_speed.py [--quick] [--cases a,b] [--rows N]`
(issue 21: bit-exact, within 10% of in-process speed, <= 2 s to build for 500 trees).

What it adds to `treecomp bench`: the runner times predictors loaded in-process; this saves
each standard case (treecomp.benchmark.cases) as a standalone .so, loads it back, and calls it
from a C program linked against it (needs a C compiler).

Per case (treecomp.benchmark.cases, the full-size models unless --quick): the model compiled in
process (backend="arrays"), saved as .so from a cold cache (a fresh TREECOMP_CACHE_DIR, so the
build time is a real build: the kernel archive is the package's, or built once before the first
case, outside the timing), loaded with treecomp.load, and run from a C driver that includes only
runtime/treecomp.h and is linked against the .so.

- exactness: the .so through treecomp.load against the in-process predictor (predict_proba for
  classifiers, predict for regressors, and the raw margins), and the C driver's raw margins
  (TREECOMP_RAW, float32 rows read from a file) against the in-process raw margins: byte equal.
- speed, in this process: the in-process predictor and the loaded .so alternate (the runner's
  call: predict_proba / predict, n_threads=1), `--reps` rounds (the order rotating from round to
  round), medians; each ratio is the median of the rounds' own ratios (paired, so that the
  machine's drift between rounds cancels). The C driver is a
  separate process run once per round between them (its own clock around one treecomp_predict
  call after a warm-up call), compared with the in-process raw margins (decision_function,
  n_threads=1) timed in the same rounds. Ratios are in-process time / .so time (> 1: the .so
  is faster).

The machine may be shared: the rounds alternate so that load hits every variant alike; read the
ratios, not the absolute figures.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

os.environ["TREECOMP_CACHE_DIR"] = tempfile.mkdtemp(prefix="tc-so-speed-")  # cold builds

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import treecomp  # noqa: E402
from treecomp.backends.arrays import native as arrays_native  # noqa: E402
from treecomp.benchmark import cases as bench_cases  # noqa: E402

DRIVER = r"""
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include "treecomp.h"
/* argv: n, float32 rows file (n x nf), raw output file (or "-": none). Prints the seconds of
 * one treecomp_predict(RAW) call over the n rows, after one warm-up call (the ISA choice). */
static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + 1e-9 * t.tv_nsec;
}
int main(int argc, char **argv) {
  long n = atol(argv[1]);
  int nf = treecomp_n_features(), no = treecomp_n_outputs();
  size_t osz = treecomp_out_dtype() == TREECOMP_F64 ? sizeof(double) : sizeof(float);
  float *x = malloc(sizeof(float) * n * nf);
  char *out = malloc(osz * n * no);
  FILE *fp = fopen(argv[2], "rb");
  if (!fp || fread(x, sizeof(float), (size_t)n * nf, fp) != (size_t)n * nf) return 5;
  fclose(fp);
  if (treecomp_predict(x, TREECOMP_F32, n, out, TREECOMP_RAW) != TREECOMP_OK) return 6;
  double t0 = now();
  if (treecomp_predict(x, TREECOMP_F32, n, out, TREECOMP_RAW) != TREECOMP_OK) return 6;
  double t1 = now();
  if (argv[3][0] != '-') {
    FILE *fo = fopen(argv[3], "wb");
    if (!fo || fwrite(out, osz, (size_t)n * no, fo) != (size_t)n * no) return 7;
    fclose(fo);
  }
  printf("%.9f\n", t1 - t0);
  return 0;
}
"""


def _driver(so: Path, work: Path) -> Path:
    from treecomp.cli import write_header
    write_header(str(work / "treecomp.h"))
    (work / "driver.c").write_text(DRIVER)
    exe = work / f"driver-{so.stem}"
    subprocess.run(["cc", "-O2", str(work / "driver.c"), "-I", str(work), str(so), "-o", str(exe),
                    f"-Wl,-rpath,{so.parent}"], check=True)
    return exe


def bench_case(name: str, quick: bool, n_rows: int, reps: int, work: Path) -> dict:
    case = bench_cases.build_case(name, quick=quick, n_rows=n_rows,
                                  log=lambda s: print(s, file=sys.stderr, flush=True))
    forest = treecomp.parse(case.model)
    X = np.ascontiguousarray(case.X, np.float32)
    n = len(X)
    inproc = treecomp.compile(forest, backend="arrays")
    so = work / f"{name}.so"
    t0 = time.perf_counter()
    inproc.save(so)
    build_s = time.perf_counter() - t0
    loaded = treecomp.load(so)
    clf = inproc.head.is_classifier
    call_i = inproc.predict_proba if clf else inproc.predict
    call_s = loaded.predict_proba if clf else loaded.predict
    a, b = call_i(X, n_threads=1), call_s(X, n_threads=1)
    raw = inproc.decision_function(X, n_threads=1)
    exact = (a.dtype == b.dtype and a.tobytes() == b.tobytes()
             and raw.tobytes() == loaded.decision_function(X, n_threads=1).tobytes())
    exe = _driver(so, work)
    xfile, ofile = work / f"{name}.x", work / f"{name}.out"
    X.tofile(xfile)

    def drive(out: str = "-") -> float:
        r = subprocess.run([str(exe), str(n), str(xfile), out], capture_output=True, text=True)
        if r.returncode:
            raise RuntimeError(f"{name}: the C driver failed ({r.returncode}): {r.stderr}")
        return float(r.stdout)
    drive(str(ofile))
    c_raw = np.fromfile(ofile, raw.dtype).reshape(raw.shape)
    exact_c = c_raw.tobytes() == raw.tobytes()
    ti, ts, tr, tc = [], [], [], []
    steps = [(lambda: call_i(X, n_threads=1), ti), (lambda: call_s(X, n_threads=1), ts),
             (lambda: inproc.decision_function(X, n_threads=1), tr), (None, tc)]
    for r in range(reps):  # the order rotates from round to round: no variant always goes first
        for fn, acc in steps[r % 4:] + steps[:r % 4]:
            if fn is None:
                acc.append(drive())
                continue
            t = time.perf_counter()
            fn()
            acc.append(time.perf_counter() - t)
    mi, ms, mr, mc = (statistics.median(v) for v in (ti, ts, tr, tc))
    # the ratios: medians of each round's own ratio (paired, so the machine's drift between
    # rounds cancels)
    pair_so = statistics.median(a / b for a, b in zip(ti, ts))
    pair_c = statistics.median(a / b for a, b in zip(tr, tc))
    return {"case": name, "title": case.title, "n_trees": forest.n_trees, "rows": n,
            "isa": inproc._kernel.isa, "build_s": build_s, "so_bytes": so.stat().st_size,
            "exact": exact, "exact_c": exact_c,
            "inproc_us": mi / n * 1e6, "so_us": ms / n * 1e6, "ratio_so": pair_so,
            "raw_us": mr / n * 1e6, "c_us": mc / n * 1e6, "ratio_c": pair_c}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="the quick bench's small models")
    ap.add_argument("--cases", default=",".join(bench_cases.case_names()))
    ap.add_argument("--rows", type=int, default=20_000, help="test rows per case (default 20000)")
    ap.add_argument("--reps", type=int, default=31, help="alternating rounds (default 31)")
    args = ap.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="tc-so-"))
    arrays_native.kernel_archive()  # the archive (prebuilt, or built once) outside the timing
    print(f"# {platform.node()} {platform.processor() or platform.machine()}, "
          f"{os.cpu_count()} cores, {_dt.datetime.now(_dt.timezone.utc):%Y-%m-%d %H:%M} UTC; "
          f"kernel archive {arrays_native.ARCHIVE_ORIGIN}; one thread, medians of {args.reps} "
          f"rounds (order rotating), paired ratios")
    print("| case | trees | isa | .so build s | in-process us/row | .so (treecomp.load) us/row "
          "| ratio | in-process raw us/row | C driver us/row | ratio | bit-exact |")
    print("|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---|")
    worst = 1e9
    for name in [c for c in args.cases.split(",") if c]:
        spec = bench_cases.SPECS[name]
        if not bench_cases.available(spec):
            print(f"| {name} | skipped: {spec.module} is not installed |")
            continue
        r = bench_case(name, args.quick, args.rows, args.reps, work)
        worst = min(worst, r["ratio_so"], r["ratio_c"])
        print(f"| {r['case']} | {r['n_trees']} | {r['isa']} | {r['build_s']:.2f} | "
              f"{r['inproc_us']:.3f} | {r['so_us']:.3f} | {r['ratio_so']:.2f} | {r['raw_us']:.3f} | "
              f"{r['c_us']:.3f} | {r['ratio_c']:.2f} | "
              f"{'yes' if r['exact'] and r['exact_c'] else 'NO'} |", flush=True)
    print(f"# worst ratio (in-process / .so): {worst:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
