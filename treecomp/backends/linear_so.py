"""A model with linear leaves (LightGBM linear_tree) as ONE self-contained shared library, from
any backend (``treecomp compile -o model.so``, ``Predictor.save("model.so")``; treecomp.linear).

The library honours runtime/treecomp.h like any other: treecomp_predict returns the full
margins (TREECOMP_RAW) or the library's inverse link (TREECOMP_TRANSFORM). It links:

- the leaf-id kernel of interp.leaf_id_forest(forest, node_index=True), built by the chosen
  backend exactly as for its own .so (the c backend's generated units, the arrays backend's
  unit + kernel archive, the llvm backend's object code), with its treecomp.h entry points
  renamed (ENTRY_PREFIX: a #define before each C unit, llvm._main_text's prefix for LLVM
  objects), so they stay local to the library;
- the linear section (linear_section.section_arrays) as a blob pulled in with .incbin (a C string
  literal off ELF), and, when built with ir=True, the model's IR file (treecomp_ir);
- a generated unit: the treecomp.h getters with the model's own Head, and treecomp_predict:
  per block of rows, the renamed leaf kernel writes each row's leaf per tree (node indices,
  float64), float32 input is widened to float64 (exact, as LightGBM reads it), and
  runtime/kernels/linear.c's tc_linear_margins (compiled into this unit, static, with the
  unit's flags: -ffp-contract=off, so no fused multiply-add) adds base, then each tree's
  linear leaf in tree order; then the average and the c backend's transform code.

Only ``treecomp_*`` is exported (a version script), so two such libraries never bind to each
other's leaf kernels. Cached by content (every source, blob and object hashed).
"""

from __future__ import annotations

import hashlib
import tempfile
from pathlib import Path
from typing import Any, Callable

import numpy as np

from ..version import __version__
from .. import interp, outputs, toolchain
from ..ir import LINEAR_ZERO, Forest, Head, head_of
from .linear_section import section_arrays
from ..native import BASE_SYMBOL
from ..platform import incbin

#: the prefix the leaf kernel's entry points take inside the library
ENTRY_PREFIX = "tcl_"
#: every symbol treecomp.h (and treecomp_base) names: renamed in the leaf kernel's units
ENTRY_SYMBOLS = ("treecomp_abi_version", "treecomp_version", "treecomp_digest", "treecomp_backend",
                 "treecomp_n_features", "treecomp_n_outputs", "treecomp_out_dtype",
                 "treecomp_n_classes", "treecomp_meta_json", "treecomp_predict",
                 "treecomp_ir_size", "treecomp_ir", BASE_SYMBOL,
                 # an arrays leaf kernel's tables are not this library's model: not exported (the
                 # loader checks these of a plain arrays library, arrays.kernel.check_library)
                 "treecomp_arrays_tc_size", "treecomp_arrays_tc", "treecomp_arrays_model")
EXPORTS = ("treecomp_*",)
#: rows per block: the leaves of a block (rows x trees doubles) stay in L2 for 500 trees
BLOCK_ROWS = 64


def renamed(unit: str) -> str:
    """A C unit of a leaf kernel with its entry points renamed (ENTRY_PREFIX)."""
    return "".join(f"#define {s} {ENTRY_PREFIX}{s}\n" for s in ENTRY_SYMBOLS) + unit


def emit_wrapper(head: Head, section: dict[str, np.ndarray], average: bool, backend: str,
                 ir: bytes | None) -> tuple[str, bytes]:
    """The generated unit and its blob (the linear section, then the IR file if any) of a
    model of `head` (its linear section and average: linear_section.section_arrays, Forest.average)."""
    from . import c as cb
    from .arrays.so import pack_blob
    n_trees = head.n_trees
    arrays: dict[str, np.ndarray] = dict(section)
    if ir is not None:
        arrays["ir"] = np.frombuffer(ir, np.uint8)
    blob, offs = pack_blob(arrays)
    p = {k: f"TCL_P({offs[k]})" for k in offs}
    # linear_leaves: the library's backend names its leaf kernel, whose own checks (an arrays
    # library's tables: arrays.kernel.check_library) do not apply to this library
    meta = head.to_json(backend=backend, treecomp_version=__version__, linear_leaves=True)
    average = (f"    for (int64_t k = 0; k < nb * TC_NO; ++k) ab[k] /= (tc_acc){n_trees};\n"
               if average else "")
    transform = cb.transform_code(head)
    src = f"""/* treecomp {__version__}: a model with linear leaves ({n_trees} trees): the {backend}
 * backend's leaf-id kernel (entry points renamed {ENTRY_PREFIX}treecomp_*), then tc_linear_margins. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include "treecomp.h"
#define TC_EXPORT static
#include "kernels/linear.c"
#undef TC_EXPORT
#define TC_EXPORT __attribute__((visibility("default")))

typedef double tc_acc;
#define TC_NF {head.n_features}
#define TC_NO {head.n_outputs}
#define TCL_NT {n_trees}
#define TCL_BLOCK {BLOCK_ROWS}

int32_t {ENTRY_PREFIX}treecomp_predict(const void *X, int32_t x_dtype, int64_t n_rows, void *out,
                                  uint32_t flags);

{cb.blob_code('tcl_blob', 'linear.bin', blob, incbin())}
#define TCL_P(off) ((const void *)(tcl_blob + (off)))
{"" if ir is None else cb.ir_code(len(ir), p["ir"])}
TC_EXPORT int32_t treecomp_abi_version(void) {{ return TREECOMP_ABI_VERSION; }}
TC_EXPORT const char *treecomp_version(void) {{ return {cb.c_string(__version__)}; }}
TC_EXPORT const char *treecomp_digest(void) {{ return {cb.c_string(head.digest)}; }}
TC_EXPORT const char *treecomp_backend(void) {{ return {cb.c_string(backend)}; }}
TC_EXPORT int32_t treecomp_n_features(void) {{ return TC_NF; }}
TC_EXPORT int32_t treecomp_n_outputs(void) {{ return TC_NO; }}
TC_EXPORT int32_t treecomp_out_dtype(void) {{ return 64; }}
TC_EXPORT int32_t treecomp_n_classes(void) {{ return {sum(head.n_classes)}; }}
TC_EXPORT const char *treecomp_meta_json(void) {{ return {cb.c_string(meta)}; }}

TC_EXPORT int32_t treecomp_predict(const void *X, int32_t x_dtype, int64_t n_rows, void *out,
                                   uint32_t flags) {{
  if ((x_dtype != 32 && x_dtype != 64) || n_rows < 0 || (n_rows > 0 && (!X || !out)) || (flags & ~{outputs.accepted_flags(head)}u))
    return TREECOMP_EINVAL;
  if (n_rows == 0) return TREECOMP_OK;
  const int64_t B = n_rows < TCL_BLOCK ? n_rows : TCL_BLOCK;
  double *lv = (double *)malloc(sizeof(double) * (size_t)(B * TCL_NT));
  double *xd = x_dtype == 64 ? 0 : (double *)malloc(sizeof(double) * (size_t)(B * TC_NF));
  int32_t rc = TREECOMP_OK;
  if (!lv || (x_dtype != 64 && !xd)) rc = TREECOMP_ENOMEM;
  for (int64_t r0 = 0; rc == TREECOMP_OK && r0 < n_rows; r0 += TCL_BLOCK) {{
    const int64_t nb = n_rows - r0 < TCL_BLOCK ? n_rows - r0 : TCL_BLOCK;
    const char *xb = (const char *)X + r0 * TC_NF * (x_dtype / 8);
    rc = {ENTRY_PREFIX}treecomp_predict(xb, x_dtype, nb, lv, TREECOMP_RAW);
    if (rc != TREECOMP_OK) break;
    const double *x = (const double *)xb;
    if (xd) {{  /* float32 rows, widened exactly */
      const float *s = (const float *)xb;
      for (int64_t k = 0; k < nb * TC_NF; ++k) xd[k] = (double)s[k];
      x = xd;
    }}
    tc_acc *ab = (tc_acc *)out + r0 * TC_NO;
    if (tc_linear_margins(x, nb, TC_NF, lv, TCL_NT, (const int64_t *){p["node0"]},
                          (const int32_t *){p["tree_out"]}, TC_NO, (const double *){p["base"]},
                          (const double *){p["plain"]}, (const double *){p["const"]},
                          (const int64_t *){p["ptr"]}, (const int32_t *){p["feat"]},
                          (const double *){p["coeff"]}, {cb.c_literal(LINEAR_ZERO, "double")}, ab) != 0) {{
      rc = TREECOMP_EINVAL;  /* a leaf index outside its tree: a corrupt library */
      break;
    }}
{average}    if (flags & TREECOMP_TRANSFORM) {{
      for (int64_t r = 0; r < nb; ++r) {{
        tc_acc *a = ab + r * TC_NO; (void)a;
        {transform}
      }}
    }}
  }}
  free(lv);
  free(xd);
  return rc;
}}
"""
    return src, blob


def build_path(forest: Forest, backend: str, options: dict[str, Any],
               progress: Callable[[str], None] | None = None) -> Path:
    """The .so of `forest` (linear leaves) with `backend`'s leaf kernel, from the cache or built
    (options as for the backend; ir=True carries the model's IR)."""
    leaf = interp.leaf_id_forest(forest, node_index=True)
    opts = {k: v for k, v in options.items() if k != "ir"}  # the leaf kernel carries no IR
    ir = forest.to_bytes() if options.get("ir") else None
    head, section = head_of(forest, linear_ok=True), section_arrays(forest)
    if backend == "c":
        from . import c
        cc = toolchain.find_compiler()
        copts = c.options(**opts)
        return _link(head, section, forest.average, backend, ir, progress,
                     {n: renamed(t) for n, t in c.emit(leaf, copts).items()}, {}, [], [],
                     c.cflags(copts, cc), [c.host_cpu() if copts["native"] else ""])
    if backend == "arrays":
        from .arrays.kernel import so_kernel
        return from_arrays_kernel(so_kernel(leaf, **opts), head, section,
                                  forest.average, ir, progress)
    if backend == "llvm":
        from . import llvm
        objects = llvm.compile_objects(leaf, progress, entry_prefix=ENTRY_PREFIX, **opts)
        return _link(head, section, forest.average, backend, ir, progress, {}, {}, [], objects,
                     toolchain.DEFAULT_CFLAGS, [])
    raise ValueError(f"unknown backend {backend!r}")


def from_arrays_kernel(leaves: Any, head: Head, section: dict[str, np.ndarray], average: bool,
                       ir: bytes | None, progress: Callable[[str], None] | None = None) -> Path:
    """The .so around an arrays leaf kernel (an ArraysKernel: built, or loaded from a .tc with
    its linear section)."""
    from .arrays import native as arrays_native, so as arrays_so
    src, blob = arrays_so.emit(leaves)
    return _link(head, section, average, "arrays", ir, progress, {"model.c": renamed(src)},
                 {"blob.bin": blob}, [arrays_native.kernel_archive(progress)], [],
                 arrays_native.KERNEL_CFLAGS,
                 [arrays_native.kernel_source_hash(), arrays_native.ARCHIVE_ORIGIN])


def _link(head: Head, section: dict[str, np.ndarray], average: bool, backend: str,
          ir: bytes | None, progress: Callable[[str], None] | None, sources: dict[str, str],
          files: dict[str, bytes], archives: list[Path], objects: list[bytes], flags: Any,
          key_parts: list[Any]) -> Path:
    """The leaf kernel's renamed units / objects / archives with the generated unit, linked
    (cached by the hash of everything that goes in)."""
    cc = toolchain.find_compiler()
    sources["linear.c"], files["linear.bin"] = emit_wrapper(head, section, average, backend, ir)
    h = hashlib.sha256()
    for part in [*(n.encode() + b"\0" + t.encode() for n, t in sorted(sources.items())),
                 *(n.encode() + b"\0" + b for n, b in sorted(files.items())), *objects]:
        h.update(hashlib.sha256(part).digest())
    key = toolchain.cache_key("linear-so", backend, h.hexdigest(), tuple(flags), cc.key,
                              *key_parts)

    def write(path: Path) -> None:
        if progress:
            progress(f"linking the linear-leaf .so ({backend} leaf kernel, {head.n_trees} trees)")
        with tempfile.TemporaryDirectory(prefix="treecomp-linear-") as tmp:
            objs = []
            for u, o in enumerate(objects):
                objs.append(Path(tmp) / f"part{u}.o")
                objs[-1].write_bytes(o)
            toolchain.link_shared_library(sources, path, [*objs, *archives], flags,
                                          exports=EXPORTS, files=files, compiler=cc, seal=True)
    return toolchain.cached(key, ".so", write)
