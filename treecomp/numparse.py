"""Model files' numbers and structure read in C (runtime/numparse.c): JSON number arrays checked
and converted in one pass, the UBJSON decoder, forest-wide tree checks, and the tree lines of
LightGBM text models (lgbm_blocks, lgbm_ints, lgbm_numbers: see their docstrings).

A bottom-layer module (it imports nothing of treecomp): the native part is the package's
``treecomp._numparse`` extension, built at install time by setup.py from runtime/numparse.c and
used only when it was built from the numparse.c next to this module (its embedded sha256).
Where it is missing (an install without a C compiler, a source tree that was not built) or stale,
:func:`available` is False and callers keep their numpy path (treecomp.frontends.jsonarrays).

The grammar is RFC 8259's number, ``-?(0|[1-9][0-9]*)(\\.[0-9]+)?([eE][-+]?[0-9]+)?``, every
byte checked; the conversions are exactly those of ``json.loads`` then numpy's ``astype``:

- integers (no fraction, no exponent) of at most 18 characters, as int64 or int32;
- floats (a fraction or an exponent) as the float64 ``float(token)`` gives (one correctly
  rounded multiply or divide where mantissa and power of ten are exact doubles, else CPython's
  own correctly rounded, locale-independent conversion), or that float64 rounded to the
  nearest float32.

The same extension holds the other passes over huge model files that would cost a Python
step per tree or per array: finding a JSON document's number arrays and rebuilding it around
them (:func:`find_arrays`, :func:`strip`), decoding UBJSON (:func:`ubj_decode`, for
treecomp.frontends.ubjson), buffer addresses in bulk (:func:`addresses`), and the shape checks
and depths of forest-wide child arrays (:func:`tree_shapes`, for treecomp.ir.build_trees).
Each has its caller's Python / numpy path beside it, used where the extension is not there.
"""

from __future__ import annotations

import hashlib
import importlib.machinery
import importlib.util
import threading
from pathlib import Path
from typing import Any

import numpy as np

#: parse kinds: the output dtype of :func:`parse_spans`
KINDS = {np.dtype(np.int64): 0, np.dtype(np.int32): 1, np.dtype(np.float64): 2,
         np.dtype(np.float32): 3}

#: why the native parser is not used (None: used, or not looked for yet)
UNAVAILABLE: str | None = None
#: the extension's file once it is loaded (None: not loaded)
PATH: Path | None = None

_MODULE: Any = None
_LOADED = False
_LOCK = threading.Lock()


def _load() -> Any:
    """The extension module, or None (UNAVAILABLE then says why)."""
    global _LOADED
    if _LOADED:
        return _MODULE
    with _LOCK:
        if not _LOADED:
            try:
                _find()
            finally:
                _LOADED = True
    return _MODULE


def _find() -> None:
    global _MODULE, UNAVAILABLE, PATH
    pkg = Path(__file__).resolve().parent
    path = next((pkg / f"_numparse{sfx}" for sfx in importlib.machinery.EXTENSION_SUFFIXES
                 if (pkg / f"_numparse{sfx}").is_file()), None)
    if path is None:
        UNAVAILABLE = "the package has no built treecomp._numparse (no C compiler at install?)"
        return
    try:
        want = hashlib.sha256((pkg / "runtime" / "numparse.c").read_bytes()).hexdigest()
        loader = importlib.machinery.ExtensionFileLoader("_numparse", str(path))
        spec = importlib.util.spec_from_file_location("_numparse", path, loader=loader)
        mod = importlib.util.module_from_spec(spec)
        loader.exec_module(mod)
        got = mod.source_hash()
    except Exception as exc:  # noqa: BLE001 - another Python's build, a missing source: numpy
        UNAVAILABLE = f"{path.name} does not load: {type(exc).__name__}: {exc}"
        return
    if got != want:
        UNAVAILABLE = f"{path.name} was built from another runtime/numparse.c"
        return
    _MODULE, PATH = mod, path


def available() -> bool:
    """Whether the native parser is there (else UNAVAILABLE says why)."""
    return _load() is not None


def _spans(spans: Any) -> np.ndarray:
    s = np.ascontiguousarray(spans, dtype=np.int64)
    if s.ndim != 2 or s.shape[1:] != (2,):
        raise ValueError("spans must be (a, b) pairs")
    return s


def scan_spans(data: bytes, spans: Any) -> tuple[np.ndarray, np.ndarray]:
    """For each body ``data[a:b]`` of `spans` ((a, b) pairs): how many comma-separated items it
    holds (its commas + 1), or -1 when it holds any byte other than ``-+.0123456789eE,``; and
    whether it holds '.', 'e' or 'E' (bool). Needs :func:`available`."""
    s = _spans(spans)
    counts = np.empty(len(s), np.int64)
    flags = np.empty(len(s), np.uint8)
    _load().scan(data, s, counts, flags)
    return counts, flags.view(np.bool_)


def parse_spans(data: bytes, spans: Any, n: int, dtype: Any) -> np.ndarray | None:
    """The numbers of the bodies ``data[a:b]`` of `spans`, in order, as one array of `n` values
    of `dtype` (int64 / int32 for JSON integers, float64 / float32 for JSON floats: module
    docstring); None when some body is not a non-empty comma-separated list of JSON numbers of
    that kind, or they are not `n` in all, or (int32) some value does not fit. Needs
    :func:`available`."""
    dt = np.dtype(dtype)
    if dt not in KINDS:
        raise ValueError(f"dtype {dt} is not one of int64, int32, float64, float32")
    out = np.empty(n, dt)
    rc = _load().parse(data, _spans(spans), out, KINDS[dt])
    return out if rc == 0 else None


def parse_numbers(buf: bytes, floats: bool) -> np.ndarray | None:
    """The comma-separated JSON numbers in `buf` as int64 (floats=False: each a JSON integer of
    at most 18 characters) or float64 (floats=True: each with a fraction or an exponent, as
    ``float(token)`` converts it); None when `buf` is not such a list. Needs
    :func:`available`."""
    spans = np.array([[0, len(buf)]], np.int64)
    counts, _ = scan_spans(buf, spans)
    if counts[0] < 0:
        return None
    return parse_spans(buf, spans, int(counts[0]), np.float64 if floats else np.int64)


#: UBJSON element marker -> the native-order dtype of its typed arrays
UBJ_DTYPES = {"i": np.dtype(np.int8), "U": np.dtype(np.uint8), "I": np.dtype(np.int16),
              "l": np.dtype(np.int32), "L": np.dtype(np.int64), "d": np.dtype(np.float32),
              "D": np.dtype(np.float64)}


def ubj_decode(data: Any, strict: bool) -> tuple[Any] | None:
    """One UBJSON value filling `data` (bytes-like), decoded in C: ``(value,)``, or None where
    the document is not entirely in the forms XGBoost writes (no-op / high-precision markers,
    typed arrays of non-numbers, counted or typed objects, under `strict` a length that is
    not an int64 'L'), has duplicate keys, or is invalid in any way: the caller's decoder
    (treecomp.frontends.ubjson) then decides, and words the error. Values as that decoder
    gives them (dict, list, str, int, float, bool, None; 'C' an int under `strict`, else a
    one-character str), except that the typed numeric arrays are read-only native-order
    slices of one array per object key and element type, in document order (consecutive
    arrays of one key are consecutive in it). Needs :func:`available`."""
    raws: list[np.ndarray] = []

    def alloc(groups: list[tuple[str, int]]) -> tuple[list, list]:
        ros = []
        for marker, total in groups:
            raw = np.empty(total, UBJ_DTYPES[marker])
            ro = raw.view()
            ro.flags.writeable = False
            raws.append(raw)
            ros.append(ro)
        return raws, ros

    got = _load().ubj_decode(data, strict, alloc)
    for raw in raws:
        raw.flags.writeable = False
    return got


def addresses(arrays: Any) -> np.ndarray:
    """(n, 2) int64: each array's buffer address and size in bytes, without a Python call per
    array; ValueError / BufferError unless every one is a C-contiguous 1-D buffer of the
    first one's format. Needs :func:`available`."""
    arrays = arrays if isinstance(arrays, (list, tuple)) else list(arrays)
    out = np.empty((len(arrays), 2), np.int64)
    _load().addresses(arrays, out)
    return out


def tree_shapes(sizes: Any, left: np.ndarray, right: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For forest-wide child arrays (tree i the `sizes[i]` nodes after trees 0..i-1, child ids
    local to the tree, -1 at leaves), per tree: a status (uint8) and its depth (int64, the
    root's 0). Status 0: canonical (every node a leaf, both children -1, or internal with both
    children in (its id, n), every node but the root the child of exactly one node: ids in
    parent-before-child order, all reachable), its depth given; 1: some child < -1 or >= n,
    or a node with one child negative and one not; 2: children in range but not canonical
    (depth 0 for both). One pass in C, no temporaries of the nodes' size. ValueError where
    the sizes are not >= 1 or do not add up to len(left). Needs :func:`available`."""
    s = np.ascontiguousarray(sizes, dtype=np.int64)
    wide = not (left.dtype == np.int32 and right.dtype == np.int32)
    dt = np.int64 if wide else np.int32
    left = np.ascontiguousarray(left, dtype=dt)
    right = np.ascontiguousarray(right, dtype=dt)
    if left.ndim != 1 or left.shape != right.shape:
        raise ValueError("left and right must be 1-D arrays of one length")
    status = np.empty(len(s), np.uint8)
    depth = np.empty(len(s), np.int64)
    _load().tree_shapes(s, left, right, wide, status, depth)
    return status, depth


def find_arrays(data: bytes, keys: tuple[bytes, ...],
                min_bytes: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The JSON number arrays directly under one of `keys` in `data`, in document order: what
    ``re.finditer(b'"(' + b"|".join(map(re.escape, keys)) + b')":\\[', data)`` matches (keys
    tried in their order), each match whose quote follows '{' or ',' (no escaped quote inside
    a string), its body from after the '[' to the first ']', kept when at least `min_bytes`
    long and made of ``-+.0123456789eE,`` only. Returns (spans (n, 2) int64 of (start, end)
    of each body, key index int32 into `keys`, counts int64 (commas + 1), is_float bool
    (holds '.', 'e' or 'E')). Needs :func:`available`."""
    s, k, c, f = _load().find_arrays(data, tuple(keys), int(min_bytes))
    return (np.frombuffer(s, np.int64).reshape(-1, 2).copy(), np.frombuffer(k, np.int32),
            np.frombuffer(c, np.int64), np.frombuffer(f, np.uint8).view(np.bool_))


def strip(data: bytes, spans: Any) -> bytes:
    """`data` with each span ``data[a:b]`` of `spans` ((a, b) pairs in order, not
    overlapping) replaced by the JSON string ``"\\u0000tc<i>"``, i the span's index (the
    placeholders treecomp.frontends.jsonarrays puts its arrays back by). Needs
    :func:`available`."""
    return _load().strip(data, _spans(spans))


# -- LightGBM text models (treecomp.frontends.lightgbm) ------------------------------------------
#: lgbm_numbers' output dtypes
LGBM_KINDS = {np.dtype(np.int64): 0, np.dtype(np.int32): 1, np.dtype(np.float64): 2}


def lgbm_blocks(data: bytes, start: int, bounds: Any,
                keys: tuple[bytes, ...]) -> tuple[np.ndarray, np.ndarray, int] | None:
    """The trees of a LightGBM text model `data`, found as treecomp.frontends.lightgbm's Python
    reader finds them: with `bounds` (tree_sizes: tree i's "Tree=" line at bounds[i], its
    block ending before bounds[i + 1]) or, where `bounds` is None, the consecutive "Tree="
    blocks from offset `start`. Returns (spans, names, after): spans[i, k] the (a, b) offsets
    of the value of tree i's last line with key keys[k] ((-1, -1): none), names[i] the offsets
    of the text after "Tree=" on its first line, and the offset where the trees end; None
    where the Python reader must decide (it raises there: a line without '=', a block
    without its closing empty line, a tree_sizes offset not at a "Tree=" line). Needs
    :func:`available`."""
    sized = bounds is not None
    b = np.ascontiguousarray(bounds if sized else np.zeros(0), dtype=np.int64)
    rc, after, spans, names = _load().lgbm_blocks(data, int(start), b, int(sized), tuple(keys))
    if rc:
        return None
    return (np.frombuffer(spans, np.int64).reshape(-1, len(keys), 2),
            np.frombuffer(names, np.int64).reshape(-1, 2), after)


def lgbm_ints(data: bytes, spans: Any) -> tuple[np.ndarray, np.ndarray]:
    """Integer fields as LightGBM's Atoi reads a whole value (" *[+-]?[0-9]+ *"): for each
    (a, b) of `spans`, (value, state): state 0 no value (a < 0), 1 the value (at most 18
    characters of sign and digits), 2 anything else. Needs :func:`available`."""
    s = _spans(spans)
    out = np.zeros(len(s), np.int64)
    state = np.empty(len(s), np.uint8)
    _load().lgbm_ints(data, s, out, state)
    return out, state


def lgbm_numbers(data: bytes, spans: Any, counts: Any, dtype: Any) -> np.ndarray | None:
    """The numbers of the values ``data[a:b]`` of `spans`, ``counts[i]`` from span i (a span with
    count 0 is not read, but must be there: a >= 0), as one array of `dtype`: int64 / int32
    (tokens ``[+-]?[0-9]+`` of at most 18 digits), float64 (LightGBM's plain decimal grammar,
    converted to what ``float(token)`` gives). Tokens are separated by single spaces. None
    when any span does not hold exactly that (the Python reader then decides: "inf" / "nan",
    longer integers, other spacing, errors). Needs :func:`available`."""
    dt = np.dtype(dtype)
    if dt not in LGBM_KINDS:
        raise ValueError(f"dtype {dt} is not one of int64, int32, float64")
    c = np.ascontiguousarray(counts, dtype=np.int64)
    s = _spans(spans)
    if len(c) != len(s):
        raise ValueError("one count a span")
    # (a count beyond what its span can hold, or a negative one, is refused before allocating:
    # k numbers take at least 2k - 1 bytes)
    if len(c) and ((c < 0).any() or (c > (s[:, 1] - s[:, 0] + 1) // 2).any()):
        return None
    out = np.empty(int(c.sum()) if len(c) else 0, dt)
    rc = _load().lgbm_numbers(data, s, c, out, LGBM_KINDS[dt])
    return out if rc == 0 else None
