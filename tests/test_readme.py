"""The README's examples run as written: its python blocks in order in one directory, then its
bash blocks there (the `treecomp` command), then the C program it points to (docs/c-abi.md's
first) compiled against the .so they wrote. The setup commands (```sh blocks) are what CI
itself runs (.ci/run), so they are not rerun here; they are checked to be that command.

The README is a five-minute front door: at most MAX_WORDS words of prose (prose_words)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.docs_blocks import block

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)
#: about five minutes of reading at 200 words a minute
MAX_WORDS = 1000


def prose_words(markdown: str) -> list[str]:
    """The words a reader reads outside fenced code blocks. Tables count: their cells are prose
    (the supported models, the benchmark's figures), each cell's words and numbers as words; a
    link counts by its text, not its target; tokens of markup alone (`|---|`, `-`, `**`) do not
    count. An inline code span counts as its whitespace-separated tokens."""
    text = FENCE.sub("", markdown)
    text = re.sub(r"\]\([^)]*\)", "]", text)  # [text](target) -> [text]
    return [tok for tok in re.split(r"[\s|]+", text) if re.search(r"[A-Za-z0-9]", tok)]


def blocks(kind: str) -> list[str]:
    return [body for lang, body in FENCE.findall(README.read_text()) if lang == kind]


def test_readme_has_examples():
    assert len(blocks("python")) == 1 and len(blocks("bash")) == 1 and len(blocks("sh")) == 2
    # every block says what it is: run below (python, bash), setup (sh) or shown (text)
    assert {lang for lang, _ in FENCE.findall(README.read_text())} <= {"python", "bash", "sh", "text"}


def test_readme_is_a_five_minute_read():
    words = prose_words(README.read_text())
    assert len(words) <= MAX_WORDS, f"README.md has {len(words)} words of prose (at most {MAX_WORDS})"
    # the count is of prose: a fenced block, a link target and a table rule add nothing
    assert prose_words("a b\n```sh\nc d e\n```\n| x | y |\n|---|---|\n[f](docs/g.md) `h.i` **-**\n") \
        == ["a", "b", "x", "y", "[f]", "`h.i`"]


def test_readme_setup_commands_are_what_ci_runs():
    """The test command is .ci/run's, word for word; the main job's sets up the same way."""
    setup, tests = (body.strip() for body in blocks("sh"))
    ci = [ln.strip() for ln in (ROOT / ".ci" / "run").read_text().splitlines()
          if ln.strip() and not re.match(r"(#|set |cd |export )", ln.strip())]
    assert ci[-1] == tests
    assert tests == ("python3 -m venv .venv && .venv/bin/pip install -q -e '.[test]' && "
                     ".venv/bin/python -m pytest -n 2 -q")
    assert setup == ("python3 -m venv .venv && .venv/bin/pip install -q -e '.[bench]' && "
                     ".venv/bin/treecomp bench --quick")


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
    # the README sends C callers to docs/c-abi.md: its program runs on the .so written above
    assert "docs/c-abi.md" in README.read_text()
    c_code = block("c-abi.md", "c")
    build_run = re.fullmatch(r"/\* (.*) \*/", c_code.splitlines()[0]).group(1)  # the block says how
    (tmp_path / "driver.c").write_text(c_code)
    res = subprocess.run(["bash", "-euo", "pipefail", "-c", build_run], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    values = [float(v) for v in res.stdout.split()]
    # a two-class forest's probabilities of an all-zero row: two numbers summing to 1
    assert len(values) == 2 and abs(sum(values) - 1) < 1e-9
