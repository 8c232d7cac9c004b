"""treecomp.platform: every platform-specific piece in one module, and an unverified platform
(simulated: treecomp.platform.system / machine patched) refused with a clear error by every
native path (build, load, JIT), while backend="auto" falls back to the exact numpy walker."""

import warnings

import numpy as np
import pytest

import treecomp
from treecomp import backends, errors, interp, native, platform, toolchain
from treecomp.backends.arrays import native as arrays_native, vec, walkers
from treecomp.errors import PlatformError, SlowPathWarning
from tests.randforest import random_forest, random_rows


def test_this_host_is_verified():
    assert (platform.system(), platform.machine()) in platform.VERIFIED
    assert platform.verified() and platform.native_ok()
    assert platform.host_key() == (platform.system(), platform.machine())


def test_cache_key_names_the_cpu_architecture(monkeypatch):
    here = toolchain.cache_key("x", 1)
    monkeypatch.setattr(platform, "machine", lambda: "aarch64")
    there = toolchain.cache_key("x", 1)
    assert here != there


def test_machine_names_are_normalised(monkeypatch):
    import platform as stdlib_platform
    for raw, want in (("AMD64", "x86_64"), ("arm64", "aarch64"), ("x86_64", "x86_64"),
                      ("riscv64", "riscv64")):
        monkeypatch.setattr(stdlib_platform, "machine", lambda raw=raw: raw)
        assert platform.machine() == want


@pytest.fixture
def unverified(monkeypatch):
    """This process as an unverified platform (macOS on arm64), nothing native loaded yet."""
    monkeypatch.setattr(platform, "system", lambda: "darwin")
    monkeypatch.setattr(platform, "machine", lambda: "aarch64")
    monkeypatch.delenv(platform.ALLOW_ENV, raising=False)
    monkeypatch.setattr(arrays_native, "_LIB", None)
    monkeypatch.setattr(arrays_native, "KERNEL_ORIGIN", None)
    monkeypatch.setattr(vec, "_AVAILABLE", None)
    monkeypatch.setattr(vec, "_KERNELS", {})
    monkeypatch.setattr(walkers, "_JIT", {})
    errors.reset_slow_path_warnings()
    yield
    errors.reset_slow_path_warnings()


def test_unverified_platform_refuses_native_paths(unverified, tmp_path, monkeypatch):
    f = random_forest(1, n_trees=10, n_features=4, max_depth=4)
    X = random_rows(f, 50)
    for backend in ("c", "llvm"):
        if backend not in backends.names():
            continue
        with pytest.raises(PlatformError, match=r"not verified .*darwin aarch64.*linux x86_64"):
            treecomp.compile(f, backend=backend)
    with pytest.raises(PlatformError, match="darwin aarch64"):
        treecomp.compile(f, backend="arrays", isa="llvm-vec")
    with pytest.raises(PlatformError):
        toolchain.find_compiler()
    assert not toolchain.have_compiler()
    # auto: the exact numpy walker, with one warning naming the platform
    assert backends.choose(f) == "arrays"
    with pytest.warns(SlowPathWarning, match="not verified on this platform .darwin aarch64"):
        p = treecomp.compile(f)
    assert p.backend == "arrays" and p._kernel.isa == "numpy"
    np.testing.assert_array_equal(p.predict_raw(X), interp.predict_raw(f, X))
    assert native.entry() is native.no_entry or native.ENTRY_MODULE is not None


def test_unverified_platform_refuses_to_load_a_library(tmp_path, monkeypatch):
    f = random_forest(2, n_trees=5, n_features=4, max_depth=3)
    so = tmp_path / "m.so"
    treecomp.compile(f, backend="c").save(so)
    monkeypatch.setattr(platform, "system", lambda: "win32")
    monkeypatch.setattr(platform, "machine", lambda: "x86_64")
    monkeypatch.delenv(platform.ALLOW_ENV, raising=False)
    with pytest.raises(PlatformError, match="loading a shared library.*win32 x86_64"):
        treecomp.load(so)
    monkeypatch.setenv(platform.ALLOW_ENV, "1")  # at the user's risk: it loads
    X = random_rows(f, 20)
    np.testing.assert_array_equal(treecomp.load(so).predict_raw(X), interp.predict_raw(f, X))


def test_verified_platform_gives_no_platform_warning():
    f = random_forest(3, n_trees=5, n_features=4, max_depth=3)
    with warnings.catch_warnings():
        warnings.simplefilter("error", SlowPathWarning)
        treecomp.compile(f, backend="arrays")
