"""The arrays kernel's ARM paths, cost per row, estimated without ARM hardware and without
QEMU's clock: `python bench/arm_cost.py [--rows N] [--isas scalar,neon,sve] [--dir STAGE]
[--call predict|shap]` (docs/benchmarks.md "ARM" gives the method and the figures). `--call shap`
counts the SHAP kernel's rows instead of predict_raw (treecomp.shap.Explainer on the same model
and rows as float64, the path forced by its isa; per-row SHAP cost of each ARM path).

Model: the 500-tree depth-6 XGBoost binary bench model (treecomp.benchmark.cases "xgb-binary",
full size, trained on the host and cached there; saved as XGBoost JSON), N of its test rows
(float32, 50 features), one batch, one thread, raw margins (`predict_raw`); `--case NAME`
another bench case's (XGBoost JSON, or treecomp's IR file for the other libraries' models).

Host: the aarch64 lane's emulated arm64 Debian (tests/aarch64/lane.py: `lane.ensure()`, treecomp
built there by its own setup.py with the cross gcc 12, -O2), QEMU's `-cpu max` (NEON, SVE 512-bit
by default, SVE2). Per path (the `isa` forced at compile time):

1. dynamic instruction counts. The installed qemu-aarch64 is static (no TCG plugins), so its own
   logs count: `-d in_asm,exec,nochain` (QEMU_LOG) filtered to the kernel library's text
   (QEMU_DFILTER), with QEMU_RESERVED_VA fixing the guest's address layout so that a first run
   (no logging) finds where the kernel is mapped (the counting run reports its own mapping,
   and is run again if it moved: a fresh stage's first run writes .pyc files). in_asm gives each translation block's
   instructions, exec (nochain: every block execution is logged) how often each ran; the count
   is taken between two calls of tc_arrays_abi() (a marker) around one predict_raw of N rows,
   after a warm-up call of the same size. Instructions / N = instructions per row. A block that
   exits early (an exception) would be over-counted: the kernel raises none. The count is the
   whole call inside the kernel library (tc_arrays_predict's dispatch, run_*'s set-up and
   quantiser, the walk), so `--rows 1` gives one single-row call, its fixed part included
   (below 8 rows the few-row walks run); the Python call and the small-batch entry
   (_tc_entry, another library) are outside the kernel's text and not counted.
2. llvm-mca (LLVM 19 here; `llvm-mca -mtriple=aarch64 -mcpu=neoverse-n1 / neoverse-v1`)
   throughput of the blocks that ran: each block holding 99.5% of the executed instructions is
   given to llvm-mca alone (its branches dropped: llvm-mca needs no control flow; a block is one
   straight line; the SVE instructions, which QEMU's log shows as `.byte`, disassembled by
   llvm-mc first), its steady-state cycles per iteration (Total Cycles / Iterations) times its
   execution count, summed, / N = cycles per row. That is throughput only: no branch
   mispredictions (the portable walk's data-dependent branches pay those on hardware; the vector
   walks have almost none), no cache misses (the tables of 500 depth-6 trees are ~300 KB), no
   cross-block dependencies. SVE blocks only on neoverse-v1 (N1 has no SVE).

Prints a table, then each path's instructions and cycles per row by kernel function (the
library's symbols, static functions included), and writes JSON (--out). Needs the lane's emulated host (tests/aarch64/lane.py
sets it up) and llvm-mca on PATH or in /usr/lib/llvm-*/bin.
"""

from __future__ import annotations

import argparse
import collections
import datetime as _dt
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

#: the guest's fixed address layout (any size works; the same in both runs)
RESERVED_VA = "0x4000000000"
CPUS = ("neoverse-n1", "neoverse-v1")

GUEST = r"""
import ctypes, json, sys
import numpy as np
import treecomp
from treecomp.backends.arrays import native as an
mode, model, rows, isa, n, call = sys.argv[1:5] + [int(sys.argv[5]), sys.argv[6]]
X = np.ascontiguousarray(np.load(rows)[:n])
if call == "shap":  # the SHAP kernel's rows (Predictor.contributions' work, bias column aside)
    from treecomp.shap import Explainer
    e = Explainer(treecomp.parse(model), isa=isa)
    assert e.isa == isa, (e.isa, isa)
    X64 = X.astype(np.float64)
    contrib = np.zeros((n, e.forest.n_outputs, e.forest.n_features + 1))
    def run():
        contrib[...] = 0.0
        e.rows(X64, contrib)
        return contrib
else:
    p = treecomp.compile(model, backend="arrays", isa=isa)
    assert p._kernel.isa == isa, (p._kernel.isa, isa)
    run = lambda: p.predict_raw(X, n_threads=1)
lib = an.native_library()
run()  # warm-up: every block translated, lazy tables built
path = str(an.KERNEL_PATH)
spans = []
for line in open("/proc/self/maps"):
    f = line.split()
    if len(f) >= 6 and f[5] == path and "x" in f[1]:
        a, b = (int(v, 16) for v in f[0].split("-"))
        spans.append([a, b, int(f[2], 16)])  # (start, end, file offset)
marker = ctypes.cast(lib.tc_arrays_abi, ctypes.c_void_p).value
info = {"spans": spans, "marker": marker, "path": path, "isas": an.native_isas()}
if mode == "count":
    lib.tc_arrays_abi()
    out = run()
    lib.tc_arrays_abi()
    info["sum"] = float(np.sum(out, dtype=np.float64))
print("ARMCOST " + json.dumps(info))
"""

BRANCH = re.compile(r"^(b|bl|br|blr|ret|cbz|cbnz|tbz|tbnz|b\.\w+)$")


def find_mca() -> str:
    """The newest llvm-mca here (an old one may not know the Neoverse models: it would fall
    back to a generic one without saying so in its output's figures)."""
    found = sorted(Path("/usr/lib").glob("llvm-*/bin/llvm-mca"),
                   key=lambda p: int(re.sub(r"\D", "", p.parent.parent.name) or 0), reverse=True)
    for c in (*found, "llvm-mca"):
        p = shutil.which(str(c))
        if p:
            for cpu in CPUS:
                out = subprocess.run([p, "-mtriple=aarch64", f"-mcpu={cpu}"], input="add x0, x0, x1\n",
                                     capture_output=True, text=True)
                if out.returncode != 0 or "not a recognized processor" in out.stderr:
                    break
            else:
                return p
    raise SystemExit(f"no llvm-mca that knows {', '.join(CPUS)} (apt-get install llvm-19)")


def host_model(work: Path, n: int, case: str = "xgb-binary") -> tuple[Path, Path, str]:
    """The bench case's model (XGBoost's as XGBoost JSON, any other as treecomp's IR file, which
    the guest reads without the library) and its first n test rows as .npy, in `work`."""
    import numpy as np

    import treecomp
    from treecomp.benchmark import cases
    c = cases.build_case(case, n_rows=n, log=lambda s: print(s, flush=True))
    rows = work / "rows.npy"
    if hasattr(c.model, "get_booster"):
        model = work / "model.json"
        c.model.get_booster().save_model(str(model))
    else:
        model = work / "model.tcir"
        treecomp.parse(c.model).save(model)
    np.save(rows, np.ascontiguousarray(c.X, dtype=np.float32))
    return model, rows, c.title


def guest_run(lane, stage: Path, work: Path, args: list[str], log: dict | None = None) -> dict:
    env = {"PYTHONPATH": str(stage), "QEMU_RESERVED_VA": RESERVED_VA}
    if log:
        env.update(log)
    script = work / "guest.py"
    script.write_text(GUEST)
    proc = lane.guest([str(script), *args], cpu="max", env=env, cwd=stage, timeout=3600)
    for line in proc.stdout.splitlines():
        if line.startswith("ARMCOST "):
            return json.loads(line[8:])
    raise SystemExit(f"guest run failed ({proc.returncode}):\n{proc.stdout[-4000:]}")


def parse_log(path: Path, marker: int) -> tuple[dict[int, list[str]], collections.Counter]:
    """(block pc -> its instructions' text, block pc -> executions between the markers)."""
    blocks: dict[int, list[str]] = {}
    execs: collections.Counter = collections.Counter()
    cur = None
    seen = 0  # marker executions so far
    ins = re.compile(r"^0x([0-9a-f]+):\s+[0-9a-f]{8}\s+(.*)$")
    tr = re.compile(r"^Trace \d+: \S+ \[[0-9a-f]+/([0-9a-f]+)/")
    with open(path, errors="replace") as f:
        for line in f:
            m = tr.match(line)
            if m:
                cur = None
                pc = int(m.group(1), 16)
                if pc == marker:
                    seen += 1
                elif seen == 1:
                    execs[pc] += 1
                continue
            if line.startswith("IN:"):
                cur = "new"
                continue
            m = ins.match(line)
            if m and cur is not None:
                pc = int(m.group(1), 16)
                if cur == "new":
                    cur = pc
                    blocks[cur] = []
                blocks[cur].append(m.group(2).split("//")[0].strip())
            elif not line.strip():
                cur = None
    if seen < 2:
        raise SystemExit(f"the exec log has {seen} marker calls, not 2: {path}")
    return blocks, execs


def decode(mca: str, body: list[str], cache: dict) -> list[str]:
    """`body` with the instructions QEMU's log shows as `.byte` (its disassembler knows no SVE)
    disassembled by llvm-mc (beside llvm-mca; +sve, +sve2): llvm-mca would take them for data
    and leave them out of its count."""
    out = []
    for ins in body:
        if not ins.startswith(".byte"):
            out.append(ins)
            continue
        if ins not in cache:
            mc = str(Path(mca).with_name("llvm-mc"))
            r = subprocess.run([mc, "--disassemble", "-triple=aarch64", "-mattr=+sve,+sve2"],
                               input=ins[5:].replace(",", " ") + "\n", capture_output=True, text=True)
            got = [ln.strip() for ln in r.stdout.splitlines() if ln.strip() and not ln.strip().startswith(".")]
            if r.returncode != 0 or len(got) != 1:
                raise SystemExit(f"llvm-mc could not decode {ins!r}: {r.stderr.strip()}")
            cache[ins] = got[0]
        out.append(cache[ins])
    return out


def mca_cycles(mca: str, body: list[str], cpu: str, cache: dict) -> float | None:
    """Steady-state cycles per iteration of `body` (branches dropped) on `cpu`."""
    body = decode(mca, body, cache.setdefault("decoded", {}))
    text = [i for i in body if not BRANCH.match(i.split()[0] if i.split() else "")]
    if not text:
        return 0.0
    key = (cpu, "\n".join(text))
    if key in cache:
        return cache[key]
    attr = "+sve,+sve2" if cpu != "neoverse-n1" else ""
    argv = [mca, "-mtriple=aarch64", f"-mcpu={cpu}", "-iterations=200"]
    if attr:
        argv.append(f"-mattr={attr}")
    out = subprocess.run(argv, input="\n".join(text) + "\n", capture_output=True, text=True)
    val = None
    if out.returncode == 0:
        it = re.search(r"Iterations:\s+(\d+)", out.stdout)
        cyc = re.search(r"Total Cycles:\s+(\d+)", out.stdout)
        if it and cyc:
            val = int(cyc.group(1)) / int(it.group(1))
    cache[key] = val
    return val


def measure(lane, stage: Path, work: Path, model: Path, rows: Path, isa: str, n: int,
            mca: str, cover: float, call: str = "predict") -> dict:
    args = [str(model), str(rows), isa, str(n), call]
    info = guest_run(lane, stage, work, ["maps", *args])
    if isa not in info["isas"]:
        return {"isa": isa, "error": f"not offered here (supported: {info['isas']})"}
    logf = work / f"exec-{isa}.log"
    # the counting run must map the kernel where the first run found it (the log is filtered
    # to that range): a first run on a fresh stage writes the package's .pyc files, which can
    # move later mappings; then the next run, with the .pyc files in place, maps it again
    for _ in range(3):
        spans = ",".join(f"0x{a:x}..0x{b - 1:x}" for a, b, _ in info["spans"])
        logf.unlink(missing_ok=True)
        got = guest_run(lane, stage, work, ["count", *args],
                        {"QEMU_LOG": "in_asm,exec,nochain", "QEMU_DFILTER": spans,
                         "QEMU_LOG_FILENAME": str(logf)})
        if got["spans"] == info["spans"] and got["marker"] == info["marker"]:
            break
        info = got
    else:
        raise SystemExit(f"the kernel's mapping moved between runs ({isa})")
    blocks, execs = parse_log(logf, info["marker"])
    # the parsed log (the executed blocks and their counts) beside it, for another look
    (work / f"blocks-{isa}.json").write_text(json.dumps(
        {"blocks": {str(k): v for k, v in blocks.items() if k in execs},
         "execs": {str(k): v for k, v in execs.items()}}))
    missing = [pc for pc in execs if pc not in blocks]
    if missing:
        raise SystemExit(f"{len(missing)} executed blocks never translated in the log ({isa})")
    weight = {pc: k * len(blocks[pc]) for pc, k in execs.items()}
    total = sum(weight.values())
    res = {"isa": isa, "rows": n, "instructions": total, "per_row": total / n,
           "blocks": len(execs)}
    hot, acc = [], 0
    for pc in sorted(weight, key=weight.get, reverse=True):
        hot.append(pc)
        acc += weight[pc]
        if acc >= cover * total:
            break
    res["mca_coverage"] = acc / total
    res["mca"] = mca
    cache: dict = {}
    where = functions(lane, info)
    by_fn: dict = collections.defaultdict(lambda: collections.Counter())
    for pc in execs:
        by_fn[where(pc)]["instructions"] += weight[pc]
    for cpu in CPUS:
        if isa == "sve" and cpu == "neoverse-n1":
            continue
        cyc, bad = 0.0, 0
        for pc in hot:
            c = mca_cycles(mca, blocks[pc], cpu, cache)
            if c is None:
                bad += weight[pc]
                continue
            cyc += c * execs[pc]
            by_fn[where(pc)][cpu] += c * execs[pc]
        # the blocks left out (coverage, or llvm-mca refused one) at the covered blocks' rate
        known = acc - bad
        res[f"cycles_per_row_{cpu}"] = cyc / n * (total / known if known else float("nan"))
        res[f"mca_refused_{cpu}"] = bad / total
    # per function of the kernel (its symbols; static ones too): instructions and cycles per
    # row, each function with at least 0.2% of the instructions
    res["by_function"] = {fn: {k: v / n for k, v in c.items()}
                          for fn, c in sorted(by_fn.items(), key=lambda kv: -kv[1]["instructions"])
                          if c["instructions"] >= 0.002 * total}
    logf.unlink(missing_ok=True)  # hundreds of MB
    return res


def functions(lane, info: dict):
    """pc -> the name of the kernel function holding it (aarch64 nm of the kernel library; the
    executable mapping's start minus its file offset is the load base, as ld lays out the text
    segment with its virtual address equal to its file offset)."""
    import bisect
    nm = lane.tools / "usr" / "bin" / "aarch64-linux-gnu-nm"
    env = {**os.environ, "LD_LIBRARY_PATH": str(lane.tools / "usr" / "lib" / "x86_64-linux-gnu")}
    out = subprocess.run([str(nm), "--defined-only", "-n", info["path"]], capture_output=True,
                         text=True, env=env)
    syms = []
    for line in out.stdout.splitlines():
        f = line.split()
        if len(f) == 3 and f[1].lower() == "t":
            syms.append((int(f[0], 16), f[2]))
    a, _, off = info["spans"][0]
    base = a - off
    addrs = [base + v for v, _ in syms]

    def where(pc: int) -> str:
        i = bisect.bisect_right(addrs, pc) - 1
        return syms[i][1] if i >= 0 else f"0x{pc:x}"
    return where


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=1024)
    ap.add_argument("--case", default="xgb-binary",
                    help="the bench case whose model is counted (treecomp.benchmark.cases)")
    ap.add_argument("--isas", default="scalar,neon,sve")
    ap.add_argument("--dir", type=Path, help="a staged treecomp (lane.stage; staged if empty)")
    ap.add_argument("--cover", type=float, default=0.995,
                    help="share of executed instructions whose blocks go to llvm-mca")
    ap.add_argument("--out", type=Path, help="write the results as JSON here")
    ap.add_argument("--call", choices=("predict", "shap"), default="predict",
                    help="what the counted call runs: predict_raw (default) or the SHAP kernel's "
                    "rows (treecomp.shap.Explainer.rows, float64 rows: contributions' work)")
    a = ap.parse_args(argv)
    from tests.aarch64 import lane as lane_mod
    mca = find_mca()
    lane = lane_mod.ensure()
    work = Path(tempfile.mkdtemp(prefix="arm-cost-"))
    stage = a.dir or work / "stage"
    if not (stage / "treecomp").is_dir() or not list((stage / "treecomp").glob("_arrays_kernel*.so")):
        lane_mod.stage(lane, stage)
    model, rows, title = host_model(work, a.rows, a.case)
    print(f"{title}; {a.call}, {a.rows} rows, one batch, one thread; qemu -cpu max; {mca}",
          flush=True)
    results = []
    for isa in a.isas.split(","):
        r = measure(lane, stage, work, model, rows, isa, a.rows, mca, a.cover, a.call)
        results.append(r)
        print(json.dumps(r), flush=True)
    base = next((r for r in results if r["isa"] == "scalar" and "error" not in r), None)
    print(f"\n{'path':8} {'insns/row':>10} {'x':>6} " +
          " ".join(f"{'cyc/row ' + c[9:]:>12} {'x':>6}" for c in CPUS))
    for r in results:
        if "error" in r:
            print(f"{r['isa']:8} {r['error']}")
            continue
        line = f"{r['isa']:8} {r['per_row']:10.0f} "
        line += f"{base['per_row'] / r['per_row']:6.2f} " if base else f"{'':6} "
        for c in CPUS:
            k = f"cycles_per_row_{c}"
            if k in r:
                line += f"{r[k]:12.0f} "
                line += f"{base[k] / r[k]:6.2f} " if base and k in base else f"{'':6} "
            else:
                line += f"{'-':>12} {'':6} "
        print(line)
    for r in results:
        if "by_function" in r:
            print(f"\n{r['isa']}: per row, by kernel function")
            for fn, c in r["by_function"].items():
                print(f"  {fn:36} {c['instructions']:9.0f} insns " +
                      " ".join(f"{c.get(cpu, 0.0):8.0f} cyc {cpu[9:]}" for cpu in CPUS if f"cycles_per_row_{cpu}" in r))
    if a.out:
        a.out.write_text(json.dumps({"date": _dt.datetime.now(_dt.timezone.utc).isoformat(),
                                     "host": platform.node(), "model": title, "rows": a.rows,
                                     "call": a.call,
                                     "results": results}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
