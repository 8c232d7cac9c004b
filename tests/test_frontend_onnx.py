"""ONNX frontend: bit-exact differential tests against onnxruntime (1.32, one thread).

skl2onnx conversions of scikit-learn trees and forests (regression, two- and three-class
classification, string labels), and seeded random hand-built ensembles (onnx.helper) in both
encodings -- TreeEnsembleRegressor / Classifier (ai.onnx.ml opset 3) and TreeEnsemble (opset 5)
-- with every node mode (LEQ, LT, GTE, GT, EQ, NEQ, MEMBER), missing_value_tracks_true, SUM /
AVERAGE, base values, several targets and every supported post_transform, on rows that sit
on the thresholds, one float32 ULP either side, NaN, +-0.0, +-inf and non-integral values at
equality tests. Every output is compared bit for bit with ORT's, through the interpreter and
the c, llvm and arrays backends. Then the refusals: graphs with other ops, other input types,
PROBIT, MIN / MAX, unsupported two-class layouts, and corrupt / hostile files.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

import treecomp  # noqa: E402
from treecomp import interp  # noqa: E402
from treecomp.errors import InvalidModelError, UnsupportedModelError  # noqa: E402
from tests.edge import edge_rows  # noqa: E402
from tests.memtrace import traced_peak  # noqa: E402

from onnx import TensorProto, helper  # noqa: E402

F32 = np.float32
BACKENDS = ("c", "llvm", "arrays")


def session(model):
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    so.log_severity_level = 3
    return ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])


def ort_outputs(model, X):
    """(labels or None, scores) as ORT returns them for float32 rows X."""
    s = session(model)
    out = s.run(None, {s.get_inputs()[0].name: np.ascontiguousarray(X, F32)})
    if len(out) == 1:
        return None, out[0]
    labels, scores = out
    if isinstance(scores, list):  # ZipMap: dicts keyed by class label, in classlabels order
        scores = np.array([list(d.values()) for d in scores], F32)
    return labels, scores


def assert_same(want, got):
    want, got = np.asarray(want), np.asarray(got)
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, got.shape, want.dtype, want.shape)
    np.testing.assert_array_equal(got, want, strict=True)


def check(model, X, backends=("arrays",)):
    """treecomp (interpreter and backends) against ORT, bit for bit. ORT's transforms are
    applied by treecomp.outputs in a Predictor; a c-backend artifact applies them itself under
    TREECOMP_TRANSFORM (checked here too), an llvm one refuses that flag."""
    f = treecomp.parse(model)
    assert treecomp.ir.Forest.from_bytes(f.to_bytes()).digest() == f.digest()  # the IR file
    labels, scores = ort_outputs(model, X)
    preds = [("interp", interp.predict, interp.predict_proba)]
    for b in backends:
        p = treecomp.compile(f, backend=b)
        preds.append((b, p.predict, getattr(p, "predict_proba", None)))
        if b in ("c", "llvm") and f.transform.endswith("_ort"):
            X32 = np.ascontiguousarray(X, F32)
            native = np.empty((len(X), f.n_outputs), F32)
            if b == "llvm":
                with pytest.raises(RuntimeError, match="code -1"):
                    p._kernel.run(X32, native, 1)
            else:
                p._kernel.run(X32, native, 1)
                assert_same(scores, native)
    for name, predict, proba in preds:
        if labels is None:
            want = scores[:, 0] if scores.shape[1] == 1 else scores
            got = predict(f, X) if name == "interp" else predict(X)
            assert_same(want, got)
        else:
            assert_same(labels, predict(f, X) if name == "interp" else predict(X))
            assert_same(scores, proba(f, X) if name == "interp" else proba(X))
    return f


# -- scikit-learn through skl2onnx ------------------------------------------------------------
def _sklearn_models():
    from sklearn.ensemble import (ExtraTreesClassifier, GradientBoostingClassifier,
                                  GradientBoostingRegressor, RandomForestClassifier,
                                  RandomForestRegressor)
    from sklearn.tree import DecisionTreeClassifier, DecisionTreeRegressor

    rng = np.random.default_rng(5)
    X = rng.normal(size=(300, 5)).astype(F32)
    X[:, 2] = np.round(X[:, 2] * 2) / 2
    y = X[:, 0] + X[:, 1] * X[:, 2]
    yb = (y > 0).astype(int)
    y3 = np.digitize(y, [-0.5, 0.5])
    kw = dict(random_state=0)
    return X, {
        "tree_regressor": (DecisionTreeRegressor(max_depth=6, **kw), y),
        "forest_regressor": (RandomForestRegressor(8, max_depth=5, **kw), y),
        "forest_two_targets": (RandomForestRegressor(4, max_depth=4, **kw), np.c_[y, X[:, 3]]),
        "gb_regressor": (GradientBoostingRegressor(n_estimators=20, max_depth=3, **kw), y),
        "tree_classifier3": (DecisionTreeClassifier(max_depth=5, **kw), y3),
        "forest_classifier2": (RandomForestClassifier(8, max_depth=5, **kw), yb),
        "forest_classifier3": (RandomForestClassifier(8, max_depth=5, **kw), y3),
        "gb_classifier2": (GradientBoostingClassifier(n_estimators=15, max_depth=3, **kw), yb),
        "gb_classifier3": (GradientBoostingClassifier(n_estimators=8, max_depth=3, **kw), y3),
        "extra_trees_strings": (ExtraTreesClassifier(6, max_depth=6, **kw), np.array(["lo", "mid", "hi"])[y3]),
    }


@pytest.fixture(scope="module")
def sklearn_onnx():
    to_onnx = pytest.importorskip("skl2onnx").to_onnx

    X, models = _sklearn_models()
    out = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name, (m, y) in models.items():
            m.fit(X, y)
            opts = {"zipmap": False} if name == "gb_classifier3" else None
            out[name] = to_onnx(m, X[:1], options=opts, target_opset={"": 17, "ai.onnx.ml": 3})
    return X, out


#: cases also compiled with the c and llvm backends (each compile takes a second or so)
ALL_BACKENDS = {"tree_regressor", "forest_two_targets", "forest_classifier2", "gb_classifier2",
                "gb_classifier3", "v3_targets_logistic", "v3_targets_softmax_zero",
                "v5_targets_softmax", "multiclass_base", "binary_mixed_logistic"}


@pytest.mark.parametrize("name", list(_sklearn_models()[1]))
def test_skl2onnx_bit_exact(sklearn_onnx, name, tmp_path):
    X, models = sklearn_onnx
    model = models[name]
    f = treecomp.parse(model)
    rows = np.vstack([X[:150], edge_rows(f, X, n=150, seed=2)]).astype(F32)
    check(model, rows, BACKENDS if name in ALL_BACKENDS else ("arrays",))
    # the same model from a file, by content whatever its name
    p = tmp_path / "model.bin"
    p.write_bytes(model.SerializeToString())
    assert treecomp.parse(p).digest() == f.digest()


def test_skl2onnx_forms(sklearn_onnx):
    """The converter's layouts the frontend maps: ZipMap + Cast after classifiers, base values
    added last, one score for two classes (weights for class 0 only)."""
    _, m = sklearn_onnx
    ops = [n.op_type for n in m["forest_classifier3"].graph.node]
    assert ops == ["TreeEnsembleClassifier", "Cast", "ZipMap"]
    assert treecomp.parse(m["gb_regressor"]).trees[-1].n_nodes == 1  # base values: a last leaf
    assert treecomp.parse(m["forest_classifier2"]).decision == "proba_gt_half"
    f2 = treecomp.parse(m["gb_classifier2"])
    assert (f2.n_outputs, f2.transform, f2.decision) == (2, "logistic_ort", "argmax_raw")
    assert treecomp.parse(m["gb_classifier3"]).transform == "softmax_ort"


# -- hand-built ensembles ---------------------------------------------------------------------
GRID = np.array([-2.0, -1.0, -0.5, 0.0, 0.5, 1.0, 1.5, 2.0, 3.0], F32)
MODES = ("BRANCH_LEQ", "BRANCH_LT", "BRANCH_GTE", "BRANCH_GT", "BRANCH_EQ", "BRANCH_NEQ", "BRANCH_MEMBER")


def random_trees(rng, n_trees, n_features, n_targets, v5, max_depth=4, leaf_targets=1, big=False):
    """Abstract trees: internal nodes (feature, mode, value or set, tracks), leaves
    {target: weight}. big: BRANCH_MEMBER sets ORT reads as "bigsets" (a value above 30; ORT
    truncates the row's value there), and then no EQ / NEQ (exact tests: not in one forest)."""
    trees = []
    modes = (MODES[:4] + MODES[6:] if big else MODES) if v5 else MODES[:6]
    for _ in range(n_trees):
        nodes = []
        stack = [(0, None, None)]  # depth, parent index, side
        while stack:
            d, parent, side = stack.pop()
            i = len(nodes)
            if parent is not None:
                nodes[parent][side] = i
            if d < max_depth and (d == 0 or rng.random() < 0.75):
                m = modes[rng.integers(len(modes))]
                if m in ("BRANCH_EQ", "BRANCH_NEQ"):
                    val = F32(rng.integers(0, 4))
                elif m == "BRANCH_MEMBER":
                    val = rng.integers(0, 5, rng.integers(1, 4))
                    val = np.unique(np.r_[val, rng.integers(31, 40)] if big else val).astype(F32)
                else:
                    val = GRID[rng.integers(len(GRID))]
                nodes.append({"f": int(rng.integers(n_features)), "mode": m, "val": val,
                              "miss": int(rng.random() < 0.4), "t": None, "e": None})
                stack.append((d + 1, i, "e"))
                stack.append((d + 1, i, "t"))
            else:
                k = rng.choice(n_targets, size=min(leaf_targets, n_targets), replace=False)
                nodes.append({"leaf": {int(t): F32(rng.normal() * 2).round(3) for t in k}})
        trees.append(nodes)
    return trees


def v3_model(trees, n_features, n_targets, post="NONE", agg="SUM", base=None, labels=None):
    a = {k: [] for k in ("nodes_treeids", "nodes_nodeids", "nodes_featureids", "nodes_modes",
                         "nodes_values", "nodes_truenodeids", "nodes_falsenodeids",
                         "nodes_missing_value_tracks_true")}
    p = "class_" if labels is not None else "target_"
    w = {p + k: [] for k in ("ids", "nodeids", "treeids", "weights")}
    for ti, nodes in enumerate(trees):
        for ni, nd in enumerate(nodes):
            a["nodes_treeids"].append(ti)
            a["nodes_nodeids"].append(ni)
            if "leaf" in nd:
                a["nodes_featureids"].append(0)
                a["nodes_modes"].append("LEAF")
                a["nodes_values"].append(0.0)
                a["nodes_truenodeids"].append(0)
                a["nodes_falsenodeids"].append(0)
                a["nodes_missing_value_tracks_true"].append(0)
                for t, v in nd["leaf"].items():
                    w[p + "ids"].append(t)
                    w[p + "nodeids"].append(ni)
                    w[p + "treeids"].append(ti)
                    w[p + "weights"].append(float(v))
            else:
                a["nodes_featureids"].append(nd["f"])
                a["nodes_modes"].append(nd["mode"])
                a["nodes_values"].append(float(nd["val"]))
                a["nodes_truenodeids"].append(nd["t"])
                a["nodes_falsenodeids"].append(nd["e"])
                a["nodes_missing_value_tracks_true"].append(nd["miss"])
    a.update(w)
    a["post_transform"] = post
    if base is not None:
        a["base_values"] = [float(b) for b in base]
    if labels is not None:
        a["classlabels_int64s"] = list(labels)
        node = helper.make_node("TreeEnsembleClassifier", ["X"], ["label", "scores"], domain="ai.onnx.ml", **a)
        outs = [helper.make_tensor_value_info("label", TensorProto.INT64, [None]),
                helper.make_tensor_value_info("scores", TensorProto.FLOAT, [None, len(labels)])]
    else:
        a["n_targets"] = n_targets
        a["aggregate_function"] = agg
        node = helper.make_node("TreeEnsembleRegressor", ["X"], ["Y"], domain="ai.onnx.ml", **a)
        outs = [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [None, n_targets])]
    return _model([node], n_features, outs, 3)


def v5_model(trees, n_features, n_targets, post=0, agg=1):
    nodes, leaves, roots, members = [], [], [], []
    for tr in trees:
        gid = {}
        for ni, nd in enumerate(tr):  # global ids: internal nodes and leaves numbered apart
            if "leaf" in nd:
                gid[ni] = len(leaves)
                (t, v), = nd["leaf"].items()
                leaves.append((t, v))
            else:
                gid[ni] = len(nodes)
                nodes.append(None)
        roots.append(gid[0])
        for ni, nd in enumerate(tr):
            if "leaf" not in nd:
                nodes[gid[ni]] = (nd, gid[nd["t"]], "leaf" in tr[nd["t"]], gid[nd["e"]], "leaf" in tr[nd["e"]])
    for nd, *_ in nodes:
        if nd["mode"] == "BRANCH_MEMBER":
            members += [*map(float, nd["val"]), float("nan")]
    a = dict(n_targets=n_targets, aggregate_function=agg, post_transform=post, tree_roots=roots,
             nodes_featureids=[nd["f"] for nd, *_ in nodes],
             nodes_modes=helper.make_tensor("m", TensorProto.UINT8, [len(nodes)],
                                            [MODES.index(nd["mode"]) for nd, *_ in nodes]),
             nodes_splits=helper.make_tensor("s", TensorProto.FLOAT, [len(nodes)],
                                             [0.0 if nd["mode"] == "BRANCH_MEMBER" else float(nd["val"])
                                              for nd, *_ in nodes]),
             nodes_truenodeids=[n[1] for n in nodes], nodes_trueleafs=[int(n[2]) for n in nodes],
             nodes_falsenodeids=[n[3] for n in nodes], nodes_falseleafs=[int(n[4]) for n in nodes],
             nodes_missing_value_tracks_true=[nd["miss"] for nd, *_ in nodes],
             leaf_targetids=[t for t, _ in leaves],
             leaf_weights=helper.make_tensor("w", TensorProto.FLOAT, [len(leaves)], [float(v) for _, v in leaves]))
    if members:
        a["membership_values"] = helper.make_tensor("mv", TensorProto.FLOAT, [len(members)], members)
    node = helper.make_node("TreeEnsemble", ["X"], ["Y"], domain="ai.onnx.ml", **a)
    return _model([node], n_features, [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [None, n_targets])], 5)


def _model(nodes, n_features, outs, ml, elem=TensorProto.FLOAT, extra_inputs=()):
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("X", elem, [None, n_features]),
                                       *extra_inputs], outs)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("ai.onnx.ml", ml)],
                             ir_version=9)


def edge_grid(rng, n, n_features):
    """Rows of grid values, their float32 neighbours, NaN, +-0.0, +-inf, integers, 2.5."""
    vals = np.concatenate([GRID, np.nextafter(GRID, F32(np.inf)), np.nextafter(GRID, F32(-np.inf)),
                           np.array([np.nan, -0.0, np.inf, -np.inf, 4.0, 2.5, 31.0, 39.0, 1e9, -3.0], F32)])
    return vals[rng.integers(len(vals), size=(n, n_features))]


CASES = {  # name: (encoding, n_targets, post_transform, aggregate, base, leaf targets)
    "v3_sum": ("v3", 1, "NONE", "SUM", [0.25], 1),
    "v3_average": ("v3", 1, "NONE", "AVERAGE", None, 1),
    # (a non-zero base value needs a tree scoring its target at every leaf: ORT writes 0 for
    # a target no tree scored on a row; test_base_values_of_targets_not_always_scored)
    "v3_targets_logistic": ("v3", 3, "LOGISTIC", "SUM", [0.5, -1.0, 0.0], 3),
    "v3_targets_softmax": ("v3", 3, "SOFTMAX", "SUM", None, 3),
    "v3_targets_softmax_zero": ("v3", 4, "SOFTMAX_ZERO", "SUM", [0.0, 0.0, 0.0, 0.0], 1),
    "v3_targets_softmax_zero_base": ("v3", 4, "SOFTMAX_ZERO", "SUM", [0.0, 0.0, 1.0, 0.0], 4),
    "v3_targets_average": ("v3", 2, "SOFTMAX", "AVERAGE", None, 2),
    "v3_one_target_logistic": ("v3", 1, "LOGISTIC", "SUM", None, 1),  # ORT ignores it
    "v1_targets_softmax": ("v1", 2, "SOFTMAX", "SUM", [1.0, -1.0], 2),  # ai.onnx.ml opset 1
    "v5_sum": ("v5", 1, 0, 1, None, 1),
    "v5_average": ("v5", 1, 0, 0, None, 1),
    "v5_targets_logistic": ("v5", 3, 1, 1, None, 1),
    "v5_targets_softmax": ("v5", 2, 2, 1, None, 1),
    "v5_targets_softmax_zero": ("v5", 3, 3, 0, None, 1),
}


@pytest.mark.parametrize("name", list(CASES))
def test_hand_built_regressors_bit_exact(name):
    enc, K, post, agg, base, lt = CASES[name]
    rng = np.random.default_rng(list(CASES).index(name))
    trees = random_trees(rng, 12, 4, K, enc == "v5", leaf_targets=lt,
                         big=name in ("v5_average", "v5_targets_softmax"))
    model = v5_model(trees, 4, K, post, agg) if enc == "v5" else v3_model(trees, 4, K, post, agg, base)
    if enc == "v1":
        model.opset_import[1].version = 1
    f = check(model, edge_grid(rng, 400, 4), BACKENDS if name in ALL_BACKENDS else ("arrays",))
    assert f.input_dtype == "float32" and f.accumulate_dtype == "float32"


@pytest.mark.parametrize("layout", ["multiclass", "multiclass_base", "binary_positive",
                                    "binary_mixed_logistic", "binary_mixed_none"])
def test_hand_built_classifiers_bit_exact(layout):
    rng = np.random.default_rng(40 + len(layout))
    if layout.startswith("multiclass"):
        trees = random_trees(rng, 10, 3, 3, False, leaf_targets=3)
        base = [0.1, -0.2, 0.3] if layout == "multiclass_base" else None
        model = v3_model(trees, 3, 3, "SOFTMAX", base=base, labels=[5, 7, 9])
    else:
        trees = random_trees(rng, 10, 3, 1, False)
        if layout == "binary_positive":
            for t in trees:
                for nd in t:
                    if "leaf" in nd:
                        nd["leaf"] = {0: abs(nd["leaf"][0]) / 20}
        post = "LOGISTIC" if layout.endswith("logistic") else "NONE"
        model = v3_model(trees, 3, 1, post, base=[0.3], labels=[0, 1])
    check(model, edge_grid(rng, 300, 3), BACKENDS if layout in ALL_BACKENDS else ("arrays",))


def test_member_and_equality_edges():
    """BRANCH_EQ / NEQ and small BRANCH_MEMBER sets: exact float equality (2.5 is no member of
    {2, 3}, -0.0 is a member of {0}, 31, 1e9, -1 are not); bigger sets ("bigsets", a value above
    30): the value truncated to an integer (3.9 and 3.0000002 are members of {3, 38}, -0.5 of
    {0, 38}); NaN takes the missing branch (NEQ: always the TRUE branch)."""
    x = np.array([2.5, 2.0, -0.0, 0.0, np.nan, 3.0, 30.0, 31.0, 1e9, -1.0, np.inf, 3.9,
                  np.nextafter(F32(3), F32(4)), -0.5, -0.99, 38.5, 37.99, 4294967299.0, -np.inf], F32)
    X = np.c_[x, np.zeros_like(x)]
    for mode, val in (("BRANCH_MEMBER", [0.0, 2.0, 3.0, 30.0]), ("BRANCH_MEMBER", [3.0, 38.0]),
                      ("BRANCH_MEMBER", [0.0, 38.0]), ("BRANCH_EQ", 2.0), ("BRANCH_NEQ", 0.0)):
        for miss in (0, 1):
            tree = [{"f": 0, "mode": mode, "val": np.array(val, F32), "miss": miss, "t": 1, "e": 2},
                    {"leaf": {0: F32(1.0)}}, {"leaf": {0: F32(2.0)}}]
            model = v5_model([tree], 2, 1) if mode == "BRANCH_MEMBER" else v3_model([tree], 2, 1)
            check(model, X, backends=("arrays",))


@pytest.mark.parametrize("v5", [False, True])
def test_missing_value_tracks_true_is_one_only(v5):
    """ORT sends NaN to the TRUE branch where nodes_missing_value_tracks_true is 1, and for
    any other value (0, 2, -1) to the FALSE branch: in opset 3 and opset 5 alike."""
    X = np.array([[np.nan, 0.0], [0.0, np.nan], [np.nan, np.nan], [1.0, 1.0], [0.0, 0.0]], F32)
    for miss in (0, 1, 2, -1, 7):
        tree = [{"f": 0, "mode": "BRANCH_LEQ", "val": F32(0.5), "miss": miss, "t": 1, "e": 2},
                {"f": 1, "mode": "BRANCH_GT", "val": F32(0.5), "miss": miss, "t": 3, "e": 4},
                {"leaf": {0: F32(1.0)}}, {"leaf": {0: F32(2.0)}}, {"leaf": {0: F32(3.0)}}]
        model = v5_model([tree], 2, 1) if v5 else v3_model([tree], 2, 1)
        f = check(model, X)
        assert interp.predict(f, X[:1])[0] == (3.0 if miss == 1 else 1.0), miss


# -- refusals and corrupt input ---------------------------------------------------------------
def _stump(**over):
    tree = [{"f": 0, "mode": "BRANCH_LEQ", "val": F32(0.5), "miss": 0, "t": 1, "e": 2},
            {"leaf": {0: F32(1.0)}}, {"leaf": {0: F32(2.0)}}]
    return v3_model([tree], 2, 1, **over)


def _attr(model, name, value):
    node = model.graph.node[0]
    for a in list(node.attribute):
        if a.name == name:
            node.attribute.remove(a)
    if value is not None:
        node.attribute.append(helper.make_attribute(name, value))
    return model


@pytest.mark.parametrize("make, match", [
    (lambda: _stump(post="PROBIT"), "PROBIT"),
    (lambda: _attrs(_stump(), target_ids=[0, 0, 0], target_nodeids=[1, 1, 2], target_treeids=[0, 0, 0],
                    target_weights=[1.0, 2.0, 3.0]), "two weights"),  # ORT adds them one by one
    (lambda: v3_model([[{"f": 0, "mode": "BRANCH_LEQ", "val": F32(0.5), "miss": 0, "t": 1, "e": 1},
                        {"leaf": {0: F32(1.0)}}]], 2, 1), "reachable twice"),
    (lambda: _stump(agg="MAX"), "MAX"),
    (lambda: _stump(agg="AVERAGE", base=[1.0]), "AVERAGE"),
    (lambda: _attr(_stump(), "nodes_values_as_tensor", helper.make_tensor("v", TensorProto.DOUBLE, [3], [0.5, 0, 0])), "as_tensor"),
    (lambda: _model(list(_stump().graph.node), 2, list(_stump().graph.output), 3, elem=TensorProto.DOUBLE), "DOUBLE"),
    (lambda: _with_node(_stump(), helper.make_node("Add", ["Y", "Y"], ["Z"])), "Add"),
    (lambda: _with_node(_stump(), helper.make_node("Cast", ["Y"], ["Z"], to=TensorProto.DOUBLE)), "Cast"),
    (lambda: v5_model([[{"f": 0, "mode": "BRANCH_MEMBER", "val": np.array([1, 40], F32), "miss": 0, "t": 1, "e": 2},
                        {"leaf": {0: F32(1.0)}}, {"f": 1, "mode": "BRANCH_EQ", "val": F32(1), "miss": 0, "t": 3, "e": 4},
                        {"leaf": {0: F32(2.0)}}, {"leaf": {0: F32(3.0)}}]], 2, 1), "mixing"),
    (lambda: v3_model([[{"f": 0, "mode": "BRANCH_EQ", "val": F32(2.5), "miss": 0, "t": 1, "e": 2},
                        {"leaf": {0: F32(1.0)}}, {"leaf": {0: F32(2.0)}}]], 2, 1), "non-negative integers"),
    (lambda: v3_model([[{"f": 0, "mode": "BRANCH_LEQ", "val": F32(0.5), "miss": 0, "t": 1, "e": 2},
                        {"leaf": {1: F32(1.0)}}, {"leaf": {1: F32(2.0)}}]], 2, 2, labels=[0, 1]), "two-class"),
])
def test_unsupported_models_are_refused(make, match):
    with pytest.raises(UnsupportedModelError, match=match):
        treecomp.parse(make())


def _attrs(model, **values):
    for k, v in values.items():
        _attr(model, k, v)
    return model


def _with_node(model, node):
    model.graph.node.append(node)
    return model


@pytest.mark.parametrize("name, value, match", [
    ("nodes_truenodeids", [7, 0, 0], "missing"),
    ("nodes_truenodeids", [0, 0, 0], "itself"),
    ("nodes_modes", ["BRANCH_XX", "LEAF", "LEAF"], "unknown node mode"),
    ("nodes_nodeids", [0, 1, 1], "twice"),
    ("target_nodeids", [1, 0], "no weight"),  # a weight on an internal node is ignored
    ("target_nodeids", [1, 1], "no weight"),
    ("target_nodeids", [1, 9], "does not exist"),
    ("nodes_featureids", [5, 0, 0], "feature 5"),
    ("target_ids", [0, 3], "outside"),
    ("nodes_values", [0.5], "one entry per node"),
])
def test_corrupt_attributes_are_invalid(name, value, match):
    with pytest.raises(InvalidModelError, match=match):
        treecomp.parse(_attr(_stump(), name, value))


def test_passthrough_chain_is_linear():
    """20,000 Identity nodes after the ensemble: read in one pass (not one pass per node)."""
    m = _stump()
    prev = "Y"
    for i in range(20000):
        m.graph.node.append(helper.make_node("Identity", [prev], [f"I{i}"]))
        prev = f"I{i}"
    m.graph.output[0].name = prev
    assert treecomp.parse(m).n_trees == 1


def test_graph_level_corruption_is_invalid():
    m = _stump()
    m.graph.node[0].attribute.append(helper.make_attribute("nodes_valuez", [0.5, 0.0, 0.0]))
    with pytest.raises(InvalidModelError, match="nodes_valuez"):  # ORT: unrecognized attribute
        treecomp.parse(m)
    m = _stump()
    m.opset_import[1].version = 5  # TreeEnsembleRegressor is deprecated there: ORT refuses
    with pytest.raises(InvalidModelError, match="deprecated"):
        treecomp.parse(m)
    m = _stump()
    m.graph.output[0].name = "nowhere"
    with pytest.raises(InvalidModelError, match="not computed"):
        treecomp.parse(m)
    m = _stump()
    del m.opset_import[1]
    with pytest.raises(InvalidModelError, match="ai.onnx.ml"):
        treecomp.parse(m)


def test_hostile_files(tmp_path):
    """Truncated, bit-flipped and random bytes: InvalidModelError (or a clear refusal), never a
    crash; the .onnx suffix gets the ONNX reader's error for content it cannot place."""
    good = _stump().SerializeToString()
    p = tmp_path / "m.onnx"
    p.write_bytes(good)
    assert treecomp.parse(p).n_trees == 1
    rng = np.random.default_rng(0)
    for i in range(60):
        b = bytearray(good)
        how = i % 3
        if how == 0:
            b = b[:rng.integers(1, len(b))]
        elif how == 1:
            for _ in range(3):
                b[rng.integers(len(b))] ^= 1 << int(rng.integers(8))
        else:
            b = bytearray(rng.integers(0, 256, rng.integers(1, 200), dtype=np.uint8).tobytes())
        p.write_bytes(bytes(b))
        try:
            treecomp.parse(p)
        except (InvalidModelError, UnsupportedModelError):
            pass
    (tmp_path / "x.onnx").write_bytes(b"\x00\x01garbage")
    with pytest.raises(InvalidModelError):
        treecomp.parse(tmp_path / "x.onnx")


def test_claims_the_file_cannot_back_are_refused(tmp_path):
    """A 516-byte file with n_targets = 2^20 and SOFTMAX made ORT-sized outputs (23 GB for 200
    rows): targets no leaf and no base value writes are refused, and so is a tree whose few
    weights span a huge target range (dense IR leaves); before any large allocation."""
    import tracemalloc
    for v5 in (False, True):
        tree = [{"f": 0, "mode": "BRANCH_LEQ", "val": F32(0.5), "miss": 0, "t": 1, "e": 2},
                {"leaf": {0: F32(1.0)}}, {"leaf": {0: F32(2.0)}}]
        model = v5_model([tree], 2, 1 << 20, post=2) if v5 else v3_model([tree], 2, 1 << 20, "SOFTMAX")
        p = tmp_path / "claim.onnx"
        p.write_bytes(model.SerializeToString())
        assert p.stat().st_size < 600
        tracemalloc.start()
        with pytest.raises(UnsupportedModelError, match="n_targets=1048576"):
            treecomp.parse(p)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert peak < 20e6, peak
        # targets backed by base values are real outputs (0 where none is scored: ORT's rule)
        if not v5:
            backed = v3_model([tree], 2, 4, "SOFTMAX", base=[0.5, 0.0, 0.0, 0.0])
            check(backed, np.array([[0.0, 0.0], [1.0, 0.0], [np.nan, 0.0]], F32))
    sparse = [{"f": 0, "mode": "BRANCH_LEQ", "val": F32(0.5), "miss": 0, "t": 1, "e": 2},
              {"leaf": {0: F32(1.0)}}, {"leaf": {(1 << 20) - 1: F32(2.0)}}]
    with pytest.raises(UnsupportedModelError, match="dense leaf values"):
        treecomp.parse(v3_model([sparse], 2, 1 << 20))


@pytest.mark.parametrize("post", ["LOGISTIC", "SOFTMAX", "SOFTMAX_ZERO"])
def test_transforms_run_in_blocks(post, monkeypatch):
    """ORT's post transforms in numpy peak near the size of what they return (they peaked at
    ~30x: a dozen float64 temporaries of the whole batch inside expf), and the blocks change
    no bit: against ORT, and against one block for the whole batch."""
    from treecomp import outputs
    rng = np.random.default_rng(21)
    model = v3_model(random_trees(rng, 8, 4, 3, False, leaf_targets=3), 4, 3, post)
    p = treecomp.compile(model, backend="arrays")
    X = edge_grid(rng, 300_000, 4)
    p.predict(X[:10])
    got, peak = traced_peak(lambda: p.predict(X))
    # the margins, the outputs, and one block's temporaries (at most 16 float64 arrays of a
    # block): was ~30x the outputs (108 MB here)
    assert peak < 2 * got.nbytes + 16 * 8 * outputs.TRANSFORM_BLOCK, (peak, got.nbytes)
    assert_same(ort_outputs(model, X)[1], got)
    monkeypatch.setattr(outputs, "TRANSFORM_BLOCK", 1 << 40)
    assert_same(got, p.predict(X))
    monkeypatch.setattr(outputs, "TRANSFORM_BLOCK", 5)  # blocks of 2 rows, the last one of 3
    assert_same(got[:7], p.predict(X[:7]))


def test_base_values_of_targets_not_always_scored():
    """ORT 1.32 writes has_score ? score + base : 0 for each target of a several-target
    regressor: a non-zero base value of a target that some rows get no score for is refused
    (it was added to every row); zero base values, or a target scored on every row, are exact."""
    X = np.array([[0.0, 0.0], [1.0, 0.0], [np.nan, 1.0]], F32)
    tree = [{"f": 0, "mode": "BRANCH_LEQ", "val": F32(0.5), "miss": 0, "t": 1, "e": 2},
            {"leaf": {0: F32(1.0), 1: F32(0.25)}}, {"leaf": {0: F32(2.0)}}]
    for post in ("NONE", "SOFTMAX"):
        with pytest.raises(UnsupportedModelError, match="target 1 has a non-zero base value"):
            treecomp.parse(v3_model([tree], 2, 2, post, base=[0.3, 0.5]))
        check(v3_model([tree], 2, 2, post, base=[0.3, 0.0]), X)
        check(v3_model([tree], 2, 3, post, base=[0.3, 0.0, 0.0]), X)
        full = [dict(nd) for nd in tree]
        full[2] = {"leaf": {0: F32(2.0), 1: F32(-1.0)}}
        check(v3_model([full], 2, 2, post, base=[0.3, 0.5]), X)


def _after_scores(model, op, const, *, first=False, node_const=False, dtype=TensorProto.FLOAT,
                  dims=None, on="scores"):
    """`model` (a classifier: outputs label, scores) with `op`(scores, const) as its score output."""
    m = model
    vals = np.atleast_1d(np.asarray(const, np.float64)).tolist()
    dims = list(np.shape(const)) if dims is None else dims
    tensor = helper.make_tensor("c", dtype, dims, vals)
    if node_const:
        m.graph.node.append(helper.make_node("Constant", [], ["c"], value=tensor))
    else:
        m.graph.initializer.append(tensor)
    ins = ["c", on] if first else [on, "c"]
    m.graph.node.append(helper.make_node(op, ins, ["out"]))
    for o in m.graph.output:
        if o.name == on:
            o.name = "out"
    return m


def _classifier(K, seed=50):
    rng = np.random.default_rng(seed)
    if K == 2:  # one score per row (weights for class 0 only), LOGISTIC: onnxmltools' binary layout
        return v3_model(random_trees(rng, 8, 3, 1, False), 3, 1, "LOGISTIC", labels=[0, 1]), rng
    return v3_model(random_trees(rng, 8, 3, K, False, leaf_targets=K), 3, K, "SOFTMAX",
                    labels=list(range(10, 10 + K))), rng


@pytest.mark.parametrize("how", [dict(op="Mul", const=1.0), dict(op="Mul", const=1.0, first=True),
                                 dict(op="Mul", const=[1.0]), dict(op="Mul", const=[[1.0, 1.0, 1.0]]),
                                 dict(op="Mul", const=1.0, node_const=True),
                                 dict(op="Div", const=1.0), dict(op="Add", const=-0.0),
                                 dict(op="Add", const=-0.0, first=True), dict(op="Sub", const=0.0)])
def test_identity_arithmetic_after_the_ensemble(how):
    """onnxmltools' LightGBM classifier ends in Mul(probabilities, 1.0): arithmetic by an
    identity constant changes no bit, so the graph is read (outputs against ORT)."""
    for K in (2, 3):
        if K == 2 and np.ndim(how["const"]) == 2:
            continue
        model, rng = _classifier(K)
        model = _after_scores(model, **how)
        check(model, edge_grid(rng, 200, 3))


@pytest.mark.parametrize("how, match", [
    (dict(op="Mul", const=2.0), "changes no value"),
    (dict(op="Mul", const=[1.0, 2.0, 1.0]), "changes no value"),
    (dict(op="Add", const=0.0), "changes no value"),          # -0.0 + 0.0 is +0.0
    (dict(op="Sub", const=-0.0), "changes no value"),
    (dict(op="Sub", const=0.0, first=True), "second operand"),  # 0 - x
    (dict(op="Div", const=1.0, first=True), "second operand"),  # 1 / x
    (dict(op="Mul", const=1.0, dtype=TensorProto.DOUBLE), "DOUBLE"),
    (dict(op="Mul", const=[[1.0], [1.0]]), "shape"),          # (2, 1): would broadcast rows
    (dict(op="Mul", const=[[[1.0]]]), "shape"),                # rank 3
    (dict(op="Mul", const=[1.0, 1.0]), "shape"),               # 2 columns for 3 classes
    (dict(op="Mul", const=1.0, on="label"), "labels"),
])
def test_arithmetic_that_changes_values_is_refused(how, match):
    model, _ = _classifier(3)
    with pytest.raises(UnsupportedModelError, match=match):
        treecomp.parse(_after_scores(model, **how))


def test_identity_arithmetic_with_zipmap():
    """Mul before ZipMap is read (outputs against ORT); after it (on the maps) it is refused,
    as ORT refuses it."""
    model, rng = _classifier(3)
    model = _after_scores(model, "Mul", 1.0)
    model.graph.node.append(helper.make_node("ZipMap", ["out"], ["zm"], domain="ai.onnx.ml",
                                             classlabels_int64s=[10, 11, 12]))
    model.graph.output[1].CopyFrom(helper.make_value_info(
        "zm", helper.make_sequence_type_proto(helper.make_map_type_proto(TensorProto.INT64,
                                                                         helper.make_tensor_type_proto(TensorProto.FLOAT, [])))))
    check(model, edge_grid(rng, 100, 3))
    model.graph.initializer.append(helper.make_tensor("c2", TensorProto.FLOAT, [], [1.0]))
    model.graph.node.append(helper.make_node("Mul", ["zm", "c2"], ["bad"]))
    with pytest.raises(UnsupportedModelError, match="ZipMap"):
        treecomp.parse(model)
