"""The arrays backend's ``.tc`` file: a versioned container of the flattened tables.

Shape: ``MAGIC`` (8 bytes), format version, reserved, header length (_PREFIX, little-endian),
a JSON header (the model's Head, the tables' meta, runtime options, one descriptor per array:
name, dtype, length, offset), then each array of tables.TABLE_ARRAYS at a 64-byte boundary,
the last one padded to 64 bytes and nothing after it. Floating point: arrays are stored as their
raw little-endian bytes (thresholds in the input dtype, leaves in the accumulation dtype), so a
file reads back bit for bit. Reading validates every descriptor and then the tables
(tables.validate): a corrupt or truncated file raises ArtifactError.

A model with linear leaves (treecomp.linear) is stored as its leaf-id forest's tables (the
header's "head" is that forest's) plus a linear section: header key "linear" with the model's
own Head ("head"), its meta ("average") and the descriptors of SECTION's arrays, which
follow the IR file, laid out like the tables' arrays; validate_section checks them.

Format 3 (written since 2026-11-28) adds, after everything above, a 64-byte trailer: the
sha256 of every byte before it, then 32 zero bytes; a file whose bytes do not match it (bit
flips, truncation, anything appended) is refused before its header is parsed. It also stores
the results of the derived tables' sorts (header key "sorts": descriptors of SORTS' arrays,
laid out like the tables'), so a load derives them in linear time (derived.py checks each is
exactly the sort's result). Formats 1 (no linear section) and 2 (with one), written
before, still load: no digest, their derived tables computed with the sorts, as then.

Reading does not copy: given a read-only mapping of the file (mmap.mmap, loader.load), the
arrays are numpy views of it (np.frombuffer) and the digest is computed over it in place.
"""

from __future__ import annotations

import hashlib
import json
import mmap
import struct
from typing import Any, NamedTuple

import numpy as np

from ...version import __version__
from ...errors import ArtifactError, InvalidModelError
from ...ir import Head
from .tables import TABLE_ARRAYS, Tables, bad_table, validate

#: the backend that reads these files (arrays.NAME), written into the header
BACKEND = "arrays"
#: what tables_to_bytes writes: the digest trailer, the stored sorts, linear optional
FORMAT_VERSION = 3
#: older formats this reader still takes (no digest, no stored sorts)
OLD_FORMAT_VERSIONS = (1, 2)
#: the stored results of the derived tables' sorts (header key "sorts": derived.py,
#: distinct_thresholds and bitvec_tables): name -> the dtypes a file may use
SORTS = {"q_uid": ("<i4", "<i8"), "q_ufeat": ("<i4",), "q_uthr": ("<f4", "<f8"),
         "bv_order": ("<i4", "<i8")}
#: format 3's trailer: sha256 of the file before it, then zeros to 64 bytes
TRAILER = 64
#: the linear section's arrays and dtypes (little-endian), in the order tc_linear_margins takes
#: them: node0 (n_trees + 1: each tree's first node, numbered tree after tree), tree_out
#: (n_trees: its output column), base (n_outputs: the initial margins), plain / const (n_nodes:
#: a node's plain value and linear constant), ptr (n_nodes + 1: its range in feat / coeff)
SECTION = {"node0": "<i8", "tree_out": "<i4", "base": "<f8", "plain": "<f8", "const": "<f8",
           "ptr": "<i8", "feat": "<i4", "coeff": "<f8"}
#: format 2: a file with a linear section, before format 3 (an older reader, which would take
#: the leaf-id tables for the model (margins that are node indices), refuses the version)
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
                    linear: tuple[Head, dict[str, np.ndarray], dict[str, Any]] | None = None,
                    sorts: dict[str, np.ndarray] | None = None) -> bytes:
    """MAGIC, version, header length, JSON header, then each array at a 64-byte boundary, then
    (optional) the model's IR file (ir.Forest.to_bytes: for apply / contributions), then
    (optional) a linear section: (the model's Head, SECTION's arrays, {"average"}), then
    (optional) the sorts' results of SORTS (ArraysKernel.sorts), then the trailer."""
    descr, off = _layout(tables.arrays, TABLE_ARRAYS, 0)
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
    sorts = {k: v for k, v in (sorts or {}).items() if k in SORTS}
    if sorts:
        sdescr, off = _layout(sorts, list(sorts), off)
        extra["sorts"] = sdescr
        placed += [(d, sorts[d["name"]]) for d in sdescr]
    version = FORMAT_VERSION
    header = json.dumps({"format": "treecomp-arrays", "version": version,
                         "treecomp_version": __version__, "head": head.to_json(backend=BACKEND),
                         "tables": tables.meta, "runtime": runtime, "arrays": descr, **extra},
                        sort_keys=True).encode()
    start = body_start(len(header))
    buf = bytearray(start + off + TRAILER)
    _PREFIX.pack_into(buf, 0, MAGIC, version, 0, len(header))
    buf[_PREFIX.size:_PREFIX.size + len(header)] = header
    for d, a in placed:
        buf[start + d["offset"]:start + d["offset"] + a.nbytes] = a.tobytes()
    if ir is not None:
        buf[start + extra["ir"]["offset"]:start + extra["ir"]["offset"] + len(ir)] = ir
    return seal(buf)


def body_start(header_len: int) -> int:
    """Where a table file's arrays begin: after the prefix and a JSON header of `header_len`
    bytes, at the next 64-byte boundary."""
    return -(-(_PREFIX.size + header_len) // 64) * 64


def split_file(data: Any) -> tuple[dict, bytearray, int]:
    """(header, body, version) of a table file, unchecked: for tools (and tests) that edit a
    file on purpose; join_file puts the parts together again."""
    _, version, _, hlen = _PREFIX.unpack_from(data, 0)
    header = json.loads(bytes(data[_PREFIX.size:_PREFIX.size + hlen]))
    return header, bytearray(data[body_start(hlen):]), version


def join_file(header: dict, body: Any, version: int = FORMAT_VERSION, sealed: bool = True) -> bytes:
    """A table file of this header and body (split_file's parts); a format-3 file sealed again
    (seal) unless sealed=False, as a deliberate editor would."""
    h = json.dumps(header, sort_keys=True).encode()
    buf = bytearray(body_start(len(h)))
    _PREFIX.pack_into(buf, 0, MAGIC, version, 0, len(h))
    buf[_PREFIX.size:_PREFIX.size + len(h)] = h
    data = bytes(buf) + bytes(body)
    return seal(data) if sealed and version == FORMAT_VERSION else data


def seal(data: bytes | bytearray) -> bytes:
    """A format-3 file with its trailer (the last TRAILER bytes) set to the digest of the bytes
    before it: what tables_to_bytes ends with; for tools (and tests) that edit a file on
    purpose."""
    buf = bytearray(data)
    n = len(buf) - TRAILER
    buf[n:] = hashlib.sha256(memoryview(buf)[:n]).digest() + bytes(TRAILER - 32)
    return bytes(buf)


def check_digest(data: Any) -> None:
    """ArtifactError unless a format-3 file's trailer holds the sha256 of the bytes before it
    (hashed in place: a mapping is not copied)."""
    n = len(data) - TRAILER
    if n < _PREFIX.size:
        raise ArtifactError("corrupt arrays artifact: truncated (no digest)")
    mv = memoryview(data)
    try:
        ok = (hashlib.sha256(mv[:n]).digest() == mv[n:n + 32].tobytes()
              and not any(mv[n + 32:].tobytes()))
    finally:
        mv.release()
    if not ok:
        raise ArtifactError("corrupt arrays artifact: its bytes do not match the digest written "
                            "with it (truncated, altered or extended)")


def written_by(data: Any) -> str | None:
    """The treecomp version that wrote a table file (its header's "treecomp_version"), or None
    where the header has none; for a file tables_from_bytes has read."""
    _, _, _, hlen = _PREFIX.unpack_from(data, 0)
    try:
        version = json.loads(bytes(data[_PREFIX.size:_PREFIX.size + hlen])).get("treecomp_version")
    except (ValueError, AttributeError, UnicodeDecodeError):
        return None
    return version if isinstance(version, str) else None


def _read_arrays(data: Any, start: int, descr: list, allowed: Any, what: str,
                 arrays: dict[str, np.ndarray], size: int, dtypes: dict | None = None) -> int:
    """The arrays `descr` describes (names in `allowed`, each once; of one of dtypes[name]
    where given) inside data[:size] into `arrays`; returns the end of the last one's padding."""
    end = start
    if not isinstance(descr, list):
        raise bad_table(f"{what} descriptors must be a list")
    for d in descr:
        name = str(d["name"])
        if name not in allowed or name in arrays:
            raise bad_table(f"unexpected {what} {name!r}")
        dt, n, off = np.dtype(str(d["dtype"])), d["length"], d["offset"]
        if dtypes is not None and dt.str not in dtypes[name]:
            raise bad_table(f"{what} {name!r} of dtype {dt}")
        if type(n) is not int or type(off) is not int:
            raise bad_table(f"{what} {name!r}: length and offset must be integers")
        if dt.hasobject or n < 0 or off < 0 or off % 64 or start + off + n * dt.itemsize > size:
            raise bad_table(f"{what} {name!r} lies outside the file (truncated?)")
        arrays[name] = np.frombuffer(data, dt, n, start + off)
        end = max(end, start + off + -(-n * dt.itemsize // 64) * 64)
    return end


class TableFile(NamedTuple):
    """A read table file (tables_from_bytes): the tables, the head, the runtime options, the IR
    file's bytes (None in a file without them; read by ir.Forest.from_bytes only when asked
    for), the linear section (None, or the model's Head, SECTION's arrays and {"average"}:
    checked by validate_section) and the stored sorts' results (SORTS: checked where derived.py
    uses them; empty in formats 1 and 2)."""
    tables: Tables
    head: Head
    runtime: dict
    ir: Any
    linear: Any
    sorts: dict


def tables_from_bytes(data: Any, digest: bool = True) -> TableFile:
    """Parse and validate a table file (ArtifactError on anything malformed). `data`: bytes, a
    read-only mmap.mmap of the file or a memoryview of memory that outlives the tables (the
    arrays are then views of it, not copies). digest=False: a format-3 file's digest is not
    computed (for a file inside a library whose seal, already checked, covers it)."""
    if not isinstance(data, (bytes, mmap.mmap, memoryview)):
        data = bytes(data)
    if len(data) < _PREFIX.size or bytes(data[:len(MAGIC)]) != MAGIC:
        raise ArtifactError("not a treecomp arrays artifact (bad magic)")
    _, version, _, hlen = _PREFIX.unpack_from(data, 0)
    if version != FORMAT_VERSION and version not in OLD_FORMAT_VERSIONS:
        raise ArtifactError(f"arrays artifact format {version} is not supported (this treecomp "
                            f"reads formats {', '.join(map(str, OLD_FORMAT_VERSIONS))} and "
                            f"{FORMAT_VERSION}): recompile the model")
    size = len(data)
    if version == FORMAT_VERSION:  # before anything in it is read
        if digest:
            check_digest(data)
        elif size < _PREFIX.size + TRAILER:
            raise bad_table("truncated (no digest)")
        size -= TRAILER
    if _PREFIX.size + hlen > size:
        raise bad_table("truncated header")
    try:
        hdr = json.loads(bytes(data[_PREFIX.size:_PREFIX.size + hlen]))
        head = Head.from_json(hdr["head"])
        meta, runtime, descr = dict(hdr["tables"]), dict(hdr["runtime"]), list(hdr["arrays"])
        if hdr.get("format") != "treecomp-arrays":
            raise bad_table("unknown format")
    except ArtifactError:
        raise
    except (ValueError, KeyError, TypeError, UnicodeDecodeError, InvalidModelError) as exc:
        raise bad_table(f"unreadable header ({exc})") from None
    start = -(-(_PREFIX.size + hlen) // 64) * 64
    arrays: dict[str, np.ndarray] = {}
    sorts: dict[str, np.ndarray] = {}
    linear = None
    try:
        end = _read_arrays(data, start, descr, TABLE_ARRAYS, "array", arrays, size)
        if version != FORMAT_VERSION and ("linear" in hdr) != (version == LINEAR_FORMAT_VERSION):
            raise bad_table(f"format {version} {'needs' if version == LINEAR_FORMAT_VERSION else 'has no'} "
                       "linear section")
        if "linear" in hdr:
            lin = hdr["linear"]
            lhead = Head.from_json(lin["head"])
            if type(lin["average"]) is not bool:
                raise bad_table("the linear section's average must be true or false")
            larrays: dict[str, np.ndarray] = {}
            end = max(end, _read_arrays(data, start, list(lin["arrays"]), SECTION,
                                        "linear section array", larrays, size))
            validate_section(larrays, lhead, head)
            linear = (lhead, larrays, {"average": lin["average"]})
        if "sorts" in hdr:
            if version != FORMAT_VERSION:
                raise bad_table(f"format {version} has no stored sorts")
            end = max(end, _read_arrays(data, start, hdr["sorts"], SORTS, "stored sort",
                                        sorts, size, SORTS))
        ir = None
        if "ir" in hdr:  # after the arrays, padded to 64 bytes like them
            n, off = hdr["ir"]["length"], hdr["ir"]["offset"]
            if type(n) is not int or type(off) is not int or n < 0 or off < 0 or off % 64 \
                    or start + off + n > size:
                raise bad_table("the IR section lies outside the file (truncated?)")
            ir = bytes(data[start + off:start + off + n])
            end = max(end, start + off + -(-n // 64) * 64)
    except ArtifactError:
        raise
    except (ValueError, KeyError, TypeError, InvalidModelError) as exc:
        raise bad_table(f"bad array descriptor ({exc})") from None
    if size != end:  # tables_to_bytes pads the last array to 64 bytes, no more
        raise bad_table(f"{size - end} bytes after the last array (a damaged or concatenated file?)"
                   if size > end else "truncated (the last array's padding is missing)")
    tables = Tables(meta=meta, arrays=arrays)
    validate(tables)
    if (head.n_features, head.n_outputs, head.n_trees, head.input_dtype, head.accumulate_dtype) != \
            (meta["n_features"], meta["n_outputs"], meta["n_trees"], meta["x_dtype"], meta["acc_dtype"]):
        raise bad_table("header and tables disagree")
    return TableFile(tables, head, runtime, ir, linear, sorts)


def validate_section(arrays: dict[str, np.ndarray], head: Head, leaf_head: Head) -> None:
    """ArtifactError unless `arrays` is a well-formed linear section for a model of `head`
    whose leaves `leaf_head`'s kernel finds: every index inside its array (feat < n_features,
    tree_out < n_outputs, ptr and node0 rising), the shapes of the model's."""
    def bad(msg: str) -> ArtifactError:
        return ArtifactError(f"corrupt linear section: {msg}")
    if set(arrays) != set(SECTION):
        raise bad(f"arrays {sorted(arrays)}, expected {sorted(SECTION)}")
    for k, dt in SECTION.items():
        if arrays[k].dtype != np.dtype(dt) or arrays[k].ndim != 1:
            raise bad(f"{k} is {arrays[k].dtype}, not {np.dtype(dt)}")
    A = arrays
    T, no, nf = head.n_trees, head.n_outputs, head.n_features
    if (leaf_head.n_outputs, leaf_head.n_trees, leaf_head.n_features, leaf_head.input_dtype) != \
            (T, T, nf, head.input_dtype) or leaf_head.accumulate_dtype != "float64" \
            or head.accumulate_dtype != "float64" or head.base_link != "identity":
        raise bad("the leaf kernel, the section and the model disagree on their shapes")
    node0, ptr = A["node0"], A["ptr"]
    if len(node0) != T + 1 or node0[0] != 0 or np.any(np.diff(node0) < 1):
        raise bad("node0 must rise from 0, one entry per tree and one more")
    n = int(node0[-1])
    if len(A["plain"]) != n or len(A["const"]) != n or len(ptr) != n + 1:
        raise bad(f"plain and const need {n} entries, ptr {n + 1}")
    k = len(A["feat"])
    if ptr[0] != 0 or ptr[-1] != k or np.any(np.diff(ptr) < 0) or len(A["coeff"]) != k:
        raise bad("ptr must rise from 0 to the number of (feature, coeff) pairs")
    if len(A["tree_out"]) != T or len(A["base"]) != no:
        raise bad(f"tree_out needs {T} entries, base {no}")
    if T and (A["tree_out"].min() < 0 or A["tree_out"].max() >= no):
        raise bad("a tree's output column lies outside the outputs")
    if k and (A["feat"].min() < 0 or A["feat"].max() >= nf):
        raise bad("a linear leaf reads a feature the model does not have")
    if not all(np.all(np.isfinite(A[k])) for k in ("const", "coeff", "plain", "base")):
        raise bad("non-finite const, coeff, plain value or base")
