"""The aarch64 lane (docs/aarch64.md): treecomp built and tested on an emulated arm64 Debian
host, a CPython 3.11 for arm64 under QEMU user-mode emulation with the libraries' aarch64 wheels,
treecomp's native parts built there by its own setup.py with the aarch64 cross compiler.

On each CPU model of tests/aarch64/lane.py's CPUS in turn (QEMU's `max`: NEON, SVE, SVE2; the
same with SVE at 128 and 256 bits, a short run each; `cortex-a72`: NEON only) one pytest session of the emulated Python runs tests/aarch64/suite.py's
selection: the kernel-path test families forced through each native path, every file in
shared/realmodels and a seeded differential zoo, bit for bit against the libraries on the same
emulated host.

The emulated host is set up once per machine (tests/aarch64/lane.py: Debian packages and wheels
into ~/.cache/treecomp-aarch64, about a minute; no root, nothing installed on the system).
Where the lane cannot exist (not x86-64 Linux, no apt / dpkg) the test skips and says why; set
TREECOMP_AARCH64=0 to skip it on purpose. A failed set-up on a host that can run the lane (no
network, say) is an error, not a skip: CI runs this file and must not pass without it.

The module's name sorts first, so that with `-n 2` pytest-xdist starts its one long test on a
worker at once while the other worker runs the rest of the suite.
"""

from __future__ import annotations

import os
import shutil
import time

import pytest

from tests.aarch64 import lane, suite

pytestmark = pytest.mark.slow


def test_aarch64_lane(tmp_path):
    """Set up (or reuse) the emulated host, build treecomp there, and run the selection on each
    CPU model in turn (one test: on a fresh machine a second one would only wait for the
    set-up, and build treecomp again, on the other xdist worker)."""
    if os.environ.get("TREECOMP_AARCH64") == "0":
        pytest.skip("TREECOMP_AARCH64=0: the aarch64 lane is switched off")
    try:
        host = lane.ensure()
        lane.stage(host, tmp_path / "stage")
    except lane.Unavailable as exc:
        pytest.skip(str(exc))
    except lane.SetupError as exc:
        pytest.fail(f"the aarch64 lane could not be set up: {exc}\n(TREECOMP_AARCH64=0 skips the "
                    "lane on purpose; docs/aarch64.md)", pytrace=False)
    results = []
    for cpu in lane.CPUS:
        t0 = time.perf_counter()
        res = suite.run(host, tmp_path / "stage", cpu)
        print(res.summary(), f"(wall {time.perf_counter() - t0:.0f} s)", flush=True)
        results.append(res)
    shutil.rmtree(tmp_path / "stage", ignore_errors=True)  # ~30 MB of copies and builds
    assert all(r.ok for r in results), "\n\n".join(r.summary() for r in results if not r.ok)
