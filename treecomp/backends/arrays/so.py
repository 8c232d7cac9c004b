"""The arrays backend as ONE self-contained shared library (``treecomp compile -o model.so``,
``Predictor.save("model.so")`` of an arrays predictor).

The in-process arrays backend points a ctypes ``tc_tables`` struct at numpy arrays and calls the
package's kernel. A .so must stand alone, honouring runtime/treecomp.h, so it holds both:

- the kernel: the package's prebuilt kernel objects (the three TC_PART units, built at install
  time by setup.py with KERNEL_CFLAGS into ``treecomp/_arrays_kernel.a``: the very objects of the
  in-process ``_arrays_kernel*.so``), or, when that archive is missing or was built from other
  sources, an archive built once per machine into the cache (native.kernel_archive);
- the model: every table the kernel reads (ArraysKernel.pack_arrays: what the in-process path
  points at, derived tables included) serialised into one blob, each array 64-byte aligned,
  pulled into .rodata with the assembler's ``.incbin`` (no C literal to parse: a multi-MB model
  builds as fast as a small one), and a static ``tc_tables`` initialised with address constants
  into the blob;
- the tables once more as a ``.tc`` file (format), exported with the kernel's
  ``tc_tables`` (``treecomp_arrays_tc`` / ``_tc_size`` / ``_model``): when the library is
  loaded, check_library validates that file as ``treecomp.load`` validates a ``.tc`` and
  requires every field of ``tc_tables`` to be exactly what those tables pack into, before
  the first prediction (its seal has already vouched for the file's bytes);
- a small generated C unit: the ABI getters, the meta JSON (loader.Head.to_json, backend
  "arrays"), and ``treecomp_predict`` calling ``tc_arrays_predict`` with the best instruction
  set, TREECOMP_TRANSFORM applied as the library does: the kernel's own transform kind
  (outputs.native_transform) or, where that is 0 (sklearn's numpy-exp links), the C backend's
  transform code (c.transform_code), exactly what a c-backend .so computes.

Instruction set: chosen once, on the first call, as the in-process path does: the best vector
path tc_arrays_auto_mask offers (native.auto_isas: aarch64's "sve" only at vectors of 32 bytes or more) whose results agree bit for bit with the baseline path on a
built-in sample of rows (SELF_TEST_ROWS rows drawn at compile time around this model's own
thresholds, with NaN and +/-inf), else the baseline. This runs the model's own layout on both
paths (~2 x 100 rows, well under a millisecond for 500 trees) and guards the .so on any CPU it is
copied to. An isa forced at compile time (isa="scalar" / "avx2" / "avx512" / "neon" / "sve") is used as is when
the CPU has it (like the in-process path), else the automatic choice.

Linking: the generated unit, the archive and libm, through toolchain.link_shared_library with a
version script (ELF) / exported-symbols list (macOS) that exports ``treecomp_*`` only: the
kernel's tc_* entry points become local, so two such .so files (or one and the in-process kernel)
in one process never bind to each other's code. Build: one small C unit (~0.4 s: the kernel's
table layout is read from kernels/arrays.c itself) plus the link, cached by content.
"""

from __future__ import annotations

import ctypes
import hashlib
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

from ...version import __version__
from ... import outputs, toolchain
from ...errors import CompileError
from ...native import BASE_SYMBOL
from . import native
from .tables import FF_CAT, FF_FEAT
from .native import KERNEL_CFLAGS, NATIVE_ISAS, CTables
from ..c import blob_code, c_string
from ...platform import incbin

NAME = "arrays"
#: rows of the first-call self-test of the vector paths (odd: the kernels' row tails run too)
SELF_TEST_ROWS = 101
#: the only symbols an arrays .so exports (runtime/treecomp.h)
EXPORTS = ("treecomp_*",)
_ALIGN = 64
#: tc_tables' pointer and scalar fields (what check_library compares)
POINTER_FIELDS = tuple(n for n, t in CTables._fields_ if t is ctypes.c_void_p)
SCALAR_FIELDS = tuple(n for n, t in CTables._fields_ if t is not ctypes.c_void_p)


def test_rows(kernel: Any, n: int = SELF_TEST_ROWS, seed: int = 0) -> np.ndarray:
    """Rows in the model's input dtype that exercise its splits: per feature, its thresholds and
    their float neighbours (both sides of every comparison), small integers (category codes),
    NaN and +/-inf."""
    A, nf = kernel.tables.arrays, kernel.head.n_features
    x_dt = kernel.tables.x_dtype
    rng = np.random.default_rng(seed)
    X = rng.integers(-2, 40, size=(n, nf)).astype(np.float64)
    feats, thrs = [], []
    for ffk, thk in (("h_ff", "h_thr"), ("c_ff", "c_thr")):
        ff = A[ffk].view(np.uint32)
        t = A[thk].astype(np.float64)
        ok = np.isfinite(t) & ((ff & FF_CAT) == 0) & ((ff & FF_FEAT) < nf)
        feats.append((ff[ok] & FF_FEAT).astype(np.int64))
        thrs.append(t[ok])
    f, t = np.concatenate(feats), np.concatenate(thrs)
    if len(f):
        tx = t.astype(x_dt)
        with np.errstate(over="ignore"):
            pool_t = np.concatenate([tx, np.nextafter(tx, x_dt.type(np.inf)),
                                     np.nextafter(tx, x_dt.type(-np.inf))]).astype(np.float64)
        pool_f = np.concatenate([f, f, f])
        order = np.argsort(pool_f, kind="stable")
        pool_f, pool_t = pool_f[order], pool_t[order]
        starts = np.searchsorted(pool_f, np.arange(nf))
        ends = np.searchsorted(pool_f, np.arange(nf), side="right")
        counts = ends - starts
        pick = rng.random((n, nf)) < 0.7
        r = (rng.random((n, nf)) * np.maximum(counts, 1)).astype(np.int64)
        vals = pool_t[np.minimum(starts + r, len(pool_t) - 1)]
        use = pick & (counts > 0)
        X[use] = vals[use]
    u = rng.random((n, nf))
    X[u < 0.08] = np.nan
    X[(u >= 0.08) & (u < 0.10)] = np.inf
    X[(u >= 0.10) & (u < 0.12)] = -np.inf
    return np.ascontiguousarray(X.astype(x_dt))


def pack_blob(arrays: dict[str, np.ndarray]) -> tuple[bytes, dict[str, int]]:
    """The arrays in one buffer, each at a 64-byte boundary: (bytes, {name: offset})."""
    offs, off = {}, 0
    for name, a in arrays.items():
        offs[name] = off
        off += -(-a.nbytes // _ALIGN) * _ALIGN
    buf = bytearray(max(off, _ALIGN))
    for name, a in arrays.items():
        b = np.ascontiguousarray(a).tobytes()
        buf[offs[name]:offs[name] + len(b)] = b
    return bytes(buf), offs


def emit(kernel: Any) -> tuple[str, bytes]:
    """The C unit and the blob of an arrays kernel (treecomp.backends.arrays.ArraysKernel)."""
    from .. import c as cbackend
    head = kernel.head
    scalars, keep = kernel.pack_arrays()
    unknown = set(keep) - set(POINTER_FIELDS)
    if unknown or set(scalars) - set(SCALAR_FIELDS):
        raise CompileError(f"arrays .so: tables the layout does not know: {sorted(unknown)}")
    # a base_link's margins: the writable treecomp_base, libm's value until loaded (c._base_decl)
    settable = head.base_link != "identity"
    arrays = {k: v for k, v in keep.items() if v.size and not (settable and k == "base")}
    X = test_rows(kernel)
    arrays["tc_test_x"] = X
    # the tables as a .tc file: the loader validates them as it validates a .tc and checks that
    # tc_model holds exactly what they pack into (check_library)
    tc = kernel.file_bytes(None)
    arrays["tc_file"] = np.frombuffer(tc, np.uint8)
    ir = kernel.ir_bytes()
    if ir is not None:  # the model's IR file (treecomp_ir): apply / contributions when loaded
        arrays["tc_ir"] = np.frombuffer(ir, np.uint8)
    blob, offs = pack_blob(arrays)
    acc_t = "float" if head.accumulate_dtype == "float32" else "double"
    x_bits = 64 if kernel.tables.x_dtype == np.float64 else 32
    tkind = outputs.native_transform(head)
    ccode = "" if tkind else cbackend.transform_code(head)
    want = NATIVE_ISAS.index(kernel.requested_isa) if kernel.requested_isa in NATIVE_ISAS else -1
    init = [f"  .{k} = {int(scalars[k])}," for k in SCALAR_FIELDS if k in scalars]
    init += [f"  .{k} = TC_P({offs[k]})," for k in POINTER_FIELDS if k in offs]
    base_decl = ""
    if settable:
        init.append(f"  .base = {BASE_SYMBOL},")
        base = ", ".join(cbackend.c_literal(float(b), acc_t)
                         for b in outputs.base_margins(head, "libm").astype(head.accumulate_dtype))
        base_decl = f"TC_EXPORT tc_acc {BASE_SYMBOL}[TC_NO] = {{{base}}};\n"
    meta = head.to_json(backend=NAME, treecomp_version=__version__)
    transform = "" if not ccode else f"""
  if (flags & TREECOMP_TRANSFORM) {{  /* the library's inverse link, as a c-backend .so has it */
    for (int64_t r = 0; r < n_rows; ++r) {{
      tc_acc *a = (tc_acc *)out + r * TC_NO;
      {ccode}
    }}
  }}"""
    src = f"""/* treecomp {__version__}: a self-contained arrays-backend predictor ({head.n_trees} trees).
 * The kernel (runtime/kernels/arrays.c) is linked in from a static archive; this unit holds the
 * model's tables (tc_blob), the tc_tables pointing into them and the treecomp.h entry points. */
#define TC_PART 3  /* no kernel code: the table layout (tc_tables) and TC_EXPORT only */
#include "kernels/arrays.c"
#include "treecomp.h"

_Static_assert(sizeof(tc_tables) == {ctypes.sizeof(CTables)}, "tc_tables differs from treecomp's mirror");

int32_t tc_arrays_predict(const tc_tables *T, const void *X, int32_t x_bits, int64_t n_rows,
                          void *out, int32_t isa, int32_t transform);
int32_t tc_arrays_isa_mask(void);
int32_t tc_arrays_auto_mask(void);

{blob_code('tc_blob', 'blob.bin', blob, incbin())}
#define TC_P(off) ((const void *)(tc_blob + (off)))
typedef {acc_t} tc_acc;
#define TC_NO {head.n_outputs}
#define TC_TKIND {tkind}
#define TC_WANT_ISA {want}
#define TC_TEST_ROWS {len(X)}

{base_decl}{"" if ir is None else cbackend.ir_code(len(ir), f"TC_P({offs['tc_ir']})")}
static const tc_tables tc_model = {{
{chr(10).join(init)}
}};

/* -1 until the first call picks the instruction set (idempotent: a race computes it twice) */
static int32_t tc_isa = -1;

/* does instruction set `isa` give the baseline path's margins, bit for bit, on the test rows? */
static int tc_agrees(int32_t isa) {{
  const size_t n = (size_t)TC_TEST_ROWS * TC_NO;
  tc_acc *a = (tc_acc *)malloc(2 * n * sizeof(tc_acc));
  if (!a) return 0;
  const void *x = TC_P({offs["tc_test_x"]});
  const int ok = tc_arrays_predict(&tc_model, x, {x_bits}, TC_TEST_ROWS, a, TC_ISA_SCALAR, 0) == 0
                 && tc_arrays_predict(&tc_model, x, {x_bits}, TC_TEST_ROWS, a + n, isa, 0) == 0
                 && memcmp(a, a + n, n * sizeof(tc_acc)) == 0;
  free(a);
  return ok;
}}

static int32_t tc_pick_isa(void) {{
  int32_t isa = __atomic_load_n(&tc_isa, __ATOMIC_ACQUIRE);
  if (isa >= 0) return isa;
  const int32_t mask = tc_arrays_isa_mask();
  isa = TC_ISA_SCALAR;
  if (TC_WANT_ISA >= 0 && ((mask >> TC_WANT_ISA) & 1)) {{
    isa = TC_WANT_ISA;
  }} else {{
    const int32_t autom = tc_arrays_auto_mask();  /* native.auto_isas */
    for (int32_t i = TC_ISA_LAST; i > TC_ISA_SCALAR; --i)
      if (((autom >> i) & 1) && tc_agrees(i)) {{ isa = i; break; }}
  }}
  __atomic_store_n(&tc_isa, isa, __ATOMIC_RELEASE);
  return isa;
}}

TC_EXPORT int32_t treecomp_abi_version(void) {{ return TREECOMP_ABI_VERSION; }}
TC_EXPORT const char *treecomp_version(void) {{ return {c_string(__version__)}; }}
TC_EXPORT const char *treecomp_digest(void) {{ return {c_string(head.digest)}; }}
TC_EXPORT const char *treecomp_backend(void) {{ return "{NAME}"; }}
TC_EXPORT int32_t treecomp_n_features(void) {{ return {head.n_features}; }}
TC_EXPORT int32_t treecomp_n_outputs(void) {{ return TC_NO; }}
TC_EXPORT int32_t treecomp_out_dtype(void) {{ return {64 if acc_t == "double" else 32}; }}
TC_EXPORT int32_t treecomp_n_classes(void) {{ return {sum(head.n_classes)}; }}
TC_EXPORT const char *treecomp_meta_json(void) {{ return {c_string(meta)}; }}
/* for the Python loader's check of the tables (so.check_library) */
TC_EXPORT int64_t treecomp_arrays_tc_size(void) {{ return {len(tc)}; }}
TC_EXPORT const void *treecomp_arrays_tc(void) {{ return TC_P({offs["tc_file"]}); }}
TC_EXPORT const void *treecomp_arrays_model(void) {{ return &tc_model; }}

TC_EXPORT int32_t treecomp_predict(const void *X, int32_t x_dtype, int64_t n_rows, void *out,
                                   uint32_t flags) {{
  if ((x_dtype != 32 && x_dtype != 64) || n_rows < 0 || (n_rows > 0 && (!X || !out)) || (flags & ~{outputs.accepted_flags(head)}u))
    return TREECOMP_EINVAL;
  if (n_rows == 0) return TREECOMP_OK;
  const int32_t rc = tc_arrays_predict(&tc_model, X, x_dtype, n_rows, out, tc_pick_isa(),
                                       (flags & TREECOMP_TRANSFORM) ? TC_TKIND : 0);
  if (rc != 0) return rc;{transform}
  return TREECOMP_OK;
}}
"""
    return src, blob


def build_path(kernel: Any, progress: Callable[[str], None] | None = None) -> Path:
    """The .so of `kernel` in the cache (built on a miss: compile the unit, link the archive)."""
    try:
        cc = toolchain.find_compiler()
    except CompileError as exc:
        raise toolchain.so_needs_compiler(exc) from None
    src, blob = emit(kernel)
    archive = native.kernel_archive(progress)
    digest = hashlib.sha256(src.encode() + b"\0" + blob).hexdigest()
    key = toolchain.cache_key("arrays-so", digest, native.kernel_source_hash(),
                              KERNEL_CFLAGS, cc.key, native.ARCHIVE_ORIGIN)

    def write(path: Path) -> None:
        t0 = time.perf_counter()
        toolchain.link_shared_library({"model.c": src}, path, [archive], KERNEL_CFLAGS,
                                      exports=EXPORTS, files={"blob.bin": blob}, compiler=cc,
                                      seal=True)
        if progress:
            progress(f"linked the arrays .so ({len(blob)} bytes of tables) in "
                     f"{time.perf_counter() - t0:.2f} s")
    return toolchain.cached(key, ".so", write)


def save(kernel: Any, path: Any, progress: Callable[[str], None] | None = None) -> None:
    """Write `kernel` (an ArraysKernel) as a self-contained shared library at `path`."""
    built = build_path(kernel, progress)
    data = built.read_bytes()
    toolchain.publish(Path(path).resolve(), lambda p: p.write_bytes(data))
