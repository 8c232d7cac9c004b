"""Predictors and artifacts for forests with linear leaves (LightGBM linear_tree).

A native kernel, built by the requested backend over interp.leaf_id_forest(forest,
node_index=True) (the same routing, leaves holding their own node index, one output per tree),
finds every row's leaf in every tree. The leaves' linear models are then evaluated for a block
of rows and all trees at once, with interp.tree_values' arithmetic (LightGBM's), by the native
kernel's tc_linear_margins (runtime/kernels/linear.c: per row, per tree in order, const +
coeff * x in float64 in feature order, unfused, added to the row's margins from the base) or,
where no native kernel loads, in numpy: the (row, tree) pairs ordered by their leaf's feature
count (a radix sort), so step j of the sum runs over a prefix, the pairs with more than j
features; then the trees are added in order. The Predictor applies the transform as for any
model.

Artifacts carry the leaf-id kernel's artifact plus the *linear section*: the arrays
tc_linear_margins reads (SECTION: per tree its first node, per node its plain value, its
linear constant and its range of (feature, coefficient) pairs, the base margins and each
tree's output column). One section, two carriers:

- a ``.tc`` file (arrays backend): the leaf-id forest's tables as any .tc, and the section as
  named arrays in the same container (arrays_format, header key "linear", with the linear
  model's Head); loaded back into a LinearKernel over an arrays leaf kernel, validated by
  validate_section first (ArtifactError on anything malformed);
- a shared library (any backend: backends/linear_so.py): the leaf-id kernel's code with its
  treecomp.h entry points renamed, the section as a blob, and a small C unit whose
  treecomp_predict calls the leaf kernel, then tc_linear_margins (linear.c compiled in), then
  the average and the inverse link: the C ABI gives the full margins and probabilities.

The in-process Predictor pickles as its IR and rebuilds (LinearPredictor); one loaded from a
.tc pickles as the file.
"""

from __future__ import annotations

import ctypes
import json
import os
from pathlib import Path
from typing import Any, Callable

import numpy as np

from . import backends, interp, toolchain
from .errors import ArtifactError, CompileError, UnsupportedModelError
from .ir import LINEAR_ZERO, Forest, Head, head_of
from .loader import Predictor

#: rows per block: the (row, tree) pairs of a block stay within a few tens of MB
BLOCK_ROWS = 2048
#: the linear section's arrays and dtypes (little-endian), in the order tc_linear_margins takes
#: them: node0 (n_trees + 1: each tree's first node, numbered tree after tree), tree_out
#: (n_trees: its output column), base (n_outputs: the initial margins), plain / const (n_nodes:
#: a node's plain value and linear constant), ptr (n_nodes + 1: its range in feat / coeff)
SECTION = {"node0": "<i8", "tree_out": "<i4", "base": "<f8", "plain": "<f8", "const": "<f8",
           "ptr": "<i8", "feat": "<i4", "coeff": "<f8"}
_SO_SUFFIXES = (".so", ".dll", ".dylib")


def section_arrays(forest: Forest) -> dict[str, np.ndarray]:
    """The linear section of `forest` (SECTION's arrays; a plain tree's leaves: const = value,
    no features)."""
    trees = forest.trees
    plain = [t.value[:, 0] for t in trees]
    cnt = np.concatenate([np.diff(t.linear_ptr) if t.is_linear else np.zeros(t.n_nodes, np.int64)
                          for t in trees])
    lin = [t for t in trees if t.is_linear]
    arrays = {
        "node0": np.cumsum([0] + [t.n_nodes for t in trees]),
        "tree_out": forest.tree_output, "base": forest.base_score,
        "plain": np.concatenate(plain),
        "const": np.concatenate([t.leaf_const if t.is_linear else v for t, v in zip(trees, plain)]),
        "ptr": np.concatenate([[0], np.cumsum(cnt)]),
        "feat": np.concatenate([t.linear_feature for t in lin] + [np.zeros(0, np.int32)]),
        "coeff": np.concatenate([t.linear_coeff for t in lin] + [np.zeros(0)])}
    return {k: np.ascontiguousarray(arrays[k], np.dtype(dt)) for k, dt in SECTION.items()}


def section_fits(forest: Forest) -> bool:
    """Whether the linear section computes `forest`'s margins exactly: scalar float64 leaves
    (LightGBM's) and constant base margins."""
    return all(t.width == 1 for t in forest.trees) and forest.accumulate_dtype == "float64" \
        and forest.base_link == "identity"


def artifact_check(forest: Forest) -> None:
    """UnsupportedModelError unless the linear section computes `forest`'s margins exactly."""
    if not section_fits(forest):
        raise UnsupportedModelError(
            "an artifact of a model with linear leaves needs scalar float64 leaves and constant "
            "base margins (LightGBM's linear_tree); this one runs through treecomp.compile only")


def validate_section(arrays: dict[str, np.ndarray], head: Head, leaf_head: Head) -> None:
    """ArtifactError unless `arrays` is a well-formed linear section for a model of `head`
    whose leaves `leaf_head`'s kernel finds: every index inside its array (feat < n_features,
    tree_out < n_outputs, ptr and node0 rising), the shapes of the model's."""
    def bad(msg: str) -> ArtifactError:
        return ArtifactError(f"corrupt linear section: {msg}")
    if set(arrays) != set(SECTION):
        raise bad(f"arrays {sorted(arrays)}, expected {sorted(SECTION)}")
    for k, dt in SECTION.items():
        if arrays[k].dtype != np.dtype(dt) or arrays[k].ndim != 1:
            raise bad(f"{k} is {arrays[k].dtype}, not {np.dtype(dt)}")
    A = arrays
    T, no, nf = head.n_trees, head.n_outputs, head.n_features
    if (leaf_head.n_outputs, leaf_head.n_trees, leaf_head.n_features, leaf_head.input_dtype) != \
            (T, T, nf, head.input_dtype) or leaf_head.accumulate_dtype != "float64" \
            or head.accumulate_dtype != "float64" or head.base_link != "identity":
        raise bad("the leaf kernel, the section and the model disagree on their shapes")
    node0, ptr = A["node0"], A["ptr"]
    if len(node0) != T + 1 or node0[0] != 0 or np.any(np.diff(node0) < 1):
        raise bad("node0 must rise from 0, one entry per tree and one more")
    n = int(node0[-1])
    if len(A["plain"]) != n or len(A["const"]) != n or len(ptr) != n + 1:
        raise bad(f"plain and const need {n} entries, ptr {n + 1}")
    k = len(A["feat"])
    if ptr[0] != 0 or ptr[-1] != k or np.any(np.diff(ptr) < 0) or len(A["coeff"]) != k:
        raise bad("ptr must rise from 0 to the number of (feature, coeff) pairs")
    if len(A["tree_out"]) != T or len(A["base"]) != no:
        raise bad(f"tree_out needs {T} entries, base {no}")
    if T and (A["tree_out"].min() < 0 or A["tree_out"].max() >= no):
        raise bad("a tree's output column lies outside the outputs")
    if k and (A["feat"].min() < 0 or A["feat"].max() >= nf):
        raise bad("a linear leaf reads a feature the model does not have")
    if not all(np.all(np.isfinite(A[k])) for k in ("const", "coeff", "plain", "base")):
        raise bad("non-finite const, coeff, plain value or base")


class _Tables:
    """The linear section as tc_linear_margins takes it (node after node, tree after tree), and
    padded to the widest leaf for numpy's evaluation."""

    def __init__(self, arrays: dict[str, np.ndarray], average: bool):
        A = {k: np.ascontiguousarray(v, np.dtype(SECTION[k]).newbyteorder("=")) for k, v in arrays.items()}
        self.arrays, self.average = A, average
        self.node0, self.tree_out, self.base = A["node0"], A["tree_out"], A["base"]
        self.plain, self.const, self.ptr = A["plain"], A["const"], A["ptr"]
        self.csr_feat, self.csr_coeff = A["feat"], A["coeff"]
        self.n_trees, self.n_outputs = len(self.tree_out), len(self.base)
        self.offset = self.node0[:-1].astype(np.intp)
        cnt = np.diff(self.ptr)
        self.kmax = int(cnt.max(initial=0))
        self.cnt = cnt.astype(np.uint8 if self.kmax < 256 else np.uint16)  # radix-sortable
        # numpy's form: padded to the widest leaf, (kmax, nodes): step j's rows
        used = np.arange(self.kmax) < cnt[:, None]
        feat, coeff = np.zeros(used.shape, np.intp), np.zeros(used.shape)
        feat[used], coeff[used] = self.csr_feat, self.csr_coeff  # C order: node, then j
        self.feat, self.coeff = feat.T.copy(), coeff.T.copy()
        self._native = _native_fn()

    @classmethod
    def of(cls, forest: Forest) -> "_Tables":
        return cls(section_arrays(forest), forest.average)

    def margins(self, X: np.ndarray, leaves: np.ndarray, native: bool = True) -> np.ndarray:
        """(n_rows, n_outputs) float64 raw margins of rows X that reached `leaves` (n_rows,
        n_trees: IR node indices, as float64). native=False: numpy's evaluation (the fallback
        where no native kernel loads; tests compare the two)."""
        n, T = leaves.shape
        if not (native and self._native is not None):
            acc = np.empty((n, self.n_outputs))
            acc[:] = self.base
            with np.errstate(invalid="ignore"):  # inf - inf: a linear leaf's output on inf inputs
                for t, v in enumerate(self._numpy_outputs(X, leaves)):
                    acc[:, self.tree_out[t]] += v
        else:
            x = np.ascontiguousarray(X, np.float64)
            lv = np.ascontiguousarray(leaves, np.float64)
            acc = np.empty((n, self.n_outputs))
            p = lambda a: a.ctypes.data  # noqa: E731
            if self._native(p(x), n, x.shape[1], p(lv), T, p(self.node0), p(self.tree_out),
                            self.n_outputs, p(self.base), p(self.plain), p(self.const), p(self.ptr),
                            p(self.csr_feat), p(self.csr_coeff), LINEAR_ZERO, p(acc)) != 0:
                raise RuntimeError("treecomp linear leaves: a leaf index outside its tree")
        if self.average:
            acc /= T
        return acc

    def _numpy_outputs(self, X: np.ndarray, leaves: np.ndarray) -> np.ndarray:
        n, T = leaves.shape
        lim = np.diff(self.node0)
        if not np.all((leaves >= 0) & (leaves < lim)):  # NaN fails both
            raise RuntimeError("treecomp linear leaves: a leaf index outside its tree")
        node = (leaves.T.astype(np.intp) + self.offset[:, None]).ravel()  # pair = tree * n + row
        cnt = self.cnt[node]
        order = np.argsort(cnt.dtype.type(self.kmax) - cnt, kind="stable")  # most features first
        nd = node[order]
        base = order % n * X.shape[1]  # the pair's row in X.ravel()
        active = np.cumsum(np.bincount(cnt, minlength=self.kmax + 1)[::-1])[::-1]  # count >= j
        x = X.astype(np.float64).ravel()
        x[np.abs(x) <= LINEAR_ZERO] = 0.0  # the C API's sparse zeros (NaN compares False)
        out = self.const.take(nd)
        with np.errstate(invalid="ignore", over="ignore"):
            for j in range(self.kmax):
                a = int(active[j + 1])  # the pairs with more than j features
                if a == 0:
                    break
                nj = nd[:a]
                f = self.feat[j].take(nj)
                f += base[:a]
                v = x.take(f)
                v *= self.coeff[j].take(nj)
                out[:a] += v
        # NaN inputs made their sums NaN: among those, the pairs that read a NaN take the
        # plain leaf value (the others, inf - inf, stay NaN as in LightGBM)
        cand = np.flatnonzero(np.isnan(out))
        if cand.size:
            nc, bc = nd[cand], base[cand]
            missing = np.zeros(cand.size, bool)
            for j in range(int(self.cnt[nc].max())):
                has = self.cnt[nc] > j
                missing |= has & np.isnan(x.take(bc + np.where(has, self.feat[j].take(nc), 0)))
            out[cand[missing]] = self.plain.take(nc[missing])
        res = np.empty_like(out)
        res[order] = out
        return res.reshape(T, n)


def _native_fn() -> Any:
    """tc_linear_margins of the arrays kernel library, or None where none loads."""
    from .backends import arrays_native
    try:
        fn = arrays_native.native_library().tc_linear_margins
    except CompileError:  # no prebuilt kernel and no compiler: numpy evaluates the leaves
        return None
    P, I = ctypes.c_void_p, ctypes.c_int64
    fn.restype = ctypes.c_int32
    fn.argtypes = [P, I, I, P, I, P, P, I, P, P, P, P, P, P, ctypes.c_double, P]
    return fn


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
        self.tables = _Tables.of(forest) if section_fits(forest) else None
        self._data: bytes | None = None
        self._ir: bytes | None = None

    @classmethod
    def loaded(cls, leaves: Any, head: Head, arrays: dict[str, np.ndarray], average: bool,
               data: bytes, ir: bytes | None) -> "LinearKernel":
        """The kernel of a .tc file with a linear section (arrays.load_bytes): `leaves` its
        arrays leaf kernel, `arrays` the section (validated here)."""
        validate_section(arrays, head, leaves.head)
        k = cls.__new__(cls)
        k.forest, k.backend_name, k.options, k.head = None, leaves.backend, {}, head
        k.leaves, k.backend, k.tables = leaves, leaves.backend, _Tables(arrays, average)
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
        from .backends import linear_so
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
                from .backends import linear_so
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
