"""The benchmark runner: every engine measured side by side, in one process, on the same rows.

:func:`main` is `treecomp bench` (also ``python -m treecomp.benchmark``); :func:`run_case`
measures one case (:mod:`treecomp.benchmark.cases`) with a list of engines
(:mod:`treecomp.benchmark.engines`), :func:`measure_strategy` one engine on it; the results go to
:mod:`treecomp.benchmark.report`.

How each figure is measured:

- compile: every treecomp compile runs cold in a process of its own with a fresh
  ``TREECOMP_CACHE_DIR`` holding no artifact of the model (forked from a fork server that has
  imported numpy and treecomp and done nothing else, so the imports are not paid per compile;
  a fresh interpreter where there is no fork server: :mod:`treecomp.benchmark.measure`). A
  backend's once-per-machine work (the arrays backend's generic kernel) is timed separately,
  once per run, as its "setup" (see :class:`treecomp.benchmark.engines.Backend`). The child
  reports the build's wall time, the peak RSS growth of the compiling Python process (the
  kernel's high-water mark is reset through /proc/self/clear_refs right before the build, so
  the figure counts only the build, native allocations such as LLVM's included) and the peak
  RSS of the largest compiler/linker subprocess (``RUSAGE_CHILDREN`` of a process that ran
  nothing else; Linux carries the forking process's RSS into a child's high-water mark, so a
  figure not above the compiling process's own peak is shown as an upper bound, "<="). The
  parent then loads the same artifact from that cache in-process ("load"). Conversions of the
  other compilers (TL2cgen, ONNX, lleaves, daal4py) run in-process with the same high-water-mark
  reset. Parse time (library model -> treecomp IR) is per case.
- throughput: ``predict_proba(X, n_threads=k)`` (classifiers) or ``predict(X, n_threads=k)``
  (regressors) on the whole test matrix for k = 1 and k = all cores, so a treecomp figure
  includes the inverse link as the libraries' timed calls do (the library: its predict with
  nthread / n_jobs / num_threads = k; the walker and interpreter baselines give raw margins);
  one warm-up call, then repeated calls until the time budget is used (at least 3); the
  median, in ns per row.
- thread scaling: calls at 1 thread and at all cores alternate (at least 5 pairs) and the
  median pair ratio is kept (the all-cores throughput is the median of those pairs' all-cores
  calls, for every strategy not timed on a subsample); for treecomp strategies each round adds
  one one-thread call per core at once (the ceiling: what the cores give that kernel then, without treecomp's split).
- latency: one call of b rows for b in 1, 8, 64, 512, 4096 (quick mode: 1, 64, 4096),
  single-threaded for every strategy (so the numbers compare code, not thread pools), calls
  cycling through distinct batches of the test rows; the strategies are timed side by side
  (:func:`measure_latency`: rounds in which each makes a block of warm calls in turn), median
  of the calls, in us. Per case, the latency table puts treecomp as ``treecomp.compile`` builds it
  (the backend ``auto`` picks, through ``predict_proba`` / ``predict``) beside the fastest other
  engine (the library and the other compilers) at each batch size (:func:`latency_table`).
  The walker and interpreter are timed on their own, and called at a batch size only where one
  call fits the time budget; larger batches are scaled from their per-row figure (marked ``~``).
- cycles: the core's clock (:func:`treecomp.benchmark.measure.core_clock`: dependent adds on the
  thread's CPU clock) times the 1-thread ns/row is cycles per row; over the node steps a row
  takes (:func:`node_steps`: the sum over trees of the depth of the leaf it reaches, counted by
  the interpreter on the case's first rows) it is cycles per node step.
- exactness: each strategy's output, turned into each form the library offers (raw margins,
  predict_proba, predict), against the library's on the same rows: bit-exact (same dtype, same
  bits, NaN where NaN) or the max absolute difference (labels: the number of mismatches).
  For a bare model file (no library object) the reference is the treecomp interpreter.
- ratios: speedup vs the library at 1 thread (the report's main figure: library = 1x), vs the
  library at all cores, and vs the walker.

The machine is shared with whatever else runs on it: read ratios, not absolute nanoseconds, when
the load is unknown.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import dataclasses
import datetime as _dt
import itertools
import os
import platform
import shutil
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any, Callable

import numpy as np

from .engines import (CaseContext, Strategy, dist_version, external_model, from_raw, shap_engines,
                      strategies, top_module)
from .measure import Settings, Skip, compare, core_clock, log, timed

#: where the report goes by default: this folder in the current directory (``--output-dir``)
DEFAULT_OUT_NAME = "treecomp-bench"
#: what to install for the benchmark's libraries, plots and cases
EXTRA_HINT = "pip install 'treecomp[bench]'"
#: the case libraries the bench extra leaves out, and the extra that installs each
_OTHER_EXTRAS = {"catboost": "catboost"}


def install_hint(modules: Any) -> str:
    """What to pip install for the cases of `modules`: the bench extra (scikit-learn, XGBoost,
    LightGBM, plots), and the own extra of each library it does not hold (catboost)."""
    extras = sorted({_OTHER_EXTRAS.get(m, "bench") for m in modules}) or ["bench"]
    return "pip install " + " ".join(f"'treecomp[{e}]'" for e in extras)


#: the batch sizes of the latency figures (a full run's; quick mode: Settings.batches)
BATCHES = Settings.batches
#: the rows node_steps counts on (the first of the case's test rows)
STEP_ROWS = 4096


def _slice(v: Any, n: int) -> Any:
    return [p[:n] for p in v] if isinstance(v, list) else np.asarray(v)[:n]


# -- SHAP contributions --------------------------------------------------------------------------
#: rows of the SHAP comparison (quick mode, full mode)
SHAP_ROWS = (64, 512)


def measure_shap(ctx: CaseContext) -> dict:
    """SHAP contributions (path-dependent TreeSHAP) of an XGBoost or LightGBM case on one thread:
    treecomp's Predictor.contributions (arrays backend) beside the library's own (XGBoost
    pred_contribs, LightGBM pred_contrib) and oneDAL's (daal4py's model builder) where it
    imports. One warm-up call each (treecomp's prepares its tables: timed apart), then rounds of
    one call per engine in turn, at least min_reps rounds and until the time budget; medians.
    Each engine's values against treecomp's: the largest difference over the row's sum of
    |values| (the bound treecomp.shap documents)."""
    st = ctx.settings
    model = external_model(ctx)
    if ctx.forest is None or top_module(model) not in ("xgboost", "lightgbm"):
        raise Skip("the SHAP comparison runs on XGBoost and LightGBM cases")
    import treecomp
    n = min(SHAP_ROWS[0] if st.quick else SHAP_ROWS[1], len(ctx.case.X))
    X = np.ascontiguousarray(ctx.case.X[:n])
    pred = treecomp.compile(ctx.forest, backend="arrays")
    t0 = time.perf_counter()
    pred.contributions(X[:1], n_threads=1)
    res: dict[str, Any] = {"n_rows": n, "prepare_s": time.perf_counter() - t0, "engines": []}
    engines, skipped = shap_engines(model, ctx.case.library, X)
    isa = getattr(pred.feature_state.get("explainer"), "isa", "?")  # the SHAP kernel's path
    res["isa"] = isa
    engines.insert(0, ("treecomp", f"treecomp Predictor.contributions(X, n_threads=1) ({isa} path)",
                       lambda: pred.contributions(X, n_threads=1)))
    d4p = sys.modules.get("daal4py")
    d4p_threads = d4p.num_threads() if d4p is not None else 0
    threads = ctx.case.library.threads
    times: dict[str, list[float]] = {}
    outs: dict[str, Any] = {}
    rows = {name: {"name": name, "label": label, "status": "ok"} for name, label, _ in engines}
    try:
        if d4p is not None:
            d4p.daalinit(1)
        with threads(1):
            live = list(engines)
            for name, _, fn in engines:  # warm-up; the values compared
                try:
                    outs[name] = np.asarray(fn(), np.float64).reshape(n, -1)
                    times[name] = []
                except Exception as exc:  # noqa: BLE001 - e.g. a model oneDAL's SHAP refuses
                    rows[name].update(status="skipped", note=f"{type(exc).__name__}: {exc}"[:300])
                    live = [e for e in live if e[0] != name]
            start = time.perf_counter()
            while live and (len(times[live[0][0]]) < st.min_reps
                            or time.perf_counter() - start < st.budget_s):
                for name, _, fn in live:
                    t1 = time.perf_counter()
                    fn()
                    times[name].append(time.perf_counter() - t1)
    finally:
        if d4p is not None:
            d4p.daalinit(d4p_threads)
        with threads(os.cpu_count() or 1):  # XGBoost's setting stays after the block
            pass
    if "treecomp" not in times:
        raise Skip(rows["treecomp"].get("note", "treecomp's contributions failed"))
    ours = outs["treecomp"]
    t_ours = float(np.median(times["treecomp"]))
    for name, _, _ in engines:
        r = rows[name]
        if name in times:
            t = float(np.median(times[name]))
            r.update(ms_per_row=t / n * 1e3, reps=len(times[name]), slower_than_treecomp=t / t_ours)
            if name != "treecomp":
                ref = outs[name]
                if ref.shape != ours.shape:
                    r["note"] = f"shape {ref.shape} vs treecomp's {ours.shape}"
                else:
                    l1 = np.maximum(np.abs(ref).sum(axis=1), np.finfo(np.float64).tiny)
                    r["max_diff_of_row_l1"] = float((np.abs(ours - ref).max(axis=1) / l1).max())
        res["engines"].append(r)
    res["engines"] += [{"name": k, "label": k, "status": "skipped", "note": v} for k, v in skipped]
    return res



def _subsample_rows(fn: Callable[[np.ndarray], Any], X: np.ndarray, target_s: float) -> int:
    """Rows for one call of a slow strategy to take about target_s (at least 8).

    Grows the batch geometrically rather than extrapolating from a first tiny call: the numpy
    interpreter's cost per call is mostly fixed overhead at small batches, so a per-row figure
    from 8 rows would shrink its subsample to a size where only the overhead is measured.
    """
    n = min(8, len(X))
    while True:
        t0 = time.perf_counter()
        fn(X[:n])
        t = max(time.perf_counter() - t0, 1e-9)
        if n >= len(X) or t >= 0.5 * target_s:
            return n
        n = int(min(len(X), n * min(16.0, max(2.0, target_s / t))))


def measure_strategy(s: Strategy, ctx: CaseContext, ref: dict[str, Any], ref_rows: int,
                     lib_ns: float | None, preview: bool = False) -> dict:
    """Every figure of one strategy on one case. preview: the one-thread throughput is one cold
    call (a first figure for the log), as measure_throughput then times it side by side with
    the case's other engines."""
    X, st = ctx.case.X, ctx.settings
    row: dict[str, Any] = {"name": s.name, "label": s.label, "group": s.group, "status": "ok"}
    try:
        row.update(s.prepare(ctx))
        row["label"] = s.label
        # throughput
        with s.threads(1):
            if s.slow:
                n = _subsample_rows(lambda A: s.run(A, 1), X, st.slow_budget_s)
                Xs = X[:n]
                t = timed(lambda: s.run(Xs, 1), st.slow_budget_s,
                          min_reps=1 if n < len(X) else st.min_reps, max_reps=3, warmup=False)
                row["rows_timed"] = n
            else:
                Xs = X
                # (preview: one call, no warm-up: measure_throughput warms each engine up)
                t = timed(lambda: s.run(X, 1), 0.0 if preview else st.budget_s,
                          1 if preview else st.min_reps, warmup=not preview)
                row["rows_timed"] = len(X)
        row["ns_per_row_1t"] = t / len(Xs) * 1e9
        if s.threaded and ctx.n_cores > 1 and not s.slow:
            # the all-cores figure is the median of the paired rounds' k-thread calls
            row.update(thread_scaling(s, X, ctx.n_cores, st))
            row["ns_per_row_all"] = row.pop("_t_all") / len(X) * 1e9
        elif s.threaded and ctx.n_cores > 1:
            with s.threads(ctx.n_cores):
                t = timed(lambda: s.run(X, ctx.n_cores), st.budget_s, st.min_reps)
            row["ns_per_row_all"] = t / len(X) * 1e9
        elif s.threaded:
            row["ns_per_row_all"] = row["ns_per_row_1t"]
        # latency: the slow baselines here, on their own; the others side by side (run_case)
        if s.slow:
            lat, extrap = {}, []
            for b in st.batches:
                if b > len(X):
                    continue
                if b > 16 and row["ns_per_row_1t"] * b * 1e-9 > st.slow_budget_s:
                    lat[str(b)] = row["ns_per_row_1t"] * b / 1e3   # too slow to repeat: scaled
                    extrap.append(b)
                    continue
                nxt = itertools.cycle(distinct_batches(X, b)).__next__
                with s.threads(1):
                    lat[str(b)] = timed(lambda: s.run(nxt(), 1), st.latency_budget_s, st.min_reps,
                                        max_reps=20000) * 1e6
            row["latency_us"] = lat
            row["latency_extrapolated"] = extrap
        pred = getattr(s, "predictor", None)
        if pred is not None:  # the kernel call alone, timed in C: what Python adds on top
            from treecomp.loader import native_call_ns
            rows = np.ascontiguousarray(X[:64])
            singles = [rows[i:i + 1] for i in range(len(rows))]
            reps = max(64, int(st.latency_budget_s * 2e5))
            ns, api = [], []
            for _ in range(st.min_reps):  # rounds alternate, so both see the same minutes
                ns.append(native_call_ns(pred, rows, reps=reps))
                with s.threads(1):
                    t0 = time.perf_counter()
                    for k in range(reps):
                        s.run(singles[k % len(singles)], 1)
                    api.append((time.perf_counter() - t0) / reps * 1e6)
            if None not in ns:
                row["native_us_1row"] = min(ns) / 1e3
                row["api_us_1row_paired"] = min(api)
        # exactness
        n_ex = min(ref_rows, len(Xs))
        ours = s.outputs(X[:n_ex], list(ref))
        exact = {k: compare(v, _slice(ref[k], n_ex)) for k, v in ours.items()}
        row["exact"] = exact
        row["exact_rows"] = n_ex
        if exact:
            row["bit_exact"] = all(e["bit_exact"] for e in exact.values())
            diffs = [e["max_abs_diff"] for e in exact.values() if e.get("max_abs_diff") is not None]
            row["max_abs_diff"] = max(diffs) if diffs else None
            row["label_mismatches"] = sum(e.get("mismatches", 0) for e in exact.values())
        if lib_ns and s.group != "library":
            row["speedup_vs_library"] = lib_ns / row["ns_per_row_1t"]
    except Skip as exc:
        row.update(status="skipped", note=str(exc))
    except Exception as exc:  # noqa: BLE001 - one broken strategy must not end the benchmark
        row.update(status="skipped", note=f"{type(exc).__name__}: {exc}"[:600])
        if os.environ.get("TREECOMP_BENCH_DEBUG"):
            traceback.print_exc()
    return row


def distinct_batches(X: np.ndarray, b: int) -> list[np.ndarray]:
    """Up to 64 distinct batches of b consecutive rows of X (contiguous copies), for latency
    calls to cycle through: one batch repeated would let the branch predictors learn its paths
    (flattering branchy code: 13 vs 41 us a row on lgbm-binary's llvm)."""
    return [np.ascontiguousarray(X[i:i + b]) for i in range(0, min(len(X) - b + 1, 64 * b), b)]


#: rounds of the side-by-side throughput pass: at least this many, and at most
THROUGHPUT_ROUNDS = (5, 40)


def measure_throughput(strats: list[Strategy], X: np.ndarray, st: Settings) -> dict[str, dict]:
    """One-thread batch throughput of every strategy in `strats` side by side: one warm-up call
    each on the whole of X, then rounds in which every strategy in turn makes one call on the
    whole of X, the order reversed every other round, until every strategy has had
    THROUGHPUT_ROUNDS[0] calls and st.budget_s of calls per strategy is spent (at most
    THROUGHPUT_ROUNDS[1] rounds): all engines see the same minutes of the machine, so a drift in
    its speed (other tenants of a virtual machine's host) moves all of them, not the one timed
    at that moment, and the ratios between engines hold. All strategies' thread settings are at
    1 over the whole pass.

    Returns {name: {"ns_per_row_1t": median ns/row, "throughput_rounds": n}}, or
    {"throughput_note": why} for a strategy whose call raised (it leaves the pass)."""
    out: dict[str, dict] = {}
    times: dict[str, list[float]] = {}
    with contextlib.ExitStack() as stack:
        for s in strats:
            stack.enter_context(s.threads(1))
        live = []
        for s in strats:  # warm-up
            try:
                s.run(X, 1)
                live.append(s)
                times[s.name] = []
            except Exception as exc:  # noqa: BLE001 - noted on the strategy's row
                out[s.name] = {"throughput_note": f"{type(exc).__name__}: {exc}"[:300]}
        start, k = time.perf_counter(), 0
        lo, hi = THROUGHPUT_ROUNDS
        while live and k < hi and (k < lo or time.perf_counter() - start < st.budget_s * len(live)):
            for s in (live if k % 2 == 0 else live[::-1]):
                t0 = time.perf_counter()
                try:
                    s.run(X, 1)
                except Exception as exc:  # noqa: BLE001
                    out[s.name] = {"throughput_note": f"{type(exc).__name__}: {exc}"[:300]}
                    continue
                times[s.name].append(time.perf_counter() - t0)
            live = [s for s in live if s.name not in out]
            k += 1
    for name, t in times.items():
        if t and name not in out:
            out[name] = {"ns_per_row_1t": float(np.median(t)) / len(X) * 1e9,
                         "throughput_rounds": len(t)}
    return out


def measure_latency(strats: list[Strategy], X: np.ndarray, st: Settings) -> dict[str, dict]:
    """Latency per call of every strategy in `strats` at each of st.batches (batch sizes above
    len(X) left out), side by side: for each batch size, one warm-up call each, then rounds in
    which every strategy in turn makes a block of single-threaded calls for about
    st.latency_budget_s / 8 (at least one call), each call on the strategy's next batch of the
    distinct batches it cycles through (:func:`distinct_batches`), the order of the strategies
    reversed every other round; rounds go on until st.latency_budget_s per strategy is spent
    and every strategy has st.min_reps calls timed (at most 20,000 calls a strategy). The first
    call of a block, made right after another engine's block has filled the caches with its
    own data, is dropped where the block made more than one: each figure is a warm call, as an
    engine called in a loop makes, while all engines see the same minutes of the machine. All
    strategies' thread settings are at 1 over the whole pass.

    Returns {name: {"latency_us": {str(b): median us}}}, plus "latency_note" for a strategy whose
    call raised (it leaves the pass; the others go on)."""
    out: dict[str, dict] = {s.name: {"latency_us": {}} for s in strats}
    failed: set[str] = set()
    block_s = st.latency_budget_s / 8

    def fail(s: Strategy, exc: Exception) -> None:
        failed.add(s.name)
        out[s.name]["latency_note"] = f"{type(exc).__name__}: {exc}"[:300]

    with contextlib.ExitStack() as stack:
        for s in strats:
            stack.enter_context(s.threads(1))
        for b in st.batches:
            if b > len(X):
                continue
            chunks = distinct_batches(X, b)
            live = []
            for s in strats:  # warm-up
                if s.name in failed:
                    continue
                try:
                    s.run(chunks[0], 1)
                    live.append(s)
                except Exception as exc:  # noqa: BLE001 - noted on the strategy's row
                    fail(s, exc)
            times: dict[str, list[float]] = {s.name: [] for s in live}
            calls = {s.name: 1 for s in live}   # the next batch of each: chunks[calls % n]
            budget = st.latency_budget_s * len(live)
            start, k = time.perf_counter(), 0
            while live and (time.perf_counter() - start < budget
                            or min(len(times[s.name]) for s in live) < st.min_reps):
                for s in (live if k % 2 == 0 else live[::-1]):
                    block: list[float] = []
                    t_end = time.perf_counter() + block_s
                    while not block or (time.perf_counter() < t_end and calls[s.name] < 20000):
                        Xb = chunks[calls[s.name] % len(chunks)]
                        calls[s.name] += 1
                        t0 = time.perf_counter()
                        try:
                            s.run(Xb, 1)
                        except Exception as exc:  # noqa: BLE001
                            fail(s, exc)
                            break
                        block.append(time.perf_counter() - t0)
                    times[s.name] += block[1:] if len(block) > 1 else block
                live = [s for s in live if s.name not in failed and calls[s.name] < 20000]
                k += 1
            for name, t in times.items():
                if t and name not in failed:
                    out[name]["latency_us"][str(b)] = float(np.median(t)) * 1e6
    return out


def latency_table(rows: list[dict], auto: str | None, batches: list[int]) -> list[dict]:
    """The case's latency table: per batch size, treecomp as ``treecomp.compile`` builds it (the
    strategy named `auto`, the backend ``auto`` picks; where that was not measured, the fastest
    treecomp strategy at that batch size, flagged "auto": False) beside the fastest of the other
    engines (groups library and external) at the same batch size, and how many times faster
    treecomp is. `rows` are the case's strategy rows."""
    ok = [r for r in rows if r["status"] == "ok" and r.get("latency_us")]
    out = []
    for b in batches:
        key = str(b)

        def fastest(group: tuple[str, ...]) -> dict | None:
            cand = [r for r in ok if r["group"] in group and key in r["latency_us"]
                    and b not in r.get("latency_extrapolated", [])]
            return min(cand, key=lambda r: r["latency_us"][key]) if cand else None
        tc = next((r for r in ok if r["name"] == auto and key in r["latency_us"]), None)
        is_auto = tc is not None
        tc = tc or fastest(("treecomp",))
        other = fastest(("library", "external"))
        if tc is None and other is None:
            continue
        ent: dict[str, Any] = {"batch": b}
        if tc is not None:
            ent.update(treecomp=tc["name"], auto=is_auto, treecomp_us=tc["latency_us"][key])
        if other is not None:
            ent.update(other=other["name"], other_label=other["label"], other_us=other["latency_us"][key])
        if tc is not None and other is not None:
            ent["other_over_treecomp"] = other["latency_us"][key] / tc["latency_us"][key]
        out.append(ent)
    return out


def node_steps(forest: Any, X: np.ndarray, max_rows: int = STEP_ROWS) -> dict:
    """The node steps a row takes: the sum over the trees of the depth of the leaf the row
    reaches (one comparison per level), averaged over the first `max_rows` rows of X, counted
    with the interpreter (treecomp.interp.leaf_indices, the IR's reference semantics):
    {"node_steps_per_row", "node_steps_rows"}."""
    from treecomp import interp
    from treecomp.inputs import as_matrix
    X64 = as_matrix(X[:max_rows], forest).astype(np.float64)
    strict = forest.comparison == "<"
    total = 0
    for t in forest.trees:
        if t.n_nodes > 1:
            total += int(t.depths()[interp.leaf_indices(t, X64, strict, forest.category_rule)].sum())
    return {"node_steps_per_row": total / max(1, len(X64)), "node_steps_rows": int(len(X64))}


def add_cycles(rows: list[dict], ghz: float | None, steps: float | None) -> None:
    """Cycles per row (1-thread ns/row x the core's clock in GHz) and per node step (over
    `steps`, the node steps a row takes) on every measured row."""
    if not ghz:
        return
    for r in rows:
        if r["status"] == "ok" and r.get("ns_per_row_1t"):
            r["cycles_per_row"] = r["ns_per_row_1t"] * ghz
            if steps:
                r["cycles_per_step"] = r["cycles_per_row"] / steps


def thread_scaling(s: Strategy, X: np.ndarray, k: int, st: Settings) -> dict:
    """How a strategy scales to k threads, robust to a shared machine's drift: calls alternate
    between 1 thread and k threads, and the median of the pairs' ratios is reported
    ("scaling_paired"). For treecomp strategies a third call in each round runs k independent
    one-thread calls on the whole batch at once: k times their time alone, over their time
    together ("ceiling_paired"), is what k cores give this very kernel at that moment (no split,
    no shared output), so a shortfall of the first figure below the second is treecomp's and the
    rest is the machine's."""
    ceiling = getattr(s, "predictor", None) is not None
    pool = concurrent.futures.ThreadPoolExecutor(k) if ceiling else None

    def one(n_threads: int) -> float:
        with s.threads(n_threads):
            t0 = time.perf_counter()
            s.run(X, n_threads)
            return time.perf_counter() - t0

    def together() -> float:
        t0 = time.perf_counter()
        for f in [pool.submit(s.run, X, 1) for _ in range(k)]:
            f.result()
        return time.perf_counter() - t0

    try:
        one(k)  # warm-up (the predictor's thread pool)
        if ceiling:
            together()  # ... and this one's
        scal, ceil, tk = [], [], []
        start = time.perf_counter()
        while len(scal) < max(5, st.min_reps) or (time.perf_counter() - start < 2 * st.budget_s
                                                  and len(scal) < 25):
            t1 = one(1)
            tk.append(one(k))
            scal.append(t1 / tk[-1])
            if ceiling:
                ceil.append(k * t1 / together())
    finally:
        if pool is not None:
            pool.shutdown()
    out = {"scaling_paired": float(np.median(scal)), "scaling_pairs": len(scal),
           "_t_all": float(np.median(tk))}  # seconds per k-thread call (the all-cores column)
    if ceil:
        out["ceiling_paired"] = float(np.median(ceil))
    return out


def _fmt_ns(v: float | None) -> str:
    return "-" if v is None else (f"{v:,.0f}" if v >= 100 else f"{v:.3g}")


def run_case(case: Any, strats: list[Strategy], settings: Settings, tmp: Path, idx: str,
             setup: dict, shap: bool = False) -> dict:
    """Every figure of every strategy in `strats` on one case (a
    :class:`treecomp.benchmark.cases.BenchCase`), as the dict results.json keeps per case:
    the library first (its ns/row is the denominator of every speedup), then the others in
    order; and the SHAP comparison when `shap` is true. `tmp` is a scratch folder, `idx` the
    progress tag ("2/9"), `setup` the backends' one-time setup figures (filled on first use)."""
    import treecomp
    from treecomp import interp
    res: dict[str, Any] = {"name": case.name, "title": case.title, "params": case.params,
                           "n_rows": int(len(case.X)), "n_features": int(case.X.shape[1]),
                           "library": case.library.name if case.library else None,
                           "library_call": case.library.call if case.library else None,
                           "strategies": []}
    tag = f"[{idx} {case.name}]"
    try:
        t0 = time.perf_counter()
        forest = treecomp.parse(case.model)
        res["parse_s"] = time.perf_counter() - t0
    except Exception as exc:  # noqa: BLE001 - unsupported: only the library (and others) run
        forest = None
        res["parse_error"] = f"{type(exc).__name__}: {exc}"[:600]
        log(f"{tag} treecomp cannot parse this model: {res['parse_error']}")
    if forest is not None:
        res.update(forest.stats())
        res["n_outputs"] = forest.n_outputs
        res["input_dtype"], res["accumulate_dtype"] = forest.input_dtype, forest.accumulate_dtype
        ir_path = tmp / f"{case.name}.tcir"
        forest.save(ir_path)
    else:
        ir_path = tmp / "none.tcir"
    ctx = CaseContext(case, forest, ir_path, tmp, settings, os.cpu_count() or 1, setup)
    # the reference outputs
    n_ref = min(settings.exact_rows, len(case.X))
    Xe = case.X[:n_ref]
    if case.library is not None:
        ref = {k: fn(Xe) for k, fn in case.library.outputs.items()}
        res["reference"] = case.library.name
    elif forest is not None:
        ref = {"raw": from_raw(forest, interp.predict_raw(forest, Xe), ["raw"])["raw"]}
        res["reference"] = "treecomp interpreter"
    else:
        ref = {}
    res["reference_kinds"] = list(ref)
    # the library first: its ns/row is the denominator of every speedup
    order = sorted(strats, key=lambda s: s.group != "library")
    lib_ns = None
    rows = {}
    for s in order:
        if forest is None and s.group in ("baseline", "treecomp"):
            rows[s.name] = {"name": s.name, "label": s.label, "group": s.group, "status": "skipped",
                            "note": "treecomp cannot parse this model: " + res["parse_error"]}
            continue
        log(f"{tag} {s.name} ...")
        t_s = time.perf_counter()
        row = measure_strategy(s, ctx, ref, n_ref, lib_ns, preview=not s.slow)
        row["bench_s"] = time.perf_counter() - t_s
        if s.group == "library" and row["status"] == "ok":
            lib_ns = row["ns_per_row_1t"]
        rows[s.name] = row
        if row["status"] == "ok":
            vs = f" vs {res['reference']}" if res.get("reference") else ""
            ex = f"bit-exact{vs}" if row.get("bit_exact") else (
                f"max diff {row.get('max_abs_diff')}{vs}" if row.get("exact") else "not compared")
            comp = f"compile {row['compile_s']:.2f} s, " if row.get("compile_s") is not None else ""
            first = ", one call: timed side by side below" if not s.slow else ""
            log(f"{tag} {s.name}: {comp}{_fmt_ns(row['ns_per_row_1t'])} ns/row (1 thread{first}), "
                f"{_fmt_ns(row.get('ns_per_row_all'))} ns/row (all cores), {ex} [{row['bench_s']:.1f} s]")
        else:
            log(f"{tag} {s.name}: skipped ({row['note']})")
    # one-thread throughput: every strategy but the slow baselines, side by side
    fast = [s for s in strats if s.name in rows and rows[s.name]["status"] == "ok" and not s.slow]
    if fast:
        log(f"{tag} batch throughput side by side ({', '.join(s.name for s in fast)}) ...")
        t_b = time.perf_counter()
        for name, fig in measure_throughput(fast, case.X, settings).items():
            r = rows[name]
            r["ns_per_row_1t_one_call"] = r["ns_per_row_1t"]
            if ctx.n_cores <= 1 and r.get("ns_per_row_all") == r["ns_per_row_1t"]:
                r["ns_per_row_all"] = fig.get("ns_per_row_1t", r["ns_per_row_all"])  # one core
            r.update(fig)
        res["throughput_s"] = time.perf_counter() - t_b
        log(f"{tag} 1 thread, ns/row: " + ", ".join(
            f"{s.name} {_fmt_ns(rows[s.name]['ns_per_row_1t'])}" for s in fast)
            + f" [{res['throughput_s']:.1f} s]")
        lib = rows.get("library", {})
        lib_ns = lib.get("ns_per_row_1t") if lib.get("status") == "ok" else None
        for r in rows.values():
            if lib_ns and r["status"] == "ok" and r["group"] != "library":
                r["speedup_vs_library"] = lib_ns / r["ns_per_row_1t"]
    walker = rows.get("walker", {}).get("ns_per_row_1t")
    lib_all = rows.get("library", {}).get("ns_per_row_all")
    for r in rows.values():
        if r["status"] != "ok":
            continue
        if walker:
            r["speedup_vs_walker"] = walker / r["ns_per_row_1t"]
        if lib_all and r.get("ns_per_row_all") and r["group"] != "library":
            r["speedup_vs_library_all"] = lib_all / r["ns_per_row_all"]
    # latency per batch size: every strategy but the slow baselines, side by side
    if fast:
        log(f"{tag} latency per batch size ({', '.join(s.name for s in fast)}) ...")
        t_l = time.perf_counter()
        for name, lat in measure_latency(fast, case.X, settings).items():
            rows[name].update(lat, latency_extrapolated=[])
        res["latency_s"] = time.perf_counter() - t_l
    res["strategies"] = [rows[s.name] for s in strats if s.name in rows]
    if forest is not None:
        from treecomp import backends
        try:
            res["auto_backend"] = backends.choose(forest)
        except Exception as exc:  # noqa: BLE001 - the table then shows the fastest treecomp row
            log(f"{tag} backend='auto' chooses nothing here: {type(exc).__name__}: {exc}")
        try:
            res.update(node_steps(forest, case.X))
        except Exception as exc:  # noqa: BLE001 - no step count: cycles per row only
            log(f"{tag} node steps not counted: {type(exc).__name__}: {exc}")
    res["latency_table"] = latency_table(res["strategies"], res.get("auto_backend"),
                                         list(settings.batches))
    add_cycles(res["strategies"], core_clock().get("ghz"), res.get("node_steps_per_row"))
    lib_model = case.library.model if case.library is not None else None
    if shap and lib_model is not None and top_module(lib_model) in ("xgboost", "lightgbm"):
        log(f"{tag} SHAP contributions ...")
        try:
            res["shap"] = measure_shap(ctx)
            for e in res["shap"]["engines"]:
                log(f"{tag} SHAP {e['name']}: " + (f"{e['ms_per_row']:.3f} ms/row (1 thread)"
                                                  if e["status"] == "ok" and "ms_per_row" in e
                                                  else f"skipped ({e.get('note')})"))
        except Skip as exc:
            res["shap"] = {"status": "skipped", "note": str(exc)}
        except Exception as exc:  # noqa: BLE001 - as a strategy: noted, never fatal
            res["shap"] = {"status": "skipped", "note": f"{type(exc).__name__}: {exc}"[:600]}
    return res


# -- the whole run ------------------------------------------------------------------------------
def machine() -> dict:
    """The host, Python, treecomp and the versions of the libraries and engines installed."""
    import treecomp
    info: dict[str, Any] = {"cpu": platform.processor() or platform.machine(), "cores": os.cpu_count(),
                            "python": platform.python_version(), "platform": platform.platform(),
                            "numpy": np.__version__, "treecomp": treecomp.__version__,
                            "date": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    info["cpu"] = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    for mod, key in (("sklearn", "scikit-learn"), ("xgboost", "xgboost"), ("lightgbm", "lightgbm"),
                     ("llvmlite", "llvmlite")):
        try:
            info[key] = __import__(mod).__version__
        except Exception:  # noqa: BLE001 - absent library: simply not listed
            pass
    # the other engines, by distribution (no import: daal4py's own __version__ is absent and a
    # broken install must not stop the run)
    for key, dists in (("lleaves", ("lleaves",)), ("daal4py", ("scikit-learn-intelex", "daal4py")),
                       ("onnxruntime", ("onnxruntime",)), ("tl2cgen", ("tl2cgen",))):
        v = dist_version(*dists)
        if v:
            info[key] = v
    try:
        from treecomp import toolchain
        info["compiler"] = toolchain.find_compiler().version
    except Exception:  # noqa: BLE001
        info["compiler"] = None
    return info


def parse_args(argv: list[str]) -> argparse.Namespace:
    """`treecomp bench`'s arguments (argparse: SystemExit on --help or a usage error)."""
    p = argparse.ArgumentParser(prog="treecomp bench", description=(
        "Benchmark treecomp against the Python walker, the interpreter, the source library and "
        "other tree compilers; writes report.md, PNG plots and results.json."))
    p.add_argument("model", nargs="?", help="a model file treecomp.parse accepts (default: the "
                   "standard cases); a pickle also measures the library's own predict")
    p.add_argument("--quick", action="store_true", help="smaller cases (about a minute in all)")
    p.add_argument("--output-dir", "--out", dest="output_dir", metavar="DIR", default=None,
                   help=f"where report.md, the PNG plots and results.json go (default: "
                   f"./{DEFAULT_OUT_NAME} in the current directory; --out is the same option)")
    p.add_argument("--data", help="rows for MODEL: a .npy or numeric .csv file (default: synthetic "
                   "rows around the model's thresholds)")
    p.add_argument("--header", action=argparse.BooleanOptionalAction, default=None,
                   help="--data text file: its first line is a header (--header) or data "
                   "(--no-header); default: decided as `treecomp predict` does, refusing what "
                   "is ambiguous")
    p.add_argument("--delimiter", default=",", help="--data text file: the character between "
                   "fields (default ',')")
    p.add_argument("--cases", help="comma-separated case names (see --list)")
    p.add_argument("--strategies", help="comma-separated strategy names (see --list)")
    p.add_argument("--rows", type=int, help="test rows per case (default 100000; quick 8000)")
    p.add_argument("--no-plots", action="store_true", help="skip the PNG plots")
    p.add_argument("--compile-limit", type=float, metavar="S", help="stop any engine's build of "
                   "one model after S seconds (treecomp's backends, TL2cgen's gcc, lleaves); the "
                   "row says so (default 600; quick 300)")
    p.add_argument("--list", action="store_true", help="list cases and strategies, then exit")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """`treecomp bench` (also `python -m treecomp.benchmark`, and `python -m bench` in a source
    checkout): returns a process exit code."""
    from . import cases as C
    from . import plots, report
    try:
        args = parse_args(list(sys.argv[1:] if argv is None else argv))
    except SystemExit as exc:  # argparse: --help or a usage error
        return int(exc.code or 0)
    selected = [s.strip() for s in args.strategies.split(",") if s.strip()] if args.strategies else None
    shap = selected is None or "shap" in selected
    try:
        strats = strategies([s for s in selected if s != "shap"] if selected else None)
        if selected == ["shap"]:
            strats = []
    except ValueError as exc:
        log(f"error: {exc}")
        return 2
    if args.list:
        print("cases:", ", ".join(C.case_names()), "(and 'tiny')")
        print("strategies:", ", ".join(s.name for s in strategies()), "(and 'shap': the SHAP "
              "contributions of XGBoost and LightGBM cases beside the libraries' and oneDAL's)")
        return 0
    if args.rows is not None and args.rows < 1:
        log("error: --rows must be >= 1")
        return 2
    if args.compile_limit is not None and args.compile_limit <= 0:
        log("error: --compile-limit must be > 0")
        return 2
    settings = Settings.for_mode(args.quick)
    if args.compile_limit is not None:
        settings = dataclasses.replace(settings, compile_timeout_s=args.compile_limit)
    started = time.perf_counter()
    tmp = Path(tempfile.mkdtemp(prefix="treecomp-bench-"))
    results: dict[str, Any] = {"mode": "quick" if args.quick else "full", "machine": machine(),
                               "batches": list(settings.batches), "cases": [], "skipped_cases": [],
                               "setup": {}, "compile_limit_s": settings.compile_timeout_s}
    clock = core_clock()
    results["machine"]["clock"] = clock
    if clock.get("ghz"):
        log(f"core clock {clock['ghz']:.2f} GHz ({clock['method']})"
            + (f"; TSC {clock['tsc_ghz']:.2f} GHz" if clock.get("tsc_ghz") else ""))
    else:
        log(f"note: {clock.get('note')}: the report gives no cycles")
    try:
        case_list: list[Any] = []
        if args.model:
            import treecomp
            if args.cases:
                log("note: --cases is ignored when a MODEL is given")
            try:
                forest = treecomp.parse(args.model)
                case_list.append(C.user_case(args.model, forest, args.data,
                                             n_rows=args.rows or (8000 if args.quick else 100_000), log=log,
                                             header=args.header, delimiter=args.delimiter))
            except (OSError, ValueError, treecomp.TreecompError) as exc:
                log(f"error: {args.model}: {type(exc).__name__}: {exc}")
                return 2
        else:
            if args.data:
                log("note: --data applies to a MODEL only; ignored")
            names = [n.strip() for n in args.cases.split(",") if n.strip()] if args.cases else C.case_names(args.quick)
            unknown = [n for n in names if n not in C.SPECS and n != "tiny"]
            if unknown:
                log(f"error: unknown cases {unknown}; available: {', '.join(C.case_names())}, tiny")
                return 2
            needed = sorted({(C.TINY if n == "tiny" else C.SPECS[n]).module for n in names})
            missing = [m for m in needed if not C.module_available(m)]
            if missing and len(missing) == len(needed):
                log(f"error: the benchmark cases need {', '.join(missing)}, not installed here: "
                    f"{install_hint(missing)} (or give a MODEL file)")
                return 2
            if missing:
                log(f"note: {', '.join(missing)} not installed: their cases are skipped "
                    f"({install_hint(missing)})")
            for i, name in enumerate(names, 1):
                spec = C.TINY if name == "tiny" else C.SPECS[name]
                if not C.available(spec):
                    results["skipped_cases"].append({"name": name, "note": f"{spec.module} is not installed"})
                    log(f"[{i}/{len(names)} {name}] skipped: {spec.module} is not installed")
                    continue
                t0 = time.perf_counter()
                with C.quiet():
                    case_list.append(C.build_case(name, quick=args.quick, n_rows=args.rows, log=log))
                log(f"[{i}/{len(names)} {name}] model ready in {time.perf_counter() - t0:.1f} s")
        for i, case in enumerate(case_list, 1):
            with C.quiet():
                results["cases"].append(run_case(case, strats, settings, tmp, f"{i}/{len(case_list)}",
                                                 results["setup"], shap=shap))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    results["wall_s"] = time.perf_counter() - started
    out = Path(args.output_dir) if args.output_dir else Path.cwd() / DEFAULT_OUT_NAME
    draw = not args.no_plots
    if draw and not plots.have_matplotlib():
        log(f"note: matplotlib is not installed: no plots ({EXTRA_HINT})")
        draw = False
    paths = report.write(results, out, plots=draw)
    print(report.summary(results))
    log(f"wrote {', '.join(str(p) for p in paths)} ({results['wall_s']:.0f} s)")
    return 0
