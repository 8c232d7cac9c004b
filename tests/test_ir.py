"""The IR: validation, digests, serialisation, the interpreter against the naive walker."""

import numpy as np
import pytest
from hypothesis import given, strategies as st

from treecomp import interp, numparse, passes
from treecomp.errors import InvalidModelError
from treecomp.ir import Forest, Tree, leaf_tree
from tests.randforest import FOREST_VARIANTS, chain_tree, random_forest, random_rows, random_tree

STUMP = dict(left=[1, -1, -1], right=[2, -1, -1], feature=[0, -1, -1], threshold=[0.5, 0, 0],
             default_left=[True, False, False], value=[0.0, 1.0, 2.0])


def forest_of(*trees, **kw):
    kw.setdefault("n_features", 2)
    return Forest(trees=trees, n_outputs=1, tree_output=[0] * len(trees), base_score=[0.0], **kw)


@pytest.mark.parametrize("change, message", [
    (dict(left=[1, -1, 1]), "children"),
    (dict(left=[2, -1, -1], right=[2, -1, -1]), "parents"),
    (dict(left=[0, -1, -1]), "larger indices"),
    (dict(left=[1, -1, -1], right=[5, -1, -1]), "out of range"),
    (dict(threshold=[np.nan, 0, 0]), "NaN threshold"),
    (dict(feature=[-1, -1, -1]), "feature"),
    (dict(value=[0.0, np.inf, 2.0]), "non-finite"),
    (dict(value=[0.0, 1.0]), "value"),
])
def test_tree_validation(change, message):
    with pytest.raises(InvalidModelError, match=message):
        Tree(**{**STUMP, **change})


def test_forest_validation():
    t = Tree(**STUMP)
    with pytest.raises(InvalidModelError, match="feature"):
        forest_of(t, n_features=0)
    with pytest.raises(InvalidModelError, match="splits on feature"):
        Forest(trees=(Tree(**{**STUMP, "feature": [5, -1, -1]}),), n_features=2, n_outputs=1,
               tree_output=[0], base_score=[0.0])
    with pytest.raises(InvalidModelError, match="transform"):
        forest_of(t, transform="tanh")
    with pytest.raises(InvalidModelError, match="needs class labels"):
        forest_of(t, decision="argmax_raw")
    with pytest.raises(InvalidModelError, match="beyond n_outputs"):
        Forest(trees=(t,), n_features=2, n_outputs=1, tree_output=[1], base_score=[0.0])
    with pytest.raises(InvalidModelError, match="at least one tree"):
        Forest(trees=(), n_features=2, n_outputs=1, tree_output=[], base_score=[0.0])


def test_arrays_are_read_only_and_copied():
    src = np.array([1, -1, -1])
    t = Tree(**{**STUMP, "left": src})
    src[0] = 99
    assert t.left[0] == 1
    with pytest.raises(ValueError):
        t.left[0] = 2


def test_digest_and_round_trip():
    f = random_forest(3, **FOREST_VARIANTS["categorical"])
    g = Forest.from_bytes(f.to_bytes())
    assert g.digest() == f.digest()
    X = random_rows(f, 100)
    np.testing.assert_array_equal(interp.predict_raw(f, X), interp.predict_raw(g, X))
    assert f.replace(provenance="elsewhere").digest() == f.digest()
    assert f.replace(comparison="<").digest() != f.digest()
    assert random_forest(4).digest() != random_forest(3).digest()


def test_corrupt_ir_file(tmp_path):
    with pytest.raises(InvalidModelError, match="corrupt"):
        Forest.from_bytes(b"not a zip")
    data = bytearray(random_forest(1).to_bytes())
    with pytest.raises(InvalidModelError):
        Forest.from_bytes(bytes(data[: len(data) // 2]))


def test_interp_matches_naive_walker_on_every_variant():
    for i, (name, kw) in enumerate(FOREST_VARIANTS.items()):
        f = random_forest(10 + i, **kw)
        X = random_rows(f, 150, seed=i)
        np.testing.assert_array_equal(interp.predict_raw(f, X), interp.walk_raw(f, X), err_msg=name)


def test_deep_chain_tree_no_recursion():
    rng = np.random.default_rng(0)
    t = chain_tree(1500, 3, rng)
    assert t.max_depth == 1500
    f = forest_of(t, n_features=3)
    X = rng.uniform(-1.2, 1.2, size=(200, 3))
    np.testing.assert_array_equal(interp.predict_raw(f, X), interp.walk_raw(f, X))


def test_single_leaf_forest():
    f = forest_of(leaf_tree(2.5), leaf_tree(-1.0))
    np.testing.assert_array_equal(interp.predict(f, np.zeros((3, 2))), [1.5, 1.5, 1.5])


def test_categorical_semantics_by_hand():
    bits = np.zeros((1, 1), np.uint32)
    bits[0, 0] = (1 << 3) | (1 << 0)
    t = Tree(left=[1, -1, -1], right=[2, -1, -1], feature=[0, -1, -1], threshold=[0, 0, 0],
             default_left=[True, False, False], value=[0, 1, 2], cat_index=[0, -1, -1],
             cat_bits=bits, cat_other_left=[False])
    f = forest_of(t, n_features=1)
    X = np.array([[3.0], [3.9], [0.0], [-0.0], [1.0], [np.nan], [-1.0], [32.0], [1e9], [np.inf], [-0.5]])
    got = interp.predict(f, X)
    #              3    3.9  0    -0   1    nan  -1   32   big  inf  -0.5 (invalid: < 0)
    np.testing.assert_array_equal(got, [1, 1, 1, 1, 2, 1, 2, 2, 2, 2, 2])


@given(st.floats(allow_nan=False, width=64), st.sampled_from(["<", "<="]))
def test_threshold_lowering_is_exact(t, cmp):
    tree = Tree(left=[1, -1, -1], right=[2, -1, -1], feature=[0, -1, -1], threshold=[t, 0, 0],
                default_left=[False] * 3, value=[0, 0, 0])
    f = forest_of(tree, n_features=1, comparison=cmp)
    t32 = passes.comparison_thresholds(tree, f)[0]
    with np.errstate(over="ignore"):   # beyond float32's range (or one step past it): +-inf
        x = np.float32(t)
        near = (np.nextafter(x, np.float32(-np.inf)), np.nextafter(x, np.float32(np.inf)))
    for v in (x, *near, np.float32(0.0), np.float32(-np.inf), np.float32(np.inf)):
        want = (np.float64(v) < t) if cmp == "<" else (np.float64(v) <= t)
        got = (v < t32) if cmp == "<" else (v <= t32)
        assert want == got, (t, v, t32)


# -- integer arrays are not wrapped (issue 20, item 5) ------------------------------------------
@pytest.mark.parametrize("change, message", [
    # int64 node 2^32 + 1 used to wrap to node 1: a valid-looking stump
    (dict(left=np.array([2**32 + 1, -1, -1], np.int64)), "outside"),
    (dict(right=np.array([2, -1, -2**33 - 1], np.int64)), "outside"),
    (dict(feature=np.array([2**31, -1, -1], np.int64)), "outside"),
    (dict(left=[1.5, -1, -1]), "non-integral"),
    (dict(feature=[np.nan, -1, -1]), "non-integral"),
    (dict(feature=[np.inf, -1, -1]), "non-integral"),
    (dict(default_left=[2, 0, 0]), "outside"),
    (dict(cat_index=np.array([-1, -1, 2**40])), "outside"),
    (dict(left=np.array(["1", "-1", "-1"])), "<U2"),
    (dict(left=np.array([2**63], np.uint64).tolist() + [-1, -1]), "outside|convert"),
])
def test_int_arrays_out_of_range_are_rejected(change, message):
    with pytest.raises(InvalidModelError, match=message):
        Tree(**{**STUMP, **change})


def test_int_arrays_in_range_are_exact():
    t = Tree(**{**STUMP, "left": np.array([1.0, -1.0, -1.0]), "right": np.array([2, -1, -1], np.int64),
                "feature": np.array([0, 2**32 - 1, 2**32 - 1], np.uint32).view(np.int32),
                "default_left": np.array([1, 0, 0], np.int8)})
    assert t.left.dtype == np.int32 and t.left.tolist() == [1, -1, -1]
    assert t.right.tolist() == [2, -1, -1] and t.default_left.tolist() == [True, False, False]
    assert t.feature.tolist() == [0, -1, -1]
    bits = np.array([[2**32 - 1]], np.int64)  # every category: fits uint32 exactly
    t = Tree(**{**STUMP, "cat_index": [0, -1, -1], "cat_bits": bits, "cat_other_left": [True]})
    assert t.cat_bits.dtype == np.uint32 and int(t.cat_bits[0, 0]) == 2**32 - 1
    with pytest.raises(InvalidModelError, match="outside"):
        forest_of(Tree(**STUMP)).replace(tree_output=np.array([2**32], np.int64))


# -- IR files: every corruption an InvalidModelError, memory bounded (items 12, 14) --------------
def _ir_members(f: Forest) -> list:
    import io
    import zipfile
    with zipfile.ZipFile(io.BytesIO(f.to_bytes())) as z:
        return [(i.filename, z.read(i)) for i in z.infolist()]


def _ir_zip(members, method=None) -> bytes:
    import io
    import warnings
    import zipfile
    buf = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # duplicate names
        with zipfile.ZipFile(buf, "w", compression=method or zipfile.ZIP_DEFLATED) as z:
            for name, b in members:
                z.writestr(name, b)
    return buf.getvalue()


def _npy(a) -> bytes:
    import io
    b = io.BytesIO()
    np.save(b, a, allow_pickle=False)
    return b.getvalue()


def test_ir_zip_bomb_is_refused_before_inflating():
    """A 64 MiB member deflated to 64 KiB: refused from the directory's sizes, never inflated
    (a 1 MB file used to take 2 GB before failing)."""
    import tracemalloc
    f = random_forest(1, n_trees=2)
    members = [(n, bytes(1 << 26) if n == "t1.value.npy" else b) for n, b in _ir_members(f)]
    data = _ir_zip(members)
    assert len(data) < 1 << 18
    tracemalloc.start()
    try:
        with pytest.raises(InvalidModelError, match="zip bomb"):
            Forest.from_bytes(data)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 8 << 20, peak


def test_ir_npy_header_claiming_a_huge_shape():
    """np.load allocated what the header claimed; the reader checks the data's size first."""
    f = random_forest(1, n_trees=1)
    members = _ir_members(f)
    k = [n for n, _ in members].index("t0.threshold.npy")
    b = members[k][1]
    hlen = int.from_bytes(b[8:10], "little")
    header = b[10:10 + hlen].decode("latin1")
    n = f.trees[0].n_nodes
    huge = header.replace(f"({n},)", f"({2**40},)").ljust(hlen)[:hlen]
    assert huge != header
    members[k] = (members[k][0], b[:10] + huge.encode("latin1") + b[10 + hlen:])
    with pytest.raises(InvalidModelError, match="needs .* bytes of data"):
        Forest.from_bytes(_ir_zip(members))


@pytest.mark.parametrize("case", [
    "duplicate", "missing", "extra", "n_trees-huge", "n_trees-float", "average-string",
    "n_features-float", "classes-bad-dtype", "labels-overflow", "npy-tokenize", "npy-object",
    "npy-complex", "int64-wrap", "compression", "encrypted", "trailing", "meta-not-object",
    "tree-invalid",
])
def test_corrupt_ir_files_raise_invalid_model_error(case):
    import json
    import struct
    import zipfile
    f = random_forest(2, n_trees=2).replace(decision="raw_ge_0", classes=(np.array([0, 1]),))
    members = _ir_members(f)
    names = [n for n, _ in members]
    meta = json.loads(dict(members)["meta.json"])

    def with_meta(**kw):
        return [("meta.json", json.dumps({**meta, **kw}).encode()) if n == "meta.json" else (n, b)
                for n, b in members]

    def with_array(name, a):
        return [(n, _npy(a) if n == name else b) for n, b in members]
    data = None
    if case == "duplicate":
        members = members + [("t0.left.npy", dict(members)["t1.left.npy"])]
    elif case == "missing":
        del members[names.index("t1.value.npy")]
    elif case == "extra":
        members = members + [("t2.left.npy", _npy(np.zeros(1, np.int32)))]
    elif case == "n_trees-huge":
        members = with_meta(n_trees=10**12)
    elif case == "n_trees-float":
        members = with_meta(n_trees=2.0)
    elif case == "average-string":  # bool("false") is True: never coerced
        members = with_meta(average="false")
    elif case == "n_features-float":
        members = with_meta(n_features=6.5)
    elif case == "classes-bad-dtype":
        members = with_meta(classes=[{"dtype": "V8", "values": [0, 1]}])
    elif case == "labels-overflow":
        members = with_meta(classes=[{"dtype": "<i1", "values": [0, 300]}])
    elif case == "npy-tokenize":  # an unterminated header: tokenize.TokenError in numpy
        b = dict(members)["t0.left.npy"]
        members = [(n, b[:10] + b"(" * 20 + b[30:] if n == "t0.left.npy" else x) for n, x in members]
    elif case == "npy-object":
        members = with_array("t0.threshold.npy", np.zeros((0,), "U3"))
    elif case == "npy-complex":
        members = with_array("t0.threshold.npy", f.trees[0].threshold.astype(np.complex128))
    elif case == "int64-wrap":  # child 2^32 + 1 would wrap to node 1
        left = f.trees[0].left.astype(np.int64)
        left[0] += 2**32
        members = with_array("t0.left.npy", left)
    elif case == "tree-invalid":
        members = with_array("t0.left.npy", np.zeros_like(f.trees[0].left))
    elif case == "meta-not-object":
        members = [("meta.json", b"[1, 2]") if n == "meta.json" else (n, b) for n, b in members]
    data = _ir_zip(members)
    if case in ("compression", "encrypted"):  # the central directory's method / flag bits
        z = bytearray(data)
        cd = z.find(b"PK\x01\x02")
        if case == "compression":
            struct.pack_into("<H", z, cd + 10, 99)   # zipfile: NotImplementedError
        else:
            struct.pack_into("<H", z, cd + 8, 1)     # zipfile: RuntimeError (password)
        data = bytes(z)
    elif case == "trailing":
        data = data + b"\0" * 10
    with pytest.raises(InvalidModelError, match="corrupt treecomp IR file|not a treecomp IR"):
        Forest.from_bytes(data)
    assert zipfile.is_zipfile  # (imported for the method constants above)


def test_head_from_json_checks_what_outputs_index():
    """A corrupt artifact's Head failed in the first predict (AssertionError 'unknown
    transform', IndexError on the labels): now InvalidModelError when it is read."""
    import json
    from treecomp.ir import Head, head_of
    f = random_forest(2, n_trees=2, n_outputs=3, transform="softmax").replace(
        decision="argmax_proba", classes=(np.array([0, 1, 2]),))
    good = json.loads(head_of(f).to_json())
    assert Head.from_json(json.dumps(good)).n_classes == (3,)
    for change in (dict(transform=7), dict(transform="tanh"), dict(decision="maybe"),
                   dict(classes=[]), dict(classes=[{"dtype": "<i8", "values": [0, 1]}]),
                   dict(decision="raw_ge_0"), dict(decision="none"),
                   dict(n_features=0), dict(n_features="6"), dict(n_features=6.0),
                   dict(allow_nan="no"), dict(feature_names=["a"]), dict(feature_names=[1, 2, 3, 4, 5, 6]),
                   dict(input_dtype="float16"), dict(exp_lib="musl"), dict(digest=5),
                   dict(n_trees=0), dict(pandas_categories="maybe"),
                   dict(classes=[{"dtype": "<i1", "values": [0, 1, 300]}]), dict(label_shape="cell"),
                   dict(label_shape="column", decision="none", classes=[])):
        with pytest.raises(InvalidModelError, match="corrupt model metadata"):
            Head.from_json(json.dumps({**good, **change}))
    with pytest.raises(InvalidModelError, match="corrupt model metadata"):
        Head.from_json("[1]")


def test_label_shape_column_round_trips_and_shapes_labels(tmp_path):
    """label_shape "column" (CatBoost's multiclass predict): predict's labels (n, 1), through
    the interpreter, every backend and a single row; kept by IR files and artifacts; the digest
    of a forest without it unchanged; refused where labels are not one argmax column."""
    import treecomp
    from treecomp.ir import head_of
    f = random_forest(3, n_trees=3, n_outputs=3).replace(decision="argmax_raw",
                                                         classes=(np.array([10, 20, 30]),))
    g = f.replace(label_shape="column")
    assert f.digest() != g.digest() and "label_shape" not in f.meta()
    X = random_rows(f, 50)
    want = interp.predict(f, X)[:, None]
    assert want.shape == (len(X), 1) and np.array_equal(interp.predict(g, X), want)
    assert head_of(g).label_shape == "column"
    g.save(tmp_path / "g.tcir")
    assert Forest.load(tmp_path / "g.tcir").label_shape == "column"
    for backend, suffix in (("arrays", ".tc"), ("c", ".so")):
        p = treecomp.compile(g, backend=backend)
        np.testing.assert_array_equal(p.predict(X), want, strict=True)
        np.testing.assert_array_equal(p.predict(X[:1]), want[:1], strict=True)
        p.save(tmp_path / f"g{suffix}")
        np.testing.assert_array_equal(treecomp.load(tmp_path / f"g{suffix}").predict(X), want, strict=True)
    for bad in (dict(decision="raw_ge_0", classes=(np.array([0, 1]),), n_outputs=1,
                     tree_output=np.zeros(3, np.int32), base_score=[0.0]),
                dict(decision="none", classes=())):
        with pytest.raises(InvalidModelError, match="label_shape"):
            f.replace(label_shape="column", **bad)


def test_base_link_is_validated_round_trips_and_is_evaluated():
    """base_link: base_score holds the link's probabilities (0 < p < 1), the IR file and the
    artifact head carry both, the digest sees the link, and the margins are the link's."""
    import json
    from treecomp import outputs
    from treecomp.ir import Head, head_of
    t = Tree(**STUMP)
    three = dict(n_outputs=3, tree_output=[0], base_score=[0.3, 0.3, 0.4], n_features=2)
    f = Forest(trees=(t,), base_link="multinomial_logit", **three)
    g = Forest.from_bytes(f.to_bytes())
    assert g.base_link == "multinomial_logit" and g.digest() == f.digest()
    assert f.digest() != f.replace(base_link="identity").digest()
    assert forest_of(t).digest() == forest_of(t, base_link="identity").digest()  # unchanged
    p = np.array([[0.3, 0.3, 0.4]])
    want = np.log(p / np.exp(np.mean(np.log(p), axis=1))[:, None])[0]
    np.testing.assert_array_equal(outputs.base_margins(f), want)
    np.testing.assert_array_equal(interp.predict_raw(f, np.zeros((2, 2)))[0], want + [1.0, 0, 0])
    for bad, message in ((dict(base_link="probit"), "base_link"),
                         (dict(base_link="multinomial_logit", base_score=[0.5, 0.0, 0.5], n_outputs=3), r"\(0, 1\)"),
                         (dict(base_link="logit", base_score=[1.0]), r"\(0, 1\)"),
                         (dict(base_link="logit", base_score=[0.2, 0.8], n_outputs=2), "takes one")):
        with pytest.raises(InvalidModelError, match=message):
            Forest(trees=(t,), **{**three, "n_outputs": 1, "base_score": [0.5], **bad})
    head = json.loads(head_of(f).to_json())
    assert head["base_link"] == "multinomial_logit" and head["base_score"] == [0.3, 0.3, 0.4]
    assert Head.from_json(json.dumps(head)).base_score == (0.3, 0.3, 0.4)
    for change in (dict(base_link="probit"), dict(base_score=[0.3, 0.7]), dict(base_score=[0.3, 0.3, 1.5]),
                   dict(base_score="0.3"), dict(base_link=None)):
        with pytest.raises(InvalidModelError, match="corrupt model metadata"):
            Head.from_json(json.dumps({**head, **change}))
    plain = json.loads(head_of(forest_of(t)).to_json())
    assert "base_link" not in plain and "base_score" not in plain


# -- build_trees: forest-wide arrays -> trees, validated in one pass ------------------------------
def _flat(trees, ids=True, cover=True):
    """build_trees' arguments for these trees (their arrays concatenated)."""
    cat = lambda name: np.concatenate([getattr(t, name) for t in trees])  # noqa: E731
    return dict(sizes=[t.n_nodes for t in trees], left=cat("left"), right=cat("right"),
                feature=cat("feature"), threshold=cat("threshold"),
                default_left=cat("default_left"), value=cat("value"),
                node_ids=np.concatenate([np.arange(t.n_nodes) + 7 for t in trees]) if ids else None,
                cover=np.concatenate([np.abs(t.threshold) + t.n_nodes for t in trees]) if cover else None)


def _one_by_one(sizes, **cols):
    offs = np.concatenate([[0], np.cumsum(sizes)])
    return [Tree(**{k: None if v is None else np.asarray(v)[a:b] for k, v in cols.items()})
            for a, b in zip(offs[:-1], offs[1:])]


def _same_tree(a: Tree, b: Tree) -> None:
    for name in ("left", "right", "feature", "threshold", "default_left", "value", "cat_index",
                 "cat_bits", "cat_other_left", "node_ids", "cover", "leaf_const", "linear_ptr",
                 "linear_feature", "linear_coeff"):
        x, y = getattr(a, name), getattr(b, name)
        assert (x is None) == (y is None), name
        if x is not None:
            assert x.dtype == y.dtype and x.shape == y.shape and np.array_equal(x, y), name
            assert not x.flags.writeable, name
    assert a.max_depth == b.max_depth and a.n_leaves == b.n_leaves


@pytest.fixture(params=["native", "numpy"])
def shapes_way(request, monkeypatch):
    """Each test that takes it runs twice: build_trees' tree checks and depths by
    treecomp.numparse.tree_shapes (where built), and by its numpy passes."""
    if request.param == "native" and not numparse.available():
        pytest.skip(f"the native parser is not built: {numparse.UNAVAILABLE}")
    if request.param == "numpy":
        monkeypatch.setattr(numparse, "available", lambda: False)
    return request.param


def _shape_of(left, right):
    """tree_shapes' (status, depth) of one tree, by its definition, in Python."""
    n = len(left)
    for l, r in zip(left, right):
        if l < -1 or r < -1 or l >= n or r >= n or (l < 0) != (r < 0):
            return 1, 0
    parent = [0] * n
    for j, (l, r) in enumerate(zip(left, right)):
        if l < 0:
            continue
        if l <= j or r <= j:
            return 2, 0
        parent[l] += 1
        parent[r] += 1
    if parent[0] != 0 or any(c != 1 for c in parent[1:]):
        return 2, 0
    depth = [0] * n
    for j, l in enumerate(left):
        if l >= 0:
            depth[l] = depth[right[j]] = depth[j] + 1
    return 0, max(depth)


@pytest.mark.parametrize("wide", [False, True])
def test_tree_shapes_is_its_definition(wide):
    """Seeded fuzz: numparse.tree_shapes on random forests with children broken at random
    (out of range, before the parent, shared, one-sided, renumbered but valid) gives each
    tree's status and depth as the definition says."""
    if not numparse.available():
        pytest.skip(f"the native parser is not built: {numparse.UNAVAILABLE}")
    rng = np.random.default_rng(38)
    for _ in range(60):
        trees = [random_tree(rng, 5, max_depth=int(rng.integers(0, 7))) for _ in range(int(rng.integers(1, 12)))]
        sizes = [t.n_nodes for t in trees]
        left = np.concatenate([t.left for t in trees]).astype(np.int64 if wide else np.int32)
        right = np.concatenate([t.right for t in trees]).astype(left.dtype)
        status, depth = numparse.tree_shapes(sizes, left, right)
        assert not status.any() and depth.tolist() == [t.max_depth for t in trees]
        for _ in range(int(rng.integers(0, 4))):
            i = int(rng.integers(len(left)))
            arr = left if rng.random() < 0.5 else right
            arr[i] = [-2, -1, 0, 1, 2, 40, int(rng.integers(-1, 9))][int(rng.integers(7))]
        if rng.random() < 0.3:  # swap two nodes' children: often still a valid tree
            i, j = rng.integers(len(left), size=2)
            left[[i, j]], right[[i, j]] = left[[j, i]], right[[j, i]]
        status, depth = numparse.tree_shapes(sizes, left, right)
        offs = np.concatenate([[0], np.cumsum(sizes)])
        want = [_shape_of(left[a:b].tolist(), right[a:b].tolist()) for a, b in zip(offs[:-1], offs[1:])]
        assert list(zip(status.tolist(), depth.tolist())) == want
    with pytest.raises(ValueError):
        numparse.tree_shapes([2], np.array([-1], np.int32), np.array([-1], np.int32))
    with pytest.raises(ValueError):
        numparse.tree_shapes([0, 1], np.array([-1], np.int32), np.array([-1], np.int32))


@pytest.mark.parametrize("seed", range(6))
def test_build_trees_equals_tree_by_tree(seed, shapes_way):
    from treecomp.ir import build_trees
    rng = np.random.default_rng(seed)
    width = 1 if seed < 4 else 3
    trees = [random_tree(rng, 5, width=width, max_depth=int(rng.integers(0, 9)))
             for _ in range(int(rng.integers(1, 40)))]
    kw = _flat(trees, ids=seed % 2 == 0, cover=seed % 3 != 0)
    got, want = build_trees(**kw), _one_by_one(**kw)
    assert len(got) == len(want)
    for a, b in zip(got, want):
        _same_tree(a, b)
    # the same forest, the same digest (the IR is the same data)
    f = lambda ts: Forest(trees=ts, n_features=5, n_outputs=width,  # noqa: E731
                          tree_output=[0] * len(ts), base_score=[0.0] * width)
    assert f(tuple(got)).digest() == f(tuple(want)).digest()
    g = Forest.from_bytes(f(tuple(got)).to_bytes())
    assert g.digest() == f(tuple(want)).digest()


def test_build_trees_stores_no_node_sized_cat_index(shapes_way):
    """Trees without categorical splits from build_trees: every cat_index (all -1, as Tree's
    default) is a read-only view of one array as long as the largest tree, not of one array of
    4 bytes a node (a huge LightGBM model's IR, 2026-11-28), and means the same (digest, file)."""
    from treecomp.ir import build_trees
    rng = np.random.default_rng(17)
    trees = [random_tree(rng, 5, max_depth=int(rng.integers(0, 8))) for _ in range(40)]
    kw = _flat(trees)
    got = build_trees(**kw)
    shared = got[0].cat_index.base
    assert shared is not None and len(shared) == max(t.n_nodes for t in trees)
    for t, want in zip(got, _one_by_one(**kw)):
        assert t.cat_index.base is shared and not t.cat_index.flags.writeable
        assert t.cat_index.dtype == np.int32 and t.cat_index.tolist() == [-1] * t.n_nodes
        _same_tree(t, want)
    f = lambda ts: Forest(trees=tuple(ts), n_features=5, n_outputs=1,  # noqa: E731
                          tree_output=[0] * len(ts), base_score=[0.0])
    want = _one_by_one(**kw)
    assert f(got).digest() == f(want).digest() == Forest.from_bytes(f(got).to_bytes()).digest()


def test_digest_leaves_no_memory_behind():
    """Forest.digest hashes every array's bytes without leaving numpy a description of an
    exported buffer per array (~56 bytes each, kept as long as the array: 4 bytes a node of a
    forest of 127-node trees, 2026-11-28); what stays is the digest itself."""
    import tracemalloc
    rng = np.random.default_rng(5)
    trees = tuple(random_tree(rng, 5, max_depth=3) for _ in range(1500))
    f = Forest(trees=trees, n_features=5, n_outputs=1, tree_output=np.zeros(len(trees), np.int32),
               base_score=[0.0])
    g = Forest(trees=trees, n_features=5, n_outputs=1, tree_output=np.zeros(len(trees), np.int32),
               base_score=[0.0])
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        d = f.digest()
        kept = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert kept < 4096, kept  # (1500 trees x 9 arrays: ~750 kB before)
    assert d == g.digest() == f.digest()


def _bad_cases():
    """(tree index to break, how): each a rule of Tree._validate (or of the conversions)."""
    def at(name, i, v):
        return lambda kw, a: kw[name].__setitem__(a + i, v)
    return {
        "child out of range": at("left", 0, 40),
        "child before parent": at("left", 0, 0),
        "shared child": lambda kw, a: kw["right"].__setitem__(a, kw["left"][a]),
        "left -2": at("left", 1, -2),
        "one child": at("right", 0, -1),
        "internal without feature": at("feature", 0, -1),
        "leaf with a feature": lambda kw, a: kw["feature"].__setitem__(a + int(np.flatnonzero(kw["left"][a:] < 0)[0]), 3),
        "NaN threshold": at("threshold", 0, np.nan),
        "inf leaf": lambda kw, a: kw["value"].__setitem__(a + int(np.flatnonzero(kw["left"][a:] < 0)[0]), np.inf),
        "negative cover": at("cover", 0, -1.0),
        "NaN cover": at("cover", 1, np.nan),
        "node id beyond int32": at("node_ids", 0, 2 ** 40),
        "fractional child": lambda kw, a: kw.__setitem__("left", kw["left"].astype(float)) or kw["left"].__setitem__(a, 1.5),
    }


@pytest.mark.parametrize("case", sorted(_bad_cases()))
@pytest.mark.parametrize("where", [0, 5, 11])
def test_build_trees_errors_are_tree_by_tree_errors(case, where, shapes_way):
    from treecomp.ir import TreeBuildError, build_trees
    rng = np.random.default_rng(3)
    trees = [random_tree(rng, 5, max_depth=3, p_leaf=0.0) for _ in range(12)]
    kw = _flat(trees)
    kw = {k: (np.array(v) if k != "sizes" else v) for k, v in kw.items()}
    kw["node_ids"] = kw["node_ids"].astype(np.int64)
    a = int(np.sum(kw["sizes"][:where]))
    _bad_cases()[case](kw, a)
    with pytest.raises(InvalidModelError) as want:
        _one_by_one(**kw)
    with pytest.raises(TreeBuildError) as got:
        build_trees(**kw)
    assert str(got.value) == str(want.value)
    assert got.value.index == where


def test_build_trees_lengths_that_disagree(shapes_way):
    from treecomp.ir import TreeBuildError, build_trees
    rng = np.random.default_rng(5)
    trees = [random_tree(rng, 5, max_depth=3, p_leaf=0.0) for _ in range(4)]
    for name in ("right", "threshold", "value", "node_ids", "cover"):
        kw = _flat(trees)
        kw[name] = kw[name][:-1]  # the last tree's array one short
        with pytest.raises(TreeBuildError, match="length|shape|cover") as got:
            build_trees(**kw)
        assert got.value.index == 3
    kw = _flat(trees)
    kw["sizes"] = [0] + kw["sizes"][1:]
    with pytest.raises(TreeBuildError, match="at least one node"):
        build_trees(**kw)
