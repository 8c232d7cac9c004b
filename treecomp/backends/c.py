"""The C backend: a Forest becomes C source, built by the toolchain into a self-describing .so.

Shape of the generated code (one function per tree, trees grouped into translation units that
compile in parallel; rows are processed tree-major over blocks so a tree's code stays hot)::

    /* tree 7: 63 nodes, depth 6, adds to output 0 */
    static void tree_7(const tc_x *restrict X, int64_t n, tc_acc *restrict acc) {
      for (int64_t r = 0; r < n; ++r) {
        const tc_x *x = X + r * TC_NF;
        tc_acc *a = acc + r * TC_NO + 0;
        if (x[3] > 0x1.8p+1f) goto n2;        /* x <= t goes left; NaN left (!(x > t)) */
        if (!(x[0] <= -0x1.2p-4f)) goto n4;   /* NaN right: a false compare goes right */
        a[0] += 0x1.99999ap-4f; continue;     /* leaf */
      n4: ...
      }
    }

That if/goto shape is what categorical trees deeper than heap_max_depth become (up to
CAT_GOTO_MAX_NODES nodes); by default shallow trees are complete-tree tables walked 8 rows at a
time (TC_HEAP_KERNEL), symmetric ones (one split a level, CatBoost's) a table of levels whose
answers are the leaf index's bits (TC_OBL_KERNEL), and other numeric trees node tables walked
8 rows in lockstep (TC_WALK_KERNEL): faster than branches on rows they cannot predict, and
seconds for gcc.

Each unit runs a constant table of steps (kernel, tables, margin offset) in model order, so
gcc's time does not grow with the number of trees. Single-leaf trees are no functions: a run of
them is one step adding its constants one by one (leading ones fold into the base score,
exactly); big categorical trees are node tables too (TC_CATWALK_KERNEL); category bitsets are
stored trimmed or sparse (bitset_layout).

Floating-point choices:
- Rows are cast to the library's comparison precision (float32 for scikit-learn trees and
  XGBoost) when a block is loaded, exactly like the library's own input conversion.
- Thresholds are lowered by passes.comparison_thresholds (largest float32 <= t for `<=`,
  smallest float32 >= t for `<`) and written as hex literals, so no decimal rounding happens.
- NaN routing is folded into the comparison: a NaN compares false, so `!(x > t)` sends NaN
  left and `!(x <= t)` sends it right; no isnan() calls on the hot path. Never build with
  -ffast-math (it would delete those semantics); -ffp-contract=off keeps sums unfused.
- Margins accumulate per row in the library's dtype, trees in model order, starting from the
  base score; averaging forests divide once at the end: the interpreter's order exactly.
"""

from __future__ import annotations

import functools
import math
import platform
from typing import Any, Callable

import numpy as np

from ..version import __version__
from ..ir import Forest, Tree, head_of
from ..passes import comparison_thresholds
from .. import outputs, toolchain
from ..native import BASE_SYMBOL
from ..platform import incbin

NAME = "c"
#: the file the build writes the IR into for the main unit's .incbin
IR_FILE = "ir.bin"

DEFAULTS: dict[str, Any] = {
    "opt": "-O3",            # optimisation level passed to the C compiler
    "native": False,         # -march=native: faster on this host, may not run elsewhere
    "cflags": (),            # extra compiler flags
    "block_rows": 64,        # rows per tree-major block
    "heap_max_depth": 8,     # trees up to this depth (no categorical splits) use the
                             # branch-free complete-tree layout; deeper ones use if/goto code
    "interleave": 8,         # rows walked together through a branch-free tree
    "symmetric": True,       # symmetric trees (one split a level, CatBoost's) up to
                             # heap_max_depth: leaf index from the levels' bits (TC_OBL_KERNEL)
    "goto_max_nodes": None,  # deeper trees up to this size become if/goto code, larger ones a
                             # node table walked 8 rows in lockstep; None: numeric trees always
                             # a node table, categorical ones goto code up to CAT_GOTO_MAX_NODES
    "nodes_per_unit": 12000, # split translation units at about this many nodes (parallel build)
    "jobs": None,            # parallel compiler processes (default: all cores)
    "ir": False,             # the .so carries the model's IR (treecomp_ir: apply and
                             # contributions once loaded; ir.Forest.to_bytes: ~90 B a node)
}


#: categorical trees up to this many nodes become if/goto code by default (goto_max_nodes=None);
#: bigger ones a node table walked row by row (TC_CATWALK_KERNEL): on hgb-nan-cat (200 trees of
#: 31 leaves, 20k rows, one thread, alternating, medians of 11) goto code took 10,401 ns/row and
#: the tables 21,860. Numeric trees are node tables at any size: their lockstep walk beat goto
#: code on et-multiclass (50 trees of depth 10: 4,257 vs 5,255 ns/row, compile 1.9 vs 91.5 s)
#: and lgbm-binary (500 trees of 63 leaves: 32,024 vs 37,044 ns/row, compile 3.2 vs 49.1 s)
CAT_GOTO_MAX_NODES = 1024


def options(**overrides: Any) -> dict[str, Any]:
    unknown = set(overrides) - set(DEFAULTS)
    if unknown:
        raise TypeError(f"unknown C backend option(s) {sorted(unknown)}; known: {sorted(DEFAULTS)}")
    opts = {**DEFAULTS, **{k: v for k, v in overrides.items() if v is not None}}
    opts["cflags"] = tuple(opts["cflags"])
    if int(opts["block_rows"]) < 1:
        raise ValueError("block_rows must be >= 1")
    return opts


def c_literal(v: float, c_type: str) -> str:
    """An exact C literal of a value already representable in `c_type`."""
    if math.isinf(v):
        inf = "INFINITY" if c_type == "float" else "HUGE_VAL"
        return inf if v > 0 else f"-{inf}"
    mant, _, exp = float(v).hex().partition("p")
    s = (mant.rstrip("0").rstrip(".") if "." in mant else mant) + "p" + exp  # 0x1.8p+1, not 0x1.8000...
    return s + "f" if c_type == "float" else s


def _acc_lit(v: float, acc_t: str) -> str:
    """A leaf value or base score rounded to the accumulation dtype, as the interpreter does."""
    return c_literal(float(np.float32(v)) if acc_t == "float" else float(v), acc_t)


def c_string(s: str) -> str:
    out = []
    for ch in s.encode():
        if ch in (34, 92):
            out.append("\\" + chr(ch))
        elif 32 <= ch < 127:
            out.append(chr(ch))
        else:
            out.append(f"\\{ch:03o}")
    return '"' + "".join(out) + '"'


def _types(forest: Forest) -> tuple[str, str]:
    x_t = "float" if forest.input_dtype == "float32" else "double"
    acc_t = "float" if forest.accumulate_dtype == "float32" else "double"
    return x_t, acc_t


def is_constant(tree: Tree) -> bool:
    """A single-leaf tree: it adds the same leaf to every row."""
    return tree.n_nodes == 1


def n_leading_constants(forest: Forest) -> int:
    """How many constant trees precede the first real one (they fold into the base score; not
    where the base margins are evaluated when the artifact is loaded: forest.base_link)."""
    if forest.base_link != "identity":
        return 0
    n = 0
    for t in forest.trees:
        if not is_constant(t):
            break
        n += 1
    return n


def folded_base(forest: Forest) -> np.ndarray:
    """The base score plus the leading constant trees, in the accumulation dtype.

    Exact: before any real tree the margins equal the base score in every row, so adding those
    constants once here performs the very roundings every row would (same operands, same
    order, one IEEE add each in the accumulation dtype). Later constants are not pre-summed:
    (m + c1) + c2 is not m + (c1 + c2) for a row-dependent margin m.
    """
    acc = np.dtype(forest.accumulate_dtype).type
    # a base_link's margins with libm's log / exp: the loader replaces them with this host's
    base = [acc(b) for b in outputs.base_margins(forest, "libm")]
    for i in range(n_leading_constants(forest)):
        t, o = forest.trees[i], int(forest.tree_output[i])
        for j, v in enumerate(t.value[0]):
            base[o + j] = acc(base[o + j] + acc(v))
    return np.array(base, dtype=forest.accumulate_dtype)


def const_run(forest: Forest, trees: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """A run of consecutive constant trees as (margin index, value) pairs in model order: a
    kernel adds them to every row one by one, i.e. each tree still adds at its own position."""
    idx: list[int] = []
    vals: list[float] = []
    for i in trees:
        o = int(forest.tree_output[i])
        row = forest.trees[i].value[0]
        idx.extend(range(o, o + len(row)))
        vals.extend(row.tolist())
    return np.array(idx, np.int32), np.array(vals, np.float64).astype(forest.accumulate_dtype)


def steps(forest: Forest, trees: list[int]) -> list[tuple[str, Any]]:
    """The unit's work in model order: ("tree", i) or ("const", [i, ...]) for a run of
    consecutive constant trees; leading constants are left out (they are in folded_base)."""
    lead = n_leading_constants(forest)
    out: list[tuple[str, Any]] = []
    for i in trees:
        if i < lead:
            continue
        if is_constant(forest.trees[i]):
            if out and out[-1][0] == "const":
                out[-1][1].append(i)
            else:
                out.append(("const", [i]))
        else:
            out.append(("tree", i))
    return out


def heap_depth(tree: Tree, heap_max_depth: int) -> int:
    """The complete-tree depth `tree` is compiled at, or 0. Trees too big to have such a depth
    are rejected on their size first: computing a deep chain's depth is not free."""
    if tree.n_nodes >= (1 << (heap_max_depth + 1)) or tree.has_categorical:
        return 0
    d = tree.max_depth
    return d if 1 <= d <= heap_max_depth else 0


def _prelude(forest: Forest, interleave: int = 8) -> str:
    x_t, acc_t = _types(forest)
    gt = ">=" if forest.comparison == "<" else ">"   # "goes right" for a non-NaN value
    return (f"/* generated by treecomp {__version__}; model {forest.digest()[:16]} */\n"
            "#include <math.h>\n#include <stdint.h>\n#include <stdlib.h>\n#include \"treecomp.h\"\n"
            f"typedef {x_t} tc_x;\ntypedef {acc_t} tc_acc;\n"
            f"#define TC_NF {forest.n_features}\n#define TC_NO {forest.n_outputs}\n"
            f"#define TC_IL {interleave}\n"
            "/* heap-layout node: feature | (NaN goes right) << 31, threshold */\n"
            "typedef struct { uint32_t fn; tc_x t; } tc_node;\n"
            "/* table-walk node: children l, r (TC_WALK_KERNEL: a leaf is its own two children) */\n"
            "typedef struct { uint32_t fn; tc_x t; int32_t l, r; } tc_cnode;\n"
            "/* one branch-free level step: right child iff v RIGHT t, or v is NaN and the node\n"
            "   sends NaN right (MODE 0: no node does, 1: every node does, 2: per node) */\n"
            f"#define TC_RIGHT0(v, nd) ((v) {gt} (nd)->t)\n"
            f"#define TC_RIGHT1(v, nd) (!((v) {'<' if gt == '>=' else '<='} (nd)->t))\n"
            f"#define TC_RIGHT2(v, nd) (((v) {gt} (nd)->t) | (((nd)->fn >> 31) & ((v) != (v))))\n"
            f"#define TC_CAT_VALID(v, nb) ({_CAT_VALID[forest.category_rule]})\n"
            + HEAP_MACRO + OBL_MACRO + STEP_CODE + CAT_WALK_MACRO)


HEAP_MACRO = r"""/* Walk a complete tree of depth D in heap order (children of i: 2i+1, 2i+2), TC_IL rows at
   once so their independent loads overlap. Leaves L[i - (2^D - 1)] hold W values added at acc[O].
   One such kernel is instantiated per (D, W, MODE) used by the model, not per tree: the trees
   themselves are constant tables, which keeps compile time flat in the number of trees. */
#define TC_HEAP_KERNEL(D, W, MODE)                                                           \
static void tc_heap_##D##_##W##_##MODE(const void *Tv, const tc_acc *restrict L,               \
    const tc_x *restrict X, int64_t n, tc_acc *restrict acc) {                               \
  const tc_node *restrict T = (const tc_node *)Tv;                                           \
  int64_t r = 0;                                                                             \
  for (; r + TC_IL <= n; r += TC_IL) {                                                       \
    uint32_t i[TC_IL];                                                                       \
    for (int k = 0; k < TC_IL; ++k) i[k] = 0;                                                \
    for (int d = 0; d < (D); ++d)                                                            \
      for (int k = 0; k < TC_IL; ++k) {                                                      \
        const tc_node *nd = &T[i[k]];                                                        \
        tc_x v = X[(r + k) * TC_NF + (nd->fn & 0x7fffffffu)];                                \
        i[k] = 2 * i[k] + 1 + (uint32_t)TC_RIGHT##MODE(v, nd);                               \
      }                                                                                      \
    for (int k = 0; k < TC_IL; ++k)                                                          \
      for (int j = 0; j < (W); ++j)                                                          \
        acc[(r + k) * TC_NO + j] += L[(i[k] - ((1u << (D)) - 1)) * (W) + j];                 \
  }                                                                                          \
  for (; r < n; ++r) {                                                                       \
    uint32_t i = 0;                                                                          \
    for (int d = 0; d < (D); ++d) {                                                          \
      const tc_node *nd = &T[i];                                                             \
      tc_x v = X[r * TC_NF + (nd->fn & 0x7fffffffu)];                                        \
      i = 2 * i + 1 + (uint32_t)TC_RIGHT##MODE(v, nd);                                       \
    }                                                                                        \
    for (int j = 0; j < (W); ++j) acc[r * TC_NO + j] += L[(i - ((1u << (D)) - 1)) * (W) + j]; \
  }                                                                                          \
}
/* Walk a tree stored as a node table (trees too big for if/goto code): TC_IL rows in lockstep,
   so that their chains of dependent loads (node, feature value, next node) overlap. Internal
   nodes come first (0 .. ni - 1), then the leaves in leaf order; a leaf's children are itself,
   so a row that reached its leaf stays there while the others step, and the block is done when
   every row's node is >= ni. Its leaf index is then node - ni. The same leaf as a row-by-row
   walk, so the same adds in the same order. */
typedef struct { const tc_cnode *N; int32_t ni; } tc_ctab;
#define TC_WALK_KERNEL(W, MODE)                                                              \
static void tc_walk_##W##_##MODE(const void *Tv, const tc_acc *restrict L,                     \
    const tc_x *restrict X, int64_t n, tc_acc *restrict acc) {                               \
  const tc_cnode *restrict T = ((const tc_ctab *)Tv)->N;                                     \
  const int32_t ni = ((const tc_ctab *)Tv)->ni;                                              \
  int64_t r = 0;                                                                             \
  for (; r + TC_IL <= n; r += TC_IL) {                                                       \
    int32_t i[TC_IL];                                                                        \
    for (int k = 0; k < TC_IL; ++k) i[k] = 0;                                                \
    for (;;) {                                                                               \
      int32_t lo = i[0];                                                                     \
      for (int k = 1; k < TC_IL; ++k) lo = i[k] < lo ? i[k] : lo;                            \
      if (lo >= ni) break;                                                                   \
      for (int k = 0; k < TC_IL; ++k) {                                                      \
        const tc_cnode *nd = &T[i[k]];                                                       \
        tc_x v = X[(r + k) * TC_NF + (nd->fn & 0x7fffffffu)];                                \
        i[k] = TC_RIGHT##MODE(v, nd) ? nd->r : nd->l;                                        \
      }                                                                                      \
    }                                                                                        \
    for (int k = 0; k < TC_IL; ++k)                                                          \
      for (int j = 0; j < (W); ++j)                                                          \
        acc[(r + k) * TC_NO + j] += L[(i[k] - ni) * (W) + j];                                \
  }                                                                                          \
  for (; r < n; ++r) {                                                                       \
    const tc_x *x = X + r * TC_NF;                                                           \
    int32_t i = 0;                                                                           \
    while (i < ni) {                                                                         \
      const tc_cnode *nd = &T[i];                                                            \
      tc_x v = x[nd->fn & 0x7fffffffu];                                                      \
      i = TC_RIGHT##MODE(v, nd) ? nd->r : nd->l;                                             \
    }                                                                                        \
    for (int j = 0; j < (W); ++j) acc[r * TC_NO + j] += L[(i - ni) * (W) + j];               \
  }                                                                                          \
}
"""


OBL_MACRO = r"""/* A symmetric tree (CatBoost's: one split a level, frontends/catboost.py): level d of T tests
   one column for every row, and the leaf index is the levels' answers as bits, the root's the
   most significant: the heap walk's leaf without a dependent load of the next node. Level by
   level over up to 64 rows, so each level's compares are independent of each other. With CAT,
   a level also goes right only if !(v >= t2): CatBoost one-hot levels "code == k" are t =
   the float below k, t2 = k + 1 (numeric levels: t2 NaN, never >=). */
typedef struct { uint32_t fn; tc_x t, t2; } tc_onode;
#define TC_OBL_KERNEL(D, W, MODE, CAT)                                                       \
static void tc_obl_##D##_##W##_##MODE##_##CAT(const void *Tv, const tc_acc *restrict L,        \
    const tc_x *restrict X, int64_t n, tc_acc *restrict acc) {                               \
  const tc_onode *restrict T = (const tc_onode *)Tv;                                         \
  for (int64_t r0 = 0; r0 < n; r0 += 64) {                                                   \
    const int nb = n - r0 < 64 ? (int)(n - r0) : 64;                                         \
    uint32_t idx[64];                                                                        \
    for (int k = 0; k < nb; ++k) idx[k] = 0;                                                 \
    for (int d = 0; d < (D); ++d) {                                                          \
      const tc_onode *nd = &T[d];                                                            \
      const tc_x *xc = X + r0 * TC_NF + (nd->fn & 0x7fffffffu);                              \
      for (int k = 0; k < nb; ++k) {                                                         \
        tc_x v = xc[k * TC_NF];                                                              \
        uint32_t right = (uint32_t)TC_RIGHT##MODE(v, nd);                                    \
        if (CAT) right &= (uint32_t)!(v >= nd->t2);                                          \
        idx[k] = 2 * idx[k] + right;                                                         \
      }                                                                                      \
    }                                                                                        \
    for (int k = 0; k < nb; ++k)                                                             \
      for (int j = 0; j < (W); ++j)                                                          \
        acc[(r0 + k) * TC_NO + j] += L[idx[k] * (W) + j];                                    \
  }                                                                                          \
}
"""


STEP_CODE = r"""/* A unit runs a constant table of steps (kernel, its tables, margin offset) in model order:
   the call sequence is data, so gcc's time does not grow with the number of trees (thousands
   of inlined calls or loops in one function cost it minutes). */
typedef void (*tc_step_fn)(const void *, const tc_acc *, const tc_x *, int64_t, tc_acc *);
typedef struct { tc_step_fn f; const void *T; const tc_acc *L; int64_t o; } tc_step;
/* A run of constant (single-leaf) trees: K = {count, margin index...}, V their values; each row
   gets them added one by one in model order, so the roundings are those of tree-by-tree adds.
   Constant by constant over all the block's rows: the rows' adds are independent (row by row
   they would be one chain of dependent adds, 6x slower for 3,000 constants). */
static inline void tc_const(const void *Kv, const tc_acc *restrict V, const tc_x *restrict X,
                            int64_t n, tc_acc *restrict acc) {
  const int32_t *K = (const int32_t *)Kv;
  (void)X;
  for (int32_t k = 0; k < K[0]; ++k) {
    const int32_t o = K[k + 1];
    const tc_acc v = V[k];
    for (int64_t r = 0; r < n; ++r) acc[r * TC_NO + o] += v;
  }
}
/* Bit c of a sparse bitset: its nonzero words W at sorted word indices I (m of them). */
static inline unsigned tc_sparse_bit(const uint32_t *I, const uint32_t *W, int32_t m, int32_t c) {
  uint32_t w = (uint32_t)c >> 5;
  int32_t lo = 0, hi = m;
  while (lo < hi) { int32_t mid = lo + (hi - lo) / 2; if (I[mid] < w) lo = mid + 1; else hi = mid; }
  return (lo < m && I[lo] == w) ? (W[lo] >> (c & 31)) & 1u : 0u;
}
"""


#: forest.category_rule as C (ordered compares: NaN is never a valid category)
_CAT_VALID = {"nonneg": "(v) >= 0 && (v) < (nb)", "trunc": "(v) > -1 && (v) < (nb)",
              "integral": "(v) >= 0 && (v) < (nb) && (v) == (tc_x)(int)(v)"}

CAT_WALK_MACRO = r"""/* Walk a big tree with categorical splits from a node table (goto code of thousands of
   nodes costs gcc tens of seconds). k >= 0 marks a categorical node; its split C[k] has its
   bitset at W[start..start+m) (dense: word w is bit block w; sparse, flags & 1: the nonzero
   words at word indices I[start..start+m)); flags & 2: a non-NaN invalid id goes left. */
typedef struct { uint32_t fn; tc_x t; int32_t l, r, k; } tc_knode;
typedef struct { uint32_t start, m, flags; } tc_kcat;
typedef struct { const tc_knode *N; const tc_kcat *C; const uint32_t *W, *I; int32_t nbits; } tc_ktree;
#define TC_CATWALK_KERNEL(WD)                                                                \
static void tc_catwalk_##WD(const void *Tv, const tc_acc *restrict L,                         \
    const tc_x *restrict X, int64_t n, tc_acc *restrict acc) {                               \
  const tc_ktree *K = (const tc_ktree *)Tv;                                                  \
  const tc_knode *T = K->N;                                                                  \
  for (int64_t r = 0; r < n; ++r) {                                                          \
    const tc_x *x = X + r * TC_NF;                                                           \
    int32_t i = 0;                                                                           \
    while (T[i].l >= 0) {                                                                    \
      const tc_knode *nd = &T[i];                                                            \
      tc_x v = x[nd->fn & 0x7fffffffu];                                                      \
      unsigned right;                                                                        \
      if (nd->k < 0) right = TC_RIGHT2(v, nd);                                               \
      else {                                                                                 \
        const tc_kcat *ct = &K->C[nd->k];                                                    \
        if (TC_CAT_VALID(v, K->nbits)) {                                                     \
          int c = (int)v;                                                                    \
          unsigned bit = (ct->flags & 1u)                                                    \
            ? tc_sparse_bit(K->I + ct->start, K->W + ct->start, (int32_t)ct->m, c)           \
            : (((uint32_t)c >> 5) < ct->m ? (K->W[ct->start + ((uint32_t)c >> 5)] >> (c & 31)) & 1u : 0u); \
          right = !bit;                                                                      \
        } else if (v != v) right = nd->fn >> 31;                                             \
        else right = !(ct->flags & 2u);                                                      \
      }                                                                                      \
      i = right ? nd->r : nd->l;                                                             \
    }                                                                                        \
    for (int j = 0; j < (WD); ++j) acc[r * TC_NO + j] += L[T[i].r * (WD) + j];               \
  }                                                                                          \
}
"""


def heap_tables(tree: Tree, thr: np.ndarray, depth: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Pad `tree` to a complete tree of `depth` in heap order (vectorised, level by level).

    A leaf above the last level becomes a pass-through node (threshold +inf, NaN left) whose
    whole subtree repeats its value, so every row takes exactly `depth` steps.
    Returns (feature, threshold, nan_right) for the 2^depth - 1 internal slots and the leaf
    source node of each of the 2^depth leaf slots.
    """
    n_int = (1 << depth) - 1
    feat = np.zeros(n_int, np.int64)
    t = np.full(n_int, np.inf, thr.dtype)
    nan_right = np.zeros(n_int, bool)
    src = np.zeros(1, np.int64)              # source node of each slot on the current level
    for d in range(depth):
        lo = (1 << d) - 1
        internal = tree.left[src] >= 0
        feat[lo:lo + len(src)] = np.where(internal, tree.feature[src], 0)
        t[lo:lo + len(src)] = np.where(internal, thr[src], np.inf)
        nan_right[lo:lo + len(src)] = internal & ~tree.default_left[src]
        nxt = np.empty(2 * len(src), np.int64)
        nxt[0::2] = np.where(internal, tree.left[src], src)
        nxt[1::2] = np.where(internal, tree.right[src], src)
        src = nxt
    return feat, t, nan_right, src


def emit_heap_tree(i: int, tree: Tree, forest: Forest, depth: int, out: list[str]) -> tuple[int, int, int]:
    """Append tree `i` in the branch-free complete-tree layout; returns its kernel's (D, W, MODE)."""
    x_t, acc_t = _types(forest)
    thr = comparison_thresholds(tree, forest)
    feat, t, nan_right, leaf_src = heap_tables(tree, thr, depth)
    o = int(forest.tree_output[i])
    # Pass-through slots repeat one leaf in both subtrees, so their direction never matters:
    # the NaN mode is chosen from the tree's real splits alone.
    mode = _nan_mode(tree)
    nodes = ", ".join(f"{{{int(f) | (int(nr) << 31)}u, {c_literal(float(v), x_t)}}}"
                      for f, v, nr in zip(feat, t, nan_right))
    leaves = ", ".join(_acc_lit(v, acc_t) for v in tree.value[leaf_src].ravel())
    out.append(f"/* tree {i}: {tree.n_nodes} nodes, depth {tree.max_depth} -> complete depth {depth}, "
               f"adds to output {o} */\n"
               f"static const tc_node T{i}[{len(feat)}] = {{{nodes}}};\n"
               f"static const tc_acc L{i}[{len(leaf_src) * tree.width}] = {{{leaves}}};\n\n")
    return depth, tree.width, mode

def symmetric_levels(tree: Tree, forest: Forest, max_depth: int):
    """(feature, t, t2, nan_right) per level, root first, when `tree` is a complete heap of
    depth 1..max_depth whose every level tests one column the same way: one threshold and
    NaN direction, or (category_rule "nonneg") one-hot "category == k" (the bitset of every
    category but k, other values and NaN left), as "v >= k" (t: k, or the float below it for
    comparison "<=") and t2 = k + 1. Else None."""
    n = tree.n_nodes
    depth = n.bit_length() - 1
    if n != (1 << (depth + 1)) - 1 or not 1 <= depth <= max_depth:
        return None
    n_int = (1 << depth) - 1
    idx = np.arange(n_int)
    if not (np.array_equal(tree.left[:n_int], 2 * idx + 1) and np.array_equal(tree.right[:n_int], 2 * idx + 2)
            and np.all(tree.left[n_int:] < 0)):
        return None
    x_t = np.float32 if forest.input_dtype == "float32" else np.float64
    thr = comparison_thresholds(tree, forest)
    level = np.repeat(np.arange(depth), 1 << np.arange(depth))
    first = (1 << level) - 1  # each slot's level's first slot
    ci = tree.cat_index[:n_int]
    if np.any(tree.feature[:n_int] != tree.feature[first]) or np.any((ci >= 0) != (ci[first] >= 0)) \
            or np.any(tree.default_left[:n_int] != tree.default_left[first]):
        return None
    num = ci < 0
    if np.any(thr[:n_int][num] != thr[first][num]):
        return None
    top = (1 << np.arange(depth)) - 1  # each level's first slot
    t, t2 = thr[top].astype(x_t), np.full(depth, np.nan, x_t)
    if not num.all():
        if forest.category_rule != "nonneg" or not np.all(tree.cat_other_left) \
                or not np.all(tree.default_left[:n_int][~num]):
            return None
        bits = tree.cat_bits
        k = np.full(n_int, -1, np.int64)
        for r in np.unique(ci[~num]):  # the set must be all but one category of its words
            ones = np.unpackbits(bits[r].view(np.uint8), bitorder="little")
            zero = np.flatnonzero(ones == 0)
            if len(zero) != 1:
                return None
            k[ci == r] = zero[0]
        if np.any(k[~num] != k[first][~num]) or k.max() >= 1 << 24:
            return None
        lv = np.flatnonzero(ci[top] >= 0)
        kk = k[top[lv]].astype(x_t)
        t[lv] = kk if forest.comparison == "<" else np.nextafter(kk, x_t(-np.inf))  # v >= k
        t2[lv] = kk + 1
    return tree.feature[top], t, t2, ~tree.default_left[top]


def emit_symmetric_tree(i: int, tree: Tree, forest: Forest, levels, out: list[str]) -> tuple[int, int, int, int]:
    """Append symmetric tree `i` for TC_OBL_KERNEL; returns its kernel's (D, W, MODE, CAT)."""
    x_t, acc_t = _types(forest)
    feat, t, t2, nan_right = levels
    depth = len(feat)
    nodes = ", ".join(f"{{{int(f) | (int(nr) << 31)}u, {c_literal(float(a), x_t)}, "
                      f"{c_literal(float(b), x_t) if b == b else '(tc_x)NAN'}}}"
                      for f, a, b, nr in zip(feat, t, t2, nan_right))
    leaves = ", ".join(_acc_lit(v, acc_t) for v in tree.value[(1 << depth) - 1:].ravel())
    out.append(f"/* tree {i}: symmetric, depth {depth}, adds to output {int(forest.tree_output[i])} */\n"
               f"static const tc_onode T{i}[{depth}] = {{{nodes}}};\n"
               f"static const tc_acc L{i}[{tree.width << depth}] = {{{leaves}}};\n\n")
    return depth, tree.width, _nan_mode(tree), int(bool(np.any(t2 == t2)))


def _nan_mode(tree: Tree) -> int:
    dr = ~tree.default_left[tree.left >= 0]
    return 0 if not dr.any() else (1 if dr.all() else 2)


def emit_table_tree(i: int, tree: Tree, forest: Forest, out: list[str]) -> tuple[int, int]:
    """Append tree `i` as a node table for TC_WALK_KERNEL (big trees); returns (W, MODE).

    Internal nodes first, in IR order, then the leaves in IR (= leaf value) order, each leaf its
    own two children (feature 0, threshold 0: never read for a direction, both are itself)."""
    x_t, acc_t = _types(forest)
    thr = comparison_thresholds(tree, forest)
    o = int(forest.tree_output[i])
    leaf = tree.left < 0
    ni = int(np.count_nonzero(~leaf))
    new = np.where(leaf, ni + np.cumsum(leaf) - 1, np.cumsum(~leaf) - 1)   # IR node -> table slot
    order = np.concatenate([np.flatnonzero(~leaf), np.flatnonzero(leaf)])
    fn = np.where(leaf, 0, tree.feature).astype(np.int64) | ((~tree.default_left & ~leaf).astype(np.int64) << 31)
    lc = np.where(leaf, new, new[np.maximum(tree.left, 0)])
    rc = np.where(leaf, new, new[np.maximum(tree.right, 0)])
    nodes = ", ".join(f"{{{int(fn[k])}u, {c_literal(float(thr[k]) if not leaf[k] else 0.0, x_t)}, "
                      f"{int(lc[k])}, {int(rc[k])}}}" for k in order)
    leaves = ", ".join(_acc_lit(v, acc_t) for v in tree.value[leaf].ravel())
    mode = _nan_mode(tree)
    out.append(f"/* tree {i}: {tree.n_nodes} nodes: node table ({ni} internal, then the leaves), "
               f"adds to output {o} */\n"
               f"static const tc_cnode N{i}[{tree.n_nodes}] = {{{nodes}}};\n"
               f"static const tc_ctab T{i} = {{N{i}, {ni}}};\n"
               f"static const tc_acc L{i}[{tree.n_leaves * tree.width}] = {{{leaves}}};\n\n")
    return tree.width, mode


def emit_cat_table_tree(i: int, tree: Tree, forest: Forest, out: list[str]) -> int:
    """Append big categorical tree `i` as tables for TC_CATWALK_KERNEL; returns W."""
    x_t, acc_t = _types(forest)
    thr = comparison_thresholds(tree, forest)
    o = int(forest.tree_output[i])
    leaf = tree.left < 0
    numeric = ~leaf & (tree.cat_index < 0)
    fn = np.where(leaf, 0, tree.feature).astype(np.int64) | ((~tree.default_left & ~leaf).astype(np.int64) << 31)
    r = np.where(leaf, np.cumsum(leaf) - 1, tree.right)
    nodes = ", ".join(f"{{{int(a)}u, {c_literal(float(t) if num else 0.0, x_t)}, {int(b)}, {int(c)}, {int(k)}}}"
                      for a, t, num, b, c, k in zip(fn, thr, numeric, tree.left, r, tree.cat_index))
    cats, words, idx = [], [], []
    for k in range(tree.cat_bits.shape[0]):
        layout, ix, w = bitset_layout(tree.cat_bits[k])
        flags = int(layout == "sparse") | (2 * int(bool(tree.cat_other_left[k])))
        cats.append(f"{{{len(words)}u, {len(w)}u, {flags}u}}")
        words.extend(int(v) for v in w)
        idx.extend(int(v) for v in (ix if layout == "sparse" else np.zeros(len(w), np.int64)))
    leaves = ", ".join(_acc_lit(v, acc_t) for v in tree.value[leaf].ravel())
    nw = max(len(words), 1)
    out.append(f"/* tree {i}: {tree.n_nodes} nodes with categorical splits: node table, "
               f"adds to output {o} */\n"
               f"static const tc_knode N{i}[{tree.n_nodes}] = {{{nodes}}};\n"
               f"static const tc_kcat C{i}[{max(len(cats), 1)}] = {{{', '.join(cats) or '{0u, 0u, 0u}'}}};\n"
               f"static const uint32_t W{i}[{nw}] = {{{', '.join(f'0x{v:08x}u' for v in words) or '0u'}}};\n"
               f"static const uint32_t I{i}[{nw}] = {{{', '.join(f'{v}u' for v in idx) or '0u'}}};\n"
               f"static const tc_ktree T{i} = {{N{i}, C{i}, W{i}, I{i}, {32 * tree.cat_bits.shape[1]}}};\n"
               f"static const tc_acc L{i}[{tree.n_leaves * tree.width}] = {{{leaves}}};\n\n")
    return tree.width


def emit_tree(i: int, tree: Tree, forest: Forest, out: list[str]) -> None:
    """Append the C function of tree `i` to `out` (iterative pre-order walk: no recursion)."""
    x_t, acc_t = _types(forest)
    thr = comparison_thresholds(tree, forest)
    strict = forest.comparison == "<"
    o = int(forest.tree_output[i])
    left, right, feat, dl = tree.left, tree.right, tree.feature, tree.default_left
    cidx, nwords = tree.cat_index, tree.cat_bits.shape[1]
    bit_of = []   # C expression of bit c of split k's bitset
    for k in range(tree.cat_bits.shape[0]):
        layout, idx, words = bitset_layout(tree.cat_bits[k])
        hexw = ", ".join(f"0x{int(w):08x}u" for w in words)
        if layout == "empty":
            bit_of.append("0u")
        elif layout == "dense":
            out.append(f"static const uint32_t cat_{i}_{k}[{len(words)}] = {{{hexw}}};\n")
            bit = f"(cat_{i}_{k}[c >> 5] >> (c & 31)) & 1u"
            bit_of.append(bit if len(words) == nwords else f"(c < {32 * len(words)}) ? {bit} : 0u")
        else:
            out.append(f"static const uint32_t cati_{i}_{k}[{len(words)}] = "
                       f"{{{', '.join(f'{int(w)}u' for w in idx)}}};\n"
                       f"static const uint32_t cat_{i}_{k}[{len(words)}] = {{{hexw}}};\n")
            bit_of.append(f"tc_sparse_bit(cati_{i}_{k}, cat_{i}_{k}, {len(words)}, c)")
    out.append(f"/* tree {i}: {tree.n_nodes} nodes, {tree.n_leaves} leaves, adds to output {o} */\n"
               f"static void tree_{i}(const void *T_, const tc_acc *L_, const tc_x *restrict X, int64_t n,\n"
               "                   tc_acc *restrict acc) {\n"
               "  (void)T_; (void)L_;\n"
               "  for (int64_t r = 0; r < n; ++r) {\n"
               "    const tc_x *x = X + r * TC_NF;\n"
               f"    tc_acc *a = acc + r * TC_NO + {o};\n")
    targets = set(right[left >= 0].tolist())
    stack = [0]
    while stack:
        nd = stack.pop()
        label = f"  n{nd}:" if nd in targets else "   "
        if left[nd] < 0:
            adds = " ".join(f"a[{j}] += {_acc_lit(v, acc_t)};" for j, v in enumerate(tree.value[nd]))
            out.append(f"{label} {adds} continue;\n")
            continue
        f, r = int(feat[nd]), int(right[nd])
        if cidx[nd] >= 0:
            k = int(cidx[nd])
            nbits = 32 * nwords
            other = int(bool(tree.cat_other_left[k]))
            valid = {"nonneg": f"v >= 0 && v < {nbits}", "trunc": f"v > -1 && v < {nbits}",
                     "integral": f"v >= 0 && v < {nbits} && v == (tc_x)(int)v"}[forest.category_rule]
            out.append(f"{label} {{ tc_x v = x[{f}]; unsigned go; "
                       f"if ({valid}) {{ int c = (int)v; go = {bit_of[k]}; }} "
                       f"else go = (v != v) ? {int(bool(dl[nd]))}u : {other}u; "
                       f"if (!go) goto n{r}; }}\n")
        else:
            t = c_literal(float(thr[nd]), x_t)
            if dl[nd]:   # NaN goes left: take the right branch only on a true "not left" compare
                cond = f"x[{f}] >= {t}" if strict else f"x[{f}] > {t}"
            else:        # NaN goes right: any false compare (NaN included) takes the right branch
                cond = f"!(x[{f}] < {t})" if strict else f"!(x[{f}] <= {t})"
            out.append(f"{label} if ({cond}) goto n{r};\n")
        stack.append(r)
        stack.append(int(left[nd]))
    out.append("  }\n}\n\n")


def bitset_layout(row: np.ndarray) -> tuple[str, np.ndarray, np.ndarray]:
    """How to store one split's category bitset: ("empty", -, -), ("dense", -, words) with
    trailing zero words dropped, or ("sparse", word indices, words) holding only the nonzero
    words (looked up by binary search). A tree's bitsets share one width, that of its widest
    split: LightGBM models with category ids in the millions would otherwise emit megabytes
    of zeros per split (sparse_categorical: 33 x 257,049 words, 110 MB of C)."""
    nz = np.flatnonzero(row)
    if nz.size == 0:
        return "empty", nz, nz
    length = int(nz[-1]) + 1
    if length <= 64 or length <= 4 * nz.size:
        return "dense", nz, row[:length]
    return "sparse", nz, row[nz]


def _units(forest: Forest, nodes_per_unit: int) -> list[list[int]]:
    units, cur, size = [], [], 0
    for i, t in enumerate(forest.trees):
        if cur and size + t.n_nodes > nodes_per_unit:
            units.append(cur)
            cur, size = [], 0
        cur.append(i)
        size += t.n_nodes
    units.append(cur)
    return units


def transform_code(forest: Forest) -> str:
    """The C of TREECOMP_TRANSFORM over one row `a` of margins (forest: a Forest or a Head):
    the division by output_divisor (LightGBM's random-forest mode), then the inverse link."""
    t = forest.transform
    if t in outputs.PYTHON_TRANSFORMS:  # TREECOMP_TRANSFORM refused (outputs.accepted_flags)
        return ""
    code = _link_code(forest)
    if forest.output_divisor != 1:  # GBDT::Predict: output[k] /= num_iteration_for_pred_
        code = (f"for (int k = 0; k < TC_NO; ++k) a[k] /= (tc_acc){forest.output_divisor};\n"
                f"        {code}")
    return code


def _link_code(forest: Forest) -> str:
    _, acc_t = _types(forest)
    one = "1.0f" if acc_t == "float" else "1.0"
    # exp in double then rounded: glibc's correctly rounded expf, and numpy's float64 exp
    ex = "(float)exp((double)({0}))" if acc_t == "float" else "exp({0})"
    t = forest.transform
    if t == "identity":
        return ""
    if acc_t == "float" and t in ("sigmoid", "exp", "softmax"):
        # XGBoost 3.2's float32 transforms (src/common/math.h) with libm's expf, as
        # outputs._sigmoid_f32 / _softmax_f32 / _expf reproduce them
        if t == "sigmoid":  # 1 / ((expf(min(-x, 88.7f)) + 1) + 1e-16f)
            return ("for (int k = 0; k < TC_NO; ++k) { float v = -a[k]; v = (88.7f < v) ? 88.7f : v;"
                    " a[k] = 1.0f / ((expf(v) + 1.0f) + 1e-16f); }")
        if t == "exp":
            return "for (int k = 0; k < TC_NO; ++k) a[k] = expf(a[k]);"
        return ("float m = a[0]; for (int k = 1; k < TC_NO; ++k) m = fmaxf(a[k], m);\n"
                "      double s = 0; for (int k = 0; k < TC_NO; ++k) { a[k] = expf(a[k] - m); s += a[k]; }\n"
                "      float fs = (float)s; for (int k = 0; k < TC_NO; ++k) a[k] /= fs;")
    if t == "logistic_ort":  # ONNX Runtime's ComputeLogistic (outputs._logistic_ort)
        return (f"for (int k = 0; k < TC_NO; ++k) {{ tc_acc x = a[k], v = {one} / ({one} + "
                f"{'expf' if acc_t == 'float' else 'exp'}(-fabs(x))); a[k] = x < 0 ? {one} - v : v; }}")
    if t in ("softmax_ort", "softmax_zero_ort"):  # ComputeSoftmax / ComputeSoftmaxZero
        e = "expf" if acc_t == "float" else "exp"
        z = t == "softmax_zero_ort"
        body = (f"if (a[k] > (tc_acc)1e-7f || a[k] < -(tc_acc)1e-7f) {{ a[k] = {e}(a[k] - m); s += a[k]; }} "
                f"else a[k] = a[k] * en;") if z else f"a[k] = {e}(a[k] - m); s += a[k];"
        return ("tc_acc m = -3.40282347e+38f; for (int k = 0; k < TC_NO; ++k) if (a[k] > m) m = a[k];\n"
                + (f"      tc_acc en = {e}(-m);\n" if z else "")
                + f"      tc_acc s = 0; for (int k = 0; k < TC_NO; ++k) {{ {body} }}\n"
                "      for (int k = 0; k < TC_NO; ++k) a[k] /= s;")
    if t in ("sigmoid", "sigmoid2"):
        arg = "-a[k]" if t == "sigmoid" else "-(a[k] * 2)"
        return f"for (int k = 0; k < TC_NO; ++k) a[k] = {one} / ({one} + {ex.format(arg)});"
    if t in ("exp", "exp64"):  # exp64: XGBoost's survival:aft, (float)exp((double)x)
        return f"for (int k = 0; k < TC_NO; ++k) a[k] = {ex.format('a[k]')};"
    # softmax / softmax_seq: max-subtract, exp, sequential sum, divide (numpy's pairwise sum for
    # >= 8 classes may differ in the last bits; the Python Predictor uses numpy's own)
    return ("tc_acc m = a[0]; for (int k = 1; k < TC_NO; ++k) if (a[k] > m) m = a[k];\n"
            f"      tc_acc s = 0; for (int k = 0; k < TC_NO; ++k) {{ a[k] = {ex.format('a[k] - m')}; s += a[k]; }}\n"
            "      for (int k = 0; k < TC_NO; ++k) a[k] /= s;")


def blob_code(symbol: str, file: str, blob: bytes, incbin: bool, align: int = 64) -> str:
    """C defining the hidden byte array `symbol` holding `blob`: on ELF pulled into .rodata by
    the assembler's .incbin from `file` (toolchain writes it next to the unit: no C literal to
    parse, so a multi-MB blob builds as fast as a small one), elsewhere a C string literal."""
    if incbin:
        return f"""__asm__(".section .rodata.{symbol},\\"a\\",@progbits\\n"
        ".balign {align}\\n"
        ".type {symbol}, @object\\n"
        "{symbol}:\\n"
        ".incbin \\"@DIR@/{file}\\"\\n"
        ".size {symbol}, .-{symbol}\\n"
        ".previous\\n");
extern const unsigned char {symbol}[] __attribute__((visibility("hidden")));
"""
    lines = []
    for i in range(0, len(blob), 64):
        lines.append('"' + "".join(f"\\x{b:02x}" for b in blob[i:i + 64]) + '"')
    return (f"static const unsigned char {symbol}[{max(len(blob), 1)}] __attribute__((aligned({align}))) =\n"
            + ("\n".join(lines) or '""') + ";\n")


def ir_code(size: int, data: str) -> str:
    """The treecomp.h accessors of the model's IR file (ir.Forest.to_bytes) at C expression
    `data`, `size` bytes: what loader.Predictor reads for apply / contributions."""
    return (f"TC_EXPORT int64_t treecomp_ir_size(void) {{ return {size}; }}\n"
            f"TC_EXPORT const void *treecomp_ir(void) {{ return {data}; }}\n")


def _base_decl(forest: Forest, base: str) -> str:
    """The initial margins: a constant, or where forest.base_link sets them (evaluated by the
    library at predict time with numpy's log), the exported treecomp_base (treecomp.h), which
    holds them evaluated with libm's log / exp and which the loader overwrites with this host's
    numpy's value before the first prediction."""
    if forest.base_link == "identity":
        return f"static const tc_acc tc_base[TC_NO] = {{{base}}};"
    return f"TC_EXPORT tc_acc {BASE_SYMBOL}[TC_NO] = {{{base}}};\n#define tc_base {BASE_SYMBOL}"


def _main_unit(forest: Forest, units: list[list[int]], block: int, ir: bytes | None = None) -> str:
    x_t, acc_t = _types(forest)
    head = head_of(forest)
    meta = head.to_json(backend=NAME, treecomp_version=__version__)
    n_classes = sum(head.n_classes)
    base = ", ".join(c_literal(float(b), acc_t) for b in folded_base(forest))
    protos = "".join(f"void tc_unit_{u}(const tc_x *restrict X, int64_t n, tc_acc *restrict acc);\n"
                     for u in range(len(units)))
    calls = "".join(f"    tc_unit_{u}(xb, nb, ab);\n" for u in range(len(units)))
    average = f"    for (int64_t k = 0; k < nb * TC_NO; ++k) ab[k] /= (tc_acc){forest.n_trees};\n" \
        if forest.average else ""
    xbits = 32 if x_t == "float" else 64
    accbits = 32 if acc_t == "float" else 64
    return f"""{_prelude(forest)}
#define TC_EXPORT __attribute__((visibility("default")))
#define TC_BLOCK {block}
{protos}
{_base_decl(forest, base)}
{"" if ir is None else blob_code("tc_ir", IR_FILE, ir, incbin()) + ir_code(len(ir), "tc_ir")}
TC_EXPORT int32_t treecomp_abi_version(void) {{ return TREECOMP_ABI_VERSION; }}
TC_EXPORT const char *treecomp_version(void) {{ return {c_string(__version__)}; }}
TC_EXPORT const char *treecomp_digest(void) {{ return {c_string(forest.digest())}; }}
TC_EXPORT const char *treecomp_backend(void) {{ return "{NAME}"; }}
TC_EXPORT int32_t treecomp_n_features(void) {{ return TC_NF; }}
TC_EXPORT int32_t treecomp_n_outputs(void) {{ return TC_NO; }}
TC_EXPORT int32_t treecomp_out_dtype(void) {{ return {accbits}; }}
TC_EXPORT int32_t treecomp_n_classes(void) {{ return {n_classes}; }}
TC_EXPORT const char *treecomp_meta_json(void) {{ return {c_string(meta)}; }}

TC_EXPORT int32_t treecomp_predict(const void *X, int32_t x_dtype, int64_t n_rows, void *out, uint32_t flags) {{
  if ((x_dtype != 32 && x_dtype != 64) || n_rows < 0 || (n_rows > 0 && (!X || !out)) || (flags & ~{outputs.accepted_flags(forest)}u))
    return TREECOMP_EINVAL;
  tc_x *buf = 0;
  if (x_dtype != {xbits}) {{
    buf = (tc_x *)malloc(sizeof(tc_x) * TC_BLOCK * TC_NF);
    if (!buf) return TREECOMP_EINVAL;
  }}
  for (int64_t r0 = 0; r0 < n_rows; r0 += TC_BLOCK) {{
    int64_t nb = n_rows - r0 < TC_BLOCK ? n_rows - r0 : TC_BLOCK;
    const tc_x *xb;
    if (buf) {{  /* cast to the library's comparison precision (round to nearest, like numpy) */
      if (x_dtype == 32) {{ const float *s = (const float *)X + r0 * TC_NF;
        for (int64_t k = 0; k < nb * TC_NF; ++k) buf[k] = (tc_x)s[k]; }}
      else {{ const double *s = (const double *)X + r0 * TC_NF;
        for (int64_t k = 0; k < nb * TC_NF; ++k) buf[k] = (tc_x)s[k]; }}
      xb = buf;
    }} else xb = (const tc_x *)X + r0 * TC_NF;
    tc_acc *ab = (tc_acc *)out + r0 * TC_NO;
    for (int64_t r = 0; r < nb; ++r)
      for (int k = 0; k < TC_NO; ++k) ab[r * TC_NO + k] = tc_base[k];
{calls}{average}    if (flags & TREECOMP_TRANSFORM) {{
      for (int64_t r = 0; r < nb; ++r) {{
        tc_acc *a = ab + r * TC_NO; (void)a;
        {transform_code(forest)}
      }}
    }}
  }}
  free(buf);
  return TREECOMP_OK;
}}
"""


def emit(forest: Forest, opts: dict[str, Any] | None = None, ir: bytes | None = None) -> dict[str, str]:
    """The C sources of `forest`: {file name: text}; pure (no I/O). With `ir` (the forest's IR
    file), the library carries it (treecomp_ir; on ELF the build writes it as IR_FILE)."""
    opts = opts or options()
    units = _units(forest, int(opts["nodes_per_unit"]))
    gmax = None if opts["goto_max_nodes"] is None else int(opts["goto_max_nodes"])
    sources = {"model.c": _main_unit(forest, units, int(opts["block_rows"]), ir)}
    prelude = _prelude(forest, int(opts["interleave"]))
    _, acc_t = _types(forest)
    for u, trees in enumerate(units):
        out = [prelude, "\n"]
        body: list[str] = []
        kernels, walkers, catwalkers, symmetric = set(), set(), set(), set()
        table: list[str] = []   # the unit's steps, in model order
        for kind, what in steps(forest, trees):
            if kind == "const":
                idx, vals = const_run(forest, what)
                s = what[0]
                body.append(f"/* constant trees {what[0]}..{what[-1]} */\n"
                            f"static const int32_t K{s}[{len(idx) + 1}] = "
                            f"{{{len(idx)}, {', '.join(str(int(k)) for k in idx)}}};\n"
                            f"static const tc_acc V{s}[{len(vals)}] = "
                            f"{{{', '.join(c_literal(float(v), acc_t) for v in vals)}}};\n\n")
                table.append(f"{{tc_const, K{s}, V{s}, 0}}")
                continue
            i, t = what, forest.trees[what]
            o = int(forest.tree_output[i])
            levels = symmetric_levels(t, forest, int(opts["heap_max_depth"])) if opts["symmetric"] else None
            depth = 0 if levels is not None else heap_depth(t, int(opts["heap_max_depth"]))
            if levels is not None:
                d, w, m, c = emit_symmetric_tree(i, t, forest, levels, body)
                symmetric.add((d, w, m, c))
                table.append(f"{{tc_obl_{d}_{w}_{m}_{c}, T{i}, L{i}, {o}}}")
            elif depth:
                d, w, m = emit_heap_tree(i, t, forest, depth, body)
                kernels.add((d, w, m))
                table.append(f"{{tc_heap_{d}_{w}_{m}, T{i}, L{i}, {o}}}")
            elif not t.has_categorical and (gmax is None or t.n_nodes > gmax):
                w, m = emit_table_tree(i, t, forest, body)
                walkers.add((w, m))
                table.append(f"{{tc_walk_{w}_{m}, &T{i}, L{i}, {o}}}")
            elif t.n_nodes > (CAT_GOTO_MAX_NODES if gmax is None else gmax):
                w = emit_cat_table_tree(i, t, forest, body)
                catwalkers.add(w)
                table.append(f"{{tc_catwalk_{w}, &T{i}, L{i}, {o}}}")
            else:
                emit_tree(i, t, forest, body)
                table.append(f"{{tree_{i}, 0, 0, 0}}")
        out.extend(f"TC_HEAP_KERNEL({d}, {w}, {m})\n" for d, w, m in sorted(kernels))
        out.extend(f"TC_WALK_KERNEL({w}, {m})\n" for w, m in sorted(walkers))
        out.extend(f"TC_OBL_KERNEL({d}, {w}, {m}, {c})\n" for d, w, m, c in sorted(symmetric))
        out.extend(f"TC_CATWALK_KERNEL({w})\n" for w in sorted(catwalkers))
        out.append("\n")
        out.extend(body)
        out.append(f"void tc_unit_{u}(const tc_x *restrict X, int64_t n, tc_acc *restrict acc) {{\n")
        if table:
            out.append(f"  static const tc_step steps[{len(table)}] = {{\n    "
                       + ",\n    ".join(table) + "};\n"
                       f"  for (int s = 0; s < {len(table)}; ++s)\n"
                       "    steps[s].f(steps[s].T, steps[s].L, X, n, acc + steps[s].o);\n")
        else:
            out.append("  (void)X; (void)n; (void)acc;\n")
        out.append("}\n")
        sources[f"unit{u}.c"] = "".join(out)
    return sources


@functools.lru_cache(maxsize=1)
def host_cpu() -> str:
    """This CPU's model and feature flags (what -march=native compiles for)."""
    try:
        with open("/proc/cpuinfo") as f:
            lines = [ln for ln in f.read().split("\n\n", 1)[0].splitlines()
                     if ln.split(":", 1)[0].strip() in ("vendor_id", "model name", "flags", "Features",
                                                        "CPU implementer", "CPU part")]
        if lines:
            return "\n".join(lines)
    except OSError:
        pass
    return f"{platform.machine()} {platform.processor()}"


def cflags(opts: dict[str, Any], cc: toolchain.Compiler | None = None) -> tuple[str, ...]:
    flags = [opts["opt"], *[f for f in toolchain.DEFAULT_CFLAGS if not f.startswith("-O")]]
    if cc is not None and "clang" not in cc.version.lower():
        # gcc 12.2's -O3 loop vectoriser returned wrong margins for the heap kernel's one-row
        # path (caught by test_random_forests_bit_exact[sigmoid-acc32]); turning it off costs
        # nothing measurable here (4.95 vs 5.0 us/row on the 500-tree bench forest).
        flags.append("-fno-tree-loop-vectorize")
    if opts["native"]:
        flags += toolchain.NATIVE_CFLAGS
    toolchain.check_flags(opts["cflags"], "the c backend's cflags option")
    return tuple(flags) + tuple(opts["cflags"])


def build(forest: Forest, progress: Callable[[str], None] | None = None, **overrides: Any):
    """Compile `forest` (or take it from the cache) and load it: returns a native.SharedLibrary."""
    from ..native import SharedLibrary

    opts = options(**overrides)
    cc = toolchain.find_compiler()
    flags = cflags(opts, cc)
    # -march=native code is this CPU's: a cache shared by other machines (a network home
    # directory) must not hand it to a CPU without those instructions
    host = host_cpu() if opts["native"] else ""
    key = toolchain.cache_key(NAME, forest.digest(), sorted(opts.items()), flags, cc.key, host)

    def write(path):
        if progress:
            progress(f"generating C for {forest.n_trees} trees")
        # carried, so a loaded .so offers apply / contributions
        ir = forest.to_bytes() if opts["ir"] else None
        sources = emit(forest, opts, ir=ir)
        if progress:
            progress(f"compiling {len(sources)} translation units")
        toolchain.build_shared_library(sources, path, flags, jobs=opts["jobs"], compiler=cc,
                                       progress=progress, files={IR_FILE: ir} if ir else None,
                                       seal=True)

    return SharedLibrary(toolchain.cached(key, ".so", write))
