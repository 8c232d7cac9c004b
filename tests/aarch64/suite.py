"""What the aarch64 lane runs on the emulated host, per CPU model, and how: one pytest session
of the emulated Python per model, on a staged treecomp (lane.stage), its results read back from
a JUnit file (tests/test_aarch64.py calls run(); docs/aarch64.md gives the subset's reasons and
its timings). Standard library only: the guest imports it too (plugin.py)."""

from __future__ import annotations

import json
import os
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

#: the file of the kernel-path families: plugin.py keeps its `isa`-parametrised tests, each on
#: every native path the emulated host offers
FAMILY_FILES = ("tests/test_backend_arrays.py",)
#: the families CI runs (TREECOMP_AARCH64_FAMILIES=all, or `lane run --all-families`, runs every
#: one: about 3x the time). One or more per kernel walk, the cheapest that reach it: the float
#: heap walk at every depth, the quantised byte walk (depths, many thresholds, float64
#: thresholds), the interval sweep (bitvec), the row groups of both byte walks, the few-row
#: walks (deep heaps, intervals, heaps of depth <= 6 with 16 trees in NEON lanes), symmetric (oblivious) trees, degenerate trees. Left to the
#: x86 lanes and `--all-families`: random_forests_bit_exact, few_rows_plain_walks,
#: deep_path_bit_exact, byte_walks_several_outputs, quant_every_table_size,
#: few_rows_eight_trees_at_once, quant_levels_wider_than_the_columns,
#: quant_wide_rows_few_features_used (about 170 s of emulated CPU per native path)
CI_FAMILIES = ("test_heap_every_depth", "test_quant_every_depth", "test_quant_many_thresholds",
               "test_quant_float64_thresholds_closer_than_float32", "test_bitvec_any_shape",
               "test_byte_walks_every_row_group", "test_few_rows_deep_heaps",
               "test_few_rows_interval_walk", "test_symmetric_heaps",
               "test_depth_1000_tree_and_single_leaves", "test_a_sparse_tree_keeps_the_byte_walk",
               "test_quant_node_mux_over_many_columns", "test_few_rows_trees_in_lanes")
#: of those, the ones CI runs on the sve path too: the NEON source compiled with
#: target("+sve") but for quant_sve.c's heap walk of depth <= 6 (by the node mux, vectors of 32
#: bytes or more: QEMU's `max` runs SVE at 512 bits), so one family per walk checks what the
#: compiler made of it there, and the SVE heap walk's own (the suite's time budget: the lane is
#: its longest test)
SVE_FAMILIES = ("test_heap_every_depth", "test_quant_every_depth", "test_bitvec_any_shape",
                "test_few_rows_interval_walk", "test_depth_1000_tree_and_single_leaves",
                "test_quant_node_mux_over_many_columns", "test_byte_walks_every_row_group",
                "test_few_rows_trees_in_lanes")

#: `max` with SVE's vectors at 128 and 256 bits (lane.CPUS): the host check (the vector length
#: QEMU gives, and auto's pick: neon at 128 bits, where the SVE unit is the NEON code compiled
#: for SVE, sve from 256); at 256 bits also SVE_FAMILIES on the sve path alone (the SVE heap walk
#: on exactly its 32 lanes, and the length-agnostic loops GCC made of the portable code, as at
#: `max`'s 512). At 128 bits auto runs neon, which `max` checks; the sve path there (only where
#: a caller forces isa="sve") is the NEON source compiled for SVE and those same length-agnostic
#: loops, checked at 256 and 512 bits: not run again, for the suite's time budget
SVE_VL_CPUS = ("max,sve128=on", "max,sve256=on")

#: the guest pytest's selection per CPU model. `max` (NEON, SVE, SVE2: every path can be forced
#: there): the install check, the kernel-path families, the library's refusal of the one real
#: model file treecomp refuses for that reason, the SHAP kernel's row groups on neon and sve
#: against its one-row path bit for bit (and the libraries), and the lane's checks
#: (guest_checks.py: every real model file on every native path, the zoo on every backend and
#: path, compile -o model.so in a subprocess), and the LightGBM reader's number conversion (its
#: wider-quotient path runs on a 113-bit long double here, x87's 64 bits on x86).
#: `cortex-a72` (NEON only): the host check alone (detection without SVE: the kernel offers
#: scalar and neon, auto picks neon); NEON's results are checked on `max` (the same code on any
#: CPU with NEON)
SELECTION = {
    "max": ["tests/test_install.py::test_prebuilt_kernel_is_loaded",
            *FAMILY_FILES,
            "tests/test_realfiles.py::test_lightgbm_refuses_model_small_too",
            "tests/test_realfiles.py::test_every_real_file_is_covered",
            "tests/test_frontend_lightgbm.py::test_native_numbers_are_float_of_each_token",
            "tests/test_shap.py::test_row_groups_every_isa_bitwise_equal_to_one_row_path",
            "tests/aarch64/guest_checks.py"],
    "cortex-a72": ["tests/aarch64/guest_checks.py", "-k", "emulated_host"],
    "max,sve128=on": ["tests/aarch64/guest_checks.py::test_emulated_host"],
    "max,sve256=on": ["tests/aarch64/guest_checks.py::test_emulated_host", *FAMILY_FILES],
}
#: a guest session that runs longer has hung (`max` takes 2.5 minutes on a quiet machine, 6 on
#: a crowded one)
TIMEOUT_S = 900


def selection(cpu: str, have_realmodels: bool) -> list[str]:
    """SELECTION[cpu], less test_realfiles.py's tests where there are no real model files: that
    module skips as a whole then, and pytest refuses node ids it did not collect (exit 4)."""
    return [a for a in SELECTION[cpu]
            if have_realmodels or not a.startswith("tests/test_realfiles.py::")]


def slug(cpu: str) -> str:
    """`cpu` (QEMU_CPU, with -cpu's properties: "max,sve128=on") as a file name part."""
    return "".join(c if c.isalnum() else "-" for c in cpu)


def realmodels_dir() -> Path:
    """shared/realmodels beside the repository, or $TREECOMP_REALMODELS (test_realfiles.py's)."""
    env = os.environ.get("TREECOMP_REALMODELS")
    return Path(env) if env else Path(__file__).resolve().parents[3] / "shared" / "realmodels"


@dataclass
class Result:
    cpu: str
    returncode: int
    seconds: float                               # wall clock
    cpu_seconds: float                           # user + system, the guest's children included
    counts: dict[str, int] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)
    host: dict = field(default_factory=dict)     # guest_checks' report: hwcaps, isas
    output: str = ""

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.failures and self.counts.get("passed", 0) > 0

    def summary(self) -> str:
        caps = ", ".join(k for k, v in self.host.get("hwcaps", {}).items() if v) or "?"
        if self.host.get("sve_bytes"):
            caps += f"; SVE {8 * self.host['sve_bytes']}-bit"
        isas = ", ".join(self.host.get("supported_isas", [])) or "?"
        counts = ", ".join(f"{v} {k}" for k, v in self.counts.items() if v) or "no results"
        head = (f"aarch64 lane, qemu -cpu {self.cpu} ({caps}; supported_isas: {isas}; auto: "
                f"{self.host.get('auto', '?')}): {counts} in {self.seconds:.0f} s "
                f"({self.cpu_seconds:.0f} s of CPU)")
        if self.ok:
            return head
        return "\n".join([head, f"guest pytest exit status {self.returncode}", *self.failures,
                          "--- guest output (tail) ---", output_tail(self.output)])


def output_tail(output: str, limit: int = 6000) -> str:
    """The last `limit` characters of a guest's output, with faulthandler's list of extension
    modules (one line of thousands of characters that a crashing Python prints after its
    traceback) cut short, so that the tail shows the traceback rather than that list."""
    lines = [line if not line.startswith("Extension modules:") or len(line) <= 200
             else line[:160] + " ... (cut)" for line in output.splitlines()]
    return "\n".join(lines)[-limit:]


def _read_junit(path: Path) -> tuple[dict[str, int], list[str]]:
    counts = {"passed": 0, "failed": 0, "errors": 0, "skipped": 0, "xfailed": 0}
    failures = []
    if not path.is_file():
        return counts, ["no JUnit report: the guest pytest did not finish"]
    for case in ET.parse(path).getroot().iter("testcase"):
        name = f"{case.get('classname')}::{case.get('name')}"
        kinds = {child.tag for child in case}
        if "failure" in kinds or "error" in kinds:
            counts["failed" if "failure" in kinds else "errors"] += 1
            node = case.find("failure") if "failure" in kinds else case.find("error")
            failures.append(f"FAILED {name}: {(node.get('message') or '')[:500]}")
        elif "skipped" in kinds:
            msg = case.find("skipped").get("type") or ""
            counts["xfailed" if "xfail" in msg else "skipped"] += 1
        else:
            counts["passed"] += 1
    return counts, failures


def run(lane, staged: Path, cpu: str, extra: list[str] | tuple = (), timeout: float = TIMEOUT_S,
        all_families: bool = False) -> Result:
    """Run the selection for `cpu` on the treecomp staged in `staged` (lane.stage)."""
    import resource
    import subprocess
    xml, report = staged / f"junit-{slug(cpu)}.xml", staged / f"host-{slug(cpu)}.json"
    for p in (xml, report):
        p.unlink(missing_ok=True)
    argv = ["-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "tests.aarch64.plugin",
            f"--basetemp={staged / ('tmp-' + slug(cpu))}", f"--junitxml={xml}", "--durations=10",
            *selection(cpu, realmodels_dir().is_dir()), *extra]
    rm = realmodels_dir()
    families = SVE_FAMILIES if cpu in SVE_VL_CPUS else CI_FAMILIES
    env = {"PYTHONPATH": str(staged), "TREECOMP_AARCH64_REPORT": str(report),
           "TREECOMP_AARCH64_FAMILIES": "all" if all_families else ",".join(families),
           "TREECOMP_AARCH64_ISAS": "sve" if cpu in SVE_VL_CPUS else "",
           "TREECOMP_REALMODELS": str(rm) if rm.is_dir() else ""}
    t0, r0 = time.perf_counter(), resource.getrusage(resource.RUSAGE_CHILDREN)
    try:
        proc = lane.guest(argv, cpu=cpu, env=env, cwd=staged, timeout=timeout)
        rc, out = proc.returncode, proc.stdout
    except subprocess.TimeoutExpired as exc:
        rc = -9
        out = (exc.output or "") + f"\n[the guest pytest ran past {timeout:.0f} s: stopped]"
    counts, failures = _read_junit(xml)
    host = json.loads(report.read_text()) if report.is_file() else {}
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu_s = r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime
    return Result(cpu, rc, time.perf_counter() - t0, cpu_s, counts, failures, host, out)
