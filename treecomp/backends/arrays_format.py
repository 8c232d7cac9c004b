"""The arrays backend's ``.tc`` file: a versioned container of the flattened tables.

Shape: ``MAGIC`` (8 bytes), format version, reserved, header length (_PREFIX, little-endian),
a JSON header (the model's Head, the tables' meta, runtime options, one descriptor per array:
name, dtype, length, offset), then each array of arrays_tables._ARRAYS at a 64-byte boundary,
the last one padded to 64 bytes and nothing after it. Floating point: arrays are stored as their
raw little-endian bytes (thresholds in the input dtype, leaves in the accumulation dtype), so a
file reads back bit for bit. Reading validates every descriptor and then the tables
(arrays_tables.validate): a corrupt or truncated file raises ArtifactError.

A model with linear leaves (treecomp.linear) is stored as its leaf-id forest's tables (the
header's "head" is that forest's) plus a linear section: header key "linear" with the model's
own Head ("head"), its meta ("average") and the descriptors of linear.SECTION's arrays, which
follow the IR file, laid out like the tables' arrays; linear.validate_section checks them.
"""

from __future__ import annotations

import json
import struct
from typing import Any

import numpy as np

from .. import __version__
from ..errors import ArtifactError, InvalidModelError
from ..ir import Head
from .arrays_tables import _ARRAYS, Tables, _bad, validate

#: the backend that reads these files (arrays.NAME), written into the header
BACKEND = "arrays"
FORMAT_VERSION = 1
#: a file with a linear section: an older reader, which would take the leaf-id tables for the
#: model (margins that are node indices), refuses the version instead
LINEAR_FORMAT_VERSION = 2
MAGIC = b"TCARRAYS"
_PREFIX = struct.Struct("<8sIIQ")  # magic, format version, reserved, header length


def _layout(arrays: dict[str, np.ndarray], names: Any, off: int) -> tuple[list[dict], int]:
    """Descriptors of arrays[name] for `names` placed from offset `off` at 64-byte boundaries."""
    descr = []
    for name in names:
        a = arrays[name]
        descr.append({"name": name, "dtype": a.dtype.str, "length": int(a.shape[0]), "offset": off})
        off += -(-a.nbytes // 64) * 64
    return descr, off


def tables_to_bytes(tables: Tables, head: Head, runtime: dict[str, Any],
                    ir: bytes | None = None,
                    linear: tuple[Head, dict[str, np.ndarray], dict[str, Any]] | None = None) -> bytes:
    """MAGIC, version, header length, JSON header, then each array at a 64-byte boundary, then
    (optional) the model's IR file (ir.Forest.to_bytes: for apply / contributions), then
    (optional) a linear section: (the model's Head, linear.SECTION's arrays, {"average"})."""
    descr, off = _layout(tables.arrays, _ARRAYS, 0)
    extra: dict[str, Any] = {}
    if ir is not None:
        extra["ir"] = {"offset": off, "length": len(ir)}
        off += -(-len(ir) // 64) * 64
    placed = [(d, tables.arrays[d["name"]]) for d in descr]
    if linear is not None:
        lhead, lin_arrays, lmeta = linear
        ldescr, off = _layout(lin_arrays, list(lin_arrays), off)
        extra["linear"] = {"head": lhead.to_json(backend=BACKEND), "arrays": ldescr,
                           "average": bool(lmeta["average"])}
        placed += [(d, lin_arrays[d["name"]]) for d in ldescr]
    version = FORMAT_VERSION if linear is None else LINEAR_FORMAT_VERSION
    header = json.dumps({"format": "treecomp-arrays", "version": version,
                         "treecomp_version": __version__, "head": head.to_json(backend=BACKEND),
                         "tables": tables.meta, "runtime": runtime, "arrays": descr, **extra},
                        sort_keys=True).encode()
    start = -(-(_PREFIX.size + len(header)) // 64) * 64
    buf = bytearray(start + off)
    _PREFIX.pack_into(buf, 0, MAGIC, version, 0, len(header))
    buf[_PREFIX.size:_PREFIX.size + len(header)] = header
    for d, a in placed:
        buf[start + d["offset"]:start + d["offset"] + a.nbytes] = a.tobytes()
    if ir is not None:
        buf[start + extra["ir"]["offset"]:start + extra["ir"]["offset"] + len(ir)] = ir
    return bytes(buf)


def written_by(data: bytes) -> str | None:
    """The treecomp version that wrote a table file (its header's "treecomp_version"), or None
    where the header has none; for a file tables_from_bytes has read."""
    _, _, _, hlen = _PREFIX.unpack_from(data, 0)
    try:
        version = json.loads(data[_PREFIX.size:_PREFIX.size + hlen]).get("treecomp_version")
    except (ValueError, AttributeError, UnicodeDecodeError):
        return None
    return version if isinstance(version, str) else None


def _read_arrays(data: bytes, start: int, descr: list, allowed: Any, what: str,
                 arrays: dict[str, np.ndarray]) -> int:
    """The arrays `descr` describes (names in `allowed`, each once) into `arrays`; returns the
    end of the last one's padding."""
    end = start
    for d in descr:
        name = str(d["name"])
        if name not in allowed or name in arrays:
            raise _bad(f"unexpected {what} {name!r}")
        dt, n, off = np.dtype(str(d["dtype"])), d["length"], d["offset"]
        if type(n) is not int or type(off) is not int:
            raise _bad(f"{what} {name!r}: length and offset must be integers")
        if dt.hasobject or n < 0 or off < 0 or off % 64 or start + off + n * dt.itemsize > len(data):
            raise _bad(f"{what} {name!r} lies outside the file (truncated?)")
        arrays[name] = np.frombuffer(data, dt, n, start + off)
        end = max(end, start + off + -(-n * dt.itemsize // 64) * 64)
    return end


def tables_from_bytes(data: bytes) -> tuple[Tables, Head, dict[str, Any], bytes | None, Any]:
    """Parse and validate a table file (ArtifactError on anything malformed): the tables, the
    head, the runtime options, the IR file's bytes (None in a file without them; read by
    ir.Forest.from_bytes only when asked for) and the linear section (None, or the model's
    Head, linear.SECTION's arrays and {"average"}: checked by linear.validate_section)."""
    data = bytes(data)
    if len(data) < _PREFIX.size or not data.startswith(MAGIC):
        raise ArtifactError("not a treecomp arrays artifact (bad magic)")
    _, version, _, hlen = _PREFIX.unpack_from(data, 0)
    if version not in (FORMAT_VERSION, LINEAR_FORMAT_VERSION):
        raise ArtifactError(f"arrays artifact format {version} is not supported (this treecomp "
                            f"reads formats {FORMAT_VERSION} and {LINEAR_FORMAT_VERSION}): "
                            "recompile the model")
    if _PREFIX.size + hlen > len(data):
        raise _bad("truncated header")
    try:
        hdr = json.loads(data[_PREFIX.size:_PREFIX.size + hlen])
        head = Head.from_json(hdr["head"])
        meta, runtime, descr = dict(hdr["tables"]), dict(hdr["runtime"]), list(hdr["arrays"])
        if hdr.get("format") != "treecomp-arrays":
            raise _bad("unknown format")
    except ArtifactError:
        raise
    except (ValueError, KeyError, TypeError, UnicodeDecodeError, InvalidModelError) as exc:
        raise _bad(f"unreadable header ({exc})") from None
    start = -(-(_PREFIX.size + hlen) // 64) * 64
    arrays: dict[str, np.ndarray] = {}
    linear = None
    try:
        end = _read_arrays(data, start, descr, _ARRAYS, "array", arrays)
        if ("linear" in hdr) != (version == LINEAR_FORMAT_VERSION):
            raise _bad(f"format {version} {'needs' if version == LINEAR_FORMAT_VERSION else 'has no'} "
                       "linear section")
        if "linear" in hdr:
            from ..linear import SECTION
            lin = hdr["linear"]
            lhead = Head.from_json(lin["head"])
            if type(lin["average"]) is not bool:
                raise _bad("the linear section's average must be true or false")
            larrays: dict[str, np.ndarray] = {}
            end = max(end, _read_arrays(data, start, list(lin["arrays"]), SECTION,
                                        "linear section array", larrays))
            linear = (lhead, larrays, {"average": lin["average"]})
        ir = None
        if "ir" in hdr:  # after the arrays, padded to 64 bytes like them
            n, off = hdr["ir"]["length"], hdr["ir"]["offset"]
            if type(n) is not int or type(off) is not int or n < 0 or off < 0 or off % 64 \
                    or start + off + n > len(data):
                raise _bad("the IR section lies outside the file (truncated?)")
            ir = data[start + off:start + off + n]
            end = max(end, start + off + -(-n // 64) * 64)
    except ArtifactError:
        raise
    except (ValueError, KeyError, TypeError, InvalidModelError) as exc:
        raise _bad(f"bad array descriptor ({exc})") from None
    if len(data) != end:  # tables_to_bytes pads the last array to 64 bytes, no more
        raise _bad(f"{len(data) - end} bytes after the last array (a damaged or concatenated file?)"
                   if len(data) > end else "truncated (the last array's padding is missing)")
    tables = Tables(meta=meta, arrays=arrays)
    validate(tables)
    if (head.n_features, head.n_outputs, head.n_trees, head.input_dtype, head.accumulate_dtype) != \
            (meta["n_features"], meta["n_outputs"], meta["n_trees"], meta["x_dtype"], meta["acc_dtype"]):
        raise _bad("header and tables disagree")
    return tables, head, runtime, ir, linear
