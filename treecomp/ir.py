"""The tree IR: a forest as plain, validated, serialisable numpy data.

Every frontend produces a :class:`Forest`; every pass maps a Forest to a Forest; every backend
consumes one. What a Forest *means* is defined by :mod:`treecomp.interp`; in short::

    x   = row cast to forest.input_dtype                      (float32 or float64)
          (as the library casts it: forest.input_rule; columns in forest.category_hashes first
           become category codes: the index of the value's CatBoost hash among the column's
           hashes, else their count; DataFrame category columns (and for sklearn, object values)
           become codes by forest.category_values as forest.pandas_categories says:
           treecomp.categories)
    for each tree, from node 0 until a leaf (left == -1):
        numeric node:      go left iff  float64(x[f]) <cmp> threshold      (cmp: "<" or "<=")
        categorical node:  valid per forest.category_rule (default: 0 <= x < 32 * n_words); then
                           go left iff bit trunc(x) of cat_bits[cat_index] is set;
                           invalid -> cat_other_left
        NaN (either kind): go left iff default_left
    acc = base margins (in accumulate_dtype); acc[o : o + w] += leaf value, tree by tree, in order
          (base margins = base_score, or with base_link set its link of base_score, evaluated
           by outputs.base_margins in the predicting process: sklearn's GB classifiers)
    (linear leaf, Tree.leaf_const set: the tree adds instead leaf_const[leaf] + the leaf's
     coefficients times its features' values, in order, in float64; a value with
     |x| <= LINEAR_ZERO counts as 0.0; a NaN in any of them -> the leaf's plain value)
    if average: acc /= n_trees
    raw margins (decision_function, contributions) = acc
    outputs = transform(acc / output_divisor) with exp_lib's exp; labels by `decision`
              (see treecomp.outputs; output_divisor is 1 but for LightGBM's random-forest
              mode, whose predict alone divides by the number of iterations)
              (transforms "samme" / "iforest" take transform_params: AdaBoost's weight sum,
              IsolationForest's denominator and offset)

Design notes:
- A tree is struct-of-arrays with the root at 0 and every child index larger than its parent.
  That ordering makes validation O(n) and vectorised (no recursion, no cycles possible), and lets
  backends walk nodes in index order. Frontends renumber when their source does not comply.
- Thresholds are stored as float64 exactly as the source library holds them; the comparison
  precision is a forest attribute, and lowering to float32 is a pass (:mod:`treecomp.passes`).
- Leaf values are float64 holding exactly what the library adds (scales such as sklearn's
  learning rate are folded in by the frontend only when the product is the one the library
  computes).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import io
import json
import math
import struct
import tokenize
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from . import numparse
from .errors import InvalidModelError, UnsupportedModelError

IR_FORMAT_VERSION = 1

COMPARISONS = ("<", "<=")
DTYPES = ("float32", "float64")
#: Output transforms (the libraries' inverse links). Their exact arithmetic is in outputs.py.
#: "exp64" is exp taken in float64 and rounded once to the accumulation dtype (XGBoost's
#: survival:aft on float32 margins); for float64 margins it is "exp". "softmax" sums a row as
#: numpy sums a C-ordered array (pairwise from 8 classes); "softmax_seq" left to right, except
#: with exp_lib "numpy" (sklearn HGB), as numpy sums a Fortran-ordered array (one row pairwise).
#: "samme" (AdaBoostClassifier) and "iforest" (IsolationForest) take Forest.transform_params.
#: "weighted_median" (AdaBoostRegressor): each tree writes its own output (the estimators'
#: predictions), the transform takes their weighted median, one value per row.
#: "logistic_ort" / "softmax_ort" / "softmax_zero_ort": ONNX Runtime's post_transform LOGISTIC /
#: SOFTMAX / SOFTMAX_ZERO (float32 formulas of its ml_common.h, libm's expf).
TRANSFORMS = ("identity", "sigmoid", "sigmoid2", "softmax", "softmax_seq", "exp", "exp64",
              "samme", "iforest", "logistic_ort", "softmax_ort", "softmax_zero_ort",
              "weighted_median")
#: how many Forest.transform_params each transform takes (others: none); meaning in outputs.py
#:   samme    (weight_sum,)          AdaBoostClassifier: estimator_weights_.sum()
#:   iforest  (n_estimators, max_samples, offset)  IsolationForest: score_samples divides by
#:            n_estimators * c(max_samples), which sklearn evaluates at predict time with
#:            np.log (host-dependent), so outputs.iforest_denominator does too;
#:            (denominator, offset): that product as evaluated by the parse (older files)
#:   weighted_median  (w_0, ..., w_{n_outputs - 1})  AdaBoostRegressor: estimator_weights_, one
#:            per output (an output is an estimator's prediction)
TRANSFORM_PARAMS = {"samme": (1,), "iforest": (2, 3)}
#: Which float64 exp the transform calls, as the library does (float32 transforms always follow
#: XGBoost's libm expf / exp formulas). Not the same function on every host: numpy 2.x runs its
#: own AVX-512 exp on AVX-512 CPUs, which differs from glibc's in the last bit for ~5% of inputs.
#:   libm   the C library's exp     LightGBM, scipy.special.expit (sklearn's sigmoid)
#:   numpy  numpy's np.exp          sklearn's softmax and log link (np.exp in the user's process)
#:   fmath  herumi fmath's expd_v   CatBoost's softmax and Exponent on x86-64 (outputs.fmath_exp)
EXP_LIBS = ("libm", "numpy", "fmath")
#: How the initial margins follow from Forest.base_score (outputs.base_margins). Not "identity":
#: base_score holds the probabilities the library's link maps to margins at PREDICT time, with
#: numpy's np.log / np.exp in the predicting process (host-dependent: numpy's AVX-512 log), so
#: treecomp evaluates them where the predictor is loaded, not where the model was parsed.
#:   identity           base_score is the margins                      (every other model)
#:   logit              log(p / (1 - p)) as scipy.special.logit (libm)  sklearn GB log_loss, binary
#:   half_logit         0.5 * logit(p)                                  sklearn GB exponential loss
#:   multinomial_logit  log(p / gmean(p)), np.log / np.exp             sklearn GB log_loss, K > 2
BASE_LINKS = ("identity", "logit", "half_logit", "multinomial_logit")
#: Which non-NaN values are valid category ids at a categorical split (others go cat_other_left);
#: a valid value's category is trunc(x).
#:   nonneg    0 <= x < 32 * n_words                       XGBoost (negative is invalid)
#:   trunc     -1 < x < 32 * n_words (C's (int)x cast)      LightGBM: -0.5 is category 0
#:   integral  0 <= x < 32 * n_words and x == trunc(x)      sklearn HistGradientBoosting
CATEGORY_RULES = ("nonneg", "trunc", "integral")
#: How a user's numbers become input_dtype values, as each library converts them (the rules
#: themselves are in treecomp.frames and treecomp.inputs):
#:   cast              every value straight to input_dtype (numpy's conversion; lists by
#:                     np.asarray(rows, dtype), big-endian and long double arrays through
#:                     float64, as catboost reads them)   CatBoost, ONNX, files of earlier treecomp
#:   sklearn           check_array: np.asarray(X, dtype=input_dtype), lists and frames too
#:                     (bool and nullable frame columns first by DataFrame.astype)   scikit-learn
#:   xgboost           object / float16 / bool arrays by numpy's astype(float32), other arrays
#:                     value by value; big-endian arrays refused (XGBoost 3.2 reads their bytes
#:                     as little-endian); frames column by column       XGBoost (both entry points)
#:   lightgbm          float32 / float64 arrays as they are, any other array first to float32
#:                     (int64 above 2**24 rounds: _np2d_to_np1d)        lightgbm.Booster, files
#:   lightgbm_sklearn  the sklearn wrappers: check_array(dtype="numeric") first (object arrays
#:                     to float64, strings refused), then as lightgbm   LGBMRegressor & co.
INPUT_RULES = ("cast", "sklearn", "xgboost", "lightgbm", "lightgbm_sklearn")
#: The shape of predict's labels for a one-output classifier (decision "argmax_raw" or
#: "argmax_proba" over one set of classes):
#:   rows    (n,)                                                  every library but:
#:   column  (n, 1)                                                CatBoost MultiClass predict
LABEL_SHAPES = ("rows", "column")
#: What a pandas 'category' column means at predict time (treecomp.categories.recode):
#:   reject           refused: the model records no categories, so what a code means cannot be
#:                    checked (the library would read the frame's codes as they are)
#:   values           the category values are the numbers the model compares (files of earlier
#:                    treecomp for sklearn HistGradientBoosting)
#:   sklearn          HistGradientBoosting's OrdinalEncoder: Forest.category_values lists each
#:                    categorical column; kind "obj" columns become the index of their value
#:                    (Python equality), kind "num" columns keep numbers (the splits compare
#:                    the values); an unknown value is NaN; frames, object arrays and lists
#:   xgboost          XGBoost >= 3.1's re-coder (Booster.predict on a DMatrix): a frame's category
#:                    columns become the index of their category among the model's; a frame
#:                    without category columns is read as numbers (codes)
#:   xgboost_inplace  the same as the sklearn wrappers' inplace_predict runs it: a frame must
#:                    have category columns exactly where the model has categorical features
#:   lightgbm         LightGBM's pandas_categorical: the frame's category columns, in order, are
#:                    set to the model's lists (set_categories) and read as codes, NaN unknown
PANDAS_CATEGORIES = ("reject", "values", "sklearn", "xgboost", "xgboost_inplace", "lightgbm")
#: the kinds of Forest.category_values entries: "obj" (sklearn: values compared with Python
#: equality), "num" (sklearn: numeric categories), "json" (LightGBM: the JSON scalars of
#: pandas_categorical), "str" and numpy integer dtype names (XGBoost's category index type)
CATEGORY_KINDS = ("obj", "num", "json", "str", "int8", "uint8", "int16", "uint16", "int32",
                  "uint32", "int64", "uint64")
#: at most this many category values in a Forest's category_values, all columns together
MAX_CATEGORY_VALUES = 1 << 24
#: How predicted labels are derived for classifiers ("none" for regressors).
#:   argmax_raw    classes[argmax(raw)]               sklearn GB multiclass, random forests
#:   argmax_proba  classes[argmax(transform(raw))]    XGBoost sklearn wrapper, multi:softprob
#:   raw_ge_0      classes[raw >= 0]  (binary)        sklearn GradientBoostingClassifier
#:   raw_gt_0      classes[raw > 0]   (binary)        sklearn HistGradientBoostingClassifier
#:   raw_gt_0_each classes[j][raw[:, j] > 0] per output   CatBoost MultiLogloss / MultiCrossEntropy
#:   proba_gt_half_each classes[j][transform(raw)[:, j] > 0.5]   XGBoost sklearn wrapper, multi-label
#:                 (the two multi-label decisions: one margin and two labels per output; labels
#:                 and predict_proba are (n, n_outputs))
#:   proba_gt_half classes[transform(raw) > 0.5]      XGBoost sklearn wrapper, binary (and
#:                 ONNX two-class ensembles of positive scores: identity); predict_proba
#:                 [1 - p, p] of p = transform(raw)
#:   samme         from AdaBoost's decision_function  (transform "samme"; see outputs.py)
#:   outlier       -1 where decision_function < 0, else 1; no classes (transform "iforest")
DECISIONS = ("none", "argmax_raw", "argmax_proba", "raw_ge_0", "raw_gt_0", "proba_gt_half",
             "samme", "outlier", "raw_gt_0_each", "proba_gt_half_each")
#: How Predictor.apply shapes the leaf ids, as the source library's apply / pred_leaf does
#: (outputs.leaf_ids; K = n_outputs):
#:   trees           (n, n_trees) int64      sklearn forests; models whose library has no apply
#:                                           (IsolationForest, AdaBoost, HistGradientBoosting:
#:                                           each estimator's own node ids); IR files without one
#:   tree            (n,) int64              sklearn DecisionTree* / ExtraTree* (one tree)
#:   stages          (n, n_trees) float64    sklearn GradientBoostingRegressor
#:   stages_classes  (n, n_trees / K, K) float64   sklearn GradientBoostingClassifier (K = 1
#:                                           for two classes)
#:   xgboost         (n, n_trees) float32, (n,) for a one-tree model   pred_leaf=True / apply
#:   lightgbm        (n, n_trees) int32      pred_leaf=True
#: sklearn's GradientBoosting apply validates rows as its trees do, accepting NaN (routed by
#: missing_go_to_left) where its predict refuses it: outputs.apply_allows_nan.
LEAF_LAYOUTS = ("trees", "tree", "stages", "stages_classes", "xgboost", "lightgbm")
#: the largest Forest.output_divisor (LightGBM's iteration count is an int)
MAX_OUTPUT_DIVISOR = (1 << 31) - 1
MULTILABEL_DECISIONS = ("raw_gt_0_each", "proba_gt_half_each")
_BINARY_DECISIONS = ("raw_ge_0", "raw_gt_0", "proba_gt_half")


def _classes_fit(decision: str, widths: list[int], n_outputs: int) -> bool:
    """Whether a classifier's label sets fit its margins: one margin for two labels (binary),
    one margin per label of each set, or (multi-label) one margin per two-label set."""
    if decision in MULTILABEL_DECISIONS:
        return len(widths) == n_outputs and all(w == 2 for w in widths)
    binary_margin = n_outputs == 1 and widths == [2]
    if decision in _BINARY_DECISIONS:
        return binary_margin
    return binary_margin or sum(widths) == n_outputs

_TREE_ARRAYS = ("left", "right", "feature", "threshold", "default_left", "value",
                "cat_index", "cat_bits", "cat_other_left")
#: optional per-tree linear leaves (LightGBM linear_tree): all four arrays or none
_LINEAR_ARRAYS = ("leaf_const", "linear_ptr", "linear_feature", "linear_coeff")
#: a linear leaf reads |x| <= LINEAR_ZERO as 0.0: LightGBM's kZeroThreshold (1e-35f), below
#: which its C API drops a value as a sparse zero before any tree sees the row
LINEAR_ZERO = float(np.float32(1e-35))
_TREE_DTYPES = {"left": np.int32, "right": np.int32, "feature": np.int32,
                "threshold": np.float64, "default_left": np.bool_, "value": np.float64,
                "cat_index": np.int32, "cat_bits": np.uint32, "cat_other_left": np.bool_,
                "leaf_const": np.float64, "linear_ptr": np.int32, "linear_feature": np.int32,
                "linear_coeff": np.float64}


@functools.lru_cache(maxsize=None)
def _int_bounds(dt: np.dtype) -> tuple[int, int]:
    return (0, 1) if dt.kind == "b" else (int(np.iinfo(dt).min), int(np.iinfo(dt).max))


def _frozen(a: Any, dtype: Any, ndim: int, name: str) -> np.ndarray:
    dt = np.dtype(dtype)
    try:
        src = np.asarray(a)
        if src.dtype.kind not in "biuf" and not (src.dtype.kind == "O" and src.size == 0):
            # strings would be parsed, objects converted one by one: a corrupt file or a
            # frontend bug, never a model's numbers
            raise TypeError(f"it holds {src.dtype} values")
        if dt.kind in "biu" and src.dtype.kind != "b" and src.size \
                and not np.can_cast(src.dtype, dt, "safe"):
            # numpy casts wrap integers and truncate floats silently: node 2^32 + 1 must not
            # become node 1, nor 2.5 node 2 (a safe cast, int32 -> int32, keeps every value)
            if src.dtype.kind == "f" and not (np.isfinite(src) & (src == np.trunc(src))).all():
                raise ValueError("it holds non-integral values")
            lo, hi = _int_bounds(dt)
            vmin, vmax = src.min().item(), src.max().item()  # exact Python comparisons
            if vmin < lo or vmax > hi:
                raise ValueError(f"its values [{vmin}, {vmax}] are outside [{lo}, {hi}]")
        arr = np.array(src, dtype=dt, order="C", copy=True)
    except (TypeError, ValueError, OverflowError) as exc:
        raise InvalidModelError(f"tree array {name!r} cannot be converted to {dt}: {exc}") from None
    if arr.ndim != ndim:
        raise InvalidModelError(f"tree array {name!r} must be {ndim}-D, got shape {arr.shape}")
    arr.flags.writeable = False
    return arr


# -- reading IR files (untrusted bytes: bounded, every failure an InvalidModelError) ------------
#: an IR file's members may unpack to at most this much more than the file's own size: its
#: arrays (thresholds, leaf values, child indices) deflate by a few times, not by hundreds, so a
#: bigger claim is a zip bomb or a corrupt directory, refused before anything is inflated
IR_MAX_EXPANSION = 64
IR_MIN_BUDGET = 1 << 24
#: what a corrupt archive, member or npy header can raise while being read
_READ_ERRORS = (zipfile.BadZipFile, zlib.error, KeyError, ValueError, TypeError, OSError, EOFError,
                struct.error, NotImplementedError, OverflowError, RecursionError, SyntaxError,
                tokenize.TokenError)


def _corrupt_ir(msg: str) -> InvalidModelError:
    return InvalidModelError(f"corrupt treecomp IR file: {msg}")


def _ir_members(data: bytes) -> dict[str, bytes]:
    """Every member of the archive, inflated within a budget checked against the sizes the
    directory claims (a member never yields more than it claims: zipfile stops there and
    checks the CRC)."""
    budget = IR_MIN_BUDGET + IR_MAX_EXPANSION * len(data)
    # the end-of-directory record (and its comment) ends the file: zipfile would ignore bytes
    # appended after it, a file that is not the one written
    end = data.rfind(b"PK\x05\x06")
    if end < 0 or len(data) < end + 22 or end + 22 + struct.unpack_from("<H", data, end + 20)[0] != len(data):
        raise _corrupt_ir("not a zip archive, or bytes after its end")
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        infos = z.infolist()
        names = [i.filename for i in infos]
        if len(set(names)) != len(names):
            raise _corrupt_ir("duplicate members")
        claimed = sum(i.file_size for i in infos)
        if claimed > budget:
            raise _corrupt_ir(f"its members claim {claimed} bytes unpacked from {len(data)} "
                              f"(more than {IR_MAX_EXPANSION}x: a zip bomb?)")
        out = {}
        for i in infos:
            if i.flag_bits & 1 or i.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
                raise _corrupt_ir(f"member {i.filename!r} is encrypted or uses an unknown compression")
            with z.open(i) as f:
                b = f.read(i.file_size + 1)  # reading past the end checks the CRC
            if len(b) != i.file_size:
                raise _corrupt_ir(f"member {i.filename!r} is truncated")
            out[i.filename] = b
    return out


def _read_npy(b: bytes, name: str) -> np.ndarray:
    """An array from .npy bytes (np.save's format 1.0 or 2.0): a plain numeric dtype and exactly
    as many data bytes as the shape needs (np.load would allocate whatever the header claims)."""
    f = io.BytesIO(b)
    version = np.lib.format.read_magic(f)
    if version == (1, 0):
        shape, fortran, dt = np.lib.format.read_array_header_1_0(f)
    elif version == (2, 0):
        shape, fortran, dt = np.lib.format.read_array_header_2_0(f)
    else:
        raise _corrupt_ir(f"{name}: npy format {version} is not supported")
    if dt.kind not in "biuf" or dt.fields is not None or dt.subdtype is not None:
        raise _corrupt_ir(f"{name}: arrays of {dt} are not tree data")
    if any(d < 0 for d in shape):
        raise _corrupt_ir(f"{name}: negative shape {shape}")
    count = 1
    for d in shape:
        count *= d
    if len(b) - f.tell() != count * dt.itemsize:
        raise _corrupt_ir(f"{name}: shape {shape} needs {count * dt.itemsize} bytes of data, "
                          f"the member has {len(b) - f.tell()}")
    return np.frombuffer(b, dt, count, f.tell()).reshape(shape, order="F" if fortran else "C")


def _checked_labels(d: Any) -> np.ndarray:
    """Class labels from JSON (_labels_to_json): a flat list of one plain dtype."""
    if not isinstance(d, dict) or not isinstance(d.get("values"), list) or not isinstance(d.get("dtype"), str):
        raise TypeError("class labels must be {'dtype': str, 'values': list}")
    if d["dtype"] != "str" and np.dtype(d["dtype"]).kind not in "iufbU":
        raise TypeError(f"class labels of dtype {d['dtype']!r}")
    if d["dtype"] == "str" and not all(isinstance(v, str) for v in d["values"]):
        raise TypeError("class labels of dtype 'str' must be strings")
    c = _labels_from_json(d)
    if c.ndim != 1 or not len(c):
        raise ValueError(f"class labels must be a non-empty list, got shape {c.shape}")
    return c


#: the IR file's optional header fields and their JSON types (checked where present)
_OPTIONAL_META: dict[str, type] = {
    "exp_lib": str, "reject_inf": list, "transform_params": list, "base_link": str,
    "category_hashes": list, "output_divisor": int, "leaf_layout": str, "input_rule": str,
    "category_values": list, "label_shape": str}


def _typed(meta: dict, types: dict[str, type]) -> None:
    """JSON fields of exactly these types (bool("false") is True, int(2.7) is 2: a corrupt
    file must not be coerced into another model)."""
    for k, t in types.items():
        v = meta[k]
        if type(v) is not t:
            raise TypeError(f"{k}={v!r} is not a {t.__name__}")


@dataclass(frozen=True, eq=False)
class Tree:
    """One decision tree, struct-of-arrays over its ``n`` nodes (root = 0).

    left, right     int32 (n,)  child indices, -1 at leaves; children are > their parent
    feature         int32 (n,)  feature index at internal nodes, -1 at leaves
    threshold       float64 (n,) numeric split value (0 at leaves and categorical nodes)
    default_left    bool (n,)   where NaN goes
    value           float64 (n, w) leaf vector (w = 1 for a scalar leaf); zero at internal nodes
    cat_index       int32 (n,)  row of cat_bits for a categorical node, -1 for numeric/leaf
    cat_bits        uint32 (k, n_words) per categorical split: categories that go left
    cat_other_left  bool (k,)   where a non-NaN value that is no valid category goes
    node_ids        int32 (n,) or None: the source library's id of each node (frontends
                    renumber), what its `apply` / pred_leaf returns; None where not recorded
    cover           float64 (n,) or None: training weight through each node (SHAP; optional)
    linear leaves (all four or None; scalar leaves only): leaf i's output is
    leaf_const      float64 (n,) leaf_const[i] (0 at internal nodes)
    linear_ptr      int32 (n+1,) plus, for j in linear_ptr[i]:linear_ptr[i+1] in order (empty
    linear_feature  int32 (k,)   at internal nodes), linear_coeff[j] * x[linear_feature[j]]
    linear_coeff    float64 (k,) (float64; |x| <= LINEAR_ZERO as 0.0); value[i] if any such
                                 x is NaN (interp.tree_values is the reference)
    """

    left: np.ndarray
    right: np.ndarray
    feature: np.ndarray
    threshold: np.ndarray
    default_left: np.ndarray
    value: np.ndarray
    cat_index: np.ndarray = None  # type: ignore[assignment]
    cat_bits: np.ndarray = None  # type: ignore[assignment]
    cat_other_left: np.ndarray = None  # type: ignore[assignment]
    node_ids: np.ndarray | None = None
    #: optional, for SHAP contributions (treecomp.shap): XGBoost sum_hessian, LightGBM counts
    cover: np.ndarray | None = None
    leaf_const: np.ndarray | None = None
    linear_ptr: np.ndarray | None = None
    linear_feature: np.ndarray | None = None
    linear_coeff: np.ndarray | None = None

    def __post_init__(self) -> None:
        n = len(np.asarray(self.left))
        defaults = {"cat_index": np.full(n, -1, np.int32),
                    "cat_bits": np.zeros((0, 1), np.uint32),
                    "cat_other_left": np.zeros(0, np.bool_)}
        for name in _TREE_ARRAYS:
            raw = getattr(self, name)
            if raw is None:
                raw = defaults[name]
            ndim = 2 if name in ("value", "cat_bits") else 1
            if name == "value":
                raw = np.asarray(raw, dtype=np.float64)
                if raw.ndim == 1:
                    raw = raw[:, None]
            object.__setattr__(self, name, _frozen(raw, _TREE_DTYPES[name], ndim, name))
        if self.node_ids is not None:
            object.__setattr__(self, "node_ids", _frozen(self.node_ids, np.int32, 1, "node_ids"))
        if self.cover is not None:
            object.__setattr__(self, "cover", _frozen(self.cover, np.float64, 1, "cover"))
        for name in _LINEAR_ARRAYS:
            if getattr(self, name) is not None:
                object.__setattr__(self, name, _frozen(getattr(self, name), _TREE_DTYPES[name], 1, name))
        self._validate()

    # -- derived facts (cheap; computed on demand) ---------------------------------------------
    @property
    def n_nodes(self) -> int:
        return len(self.left)

    @property
    def width(self) -> int:
        """Length of the leaf vector this tree adds to the margins."""
        return self.value.shape[1]

    @property
    def is_leaf(self) -> np.ndarray:
        return self.left < 0

    @property
    def n_leaves(self) -> int:
        return int(np.count_nonzero(self.left < 0))

    @property
    def is_linear(self) -> bool:
        return self.leaf_const is not None

    @property
    def has_categorical(self) -> bool:
        return bool(np.any(self.cat_index >= 0))

    def depths(self) -> np.ndarray:
        """Depth of every node (root 0), level by level: O(n) work in O(depth) numpy steps
        (a chain of 20,000 nodes is 20,000 tiny steps, not 20,000 passes over the tree)."""
        n = self.n_nodes
        depth = np.zeros(n, np.int64)
        level, d = np.zeros(1, np.int64), 0
        while level.size:
            depth[level] = d
            inner = level[self.left[level] >= 0]
            level = np.concatenate([self.left[inner], self.right[inner]]).astype(np.int64)
            d += 1
        return depth

    @functools.cached_property
    def max_depth(self) -> int:
        """Depth of the deepest leaf (root 0). Computed once: the arrays are read-only, and the
        backends' choices ask for every tree's depth several times (a forest of 320k trees
        spent 14 s recomputing it)."""
        return int(self.depths().max()) if self.n_nodes > 1 else 0

    def _validate(self) -> None:
        n = self.n_nodes
        if n < 1:
            raise InvalidModelError("a tree needs at least one node")
        for name in ("right", "feature", "threshold", "default_left", "cat_index") + \
                (("node_ids",) if self.node_ids is not None else ()):
            if len(getattr(self, name)) != n:
                raise InvalidModelError(f"tree array {name!r} has length {len(getattr(self, name))}, expected {n}")
        if self.value.shape[0] != n or self.value.shape[1] < 1:
            raise InvalidModelError(f"tree 'value' must have shape ({n}, w>=1), got {self.value.shape}")
        leaf = self.left < 0
        if (self.left < -1).any() or ((self.right < 0) != leaf).any() or (self.right < -1).any():
            raise InvalidModelError("tree children must be -1 at leaves (both) or valid node indices (both)")
        idx = np.arange(n)
        internal = ~leaf
        l, r = self.left[internal], self.right[internal]
        if (l >= n).any() or (r >= n).any():
            raise InvalidModelError(f"tree child index out of range (n_nodes={n})")
        if (l <= idx[internal]).any() or (r <= idx[internal]).any():
            raise InvalidModelError("tree children must have larger indices than their parent "
                                    "(root at 0; frontends renumber nodes)")
        counts = np.bincount(np.concatenate([l, r]), minlength=n)
        if counts[0] != 0 or (counts[1:] != 1).any():
            bad = int(np.flatnonzero(np.concatenate([[counts[0] != 0], counts[1:] != 1]))[0])
            raise InvalidModelError(f"tree node {bad} has {counts[bad]} parents (orphan or shared node)")
        if (self.feature[internal] < 0).any():
            raise InvalidModelError("internal tree node without a feature index")
        if (self.feature[leaf] != -1).any():
            raise InvalidModelError("leaf nodes must have feature -1")
        is_cat = self.cat_index >= 0
        numeric = internal & ~is_cat
        if (np.isnan(self.threshold[numeric])).any():
            raise InvalidModelError("NaN threshold in a numeric split")
        if not (np.isfinite(self.value[leaf])).all():
            raise InvalidModelError("non-finite leaf value")
        k = self.cat_bits.shape[0]
        if (self.cat_index < -1).any() or (self.cat_index >= k).any():
            raise InvalidModelError(f"cat_index out of range (have {k} category sets)")
        if (is_cat & leaf).any():
            raise InvalidModelError("a leaf cannot be a categorical split")
        if len(self.cat_other_left) != k:
            raise InvalidModelError("cat_other_left must have one entry per category set")
        if self.cat_bits.shape[1] < 1:
            raise InvalidModelError("cat_bits needs at least one 32-bit word per set")
        if self.cover is not None and (len(self.cover) != n or not (np.isfinite(self.cover)).all()
                                       or (self.cover < 0).any()):
            raise InvalidModelError(f"tree 'cover' must hold {n} finite values >= 0")
        if any(getattr(self, a) is not None for a in _LINEAR_ARRAYS):
            self._validate_linear()

    def _validate_linear(self) -> None:
        if any(getattr(self, a) is None for a in _LINEAR_ARRAYS):
            raise InvalidModelError(f"linear leaves need all of {', '.join(_LINEAR_ARRAYS)}")
        n, ptr, k = self.n_nodes, self.linear_ptr, len(self.linear_feature)
        if self.width != 1:
            raise InvalidModelError("linear leaves need scalar leaves (value width 1)")
        if len(self.leaf_const) != n or len(ptr) != n + 1 or len(self.linear_coeff) != k:
            raise InvalidModelError(f"linear leaves: leaf_const needs {n} entries, linear_ptr "
                                    f"{n + 1}, linear_coeff as many as linear_feature ({k})")
        if ptr[0] != 0 or ptr[-1] != k or np.any(np.diff(ptr) < 0):
            raise InvalidModelError("linear_ptr must rise from 0 to len(linear_feature)")
        if np.any(np.diff(ptr)[self.left >= 0] != 0) or np.any(self.leaf_const[self.left >= 0] != 0):
            raise InvalidModelError("internal nodes cannot hold a linear model")
        if np.any(self.linear_feature < 0):
            raise InvalidModelError("negative linear_feature")
        if not (np.all(np.isfinite(self.leaf_const)) and np.all(np.isfinite(self.linear_coeff))):
            raise InvalidModelError("non-finite leaf_const or linear_coeff")


class TreeBuildError(InvalidModelError):
    """What :func:`build_trees` raises: tree ``index``'s own error, the message Tree() gives."""

    def __init__(self, message: str, index: int) -> None:
        super().__init__(message)
        self.index = index


#: shared by the trees build_trees makes (read-only): no category sets
_NO_CAT_BITS = np.zeros((0, 1), np.uint32)
_NO_CAT_BITS.flags.writeable = False
_NO_CAT_OTHER = np.zeros(0, np.bool_)
_NO_CAT_OTHER.flags.writeable = False


def build_trees(sizes: Any, left: Any, right: Any, feature: Any, threshold: Any,
                default_left: Any, value: Any, node_ids: Any = None,
                cover: Any = None, copy: bool = True) -> tuple[Tree, ...]:
    """Numeric trees (no categorical splits, no linear leaves) from forest-wide arrays: tree i
    is the slice ``[off[i], off[i] + sizes[i])`` of each array (child indices local to the tree,
    as in Tree), every tree's `value` of the same width. The same trees as
    ``Tree(left=left[a:b], ...)`` one by one, with the same checks, but validated in one pass
    over all nodes: each tree's arrays are read-only views into one copy per array (its
    cat_index, all -1, a view of one array as long as the largest tree), and each tree's
    max_depth is computed here, for all trees at once. Where a check fails, the trees are
    built one by one up to the first that fails, so the error is exactly Tree()'s, raised as
    :class:`TreeBuildError` with that tree's index.

    With ``copy=False`` an array that is a numpy array of the IR's dtype, C-contiguous and the
    owner of its data is kept (made read-only) instead of copied: for arrays the caller made
    for this call and holds no other use for (peak memory of huge models)."""
    sizes = np.asarray(sizes, np.int64)
    try:
        arrays = _bulk_arrays(sizes, left, right, feature, threshold, default_left, value,
                              node_ids, cover, copy)
    except InvalidModelError:
        arrays = None
    if arrays is None:  # the error (if any) of the first tree that fails, as Tree() words it
        return _trees_one_by_one(sizes, left, right, feature, threshold, default_left, value,
                                 node_ids, cover)
    offs, depth = arrays.pop("offs"), arrays.pop("depth")
    cat_index = arrays.pop("cat_index")
    names = [k for k in ("left", "right", "feature", "threshold", "default_left", "value",
                         "node_ids", "cover") if arrays.get(k) is not None]
    cols = [arrays[k] for k in names]
    new = object.__new__
    setattr_ = object.__setattr__
    out = []
    for a, b, d in zip(offs[:-1].tolist(), offs[1:].tolist(), depth.tolist()):
        t = new(Tree)
        for k, col in zip(names, cols):
            setattr_(t, k, col[a:b])
        setattr_(t, "cat_index", cat_index[:b - a])
        setattr_(t, "cat_bits", _NO_CAT_BITS)
        setattr_(t, "cat_other_left", _NO_CAT_OTHER)
        for k in ("node_ids", "cover", "leaf_const", "linear_ptr", "linear_feature", "linear_coeff"):
            if k not in arrays or arrays[k] is None:
                setattr_(t, k, None)
        t.__dict__["max_depth"] = d  # functools.cached_property's slot
        out.append(t)
    return tuple(out)


def _trees_one_by_one(sizes: np.ndarray, *cols: Any) -> tuple[Tree, ...]:
    names = ("left", "right", "feature", "threshold", "default_left", "value", "node_ids", "cover")
    offs = np.concatenate([[0], np.cumsum(sizes)]).tolist()
    out = []
    for i in range(len(sizes)):
        a, b = offs[i], offs[i + 1]
        try:
            out.append(Tree(**{k: None if c is None else np.asarray(c)[a:b]
                               for k, c in zip(names, cols)}))
        except InvalidModelError as exc:
            raise TreeBuildError(str(exc), i) from None
    return tuple(out)


def _kept(a: Any, dtype: Any, ndim: int, name: str, copy: bool) -> np.ndarray:
    """_frozen(a), or with copy=False `a` itself (read-only) where it already is such an
    array and owns its data (build_trees)."""
    if not copy and isinstance(a, np.ndarray) and a.dtype == dtype and a.ndim == ndim \
            and a.flags.c_contiguous and a.flags.owndata:
        a.flags.writeable = False
        return a
    return _frozen(a, dtype, ndim, name)


def _bulk_arrays(sizes: np.ndarray, left: Any, right: Any, feature: Any, threshold: Any,
                 default_left: Any, value: Any, node_ids: Any, cover: Any,
                 copy: bool = True) -> dict | None:
    """build_trees' arrays converted and checked as Tree._validate checks each tree, over all
    nodes at once; None where some tree fails a check (or the arrays disagree in length)."""
    if sizes.ndim != 1 or not len(sizes) or np.any(sizes < 1):
        return None
    total = int(sizes.sum())
    if isinstance(value, np.ndarray) and value.dtype == np.float64 and value.ndim == 1:
        value = _kept(value, np.float64, 1, "value", copy)[:, None]  # (a view: read-only too)
    else:
        value = np.asarray(value, dtype=np.float64)
        if value.ndim == 1:
            value = value[:, None]
        value = _frozen(value, np.float64, 2, "value")
    a = {"left": _kept(left, np.int32, 1, "left", copy),
         "right": _kept(right, np.int32, 1, "right", copy),
         "feature": _kept(feature, np.int32, 1, "feature", copy),
         "threshold": _kept(threshold, np.float64, 1, "threshold", copy),
         "default_left": _kept(default_left, np.bool_, 1, "default_left", copy),
         "value": value,
         "node_ids": None if node_ids is None else _kept(node_ids, np.int32, 1, "node_ids", copy),
         "cover": None if cover is None else _kept(cover, np.float64, 1, "cover", copy)}
    if any(v is not None and len(v) != total for v in a.values()) or a["value"].shape[1] < 1:
        return None
    offs = np.zeros(len(sizes) + 1, np.int64)
    np.cumsum(sizes, out=offs[1:])
    left, right, feature = a["left"], a["right"], a["feature"]
    leaf = left < 0
    if (left < -1).any() or ((right < 0) != leaf).any() or (right < -1).any():
        return None
    # (element-wise tests under a mask: cheaper than gathering the masked nodes first)
    if ((feature != -1) & leaf).any() or (~np.isfinite(a["value"]) & leaf[:, None]).any():
        return None
    if numparse.available():
        # the same checks (children in range and after their parent, every node but the
        # roots a child once) and depths, in one pass in C without node-sized temporaries
        if ((feature < 0) & ~leaf).any() or (np.isnan(a["threshold"]) & ~leaf).any():
            return None
        del leaf
        status, depth = numparse.tree_shapes(sizes, left, right)
        if status.any():
            return None
    else:
        depth = _bulk_depths(sizes, offs, left, right, leaf, a)
        if depth is None:
            return None
    cover = a["cover"]
    if cover is not None and (not np.isfinite(cover).all() or (cover < 0).any()):
        return None
    a["depth"] = depth
    a["offs"] = offs
    # no categorical split anywhere: every tree's cat_index (all -1) is a view of one array as
    # long as the largest tree (not 4 bytes a node: peak memory of huge models)
    cat_index = np.full(int(sizes.max()), -1, np.int32)
    cat_index.flags.writeable = False
    a["cat_index"] = cat_index
    return a


def _bulk_depths(sizes: np.ndarray, offs: np.ndarray, left: np.ndarray, right: np.ndarray,
                 leaf: np.ndarray, a: dict) -> np.ndarray | None:
    """_bulk_arrays' tree checks and depths where treecomp.numparse is not built: each tree's
    depth, or None where some tree fails a check."""
    feature = a["feature"]
    total = len(left)
    node = np.flatnonzero(~leaf)  # the internal nodes
    del leaf
    if (feature[node] < 0).any() or np.isnan(a["threshold"][node]).any():
        return None
    # (temporaries of 4 or 8 bytes a node, freed as soon as they are used: peak memory)
    tree_of = np.repeat(np.arange(len(sizes), dtype=np.int32), sizes)
    first = offs[tree_of[node]]  # each internal node's tree's first node
    n_of = sizes[tree_of[node]]
    local = node - first
    l, r = left[node].astype(np.int64), right[node].astype(np.int64)
    if (l >= n_of).any() or (r >= n_of).any() or (l <= local).any() or (r <= local).any():
        return None
    del n_of, local, node
    l += first  # forest-wide child indices
    r += first
    del first
    # every node but the roots has exactly one parent: (children come after their parent, so
    # no root is a child) the 2 * internal children are distinct and as many as those nodes
    seen = np.zeros(total, bool)
    seen[l] = True
    seen[r] = True
    if 2 * len(l) != total - len(sizes) or np.count_nonzero(seen) != 2 * len(l):
        return None
    del seen, l, r
    # each tree's depth, level by level over all trees at once (as Tree.depths, per tree)
    depth = np.zeros(len(sizes), np.int64)
    level, d = offs[:-1], 0
    while level.size:
        depth[tree_of[level]] = d  # (the deepest level a tree reaches is written last)
        level = level[left[level] >= 0]
        base = offs[tree_of[level]]
        level = np.concatenate([left[level] + base, right[level] + base])
        d += 1
    return depth


class _Outputs:
    """What Forest and Head share: how raw margins become the library's outputs."""

    decision: str
    classes: tuple[np.ndarray, ...]

    @property
    def is_classifier(self) -> bool:
        return self.decision not in ("none", "outlier")

    @property
    def n_classes(self) -> tuple[int, ...]:
        return tuple(len(c) for c in self.classes)


@dataclass(frozen=True, eq=False)
class Forest(_Outputs):
    """An ensemble and everything needed to reproduce its library's outputs."""

    trees: tuple[Tree, ...]
    n_features: int
    n_outputs: int
    #: first raw-margin column each tree adds to (int32, one per tree)
    tree_output: np.ndarray
    #: initial margins, float64 (n_outputs,); a float32 library stores float32 values here;
    #: with base_link set, the probabilities that link maps to the initial margins
    base_score: np.ndarray
    input_dtype: str = "float32"
    comparison: str = "<="
    accumulate_dtype: str = "float64"
    average: bool = False
    transform: str = "identity"
    decision: str = "none"
    #: class labels per target (classifiers); () for regressors
    classes: tuple[np.ndarray, ...] = ()
    feature_names: tuple[str, ...] | None = None
    #: which values are valid category ids at categorical splits (CATEGORY_RULES)
    category_rule: str = "nonneg"
    #: pandas 'category' columns at predict time (PANDAS_CATEGORIES)
    pandas_categories: str = "reject"
    #: False where the source library rejects NaN inputs (then so do we, with a ValueError)
    allow_nan: bool = True
    #: free text: where the model came from (not part of the digest)
    provenance: str = ""
    #: which exp the transform calls (EXP_LIBS): float64 margins libm's exp, numpy's np.exp or
    #: CatBoost's fmath; float32 margins glibc's expf ("libm") or numpy's float32 np.exp
    #: ("numpy"; treecomp.outputs)
    exp_lib: str = "libm"
    #: features whose value, cast to input_dtype, may not be +/-inf where the source library
    #: refuses it (scikit-learn's trees: every feature, 1e39 included once cast to float32;
    #: HistGradientBoosting: its categorical features): then a ValueError, as the library
    reject_inf: tuple[int, ...] = ()
    #: the transform's parameters (TRANSFORM_PARAMS; () for the others), finite floats
    transform_params: tuple[float, ...] = ()
    #: how base_score becomes the initial margins (BASE_LINKS; outputs.base_margins)
    base_link: str = "identity"
    #: input columns read as categories by hash (CatBoost one-hot features): ((column,
    #: (uint32 hash, ...)), ...) by column; a value becomes the index of its hash, or the number
    #: of hashes when unknown (treecomp.categories); () for every other model
    category_hashes: tuple[tuple[int, tuple[int, ...]], ...] = ()
    #: the library's predict divides the margins by this before the transform, its raw output
    #: (decision_function, contributions) does not: LightGBM's random-forest mode, by its
    #: number of iterations (GBDT::Predict); 1 for every other model
    output_divisor: int = 1
    #: how apply shapes the leaf ids (LEAF_LAYOUTS)
    leaf_layout: str = "trees"
    #: how a user's numbers become input_dtype values (INPUT_RULES)
    input_rule: str = "cast"
    #: the shape of predict's labels (LABEL_SHAPES)
    label_shape: str = "rows"
    #: the categories the model was trained on, for pandas_categories "sklearn", "xgboost",
    #: "xgboost_inplace" and "lightgbm": ((column, kind, (value, ...)), ...) with the values in
    #: code order (value i is code i); column is the feature index, or for "lightgbm" the
    #: position among the frame's category columns; kinds in CATEGORY_KINDS
    category_values: tuple[tuple[int, str, tuple[Any, ...]], ...] = ()

    def __post_init__(self) -> None:
        trees = tuple(self.trees)
        if not trees:
            raise InvalidModelError("a forest needs at least one tree")
        if not all(isinstance(t, Tree) for t in trees):
            raise InvalidModelError("forest.trees must hold Tree objects")
        object.__setattr__(self, "trees", trees)
        object.__setattr__(self, "tree_output", _frozen(self.tree_output, np.int32, 1, "tree_output"))
        object.__setattr__(self, "base_score", _frozen(self.base_score, np.float64, 1, "base_score"))
        object.__setattr__(self, "classes", tuple(np.array(c) for c in self.classes))
        for c in self.classes:
            c.flags.writeable = False
        if self.feature_names is not None:
            object.__setattr__(self, "feature_names", tuple(str(s) for s in self.feature_names))
        object.__setattr__(self, "n_features", int(self.n_features))
        object.__setattr__(self, "n_outputs", int(self.n_outputs))
        object.__setattr__(self, "average", bool(self.average))
        object.__setattr__(self, "allow_nan", bool(self.allow_nan))
        object.__setattr__(self, "reject_inf", _feature_set(self.reject_inf, self.n_features))
        object.__setattr__(self, "transform_params", _params(self.transform_params))
        object.__setattr__(self, "category_hashes", _category_hashes(self.category_hashes, self.n_features))
        object.__setattr__(self, "output_divisor", _divisor(self.output_divisor))
        object.__setattr__(self, "category_values", checked_category_values(self.category_values, self.n_features))
        self._validate()

    @property
    def n_trees(self) -> int:
        return len(self.trees)

    @property
    def is_linear(self) -> bool:
        """Whether some tree has linear leaves (Tree.leaf_const): no native kernel computes
        them; treecomp.linear evaluates them around one that finds the leaves."""
        return any(t.is_linear for t in self.trees)


    def _validate(self) -> None:
        for name, allowed in (("comparison", COMPARISONS), ("input_dtype", DTYPES),
                              ("accumulate_dtype", DTYPES), ("transform", TRANSFORMS),
                              ("decision", DECISIONS), ("category_rule", CATEGORY_RULES),
                              ("pandas_categories", PANDAS_CATEGORIES),
                              ("exp_lib", EXP_LIBS), ("leaf_layout", LEAF_LAYOUTS),
                              ("input_rule", INPUT_RULES), ("label_shape", LABEL_SHAPES)):
            if getattr(self, name) not in allowed:
                raise InvalidModelError(f"forest.{name}={getattr(self, name)!r}; expected one of {allowed}")
        _check_label_shape(self)
        if (self.leaf_layout == "tree" and self.n_trees != 1) or \
                (self.leaf_layout == "stages_classes" and self.n_trees % self.n_outputs):
            raise InvalidModelError(f"leaf_layout {self.leaf_layout!r} does not fit {self.n_trees} "
                                    f"trees and {self.n_outputs} outputs")
        if self.output_divisor != 1 and (self.accumulate_dtype != "float64" or self.average
                                         or self.transform in ("samme", "iforest", "weighted_median")):
            raise InvalidModelError("output_divisor (LightGBM's random-forest mode) goes with float64 "
                                    "margins, no average and a plain inverse link")
        _check_category_values(self.pandas_categories, self.category_values)
        if self.n_features < 1 or self.n_outputs < 1:
            raise InvalidModelError("a forest needs n_features >= 1 and n_outputs >= 1")
        if len(self.tree_output) != len(self.trees):
            raise InvalidModelError("tree_output needs one entry per tree")
        if self.base_score.shape != (self.n_outputs,):
            raise InvalidModelError(f"base_score must have shape ({self.n_outputs},), got {self.base_score.shape}")
        if not np.all(np.isfinite(self.base_score)):
            raise InvalidModelError("non-finite base_score")
        _check_base_link(self.base_link, self.base_score)
        if self.feature_names is not None and len(self.feature_names) != self.n_features:
            raise InvalidModelError("feature_names must name every feature")
        for i, t in enumerate(self.trees):
            o = int(self.tree_output[i])
            if o < 0 or o + t.width > self.n_outputs:
                raise InvalidModelError(f"tree {i} writes outputs [{o}, {o + t.width}) beyond n_outputs={self.n_outputs}")
            if t.n_nodes > 1 and int(t.feature.max()) >= self.n_features:
                raise InvalidModelError(f"tree {i} splits on feature {int(t.feature.max())}, "
                                        f"but the forest has {self.n_features} features")
            if t.is_linear and len(t.linear_feature) and int(t.linear_feature.max()) >= self.n_features:
                raise InvalidModelError(f"tree {i}'s linear leaves read feature "
                                        f"{int(t.linear_feature.max())}, but the forest has "
                                        f"{self.n_features} features")
        if self.is_classifier:
            if not self.classes:
                raise InvalidModelError(f"decision={self.decision!r} needs class labels")
            widths = [len(c) for c in self.classes]
            if not _classes_fit(self.decision, widths, self.n_outputs):
                raise InvalidModelError(f"decision={self.decision!r}: classes {widths} do not "
                                        f"match n_outputs={self.n_outputs}")
        elif self.classes:
            raise InvalidModelError(f"decision={self.decision!r} has no classes")
        _check_transform(self)

    # -- convenience ---------------------------------------------------------------------------
    def replace(self, **changes: Any) -> "Forest":
        return dataclasses.replace(self, **changes)

    def meta(self) -> dict[str, Any]:
        """Every scalar attribute as JSON-able data (classes included)."""
        return {
            "n_features": self.n_features, "n_outputs": self.n_outputs,
            "input_dtype": self.input_dtype, "comparison": self.comparison,
            "accumulate_dtype": self.accumulate_dtype, "average": self.average,
            "transform": self.transform, "decision": self.decision,
            "classes": [_labels_to_json(c) for c in self.classes],
            "feature_names": list(self.feature_names) if self.feature_names is not None else None,
            "allow_nan": self.allow_nan, "category_rule": self.category_rule,
            "pandas_categories": self.pandas_categories, "exp_lib": self.exp_lib,
            "reject_inf": list(self.reject_inf), "provenance": self.provenance,
            # only where a transform takes them: the digests of other forests stay as they were
            **({"transform_params": list(self.transform_params)} if self.transform_params else {}),
            **({"base_link": self.base_link} if self.base_link != "identity" else {}),
            **({"category_hashes": _category_hashes_json(self.category_hashes)}
               if self.category_hashes else {}),
            **({"output_divisor": self.output_divisor} if self.output_divisor != 1 else {}),
            **({"leaf_layout": self.leaf_layout} if self.leaf_layout != "trees" else {}),
            **({"input_rule": self.input_rule} if self.input_rule != "cast" else {}),
            **({"label_shape": self.label_shape} if self.label_shape != "rows" else {}),
            **({"category_values": category_values_json(self.category_values)}
               if self.category_values else {}),
        }

    def stats(self) -> dict[str, Any]:
        """Summary numbers, for `treecomp inspect` and reports."""
        depths = [t.max_depth for t in self.trees]
        leaves = [t.n_leaves for t in self.trees]
        return {"n_trees": self.n_trees, "n_nodes": int(sum(t.n_nodes for t in self.trees)),
                "max_depth": max(depths), "mean_depth": float(np.mean(depths)),
                "n_leaves": int(sum(leaves)),
                "categorical": any(t.has_categorical for t in self.trees)}

    # -- digest and (de)serialisation ----------------------------------------------------------
    def digest(self) -> str:
        """sha256 of the forest's meaning (everything but `provenance`); stable across runs."""
        cached = self.__dict__.get("_digest")
        if cached is None:
            h = hashlib.sha256()
            meta = self.meta()
            del meta["provenance"]
            h.update(json.dumps(meta, sort_keys=True).encode())
            heads: dict = {}  # (dtype, shape) -> ":<dtype>:<shape>" (trees repeat a few)
            parts: list = []  # hashed a few hundred at a time: one update, not two an array
            for name, arr in self._arrays():
                key = (arr.dtype, arr.shape)
                head = heads.get(key)
                if head is None:
                    head = heads[key] = f":{arr.dtype.str}:{arr.shape}"
                parts.append((name + head).encode())
                # the array's bytes in C order (join reads a contiguous array's own buffer,
                # through a view: numpy keeps an exported buffer's description, ~56 bytes, until
                # the array dies, 4 bytes a node on big forests of small trees)
                parts.append(arr.view() if arr.flags.c_contiguous else np.ascontiguousarray(arr))
                if len(parts) >= 512:
                    h.update(b"".join(parts))
                    parts.clear()
            h.update(b"".join(parts))
            cached = h.hexdigest()
            object.__setattr__(self, "_digest", cached)
        return cached

    def _arrays(self):
        yield "tree_output", self.tree_output
        yield "base_score", self.base_score
        for i, t in enumerate(self.trees):
            for name in _TREE_ARRAYS:
                yield f"t{i}.{name}", getattr(t, name)
            if t.node_ids is not None:  # optional: files and digests without it are unchanged
                yield f"t{i}.node_ids", t.node_ids
            if t.cover is not None:  # optional: files and digests without it are unchanged
                yield f"t{i}.cover", t.cover
            if t.is_linear:  # optional, as node_ids
                for name in _LINEAR_ARRAYS:
                    yield f"t{i}.{name}", getattr(t, name)

    def to_bytes(self) -> bytes:
        """The IR file: a zip with meta.json and one .npy per array (versioned)."""
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as z:
            meta = {"format": "treecomp-ir", "version": IR_FORMAT_VERSION, "n_trees": self.n_trees,
                    **self.meta()}
            z.writestr("meta.json", json.dumps(meta, sort_keys=True))
            for name, arr in self._arrays():
                b = io.BytesIO()
                np.save(b, arr, allow_pickle=False)
                z.writestr(f"{name}.npy", b.getvalue())
        return buf.getvalue()

    @classmethod
    def from_bytes(cls, data: bytes) -> "Forest":
        """The Forest of an IR file (to_bytes). Whatever is wrong with the bytes raises
        InvalidModelError here, within a memory budget proportional to the file's size
        (see _ir_members): no member is inflated beyond it, and every member must be one the
        format names, exactly once."""
        try:
            members = _ir_members(bytes(data))
            if "meta.json" not in members:
                raise _corrupt_ir("no meta.json")
            meta = json.loads(members["meta.json"])
            if not isinstance(meta, dict) or meta.get("format") != "treecomp-ir":
                raise InvalidModelError("not a treecomp IR file")
            if meta.get("version") != IR_FORMAT_VERSION:
                raise InvalidModelError(f"IR file version {meta.get('version')} is not supported "
                                        f"(this treecomp reads version {IR_FORMAT_VERSION})")
            _typed(meta, {"n_trees": int, "n_features": int, "n_outputs": int, "average": bool,
                          "allow_nan": bool, "input_dtype": str, "comparison": str,
                          "accumulate_dtype": str, "transform": str, "decision": str,
                          "category_rule": str, "pandas_categories": str, "provenance": str,
                          "classes": list})
            _typed(meta, {k: t for k, t in _OPTIONAL_META.items() if k in meta})
            names = meta["feature_names"]
            if names is not None and not (isinstance(names, list) and all(isinstance(n, str) for n in names)):
                raise TypeError("feature_names must be a list of strings")
            n_trees = meta["n_trees"]
            # one meta.json, tree_output, base_score and 9 arrays per tree: checked before a
            # list of n_trees names is built
            if not 1 <= n_trees <= len(members) // len(_TREE_ARRAYS):
                raise _corrupt_ir(f"n_trees={n_trees} for {len(members)} members")
            want = {"meta.json", "tree_output.npy", "base_score.npy"} | {
                f"t{i}.{n}.npy" for i in range(n_trees) for n in _TREE_ARRAYS}
            want |= {f"t{i}.{n}.npy" for i in range(n_trees)  # optional
                     for n in ("node_ids", "cover") + _LINEAR_ARRAYS} & set(members)
            if set(members) != want:
                odd = sorted(set(members) ^ want)
                raise _corrupt_ir(f"members {odd[:3]}{' ...' if len(odd) > 3 else ''} missing or unexpected")

            def arr(name: str) -> np.ndarray:
                return _read_npy(members[f"{name}.npy"], name)

            trees = []
            for i in range(n_trees):
                try:
                    ids = arr(f"t{i}.node_ids") if f"t{i}.node_ids.npy" in members else None
                    cover = arr(f"t{i}.cover") if f"t{i}.cover.npy" in members else None
                    lin = {n: arr(f"t{i}.{n}") for n in _LINEAR_ARRAYS if f"t{i}.{n}.npy" in members}
                    trees.append(Tree(**{n: arr(f"t{i}.{n}") for n in _TREE_ARRAYS}, node_ids=ids,
                                      cover=cover, **lin))
                except InvalidModelError as exc:
                    raise _corrupt_ir(f"tree {i}: {exc}") from None
            tree_output, base_score = arr("tree_output"), arr("base_score")
            try:
                return cls(trees=trees, n_features=meta["n_features"], n_outputs=meta["n_outputs"],
                           tree_output=tree_output, base_score=base_score,
                           input_dtype=meta["input_dtype"], comparison=meta["comparison"],
                           accumulate_dtype=meta["accumulate_dtype"], average=meta["average"],
                           transform=meta["transform"], decision=meta["decision"],
                           classes=tuple(_checked_labels(c) for c in meta["classes"]),
                           feature_names=meta["feature_names"], allow_nan=meta["allow_nan"],
                           category_rule=meta["category_rule"],
                           pandas_categories=meta["pandas_categories"],
                           exp_lib=meta.get("exp_lib", legacy_exp_lib(meta["transform"])),
                           reject_inf=meta.get("reject_inf", ()), provenance=meta["provenance"],
                           transform_params=meta.get("transform_params", ()),
                           base_link=meta.get("base_link", "identity"),
                           category_hashes=meta.get("category_hashes", ()),
                           output_divisor=meta.get("output_divisor", 1),
                           leaf_layout=meta.get("leaf_layout", "trees"),
                           input_rule=meta.get("input_rule", "cast"),
                           label_shape=meta.get("label_shape", "rows"),
                           category_values=meta.get("category_values", ()))
            except InvalidModelError as exc:  # the forest's own checks, named as the file's
                raise _corrupt_ir(str(exc)) from None
        except InvalidModelError:
            raise
        except _READ_ERRORS as exc:
            raise _corrupt_ir(f"{type(exc).__name__}: {exc}") from None

    def save(self, path: str | Path) -> None:
        Path(path).write_bytes(self.to_bytes())

    @classmethod
    def load(cls, path: str | Path) -> "Forest":
        return cls.from_bytes(Path(path).read_bytes())


def _labels_to_json(c: np.ndarray) -> dict[str, Any]:
    if c.dtype.kind in "iufbU":
        return {"dtype": c.dtype.str, "values": c.tolist()}
    return {"dtype": "str", "values": [str(v) for v in c.tolist()]}


def _labels_from_json(d: dict[str, Any]) -> np.ndarray:
    if d["dtype"] == "str":
        return np.array(d["values"], dtype=object)
    return np.array(d["values"], dtype=np.dtype(d["dtype"]))


def leaf_tree(value: float | np.ndarray) -> Tree:
    """A single-leaf tree (a tree that never split)."""
    v = np.atleast_1d(np.asarray(value, np.float64))[None, :]
    return Tree(left=[-1], right=[-1], feature=[-1], threshold=[0.0], default_left=[False], value=v)


@dataclass(frozen=True, eq=False)
class Head(_Outputs):
    """The part of a Forest a Predictor needs besides the native kernel: shapes, dtypes,
    output transform and labels. Artifacts embed it as JSON (treecomp_meta_json), so a loaded
    .so describes itself. It quacks like a Forest for treecomp.outputs and treecomp.inputs."""

    n_features: int
    n_outputs: int
    input_dtype: str
    accumulate_dtype: str
    transform: str
    decision: str
    classes: tuple[np.ndarray, ...]
    feature_names: tuple[str, ...] | None
    allow_nan: bool
    digest: str
    n_trees: int
    pandas_categories: str = "reject"
    exp_lib: str = "libm"
    reject_inf: tuple[int, ...] = ()
    transform_params: tuple[float, ...] = ()
    base_link: str = "identity"
    #: with base_link set, the Forest's base_score (the link's probabilities), else ()
    base_score: tuple[float, ...] = ()
    category_hashes: tuple[tuple[int, tuple[int, ...]], ...] = ()
    output_divisor: int = 1
    input_rule: str = "cast"
    category_values: tuple[tuple[int, str, tuple[Any, ...]], ...] = ()
    label_shape: str = "rows"

    def to_json(self, **extra: Any) -> str:
        d = {k: getattr(self, k) for k in ("n_features", "n_outputs", "input_dtype",
                                           "accumulate_dtype", "transform", "decision",
                                           "allow_nan", "digest", "n_trees", "pandas_categories",
                                           "exp_lib")}
        d["classes"] = [_labels_to_json(c) for c in self.classes]
        d["feature_names"] = list(self.feature_names) if self.feature_names is not None else None
        d["reject_inf"] = list(self.reject_inf)
        if self.transform_params:
            d["transform_params"] = list(self.transform_params)
        if self.base_link != "identity":  # floats written as repr: read back bit for bit
            d["base_link"], d["base_score"] = self.base_link, list(self.base_score)
        if self.category_hashes:
            d["category_hashes"] = _category_hashes_json(self.category_hashes)
        if self.output_divisor != 1:
            d["output_divisor"] = self.output_divisor
        if self.input_rule != "cast":
            d["input_rule"] = self.input_rule
        if self.label_shape != "rows":
            d["label_shape"] = self.label_shape
        if self.category_values:
            d["category_values"] = category_values_json(self.category_values)
        d.update(extra)
        return json.dumps(d, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> "Head":
        """The Head an artifact embeds (to_json), checked as Forest checks its own fields: a
        corrupt artifact fails here, when it is loaded, not in the first predict."""
        try:
            d = json.loads(text)
            if not isinstance(d, dict):
                raise TypeError("not a JSON object")
            _typed(d, {"n_features": int, "n_outputs": int, "n_trees": int, "allow_nan": bool,
                       "input_dtype": str, "accumulate_dtype": str, "transform": str,
                       "decision": str, "digest": str, "classes": list})
            names = d["feature_names"]
            if names is not None and not (isinstance(names, list) and all(isinstance(n, str) for n in names)):
                raise TypeError("feature_names must be a list of strings")
            head = cls(n_features=d["n_features"], n_outputs=d["n_outputs"],
                       input_dtype=d["input_dtype"], accumulate_dtype=d["accumulate_dtype"],
                       transform=d["transform"], decision=d["decision"],
                       classes=tuple(_checked_labels(c) for c in d["classes"]),
                       feature_names=tuple(names) if names is not None else None,
                       allow_nan=d["allow_nan"], digest=d["digest"], n_trees=d["n_trees"],
                       pandas_categories=d.get("pandas_categories", "reject"),
                       exp_lib=d.get("exp_lib", legacy_exp_lib(d["transform"])),
                       reject_inf=_feature_set(d.get("reject_inf", []), d["n_features"]),
                       transform_params=_params(d.get("transform_params", [])),
                       base_link=d.get("base_link", "identity"),
                       base_score=_params(d.get("base_score", [])),
                       category_hashes=_category_hashes(d.get("category_hashes", []), d["n_features"]),
                       output_divisor=_divisor(d.get("output_divisor", 1)),
                       input_rule=d.get("input_rule", "cast"),
                       label_shape=d.get("label_shape", "rows"),
                       category_values=checked_category_values(d.get("category_values", []), d["n_features"]))
        except (ValueError, KeyError, TypeError, OverflowError, RecursionError) as exc:
            raise InvalidModelError(f"corrupt model metadata: {exc}") from None
        for name, allowed in (("input_dtype", DTYPES), ("accumulate_dtype", DTYPES),
                              ("transform", TRANSFORMS), ("decision", DECISIONS),
                              ("pandas_categories", PANDAS_CATEGORIES), ("exp_lib", EXP_LIBS),
                              ("input_rule", INPUT_RULES), ("label_shape", LABEL_SHAPES)):
            if getattr(head, name) not in allowed:
                raise InvalidModelError(f"corrupt model metadata: {name}={getattr(head, name)!r}; "
                                        f"expected one of {allowed}")
        try:
            _check_category_values(head.pandas_categories, head.category_values)
        except InvalidModelError as exc:
            raise InvalidModelError(f"corrupt model metadata: {exc}") from None
        if head.n_features < 1 or head.n_outputs < 1 or head.n_trees < 1:
            raise InvalidModelError(f"corrupt model metadata: n_features={head.n_features}, "
                                    f"n_outputs={head.n_outputs}, n_trees={head.n_trees}")
        if head.feature_names is not None and len(head.feature_names) != head.n_features:
            raise InvalidModelError("corrupt model metadata: feature_names must name every feature")
        # the labels as Forest._validate has them (outputs.py indexes them by the margins)
        widths = [len(c) for c in head.classes]
        if head.is_classifier != bool(widths) or (widths and not _classes_fit(head.decision, widths, head.n_outputs)):
            raise InvalidModelError(f"corrupt model metadata: decision={head.decision!r} with classes "
                                    f"{widths} and n_outputs={head.n_outputs}")
        try:
            _check_transform(head)
            _check_label_shape(head)
            if head.base_link != "identity" or head.base_score:
                if len(head.base_score) != head.n_outputs:
                    raise InvalidModelError(f"base_link {head.base_link!r} with "
                                            f"{len(head.base_score)} base_score values for "
                                            f"{head.n_outputs} outputs")
                _check_base_link(head.base_link, np.array(head.base_score))
        except InvalidModelError as exc:
            raise InvalidModelError(f"corrupt model metadata: {exc}") from None
        return head


def _feature_set(v: Any, n_features: int) -> tuple[int, ...]:
    """Sorted distinct feature indices, each in [0, n_features)."""
    if isinstance(v, (str, bytes)) or not all(type(i) is int or isinstance(i, np.integer) for i in v):
        raise InvalidModelError(f"feature indices must be integers, got {v!r}"[:200])
    out = tuple(sorted({int(i) for i in v}))
    if out and (out[0] < 0 or out[-1] >= n_features):
        raise InvalidModelError(f"feature index {out[0] if out[0] < 0 else out[-1]} out of range "
                                f"(n_features={n_features})")
    return out


#: at most this many known categories per hashed column (CatBoost's one_hot_max_size is <= 255)
MAX_CATEGORY_HASHES = 1 << 16


def _category_hashes(v: Any, n_features: int) -> tuple[tuple[int, tuple[int, ...]], ...]:
    """Forest.category_hashes checked: (column, hashes) pairs, columns distinct and in
    [0, n_features), hashes distinct integers in [0, 2^32); sorted by column."""
    def is_int(x: Any) -> bool:
        return type(x) is int or isinstance(x, np.integer)
    out = []
    try:
        for pair in v:
            col, hashes = pair
            if not is_int(col) or not 0 <= col < n_features:
                raise ValueError(f"column {col!r} is not a feature index")
            if isinstance(hashes, (str, bytes)) or len(hashes) > MAX_CATEGORY_HASHES \
                    or not all(is_int(h) and 0 <= h < 1 << 32 for h in hashes):
                raise ValueError(f"column {col}: hashes must be at most {MAX_CATEGORY_HASHES} "
                                 "integers in [0, 2^32)")
            hashes = tuple(int(h) for h in hashes)
            if len(set(hashes)) != len(hashes):
                raise ValueError(f"column {col}: repeated hashes")
            out.append((int(col), hashes))
    except (TypeError, ValueError) as exc:
        raise InvalidModelError(f"category_hashes: {str(exc)[:200]}") from None
    if len({c for c, _ in out}) != len(out):
        raise InvalidModelError("category_hashes: a column appears twice")
    return tuple(sorted(out))


def _divisor(v: Any) -> int:
    """Forest.output_divisor checked: an integer in [1, MAX_OUTPUT_DIVISOR] (not a bool)."""
    if not (type(v) is int or isinstance(v, np.integer)) or not 1 <= v <= MAX_OUTPUT_DIVISOR:
        raise InvalidModelError(f"output_divisor must be an integer in [1, {MAX_OUTPUT_DIVISOR}], "
                                f"got {v!r}"[:200])
    return int(v)


def _category_hashes_json(v: tuple[tuple[int, tuple[int, ...]], ...]) -> list:
    return [[c, list(h)] for c, h in v]


_INT_KINDS = {k: np.iinfo(k) for k in CATEGORY_KINDS if k.startswith(("int", "uint"))}


def _category_value_ok(kind: str, v: Any) -> bool:
    """Whether v is a value a category list of `kind` may hold (JSON scalars only, so the lists
    survive the artifacts' JSON unchanged; no NaN: pandas and the libraries keep no NaN
    category)."""
    t = type(v)
    if kind == "str":
        return t is str
    if kind in _INT_KINDS:
        return t is int and _INT_KINDS[kind].min <= v <= _INT_KINDS[kind].max
    if kind == "num":
        return (t is int or t is float) and math.isfinite(v)
    return t is str or t is bool or t is int or (t is float and math.isfinite(v))  # obj, json


def checked_category_values(v: Any, n_features: int) -> tuple[tuple[int, str, tuple[Any, ...]], ...]:
    """Forest.category_values checked: (column, kind, values) triples, columns distinct and in
    [0, n_features), kinds in CATEGORY_KINDS, values distinct JSON scalars of their kind (numpy
    scalars become Python ones); sorted by column."""
    out = []
    total = 0
    try:
        for entry in v:
            col, kind, values = entry
            if isinstance(col, np.integer):
                col = int(col)
            if type(col) is not int or not 0 <= col < n_features:
                raise ValueError(f"column {col!r} is not a feature index")
            if kind not in CATEGORY_KINDS:
                raise ValueError(f"column {col}: kind {kind!r} is not one of {CATEGORY_KINDS}")
            if isinstance(values, (str, bytes, dict)):
                raise ValueError(f"column {col}: values must be a list")
            values = tuple(x.item() if isinstance(x, np.generic) else x for x in values)
            total += len(values)
            if total > MAX_CATEGORY_VALUES:
                raise ValueError(f"more than {MAX_CATEGORY_VALUES} category values")
            bad = [x for x in values if not _category_value_ok(kind, x)]
            if bad:
                raise ValueError(f"column {col}: {bad[0]!r} is not a {kind} category value"[:200])
            # repeated values would make a value's code ambiguous (1 == 1.0 == True in "obj"
            # and "json" lists: Python's equality, as the libraries' lookups use it)
            if len(set(values)) != len(values) or (kind in ("obj", "json") and len(
                    {(type(x) is str, x) for x in values}) != len(values)):
                raise ValueError(f"column {col}: repeated category values")
            out.append((col, kind, values))
    except (TypeError, ValueError) as exc:
        raise InvalidModelError(f"category_values: {str(exc)[:200]}") from None
    if len({c for c, _, _ in out}) != len(out):
        raise InvalidModelError("category_values: a column appears twice")
    return tuple(sorted(out, key=lambda e: e[0]))


def category_values_json(v: tuple[tuple[int, str, tuple[Any, ...]], ...]) -> list:
    """Forest.category_values as JSON-able lists (checked_category_values reads them back)."""
    return [[c, k, list(vals)] for c, k, vals in v]


def _check_category_values(mode: str, v: tuple[tuple[int, str, tuple[Any, ...]], ...]) -> None:
    """category_values agree with pandas_categories: only the re-coding modes have them, each
    with its own kinds; LightGBM's lists are numbered 0, 1, ... (the frame's category columns
    in order)."""
    kinds = {"sklearn": ("obj", "num"), "lightgbm": ("json",),
             "xgboost": tuple(k for k in CATEGORY_KINDS if k == "str" or k in _INT_KINDS)}
    kinds["xgboost_inplace"] = kinds["xgboost"]
    allowed = kinds.get(mode, ())
    bad = [k for _, k, _ in v if k not in allowed]
    if bad:
        raise InvalidModelError(f"category_values of kind {bad[0]!r} with pandas_categories "
                                f"{mode!r} (expected kinds: {allowed or 'none'})")
    if mode == "lightgbm" and [c for c, _, _ in v] != list(range(len(v))):
        raise InvalidModelError("category_values for pandas_categories 'lightgbm' must be "
                                "numbered 0, 1, ... (the frame's category columns in order)")


def _params(v: Any) -> tuple[float, ...]:
    """transform_params as finite floats (JSON numbers or numpy scalars; not bools, strings)."""
    if isinstance(v, (str, bytes)) or not all(type(p) in (int, float) or isinstance(p, np.floating)
                                              for p in v):
        raise InvalidModelError(f"transform_params must be numbers, got {v!r}"[:200])
    out = tuple(float(p) for p in v)
    if not all(np.isfinite(out)):
        raise InvalidModelError(f"transform_params must be finite, got {out!r}"[:200])
    return out


def _check_base_link(link: Any, base: np.ndarray) -> None:
    """base_link is known and its base_score are probabilities it takes (strictly in (0, 1),
    as sklearn clips them to [eps, 1 - eps]; the binary links take one, multinomial >= 3)."""
    if link not in BASE_LINKS:
        raise InvalidModelError(f"base_link={link!r}; expected one of {BASE_LINKS}")
    if link == "identity":
        return
    n = len(base)
    if (n < 3) if link == "multinomial_logit" else (n != 1):
        raise InvalidModelError(f"base_link {link!r} takes {'>= 3' if link == 'multinomial_logit' else 'one'} "
                                f"probabilities, got {n}")
    if not np.all((base > 0) & (base < 1)):
        raise InvalidModelError(f"base_link {link!r} needs probabilities in (0, 1), got "
                                f"{base.tolist()!r}"[:200])


def _check_label_shape(f: Any) -> None:
    """A Forest's / Head's label_shape "column" goes with one set of classes picked by argmax."""
    if f.label_shape == "column" and (f.decision not in ("argmax_raw", "argmax_proba")
                                      or len(f.classes) != 1):
        raise InvalidModelError(f"label_shape 'column' needs decision argmax_raw / argmax_proba "
                                f"over one set of classes, not {f.decision!r} over {len(f.classes)}")


def _check_transform(f: Any) -> None:
    """A Forest's / Head's transform, its parameters and its decision agree (outputs.py)."""
    t, d, p = f.transform, f.decision, f.transform_params
    counts = (f.n_outputs,) if t == "weighted_median" else TRANSFORM_PARAMS.get(t, (0,))
    if len(p) not in counts:
        raise InvalidModelError(f"transform {t!r} takes {' or '.join(map(str, counts))} "
                                f"transform_params, got {len(p)}")
    pairs = {"samme": "samme", "iforest": "outlier"}
    if (pairs.get(t) or d) != d or (d in pairs.values() and pairs.get(t) != d):
        raise InvalidModelError(f"transform {t!r} with decision {d!r}: 'samme' goes with "
                                "'samme', 'iforest' with 'outlier'")
    if t == "samme":
        widths = [len(c) for c in f.classes]
        if len(widths) != 1 or (f.n_outputs == 1) != (widths[0] == 2) or p[0] == 0:
            raise InvalidModelError(f"transform 'samme' needs one target (one margin for 2 classes, "
                                    f"one per class for more) and a non-zero weight sum; got "
                                    f"classes {widths}, n_outputs={f.n_outputs}, {p}")
    if t == "weighted_median" and (d != "none" or not all(math.isfinite(v) and v >= 0 for v in p)):
        raise InvalidModelError(f"transform 'weighted_median' goes with decision 'none' and takes "
                                f"finite weights >= 0; got decision {d!r}, weights {list(p)[:8]!r}")
    if t == "iforest" and (f.n_outputs != 1 or min(p[:-1]) < 0
                           or (len(p) == 3 and not all(v == int(v) and v < 2 ** 53 for v in p[:2]))):
        raise InvalidModelError(f"transform 'iforest' needs one output and a denominator >= 0 "
                                "(or its n_estimators and max_samples: integers >= 0); "
                                f"got n_outputs={f.n_outputs}, {p}")


#: why a backend alone does not compile a forest with linear leaves
LINEAR_NO_ARTIFACT = ("linear_tree models (linear leaves): a backend's kernel alone finds only the "
                      "leaves; compile them with treecomp.compile (or `treecomp compile`), whose "
                      "Predictor evaluates the leaves and saves .so / .tc artifacts (treecomp.linear)")


def legacy_exp_lib(transform: str) -> str:
    """exp_lib for files written before it existed, as they were evaluated then: float64
    sigmoids natively with libm, the other float64 transforms with numpy."""
    return "libm" if transform in ("sigmoid", "sigmoid2") else "numpy"


def head_of(forest: Forest, linear_ok: bool = False) -> Head:
    """The Head of a kernel computing `forest`. Backends call it, so a forest with linear
    leaves, which no kernel computes, is refused here unless the caller (treecomp.linear)
    evaluates them itself."""
    if forest.is_linear and not linear_ok:
        raise UnsupportedModelError(LINEAR_NO_ARTIFACT)
    return Head(n_features=forest.n_features, n_outputs=forest.n_outputs,
                input_dtype=forest.input_dtype, accumulate_dtype=forest.accumulate_dtype,
                transform=forest.transform, decision=forest.decision, classes=forest.classes,
                feature_names=forest.feature_names, allow_nan=forest.allow_nan,
                digest=forest.digest(), n_trees=forest.n_trees,
                pandas_categories=forest.pandas_categories, exp_lib=forest.exp_lib,
                reject_inf=forest.reject_inf, transform_params=forest.transform_params,
                base_link=forest.base_link,
                base_score=tuple(forest.base_score.tolist()) if forest.base_link != "identity" else (),
                category_hashes=forest.category_hashes, output_divisor=forest.output_divisor,
                input_rule=forest.input_rule, label_shape=forest.label_shape,
                category_values=forest.category_values)
