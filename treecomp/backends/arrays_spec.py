"""Per-model specialised byte walks for the arrays backend (option ``spec=True``).

The generic kernel (runtime/kernels/quant_impl.c) walks every heap tree of a quantised forest
with the same code, reading each tree's node offsets, threshold bytes and leaf planes from
the tables. Here the same walks are generated per model: one C function per tree that calls
the kernel's own inline walk (``zheap_d`` / ``zobl`` for AVX-512, ``qheap_d`` for AVX2: the
kernel's sources are included, not copied) with the tree's depth as a constant and its tables
as ``static const`` arrays, so that the compiler folds the node offsets into the loads'
addresses (no offset loads, no address arithmetic on the walk) and the depth dispatch
disappears. Trees the kernel's inline walks do not cover (depth 0, or deeper than 6 levels
outside symmetric trees) call the kernel's generic per-tree walk (``qheap_vec``) on the same
constant tables. The quantiser, the blocks and everything else stay the generic kernel's: the
kernel's ``qblock`` calls the loaded function (``tc_tables.q_spec``) in place of its loop over
the trees, for blocks of at least 8 rows with scalar leaves (single-output, or class-major
margins). Same bytes, same compares, same leaves, added in the same order: bit-exact with the
generic walk.

One instruction set per build (the one the kernel runs: AVX-512 lays its quantised blocks out
in 64-row groups, AVX2 in 32-row ones), compiled by the toolchain in parallel translation units
and cached by content (toolchain.cached). See docs/backends.md for what it measured.
"""

from __future__ import annotations

import ctypes
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

from .. import toolchain
from ..errors import CompileError
from . import arrays_native

#: instruction sets with a specialised walk: TC_ISA_* index and the kernel's function target
ISAS = {"avx2": (1, "avx2"),
        "avx512": (2, "avx512f,avx512bw,avx512vl,avx512vbmi,avx2,popcnt")}
#: trees per translation unit (units compile in parallel; each one re-parses the kernel)
TREES_PER_UNIT = 128
#: the exported walk: tc_spec_fn in arrays.c's tc_tables
ENTRY = "tc_spec_walk"


def eligible(scalars: dict[str, int], keep: dict[str, np.ndarray]) -> bool:
    """Does qblock ever call a specialised walk for these tables (quantised heaps whose leaves
    are all scalars, with leaf planes)?"""
    return bool(scalars.get("quant")) and bool(scalars.get("q_w1")) and "q_leafb" in keep \
        and int(scalars.get("n_trees", 0)) > 0


def _c_array(ctype: str, name: str, values: np.ndarray, align: int = 64) -> str:
    body = ",".join(map(str, values.tolist()))
    return f"static const {ctype} {name}[{max(1, len(values))}] __attribute__((aligned({align}))) = {{{body}}};"


def _prelude(isa: str, acc_bits: int) -> str:
    """The kernel's inline walks for one instruction set and accumulation dtype (arrays_impl.c
    and quant_impl.c under TC_SPEC_UNIT: no entry point, nothing else emitted)."""
    qvec, target = ISAS[isa]
    at, an = ("double", "f64") if acc_bits == 64 else ("float", "f32")
    return f"""#define TC_PART 3  /* arrays.c: the table layout and macros only */
#include "kernels/arrays.c"
#define TC_SPEC_UNIT 1
#define TC_ATTR __attribute__((target("{target}")))
#define TC_ISA {isa}
#define TC_VEC 0
#define TC_QVEC {qvec}
#define TC_XT float
#define TC_XN f32
#define TC_NODE tc_node_f32
#define TC_NTHR TC_NTHR32
#define TC_NCAT TC_NCAT32
#define TC_AT {at}
#define TC_AN {an}
#define TC_ABITS {acc_bits}
#define TC_SFX f32_{an}_{isa}
#include "kernels/arrays_impl.c"
typedef {at} tc_acc;
"""


def _tree_code(t: int, A: dict[str, np.ndarray], isa: str, acc_bits: int, cmux: int,
               cnan: bool) -> str:
    """Tree t's constant tables and its walk function tc_spec_tree_<t> (cmux, cnan: the column
    mux's width and merged NaN columns, as the kernel's qblock passes them)."""
    D = int(A["tree_depth"][t])
    n0, ns = int(A["tree_node"][t]), (1 << D) - 1
    co = A["h_qcol"][n0:n0 + ns].astype(np.int64)
    tb = A["h_qthr"][n0:n0 + ns].astype(np.int64)
    lead = A["tree_leaf"][t]
    lv = A["leaf_values"][lead:lead + (1 << D)]
    lw = lv.dtype.itemsize
    L = max(16, 1 << D)
    lo = int(A["q_leafb_off"][t])
    lb = A["q_leafb"][lo:lo + lw * L]
    obl = int(A["h_qobl"][t]) if "h_qobl" in A else 0
    # padded by 32 like the kernel's h_qthr / h_qcix: the AVX2 walk reads a level's bytes 16 at a
    # time (entries past the level are never selected)
    pad = np.zeros(32, np.int64)
    ut = "uint64_t" if lw == 8 else "uint32_t"
    bits = lv.view(np.uint64 if lw == 8 else np.uint32)
    lines = [_c_array("int32_t", f"co{t}", np.concatenate([co, np.zeros(2, np.int64)])),
             _c_array("int8_t", f"tb{t}", np.concatenate([tb, pad])),
             _c_array("uint8_t", f"lb{t}", lb.astype(np.int64)),
             f"static const union {{ {ut} u[{len(bits)}]; tc_acc f[{len(bits)}]; }} lv{t} "
             f"__attribute__((aligned(64))) = {{ .u = {{{','.join(f'{v}u' for v in bits.tolist())}}} }};"]
    cx = "0"
    if cmux and "h_qcix" in A:
        lines.append(_c_array("uint8_t", f"cx{t}", np.concatenate([A["h_qcix"][n0:n0 + ns].astype(np.int64), pad])))
        cx = f"cx{t}"
    C = (cmux | (1 if cnan else 0)) if cmux else 0
    an = "f64" if acc_bits == 64 else "f32"

    def fn(name: str) -> str:  # the kernel's AFN(name) in this unit
        return f"{name}_{an}_{isa}"
    args = f"co{t}, tb{t}, {D}, qb, gs, nb, lidx, lv{t}.f, a, lb{t}"
    if isa == "avx512" and obl and 1 <= D <= 8:
        call = f"{fn('zobl')}({args});"
    elif isa == "avx512" and 1 <= D <= 6:
        call = f"{fn('zheap_d')}({args});"
    elif isa == "avx2" and obl and 1 <= D <= 8:
        call = f"{fn('qheap_d')}({args}, 2, 0, 0);"
    elif isa == "avx2" and 1 <= D <= 6 and not (cx != "0" and (C & ~1) == 16 and D >= 5):
        call = f"{fn('qheap_d')}({args}, 1, 0, 0);"
    else:  # the kernel's generic per-tree dispatch, on the constant tables
        call = f"{fn('qheap_vec')}(co{t}, tb{t}, {D}, qb, gs, nb, lidx, lv{t}.f, a, lb{t}, {cx}, {C}, {obl});"
    lines.append(f"static __attribute__((noinline)) TC_ATTR void tc_spec_tree_{t}(const uint8_t *qb, "
                 f"int64_t gs, int64_t nb, tc_acc *a, int32_t *lidx) {{ {call} }}")
    return "\n".join(lines)


def emit(kernel: Any, isa: str) -> dict[str, str]:
    """The translation units {file name: C source} of `kernel`'s specialised walk for `isa`
    (kernel: a loaded treecomp.backends.arrays.ArraysKernel with native tables)."""
    if isa not in ISAS:
        raise ValueError(f"no specialised walk for isa={isa!r}; expected one of {sorted(ISAS)}")
    scalars, keep = kernel.pack_arrays()
    if not eligible(scalars, keep):
        raise ValueError("the specialised walk needs quantised heap trees with scalar leaves")
    A = keep
    cmux, acc_bits = int(scalars["q_cmux"]), int(scalars["acc_bits"])
    n = int(scalars["n_trees"])
    out = A["tree_out"]
    pre = _prelude(isa, acc_bits)
    units: dict[str, str] = {}
    calls = []
    for u, t0 in enumerate(range(0, n, TREES_PER_UNIT)):
        ts = range(t0, min(n, t0 + TREES_PER_UNIT))
        body = "\n".join(_tree_code(t, A, isa, acc_bits, cmux, bool(scalars["q_cnan"])) for t in ts)
        # trees in order; each adds into its output's column of class-major margins (cs > 0)
        seq = "\n".join(f"  tc_spec_tree_{t}(qb, gs, nb, a + {int(out[t])} * cs, lidx);" for t in ts)
        units[f"tc_spec_{u}.c"] = (
            f"{pre}\n{body}\n"
            f"TC_ATTR void tc_spec_unit_{u}(const uint8_t *qb, int64_t gs, int64_t nb, tc_acc *a, "
            f"int32_t *lidx, int64_t cs) {{\n{seq}\n}}\n")
        calls.append(u)
    decl = "\n".join(f"void tc_spec_unit_{u}(const uint8_t *, int64_t, int64_t, tc_acc *, int32_t *, int64_t);"
                     for u in calls)
    seq = "\n".join(f"  tc_spec_unit_{u}(qb, gs, nb, (tc_acc *)acc, lidx, cs);" for u in calls)
    at = "double" if acc_bits == 64 else "float"
    units["tc_spec_main.c"] = f"""/* treecomp: the specialised byte walk of a {n}-tree model ({isa}; arrays_spec.py) */
#define TC_PART 3
#include "kernels/arrays.c"
typedef {at} tc_acc;
{decl}
TC_EXPORT void {ENTRY}(const uint8_t *qb, int64_t gs, int64_t nb, void *acc, int32_t *lidx, int64_t cs) {{
{seq}
}}
"""
    return units


def build_path(kernel: Any, isa: str, progress: Callable[[str], None] | None = None) -> Path:
    """The shared library of `kernel`'s specialised walk for `isa`, from the cache (built on a
    miss)."""
    units = emit(kernel, isa)
    cc = toolchain.find_compiler()
    key = toolchain.cache_key("arrays-spec", isa, arrays_native.kernel_source_hash(),
                              toolchain.DEFAULT_CFLAGS, cc.version, sorted(units.items()))

    def build(p: Path) -> None:
        t0 = time.perf_counter()
        toolchain.build_shared_library(units, p, toolchain.DEFAULT_CFLAGS, compiler=cc,
                                       progress=progress or (lambda s: None))
        if progress:
            progress(f"built the specialised walk ({kernel.tables.meta['n_trees']} trees, {isa}) "
                     f"in {time.perf_counter() - t0:.1f} s")
    return toolchain.cached(key, ".so", build)


def attach(kernel: Any, progress: Callable[[str], None] | None = None) -> bool:
    """Build (or fetch) `kernel`'s specialised walk for the instruction set it runs and point
    its tc_tables at it. False (nothing attached) where none applies: another instruction set,
    or tables the walk does not take. CompileError without a C compiler."""
    if kernel.isa not in ISAS or kernel._struct is None:
        return False
    scalars, keep = kernel.pack_arrays()
    if not eligible(scalars, keep):
        return False
    path = build_path(kernel, kernel.isa, progress)
    try:
        lib = ctypes.CDLL(str(path))
        fn = ctypes.cast(getattr(lib, ENTRY), ctypes.c_void_p).value
    except (OSError, AttributeError) as exc:
        raise CompileError(f"the specialised walk {path} does not load: {exc}") from None
    kernel._spec_lib = lib  # kept alive with the tables that point into it
    kernel._struct.q_spec[ISAS[kernel.isa][0]] = fn
    return True
