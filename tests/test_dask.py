"""treecomp.dask on a real two-process LocalCluster, and how Predictors travel to workers.

The cluster's workers get CC pointing at a compiler that does not exist, so any attempt to
(re)compile on a worker would fail: they must load the shipped .so as it is. Counters patched
into the workers' treecomp.loader check that each worker unpickles / dlopens a model at most
once however many partitions it scores.
"""

import os
import pickle
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import treecomp
from treecomp import toolchain
from treecomp.errors import UnsupportedModelError

pytestmark = pytest.mark.skipif(not toolchain.have_compiler(), reason="no C compiler")

pd = pytest.importorskip("pandas")
NO_CC = "/nonexistent/treecomp-test-cc"
FEATURES = ["f0", "f1", "f2", "f3", "f4"]


def _frame(n, seed):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, len(FEATURES)))
    X[rng.random(X.shape) < 0.05] = np.nan  # missing values take the default branches
    return pd.DataFrame(X, columns=FEATURES)


@pytest.fixture(scope="module")
def models():
    """(library model, predictor) for an XGBoost regressor (float32 margins) and a scikit-learn
    classifier with string labels (float64 probabilities, object labels), both with names."""
    xgb = pytest.importorskip("xgboost")
    from sklearn.ensemble import HistGradientBoostingClassifier
    Xtr = _frame(400, 0)
    y = np.nan_to_num(Xtr["f0"].to_numpy()) * 2 - np.nan_to_num(Xtr["f3"].to_numpy())
    reg = xgb.XGBRegressor(n_estimators=20, max_depth=4, n_jobs=1).fit(Xtr, y)
    labels = np.array(["low", "mid", "high"])[np.digitize(y, [-1, 1])]
    clf = HistGradientBoostingClassifier(max_iter=10, max_depth=3, random_state=0).fit(Xtr, labels)
    return {"reg": (reg, treecomp.compile(reg, backend="c")),
            "clf": (clf, treecomp.compile(clf, backend="c"))}


# -- pickling: compact, cached per process, no compiler needed ----------------------------------
def test_pickle_is_the_artifact_bytes(models):
    _, p = models["reg"]
    blob = pickle.dumps(p)
    so = p._kernel.to_bytes()
    assert so[:4] == b"\x7fELF"
    assert so in blob                      # the shared library itself ...
    assert len(blob) < len(so) + 512       # ... plus a few names: no object graph
    q1, q2 = pickle.loads(blob), pickle.loads(blob)
    assert q1._kernel is q2._kernel        # same process: the loaded library is reused
    X = _frame(20, 7)
    np.testing.assert_array_equal(q2.predict(X), p.predict(X))


def test_unpickle_in_fresh_process_without_compiler_loads_once(models, tmp_path):
    _, p = models["clf"]
    X = _frame(50, 1)
    (tmp_path / "p.pkl").write_bytes(pickle.dumps(p))
    X.to_pickle(tmp_path / "X.pkl")
    code = textwrap.dedent("""
        import pickle, sys
        import numpy as np, pandas as pd
        from treecomp import loader, native, toolchain
        loads = []
        init = native.SharedLibrary.__init__
        native.SharedLibrary.__init__ = lambda self, path, *a, **kw: (loads.append(path), init(self, path, *a, **kw))[1]
        d = sys.argv[1]
        ps = [pickle.loads(open(d + "/p.pkl", "rb").read()) for _ in range(5)]
        X = pd.read_pickle(d + "/X.pkl")
        np.save(d + "/out.npy", ps[-1].predict_proba(X))
        print(toolchain.have_compiler(), len(loads), len({id(q._kernel) for q in ps}))
    """)
    env = dict(os.environ, CC=NO_CC, PATH=os.path.dirname(sys.executable),
               TREECOMP_CACHE_DIR=str(tmp_path / "fresh-cache"))
    r = subprocess.run([sys.executable, "-c", code, str(tmp_path)], env=env, capture_output=True,
                       text=True, timeout=120, cwd=os.path.dirname(os.path.dirname(__file__)))
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["False", "1", "1"]  # no compiler; loaded once; one kernel
    np.testing.assert_array_equal(np.load(tmp_path / "out.npy"), p.predict_proba(X))


# -- graph construction (no cluster needed) ----------------------------------------------------
def test_predictor_is_one_node_of_the_graph(models):
    dd = pytest.importorskip("dask.dataframe")
    da = pytest.importorskip("dask.array")
    from treecomp import dask as tdask
    cloudpickle = pytest.importorskip("cloudpickle")
    _, p = models["reg"]
    so = p._kernel.to_bytes()
    ddf = dd.from_pandas(_frame(200, 2), npartitions=10)
    for coll in (tdask.predict(p, ddf),
                 tdask.predict(p, da.from_array(_frame(200, 2).to_numpy(), chunks=(20, 2)), "raw")):
        graph = dict(coll.__dask_graph__())
        assert len(graph) > 10
        # pickled task by task (as tasks travel to workers), the artifact's bytes are in one
        # graph node only: the others refer to it by key
        assert sum(cloudpickle.dumps(task).count(so) for task in graph.values()) == 1


def test_meta_and_errors(models):
    dd = pytest.importorskip("dask.dataframe")
    da = pytest.importorskip("dask.array")
    from treecomp import dask as tdask
    _, reg = models["reg"]
    _, clf = models["clf"]
    ddf = dd.from_pandas(_frame(40, 3), npartitions=2)
    s = tdask.predict(reg, ddf)
    assert isinstance(s, dd.Series) and s.dtype == np.float32 and s.name == "prediction"
    pr = tdask.predict(clf, ddf, "predict_proba")
    assert list(pr.columns) == ["probability_high", "probability_low", "probability_mid"]
    assert all(t == np.float64 for t in pr.dtypes)
    assert tdask.predict(clf, ddf, "raw", name="m").columns.tolist() == ["m_0", "m_1", "m_2"]
    with pytest.raises(ValueError, match=r"lacks column\(s\) the model was trained on: \['f4'\]"):
        tdask.predict(reg, ddf.drop(columns=["f4"]))
    with pytest.raises(TypeError, match="must be numeric.*f2"):
        tdask.predict(reg, ddf.assign(f2="x"))
    with pytest.raises(AttributeError, match="needs a classifier"):
        tdask.predict(reg, ddf, "predict_proba")
    with pytest.raises(ValueError, match="method must be one of"):
        tdask.predict(reg, ddf, "transform")
    with pytest.raises(ValueError, match="4 columns, but the model expects 5"):
        tdask.predict(reg, da.zeros((10, 4), chunks=5))
    with pytest.raises(ValueError, match="must be 2-D"):
        tdask.predict(reg, da.zeros(10, chunks=5))
    with pytest.raises(TypeError, match="dask.dataframe.DataFrame or a 2-D"):
        tdask.predict(reg, _frame(5, 0))
    f = treecomp.parse(models["reg"][0]).replace(feature_names=None)
    anon = treecomp.compile(f, backend="c")
    with pytest.raises(ValueError, match="without feature names.*has 6 columns"):
        tdask.predict(anon, ddf.assign(extra=1.0))
    assert tdask.predict(anon, ddf.assign(extra=1.0), columns=FEATURES).dtype == np.float32
    # columns=[...] maps other names onto a named model's features, in its order
    renamed = ddf.rename(columns={c: f"in_{c}" for c in FEATURES})
    got = tdask.predict(reg, renamed, columns=[f"in_{c}" for c in FEATURES]).compute()
    np.testing.assert_array_equal(got.to_numpy(), reg.predict(ddf[FEATURES].compute()))
    with pytest.raises(ValueError, match="another order"):  # a mistake, never relabelled
        tdask.predict(reg, ddf, columns=FEATURES[::-1]).compute()


def test_multitarget_proba_is_rejected():
    pytest.importorskip("dask.dataframe")
    from sklearn.tree import DecisionTreeClassifier
    from treecomp import dask as tdask
    import dask.array as da
    X = _frame(100, 4).fillna(0).to_numpy()
    Y = np.stack([X[:, 0] > 0, X[:, 1] > 0], axis=1).astype(int)
    p = treecomp.compile(DecisionTreeClassifier(max_depth=3).fit(X, Y), backend="c")
    with pytest.raises(UnsupportedModelError, match="multi-target"):
        tdask.predict(p, da.from_array(X, chunks=(50, 5)), "predict_proba")
    # predict stays available: one label column per target
    np.testing.assert_array_equal(tdask.predict(p, da.from_array(X, chunks=(50, 5))).compute(),
                                  p.predict(X))


def test_multilabel_proba_is_one_column_per_target():
    """A multi-label classifier's predict_proba is one (n, targets) array: one column per target
    (XGBoost's multi-label XGBClassifier), computed lazily like the others."""
    pytest.importorskip("dask.dataframe")
    xgb = pytest.importorskip("xgboost")
    from treecomp import dask as tdask
    import dask.dataframe as dd
    df = _frame(200, 5)
    Y = np.stack([df["f0"].fillna(0) > 0, df["f1"].fillna(0) > 0.3, df["f2"].fillna(0) < 0], axis=1)
    m = xgb.XGBClassifier(n_estimators=5, max_depth=3, n_jobs=1).fit(df, Y.astype(int))
    p = treecomp.compile(m, backend="c")
    got = tdask.predict(p, dd.from_pandas(df, npartitions=2), "predict_proba").compute()
    assert list(got.columns) == ["probability_0", "probability_1", "probability_2"]
    np.testing.assert_array_equal(got.to_numpy(), m.predict_proba(df))
    labels = tdask.predict(p, dd.from_pandas(df, npartitions=2)).compute()
    np.testing.assert_array_equal(labels.to_numpy(), m.predict(df))


def test_adaboost_regressor_is_one_column():
    """AdaBoostRegressor's raw outputs are one per tree, its predict one median per row: a
    Series, and the raw method a column per tree."""
    pytest.importorskip("dask.dataframe")
    from sklearn.ensemble import AdaBoostRegressor
    from treecomp import dask as tdask
    import dask.dataframe as dd
    df = _frame(200, 4).fillna(0)
    m = AdaBoostRegressor(n_estimators=6, random_state=0).fit(df, df["f0"] * 2 + df["f1"])
    p = treecomp.compile(m, backend="c")
    got = tdask.predict(p, dd.from_pandas(df, npartitions=2)).compute()
    assert isinstance(got, pd.Series)
    np.testing.assert_array_equal(got.to_numpy(), m.predict(df))
    raw = tdask.predict(p, dd.from_pandas(df, npartitions=2), "raw").compute()
    assert raw.shape == (200, len(m.estimators_))


def test_catboost_integer_categories():
    """A CatBoost model with a one-hot categorical column scores a frame whose categories are
    integers (catboost hashes their decimal strings); string category columns are refused."""
    pytest.importorskip("dask.dataframe")
    cb = pytest.importorskip("catboost")
    from treecomp import dask as tdask
    import dask.dataframe as dd
    rng = np.random.default_rng(6)
    df = pd.DataFrame({"a": rng.normal(size=300), "c": rng.integers(0, 4, 300), "b": rng.normal(size=300)})
    m = cb.CatBoostClassifier(iterations=10, depth=3, one_hot_max_size=10, verbose=0, thread_count=1,
                              allow_writing_files=False, cat_features=["c"]).fit(
        df, (df.a + (df.c == 2) > 0).astype(int))
    p = treecomp.compile(m, backend="c")
    got = tdask.predict(p, dd.from_pandas(df, npartitions=2), "predict_proba").compute()
    np.testing.assert_array_equal(got.to_numpy(), m.predict_proba(df))
    with pytest.raises(TypeError, match="must be numeric"):
        tdask.predict(p, dd.from_pandas(df.assign(c=df.c.astype(str)), npartitions=2))


# -- on a real distributed cluster --------------------------------------------------------------
@pytest.fixture(scope="module")
def client():
    distributed = pytest.importorskip("distributed")
    import dask
    # no work stealing: a task moved to a worker that had already released the predictor
    # fetches (and unpickles) it a second time in one graph, which the per-graph counts below
    # would read as a regression (the likely cause of one failure of this file in a loaded
    # full-suite run, whose message was not kept)
    with dask.config.set({"distributed.scheduler.work-stealing": False}):
        cluster = distributed.LocalCluster(n_workers=2, processes=True, threads_per_worker=1,
                                           dashboard_address=":0", env={"CC": NO_CC})
    c = distributed.Client(cluster)
    assert "stealing" not in c.run_on_scheduler(lambda dask_scheduler: list(dask_scheduler.extensions))
    c.run(_install_counters)
    yield c
    c.close()
    cluster.close()


def _install_counters():
    """On a worker: count unpickled Predictors and dlopened artifacts (runs once per worker).

    The wrappers are module-level functions of this file so that a Predictor pickled on a
    worker (to send it to another) still names them by reference, not as a copied closure."""
    from treecomp import loader, native
    if hasattr(loader, "_test_counts"):
        return
    loader._test_counts = {"restore": 0, "load": 0}
    loader._test_orig = (loader._restore, native.SharedLibrary.__init__)
    loader._restore = _counted_restore
    native.SharedLibrary.__init__ = _counted_init


def _counted_restore(*args):
    from treecomp import loader
    loader._test_counts["restore"] += 1
    return loader._test_orig[0](*args)


def _counted_init(self, path, *args, **kwargs):
    from treecomp import loader
    loader._test_counts["load"] += 1
    loader._test_orig[1](self, path, *args, **kwargs)


def _counts():
    from treecomp import loader, toolchain
    return dict(loader._test_counts, compiler=toolchain.have_compiler(), pid=os.getpid())


def _write_parquet(df, path, n_files):
    path.mkdir()
    for i, part in enumerate(np.array_split(np.arange(len(df)), n_files)):
        df.iloc[part].to_parquet(path / f"part-{i:02d}.parquet")


def test_dataframe_from_parquet_on_cluster(client, models, tmp_path):
    dd = pytest.importorskip("dask.dataframe")
    from treecomp import dask as tdask
    df = _frame(3000, 5)
    # columns in another order plus an extra column: picked by the model's feature names
    df = df[FEATURES[::-1]].assign(id=np.arange(len(df)))
    _write_parquet(df, tmp_path / "in", 12)
    ddf = dd.read_parquet(str(tmp_path / "in"))
    assert ddf.npartitions >= 6

    reg_model, reg = models["reg"]
    clf_model, clf = models["clf"]
    before = client.run(_counts)
    got_reg = tdask.predict(reg, ddf).compute()
    got_proba = tdask.predict(clf, ddf, "predict_proba").compute()
    got_label = tdask.predict(clf, ddf).compute()
    after = client.run(_counts)

    want_reg = reg.predict(df[FEATURES])
    np.testing.assert_array_equal(got_reg.to_numpy(), want_reg)
    assert got_reg.dtype == np.float32
    np.testing.assert_array_equal(want_reg, reg_model.predict(df[FEATURES]))  # and the library's
    np.testing.assert_array_equal(got_proba.to_numpy(), clf.predict_proba(df[FEATURES]))
    np.testing.assert_array_equal(got_proba.to_numpy(), clf_model.predict_proba(df[FEATURES]))
    np.testing.assert_array_equal(got_label.to_numpy().astype(str), clf.predict(df[FEATURES]))
    np.testing.assert_array_equal(got_reg.index.to_numpy(), np.arange(len(df)))

    # writing predictions back next to the ids
    out = ddf[["id"]].assign(prediction=tdask.predict(reg, ddf))
    out.to_parquet(str(tmp_path / "out"))
    back = pd.read_parquet(tmp_path / "out").sort_values("id")
    np.testing.assert_array_equal(back["prediction"].to_numpy(), want_reg)

    for w, a in after.items():
        b = before[w]
        assert a["compiler"] is False                # the workers have no usable compiler
        # 3 graphs of >= 6 partitions over 2 models: a worker unpickles the predictor once per
        # graph (not per partition) and dlopens its library at most once per unpickled
        # predictor (shared while one holds it; unloaded with the last: issue 32, item 9)
        assert a["load"] - b["load"] <= a["restore"] - b["restore"], (w, b, a)
        assert a["restore"] - b["restore"] <= 3, (w, b, a)
    assert sum(a["load"] for a in after.values()) >= 2  # the models did run on the workers


def test_array_on_cluster(client, models):
    da = pytest.importorskip("dask.array")
    from treecomp import dask as tdask
    X = _frame(2000, 6).to_numpy()
    x = da.from_array(X, chunks=(250, 3))  # column chunks get merged
    _, reg = models["reg"]
    _, clf = models["clf"]
    r = tdask.predict(reg, x)
    assert r.ndim == 1 and r.dtype == np.float32
    np.testing.assert_array_equal(r.compute(), reg.predict(X))
    pr = tdask.predict(clf, x, "predict_proba")
    assert pr.shape == (2000, 3) and pr.chunks[0] == x.chunks[0]
    np.testing.assert_array_equal(pr.compute(), clf.predict_proba(X))
    np.testing.assert_array_equal(tdask.predict(clf, x, "raw").compute(), clf.decision_function(X))
    np.testing.assert_array_equal(tdask.predict(clf, x).compute(), clf.predict(X))
    x32 = x.astype(np.float32)
    np.testing.assert_array_equal(tdask.predict(reg, x32).compute(), reg.predict(X.astype(np.float32)))


def test_missing_extra_says_what_to_install(models, monkeypatch):
    from treecomp import dask as tdask
    monkeypatch.setitem(sys.modules, "dask", None)  # `import dask` now raises ImportError
    with pytest.raises(ImportError, match=r"pip install 'treecomp\[dask\]'"):
        tdask.predict(models["reg"][1], None)
