"""The toolchain: compiler commands in cache keys, flags that break exactness, time limits, full
disks during a build, the cache's digests, seals and the modes of published files."""

import errno
import os
import shutil
import stat
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import treecomp
from treecomp import interp, loader, toolchain
from treecomp.errors import ArtifactError, CompileError
from tests.randforest import random_forest, random_rows

pytestmark = pytest.mark.skipif(not toolchain.have_compiler(), reason="no C compiler")
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """An empty cache of this test's own, and no kernel remembered from another test."""
    d = tmp_path / "cache"
    d.mkdir()
    monkeypatch.setenv("TREECOMP_CACHE_DIR", str(d))
    monkeypatch.setattr(loader, "_LOADED", type(loader._LOADED)())
    toolchain._probe.cache_clear()
    yield d
    toolchain._probe.cache_clear()


def _entries(d: Path, suffix: str = ".so") -> list[Path]:
    return sorted(p for p in d.iterdir() if p.name.endswith(suffix))


def _cc() -> str:
    return shutil.which("gcc") or shutil.which("cc")


# -- the compiler command ------------------------------------------------------------------------
def test_flags_inside_cc_are_part_of_the_cache_key(cache, monkeypatch):
    """CC="gcc -DX" builds its own entry, not the plain gcc's (the key held only the version
    line: a build with other flags in CC was reused by, or poisoned, plain-CC builds)."""
    f = random_forest(80, n_trees=3)
    monkeypatch.setenv("CC", _cc())
    treecomp.compile(f, backend="c")
    monkeypatch.setenv("CC", f"{_cc()} -DTREECOMP_TEST_ONLY=1")
    toolchain._probe.cache_clear()
    treecomp.compile(f, backend="c")
    assert len(_entries(cache)) == 2


@pytest.mark.parametrize("cc_flags, option_flags", [
    ("-ffast-math", ()), ("-O2 -Ofast", ()), ("-funsafe-math-optimizations", ()),
    ("", ("-ffp-contract=fast",)), ("", ("-ffast-math",)), ("", ("--fast-math",)),
    ("-mfpmath=387", ()), ("-ffinite-math-only", ())])
def test_flags_that_break_exactness_are_refused(cache, monkeypatch, cc_flags, option_flags):
    """CC="gcc -ffast-math" built artifacts whose probabilities differed from the library's (86 of
    600 on one model): such flags, in CC or in the c backend's cflags, are a clear CompileError."""
    f = random_forest(81, n_trees=3, transform="sigmoid")
    monkeypatch.setenv("CC", f"{_cc()} {cc_flags}".strip())
    bad = cc_flags.split()[-1] if cc_flags else option_flags[0]
    with pytest.raises(CompileError, match=bad.replace("-", r"\-") + ".*floating-point"):
        treecomp.compile(f, backend="c", cflags=option_flags)
    assert _entries(cache) == []


def test_harmless_flags_still_build(cache, monkeypatch):
    f = random_forest(82, n_trees=3)
    monkeypatch.setenv("CC", f"{_cc()} -ffp-contract=off -fno-math-errno")
    p = treecomp.compile(f, backend="c", cflags=("-ffp-contract=off", "-fexcess-precision=standard"))
    X = random_rows(f, 40)
    np.testing.assert_array_equal(p.predict_raw(X), interp.predict_raw(f, X))


# -- time limits ---------------------------------------------------------------------------------
_HANG = """#!/bin/sh
case "$1" in --version) echo "hangcc 1.0"; exit 0;; esac
sleep 30 &
echo $! > "$PIDS/child"
echo $$ > "$PIDS/driver"
sleep 30
exit 1
"""


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="process groups, /proc")
def test_a_hung_compiler_is_stopped_after_the_time_limit(cache, tmp_path, monkeypatch):
    """A compile command that never finishes raised nothing and hung compile() forever; now it
    is killed, with the processes it started, after TREECOMP_BUILD_TIMEOUT seconds."""
    cc = tmp_path / "hangcc"
    cc.write_text(_HANG)
    cc.chmod(0o755)
    pids = tmp_path / "pids"
    pids.mkdir()
    monkeypatch.setenv("PIDS", str(pids))
    monkeypatch.setenv("CC", str(cc))
    monkeypatch.setenv("TREECOMP_BUILD_TIMEOUT", "1.5")
    t0 = time.monotonic()
    with pytest.raises(CompileError, match=r"did not finish in 1\.5 s.*TREECOMP_BUILD_TIMEOUT"):
        treecomp.compile(random_forest(83, n_trees=2), backend="c")
    assert time.monotonic() - t0 < 20
    for name in ("driver", "child"):
        pid = int((pids / name).read_text())
        for _ in range(50):  # SIGKILL is asynchronous
            if not _alive(pid):
                break
            time.sleep(0.1)
        assert not _alive(pid), f"the compiler's {name} process {pid} still runs"
    for bad in ("soon", "-1", "nan"):
        monkeypatch.setenv("TREECOMP_BUILD_TIMEOUT", bad)
        with pytest.raises(CompileError, match="TREECOMP_BUILD_TIMEOUT"):
            treecomp.compile(random_forest(84, n_trees=2), backend="c")
    monkeypatch.setenv("TREECOMP_BUILD_TIMEOUT", "0")  # no limit
    assert toolchain.build_timeout() is None


# -- a full disk during a build ------------------------------------------------------------------
_FULL = """#!/bin/sh
case "$*" in *"-o $FULL_DIR/"*) echo "ld: final link failed: No space left on device" >&2; exit 1;; esac
exec "$REAL_CC" "$@"
"""


def test_a_full_cache_disk_during_a_link_builds_in_the_private_directory(cache, tmp_path,
                                                                         monkeypatch):
    """The linker wrote its output straight into the cache: a full disk there was a CompileError
    instead of the documented fallback to this process's private directory."""
    cc = tmp_path / "fullcc"
    cc.write_text(_FULL)
    cc.chmod(0o755)
    monkeypatch.setenv("CC", str(cc))
    monkeypatch.setenv("REAL_CC", _cc())
    monkeypatch.setenv("FULL_DIR", str(cache))
    real_copy = toolchain.shutil.copyfile

    def copyfile(src, dst, *a, **kw):  # the copy into the cache hits the full disk too
        if Path(dst).parent == cache:
            raise OSError(errno.ENOSPC, "No space left on device", str(dst))
        return real_copy(src, dst, *a, **kw)
    monkeypatch.setattr(toolchain.shutil, "copyfile", copyfile)
    f = random_forest(85, n_trees=3)
    p = treecomp.compile(f, backend="c")
    X = random_rows(f, 40)
    np.testing.assert_array_equal(p.predict_raw(X), interp.predict_raw(f, X))
    assert p._kernel.path.parent == toolchain.private_dir()
    assert _entries(cache) == []


# -- the cache's digests -------------------------------------------------------------------------
_CACHED_COMPILE = """
import sys, numpy as np, treecomp
from treecomp import interp
from tests.randforest import random_forest, random_rows
f = random_forest(int(sys.argv[1]), n_trees=3)
X = random_rows(f, 50)
p = treecomp.compile(f, backend="c")
print("exact" if np.array_equal(p.predict_raw(X), interp.predict_raw(f, X)) else "WRONG")
"""


def test_damaged_or_swapped_cache_entries_are_rebuilt(cache):
    """A cache hit was trusted by name: a truncated entry killed the next compile (SIGBUS),
    another model's library under the name predicted that model, a garbage entry raised
    ArtifactError on every compile. Each case runs in a fresh process."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}

    def run(seed):
        res = subprocess.run([sys.executable, "-c", _CACHED_COMPILE, str(seed)], cwd=ROOT,
                             env=env, capture_output=True, text=True, timeout=300)
        return res.returncode, res.stdout.strip(), res.stderr[-1500:]
    assert run(86)[:2] == (0, "exact")
    (entry,) = _entries(cache)
    good = entry.read_bytes()
    assert run(87)[:2] == (0, "exact")
    other = next(e for e in _entries(cache) if e != entry).read_bytes()
    for what, data in (("truncated", good[:len(good) // 2]), ("another model's", other),
                       ("garbage", b"\x7fELF not a library"), ("empty-ish", b"x")):
        tmp = entry.with_suffix(".tmp")
        tmp.write_bytes(data)
        os.replace(tmp, entry)
        rc, out, err = run(86)
        assert (rc, out) == (0, "exact"), f"{what} entry: exit {rc}, {out!r}\n{err}"
        assert entry.read_bytes() == good  # rebuilt in place
    # a digest file copied from another entry does not vouch for this one either
    other_entry = next(e for e in _entries(cache) if e != entry)
    shutil.copyfile(other_entry, entry)
    shutil.copyfile(other_entry.with_name(other_entry.name + ".sha256"),
                    entry.with_name(entry.name + ".sha256"))
    assert run(86)[:2] == (0, "exact")


def test_cache_entries_without_a_digest_are_rebuilt(cache):
    calls = []

    def writer(p):
        calls.append(p)
        p.write_bytes(b"data")
    path = toolchain.cached("k", ".bin", writer)
    assert path.read_bytes() == b"data" and len(calls) == 1
    assert toolchain.cached("k", ".bin", writer) == path and len(calls) == 1  # a hit
    path.with_name(path.name + ".sha256").unlink()
    toolchain.cached("k", ".bin", writer)
    assert len(calls) == 2


# -- seals -----------------------------------------------------------------------------------------
def test_seals_are_checked_byte_for_byte(tmp_path):
    so = tmp_path / "m.so"
    treecomp.compile(random_forest(88, n_trees=2), backend="c").save(so)
    data = so.read_bytes()
    toolchain.check_seal(data)
    assert data.count(toolchain.SEAL_MARKER) == 1
    rng = np.random.default_rng(0)
    for pos in rng.integers(0, len(data), 60):
        bad = bytearray(data)
        bad[pos] ^= 1 << int(rng.integers(8))
        with pytest.raises(ArtifactError, match="damaged|seal"):
            toolchain.check_seal(bytes(bad))
    for bad, match in ((data[:-1], "damaged"), (data + b"\0", "damaged"),
                       (data.replace(toolchain.SEAL_MARKER, bytes(16)), "no treecomp seal"),
                       (data + toolchain.SEAL_MARKER + bytes(32), "more than one")):
        with pytest.raises(ArtifactError, match=match):
            toolchain.check_seal(bad)
    with pytest.raises(CompileError, match="cannot seal"):  # a library without the seal unit
        toolchain.build_shared_library({"x.c": "int f(void) { return 1; }\n"}, tmp_path / "x.so")
        toolchain.seal(tmp_path / "x.so")


# -- published files -----------------------------------------------------------------------------
def test_table_files_are_not_executable(cache, tmp_path):
    """.tc files were written mode 755 like libraries."""
    f = random_forest(89, n_trees=2)
    treecomp.compile(f, backend="arrays").save(tmp_path / "m.tc")
    treecomp.compile(f, backend="c").save(tmp_path / "m.so")
    assert stat.S_IMODE((tmp_path / "m.tc").stat().st_mode) == 0o644
    assert stat.S_IMODE((tmp_path / "m.so").stat().st_mode) == 0o755
    for e in cache.iterdir():
        want = 0o755 if e.name.endswith(".so") else 0o644
        assert stat.S_IMODE(e.stat().st_mode) == want, e.name
