"""From raw margins to what the source library returns: transforms, probabilities, labels.

Shared by the reference interpreter and every Predictor, so a backend only has to produce raw
margins bit-exactly; the final arithmetic is the same numpy code the library itself runs. Where
the library's inverse link is C arithmetic over libm (NATIVE_TRANSFORMS), a native kernel
applies it itself with the process's libm, and the tests hold it to these numpy versions.

Floating-point notes (tests pin them against the libraries, in-process, on every host):
- Which float64 exp (forest.exp_lib) depends on the library, and the two differ by host: numpy
  2.x runs its own AVX-512 exp on AVX-512 CPUs (last bit differs from glibc's for ~5% of inputs),
  glibc's elsewhere. LightGBM's ConvertOutput and scipy.special.expit (sklearn's sigmoid) call
  libm's exp ("libm": `libm_exp`, the C library's own function, vectorised through a small
  llvmlite loop, or math.exp per value); sklearn's softmax and log link call np.exp ("numpy":
  numpy's exp in this process, so the user's numpy decides, as it does for sklearn).
- float32 (XGBoost 3.2, src/common/math.h): Sigmoid(x) = 1.0f / ((expf(min(-x, 88.7f)) + 1.0f)
  + 1e-16f); Softmax = fmaxf row max, e = expf(x - max) in float, e summed in DOUBLE in class
  order, e / (float)sum; count:poisson etc. = expf(x). expf is glibc's (>= 2.28), which is NOT
  correctly rounded: exhaustively over every float32 on x86-64 it differs from
  (float)exp((double)x) for 170,648 inputs. numpy's float32 exp is a SIMD approximation that
  differs far more often. So `_expf` re-implements glibc's expf algorithm (table + cubic, with
  the fused multiply-add its x86-64 FMA build uses in the range reduction) in float64 numpy;
  checked bit-exact against glibc 2.36's expf (x86-64, FMA variant) for every float32 with
  2^-25 <= |x| <= 89 (x >= -104), exhaustively at the overflow / underflow ends and sampled
  elsewhere, and tested against XGBoost's own outputs (tests/test_frontend_xgboost.py). The
  non-FMA build of glibc differs from the FMA one for 2 float32 inputs; other C libraries
  (macOS, Windows) have their own expf: there XGBoost's transformed outputs may differ from
  these in the last bit (raw margins are unaffected). exp_lib "numpy" on float32 margins is
  numpy's float32 np.exp instead: XGBClassifier(objective="multi:softmax").predict_proba is
  scipy.special.softmax of the float32 margins (max-subtract, np.exp, numpy row sum, divide,
  all in float32), so the "softmax" transform with "numpy" on float32 is exactly that.
- softmax: max-subtract, exp, numpy row sum (pairwise for >= 8 classes), divide: sklearn's
  utils.extmath.softmax.
"""

from __future__ import annotations

import math
import os
import struct
import threading
from typing import Any

import numpy as np

from .ir import MULTILABEL_DECISIONS, Forest


def _exp(x: np.ndarray, lib: str = "libm") -> np.ndarray:
    if x.dtype == np.float32:
        return np.exp(x) if lib == "numpy" else _expf(x)
    if lib == "numpy":
        return np.exp(x)
    if lib == "libm":
        return libm_exp(x)
    if lib == "fmath":
        return fmath_exp(x)
    raise ValueError(f"unknown exp_lib {lib!r}")


_LIBM_EXP: list = []  # [(function, engine) or None]: the JIT-compiled loop, built on first use
_LIBM_EXP_LOCK = threading.Lock()


def _after_fork_in_child() -> None:
    global _LIBM_EXP_LOCK  # another thread may have held it at fork: it would never be released
    _LIBM_EXP_LOCK = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


_LIBM_EXP_IR = r"""
declare double @exp(double)
define void @tc_exp(double* noalias %x, double* noalias %y, i64 %n) {
entry:
  %go = icmp sgt i64 %n, 0
  br i1 %go, label %body, label %done
body:
  %i = phi i64 [0, %entry], [%i1, %body]
  %px = getelementptr inbounds double, double* %x, i64 %i
  %v = load double, double* %px
  %e = call double @exp(double %v)
  %py = getelementptr inbounds double, double* %y, i64 %i
  store double %e, double* %py
  %i1 = add i64 %i, 1
  %more = icmp slt i64 %i1, %n
  br i1 %more, label %body, label %done
done:
  ret void
}
"""


def _libm_exp_jit():
    """tc_exp(x, y, n): y[i] = exp(x[i]) calling the C library's exp (handed to the JIT by
    address, as llvm.py's artifacts get it), or None where llvmlite cannot JIT."""
    with _LIBM_EXP_LOCK:
        if _LIBM_EXP:
            return _LIBM_EXP[0]
        fn = None
        try:
            import ctypes
            import ctypes.util

            import llvmlite.binding as llvm
            addr = None
            for name in ("libm.so.6", ctypes.util.find_library("m"), None):
                try:
                    addr = ctypes.cast(ctypes.CDLL(name).exp, ctypes.c_void_p).value
                    break
                except (OSError, TypeError, AttributeError):
                    continue
            if addr:
                llvm.initialize_native_target()
                llvm.initialize_native_asmprinter()
                llvm.add_symbol("exp", addr)
                text = _LIBM_EXP_IR
                if getattr(llvm, "opaque_pointers_enabled", True):  # typed pointers -> ptr
                    text = text.replace("double*", "ptr")
                mod = llvm.parse_assembly(text)
                mod.verify()
                tm = llvm.Target.from_default_triple().create_target_machine(opt=2)
                engine = llvm.create_mcjit_compiler(mod, tm)
                engine.finalize_object()
                cfn = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64)(
                    engine.get_function_address("tc_exp"))
                fn = (cfn, engine)  # the engine keeps the code alive
        except Exception:  # no JIT on this platform: math.exp per value below
            fn = None
        _LIBM_EXP.append(fn)
        return fn


def libm_exp(x: np.ndarray) -> np.ndarray:
    """The C library's float64 exp, element-wise (what LightGBM and scipy.special.expit call)."""
    x = np.ascontiguousarray(x, np.float64)
    out = np.empty_like(x)
    jit = _libm_exp_jit() if x.size > 8 else None
    if jit is not None:
        jit[0](x.ctypes.data, out.ctypes.data, x.size)
        return out
    flat = out.reshape(-1)
    for i, v in enumerate(x.reshape(-1).tolist()):
        try:
            flat[i] = math.exp(v)  # CPython's math.exp is libm's exp, plus errno checks
        except OverflowError:
            flat[i] = math.inf
    return out


# herumi fmath's expd_v (CatBoost's FastExpWithInfInplace on x86-64, AVX2 and SSE2 alike): with
# s = 2^11, x * s/ln2 rounded by adding 3 * 2^51, a 2^(i/s) table, and a cubic in the residue t.
_FM_A = 2048.0 / math.log(2.0)
_FM_RA = 1.0 / _FM_A
_FM_B = float(3 << 51)
_FM_ADJ = np.uint64((1 << 21) - (1 << 11))
_FM_C2, _FM_C3 = 0.16666666685227835064, 3.0000000027955394
_FM_TBL = np.array([np.float64(math.pow(2.0, i * (1.0 / 2048))).view(np.uint64) for i in range(2048)],
                   np.uint64) & np.uint64((1 << 52) - 1)


def fmath_exp(x: np.ndarray) -> np.ndarray:
    """CatBoost's exp for softmax and Exponent outputs (library/cpp/fast_exp -> fmath::expd_v),
    the same double operations in the same order, so the same bits (checked against CatBoost
    1.2's own outputs, tests/test_frontend_catboost.py). The vector loop clamps x to
    [-708.39641853226408, 709.78272569338397] first; the scalar tail of a batch (n % 4 values)
    returns 0 / inf beyond slightly different bounds: outputs differ only for an exp argument
    below -708.39 (a probability under 1e-307) or above 709.78 (overflow)."""
    x = np.minimum(np.asarray(x, np.float64), 709.78272569338397)
    x = np.maximum(x, -708.39641853226408)
    d = x * _FM_A
    d += _FM_B
    di = d.view(np.uint64)
    t = (d - _FM_B) * _FM_RA - x
    u = (((di + _FM_ADJ) >> np.uint64(11)) << np.uint64(52)) | _FM_TBL[di & np.uint64(2047)]
    y = (_FM_C3 - t) * (t * t)
    y *= _FM_C2
    y = (y - t) + 1.0
    return y * u.view(np.float64)


# glibc's expf (sysdeps/ieee754/flt-32/e_expf.c, from ARM's optimized-routines): with N = 32,
# x*N/ln2 = k + r, exp(x) = 2^(k/N) * p(r), p a cubic, all in double, rounded once to float.
# T[i] = bits(2^(i/N)) - (i << 47): adding k << 47 to T[k % N] scales by 2^(k // N).
_EXPF_T = np.array([
    0x3ff0000000000000, 0x3fefd9b0d3158574, 0x3fefb5586cf9890f, 0x3fef9301d0125b51,
    0x3fef72b83c7d517b, 0x3fef54873168b9aa, 0x3fef387a6e756238, 0x3fef1e9df51fdee1,
    0x3fef06fe0a31b715, 0x3feef1a7373aa9cb, 0x3feedea64c123422, 0x3feece086061892d,
    0x3feebfdad5362a27, 0x3feeb42b569d4f82, 0x3feeab07dd485429, 0x3feea47eb03a5585,
    0x3feea09e667f3bcd, 0x3fee9f75e8ec5f74, 0x3feea11473eb0187, 0x3feea589994cce13,
    0x3feeace5422aa0db, 0x3feeb737b0cdc5e5, 0x3feec49182a3f090, 0x3feed503b23e255d,
    0x3feee89f995ad3ad, 0x3feeff76f2fb5e47, 0x3fef199bdd85529c, 0x3fef3720dcef9069,
    0x3fef5818dcfba487, 0x3fef7c97337b9b5f, 0x3fefa4afa2a490da, 0x3fefd0765b6e4540,
], dtype=np.uint64)
_EXPF_INVLN2N = float.fromhex("0x1.71547652b82fep+0") * 32
# the same constant split into 27 + 26 significant bits: each half times a float32 (24 bits) is
# exact in double, which lets numpy form the exact product that glibc's FMA build rounds once
_EXPF_INVLN2N_HI = float((np.array([_EXPF_INVLN2N]).view(np.uint64)
                          & np.uint64(0xFFFFFFFFF8000000)).view(np.float64)[0])
_EXPF_INVLN2N_LO = _EXPF_INVLN2N - _EXPF_INVLN2N_HI
_EXPF_C0 = float.fromhex("0x1.c6af84b912394p-5") / 32 / 32 / 32
_EXPF_C1 = float.fromhex("0x1.ebfce50fac4f3p-3") / 32 / 32
_EXPF_C2 = float.fromhex("0x1.62e42ff0c52d6p-1") / 32
_EXPF_OFLOW = np.float32(float.fromhex("0x1.62e42ep6"))    # above: +inf (log(2^128))
_EXPF_UFLOW = np.float32(float.fromhex("-0x1.9fe368p6"))   # below: 0 (log(2^-150))


_F64, _U64 = struct.Struct("<d"), struct.Struct("<Q")
_EXPF_T_LIST = [int(v) for v in _EXPF_T]
_M64 = (1 << 64) - 1
_F32_INF = float("inf")
_UFLOW, _OFLOW = float(_EXPF_UFLOW), float(_EXPF_OFLOW)


def _expf_scalar(v: float) -> float:
    """_expf for one float32 value with Python floats: the same double operations in the same
    order (IEEE, round to nearest even), so the same bits. ~30x cheaper than the vectorised
    version on one value (numpy's per-call overhead): the single-row predict path."""
    if not (_UFLOW <= v <= _OFLOW):
        return v if v != v else (_F32_INF if v > _OFLOW else 0.0)
    t1 = _EXPF_INVLN2N_HI * v
    t2 = _EXPF_INVLN2N_LO * v
    hi = t1 + t2
    bv = hi - t1
    lo = (t1 - (hi - bv)) + (t2 - bv)
    kd = float(round(hi))          # round half to even, like np.rint
    d = hi - kd
    if abs(d) == 0.5 and lo != 0:
        kd = math.floor(hi) + (1.0 if lo > 0 else 0.0)
        d = hi - kd
    r = d + lo
    ki = int(kd)
    s = _F64.unpack(_U64.pack((_EXPF_T_LIST[ki & 31] + ((ki << 47) & _M64)) & _M64))[0]
    z = _EXPF_C0 * r
    z += _EXPF_C1
    z *= r * r
    z += _EXPF_C2 * r + 1.0
    return z * s


def _expf(x: np.ndarray) -> np.ndarray:
    """glibc's expf, bit for bit, vectorised (float32 in, float32 out)."""
    x = np.asarray(x, np.float32)
    if x.size <= 4:  # numpy's per-operation overhead dominates: the scalar transcription
        return np.array([_expf_scalar(float(v)) for v in x.reshape(-1)], np.float32).reshape(x.shape)
    shape = x.shape
    x = x.reshape(-1)
    with np.errstate(all="ignore"):
        xd = x.astype(np.float64)
        # glibc returns early for NaN, overflow (-> inf) and underflow (-> 0); below 88.72 and
        # above -103.97 even |x| >= 88 takes the main path
        special = ~((xd >= _EXPF_UFLOW) & (xd <= _EXPF_OFLOW))
        any_special = bool(special.any())
        if any_special:
            xd[special] = 0.0
        # z = x * N/ln2 exactly, as hi + lo (TwoSum of two exact partial products)
        t1 = _EXPF_INVLN2N_HI * xd
        t2 = _EXPF_INVLN2N_LO * xd
        hi = t1 + t2
        bv = hi - t1
        lo = t1 - (hi - bv)
        lo += t2 - bv
        # k = round-half-even(z): glibc's fma(InvLn2N, x, 0x1.8p52) rounds the exact product;
        # rint(hi) agrees except when hi is exactly a half-integer and lo breaks the tie
        kd = np.rint(hi)
        d = hi - kd  # exact: |hi - k| <= 1/2
        tie = np.flatnonzero((np.abs(d) == 0.5) & (lo != 0))
        if tie.size:
            kd[tie] = np.floor(hi[tie]) + (lo[tie] > 0)
            d[tie] = hi[tie] - kd[tie]
        # r = fma(InvLn2N, x, -k) = (hi - k) + lo, rounded once
        r = d + lo
        ki = kd.astype(np.int64).view(np.uint64)
        s = (_EXPF_T[ki & np.uint64(31)] + (ki << np.uint64(47))).view(np.float64)
        # y = (C0 r + C1) r^2 + (C2 r + 1), times 2^(k/N); glibc's order of operations
        z = _EXPF_C0 * r
        z += _EXPF_C1
        r2 = np.multiply(r, r, out=d)  # d's buffer is free again
        z *= r2
        y1 = _EXPF_C2 * r
        y1 += 1.0
        z += y1
        z *= s
        out = z.astype(np.float32)
    if any_special:
        xs = x[special]
        out[special] = np.where(xs > _EXPF_OFLOW, np.float32(np.inf),
                                np.where(xs < _EXPF_UFLOW, np.float32(0), xs))
    return out.reshape(shape)


# -- initial margins (Forest.base_link) ----------------------------------------------------------
# sklearn 1.9.1's GradientBoostingClassifier evaluates its init estimator at predict time
# (ensemble/_gb.py _init_raw_predictions): the DummyClassifier's priors p, clipped to
# [eps, 1 - eps], through loss.link.link (_loss/link.py). Binary: scipy.special.logit, whose
# xsf code is log(p / (1 - p)) outside [0.3, 0.65] and log1p(s) - log1p(-s), s = 2 (p - 0.5),
# inside (checked equal to scipy 1.17.1's, tests/test_exp.py), with libm's log / log1p: here
# Python's math.log / math.log1p, which call them. Multiclass: np.log(p / gmean(p)) with
# scipy.stats.gmean = np.exp(np.mean(np.log(p), axis=1)) on the (1, K) row: numpy's own
# AVX-512 log and exp on AVX-512 hosts, which differ from glibc's in the last bit for some p
# (priors 3:3:4, for one). So the margins are evaluated in the predicting process, never stored.
def _logit(p: float) -> float:
    if p < 0.3 or p > 0.65:
        return math.log(p / (1.0 - p))
    s = 2.0 * (p - 0.5)
    return math.log1p(s) - math.log1p(-s)


def _libm_log(x: np.ndarray) -> np.ndarray:
    return np.array([math.log(v) for v in x.reshape(-1).tolist()]).reshape(x.shape)


def base_margins(forest: Any, lib: str = "numpy") -> np.ndarray:
    """The initial margins (float64, n_outputs) of a Forest or Head: base_score, or its
    base_link evaluated now, as the library evaluates it at predict time. lib "numpy": with this
    process's np.log / np.exp (what scikit-learn computes here); "libm": with the C library's
    log / exp (what it computes under numpy's baseline dispatch, which calls them), the value
    artifacts are built with, so their bytes do not depend on the building host."""
    link = forest.base_link
    p = np.asarray(forest.base_score, np.float64)
    if link == "identity":
        return p.copy()
    if link in ("logit", "half_logit"):
        v = _logit(float(p[0]))
        return np.array([0.5 * v if link == "half_logit" else v])
    if link != "multinomial_logit":
        raise ValueError(f"unknown base_link {link!r}")
    a = p.reshape(1, -1)
    if lib == "numpy":
        gm = np.exp(np.mean(np.log(a), axis=1))
        return np.log(a / gm[:, None])[0]
    if lib != "libm":
        raise ValueError(f"unknown lib {lib!r}")
    gm = libm_exp(np.mean(_libm_log(a), axis=1))
    return _libm_log(a / gm[:, None])[0]


#: transforms run over blocks of rows of about this many values: their temporaries (a dozen
#: arrays of a block's size, float64 inside _expf) stay small next to the output they fill
TRANSFORM_BLOCK = 1 << 16


def transform(forest: Forest, raw: np.ndarray) -> np.ndarray:
    """Apply the forest's inverse link to raw margins (n, n_outputs), keeping their dtype
    (after dividing them by forest.output_divisor: LightGBM's random-forest mode).

    Every transform treats each row on its own, so it runs over blocks of rows (TRANSFORM_BLOCK
    values) into one output array: peak memory stays near the output's size whatever the
    batch. No block holds a single row unless the batch does: numpy sums a one-row softmax
    ("F" order, _softmax) in another order than several rows."""
    if forest.transform == "identity" and forest.output_divisor == 1:
        return raw
    n = raw.shape[0]
    rows = max(2, TRANSFORM_BLOCK // max(1, raw.shape[1] if raw.ndim > 1 else 1))
    if n <= rows + 1:
        return _transform_rows(forest, raw)
    out = None
    a = 0
    while a < n:
        b = n if n - a <= rows + 1 else a + rows
        part = _transform_rows(forest, raw[a:b])
        if out is None:
            out = np.empty((n,) + part.shape[1:], part.dtype)
        out[a:b] = part
        a = b
    return out


def _transform_rows(forest: Forest, raw: np.ndarray) -> np.ndarray:
    t = forest.transform
    d = forest.output_divisor
    if d != 1:  # LightGBM's GBDT::Predict: output[k] /= num_iteration_for_pred_ (a double)
        raw = raw / raw.dtype.type(d)
    if t == "identity":
        return raw
    lib = forest.exp_lib
    one = raw.dtype.type(1)
    if t == "sigmoid":
        if raw.dtype == np.float32:
            return _sigmoid_f32(raw)
        return one / (one + _exp(-raw, lib))
    if t == "sigmoid2":  # sklearn's exponential loss: expit(2 * raw)
        return one / (one + _exp(-(raw * raw.dtype.type(2)), lib))
    if t == "exp":
        return _exp(raw, lib)
    if t == "exp64":  # XGBoost's survival:aft: (float)exp((double)margin)
        return _exp(raw.astype(np.float64), lib).astype(raw.dtype)
    if t == "softmax":
        if raw.dtype == np.float32 and lib != "numpy":
            return _softmax_f32(raw)
        return _softmax(np.ascontiguousarray(raw), lib, "C")
    if t == "softmax_seq":
        # LightGBM's Common::Softmax (libm): exp(x - max) summed left to right, then divide;
        # sklearn HGB (numpy): its margins are Fortran-ordered, numpy sums them as such
        return _softmax(raw, lib, "F" if lib == "numpy" else "seq")
    if t == "samme":
        return _samme_proba(forest, raw)
    if t == "iforest":
        return score_samples(forest, raw)[:, None]
    if t == "weighted_median":
        return weighted_median(forest, raw)[:, None]
    if t in _ORT:
        return _ORT[t](raw, lib)
    raise AssertionError(f"unknown transform {t!r}")  # validated in Forest; unreachable


def _softmax(raw: np.ndarray, lib: str, order: str) -> np.ndarray:
    """max-subtract, exp, row sum, divide; the row sum in one of three orders:
      "C"    numpy's sum over a C-ordered array (sklearn's softmax of C-ordered margins):
             pairwise from 8 classes on
      "F"    numpy's sum over a Fortran-ordered array (sklearn's softmax of F-ordered margins:
             HistGradientBoosting, AdaBoost): class by class, left to right, except for a
             single row, which is contiguous either way and summed as "C" (numpy decides: the
             very call it makes for sklearn, on the same layout)
      "seq"  left to right whatever the rows (LightGBM's Common::Softmax, a C loop)"""
    x = _exp(raw - raw.max(axis=1, keepdims=True), lib)
    if order == "C":
        x /= x.sum(axis=1, keepdims=True)
        return x
    if order == "F":
        return x / np.asfortranarray(x).sum(axis=1)[:, None]
    return x / _sum_in_order(x, x.dtype)[:, None]


def _sum_in_order(x: np.ndarray, dtype: Any) -> np.ndarray:
    """Each row of x (n, k) summed left to right in `dtype` (a C loop's order: s = x0, then
    s += x1, ...; x's values are never -0.0 here, so starting from 0 would give the same): a
    Python loop over a few columns, np.cumsum (an accumulation, sequential by definition)
    over many."""
    if x.shape[1] > 16:
        return np.cumsum(x, axis=1, dtype=dtype)[:, -1]
    s = x[:, 0].astype(dtype)
    for k in range(1, x.shape[1]):
        s += x[:, k]
    return s


# -- AdaBoostClassifier (SAMME) and IsolationForest: outputs built on decision_function ---------
# sklearn 1.9.1, ensemble/_weight_boosting.py. The raw margins are sklearn's `pred` before its
# division: per estimator the one-hot of its predicted class times its weight w (the other
# classes get -1 / (K - 1) * w), summed from 0 in estimator order (the leaf values; see
# frontends/sklearn.py). transform_params = (estimator_weights_.sum(),). Then
#   decision_function = pred / weight_sum; binary: columns (-m, m) of the one margin m, the
#       first negated, then summed (what sklearn does to its two columns; its first column is
#       exactly 0.0 - m, bit for bit: the frontend pins why)
#   predict           = classes_[decision > 0] (binary), classes_[argmax(decision)] (else)
#   predict_proba     = softmax(vstack([-d, d]).T / 2) (binary), softmax(decision / (K - 1))
#       (else; sklearn's decision is Fortran-ordered, so numpy sums the softmax sequentially)
# sklearn 1.9.1, ensemble/_iforest.py. The raw margin is `depths`: per tree the leaf's depth +
# the average path length of its training samples - 1.0, summed from 0 in estimator order.
# transform_params = (n_estimators, max_samples, offset_); the denominator n_estimators *
# c(max_samples) is evaluated at predict time, with np.log, as sklearn does (iforest_denominator;
# numpy's AVX-512 log makes it host-dependent: max_samples 9171, for one). Then
#   score_samples     = -(2 ** -(depths / denominator))   (numpy's power; 2 ** -1 where the
#       denominator is 0, as sklearn's np.divide(..., out=ones, where=denominator != 0))
#   decision_function = score_samples - offset_;  predict = -1 where decision < 0, else 1
def _samme_decision(forest: Forest, raw: np.ndarray) -> np.ndarray:
    weight_sum = forest.transform_params[0]
    if forest.n_outputs > 1:
        return raw / weight_sum
    m = raw[:, 0]
    pred = np.empty((len(m), 2), raw.dtype)
    pred[:, 0] = 0.0 - m
    pred[:, 1] = m
    pred /= weight_sum
    pred[:, 0] *= -1
    return pred.sum(axis=1)


def _samme_proba(forest: Forest, raw: np.ndarray) -> np.ndarray:
    d = _samme_decision(forest, raw)
    if forest.n_outputs == 1:
        return _softmax(np.vstack([-d, d]).T / 2, forest.exp_lib, "F")
    return _softmax(d / (d.shape[1] - 1), forest.exp_lib, "F")


def iforest_denominator(forest: Forest) -> float:
    """IsolationForest's len(estimators_) * _average_path_length([max_samples]) (sklearn 1.9.1),
    evaluated now with this process's numpy; a two-parameter (older) IR holds it evaluated."""
    p = forest.transform_params
    if len(p) == 2:
        return p[0]
    n = np.array([p[1]])
    if n[0] <= 1:
        c = np.zeros(1)
    elif n[0] == 2:
        c = np.ones(1)
    else:
        c = 2.0 * (np.log(n - 1.0) + np.euler_gamma) - 2.0 * (n - 1.0) / n
    return float((np.float64(p[0]) * c)[0])


def score_samples(forest: Forest, raw: np.ndarray) -> np.ndarray:
    """IsolationForest.score_samples from the raw margins (transform "iforest")."""
    if forest.transform != "iforest":
        raise TypeError("score_samples is only available for IsolationForest models")
    denominator = iforest_denominator(forest)
    depths = raw[:, 0]
    q = depths / denominator if denominator != 0 else np.ones_like(depths)
    return -(2 ** (-q))


# sklearn 1.9.1, ensemble/_weight_boosting.py, AdaBoostRegressor._get_median_predict: the raw
# outputs are the estimators' predictions (tree t writes output t, from -0.0, so a leaf's value
# comes out as it is, signed zeros included); transform_params are estimator_weights_. Per row:
# np.argsort of the predictions, np.cumsum of the weights in that order, the first position
# whose sum reaches half the last, that estimator's prediction. The very numpy calls on an array
# of the same layout (sklearn's predictions are np.array([...]).T, Fortran-ordered): argsort
# breaks ties by its algorithm (numpy's AVX-512 sort on AVX-512 hosts), and the cumulative sums
# follow that order, so anything but numpy's own argsort could take another estimator.
def weighted_median(forest: Forest, raw: np.ndarray) -> np.ndarray:
    """AdaBoostRegressor.predict from the estimators' predictions (transform "weighted_median")."""
    if forest.transform != "weighted_median":
        raise TypeError("weighted_median is only available for AdaBoostRegressor models")
    predictions = np.ascontiguousarray(raw.T).T  # sklearn's layout: (n_estimators, n).T
    sorted_idx = np.argsort(predictions, axis=1)
    weights = np.asarray(forest.transform_params, np.float64)
    weight_cdf = np.cumsum(weights[sorted_idx], axis=1)
    median_or_above = weight_cdf >= 0.5 * weight_cdf[:, -1][:, np.newaxis]
    median_idx = median_or_above.argmax(axis=1)
    rows = np.arange(len(raw))
    return predictions[rows, sorted_idx[rows, median_idx]]


def decision_values(forest: Forest, raw: np.ndarray) -> np.ndarray:
    """What the library's decision_function returns: the raw margins (raw_output), except
    for AdaBoost and IsolationForest, whose decision_function is computed from them."""
    if forest.transform == "samme":
        return _samme_decision(forest, raw)
    if forest.transform == "iforest":
        return score_samples(forest, raw) - forest.transform_params[-1]
    return raw_output(forest, raw)


#: transforms computed in Python only (numpy's power and exp in the calling process, as the
#: library computes them): artifacts refuse TREECOMP_TRANSFORM for them (accepted_flags)
PYTHON_TRANSFORMS = ("samme", "iforest", "weighted_median")


def accepted_flags(forest: Forest) -> int:
    """The treecomp_predict flags an artifact accepts: TREECOMP_RAW always, TREECOMP_TRANSFORM
    (1) unless the transform is one only Python computes, or calls an exp no artifact has
    (CatBoost's fmath exp): then the call returns EINVAL rather than another library's answer.
    (With an output_divisor, TREECOMP_TRANSFORM divides first: the C code of
    backends.c.transform_code does; a backend that emits its own transform refuses it.)"""
    if forest.transform in PYTHON_TRANSFORMS:
        return 0
    return 0 if forest.exp_lib == "fmath" and forest.transform != "identity" else 1


# ONNX Runtime's post transforms (onnxruntime/core/providers/cpu/ml/ml_common.h), in the scores'
# own dtype (float32: std::exp is glibc's expf, reproduced by _expf): ComputeLogistic,
# ComputeSoftmax (max over -FLT_MAX and the scores, exps summed in order), ComputeSoftmaxZero
def _logistic_ort(raw: np.ndarray, lib: str) -> np.ndarray:
    one = raw.dtype.type(1)
    v = one / (one + _exp(-np.abs(raw), lib))
    return np.where(raw < 0, one - v, v)


def _softmax_ort(raw: np.ndarray, lib: str, zero: bool = False) -> np.ndarray:
    t = raw.dtype.type
    m = np.fmax.reduce(raw, axis=1, initial=t(-np.finfo(np.float32).max), keepdims=True)
    e = _exp(raw - m, lib)
    if zero:  # scores within 1e-7 of zero: x * exp(-max), left out of the sum
        small = ~((raw > t(1e-7)) | (raw < t(-1e-7)))
        e = np.where(small, raw * _exp(-m, lib), e)
    s = _sum_in_order(np.where(small, t(0), e) if zero else e, raw.dtype)
    return e / s[:, None]


_ORT = {"logistic_ort": _logistic_ort, "softmax_ort": _softmax_ort,
        "softmax_zero_ort": lambda raw, lib: _softmax_ort(raw, lib, zero=True)}


_F32 = struct.Struct("<f")
_CLAMP_F32 = float(np.float32(88.7))
_EPS_F32 = float(np.float32(1e-16))


def _f32(x: float) -> float:
    """Round a Python float to float32 (exact emulation of one float32 +, -, *, / done in double:
    53 >= 2 * 24 + 2 bits, so the double rounding is innocuous)."""
    return _F32.unpack(_F32.pack(x))[0]


def _sigmoid_f32_scalar(v: float) -> float:
    e = _f32(_expf_scalar(min(-v, _CLAMP_F32)))
    return _f32(1.0 / _f32(_f32(e + 1.0) + _EPS_F32))


def _sigmoid_f32(raw: np.ndarray) -> np.ndarray:
    # XGBoost's float Sigmoid: the argument of expf is clamped at 88.7f (so margins below -88.7
    # give a denormal ~3e-39, not 0), and the 1e-16f meant to avoid division by zero is added
    # after the 1.0f (a no-op in float32 arithmetic, kept to mirror the source).
    if raw.size <= 4:  # single rows: the same float32 operations on Python floats (same bits)
        return np.array([_sigmoid_f32_scalar(float(v)) for v in raw.reshape(-1)],
                        np.float32).reshape(raw.shape)
    arg = np.minimum(-raw, np.float32(88.7))
    return np.float32(1) / ((_expf(arg) + np.float32(1)) + np.float32(1e-16))


def _softmax_f32(raw: np.ndarray) -> np.ndarray:
    # XGBoost's Softmax: float row max, e = expf(x - max) in float, the e's summed in DOUBLE
    # in class order, then each e divided by the sum rounded to float.
    x = raw - raw.max(axis=1, keepdims=True)
    e = _expf(x)
    s = _sum_in_order(e, np.float64)
    return e / s.astype(np.float32)[:, None]


#: the inverse links computed natively (the arrays kernel, and the C / LLVM artifacts'
#: TREECOMP_TRANSFORM) exactly as the library computes them, with this process's libm, which is
#: the one the library calls: (transform, accumulation dtype, exp_lib) -> kind of arrays.c's
#: tc_transform. float32: XGBoost's expf formulas (math.h) and survival:aft's exp in double;
#: float64 with libm: scipy.special.expit (sklearn) and LightGBM's ConvertOutput (sigmoid, exp,
#: Common::Softmax's sequential sum). Not here, so applied in Python: every exp_lib="numpy"
#: transform (numpy's exp must be the user's numpy, in-process) and the float64 "softmax"
#: (numpy's pairwise row sum).
NATIVE_TRANSFORMS = {("sigmoid", "float32", "libm"): 1, ("exp", "float32", "libm"): 2,
                     ("softmax", "float32", "libm"): 3, ("sigmoid", "float64", "libm"): 4,
                     ("sigmoid2", "float64", "libm"): 5, ("exp", "float64", "libm"): 6,
                     ("exp64", "float64", "libm"): 6, ("softmax_seq", "float64", "libm"): 7,
                     ("exp64", "float32", "libm"): 8}
#: decisions that read the raw margins, not the transformed outputs
RAW_DECISIONS = ("raw_ge_0", "raw_gt_0", "argmax_raw", "samme", "outlier", "raw_gt_0_each")


def native_transform(forest: Forest) -> int:
    """tc_transform's kind for the forest's inverse link, 0 where numpy applies it (and where
    the margins are divided first: output_divisor, which the arrays kernel does not do)."""
    if forest.output_divisor != 1:
        return 0
    return NATIVE_TRANSFORMS.get((forest.transform, str(forest.accumulate_dtype),
                                  forest.exp_lib), 0)


def needs_transform(forest: Forest, kind: str) -> bool:
    """Whether output `kind` ("predict" / "proba") is computed from transformed outputs."""
    if forest.transform == "identity" and forest.output_divisor == 1:
        return False
    return kind == "proba" or not forest.is_classifier or forest.decision not in RAW_DECISIONS


def predict_values(forest: Forest, raw: np.ndarray, transformed: bool = False) -> np.ndarray:
    """What the library's `predict` returns: labels for classifiers, values for regressors.
    transformed=True: `raw` already holds the transformed outputs (see needs_transform)."""
    if forest.decision == "outlier":
        if transformed:
            raise ValueError("decision 'outlier' needs the raw margins, not transformed outputs")
        decision = decision_values(forest, raw)
        is_inlier = np.ones_like(decision, dtype=int)
        is_inlier[decision < 0] = -1
        return is_inlier
    if not forest.is_classifier:
        out = raw if transformed else transform(forest, raw)
        return out[:, 0] if forest.n_outputs == 1 or forest.transform == "weighted_median" else out
    return labels(forest, raw, transformed)


def labels(forest: Forest, raw: np.ndarray, transformed: bool = False) -> np.ndarray:
    d = forest.decision
    if transformed and d in RAW_DECISIONS:
        raise ValueError(f"decision {d!r} needs the raw margins, not transformed outputs")
    if d == "samme":
        pred = _samme_decision(forest, raw)
        c = forest.classes[0]
        return c.take(pred > 0, axis=0) if pred.ndim == 1 else c.take(np.argmax(pred, axis=1), axis=0)
    if d in MULTILABEL_DECISIONS:  # a label per output, (n, n_outputs)
        if d == "raw_gt_0_each":
            on = raw > 0
        else:
            p = raw if transformed else transform(forest, raw)
            on = p > p.dtype.type(0.5)
        return np.stack([c.take(on[:, j].astype(np.intp)) for j, c in enumerate(forest.classes)], axis=1)
    if d in ("raw_ge_0", "raw_gt_0", "proba_gt_half"):
        m = raw[:, 0]
        if d == "raw_ge_0":
            idx = m >= 0
        elif d == "raw_gt_0":
            idx = m > 0
        else:
            idx = (raw if transformed else transform(forest, raw))[:, 0] > raw.dtype.type(0.5)
        return forest.classes[0].take(idx.astype(np.intp))
    scores = (raw if transformed else transform(forest, raw)) if d == "argmax_proba" else raw
    cols = []
    start = 0
    for c in forest.classes:
        cols.append(c.take(np.argmax(scores[:, start:start + len(c)], axis=1)))
        start += len(c)
    if len(cols) == 1:
        return cols[0][:, None] if forest.label_shape == "column" else cols[0]
    # multi-output classifiers return (n, n_targets) like sklearn (object dtype if labels differ)
    dtypes = {c.dtype for c in cols}
    return np.stack(cols, axis=1) if len(dtypes) == 1 else np.stack([c.astype(object) for c in cols], axis=1)


def predict_proba(forest: Forest, raw: np.ndarray, transformed: bool = False) -> np.ndarray | list[np.ndarray]:
    """Class probabilities as the library returns them ((n, n_classes), or a list per target).
    transformed=True: `raw` already holds the transformed outputs."""
    if not forest.is_classifier:
        raise TypeError("predict_proba is only available for classifiers")
    p = raw if transformed else transform(forest, raw)
    if forest.transform == "samme" or forest.decision in MULTILABEL_DECISIONS:  # (n, n_outputs) already
        return p
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


def apply_allows_nan(forest: Forest) -> bool:
    """Whether the library's apply takes NaN: where its predict does, and sklearn's
    GradientBoosting (its apply validates rows as its trees do, which route NaN by
    missing_go_to_left; its predict refuses NaN)."""
    return forest.allow_nan or forest.leaf_layout in ("stages", "stages_classes")


_LEAF_DTYPES = {"trees": np.int64, "tree": np.int64, "stages": np.float64,
                "stages_classes": np.float64, "xgboost": np.float32, "lightgbm": np.int32}


def leaf_ids(forest: Forest, ids: np.ndarray) -> np.ndarray:
    """The leaf ids (n, n_trees), any numeric dtype holding the exact ids, shaped and typed as
    the library's apply / pred_leaf returns them (forest.leaf_layout, ir.LEAF_LAYOUTS)."""
    layout = forest.leaf_layout
    out = np.asarray(ids).astype(_LEAF_DTYPES[layout])
    n = out.shape[0]
    if layout == "tree" or (layout == "xgboost" and forest.n_trees == 1):
        return out.reshape(n)
    if layout == "stages_classes":
        return out.reshape(n, forest.n_trees // forest.n_outputs, forest.n_outputs)
    return out


def raw_output(forest: Forest, raw: np.ndarray) -> np.ndarray:
    """Raw margins shaped like the library's decision_function / output_margin=True."""
    return raw[:, 0] if forest.n_outputs == 1 else raw
