"""treecomp.frontends.jsonarrays: JSON with its big number arrays read by numpy must give exactly
what json.loads gives (values, int / float kind), refuse exactly what json.loads refuses, and
leave everything else (other keys, hostile placeholders, odd arrays) to json.loads; the XGBoost
frontend must parse to the same Forest and raise the same errors either way."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest

from treecomp.errors import InvalidModelError
from treecomp.frontends import jsonarrays
from treecomp.frontends import xgboost as xgb_frontend


def _json_kind(buf: bytes, floats: bool):
    """What json.loads makes of the list: its float64 / int64 values when every element is of
    the asked kind (ints: at most 18 characters, what parse_numbers takes), else None."""
    try:
        v = json.loads(b"[" + buf + b"]")
    except ValueError:
        return None
    if not v:
        return None
    kind = float if floats else int
    if any(type(e) is not kind for e in v):
        return None
    if not floats and any(len(t.strip()) > 18 for t in buf.split(b",")):
        return None
    return np.array(v, np.float64 if floats else np.int64)


def _same(want, got) -> bool:
    if want is None or got is None:
        return want is None and got is None
    return want.dtype == got.dtype and np.array_equal(want.view(np.int64), got.view(np.int64))


def _float_tokens(rng: random.Random, n: int) -> list[str]:
    out = []
    for _ in range(n):
        r = rng.random()
        if r < 0.4:  # XGBoost's float32 form: shortest digits, 'E' exponent
            x = np.float32(rng.gauss(0, 1) * 10.0 ** rng.randint(-12, 12))
            m, _, e = np.format_float_scientific(x, unique=True, trim="-").partition("e")
            out.append(f"{m}E{int(e)}")
        elif r < 0.6:
            out.append(repr(rng.gauss(0, 1) * 10.0 ** rng.randint(-320, 308)))
        elif r < 0.75:  # long mantissas, far exponents, signs and zeros in every form
            digits = "".join(rng.choice("0123456789") for _ in range(rng.randint(1, 25)))
            digits = digits.lstrip("0") or "0"
            frac = "".join(rng.choice("0123456789") for _ in range(rng.randint(1, 25)))
            exp = rng.choice(["", f"e{rng.randint(-400, 400)}", f"E+{rng.randint(0, 30):02d}",
                              f"E-{rng.randint(0, 30):03d}"])
            out.append(rng.choice(["", "-"]) + digits + "." + frac + exp)
        else:
            out.append(rng.choice(["0E0", "-0E0", "0.0", "-0.0", "1E0", "1e22", "1e23",
                                   "9007199254740993E0", "2.2250738585072011E-308",
                                   "4.9406564584124654E-324", "1.7976931348623157E308",
                                   "1E400", "-1E400", "1E-400", "123456789012345678E-5"]))
    return out


@pytest.mark.parametrize("chunk", [None, 16, 64])
def test_parse_numbers_matches_json(monkeypatch, chunk):
    if chunk:
        monkeypatch.setattr(jsonarrays, "_CHUNK", chunk)
    rng = random.Random(33)
    for trial in range(300):
        toks = _float_tokens(rng, rng.randint(1, 40))
        if trial % 3 == 0:  # all with an exponent: the two-integer path
            toks = [t if "e" in t.lower() else t + "E0" for t in toks]
        buf = ",".join(toks).encode()
        got = jsonarrays.parse_numbers(buf, True)
        assert _same(_json_kind(buf, True), got), buf
        ints = ",".join(str(rng.choice([0, -1, 1, rng.randint(-10 ** 17, 10 ** 17),
                                        rng.randint(0, 99)])) for _ in range(rng.randint(1, 40)))
        assert _same(_json_kind(ints.encode(), False), jsonarrays.parse_numbers(ints.encode(), False))


@pytest.mark.parametrize("chunk", [None, 8])
def test_parse_numbers_refuses_what_json_refuses(monkeypatch, chunk):
    """Seeded mutations of valid lists: parse_numbers gives json.loads' values or None, and
    None exactly when json.loads fails or gives another kind (or an int of 19+ characters)."""
    if chunk:
        monkeypatch.setattr(jsonarrays, "_CHUNK", chunk)
    rng = random.Random(7)
    alphabet = "0123456789,-+.eE x\n"
    bad = ["01", "-01", "00", "1.", ".5", "+1", "1e", "1e+", "--1", "1-", "1..2", "1.2.3", "1e5e5",
           "1e5.5", "", " 1", "NaN", "Infinity", "-Infinity", "0x1", "1_0", "e5", "-", "1E-", "1.e5",
           "1234567890123456789", "-123456789012345678", "0.5E1.5", "1.5e+-3"]
    seen_none = seen_ok = 0
    for trial in range(1500):
        floats = trial % 2 == 0
        toks = (_float_tokens(rng, rng.randint(1, 8)) if floats
                else [str(rng.randint(-999, 10 ** rng.randint(1, 18))) for _ in range(rng.randint(1, 8))])
        if rng.random() < 0.3:
            toks[rng.randrange(len(toks))] = rng.choice(bad)
        buf = bytearray(",".join(toks).encode())
        for _ in range(rng.choice([0, 0, 1, 2])):
            i = rng.randrange(len(buf) + 1)
            op = rng.random()
            if op < 0.4 and buf:
                del buf[min(i, len(buf) - 1)]
            elif op < 0.7:
                buf.insert(i, ord(rng.choice(alphabet)))
            elif buf:
                buf[min(i, len(buf) - 1)] = ord(rng.choice(alphabet))
        want = _json_kind(bytes(buf), floats)
        got = jsonarrays.parse_numbers(bytes(buf), floats)
        if got is None and want is not None:  # whitespace, NaN, Infinity: json.loads' to read
            assert any(c in buf for c in (b" ", b"\n", b"NaN", b"Infinity")), (bytes(buf), floats)
        else:
            assert _same(want, got), (bytes(buf), floats, want, got)
        seen_none += got is None
        seen_ok += got is not None
    assert seen_none > 200 and seen_ok > 200  # both sides exercised


def _plain(v):
    """A loads() result with its NumberArrays turned back into lists (json.loads' form)."""
    if isinstance(v, jsonarrays.NumberArray):
        return v.tolist()
    if isinstance(v, dict):
        return {k: _plain(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_plain(x) for x in v]
    return v


def _same_doc(a, b) -> bool:
    """Equal, with int / float kinds and float bits compared (json.dumps keeps both)."""
    return json.dumps(a) == json.dumps(b)


def test_loads_equals_json_loads_and_reads_the_big_arrays():
    vals = [0.5, -1.25e-7, 3.0, 0.0]
    doc = {"a": {"left_children": list(range(-1, 60)), "split_conditions": vals * 20,
                 "other": list(range(100)), "short": [1, 2]},
           "b": [{"left_children": [1, 2]}, {"sum_hessian": [1.5] * 30}], "s": "x"}
    data = json.dumps(doc, separators=(",", ":")).encode()
    got = jsonarrays.loads(data, ["left_children", "split_conditions", "sum_hessian"])
    assert _same_doc(_plain(got), json.loads(data))
    assert isinstance(got["a"]["left_children"], jsonarrays.NumberArray)
    assert got["a"]["left_children"].values.dtype == np.int64
    assert isinstance(got["a"]["split_conditions"], jsonarrays.NumberArray)
    assert got["a"]["split_conditions"].is_float
    assert isinstance(got["a"]["other"], list)  # not one of the keys
    assert isinstance(got["b"][0]["left_children"], list)  # too short to be worth it
    assert isinstance(got["b"][1]["sum_hessian"], jsonarrays.NumberArray)


@pytest.mark.parametrize("extra", [
    '"x":"\\u0000tc0"',                       # a placeholder-like string elsewhere
    '"left_children":"\\u0000tc0"',           # ... under a fast key, before the real array
    '"q":{"left_children":"\\u0000tc1"}',     # ... nested, pointing at another array
    '"left_children":"\\u0000tcx"',
    '"k\\",\\"left_children\\":[1]":1',       # the key text inside a string
])
def test_loads_placeholders_in_the_document_are_harmless(extra):
    arr = ",".join(str(i) for i in range(80))
    data = ('{' + extra + ',"t":{"left_children":[' + arr + '],"parents":[' + arr + ']}}').encode()
    got = jsonarrays.loads(data, ["left_children", "parents"])
    assert _same_doc(_plain(got), json.loads(data))


@pytest.mark.parametrize("body", ["01,2", "1,,2", "1,2,", "1.5,2", "1e5,2.5,3", "NaN,1.5",
                                  "1, 2", "1.5.5,2.5", "-,1"])
def test_loads_invalid_or_mixed_arrays_behave_as_json(body):
    data = ('{"t":{"left_children":[' + ",".join([body] * 20) + ']}}').encode()
    try:
        want = json.loads(data)
    except ValueError as exc:
        with pytest.raises(ValueError) as got:
            jsonarrays.loads(data, ["left_children"])
        assert str(got.value) == str(exc)
        return
    assert _same_doc(_plain(jsonarrays.loads(data, ["left_children"])), want)


def _model_doc() -> dict:
    """A small XGBoost 3.2 document (two depth-3 trees), as save_model writes it."""
    def tree(i):
        n_int, n = 7, 15
        idx = np.arange(n)
        rng = np.random.default_rng(i)
        internal = idx < n_int
        return {"base_weights": (rng.normal(size=n) * 0.1).astype(np.float32).tolist(),
                "categories": [], "categories_nodes": [], "categories_segments": [],
                "categories_sizes": [], "default_left": (internal & (idx % 2 == 0)).astype(int).tolist(),
                "id": i, "left_children": np.where(internal, 2 * idx + 1, -1).tolist(),
                "loss_changes": np.where(internal, 1.5, 0.0).tolist(),
                "parents": [2147483647] + ((idx[1:] - 1) // 2).tolist(),
                "right_children": np.where(internal, 2 * idx + 2, -1).tolist(),
                "split_conditions": rng.normal(size=n).astype(np.float32).tolist(),
                "split_indices": np.where(internal, idx % 4, 0).tolist(),
                "split_type": [0] * n, "sum_hessian": [float(100 - j) for j in range(n)],
                "tree_param": {"num_deleted": "0", "num_feature": "4", "num_nodes": str(n),
                               "size_leaf_vector": "1"}}
    return {"learner": {
        "attributes": {}, "feature_names": [], "feature_types": [],
        "gradient_booster": {"model": {
            "gbtree_model_param": {"num_parallel_tree": "1", "num_trees": "2"},
            "iteration_indptr": [0, 1, 2], "tree_info": [0, 0], "trees": [tree(0), tree(1)]},
            "name": "gbtree"},
        "learner_model_param": {"base_score": "5E-1", "boost_from_average": "1", "num_class": "0",
                                "num_feature": "4", "num_target": "1"},
        "objective": {"name": "reg:squarederror", "reg_loss_param": {"scale_pos_weight": "1"}}},
        "version": [3, 2, 0]}


def _parse_both(tmp_path, data: bytes, monkeypatch):
    """parse_xgboost_file with the numpy arrays and with plain json.loads: (forest or error)."""
    p = tmp_path / "m.json"
    p.write_bytes(data)
    out = []
    for fast in (True, False):
        with monkeypatch.context() as m:
            if not fast:
                m.setattr(jsonarrays, "loads", lambda d, keys: json.loads(d))
            try:
                out.append(xgb_frontend.parse_xgboost_file(p).digest())
            except InvalidModelError as exc:
                out.append(f"{type(exc).__name__}: {exc}")
    return out


def test_xgboost_file_same_forest_and_errors_either_way(tmp_path, monkeypatch):
    doc = _model_doc()
    data = json.dumps(doc, separators=(",", ":")).encode()
    assert b'"split_conditions":[' in data
    fast, slow = _parse_both(tmp_path, data, monkeypatch)
    assert fast == slow and not fast.startswith("InvalidModelError")
    # values of the wrong JSON kind: the same refusal, in the same words
    for key, new in [("split_conditions", [1] * 15), ("left_children", [1.0] * 15),
                     ("default_left", [0.0] * 15), ("loss_changes", list(range(15))),
                     ("split_indices", [10 ** 17] * 15)]:
        bad = json.loads(data)
        bad["learner"]["gradient_booster"]["model"]["trees"][1][key] = new
        fast, slow = _parse_both(tmp_path, json.dumps(bad, separators=(",", ":")).encode(),
                                 monkeypatch)
        assert fast == slow, key
        assert fast.startswith("InvalidModelError"), (key, fast)
