"""The README's examples run as written: its python blocks in order in one directory, then its
bash blocks there (the `treecomp` command), then its C block compiled against the .so they
wrote. The setup commands (```sh blocks) are what CI itself runs, so they are not rerun here."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)


def blocks(kind: str) -> list[str]:
    return [body for lang, body in FENCE.findall(README.read_text()) if lang == kind]


def test_readme_has_examples():
    assert blocks("python") and blocks("bash") and blocks("c") and len(blocks("sh")) == 2
    # every block says what it is: run below (python, bash, c), setup (sh) or shown (text)
    assert {lang for lang, _ in FENCE.findall(README.read_text())} <= {"python", "bash", "c", "sh", "text"}


@pytest.mark.skipif(shutil.which("cc") is None and shutil.which("gcc") is None, reason="no C compiler")
def test_readme_examples_run_as_written(tmp_path):
    pytest.importorskip("sklearn")
    pytest.importorskip("joblib")
    env = dict(os.environ, PATH=os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""))
    for code in blocks("python"):
        res = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env,
                             capture_output=True, text=True, timeout=300)
        assert res.returncode == 0, res.stderr[-3000:]
    for script in blocks("bash"):
        res = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=tmp_path, env=env,
                             capture_output=True, text=True, timeout=300)
        assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-3000:]
        assert "Error" not in res.stderr
    assert (tmp_path / "pred.csv").is_file() and (tmp_path / "treecomp.h").is_file()
    for c_code in blocks("c"):
        first = c_code.splitlines()[0]
        build_run = re.fullmatch(r"/\* (.*) \*/", first).group(1)  # the block says how
        (tmp_path / "driver.c").write_text(c_code)
        res = subprocess.run(["bash", "-euo", "pipefail", "-c", build_run], cwd=tmp_path, env=env,
                             capture_output=True, text=True, timeout=120)
        assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
        values = [float(v) for v in res.stdout.split()]
        # a two-class forest's probabilities of an all-zero row: two numbers summing to 1
        assert len(values) == 2 and abs(sum(values) - 1) < 1e-9
