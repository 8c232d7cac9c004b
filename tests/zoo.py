"""The test zoo: small deterministic models of every supported kind, trained once per run.

Each library's cases live in tests/zoo_<library>.py, which exposes ``CASES: dict[str, factory]``
where a factory returns a :class:`Case`. `get(name)` builds a case once per process and caches it;
`names(library=None)` lists them. Backend tests iterate over every case, so keep models small.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

LIBRARIES = ("sklearn", "xgboost", "lightgbm")


@dataclass(frozen=True)
class Case:
    model: Any                     # the fitted library object (estimator or Booster)
    X: np.ndarray                  # rows to predict on (edge rows are added by tests/edge.py)
    #: calls returning the library's own outputs on X: keys among "predict", "predict_proba",
    #: "raw" (decision_function / output_margin=True)
    library: dict[str, Callable[[np.ndarray], Any]]
    #: path of a saved model file, when the case is about reading one (else None)
    path: str | None = None


def _modules():
    for lib in LIBRARIES:
        try:
            importlib.import_module(lib)
        except ImportError:  # library not installed: its cases are skipped
            continue
        if importlib.util.find_spec(f"tests.zoo_{lib}") is None:
            continue
        yield lib, importlib.import_module(f"tests.zoo_{lib}")


@functools.cache
def _registry() -> dict[str, tuple[str, Callable[[], Case]]]:
    reg = {}
    for lib, mod in _modules():
        for name, factory in mod.CASES.items():
            reg[f"{lib}:{name}"] = (lib, factory)
    return reg


def names(library: str | None = None) -> list[str]:
    return [n for n, (lib, _) in _registry().items() if library in (None, lib)]


@functools.cache
def get(name: str) -> Case:
    return _registry()[name][1]()
