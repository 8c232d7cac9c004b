"""A pytest plugin for the emulated arm64 Python (``-p tests.aarch64.plugin``, suite.py): in
the files suite.FAMILY_FILES it keeps only the kernel-path families, the tests parametrised by
``isa`` named in $TREECOMP_AARCH64_FAMILIES (comma-separated; "all": every one; on sve only
those of them in suite.SVE_FAMILIES), and of those
only the native paths this host offers (arrays.supported_isas() less the compiler-free paths
kernel.FREE_ISAS: "llvm-vec", "llvm" and "numpy", which the lane's zoo covers), and of those the vector paths (neon, sve)
where there are any: the portable path's families run on the x86 lanes (the same C), and the
zoo and the real files run it here (guest_checks.py). $TREECOMP_AARCH64_ISAS (comma-separated;
empty: every one) narrows the paths further: the SVE vector-length runs (suite.SVE_VL_CPUS)
force sve alone."""

from __future__ import annotations

import os

from tests.aarch64.suite import FAMILY_FILES, SVE_FAMILIES


def pytest_collection_modifyitems(config, items):
    from treecomp.backends import arrays
    native = {i for i in arrays.supported_isas() if i not in arrays.kernel.FREE_ISAS}
    if native - {"scalar"}:
        # the vector paths' families only: the portable path's are the x86 lanes' (the same C),
        # and guest_checks runs it here on the zoo and the real files (the lane's time budget)
        native.discard("scalar")
    only = os.environ.get("TREECOMP_AARCH64_ISAS", "")
    if only:
        native &= set(only.split(","))
    names = os.environ.get("TREECOMP_AARCH64_FAMILIES", "all")
    wanted = None if names == "all" else set(names.split(","))
    keep, drop = [], []
    for item in items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        if item.nodeid.split("::")[0] in FAMILY_FILES:
            name = getattr(item, "originalname", item.name)
            ok = params.get("isa") in native and (wanted is None or name in wanted
                                                  and (params["isa"] != "sve" or name in SVE_FAMILIES))
        else:
            ok = True
        (keep if ok else drop).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep
