"""The aarch64 lane's host-side helpers (tests/aarch64/lane.py, suite.py), without the emulator:
staging over an earlier stage, and the failure report's output tail."""

from __future__ import annotations

import os

from tests.aarch64 import lane, suite


def _fake_checkout(root):
    (root / "runtime").mkdir(parents=True)
    (root / "runtime" / "treecomp.h").write_text("/* header */\n")
    (root / "treecomp").mkdir()
    (root / "treecomp" / "__init__.py").write_text("x = 1\n")
    (root / "treecomp" / "_built.so").write_bytes(b"\0")          # built parts are not staged
    os.symlink("../runtime", root / "treecomp" / "runtime")         # as in the checkout
    (root / "setup.py").write_text("# setup\n")


def test_copy_sources_over_an_earlier_stage(tmp_path):
    root, dest = tmp_path / "src", tmp_path / "stage"
    _fake_checkout(root)
    lane.copy_sources(dest, root)
    (dest / "treecomp" / "_arrays_kernel.so").write_bytes(b"old build")
    (root / "treecomp" / "__init__.py").write_text("x = 2\n")
    lane.copy_sources(dest, root)            # a second stage into the same folder (`run --dir`)
    assert (dest / "treecomp" / "__init__.py").read_text() == "x = 2\n"
    assert (dest / "treecomp" / "runtime").is_symlink()
    assert (dest / "treecomp" / "runtime" / "treecomp.h").is_file()
    assert not (dest / "treecomp" / "_built.so").exists()
    assert not (dest / "treecomp" / "_arrays_kernel.so").exists()  # the stale build is gone


def test_output_tail_keeps_the_traceback_not_the_module_list():
    trace = ("Fatal Python error: Segmentation fault\n\nCurrent thread 0x0001 (most recent call "
             "first):\n  File \"/stage/treecomp/native.py\", line 120 in run\n")
    modules = "Extension modules: " + ", ".join(f"package{i}.module{i}" for i in range(600))
    tail = suite.output_tail(trace + "\n" + modules + " (total: 600)\n", limit=2000)
    assert "treecomp/native.py" in tail and "Segmentation fault" in tail
    assert len(tail) < 2000 and "(cut)" in tail


def test_selection_without_real_model_files():
    """Where ../shared/realmodels is missing (a clone elsewhere), the guest is not asked for
    test_realfiles.py's tests by id: that module skips whole, and pytest exits 4 on node ids it
    did not collect."""
    with_files, without = suite.selection("max", True), suite.selection("max", False)
    real = [a for a in with_files if a.startswith("tests/test_realfiles.py::")]
    assert real and not any(a.startswith("tests/test_realfiles.py") for a in without)
    assert [a for a in with_files if a not in real] == without
    assert suite.selection("cortex-a72", False) == suite.SELECTION["cortex-a72"]
