"""A compact, iterative UBJSON decoder: enough for the `.ubj` model files XGBoost writes.

XGBoost (>= 1.6) saves models as Universal Binary JSON (draft 12): big-endian numbers, strings
prefixed by an integer length, and "optimised" containers (``[$d#L<count>`` followed by raw
float32s, ``{#L<count>`` objects, ...). No maintained UBJSON package is available to treecomp,
and reading a model file must not need xgboost, so this module decodes it itself.

Design:
- No recursion: containers are tracked on an explicit stack, so hostile nesting depth cannot
  overflow the interpreter stack (depth is still capped, at `MAX_DEPTH`).
- Typed numeric arrays (``[$<type>#<count>``) decode to read-only numpy arrays in native byte
  order with one `np.frombuffer` call: model files are mostly such arrays, and the frontend
  consumes numpy anyway. Everything else becomes dict / list / str / int / float / bool / None.
- Every count and length is checked against the bytes that remain before anything is
  allocated, so corrupt or truncated input raises `InvalidModelError` quickly and never makes
  the decoder hang or allocate memory out of proportion to the input.
- ``strict=True`` reads exactly what XGBoost's own reader (``UBJReader`` in
  ``src/common/json.cc``, checked on 3.2.0) reads, so that a file XGBoost refuses is refused
  here too: lengths and counts only as int64 (``L``), no no-op (``N``) and no high-precision
  (``H``) markers, objects never counted or typed, typed arrays only of numbers, ``C`` read as
  an integer, and the first of duplicate keys wins (``std::map::emplace``). Every XGBoost
  writer since 1.6 stays within that (``UBJWriter``: ``L`` lengths, ``[#L`` / ``[$x#L`` arrays,
  uncounted objects).

Where the package's native parser is built (:mod:`treecomp.numparse`, runtime/numparse.c) a
document entirely in those forms is decoded in C (``numparse.ubj_decode``): the same values,
except that each typed numeric array is a read-only slice of one array per object key and
element type (the arrays of one key, in document order, are consecutive in it: a reader may
take them as one slice without copying). Anything else, and every error, is left to the
decoder here, which words it. ``NATIVE = False`` forces this decoder (the tests run both).
"""

from __future__ import annotations

import gc
import struct
from typing import Any

import numpy as np

from .. import numparse
from ..errors import InvalidModelError

#: whether to use treecomp.numparse's decoder where it is built (False: the one here only)
NATIVE = True

#: deepest container nesting accepted (XGBoost models nest about 8 levels)
MAX_DEPTH = 512

# marker -> (struct format, numpy dtype) for fixed-size numbers, all big-endian
_NUMERIC = {
    b"i": (">b", np.dtype(">i1")),
    b"U": (">B", np.dtype(">u1")),
    b"I": (">h", np.dtype(">i2")),
    b"l": (">i", np.dtype(">i4")),
    b"L": (">q", np.dtype(">i8")),
    b"d": (">f", np.dtype(">f4")),
    b"D": (">d", np.dtype(">f8")),
}
_INT_MARKERS = (b"i", b"U", b"I", b"l", b"L")
_NO_PAYLOAD = {b"Z": None, b"T": True, b"F": False}
_STRUCTS = {m: struct.Struct(fmt) for m, (fmt, _) in _NUMERIC.items()}
_INT64 = _STRUCTS[b"L"]
_TYPED_DTYPES = {m: dt for m, (_, dt) in _NUMERIC.items()}


class _Container:
    """One open array or object on the decoder's stack."""

    __slots__ = ("value", "is_object", "elem_type", "remaining", "key")

    def __init__(self, is_object: bool, elem_type: bytes | None, count: int | None) -> None:
        self.value: Any = {} if is_object else []
        self.is_object = is_object
        self.elem_type = elem_type    # marker of every element ('$'), or None
        self.remaining = count        # elements still to read ('#'), or None: until ']' / '}'
        self.key: str | None = None   # pending object key


class _Reader:
    __slots__ = ("data", "pos", "n", "strict")

    def __init__(self, data: bytes, strict: bool = False) -> None:
        self.data = data
        self.pos = 0
        self.n = len(data)
        self.strict = strict

    def fail(self, msg: str) -> InvalidModelError:
        return InvalidModelError(f"corrupt UBJSON at byte {self.pos}: {msg}")

    def take(self, k: int) -> bytes:
        if k < 0 or self.pos + k > self.n:
            raise self.fail(f"needs {k} more bytes, only {self.n - self.pos} left (truncated?)")
        b = self.data[self.pos:self.pos + k]
        self.pos += k
        return b

    def marker(self) -> bytes:
        """Next type marker, skipping no-op markers ('N')."""
        while True:
            if self.pos >= self.n:
                raise self.fail("unexpected end of data (truncated?)")
            m = self.data[self.pos:self.pos + 1]
            self.pos += 1
            if m != b"N":
                return m
            if self.strict:  # XGBoost's UBJReader: "Unknown construct"
                raise self.fail("no-op marker 'N' (XGBoost does not accept it)")

    def number(self, m: bytes) -> int | float:
        s = _STRUCTS[m]
        end = self.pos + s.size
        if end > self.n:
            raise self.fail(f"needs {s.size} bytes for a number, only {self.n - self.pos} left (truncated?)")
        v = s.unpack_from(self.data, self.pos)[0]
        self.pos = end
        return v

    def length(self, what: str) -> int:
        """A non-negative integer (string length or container count) with its own marker."""
        m = self.marker()
        if m not in _INT_MARKERS:
            raise self.fail(f"{what} must be an integer, got marker {m!r}")
        if self.strict and m != b"L":  # XGBoost reads lengths only as 'L' (GetConsecutiveChar)
            raise self.fail(f"{what} must be an int64 ('L'), got marker {m!r} (XGBoost refuses it)")
        k = self.number(m)
        if k < 0:
            raise self.fail(f"negative {what} {k}")
        return k

    def string(self) -> str:
        # the common case first: an int64 ('L') length, in range, and UTF-8 (XGBoost's keys)
        d, p = self.data, self.pos
        if d[p:p + 1] == b"L" and p + 9 <= self.n:
            k = _INT64.unpack_from(d, p + 1)[0]
            if 0 <= k <= self.n - p - 9:
                try:
                    v = d[p + 9:p + 9 + k].decode("utf-8")
                except UnicodeDecodeError:
                    pass  # (the general path below words the error)
                else:
                    self.pos = p + 9 + k
                    return v
        k = self.length("string length")
        try:
            return self.take(k).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise self.fail(f"string is not UTF-8: {exc}") from None

    def scalar(self, m: bytes) -> Any:
        """The value of a non-container marker `m` (already consumed)."""
        if m in _STRUCTS:
            return self.number(m)
        if m in _NO_PAYLOAD:
            return _NO_PAYLOAD[m]
        if m == b"S":
            return self.string()
        if m == b"C":
            c = self.take(1)
            if self.strict:  # XGBoost: an Integer (ReadPrimitive<char>, signed)
                return int.from_bytes(c, "big", signed=True)
            if c[0] > 127:
                raise self.fail("char value is not ASCII")
            return c.decode("ascii")
        if m == b"H":  # high-precision number, written as a decimal string
            if self.strict:
                raise self.fail("high-precision number ('H'): XGBoost refuses it "
                                "('High precision number is not supported')")
            s = self.string()
            try:
                return int(s)
            except ValueError:
                pass
            try:
                return float(s)
            except ValueError:
                raise self.fail(f"invalid high-precision number {s[:40]!r}") from None
        raise self.fail(f"unknown type marker {m!r}")


def _at_end(r: _Reader, top: _Container) -> bool:
    """For an uncounted container: consume its end marker if it comes next (after no-ops)."""
    while not r.strict and r.pos < r.n and r.data[r.pos] == 0x4E:  # 'N' no-op
        r.pos += 1
    end = 0x7D if top.is_object else 0x5D  # '}' / ']'
    if r.pos < r.n and r.data[r.pos] == end:
        r.pos += 1
        return True
    return False


def _open(r: _Reader, is_object: bool) -> _Container | np.ndarray:
    """Read a container header (after '[' or '{'): a typed numeric array comes back whole."""
    d, p = r.data, r.pos
    if not is_object and d[p:p + 1] == b"$" and d[p + 2:p + 4] == b"#L" and p + 12 <= r.n:
        # the common case first: a typed numeric array with an int64 count, all its bytes there
        # (anything else, or any doubt, goes the general way below, which words the errors)
        elem_type = d[p + 1:p + 2]
        dt = _TYPED_DTYPES.get(elem_type)
        if dt is not None:
            count = _INT64.unpack_from(d, p + 4)[0]
            if 0 <= count and count * dt.itemsize <= r.n - p - 12:
                arr = np.frombuffer(d, dtype=dt, count=count, offset=p + 12).astype(dt.newbyteorder("="))
                r.pos = p + 12 + count * dt.itemsize
                arr.flags.writeable = False
                return arr
    elem_type = count = None
    if r.strict and is_object and r.data[r.pos:r.pos + 1] in (b"$", b"#"):
        # XGBoost's UBJReader::ParseObject reads keys straight away: no counted / typed objects
        raise r.fail("counted or typed object (XGBoost does not accept it)")
    if r.data[r.pos:r.pos + 1] == b"$":
        r.pos += 1
        elem_type = r.take(1)
        if elem_type in (b"[", b"{", b"N"):
            raise r.fail(f"typed containers of {elem_type!r} are not supported")
        if elem_type not in _STRUCTS and elem_type not in _NO_PAYLOAD \
                and elem_type not in (b"S", b"C", b"H"):
            raise r.fail(f"unknown element type marker {elem_type!r}")
        if r.strict and elem_type not in _STRUCTS:  # UBJReader::ParseArray: numbers only
            raise r.fail(f"typed array of {elem_type!r} (XGBoost supports numeric ones only)")
        if r.data[r.pos:r.pos + 1] != b"#":
            raise r.fail("a typed container ('$') needs a count ('#')")
    if r.data[r.pos:r.pos + 1] == b"#":
        r.pos += 1
        count = r.length("container count")
        # every element costs at least one byte, except payload-free typed ones; either way a
        # count beyond the input size cannot be genuine (and must not drive an allocation)
        left = r.n - r.pos
        if count > left and not (elem_type in _NO_PAYLOAD and count <= r.n):
            raise r.fail(f"container count {count} exceeds the {left} bytes left")
    if elem_type in _STRUCTS and not is_object:
        dt = _NUMERIC[elem_type][1]
        size = count * dt.itemsize
        if r.pos + size > r.n:
            raise r.fail(f"typed array needs {size} bytes, only {r.n - r.pos} left (truncated?)")
        arr = np.frombuffer(r.data, dtype=dt, count=count, offset=r.pos).astype(dt.newbyteorder("="))
        r.pos += size
        arr.flags.writeable = False
        return arr
    return _Container(is_object, elem_type, count)


def decode(data: bytes | bytearray | memoryview, strict: bool = False) -> Any:
    """Decode one UBJSON value (and nothing after it) from `data`; `strict`: only what XGBoost's
    reader accepts (see the module docstring)."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise TypeError(f"UBJSON input must be bytes, not {type(data).__name__}")
    if NATIVE and numparse.available():
        enabled = gc.isenabled()
        gc.disable()  # (no cycles among the new objects: see jsonarrays.loads)
        try:
            got = numparse.ubj_decode(data, strict)
        finally:
            if enabled:
                gc.enable()
        if got is not None:
            return got[0]
    r = _Reader(bytes(data), strict)
    stack: list[_Container] = []
    while True:
        top = stack[-1] if stack else None
        if top is None:
            m = r.marker()
        elif top.remaining == 0 or (top.remaining is None and _at_end(r, top)):
            value = stack.pop().value
            if not stack:
                break
            _attach(stack[-1], value, r.strict)
            continue
        else:
            if top.is_object:
                top.key = r.string()
            m = top.elem_type if top.elem_type is not None else r.marker()
            if top.remaining is not None:
                top.remaining -= 1
        if m == b"[" or m == b"{":
            opened = _open(r, m == b"{")
            if isinstance(opened, _Container):
                if len(stack) >= MAX_DEPTH:
                    raise r.fail(f"containers nested deeper than {MAX_DEPTH}")
                stack.append(opened)
                continue
            value = opened
        else:
            value = r.scalar(m)
        if not stack:
            break
        _attach(stack[-1], value, r.strict)
    if r.pos != r.n:
        raise r.fail(f"{r.n - r.pos} trailing bytes after the value")
    return value


def _attach(parent: _Container, value: Any, strict: bool = False) -> None:
    if parent.is_object:
        if strict and parent.key in parent.value:
            return  # XGBoost's Object::Map::emplace keeps the first of duplicate keys
        parent.value[parent.key] = value
    else:
        parent.value.append(value)
