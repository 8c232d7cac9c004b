"""The XGBoost frontend: Boosters, the sklearn wrappers and .json / .ubj model files -> Forest.

Everything is read from the model's JSON document (``Booster.save_raw("ubj")`` for live
objects, the sklearn wrappers via ``get_booster()``; the file itself, decoded with :mod:`json`
or :mod:`treecomp.frontends.ubjson`, for files), so reading a file never imports xgboost. Every rule below was checked against XGBoost
3.2.0 (its sources and differential tests in tests/test_frontend_xgboost.py):

Trees (``src/predictor/predict_fn.h``, ``src/common/categorical.h``, ``src/tree/tree_model.cc``):
- Rows are cast to float32; ``x < split_condition`` (float32, strict) goes left; NaN follows
  ``default_left``. The leaf value is ``split_conditions`` at the leaf (equal to
  ``base_weights`` there), a float32.
- Node ids come from ``left_children`` / ``right_children`` (-1 at leaves). Pruned trees
  (``updater=prune``) keep deleted nodes as orphans in the arrays; nodes are renumbered
  breadth-first from the root when the arrays are not already parent-before-child.
- Categorical splits (``split_type == 1``): the node's categories (``categories`` sliced by
  ``categories_nodes`` / ``categories_segments`` / ``categories_sizes``) go RIGHT; every other
  value goes LEFT: other valid categories, categories above the largest listed one, negative
  values (-0.5 included; -0.0 is category 0) and values >= 2^24. Non-integral values truncate
  toward zero (3.9 is category 3). IR: ``cat_bits`` = complement of the listed set within
  32 * n_words bits, ``cat_other_left = True``.
- XGBoost's DMatrix rejects +/-inf inputs ("Input data contains `inf`"); ``inplace_predict``
  (the sklearn wrappers) accepts them and they compare normally, as here.
- Input (Forest.input_rule "xgboost"): integer arrays convert straight to float32, object,
  float16 and bool arrays by numpy's astype(float32), DataFrames column by column; big-endian
  arrays are refused (XGBoost 3.2 reads their bytes as little-endian numbers).
- DataFrame categories: a model trained on a frame with category columns (3.1+) keeps them in
  ``gradient_booster.model.cats`` (DART: ``gradient_booster.gbtree.model.cats``); a frame's
  category columns are re-coded by them (treecomp.categories). Without them (older releases,
  models trained on arrays) such frames are refused: XGBoost would read the frame's own codes.

Reading the document (``src/gbm/gbtree_model.cc``, ``src/learner.cc``, ``src/common/json.cc``):
- Tree j of the ``trees`` array sits at slot ``trees[j]["id"]``; ``tree_info`` (and DART's
  ``weight_drop``) apply by slot. Ids must be a permutation of 0..n-1 (3.2 reorders by them;
  3.3+ refuses any other order); ``gbtree_model_param.num_trees`` must equal the tree count.
- Values must have the JSON / UBJSON type XGBoost reads them as (else its "Invalid cast"):
  parameters (learner_model_param, gbtree_model_param, tree_param) are strings; float arrays
  hold floats, integer arrays integers; in .ubj files a tree whose ``parents`` is a typed int32
  array must have every array typed with XGBoost's own element type. .ubj files are decoded
  with ``ubjson.decode(strict=True)`` (what XGBoost's UBJReader accepts). What XGBoost refuses
  is refused here, with InvalidModelError naming the field.
- .json files are read by ``jsonarrays.loads``: json.loads, but the compact per-node arrays
  (JSON_ARRAY_KEYS) are parsed by numpy after a check of their bytes against JSON's number
  grammar, with each array's int / float kind kept for the checks above (anything else, or any
  doubt, goes through json.loads unchanged).

Margins (``src/predictor/cpu_predictor.cc``, ``src/gbm/gbtree.cc``):
- Each row starts from the base margin and adds the trees' float32 leaf values in tree order,
  in float32; tree i adds to output ``tree_info[i]``. Random forests (``num_parallel_tree``)
  just contribute more trees per iteration.
- ``base_score`` (``learner_model_param``) is in response space: "0.5" in old files, "[5E-1]"
  from 2.1 on, one value per class / target for multi-output models. The margin is the
  objective's link computed in float32 as XGBoost does: ``-logf(1.0f / b - 1.0f)`` for the
  logistic objectives, ``logf(b)`` for poisson / gamma / tweedie / cox / aft, ``b`` otherwise
  (multi:softprob's per-class values are added as they are). ``logf`` is the C library's, via
  ctypes (glibc's logf is not correctly rounded; rounding numpy's float64 log differs for some
  inputs); without ctypes float64 log rounded to float32 is used.
- DART: tree i is scaled by ``weight_drop[i]``. ``Booster.predict(DMatrix)`` adds
  ``(0 + leaf) * w`` (float32 product); ``inplace_predict`` -- what the sklearn wrappers run --
  adds ``((base + leaf) - base) * w`` with base the base margin of the tree's output group,
  all in float32 (so the two differ in the last bit for some rows). Both are per-leaf
  constants, folded into the leaf values exactly.

What the Forest reproduces (the source object decides):
- A ``Booster`` (or a file saved by one): ``Booster.predict`` on a DMatrix with all trees
  (``best_iteration`` is ignored, as Booster.predict does): transformed values for regression
  objectives, probabilities for binary:logistic, (n, K) probabilities for multi:softprob,
  the class index as float32 for multi:softmax (decision "argmax_raw" over float32 class
  labels 0..K-1), 0.0 / 1.0 for binary:hinge (decision "raw_gt_0"). ``decision_function`` is
  ``predict(output_margin=True)``.
- The sklearn wrappers (and files they saved: ``learner.attributes.scikit_learn``): their
  ``predict`` runs ``inplace_predict`` with the trees up to ``best_iteration`` (early
  stopping). XGBClassifier: labels ``np.arange(n_classes)`` (int64; int32 for multi:softmax),
  binary ``p > 0.5`` and ``predict_proba`` ``[1 - p, p]`` of the objective's transformed float32
  value p (the logistic objectives' probability; binary:logitraw's margin itself),
  multiclass argmax of the probabilities, multi-label ``p > 0.5`` per target; ``predict_proba`` and
  ``decision_function`` = ``predict(output_margin=True)``;
  XGBClassifier(objective="multi:softmax").predict_proba is scipy.special.softmax of the float32
  margins (numpy's float32 exp and row sum: exp_lib "numpy"), not XGBoost's softmax.
Output transforms (sigmoid / softmax / exp in float32; survival:aft's exp in double) are in
:mod:`treecomp.outputs`.

Vector-leaf trees (``multi_strategy="multi_output_tree"``, ``size_leaf_vector`` K > 1; multi-target
regression and multiclass): a leaf's K float32 values are row ``right_children[leaf]`` of
``leaf_weights`` (``base_weights``, n_nodes x split targets, is a training statistic); every such
tree adds its vector to all K outputs, in tree order, from the per-target base margins
(cpu_predictor.cc ``multi::PredValueByOneTree``). XGBoost 3.2 cannot read the layout of older
releases (no ``leaf_weights``: it segfaults): refused.

Refused with UnsupportedModelError: gblinear, unknown objectives, custom objectives and non-NaN
``missing`` in the sklearn wrappers, XGBClassifier with binary:hinge (its predict_proba is
``[1 - h, h]`` of the 0 / 1 step h, a transform treecomp lacks; its Booster is read).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import json
import math
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .. import numparse
from ..errors import InvalidModelError, NotFittedError, TreecompError, UnsupportedModelError
from ..ir import Forest, Tree, TreeBuildError, build_trees, checked_category_values, leaf_tree
from . import jsonarrays, ubjson

_F32 = np.float32
#: XGBoost's OutOfRangeCat(): category values >= 2^24 are invalid (they go left)
_MAX_CATEGORY = 1 << 24
#: cap on the 32-bit words of category bitsets per tree (a sanity bound against corrupt files)
_MAX_CAT_WORDS = 1 << 22
#: sanity bound on num_class / num_target
_MAX_OUTPUTS = 1 << 20

# objective -> (link applied to base_score, output transform, kind)
#   kind "values": predict returns transform(margin); "hinge": 0/1 by margin > 0;
#   "softprob": (n, K) probabilities; "softmax": argmax class index
_OBJECTIVES: dict[str, tuple[str, str, str]] = {
    **{name: ("identity", "identity", "values") for name in (
        "reg:squarederror", "reg:linear", "reg:squaredlogerror", "reg:absoluteerror",
        "reg:pseudohubererror", "reg:quantileerror", "binary:logitraw",
        "rank:pairwise", "rank:ndcg", "rank:map")},
    "reg:logistic": ("logit", "sigmoid", "values"),
    "binary:logistic": ("logit", "sigmoid", "values"),
    **{name: ("log", "exp", "values") for name in (
        "count:poisson", "reg:gamma", "reg:tweedie", "survival:cox")},
    # AFTObj::PredTransform calls exp on the float margin as a double: (float)exp((double)x)
    "survival:aft": ("log", "exp64", "values"),
    "binary:hinge": ("identity", "identity", "hinge"),
    "multi:softprob": ("identity", "softmax", "softprob"),
    "multi:softmax": ("identity", "softmax", "softmax"),
}


# -- float32 libm --------------------------------------------------------------------------------
@functools.cache
def _libm_logf():
    try:
        name = ctypes.util.find_library("m") or ctypes.util.find_library("c")
        lib = ctypes.CDLL(name)
        fn = lib.logf
        fn.restype = ctypes.c_float
        fn.argtypes = [ctypes.c_float]
        return fn
    except (OSError, AttributeError, TypeError):  # pragma: no cover - no C library via ctypes
        return None


def _logf(v: np.float32) -> np.float32:
    fn = _libm_logf()
    if fn is not None:
        return _F32(fn(float(v)))
    with np.errstate(all="ignore"):  # pragma: no cover
        return _F32(np.log(np.float64(v)))


def _link(kind: str, b: np.float32, objective: str) -> np.float32:
    if kind == "identity":
        return b
    if kind == "logit":
        if not (0 < b < 1):
            raise InvalidModelError(f"base_score {b} must be in (0, 1) for {objective}")
        with np.errstate(all="ignore"):
            return -_logf(_F32(_F32(1) / b - _F32(1)))
    if not b > 0:
        raise InvalidModelError(f"base_score {b} must be positive for {objective}")
    return _logf(b)


#: C isspace(): what std::istream's `>>` skips
_C_SPACE = " \t\n\v\f\r"
_JSON_NUMBER = r"-?[0-9]+(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?"  # ASCII digits only
_BASE_SCORE_RE = re.compile(rf"({_JSON_NUMBER})|\[({_JSON_NUMBER}(?:,{_JSON_NUMBER})*)\]")


def _base_scores(text: Any) -> np.ndarray:
    """`base_score` as float32 values: "0.5" (old), "[5E-1]" or "[a,b,c]" (2.1+).

    XGBoost 3.2 (common/param_array.cc ReadStream + dmlc's parameter parser) reads the string
    as whitespace-separated tokens joined together, turns a leading '(' / trailing ')' into
    brackets and parses the result as JSON. Trailing whitespace fails the stream ("Invalid
    Parameter format for base_score"), a non-string value is an "Invalid cast". Only the
    well-formed part of what XGBoost accepts is read here (it also takes "0.5abc", "5E-1]",
    "[5E-1,]", "01", "NaN" ...: those are refused, never guessed)."""
    if not isinstance(text, str):
        raise InvalidModelError(f"XGBoost model: base_score must be a string (XGBoost: Invalid "
                                f"cast), got {type(text).__name__}")
    if not text or text[-1] in _C_SPACE:
        raise InvalidModelError(f"XGBoost model: cannot read base_score {text[:60]!r} (empty, "
                                "or trailing whitespace: XGBoost refuses it)")
    s = re.sub(f"[{_C_SPACE}]+", "", text)
    if s[:1] == "(":
        s = "[" + s[1:]
    if s[-1:] == ")":
        s = s[:-1] + "]"
    m = _BASE_SCORE_RE.fullmatch(s)
    if m is None:
        raise InvalidModelError(f"XGBoost model: cannot read base_score {text[:60]!r}")
    parts = [m.group(1)] if m.group(1) is not None else m.group(2).split(",")
    with np.errstate(all="ignore"):
        vals = np.array([float(p) for p in parts], np.float64).astype(_F32)
    if vals.size == 0 or not np.all(np.isfinite(vals)):
        raise InvalidModelError(f"invalid base_score {text[:60]!r}")
    return vals


# -- JSON access helpers -------------------------------------------------------------------------
def _get(d: Any, key: str, where: str) -> Any:
    if not isinstance(d, dict) or key not in d:
        raise InvalidModelError(f"XGBoost model: missing {where}.{key}")
    return d[key]


def _dict(d: dict, key: str, where: str, required: bool = True) -> dict:
    """d[key], which must be an object (an empty one when optional and absent)."""
    if not required and key not in d:
        return {}
    v = _get(d, key, where)
    if not isinstance(v, dict):
        raise InvalidModelError(f"XGBoost model: {where}.{key} must be an object")
    return v


def _int(v: Any, where: str) -> int:
    try:
        f = float(v)
        i = int(f)
    except (TypeError, ValueError, OverflowError):
        raise InvalidModelError(f"XGBoost model: {where} must be an integer, got {str(v)[:40]!r}") from None
    if i != f:
        raise InvalidModelError(f"XGBoost model: {where} must be an integer, got {v!r}")
    return i


def _param_str(d: dict, key: str, where: str, default: str | None = None) -> str:
    """A parameter XGBoost stores as a string (dmlc parameters, tree_param): XGBoost reads them
    with get<String> ("Invalid cast" for a number) and `.at()` ("map::at" when absent)."""
    if key not in d:
        if default is None:
            raise InvalidModelError(f"XGBoost model: missing {where}.{key}")
        return default
    v = d[key]
    if not isinstance(v, str):
        raise InvalidModelError(f"XGBoost model: {where}.{key} must be a string (XGBoost: "
                                f"Invalid cast), got {str(v)[:40]!r}")
    return v


def _dmlc_int(d: dict, key: str, where: str, default: str | None = None) -> int:
    """An integer dmlc parameter (learner_model_param, gbtree_model_param): `istream >> int`
    then only whitespace ("3.0" and "3x" are refused: "Invalid Parameter format")."""
    v = _param_str(d, key, where, default)
    m = re.fullmatch(rf"[{_C_SPACE}]*([+-]?[0-9]+)[{_C_SPACE}]*", v)
    if m is None or len(m.group(1)) > 20 or abs(int(m.group(1))) >= 2 ** 31:
        raise InvalidModelError(f"XGBoost model: {where}.{key} = {v[:40]!r} is not an integer")
    return int(m.group(1))


def _stoi(d: dict, key: str, where: str) -> int:
    """A tree_param field: XGBoost 3.2 TreeParam::FromJson reads it with std::stoi (leading
    whitespace, sign, digits; anything after the digits is ignored, as std::stoi does)."""
    v = _param_str(d, key, where)
    m = re.match(rf"[{_C_SPACE}]*([+-]?[0-9]+)", v)
    if m is None or len(m.group(1)) > 20 or abs(int(m.group(1))) >= 2 ** 31:
        raise InvalidModelError(f"XGBoost model: {where}.{key} = {v[:40]!r} is not an integer")
    return int(m.group(1))


def _json_ints(v: Any, where: str) -> list:
    """A JSON array of Integers as XGBoost reads one element by element (get<Integer>): a
    number with a fraction or exponent ("1.0") or a boolean is an "Invalid cast"."""
    if not isinstance(v, list):
        raise InvalidModelError(f"XGBoost model: {where} must be an array of integers (XGBoost: "
                                f"Invalid cast from {type(v).__name__})")
    if not set(map(type, v)) <= {int}:
        bad = next(e for e in v if type(e) is not int)
        raise InvalidModelError(f"XGBoost model: {where} holds {str(bad)[:20]!r} "
                                f"({type(bad).__name__}) where XGBoost needs an integer")
    return v


#: the typed UBJSON array each tree field must be in a typed tree (tree_model.cc LoadModelImpl,
#: LoadCategoricalSplit; io_utils.h): F32Array, I32Array, U8Array, I64Array
_TYPED = {"split_conditions": ("float32",), "loss_changes": ("float32",),
          "sum_hessian": ("float32",), "base_weights": ("float32",), "leaf_weights": ("float32",),
          "left_children": ("int32",),
          "right_children": ("int32",), "parents": ("int32",),
          "split_indices": ("int32", "int64"), "default_left": ("uint8",),
          "split_type": ("uint8",), "categories_segments": ("int64",),
          "categories_sizes": ("int64",), "categories_nodes": ("int32",),
          "categories": ("int32",)}
#: the same as (kind, itemsize): dtype.name is slow, and a big-endian '>f4' is float32 too
_TYPED_KINDS = {k: tuple((np.dtype(n).kind, np.dtype(n).itemsize) for n in v)
                for k, v in _TYPED.items()}
#: what an untyped (JSON) array's elements must be: Number (float), Integer, or Boolean / Integer
_UNTYPED = {"split_conditions": (float,), "loss_changes": (float,), "sum_hessian": (float,),
            "base_weights": (float,), "leaf_weights": (float,), "default_left": (bool, int)}


def _tree_field(t: dict, key: str, where: str, typed: bool) -> Any:
    """t[key] checked for the JSON / UBJSON type XGBoost 3.2 reads it as.

    A tree is "typed" when its `parents` is a typed int32 UBJSON array (RegTree::LoadModel:
    IsA<I32Array>(parents)); then every array must be a typed array of exactly its type, and
    otherwise a plain array whose elements are Numbers (floats) for split_conditions, Booleans
    or Integers for default_left, Integers for the rest; anything else is XGBoost's
    "Invalid cast"."""
    v = _get(t, key, where)
    if typed:
        if not (isinstance(v, np.ndarray) and (v.dtype.kind, v.dtype.itemsize) in _TYPED_KINDS[key]):
            raise InvalidModelError(
                f"XGBoost model: {where}.{key} must be a typed {'/'.join(_TYPED[key])} array in a "
                f"typed tree (XGBoost: Invalid cast)")
        return v
    if isinstance(v, jsonarrays.NumberArray):  # read by numpy: all ints, or all floats
        if (float if v.is_float else int) in _UNTYPED.get(key, (int,)):
            return v.values
        v = v.tolist()  # refused below, element by element, in json.loads' words
    if not isinstance(v, list):
        raise InvalidModelError(f"XGBoost model: {where}.{key} must be a plain array in a tree "
                                f"whose parents is one (XGBoost: Invalid cast)")
    allowed = _UNTYPED.get(key, (int,))
    if not set(map(type, v)) <= set(allowed):
        bad = next(e for e in v if type(e) not in allowed)
        raise InvalidModelError(f"XGBoost model: {where}.{key} holds {str(bad)[:20]!r} "
                                f"({type(bad).__name__}): XGBoost needs "
                                f"{' or '.join(a.__name__ for a in allowed)} there (Invalid cast)")
    return v


def _array(v: Any, dtype: Any, where: str) -> np.ndarray:
    try:
        a = np.asarray(v, dtype=dtype)
    except (TypeError, ValueError, OverflowError):
        raise InvalidModelError(f"XGBoost model: {where} is not a numeric array") from None
    if a.ndim != 1:
        raise InvalidModelError(f"XGBoost model: {where} must be a flat array")
    return a


def _int_array(v: Any, where: str) -> np.ndarray:
    try:
        a = np.asarray(v)
    except (TypeError, ValueError, OverflowError):
        raise InvalidModelError(f"XGBoost model: {where} is not a numeric array") from None
    if a.size == 0:
        return np.zeros(0, np.int64)
    if a.ndim != 1 or a.dtype.kind not in "iubf":
        raise InvalidModelError(f"XGBoost model: {where} must be a flat array of integers")
    if a.dtype.kind == "f" and (not np.all(np.isfinite(a)) or np.any(a != np.round(a))):
        raise InvalidModelError(f"XGBoost model: {where} must hold integers")
    if a.dtype.kind in "uf" and np.any(np.abs(a) > 2.0 ** 62):
        raise InvalidModelError(f"XGBoost model: {where} holds out-of-range integers")
    return a.astype(np.int64)


# -- trees -------------------------------------------------------------------------------------
def _node_order(left: np.ndarray, right: np.ndarray, where: str) -> np.ndarray:
    """Reachable node ids in an order where parents precede children (root first).

    XGBoost's ids usually satisfy that already (identity order, the fast path); pruned trees keep
    deleted nodes as unreachable orphans and can reuse freed ids, so fall back to a level-by-level
    walk from the root (vectorised per level, no recursion).
    """
    n = len(left)
    idx = np.arange(n)
    internal = left >= 0
    li, ri = left[internal], right[internal]
    if np.all(li > idx[internal]) and np.all(ri > idx[internal]) and np.all(li < n) and np.all(ri < n):
        counts = np.bincount(np.concatenate([li, ri]), minlength=n)
        if counts[0] == 0 and np.all(counts[1:] == 1):
            return idx
    seen = np.zeros(n, bool)
    seen[0] = True
    levels = [np.zeros(1, np.int64)]
    frontier = levels[0]
    while frontier.size:
        frontier = frontier[internal[frontier]]
        children = np.stack([left[frontier], right[frontier]], axis=1).ravel()
        if children.size == 0:
            break
        if np.any(children >= n):
            raise InvalidModelError(f"{where}: child index out of range (num_nodes={n})")
        if np.any(seen[children]) or np.unique(children).size != children.size:
            raise InvalidModelError(f"{where}: a node is reachable twice (cycle or shared node)")
        seen[children] = True
        levels.append(children)
        frontier = children
    return np.concatenate(levels)


def _cat_sets(t: dict, n: int, is_cat: np.ndarray, where: str) -> dict[int, np.ndarray]:
    """Categories (going right) of every categorical node, keyed by original node id."""
    nodes = _int_array(t.get("categories_nodes", []), f"{where}.categories_nodes")
    segs = _int_array(t.get("categories_segments", []), f"{where}.categories_segments")
    sizes = _int_array(t.get("categories_sizes", []), f"{where}.categories_sizes")
    cats = _int_array(t.get("categories", []), f"{where}.categories")
    if len(segs) < len(nodes) or len(sizes) < len(nodes):
        raise InvalidModelError(f"{where}: categories_segments/sizes shorter than categories_nodes")
    segs, sizes = segs[:len(nodes)], sizes[:len(nodes)]  # XGBoost reads no more of them
    if np.any(segs < 0) or np.any(sizes < 0) or np.any(segs + sizes > len(cats)):
        raise InvalidModelError(f"{where}: categories_segments/sizes out of range")
    if np.any(nodes < 0) or np.any(nodes >= n):
        raise InvalidModelError(f"{where}: categories_nodes out of range")
    if cats.size and (cats.min() < 0 or cats.max() >= _MAX_CATEGORY):
        raise InvalidModelError(f"{where}: categories must be integers in [0, 2^24)")
    out = {int(nd): cats[s:s + k] for nd, s, k in zip(nodes, segs, sizes)}
    missing = [int(i) for i in np.flatnonzero(is_cat) if int(i) not in out]
    if missing:
        raise InvalidModelError(f"{where}: categorical node {missing[0]} has no category list")
    return out


def _tree_arrays(t: Any, i: int) -> tuple[np.ndarray, ...]:
    """The node arrays of tree i, checked for type and length."""
    where = f"tree {i}"
    if not isinstance(t, dict):
        raise InvalidModelError(f"XGBoost model: {where} is not an object")
    # XGBoost 3.2 RegTree::LoadModel: tree_param is required, with num_feature / num_nodes /
    # size_leaf_vector as strings (TreeParam::FromJson: std::stoi(get<String>(obj.at(...))))
    tp = _dict(t, "tree_param", where)
    _stoi(tp, "num_feature", f"{where}.tree_param")
    if "num_deleted" in tp:  # optional (1.0 files lack it), a string when present
        _stoi(tp, "num_deleted", f"{where}.tree_param")
    width = _stoi(tp, "size_leaf_vector", f"{where}.tree_param")
    parents = _get(t, "parents", where)
    typed = isinstance(parents, np.ndarray)
    fields = {k: _tree_field(t, k, where, typed) for k in (
        "parents", "left_children", "right_children", "split_indices", "split_conditions",
        "default_left")}
    stype = t.get("split_type")
    if "split_type" in t:  # LoadCategoricalSplit reads all four category arrays then
        cat = {k: _int_array(_tree_field(t, k, where, typed), f"{where}.{k}") for k in (
            "split_type", "categories_segments", "categories_sizes", "categories_nodes",
            "categories")}
        # ... walking categories_nodes in node order and reading segments[i] / sizes[i] and
        # the categories they point at for the i-th one, without bounds checks (a longer
        # categories_nodes list segfaults 3.2), and CHECK_GT(size, 0). Entries of segments /
        # sizes beyond categories_nodes are never read.
        nodes, segs, sizes = (cat[k] for k in ("categories_nodes", "categories_segments",
                                               "categories_sizes"))
        if len(segs) < len(nodes) or len(sizes) < len(nodes):
            raise InvalidModelError(f"XGBoost model: {where}: categories_segments / sizes are "
                                    "shorter than categories_nodes (XGBoost reads out of bounds)")
        segs, sizes = segs[:len(nodes)], sizes[:len(nodes)]
        if (np.any(np.diff(nodes) <= 0)
                or (nodes.size and (nodes[0] < 0 or nodes[-1] >= len(cat["split_type"])))
                or np.any(sizes < 1) or np.any(segs < 0)
                or np.any(segs + sizes > len(cat["categories"]))):
            raise InvalidModelError(f"XGBoost model: {where}: categories_nodes / segments / sizes "
                                    "are inconsistent (XGBoost reads them out of bounds)")
    left = _int_array(fields["left_children"], f"{where}.left_children")
    n = len(left)
    if n < 1:
        raise InvalidModelError(f"XGBoost model: {where} has no nodes")
    if _stoi(tp, "num_nodes", f"{where}.tree_param") != n:
        raise InvalidModelError(f"XGBoost model: {where}: num_nodes disagrees with the arrays")
    # the per-node statistics are never predicted with, but XGBoost checks their type (above)
    # and length, and follows `parents` of every node but the root (self[parent]: out of range
    # is an out-of-bounds read, -1 a failed check)
    # (a vector-leaf tree has base_weights for every node and split target: not read here)
    for k in ("parents", "loss_changes", "sum_hessian") + (("base_weights",) if width <= 1 else ()):
        if len(_tree_field(t, k, where, typed)) != n:
            raise InvalidModelError(f"XGBoost model: {where}.{k} has {len(t[k])} entries, "
                                    f"expected {n}")
    par = _int_array(parents, f"{where}.parents")[1:]
    if par.size and (par.min() < 0 or par.max() >= n):
        raise InvalidModelError(f"XGBoost model: {where}.parents holds a node id out of range")
    arrays = (left,
              _int_array(fields["right_children"], f"{where}.right_children"),
              _int_array(fields["split_indices"], f"{where}.split_indices"),
              _array(fields["split_conditions"], np.float64, f"{where}.split_conditions"),
              _default_left(fields["default_left"], f"{where}.default_left"),
              np.zeros(n, np.int64) if stype is None else _int_array(stype, f"{where}.split_type"),
              _array(_tree_field(t, "sum_hessian", where, typed), np.float64, f"{where}.sum_hessian"))
    for name, a in zip(("right_children", "split_indices", "split_conditions", "default_left",
                        "split_type", "sum_hessian"), arrays[1:]):
        if len(a) != n:
            raise InvalidModelError(f"XGBoost model: {where}.{name} has {len(a)} entries, expected {n}")
    for name, a in zip(("left_children", "right_children", "split_indices"), arrays[:3]):
        # XGBoost stores these as int32 and casts what it reads: 2**32 + 1 would become node 1
        if a.size and (a.min() < -2 ** 31 or a.max() >= 2 ** 31):
            raise InvalidModelError(f"XGBoost model: {where}.{name} holds a value that does not fit "
                                    f"int32 ({int(a.max() if a.max() >= 2 ** 31 else a.min())})")
    if width <= 1:
        return arrays + (None,)
    vec = _leaf_vectors(t, where, typed, width, left, arrays[1])
    return (left, np.where(left < 0, -1, arrays[1])) + arrays[2:] + (vec,)


def _leaf_vectors(t: dict, where: str, typed: bool, width: int, left: np.ndarray,
                  right: np.ndarray) -> np.ndarray:
    """(n, width) float32 leaf vectors of a vector-leaf tree (XGBoost 3.2 MultiTargetTree,
    multi_strategy="multi_output_tree"): at a leaf, right_children holds the leaf's row of
    `leaf_weights` (n_leaves x width, learning rate applied), which is what
    MultiTargetTreeView::LeafValue predicts with; base_weights (every node's weight over the
    split targets) is a training statistic. XGBoost goes right to LeftChild + 1 (predict_fn.h
    GetNextNode) but follows right_children for missing values: files where the two differ
    are refused."""
    if "leaf_weights" not in t:
        # XGBoost < 3.2 kept leaf values in base_weights; 3.2 segfaults reading such a file
        raise UnsupportedModelError(
            f"XGBoost model: {where} is a vector-leaf tree without leaf_weights (written by "
            "XGBoost < 3.2, which XGBoost 3.2 cannot read either); re-train or re-save it with "
            "XGBoost >= 3.2")
    lw = _array(_tree_field(t, "leaf_weights", where, typed), np.float64, f"{where}.leaf_weights")
    n_leaves = len(lw) // width
    if len(lw) % width or n_leaves < 1:
        raise InvalidModelError(f"XGBoost model: {where}.leaf_weights has {len(lw)} values, not "
                                f"a positive multiple of size_leaf_vector={width}")
    leaf = left < 0
    idx = right[leaf]
    if np.any(idx < 0) or np.any(idx >= n_leaves):
        raise InvalidModelError(f"XGBoost model: {where}: a leaf's right_children (its row of "
                                f"leaf_weights) is outside [0, {n_leaves})")
    if np.any(right[~leaf] != left[~leaf] + 1):
        raise InvalidModelError(f"XGBoost model: {where}: a vector-leaf tree's right child must "
                                "be its left child + 1 (XGBoost predicts with left + 1)")
    with np.errstate(all="ignore"):
        rows = lw.astype(_F32).reshape(n_leaves, width)
    vec = np.zeros((len(left), width), _F32)
    vec[leaf] = rows[idx]
    return vec


def _default_left(v: Any, where: str) -> np.ndarray:
    """default_left as XGBoost reads it: integers (0/1, U8 in UBJSON) or booleans (1.x), true
    only where the value is 1 (json.h GetElem<Boolean>: `arr[i] == 1`); any other integer is
    false. Non-integral numbers are refused ("Invalid cast, from Number to Integer")."""
    try:
        a = np.asarray(v)
    except (TypeError, ValueError, OverflowError):
        raise InvalidModelError(f"XGBoost model: {where} is not a numeric array") from None
    if a.size == 0:
        return np.zeros(0, bool)
    if a.ndim != 1 or a.dtype.kind not in "biu":
        raise InvalidModelError(f"XGBoost model: {where} must be a flat array of integers or "
                                "booleans (XGBoost refuses other numbers)")
    return a == 1


@functools.lru_cache(maxsize=1024)
def _stoi_text(v: str) -> int | None:
    """_stoi's value of the string `v`, or None where _stoi refuses it (cached: a model's
    trees repeat a handful of tree_param strings)."""
    m = re.match(rf"[{_C_SPACE}]*([+-]?[0-9]+)", v)
    if m is None or len(m.group(1)) > 20 or abs(int(m.group(1))) >= 2 ** 31:
        return None
    return int(m.group(1))


#: the per-node arrays _tree_arrays reads from every tree with scalar leaves, in this order
_NODE_KEYS = ("left_children", "right_children", "split_indices", "split_conditions",
              "default_left", "sum_hessian", "parents", "loss_changes", "base_weights")
_CAT_KEYS = ("categories_segments", "categories_sizes", "categories_nodes", "categories")
_FLOAT_KEYS = frozenset(("split_conditions", "sum_hessian", "loss_changes", "base_weights"))


def _fast_field(v: Any, key: str, typed: bool) -> Any:
    """t[key] as a numpy array (or the NumberArray jsonarrays read) where _tree_field accepts
    it, or None (then the per-tree path decides, and words any error)."""
    if typed:
        if isinstance(v, np.ndarray) and (v.dtype.kind, v.dtype.itemsize) in _TYPED_KINDS[key]:
            return v
        return None
    if type(v) is jsonarrays.NumberArray:
        return v if v.is_float == (key in _FLOAT_KEYS) else None
    if type(v) is not list:
        return None
    kinds = set(map(type, v))
    allowed = _UNTYPED.get(key, (int,))
    if not kinds <= set(allowed):
        return None
    try:
        return np.array(v, dtype=np.float64 if key in _FLOAT_KEYS else np.int64)
    except (OverflowError, ValueError, TypeError):
        return None


def _joined(parts: list) -> np.ndarray:
    """The arrays (or NumberArrays) concatenated: a view, without a copy, where they are
    consecutive slices of one of jsonarrays' per-key arrays (a JSON file's trees in order)."""
    p0 = parts[0]
    if type(p0) is jsonarrays.NumberArray and p0.base is not None:
        base, pos = p0.base, p0.start
        for p in parts:
            if type(p) is not jsonarrays.NumberArray or p.base is not base or p.start != pos:
                break
            pos += len(p.values)
        else:
            return base[p0.start:pos]
    elif type(p0) is np.ndarray and p0.base is not None and numparse.available():
        # slices of one array (ubjson's typed arrays of one key): consecutive in it?
        base = p0.base
        if type(base) is np.ndarray and base.ndim == 1 and base.flags.c_contiguous \
                and base.dtype == p0.dtype and all(type(p) is np.ndarray and p.base is base for p in parts):
            try:  # (each 1-D, contiguous, of p0's dtype; their addresses and sizes)
                at = numparse.addresses(parts)
            except (ValueError, BufferError):
                at = None
            if at is not None:
                first, rem = divmod(int(at[0, 0]) - base.ctypes.data, base.itemsize)
                n = int(at[:, 1].sum()) // base.itemsize
                if rem == 0 and 0 <= first and first + n <= len(base) \
                        and np.array_equal(at[1:, 0], at[:-1, 0] + at[:-1, 1]):
                    return base[first:first + n]
    return np.concatenate([p.values if type(p) is jsonarrays.NumberArray else p for p in parts])


def _fast_tree_arrays(trees: list) -> tuple[np.ndarray, tuple[np.ndarray, ...]] | None:
    """What _tree_arrays gives for every tree, concatenated, with the trees' node counts:
    (sizes, (left, right, split_indices, split_conditions, default_left, split_type,
    sum_hessian)), for the common model (scalar leaves, no categorical splits) with the per-tree
    Python work reduced to a few type checks a field and every check over all nodes at once.
    None where some tree is not such a tree or would fail a check of _tree_arrays: then
    _tree_arrays reads every tree (and raises its error)."""
    T = len(trees)
    cols: dict[str, list] = {k: [None] * T for k in _NODE_KEYS + ("split_type",)}
    nums = np.empty((T, 3), np.int64)  # num_nodes, whether split_type is present, typed
    for i, t in enumerate(trees):
        if type(t) is not dict:
            return None
        tp = t.get("tree_param")
        if type(tp) is not dict:
            return None
        got = []
        for k in ("num_feature", "size_leaf_vector", "num_nodes") + (
                ("num_deleted",) if "num_deleted" in tp else ()):
            v = tp.get(k)
            if type(v) is not str:
                return None
            x = _stoi_text(v)
            if x is None:
                return None
            got.append(x)
        if got[1] > 1:  # vector leaves
            return None
        typed = isinstance(t.get("parents"), np.ndarray)
        for k in _NODE_KEYS:
            if k not in t:
                return None
            a = _fast_field(t[k], k, typed)
            if a is None:
                return None
            cols[k][i] = a
        has_type = "split_type" in t
        if has_type:
            for k in _CAT_KEYS:
                if k not in t:
                    return None
                a = _fast_field(t[k], k, typed)
                if a is None or len(a):  # categories: the per-tree path reads them
                    return None
            a = _fast_field(t["split_type"], "split_type", typed)
            if a is None:
                return None
            cols["split_type"][i] = a
        nums[i] = got[2], has_type, typed
    left = _joined(cols["left_children"])
    sizes = np.fromiter(map(len, cols["left_children"]), np.int64, T)
    if np.any(sizes < 1) or np.any(nums[:, 0] != sizes):
        return None
    for k in _NODE_KEYS[1:]:
        if not np.array_equal(np.fromiter(map(len, cols[k]), np.int64, T), sizes):
            return None
    out = {}
    for k in ("right_children", "split_indices", "parents"):
        out[k] = _joined(cols[k])
    for k in ("left_children", "right_children", "split_indices"):
        a = left if k == "left_children" else out[k]
        if a.min() < -2 ** 31 or a.max() >= 2 ** 31:
            return None
    offs = np.zeros(T + 1, np.int64)
    np.cumsum(sizes, out=offs[1:])
    par = out.pop("parents")
    n_of = np.repeat(sizes, sizes)
    not_root = np.ones(len(par), bool)
    not_root[offs[:-1]] = False
    if np.any(not_root & ((par < 0) | (par >= n_of))):
        return None
    del par, n_of, not_root
    with_type = [cols["split_type"][i] for i in np.flatnonzero(nums[:, 1]).tolist()]
    if with_type:
        if not np.array_equal(np.fromiter(map(len, with_type), np.int64, len(with_type)),
                              sizes[nums[:, 1] == 1]):
            return None
        if _joined(with_type).any():  # a categorical split (or an unknown type)
            return None
    stype = np.zeros(offs[-1], np.int8)
    cond = _joined(cols["split_conditions"])  # (float32 from JSON: as XGBoost reads it)
    dleft = _joined(cols["default_left"]) == 1
    hess = _joined(cols["sum_hessian"])
    return sizes, (left, out["right_children"], out["split_indices"], cond, dleft, stype, hess)


def _convert_trees(trees: list, n_features: int, leaf_map=None) -> list[Tree]:
    """The model's trees -> IR Trees, validated in bulk over all nodes of all trees at once
    (per-tree numpy calls dominate otherwise). `leaf_map(values, tree_ids)` maps float32 leaf
    values (DART scaling)."""
    fast = _fast_tree_arrays(trees)
    if fast is None:
        cols = list(zip(*(_tree_arrays(t, i) for i, t in enumerate(trees))))
        vecs = cols.pop()  # per tree: (n, width) leaf vectors of a vector-leaf tree, else None
        sizes = np.array([len(a) for a in cols[0]], np.int64)
        left, right, feat, cond, dleft, stype, hess = (np.concatenate(c) for c in cols)
        del cols
    else:
        sizes, (left, right, feat, cond, dleft, stype, hess) = fast
        vecs = [None] * len(trees)
    offs = np.concatenate([[0], np.cumsum(sizes)])
    tree_of = np.repeat(np.arange(len(trees), dtype=np.int32), sizes)
    # each node's position in its tree (its XGBoost id where kept), as offs[tree_of] gives it;
    # int32 where every position fits (the IR's node_ids)
    pos_dtype = np.int32 if offs[-1] < 2 ** 31 else np.int64
    local = np.arange(offs[-1], dtype=pos_dtype) - np.repeat(offs[:-1].astype(pos_dtype), sizes)
    internal = left >= 0

    def fail(bad: np.ndarray, msg: str) -> None:
        if bad.any():
            raise InvalidModelError(f"XGBoost model: tree {int(tree_of[np.argmax(bad)])}: {msg}")

    # each tree's shape in one C pass (status 1: a child out of range, 2: ids to renumber)
    status = numparse.tree_shapes(sizes, left, right)[0] if numparse.available() else None
    if status is None or (status == 1).any():
        fail((left < -1) | (right < -1) | ((left < 0) != (right < 0)),
             "children must both be -1 (leaf) or node ids")
        fail(internal & ((left >= sizes[tree_of]) | (right >= sizes[tree_of])),
             "child index out of range")
    # (a model file passes the next checks by a few reductions over all nodes, without the
    # node-wide temporaries of the masked tests, which run, in this order, where it may not)
    ints = feat.dtype.kind in "iu" and stype.dtype.kind in "iu" and feat.size
    if not (ints and feat.min() >= 0 and feat.max() < n_features):
        fail(internal & ((feat < 0) | (feat >= n_features)),
             f"split feature index out of range (num_feature={n_features})")
    if not (ints and stype.min() >= 0 and stype.max() <= 1):
        fail((stype != 0) & (stype != 1), "unknown split_type")
    with np.errstate(all="ignore"):
        cond32 = cond.astype(_F32, copy=False)  # JSON holds float32 values as shortest decimals
    any_cat = bool(stype.any())
    is_cat = internal & (stype == 1) if any_cat else np.zeros(len(internal), bool)
    if not np.isfinite(cond32).all():
        fail(~internal & ~np.isfinite(cond32), "non-finite leaf value")
        fail(internal & ~is_cat & np.isnan(cond32), "NaN split condition")

    leaf_vals = np.where(internal, _F32(0), cond32)
    if leaf_map is not None:
        leaf_vals = np.where(internal, _F32(0), leaf_map(leaf_vals, tree_of))
    value = leaf_vals.astype(np.float64)
    threshold = np.where(internal & ~is_cat if any_cat else internal, cond32, _F32(0)).astype(np.float64)
    feature = np.where(internal, feat, -1)
    default_left = dleft & internal

    # XGBoost numbers nodes parent-before-child unless pruning left orphans (or ids were
    # reused): those trees are renumbered from the root; the others keep their ids. A tree
    # keeps them when every child comes after its parent (so the root is no child) and every
    # other node is a child exactly once: its 2 * internal children are distinct, and as many
    # as its nodes but the root
    del leaf_vals, cond32, cond, dleft, feat  # (peak memory)
    if status is not None:
        reorder = status == 2
    else:
        n_int = np.bincount(tree_of, internal, minlength=len(trees)).astype(np.int64)
        seen = np.zeros(offs[-1], bool)
        base = offs[tree_of[internal]]
        seen[left[internal] + base] = True
        seen[right[internal] + base] = True
        del base
        reorder = (np.bincount(tree_of, internal & ((left <= local) | (right <= local)),
                               minlength=len(trees)) > 0) \
            | (2 * n_int != sizes - 1) | (np.bincount(tree_of, seen, minlength=len(trees)) != sizes - 1)
        del seen, n_int

    # the common trees (numeric splits, scalar leaves, ids in order, a usable cover) are built
    # in one pass over all their nodes; the others one by one below
    hess32 = hess.astype(_F32, copy=False).astype(np.float64)
    bad_cover = ~(np.isfinite(hess32) & (hess32 >= 0))
    # (bincount with bool weights converts them to float64 first: only where needed)
    cover_ok = np.bincount(tree_of, bad_cover, minlength=len(trees)) == 0 if bad_cover.any() \
        else np.ones(len(trees), bool)
    del bad_cover
    no_cat = np.bincount(tree_of, is_cat, minlength=len(trees)) == 0 if is_cat.any() \
        else np.ones(len(trees), bool)
    plain = ~reorder & no_cat & cover_ok & np.array([v is None for v in vecs], bool)
    out: list = [None] * len(trees)
    if plain.any():
        nodes = None if plain.all() else plain[tree_of]

        def pick(a: np.ndarray) -> np.ndarray:
            return a if nodes is None else a[nodes]
        try:
            # (copy=False: the arrays made here are kept as the trees' own; left and right,
            # views of the document's arrays when every tree is plain, are copied)
            built = build_trees(sizes[plain], pick(left), pick(right), pick(feature),
                                pick(threshold), pick(default_left), pick(value),
                                node_ids=pick(local).astype(np.int32, copy=False), cover=pick(hess32),
                                copy=False)
        except TreeBuildError:  # some tree is invalid: one by one, in order, says which first
            plain[:] = False
        else:
            for i, t in zip(np.flatnonzero(plain).tolist(), built):
                out[i] = t
        del nodes
    for i, t in enumerate(trees):
        if plain[i]:
            continue
        a, b = int(offs[i]), int(offs[i + 1])
        l, r = left[a:b], right[a:b]
        perm = None  # new id -> old id, for renumbered trees
        if reorder[i]:
            perm = _node_order(l, r, f"XGBoost model: tree {i}")
            new_id = np.full(b - a, -1, np.int64)
            new_id[perm] = np.arange(len(perm))
            l = np.where(l[perm] >= 0, new_id[np.maximum(l[perm], 0)], -1)
            r = np.where(r[perm] >= 0, new_id[np.maximum(r[perm], 0)], -1)
        idx = slice(a, b) if perm is None else perm + a
        cats = _cat_arrays(t, is_cat[a:b], perm, i) if is_cat[a:b].any() else {}
        val = value[idx] if vecs[i] is None else vecs[i] if perm is None else vecs[i][perm]
        out[i] = Tree(left=l, right=r, feature=feature[idx], threshold=threshold[idx],
                      default_left=default_left[idx], value=val, **cats,
                      # XGBoost's node ids (what pred_leaf=True returns)
                      node_ids=np.arange(b - a) if perm is None else perm,
                      # no SHAP for vector leaves (XGBoost computes none either)
                      cover=_cover(hess[idx]) if vecs[i] is None else None)
    return out


def _cover(hess: np.ndarray) -> np.ndarray | None:
    """sum_hessian as the tree's cover (SHAP), or None where XGBoost's is unusable."""
    hess = hess.astype(_F32).astype(np.float64)  # the float32 values XGBoost holds
    return hess if np.all(np.isfinite(hess) & (hess >= 0)) else None


def _cat_arrays(t: dict, is_cat: np.ndarray, perm: np.ndarray | None, i: int) -> dict:
    """cat_index / cat_bits / cat_other_left of tree i (`perm`: new id -> old id, or None)."""
    where = f"XGBoost model: tree {i}"
    sets = _cat_sets(t, len(is_cat), is_cat, where)
    new_is_cat = is_cat if perm is None else is_cat[perm]
    cat_nodes = np.flatnonzero(new_is_cat)
    old_ids = cat_nodes if perm is None else perm[cat_nodes]
    right_sets = [sets[int(j)] for j in old_ids]
    n_words = max((int(cs.max()) + 32) // 32 if cs.size else 1 for cs in right_sets)
    if len(cat_nodes) * n_words > _MAX_CAT_WORDS:
        raise UnsupportedModelError(
            f"{where}: categorical splits over categories up to {32 * n_words - 1} need more "
            f"than {_MAX_CAT_WORDS * 4 >> 20} MiB of bitsets")
    right_words = np.zeros((len(cat_nodes), n_words), np.uint64)
    for r, cs in enumerate(right_sets):
        cs = cs.astype(np.uint64)
        np.bitwise_or.at(right_words[r], cs >> np.uint64(5), np.uint64(1) << (cs & np.uint64(31)))
    cat_index = np.full(len(new_is_cat), -1, np.int32)
    cat_index[cat_nodes] = np.arange(len(cat_nodes), dtype=np.int32)
    return {"cat_index": cat_index,
            "cat_bits": (~right_words & np.uint64(0xFFFFFFFF)).astype(np.uint32),  # left: unlisted
            "cat_other_left": np.ones(len(cat_nodes), bool)}  # invalid / beyond the set: left


# -- the model ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Mode:
    """How the model will be used: Booster.predict, or a sklearn wrapper's predict."""

    wrapper: str | None = None     # None (Booster), "classifier", or another estimator type
    classes: np.ndarray | None = None   # XGBClassifier.classes_ when known
    source: str = "Booster"


def _learner(doc: Any) -> dict:
    if not isinstance(doc, dict) or not isinstance(doc.get("learner"), dict):
        raise InvalidModelError("not an XGBoost model document (no 'learner' object)")
    return doc["learner"]


def forest_from_document(doc: Any, mode: _Mode = _Mode()) -> Forest:
    """Build the Forest from an XGBoost model document (the parsed JSON / UBJSON)."""
    try:
        return _forest(doc, mode)
    except (TypeError, AttributeError, KeyError, IndexError, OverflowError) as exc:
        # a value of the wrong JSON type somewhere the checks above did not anticipate
        raise InvalidModelError(f"malformed XGBoost model document ({type(exc).__name__}: "
                                f"{str(exc)[:200]})") from None


def _forest(doc: Any, mode: _Mode) -> Forest:
    learner = _learner(doc)
    gb = _dict(learner, "gradient_booster", "learner")
    name = _get(gb, "name", "learner.gradient_booster")
    weights = None
    if name == "gblinear":
        raise UnsupportedModelError("XGBoost gblinear (linear booster) models are not supported; "
                                    "treecomp supports the tree boosters gbtree and dart")
    if name == "dart":
        # gbtree.cc Dart::LoadModel: get<Array>, then get<Number> per element
        wd = _get(gb, "weight_drop", "gradient_booster")
        if not isinstance(wd, list) or not set(map(type, wd)) <= {float}:
            raise InvalidModelError("XGBoost model: weight_drop must be an array of floats "
                                    "(XGBoost: Invalid cast)")
        weights = _array(wd, np.float64, "weight_drop")
        gb = _dict(gb, "gbtree", "gradient_booster")
    elif name != "gbtree":
        raise UnsupportedModelError(f"XGBoost booster {str(name)[:40]!r} is not supported "
                                    "(gbtree and dart are)")
    model = _dict(gb, "model", "gradient_booster")
    trees = _get(model, "trees", "gradient_booster.model")
    tree_info = _int_array(_json_ints(_get(model, "tree_info", "gradient_booster.model"),
                                      "tree_info"), "tree_info")
    if not isinstance(trees, list) or len(tree_info) != len(trees):
        raise InvalidModelError("XGBoost model: tree_info must have one entry per tree")
    # gbtree_model.cc (3.2) GBTreeModel::LoadModel: gbtree_model_param is required and
    # num_trees must equal the number of trees ("Check failed: trees_json.size() ==
    # param.num_trees"; num_trees defaults to 0)
    gparam = _dict(model, "gbtree_model_param", "model")
    num_trees = _dmlc_int(gparam, "num_trees", "gbtree_model_param", default="0")
    if num_trees != len(trees):
        raise InvalidModelError(f"XGBoost model: gbtree_model_param.num_trees={num_trees} but "
                                f"the model has {len(trees)} trees (XGBoost refuses the file)")
    n_parallel = max(1, _dmlc_int(gparam, "num_parallel_tree", "gbtree_model_param", default="1"))
    trees = _trees_by_id(trees)
    indptr = model.get("iteration_indptr")
    if indptr is not None:
        # the trees of each iteration: XGBoost 3.2 checks indptr.back() == num_trees and
        # predicts the trees indptr[first layer] .. indptr[last layer] ("Check failed:
        # tree_begin <= tree_end" otherwise): an empty / decreasing / shifted indptr is refused
        indptr = _int_array(_json_ints(indptr, "iteration_indptr"), "iteration_indptr")
        if (indptr.size == 0 or indptr[0] != 0 or indptr[-1] != len(trees)
                or np.any(np.diff(indptr) < 0)):
            raise InvalidModelError("XGBoost model: iteration_indptr must rise from 0 to the "
                                    f"number of trees ({len(trees)})")

    lmp = _dict(learner, "learner_model_param", "learner")
    # learner.cc LearnerModelParamLegacy::FromJson: num_feature, num_class and base_score are
    # required strings, num_target an optional one
    n_features = _dmlc_int(lmp, "num_feature", "learner_model_param")
    num_class = _dmlc_int(lmp, "num_class", "learner_model_param")
    num_target = _dmlc_int(lmp, "num_target", "learner_model_param", default="1")
    if n_features < 1:
        raise InvalidModelError(f"XGBoost model: num_feature={n_features}")
    if num_class < 0 or num_target < 1:
        raise InvalidModelError("XGBoost model: invalid num_class / num_target")
    if num_class > 0 and num_target > 1:
        raise UnsupportedModelError("XGBoost models with both num_class and num_target > 1")
    K = num_class if num_class > 0 else num_target
    if K > _MAX_OUTPUTS:
        raise InvalidModelError(f"XGBoost model: implausible number of outputs {K}")

    objective = _get(_dict(learner, "objective", "learner"), "name", "learner.objective")
    if not isinstance(objective, str) or objective not in _OBJECTIVES:
        raise UnsupportedModelError(f"XGBoost objective {str(objective)[:60]!r} is not supported; supported: "
                                    + ", ".join(sorted(_OBJECTIVES)))
    link, transform, kind = _OBJECTIVES[objective]
    if kind in ("softprob", "softmax") and num_class < 1:
        raise InvalidModelError(f"XGBoost model: {objective} needs num_class >= 1")

    # base margins, float32, one per output
    bs = _base_scores(_get(lmp, "base_score", "learner_model_param"))
    if bs.size == 1 and K > 1:
        bs = np.repeat(bs, K)
    if bs.size != K:
        raise InvalidModelError(f"XGBoost model: base_score has {bs.size} values for {K} outputs")
    base = np.array([_link(link, b, objective) for b in bs], _F32)
    if not np.all(np.isfinite(base)):
        raise InvalidModelError(f"XGBoost model: base_score {bs.tolist()} gives a non-finite margin")

    # which trees predict: a wrapper honours best_iteration (early stopping)
    n_total = len(trees)
    n_used = n_total
    attrs = _dict(learner, "attributes", "learner")  # required: learner.at("attributes")
    # Learner::LoadModel reads every attribute with get<String> ("Invalid cast" otherwise)
    bad = [k for k, v in attrs.items() if not isinstance(v, str)]
    if bad:
        raise InvalidModelError(f"XGBoost model: learner.attributes.{bad[0]} must be a string")
    best = attrs.get("best_iteration")
    if mode.wrapper is not None and best is not None:
        layers = _int(best, "best_iteration") + 1
        if indptr is not None:
            if not 0 < layers < len(indptr):
                raise InvalidModelError(f"XGBoost model: best_iteration={layers - 1} but the model "
                                        f"has {len(indptr) - 1} iterations")
            n_used = int(indptr[layers])
        else:  # before 2.0: every iteration adds num_parallel_tree trees per output group
            n_used = layers * n_parallel * K
        if not 0 <= n_used <= n_total:
            raise InvalidModelError(f"XGBoost model: best_iteration={layers - 1} is beyond the "
                                    f"{n_total} trees")
    if np.any(tree_info[:n_used] < 0) or np.any(tree_info[:n_used] >= K):
        raise InvalidModelError(f"XGBoost model: tree_info out of range for {K} outputs")
    if weights is not None and len(weights) != n_total:
        raise InvalidModelError("XGBoost model: weight_drop must have one entry per tree")

    leaf_map = None
    if weights is not None:
        leaf_map = _dart_leaf_map(weights[:n_used], base, tree_info[:n_used], mode.wrapper is not None)
    ir_trees = _convert_trees(trees[:n_used], n_features, leaf_map) if n_used else []
    tree_output = tree_info[:n_used].astype(np.int32)
    vector = np.array([t.width > 1 for t in ir_trees], bool)
    if vector.any():
        # a vector-leaf tree adds its leaf to every output (tree_info, 0, is not read)
        bad = [t.width for t in ir_trees if t.width not in (1, K)]
        if bad or not vector.all():
            raise InvalidModelError(f"XGBoost model: vector-leaf trees of size_leaf_vector "
                                    f"{bad[0] if bad else 1} in a model of {K} outputs")
        if weights is not None:
            raise UnsupportedModelError("XGBoost DART with vector-leaf trees is not supported")
        tree_output[:] = 0
    if not ir_trees:  # no trees: adding -0.0 leaves every margin as it is
        ir_trees = [leaf_tree(-0.0)]
        tree_output = np.zeros(1, np.int32)

    decision, classes = _outputs(kind, K, objective, mode)
    names = learner.get("feature_names")
    if not (isinstance(names, list) and len(names) == n_features
            and all(isinstance(v, str) for v in names)):
        names = None  # absent (XGBoost writes []), or unusable
    version = doc.get("version")
    vtext = ".".join(str(v) for v in version) if isinstance(version, list) else "?"
    prov = (f"xgboost {vtext} {mode.source}: {name}, {objective}, {n_used} of {n_total} trees"
            + (f" (best_iteration={best})" if n_used != n_total else ""))
    cats, why = model_categories(model, n_features,
                                 tuple(version) if isinstance(version, list) else ())
    if why:
        prov += f"; DataFrame categories not usable: {why}"
    return Forest(trees=tuple(ir_trees), n_features=n_features, n_outputs=K,
                  tree_output=tree_output, base_score=base.astype(np.float64),
                  input_dtype="float32", comparison="<", accumulate_dtype="float32",
                  average=False, transform=transform, decision=decision, classes=classes,
                  feature_names=names, allow_nan=True, provenance=prov, input_rule="xgboost",
                  leaf_layout="xgboost",  # pred_leaf: float32, (n,) for a one-tree model
                  pandas_categories="reject" if cats is None else
                  "xgboost" if mode.wrapper is None else "xgboost_inplace",
                  category_values=cats or (),
                  # XGBClassifier(objective="multi:softmax").predict_proba: scipy's softmax
                  exp_lib="numpy" if mode.wrapper == "classifier" and kind == "softmax" else "libm")


#: XGBoost's category index types (CatContainer::Save: the typed array's ValueKind, 3.1-3.2;
#: the same numbers as 3.3's CatIndexType); 7 / 8 (float32 / float64) are never trained on
_CAT_TYPES = {9: "int8", 10: "uint8", 11: "int16", 12: "uint16", 13: "int32", 14: "uint32",
              15: "int64", 16: "uint64"}


def model_categories(model: dict, n_features: int, version: tuple = ()) -> tuple[tuple | None, str]:
    """The categories an XGBoost >= 3.1 model trained on a DataFrame keeps
    (``gradient_booster.model.cats``, src/data/cat_container.cc): ``enc`` has one entry per
    feature, ``{"offsets": int32[], "values": int8[]}`` (UTF-8 names, Arrow-style) for string
    categories, ``{"type": ValueKind, "values": typed[]}`` for integer ones, empty for numeric
    features. Returns (Forest.category_values, None) or (None, why) where the model keeps none
    treecomp can use (older releases, arrays, a malformed or unreadable list): then frames with
    category columns are refused, not guessed."""
    cats = model.get("cats")
    enc = cats.get("enc") if isinstance(cats, dict) else None
    if not isinstance(enc, list) or not enc:
        return None, ""
    if len(enc) != n_features:
        return None, f"cats.enc has {len(enc)} entries for {n_features} features"
    out = []
    for j, e in enumerate(enc):
        if not isinstance(e, dict):
            return None, f"cats.enc[{j}] is not an object"
        try:
            if "offsets" in e:
                off = np.asarray(e["offsets"], np.int64).reshape(-1)
                raw = np.asarray(e["values"], np.int64).reshape(-1)
                if off.size == 0:
                    continue  # a numeric feature
                if off[0] != 0 or np.any(np.diff(off) < 0) or off[-1] > raw.size \
                        or np.any((raw < -128) | (raw > 255)):
                    return None, f"cats.enc[{j}]: malformed string offsets"
                # XGBoost 3.2 writes non-ASCII names cut short (character counts used as byte
                # offsets, dmlc/xgboost#12371): not valid UTF-8, or not the name
                if (raw < 0).any() and version < (3, 3):
                    return None, (f"feature {j}'s category names are not ASCII, which XGBoost "
                                  "< 3.3 stores cut short")
                data = bytes((raw & 0xFF).astype(np.uint8))
                names = [data[a:b].decode("utf-8") for a, b in zip(off[:-1], off[1:])]
                out.append((j, "str", tuple(names)))
            else:
                kind = _CAT_TYPES.get(e.get("type")) if type(e.get("type")) is int else None
                vals = np.asarray(e.get("values", []))
                if vals.size == 0:
                    continue
                if kind is None or vals.dtype.kind not in "iu":
                    return None, f"cats.enc[{j}]: category index type {e.get('type')!r}"
                out.append((j, kind, tuple(int(v) for v in vals.reshape(-1).tolist())))
        except (TypeError, ValueError, UnicodeDecodeError, OverflowError) as exc:
            return None, f"cats.enc[{j}]: {type(exc).__name__}"
    if not out:
        return None, ""
    try:
        return checked_category_values(out, n_features), ""
    except InvalidModelError as exc:
        return None, str(exc)


def _trees_by_id(trees: list) -> list:
    """The trees in the order XGBoost 3.2 keeps them: GBTreeModel::LoadModel puts
    trees[j] at slot trees[j]["id"] (get<Integer>; `trees.at(id)`) and then reads tree_info
    (and DART's weight_drop) by slot. So a permutation of ids reorders the trees (the float32
    sum order, and the output group each tree adds to); duplicate ids leave a slot empty
    (XGBoost dereferences a null tree), out-of-range ids throw, non-integer ids are an
    "Invalid cast": all refused. (XGBoost 3.3 added CHECK_EQ(id, j) and refuses any
    permutation; a file with ids in array order, as every XGBoost writes, reads the same.)"""
    slots: list = [None] * len(trees)
    for j, t in enumerate(trees):
        if not isinstance(t, dict):
            raise InvalidModelError(f"XGBoost model: tree {j} is not an object")
        if "id" not in t:
            raise InvalidModelError(f"XGBoost model: tree {j} has no id")
        tid = t["id"]
        if type(tid) is not int:
            raise InvalidModelError(f"XGBoost model: tree {j}: id {str(tid)[:20]!r} is not an "
                                    "integer (XGBoost: Invalid cast)")
        if not 0 <= tid < len(trees):
            raise InvalidModelError(f"XGBoost model: tree {j}: id {tid} is out of range for "
                                    f"{len(trees)} trees")
        if slots[tid] is not None:
            raise InvalidModelError(f"XGBoost model: two trees have id {tid}")
        slots[tid] = t
    return slots


def _dart_leaf_map(weights: np.ndarray, base: np.ndarray, groups: np.ndarray, inplace: bool):
    """The exact float32 amount each DART leaf adds (see the module docstring)."""
    w = weights.astype(_F32)
    if not np.all(np.isfinite(w)):
        raise InvalidModelError("XGBoost model: non-finite DART weight")
    b = base[groups].astype(_F32)
    if not inplace:  # the tree's own prediction starts from a zero-filled buffer: 0 + leaf
        return lambda v, tree: (_F32(0) + v) * w[tree]
    return lambda v, tree: ((b[tree] + v) - b[tree]) * w[tree]


def _outputs(kind: str, K: int, objective: str, mode: _Mode):
    """decision and classes for the objective and the way the model is used."""
    if mode.wrapper != "classifier":
        if kind == "hinge":
            if K != 1:
                raise UnsupportedModelError("XGBoost binary:hinge with several targets is not supported")
            return "raw_gt_0", (np.array([0.0, 1.0], _F32),)
        if kind == "softmax":
            return "argmax_raw", (np.arange(K).astype(_F32),)
        return "none", ()
    # XGBClassifier.predict (xgboost/sklearn.py): binary "probability > 0.5", multiclass argmax
    # of the probabilities, multi:softmax the class index cast to int32; labels arange(K)
    # one output: every objective that predicts values (binary:logistic, and also reg:logistic,
    # binary:logitraw, reg:squarederror, count:poisson, ...: XGBClassifier fits any of them on
    # labels 0 / 1) gives labels (p > 0.5) and predict_proba [1 - p, p] of its transformed value
    # p (_cls_predict_proba: float32). binary:hinge's p is its 0 / 1 step, a transform treecomp
    # lacks: refused below.
    if kind == "values" and K == 1:
        return "proba_gt_half", (_labels(mode, 2, np.int64),)
    if kind == "values" and objective == "binary:logistic":
        # multi-label (several targets): float64 0. / 1. where a target's probability > 0.5,
        # predict_proba the (n, targets) probabilities
        return "proba_gt_half_each", (np.array([0.0, 1.0]),) * K
    if kind == "softprob" and K > 2:
        return "argmax_proba", (_labels(mode, K, np.int64),)
    if kind == "softmax" and K > 2:
        return "argmax_raw", (_labels(mode, K, np.int32),)
    raise UnsupportedModelError(
        f"XGBClassifier with objective {objective!r} and {K} output(s) is not supported "
        "(supported: one output of an objective that predicts values, such as binary:logistic, "
        "reg:logistic or binary:logitraw; multi:softprob; multi:softmax with >= 3 classes); "
        "parse its Booster (get_booster()) to reproduce Booster.predict instead")


def _labels(mode: _Mode, n: int, dtype: Any) -> np.ndarray:
    if mode.classes is not None:
        c = np.asarray(mode.classes)
        if c.shape != (n,) or not np.array_equal(c, np.arange(n)):
            raise UnsupportedModelError(f"XGBClassifier.classes_ {c.tolist()[:10]} is not 0..{n - 1}")
    return np.arange(n, dtype=dtype)


# -- entry points ------------------------------------------------------------------------------
def _booster_document(booster: Any) -> dict:
    # UBJSON rather than JSON: several times faster to write and to read (typed arrays)
    try:
        raw = booster.save_raw("ubj")
    except Exception as exc:  # noqa: BLE001 - xgboost raises its own XGBoostError
        raise InvalidModelError(f"cannot serialise the XGBoost Booster: {exc}") from None
    return ubjson.decode(bytes(raw), strict=True)


#: the per-node arrays of a tree that jsonarrays.loads reads with numpy (the bulk of the file)
JSON_ARRAY_KEYS = ("parents", "left_children", "right_children", "split_indices",
                   "split_conditions", "default_left", "loss_changes", "sum_hessian",
                   "base_weights", "split_type", "leaf_weights")


#: the keys whose arrays XGBoost reads as floats (float32; _UNTYPED)
JSON_FLOAT_KEYS = tuple(k for k, v in _UNTYPED.items() if v == (float,))


def _loads_json(data: bytes, what: str) -> Any:
    try:
        # XGBoost's JSON numbers are float32 (json.h: Number holds a float), and every float
        # array is read as float32 below: kept so, and integers as int32 where they fit
        return jsonarrays.loads(data, JSON_ARRAY_KEYS, float32_keys=JSON_FLOAT_KEYS, int32=True)
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise InvalidModelError(f"{what} is not valid JSON: {exc}") from None


def parse_booster(booster: Any) -> Forest:
    """An ``xgboost.Booster``: reproduces ``Booster.predict`` (all trees)."""
    return forest_from_document(_booster_document(booster), _Mode(source="Booster"))


def parse_sklearn(model: Any) -> Forest:
    """XGBRegressor / XGBClassifier / XGBRanker / XGBRF*: reproduces the wrapper's predict."""
    cls = type(model).__name__
    try:
        booster = model.get_booster()
    except Exception as exc:  # noqa: BLE001 - sklearn's NotFittedError, or xgboost's error
        if type(exc).__name__ == "NotFittedError":
            raise NotFittedError(f"{cls} is not fitted: {exc}") from None
        raise InvalidModelError(f"cannot get the Booster of {cls}: {exc}") from None
    if callable(getattr(model, "objective", None)):
        raise UnsupportedModelError(f"{cls} with a custom (callable) objective is not supported")
    missing = getattr(model, "missing", np.nan)
    if missing is not None and not (isinstance(missing, float) and math.isnan(missing)):
        raise UnsupportedModelError(f"{cls}(missing={missing!r}) is not supported; treecomp treats "
                                    "only NaN as missing (XGBoost's default)")
    if getattr(model, "booster", None) == "gblinear":
        raise UnsupportedModelError("XGBoost gblinear (linear booster) models are not supported")
    is_classifier = getattr(model, "_estimator_type", None) == "classifier" or any(
        c.__name__ == "ClassifierMixin" for c in type(model).__mro__)
    doc = _booster_document(booster)
    if is_classifier:
        mode = _Mode(wrapper="classifier", classes=getattr(model, "classes_", None), source=cls)
    else:
        mode = _Mode(wrapper="regressor", source=cls)
    return forest_from_document(doc, mode)


def _file_mode(doc: Any, name: str) -> _Mode:
    """Files saved by a sklearn wrapper carry attributes.scikit_learn: use the wrapper's rules."""
    attrs = _learner(doc).get("attributes")
    meta = attrs.get("scikit_learn") if isinstance(attrs, dict) else None
    if meta is None:
        return _Mode(source=f"file {name}")
    try:
        info = json.loads(meta) if isinstance(meta, str) else None
    except ValueError:
        info = None
    info = info if isinstance(info, dict) else {}
    etype = info.get("_estimator_type")
    if etype is None:
        etype = _infer_estimator_type(info, doc)
    wrapper = "classifier" if etype == "classifier" else "regressor"
    return _Mode(wrapper=wrapper, source=f"file {name} (saved by the sklearn wrapper: {etype})")


#: objectives XGBClassifier trains with, whose files XGBClassifier().load_model() predicts labels of
_CLASSIFIER_OBJECTIVES = ("binary:logistic", "multi:softprob", "multi:softmax")


def _infer_estimator_type(info: dict, doc: Any) -> str:
    """Wrapper files from XGBoost 1.0-1.3 carry no `_estimator_type` (1.4 added it): their
    scikit_learn attribute has the wrapper's __dict__ and "type" (the class name). The class
    name decides when it is one of xgboost's; otherwise a classification objective means
    XGBClassifier, which is what that file was loaded with to predict labels."""
    cls = info.get("type")
    if isinstance(cls, str) and cls.startswith("XGB"):
        if cls.endswith("Classifier"):
            return "classifier"
        if cls.endswith(("Regressor", "Ranker")) or cls == "XGBModel":
            return "regressor"
    obj = _learner(doc).get("objective")
    name = obj.get("name") if isinstance(obj, dict) else None
    return "classifier" if name in _CLASSIFIER_OBJECTIVES else "regressor"


def legacy_binary_objective(data: bytes) -> str | None:
    """The objective name when `data` is an XGBoost model in the legacy binary format
    (written before 1.0, and by 1.x for names other than .json / .ubj), else None.

    That format starts with a 136-byte LearnerModelParam, then the objective name as a
    uint64 length + bytes ("binary:logistic"); some writers prefix "binf", "bs64" is its
    base64 form."""
    if data[:4] == b"bs64":
        return "?"
    off = 4 if data[:4] == b"binf" else 0
    if len(data) < off + 144:
        return None
    n = int.from_bytes(data[off + 136:off + 144], "little")
    name = data[off + 144:off + 144 + n] if 1 <= n <= 64 else b""
    if re.fullmatch(rb"[a-z_]+:[a-z_]+", name):
        return name.decode()
    return None


def legacy_binary_error(name: str, objective: str) -> UnsupportedModelError:
    return UnsupportedModelError(
        f"{name} is in the legacy XGBoost binary format (pre-1.0; objective {objective}), which "
        "treecomp does not read (XGBoost >= 2.1 cannot load it either); convert it with "
        "xgboost < 2.1: xgboost.Booster(model_file='m.model').save_model('m.json'), then parse "
        "m.json")


def load_document(path: str | os.PathLike) -> Any:
    """The model document of an XGBoost model file (no xgboost needed), read as XGBoost's
    Booster.load_model reads it: .json is JSON, .ubj is UBJSON, and any other name is told by
    its content ('{"' starts JSON, another '{' UBJSON: XGBoost 3.x writes UBJSON for .model /
    .bin / .deprecated names). Legacy binary files get an error saying how to convert them."""
    p = Path(path)
    data = p.read_bytes()
    suffix = p.suffix.lower()
    objective = legacy_binary_objective(data)
    if objective is not None:
        raise legacy_binary_error(p.name, objective)
    if suffix == ".ubj":
        return ubjson.decode(data, strict=True)
    if suffix == ".json":
        return _loads_json(data, p.name)
    head = data.lstrip(b" \t\r\n")
    if head[:1] == b"{" and head[1:].lstrip(b" \t\r\n")[:1] in (b'"', b"}"):
        return _loads_json(data, p.name)
    if data[:1] == b"{":
        return ubjson.decode(data, strict=True)
    raise InvalidModelError(f"{p.name} is not an XGBoost model file (neither JSON nor UBJSON)")


def parse_xgboost_file(path: str | os.PathLike) -> Forest:
    """An XGBoost model file (.json / .ubj, as written by ``save_model``)."""
    doc = load_document(path)
    if isinstance(doc, dict) and not isinstance(doc.get("learner"), dict):
        raise not_xgboost_error(Path(path).name, doc)
    return forest_from_document(doc, _file_mode(doc, Path(path).name))


def not_xgboost_error(name: str, doc: dict) -> TreecompError:
    """The error for a JSON object that is no XGBoost model: what it is when that is known
    (LightGBM's Booster.dump_model(), which treecomp cannot read), else its keys."""
    if doc.get("name") == "tree" and "tree_info" in doc:
        return UnsupportedModelError(
            f"{name} is a LightGBM model dump (Booster.dump_model() written as JSON), which "
            "neither LightGBM nor treecomp loads as a model: save the model as a LightGBM text "
            "model (booster.save_model('model.txt'); for LGBMClassifier / LGBMRegressor, "
            "model.booster_.save_model('model.txt')) and pass that file, or the Booster itself")
    keys = ", ".join(repr(str(k)[:30]) for k in list(doc)[:6])
    return InvalidModelError(
        f"{name} is JSON but not an XGBoost model document (no 'learner' object; its keys: "
        f"{keys or 'none'}); treecomp reads XGBoost's save_model JSON / UBJSON, CatBoost's JSON "
        "export, LightGBM text models, ONNX and pickled models (treecomp.supported_models())")


PARSERS = {
    "Booster": parse_booster,
    "XGBModel": parse_sklearn,
}
