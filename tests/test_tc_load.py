"""Loading .tc table files (format 3): the digest, the stored results of the derived tables'
sorts (checked to be exactly the sorts'), the file mapped rather than copied, and the older
formats 1 and 2, which still load (their derived tables sorted as before)."""

from __future__ import annotations

import json
import mmap

import numpy as np
import pytest

import treecomp
from treecomp import interp
from treecomp.backends import arrays
from treecomp.backends.arrays import derived, format as arrays_format
from treecomp.errors import ArtifactError
from treecomp.ir import Forest, Tree
from tests.randforest import FOREST_VARIANTS, random_forest, random_rows

HAVE = arrays.supported_isas()


def _xgb_like(seed: int, n_trees: int = 30, depth: int = 5, n_features: int = 5) -> Forest:
    """Complete trees whose splits reuse few thresholds (hist-like: many ties in the sort),
    -0.0 and 0.0 among them, NaN sent both ways."""
    rng = np.random.default_rng(seed)
    grid = np.array([-1.5, -0.0, 0.0, 0.25, 0.5, 1.0, 2.0], np.float32)
    trees = []
    for _ in range(n_trees):
        n_int = (1 << depth) - 1
        n = 2 * n_int + 1
        left = np.full(n, -1)
        left[:n_int] = 2 * np.arange(n_int) + 1
        right = np.where(left >= 0, left + 1, -1)
        feat = np.where(left >= 0, rng.integers(0, n_features, n), -1)
        thr = np.where(left >= 0, grid[rng.integers(0, len(grid), n)], 0.0)
        val = np.where(left >= 0, 0.0, rng.normal(size=n).astype(np.float32))
        trees.append(Tree(left=left, right=right, feature=feat, threshold=thr,
                          default_left=rng.random(n) < 0.5, value=val))
    return Forest(trees=tuple(trees), n_features=n_features, n_outputs=1,
                  tree_output=np.zeros(n_trees), base_score=[0.5], comparison="<")


#: (forest, layout): the quantised heap walk, the interval walk with categorical splits, compact
CASES = {
    "quant": (lambda: _xgb_like(1), "quant"),
    "quant-f64": (lambda: random_forest(3, **FOREST_VARIANTS["f64-lt"]), "quant"),
    "bitvec-categorical": (lambda: random_forest(21, **FOREST_VARIANTS["categorical"]), "bitvec"),
    "bitvec": (lambda: random_forest(4, n_trees=12), "bitvec"),
    "compact": (lambda: random_forest(5, **FOREST_VARIANTS["deep"]), "compact"),
}


def _file(case: str) -> tuple[Forest, bytes]:
    make, layout = CASES[case]
    f = make()
    return f, treecomp.compile(f, backend="arrays", layout=layout, isa="numpy")._kernel.to_bytes()


def _parts(data: bytes):
    return arrays_format.split_file(data)


def _join(hdr, body, version=arrays_format.FORMAT_VERSION, seal=True) -> bytes:
    """A table file of this header and body; format 3 sealed (as a deliberate editor would)."""
    return arrays_format.join_file(hdr, body, version, sealed=seal)


def _as_old_format(data: bytes) -> bytes:
    """The file as treecomp wrote it before format 3: no stored sorts, no trailer, version 1
    (2 with a linear section); every other byte where it was (the sorts came last)."""
    hdr, body, _ = _parts(data)
    cut = min([d["offset"] for d in hdr.pop("sorts", [])] + [len(body) - arrays_format.TRAILER])
    hdr["version"] = 2 if "linear" in hdr else 1
    return _join(hdr, body[:cut], hdr["version"])


def _kernel_bytes(k) -> dict[str, bytes]:
    scalars, arrs = k.pack_arrays()
    return {"scalars": json.dumps(scalars, sort_keys=True).encode(),
            **{n: np.ascontiguousarray(a).tobytes() for n, a in arrs.items()}}


# -- stored sorts ----------------------------------------------------------------------------------
def test_sort_order_is_exactly_lexsort():
    """A given order is taken only where it is np.lexsort's own permutation (stable: ties in
    index order); the keys come back along it."""
    rng = np.random.default_rng(0)
    for n in (0, 1, 2, 7, 500):
        f = rng.integers(0, 4, n).astype(np.uint32)
        t = rng.choice(np.array([-1.0, -0.0, 0.0, 0.5, 3.0], np.float32), n)
        want = np.lexsort((t, f))
        for given in (None, want.astype(np.int32), want.astype(np.int64)):
            order, (ts, fs) = derived.sort_order(given, (t, f), "x")
            assert np.array_equal(order, want)
            assert np.array_equal(ts, t[want]) and np.array_equal(fs, f[want])
        if n < 2:
            continue
        bad = [want[::-1], np.roll(want, 1), np.where(want == want[0], want[1], want),
               np.r_[want[:-1], n], np.r_[want[:-1], -1], want[:-1], want.astype(np.float64)]
        # a tie in another order sorts the keys but is not the stable sort's permutation
        ties = np.flatnonzero((f[want][1:] == f[want][:-1]) & (t[want][1:] == t[want][:-1]))
        assert len(ties) or n < 10
        if len(ties):
            w = want.copy()
            w[ties[0]], w[ties[0] + 1] = w[ties[0] + 1], w[ties[0]]
            bad.append(w)
        for b in bad:
            with pytest.raises(ArtifactError, match="order"):
                derived.sort_order(b, (t, f), "x")


Q_SORTS = {"q_uid", "q_ufeat", "q_uthr"}


@pytest.mark.parametrize("case", sorted(CASES))
def test_stored_sorts_give_the_derived_tables(case):
    """The file stores the results of the derived tables' sorts; loaded, the kernel's tables
    (every array tc_tables points at, every scalar) are byte for byte those derived without."""
    f, data = _file(case)
    hdr, _, version = _parts(data)
    assert version == arrays_format.FORMAT_VERSION
    k = arrays.load_bytes(data)
    want = {"quant": Q_SORTS, "quant-f64": Q_SORTS, "bitvec": Q_SORTS | {"bv_order"},
            "bitvec-categorical": Q_SORTS | {"bv_order"}, "compact": set()}[case]
    assert {d["name"] for d in hdr.get("sorts", [])} == want == set(k.sorts)
    fresh = arrays.ArraysKernel(k.tables, k.head, isa="numpy")
    assert _kernel_bytes(k) == _kernel_bytes(fresh)
    for name in want:
        assert np.array_equal(k.sorts[name], fresh.sorts[name])
        assert not k.sorts[name].flags.owndata  # the file's own arrays, not copies


def test_distinct_thresholds_stored_or_sorted():
    rng = np.random.default_rng(1)
    for n in (0, 1, 9, 400):
        f = rng.integers(0, 5, n).astype(np.uint32)
        t = rng.choice(np.array([-2.0, -0.0, 0.0, 0.5, 1.0, 7.0], np.float32), n)
        uf, ut, uid = derived.distinct_thresholds(f, t)
        pairs = sorted({(int(a), float(b) + 0.0) for a, b in zip(f, t)})
        assert [(int(a), float(b) + 0.0) for a, b in zip(uf, ut)] == pairs
        assert np.array_equal(uf[uid].view(np.uint32), f) and np.array_equal(ut[uid], t)
        stored = {"q_ufeat": uf, "q_uthr": ut, "q_uid": uid}
        again = derived.distinct_thresholds(f, t, stored)
        assert all(np.array_equal(a, b) for a, b in zip(again, (uf, ut, uid)))
        if not n:
            continue
        U = len(uf)
        bad = [dict(stored, q_uid=np.where(np.arange(n) == 0, (uid + 1) % max(U, 2), uid).astype(uid.dtype)),
               dict(stored, q_uid=np.r_[uid[:-1], U].astype(uid.dtype)),
               dict(stored, q_uid=np.r_[uid[:-1], -1].astype(uid.dtype)),
               dict(stored, q_uid=uid[:-1]),
               dict(stored, q_uthr=np.nextafter(ut, np.float32(np.inf))),
               dict(stored, q_uthr=np.where(np.arange(U) == U - 1, np.float32(np.nan), ut)),
               dict(stored, q_uthr=ut.astype(np.float64)),
               dict(stored, q_ufeat=uf[::-1].copy()) if U > 1 else dict(stored, q_ufeat=uf + 1),
               dict(stored, q_ufeat=np.r_[uf, uf[-1]].astype(np.int32), q_uthr=np.r_[ut, ut[-1] + 1]),
               {k: v for k, v in stored.items() if k != "q_uthr"}]
        for b in bad:
            with pytest.raises(ArtifactError, match="distinct thresholds"):
                derived.distinct_thresholds(f, t, b)


@pytest.mark.parametrize("case", sorted(CASES))
def test_round_trip_bit_for_bit_on_every_isa(case, tmp_path):
    f, _ = _file(case)
    X = random_rows(f, 150)
    want = interp.predict_raw(f, X)
    _, layout = CASES[case]
    for isa in HAVE:
        path = tmp_path / f"{isa}.tc"
        treecomp.compile(f, backend="arrays", layout=layout, isa=isa).save(path)
        q = treecomp.load(path)
        # (llvm-vec runs byte walks only: compact tables take the llvm walker)
        assert q._kernel.isa == isa or (isa, q._kernel.isa) == ("llvm-vec", "llvm")
        np.testing.assert_array_equal(q.predict_raw(X), want, err_msg=isa)


def _with(body, d, values) -> bytearray:
    """`body` with the stored array `d` (a descriptor) replaced by `values`."""
    b = bytearray(body)
    a = np.ascontiguousarray(values, np.dtype(d["dtype"]))
    assert len(a) == d["length"]
    b[d["offset"]:d["offset"] + a.nbytes] = a.tobytes()
    return b


@pytest.mark.parametrize("case", ["quant", "bitvec-categorical"])
def test_hostile_sorts_are_refused(case):
    """A file whose digest matches (written on purpose) but whose stored sorts are not what
    the sorts give: refused; never derived tables that disagree with the thresholds."""
    f, data = _file(case)
    hdr, body, _ = _parts(data)
    X = random_rows(f, 60)
    for d in hdr["sorts"]:
        a = np.frombuffer(body, d["dtype"], d["length"], d["offset"]).copy()
        n = len(a)
        i = np.arange(n)
        if d["name"] in ("q_uid", "q_ufeat"):  # an index or feature changed, out of range
            edits = [np.where(i == n // 2, a + 1, a), np.where(i == 0, -1, a),
                     np.where(i == n - 1, 10 ** 6, a), a[::-1]]
        elif d["name"] == "q_uthr":
            edits = [np.where(i == n // 2, np.nextafter(a, np.inf), a), np.where(i == 0, np.nan, a),
                     a[::-1]]
        else:  # bv_order
            edits = [np.r_[a[1:2], a[:1], a[2:]], a[::-1], np.r_[a[:1], a[:-1]],
                     np.r_[a[:-1], n], np.r_[a[:-1], -1]]
        for values in edits:
            if np.array_equal(values, a):
                continue
            with pytest.raises(ArtifactError, match="order|distinct thresholds"):
                arrays.load_bytes(_join(hdr, _with(body, d, values)))
        for edit in (lambda e: e.update(length=e["length"] - 1), lambda e: e.update(dtype="<u2"),
                     lambda e: e.update(name="q_bogus"), lambda e: e.update(offset=10 ** 9)):
            h2 = json.loads(json.dumps(hdr))
            edit(next(e for e in h2["sorts"] if e["name"] == d["name"]))
            with pytest.raises(ArtifactError):
                arrays.load_bytes(_join(h2, body))
    # a zero threshold's sign is the one thing a stored sort may choose: no comparison sees it
    d = next(e for e in hdr["sorts"] if e["name"] == "q_uthr")
    ut = np.frombuffer(body, d["dtype"], d["length"], d["offset"])
    if np.any(ut == 0):
        k = arrays.load_bytes(_join(hdr, _with(body, d, np.where(ut == 0, -ut, ut))))
        assert np.array_equal(np.signbit(k.sorts["q_uthr"]), np.signbit(np.where(ut == 0, -ut, ut)))
        for isa in HAVE:
            p = treecomp.Predictor(arrays.ArraysKernel(k.tables, k.head, isa=isa, sorts=k.sorts))
            np.testing.assert_array_equal(p.predict_raw(X), interp.predict_raw(f, X), err_msg=isa)


@pytest.mark.parametrize("case", ["quant", "quant-f64", "bitvec-categorical"])
def test_mutated_sorts_never_give_a_wrong_answer(case):
    """Seeded, bounded fuzz of the stored sorts (resealed: a deliberate file): each load is
    refused, or predicts exactly what the model does on every instruction set."""
    f, data = _file(case)
    X = random_rows(f, 60)
    want = interp.predict_raw(f, X)
    hdr, body, _ = _parts(data)
    descr = hdr["sorts"]
    rng = np.random.default_rng(7)
    outcomes = {"refused": 0, "ok": 0}
    for _ in range(40):
        d = descr[rng.integers(len(descr))]
        a = np.frombuffer(body, d["dtype"], d["length"], d["offset"]).copy()
        i, j = rng.integers(len(a), size=2)
        r = rng.integers(3)
        if a.dtype.kind == "f":
            a[i] = [a[j], np.nextafter(a[i], -np.inf), -a[i]][r]
        else:
            a[i] = [a[j], int(rng.integers(-3, len(a) + 3)), a[i] ^ (1 << int(rng.integers(31)))][r]
        try:
            k = arrays.load_bytes(_join(hdr, _with(body, d, a)))
        except ArtifactError:
            outcomes["refused"] += 1
            continue
        for isa in HAVE:
            p = treecomp.Predictor(arrays.ArraysKernel(k.tables, k.head, isa=isa, sorts=k.sorts))
            np.testing.assert_array_equal(p.predict_raw(X), want, err_msg=isa)
        outcomes["ok"] += 1
    assert outcomes["refused"] > 0


# -- the digest -------------------------------------------------------------------------------------
@pytest.mark.parametrize("case", ["quant", "bitvec-categorical", "compact"])
def test_corrupt_files_are_refused_by_the_digest(case):
    """Bit flips anywhere, truncation, bytes appended: refused, every one (seeded)."""
    _, data = _file(case)
    arrays.load_bytes(data)
    rng = np.random.default_rng(3)
    for _ in range(60):
        d = bytearray(data)
        how = rng.integers(3)
        if how == 0:
            for pos in rng.integers(0, len(d), int(rng.integers(1, 4))):
                d[pos] ^= 1 << int(rng.integers(8))
        elif how == 1:
            d = d[:int(rng.integers(len(d)))]
        else:
            d += bytes(rng.integers(0, 256, int(rng.integers(1, 100)), np.uint8))
        with pytest.raises(ArtifactError):
            arrays.load_bytes(bytes(d))
    with pytest.raises(ArtifactError, match="digest"):
        arrays.load_bytes(data[:-65] + bytes([data[-65] ^ 4]) + data[-64:])


# -- older formats ----------------------------------------------------------------------------------
@pytest.mark.parametrize("case", sorted(CASES))
def test_old_format_files_still_load(case):
    """Format 1 files (written before format 3: no digest, no stored sorts) load, their
    derived tables sorted as before: the same kernel tables, the same answers."""
    f, data = _file(case)
    old = _as_old_format(data)
    assert arrays_format._PREFIX.unpack_from(old, 0)[1] == 1
    k, new = arrays.load_bytes(old), arrays.load_bytes(data)
    assert _kernel_bytes(k) == _kernel_bytes(new)
    X = random_rows(f, 80)
    np.testing.assert_array_equal(treecomp.Predictor(k).predict_raw(X), interp.predict_raw(f, X))
    # its bytes are the file's; written anew, format 3 with the sorts
    assert k.to_bytes() == old
    again = k.file_bytes(None)
    assert arrays_format._PREFIX.unpack_from(again, 0)[1] == arrays_format.FORMAT_VERSION
    assert set(arrays.load_bytes(again).sorts) == set(new.sorts)


def test_old_format_cannot_carry_sorts():
    _, data = _file("quant")
    hdr, body, _ = _parts(data)
    with pytest.raises(ArtifactError, match="no stored sorts"):
        arrays.load_bytes(_join(hdr, body[:-arrays_format.TRAILER], 1))


# -- mapped, not copied ------------------------------------------------------------------------------
def test_load_maps_the_file(tmp_path):
    f, data = _file("quant")
    path = tmp_path / "m.tc"
    path.write_bytes(data)
    p = treecomp.load(path, mmap=True)
    k = p._kernel
    assert isinstance(k._data, mmap.mmap)
    for name in ("h_thr", "h_ff", "leaf_values"):
        a = k.tables.arrays[name]
        assert not a.flags.owndata and not a.flags.writeable
        assert np.shares_memory(a, np.frombuffer(k._data, np.uint8))
    X = random_rows(f, 50)
    np.testing.assert_array_equal(p.predict_raw(X), interp.predict_raw(f, X))
    # replacing the file (as treecomp's save does) leaves the loaded model alone
    treecomp.compile(_xgb_like(9), backend="arrays").save(path)
    np.testing.assert_array_equal(p.predict_raw(X), interp.predict_raw(f, X))
    assert k.to_bytes() == data and isinstance(k.to_bytes(), bytes)
    # an empty file, a bare magic: refused
    for name, content in (("empty.tc", b""), ("magic.tc", arrays_format.MAGIC + bytes(10))):
        (tmp_path / name).write_bytes(content)
        for mapped in (False, True):
            with pytest.raises(ArtifactError):
                treecomp.load(tmp_path / name, mmap=mapped)


_REWRITE_IN_PLACE = """
import sys, numpy as np, treecomp
path, other = sys.argv[1], sys.argv[2]
p = treecomp.load(path)
X = np.random.default_rng(0).normal(size=(300, 5))
before = p.predict_raw(X)
with open(path, "r+b") as f:     # what `cp other path` does: truncate, then write in place
    f.truncate(0)
with open(path, "r+b") as f:
    f.write(open(other, "rb").read())
    f.truncate(17)
np.testing.assert_array_equal(p.predict_raw(X), before)
print("same")
"""


@pytest.mark.parametrize("artifact", ["tc", "so"])
def test_default_load_survives_the_file_rewritten_in_place(tmp_path, artifact):
    """By default a loaded model holds its own copy of the file: `cp new.tc model.tc` (truncate
    and rewrite in place) under a running service neither changes its answers nor kills it
    (a mapping, mmap=True, would fault with SIGBUS). In a subprocess, so that a fault fails this
    test instead of killing the test run."""
    import subprocess
    import sys
    if artifact == "so":
        from treecomp import toolchain
        if not toolchain.have_compiler():
            pytest.skip("no C compiler: no .so")
    path, other = tmp_path / f"m.{artifact}", tmp_path / f"other.{artifact}"
    treecomp.compile(_xgb_like(3), backend="arrays").save(path)
    treecomp.compile(_xgb_like(4), backend="arrays").save(other)
    out = subprocess.run([sys.executable, "-c", _REWRITE_IN_PLACE, str(path), str(other)],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and "same" in out.stdout, (out.returncode, out.stderr[-2000:])
