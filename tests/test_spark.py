"""treecomp.spark on a real local SparkSession (local[2]): broadcast Predictor via mapInPandas.

Starting a JVM is the slow part (tens of seconds on 2 busy cores), so there is one session
per module and the scoring checks share a single Spark job: Parquet in, three models scored
in one pipelined stage, Parquet out. The executors get CC pointing at a compiler that does not
exist: they must load the broadcast .so as it is.
"""

import os
import shutil
import sys

import numpy as np
import pytest

import treecomp
from treecomp import toolchain
from treecomp.errors import UnsupportedModelError

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")
pd = pytest.importorskip("pandas")
pytestmark = [pytest.mark.skipif(shutil.which("java") is None and not os.environ.get("JAVA_HOME"),
                                 reason="Spark needs Java"),
              pytest.mark.skipif(not toolchain.have_compiler(), reason="no C compiler"),
              # pyspark 4.3 warns about pandas 3 on every conversion
              pytest.mark.filterwarnings("ignore::FutureWarning"),
              pytest.mark.filterwarnings("ignore:The copy keyword is deprecated")]

NO_CC = "/nonexistent/treecomp-test-cc"
FEATURES = ["f0", "f1", "f2", "f3", "f4"]


def _frame(n, seed):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, len(FEATURES)))
    X[rng.random(X.shape) < 0.05] = np.nan
    return pd.DataFrame(X, columns=FEATURES)


@pytest.fixture(scope="module")
def spark():
    from pyspark.sql import SparkSession
    saved = {k: os.environ.get(k) for k in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON")}
    os.environ["PYSPARK_PYTHON"] = os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    session = (SparkSession.builder.master("local[2]").appName("treecomp-test")
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               # a short-lived test JVM: the C1 JIT alone and a serial GC start about twice as
               # fast on 2 cores (measured: session + first jobs ~25 s instead of ~47 s)
               .config("spark.driver.extraJavaOptions", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")
               .config("spark.sql.shuffle.partitions", "2")
               .config("spark.default.parallelism", "2")
               .config("spark.sql.execution.arrow.pyspark.enabled", "true")
               .config("spark.executorEnv.CC", NO_CC)
               .getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


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


def test_parquet_in_predictions_out(spark, models, tmp_path):
    from pyspark.sql import types as T
    from treecomp import spark as tspark
    df = _frame(3000, 5)[FEATURES[::-1]].assign(id=np.arange(3000))  # other order + extra column
    df["f1"] = df["f1"].astype(np.float32)  # a FloatType feature column
    (tmp_path / "in").mkdir()
    for i, part in enumerate(np.array_split(np.arange(len(df)), 4)):
        df.iloc[part].to_parquet(tmp_path / "in" / f"part-{i}.parquet")
    # an explicit schema saves the schema-inference job (seconds of JVM warm-up)
    sdf = spark.read.schema("f4 double, f3 double, f2 double, f1 float, f0 double, id long") \
        .parquet(str(tmp_path / "in"))

    reg_model, reg = models["reg"]
    clf_model, clf = models["clf"]
    rf_model, rf = models["rf"]
    scored = tspark.predict(reg, sdf)
    scored = tspark.predict(clf, scored, "predict_proba")
    scored = tspark.predict(clf, scored, name="label")
    scored = tspark.predict(rf, scored, columns=FEATURES, name="rf")
    schema = {f.name: f.dataType for f in scored.schema.fields}
    assert schema["prediction"] == T.FloatType()      # XGBoost's float32, exactly
    assert schema["label"] == T.StringType()
    assert schema["rf"] == T.LongType()
    assert [c for c in scored.columns if c.startswith("probability_")] == [
        "probability_high", "probability_low", "probability_mid"]
    assert scored.columns[:len(df.columns)] == list(df.columns)
    scored.write.parquet(str(tmp_path / "out"))

    out = pd.read_parquet(tmp_path / "out").sort_values("id").reset_index(drop=True)
    assert len(out) == len(df)
    np.testing.assert_array_equal(out["id"].to_numpy(), np.arange(len(df)))
    want = reg.predict(df[FEATURES])
    np.testing.assert_array_equal(out["prediction"].to_numpy(), want)
    assert out["prediction"].dtype == np.float32
    np.testing.assert_array_equal(want, reg_model.predict(df[FEATURES]))  # and the library's
    proba = out[["probability_high", "probability_low", "probability_mid"]].to_numpy()
    np.testing.assert_array_equal(proba, clf.predict_proba(df[FEATURES]))
    np.testing.assert_array_equal(proba, clf_model.predict_proba(df[FEATURES]))
    np.testing.assert_array_equal(out["label"].to_numpy().astype(str), clf.predict(df[FEATURES]))
    np.testing.assert_array_equal(out["rf"].to_numpy(), rf.predict(df[FEATURES].to_numpy()))
    np.testing.assert_array_equal(out["rf"].to_numpy(), rf_model.predict(df[FEATURES].to_numpy(np.float64)))


def _probe(batches):
    from treecomp import toolchain as tc
    for b in batches:
        yield pd.DataFrame({"compiler": [tc.have_compiler()] * len(b)})


def test_executors_have_no_compiler(spark):
    # what test_parquet_in_predictions_out relies on: the executors could not have compiled
    got = spark.range(4, numPartitions=2).mapInPandas(_probe, "compiler boolean").toPandas()
    assert got["compiler"].tolist() == [False] * 4


def test_errors_are_raised_eagerly(spark, models):
    from treecomp import spark as tspark
    _, reg = models["reg"]
    _, rf = models["rf"]
    sdf = spark.createDataFrame(pd.DataFrame({"f0": [1.0], "f1": [2.0], "f2": [0.0], "f3": [1.0],
                                              "s": ["x"]}))
    with pytest.raises(ValueError, match=r"lacks column\(s\) the model was trained on: \['f4'\]"):
        tspark.predict(reg, sdf)
    with pytest.raises(TypeError, match="must be numeric.*'f4': 'string'"):
        tspark.predict(reg, sdf.withColumnRenamed("s", "f4"))
    with pytest.raises(ValueError, match="without feature names.*has 4 columns.*pass columns="):
        tspark.predict(rf, sdf.drop("s"))
    with pytest.raises(ValueError, match="already has column"):
        tspark.predict(rf, sdf, columns=["f0", "f1", "f2", "f3", "f0"], name="s")
    with pytest.raises(AttributeError, match="needs a classifier"):
        tspark.predict(reg, sdf.withColumnRenamed("s", "f4"), "predict_proba")


def test_multitarget_proba_is_rejected(spark):
    from sklearn.tree import DecisionTreeClassifier
    from treecomp import spark as tspark
    X = _frame(100, 4).fillna(0).to_numpy()
    Y = np.stack([X[:, 0] > 0, X[:, 1] > 0], axis=1).astype(int)
    p = treecomp.compile(DecisionTreeClassifier(max_depth=3).fit(X, Y), backend="c")
    sdf = spark.createDataFrame(pd.DataFrame(X, columns=FEATURES))
    with pytest.raises(UnsupportedModelError, match="multi-target"):
        tspark.predict(p, sdf, "predict_proba")


def test_missing_extra_says_what_to_install(models, monkeypatch):
    from treecomp import spark as tspark
    monkeypatch.setitem(sys.modules, "pyspark", None)
    with pytest.raises(ImportError, match=r"pip install 'treecomp\[spark\]'"):
        tspark.predict(models["reg"][1], None)


def test_tasks_carry_a_broadcast_not_the_artifact(spark, models, monkeypatch):
    from pyspark import cloudpickle
    from treecomp import spark as tspark
    _, reg = models["reg"]
    sdf = spark.createDataFrame(pd.DataFrame(np.zeros((2, 5)), columns=FEATURES))
    captured = {}
    monkeypatch.setattr(type(sdf), "mapInPandas",
                        lambda self, func, schema: captured.setdefault("func", func))
    tspark.predict(reg, sdf)
    so = reg._kernel.to_bytes()
    blob = cloudpickle.dumps(captured["func"])  # what every task's closure ships
    assert so not in blob and len(blob) < len(so) // 2


def test_docs_example_runs(spark, tmp_path, monkeypatch):
    """docs/scale-out.md's Spark example as written, on this module's session (the example's
    SparkSession.builder.getOrCreate() returns it): a job, not a second JVM."""
    pytest.importorskip("sklearn")
    from tests.docs_blocks import block, with_paths_in
    code = block("scale-out.md", "python", 1)
    assert "SparkSession.builder.getOrCreate()" in code
    monkeypatch.chdir(tmp_path)
    code = with_paths_in(code, tmp_path, ("rows.parquet", "scored/"))  # the workers' directory is not ours
    exec(compile(code, "docs/scale-out.md (Spark)", "exec"), {"__name__": "__main__"})
    out = pd.read_parquet(tmp_path / "scored").sort_values("id")
    assert list(out.columns) == ["a", "b", "c", "id", "prediction", "probability_False", "probability_True"]
    assert len(out) == 1000 and (out["id"].to_numpy() == np.arange(1000)).all()
    from sklearn.ensemble import HistGradientBoostingClassifier
    X = out[["a", "b", "c"]].reset_index(drop=True)
    model = HistGradientBoostingClassifier(max_iter=20).fit(X, X["a"] + X["b"] > 0)
    np.testing.assert_array_equal(out["prediction"].to_numpy(), model.predict(X))
    np.testing.assert_array_equal(out[["probability_False", "probability_True"]].to_numpy(),
                                  model.predict_proba(X))
