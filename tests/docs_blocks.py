"""The fenced code blocks of docs/*.md, for the tests that run them (tests/test_docs.py lists
which test runs each)."""

from __future__ import annotations

import re
from pathlib import Path

DOCS = Path(__file__).resolve().parents[1] / "docs"
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)


def blocks(name: str) -> list[tuple[str, str]]:
    """(language, body) of every fenced block of docs/`name`, in order."""
    return FENCE.findall((DOCS / name).read_text())


def block(name: str, lang: str, index: int = 0) -> str:
    """The `index`-th block of language `lang` in docs/`name`."""
    return [body for lng, body in blocks(name) if lng == lang][index]


def with_paths_in(code: str, folder: Path, names: tuple[str, ...]) -> str:
    """`code` with each quoted relative path of `names` made absolute inside `folder`: for an
    example run on a cluster started elsewhere, whose workers resolve relative paths against
    their own directory (a Spark JVM's, Ray's workers'), not the test's."""
    for name in names:
        quoted = f'"{name}"'
        if quoted not in code:
            raise AssertionError(f"the example no longer names {quoted}")
        code = code.replace(quoted, repr(str(folder / name)))
    return code
