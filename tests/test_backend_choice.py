"""backend="auto": the per-row cost model (treecomp.backends.cost) and choose()'s picks on a
documented sample of shapes, the wide depth-8 model of issue 33 among them."""

from __future__ import annotations

import time

import numpy as np
import pytest

from treecomp import backends, toolchain
from treecomp.backends import cost
from treecomp.backends.arrays import tables as arrays_tables
from treecomp.ir import Forest
from tests.randforest import FOREST_VARIANTS, chain_tree, random_forest, random_tree

needs_cc = pytest.mark.skipif(not toolchain.have_compiler(), reason="no C compiler")


def _forest(n_trees, depth, n_features, seed=0, p_leaf=0.0, input_dtype="float32", used=None):
    """`n_trees` random trees of depth <= `depth` (complete heaps with p_leaf=0) over
    `used` of `n_features` features (all by default)."""
    rng = np.random.default_rng(seed)
    trees = [random_tree(rng, used or n_features, max_depth=depth, p_leaf=p_leaf)
             for _ in range(n_trees)]
    return Forest(trees=tuple(trees), n_features=n_features, n_outputs=1,
                  tree_output=np.zeros(n_trees, np.int32), base_score=[0.0],
                  input_dtype=input_dtype)


def _flatten_path(f) -> str:
    t = arrays_tables.flatten(f)
    if t.meta["quant"]:
        return "quant"
    if t.meta["bitvec"]:
        return "bitvec"
    if bool((t.arrays["tree_layout"] == 0).all()):
        return "heap"
    deep = f.input_dtype == "float32" and not any(tr.has_categorical for tr in f.trees)
    return "compact" if deep else "records"  # the deep walk takes float32 numeric trees


def test_arrays_path_is_the_layout_flatten_picks():
    """cost.arrays_path predicts the arrays backend's own choice (tables.flatten, layout
    "auto") without flattening: every variant, deep, sparse and mixed forests."""
    rng = np.random.default_rng(5)
    forests = [random_forest(s, **kw) for s, kw in enumerate(FOREST_VARIANTS.values())]
    forests += [_forest(4, 10, 7, p_leaf=0.0), _forest(4, 10, 7, p_leaf=0.45),  # > 255 / <= 255 leaves
                _forest(6, 8, 5, p_leaf=0.3), _forest(3, 12, 9, p_leaf=0.1),
                _forest(5, 8, 5, p_leaf=0.1, input_dtype="float64"),
                _forest(3, 11, 5, input_dtype="float64"),
                _forest(3, 0, 4)]  # leaves only: "heap" (every forest with a split and numeric
    # heaps of depth <= 8 is "quant", deeper ones of <= 255 leaves "bitvec")
    chain = random_forest(1, n_trees=3)
    forests.append(chain.replace(trees=chain.trees + (chain_tree(200, 6, rng),),
                                 tree_output=np.zeros(4, np.int32)))
    seen = set()
    for f in forests:
        assert cost.arrays_path(f) == _flatten_path(f), f.provenance
        seen.add(cost.arrays_path(f))
    assert seen == {"quant", "bitvec", "heap", "compact", "records"}


def test_terms_are_linear_in_the_depth():
    """A chain 20,000 levels deep: the terms come from a numpy pass a level (no recursion)
    in well under a second, and the expected walk of a chain with coin-flip splits is ~2
    steps (half the rows leave at each level)."""
    rng = np.random.default_rng(0)
    f = Forest(trees=(chain_tree(20_000, 3, rng),), n_features=3, n_outputs=1,
               tree_output=np.zeros(1, np.int32), base_score=[0.0])
    t0 = time.perf_counter()
    t = cost.terms(f)
    assert time.perf_counter() - t0 < 5
    assert t["levels"] == 20_000 and t["inner"] == 20_000 and abs(t["walk"] - 2.0) < 1e-6
    assert set(t) == set(cost.TERMS) and all(np.isfinite(v) for v in t.values())


def test_every_path_has_constants_for_its_terms():
    for dtype, table in cost.COST.items():
        assert set(table) == set(cost.PATHS) - {"records"}, dtype  # records: generated code
        for path, consts in table.items():
            assert set(consts) <= set(cost.PATH_TERMS[path]), (dtype, path)
            assert all(c >= 0 for c in consts.values())


@needs_cc
def test_auto_picks_the_byte_walk_for_the_wide_depth8_model():
    """Issue 33's miss: 100 XGBoost trees of depth 8 over 2,000 features (1,631 used) went to
    generated code (4,494 ns/row) while the arrays backend ran 1,724. Quantising 1,631
    columns costs less than 800 node steps that each read a scattered line of an 8 kB row."""
    f = _forest(100, 8, 2000, seed=33, used=1631)
    assert cost.arrays_path(f) == "quant" and cost.terms(f)["cols"] > 1500
    assert backends.choose(f) == "arrays" and backends.choose(f, "so") == "arrays"


def test_the_sparse_depth8_xgboost_model_takes_the_quantised_walk():
    """Issue 33: 100 XGBoost trees of depth 8 over 13 features (4,000 training rows, ~57
    leaves a tree, some over 128) padded to 25,600 heap slots, over the 4x bound's 23,000: the
    arrays backend ran the deep walk, 481-748 ns/row, against 131-149 for the quantised walk
    (bench/layout_ab.py). It takes the quantised walk now, and stays exact."""
    xgb = pytest.importorskip("xgboost")
    from treecomp.benchmark.cases import make_data
    import treecomp
    X, y = make_data(4000, 13, 1, "binary", 2)
    m = xgb.XGBClassifier(n_estimators=100, max_depth=8, tree_method="hist", n_jobs=1,
                          random_state=0).fit(X, y)
    f = treecomp.frontends.parse(m)
    depth = np.array([t.max_depth for t in f.trees])
    leaves = np.array([t.n_leaves for t in f.trees])
    assert depth.max() == 8 and leaves.max() > arrays_tables.BITVEC_VS_QUANT_LEAVES
    assert (2 ** depth).sum() > np.maximum(64, 4 * leaves).sum()  # the old bound said no
    assert cost.arrays_path(f) == "quant" and _flatten_path(f) == "quant"
    p = treecomp.compile(m, backend="arrays")
    assert p._kernel.tables.meta["quant"]
    Xt, _ = make_data(3000, 13, 2, "binary", 2)
    assert np.array_equal(p.predict_proba(Xt), m.predict_proba(Xt))


def test_sparse_depth8_heaps_take_the_faster_byte_walk():
    """Where both byte walks can run, tables.quant_pays picks the measured faster one
    (bench/layout_ab-grid-2026-11-28.json): 100 trees of depth 8 and 64 leaves over 13
    features: quant 143 vs bitvec 162 ns/row; over 200 features quant 746 vs bitvec 499.
    Rows over QUANT_VS_BITVEC_MAX_FEATURES features take quant: 61 random-forest-like trees
    of depth 8 over 4,055 features (1,277 used): quant 3,460 vs bitvec 7,014."""
    from bench import calibrate_auto, layout_ab
    narrow = layout_ab.sparse_forest(100, 8, 13, 0.25, seed=1)
    wide = layout_ab.sparse_forest(100, 8, 200, 0.25, seed=1)
    assert cost.arrays_path(narrow) == _flatten_path(narrow) == "quant"
    assert cost.arrays_path(wide) == _flatten_path(wide) == "bitvec"
    assert arrays_tables.quant_eligible(narrow) and arrays_tables.quant_eligible(wide)
    widest = calibrate_auto.synthetic_forest("rf", 61, 8, 4055, 1032, 0.32)
    assert max(t.n_leaves for t in widest.trees) <= arrays_tables.BITVEC_MAX_LEAVES
    assert cost.arrays_path(widest) == _flatten_path(widest) == "quant"


def test_quant_vs_bitvec_constants_are_the_fit_of_the_committed_timings():
    """tables.QUANT_VS_BITVEC is what bench/layout_ab.py fits on the timings committed beside
    it, and scores as tables.byte_walk's docstring says on the held-out forests."""
    import json
    from pathlib import Path
    from bench import layout_ab
    bench = Path(__file__).resolve().parent.parent / "bench"
    grid = json.loads((bench / "layout_ab-grid-2026-11-28.json").read_text())
    held = json.loads((bench / "layout_ab-heldout-2026-11-28.json").read_text())
    k = layout_ab.fit_rule(grid)
    assert {n: float(f"{v:.3g}") for n, v in k.items()} == arrays_tables.QUANT_VS_BITVEC
    for rows, least in ((grid, 0.95), (held, 0.95)):
        A, q, b, _ = layout_ab.design(rows)
        kv = np.array([k[n] for n in ("slot", "slot_feat", "tree", "inner", "inner_feat")])
        picked = np.where(A @ kv <= 0, q, b) / np.minimum(q, b)
        assert np.mean(picked <= 1.10) >= least and picked.max() < 1.2
        always_quant = q / np.minimum(q, b)
        assert np.mean(always_quant <= 1.10) < least  # the rule is needed


#: (forest, the backend auto picks): timed 2026-11-28 on the 2-core AMD EPYC dev box, 1
#: thread, 20k rows (bench/calibrate_auto.time_paths), arrays vs c in ns/row
SHAPES = [
    (dict(seed=3, n_trees=2, n_features=40), "c"),      # 34 vs 23
    (dict(seed=2, n_trees=1, n_features=200), "c"),     # 178 vs 94
    (dict(seed=2, n_trees=2, n_features=1000), "c"),    # 435 vs 299
    (dict(seed=3, n_trees=2, n_features=8, max_depth=3), "arrays"),  # 9.7 vs 14.3
    (dict(seed=1, n_trees=300, n_features=50), "arrays"),  # XGBoost's: 277 vs 2,285
    (dict(seed=1, n_trees=100, n_features=50, input_dtype="float64"), "arrays"),
]


@needs_cc
@pytest.mark.parametrize("kw, want", SHAPES)
def test_auto_on_a_sample_of_shapes(kw, want):
    kw = dict(kw)
    f = random_forest(kw.pop("seed"), **{"max_depth": 6, **kw})
    assert backends.choose(f) == want


def test_constants_are_the_fit_of_the_committed_timings():
    """cost.COST is what bench/calibrate_auto.py fits on the timings it was fitted on
    (committed beside it), and scores as cost.py's docstring says: within 10% of the faster
    backend on >= 85% of the held-out synthetic forests and of the trained models."""
    pytest.importorskip("scipy")
    import json
    from pathlib import Path
    from bench import calibrate_auto as ca
    bench = Path(__file__).resolve().parent.parent / "bench"
    rows = json.loads((bench / "calibrate_auto-grid-2026-11-28.json").read_text())
    trained = json.loads((bench / "calibrate_auto-trained-2026-11-28.json").read_text())
    for r in rows + trained:  # a new term: `calibrate_auto --load` refreshes the files
        assert set(r["terms"]) == set(cost.TERMS)
    split = np.random.default_rng(33).random(len(rows)) < 2 / 3
    train = [r for r, s in zip(rows, split) if s]
    test = [r for r, s in zip(rows, split) if not s]
    assert ca.fit(train) == cost.COST
    for held in (test, trained):
        ratios = [s["ratio"] for s in ca.score(held, cost.COST)]
        assert np.mean(np.array(ratios) <= 1.10) >= 0.85, ratios
    before = [s["ratio"] for s in ca.score(trained, "previous")]
    assert np.mean(np.array(before) <= 1.10) < 0.5  # the rule it replaced: 8 of 18
