"""The scikit-learn frontend: fitted tree estimators -> :class:`treecomp.ir.Forest`.

Covers DecisionTree*/ExtraTree* (single trees), RandomForest*/ExtraTrees*, GradientBoosting*
and HistGradientBoosting* (regressors and classifiers), IsolationForest and AdaBoost (classifier
and regressor, over decision trees). Every rule below was read in the sklearn 1.9.1 sources and is pinned by
differential tests (tests/test_frontend_sklearn.py, tests/test_frontend_sklearn_more.py). Every
tree records sklearn's node ids (Tree.node_ids: what `apply` returns).

IsolationForest (ensemble/_iforest.py): rows are float32 with NaN and +/-inf accepted
(``ensure_all_finite=False``); each tree reads ``X[:, estimators_features_[i]]`` when
``_max_features`` differs from n_features (the IR maps the subset back to the columns); the
margin is ``depths``: per tree ``_decision_path_lengths[leaf] + _average_path_length_per_tree
[leaf] - 1.0`` (the values sklearn stores at fit), summed from 0 in estimator order (sklearn's
default sequential joblib; a threading backend adds trees in completion order). score_samples,
decision_function and predict follow with numpy (outputs.py, transform "iforest").
AdaBoostClassifier (ensemble/_weight_boosting.py, SAMME): see parse_adaboost; its own input
check refuses NaN and +/-inf, the trees' float32 cast refuses 1e39. AdaBoostRegressor: a weighted
median of its trees' predictions, see _parse_adaboost_regressor.

Trees, forests, GradientBoosting (tree/_tree.pyx, ensemble/_forest.py, ensemble/_gb.py):
- Rows are converted to float32, then ``float64(x32) <= threshold64`` goes left; NaN follows
  ``tree_.missing_go_to_left`` (set at every node, also where training saw no NaN). A threshold
  can be +inf: sklearn's split "every non-missing value left, NaN right". Trees and forests accept NaN where the estimator's tags say so
  (DecisionTree*: always; ExtraTree*: only with splitter="random"); GradientBoosting's
  ``validate_data`` rejects NaN (allow_nan=False). +/-inf, and a float64 beyond float32's range,
  is rejected by every one of them (``ensure_all_finite`` on the float32 rows): so does
  treecomp (``reject_inf``: a ValueError). HistGradientBoosting takes +/-inf in numeric features
  and refuses it in categorical ones (its OrdinalEncoder).
- Classifier leaves: sklearn >= 1.4 stores class *fractions* in ``tree_.value`` and
  predict_proba returns them as stored (1.9.1 no longer normalises at predict time), so the
  leaf vector is ``value[leaf, k, :n_classes_k]`` for every target k, concatenated.
- Forests sum the per-tree outputs in float64 in estimator order, starting from 0, then divide
  by the number of trees (``average=True``). With ``n_jobs > 1`` sklearn adds the trees in
  thread-completion order, so its own result is not reproducible bit for bit; treecomp
  reproduces the sequential (n_jobs=None) order.
- GradientBoosting (``_gradient_boosting.pyx``): ``out[i, k] += scale * value`` per stage and
  class, with ``scale = learning_rate`` (double). The product is folded into the leaf: it is the
  same IEEE product, and the additions happen in the same order. The initial margin is the
  init estimator's constant prediction pushed through sklearn's own ``_init_raw_predictions``
  (clip + link), so it is the very code sklearn runs; only constant Dummy estimators (and
  'zero') are accepted as init.

HistGradientBoosting (``_hist_gradient_boosting/_predictor.pyx``, ``gradient_boosting.py``):
- Rows are float64; ``x <= num_threshold`` goes left, NaN follows ``missing_go_to_left``;
  infinities are accepted and compare normally.
- Raw = zeros + ``_baseline_prediction`` + sum over iterations of the leaf values (the learning
  rate is already in them); tree (iteration i, class k) adds to margin column k.
- Categorical splits. sklearn 1.9.1 *always* fits a ColumnTransformer ``_preprocessor`` when a
  feature is categorical: an OrdinalEncoder maps raw category values to codes 0..n-1 (exact
  equality; unknown values and NaN -> NaN) and moves categorical columns first. The predictor
  then sends NaN / negative codes the missing way, codes in the node's left bitset left, other
  codes known to the bin mapper right, and codes unknown to the bin mapper the missing way.
  treecomp folds all of that into one 256-bit set over *raw* values (IR ``cat_bits``): raw value
  v in [0, 256) goes left iff it is a category whose code goes left, or it is no (known)
  category and the missing way is left; ``cat_other_left`` = ``missing_go_to_left`` covers
  negative values and values >= 256 (which the encoder maps to "unknown" too), and the column
  permutation is undone in the feature indices. Raw categories must therefore be integers in
  [0, 255]; anything else (strings from pandas categoricals, negative or large values) raises
  UnsupportedModelError. A *non-integral* value in a categorical column (e.g. 2.5) is an unknown
  category for sklearn (missing way): the forest's ``category_rule="integral"`` says so.
  Without a preprocessor (models pickled by sklearn < 1.4) raw values are the codes; sklearn casts
  them to uint8 (undefined behaviour for values >= 256); treecomp treats them as unknown.
- Outputs: binary log_loss -> sigmoid, label ``raw > 0``; multiclass -> softmax over the raw
  margins, which sklearn keeps in a Fortran-ordered array so numpy sums the exponentials class by
  class, left to right (the IR's "softmax_seq"; C-ordered "softmax" is pairwise from 8 classes on,
  so without "softmax_seq" >= 8 classes are refused); poisson/gamma -> exp; other regressors
  identity.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import numpy as np

from .. import ir, outputs
from ..errors import InvalidModelError, NotFittedError, UnsupportedModelError
from ..ir import Forest, Tree

_TREE_LEAF = -1


# -- shared helpers ----------------------------------------------------------------------------
def _sklearn_version() -> str:
    import sklearn

    return sklearn.__version__


def _provenance(model: Any) -> str:
    return f"sklearn {_sklearn_version()} {type(model).__name__}"


def _name(model: Any) -> str:
    return type(model).__name__


def _check_fitted(model: Any, attr: str) -> None:
    if not hasattr(model, attr):
        raise NotFittedError(f"this {_name(model)} is not fitted yet (no {attr!r}); "
                             "call fit() before parsing it")


def _feature_names(model: Any) -> tuple[str, ...] | None:
    names = getattr(model, "feature_names_in_", None)
    return None if names is None else tuple(str(s) for s in names)


def _allows_nan(est: Any) -> bool:
    """Whether sklearn's predict validation lets NaN through (from the estimator's tags)."""
    try:
        return bool(est.__sklearn_tags__().input_tags.allow_nan)
    except AttributeError:  # pragma: no cover - sklearn < 1.6 tag API
        return bool(est._get_tags().get("allow_nan", False))


def _preorder(left: np.ndarray, right: np.ndarray) -> np.ndarray:
    """Node ids in preorder from the root (explicit stack: trees can be 1000s deep)."""
    n = len(left)
    seen = np.zeros(n, bool)
    order = []
    stack = [0]
    lt, rt = left.tolist(), right.tolist()
    while stack:
        nd = stack.pop()
        if nd < 0 or nd >= n or seen[nd]:
            raise InvalidModelError(f"tree structure is not a tree (node {nd} reached twice or out of range)")
        seen[nd] = True
        order.append(nd)
        if lt[nd] != _TREE_LEAF:
            stack.append(rt[nd])
            stack.append(lt[nd])
    return np.asarray(order, np.int64)


def _make_tree(left, right, feature, threshold, default_left, value,
               cat_index=None, cat_bits=None, cat_other_left=None, cover=None) -> Tree:
    """Build an IR tree, renumbering nodes when some child id is not larger than its parent."""
    left = np.asarray(left, np.int64)
    right = np.asarray(right, np.int64)
    leaf = left == _TREE_LEAF
    n = len(left)
    if cat_index is None:
        cat_index = np.full(n, -1, np.int64)
    idx = np.arange(n)
    node_ids = idx  # the library's node ids (its `apply`), kept through a renumbering
    if n and not (np.all(left[~leaf] > idx[~leaf]) and np.all(right[~leaf] > idx[~leaf])):
        order = node_ids = _preorder(left, right)
        new = np.full(n, -1, np.int64)
        new[order] = np.arange(len(order))
        lo, ro = left[order], right[order]
        left = np.where(lo >= 0, new[np.maximum(lo, 0)], -1)
        right = np.where(ro >= 0, new[np.maximum(ro, 0)], -1)
        feature, threshold, default_left = feature[order], threshold[order], default_left[order]
        value, cat_index = value[order], cat_index[order]
        cover = None if cover is None else np.asarray(cover)[order]
        leaf = left == _TREE_LEAF
    feature = np.where(leaf, -1, feature)
    threshold = np.where(leaf, 0.0, threshold)
    value = np.where(leaf[:, None], value, 0.0)
    return Tree(left=left, right=right, feature=feature, threshold=threshold,
                default_left=default_left, value=value, cat_index=cat_index,
                cat_bits=cat_bits, cat_other_left=cat_other_left, node_ids=node_ids,
                cover=cover)


def _sk_tree_arrays(est: Any):
    t = est.tree_
    left = np.asarray(t.children_left, np.int64)
    right = np.asarray(t.children_right, np.int64)
    feature = np.asarray(t.feature, np.int64)
    threshold = np.asarray(t.threshold, np.float64)
    mgl = getattr(t, "missing_go_to_left", None)  # sklearn >= 1.3
    default_left = np.zeros(len(left), bool) if mgl is None else np.asarray(mgl).astype(bool)
    return left, right, feature, threshold, default_left, np.asarray(t.value, np.float64)


def _tree_from_estimator(est: Any, n_classes: tuple[int, ...] | None) -> Tree:
    """IR tree of a fitted DecisionTree*/ExtraTree* (regression: n_classes=None)."""
    _check_fitted(est, "tree_")
    left, right, feature, threshold, default_left, value = _sk_tree_arrays(est)
    if n_classes is None:
        leafval = value[:, :, 0]
    else:
        if value.shape[1] != len(n_classes) or value.shape[2] != max(n_classes):
            raise InvalidModelError(f"tree_.value has shape {value.shape}, inconsistent with "
                                    f"n_classes_={list(n_classes)}")
        # predict_proba returns value[:, k, :n_classes_k] as stored (fractions since sklearn 1.4)
        leafval = np.concatenate([value[:, k, :c] for k, c in enumerate(n_classes)], axis=1)
    return _make_tree(left, right, feature, threshold, default_left, leafval,
                      cover=_cover(est))


def _cover(est: Any) -> np.ndarray | None:
    """weighted_n_node_samples (the shap package's cover for scikit-learn trees), if usable."""
    c = np.asarray(getattr(est.tree_, "weighted_n_node_samples", np.zeros(0)), np.float64)
    return c if len(c) == est.tree_.node_count and np.all(np.isfinite(c) & (c >= 0)) else None


def _classes(model: Any) -> tuple[tuple[np.ndarray, ...], tuple[int, ...]]:
    """(classes per output, their counts), checked against n_classes_: sklearn 1.9.1's
    predict_proba sizes its output by n_classes_ (forests: np.zeros((n, j)) for j in
    n_classes_) and predict maps argmax through classes_, so the two must agree."""
    n_outputs = int(getattr(model, "n_outputs_", 1))
    if n_outputs < 1:
        raise InvalidModelError(f"{_name(model)}.n_outputs_={n_outputs}")
    if n_outputs == 1:
        cls = (np.asarray(model.classes_),)
    else:
        cls = tuple(np.asarray(c) for c in model.classes_)
        if len(cls) != n_outputs:
            raise InvalidModelError(f"{_name(model)}: classes_ has {len(cls)} entries for "
                                    f"n_outputs_={n_outputs}")
    counts = tuple(len(c) for c in cls)
    n_classes = getattr(model, "n_classes_", None)
    if n_classes is not None and np.atleast_1d(n_classes).tolist() != list(counts):
        raise InvalidModelError(f"{_name(model)}: n_classes_={np.atleast_1d(n_classes).tolist()} "
                                f"disagrees with the lengths of classes_ {list(counts)}")
    return cls, counts


def _check_boosting_classes(model: Any, classes: np.ndarray, K: int) -> None:
    """(Hist)GradientBoosting classifiers map margins to classes_ (binary: one margin, two
    classes; else one margin per class): a classes_ of another length is a corrupt model."""
    want = 2 if K == 1 else K
    if classes.ndim != 1 or len(classes) != want:
        raise InvalidModelError(f"{_name(model)}: classes_ has {classes.size} entries for "
                                f"{K} tree(s) per iteration (expected {want})")


def _check_estimator(est: Any, clf: bool, ncls: tuple[int, ...] | None, n_outputs: int,
                     n_features: int, where: str) -> None:
    """A tree's own attributes as sklearn 1.9.1's predict uses them: n_features_in_ (checked
    against X even inside a forest: "X has 4 features, but ... is expecting 6"), n_outputs_
    (decides how tree_.predict's output is indexed: IndexError when it disagrees with the
    tree_), n_classes_ (predict_proba's width: forests fail to add trees of other widths)."""
    _check_fitted(est, "tree_")
    n_out_tree = int(est.tree_.n_outputs)
    if int(getattr(est, "n_outputs_", n_out_tree)) != n_out_tree or n_out_tree != n_outputs:
        raise InvalidModelError(f"{where}: n_outputs_={getattr(est, 'n_outputs_', None)} but its "
                                f"tree_ has {n_out_tree} output(s) (expected {n_outputs})")
    nf = getattr(est, "n_features_in_", n_features)
    if int(nf) != n_features:
        raise InvalidModelError(f"{where}: n_features_in_={nf}, expected {n_features}")
    if clf:
        nc = getattr(est, "n_classes_", None)
        if nc is None or np.atleast_1d(nc).tolist() != list(ncls):
            raise InvalidModelError(f"{where}: n_classes_={nc}, expected {list(ncls)}")


def _is_classifier(model: Any) -> bool:
    from sklearn.base import is_classifier

    return bool(is_classifier(model))


# -- single trees and forests --------------------------------------------------------------------
def parse_tree(model: Any) -> Forest:
    """DecisionTree{Regressor,Classifier}, ExtraTree{Regressor,Classifier}."""
    _check_fitted(model, "tree_")
    clf = _is_classifier(model)
    classes, ncls = _classes(model) if clf else ((), None)
    _check_estimator(model, clf, ncls, int(getattr(model, "n_outputs_", 1)),
                     int(model.n_features_in_), _name(model))
    tree = _tree_from_estimator(model, ncls)
    return Forest(trees=(tree,), n_features=model.n_features_in_, n_outputs=tree.width,
                  tree_output=[0], base_score=np.zeros(tree.width), input_dtype="float32",
                  comparison="<=", average=False, transform="identity",
                  decision="argmax_raw" if clf else "none", classes=classes,
                  feature_names=_feature_names(model), allow_nan=_allows_nan(model),
                  reject_inf=range(model.n_features_in_), leaf_layout="tree",
                  provenance=_provenance(model))


def parse_forest(model: Any) -> Forest:
    """RandomForest{Regressor,Classifier}, ExtraTrees{Regressor,Classifier}."""
    _check_fitted(model, "estimators_")
    ests = list(model.estimators_)
    if not ests:
        raise NotFittedError(f"this {_name(model)} has no fitted trees")
    clf = _is_classifier(model)
    classes, ncls = _classes(model) if clf else ((), None)
    n_outputs, n_features = int(getattr(model, "n_outputs_", 1)), int(model.n_features_in_)
    for i, e in enumerate(ests):
        _check_estimator(e, clf, ncls, n_outputs, n_features, f"{_name(model)}.estimators_[{i}]")
    trees = tuple(_tree_from_estimator(e, ncls) for e in ests)
    width = trees[0].width
    if any(t.width != width for t in trees):
        raise InvalidModelError(f"{_name(model)}: trees disagree on their output width")
    return Forest(trees=trees, n_features=model.n_features_in_, n_outputs=width,
                  tree_output=np.zeros(len(trees), np.int32), base_score=np.zeros(width),
                  input_dtype="float32", comparison="<=", average=True, transform="identity",
                  decision="argmax_raw" if clf else "none", classes=classes,
                  feature_names=_feature_names(model), allow_nan=_allows_nan(ests[0]),
                  reject_inf=range(model.n_features_in_),
                  provenance=_provenance(model))


# -- GradientBoosting ----------------------------------------------------------------------------
_GB_REGRESSION_LOSSES = ("squared_error", "absolute_error", "huber", "quantile")
_CONSTANT_DUMMY_CLF = ("prior", "most_frequent", "uniform", "constant")


def _hgb_categorical_features(model: Any) -> list[int]:
    """HGB's categorical features: its OrdinalEncoder refuses +/-inf there (numeric ones take
    it as a value)."""
    cats = getattr(model, "is_categorical_", None)
    return [] if cats is None else [int(i) for i in np.flatnonzero(np.asarray(cats, bool))]


def _exp_lib(transform: str) -> str:
    """sklearn's sigmoids are scipy.special.expit (libm's exp); its softmax (utils.extmath) and
    log link (LogLink.inverse) call np.exp, numpy's own AVX-512 code on AVX-512 hosts."""
    return "libm" if transform in ("identity", "sigmoid", "sigmoid2") else "numpy"


#: sklearn's link classes (loss.link) whose argument Forest.base_link carries (ir.BASE_LINKS)
_GB_BASE_LINKS = {"LogitLink": "logit", "HalfLogitLink": "half_logit",
                  "MultinomialLogit": "multinomial_logit"}


def _gb_base_score(model: Any, K: int) -> tuple[np.ndarray, str]:
    """(base_score, base_link) of a GradientBoosting model. A classifier's initial margins are
    its init estimator's clipped probabilities through the loss's link, which sklearn evaluates
    at predict time with numpy's log / exp (host-dependent: outputs.base_margins): the IR keeps
    the probabilities and the link, and the margins are evaluated where the model predicts."""
    init = model.init_
    if isinstance(init, str):
        if init == "zero":
            return np.zeros(K), "identity"
        raise UnsupportedModelError(f"{_name(model)} with init={init!r}: only 'zero' or a "
                                    "(default) Dummy estimator is supported")
    from sklearn.dummy import DummyClassifier, DummyRegressor

    ok = (type(init) is DummyRegressor
          or (type(init) is DummyClassifier and init.strategy in _CONSTANT_DUMMY_CLF))
    if not ok:
        raise UnsupportedModelError(
            f"{_name(model)} with init estimator {type(init).__module__}.{type(init).__qualname__}"
            + (f"(strategy={init.strategy!r})" if hasattr(init, "strategy") else "")
            + ": treecomp supports init='zero', the default init, and DummyRegressor / "
            f"DummyClassifier with a constant strategy {_CONSTANT_DUMMY_CLF}")
    try:
        from sklearn.base import is_classifier
        from sklearn.ensemble._gb import _init_raw_predictions
    except ImportError as exc:  # pragma: no cover - another sklearn layout
        raise UnsupportedModelError(f"this scikit-learn ({_sklearn_version()}) has no "
                                    f"_init_raw_predictions ({exc}); treecomp was checked "
                                    "against 1.9.1") from None
    # A constant estimator: one row gives the value of every row, computed by sklearn's own code
    # (clip to [eps, 1-eps], link: logit / half-logit / symmetric multinomial logit / identity).
    X0 = np.zeros((1, model.n_features_in_), np.float32)
    raw = np.asarray(_init_raw_predictions(X0, init, model._loss, is_classifier(model)), np.float64)
    if raw.shape != (1, K):
        raise InvalidModelError(f"{_name(model)}: init estimator gives shape {raw.shape}, expected (1, {K})")
    if not is_classifier(model):  # DummyRegressor's constant, identity link: no log involved
        return raw[0].copy(), "identity"
    link = _GB_BASE_LINKS.get(type(model._loss.link).__name__)
    if link is None:
        raise UnsupportedModelError(f"{_name(model)} with link {type(model._loss.link).__name__}: "
                                    f"supported are {sorted(_GB_BASE_LINKS)}")
    # _init_raw_predictions' probabilities, before its link (sklearn 1.9.1, ensemble/_gb.py)
    proba = np.asarray(init.predict_proba(X0))
    if K == 1:
        proba = proba[:, 1]
    eps = np.finfo(np.float64).eps
    proba = np.clip(proba, eps, 1 - eps, dtype=np.float64).reshape(-1)
    f = SimpleNamespace(base_link=link, base_score=proba)
    if proba.shape != (K,) or not np.array_equal(outputs.base_margins(f), raw[0]):
        # the recipe must give sklearn's own margins here, or it is not sklearn's
        raise UnsupportedModelError(f"{_name(model)}: its initial margins {raw[0].tolist()} are "
                                    f"not {link}({proba.tolist()}) as in scikit-learn 1.9.1")
    return proba, link


def parse_gradient_boosting(model: Any) -> Forest:
    """GradientBoosting{Regressor,Classifier}."""
    _check_fitted(model, "estimators_")
    clf = _is_classifier(model)
    loss = model.loss
    loss_cls = type(getattr(model, "_loss", None)).__name__
    if clf:
        classes = (np.asarray(model.classes_),)
        K = int(model.n_trees_per_iteration_)
        _check_boosting_classes(model, classes[0], K)
        if loss == "log_loss" and K == 1 and loss_cls == "HalfBinomialLoss":
            transform, decision = "sigmoid", "raw_ge_0"
        elif loss == "log_loss" and K > 1 and loss_cls == "HalfMultinomialLoss":
            transform, decision = "softmax", "argmax_raw"  # C-ordered raw: numpy's pairwise sum
        elif loss == "exponential" and K == 1 and loss_cls == "ExponentialLoss":
            transform, decision = "sigmoid2", "raw_ge_0"  # expit(2 * raw)
        else:
            raise UnsupportedModelError(f"{_name(model)} with loss={loss!r} ({loss_cls}, "
                                        f"{K} trees per iteration): supported are log_loss "
                                        "(binary, multiclass) and exponential (binary)")
    else:
        classes, K = (), 1
        if loss not in _GB_REGRESSION_LOSSES:
            raise UnsupportedModelError(f"{_name(model)} with loss={loss!r}; supported: "
                                        f"{_GB_REGRESSION_LOSSES}")
        transform, decision = "identity", "none"
    ests = np.asarray(model.estimators_, dtype=object)
    n_stages = int(getattr(model, "n_estimators_", ests.shape[0]))
    if ests.ndim != 2 or ests.shape[1] != K or n_stages < 1 or ests.shape[0] < n_stages:
        raise InvalidModelError(f"{_name(model)}.estimators_ has shape {ests.shape}; expected "
                                f"(>= n_estimators_={n_stages}, {K})")
    scale = float(model.learning_rate)
    base, base_link = _gb_base_score(model, K)
    trees, outs = [], []
    for i in range(n_stages):
        for k in range(K):
            left, right, feature, threshold, dleft, value = _sk_tree_arrays(ests[i, k])
            # predict refuses NaN (its kernel tests `X[i, f] <= threshold` only); apply takes
            # it and the trees route it by missing_go_to_left (the tree's own apply)
            trees.append(_make_tree(left, right, feature, threshold, dleft,
                                    scale * value[:, 0, :1], cover=_cover(ests[i, k])))
            outs.append(k)
    return Forest(trees=tuple(trees), n_features=model.n_features_in_, n_outputs=K,
                  tree_output=outs, base_score=base, base_link=base_link, input_dtype="float32",
                  comparison="<=", average=False, transform=transform, decision=decision,
                  classes=classes, feature_names=_feature_names(model), allow_nan=False,
                  reject_inf=range(model.n_features_in_),
                  # apply: float64 (n, stages, K) for classifiers, (n, stages) for regressors
                  leaf_layout="stages_classes" if clf else "stages",
                  exp_lib=_exp_lib(transform), provenance=_provenance(model))


# -- HistGradientBoosting ------------------------------------------------------------------------
_HGB_REGRESSION_LOSSES = {"squared_error": "identity", "absolute_error": "identity",
                          "quantile": "identity", "poisson": "exp", "gamma": "exp"}


def _hgb_column_map(model: Any) -> tuple[np.ndarray, dict[int, np.ndarray]]:
    """(transformed column -> original column, original column -> raw category values).

    Without a preprocessor columns are the original ones and category values are the codes
    (an empty dict means: identity).
    """
    n = int(model.n_features_in_)
    pre = getattr(model, "_preprocessor", None)
    if pre is None:
        return np.arange(n), {}
    from sklearn.compose import ColumnTransformer
    from sklearn.preprocessing import FunctionTransformer, OrdinalEncoder

    if not isinstance(pre, ColumnTransformer):
        raise UnsupportedModelError(f"{_name(model)}._preprocessor of type {type(pre).__name__}; "
                                    "only sklearn's own ColumnTransformer is supported")
    col_map = np.full(n, -1, np.int64)
    cats: dict[int, np.ndarray] = {}
    for name, trans, cols in pre.transformers_:
        sl = pre.output_indices_.get(name)
        cols = np.asarray(cols)
        idx = np.flatnonzero(cols) if cols.dtype == bool else cols.astype(np.int64)
        if trans == "drop" or len(idx) == 0:
            continue
        if sl is None or sl.stop - sl.start != len(idx) or cols.dtype.kind not in "bi":
            raise UnsupportedModelError(f"{_name(model)}._preprocessor transformer {name!r} has "
                                        "an unexpected layout")
        if name == "encoder" and isinstance(trans, OrdinalEncoder):
            unk = getattr(trans, "unknown_value", None)
            miss = getattr(trans, "encoded_missing_value", None)
            if not (trans.handle_unknown == "use_encoded_value" and unk is not None and np.isnan(unk)
                    and miss is not None and np.isnan(miss)):
                raise UnsupportedModelError(f"{_name(model)}._preprocessor: OrdinalEncoder that does "
                                            "not map unknown and missing values to NaN")
            for j, (orig, c) in enumerate(zip(idx, trans.categories_)):
                c = np.asarray(c)
                if c.dtype.kind == "f" and len(c) and np.isnan(c[-1]):
                    c = c[:-1]
                fname = (repr(str(model.feature_names_in_[orig])) if hasattr(model, "feature_names_in_")
                         else f"at index {orig}")
                if c.dtype.kind not in "iuf":
                    raise UnsupportedModelError(
                        f"{_name(model)}: categorical feature {fname} has non-numeric categories "
                        f"({c.dtype}, e.g. {c[:3].tolist()}); treecomp supports categorical "
                        "features whose values are integers in [0, 255]")
                cf = c.astype(np.float64)
                if len(cf) and (np.any(cf != np.floor(cf)) or cf.min() < 0 or cf.max() > 255):
                    raise UnsupportedModelError(
                        f"{_name(model)}: categorical feature {fname} has category values outside "
                        f"the integers 0..255 ({cf[:5].tolist()}...); not representable in the IR")
                cats[int(orig)] = cf.astype(np.int64)
        elif name == "numerical" and isinstance(trans, FunctionTransformer):
            pass  # check_array(dtype=float64): values pass through unchanged
        else:
            raise UnsupportedModelError(f"{_name(model)}._preprocessor transformer {name!r} "
                                        f"({type(trans).__name__}) is not supported")
        col_map[sl.start:sl.stop] = idx
    if np.any(col_map < 0) or len(set(col_map.tolist())) != n:
        raise UnsupportedModelError(f"{_name(model)}._preprocessor does not map every column once")
    return col_map, cats


def _bitset_bits(words: np.ndarray) -> np.ndarray:
    """8 x uint32 -> 256 bools (bit v % 32 of word v // 32, as sklearn's _bitset.pyx)."""
    v = np.arange(256)
    return ((np.asarray(words, np.uint64)[v >> 5] >> (v & 31).astype(np.uint64)) & 1).astype(bool)


def _pack_bits(bits: np.ndarray) -> np.ndarray:
    b = bits.reshape(8, 32).astype(np.uint64)
    return (b << np.arange(32, dtype=np.uint64)).sum(axis=1).astype(np.uint32)


def _hgb_tree(pred: Any, col_map: np.ndarray, cats: dict[int, np.ndarray],
              known: np.ndarray, f_idx_map: np.ndarray, feat_is_cat: np.ndarray) -> Tree:
    nodes = pred.nodes
    names = nodes.dtype.names
    thr_field = "num_threshold" if "num_threshold" in names else "threshold"
    is_leaf = nodes["is_leaf"].astype(bool)
    left = np.where(is_leaf, -1, nodes["left"].astype(np.int64))
    right = np.where(is_leaf, -1, nodes["right"].astype(np.int64))
    tfeat = nodes["feature_idx"].astype(np.int64)
    bad = ~is_leaf & ((tfeat < 0) | (tfeat >= len(col_map)))
    if bad.any():
        # numpy would read a negative index from the end; sklearn's predictor reads out of bounds
        raise InvalidModelError(f"HistGradientBoosting predictor node {int(np.argmax(bad))} has "
                                f"feature_idx={int(tfeat[bad][0])} outside [0, {len(col_map)})")
    feature = np.where(is_leaf, -1, col_map[np.where(is_leaf, 0, tfeat)])
    threshold = nodes[thr_field].astype(np.float64)
    mgl = nodes["missing_go_to_left"].astype(bool)
    value = nodes["value"].astype(np.float64)[:, None]
    is_cat = (nodes["is_categorical"].astype(bool) & ~is_leaf) if "is_categorical" in names \
        else np.zeros(len(nodes), bool)
    if "is_categorical" in names:
        # sklearn 1.9.1's predictor takes any non-zero is_categorical as a categorical split and
        # casts the raw value to uint8 for the bitsets (undefined for values >= 256): on a
        # numeric feature that is not reproducible, so every split must agree with the bin
        # mapper's is_categorical_ for its feature (what sklearn's grower always writes)
        flag = nodes["is_categorical"].astype(np.int64)
        want = feat_is_cat[np.where(is_leaf, 0, tfeat)]
        bad = ~is_leaf & ((flag < 0) | (flag > 1) | (flag.astype(bool) != want))
        if bad.any():
            nd = int(np.argmax(bad))
            raise InvalidModelError(
                f"HistGradientBoosting predictor node {nd} has is_categorical={int(flag[nd])} on a "
                f"{'categorical' if want[nd] else 'numeric'} feature (feature_idx={int(tfeat[nd])})")
    cat_index = np.full(len(nodes), -1, np.int64)
    cat_bits = np.zeros((0, 8), np.uint32)
    cat_other = np.zeros(0, bool)
    cat_nodes = np.flatnonzero(is_cat)
    if cat_nodes.size:
        raw_left = np.asarray(pred.raw_left_cat_bitsets)
        bits_rows = []
        for nd in cat_nodes:
            miss = bool(mgl[nd])
            f_t = int(tfeat[nd])
            in_left = _bitset_bits(raw_left[int(nodes["bitset_idx"][nd])])
            in_known = _bitset_bits(known[int(f_idx_map[f_t])])
            # sklearn: left bitset -> left; known to the bin mapper -> right; else missing way
            code_left = np.where(in_left, True, np.where(in_known, False, miss))
            raw_cats = cats.get(int(col_map[f_t]))
            if raw_cats is None:  # no preprocessor: raw value == code
                go_left = code_left
            else:  # raw value -> its code; values that are no category: unknown -> missing way
                go_left = np.full(256, miss)
                go_left[raw_cats] = code_left[:len(raw_cats)]
            bits_rows.append(_pack_bits(go_left))
            cat_other = np.append(cat_other, miss)
        cat_index[cat_nodes] = np.arange(cat_nodes.size)
        cat_bits = np.asarray(bits_rows, np.uint32)
        threshold = np.where(is_cat, 0.0, threshold)
    if np.any(np.isnan(threshold[~is_leaf & ~is_cat])):
        raise InvalidModelError("HistGradientBoosting node with a NaN threshold")
    return _make_tree(left, right, feature, threshold, mgl, value, cat_index=cat_index,
                      cat_bits=cat_bits, cat_other_left=cat_other)


def parse_hist_gradient_boosting(model: Any) -> Forest:
    """HistGradientBoosting{Regressor,Classifier}."""
    _check_fitted(model, "_predictors")
    if not hasattr(model, "_baseline_prediction"):
        raise NotFittedError(f"this {_name(model)} is not fitted yet; call fit() before parsing it")
    clf = _is_classifier(model)
    K = int(model.n_trees_per_iteration_)
    loss = model.loss
    loss_cls = type(getattr(model, "_loss", None)).__name__
    if clf:
        classes = (np.asarray(model.classes_),)
        _check_boosting_classes(model, classes[0], K)
        if loss == "log_loss" and K == 1 and loss_cls == "HalfBinomialLoss":
            transform, decision = "sigmoid", "raw_gt_0"
        elif loss == "log_loss" and K > 1 and loss_cls == "HalfMultinomialLoss":
            # sklearn's margins are Fortran-ordered: numpy sums the softmax class by class
            transform, decision = "softmax_seq", "argmax_raw"
        else:
            raise UnsupportedModelError(f"{_name(model)} with loss={loss!r} ({loss_cls}): "
                                        "supported is log_loss (binary, multiclass)")
    else:
        classes = ()
        if not isinstance(loss, str) or loss not in _HGB_REGRESSION_LOSSES:
            raise UnsupportedModelError(f"{_name(model)} with loss={loss!r}; supported: "
                                        f"{tuple(_HGB_REGRESSION_LOSSES)}")
        transform, decision = _HGB_REGRESSION_LOSSES[loss], "none"
        link = type(model._loss.link).__name__
        if link != {"identity": "IdentityLink", "exp": "LogLink"}[transform]:
            raise UnsupportedModelError(f"{_name(model)}: loss {loss!r} with link {link}")
    col_map, cats = _hgb_column_map(model)
    bm = model._bin_mapper
    feat_is_cat = getattr(bm, "is_categorical_", None)  # per binned (transformed) column
    feat_is_cat = (np.zeros(len(col_map), bool) if feat_is_cat is None
                   else np.asarray(feat_is_cat).astype(bool))
    if feat_is_cat.shape != (len(col_map),):
        raise InvalidModelError(f"{_name(model)}._bin_mapper.is_categorical_ has "
                                f"{feat_is_cat.size} entries for {len(col_map)} features")
    if np.any(getattr(bm, "is_categorical_", np.zeros(1, bool))):
        known, f_idx_map = bm.make_known_categories_bitsets()
    else:
        known, f_idx_map = np.zeros((0, 8), np.uint32), np.zeros(model.n_features_in_, np.uint32)
    baseline = np.asarray(model._baseline_prediction, np.float64).reshape(-1)
    if baseline.shape != (K,):
        raise InvalidModelError(f"{_name(model)}._baseline_prediction has {baseline.size} values, expected {K}")
    # sklearn starts from np.zeros and adds the baseline (turns a -0.0 baseline into +0.0)
    base = np.zeros(K) + baseline
    trees, outs = [], []
    for it in model._predictors:
        if len(it) != K:
            raise InvalidModelError(f"{_name(model)}: an iteration has {len(it)} predictors, expected {K}")
        for k, pred in enumerate(it):
            trees.append(_hgb_tree(pred, col_map, cats, known, f_idx_map, feat_is_cat))
            outs.append(k)
    if not trees:  # no iteration at all: margins are the baseline (adding 0.0 keeps them)
        trees, outs = [ir.leaf_tree(0.0)] * K, list(range(K))
    return Forest(trees=tuple(trees), n_features=model.n_features_in_, n_outputs=K,
                  tree_output=outs, base_score=base, input_dtype="float64", comparison="<=",
                  category_rule="integral",  # 2.5 is no category: an unknown one (missing way)
                  pandas_categories="values",  # the OrdinalEncoder maps values, folded above
                  average=False, transform=transform, decision=decision, classes=classes,
                  feature_names=_feature_names(model), allow_nan=True,
                  reject_inf=_hgb_categorical_features(model),
                  exp_lib=_exp_lib(transform), provenance=_provenance(model))


# -- IsolationForest ---------------------------------------------------------------------------
def parse_isolation_forest(model: Any) -> Forest:
    """IsolationForest (sklearn 1.9.1, ensemble/_iforest.py): score_samples, decision_function,
    predict. Raw margin = sklearn's `depths`; the rest is outputs.py's transform "iforest"."""
    _check_fitted(model, "estimators_")
    for attr in ("estimators_features_", "offset_", "_max_features", "_max_samples",
                 "_decision_path_lengths", "_average_path_length_per_tree"):
        if not hasattr(model, attr):
            raise UnsupportedModelError(
                f"{_name(model)} without {attr!r} (fitted by another scikit-learn release?): "
                f"treecomp reproduces scikit-learn 1.9.1's score_samples, which reads it")
    from sklearn.ensemble._iforest import _average_path_length
    from sklearn.tree import ExtraTreeRegressor

    ests, feats = list(model.estimators_), list(model.estimators_features_)
    dpls, apls = list(model._decision_path_lengths), list(model._average_path_length_per_tree)
    if not ests or not (len(feats) == len(dpls) == len(apls) == len(ests)):
        raise InvalidModelError(f"{_name(model)}: estimators_ ({len(ests)}), estimators_features_, "
                                "_decision_path_lengths and _average_path_length_per_tree disagree")
    n = int(model.n_features_in_)
    # sklearn indexes X[:, features] only when _max_features differs from the width of X
    subsample = int(model._max_features) != n
    trees = []
    for i, (e, fs, dpl, apl) in enumerate(zip(ests, feats, dpls, apls)):
        where = f"{_name(model)}.estimators_[{i}]"
        if type(e) is not ExtraTreeRegressor:
            raise UnsupportedModelError(f"{where} is a {type(e).__name__}; IsolationForest's own "
                                        "ExtraTreeRegressor is supported")
        fs = np.asarray(fs)
        width = len(fs) if subsample else n
        if fs.ndim != 1 or fs.dtype.kind not in "iu" or (fs.size and (fs.min() < 0 or fs.max() >= n)):
            raise InvalidModelError(f"{where}: estimators_features_ is not a list of feature indices < {n}")
        _check_estimator(e, False, None, 1, width, where)
        left, right, feature, threshold, default_left, _ = _sk_tree_arrays(e)
        dpl, apl = np.asarray(dpl), np.asarray(apl)
        if dpl.shape != left.shape or apl.shape != left.shape or dpl.dtype.kind not in "iu" \
                or apl.dtype != np.float64:
            raise InvalidModelError(f"{where}: _decision_path_lengths / _average_path_length_per_tree "
                                    f"do not match its {len(left)} nodes")
        # sklearn: depths += dpl[leaf] + apl[leaf] - 1.0, tree by tree (the same float64 ops)
        leafval = dpl + apl - 1.0
        if subsample:
            inner = left != _TREE_LEAF
            if np.any(feature[inner] >= len(fs)):
                raise InvalidModelError(f"{where} splits on a feature beyond its {len(fs)} features")
            feature = np.where(inner, fs[np.where(inner, feature, 0)], -1)
        trees.append(_make_tree(left, right, feature, threshold, default_left, leafval[:, None]))
    # sklearn divides by len(estimators_) * _average_path_length([_max_samples]), evaluated at
    # predict time with np.log: the IR keeps its two numbers (outputs.iforest_denominator)
    if not isinstance(model._max_samples, (int, np.integer)) or model._max_samples < 0:
        raise InvalidModelError(f"{_name(model)}._max_samples={model._max_samples!r}: not a count")
    params = (float(len(ests)), float(model._max_samples), float(model.offset_))
    f = SimpleNamespace(transform_params=params)
    if outputs.iforest_denominator(f) != float((len(ests) * _average_path_length([model._max_samples]))[0]):
        raise UnsupportedModelError(f"{_name(model)}: its score denominator is not scikit-learn "
                                    "1.9.1's n_estimators * c(max_samples)")
    return Forest(trees=tuple(trees), n_features=n, n_outputs=1,
                  tree_output=np.zeros(len(trees), np.int32), base_score=np.zeros(1),
                  input_dtype="float32", comparison="<=", average=False, transform="iforest",
                  decision="outlier", feature_names=_feature_names(model),
                  # validate_data(dtype=float32, ensure_all_finite=False): NaN and +/-inf pass
                  allow_nan=True, exp_lib="numpy",
                  transform_params=params,
                  provenance=_provenance(model))


# -- AdaBoost ------------------------------------------------------------------------------------
def parse_adaboost(model: Any) -> Forest:
    """AdaBoostClassifier (SAMME, sklearn 1.9.1 ensemble/_weight_boosting.py) over decision trees.

    sklearn's decision_function: pred = sum over (estimator, w) of np.where(predict == class,
    w, -1 / (K - 1) * w), from 0, in estimator order; pred /= estimator_weights_.sum(). A tree's
    prediction is constant per leaf, so the leaf holds that one-hot row (the very values sklearn
    adds) and outputs.py's transform "samme" does the rest. Binary: the leaf holds only the
    second column m; sklearn's first column is then exactly 0.0 - m (each tree adds -a to it when
    it adds a to m, so the sums are each other's negation; both start at 0 and are never -0.0).
    """
    if not _is_classifier(model):
        return _parse_adaboost_regressor(model)
    _check_fitted(model, "estimators_")
    if getattr(model, "algorithm", "SAMME") not in ("SAMME", "deprecated"):
        raise UnsupportedModelError(f"{_name(model)} with algorithm={model.algorithm!r}; "
                                    "supported is SAMME (scikit-learn >= 1.6)")
    from sklearn.tree import DecisionTreeClassifier, ExtraTreeClassifier

    classes = np.asarray(model.classes_)
    K = len(classes)
    if classes.ndim != 1 or int(model.n_classes_) != K:
        raise InvalidModelError(f"{_name(model)}: n_classes_={model.n_classes_} for classes_ of "
                                f"shape {classes.shape}")
    if K < 2:
        raise UnsupportedModelError(f"{_name(model)} fitted on a single class (its "
                                    "decision_function has the dtype of X)")
    ests = list(model.estimators_)
    weights = np.asarray(model.estimator_weights_)
    if not ests or weights.dtype != np.float64 or weights.ndim != 1 or len(weights) < len(ests) \
            or not np.all(np.isfinite(weights)):
        raise InvalidModelError(f"{_name(model)}: {len(ests)} estimators with weights "
                                f"{weights.dtype} {weights.shape} (finite float64, one each)")
    weight_sum = float(model.estimator_weights_.sum())  # sklearn's own sum, as its predict does
    if weight_sum == 0 or not np.isfinite(weight_sum):
        raise UnsupportedModelError(f"{_name(model)}: estimator weights sum to {weight_sum}")
    n = int(model.n_features_in_)
    trees = []
    for i, (e, w) in enumerate(zip(ests, weights)):
        where = f"{_name(model)}.estimators_[{i}]"
        if type(e) not in (DecisionTreeClassifier, ExtraTreeClassifier):
            raise UnsupportedModelError(
                f"{where} is a {type(e).__module__}.{type(e).__qualname__}; treecomp compiles "
                "AdaBoostClassifier over DecisionTreeClassifier / ExtraTreeClassifier only")
        _check_fitted(e, "tree_")
        own = np.asarray(e.classes_)
        _check_estimator(e, True, (len(own),), 1, n, where)
        left, right, feature, threshold, default_left, value = _sk_tree_arrays(e)
        if value.shape[1:] != (1, len(own)):
            raise InvalidModelError(f"{where}: tree_.value has shape {value.shape} for "
                                    f"{len(own)} classes")
        # the tree's predict: classes_.take(argmax(tree_.value[leaf])); sklearn compares it
        # with AdaBoost's classes_ (==) and puts w where equal, -1 / (K - 1) * w elsewhere
        label = own.take(np.argmax(value[:, 0, :], axis=1), axis=0)
        hit = np.asarray(label[:, None] == classes[None, :])
        if hit.shape != (len(label), K):
            raise UnsupportedModelError(f"{where}: its labels cannot be compared with classes_")
        rows = np.where(hit, w, -1 / (K - 1) * w)
        leaf = left == _TREE_LEAF
        if K == 2:
            if np.any(hit[leaf].sum(axis=1) != 1):
                raise UnsupportedModelError(f"{where} predicts a label that is not in classes_")
            rows = rows[:, 1:]
        trees.append(_make_tree(left, right, feature, threshold, default_left, rows))
    return Forest(trees=tuple(trees), n_features=n, n_outputs=1 if K == 2 else K,
                  tree_output=np.zeros(len(trees), np.int32),
                  base_score=np.zeros(1 if K == 2 else K), input_dtype="float32",
                  comparison="<=", average=False, transform="samme", decision="samme",
                  classes=(classes,), feature_names=_feature_names(model),
                  # _check_X refuses NaN and +/-inf; the trees' float32 cast refuses 1e39 too
                  allow_nan=False, reject_inf=range(n), exp_lib="numpy",
                  transform_params=(weight_sum,), provenance=_provenance(model))


def _parse_adaboost_regressor(model: Any) -> Forest:
    """AdaBoostRegressor (sklearn 1.9.1 ensemble/_weight_boosting.py) over regression trees.

    predict is _get_median_predict: the estimators' predictions, per row the weighted median
    (outputs.weighted_median). Not a sum, so each tree writes an output of its own (tree t,
    output t: n_outputs = the number of estimators) from a base of -0.0, which adds nothing
    (x + -0.0 is x, signed zeros included: the raw outputs are the trees' predictions bit for
    bit), and transform "weighted_median" takes estimator_weights_ (the first len(estimators_):
    an early stop leaves the rest 0 and unused)."""
    _check_fitted(model, "estimators_")
    from sklearn.tree import DecisionTreeRegressor, ExtraTreeRegressor

    ests = list(model.estimators_)
    weights = np.asarray(model.estimator_weights_)
    if not ests or weights.dtype != np.float64 or weights.ndim != 1 or len(weights) < len(ests) \
            or not np.all(np.isfinite(weights)) or np.any(weights < 0):
        raise InvalidModelError(f"{_name(model)}: {len(ests)} estimators with weights "
                                f"{weights.dtype} {weights.shape} (finite float64 >= 0, one each)")
    n = int(model.n_features_in_)
    trees = []
    for i, e in enumerate(ests):
        where = f"{_name(model)}.estimators_[{i}]"
        if type(e) not in (DecisionTreeRegressor, ExtraTreeRegressor):
            raise UnsupportedModelError(
                f"{where} is a {type(e).__module__}.{type(e).__qualname__}; treecomp compiles "
                "AdaBoostRegressor over DecisionTreeRegressor / ExtraTreeRegressor only")
        _check_estimator(e, False, None, 1, n, where)
        trees.append(_tree_from_estimator(e, None))
    E = len(trees)
    return Forest(trees=tuple(trees), n_features=n, n_outputs=E,
                  tree_output=np.arange(E, dtype=np.int32), base_score=np.full(E, -0.0),
                  input_dtype="float32", comparison="<=", average=False,
                  transform="weighted_median", decision="none", classes=(),
                  feature_names=_feature_names(model),
                  # _check_X refuses NaN and +/-inf; the trees' float32 cast refuses 1e39 too
                  allow_nan=False, reject_inf=range(n), exp_lib="numpy",
                  transform_params=tuple(float(w) for w in weights[:E]),
                  provenance=_provenance(model))


PARSERS = {
    "DecisionTreeRegressor": parse_tree,
    "DecisionTreeClassifier": parse_tree,
    "ExtraTreeRegressor": parse_tree,
    "ExtraTreeClassifier": parse_tree,
    "RandomForestRegressor": parse_forest,
    "RandomForestClassifier": parse_forest,
    "ExtraTreesRegressor": parse_forest,
    "ExtraTreesClassifier": parse_forest,
    "GradientBoostingRegressor": parse_gradient_boosting,
    "GradientBoostingClassifier": parse_gradient_boosting,
    "HistGradientBoostingRegressor": parse_hist_gradient_boosting,
    "HistGradientBoostingClassifier": parse_hist_gradient_boosting,
    "IsolationForest": parse_isolation_forest,
    "AdaBoostClassifier": parse_adaboost,
    "AdaBoostRegressor": parse_adaboost,
}
