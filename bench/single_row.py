"""Where one row's time goes, end to end, in one process; optionally two arrays kernels A/B.

    python -m bench.single_row [--old OLD.so] [--cases xgb-binary,...] [--rounds R]
        [--calls N] [--isa avx512] [--cut 1,64,500]

For each case (treecomp.benchmark.cases, full size) the model is compiled with the arrays
backend and one row at a time, cycling through 64 distinct rows (so no branch predictor learns
one row's path), is timed as:

- api:     Predictor.predict_proba (predict for regressors), the user's call
- entry:   the compiled entry's run(X, cfg, flags, mode, classes) called directly (no
           Predictor method)
- decline: run(None, ...): the entry's argument parsing and return, nothing computed
- floor:   a Python method shaped like predict_proba (a dict lookup, the checks, a call into
           C that returns at once): what any Python method calling C costs here
- np.empty: a (1, 2) output array, for scale
- kernel:  the kernel alone, called in C over the same rows (pyentry native_ns), with the inverse
           link (tf) and without (raw): their difference is the transform

With --old, the same tables run through a second kernel library (tc_arrays_predict of another
build: the struct only grows at its end) through the same entry, alternating with this
checkout's kernel round by round, its "api" through the Predictor's single-row code as it was
before the entry's plan was unpacked (run(X, *plan)); reported side by side with the median of
the per-round ratios. --cut K1,K2,..: the first case's forest cut to its first K trees (kernel time against
trees: the intercept is the per-call fixed part, the slope the per-tree walk and add).

Every number is a median over rounds of per-call means (the calling thread's CPU time around
`calls` calls, the kernel's loop in pyentry included, so a shared machine's preemptions stay
out); machine and date in the header.
"""

from __future__ import annotations

import argparse
import ctypes
import platform
import statistics
import sys
import time

import numpy as np


def per_call_ns(fn, args_list, calls: int) -> float:
    """ns of the calling thread's CPU time per call (a shared machine's preemptions left out)."""
    n = len(args_list)
    t0 = time.thread_time_ns()
    for i in range(calls):
        fn(args_list[i % n])
    return (time.thread_time_ns() - t0) / calls


def _star_call(loader, pred, kind):
    """The Predictor's single-row path as it was before the plan was unpacked (run(X, *plan)):
    the "old" variant's API call."""
    def call(X, n_threads=None):
        plan = pred._plans.get(kind)
        if n_threads is not None and (type(n_threads) is not int or n_threads < 1):
            raise ValueError(n_threads)
        if plan is not None:
            out = (loader._ENTRY or loader._entry())(X, *plan)
            if out is not None:
                return out
        return getattr(pred, "predict_proba" if kind == "proba" else kind)(X)
    return call


def kernel_ns(mod, rows, cfg, flags, calls):
    """ns of thread CPU time per single-row kernel call: pyentry's native_ns loop (one row a
    call, cycling through rows, no Python in between), timed around it by the thread's clock."""
    t0 = time.thread_time_ns()
    mod.native_ns(rows, cfg, flags, calls)
    return (time.thread_time_ns() - t0) / calls


class _Floor:
    """predict_proba's shape (treecomp.loader.Predictor) around a C call that returns at once."""

    def __init__(self, run, plan):
        self._plans = {"proba": plan}
        self._run = run

    def predict_proba(self, X, n_threads=None):
        plan = self._plans.get("proba")
        if plan is None:
            raise AttributeError("no plan")
        if n_threads is not None and (type(n_threads) is not int or n_threads < 1):
            raise ValueError(n_threads)
        cfg, flags, mode, classes = plan
        out = self._run(None, cfg, flags, mode, classes)
        return X if out is None else out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--old", default=None, help="another arrays kernel library to compare")
    ap.add_argument("--cases", default="xgb-binary,lgbm-binary,hgb-nan-cat,rf-deep")
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--calls", type=int, default=3000)
    ap.add_argument("--isa", default="auto")
    ap.add_argument("--cut", default="", help="kernel time of the first case cut to K trees")
    args = ap.parse_args(argv)

    import treecomp
    from treecomp import loader, native
    from treecomp.benchmark.cases import build_case

    run = loader._entry()
    mod = native.ENTRY_MODULE
    if mod is None:
        print("no compiled entry: nothing to measure")
        return 1
    old = None
    if args.old:
        old = ctypes.CDLL(args.old)
        old_fn = ctypes.cast(old.tc_arrays_predict, ctypes.c_void_p).value
    print(f"# {platform.node()} {platform.processor() or platform.machine()}, Python "
          f"{sys.version.split()[0]}, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; "
          f"median of {args.rounds} rounds x {args.calls} calls, ns per call")

    def plans_with(pred, fn):
        """pred's entry plans with another kernel function in their config."""
        out = {}
        for k, (cfg, *rest) in pred._plans.items():
            c = native.EntryCfg.from_buffer_copy(cfg)
            c.fn = fn
            out[k] = (bytes(c), *rest)
        return out

    def measure(name, pred, X):
        rows = np.ascontiguousarray(X[:64])
        singles = [rows[i:i + 1] for i in range(len(rows))]
        kind = "proba" if "proba" in pred._plans else "predict"
        if kind not in pred._plans or "raw" not in pred._plans:
            m = pred.predict_proba if pred.head.is_classifier else pred.predict
            api = statistics.median(per_call_ns(m, singles, args.calls) for _ in range(args.rounds))
            print(f"{name:24s} no compiled-entry plan (numpy serves the outputs): api {api:.0f}")
            return
        method = pred.predict_proba if kind == "proba" else pred.predict
        variants = [("new", pred._plans)]
        if old is not None:
            variants.append(("old", plans_with(pred, old_fn)))
        res = {v: {k: [] for k in ("api", "entry", "tf", "raw")} for v, _ in variants}
        shared = {k: [] for k in ("decline", "floor", "np.empty")}
        plan0 = pred._plans[kind]
        floor = _Floor(run, plan0)
        empty = lambda x: np.empty((1, 2), np.float32)  # noqa: E731
        for r in range(args.rounds):
            order = variants if r % 2 == 0 else variants[::-1]
            for v, plans in order:
                pred._plans = plans
                plan = plans[kind]
                api = method if v == "new" else _star_call(loader, pred, kind)
                res[v]["api"].append(per_call_ns(api, singles, args.calls))
                cfg, fl, mo, cl = plan
                res[v]["entry"].append(per_call_ns(lambda x: run(x, cfg, fl, mo, cl), singles,
                                                   args.calls))
                raw = plans["raw"]
                res[v]["raw"].append(kernel_ns(mod, rows, raw[0], 0, args.calls))
                if pred._tf:
                    res[v]["tf"].append(kernel_ns(mod, rows, raw[0], 1, args.calls))
            pred._plans = variants[0][1]
            c0, f0, m0, l0 = plan0
            shared["decline"].append(per_call_ns(lambda x: run(None, c0, f0, m0, l0), singles,
                                                 args.calls))
            shared["floor"].append(per_call_ns(floor.predict_proba, singles, args.calls))
            shared["np.empty"].append(per_call_ns(empty, singles, args.calls))
        med = {v: {k: statistics.median(x) if x else float("nan") for k, x in d.items()}
               for v, d in res.items()}
        line = f"{name:24s} {kind:7s}"
        for v, _ in variants:
            m = med[v]
            line += (f" | {v}: api {m['api']:6.0f} entry {m['entry']:6.0f} kernel+tf "
                     f"{m['tf']:6.0f} kernel raw {m['raw']:6.0f}")
        if old is not None:
            ratio = statistics.median(a / b for a, b in zip(res["old"]["api"], res["new"]["api"]))
            kr = statistics.median(a / b for a, b in zip(res["old"]["raw"], res["new"]["raw"]))
            line += f" | old/new api {ratio:.2f}x kernel {kr:.2f}x"
        s = {k: statistics.median(x) for k, x in shared.items()}
        line += (f" | decline {s['decline']:.0f} floor {s['floor']:.0f} "
                 f"np.empty {s['np.empty']:.0f}")
        print(line, flush=True)

    isa = args.isa
    for name in [c for c in args.cases.split(",") if c]:
        case = build_case(name)
        pred = treecomp.compile(case.model, backend="arrays", isa=isa)
        print(f"# {name}: isa {pred._kernel.isa}, {pred.head.n_trees} trees, "
              f"{pred.n_features} features, h_zt {'h_zt' in getattr(pred._kernel, '_keep', {})}")
        measure(name, pred, np.asarray(case.X))
    if args.cut:
        name = args.cases.split(",")[0]
        case = build_case(name)
        forest = treecomp.parse(case.model)
        for k in (int(c) for c in args.cut.split(",")):
            f = forest.replace(trees=forest.trees[:k], tree_output=forest.tree_output[:k])
            pred = treecomp.compile(f, backend="arrays", isa=isa)
            measure(f"{name}[:{k}]", pred, np.asarray(case.X))
    return 0


if __name__ == "__main__":
    sys.exit(main())
