"""The Predictor: input checks, threads, pickling, saving and loading artifacts."""

import pickle
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

import treecomp
from treecomp import interp, toolchain
from treecomp.errors import ArtifactError
from tests.randforest import random_forest, random_rows

pytestmark = pytest.mark.skipif(not toolchain.have_compiler(), reason="no C compiler")


@pytest.fixture(scope="module")
def model():
    f = random_forest(40, n_features=5)
    return f, treecomp.compile(f, backend="c")


def test_inputs_of_any_float_dtype_order_and_kind(model):
    f, p = model
    X = random_rows(f, 64)
    X[~np.isfinite(X)] = 0.5
    want = interp.predict(f, X)
    np.testing.assert_array_equal(p.predict(X.tolist()), want)
    np.testing.assert_array_equal(p.predict(np.asfortranarray(X)), want)
    np.testing.assert_array_equal(p.predict(X[:, ::-1][:, ::-1]), want)
    np.testing.assert_array_equal(p.predict(X.astype(np.float16)), interp.predict(f, X.astype(np.float16)))
    Xi = (X * 10).astype(np.int64)
    np.testing.assert_array_equal(p.predict(Xi), interp.predict(f, Xi))
    pd = pytest.importorskip("pandas")
    np.testing.assert_array_equal(p.predict(pd.DataFrame(X)), want)


@pytest.mark.parametrize("bad, exc, msg", [
    (np.zeros((3, 4)), ValueError, "4 features"),
    (np.zeros(5), ValueError, "2-D"),
    (np.zeros((2, 5, 1)), ValueError, "2-D"),
    (np.array([["a"] * 5]), TypeError, "numeric"),
    ([[1, 2, 3, 4, "x"]], TypeError, "numeric"),
    (np.zeros((2, 5), dtype=np.complex64), TypeError, "numeric"),
])
def test_bad_inputs_raise_clear_errors(model, bad, exc, msg):
    _, p = model
    with pytest.raises(exc, match=msg):
        p.predict(bad)


def test_empty_batch(model):
    _, p = model
    assert p.predict(np.zeros((0, 5))).shape == (0,)


def test_nan_rejected_when_model_rejects_it():
    f = random_forest(41, n_features=3).replace(allow_nan=False)
    p = treecomp.compile(f, backend="c")
    with pytest.raises(ValueError, match="NaN"):
        p.predict(np.array([[0.0, np.nan, 1.0]]))


def test_threads_and_concurrent_callers(model):
    f, p = model
    X = np.random.default_rng(0).normal(size=(20000, 5))
    want = interp.predict_raw(f, X)
    np.testing.assert_array_equal(p.predict_raw(X, n_threads=2), want)
    np.testing.assert_array_equal(p.predict_raw(X, n_threads=7), want)
    results = [None] * 6
    def work(i):
        results[i] = p.predict_raw(X)
    ts = [threading.Thread(target=work, args=(i,)) for i in range(6)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    for r in results:
        np.testing.assert_array_equal(r, want)


def test_pickle_in_a_fresh_process(model, tmp_path):
    f, p = model
    X = random_rows(f, 50)
    (tmp_path / "p.pkl").write_bytes(pickle.dumps(p))
    np.save(tmp_path / "x.npy", X)
    code = ("import pickle, numpy as np; p = pickle.load(open('p.pkl', 'rb')); "
            "np.save('y.npy', p.predict_raw(np.load('x.npy')))")
    subprocess.run([sys.executable, "-c", code], cwd=tmp_path, check=True)
    np.testing.assert_array_equal(np.load(tmp_path / "y.npy"), interp.predict_raw(f, X))


def test_save_load_and_self_description(model, tmp_path):
    f, p = model
    p.save(tmp_path / "m.so")
    q = treecomp.load(tmp_path / "m.so")
    assert q.digest == f.digest() and q.n_features == 5 and q.backend == "c"
    X = random_rows(f, 50)
    np.testing.assert_array_equal(q.predict_raw(X), interp.predict_raw(f, X))


ROOT = Path(__file__).resolve().parents[1]
_LOAD_CUTS = """
import sys, treecomp
from treecomp.errors import ArtifactError
for path in sys.argv[1:]:
    try:
        treecomp.load(path)
    except ArtifactError as exc:
        print("refused", exc)
    else:
        print("loaded", path)
"""


def test_truncated_libraries_are_refused_not_crashing(tmp_path):
    # dlopen maps segments past the end of a truncated file: touching them raised SIGBUS
    # (a c .so cut in half); the cuts load in a subprocess so a crash fails this test only
    f = random_forest(1, n_trees=3)
    treecomp.compile(f, backend="c").save(tmp_path / "m.so")
    data = (tmp_path / "m.so").read_bytes()
    paths = []
    for cut in (64, 200, len(data) // 3, len(data) // 2, len(data) - 4096, len(data) - 1):
        paths.append(tmp_path / f"cut{cut}.so")
        paths[-1].write_bytes(data[:cut])
    res = subprocess.run([sys.executable, "-c", _LOAD_CUTS, *map(str, paths)], capture_output=True,
                         text=True, timeout=120, cwd=str(ROOT))
    assert res.returncode == 0, res.stderr[-2000:]
    lines = res.stdout.splitlines()
    assert len(lines) == len(paths) and all(ln.startswith("refused") for ln in lines), lines


def test_load_rejects_bad_files(tmp_path):
    bad = tmp_path / "bad.so"
    bad.write_bytes(b"\x7fELF" + b"\0" * 100)
    with pytest.raises(ArtifactError):
        treecomp.load(bad)
    txt = tmp_path / "model.so"
    txt.write_text("hello")
    with pytest.raises(ArtifactError):
        treecomp.load(txt)
    libm = tmp_path / "libm.so"
    import ctypes.util, shutil
    src = ctypes.util.find_library("m")
    if src:
        import glob
        cands = glob.glob(f"/lib/*/{src}") + glob.glob(f"/usr/lib/*/{src}")
        if cands:
            shutil.copyfile(cands[0], libm)
            with pytest.raises(ArtifactError, match="not a treecomp artifact"):
                treecomp.load(libm)
    with pytest.raises(FileNotFoundError):
        treecomp.load(tmp_path / "missing.so")


def test_classifier_surface():
    f = random_forest(42, n_outputs=3, transform="softmax").replace(
        decision="argmax_raw", classes=(np.array(["a", "b", "c"]),))
    p = treecomp.compile(f, backend="c")
    X = random_rows(f, 100)
    assert list(p.classes_) == ["a", "b", "c"]
    np.testing.assert_array_equal(p.predict(X), interp.predict(f, X))
    np.testing.assert_array_equal(p.predict_proba(X), interp.predict_proba(f, X))
    np.testing.assert_array_equal(p.decision_function(X), interp.decision_function(f, X))
    r = random_forest(43)
    with pytest.raises(AttributeError):
        treecomp.compile(r, backend="c").predict_proba(X[:, :6])


def test_pandas_category_columns_are_refused_unless_the_model_reads_values(model):
    pd = pytest.importorskip("pandas")
    f, p = model
    df = pd.DataFrame(np.zeros((4, 5)))
    df[2] = pd.Categorical([1, 2, 1, 2])
    with pytest.raises(TypeError, match="category"):
        p.predict(df)
    g = f.replace(pandas_categories="values")
    np.testing.assert_array_equal(interp.predict(g, df), interp.predict(g, df.astype(float)))


def test_small_batch_entry_is_built_here():
    """The compiled small-batch entry (runtime/pyentry.c) builds wherever the tests run: a
    silent fallback to ctypes would cost single rows ~10x."""
    from treecomp import loader, native
    assert loader._entry() is not native.no_entry, native.ENTRY_ERROR


def test_small_batch_entry_refuses_bad_arguments(model):
    from treecomp import loader, native
    _, p = model
    run, cfg, X = loader._entry(), p._plans["raw"][0], np.zeros((1, 5))
    with pytest.raises(TypeError):
        run(X, cfg[:-1], 0, native.OUT_2D, None)
    for flags, mode in [(0x200, native.OUT_2D), (0, 99), (0, native.LAB_ARGMAX),
                        (1 | native.PAIRS, native.OUT_1D)]:
        with pytest.raises(ValueError):
            run(X, cfg, flags, mode, None)
    # anything but an aligned, native-order, C-contiguous float matrix of 1..64 rows: declined
    big_endian = X.astype(">f8")
    for other in (X.tolist(), X.astype(np.int64), np.zeros((0, 5)), np.zeros((65, 5)),
                  np.zeros((2, 5), order="F"), big_endian, np.zeros((1, 4)), np.zeros(5)):
        assert run(other, cfg, 0, native.OUT_2D, None) is None


class _Sub(np.ndarray):
    pass


@pytest.mark.parametrize("entry", ["compiled", "ctypes"])
@pytest.mark.parametrize("backend", ["c", "arrays", "llvm"])
def test_small_batches_from_many_threads(backend, entry, monkeypatch):
    """Batches of <= SMALL_BATCH rows go through the compiled entry (or, where it cannot be
    built, per-thread staging buffers and ctypes): every size, both input dtypes, inputs either
    path declines, and threads hammering one Predictor at once all give the interpreter's bits."""
    from concurrent.futures import ThreadPoolExecutor
    from treecomp import loader, native
    from treecomp.loader import SMALL_BATCH
    monkeypatch.setattr(loader, "_ENTRY", loader._entry() if entry == "compiled" else native.no_entry)
    f = random_forest(41, n_features=5)
    p = treecomp.compile(f, backend=backend)
    X = random_rows(f, 100)
    want = interp.predict_raw(f, X)
    for n in (1, 2, 31, SMALL_BATCH, SMALL_BATCH + 1):
        ro = X[:n].copy()
        ro.setflags(write=False)  # read-only rows are copied to the ctypes staging buffer
        unaligned = np.frombuffer(b"\0" + X[:n].tobytes(), np.float64, offset=1).reshape(n, 5)
        for Xin in (X[:n], X[:n].astype(np.float32), ro, np.asfortranarray(X[:n]),
                    X[:n].astype(">f4"), unaligned, X[:n].view(_Sub)):
            np.testing.assert_array_equal(p.predict_raw(Xin), interp.predict_raw(f, Xin))

    def worker(seed):
        rng = np.random.default_rng(seed)
        for _ in range(300):
            i = int(rng.integers(len(X)))
            got = p.predict_raw(X[i:i + 1])
            if not np.array_equal(got, want[i:i + 1]):
                return i
        return None
    with ThreadPoolExecutor(4) as ex:
        assert list(ex.map(worker, range(8))) == [None] * 8


@pytest.mark.parametrize("backend", ["c", "arrays", "llvm"])
@pytest.mark.parametrize("decision, acc", [("argmax_raw", "float64"), ("argmax_raw", "float32"),
                                           ("raw_ge_0", "float64"), ("raw_gt_0", "float32")])
def test_small_batch_labels_break_ties_as_numpy(backend, decision, acc):
    """Leaves of -1, 0, 1 make equal margins common: labels of single rows take the first maximum
    (np.argmax) and compare 0 >= 0 / 0 > 0 as numpy does."""
    import dataclasses
    k = 3 if decision == "argmax_raw" else 1
    f = random_forest(44, n_outputs=k, n_trees=6, max_depth=2, accumulate_dtype=acc)
    trees = tuple(dataclasses.replace(t, value=np.sign(np.round(t.value))) for t in f.trees)
    classes = np.array([10, 20, 30][:max(k, 2)])
    f = f.replace(trees=trees, base_score=np.zeros(k), decision=decision, classes=(classes,))
    p = treecomp.compile(f, backend=backend)
    X = random_rows(f, 40)
    raw = interp.predict_raw(f, X)
    ties = (raw == raw.max(axis=1, keepdims=True)).sum(axis=1) > 1 if k > 1 else raw[:, 0] == 0
    assert ties.sum() >= 5  # the case under test happens
    want = interp.predict(f, X)
    got = np.concatenate([p.predict(X[i:i + 1]) for i in range(len(X))])
    np.testing.assert_array_equal(got, want)
    assert got.dtype == want.dtype


def test_native_call_timing(model, monkeypatch):
    """loader.native_call_ns times single-row kernel calls in C (the bench's kernel column)."""
    from treecomp import loader, native
    f, p = model
    X = random_rows(f, 32)
    ns = loader.native_call_ns(p, X, reps=100)
    assert isinstance(ns, float) and 0 < ns < 1e7
    with pytest.raises(ValueError):
        loader.native_call_ns(p, random_rows(f, 40), reps=100)  # more than SMALL_BATCH rows
    monkeypatch.setattr(loader, "_ENTRY", native.no_entry)
    assert loader.native_call_ns(p, X) is None


@pytest.mark.parametrize("classes", [np.array([-3, 7]), np.array([0.5, 2.5], np.float32),
                                     np.array(["no", "yes!"]), np.array(["a", 3], dtype=object)])
def test_small_batch_labels_of_every_class_dtype(classes):
    """The entry copies labels itself for plain 1-D class arrays (ints, floats, fixed-width
    strings) and leaves object arrays to numpy's take: same values, dtype, shape as the
    general path, for 1 to 9 rows."""
    f = random_forest(45, n_outputs=1, n_trees=5, max_depth=3)
    f = f.replace(base_score=np.zeros(1), decision="raw_ge_0", classes=(classes,))
    p = treecomp.compile(f, backend="arrays")
    X = random_rows(f, 60)
    want = interp.predict(f, X)
    assert len(set(want.tolist())) == 2  # both labels occur
    for i, n in zip(range(0, 60, 6), [1, 2, 5, 9, 1, 3, 7, 1, 4, 6]):
        got = p.predict(X[i:i + n])
        assert got.dtype == want.dtype and got.shape == (len(X[i:i + n]),)
        np.testing.assert_array_equal(got, want[i:i + n])


# -- memory: a service that reloads models -------------------------------------------------------
def _mapped(path) -> bool:
    return str(path) in Path("/proc/self/maps").read_text()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc/self/maps")
def test_dropped_predictors_give_their_memory_back(tmp_path, monkeypatch):
    """loader._LOADED kept every loaded artifact for the life of the process (100 MB after 2,000
    loads of different models): a kernel now lives as long as a Predictor holds it, and a
    library is unloaded with it."""
    import gc
    import tracemalloc
    from treecomp import loader
    monkeypatch.setattr(loader, "_LOADED", type(loader._LOADED)())
    sos = []
    for seed in range(3):  # libraries: unloaded once their Predictors are gone
        f = random_forest(200 + seed, n_trees=3)
        sos.append(tmp_path / f"m{seed}.so")
        treecomp.compile(f, backend="c").save(sos[-1])
    X = random_rows(random_forest(200, n_trees=3), 20)
    ps = [treecomp.load(s) for s in sos]
    pickled = [pickle.loads(pickle.dumps(p)) for p in ps]  # unpickled: the same kernels
    assert all(q._kernel is p._kernel for p, q in zip(ps, pickled))
    copies = [p._kernel.path for p in ps]
    assert len(loader._LOADED) == 3 and all(_mapped(c) for c in copies)
    assert treecomp.load(sos[0])._kernel is ps[0]._kernel  # shared while in use
    for p in ps:
        p.predict(X)
    del ps, pickled, p
    gc.collect()
    assert len(loader._LOADED) == 0
    assert not any(_mapped(c) for c in copies)
    q = treecomp.load(sos[1])  # and loads again after being unloaded
    f1 = random_forest(201, n_trees=3)
    np.testing.assert_array_equal(q.predict_raw(random_rows(f1, 20)),
                                  interp.predict_raw(f1, random_rows(f1, 20)))
    del q
    # table files (and their unpickled Predictors): the Python-side tables go with them
    tcs = []
    for seed in range(60):
        f = random_forest(300 + seed, n_trees=4, max_depth=5)
        tcs.append(treecomp.compile(f, backend="arrays")._kernel.to_bytes())

    def churn(rounds):
        for data in tcs[:rounds]:
            p = loader.Predictor(loader.kernel_from_bytes("arrays", data))
            p.predict_raw(X)
            pickle.loads(pickle.dumps(p))
    gc.collect()
    tracemalloc.start()
    churn(10)
    gc.collect()
    base = tracemalloc.get_traced_memory()[0]
    churn(60)
    gc.collect()
    grown = tracemalloc.get_traced_memory()[0] - base
    tracemalloc.stop()
    assert len(loader._LOADED) == 0
    # 1.2 MB (24 kB a model) before; 14 kB after (Python's own caches), whatever the count
    assert grown < 200_000, f"{grown} bytes kept after 50 more loads of different models"
