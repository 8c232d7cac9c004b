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
path self-tested against the baseline before backend="auto" uses it. On aarch64 the same three
units hold the baseline, NEON ("neon": every ARMv8-A core) and SVE ("sve": Linux reports
HWCAP_SVE; Neoverse V1 / Graviton 3, V2, N2 ...) paths; elsewhere parts 1 and 2 compile to
nothing and the baseline path runs.
"""

from __future__ import annotations

import ctypes
import hashlib
import importlib.machinery
import os
import platform
import threading
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

from ... import platform, toolchain
from ...errors import CompileError

KERNEL_DIR = toolchain.RUNTIME_DIR / "kernels"
#: every file the kernel is built from (setup.py reads this tuple: keep it a literal)
KERNEL_FILES = ("arrays.c", "arrays_isa.c", "arrays_acc.c", "arrays_impl.c", "quant_impl.c",
                "quant_neon.c", "quant_sve.c", "shap.c", "shap_rows.c", "linear.c")
KERNEL_CFLAGS = tuple(toolchain.DEFAULT_CFLAGS)  # -O2: -O3 doubled the build for no measured gain
#: the kernel's translation units: TC_PART 0 (baseline + entry points), 1 (AVX2; aarch64: NEON),
#: 2 (AVX-512: F, BW, VL, VBMI; aarch64: SVE)
KERNEL_PARTS = 3
#: the prebuilt kernel's module name in the package (setup.py's extension)
PREBUILT_NAME = "_arrays_kernel"
ABI = 4

#: the C kernel's paths, index = TC_ISA_* in arrays.c: x86-64's, then aarch64's
NATIVE_ISAS = ("scalar", "avx2", "avx512", "neon", "sve")
#: the paths each architecture's kernel holds (arrays.c: x86-64's parts 1 and 2, aarch64's)
ARCH_ISAS = {"x86_64": ("scalar", "avx2", "avx512"), "aarch64": ("scalar", "neon", "sve")}


def arch_isas() -> tuple[str, ...]:
    """The C kernel's paths on this machine's architecture, whether or not this CPU runs them
    (the tests force each one it runs and skip the others by name); ("scalar",) elsewhere."""
    m = platform.machine().lower()
    return ARCH_ISAS.get({"amd64": "x86_64", "arm64": "aarch64"}.get(m, m), ("scalar",))


NODE32 = np.dtype([("ff", "<i4"), ("u", "<i4"), ("l", "<i4"), ("r", "<i4")])
NODE64 = np.dtype([("ff", "<i4"), ("cat", "<i4"), ("l", "<i4"), ("r", "<i4"), ("t", "<f8")])

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
class CTables(ctypes.Structure):
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
                          ("h_zq8", ctypes.c_void_p), ("h_zt", ctypes.c_void_p),
                          ("bv_catd", ctypes.c_void_p), ("bv_catk", ctypes.c_void_p),
                          ("bv_catw", ctypes.c_int64), ("bv_zl", ctypes.c_void_p),
                          ("bv_zlo", ctypes.c_void_p), ("bv_zcatd", ctypes.c_void_p),
                          ("bv_zcatk", ctypes.c_void_p), ("bv_zk0", ctypes.c_void_p),
                          ("bv_bias", ctypes.c_int32), ("h_ztd", ctypes.c_int32),
                          ("h_zr", ctypes.c_void_p)]

def kernel_parts() -> dict[str, str]:
    """The kernel's translation units (baseline + entry points, AVX2 or NEON, AVX-512 or SVE),
    each arrays.c compiled with its TC_PART: built in parallel."""
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
    pkg = Path(__file__).resolve().parents[2]  # treecomp/
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
    lib.tc_arrays_auto_mask.restype = ctypes.c_int32
    lib.tc_arrays_sizeof_tables.restype = ctypes.c_int32
    lib.tc_arrays_sizeof_node.restype = ctypes.c_int32
    lib.tc_arrays_sizeof_node.argtypes = [ctypes.c_int32]
    lib.tc_arrays_predict.restype = ctypes.c_int32
    lib.tc_arrays_predict.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int32,
                                      ctypes.c_int64, ctypes.c_void_p, ctypes.c_int32,
                                      ctypes.c_int32]
    if (lib.tc_arrays_abi() != ABI or lib.tc_arrays_sizeof_tables() != ctypes.sizeof(CTables)
            or lib.tc_arrays_sizeof_node(32) != NODE32.itemsize
            or lib.tc_arrays_sizeof_node(64) != NODE64.itemsize):
        raise CompileError("the arrays kernel does not match treecomp/backends/arrays/native.py "
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
    if not platform.native_ok():
        PREBUILT_ERROR = f"not loaded on an unverified platform ({platform.system()} {platform.machine()})"
        return None
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


def have_llvm() -> bool:
    """Whether the compiler-free llvmlite walker works here."""
    from .walkers import have_llvm  # the compiler-free walkers
    return have_llvm()


def kernel_origin() -> str | None:
    """Load the kernel if needed and say where it came from: "prebuilt", "built", or None
    (no kernel: no matching prebuilt one and no C compiler)."""
    try:
        native_library()
    except CompileError:
        return None
    return KERNEL_ORIGIN


def native_isas() -> list[str]:
    """The C kernel's paths this CPU runs (NATIVE_ISAS order; none without the kernel)."""
    try:
        mask = native_library().tc_arrays_isa_mask()
    except CompileError:
        return []
    return [n for i, n in enumerate(NATIVE_ISAS) if mask >> i & 1]


def auto_isas() -> list[str]:
    """The C kernel's paths isa="auto" (and an arrays .so's own choice) may pick on this CPU
    (tc_arrays_auto_mask): native_isas() less those that gain nothing here. "sve" only where
    SVE's vectors hold 32 bytes or more: its heap walk (quant_sve.c) runs there, which
    bench/arm_cost.py counts cheaper than "neon" on Neoverse V1; at 128 bits the SVE unit is the
    NEON code compiled with +sve, and auto takes "neon" (docs/benchmarks.md, "ARM")."""
    try:
        mask = native_library().tc_arrays_auto_mask()
    except CompileError:
        return []
    return [n for i, n in enumerate(NATIVE_ISAS) if mask >> i & 1]


# -- the kernel as a static archive (the arrays backend's self-contained .so: so.py) ------
#: the prebuilt kernel's objects as a static archive in the package (setup.py, beside the .so)
ARCHIVE_NAME = "_arrays_kernel.a"
#: where the archive linked into the last .so came from: "prebuilt" or "built" (None: not yet)
ARCHIVE_ORIGIN: str | None = None
#: why the package's archive was not used (None: used, or not tried yet)
ARCHIVE_ERROR: str | None = None
_ARCHIVE: Path | None = None


def prebuilt_archive_path() -> Path | None:
    p = Path(__file__).resolve().parents[2] / ARCHIVE_NAME  # in treecomp/
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
