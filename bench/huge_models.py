"""Huge models: where compile time and memory go for boosting with thousands of rounds and deep
random forests.

    python bench/huge_models.py make  [--shapes a,b] [--dir D]     # write the model files once
    python bench/huge_models.py run   [--shapes a,b] [--reps 3] [--phases ...] [--json out]
    python bench/huge_models.py codegen [--sizes 25000,50000,100000] [--backends c,llvm]
    python bench/huge_models.py profile SHAPE [--phase parse|compile] [--top 30]
    python bench/huge_models.py memtrace SHAPE [--phase parse|compile]  # where the peak RSS is

Shapes (SHAPES) are model files written in the libraries' own formats, reproducibly (fixed
seeds), so a run needs no training library but sklearn for the forests:

- XGBoost JSON / UBJSON (``xgb-*``): complete binary trees of the given depth, synthesised
  directly (the document XGBoost 3.2 writes: every per-node array, float32 values in their
  shortest decimal form for JSON, typed big-endian arrays for UBJSON); splits on 100 features,
  each with 256 candidate thresholds (XGBoost's hist method), so the byte walks' columns are
  as many as a real model's. A pool of 256 distinct trees is cycled (ids renumbered).
- LightGBM text (``lgbm-*``): a real LightGBM 4.x model of 250 trees of 64 leaves trained on
  random data, its trees cycled to the wanted count (Tree= lines and tree_sizes rewritten).
- scikit-learn random forests (``rf-*``): RandomForestRegressor of unlimited depth trained on
  3,000 random rows (about 3,790 nodes a tree), pickled.

``run`` measures each shape in fresh subprocesses, one per phase, and prints a Markdown table:

- parse: the file -> Forest (treecomp.parse), seconds and MB/s of the file;
- compile: treecomp.compile(file) end to end (backend auto), and its parts in another process:
  choose (backend="auto"'s decision), flatten (arrays tables), validate, derive (ArraysKernel:
  the tables derived at load time, packed for the kernel);
- peak: the process's peak RSS during parse + compile above its RSS just before (after the
  imports), per node of the model (VmHWM, reset through /proc/self/clear_refs);
- save-tc / save-so: Predictor.save of the compiled model (.so: the link, cold cache);
- load-tc / load-so: treecomp.load in a fresh process plus one predicted row, seconds, its
  peak RSS and what it leaves added, split into private memory (anon) and mapped file pages
  (file: the page cache's, shared; a table file is mapped, not copied), and the artifact's size.

``memtrace`` runs one phase in this process while a thread samples its RSS every millisecond
and records the main thread's treecomp call stack at each new maximum: it prints the peak per
node, the stack that reached it, and the RSS each function reached at its highest (what holds
memory at the peak: that stack's frames).

``codegen`` times the c and llvm backends' builds (cold cache, fresh process) against node
count, on the model shapes backend="auto" may send them (see treecomp.backends.choose).
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DIR = ROOT / "bench" / ".cache" / "huge"

#: name -> (kind, format, parameters); the node counts are in the names' comments
SHAPES: dict[str, dict] = {
    # the shapes (2026-11-27 measurements)
    "xgb-json-5000x8": dict(kind="xgb", fmt="json", trees=5000, depth=8),      # 2.56M nodes
    "xgb-json-20000x6": dict(kind="xgb", fmt="json", trees=20000, depth=6),    # 2.54M
    "xgb-ubj-20000x6": dict(kind="xgb", fmt="ubj", trees=20000, depth=6),      # 2.54M
    "lgbm-10000x64": dict(kind="lgbm", trees=10000),                            # 1.27M
    "rf-1000-deep": dict(kind="rf", trees=1000),                                # ~3.79M
    # 10 million nodes
    "xgb-json-20000x8": dict(kind="xgb", fmt="json", trees=20000, depth=8),    # 10.2M
    "xgb-ubj-20000x8": dict(kind="xgb", fmt="ubj", trees=20000, depth=8),      # 10.2M
    "lgbm-80000x64": dict(kind="lgbm", trees=80000),                            # 10.2M
    "rf-2700-deep": dict(kind="rf", trees=2700),                                # ~10.2M
}
SMALL = ["xgb-json-5000x8", "xgb-json-20000x6", "xgb-ubj-20000x6", "lgbm-10000x64", "rf-1000-deep"]
N_FEATURES = 100
POOL = 256


def path_of(name: str, d: Path) -> Path:
    s = SHAPES[name]
    ext = {"xgb": "." + s.get("fmt", "json"), "lgbm": ".txt", "rf": ".pkl"}[s["kind"]]
    return d / f"{name}{ext}"


# -- XGBoost --------------------------------------------------------------------------------------
def _xgb_float(v: np.ndarray) -> list[str]:
    """float32 values as XGBoost 3.2 writes them (shortest digits, 'E' exponent: 5.604344E-1)."""
    out = []
    for x in v.astype(np.float32):
        m, _, e = np.format_float_scientific(x, unique=True, trim="-").partition("e")
        out.append(f"{m}E{int(e)}")
    return out


def _xgb_pool(depth: int, seed: int = 0) -> list[dict[str, np.ndarray]]:
    rng = np.random.default_rng(seed)
    edges = np.sort(rng.normal(size=(N_FEATURES, 256)).astype(np.float32), axis=1)
    n_int = (1 << depth) - 1
    n = 2 * n_int + 1
    idx = np.arange(n)
    left = np.where(idx < n_int, 2 * idx + 1, -1).astype(np.int32)
    right = np.where(idx < n_int, 2 * idx + 2, -1).astype(np.int32)
    parents = np.where(idx > 0, (idx - 1) // 2, 2147483647).astype(np.int32)
    pool = []
    for _ in range(POOL):
        feat = rng.integers(0, N_FEATURES, n).astype(np.int32)
        thr = edges[feat, rng.integers(0, 256, n)]
        leaf = (rng.normal(size=n) * 0.1).astype(np.float32)
        internal = idx < n_int
        cond = np.where(internal, thr, leaf).astype(np.float32)
        hess = np.maximum(1.0, np.float32(1 << 14) / (1 << np.floor(np.log2(idx + 1)).astype(np.int64))
                          * rng.uniform(0.5, 1.5, n)).round().astype(np.float32)
        pool.append({
            "base_weights": np.where(internal, (rng.normal(size=n) * 0.1), leaf).astype(np.float32),
            "default_left": (rng.random(n) < 0.5).astype(np.uint8) * internal,
            "left_children": left, "right_children": right, "parents": parents,
            "loss_changes": np.where(internal, rng.exponential(10, n), 0).astype(np.float32),
            "split_conditions": cond, "split_indices": np.where(internal, feat, 0).astype(np.int32),
            "split_type": np.zeros(n, np.uint8), "sum_hessian": hess,
        })
    return pool


def _xgb_tree_json(t: dict[str, np.ndarray]) -> tuple[str, str]:
    """A tree's JSON around its id: (text before the id, text after it)."""
    def ints(a):
        return "[" + ",".join(map(str, a.astype(np.int64).tolist())) + "]"

    def floats(a):
        return "[" + ",".join(_xgb_float(a)) + "]"
    n = len(t["left_children"])
    pre = ('{"base_weights":' + floats(t["base_weights"]) + ',"categories":[],"categories_nodes":[],'
           '"categories_segments":[],"categories_sizes":[],"default_left":' + ints(t["default_left"])
           + ',"id":')
    post = (',"left_children":' + ints(t["left_children"]) + ',"loss_changes":' + floats(t["loss_changes"])
            + ',"parents":' + ints(t["parents"]) + ',"right_children":' + ints(t["right_children"])
            + ',"split_conditions":' + floats(t["split_conditions"]) + ',"split_indices":'
            + ints(t["split_indices"]) + ',"split_type":' + ints(t["split_type"]) + ',"sum_hessian":'
            + floats(t["sum_hessian"]) + ',"tree_param":{"num_deleted":"0","num_feature":"'
            + str(N_FEATURES) + '","num_nodes":"' + str(n) + '","size_leaf_vector":"1"}}')
    return pre, post


def _xgb_head_tail(n_trees: int) -> tuple[str, str]:
    head = ('{"learner":{"attributes":{},"feature_names":[],"feature_types":[],"gradient_booster":'
            '{"model":{"cats":{"enc":[],"feature_segments":[],"sorted_idx":[]},"gbtree_model_param":'
            '{"num_parallel_tree":"1","num_trees":"' + str(n_trees) + '"},"iteration_indptr":['
            + ",".join(map(str, range(n_trees + 1))) + '],"tree_info":[' + ",".join(["0"] * n_trees)
            + '],"trees":[')
    tail = (']},"name":"gbtree"},"learner_model_param":{"base_score":"[5E-1]","boost_from_average":"1",'
            '"num_class":"0","num_feature":"' + str(N_FEATURES) + '","num_target":"1"},"objective":'
            '{"name":"binary:logistic","reg_loss_param":{"scale_pos_weight":"1"}}},"version":[3,2,0]}')
    return head, tail


def make_xgb_json(path: Path, trees: int, depth: int) -> None:
    pool = [_xgb_tree_json(t) for t in _xgb_pool(depth)]
    head, tail = _xgb_head_tail(trees)
    with open(path, "w") as f:
        f.write(head)
        for i in range(trees):
            pre, post = pool[i % POOL]
            f.write(("," if i else "") + pre + str(i) + post)
        f.write(tail)


# UBJSON as XGBoost's UBJWriter writes it: 'L' lengths, typed arrays '[$x#L', uncounted objects
def _u_len(n: int) -> bytes:
    return b"L" + int(n).to_bytes(8, "big", signed=True)


def _u_key(k: str) -> bytes:
    b = k.encode()
    return _u_len(len(b)) + b


def _u_int(v: int) -> bytes:
    for m, lo, hi, size in ((b"i", -128, 127, 1), (b"U", 0, 255, 1), (b"I", -2 ** 15, 2 ** 15 - 1, 2),
                            (b"l", -2 ** 31, 2 ** 31 - 1, 4)):
        if lo <= v <= hi:
            return m + int(v).to_bytes(size, "big", signed=m != b"U")
    return b"L" + int(v).to_bytes(8, "big", signed=True)


def _u_val(v) -> bytes:
    if isinstance(v, dict):
        return b"{" + b"".join(_u_key(k) + _u_val(x) for k, x in v.items()) + b"}"
    if isinstance(v, np.ndarray):
        m = {"float32": b"d", "int32": b"l", "int64": b"L", "uint8": b"U"}[v.dtype.name]
        return b"[$" + m + b"#" + _u_len(len(v)) + v.astype(v.dtype.newbyteorder(">")).tobytes()
    if isinstance(v, list):
        return b"[#" + _u_len(len(v)) + b"".join(_u_val(x) for x in v)
    if isinstance(v, str):
        b = v.encode()
        return b"S" + _u_len(len(b)) + b
    if isinstance(v, bool):
        return b"T" if v else b"F"
    if isinstance(v, int):
        return _u_int(v)
    raise TypeError(type(v))


def make_xgb_ubj(path: Path, trees: int, depth: int) -> None:
    pool = []
    for t in _xgb_pool(depth):
        n = len(t["left_children"])
        d = {"base_weights": t["base_weights"], "categories": np.zeros(0, np.int32),
             "categories_nodes": np.zeros(0, np.int32), "categories_segments": np.zeros(0, np.int64),
             "categories_sizes": np.zeros(0, np.int64), "default_left": t["default_left"].astype(np.uint8)}
        rest = {k: t[k] for k in ("left_children", "loss_changes", "parents", "right_children",
                                  "split_conditions", "split_indices", "split_type", "sum_hessian")}
        rest["tree_param"] = {"num_deleted": "0", "num_feature": str(N_FEATURES), "num_nodes": str(n),
                              "size_leaf_vector": "1"}
        pre = b"{" + b"".join(_u_key(k) + _u_val(v) for k, v in d.items()) + _u_key("id")
        post = b"".join(_u_key(k) + _u_val(v) for k, v in rest.items()) + b"}"
        pool.append((pre, post))
    model_head = {"cats": {"enc": [], "feature_segments": np.zeros(0, np.int32),
                           "sorted_idx": np.zeros(0, np.int32)},
                  "gbtree_model_param": {"num_parallel_tree": "1", "num_trees": str(trees)},
                  "iteration_indptr": list(range(trees + 1)), "tree_info": [0] * trees}
    with open(path, "wb") as f:
        f.write(b"{" + _u_key("learner") + b"{" + _u_key("attributes") + b"{}" + _u_key("feature_names")
                + _u_val([]) + _u_key("feature_types") + _u_val([]) + _u_key("gradient_booster") + b"{"
                + _u_key("model") + b"{" + b"".join(_u_key(k) + _u_val(v) for k, v in model_head.items())
                + _u_key("trees") + b"[#" + _u_len(trees))
        for i in range(trees):
            pre, post = pool[i % POOL]
            f.write(pre + _u_int(i) + post)
        f.write(b"}" + _u_key("name") + _u_val("gbtree") + b"}" + _u_key("learner_model_param")
                + _u_val({"base_score": "[5E-1]", "boost_from_average": "1", "num_class": "0",
                          "num_feature": str(N_FEATURES), "num_target": "1"})
                + _u_key("objective") + _u_val({"name": "binary:logistic",
                                                "reg_loss_param": {"scale_pos_weight": "1"}})
                + b"}" + _u_key("version") + b"[#" + _u_len(3) + _u_int(3) + _u_int(2) + _u_int(0) + b"}")


# -- LightGBM -------------------------------------------------------------------------------------
def _lgbm_source(d: Path) -> str:
    src = d / "lgbm-source-250x64.txt"
    if not src.exists():
        import lightgbm as lgb
        rng = np.random.default_rng(0)
        X = rng.normal(size=(20000, N_FEATURES))
        y = X[:, :10].sum(1) + rng.normal(size=20000)
        b = lgb.train({"num_leaves": 64, "verbose": -1, "seed": 0, "objective": "binary",
                       "min_data_in_leaf": 5, "deterministic": True, "num_threads": 2},
                      lgb.Dataset(X, (y > 0).astype(int)), 250)
        b.save_model(str(src))
    return src.read_text()


def make_lgbm(path: Path, trees: int, d: Path) -> None:
    text = _lgbm_source(d)
    head, _, rest = text.partition("\nTree=0\n")
    body, _, tail = ("Tree=0\n" + rest).partition("end of trees")
    blocks = [b[b.index("\n") + 1:] for b in body.split("\n\n\n") if b.startswith("Tree=")]
    blocks = [b if b.endswith("\n") else b + "\n" for b in blocks]
    out = []
    for i in range(trees):
        out.append(f"Tree={i}\n" + blocks[i % len(blocks)] + "\n\n")
    sizes = " ".join(str(len(s.encode())) for s in out)
    lines = [ln if not ln.startswith("tree_sizes=") else "tree_sizes=" + sizes
             for ln in head.split("\n")]
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n\n")
        f.writelines(out)
        f.write("end of trees" + tail)


# -- scikit-learn ---------------------------------------------------------------------------------
def make_rf(path: Path, trees: int) -> None:
    import pickle
    from sklearn.ensemble import RandomForestRegressor
    rng = np.random.default_rng(0)
    X = rng.normal(size=(3000, 20)).astype(np.float32)
    y = X[:, :5].sum(1) + rng.normal(size=3000)
    m = RandomForestRegressor(n_estimators=trees, random_state=0, n_jobs=2).fit(X, y)
    with open(path, "wb") as f:
        pickle.dump(m, f, protocol=5)


def make(names: list[str], d: Path) -> None:
    d.mkdir(parents=True, exist_ok=True)
    for name in names:
        p = path_of(name, d)
        if p.exists():
            continue
        s = SHAPES[name]
        t0 = time.perf_counter()
        tmp = p.with_name(p.name + ".part")
        if s["kind"] == "xgb" and s["fmt"] == "json":
            make_xgb_json(tmp, s["trees"], s["depth"])
        elif s["kind"] == "xgb":
            make_xgb_ubj(tmp, s["trees"], s["depth"])
        elif s["kind"] == "lgbm":
            make_lgbm(tmp, s["trees"], d)
        else:
            make_rf(tmp, s["trees"])
        tmp.rename(p)
        print(f"wrote {p} ({p.stat().st_size / 1e6:.0f} MB) in {time.perf_counter() - t0:.1f} s",
              file=sys.stderr)


# -- measuring (in a fresh process per phase) -----------------------------------------------------
def _status_kb(key: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return 0


def _reset_peak() -> None:
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")


class _Meter:
    """Peak RSS (VmHWM) above the RSS at `start`, in bytes; wall time."""

    def __init__(self) -> None:
        _reset_peak()
        self.rss0 = _status_kb("VmRSS") * 1024
        self.t0 = time.perf_counter()
        self.c0 = time.process_time()

    def stop(self) -> tuple[float, int]:
        self.cpu = time.process_time() - self.c0
        return time.perf_counter() - self.t0, _status_kb("VmHWM") * 1024 - self.rss0


def worker(name: str, phase: str, d: Path, out: Path) -> dict:
    import treecomp
    from treecomp import backends
    path = path_of(name, d)
    res: dict = {"shape": name, "phase": phase, "file_bytes": path.stat().st_size}
    if phase == "parse":
        m = _Meter()
        forest = treecomp.parse(path)
        res["parse_s"], res["parse_peak"] = m.stop()
        res["parse_cpu"] = m.cpu
        res["n_nodes"] = int(sum(t.n_nodes for t in forest.trees))
        res["n_trees"] = forest.n_trees
    elif phase == "compile":
        m = _Meter()
        p = treecomp.compile(path)
        res["compile_s"], res["compile_peak"] = m.stop()
        res["compile_cpu"] = m.cpu
        res["backend"] = p.backend
        res["n_nodes"] = int(sum(t.n_nodes for t in p.forest().trees))
        t0 = time.perf_counter()
        p.save(out / f"{name}.tc" if p.backend == "arrays" else out / f"{name}.so")
        res["save_s"] = time.perf_counter() - t0
    elif phase == "parts":
        from treecomp.backends.arrays import kernel as ak
        from treecomp.backends.arrays.tables import flatten, validate
        from treecomp.ir import head_of
        m = _Meter()
        t = time.perf_counter()
        forest = treecomp.parse(path)
        res["parse_s"] = time.perf_counter() - t
        t = time.perf_counter()
        res["backend"] = backends.choose(forest)
        res["choose_s"] = time.perf_counter() - t
        t = time.perf_counter()
        tables = flatten(forest)
        res["flatten_s"] = time.perf_counter() - t
        t = time.perf_counter()
        validate(tables)
        res["validate_s"] = time.perf_counter() - t
        t = time.perf_counter()
        k = ak.ArraysKernel(tables, head_of(forest))
        res["derive_s"] = time.perf_counter() - t
        res["parts_s"], res["parts_peak"] = m.stop()
        res["tables_bytes"] = tables.nbytes
        res["n_nodes"] = int(sum(t.n_nodes for t in forest.trees))
        del k
    elif phase == "save-so":
        p = treecomp.load(out / f"{name}.tc")
        os.environ["TREECOMP_CACHE_DIR"] = tempfile.mkdtemp(prefix="tc-huge-")
        t0 = time.perf_counter()
        p.save(out / f"{name}.so")
        res["save_so_s"] = time.perf_counter() - t0
        shutil.rmtree(os.environ["TREECOMP_CACHE_DIR"], ignore_errors=True)
    elif phase in ("load-tc", "load-so"):
        art = out / f"{name}.{phase[5:]}"
        if not art.exists():
            return {**res, "skipped": f"no {art.name}"}
        anon0, file0 = _status_kb("RssAnon"), _status_kb("RssFile")
        m = _Meter()
        p = treecomp.load(art)
        X = np.zeros((1, p.n_features), np.float32)
        p.predict(X)
        res[f"{phase}_s"], res[f"{phase}_rss"] = m.stop()
        res[f"{phase}_cpu"] = m.cpu
        # after the load, what it added: private memory, and file pages mapped (the page
        # cache's, shared: a mapped table file, a loaded .so)
        res[f"{phase}_anon"] = (_status_kb("RssAnon") - anon0) * 1024
        res[f"{phase}_file"] = (_status_kb("RssFile") - file0) * 1024
        res[f"{phase}_bytes"] = art.stat().st_size
    return res


PHASES = ("parse", "compile", "parts", "load-tc", "save-so", "load-so")


def run_phase(name: str, phase: str, d: Path, out: Path, timeout: float = 1800,
              tree: Path = ROOT) -> dict:
    """One phase in a fresh process, with the treecomp of checkout `tree`."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    r = subprocess.run([sys.executable, __file__, "_worker", name, phase, str(d), str(out)],
                       capture_output=True, text=True, env=env, timeout=timeout)
    if r.returncode:
        return {"shape": name, "phase": phase, "error": (r.stderr or r.stdout)[-2000:]}
    return json.loads(r.stdout.strip().splitlines()[-1])


def _fmt_row(name: str, rs: list[dict]) -> str:
    def med(key):
        v = [r[key] for r in rs if key in r]
        return statistics.median(v) if v else None
    n = med("n_nodes") or 0
    mb = (med("file_bytes") or 0) / 1e6
    parse = med("parse_s")
    cells = [name, f"{n / 1e6:.2f}M", f"{mb:.0f}",
             f"{parse:.2f}" if parse else "-", f"{mb / parse:.0f}" if parse else "-"]
    for key in ("compile_s", "choose_s", "flatten_s", "validate_s", "derive_s"):
        v = med(key)
        cells.append(f"{v:.2f}" if v is not None else "-")
    peak = med("compile_peak")
    cells.append(f"{peak / n:.0f}" if peak and n else "-")
    for key in ("load-tc_s", "load-so_s", "save_so_s"):
        v = med(key)
        cells.append(f"{v:.2f}" if v is not None else "-")
    for key in ("load-tc_rss", "load-tc_anon", "load-tc_file", "load-tc_bytes"):
        v = med(key)
        cells.append(f"{v / 1e6:.0f}" if v is not None else "-")
    be = next((r["backend"] for r in rs if "backend" in r), "-")
    cells.append(be)
    return "| " + " | ".join(cells) + " |"


HEADER = ("| shape | nodes | file MB | parse s | parse MB/s | compile s | choose | flatten | validate "
          "| derive | peak B/node | load .tc s | load .so s | save .so s | load .tc peak RSS MB "
          "| anon MB | file MB | .tc MB | backend |\n"
          "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    for cmd in ("make", "run", "profile", "memtrace", "codegen"):
        p = sub.add_parser(cmd)
        p.add_argument("--dir", type=Path, default=DEFAULT_DIR)
        if cmd not in ("profile", "memtrace"):
            p.add_argument("--shapes", default=",".join(SMALL))
    sub.choices["run"].add_argument("--reps", type=int, default=1)
    sub.choices["run"].add_argument("--phases", default=",".join(PHASES))
    sub.choices["run"].add_argument("--json", type=Path)
    sub.choices["run"].add_argument("--baseline", type=Path,
                                    help="another checkout to measure alternately (before / after)")
    sub.choices["run"].add_argument("--tree", type=Path, default=ROOT,
                                    help="the checkout whose treecomp is measured (default: this one)")
    sub.choices["profile"].add_argument("shape")
    sub.choices["profile"].add_argument("--phase", default="parse", choices=("parse", "compile", "load"))
    sub.choices["profile"].add_argument("--top", type=int, default=30)
    sub.choices["memtrace"].add_argument("shape")
    sub.choices["memtrace"].add_argument("--phase", default="compile", choices=("parse", "compile"))
    sub.choices["codegen"].add_argument("--sizes", default="25000,50000,100000")
    sub.choices["codegen"].add_argument("--backends", default="c,llvm")
    w = sub.add_parser("_worker")
    w.add_argument("shape")
    w.add_argument("phase")
    w.add_argument("dir", type=Path)
    w.add_argument("out", type=Path)
    wc = sub.add_parser("_codegen")
    wc.add_argument("kind")
    wc.add_argument("size", type=int)
    wc.add_argument("backend")
    a = ap.parse_args(argv)
    if a.cmd == "_worker":
        print(json.dumps(worker(a.shape, a.phase, a.dir, a.out)))
        return 0
    if a.cmd == "_codegen":
        print(json.dumps(codegen_worker(a.kind, a.size, a.backend)))
        return 0
    if a.cmd == "profile":
        return profile(a.shape, a.phase, a.dir, a.top)
    if a.cmd == "memtrace":
        return memtrace(a.shape, a.phase, a.dir)
    names = [s for s in a.shapes.split(",") if s] if a.cmd != "codegen" else []
    if a.cmd == "make":
        make(names, a.dir)
        return 0
    if a.cmd == "codegen":
        return codegen([int(s) for s in a.sizes.split(",")], a.backends.split(","))
    make(names, a.dir)
    out = Path(tempfile.mkdtemp(prefix="tc-huge-art-"))
    print(f"<!-- {platform.node()} {platform.processor() or platform.machine()}, "
          f"{_dt.datetime.now(_dt.timezone.utc):%Y-%m-%d %H:%M} UTC, load {os.getloadavg()[0]:.1f}, "
          f"reps {a.reps} (medians) -->")
    print(HEADER)
    results = []
    trees = [("", a.tree)] + ([(" (before)", a.baseline)] if a.baseline else [])
    for name in names:
        rs: dict[str, list] = {label: [] for label, _ in trees}
        for _ in range(a.reps):
            for label, tree in trees:  # alternating: the machine's drift hits both alike
                r: dict = {"tree": str(tree)}
                for ph in a.phases.split(","):
                    got = run_phase(name, ph, a.dir, out, tree=tree)
                    if "error" in got:
                        print(f"{name} {ph}{label}: {got['error']}", file=sys.stderr)
                    r.update({k: v for k, v in got.items() if k != "phase"})
                rs[label].append(r)
                for f in out.glob(f"{name}.*"):
                    f.unlink()
        for label, _ in reversed(trees):
            results.extend(rs[label])
            print(_fmt_row(name + label, rs[label]), flush=True)
    shutil.rmtree(out, ignore_errors=True)
    if a.json:
        a.json.write_text(json.dumps(results, indent=1))
    return 0


def profile(name: str, phase: str, d: Path, top: int) -> int:
    import cProfile
    import pstats
    import treecomp
    path = path_of(name, d)
    pr = cProfile.Profile()
    if phase == "parse":
        pr.runcall(treecomp.parse, path)
    elif phase == "compile":
        forest = treecomp.parse(path)
        pr.runcall(treecomp.compile, forest)
    else:
        out = Path(tempfile.mkdtemp())
        p = treecomp.compile(path)
        p.save(out / "m.tc")
        pr.runcall(treecomp.load, out / "m.tc")
    pstats.Stats(pr).sort_stats("cumulative").print_stats(top)
    return 0


def _treecomp_stack(frame) -> tuple[str, ...]:
    """The treecomp functions on a thread's stack, outermost first ("module:function")."""
    out = []
    while frame is not None:
        f = frame.f_code.co_filename
        if "/treecomp/" in f:
            mod = f.split("/treecomp/", 1)[1].removesuffix(".py").replace("/", ".")
            out.append(f"{mod}:{frame.f_code.co_name}")
        frame = frame.f_back
    return tuple(reversed(out))


def memtrace(name: str, phase: str, d: Path) -> int:
    """The phase's peak RSS and where it was reached (module docstring)."""
    import threading
    import treecomp
    import treecomp.backends.arrays.kernel  # noqa: F401 - imports before the baseline
    import treecomp.frontends.lightgbm  # noqa: F401
    import treecomp.frontends.xgboost  # noqa: F401
    path = path_of(name, d)
    main_id = threading.get_ident()
    done = threading.Event()
    best = {"rss": 0, "stack": ()}
    per_fn: dict[str, int] = {}

    def sample() -> None:
        with open("/proc/self/statm", "rb") as f:
            page = os.sysconf("SC_PAGE_SIZE")
            while not done.is_set():
                f.seek(0)
                rss = int(f.read().split()[1]) * page
                frame = sys._current_frames().get(main_id)
                stack = _treecomp_stack(frame) if frame is not None else ()
                del frame
                for fn in stack:
                    if rss > per_fn.get(fn, 0):
                        per_fn[fn] = rss
                if rss > best["rss"]:
                    best["rss"], best["stack"] = rss, stack
                time.sleep(0.001)
    _reset_peak()
    rss0 = _status_kb("VmRSS") * 1024
    th = threading.Thread(target=sample, daemon=True)
    th.start()
    if phase == "parse":
        forest = treecomp.parse(path)
    else:
        forest = treecomp.compile(path).forest()
    done.set()
    th.join()
    n = int(sum(t.n_nodes for t in forest.trees))
    hwm = _status_kb("VmHWM") * 1024
    print(f"{name} {phase}: {n} nodes; peak RSS above the start {(hwm - rss0) / n:.0f} B/node "
          f"(VmHWM), sampled {(best['rss'] - rss0) / n:.0f} B/node at:")
    for fn in best["stack"]:
        print(f"    {fn}")
    print("highest RSS above the start (B/node) while each treecomp function ran:")
    for fn, rss in sorted(per_fn.items(), key=lambda kv: -kv[1])[:40]:
        print(f"  {(rss - rss0) / n:6.0f}  {fn}")
    return 0


# -- c / llvm build time against node count -------------------------------------------------------
def codegen_model(kind: str, size: int):
    """A Forest of about `size` nodes of the shapes auto may send to c / llvm:
    f32-deep: sklearn-like deep float32 trees (random forests, ~4k nodes a tree);
    f32-wide: XGBoost depth-6 trees over 3,000 features (quantising costs more than it saves);
    f64-255: LightGBM-like float64 trees of 255 leaves."""
    from treecomp.ir import Forest, Tree
    rng = np.random.default_rng(size)
    trees = []
    total = 0
    while total < size:
        if kind == "f32-wide":
            depth, nf = 6, 3000
        elif kind == "f32-deep":
            depth, nf = 12, 20
        else:
            depth, nf = 8, 100
        n_int = (1 << depth) - 1
        if kind == "f64-255":
            n_int = 254
        n = 2 * n_int + 1
        idx = np.arange(n)
        if kind == "f32-deep":  # a random (unbalanced) shape: grow by splitting random leaves
            n_int = 2000
            n = 2 * n_int + 1
            left = np.full(n, -1)
            right = np.full(n, -1)
            leaves = [0]
            nxt = 1
            for _ in range(n_int):
                j = leaves.pop(int(rng.integers(len(leaves))))
                left[j], right[j] = nxt, nxt + 1
                leaves += [nxt, nxt + 1]
                nxt += 2
        else:
            # heap-ordered complete trees trimmed to n nodes (the first n_int are internal)
            left = np.where(idx < n_int, 2 * idx + 1, -1)
            right = np.where(idx < n_int, 2 * idx + 2, -1)
        internal = left >= 0
        trees.append(Tree(left=left, right=right, feature=np.where(internal, rng.integers(0, nf, n), -1),
                          threshold=np.where(internal, rng.normal(size=n).astype(np.float32), 0.0),
                          default_left=rng.random(n) < 0.5,
                          value=np.where(internal, 0.0, rng.normal(size=n).astype(np.float32))))
        total += n
    f64 = kind == "f64-255"
    return Forest(trees=tuple(trees), n_features=nf, n_outputs=1, tree_output=np.zeros(len(trees)),
                  base_score=[0.0], input_dtype="float64" if f64 else "float32",
                  accumulate_dtype="float64" if f64 else "float32", comparison="<=" if f64 else "<")


def codegen_worker(kind: str, size: int, backend: str) -> dict:
    os.environ["TREECOMP_CACHE_DIR"] = tempfile.mkdtemp(prefix="tc-cg-")
    import treecomp
    from treecomp import backends
    forest = codegen_model(kind, size)
    n = int(sum(t.n_nodes for t in forest.trees))
    import resource
    t0 = time.perf_counter()
    c0 = time.process_time() + resource.getrusage(resource.RUSAGE_CHILDREN).ru_utime
    k = backends.get(backend).build(forest)
    build = time.perf_counter() - t0
    cpu = time.process_time() + resource.getrusage(resource.RUSAGE_CHILDREN).ru_utime - c0
    del k
    shutil.rmtree(os.environ["TREECOMP_CACHE_DIR"], ignore_errors=True)
    return {"kind": kind, "backend": backend, "n_nodes": n, "n_trees": forest.n_trees,
            "build_s": build, "build_cpu_s": cpu, "auto": backends.choose(forest),
            "treecomp": treecomp.__version__}


def codegen(sizes: list[int], names: list[str]) -> int:
    print(f"<!-- {platform.node()}, {_dt.datetime.now(_dt.timezone.utc):%Y-%m-%d %H:%M} UTC, "
          f"load {os.getloadavg()[0]:.1f} -->")
    print("| model | nodes | trees | backend | build s | build CPU s (+ children) | auto |\n"
          "|---|---|---|---|---|---|---|")
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    for kind in ("f32-wide", "f32-deep", "f64-255"):
        for size in sizes:
            for be in names:
                try:
                    r = subprocess.run([sys.executable, __file__, "_codegen", kind, str(size), be],
                                       capture_output=True, text=True, env=env, timeout=900)
                except subprocess.TimeoutExpired:
                    print(f"| {kind} | {size} | | {be} | > 900 | | |", flush=True)
                    continue
                if r.returncode:
                    print(f"{kind} {size} {be}: {r.stderr[-1500:]}", file=sys.stderr)
                    continue
                g = json.loads(r.stdout.strip().splitlines()[-1])
                print(f"| {kind} | {g['n_nodes']} | {g['n_trees']} | {be} | {g['build_s']:.1f} | "
                      f"{g['build_cpu_s']:.1f} | {g['auto']} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
