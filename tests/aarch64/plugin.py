"""A pytest plugin for the emulated arm64 Python (``-p tests.aarch64.plugin``, suite.py): in
the files suite.FAMILY_FILES it keeps only the kernel-path families, the tests parametrised by
``isa`` named in $TREECOMP_AARCH64_FAMILIES (comma-separated; "all": every one), and of those
only the native paths this host offers (arrays.supported_isas() less the compiler-free walkers
"llvm" and "numpy", which the lane's zoo covers): scalar today, and each ARM path as it is
added, with no change here."""

from __future__ import annotations

import os

from tests.aarch64.suite import FAMILY_FILES


def pytest_collection_modifyitems(config, items):
    from treecomp.backends import arrays
    native = {i for i in arrays.supported_isas() if i not in ("llvm", "numpy")}
    names = os.environ.get("TREECOMP_AARCH64_FAMILIES", "all")
    wanted = None if names == "all" else set(names.split(","))
    keep, drop = [], []
    for item in items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        if item.nodeid.split("::")[0] in FAMILY_FILES:
            name = getattr(item, "originalname", item.name)
            ok = params.get("isa") in native and (wanted is None or name in wanted)
        else:
            ok = True
        (keep if ok else drop).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep
