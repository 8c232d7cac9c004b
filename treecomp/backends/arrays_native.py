"""The arrays backend's native kernel: where it comes from, which instruction set runs, and the
self-test that guards the vector paths (split from treecomp.backends.arrays, which re-exports
every name here that other modules and the tests use).

Where the kernel comes from (KERNEL_ORIGIN):

- "prebuilt": the package's own copy, compiled at install time by setup.py from
  runtime/kernels/*.c with KERNEL_CFLAGS (``treecomp/_arrays_kernel<EXT_SUFFIX>``). It is used
  only when the source hash and flags it embeds (tc_arrays_source_hash /
  tc_arrays_build_cflags, set through -DTC_SOURCE_HASH / -DTC_BUILD_CFLAGS) equal
  kernel_source_hash() and KERNEL_CFLAGS here: no compiler, no build and no cache at run time.
- "built": otherwise (an editable install whose C sources changed since the build, a source
  tree that was never built, a prebuilt file that does not load): the system C compiler builds
  it on first use, once per machine and compiler (toolchain's content-addressed cache), 20-60 s,
  reported through the `progress` callback (or toolchain.DEFAULT_PROGRESS: the CLI's).
- None: not loaded yet, or no kernel at all (then CompileError, and the backend runs the same
  tables through the llvmlite or numpy walkers of treecomp.backends.arrays).

Either way the kernel is one library for any x86-64 (baseline, AVX2 and AVX-512 paths in three
translation units, TC_PART 0/1/2) chosen per call at run time (tc_arrays_isa_mask; "avx512"
needs AVX-512 F, BW, VL and VBMI, else the CPU gets the AVX2 path), each vector
path self-tested against the baseline before backend="auto" uses it; on other architectures
(aarch64) parts 1 and 2 compile to nothing and the baseline path runs.
"""

from __future__ import annotations

import ctypes
import hashlib
import importlib.machinery
import os
import threading
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

from .. import toolchain
from ..errors import CompileError
from ..ir import Forest, Tree, head_of

KERNEL_DIR = toolchain.RUNTIME_DIR / "kernels"
#: every file the kernel is built from (setup.py reads this tuple: keep it a literal)
KERNEL_FILES = ("arrays.c", "arrays_isa.c", "arrays_acc.c", "arrays_impl.c", "quant_impl.c",
                "shap.c", "shap_rows.c", "linear.c")
KERNEL_CFLAGS = tuple(toolchain.DEFAULT_CFLAGS)  # -O2: -O3 doubled the build for no measured gain
#: the kernel's translation units: TC_PART 0 (baseline + entry points), 1 (AVX2), 2 (AVX-512:
#: F, BW, VL, VBMI)
KERNEL_PARTS = 3
#: the prebuilt kernel's module name in the package (setup.py's extension)
PREBUILT_NAME = "_arrays_kernel"
ABI = 4

_NATIVE_ISAS = ("scalar", "avx2", "avx512")   # index = TC_ISA_* in arrays.c
_NODE32 = np.dtype([("ff", "<i4"), ("u", "<i4"), ("l", "<i4"), ("r", "<i4")])
_NODE64 = np.dtype([("ff", "<i4"), ("cat", "<i4"), ("l", "<i4"), ("r", "<i4"), ("t", "<f8")])

_LIB: Any = None
_LIB_LOCK = threading.Lock()
_ARCHIVE_LOCK = threading.Lock()


def _after_fork_in_child() -> None:
    """A lock another parent thread held at a fork would never be released in the child."""
    global _LIB_LOCK, _ARCHIVE_LOCK
    _LIB_LOCK, _ARCHIVE_LOCK = threading.Lock(), threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
#: where the loaded kernel came from: "prebuilt" (the package's), "built" (the toolchain's, on
#: first use), None (not loaded yet, or no kernel); its file in KERNEL_PATH
KERNEL_ORIGIN: str | None = None
KERNEL_PATH: Path | None = None
#: why the package's prebuilt kernel was not used (None: used, or not tried yet)
PREBUILT_ERROR: str | None = None


# -- the native kernel (built once per machine) -------------------------------------------------
class _Tables(ctypes.Structure):
    _fields_ = [("n_trees", ctypes.c_int64), ("n_features", ctypes.c_int32),
                ("n_outputs", ctypes.c_int32), ("x_bits", ctypes.c_int32),
                ("acc_bits", ctypes.c_int32), ("strict", ctypes.c_int32),
                ("average", ctypes.c_int32), ("naive", ctypes.c_int32),
                ("block_rows", ctypes.c_int32), ("cat_rule", ctypes.c_int32)] + [
        (n, ctypes.c_void_p) for n in (
            "tree_layout", "tree_depth", "tree_node", "tree_leaf", "tree_out", "tree_width",
            "h_ff", "h_thr", "c_nodes", "cat_words", "cat_off", "cat_nbits", "cat_other_left",
            "leaf_values", "base")] + [
        ("quant", ctypes.c_int32), ("q_ncols", ctypes.c_int32)] + [
        (n, ctypes.c_void_p) for n in (
            "q_feat", "q_nanc", "q_off", "q_len", "q_count", "q_src", "q_thr", "h_qcol", "h_qthr",
            "q_leafb", "q_leafb_off")] + [("q_w1", ctypes.c_int32), ("bitvec", ctypes.c_int32)] + [
        (n, ctypes.c_void_p) for n in ("bv_nint", "bv_lo1", "bv_hi", "bv_leaf", "q_kind", "h_qcat",
                                       "q_cat")] + [  # the deep path of compact trees
        (n, ctypes.c_void_p) for n in (
            "d_recs", "d_topd", "d_topoff", "d_exitoff", "d_leaf0", "d_top_ff", "d_top_tk",
            "d_exit")] + [("d_nint", ctypes.c_int64), ("d_nanr", ctypes.c_void_p),
                          ("q_thr32", ctypes.c_void_p), ("q_lvl", ctypes.c_void_p),
                          ("h_qcix", ctypes.c_void_p), ("q_cmux", ctypes.c_int32),
                          ("q_cnan", ctypes.c_int32), ("h_qobl", ctypes.c_void_p),
                          ("h_qc7", ctypes.c_void_p), ("bv_lmask", ctypes.c_void_p),
                          ("c_plain", ctypes.c_int32), ("h_zq", ctypes.c_void_p),
                          ("h_zq8", ctypes.c_void_p)]

def kernel_parts() -> dict[str, str]:
    """The kernel's translation units (baseline + entry points, AVX2, AVX-512), each arrays.c
    compiled with its TC_PART: built in parallel."""
    return {f"tc_arrays_{i}.c": f'#define TC_PART {i}\n#include "kernels/arrays.c"\n'
            for i in range(KERNEL_PARTS)}


def kernel_source_hash() -> str:
    """sha256 over KERNEL_FILES (name, NUL, bytes): setup.py embeds the same in the prebuilt
    kernel (its _kernel_source_hash), so a kernel built from other sources is never used."""
    h = hashlib.sha256()
    for name in KERNEL_FILES:
        h.update(name.encode() + b"\0" + (KERNEL_DIR / name).read_bytes())
    return h.hexdigest()


def prebuilt_kernel_path() -> Path | None:
    """The package's prebuilt kernel file, if the package has one (see setup.py)."""
    pkg = Path(__file__).resolve().parent.parent
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        p = pkg / f"{PREBUILT_NAME}{suffix}"
        if p.is_file():
            return p
    return None


def _declare(lib: Any) -> Any:
    """Set the exported functions' signatures; CompileError if the kernel's ABI or struct
    layouts differ from the ctypes / numpy mirrors here."""
    lib.tc_arrays_abi.restype = ctypes.c_int32
    lib.tc_arrays_isa_mask.restype = ctypes.c_int32
    lib.tc_arrays_sizeof_tables.restype = ctypes.c_int32
    lib.tc_arrays_sizeof_node.restype = ctypes.c_int32
    lib.tc_arrays_sizeof_node.argtypes = [ctypes.c_int32]
    lib.tc_arrays_predict.restype = ctypes.c_int32
    lib.tc_arrays_predict.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int32,
                                      ctypes.c_int64, ctypes.c_void_p, ctypes.c_int32,
                                      ctypes.c_int32]
    if (lib.tc_arrays_abi() != ABI or lib.tc_arrays_sizeof_tables() != ctypes.sizeof(_Tables)
            or lib.tc_arrays_sizeof_node(32) != _NODE32.itemsize
            or lib.tc_arrays_sizeof_node(64) != _NODE64.itemsize):
        raise CompileError("the arrays kernel does not match treecomp/backends/arrays_native.py "
                           "(struct layout mismatch)")
    return lib


def _embedded(lib: Any, name: str) -> str:
    fn = getattr(lib, name, None)  # AttributeError: a kernel from before the embedded hash
    if fn is None:
        return ""
    fn.restype = ctypes.c_char_p
    return (fn() or b"").decode("ascii", "replace")


def _load_prebuilt() -> tuple[Any, Path] | None:
    """The package's prebuilt kernel when it was built from these sources with these flags,
    else None with PREBUILT_ERROR saying why."""
    global PREBUILT_ERROR
    path = prebuilt_kernel_path()
    if path is None:
        PREBUILT_ERROR = "the package has no prebuilt kernel (a source tree that was not built)"
        return None
    try:
        lib = ctypes.CDLL(str(path))
        got, flags = _embedded(lib, "tc_arrays_source_hash"), _embedded(lib, "tc_arrays_build_cflags")
        if got != kernel_source_hash():
            PREBUILT_ERROR = (f"{path.name} was built from other kernel sources (runtime/kernels "
                              "changed since the install)")
            return None
        if flags != " ".join(KERNEL_CFLAGS):
            PREBUILT_ERROR = f"{path.name} was built with other flags ({flags!r})"
            return None
        return _declare(lib), path
    except (OSError, CompileError) as exc:
        PREBUILT_ERROR = f"{path.name} does not load: {exc}"
        return None


def _report(progress: Callable[[str], None] | None) -> Callable[[str], None] | None:
    return progress or toolchain.DEFAULT_PROGRESS


def native_library(progress: Callable[[str], None] | None = None):
    """The compiled kernel (ctypes.CDLL): the package's prebuilt one when it matches these
    sources (KERNEL_ORIGIN "prebuilt"), else built on first use and cached per machine
    ("built"; cache key: kernel source hash + compiler identity + flags), the build reported
    through `progress` (default toolchain.DEFAULT_PROGRESS). Raises CompileError without
    either (no prebuilt kernel that matches and no working C compiler).
    """
    global _LIB, KERNEL_ORIGIN, KERNEL_PATH
    lib = _LIB
    if lib is not None:  # loaded: no lock on this per-kernel path
        return lib
    with _LIB_LOCK:
        if _LIB is not None:
            return _LIB
        pre = _load_prebuilt()
        if pre is not None:
            _LIB, KERNEL_PATH = pre
            KERNEL_ORIGIN = "prebuilt"
            return _LIB
        cc = toolchain.find_compiler()
        key = toolchain.cache_key("arrays-kernel", kernel_source_hash(), KERNEL_CFLAGS, cc.key)
        parts = kernel_parts()
        report = _report(progress)

        def build(p: Path) -> None:  # only on a cache miss
            t0 = time.perf_counter()
            if report:
                report(f"building the arrays kernel (once per machine, ~30 s)... ({PREBUILT_ERROR})")
            done = []

            def part(name: str) -> None:
                done.append(name)
                if report:
                    report(f"arrays kernel: compiled {len(done)}/{len(parts)} parts")
            toolchain.build_shared_library(parts, p, KERNEL_CFLAGS, compiler=cc, progress=part)
            if report:
                report(f"built the arrays kernel in {time.perf_counter() - t0:.1f} s")
        path = toolchain.cached(key, ".so", build)
        lib = _declare(ctypes.CDLL(str(path)))
        _LIB, KERNEL_PATH, KERNEL_ORIGIN = lib, path, "built"
        return lib


def _have_llvm() -> bool:
    from .arrays_walkers import have_llvm  # the compiler-free walkers
    return have_llvm()


def kernel_origin() -> str | None:
    """Load the kernel if needed and say where it came from: "prebuilt", "built", or None
    (no kernel: no matching prebuilt one and no C compiler)."""
    try:
        native_library()
    except CompileError:
        return None
    return KERNEL_ORIGIN


def supported_isas() -> list[str]:
    """The C-kernel paths this machine can run (none without the kernel: no prebuilt one that
    matches and no C compiler), then "llvm" (the compiler-free JIT walker) when llvmlite works,
    then "numpy"."""
    return _native_isas() + (["llvm"] if _have_llvm() else []) + ["numpy"]


def _native_isas() -> list[str]:
    try:
        mask = native_library().tc_arrays_isa_mask()
    except CompileError:
        return []
    return [n for i, n in enumerate(_NATIVE_ISAS) if mask >> i & 1]


_SELF_TEST: dict[str, bool] = {}


def _self_test_forest(comparison: str, acc: str) -> Forest:
    """Heap trees of depth 0..9 (every lookup strategy of the vector walks) plus padding."""
    rng = np.random.default_rng(1234)
    trees = []
    for depth in range(10):
        n_int = (1 << depth) - 1
        n = 2 * n_int + 1
        left = np.full(n, -1)
        left[:n_int] = 2 * np.arange(n_int) + 1
        right = np.where(left >= 0, left + 1, -1)
        feat = np.where(left >= 0, rng.integers(0, 7, n), -1)
        val = np.where(left >= 0, 0.0, rng.normal(size=n))
        trees.append(Tree(left=left, right=right, feature=feat, threshold=rng.normal(size=n).round(1),
                          default_left=rng.random(n) < 0.5, value=val))
    return Forest(trees=tuple(trees), n_features=7, n_outputs=1, tree_output=np.zeros(len(trees)),
                  base_score=[0.5], comparison=comparison, accumulate_dtype=acc)


def _self_test(isa: str) -> bool:
    """Does the `isa` path agree bit for bit with the baseline path on this CPU?

    Run once per process before backend="auto" picks a vector path: a safety net against a
    miscompiled or CPU-specific vector path ever answering wrongly (the AVX-512 build could not
    be run on the machine it was developed on). Every layout with a vector kernel is checked:
    the float heap walk, the quantised heap walk and the interval walk, in blocks of 96 and 256
    rows (short and whole 32- and 64-row groups; the AVX-512 sweep's four groups at once).
    """
    ok = _SELF_TEST.get(isa)
    if ok is None:
        from . import arrays
        rng = np.random.default_rng(99)
        X = rng.normal(size=(256, 7)).round(1).astype(np.float32)
        X[rng.random(X.shape) < 0.05] = np.nan
        X[rng.random(X.shape) < 0.02] = np.inf
        ok = True
        for cmp_, acc in (("<", "float32"), ("<=", "float64")):
            f = _self_test_forest(cmp_, acc)
            for layout, depth in (("heap", 9), ("quant", 8), ("bitvec", 7)):
                g = f.replace(trees=f.trees[:depth + 1], tree_output=f.tree_output[:depth + 1])
                tables = arrays.flatten(g, layout, 9)
                for block in (96, 256):  # whole and short row groups (32 or 64 rows)
                    outs = []
                    for which in (isa, "scalar"):
                        k = arrays.ArraysKernel(tables, head_of(g), isa=which, block_rows=block)
                        out = np.empty((len(X), 1), np.dtype(acc))
                        k.run(X, out)
                        outs.append(out)
                    ok &= bool(np.array_equal(outs[0], outs[1]))
        if not ok:
            import warnings
            warnings.warn(f"treecomp arrays kernel: the {isa} path disagrees with the baseline "
                          "path on this CPU; backend='auto' will not use it (please report)")
        _SELF_TEST[isa] = ok
    return ok


def resolve_isa(isa: str, strict: bool = True) -> str:
    """The path `isa` runs on here; "auto" is the best C-kernel path whose self-test passes,
    or without the C kernel (no prebuilt one that matches, no C compiler) the llvmlite walker
    (numpy if even llvmlite fails)."""
    if isa == "numpy":  # needs no kernel: don't load (or build) one
        return "numpy"
    native = _native_isas()
    if isa == "auto":
        if not native:
            return "llvm" if _have_llvm() else "numpy"
        for cand in reversed(native[1:]):
            if _self_test(cand):
                return cand
        return "scalar"
    have = supported_isas() if isa in ("llvm", "numpy") else native + ["numpy"]
    if isa in have:
        return isa
    if not strict:  # a loaded artifact asked for a path this machine lacks: use the best one
        return resolve_isa("auto")
    if not native and isa in _NATIVE_ISAS:
        raise CompileError(f"isa={isa!r} needs the C arrays kernel: no prebuilt one "
                           f"({PREBUILT_ERROR}) and no C compiler to build it; use isa='auto' "
                           f"(the llvmlite walker), reinstall treecomp or install gcc/clang")
    raise CompileError(f"isa={isa!r} is not available on this machine (CPU or toolchain); "
                       f"available: {', '.join(supported_isas())}")


# -- the kernel as a static archive (the arrays backend's self-contained .so: arrays_so.py) ------
#: the prebuilt kernel's objects as a static archive in the package (setup.py, beside the .so)
ARCHIVE_NAME = "_arrays_kernel.a"
#: where the archive linked into the last .so came from: "prebuilt" or "built" (None: not yet)
ARCHIVE_ORIGIN: str | None = None
#: why the package's archive was not used (None: used, or not tried yet)
ARCHIVE_ERROR: str | None = None
_ARCHIVE: Path | None = None


def prebuilt_archive_path() -> Path | None:
    p = Path(__file__).resolve().parent.parent / ARCHIVE_NAME
    return p if p.is_file() else None


def _archive_matches(path: Path) -> str | None:
    """None when the archive at `path` was built from these kernel sources with these flags
    (its part 0 holds both as the strings tc_arrays_source_hash / tc_arrays_build_cflags
    return), else why not."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        return f"{path.name} cannot be read: {exc}"
    if not data.startswith(b"!<arch>\n"):
        return f"{path.name} is not a static archive"
    if kernel_source_hash().encode() not in data:
        return f"{path.name} was built from other kernel sources (runtime/kernels changed since the install)"
    if b"\0" + " ".join(KERNEL_CFLAGS).encode() + b"\0" not in data:  # exactly these flags
        return f"{path.name} was built with other flags"
    return None


def kernel_archive(progress: Callable[[str], None] | None = None) -> Path:
    """The kernel as a static archive of position-independent objects, to link into a model's
    .so: the package's (ARCHIVE_ORIGIN "prebuilt") when it was built from these sources with
    KERNEL_CFLAGS, else built once per machine and compiler into the cache ("built", 20-60 s,
    reported through `progress`). CompileError without a C compiler (and archiver)."""
    global _ARCHIVE, ARCHIVE_ORIGIN, ARCHIVE_ERROR
    with _ARCHIVE_LOCK:  # its own: an archive build must not stall kernels being loaded
        if _ARCHIVE is not None and _ARCHIVE.is_file():
            return _ARCHIVE
        pre = prebuilt_archive_path()
        why = "the package has no prebuilt kernel archive" if pre is None else _archive_matches(pre)
        if why is None:
            _ARCHIVE, ARCHIVE_ORIGIN, ARCHIVE_ERROR = pre, "prebuilt", None
            return pre
        ARCHIVE_ERROR = why
        cc = toolchain.find_compiler()
        key = toolchain.cache_key("arrays-kernel-archive", kernel_source_hash(), KERNEL_CFLAGS,
                                  cc.key)
        # the hash and flags embedded as in the package's build, so the cached archive passes
        # the same check
        flags = (*KERNEL_CFLAGS, f'-DTC_SOURCE_HASH="{kernel_source_hash()}"',
                 f'-DTC_BUILD_CFLAGS="{" ".join(KERNEL_CFLAGS)}"')
        parts = kernel_parts()
        report = _report(progress)

        def build(p: Path) -> None:  # only on a cache miss
            t0 = time.perf_counter()
            if report:
                report(f"building the arrays kernel archive (once per machine, ~30 s)... ({why})")
            toolchain.build_static_archive(parts, p, flags, compiler=cc)
            if report:
                report(f"built the arrays kernel archive in {time.perf_counter() - t0:.1f} s")
        path = toolchain.cached(key, ".a", build)
        _ARCHIVE, ARCHIVE_ORIGIN = path, "built"
        return path
