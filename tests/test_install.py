"""The install-time build (setup.py, docs/build.md): the package ships the arrays kernel and the
small-batch entry prebuilt, and uses them with no compiler, no build and no cache at run time
when they were built from the sources next to them; otherwise the first-use build says so."""

import ctypes
import os
import shutil
import stat
import subprocess
import sys
import sysconfig
import textwrap
import time
import zipfile
from pathlib import Path

import numpy as np
import pytest

import treecomp
from treecomp import loader, native, toolchain
from treecomp.backends import arrays
from treecomp.backends.arrays import native as arrays_native
from tests.randforest import random_forest, random_rows

ROOT = Path(__file__).resolve().parent.parent


def _sources_newer_than(path: Path) -> bool:
    files = [arrays.native.KERNEL_DIR / f for f in arrays.native.KERNEL_FILES]
    return max(f.stat().st_mtime for f in files) > path.stat().st_mtime


def test_prebuilt_kernel_is_loaded():
    """This install (pip install -e .) built the kernel, and it is the one in use."""
    path = arrays.native.prebuilt_kernel_path()
    assert path is not None, ("the package has no prebuilt arrays kernel: `pip install -e .` "
                              "should have built treecomp/_arrays_kernel*.so (see docs/build.md)")
    if arrays.native.KERNEL_ORIGIN != "prebuilt" and _sources_newer_than(path):
        pytest.skip("runtime/kernels changed since the install built the kernel (rerun "
                    "`pip install -e .`): the first-use build serves meanwhile")
    lib = arrays.native.native_library()
    assert arrays.native.KERNEL_ORIGIN == "prebuilt", arrays.native.PREBUILT_ERROR
    assert arrays.native.KERNEL_PATH == path and arrays.native.kernel_origin() == "prebuilt"
    assert arrays_native._embedded(lib, "tc_arrays_source_hash") == arrays.native.kernel_source_hash()
    assert arrays_native._embedded(lib, "tc_arrays_build_cflags") == " ".join(arrays.native.KERNEL_CFLAGS)
    # and the small-batch entry likewise
    assert loader._entry() is not native.no_entry, native.ENTRY_ERROR
    assert native.ENTRY_ORIGIN == "prebuilt", native.ENTRY_PREBUILT_ERROR


def test_fallback_build_reports_progress(monkeypatch, tmp_path):
    """Without a usable prebuilt kernel the first-use build runs, and says so before and after
    (the compiler is faked: the 'build' copies the prebuilt kernel)."""
    pre = arrays.native.prebuilt_kernel_path()
    if pre is None:
        pytest.skip("no prebuilt kernel to stand in for the build")

    def fake_build(sources, out, cflags=(), jobs=None, compiler=None, progress=None):
        assert tuple(cflags) == arrays.native.KERNEL_CFLAGS and len(sources) == arrays_native.KERNEL_PARTS
        for name in sources:
            progress(name)
        shutil.copyfile(pre, out)
    monkeypatch.setattr(arrays_native, "_LIB", None)
    monkeypatch.setattr(arrays_native, "KERNEL_ORIGIN", None)
    monkeypatch.setattr(arrays_native, "KERNEL_PATH", None)
    monkeypatch.setattr(arrays_native, "PREBUILT_ERROR", "test: no prebuilt kernel")
    monkeypatch.setattr(arrays_native, "_load_prebuilt", lambda: None)
    monkeypatch.setattr(toolchain, "find_compiler",
                        lambda: toolchain.Compiler(argv=("cc",), version="fake cc 1.0"))
    monkeypatch.setattr(toolchain, "build_shared_library", fake_build)
    monkeypatch.setenv("TREECOMP_CACHE_DIR", str(tmp_path / "cache"))
    msgs = []
    f = random_forest(3, n_trees=4)
    p = treecomp.compile(f, backend="arrays", progress=msgs.append)
    assert arrays.native.KERNEL_ORIGIN == "built" and p._kernel.isa in arrays.native.NATIVE_ISAS
    text = "\n".join(msgs)
    assert "building the arrays kernel (once per machine" in text and "test: no prebuilt" in text
    assert "compiled 3/3 parts" in text and "built the arrays kernel in" in text
    assert len(list((tmp_path / "cache").glob("*.so"))) == 1
    X = random_rows(f, 50)
    from treecomp import interp
    np.testing.assert_array_equal(p.predict_raw(X), interp.predict_raw(f, X))
    # loaded now: no second build, no second report
    msgs.clear()
    treecomp.compile(f, backend="arrays", progress=msgs.append)
    assert not any("building" in m for m in msgs)
    # loading a table file has no progress argument: toolchain.DEFAULT_PROGRESS (the CLI's) hears
    monkeypatch.setattr(arrays_native, "_LIB", None)
    monkeypatch.setenv("TREECOMP_CACHE_DIR", str(tmp_path / "cache2"))
    monkeypatch.setattr(toolchain, "DEFAULT_PROGRESS", msgs.append)
    k = arrays.load_bytes(p._kernel.to_bytes())
    assert k.isa == p._kernel.isa and any("building the arrays kernel" in m for m in msgs)


def test_cache_dir_is_private(monkeypatch, tmp_path):
    monkeypatch.setenv("TREECOMP_CACHE_DIR", str(tmp_path / "a" / "cache"))
    d = toolchain.cache_dir()
    assert d.is_dir() and stat.S_IMODE(d.stat().st_mode) == 0o700


_CHILD = textwrap.dedent("""
    import json, os, sys
    import numpy as np
    import treecomp
    from treecomp import loader, native, toolchain
    from treecomp.backends import arrays
    assert treecomp.__file__.startswith(os.environ["TC_SITE"]), treecomp.__file__
    assert not toolchain.have_compiler()
    import xgboost as xgb
    from sklearn.ensemble import GradientBoostingClassifier
    rng = np.random.default_rng(0)
    X = rng.normal(size=(600, 6)).astype(np.float32)
    X[rng.random(X.shape) < 0.03] = np.nan
    y = (np.nan_to_num(X[:, 0]) + X[:, 1] * np.nan_to_num(X[:, 2]) > 0).astype(int)
    out = {}
    m = xgb.XGBClassifier(n_estimators=30, max_depth=4, n_jobs=1).fit(X, y)
    p = treecomp.compile(m, backend="arrays")
    np.testing.assert_array_equal(p.predict_proba(X), m.predict_proba(X))
    np.testing.assert_array_equal(p.predict(X[:7]), m.predict(X[:7]))      # the small-batch entry
    np.testing.assert_array_equal(p.predict_proba(X[:1]), m.predict_proba(X[:1]))
    out["xgb_isa"] = p._kernel.isa
    Xs = np.nan_to_num(X).astype(np.float64)
    g = GradientBoostingClassifier(n_estimators=20, max_depth=3, random_state=0).fit(Xs, y)
    q = treecomp.compile(g, backend="arrays")
    np.testing.assert_array_equal(q.predict_proba(Xs), g.predict_proba(Xs))
    np.testing.assert_array_equal(q.predict(Xs[:3]), g.predict(Xs[:3]))
    out["gb_isa"] = q._kernel.isa
    from treecomp import numparse
    out["numparse"] = str(numparse.PATH) if numparse.available() else f"unavailable: {numparse.UNAVAILABLE}"
    out.update(origin=arrays.native.KERNEL_ORIGIN, path=str(arrays.native.KERNEL_PATH),
               prebuilt_error=arrays.native.PREBUILT_ERROR, entry=native.ENTRY_ORIGIN,
               entry_error=native.ENTRY_ERROR or native.ENTRY_PREBUILT_ERROR)
    print("RESULT " + json.dumps(out))
""")


def _seed_wheel_build_with_this_kernel(src: Path) -> dict[str, tuple[Path, int]]:
    """Put this install's arrays kernel and its archive, with their mtimes, where `pip wheel
    src` builds them (setuptools' build_platlib under src/build), so that setup.py's up-to-date
    check (the kernel newer than its sources, setup.py and toolchain.py, whose copies keep
    their mtimes) takes them instead of compiling the kernel's three parts again (~75 s of
    CPU: the compile `pip install -e .` ran, whose result test_prebuilt_kernel_is_loaded
    checks). Only when both were built from these kernel sources with these flags; else
    nothing is seeded. Where setup.py finds them out of date it compiles the kernel as before.
    Returns {file name: (the seeded file, its mtime in ns)}."""
    kernel, archive = arrays.native.prebuilt_kernel_path(), arrays.native.prebuilt_archive_path()
    if kernel is None or archive is None:
        return {}
    lib = ctypes.CDLL(str(kernel))
    if (arrays_native._embedded(lib, "tc_arrays_source_hash") != arrays.native.kernel_source_hash()
            or arrays_native._embedded(lib, "tc_arrays_build_cflags") != " ".join(arrays.native.KERNEL_CFLAGS)
            or arrays_native._archive_matches(archive) is not None):
        return {}
    from setuptools.dist import Distribution
    build = Distribution().get_command_obj("build")
    build.finalize_options()
    dest = src / build.build_platlib / "treecomp"
    dest.mkdir(parents=True)
    seeded = {}
    for path in (kernel, archive):
        shutil.copy2(path, dest / path.name)
        seeded[path.name] = (dest / path.name, (dest / path.name).stat().st_mtime_ns)
    return seeded


@pytest.mark.slow
def test_wheel_runs_without_a_compiler(tmp_path):
    """Build a wheel (compiling the entry and the number parser; the kernel too, unless this
    install's matches the sources: _seed_wheel_build_with_this_kernel), install it into a plain
    directory and use it from a process with no C compiler, no repository on its path and an
    empty cache: the prebuilt kernel and entry run the model (bit-exact), nothing is built,
    nothing is cached."""
    if not toolchain.have_compiler():
        pytest.skip("building the wheel needs a C compiler")
    pytest.importorskip("xgboost")
    pytest.importorskip("sklearn")
    src = tmp_path / "src"  # a copy: the build writes build/ and *.egg-info next to setup.py
    src.mkdir()
    for name in ("pyproject.toml", "setup.py", "README.md", "MANIFEST.in"):
        if (ROOT / name).exists():
            shutil.copy2(ROOT / name, src / name)
    ignore = shutil.ignore_patterns("__pycache__", "*.so", "*.pyc")
    shutil.copytree(ROOT / "runtime", src / "runtime", ignore=ignore)
    shutil.copytree(ROOT / "treecomp", src / "treecomp", symlinks=True, ignore=ignore)
    reused = _seed_wheel_build_with_this_kernel(src)
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", str(src), "--no-deps",
                        "--no-build-isolation", "-q", "-w", str(tmp_path / "dist")],
                       capture_output=True, text=True, cwd=tmp_path)
    wheel_s = time.perf_counter() - t0
    assert r.returncode == 0, r.stderr[-3000:] + r.stdout[-3000:]
    # the kernel: this install's where setup.py's up-to-date check took the seeded copy (not
    # rewritten; then it is what the wheel holds), else compiled here; the entry and the number
    # parser compiled here either way
    reused = {k: v for k, v in reused.items() if v[0].stat().st_mtime_ns == v[1]}
    print(f"\nwheel built in {wheel_s:.1f} s"
          + (" (the kernel: this install's, up to date)" if reused else " (the kernel compiled)"))
    built = {p.name for p in (src / "build").rglob("*.o")}
    assert {"pyentry.o", "numparse.o"} <= built, built
    (whl,) = (tmp_path / "dist").glob("treecomp-*.whl")
    names = zipfile.ZipFile(whl).namelist()
    with zipfile.ZipFile(whl) as z:
        for seeded, _ in reused.values():
            assert z.read(f"treecomp/{seeded.name}") == seeded.read_bytes(), seeded.name
    for want in ("treecomp/_arrays_kernel", "treecomp/_arrays_kernel.a", "treecomp/_tc_entry",
                 "treecomp/_numparse", "treecomp/runtime/kernels/arrays.c",
                 "treecomp/runtime/pyentry.c", "treecomp/runtime/numparse.c",
                 "treecomp/backends/arrays/native.py"):
        assert any(n.startswith(want) for n in names), (want, names)
    site = tmp_path / "site"
    r = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target",
                        str(site), str(whl)], capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    # a PATH with only python on it, CC pointing nowhere, an empty cache; numpy, llvmlite, click,
    # xgboost and sklearn from this environment's site-packages, never the repository
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "python").symlink_to(sys.executable)
    cache = tmp_path / "cache"
    cache.mkdir()
    libs = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "CC", "PYTHONHOME")}
    env.update(PATH=str(bindir), CC=str(tmp_path / "no-such-cc"), TREECOMP_CACHE_DIR=str(cache),
               PYTHONPATH=os.pathsep.join([str(site), *sorted(libs)]), TC_SITE=str(site),
               PYTHONDONTWRITEBYTECODE="1")
    env.pop("TREECOMP_TEST_PARENT_CACHE", None)
    t0 = time.perf_counter()
    # -S: no site-packages processing, so the editable install's finder cannot map treecomp
    # back to the repository
    r = subprocess.run([str(bindir / "python"), "-S", "-c", _CHILD], capture_output=True,
                       text=True, cwd=tmp_path, env=env, timeout=300)
    child_s = time.perf_counter() - t0
    assert r.returncode == 0, r.stderr[-4000:]
    import json
    res = json.loads(next(ln for ln in r.stdout.splitlines() if ln.startswith("RESULT "))[7:])
    print(f"compiled and checked two models in a compiler-free process in {child_s:.1f} s: {res}")
    assert res["origin"] == "prebuilt", res
    assert res["path"].startswith(str(site)), res
    assert res["entry"] == "prebuilt", res
    assert res["numparse"].startswith(str(site)), res  # the JSON number parser: the wheel's
    native = arrays.native.NATIVE_ISAS
    assert res["xgb_isa"] in native and res["gb_isa"] in native, res  # not llvm / numpy
    built = [p for p in cache.rglob("*") if p.is_file()]
    assert not built, built  # nothing was built or cached
