"""treecomp.frontends.jsonarrays: JSON with its big number arrays read by numpy must give exactly
what json.loads gives (values, int / float kind), refuse exactly what json.loads refuses, and
leave everything else (other keys, hostile placeholders, odd arrays) to json.loads; the XGBoost
frontend must parse to the same Forest and raise the same errors either way."""

from __future__ import annotations

import json
import random
import re

import numpy as np
import pytest

from treecomp import numparse
from treecomp.errors import InvalidModelError
from treecomp.frontends import jsonarrays
from treecomp.frontends import xgboost as xgb_frontend
from tests.memtrace import traced_peak


@pytest.fixture(params=["native", "numpy"])
def way(request, monkeypatch):
    """Each test that takes it runs twice: with treecomp.numparse's C parser, and with the
    numpy passes (jsonarrays.NATIVE = False), which must give the same results."""
    if request.param == "native" and not numparse.available():
        pytest.skip(f"the native number parser is not built: {numparse.UNAVAILABLE}")
    monkeypatch.setattr(jsonarrays, "NATIVE", request.param == "native")
    return request.param


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
def test_parse_numbers_matches_json(monkeypatch, chunk, way):
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


def test_native_find_arrays_and_strip_are_the_python_passes():
    """Seeded fuzz: numparse.find_arrays finds what jsonarrays' regex pass and byte check
    find (keys that prefix one another, keys after '{' / ',' / elsewhere, inside strings,
    escaped quotes, no closing ']', short bodies, other bytes in the body, overlapping
    matches) with the same counts and float flags; numparse.strip rebuilds the document as
    the Python pieces do."""
    if not numparse.available():
        pytest.skip(f"the native parser is not built: {numparse.UNAVAILABLE}")
    rng = random.Random(38)
    keys = ("a", "ab", "left_children", "x\u00e9")
    parts = ['"a":[', '"ab":[', '"left_children":[', '"x\u00e9":[', '{', ',', '"', '\\"', ']', '[',
             '1,2,3', '-1.5E3', ',,', ' ', 'e', '"a":"', '"ab"', '{"a":[1,2', '0' * 70, '9,' * 40,
             '{"a":[1,2,3]', ',"ab":[1.5,-2e3]', ',"left_children":[' + '1,' * 40 + '2]']
    found = 0
    for trial in range(400):
        doc = "".join(rng.choice(parts) for _ in range(rng.randint(0, 40))).encode()
        min_bytes = rng.choice([0, 1, 5, jsonarrays.MIN_BYTES])
        kt = tuple(sorted(keys))
        want = [(a, b, key) for a, b, key in jsonarrays._candidates(doc, kt) if b - a >= min_bytes] \
            if min_bytes == jsonarrays.MIN_BYTES else None
        # the regex pass, with this min_bytes
        pat = jsonarrays._pattern(kt)
        cands = []
        for m in pat.finditer(doc):
            st = m.start()
            if st == 0 or doc[st - 1] not in b"{,":
                continue
            b = doc.find(b"]", m.end())
            if b - m.end() >= min_bytes:
                cands.append((m.end(), b, m.group(1)))
        if want is not None:
            assert want == cands
        ok = [(a, b, key) for a, b, key in cands if set(doc[a:b]) <= set(b"-+.0123456789eE,")]
        spans, kidx, counts, flags = numparse.find_arrays(doc, tuple(k.encode() for k in kt), min_bytes)
        got = [(a, b, kt[k].encode()) for (a, b), k in zip(spans.tolist(), kidx.tolist())]
        assert got == ok, doc
        found += len(got)
        assert counts.tolist() == [doc.count(b",", a, b) + 1 for a, b, _ in ok]
        assert flags.tolist() == [any(c in doc[a:b] for c in (b".", b"e", b"E")) for a, b, _ in ok]
        cut = [(a - 1, b + 1) for a, b, _ in ok]
        pieces, pos = [], 0
        for i, (a, b) in enumerate(cut):
            pieces += [doc[pos:a], b'"\\u0000tc%d"' % i]
            pos = b
        pieces.append(doc[pos:])
        assert numparse.strip(doc, np.array(cut, np.int64).reshape(-1, 2)) == b"".join(pieces)
    assert found > 500
    with pytest.raises(ValueError):
        numparse.strip(b"abcdef", [[3, 4], [1, 2]])
    with pytest.raises(ValueError):
        numparse.strip(b"abc", [[1, 9]])


def test_parse_numbers_digit_runs(way):
    """Every length of digit run (the native parser reads runs of 1-7 digits 8 bytes at a
    time, longer ones and those near a list's end digit by digit), integer parts of '0' and
    fractions with leading zeros (not significant digits while the mantissa is 0), 17-21
    significant digits in all: json.loads' values."""
    rng = random.Random(38)

    def run(n: int, lead: str = "123456789") -> str:
        return "".join([rng.choice(lead)] + [rng.choice("0123456789") for _ in range(n - 1)]) if n else ""
    for _ in range(400):
        toks, ints = [], []
        for _ in range(rng.randint(1, 12)):
            i = rng.choice(["0", run(rng.randint(1, 10))])
            f = "0" * rng.choice([0, 0, 1, 3, 7, 9]) + run(rng.randint(1, 12), "0123456789")
            e = rng.choice(["", "", "E-1", "e+07", "E-15", "E3"])
            toks.append(rng.choice(["", "-"]) + i + "." + f + e)
            ints.append(rng.choice(["", "-"]) + rng.choice(["0", run(rng.randint(1, 17))]))
        for buf, floats in ((",".join(toks).encode(), True), (",".join(ints).encode(), False)):
            assert _same(_json_kind(buf, floats), jsonarrays.parse_numbers(buf, floats)), buf
            bad = buf.replace(b"1", b"x", 1)  # (a non-digit inside a run: refused)
            if bad != buf:
                assert jsonarrays.parse_numbers(bad, floats) is None


@pytest.mark.parametrize("chunk", [None, 8])
def test_parse_numbers_refuses_what_json_refuses(monkeypatch, chunk, way):
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


#: floats at the edges of the exact fast path (mantissa <= 2**53, |power of ten| <= 22) and of
#: float64 / float32: each must come out as float(token), bit for bit
_EDGE_FLOATS = [
    "9007199254740992E0", "9007199254740993E0", "9007199254740992.0", "9007199254740993.0",
    "-9007199254740993E0", "9007199254740993E1", "9007199254740993E-1", "9007199254740995E1",
    "9007199254740991E22", "9007199254740992E22", "9007199254740993E22",
    "9007199254740992E-22", "9007199254740992E23", "1E22", "1E23", "-1e23", "1e-22", "1e-23",
    "1.0E22", "10E21", "0.1E23", "1.5E22", "123456789012345678E-5", "1234567890123456789E0",
    "12345678901234567890E0", "18446744073709551615E0", "18446744073709551616E0",
    "99999999999999999999E-20", "0.12345678901234567890123", "3.141592653589793238462643383279",
    "4.9406564584124654E-324", "2.4703282292062327E-324", "2.4703282292062328E-324",
    "2.2250738585072011E-308", "2.2250738585072014E-308", "1.7976931348623157E308",
    "1.7976931348623158E308", "1.7976931348623159E308", "1E400", "-1E400", "1E-400", "-1E-400",
    "-0.0", "-0E0", "0E0", "0.0", "0e-5", "-0.0e+5", "0E400", "-0.000E-400", "1E+5", "1e-5",
    "1E+05", "1e005", "1E-005", "5E-1", "0.000000000000000000000000000001",
    "100000000000000000000000E-23", "1000000000000000000000000000000.0E-30",
    "3.4028234663852886E38", "3.4028235677973366E38", "3.4028235677973367E38", "-3.5E38",
    "1.401298464324817E-45", "7.006492321624085E-46", "7.006492321624086E-46", "1.17549435E-38",
    "1E99999999999999999999", "1E-99999999999999999999", "0.5E0", "1.0000000000000002",
    "1.00000000000000011102230246251565404236316680908203125",
    "1.000000000000000111022302462515654042363166809082031251"]

#: bodies that are not lists of JSON numbers of the kind asked (floats=True / False): None
_BAD_BODIES = [
    (True, "01.5"), (True, "-01.5"), (True, "00.5"), (True, "00E0"), (True, "1.5,"), (True, ",1.5"),
    (True, "1.5,,2.5"), (True, "1.5E"), (True, "1.5E+"), (True, "1.5e-"), (True, "1."), (True, "-"),
    (True, ""), (True, ".5"), (True, "1.e5"), (True, "+1.5"), (True, "1.5e+-3"), (True, "1.5E5E5"),
    (True, "1.5.5"), (True, "1.5,2"), (True, "2,1.5"), (True, "NaN"), (True, "Infinity"),
    (True, "-Infinity"), (True, "true"), (True, "1.5x"), (True, "0x1.8p1"), (True, "1_0.5"),
    (True, "1.5 "), (True, "1.5,-"), (True, "1.5,-,2.5"), (True, "e5"), (True, "-e5"),
    (True, "1.5e5.5"), (True, "\u0661.5"), (True, "1.5\t"), (True, "1.5]"), (True, "1.5,[2.5]"),
    (False, "01"), (False, "-01"), (False, "00"), (False, "-00"), (False, "1,"), (False, ",1"),
    (False, "1,,2"), (False, "1.5"), (False, "1e5"), (False, "1E5"), (False, "+1"), (False, "--1"),
    (False, "1-"), (False, "-"), (False, ""), (False, "1000000000000000000"),
    (False, "-100000000000000000"), (False, "1,1000000000000000000"), (False, "NaN"), (False, "1 "),
    (False, "0x10"), (False, "1.0"), (False, "1,2.0")]


def test_parse_numbers_edges(way):
    """The fast path's edges, float64's and float32's limits, long mantissas, signed zeros,
    signed exponents (each alone and all in one list), and the refusals: leading zeros,
    truncated lists, empty items, non-numbers, the other kind, integers of 19+ characters."""
    for tok in _EDGE_FLOATS:
        want = np.array([float(tok)], np.float64)
        got = jsonarrays.parse_numbers(tok.encode(), True)
        assert _same(want, got), (tok, want, got)
        assert jsonarrays.parse_numbers(tok.encode(), False) is None, tok
    buf = ",".join(_EDGE_FLOATS).encode()
    assert _same(np.array([float(t) for t in _EDGE_FLOATS]), jsonarrays.parse_numbers(buf, True))
    # a million fraction digits against exponents of 7 and 8 digits (an exponent read only up
    # to some size must not pass for a small one: 1E10000005 here is inf, not 0.1)
    zeros = "0" * 1_000_000
    longs = [f"0.{zeros}1E1000005", f"0.{zeros}1E10000005", f"-0.{zeros}1E999990",
             f"0.{zeros}1E+1000001", f"1{zeros}.0E-1000000"]
    got = jsonarrays.parse_numbers(",".join(longs).encode(), True)
    assert _same(np.array([float(t) for t in longs]), got), got
    ints = ["0", "-0", "1", "-1", "999999999999999999", "-99999999999999999", "2147483647",
            "2147483648", "-2147483648", "-2147483649", "9007199254740993"]
    got = jsonarrays.parse_numbers(",".join(ints).encode(), False)
    assert _same(np.array([int(t) for t in ints], np.int64), got), got
    for floats, body in _BAD_BODIES:
        if not any(w in body for w in ("NaN", "Infinity", " ", "\t")):  # (json.loads' own
            assert _json_kind(body.encode(), floats) is None, body  # cases aside: refusals)
        assert jsonarrays.parse_numbers(body.encode(), floats) is None, (floats, body)
        for ctx in ("{},1.5E0", "1.5E0,{}", "1.5E0,{},2.5E0") if floats else ("{},7", "7,{}"):
            longer = ctx.format(body).encode()
            assert jsonarrays.parse_numbers(longer, floats) is None, (floats, longer)


def test_native_narrowing_and_spans():
    """treecomp.numparse's float32 is the float64 rounded to nearest (as astype rounds it,
    beyond float32's range inf), int32 refused where a value does not fit; spans outside the
    data and unknown dtypes are ValueErrors."""
    if not numparse.available():
        pytest.skip(f"the native number parser is not built: {numparse.UNAVAILABLE}")
    buf = ",".join(_EDGE_FLOATS).encode()
    spans = np.array([[0, len(buf)]])
    got = numparse.parse_spans(buf, spans, len(_EDGE_FLOATS), np.float32)
    with np.errstate(over="ignore"):
        want = np.array([float(t) for t in _EDGE_FLOATS]).astype(np.float32)
    assert np.array_equal(got.view(np.int32), want.view(np.int32))
    assert numparse.parse_spans(buf, spans, len(_EDGE_FLOATS) + 1, np.float32) is None
    assert numparse.parse_spans(buf, spans, len(_EDGE_FLOATS) - 1, np.float64) is None
    ints = b"x[1,-2147483648,2147483647]y[5,6]"
    two = np.array([[2, 26], [29, 32]])
    assert numparse.scan_spans(ints, two)[0].tolist() == [3, 2]
    assert numparse.parse_spans(ints, two, 5, np.int32).tolist() == [1, -2 ** 31, 2 ** 31 - 1, 5, 6]
    wide = b"1,2147483648"
    assert numparse.parse_spans(wide, [[0, len(wide)]], 2, np.int32) is None
    assert numparse.parse_spans(wide, [[0, len(wide)]], 2, np.int64).tolist() == [1, 2 ** 31]
    counts, flags = numparse.scan_spans(b"1,2 ,3.5,4e1", [[0, 3], [0, 4], [5, 8], [9, 12], [1, 1]])
    assert counts.tolist() == [2, -1, 1, 1, 1] and flags.tolist() == [False, False, True, True, False]
    # the scan's 64-byte blocks and its tail: one odd byte anywhere, or none, against Python
    rng = random.Random(11)
    ok_chars, odd = b"0123456789,-+.eE", b" x]\"\n\xff\x00/:dD"
    bodies = []
    for _ in range(400):
        body = bytearray(rng.choice(b"0123456789,,-") for _ in range(rng.randint(0, 300)))
        for _ in range(rng.choice([0, 0, 1, 2])):
            if body:
                body[rng.randrange(len(body))] = rng.choice(ok_chars + odd)
        bodies.append(bytes(body))
    data = b"".join(bodies)
    ends = np.cumsum([len(b) for b in bodies])
    counts, flags = numparse.scan_spans(data, np.stack([ends - [len(b) for b in bodies], ends], 1))
    for body, c, f in zip(bodies, counts.tolist(), flags.tolist()):
        assert c == (body.count(b",") + 1 if all(ch in ok_chars for ch in body) else -1), body
        assert f == any(ch in b".eE" for ch in body), body
    for bad in ([[0, 13]], [[-1, 2]], [[3, 2]]):
        with pytest.raises(ValueError):
            numparse.parse_spans(wide, bad, 1, np.int64)
        with pytest.raises(ValueError):
            numparse.scan_spans(wide, bad)
    with pytest.raises(ValueError):
        numparse.parse_spans(wide, [[0, 1]], 1, np.int16)


def test_native_parser_is_built_with_the_package():
    """Where the package's native parts were built (setup.py build_ext), the number parser
    was too: the tests above then run its path, not only numpy's."""
    from pathlib import Path
    import importlib.machinery
    pkg = Path(numparse.__file__).parent
    if not any((pkg / f"_tc_entry{s}").is_file() for s in importlib.machinery.EXTENSION_SUFFIXES):
        pytest.skip("a source tree without built native parts")
    assert numparse.available(), numparse.UNAVAILABLE


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


def test_loads_equals_json_loads_and_reads_the_big_arrays(way):
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
    '"l":["\\u0000tc0"]',                    # ... inside a list
    '"u":{"parents":[' + ",".join(["7"] * 40) + '],"parents":[' + ",".join(["8"] * 40) + ']}',
])
def test_loads_placeholders_in_the_document_are_harmless(extra, way):
    arr = ",".join(str(i) for i in range(80))
    data = ('{' + extra + ',"t":{"left_children":[' + arr + '],"parents":[' + arr + ']}}').encode()
    got = jsonarrays.loads(data, ["left_children", "parents"])
    assert _same_doc(_plain(got), json.loads(data))


@pytest.mark.parametrize("body", ["01,2", "1,,2", "1,2,", "1.5,2", "1e5,2.5,3", "NaN,1.5",
                                  "1, 2", "1.5.5,2.5", "-,1"])
def test_loads_invalid_or_mixed_arrays_behave_as_json(body, way):
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
                m.setattr(jsonarrays, "loads", lambda d, keys, **kw: json.loads(d))
            try:
                out.append(xgb_frontend.parse_xgboost_file(p).digest())
            except InvalidModelError as exc:
                out.append(f"{type(exc).__name__}: {exc}")
    return out


def test_xgboost_file_same_forest_and_errors_either_way(tmp_path, monkeypatch, way):
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


# -- the bulk paths: all trees' arrays at once (_fast_tree_arrays, ir.build_trees) -----------------
def _deep_doc(depth: int = 5, n_trees: int = 4) -> dict:
    """_model_doc's layout with n_trees complete trees of the given depth (arrays long enough
    for jsonarrays to read most of them with numpy)."""
    doc = _model_doc()
    model = doc["learner"]["gradient_booster"]["model"]
    n_int = (1 << depth) - 1
    n = 2 * n_int + 1
    idx = np.arange(n)
    internal = idx < n_int
    trees = []
    for i in range(n_trees):
        rng = np.random.default_rng(100 + i)
        trees.append({
            "base_weights": (rng.normal(size=n) * 0.1).astype(np.float32).tolist(),
            "categories": [], "categories_nodes": [], "categories_segments": [],
            "categories_sizes": [], "default_left": (internal & (rng.random(n) < 0.5)).astype(int).tolist(),
            "id": i, "left_children": np.where(internal, 2 * idx + 1, -1).tolist(),
            "loss_changes": np.where(internal, rng.exponential(size=n), 0.0).tolist(),
            "parents": [2147483647] + ((idx[1:] - 1) // 2).tolist(),
            "right_children": np.where(internal, 2 * idx + 2, -1).tolist(),
            "split_conditions": rng.normal(size=n).astype(np.float32).tolist(),
            "split_indices": np.where(internal, rng.integers(0, 4, n), 0).tolist(),
            "split_type": [0] * n, "sum_hessian": (n + 1.0 - idx).tolist(),
            "tree_param": {"num_deleted": "0", "num_feature": "4", "num_nodes": str(n),
                           "size_leaf_vector": "1"}})
    model["trees"] = trees
    model["tree_info"] = [0] * n_trees
    model["iteration_indptr"] = list(range(n_trees + 1))
    model["gbtree_model_param"]["num_trees"] = str(n_trees)
    return doc


def _one_by_one(m) -> None:
    """Force the per-tree paths: each tree's arrays by _tree_arrays, each Tree() on its own."""
    from treecomp.ir import TreeBuildError

    def refuse(*a, **k):
        raise TreeBuildError("forced", 0)
    m.setattr(xgb_frontend, "_fast_tree_arrays", lambda trees: None)
    m.setattr(xgb_frontend, "build_trees", refuse)


def _parse_ways(tmp_path, data: bytes, monkeypatch, suffix: str = ".json") -> list:
    """The Forest's digest (or the error) by every path: the bulk paths on the numpy arrays, on
    json.loads' lists, and tree by tree on json.loads' lists."""
    p = tmp_path / f"m{suffix}"
    p.write_bytes(data)
    out = []
    for way in ("bulk", "plain-json", "tree-by-tree"):
        with monkeypatch.context() as m:
            if way != "bulk" and suffix == ".json":
                m.setattr(jsonarrays, "loads", lambda d, keys, **kw: json.loads(d))
            if way == "tree-by-tree":
                _one_by_one(m)
            try:
                out.append(xgb_frontend.parse_xgboost_file(p).digest())
            except (InvalidModelError, xgb_frontend.UnsupportedModelError) as exc:
                out.append(f"{type(exc).__name__}: {exc}")
    return out


def _dump(doc) -> bytes:
    return json.dumps(doc, separators=(",", ":")).encode()


def _tree(doc, i):
    return doc["learner"]["gradient_booster"]["model"]["trees"][i]


#: changes to tree 2 of _deep_doc: each a case the bulk path must hand to the per-tree path
#: (or reject exactly as it would); None marks a valid model
_CHANGES = {
    "valid": (lambda t: None, None),
    "right_children one short": (lambda t: t["right_children"].pop(), "right_children"),
    "base_weights one long": (lambda t: t["base_weights"].append(0.5), "base_weights"),
    "parents out of range": (lambda t: t["parents"].__setitem__(5, 10 ** 6), "parents"),
    "parents -1": (lambda t: t["parents"].__setitem__(3, -1), "parents"),
    "num_nodes disagrees": (lambda t: t["tree_param"].__setitem__("num_nodes", "7"), "num_nodes"),
    "num_nodes not a number": (lambda t: t["tree_param"].__setitem__("num_nodes", "x"), "num_nodes"),
    "num_nodes a number": (lambda t: t["tree_param"].__setitem__("num_nodes", 63), "num_nodes"),
    "no tree_param": (lambda t: t.pop("tree_param"), "tree_param"),
    "no loss_changes": (lambda t: t.pop("loss_changes"), "loss_changes"),
    "vector leaves": (lambda t: t["tree_param"].__setitem__("size_leaf_vector", "2"), "leaf_weights"),
    "split_type 1 without categories": (lambda t: t["split_type"].__setitem__(0, 1), "categor"),
    "split_type 2": (lambda t: t["split_type"].__setitem__(0, 2), "split_type"),
    "split_type one short": (lambda t: t["split_type"].pop(), "split_type"),
    "feature beyond num_feature": (lambda t: t["split_indices"].__setitem__(0, 9), "feature"),
    "feature beyond int32": (lambda t: t["split_indices"].__setitem__(0, 2 ** 33), "int32"),
    "child is its parent": (lambda t: t["left_children"].__setitem__(1, 1), "reachable|cycle"),
    "default_left 2": (lambda t: t["default_left"].__setitem__(0, 2), None),
    "default_left a float": (lambda t: t["default_left"].__setitem__(0, 1.0), "default_left"),
    "a float among ints": (lambda t: t["left_children"].__setitem__(0, 1.0), "left_children"),
    "an int among floats": (lambda t: t["split_conditions"].__setitem__(0, 1), "split_conditions"),
    "a string among numbers": (lambda t: t["sum_hessian"].__setitem__(4, "x"), "sum_hessian"),
    "negative hessian (no cover)": (lambda t: t["sum_hessian"].__setitem__(4, -1.0), None),
    "NaN split": (lambda t: t["split_conditions"].__setitem__(0, float("nan")), "NaN"),
    "pruned: an orphan": (lambda t: (t["left_children"].__setitem__(1, -1),
                                     t["right_children"].__setitem__(1, -1)), None),
    "categorical split": (lambda t: (t["split_type"].__setitem__(0, 1),
                                     t["categories_nodes"].append(0),
                                     t["categories_segments"].append(0),
                                     t["categories_sizes"].append(2),
                                     t["categories"].extend([1, 3])), None),
    "categories of no node": (lambda t: t["categories"].extend([1, 3]), None),
}


@pytest.mark.parametrize("case", sorted(_CHANGES))
def test_bulk_paths_same_forest_and_errors(case, tmp_path, monkeypatch, way):
    change, words = _CHANGES[case]
    doc = _deep_doc()
    change(_tree(doc, 2))
    ways = _parse_ways(tmp_path, _dump(doc), monkeypatch)
    assert ways[0] == ways[1] == ways[2], ways
    if words is None:
        assert not ways[0].startswith(("Invalid", "Unsupported")), ways[0]
    else:
        assert "tree 2" in ways[0] or "tree_param" in ways[0], ways[0]
        assert re.search(words, ways[0]), ways[0]


#: _deep_doc(5) and _deep_doc(1)'s digests from the per-tree code (main 7b43413, 2026-11-28)
_DIGEST_D5 = "83bbc2c51bc9ae650c8343882314e2f7250ca8dec5dc5a89e0b34340bd02149f"
_DIGEST_D1 = "ccad9da10e930303a7afef0c448430dded85fb3da8ce1313fd1f7d2f60d0a0bc"


def test_bulk_paths_digest_is_unchanged(way):
    """The bulk paths build the same IR as before them: the digests of these documents, from
    the per-tree code that came first (2026-11-28), must not change."""
    for depth, want in ((5, _DIGEST_D5), (1, _DIGEST_D1)):
        f = xgb_frontend.forest_from_document(json.loads(_dump(_deep_doc(depth))))
        assert f.digest() == want, depth
        g = xgb_frontend.forest_from_document(
            jsonarrays.loads(_dump(_deep_doc(depth)), xgb_frontend.JSON_ARRAY_KEYS))
        assert g.digest() == want, depth


def test_truncated_and_odd_documents_fail_as_json_loads(tmp_path, monkeypatch, way):
    data = _dump(_deep_doc())
    a = data.index(b'"split_conditions":[', len(data) // 2) + 30
    for cut in (data[:a], data[:a] + b"]", data[:a] + b"]}]}}}", data.replace(b"[", b"[ ", 1)):
        ways = _parse_ways(tmp_path, cut, monkeypatch)
        assert ways[0] == ways[1] == ways[2], ways


def test_typed_ubjson_same_forest_and_errors(tmp_path, monkeypatch):
    from tests.test_fuzz_frontends import ubj_encode
    types = {"base_weights": np.float32, "loss_changes": np.float32, "sum_hessian": np.float32,
             "split_conditions": np.float32, "left_children": np.int32, "right_children": np.int32,
             "parents": np.int32, "split_indices": np.int32, "default_left": np.uint8,
             "split_type": np.uint8, "categories": np.int32, "categories_nodes": np.int32,
             "categories_segments": np.int64, "categories_sizes": np.int64}

    def typed(doc, untyped=()):
        for i, t in enumerate(doc["learner"]["gradient_booster"]["model"]["trees"]):
            if i not in untyped:
                for k, dt in types.items():
                    t[k] = np.array(t[k], dt)
        return ubj_encode(doc)
    for case in ("valid", "right_children one short", "parents out of range", "split_type 2",
                 "categorical split", "vector leaves", "num_nodes disagrees"):
        doc = _deep_doc()
        _CHANGES[case][0](_tree(doc, 2))
        for untyped in ((), (1,)):  # every tree typed; tree 1 plain arrays
            ways = _parse_ways(tmp_path, typed(json.loads(_dump(doc)), untyped), monkeypatch, ".ubj")
            assert ways[0] == ways[2], (case, ways)
            assert ways[0].startswith(("Invalid", "Unsupported")) == (case not in ("valid", "categorical split")), (case, ways)
    doc = _deep_doc()
    typed(doc)
    _tree(doc, 2)["left_children"] = _tree(doc, 2)["left_children"].astype(np.int64)  # wrong type
    ways = _parse_ways(tmp_path, ubj_encode(doc), monkeypatch, ".ubj")
    assert ways[0] == ways[2] and "left_children" in ways[0], ways


def test_loads_narrow_values_and_per_key_slices(monkeypatch, way):
    """float32_keys / int32: the same numbers, rounded to float32 as astype rounds json.loads'
    floats, ints as int32 unless some value of the key does not fit; each key's arrays are
    consecutive slices of one array (in document order), batch boundaries included."""
    monkeypatch.setattr(jsonarrays, "_CHUNK", 300)  # many batches per key
    rng = np.random.default_rng(4)
    trees = [{"a": rng.integers(-5, 10 ** 6, 40).tolist(),
              "f": (rng.normal(size=30) * 10.0 ** rng.integers(-40, 40, 30)).tolist(),
              "g": rng.normal(size=30).tolist(),
              "b": rng.integers(0, 9, 35).tolist()} for _ in range(12)]
    trees[7]["b"][3] = 2 ** 40  # key "b" does not fit int32: all of it stays int64
    data = json.dumps({"t": trees}, separators=(",", ":")).encode()
    want = json.loads(data)
    got = jsonarrays.loads(data, ["a", "f", "g", "b"], float32_keys=["f"], int32=True)
    for key, dtype in (("a", np.int32), ("b", np.int64), ("f", np.float32), ("g", np.float64)):
        arrays = [t[key] for t in got["t"]]
        assert all(isinstance(a, jsonarrays.NumberArray) for a in arrays), key
        base = arrays[0].base
        assert base.dtype == dtype, key
        pos = 0
        for a, w in zip(arrays, (t[key] for t in want["t"])):
            assert a.base is base and a.start == pos and a.values.dtype == dtype, key
            with np.errstate(over="ignore"):
                np.testing.assert_array_equal(a.values, np.array(w, np.float64).astype(dtype))
            pos += len(a)
        assert pos == len(base)
    # without them: json.loads' values exactly, int64 / float64
    plain = jsonarrays.loads(data, ["a", "f", "g", "b"])
    assert _same_doc(_plain(plain), want)
    assert plain["t"][0]["a"].values.dtype == np.int64 and plain["t"][0]["f"].values.dtype == np.float64


def _big_json(n_trees: int, depth: int = 8) -> bytes:
    """An XGBoost JSON document of n_trees complete trees (8 distinct ones, cycled), written
    from a few json.dumps calls."""
    doc = _deep_doc(depth, 8)
    model = doc["learner"]["gradient_booster"]["model"]
    texts = [_dump({**t, "id": -12345}) for t in model["trees"]]
    model["trees"] = ["@T@"]
    model["tree_info"] = [0] * n_trees
    model["iteration_indptr"] = list(range(n_trees + 1))
    model["gbtree_model_param"]["num_trees"] = str(n_trees)
    trees = b",".join(texts[i % 8].replace(b'"id":-12345', b'"id":%d' % i) for i in range(n_trees))
    return _dump(doc).replace(b'"@T@"', trees)


def test_parse_peak_memory_per_node(tmp_path):
    """The whole parse of a 150k-node XGBoost JSON file (the file's bytes included, 59 a
    node): 318 bytes a node at its peak (tracemalloc) before the bulk paths (2026-11-28),
    about 180 after."""
    p = tmp_path / "big.json"
    p.write_bytes(_big_json(300))
    f, peak = traced_peak(lambda: xgb_frontend.parse_xgboost_file(p))
    n = sum(t.n_nodes for t in f.trees)
    assert n == 300 * 511
    assert peak / n < 230, peak / n
