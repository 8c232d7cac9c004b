"""The IR: validation, digests, serialisation, the interpreter against the naive walker."""

import numpy as np
import pytest
from hypothesis import given, strategies as st

from treecomp import interp, passes
from treecomp.errors import InvalidModelError
from treecomp.ir import Forest, Tree, leaf_tree
from tests.randforest import FOREST_VARIANTS, chain_tree, random_forest, random_rows

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
