"""treecomp.ray on a real local Ray cluster (ray.init(num_cpus=2)): map_batches on actor pools.

Starting Ray and its first worker processes is the slow part (seconds on 2 busy cores), so there
is one cluster per module and the scoring checks share a single Dataset execution: Parquet in,
five predict calls chained (one actor pool each), Arrow out. The workers get CC pointing at a
compiler that does not exist, so they must load the shipped .so as it is, and a setup hook
installed in every worker process logs, per process, each Predictor unpickled, each artifact
dlopened and each batch scored: an actor must unpickle its predictor once, however many batches
it scores.
"""

import os
import sys

import numpy as np
import pytest

import treecomp
from treecomp import toolchain
from treecomp.errors import UnsupportedModelError

ray = pytest.importorskip("ray")
pytest.importorskip("ray.data")
pa = pytest.importorskip("pyarrow")
pd = pytest.importorskip("pandas")
pytestmark = [pytest.mark.skipif(not toolchain.have_compiler(), reason="no C compiler"),
              # Ray Data's own DataContext warns about its deprecated settings
              pytest.mark.filterwarnings("ignore::DeprecationWarning:ray.data.context")]

NO_CC = "/nonexistent/treecomp-test-cc"
FEATURES = ["f0", "f1", "f2", "f3", "f4"]
# each chained predict holds one actor pool for the whole execution: on a 2-CPU cluster they
# must reserve fractions of a CPU, leaving a whole one for the read tasks
SMALL = {"num_cpus": 0.2, "concurrency": 1}


def _frame(n, seed):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, len(FEATURES)))
    X[rng.random(X.shape) < 0.05] = np.nan
    return pd.DataFrame(X, columns=FEATURES)


# -- worker-side counters (pickled by value into the workers' setup hook) -----------------------
def _install_counters():
    """In every Ray worker process: log (pid, event) lines to $TREECOMP_TEST_LOG for each
    Predictor unpickled ("restore"), artifact dlopened ("load") and batch scored ("batch")."""
    import os
    from treecomp import loader, native, toolchain
    from treecomp import ray as tray
    path = os.environ["TREECOMP_TEST_LOG"]

    def log(event):
        with open(path, "a") as f:
            f.write(f"{os.getpid()} {event}\n")

    restore, init, call = loader._restore, native.SharedLibrary.__init__, tray._Scorer.__call__

    def counted_restore(*args):
        log("restore")
        return restore(*args)

    def counted_init(self, path, *args, **kwargs):
        log("load")
        init(self, path, *args, **kwargs)

    def counted_call(self, batch):
        log("batch")
        return call(self, batch)

    loader._restore = counted_restore
    native.SharedLibrary.__init__ = counted_init
    tray._Scorer.__call__ = counted_call
    log(f"compiler={toolchain.have_compiler()}")


def _events(path):
    """{pid: {event: count}} from the workers' log, the driver's own lines left out."""
    out = {}
    if path.exists():
        for line in path.read_text().splitlines():
            pid, event = line.split()
            if int(pid) != os.getpid():
                d = out.setdefault(int(pid), {})
                d[event] = d.get(event, 0) + 1
    return out


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    log = tmp_path_factory.mktemp("ray-log") / "events.txt"
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    try:
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
                 configure_logging=False,
                 runtime_env={"env_vars": {"CC": NO_CC, "TREECOMP_TEST_LOG": str(log)},
                              "worker_process_setup_hook": _install_counters})
    finally:
        ray.cloudpickle.unregister_pickle_by_value(sys.modules[__name__])
    ctx = ray.data.DataContext.get_current()
    ctx.enable_progress_bars = False
    # rows come back in input order only when asked (Ray's default is off), as with any map_batches
    ctx.execution_options.preserve_order = True
    yield log
    ray.shutdown()


@pytest.fixture(scope="module")
def models():
    xgb = pytest.importorskip("xgboost")
    from sklearn.ensemble import HistGradientBoostingClassifier, RandomForestClassifier
    Xtr = _frame(400, 0)
    y = np.nan_to_num(Xtr["f0"].to_numpy()) * 2 - np.nan_to_num(Xtr["f3"].to_numpy())
    reg = xgb.XGBRegressor(n_estimators=20, max_depth=4, n_jobs=1).fit(Xtr, y)
    labels = np.array(["low", "mid", "high"])[np.digitize(y, [-1, 1])]
    clf = HistGradientBoostingClassifier(max_iter=10, max_depth=3, random_state=0).fit(Xtr, labels)
    # integer labels, no feature names (trained on an array): scored positionally via columns=
    rf = RandomForestClassifier(n_estimators=8, max_depth=4, random_state=0).fit(
        Xtr.fillna(0).to_numpy(), (y > 0).astype(np.int64) + 3)
    return {"reg": (reg, treecomp.compile(reg, backend="c")),
            "clf": (clf, treecomp.compile(clf, backend="c")),
            "rf": (rf, treecomp.compile(rf, backend="c"))}


def test_parquet_in_predictions_out(cluster, models, tmp_path):
    from treecomp import ray as tray
    df = _frame(300, 5)[FEATURES[::-1]].assign(id=np.arange(300))  # other order + extra column
    df["f1"] = df["f1"].astype(np.float32)  # a float32 feature column
    (tmp_path / "in").mkdir()
    for i, part in enumerate(np.array_split(np.arange(len(df)), 3)):
        df.iloc[part].to_parquet(tmp_path / "in" / f"part-{i}.parquet")
    ds = ray.data.read_parquet(str(tmp_path / "in"))

    reg_model, reg = models["reg"]
    clf_model, clf = models["clf"]
    rf_model, rf = models["rf"]
    before = _events(cluster)
    scored = tray.predict(reg, ds, batch_size=40, **SMALL)
    scored = tray.predict(clf, scored, "predict_proba", batch_size=40, **SMALL)
    scored = tray.predict(clf, scored, name="label", batch_size=40, **SMALL)
    scored = tray.predict(clf, scored, "raw", name="margin", n_threads=2, **SMALL)
    scored = tray.predict(rf, scored, columns=FEATURES, name="rf", batch_size=None, **SMALL)
    out = pa.concat_tables(ray.get(scored.to_arrow_refs()))
    events = _events(cluster)

    types = dict(zip(out.schema.names, out.schema.types))
    assert out.schema.names == list(df.columns) + [
        "prediction", "probability_high", "probability_low", "probability_mid", "label",
        "margin_0", "margin_1", "margin_2", "rf"]
    assert types["prediction"] == pa.float32()          # XGBoost's float32, exactly
    assert types["f1"] == pa.float32()
    assert all(types[c] == pa.float64() for c in out.schema.names if c.startswith(("prob", "margin")))
    assert pa.types.is_string(types["label"]) or pa.types.is_large_string(types["label"])
    assert types["rf"] == pa.int64()

    def col(name):
        return out.column(name).to_numpy()

    np.testing.assert_array_equal(col("id"), np.arange(len(df)))  # rows in order, ids kept
    np.testing.assert_array_equal(col("f1"), df["f1"].to_numpy())
    want = reg.predict(df[FEATURES])
    np.testing.assert_array_equal(col("prediction"), want)
    assert col("prediction").dtype == np.float32
    np.testing.assert_array_equal(want, reg_model.predict(df[FEATURES]))  # and the library's
    proba = np.stack([col(f"probability_{c}") for c in ("high", "low", "mid")], axis=1)
    np.testing.assert_array_equal(proba, clf.predict_proba(df[FEATURES]))
    np.testing.assert_array_equal(proba, clf_model.predict_proba(df[FEATURES]))
    np.testing.assert_array_equal(np.array(out.column("label").to_pylist()), clf.predict(df[FEATURES]))
    margin = np.stack([col(f"margin_{i}") for i in range(3)], axis=1)
    np.testing.assert_array_equal(margin, clf.decision_function(df[FEATURES]))
    np.testing.assert_array_equal(margin, clf_model.decision_function(df[FEATURES]))
    np.testing.assert_array_equal(col("rf"), rf.predict(df[FEATURES].to_numpy()))
    np.testing.assert_array_equal(col("rf"), rf_model.predict(df[FEATURES].to_numpy(np.float64)))

    # the predictors ran in the workers, which had no compiler, and each actor unpickled its
    # predictor (and dlopened its artifact) once however many batches it scored
    new = {pid: {k: v - before.get(pid, {}).get(k, 0) for k, v in ev.items()}
           for pid, ev in events.items()}
    actors = {pid: ev for pid, ev in new.items() if ev.get("restore")}
    assert len(actors) >= 5, new                       # one actor per chained predict at least
    for pid, ev in actors.items():
        assert events[pid].get("compiler=True", 0) == 0, events[pid]
        assert ev["restore"] == 1 and ev.get("load", 0) == 1, (pid, ev)
    # the three pools with 40-row batches scored all 300 rows in >= 8 batches, each pool with
    # its one actor
    assert sorted(ev.get("batch", 0) for ev in actors.values())[-3:] >= [8, 8, 8], new


def test_default_tasks_chain_without_reserving_the_cluster(cluster, models):
    """With default settings (plain tasks, one CPU per batch), five chained predict calls on
    the 2-CPU cluster finish (an actor pool per call holding a CPU each would wait for ever),
    bit-exact, and a worker process unpickles each predictor once, not once per batch."""
    from treecomp import ray as tray
    df = _frame(200, 9).assign(id=np.arange(200))
    ds = ray.data.from_pandas(df).repartition(4)
    _, reg = models["reg"]
    _, clf = models["clf"]
    _, rf = models["rf"]
    before = _events(cluster)
    scored = tray.predict(reg, ds, batch_size=20)
    scored = tray.predict(clf, scored, "predict_proba", batch_size=20)
    scored = tray.predict(clf, scored, name="label", batch_size=20)
    scored = tray.predict(clf, scored, "raw", name="margin", batch_size=20)
    scored = tray.predict(rf, scored, columns=FEATURES, name="rf", batch_size=20)
    out = scored.to_pandas()
    np.testing.assert_array_equal(out["prediction"].to_numpy(), reg.predict(df[FEATURES]))
    np.testing.assert_array_equal(out["label"].to_numpy(), clf.predict(df[FEATURES]))
    np.testing.assert_array_equal(out[["margin_0", "margin_1", "margin_2"]].to_numpy(),
                                  clf.decision_function(df[FEATURES]))
    np.testing.assert_array_equal(out["rf"].to_numpy(), rf.predict(df[FEATURES].to_numpy()))
    events = _events(cluster)
    restores = {pid: ev.get("restore", 0) - before.get(pid, {}).get("restore", 0)
                for pid, ev in events.items()}
    # 5 calls x 10 batches of 20 rows; at most one unpickling per predict call and process
    assert sum(restores.values()) >= 1 and max(restores.values()) <= 5, restores


def test_errors_are_raised_eagerly(cluster, models):
    from treecomp import ray as tray
    _, reg = models["reg"]
    _, rf = models["rf"]
    base = pd.DataFrame({"f0": [1.0], "f1": [2.0], "f2": [0.0], "f3": [1.0], "s": ["x"]})
    ds = ray.data.from_pandas(base)
    assert ds.schema(fetch_if_missing=False) is not None  # what makes the checks eager
    with pytest.raises(ValueError, match="method must be one of"):
        tray.predict(reg, ds, "transform")
    with pytest.raises(ValueError, match=r"lacks column\(s\) the model was trained on: \['f4'\]"):
        tray.predict(reg, ds)
    with pytest.raises(TypeError, match="must be numeric.*'f4': 'string'"):
        tray.predict(reg, ray.data.from_pandas(base.rename(columns={"s": "f4"})))
    with pytest.raises(ValueError, match="without feature names.*has 4 columns.*pass columns="):
        tray.predict(rf, ray.data.from_pandas(base.drop(columns="s")))
    with pytest.raises(ValueError, match="columns names 4 columns, but the model expects 5"):
        tray.predict(rf, ds, columns=["f0", "f1", "f2", "f3"])
    with pytest.raises(ValueError, match=r"has no column\(s\) \['g'\]"):
        tray.predict(rf, ds, columns=["f0", "f1", "f2", "f3", "g"])
    with pytest.raises(ValueError, match="already has column"):
        tray.predict(rf, ds, columns=["f0", "f1", "f2", "f3", "f0"], name="s")
    with pytest.raises(AttributeError, match="needs a classifier"):
        tray.predict(reg, ds, "predict_proba")
    with pytest.raises(TypeError, match="scores a ray.data.Dataset"):
        tray.predict(reg, base)
    with pytest.raises(TypeError, match="concurrency must be"):
        tray.predict(rf, ds, columns=["f0", "f1", "f2", "f3", "f0"], concurrency="2")
    with pytest.raises(TypeError, match=r"sets \['fn_constructor_args'\] itself"):
        tray.predict(rf, ds, columns=["f0", "f1", "f2", "f3", "f0"], fn_constructor_args=())


def test_multitarget_proba_is_rejected(cluster):
    from sklearn.tree import DecisionTreeClassifier
    from treecomp import ray as tray
    X = _frame(100, 4).fillna(0).to_numpy()
    Y = np.stack([X[:, 0] > 0, X[:, 1] > 0], axis=1).astype(int)
    p = treecomp.compile(DecisionTreeClassifier(max_depth=3).fit(X, Y), backend="c")
    with pytest.raises(UnsupportedModelError, match="multi-target"):
        tray.predict(p, ray.data.from_pandas(pd.DataFrame(X, columns=FEATURES)), "predict_proba")


def test_unknown_schema_checks_in_the_workers(cluster, models):
    """After select_columns Ray knows the schema only by running the pipeline: predict does not
    run it, and the same check fails on the first batch in the worker instead."""
    from treecomp import ray as tray
    _, rf = models["rf"]
    df = _frame(20, 3).fillna(0.0)
    ds = ray.data.from_pandas(df).select_columns(FEATURES[:4])
    assert ds.schema(fetch_if_missing=False) is None
    lazy = tray.predict(rf, ds, **SMALL)  # no error yet: nothing has run
    # Ray wraps the worker's exception (RayTaskError / UserCodeException) with its traceback
    with pytest.raises(Exception, match="ValueError: the model was trained without feature "
                                        "names.*has 4 columns"):
        lazy.materialize()


def test_missing_extra_says_what_to_install(models, monkeypatch):
    from treecomp import ray as tray
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` now raises ImportError
    with pytest.raises(ImportError, match=r"pip install 'treecomp\[ray\]'"):
        tray.predict(models["reg"][1], None)


def test_docs_example_runs(cluster, tmp_path, monkeypatch):
    """docs/scale-out.md's Ray example as written, on this module's cluster: only its
    ray.init() is answered by the running one (a second ray.init in a process is an error)."""
    pytest.importorskip("sklearn")
    from tests.docs_blocks import block, with_paths_in
    code = block("scale-out.md", "python", 2)
    calls = []
    monkeypatch.setattr(ray, "init", lambda *a, **k: calls.append((a, k)))
    monkeypatch.chdir(tmp_path)
    code = with_paths_in(code, tmp_path, ("rows.parquet", "scored/"))  # the workers' directory is not ours
    exec(compile(code, "docs/scale-out.md (Ray)", "exec"), {"__name__": "__main__"})
    assert calls == [((), {})]
    out = pd.read_parquet(tmp_path / "scored").sort_values("id")
    assert list(out.columns) == ["a", "b", "c", "id", "probability_False", "probability_True", "prediction"]
    assert len(out) == 1000 and (out["id"].to_numpy() == np.arange(1000)).all()
    from sklearn.ensemble import HistGradientBoostingClassifier
    X = out[["a", "b", "c"]].reset_index(drop=True)
    model = HistGradientBoostingClassifier(max_iter=20).fit(X, X["a"] + X["b"] > 0)
    np.testing.assert_array_equal(out["prediction"].to_numpy(), model.predict(X))
    np.testing.assert_array_equal(out[["probability_False", "probability_True"]].to_numpy(),
                                  model.predict_proba(X))
