"""The aarch64 lane's host side: an emulated arm64 Debian host, set up once per machine, and
treecomp built and run on it (docs/aarch64.md).

What `ensure()` builds, without root and without touching the system (everything lives in
``$TREECOMP_AARCH64_CACHE``, default ``$XDG_CACHE_HOME/treecomp-aarch64`` or
``~/.cache/treecomp-aarch64``, in a directory named by the hash of this setup's description
(SETUP), so a changed package list gets a fresh root and the old one is removed):

- ``apt/``: a private apt state (its own sources list, lists and status; Debian 12's archive,
  checked with the host's Debian archive keyring) used only to download packages;
- ``sysroot/``: Debian 12 arm64 packages (DEBS_ARM64: CPython 3.11 with its headers, libc and
  its development files) extracted with ``dpkg-deb -x``, absolute symlinks made relative; the
  libraries' aarch64 wheels (WHEELS: manylinux, installed by the host's pip with ``--platform``)
  in its ``usr/lib/python3/dist-packages``, where the guest Python finds them. It is both QEMU's
  ``-L`` root and the cross compiler's ``--sysroot``: the layout of a real arm64 Debian host;
- ``tools/``: amd64 packages (DEBS_HOST): ``qemu-aarch64`` (QEMU 10) and the aarch64 cross gcc and
  binutils, extracted likewise; ``tools/bin/aarch64-linux-gnu-{gcc,ar}`` are wrappers that give
  them their libraries and the sysroot (what CC / AR name in the guest);
- ``sysroot/usr/bin/python3``: the guest Python as the host can exec it, a shell script that
  runs ``qemu-aarch64 -0 <itself> SYSROOT/usr/bin/python3.11``. The guest's
  ``sys.executable`` is that script, so a subprocess of the guest Python (``[sys.executable,
  ...]``, multiprocessing, the CLI) runs under QEMU too, with the same ``QEMU_CPU``.

`stage()` copies this checkout's package, runtime sources and tests into a directory and builds
treecomp's native parts there with the guest Python (``setup.py build_ext --inplace``, CC the
cross compiler): the install path a user on aarch64 takes. `guest()` runs a command on it.

By hand (from the repository root, with the test environment's Python):
  python -m tests.aarch64.lane setup                     # build (or check) the emulated host
  python -m tests.aarch64.lane run [--cpu max] [--all-families] [PYTEST ARGS]
                                                         # the lane's guest runs (what CI runs)
  python -m tests.aarch64.lane python --dir DIR [ARGS]   # the guest Python on a staged treecomp
                                                         # (staged into DIR on first use)
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

#: the Debian release and archive the emulated host is built from
DEBIAN = ("bookworm", (("http://deb.debian.org/debian", ("bookworm", "bookworm-updates",
                                                          "bookworm-backports")),
                       ("http://deb.debian.org/debian-security", ("bookworm-security",))))
KEYRING = "/usr/share/keyrings/debian-archive-keyring.gpg"
#: arm64 packages of the emulated host: CPython 3.11 and what it links, its headers and libc's
#: development files (the cross compiler's sysroot), libgomp / libstdc++ (LightGBM, XGBoost)
DEBS_ARM64 = (
    "libc6", "libgcc-s1", "libstdc++6", "libgomp1", "gcc-12-base", "zlib1g", "libexpat1",
    "libffi8", "libbz2-1.0", "liblzma5", "libssl3", "libsqlite3-0", "libncursesw6", "libtinfo6",
    "libreadline8", "libuuid1", "libcrypt1", "libdb5.3", "libnsl2", "libtirpc3",
    "libgssapi-krb5-2", "libk5crypto3", "libkrb5-3", "libkrb5support0", "libkeyutils1",
    "libcom-err2",
    "libpython3.11-minimal", "libpython3.11-stdlib", "python3.11-minimal", "python3.11",
    "libpython3.11", "libpython3.11-dev", "python3.11-dev", "libexpat1-dev", "zlib1g-dev",
    "libc6-dev", "linux-libc-dev", "libcrypt-dev", "libnsl-dev", "libtirpc-dev")
#: amd64 packages: QEMU user mode and the cross toolchain with the libraries gcc's and binutils'
#: binaries need (present wherever gcc is installed; carried to be sure). QEMU 10 from
#: bookworm-backports (statically linked; only its qemu-aarch64 is extracted): bookworm's QEMU
#: 7.2 deadlocks now and then when a multi-threaded guest forks (the c backend's parallel gcc
#: calls hung a guest process about one build in five), and it does not emulate /proc/cpuinfo
QEMU_DEB = "qemu-user/bookworm-backports"
DEBS_HOST = (
    QEMU_DEB, "binutils-aarch64-linux-gnu", "gcc-12-aarch64-linux-gnu",
    "cpp-12-aarch64-linux-gnu", "libgcc-12-dev-arm64-cross", "libgcc-s1-arm64-cross",
    "libisl23", "libmpc3", "libmpfr6", "libgmp10", "libjansson4")
#: aarch64 wheels for the guest (the libraries treecomp is compared with, its dependencies, the
#: test runner and setuptools for the build); pinned, so every run of one setup is the same
WHEELS = (
    "numpy==2.4.6", "scipy==1.17.1", "scikit-learn==1.9.1", "joblib==1.6.0",
    "threadpoolctl==3.8.0", "xgboost-cpu==3.2.0", "lightgbm==4.7.0", "llvmlite==0.50.0",
    "click==8.5.1", "pytest==9.2.0", "hypothesis==6.170.17", "setuptools==84.2.1")
#: manylinux tags the Debian 12 guest (glibc 2.36) accepts
PLATFORMS = ("manylinux2014_aarch64", "manylinux_2_17_aarch64", "manylinux_2_24_aarch64",
             "manylinux_2_27_aarch64", "manylinux_2_28_aarch64", "manylinux_2_31_aarch64",
             "manylinux_2_34_aarch64", "manylinux_2_35_aarch64", "manylinux_2_36_aarch64",
             "linux_aarch64")
#: bump when the steps below change in a way the lists above do not show
LAYOUT = 1
SETUP = {"layout": LAYOUT, "debian": DEBIAN, "arm64": DEBS_ARM64, "host": DEBS_HOST,
         "wheels": WHEELS, "platforms": PLATFORMS}
KEY = hashlib.sha256(json.dumps(SETUP, sort_keys=True).encode()).hexdigest()[:16]

#: the emulated CPUs the lane runs on: QEMU's `max` (SVE2, every extension QEMU has; SVE at 512
#: bits in user mode), the same with SVE's vectors at 128 and 256 bits (QEMU_CPU takes -cpu's
#: properties: where auto's choice between neon and sve changes, and the SVE code at each
#: length), and a NEON-only core; each ARM path treecomp offers is forced on each
CPUS = ("max", "max,sve128=on", "max,sve256=on", "cortex-a72")
PYTHON = "usr/bin/python3"          # the wrapper, inside the sysroot
PYTHON_BIN = "usr/bin/python3.11"
SITE = "usr/lib/python3/dist-packages"


class Unavailable(Exception):
    """This host cannot run the lane at all (not Linux x86-64, no apt / dpkg): a skip."""


class SetupError(Exception):
    """The lane could not be set up on a host that should run it (no network, a package
    missing from the archive, a tool failing): a failure, never a silent skip."""


def cache_root() -> Path:
    env = os.environ.get("TREECOMP_AARCH64_CACHE")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "treecomp-aarch64"


def host_problem() -> str | None:
    """Why this host cannot run the lane (None: it can)."""
    if sys.platform != "linux" or platform.machine() not in ("x86_64", "AMD64"):
        return f"the aarch64 lane emulates arm64 on x86-64 Linux; this is {sys.platform} {platform.machine()}"
    for tool in ("apt-get", "dpkg-deb", "tar"):
        if shutil.which(tool) is None:
            return f"the aarch64 lane needs {tool} (a Debian-based host); none on PATH"
    if not os.path.isfile(KEYRING):
        return f"the aarch64 lane checks Debian's archive with {KEYRING}; the host has none"
    return None


@dataclass(frozen=True)
class Lane:
    root: Path          # the cache directory of this setup

    @property
    def sysroot(self) -> Path:
        return self.root / "sysroot"

    @property
    def tools(self) -> Path:
        return self.root / "tools"

    @property
    def qemu(self) -> Path:
        return self.tools / "usr" / "bin" / "qemu-aarch64"

    @property
    def python(self) -> Path:
        return self.sysroot / PYTHON

    @property
    def cc(self) -> Path:
        return self.tools / "bin" / "aarch64-linux-gnu-gcc"

    @property
    def ar(self) -> Path:
        return self.tools / "bin" / "aarch64-linux-gnu-ar"

    def manifest(self) -> dict:
        return json.loads((self.root / "READY").read_text())

    def env(self, cpu: str, extra: dict[str, str] | None = None) -> dict[str, str]:
        """The environment of a guest process on CPU model `cpu`."""
        # nothing of the host's Python, loader or treecomp settings leaks into the guest
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("PYTHON", "QEMU_", "VIRTUAL_ENV", "TREECOMP_", "LD_"))}
        env.update(QEMU_CPU=cpu, QEMU_LD_PREFIX=str(self.sysroot), CC=str(self.cc),
                   AR=str(self.ar), OMP_NUM_THREADS="1", PYTHONHASHSEED="0")
        env.update(extra or {})
        return env

    def guest(self, argv: list[str], cpu: str = "max", env: dict[str, str] | None = None,
              cwd: Path | str | None = None, timeout: float | None = None,
              capture: bool = True) -> subprocess.CompletedProcess:
        """Run the guest Python with `argv` (its arguments) on CPU model `cpu`. With a
        `timeout`, in a process group of its own: on the timeout the whole group (the guest's
        children too) is killed and subprocess.TimeoutExpired raised. (Without one it stays in
        the caller's group, so that an interactive guest can read the terminal.)"""
        proc = subprocess.Popen([str(self.python), *argv], env=self.env(cpu, env), cwd=cwd,
                                text=True, start_new_session=timeout is not None,
                                stdout=subprocess.PIPE if capture else None,
                                stderr=subprocess.STDOUT if capture else None)
        try:
            out, _ = proc.communicate(timeout=timeout)
        except BaseException as exc:  # a timeout, or an interrupt: leave nothing running
            try:
                if timeout is not None:
                    os.killpg(proc.pid, signal.SIGKILL)
                else:
                    proc.kill()
            except ProcessLookupError:
                pass
            out, _ = proc.communicate()
            if isinstance(exc, subprocess.TimeoutExpired):
                raise subprocess.TimeoutExpired(proc.args, timeout or 0, output=out) from None
            raise
        return subprocess.CompletedProcess(proc.args, proc.returncode, out)


# -- set-up -------------------------------------------------------------------------------------
def _run(argv: list[str], what: str, **kw) -> str:
    try:
        out = subprocess.run(argv, capture_output=True, text=True, **kw)
    except OSError as exc:
        raise SetupError(f"{what}: cannot run {argv[0]}: {exc}") from None
    if out.returncode != 0:
        msg = (out.stderr.strip() + "\n" + out.stdout.strip()).strip()
        raise SetupError(f"{what} failed (exit {out.returncode}): {shlex.join(argv[:8])} ...\n"
                         f"{msg[-3000:]}")
    return out.stdout


def _apt(apt: Path) -> list[str]:
    """apt-get's options for the private state in `apt` (amd64 + arm64 lists, no system file
    read or written but the keyring)."""
    return ["-q", "-o", f"Dir={apt}", "-o", f"Dir::State::status={apt}/status",
            "-o", "APT::Architecture=amd64", "-o", "APT::Architectures::=amd64",
            "-o", "APT::Architectures::=arm64", "-o", "Acquire::Languages=none",
            "-o", "Debug::NoLocking=1", "-o", "APT::Sandbox::User=root"]


def _download(apt: Path, debs: Path, log) -> None:
    for d in ("etc/apt/sources.list.d", "etc/apt/preferences.d", "etc/apt/apt.conf.d",
              "var/lib/apt/lists/partial", "var/cache/apt/archives/partial"):
        (apt / d).mkdir(parents=True, exist_ok=True)
    (apt / "status").touch()
    suite, archives = DEBIAN
    (apt / "etc/apt/sources.list").write_text("".join(
        f"deb [arch=amd64,arm64 signed-by={KEYRING}] {url} {dist} main\n"
        for url, dists in archives for dist in dists))
    opts = _apt(apt)
    t0 = time.perf_counter()
    _run(["apt-get", *opts, "update", "--error-on=any"], f"apt-get update (Debian {suite}, private lists)")
    debs.mkdir(parents=True, exist_ok=True)
    names = [*DEBS_HOST, *(f"{p}:arm64" for p in DEBS_ARM64)]
    _run(["apt-get", *opts, "download", *names], "apt-get download", cwd=debs)
    log(f"downloaded {len(names)} Debian packages in {time.perf_counter() - t0:.1f} s")


def _extract(debs: Path, sysroot: Path, tools: Path, log) -> None:
    t0 = time.perf_counter()
    for deb in sorted(debs.glob("*.deb")):
        if deb.name.endswith("_arm64.deb"):
            _run(["dpkg-deb", "-x", str(deb), str(sysroot)], f"extracting {deb.name}")
        elif deb.name.startswith("qemu-user_"):  # only the one emulator of ~30
            tar = subprocess.Popen(["dpkg-deb", "--fsys-tarfile", str(deb)], stdout=subprocess.PIPE)
            _run(["tar", "-x", "-C", str(tools), "./usr/bin/qemu-aarch64"],
                 f"extracting qemu-aarch64 from {deb.name}", stdin=tar.stdout)
            tar.stdout.close()
            if tar.wait() != 0:
                raise SetupError(f"dpkg-deb --fsys-tarfile {deb.name} failed")
        else:
            _run(["dpkg-deb", "-x", str(deb), str(tools)], f"extracting {deb.name}")
    for top in (sysroot, tools):  # /x -> top/x, relative: valid wherever the tree is
        for p in top.rglob("*"):
            if p.is_symlink() and os.readlink(p).startswith("/"):
                target = top / os.readlink(p).lstrip("/")
                p.unlink()
                p.symlink_to(os.path.relpath(target, p.parent))
    log(f"extracted the packages in {time.perf_counter() - t0:.1f} s")


def _write_script(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(0o755)


def _wrappers(final: Path, staging: Path) -> None:
    """Scripts that name their final paths (the tree is renamed into `final` when complete)."""
    sysroot, tools = final / "sysroot", final / "tools"
    q = shlex.quote
    libs = q(str(tools / "usr/lib/x86_64-linux-gnu"))
    for name, exe, extra in (("gcc", "aarch64-linux-gnu-gcc-12", f"--sysroot={q(str(sysroot))} "),
                             ("ar", "aarch64-linux-gnu-ar", "")):
        _write_script(staging / "tools/bin" / f"aarch64-linux-gnu-{name}", (
            "#!/bin/sh\n# the aarch64 lane's cross tool (tests/aarch64/lane.py)\n"
            f"LD_LIBRARY_PATH={libs}${{LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}}\n"
            "export LD_LIBRARY_PATH\n"
            f"exec {q(str(tools / 'usr/bin' / exe))} {extra}\"$@\"\n"))
    # QEMU_CPU / QEMU_LD_PREFIX come from the environment (Lane.env), so they pass on to a
    # guest's subprocesses; -0 makes this script the guest's argv[0], hence sys.executable
    _write_script(staging / "sysroot" / PYTHON, (
        "#!/bin/sh\n# the emulated arm64 Python (tests/aarch64/lane.py)\n"
        f"exec {q(str(tools / 'usr/bin/qemu-aarch64'))} -0 {q(str(sysroot / PYTHON))} "
        f"-L {q(str(sysroot))} {q(str(sysroot / PYTHON_BIN))} \"$@\"\n"))


def _wheels(site: Path, log) -> None:
    t0 = time.perf_counter()
    argv = [sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check",
            "--no-warn-script-location", "--target", str(site), "--only-binary=:all:",
            "--python-version", "3.11", "--implementation", "cp", "--abi", "cp311",
            *(a for p in PLATFORMS for a in ("--platform", p)), *WHEELS]
    _run(argv, "pip install of the aarch64 wheels")
    log(f"installed the aarch64 wheels in {time.perf_counter() - t0:.1f} s")


def _cpu_seconds() -> float:
    """User + system time of this process and its waited-for children."""
    import resource
    return sum(r.ru_utime + r.ru_stime for r in (resource.getrusage(resource.RUSAGE_SELF),
                                                  resource.getrusage(resource.RUSAGE_CHILDREN)))


SMOKE = """\
import json, platform, sys
import numpy, scipy, sklearn, xgboost, lightgbm, llvmlite.binding, pytest
assert platform.machine() == "aarch64", platform.machine()
print(json.dumps({"machine": platform.machine(), "python": platform.python_version(),
                  "executable": sys.executable, "numpy": numpy.__version__,
                  "scipy": scipy.__version__, "sklearn": sklearn.__version__,
                  "xgboost": xgboost.__version__, "lightgbm": lightgbm.__version__,
                  "llvmlite": llvmlite.__version__}))
"""


def ensure(log=None) -> Lane:
    """The emulated host, set up now if this machine has none (about a minute: downloads of
    ~190 MB of Debian packages and ~150 MB of wheels, ~1 GB on disk). Raises Unavailable
    (skip) or SetupError (fail)."""
    log = log or (lambda msg: print(f"[aarch64 lane] {msg}", file=sys.stderr, flush=True))
    why = host_problem()
    if why:
        raise Unavailable(why)
    top = cache_root()
    final = top / KEY
    lane = Lane(final)
    if (final / "READY").is_file():
        os.utime(final / "READY")  # in use: see the pruning below
        return lane
    try:
        top.mkdir(parents=True, exist_ok=True)
        lock = open(top / "lock", "w")
    except OSError as exc:
        raise SetupError(f"cannot create the lane's cache {top}: {exc} (TREECOMP_AARCH64_CACHE "
                         "names another directory)") from exc
    import fcntl  # (POSIX; the lane runs only where host_problem() is None)
    with lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another session may be setting up right now
        if (final / "READY").is_file():
            return lane
        t0, c0 = time.perf_counter(), _cpu_seconds()
        for old in top.iterdir():
            # half-built trees (no one else builds while we hold the lock), and other setups'
            # trees unused for two days (another checkout may still use a recent one)
            ready = old / "READY"
            if old.is_dir() and (not ready.is_file() or time.time() - ready.stat().st_mtime > 2 * 86400):
                shutil.rmtree(old, ignore_errors=True)
        work = Path(tempfile.mkdtemp(prefix=f"{KEY}.", dir=top))
        try:
            debs = work / "debs"
            _download(work / "apt", debs, log)
            (work / "sysroot").mkdir()
            (work / "tools").mkdir()
            _extract(debs, work / "sysroot", work / "tools", log)
            packages = sorted(p.name for p in debs.glob("*.deb"))  # name_version_arch.deb
            shutil.rmtree(debs)
            _wrappers(final, work)
            _wheels(work / "sysroot" / SITE, log)
            os.rename(work, final)
        except BaseException:
            shutil.rmtree(work, ignore_errors=True)
            shutil.rmtree(final, ignore_errors=True)
            raise
        t1, c1 = time.perf_counter(), _cpu_seconds()
        try:
            out = lane.guest(["-c", SMOKE], timeout=600)
            if out.returncode != 0:
                raise SetupError(f"the emulated Python does not run the libraries:\n{out.stdout[-3000:]}")
            info = json.loads(out.stdout.strip().splitlines()[-1])
        except BaseException:
            shutil.rmtree(final, ignore_errors=True)
            raise
        info.update(setup_s=round(t1 - t0, 1), setup_cpu_s=round(c1 - c0, 1),
                    smoke_s=round(time.perf_counter() - t1, 1),
                    smoke_cpu_s=round(_cpu_seconds() - c1, 1), key=KEY, debs=packages,
                    wheels=sorted(p.name[:-len(".dist-info")]  # the dependencies' too
                                  for p in (lane.sysroot / SITE).glob("*.dist-info")))
        (final / "READY").write_text(json.dumps(info, indent=1))
        log(f"set up in {t1 - t0:.0f} s ({c1 - c0:.0f} s of CPU), checked in {info['smoke_s']:.0f} s "
            f"({info['smoke_cpu_s']:.0f} s of CPU), at {final}")
    return lane


# -- treecomp on the emulated host ---------------------------------------------------------------
#: what stage() copies: the package's sources (not its built parts), the build, the tests
STAGE = ("setup.py", "pyproject.toml", "README.md", "MANIFEST.in", "runtime", "treecomp", "tests")
_NOT_STAGED = shutil.ignore_patterns("*.so", "*.a", "*.o", "__pycache__", "*.pyc", "*.egg-info")


def copy_sources(dest: Path, root: Path = ROOT) -> None:
    """Copy STAGE from `root` into `dest`, replacing what an earlier stage left there (its built
    parts included: the stage builds them again). Symlinks are kept (treecomp/runtime is a link
    to runtime/, as in the checkout); copying over an existing stage must not trip on them."""
    dest.mkdir(parents=True, exist_ok=True)
    for name in STAGE:
        src, target = root / name, dest / name
        if target.is_symlink() or target.is_file():
            target.unlink()
        elif target.is_dir():
            shutil.rmtree(target)
        if src.is_dir():
            shutil.copytree(src, target, symlinks=True, ignore=_NOT_STAGED)
        elif src.is_file():
            shutil.copy2(src, target)


def stage(lane: Lane, dest: Path, cpu: str = "max", log=None) -> dict:
    """Copy this checkout into `dest` and build treecomp's native parts there on the emulated
    host (the guest Python runs setup.py; CC / AR are the cross tools): what an aarch64 user's
    install does. Returns the build's timing; SetupError if it fails."""
    log = log or (lambda msg: print(f"[aarch64 lane] {msg}", file=sys.stderr, flush=True))
    copy_sources(dest)
    t0, c0 = time.perf_counter(), _cpu_seconds()
    try:
        out = lane.guest(["setup.py", "-q", "build_ext", "--inplace"], cpu=cpu, cwd=dest, timeout=1200)
    except subprocess.TimeoutExpired as exc:
        raise SetupError(f"building treecomp on the emulated host hung:\n{(exc.output or '')[-4000:]}") from None
    dt, cpu_s = time.perf_counter() - t0, _cpu_seconds() - c0
    built = sorted(p.name for p in (dest / "treecomp").iterdir() if p.suffix in (".so", ".a"))
    # the kernel (shared and static), the entry and the number parser (setup.py's extensions)
    parts = {b.split(".")[0] + ("" if b.endswith(".so") else ".a") for b in built}
    if out.returncode != 0 or not {"_arrays_kernel", "_arrays_kernel.a", "_tc_entry",
                                   "_numparse"} <= parts:
        raise SetupError(f"building treecomp on the emulated host failed (exit {out.returncode}; "
                         f"built: {built}):\n{out.stdout[-4000:]}")
    log(f"built treecomp's native parts on the emulated host in {dt:.0f} s ({cpu_s:.0f} s of "
        f"CPU) in {dest}: {', '.join(built)}")
    return {"build_s": round(dt, 1), "build_cpu_s": round(cpu_s, 1), "built": built}


def main(argv: list[str] | None = None) -> int:
    import argparse
    ap = argparse.ArgumentParser(prog="python -m tests.aarch64.lane", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("setup", help="set up (or check) the emulated host; print its manifest")
    r = sub.add_parser("run", help="stage treecomp and run the lane's guest tests")
    r.add_argument("--cpu", action="append", choices=CPUS, help="CPU model(s) (default: all)")
    r.add_argument("--dir", type=Path, help="staging directory (default: a temporary one)")
    r.add_argument("--all-families", action="store_true",
                   help="every kernel-path family, not only suite.CI_FAMILIES")
    r.add_argument("pytest_args", nargs="*", help="extra arguments for the guest pytest")
    p = sub.add_parser("python", help="the guest Python, on a staged treecomp")
    p.add_argument("--cpu", default="max", choices=CPUS)
    p.add_argument("--dir", type=Path, required=True, help="a staging directory (stage once)")
    p.add_argument("args", nargs=argparse.REMAINDER)
    a, rest = ap.parse_known_args(argv)  # the guest's own options (-c, -m, pytest's -x) pass on
    lane = ensure()
    if a.cmd == "setup":
        print(json.dumps(lane.manifest(), indent=1))
        return 0
    from tests.aarch64 import suite
    if a.cmd == "run":
        d = a.dir or Path(tempfile.mkdtemp(prefix="treecomp-aarch64-"))
        stage(lane, d)
        ok = True
        for cpu in a.cpu or CPUS:
            res = suite.run(lane, d, cpu, [*a.pytest_args, *rest], all_families=a.all_families)
            print(res.summary(), flush=True)
            ok &= res.ok
        return 0 if ok else 1
    if not (a.dir / "treecomp").is_dir():
        stage(lane, a.dir, cpu=a.cpu)
    return lane.guest([*rest, *a.args], cpu=a.cpu, cwd=a.dir, capture=False,
                      env={"PYTHONPATH": str(a.dir)}).returncode


if __name__ == "__main__":
    sys.exit(main())
