"""JSON number arrays checked and converted in one pass, in C (runtime/numparse.c); and the tree
lines of LightGBM text models (lgbm_blocks, lgbm_ints, lgbm_numbers: see their docstrings).

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
