"""The benchmark's instruments, shared by the engines and the runner: a timer, a peak-RSS meter,
and the cold compile of a treecomp backend in a process of its own.

- :class:`Settings`: the time budgets of a quick or a full run.
- :func:`timed`: median seconds per call, after a warm-up, until a time budget is spent.
- :func:`peak_rss`: the peak RSS growth of this process over a with-block (the kernel's
  high-water mark is reset through /proc/self/clear_refs right before the block, so the figure
  counts only the block, native allocations such as LLVM's included).
- :func:`compile_in_subprocess`: one cold build of a saved IR with a backend, in a process
  with a fresh ``TREECOMP_CACHE_DIR`` holding no artifact of the model, forked from a fork
  server that has imported numpy and treecomp and done nothing else (:func:`fork_context`), so
  the imports are not paid per compile; a fresh interpreter where there is no fork server
  (:func:`compile_fresh`, running :func:`compile_child`). The child reports the build's wall
  time, the peak RSS growth of the compiling Python process and the peak RSS of the largest
  compiler / linker subprocess (``RUSAGE_CHILDREN`` of a process that ran nothing else; Linux
  carries the forking process's RSS into a child's high-water mark, so a figure not above the
  compiling process's own peak is flagged as an upper bound).
- :func:`compare`: one output against the reference's, bit for bit (dtype, bits, NaN where
  NaN) or the largest absolute difference.
- :class:`Skip`: raised where something cannot run here (a missing package, a model an engine
  refuses, a failed compile); the runner notes it as a skipped row, never a failure.
- :func:`bounded_children`: a time limit on the processes another engine's build starts
  (TL2cgen's gcc), which the engine itself does not bound.
- :func:`call_bounded`: a function run in a process forked from the fork server, with a time
  limit (another engine's in-process build: lleaves' LLVM compile, which cannot be stopped
  from its own thread).
- :func:`core_clock`: the core's clock while busy, from a chain of dependent adds (one cycle
  each) timed on the thread's CPU clock, and the TSC's rate beside it on x86: what turns the
  report's ns/row into cycles (the guest has no perf cycle counters).

This module imports nothing of the other benchmark modules.
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np

#: the folder holding the treecomp package this module belongs to: compile subprocesses import
#: that very treecomp, whether it is installed or run from a source checkout
PACKAGE_PARENT = Path(__file__).resolve().parents[2]


class Skip(Exception):
    """A strategy that cannot run here (missing package, unsupported model): noted, not fatal."""


def log(msg: str) -> None:
    """A progress line on stderr (stdout carries the summary)."""
    print(msg, file=sys.stderr, flush=True)


# -- settings -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Settings:
    """The time budgets of one benchmark run (:meth:`for_mode`: quick or full)."""

    quick: bool
    budget_s: float        # time spent per throughput measurement (after the warm-up)
    latency_budget_s: float
    min_reps: int
    exact_rows: int        # rows used for the exactness check
    slow_budget_s: float   # a single call of the walker / interpreter aims at this long
    compile_timeout_s: float

    #: the batch sizes (rows per call) of the latency figures
    batches: tuple[int, ...] = (1, 8, 64, 512, 4096)

    @classmethod
    def for_mode(cls, quick: bool) -> "Settings":
        if quick:  # three batch sizes of the five, so that --quick stays about a minute
            return cls(quick=True, budget_s=0.05, latency_budget_s=0.02, min_reps=3,
                       exact_rows=4000, slow_budget_s=0.08, compile_timeout_s=300,
                       batches=(1, 64, 4096))
        return cls(quick=False, budget_s=0.6, latency_budget_s=0.15, min_reps=3, exact_rows=20000,
                   slow_budget_s=1.0, compile_timeout_s=600)


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


# -- the core's clock --------------------------------------------------------------------------------
_CLOCK_PROBE = r"""
#include <stdint.h>
#include <time.h>
/* n dependent adds (one cycle each on every x86-64 and arm64 core of this century), timed on
   the thread's CPU clock (out[0], ns: time the thread was descheduled is left out) and on the
   monotonic clock (out[1], ns), with the TSC's ticks over the same span (out[2]; 0 off x86) */
__attribute__((visibility("default"))) void tc_clock_probe(int64_t n, double *out) {
  struct timespec a, b, wa, wb;
  uint64_t x = 0, t0 = 0, t1 = 0;
  clock_gettime(CLOCK_MONOTONIC, &wa);
#if defined(__x86_64__) || defined(__i386__)
  uint32_t lo, hi;
  __asm__ volatile("rdtsc" : "=a"(lo), "=d"(hi));
  t0 = ((uint64_t)hi << 32) | lo;
#endif
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &a);
  for (int64_t i = 0; i < n; i += 8) {
#if defined(__x86_64__) || defined(__i386__)
    __asm__ volatile("add $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\t"
                     "add $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\tadd $1, %0" : "+r"(x));
#elif defined(__aarch64__)
    __asm__ volatile("add %0, %0, #1\n\tadd %0, %0, #1\n\tadd %0, %0, #1\n\tadd %0, %0, #1\n\t"
                     "add %0, %0, #1\n\tadd %0, %0, #1\n\tadd %0, %0, #1\n\tadd %0, %0, #1"
                     : "+r"(x));
#else
#error "no add chain for this architecture"
#endif
  }
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &b);
#if defined(__x86_64__) || defined(__i386__)
  __asm__ volatile("rdtsc" : "=a"(lo), "=d"(hi));
  t1 = ((uint64_t)hi << 32) | lo;
#endif
  clock_gettime(CLOCK_MONOTONIC, &wb);
  out[0] = (double)(b.tv_sec - a.tv_sec) * 1e9 + (double)(b.tv_nsec - a.tv_nsec);
  out[1] = (double)(wb.tv_sec - wa.tv_sec) * 1e9 + (double)(wb.tv_nsec - wa.tv_nsec);
  out[2] = (double)(t1 - t0);
}
"""

#: how core_clock measures, as the report states it
CLOCK_METHOD = ("a chain of dependent integer adds (one cycle each) timed on the thread's CPU "
                "clock, median of 5 runs of 80M adds")
_CLOCK: dict | None = None


def core_clock(adds: int = 80_000_000, runs: int = 5) -> dict:
    """The core's clock while busy: {"ghz", "method"} and, on x86, "tsc_ghz" (the TSC's ticks
    over the monotonic clock across the same runs), or {"ghz": None, "note": why}.

    A tiny C probe (built once per process with the C compiler treecomp uses, loaded with
    ctypes) runs `adds` dependent adds `runs` times; the clock is adds / the median thread CPU
    time. A virtual machine's guest has no perf cycle counters, and the TSC ticks at a fixed
    rate whatever the core's boost: the add chain counts the cycles the core really runs. A
    cycle figure in the report is an ns figure times this clock."""
    global _CLOCK
    if _CLOCK is not None:
        return _CLOCK
    import ctypes
    import tempfile
    try:
        from treecomp import toolchain
        with tempfile.TemporaryDirectory(prefix="treecomp-clock-") as d:
            so = Path(d) / "tc_clock_probe.so"
            toolchain.build_shared_library({"tc_clock_probe.c": _CLOCK_PROBE}, so,
                                           cflags=("-O1", "-fPIC", "-fvisibility=hidden"))
            lib = ctypes.CDLL(str(so))  # mapped: the file may go once it is loaded
        fn = lib.tc_clock_probe
        fn.restype, fn.argtypes = None, [ctypes.c_int64, ctypes.POINTER(ctypes.c_double)]
        out = (ctypes.c_double * 3)()
        fn(adds // 8, out)  # warm-up: the core leaves its idle clock
        figs = []
        for _ in range(runs):
            fn(adds, out)
            figs.append(tuple(out))
        cpu = float(np.median([f[0] for f in figs]))
        res: dict[str, Any] = {"ghz": adds / cpu if cpu > 0 else None, "method": CLOCK_METHOD}
        tsc = [f[2] / f[1] for f in figs if f[2] > 0 and f[1] > 0]
        if tsc:
            res["tsc_ghz"] = float(np.median(tsc))
    except Exception as exc:  # noqa: BLE001 - no compiler, another architecture: no cycles
        res = {"ghz": None, "note": f"no clock measured ({type(exc).__name__}: {exc})"[:300]}
    _CLOCK = res
    return res


# -- external builds ------------------------------------------------------------------------------
def _descendants() -> set[int]:
    """The pids of this process's descendants (Linux /proc; empty elsewhere)."""
    parent: dict[int, int] = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return set()
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        # "pid (comm) state ppid ...": comm may hold spaces and parentheses
        fields = stat[stat.rfind(")") + 2:].split()
        if len(fields) > 1:
            parent[int(name)] = int(fields[1])
    me, out = os.getpid(), set()
    for pid in parent:
        seen, p = set(), pid
        while p in parent and p not in seen and p != me:
            seen.add(p)
            p = parent[p]
        if p == me and pid != me:
            out.add(pid)
    return out


@contextlib.contextmanager
def bounded_children(timeout: float, what: str):
    """Bounds the processes that another engine's build starts in this process (TL2cgen runs
    gcc in worker threads, with no time limit): once the with-block has run `timeout` s, every
    descendant of this process that did not exist at its start is killed (the build then fails
    in the engine's own way), and the block's end raises Skip naming `what` and the limit.
    Descendants that existed before (the compile fork server) are left alone. Linux only (it
    reads /proc); elsewhere the block is not bounded."""
    import signal
    import threading

    before = _descendants()
    fired = threading.Event()
    done = threading.Event()

    def watch() -> None:
        if done.wait(timeout):
            return
        fired.set()
        while not done.is_set():  # builds start new compilers as the old ones die
            for pid in _descendants() - before:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
            done.wait(0.2)

    watcher = threading.Thread(target=watch, name="bounded_children", daemon=True)
    watcher.start()
    try:
        yield
    except Exception:
        if fired.is_set():
            raise Skip(f"{what} did not finish in {timeout:.0f} s: stopped") from None
        raise
    finally:
        done.set()
        watcher.join()
    if fired.is_set():
        raise Skip(f"{what} did not finish in {timeout:.0f} s: stopped")


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
    """A compile in a process forked from the fork server (see compile_in_subprocess)."""
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
_PRELOAD = ["treecomp.benchmark.engines", "treecomp.backends.c", "treecomp.backends.arrays",
            "treecomp.backends.llvm"]
_FORK_CTX: Any = None


def fork_context() -> Any:
    """multiprocessing's fork server context with numpy, treecomp and its backends imported, or None where the platform
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


def compile_in_subprocess(ir_path: Path, backend: str, options: dict, cache: Path,
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
    ctx = fork_context()
    if ctx is not None:
        res = compile_forked(ctx, spec, env, str(ir_path.parent), timeout)
    else:
        res = compile_fresh(spec, env, str(ir_path.parent), timeout)
    if "error" in res:
        raise Skip(res["error"])
    return res


def compile_forked(ctx: Any, spec: dict, env: dict, cwd: str, timeout: float) -> dict:
    """The figures of a build of `spec` (ir, backend, options) in a process forked from the
    fork server `ctx` (:func:`fork_context`), with environment `env`, in folder `cwd`: a
    dict of figures, or {"error": ...}; Skip when it takes over `timeout` s or dies."""
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


def _forked_call(fn: Callable[..., Any], args: tuple, conn: Any) -> None:
    """fn(*args) in a process forked from the fork server (see call_bounded): sends its result,
    or {"error": ...}."""
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 1)
    os.dup2(null, 2)
    try:
        conn.send(fn(*args))
    except Exception as exc:  # noqa: BLE001 - the parent raises Skip with it
        conn.send({"error": f"{type(exc).__name__}: {exc}"})
    conn.close()


def call_bounded(fn: Callable[..., Any], args: tuple, timeout: float, what: str) -> Any:
    """fn(*args) (a module-level function; its arguments and result picklable) in a process
    forked from the fork server, stopped after `timeout` s: its result, or Skip naming `what`
    where it timed out, failed or died. Without a fork server it runs here, unbounded."""
    ctx = fork_context()
    if ctx is None:
        try:
            return fn(*args)
        except Exception as exc:  # noqa: BLE001 - as from the forked process
            raise Skip(f"{what} failed: {type(exc).__name__}: {exc}") from None
    recv, send = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_forked_call, args=(fn, args, send))
    proc.start()
    send.close()
    try:
        if not recv.poll(timeout):
            proc.kill()
            raise Skip(f"{what} did not finish in {timeout:.0f} s: stopped")
        try:
            res = recv.recv()
        except EOFError:
            proc.join()
            raise Skip(f"{what} failed (its process exited with {proc.exitcode})") from None
    finally:
        recv.close()
        proc.join()
    if isinstance(res, dict) and "error" in res:
        raise Skip(f"{what} failed: {res['error']}")
    return res


def compile_fresh(spec: dict, env: dict, cwd: str, timeout: float) -> dict:
    """As :func:`compile_forked`, in a fresh interpreter running :func:`compile_child`."""
    # The child imports the treecomp this process runs (installed, editable or a checkout on
    # sys.path): its folder goes first on the child's path unless the child finds it anyway.
    code = ("import sys; p = " + repr(str(PACKAGE_PARENT)) + "\n"
            "if p not in sys.path: sys.path.insert(0, p)\n"
            "from treecomp.benchmark.measure import compile_child; compile_child()")
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


# -- exactness ----------------------------------------------------------------------------------
def compare(ours: Any, ref: Any) -> dict:
    """Bit-exactness and max |difference| of one output against the library's (or the
    reference's): {"bit_exact", "max_abs_diff"}, plus "mismatches" for labels and a "note"
    where shapes or dtypes differ. A list (multi-output predict_proba) is compared part by part."""
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
