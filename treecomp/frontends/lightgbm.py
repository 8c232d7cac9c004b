"""LightGBM frontend: Booster / LGBMModel objects and LightGBM text model files -> Forest.

Everything goes through LightGBM's text model format (`booster.model_to_string()` for live
objects), parsed here without importing lightgbm, so `parse("model.txt")` works where LightGBM
is not installed.

Prediction semantics reproduced (LightGBM 4.7, `Tree::GetLeaf` / `NumericalDecision` /
`CategoricalDecision` in include/LightGBM/tree.h and the C API row readers; every point is pinned
by tests/test_frontend_lightgbm.py against the installed library):

- Input (Forest.input_rule "lightgbm"; the sklearn wrappers "lightgbm_sklearn"): float32 and
  float64 arrays are read as they are, any other array is cast to float32 first
  (basic._np2d_to_np1d: an int64 beyond 2**24 rounds); DataFrames of int, float and bool columns
  only; a frame's category columns are re-coded by the model's ``pandas_categorical``
  (treecomp.categories).
- Rows are float64. Before any tree sees a row, the C API drops every value with
  |x| <= kZeroThreshold (1e-35f, i.e. 1.0000000180025095e-35 as a double) as a "sparse zero", so
  the trees see exactly 0.0 for it. The IR compares the raw value, so a numeric threshold t in
  [-kZ, kZ) is moved to kZ (t >= 0) or to the largest double below -kZ (t < 0): both send every
  value of the band the way 0.0 goes and change nothing else.
- Numeric split: `x <= threshold` goes left. decision_type bits: 1 categorical, 2 default_left,
  (>> 2) & 3 the missing type:
    None (0): NaN is replaced by 0.0, so NaN goes where 0.0 goes: default_left = (0.0 <= t).
    Zero (1): NaN and |x| <= kZ go the default way. The IR has no "zero goes default" rule:
              a node whose zero band lies on the default side becomes one shifted threshold
              (`_zero_missing`); any other node becomes three numeric nodes with its two
              subtrees copied (`_expand_tree`: exact, the tree grows; a tree that would grow
              past 32x is refused with UnsupportedModelError).
    NaN (2):  NaN goes the default way.
- Categorical split: c = (int)x (truncation toward zero; on x86 NaN, +/-inf and |x| >= 2**31
  give INT_MIN); c < 0 goes right, else left iff bit c of the node's bitset is set (bits
  beyond the bitset: right). So NaN and negatives go right, whatever the missing type.
  IR: cat_bits padded to the tree's widest bitset, cat_other_left=False, default_left=False,
  and category_rule="trunc" (x in (-1, 0) is category 0, as (int)-0.5 == 0).
- Leaves are ~index in left_child/right_child. LightGBM numbers a new internal node after its
  parent, so internal nodes 0..n-2 followed by the leaves already put children after parents
  and are kept; a file that breaks that order is renumbered breadth first, one numpy step per
  level (no recursion anywhere: trees can be thousands of levels deep). The per-node arithmetic
  runs vectorised over the whole model, so a 1000-tree model parses in a fraction of a second.
- Reading: where treecomp.numparse is built, its C reader finds every tree's lines in one pass
  and parses each field of all trees into one array (_SpanTrees); anything it does not read
  exactly as the Python reader (_KvTrees: a dict of lines per tree) does, errors included,
  makes it give up (_NotNative) and the Python reader reads the file: the same Forest, the
  same errors. NATIVE = False forces the Python reader.
- Raw score = sum of the trees in float64 in tree order, starting at 0 (boost_from_average is
  already folded into the first trees). Tree i adds to class i % num_tree_per_iteration.
  Random-forest mode (`average_output`): GBDT::Predict divides each output by the number of
  iterations before the transform; PredictRaw (`raw_score=True`), PredictContrib
  (`pred_contrib=True`) and pred_leaf do not: the IR's raw margins are the undivided sums and
  Forest.output_divisor = the number of iterations (binary, multiclass, regression alike).
- Linear trees (linear_tree=True, a tree's is_linear=1; Tree::Predict): the tree adds
  leaf_const[leaf] + leaf_coeff[i] * x[leaf_features[i]] in order in float64, x as the trees see
  it (|x| <= kZ is 0.0), product rounded before the sum (the released wheels use no fused
  multiply-add: tested), or the plain leaf_value where one of those x is NaN; a single-leaf
  tree with is_linear=1 evaluates its leaf's model too (LightGBM writes single-leaf trees as
  is_linear=0). leaf_const and leaf_coeff are read with std::stod (leaf_value with
  fast_double_parser): both correctly rounded from %.17g, so exact. IR: Tree.leaf_const /
  linear_ptr / linear_feature / linear_coeff on the IR's leaf nodes; predicted by
  treecomp.linear (artifacts: a .tc with a linear section, a .so by backends/linear_so.py).
  LightGBM's sparse-row path (> 100k features, rows with < 1% non-zeros) skips absent
  features instead of adding coeff * 0.0: it differs only in the sign of a zero sum.
- Objectives: regression/regression_l1/huber/fair/quantile/mape/lambdarank/rank_xendcg/custom
  -> identity; poisson/gamma/tweedie -> exp; binary and cross_entropy -> sigmoid (binary
  `sigmoid:2` -> "sigmoid2", other scales refused); multiclass -> "softmax_seq" (Common::Softmax:
  exp of x - max summed left to right); every exp is libm's (exp_lib "libm"); multiclassova ->
  per-class sigmoid. `reg_sqrt` ("... sqrt") and cross_entropy_lambda are refused.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
from pathlib import Path
from typing import Any

import numpy as np

from .. import numparse
from ..errors import InvalidModelError, NotFittedError, UnsupportedModelError
from ..ir import Forest, Tree, TreeBuildError, build_trees, checked_category_values, leaf_tree

#: LightGBM's kZeroThreshold: `const double kZeroThreshold = 1e-35f;` (a float literal).
K_ZERO = float(np.float32(1e-35))
#: the largest double below -kZeroThreshold: `x <= _BELOW_NEG_KZERO` iff `x < -kZ`
_BELOW_NEG_KZERO = float(np.nextafter(-K_ZERO, -np.inf))

_MISSING_NONE, _MISSING_ZERO, _MISSING_NAN = 0, 1, 2

_IDENTITY_OBJECTIVES = {
    "regression", "regression_l2", "mean_squared_error", "mse", "l2_root",
    "root_mean_squared_error", "rmse", "regression_l1", "mean_absolute_error", "mae",
    "quantile", "huber", "fair", "mape", "mean_absolute_percentage_error",
    "lambdarank", "rank_xendcg", "xendcg", "xe_ndcg", "xe_ndcg_mart", "xendcg_mart",
    "none", "null", "custom", "na",
}
_EXP_OBJECTIVES = {"poisson", "gamma", "tweedie"}
_SUPPORTED_OBJECTIVES = ("regression, regression_l1, huber, fair, quantile, mape, lambdarank, "
                         "rank_xendcg, poisson, gamma, tweedie, binary (sigmoid:1 or 2), "
                         "cross_entropy, multiclass, multiclassova (sigmoid:1 or 2), custom")
_KNOWN_VERSIONS = ("v2", "v3", "v4")

#: whether to read tree lines with treecomp.numparse where it is built (False: the Python reader
#: below; both give the same Forest and the same errors)
NATIVE = True


# -- text format ------------------------------------------------------------------------------
#: LightGBM's Tree(const char*) reads at most this many key=value lines per tree
_MAX_TREE_LINES = 22
#: tree lines no prediction reads (training statistics): _tree_block keeps them empty
_UNREAD = frozenset(("split_gain", "leaf_weight", "internal_value", "internal_weight"))

# Numbers as LightGBM 4.x reads them (include/LightGBM/utils/common.h): integers with Atoi
# (spaces, sign, ASCII digits; it stops at anything else), doubles with AtofPrecise
# (fast_double_parser, else strtod; "inf" / "nan" included). A token is accepted only when
# those parsers read it entirely: Python's int() / float() also take whitespace (tabs
# included), '_' separators and non-ASCII digits, which LightGBM reads differently (a tab in
# "0 1\t 1" makes Atoi stop and read 0 for every later value).
_INT_TOKEN = r"[+-]?[0-9]+"
_FLOAT_TOKEN = (r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?"  # unambiguous
                r"|[+-]?(?:[iI][nN][fF](?:[iI][nN][iI][tT][yY])?|[nN][aA][nN])")
#: an array line: tokens separated by single spaces, as LightGBM writes them (ArrayToString)
_INT_ARRAY = re.compile(rf"{_INT_TOKEN}(?: {_INT_TOKEN})*")
_FLOAT_ARRAY = re.compile(rf"(?:{_FLOAT_TOKEN})(?: (?:{_FLOAT_TOKEN}))*")
#: what np.fromstring is not left to read in _bulk: integers of 19+ digits (int64 overflow),
#: inf / nan spelt out (read by float() as the regex above allows them)
_LONG_INT = re.compile(r"[0-9]{19}")
_NAMED_FLOAT = re.compile(r"[iInN]")
#: a single integer field (num_leaves, num_cat, header ints): Atoi skips spaces around it
_INT_FIELD = re.compile(rf" *({_INT_TOKEN}) *")


def _atoi(v: str) -> int | None:
    """The integer LightGBM's Atoi reads from the whole of `v`, or None."""
    m = _INT_FIELD.fullmatch(v)
    if m is None or len(m.group(1)) > 20:  # (far beyond int64; Python's int() caps digits)
        return None
    return int(m.group(1))


def _line_end(data: bytes, pos: int) -> int:
    """Where the line from `pos` ends: the first '\r' or '\n' (two C searches: a regex search
    costs several times more a line, and a model has 20 lines a tree)."""
    n = data.find(b"\n", pos)
    if n < 0:
        n = len(data)
    r = data.find(b"\r", pos, n)
    return n if r < 0 else r


def _skip_newline(data: bytes, pos: int) -> int:
    # Common::SkipNewLine: one '\r', then one '\n'
    if data[pos:pos + 1] == b"\r":
        pos += 1
    if data[pos:pos + 1] == b"\n":
        pos += 1
    return pos


def _tree_block(data: bytes, pos: int, limit: int, where: str) -> tuple[dict[str, str], int]:
    """One tree as LightGBM's Tree(const char*) reads it: from `pos` (the line after
    "Tree=..."), at most 22 key=value lines up to the first empty line. Returns the key/values
    and the offset of that empty line, which must come before `limit`: LightGBM would read on
    into the next tree or past the end of its buffer."""
    kv: dict[str, str] = {}
    for _ in range(_MAX_TREE_LINES):
        if pos >= limit:
            raise InvalidModelError(f"truncated LightGBM text model: {where} does not end with an "
                                    "empty line before the next tree or the end of the file")
        if data[pos] in b"\r\n":
            break
        end = _line_end(data, pos)
        line = data[pos:end].decode("utf-8", "replace")
        key, sep, val = line.partition("=")
        if not sep:
            raise InvalidModelError(f"malformed line in LightGBM {where}: {line[:80]!r}")
        kv[key] = "" if key in _UNREAD else val  # (a third of a tree's text: not kept)
        pos = _skip_newline(data, end)
    return kv, pos


#: the tree lines the frontend reads (the native reader records where each tree's values lie)
_KEYS = ("num_leaves", "num_cat", "cat_boundaries", "cat_threshold", "split_feature", "threshold",
         "decision_type", "left_child", "right_child", "leaf_value", "leaf_count", "internal_count",
         "is_linear", "leaf_const", "num_features", "leaf_features", "leaf_coeff")
_KEY_INDEX = {k: i for i, k in enumerate(_KEYS)}
_KEYS_BYTES = tuple(k.encode() for k in _KEYS)
#: tree_sizes as the fast path reads it (plain integers of at most 18 digits, single spaces)
_PLAIN_SIZES = re.compile(r"[0-9]{1,18}(?: [0-9]{1,18})*")


class _NotNative(Exception):
    """The native reader cannot decide (an error to word, a spelling it does not read): the
    Python reader reads the file instead, with the same results and errors."""


def _split_model_text(box: list, native: bool) -> tuple[dict[str, str], Any, str]:
    """(header key/values, the trees (_SpanTrees or _KvTrees), the text after the trees) of the
    model text ``box[0]`` (bytes; the box lets the trees' reader drop it early), read the
    way GBDT::LoadModelFromString does (LightGBM 4.7, src/boosting/gbdt_model_text.cpp):
    the header is every line before the first "Tree=" line; with a `tree_sizes` line the
    trees are found at those byte offsets (exactly as many trees as sizes; trees beyond them
    are ignored, as LightGBM does), without one they are the consecutive "Tree=" blocks
    separated by empty lines (no "end of trees" line needed). What LightGBM would read out of
    bounds (offsets past the end, a tree not where its offset says, a last tree without its
    closing empty line, NUL bytes on which LightGBM's line reader stops) is refused.
    native: trees found by treecomp.numparse (raises _NotNative where it cannot decide)."""
    data = box[0]
    if b"\0" in data:
        raise InvalidModelError("not a LightGBM text model (it holds NUL bytes)")
    first = data[:_line_end(data, 0)].decode("utf-8").strip()
    if first != "tree":
        raise InvalidModelError("not a LightGBM text model (it must start with a 'tree' line)")
    header: dict[str, str] = {}
    pos = _skip_newline(data, _line_end(data, 0))
    tree_start = len(data)
    while pos < len(data):
        end = _line_end(data, pos)
        if end > pos:
            line = data[pos:end].decode("utf-8")
            if line.startswith("Tree="):
                tree_start = pos
                break
            parts = [s for s in line.split("=") if s]
            if len(parts) > 2 and parts[0] not in ("feature_names", "monotone_constraints"):
                raise InvalidModelError(f"malformed LightGBM model header line {line[:80]!r}")
            if parts:
                header[parts[0]] = line[len(parts[0]) + 1:] if len(parts) > 1 else ""
        pos = _skip_newline(data, end)

    bounds = None
    if "tree_sizes" in header:
        line = header["tree_sizes"]
        if _PLAIN_SIZES.fullmatch(line):  # (what the list below reads, in one numpy call)
            sizes = np.fromstring(line, dtype=np.int64, sep=" ").tolist()
        else:
            sizes = [_atoi(s) for s in line.split(" ") if s]
        if any(v is None for v in sizes):
            raise InvalidModelError("LightGBM model header: malformed tree_sizes")
        if any(s < 0 for s in sizes):
            raise InvalidModelError("LightGBM model header: negative tree_sizes")
        sizes = [int(v) for v in sizes]
        bounds = np.concatenate([[0], np.cumsum(np.asarray(sizes, np.float64))]) + tree_start
        if sizes and bounds[-1] > len(data):
            n_in = sum(1 for b in bounds[1:] if b <= len(data))
            raise InvalidModelError(
                f"LightGBM model: tree_sizes lists {len(sizes)} trees ({int(bounds[-1] - tree_start)} "
                f"bytes) but the file holds only {len(data) - tree_start} bytes of trees (about "
                f"{n_in} of them): truncated or edited file (LightGBM reads past its buffer here)")
    if native:
        got = numparse.lgbm_blocks(data, tree_start, None if bounds is None else
                                   bounds.astype(np.int64), _KEYS_BYTES)
        if got is None:
            raise _NotNative("the trees' lines")
        spans, names, after = got
        return header, _SpanTrees(box, spans, names), data[after:].decode("utf-8", "replace")

    trees: list[dict[str, str]] = []
    if bounds is not None:
        for i in range(len(bounds) - 1):
            b, nxt = int(bounds[i]), int(bounds[i + 1])
            end = _line_end(data, b)
            line = data[b:end].decode("utf-8", "replace")
            if not line.startswith("Tree="):
                raise InvalidModelError(
                    f"LightGBM model: tree_sizes puts tree {i} at a line that is not a 'Tree=' "
                    f"line ({line[:40]!r}); LightGBM refuses it ('Model format error, expect a tree "
                    "here')")
            kv, _ = _tree_block(data, _skip_newline(data, end), nxt, f"tree {line[5:].strip()}")
            kv["Tree"] = line[5:].strip()
            trees.append(kv)
        after = int(bounds[-1])
    else:
        pos = tree_start
        while pos < len(data):
            end = _line_end(data, pos)
            if end > pos:
                line = data[pos:end].decode("utf-8", "replace")
                if not line.startswith("Tree="):
                    break
                kv, pos = _tree_block(data, _skip_newline(data, end), len(data),
                                      f"tree {line[5:].strip()}")
                kv["Tree"] = line[5:].strip()
                trees.append(kv)
            pos = _skip_newline(data, pos)
        after = pos
    return header, _KvTrees(trees), data[after:].decode("utf-8", "replace")


class _KvTrees:
    """The Python reader's trees: one dict of key -> value text per tree (_tree_block)."""

    def __init__(self, kvs: list[dict[str, str]]) -> None:
        self.kvs = kvs

    def __len__(self) -> int:
        return len(self.kvs)

    def take(self, n: int) -> "_KvTrees":
        return _KvTrees(self.kvs[:n])

    def name(self, i: int) -> str:
        return self.kvs[i].get("Tree", "?")

    def kv(self, i: int) -> dict[str, str]:
        return self.kvs[i]

    def num_leaves(self) -> np.ndarray:
        v = [_int_field(kv, "num_leaves", self.name(i)) for i, kv in enumerate(self.kvs)]
        for i, n in enumerate(v):
            if not -2**63 <= n < 2**63:  # (_atoi reads up to 20 characters)
                raise InvalidModelError(f"LightGBM tree {self.name(i)}: num_leaves={n} is out of range")
        return np.array(v, np.int64)

    def check_num_cat(self) -> None:
        for i, kv in enumerate(self.kvs):
            # Tree::Tree(const char*) (LightGBM 4.x): num_cat is required, and num_cat > 0 needs
            # cat_boundaries and cat_threshold even without categorical splits (a Fatal, thrown
            # inside OpenMP: the process aborts)
            nm = self.name(i)
            num_cat = _int_field(kv, "num_cat", nm)
            if num_cat < 0:
                raise InvalidModelError(f"LightGBM tree {nm}: num_cat={num_cat}")
            for key in ("cat_boundaries", "cat_threshold"):
                if num_cat > 0 and key not in kv:
                    raise InvalidModelError(f"LightGBM tree {nm}: num_cat={num_cat} but no {key} "
                                            "line (LightGBM aborts on it)")

    def _sel(self, sel: np.ndarray | None) -> tuple[list, list]:
        idx = range(len(self.kvs)) if sel is None else sel.tolist()
        return [self.kvs[i] for i in idx], [self.name(i) for i in idx]

    def numbers(self, key: str, sel: np.ndarray | None, counts: np.ndarray, dtype: Any) -> np.ndarray:
        """The `key` arrays of the trees `sel` (None: all), concatenated (_bulk)."""
        return _bulk(*self._sel(sel), key, counts, dtype)

    def counts(self, key: str, sel: np.ndarray | None, counts: np.ndarray) -> np.ndarray:
        return _bulk_counts(*self._sel(sel), key, counts)

    def counted(self, n_leaves: np.ndarray) -> bool:
        return all("leaf_count" in kv and ("internal_count" in kv or n < 2)
                   for kv, n in zip(self.kvs, n_leaves.tolist()))

    def linear(self) -> np.ndarray:
        return np.array([bool(kv.get("is_linear", "").strip()) and _atoi(kv["is_linear"]) != 0
                         for kv in self.kvs], bool)

    def release(self, keep: np.ndarray) -> None:
        pass


class _SpanTrees:
    """The native reader's trees: where each tree's values lie in the model's bytes (box[0]),
    read by treecomp.numparse; every method gives what _KvTrees' gives or raises _NotNative.
    Integer arrays come as int32 (wider values: _NotNative, and the Python reader's checks
    refuse them). :meth:`release` drops the bytes once every array is read."""

    def __init__(self, box: list, spans: np.ndarray, names: np.ndarray) -> None:
        self.box, self.spans, self.names = box, spans, names
        self.kept: dict[int, dict[str, str]] = {}
        self.name_text: list[str] | None = None

    def __len__(self) -> int:
        return len(self.spans)

    def take(self, n: int) -> "_SpanTrees":
        return _SpanTrees(self.box, self.spans[:n], self.names[:n])

    def _text(self, a: int, b: int) -> str:
        return self.box[0][a:b].decode("utf-8", "replace")

    def name(self, i: int) -> str:
        if self.name_text is not None:
            return self.name_text[i]
        return self._text(*self.names[i].tolist()).strip()

    def kv(self, i: int) -> dict[str, str]:
        if i in self.kept:
            return self.kept[i]
        return {k: self._text(a, b) for k, (a, b) in zip(_KEYS, self.spans[i].tolist()) if a >= 0}

    def _ints(self, key: str) -> tuple[np.ndarray, np.ndarray]:
        return numparse.lgbm_ints(self.box[0], self.spans[:, _KEY_INDEX[key]])

    def _present(self, key: str) -> np.ndarray:
        return self.spans[:, _KEY_INDEX[key], 0] >= 0

    def num_leaves(self) -> np.ndarray:
        v, state = self._ints("num_leaves")
        if (state != 1).any():
            raise _NotNative("num_leaves")
        return v

    def check_num_cat(self) -> None:
        v, state = self._ints("num_cat")
        if (state != 1).any() or (v < 0).any() or ((v > 0) & ~(
                self._present("cat_boundaries") & self._present("cat_threshold"))).any():
            raise _NotNative("num_cat")

    def numbers(self, key: str, sel: np.ndarray | None, counts: np.ndarray, dtype: Any) -> np.ndarray:
        col = self.spans[:, _KEY_INDEX[key]]
        dt = np.int32 if np.dtype(dtype).kind in "iu" else np.float64
        out = numparse.lgbm_numbers(self.box[0], col if sel is None else col[sel], counts, dt)
        if out is None:
            raise _NotNative(key)
        return out

    def counts(self, key: str, sel: np.ndarray | None, counts: np.ndarray) -> np.ndarray:
        # the float parse gives what _bulk_counts gives wherever it reads the line: integers
        # of at most 18 digits convert to the same float64 either way
        return self.numbers(key, sel, counts, np.float64)

    def counted(self, n_leaves: np.ndarray) -> bool:
        return bool(np.all(self._present("leaf_count")
                           & (self._present("internal_count") | (n_leaves < 2))))

    def linear(self) -> np.ndarray:
        v, state = self._ints("is_linear")
        out = (state == 1) & (v != 0)
        for i in np.flatnonzero(state == 2).tolist():  # blank, or not an integer (_linear words it)
            s = self._text(*self.spans[i, _KEY_INDEX["is_linear"]].tolist())
            out[i] = bool(s.strip()) and _atoi(s) != 0
        return out

    def release(self, keep: np.ndarray) -> None:
        """Drop the model's bytes, keeping the lines of the trees `keep` marks and every name."""
        data, nm = self.box[0], self.names.tolist()
        self.name_text = [data[a:b].decode("utf-8", "replace").strip() for a, b in nm]
        self.kept = {i: self.kv(i) for i in np.flatnonzero(keep).tolist()}
        self.box.clear()


def _check_parameters(tail: str) -> None:
    """The `parameters:` section after the trees is not part of the predictions, but
    GBDT::GetLoadedParam (LightGBM 4.x; the Python package calls it when it loads a model)
    takes Split(line, ":")[1] of every line in it: a line without a ':'-separated value makes
    it read past the vector (a segfault, or garbage). Such a line is clearly malformed."""
    inside = False
    for line in re.split(r"[\r\n]+", tail):
        if not line:
            continue
        if line == "parameters:":
            inside = True
        elif line == "end of parameters":
            return
        elif inside and len([p for p in line.split(":") if p]) < 2:
            raise InvalidModelError(f"LightGBM model: malformed line in the parameters section "
                                    f"({line[:60]!r}; LightGBM crashes on it)")


def _header_int(header: dict[str, str], key: str, default: int | None = None) -> int:
    if key not in header:
        if default is not None:
            return default
        raise InvalidModelError(f"LightGBM model header has no {key!r} line")
    v = _atoi(header[key])
    if v is None:
        raise InvalidModelError(f"LightGBM model header: {key}={header[key][:40]!r} is not an integer")
    return v


# -- objectives -------------------------------------------------------------------------------
def _objective(header: dict[str, str]) -> tuple[str, str]:
    """(objective name, IR transform) from the header's `objective=` line."""
    if "objective" in header and not [t for t in header["objective"].split(" ") if t]:
        # ObjectiveFunction::CreateObjectiveFunction takes Split(str, ' ')[0]: with no token
        # at all LightGBM 4.x reads past the vector (a segfault). No objective line at all is
        # a custom objective.
        raise InvalidModelError("LightGBM model header: empty objective= line (LightGBM "
                                "crashes on it)")
    line = header.get("objective", "custom")
    # LightGBM splits the line on ' ' only: "binary\tsigmoid:1" is one unknown name to it
    tokens = [t for t in line.split(" ") if t]
    name, params = tokens[0], tokens[1:]
    if "sqrt" in params:
        raise UnsupportedModelError(
            f"LightGBM objective {line!r}: reg_sqrt=True (outputs sign(raw) * raw**2) is not "
            f"supported; supported objectives: {_SUPPORTED_OBJECTIVES}")
    if name in _IDENTITY_OBJECTIVES:
        return name, "identity"
    if name in _EXP_OBJECTIVES:
        return name, "exp"
    if name in ("cross_entropy", "xentropy"):
        return name, "sigmoid"
    if name in ("multiclass", "softmax"):
        # LightGBM's Common::Softmax sums exp() left to right (the IR's "softmax" sums pairwise)
        return name, "softmax_seq"
    if name in ("binary", "multiclassova", "multiclass_ova", "ova", "ovr"):
        # absent: LightGBM says "Sigmoid parameter -1 should be greater than zero"
        sig = _objective_param(params, "sigmoid", float, line, -1.0)
        if not sig > 0:
            raise InvalidModelError(f"LightGBM objective {line!r}: needs a positive sigmoid:<scale> "
                                    "(LightGBM refuses it too)")
        # ConvertOutput: 1.0 / (1.0 + exp(-sigmoid * raw)). For sigmoid 1 and 2 that is exactly
        # the IR's "sigmoid" / "sigmoid2" (-(2 * raw) == -2.0 * raw bit for bit); any other
        # scale would need a pre-scale the IR does not have.
        if sig == 1.0:
            return name, "sigmoid"
        if sig == 2.0:
            return name, "sigmoid2"
        raise UnsupportedModelError(
            f"LightGBM objective {line!r}: sigmoid scale {sig!r} is not supported "
            "(only sigmoid:1 and sigmoid:2 are)")
    if name in ("cross_entropy_lambda", "xentlambda"):
        raise UnsupportedModelError(
            f"LightGBM objective {name!r} (output log(1 + exp(raw))) is not supported; "
            f"supported objectives: {_SUPPORTED_OBJECTIVES}")
    raise UnsupportedModelError(f"unknown LightGBM objective {line!r}; supported objectives: "
                                f"{_SUPPORTED_OBJECTIVES}")


def _objective_param(params: list[str], key: str, conv: Any, line: str, default: Any) -> Any:
    """The last `key:value` of an objective line's parameters, converted (as LightGBM reads it)."""
    value = default
    for p in params:
        k, _, v = p.partition(":")
        if k == key:
            try:
                value = conv(v)
            except ValueError:
                raise InvalidModelError(f"LightGBM objective {line!r}: bad {key} value {v!r}") from None
    return value


def _objective_num_class(header: dict[str, str]) -> int | None:
    """The `num_class:K` of a multiclass / multiclassova objective line (None for others);
    LightGBM refuses those objectives without it ("Objective should contain num_class field")."""
    tokens = (header.get("objective", "").strip() or "custom").split()
    if tokens[0] not in ("multiclass", "softmax", "multiclassova", "multiclass_ova", "ova", "ovr"):
        return None
    k = _objective_param(tokens[1:], "num_class", int, " ".join(tokens), None)
    if k is None or k < 0:
        raise InvalidModelError(f"LightGBM objective {' '.join(tokens)!r} has no num_class:<K> "
                                "(LightGBM refuses it: 'Objective should contain num_class field')")
    return k


# -- trees ------------------------------------------------------------------------------------
def _zero_missing(thr: np.ndarray, dleft: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(thresholds, needs_expansion) for missing_type=Zero nodes (NaN, |x| <= kZ: default way).

    One shifted threshold is exact when the zero band lies on the default side:
      default left,  t >= kZ:        the band is already left of t          -> t
      default left,  -kZ <= t < kZ:  left iff x <= kZ                       -> kZ
      default right, t < -kZ:        the band is already right of t         -> t
      default right, -kZ <= t <= kZ: left iff x < -kZ                       -> prev(-kZ)
    Otherwise (default left with t < -kZ, default right with t > kZ) the node's left set is
    two intervals and it is expanded into three IR nodes (see `_expand_tree`).
    """
    out = thr.copy()
    expand = (dleft & (thr < -K_ZERO)) | (~dleft & (thr > K_ZERO))
    band = (thr >= -K_ZERO) & (thr <= K_ZERO)
    out[dleft & band & (thr < K_ZERO)] = K_ZERO
    out[~dleft & band] = _BELOW_NEG_KZERO
    return out, expand


#: a tree whose zero-band expansion would exceed this many times its LightGBM size is refused
_MAX_EXPANSION_FACTOR = 32
_MIN_EXPANSION_BUDGET = 4096


def _expand_tree(name: str, n_int: int, lu: np.ndarray, ru: np.ndarray, feat: np.ndarray,
                 t: np.ndarray, default_left: np.ndarray, expand: np.ndarray,
                 cat_row: np.ndarray, leaf_value: np.ndarray) -> dict[str, np.ndarray]:
    """Node arrays of a tree with missing_type=Zero nodes whose zero band opposes the default.

    Such a node (feature f, threshold t) becomes a chain of three numeric nodes with the
    node's left (L) and right (R) subtrees copied (exact, but the tree grows):
      default right, t > kZ:  f <= prev(-kZ) ? L : (f <= kZ ? R : (f <= t ? L : R)), NaN -> R
      default left, t < -kZ:  f <= t ? L : (f <= prev(-kZ) ? R : (f <= kZ ? L : R)), NaN -> L
    Built with an explicit stack; nodes are allocated after their parent, so every child
    index exceeds its parent's. The links must already be known to form a tree.
    """
    n = n_int + len(leaf_value)
    budget = max(_MAX_EXPANSION_FACTOR * n, _MIN_EXPANSION_BUDGET)
    left: list[int] = []
    right: list[int] = []
    feature: list[int] = []
    thresh: list[float] = []
    dl: list[bool] = []
    value: list[float] = []
    cidx: list[int] = []
    ids: list[int] = []  # LightGBM's split index, or leaf index at leaves (pred_leaf)

    def new(f: int, thr: float, d: bool, v: float = 0.0, c: int = -1, i: int = -1) -> int:
        left.append(-1); right.append(-1); feature.append(f); thresh.append(thr)  # noqa: E702
        dl.append(d); value.append(v); cidx.append(c); ids.append(i)  # noqa: E702
        if len(left) > budget:
            raise UnsupportedModelError(
                f"LightGBM tree {name}: missing_type=Zero (zero_as_missing=True) splits would "
                f"grow the tree beyond {budget} nodes ({_MAX_EXPANSION_FACTOR}x) when encoded "
                "exactly; the IR has no rule for 'zero goes the default way'")
        return len(left) - 1

    links = (left, right)
    lu_l, ru_l, feat_l = lu.tolist(), ru.tolist(), feat.tolist()
    t_l, dl_l, ex_l, cat_l = t.tolist(), default_left.tolist(), expand.tolist(), cat_row.tolist()
    lv_l = leaf_value.tolist()
    stack: list[tuple[int, int, int]] = [(0, -1, 0)]  # (old unified id, new parent, 0=left/1=right)
    while stack:
        old, parent, side = stack.pop()
        if old >= n_int:
            node = new(-1, 0.0, False, lv_l[old - n_int], i=old - n_int)
        elif not ex_l[old]:
            node = new(feat_l[old], t_l[old], dl_l[old], c=cat_l[old], i=old)
            stack.append((ru_l[old], node, 1))
            stack.append((lu_l[old], node, 0))
        else:
            f, thr, L, R = feat_l[old], t_l[old], lu_l[old], ru_l[old]
            if not dl_l[old]:   # default right, t > kZ
                a, b, c = (new(f, _BELOW_NEG_KZERO, False, i=old), new(f, K_ZERO, False, i=old),
                           new(f, thr, False, i=old))
            else:               # default left, t < -kZ
                a, b, c = (new(f, thr, True, i=old), new(f, _BELOW_NEG_KZERO, True, i=old),
                           new(f, K_ZERO, True, i=old))
            right[a], right[b] = b, c
            node = a
            stack += [(R, c, 1), (L, c, 0), (R, b, 0), (L, a, 0)]
        if parent >= 0:
            links[side][parent] = node
    return {"left": np.array(left, np.int32), "right": np.array(right, np.int32),
            "feature": np.array(feature, np.int32), "threshold": np.array(thresh),
            "default_left": np.array(dl, bool), "value": np.array(value),
            "cat_index": np.array(cidx, np.int32), "node_ids": np.array(ids, np.int32)}


def _bfs_order(name: str, n_int: int, lu: np.ndarray, ru: np.ndarray) -> np.ndarray:
    """Unified node ids in breadth-first order (children after parents), checking the links
    form one tree; one numpy step per level, no recursion (trees can be 1000s deep)."""
    n = n_int + len(lu) + 1
    order = []
    frontier = np.zeros(1, np.int64)
    seen = 0
    while frontier.size:
        seen += frontier.size
        if seen > n:  # a cycle
            raise InvalidModelError(f"LightGBM tree {name}: child links do not form a tree")
        order.append(frontier)
        inner = frontier[frontier < n_int]
        frontier = np.stack([lu[inner], ru[inner]], axis=1).ravel()
    out = np.concatenate(order)
    if out.size != n or np.unique(out).size != n:
        raise InvalidModelError(f"LightGBM tree {name}: child links do not form a tree")
    return out


def _bulk(kvs: list[dict[str, str]], names: list[str], key: str, counts: np.ndarray,
          dtype: Any) -> np.ndarray:
    """The `key` arrays of many trees, concatenated, parsed by one numpy call."""
    lines: list[str] = []
    for kv, name, n in zip(kvs, names, counts.tolist()):
        s = kv.get(key)
        if s is None:
            raise InvalidModelError(f"LightGBM tree {name} has no {key!r} line")
        if n == 0:
            continue  # LightGBM does not look at the line then (StringToArray*(str, 0))
        if not (_INT_ARRAY if np.dtype(dtype).kind in "iu" else _FLOAT_ARRAY).fullmatch(s):
            raise InvalidModelError(
                f"LightGBM tree {name}: {key!r} is not a list of plain numbers separated by "
                f"single spaces ({s[:60]!r}); LightGBM would read something else from it")
        k = s.count(" ") + 1  # (single spaces, checked above)
        if k != n:
            raise InvalidModelError(f"LightGBM tree {name}: {key!r} has {k} entries, expected {n}")
        lines.append(s)
    joined = " ".join(lines)
    int_like = np.dtype(dtype).kind in "iu"
    if joined and not (_LONG_INT.search(joined) if int_like else _NAMED_FLOAT.search(joined)):
        # every token matched the grammar above: plain decimal numbers, integers of at most
        # 18 digits (int64, no overflow); np.fromstring converts floats with CPython's own
        # correctly rounded conversion (float()'s), integers exactly: one C loop, no list
        vals = np.fromstring(joined, dtype=dtype, sep=" ")
        if len(vals) == int(counts.sum()):
            return vals
    try:
        # Python's float() (which numpy uses for str -> float64) is correctly rounded, like
        # LightGBM's own parser, and the file holds %.17g: the round trip is exact.
        return np.array(joined.split(" ") if joined else [], dtype=dtype)
    except (ValueError, OverflowError):
        raise InvalidModelError(f"LightGBM trees: {key!r} holds malformed numbers") from None


def _bulk_counts(kvs: list[dict[str, str]], names: list[str], key: str,
                 counts: np.ndarray) -> np.ndarray:
    """_bulk(..., np.float64) of a count line (LightGBM writes integers there): read as int64
    where every token is an integer of at most 18 digits (numpy's integer parse is several
    times faster than its float parse), then converted; both are correctly rounded
    conversions of the same integer, so the float64 values are the same (lines with a '-'
    take the float parse: "-0" is -0.0 there)."""
    ints = None
    if not any("-" in kv.get(key, "") for kv in kvs):
        try:
            ints = _bulk(kvs, names, key, counts, np.int64)
        except InvalidModelError:
            pass
    if ints is None or (ints.size and np.abs(ints).max() >= 10 ** 18):
        return _bulk(kvs, names, key, counts, np.float64)
    return ints.astype(np.float64)


def _int_field(kv: dict[str, str], key: str, name: str, default: int | None = None) -> int:
    if key not in kv:
        if default is not None:
            return default
        raise InvalidModelError(f"LightGBM tree {name} has no {key!r} line")
    v = _atoi(kv[key])
    if v is None:
        raise InvalidModelError(f"LightGBM tree {name}: {key}={kv[key][:40]!r} is not an integer")
    return v


def _cat_sets(kv: dict[str, str], name: str, is_cat: np.ndarray, thr: np.ndarray):
    """(cat_bits rows = the tree's category sets, padded; per internal node its row or -1)."""
    num_cat = _int_field(kv, "num_cat", name, 0)
    if num_cat < 1:
        raise InvalidModelError(f"LightGBM tree {name}: categorical split but num_cat={num_cat}")
    bounds = _bulk([kv], [name], "cat_boundaries", np.array([num_cat + 1]), np.int64)
    s = kv.get("cat_threshold")
    if s is None:
        raise InvalidModelError(f"LightGBM tree {name} has no 'cat_threshold' line")
    words = _bulk([kv], [name], "cat_threshold", np.array([len(s.split())]), np.int64)
    if (bounds[0] != 0 or np.any(np.diff(bounds) < 1) or bounds[-1] != words.size
            or np.any(words < 0) or np.any(words > 0xFFFFFFFF)):
        raise InvalidModelError(f"LightGBM tree {name}: inconsistent cat_boundaries/cat_threshold")
    cidx = thr[is_cat]
    if np.any(cidx != np.floor(cidx)) or np.any(cidx < 0) or np.any(cidx >= num_cat):
        raise InvalidModelError(f"LightGBM tree {name}: categorical threshold is not a "
                                f"category-set index in [0, {num_cat})")
    # padded with zero words to the widest set: categories past a set's own words are "not in
    # the set" for LightGBM (FindInBitset) too
    bits = np.zeros((num_cat, int(np.diff(bounds).max())), np.uint32)
    for c in range(num_cat):
        seg = words[bounds[c]:bounds[c + 1]]
        bits[c, :seg.size] = seg
    row = np.full(is_cat.size, -1, np.int64)
    row[is_cat] = cidx.astype(np.int64)
    return bits, row


def _plain_trees(plain: np.ndarray, n_int: np.ndarray, n_leaves: np.ndarray, tid: np.ndarray,
                 loc: np.ndarray, lu: np.ndarray, ru: np.ndarray, feat: np.ndarray,
                 thr: np.ndarray, default_left: np.ndarray, leaf_all: np.ndarray,
                 leaf_off: np.ndarray, icount: np.ndarray | None, lcount: np.ndarray | None,
                 split: np.ndarray) -> tuple[Tree, ...]:
    """The trees `plain` marks, as _convert_trees' loop builds each one whose node ids need no
    renumbering (internal node j at j, leaf j at n_int + j), all at once: forest-wide arrays
    (per internal node: tid, loc, lu, ru, feat, thr, default_left, icount; per leaf:
    leaf_all by leaf_off, lcount for the `split` trees) scattered into the trees' node slots."""
    P = np.flatnonzero(plain)
    k = n_int[P]
    sizes = 2 * k + 1
    offs = np.zeros(len(P) + 1, np.int64)
    np.cumsum(sizes, out=offs[1:])
    total = int(offs[-1])
    pos = np.cumsum(plain) - 1  # tree -> its index among the plain trees
    m = plain[tid]
    gi = offs[pos[tid[m]]] + loc[m]  # the internal nodes' slots
    leaf_tree_of = np.repeat(np.arange(len(n_leaves)), n_leaves)
    lm = plain[leaf_tree_of]
    lt = leaf_tree_of[lm]
    gl = offs[pos[lt]] + n_int[lt] + (np.flatnonzero(lm) - leaf_off[lt])  # the leaves' slots
    # (the trees' arrays in the IR's dtypes, handed to build_trees to keep: copy=False)
    left = np.full(total, -1, np.int32)
    right = np.full(total, -1, np.int32)
    feature = np.full(total, -1, np.int32)
    threshold = np.zeros(total)
    dleft = np.zeros(total, bool)
    value = np.zeros(total)
    node_ids = np.empty(total, np.int32)
    left[gi], right[gi], feature[gi] = lu[m], ru[m], feat[m]  # (checked: in range)
    threshold[gi], dleft[gi] = thr[m], default_left[m]
    value[gl] = leaf_all[lm]
    node_ids[gi] = loc[m]
    node_ids[gl] = gl - offs[pos[lt]] - n_int[lt]
    cover = None
    if icount is not None:
        cover = np.zeros(total)
        cover[gi] = icount[m]
        cover[gl] = lcount[plain[np.repeat(split, n_leaves[split])]]
    del gi, gl, m, lm, lt, leaf_tree_of
    return build_trees(sizes, left, right, feature, threshold, dleft, value, node_ids=node_ids,
                       cover=cover, copy=False)


def _convert_trees(src: Any, n_features: int) -> list[Tree]:
    """All trees at once: the per-node arithmetic runs vectorised over the whole model. `src`:
    the trees' lines (_KvTrees, or _SpanTrees, which may raise _NotNative until it is
    released here, once every array is read)."""
    T = len(src)
    n_leaves = src.num_leaves()
    src.check_num_cat()
    if np.any(n_leaves < 1):
        raise InvalidModelError(f"LightGBM tree {src.name(int(np.argmax(n_leaves < 1)))}: num_leaves < 1")
    n_int = n_leaves - 1
    leaf_all = src.numbers("leaf_value", None, n_leaves, np.float64)
    leaf_off = np.concatenate([[0], np.cumsum(n_leaves)])
    int_off = np.concatenate([[0], np.cumsum(n_int)])

    sp = np.flatnonzero(n_int > 0)
    ni_s = n_int[sp]
    feat = src.numbers("split_feature", sp, ni_s, np.int64)
    thr = src.numbers("threshold", sp, ni_s, np.float64)
    dtype = src.numbers("decision_type", sp, ni_s, np.int64)
    lc = src.numbers("left_child", sp, ni_s, np.int64)
    rc = src.numbers("right_child", sp, ni_s, np.int64)
    # node counts, LightGBM's own TreeSHAP cover (data_count); optional, for SHAP only
    counted = src.counted(n_leaves)
    # (single-leaf trees' counts are not read: LightGBM writes an empty leaf_count there, and a
    # constant tree needs no cover); counts LightGBM could not parse, and counts it reads but no
    # TreeSHAP can use (inf, nan, negative: LightGBM predicts with them), mean no cover, not no model
    lc_off = np.concatenate([[0], np.cumsum(np.where(n_int > 0, n_leaves, 0))])
    icount = lcount = None
    if counted:
        try:
            icount = src.counts("internal_count", sp, ni_s)
            lcount = src.counts("leaf_count", sp, n_leaves[sp])
        except InvalidModelError:
            counted = False
        else:
            counted = bool(np.all(icount >= 0) and np.all(lcount >= 0)
                           and np.isfinite(icount).all() and np.isfinite(lcount).all())
    linear = src.linear()

    # per internal node: its tree, its index within the tree, the tree's sizes
    tid = np.repeat(np.arange(T), n_int)
    loc = np.arange(tid.size) - int_off[tid]
    ni, nl = n_int[tid], n_leaves[tid]

    def fail(mask: np.ndarray, what: str) -> None:
        if mask.any():
            raise InvalidModelError(f"LightGBM tree {src.name(int(tid[np.argmax(mask)]))}: {what}")

    fail((lc >= ni) | (lc < -nl) | (rc >= ni) | (rc < -nl), "child index out of range")
    fail((feat < 0) | (feat >= n_features),
         f"split_feature out of range (max_feature_idx={n_features - 1})")
    fail((dtype < 0) | (dtype > 15) | (((dtype >> 2) & 3) == 3), "bad decision_type")
    # unified ids per tree: internal node i -> i, leaf j (stored as ~j) -> n_int + j
    lu = np.where(lc >= 0, lc, ni + ~lc)
    ru = np.where(rc >= 0, rc, ni + ~rc)

    is_cat = (dtype & 1).astype(bool)
    dleft = (dtype & 2).astype(bool)
    missing = (dtype >> 2) & 3
    num = ~is_cat
    fail(num & np.isnan(thr), "NaN threshold")
    t = thr.copy()
    # the C API turns |x| <= kZ into 0.0 before the trees see it (see the module docstring)
    band = num & (t >= -K_ZERO) & (t < K_ZERO)
    t[band] = np.where(t[band] >= 0, K_ZERO, _BELOW_NEG_KZERO)
    default_left = np.zeros(t.size, bool)
    m_none = num & (missing == _MISSING_NONE)
    default_left[m_none] = 0.0 <= t[m_none]          # NaN is replaced by 0.0
    m_nan = num & (missing == _MISSING_NAN)
    default_left[m_nan] = dleft[m_nan]
    m_zero = num & (missing == _MISSING_ZERO)
    expand = np.zeros(t.size, bool)
    if m_zero.any():
        t[m_zero], expand[m_zero] = _zero_missing(thr[m_zero], dleft[m_zero])
        default_left[m_zero] = dleft[m_zero]
    t[is_cat] = 0.0      # categorical: NaN, negatives, >= 2**31 go right (default_left False)

    # LightGBM numbers a new internal node after its parent, so its own ids (leaves after the
    # internal nodes) usually satisfy the IR's children-after-parents rule as they are
    def per_tree(mask: np.ndarray) -> np.ndarray:
        out = np.zeros(T, bool)
        out[tid[mask]] = True
        return out

    renumber = per_tree((lu <= loc) | (ru <= loc))
    expanding = per_tree(expand)
    has_cat = per_tree(is_cat)

    # the common trees (numeric splits in LightGBM's own order, no linear leaves) are built in
    # one pass over all their nodes (ir.build_trees), single leaves in another; the rest one
    # by one below (a tree with an odd is_linear line too: _linear words its error). Only
    # categorical and linear trees read their lines again: the model's text goes here.
    src.release(has_cat | linear)
    plain = ~renumber & ~expanding & ~has_cat & ~linear & (n_int > 0)
    single = (n_int == 0) & ~linear
    trees: list = [None] * T
    try:
        if plain.any():
            for i, tree in zip(np.flatnonzero(plain).tolist(), _plain_trees(
                    plain, n_int, n_leaves, tid, loc, lu, ru, feat, t, default_left, leaf_all,
                    leaf_off, icount if counted else None, lcount if counted else None, sp)):
                trees[i] = tree
        if single.any():
            S = np.flatnonzero(single)
            ones = np.ones(len(S), np.int64)
            for i, tree in zip(S.tolist(), build_trees(
                    ones, -ones, -ones, -ones, np.zeros(len(S)), np.zeros(len(S), bool),
                    leaf_all[leaf_off[S]], node_ids=np.zeros(len(S), np.int64))):
                trees[i] = tree
    except TreeBuildError:  # some tree is invalid: one by one, in order, says which first
        plain[:] = single[:] = False
        trees = [None] * T

    for i in range(T):
        if plain[i] or single[i]:
            continue
        lv = leaf_all[leaf_off[i]:leaf_off[i + 1]]
        k = int(n_int[i])
        if k == 0:
            trees[i] = dataclasses.replace(leaf_tree(lv[0]), node_ids=[0])
            if linear[i]:  # (_linear leaves any other tree as it is)
                trees[i] = _linear(trees[i], src.kv(i), src.name(i))
            continue
        a, b = int_off[i], int_off[i + 1]
        if has_cat[i]:
            cat_bits, cat_row = _cat_sets(src.kv(i), src.name(i), is_cat[a:b], thr[a:b])
        else:
            cat_bits, cat_row = np.zeros((0, 1), np.uint32), np.full(k, -1, np.int64)
        if expanding[i]:
            _bfs_order(src.name(i), k, lu[a:b], ru[a:b])   # validate the links first
            arrays = _expand_tree(src.name(i), k, lu[a:b], ru[a:b], feat[a:b], t[a:b],
                                  default_left[a:b], expand[a:b], cat_row, lv)
        else:
            n = k + k + 1
            if renumber[i]:
                new_of = np.empty(n, np.int64)
                new_of[_bfs_order(src.name(i), k, lu[a:b], ru[a:b])] = np.arange(n)
            else:
                new_of = np.arange(n)
            inner = new_of[:k]
            arrays = {"left": np.full(n, -1, np.int32), "right": np.full(n, -1, np.int32),
                      "feature": np.full(n, -1, np.int32), "threshold": np.zeros(n),
                      "default_left": np.zeros(n, bool), "value": np.zeros(n),
                      "cat_index": np.full(n, -1, np.int32)}
            arrays["left"][inner] = new_of[lu[a:b]]
            arrays["right"][inner] = new_of[ru[a:b]]
            arrays["feature"][inner] = feat[a:b]
            arrays["threshold"][inner] = t[a:b]
            arrays["default_left"][inner] = default_left[a:b]
            arrays["cat_index"][inner] = cat_row
            arrays["value"][new_of[k:]] = lv
            # LightGBM's ids: split index at internal nodes, leaf index (pred_leaf) at leaves
            arrays["node_ids"] = np.concatenate([np.arange(k), np.arange(k + 1)])[np.argsort(new_of)]
            if counted:
                arrays["cover"] = np.zeros(n)
                arrays["cover"][inner] = icount[a:b]
                arrays["cover"][new_of[k:]] = lcount[lc_off[i]:lc_off[i + 1]]
        try:
            tree = Tree(**arrays, cat_bits=cat_bits, cat_other_left=np.zeros(cat_bits.shape[0], bool))
            trees[i] = _linear(tree, src.kv(i), src.name(i)) if linear[i] else tree
        except InvalidModelError as exc:
            raise InvalidModelError(f"LightGBM tree {src.name(i)}: {exc}") from None
    return trees


def _linear_numbers(kv: dict[str, str], key: str, name: str, n: int, dtype: Any) -> np.ndarray:
    """A linear-tree line as LightGBM 4.7 reads it: leaf_const / leaf_coeff with
    Common::StringToArray<double> (tokens split on ' ', runs of spaces skipped, exactly n of them,
    each std::stod: correctly rounded, like leaf_value), num_features / leaf_features with Atoi.
    LightGBM writes leaf_features and leaf_coeff with two spaces between leaves."""
    toks = [t for t in kv[key].split(" ") if t]
    tok = _INT_TOKEN if np.dtype(dtype).kind == "i" else _FLOAT_TOKEN
    if len(toks) != n or not all(re.fullmatch(tok, t) for t in toks):
        raise InvalidModelError(f"LightGBM tree {name}: {key!r} must hold {n} numbers, got "
                                f"{kv[key][:60]!r}")
    try:
        return np.array(toks, dtype=dtype)
    except (ValueError, OverflowError):
        raise InvalidModelError(f"LightGBM tree {name}: {key!r} holds malformed numbers") from None


def _linear(tree: Tree, kv: dict[str, str], name: str) -> Tree:
    """`tree` with the linear leaves of an is_linear=1 tree (Tree::Predict in LightGBM 4.7's
    include/LightGBM/tree.h: leaf_const[leaf] + leaf_coeff * x over leaf_features in order, the
    plain leaf_value where one of those x is NaN), moved from LightGBM's leaf indices to the IR's
    leaf nodes (node_ids: a leaf copied by _expand_tree gets its linear model too). Lines
    missing from an is_linear tree read as LightGBM's Tree(const char*) reads them: no
    leaf_const is zeros, no num_features or leaf_features no features (no leaf_coeff for
    features: LightGBM would read past its vectors, refused)."""
    if not kv.get("is_linear", "").strip() or _int_field(kv, "is_linear", name) == 0:
        return tree  # (LightGBM's Atoi reads an empty value as 0)
    n_leaves = _int_field(kv, "num_leaves", name)
    const = (_linear_numbers(kv, "leaf_const", name, n_leaves, np.float64) if "leaf_const" in kv
             else np.zeros(n_leaves))
    counts = np.zeros(n_leaves, np.int64)
    if "num_features" in kv and "leaf_features" in kv:
        counts = _linear_numbers(kv, "num_features", name, n_leaves, np.int64)
    if np.any(counts < 0) or counts.sum() > 1 << 30:
        raise InvalidModelError(f"LightGBM tree {name}: bad num_features")
    total = int(counts.sum())
    if total and "leaf_coeff" not in kv:
        raise InvalidModelError(f"LightGBM tree {name} is linear with leaf_features but no "
                                "leaf_coeff line (LightGBM reads past its arrays)")
    feats = _linear_numbers(kv, "leaf_features", name, total, np.int64) if total else counts[:0]
    coeffs = _linear_numbers(kv, "leaf_coeff", name, total, np.float64) if total else const[:0]
    seg = np.concatenate([[0], np.cumsum(counts)])
    leaves = np.flatnonzero(tree.left < 0)
    lid = np.full(tree.n_nodes, -1, np.int64)
    lid[leaves] = tree.node_ids[leaves]
    n_of = np.zeros(tree.n_nodes, np.int64)
    n_of[leaves] = counts[lid[leaves]]
    ptr = np.concatenate([[0], np.cumsum(n_of)])
    node = np.repeat(np.arange(tree.n_nodes), n_of)
    src = seg[lid[node]] + np.arange(len(node)) - ptr[node]
    lc = np.zeros(tree.n_nodes)
    lc[leaves] = const[lid[leaves]]
    try:
        return dataclasses.replace(tree, leaf_const=lc, linear_ptr=ptr, linear_feature=feats[src],
                                   linear_coeff=coeffs[src])
    except InvalidModelError as exc:
        raise InvalidModelError(f"LightGBM tree {name}: {exc}") from None


# -- public entry points ----------------------------------------------------------------------
def parse_lightgbm_string(text: str, *, num_iteration: int | None = None,
                          classes: np.ndarray | None = None, provenance: str = "",
                          wrapper: bool = False) -> Forest:
    """Parse LightGBM's text model format.

    num_iteration: use only the first `num_iteration` iterations (None or <= 0: all, which is
    what a Booster loaded from this text predicts with). classes: class labels for an
    LGBMClassifier (labels then come from predict_proba's argmax, as the wrapper does);
    None gives Booster semantics (predict = transformed scores, no labels). wrapper: the model
    is an LGBMModel, whose predict converts arrays as sklearn's check_array first
    (Forest.input_rule "lightgbm_sklearn").
    """
    if not isinstance(text, str):
        raise InvalidModelError("a LightGBM text model must be a str")
    box = [text.encode("utf-8")]
    del text  # (peak memory: the model's bytes are all that is read from here on)
    return _parse_model(box, num_iteration=num_iteration, classes=classes,
                        provenance=provenance, wrapper=wrapper)


def _parse_model(box: list, **kw: Any) -> Forest:
    """parse_lightgbm_string of the model's UTF-8 bytes ``box[0]`` (the box is emptied once
    they are read): the native reader where NATIVE and treecomp.numparse is built, the Python
    reader where that cannot decide (the same Forest, or the same error)."""
    if NATIVE and numparse.available():
        try:
            return _parse_trees(box, True, **kw)
        except _NotNative:
            if not box:  # (_SpanTrees.release comes after the last _NotNative)
                raise RuntimeError("LightGBM reader: the native reader gave up after its "
                                   "release") from None
    return _parse_trees(box, False, **kw)


def _parse_trees(box: list, native: bool, *, num_iteration: int | None = None,
                 classes: np.ndarray | None = None, provenance: str = "",
                 wrapper: bool = False) -> Forest:
    header, tree_lines, tail = _split_model_text(box, native)  # (the trees' lines)
    if not native:
        box.clear()  # (peak memory: the trees' lines are all that is read from here on)
    _check_parameters(tail)
    version = header.get("version", "")
    if version not in _KNOWN_VERSIONS:
        raise UnsupportedModelError(f"LightGBM model format version {version!r} is not supported "
                                    f"(supported: {', '.join(_KNOWN_VERSIONS)})")
    num_class = _header_int(header, "num_class")
    per_iter = _header_int(header, "num_tree_per_iteration", num_class)
    n_features = _header_int(header, "max_feature_idx") + 1
    if per_iter < 1 or n_features < 1:
        raise InvalidModelError(f"LightGBM model header: num_tree_per_iteration={per_iter}, "
                                f"max_feature_idx={n_features - 1}")
    if num_class != per_iter:
        # LightGBM sizes each row's output by num_class but fills num_tree_per_iteration
        # values: it reads past the buffer (fewer classes) or returns uninitialised memory
        # (more). Files it writes always have the two equal.
        raise InvalidModelError(f"LightGBM model header: num_class={num_class} disagrees with "
                                f"num_tree_per_iteration={per_iter}")
    _header_int(header, "label_index")  # LightGBM refuses a model without one
    for key in ("feature_names", "feature_infos"):
        # LightGBM: "Model file doesn't contain feature_names" / "Wrong size of feature_infos"
        n_listed = len([s for s in header.get(key, "").split(" ") if s]) if key in header else -1
        if n_listed != n_features:
            raise InvalidModelError(f"LightGBM model header: {key} lists {max(n_listed, 0)} "
                                    f"features, max_feature_idx says {n_features}")
    if not tree_lines:
        raise InvalidModelError("LightGBM model holds no trees")
    # LightGBM predicts with len(trees) // num_tree_per_iteration iterations: the trees of an
    # incomplete last iteration are ignored, here too
    n_iter = len(tree_lines) // per_iter
    if n_iter == 0:
        raise InvalidModelError(f"LightGBM model holds {len(tree_lines)} trees, less than one "
                                f"iteration of num_tree_per_iteration={per_iter}")
    tree_lines = tree_lines.take(n_iter * per_iter)
    if num_iteration is not None and 0 < num_iteration < n_iter:
        n_iter = int(num_iteration)
        tree_lines = tree_lines.take(n_iter * per_iter)
    objective, transform = _objective(header)
    average = "average_output" in header
    obj_classes = _objective_num_class(header)
    if obj_classes is not None and obj_classes != num_class:
        # ConvertOutput would transform obj_classes of the num_class outputs
        raise InvalidModelError(f"LightGBM model: objective {header.get('objective')!r} has "
                                f"num_class:{obj_classes} but the header num_class={num_class}")

    trees = tuple(_convert_trees(tree_lines, n_features))
    tree_output = np.arange(len(trees), dtype=np.int32) % per_iter

    decision, cls = "none", ()
    if classes is not None:
        classes = np.asarray(classes)
        if per_iter == 1 and len(classes) == 2 and transform in ("sigmoid", "sigmoid2"):
            decision = "proba_gt_half"   # argmax([1 - p, p]) == (p > 0.5) exactly (Sterbenz)
        elif per_iter == len(classes) > 2 and transform in ("softmax", "softmax_seq", "sigmoid", "sigmoid2"):
            decision = "argmax_proba"
        else:
            raise UnsupportedModelError(
                f"LGBMClassifier with objective {objective!r}, {len(classes)} classes and "
                f"{per_iter} trees per iteration is not supported (supported: binary or "
                "cross_entropy with 2 classes, multiclass or multiclassova with > 2)")
        cls = (classes,)

    notes = [f"lightgbm text model {version}", f"objective={header.get('objective', 'custom')}",
             f"{n_iter} iterations x {per_iter} trees"]
    if average:
        notes.append("average_output (random forest)")
    cats, why = pandas_categorical(tail, n_features)
    if why:
        notes.append(f"pandas_categorical not usable: {why}")
    if provenance:
        notes.insert(0, provenance)
    # feature_names stay None on purpose: LightGBM takes DataFrame columns by position (4.7 never
    # reorders by name), while a Forest with names would reorder them.
    return Forest(trees=trees, n_features=n_features, n_outputs=per_iter, tree_output=tree_output,
                  base_score=np.zeros(per_iter), input_dtype="float64", comparison="<=",
                  category_rule="trunc",  # (int)x: -0.5 is category 0
                  accumulate_dtype="float64", output_divisor=n_iter if average else 1,
                  transform=transform, leaf_layout="lightgbm",
                  decision=decision, classes=cls, feature_names=None, allow_nan=True,
                  provenance="; ".join(notes),
                  input_rule="lightgbm_sklearn" if wrapper else "lightgbm",
                  pandas_categories="reject" if cats is None else "lightgbm",
                  category_values=cats or ())


_PANDAS_KEY = "pandas_categorical:"


def pandas_categorical(tail: str, n_features: int) -> tuple[tuple | None, str]:
    """The model's pandas_categorical as Forest.category_values (one "json" list per category
    column of the training frame, numbered in column order), or (None, why).

    LightGBM 4.7 (_load_pandas_categorical) reads the last line of the model, or the one
    before it (files), when it starts with "pandas_categorical:", as JSON; a Booster
    predicting a DataFrame takes its category columns in order and sets each to its list
    (_data_from_pandas). "null" (trained on an array) means the frame's own codes are read:
    no list says what they mean, so such frames are refused (None, ""). JSON that LightGBM
    cannot read is refused as LightGBM refuses the file; lists the re-coding cannot use
    (not lists of distinct strings / numbers / booleans) give (None, why)."""
    lines = [ln.strip() for ln in tail.rstrip().splitlines()[-2:]]
    line = next((ln for ln in reversed(lines) if ln.startswith(_PANDAS_KEY)), None)
    if line is None:
        return None, ""
    try:
        value = json.loads(line[len(_PANDAS_KEY):])
    except (ValueError, RecursionError) as exc:
        raise InvalidModelError(f"LightGBM model: pandas_categorical is not valid JSON ({exc}); "
                                "LightGBM cannot load the model either") from None
    if value is None:
        return None, ""
    if not isinstance(value, list) or not all(isinstance(v, list) for v in value):
        return None, "not a list of lists"
    if len(value) > n_features:
        return None, f"{len(value)} lists for {n_features} features"
    try:
        return checked_category_values([(i, "json", v) for i, v in enumerate(value)],
                                       n_features), ""
    except InvalidModelError as exc:
        return None, str(exc)[:200]


def parse_lightgbm_file(path: str | os.PathLike) -> Forest:
    """Parse a LightGBM text model file (`booster.save_model(...)`), without lightgbm."""
    p = Path(path)
    # bytes as they are: LightGBM reads the file raw, and tree_sizes are byte offsets into it
    # (read_text() would turn CRLF into LF and make stale offsets land)
    box = [p.read_bytes()]
    if not box[0].isascii():  # (ASCII is UTF-8: the common case needs no decoded copy)
        try:
            box[0].decode("utf-8")
        except UnicodeDecodeError:
            raise InvalidModelError(f"{p.name} is not a LightGBM text model (not UTF-8 text)") from None
    # (the bytes handed over in the box, not kept here: the reader frees them once read)
    return _parse_model(box, provenance=f"file {p.name}")


def _booster_iterations(booster: Any) -> int:
    # Booster.predict(num_iteration=None) uses best_iteration (-1 or 0 when unset: all trees)
    best = getattr(booster, "best_iteration", -1)
    return int(best) if best is not None and int(best) > 0 else -1


def parse_booster(booster: Any) -> Forest:
    """A lightgbm.Booster, predicting like `booster.predict(X)` (transformed, no labels)."""
    n = _booster_iterations(booster)
    try:
        text = booster.model_to_string(num_iteration=n)
    except Exception as exc:  # noqa: BLE001 - LightGBMError for an empty/invalid booster
        raise InvalidModelError(f"cannot serialise the LightGBM Booster: {exc}") from None
    return parse_lightgbm_string(text, provenance=f"lightgbm.Booster (num_iteration={n})")


_PRED_EARLY_STOP = ("pred_early_stop",)


def parse_lgbm_model(model: Any) -> Forest:
    """LGBMRegressor / LGBMClassifier / LGBMRanker (and subclasses): the wrapper's predict."""
    fitted = getattr(model, "__sklearn_is_fitted__", None)
    if getattr(model, "_Booster", None) is None or (fitted is not None and not fitted()):
        raise NotFittedError(f"this {type(model).__name__} is not fitted yet")
    params = model.get_params()
    for key in _PRED_EARLY_STOP:
        if params.get(key):
            raise UnsupportedModelError(f"{type(model).__name__} with {key}=True (prediction early "
                                        "stopping skips trees per row) is not supported")
    booster = model.booster_
    n = _booster_iterations(booster)
    text = booster.model_to_string(num_iteration=n)
    is_classifier = any(c.__name__ == "LGBMClassifier" for c in type(model).__mro__)
    prov = f"lightgbm.{type(model).__name__} (num_iteration={n})"
    if not is_classifier:
        return parse_lightgbm_string(text, provenance=prov, wrapper=True)
    if callable(getattr(model, "objective", None)) or callable(getattr(model, "_objective", None)):
        raise UnsupportedModelError(
            f"{type(model).__name__} with a custom (callable) objective is not supported: "
            "LightGBM's predict/predict_proba then return raw scores; parse model.booster_")
    return parse_lightgbm_string(text, classes=np.asarray(model.classes_), provenance=prov,
                                 wrapper=True)


PARSERS = {
    "Booster": parse_booster,
    "LGBMClassifier": parse_lgbm_model,
    "LGBMRegressor": parse_lgbm_model,
    "LGBMRanker": parse_lgbm_model,
    "LGBMModel": parse_lgbm_model,
}
