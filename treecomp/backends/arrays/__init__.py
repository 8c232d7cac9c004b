"""The arrays backend: a forest becomes flat tables, walked by a kernel compiled once per machine.

Its parts, bottom to top:

- tables: flattening a Forest into the tables (the layouts heap / quant / bitvec / compact /
  naive) and validating every index before native code sees it;
- derived: the tables derived at load time (the byte walks' columns, the interval walk's leaf
  intervals, the deep path's records, the few-row walks' slot bytes); only their sorts'
  results are stored, checked to be exactly the sorts' (distinct_thresholds, sort_order);
- format: the versioned ``.tc`` file (MAGIC + JSON header + raw arrays, a linear section);
- native: the native kernel (runtime/kernels): where it comes from (the package's prebuilt
  copy or a first-use build), its ctypes mirror of tc_tables, the paths this CPU runs, the
  static archive a model's ``.so`` links;
- vec: the byte walks as LLVM vector IR, JIT-compiled by llvmlite (isa "llvm-vec": the
  compiler-free fast path);
- walkers: the compiler-free walkers of the same tables (llvmlite JIT, numpy);
- so: a model as one self-contained shared library (the tables + the kernel archive);
- kernel: ArraysKernel (the loaded tables, packed for the native kernel; run / save), the
  self-test that guards the vector paths and the choice of path (resolve_isa), and the
  backend interface every backend has: build(forest, **options) -> kernel, load_bytes(data)
  -> kernel (a ``.tc``, as bytes or a read-only mapping: LOADS_MAPPED), check_library (an
  arrays ``.so``), NAME / KIND / MAGIC / DEFAULTS.
"""

from .kernel import (DEFAULTS, ISAS, KIND, LOADS_MAPPED, MAGIC, NAME, ArraysKernel, build,  # noqa: F401
                     check_library, load_bytes, options, resolve_isa, supported_isas)
