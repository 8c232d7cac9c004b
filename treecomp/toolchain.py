"""The only module that runs a C compiler or linker, and the content-addressed artifact cache.

Cache layout: ``$TREECOMP_CACHE_DIR`` (default ``$XDG_CACHE_HOME/treecomp`` or
``~/.cache/treecomp``) holds ``<key>.<suffix>`` files, where the key is a sha256 over everything
that determines the bytes: IR digest, backend, options, treecomp version and compiler identity.
Writes go to a temporary file in the same directory and are published with ``os.replace``, so
two processes building the same model at once never see a half-written file (the loser's
rename simply replaces an identical file).

A cache directory that cannot be created or written (read-only file system, another user's
directory, full disk) does not stop compiling or loading: the file is built in a private
temporary directory of this process instead (removed at exit). Writing a user's output path
(``publish``) that fails raises treecomp.errors.WriteError naming the path.
"""

from __future__ import annotations

import atexit
import errno
import functools
import hashlib
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable

from . import __version__
from .errors import CompileError, WriteError

RUNTIME_DIR = Path(__file__).resolve().parent / "runtime"

#: Portable by default: runs on any x86-64 of the same OS. -ffp-contract=off: no FMA fusion,
#: so every sum and product rounds exactly as the library's does.
DEFAULT_CFLAGS = ("-O2", "-fPIC", "-ffp-contract=off", "-fno-math-errno", "-fvisibility=hidden")
NATIVE_CFLAGS = ("-march=native",)

#: where long builds nobody asked for report (the arrays kernel's and the small-batch entry's
#: first-use builds, when the package has no prebuilt copy), unless the caller passed its own
#: `progress` callback: None (silent) in a library, the CLI sets its progress printer.
#: `progress` callbacks take one str; a message that counts steps says "k/n" ("compiled
#: model_3.c (3/12)"), which the CLI draws as a bar on a terminal
DEFAULT_PROGRESS: Callable[[str], None] | None = None


def cache_dir() -> Path:
    env = os.environ.get("TREECOMP_CACHE_DIR")
    if env:
        d = Path(env)
    else:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        d = Path(base) / "treecomp"
    # private (0o700) when created here: the cache holds shared libraries that get loaded, so
    # another user must not be able to plant one (an existing directory is left as it is)
    d.mkdir(mode=0o700, parents=True, exist_ok=True)
    return d


@functools.lru_cache(maxsize=1)
def code_fingerprint() -> str:
    """Hash of treecomp's own code generators and runtime sources, read once per process:
    part of every cache key, so an artifact built by other code is never reused, even when
    the version number did not change (development installs)."""
    h = hashlib.sha256()
    pkg = Path(__file__).resolve().parent
    files = sorted(pkg.rglob("*.py")) + sorted(p for p in RUNTIME_DIR.rglob("*") if p.is_file())
    for f in files:
        h.update(f.name.encode())
        h.update(f.read_bytes())
    return h.hexdigest()[:16]


def cache_key(*parts: object) -> str:
    h = hashlib.sha256()
    for p in (__version__, code_fingerprint(), *parts):
        h.update(repr(p).encode())
        h.update(b"\0")
    return h.hexdigest()[:40]


def publish(path: Path, writer: Callable[[Path], None]) -> Path:
    """Create `path` atomically: `writer` fills a temp file that is then renamed into place.

    An OSError (missing or unwritable directory, full disk) becomes a WriteError naming `path`,
    with the OSError as its __cause__; errors `writer` raises on purpose pass through."""
    path = Path(path)
    tmp = None
    if not path.parent.is_dir():  # else mkstemp's error would name the temporary file
        why = "is not a directory" if path.parent.exists() else "does not exist"
        code = errno.ENOTDIR if path.parent.exists() else errno.ENOENT
        raise WriteError(f"cannot write {path}: {path.parent} {why}") from OSError(
            code, os.strerror(code), str(path.parent))
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        os.close(fd)
        writer(Path(tmp))
        os.chmod(tmp, 0o755)
        os.replace(tmp, path)
    except WriteError:
        raise
    except OSError as exc:
        raise WriteError(f"cannot write {path}: {exc}") from exc
    finally:
        if tmp is not None and os.path.exists(tmp):
            os.unlink(tmp)
    return path


_PRIVATE: tuple[int, Path] | None = None


def private_dir() -> Path:
    """This process's own temporary cache (for when the shared cache cannot be written);
    a forked child makes its own rather than share (and remove at exit) its parent's."""
    global _PRIVATE
    if _PRIVATE is None or _PRIVATE[0] != os.getpid():
        try:
            d = Path(tempfile.mkdtemp(prefix="treecomp-cache-"))
        except OSError as exc:
            raise WriteError(f"cannot create a temporary directory in {tempfile.gettempdir()}: "
                             f"{exc}") from exc
        _PRIVATE = (os.getpid(), d)
        atexit.register(_remove_private, os.getpid(), d)
    return _PRIVATE[1]


def _remove_private(pid: int, d: Path) -> None:
    if os.getpid() == pid:  # not in a forked child that exits through atexit
        shutil.rmtree(d, ignore_errors=True)


def cached(key: str, suffix: str, writer: Callable[[Path], None]) -> Path:
    """The cached file for `key`, created with `writer` on a miss (in this process's private
    directory when the cache cannot be written: see the module docstring)."""
    name = f"{key}{suffix}"
    try:
        path = cache_dir() / name
        if path.is_file() and path.stat().st_size > 0:
            return path
        return publish(path, writer)
    except OSError as exc:  # WriteError included
        shared = exc
    path = private_dir() / name
    if path.is_file() and path.stat().st_size > 0:
        return path
    try:
        return publish(path, writer)
    except WriteError as exc:
        raise WriteError(f"{exc} (tried after the cache failed: {shared})") from exc


# -- the C compiler -----------------------------------------------------------------------------
@dataclass(frozen=True)
class Compiler:
    argv: tuple[str, ...]   # the compiler command (e.g. ("gcc",) or ("ccache", "cc"))
    version: str            # first line of `cc --version`: part of every cache key


def _no_compiler(why: str) -> CompileError:
    return CompileError(
        f"no working C compiler ({why}). Install gcc or clang, set CC, or use a backend that "
        "needs none: backend='llvm' (JIT through llvmlite) or backend='arrays'.")


@functools.lru_cache(maxsize=8)
def _probe(cmd: tuple[str, ...]) -> Compiler:
    exe = shutil.which(cmd[0])
    if exe is None:
        raise _no_compiler(f"{cmd[0]!r} not found on PATH")
    try:
        out = subprocess.run([*cmd, "--version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise _no_compiler(f"{cmd[0]!r} does not run: {exc}") from None
    if out.returncode != 0:
        raise _no_compiler(f"{cmd[0]!r} --version failed")
    return Compiler(argv=cmd, version=(out.stdout.splitlines() or ["?"])[0].strip())


def find_compiler() -> Compiler:
    """$CC if set (and then only it), else the first of cc, gcc, clang on PATH."""
    env = os.environ.get("CC")
    if env:
        return _probe(tuple(shlex.split(env)))
    for name in ("cc", "gcc", "clang"):
        if shutil.which(name):
            return _probe((name,))
    raise _no_compiler("none of cc, gcc, clang is on PATH and CC is not set")


def have_compiler() -> bool:
    try:
        find_compiler()
        return True
    except CompileError:
        return False


def _run(argv: list[str], what: str) -> None:
    try:
        out = subprocess.run(argv, capture_output=True, text=True)
    except OSError as exc:
        raise CompileError(f"{what}: cannot run {argv[0]!r}: {exc}") from None
    if out.returncode != 0:
        msg = (out.stderr or out.stdout).strip()
        if len(msg) > 4000:
            msg = msg[:2000] + "\n...\n" + msg[-2000:]
        raise CompileError(f"{what} failed (exit {out.returncode}): {' '.join(argv[:6])} ...\n{msg}")


def build_shared_library(sources: dict[str, str], out: Path, cflags: Iterable[str] = DEFAULT_CFLAGS,
                         jobs: int | None = None, compiler: Compiler | None = None,
                         progress: Callable[[str], None] | None = None,
                         files: dict[str, bytes] | None = None) -> None:
    """Compile translation units {file name: C source} in parallel and link them into `out`.
    `files` as link_shared_library's (data a unit pulls in with .incbin from ``@DIR@``)."""
    cc = compiler or find_compiler()
    flags = list(cflags)
    with tempfile.TemporaryDirectory(prefix="treecomp-build-") as tmp:
        for name, data in (files or {}).items():
            (Path(tmp) / name).write_bytes(data)
        if files:  # once per unit: the placeholder comes first, user text after it is left alone
            sources = {k: v.replace("@DIR@", _asm_in_c(tmp), 1) for k, v in sources.items()}
        objs = _compile_objects(sources, Path(tmp), cc, flags, jobs, progress)
        _run([*cc.argv, "-shared", *flags, *map(str, objs), "-o", str(out), "-lm"], "linking")


def _compile_objects(sources: dict[str, str], tmpd: Path, cc: Compiler, flags: list[str],
                     jobs: int | None, progress: Callable[[str], None] | None) -> list[Path]:
    """Write the translation units into `tmpd` and compile them there in parallel, reporting
    each one done as "compiled NAME (k/n)" through `progress` (default DEFAULT_PROGRESS)."""
    jobs = max(1, min(jobs or os.cpu_count() or 1, len(sources)))
    report = progress or DEFAULT_PROGRESS
    objs = []
    for name, src in sources.items():
        (tmpd / name).write_text(src)
        objs.append(tmpd / (Path(name).stem + ".o"))
    done = [0]
    lock = threading.Lock()

    def compile_one(name: str) -> None:
        _run([*cc.argv, *flags, "-I", str(RUNTIME_DIR), "-c", str(tmpd / name),
              "-o", str(tmpd / (Path(name).stem + ".o"))], f"compiling {name}")
        if report:
            with lock:  # in order: k/n never goes back
                done[0] += 1
                report(f"compiled {name} ({done[0]}/{len(sources)})")

    with ThreadPoolExecutor(jobs) as pool:
        list(pool.map(compile_one, sources))
    return objs


def link_objects(objects: dict[str, bytes], out: Path, compiler: Compiler | None = None) -> None:
    """Link object files (e.g. from llvmlite) into a shared library with the system linker."""
    cc = compiler or find_compiler()
    with tempfile.TemporaryDirectory(prefix="treecomp-link-") as tmp:
        paths = []
        for name, data in objects.items():
            p = Path(tmp) / name
            p.write_bytes(data)
            paths.append(str(p))
        _run([*cc.argv, "-shared", *paths, "-o", str(out), "-lm"], "linking")


# -- static archives and symbol-restricted shared libraries (the arrays backend's .so) ---------
def find_archiver(compiler: Compiler | None = None) -> str:
    """$AR if set, else ar / gcc-ar / llvm-ar on PATH (CompileError without one)."""
    env = os.environ.get("AR")
    cands = [env] if env else ["ar", "gcc-ar", "llvm-ar"]
    for name in cands:
        exe = shutil.which(name)
        if exe:
            return exe
    raise CompileError(f"no archiver ({' / '.join(cands)}) on PATH: install binutils")


def build_static_archive(sources: dict[str, str], out: Path, cflags: Iterable[str] = DEFAULT_CFLAGS,
                         jobs: int | None = None, compiler: Compiler | None = None,
                         progress: Callable[[str], None] | None = None) -> None:
    """Compile translation units {file name: C source} in parallel into a static archive `out`
    (position-independent objects when cflags hold -fPIC: linkable into a shared library)."""
    cc = compiler or find_compiler()
    ar = find_archiver(cc)
    flags = list(cflags)
    with tempfile.TemporaryDirectory(prefix="treecomp-build-") as tmp:
        tmpd = Path(tmp)
        objs = _compile_objects(sources, tmpd, cc, flags, jobs, progress)
        tmp_out = tmpd / "out.a"
        _run([ar, "rcs", str(tmp_out), *map(str, objs)], "archiving")
        shutil.copyfile(tmp_out, out)


def _export_flags(tmpd: Path, exports: Iterable[str]) -> list[str]:
    """Linker flags that export only the symbols matching `exports` (shell-style wildcards) and
    bind the library's own references to its own definitions."""
    exports = list(exports)
    if sys.platform == "darwin":
        (tmpd / "exports.txt").write_text("".join(f"_{e}\n" for e in exports))
        return [f"-Wl,-exported_symbols_list,{tmpd / 'exports.txt'}"]
    script = "{\n  global:\n" + "".join(f"    {e};\n" for e in exports) + "  local: *;\n};\n"
    (tmpd / "exports.map").write_text(script)
    return [f"-Wl,--version-script={tmpd / 'exports.map'}", "-Wl,-Bsymbolic"]


def _asm_in_c(text: str) -> str:
    """`text` escaped for an assembler string inside a C string literal."""
    asm = text.replace("\\", "\\\\").replace('"', '\\"')
    return asm.replace("\\", "\\\\").replace('"', '\\"')


def link_shared_library(sources: dict[str, str], out: Path, archives: Iterable[Path] = (),
                        cflags: Iterable[str] = DEFAULT_CFLAGS, exports: Iterable[str] | None = None,
                        files: dict[str, bytes] | None = None, compiler: Compiler | None = None) -> None:
    """Compile `sources` ({file name: C source}) and link them with static `archives` into the
    shared library `out`. `files` ({name: bytes}) are written next to the sources first (data a
    source pulls in, e.g. with .incbin; the placeholder ``@DIR@`` in a source is replaced by
    that directory). `exports`: the only symbols the library exports (wildcards allowed; None:
    whatever the objects make visible)."""
    cc = compiler or find_compiler()
    flags = list(cflags)
    with tempfile.TemporaryDirectory(prefix="treecomp-link-") as tmp:
        tmpd = Path(tmp)
        for name, data in (files or {}).items():
            (tmpd / name).write_bytes(data)
        objs = []
        for name, src in sources.items():
            # once: the placeholder comes first (the .incbin), user text such as feature names
            # in the meta JSON after it is left alone
            (tmpd / name).write_text(src.replace("@DIR@", _asm_in_c(str(tmpd)), 1))
            obj = tmpd / (Path(name).stem + ".o")
            _run([*cc.argv, *flags, "-I", str(RUNTIME_DIR), "-c", str(tmpd / name), "-o", str(obj)],
                 f"compiling {name}")
            objs.append(str(obj))
        link = [*cc.argv, "-shared", *flags, *objs, *map(str, archives), "-o", str(out), "-lm"]
        if exports is not None:
            link[-3:-3] = _export_flags(tmpd, exports)
        _run(link, "linking")
