"""CatBoost frontend: bit-exact differential tests against the installed catboost.

Small models of every supported kind are compared on their rows, rows on the borders (+-1 ULP in
float32), NaN / +-inf / -0.0, for every prediction type, through the interpreter and every
backend; JSON and .cbm files with and without catboost; hand-written JSON models pin CatBoost's
number parsing and its exp; hostile files give InvalidModelError.
"""

from __future__ import annotations

import json
import sys

import numpy as np
import pytest

cb = pytest.importorskip("catboost")

import treecomp  # noqa: E402
from treecomp import categories, interp, outputs  # noqa: E402
from treecomp.backends.arrays.native import arch_isas  # noqa: E402
from treecomp.errors import InvalidModelError, NotFittedError, UnsupportedModelError  # noqa: E402
from treecomp.frontends.catboost import rapidjson_double  # noqa: E402
from tests.edge import assert_backend_matches_interp, edge_rows  # noqa: E402

BASE = dict(iterations=25, depth=4, verbose=0, thread_count=1, random_seed=0, allow_writing_files=False)
RNG = np.random.default_rng(7)
X = RNG.normal(size=(300, 5))
X[RNG.random(X.shape) < 0.05] = np.nan
X0 = np.nan_to_num(X)
YK = np.digitize(X0[:, 0] + 0.5 * X0[:, 1], [-1.0, 0.0, 1.0])

CASES = {
    "rmse_min": lambda: cb.CatBoostRegressor(nan_mode="Min", **BASE).fit(X, X0[:, 0] * 2 + X0[:, 2]),
    "mae_max": lambda: cb.CatBoostRegressor(nan_mode="Max", loss_function="MAE", **BASE).fit(X, X0[:, 0]),
    "forbidden": lambda: cb.CatBoostRegressor(nan_mode="Forbidden", **BASE).fit(X0, X0[:, 1]),
    "logloss": lambda: cb.CatBoostClassifier(**BASE).fit(X, (YK > 1).astype(int)),
    "logloss_str": lambda: cb.CatBoostClassifier(**BASE).fit(X, np.where(YK > 1, "yes", "no")),
    "crossentropy": lambda: cb.CatBoostClassifier(loss_function="CrossEntropy", **BASE).fit(X, RNG.random(300)),
    "multiclass": lambda: cb.CatBoostClassifier(loss_function="MultiClass", **BASE).fit(X, YK),
    "multiclass_str3": lambda: cb.CatBoostClassifier(loss_function="MultiClass", **BASE).fit(
        X, np.array(["a", "b", "c"])[np.minimum(YK, 2)]),
    "multilogloss": lambda: cb.CatBoostClassifier(loss_function="MultiLogloss", **BASE).fit(
        X, np.c_[YK > 1, YK == 0, X0[:, 2] > 0.3].astype(int)),
    "multicrossentropy": lambda: cb.CatBoostClassifier(loss_function="MultiCrossEntropy", **BASE).fit(
        X, np.c_[RNG.random(300), (YK > 1) * 0.9]),
    "onevsall": lambda: cb.CatBoostClassifier(loss_function="MultiClassOneVsAll", **BASE).fit(X, YK),
    "poisson": lambda: cb.CatBoostRegressor(loss_function="Poisson", **BASE).fit(X, YK),
    "tweedie": lambda: cb.CatBoostRegressor(loss_function="Tweedie:variance_power=1.5", **BASE).fit(X, YK),
    "multiquantile": lambda: cb.CatBoostRegressor(loss_function="MultiQuantile:alpha=0.2,0.8", **BASE).fit(X, X0[:, 0]),
    "expectile": lambda: cb.CatBoostRegressor(loss_function="Expectile:alpha=0.3", **BASE).fit(X, X0[:, 1]),
    "multirmse": lambda: cb.CatBoostRegressor(loss_function="MultiRMSE", **BASE).fit(X, np.c_[X0[:, 0], X0[:, 3]]),
    "depthwise": lambda: cb.CatBoostRegressor(grow_policy="Depthwise", **BASE).fit(X, X0[:, 0] + X0[:, 4]),
    "lossguide_multi": lambda: cb.CatBoostClassifier(grow_policy="Lossguide", max_leaves=12,
                                                     loss_function="MultiClass", **BASE).fit(X, YK),
    "ranker": lambda: cb.CatBoostRanker(loss_function="YetiRank", **BASE).fit(
        X, YK, group_id=np.repeat(np.arange(30), 10)),
    "generic_raw": lambda: cb.CatBoost(dict(loss_function="Logloss", **BASE)).fit(X, (YK > 1).astype(int)),
}

# one-hot categorical models: object rows with str and int categories (tests at the end)
CN = 240
CRNG = np.random.default_rng(11)
COLORS = np.array(["red", "green", "blue", "", "grün", "x" * 70])  # empty, non-ASCII, > 64 bytes
UNSEEN = ["purple", "Red", "red ", "グリーン"]


def onehot_data():
    """Object rows [float, str category, int category (negatives too), float] and a target."""
    num = CRNG.normal(size=(CN, 2))
    num[CRNG.random(num.shape) < 0.05] = np.nan
    color = COLORS[CRNG.integers(0, len(COLORS), CN)]
    size = CRNG.integers(-2, 3, CN)
    Xo = np.empty((CN, 4), object)
    Xo[:, 0], Xo[:, 1], Xo[:, 2], Xo[:, 3] = num[:, 0], color, size, num[:, 1]
    y = np.nan_to_num(num[:, 0]) + 1.5 * (color == "red") - (size == -1) + 0.8 * (color == "grün") \
        - 0.6 * (color == "x" * 70) + 0.4 * (size == 2)
    return Xo, y


XO, YO = onehot_data()
OH = dict(BASE, one_hot_max_size=16)
ONEHOT = {
    "onehot_logloss": lambda: cb.CatBoostClassifier(**OH).fit(XO, (YO > 0.3).astype(int), cat_features=[1, 2]),
    "onehot_depthwise": lambda: cb.CatBoostRegressor(grow_policy="Depthwise", **OH).fit(XO, YO, cat_features=[1, 2]),
    "onehot_lossguide_multi": lambda: cb.CatBoostClassifier(
        grow_policy="Lossguide", max_leaves=10, loss_function="MultiClass", **OH).fit(
        XO, np.digitize(YO, [-0.5, 0.5]), cat_features=[1, 2]),
}


def onehot_rows(forest, seed=0):
    """Training rows, unseen categories, and numeric values on / +-1 ULP (float32) around the
    borders, NaN, +-inf, -0.0: an object array as a user would pass it."""
    rng = np.random.default_rng(seed)
    T = XO[rng.integers(0, CN, 200)].copy()
    T[:30, 1] = np.array(UNSEEN, object)[rng.integers(0, len(UNSEEN), 30)]
    T[20:50, 2] = rng.choice([7, -100, 3, 2**40], 30)
    nodes = [(t.feature[i], t.threshold[i]) for t in forest.trees
             for i in np.flatnonzero((t.left >= 0) & (t.cat_index < 0))]
    for r in range(50, 200):
        f, thr = nodes[rng.integers(len(nodes))]
        step = int(rng.integers(-1, 2))
        with np.errstate(all="ignore"):
            T[r, f] = float(np.nextafter(np.float32(thr), np.float32(step * np.inf)) if step else thr)
    T[190:, 0] = [np.nan, np.inf, -np.inf, -0.0, 1e39, np.nan, 0.0, -1e39, 3.0, -3.0]
    return T


_MODELS: dict = {}


def model(name):
    if name not in _MODELS:
        _MODELS[name] = {**CASES, **ONEHOT}[name]()
    return _MODELS[name]


def model_rows(name, forest, seed=0):
    return onehot_rows(forest, seed) if name in ONEHOT else rows(forest, seed)


def rows(forest, seed=0):
    """Training rows, border rows (+-1 ULP in float32) and NaN / +-inf / -0.0 / 1e39."""
    T = RNG.normal(size=(150, 5)) * 1.5
    T[:5, 0] = [np.nan, np.inf, -np.inf, -0.0, 1e39]
    return np.vstack([X, T, edge_rows(forest, X0, n=300, seed=seed)])


def library_outputs(m, T):
    """CatBoost's own outputs: (predict, predict_proba or None, RawFormulaVal)."""
    pred = m.predict(T)  # (n, 1): multiclass labels come as a column (label_shape "column")
    proba = m.predict_proba(T) if isinstance(m, cb.CatBoostClassifier) else None
    raw = cb.CatBoost.predict(m, T, prediction_type="RawFormulaVal")  # (CatBoostRanker hides it)
    return pred, proba, raw


def assert_same(want, got):
    want, got = np.asarray(want), np.asarray(got)
    assert (got.dtype, got.shape) == (want.dtype, want.shape)
    np.testing.assert_array_equal(got, want, strict=True)


@pytest.mark.parametrize("name", list(CASES) + list(ONEHOT))
def test_model_bit_exact(name):
    m = model(name)
    f = treecomp.parse(m)
    T = model_rows(name, f)
    pred, proba, raw = library_outputs(m, T)
    assert_same(pred, interp.predict(f, T))
    assert_same(raw, interp.decision_function(f, T))
    if proba is not None:
        assert_same(proba, interp.predict_proba(f, T))
    if name in ("generic_raw", "ranker"):  # CatBoost.predict is RawFormulaVal
        assert f.decision == "none" and f.transform == "identity"


@pytest.mark.parametrize("name", ["logloss_str", "multiclass", "poisson", "multirmse", "lossguide_multi",
                                  "mae_max", "multilogloss", "onehot_logloss", "onehot_lossguide_multi"])
@pytest.mark.parametrize("backend", ["c", "llvm", "arrays"])
def test_backends(name, backend):
    m = model(name)
    f = treecomp.parse(m)
    T = model_rows(name, f, seed=1)
    p = treecomp.compile(f, backend=backend)
    assert_backend_matches_interp(p, f, T)
    pred, proba, _ = library_outputs(m, T)
    assert_same(pred, p.predict(T))
    if proba is not None:
        assert_same(proba, p.predict_proba(T))
    assert_same(pred[:1], p.predict(T[:1].tolist()))  # a list of rows, one row


@pytest.mark.parametrize("isa", arch_isas())
@pytest.mark.parametrize("name", ["logloss", "rmse_min", "multiclass", "depthwise"])
def test_symmetric_walk_every_isa(name, isa):
    """The arrays backend flags CatBoost's symmetric trees (arrays_derived.oblivious_heaps: every
    tree but the trailing bias tree; Depthwise trees are not symmetric) and walks them one column
    a level on AVX-512 (quant_impl.c, zobl): bit-exact against catboost on every ISA, batches of
    whole and short 64-row groups."""
    from treecomp.backends import arrays
    if isa not in arrays.supported_isas():
        pytest.skip(f"CPU/host lacks {isa}")
    m = model(name)
    f = treecomp.parse(m)
    T = rows(f, seed=2)
    pred, proba, raw = library_outputs(m, T)
    p = treecomp.compile(f, backend="arrays", isa=isa)
    flags = p._kernel._keep["h_qobl"].astype(bool)
    single = np.array([t.n_leaves == 1 for t in f.trees])
    if name == "depthwise":
        assert not flags.all()
    else:
        np.testing.assert_array_equal(flags, ~single)
        assert single.sum() == (name == "rmse_min")  # RMSE's bias: a one-leaf tree
    for n in (1, 64, 65, 130, len(T)):
        assert_same(pred[:n], p.predict(T[:n]))
        assert_same(raw[:n].reshape(p.predict_raw(T[:n]).shape), p.predict_raw(T[:n]))
        if proba is not None:
            assert_same(proba[:n], p.predict_proba(T[:n]))


def test_semantics_pinned():
    """Leaf-index bit order, border direction and NaN treatment as the docstring says."""
    f = treecomp.parse(model("rmse_min"))
    assert f.input_dtype == "float32" and f.comparison == "<=" and f.accumulate_dtype == "float64"
    assert all(t.default_left[t.left >= 0].all() for t in f.trees)  # Min: NaN -> -inf -> left
    f = treecomp.parse(model("mae_max"))
    assert not any(t.default_left[t.left >= 0].any() for t in f.trees)  # Max: NaN -> +inf
    f = treecomp.parse(model("multiclass"))
    assert (f.transform, f.decision, f.exp_lib) == ("softmax_seq", "argmax_raw", "fmath")
    f = treecomp.parse(model("rmse_min"))
    assert f.trees[-1].n_nodes == 1  # boost_from_average's bias: added after the trees


def test_scale_and_bias():
    m = model("rmse_min").copy()
    m.set_scale_and_bias(1.0, 0.123456789)
    f = treecomp.parse(m)
    T = rows(f)
    assert_same(m.predict(T), interp.predict(f, T))
    m.set_scale_and_bias(0.5, 0.1)
    with pytest.raises(UnsupportedModelError, match="scale"):
        treecomp.parse(m)


# -- files ------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["logloss_str", "multiclass", "depthwise", "lossguide_multi", "poisson",
                                  "multicrossentropy"])
def test_files(name, tmp_path, monkeypatch):
    """JSON files predict what CatBoost predicts after loading the JSON (its reader rounds
    differently from the writer), .cbm files what the model predicts; neither needs catboost."""
    m = model(name)
    js, cbm = tmp_path / "m.json", tmp_path / "m.model"  # content decides, not the name
    m.save_model(str(js), format="json")
    m.save_model(str(cbm))
    T = rows(treecomp.parse(m))
    cls = type(m) if name != "generic_raw" else cb.CatBoost
    back = cls()
    back.load_model(str(js), format="json")
    fj, fc = treecomp.parse(js), treecomp.parse(cbm)
    for f, lib in ((fj, back), (fc, m)):
        pred, proba, raw = library_outputs(lib, T)
        assert_same(pred, interp.predict(f, T))
        assert_same(raw, interp.decision_function(f, T))
        if proba is not None:
            assert_same(proba, interp.predict_proba(f, T))
    assert fc.digest() == treecomp.parse(m).digest()  # live objects are read through a .cbm
    monkeypatch.setitem(sys.modules, "catboost", None)  # as if catboost were not installed
    assert treecomp.parse(js).digest() == fj.digest()
    assert treecomp.parse(cbm).digest() == fc.digest()


def crafted(leaf_values: str, depth: int, loss: str = "RMSE", dim: int = 1) -> str:
    """A CatBoost JSON model with one oblivious tree over `depth` 0/1 features (leaf index = the
    row's bits), leaf values given as literal JSON number text."""
    ff = [{"borders": [0.5], "feature_index": i, "flat_feature_index": i, "has_nans": False,
           "nan_value_treatment": "AsIs", "feature_id": ""} for i in range(depth)]
    splits = [{"border": 0.5, "float_feature_index": i, "split_index": i, "split_type": "FloatFeature"}
              for i in range(depth)]
    doc = {"features_info": {"float_features": ff}, "scale_and_bias": [1, [0] * dim],
           "model_info": {"params": {"loss_function": {"type": loss, "params": {}}}},
           "oblivious_trees": [{"leaf_values": "LEAVES", "splits": splits}]}
    return json.dumps(doc).replace('"LEAVES"', "[" + leaf_values + "]")


def crafted_rows(depth):
    return ((np.arange(2 ** depth)[:, None] >> np.arange(depth)) & 1).astype(np.float64)


def load_crafted(text, tmp_path, cls=None):
    p = tmp_path / "c.json"
    p.write_text(text)
    m = (cls or cb.CatBoost)()
    m.load_model(str(p), format="json")
    return p, m


def test_json_numbers_as_catboost_reads_them(tmp_path):
    rng = np.random.default_rng(3)
    strs = []
    for i in range(512):
        mant = f"{int(rng.integers(10 ** 15, 10 ** 16))}{int(rng.integers(0, 10))}"
        form = i % 6
        s = [f"{mant}e{int(rng.integers(-40, 30))}", f"0.{mant}", f"{mant[:3]}.{mant[3:]}",
             f"{mant}{mant}.{mant}", f"0.000{mant}{mant}E+2", f"{mant[:1]}.{mant[1:]}e-300"][form]
        strs.append(("-" if rng.random() < 0.5 else "") + s)
    p, m = load_crafted(crafted(", ".join(strs), 9), tmp_path)
    want = m.predict(crafted_rows(9))
    assert_same(want, np.array([rapidjson_double(s) for s in strs]))
    assert np.any(want != np.array([float(s) for s in strs]))  # not correctly rounded
    assert_same(want, interp.predict(treecomp.parse(p), crafted_rows(9)))


def test_fast_exp_matches_catboost(tmp_path):
    """CatBoost's Exponent (and softmax) exp, over a wide range and at the clamps, for batches
    whose tail (n % 4 values) takes its scalar path."""
    rng = np.random.default_rng(4)
    vals = np.concatenate([rng.uniform(-700, 700, 200), rng.normal(size=200) * 3,
                           rng.uniform(-1e-6, 1e-6, 50), [0.0, -0.0, 5e-324, 1e-300, 700.5, -707.9]])
    vals = np.resize(vals, 512)
    p, m = load_crafted(crafted(", ".join(repr(float(v)) for v in vals), 9, "Poisson"), tmp_path,
                        cb.CatBoostRegressor)
    Z = crafted_rows(9)
    raw = m.predict(Z, prediction_type="RawFormulaVal")
    f = treecomp.parse(p)
    assert f.transform == "exp" and f.exp_lib == "fmath"
    for n in (512, 511, 510, 509):
        want = m.predict(Z[:n], prediction_type="Exponent")
        assert_same(want, outputs.fmath_exp(raw[:n]))
        assert_same(want, interp.predict(f, Z[:n]))
    assert np.mean(outputs.libm_exp(raw) != m.predict(Z, prediction_type="Exponent")) > 0.05  # not libm


# -- refusals and corrupt input ----------------------------------------------------------------
def test_ctr_refused_by_name(tmp_path):
    """Categorical features with more categories than one_hot_max_size become CTRs (target
    statistics): refused, naming CTRs and the feature, from the object, .cbm and JSON."""
    Xc = X0[:, :3].astype(object)
    Xc[:, 2] = np.array(["red", "green", "blue", "cyan"])[RNG.integers(0, 4, 300)]
    m = cb.CatBoostRegressor(iterations=10, depth=2, verbose=0, thread_count=1, one_hot_max_size=2,
                             allow_writing_files=False).fit(Xc, 3.0 * (Xc[:, 2] == "red"), cat_features=[2])
    m.save_model(str(tmp_path / "m.cbm"))
    m.save_model(str(tmp_path / "m.json"), format="json")
    for src in (m, tmp_path / "m.cbm", tmp_path / "m.json"):
        with pytest.raises(UnsupportedModelError, match=r"as CTRs \(target statistics\) are not supported \(2\)"):
            treecomp.parse(src)


def test_other_refusals():
    m = model("logloss").copy()
    m.set_probability_threshold(0.7)
    with pytest.raises(UnsupportedModelError, match="probability threshold"):
        treecomp.parse(m)
    u = cb.CatBoostRegressor(loss_function="RMSEWithUncertainty", iterations=3, depth=2, verbose=0,
                             thread_count=1, allow_writing_files=False).fit(X, X0[:, 0])
    with pytest.raises(UnsupportedModelError, match="RMSEWithUncertainty"):
        treecomp.parse(u)
    with pytest.raises(NotFittedError):
        treecomp.parse(cb.CatBoostClassifier())


def test_feature_names():
    pd = pytest.importorskip("pandas")
    df = pd.DataFrame(X, columns=list("abcde"))
    m = cb.CatBoostRegressor(**BASE).fit(df, X0[:, 0])
    f = treecomp.parse(m)
    assert f.feature_names == tuple("abcde")
    assert_same(m.predict(df), interp.predict(f, df))


def test_corrupt_cbm(tmp_path):
    """Truncated and byte-flipped .cbm files: a clear error (or a model), never a crash."""
    p = tmp_path / "m.cbm"
    model("depthwise").save_model(str(p))
    data = p.read_bytes()
    rng = np.random.default_rng(5)
    for i in range(120):
        b = bytearray(data)
        if i < 20:
            b = b[:int(rng.integers(0, len(data)))]
        else:
            for _ in range(int(rng.integers(1, 4))):
                b[int(rng.integers(8, len(b)))] = int(rng.integers(0, 256))
        p.write_bytes(bytes(b))
        try:
            treecomp.parse(p)
        except (InvalidModelError, UnsupportedModelError):
            pass


def test_hostile_json(tmp_path):
    good = crafted("1.5, 2.5, 3.5, 4.5", 2)
    bad = {
        "truncated": good[:-20],
        "nan_literal": good.replace("1.5", "NaN"),
        "too_big": good.replace("1.5", "1e999"),
        "string_leaf": good.replace("1.5", '"x"'),
        "leaf_count": good.replace("1.5, ", ""),
        "split_index": good.replace('"split_index": 1', '"split_index": 7'),
        "border_mismatch": good.replace('"border": 0.5, "float_feature_index": 1', '"border": 0.25, "float_feature_index": 1'),
        "deep_nesting": '{"features_info": {"float_features": []}, "trees": [' + "[" * 100000 + "]" * 100000 + "]}",
        "deep_tree": '{"features_info": {"float_features": [{"borders": [0.5], "feature_index": 0, '
                     '"flat_feature_index": 0}]}, "trees": [' + '{"split": {"split_index": 0}, "left": ' * 40
                     + '{"value": 1}' + ', "right": {"value": 2}}' * 40 + "]}",
        "depth_60": good.replace('"splits": [', '"splits": [' + '{"split_index": 0}, ' * 58),
        "no_trees": good.replace('"oblivious_trees"', '"other"'),
        "unsorted_borders": good.replace('"borders": [0.5]', '"borders": [0.5, 0.25]'),
        "array_root": "[1, 2]",
    }
    for name, text in bad.items():
        p = tmp_path / f"{name}.json"
        p.write_text(text if name != "array_root" else text)
        if name == "array_root":  # not recognisably CatBoost: goes to the XGBoost reader
            with pytest.raises((InvalidModelError, UnsupportedModelError)):
                treecomp.parse(p)
            continue
        with pytest.raises(InvalidModelError):
            treecomp.parse(p)


@pytest.mark.parametrize("name", ["multiclass", "poisson"])
def test_artifacts_refuse_transform_with_catboosts_exp(name, tmp_path):
    """CatBoost's softmax and exp call its own fast exp, which no artifact carries: a .so
    answers TREECOMP_EINVAL to TREECOMP_TRANSFORM (never libm's answer), its raw margins are
    exact, and the Predictor loaded from it transforms them exactly in Python."""
    from treecomp import native
    m = model(name)
    f = treecomp.parse(m)
    assert f.exp_lib == "fmath" and outputs.accepted_flags(f) == 0
    T = rows(f)
    p = treecomp.compile(f, backend="c")
    p.save(tmp_path / "m.so")
    q = treecomp.load(tmp_path / "m.so")
    Z = np.ascontiguousarray(T[:5], dtype=np.float32)
    out = np.empty((5, f.n_outputs))
    q._kernel.run(Z, out, native.TREECOMP_RAW)
    assert_same(interp.predict_raw(f, Z), out)
    with pytest.raises(RuntimeError, match="code -1"):
        q._kernel.run(Z, out, native.TREECOMP_TRANSFORM)
    pred, proba, _ = library_outputs(m, Z)
    assert_same(pred, q.predict(Z))
    if proba is not None:
        assert_same(proba, q.predict_proba(Z))


# -- one-hot categorical features ----------------------------------------------------------------
def test_cityhash_matches_catboost():
    """treecomp.categories.cityhash64 is the CityHash64 catboost links: checked on catboost's
    own 64-bit group-id hash (the same function over the same bytes) for every length branch."""
    from treecomp.categories import cityhash64
    rng = np.random.default_rng(3)
    alphabet = list("abcXYZ-_ \u00e9\u4e2d\x00")  # no digits: a number is a group id as it is
    vals = [""] + ["".join(rng.choice(alphabet, k)) for k in list(range(1, 140)) + [200, 257, 1000]]
    want = cb.Pool(np.zeros((len(vals), 1)), group_id=vals).get_group_id_hash()
    got = np.array([cityhash64(v.encode("utf-8")) for v in vals], np.uint64)
    np.testing.assert_array_equal(got, want)


def test_onehot_encoding_used():
    """The one-hot models split on both categorical columns, and unseen categories reach
    those splits (so the bit-exact tests above can fail)."""
    for name in ONEHOT:
        m = model(name)
        f = treecomp.parse(m)
        assert [c for c, h in f.category_hashes if h] == [1, 2] and f.stats()["categorical"]
        raw = cb.CatBoost.predict(m, onehot_rows(f)[:50], prediction_type="RawFormulaVal")
        assert len(np.unique(raw, axis=0)) > 5


@pytest.mark.parametrize("name", ["onehot_logloss", "onehot_depthwise"])
def test_onehot_files(name, tmp_path):
    """.cbm and JSON files predict as catboost does after loading them (treecomp reads them
    without catboost); the IR file, a .so and an arrays artifact carry the encoding."""
    import pickle
    m = model(name)
    T = onehot_rows(treecomp.parse(m), seed=2)
    cls = type(m)
    for fmt in ("cbm", "json"):
        path = tmp_path / f"m.{fmt}"
        m.save_model(str(path), format=fmt)
        loaded = cls()
        loaded.load_model(str(path), format=fmt)
        f = treecomp.parse(path)
        assert f.category_hashes == treecomp.parse(m).category_hashes
        assert_same(loaded.predict(T), interp.predict(f, T))
        assert_same(cb.CatBoost.predict(loaded, T, prediction_type="RawFormulaVal"),
                    interp.decision_function(f, T))
    f = treecomp.parse(m)
    f.save(tmp_path / "m.tcir")
    g = treecomp.parse(tmp_path / "m.tcir")
    assert g.category_hashes == f.category_hashes and g.digest() == f.digest()
    want = m.predict(T)
    for backend, ext in (("c", "so"), ("arrays", "tc")):
        p = treecomp.compile(f, backend=backend)
        p.save(tmp_path / f"m.{ext}")
        q = treecomp.load(tmp_path / f"m.{ext}")
        assert q.head.category_hashes == f.category_hashes
        assert_same(want, q.predict(T))
        assert_same(want, pickle.loads(pickle.dumps(p)).predict(T))


def test_onehot_inputs():
    """Values as catboost's Python package reads them: ints of any numpy type and bools by their
    decimal form (True is "1"), bytes as UTF-8, pandas category / string columns by value; a
    float anywhere in a categorical column is refused as catboost refuses it."""
    pd = pytest.importorskip("pandas")
    Xi = CRNG.integers(-3, 4, size=(CN, 2))
    yi = (Xi[:, 0] == 1) * 2.0 - (Xi[:, 1] == -3) + 0.5 * (Xi[:, 0] == 0)
    m = cb.CatBoostRegressor(**OH).fit(Xi, yi, cat_features=[0, 1])  # an int array: categories only
    f = treecomp.parse(m)
    p = treecomp.compile(f, backend="arrays")
    Ti = np.vstack([Xi, [[9, -9], [1, -3], [0, 0]]])
    for T in (Ti, Ti.astype(np.int32), Ti.astype(np.int16)):
        assert_same(m.predict(T), p.predict(T))
    Tb = np.array([[True, False], [False, True], [1, 0]], dtype=object)
    assert_same(m.predict(Tb), p.predict(Tb))
    assert_same(m.predict(Tb.astype(bool)), p.predict(Tb.astype(bool)))
    Ts = np.array([["1", "-3"], ["0", "0"], ["01", "x"]])  # numpy str: hashed as strings
    assert_same(m.predict(Ts), p.predict(Ts))
    assert_same(m.predict([[b"1", b"-3"]]), p.predict([[b"1", b"-3"]]))
    for bad in ([[1.0, 2]], [[np.nan, 2]], [[None, 2]], np.array([[1.0, 2.0]])):
        with pytest.raises(Exception):
            m.predict(bad)
        with pytest.raises(TypeError, match="categorical"):
            p.predict(bad)
    # DataFrames: names checked, category / string / object columns by value
    df = pd.DataFrame({"num": [float(v) if v == v else np.nan for v in XO[:, 0]],
                       "color": XO[:, 1].astype(str), "size": XO[:, 2].astype(np.int64)})
    md = cb.CatBoostClassifier(**OH).fit(df, (YO > 0.3).astype(int), cat_features=["color", "size"])
    pdict = treecomp.compile(md, backend="arrays")
    T = df.copy()
    T.loc[:9, "color"] = "purple"
    assert len(T) > categories.SMALL_FRAME  # big frames column by column, small ones as objects
    for frame in (T, T.astype({"color": "category", "size": "category"}), T.astype({"color": "string"})):
        assert_same(md.predict_proba(frame), pdict.predict_proba(frame))
        for small in (frame.iloc[:1], frame.iloc[5:12], frame.iloc[:categories.SMALL_FRAME]):
            assert_same(md.predict_proba(small), pdict.predict_proba(small))
    with pytest.raises(ValueError, match="column names"):
        pdict.predict(T[["color", "num", "size"]])
    for frame in (T.astype({"size": np.float64}), T.astype({"size": np.float64}).iloc[:2]):
        with pytest.raises(TypeError, match="categorical"):
            pdict.predict(frame)
    with pytest.raises(TypeError, match="categorical"):  # a missing string category
        pdict.predict(T.iloc[:2].astype({"color": object}).assign(color=[None, "red"]))

    class Frame:  # a pandas-like frame without .iloc (polars): read through its pandas form
        def __init__(self, df, convertible):
            self.columns, self.df = df.columns, df
            if convertible:
                self.to_pandas = lambda: df

        def to_numpy(self, *a, **k):
            return self.df.to_numpy(*a, **k)

    assert_same(md.predict(T), pdict.predict(Frame(T, True)))
    with pytest.raises(TypeError, match="pandas DataFrame"):
        pdict.predict(Frame(T, False))


def test_onehot_hostile(tmp_path):
    """Corrupt one-hot data: an InvalidModelError (or UnsupportedModelError), never a crash or
    a silently different model."""
    m = model("onehot_logloss")
    m.save_model(str(tmp_path / "m.json"), format="json")
    doc = json.loads((tmp_path / "m.json").read_text())
    split = next(s for t in doc["oblivious_trees"] for s in t["splits"] if s["split_type"] == "OneHotFeature")
    edits = {
        "value_mismatch": lambda d, s: s.update(value=s["value"] ^ 1),
        "cat_index_mismatch": lambda d, s: s.update(cat_feature_index=5),
        "values_not_int": lambda d, s: d["features_info"]["categorical_features"][0].update(values=["a"]),
        "value_too_big": lambda d, s: d["features_info"]["categorical_features"][0].update(values=[1 << 33]),
        "type_mismatch": lambda d, s: s.update(split_type="FloatFeature"),
        "flat_clash": lambda d, s: d["features_info"]["categorical_features"][0].update(flat_feature_index=0),
    }
    for name, edit in edits.items():
        d = json.loads(json.dumps(doc))
        s = next(s for t in d["oblivious_trees"] for s in t["splits"] if s == split)
        edit(d, s)
        (tmp_path / f"{name}.json").write_text(json.dumps(d))
        with pytest.raises(InvalidModelError):
            treecomp.parse(tmp_path / f"{name}.json")
    # byte-flipped .cbm files: a clear error or a model, never a crash
    m.save_model(str(tmp_path / "m.cbm"))
    data = (tmp_path / "m.cbm").read_bytes()
    rng = np.random.default_rng(9)
    for i in range(80):
        b = bytearray(data)
        for _ in range(int(rng.integers(1, 4))):
            b[int(rng.integers(8, len(b)))] = int(rng.integers(0, 256))
        (tmp_path / "x.cbm").write_bytes(bytes(b))
        try:
            treecomp.parse(tmp_path / "x.cbm")
        except (InvalidModelError, UnsupportedModelError):
            pass
    # the IR's own checks of the encoding
    f = treecomp.parse(m)
    for bad in ([[9, [1]]], [[1, [1, 1]]], [[1, [-1]]], [[1, [1 << 32]]], [[1, [1]], [1, [2]]], [["a", [1]]], 5):
        with pytest.raises(InvalidModelError, match="category_hashes"):
            f.replace(category_hashes=bad)
    # ... and an artifact's: its embedded description is checked when it is loaded
    from treecomp.ir import Head, head_of
    meta = json.loads(head_of(f).to_json())
    assert meta["category_hashes"] == [[c, list(h)] for c, h in f.category_hashes]
    for bad in ([[9, [1]]], [[1, "ab"]], {"1": [1]}):
        with pytest.raises(InvalidModelError, match="category_hashes"):
            Head.from_json(json.dumps(dict(meta, category_hashes=bad)))


def _relisted(doc: dict, cat: int, order: list[int]) -> dict:
    """`doc` with categorical feature `cat`'s one-hot values listed in `order` (positions in the
    original list, repeats allowed) and every one-hot split on it moved to its value's first
    new position, so split_index, value and the list stay consistent (catboost reads the
    split_index; treecomp checks the value against it)."""
    d = json.loads(json.dumps(doc))
    feats = d["features_info"]["categorical_features"]
    old = feats[cat]["values"]
    feats[cat]["values"] = [old[i] for i in order]
    # bin features: every float border, then the one-hot values feature by feature
    start = sum(len(f["borders"]) for f in d["features_info"].get("float_features", []))
    starts, pos = {}, start
    for i, f in enumerate(feats):
        if f.get("values"):
            starts[i] = pos
            pos += len(f["values"])
    old_starts, pos = {}, start
    for i, f in enumerate(json.loads(json.dumps(doc))["features_info"]["categorical_features"]):
        if f.get("values"):
            old_starts[i] = pos
            pos += len(f["values"])

    def move(s):
        if s.get("split_type") == "FloatFeature":
            return
        k = s["split_index"]
        for i in sorted(old_starts, reverse=True):
            if k >= old_starts[i]:
                off = k - old_starts[i]
                s["split_index"] = starts[i] + (order.index(off) if i == cat else off)
                return

    for t in d["oblivious_trees"]:
        for s in t["splits"] or []:
            move(s)
    return d


@pytest.mark.parametrize("order", [[0, 1, 2, 3, 4, 0], [0, 1, 2, 3, 4, 1, 1],
                                   [0, 0, 1, 2, 3, 4], [0, 1, 0, 2, 3, 4],
                                   [2, 0, 1, 2, 3, 4, 3, 0], [4, 3, 2, 1, 0, 3]])
def test_onehot_value_listed_twice(order, tmp_path):
    """A one-hot value listed more than once: CatBoost binarises a row as the OR of
    (position + 1) over its value's positions and a split fires on an equal byte, so the
    value's rows may meet no split of theirs, or another value's (1 | 2 == 3): as catboost
    predicts from the JSON file and from the .cbm it saves of it."""
    m = cb.CatBoostRegressor(**OH).fit(XO, YO, cat_features=[1, 2])
    m.save_model(str(tmp_path / "m.json"), format="json")
    doc = json.loads((tmp_path / "m.json").read_text())
    cat = next(i for i, f in enumerate(doc["features_info"]["categorical_features"])
               if len(f.get("values", [])) == 5)
    path = tmp_path / "dup.json"
    path.write_text(json.dumps(_relisted(doc, cat, order)))
    loaded = cb.CatBoostRegressor()
    loaded.load_model(str(path), format="json")
    loaded.save_model(str(tmp_path / "dup.cbm"))
    f = treecomp.parse(m)
    T = onehot_rows(f, seed=3)
    want = loaded.predict(T)
    assert not np.array_equal(want, m.predict(T))  # the repeat changes catboost's answers
    for src in (path, tmp_path / "dup.cbm"):
        g = treecomp.parse(src)
        assert_same(want, interp.predict(g, T))
        assert_same(want, treecomp.compile(g, backend="arrays").predict(T))


def test_tree_without_splits_null_in_json(tmp_path):
    """CatBoost writes an oblivious tree without splits as "splits": null (and reads null, or
    no "splits" at all, as none): read as a one-leaf tree."""
    m = cb.CatBoostRegressor(**BASE).fit(X, X0[:, 0] * 2 + X0[:, 2])
    m.save_model(str(tmp_path / "m.json"), format="json")
    doc = json.loads((tmp_path / "m.json").read_text())
    doc["oblivious_trees"][1].update(splits=[], leaf_values=[0.25], leaf_weights=[10])
    (tmp_path / "empty.json").write_text(json.dumps(doc))
    loaded = cb.CatBoostRegressor()
    loaded.load_model(str(tmp_path / "empty.json"), format="json")
    loaded.save_model(str(tmp_path / "null.json"), format="json")
    assert json.loads((tmp_path / "null.json").read_text())["oblivious_trees"][1]["splits"] is None
    del doc["oblivious_trees"][1]["splits"]
    (tmp_path / "absent.json").write_text(json.dumps(doc))
    for name in ("empty", "null", "absent"):
        path = tmp_path / f"{name}.json"
        lib = cb.CatBoostRegressor()
        lib.load_model(str(path), format="json")
        f = treecomp.parse(path)
        assert f.trees[1].n_nodes == 1
        assert_same(lib.predict(X), interp.predict(f, X))
