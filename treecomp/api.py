"""The public verbs: compile (parse + build + load) and load."""

from __future__ import annotations

from typing import Any, Callable

from . import backends
from .frontends import parse
from .ir import Forest
from .loader import Predictor, load

__all__ = ["compile", "load"]


def compile(model: Any, backend: str = "auto", n_threads: int | None = None,
            progress: Callable[[str], None] | None = None, **options: Any) -> Predictor:
    """Compile a fitted model (estimator, Booster, model file path or Forest) into a Predictor.

    backend: "c" (C source built with the system compiler), "llvm" (llvmlite JIT: no C
        compiler needed), "arrays" (tables + a generic kernel: instant), or "auto" (chosen from
        the model's size and the host; see treecomp.backends.choose).
    options: backend options (see treecomp.backends.<name>.DEFAULTS), e.g. native=True.
    Built artifacts are cached by content (TREECOMP_CACHE_DIR), so recompiling is instant.
    """
    forest = model if isinstance(model, Forest) else parse(model)
    name = backends.choose(forest) if backend == "auto" else backend
    if forest.is_linear:  # linear leaves: a kernel finds the leaves, treecomp.linear evaluates them
        from . import linear
        return linear.compile(forest, name, n_threads, progress, **options)
    kernel = backends.get(name).build(forest, progress=progress, **options)
    return Predictor(kernel, n_threads=n_threads, forest=forest)
