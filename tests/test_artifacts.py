"""Corrupt artifacts: a seeded, bounded mutation fuzz over arrays-backend table files (.tc) and
IR files (.tcir) of a few small models (one with linear leaves: its .tc carries a linear
section).

Each mutated file is loaded and, when it loads, predicted on a few rows, in a subprocess per
batch (a segfault or a hang fails the test with the case that caused it instead of killing
pytest). Every case must either raise a TreecompError / ValueError / TypeError, at load time
for a .tc (an IR may also be refused by the compiler), or give finite margins: a mutated file
that still validates is a self-consistent model, and then the IR's compiled margins must equal
the interpreter's.
"""

from __future__ import annotations

import functools
import io
import json
import math
import os
import pickle
import struct
import subprocess
import sys
import time
import warnings
import zipfile
from pathlib import Path

import numpy as np
import pytest

import treecomp
from treecomp.backends import arrays
from treecomp.backends.arrays import format as arrays_format
from tests.randforest import random_forest

ROOT = Path(__file__).resolve().parents[1]
#: cases per kind and batches per kind: four subprocesses of ~150 cases (seconds each)
N_CASES = 2000
BATCHES = 2
TIMEOUT_S = 120


# -- the models ---------------------------------------------------------------------------------
def _forests():
    """(forest, arrays layout): the interval walk with categories, the quantised heap walk of a
    softmax classifier, compact trees of a string-labelled binary classifier (the deep path),
    the naive walk over float64 rows."""
    cat = random_forest(1, n_trees=4, max_depth=4, p_cat=0.3)
    multi = random_forest(2, n_trees=6, n_outputs=3, max_depth=3, transform="softmax")
    multi = multi.replace(decision="argmax_proba", classes=(np.array([0, 1, 2]),))
    deep = random_forest(3, n_trees=3, max_depth=9, transform="sigmoid")
    deep = deep.replace(decision="proba_gt_half", classes=(np.array(["no", "yes"], object),))
    f64 = random_forest(4, n_trees=3, max_depth=5, input_dtype="float64", p_cat=0.2,
                        category_rule="trunc")
    lin = _with_linear_leaves(random_forest(5, n_trees=4, n_outputs=2, max_depth=4,
                                            input_dtype="float64", p_cat=0.2), 5)
    return [(cat, "auto"), (multi, "auto"), (deep, "compact"), (f64, "naive"), (lin, "auto")]


def _with_linear_leaves(forest, seed):
    """`forest` with LightGBM-style linear leaves: 0-2 (feature, coeff) pairs a leaf."""
    import dataclasses
    rng = np.random.default_rng(seed)
    trees = []
    for t in forest.trees:
        leaf = t.left < 0
        ptr = np.concatenate([[0], np.cumsum(np.where(leaf, rng.integers(0, 3, t.n_nodes), 0))])
        k = int(ptr[-1])
        trees.append(dataclasses.replace(
            t, leaf_const=np.where(leaf, rng.normal(size=t.n_nodes), 0.0), linear_ptr=ptr.astype(np.int32),
            linear_feature=rng.integers(0, forest.n_features, k).astype(np.int32),
            linear_coeff=rng.normal(size=k)))
    return forest.replace(trees=tuple(trees))


# -- mutations ----------------------------------------------------------------------------------
_INTS = [0, 1, -1, 2, 3, 7, 64, 255, 256, 2**31 - 1, 2**31, -2**31, 2**32, 2**40, 2**63 - 1, -2**63]
_FLOATS = [0.0, -0.0, 1.0, -1.0, 0.5, 1e30, -1e30, 1e-45, math.nan, math.inf, -math.inf]
_JSON = _INTS + [1.5, -0.5, 1e308, None, True, False, "", "x", "float64", "<", "softmax", [], {},
                 [1, 2], {"a": 1}]


def _json_paths(obj, path=()):
    """Every (path, value) in a JSON document, containers included."""
    out = [(path, obj)]
    if isinstance(obj, dict):
        for k, v in obj.items():
            out += _json_paths(v, path + (k,))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            out += _json_paths(v, path + (i,))
    return out


def _json_set(obj, path, value):
    if not path:
        return value
    obj = json.loads(json.dumps(obj))
    node = obj
    for k in path[:-1]:
        node = node[k]
    node[path[-1]] = value
    return obj


def _mutate_json(rng, doc):
    """One value (or key) of a JSON document replaced, removed, or a key added."""
    paths = _json_paths(doc)[1:]  # not the document itself
    path, _ = paths[rng.integers(len(paths))]
    r = rng.random()
    if r < 0.1 and path:  # drop the entry
        doc = json.loads(json.dumps(doc))
        node = doc
        for k in path[:-1]:
            node = node[k]
        del node[path[-1]]
        return doc
    if r < 0.15 and isinstance(doc, dict):
        return {**doc, "unexpected": 1}
    return _json_set(doc, path, _JSON[rng.integers(len(_JSON))])


def _special(rng, dtype):
    dt = np.dtype(dtype)
    if dt.kind == "f":
        return dt.type(_FLOATS[rng.integers(len(_FLOATS))])
    if dt.kind == "b":
        return dt.type(rng.random() < 0.5)
    info = np.iinfo(dt)
    vals = [v for v in _INTS if info.min <= v <= info.max] + [int(info.max), int(info.min)]
    return dt.type(vals[rng.integers(len(vals))])


def _flip(rng, data, lo=0, hi=None):
    d = bytearray(data)
    hi = len(d) if hi is None else hi
    for pos in rng.integers(lo, hi, int(rng.integers(1, 5))):
        d[pos] = int(rng.integers(256))
    return bytes(d)


def _tc_parts(data):
    _, version, _, hlen = arrays_format._PREFIX.unpack_from(data, 0)
    hdr = json.loads(data[arrays_format._PREFIX.size:arrays_format._PREFIX.size + hlen])
    start = -(-(arrays_format._PREFIX.size + hlen) // 64) * 64
    return hdr, data[start:], version


def _tc_join(hdr, body, version):
    h = json.dumps(hdr, sort_keys=True).encode()
    start = -(-(arrays_format._PREFIX.size + len(h)) // 64) * 64
    buf = bytearray(start)
    arrays_format._PREFIX.pack_into(buf, 0, arrays_format.MAGIC, version, 0, len(h))
    buf[arrays_format._PREFIX.size:arrays_format._PREFIX.size + len(h)] = h
    data = bytes(buf) + body
    # sealed again (a file edited on purpose carries a matching digest): the checks behind it
    return arrays_format.seal(data) if version == arrays_format.FORMAT_VERSION else data


def mutate_tc(rng, data):
    """(description, mutated bytes) of a table file."""
    hdr, body, version = _tc_parts(data)
    r = int(rng.integers(8))
    if r == 0:
        return "flip bytes", _flip(rng, data)
    if r == 1:
        return "flip header bytes", _flip(rng, data, 0, len(data) - len(body))
    if r == 2:
        cut = int(rng.integers(len(data)))
        return f"truncate at {cut}", data[:cut]
    if r == 3:
        return "extend", data + bytes(rng.integers(0, 256, int(rng.integers(1, 200)), np.uint8))
    if r == 4:  # a value of the header (descriptors, table meta, runtime options)
        doc = {k: v for k, v in hdr.items() if k != "head"}
        return "header value", _tc_join({**_mutate_json(rng, doc), "head": hdr["head"]}, body, version)
    if r == 5:  # a value of the embedded Head (its own JSON string)
        head = _mutate_json(rng, json.loads(hdr["head"]))
        return "head value", _tc_join({**hdr, "head": json.dumps(head)}, body, version)
    # a number inside an array (the most likely mutations to pass validation): r = 6 a special
    # value, r = 7 another entry of the same array (a plausible index: shared children...)
    descr = [d for d in hdr["arrays"] + hdr.get("linear", {}).get("arrays", []) + hdr.get("sorts", [])
             if d["length"] > 0]
    d = descr[rng.integers(len(descr))]
    dt = np.dtype(d["dtype"])
    i = int(rng.integers(d["length"]))
    b = bytearray(body)
    if r == 6:
        v = _special(rng, dt)
    else:
        a = np.frombuffer(body, dt, d["length"], d["offset"])
        v = a[rng.integers(len(a))]
    off = d["offset"] + i * dt.itemsize
    b[off:off + dt.itemsize] = np.array([v], dt).tobytes()
    return f"{d['name']}[{i}] = {v!r}", _tc_join(hdr, bytes(b), version)


def _zip(members, method=zipfile.ZIP_DEFLATED):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=method) as z:
        for name, b in members:
            z.writestr(name, b)
    return buf.getvalue()


def _npy(a):
    b = io.BytesIO()
    np.save(b, a, allow_pickle=False)
    return b.getvalue()


@functools.lru_cache(maxsize=None)
def _bombed(data: bytes) -> bytes:
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        members = [(i.filename, z.read(i)) for i in z.infolist()]
    return _zip([(n, bytes(1 << 25) if n == "tree_output.npy" else b) for n, b in members])


def mutate_ir(rng, data):
    """(description, mutated bytes) of an IR file."""
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        members = [(i.filename, z.read(i)) for i in z.infolist()]
    names = [n for n, _ in members]
    r = int(rng.integers(12))
    if r == 0:
        return "flip bytes", _flip(rng, data)
    if r == 1:
        cut = int(rng.integers(len(data)))
        return f"truncate at {cut}", data[:cut]
    if r == 2:
        return "extend", data + bytes(rng.integers(0, 256, int(rng.integers(1, 200)), np.uint8))
    if r in (3, 4):  # a value of meta.json
        k = names.index("meta.json")
        meta = _mutate_json(rng, json.loads(members[k][1]))
        members[k] = ("meta.json", json.dumps(meta).encode())
        return "meta value", _zip(members)
    k = int(rng.integers(len(members)))
    name, b = members[k]
    if r in (5, 6, 7) and name.endswith(".npy"):  # a number of an array, or its dtype / shape
        a = np.load(io.BytesIO(b), allow_pickle=False).copy()
        how = rng.integers(5)
        if how in (0, 4) and a.size:  # a special value, or another entry of the array
            i = int(rng.integers(a.size))
            a.flat[i] = _special(rng, a.dtype) if how == 0 else a.flat[rng.integers(a.size)]
            what = f"{name}[{i}] = {a.flat[i]!r}"
        elif how == 1 and a.size:  # a wider dtype holding a value the real one cannot
            dt = {"i": np.int64, "u": np.uint64, "b": np.uint8, "f": np.float64}[a.dtype.kind]
            a = a.astype(dt)
            i = int(rng.integers(a.size))
            a.flat[i] = {np.uint8: 2, np.uint64: 2**40}.get(dt) or _special(rng, dt)
            what = f"{name} as {np.dtype(dt)}, [{i}] = {a.flat[i]!r}"
        elif how == 2:
            a = a.reshape(-1)[: int(rng.integers(a.size + 1))] if rng.random() < 0.5 else np.concatenate([a.reshape(-1)] * 2)
            what = f"{name} resized to {a.shape}"
        else:
            dt = [np.float32, np.int8, np.bool_, np.complex64, "U3", np.float16][rng.integers(6)]
            try:
                with np.errstate(all="ignore"):  # float16 overflows to inf: a mutation too
                    a = a.astype(dt)
            except (TypeError, ValueError):
                a = np.zeros(a.shape, dt)
            what = f"{name} as {np.dtype(dt)}"
        members[k] = (name, _npy(a))
        return what, _zip(members)
    if r == 8 and name.endswith(".npy"):  # the npy header itself
        members[k] = (name, _flip(rng, b, 0, min(len(b), 128)))
        return f"{name} npy header bytes", _zip(members)
    if r == 9:  # the archive's structure
        how = rng.integers(4)
        if how == 0:
            del members[k]
            return f"drop {name}", _zip(members)
        if how == 1:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # "Duplicate name"
                return f"duplicate {name}", _zip(members + [(name, members[k - 1][1])])
        if how == 2:
            return "extra member", _zip(members + [("t99.left.npy", _npy(np.zeros(3, np.int32)))])
        return "stored, not deflated", _zip(members, zipfile.ZIP_STORED)
    if r == 10:  # a zip bomb: tree_output.npy inflating to 32 MiB (32 KiB deflated)
        return "zip bomb", _bombed(data)
    # the directory claims another size / method for a member
    z = bytearray(data)
    cd = z.rfind(b"PK\x01\x02", 0, len(z) - 20)
    fld = [(10, "<H", [1, 8, 12, 14, 99]), (24, "<I", [0, 1, 2**31, 2**32 - 1]),
           (8, "<H", [1, 2**16 - 1])][rng.integers(3)]
    v = fld[2][rng.integers(len(fld[2]))]
    struct.pack_into(fld[1], z, cd + fld[0], v)
    return f"central directory field {fld[0]} = {v}", bytes(z)


# -- the worker (runs in a subprocess) ----------------------------------------------------------
OK_ERRORS = (treecomp.errors.TreecompError, ValueError, TypeError)


def _rows(n_features: int) -> np.ndarray:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(9, n_features))
    X[rng.random(X.shape) < 0.2] = np.nan
    cats = rng.random(X.shape) < 0.3
    X[cats] = rng.integers(-2, 70, cats.sum())
    return X


def _run_case(kind: str, data: bytes, isa: str) -> str:
    """'refused: <type>' | 'ok' | 'BAD: ...' for one mutated file."""
    from treecomp import interp
    from treecomp.ir import Forest
    try:
        if kind == "tc":
            k = arrays.load_bytes(data)
        else:
            forest = Forest.from_bytes(data)
    except OK_ERRORS as exc:
        return f"refused: {type(exc).__name__}"
    except Exception as exc:  # noqa: BLE001 - what the fuzz looks for
        return f"BAD: load raised {type(exc).__name__}: {exc}"
    from treecomp.linear import LinearKernel
    linear = isinstance(k, LinearKernel) if kind == "tc" else False

    def at(isa):  # the loaded kernel with its (leaf) tables walked by instruction set `isa`
        # (with the file's stored sorts, as load_bytes used them)
        if not linear:
            return arrays.ArraysKernel(k.tables, k.head, isa=isa, block_rows=k.requested_block_rows,
                                       sorts=k.sorts)
        lv = arrays.ArraysKernel(k.leaves.tables, k.leaves.head, isa=isa,
                                 block_rows=k.leaves.requested_block_rows, sorts=k.leaves.sorts)
        return LinearKernel.loaded(lv, k.head, k.tables.arrays, k.tables.average, data, None)
    try:
        if kind == "tc":
            nf = k.head.n_features
            if nf > 4096:
                return f"BAD: loaded with n_features={nf}"
            p = treecomp.Predictor(at(isa))
        else:
            try:
                p = treecomp.compile(forest, backend="arrays", isa=isa)
            except treecomp.errors.TreecompError as exc:  # e.g. too many features for the tables
                return f"refused by compile: {type(exc).__name__}"
        X = _rows(p.head.n_features)
        if not p.head.allow_nan:  # a model that refuses NaN rows, as its library does
            X = np.nan_to_num(X)
        try:
            raw = p.predict_raw(X)
        except treecomp.errors.ArtifactError as exc:
            if not linear:
                raise
            # leaf tables that validate on their own but reach a node outside the linear
            # section: only the walk finds it (treecomp.linear)
            return f"refused at predict: {type(exc).__name__}"
        if not np.all(np.isfinite(raw)):
            return "BAD: non-finite margins"
        if kind == "tcir":
            want = interp.predict_raw(forest, X)
            if raw.dtype != want.dtype or not np.array_equal(raw, want):
                return "BAD: compiled margins differ from the interpreter's"
        elif isa != "numpy":  # every path walks the same validated tables the same way
            ref = treecomp.Predictor(at("numpy"))
            if not np.array_equal(raw, ref.predict_raw(X)):
                return f"BAD: the {isa} path and the numpy path disagree"
        with np.errstate(all="ignore"):
            p.predict(X)
            if p.head.is_classifier:
                p.predict_proba(X)
        return "ok"
    except Exception as exc:  # noqa: BLE001
        return f"BAD: loaded, then {type(exc).__name__}: {exc}"


def worker(batch_path: str, progress_path: str) -> None:
    cases = pickle.loads(Path(batch_path).read_bytes())
    isas = arrays.supported_isas()
    with open(progress_path, "w") as out:
        for i, (kind, what, data) in enumerate(cases):
            out.write(json.dumps({"i": i, "start": True}) + "\n")
            out.flush()
            res = _run_case(kind, data, isas[i % len(isas)])
            out.write(json.dumps({"i": i, "result": res}) + "\n")
            out.flush()


# -- the test -----------------------------------------------------------------------------------
def _cases(kind: str, seed: int) -> list[tuple[str, str, bytes]]:
    rng = np.random.default_rng(seed)
    originals = []
    for forest, layout in _forests():
        if kind == "tc":
            originals.append(treecomp.compile(forest, backend="arrays", layout=layout, isa="numpy")
                             ._kernel.to_bytes())
        else:
            originals.append(forest.to_bytes())
    mutate = mutate_tc if kind == "tc" else mutate_ir
    cases = [(kind, "unmutated", d) for d in originals]
    while len(cases) < N_CASES:
        what, d = mutate(rng, originals[len(cases) % len(originals)])
        cases.append((kind, what, d))
    return cases


@pytest.mark.parametrize("kind, seed", [("tc", 20), ("tcir", 21)])
def test_mutated_artifacts_never_crash(kind, seed, tmp_path):
    cases = _cases(kind, seed)
    results: dict[int, str] = {}
    crashes = []
    for b in range(BATCHES):
        batch = cases[b::BATCHES]
        bp, pp = tmp_path / f"batch{b}.pkl", tmp_path / f"progress{b}.jsonl"
        bp.write_bytes(pickle.dumps(batch))
        code = f"from tests.test_artifacts import worker; worker({str(bp)!r}, {str(pp)!r})"
        t0 = time.monotonic()
        try:
            proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                                  text=True, timeout=TIMEOUT_S, env={**os.environ})
            rc, err = proc.returncode, proc.stderr[-2000:]
        except subprocess.TimeoutExpired:
            rc, err = "timeout", ""
        print(f"\n{kind} batch {b}: {len(batch)} cases in {time.monotonic() - t0:.1f} s", end="")
        done = [json.loads(ln) for ln in pp.read_text().splitlines()] if pp.exists() else []
        for r in done:
            if "result" in r:
                results[b + BATCHES * r["i"]] = r["result"]
        if rc != 0:
            last = done[-1]["i"] if done else 0
            _, what, data = batch[last]
            (tmp_path / f"crash{b}.bin").write_bytes(data)
            crashes.append(f"batch {b} ended with {rc} at case {last} ({what}): {err}")
    bad = [f"{cases[i][1]}: {r}" for i, r in sorted(results.items()) if r.startswith("BAD")]
    summary = {}
    for r in results.values():
        key = r if not r.startswith("BAD") else "BAD"
        summary[key] = summary.get(key, 0) + 1
    print(f"\n{kind}: {len(results)} cases: {json.dumps(summary, sort_keys=True)}")
    assert not crashes, "\n".join(crashes)
    assert len(results) == len(cases)
    # the unmutated files load and predict
    assert all(results[i] == "ok" for i in range(len(_forests()))), results
    assert not bad, "\n".join(bad[:20])


def test_loaded_artifacts_carry_the_ir(tmp_path):
    """Compiled with ir=True, .so (c, arrays), .tc and pickles carry the model's IR: loaded
    predictors offer apply and contributions (equal to compile's); by default, or with an
    absent section, a clear UnsupportedModelError; a corrupt or foreign one an ArtifactError."""
    from sklearn.ensemble import GradientBoostingClassifier
    from treecomp.errors import ArtifactError, UnsupportedModelError
    rng = np.random.default_rng(3)
    X = rng.normal(size=(200, 4))
    m = GradientBoostingClassifier(n_estimators=4, max_depth=3, random_state=0).fit(
        X, (X[:, 0] > 0).astype(int) + (X[:, 1] > 0.5))
    f = treecomp.parse(m)
    for backend, suffix in (("c", ".so"), ("arrays", ".tc"), ("arrays", ".so"), ("llvm", ".pkl")):
        p = treecomp.compile(f, backend=backend, ir=True)
        want_apply, want_shap = p.apply(X), p.contributions(X)
        path = tmp_path / f"{backend}{suffix}"
        if suffix == ".pkl":
            q = pickle.loads(pickle.dumps(p))
        else:
            p.save(path)
            q = pickle.loads(pickle.dumps(treecomp.load(path)))  # the artifact's bytes again
        np.testing.assert_array_equal(q.apply(X), want_apply)
        np.testing.assert_array_equal(q.contributions(X), want_shap)
        np.testing.assert_array_equal(q.predict_proba(X), m.predict_proba(X))
    k = treecomp.compile(f, backend="arrays")._kernel
    runtime = {"isa": "auto", "block_rows": 0}
    other = random_forest(5, n_features=4).to_bytes()
    for ir, error, match in ((None, UnsupportedModelError, "carries no IR"),
                             (b"not a zip", ArtifactError, "embedded model IR is corrupt"),
                             (other, ArtifactError, "not the model it was compiled from")):
        path = tmp_path / "case.tc"
        path.write_bytes(arrays_format.tables_to_bytes(k.tables, k.head, runtime, ir))
        q = treecomp.load(path)
        np.testing.assert_array_equal(q.predict_proba(X), m.predict_proba(X))  # predicts anyway
        with pytest.raises(error, match=match):
            q.apply(X)
        with pytest.raises(error, match=match):
            q.contributions(X)
    for backend in ("arrays", "c"):  # the default leaves it out (size, pickling time)
        bare = treecomp.compile(f, backend=backend)
        bare.save(tmp_path / f"bare-{backend}.so")
        for q in (treecomp.load(tmp_path / f"bare-{backend}.so"), pickle.loads(pickle.dumps(bare))):
            with pytest.raises(UnsupportedModelError, match="carries no IR"):
                q.apply(X)
    data = arrays_format.tables_to_bytes(k.tables, k.head, runtime, other)
    cut = data[:len(data) - arrays_format.TRAILER - (-len(other)) % 64 - 10]
    with pytest.raises(ArtifactError, match="digest"):  # truncated: the digest refuses it
        arrays.load_bytes(cut)
    with pytest.raises(ArtifactError, match="IR section"):  # sealed again: it runs past the end
        arrays.load_bytes(arrays_format.seal(cut + bytes(arrays_format.TRAILER)))


# == shared libraries and cache entries ===========================================================
# A seeded, bounded mutation fuzz of the .so files the c, llvm and arrays backends write (and of
# the LLVM backend's pickled object code), and of the cache entries loaded as native code: a
# model's cached .so, the arrays kernel built into the cache, the small-batch entry extension.
# Mutated libraries are refused before the dynamic loader sees them (the seal; the cache's
# digests), so many cases share a subprocess; a crash or hang still fails the test with the
# case that caused it.
SO_CASES = 600        # .so artifacts, over the three backends (+ pickled LLVM code)
RESEALED_CASES = 100  # arrays libraries whose tables were changed and sealed again
ENTRY_CASES = 25      # per kind of cache entry
SO_TIMEOUT_S = 180


def _so_forests():
    """Two small models: the artifacts' own, and the one whose files are swapped in."""
    a = random_forest(11, n_trees=4, max_depth=4, transform="sigmoid")
    a = a.replace(decision="proba_gt_half", classes=(np.array([0, 1]),))
    b = random_forest(12, n_trees=3, max_depth=3, n_features=6)
    return a, b


def _elf_sections(data: bytes) -> dict[str, tuple[int, int]]:
    """{name: (offset, size)} of an intact 64-bit little-endian ELF file's sections."""
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    hdrs = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
    stroff = hdrs[shstrndx][4]
    out = {}
    for h in hdrs:
        name = data[stroff + h[0]:data.index(b"\0", stroff + h[0])].decode()
        if h[1] != 8 and h[5]:  # not NOBITS, not empty
            out[name] = (h[4], h[5])
    out["(ELF header)"], out["(program headers)"] = (0, 64), (64, 56 * 8)
    return out


def mutate_so(rng, data: bytes, other: bytes) -> tuple[str, bytes]:
    """(description, mutated bytes) of a shared library (`other`: another model's)."""
    r = int(rng.integers(9))
    if r == 0:
        return "flip bytes", _flip(rng, data)
    if r in (1, 2, 3):  # bytes of one section: the dynamic-linking tables, the code, the data
        secs = _elf_sections(data)
        names = sorted(secs)
        name = names[rng.integers(len(names))]
        off, size = secs[name]
        if r == 3:  # +1 on a few bytes (a threshold, a table entry nudged)
            d = bytearray(data)
            for pos in rng.integers(off, off + size, int(rng.integers(1, 4))):
                d[pos] = (d[pos] + 1) & 0xFF
            return f"+1 in {name}", bytes(d)
        return f"flip in {name}", _flip(rng, data, off, off + size)
    if r == 4:
        cut = int(rng.integers(len(data)))
        return f"truncate at {cut}", data[:cut]
    if r == 5:
        return "extend", data + bytes(rng.integers(0, 256, int(rng.integers(1, 5000)), np.uint8))
    if r == 6:
        return "another model's library", other
    if r == 7:  # this file's start, the other's end (or the reverse)
        cut = int(rng.integers(1, min(len(data), len(other))))
        return f"spliced at {cut}", (data[:cut] + other[cut:]) if rng.random() < 0.5 else (other[:cut] + data[cut:])
    page = int(rng.integers(len(data) // 4096 + 1)) * 4096
    return f"page {page // 4096} zeroed", data[:page] + bytes(len(data[page:page + 4096])) + data[page + 4096:]


def _so_originals() -> dict[str, tuple[bytes, bytes]]:
    """{kind: (model a's artifact, model b's)}: .so of each backend, pickled LLVM object code."""
    import tempfile
    a, b = _so_forests()
    out = {}
    with tempfile.TemporaryDirectory() as d:
        for backend in ("c", "llvm", "arrays"):
            pair = []
            for k, f in enumerate((a, b)):
                path = Path(d) / f"{backend}{k}.so"
                treecomp.compile(f, backend=backend).save(path)
                pair.append(path.read_bytes())
            out[f"so:{backend}"] = tuple(pair)
    out["llvm-pickle"] = tuple(treecomp.compile(f, backend="llvm")._kernel.to_bytes() for f in (a, b))
    return out


def _resealed_table_mutants(rng, n: int) -> list[tuple[str, str, bytes]]:
    """Arrays libraries of model a with bytes of their tables (the blob: every table, the
    tables' .tc copy, the self-test rows) changed and then sealed again, as a forger would: the
    seal vouches for them, so the loader's check of the tables (arrays.kernel.check_library) must
    refuse every change that matters."""
    import tempfile
    from treecomp import toolchain
    from treecomp.backends.arrays import so as arrays_so
    a, _ = _so_forests()
    p = treecomp.compile(a, backend="arrays")
    _, blob = arrays_so.emit(p._kernel)
    out = []
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "m.so"
        p.save(path)
        data = path.read_bytes()
        at = data.find(blob)
        assert at > 0 and data.find(blob, at + 1) < 0
        for _ in range(n):
            if rng.random() < 0.5:
                what, d2 = "flip table bytes", _flip(rng, data, at, at + len(blob))
            else:
                b = bytearray(data)
                for pos in rng.integers(at, at + len(blob), int(rng.integers(1, 4))):
                    b[pos] = (b[pos] + 1) & 0xFF
                what, d2 = "+1 on table bytes", bytes(b)
            path.write_bytes(d2)
            toolchain.seal(path)
            out.append(("so:arrays-resealed", what, path.read_bytes()))
    return out


def _check_model(p) -> str:
    """'ok' when Predictor `p` answers exactly as the model it says it is (one of _so_forests)."""
    from treecomp import interp
    forests = {f.digest(): f for f in _so_forests()}
    f = forests.get(p.digest)
    if f is None:
        return f"BAD: loaded a model that is neither ({p.digest[:12]})"
    X = _rows(f.n_features)
    for rows in (X[:1], X, np.tile(X, (300, 1))):  # the small-batch entry and the ctypes path
        if not np.array_equal(p.predict_raw(rows), interp.predict_raw(f, rows)):
            return "BAD: wrong margins"
    if f.is_classifier and not np.array_equal(p.predict_proba(X), interp.predict_proba(f, X)):
        return "BAD: wrong probabilities"
    return "ok"


def _run_so_case(kind: str, data: bytes, tmp: Path, i: int) -> str:
    from treecomp import loader
    try:
        if kind == "llvm-pickle":
            p = loader.Predictor(loader.kernel_from_bytes("llvm", data))
        else:
            path = tmp / f"case{i}.so"
            path.write_bytes(data)
            p = treecomp.load(path)
    except treecomp.errors.ArtifactError as exc:
        return f"refused: {type(exc).__name__}"
    except Exception as exc:  # noqa: BLE001 - what the fuzz looks for
        return f"BAD: load raised {type(exc).__name__}: {exc}"
    try:
        return _check_model(p)
    except Exception as exc:  # noqa: BLE001
        return f"BAD: loaded, then {type(exc).__name__}: {exc}"


def so_worker(batch_path: str, progress_path: str) -> None:
    import tempfile
    cases = pickle.loads(Path(batch_path).read_bytes())
    with tempfile.TemporaryDirectory() as tmp, open(progress_path, "w") as out:
        for i, (kind, what, data) in enumerate(cases):
            out.write(json.dumps({"i": i, "start": True}) + "\n")
            out.flush()
            out.write(json.dumps({"i": i, "result": _run_so_case(kind, data, Path(tmp), i)}) + "\n")
            out.flush()


def _run_batches(tmp_path, name: str, batches: list, code: str, timeout: int) -> tuple[dict, list]:
    """Run `code` (formatted with {batch} and {progress}) on each batch of cases (kind, what,
    ...) in a subprocess; ({(batch, i): result}, crash reports)."""
    results, crashes = {}, []
    for b, batch in enumerate(batches):
        bp, pp = tmp_path / f"{name}{b}.pkl", tmp_path / f"{name}{b}.jsonl"
        bp.write_bytes(pickle.dumps(batch))
        env = {**os.environ, "TREECOMP_CACHE_DIR": str(tmp_path / f"{name}{b}-cache")}
        t0 = time.monotonic()
        try:
            proc = subprocess.run([sys.executable, "-c", code.format(batch=str(bp), progress=str(pp))],
                                  cwd=ROOT, capture_output=True, text=True, timeout=timeout, env=env)
            rc, err = proc.returncode, proc.stderr[-2000:]
        except subprocess.TimeoutExpired:
            rc, err = "timeout", ""
        print(f"\n{name} batch {b}: {len(batch)} cases in {time.monotonic() - t0:.1f} s", end="")
        done = [json.loads(ln) for ln in pp.read_text().splitlines()] if pp.exists() else []
        for r in done:
            if "result" in r:
                results[(b, r["i"])] = r["result"]
        if rc != 0:
            last = done[-1]["i"] if done else 0
            what = batch[last][:2] if last < len(batch) else done[-1].get("what")
            crashes.append(f"batch {b} ended with {rc} at case {last} ({what}): {err}")
    return results, crashes


def test_mutated_shared_libraries_never_crash_or_lie(tmp_path):
    """Byte flips (anywhere, or inside .dynamic / .gnu.hash / .rela.dyn / .dynstr / .text /
    .rodata ...), +1 nudges, truncations, extensions, spliced and zeroed pages, another model's
    file: every mutated library is refused (ArtifactError) or, when it is a real artifact (a
    flip that changed nothing, a swapped-in model), answers exactly as the model it says it is.
    Before the seal, 7,826 such mutants gave 939 crashes, 155 wrong answers and 6 hangs. And
    arrays libraries whose tables were changed and sealed again: refused by the check of their
    tables, or exact (a change in bytes nothing reads)."""
    rng = np.random.default_rng(32)
    originals = _so_originals()
    kinds = sorted(originals)
    cases = [(k, "unmutated", originals[k][0]) for k in kinds]
    cases += [(k, "the other model", originals[k][1]) for k in kinds]
    while len(cases) < SO_CASES:
        k = kinds[len(cases) % len(kinds)]
        data, other = originals[k]
        if k == "llvm-pickle":
            r = rng.integers(3)
            what, d = (("flip bytes", _flip(rng, data)) if r == 0 else
                       ("truncate", data[:int(rng.integers(len(data)))]) if r == 1 else
                       ("flip header bytes", _flip(rng, data, 0, data.index(b"\x7fELF"))))
        else:
            what, d = mutate_so(rng, data, other)
        cases.append((k, what, d))
    cases += _resealed_table_mutants(rng, RESEALED_CASES)
    code = "from tests.test_artifacts import so_worker; so_worker({batch!r}, {progress!r})"
    batches = [cases[b::2] for b in range(2)]
    results, crashes = _run_batches(tmp_path, "so", batches, code, SO_TIMEOUT_S)
    summary = {}
    for (b, i), r in results.items():
        key = f"{batches[b][i][0]}: {r if not r.startswith('BAD') else 'BAD'}"
        summary[key] = summary.get(key, 0) + 1
    print(f"\n{len(results)} cases: {json.dumps(summary, sort_keys=True, indent=1)}")
    assert not crashes, "\n".join(crashes)
    assert len(results) == len(cases)
    bad = [f"{batches[b][i][:2]}: {r}" for (b, i), r in sorted(results.items()) if r.startswith("BAD")]
    assert not bad, "\n".join(bad[:20])
    for b, batch in enumerate(batches):  # the real artifacts load and answer
        for i, (k, what, data) in enumerate(batch):
            if k == "so:arrays-resealed":  # refused, or a change nothing reads (padding)
                continue
            if what in ("unmutated", "the other model") or data in originals[k]:
                assert results[(b, i)] == "ok", (k, what, results[(b, i)])
            else:
                assert results[(b, i)].startswith("refused"), (k, what, results[(b, i)])
    resealed = [r for (b, i), r in results.items() if batches[b][i][0] == "so:arrays-resealed"]
    assert sum(r.startswith("refused") for r in resealed) > len(resealed) // 2, resealed


# -- cache entries -------------------------------------------------------------------------------
def mutate_entry(rng, data: bytes, other: bytes) -> tuple[str, bytes, bool]:
    """(description, the entry's new bytes, whether the digest file is swapped too)."""
    r = int(rng.integers(7))
    if r == 0:
        cut = int(rng.integers(len(data)))
        return f"truncate at {cut}", data[:cut], False
    if r == 1:
        return "flip bytes", _flip(rng, data), False
    if r == 2:
        secs = _elf_sections(data)
        name = sorted(secs)[rng.integers(len(secs))]
        off, size = secs[name]
        return f"flip in {name}", _flip(rng, data, off, off + size), False
    if r == 3:
        return "another library", other, False
    if r == 4:
        return "another library and its digest file", other, True
    if r == 5:
        return "empty", b"", False
    return "digest file removed", data, None


def _entry_setup(kind: str):
    """Patch this process so that `kind`'s cache entry is rebuilt by copying a known-good file
    (the build itself is tested elsewhere); returns (load: loads the entry from the cache and
    says "ok" when it answers exactly, else what went wrong; good file, another library,
    rebuild counter)."""
    from treecomp import interp, loader, native, toolchain
    from treecomp.backends.arrays import native as arrays_native
    calls = []
    a, b = _so_forests()
    X = _rows(a.n_features)

    def copying(src):
        def build(sources, out, *args, **kwargs):
            calls.append(out)
            Path(out).write_bytes(src)
        return build
    kernel = arrays_native.prebuilt_kernel_path().read_bytes()
    entry = next(Path(arrays_native.__file__).parents[2].glob("_tc_entry*")).read_bytes()
    if kind == "c-so":
        good, other = _c_entries(a, b)
        toolchain.build_shared_library = copying(good)

        def load():
            p = treecomp.compile(a, backend="c")
            return "ok" if np.array_equal(p.predict_raw(X), interp.predict_raw(a, X)) else "wrong margins"
        return load, good, other, calls
    if kind == "kernel":
        arrays_native._load_prebuilt = lambda: None
        toolchain.build_shared_library = copying(kernel)

        def load():
            arrays_native._LIB = None
            arrays_native.native_library()
            if arrays_native.KERNEL_ORIGIN != "built":
                return f"the kernel came from {arrays_native.KERNEL_ORIGIN}, not the cache"
            k = __import__("treecomp.backends.arrays", fromlist=["build"]).build(a, isa="scalar")
            ok = np.array_equal(treecomp.Predictor(k).predict_raw(X), interp.predict_raw(a, X))
            return "ok" if ok else "wrong margins"
        return load, kernel, entry, calls
    native._prebuilt_entry = lambda: None
    toolchain.build_shared_library = copying(entry)
    p = treecomp.compile(a, backend="arrays")

    def load():
        native.reset_entry()
        loader._ENTRY = None
        if loader._entry() is native.no_entry or native.ENTRY_ORIGIN != "built":
            return f"the entry from the cache was not used ({native.ENTRY_ERROR})"
        ok = all(np.array_equal(p.predict_raw(X[i:i + 2]), interp.predict_raw(a, X[i:i + 2]))
                 for i in range(0, len(X), 2))
        return "ok" if ok else "wrong margins"
    return load, entry, kernel, calls


def _c_entries(a, b) -> tuple[bytes, bytes]:
    """The c backend's cache entries of models a and b, built in a scratch cache."""
    import tempfile
    old = os.environ.get("TREECOMP_CACHE_DIR")
    try:
        out = []
        for f in (a, b):
            with tempfile.TemporaryDirectory() as d:
                os.environ["TREECOMP_CACHE_DIR"] = d
                out.append(treecomp.compile(f, backend="c")._kernel.path.read_bytes())
        return out[0], out[1]
    finally:
        if old is None:
            os.environ.pop("TREECOMP_CACHE_DIR", None)
        else:
            os.environ["TREECOMP_CACHE_DIR"] = old


def entry_worker(kind: str, seed: int, n: int, progress_path: str) -> None:
    """`n` mutations of `kind`'s cache entry, each loaded from a cache of its own."""
    import shutil
    import tempfile
    load, good, other, calls = _entry_setup(kind)
    rng = np.random.default_rng(seed)
    with tempfile.TemporaryDirectory() as tmp, open(progress_path, "w") as out:
        ref = Path(tmp) / "ref"
        ref.mkdir()
        os.environ["TREECOMP_CACHE_DIR"] = str(ref)
        assert load() == "ok" and len(calls) == 1, "the reference entry does not load"
        (entry,) = [p for p in ref.iterdir() if not p.name.endswith(".sha256")]
        assert entry.read_bytes() == good
        oref = Path(tmp) / "oref"  # the other library as the cache publishes it, under its own key
        oref.mkdir()
        os.environ["TREECOMP_CACHE_DIR"] = str(oref)
        from treecomp import toolchain
        opath = toolchain.cached("another-entry", ".so", lambda p: p.write_bytes(other))
        odigest = opath.with_name(opath.name + ".sha256")
        for i in range(n):
            what, data, swap_digest = ("unmutated", good, False) if i == 0 else mutate_entry(rng, good, other)
            out.write(json.dumps({"i": i, "what": what, "start": True}) + "\n")
            out.flush()
            case = Path(tmp) / f"case{i}"
            shutil.copytree(ref, case)
            e, digest = case / entry.name, case / (entry.name + ".sha256")
            e.write_bytes(data)
            if swap_digest is None:
                digest.unlink(missing_ok=True)
            elif swap_digest and odigest.exists():  # the other library's own digest file
                shutil.copyfile(odigest, digest)
            os.environ["TREECOMP_CACHE_DIR"] = str(case)
            before = len(calls)
            try:
                res = load()
                res = res if res == "ok" else f"BAD: {res}"
            except Exception as exc:  # noqa: BLE001 - what the fuzz looks for
                res = f"BAD: {type(exc).__name__}: {exc}"
            rebuilt = len(calls) > before
            if res == "ok" and rebuilt != (i > 0):
                res = f"BAD: {'rebuilt' if rebuilt else 'not rebuilt'} ({what})"
            if res == "ok" and e.read_bytes() != good:
                res = "BAD: the entry was not restored"
            out.write(json.dumps({"i": i, "result": res}) + "\n")
            out.flush()
            shutil.rmtree(case, ignore_errors=True)


@pytest.mark.parametrize("kind, seed", [("c-so", 40), ("kernel", 41), ("entry", 42)])
def test_mutated_cache_entries_are_rebuilt_never_loaded(kind, seed, tmp_path):
    """A cache hit was trusted by its name: a truncated model .so killed the next compile
    (SIGBUS), a truncated arrays kernel or entry extension every prediction, another model's .so
    under the name predicted that model, a corrupt entry was never rebuilt. Each mutated entry
    (truncated, flipped, emptied, replaced by another library with or without that library's
    digest file, its digest removed) must be rebuilt and the model answer exactly."""
    code = (f"from tests.test_artifacts import entry_worker; "
            f"entry_worker({kind!r}, {seed}, {ENTRY_CASES}, {{progress!r}})")
    _, crashes = _run_batches(tmp_path, kind, [[(kind, "")]], code, SO_TIMEOUT_S)
    pp = tmp_path / f"{kind}0.jsonl"
    lines = [json.loads(ln) for ln in pp.read_text().splitlines()] if pp.exists() else []
    whats = {r["i"]: r["what"] for r in lines if "what" in r}
    res = {r["i"]: r["result"] for r in lines if "result" in r}
    if crashes:
        last = max(whats) if whats else None
        pytest.fail(f"{kind}: the worker died at case {last} ({whats.get(last)}): {crashes}")
    assert len(res) == ENTRY_CASES, res
    bad = [f"{whats[i]}: {r}" for i, r in sorted(res.items()) if r != "ok"]
    assert not bad, "\n".join(bad)
