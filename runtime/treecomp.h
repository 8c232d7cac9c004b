/*
 * treecomp.h -- the C ABI every treecomp artifact honours (C backend .so, LLVM .so/JIT,
 * arrays backend). A C program needs only this header and the .so:
 *
 *     #include "treecomp.h"
 *     // cc driver.c ./model.so -o driver   (or dlopen + dlsym)
 *     double out[N * treecomp_n_outputs()];
 *     int rc = treecomp_predict(X, TREECOMP_F64, N, out, TREECOMP_TRANSFORM);
 *
 * Input: a row-major matrix of n_rows x treecomp_n_features() values, float32 or float64 (the
 * artifact casts each value to the precision its source library compares in, exactly as the
 * library does). Output: n_rows x treecomp_n_outputs() values of treecomp_out_dtype()
 * (32 = float, 64 = double): raw margins (TREECOMP_RAW) or the library's inverse link applied
 * (TREECOMP_TRANSFORM: sigmoid / softmax / exp / identity). Predicted labels and the class list
 * are in treecomp_meta_json() ("classes", "decision").
 *
 * The raw margins are bit-exact with the source library. TREECOMP_TRANSFORM computes the inverse
 * link with the process's libm exp / expf in the library's order of operations: bit-exact for
 * XGBoost, LightGBM and sklearn's sigmoids (scipy's expit), whose libraries call libm too.
 * sklearn's softmax and log link ("exp_lib": "numpy" in treecomp_meta_json()) call numpy's
 * np.exp, which on AVX-512 CPUs is numpy's own code, not libm's: there a C caller's transformed
 * outputs may differ from sklearn's in the last bit, while the Python Predictor applies numpy's
 * own exp to the raw margins, so through Python every output is exact. sklearn's
 * AdaBoostClassifier and IsolationForest ("transform": "samme" / "iforest") take numpy's exp /
 * power after further steps on the margins ("transform_params"): for them TREECOMP_TRANSFORM
 * returns TREECOMP_EINVAL and TREECOMP_RAW gives the margins; so it does for CatBoost's
 * MultiClass / Poisson / Tweedie models ("exp_lib": "fmath": CatBoost's own fast exp).
 *
 * sklearn's GradientBoostingClassifier ("base_link" in treecomp_meta_json()) computes its
 * initial margins from its class priors with numpy's log / exp at predict time: such a library
 * exports them as `treecomp_base` (treecomp_n_outputs() values of treecomp_out_dtype()),
 * computed with libm's log / exp (sklearn's value where numpy has no AVX-512 code). The Python
 * loader overwrites them with its numpy's value when it loads the library.
 *
 * Entry points are reentrant and thread-safe (no global mutable state but treecomp_base, which
 * is written, if at all, before the first call): split rows across threads freely. A call
 * uses up to about 20 KB of the calling thread's stack (the arrays kernel keeps a few rows'
 * buffers there); its larger buffers come from the heap (TREECOMP_ENOMEM when they cannot).
 */
#ifndef TREECOMP_H
#define TREECOMP_H

#include <stdint.h>

#define TREECOMP_ABI_VERSION 1

/* dtype codes for the input matrix and the output buffer */
#define TREECOMP_F32 32
#define TREECOMP_F64 64

/* flags for treecomp_predict */
#define TREECOMP_RAW 0u
#define TREECOMP_TRANSFORM 1u

/* return codes */
#define TREECOMP_OK 0
#define TREECOMP_EINVAL (-1) /* bad dtype code, negative n_rows, NULL pointer, unknown flag */
#define TREECOMP_ENOMEM (-2) /* a per-call buffer could not be allocated (arrays, linear leaves) */

#ifdef __cplusplus
extern "C" {
#endif

int32_t treecomp_abi_version(void);        /* == TREECOMP_ABI_VERSION */
const char *treecomp_version(void);        /* treecomp version that generated the artifact */
const char *treecomp_digest(void);         /* sha256 of the model IR (hex) */
const char *treecomp_backend(void);        /* "c", "llvm", ... */
int32_t treecomp_n_features(void);
int32_t treecomp_n_outputs(void);          /* width of one output row */
int32_t treecomp_out_dtype(void);          /* TREECOMP_F32 or TREECOMP_F64 */
int32_t treecomp_n_classes(void);          /* 0 for regressors; sum over targets otherwise */
const char *treecomp_meta_json(void);      /* everything above + classes, transform, decision */

int32_t treecomp_predict(const void *X, int32_t x_dtype, int64_t n_rows, void *out, uint32_t flags);

/* optional (c and arrays backends, unless built with ir=False): the model's IR file, as
   treecomp.ir.Forest.to_bytes writes it (what Predictor.apply / contributions read) */
int64_t treecomp_ir_size(void);
const void *treecomp_ir(void);

#ifdef __cplusplus
}
#endif
#endif /* TREECOMP_H */
