"""The command line: compile / predict / inspect / header, and one-line errors."""

import os
import pickle
import subprocess
import sys

import numpy as np
import pytest
from click.testing import CliRunner

import treecomp
from treecomp import toolchain
from treecomp.cli import main

needs_cc = pytest.mark.skipif(not toolchain.have_compiler(), reason="no C compiler")


@pytest.fixture(scope="module")
def model_file(tmp_path_factory):
    from sklearn.datasets import make_classification
    from sklearn.ensemble import RandomForestClassifier
    X, y = make_classification(n_samples=300, n_features=6, n_classes=3, n_informative=4, random_state=0)
    m = RandomForestClassifier(n_estimators=5, max_depth=6, random_state=0).fit(X, y)
    d = tmp_path_factory.mktemp("cli")
    path = d / "model.pkl"
    path.write_bytes(pickle.dumps(m))
    return path, m, X


@needs_cc
def test_compile_predict_round_trip(model_file, tmp_path):
    path, m, X = model_file
    r = CliRunner()
    out = tmp_path / "m.so"
    res = r.invoke(main, ["compile", str(path), "-o", str(out), "--backend", "c",
                          "--emit-source", str(tmp_path / "src"), "--header", str(tmp_path / "treecomp.h")])
    assert res.exit_code == 0, res.output
    assert out.is_file() and (tmp_path / "src" / "model.c").is_file() and (tmp_path / "treecomp.h").is_file()
    np.save(tmp_path / "x.npy", X)
    res = r.invoke(main, ["predict", str(out), str(tmp_path / "x.npy"), "-o", str(tmp_path / "y.npy")])
    assert res.exit_code == 0, res.output
    np.testing.assert_array_equal(np.load(tmp_path / "y.npy"), m.predict(X))
    np.savetxt(tmp_path / "x.csv", X, delimiter=",", header="a,b,c,d,e,f", comments="")
    res = r.invoke(main, ["predict", str(out), str(tmp_path / "x.csv"), "-o", str(tmp_path / "p.npy"), "--proba"])
    assert res.exit_code == 0, res.output
    np.testing.assert_array_equal(np.load(tmp_path / "p.npy"), m.predict_proba(X.astype(np.float32)))


def test_inspect(model_file):
    path, m, _ = model_file
    res = CliRunner().invoke(main, ["inspect", str(path)])
    assert res.exit_code == 0, res.output
    assert "trees:      5" in res.output and "RandomForestClassifier" in res.output
    assert "depth histogram" in res.output


@pytest.mark.parametrize("args, needle", [
    (["compile", "missing.pkl", "-o", "x.so"], "not found"),
    (["predict", "missing.so", "x.npy", "-o", "y.npy"], "not found"),
    (["compile", "{bad}", "-o", "x.so"], "cannot unpickle"),
    (["compile", "{txt}", "-o", "x.so"], "model.xyz"),  # names the file it cannot read
])
def test_errors_are_one_line(args, needle, tmp_path):
    (tmp_path / "bad.pkl").write_bytes(b"\x80\x04garbage")
    (tmp_path / "model.xyz").write_text("hello")
    args = [a.format(bad=tmp_path / "bad.pkl", txt=tmp_path / "model.xyz") for a in args]
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 1
    assert needle in res.output and "Traceback" not in res.output
    assert _one_error_line(res)


@needs_cc
def test_bad_data_file(model_file, tmp_path):
    path, _, _ = model_file
    out = tmp_path / "m.so"
    assert CliRunner().invoke(main, ["compile", str(path), "-o", str(out), "--backend", "c"]).exit_code == 0
    np.save(tmp_path / "x.npy", np.zeros((3, 2)))
    res = CliRunner().invoke(main, ["predict", str(out), str(tmp_path / "x.npy"), "-o", str(tmp_path / "y.npy")])
    assert res.exit_code == 1 and "features" in res.output


def test_entry_point_installed():
    res = subprocess.run([sys.executable, "-m", "treecomp.cli", "--version"], capture_output=True, text=True)
    assert res.returncode == 0 and treecomp.__version__ in res.stdout


@needs_cc
def test_auto_backend_follows_the_artifact_suffix(model_file, tmp_path):
    """The model is quantisable (auto -> arrays in Python): `-o m.so` is a real shared library
    running the same byte walks (the arrays .so, backends/arrays_so.py); `-o m.tc` a table
    file; an arrays predictor saved as .so is that shared library too."""
    path, m, X = model_file
    f = treecomp.parse(str(path))
    assert treecomp.backends.choose(f) == "arrays" and treecomp.backends.choose(f, "so") == "arrays"
    r = CliRunner()
    for name, magic in (("m.so", b"\x7fELF"), ("m.tc", b"TCARRAYS")):
        res = r.invoke(main, ["compile", str(path), "-o", str(tmp_path / name)])
        assert res.exit_code == 0, res.output
        assert (tmp_path / name).read_bytes()[:len(magic)] == magic
        loaded = treecomp.load(tmp_path / name)
        assert loaded.backend == "arrays"
        np.testing.assert_array_equal(loaded.predict(X), m.predict(X))
    assert type(treecomp.load(tmp_path / "m.so")._kernel).__name__ == "SharedLibrary"
    treecomp.compile(m, backend="arrays").save(tmp_path / "x.so")
    assert (tmp_path / "x.so").read_bytes()[:4] == b"\x7fELF"
    np.testing.assert_array_equal(treecomp.load(tmp_path / "x.so").predict(X), m.predict(X))


# -- issue 24: a new user's findings --------------------------------------------------------------

def _one_error_line(res) -> bool:
    """A user error: exactly one line on stderr, starting with "Error:", and no traceback."""
    lines = res.stderr.strip().splitlines()
    return (res.exit_code != 0 and len(lines) == 1 and lines[0].startswith("Error: ")
            and "Traceback" not in res.output
            and (res.exception is None or isinstance(res.exception, SystemExit)))


@pytest.fixture(scope="module")
def lgbm_files(tmp_path_factory):
    """LightGBM text models (binary and regression objectives, as Booster.save_model writes
    them), their .tc artifacts, and rows."""
    lgb = pytest.importorskip("lightgbm")
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 4))
    d = tmp_path_factory.mktemp("lgbm")
    out = {"X": X[:20]}
    for name, obj, y in (("bin", "binary", (X[:, 0] > 0).astype(int)), ("reg", "regression", X[:, 1])):
        b = lgb.train({"objective": obj, "num_leaves": 4, "verbose": -1, "min_data_in_leaf": 5},
                      lgb.Dataset(X, y), num_boost_round=3)
        b.save_model(str(d / f"{name}.txt"))
        treecomp.compile(str(d / f"{name}.txt"), backend="arrays").save(d / f"{name}.tc")
        out[name] = d / name
    np.save(d / "rows.npy", out["X"])
    out["rows"] = d / "rows.npy"
    return out


def test_proba_on_a_regressor_is_a_one_line_error(lgbm_files, tmp_path):
    res = CliRunner().invoke(main, ["predict", f"{lgbm_files['reg']}.tc", str(lgbm_files["rows"]),
                                    "-o", str(tmp_path / "p.npy"), "--proba"])
    assert res.exit_code == 1 and _one_error_line(res), res.output
    assert res.stderr.strip() == "Error: --proba needs a classifier; this model is a regressor"
    assert not (tmp_path / "p.npy").exists()


def test_proba_on_a_booster_file_without_labels_says_why(lgbm_files, tmp_path):
    """A LightGBM binary Booster file carries no class labels: --proba is refused (one line,
    saying the plain predictions are the probabilities), and those are what predict writes."""
    tc = f"{lgbm_files['bin']}.tc"
    r = CliRunner()
    res = r.invoke(main, ["predict", tc, str(lgbm_files["rows"]), "-o", str(tmp_path / "p.npy"), "--proba"])
    if res.exit_code == 0:  # the frontend now gives a Booster's binary objective its labels
        assert np.load(tmp_path / "p.npy").shape == (20, 2)
        return
    assert res.exit_code == 1 and _one_error_line(res) and "already are probabilities" in res.stderr
    res = r.invoke(main, ["predict", tc, str(lgbm_files["rows"]), "-o", str(tmp_path / "p.npy")])
    assert res.exit_code == 0, res.output
    import lightgbm as lgb
    want = lgb.Booster(model_file=f"{lgbm_files['bin']}.txt").predict(lgbm_files["X"])
    np.testing.assert_allclose(np.load(tmp_path / "p.npy"), want, rtol=1e-12)


def _kind_line(res) -> str:
    return next(ln for ln in res.output.splitlines() if ln.startswith("kind:"))


def test_inspect_reports_classifier_or_regressor(lgbm_files, model_file):
    r = CliRunner()
    res = r.invoke(main, ["inspect", f"{lgbm_files['bin']}.txt"])
    assert res.exit_code == 0, res.output
    assert "classifier" in _kind_line(res) and "regressor" not in _kind_line(res)
    res = r.invoke(main, ["inspect", f"{lgbm_files['reg']}.txt"])
    assert res.exit_code == 0, res.output
    assert _kind_line(res).split(";")[0] == "kind:       regressor"
    res = r.invoke(main, ["inspect", str(model_file[0])])
    assert _kind_line(res).split(";")[0] == "kind:       classifier"


def test_inspect_and_predict_isolation_forest(tmp_path):
    """An IsolationForest is an outlier detector: predict gives sklearn's -1 / 1."""
    from sklearn.ensemble import IsolationForest
    X = np.random.default_rng(3).normal(size=(300, 4)).astype(np.float32)
    m = IsolationForest(n_estimators=5, max_samples=64, random_state=0).fit(X)
    path = tmp_path / "iforest.pkl"
    path.write_bytes(pickle.dumps(m))
    np.save(tmp_path / "rows.npy", X[:50])
    r = CliRunner()
    res = r.invoke(main, ["inspect", str(path)])
    assert res.exit_code == 0, res.output
    assert _kind_line(res).split(";")[0].startswith("kind:       outlier detector")
    res = r.invoke(main, ["compile", str(path), "-o", str(tmp_path / "iforest.so")])
    assert res.exit_code == 0, res.output
    res = r.invoke(main, ["predict", str(tmp_path / "iforest.so"), str(tmp_path / "rows.npy"),
                          "-o", str(tmp_path / "p.csv")])
    assert res.exit_code == 0, res.output
    got = np.loadtxt(tmp_path / "p.csv", delimiter=",")
    np.testing.assert_array_equal(got, m.predict(X[:50]))


def test_inspect_prints_plain_numbers(model_file):
    res = CliRunner().invoke(main, ["inspect", str(model_file[0])])
    assert res.exit_code == 0, res.output
    assert "classes:    [0, 1, 2]" in res.output
    assert "np." not in res.output and "array(" not in res.output


@pytest.mark.parametrize("name", ["p.npy", "p.csv", "p.txt", "p.NPY"])
def test_prediction_output_honours_the_suffix(lgbm_files, tmp_path, name):
    out = tmp_path / name
    res = CliRunner().invoke(main, ["predict", f"{lgbm_files['reg']}.tc", str(lgbm_files["rows"]),
                                    "-o", str(out)])
    assert res.exit_code == 0, res.output
    assert f"wrote {out}" in res.output
    assert sorted(p.name for p in tmp_path.iterdir()) == [name]  # no p.txt.npy
    want = treecomp.load(f"{lgbm_files['reg']}.tc").predict(lgbm_files["X"])
    got = np.load(out) if name.lower().endswith(".npy") else np.loadtxt(out, delimiter=",")
    np.testing.assert_array_equal(got, want)  # %.17g: the CSV round-trips exactly


@pytest.mark.parametrize("name", ["p.xyz", "p", "p.json"])
def test_prediction_output_refuses_other_suffixes(lgbm_files, tmp_path, name):
    res = CliRunner().invoke(main, ["predict", f"{lgbm_files['reg']}.tc", str(lgbm_files["rows"]),
                                    "-o", str(tmp_path / name)])
    assert res.exit_code == 2 and _one_error_line(res), res.output
    assert all(s in res.stderr for s in (".npy", ".csv", ".txt"))
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("backend, name, needle", [
    ("c", "a.tc", "name the output a.so"),
    ("llvm", "a.tc", "name the output a.so"),
    ("arrays", "a.xyz", "unsupported suffix '.xyz'"),
    ("auto", "a.xyz", "unsupported suffix '.xyz'"),
    ("c", "a.xyz", "unsupported suffix '.xyz'"),
    ("auto", "a", "has no suffix"),
])
def test_compile_output_suffix_must_match_what_is_written(lgbm_files, tmp_path, backend, name, needle):
    """Checked before any work: a usage error (exit 2), one line, nothing written."""
    res = CliRunner().invoke(main, ["compile", f"{lgbm_files['reg']}.txt", "-o", str(tmp_path / name),
                                    "--backend", backend])
    assert res.exit_code == 2 and _one_error_line(res), res.output
    assert needle in res.stderr and ".so" in res.stderr and ".tc" in res.stderr
    assert list(tmp_path.iterdir()) == []


def test_emit_source_needs_the_c_backend(lgbm_files, tmp_path):
    for args in (["-o", str(tmp_path / "m.tc")], ["-o", str(tmp_path / "m.tc"), "--backend", "arrays"]):
        res = CliRunner().invoke(main, ["compile", f"{lgbm_files['reg']}.txt", "--emit-source",
                                        str(tmp_path / "src")] + args)
        assert res.exit_code == 2 and _one_error_line(res) and "--emit-source" in res.stderr
    assert list(tmp_path.iterdir()) == []


def test_compile_tc_with_arrays_backend(lgbm_files, tmp_path):
    res = CliRunner().invoke(main, ["compile", f"{lgbm_files['reg']}.txt", "-o", str(tmp_path / "m.tc"),
                                    "--backend", "arrays"])
    assert res.exit_code == 0, res.output
    assert (tmp_path / "m.tc").read_bytes()[:8] == b"TCARRAYS"
    X = lgbm_files["X"][:20]
    with pytest.raises(treecomp.UnsupportedModelError, match="ir=True"):
        treecomp.load(tmp_path / "m.tc").apply(X)
    # --ir embeds the model's IR: the loaded artifact gives leaf indices
    res = CliRunner().invoke(main, ["compile", f"{lgbm_files['reg']}.txt", "-o", str(tmp_path / "i.tc"),
                                    "--backend", "arrays", "--ir"])
    assert res.exit_code == 0, res.output
    want = treecomp.compile(treecomp.parse(f"{lgbm_files['reg']}.txt")).apply(X)
    np.testing.assert_array_equal(treecomp.load(tmp_path / "i.tc").apply(X), want)


def test_csv_with_empty_fields_reads_nan(lgbm_files, tmp_path):
    """pandas writes NaN as an empty field; a header row is skipped; nan reads as NaN too."""
    pd = pytest.importorskip("pandas")
    X = lgbm_files["X"].copy()
    X[0, 1] = X[3, 0] = X[5, 3] = np.nan
    pd.DataFrame(X, columns=list("abcd")).to_csv(tmp_path / "x.csv", index=False)
    assert ",," in (tmp_path / "x.csv").read_text()
    res = CliRunner().invoke(main, ["predict", f"{lgbm_files['reg']}.tc", str(tmp_path / "x.csv"),
                                    "-o", str(tmp_path / "p.npy")])
    assert res.exit_code == 0, res.output
    want = treecomp.load(f"{lgbm_files['reg']}.tc").predict(X)
    np.testing.assert_array_equal(np.load(tmp_path / "p.npy"), want)


def test_read_data_csv_forms(tmp_path):
    from treecomp.datafile import read_rows
    (tmp_path / "a.csv").write_text("1.0,,3.0\n4,5,nan\n\n")
    np.testing.assert_array_equal(read_rows(str(tmp_path / "a.csv"), 3),
                                  [[1.0, np.nan, 3.0], [4.0, 5.0, np.nan]])
    (tmp_path / "h.txt").write_text("x,y,z\n1,2,3\n")  # a header; .txt is comma-separated too
    np.testing.assert_array_equal(read_rows(str(tmp_path / "h.txt"), 3), [[1.0, 2.0, 3.0]])
    (tmp_path / "bad.csv").write_text("1,2,3\n4,oops,6\n")
    with pytest.raises(ValueError, match=r"line 2, column 2: 'oops' is not a number"):
        read_rows(str(tmp_path / "bad.csv"), 3, header=False)
    # 1,2,3 could be a frame's column labels: stated, or refused
    with pytest.raises(ValueError, match=r"cannot tell whether the first line is a header"):
        read_rows(str(tmp_path / "bad.csv"), 3)
    (tmp_path / "bad.csv").write_text("1,2,3.5\n4,oops,6\n")
    with pytest.raises(ValueError, match=r"line 2, column 2: 'oops' is not a number"):
        read_rows(str(tmp_path / "bad.csv"), 3)
    for empty in ("", "a,b\n"):
        (tmp_path / "empty.csv").write_text(empty)
        with pytest.raises(ValueError, match="no data rows"):
            read_rows(str(tmp_path / "empty.csv"), 2)
    (tmp_path / "ragged.csv").write_text("1,2,3\n4,5\n")
    with pytest.raises(ValueError, match="line 2 has 2 comma-separated fields; the model takes 3"):
        read_rows(str(tmp_path / "ragged.csv"), 3, header=False)


def test_help_says_how_csv_headers_are_handled():
    res = CliRunner().invoke(main, ["predict", "--help"])
    assert res.exit_code == 0
    assert "header" in res.output and "empty" in res.output


def test_proba_and_raw_are_mutually_exclusive(lgbm_files, tmp_path):
    res = CliRunner().invoke(main, ["predict", f"{lgbm_files['bin']}.tc", str(lgbm_files["rows"]),
                                    "-o", str(tmp_path / "p.npy"), "--proba", "--raw"])
    assert res.exit_code == 2 and _one_error_line(res), res.output
    assert "mutually exclusive" in res.stderr and not (tmp_path / "p.npy").exists()


@pytest.mark.parametrize("threads, code", [("-3", 2), ("0", 2), ("two", 2), ("1", 0)])
def test_threads_must_be_a_positive_int(lgbm_files, tmp_path, threads, code):
    res = CliRunner().invoke(main, ["predict", f"{lgbm_files['reg']}.tc", str(lgbm_files["rows"]),
                                    "-o", str(tmp_path / "p.npy"), "--threads", threads])
    assert res.exit_code == code, res.output
    if code:
        assert _one_error_line(res) and "--threads" in res.stderr


def test_missing_output_directory_names_the_users_path(lgbm_files, tmp_path):
    r = CliRunner()
    missing = tmp_path / "nope"
    for args, out in (
            (["predict", f"{lgbm_files['reg']}.tc", str(lgbm_files["rows"]), "-o"], missing / "p.npy"),
            (["compile", f"{lgbm_files['reg']}.txt", "-o"], missing / "m.tc"),
            (["compile", f"{lgbm_files['reg']}.txt", "-o", str(tmp_path / "m.tc"), "--header"],
             missing / "treecomp.h"),
            (["header", "-o"], missing / "treecomp.h")):
        res = r.invoke(main, args + [str(out)])
        assert res.exit_code == 1 and _one_error_line(res), res.output
        assert res.stderr.strip() == f"Error: cannot write {out}: directory {missing} does not exist"
    assert not missing.exists()


def test_data_file_errors_are_one_line(lgbm_files, tmp_path):
    r = CliRunner()
    tc = f"{lgbm_files['reg']}.tc"
    (tmp_path / "x.parquet").write_text("")
    for data, needle in ((tmp_path / "none.npy", "data file not found"),
                         (tmp_path / "x.parquet", "unsupported data file")):
        res = r.invoke(main, ["predict", tc, str(data), "-o", str(tmp_path / "p.npy")])
        assert res.exit_code == 1 and _one_error_line(res) and needle in res.stderr, res.output


def _inspect_argv(model_path) -> list:
    return [sys.executable, "-m", "treecomp.cli", "inspect", str(model_path)]


def test_inspect_into_head_is_quiet(lgbm_files):
    """`treecomp inspect m | head -1`: the first line, nothing on stderr, and status 0 or 141
    (141 = 128 + SIGPIPE when head exits before inspect has written everything)."""
    cmd = " ".join(f"'{a}'" for a in _inspect_argv(f"{lgbm_files['bin']}.txt"))
    res = subprocess.run(["bash", "-c", f'{cmd} | head -1; echo "status=${{PIPESTATUS[0]}}"'],
                         capture_output=True, text=True, timeout=60)
    lines = res.stdout.splitlines()
    assert lines[0].startswith("model:") and lines[1] in ("status=0", "status=141"), res.stdout
    assert res.stderr == ""


def test_inspect_into_a_closed_pipe_exits_141_quietly(lgbm_files):
    """The reader is gone before inspect writes (deterministic, unlike head's race): no
    "Broken pipe", no traceback, no "Exception ignored" at shutdown; status 141."""
    r, w = os.pipe()
    os.close(r)
    try:
        res = subprocess.run(_inspect_argv(f"{lgbm_files['bin']}.txt"), stdout=w,
                             stderr=subprocess.PIPE, text=True, timeout=60)
    finally:
        os.close(w)
    assert res.returncode == 141 and res.stderr == "", res.stderr


def test_help_lists_every_model_file_kind():
    from treecomp import frontends
    suffixes = [s for name in ("PICKLE_SUFFIXES", "XGBOOST_SUFFIXES", "LIGHTGBM_SUFFIXES", "IR_SUFFIXES")
                for s in getattr(frontends, name, ())]
    assert ".txt" in suffixes and ".json" in suffixes
    for cmd in ("compile", "inspect"):
        res = CliRunner().invoke(main, [cmd, "--help"])
        assert res.exit_code == 0
        for s in suffixes:
            assert s in res.output, (cmd, s)
        assert "LightGBM" in res.output and "XGBoost" in res.output and "scikit-learn" in res.output


def test_bench_bad_flag_is_one_line():
    res = CliRunner().invoke(main, ["bench", "--bad-flag"])
    assert res.exit_code == 2 and _one_error_line(res), res.output
    assert "--bad-flag" in res.stderr and "usage:" not in res.output


def test_every_command_turns_errors_into_one_line():
    """Each command's callback goes through _friendly (TreecompError / ValueError / TypeError /
    OSError / KeyError -> one line, exit 1)."""
    for name, cmd in main.commands.items():
        fn, friendly = cmd.callback, False
        while fn is not None and not friendly:
            friendly, fn = getattr(fn, "friendly", False), getattr(fn, "__wrapped__", None)
        assert friendly, name


def test_usage_errors_are_one_line():
    r = CliRunner()
    for args in (["predict"], ["compile", "m.pkl"], ["nosuch"], ["inspect", "--bad"]):
        res = r.invoke(main, args)
        assert res.exit_code == 2 and _one_error_line(res), (args, res.output)
        assert "--help" in res.stderr


class _Terminal:
    """A stderr that says it is a terminal, recording what was written."""

    def __init__(self, tty: bool = True):
        self.text, self.tty = "", tty

    def write(self, s):
        self.text += s

    def flush(self):
        pass

    def isatty(self):
        return self.tty


def test_progress_is_a_bar_on_a_terminal_and_lines_elsewhere():
    from treecomp.cli import ProgressPrinter
    events = ["building the arrays kernel (once per machine, ~30 s)...",
              "compiled tc_arrays_0.c (1/3)", "a note while it builds", "compiled tc_arrays_1.c (2/3)",
              "compiled tc_arrays_2.c (3/3)", "built the arrays kernel in 1.0 s"]
    term = _Terminal()
    p = ProgressPrinter(term)
    for e in events:
        p(e)
    lines = term.text.split("\n")
    # steps redraw one line in place (\r, no newline until 3/3); other messages print above it
    assert lines[0].endswith("  ... building the arrays kernel (once per machine, ~30 s)...")
    assert lines[1].endswith("  ... a note while it builds")
    bar = lines[1 + 1]
    assert "[" + "#" * 8 + "." * 16 + "] compiled tc_arrays_0.c (1/3)" in bar  # redrawn under the note
    assert "#" * 16 + "." * 8 + "] compiled tc_arrays_1.c (2/3)\r" in bar
    assert bar.endswith("[" + "#" * 24 + "] compiled tc_arrays_2.c (3/3)")
    assert lines[3].endswith("  ... built the arrays kernel in 1.0 s") and lines[4] == ""
    # not a terminal: every message a plain line, no control characters
    pipe = _Terminal(tty=False)
    p = ProgressPrinter(pipe)
    for e in events:
        p(e)
    assert pipe.text == "".join(f"  ... {e}\n" for e in events)
    # a build that fails half way leaves no half line behind
    term = _Terminal()
    p = ProgressPrinter(term)
    p("compiled model_0.c (1/4)")
    assert not term.text.endswith("\n")
    p.close()
    assert term.text.endswith("(1/4)\n")
    # counts in paths or version numbers are not steps
    term = _Terminal()
    ProgressPrinter(term)("read /tmp/1/2 and gcc 12.1/3")
    assert term.text == "\r\x1b[K  ... read /tmp/1/2 and gcc 12.1/3\n"


@needs_cc
def test_compile_reports_each_step(model_file, tmp_path, monkeypatch):
    """A compile reports its steps through the progress callback, k/n counted to the end."""
    monkeypatch.setenv("TREECOMP_CACHE_DIR", str(tmp_path / "cache"))  # a real build, not a hit
    path, _, _ = model_file
    res = CliRunner().invoke(main, ["compile", str(path), "-o", str(tmp_path / "m.so"), "--backend", "c"])
    assert res.exit_code == 0, res.output
    err = res.stderr.splitlines()
    assert "  ... generating C for 5 trees" in err
    steps = [ln for ln in err if ln.startswith("  ... compiled ")]
    n = int(steps[0].rsplit("/", 1)[1].rstrip(")"))
    assert len(steps) == n and steps[-1].endswith(f"({n}/{n})")
    assert [int(s.rsplit("(", 1)[1].split("/")[0]) for s in steps] == list(range(1, n + 1))


# -- issue 32: data files as pandas and numpy write them; artifacts described ----------------------

@pytest.fixture(scope="module")
def named_files(tmp_path_factory):
    """A scikit-learn forest fitted on a DataFrame (feature names a, b, c, d; NaN accepted) as
    a .tc, and rows with a few NaN."""
    pd = pytest.importorskip("pandas")
    from sklearn.ensemble import RandomForestRegressor
    rng = np.random.default_rng(1)
    X = rng.normal(size=(200, 4))
    X[rng.random(X.shape) < 0.05] = np.nan
    frame = pd.DataFrame(X, columns=list("abcd"))
    m = RandomForestRegressor(n_estimators=4, max_depth=4, random_state=0).fit(frame, np.nan_to_num(X[:, 0]))
    d = tmp_path_factory.mktemp("named")
    treecomp.compile(m, backend="arrays").save(d / "named.tc")
    return {"tc": d / "named.tc", "model": m, "X": X[:12], "names": list("abcd")}


def _writers(names):
    """(label, write(path, X)) for every way pandas and numpy write a table of rows: column
    names `names` where a writer names columns."""
    pd = pytest.importorskip("pandas")
    return [
        ("pandas unnamed, index=False", lambda p, X: pd.DataFrame(X).to_csv(p, index=False)),
        ("pandas unnamed, index=True", lambda p, X: pd.DataFrame(X).to_csv(p)),
        ("pandas named, index=False", lambda p, X: pd.DataFrame(X, columns=names).to_csv(p, index=False)),
        ("pandas named, index=True", lambda p, X: pd.DataFrame(X, columns=names).to_csv(p)),
        ("pandas named index column", lambda p, X: pd.DataFrame(
            X, columns=names, index=pd.Index([f"r{i}" for i in range(len(X))], name="id")).to_csv(p)),
        ("pandas no header", lambda p, X: pd.DataFrame(X).to_csv(p, index=False, header=False)),
        ("numpy savetxt", lambda p, X: np.savetxt(p, X, delimiter=",")),
        ("numpy savetxt # header", lambda p, X: np.savetxt(p, X, delimiter=",", header=",".join(names))),
        ("numpy savetxt header", lambda p, X: np.savetxt(p, X, delimiter=",", header=",".join(names),
                                                         comments="")),
    ]


def _predict_csv(tc, path, out, *extra):
    return CliRunner().invoke(main, ["predict", str(tc), str(path), "-o", str(out), *extra])


@pytest.mark.parametrize("which", ["unnamed", "named"])
def test_csv_files_as_pandas_and_numpy_write_them(lgbm_files, named_files, tmp_path, which):
    """Every writer's file gives one prediction per row, the library's: pandas' header of an
    unnamed frame (0,1,2,3) is a header, its index column is left out, numbers only are data."""
    if which == "unnamed":  # a LightGBM model: no feature names, columns by position
        tc, X, names = f"{lgbm_files['reg']}.tc", lgbm_files["X"][:12].copy(), ["p", "q", "r", "s"]
        X[1, 2] = X[4, 0] = np.nan
        import lightgbm as lgb
        want = lgb.Booster(model_file=f"{lgbm_files['reg']}.txt").predict(X)
    else:
        tc, X, names = named_files["tc"], named_files["X"], named_files["names"]
        pd = pytest.importorskip("pandas")
        want = named_files["model"].predict(pd.DataFrame(X, columns=names))
    for k, (label, write) in enumerate(_writers(names)):
        path, out = tmp_path / f"x{k}.csv", tmp_path / f"p{k}.npy"
        write(path, X)
        res = _predict_csv(tc, path, out)
        if label == "pandas named index column" and which == "unnamed":
            # "id,p,q,r,s": which column is the extra one? Only the model's names would say
            assert res.exit_code == 1 and _one_error_line(res), res.output
            assert "has 5 comma-separated fields" in res.stderr and "index" in res.stderr
            continue
        assert res.exit_code == 0, (label, res.output)
        got = np.load(out)
        assert got.shape == want.shape, (label, path.read_text()[:200])
        np.testing.assert_array_equal(got, want, err_msg=label)


def test_an_all_missing_row_is_a_row(lgbm_files, tmp_path):
    """pandas writes a row of NaN as ",,,": it is a row (a prediction), not a blank line."""
    pd = pytest.importorskip("pandas")
    X = lgbm_files["X"][:5].copy()
    X[2] = np.nan
    pd.DataFrame(X).to_csv(tmp_path / "x.csv", index=False)
    assert ",,," in (tmp_path / "x.csv").read_text()
    res = _predict_csv(f"{lgbm_files['reg']}.tc", tmp_path / "x.csv", tmp_path / "p.npy")
    assert res.exit_code == 0, res.output
    np.testing.assert_array_equal(np.load(tmp_path / "p.npy"),
                                  treecomp.load(f"{lgbm_files['reg']}.tc").predict(X))


def test_a_header_of_numbers_is_a_header_only_when_certain(lgbm_files, tmp_path):
    """0..n-1 is pandas' header (said on stderr); other ascending whole numbers could be labels
    or data: refused, naming --header / --no-header, which decide."""
    tc = f"{lgbm_files['reg']}.tc"
    pred = treecomp.load(tc)
    X = lgbm_files["X"][:5]
    body = "\n".join(",".join(repr(float(v)) for v in row) for row in X) + "\n"
    (tmp_path / "range.csv").write_text("0,1,2,3\n" + body)
    res = _predict_csv(tc, tmp_path / "range.csv", tmp_path / "p.npy")
    assert res.exit_code == 0, res.output
    assert "column labels" in res.stderr and "--no-header" in res.stderr
    np.testing.assert_array_equal(np.load(tmp_path / "p.npy"), pred.predict(X))
    (tmp_path / "labels.csv").write_text("2,5,7,9\n" + body)
    res = _predict_csv(tc, tmp_path / "labels.csv", tmp_path / "q.npy")
    assert res.exit_code == 1 and _one_error_line(res), res.output
    assert "--header / --no-header" in res.stderr and not (tmp_path / "q.npy").exists()
    res = _predict_csv(tc, tmp_path / "labels.csv", tmp_path / "q.npy", "--header")
    assert res.exit_code == 0, res.output
    np.testing.assert_array_equal(np.load(tmp_path / "q.npy"), pred.predict(X))
    res = _predict_csv(tc, tmp_path / "labels.csv", tmp_path / "r.npy", "--no-header")
    assert res.exit_code == 0, res.output
    np.testing.assert_array_equal(np.load(tmp_path / "r.npy"),
                                  pred.predict(np.vstack([[2.0, 5, 7, 9], X])))
    # a header alone: no rows, and --no-header reads the line as the one row it is
    (tmp_path / "one.csv").write_text("0,1,2,3\n")
    res = _predict_csv(tc, tmp_path / "one.csv", tmp_path / "s.npy")
    assert res.exit_code == 1 and "no data rows" in res.stderr and "--no-header" in res.stderr
    res = _predict_csv(tc, tmp_path / "one.csv", tmp_path / "s.npy", "--no-header")
    assert res.exit_code == 0, res.output
    np.testing.assert_array_equal(np.load(tmp_path / "s.npy"), pred.predict([[0.0, 1, 2, 3]]))
    # numbers beside text in the first line: a bad data row or odd names; say which
    (tmp_path / "mixed.csv").write_text("1.5,oops,3,4\n" + body)
    res = _predict_csv(tc, tmp_path / "mixed.csv", tmp_path / "t.npy")
    assert res.exit_code == 1 and "--header / --no-header" in res.stderr
    res = _predict_csv(tc, tmp_path / "mixed.csv", tmp_path / "t.npy", "--no-header")
    assert res.exit_code == 1 and "line 1, column 2: 'oops' is not a number" in res.stderr


@pytest.mark.parametrize("sep, name", [(";", "semicolon"), ("\t", "tab"), ("|", "vertical bar"),
                                       (" ", "space")])
def test_another_delimiter_is_an_error_naming_it(lgbm_files, tmp_path, sep, name):
    """A file separated by something else has the wrong number of columns: an error naming the
    delimiter and --delimiter, never a header guess ("a;b" is not a name) or a misparse."""
    pd = pytest.importorskip("pandas")
    tc = f"{lgbm_files['reg']}.tc"
    X = lgbm_files["X"][:6]
    files = {"one line": lambda p: p.write_text(sep.join(repr(float(v)) for v in X[0]) + "\n"),
             "pandas": lambda p: pd.DataFrame(X).to_csv(p, sep=sep, index=False),
             "numpy": lambda p: np.savetxt(p, X, delimiter=sep)}
    for label, write in files.items():
        write(tmp_path / "x.csv")
        res = _predict_csv(tc, tmp_path / "x.csv", tmp_path / "p.npy")
        assert res.exit_code == 1 and _one_error_line(res), (label, res.output)
        assert f"looks {name}-separated" in res.stderr and f"--delimiter {sep!r}" in res.stderr, label
        assert not (tmp_path / "p.npy").exists()
        res = _predict_csv(tc, tmp_path / "x.csv", tmp_path / "p.npy", "--delimiter", sep)
        assert res.exit_code == 0, (label, res.output)
        want = treecomp.load(tc).predict(X[:1] if label == "one line" else X)
        np.testing.assert_array_equal(np.load(tmp_path / "p.npy"), want, err_msg=label)
        (tmp_path / "p.npy").unlink()


def test_csv_column_counts_and_names_are_checked(lgbm_files, named_files, tmp_path):
    """A file with another number of columns, or a header naming other columns than a named
    model's (or its names in another order), is refused with what is wrong, as a DataFrame is."""
    pd = pytest.importorskip("pandas")
    X = named_files["X"]
    cases = [
        ("index without header", lambda p: pd.DataFrame(X).to_csv(p, header=False), "index"),
        ("too few", lambda p: pd.DataFrame(X[:, :3]).to_csv(p, index=False), "takes 4 features"),
        ("reordered", lambda p: pd.DataFrame(X[:, ::-1], columns=list("dcba")).to_csv(p, index=False),
         "not the model's feature names"),
        ("renamed", lambda p: pd.DataFrame(X, columns=list("wxyz")).to_csv(p, index=False),
         "not the model's feature names"),
    ]
    for label, write, needle in cases:
        write(tmp_path / "x.csv")
        res = _predict_csv(named_files["tc"], tmp_path / "x.csv", tmp_path / "p.npy")
        assert res.exit_code == 1 and _one_error_line(res), (label, res.output)
        assert needle in res.stderr, (label, res.stderr)
        assert not (tmp_path / "p.npy").exists()
    # a model without names reads a named header's columns by position
    pd.DataFrame(lgbm_files["X"], columns=list("wxyz")).to_csv(tmp_path / "x.csv", index=False)
    res = _predict_csv(f"{lgbm_files['reg']}.tc", tmp_path / "x.csv", tmp_path / "p.npy")
    assert res.exit_code == 0, res.output


def test_delimiter_spellings(lgbm_files, tmp_path):
    """A tab as "tab" or backslash-t (what a shell passes for '\\t'); a bad one is a usage error."""
    tc = f"{lgbm_files['reg']}.tc"
    X = lgbm_files["X"][:4]
    np.savetxt(tmp_path / "x.txt", X, delimiter="\t")
    want = treecomp.load(tc).predict(X)
    for spelling in ("tab", "\\t", "\t"):
        res = _predict_csv(tc, tmp_path / "x.txt", tmp_path / "p.npy", "--delimiter", spelling)
        assert res.exit_code == 0, (spelling, res.output)
        np.testing.assert_array_equal(np.load(tmp_path / "p.npy"), want)
    for bad in ("ab", "1", ".", ""):
        res = _predict_csv(tc, tmp_path / "x.txt", tmp_path / "q.npy", "--delimiter", bad)
        assert res.exit_code == 2 and _one_error_line(res) and "--delimiter" in res.stderr, (bad, res.output)


def _field(res, name: str) -> str:
    return next(ln for ln in res.output.splitlines() if ln.startswith(f"{name}:"))[len(name) + 1:].strip()


@pytest.mark.parametrize("backend, suffix", [("arrays", ".tc"), ("arrays", ".so"), ("c", ".so"),
                                             ("llvm", ".so")])
def test_inspect_describes_an_artifact(model_file, tmp_path, backend, suffix):
    """`treecomp inspect` on a compiled artifact describes it from its own metadata (read
    through treecomp.load): backend, treecomp version, trees, features, outputs, classes, and
    the model's digest, the one `inspect` prints for the model file."""
    if suffix == ".so" and not toolchain.have_compiler():
        pytest.skip("no C compiler")
    path, m, _ = model_file
    art = tmp_path / f"m{suffix}"
    res = CliRunner().invoke(main, ["compile", str(path), "-o", str(art), "--backend", backend])
    assert res.exit_code == 0, res.output
    res = CliRunner().invoke(main, ["inspect", str(art)])
    assert res.exit_code == 0, res.output
    assert "cannot tell" not in res.output
    assert _field(res, "artifact").startswith(f"m{suffix} (" + ("a table file" if suffix == ".tc"
                                                                else "a shared library"))
    assert _field(res, "backend").split(";")[0] == backend
    if backend == "arrays" and suffix == ".tc":  # the kernel loaded here picks an instruction set
        assert "instruction set" in _field(res, "backend")
    assert _field(res, "written by") == f"treecomp {treecomp.__version__}"
    assert _field(res, "kind").startswith("classifier")
    assert _field(res, "classes") == "[0, 1, 2]"
    assert _field(res, "trees") == "5"
    assert _field(res, "features") == "6"
    assert _field(res, "outputs").startswith("3 raw margin")
    model = CliRunner().invoke(main, ["inspect", str(path)])
    assert _field(res, "digest") == _field(model, "digest")


def test_inspect_names_a_broken_artifact(tmp_path):
    """A file that starts like an artifact but is not one: one line saying so."""
    (tmp_path / "x.so").write_bytes(b"\x7fELF" + b"\x00" * 60)
    (tmp_path / "x.tc").write_bytes(b"TCARRAYS" + b"\x00" * 60)
    for name in ("x.so", "x.tc"):
        res = CliRunner().invoke(main, ["inspect", str(tmp_path / name)])
        assert res.exit_code == 1 and _one_error_line(res), res.output
        assert name in res.stderr and "cannot tell the model format" not in res.stderr
