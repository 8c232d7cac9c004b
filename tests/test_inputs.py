"""Input conversion as each library converts it (Forest.input_rule; treecomp.inputs and
treecomp.frames), against the library in this process: int / uint / big-endian / longdouble /
float16 / bool / object / string arrays, lists, pandas frames of every column kind, polars
frames. The rows sit next to the models' thresholds, at magnitudes where float32 rounds (2**31)
and where float64 does too (2**62, near float32 midpoints: one rounding or two differ there).
"""

from __future__ import annotations

import numpy as np
import pytest

import treecomp
from treecomp import interp

pd = pytest.importorskip("pandas")
NF = 4
MAGS = [2**62, 2**31, 2**26, 2**15]
NAMES = [f"f{i}" for i in range(NF)]


def _train():
    rng = np.random.default_rng(1)
    n = 400
    Xi = np.column_stack([rng.integers(-m, m, n) for m in MAGS]).astype(np.int64)
    X = Xi.astype(np.float64)
    y = ((X[:, 0] / 2**62) + (X[:, 1] / 2**31) + np.sin(X[:, 2]) + (X[:, 3] % 7) > 0.5) \
        + rng.normal(size=n) * 0.01
    return Xi, X, y


def _rows(forest, Xi, n=200, seed=5):
    """int64 rows next to the forest's thresholds (feature 0: near float32 midpoints)."""
    rng = np.random.default_rng(seed)
    thr = {j: [] for j in range(NF)}
    for t in forest.trees:
        for f, th, left in zip(t.feature, t.threshold, t.left):
            if left >= 0:
                thr[int(f)].append(th)
    T = Xi[:n].copy()
    for j in range(NF):
        if thr[j]:
            c = np.array(thr[j])[rng.integers(0, len(thr[j]), n)]
            off = rng.integers(-300, 300, n) if j < 2 else rng.integers(-3, 3, n)
            if j == 0:  # around the float32 midpoints next to the threshold, never on one:
                # float64 rounds these to the midpoint (ulp 2**10), so two roundings differ
                t32 = np.clip(c, -2.0**62, 2.0**62).astype(np.float32).astype(np.float64)
                side = np.where(rng.random(n) < 0.5, -np.inf, np.inf)
                other = np.nextafter(t32.astype(np.float32), side.astype(np.float32))
                mid = (t32 + other.astype(np.float64)) / 2  # exact: both are float32 values
                T[:, j] = mid.astype(np.int64) + np.where(off == 0, 1, off)
            else:
                T[:, j] = np.round(c).astype(np.int64) + off
    return T


def _kinds(T):
    frame = pd.DataFrame(T, columns=NAMES)
    yield "int64", T
    yield "int32", np.clip(T, -2**31, 2**31 - 1).astype(np.int32)
    yield "uint64", np.abs(T).astype(np.uint64)
    yield ">f8", T.astype(">f8")
    yield ">i8", T.astype(">i8")
    yield "longdouble", T.astype(np.longdouble) + np.longdouble(0.25)
    yield "float16", (T % 1000).astype(np.float16)
    yield "bool", (T % 2).astype(bool)
    yield "object ints", T.astype(object)
    yield "object floats", T.astype(np.float64).astype(object)
    yield "strings", T.astype(str)
    yield "list of ints", T.tolist()
    yield "frame int64", frame
    yield "frame int64 + float64", frame.astype({"f3": np.float64})
    yield "frame int64 + float32", frame.astype({"f3": np.float32})
    yield "frame int64 + bool", frame.astype({"f3": bool})
    yield "frame Int64", frame.astype("Int64")
    yield "frame uint64", pd.DataFrame(np.abs(T).astype(np.uint64), columns=NAMES)
    yield "frame object", frame.astype(object)
    yield "frame str", frame.astype({"f3": str})


def _tells_roundings(predict, T):
    """Whether the rows tell one rounding to float32 from two (through float64): the test
    could fail."""
    return not np.array_equal(predict(T.astype(np.float32)),
                              predict(T.astype(np.float64).astype(np.float32)))


def _check(lib, p, kinds, refused_here=()):
    """Every kind: the library's bits, or both raise; kinds in refused_here: treecomp raises
    ValueError where the library answers (its answer being wrong)."""
    for kind, X in kinds:
        try:
            want = np.asarray(lib(X))
        except Exception:  # noqa: BLE001 - the library's own error types
            with pytest.raises((ValueError, TypeError)):
                p.predict(X)
            continue
        if kind in refused_here:
            with pytest.raises(ValueError):
                p.predict(X)
            continue
        got = np.asarray(p.predict(X))
        assert np.array_equal(got.reshape(want.shape), want), kind


@pytest.fixture(scope="module")
def train():
    return _train()


def test_lightgbm_converts_integer_arrays_to_float32_first(train):
    """Before: treecomp read an int64 array as float64, LightGBM as float32 (29 of 300 rows
    differed). Now every array kind converts as the Booster and the wrapper convert it."""
    lgb = pytest.importorskip("lightgbm")
    Xi, X, y = train
    m = lgb.LGBMRegressor(n_estimators=20, min_child_samples=2, n_jobs=1, verbose=-1).fit(X, y)
    f = treecomp.parse(m)
    T = _rows(f, Xi)
    assert not np.array_equal(m.predict(T), m.predict(T.astype(np.float64)))  # float32 matters
    for lib, p in ((m.predict, treecomp.compile(m)), (m.booster_.predict, treecomp.compile(m.booster_))):
        _check(lib, p, _kinds(T))
    np.testing.assert_array_equal(interp.predict(f, T), m.predict(T))


def test_xgboost_conversions_and_big_endian_arrays(train):
    """XGBoost converts int64 straight to float32 (frames column by column); it reads a
    big-endian array's bytes as little-endian numbers, so treecomp refuses such arrays."""
    xgb = pytest.importorskip("xgboost")
    Xi, X, y = train
    m = xgb.XGBRegressor(n_estimators=20, max_depth=6, n_jobs=1).fit(pd.DataFrame(X, columns=NAMES), y)
    T = _rows(treecomp.parse(m), Xi)
    assert _tells_roundings(m.predict, T)
    kinds = [(k, v.set_axis(NAMES, axis=1) if isinstance(v, pd.DataFrame) else v) for k, v in _kinds(T)]
    _check(m.predict, treecomp.compile(m), kinds, refused_here=(">f8", ">i8"))
    B = T[:5].astype(">f8")
    np.testing.assert_array_equal(m.predict(B), m.predict(B.view("<f8")))  # the bytes, misread
    with pytest.raises(ValueError, match="big-endian"):
        treecomp.compile(m).predict(B)
    b = m.get_booster()
    _check(lambda Z: b.predict(xgb.DMatrix(Z)), treecomp.compile(b),
           [(k, v) for k, v in kinds if isinstance(v, pd.DataFrame)])


def test_sklearn_conversions(train):
    """check_array: lists and frames by one np.asarray(X, float32) (a pure int64 frame
    straight to float32, a mixed one through float64; bool and nullable columns first by
    DataFrame.astype), object and string arrays parsed."""
    from sklearn.ensemble import HistGradientBoostingRegressor, RandomForestRegressor
    Xi, X, y = train
    df = pd.DataFrame(X, columns=NAMES)
    for m in (RandomForestRegressor(n_estimators=5, max_depth=8, random_state=0).fit(df, y),
              HistGradientBoostingRegressor(max_iter=10).fit(df, y)):
        T = _rows(treecomp.parse(m), Xi)
        if isinstance(m, RandomForestRegressor):  # (HistGradientBoosting compares in float64)
            assert _tells_roundings(m.predict, pd.DataFrame(T, columns=NAMES))
        kinds = list(_kinds(T))
        frames = [(k, v) for k, v in kinds if isinstance(v, pd.DataFrame)]
        arrays = [(k, v) for k, v in kinds if not isinstance(v, pd.DataFrame)]
        _check(m.predict, treecomp.compile(m), frames)
        m2 = type(m)(**m.get_params()).fit(X, y)  # no feature names: arrays and lists
        _check(m2.predict, treecomp.compile(m2), arrays)


def test_catboost_conversions(train):
    cb = pytest.importorskip("catboost")
    Xi, X, y = train
    m = cb.CatBoostRegressor(iterations=20, depth=4, verbose=0, thread_count=1).fit(X, y)
    T = _rows(treecomp.parse(m), Xi)
    assert _tells_roundings(m.predict, T)
    _check(m.predict, treecomp.compile(m),
           [(k, v) for k, v in _kinds(T) if k != "strings"])  # catboost parses them, treecomp refuses


def test_polars_frames_are_read_like_pandas_ones(train):
    """Before: to_numpy() was given pandas-only arguments and every polars frame failed. Now
    read as scikit-learn reads them (to_numpy(), names checked as for pandas); XGBoost and
    LightGBM as they read them."""
    pl = pytest.importorskip("polars")
    from sklearn.ensemble import RandomForestRegressor
    xgb = pytest.importorskip("xgboost")
    lgb = pytest.importorskip("lightgbm")
    Xi, X, y = train
    df = pd.DataFrame(X, columns=NAMES)
    models = [RandomForestRegressor(n_estimators=5, max_depth=8, random_state=0).fit(df, y),
              xgb.XGBRegressor(n_estimators=10, max_depth=5, n_jobs=1).fit(df, y),
              lgb.LGBMRegressor(n_estimators=10, n_jobs=1, verbose=-1).fit(df, y)]
    for m in models:
        p = treecomp.compile(m)
        T = _rows(treecomp.parse(m), Xi, n=100)
        P = pl.DataFrame(T, schema=NAMES)
        frames = [("int", P), ("mixed", P.with_columns(pl.col("f3").cast(pl.Float64))),
                  ("null", P.with_columns(pl.when(pl.col("f3") > 0).then(pl.col("f3"))
                                          .otherwise(None).alias("f3")))]
        for kind, Z in frames:
            np.testing.assert_array_equal(p.predict(Z), m.predict(Z), err_msg=f"{m} {kind}")
        reordered = P.select(NAMES[::-1])
        if type(m).__name__.startswith("LGBM"):  # LightGBM reads frames by position
            np.testing.assert_array_equal(p.predict(reordered), m.predict(reordered))
            continue
        if type(m).__name__.startswith("Random"):  # scikit-learn checks the names
            with pytest.raises(ValueError, match="feature names should match"):
                m.predict(reordered)
        else:  # XGBoost's Booster checks them; its wrapper (inplace_predict) reads a polars
            # frame by position, unlike a pandas one: treecomp checks names for both
            with pytest.raises(ValueError, match="feature_names mismatch"):
                m.get_booster().predict(xgb.DMatrix(reordered))
        with pytest.raises(ValueError, match="feature names"):
            p.predict(reordered)


def test_input_rule_travels_and_old_files_read_as_cast(tmp_path):
    """Forest.input_rule is part of the digest, the IR file and every artifact; files without
    it read as "cast" (the conversion treecomp applied before)."""
    lgb = pytest.importorskip("lightgbm")
    Xi, X, y = _train()
    m = lgb.LGBMRegressor(n_estimators=5, n_jobs=1, verbose=-1).fit(X, y)
    f = treecomp.parse(m.booster_)
    assert f.input_rule == "lightgbm"
    assert f.digest() != f.replace(input_rule="cast").digest()
    assert treecomp.ir.Forest.from_bytes(f.to_bytes()).input_rule == "lightgbm"
    T = _rows(f, Xi)
    p = treecomp.compile(f, backend="arrays")
    p.save(tmp_path / "m.tc")
    np.testing.assert_array_equal(treecomp.load(tmp_path / "m.tc").predict(T), m.booster_.predict(T))
    g = f.replace(input_rule="cast")  # files written before input_rule: no such key
    assert "input_rule" not in g.meta() and "input_rule" not in treecomp.ir.head_of(g).to_json()
    assert treecomp.ir.Forest.from_bytes(g.to_bytes()).input_rule == "cast"


def test_onnx_models_read_other_dtypes_as_their_float32_values(train):
    """ONNX Runtime takes only the graph's float32 tensor (int64 and float64 inputs are
    refused); treecomp reads any numeric input as X.astype(float32), what a caller passes
    ONNX Runtime."""
    ort = pytest.importorskip("onnxruntime")
    to_onnx = pytest.importorskip("skl2onnx").to_onnx
    from sklearn.ensemble import RandomForestRegressor
    Xi, X, y = train
    m = RandomForestRegressor(n_estimators=5, max_depth=8, random_state=0).fit(X, y)
    onx = to_onnx(m, X[:1].astype(np.float32), target_opset={"": 17, "ai.onnx.ml": 3})
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    sess = ort.InferenceSession(onx.SerializeToString(), so, providers=["CPUExecutionProvider"])
    p = treecomp.compile(onx)
    T = _rows(treecomp.parse(onx), Xi)
    name = sess.get_inputs()[0].name
    with pytest.raises(Exception):  # noqa: B017 - ORT's own error type
        sess.run(None, {name: T})
    for kind, Z in _kinds(T):
        if kind in ("strings", "frame str", "frame object"):
            continue
        # the float32 matrix a caller makes: np.asarray(X, np.float32), a frame's
        # to_numpy(np.float32); big-endian and long double arrays through float64, as
        # catboost reads them (the rule "cast" both follow)
        via64 = kind in (">i8", ">f8", "longdouble")
        Z32 = Z.to_numpy(np.float32, na_value=np.nan) if isinstance(Z, pd.DataFrame) else \
            np.asarray(Z, np.float64 if via64 else None).astype(np.float32)
        if kind.startswith("list"):
            Z32 = np.asarray(Z, np.float32)
        want = sess.run(None, {name: Z32})[0]
        np.testing.assert_array_equal(p.predict(Z).reshape(want.shape), want, err_msg=kind)
