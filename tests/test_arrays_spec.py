"""The arrays backend's per-model specialised byte walk (spec=True, backends/arrays_spec.py):
bit-exact against the generic walk and the interpreter on every vector ISA the host has."""

import dataclasses
import pickle

import numpy as np
import pytest

import treecomp
from treecomp import interp, toolchain
from treecomp.backends import arrays, arrays_format, arrays_spec
from treecomp.errors import CompileError
from treecomp.ir import Forest, leaf_tree
from tests.randforest import random_forest, random_rows
from tests.test_backend_arrays import HAVE, _check, _complete_tree, _symmetric_tree

SPEC_ISAS = [pytest.param(i, marks=pytest.mark.skipif(
    i not in HAVE or not toolchain.have_compiler(), reason=f"no {i} on this host, or no C compiler"))
    for i in arrays_spec.ISAS]


def _forest(rng, acc: str, n_out: int) -> Forest:
    """Heaps the generated walk inlines (depths 1-6, symmetric ones) and, with one output, also
    those it hands to the kernel's generic per-tree walk (a leaf, depths 7 and 8: that walk's
    code is most of a unit's build time); NaN both ways on a feature."""
    trees = [_complete_tree(rng, d, 7, p_leaf=0.2 * (d % 2)) for d in (1, 3, 5, 6, 6, 2)]
    trees += [_symmetric_tree(rng, 4, 7)]
    if n_out == 1:
        trees += [_complete_tree(rng, 7, 7), _complete_tree(rng, 8, 7, p_leaf=0.1),
                  _symmetric_tree(rng, 7, 7), leaf_tree(0.75)]
    if acc == "float32":
        trees = [dataclasses.replace(t, value=t.value.astype(np.float32).astype(np.float64)) for t in trees]
    return Forest(trees=tuple(trees), n_features=7, n_outputs=n_out,
                  tree_output=np.arange(len(trees)) % n_out, base_score=[0.25] * n_out,
                  comparison="<" if acc == "float32" else "<=", accumulate_dtype=acc)


@pytest.mark.parametrize("isa", SPEC_ISAS)
def test_spec_walk_bit_exact(isa):
    """One output (margins fused into the leaf adds) and three (class-major margins), the two
    accumulation dtypes between the two ISAs; batches of 1 (the few-row walk, not the generated
    one), 8, 9 (the AVX-512 few-row walk), whole and short 32/64-row groups, blocks of 96 rows
    and auto; float64 and float32 rows with NaN, infinities and values on thresholds."""
    rng = np.random.default_rng(23)
    idx = arrays_spec.ISAS[isa][0]
    for acc, n_out in (("float32", 1), ("float64", 3)) if isa == "avx512" else (("float64", 1), ("float32", 3)):
        f = _forest(rng, acc, n_out)
        X = random_rows(f, 150, seed=9)
        X = X[np.random.default_rng(2).permutation(len(X))]
        for block in (0, 96):
            p = treecomp.compile(f, backend="arrays", layout="quant", isa=isa, block_rows=block, spec=True)
            g = treecomp.compile(f, backend="arrays", layout="quant", isa=isa, block_rows=block)
            assert p._kernel.spec and p._kernel._struct.q_spec[idx] and not g._kernel._struct.q_spec[idx]
            for n in (1, 8, 9, 63, 64, 65, 128, 130, 257, len(X)):
                _check(p, f, X[:n])
                np.testing.assert_array_equal(p.predict_raw(X[:n]), g.predict_raw(X[:n]))
    q = pickle.loads(pickle.dumps(p))  # the option travels with the artifact
    assert q._kernel.spec
    np.testing.assert_array_equal(q.predict_raw(X), p.predict_raw(X))


def test_spec_where_it_does_not_apply():
    """No generated walk (and the same answers) where none applies: the scalar path, the
    interval walk's tables; a bad option value is a TypeError."""
    f = random_forest(5, n_trees=4, n_features=5)
    X = random_rows(f, 40)
    for kw in (dict(isa="scalar"), dict(layout="bitvec")):
        p = treecomp.compile(f, backend="arrays", spec=True, **kw)
        assert not p._kernel.spec
        _check(p, f, X)
    with pytest.raises(TypeError):
        arrays.options(spec="yes")


@pytest.mark.skipif("avx2" not in HAVE, reason="no AVX2 on this host")
def test_spec_without_a_compiler(monkeypatch):
    """Without a working compiler, asking for spec=True raises CompileError; an artifact saved
    with the option loads and runs the generic walk (same answers)."""
    f = _forest(np.random.default_rng(1), "float32", 3)
    X = random_rows(f, 40)

    def no_compiler(*args, **kwargs):
        raise CompileError("no C compiler (test)")
    monkeypatch.setattr(arrays_spec, "build_path", no_compiler)
    with pytest.raises(CompileError):
        treecomp.compile(f, backend="arrays", layout="quant", isa="avx2", spec=True)
    k = treecomp.compile(f, backend="arrays", layout="quant", isa="avx2")._kernel
    loaded = arrays.load_bytes(arrays_format.tables_to_bytes(
        k.tables, k.head, {"isa": "avx2", "block_rows": 0, "spec": True}))
    assert loaded.requested_spec and not loaded.spec
    out = np.empty((len(X), 3), np.float32)
    loaded.run(X.astype(np.float32), out)
    np.testing.assert_array_equal(out, interp.predict_raw(f, X.astype(np.float32)))
