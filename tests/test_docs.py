"""The code in docs/ runs as written (README.md's: tests/test_readme.py), and the links between
the docs lead somewhere.

Every fenced block of the guides (docs/*.md) and the engineering notes (docs/internals/*.md) is
labelled: ``sh`` (install and test commands, which CI itself runs: not rerun), ``text``
(output shown), and ``bash`` / ``python`` / ``c`` / ``cpp`` / ``rust``, each run by a test:
here, or beside the adapter's own tests where a cluster is already up (RUN_ELSEWHERE), so that
a Spark or Ray example costs a job, not a cluster start. docs/bench/ is the benchmark's
generated report, not written by hand: it is not checked here."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import treecomp
from tests.docs_blocks import DOCS, block, blocks

ROOT = DOCS.parent
#: (file, language, index among that file's blocks of the language) -> the test running it
RUN_HERE = {
    ("build.md", "bash", 0): "test_build_check_says_where_each_native_part_came_from",
    ("c-abi.md", "c", 0): "test_c_abi_example_runs",
    ("c-abi.md", "c", 1): "test_c_abi_check_example_runs",
    ("c-abi.md", "cpp", 0): "test_c_abi_cpp_and_rust_examples_run",
    ("c-abi.md", "rust", 0): "test_c_abi_cpp_and_rust_examples_run",
    ("scale-out.md", "python", 0): "test_dask_example_runs_as_a_script",
    ("serving.md", "python", 0): "test_serving_example_runs_as_a_script",
}
RUN_ELSEWHERE = {
    ("scale-out.md", "python", 1): ("tests/test_spark.py", "test_docs_example_runs"),
    ("scale-out.md", "python", 2): ("tests/test_ray.py", "test_docs_example_runs"),
}
NOT_CODE = ("sh", "text")
#: every hand-written page: the guides and the engineering notes (relative to docs/)
PAGES = sorted([p.name for p in DOCS.glob("*.md")] +
               [f"internals/{p.name}" for p in (DOCS / "internals").glob("*.md")])
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
needs_cc = pytest.mark.skipif(shutil.which("cc") is None and shutil.which("gcc") is None,
                              reason="no C compiler")


def _env() -> dict:
    """The test's interpreter first on PATH (`python`, `treecomp`), this tree first on sys.path."""
    return dict(os.environ, PATH=os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""),
                PYTHONPATH=os.pathsep.join([str(ROOT)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))


def test_every_docs_block_is_labelled_and_run():
    seen = set()
    assert "internals/performance-notes.md" in PAGES  # the notes are checked too
    for name in PAGES:
        count: dict[str, int] = {}
        for lang, _ in blocks(name):
            i = count[lang] = count.get(lang, -1) + 1
            assert lang, f"docs/{name}: a code block without a language (sh, text, bash, python, c, cpp, rust)"
            if lang in NOT_CODE:
                continue
            key = (name, lang, i)
            assert key in RUN_HERE or key in RUN_ELSEWHERE, f"no test runs docs/{name}'s {lang} block {i}"
            seen.add(key)
    assert seen == set(RUN_HERE) | set(RUN_ELSEWHERE)  # none of them names a block that is gone
    for name in RUN_HERE.values():
        assert callable(globals().get(name)), name
    for path, name in RUN_ELSEWHERE.values():
        assert re.search(rf"^def {name}\(", (ROOT / path).read_text(), re.M), (path, name)


def anchors(markdown: str) -> set[str]:
    """The anchors GitHub gives a page's headings: lower case, punctuation but `-` and `_`
    dropped, spaces as `-` (code blocks' `#` lines are no headings)."""
    text = re.sub(r"^```.*?^```", "", markdown, flags=re.S | re.M)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-")
            for h in re.findall(r"^#{1,6} (.*)$", text, re.M)}


def test_links_between_the_docs_lead_somewhere():
    """Every relative link of README.md and the docs names a file (or folder) that exists, and a
    #fragment a heading of that page: moving a page or renaming a section breaks no link."""
    assert anchors("# Single rows\n## `c` against the library, 2 threads\n```sh\n# no\n```\n") == {
        "single-rows", "c-against-the-library-2-threads"}
    pages = [ROOT / "README.md"] + [DOCS / name for name in PAGES]
    checked = 0
    for page in pages:
        text = page.read_text()
        for target in LINK.findall(re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)):
            if re.match(r"[a-z]+:", target):  # https:, mailto:
                continue
            path, _, fragment = target.partition("#")
            dest = (page.parent / path).resolve() if path else page
            where = f"{page.relative_to(ROOT)}: link {target}"
            assert dest.exists(), f"{where}: no such file"
            if fragment:
                assert dest.suffix == ".md" and fragment in anchors(dest.read_text()), \
                    f"{where}: no heading with that anchor"
            checked += 1
    assert checked > 20


def test_build_check_says_where_each_native_part_came_from(tmp_path):
    script = block("build.md", "bash")
    res = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=tmp_path, env=_env(),
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    lines = dict(ln.split(": ", 1) for ln in res.stdout.splitlines())
    assert set(lines) == {"arrays kernel", "arrays kernel archive", "small-batch entry",
                          "JSON number parser"}, res.stdout
    for part, how in lines.items():
        assert re.match(r"prebuilt \(/|built on first use \(/|unavailable: \S", how), (part, how)
        assert "None" not in how, (part, how)
    # the same words the docs show for an install whose parts are all the package's
    shown = block("build.md", "text")
    assert [ln.split(":")[0] for ln in shown.splitlines()] == list(lines)


def test_native_parts_say_why_a_part_is_not_the_packages(monkeypatch):
    """Each way a part can come: the package's, built on first use (with the reason), none."""
    from treecomp import loader, native
    from treecomp.backends.arrays import native as arrays_native
    from treecomp.errors import CompileError
    parts = loader.native_parts()
    assert list(parts) == ["arrays kernel", "arrays kernel archive", "small-batch entry",
                           "JSON number parser"]

    def no_compiler():
        raise CompileError("no C compiler found (test)")
    monkeypatch.setattr(arrays_native, "_LIB", None)
    monkeypatch.setattr(arrays_native, "_load_prebuilt", lambda: None)
    monkeypatch.setattr(arrays_native, "_ARCHIVE", None)
    monkeypatch.setattr(arrays_native, "prebuilt_archive_path", lambda: None)
    monkeypatch.setattr(arrays_native.toolchain, "find_compiler", no_compiler)
    monkeypatch.setattr(loader, "_ENTRY", native.no_entry)
    monkeypatch.setattr(native, "ENTRY_ERROR", "ImportError: test")
    monkeypatch.setattr(loader.numparse, "available", lambda: False)
    monkeypatch.setattr(loader.numparse, "UNAVAILABLE", "no _numparse (test)")
    parts = loader.native_parts()
    assert parts["arrays kernel"] == ("unavailable: no C compiler found (test) (the arrays backend "
                                      "runs its llvmlite or numpy walkers instead)")
    assert parts["arrays kernel archive"].startswith("unavailable: no C compiler found (test)")
    assert parts["small-batch entry"] == ("unavailable: ImportError: test (small batches go "
                                          "through ctypes instead)")
    assert parts["JSON number parser"] == ("unavailable: no _numparse (test) (JSON model files' "
                                           "number arrays are read by numpy instead)")
    monkeypatch.undo()
    # built on first use: the cache's file, and why the package's was passed over
    pre = arrays_native.prebuilt_kernel_path()
    if pre is None:
        pytest.skip("no prebuilt kernel to stand in for a build")
    monkeypatch.setattr(arrays_native, "_LIB", None)
    monkeypatch.setattr(arrays_native, "KERNEL_ORIGIN", "built")
    monkeypatch.setattr(arrays_native, "KERNEL_PATH", Path("/cache/k.so"))
    monkeypatch.setattr(arrays_native, "PREBUILT_ERROR", "x.so was built from other kernel sources")
    monkeypatch.setattr(arrays_native, "native_library", lambda progress=None: None)
    assert loader.native_parts()["arrays kernel"] == (
        "built on first use (/cache/k.so); the package's prebuilt one was not used: x.so was "
        "built from other kernel sources")


@needs_cc
def test_c_abi_example_runs(tmp_path):
    """docs/c-abi.md's program, built and run the way its first line says, against a .so of a
    binary classifier: the first of its two all-zero rows' probabilities."""
    from sklearn.datasets import make_classification
    from sklearn.ensemble import RandomForestClassifier
    X, y = make_classification(n_samples=200, n_features=5, random_state=0)
    m = RandomForestClassifier(n_estimators=5, max_depth=4, random_state=0).fit(X, y)
    treecomp.compile(m).save(tmp_path / "model.so")
    from treecomp.cli import write_header
    write_header(str(tmp_path / "treecomp.h"))
    code = block("c-abi.md", "c")
    (tmp_path / "driver.c").write_text(code)
    build_run = re.fullmatch(r"/\* (.*) \*/", code.splitlines()[0]).group(1)
    res = subprocess.run(["bash", "-euo", "pipefail", "-c", build_run], cwd=tmp_path, env=_env(),
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    # printed with %g: six significant digits
    np.testing.assert_allclose([float(v) for v in res.stdout.split()],
                               m.predict_proba(np.zeros((1, 5)))[0], rtol=1e-5)


@needs_cc
def test_c_abi_check_example_runs(tmp_path):
    """docs/c-abi.md's check before dlopen (treecomp_check_file) and after (treecomp_verify),
    built and run the way its first line says: 0 for a library as treecomp wrote it, 1 and a
    message for one with a byte changed (which it never loads)."""
    from tests.randforest import random_forest
    treecomp.compile(random_forest(3, n_trees=3), backend="c").save(tmp_path / "model.so")
    from treecomp.cli import write_header
    write_header(str(tmp_path / "treecomp.h"))
    code = block("c-abi.md", "c", 1)
    (tmp_path / "check.c").write_text(code)
    build_run = re.fullmatch(r"/\* (.*) \*/", code.splitlines()[0]).group(1)
    res = subprocess.run(["bash", "-euo", "pipefail", "-c", build_run], cwd=tmp_path, env=_env(),
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    data = bytearray((tmp_path / "model.so").read_bytes())
    data[len(data) // 2] ^= 1
    (tmp_path / "model.so").write_bytes(bytes(data))
    res = subprocess.run(["./check", "./model.so"], cwd=tmp_path, capture_output=True, text=True,
                         timeout=60)
    assert res.returncode == 1 and "is not the library treecomp built" in res.stderr


@pytest.mark.parametrize("lang, tool", [("cpp", "c++"), ("rust", "rustc")])
def test_c_abi_cpp_and_rust_examples_run(tmp_path, lang, tool):
    """docs/c-abi.md's C++ and Rust programs, built and run the way their first lines say,
    against a .so of a binary classifier: the first all-zero row's probabilities, printed to
    17 significant digits (C++) or as Rust's shortest round-trip form: the library's bits."""
    if shutil.which(tool) is None:
        pytest.skip(f"no {tool}")
    from sklearn.datasets import make_classification
    from sklearn.ensemble import RandomForestClassifier
    X, y = make_classification(n_samples=200, n_features=5, random_state=0)
    m = RandomForestClassifier(n_estimators=5, max_depth=4, random_state=0).fit(X, y)
    treecomp.compile(m).save(tmp_path / "model.so")
    from treecomp.cli import write_header
    write_header(str(tmp_path / "treecomp.h"))
    code = block("c-abi.md", lang)
    build_run = re.fullmatch(r"/\* (.*) \*/", code.splitlines()[0]).group(1)
    source = re.search(r"(\S+\.(?:cpp|rs))", build_run).group(1)  # the file it builds
    (tmp_path / source).write_text(code)
    res = subprocess.run(["bash", "-euo", "pipefail", "-c", build_run], cwd=tmp_path, env=_env(),
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    np.testing.assert_array_equal([float(v) for v in res.stdout.split()],
                                  m.predict_proba(np.zeros((1, 5)))[0])


def test_serving_example_runs_as_a_script(tmp_path):
    """docs/serving.md's example as a script: a .tc saved and loaded, one row, many threads,
    forked workers using the Predictor made before the fork, a pickled copy; every output
    asserted against scikit-learn's inside the example."""
    pytest.importorskip("sklearn")
    if not hasattr(os, "fork"):
        pytest.skip("no fork on this platform")
    code = block("serving.md", "python")
    for part in ("ThreadPoolExecutor", 'get_context("fork")', "pickle.loads", "treecomp.load"):
        assert part in code, part
    (tmp_path / "serve.py").write_text(code)
    res = subprocess.run([sys.executable, "serve.py"], cwd=tmp_path, env=_env(),
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    assert treecomp.load(tmp_path / "model.tc").head.n_features == 10


def test_dask_example_runs_as_a_script(tmp_path):
    """docs/scale-out.md's Dask example as a script: Client() starts worker processes that import
    it again, which only its __main__ guard makes work. ~20 s on 2 busy cores."""
    pytest.importorskip("distributed")
    pytest.importorskip("pyarrow")
    pytest.importorskip("sklearn")
    pd = pytest.importorskip("pandas")
    code = block("scale-out.md", "python", 0)
    assert "import dask" in code and 'if __name__ == "__main__":' in code
    (tmp_path / "score.py").write_text(code)
    res = subprocess.run([sys.executable, "score.py"], cwd=tmp_path, env=_env(),
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    out = pd.read_parquet(tmp_path / "scored").sort_index()
    assert list(out.columns) == ["a", "b", "c", "prediction", "probability_False", "probability_True"]
    rows = pd.read_parquet(tmp_path / "rows").sort_index()
    assert len(out) == len(rows) == 1000
    # scored as the example's model scores them (the same seeded data and estimator)
    from sklearn.ensemble import HistGradientBoostingClassifier
    X = rows[["a", "b", "c"]]
    model = HistGradientBoostingClassifier(max_iter=20).fit(X, X["a"] + X["b"] > 0)
    np.testing.assert_array_equal(out["prediction"].to_numpy(), model.predict(X))
    np.testing.assert_array_equal(out[["probability_False", "probability_True"]].to_numpy(),
                                  model.predict_proba(X))
