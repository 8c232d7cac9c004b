"""XGBoost frontend: bit-exact differential tests against the installed xgboost (3.2.0).

Every zoo case is compared (values and dtype) on its rows and on threshold-edge rows, parsed from
the live object and, for file cases, from the file. Further tests pin the float32 transforms of
treecomp.outputs against XGBoost itself (sigmoid, exp, softmax over hundreds of thousands of
margins fed through ``base_margin``), glibc's expf, categorical corner values, base_score
forms, node renumbering, deep trees, parse speed, the UBJSON decoder (including truncated and
corrupted input) and the errors.

XGBClassifier(objective="multi:softmax").predict_proba is scipy.special.softmax over float32
margins (numpy's SIMD float32 exp and row sum), not XGBoost's softmax: bit-exact too (the Forest's
exp_lib "numpy").
"""

from __future__ import annotations

import ctypes
import ctypes.util
import json
import platform
import struct
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

xgb = pytest.importorskip("xgboost")

import treecomp  # noqa: E402
from treecomp import interp, numparse, outputs  # noqa: E402
from treecomp.errors import InvalidModelError, NotFittedError, UnsupportedModelError  # noqa: E402
from treecomp.frontends import ubjson  # noqa: E402
from treecomp.frontends.xgboost import forest_from_document, parse_xgboost_file  # noqa: E402
from tests import zoo  # noqa: E402
from tests.edge import edge_rows  # noqa: E402
from tests.zoo_xgboost import _X, _labels, tmpdir, train  # noqa: E402

OURS = {"predict": interp.predict, "predict_proba": interp.predict_proba,
        "raw": interp.decision_function}
F32 = np.float32


def assert_same(want, got):
    want, got = np.asarray(want), np.asarray(got)
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, got.shape, want.dtype, want.shape)
    np.testing.assert_array_equal(got, want, strict=True)


def doc_of(b: xgb.Booster) -> dict:
    return json.loads(b.save_raw("json"))


def booster_from_doc(doc: dict) -> xgb.Booster:
    b = xgb.Booster({"nthread": 1})
    b.load_model(bytearray(json.dumps(doc).encode()))
    return b


def write_json(doc: dict, name: str) -> Path:
    p = tmpdir() / name
    p.write_text(json.dumps(doc))
    return p


# -- the zoo ----------------------------------------------------------------------------------
@pytest.mark.parametrize("name", zoo.names("xgboost"))
def test_zoo_case_bit_exact(name):
    case = zoo.get(name)
    f = treecomp.parse(case.model)
    assert (f.input_dtype, f.comparison, f.accumulate_dtype) == ("float32", "<", "float32")
    X = np.vstack([case.X, edge_rows(f, case.X, n=150, seed=1)])
    forests = [f]
    if case.path:
        fp = treecomp.parse(case.path)
        assert fp.digest() == f.digest()
        forests.append(fp)
    for key, lib in case.library.items():
        want = lib(X)
        for forest in forests:
            assert_same(want, OURS[key](forest, X))


def _forest(name: str):
    case = zoo.get(f"xgboost:{name}")
    return case, treecomp.parse(case.model)


def test_zoo_covers_what_it_claims():
    forests = {n.split(":")[1]: treecomp.parse(zoo.get(n).model) for n in zoo.names("xgboost")}
    assert {f.transform for f in forests.values()} == {"identity", "sigmoid", "exp", "exp64", "softmax"}
    assert {f.decision for f in forests.values()} == {"none", "raw_gt_0", "argmax_raw",
                                                      "proba_gt_half", "argmax_proba"}
    # categorical: 40 categories need two-word bitsets
    cat = forests["categorical"]
    assert cat.stats()["categorical"] and max(t.cat_bits.shape[1] for t in cat.trees) == 2
    assert forests["categorical_onehot_multiclass"].stats()["categorical"]
    assert forests["file_ubj_categorical_dart"].stats()["categorical"]
    assert all(t.n_nodes == 1 for t in forests["single_leaf_trees"].trees)
    assert forests["multi_target"].n_outputs == 2 and forests["reg_quantileerror_multi"].n_outputs == 3
    assert forests["feature_names"].feature_names == tuple(f"col_{i}" for i in range(5))
    # pruning left deleted (orphan) nodes that the parser dropped
    doc = doc_of(zoo.get("xgboost:pruned_exact").model)
    trees = doc["learner"]["gradient_booster"]["model"]["trees"]
    assert sum(int(t["tree_param"]["num_deleted"]) for t in trees) > 0
    assert sum(t.n_nodes for t in forests["pruned_exact"].trees) < sum(len(t["left_children"]) for t in trees)
    # random forests: several trees per iteration
    assert doc_of(zoo.get("xgboost:random_forest_booster").model)["learner"]["gradient_booster"][
        "model"]["gbtree_model_param"]["num_parallel_tree"] == "4"
    # DART weights really scale, and the two ways of adding DART trees really differ
    case, f = _forest("dart_booster")
    w = doc_of(case.model)["learner"]["gradient_booster"]["weight_drop"]
    assert min(w) < 1.0
    b = case.model
    X = case.X[~np.isinf(case.X).any(axis=1)]  # DMatrix refuses inf
    dm = b.predict(xgb.DMatrix(X, nthread=1), output_margin=True)
    inplace = b.inplace_predict(X, predict_type="margin")
    assert not np.array_equal(dm, inplace)
    # early stopping cut trees, and the wrappers predict with best_iteration
    for name, k in (("early_stopping_regressor", 1), ("early_stopping_multiclass", 3)):
        case, f = _forest(name)
        m = case.model
        assert 0 <= m.best_iteration < m.get_booster().num_boosted_rounds() - 1
        assert f.n_trees == (m.best_iteration + 1) * k
        full = m.predict(case.X, output_margin=True, iteration_range=(0, m.get_booster().num_boosted_rounds()))
        assert not np.array_equal(full, interp.decision_function(f, case.X))
    # a Booster ignores best_iteration, as Booster.predict does
    b = zoo.get("xgboost:early_stopping_regressor").model.get_booster()
    assert treecomp.parse(b).n_trees == b.num_boosted_rounds()
    # files: the plain base_score form, and a file that remembers its sklearn wrapper
    case = zoo.get("xgboost:file_json_plain_base_score")
    assert json.loads(Path(case.path).read_text())["learner"]["learner_model_param"]["base_score"] == "0.3"
    case = zoo.get("xgboost:file_ubj_wrapper_early_stopping")
    fp = treecomp.parse(case.path)
    assert fp.decision == "argmax_proba" and fp.classes[0].dtype == np.int64
    assert fp.n_trees < len(ubjson.decode(Path(case.path).read_bytes())["learner"]["gradient_booster"]["model"]["trees"])


def test_booster_inplace_predict_takes_inf_like_the_forest():
    """DMatrix refuses inf; inplace_predict (gbtree: same arithmetic) takes it as it is."""
    for name in ("reg_squarederror", "binary_logistic", "multi_softprob", "categorical"):
        case, f = _forest(name)
        X = np.vstack([case.X, edge_rows(f, case.X, n=150, seed=2)])
        assert np.isinf(X).any()
        assert_same(case.model.inplace_predict(X), interp.predict(f, X))
        assert_same(case.model.inplace_predict(X, predict_type="margin"), interp.decision_function(f, X))


@pytest.mark.parametrize("k", [3, 11])
def test_softmax_classifier_predict_proba_is_scipys(k, tmp_path):
    """XGBClassifier(objective="multi:softmax").predict_proba is scipy.special.softmax of the
    float32 margins (numpy's float32 exp, numpy's row sum: pairwise from 8 classes), which
    differs from XGBoost's softmax in the last bits for a third of the values: bit for bit through
    the interpreter and every backend, a single row, and the file the wrapper saves."""
    X = _X(61, n=400)
    y = np.arange(len(X)) % k
    m = xgb.XGBClassifier(objective="multi:softmax", n_estimators=4, max_depth=3, n_jobs=1,
                          random_state=7).fit(X, y)
    f = treecomp.parse(m)
    assert f.exp_lib == "numpy"
    X = np.vstack([X, edge_rows(f, X, n=200, seed=3)])
    want = m.predict_proba(X)
    xgb_softmax = outputs.transform(f.replace(exp_lib="libm"), m.predict(X, output_margin=True))
    assert (want != xgb_softmax).any()  # else this test could not tell the two softmaxes apart
    assert_same(want, interp.predict_proba(f, X))
    m.save_model(tmp_path / "m.json")
    for backend in ("arrays", "c", "llvm"):
        p = treecomp.compile(f, backend=backend)
        assert_same(want, p.predict_proba(X))
        assert_same(want[:1], p.predict_proba(X[:1]))
    assert_same(want, treecomp.compile(tmp_path / "m.json").predict_proba(X))


# -- float32 transforms (treecomp.outputs) against XGBoost ---------------------------------------
def _zero_tree_booster(objective: str, **params) -> xgb.Booster:
    """eta=0: every leaf adds +/-0, so the margin is exactly the base_margin passed in."""
    X = _X(50, n=60)
    y = _labels(objective if objective != "multi:softprob" else "reg:squarederror", X, 50)
    if objective == "multi:softprob":
        y = (np.arange(60) % params["num_class"]).astype(float)
    return train({"objective": objective, "eta": 0.0, "max_depth": 1, **params}, X, y, 1)


def _margins(rng, n: int) -> np.ndarray:
    specials = np.array([0.0, -0.0, 88.7, -88.7, 88.72, -88.72, 88.73, 89.0, -89.0, -103.9,
                         -104.0, -110.0, 1e-8, -1e-8, 1e-30, 0.5, -0.5, 20.0, -20.0], F32)
    return np.concatenate([specials, rng.uniform(-120, 120, n).astype(F32),
                           rng.normal(0, 4, n).astype(F32), rng.uniform(-1e-3, 1e-3, n).astype(F32)])


@pytest.mark.parametrize("n_features,depth", [(12, 6), (30, 8)])
def test_missing_values_in_deep_trees(n_features, depth):
    """Hist trees over features with missing values: nodes send NaN both ways and features reach
    XGBoost's 256 thresholds, so the arrays backend's byte walk merges each feature's two NaN
    columns for its column mux (arrays_derived.merge_nan_columns); bit-exact against inplace_predict
    on rows with NaN in every feature, +-inf and threshold-edge values."""
    rng = np.random.default_rng(5)
    X = rng.normal(size=(3000, n_features)).astype(F32)
    y = X[:, 0] * 2 + np.sin(X[:, 1] * 3) + X[:, 2] * X[:, 3] + rng.normal(size=3000) * 0.1
    X[rng.random(X.shape) < 0.1] = np.nan
    m = xgb.XGBRegressor(n_estimators=12, max_depth=depth, tree_method="hist", max_bin=256,
                         n_jobs=1, random_state=7).fit(X, y)
    f = treecomp.frontends.parse(m)
    Xt = np.vstack([X[:400], edge_rows(f, X, n=200, seed=3)])
    Xt[rng.random(Xt.shape) < 0.05] = np.nan
    p = treecomp.compile(m, backend="arrays")
    k = p._kernel
    if k.tables.meta.get("quant") and getattr(k, "_struct", None) is not None:
        assert k._struct.q_cnan == 1 and k._struct.q_cmux > 0
    want = m.get_booster().inplace_predict(Xt, predict_type="margin")
    assert_same(want, p.decision_function(Xt))
    assert_same(m.predict(Xt), p.predict(Xt))


@pytest.mark.parametrize("objective,transform", [("binary:logistic", "sigmoid"),
                                                 ("count:poisson", "exp")])
def test_float32_sigmoid_and_exp_match_xgboost(objective, transform):
    b = _zero_tree_booster(objective)
    m = _margins(np.random.default_rng(1), 100_000)
    d = xgb.DMatrix(np.zeros((len(m), 5)), base_margin=m, nthread=1)
    assert_same(m, b.predict(d, output_margin=True))
    f = treecomp.parse(b).replace(base_score=np.zeros(1), transform=transform)
    assert_same(b.predict(d), outputs.transform(f, m[:, None])[:, 0])


@pytest.mark.parametrize("k", [2, 3, 5, 9])
def test_float32_softmax_matches_xgboost(k):
    rng = np.random.default_rng(k)
    b = _zero_tree_booster("multi:softprob", num_class=k)
    M = (rng.normal(0, 4, (60_000, k)) * rng.choice([0.01, 1.0, 10.0, 40.0], (60_000, 1))).astype(F32)
    d = xgb.DMatrix(np.zeros((len(M), 5)), base_margin=M, nthread=1)
    assert_same(M, b.predict(d, output_margin=True))
    assert_same(b.predict(d), outputs.transform(treecomp.parse(b), M))


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="replicates glibc's expf")
def test_expf_is_glibc_expf():
    libm = ctypes.CDLL(ctypes.util.find_library("m"))
    expf = libm.expf
    expf.restype, expf.argtypes = ctypes.c_float, [ctypes.c_float]
    rng = np.random.default_rng(5)
    hard = np.array([float.fromhex(h) for h in ("0x1.fefe02p-16", "0x1.5b3c52p-14", "0x1.cd3982p-14",
                                                "0x1.625856p-13", "0x1.cbd318p-13")], F32)
    x = np.concatenate([hard, rng.uniform(-104, 89, 20_000).astype(F32),
                        rng.uniform(-1e-3, 1e-3, 5_000).astype(F32),
                        np.array([np.inf, -np.inf, np.nan, 0.0, -0.0, 88.72284, 88.72283, -103.97208,
                                  -103.97207, 1e-45, -1e-45], F32)])
    want = np.array([expf(float(v)) for v in x], F32)
    assert_same(want, outputs._expf(x))
    # the scalar transcription (tiny inputs: the single-row path) gives the same bits
    assert_same(want, np.array([outputs._expf_scalar(float(v)) for v in x], F32))
    assert_same(want[:3], outputs._expf(x[:3]))
    # the sigmoid's single-row path (Python floats rounded to float32 per operation)
    m = np.concatenate([x, -x, np.array([-88.7, -88.71, 88.7, 1e-9, -1e-9, 17.0], F32)])
    assert_same(outputs._sigmoid_f32(m), np.array([outputs._sigmoid_f32(m[i:i + 1])[0]
                                                   for i in range(len(m))], F32))
    # the inputs where glibc's expf is not the correctly rounded result
    rounded = np.exp(hard.astype(np.float64)).astype(F32)
    assert np.all(rounded != outputs._expf(hard))


# -- semantics pinned on purpose -----------------------------------------------------------------
def test_categorical_invalid_and_unlisted_values_go_left():
    case, f = _forest("categorical")
    b = case.model
    rows = np.repeat(case.X[:40], 1, axis=0)
    for j in (0, 3):
        def at(v):
            r = rows.copy()
            r[:, j] = v
            return r
        odd = [-1.0, -0.5, -0.0, 0.0, 0.5, 3.999, 31.0, 32.0, 39.0, 40.0, 63.0, 64.0, 1000.0,
               2.0 ** 24 - 1, 2.0 ** 24, 1e9, 3e38, np.inf, -np.inf, np.nan]
        for v in odd:
            assert_same(b.inplace_predict(at(v)), interp.predict(f, at(v)))
        # pin the claims: invalid values act like an unlisted category, and values truncate
        left = b.inplace_predict(at(-1.0))
        for v in (-0.5, 1000.0, 2.0 ** 24, 1e9, np.inf, -np.inf):
            assert_same(left, b.inplace_predict(at(v)))
        assert_same(b.inplace_predict(at(0.0)), b.inplace_predict(at(0.5)))
        assert_same(b.inplace_predict(at(0.0)), b.inplace_predict(at(-0.0)))
        assert_same(b.inplace_predict(at(3.0)), b.inplace_predict(at(3.999)))


def test_base_score_forms_and_links():
    X = _X(51, n=80)
    for objective, value, margin in [
            ("binary:logistic", 0.3, lambda v: -np.log(F32(1) / F32(v) - F32(1))),
            ("count:poisson", 2.5, lambda v: np.log(F32(v))),
            ("reg:squarederror", 0.7, lambda v: F32(v))]:
        b = train({"objective": objective, "base_score": value, "eta": 0.0}, X,
                  _labels(objective, X, 51), 1)
        doc = doc_of(b)
        lmp = doc["learner"]["learner_model_param"]
        assert lmp["base_score"].startswith("[")
        want = b.predict(xgb.DMatrix(X[:1], nthread=1), output_margin=True)[0]
        f = forest_from_document(doc)
        assert F32(f.base_score[0]) == want
        assert abs(float(want) - float(margin(value))) < 1e-6
        lmp["base_score"] = repr(value)  # the pre-2.1 form
        assert forest_from_document(doc).digest() == f.digest()
    # multi:softprob: one value per class, added as it is
    b = zoo.get("xgboost:multi_softprob").model
    doc = doc_of(b)
    stored = json.loads(doc["learner"]["learner_model_param"]["base_score"])
    assert len(stored) == 4
    assert_same(np.array(stored, F32), treecomp.parse(b).base_score.astype(F32))
    for bad in ("[abc]", "[]", "nan", "[1,2]"):
        doc["learner"]["learner_model_param"]["base_score"] = bad
        with pytest.raises(InvalidModelError):
            forest_from_document(doc)


def test_pre_2_document_layout():
    """Documents from XGBoost 1.x: no iteration_indptr (trees per iteration from
    num_parallel_tree * groups), no split_type / categories, default_left as booleans,
    size_leaf_vector "0", a plain-number base_score."""
    m = zoo.get("xgboost:early_stopping_multiclass").model
    doc = doc_of(m.get_booster())
    doc["learner"]["attributes"]["scikit_learn"] = '{"_estimator_type": "classifier"}'
    want = treecomp.parse(write_json(doc, "new_layout.json"))
    assert want.n_trees == 3 * (m.best_iteration + 1)
    doc["version"] = [1, 7, 6]
    model = doc["learner"]["gradient_booster"]["model"]
    del model["iteration_indptr"], model["cats"]
    for t in model["trees"]:
        for k in ("split_type", "categories", "categories_nodes", "categories_segments",
                  "categories_sizes"):
            del t[k]
        t["default_left"] = [bool(v) for v in t["default_left"]]
        t["tree_param"]["size_leaf_vector"] = "0"
    assert treecomp.parse(write_json(doc, "old_layout.json")).digest() == want.digest()
    lmp = doc["learner"]["learner_model_param"]
    lmp["base_score"] = "0.5"
    f = treecomp.parse(write_json(doc, "old_base.json"))
    assert_same(np.full(3, 0.5), f.base_score)


def _tree_doc(b: xgb.Booster) -> tuple[dict, dict]:
    doc = doc_of(b)
    return doc, doc["learner"]["gradient_booster"]["model"]["trees"][0]


_NODE_KEYS = ("left_children", "right_children", "parents", "split_indices", "split_conditions",
              "default_left", "split_type", "base_weights", "loss_changes", "sum_hessian")


def test_nodes_in_any_order_are_renumbered():
    """Children with smaller ids than their parents (legal for XGBoost) parse the same."""
    X = _X(52)
    b = train({"objective": "reg:squarederror", "max_depth": 4}, X, _labels("reg:squarederror", X, 52), 1)
    doc, t = _tree_doc(b)
    n = len(t["left_children"])
    perm = np.r_[0, np.arange(n - 1, 0, -1)]  # new id -> old id (root stays 0)
    old_to_new = np.argsort(perm)
    remap = lambda a: [int(old_to_new[c]) if c >= 0 else int(c) for c in a]  # noqa: E731
    for k in _NODE_KEYS:
        t[k] = [t[k][int(o)] for o in perm]
    t["left_children"], t["right_children"] = remap(t["left_children"]), remap(t["right_children"])
    t["parents"] = [p if p == 2147483647 else int(old_to_new[p]) for p in t["parents"]]
    assert any(l >= 0 and l < i for i, l in enumerate(t["left_children"]))
    b2 = booster_from_doc(doc)
    f = forest_from_document(doc)
    R = np.vstack([X, edge_rows(f, X, n=200, seed=4)])
    assert_same(b2.inplace_predict(R), interp.predict(f, R))
    assert_same(b.inplace_predict(R), interp.predict(f, R))


def _chain_doc(depth: int) -> dict:
    """A hand-built tree: node 2i splits x0 < i; its left child is a leaf, its right the next."""
    X = _X(53, n=50, d=2)
    doc, _ = _tree_doc(train({"objective": "reg:squarederror"}, X, X[:, 0], 1))
    n = 2 * depth + 1
    left, right, cond, feat, parents = [-1] * n, [-1] * n, [0.0] * n, [0] * n, [2147483647] * n
    for i in range(depth):
        node = 2 * i
        left[node], right[node], cond[node] = node + 1, node + 2, float(i)
        parents[node + 1] = parents[node + 2] = node
        cond[node + 1] = float(i) * 0.5 + 0.25  # leaf value
    cond[n - 1] = -1.0
    t = {"base_weights": [0.0] * n, "categories": [], "categories_nodes": [],
         "categories_segments": [], "categories_sizes": [], "default_left": [1] * n, "id": 0,
         "left_children": left, "loss_changes": [0.0] * n, "parents": parents,
         "right_children": right, "split_conditions": cond, "split_indices": feat,
         "split_type": [0] * n, "sum_hessian": [1.0] * n,
         "tree_param": {"num_deleted": "0", "num_feature": "2", "num_nodes": str(n),
                        "size_leaf_vector": "1"}}
    model = doc["learner"]["gradient_booster"]["model"]
    model["trees"] = [t]
    return doc


def test_deep_tree_no_recursion():
    doc = _chain_doc(3000)
    t0 = time.thread_time()  # CPU time: a loaded machine's descheduling does not count
    f = forest_from_document(doc)
    assert time.thread_time() - t0 < 2.0
    assert f.trees[0].max_depth == 3000
    b = booster_from_doc(doc)
    R = np.c_[np.r_[np.arange(-1, 3001) - 0.5, np.nan, np.inf], np.zeros(3004)]
    assert_same(b.inplace_predict(R), interp.predict(f, R))


def test_thousand_trees_parse_fast():
    X = _X(54)
    b = train({"objective": "multi:softprob", "num_class": 4, "max_depth": 6}, X,
              (np.arange(len(X)) % 4).astype(float), 5)
    doc = doc_of(b)
    model = doc["learner"]["gradient_booster"]["model"]
    trees = model["trees"]
    model["trees"] = [dict(trees[i % len(trees)], id=i) for i in range(1000)]
    model["tree_info"] = [i % 4 for i in range(1000)]
    model["iteration_indptr"] = list(range(0, 1001, 4))
    model["gbtree_model_param"]["num_trees"] = "1000"
    p = write_json(doc, "thousand.json")
    t0 = time.thread_time()  # CPU time: a loaded machine's descheduling does not count
    f = treecomp.parse(p)
    elapsed = time.thread_time() - t0
    assert f.n_trees == 1000 and elapsed < 3.0, elapsed
    b2 = xgb.Booster({"nthread": 1}, model_file=str(p))
    assert_same(b2.inplace_predict(X[:50]), interp.predict(f, X[:50]))


def test_file_parsing_does_not_import_xgboost():
    paths = [zoo.get("xgboost:file_json_multiclass").path,
             zoo.get("xgboost:file_ubj_categorical_dart").path]
    want = [treecomp.parse(p).digest() for p in paths]
    code = ("import sys; sys.modules['xgboost'] = None\n"
            "import treecomp\n"
            f"print(*[treecomp.parse(p).digest() for p in {paths!r}])\n"
            "assert sys.modules['xgboost'] is None\n")
    root = Path(__file__).resolve().parent.parent
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=root,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == want


# -- UBJSON ----------------------------------------------------------------------------------
def _u8(s: str) -> bytes:
    b = s.encode()
    return b"U" + bytes([len(b)]) + b


@pytest.fixture(params=["native", "python"])
def ubj_way(request, monkeypatch):
    """Each test that takes it runs twice: with treecomp.numparse's C decoder first (where it
    is built), and with ubjson's Python decoder only (ubjson.NATIVE = False)."""
    if request.param == "native" and not numparse.available():
        pytest.skip(f"the native parser is not built: {numparse.UNAVAILABLE}")
    monkeypatch.setattr(ubjson, "NATIVE", request.param == "native")
    return request.param


def _canon(v):
    """A decoded UBJSON value as a comparable structure: types, float bits, arrays' dtype,
    shape, bytes and writeability (pickle's bytes would also tell shared key objects apart)."""
    if isinstance(v, np.ndarray):
        return ("a", v.dtype.str, v.shape, v.tobytes(), v.flags.writeable)
    if isinstance(v, dict):
        return ("o", [(k, _canon(x)) for k, x in v.items()])
    if isinstance(v, list):
        return ("l", [_canon(x) for x in v])
    if isinstance(v, float):
        return ("f", struct.pack(">d", v))
    return (type(v).__name__, v)


def test_ubjson_scalars_and_containers(ubj_way):
    cases = [
        (b"Z", None), (b"T", True), (b"F", False), (b"NNi\x85", -123), (b"U\xff", 255),
        (b"I\x80\x00", -32768), (b"l\x00\x00\x01\x00", 256), (b"L\xff\xff\xff\xff\xff\xff\xff\xfe", -2),
        (b"d" + struct.pack(">f", 1.5), 1.5), (b"D" + struct.pack(">d", -2.25), -2.25),
        (b"CA", "A"), (b"S" + _u8("h\u00e9llo"), "h\u00e9llo"), (b"H" + _u8("12345678901234567890"),
                                                              12345678901234567890),
        (b"H" + _u8("3.25"), 3.25),
        (b"[i\x01Si\x03abc[]{}]", [1, "abc", [], {}]),
        (b"[#U\x02i\x01Z", [1, None]),
        (b"{U\x01ai\x01U\x01b[TF]N}", {"a": 1, "b": [True, False]}),
        (b"{#U\x02U\x01aZU\x01b{}", {"a": None, "b": {}}),
        (b"{$i#U\x02U\x01a\x01U\x01b\xff", {"a": 1, "b": -1}),
        (b"[$T#U\x03", [True, True, True]),
        (b"[$S#U\x02U\x01xU\x02yz", ["x", "yz"]),
        (b"[$C#U\x02ab", ["a", "b"]),
    ]
    for data, want in cases:
        got = ubjson.decode(data)
        assert got == want and type(got) is type(want), (data, got)


@pytest.mark.parametrize("marker,dtype", [(b"i", ">i1"), (b"U", ">u1"), (b"I", ">i2"), (b"l", ">i4"),
                                          (b"L", ">i8"), (b"d", ">f4"), (b"D", ">f8")])
def test_ubjson_typed_arrays_are_native_numpy(marker, dtype, ubj_way):
    vals = np.array([0, 1, 2, 100, 127], dtype=dtype)
    for data in (b"[$" + marker + b"#U\x05" + vals.tobytes(),
                 b"[$" + marker + b"#L" + (5).to_bytes(8, "big") + vals.tobytes()):
        for got in (ubjson.decode(data), ubjson.decode(b"{U\x01a" + data + b"}")["a"],
                    ubjson.decode(b"[" + data + data + b"]")[1]):
            assert isinstance(got, np.ndarray) and got.dtype == np.dtype(dtype).newbyteorder("=")
            assert not got.flags.writeable and (got.base is None or not got.base.flags.writeable)
            assert_same(vals.astype(got.dtype), got)
    assert ubjson.decode(b"[$d#U\x00").shape == (0,)


def test_ubjson_matches_json_for_a_real_model():
    case = zoo.get("xgboost:file_ubj_categorical_dart")
    b = case.model
    from_ubj = ubjson.decode(bytes(b.save_raw("ubj")))
    assert forest_from_document(from_ubj).digest() == forest_from_document(doc_of(b)).digest()
    t_ubj = from_ubj["learner"]["gradient_booster"]["gbtree"]["model"]["trees"][0]
    t_json = doc_of(b)["learner"]["gradient_booster"]["gbtree"]["model"]["trees"][0]
    assert set(t_ubj) == set(t_json)
    assert_same(np.array(t_json["split_conditions"], F32), t_ubj["split_conditions"])


BAD_UBJSON = [
    b"", b"N", b"X", b"i", b"I\x00", b"S", b"SU\x05ab", b"Si\xff", b"SU\x02\xff\xfe", b"C\xc3",
    b"H" + _u8("12x"), b"[", b"[i\x01", b"{U\x01a", b"{U\x01ai\x01", b"{i\x01}", b"[#U\x03i\x01",
    b"[$d#U\x02\x00\x00\x00\x00", b"[$d]", b"[$[#U\x01]", b"[$X#U\x01", b"[#d\x00\x00\x00\x00",
    b"[#L" + (2 ** 62).to_bytes(8, "big"), b"[$D#L" + (2 ** 60).to_bytes(8, "big"),
    b"[$Z#L" + (2 ** 62).to_bytes(8, "big"), b"SL" + (2 ** 62).to_bytes(8, "big"),
    b"[#i\xff", b"i\x01i\x02", b"[]]", b"[" * 100_000, b"{U\x01a" * 10_000,
]


@pytest.mark.parametrize("data", BAD_UBJSON, ids=range(len(BAD_UBJSON)))
def test_ubjson_rejects_corrupt_input(data, ubj_way):
    with pytest.raises(InvalidModelError):
        ubjson.decode(data)


def test_ubjson_truncated_and_mutated_model_files_fail_cleanly():
    """Every prefix and many single-byte mutations: decoded or InvalidModelError, and the
    frontend then gives a Forest or a TreecompError: never another exception, never a hang."""
    data = bytes(zoo.get("xgboost:file_ubj_categorical_dart").model.save_raw("ubj"))
    t0 = time.thread_time()  # CPU time: a hang or blow-up counts, a loaded machine does not
    for k in range(0, len(data), 5):
        with pytest.raises(InvalidModelError):
            ubjson.decode(data[:k])
    rng = np.random.default_rng(0)
    outcomes = {"ok": 0, "invalid": 0, "unsupported": 0}
    for _ in range(400):
        buf = bytearray(data)
        for pos in rng.integers(0, len(buf), rng.integers(1, 4)):
            buf[pos] = int(rng.integers(0, 256))
        try:
            doc = ubjson.decode(bytes(buf))
            forest_from_document(doc)
            outcomes["ok"] += 1
        except InvalidModelError:
            outcomes["invalid"] += 1
        except UnsupportedModelError:
            outcomes["unsupported"] += 1
    assert outcomes["invalid"] > 0 and outcomes["ok"] > 0
    assert time.thread_time() - t0 < 20


def _decode_or_error(data: bytes, strict: bool):
    try:
        v = ubjson.decode(data, strict=strict)
    except InvalidModelError as exc:
        return f"error: {exc}"
    return _canon(v)  # numpy arrays by value, dtype and shape


@pytest.mark.parametrize("strict", [False, True])
def test_ubjson_fast_paths_decode_as_the_general_path(strict, monkeypatch):
    """The decoder's fast paths (typed numeric arrays with an 'L' count, strings with an 'L'
    length) give what the general path gives, value or error message, on every prefix of a
    model file and on seeded mutations of it (counts, lengths, markers, UTF-8)."""
    data = bytes(zoo.get("xgboost:file_ubj_categorical_dart").model.save_raw("ubj"))
    rng = np.random.default_rng(7)
    cases = [data[:k] for k in range(0, len(data), max(1, len(data) // 150))]
    heads = [i for i in range(len(data) - 12) if data[i:i + 2] in (b"[$", b"SL") or
             data[i:i + 1] == b"L"]
    for _ in range(300):
        buf = bytearray(data)
        at = int(rng.choice(heads)) + int(rng.integers(0, 12))  # around an array or a length
        for pos in (at, *rng.integers(0, len(buf), int(rng.integers(0, 2)))):
            buf[min(pos, len(buf) - 1)] = int(rng.choice([0, 1, 0x7F, 0x80, 0xFF, 0x4C, 0x23,
                                                          int(rng.integers(0, 256))]))
        cases.append(bytes(buf))
    fast = [_decode_or_error(c, strict) for c in cases]
    with monkeypatch.context() as m:
        m.setattr(ubjson, "NATIVE", False)                # no C decoder
        m.setattr(ubjson, "_TYPED_DTYPES", {})           # no typed-array fast path
        m.setattr(ubjson, "_INT64", _NoFastLength())      # no string fast path
        slow = [_decode_or_error(c, strict) for c in cases]
    assert fast == slow
    errors = sum(isinstance(f, str) for f in fast)
    assert errors > 100 and len(fast) - errors > 5


def _random_ubjson(rng, strict: bool) -> bytes:
    """A random UBJSON document (seeded): nested objects / arrays (uncounted, counted, typed),
    every scalar marker, keys repeated across objects (the C decoder's groups and key cache),
    and, unless `strict`, the forms only the Python decoder reads (no-ops, 'H', lengths of
    other integer markers, typed arrays of strings, counted objects)."""
    def length(k):
        if strict or rng.random() < 0.5:
            return b"L" + int(k).to_bytes(8, "big", signed=True)
        return b"U" + bytes([k]) if k < 256 else b"l" + int(k).to_bytes(4, "big", signed=True)

    def key():
        k = ["left_children", "split_conditions", "a", "b", "\u00e9t\u00e9", "x" * 70][rng.integers(6)]
        return length(len(k.encode())) + k.encode()

    def value(depth):
        r = rng.random()
        if depth > 3 or r < 0.35:
            c = rng.integers(12)
            if c < 7:
                m = b"iUIlLdD"[c:c + 1]
                size = {b"i": 1, b"U": 1, b"I": 2, b"l": 4, b"L": 8, b"d": 4, b"D": 8}[m]
                return m + rng.bytes(size)
            if c == 7:
                return b"ZTF"[rng.integers(3):][:1]
            if c == 8:
                t = ["", "abc", "\u00fc\u00f1\u00ee", "z" * 100][rng.integers(4)].encode()
                return b"S" + length(len(t)) + t
            if c == 9:
                return b"C" + bytes([rng.integers(0, 128 if not strict else 256)])
            if c == 10 and not strict:
                return b"H" + length(4) + b"1234"
            return b"N" + b"Z" if not strict else b"Z"
        if r < 0.6:
            m = b"iUIlLdD"[rng.integers(7):][:1]
            size = {b"i": 1, b"U": 1, b"I": 2, b"l": 4, b"L": 8, b"d": 4, b"D": 8}[m]
            n = int(rng.integers(0, 9))
            return b"[$" + m + b"#" + length(n) + rng.bytes(n * size)
        if r < 0.8:
            items = [value(depth + 1) for _ in range(rng.integers(0, 5))]
            if rng.random() < 0.4:
                return b"[#" + length(len(items)) + b"".join(items)
            if not strict and rng.random() < 0.2:
                return b"[$S#" + length(2) + length(1) + b"p" + length(1) + b"q"
            return b"[" + b"".join(items) + b"]"
        items = [key() + value(depth + 1) for _ in range(rng.integers(0, 5))]
        if not strict and rng.random() < 0.15:
            return b"{#" + length(len(items)) + b"".join(items)
        return b"{" + b"".join(items) + b"}"

    return value(0)


@pytest.mark.parametrize("strict", [False, True])
def test_ubjson_native_decoder_is_the_python_decoder(strict, monkeypatch):
    """Seeded fuzz: the C decoder (treecomp.numparse.ubj_decode, tried first) and the Python
    decoder give the same value or the same error on random documents, their prefixes and
    byte mutations; the C decoder decodes most valid documents itself, and refuses (leaves
    to Python) every invalid one."""
    if not numparse.available():
        pytest.skip(f"the native parser is not built: {numparse.UNAVAILABLE}")
    rng = np.random.default_rng(38)
    cases = []
    for _ in range(300):
        doc = _random_ubjson(rng, strict)
        cases.append(doc)
        cases.append(doc[:int(rng.integers(0, len(doc) + 1))])
        buf = bytearray(doc)
        for pos in rng.integers(0, len(buf), int(rng.integers(1, 3))):
            buf[pos] = int(rng.integers(0, 256))
        cases.append(bytes(buf))
        cases.append(doc + doc[:1])  # trailing bytes
    native = [_decode_or_error(c, strict) for c in cases]
    by_c = [numparse.ubj_decode(c, strict) is not None for c in cases]
    monkeypatch.setattr(ubjson, "NATIVE", False)
    python = [_decode_or_error(c, strict) for c in cases]
    assert native == python
    ok = [not isinstance(p, str) for p in python]
    assert sum(ok) > 200 and sum(map(lambda o: not o, ok)) > 200
    assert not any(c and not o for c, o in zip(by_c, ok))  # C never accepts what Python refuses
    assert sum(c for c in by_c) > 0.5 * sum(ok)


def test_ubjson_typed_arrays_of_a_key_are_one_array(monkeypatch):
    """Decoded by the C decoder, a model's typed arrays of one key are consecutive slices of
    one array, which the frontend joins without a copy; the Forest is the Python decoder's."""
    if not numparse.available():
        pytest.skip(f"the native parser is not built: {numparse.UNAVAILABLE}")
    from treecomp.frontends import xgboost as xgb_frontend
    b = zoo.get("xgboost:reg_squarederror").model
    data = bytes(b.save_raw("ubj"))
    doc = ubjson.decode(data, strict=True)
    trees = doc["learner"]["gradient_booster"]["model"]["trees"]
    assert len(trees) > 2
    for key in ("left_children", "split_conditions", "default_left"):
        parts = [t[key] for t in trees]
        base = parts[0].base
        assert base is not None and all(p.base is base for p in parts)
        joined = xgb_frontend._joined(parts)
        assert joined.base is base and np.shares_memory(joined, parts[-1])
        assert_same(np.concatenate(parts), joined)
        assert_same(np.concatenate(parts[1:]), xgb_frontend._joined(parts[1:]))
        assert not np.shares_memory(xgb_frontend._joined(parts[::-1]), base)  # (not in order)
    want = forest_from_document(doc).digest()
    monkeypatch.setattr(ubjson, "NATIVE", False)
    py = ubjson.decode(data, strict=True)
    assert _canon(py) == _canon(doc)
    assert forest_from_document(py).digest() == want


def _digest_or_error(doc):
    try:
        return forest_from_document(doc).digest()
    except InvalidModelError as exc:
        return f"error: {exc}"


def test_broken_children_with_and_without_the_native_checks(monkeypatch):
    """Children out of range, below -1, one-sided, before their parent, shared, or renumbered
    validly, in one tree of many: the same Forest or the same error (naming the tree) whether
    the trees' shapes are checked by numparse.tree_shapes or by numpy."""
    if not numparse.available():
        pytest.skip(f"the native parser is not built: {numparse.UNAVAILABLE}")
    base = doc_of(zoo.get("xgboost:reg_squarederror").model)
    rng = np.random.default_rng(11)
    docs = []
    for _ in range(40):
        doc = json.loads(json.dumps(base))
        trees = doc["learner"]["gradient_booster"]["model"]["trees"]
        t = trees[int(rng.integers(len(trees)))]
        n = len(t["left_children"])
        internal = [j for j in range(n) if t["left_children"][j] >= 0]
        j = internal[int(rng.integers(len(internal)))]
        how = int(rng.integers(6))
        key = "left_children" if rng.random() < 0.5 else "right_children"
        if how == 0:
            t[key][j] = n + int(rng.integers(0, 3))
        elif how == 1:
            t[key][j] = -2
        elif how == 2:
            t[key][j] = -1
        elif how == 3:
            t[key][j] = j
        elif how == 4:
            t["right_children"][j] = t["left_children"][j]
        else:  # swap a node's children: still a valid tree (the same predictions)
            t["left_children"][j], t["right_children"][j] = t["right_children"][j], t["left_children"][j]
        docs.append(doc)
    native = [_digest_or_error(d) for d in docs]
    monkeypatch.setattr(numparse, "available", lambda: False)
    assert native == [_digest_or_error(d) for d in docs]
    errors = sum(v.startswith("error: ") for v in native)
    assert errors > 15 and len(native) - errors > 3


@pytest.mark.parametrize("key,node,value,message", [
    ("split_indices", "internal", 99, "split feature index out of range (num_feature=5)"),
    ("split_indices", "internal", -1, "split feature index out of range (num_feature=5)"),
    ("split_indices", "leaf", 99, None),                    # (a leaf's is not read)
    ("split_type", "internal", 7, "unknown split_type"),
    ("split_type", "leaf", -1, "unknown split_type"),
    ("split_conditions", "leaf", float("inf"), "non-finite leaf value"),
    ("split_conditions", "leaf", float("nan"), "non-finite leaf value"),
    ("split_conditions", "internal", float("nan"), "NaN split condition"),
    ("split_conditions", "internal", float("inf"), None),   # (an infinite threshold is a split)
])
def test_node_value_errors_name_the_tree(key, node, value, message):
    """A bad value at one node of tree 3 (of 10): the error names the tree and the rule,
    whether the frontend's bulk checks find it by a reduction over all nodes or by the masked
    tests; values the rules allow give a Forest."""
    doc = doc_of(zoo.get("xgboost:reg_squarederror").model)
    t = doc["learner"]["gradient_booster"]["model"]["trees"][3]
    j = next(i for i, c in enumerate(t["left_children"]) if (c >= 0) == (node == "internal"))
    t[key][j] = value
    if message is None:
        forest_from_document(doc)
    else:
        with pytest.raises(InvalidModelError) as got:
            forest_from_document(doc)
        assert str(got.value) == f"XGBoost model: tree 3: {message}"


class _NoFastLength:
    """Stands in for ubjson._INT64 in the string fast path: every length it reads is -1 (so
    the general path reads it). The typed-array fast path is off by then too."""

    def unpack_from(self, data, pos):
        return (-1,)


def test_ubjson_needs_bytes():
    with pytest.raises(TypeError):
        ubjson.decode("{}")


# -- errors ----------------------------------------------------------------------------------
def test_gblinear_is_unsupported(tmp_path):
    X = _X(60, n=80)
    b = xgb.train({"booster": "gblinear", "nthread": 1},
                  xgb.DMatrix(np.nan_to_num(X), label=_labels("reg:squarederror", X, 60), nthread=1), 2)
    with pytest.raises(UnsupportedModelError, match="gblinear"):
        treecomp.parse(b)
    b.save_model(tmp_path / "linear.ubj")
    with pytest.raises(UnsupportedModelError, match="gblinear"):
        treecomp.parse(tmp_path / "linear.ubj")
    m = xgb.XGBRegressor(booster="gblinear", n_estimators=2, n_jobs=1).fit(np.nan_to_num(X), X[:, 0])
    with pytest.raises(UnsupportedModelError, match="gblinear"):
        treecomp.parse(m)


# -- vector-leaf trees (multi_strategy="multi_output_tree") ----------------------------------
def _vector_leaf_models():
    """name -> (model, rows, library callables): Booster and wrapper, regression and multiclass."""
    X = _X(61, n=240)
    Y = np.c_[np.nan_to_num(X[:, 1]) + X[:, 0], X[:, 2] * 2, np.sin(X[:, 3])]
    y = np.digitize(X[:, 0] + np.nan_to_num(X[:, 1]), [-0.7, 0.0, 0.8])
    vec = {"tree_method": "hist", "multi_strategy": "multi_output_tree"}
    reg = train({**vec, "objective": "reg:squarederror"}, X, Y, 6)
    soft = train({**vec, "objective": "multi:softprob", "num_class": 4}, X, y, 5)
    kw = dict(n_estimators=5, max_depth=3, n_jobs=1, random_state=7, **vec)
    wreg = xgb.XGBRegressor(**kw).fit(X, Y[:, :2])
    wclf = xgb.XGBClassifier(**kw).fit(X, y)
    rows = X[:120].copy()
    fin = lambda Z: np.where(np.isinf(Z), np.sign(Z) * 3e38, Z)  # DMatrix refuses inf
    return {
        "booster_regression": (reg, rows, {
            "predict": lambda Z: reg.predict(xgb.DMatrix(fin(Z), nthread=1)),
            "raw": lambda Z: reg.predict(xgb.DMatrix(fin(Z), nthread=1), output_margin=True)}),
        "booster_softprob": (soft, rows, {
            "predict": lambda Z: soft.predict(xgb.DMatrix(fin(Z), nthread=1)),
            "raw": lambda Z: soft.predict(xgb.DMatrix(fin(Z), nthread=1), output_margin=True)}),
        "wrapper_regressor": (wreg, rows, {"predict": wreg.predict,
                                           "raw": lambda Z: wreg.predict(Z, output_margin=True)}),
        "wrapper_classifier": (wclf, rows, {"predict": wclf.predict, "predict_proba": wclf.predict_proba,
                                            "raw": lambda Z: wclf.predict(Z, output_margin=True)}),
    }


@pytest.fixture(scope="module")
def vector_leaf_models():
    return _vector_leaf_models()


@pytest.mark.parametrize("name", ["booster_regression", "booster_softprob", "wrapper_regressor",
                                  "wrapper_classifier"])
def test_vector_leaf_models_bit_exact(vector_leaf_models, name, tmp_path):
    """Vector-leaf trees: every tree adds its float32 leaf vector (leaf_weights, indexed by
    right_children at the leaf) to all outputs, from the per-target base margins. Exact from
    the object, the .json and the .ubj file, through the interpreter and every backend."""
    model, rows, library = vector_leaf_models[name]
    f = treecomp.parse(model)
    K = f.n_outputs
    assert K > 1 and all(t.width == K for t in f.trees) and not np.any(f.tree_output)
    assert len(set(f.base_score.tolist())) == K  # one base margin per target
    booster = model if isinstance(model, xgb.Booster) else model.get_booster()
    for suffix in (".json", ".ubj"):
        booster.save_model(tmp_path / f"m{suffix}")
        if isinstance(model, xgb.Booster):
            assert treecomp.parse(tmp_path / f"m{suffix}").digest() == f.digest()
    X = np.vstack([rows, edge_rows(f, rows, n=150, seed=3)])
    got = {}
    for key, lib in library.items():
        want = lib(X)
        assert_same(want, OURS[key](f, X))
        got[key] = want
    for backend in ("c", "llvm", "arrays"):
        p = treecomp.compile(f, backend=backend)
        assert_same(got["predict"], p.predict(X))
        assert_same(got["raw"], p.decision_function(X))
        if "predict_proba" in got:
            assert_same(got["predict_proba"], p.predict_proba(X))


def test_vector_leaf_layout_is_read_from_leaf_weights(vector_leaf_models):
    """leaf_weights decides, not base_weights: a document whose leaf rows are permuted (and
    right_children with them) predicts the same; one whose leaf_weights are changed predicts
    the change, as XGBoost does."""
    reg = vector_leaf_models["booster_regression"][0]
    X = vector_leaf_models["booster_regression"][1][:40]
    doc = doc_of(reg)
    t = doc["learner"]["gradient_booster"]["model"]["trees"][0]
    K = int(t["tree_param"]["size_leaf_vector"])
    t["leaf_weights"] = [v * 2 for v in t["leaf_weights"]]
    t["base_weights"] = [0.0] * len(t["base_weights"])
    b = booster_from_doc(doc)
    assert_same(b.predict(xgb.DMatrix(X, nthread=1), output_margin=True),
                interp.decision_function(forest_from_document(doc), X))
    # reverse the leaf rows
    leaves = [i for i, c in enumerate(t["left_children"]) if c == -1]
    rows = [t["leaf_weights"][K * j:K * j + K] for j in range(len(leaves))]
    t["leaf_weights"] = [v for r in rows[::-1] for v in r]
    for i in leaves:
        t["right_children"][i] = len(leaves) - 1 - t["right_children"][i]
    assert_same(b.predict(xgb.DMatrix(X, nthread=1), output_margin=True),
                interp.decision_function(forest_from_document(doc), X))


@pytest.mark.parametrize("mutate, error, match", [
    (lambda t: t.pop("leaf_weights"), UnsupportedModelError, "XGBoost < 3.2"),
    (lambda t: t["leaf_weights"].pop(), InvalidModelError, "multiple of size_leaf_vector"),
    (lambda t: t["right_children"].__setitem__(t["left_children"].index(-1), 99), InvalidModelError,
     "outside"),
    (lambda t: t["right_children"].__setitem__(0, t["left_children"][0] + 2), InvalidModelError,
     "left child \\+ 1"),
    (lambda t: t["tree_param"].__setitem__("size_leaf_vector", "2"), InvalidModelError,
     "size_leaf_vector"),
    (lambda t: t["leaf_weights"].__setitem__(0, "x"), InvalidModelError, "leaf_weights"),
])
def test_vector_leaf_corrupt(vector_leaf_models, mutate, error, match):
    doc = doc_of(vector_leaf_models["booster_regression"][0])
    mutate(doc["learner"]["gradient_booster"]["model"]["trees"][1])
    with pytest.raises(error, match=match):
        forest_from_document(doc)


def test_unknown_objective_is_unsupported():
    doc = doc_of(zoo.get("xgboost:reg_squarederror").model)
    doc["learner"]["objective"]["name"] = "reg:nonsense"
    with pytest.raises(UnsupportedModelError, match="reg:nonsense"):
        treecomp.parse(write_json(doc, "unknown_objective.json"))


@pytest.mark.parametrize("content", [b"", b"not json", b"[1, 2]", b'{"learner": 3}', b"\xff\xfe{",
                                     b'{"learner": {"gradient_booster": {"name": "gbtree"}}}'])
def test_corrupt_files_are_invalid(tmp_path, content):
    for suffix in (".json", ".ubj"):
        p = tmp_path / f"bad{suffix}"
        p.write_bytes(content)
        with pytest.raises(InvalidModelError):
            parse_xgboost_file(p)


def _mutate_tree(mutate) -> dict:
    doc = doc_of(zoo.get("xgboost:categorical").model)
    mutate(doc["learner"]["gradient_booster"]["model"]["trees"][0])
    return doc


@pytest.mark.parametrize("mutate", [
    lambda t: t["left_children"].__setitem__(0, 999),
    lambda t: t["left_children"].__setitem__(1, 0),                     # cycle back to the root
    lambda t: t["right_children"].__setitem__(0, t["left_children"][0]),  # shared child
    lambda t: t["right_children"].__setitem__(0, -1),
    lambda t: t["split_indices"].__setitem__(0, 99),
    lambda t: t["split_conditions"].pop(),
    lambda t: t["split_type"].__setitem__(0, 7),
    lambda t: t["categories"].__setitem__(0, -3),
    lambda t: t.__setitem__("categories_nodes", []),
    lambda t: t["categories_sizes"].__setitem__(0, 10 ** 6),
    lambda t: t.__setitem__("left_children", "abc"),
    lambda t: t["split_conditions"].__setitem__(len(t["split_conditions"]) - 1, float("nan")),
], ids=range(12))
def test_inconsistent_trees_are_invalid(mutate):
    with pytest.raises(InvalidModelError):
        forest_from_document(_mutate_tree(mutate))


def test_wrapper_errors():
    X = _X(62, n=80)
    with pytest.raises(NotFittedError):
        treecomp.parse(xgb.XGBRegressor())
    m = xgb.XGBRegressor(n_estimators=2, missing=0.0, n_jobs=1).fit(X, X[:, 0])
    with pytest.raises(UnsupportedModelError, match="missing"):
        treecomp.parse(m)

    def squared(y, p):
        return p - y, np.ones_like(p)

    m = xgb.XGBRegressor(n_estimators=2, objective=squared, n_jobs=1).fit(X, X[:, 0])
    with pytest.raises(UnsupportedModelError, match="objective"):
        treecomp.parse(m)
    y = (X[:, 0] > 0).astype(int)
    m = xgb.XGBClassifier(n_estimators=2, objective="binary:hinge", n_jobs=1).fit(X, y)
    with pytest.raises(UnsupportedModelError, match="hinge"):
        treecomp.parse(m)
    # ... while its Booster (Booster.predict semantics) is fine
    f = treecomp.parse(m.get_booster())
    assert_same(m.get_booster().inplace_predict(X), interp.predict(f, X))


# -- files as older releases and other names write them (issue 20 items 3, 5, 10) ---------------
@pytest.mark.parametrize("n_classes", [2, 3])
@pytest.mark.parametrize("with_type", [True, False])
def test_1x_classifier_file_without_estimator_type(tmp_path, n_classes, with_type):
    """XGBoost 1.0-1.3 wrapper files: attributes.scikit_learn holds the wrapper's __dict__ and
    "type", no _estimator_type. XGBClassifier().load_model() predicts labels from them."""
    X = _X(71, n=160, d=4)
    y = (X[:, 0] > 0).astype(int) + (n_classes == 3) * (X[:, 3] > 0.4)
    m = xgb.XGBClassifier(n_estimators=4, max_depth=3, n_jobs=1).fit(X, y)
    path = tmp_path / "old.json"
    m.save_model(path)
    doc = json.loads(path.read_text())
    learner = doc["learner"]
    meta = {"objective": learner["objective"]["name"], "n_estimators": 4, "max_depth": 3,
            "classes_": list(range(n_classes)), "n_classes_": n_classes, "missing": None}
    if with_type:
        meta["type"] = "XGBClassifier"
    learner["attributes"]["scikit_learn"] = json.dumps(meta)
    doc["version"] = [1, 2, 0]
    lmp = learner["learner_model_param"]
    lmp["base_score"] = str(json.loads(lmp["base_score"])[0])  # 1.x: a plain number
    if n_classes == 2:
        lmp["base_score"] = "0.5"
    del learner["gradient_booster"]["model"]["iteration_indptr"]
    path.write_text(json.dumps(doc))
    clf = xgb.XGBClassifier(n_jobs=1)
    clf.load_model(path)
    f = treecomp.parse(path)
    assert_same(clf.predict(X), interp.predict(f, X))
    assert_same(clf.predict_proba(X), interp.predict_proba(f, X))


def test_1x_regressor_file_type_wins_over_objective(tmp_path):
    """An XGBRegressor(objective="binary:logistic") 1.x file names its class: values, not labels."""
    X = _X(72, n=120, d=4)
    m = xgb.XGBRegressor(n_estimators=3, objective="binary:logistic", n_jobs=1).fit(X, X[:, 0] > 0)
    path = tmp_path / "old_reg.json"
    m.save_model(path)
    doc = json.loads(path.read_text())
    doc["learner"]["attributes"]["scikit_learn"] = json.dumps({"type": "XGBRegressor"})
    doc["version"] = [1, 3, 0]
    path.write_text(json.dumps(doc))
    reg = xgb.XGBRegressor(n_jobs=1)
    reg.load_model(path)
    assert_same(reg.predict(X), interp.predict(treecomp.parse(path), X))


@pytest.mark.parametrize("value", [2, 255, -1, 3])
def test_default_left_other_than_one_is_false(tmp_path, value):
    """XGBoost reads default_left as `value == 1`: any other integer sends NaN right."""
    X = _X(73, n=200, nan=0.3)
    b = train({"objective": "reg:squarederror", "max_depth": 3}, X, _labels("reg:squarederror", X, 73), 3)
    doc = doc_of(b)
    for t in doc["learner"]["gradient_booster"]["model"]["trees"]:
        t["default_left"] = [value if c >= 0 and i % 2 else int(c >= 0)
                             for i, c in enumerate(t["left_children"])]
    rows = np.where(np.random.default_rng(74).random((64, X.shape[1])) < 0.5, np.nan, X[:64])
    want = booster_from_doc(doc).predict(xgb.DMatrix(rows), output_margin=True)
    assert_same(want, interp.decision_function(treecomp.parse(write_json(doc, f"dl{value}.json")), rows))


def test_default_left_non_integer_is_invalid():
    """XGBoost refuses 0.5 / 1.0 there ("Invalid cast, from Number to Integer")."""
    doc = doc_of(zoo.get("xgboost:reg_squarederror").model)
    t = doc["learner"]["gradient_booster"]["model"]["trees"][0]
    t["default_left"] = [1.0] * len(t["left_children"])
    with pytest.raises(xgb.core.XGBoostError):
        booster_from_doc(doc)
    with pytest.raises(InvalidModelError, match="default_left"):
        forest_from_document(doc)


@pytest.mark.parametrize("key, value", [("left_children", 2 ** 32 + 1), ("left_children", 2 ** 31),
                                        ("right_children", 2 ** 32 + 2), ("split_indices", 2 ** 32),
                                        ("left_children", -2 ** 32 - 1)])
def test_node_indices_beyond_int32_are_invalid(key, value):
    """XGBoost casts these to int32 (2**32 + 1 would be node 1); refused with a clear message."""
    doc = doc_of(zoo.get("xgboost:reg_squarederror").model)
    doc["learner"]["gradient_booster"]["model"]["trees"][0][key][0] = value
    with pytest.raises(InvalidModelError, match=f"{key} holds a value that does not fit int32"):
        forest_from_document(doc)


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("name", ["m.model", "m.bin", "m.deprecated", "m.json", "m.ubj", "m"])
def test_file_type_by_content(tmp_path, name):
    """XGBoost 3.x writes UBJSON for any name but .json: parse() goes by content."""
    case = zoo.get("xgboost:binary_logistic")
    b = case.model if isinstance(case.model, xgb.Booster) else case.model.get_booster()
    path = tmp_path / name
    b.save_model(path)
    loaded = xgb.Booster(model_file=str(path))
    X = _X(75, n=50)
    assert_same(loaded.predict(xgb.DMatrix(X)), interp.predict(treecomp.parse(path), X))


def test_legacy_binary_and_unknown_content(tmp_path):
    legacy = bytes(136) + (15).to_bytes(8, "little") + b"binary:logistic" + (6).to_bytes(8, "little") + b"gbtree" + bytes(200)
    for name in ("old.model", "old.bin", "old.json", "old"):
        (tmp_path / name).write_bytes(legacy)
        with pytest.raises(UnsupportedModelError, match=r"legacy XGBoost binary format \(pre-1\.0.*save_model\('m\.json'\)"):
            treecomp.parse(tmp_path / name)
    (tmp_path / "junk.model").write_bytes(b"\x01\x02garbage" * 10)
    with pytest.raises(UnsupportedModelError, match="cannot tell the model format"):
        treecomp.parse(tmp_path / "junk.model")
    (tmp_path / "pickled.model").write_bytes(b"\x80\x04\x95" + bytes(20))
    with pytest.raises(UnsupportedModelError, match="pickle"):
        treecomp.parse(tmp_path / "pickled.model")
    (tmp_path / "empty.model").write_bytes(b"")
    with pytest.raises(InvalidModelError, match="empty"):
        treecomp.parse(tmp_path / "empty.model")


# -- what XGBoost 3.2 reads, and what it refuses (frontend fuzz findings) ------------------------
def _ubj_encode(doc) -> bytes:
    from tests.test_fuzz_frontends import ubj_encode
    return ubj_encode(doc)


def _booster_from_ubj(data: bytes) -> xgb.Booster:
    b = xgb.Booster({"nthread": 1})
    b.load_model(bytearray(data))
    return b


@pytest.mark.parametrize("case", ["xgboost:multi_softprob", "xgboost:binary_logistic"])
def test_tree_ids_place_the_trees(case):
    """XGBoost 3.2 (gbtree_model.cc LoadModel) puts trees[j] at slot trees[j]["id"] and reads
    tree_info by slot: a permutation of ids changes which group a tree adds to, and the order."""
    m = zoo.get(case).model
    b = m if isinstance(m, xgb.Booster) else m.get_booster()
    doc = doc_of(b)
    trees = doc["learner"]["gradient_booster"]["model"]["trees"]
    perm = np.random.default_rng(3).permutation(len(trees))
    for t, new_id in zip(trees, perm):
        t["id"] = int(new_id)
    X = _X(80, n=64)
    want = booster_from_doc(doc).predict(xgb.DMatrix(X, nthread=1), output_margin=True)
    assert_same(want, interp.decision_function(forest_from_document(doc), X))
    assert_same(want, interp.decision_function(treecomp.parse(write_json(doc, "ids.json")), X))


@pytest.mark.parametrize("bad", ["dup", "missing", "float", "bool", "string", "big", "negative"])
def test_bad_tree_ids_are_invalid(bad):
    doc = doc_of(zoo.get("xgboost:reg_squarederror").model)
    trees = doc["learner"]["gradient_booster"]["model"]["trees"]
    t = trees[1]
    if bad == "missing":
        del t["id"]
    else:
        t["id"] = {"dup": 0, "float": 1.0, "bool": True, "string": "1", "big": len(trees),
                   "negative": -1}[bad]
    with pytest.raises(InvalidModelError, match="id"):
        forest_from_document(doc)


@pytest.mark.parametrize("how", ["drop", "dup", "param"])
def test_num_trees_must_match_the_trees(how):
    """GBTreeModel::LoadModel: Check failed: trees_json.size() == param.num_trees."""
    doc = doc_of(zoo.get("xgboost:reg_squarederror").model)
    model = doc["learner"]["gradient_booster"]["model"]
    if how == "drop":
        model["trees"].pop()
        model["tree_info"].pop()
        model["iteration_indptr"][-1] -= 1
    elif how == "dup":
        model["trees"].append(dict(model["trees"][0], id=len(model["trees"])))
        model["tree_info"].append(0)
        model["iteration_indptr"].append(len(model["trees"]))
    else:
        model["gbtree_model_param"]["num_trees"] = str(len(model["trees"]) + 1)
    with pytest.raises(xgb.core.XGBoostError, match="num_trees"):
        booster_from_doc(doc)
    with pytest.raises(InvalidModelError, match="num_trees"):
        forest_from_document(doc)


def _set_node(key, value, node=0):
    def f(doc):
        doc["learner"]["gradient_booster"]["model"]["trees"][0][key][node] = value
    return f


def _set_lmp(key, value):
    def f(doc):
        doc["learner"]["learner_model_param"][key] = value
    return f


def _set_tree(key, value):
    def f(doc):
        t = doc["learner"]["gradient_booster"]["model"]["trees"][0]
        if value is None:
            del t[key]
        else:
            t[key] = value
    return f


def _del_tree_param(key):
    def f(doc):
        del doc["learner"]["gradient_booster"]["model"]["trees"][0]["tree_param"][key]
    return f


JSON_REFUSED = {
    "split_conditions int": _set_node("split_conditions", 1),
    "split_conditions huge int": _set_node("split_conditions", 2 ** 63),
    "split_conditions bool": _set_node("split_conditions", True),
    "split_indices float": _set_node("split_indices", 1.0),
    "split_indices bool": _set_node("split_indices", False),
    "left_children float": _set_node("left_children", 1.0),
    "default_left float": _set_node("default_left", 1.0),
    "loss_changes string": _set_node("loss_changes", "1"),
    "num_target int": _set_lmp("num_target", 1),
    "num_class int": _set_lmp("num_class", 0),
    "num_feature float text": _set_lmp("num_feature", "4.0"),
    "base_score number": _set_lmp("base_score", 0.5),
    "base_score trailing newline": _set_lmp("base_score", "[5E-1]\n"),
    "base_score trailing space": _set_lmp("base_score", "0.5 "),
    "no tree_param": _set_tree("tree_param", None),
    "no num_nodes": _del_tree_param("num_nodes"),
    "no size_leaf_vector": _del_tree_param("size_leaf_vector"),
    "num_nodes int": lambda d: d["learner"]["gradient_booster"]["model"]["trees"][0]["tree_param"].__setitem__("num_nodes", len(d["learner"]["gradient_booster"]["model"]["trees"][0]["left_children"])),
    "no parents": _set_tree("parents", None),
    "parents out of range": _set_node("parents", 10 ** 6, node=1),
    "no gbtree_model_param": lambda d: d["learner"]["gradient_booster"]["model"].pop("gbtree_model_param"),
    "num_trees int": lambda d: d["learner"]["gradient_booster"]["model"]["gbtree_model_param"].__setitem__("num_trees", 4),
    "tree_info float": lambda d: d["learner"]["gradient_booster"]["model"]["tree_info"].__setitem__(0, 0.0),
    "indptr shifted": lambda d: d["learner"]["gradient_booster"]["model"]["iteration_indptr"].__setitem__(0, 10 ** 4),
}


@pytest.mark.parametrize("name", list(JSON_REFUSED))
def test_values_xgboost_refuses_are_invalid(name):
    """Values of a JSON type XGBoost 3.2 refuses ("Invalid cast" ...) and structure it
    requires: refused too, not read as numbers."""
    doc = doc_of(zoo.get("xgboost:reg_squarederror").model)
    JSON_REFUSED[name](doc)
    if name != "parents out of range":  # XGBoost reads out of bounds there (no clean error)
        with pytest.raises(xgb.core.XGBoostError):  # on loading, or on predicting
            booster_from_doc(doc).predict(xgb.DMatrix(_X(82, n=4), nthread=1))
    with pytest.raises(InvalidModelError):
        forest_from_document(doc)


@pytest.mark.parametrize("value", [" 0.5", "(5E-1)", "[5E-1, 5E-1]", "5E-1", "1", "[ 5E-1 ]"])
def test_base_score_forms_xgboost_reads(value):
    X = _X(81, n=40)
    doc = doc_of(zoo.get("xgboost:multi_softprob").model)
    doc["learner"]["learner_model_param"]["base_score"] = value if "," not in value else \
        "[" + ",".join(["5E-1"] * 4) + "]"
    want = booster_from_doc(doc).predict(xgb.DMatrix(X, nthread=1), output_margin=True)
    assert_same(want, interp.decision_function(forest_from_document(doc), X))


def test_ubjson_strict_is_what_xgboost_reads():
    """strict=True refuses what XGBoost's UBJReader refuses (and reads 'C' as an integer, the
    first of duplicate keys)."""
    for data in [b"H" + b"L" + (4).to_bytes(8, "big") + b"1234", b"N" + b"Z", b"[#U\x01Z",
                 b"SU\x01a", b"{#L" + (0).to_bytes(8, "big"), b"[$S#L" + (0).to_bytes(8, "big"),
                 b"{L" + (1).to_bytes(8, "big") + b"aZN}"]:
        ubjson.decode(data)  # fine for the general decoder
        with pytest.raises(InvalidModelError):
            ubjson.decode(data, strict=True)
    key = b"L" + (1).to_bytes(8, "big") + b"a"
    assert ubjson.decode(b"{" + key + b"i\x01" + key + b"i\x02}", strict=True) == {"a": 1}
    assert ubjson.decode(b"C\xff", strict=True) == -1


def test_ubjson_high_precision_and_untyped_arrays_are_invalid():
    """What XGBoost refuses in .ubj files: an 'H' number ("High precision number is not
    supported"), a plain array where the tree's other arrays are typed ("Invalid cast")."""
    b = zoo.get("xgboost:reg_squarederror").model
    doc = ubjson.decode(bytes(b.save_raw("ubj")))
    t = doc["learner"]["gradient_booster"]["model"]["trees"][0]
    assert isinstance(t["parents"], np.ndarray)
    t["default_left"] = [int(v) for v in t["default_left"]]
    with pytest.raises(xgb.core.XGBoostError):
        _booster_from_ubj(_ubj_encode(doc))
    with pytest.raises(InvalidModelError, match="default_left"):
        forest_from_document(ubjson.decode(_ubj_encode(doc), strict=True))
    doc = ubjson.decode(bytes(b.save_raw("ubj")))
    doc["learner"]["gradient_booster"]["model"]["trees"][0]["id"] = 2 ** 64  # written as 'H'
    data = _ubj_encode(doc)
    with pytest.raises(xgb.core.XGBoostError, match="High precision"):
        _booster_from_ubj(data)
    p = tmpdir() / "high_precision.ubj"
    p.write_bytes(data)
    with pytest.raises(InvalidModelError, match="high-precision"):
        treecomp.parse(p)


@pytest.mark.parametrize("case", ["xgboost:reg_squarederror", "xgboost:categorical"])
def test_category_lists_xgboost_reads_out_of_bounds_are_invalid(case):
    """A categories_nodes entry without its segment / size (XGBoost 3.2 segfaults: the fuzz's
    categories_nodes.append), on a model with or without categorical splits."""
    doc = doc_of(zoo.get(case).model)
    t = doc["learner"]["gradient_booster"]["model"]["trees"][0]
    t["categories_nodes"].append(len(t["left_children"]) - 1)
    with pytest.raises(InvalidModelError, match="categories_nodes"):
        forest_from_document(doc)


@pytest.mark.parametrize("edit", [
    lambda d: d["learner"]["attributes"].__setitem__("scikit_learn", 7),
    lambda d: d["learner"].pop("attributes"),
    lambda d: d["learner"]["gradient_booster"]["model"]["trees"][0]["tree_param"].__setitem__("num_deleted", {}),
])
def test_learner_attributes_and_tree_bookkeeping_types(edit):
    """Learner::LoadModel: attributes is required, every value a string; tree_param.num_deleted
    a string: XGBoost refuses other types ("Invalid cast", "map::at")."""
    doc = doc_of(zoo.get("xgboost:reg_squarederror").model)
    edit(doc)
    with pytest.raises(xgb.core.XGBoostError):
        booster_from_doc(doc)
    with pytest.raises(InvalidModelError):
        forest_from_document(doc)


@pytest.mark.parametrize("objective", ["binary:logitraw", "reg:logistic", "reg:squarederror",
                                       "count:poisson", "reg:absoluteerror"])
def test_classifier_of_any_value_objective(objective, tmp_path):
    """XGBClassifier fits any one-output objective that predicts values: predict is int64
    (p > 0.5) and predict_proba float32 [1 - p, p] of the objective's transformed value p
    (binary:logitraw: the margin itself, so "probabilities" outside [0, 1]); bit for bit through
    the interpreter, every backend, one row and the file the wrapper saves (was refused)."""
    X = _X(63, n=300)
    y = (np.nan_to_num(X[:, 0]) + X[:, 1] > 0).astype(int)
    m = xgb.XGBClassifier(objective=objective, n_estimators=5, max_depth=3, n_jobs=1,
                          random_state=3).fit(X, y)
    f = treecomp.parse(m)
    assert f.decision == "proba_gt_half"
    rows = np.vstack([X, edge_rows(f, X, n=200, seed=5)])
    want, want_p = m.predict(rows), m.predict_proba(rows)
    assert 0 < want.sum() < len(want)  # both labels occur
    assert_same(want, interp.predict(f, rows))
    assert_same(want_p, interp.predict_proba(f, rows))
    for backend in ("arrays", "c", "llvm"):
        p = treecomp.compile(f, backend=backend)
        assert_same(want, p.predict(rows))
        assert_same(want_p, p.predict_proba(rows))
        assert_same(want[:1], p.predict(rows[:1]))
        assert_same(want_p[:1], p.predict_proba(rows[:1]))
    m.save_model(tmp_path / "m.json")
    assert_same(want_p, treecomp.compile(tmp_path / "m.json").predict_proba(rows))


@pytest.mark.parametrize("strategy", ["one_output_per_tree", "multi_output_tree"])
def test_multilabel_classifier(strategy, tmp_path):
    """XGBClassifier on a multi-label target: predict is float64 1. where a target's float32
    probability > 0.5 (else 0.), predict_proba the (n, targets) float32 probabilities; on rows
    at the thresholds and NaN, through every backend and a saved artifact."""
    X = _X(62, n=240)
    Y = np.c_[X[:, 0] > 0, np.nan_to_num(X[:, 1]) + X[:, 2] > 0.3, X[:, 3] < -0.5].astype(int)
    m = xgb.XGBClassifier(n_estimators=6, max_depth=3, n_jobs=1, random_state=1, tree_method="hist",
                          multi_strategy=strategy).fit(X, Y)
    f = treecomp.parse(m)
    assert f.decision == "proba_gt_half_each" and f.n_outputs == 3
    rows = np.vstack([X[:100], edge_rows(f, X, n=150, seed=4)])
    assert_same(m.predict(rows), interp.predict(f, rows))
    assert_same(m.predict_proba(rows), interp.predict_proba(f, rows))
    for backend in ("c", "llvm", "arrays"):
        p = treecomp.compile(f, backend=backend)
        assert_same(m.predict(rows), p.predict(rows))
        assert_same(m.predict_proba(rows), p.predict_proba(rows))
        assert_same(m.predict(rows[:1]), p.predict(rows[:1]))
    p.save(tmp_path / "m.tc")
    assert_same(m.predict_proba(rows), treecomp.load(tmp_path / "m.tc").predict_proba(rows))



def test_json_that_is_no_xgboost_model_says_what_it_is(tmp_path):
    """LightGBM's Booster.dump_model() written to a .json is no model any library loads: the
    error says so and what to pass instead (was: "not an XGBoost model document"); other JSON
    lists its keys."""
    lgb = pytest.importorskip("lightgbm")
    X = np.random.default_rng(2).normal(size=(100, 3))
    b = lgb.train({"verbose": -1, "num_leaves": 4}, lgb.Dataset(X, X[:, 0]), 2)
    for indent in (None, 2):
        (tmp_path / "dump.json").write_text(json.dumps(b.dump_model(), indent=indent))
        for name in ("dump.json", "dump.model"):
            if name != "dump.json":
                (tmp_path / name).write_bytes((tmp_path / "dump.json").read_bytes())
            with pytest.raises(UnsupportedModelError, match=r"LightGBM model dump .*save_model\('model.txt'\)"):
                treecomp.parse(tmp_path / name)
    (tmp_path / "other.json").write_text(json.dumps({"weights": [1, 2], "bias": 0.5}))
    with pytest.raises(InvalidModelError, match="not an XGBoost model document .*'weights', 'bias'"):
        treecomp.parse(tmp_path / "other.json")
