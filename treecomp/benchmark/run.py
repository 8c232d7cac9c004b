"""The benchmark runner: every strategy measured side by side, in one process, on the same rows.

Strategies (names usable with ``--strategies``):

- ``walker``: treecomp.interp.walk_raw, a pure-Python node-by-node walk, the baseline of the
  "x walker" ratios (the plots' reference where no library object was given). It is timed on a subsample sized to the time budget and scaled to ns/row; its latency
  at large batch sizes is extrapolated from that per-row figure (marked ``~`` in the report).
- ``interp``: treecomp.interp.predict_raw, the vectorised numpy reference interpreter.
- every backend in ``treecomp.backends.names()`` (``c``, and ``llvm`` / ``arrays`` where they
  exist), plus ``arrays-float`` (``layout="heap"``: the float walks, without the byte walks that
  ``auto`` picks) and ``arrays-naive`` (the arrays backend with ``layout="naive"``: the "native naive
  walk") when the arrays backend exists. A backend that raises is a skipped row with the reason.
- ``library``: the source library's own predict (XGBoost ``inplace_predict``, scikit-learn
  ``predict_proba`` / ``predict``, LightGBM ``Booster.predict``), at 1 thread and at all cores.
- ``tl2cgen``, ``onnxruntime``, ``lleaves``, ``daal4py``: other tree compilers / runtimes, when
  installed (never installed by the benchmark); otherwise a skipped row saying so.

How each figure is measured:

- compile: every treecomp compile runs cold in a process of its own with a fresh
  ``TREECOMP_CACHE_DIR`` holding no artifact of the model (forked from a fork server that has
  imported numpy and treecomp and done nothing else, so the imports are not paid per compile;
  a fresh interpreter where there is no fork server). A backend's once-per-machine work
  (the arrays backend's generic kernel) is timed separately, once per run, as its "setup" (see
  Backend). The child reports the build's wall time, the peak RSS growth of the compiling Python
  process (the kernel's high-water mark is reset through /proc/self/clear_refs right before the
  build, so the figure counts only the build, native allocations such as LLVM's included) and
  the peak RSS of the largest compiler/linker subprocess (``RUSAGE_CHILDREN`` of a process that
  ran nothing else; Linux carries the forking process's RSS into a child's high-water mark, so
  a figure not above the compiling process's own peak is shown as an upper bound, "<="). The parent then loads the same artifact from that cache in-process
  ("load"). Conversions of the other compilers (TL2cgen, ONNX, lleaves, daal4py) run in-process
  with the same high-water-mark reset. Parse time (library model -> treecomp IR) is per case.
- throughput: ``predict_proba(X, n_threads=k)`` (classifiers) or ``predict(X, n_threads=k)``
  (regressors) on the whole test matrix for k = 1 and k = all cores, so a treecomp figure
  includes the inverse link as the libraries' timed calls do (the library: its predict with
  nthread / n_jobs / num_threads = k; the walker and interpreter baselines give raw margins);
  one warm-up call, then repeated calls until the time budget is used (at least 3); the
  median, in ns per row.
- thread scaling: calls at 1 thread and at all cores alternate (at least 5 pairs) and the
  median pair ratio is kept (the all-cores throughput is the median of those pairs' all-cores
  calls, for every strategy not timed on a subsample); for treecomp strategies each round adds one one-thread call per
  core at once (the ceiling: what the cores give that kernel then, without treecomp's split).
- latency: one call on the first b rows for b in 1, 16, 256, 4096, single-threaded for every
  strategy (so the numbers compare code, not thread pools); median of repeated calls, in us.
  The walker and interpreter are called directly at a batch size only where one call fits the
  time budget; larger batches are scaled from their per-row figure (marked ``~``).
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
import datetime as _dt
import itertools
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np

# llvmlite < 0.45 (LLVM 15; lleaves needs it, see bench/compare-env.sh) parses the `ptr` type of
# treecomp's LLVM IR only in contexts made after LLVMLITE_ENABLE_OPAQUE_POINTERS=1 was set, and
# reads the variable once, when llvmlite is first imported: so it is set here, before any
# strategy imports llvmlite. lleaves 1.3 works in that mode too. llvmlite >= 0.45 has opaque
# pointers only and ignores the variable. Compile subprocesses inherit it.
os.environ.setdefault("LLVMLITE_ENABLE_OPAQUE_POINTERS", "1")

#: where the report goes by default: this folder in the current directory (``--output-dir``)
DEFAULT_OUT_NAME = "treecomp-bench"
#: the folder holding the treecomp package this module belongs to: compile subprocesses import
#: that very treecomp, whether it is installed or run from a source checkout
PACKAGE_PARENT = Path(__file__).resolve().parents[2]
#: what to install for the benchmark's libraries, plots and cases
EXTRA_HINT = "pip install 'treecomp[bench]'"
#: the case libraries the bench extra leaves out, and the extra that installs each
_OTHER_EXTRAS = {"catboost": "catboost"}


def install_hint(modules: Any) -> str:
    """What to pip install for the cases of `modules`: the bench extra (scikit-learn, XGBoost,
    LightGBM, plots), and the own extra of each library it does not hold (catboost)."""
    extras = sorted({_OTHER_EXTRAS.get(m, "bench") for m in modules}) or ["bench"]
    return "pip install " + " ".join(f"'treecomp[{e}]'" for e in extras)
BATCHES = (1, 16, 256, 4096)


class Skip(Exception):
    """A strategy that cannot run here (missing package, unsupported model): noted, not fatal."""


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# -- settings -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Settings:
    quick: bool
    budget_s: float        # time spent per throughput measurement (after the warm-up)
    latency_budget_s: float
    min_reps: int
    exact_rows: int        # rows used for the exactness check
    slow_budget_s: float   # a single call of the walker / interpreter aims at this long
    compile_timeout_s: float

    @classmethod
    def for_mode(cls, quick: bool) -> "Settings":
        if quick:
            return cls(quick=True, budget_s=0.05, latency_budget_s=0.02, min_reps=3,
                       exact_rows=4000, slow_budget_s=0.08, compile_timeout_s=300)
        return cls(quick=False, budget_s=0.6, latency_budget_s=0.15, min_reps=3, exact_rows=20000,
                   slow_budget_s=1.0, compile_timeout_s=1800)


def timed(fn: Callable[[], Any], budget_s: float, min_reps: int = 3, max_reps: int = 100_000,
          warmup: bool = True) -> float:
    """Median seconds per call of fn: a warm-up call, then calls until the budget is spent."""
    if warmup:
        fn()
    times = []
    start = time.perf_counter()
    while len(times) < max_reps and (len(times) < min_reps or time.perf_counter() - start < budget_s):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


# -- memory ---------------------------------------------------------------------------------------
def _status_kb(field: str) -> int | None:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def _reset_peak() -> bool:
    """Reset this process's peak RSS (VmHWM) to its current RSS (Linux >= 4.0)."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


@contextlib.contextmanager
def peak_rss():
    """Measures the peak RSS growth (MiB) of this process over the with-block: box['mib']."""
    box: dict[str, Any] = {"mib": None}
    rss0 = _status_kb("VmRSS")
    ok = _reset_peak() and rss0 is not None
    if not ok:  # fall back on ru_maxrss: exact only if the block sets a new high-water mark
        rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    try:
        yield box
    finally:
        hwm = _status_kb("VmHWM") if ok else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        if hwm is not None and rss0 is not None:
            box["mib"] = max(0, hwm - rss0) / 1024
        box["exact"] = ok


def _build_figures(spec: dict) -> dict:
    """Build spec["ir"] with spec["backend"] (options spec["options"]) in this process, which
    has done nothing else: its compile figures, or {"error": ...}."""
    out: dict[str, Any] = {}
    try:
        from treecomp import backends
        from treecomp.ir import Forest
        forest = Forest.load(spec["ir"])
        mod = backends.get(spec["backend"])
        with peak_rss() as mem:
            t0 = time.perf_counter()
            kernel = mod.build(forest, **spec["options"])
            out["compile_s"] = time.perf_counter() - t0
        out["compile_rss_mib"] = mem["mib"]
        # ru_maxrss of children: the largest compiler / linker process this child waited for.
        # Linux keeps a process's high-water mark across fork + exec, so a compiler's figure is
        # at least the RSS of this Python process when it forked it: a value not above this
        # process's own peak is only an upper bound of what the compiler itself used.
        kids = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        own = _status_kb("VmHWM") or resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        out["compiler_rss_mib"] = kids / 1024 if kids else None
        out["compiler_rss_upper_bound"] = bool(kids) and kids <= own * 1.05
        try:
            out["artifact_bytes"] = len(kernel.to_bytes())
        except Exception:  # noqa: BLE001 - a kernel without bytes (pure JIT) is still fine
            out["artifact_bytes"] = None
    except BaseException as exc:  # noqa: BLE001 - reported to the parent, which notes a skip
        out = {"error": f"{type(exc).__name__}: {exc}".strip()[:600]}
    return out


def compile_child() -> None:
    """Entry point of the compile subprocess: argv[1] is a JSON spec; prints one JSON line."""
    print("BENCH-RESULT " + json.dumps(_build_figures(json.loads(sys.argv[1]))), flush=True)


def _forked_compile(spec: dict, env: dict, cwd: str, conn: Any) -> None:
    """A compile in a process forked from the fork server (see _compile_in_subprocess)."""
    os.environ.clear()
    os.environ.update(env)
    os.chdir(cwd)
    null = os.open(os.devnull, os.O_WRONLY)  # as the subprocess's captured output: unseen
    os.dup2(null, 1)
    os.dup2(null, 2)
    conn.send(_build_figures(spec))
    conn.close()


#: modules the fork server imports once (numpy, treecomp, the backends); a compile process
#: forked from it starts with them imported, and nothing else done
_PRELOAD = ["treecomp.benchmark.run", "treecomp.backends.c", "treecomp.backends.arrays",
            "treecomp.backends.llvm"]
_FORK_CTX: Any = None


def _fork_context() -> Any:
    """multiprocessing's fork server context with _PRELOAD imported, or None where the platform
    has none (then every compile starts a fresh interpreter)."""
    global _FORK_CTX
    if _FORK_CTX is None:
        import multiprocessing
        _FORK_CTX = False
        if "forkserver" in multiprocessing.get_all_start_methods() and \
                os.environ.get("TREECOMP_BENCH_FORKSERVER", "1") != "0":
            ctx = multiprocessing.get_context("forkserver")
            ctx.set_forkserver_preload(_PRELOAD)
            _FORK_CTX = ctx
    return _FORK_CTX or None


def _compile_in_subprocess(ir_path: Path, backend: str, options: dict, cache: Path,
                           timeout: float) -> dict:
    """The compile figures of one cold build, in a process of its own with an empty cache.

    The process is forked from a fork server that has imported numpy and treecomp (once per
    benchmark run) and done nothing else: the build starts from the state a fresh interpreter
    has after those imports, without paying them again (a fresh interpreter took ~0.6 s to get
    there, 48 times in a quick run of the nine cases). Without a fork server (or with
    TREECOMP_BENCH_FORKSERVER=0) a fresh interpreter runs compile_child."""
    env = dict(os.environ)
    env["TREECOMP_CACHE_DIR"] = str(cache)
    spec = {"ir": str(ir_path), "backend": backend, "options": options}
    ctx = _fork_context()
    if ctx is not None:
        res = _compile_forked(ctx, spec, env, str(ir_path.parent), timeout)
    else:
        res = _compile_fresh(spec, env, str(ir_path.parent), timeout)
    if "error" in res:
        raise Skip(res["error"])
    return res


def _compile_forked(ctx: Any, spec: dict, env: dict, cwd: str, timeout: float) -> dict:
    recv, send = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_forked_compile, args=(spec, env, cwd, send))
    proc.start()
    send.close()
    try:
        if not recv.poll(timeout):
            proc.kill()
            proc.join()
            raise Skip(f"compile took over {timeout:.0f} s")
        try:
            return recv.recv()
        except EOFError:  # the process died without an answer (a crash, a signal)
            proc.join()
            raise Skip(f"compile process failed (exit {proc.exitcode})") from None
    finally:
        recv.close()
        proc.join()


def _compile_fresh(spec: dict, env: dict, cwd: str, timeout: float) -> dict:
    # The child imports the treecomp this process runs (installed, editable or a checkout on
    # sys.path): its folder goes first on the child's path unless the child finds it anyway.
    code = ("import sys; p = " + repr(str(PACKAGE_PARENT)) + "\n"
            "if p not in sys.path: sys.path.insert(0, p)\n"
            "from treecomp.benchmark.run import compile_child; compile_child()")
    try:
        proc = subprocess.run([sys.executable, "-c", code, json.dumps(spec)], capture_output=True,
                              text=True, timeout=timeout, env=env, cwd=cwd)
    except subprocess.TimeoutExpired:
        raise Skip(f"compile took over {timeout:.0f} s") from None
    for line in proc.stdout.splitlines():
        if line.startswith("BENCH-RESULT "):
            return json.loads(line[len("BENCH-RESULT "):])
    tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
    raise Skip(f"compile process failed (exit {proc.returncode}): {tail}")


@contextlib.contextmanager
def _env(name: str, value: str):
    old = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = old


# -- exactness ----------------------------------------------------------------------------------
def compare(ours: Any, ref: Any) -> dict:
    """Bit-exactness and max |difference| of one output against the library's."""
    if isinstance(ref, list):  # multi-output predict_proba: one array per target
        parts = [compare(o, r) for o, r in zip(ours, ref)] if isinstance(ours, list) and len(ours) == len(ref) \
            else [{"bit_exact": False, "max_abs_diff": None, "note": "different number of targets"}]
        diffs = [p["max_abs_diff"] for p in parts if p.get("max_abs_diff") is not None]
        return {"bit_exact": all(p["bit_exact"] for p in parts), "max_abs_diff": max(diffs) if diffs else None}
    ours, ref = np.asarray(ours), np.asarray(ref)
    if ours.shape != ref.shape:
        if ours.size != ref.size:
            return {"bit_exact": False, "max_abs_diff": None,
                    "note": f"shape {ours.shape} vs library {ref.shape}"}
        ours = ours.reshape(ref.shape)
    if ours.dtype.kind in "fc" and ref.dtype.kind in "fc":
        a, b = ours.astype(np.float64), ref.astype(np.float64)
        with np.errstate(invalid="ignore"):
            d = np.abs(a - b)
        na, nb = np.isnan(a), np.isnan(b)
        d[na & nb] = 0.0
        d[na ^ nb] = np.inf
        same = ours.dtype == ref.dtype and bool(np.all(d == 0)) \
            and bool(np.array_equal(np.signbit(ours), np.signbit(ref)))
        res = {"bit_exact": same, "max_abs_diff": float(d.max()) if d.size else 0.0}
        if ours.dtype != ref.dtype:
            res["note"] = f"dtype {ours.dtype} vs library {ref.dtype}"
        return res
    mism = int(np.count_nonzero(ours != ref)) if ours.shape == ref.shape else ours.size
    return {"bit_exact": mism == 0 and ours.dtype.kind == ref.dtype.kind, "mismatches": mism,
            "max_abs_diff": None}


def _slice(v: Any, n: int) -> Any:
    return [p[:n] for p in v] if isinstance(v, list) else np.asarray(v)[:n]


# -- strategies ---------------------------------------------------------------------------------
class Strategy:
    """One way of predicting. Subclasses fill in prepare / run / outputs."""

    name = "?"
    label = "?"
    group = "treecomp"          # baseline | treecomp | library | external
    threaded = True             # has a meaningful all-cores figure
    slow = False                # measured on a subsample sized to the time budget

    def prepare(self, ctx: "CaseContext") -> dict:
        """Build / convert; returns compile figures. Raises Skip when it cannot run here."""
        return {}

    def threads(self, k: int) -> Any:
        """A context manager around every timed block run with k threads (see Library)."""
        return contextlib.nullcontext()

    def run(self, X: np.ndarray, n_threads: int) -> Any:
        raise NotImplementedError

    def outputs(self, X: np.ndarray, kinds: list[str]) -> dict[str, Any]:
        """The strategy's answer on X in each of the library's output forms it can produce."""
        raise NotImplementedError


def _from_raw(head: Any, raw: np.ndarray, kinds: list[str]) -> dict[str, Any]:
    from treecomp import outputs
    res = {}
    for k in kinds:
        if k == "raw":
            res[k] = outputs.raw_output(head, raw)
        elif k == "proba" and head.is_classifier:
            res[k] = outputs.predict_proba(head, raw)
        elif k == "predict":
            res[k] = outputs.predict_values(head, raw)
    return res


class Walker(Strategy):
    name, label, group, threaded, slow = "walker", "python walker", "baseline", False, True

    def run(self, X, n_threads):
        from treecomp import interp
        return interp.walk_raw(self.forest, X)

    def prepare(self, ctx):
        self.forest = ctx.forest
        return {}

    def outputs(self, X, kinds):
        return _from_raw(self.forest, self.run(X, 1), kinds)


class Interp(Walker):
    name, label, group, threaded, slow = "interp", "numpy interpreter", "baseline", False, True

    def run(self, X, n_threads):
        from treecomp import interp
        return interp.predict_raw(self.forest, X)


def _seed_forest():
    """A one-split forest: building it makes a backend do its once-per-machine work."""
    from treecomp.ir import Forest, Tree
    tree = Tree(left=[1, -1, -1], right=[2, -1, -1], feature=[0, -1, -1], threshold=[0.5, 0, 0],
                default_left=[True, False, False], value=[0.0, 1.0, 2.0])
    return Forest(trees=(tree,), n_features=1, n_outputs=1, tree_output=[0], base_score=[0.0])


class Backend(Strategy):
    """A treecomp backend: cold compile in a subprocess, then the artifact loaded in-process.

    "Cold" means a fresh, empty artifact cache for the model. A backend's once-per-machine
    work (the arrays backend's generic kernel, built once per machine and compiler whatever
    the model) is done once per benchmark run in a seed cache, timed as the backend's "setup",
    and that seed cache is copied into every fresh cache, so per-model compile times count only
    per-model work.
    """

    def __init__(self, name: str, backend: str, options: dict | None = None, label: str | None = None):
        self.name, self.backend, self.options = name, backend, dict(options or {})
        self.label = label or f"treecomp {name}"
    def _setup(self, ctx) -> Path:
        # keyed by backend, not strategy: "arrays" and "arrays-naive" share one generic kernel
        seed = ctx.tmp / f"seed-{self.backend}"
        if seed.exists():
            return seed
        seed.mkdir(parents=True)
        ir = ctx.tmp / "seed.tcir"
        if not ir.exists():
            _seed_forest().save(ir)
        try:
            figs = _compile_in_subprocess(ir, self.backend, self.options, seed,
                                          ctx.settings.compile_timeout_s)
            ctx.setup[self.backend] = {"setup_s": figs["compile_s"], "files": len(list(seed.iterdir()))}
            log(f"  {self.backend}: one-time setup (trivial model, empty cache) {figs['compile_s']:.2f} s")
        except Skip as exc:
            ctx.setup[self.backend] = {"error": str(exc)}
        return seed

    def prepare(self, ctx):
        from treecomp import backends
        from treecomp.loader import Predictor
        seed = self._setup(ctx)
        cache = ctx.tmp / f"cache-{ctx.case.name}-{self.name}"
        if cache.exists():
            shutil.rmtree(cache)
        shutil.copytree(seed, cache)
        figs = _compile_in_subprocess(ctx.ir_path, self.backend, self.options, cache,
                                      ctx.settings.compile_timeout_s)
        with _env("TREECOMP_CACHE_DIR", str(cache)):
            t0 = time.perf_counter()
            try:
                kernel = backends.get(self.backend).build(ctx.forest, **self.options)
            except Exception as exc:  # noqa: BLE001 - the row says why
                raise Skip(f"{type(exc).__name__}: {exc}") from None
            figs["load_s"] = time.perf_counter() - t0
        self.predictor = Predictor(kernel)
        # timed: what the libraries' timed calls return (probabilities, transformed values)
        self._call = self.predictor.predict_proba if self.predictor.head.is_classifier \
            else self.predictor.predict
        return figs

    def run(self, X, n_threads):
        return self._call(X, n_threads=n_threads)

    def outputs(self, X, kinds):
        p, res = self.predictor, {}  # the Predictor's own answers (native inverse links included)
        for k in kinds:
            if k == "raw":
                res[k] = p.decision_function(X)
            elif k == "proba" and p.head.is_classifier:
                res[k] = p.predict_proba(X)
            elif k == "predict":
                res[k] = p.predict(X)
        return res


class LibraryPredict(Strategy):
    name, group = "library", "library"

    def prepare(self, ctx):
        if ctx.case.library is None:
            raise Skip("a bare model file: no library object to call (pass a pickle to measure it)")
        self.lib = ctx.case.library
        self.label = f"{self.lib.name} ({self.lib.call})"
        return {}

    def threads(self, k):
        return self.lib.threads(k)

    def run(self, X, n_threads):
        return self.lib.predict(X)   # the thread count is set by self.threads around the timing

    def outputs(self, X, kinds):
        return {k: self.lib.outputs[k](X) for k in kinds if k in self.lib.outputs}


def _top_module(obj: Any) -> str:
    for cls in type(obj).__mro__:
        top = (cls.__module__ or "").split(".")[0]
        if top in ("xgboost", "sklearn", "lightgbm"):
            return top
    return "?"


def _need(module: str, what: str):
    try:
        return __import__(module, fromlist=["_"])
    except ImportError as exc:
        if getattr(exc, "name", None) == module.split(".")[0]:
            raise Skip(f"{what} is not installed") from None
        raise Skip(f"{what} is installed but fails to import: {type(exc).__name__}: {exc}"
                   " (bench/compare-env.sh builds an environment where it imports)") from None
    except Exception as exc:  # noqa: BLE001 - e.g. daal4py 2024.7 against scikit-learn 1.9
        raise Skip(f"{what} is installed but fails to import: {type(exc).__name__}: {exc}"
                   " (bench/compare-env.sh builds an environment where it imports)") from None


def _dist_version(*dists: str) -> str | None:
    """The installed version of the first of these distributions that is installed."""
    from importlib import metadata
    for d in dists:
        try:
            return metadata.version(d)
        except metadata.PackageNotFoundError:
            continue
    return None


def _external_model(ctx) -> Any:
    if ctx.case.library is None or ctx.case.library.model is None:
        raise Skip("needs the library's model object")
    return ctx.case.library.model


class TL2cgen(Strategy):
    """Treelite + TL2cgen: the model exported as C, compiled with gcc, loaded as a Predictor."""

    name, label, group = "tl2cgen", "TL2cgen", "external"

    def prepare(self, ctx):
        tl2cgen = _need("tl2cgen", "tl2cgen")
        treelite = _need("treelite", "treelite (needed by tl2cgen)")
        model = _external_model(ctx)
        lib = _top_module(model)
        with peak_rss() as mem:
            t0 = time.perf_counter()
            if lib == "xgboost":
                booster = model.get_booster() if hasattr(model, "get_booster") else model
                tl = treelite.frontend.from_xgboost(booster)
            elif lib == "lightgbm":
                tl = treelite.frontend.from_lightgbm(model.booster_ if hasattr(model, "booster_") else model)
            else:
                tl = treelite.sklearn.import_model(model)
            path = ctx.tmp / f"tl2cgen-{ctx.case.name}.so"
            tl2cgen.export_lib(tl, toolchain="gcc", libpath=str(path),
                               params={"parallel_comp": os.cpu_count() or 1})
            compile_s = time.perf_counter() - t0
        self.tl2cgen = tl2cgen
        self.preds = {1: tl2cgen.Predictor(str(path), nthread=1),
                      ctx.n_cores: tl2cgen.Predictor(str(path), nthread=ctx.n_cores)}
        return {"compile_s": compile_s, "compile_rss_mib": mem["mib"],
                "artifact_bytes": path.stat().st_size}

    def _dm(self, X):
        return self.tl2cgen.DMatrix(X, dtype="float32" if X.dtype == np.float32 else "float64")

    def run(self, X, n_threads):
        return self.preds.get(n_threads, self.preds[1]).predict(self._dm(X))

    def outputs(self, X, kinds):
        p = self.preds[1]
        res = {}
        if "raw" in kinds:
            res["raw"] = p.predict(self._dm(X), pred_margin=True)
        for k in ("proba", "predict"):
            if k in kinds and not (k == "predict" and "proba" in kinds):
                v = np.asarray(p.predict(self._dm(X)))
                if k == "proba" and v.size == len(X):
                    # a binary classifier: TL2cgen 1.0 gives P(class 1) only, shaped (n, 1, 1);
                    # the libraries' predict_proba is (1 - p, p), in p's dtype
                    v = v.reshape(len(X))
                    v = np.stack((1 - v, v), axis=1)
                res[k] = v
        return res


class OnnxRuntime(Strategy):
    """skl2onnx / onnxmltools conversion, run by ONNX Runtime's CPU provider."""

    name, label, group = "onnxruntime", "ONNX Runtime", "external"

    def prepare(self, ctx):
        ort = _need("onnxruntime", "onnxruntime")
        model = _external_model(ctx)
        lib = _top_module(model)
        d = ctx.forest.n_features
        with peak_rss() as mem:
            t0 = time.perf_counter()
            if lib == "sklearn":
                skl2onnx = _need("skl2onnx", "skl2onnx")
                opts = {id(model): {"zipmap": False}} if hasattr(model, "predict_proba") else None
                onx = skl2onnx.to_onnx(model, ctx.case.X[:1].astype(np.float32), options=opts)
            else:
                _need("onnxmltools", "onnxmltools")
                from onnxmltools.convert.common.data_types import FloatTensorType
                types = [("X", FloatTensorType([None, d]))]
                if lib == "xgboost":
                    from onnxmltools import convert_xgboost
                    onx = convert_xgboost(model, initial_types=types)
                elif lib == "lightgbm":
                    from onnxmltools import convert_lightgbm
                    onx = convert_lightgbm(model, initial_types=types, zipmap=False)
                else:
                    raise Skip(f"no ONNX converter for {type(model).__name__}")
            data = onx.SerializeToString()
            self.sessions = {}
            for k in sorted({1, ctx.n_cores}):
                so = ort.SessionOptions()
                so.log_severity_level = 3   # errors only: onnxmltools' label shape warns per call
                so.intra_op_num_threads = k
                so.inter_op_num_threads = 1
                self.sessions[k] = ort.InferenceSession(data, so, providers=["CPUExecutionProvider"])
            compile_s = time.perf_counter() - t0
        self.input = self.sessions[1].get_inputs()[0].name
        self.clf = hasattr(model, "predict_proba")
        return {"compile_s": compile_s, "compile_rss_mib": mem["mib"], "artifact_bytes": len(data)}

    def run(self, X, n_threads):
        s = self.sessions.get(n_threads, self.sessions[1])
        return s.run(None, {self.input: np.asarray(X, np.float32)})

    def outputs(self, X, kinds):
        out = self.run(X, 1)
        res = {}
        if "predict" in kinds:
            res["predict"] = np.asarray(out[0]).reshape(len(X), -1).squeeze(1) \
                if np.asarray(out[0]).size == len(X) else out[0]
        if "proba" in kinds and self.clf and len(out) > 1:
            p = out[1]
            if isinstance(p, list):  # a ZipMap output: list of {class: proba}
                p = np.array([list(r.values()) for r in p])
            res["proba"] = p
        return res


class Lleaves(Strategy):
    """lleaves: LightGBM text models compiled through LLVM (llvmlite), in-process.

    Checked with lleaves 1.3.0 on llvmlite 0.44 (LLVM 15). lleaves builds its passes with
    llvmlite's legacy PassManagerBuilder, which llvmlite 0.45 removed: on a newer llvmlite its
    compile fails with AttributeError, reported here as a skip naming the pin. Its defaults are
    kept (as a user would run it): code for the host CPU (treecomp's default is generic x86-64),
    float64 arithmetic, input converted to float64 by lleaves itself (a copy for float32 rows,
    inside the timed call, as for any lleaves user). `predict(X, n_jobs=k)` runs k threads of
    its ThreadPoolExecutor (n_jobs=1: the calling thread). The objective (sigmoid / softmax) is
    compiled into the model; raw margins need a second model compiled with raw_score=True, which
    is built, untimed, only for the exactness check, with finline=False: inlining changes no
    arithmetic (lleaves sets no fast-math flags; same margins bit for bit, checked) and the
    build is ~2.5x shorter (a 500-tree model takes minutes with inlining).
    Not bit-exact in general: lleaves sums each block of `fblocksize` (default 34) trees from
    0.0 and then adds the block's sum to the row's total, where LightGBM adds tree by tree; with
    at most 34 trees (one block) the margins are LightGBM's bit for bit.
    """

    name, label, group = "lleaves", "lleaves", "external"

    def prepare(self, ctx):
        lleaves = _need("lleaves", "lleaves")
        lib = ctx.case.library
        if lib is None or not lib.model_file:
            raise Skip("lleaves only compiles LightGBM models")
        self.label = f"lleaves {_dist_version('lleaves') or '?'}"
        self.lleaves, self.model_file = lleaves, lib.model_file
        self.obj = ctx.tmp / f"lleaves-{ctx.case.name}.o"
        if self.obj.exists():
            self.obj.unlink()                     # a cache hit would skip the compile
        try:
            with peak_rss() as mem:
                t0 = time.perf_counter()
                self.m = lleaves.Model(model_file=lib.model_file)
                self.m.compile(cache=str(self.obj))
                compile_s = time.perf_counter() - t0
        except AttributeError as exc:
            if "PassManagerBuilder" in str(exc):
                raise Skip(f"lleaves needs llvmlite<0.45 (installed: {_dist_version('llvmlite')}): "
                           f"{exc}; use bench/compare-env.sh") from None
            raise
        self.m_raw = None
        self.clf = hasattr(lib.model, "predict_proba")
        return {"compile_s": compile_s, "compile_rss_mib": mem["mib"],
                "artifact_bytes": self.obj.stat().st_size if self.obj.exists() else None}

    def run(self, X, n_threads):
        return self.m.predict(X, n_jobs=n_threads)

    def outputs(self, X, kinds):
        res = {}
        if "raw" in kinds:
            if self.m_raw is None:
                self.m_raw = self.lleaves.Model(model_file=self.model_file)
                self.m_raw.compile(raw_score=True, finline=False)
            res["raw"] = self.m_raw.predict(X, n_jobs=1)
        p = self.run(X, 1)
        if "proba" in kinds and self.clf and p.ndim == 1:
            res["proba"] = np.vstack((1.0 - p, p)).transpose()  # LGBMClassifier's own layout
        elif "proba" in kinds and self.clf:
            res["proba"] = p
        elif "predict" in kinds and not self.clf:
            res["predict"] = p
        return res


class Daal4py(Strategy):
    """daal4py (oneDAL) model builders for gradient-boosted models.

    Checked with daal4py from scikit-learn-intelex 2026.2.0 (the daal4py package ships inside
    that wheel since 2025; the last separate daal4py wheel is 2024.7, older than scikit-learn
    1.9). `mb.convert_model(booster)` builds a oneDAL GBT model ("compile"); predictions run in
    the rows' dtype (float32 rows: oneDAL's fptype="float"; float64 rows: "double"), the rows
    being passed as the case gives them, as a user would. oneDAL's thread count is process-wide,
    set with `daalinit(k)` around each timed block. It offers class probabilities, labels and
    regression values, no raw margin, so exactness is checked on those. Not bit-exact: against
    LightGBM (float64 sums) float32 rows give probabilities ~4e-7 apart and even float64 rows
    ~1e-8; against XGBoost about half the rows differ by 1 ulp of the float32 probability.
    """

    name, label, group = "daal4py", "daal4py", "external"

    def prepare(self, ctx):
        d4p = _need("daal4py", "daal4py")
        model = _external_model(ctx)
        lib = _top_module(model)
        if lib not in ("xgboost", "lightgbm"):
            raise Skip("daal4py's model builders convert XGBoost and LightGBM models")
        src = model.get_booster() if hasattr(model, "get_booster") else (
            model.booster_ if hasattr(model, "booster_") else model)
        ver = _dist_version("scikit-learn-intelex", "daal4py")
        self.label = f"daal4py (scikit-learn-intelex {ver})" if ver else "daal4py"
        with peak_rss() as mem:
            t0 = time.perf_counter()
            self.m = d4p.mb.convert_model(src)
            compile_s = time.perf_counter() - t0
        self.d4p = d4p
        self.all_threads = d4p.num_threads()
        self.clf = hasattr(model, "predict_proba")
        return {"compile_s": compile_s, "compile_rss_mib": mem["mib"]}

    @contextlib.contextmanager
    def threads(self, k):
        self.d4p.daalinit(int(k))
        try:
            yield
        finally:
            self.d4p.daalinit(self.all_threads)

    def run(self, X, n_threads):
        return self.m.predict_proba(X) if self.clf else self.m.predict(X)

    def outputs(self, X, kinds):
        res = {}
        if "proba" in kinds and self.clf:
            res["proba"] = self.m.predict_proba(X)
        if "predict" in kinds:
            res["predict"] = self.m.predict(X)
        return res


# -- SHAP contributions --------------------------------------------------------------------------
#: rows of the SHAP comparison (quick mode, full mode)
SHAP_ROWS = (64, 512)


def _shap_engines(model: Any, lib: Any, X: np.ndarray) -> tuple[list, list]:
    """(name, label, call) of every TreeSHAP engine besides treecomp that runs here on `model`,
    each call single-threaded; and (name, note) for those that do not."""
    engines, skipped = [], []
    top = _top_module(model)
    if top == "xgboost":
        import xgboost as xgb
        booster = model.get_booster() if hasattr(model, "get_booster") else model
        dm = xgb.DMatrix(X, nthread=1)
        engines.append(("library", f"{lib.name} Booster.predict(pred_contribs=True)",
                        lambda: booster.predict(dm, pred_contribs=True)))
    else:
        booster = model.booster_ if hasattr(model, "booster_") else model
        engines.append(("library", f"{lib.name} Booster.predict(pred_contrib=True)",
                        lambda: booster.predict(X, pred_contrib=True, num_threads=1)))
    try:
        d4p = _need("daal4py", "daal4py")
        m = d4p.mb.convert_model(booster)
        ver = _dist_version("scikit-learn-intelex", "daal4py")
        engines.append(("daal4py", f"daal4py{f' (scikit-learn-intelex {ver})' if ver else ''} "
                        "mb.convert_model(booster).predict(X, pred_contribs=True)",
                        lambda: m.predict(X, pred_contribs=True)))
    except Skip as exc:
        skipped.append(("daal4py", str(exc)))
    except Exception as exc:  # noqa: BLE001 - a conversion this version refuses
        skipped.append(("daal4py", f"{type(exc).__name__}: {exc}"[:300]))
    return engines, skipped


def measure_shap(ctx: CaseContext) -> dict:
    """SHAP contributions (path-dependent TreeSHAP) of an XGBoost or LightGBM case on one thread:
    treecomp's Predictor.contributions (arrays backend) beside the library's own (XGBoost
    pred_contribs, LightGBM pred_contrib) and oneDAL's (daal4py's model builder) where it
    imports. One warm-up call each (treecomp's prepares its tables: timed apart), then rounds of
    one call per engine in turn, at least min_reps rounds and until the time budget; medians.
    Each engine's values against treecomp's: the largest difference over the row's sum of
    |values| (the bound treecomp.shap documents)."""
    st = ctx.settings
    model = _external_model(ctx)
    if ctx.forest is None or _top_module(model) not in ("xgboost", "lightgbm"):
        raise Skip("the SHAP comparison runs on XGBoost and LightGBM cases")
    import treecomp
    n = min(SHAP_ROWS[0] if st.quick else SHAP_ROWS[1], len(ctx.case.X))
    X = np.ascontiguousarray(ctx.case.X[:n])
    pred = treecomp.compile(ctx.forest, backend="arrays")
    t0 = time.perf_counter()
    pred.contributions(X[:1], n_threads=1)
    res: dict[str, Any] = {"n_rows": n, "prepare_s": time.perf_counter() - t0, "engines": []}
    engines, skipped = _shap_engines(model, ctx.case.library, X)
    isa = getattr(pred.__dict__.get("_explainer"), "isa", "?")  # the SHAP kernel's path
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


def strategies(selected: list[str] | None = None) -> list[Strategy]:
    """All strategies, in report order (filtered by name when `selected` is given)."""
    from treecomp import backends
    out: list[Strategy] = [Walker(), Interp()]
    names = backends.names()
    for b in names:
        out.append(Backend(b, b))
    if "arrays" in names:
        # the float walks the byte walks replaced (heap where a tree allows, node tables
        # otherwise): what quantisation buys, measured side by side
        out.append(Backend("arrays-float", "arrays", {"layout": "heap"}, "treecomp arrays, float walks"))
        out.append(Backend("arrays-naive", "arrays", {"layout": "naive"}, "treecomp arrays, native naive walk"))
    out.append(LibraryPredict())
    out += [TL2cgen(), OnnxRuntime(), Lleaves(), Daal4py()]
    if selected:
        known = {s.name for s in out}
        unknown = [s for s in selected if s not in known]
        if unknown:
            raise ValueError(f"unknown strategies {unknown}; available: {', '.join(s.name for s in out)}")
        out = [s for s in out if s.name in selected]
    return out


# -- one case -----------------------------------------------------------------------------------
@dataclass
class CaseContext:
    case: Any
    forest: Any
    ir_path: Path
    tmp: Path
    settings: Settings
    n_cores: int
    setup: dict        # per backend strategy: its one-time setup figures (shared by all cases)


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
                     lib_ns: float | None) -> dict:
    """Every figure of one strategy on one case."""
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
                t = timed(lambda: s.run(X, 1), st.budget_s, st.min_reps)
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
        # latency
        lat, extrap = {}, []
        for b in BATCHES:
            if b > len(X):
                continue
            if s.slow and b > 16 and row["ns_per_row_1t"] * b * 1e-9 > st.slow_budget_s:
                lat[str(b)] = row["ns_per_row_1t"] * b / 1e3   # too slow to repeat: scaled
                extrap.append(b)
                continue
            # distinct batches in turn: one batch repeated would let the branch predictors
            # learn its paths (flattering branchy code: 13 vs 41 us a row on lgbm-binary's llvm)
            nxt = itertools.cycle([np.ascontiguousarray(X[i:i + b])
                                   for i in range(0, min(len(X) - b + 1, 64 * b), b)]).__next__
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
        ref = {"raw": _from_raw(forest, interp.predict_raw(forest, Xe), ["raw"])["raw"]}
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
        row = measure_strategy(s, ctx, ref, n_ref, lib_ns)
        row["bench_s"] = time.perf_counter() - t_s
        if s.group == "library" and row["status"] == "ok":
            lib_ns = row["ns_per_row_1t"]
        rows[s.name] = row
        if row["status"] == "ok":
            vs = f" vs {res['reference']}" if res.get("reference") else ""
            ex = f"bit-exact{vs}" if row.get("bit_exact") else (
                f"max diff {row.get('max_abs_diff')}{vs}" if row.get("exact") else "not compared")
            comp = f"compile {row['compile_s']:.2f} s, " if row.get("compile_s") is not None else ""
            log(f"{tag} {s.name}: {comp}{_fmt_ns(row['ns_per_row_1t'])} ns/row (1 thread), "
                f"{_fmt_ns(row.get('ns_per_row_all'))} ns/row (all cores), {ex} [{row['bench_s']:.1f} s]")
        else:
            log(f"{tag} {s.name}: skipped ({row['note']})")
    walker = rows.get("walker", {}).get("ns_per_row_1t")
    lib_all = rows.get("library", {}).get("ns_per_row_all")
    for r in rows.values():
        if r["status"] != "ok":
            continue
        if walker:
            r["speedup_vs_walker"] = walker / r["ns_per_row_1t"]
        if lib_all and r.get("ns_per_row_all") and r["group"] != "library":
            r["speedup_vs_library_all"] = lib_all / r["ns_per_row_all"]
    res["strategies"] = [rows[s.name] for s in strats if s.name in rows]
    lib_model = case.library.model if case.library is not None else None
    if shap and lib_model is not None and _top_module(lib_model) in ("xgboost", "lightgbm"):
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
        v = _dist_version(*dists)
        if v:
            info[key] = v
    try:
        from treecomp import toolchain
        info["compiler"] = toolchain.find_compiler().version
    except Exception:  # noqa: BLE001
        info["compiler"] = None
    return info


def parse_args(argv: list[str]) -> argparse.Namespace:
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
    p.add_argument("--list", action="store_true", help="list cases and strategies, then exit")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """`treecomp bench` / `python -m bench`: returns a process exit code."""
    from treecomp.benchmark import cases as C
    from treecomp.benchmark import report
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
    settings = Settings.for_mode(args.quick)
    started = time.perf_counter()
    tmp = Path(tempfile.mkdtemp(prefix="treecomp-bench-"))
    results: dict[str, Any] = {"mode": "quick" if args.quick else "full", "machine": machine(),
                               "batches": list(BATCHES), "cases": [], "skipped_cases": [],
                               "setup": {}}
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
            names = [n.strip() for n in args.cases.split(",") if n.strip()] if args.cases else C.case_names()
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
    plots = not args.no_plots
    if plots and not report.have_matplotlib():
        log(f"note: matplotlib is not installed: no plots ({EXTRA_HINT})")
        plots = False
    paths = report.write(results, out, plots=plots)
    print(report.summary(results))
    log(f"wrote {', '.join(str(p) for p in paths)} ({results['wall_s']:.0f} s)")
    return 0


if __name__ == "__main__":  # `python -m treecomp.benchmark.run ...`, like `treecomp bench ...`
    sys.exit(main(sys.argv[1:]))
