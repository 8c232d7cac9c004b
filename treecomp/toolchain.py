"""The only module that runs a C compiler or linker, and the content-addressed artifact cache.

Cache layout: ``$TREECOMP_CACHE_DIR`` (default ``$XDG_CACHE_HOME/treecomp`` or
``~/.cache/treecomp``) holds ``<key>.<suffix>`` files, where the key is a sha256 over everything
that determines the bytes: IR digest, backend, options, treecomp version and compiler identity.
Writes go to a temporary file in the same directory and are published with ``os.replace``, so
two processes building the same model at once never see a half-written file (the loser's
rename simply replaces an identical file). Each entry is published with a digest beside it
(``<key><suffix>.sha256``: sha256 over the entry's name and bytes) and a hit is trusted only
when its bytes still match that digest: a truncated, damaged or swapped entry (another model's
file under this name) is rebuilt, never loaded. The compiler is part of every key as its whole
command (``$CC`` with its flags), its resolved path and its ``--version`` line.

Every shared library built as a model artifact carries a *seal* (SEAL_MARKER followed by the
sha256 of the whole file with those 32 digest bytes zeroed, patched in after linking: seal);
check_seal verifies it before a library is loaded, and the library's own treecomp_verify()
(runtime/seal.c, runtime/treecomp.h) does the same for C callers.

A cache directory that cannot be created or written (read-only file system, another user's
directory, full disk) does not stop compiling or loading: the file is built in a private
temporary directory of this process instead (removed at exit); so does a build whose output
cannot be written there (ENOSPC during a link: libraries are linked in a temporary build
directory and then copied in). Writing a user's output path (``publish``) that fails raises
treecomp.errors.WriteError naming the path.

Every compiler, archiver and linker command runs with a time limit (BUILD_TIMEOUT_ENV, default
DEFAULT_BUILD_TIMEOUT_S seconds): a command that runs longer is killed with its process group and
raises CompileError. Flags that break exact floating point (EXACTNESS_BREAKING_FLAGS: -ffast-math,
-Ofast, -ffp-contract=fast, ...) are refused in ``$CC`` and in a backend's ``cflags``.
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
import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable

from .version import __version__
from . import platform
from .errors import ArtifactError, CompileError, WriteError, warn_slow_path

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
    for p in (__version__, code_fingerprint(), platform.host_key(), *parts):
        h.update(repr(p).encode())
        h.update(b"\0")
    return h.hexdigest()[:40]


#: first bytes of the executable formats a build writes (ELF, Mach-O, PE): published mode 0755
_EXECUTABLE_MAGIC = (b"\x7fELF", b"\xfe\xed\xfa\xce", b"\xfe\xed\xfa\xcf", b"\xce\xfa\xed\xfe",
                     b"\xcf\xfa\xed\xfe", b"\xca\xfe\xba\xbe", b"MZ")


def _published_mode(path: Path) -> int:
    """0o755 for a shared library or executable (by its first bytes), 0o644 for data (a .tc
    table file, an IR file, an object file, an archive)."""
    with open(path, "rb") as f:
        head = f.read(4)
    return 0o755 if head.startswith(_EXECUTABLE_MAGIC) else 0o644


def publish(path: Path, writer: Callable[[Path], None], digest_of: str | None = None) -> Path:
    """Create `path` atomically: `writer` fills a temp file that is then renamed into place,
    mode 0o755 for a shared library and 0o644 for anything else.

    digest_of: a cache entry's name: its digest (entry_digest) is published beside it after the
    entry itself (cached() trusts an entry only when they agree).

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
        os.chmod(tmp, _published_mode(Path(tmp)))
        digest = entry_digest(digest_of, Path(tmp).read_bytes()) if digest_of is not None else None
        os.replace(tmp, path)
        if digest is not None:
            sidecar = _digest_path(path)
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{sidecar.name}.", suffix=".tmp")
            with os.fdopen(fd, "w") as f:
                f.write(digest + "\n")
            os.chmod(tmp, 0o644)
            os.replace(tmp, sidecar)
    except WriteError:
        raise
    except OSError as exc:
        raise WriteError(f"cannot write {path}: {exc}") from exc
    finally:
        if tmp is not None and os.path.exists(tmp):
            os.unlink(tmp)
    return path


def entry_digest(name: str, data: bytes) -> str:
    """The digest a cache entry `name` holding `data` is published with: sha256 over the name
    and the bytes, so another entry's file (or its digest file) under this name never matches."""
    h = hashlib.sha256(name.encode() + b"\0")
    h.update(data)
    return h.hexdigest()


def _digest_path(path: Path) -> Path:
    return path.with_name(path.name + ".sha256")


def _intact(path: Path) -> bool:
    """Is the cache entry at `path` present and exactly what was published there (its bytes
    match the digest published beside it)? False for a missing, truncated, damaged or replaced
    entry and for one without a digest (a crashed publish): the caller rebuilds it."""
    try:
        want = _digest_path(path).read_text().strip()
        data = path.read_bytes()
    except (OSError, UnicodeDecodeError):
        return False
    return bool(data) and entry_digest(path.name, data) == want


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


def cached(key: str, suffix: str, writer: Callable[[Path], None],
           intact: Callable[[Path], bool] | None = None) -> Path:
    """The cached file for `key`, created with `writer` on a miss (in this process's private
    directory when the cache cannot be written: see the module docstring). A file found under
    the name is returned only when its bytes match the digest published with it (or, given
    `intact`, when intact(path) says it holds what the caller wants: e.g. a comparison with the
    bytes `writer` writes, which makes reading the digest too redundant); otherwise it is
    rebuilt in place."""
    name = f"{key}{suffix}"
    ok = intact or _intact
    try:
        path = cache_dir() / name
        if ok(path):
            return path
        return publish(path, writer, digest_of=name)
    except OSError as exc:  # WriteError included
        shared = exc
    path = private_dir() / name
    if ok(path):
        return path
    try:
        return publish(path, writer, digest_of=name)
    except WriteError as exc:
        raise WriteError(f"{exc} (tried after the cache failed: {shared})") from exc


# -- seals: a digest every model library carries, checked before it is loaded ------------------
#: the 16 bytes that open a seal (runtime/treecomp.h's TREECOMP_SEAL_MARKER): the sha256 of the
#: whole file, with the 32 bytes after the marker zeroed, follows it
SEAL_MARKER = bytes.fromhex("89544353 45414c01 0d0a1a0a fe5ea1ed")
SEAL_SIZE = len(SEAL_MARKER) + 32
#: the translation unit linked into every model library (the seal and treecomp_verify)
SEAL_UNIT = {"treecomp_seal.c": '#include "seal.c"\n'}


def _seal_offset(data: bytes) -> int:
    """Offset of the seal's digest in `data`; ValueError unless exactly one seal lies inside."""
    i = data.find(SEAL_MARKER)
    if i < 0:
        raise ValueError("has no treecomp seal")
    if data.find(SEAL_MARKER, i + 1) >= 0:
        raise ValueError("has more than one treecomp seal")
    if i + SEAL_SIZE > len(data):
        raise ValueError("ends inside its seal (truncated)")
    return i + len(SEAL_MARKER)


def _sealed_digest(data: bytes, at: int) -> bytes:
    h = hashlib.sha256()
    mv = memoryview(data)
    h.update(mv[:at])
    h.update(bytes(32))
    h.update(mv[at + 32:])
    return h.digest()


def seal(path: Path) -> None:
    """Write the digest into the seal of the freshly linked library at `path` (CompileError if
    the library does not hold exactly one seal: the seal unit was not linked in, or the model's
    own bytes happen to contain the marker)."""
    data = Path(path).read_bytes()
    try:
        at = _seal_offset(data)
    except ValueError as exc:
        raise CompileError(f"cannot seal {Path(path).name}: the library {exc}") from None
    with open(path, "r+b") as f:
        f.seek(at)
        f.write(_sealed_digest(data, at))


def check_seal(data: bytes, name: str = "the library") -> str:
    """ArtifactError unless `data` (a library's bytes) holds exactly one seal and the seal's
    digest is the sha256 of `data` with those 32 bytes zeroed: the file is byte for byte what
    the build wrote. Nothing is loaded or run. Returns the digest (hex): once checked, the
    file's identity."""
    try:
        at = _seal_offset(data)
    except ValueError as exc:
        raise ArtifactError(f"{name} {exc}: not a treecomp artifact, an artifact written before "
                            "treecomp sealed them (recompile it), or a damaged one") from None
    digest = _sealed_digest(data, at)
    if data[at:at + 32] != digest:
        raise ArtifactError(f"{name} is damaged: its bytes do not match the digest sealed into "
                            "it when it was built (truncated, altered or replaced)")
    return digest.hex()


# -- the C compiler -----------------------------------------------------------------------------
@dataclass(frozen=True)
class Compiler:
    argv: tuple[str, ...]   # the compiler command (e.g. ("gcc",) or ("ccache", "cc"))
    version: str            # first line of `cc --version`
    path: str = ""          # argv[0] resolved on PATH

    @property
    def key(self) -> tuple[str, ...]:
        """What identifies this compiler in cache keys: its whole command (flags included),
        the resolved executable and its version line."""
        return (*self.argv, self.path, self.version)


def _no_compiler(why: str) -> CompileError:
    exc = CompileError(
        f"no working C compiler ({why}). Install gcc or clang, set CC, or use a backend that "
        "needs none: backend='llvm' (JIT through llvmlite) or backend='arrays'.")
    exc.why = why  # what so_needs_compiler quotes
    return exc


#: flags that let a compiler change floating-point results (reassociate sums, fuse multiply-adds,
#: assume no NaN / inf / signed zeros, flush denormals, call other math functions, compute in
#: x87 extended precision): refused in $CC and in a backend's cflags (check_flags). -ffast-math
#: with gcc 12 also links crtfastmath.o, which turns on flush-to-zero for the whole process.
EXACTNESS_BREAKING_FLAGS = ("-ffast-math", "-Ofast", "-funsafe-math-optimizations",
                            "-fassociative-math", "-freciprocal-math", "-ffinite-math-only",
                            "-fno-signed-zeros", "-fno-honor-nans", "-fno-honor-infinities",
                            "-fapprox-func", "-fsingle-precision-constant", "-mdaz-ftz", "-mrecip")
#: flag prefixes refused unless the value is the one named (None: refused with any value)
_EXACTNESS_PREFIXES = {"-ffp-contract=": "off", "-ffp-model=": "strict", "-mfpmath=": "sse",
                       "-fdenormal-fp-math": None, "-fveclib=": None, "-mveclibabi=": None,
                       "-mrecip=": None, "-fexcess-precision=": "standard"}


def check_flags(flags: Iterable[str], where: str) -> None:
    """CompileError naming the first flag of `flags` that breaks bit-exact floating point
    (EXACTNESS_BREAKING_FLAGS and the prefixes beside it); `where` says where it came from."""
    for flag in flags:
        # gcc reads --fast-math as -ffast-math, --foo as -foo
        forms = (flag,) if not flag.startswith("--") else ("-" + flag[2:], "-f" + flag[2:])
        bad = False
        for f in forms:
            bad |= f in EXACTNESS_BREAKING_FLAGS
            for prefix, ok in _EXACTNESS_PREFIXES.items():
                if f.startswith(prefix) and (ok is None or f[len(prefix):] != ok):
                    bad = True
        if bad:
            raise CompileError(
                f"{where} contains {flag}, which lets the compiler change floating-point results "
                "(reorder sums, fuse multiply-adds, assume no NaN / inf, flush denormals): "
                "treecomp's artifacts must compute exactly what the library computes. Remove it "
                "(treecomp builds with -O2 / -O3 and -ffp-contract=off; backend option "
                "native=True adds -march=native)")


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
    return Compiler(argv=cmd, version=(out.stdout.splitlines() or ["?"])[0].strip(),
                    path=os.path.realpath(exe))


def find_compiler() -> Compiler:
    """$CC if set (and then only it), else the first of cc, gcc, clang on PATH. CompileError
    when $CC holds a flag that breaks exact floating point (check_flags)."""
    platform.check_platform("building native code with a C compiler")
    env = os.environ.get("CC")
    if env:
        argv = tuple(shlex.split(env))
        if not argv:
            raise _no_compiler("CC is set but empty")
        check_flags(argv[1:], f"CC={env!r}")
        return _probe(argv)
    for name in ("cc", "gcc", "clang"):
        if shutil.which(name):
            return _probe((name,))
    raise _no_compiler("none of cc, gcc, clang is on PATH and CC is not set")


def have_compiler() -> bool:
    """Whether find_compiler finds a working C compiler. Where $CC is set but unusable (a flag
    that breaks exact floating point, a command that does not run), treecomp works as on a host
    without a compiler: one SlowPathWarning per process says so."""
    try:
        find_compiler()
        return True
    except CompileError as exc:
        if os.environ.get("CC"):
            warn_slow_path("cc-unusable",
                           f"treecomp: CC={os.environ['CC']!r} is not usable ({exc}); treecomp "
                           "runs as on a host without a C compiler (slower compiler-free paths, "
                           "no .so artifacts). Fix or unset CC to use the C compiler.")
        return False


def so_needs_compiler(exc: BaseException) -> CompileError:
    """The error for writing a shared library (.so) where no C compiler links one (`exc`: why
    find_compiler failed), with what to do instead."""
    return CompileError(
        f"writing a shared library (.so) needs a C compiler to link it (the system linker, "
        f"through cc), and there is none here "
        f"({getattr(exc, 'why', exc)}). Install gcc or clang (or set CC), or write a .tc table file instead "
        "(backend='arrays': Predictor.save('model.tc'), `treecomp compile MODEL -o model.tc`): "
        "it loads with treecomp.load wherever treecomp is installed, no compiler needed.")


#: the environment variable that sets the time limit of each compiler / linker / archiver
#: command, in seconds (0: none)
BUILD_TIMEOUT_ENV = "TREECOMP_BUILD_TIMEOUT"
#: its default: generous for the biggest translation units measured (a 5,000-tree model's
#: units compile in well under a minute each on the 2-core dev box)
DEFAULT_BUILD_TIMEOUT_S = 600.0


def build_timeout() -> float | None:
    """Seconds a build command may run ($TREECOMP_BUILD_TIMEOUT, default
    DEFAULT_BUILD_TIMEOUT_S; None: no limit when it is 0)."""
    env = os.environ.get(BUILD_TIMEOUT_ENV, "").strip()
    if not env:
        return DEFAULT_BUILD_TIMEOUT_S
    try:
        limit = float(env)
    except ValueError:
        raise CompileError(f"{BUILD_TIMEOUT_ENV}={env!r} is not a number of seconds "
                           "(0 for no limit)") from None
    if not limit >= 0:  # NaN too
        raise CompileError(f"{BUILD_TIMEOUT_ENV}={env!r} must be >= 0 seconds (0 for no limit)")
    return limit or None


def _kill_group(proc: subprocess.Popen) -> None:
    """Kill a command started in its own session and everything it started (the compiler
    driver's cc1 / as / ld)."""
    try:
        os.killpg(proc.pid, 9)
    except (OSError, AttributeError):  # gone already, or no process groups (Windows)
        proc.kill()


def _run(argv: list[str], what: str) -> None:
    limit = build_timeout()
    try:
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                errors="replace", start_new_session=os.name == "posix")
    except OSError as exc:
        raise CompileError(f"{what}: cannot run {argv[0]!r}: {exc}") from None
    try:
        stdout, stderr = proc.communicate(timeout=limit)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        proc.communicate()
        raise CompileError(
            f"{what} did not finish in {limit:g} s and was stopped: {' '.join(argv[:6])} ... "
            f"(a hung compiler, or a model too big to build in that time: set "
            f"{BUILD_TIMEOUT_ENV} to more seconds, or 0 for no limit; backend='arrays' needs "
            "no compiler)") from None
    except BaseException:  # KeyboardInterrupt: its own session got no SIGINT, so stop it here
        _kill_group(proc)
        proc.wait()
        raise
    if proc.returncode != 0:
        msg = (stderr or stdout).strip()
        if len(msg) > 4000:
            msg = msg[:2000] + "\n...\n" + msg[-2000:]
        raise CompileError(f"{what} failed (exit {proc.returncode}): {' '.join(argv[:6])} ...\n{msg}")


def _finish(tmp_out: Path, out: Path, seal_it: bool) -> None:
    """Seal a library linked in a build directory and copy it to `out`: the linker never writes
    into the cache itself, so a full cache disk is an OSError here (cached() then builds in the
    private directory), not a failed link."""
    if seal_it:
        seal(tmp_out)
    shutil.copyfile(tmp_out, out)


def build_shared_library(sources: dict[str, str], out: Path, cflags: Iterable[str] = DEFAULT_CFLAGS,
                         jobs: int | None = None, compiler: Compiler | None = None,
                         progress: Callable[[str], None] | None = None,
                         files: dict[str, bytes] | None = None, seal: bool = False) -> None:
    """Compile translation units {file name: C source} in parallel and link them into `out`.
    `files` as link_shared_library's (data a unit pulls in with .incbin from ``@DIR@``).
    seal: the library is a model artifact: SEAL_UNIT is linked in and sealed (seal())."""
    cc = compiler or find_compiler()
    flags = list(cflags)
    check_flags(flags, "the compiler flags")
    with tempfile.TemporaryDirectory(prefix="treecomp-build-") as tmp:
        for name, data in (files or {}).items():
            (Path(tmp) / name).write_bytes(data)
        if files:  # once per unit: the placeholder comes first, user text after it is left alone
            sources = {k: v.replace("@DIR@", _asm_in_c(tmp), 1) for k, v in sources.items()}
        if seal:
            sources = {**sources, **SEAL_UNIT}
        objs = _compile_objects(sources, Path(tmp), cc, flags, jobs, progress)
        tmp_out = Path(tmp) / "out.so"
        _run([*cc.argv, platform.SHARED_FLAG, *flags, *map(str, objs), "-o", str(tmp_out), "-lm",
              *platform.link_flags(seal)], "linking")
        _finish(tmp_out, Path(out), seal)


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


def link_objects(objects: dict[str, bytes], out: Path, compiler: Compiler | None = None,
                 seal: bool = False) -> None:
    """Link object files (e.g. from llvmlite) into a shared library with the system linker;
    seal: as build_shared_library's (SEAL_UNIT compiled with DEFAULT_CFLAGS)."""
    cc = compiler or find_compiler()
    with tempfile.TemporaryDirectory(prefix="treecomp-link-") as tmp:
        paths = []
        for name, data in objects.items():
            p = Path(tmp) / name
            p.write_bytes(data)
            paths.append(str(p))
        if seal:
            paths += map(str, _compile_objects(dict(SEAL_UNIT), Path(tmp), cc,
                                               list(DEFAULT_CFLAGS), 1, lambda _: None))
        tmp_out = Path(tmp) / "out.so"
        _run([*cc.argv, platform.SHARED_FLAG, *paths, "-o", str(tmp_out), "-lm", *platform.link_flags(seal)],
             "linking")
        _finish(tmp_out, Path(out), seal)


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
    check_flags(flags, "the compiler flags")
    with tempfile.TemporaryDirectory(prefix="treecomp-build-") as tmp:
        tmpd = Path(tmp)
        objs = _compile_objects(sources, tmpd, cc, flags, jobs, progress)
        tmp_out = tmpd / "out.a"
        _run([ar, "rcs", str(tmp_out), *map(str, objs)], "archiving")
        shutil.copyfile(tmp_out, out)


def _asm_in_c(text: str) -> str:
    """`text` escaped for an assembler string inside a C string literal."""
    asm = text.replace("\\", "\\\\").replace('"', '\\"')
    return asm.replace("\\", "\\\\").replace('"', '\\"')


def link_shared_library(sources: dict[str, str], out: Path, archives: Iterable[Path] = (),
                        cflags: Iterable[str] = DEFAULT_CFLAGS, exports: Iterable[str] | None = None,
                        files: dict[str, bytes] | None = None, compiler: Compiler | None = None,
                        seal: bool = False) -> None:
    """Compile `sources` ({file name: C source}) and link them with static `archives` into the
    shared library `out`. `files` ({name: bytes}) are written next to the sources first (data a
    source pulls in, e.g. with .incbin; the placeholder ``@DIR@`` in a source is replaced by
    that directory). `exports`: the only symbols the library exports (wildcards allowed; None:
    whatever the objects make visible). seal: as build_shared_library's."""
    cc = compiler or find_compiler()
    flags = list(cflags)
    check_flags(flags, "the compiler flags")
    if seal:
        sources = {**sources, **SEAL_UNIT}
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
        tmp_out = tmpd / "out.so"
        link = [*cc.argv, platform.SHARED_FLAG, *flags, *objs, *map(str, archives)]
        if exports is not None:
            link += platform.export_flags(tmpd, exports)
        _run([*link, "-o", str(tmp_out), "-lm", *platform.link_flags(seal)], "linking")
        _finish(tmp_out, Path(out), seal)
