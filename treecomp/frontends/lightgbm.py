"""LightGBM frontend: Booster / LGBMModel objects and LightGBM text model files -> Forest.

Everything goes through LightGBM's text model format (`booster.model_to_string()` for live
objects), parsed here without importing lightgbm, so `parse("model.txt")` works where LightGBM
is not installed.

Prediction semantics reproduced (LightGBM 4.7, `Tree::GetLeaf` / `NumericalDecision` /
`CategoricalDecision` in include/LightGBM/tree.h and the C API row readers; every point is pinned
by tests/test_frontend_lightgbm.py against the installed library):

- Rows are float64. Before any tree sees a row, the C API drops every value with
  |x| <= kZeroThreshold (1e-35f, i.e. 1.0000000180025095e-35 as a double) as a "sparse zero", so
  the trees see exactly 0.0 for it. The IR compares the raw value, so a numeric threshold t in
  [-kZ, kZ) is moved to kZ (t >= 0) or to the largest double below -kZ (t < 0): both send every
  value of the band the way 0.0 goes and change nothing else.
- Numeric split: `x <= threshold` goes left. decision_type bits: 1 categorical, 2 default_left,
  (>> 2) & 3 the missing type:
    None (0): NaN is replaced by 0.0, so NaN goes where 0.0 goes: default_left = (0.0 <= t).
    Zero (1): NaN and |x| <= kZ go the default way. The IR has no "zero goes default" rule;
              a node is still exact when the zero band lies on the default side of one shifted
              threshold (see `_zero_missing`); any other node raises UnsupportedModelError.
    NaN (2):  NaN goes the default way.
- Categorical split: c = (int)x (truncation toward zero; on x86 NaN, +/-inf and |x| >= 2**31
  give INT_MIN); c < 0 goes right, else left iff bit c of the node's bitset is set (bits
  beyond the bitset: right). So NaN and negatives go right, whatever the missing type.
  IR: cat_bits padded to the tree's widest bitset, cat_other_left=False, default_left=False.
  Known gap: x in (-1, 0) is category 0 to LightGBM ((int)-0.5 == 0) but "invalid" (right) to
  the IR; it only matters where category 0 goes left.
- Leaves are ~index in left_child/right_child; nodes are renumbered breadth first (children
  after parents) with a level-by-level numpy pass (no recursion).
- Raw score = sum of the trees in float64 in tree order, starting at 0 (boost_from_average is
  already folded into the first trees). Tree i adds to class i % num_tree_per_iteration.
  Random-forest mode (`average_output`) divides by the number of iterations before the
  transform; LightGBM's `raw_score=True` output is the undivided sum (the IR's raw is divided).
- Objectives: regression/regression_l1/huber/fair/quantile/mape/lambdarank/rank_xendcg/custom
  -> identity; poisson/gamma/tweedie -> exp; binary and cross_entropy -> sigmoid (binary
  `sigmoid:2` -> "sigmoid2", other scales refused); multiclass -> softmax; multiclassova ->
  per-class sigmoid. `reg_sqrt` ("... sqrt") and cross_entropy_lambda are refused.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import InvalidModelError, NotFittedError, UnsupportedModelError
from ..ir import Forest, Tree, leaf_tree

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


# -- text format ------------------------------------------------------------------------------
def _split_model_text(text: str) -> tuple[dict[str, str], list[dict[str, str]], str]:
    """(header key/values, one key/value dict per tree, the text after the trees)."""
    if not isinstance(text, str):
        raise InvalidModelError("a LightGBM text model must be a str")
    end = text.find("\nend of trees")
    body, tail = (text, "") if end < 0 else (text[:end], text[end:])
    blocks = re.split(r"^Tree=", body, flags=re.MULTILINE)
    header_lines = blocks[0].splitlines()
    if not header_lines or header_lines[0].strip() != "tree":
        raise InvalidModelError("not a LightGBM text model (it must start with a 'tree' line)")
    header: dict[str, str] = {}
    for line in header_lines[1:]:
        line = line.strip()
        if line:
            key, sep, val = line.partition("=")
            header[key] = val if sep else ""
    trees = []
    for block in blocks[1:]:
        lines = block.splitlines()
        kv: dict[str, str] = {"Tree": lines[0].strip() if lines else ""}
        for line in lines[1:]:
            line = line.strip()
            if not line:
                continue
            key, sep, val = line.partition("=")
            if not sep:
                raise InvalidModelError(f"malformed line in LightGBM tree {kv['Tree']}: {line[:80]!r}")
            kv[key] = val
        trees.append(kv)
    if end < 0:
        raise InvalidModelError("truncated LightGBM text model: no 'end of trees' line")
    return header, trees, tail


def _ints(kv: dict[str, str], key: str, n: int, tree: str) -> np.ndarray:
    s = kv.get(key)
    if s is None:
        raise InvalidModelError(f"LightGBM tree {tree} has no {key!r} line")
    try:
        arr = np.array(s.split(), dtype=np.int64)
    except (ValueError, OverflowError):
        raise InvalidModelError(f"LightGBM tree {tree}: {key!r} holds non-integers") from None
    if n >= 0 and arr.shape != (n,):
        raise InvalidModelError(f"LightGBM tree {tree}: {key!r} has {arr.size} entries, expected {n}")
    return arr


def _floats(kv: dict[str, str], key: str, n: int, tree: str) -> np.ndarray:
    s = kv.get(key)
    if s is None:
        raise InvalidModelError(f"LightGBM tree {tree} has no {key!r} line")
    try:
        # Python's float() (which numpy uses for str -> float64) is correctly rounded, like
        # LightGBM's own parser, and the file holds %.17g: the round trip is exact.
        arr = np.array(s.split(), dtype=np.float64)
    except ValueError:
        raise InvalidModelError(f"LightGBM tree {tree}: {key!r} holds non-numbers") from None
    if arr.shape != (n,):
        raise InvalidModelError(f"LightGBM tree {tree}: {key!r} has {arr.size} entries, expected {n}")
    return arr


def _header_int(header: dict[str, str], key: str, default: int | None = None) -> int:
    if key not in header:
        if default is not None:
            return default
        raise InvalidModelError(f"LightGBM model header has no {key!r} line")
    try:
        return int(header[key])
    except ValueError:
        raise InvalidModelError(f"LightGBM model header: {key}={header[key]!r} is not an integer") from None


# -- objectives -------------------------------------------------------------------------------
def _objective(header: dict[str, str]) -> tuple[str, str]:
    """(objective name, IR transform) from the header's `objective=` line."""
    line = header.get("objective", "custom").strip() or "custom"
    tokens = line.split()
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
        return name, "softmax"
    if name in ("binary", "multiclassova", "multiclass_ova", "ova", "ovr"):
        sig = 1.0
        for p in params:
            k, _, v = p.partition(":")
            if k == "sigmoid":
                try:
                    sig = float(v)
                except ValueError:
                    raise InvalidModelError(f"LightGBM objective {line!r}: bad sigmoid value") from None
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


# -- trees ------------------------------------------------------------------------------------
def _zero_missing(thr: np.ndarray, dleft: np.ndarray, tree: str) -> np.ndarray:
    """Thresholds for missing_type=Zero nodes (NaN and |x| <= kZ go the default way).

    Exact rewrites, per node:
      default left,  t >= kZ:       the band is already left of t           -> t
      default left,  -kZ <= t < kZ: left iff x <= kZ                        -> kZ
      default right, t < -kZ:       the band is already right of t          -> t
      default right, -kZ <= t <= kZ: left iff x < -kZ                       -> prev(-kZ)
    Other nodes (the band on the other side of t from the default) would need two thresholds.
    """
    out = thr.copy()
    bad = (dleft & (thr < -K_ZERO)) | (~dleft & (thr > K_ZERO))
    if bad.any():
        raise UnsupportedModelError(
            f"LightGBM tree {tree}: missing_type=Zero (zero_as_missing=True) split at threshold "
            f"{float(thr[bad][0])!r} sends zero the {'left' if dleft[bad][0] else 'right'} way "
            "against the threshold; the IR has no rule for 'zero goes the default way' "
            "(supported: missing_type None and NaN, and Zero splits whose zero band is on the "
            "default side of the threshold)")
    band = (thr >= -K_ZERO) & (thr <= K_ZERO)
    out[dleft & band & (thr < K_ZERO)] = K_ZERO
    out[~dleft & band] = _BELOW_NEG_KZERO
    return out


def _convert_tree(kv: dict[str, str], n_features: int) -> Tree:
    name = kv.get("Tree", "?")
    if kv.get("is_linear", "0").strip() not in ("0", ""):
        raise UnsupportedModelError(
            f"LightGBM tree {name} is a linear tree (linear_tree=True, is_linear=1): leaves "
            "hold linear models; only constant-leaf trees are supported")
    n_leaves = _header_int(kv, "num_leaves")
    if n_leaves < 1:
        raise InvalidModelError(f"LightGBM tree {name}: num_leaves={n_leaves}")
    leaf_value = _floats(kv, "leaf_value", n_leaves, name)
    if n_leaves == 1:
        return leaf_tree(leaf_value[0])
    n_int = n_leaves - 1
    feat = _ints(kv, "split_feature", n_int, name)
    thr = _floats(kv, "threshold", n_int, name)
    dtype = _ints(kv, "decision_type", n_int, name)
    lc = _ints(kv, "left_child", n_int, name)
    rc = _ints(kv, "right_child", n_int, name)
    num_cat = _header_int(kv, "num_cat", 0)

    # unified ids: internal node i -> i, leaf j (stored as ~j) -> n_int + j
    def unify(c: np.ndarray) -> np.ndarray:
        u = np.where(c >= 0, c, n_int + ~c)
        if np.any(c >= n_int) or np.any(c < -n_leaves):
            raise InvalidModelError(f"LightGBM tree {name}: child index out of range")
        return u

    lu, ru = unify(lc), unify(rc)
    n = n_int + n_leaves
    # breadth-first renumbering, one numpy step per level; a malformed file (cycles, shared
    # children) is caught by the node budget and by Tree's own parent-count validation
    order = []
    frontier = np.zeros(1, np.int64)
    seen = 0
    while frontier.size:
        seen += frontier.size
        if seen > n:
            raise InvalidModelError(f"LightGBM tree {name}: child links do not form a tree")
        order.append(frontier)
        inner = frontier[frontier < n_int]
        frontier = np.stack([lu[inner], ru[inner]], axis=1).ravel()
    order = np.concatenate(order)
    if order.size != n or np.unique(order).size != n:
        raise InvalidModelError(f"LightGBM tree {name}: child links do not form a tree")
    new_of = np.empty(n, np.int64)
    new_of[order] = np.arange(n)
    inner_new = new_of[:n_int]
    leaf_new = new_of[n_int:]

    if np.any(feat < 0) or np.any(feat >= n_features):
        raise InvalidModelError(f"LightGBM tree {name}: split_feature out of range "
                                f"(max_feature_idx={n_features - 1})")
    if np.any(dtype < 0) or np.any(dtype > 15):
        raise InvalidModelError(f"LightGBM tree {name}: bad decision_type")
    is_cat = (dtype & 1).astype(bool)
    dleft = (dtype & 2).astype(bool)
    missing = (dtype >> 2) & 3
    if np.any(missing == 3):
        raise InvalidModelError(f"LightGBM tree {name}: missing type 3 in decision_type")

    num = ~is_cat
    t = thr.copy()
    # the C API turns |x| <= kZ into 0.0 before the trees see it (see the module docstring)
    band = num & (t >= -K_ZERO) & (t < K_ZERO)
    t[band] = np.where(t[band] >= 0, K_ZERO, _BELOW_NEG_KZERO)
    default_left = np.zeros(n_int, bool)
    m_none = num & (missing == _MISSING_NONE)
    default_left[m_none] = 0.0 <= t[m_none]          # NaN is replaced by 0.0
    m_nan = num & (missing == _MISSING_NAN)
    default_left[m_nan] = dleft[m_nan]
    m_zero = num & (missing == _MISSING_ZERO)
    if m_zero.any():
        t[m_zero] = _zero_missing(thr[m_zero], dleft[m_zero], name)
        default_left[m_zero] = dleft[m_zero]
    if np.any(np.isnan(t[num])):
        raise InvalidModelError(f"LightGBM tree {name}: NaN threshold")

    cat_index = np.full(n, -1, np.int32)
    cat_bits = np.zeros((0, 1), np.uint32)
    cat_other_left = np.zeros(0, bool)
    if is_cat.any():
        if num_cat < 1:
            raise InvalidModelError(f"LightGBM tree {name}: categorical split but num_cat={num_cat}")
        bounds = _ints(kv, "cat_boundaries", num_cat + 1, name)
        words = _ints(kv, "cat_threshold", -1, name)
        if (bounds[0] != 0 or np.any(np.diff(bounds) < 1) or bounds[-1] != words.size
                or np.any(words < 0) or np.any(words > 0xFFFFFFFF)):
            raise InvalidModelError(f"LightGBM tree {name}: inconsistent cat_boundaries/cat_threshold")
        cat_nodes = np.flatnonzero(is_cat)
        cidx = thr[cat_nodes]
        if np.any(cidx != np.floor(cidx)) or np.any(cidx < 0) or np.any(cidx >= num_cat):
            raise InvalidModelError(f"LightGBM tree {name}: categorical threshold is not a "
                                    f"category-set index in [0, {num_cat})")
        cidx = cidx.astype(np.int64)
        n_words = int(np.diff(bounds).max())
        cat_bits = np.zeros((cat_nodes.size, n_words), np.uint32)
        for k, c in enumerate(cidx.tolist()):
            seg = words[bounds[c]:bounds[c + 1]]
            cat_bits[k, :seg.size] = seg
        cat_other_left = np.zeros(cat_nodes.size, bool)   # negatives, NaN, >= 2**31: right
        cat_index[inner_new[cat_nodes]] = np.arange(cat_nodes.size)
        t[cat_nodes] = 0.0

    left = np.full(n, -1, np.int32)
    right = np.full(n, -1, np.int32)
    left[inner_new] = new_of[lu]
    right[inner_new] = new_of[ru]
    feature = np.full(n, -1, np.int32)
    feature[inner_new] = feat
    threshold = np.zeros(n)
    threshold[inner_new] = t
    dl = np.zeros(n, bool)
    dl[inner_new] = default_left
    value = np.zeros(n)
    value[leaf_new] = leaf_value
    return Tree(left=left, right=right, feature=feature, threshold=threshold, default_left=dl,
                value=value, cat_index=cat_index, cat_bits=cat_bits, cat_other_left=cat_other_left)


# -- public entry points ----------------------------------------------------------------------
def parse_lightgbm_string(text: str, *, num_iteration: int | None = None,
                          classes: np.ndarray | None = None, provenance: str = "") -> Forest:
    """Parse LightGBM's text model format.

    num_iteration: use only the first `num_iteration` iterations (None or <= 0: all, which is
    what a Booster loaded from this text predicts with). classes: class labels for an
    LGBMClassifier (labels then come from predict_proba's argmax, as the wrapper does);
    None gives Booster semantics (predict = transformed scores, no labels).
    """
    header, tree_kvs, tail = _split_model_text(text)
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
    if "tree_sizes" in header and len(header["tree_sizes"].split()) != len(tree_kvs):
        raise InvalidModelError(f"LightGBM model lists {len(header['tree_sizes'].split())} tree "
                                f"sizes but holds {len(tree_kvs)} trees (truncated file?)")
    if not tree_kvs:
        raise InvalidModelError("LightGBM model holds no trees")
    if len(tree_kvs) % per_iter:
        raise InvalidModelError(f"LightGBM model holds {len(tree_kvs)} trees, not a multiple of "
                                f"num_tree_per_iteration={per_iter}")
    n_iter = len(tree_kvs) // per_iter
    if num_iteration is not None and 0 < num_iteration < n_iter:
        n_iter = int(num_iteration)
        tree_kvs = tree_kvs[:n_iter * per_iter]
    objective, transform = _objective(header)
    average = "average_output" in header
    if average and per_iter > 1:
        # LightGBM divides each class's sum by the number of iterations; the IR divides by the
        # number of trees (= iterations * classes here).
        raise UnsupportedModelError(
            f"LightGBM random-forest mode (average_output) with {per_iter} trees per iteration "
            "(multiclass) is not supported: LightGBM averages over iterations, the IR over trees; "
            "supported: average_output with one tree per iteration")
    if transform == "softmax" and per_iter != num_class:
        raise InvalidModelError(f"multiclass model with num_class={num_class} but "
                                f"num_tree_per_iteration={per_iter}")

    trees = tuple(_convert_tree(kv, n_features) for kv in tree_kvs)
    tree_output = np.arange(len(trees), dtype=np.int32) % per_iter

    decision, cls = "none", ()
    if classes is not None:
        classes = np.asarray(classes)
        if per_iter == 1 and len(classes) == 2 and transform in ("sigmoid", "sigmoid2"):
            decision = "proba_gt_half"   # argmax([1 - p, p]) == (p > 0.5) exactly (Sterbenz)
        elif (per_iter == len(classes) > 2 and transform in ("softmax", "sigmoid", "sigmoid2")):
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
    m = re.search(r"^pandas_categorical:(.*)$", tail, flags=re.MULTILINE)
    if m and m.group(1).strip() not in ("null", "[]", ""):
        notes.append("pandas categorical columns: pass category codes, not DataFrame categories")
    if provenance:
        notes.insert(0, provenance)
    # feature_names stay None on purpose: LightGBM takes DataFrame columns by position (4.7 never
    # reorders by name), while a Forest with names would reorder them.
    return Forest(trees=trees, n_features=n_features, n_outputs=per_iter, tree_output=tree_output,
                  base_score=np.zeros(per_iter), input_dtype="float64", comparison="<=",
                  accumulate_dtype="float64", average=average, transform=transform,
                  decision=decision, classes=cls, feature_names=None, allow_nan=True,
                  provenance="; ".join(notes))


def parse_lightgbm_file(path: str | os.PathLike) -> Forest:
    """Parse a LightGBM text model file (`booster.save_model(...)`), without lightgbm."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise InvalidModelError(f"{p.name} is not a LightGBM text model (not UTF-8 text)") from None
    return parse_lightgbm_string(text, provenance=f"file {p.name}")


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
    is_classifier = hasattr(model, "classes_") and hasattr(model, "predict_proba")
    prov = f"lightgbm.{type(model).__name__} (num_iteration={n})"
    if not is_classifier:
        return parse_lightgbm_string(text, provenance=prov)
    if callable(getattr(model, "objective", None)) or callable(getattr(model, "_objective", None)):
        raise UnsupportedModelError(
            f"{type(model).__name__} with a custom (callable) objective is not supported: "
            "LightGBM's predict/predict_proba then return raw scores; parse model.booster_")
    return parse_lightgbm_string(text, classes=np.asarray(model.classes_), provenance=prov)


PARSERS = {
    "Booster": parse_booster,
    "LGBMClassifier": parse_lgbm_model,
    "LGBMRegressor": parse_lgbm_model,
    "LGBMRanker": parse_lgbm_model,
    "LGBMModel": parse_lgbm_model,
}
