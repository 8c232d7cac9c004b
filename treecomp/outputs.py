"""From raw margins to what the source library returns: transforms, probabilities, labels.

Shared by the reference interpreter and every Predictor, so a backend only has to produce raw
margins bit-exactly; the final arithmetic is the same numpy code the library itself runs.

Floating-point notes (checked on this machine; tests pin them against the libraries):
- float64 sigmoid: sklearn uses scipy.special.expit, which equals 1 / (1 + np.exp(-x)) bit for
  bit here (both are glibc-quality exp).
- float32 (XGBoost): numpy's float32 exp is a SIMD approximation that differs from glibc's
  correctly rounded expf in ~40% of inputs, so exp is taken in float64 and rounded to float32,
  which is what glibc's expf does internally.
- softmax: max-subtract, exp, numpy row sum (pairwise for >= 8 classes), divide: sklearn's
  utils.extmath.softmax.
"""

from __future__ import annotations

import numpy as np

from .ir import Forest


def _exp(x: np.ndarray) -> np.ndarray:
    if x.dtype == np.float32:
        return np.exp(x.astype(np.float64)).astype(np.float32)
    return np.exp(x)


def transform(forest: Forest, raw: np.ndarray) -> np.ndarray:
    """Apply the forest's inverse link to raw margins (n, n_outputs), keeping their dtype."""
    t = forest.transform
    if t == "identity":
        return raw
    one = raw.dtype.type(1)
    if t == "sigmoid":
        return one / (one + _exp(-raw))
    if t == "sigmoid2":  # sklearn's exponential loss: expit(2 * raw)
        return one / (one + _exp(-(raw * raw.dtype.type(2))))
    if t == "exp":
        return _exp(raw)
    if t == "softmax":
        if raw.dtype == np.float32:
            return _softmax_f32(raw)
        x = raw - raw.max(axis=1, keepdims=True)
        np.exp(x, out=x)
        x /= x.sum(axis=1, keepdims=True)
        return x
    raise AssertionError(f"unknown transform {t!r}")  # validated in Forest; unreachable


def _softmax_f32(raw: np.ndarray) -> np.ndarray:
    # XGBoost's Softmax: wmax, then sequential float32 sum of exp(x - wmax), then divide.
    x = raw - raw.max(axis=1, keepdims=True)
    e = _exp(x)
    s = np.zeros(raw.shape[0], np.float32)
    for k in range(raw.shape[1]):
        s += e[:, k]
    return e / s[:, None]


def predict_values(forest: Forest, raw: np.ndarray) -> np.ndarray:
    """What the library's `predict` returns: labels for classifiers, values for regressors."""
    if not forest.is_classifier:
        out = transform(forest, raw)
        return out[:, 0] if forest.n_outputs == 1 else out
    return labels(forest, raw)


def labels(forest: Forest, raw: np.ndarray) -> np.ndarray:
    d = forest.decision
    if d in ("raw_ge_0", "raw_gt_0", "proba_gt_half"):
        m = raw[:, 0]
        if d == "raw_ge_0":
            idx = m >= 0
        elif d == "raw_gt_0":
            idx = m > 0
        else:
            idx = transform(forest, raw)[:, 0] > raw.dtype.type(0.5)
        return forest.classes[0].take(idx.astype(np.intp))
    scores = transform(forest, raw) if d == "argmax_proba" else raw
    cols = []
    start = 0
    for c in forest.classes:
        cols.append(c.take(np.argmax(scores[:, start:start + len(c)], axis=1)))
        start += len(c)
    if len(cols) == 1:
        return cols[0]
    # multi-output classifiers return (n, n_targets) like sklearn (object dtype if labels differ)
    dtypes = {c.dtype for c in cols}
    return np.stack(cols, axis=1) if len(dtypes) == 1 else np.stack([c.astype(object) for c in cols], axis=1)


def predict_proba(forest: Forest, raw: np.ndarray) -> np.ndarray | list[np.ndarray]:
    """Class probabilities as the library returns them ((n, n_classes), or a list per target)."""
    if not forest.is_classifier:
        raise TypeError("predict_proba is only available for classifiers")
    p = transform(forest, raw)
    if forest.n_outputs == 1 and forest.n_classes == (2,):
        out = np.empty((raw.shape[0], 2), dtype=p.dtype)
        out[:, 1] = p[:, 0]
        out[:, 0] = p.dtype.type(1) - p[:, 0]
        return out
    if len(forest.classes) == 1:
        return p
    parts, start = [], 0
    for c in forest.classes:
        parts.append(p[:, start:start + len(c)].copy())
        start += len(c)
    return parts


def raw_output(forest: Forest, raw: np.ndarray) -> np.ndarray:
    """Raw margins shaped like the library's decision_function / output_margin=True."""
    return raw[:, 0] if forest.n_outputs == 1 else raw
