"""The bottom layer of native code: the treecomp.h ABI, loading a shared library safely, and
the small-batch CPython entry. It knows nothing of backends or Predictors.

- The ABI (runtime/treecomp.h): ABI_VERSION, the predict flags (TREECOMP_RAW /
  TREECOMP_TRANSFORM, PAIRS), BASE_SYMBOL, what the return codes mean (kernel_error).
- Loading a shared library: verify_artifact (ELF extents and the seal the build wrote, before
  any dlopen: a damaged library can kill the process inside the dynamic loader), SharedLibrary
  (a kernel honouring treecomp.h in a .so: metadata checked against its exported shape
  functions, the base margins written, dlclose when dropped), set_base.
- The small-batch entry (runtime/pyentry.c): a CPython extension that checks a small batch,
  calls a kernel and returns the outputs in one step; the package's prebuilt copy when it was
  built from this pyentry.c, else built on first use (toolchain's cache); entry() returns its
  run() or, where it cannot be had, no_entry (which declines every batch: ctypes serves).

With the backends' own kernel wrappers (treecomp.backends.arrays.native, .kernel) this is the
code that touches native memory. What depends on the platform (the ELF checks, unloading, the
extension suffix) is in treecomp.platform, which also refuses an unverified platform.
"""

from __future__ import annotations

import ctypes
import hashlib
import importlib.machinery
import importlib.util
import json
import os
import sys
import sysconfig
import threading
import weakref
from pathlib import Path
from typing import Any, Callable

import numpy as np

from . import outputs, platform, toolchain
from .errors import ArtifactError, InvalidModelError, KernelError
from .ir import Head
from .platform import ELF_MAGIC, check_elf_extents  # noqa: F401 (ELF_MAGIC: loader's)

ABI_VERSION = 1
TREECOMP_RAW = 0
TREECOMP_TRANSFORM = 1
#: loader-internal flag (not in treecomp.h): a kernel with `native_pairs` writes a binary
#: classifier's probabilities as the libraries return them, rows (1 - p, p)
PAIRS = 0x100

#: what runtime/treecomp.h's return codes mean (KernelError messages)
KERNEL_ERRORS = {
    -1: "invalid arguments (TREECOMP_EINVAL: an unknown dtype code or flag, a negative row "
        "count, a NULL buffer, or an instruction set this CPU lacks)",
    -2: "out of memory (TREECOMP_ENOMEM: a per-call buffer could not be allocated)",
    -3: "the library file is not the one treecomp built (TREECOMP_ECORRUPT)",
    -4: "the library file cannot be read (TREECOMP_EIO)",
}


def kernel_error(code: int, what: str = "the treecomp kernel") -> KernelError:
    """The KernelError for return code `code` of a kernel call (`what`: which kernel)."""
    why = KERNEL_ERRORS.get(int(code), "a code treecomp.h does not define (a corrupt or "
                                       "incompatible artifact)")
    return KernelError(f"{what} failed with code {code}: {why}", int(code))


#: the writable initial margins (accumulation dtype, n_outputs) of an artifact whose head has a
#: base_link (runtime/treecomp.h): set by set_base when it is loaded
BASE_SYMBOL = "treecomp_base"


class EntryCfg(ctypes.Structure):
    """runtime/pyentry.c's tc_entry_cfg: what the small-batch entry needs to call a kernel."""
    _fields_ = [("fn", ctypes.c_uint64), ("ctx", ctypes.c_uint64), ("n_features", ctypes.c_int64),
                ("n_outputs", ctypes.c_int64), ("max_rows", ctypes.c_int64),
                ("isa", ctypes.c_int32), ("tkind", ctypes.c_int32), ("acc_bits", ctypes.c_int32),
                ("allow_nan", ctypes.c_int32)]


#: what runtime/pyentry.c's run() returns (its `mode`)
OUT_2D, OUT_1D, LAB_GE0, LAB_GT0, LAB_GT_HALF, LAB_ARGMAX = range(6)

_RUN: Any = None
ENTRY_MODULE: Any = None
ENTRY_LOCK = threading.Lock()
#: why the small-batch entry could not be built (None: built, or not tried yet)
ENTRY_ERROR: str | None = None
#: where the entry came from: "prebuilt" (the package's treecomp._tc_entry, built at install
#: time), "built" (the toolchain's, on first use), None (not loaded yet, or none)
ENTRY_ORIGIN: str | None = None
#: why the package's prebuilt entry was not used (None: used, or not tried yet)
ENTRY_PREBUILT_ERROR: str | None = None


def no_entry(X: Any, *plan: Any) -> None:
    return None


def entry() -> Any:
    """runtime/pyentry.c's run(): the package's prebuilt extension when it was built from this
    pyentry.c, else built on first use and cached per machine and interpreter; without a C
    compiler or this Python's headers, a stand-in that declines every batch (the ctypes path
    then serves small batches)."""
    global _RUN, ENTRY_MODULE, ENTRY_ERROR, ENTRY_ORIGIN
    with ENTRY_LOCK:
        if _RUN is None:
            try:
                platform.check_platform("loading the small-batch entry")
                mod = _prebuilt_entry()
                origin = "prebuilt" if mod is not None else "built"
                ENTRY_MODULE = mod if mod is not None else _build_entry()
                _RUN, ENTRY_ORIGIN = ENTRY_MODULE.run, origin
            except Exception as exc:  # any failure (a numpy ABI mismatch too): ctypes serves
                ENTRY_ERROR, _RUN = f"{type(exc).__name__}: {exc}", no_entry
        return _RUN


def reset_entry() -> None:
    """Forget the loaded entry, so that the next entry() loads (or builds) it again: for a
    process whose cache was replaced under it, and for the tests."""
    global _RUN, ENTRY_MODULE, ENTRY_ORIGIN, ENTRY_ERROR
    with ENTRY_LOCK:
        _RUN = ENTRY_MODULE = ENTRY_ORIGIN = ENTRY_ERROR = None


def _load_extension(path: Path) -> Any:
    loader = importlib.machinery.ExtensionFileLoader("_tc_entry", str(path))
    spec = importlib.util.spec_from_file_location("_tc_entry", path, loader=loader)
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    if mod.cfg_size() != ctypes.sizeof(EntryCfg):
        raise ImportError("runtime/pyentry.c does not match native.EntryCfg")
    mod.set_error_factory(kernel_error)  # a failed kernel call raises a KernelError naming it
    return mod


def _prebuilt_entry() -> Any:
    """The package's treecomp._tc_entry (setup.py) if it was built from the pyentry.c next to
    this module and loads in this interpreter (numpy's ABI), else None (ENTRY_PREBUILT_ERROR
    says why)."""
    global ENTRY_PREBUILT_ERROR
    pkg = Path(__file__).resolve().parent
    path = next((pkg / f"_tc_entry{sfx}" for sfx in importlib.machinery.EXTENSION_SUFFIXES
                 if (pkg / f"_tc_entry{sfx}").is_file()), None)
    if path is None:
        ENTRY_PREBUILT_ERROR = "the package has no prebuilt entry (a source tree that was not built)"
        return None
    try:
        want = hashlib.sha256((toolchain.RUNTIME_DIR / "pyentry.c").read_bytes()).hexdigest()
        mod = _load_extension(path)
        got = mod.source_hash() if hasattr(mod, "source_hash") else ""
    except Exception as exc:  # an extension for another numpy / Python: build one instead
        ENTRY_PREBUILT_ERROR = f"{path.name} does not load: {exc}"
        return None
    if got != want:
        ENTRY_PREBUILT_ERROR = f"{path.name} was built from another runtime/pyentry.c"
        return None
    return mod


def _build_entry() -> Any:
    cc = toolchain.find_compiler()
    inc = sysconfig.get_paths()["include"]
    if not os.path.isfile(os.path.join(inc, "Python.h")):
        raise ImportError(f"no Python.h in {inc} (install this Python's development headers)")
    key = toolchain.cache_key("pyentry", sys.version, sys.implementation.cache_tag, np.__version__,
                              cc.key)
    flags = (*toolchain.DEFAULT_CFLAGS, "-I", inc, "-I", np.get_include())

    def build(p: Path) -> None:  # only on a cache miss
        report = toolchain.DEFAULT_PROGRESS
        if report:
            report("building the small-batch entry (once per machine and Python, a few s)...")
        toolchain.build_shared_library({"pyentry_main.c": '#include "pyentry.c"\n'}, p, flags,
                                       compiler=cc)
        if report:
            report("built the small-batch entry")
    path = toolchain.cached(key, platform.extension_suffix(), build)
    return _load_extension(path)


def set_base(head: Head, address: int) -> None:
    """Write the initial margins of `head`'s base_link, evaluated now with this process's numpy
    (what scikit-learn computes here at predict time: outputs.base_margins), into a kernel's
    BASE_SYMBOL at `address`. Called once, when the kernel is loaded, before any prediction."""
    if not address:
        raise ArtifactError(f"an artifact with base_link {head.base_link!r} has no {BASE_SYMBOL}")
    acc = np.dtype(head.accumulate_dtype)
    base = outputs.base_margins(head).astype(acc)
    ctypes.memmove(address, base.ctypes.data, base.nbytes)


def verify_artifact(data: bytes, name: str = "the library") -> str:
    """ArtifactError unless `data`, a shared library's bytes, is exactly what treecomp built:
    its segments lie inside the file (check_elf_extents) and its seal matches
    (toolchain.check_seal). Run before every dlopen of an artifact: a damaged library can kill
    the process inside the dynamic loader, or load and answer wrongly. Returns the seal's
    digest (hex), the verified file's identity."""
    try:
        check_elf_extents(data)
    except ArtifactError as exc:
        raise ArtifactError(f"{name}: {exc}") from None
    return toolchain.check_seal(data, name)


class SharedLibrary:
    """A kernel in a shared library honouring runtime/treecomp.h (C backend, LLVM object code).

    The file is verified (verify_artifact) before it is loaded, and unloaded (dlclose) when
    this object is collected: a service that reloads models gets the memory back."""

    kind = "so"

    @property
    def lib(self) -> Any:
        """The loaded library (ctypes.CDLL): for a backend's check (see __init__)."""
        return self._lib

    def __init__(self, path: str | os.PathLike,
                 check: "Callable[[SharedLibrary], None] | None" = None,
                 verified: bool = False):
        """Load the library at `path` (verified first); `check`, if given, runs on the loaded
        library before its first call (a backend's own checks of what it wrote into it, e.g.
        the arrays backend's tables). verified=True: the caller has just verified the file's
        bytes (verify_artifact) and found the file at `path` to hold them; not read again."""
        self.path = Path(path)
        platform.check_platform("loading a shared library")
        if not verified:
            try:
                data = self.path.read_bytes()
            except OSError as exc:
                raise ArtifactError(f"cannot read {self.path.name}: {exc}") from None
            verify_artifact(data, self.path.name)
        try:
            lib = ctypes.CDLL(str(self.path))
        except OSError as exc:
            raise ArtifactError(f"cannot load {self.path.name} as a shared library: {exc}") from None
        except UnicodeDecodeError as exc:  # ctypes decodes dlerror()'s text, which names symbols
            text = exc.object.decode("utf-8", "backslashreplace") if isinstance(exc.object, bytes) else ""
            raise ArtifactError(f"cannot load {self.path.name} as a shared library: the dynamic "
                                f"loader failed naming a symbol that is not UTF-8 text (a damaged "
                                f"or foreign library): {text}") from None
        fin = weakref.finalize(self, platform.dlclose, lib._handle)
        fin.atexit = False  # at exit, pool threads may still be inside the library
        try:
            abi = lib.treecomp_abi_version
            meta_fn = lib.treecomp_meta_json
            predict = lib.treecomp_predict
        except AttributeError:
            raise ArtifactError(f"{self.path.name} is not a treecomp artifact "
                                "(no treecomp_abi_version / treecomp_predict symbols)") from None
        abi.restype = ctypes.c_int32
        version = abi()
        if version != ABI_VERSION:
            raise ArtifactError(f"{self.path.name} uses treecomp ABI {version}; this treecomp "
                                f"reads ABI {ABI_VERSION}: recompile the model")
        meta_fn.restype = ctypes.c_char_p
        meta = meta_fn()
        if not meta:
            raise ArtifactError(f"{self.path.name}: treecomp_meta_json() returned NULL")
        try:
            self.meta_json = meta.decode()
            self.head = Head.from_json(self.meta_json)
            self.backend = str(json.loads(self.meta_json).get("backend", "?"))
        except (UnicodeDecodeError, AttributeError, InvalidModelError) as exc:
            raise ArtifactError(f"{self.path.name}: corrupt treecomp_meta_json(): {exc}") from None
        self._check_exports(lib)
        if self.head.base_link != "identity":
            try:
                address = ctypes.addressof(ctypes.c_char.in_dll(lib, BASE_SYMBOL))
            except ValueError:
                raise ArtifactError(f"{self.path.name}: its meta JSON has base_link "
                                    f"{self.head.base_link!r} but the library has no {BASE_SYMBOL}") from None
            set_base(self.head, address)
        self._lib = lib
        if check is not None:
            check(self)
        predict.restype = ctypes.c_int32
        predict.argtypes = [ctypes.c_void_p, ctypes.c_int32, ctypes.c_int64, ctypes.c_void_p,
                            ctypes.c_uint32]
        self._predict = predict
        #: (function, tables, isa, transform kind) for the small-batch entry (runtime/pyentry.c)
        self.entry = (ctypes.cast(predict, ctypes.c_void_p).value, 0, 0, 0)
        #: the artifact's TREECOMP_TRANSFORM is the library's own arithmetic (see c.py / llvm.py)
        self.native_transform = outputs.native_transform(self.head) != 0

    def _check_exports(self, lib: Any) -> None:
        """The Predictor sizes every buffer from the meta JSON while the code reads and writes
        what its exported shape functions say: a disagreement (a patched or mismatched file)
        would overrun the heap, so it is refused before the first call."""
        h, name = self.head, self.path.name
        if h.input_dtype not in ("float32", "float64") or h.accumulate_dtype not in ("float32", "float64"):
            raise ArtifactError(f"{name}: meta JSON names input dtype {h.input_dtype!r} and output "
                                f"dtype {h.accumulate_dtype!r}; artifacts use float32 / float64")
        if h.n_features < 1 or h.n_outputs < 1:
            raise ArtifactError(f"{name}: meta JSON has {h.n_features} features and {h.n_outputs} "
                                "outputs; both must be >= 1")
        want = {"treecomp_n_features": h.n_features, "treecomp_n_outputs": h.n_outputs,
                "treecomp_out_dtype": np.dtype(h.accumulate_dtype).itemsize * 8}
        for sym, expected in want.items():
            try:
                fn = getattr(lib, sym)
            except AttributeError:
                raise ArtifactError(f"{name} is not a complete treecomp artifact (no {sym} "
                                    "symbol)") from None
            fn.restype, fn.argtypes = ctypes.c_int32, []
            got = fn()
            if got != expected:
                raise ArtifactError(f"{name} is inconsistent: {sym}() returns {got} but its meta "
                                    f"JSON implies {expected} (a corrupt or tampered artifact)")

    def run(self, X: np.ndarray, out: np.ndarray, flags: int = TREECOMP_RAW) -> None:
        rc = self._predict(X.ctypes.data, X.dtype.itemsize * 8, X.shape[0], out.ctypes.data, flags)
        if rc != 0:
            raise kernel_error(rc, f"treecomp_predict of {self.path.name}")

    def ir_bytes(self) -> bytes | None:
        """The model's IR file the library carries (treecomp_ir / treecomp_ir_size: the c and
        arrays backends' .so), or None (other libraries, or written by an older treecomp)."""
        try:
            size_fn, data_fn = self._lib.treecomp_ir_size, self._lib.treecomp_ir
        except AttributeError:
            return None
        size_fn.restype, size_fn.argtypes = ctypes.c_int64, []
        data_fn.restype, data_fn.argtypes = ctypes.c_void_p, []
        n, p = size_fn(), data_fn()
        if n < 0 or n > self.path.stat().st_size or (n and not p):  # the bytes lie in the file
            raise ArtifactError(f"{self.path.name}: treecomp_ir_size() = {n} is not a size inside "
                                "the library (a corrupt or tampered artifact)")
        return ctypes.string_at(p, n)

    def run_ptr(self, xp: int, x_bits: int, n: int, op: int, flags: int) -> int:
        """n rows at address xp into op (the small-batch path: see Predictor)."""
        return self._predict(xp, x_bits, n, op, flags)

    def to_bytes(self) -> bytes:
        return self.path.read_bytes()

    def save(self, path: str | os.PathLike) -> None:
        data = self.to_bytes()
        toolchain.publish(Path(path).resolve(), lambda p: p.write_bytes(data))


def _after_fork_in_child() -> None:
    """A lock another parent thread held at a fork would never be released in the child."""
    global ENTRY_LOCK
    ENTRY_LOCK = threading.Lock()


if hasattr(os, "register_at_fork"):  # not on Windows, which cannot fork
    os.register_at_fork(after_in_child=_after_fork_in_child)
