"""The benchmark suite end to end on a tiny case, plus its exactness comparison and CLI paths."""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("sklearn")
pytest.importorskip("matplotlib")

from treecomp import toolchain  # noqa: E402
from treecomp.backends.arrays.native import NATIVE_ISAS  # noqa: E402
from treecomp.benchmark import cases as bench_cases  # noqa: E402
from treecomp.benchmark import engines as bench_engines  # noqa: E402
from treecomp.benchmark import measure as bench_measure  # noqa: E402
from treecomp.benchmark import plots as bench_plots  # noqa: E402
from treecomp.benchmark import report as bench_report  # noqa: E402
from treecomp.benchmark import runner as bench_runner  # noqa: E402

REPO = Path(__file__).resolve().parent.parent

needs_cc = pytest.mark.skipif(not toolchain.have_compiler(), reason="no C compiler")


@pytest.fixture(autouse=True)
def _private_model_cache(tmp_path, monkeypatch):
    """Trained bench models go to the test's temp dir, never bench/.cache."""
    monkeypatch.setattr(bench_cases, "CACHE_DIR", tmp_path / "models")
    monkeypatch.setenv("TREECOMP_BENCH_CACHE", str(tmp_path / "models"))  # for subprocesses


@needs_cc
def test_quick_tiny_case_end_to_end(tmp_path):
    out = tmp_path / "out"
    rc = bench_runner.main(["--quick", "--cases", "tiny", "--output-dir", str(out),
                         "--strategies", "walker,interp,c,library,tl2cgen"])
    assert rc == 0
    report = (out / "report.md").read_text()
    results = json.loads((out / "results.json").read_text())
    assert list(out.glob("*.png")), "no plot written"
    (case,) = results["cases"]
    assert case["name"] == "tiny" and case["n_trees"] == 10
    rows = {r["name"]: r for r in case["strategies"]}
    assert set(rows) == {"walker", "interp", "c", "library", "tl2cgen"}
    c = rows["c"]
    assert c["status"] == "ok", c.get("note")
    # compared with GradientBoostingClassifier's predict, predict_proba and decision_function
    assert set(c["exact"]) == {"predict", "proba", "raw"}
    assert c["bit_exact"] is True and c["max_abs_diff"] == 0.0
    assert c["compile_s"] > 0 and c["compiler_rss_mib"] > 0 and c["artifact_bytes"] > 0
    # one-thread throughput side by side with the library (the walker and interpreter alone)
    assert c["throughput_rounds"] >= bench_runner.THROUGHPUT_ROUNDS[0]
    assert rows["library"]["throughput_rounds"] == c["throughput_rounds"]
    assert "throughput_rounds" not in rows["walker"]
    assert c["speedup_vs_library"] == rows["library"]["ns_per_row_1t"] / c["ns_per_row_1t"]
    assert results["batches"] == [1, 64, 4096]   # quick mode: three of the five batch sizes
    assert set(c["latency_us"]) == {"1", "64"}  # 2000 test rows: no 4096 batch
    # the latency table: per batch size treecomp beside the fastest other engine; auto picks a
    # backend not measured here (arrays, or c itself), so the table shows the fastest treecomp row
    table = case["latency_table"]
    assert [e["batch"] for e in table] == [1, 64]
    for e in table:
        assert e["treecomp"] == "c" and e["auto"] is (case["auto_backend"] == "c")
        assert e["treecomp_us"] == c["latency_us"][str(e["batch"])]
        assert e["other"] in ("library", "tl2cgen") and e["other_us"] > 0   # never the walker
        assert e["other_over_treecomp"] == pytest.approx(e["other_us"] / e["treecomp_us"])
    assert "## Latency per batch size" in report and "| tiny | treecomp (" in report
    assert "4096 rows" not in report.split("## Latency per batch size")[1].split("## Cases")[0]
    # cycles per row and per node step beside ns/row, from the core's measured clock
    clock = results["machine"]["clock"]
    assert 0.3 < clock["ghz"] < 10 and "dependent" in clock["method"]
    assert f"- core clock: {clock['ghz']:.2f} GHz" in report
    assert case["node_steps_per_row"] == 30.0   # 10 trees, every leaf at depth 3
    for r in rows.values():
        if r["status"] == "ok":
            assert r["cycles_per_row"] == pytest.approx(r["ns_per_row_1t"] * clock["ghz"])
            assert r["cycles_per_step"] == pytest.approx(r["cycles_per_row"] / 30.0)
    assert "cycles/node step" in report and f"| {bench_report.fmt_num(c['cycles_per_step'])} |" in c_line_of(report)
    # one row: the kernel call alone and through Python, in alternating rounds
    assert c["native_us_1row"] > 0 and c["api_us_1row_paired"] > 0
    assert "API, 1 row (paired)" in report and "api_us_1row_paired" not in rows["library"]
    assert c["ns_per_row_1t"] < rows["walker"]["ns_per_row_1t"]
    assert c["speedup_vs_walker"] > 1 and c["speedup_vs_library"] > 0
    # the main plot is over the library (= 1x), from the same per-case ratios as the tables
    (panel,) = bench_plots.speedup_data(results)
    assert panel["case"] == "tiny" and panel["reference"] == "library"
    bars = {name: v for name, _, v, _ in panel["bars"]}
    assert bars["library"] == 1.0 and "walker" not in bars and "interp" not in bars
    assert bars["c"] == pytest.approx(c["speedup_vs_library"])
    assert bars["c"] == pytest.approx(rows["library"]["ns_per_row_1t"] / c["ns_per_row_1t"])
    assert {p.name for p in out.glob("*.png")} == {"speedup.png", "latency.png", "compile_time.png"}
    assert "![speedup.png](speedup.png)" in report and "library = 1x" in report
    headline = next(line for line in report.splitlines() if line.startswith("| tiny |"))
    assert f"({bench_report.fmt_ratio(c['speedup_vs_library'])})" in headline
    for name in ("walker", "interp", "library"):
        assert rows[name]["status"] == "ok" and rows[name]["bit_exact"] is True, name
    if results["machine"]["cores"] > 1:  # thread scaling, paired; the ceiling for treecomp only
        assert c["scaling_pairs"] >= 5 and 0 < c["scaling_paired"] and 0 < c["ceiling_paired"]
        assert "ceiling_paired" not in rows["library"] and rows["library"]["scaling_paired"] > 0
        assert "scaling_paired" not in rows["walker"]  # single-threaded baseline
        assert "| c | " + str(c["scaling_pairs"]) + " | " in report
    # the c row of the case table says bit-exact; the headline says all treecomp rows are
    c_line = next(line for line in report.splitlines() if line.startswith("| c |"))
    assert c_line.rstrip(" |").endswith("bit-exact")
    assert "all bit-exact" in report
    try:
        import tl2cgen  # noqa: F401
    except ImportError:
        assert rows["tl2cgen"]["status"] == "skipped" and "not installed" in rows["tl2cgen"]["note"]


@needs_cc
def test_user_model_files(tmp_path):
    case = bench_cases.build_case("tiny", quick=True)
    pkl = tmp_path / "tiny.pkl"
    pkl.write_bytes(pickle.dumps(case.model))
    out = tmp_path / "out"
    assert bench_runner.main([str(pkl), "--rows", "300", "--quick", "--no-plots", "--out", str(out),
                           "--strategies", "c,library"]) == 0
    res = json.loads((out / "results.json").read_text())
    rows = {r["name"]: r for r in res["cases"][0]["strategies"]}
    assert res["cases"][0]["n_rows"] == 300
    assert rows["library"]["status"] == "ok" and rows["c"]["bit_exact"] is True

    # a bare IR file: no library; exactness is checked against the interpreter, on --data rows
    import treecomp
    ir = tmp_path / "tiny.tcir"
    treecomp.parse(case.model).save(ir)
    data = tmp_path / "rows.csv"
    np.savetxt(data, case.X[:50], delimiter=",", header=",".join(f"f{i}" for i in range(8)))
    assert bench_runner.main([str(ir), "--data", str(data), "--quick", "--no-plots", "--out", str(out),
                           "--strategies", "c,library"]) == 0
    res = json.loads((out / "results.json").read_text())
    c0 = res["cases"][0]
    rows = {r["name"]: r for r in c0["strategies"]}
    assert c0["n_rows"] == 50 and c0["reference"] == "treecomp interpreter"
    assert rows["library"]["status"] == "skipped" and rows["c"]["bit_exact"] is True


def c_line_of(report: str) -> str:
    return next(line for line in report.splitlines() if line.startswith("| c |"))


def test_quick_mode_keeps_a_subset_of_the_batch_sizes():
    """A full run times batches of 1, 8, 64, 512 and 4096 rows; --quick three of them, fewer
    than before the table existed (four), so that it stays about as fast."""
    full, quick = (bench_measure.Settings.for_mode(q) for q in (False, True))
    assert full.batches == bench_runner.BATCHES == (1, 8, 64, 512, 4096)
    assert set(quick.batches) < set(full.batches) and len(quick.batches) <= 3
    assert quick.batches[0] == 1 and quick.batches[-1] == 4096


class _FakeEngine(bench_engines.Strategy):
    """A strategy whose call costs `cost` seconds a row (busy wait) and records its batches."""

    def __init__(self, name, group, cost, fail_at=None, log=None):
        self.name, self.label, self.group, self.cost, self.fail_at = name, name, group, cost, fail_at
        self.calls, self.thread_sets, self.log = [], [], log if log is not None else []

    def threads(self, k):
        import contextlib

        @contextlib.contextmanager
        def cm():
            self.thread_sets.append(k)
            yield
        return cm()

    def run(self, X, n_threads):
        assert n_threads == 1
        if self.fail_at is not None and len(X) >= self.fail_at:
            raise RuntimeError("boom")
        self.calls.append(X[0, 0])
        self.log.append((self.name, len(X)))
        import time
        end = time.perf_counter() + self.cost * len(X)
        while time.perf_counter() < end:
            pass
        return X[:, 0]


def test_latency_side_by_side():
    """measure_latency: every engine at every batch size that fits, in rounds on the same
    (distinct, cycling) batches at one thread; an engine that raises leaves with a note."""
    X = np.arange(600 * 2, dtype=np.float64).reshape(600, 2)
    st = bench_measure.Settings(quick=True, budget_s=0.01, latency_budget_s=0.005, min_reps=3,
                                exact_rows=10, slow_budget_s=0.01, compile_timeout_s=10,
                                batches=(1, 8, 64, 512, 4096))
    log = []
    fast, slow, bad = (_FakeEngine("fast", "treecomp", 2e-7, log=log),
                       _FakeEngine("slow", "library", 2e-6, log=log),
                       _FakeEngine("bad", "external", 1e-7, fail_at=64, log=log))
    out = bench_runner.measure_latency([fast, slow, bad], X, st)
    assert set(out["fast"]["latency_us"]) == {"1", "8", "64", "512"}   # 4096 > 600 rows
    assert set(out["bad"]["latency_us"]) == {"1", "8"} and "boom" in out["bad"]["latency_note"]
    for b in (1, 8, 64, 512):
        f, s = out["fast"]["latency_us"][str(b)], out["slow"]["latency_us"][str(b)]
        assert 0 < f < s, b
    assert fast.thread_sets == [1] and slow.thread_sets == [1]   # set once, for the whole pass
    # each engine cycles through distinct batches; the engines take turns in blocks of calls
    # (several blocks each per batch size: both see the same minutes of the machine)
    for e in (fast, slow):
        assert len(set(e.calls)) > 3
    at8 = [name for name, n in log if n == 8]
    switches = sum(a != b for a, b in zip(at8, at8[1:]))
    assert switches >= 4 and at8.count("fast") > at8.count("slow") >= 3
    assert len(bench_runner.distinct_batches(X, 8)) == 64
    assert [len(c) for c in bench_runner.distinct_batches(X, 512)] == [512]


def test_throughput_side_by_side():
    """measure_throughput: one-thread calls on the whole matrix in rounds, the engines taking
    turns (order reversed every other round), at least THROUGHPUT_ROUNDS[0] calls each; medians
    per row; an engine that raises leaves the pass with a note."""
    X = np.zeros((200, 2))
    st = bench_measure.Settings(quick=True, budget_s=0.001, latency_budget_s=0.005, min_reps=3,
                                exact_rows=10, slow_budget_s=0.01, compile_timeout_s=10)
    log = []
    fast, slow, bad = (_FakeEngine("fast", "treecomp", 1e-6, log=log),
                       _FakeEngine("slow", "library", 1e-5, log=log),
                       _FakeEngine("bad", "external", 1e-7, fail_at=100, log=log))
    out = bench_runner.measure_throughput([fast, slow, bad], X, st)
    lo = bench_runner.THROUGHPUT_ROUNDS[0]
    assert out["fast"]["throughput_rounds"] == out["slow"]["throughput_rounds"] >= lo
    assert 1e3 <= out["fast"]["ns_per_row_1t"] < out["slow"]["ns_per_row_1t"]
    assert 1e4 <= out["slow"]["ns_per_row_1t"] < 5e4   # the cost per row, not per call
    assert "boom" in out["bad"]["throughput_note"] and "ns_per_row_1t" not in out["bad"]
    assert fast.thread_sets == [1] and slow.thread_sets == [1]
    order = [name for name, _ in log]
    assert order[:2] == ["fast", "slow"]                 # warm-ups
    rounds = [order[i:i + 2] for i in range(2, len(order), 2)]
    assert rounds[0] == ["fast", "slow"] and rounds[1] == ["slow", "fast"]   # turns, reversed


def test_latency_table_picks_auto_and_the_fastest_other():
    def row(name, group, lat, **kw):
        return {"name": name, "label": name + " label", "group": group, "status": "ok",
                "latency_us": lat, **kw}
    rows = [row("walker", "baseline", {"1": 0.5, "64": 0.6}),            # never "other"
            row("c", "treecomp", {"1": 1.0, "64": 5.0}),
            row("arrays", "treecomp", {"1": 2.0, "64": 4.0}),
            row("library", "library", {"1": 100.0, "64": 150.0}),
            row("daal4py", "external", {"1": 20.0, "64": 300.0}),
            row("lleaves", "external", {"1": 1.0}, latency_extrapolated=[1]),   # scaled: not timed
            {"name": "onnxruntime", "label": "o", "group": "external", "status": "skipped"}]
    t = bench_runner.latency_table(rows, "arrays", [1, 64, 4096])
    assert t == [
        {"batch": 1, "treecomp": "arrays", "auto": True, "treecomp_us": 2.0, "other": "daal4py",
         "other_label": "daal4py label", "other_us": 20.0, "other_over_treecomp": 10.0},
        {"batch": 64, "treecomp": "arrays", "auto": True, "treecomp_us": 4.0, "other": "library",
         "other_label": "library label", "other_us": 150.0, "other_over_treecomp": 37.5}]
    # auto's backend not measured: the fastest treecomp row at each size, flagged
    t = bench_runner.latency_table(rows, "llvm", [1, 64])
    assert [(e["treecomp"], e["auto"]) for e in t] == [("c", False), ("arrays", False)]
    res = _results([{"name": "a", "title": "a", "n_rows": 10, "n_features": 2, "strategies": rows,
                     "latency_table": t}])
    res["batches"] = [1, 8, 64]
    sec = bench_report.latency_section(res)
    assert "| case | us per call, 1 thread | 1 row | 64 rows |" in sec   # no case had 8 rows
    assert "| a | treecomp (fastest backend measured) | 1.00 (c) | 4.00 (arrays) |" in sec
    assert "|  | fastest other engine | 20.0 (daal4py) | 150 (library) |" in sec
    assert "|  | treecomp faster by | 20.0x | 37.5x |" in sec


def test_node_steps_count_the_depth_of_the_leaf_reached():
    """The node steps of a row: the depth of the leaf it reaches, summed over the trees."""
    from treecomp.ir import Forest, Tree
    # x0 <= 0.5 -> leaf at depth 1; else x1 <= 0.5 -> leaves at depth 2
    deep = Tree(left=[1, -1, 3, -1, -1], right=[2, -1, 4, -1, -1], feature=[0, -1, 1, -1, -1],
                threshold=[0.5, 0, 0.5, 0, 0], default_left=[True] * 5, value=[0.0, 1, 0, 2, 3])
    stump = Tree(left=[-1], right=[-1], feature=[-1], threshold=[0.0], default_left=[True],
                 value=[5.0])
    forest = Forest(trees=(deep, stump, bench_engines.seed_forest().trees[0]), n_features=2,
                    n_outputs=1, tree_output=[0, 0, 0], base_score=[0.0])
    X = np.array([[0.0, 0.0], [1.0, 0.0], [1.0, 1.0], [np.nan, 1.0]], np.float32)
    # per row: deep 1 / 2 / 2 / 1 (NaN goes left) + stump 0 + seed 1
    assert bench_runner.node_steps(forest, X) == {"node_steps_per_row": 6 / 4 + 1, "node_steps_rows": 4}
    assert bench_runner.node_steps(forest, X, max_rows=1)["node_steps_per_row"] == 2.0


def test_cycles_columns_and_the_clock_line():
    rows = [_row("c", "treecomp", 100.0, speedup_vs_library=10.0), _row("library", "library", 1000.0),
            _row("x", "external", None)]
    bench_runner.add_cycles(rows, 3.0, 50.0)
    assert rows[0]["cycles_per_row"] == 300.0 and rows[0]["cycles_per_step"] == 6.0
    assert rows[1]["cycles_per_row"] == 3000.0 and "cycles_per_row" not in rows[2]
    case = {"name": "a", "title": "a", "n_rows": 10, "n_features": 2, "n_trees": 5, "n_nodes": 70,
            "max_depth": 3, "n_outputs": 1, "input_dtype": "float32", "accumulate_dtype": "float32",
            "library": "lib 1", "library_call": "predict", "strategies": rows, "auto_backend": "c",
            "node_steps_per_row": 50.0, "node_steps_rows": 10}
    res = _results([case])
    res["machine"]["clock"] = {"ghz": 3.0, "method": "adds", "tsc_ghz": 2.5}
    md = bench_report.markdown(res, [])
    assert "- core clock: 3.00 GHz, from adds; the TSC ticks at 2.50 GHz" in md
    assert "| a | 5 | 70.0 | 50.0 | 1,000 | 100 (10.0x) | 300 (6.00) c |" in md     # the headline
    assert "| c | - | - | - | - | 100 | 300 | 6.00 |" in md                      # the case's table
    assert "50.0 node steps a row (over its first 10 rows)" in md
    # no clock (no compiler, an old results.json): no cycles, said so
    bench_runner.add_cycles(rows2 := [_row("c", "treecomp", 100.0)], None, 50.0)
    assert "cycles_per_row" not in rows2[0]
    res["machine"]["clock"] = {"ghz": None, "note": "no clock measured (CompileError: x)"}
    assert "- core clock: not measured (no clock measured (CompileError: x))" in bench_report.markdown(res, [])


@needs_cc
def test_core_clock_is_measured():
    clk = bench_measure.core_clock()
    assert 0.3 < clk["ghz"] < 10 and clk["method"] == bench_measure.CLOCK_METHOD
    assert bench_measure.core_clock() is clk   # once per process
    import platform
    if platform.machine() in ("x86_64", "AMD64"):
        assert 0.3 < clk["tsc_ghz"] < 10


def _results(cases: list[dict]) -> dict:
    return {"mode": "quick", "machine": {"cpu": "test", "cores": 2, "platform": "p", "python": "3",
                                         "treecomp": "0", "date": "today"},
            "batches": [1, 16], "cases": cases, "skipped_cases": [], "setup": {}, "wall_s": 1.0}


def _row(name: str, group: str, ns: float | None, **kw) -> dict:
    if ns is None:
        return {"name": name, "label": name, "group": group, "status": "skipped", "note": "n/a"}
    return {"name": name, "label": name, "group": group, "status": "ok", "ns_per_row_1t": ns,
            "latency_us": {"1": ns / 100, "16": ns / 10}, **kw}


def test_speedup_figure_is_over_the_library(tmp_path):
    """speedup.png shows library = 1x per case (the walker only where there is no library);
    re-rendering from results.json leaves the JSON as it was."""
    lib_case = {"name": "a", "title": "a", "n_rows": 10, "n_features": 2, "n_nodes": 100,
                "library": "xgboost 9", "library_call": "predict",
                "strategies": [_row("walker", "baseline", 1e6), _row("c", "treecomp", 500.0, compile_s=0.5),
                               _row("arrays", "treecomp", 100.0, compile_s=0.1),
                               _row("library", "library", 1000.0),
                               _row("daal4py", "external", 400.0, compile_s=1.0),
                               _row("lleaves", "external", None)]}
    bare_case = {"name": "b", "title": "b", "n_rows": 10, "n_features": 2, "n_nodes": 50,
                 "library": None, "library_call": None,
                 "strategies": [_row("walker", "baseline", 1e5), _row("c", "treecomp", 100.0, compile_s=0.2),
                                _row("library", "library", None)]}
    a, b = bench_plots.speedup_data(_results([lib_case, bare_case]))
    assert a["reference"] == "library" and b["reference"] == "walker"
    # library first, then treecomp's strategies, then the other engines; lleaves ran nowhere
    assert [(n, v) for n, _, v, _ in a["bars"]] == [
        ("library", 1.0), ("c", 2.0), ("arrays", 10.0), ("daal4py", 2.5)]
    assert dict((n, v) for n, _, v, _ in b["bars"]) == {"walker": 1.0, "c": 1000.0, "arrays": None,
                                                          "daal4py": None}
    # one colour per strategy, never shared
    names = ["library", "c", "llvm", "arrays", "arrays-float", "arrays-naive", "tl2cgen", "onnxruntime",
             "lleaves", "daal4py", "walker", "interp", "new-backend", "other"]
    colours = bench_plots.colour_map(names)
    assert len(set(colours.values())) == len(names)
    # re-render: report.md and the plots from results.json, which is not rewritten
    src = tmp_path / "run"
    bench_report.write(_results([lib_case, bare_case]), src, plots=False)
    before = (src / "results.json").read_bytes()
    assert bench_report.main([str(src)]) == 0
    assert (src / "results.json").read_bytes() == before
    assert {p.name for p in src.glob("*.png")} == {"speedup.png", "latency.png", "compile_time.png"}
    assert "library = 1x" in (src / "report.md").read_text()


def test_output_dir_default_and_explicit(tmp_path, monkeypatch, capsys):
    """Without --output-dir the report goes to ./treecomp-bench; --output-dir (or --out) picks."""
    monkeypatch.chdir(tmp_path)
    args = ["--quick", "--cases", "tiny", "--rows", "200", "--strategies", "library", "--no-plots"]
    assert bench_runner.main(args) == 0
    assert (tmp_path / "treecomp-bench" / "report.md").is_file()
    assert (tmp_path / "treecomp-bench" / "results.json").is_file()
    assert bench_runner.main(args + ["--output-dir", str(tmp_path / "x" / "y")]) == 0
    assert {p.name for p in (tmp_path / "x" / "y").iterdir()} == {"report.md", "results.json"}
    assert bench_runner.main(args + ["--out", "rel"]) == 0       # the old spelling, relative to cwd
    assert (tmp_path / "rel" / "report.md").is_file()


def test_missing_extras_name_the_extra(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(bench_cases, "module_available", lambda m: False)
    assert bench_runner.main(["--quick", "--cases", "tiny", "--output-dir", str(tmp_path)]) == 2
    assert "pip install 'treecomp[bench]'" in capsys.readouterr().err
    monkeypatch.undo()
    monkeypatch.setattr(bench_cases, "CACHE_DIR", tmp_path / "models")
    monkeypatch.setattr(bench_plots, "have_matplotlib", lambda: False)
    assert bench_runner.main(["--quick", "--cases", "tiny", "--rows", "200", "--strategies", "library",
                           "--output-dir", str(tmp_path / "o")]) == 0
    assert "matplotlib is not installed: no plots (pip install 'treecomp[bench]')" in capsys.readouterr().err
    assert not list((tmp_path / "o").glob("*.png"))



def test_missing_catboost_names_its_own_extra(tmp_path, monkeypatch, capsys):
    """The bench extra holds scikit-learn, XGBoost and LightGBM, not catboost: its cases say
    pip install 'treecomp[catboost]'."""
    monkeypatch.setattr(bench_cases, "module_available", lambda m: m != "catboost")
    assert bench_runner.main(["--quick", "--cases", "cb-binary", "--output-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "pip install 'treecomp[catboost]'" in err and "treecomp[bench]" not in err
    assert bench_runner.install_hint(["catboost", "xgboost"]) == \
        "pip install 'treecomp[bench]' 'treecomp[catboost]'"


def test_bench_entry_points_are_the_package_runner():
    """`treecomp bench`, `python -m treecomp.benchmark` and, in a checkout, `python -m bench`
    run one main, treecomp.benchmark.runner.main; bench/ holds no copy or alias of the package's
    modules, only scripts of its own."""
    import importlib.util

    import bench.__main__
    import treecomp.benchmark.__main__
    assert bench.__main__.main is bench_runner.main
    assert treecomp.benchmark.__main__.main is bench_runner.main
    for old in ("bench.cases", "bench.run", "bench.report", "treecomp.benchmark.run"):
        assert importlib.util.find_spec(old) is None, old
    for module in ("bench", "treecomp.benchmark"):
        proc = subprocess.run([sys.executable, "-m", module, "--list"], cwd=REPO, capture_output=True,
                              text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert "xgb-binary" in proc.stdout and "arrays-naive" in proc.stdout, proc.stdout


@needs_cc
def test_bench_runs_from_an_installed_package(tmp_path):
    """`treecomp bench` with the source checkout off sys.path: the package alone (here a folder
    holding only a link to it, ahead of the editable install's finder) and a foreign cwd; the
    default output dir is ./treecomp-bench there, compile subprocesses included."""
    import treecomp
    site = tmp_path / "site"
    site.mkdir()
    (site / "treecomp").symlink_to(Path(treecomp.__file__).resolve().parent, target_is_directory=True)
    cwd = tmp_path / "elsewhere"
    cwd.mkdir()
    env = dict(os.environ)
    keep = [p for p in env.get("PYTHONPATH", "").split(os.pathsep)
            if p and Path(p).resolve() != REPO]
    env["PYTHONPATH"] = os.pathsep.join([str(site)] + keep)
    env["TREECOMP_BENCH_CACHE"] = str(tmp_path / "models")
    probe = ("import importlib.util as u, sys, treecomp.cli, treecomp.benchmark.runner, "
             "treecomp.benchmark.engines, treecomp.benchmark.measure, treecomp.benchmark.plots, "
             "treecomp.benchmark.report, treecomp.benchmark.cases\n"
             "assert u.find_spec('bench') is None, 'the checkout is on sys.path'\n"
             "heavy = {'matplotlib', 'pandas', 'xgboost', 'lightgbm', 'sklearn'} & set(sys.modules)\n"
             "assert not heavy, heavy\n"
             "from treecomp.cli import main\n"
             "sys.argv = ['treecomp', 'bench', '--quick', '--cases', 'tiny', '--rows', '300',\n"
             "            '--strategies', 'interp,c,library']\n"
             "main()\n")
    proc = subprocess.run([sys.executable, "-c", probe], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = cwd / "treecomp-bench"
    assert {p.name for p in out.iterdir()} >= {"report.md", "results.json", "speedup.png"}
    rows = {r["name"]: r for r in json.loads((out / "results.json").read_text())["cases"][0]["strategies"]}
    assert rows["c"]["status"] == "ok", rows["c"].get("note")    # the compile child imported too
    assert rows["c"]["compile_s"] > 0 and rows["c"]["bit_exact"] is True


def test_bad_arguments_are_errors(tmp_path, capsys):
    assert bench_runner.main(["--cases", "no-such-case", "--out", str(tmp_path)]) == 2
    assert bench_runner.main(["--strategies", "warp-drive", "--out", str(tmp_path)]) == 2
    assert bench_runner.main([str(tmp_path / "missing.json"), "--out", str(tmp_path)]) == 2
    assert bench_runner.main(["--list"]) == 0
    assert "xgb-binary" in capsys.readouterr().out


def test_compile_limit_stops_a_build_in_its_own_process(tmp_path, capsys):
    """call_bounded runs another engine's in-process build (lleaves') in a forked process: its
    result comes back, its error becomes a Skip naming it, and past the limit it is stopped."""
    import math
    import time
    if bench_measure.fork_context() is None:
        pytest.skip("no fork server on this platform: builds run unbounded")
    assert bench_measure.call_bounded(math.sqrt, (4.0,), 60, "a root") == 2.0
    with pytest.raises(bench_measure.Skip, match=r"^a root failed: ValueError: math domain error"):
        bench_measure.call_bounded(math.sqrt, (-1.0,), 60, "a root")
    t0 = time.perf_counter()
    with pytest.raises(bench_measure.Skip, match=r"^a sleep did not finish in 1 s: stopped$"):
        bench_measure.call_bounded(time.sleep, (60,), 1, "a sleep")
    assert time.perf_counter() - t0 < 30
    assert bench_runner.main(["--compile-limit", "0", "--out", str(tmp_path)]) == 2
    assert "--compile-limit must be > 0" in capsys.readouterr().err


def test_rows_around_thresholds_cover_both_sides():
    case = bench_cases.build_case("tiny", quick=True)
    import treecomp
    forest = treecomp.parse(case.model)
    X = bench_cases.rows_around_thresholds(forest, 2000)
    assert X.shape == (2000, forest.n_features) and X.dtype == np.float32
    root = forest.trees[0]
    f, t = root.feature[0], root.threshold[0]
    left = X[:, f] <= t
    assert 0.05 < left.mean() < 0.95


def test_compare():
    a = np.array([1.0, np.nan, -0.0], np.float32)
    assert bench_measure.compare(a, a.copy()) == {"bit_exact": True, "max_abs_diff": 0.0}
    b = a.copy()
    b[0] = np.nextafter(np.float32(1), np.float32(2))
    r = bench_measure.compare(a, b)
    assert r["bit_exact"] is False and r["max_abs_diff"] == pytest.approx(2.0 ** -23)
    r = bench_measure.compare(np.array([1.0, np.nan, 0.0], np.float32), a)   # +0.0 vs -0.0
    assert r["bit_exact"] is False and r["max_abs_diff"] == 0.0
    r = bench_measure.compare(a.astype(np.float64), a)
    assert r["bit_exact"] is False and "dtype" in r["note"]
    r = bench_measure.compare(np.array([1.0, 2.0, 3.0]), np.array([1.0, np.nan, 3.0]))
    assert r["max_abs_diff"] == np.inf
    r = bench_measure.compare(np.array([0, 1, 1]), np.array([0, 1, 2]))
    assert r == {"bit_exact": False, "mismatches": 1, "max_abs_diff": None}
    assert bench_measure.compare(np.ones((3, 1)), np.ones(3))["bit_exact"] is True   # (n,1) vs (n,)
    assert bench_measure.compare(np.ones(4), np.ones(3))["bit_exact"] is False


def test_need_tells_missing_from_broken(tmp_path, monkeypatch):
    """A missing engine is 'not installed'; one that is installed but breaks on import says why
    (daal4py 2024.7 against scikit-learn 1.9 is such a case) instead of a bare traceback."""
    (tmp_path / "tc_broken_engine.py").write_text("raise RuntimeError('built for another sklearn')\n")
    (tmp_path / "tc_half_engine.py").write_text("import tc_no_such_dependency\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(bench_measure.Skip, match=r"^tc_absent_engine is not installed$"):
        bench_engines.need("tc_absent_engine", "tc_absent_engine")
    with pytest.raises(bench_measure.Skip, match=r"fails to import: RuntimeError: built for another sklearn"):
        bench_engines.need("tc_broken_engine", "broken")
    with pytest.raises(bench_measure.Skip, match=r"fails to import: ModuleNotFoundError: .*tc_no_such_dependency"):
        bench_engines.need("tc_half_engine", "half")


def test_lleaves_on_a_new_llvmlite_names_the_pin(monkeypatch, tmp_path):
    """lleaves 1.3 uses llvmlite's PassManagerBuilder, gone in llvmlite 0.45: the row must say so."""
    import sys
    import types

    class Model:
        def __init__(self, model_file):
            self.model_file = model_file

        def compile(self, cache=None, **kw):
            raise AttributeError("module 'llvmlite.binding' has no attribute 'PassManagerBuilder'")

    monkeypatch.setitem(sys.modules, "lleaves", types.SimpleNamespace(Model=Model))
    # the build runs here, not in a forked process (which would import the real lleaves)
    monkeypatch.setattr(bench_measure, "fork_context", lambda: None)
    case = bench_cases.BenchCase("m", "m", None, np.zeros((4, 2), np.float32),
                                 library=types.SimpleNamespace(model_file=str(tmp_path / "m.txt"),
                                                               model=None))
    ctx = bench_engines.CaseContext(case, None, tmp_path / "m.tcir", tmp_path,
                                    bench_measure.Settings.for_mode(True), 1, {})
    with pytest.raises(bench_measure.Skip, match=r"lleaves needs llvmlite<0\.45 .*PassManagerBuilder.*compare-env"):
        bench_engines.Lleaves().prepare(ctx)


@needs_cc
def test_shap_case_beside_the_libraries(tmp_path):
    """`--strategies shap`: treecomp's SHAP contributions beside XGBoost's pred_contribs and
    LightGBM's pred_contrib (and oneDAL's where daal4py imports), in results.json and the report."""
    pytest.importorskip("xgboost")
    pytest.importorskip("lightgbm")
    out = tmp_path / "out"
    assert bench_runner.main(["--quick", "--cases", "xgb-binary,lgbm-binary,tiny", "--rows", "100",
                           "--no-plots", "--out", str(out), "--strategies", "shap"]) == 0
    res = json.loads((out / "results.json").read_text())
    xgb, lgbm, tiny = res["cases"]
    assert "shap" not in tiny and tiny["strategies"] == []   # scikit-learn: no library TreeSHAP
    report = (out / "report.md").read_text()
    for case, lib, bound in ((xgb, "xgboost", 1e-6), (lgbm, "lightgbm", 1e-12)):
        sh = case["shap"]
        assert sh["n_rows"] == 64 and sh["prepare_s"] >= 0
        assert sh["isa"] in NATIVE_ISAS
        rows = {e["name"]: e for e in sh["engines"]}
        assert rows["treecomp"]["status"] == "ok" and rows["treecomp"]["slower_than_treecomp"] == 1.0
        ref = rows["library"]
        assert ref["status"] == "ok" and ref["label"].startswith(lib) and ref["reps"] >= 3
        assert ref["ms_per_row"] > 0 and ref["slower_than_treecomp"] > 0
        assert 0 <= ref["max_diff_of_row_l1"] <= bound
        assert "daal4py" in rows     # measured, or skipped with the reason
        assert rows["daal4py"]["status"] == "ok" or rows["daal4py"]["note"]
        assert f"| {ref['label']} | {bench_report.fmt_num(ref['ms_per_row'])} | " in report
    assert report.count("SHAP contributions (path-dependent TreeSHAP") == 2


def test_external_engines_side_by_side(tmp_path):
    """lleaves and daal4py measured with treecomp in one process (bench/compare-env.sh builds an
    environment where both import; elsewhere this test is skipped).

    Checked with lleaves 1.3.0 / llvmlite 0.44 and scikit-learn-intelex 2026.2.0. lleaves sums
    in float64 like LightGBM, but per block of `fblocksize` (34) trees, each block's partial sum
    then added to the row's total: bit-exact only for models of at most 34 trees, like the
    20-tree quick case here (500 trees: raw margins ~4e-14 apart). daal4py computes in the rows'
    dtype (float32 here) where LightGBM uses float64: probabilities ~1e-7 apart (float64 rows
    still differ by ~1e-8, so not only the input dtype); on XGBoost about half the rows differ
    by 1 ulp of the float32 probability.
    """
    pytest.importorskip("lleaves")
    pytest.importorskip("daal4py")
    pytest.importorskip("lightgbm")
    pytest.importorskip("xgboost")
    out = tmp_path / "out"
    assert bench_runner.main(["--quick", "--cases", "lgbm-binary,xgb-binary", "--rows", "600",
                           "--no-plots", "--out", str(out),
                           "--strategies", "library,lleaves,daal4py,shap"]) == 0
    res = json.loads((out / "results.json").read_text())
    assert res["machine"]["lleaves"] and res["machine"]["daal4py"]
    lgbm, xgb = ({r["name"]: r for r in c["strategies"]} for c in res["cases"])
    assert res["cases"][0]["n_trees"] == 20     # one lleaves block: its sum is LightGBM's
    ll = lgbm["lleaves"]
    assert ll["status"] == "ok", ll.get("note")
    assert set(ll["exact"]) == {"raw", "proba"} and ll["bit_exact"] is True
    assert ll["compile_s"] > 0 and ll["artifact_bytes"] > 0 and set(ll["latency_us"]) == {"1", "64"}
    assert xgb["lleaves"]["status"] == "skipped" and "LightGBM" in xgb["lleaves"]["note"]
    for rows in (lgbm, xgb):
        d = rows["daal4py"]
        assert d["status"] == "ok", d.get("note")
        assert set(d["exact"]) == {"proba"} and 0 <= d["max_abs_diff"] < 1e-5
        assert d["latency_us"]["1"] > 0 and d["ns_per_row_1t"] > 0
    for case in res["cases"]:  # oneDAL's SHAP beside treecomp's
        d = {e["name"]: e for e in case["shap"]["engines"]}["daal4py"]
        assert d["status"] == "ok", d.get("note")
        assert d["ms_per_row"] > 0 and d["max_diff_of_row_l1"] < 1e-5


@needs_cc
def test_interleaved_timings(tmp_path, capsys):
    """bench.interleaved: every strategy timed in each round; skips are rows, not failures."""
    from bench import interleaved  # a checkout-only script, on the package's engines
    out = tmp_path / "t.json"
    assert interleaved.main(["--quick", "--cases", "tiny", "--strategies", "c,library,lleaves",
                             "--rows", "300", "--rounds", "3", "--single-calls", "5",
                             "--out", str(out)]) == 0
    (case,) = json.loads(out.read_text())["cases"]
    assert case["n_rows"] == 300 and case["rounds"] == 3
    rows = case["strategies"]
    for name in ("c", "library"):
        r = rows[name]
        assert 0 < r["ns_per_row_1t_min"] <= r["ns_per_row_1t_median"], name
        assert r["latency_b1_us_median"] > 0
    assert rows["c"]["compile_s"] > 0
    assert "skipped" in rows["lleaves"]   # not installed, or not a LightGBM model
    assert "| c |" in capsys.readouterr().out


@needs_cc
def test_compile_processes_forked_and_fresh(tmp_path):
    """A cold compile runs in a process of its own: forked from the fork server (numpy and
    treecomp imported once) or, without one, a fresh interpreter; both give the same figures,
    and a failing build is a Skip naming the error."""
    ir = tmp_path / "seed.tcir"
    bench_engines.seed_forest().save(ir)
    env = dict(os.environ, TREECOMP_CACHE_DIR=str(tmp_path / "cache"))
    spec = {"ir": str(ir), "backend": "c", "options": {}}
    ctx = bench_measure.fork_context()
    runs = [bench_measure.compile_fresh(spec, env, str(tmp_path), 120)]
    if ctx is not None:
        env["TREECOMP_CACHE_DIR"] = str(tmp_path / "cache2")  # cold again
        runs.append(bench_measure.compile_forked(ctx, spec, env, str(tmp_path), 120))
    for figs in runs:
        assert figs["compile_s"] > 0 and figs["artifact_bytes"] > 0 and figs["compile_rss_mib"] >= 0
    with pytest.raises(bench_measure.Skip, match="unknown backend|KeyError|nope"):
        bench_measure.compile_in_subprocess(ir, "nope", {}, tmp_path / "cache3", 120)


def test_data_files_are_read_as_the_cli_reads_them(tmp_path):
    """`--data` goes through treecomp.datafile: pandas' header of an unnamed frame (0,1,2,...)
    is a header, not a row; its index column is left out; an ambiguous first line is refused."""
    pd = pytest.importorskip("pandas")
    X = np.random.default_rng(0).normal(size=(7, 3))
    pd.DataFrame(X).to_csv(tmp_path / "a.csv", index=False)
    np.testing.assert_array_equal(bench_cases.load_data(str(tmp_path / "a.csv"), 3), X)
    pd.DataFrame(X).to_csv(tmp_path / "b.csv")
    np.testing.assert_array_equal(bench_cases.load_data(str(tmp_path / "b.csv"), 3), X)
    (tmp_path / "c.csv").write_text("3,5,8\n" + "\n".join(",".join(map(repr, r)) for r in X.tolist()))
    with pytest.raises(ValueError, match="--header / --no-header"):
        bench_cases.load_data(str(tmp_path / "c.csv"), 3)
    np.testing.assert_array_equal(bench_cases.load_data(str(tmp_path / "c.csv"), 3, header=True), X)
    assert bench_runner.parse_args(["m.json", "--data", "x.csv", "--no-header"]).header is False


_BLOCK_LIBRARY = """
import importlib.abc, sys
class _Absent(importlib.abc.MetaPathFinder):  # as if the library were not installed
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {blocked!r}:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
sys.meta_path.insert(0, _Absent())
for m in [m for m in sys.modules if m.split(".")[0] in {blocked!r}]:
    del sys.modules[m]
"""


def _png_title(path: Path) -> str:
    from PIL import Image
    with Image.open(path) as im:
        return im.info.get("Title", "")


@needs_cc
def test_a_model_file_without_the_library_says_what_was_compared(tmp_path):
    """`treecomp bench model.json` where the library is absent (no xgboost): the reference is
    the treecomp interpreter and the baseline the Python walker, and the report, the summary
    and the plot say so; nothing claims a comparison with the library."""
    xgb = pytest.importorskip("xgboost")
    pytest.importorskip("PIL")
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 5))
    b = xgb.train({"objective": "binary:logistic", "max_depth": 3}, xgb.DMatrix(X, (X[:, 0] > 0)), 5)
    b.save_model(tmp_path / "model.json")
    out = tmp_path / "out"
    code = _BLOCK_LIBRARY.format(blocked=("xgboost",)) + (
        "from treecomp.cli import main\n"
        f"sys.argv = ['treecomp', 'bench', {str(tmp_path / 'model.json')!r}, '--quick', '--rows',\n"
        f"            '300', '--strategies', 'walker,c', '--output-dir', {str(out)!r}]\n"
        "main()\n")
    env = dict(os.environ, TREECOMP_CACHE_DIR=str(tmp_path / "cache"))
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    res = json.loads((out / "results.json").read_text())
    assert "xgboost" not in res["machine"]            # the library really was absent
    (case,) = res["cases"]
    assert case["library"] is None and case["reference"] == "treecomp interpreter"
    rows = {r["name"]: r for r in case["strategies"]}
    assert rows["c"]["bit_exact"] is True and rows["walker"]["status"] == "ok"
    report = (out / "report.md").read_text()
    for text in (report, proc.stdout):
        assert "all bit-exact vs treecomp interpreter" in text
        assert "speedup) is over the Python walker" in text and "no library was measured" in text
        assert "exact vs library" not in text and "over the library's own predict" not in text
    assert "library = 1x" not in report and "the Python walker = 1x" in report
    assert "compared with the library's" not in report
    title = _png_title(out / "speedup.png")
    assert "speedup over the Python walker" in title and "library" in title, title
    assert "over the library" not in title
    assert "bit-exact vs treecomp interpreter" in proc.stderr  # the progress log too


def test_plot_and_headline_name_each_cases_reference():
    """The words follow the references: the library everywhere, the walker everywhere (a model
    file without its library), or both (then each case says which)."""
    lib_case = {"name": "a", "title": "a", "n_rows": 10, "n_features": 2, "n_nodes": 100,
                "library": "xgboost 9", "library_call": "predict", "reference": "xgboost 9",
                "strategies": [_row("walker", "baseline", 1e6),
                               _row("c", "treecomp", 500.0, exact={"raw": {}}, bit_exact=True),
                               _row("library", "library", 1000.0)]}
    bare_case = {"name": "b", "title": "b", "n_rows": 10, "n_features": 2, "n_nodes": 50,
                 "library": None, "library_call": None, "reference": "treecomp interpreter",
                 "strategies": [_row("walker", "baseline", 1e5),
                                _row("c", "treecomp", 100.0, exact={"raw": {}}, bit_exact=True),
                                _row("library", "library", None)]}
    only_lib, only_bare, both = (_results(c) for c in ([lib_case], [bare_case], [lib_case, bare_case]))
    t_lib, t_bare, t_both = (bench_plots.speedup_title(bench_plots.speedup_data(r))
                             for r in (only_lib, only_bare, both))
    assert "over the library's own predict" in t_lib and "walker" not in t_lib
    assert "over the Python walker" in t_bare and "over the library" not in t_bare
    assert "library's own predict" in t_both and "Python walker" in t_both
    h_lib, h_bare, h_both = (bench_report.headline(r) for r in (only_lib, only_bare, both))
    assert "treecomp exact vs library" in h_lib and "| all bit-exact |" in h_lib
    assert "exact vs library" not in h_bare and "all bit-exact vs treecomp interpreter" in h_bare
    assert "| all bit-exact vs xgboost 9 |" in h_both and "all bit-exact vs treecomp interpreter" in h_both
    assert "over the library's own predict" in h_both and "Python walker" in h_both
    assert "no library was measured" in h_bare and "walker" not in h_lib.split("\n\n")[1]


def test_issue_shapes_are_cases_left_out_of_quick():
    """Benchmark-shaped XGBoost models of 100 trees of depth 8 over 13 to 2,000 features and a
    200-tree depth-12 ExtraTrees model are cases of the full run; `--quick` leaves them out."""
    shapes = {"xgb-d8-13": 13, "xgb-d8-28": 28, "xgb-d8-90-regression": 90, "xgb-d8-968": 968,
              "xgb-d8-2000": 2000}
    for name, nf in shapes.items():
        full = bench_cases.SPECS[name].full
        assert (full["n_trees"], full["depth"], full["n_features"]) == (100, 8, nf)
        assert full["n_test"] * nf * 4 <= 400e6  # the wide ones keep fewer test rows
    et = bench_cases.SPECS["et-deep-multiclass"].full
    assert (et["n_trees"], et["depth"], et["n_classes"]) == (200, 12, 5)
    quick, every = bench_cases.case_names(quick=True), bench_cases.case_names()
    assert not set(shapes) & set(quick) and "et-deep-multiclass" not in quick
    assert set(shapes) < set(every) and "xgb-binary" in quick



def test_doc_tables_quote_the_run():
    """bench/doc_tables.py writes the README's and docs' tables from a results.json: treecomp as
    `auto` builds it, the fastest of the library and the other engines, `*` for engines that
    were not bit-exact, n/a for those that could not run, and the ratio to an earlier run only
    where the case's parameters are the same."""
    from bench import doc_tables

    def strat(name, ns, one=None, exact=True, status="ok"):
        return {"name": name, "status": status, "ns_per_row_1t": ns, "bit_exact": exact,
                "latency_us": {"1": one} if one else {}, "native_us_1row": one and one / 2}

    def case(params, auto_ns):
        return {"name": "xgb-binary", "title": "t", "params": params, "n_trees": 500,
                "auto_backend": "arrays", "strategies": [
                    strat("arrays", auto_ns, 2.0), strat("c", 3000, 8.0), strat("library", 5000, 300.0),
                    strat("daal4py", 2500, 20.0, exact=False), strat("lleaves", None, status="skipped")]}
    res = {"machine": {"date": "new"}, "cases": [case({"n": 1}, 250.0)]}
    readme = doc_tables.readme_table(res)
    assert "| XGBoost binary, depth 6 | 500 | 5,000 | **250 (20.0x)** | oneDAL 2,500 (10.0x) |" in readme
    batch = doc_tables.batch_table(res)
    assert "2,500 (2.0x)*" in batch and "n/a" in batch   # oneDAL not exact; lleaves did not run
    assert "oneDAL 10.0x" in doc_tables.single_row_table(res)  # 20 us against 2 us
    prev = {"machine": {"date": "old"}, "cases": [case({"n": 1}, 500.0)]}
    assert "| 500 | 250 | 2.0x |" in doc_tables.against_previous(res, prev)
    prev["cases"][0]["params"] = {"n": 2}
    assert "parameters differ" in doc_tables.against_previous(res, prev)


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="bounded_children reads /proc")
def test_bounded_children_stops_a_build_that_runs_too_long():
    """An engine's build that outlives the limit (TL2cgen's gcc on a deep forest ran 19 min in a
    full run before it was stopped by hand) has its processes killed, also the grandchildren a
    worker starts, and the strategy is skipped with the limit named; the processes that existed
    before are left alone; a build that finishes in time is untouched."""
    import time

    keep = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        t0 = time.perf_counter()
        with pytest.raises(bench_measure.Skip, match=r"the build did not finish in 1 s: stopped"):
            with bench_measure.bounded_children(1.0, "the build"):
                # a shell that starts a long sleep: the grandchild must die for run() to return
                subprocess.run(["sh", "-c", "sleep 60; exit 0"], check=True)
        assert time.perf_counter() - t0 < 20
        assert keep.poll() is None  # started before the block: not killed
        with bench_measure.bounded_children(30.0, "quick"):
            subprocess.run(["sh", "-c", "exit 0"], check=True)
    finally:
        keep.kill()
        keep.wait()


def test_tree_columns_counts_groups_and_levels(capsys):
    """bench.tree_columns: depths by a pass in node order, distinct features per tree group
    (their sum over the groups) and per top levels, checked against a hand count."""
    from bench import tree_columns
    left = np.array([1, 3, 5, -1, -1, -1, -1])
    right = np.array([2, 4, 6, -1, -1, -1, -1])
    assert tree_columns.node_depths(left, right).tolist() == [0, 1, 1, 2, 2, 2, 2]
    # a node after its parent but not next to it (children listed late)
    assert tree_columns.node_depths(np.array([2, -1, 3, -1, -1]),
                                    np.array([1, -1, 4, -1, -1])).tolist() == [0, 1, 1, 2, 2]
    per_tree = [[(0, 0), (1, 1), (2, 1)], [(0, 0), (3, 1)], [(4, 0), (5, 1), (6, 2)]]
    tree_columns.report("hand", per_tree, [1, 2, 3])
    out = capsys.readouterr().out
    assert "3 trees, 7 features read" in out
    assert "groups of   1 trees: distinct features a group mean     2.7 max     3; summed over the groups      8 (1.14x" in out
    assert "groups of   2 trees: distinct features a group mean     3.5 max     4; summed over the groups      7 (1.00x" in out
    assert "levels 0..0: 2 features (0.29)" in out and "levels 0..1: 6 features (0.86)" in out
    assert "levels 0..2: 7 features (1.00)" in out
    from sklearn.ensemble import GradientBoostingRegressor
    import treecomp
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 6))
    model = GradientBoostingRegressor(n_estimators=4, max_depth=3, random_state=0).fit(X, X[:, 0] + X[:, 3])
    got = tree_columns.tree_features(treecomp.parse(model))
    for est, nodes in zip(model.estimators_[:, 0], got):
        t = est.tree_
        internal = t.children_left >= 0
        assert sorted(f for f, _ in nodes) == sorted(t.feature[internal].tolist())
        assert max(d for _, d in nodes) == 2
