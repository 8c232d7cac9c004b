"""How services run a Predictor (forked workers, threads, read-only caches, full disks) and the
errors a user can cause with bad arguments, bad artifacts and bad input."""

import errno
import multiprocessing
import os
import threading
from pathlib import Path

import numpy as np
import pytest

import treecomp
from treecomp import interp, loader, toolchain
from treecomp.errors import ArtifactError, TreecompError, WriteError
from tests.randforest import random_forest, random_rows

pytestmark = pytest.mark.skipif(not toolchain.have_compiler(), reason="no C compiler")

#: enough rows that Predictor._run splits the batch over 2 pool threads
BIG = 2 * loader.MIN_ROWS_PER_THREAD + 100


@pytest.fixture(scope="module")
def model():
    f = random_forest(60, n_features=5)
    return f, treecomp.compile(f, backend="c", n_threads=2)


# -- fork and threads ---------------------------------------------------------------------------
def _child_predicts(p, X, want, q):
    got = p.predict_raw(X, n_threads=2)
    q.put(bool(np.array_equal(got, want)))


@pytest.mark.parametrize("backend", ["c", "arrays", "llvm"])
def test_forked_child_predicts_big_batches(model, backend):
    """Gunicorn / Celery / multiprocessing fork a worker after the parent used the thread pool:
    the child inherits the pool object without its threads and must not block on it."""
    f, p = model
    if backend != "c":
        p = treecomp.compile(f, backend=backend, n_threads=2)
    X = np.random.default_rng(1).normal(size=(BIG, 5))
    want = interp.predict_raw(f, X)
    np.testing.assert_array_equal(p.predict_raw(X, n_threads=2), want)
    assert loader._POOL is not None  # the parent's pool exists (with threads) at fork time
    ctx = multiprocessing.get_context("fork")
    q = ctx.Queue()
    child = ctx.Process(target=_child_predicts, args=(p, X, want, q))
    child.start()
    child.join(30)
    if child.is_alive():
        child.kill()
        child.join()
        pytest.fail("the forked child hung predicting a big batch")
    assert child.exitcode == 0
    assert q.get(timeout=5) is True
    # and the parent's pool still works after the fork
    np.testing.assert_array_equal(p.predict_raw(X, n_threads=2), want)


def test_threads_share_one_predictor_bit_exact(model):
    f, p = model
    rng = np.random.default_rng(2)
    X = rng.normal(size=(BIG, 5))
    want_raw, want = interp.predict_raw(f, X), interp.predict(f, X)
    errors = []

    def work(seed):
        r = np.random.default_rng(seed)
        for _ in range(3):
            n = int(r.choice([1, 7, 64, 65, 3000, BIG]))
            a = int(r.integers(0, BIG - n + 1))
            if not np.array_equal(p.predict_raw(X[a:a + n], n_threads=2), want_raw[a:a + n]):
                errors.append(("raw", seed, n))
            if not np.array_equal(p.predict(X[a:a + n]), want[a:a + n]):
                errors.append(("predict", seed, n))
    ts = [threading.Thread(target=work, args=(i,)) for i in range(6)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(60)
    assert not any(t.is_alive() for t in ts)
    assert errors == []


def test_single_rows_in_a_thread_with_the_smallest_stack():
    """The arrays kernel keeps a few rows' buffers on the stack (about 13 KB for this model's 140
    byte columns): single rows predict, bit for bit, in a thread with Python's smallest stack
    (32 KiB). In a subprocess: an overflow would kill it, not the test run."""
    import subprocess
    import sys
    import textwrap
    code = textwrap.dedent("""
        import threading, numpy as np, treecomp
        from treecomp import interp
        from tests.randforest import random_forest, random_rows
        f = random_forest(61, n_trees=40, n_features=70, max_depth=6)
        p = treecomp.compile(f, backend="arrays", layout="quant")
        cols = p._kernel._struct.q_ncols
        assert 100 <= cols <= 180, cols  # one 64-row group of them and the padding: < 16 KB
        X = random_rows(f, 30)
        want = interp.predict_raw(f, X)
        ok = []
        def work():
            ok.append(all(np.array_equal(p.predict_raw(X[i:i + 1]), want[i:i + 1])
                          for i in range(len(X))))
        threading.stack_size(32 * 1024)
        t = threading.Thread(target=work)
        t.start()
        t.join()
        print(ok)
        """)
    root = Path(__file__).resolve().parent.parent
    r = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True,
                       timeout=120, env={**os.environ, "PYTHONPATH": str(root)})
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.strip() == "[True]"


# -- n_threads ------------------------------------------------------------------------------------
@pytest.mark.parametrize("bad, exc", [(1.5, TypeError), ("2", TypeError), (True, TypeError),
                                      (np.float64(2.0), TypeError), (0, ValueError),
                                      (-1, ValueError)])
def test_bad_n_threads_is_refused_at_the_api(model, bad, exc, tmp_path):
    f, p = model
    with pytest.raises(exc, match="n_threads"):
        treecomp.compile(f, backend="c", n_threads=bad)
    p.save(tmp_path / "m.so")
    with pytest.raises(exc, match="n_threads"):
        treecomp.load(tmp_path / "m.so", n_threads=bad)
    with pytest.raises(exc, match="n_threads"):
        p.n_threads = bad
    assert p.n_threads == 2
    for X in (np.zeros((1, 5)), np.zeros((BIG, 5))):  # the small-batch entry and the pool
        for method in (p.predict, p.predict_raw, p.decision_function):
            with pytest.raises(exc, match="n_threads"):
                method(X, n_threads=bad)


def test_numpy_integer_n_threads_is_accepted(model):
    f, p = model
    X = np.random.default_rng(3).normal(size=(BIG, 5))
    np.testing.assert_array_equal(p.predict_raw(X, n_threads=np.int64(2)), interp.predict_raw(f, X))
    assert treecomp.compile(f, backend="c", n_threads=np.int32(3)).n_threads == 3


# -- sparse input ---------------------------------------------------------------------------------
def test_sparse_input_is_a_clear_type_error(model):
    sp = pytest.importorskip("scipy.sparse")
    f, p = model
    X = sp.random(10, 5, density=0.5, format="csr", random_state=0)
    for S in (X, X.tocsc(), X.tocoo(), sp.csr_array(X)):
        for call in (p.predict, p.predict_raw, lambda s: interp.predict(f, s)):
            with pytest.raises(TypeError, match=r"sparse input .*toarray\(\)"):
                call(S)


# -- DataFrame columns: as the libraries do, never by guessing -----------------------------------
def _frames(pd, X, names):
    a, b, c = names
    df = pd.DataFrame(X, columns=names)
    return {"same": df, "reordered": df[[b, a, c]], "renamed": df.rename(columns={c: "z"}),
            "extra": df.assign(d=1.0), "extra_first": df.assign(d=1.0)[["d", a, b, c]],
            "missing": df[[a, b]], "int_names": pd.DataFrame(X),
            "int_reordered": pd.DataFrame(X)[[1, 0, 2]]}


def test_dataframe_columns_must_be_the_model_names():
    pd = pytest.importorskip("pandas")
    f = random_forest(61, n_features=3).replace(feature_names=("a", "b", "c"))
    p = treecomp.compile(f, backend="c")
    X = random_rows(f, 50)
    frames = _frames(pd, X, ["a", "b", "c"])
    np.testing.assert_array_equal(p.predict(frames["same"]), interp.predict(f, X))
    np.testing.assert_array_equal(p.predict(X), interp.predict(f, X))  # arrays: by position
    for name, df in frames.items():
        if name != "same":
            for call in (p.predict, lambda d: interp.predict(f, d)):
                with pytest.raises(ValueError, match="do not match the model's feature names"):
                    call(df)
    # a model without feature names reads frames by position, as all three libraries do
    g = f.replace(feature_names=None)
    q = treecomp.compile(g, backend="c")
    for name in ("same", "reordered", "renamed", "int_names"):
        df = frames[name]
        np.testing.assert_array_equal(q.predict(df), interp.predict(g, df.to_numpy()))
    for name in ("extra", "missing"):
        with pytest.raises(ValueError, match="features"):
            q.predict(frames[name])


def _lib_raises(fn, df):
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            fn(df)
            return False
        except (ValueError, TypeError):
            return True


@pytest.mark.parametrize("lib", ["sklearn", "xgboost"])
def test_dataframe_columns_refused_wherever_the_library_refuses(lib):
    """Differential: for every frame the installed library refuses, treecomp refuses too, and
    where both accept they agree bit for bit. (One documented stricter case: scikit-learn reads
    a frame without string names by position with a warning; treecomp and XGBoost refuse.)"""
    pd = pytest.importorskip("pandas")
    rng = np.random.default_rng(5)
    X = rng.normal(size=(80, 3))
    y = X[:, 0] - 2 * X[:, 1] + X[:, 2] ** 2
    train = pd.DataFrame(X, columns=["a", "b", "c"])
    if lib == "sklearn":
        from sklearn.ensemble import RandomForestRegressor
        m = RandomForestRegressor(n_estimators=3, max_depth=4, random_state=0).fit(train, y)
    else:
        xgb = pytest.importorskip("xgboost")
        m = xgb.XGBRegressor(n_estimators=3, max_depth=3, n_jobs=1).fit(train, y)
    p = treecomp.compile(m, backend="c")
    for name, df in _frames(pd, X[:20], ["a", "b", "c"]).items():
        lib_raises, ours_raises = _lib_raises(m.predict, df), _lib_raises(p.predict, df)
        if lib == "sklearn" and name.startswith("int_"):
            assert not lib_raises and ours_raises, name  # the documented stricter case
            continue
        assert ours_raises == lib_raises, name
        if not ours_raises:
            np.testing.assert_array_equal(p.predict(df), m.predict(df))


# -- artifacts whose exports disagree with their meta JSON ----------------------------------------
def _fake_artifact(tmp_path, name, meta, nf=3, no=1, out_bits=64, omit=(), rc=0, extra=""):
    """A .so honouring treecomp.h's symbols with chosen (possibly inconsistent) values; its
    predict writes zeros for nf features / no outputs. Sealed as treecomp seals its artifacts,
    so the checks after the seal's are the ones under test."""
    lit = "".join(f"\\x{b:02x}" for b in meta.encode())
    fns = {"treecomp_n_features": nf, "treecomp_n_outputs": no, "treecomp_out_dtype": out_bits}
    exports = "".join(f"E int32_t {k}(void) {{ return {v}; }}\n" for k, v in fns.items()
                      if k not in omit)
    src = f"""#include <stdint.h>
#include <string.h>
#define E __attribute__((visibility("default")))
E int32_t treecomp_abi_version(void) {{ return 1; }}
E const char *treecomp_meta_json(void) {{ return "{lit}"; }}
{exports}
E int32_t treecomp_predict(const void *X, int32_t xd, int64_t n, void *out, uint32_t flags) {{
  memset(out, 0, (size_t)n * {no} * {out_bits // 8});
  return {rc};
}}
{extra}"""
    path = tmp_path / f"{name}.so"
    toolchain.build_shared_library({f"{name}.c": src}, path, seal=True)
    return path


def test_artifact_exports_are_cross_checked_with_its_meta(tmp_path):
    import json
    from treecomp.ir import head_of
    f = random_forest(62, n_features=3)
    meta = head_of(f).to_json(backend="c")
    ok = treecomp.load(_fake_artifact(tmp_path, "ok", meta))
    np.testing.assert_array_equal(ok.predict_raw(np.ones((100, 3))), np.zeros((100, 1)))
    bad = {"features": dict(nf=64), "outputs": dict(no=8), "out_dtype": dict(out_bits=32),
           "no_n_features": dict(omit=("treecomp_n_features",))}
    for name, kw in bad.items():
        with pytest.raises(ArtifactError, match="inconsistent|not a complete"):
            treecomp.load(_fake_artifact(tmp_path, name, meta, **kw))
    d = json.loads(meta)
    for name, change in {"dtype": {"input_dtype": "int8"}, "zero": {"n_features": 0},
                         "acc": {"accumulate_dtype": "float16"}}.items():
        with pytest.raises(ArtifactError):
            treecomp.load(_fake_artifact(tmp_path, name, json.dumps({**d, **change})))
    with pytest.raises(ArtifactError, match="corrupt"):
        treecomp.load(_fake_artifact(tmp_path, "notjson", "{not json"))


@pytest.mark.parametrize("code, why", [(-1, "invalid arguments.*TREECOMP_EINVAL"),
                                       (-2, "out of memory.*TREECOMP_ENOMEM"),
                                       (-77, "a code treecomp.h does not define")])
@pytest.mark.parametrize("rows", [1, 5000])  # the compiled small-batch entry, then ctypes
def test_a_failing_kernel_raises_a_treecomp_error_naming_the_code(tmp_path, code, why, rows):
    """A kernel's return code surfaced as a bare RuntimeError("... failed with code -1")."""
    from treecomp.errors import KernelError
    from treecomp.ir import head_of
    meta = head_of(random_forest(62, n_features=3)).to_json(backend="c")
    p = treecomp.load(_fake_artifact(tmp_path, f"rc{-code}", meta, rc=code))
    with pytest.raises(KernelError, match=f"code {code}: {why}") as ei:
        p.predict_raw(np.ones((rows, 3)))
    assert isinstance(ei.value, TreecompError) and isinstance(ei.value, RuntimeError)
    assert ei.value.code == code


def test_a_library_whose_symbols_are_not_utf8_is_an_artifact_error(tmp_path):
    """dlopen's message names the symbol it cannot resolve; a name that is not UTF-8 raised
    UnicodeDecodeError from ctypes instead of a TreecompError."""
    from treecomp.ir import head_of
    meta = head_of(random_forest(62, n_features=3)).to_json(backend="c")
    path = _fake_artifact(tmp_path, "dynstr", meta,
                          extra='extern int tc_missing(void) __asm__("tc_missing_\\xff\\xfe");\n'
                                'E int32_t tc_use(void) { return tc_missing(); }\n')
    assert b"tc_missing_\xff\xfe" in path.read_bytes()
    with pytest.raises(ArtifactError, match=r"cannot load .*symbol that is not UTF-8.*tc_missing_\\xff"):
        treecomp.load(path)


def test_patched_meta_of_a_c_backend_artifact_is_refused(model, tmp_path):
    """A real artifact whose embedded meta JSON was edited in place (same length)."""
    f, p = model
    p.save(tmp_path / "m.so")
    import re
    data = (tmp_path / "m.so").read_bytes()
    pattern = rb'"n_features": ?5([,}])'
    assert len(re.findall(pattern, data)) == 1
    (tmp_path / "patched.so").write_bytes(re.sub(pattern, lambda m: m.group(0).replace(b"5", b"9"), data))
    with pytest.raises(ArtifactError, match="damaged"):  # its seal no longer matches
        treecomp.load(tmp_path / "patched.so")
    toolchain.seal(tmp_path / "patched.so")  # sealed again: the exports' cross-check refuses it
    with pytest.raises(ArtifactError, match="treecomp_n_features"):
        treecomp.load(tmp_path / "patched.so")


# -- read-only caches, unwritable outputs, full disks -----------------------------------------------
def _unusable_cache(monkeypatch, tmp_path):
    """A cache directory that cannot be created (root ignores chmod, so a path under a file)."""
    (tmp_path / "file").write_text("")
    monkeypatch.setenv("TREECOMP_CACHE_DIR", str(tmp_path / "file" / "cache"))
    monkeypatch.setattr(loader, "_LOADED", {})  # force the artifact through the cache again


def test_load_and_compile_work_without_a_writable_cache(model, tmp_path, monkeypatch):
    f, p = model
    p.save(tmp_path / "m.so")
    X = random_rows(f, 100)
    _unusable_cache(monkeypatch, tmp_path)
    q = treecomp.load(tmp_path / "m.so")
    np.testing.assert_array_equal(q.predict_raw(X), interp.predict_raw(f, X))
    g = random_forest(63, n_features=4)
    np.testing.assert_array_equal(treecomp.compile(g, backend="c").predict_raw(random_rows(g, 30)),
                                  interp.predict_raw(g, random_rows(g, 30)))


def test_load_works_when_the_cache_dir_is_read_only(model, tmp_path, monkeypatch):
    """The cache exists but every write fails (a read-only mount: EROFS, simulated because
    root ignores file modes)."""
    f, p = model
    p.save(tmp_path / "m.so")
    cache = tmp_path / "ro-cache"
    cache.mkdir()
    monkeypatch.setenv("TREECOMP_CACHE_DIR", str(cache))
    monkeypatch.setattr(loader, "_LOADED", {})
    real = toolchain.tempfile.mkstemp

    def mkstemp(*a, dir=None, **kw):
        if dir is not None and Path(dir) == cache:
            raise OSError(errno.EROFS, "Read-only file system", str(dir))
        return real(*a, dir=dir, **kw)
    monkeypatch.setattr(toolchain.tempfile, "mkstemp", mkstemp)
    q = treecomp.load(tmp_path / "m.so")
    X = random_rows(f, 100)
    np.testing.assert_array_equal(q.predict_raw(X), interp.predict_raw(f, X))
    assert list(cache.iterdir()) == []


@pytest.mark.parametrize("backend, suffix", [("c", ".so"), ("arrays", ".tc")])
def test_save_to_an_unwritable_path_is_a_write_error(backend, suffix, tmp_path):
    f = random_forest(64, n_features=3)
    p = treecomp.compile(f, backend=backend)
    (tmp_path / "file").write_text("")
    target = tmp_path / "file" / f"m{suffix}"
    with pytest.raises(WriteError, match=str(target)) as ei:
        p.save(target)
    assert isinstance(ei.value, TreecompError) and isinstance(ei.value, OSError)
    assert isinstance(ei.value.__cause__, OSError)
    with pytest.raises(WriteError, match="no_such_dir"):
        p.save(tmp_path / "no_such_dir" / f"m{suffix}")


def test_full_disk_on_save_is_a_write_error(model, tmp_path, monkeypatch):
    _, p = model

    def full(self, data):
        raise OSError(errno.ENOSPC, "No space left on device", str(self))
    monkeypatch.setattr(Path, "write_bytes", full)
    with pytest.raises(WriteError, match=r"m\.so.*No space left") as ei:
        p.save(tmp_path / "m.so")
    assert ei.value.__cause__.errno == errno.ENOSPC
    assert [x.name for x in tmp_path.iterdir()] == []  # no temp file left behind


def test_a_damaged_cache_copy_is_not_loaded(model, tmp_path, monkeypatch):
    """load() goes through a content-addressed copy in the cache; a copy found there with other
    bytes (damaged, or replaced by someone else) is rewritten, not run."""
    f, p = model
    p.save(tmp_path / "m.so")
    data = (tmp_path / "m.so").read_bytes()
    cache = tmp_path / "cache"
    cache.mkdir()
    monkeypatch.setenv("TREECOMP_CACHE_DIR", str(cache))
    monkeypatch.setattr(loader, "_LOADED", {})
    copy = cache / f"artifact-{toolchain.check_seal(data)[:40]}.so"  # named by its seal's digest
    copy.write_bytes(b"\x7fELF damaged")
    q = treecomp.load(tmp_path / "m.so")
    X = random_rows(f, 100)
    np.testing.assert_array_equal(q.predict_raw(X), interp.predict_raw(f, X))
    assert copy.read_bytes() == data


def test_cache_and_temp_dir_both_unwritable_is_a_write_error(tmp_path, monkeypatch):
    (tmp_path / "file").write_text("")
    monkeypatch.setenv("TREECOMP_CACHE_DIR", str(tmp_path / "file" / "cache"))
    monkeypatch.setattr(toolchain, "private_dir", lambda: tmp_path / "file" / "private")
    with pytest.raises(WriteError, match=r"private.*cache failed") as ei:
        toolchain.cached("k", ".bin", lambda p: p.write_bytes(b"x"))
    assert isinstance(ei.value.__cause__, OSError)
