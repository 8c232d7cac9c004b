"""Predictors and artifacts for forests with linear leaves (LightGBM linear_tree): a feature
over the Predictor.

A native kernel, built by the requested backend over interp.leaf_id_forest(forest,
node_index=True) (the same routing, leaves holding their own node index, one output per tree),
finds every row's leaf in every tree; the leaves' linear models are then evaluated for a block
of rows and all trees at once by backends.linear_section (LightGBM's arithmetic). The Predictor
applies the transform as for any model.

Artifacts carry the leaf-id kernel's artifact plus the *linear section*. One section, two
carriers:

- a ``.tc`` file (arrays backend): the leaf-id forest's tables as any .tc, and the section as
  named arrays in the same container (backends.arrays.format, header key "linear", with the
  linear model's Head); the loader hands the kernel it reads to this module's "linear" feature
  (loader.FEATURES), which validates the section (ArtifactError on anything malformed) and
  wraps the leaf kernel in a LinearKernel;
- a shared library (any backend: backends/linear_so.py): the leaf-id kernel's code with its
  treecomp.h entry points renamed, the section as a blob, and a small C unit whose
  treecomp_predict calls the leaf kernel, then tc_linear_margins, then the average and the
  inverse link: the C ABI gives the full margins and probabilities.

The in-process Predictor pickles as its IR and rebuilds (LinearPredictor); one loaded from a
.tc pickles as the file.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Callable

import numpy as np

from . import backends, interp, toolchain
from .backends import linear_so
from .backends.linear_section import SectionTables, artifact_check, section_fits
from .errors import ArtifactError
from .ir import Forest, Head, head_of
from .loader import Predictor, register_feature

#: rows per block: the leaves of a block (rows x trees) stay within a few tens of MB
BLOCK_ROWS = 2048
_SO_SUFFIXES = (".so", ".dll", ".dylib")

class LinearKernel:
    """A loader kernel (run(X, out, flags) -> raw margins) for a forest with linear leaves:
    compiled from the forest with a backend, or (LinearKernel.loaded) read from a .tc file."""

    kind = "linear"
    entry = None
    native_transform = False

    def __init__(self, forest: Forest, backend: str, progress: Callable[[str], None] | None = None,
                 **options: Any):
        self.forest, self.backend_name, self.options = forest, backend, options
        self.head = head_of(forest, linear_ok=True)
        self.leaves = backends.get(backend).build(interp.leaf_id_forest(forest, node_index=True),
                                                  progress=progress, **options)
        self.backend = self.leaves.backend
        # vector leaves beside linear ones: the reference evaluates them (no artifact)
        self.tables = SectionTables.of(forest) if section_fits(forest) else None
        self._data: bytes | None = None
        self._ir: bytes | None = None

    @classmethod
    def loaded(cls, leaves: Any, head: Head, arrays: dict[str, np.ndarray], average: bool,
               data: bytes, ir: bytes | None) -> "LinearKernel":
        """The kernel of a .tc file with a linear section (arrays.load_bytes): `leaves` its
        arrays leaf kernel, `arrays` the section (validated when the file was read:
        arrays.format.validate_section)."""
        k = cls.__new__(cls)
        k.forest, k.backend_name, k.options, k.head = None, leaves.backend, {}, head
        k.leaves, k.backend, k.tables = leaves, leaves.backend, SectionTables(arrays, average)
        k.kind, k._data, k._ir = leaves.kind, data, ir  # pickles as its file (loader._restore)
        return k

    @property
    def meta_json(self) -> str:
        """The model's Head as JSON, with what the leaf kernel's metadata adds (backend, isa,
        treecomp_version), as loader.Predictor.metadata reads it."""
        extra = json.loads(getattr(self.leaves, "meta_json", None) or "{}")
        return self.head.to_json(**{k: v for k, v in extra.items()
                                    if k in ("backend", "isa", "treecomp_version")})

    def run(self, X: np.ndarray, out: np.ndarray, flags: int = 0) -> None:
        leaves = np.empty((min(len(X), BLOCK_ROWS), self.head.n_trees))
        for a in range(0, len(X), BLOCK_ROWS):
            Xb = X[a:a + BLOCK_ROWS]
            lv = leaves[:len(Xb)]
            self.leaves.run(Xb, lv, 0)
            if self.tables is None:
                out[a:a + len(Xb)] = interp.raw_from_leaves(self.forest, Xb.astype(np.float64),
                                                            lv.astype(np.intp))
                continue
            try:
                out[a:a + len(Xb)] = self.tables.margins(Xb, lv)
            except RuntimeError as exc:
                if self.forest is not None:
                    raise
                # a loaded file whose leaf tables, validated on their own, reach a node the
                # section does not hold: only the walk can tell
                raise ArtifactError(f"corrupt arrays artifact: {exc}") from None

    def ir_bytes(self) -> bytes | None:
        """The model's IR file a loaded .tc carries (compiled with ir=True), else None."""
        return self._ir

    def _table_file(self) -> bytes:
        """The .tc file: the arrays leaf kernel's tables plus the linear section."""
        if self._data is None:
            artifact_check(self.forest)
            ir = self.forest.to_bytes() if self.options.get("ir") else None
            self._data = self.leaves.file_bytes(ir=ir, linear=(self.head, self.tables.arrays,
                                                               {"average": self.forest.average}))
        return self._data

    def _library(self) -> bytes:
        artifact_check(self.forest)
        return linear_so.build_path(self.forest, self.backend_name, self.options).read_bytes()

    def to_bytes(self) -> bytes:
        """The artifact's bytes (what dask keys a Predictor by): the file loaded, else the .tc
        of an arrays kernel, else the .so `save` writes."""
        if self.forest is None:
            return self._data
        return self._table_file() if self.backend_name == "arrays" else self._library()

    def save(self, path: Any) -> None:
        """A .tc file (arrays backend, a non-library suffix), else a self-contained shared
        library (backends/linear_so.py) whatever the suffix, as the c and llvm backends do;
        one loaded from a .tc saves the same file, or its tables in a .so."""
        so = Path(path).suffix.lower() in _SO_SUFFIXES
        if self.forest is None:  # loaded from a .tc: the same file, or its tables in a .so
            data = self._data
            if so:
                        data = linear_so.from_arrays_kernel(self.leaves, self.head, self.tables.arrays,
                                                    self.tables.average, self._ir).read_bytes()
        elif self.backend_name == "arrays" and not so:
            data = self._table_file()
        else:
            data = self._library()
        toolchain.publish(Path(os.fspath(path)).resolve(), lambda p: p.write_bytes(data))


class LinearPredictor(Predictor):
    """A Predictor over a LinearKernel; pickles as its IR and backend (rebuilt on load)."""

    def __reduce__(self):
        k = self._kernel
        return (_restore, (k.forest.to_bytes(), k.backend_name, k.options, self.n_threads))


def compile(forest: Forest, backend: str, n_threads: int | None = None,
            progress: Callable[[str], None] | None = None, **options: Any) -> LinearPredictor:
    return LinearPredictor(LinearKernel(forest, backend, progress, **options), n_threads=n_threads,
                           forest=forest)


def _restore(ir: bytes, backend: str, options: dict, n_threads: int | None) -> LinearPredictor:
    return compile(Forest.from_bytes(ir), backend, n_threads, **options)


def loaded_kernel(kernel: Any) -> LinearKernel:
    """The loader's "linear" feature: the LinearKernel of an arrays kernel loaded from a .tc with
    a linear section (its linear_section: arrays.kernel.LinearSection)."""
    s = kernel.linear_section
    return LinearKernel.loaded(kernel, s.head, s.arrays, s.average, s.data, s.ir)


register_feature("linear", loaded_kernel)
