"""Where one row's kernel time goes: the quantiser, the walk with its leaf adds, the rest.

    python -m bench.row_pieces --build /tmp/tc_timing.so        # once: a measurement kernel
    python -m bench.row_pieces --lib /tmp/tc_timing.so[,OTHER_TIMING.so] [--cases xgb-binary,...]

--build compiles this checkout's arrays kernel (the three TC_PART units, KERNEL_CFLAGS) with
-DTC_TIMING: runtime/kernels/arrays_impl.c's run then adds the time stamp counter's ticks before
the quantiser, in it, in the byte walk (qblock: the walk and the in-order leaf adds) and after
it into counters that tc_timing_read returns (x86-64 only; a normal build has none of it;
models without the byte walks, the float walks, count the whole call in "after"). With
--lib, each case's model is compiled with the arrays backend (this checkout's tables) and its
raw-margin plan pointed at each given library's tc_arrays_predict; pyentry's native_ns then
calls it one row at a time over 64 distinct rows (no Python in between), libraries alternating
round by round. Reported per library: ns per kernel call (native_ns: thread clock around the
loop) and the medians of each piece in ns (TSC ticks at --tsc-mhz; a KVM guest's counter runs at
the host's nominal clock) and in core cycles (at the core's clock, measured as bench.kernel_ab
does: a dependent add chain), and the median ratio of each piece against the first library's.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import statistics
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent


def build(out: str) -> None:
    """This checkout's kernel with -DTC_TIMING into `out`."""
    from treecomp.backends.arrays.native import KERNEL_CFLAGS, KERNEL_PARTS
    runtime = ROOT / "runtime"
    with tempfile.TemporaryDirectory(prefix="tc-timing-") as tmp:
        objs = [os.path.join(tmp, f"p{i}.o") for i in range(KERNEL_PARTS)]
        jobs = [["cc", *KERNEL_CFLAGS, "-DTC_TIMING=1", f"-DTC_PART={i}", "-I", str(runtime), "-c",
                 str(runtime / "kernels" / "arrays.c"), "-o", objs[i]] for i in range(KERNEL_PARTS)]
        with ThreadPoolExecutor(min(KERNEL_PARTS, os.cpu_count() or 1)) as pool:
            list(pool.map(subprocess.check_call, jobs))
        subprocess.check_call(["cc", "-shared", *KERNEL_CFLAGS, *objs, "-o", out, "-lm"])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default=None, help="write a -DTC_TIMING kernel library here")
    ap.add_argument("--lib", default=None, help="comma-separated -DTC_TIMING kernel libraries")
    ap.add_argument("--cases", default="xgb-binary,gb-classifier,xgb-multiclass")
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--calls", type=int, default=10000)
    ap.add_argument("--tsc-mhz", type=float, default=None,
                    help="the time stamp counter's rate (default: /proc/cpuinfo's 'cpu MHz')")
    args = ap.parse_args(argv)
    if args.build:
        build(args.build)
        print(f"built {args.build}")
    if not args.lib:
        return 0

    import treecomp
    from treecomp import loader, native
    from treecomp.benchmark.cases import build_case
    sys.path.insert(0, str(ROOT))
    from bench.kernel_ab import core_ghz

    tsc = args.tsc_mhz
    if tsc is None:
        with open("/proc/cpuinfo") as f:
            tsc = next(float(line.split(":")[1]) for line in f if line.startswith("cpu MHz"))
    ghz = core_ghz()
    loader._entry()
    mod = native.ENTRY_MODULE
    paths = args.lib.split(",")
    libs = [ctypes.CDLL(p) for p in paths]
    fns = [ctypes.cast(lib.tc_arrays_predict, ctypes.c_void_p).value for lib in libs]
    buf = (ctypes.c_uint64 * 8)()
    print(f"# TSC {tsc:.0f} MHz, core {ghz:.2f} GHz; medians of {args.rounds} rounds x "
          f"{args.calls} calls; load {os.getloadavg()[0]:.1f}")
    pieces = ("before", "quantise", "walk+adds", "after")
    for name in args.cases.split(","):
        case = build_case(name)
        pred = treecomp.compile(case.model, backend="arrays")
        rows = np.ascontiguousarray(np.asarray(case.X)[:64])
        cfgs = []
        for fn in fns:
            c = native.EntryCfg.from_buffer_copy(pred._plans["raw"][0])
            c.fn = fn
            cfgs.append(bytes(c))
        res: list[list[tuple]] = [[] for _ in libs]
        for r in range(args.rounds):
            order = range(len(libs)) if r % 2 == 0 else reversed(range(len(libs)))
            for i in order:
                libs[i].tc_timing_read(buf)
                ns = mod.native_ns(rows, cfgs[i], 0, args.calls)
                libs[i].tc_timing_read(buf)
                us = 1e3 / tsc / args.calls  # one row a call: one block
                res[i].append((ns, buf[0] * us, buf[1] * us, buf[2] * us, buf[4] * us))
        print(f"# {name}: isa {pred.kernel.isa}, {pred.head.n_trees} trees, {pred.n_features} "
              f"features")
        for i, p in enumerate(paths):
            med = [statistics.median(x[k] for x in res[i]) for k in range(5)]
            line = f"{Path(p).name:24s} kernel {med[0]:6.0f} ns |"
            for k, piece in enumerate(pieces, 1):
                line += f" {piece} {med[k]:5.0f} ns ({med[k] * ghz:5.0f} cyc)"
                if i:
                    q = [a[k] / b[k] for a, b in zip(res[0], res[i]) if b[k]]
                    line += f" {statistics.median(q):.2f}x" if q else " -"  # (no such piece)
            print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
