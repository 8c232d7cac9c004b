"""A bounded, seeded fuzz suite over the model inputs treecomp's frontends read.

Four input kinds, each fuzzed from tiny models trained (seeded, single-threaded) at test time:

- ``xgb_json``: XGBoost JSON model files, mutated structurally (numbers -> huge / negative / NaN /
  strings, dropped keys, resized arrays, swapped / cyclic / shared child indices, out-of-range
  feature ids, tree_info, num_class, base_score strings, categories, renumbered nodes, orphans...)
  plus a few text-level mutations.
- ``xgb_ubj``: XGBoost UBJSON model files: byte-level mutations (flip, truncate, insert, delete)
  and the same structural mutations re-encoded with the small UBJSON encoder below.
- ``lgb_txt``: LightGBM text models: line-level mutations (drop / duplicate lines, numbers of the
  tree fields, header fields, truncation, garbage bytes, CRLF, `end of trees`, tree_sizes).
- ``sklearn``: fitted DecisionTreeRegressor / RandomForestClassifier /
  HistGradientBoostingClassifier objects whose ``tree_`` state (via __getstate__ /
  __setstate__), HGB predictor nodes and estimator attributes are corrupted.

The contract checked for every case: ``treecomp.parse`` + ``treecomp.compile(backend="arrays")``
+ predicting a few rows either raises a clear error (TreecompError, ValueError or TypeError, but
not one of the "accidental" types in BAD_ERRORS), or succeeds; when it succeeds and the library
also loads and predicts the same input, the raw margins (sklearn: predict / predict_proba) must be
equal bit for bit. treecomp accepting an input that the library rejects (or crashes / hangs on)
is reported as a "guess". Crashes and hangs of treecomp fail the case that caused them.

Every batch runs in a subprocess (one per kind, resumed after the case that killed it), with a
per-case watchdog (faulthandler) and a per-kind timeout, so a segfault or hang names its case.
Case ids are ``<kind>:<index>``; each case draws from ``np.random.default_rng([SEED, kind, index])``,
so a case is reproduced on its own with

    .venv/bin/python -m tests.test_fuzz_frontends <kind> <index> [outdir]

which writes the mutated input to outdir (default /tmp/treecomp-fuzz) and runs it verbosely.
"""

from __future__ import annotations

import copy
import json
import math
import os
import pickle
import struct
import subprocess
import sys
import time
import traceback
import warnings
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
SEED = 20250611
KINDS = ("xgb_json", "xgb_ubj", "lgb_txt", "sklearn")
N_CASES = {"xgb_json": 300, "xgb_ubj": 300, "lgb_txt": 300, "sklearn": 250}
#: a case that runs longer than this is a hang (the watchdog dumps its stack and kills the worker)
CASE_TIMEOUT_S = 20
#: the whole batch of one kind (restarts included)
KIND_TIMEOUT_S = 150
#: worker restarts after crashes / hangs before the batch gives up
MAX_RESTARTS = 25
#: predict only models of at most this many features (a mutated num_feature can be 2**31 - 1)
MAX_PREDICT_FEATURES = 4096

#: The issues behind KNOWN_FAILURES (found by this suite against xgboost 3.2.0, lightgbm 4.7.0,
#: scikit-learn 1.9.1; a case's inputs depend on the seed models those versions train).
ISSUES = {
    "xgb-tree-ids": "MISMATCH: XGBoost places tree j at slot trees[j]['id'] (gbtree_model.cc "
                    "LoadModel) and applies tree_info by slot; treecomp uses the array order and "
                    "ignores 'id' (a permutation of ids changes the margins: the float32 sum "
                    "order, or, for multi-class, the class each tree adds to); duplicate / "
                    "missing / non-integer ids make XGBoost fail or segfault while treecomp accepts",
    "xgb-num-trees": "GUESS: gbtree_model_param.num_trees disagreeing with len(trees) (trees "
                     "added / removed, or a corrupt num_trees) is refused by XGBoost (Check "
                     "failed: trees_json.size() == param.num_trees); treecomp accepts the trees",
    "xgb-json-types": "GUESS: values of a JSON / UBJSON type XGBoost refuses are read as "
                      "numbers: integers (also >= 2**63) or booleans in split_conditions, "
                      "integral floats or booleans in split_indices, an integer num_target, "
                      "booleans / untyped arrays in default_left, UBJSON high-precision ('H') "
                      "numbers (XGBoost: 'Invalid cast', 'High precision number is not supported')",
    "xgb-lenient-structure": "GUESS: structural problems XGBoost refuses are tolerated: "
                             "base_score '0.5\\n' (trailing whitespace), a tree without "
                             "tree_param or tree_param.num_nodes (map::at), per-node statistics "
                             "of the wrong type ('1', 'abc') next to other mutations",
    "xgb-ubj-bytes": "GUESS: byte-level UBJSON corruptions that XGBoost refuses ('Invalid cast, "
                     "from Null to F32Array/I64Array', 'tree_begin <= tree_end') or segfaults on, "
                     "while treecomp parses a model (mostly a corrupted key or count treecomp does "
                     "not read; not analysed one by one)",
    "lgb-token-parse": "MISMATCH: a tab inside a tree line ('split_feature=0 1\\t 1 1 1'): "
                       "LightGBM reads [0, 1, 0, 0, 0], treecomp (Python int(), which strips "
                       "whitespace) reads [0, 1, 1, 1, 1]; treecomp should refuse tokens that are "
                       "not plain numbers",
    "lgb-num-cat": "GUESS: num_cat > 0 on a tree without cat_boundaries / cat_threshold: "
                   "LightGBM aborts the process (Fatal 'Tree model should contain cat_boundaries "
                   "field', thrown inside OpenMP: SIGABRT); treecomp ignores num_cat",
    "lgb-crlf-stale-sizes": "GUESS: CRLF line endings with the LF-based tree_sizes kept: "
                            "LightGBM reads the trees at the wrong offsets and aborts (SIGABRT, "
                            "'Model format error, expect a tree here'); treecomp accepts",
    "lgb-library-crash": "GUESS: LightGBM segfaults on the file, treecomp accepts it (objective='' "
                         "on a categorical model; a newline added in the parameters trailer "
                         "together with a header change)",
    "sk-classes-len": "MISMATCH: RandomForestClassifier whose classes_ is shorter than the "
                      "trees' value width (3 classes, classes_=[0, 1]): sklearn's predict_proba "
                      "has 3 columns, treecomp silently drops the third",
    "sk-hgb-is-categorical": "MISMATCH: HistGradientBoosting predictor node with is_categorical "
                             "set on a numeric split: sklearn and treecomp both accept it and "
                             "disagree on the probabilities",
    "sk-attrs-ignored": "GUESS: estimator attributes sklearn's predict relies on are ignored: "
                        "n_outputs_ of a DecisionTreeRegressor (sklearn: IndexError), "
                        "n_features_in_ of a forest disagreeing with its trees', n_classes_ / "
                        "n_outputs_ / n_features_in_ of one forest tree (sklearn: ValueError); "
                        "treecomp builds a predictor anyway",
}

#: (Every issue above was fixed in the frontends, each pinned by unit tests in
#: tests/test_frontend_{xgboost,lightgbm,sklearn}.py; the descriptions stay for the record.)
#: Known failures (case id -> ISSUES key): they xfail the test of their kind, strictly: an entry
#: that no longer fails makes the test fail, so that the list is kept current when the frontends
#: are fixed.
KNOWN_FAILURES: dict[str, str] = {
}

pytestmark = pytest.mark.slow


# =============================================================================================
# Outcome classification
# =============================================================================================
def _bad_error_types() -> tuple[type, ...]:
    import zlib
    return (IndexError, KeyError, AttributeError, AssertionError, ZeroDivisionError,
            RecursionError, MemoryError, zlib.error, struct.error, UnicodeError, OverflowError,
            FloatingPointError, SystemError, NotImplementedError, LookupError, ArithmeticError,
            EOFError, OSError, RuntimeError, ImportError, NameError, StopIteration)


def _is_clear_error(exc: BaseException) -> bool:
    from treecomp.errors import TreecompError
    if isinstance(exc, _bad_error_types()) and not isinstance(exc, TreecompError):
        return False
    return isinstance(exc, (TreecompError, ValueError, TypeError))


def _tb_summary(exc: BaseException, n: int = 4) -> str:
    frames = traceback.extract_tb(exc.__traceback__)[-n:]
    where = " <- ".join(f"{Path(f.filename).name}:{f.lineno} {f.name}" for f in reversed(frames))
    return f"{type(exc).__name__}: {str(exc)[:300]}  [at {where}]"


def pick(rng: np.random.Generator, seq):
    return seq[int(rng.integers(len(seq)))]


# =============================================================================================
# A small UBJSON encoder (treecomp has only a decoder)
# =============================================================================================
_NP_MARKERS = {np.dtype("int8"): b"i", np.dtype("uint8"): b"U", np.dtype("int16"): b"I",
               np.dtype("int32"): b"l", np.dtype("int64"): b"L", np.dtype("float32"): b"d",
               np.dtype("float64"): b"D"}


def _ubj_int(v: int) -> bytes:
    """An integer as XGBoost writes one (int64 'L'); beyond int64 a high-precision number."""
    if -2 ** 63 <= v < 2 ** 63:
        return b"L" + struct.pack(">q", v)
    s = str(v).encode()
    return b"H" + _ubj_int(len(s)) + s


def _ubj_str(s: str) -> bytes:
    b = s.encode("utf-8")
    return _ubj_int(len(b)) + b


def ubj_encode(v: Any) -> bytes:
    """UBJSON laid out as XGBoost 3.x writes it: objects uncounted (``{`` key value ... ``}``),
    arrays counted (``[#L<n>``), numpy arrays typed (``[$<type>#L<n>``), lengths as int64."""
    out: list[bytes] = []

    def enc(x: Any) -> None:
        if x is None:
            out.append(b"Z")
        elif x is True or x is np.True_:
            out.append(b"T")
        elif x is False or x is np.False_:
            out.append(b"F")
        elif isinstance(x, (int, np.integer)):
            out.append(_ubj_int(int(x)))
        elif isinstance(x, (float, np.floating)):
            f = float(x)
            if math.isnan(f) or math.isinf(f) or float(np.float32(f)) == f:
                out.append(b"d" + struct.pack(">f", f))
            else:
                out.append(b"D" + struct.pack(">d", f))
        elif isinstance(x, str):
            out.append(b"S" + _ubj_str(x))
        elif isinstance(x, np.ndarray) and x.ndim == 1 and x.dtype.newbyteorder("=") in _NP_MARKERS:
            dt = x.dtype.newbyteorder("=")
            out.append(b"[$" + _NP_MARKERS[dt] + b"#" + _ubj_int(len(x)))
            out.append(x.astype(dt.newbyteorder(">")).tobytes())
        elif isinstance(x, np.ndarray):
            enc(x.tolist())
        elif isinstance(x, (list, tuple)):
            out.append(b"[#" + _ubj_int(len(x)))
            for e in x:
                enc(e)
        elif isinstance(x, dict):
            out.append(b"{")
            for k, e in x.items():
                out.append(_ubj_str(str(k)))
                enc(e)
            out.append(b"}")
        else:
            raise TypeError(f"cannot UBJSON-encode {type(x).__name__}")

    enc(v)
    return b"".join(out)


# =============================================================================================
# XGBoost: seeds and structural mutations of the model document
# =============================================================================================
NAN, INF = float("nan"), float("inf")
ODD_VALUES = [-1, -2, 0, 1, 2, 3, 7, 2 ** 31 - 1, 2 ** 31, -2 ** 31 - 1, 2 ** 32 + 1, 2 ** 63,
              10 ** 30, 0.5, -0.0, 1e-45, 1e39, 3.4028235e38, 1e300, -1e300, NAN, INF, -INF,
              "abc", "1", "", "nan", None, True, False, [], {}, [1, 2]]
BASE_SCORES = ["", "[]", "[,]", "nan", "[nan]", "inf", "-inf", "[1e40]", "1e-50", "-0", "0",
               "1", "0.5abc", " 0.5 ", "[5E-1", "5E-1]", "[5E-1,5E-1]", "[5E-1,5E-1,5E-1]",
               "[5E-1,5E-1,5E-1,5E-1]", "1_0", "0x1p-1", "\u0661", "infinity", "  ", "0.5\n",
               "[[5E-1]]", "[5E-1 6E-1]", "2", "-1", "1e38", "[3.4028236e38]", "0.9999999999",
               "[1.0000001]", "5e-1", "[5E-1]"]
OBJECTIVES = ["reg:squarederror", "reg:logistic", "binary:logistic", "binary:logitraw",
              "binary:hinge", "multi:softprob", "multi:softmax", "count:poisson", "reg:gamma",
              "reg:tweedie", "survival:cox", "survival:aft", "rank:ndcg", "reg:absoluteerror",
              "reg:quantileerror", "foo", "", "Binary:logistic", "reg:linear", "rank:pairwise"]


def _np_to_list(c: Any, k: Any) -> list:
    """c[k] as a mutable Python list (numpy arrays from UBJSON are converted in place)."""
    v = c[k]
    if isinstance(v, np.ndarray):
        v = v.tolist()
        c[k] = v
    return v


def _walk(doc: Any, path=()):
    """(parent, key, path, value) for every value below doc."""
    if isinstance(doc, dict):
        for k in list(doc):
            yield doc, k, path + (k,), doc[k]
            yield from _walk(doc[k], path + (k,))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            yield doc, i, path + (i,), v
            yield from _walk(v, path + (i,))


def _pstr(path) -> str:
    s = ""
    for p in path:
        s += f"[{p}]" if isinstance(p, int) else (f".{p}" if s else str(p))
    return s


def _short(v: Any) -> str:
    r = repr(v)
    return r if len(r) <= 40 else r[:37] + "..."


def _model(doc):
    return doc["learner"]["gradient_booster"]["model"] if doc["learner"]["gradient_booster"].get(
        "name") != "dart" else doc["learner"]["gradient_booster"]["gbtree"]["model"]


def _lmp(doc):
    return doc["learner"]["learner_model_param"]


def _pick_tree(doc, rng):
    trees = _model(doc)["trees"]
    i = int(rng.integers(len(trees)))
    return i, trees[i]


def _internal_nodes(t) -> list[int]:
    return [n for n, c in enumerate(list(t["left_children"])) if c >= 0]


def _ancestors(t, node: int) -> list[int]:
    L, R = list(t["left_children"]), list(t["right_children"])
    parent = {}
    for n in range(len(L)):
        for c in (L[n], R[n]):
            if 0 <= c < len(L):
                parent.setdefault(c, n)
    out, seen = [], set()
    while node in parent and node not in seen:
        seen.add(node)
        node = parent[node]
        out.append(node)
    return out


_PER_NODE = ("base_weights", "default_left", "left_children", "right_children", "loss_changes",
             "parents", "split_conditions", "split_indices", "split_type", "sum_hessian")


def x_set_generic(doc, rng):
    slots = [(c, k, p, v) for c, k, p, v in _walk(doc) if not isinstance(c, list)]
    c, k, p, v = pick(rng, slots)
    if isinstance(v, (list, np.ndarray)) and len(v):
        lst = _np_to_list(c, k)
        i = int(rng.integers(len(lst)))
        new = copy.deepcopy(pick(rng, ODD_VALUES))
        lst[i] = new
        return f"{_pstr(p)}[{i}] = {_short(new)}"
    new = copy.deepcopy(pick(rng, ODD_VALUES))
    c[k] = new
    return f"{_pstr(p)} = {_short(new)}"


def x_drop_key(doc, rng):
    slots = [(c, k, p) for c, k, p, v in _walk(doc) if isinstance(c, dict)]
    c, k, p = pick(rng, slots)
    del c[k]
    return f"del {_pstr(p)}"


def x_resize(doc, rng):
    slots = [(c, k, p) for c, k, p, v in _walk(doc) if isinstance(v, (list, np.ndarray))]
    c, k, p = pick(rng, slots)
    lst = _np_to_list(c, k)
    how = pick(rng, ["append", "pop", "truncate", "empty", "dup"])
    if how == "append":
        new = copy.deepcopy(lst[int(rng.integers(len(lst)))]) if lst and rng.random() < 0.6 \
            else copy.deepcopy(pick(rng, ODD_VALUES))
        lst.append(new)
        return f"{_pstr(p)}.append({_short(new)})"
    if how == "pop" and lst:
        lst.pop(int(rng.integers(len(lst))))
        return f"{_pstr(p)}: one element removed (now {len(lst)})"
    if how == "truncate" and lst:
        n = int(rng.integers(len(lst)))
        del lst[n:]
        return f"{_pstr(p)} truncated to {n}"
    if how == "dup" and lst:
        lst.extend(copy.deepcopy(lst))
        return f"{_pstr(p)} doubled to {len(lst)}"
    lst.clear()
    return f"{_pstr(p)} = []"


def x_swap_children(doc, rng):
    i, t = _pick_tree(doc, rng)
    L, R = _np_to_list(t, "left_children"), _np_to_list(t, "right_children")
    n = pick(rng, _internal_nodes(t))
    L[n], R[n] = R[n], L[n]
    return f"tree {i}: node {n} children swapped"


def x_cycle(doc, rng):
    i, t = _pick_tree(doc, rng)
    internal = _internal_nodes(t)
    n = pick(rng, internal)
    target = pick(rng, _ancestors(t, n) + [n])
    side = pick(rng, ["left_children", "right_children"])
    _np_to_list(t, side)[n] = target
    return f"tree {i}: {side}[{n}] = {target} (cycle to an ancestor / itself)"


def x_share(doc, rng):
    i, t = _pick_tree(doc, rng)
    L, R = _np_to_list(t, "left_children"), _np_to_list(t, "right_children")
    internal = _internal_nodes(t)
    n, m = pick(rng, internal), int(rng.integers(len(L)))
    side = pick(rng, ["left", "right"])
    other = pick(rng, [c for c in (L[m], R[m], m) if c >= 0])
    (L if side == "left" else R)[n] = other
    return f"tree {i}: {side} child of node {n} = {other} (shared node)"


def x_child_value(doc, rng):
    i, t = _pick_tree(doc, rng)
    side = pick(rng, ["left_children", "right_children"])
    lst = _np_to_list(t, side)
    n = int(rng.integers(len(lst)))
    new = pick(rng, [len(lst), len(lst) + 7, -2, -1, 2 ** 31 - 1, 2 ** 31, 2 ** 32 + 1, 0, 0.5, 1.0])
    lst[n] = new
    return f"tree {i}: {side}[{n}] = {new!r}"


def x_feature(doc, rng):
    i, t = _pick_tree(doc, rng)
    nf = int(float(_lmp(doc)["num_feature"]))
    lst = _np_to_list(t, "split_indices")
    n = pick(rng, _internal_nodes(t)) if rng.random() < 0.8 else int(rng.integers(len(lst)))
    new = pick(rng, [nf, nf + 1, 1000, 2 ** 31 - 1, 2 ** 31, -1, -2 ** 31, 2 ** 32, 0.5, 1.0,
                     nf - 1])
    lst[n] = new
    return f"tree {i}: split_indices[{n}] = {new!r} (num_feature={nf})"


def x_condition(doc, rng):
    i, t = _pick_tree(doc, rng)
    lst = _np_to_list(t, "split_conditions")
    leaf = rng.random() < 0.4
    internal = _internal_nodes(t)
    cand = [n for n in range(len(lst)) if (n not in internal) == leaf] or list(range(len(lst)))
    n = pick(rng, cand)
    new = pick(rng, [NAN, INF, -INF, 1e39, -1e39, 3.4028235e38, 3.4028236e38, 1e-45, 1e-46, -0.0,
                     0.0, 1e300, "abc", None, True, 2 ** 63, float(np.float32(lst[n]) if isinstance(
                         lst[n], (int, float)) else 0.0) + 1e-9])
    lst[n] = new
    return f"tree {i}: split_conditions[{n}] ({'leaf' if leaf else 'split'}) = {_short(new)}"


def x_base_weights(doc, rng):
    i, t = _pick_tree(doc, rng)
    lst = _np_to_list(t, "base_weights")
    n = int(rng.integers(len(lst)))
    new = pick(rng, [NAN, INF, 1e39, 12345.0, "abc"])
    lst[n] = new
    return f"tree {i}: base_weights[{n}] = {_short(new)}"


def x_default_left(doc, rng):
    i, t = _pick_tree(doc, rng)
    lst = _np_to_list(t, "default_left")
    n = int(rng.integers(len(lst)))
    new = pick(rng, [2, -1, 255, 256, True, False, 0.5, 1.0, "1", None, 1 - int(lst[n] == 1)])
    lst[n] = new
    return f"tree {i}: default_left[{n}] = {new!r}"


def x_split_type(doc, rng):
    i, t = _pick_tree(doc, rng)
    lst = _np_to_list(t, "split_type")
    n = pick(rng, _internal_nodes(t)) if rng.random() < 0.8 else int(rng.integers(len(lst)))
    new = pick(rng, [1, 1, 0, 2, -1, 255, 0.5])
    lst[n] = new
    return f"tree {i}: split_type[{n}] = {new!r}"


def x_categories(doc, rng):
    trees = _model(doc)["trees"]
    cat_trees = [j for j, t in enumerate(trees) if len(t.get("categories_nodes", []))]
    i = pick(rng, cat_trees) if cat_trees else int(rng.integers(len(trees)))
    t = trees[i]
    field = pick(rng, ["categories", "categories_nodes", "categories_segments", "categories_sizes"])
    lst = _np_to_list(t, field)
    n_nodes = len(t["left_children"])
    if not lst or rng.random() < 0.2:
        new = pick(rng, [0, 1, 3, n_nodes])
        lst.append(new)
        return f"tree {i}: {field}.append({new})"
    k = int(rng.integers(len(lst)))
    vals = {"categories": [-1, 2 ** 24, 2 ** 24 - 1, 2 ** 31, 1000, 0.5, 255, 256, 31, 32],
            "categories_nodes": [-1, 0, n_nodes, n_nodes - 1, 1, 2 ** 31],
            "categories_segments": [-1, 1, 100, 2 ** 40, lst[k] + 1],
            "categories_sizes": [0, -1, 100, 2 ** 40, lst[k] + 1, lst[k] - 1]}[field]
    new = pick(rng, vals)
    lst[k] = new
    return f"tree {i}: {field}[{k}] = {new!r}"


def x_tree_param(doc, rng):
    i, t = _pick_tree(doc, rng)
    tp = t["tree_param"]
    key = pick(rng, ["num_nodes", "size_leaf_vector", "num_feature", "num_deleted"])
    n = len(t["left_children"])
    new = pick(rng, [str(n + 1), str(n - 1), "0", "2", "-1", "abc", n, "1e3", "1.5"])
    tp[key] = new
    return f"tree {i}: tree_param.{key} = {new!r}"


def x_tree_info(doc, rng):
    m = _model(doc)
    lst = _np_to_list(m, "tree_info")
    K = max(1, int(float(_lmp(doc).get("num_class", 0) or 0)))
    how = rng.random()
    if how < 0.7 and lst:
        k = int(rng.integers(len(lst)))
        new = pick(rng, [K, K + 1, -1, 2 ** 31, 0, 1, 2, 0.5])
        lst[k] = new
        return f"tree_info[{k}] = {new!r} (outputs {K})"
    if how < 0.85:
        lst.append(0)
        return "tree_info.append(0)"
    if lst:
        lst.pop()
    return "tree_info.pop()"


def x_num_class(doc, rng):
    new = pick(rng, ["0", "1", "2", "3", "4", "-1", "abc", "2.5", "1e9", "1048577", 3, "", "0x3"])
    _lmp(doc)["num_class"] = new
    return f"num_class = {new!r}"


def x_num_target(doc, rng):
    new = pick(rng, ["0", "1", "2", "3", "-1", "abc", 2])
    _lmp(doc)["num_target"] = new
    return f"num_target = {new!r}"


def x_num_feature(doc, rng):
    new = pick(rng, ["0", "1", "2", "3", "5", "100", "-1", "abc", "2147483648", "1e3", "2.5",
                     4, "", "4 "])
    _lmp(doc)["num_feature"] = new
    return f"num_feature = {new!r}"


def x_base_score(doc, rng):
    new = pick(rng, BASE_SCORES)
    _lmp(doc)["base_score"] = new
    return f"base_score = {new!r}"


def x_objective(doc, rng):
    new = pick(rng, OBJECTIVES)
    doc["learner"]["objective"]["name"] = new
    return f"objective.name = {new!r}"


def x_booster(doc, rng):
    gb = doc["learner"]["gradient_booster"]
    how = pick(rng, ["name", "num_parallel_tree", "iteration_indptr", "num_trees"])
    if how == "name":
        new = pick(rng, ["dart", "gblinear", "foo", "", "gbtree"])
        gb["name"] = new
        return f"gradient_booster.name = {new!r}"
    m = _model(doc)
    if how == "iteration_indptr":
        lst = _np_to_list(m, "iteration_indptr")
        if lst:
            k = int(rng.integers(len(lst)))
            lst[k] = pick(rng, [-1, 100, lst[k] + 1, 0])
            return f"iteration_indptr[{k}] = {lst[k]}"
        return "iteration_indptr empty"
    new = pick(rng, ["0", "2", "-1", "abc", "100"])
    m.setdefault("gbtree_model_param", {})[how] = new
    return f"gbtree_model_param.{how} = {new!r}"


def x_trees(doc, rng):
    m = _model(doc)
    trees = m["trees"]
    info = _np_to_list(m, "tree_info")
    how = pick(rng, ["dup", "drop", "drop_keep_info", "reverse", "empty", "id", "permute_ids"])
    if how == "dup":
        k = int(rng.integers(len(trees)))
        trees.append(copy.deepcopy(trees[k]))
        info.append(info[k] if k < len(info) else 0)
        return f"tree {k} appended again (with its tree_info)"
    if how == "drop" and len(trees) > 1:
        k = int(rng.integers(len(trees)))
        trees.pop(k)
        if k < len(info):
            info.pop(k)
        return f"tree {k} removed (with its tree_info)"
    if how == "drop_keep_info":
        trees.pop()
        return "last tree removed, tree_info kept"
    if how == "reverse":
        trees.reverse()
        info.reverse()
        return "trees (and tree_info) reversed"
    if how == "empty":
        trees.clear()
        info.clear()
        return "trees = [], tree_info = []"
    if how == "permute_ids":  # a valid model: XGBoost places tree j at slot trees[j]["id"]
        perm = rng.permutation(len(trees)).tolist()
        for t, new in zip(trees, perm):
            t["id"] = new
        return f"tree ids permuted to {perm} (array order and tree_info kept)"
    k = int(rng.integers(len(trees)))
    trees[k]["id"] = pick(rng, [k + 1, -1, "x"])
    return f"tree {k}: id = {trees[k]['id']!r}"


def x_renumber(doc, rng):
    """A valid renumbering of a tree's nodes (root kept at 0): predictions must not change."""
    i, t = _pick_tree(doc, rng)
    n = len(t["left_children"])
    perm = np.concatenate([[0], 1 + rng.permutation(n - 1)])  # new position -> old id
    new_of = np.empty(n, np.int64)
    new_of[perm] = np.arange(n)
    for key in _PER_NODE:
        if key in t:
            lst = _np_to_list(t, key)
            if len(lst) == n:
                t[key] = [lst[j] for j in perm]
    for key in ("left_children", "right_children"):
        t[key] = [int(new_of[c]) if c >= 0 else c for c in t[key]]
    if "parents" in t:
        t["parents"] = [int(new_of[c]) if 0 <= c < n else c for c in t["parents"]]
    if len(t.get("categories_nodes", [])):
        cn = _np_to_list(t, "categories_nodes")
        t["categories_nodes"] = [int(new_of[c]) for c in cn]
        # XGBoost expects categories_nodes sorted with their segments: keep them paired
        order = np.argsort(t["categories_nodes"], kind="stable")
        for key in ("categories_nodes", "categories_segments", "categories_sizes"):
            lst = list(_np_to_list(t, key))
            t[key] = [lst[j] for j in order]
    return f"tree {i}: nodes renumbered (root kept) by {perm.tolist()}"


def x_orphans(doc, rng):
    """Unreachable nodes appended (as pruning leaves them): predictions must not change."""
    i, t = _pick_tree(doc, rng)
    n = len(t["left_children"])
    k = int(rng.integers(1, 4))
    cyc = rng.random() < 0.5  # orphans pointing at each other / at the root
    fill = {"base_weights": 0.25, "default_left": 0, "loss_changes": 0.0, "parents": 0,
            "split_conditions": 0.25, "split_indices": 0, "split_type": 0, "sum_hessian": 1.0}
    for key, v in fill.items():
        if key in t:
            _np_to_list(t, key).extend([v] * k)
    L, R = _np_to_list(t, "left_children"), _np_to_list(t, "right_children")
    for j in range(k):
        if cyc:
            L.append(n + (j + 1) % k)
            R.append(0)
        else:
            L.append(-1)
            R.append(-1)
    t["tree_param"]["num_nodes"] = str(n + k)
    return f"tree {i}: {k} unreachable {'cyclic ' if cyc else ''}nodes appended"


def x_attributes(doc, rng):
    attrs = doc["learner"].setdefault("attributes", {})
    new = pick(rng, ['{"_estimator_type": "classifier"}', '{"_estimator_type": "regressor"}',
                     "garbage", '{"type": "XGBClassifier"}', "[]", None, 7])
    if new is None:
        attrs.pop("scikit_learn", None)
        return "attributes.scikit_learn removed"
    attrs["scikit_learn"] = new
    return f"attributes.scikit_learn = {new!r}"


XGB_OPS: list[tuple[Callable, int]] = [
    (x_set_generic, 10), (x_drop_key, 5), (x_resize, 6), (x_swap_children, 3), (x_cycle, 5),
    (x_share, 3), (x_child_value, 4), (x_feature, 5), (x_condition, 6), (x_base_weights, 1),
    (x_default_left, 3), (x_split_type, 3), (x_categories, 5), (x_tree_param, 3),
    (x_tree_info, 4), (x_num_class, 4), (x_num_target, 2), (x_num_feature, 4), (x_base_score, 6),
    (x_objective, 4), (x_booster, 3), (x_trees, 4), (x_renumber, 4), (x_orphans, 3),
    (x_attributes, 2),
]


def _choose_op(rng, ops):
    w = np.array([w for _, w in ops], float)
    return ops[int(rng.choice(len(ops), p=w / w.sum()))][0]


def mutate_doc(doc, rng, ops) -> list[str]:
    """1-3 structural mutations of doc (in place); each op that does not apply (the structure it
    needs is gone) falls back to a generic one."""
    n = 1 if rng.random() < 0.7 else int(rng.integers(2, 4))
    out = []
    for _ in range(n):
        op = _choose_op(rng, ops)
        state = copy.deepcopy(doc)
        try:
            out.append(op(doc, rng))
        except (KeyError, IndexError, TypeError, ValueError, AttributeError):
            doc.clear()
            doc.update(state)
            out.append(x_set_generic(doc, rng))
    return out


def mutate_bytes(data: bytes, rng) -> tuple[bytes, str]:
    how = pick(rng, ["flip", "byte", "truncate", "insert", "delete", "dup", "marker"])
    n = len(data)
    p = int(rng.integers(n))
    if how == "flip":
        bit = int(rng.integers(8))
        return data[:p] + bytes([data[p] ^ (1 << bit)]) + data[p + 1:], f"bit {bit} of byte {p} flipped"
    if how == "byte":
        v = int(rng.integers(256))
        return data[:p] + bytes([v]) + data[p + 1:], f"byte {p} = {v:#04x}"
    if how == "truncate":
        return data[:p], f"truncated to {p} bytes"
    if how == "insert":
        ins = rng.integers(0, 256, int(rng.integers(1, 9)), dtype=np.uint8).tobytes()
        return data[:p] + ins + data[p:], f"{ins!r} inserted at {p}"
    if how == "delete":
        k = int(rng.integers(1, 17))
        return data[:p] + data[p + k:], f"{k} bytes deleted at {p}"
    if how == "dup":
        k = int(rng.integers(1, 65))
        return data[:p] + data[p:p + k] + data[p:], f"{k} bytes at {p} duplicated"
    v = pick(rng, [b"[", b"{", b"]", b"}", b"#", b"$", b"L", b"H", b"S", b"Z", b"N", b"d", b"D",
                   b"\xff", b"\x7f"])
    return data[:p] + v + data[p + 1:], f"byte {p} = marker {v!r}"


# =============================================================================================
# LightGBM: line-level mutations of the text model
# =============================================================================================
LGB_TOKENS = ["-1", "0", "1", "2", "3", "99", "2147483647", "2147483648", "-2147483649", "1e300",
              "nan", "inf", "-inf", "abc", "", "1.5", "-0", "0x10", "1e-320", "-1e-36", "1e-36",
              "4294967296", "9223372036854775808", "+1", " 1"]
LGB_FIELD_VALUES = {
    "left_child": ["0", "-1", "-6", "-7", "5", "6", "99", "-99", "1.5", "2147483648"],
    "right_child": ["0", "-1", "-6", "-7", "5", "6", "99", "-99", "1.5", "2147483648"],
    "split_feature": ["-1", "4", "5", "99", "2147483647", "1.5", "-2147483649"],
    "threshold": ["nan", "inf", "-inf", "1e308", "-0", "1e-36", "-1e-36", "1e-320", "abc",
                  "1.7976931348623157e+308", "1e400"],
    "decision_type": ["0", "1", "2", "3", "4", "5", "6", "7", "8", "9", "10", "11", "12", "15",
                      "16", "255", "256", "-1"],
    "leaf_value": ["nan", "inf", "-inf", "1e308", "-0", "abc", "1e400", "5e-324"],
    "cat_boundaries": ["-1", "0", "1", "2", "3", "100", "2147483648"],
    "cat_threshold": ["0", "4294967295", "4294967296", "-1", "2147483648", "1", "abc"],
    "num_leaves": ["0", "1", "2", "4", "5", "6", "7", "100", "-1", "abc", "2147483648"],
    "num_cat": ["0", "1", "2", "-1", "100"],
    "shrinkage": ["0", "nan", "-1", "abc", "1e308"],
    "is_linear": ["1", "2", "abc"],
}
LGB_HEADER_VALUES = {
    "num_class": ["0", "1", "2", "3", "4", "-1", "abc", "1e9", "2147483648"],
    "num_tree_per_iteration": ["0", "1", "2", "3", "4", "-1", "abc"],
    "max_feature_idx": ["-1", "0", "1", "2", "3", "4", "10", "2147483647", "abc", "1e3"],
    "objective": ["binary sigmoid:1", "binary sigmoid:2", "binary sigmoid:0.5", "binary",
                  "multiclass num_class:3", "multiclass num_class:5", "multiclassova num_class:3",
                  "multiclassova num_class:3 sigmoid:2", "poisson", "gamma", "tweedie",
                  "regression sqrt", "cross_entropy", "cross_entropy_lambda", "lambdarank",
                  "quantile", "foo", "", "huber", "regression_l1", "multiclass", "binary sigmoid:abc",
                  "binary sigmoid:nan", "binary sigmoid:-1"],
    "version": ["v1", "v5", "", "v3", "v2"],
    "label_index": ["-1", "abc", "5"],
    "feature_names": ["a b", "a b c d e", ""],
    "feature_infos": ["none", "[0:1]", "[0:1] [0:1] [0:1] [0:1] [0:1] [0:1]"],
}


def _lgb_tree_spans(lines: list[str]) -> list[tuple[int, int]]:
    """(first line, end line) of each 'Tree=' block (end: the next 'Tree=' or 'end of trees')."""
    starts = [i for i, ln in enumerate(lines) if ln.startswith("Tree=")]
    spans = []
    for j, s in enumerate(starts):
        e = starts[j + 1] if j + 1 < len(starts) else next(
            (i for i in range(s, len(lines)) if lines[i].rstrip("\r\n") == "end of trees"), len(lines))
        spans.append((s, e))
    return spans


def lgb_fix_tree_sizes(text: str) -> str:
    """Recompute the header's tree_sizes from the tree blocks (as LightGBM writes them)."""
    lines = text.splitlines(keepends=True)
    spans = _lgb_tree_spans(lines)
    sizes = [sum(len(ln.encode("latin-1")) for ln in lines[s:e]) for s, e in spans]
    for i, ln in enumerate(lines):
        if ln.startswith("tree_sizes="):
            eol = ln[len(ln.rstrip("\r\n")):]
            lines[i] = "tree_sizes=" + " ".join(map(str, sizes)) + eol
    return "".join(lines)


def _lgb_kv_lines(lines, spans, key=None):
    out = []
    for t, (s, e) in enumerate(spans):
        for i in range(s + 1, e):
            k = lines[i].split("=", 1)[0]
            if "=" in lines[i] and (key is None or k == key):
                out.append((t, i, k))
    return out


def _lgb_region(lines: list[str], spans, line: int) -> str:
    """Where a line is: the header, tree k, or the trailer (after the trees)."""
    for k, (a, b) in enumerate(spans):
        if a <= line < b:
            return f"tree {k}"
    return "header" if not spans or line < spans[0][0] else "trailer"


def _lgb_byte_region(lines: list[str], spans, p: int) -> str:
    pos = 0
    for j, ln in enumerate(lines):
        pos += len(ln.encode("latin-1"))
        if p < pos:
            return _lgb_region(lines, spans, j)
    return "trailer"


def lgb_mutate(text: str, rng) -> tuple[str, list[str], bool]:
    """One or two mutations of a LightGBM model text; returns (text, descriptions, touched
    a tree block)."""
    descs, touched = [], False
    n_ops = 1 if rng.random() < 0.75 else 2
    for _ in range(n_ops):
        lines = text.splitlines(keepends=True)
        spans = _lgb_tree_spans(lines)
        header_end = spans[0][0] if spans else len(lines)
        end_trees = spans[-1][1] if spans else len(lines)
        how = pick(rng, ["field"] * 8 + ["field_len"] * 2 + ["header"] * 5 + ["cycle"] * 2 +
                   ["drop_line"] * 3 + ["dup_line"] * 2 + ["truncate", "garbage", "crlf",
                                                           "no_end", "tree_sizes", "swap_trees",
                                                           "drop_tree", "blank"])
        if how in ("field", "field_len", "cycle") and spans:
            key = pick(rng, list(LGB_FIELD_VALUES)) if how == "field" else (
                pick(rng, ["left_child", "right_child"]) if how == "cycle" else
                pick(rng, ["split_feature", "threshold", "left_child", "right_child", "leaf_value",
                           "decision_type", "cat_boundaries", "cat_threshold", "split_gain",
                           "internal_value", "leaf_count"]))
            cands = _lgb_kv_lines(lines, spans, key)
            if not cands:
                cands = _lgb_kv_lines(lines, spans)
            t, i, k = pick(rng, cands)
            body = lines[i].rstrip("\r\n")
            eol = lines[i][len(body):]
            toks = body.split("=", 1)[1].split(" ")
            if how == "field_len":
                if rng.random() < 0.5 and toks:
                    toks.pop(int(rng.integers(len(toks))))
                    d = "one value removed"
                else:
                    toks.append(pick(rng, toks + ["0"]))
                    d = "one value appended"
            elif how == "cycle":
                j = int(rng.integers(len(toks)))
                toks[j] = pick(rng, [str(v) for v in range(0, j + 1)])
                d = f"[{j}] = {toks[j]} (cycle to an ancestor / itself)"
            else:
                j = int(rng.integers(len(toks)))
                toks[j] = pick(rng, LGB_FIELD_VALUES.get(k, LGB_TOKENS) + LGB_TOKENS[:6])
                d = f"[{j}] = {toks[j]!r}"
            lines[i] = f"{k}=" + " ".join(toks) + eol
            descs.append(f"Tree {t}: {k}{d if d.startswith('[') else ': ' + d}")
            touched = True
        elif how == "header":
            key = pick(rng, list(LGB_HEADER_VALUES))
            new = pick(rng, LGB_HEADER_VALUES[key])
            idx = [i for i in range(header_end) if lines[i].split("=", 1)[0] == key]
            if idx and rng.random() < 0.9:
                eol = lines[idx[0]][len(lines[idx[0]].rstrip("\r\n")):]
                lines[idx[0]] = f"{key}={new}{eol}"
                descs.append(f"header {key}={new!r}")
            elif idx:
                del lines[idx[0]]
                descs.append(f"header line {key} removed")
            else:
                lines.insert(1, f"{key}={new}\n")
                descs.append(f"header line {key}={new!r} added")
            if rng.random() < 0.1:
                lines.insert(1, "average_output\n")
                descs.append("average_output added")
        elif how == "drop_line":
            i = int(rng.integers(1, end_trees)) if rng.random() < 0.85 else int(rng.integers(len(lines)))
            descs.append(f"line {i} {lines[i].rstrip()[:30]!r} ({_lgb_region(lines, spans, i)}) removed")
            del lines[i]
            touched = True
        elif how == "dup_line":
            i = int(rng.integers(1, end_trees))
            descs.append(f"line {i} {lines[i].rstrip()[:30]!r} ({_lgb_region(lines, spans, i)}) duplicated")
            lines.insert(i, lines[i])
            touched = True
        elif how == "truncate":
            data = "".join(lines).encode("latin-1")
            p = int(rng.integers(len(data)))
            descs.append(f"truncated at byte {p} ({_lgb_byte_region(lines, spans, p)})")
            lines = [data[:p].decode("latin-1")]
        elif how == "garbage":
            data = "".join(lines).encode("latin-1")
            p = int(rng.integers(len(data)))
            ins = pick(rng, [b"\x00", b"\xff\xfe", b"\x80", b"\r", b"\n", b"=", b" ", b"\t",
                             rng.integers(0, 256, 6, dtype=np.uint8).tobytes()])
            descs.append(f"bytes {ins!r} inserted at {p} ({_lgb_byte_region(lines, spans, p)})")
            return (data[:p] + ins + data[p:]).decode("latin-1"), descs, True
        elif how == "crlf":
            lines = ["".join(lines).replace("\r\n", "\n").replace("\n", "\r\n")]
            descs.append("CRLF line endings")
            touched = True
        elif how == "no_end":
            lines = [ln for ln in lines if ln.rstrip("\r\n") != "end of trees"]
            descs.append("'end of trees' removed")
        elif how == "tree_sizes":
            idx = [i for i in range(header_end) if lines[i].startswith("tree_sizes=")]
            if idx:
                i = idx[0]
                if rng.random() < 0.4:
                    del lines[i]
                    descs.append("tree_sizes removed")
                else:
                    toks = lines[i].rstrip("\r\n").split("=", 1)[1].split(" ")
                    j = int(rng.integers(len(toks)))
                    toks[j] = pick(rng, ["0", "1", str(int(toks[j]) + 1), str(int(toks[j]) - 1),
                                         "100000", "-1", "abc"])
                    lines[i] = "tree_sizes=" + " ".join(toks) + "\n"
                    descs.append(f"tree_sizes[{j}] = {toks[j]}")
                    return "".join(lines), descs, False  # keep the corrupt sizes
        elif how == "swap_trees" and len(spans) > 1:
            a, b = sorted(rng.choice(len(spans), 2, replace=False))
            (s1, e1), (s2, e2) = spans[a], spans[b]
            lines = lines[:s1] + lines[s2:e2] + lines[e1:s2] + lines[s1:e1] + lines[e2:]
            descs.append(f"tree blocks {a} and {b} swapped")
            touched = True
        elif how == "drop_tree" and spans:
            a = int(rng.integers(len(spans)))
            s, e = spans[a]
            del lines[s:e]
            descs.append(f"tree block {a} removed")
            touched = True
        else:
            i = int(rng.integers(1, end_trees))
            lines.insert(i, "\n")
            descs.append(f"empty line inserted at line {i}")
            touched = True
        text = "".join(lines)
    return text, descs, touched


# =============================================================================================
# scikit-learn: corrupting fitted estimators
# =============================================================================================
def _tree_state_set(est, rng) -> str:
    t = est.tree_
    st = t.__getstate__()
    nodes = st["nodes"].copy()
    values = st["values"].copy()
    n = len(nodes)
    L = nodes["left_child"]
    internal = [i for i in range(n) if L[i] >= 0]
    how = pick(rng, ["child"] * 4 + ["cycle"] * 2 + ["feature"] * 3 + ["threshold"] * 3 +
                    ["mgl", "value", "value", "node_count", "max_depth", "half_leaf"])
    if how in ("child", "cycle", "half_leaf"):
        side = pick(rng, ["left_child", "right_child"])
        nd = pick(rng, internal)
        if how == "cycle":
            parents = {int(c): i for i in internal for c in (nodes["left_child"][i],
                                                             nodes["right_child"][i])}
            anc, cur = [nd], nd
            while cur in parents:
                cur = parents[cur]
                anc.append(cur)
            new = pick(rng, anc)
        elif how == "half_leaf":
            new = -1
        else:
            new = pick(rng, [n, n + 5, 10 ** 6, -2, -5, 2 ** 40, int(rng.integers(n))])
        nodes[side][nd] = new
        d = f"tree_.{side}[{nd}] = {new}"
    elif how == "feature":
        nd = pick(rng, internal) if rng.random() < 0.85 else int(rng.integers(n))
        nf = est.n_features_in_
        new = pick(rng, [-1, -2, -3, nf, nf + 3, 2 ** 40, nf - 1])
        nodes["feature"][nd] = new
        d = f"tree_.feature[{nd}] = {new}"
    elif how == "threshold":
        nd = pick(rng, internal)
        new = pick(rng, [NAN, INF, -INF, 1e308, -0.0, 5e-324, 3.4028235e38, 3.4028236e38])
        nodes["threshold"][nd] = new
        d = f"tree_.threshold[{nd}] = {new}"
    elif how == "mgl":
        nd = int(rng.integers(n))
        new = pick(rng, [2, 255, 1 - int(nodes["missing_go_to_left"][nd])])
        nodes["missing_go_to_left"][nd] = new
        d = f"tree_.missing_go_to_left[{nd}] = {new}"
    elif how == "value":
        nd = int(rng.integers(n))
        new = pick(rng, [NAN, INF, -1.0, 1e308, -0.0, 2.0])
        values[nd].flat[int(rng.integers(values[nd].size))] = new
        d = f"tree_.value[{nd}] element = {new}"
    elif how == "node_count":
        k = int(rng.integers(1, n))
        nodes, values = nodes[:k].copy(), values[:k].copy()
        st["node_count"] = k
        d = f"tree_ truncated to {k} nodes"
    else:
        new = pick(rng, [0, 1, 100])
        st["max_depth"] = new
        d = f"tree_.max_depth = {new}"
    st["nodes"], st["values"] = nodes, values
    t.__setstate__(st)
    return d


def _est_attr(est, rng) -> str:
    how = pick(rng, ["n_features_in_", "n_outputs_", "n_classes_", "classes_"])
    if not hasattr(est, how) and how != "n_features_in_":
        how = "n_features_in_"
    if how == "n_features_in_":
        new = pick(rng, [1, 2, est.n_features_in_ + 2, 0])
    elif how == "n_outputs_":
        new = pick(rng, [2, 0])
    elif how == "n_classes_":
        c = est.n_classes_
        new = pick(rng, [2, 5, 1, np.array([3, 3])]) if np.ndim(c) == 0 else pick(rng, [5, 1])
    else:
        c = np.asarray(est.classes_)
        new = pick(rng, [c[:-1], np.concatenate([c, [99]]), np.array(["a", "b", "c"]),
                         c[::-1].copy(), c.astype(float) + 0.5])
    setattr(est, how, new)
    return f"{how} = {_short(new)}"


def _hgb_mutate(model, rng) -> str:
    how = pick(rng, ["node"] * 8 + ["bitset", "baseline", "predictors", "predictors", "attr"])
    if how == "node":
        it = int(rng.integers(len(model._predictors)))
        k = int(rng.integers(len(model._predictors[it])))
        pred = model._predictors[it][k]
        nodes = pred.nodes.copy()
        n = len(nodes)
        internal = [i for i in range(n) if not nodes["is_leaf"][i]]
        field = pick(rng, ["feature_idx", "left", "right", "is_leaf", "num_threshold",
                           "missing_go_to_left", "is_categorical", "bitset_idx", "value",
                           "left", "right", "feature_idx"])
        nd = pick(rng, internal) if internal and rng.random() < 0.8 else int(rng.integers(n))
        nf = model.n_features_in_
        vals = {"feature_idx": [-1, nf, nf + 5, 2 ** 40, 0],
                "left": [n, n + 3, 0, nd, 2 ** 32 - 1, 1],
                "right": [n, n + 3, 0, nd, 2 ** 32 - 1, 1],
                "is_leaf": [1 - int(nodes["is_leaf"][nd]), 2],
                "num_threshold": [NAN, INF, -INF, -0.0, 1e308],
                "missing_go_to_left": [2, 255, 1 - int(nodes["missing_go_to_left"][nd])],
                "is_categorical": [1 - int(nodes["is_categorical"][nd]), 2],
                "bitset_idx": [1, 5, 2 ** 32 - 1, 0],
                "value": [NAN, INF, -INF, 1e308]}[field]
        new = pick(rng, vals)
        nodes[field][nd] = new
        pred.nodes = nodes
        return f"_predictors[{it}][{k}].nodes[{nd}].{field} = {new}"
    if how == "bitset":
        it = int(rng.integers(len(model._predictors)))
        pred = model._predictors[it][0]
        b = np.asarray(pred.raw_left_cat_bitsets).copy()
        if b.shape[0] and rng.random() < 0.6:
            b[int(rng.integers(b.shape[0])), int(rng.integers(8))] = pick(rng, [0, 2 ** 32 - 1, 12345])
            d = "one word changed"
        else:
            b = b[:0]
            d = "emptied"
        pred.raw_left_cat_bitsets = b
        return f"_predictors[{it}][0].raw_left_cat_bitsets {d}"
    if how == "baseline":
        bp = np.asarray(model._baseline_prediction)
        new = pick(rng, [np.full_like(bp, NAN), np.full_like(bp, INF), np.zeros((1, 2)),
                         np.zeros((0, 1)), bp.reshape(-1), np.float64(0.5)])
        model._baseline_prediction = new
        return f"_baseline_prediction = {_short(new)}"
    if how == "predictors":
        h = pick(rng, ["drop", "empty", "dup", "inner_empty", "inner_dup"])
        p = model._predictors
        if h == "drop":
            p.pop(int(rng.integers(len(p))))
        elif h == "empty":
            p.clear()
        elif h == "dup":
            p.append(copy.deepcopy(p[0]))
        elif h == "inner_empty":
            p[int(rng.integers(len(p)))] = []
        else:
            p[0] = p[0] + p[0]
        return f"_predictors: {h}"
    return _est_attr(model, rng)


def sk_mutate(name: str, model, rng) -> list[str]:
    descs = []
    for _ in range(1 if rng.random() < 0.8 else 2):
        try:
            descs.append(_sk_mutate_once(name, model, rng))
        except (IndexError, ValueError, KeyError):  # what it needed is gone (an earlier op)
            descs.append(_est_attr(model, rng))
    return descs


def _sk_mutate_once(name: str, model, rng) -> str:
    descs: list[str] = []
    for _ in range(1):
        if name == "hgb":
            descs.append(_hgb_mutate(model, rng))
        elif name == "rf":
            how = rng.random()
            if how < 0.7:
                k = int(rng.integers(len(model.estimators_)))
                descs.append(f"estimators_[{k}]: " + _tree_state_set(model.estimators_[k], rng))
            elif how < 0.8:
                descs.append(_est_attr(model, rng))
            elif how < 0.9:
                k = int(rng.integers(len(model.estimators_)))
                descs.append(f"estimators_[{k}]: " + _est_attr(model.estimators_[k], rng))
            else:
                h = pick(rng, ["drop", "dup", "empty", "none"])
                e = model.estimators_
                if h == "drop":
                    e.pop()
                elif h == "dup":
                    e.append(copy.deepcopy(e[0]))
                elif h == "empty":
                    e.clear()
                else:
                    e[0] = None
                descs.append(f"estimators_: {h}")
        else:
            descs.append(_tree_state_set(model, rng) if rng.random() < 0.85 else _est_attr(model, rng))
    return descs[0]


# =============================================================================================
# Kinds: seeds, cases, treecomp's answer and the library's
# =============================================================================================
def _xgb_seeds(sd: Path) -> dict:
    import xgboost as xgb
    rng = np.random.default_rng(SEED)
    out = {}
    X = rng.normal(size=(300, 4)).astype(np.float32)
    X[rng.random(X.shape) < 0.05] = np.nan
    y = np.nan_to_num(X[:, 0]) + np.nan_to_num(X[:, 1]) ** 2
    kw = dict(max_depth=3, nthread=1, random_state=0, tree_method="hist")
    xgb.XGBRegressor(n_estimators=4, **kw).fit(X, y).save_model(sd / "reg.json")
    xgb.XGBClassifier(n_estimators=3, **kw).fit(X, (y > 1).astype(int)).save_model(sd / "bin.json")
    d = xgb.DMatrix(X, np.digitize(y, [0.5, 2.0]), nthread=1)
    xgb.train({"objective": "multi:softprob", "num_class": 3, "max_depth": 3, "nthread": 1,
               "seed": 0}, d, 2).save_model(sd / "multi.json")
    xgb.train({"objective": "count:poisson", "max_depth": 2, "nthread": 1, "seed": 0},
              xgb.DMatrix(X, np.abs(y).round(), nthread=1), 3).save_model(sd / "pois.json")
    Xc = X.copy()
    Xc[:, 0] = rng.integers(0, 6, len(X))
    yc = (Xc[:, 0] % 2) + np.nan_to_num(Xc[:, 1])
    dc = xgb.DMatrix(Xc, yc, feature_types=["c", "q", "q", "q"], enable_categorical=True, nthread=1)
    xgb.train({"max_depth": 3, "nthread": 1, "tree_method": "hist", "max_cat_to_onehot": 1,
               "seed": 0}, dc, 3).save_model(sd / "cat.json")
    for name in ("reg", "bin", "multi", "pois", "cat"):
        xgb.Booster(model_file=str(sd / f"{name}.json")).save_model(sd / f"{name}.ubj")
        rows = (Xc if name == "cat" else X)[:8].copy()
        rows[6] = np.nan
        if name == "cat":
            rows[:6, 0] = [-1.0, 0.5, 2.9, 100.0, 3e7, np.nan]
        np.save(sd / f"{name}.npy", rows)
        out[name] = None
    # the wrapper files (reg, bin) keep attributes.scikit_learn in .json; the .ubj re-saved by a
    # plain Booster drops it: both modes are covered
    return out


def _xgb_docs(sd: Path, ext: str) -> dict:
    from treecomp.frontends import ubjson
    docs = {}
    for name in ("reg", "bin", "multi", "pois", "cat"):
        data = (sd / f"{name}.{ext}").read_bytes()
        docs[name] = (json.loads(data) if ext == "json" else ubjson.decode(data), data,
                      np.load(sd / f"{name}.npy"))
    return docs


def _widen(rows: np.ndarray, n: int, rng_seed: int) -> np.ndarray:
    """rows with exactly n columns: cut, or padded with seeded normals."""
    if rows.shape[1] >= n:
        return np.ascontiguousarray(rows[:, :n])
    pad = np.random.default_rng(rng_seed).normal(size=(len(rows), n - rows.shape[1]))
    return np.hstack([rows, pad.astype(rows.dtype)])


class _Kind:
    name = ""
    ext = ""

    def make_seeds(self, sd: Path) -> None: ...

    def load(self, sd: Path) -> Any: ...

    def make_case(self, seeds, i: int, rng, path: Path) -> tuple[str, Any, np.ndarray]:
        """(description, parse target, base rows); writes the mutated file to path."""

    def ours(self, forest, pred, X):
        return pred.decision_function(X)

    def library(self, target, forest, X): ...


class XgbJson(_Kind):
    name, ext = "xgb_json", "json"

    def make_seeds(self, sd):
        _xgb_seeds(sd)

    def load(self, sd):
        return _xgb_docs(sd, self.ext)

    def _structural(self, doc, rng):
        return mutate_doc(doc, rng, XGB_OPS)

    def make_case(self, seeds, i, rng, path):
        names = sorted(seeds)
        if i < len(names):  # the seeds themselves: the harness must see them match
            name = names[i]
            path.write_bytes(seeds[name][1])
            return f"seed {name}, unmutated", path, seeds[name][2]
        name = pick(rng, names)
        doc, raw, rows = seeds[name]
        if rng.random() < 0.1:
            data, d = mutate_bytes(raw, rng)
            path.write_bytes(data)
            return f"seed {name}: text: {d}", path, rows
        doc = copy.deepcopy(doc)
        descs = self._structural(doc, rng)
        path.write_bytes(self.encode(doc))
        return f"seed {name}: " + "; ".join(descs), path, rows

    def encode(self, doc) -> bytes:
        return json.dumps(doc, default=lambda a: a.tolist()).encode()

    def library(self, target, forest, X):
        import xgboost as xgb
        b = xgb.Booster(model_file=str(target))
        b.set_param({"nthread": 1})
        return b.predict(xgb.DMatrix(X, nthread=1), output_margin=True)


def _star(path) -> tuple:
    return tuple("*" if isinstance(p, int) else p for p in path)


def _retype(doc, seed_doc) -> None:
    """Lists that were typed arrays in the seed become typed arrays of the seed's dtype again
    where every value fits exactly (XGBoost's UBJSON reader wants a tree's arrays all typed);
    values that do not fit (strings, None, out of range) leave the list untyped."""
    typed = {_star(p): v.dtype for _, _, p, v in _walk(seed_doc) if isinstance(v, np.ndarray)}
    for c, k, p, v in list(_walk(doc)):
        dt = typed.get(_star(p))
        if dt is None or not isinstance(v, list):
            continue
        if not all(isinstance(e, (int, float)) and not isinstance(e, bool) for e in v):
            continue
        with np.errstate(all="ignore"):
            try:
                a = np.array(v, dtype=dt)
            except (OverflowError, ValueError, TypeError):
                continue
            back = a.astype(np.float64) if dt.kind == "f" else a.astype(object)
            same = all((isinstance(e, float) and math.isnan(e) and math.isnan(b)) or e == b
                       for e, b in zip(v, back.tolist()))
        if same or dt.kind == "f" and all(isinstance(e, (int, float)) for e in v) and np.all(
                np.isfinite(a) | ~np.isfinite(np.array(v, np.float64))):
            c[k] = a


class XgbUbj(XgbJson):
    name, ext = "xgb_ubj", "ubj"

    def make_case(self, seeds, i, rng, path):
        names = sorted(seeds)
        if i < 2 * len(names):  # seeds as saved, then re-encoded by ubj_encode (checks the encoder)
            name = names[i % len(names)]
            doc, raw, rows = seeds[name]
            if i < len(names):
                path.write_bytes(raw)
                return f"seed {name}, unmutated", path, rows
            path.write_bytes(ubj_encode(doc))
            return f"seed {name}, re-encoded unmutated", path, rows
        name = pick(rng, names)
        doc, raw, rows = seeds[name]
        if rng.random() < 0.5:
            data, descs = raw, []
            for _ in range(1 if rng.random() < 0.8 else 2):
                data, d = mutate_bytes(data, rng)
                descs.append(d)
            path.write_bytes(data)
            return f"seed {name}: bytes: " + "; ".join(descs), path, rows
        seed_doc, doc = doc, copy.deepcopy(doc)
        descs = self._structural(doc, rng)
        _retype(doc, seed_doc)
        path.write_bytes(ubj_encode(doc))
        return f"seed {name}: re-encoded after " + "; ".join(descs), path, rows


class LgbTxt(_Kind):
    name, ext = "lgb_txt", "txt"

    def make_seeds(self, sd):
        import lightgbm as lgb
        rng = np.random.default_rng(SEED + 1)
        X = rng.normal(size=(400, 4))
        X[rng.random(X.shape) < 0.05] = np.nan
        y = np.nan_to_num(X[:, 0]) + np.nan_to_num(X[:, 1]) ** 2
        base = dict(verbose=-1, num_threads=1, seed=3, deterministic=True, force_row_wise=True,
                    num_leaves=6, min_data_in_leaf=5)
        lgb.train({**base, "objective": "regression"}, lgb.Dataset(X, y), 4).save_model(sd / "reg.txt")
        lgb.train({**base, "objective": "binary"}, lgb.Dataset(X, (y > 1).astype(int)), 3) \
            .save_model(sd / "bin.txt")
        lgb.train({**base, "objective": "multiclass", "num_class": 3},
                  lgb.Dataset(X, np.digitize(y, [0.5, 2.0])), 2).save_model(sd / "multi.txt")
        X0 = np.where(np.isnan(X), 0.0, X)
        X0[rng.random(X.shape) < 0.2] = 0.0
        lgb.train({**base, "objective": "regression", "zero_as_missing": True},
                  lgb.Dataset(X0, y), 3).save_model(sd / "zero.txt")
        Xc = X.copy()
        Xc[:, 0] = rng.integers(0, 6, len(X))
        yc = (Xc[:, 0] % 2) + np.nan_to_num(Xc[:, 1])
        lgb.train({**base, "objective": "regression", "max_cat_to_onehot": 1, "cat_smooth": 1,
                   "min_data_per_group": 5, "cat_l2": 1},
                  lgb.Dataset(Xc, yc, categorical_feature=[0]), 3).save_model(sd / "cat.txt")
        for name, src in (("reg", X), ("bin", X), ("multi", X), ("zero", X0), ("cat", Xc)):
            rows = src[:10].copy()
            rows[6] = np.nan
            rows[7, :] = [0.0, -0.0, 1e-36, -1e300]
            if name == "cat":
                rows[:6, 0] = [-1.0, -0.5, 0.5, 2.9, 1e10, np.nan]
            np.save(sd / f"{name}.npy", rows)

    def load(self, sd):
        return {name: ((sd / f"{name}.txt").read_text(), np.load(sd / f"{name}.npy"))
                for name in ("reg", "bin", "multi", "zero", "cat")}

    def make_case(self, seeds, i, rng, path):
        names = sorted(seeds)
        if i < len(names):
            name = names[i]
            path.write_bytes(seeds[name][0].encode())
            return f"seed {name}, unmutated", path, seeds[name][1]
        name = pick(rng, names)
        text, rows = seeds[name]
        assert lgb_fix_tree_sizes(text) == text, "tree_sizes recomputation disagrees with LightGBM"
        text, descs, touched = lgb_mutate(text, rng)
        if touched and "tree_sizes" in text:
            h = rng.random()
            if h < 0.6:
                text = lgb_fix_tree_sizes(text)
                descs.append("tree_sizes recomputed")
            elif h < 0.8:
                text = "".join(ln for ln in text.splitlines(keepends=True)
                               if not ln.startswith("tree_sizes="))
                descs.append("tree_sizes removed")
            else:
                descs.append("tree_sizes left stale")
        path.write_bytes(text.encode("latin-1"))  # seeds are ASCII; garbage bytes are latin-1
        return f"seed {name}: " + "; ".join(descs), path, rows

    def ours(self, forest, pred, X):
        # random-forest mode (output_divisor): raw_score is the undivided sum, as ours; the
        # division is then compared through predict's outputs
        if forest.output_divisor != 1:
            return np.concatenate([pred.decision_function(X).reshape(len(X), -1),
                                   pred.predict(X).reshape(len(X), -1)], axis=1)
        return pred.decision_function(X)

    def library(self, target, forest, X):
        import lightgbm as lgb
        b = lgb.Booster(model_file=str(target))
        raw = b.predict(X, raw_score=True, num_threads=1)
        if forest.output_divisor != 1:
            return np.concatenate([raw.reshape(len(X), -1),
                                   b.predict(X, num_threads=1).reshape(len(X), -1)], axis=1)
        return raw


class Sklearn(_Kind):
    name, ext = "sklearn", "pkl"

    def make_seeds(self, sd):
        from sklearn.ensemble import HistGradientBoostingClassifier, RandomForestClassifier
        from sklearn.tree import DecisionTreeRegressor
        rng = np.random.default_rng(SEED + 2)
        X = rng.normal(size=(300, 4))
        X[rng.random(X.shape) < 0.05] = np.nan
        y = np.nan_to_num(X[:, 0]) + np.nan_to_num(X[:, 1]) ** 2
        Xc = X.copy()
        Xc[:, 0] = rng.integers(0, 6, len(X))
        models = {
            "dt": DecisionTreeRegressor(max_depth=3, random_state=0).fit(X, y),
            "rf": RandomForestClassifier(n_estimators=3, max_depth=3, random_state=0, n_jobs=1)
            .fit(X, np.digitize(y, [0.5, 2.0])),
            "hgb": HistGradientBoostingClassifier(max_iter=3, max_depth=3, random_state=0,
                                                  categorical_features=[0])
            .fit(Xc, (Xc[:, 0] % 2 + np.nan_to_num(Xc[:, 1]) > 1).astype(int)),
        }
        rows = X[:10].copy()
        rows[6] = np.nan
        rows_c = Xc[:10].copy()
        rows_c[6] = np.nan
        rows_c[:5, 0] = [-1.0, 0.5, 7.0, 300.0, np.nan]
        with open(sd / "seeds.pkl", "wb") as f:
            pickle.dump({"dt": (models["dt"], rows), "rf": (models["rf"], rows),
                         "hgb": (models["hgb"], rows_c)}, f)

    def load(self, sd):
        with open(sd / "seeds.pkl", "rb") as f:
            return pickle.load(f)

    def make_case(self, seeds, i, rng, path):
        names = sorted(seeds)
        if i < len(names):
            name = names[i]
            return f"seed {name}, unmutated", copy.deepcopy(seeds[name][0]), seeds[name][1]
        name = pick(rng, names)
        model, rows = seeds[name]
        model = copy.deepcopy(model)
        descs = sk_mutate(name, model, rng)
        return f"seed {name}: " + "; ".join(descs), model, rows

    def ours(self, forest, pred, X):
        return pred.predict_proba(X) if forest.is_classifier else pred.predict(X)

    def library(self, target, forest, X):
        return target.predict_proba(X) if forest.is_classifier else target.predict(X)


_KINDS: dict[str, _Kind] = {k.name: k for k in (XgbJson(), XgbUbj(), LgbTxt(), Sklearn())}


# =============================================================================================
# The worker (runs in a subprocess)
# =============================================================================================
def _case_rng(kind: str, i: int) -> np.random.Generator:
    return np.random.default_rng([SEED, KINDS.index(kind), i])


def _seed_dir(workdir: Path, kind: str) -> Path:
    sd = workdir / "seeds"
    done = sd / "done"
    if not done.exists():
        sd.mkdir(parents=True, exist_ok=True)
        _KINDS[kind].make_seeds(sd)
        done.write_text("ok")
    return sd


def _direct_library(kind: str, target, forest, X, workdir: Path, i: int):
    """("ok", array) or ("error", summary): the library's answer, in this process."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return "ok", np.asarray(_KINDS[kind].library(target, forest, X))
    except Exception as exc:  # noqa: BLE001 - whatever the library raises is its answer
        return "error", _tb_summary(exc, 1)


def _forked_library(kind: str, target, forest, X, workdir: Path, i: int):
    """The library's answer computed in a forked child (the library is imported, never run, in
    the worker): a segfault, abort or hang of the library kills only the child. Returns
    ("ok", array), ("error", summary) or ("crash", what happened + the child's stderr)."""
    import select
    import signal
    import faulthandler
    # the worker's watchdog thread must not be running across fork (its lock would be copied
    # held and deadlock the child); the child's time is bounded by the select() deadline below
    faulthandler.cancel_dump_traceback_later()
    errpath = workdir / f"liberr{i}.txt"
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # child
        try:
            os.close(r)
            fd = os.open(errpath, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            os.dup2(fd, 2)
            os.dup2(fd, 1)
            res = pickle.dumps(_direct_library(kind, target, forest, X, workdir, i))
            with os.fdopen(w, "wb") as out:
                out.write(res)
        except BaseException:  # noqa: BLE001
            traceback.print_exc()
            os._exit(3)
        os._exit(0)
    os.close(w)
    buf, deadline, killed = b"", time.monotonic() + CASE_TIMEOUT_S, False
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            os.kill(pid, signal.SIGKILL)
            killed = True
            break
        ready, _, _ = select.select([r], [], [], left)
        if ready:
            chunk = os.read(r, 1 << 16)
            if not chunk:
                break
            buf += chunk
    os.close(r)
    _, status = os.waitpid(pid, 0)
    err = errpath.read_text(errors="replace") if errpath.exists() else ""
    errpath.unlink(missing_ok=True)
    if buf and not killed and os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0:
        return pickle.loads(buf)
    err = err.split("\nExtension modules:")[0][-2000:]  # faulthandler's module list: noise
    hang = killed or "Timeout (" in err
    what = (f"killed by signal {os.WTERMSIG(status)}" if os.WIFSIGNALED(status)
            else f"exit status {os.WEXITSTATUS(status)}")
    return "crash", f"{'hang' if hang else 'crash'} ({what}); its output: {err.strip()[-1500:]}"


def _run_case(kind: str, seeds, i: int, workdir: Path, mark: Callable[[str], None],
              keep: bool = False, verbose: bool = False, library=_direct_library) -> dict:
    import treecomp
    k = _KINDS[kind]
    rec: dict[str, Any] = {"case": f"{kind}:{i}", "i": i}
    mark(f"G {i}")
    rng = _case_rng(kind, i)
    path = workdir / f"case{i}.{k.ext}" if not keep else workdir / f"{kind}-{i}.{k.ext}"
    try:
        desc, target, rows = k.make_case(seeds, i, rng, path)
    except Exception as exc:  # noqa: BLE001 - a harness bug: reported as such
        rec.update(status="harness", detail=_tb_summary(exc))
        return rec
    rec["desc"] = desc
    if verbose:
        print(f"case {kind}:{i}: {desc}\nfile: {path if isinstance(target, Path) else '(object)'}")
    mark(f"T {i}")
    stage = "parse"
    forest = X = ours = None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            forest = treecomp.parse(target)
            stage = "compile"
            pred = treecomp.compile(forest, backend="arrays")
            stage = "predict"
            if forest.n_features > MAX_PREDICT_FEATURES:
                rec["note"] = f"n_features={forest.n_features}: not predicted"
            else:
                X = _widen(rows, forest.n_features, SEED + i)
                ours = np.asarray(k.ours(forest, pred, X))
                pred.predict(X)  # the output head too (labels / transforms)
    except BaseException as exc:  # noqa: BLE001 - classifying what escapes is the point
        if isinstance(exc, (KeyboardInterrupt, SystemExit)):
            raise
        rec.update(status="error" if _is_clear_error(exc) else "bad_error", stage=stage,
                   detail=_tb_summary(exc), exc=type(exc).__name__)
        if verbose:
            traceback.print_exc()
        return rec
    finally:
        if isinstance(target, Path) and not keep:
            rec["file_size"] = target.stat().st_size if target.exists() else None
    rec["status"] = "ok"
    if ours is None:
        return rec
    mark(f"L {i}")
    t_lib = time.perf_counter()
    how, want = library(kind, target, forest, X, workdir, i)
    rec["t_lib"] = round(time.perf_counter() - t_lib, 4)
    if how == "error":
        rec.update(lib="rejects", lib_detail=want)
        return rec
    if how == "crash":
        rec.update(lib="crashes", lib_detail=want)
        return rec
    rec["lib"] = "ok"
    try:
        np.testing.assert_array_equal(ours, want, strict=True)
        rec["match"] = True
    except AssertionError as exc:
        rec.update(match=False, mismatch=str(exc)[:600])
    if verbose:
        print("treecomp:", ours, "\nlibrary:", want)
    return rec


def warm_up() -> None:
    """Build (or load from TREECOMP_CACHE_DIR) the arrays backend's native kernel and the
    loader's compiled entry outside the per-case watchdog: the first build compiles C (over a
    minute on a busy 2-core machine), once per cache directory."""
    import treecomp
    from treecomp.ir import Forest, leaf_tree
    for dtype in ("float32", "float64"):
        f = Forest(trees=(leaf_tree(0.5),), n_features=1, n_outputs=1, tree_output=[0],
                   base_score=[0.0], input_dtype=dtype, accumulate_dtype=dtype)
        treecomp.compile(f, backend="arrays").predict(np.zeros((2, 1), dtype))


def _rlimit_memory(extra: int = 3 << 30) -> None:
    """Cap this process's address space at its current size plus `extra` bytes, so that an
    allocation driven by a corrupt count fails (MemoryError: a finding) instead of swapping a
    shared machine."""
    try:
        import resource
        with open("/proc/self/statm") as f:
            vm = int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
        soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        want = vm + extra
        if hard != resource.RLIM_INFINITY:
            want = min(want, hard)
        resource.setrlimit(resource.RLIMIT_AS, (want, hard))
    except (OSError, ValueError, ImportError):  # pragma: no cover - not Linux
        pass


def _seeds_main(argv: list[str]) -> None:
    _seed_dir(Path(argv[1]), argv[0])


def _worker_main(argv: list[str]) -> None:
    """Run the cases from `start` on: treecomp in this process (under a per-case watchdog that
    kills the worker on a hang; run_kind then resumes after that case), the library in a forked
    child per case. Progress goes to the `progress` file: "C i" (case started), "G/T/L i"
    (generating / treecomp / library), "R {json}" (the case's record)."""
    import faulthandler
    kind, workdir, start, progress = argv[0], Path(argv[1]), int(argv[2]), argv[3]
    faulthandler.enable()
    warm_up()
    seeds = _KINDS[kind].load(workdir / "seeds")
    # import the library once here (not run: no OpenMP threads before fork), so children are cheap
    __import__({"xgb_json": "xgboost", "xgb_ubj": "xgboost", "lgb_txt": "lightgbm",
                "sklearn": "sklearn.ensemble"}[kind])
    _rlimit_memory()
    with open(progress, "a", buffering=1) as out:
        def mark(m: str) -> None:
            out.write(m + "\n")

        for i in range(start, N_CASES[kind]):
            mark(f"C {i}")
            faulthandler.dump_traceback_later(CASE_TIMEOUT_S, exit=True)
            rec = _run_case(kind, seeds, i, workdir, mark, library=_forked_library)
            faulthandler.cancel_dump_traceback_later()
            mark("R " + json.dumps(rec))
            for f in workdir.glob(f"case{i}.*"):
                f.unlink()
        mark("DONE")


_ENTRY = ("import sys; sys.path.insert(0, sys.argv[1]); import tests.test_fuzz_frontends as m; "
          "getattr(m, sys.argv[2])(sys.argv[3:])")


def _env() -> dict:
    return dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1",
                PYTHONHASHSEED="0")


def run_kind(kind: str, workdir: Path) -> tuple[dict[int, dict], list[str]]:
    """Run every case of `kind`: the seeds trained in one subprocess, then the cases in a worker
    subprocess that forks one child per case. Should the worker itself die, it is restarted
    after the case it was on (recorded as a worker crash)."""
    workdir.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    p = subprocess.run([sys.executable, "-c", _ENTRY, str(ROOT), "_seeds_main", kind, str(workdir)],
                       cwd=str(ROOT), env=_env(), capture_output=True, timeout=KIND_TIMEOUT_S)
    if p.returncode != 0:
        return {}, [f"{kind}: training the seed models failed: {p.stderr.decode()[-2000:]}"]
    results: dict[int, dict] = {}
    problems: list[str] = []
    start, deadline = 0, t0 + KIND_TIMEOUT_S
    for attempt in range(MAX_RESTARTS + 1):
        prog = workdir / f"progress{attempt}.txt"
        left = deadline - time.monotonic()
        if left <= 5:
            problems.append(f"{kind}: out of time ({KIND_TIMEOUT_S} s) before case {start}")
            break
        try:
            proc = subprocess.run([sys.executable, "-c", _ENTRY, str(ROOT), "_worker_main", kind,
                                   str(workdir), str(start), str(prog)], cwd=str(ROOT), env=_env(),
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=left)
            rc, err = proc.returncode, proc.stderr.decode("utf-8", "replace")
        except subprocess.TimeoutExpired as exc:
            rc, err = "timeout", (exc.stderr or b"").decode("utf-8", "replace")
        last, done = None, False
        if prog.exists():
            for line in prog.read_text().splitlines():
                if line.startswith("R "):
                    rec = json.loads(line[2:])
                    results[rec["i"]] = rec
                    last = None
                elif line == "DONE":
                    done = True
                elif line[:2] in ("C ", "G ", "T ", "L "):
                    last, stage = int(line[2:]), line[0]
        if done and rc == 0:
            break
        if last is None:
            problems.append(f"{kind}: worker exited ({rc}) outside any case: {err[-1500:]}")
            break
        err = err.split("\nExtension modules:")[0][-2000:]
        hang = rc == "timeout" or "Timeout (" in err
        what = "hang" if hang else "crash"
        where = {"C": "case setup", "G": "case generation", "T": "treecomp",
                 "L": "the library's fork"}[stage]
        results[last] = {"case": f"{kind}:{last}", "i": last, "desc": None, "stderr": err,
                         "status": f"treecomp {what}",
                         "detail": f"the worker died during {where} ({what}, exit {rc})"}
        start = last + 1
        if start >= N_CASES[kind]:
            break
    else:
        problems.append(f"{kind}: more than {MAX_RESTARTS} worker restarts")
    dead = [r for r in results.values() if r.get("desc") is None]
    if dead:  # the worker died before describing these cases: generate them again here
        seeds = _KINDS[kind].load(workdir / "seeds")
        for r in dead:
            r["desc"] = _describe(kind, seeds, r["i"], workdir)
    return results, problems


#: Guesses that are benign: every mutation of the case touched something treecomp rightly never
#: reads for prediction, and the library refuses (or crashes on) the file for that reason alone.
#: (kind prefix, regex on "<seed>: <mutation>", regex on the library's message or None, why)
BENIGN_GUESSES: list[tuple[str, str, str | None, str]] = [
    ("xgb", r"\b(loss_changes|sum_hessian|base_weights|parents)\b", None,
     "per-node training statistics: XGBoost checks their type and length, never predicts with them"),
    ("xgb", r"tree_param\.(num_deleted|num_feature)\b", None,
     "per-tree bookkeeping XGBoost checks but does not predict with"),
    ("xgb", r"gbtree_model_param|num_trees|iteration_indptr", None,
     "the tree list's bookkeeping (iteration_indptr matters only with best_iteration, absent here)"),
    ("xgb", r"\bcats\b|feature_types|feature_names|^\w+: (learner\.)?version", None,
     "metadata that does not change the margins"),
    ("xgb", r"attributes\.scikit_learn", None,
     "selects the sklearn wrapper's rules, which have the same margins without best_iteration"),
    ("xgb", r"^(reg|bin|multi|pois): .*categor", None,
     "category lists of models without categorical splits are never read"),
    ("xgb", r"objective\.name", r"from Null to Object",
     "the new objective's parameter object is missing: it does not change the margins"),
    ("lgb", r"\((trailer)\)", None,
     "feature_importances / parameters after the trees: not part of the model's predictions"),
    ("lgb", r"\b(split_gain|internal_value|internal_weight|internal_count|leaf_weight|leaf_count)\b",
     None, "per-node training statistics LightGBM checks but never predicts with"),
]
#: a whole case is benign when the library's message names a field treecomp never reads
BENIGN_LIB_MESSAGES: list[tuple[str, str, str]] = [
    ("xgb", r"(loss_changes|sum_hessian|base_weights|parents)\.size\(\) == n_nodes",
     "XGBoost checks the length of a per-node statistic it never predicts with"),
]
_NEUTRAL_PARTS = ("tree_sizes recomputed", "tree_sizes removed")


def _mutation_parts(desc: str) -> tuple[str, list[str]]:
    seed, _, rest = desc.partition(": ")
    seed = seed.replace("seed ", "")
    for prefix in ("re-encoded after ", "bytes: ", "text: "):
        if rest.startswith(prefix):
            rest = rest[len(prefix):]
    parts = [p for p in rest.split("; ") if p not in _NEUTRAL_PARTS]
    return seed, parts


def benign_reason(kind: str, desc: str, lib_msg: str) -> str | None:
    """Why a guess is benign (see BENIGN_GUESSES), or None."""
    import re
    if not desc or desc.endswith("unmutated"):
        return None
    for pre, lib_pat, why in BENIGN_LIB_MESSAGES:
        if kind.startswith(pre) and re.search(lib_pat, lib_msg or ""):
            return why
    seed, parts = _mutation_parts(desc)
    if "tree_sizes left stale" in parts and all("(trailer)" in p for p in parts
                                                if p != "tree_sizes left stale"):
        parts.remove("tree_sizes left stale")  # the trees did not move
    reasons = []
    for p in parts:
        for pre, pat, lib_pat, why in BENIGN_GUESSES:
            if kind.startswith(pre) and re.search(pat, f"{seed}: {p}") and (
                    lib_pat is None or re.search(lib_pat, lib_msg or "")):
                reasons.append(why)
                break
        else:
            return None
    return "; ".join(dict.fromkeys(reasons)) if reasons else None


def classify(results: dict[int, dict]) -> dict[str, list[str]]:
    """Findings by category: bad_error, crash, mismatch, guess (and harness problems)."""
    out: dict[str, list[str]] = {"harness": [], "bad_error": [], "crash": [], "mismatch": [],
                                 "guess": [], "benign": [], "seed": []}
    for i in sorted(results):
        r = results[i]
        cid, desc = r["case"], r.get("desc")
        st = r["status"]
        if (desc or "").endswith("unmutated") and (st != "ok" or r.get("match") is not True):
            out["seed"].append(f"{cid} ({desc}): {r}")
        if st == "harness":
            out["harness"].append(f"{cid}: {r['detail']}")
        elif st == "bad_error":
            out["bad_error"].append(f"{cid} [{desc}] at {r['stage']}: {r['detail']}")
        elif st.startswith("treecomp"):
            out["crash"].append(f"{cid} [{desc}]: {st}, {r['detail']}; stderr: {r['stderr'][-600:]}")
        elif st == "ok" and r.get("match") is False:
            out["mismatch"].append(f"{cid} [{desc}]: {r['mismatch']}")
        elif st == "ok" and r.get("lib", "ok") != "ok":
            why = r.get("lib_detail") or r["lib"]
            line = f"{cid} [{desc}]: treecomp accepts, the library {r['lib']}: {why}"
            benign = benign_reason(cid.split(":")[0], desc, why)
            out["benign" if benign else "guess"].append(line if not benign else f"{line} "
                                                        f"(benign: {benign})")
    return out


def summary(results: dict[int, dict]) -> str:
    from collections import Counter
    c = Counter()
    for r in results.values():
        c[r["status"]] += 1
        if r["status"] == "ok":
            c["compared" if "match" in r else ("lib " + r.get("lib", "not run"))] += 1
    return ", ".join(f"{k}={v}" for k, v in sorted(c.items()))


# =============================================================================================
# The tests
# =============================================================================================
_LIBS = {"xgb_json": "xgboost", "xgb_ubj": "xgboost", "lgb_txt": "lightgbm", "sklearn": "sklearn"}


@pytest.fixture(scope="module")
def _warm_kernel():
    """The native kernel built once for the module (shared through TREECOMP_CACHE_DIR), in a
    subprocess with a generous timeout of its own: not part of any kind's budget."""
    code = ("import sys; sys.path.insert(0, sys.argv[1]); "
            "from tests.test_fuzz_frontends import warm_up; warm_up()")
    p = subprocess.run([sys.executable, "-c", code, str(ROOT)], capture_output=True, timeout=600,
                       cwd=str(ROOT))
    assert p.returncode == 0, f"warming the arrays kernel failed: {p.stderr.decode()[-2000:]}"


@pytest.mark.parametrize("kind", KINDS)
def test_fuzz_frontend(kind, tmp_path, _warm_kernel):
    pytest.importorskip(_LIBS[kind])
    t0 = time.monotonic()
    results, problems = run_kind(kind, tmp_path / kind)
    found = classify(results)
    elapsed = time.monotonic() - t0
    print(f"{kind}: {len(results)} cases in {elapsed:.1f} s: {summary(results)}")
    assert not problems, "\n".join(problems)
    assert not found["harness"], "harness errors:\n" + "\n".join(found["harness"])
    assert not found["seed"], "unmutated seeds do not parse / match:\n" + "\n".join(found["seed"])
    assert len(results) == N_CASES[kind], f"only {len(results)} of {N_CASES[kind]} cases ran"
    failures = {}
    for cat in ("bad_error", "crash", "mismatch", "guess"):
        for line in found[cat]:
            failures[line.split(" ", 1)[0]] = f"{cat}: {line}"
    known = {c: why for c, why in KNOWN_FAILURES.items() if c.startswith(kind + ":")}
    new = {c: v for c, v in failures.items() if c not in known}
    stale = [c for c in known if c not in failures]
    msgs = []
    if new:
        msgs.append(f"{len(new)} fuzz findings (reproduce one with `python -m "
                    f"tests.test_fuzz_frontends KIND INDEX`):\n" + "\n".join(new.values()))
    if stale:
        msgs.append("KNOWN_FAILURES entries that no longer fail (remove them): " + ", ".join(stale))
    assert not msgs, "\n\n".join(msgs)
    if known:
        pytest.xfail(f"{len(known)} known failures: " + "; ".join(
            f"{key} ({sum(v == key for v in known.values())})" for key in dict.fromkeys(known.values())))


def _describe(kind: str, seeds, i: int, workdir: Path) -> str:
    """A case's description, generated again (for a child that died before reporting it)."""
    k = _KINDS[kind]
    try:
        path = workdir / f"describe.{k.ext}"
        desc = k.make_case(seeds, i, _case_rng(kind, i), path)[0]
        path.unlink(missing_ok=True)
        return desc
    except Exception as exc:  # noqa: BLE001
        return f"(could not describe the case: {exc!r})"


def main(argv: list[str]) -> int:
    """python -m tests.test_fuzz_frontends KIND INDEX [OUTDIR]: reproduce one case verbosely."""
    if len(argv) < 2 or argv[0] not in KINDS:
        print(__doc__)
        print(f"usage: python -m tests.test_fuzz_frontends {{{','.join(KINDS)}}} INDEX [OUTDIR]")
        return 2
    kind, i = argv[0], int(argv[1])
    out = Path(argv[2] if len(argv) > 2 else "/tmp/treecomp-fuzz") / kind
    out.mkdir(parents=True, exist_ok=True)
    seeds = _KINDS[kind].load(_seed_dir(out, kind))
    rec = _run_case(kind, seeds, i, out, lambda s: None, keep=True, verbose=True)
    print(json.dumps(rec, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
