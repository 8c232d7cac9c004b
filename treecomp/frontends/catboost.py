"""CatBoost frontend: CatBoost / CatBoostClassifier / CatBoostRegressor / CatBoostRanker objects
and CatBoost model files (JSON export, `.cbm`) -> Forest.

Files are read without catboost: the binary `.cbm` (flatbuffers: "CBM1", the core's size, a
TModelCore table; read by `cbm_document`) and the JSON export (`save_model(..., format="json")`,
numbers parsed as CatBoost's own reader parses them: see `rapidjson_double`). Live objects are
saved to a temporary .cbm and read the same way, so the Forest is the model in memory.

Prediction semantics (CatBoost 1.2.10, catboost/libs/model/cpu/quantization.h and
evaluator_impl.cpp, scale_and_bias.cpp, eval_processing.h, libs/eval_result/eval_helpers.cpp;
each point pinned by tests/test_frontend_catboost.py against the installed library):

- Rows are cast to float32. A float feature is binarised against its float32 borders,
  bin = #{borders b : x > b}; a split on border k of a feature goes "true" (right in the IR)
  iff bin > k, i.e. iff x > border_k in float32 (features with more than 254 borders are
  binarised in several bytes of 254 borders each: the same test; checked with 1529 borders).
  IR: input float32, `x <= border` goes left; borders must be strictly increasing.
- NaN: a feature with has_nans and nan_value_treatment AsTrue (nan_mode Max) is replaced by
  +inf, so NaN goes right; AsFalse (nan_mode Min) by -inf; a feature without has_nans, or AsIs
  (nan_mode Forbidden: predict still accepts NaN) compares NaN > border (false): left. +/-inf
  compare normally.
- Oblivious (symmetric) trees: level d of `splits` sets bit d of the leaf index (split 0 is the
  least significant bit); leaf_values are leaf-major, `dim` values per leaf. IR: a complete tree
  of 2^depth leaves in heap order, root = the last split (most significant bit), so the leaves
  left to right are leaf indices 0 .. 2^depth - 1. Non-symmetric trees (grow_policy Depthwise /
  Lossguide; JSON "trees", nested split / left / right, leaves {"value"}) go right iff
  x > border, as above; renumbered in preorder (children after parents), iteratively.
- Raw = sum of the trees in float64, tree order, from 0; then CatBoost's ApplyScaleAndBias:
  `raw += bias` (per dimension) when scale == 1. The IR adds the bias as a trailing single-leaf
  tree (so it is added after the trees, as CatBoost does, not as a base score before them).
  scale != 1 (set_scale_and_bias, sum_models with weights) computes `scale * sum + bias`,
  which the IR cannot express exactly: refused (UnsupportedModelError).
- Outputs: Logloss / CrossEntropy probability = 1 / (1 + exp(-raw)) with libm's exp ("sigmoid",
  exp_lib libm); predict_proba = (1 - p, p); Class = raw > 0 ("raw_gt_0"). MultiClass
  probability = exp(raw - max) with CatBoost's FastExpWithInfInplace, summed left to right,
  divided ("softmax_seq"); Class = first argmax of raw ("argmax_raw").
  MultiClassOneVsAll: per-class libm sigmoid, argmax of raw. MultiLogloss / MultiCrossEntropy
  (multi-label): per-label libm sigmoid, Class = int64 0 / 1 per label (raw > 0), shape
  (n, labels) ("raw_gt_0_each"). Poisson / Tweedie: the regressor's
  default prediction is Exponent = FastExpWithInfInplace(raw) ("exp"). Other regression and
  ranking losses (RMSE, MAE, Quantile, MultiQuantile, Expectile, LogLinQuantile, Huber, Lq,
  MAPE, RMSPE, LogCosh, SurvivalAft, MultiRMSE, YetiRank, ...): raw ("identity").
  FastExpWithInfInplace is herumi fmath's expd_v on x86-64 (exp_lib "fmath",
  treecomp.outputs.fmath_exp) and std::exp elsewhere (exp_lib "libm").
- Labels: class_params.class_names with CatBoost's predict dtypes: Integer -> int64, Float ->
  float64, Boolean -> bool, String -> object (str). MultiClass / MultiClassOneVsAll predict
  returns them as a column, shape (n, 1) (label_shape "column").
- Which estimator a file stands for: Logloss / CrossEntropy / MultiClass / MultiClassOneVsAll /
  MultiLogloss / MultiCrossEntropy files predict as CatBoostClassifier, others as
  CatBoostRegressor. A generic `CatBoost` or `CatBoostRanker` object predicts RawFormulaVal
  (its default): identity.

One-hot categorical features (one_hot_max_size at least the category count): a split tests
"CalcCatFeatureHash(value) == hash" and goes right when true. The JSON export lists a one-hot
feature's hashes (int32) as "values" of its categorical feature, a split as {"split_type":
"OneHotFeature", "cat_feature_index", "value", "split_index"}; a .cbm holds them in
TModelTrees.OneHotFeatures (TOneHotFeature {Index, Values: [int32], StringValues}), the split
indices after every float border (TModelTrees::GetBinFeatures: borders, then one-hot values).
IR: the column's hashes, deduplicated in model order, are Forest.category_hashes; the Predictor
turns a value into the index of its hash there, or the count for an unseen value
(treecomp.categories); a one-hot node is a categorical split whose left set is every code but
its own, so an unseen category goes left (false) at every one-hot split, as in CatBoost, where
it falls in bin 0. A value listed twice (hand-edited files; CatBoost reads them) is binarised
as CatBoost does, the OR of its positions + 1 per block of 254 values, so a split on position
p goes right for the codes whose byte equals p + 1 (_one_hot_right_sets). An oblivious tree
without splits is written by CatBoost as "splits": null. Categorical features that no split uses are still encoded (catboost refuses
a float there too).

Refused with UnsupportedModelError naming the feature: categorical features encoded as CTRs
(they need the model's target statistics), text and embedding features, scale != 1, a binary probability threshold other than 0.5
(`set_probability_threshold`), RMSEWithUncertainty (its default prediction exponentiates one
of its two columns).

Inputs: CatBoost accepts arrays wider than the model and reorders DataFrame columns by name;
a Predictor needs exactly the model's columns, and for a model trained with column names, a
DataFrame with those names in that order (else ValueError, never a silent relabelling).
Categorical columns take what catboost's Python package takes (treecomp.categories): str,
bytes, integers and bools (True is "1") in object arrays, lists of rows, integer / bool / str
numpy arrays and DataFrames (category and string columns by value); floats, NaN and None in
them, float arrays and nullable Int64 columns raise TypeError, as catboost refuses them.

JSON numbers as CatBoost reads them: CatBoost 1.2 writes doubles with 17 significant digits and
reads them back with RapidJSON's default (not full-precision) parser, which is not correctly
rounded (the 17-digit significand is rounded to a double, then divided by a power of ten), so
`load_model(f, format="json")` yields leaf values up to a few ULP from the model that wrote the
file (measured: 21-29% of rows of a 200-tree model predict differently after the round trip).
Files are parsed with that arithmetic (`rapidjson_double`), so treecomp predicts what CatBoost
predicts from the file; .cbm files and live objects carry the exact binary values.
"""

from __future__ import annotations

import json
import math
import os
import platform
import re
import struct
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import InvalidModelError, NotFittedError, UnsupportedModelError
from ..ir import MAX_CATEGORY_HASHES, Forest, Tree, leaf_tree

#: CatBoost's deepest tree (symmetric or not); deeper files are refused before any allocation
MAX_DEPTH = 16
_CLASSIFICATION = ("Logloss", "CrossEntropy", "MultiClass", "MultiClassOneVsAll", "MultiLogloss",
                   "MultiCrossEntropy")
#: CatBoostRegressor predicts Exponent for these (CatBoostRegressor._get_default_prediction_type)
_EXPONENT_PREFIXES = ("Poisson", "Tweedie")
#: its default prediction transforms one of two columns (exp(2 * raw[1])): not an IR transform
_REFUSED_LOSSES = ("RMSEWithUncertainty",)
_LABEL_DTYPES = {"Integer": np.int64, "Float": np.float64, "Boolean": np.bool_}
_READ_ERRORS = (KeyError, TypeError, ValueError, IndexError, AttributeError, OverflowError,
                RecursionError)


# -- numbers as CatBoost's JSON reader reads them -----------------------------------------------
_NUMBER = re.compile(r"(-?)(0|[1-9][0-9]*)(?:\.([0-9]+))?(?:[eE]([+-]?)([0-9]+))?")
_POW10 = [float(f"1e{i}") for i in range(309)]  # RapidJSON's Pow10 table: correctly rounded


def _fast_path(d: float, p: int) -> float:
    if p < -308:
        return 0.0
    return d * _POW10[p] if p >= 0 else d / _POW10[-p]


def rapidjson_double(text: str) -> float:
    """The double RapidJSON 1.1's Reader::ParseNumber yields for a JSON number with a fraction
    or exponent, without kParseFullPrecisionFlag (library/cpp/json's ReadJsonTree, which
    CatBoost's JSON model loader uses): the significand is accumulated in a uint64 while it is
    below 2^53, further digits (up to 17 significant) in a double as d * 10 + digit, then
    StrtodNormalPrecision multiplies or divides by the correctly rounded power of ten."""
    m = _NUMBER.fullmatch(text)
    if m is None:
        raise InvalidModelError(f"malformed JSON number {text[:40]!r}")
    minus, ipart, frac, esign, edigits = m.groups()
    sig = 0
    use_double = False
    d = 0.0
    i64 = int(ipart[0])
    k = 1
    # the integer part: 32-bit, then 64-bit, then double accumulation (limits as RapidJSON's)
    lim = (0x0CCCCCCCCCCCCCCC, "8") if minus else (0x1999999999999999, "5")
    while k < len(ipart):
        c = ipart[k]
        if i64 >= lim[0] and (i64 != lim[0] or c > lim[1]):
            d = float(i64)
            use_double = True
            break
        i64 = i64 * 10 + ord(c) - 48
        sig += 1
        k += 1
    if use_double:
        for c in ipart[k:]:
            if d >= 1.7976931348623157e307:
                raise InvalidModelError(f"JSON number {text[:40]!r} is too big")
            d = d * 10 + (ord(c) - 48)
    exp_frac = 0
    if frac is not None:
        k = 0
        if not use_double:
            while k < len(frac) and i64 <= 0x1FFFFFFFFFFFFF:
                i64 = i64 * 10 + ord(frac[k]) - 48
                exp_frac -= 1
                if i64 != 0:
                    sig += 1
                k += 1
            d = float(i64)
            use_double = True
        for c in frac[k:]:
            if sig < 17:
                d = d * 10.0 + (ord(c) - 48)
                exp_frac -= 1
                if d > 0.0:
                    sig += 1
    exp = 0
    if edigits is not None:
        if not use_double:
            d = float(i64)
            use_double = True
        if esign == "-":
            exp = -min(int(edigits[:10]), 214748364)
        else:
            exp = int(edigits[:10])
            if exp > 308 - exp_frac:
                raise InvalidModelError(f"JSON number {text[:40]!r} is too big")
    p = exp + exp_frac
    if p < -308:
        d = _fast_path(_fast_path(d, -308), p + 308)
    else:
        d = _fast_path(d, p)
    return -d if minus else d


def _refuse_constant(name: str) -> Any:
    raise InvalidModelError(f"{name} is not a JSON number (CatBoost's reader rejects it)")


def _loads(data: bytes | str, what: str) -> Any:
    try:
        return json.loads(data, parse_float=rapidjson_double,
                          parse_constant=_refuse_constant)
    except InvalidModelError as exc:
        raise InvalidModelError(f"{what}: {exc}") from None
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise InvalidModelError(f"{what} is not valid JSON: {exc}") from None


# -- reading the document ---------------------------------------------------------------------
def _f64(v: Any, where: str) -> float:
    """A JSON value read with TJsonValue::GetDouble: doubles as parsed, integers up to 2^53."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise InvalidModelError(f"{where}: expected a number, got {type(v).__name__}")
    if isinstance(v, int):
        if abs(v) > 1 << 53:
            raise InvalidModelError(f"{where}: integer {v} does not fit a double exactly")
        return float(v)
    if not math.isfinite(v):
        raise InvalidModelError(f"{where}: non-finite number")
    return v


def _int(v: Any, where: str, lo: int = 0, hi: int = 1 << 31) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or not lo <= v < hi:
        raise InvalidModelError(f"{where}: expected an integer in [{lo}, {hi}), got {str(v)[:40]}")
    return v


def _list(v: Any, where: str) -> list:
    if not isinstance(v, list):
        raise InvalidModelError(f"{where}: expected a JSON array, got {type(v).__name__}")
    return v


def _dict(v: Any, where: str) -> dict:
    if not isinstance(v, dict):
        raise InvalidModelError(f"{where}: expected a JSON object, got {type(v).__name__}")
    return v


def _info_json(info: dict, key: str) -> Any:
    """model_info values: objects in JSON exports (keys ending in "params"), strings otherwise."""
    v = info.get(key)
    if isinstance(v, str) and key.endswith("params"):
        try:
            return json.loads(v) if v else None
        except (ValueError, RecursionError):
            raise InvalidModelError(f"model_info.{key} is not valid JSON") from None
    return v


def _loss_name(info: dict) -> str:
    params = _info_json(info, "params")
    if not isinstance(params, dict):
        return ""
    loss = params.get("loss_function")
    if isinstance(loss, dict):
        loss = loss.get("type")
    return loss if isinstance(loss, str) else ""


def _features(doc: dict) -> tuple[list, list, int, list[str]]:
    """Float features as (input column, float32 borders, NaN goes right); one-hot features as
    (input column, categorical feature index, uint32 hashes in the model's order), in the order
    of their split indices; the number of input columns and the feature ids by column. Refuses
    CTR-encoded categorical, text and embedding features."""
    fi = _dict(doc.get("features_info", {}), "features_info")
    cats = _list(fi.get("categorical_features", []), "features_info.categorical_features")
    if fi.get("ctrs") or doc.get("ctr_data"):
        ctr = [c for c in cats if isinstance(c, dict) and not c.get("values")]
        names = [str(c.get("feature_id") or c.get("flat_feature_index", "?")) for c in ctr][:5]
        raise UnsupportedModelError(
            "CatBoost categorical features encoded as CTRs (target statistics) are not supported"
            f"{' (' + ', '.join(names) + ')' if names else ''}: only one-hot encoded ones are "
            "(train with one_hot_max_size at least the number of categories)")
    for key, what in (("text_features", "text features"), ("embedding_features", "embedding features"),
                      ("estimated_features", "estimated (text / embedding) features")):
        if fi.get(key):
            names = [str(f.get("feature_id") or f.get("feature_index", "?")) if isinstance(f, dict) else "?"
                     for f in fi[key]][:5] if isinstance(fi[key], list) else []
            named = f" ({', '.join(names)})" if names else ""
            raise UnsupportedModelError(f"CatBoost models with {what} are not supported{named}")
    out, ids_of = [], {}
    n_cols = 0
    for i, f in enumerate(_list(fi.get("float_features", []), "features_info.float_features")):
        where = f"float feature {i}"
        f = _dict(f, where)
        if _int(f["feature_index"], where) != i:
            raise InvalidModelError(f"{where}: feature_index {f['feature_index']} out of order")
        flat = _int(f["flat_feature_index"], where, 0, 1 << 24)
        borders = np.array([_f64(b, f"{where} border") for b in _list(f["borders"], where)], np.float64)
        b32 = borders.astype(np.float32)  # CatBoost stores float borders (FromJson<float>)
        if np.any(~np.isfinite(b32)):
            raise InvalidModelError(f"{where}: a border is not finite in float32")
        if np.any(np.diff(b32) <= 0):
            raise InvalidModelError(f"{where}: borders are not strictly increasing")
        treat = f.get("nan_value_treatment", "AsIs")
        if treat not in ("AsIs", "AsFalse", "AsTrue"):
            raise InvalidModelError(f"{where}: nan_value_treatment {str(treat)[:20]!r}")
        has_nans = f.get("has_nans", False)
        if not isinstance(has_nans, bool):
            raise InvalidModelError(f"{where}: has_nans must be true or false")
        out.append((flat, b32, has_nans and treat == "AsTrue"))
        ids_of[flat] = f.get("feature_id") if isinstance(f.get("feature_id"), str) else ""
        n_cols = max(n_cols, flat + 1)
    cat_cols = []
    for i, f in enumerate(cats):
        where = f"categorical feature {i}"
        f = _dict(f, where)
        if _int(f["feature_index"], where) != i:
            raise InvalidModelError(f"{where}: feature_index {f['feature_index']} out of order")
        flat = _int(f["flat_feature_index"], where, 0, 1 << 24)
        cat_cols.append(flat)
        ids_of[flat] = f.get("feature_id") if isinstance(f.get("feature_id"), str) else ""
        n_cols = max(n_cols, flat + 1)
    # one-hot features in split-index order: the .cbm's own list, or the JSON's categorical
    # features that list values (CatBoost's JSON writer folds one-hot values into them)
    one_hot = doc.get("one_hot_features")
    if one_hot is None:
        one_hot = [{"cat_feature_index": i, "values": c["values"]} for i, c in enumerate(cats)
                   if isinstance(c, dict) and c.get("values")]
    onehots = []
    for i, f in enumerate(_list(one_hot, "one-hot features")):
        where = f"one-hot feature {i}"
        f = _dict(f, where)
        c = _int(f["cat_feature_index"], where, 0, len(cat_cols))
        hashes = [_int(v, f"{where} value", -(1 << 31), 1 << 32) & 0xFFFFFFFF
                  for v in _list(f["values"], where)]
        if len(hashes) > MAX_CATEGORY_HASHES:
            raise InvalidModelError(f"{where}: {len(hashes)} values")
        onehots.append((cat_cols[c], c, hashes))
    if len({f[0] for f in onehots}) != len(onehots):
        raise InvalidModelError("two one-hot features read the same categorical feature")
    if not out and not cat_cols:
        raise InvalidModelError("the CatBoost model has no features")
    if len(set(ids_of)) != len(out) + len(cat_cols):
        raise InvalidModelError("two features share a flat_feature_index")
    return out, onehots, cat_cols, n_cols, [ids_of.get(j, "") for j in range(n_cols)]


#: CatBoost's one-hot values per bin byte (MAX_VALUES_PER_BIN)
_ONE_HOT_BLOCK = 254


def _one_hot_right_sets(codes: list[int]) -> list[tuple[int, ...]]:
    """For each position of a one-hot feature's value list (`codes`: each value's index among
    the distinct hashes), the codes whose rows go right at a split on that position.

    CatBoost 1.2 (quantization.h OneHotBinsFromTransposedCatFeatures) binarises a row per block
    of 254 values as the OR of (position % 254 + 1) over the positions holding its hash, and a
    split on position p goes right iff that byte equals p % 254 + 1 (model.cpp: XorMask
    ~SplitIdx, SplitIdx 0xff). Values listed once: the position's own code. A value listed
    twice ORs its positions: its rows may match neither, or another value's position."""
    bins: dict[tuple[int, int], int] = {}
    for p, c in enumerate(codes):
        key = (c, p // _ONE_HOT_BLOCK)
        bins[key] = bins.get(key, 0) | (p % _ONE_HOT_BLOCK + 1)
    matching: dict[tuple[int, int], list[int]] = {}
    for (c, block), byte in bins.items():
        matching.setdefault((block, byte), []).append(c)
    return [tuple(sorted(matching.get((p // _ONE_HOT_BLOCK, p % _ONE_HOT_BLOCK + 1), ())))
            for p in range(len(codes))]


class _Table:
    """CatBoost's bin-feature list (TModelTrees::GetBinFeatures, indexed by split_index): every
    border of every float feature, features in order, then every value of every one-hot
    feature. Per entry: input column, float32 border (0 for one-hot), NaN goes right, category
    code (-1 for borders: the value's index among its column's distinct hashes), for one-hot
    entries the codes that go right (_one_hot_right_sets: the entry's own code unless a value
    is listed twice), the categorical feature index and hash (checked against JSON splits)."""

    def __init__(self, features, onehots, cat_cols):
        cols = [np.full(len(b), c, np.int32) for c, b, _ in features]
        borders = [b.astype(np.float64) for _, b, _ in features]
        nan_right = [np.full(len(b), r, bool) for _, b, r in features]
        code = [np.full(len(b), -1, np.int64) for _, b, _ in features]
        self.cat_feature = [np.full(len(b), -1, np.int64) for _, b, _ in features]
        self.hash = [np.zeros(len(b), np.int64) for _, b, _ in features]
        hashes_of: dict[int, tuple[int, ...]] = {c: () for c in cat_cols}
        self.right: list[tuple[int, ...] | None] = [None] * sum(len(b) for _, b, _ in features)
        for col, c, hashes in onehots:
            distinct = tuple(dict.fromkeys(hashes))  # a category is its hash's first position
            hashes_of[col] = distinct
            index = {h: k for k, h in enumerate(distinct)}
            codes = [index[h] for h in hashes]
            cols.append(np.full(len(hashes), col, np.int32))
            borders.append(np.zeros(len(hashes)))
            nan_right.append(np.zeros(len(hashes), bool))
            code.append(np.array(codes, np.int64))
            self.right += _one_hot_right_sets(codes)
            self.cat_feature.append(np.full(len(hashes), c, np.int64))
            self.hash.append(np.array(hashes, np.int64))
        cat = lambda parts, dt: np.concatenate(parts).astype(dt) if parts else np.zeros(0, dt)  # noqa: E731
        self.col, self.border = cat(cols, np.int32), cat(borders, np.float64)
        self.nan_right, self.code = cat(nan_right, bool), cat(code, np.int64)
        self.cat_feature, self.hash = cat(self.cat_feature, np.int64), cat(self.hash, np.int64)
        self.category_hashes = tuple(sorted(hashes_of.items()))

    def __len__(self) -> int:
        return len(self.col)

    def tree(self, left, right, inner: np.ndarray, ks: np.ndarray, value: np.ndarray) -> Tree:
        """A Tree whose internal nodes `inner` test bin features `ks`: numeric x > border goes
        right; one-hot "the row's bin byte == the position's" goes right, so the categorical
        node's left set is every code but those of its right set (unknown categories, code
        len(hashes), go left with them: their bin byte is 0)."""
        n = len(left)
        feature = np.full(n, -1, np.int32)
        feature[inner] = self.col[ks]
        thr = np.zeros(n)
        dl = np.zeros(n, bool)
        dl[inner] = ~self.nan_right[ks]
        code = self.code[ks]
        num = code < 0
        thr[inner[num]] = self.border[ks[num]]
        cat_index = np.full(n, -1, np.int32)
        sets = [self.right[k] for k in ks[~num].tolist()]
        uniq = sorted(set(sets))
        at = {r: i for i, r in enumerate(uniq)}
        cat_index[inner[~num]] = [at[r] for r in sets]
        top = max((c for r in uniq for c in r), default=0)
        bits = np.full((len(uniq), top // 32 + 1), 0xFFFFFFFF, np.uint32)
        for i, r in enumerate(uniq):
            for c in r:
                bits[i, c // 32] &= ~np.uint32(1 << (c % 32))
        return Tree(left=left, right=right, feature=feature, threshold=thr, default_left=dl,
                    value=value, cat_index=cat_index, cat_bits=bits,
                    cat_other_left=np.ones(len(uniq), bool))


def _split(s: Any, table: _Table, where: str) -> int:
    """The split_index of a split object (what CatBoost's loader reads), checked against the
    float_feature_index / border or cat_feature_index / value written beside it."""
    s = _dict(s, where)
    kind = s.get("split_type")  # JSON files write it; .cbm documents have the index only
    if kind not in (None, "FloatFeature", "OneHotFeature"):
        raise UnsupportedModelError(f"CatBoost split type {str(kind)[:30]!r} (CTR) is not supported")
    k = _int(s["split_index"], where, 0, len(table))
    if kind is not None and (kind == "OneHotFeature") != (table.code[k] >= 0):
        raise InvalidModelError(f"{where}: split type {kind} does not match split_index {k}")
    if "border" in s and np.float32(_f64(s["border"], where)) != np.float32(table.border[k]):
        raise InvalidModelError(f"{where}: border {s['border']} does not match split_index {k}")
    if kind == "OneHotFeature" and (
            ("value" in s and _int(s["value"], where, -(1 << 31), 1 << 32) & 0xFFFFFFFF != table.hash[k])
            or ("cat_feature_index" in s and s["cat_feature_index"] != table.cat_feature[k])):
        raise InvalidModelError(f"{where}: one-hot value {str(s.get('value'))[:20]} does not "
                                f"match split_index {k}")
    return k


def _splits(t: dict, where: str) -> list:
    """An oblivious tree's splits. CatBoost writes a tree without splits as "splits": null
    (its JSON writer never fills the array) and reads null, like an absent key, as none."""
    v = t.get("splits")
    return [] if v is None else _list(v, where)


def _oblivious_tree(t: Any, i: int, table: _Table, dim: int) -> Tree:
    where = f"oblivious tree {i}"
    t = _dict(t, where)
    splits = _splits(t, where)
    depth = len(splits)
    if depth > MAX_DEPTH:
        raise InvalidModelError(f"{where}: depth {depth} > {MAX_DEPTH}")
    leaves = _list(t["leaf_values"], where)
    if len(leaves) != dim << depth:
        raise InvalidModelError(f"{where}: {len(leaves)} leaf values for depth {depth} and "
                                f"{dim} dimension(s)")
    vals = np.array([_f64(v, where) for v in leaves], np.float64).reshape(1 << depth, dim)
    if depth == 0:
        return leaf_tree(vals[0])
    ks = np.array([_split(s, table, f"{where} split {d}") for d, s in enumerate(splits)], np.int64)
    n_inner = (1 << depth) - 1
    n = 2 * n_inner + 1
    level = np.floor(np.log2(np.arange(1, n_inner + 1))).astype(np.int64)  # heap level of node
    k = ks[depth - 1 - level]  # the root tests the most significant bit
    idx = np.arange(n_inner)
    left = np.full(n, -1, np.int32)
    right = np.full(n, -1, np.int32)
    left[:n_inner] = 2 * idx + 1
    right[:n_inner] = 2 * idx + 2
    value = np.zeros((n, dim))
    value[n_inner:] = vals
    return table.tree(left, right, idx, k, value)


def _nonsymmetric_tree(root: Any, i: int, table: _Table, dim: int) -> Tree:
    where = f"tree {i}"
    nodes: list[dict] = []
    left: list[int] = []
    right: list[int] = []
    depth_of: list[int] = []
    stack = [(root, -1, False, 0)]  # (node, parent, is right child, depth): preorder, no recursion
    while stack:
        node, parent, is_right, d = stack.pop()
        node = _dict(node, where)
        me = len(nodes)
        if me >= 1 << (MAX_DEPTH + 2) or d > MAX_DEPTH:
            raise InvalidModelError(f"{where}: deeper than {MAX_DEPTH} levels")
        nodes.append(node)
        left.append(-1)
        right.append(-1)
        depth_of.append(d)
        if parent >= 0:
            (right if is_right else left)[parent] = me
        if "value" not in node:
            stack.append((node["right"], me, True, d + 1))
            stack.append((node["left"], me, False, d + 1))
    n = len(nodes)
    inner, ks = [], []
    value = np.zeros((n, dim))
    for j, node in enumerate(nodes):
        if "value" in node:
            v = node["value"]
            v = v if isinstance(v, list) else [v]  # CatBoost reads a scalar or an array
            if len(v) != dim:
                raise InvalidModelError(f"{where}: a leaf has {len(v)} values, expected {dim}")
            value[j] = [_f64(x, where) for x in v]
        else:
            inner.append(j)
            ks.append(_split(node["split"], table, f"{where} node {j}"))
    if n == 1:
        return leaf_tree(value[0])
    return table.tree(np.array(left, np.int32), np.array(right, np.int32), np.array(inner, np.int64),
                      np.array(ks, np.int64), value)


def _labels(info: dict, n: int) -> np.ndarray:
    cp = _info_json(info, "class_params")
    if not isinstance(cp, dict):
        return np.arange(n, dtype=np.int64)
    names = cp.get("class_names") or []
    to_label = cp.get("class_to_label")
    if not isinstance(names, list) or (to_label is not None and to_label != list(range(len(to_label)))):
        raise UnsupportedModelError("CatBoost class_params with a class_to_label map other than "
                                    "0..n-1 are not supported")
    if not names:
        return np.arange(n, dtype=np.int64)
    if len(names) != n:
        raise InvalidModelError(f"{len(names)} class names for {n} classes")
    kind = cp.get("class_label_type")
    if kind == "String":
        return np.array([str(s) for s in names], dtype=object)
    if kind not in _LABEL_DTYPES:
        raise UnsupportedModelError(f"CatBoost class_label_type {str(kind)[:20]!r} is not supported")
    return np.array(names, dtype=_LABEL_DTYPES[kind])


def _fast_exp_lib() -> str:
    """What CatBoost's FastExpWithInfInplace calls on this host: fmath on x86, std::exp else."""
    machine = platform.machine().lower()
    return "fmath" if machine in ("x86_64", "amd64", "i386", "i686", "x86") else "libm"


def forest_from_document(doc: Any, kind: str = "auto", source: str = "") -> Forest:
    """The Forest of a CatBoost JSON model document. kind: "classifier" / "regressor" (the
    sklearn-style wrappers' default predictions), "raw" (CatBoost.predict: RawFormulaVal) or
    "auto" (a file: classifier for classification losses, else regressor)."""
    try:
        return _forest(_dict(doc, "the CatBoost model"), kind, source)
    except (InvalidModelError, UnsupportedModelError):
        raise
    except _READ_ERRORS as exc:
        raise InvalidModelError(f"corrupt CatBoost model: {type(exc).__name__}: {str(exc)[:200]}") from None


def _forest(doc: dict, kind: str, source: str) -> Forest:
    info = _dict(doc.get("model_info", {}), "model_info")
    features, onehots, cat_cols, n_cols, ids = _features(doc)
    table = _Table(features, onehots, cat_cols)
    if "oblivious_trees" in doc:
        raw_trees = _list(doc["oblivious_trees"], "oblivious_trees")
        oblivious = True
    elif "trees" in doc:
        raw_trees = _list(doc["trees"], "trees")
        oblivious = False
    else:
        raise InvalidModelError("the CatBoost model has neither oblivious_trees nor trees")
    if not raw_trees:
        raise InvalidModelError("the CatBoost model has no trees")
    sb = _list(doc.get("scale_and_bias", [1, [0]]), "scale_and_bias")
    if len(sb) != 2:
        raise InvalidModelError("scale_and_bias must be [scale, [bias, ...]]")
    scale = _f64(sb[0], "scale")
    bias = [_f64(b, "bias") for b in _list(sb[1], "bias")]
    if oblivious:
        t0 = _dict(raw_trees[0], "oblivious tree 0")
        depth0 = min(len(_splits(t0, "tree 0")), MAX_DEPTH + 1)
        dim, rem = divmod(len(_list(t0["leaf_values"], "tree 0")), 1 << depth0)
        if rem or dim < 1:
            raise InvalidModelError("tree 0: leaf_values do not fill 2^depth leaves")
        trees = [_oblivious_tree(t, i, table, dim) for i, t in enumerate(raw_trees)]
    else:
        first = _dict(raw_trees[0], "tree 0")
        while "value" not in first:
            first = _dict(first["left"], "tree 0")
        dim = len(first["value"]) if isinstance(first["value"], list) else 1
        trees = [_nonsymmetric_tree(t, i, table, dim) for i, t in enumerate(raw_trees)]
    if scale != 1.0:
        raise UnsupportedModelError(
            f"CatBoost models with scale {scale!r} != 1 (set_scale_and_bias / sum_models) are not "
            "supported: CatBoost computes scale * sum + bias, which treecomp's IR cannot express exactly")
    if len(bias) not in (1, dim):  # one value is added to every dimension (ApplyScaleAndBias)
        raise InvalidModelError(f"{len(bias)} bias values for {dim} dimension(s)")
    if any(b != 0.0 for b in bias):
        trees.append(leaf_tree(np.array(bias if len(bias) == dim else bias * dim)))
    loss = _loss_name(info)
    if loss.split(":")[0] in _REFUSED_LOSSES:
        raise UnsupportedModelError(f"CatBoost loss {loss!r} is not supported")
    threshold = info.get("binclass_probability_threshold")
    if threshold is not None and str(threshold) != "0.5":
        raise UnsupportedModelError(f"a CatBoost binary probability threshold ({threshold}; "
                                    "set_probability_threshold) is not supported")
    base = loss.split(":")[0]
    if kind == "auto":
        kind = "classifier" if base in _CLASSIFICATION else "regressor"
    transform, decision, classes, exp_lib = "identity", "none", (), "libm"
    label_shape = "rows"
    if kind == "classifier":
        if base in ("Logloss", "CrossEntropy") or (base == "" and dim == 1):
            if dim != 1:
                raise InvalidModelError(f"a {loss} model with {dim} dimensions")
            transform, decision, classes = "sigmoid", "raw_gt_0", (_labels(info, 2),)
        elif base in ("MultiLogloss", "MultiCrossEntropy"):
            # multi-label: per-label libm sigmoid; Class = int64 (raw > 0) per label
            transform, decision = "sigmoid", "raw_gt_0_each"
            classes = (np.array([0, 1], np.int64),) * dim
        elif base == "MultiClassOneVsAll":
            transform, decision, classes = "sigmoid", "argmax_raw", (_labels(info, dim),)
            label_shape = "column"
        elif base in ("MultiClass", "") and dim > 1:
            transform, decision = "softmax_seq", "argmax_raw"
            classes, exp_lib = (_labels(info, dim),), _fast_exp_lib()
            label_shape = "column"
        else:
            raise UnsupportedModelError(f"a CatBoostClassifier with loss {loss!r} is not supported")
    elif kind == "regressor" and base.startswith(_EXPONENT_PREFIXES):
        if dim != 1:
            raise InvalidModelError(f"a {loss} model with {dim} dimensions")
        transform, exp_lib = "exp", _fast_exp_lib()
    names = None
    if all(ids) and len(ids) == n_cols:
        names = ids
    return Forest(trees=trees, n_features=n_cols, n_outputs=dim,
                  tree_output=np.zeros(len(trees), np.int32), base_score=np.zeros(dim),
                  input_dtype="float32", comparison="<=", accumulate_dtype="float64",
                  transform=transform, decision=decision, classes=classes, feature_names=names,
                  allow_nan=True, exp_lib=exp_lib, category_hashes=table.category_hashes,
                  label_shape=label_shape, provenance=f"catboost {source} (loss {loss or '?'})".strip())


# -- the binary .cbm format (flatbuffers, catboost/libs/model/flatbuffers/model.fbs) -----------
class _Flat:
    """A bounds-checked reader of the flatbuffers tables a .cbm holds (no flatbuffers package,
    no recursion: the schema is fixed). Every offset is checked against the buffer, so a corrupt
    file raises InvalidModelError, never reads outside it."""

    def __init__(self, buf: bytes):
        self.buf = buf

    def _u(self, fmt: str, pos: int) -> int:
        size = {"<I": 4, "<i": 4, "<H": 2, "<B": 1, "<d": 8}[fmt]
        if not 0 <= pos <= len(self.buf) - size:
            raise InvalidModelError("corrupt .cbm: offset out of range")
        return struct.unpack_from(fmt, self.buf, pos)[0]

    def root(self) -> int:
        return self._u("<I", 0)

    def _field(self, table: int, i: int) -> int:
        """Absolute position of field i of the table at `table`, 0 when absent."""
        vt = table - self._u("<i", table)
        vsize = self._u("<H", vt)
        if 4 + 2 * i + 2 > vsize:
            return 0
        off = self._u("<H", vt + 4 + 2 * i)
        return table + off if off else 0

    def scalar(self, table: int, i: int, fmt: str, default: Any) -> Any:
        pos = self._field(table, i)
        return self._u(fmt, pos) if pos else default

    def _target(self, table: int, i: int) -> int:
        pos = self._field(table, i)
        return pos + self._u("<I", pos) if pos else 0

    def table(self, table: int, i: int) -> int:
        return self._target(table, i)

    def _vector(self, table: int, i: int, item: int) -> tuple[int, int]:
        pos = self._target(table, i)
        if not pos:
            return 0, 0
        n = self._u("<I", pos)
        if n * item > len(self.buf) - pos - 4:
            raise InvalidModelError("corrupt .cbm: vector longer than the file")
        return pos + 4, n

    def array(self, table: int, i: int, dtype: str) -> np.ndarray:
        """A vector of scalars (or of 4-byte structs, read as "<u4")."""
        dt = np.dtype(dtype)
        start, n = self._vector(table, i, dt.itemsize)
        return np.frombuffer(self.buf, dt, n, start).copy() if n else np.zeros(0, dt)

    def tables(self, table: int, i: int) -> list[int]:
        start, n = self._vector(table, i, 4)
        return [start + 4 * k + self._u("<I", start + 4 * k) for k in range(n)]

    def string(self, table: int, i: int) -> str:
        pos = self._target(table, i)
        if not pos:
            return ""
        n = self._u("<I", pos)
        if n > len(self.buf) - pos - 4:
            raise InvalidModelError("corrupt .cbm: string longer than the file")
        return self.buf[pos + 4:pos + 4 + n].decode("utf-8", "replace")

    def strings(self, table: int, i: int) -> list[str]:
        start, n = self._vector(table, i, 4)
        return [self.string_at(start + 4 * k) for k in range(n)]

    def string_at(self, pos: int) -> str:
        pos += self._u("<I", pos)
        n = self._u("<I", pos)
        if n > len(self.buf) - pos - 4:
            raise InvalidModelError("corrupt .cbm: string longer than the file")
        return self.buf[pos + 4:pos + 4 + n].decode("utf-8", "replace")


_NAN_TREATMENTS = ("AsIs", "AsFalse", "AsTrue")


def cbm_document(data: bytes) -> dict:
    """The model document (see _cbm_document); whatever is wrong with the bytes raises
    InvalidModelError."""
    try:
        return _cbm_document(data)
    except (InvalidModelError, UnsupportedModelError):
        raise
    except (*_READ_ERRORS, struct.error) as exc:
        raise InvalidModelError(f"corrupt .cbm: {type(exc).__name__}: {str(exc)[:200]}") from None


def _cbm_document(data: bytes) -> dict:
    """The model document (as the JSON export has it) of a .cbm file's bytes: "CBM1", the core
    flatbuffer's size (uint32), the flatbuffer (TModelCore), then optional parts (CTR tables,
    text processing) that only models with categorical / text features have."""
    if data[:4] != b"CBM1" or len(data) < 8:
        raise InvalidModelError("not a CatBoost .cbm file (no CBM1 header)")
    size = struct.unpack_from("<I", data, 4)[0]
    if size > len(data) - 8:
        raise InvalidModelError(f"truncated .cbm file: the model core needs {size} bytes, "
                                f"{len(data) - 8} follow")
    fb = _Flat(data[8:8 + size])
    core = fb.root()
    mt = fb.table(core, 1)
    if not mt:
        raise InvalidModelError("corrupt .cbm: no model trees")
    fi: dict[str, Any] = {"float_features": []}
    # TCatFeature {Index, FlatIndex, FeatureId, UsedInModel}; TTextFeature and
    # TEmbeddingFeature begin with Index, then FeatureId at field 2 too
    for name, field in (("categorical_features", 4), ("ctrs", 7), ("text_features", 12),
                        ("estimated_features", 13), ("embedding_features", 18)):
        if field in (4, 12, 18):
            items = [{"feature_id": fb.string(t, 2), "feature_index": fb.scalar(t, 0, "<i", -1),
                      "flat_feature_index": fb.scalar(t, 1, "<i", -1)} for t in fb.tables(mt, field)]
        else:
            items = [{} for _ in fb.tables(mt, field)]
        if items:
            fi[name] = items
    parts = fb.strings(core, 3)
    if parts and not fi.get("ctrs"):  # CTR models are refused by name (_features)
        raise UnsupportedModelError(f"CatBoost models with extra parts ({', '.join(parts)[:100]}: "
                                    "categorical CTR data or text / embedding processing) are not supported")
    info = {}
    for kv in fb.tables(core, 2):
        info[fb.string(kv, 0)] = fb.string(kv, 1)
    for t in fb.tables(mt, 5):
        treat = fb.scalar(t, 5, "<B", 0)
        fi["float_features"].append({
            "has_nans": bool(fb.scalar(t, 0, "<B", 0)), "feature_index": fb.scalar(t, 1, "<i", -1),
            "flat_feature_index": fb.scalar(t, 2, "<i", -1),
            "borders": fb.array(t, 3, "<f4").astype(np.float64).tolist(),
            "feature_id": fb.string(t, 4),
            "nan_value_treatment": _NAN_TREATMENTS[treat] if treat < 3 else str(treat)})
    dim = fb.scalar(mt, 0, "<i", 0)
    splits = fb.array(mt, 1, "<i4")
    sizes = fb.array(mt, 2, "<i4")
    starts = fb.array(mt, 3, "<i4")
    leaves = fb.array(mt, 8, "<f8")
    steps = fb.array(mt, 10, "<u4")  # struct TNonSymmetricTreeStepNode {uint16 left, right}
    steps = np.stack([steps & 0xFFFF, steps >> 16], axis=1)
    leaf_id = fb.array(mt, 11, "<u4")
    if dim < 1 or len(sizes) != len(starts) or np.any(sizes < 0):
        raise InvalidModelError("corrupt .cbm: tree tables do not match")
    multi_bias = fb.array(mt, 16, "<f8").tolist()
    doc: dict[str, Any] = {"model_info": info, "features_info": fi,
                           # TOneHotFeature {Index (of the categorical feature), Values (int32
                           # hashes), StringValues}: in split-index order
                           "one_hot_features": [{"cat_feature_index": fb.scalar(t, 0, "<i", -1),
                                                 "values": fb.array(t, 1, "<i4").tolist()}
                                                for t in fb.tables(mt, 6)],
                           "scale_and_bias": [fb.scalar(mt, 14, "<d", 1.0),
                                              multi_bias or [fb.scalar(mt, 15, "<d", 0.0)]]}
    ends = np.append(starts[1:], len(splits)) if len(starts) else starts
    if len(steps) == 0:  # oblivious: tree i has sizes[i] splits and dim << sizes[i] leaf values
        trees, off = [], 0
        for depth, a, b in zip(sizes.tolist(), starts.tolist(), ends.tolist()):
            n_leaf = dim << min(depth, MAX_DEPTH + 1)
            if depth > MAX_DEPTH or not 0 <= a <= b <= len(splits) or b - a != depth \
                    or off + n_leaf > len(leaves):
                raise InvalidModelError("corrupt .cbm: tree sizes do not match the splits / leaves")
            trees.append({"splits": [{"split_index": int(k)} for k in splits[a:b]],
                          "leaf_values": leaves[off:off + n_leaf].tolist()})
            off += n_leaf
        doc["oblivious_trees"] = trees
        return doc
    # non-symmetric: per node a split index, (left, right) offsets to the children (0: that side
    # is a leaf whose value sits at the node's own leaf id)
    if not len(splits) == len(steps) == len(leaf_id):
        raise InvalidModelError("corrupt .cbm: non-symmetric node tables do not match")

    def leaf(j: int) -> dict:
        k = int(leaf_id[j])
        if k + dim > len(leaves):
            raise InvalidModelError("corrupt .cbm: leaf id out of range")
        return {"value": leaves[k:k + dim].tolist() if dim > 1 else float(leaves[k])}

    trees = []
    for a, b in zip(starts.tolist(), ends.tolist()):
        if not 0 <= a < b <= len(splits):
            raise InvalidModelError("corrupt .cbm: tree offsets out of range")
        nodes: list[dict] = [{} for _ in range(b - a)]
        parents = np.zeros(b - a, np.int64)
        for j in range(b - 1, a - 1, -1):
            dl, dr = int(steps[j, 0]), int(steps[j, 1])
            if dl == 0 and dr == 0:
                nodes[j - a] = leaf(j)
                continue
            if j + max(dl, dr) >= b or dl == dr:
                raise InvalidModelError("corrupt .cbm: child offset beyond its tree")
            for d in (dl, dr):
                if d:
                    parents[j + d - a] += 1
                    if parents[j + d - a] > 1:  # a shared subtree would be copied: refuse
                        raise InvalidModelError("corrupt .cbm: a tree node has two parents")
            nodes[j - a] = {"split": {"split_index": int(splits[j])},
                            "left": nodes[j + dl - a] if dl else leaf(j),
                            "right": nodes[j + dr - a] if dr else leaf(j)}
        trees.append(nodes[0])
    doc["trees"] = trees
    return doc


# -- entry points ------------------------------------------------------------------------------
def _model_document(model: Any) -> dict:
    """A live model's document, from its binary export (exact: no decimal round trip)."""
    fitted = getattr(model, "is_fitted", None)
    if callable(fitted) and not fitted():
        raise NotFittedError(f"{type(model).__name__} is not fitted")
    for getter, what in (("_get_text_feature_indices", "text features"),
                         ("_get_embedding_feature_indices", "embedding features")):
        fn = getattr(model, getter, None)
        idx = list(fn()) if callable(fn) else []
        if idx:
            raise UnsupportedModelError(f"CatBoost models with {what} (columns {idx[:10]}) are not "
                                        "supported: train on numeric features only")
    with tempfile.TemporaryDirectory(prefix="treecomp-cb-") as tmp:
        path = os.path.join(tmp, "model.cbm")
        try:
            model.save_model(path)
        except Exception as exc:  # noqa: BLE001 - CatBoostError and friends
            raise InvalidModelError(f"cannot save the CatBoost model: {str(exc)[:300]}") from None
        return cbm_document(Path(path).read_bytes())


def parse_model(model: Any) -> Forest:
    """A fitted CatBoost / CatBoostClassifier / CatBoostRegressor / CatBoostRanker: its
    default predict (and predict_proba for classifiers)."""
    names = [c.__name__ for c in type(model).__mro__]
    kind = "classifier" if "CatBoostClassifier" in names else \
        "regressor" if "CatBoostRegressor" in names else "raw"
    return forest_from_document(_model_document(model), kind, source=type(model).__name__)


def parse_catboost_file(path: str | os.PathLike) -> Forest:
    """A CatBoost model file, read without catboost: the binary .cbm or the JSON export
    (numbers parsed as CatBoost's own reader parses them). Either predicts as
    CatBoostClassifier (classification losses) or CatBoostRegressor would after load_model."""
    p = Path(path)
    data = p.read_bytes()
    if data[:4] == b"CBM1":
        doc = cbm_document(data)
    else:
        doc = _loads(data, p.name)
    return forest_from_document(doc, "auto", source=f"file {p.name}")


_CATBOOST_FIRST_KEY = re.compile(
    rb'\s*\{\s*"(features_info|model_info|oblivious_trees|trees|scale_and_bias|ctr_data)"\s*:')


def is_catboost_json(head: bytes) -> bool:
    """Whether a JSON file is a CatBoost export: its first key is one of CatBoost's top-level
    keys (XGBoost's JSON starts with "learner")."""
    return _CATBOOST_FIRST_KEY.match(head) is not None


PARSERS = {
    "CatBoost": parse_model,
}
#: what supported_models() says of CatBoost models
FEATURES = ("numeric features (every nan_mode) and one-hot categorical features (integer or "
            "string categories); CTR-encoded categorical, text and embedding features are refused")
