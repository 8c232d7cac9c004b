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
#define TREECOMP_ECORRUPT (-3) /* treecomp_verify / treecomp_check_file: the file is not the one
                                  treecomp built (truncated, altered, replaced) or has no seal */
#define TREECOMP_EIO (-4)      /* treecomp_verify / treecomp_check_file: the file cannot be read */

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

/* The seal. Every library treecomp writes holds TREECOMP_SEAL_MARKER followed by the sha256 of
 * the whole file computed with those 32 digest bytes zeroed (written after linking), exactly once.
 *
 * treecomp_verify(): the library checks its own file (the path it was loaded from, dladdr)
 * against the seal it was loaded with: TREECOMP_OK, TREECOMP_ECORRUPT (the file on disk is not
 * byte for byte what treecomp built, or not the file this process loaded), TREECOMP_EIO (it
 * cannot be read) or TREECOMP_ENOMEM. Call it once after loading, before trusting predictions.
 *
 * It runs after the library was loaded: a file damaged in its dynamic-linking tables can crash
 * the loader before any of its code runs. To check a file BEFORE loading it (what the Python
 * loader does), define TREECOMP_CHECK_IMPLEMENTATION in one C file before including this header:
 *
 *     #define TREECOMP_CHECK_IMPLEMENTATION
 *     #include "treecomp.h"
 *     if (treecomp_check_file("./model.so") != TREECOMP_OK) { ...refuse... }
 *     void *h = dlopen("./model.so", RTLD_NOW | RTLD_LOCAL);   // then dlsym the entry points
 *
 * treecomp_check_file(path) returns the codes above; it reads the whole file, runs none of it.
 */
int32_t treecomp_verify(void);

#define TREECOMP_SEAL_MARKER "\x89TCSEAL\x01\r\n\x1a\n\xfe\x5e\xa1\xed"
#define TREECOMP_SEAL_MARKER_SIZE 16

#ifdef TREECOMP_CHECK_IMPLEMENTATION
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* sha256 (FIPS 180-4) */
typedef struct { uint32_t h[8]; uint64_t n; unsigned char b[64]; size_t k; } treecomp_sha256_;

static const uint32_t treecomp_sha256_k_[64] = {
  0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
  0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
  0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
  0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
  0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
  0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
  0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
  0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

#define TREECOMP_ROR_(x, n) (((x) >> (n)) | ((x) << (32 - (n))))

static inline void treecomp_sha256_block_(treecomp_sha256_ *s, const unsigned char *p) {
  uint32_t w[64], a = s->h[0], b = s->h[1], c = s->h[2], d = s->h[3], e = s->h[4], f = s->h[5],
           g = s->h[6], h = s->h[7];
  for (int i = 0; i < 16; ++i)
    w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 | (uint32_t)p[4 * i + 2] << 8 | p[4 * i + 3];
  for (int i = 16; i < 64; ++i) {
    const uint32_t s0 = TREECOMP_ROR_(w[i - 15], 7) ^ TREECOMP_ROR_(w[i - 15], 18) ^ (w[i - 15] >> 3);
    const uint32_t s1 = TREECOMP_ROR_(w[i - 2], 17) ^ TREECOMP_ROR_(w[i - 2], 19) ^ (w[i - 2] >> 10);
    w[i] = w[i - 16] + s0 + w[i - 7] + s1;
  }
  for (int i = 0; i < 64; ++i) {
    const uint32_t t1 = h + (TREECOMP_ROR_(e, 6) ^ TREECOMP_ROR_(e, 11) ^ TREECOMP_ROR_(e, 25))
                        + ((e & f) ^ (~e & g)) + treecomp_sha256_k_[i] + w[i];
    const uint32_t t2 = (TREECOMP_ROR_(a, 2) ^ TREECOMP_ROR_(a, 13) ^ TREECOMP_ROR_(a, 22))
                        + ((a & b) ^ (a & c) ^ (b & c));
    h = g; g = f; f = e; e = d + t1; d = c; c = b; b = a; a = t1 + t2;
  }
  s->h[0] += a; s->h[1] += b; s->h[2] += c; s->h[3] += d;
  s->h[4] += e; s->h[5] += f; s->h[6] += g; s->h[7] += h;
}

static inline void treecomp_sha256_init_(treecomp_sha256_ *s) {
  static const uint32_t h0[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
  memcpy(s->h, h0, sizeof h0);
  s->n = 0;
  s->k = 0;
}

static inline void treecomp_sha256_update_(treecomp_sha256_ *s, const unsigned char *p, size_t n) {
  s->n += n;
  while (n) {
    if (s->k == 0 && n >= 64) { treecomp_sha256_block_(s, p); p += 64; n -= 64; continue; }
    size_t take = 64 - s->k < n ? 64 - s->k : n;
    memcpy(s->b + s->k, p, take);
    s->k += take; p += take; n -= take;
    if (s->k == 64) { treecomp_sha256_block_(s, s->b); s->k = 0; }
  }
}

static inline void treecomp_sha256_final_(treecomp_sha256_ *s, unsigned char out[32]) {
  const uint64_t bits = s->n * 8;
  unsigned char pad[72] = {0x80};
  const size_t np = (s->k < 56 ? 56 : 120) - s->k;
  for (int i = 0; i < 8; ++i) pad[np + i] = (unsigned char)(bits >> (56 - 8 * i));
  treecomp_sha256_update_(s, pad, np + 8);
  for (int i = 0; i < 8; ++i)
    for (int j = 0; j < 4; ++j) out[4 * i + j] = (unsigned char)(s->h[i] >> (24 - 8 * j));
}

/* the check of treecomp_check_file; `loaded` (or NULL): the digest the caller's copy of the
   library holds, which the file's seal must equal too (treecomp_verify) */
static inline int32_t treecomp_check_sealed_file_(const char *path, const unsigned char *loaded) {
  /* the marker, each byte inverted (volatile: not folded back into a constant): the code that
     looks for a seal must not hold one itself */
  static const volatile unsigned char inverted[TREECOMP_SEAL_MARKER_SIZE] = {
      0x76, 0xab, 0xbc, 0xac, 0xba, 0xbe, 0xb3, 0xfe, 0xf2, 0xf5, 0xe5, 0xf5, 0x01, 0xa1, 0x5e, 0x12};
  unsigned char marker[TREECOMP_SEAL_MARKER_SIZE];
  for (int i = 0; i < TREECOMP_SEAL_MARKER_SIZE; ++i) marker[i] = (unsigned char)~inverted[i];
  FILE *f = path ? fopen(path, "rb") : NULL;
  if (!f) return TREECOMP_EIO;
  size_t cap = 1 << 16, n = 0;
  unsigned char *buf = (unsigned char *)malloc(cap);
  for (;;) {
    if (!buf) { fclose(f); return TREECOMP_ENOMEM; }
    n += fread(buf + n, 1, cap - n, f);
    if (n < cap) break;
    unsigned char *bigger = cap <= SIZE_MAX / 2 ? (unsigned char *)realloc(buf, cap *= 2) : NULL;
    if (!bigger) free(buf);
    buf = bigger;
  }
  const int err = ferror(f);
  fclose(f);
  if (err) { free(buf); return TREECOMP_EIO; }
  size_t at = 0, found = 0;
  for (size_t i = 0; i + TREECOMP_SEAL_MARKER_SIZE <= n; ++i) {
    const unsigned char *q = (const unsigned char *)memchr(buf + i, marker[0], n - i);
    if (!q) break;
    i = (size_t)(q - buf);
    if (i + TREECOMP_SEAL_MARKER_SIZE <= n && !memcmp(q, marker, TREECOMP_SEAL_MARKER_SIZE)) {
      at = i + TREECOMP_SEAL_MARKER_SIZE;
      ++found;
    }
  }
  int32_t rc = TREECOMP_ECORRUPT;
  if (found == 1 && at + 32 <= n) {
    unsigned char want[32], got[32];
    memcpy(want, buf + at, 32);
    memset(buf + at, 0, 32);
    treecomp_sha256_ s;
    treecomp_sha256_init_(&s);
    treecomp_sha256_update_(&s, buf, n);
    treecomp_sha256_final_(&s, got);
    if (!memcmp(want, got, 32) && (!loaded || !memcmp(want, loaded, 32))) rc = TREECOMP_OK;
  }
  free(buf);
  return rc;
}

static inline int32_t treecomp_check_file(const char *path) {
  return treecomp_check_sealed_file_(path, NULL);
}
#endif /* TREECOMP_CHECK_IMPLEMENTATION */

#ifdef __cplusplus
}
#endif
#endif /* TREECOMP_H */
