"""Everything treecomp does that depends on the operating system or the CPU architecture.

The contract. treecomp's native paths (building a shared library with the C compiler, loading
one with the dynamic loader, JIT-compiling with llvmlite) are verified, bit for bit against
the libraries, on the platforms in VERIFIED: Linux on x86-64 (the test suite) and Linux on
aarch64 (the emulated lane, docs/aarch64.md). Every piece of them that would differ elsewhere
is here, and nowhere else:

- the shared-library format: ELF (ELF_MAGIC; check_elf_extents, the check before dlopen that a
  library's segments lie inside its file);
- the assembler's ``.incbin`` (incbin: whether a build may pull a data blob into .rodata with
  it, else a C string literal);
- the linker call: the flag that makes a shared library (SHARED_FLAG), the libraries a sealed
  one needs (link_flags), the symbol export list (export_flags: a GNU version script, or
  Apple's exported-symbols list);
- the dynamic loader: the suffix of treecomp's built libraries (LIBRARY_SUFFIX) and of a
  CPython extension (extension_suffix), unloading (dlclose);
- the host's identity in cache keys (host_key: system and CPU architecture, so a cache shared
  between machines, an NFS home, never hands one architecture's object code to another).

On a platform outside VERIFIED, check_platform raises PlatformError naming it before any native
path is built or loaded: a clear error, never a wrong answer. The pure-Python paths (the
interpreter, the arrays backend's numpy walker, ``.tc`` files) need none of this and work
anywhere. Setting TREECOMP_UNVERIFIED_PLATFORM=1 lets the native paths run anyway, at the
user's risk (for porting: run the test suite there first).
"""

from __future__ import annotations

import os
import platform as _stdlib_platform
import struct
import sys
import sysconfig
from pathlib import Path
from typing import Iterable

from .errors import ArtifactError, PlatformError

#: (system, machine) pairs the native paths are verified on
VERIFIED = (("linux", "x86_64"), ("linux", "aarch64"))
#: the environment variable that lets the native paths run on an unverified platform
ALLOW_ENV = "TREECOMP_UNVERIFIED_PLATFORM"

_MACHINES = {"amd64": "x86_64", "x64": "x86_64", "arm64": "aarch64", "aarch64_be": "aarch64_be"}


def system() -> str:
    """The operating system: "linux", "darwin", "win32", "freebsd", ... (sys.platform without
    a version number)."""
    return sys.platform.rstrip("0123456789") or sys.platform


def machine() -> str:
    """The CPU architecture (platform.machine(), lower case; amd64 / arm64 under their Linux
    names x86_64 / aarch64)."""
    m = _stdlib_platform.machine().lower()
    return _MACHINES.get(m, m)


def verified() -> bool:
    """Whether this platform is one of VERIFIED."""
    return (system(), machine()) in VERIFIED


def native_ok() -> bool:
    """Whether the native paths may run here: a verified platform, or TREECOMP_UNVERIFIED_PLATFORM=1."""
    return verified() or os.environ.get(ALLOW_ENV) == "1"


def check_platform(what: str = "native code") -> None:
    """PlatformError unless this platform is verified (or TREECOMP_UNVERIFIED_PLATFORM=1):
    called before `what` (a build, a load, a JIT) runs."""
    if native_ok():
        return
    ok = ", ".join(f"{s} {m}" for s, m in VERIFIED)
    raise PlatformError(
        f"treecomp has not verified {what} on this platform ({system()} {machine()}; verified: "
        f"{ok}). Exact results are not guaranteed here, so treecomp refuses rather than risk a "
        "wrong answer. The numpy paths still work: backend='arrays' with isa='numpy', or "
        f"treecomp.interp. To try the native paths anyway, set {ALLOW_ENV}=1 and run treecomp's "
        "test suite on this machine first.")


def host_key() -> tuple[str, str]:
    """What identifies this host's object code in cache keys: (system, CPU architecture)."""
    return system(), machine()


# -- the shared-library format ------------------------------------------------------------------
ELF_MAGIC = b"\x7fELF"


def elf() -> bool:
    """Whether this platform's shared libraries are ELF."""
    return sys.platform.startswith(("linux", "freebsd", "netbsd", "openbsd", "dragonfly", "sunos"))


def incbin() -> bool:
    """Whether a build may pull a data blob into .rodata with the assembler's .incbin (ELF
    assemblers: .section ... @progbits, .type, .size); elsewhere blobs are C string literals."""
    return elf()


def check_elf_extents(data: bytes) -> None:
    """ArtifactError unless every program header, loadable segment and the section header
    table of an ELF file lie inside `data`. The dynamic loader maps segments past the end of a
    truncated file and the process dies of SIGBUS on touching them (a c-backend .so cut in
    half did, under glibc 2.36): refused here, before dlopen. Non-ELF data is left to dlopen."""
    if data[:4] != ELF_MAGIC or len(data) < 6:
        return
    bits, order = data[4], {1: "<", 2: ">"}.get(data[5])
    if bits not in (1, 2) or order is None:
        raise ArtifactError("not a loadable shared library (unknown ELF class or byte order)")
    wide = bits == 2
    head = struct.Struct(order + ("16xHHIQQQIHHHHHH" if wide else "16xHHIIIIIHHHHHH"))
    phdr = struct.Struct(order + ("IIQQQQQQ" if wide else "IIIIIIII"))
    if len(data) < head.size:
        raise ArtifactError("truncated shared library (its ELF header is cut)")
    _, _, _, _, phoff, shoff, _, _, phentsize, phnum, shentsize, shnum, _ = head.unpack_from(data)
    size = len(data)
    if phnum and (phentsize < phdr.size or phoff + phnum * phentsize > size):
        raise ArtifactError("truncated shared library (its program headers lie past the end)")
    if shnum and shoff + shnum * shentsize > size:
        raise ArtifactError("truncated shared library (its section headers lie past the end)")
    for i in range(phnum):
        f = phdr.unpack_from(data, phoff + i * phentsize)
        offset, filesz = (f[2], f[5]) if wide else (f[1], f[4])
        if f[0] != 0 and offset + filesz > size:  # any segment but PT_NULL
            raise ArtifactError(f"truncated shared library (segment {i} ends at byte "
                                f"{offset + filesz}, the file at {size})")


# -- the linker call ----------------------------------------------------------------------------
#: the compiler-driver flag that links a shared library
SHARED_FLAG = "-shared"


def link_flags(seal: bool) -> list[str]:
    """Extra libraries a sealed library needs (treecomp_verify's dladdr: libdl before glibc
    2.34)."""
    return ["-ldl"] if seal and sys.platform.startswith("linux") else []


def export_flags(tmpd: Path, exports: Iterable[str]) -> list[str]:
    """Linker flags that export only the symbols matching `exports` (shell-style wildcards) and
    bind the library's own references to its own definitions (a file written into `tmpd`)."""
    exports = list(exports)
    if sys.platform == "darwin":
        (tmpd / "exports.txt").write_text("".join(f"_{e}\n" for e in exports))
        return [f"-Wl,-exported_symbols_list,{tmpd / 'exports.txt'}"]
    script = "{\n  global:\n" + "".join(f"    {e};\n" for e in exports) + "  local: *;\n};\n"
    (tmpd / "exports.map").write_text(script)
    return [f"-Wl,--version-script={tmpd / 'exports.map'}", "-Wl,-Bsymbolic"]


# -- the dynamic loader -------------------------------------------------------------------------
#: the suffix of the shared libraries treecomp builds and loads by path (cache entries, the
#: artifacts `treecomp compile -o model.so` writes)
LIBRARY_SUFFIX = ".so"


def extension_suffix() -> str:
    """The suffix a CPython extension module has here (the small-batch entry)."""
    return sysconfig.get_config_var("EXT_SUFFIX") or ".so"


def dlclose(handle: int) -> None:
    """Unload a library ctypes loaded (ctypes itself never does): every function pointer into
    it died with the object that owned it. Where there is no dlclose (Windows) the mapping
    stays."""
    try:
        from _ctypes import dlclose as close
        close(handle)
    except (ImportError, OSError):
        pass
