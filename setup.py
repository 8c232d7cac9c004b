"""Install-time build of treecomp's native parts (metadata: pyproject.toml; why: docs/build.md).

Three extensions land in the package:

- ``treecomp._arrays_kernel``: the arrays backend's kernel (runtime/kernels/arrays.c), a plain
  shared library that ctypes loads by path (no PyInit). It is built exactly as
  treecomp.backends.arrays.native builds it at run time: the three TC_PART translation units
  (baseline + entry points, AVX2, AVX-512F; on non-x86 the last two are empty) compiled in
  parallel with KERNEL_CFLAGS (= toolchain.DEFAULT_CFLAGS, read from the sources below) and
  linked with ``cc -shared``; the same three objects also go into a static archive
  ``treecomp/_arrays_kernel.a`` that ``treecomp compile -o model.so`` links into a model's
  self-contained shared library (treecomp/backends/arrays/so.py). It embeds the sha256 of its sources and its flags
  (-DTC_SOURCE_HASH, -DTC_BUILD_CFLAGS): at run time treecomp uses it only when both match.
- ``treecomp._tc_entry``: the small-batch CPython entry (runtime/pyentry.c), a normal extension
  against this Python's and numpy's headers, embedding the sha256 of pyentry.c likewise.
- ``treecomp._numparse``: the JSON number-array parser (runtime/numparse.c; treecomp.numparse
  loads it), a normal extension against this Python's headers only, embedding the sha256 of
  numparse.c likewise.

All are optional: where they cannot be built (no C compiler) the install still succeeds and
treecomp falls back to building them on first use, or to its compiler-free paths (the number
parser: numpy's passes, treecomp.frontends.jsonarrays).
"""

from __future__ import annotations

import ast
import hashlib
import os
import shlex
import shutil
import subprocess
import sysconfig
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

try:
    from setuptools.errors import CompileError
except ImportError:  # setuptools < 59
    from distutils.errors import CompileError

ROOT = Path(__file__).resolve().parent
RUNTIME = Path("runtime")  # relative: setuptools wants relative source paths
KERNEL = "treecomp._arrays_kernel"
ENTRY = "treecomp._tc_entry"
NUMPARSE = "treecomp._numparse"
#: the kernel's objects as a static archive, beside the kernel (arrays.native.ARCHIVE_NAME)
ARCHIVE = "_arrays_kernel.a"


def _literal(module: str, name: str):
    """A module-level literal of a treecomp module, read without importing treecomp."""
    tree = ast.parse((ROOT / module).read_text())
    for node in tree.body:
        targets = [node.target] if isinstance(node, ast.AnnAssign) else getattr(node, "targets", [])
        if any(isinstance(t, ast.Name) and t.id == name for t in targets):
            return ast.literal_eval(node.value)
    raise RuntimeError(f"{name} not found in {module}")


CFLAGS = tuple(_literal("treecomp/toolchain.py", "DEFAULT_CFLAGS"))  # = arrays.native.KERNEL_CFLAGS
KERNEL_FILES = _literal("treecomp/backends/arrays/native.py", "KERNEL_FILES")
KERNEL_PARTS = _literal("treecomp/backends/arrays/native.py", "KERNEL_PARTS")


def _kernel_source_hash() -> str:
    """= treecomp.backends.arrays.native.kernel_source_hash() (tests/test_install.py checks)."""
    h = hashlib.sha256()
    for name in KERNEL_FILES:
        h.update(name.encode() + b"\0" + (ROOT / RUNTIME / "kernels" / name).read_bytes())
    return h.hexdigest()


def _file_hash(path: Path) -> str:
    return hashlib.sha256((ROOT / path).read_bytes()).hexdigest()


def _carries(path: Path, marks: tuple[bytes, ...]) -> bool:
    """Whether the file at `path` exists and holds every byte string of `marks`."""
    try:
        data = path.read_bytes()
    except OSError:
        return False
    return all(m in data for m in marks)


def _c_compiler() -> list[str]:
    """$CC if set, else the compiler this Python was built with if it is on PATH, else cc."""
    env = os.environ.get("CC")
    if env:
        return shlex.split(env)
    for cand in ((sysconfig.get_config_var("CC") or "").split()[:1] or []) + ["cc", "gcc", "clang"]:
        if shutil.which(cand):
            return [cand]
    raise CompileError("no C compiler found (set CC, or install gcc or clang)")


def _archiver() -> str | None:
    """$AR if set, else ar / gcc-ar / llvm-ar on PATH (= toolchain.find_archiver)."""
    for cand in ([os.environ["AR"]] if os.environ.get("AR") else ["ar", "gcc-ar", "llvm-ar"]):
        exe = shutil.which(cand)
        if exe:
            return exe
    return None


def _run(argv: list[str]) -> None:
    print(" ".join(shlex.quote(a) for a in argv), flush=True)
    try:
        out = subprocess.run(argv, capture_output=True, text=True)
    except OSError as exc:
        raise CompileError(f"cannot run {argv[0]!r}: {exc}") from None
    if out.returncode != 0:
        raise CompileError(f"{' '.join(argv[:4])} ... failed (exit {out.returncode}):\n"
                           f"{(out.stderr or out.stdout).strip()[-4000:]}")


class BuildExt(build_ext):
    """build_ext with the kernel built by hand (exact flags, parallel parts, no Python ABI)."""

    def build_extension(self, ext: Extension) -> None:
        if ext.name == KERNEL:
            self._build_kernel(ext)
            return
        if ext.name == ENTRY:  # numpy: a build requirement, imported only to build
            import numpy
            if numpy.get_include() not in ext.include_dirs:
                ext.include_dirs.append(numpy.get_include())
        super().build_extension(ext)

    def _build_kernel(self, ext: Extension) -> None:
        out = Path(self.get_ext_fullpath(ext.name))
        source_hash, cflags = _kernel_source_hash(), " ".join(CFLAGS)
        # up to date when the library and its archive carry these sources' hash and flags (the
        # strings the kernel embeds, which treecomp checks at load): modification times are not
        # enough (an edit during a build, or copies that keep old times, left a stale kernel);
        # the link step, which the kernel does not record, is rebuilt when its recipe changed
        marks = (source_hash.encode(), cflags.encode())
        archive_ok = _archiver() is None or _carries(out.parent / ARCHIVE, marks)
        recipe = max((ROOT / f).stat().st_mtime for f in ("setup.py", "treecomp/toolchain.py"))
        if not self.force and _carries(out, marks) and archive_ok \
                and out.stat().st_mtime >= recipe:
            print(f"{out} is up to date")
            return
        cc = _c_compiler()
        flags = [*CFLAGS, f'-DTC_SOURCE_HASH="{source_hash}"', f'-DTC_BUILD_CFLAGS="{cflags}"']
        out.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix="treecomp-kernel-") as tmp:
            objs = [str(Path(tmp) / f"tc_arrays_{i}.o") for i in range(KERNEL_PARTS)]
            # the same translation units as arrays.native.native_library's first-use build
            jobs = [[*cc, *flags, f"-DTC_PART={i}", "-I", str(ROOT / RUNTIME), "-c",
                     str(ROOT / RUNTIME / "kernels" / "arrays.c"), "-o", objs[i]]
                    for i in range(KERNEL_PARTS)]
            with ThreadPoolExecutor(min(KERNEL_PARTS, os.cpu_count() or 1)) as pool:
                list(pool.map(_run, jobs))
            _run([*cc, "-shared", *flags, *objs, "-o", str(out), "-lm"])
            # the same objects as a static archive: what `treecomp compile -o model.so` links
            # into a model's self-contained shared library (treecomp/backends/arrays/so.py)
            ar = _archiver()
            if ar is None:
                print("warning: no archiver (ar) found: the kernel archive is not built; "
                      "arrays .so artifacts will build it on first use")
                return
            archive = out.parent / ARCHIVE
            if archive.exists():
                archive.unlink()
            _run([ar, "rcs", str(archive), *objs])

    # the archive is one more output of the kernel extension: listed with it (wheels), copied
    # into the source tree with it and mapped like it (editable installs, which build in build/)
    def _archive_pairs(self):
        """(file in build_lib, file in the source tree) of the kernel archive."""
        build_py = self.get_finalized_command("build_py")
        for ext in self.extensions:
            if ext.name == KERNEL:
                inplace_file, regular_file = self._get_inplace_equivalent(build_py, ext)
                yield (str(Path(regular_file).parent / ARCHIVE), str(Path(inplace_file).parent / ARCHIVE))

    def copy_extensions_to_source(self) -> None:
        super().copy_extensions_to_source()
        for regular, inplace in self._archive_pairs():
            if os.path.exists(regular):
                self.copy_file(regular, inplace, level=self.verbose)

    def _get_output_mapping(self):
        yield from super()._get_output_mapping()
        if self.inplace:
            yield from ((r, i) for r, i in self._archive_pairs() if os.path.exists(r))

    def get_outputs(self) -> list[str]:
        outs = super().get_outputs()  # inplace: the mapping's keys, the archive's included
        if not self.inplace:
            for ext in self.extensions:
                archive = Path(self.get_ext_fullpath(ext.name)).parent / ARCHIVE
                if ext.name == KERNEL and archive.is_file():
                    outs.append(str(archive))
        return outs


ext_modules = [
    Extension(KERNEL, sources=[str(RUNTIME / "kernels" / "arrays.c")],
              depends=[str(RUNTIME / "kernels" / f) for f in KERNEL_FILES], optional=True),
    Extension(ENTRY, sources=[str(RUNTIME / "pyentry.c")],
              extra_compile_args=list(CFLAGS),
              define_macros=[("TC_SOURCE_HASH", f'"{_file_hash(RUNTIME / "pyentry.c")}"')],
              optional=True),
    Extension(NUMPARSE, sources=[str(RUNTIME / "numparse.c")],
              extra_compile_args=list(CFLAGS),
              define_macros=[("TC_SOURCE_HASH", f'"{_file_hash(RUNTIME / "numparse.c")}"')],
              optional=True),
]

setup(ext_modules=ext_modules, cmdclass={"build_ext": BuildExt})
