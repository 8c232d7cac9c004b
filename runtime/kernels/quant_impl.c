/*
 * quant_impl.c -- the quantised heap walk (a fragment included by arrays_impl.c, inside its
 * FN() namespace; parameters TC_XT, TC_AT, TC_ATTR and TC_QVEC: 1 = the AVX2 byte kernels,
 * 2 = also the AVX-512 ones, 64 rows a vector: the tc_z* kernels below the AVX2 ones).
 *
 * Idea: a forest compares each feature against few distinct thresholds (XGBoost's hist method:
 * at most max_bin = 256). Rows are quantised once per block: per *column* (a feature's sorted
 * distinct thresholds u_0 < ... < u_{k-1}, k <= 255, in the comparison precision) a row's bin is
 *
 *     b(x) = #{ j : x goes right at threshold u_j }     (x > u_j for "<=", x >= u_j for "<")
 *
 * which counts a prefix of the sorted table (going right is monotone in u), so a branch-free
 * binary search finds it exactly. A node with threshold u_j then sends x right iff b(x) > j:
 * one byte compare, the same decision as the float compare, bit for bit. NaN gets its own code
 * per column: k (right of every node) in a column for nodes that send NaN right, 0 (left of
 * every node) in a column for nodes that send NaN left; a feature with both kinds of node gets
 * both columns (the second a copy of the first's bins but for NaN: q_src; for the heap walk's
 * column mux, see tc_qlevelc, merged where the count leaves bin 255 free). Features with more than
 * 255 thresholds are split into chunks of 254 (one column each: the bin within a chunk saturates
 * at its ends, which is exactly right for the chunk's nodes). Heap padding slots hold threshold
 * byte 255, which no bin exceeds: always left.
 *
 * Bins are stored XOR 0x80 (as are node bytes) so the AVX2 path can use the signed byte compare.
 *
 * The AVX2 walk takes 32 rows per vector (one byte each) and loads, at each level, the column
 * bytes of *every* node of the level for all 32 rows (no gathers), then selects each row's own
 * node's byte with a binary tree of byte blends keyed on the bits of the row's position in the
 * level (vpblendvb reads bit 7 of each byte; a 16-bit shift moves bit b of every byte there);
 * the row's node's threshold byte comes from the level's thresholds by vpshufb (16 a shuffle),
 * and one compare per level says go right. For a depth-6 tree: 63 loads + 57 blends + 8
 * shuffles + 6 compares per 32 rows, against 6 dependent gathers per row for the float walk.
 * Leaves are then looked up (byte planes) or gathered and added exactly like the float heap
 * walk: one add per row and tree, trees in order, in TC_AT.
 */

/* quantise nb rows of xb (already cast to TC_XT) into qb. Layout: groups of TC_QR rows (32; 64
 * in the AVX-512 unit, whose walks load a 64-row vector per column), gs bytes apart; within a
 * group, column c's TC_QR bytes at c * TC_QR (one aligned vector per column). The tables' column
 * offsets (h_qcol) are column * 32: scaled by TC_QCS here. TC_QOFF(r): the byte offset of row r
 * in column 0 (r a multiple of 32: its 32-row half). */
#ifndef TC_QR
#if TC_QVEC == 2
#define TC_QR 64
#define TC_QSH 6
#else
#define TC_QR 32
#define TC_QSH 5
#endif
#define TC_QCS (TC_QR / 32)
#define TC_QOFF(r) (((r) >> TC_QSH) * gs + ((r) & (TC_QR - 1)))
#endif
/* the leaf value of a tree whose last level is node k, from its records r (h_zr: the one-row
 * lanes walks, zlanes here and quant_neon.c's nrow1) and the row's 128-byte table: the
 * record's decision (x > thr, signed bytes: the sign of tc_zdec, the compare of tc_nlanes16)
 * picks the left or right leaf */
static inline __attribute__((always_inline)) TC_ATTR TC_AT FN(zrecv)(const uint8_t *r, unsigned k,
                                                                    const int8_t *row) {
  const uint8_t *e = r + (size_t)k * (sizeof(TC_AT) == 4 ? 16 : 32);
  TC_AT v;
  memcpy(&v, e + 8 + (row[e[0]] > (int8_t)e[1] ? sizeof(TC_AT) : 0), sizeof v);
  return v;
}
#if TC_QARM  /* aarch64: the NEON (and SVE) byte kernels, same layout as AVX2's */
#include "kernels/quant_neon.c"
#endif
#if TC_QVEC
/* how many of the 16 values in lo, hi send x right (u <= x for "<", u < x for "<="; NaN u:
 * none): the bits of an ordered compare, counted. float32 only (see quantise). */
static inline __attribute__((always_inline)) TC_ATTR uint32_t FN(count16v)(const __m256 lo, const __m256 hi,
                                                                            const TC_XT x, const int strict) {
  const __m256 xv = _mm256_set1_ps((float)x);
  const uint32_t m =
      strict ? (uint32_t)_mm256_movemask_ps(_mm256_cmp_ps(lo, xv, _CMP_LE_OQ))
                 | (uint32_t)_mm256_movemask_ps(_mm256_cmp_ps(hi, xv, _CMP_LE_OQ)) << 8
             : (uint32_t)_mm256_movemask_ps(_mm256_cmp_ps(lo, xv, _CMP_LT_OQ))
                 | (uint32_t)_mm256_movemask_ps(_mm256_cmp_ps(hi, xv, _CMP_LT_OQ)) << 8;
  return (uint32_t)__builtin_popcount(m);
}
/* the same for u[0..15] */
static inline __attribute__((always_inline)) TC_ATTR uint32_t FN(count16)(const TC_XT *u, const TC_XT x,
                                                                           const int strict) {
  const float *uf = (const float *)u;
  return FN(count16v)(_mm256_loadu_ps(uf), _mm256_loadu_ps(uf + 8), x, strict);
}
#endif

#if TC_QVEC && !defined(TC_COUNT16F_ONCE)
#define TC_COUNT16F_ONCE
/* how many of the float32 values u[0..15] are below x (NaN u or x: none) */
static inline __attribute__((always_inline)) TC_ATTR uint32_t tc_count16f(const float *u, const float x) {
  const __m256 xv = _mm256_set1_ps(x);
  const uint32_t m = (uint32_t)_mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(u), xv, _CMP_LT_OQ))
                     | (uint32_t)_mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(u + 8), xv, _CMP_LT_OQ)) << 8;
  return (uint32_t)__builtin_popcount(m);
}
#endif

#if TC_QVEC && !defined(TC_QLANES_ONCE)
#define TC_QLANES_ONCE
/* float32 bins of 32 rows of one column, 8 rows a vector (the rows in lanes; see quantise).
 * u: the column's P sorted thresholds (NaN padding after them, at least one); lv: its level
 * tables (arrays_derived.py, quant_levels): lv[0..6] every g1-th threshold u[g1 i + g1 - 1] (g1 = P / 8),
 * lv[8 + 8 j + b] = u[g1 b + g2 j + g2 - 1] (g2 = max(g1 / 8, 1), j < g1 / g2 - 1).
 *   level 1: b1 = how many of lv[0..6] send x right (7 broadcast compares; lv[7] would be
 *            u[P - 1], padding): every threshold of the first b1 g1-groups does, so
 *            g1 b1 <= bin < g1 b1 + g1;
 *   level 2: the same within group b1, its every g2-th threshold picked per lane by a
 *            permute of table j (8 entries, indexed by b1);
 *   level 3: a binary search within the g2-group left (P = 128: 1 step, 256: 2), each step
 *            a gather of each lane's threshold.
 * Right at u is (u <= x) for "<" (strict), (u < x) for "<="; NaN u or x: never. Same counts
 * as the binary search below, so the same bins.
 * Measured (one process, against the two-level count per value below): XGBoost binary 0.93x-
 * 0.97x the time, sklearn GB 0.90x-0.97x. With each row's value gathered from the row-major
 * block instead of read from the transposed one (tc_xpose), 1.09x *slower*: the gathers of
 * 8 rows' values cost more than the counting saves. The level-3 gathers (P = 128, 256) are now most of the quantiser's time;
 * trading one of them for 8 more level-2 tables (15, g2 = g1 / 16) measured no gain (XGBoost
 * binary 0.99x the time, LightGBM 1.02x, HGB 0.96x, GB 1.07x: noise either way).
 * d64: float64 rows; u and lv then hold the thresholds rounded to float32 and v the rows
 * rounded, and the count is the float64 path's first guess (below: always u < x, then a climb
 * by exact double compares against ud, each lane's x at xd; NaN padding ends the climb).
 * Against that per-value guess, one process: HGB 0.91x-0.93x the time, LightGBM 0.95x. */
#define TC_QLCMP(t, x) (s ? _mm256_cmp_ps((t), (x), _CMP_LE_OQ) : _mm256_cmp_ps((t), (x), _CMP_LT_OQ))
static inline __attribute__((always_inline)) TC_ATTR __m256i tc_qlanes8(
    const float *u, const float *lv, const __m256 v, __m256i nanc, const int P, const int strict,
    const double *ud, const double *xd, const int d64) {
  const int g1 = P / 8, g2 = g1 / 8 > 1 ? g1 / 8 : 1, s = d64 ? 0 : strict;
  __m256i b1 = _mm256_setzero_si256();
#pragma GCC unroll 8
  for (int i = 0; i < 7; ++i)  /* a compare is -1: subtracting counts */
    b1 = _mm256_sub_epi32(b1, _mm256_castps_si256(TC_QLCMP(_mm256_broadcast_ss(lv + i), v)));
  __m256i b2 = _mm256_setzero_si256();
#pragma GCC unroll 8
  for (int j = 0; j < g1 / g2 - 1; ++j)
    b2 = _mm256_sub_epi32(b2, _mm256_castps_si256(TC_QLCMP(
             _mm256_permutevar8x32_ps(_mm256_loadu_ps(lv + 8 + 8 * j), b1), v)));
  __m256i p = _mm256_add_epi32(_mm256_mullo_epi32(b1, _mm256_set1_epi32(g1)),
                               _mm256_mullo_epi32(b2, _mm256_set1_epi32(g2)));
#pragma GCC unroll 4
  for (int h = g2 / 2; h; h /= 2) {
    const __m256 t = _mm256_i32gather_ps(u + h - 1, p, 4);
    p = _mm256_add_epi32(p, _mm256_and_si256(_mm256_castps_si256(TC_QLCMP(t, v)), _mm256_set1_epi32(h)));
  }
  if (d64) {  /* usually no step: one gather of each lane's next threshold, a compare */
    const __m256d x0 = _mm256_load_pd(xd), x1 = _mm256_load_pd(xd + 4);
    const __m256i lo = _mm256_setr_epi32(0, 2, 4, 6, 0, 2, 4, 6);  /* a qword's low dword */
    __m128i p0 = _mm256_castsi256_si128(p), p1 = _mm256_extracti128_si256(p, 1);
    for (;;) {
      const __m256d t0 = _mm256_i32gather_pd(ud, p0, 8), t1 = _mm256_i32gather_pd(ud, p1, 8);
      const __m256d m0 = strict ? _mm256_cmp_pd(t0, x0, _CMP_LE_OQ) : _mm256_cmp_pd(t0, x0, _CMP_LT_OQ);
      const __m256d m1 = strict ? _mm256_cmp_pd(t1, x1, _CMP_LE_OQ) : _mm256_cmp_pd(t1, x1, _CMP_LT_OQ);
      if (!(_mm256_movemask_pd(m0) | _mm256_movemask_pd(m1))) break;
      p0 = _mm_sub_epi32(p0, _mm256_castsi256_si128(_mm256_permutevar8x32_epi32(_mm256_castpd_si256(m0), lo)));
      p1 = _mm_sub_epi32(p1, _mm256_castsi256_si128(_mm256_permutevar8x32_epi32(_mm256_castpd_si256(m1), lo)));
    }
    p = _mm256_inserti128_si256(_mm256_castsi128_si256(p0), p1, 1);
  }
  return _mm256_blendv_epi8(p, nanc, _mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_UNORD_Q)));
}

/* x: the column's feature in the first 32-row group of xq (see tc_xpose), groups xs floats
 * apart (d64: xd the same in doubles, xs doubles apart) */
static inline __attribute__((always_inline)) TC_ATTR void tc_qlanes(
    const float *u, const float *lv, const float *x, int64_t xs, int64_t nb, uint8_t *q,
    int64_t gs, uint32_t nan_code, const int P, const int strict, const double *ud,
    const double *xd, const int d64) {
  const __m256i nanc = _mm256_set1_epi32((int32_t)nan_code);
  for (int64_t r = 0; r + 32 <= nb; r += 32) {
    const float *xr = x + (r >> 5) * xs;
    const double *dr = d64 ? xd + (r >> 5) * xs : 0;
#define TC_QL8(o) tc_qlanes8(u, lv, _mm256_load_ps(xr + (o)), nanc, P, strict, ud, d64 ? dr + (o) : 0, d64)
    const __m256i p0 = TC_QL8(0), p1 = TC_QL8(8), p2 = TC_QL8(16), p3 = TC_QL8(24);
#undef TC_QL8
    /* dwords (all <= 255) to bytes: the packs interleave 128-bit lanes, a permute undoes it */
    const __m256i w = _mm256_packus_epi16(_mm256_packus_epi32(p0, p1), _mm256_packus_epi32(p2, p3));
    const __m256i b = _mm256_permutevar8x32_epi32(w, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    _mm256_store_si256((__m256i *)(q + TC_QOFF(r)), _mm256_xor_si256(b, _mm256_set1_epi8((char)0x80)));
  }
}
#undef TC_QLCMP

#define TC_QLANES_CASE(PP)                                                                    \
  case PP:                                                                                    \
    if (ud && strict) tc_qlanes(u, lv, x, xs, nb, q, gs, nan_code, PP, 1, ud, xd, 1);        \
    else if (ud) tc_qlanes(u, lv, x, xs, nb, q, gs, nan_code, PP, 0, ud, xd, 1);              \
    else if (strict) tc_qlanes(u, lv, x, xs, nb, q, gs, nan_code, PP, 1, 0, 0, 0);            \
    else tc_qlanes(u, lv, x, xs, nb, q, gs, nan_code, PP, 0, 0, 0, 0);                        \
    return 1;
/* the rows-in-lanes quantiser over a column's whole 32-row groups (ud: float64 rows, see
 * tc_qlanes8); 0: P not handled */
static TC_ATTR int tc_qlanes_col(const float *u, const float *lv, const float *x, int64_t xs,
                                 int64_t nb, uint8_t *q, int64_t gs, uint32_t nan_code, int P,
                                 int strict, const double *ud, const double *xd) {
  switch (P) {
    TC_QLANES_CASE(16) TC_QLANES_CASE(32) TC_QLANES_CASE(64) TC_QLANES_CASE(128)
    TC_QLANES_CASE(256)
    default: return 0;
  }
}
#undef TC_QLANES_CASE

/* a column of the other NaN direction (q_src) over whole 32-row groups (nr rows): the
 * source column's bytes p with NaN rows' bytes replaced by nan_code; x as tc_qlanes' (the
 * feature's rows, 32 a group, groups xs floats apart). Against the scalar copy per row that
 * remains for the rest, one process: HGB (16 such columns of 36) 0.92x-0.96x the time, XGBoost
 * depth 8 with missing values (30 of 66) 0.91x, LightGBM (50 of 100) 0.95x. */
static TC_ATTR void tc_qsame(const float *x, int64_t xs, int64_t nr, const uint8_t *p, uint8_t *q,
                             int64_t gs, uint8_t nan_code) {
  const __m256i nc = _mm256_set1_epi8((char)nan_code);
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  for (int64_t g = 0; g < nr; g += 32, x += xs) {
    __m256i m[4];  /* -1 where NaN */
    for (int i = 0; i < 4; ++i) {
      const __m256 v = _mm256_load_ps(x + 8 * i);
      m[i] = _mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_UNORD_Q));
    }
    /* dwords to bytes by two saturating packs, which leave (per 128-bit lane) rows 0-3 8-11
     * 16-19 24-27 | 4-7 12-15 20-23 28-31 a dword each: a dword permute puts them in order */
    const __m256i mb = _mm256_permutevar8x32_epi32(
        _mm256_packs_epi16(_mm256_packs_epi32(m[0], m[1]), _mm256_packs_epi32(m[2], m[3])), order);
    _mm256_store_si256((__m256i *)(q + TC_QOFF(g)),
                       _mm256_blendv_epi8(_mm256_load_si256((const __m256i *)(p + TC_QOFF(g))), nc, mb));
  }
}

/* the block's whole 32-row groups transposed for tc_qlanes: xq + g * 32 * nf + f * 32 holds
 * feature f of rows 32 g .. 32 g + 31 (8 x 8 tiles: two unpacks, a shuffle and a lane permute
 * per output vector; only floats move). Only features some column reads (xu: a flag per 4
 * features): on wide rows few of which a small model uses, transposing all of them cost up to
 * 7x the walk (5 trees over 200 features). */
static TC_ATTR void tc_xpose(const float *x, int64_t nf, int64_t nb, float *xq, const uint8_t *xu) {
  for (int64_t r = 0; r + 32 <= nb; r += 32) {
    float *xg = xq + r * nf;
    for (int64_t i = 0; i < 32; i += 8) {
      const float *xr = x + (r + i) * nf;
      int64_t f = 0;
      for (; f + 8 <= nf; f += 8) {
        if (!(xu[f >> 2] | xu[(f >> 2) + 1])) continue;  /* no column reads these 8 */
        __m256 a[8], b[8];
        for (int k = 0; k < 8; ++k) a[k] = _mm256_loadu_ps(xr + k * nf + f);
        for (int k = 0; k < 8; k += 2) {
          b[k] = _mm256_unpacklo_ps(a[k], a[k + 1]);
          b[k + 1] = _mm256_unpackhi_ps(a[k], a[k + 1]);
        }
        a[0] = _mm256_shuffle_ps(b[0], b[2], 0x44); a[1] = _mm256_shuffle_ps(b[0], b[2], 0xEE);
        a[2] = _mm256_shuffle_ps(b[1], b[3], 0x44); a[3] = _mm256_shuffle_ps(b[1], b[3], 0xEE);
        a[4] = _mm256_shuffle_ps(b[4], b[6], 0x44); a[5] = _mm256_shuffle_ps(b[4], b[6], 0xEE);
        a[6] = _mm256_shuffle_ps(b[5], b[7], 0x44); a[7] = _mm256_shuffle_ps(b[5], b[7], 0xEE);
        for (int k = 0; k < 4; ++k) {  /* a[k]: features f + k (low lane), f + 4 + k (high) */
          _mm256_store_ps(xg + (f + k) * 32 + i, _mm256_permute2f128_ps(a[k], a[k + 4], 0x20));
          _mm256_store_ps(xg + (f + 4 + k) * 32 + i, _mm256_permute2f128_ps(a[k], a[k + 4], 0x31));
        }
      }
      for (; f < nf; ++f)
        if (xu[f >> 2])
          for (int k = 0; k < 8; ++k) xg[f * 32 + i + k] = xr[k * nf + f];
    }
  }
}

/* float64 rows' whole 32-row groups transposed like tc_xpose, twice: exact into xd, rounded to
 * float32 into xq (vcvtpd2ps: to nearest, as the scalar cast); 4 x 4 tiles */
static TC_ATTR void tc_xpose64(const double *x, int64_t nf, int64_t nb, float *xq, double *xd,
                               const uint8_t *xu) {
  for (int64_t r = 0; r + 32 <= nb; r += 32) {
    float *xg = xq + r * nf;
    double *dg = xd + r * nf;
    for (int64_t i = 0; i < 32; i += 4) {
      const double *xr = x + (r + i) * nf;
      int64_t f = 0;
      for (; f + 4 <= nf; f += 4) {
        if (!xu[f >> 2]) continue;
        const __m256d a0 = _mm256_loadu_pd(xr + f), a1 = _mm256_loadu_pd(xr + nf + f);
        const __m256d a2 = _mm256_loadu_pd(xr + 2 * nf + f), a3 = _mm256_loadu_pd(xr + 3 * nf + f);
        const __m256d t0 = _mm256_unpacklo_pd(a0, a1), t1 = _mm256_unpackhi_pd(a0, a1);
        const __m256d t2 = _mm256_unpacklo_pd(a2, a3), t3 = _mm256_unpackhi_pd(a2, a3);
        const __m256d c[4] = {_mm256_permute2f128_pd(t0, t2, 0x20), _mm256_permute2f128_pd(t1, t3, 0x20),
                              _mm256_permute2f128_pd(t0, t2, 0x31), _mm256_permute2f128_pd(t1, t3, 0x31)};
        for (int k = 0; k < 4; ++k) {
          _mm256_store_pd(dg + (f + k) * 32 + i, c[k]);
          _mm_store_ps(xg + (f + k) * 32 + i, _mm256_cvtpd_ps(c[k]));
        }
      }
      for (; f < nf; ++f)
        if (xu[f >> 2])
          for (int k = 0; k < 4; ++k) {
            dg[f * 32 + i + k] = xr[k * nf + f];
            xg[f * 32 + i + k] = (float)xr[k * nf + f];
          }
    }
  }
}
#endif

#if TC_QVEC == 2
/* ---- one row's bins (AVX-512; few rows: TC_ZQ1_ROWS) -----------------------------------------
 * Float32 rows (TC_ZQ1_COUNT, the default): per column, branch-free, the level table's every
 * P / 8-th threshold counted by one compare, then the P / 8 thresholds of the group left by
 * (at most two) masked 16-wide compares (zq1c). Float64 rows: sixteen (eight) columns a
 * vector, each lane a binary search of its own table, one gather a step, up to eight vectors'
 * steps interleaved (zq1). Both give the bins of the per-row code below bit for bit (right at
 * u: u <= x for "<", u < x for "<="; NaN u, the padding, or NaN x: never); NaN rows take the
 * column's q_nanc; category codes (q_kind) and tables past int32 offsets go through qcol1.
 * Measured, one row of the 500-tree XGBoost binary model (Zen 4 guest, loaded, paired against
 * the per-column code that branched on each column's kind and table length, ~30 cycles a
 * column, 0.43 us of a 1.43 us kernel): kernel 1.18x-1.21x with the count; the interleaved
 * gathers for float32 too 0.93x the count's speed. */
#ifndef TC_ZQ1_ROWS
#define TC_ZQ1_ROWS 16
#endif
/* column c's byte for the row x, as quantise stores it */
static inline TC_ATTR uint8_t FN(qcol1)(const tc_tables *T, int32_t c, const TC_XT *x, const int strict) {
  const TC_XT v = x[T->q_feat[c]];
  if (T->q_kind[c]) {  /* category codes, as quantise */
    const int rule = T->cat_rule;
    int valid = (rule == 1 ? v > (TC_XT)-1 : v >= 0) && v < (TC_XT)254;
    if (valid && rule == 2) valid = v == (TC_XT)(int32_t)v;
    return v != v ? 255 : valid ? (uint8_t)(int32_t)v : 254;
  }
  const TC_XT *u = (const TC_XT *)T->q_thr + T->q_off[c];
  uint32_t p = 0;
  for (uint32_t h = (uint32_t)T->q_len[c] >> 1; h; h >>= 1)
    p += (strict ? v >= u[p + h - 1] : v > u[p + h - 1]) ? h : 0;
  return v != v ? (uint8_t)(T->q_nanc[c] ^ 0x80) : (uint8_t)(p ^ 0x80);
}

#ifndef TC_ZQ1_COUNT
#define TC_ZQ1_COUNT 1
#endif
#if TC_ZQ1_COUNT
/* float32 rows: zq1 by the level table's two-level count per column (see above) */
static inline __attribute__((always_inline)) TC_ATTR void FN(zq1c)(const tc_tables *T, const float *x, uint8_t *out,
                                                                  int64_t os, const int strict, int32_t NC) {
  const float *thr = (const float *)T->q_thr;
  for (int32_t c = 0; c < NC; ++c) {
    if (T->q_kind[c]) {
      out[c * os] = FN(qcol1)(T, c, (const TC_XT *)x, strict);
      continue;
    }
    const float v = x[T->q_feat[c]];
    const uint32_t g1 = (uint32_t)T->q_len[c] >> 3;
    const __m256 x8 = _mm256_set1_ps(v), l1 = _mm256_loadu_ps(T->q_lvl + 64 * (int64_t)c);
    const uint32_t b1 = (uint32_t)__builtin_popcount((uint32_t)_mm256_movemask_ps(
        strict ? _mm256_cmp_ps(l1, x8, _CMP_LE_OQ) : _mm256_cmp_ps(l1, x8, _CMP_LT_OQ)));
    const float *g = thr + T->q_off[c] + g1 * b1;
    const __m512 xv = _mm512_set1_ps(v);
    const __mmask16 k0 = g1 >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << g1) - 1u);
    const __mmask16 k1 = g1 > 16 ? (__mmask16)0xFFFF : (__mmask16)0;
    const __m512 t0 = _mm512_maskz_loadu_ps(k0, g), t1 = _mm512_maskz_loadu_ps(k1, g + 16);
    const uint32_t n0 = (uint32_t)(strict ? _mm512_mask_cmp_ps_mask(k0, t0, xv, _CMP_LE_OQ)
                                          : _mm512_mask_cmp_ps_mask(k0, t0, xv, _CMP_LT_OQ));
    const uint32_t n1 = (uint32_t)(strict ? _mm512_mask_cmp_ps_mask(k1, t1, xv, _CMP_LE_OQ)
                                          : _mm512_mask_cmp_ps_mask(k1, t1, xv, _CMP_LT_OQ));
    const uint32_t p = g1 * b1 + (uint32_t)__builtin_popcount(n0) + (uint32_t)__builtin_popcount(n1);
    out[c * os] = v != v ? (uint8_t)(T->q_nanc[c] ^ 0x80) : (uint8_t)(p ^ 0x80);
  }
}
#endif

/* the bytes of columns c0 .. c0 + n - 1 (n <= 16) in b's low n bytes: stored (os 1: at once,
 * unless some lane is qcol1's), the copy lanes (cp) noted in cpm */
#define TC_ZQ1_OUT(c0, n, b, slow, cp)                                                          \
  do {                                                                                          \
    uint32_t sl_ = (slow);                                                                      \
    if (copy) cpm[(c0) >> 6] |= (uint64_t)(cp) << ((c0) & 63);                                  \
    if (os == 1 && !sl_) {                                                                      \
      _mm_mask_storeu_epi8(out + (c0), (__mmask16)((1u << (n)) - 1u), (b));                     \
    } else {                                                                                    \
      _Alignas(16) uint8_t tmp_[16];                                                            \
      _mm_store_si128((__m128i *)tmp_, (b));                                                    \
      for (; sl_; sl_ &= sl_ - 1u) {                                                            \
        const int j_ = __builtin_ctz(sl_);                                                      \
        tmp_[j_] = FN(qcol1)(T, (c0) + j_, x, strict);                                          \
      }                                                                                         \
      for (int j_ = 0; j_ < (n); ++j_) out[(int64_t)((c0) + j_) * os] = tmp_[j_];               \
    }                                                                                           \
  } while (0)

/* the row x's bytes of every column, column c at out[c * os] (os 1: a contiguous table of at
 * most 128 columns with 4 bytes to spare after it, as zrowsq reads; TC_QR: the block's layout,
 * out = qb + TC_QOFF(r)). Up to eight vectors of columns at once, their searches' steps
 * interleaved: a gather is many micro-ops on Zen 4, and one vector's eight dependent gathers
 * alone fill the reorder window, so vectors searched one after another would not overlap
 * (eight columns a vector that way measured 2x slower than the per-column code). In a
 * contiguous table a q_src column skips the search and copies its source's byte (a NaN-left
 * twin: the search once per feature), by a gather of the table's bytes once every column is
 * written; NaN rows take their own q_nanc there as elsewhere. */
static inline __attribute__((always_inline)) TC_ATTR void FN(zq1)(const tc_tables *T, const TC_XT *x,
                                                                 uint8_t *out, int64_t os, const int strict) {
  /* a contiguous table holds what zrowsq reads: with the column mux its first q_cmux columns
   * only (the merged columns' NaN-left twins after them are never read there) */
  const int32_t NC = os == 1 && T->q_cmux > 0 && T->q_cmux < T->q_ncols ? T->q_cmux : T->q_ncols;
#if TC_ZQ1_COUNT
  if (sizeof(TC_XT) == 4 && T->q_lvl) {
    FN(zq1c)(T, (const float *)x, out, os, strict, NC);
    return;
  }
#endif
  const int copy = os == 1 && NC <= 128;
  uint64_t cpm[2] = {0, 0};  /* copy: the columns to copy */
  const __m512i lim = _mm512_set1_epi64((int64_t)INT32_MAX - 256);  /* off + p + h - 1 fits */
  if (sizeof(TC_XT) == 4) {
    const float *u = (const float *)T->q_thr;
    for (int32_t cb = 0; cb < NC; cb += 128) {
      const int nv = NC - cb >= 128 ? 8 : (int)((NC - cb + 15) / 16);
      __m512i base[8], p[8], h[8];
      __m512 xv[8];
      __mmask16 kk[8], ss[8], cc[8];
      for (int v = 0; v < nv; ++v) {
        const int32_t c0 = cb + 16 * v;
        const int n = NC - c0 < 16 ? (int)(NC - c0) : 16;
        const __mmask16 k = n >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << n) - 1u);
        const __m512i o0 = _mm512_maskz_loadu_epi64((__mmask8)k, T->q_off + c0);
        const __m512i o1 = _mm512_maskz_loadu_epi64((__mmask8)(k >> 8), T->q_off + c0 + 8);
        const __m128i kind = _mm_maskz_loadu_epi8(k, T->q_kind + c0);
        const __mmask16 s = (__mmask16)((uint32_t)_mm512_cmpgt_epi64_mask(o0, lim)
                                        | (uint32_t)_mm512_cmpgt_epi64_mask(o1, lim) << 8)
                            | _mm_test_epi8_mask(kind, kind);
        const __mmask16 c = copy ? (__mmask16)(_mm512_mask_cmpge_epi32_mask(
                                       k, _mm512_maskz_loadu_epi32(k, T->q_src + c0), _mm512_setzero_si512()) & ~s)
                                 : (__mmask16)0;
        base[v] = _mm512_sub_epi32(
            _mm512_inserti64x4(_mm512_castsi256_si512(_mm512_cvtepi64_epi32(o0)), _mm512_cvtepi64_epi32(o1), 1),
            _mm512_set1_epi32(1));
        xv[v] = _mm512_mask_i32gather_ps(_mm512_setzero_ps(), k, _mm512_maskz_loadu_epi32(k, T->q_feat + c0),
                                         (const float *)x, 4);
        h[v] = _mm512_maskz_srli_epi32((__mmask16)(k & ~s & ~c), _mm512_maskz_loadu_epi32(k, T->q_len + c0), 1);
        p[v] = _mm512_setzero_si512();
        kk[v] = k, ss[v] = s, cc[v] = c;
      }
      for (int any = 1; any;) {  /* a step of every vector's search */
        any = 0;
        for (int v = 0; v < nv; ++v) {
          const __mmask16 m = _mm512_test_epi32_mask(h[v], h[v]);
          if (!m) continue;
          any = 1;
          const __m512 t = _mm512_mask_i32gather_ps(xv[v], m, _mm512_add_epi32(_mm512_add_epi32(base[v], p[v]), h[v]), u, 4);
          const __mmask16 r = strict ? _mm512_mask_cmp_ps_mask(m, t, xv[v], _CMP_LE_OQ)
                                     : _mm512_mask_cmp_ps_mask(m, t, xv[v], _CMP_LT_OQ);
          p[v] = _mm512_mask_add_epi32(p[v], r, p[v], h[v]);
          h[v] = _mm512_srli_epi32(h[v], 1);
        }
      }
      for (int v = 0; v < nv; ++v) {
        const int32_t c0 = cb + 16 * v;
        const int n = NC - c0 < 16 ? (int)(NC - c0) : 16;
        const __m512i nanc = _mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(kk[v], T->q_nanc + c0));
        const __mmask16 isnan = _mm512_cmp_ps_mask(xv[v], xv[v], _CMP_UNORD_Q);
        const __m128i b = _mm_xor_si128(_mm512_cvtepi32_epi8(_mm512_mask_blend_epi32(isnan, p[v], nanc)),
                                        _mm_set1_epi8((char)0x80));
        TC_ZQ1_OUT(c0, n, b, (uint32_t)(ss[v] & kk[v]), (uint32_t)(cc[v] & ~isnan));
      }
    }
  } else {
    const double *u = (const double *)T->q_thr;
    for (int32_t cb = 0; cb < NC; cb += 64) {
      const int nv = NC - cb >= 64 ? 8 : (int)((NC - cb + 7) / 8);
      __m256i base[8], p[8], h[8];
      __m512d xv[8];
      __mmask8 kk[8], ss[8], cc[8];
      for (int v = 0; v < nv; ++v) {
        const int32_t c0 = cb + 8 * v;
        const int n = NC - c0 < 8 ? (int)(NC - c0) : 8;
        const __mmask8 k = n >= 8 ? (__mmask8)0xFF : (__mmask8)((1u << n) - 1u);
        const __m512i o = _mm512_maskz_loadu_epi64(k, T->q_off + c0);
        const __m128i kind = _mm_maskz_loadu_epi8(k, T->q_kind + c0);
        const __mmask8 s = (__mmask8)(_mm512_cmpgt_epi64_mask(o, lim) | (__mmask8)_mm_test_epi8_mask(kind, kind));
        const __mmask8 c = copy ? (__mmask8)(_mm256_mask_cmpge_epi32_mask(
                                      k, _mm256_maskz_loadu_epi32(k, T->q_src + c0), _mm256_setzero_si256()) & ~s)
                                : (__mmask8)0;
        base[v] = _mm256_sub_epi32(_mm512_cvtepi64_epi32(o), _mm256_set1_epi32(1));
        xv[v] = _mm512_mask_i32gather_pd(_mm512_setzero_pd(), k, _mm256_maskz_loadu_epi32(k, T->q_feat + c0),
                                         (const double *)x, 8);
        h[v] = _mm256_maskz_srli_epi32((__mmask8)(k & ~s & ~c), _mm256_maskz_loadu_epi32(k, T->q_len + c0), 1);
        p[v] = _mm256_setzero_si256();
        kk[v] = k, ss[v] = s, cc[v] = c;
      }
      for (int any = 1; any;) {
        any = 0;
        for (int v = 0; v < nv; ++v) {
          const __mmask8 m = _mm256_test_epi32_mask(h[v], h[v]);
          if (!m) continue;
          any = 1;
          const __m512d t = _mm512_mask_i32gather_pd(xv[v], m, _mm256_add_epi32(_mm256_add_epi32(base[v], p[v]), h[v]), u, 8);
          const __mmask8 r = strict ? _mm512_mask_cmp_pd_mask(m, t, xv[v], _CMP_LE_OQ)
                                    : _mm512_mask_cmp_pd_mask(m, t, xv[v], _CMP_LT_OQ);
          p[v] = _mm256_mask_add_epi32(p[v], r, p[v], h[v]);
          h[v] = _mm256_srli_epi32(h[v], 1);
        }
      }
      for (int v = 0; v < nv; ++v) {
        const int32_t c0 = cb + 8 * v;
        const int n = NC - c0 < 8 ? (int)(NC - c0) : 8;
        const __m256i nanc = _mm256_cvtepu8_epi32(_mm_maskz_loadu_epi8(kk[v], T->q_nanc + c0));
        const __mmask8 isnan = _mm512_cmp_pd_mask(xv[v], xv[v], _CMP_UNORD_Q);
        const __m128i b = _mm_xor_si128(_mm256_cvtepi32_epi8(_mm256_mask_blend_epi32(isnan, p[v], nanc)),
                                        _mm_set1_epi8((char)0x80));
        TC_ZQ1_OUT(c0, n, b, (uint32_t)(ss[v] & kk[v]), (uint32_t)(cc[v] & ~isnan));
      }
    }
  }
  if (copy && (cpm[0] | cpm[1]))
    for (int32_t c0 = 0; c0 < NC; c0 += 16) {
      const __mmask16 m = (__mmask16)(cpm[c0 >> 6] >> (c0 & 63));
      if (!m) continue;
      const __m512i g = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), m,
                                                    _mm512_maskz_loadu_epi32(m, T->q_src + c0), out, 1);
      _mm_mask_storeu_epi8(out + c0, m, _mm512_cvtepi32_epi8(g));
    }
}
#undef TC_ZQ1_OUT
#endif

#if TC_QVEC == 2 && !defined(TC_ZQUANT_ONCE)
#define TC_ZQUANT_ONCE
/* ---- the AVX-512 batch quantiser of float32 rows (tc_zquant) -------------------------------
 * Rows in lanes, 16 a vector, over the block's 64-row groups: for each group, the features are
 * taken 16 at a time (a tile: 16 x 16 transposes of the rows' 64-byte pieces into a 4 KB
 * buffer that stays in the first-level cache) and every column of those features is binned
 * from the tile at once. No transposed copy of the block (tc_xpose) goes through memory: on
 * wide rows (968-2,000 features) writing that copy and reading it back cost more than the
 * binning.
 * A column's bins are those of the binary search in quantise (right at u: u <= x for "<",
 * u < x for "<="; the NaN padding never; NaN x takes q_nanc), bit for bit: P <= 32 (up to 31
 * thresholds, most columns of wide models) by that binary search itself, each step's
 * thresholds picked from the column's P thresholds held in one or two registers by a
 * permute; P >= 64 by the level tables' two counts (tc_qlanes8: how many of every P / 8-th
 * threshold, then of every g2-th within that group, send x right), then the binary search
 * within the g2-group left, its thresholds picked by permutes and blends of the column's P
 * thresholds (no gathers: 16-lane gathers cost about 18 cycles here). */
#define TC_ZCMP(t, v) (strict ? _mm512_cmp_ps_mask((t), (v), _CMP_LE_OQ) : _mm512_cmp_ps_mask((t), (v), _CMP_LT_OQ))
/* u[i] for each lane's i (0 <= i < P): a permute of each 32-threshold half-pair, then blends
 * by bits 5.. of i */
static inline __attribute__((always_inline)) TC_ATTR __m512 tc_zthr(const float *u, const __m512i i, const int P) {
  if (P == 16) return _mm512_permutexvar_ps(i, _mm512_loadu_ps(u));
  __m512 t[8];
#pragma GCC unroll 8
  for (int h = 0; h < P / 32; ++h)
    t[h] = _mm512_permutex2var_ps(_mm512_loadu_ps(u + 32 * h), i, _mm512_loadu_ps(u + 32 * h + 16));
#pragma GCC unroll 3
  for (int b = 0, n = P / 32; n > 1; ++b, n /= 2) {
    const __mmask16 m = _mm512_test_epi32_mask(i, _mm512_set1_epi32(32 << b));
#pragma GCC unroll 4
    for (int h = 0; h < n / 2; ++h) t[h] = _mm512_mask_blend_ps(m, t[2 * h], t[2 * h + 1]);
  }
  return t[0];
}
/* the bins (unbiased, one a dword lane) of 16 values v of a column of P thresholds u, level
 * tables lv (see tc_qlanes8) */
static inline __attribute__((always_inline)) TC_ATTR __m512i tc_zbins(const float *u, const float *lv,
                                                                        const __m512 v, const int P,
                                                                        const int strict) {
  __m512i p = _mm512_setzero_si512();
  int h = P / 2;
  if (P >= 64) {
    const int g1 = P / 8, g2 = g1 / 8 > 1 ? g1 / 8 : 1;
    const __m512i one = _mm512_set1_epi32(1);
    __m512i b1 = p, b2 = p;
#pragma GCC unroll 7
    for (int k = 0; k < 7; ++k)
      b1 = _mm512_mask_add_epi32(b1, TC_ZCMP(_mm512_set1_ps(lv[k]), v), b1, one);
#pragma GCC unroll 7
    for (int j = 0; j < g1 / g2 - 1; ++j)
      b2 = _mm512_mask_add_epi32(b2, TC_ZCMP(_mm512_permutexvar_ps(b1, _mm512_castps256_ps512(
                                                 _mm256_loadu_ps(lv + 8 + 8 * j))), v), b2, one);
    p = _mm512_add_epi32(_mm512_mullo_epi32(b1, _mm512_set1_epi32(g1)),
                         _mm512_mullo_epi32(b2, _mm512_set1_epi32(g2)));
    h = g2 / 2;
  }
#pragma GCC unroll 8
  for (; h; h /= 2) {
    const __m512 t = tc_zthr(u, _mm512_add_epi32(p, _mm512_set1_epi32(h - 1)), P);
    p = _mm512_mask_add_epi32(p, TC_ZCMP(t, v), p, _mm512_set1_epi32(h));
  }
  return p;
}
/* rows a pass of tc_zquant (16 or 32), and columns binned at once (their steps interleaved) */
#ifndef TC_ZQ_RZ
#define TC_ZQ_RZ 16
#endif
#define TC_ZQ_NV (TC_ZQ_RZ / 16)
#ifndef TC_ZQ_NC
#define TC_ZQ_NC (4 / TC_ZQ_NV)
#endif
/* n columns of P = 16 or 32 thresholds (P a constant), TC_ZQ_RZ rows each: column i's
 * thresholds at u[i], its rows' values at xv[i], its bytes to q[i] (NaN: nanb[i]). The binary
 * search's first step compares the broadcast u[P / 2 - 1], the others pick each lane's
 * threshold from the column's P held in one or two registers by a permute; the n columns'
 * steps interleaved (a step's permute, compare and masked add take ~12 cycles in a chain). A
 * NaN value fails every compare, so its bin is 0: the NaN code is written only where some
 * column's is not 0 */
static inline __attribute__((always_inline)) TC_ATTR void tc_zcols(
    const float *const *u, const float *const *xv, uint8_t *const *q, const uint8_t *nanb,
    const int n, const int P, const int strict) {
  __m512 u0[TC_ZQ_NC], u1[TC_ZQ_NC], v[TC_ZQ_NC][TC_ZQ_NV];
  __m512i p[TC_ZQ_NC][TC_ZQ_NV];
#pragma GCC unroll 4
  for (int i = 0; i < n; ++i) {
    u0[i] = _mm512_loadu_ps(u[i]);
    if (P == 32) u1[i] = _mm512_loadu_ps(u[i] + 16);
    const __m512 t = _mm512_set1_ps(u[i][P / 2 - 1]);
#pragma GCC unroll 2
    for (int s = 0; s < TC_ZQ_NV; ++s) {
      v[i][s] = _mm512_load_ps(xv[i] + 16 * s);
      const __mmask16 m = strict ? _mm512_cmp_ps_mask(t, v[i][s], _CMP_LE_OQ)
                                 : _mm512_cmp_ps_mask(t, v[i][s], _CMP_LT_OQ);
      p[i][s] = _mm512_maskz_mov_epi32(m, _mm512_set1_epi32(P / 2));
    }
  }
#pragma GCC unroll 4
  for (int h = P / 4; h; h /= 2) {
#pragma GCC unroll 4
    for (int i = 0; i < n; ++i) {
#pragma GCC unroll 2
      for (int s = 0; s < TC_ZQ_NV; ++s) {
        const __m512i j = _mm512_add_epi32(p[i][s], _mm512_set1_epi32(h - 1));
        const __m512 t = P == 16 ? _mm512_permutexvar_ps(j, u0[i]) : _mm512_permutex2var_ps(u0[i], j, u1[i]);
        const __mmask16 m = strict ? _mm512_cmp_ps_mask(t, v[i][s], _CMP_LE_OQ)
                                   : _mm512_cmp_ps_mask(t, v[i][s], _CMP_LT_OQ);
        p[i][s] = _mm512_mask_add_epi32(p[i][s], m, p[i][s], _mm512_set1_epi32(h));
      }
    }
  }
  int fix = 0;
#pragma GCC unroll 4
  for (int i = 0; i < n; ++i) fix |= nanb[i] != 0x80;
#pragma GCC unroll 4
  for (int i = 0; i < n; ++i) {
#pragma GCC unroll 2
    for (int s = 0; s < TC_ZQ_NV; ++s) {
      __m512i b = _mm512_xor_si512(p[i][s], _mm512_set1_epi32(0x80));
      if (fix)
        b = _mm512_mask_mov_epi32(b, _mm512_cmp_ps_mask(v[i][s], v[i][s], _CMP_UNORD_Q), _mm512_set1_epi32(nanb[i]));
      _mm_store_si128((__m128i *)(q[i] + 16 * s), _mm512_cvtepi32_epi8(b));
    }
  }
}
#define TC_ZCOLS(PP)                                                                          \
  switch (n) {                                                                                \
    case 1: tc_zcols(u, xv, q, nanb, 1, PP, strict); break;                                   \
    case 2: tc_zcols(u, xv, q, nanb, 2, PP, strict); break;                                   \
    case 3: tc_zcols(u, xv, q, nanb, 3, PP, strict); break;                                   \
    case 4: tc_zcols(u, xv, q, nanb, 4, PP, strict); break;                                   \
    default: break;                                                                           \
  }
static inline __attribute__((always_inline)) TC_ATTR void tc_zcolsn(
    const float *const *u, const float *const *xv, uint8_t *const *q, const uint8_t *nanb,
    const int n, const int P, const int strict) {
  if (P == 16) { TC_ZCOLS(16) }
  else { TC_ZCOLS(32) }
}
#undef TC_ZCOLS
/* a column of P >= 64 thresholds (level tables lv), TC_ZQ_RZ rows */
static __attribute__((noinline)) TC_ATTR void tc_zcolp(const float *u, const float *lv, const float *xv,
                                                       uint8_t *q, const uint8_t nanb, const int P,
                                                       const int strict) {
#define TC_ZCOLP_CASE(PP)                                                                     \
  if (P == PP || PP == 256) {                                                                 \
    for (int s = 0; s < TC_ZQ_NV; ++s) {                                                      \
      const __m512 v = _mm512_load_ps(xv + 16 * s);                                           \
      const __m512i p = strict ? tc_zbins(u, lv, v, PP, 1) : tc_zbins(u, lv, v, PP, 0);       \
      _mm_store_si128((__m128i *)(q + 16 * s), _mm512_cvtepi32_epi8(_mm512_mask_mov_epi32(    \
          _mm512_xor_si512(p, _mm512_set1_epi32(0x80)), _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q), \
          _mm512_set1_epi32(nanb))));                                                         \
    }                                                                                         \
    return;                                                                                   \
  }
  TC_ZCOLP_CASE(64) TC_ZCOLP_CASE(128) TC_ZCOLP_CASE(256)
#undef TC_ZCOLP_CASE
}
#undef TC_ZCMP

/* the tile: features f0 .. f0 + 15 of nr (<= TC_ZQ_RZ) rows at x (rows nf apart), transposed
 * into xt (feature f0 + j's rows at xt + TC_ZQ_RZ j; rows past nr and features past nf read
 * 0); and a prefetch of the rows' lines TC_ZQ_PF tiles ahead (the rows are far apart: no
 * hardware prefetcher follows that many) */
#ifndef TC_ZQ_PF
#define TC_ZQ_PF 2
#endif
static inline __attribute__((always_inline)) TC_ATTR void tc_ztile(const float *x, int64_t nf, int64_t nr,
                                                                     int64_t f0, float *xt) {
  const int64_t w = nf - f0 < 16 ? nf - f0 : 16;
  const __mmask16 fm = (__mmask16)((1u << w) - 1u);
  if (f0 + 16 * TC_ZQ_PF < nf)
    for (int64_t i = 0; i < nr; ++i) {
      const float *p = x + i * nf + f0 + 16 * TC_ZQ_PF;
      _mm_prefetch((const char *)p, _MM_HINT_T0);
      _mm_prefetch((const char *)(p + 15), _MM_HINT_T0);
    }
  for (int s = 0; s < TC_ZQ_NV; ++s) {
    __m512 a[16], b[16];
#pragma GCC unroll 16
    for (int i = 0; i < 16; ++i)
      a[i] = 16 * s + i < nr ? _mm512_maskz_loadu_ps(fm, x + (16 * s + i) * nf + f0) : _mm512_setzero_ps();
    /* 16 x 16: pairs, quads (as doubles), then 128-bit lanes twice */
#pragma GCC unroll 8
    for (int i = 0; i < 16; i += 2) {
      b[i] = _mm512_unpacklo_ps(a[i], a[i + 1]);
      b[i + 1] = _mm512_unpackhi_ps(a[i], a[i + 1]);
    }
#pragma GCC unroll 4
    for (int i = 0; i < 16; i += 4) {
      a[i] = _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(b[i]), _mm512_castps_pd(b[i + 2])));
      a[i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(b[i]), _mm512_castps_pd(b[i + 2])));
      a[i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(b[i + 1]), _mm512_castps_pd(b[i + 3])));
      a[i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(b[i + 1]), _mm512_castps_pd(b[i + 3])));
    }
    /* a[4 q + j] (q: rows 4q .. 4q + 3): feature j + 4 l in its 128-bit lane l */
    float *o = xt + 16 * s;
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) {
      const __m512 r01 = _mm512_shuffle_f32x4(a[j], a[4 + j], 0x44);   /* lanes 0 1 of q0, q1 */
      const __m512 r23 = _mm512_shuffle_f32x4(a[8 + j], a[12 + j], 0x44);
      const __m512 s01 = _mm512_shuffle_f32x4(a[j], a[4 + j], 0xEE);   /* lanes 2 3 */
      const __m512 s23 = _mm512_shuffle_f32x4(a[8 + j], a[12 + j], 0xEE);
      _mm512_store_ps(o + TC_ZQ_RZ * j, _mm512_shuffle_f32x4(r01, r23, 0x88));
      _mm512_store_ps(o + TC_ZQ_RZ * (j + 4), _mm512_shuffle_f32x4(r01, r23, 0xDD));
      _mm512_store_ps(o + TC_ZQ_RZ * (j + 8), _mm512_shuffle_f32x4(s01, s23, 0x88));
      _mm512_store_ps(o + TC_ZQ_RZ * (j + 12), _mm512_shuffle_f32x4(s01, s23, 0xDD));
    }
  }
}

/* every numeric column (q_kind 0) of the nb rows at xb into qb (64-row groups gs bytes apart;
 * a short last group's rows past nb get some valid byte, as the walks drop them), TC_ZQ_RZ
 * rows at a time (rows far apart in memory at once: 64 strained the TLB and the prefetches),
 * up to TC_ZQ_NC columns of P <= 32 at once. NaN-twin columns (q_src) copy their source's
 * bytes but for NaN rows. Category columns: quantise. */
static inline __attribute__((always_inline)) TC_ATTR void tc_zquant_s(
    const tc_tables *T, const float *xb, int64_t nf, int64_t nb, uint8_t *qb, int64_t gs, const int strict) {
  _Alignas(64) float xt[16 * TC_ZQ_RZ];
  const float *thr = (const float *)T->q_thr;
  /* columns waiting, by P (16, 32): their thresholds, values, bytes, NaN codes */
  const float *bu[2][TC_ZQ_NC], *bx[2][TC_ZQ_NC];
  uint8_t *bq[2][TC_ZQ_NC], bn[2][TC_ZQ_NC];
  for (int64_t r0 = 0; r0 < nb; r0 += TC_ZQ_RZ) {
    const int64_t nr = nb - r0 < TC_ZQ_RZ ? nb - r0 : TC_ZQ_RZ;
    uint8_t *qg = qb + TC_QOFF(r0);
    int64_t f0 = -16;
    int n0 = 0, n1 = 0;  /* (of the tile in xt) */
#define TC_ZQ_FLUSH                                                                           \
    tc_zcolsn(bu[0], bx[0], bq[0], bn[0], n0, 16, strict);                                    \
    tc_zcolsn(bu[1], bx[1], bq[1], bn[1], n1, 32, strict);                                    \
    n0 = n1 = 0;
    for (int32_t c = 0; c < T->q_ncols; ++c) {
      if (T->q_kind[c]) continue;
      const int64_t f = T->q_feat[c];
      if (f < f0 || f >= f0 + 16) {
        TC_ZQ_FLUSH
        f0 = f & ~(int64_t)15;
        tc_ztile(xb + r0 * nf, nf, nr, f0, xt);
      }
      const float *xv = xt + TC_ZQ_RZ * (f - f0);
      uint8_t *q = qg + 64 * (int64_t)c;
      const uint8_t nanb = (uint8_t)(T->q_nanc[c] ^ 0x80);
      if (T->q_src[c] >= 0) {
        TC_ZQ_FLUSH  /* (its source may be waiting) */
        const uint8_t *p = qg + 64 * (int64_t)T->q_src[c];
        for (int s = 0; s < TC_ZQ_NV; ++s) {
          const __m512 v = _mm512_load_ps(xv + 16 * s);
          _mm_store_si128((__m128i *)(q + 16 * s), _mm_mask_blend_epi8(
              _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q), _mm_load_si128((const __m128i *)(p + 16 * s)),
              _mm_set1_epi8((char)nanb)));
        }
        continue;
      }
      const int P = T->q_len[c];
      const float *u = thr + T->q_off[c];
      if (P > 32) {
        tc_zcolp(u, T->q_lvl + 64 * (int64_t)c, xv, q, nanb, P, strict);
      } else if (P == 16) {
        bu[0][n0] = u; bx[0][n0] = xv; bq[0][n0] = q; bn[0][n0] = nanb;
        if (++n0 == TC_ZQ_NC) { tc_zcolsn(bu[0], bx[0], bq[0], bn[0], n0, 16, strict); n0 = 0; }
      } else {
        bu[1][n1] = u; bx[1][n1] = xv; bq[1][n1] = q; bn[1][n1] = nanb;
        if (++n1 == TC_ZQ_NC) { tc_zcolsn(bu[1], bx[1], bq[1], bn[1], n1, 32, strict); n1 = 0; }
      }
    }
    TC_ZQ_FLUSH
#undef TC_ZQ_FLUSH
  }
}
static TC_ATTR void tc_zquant(const tc_tables *T, const float *xb, int64_t nf, int64_t nb,
                              uint8_t *qb, int64_t gs, const int strict) {
  if (strict) tc_zquant_s(T, xb, nf, nb, qb, gs, 1);
  else tc_zquant_s(T, xb, nf, nb, qb, gs, 0);
}
#endif

#if TC_QVEC == 2
/* does the AVX-512 batch quantiser (tc_zquant) take a float32 block of these tables: from
 * TC_ZQ_MINCOLS columns, or where most columns have at most 32 thresholds. Below, columns of
 * 64-256 thresholds keep the rows-in-lanes quantiser over the transposed block (tc_qlanes),
 * which its level-3 gathers aside measured as fast or faster there (paired in one process:
 * CatBoost binary, 50 columns of up to 254 borders, 0.94x-0.95x the speed through tc_zquant;
 * the 90-column XGBoost regression of 128-256 thresholds a column 1.25x through it against
 * 1.16x without it, both with the 64-row node mux) */
#ifndef TC_ZQ_MINCOLS
#define TC_ZQ_MINCOLS 64
#endif
#ifndef TC_ZQ_MINROWS
#define TC_ZQ_MINROWS 8 /* (TC_QVEC_MIN: the rows from which a block is cleared before binning) */
#endif
static inline __attribute__((always_inline)) TC_ATTR int FN(zquant_pays)(const tc_tables *T) {
  if (T->q_ncols >= TC_ZQ_MINCOLS) return 1;
  int32_t small = 0;
  for (int32_t c = 0; c < T->q_ncols; ++c) small += T->q_len[c] <= 32;
  return 2 * small >= T->q_ncols;
}
#endif

/* rq: where the few-row walk reads a contiguous table of each row (zrowsq: 128 bytes a row), or
 * NULL */
static inline __attribute__((always_inline)) TC_ATTR void FN(quantise)(
    const tc_tables *T, const TC_XT *xb, int64_t nb, uint8_t *qb, int64_t gs, float *xq,
    double *xd, const uint8_t *xu, const int strict, uint8_t *rq) {
  const int64_t nf = T->n_features;
#if TC_QVEC == 2
  /* float32 rows: every numeric column by tc_zquant (category columns below), from
   * TC_ZQ_MINROWS rows; fewer rows, or float64 rows (or tables it does not pay for) below
   * TC_ZQ1_ROWS, a vector of columns at a time (zq1). From 8 rows the lane quantiser costs
   * less than 8 rows' zq1 passes (paired in one process, Zen 4 guest, 2026-11-28, a call of
   * 8 / 12 / 15 rows, quantiser and byte walk: 968 columns 2.0x / 2.5x / 2.9x, 1,631 columns
   * 2.4x / 3.3x / 3.8x, 90 columns 1.2x / 1.2x / 1.3x, xgb-binary's 50 1.01x) */
  const int zq = nb >= TC_ZQ_MINROWS && sizeof(TC_XT) == 4 && T->q_lvl && FN(zquant_pays)(T);
  if (nb < TC_ZQ1_ROWS && !zq) {  /* few rows: a vector of columns at a time (zq1) */
    for (int64_t r = 0; r < nb; ++r) {
      if (rq) FN(zq1)(T, xb + r * nf, rq + 128 * r, 1, strict);
      else FN(zq1)(T, xb + r * nf, qb + TC_QOFF(r), TC_QR, strict);
    }
    return;
  }
  (void)rq;
  if (zq) tc_zquant(T, (const float *)xb, nf, nb, qb, gs, strict);
#else
  (void)rq;
  const int zq = 0;
#endif
#if TC_QVEC
  if (xq && nb >= 32 && !zq) {
    if (sizeof(TC_XT) == 4) tc_xpose((const float *)xb, nf, nb, xq, xu);
    else tc_xpose64((const double *)xb, nf, nb, xq, xd, xu);
  }
#endif
#if TC_QARM
  if (xq && nb >= 32) {
    if (sizeof(TC_XT) == 4) tc_nxpose((const float *)xb, nf, nb, xq, xu);
    else tc_nxpose64((const double *)xb, nf, nb, xq, xd, xu);
  }
#endif
  const TC_XT *thr = (const TC_XT *)T->q_thr;
  for (int32_t c = 0; c < T->q_ncols; ++c) {
    const TC_XT *u = thr + T->q_off[c];
    const uint32_t P = (uint32_t)T->q_len[c];
    const uint8_t nan_code = (uint8_t)(T->q_nanc[c] ^ 0x80);
    const TC_XT *x = xb + T->q_feat[c];
    uint8_t *q = qb + (int64_t)c * TC_QR;
#define TC_QAT(r) q[TC_QOFF(r)]
    int64_t r = 0;
    if (zq && !T->q_kind[c]) continue;
    if (T->q_kind[c]) {
      /* category codes: a valid value below 254 is its category (trunc, like the float walk's
       * cast), any other value 254, NaN 255; cat_byte_sets maps them per node */
      const int rule = T->cat_rule;
      for (; r < nb; ++r) {
        const TC_XT v = x[r * nf];
        int valid = (rule == 1 ? v > (TC_XT)-1 : v >= 0) && v < (TC_XT)254;
        if (valid && rule == 2) valid = v == (TC_XT)(int32_t)v;
        TC_QAT(r) = v != v ? 255 : valid ? (uint8_t)(int32_t)v : 254;
      }
      continue;
    }
    if (T->q_src[c] >= 0) {
      /* an earlier column has the same feature and thresholds (the other NaN direction):
       * copy its bins, only NaN's code differs */
      const uint8_t *p = qb + (int64_t)T->q_src[c] * TC_QR;
#if TC_QVEC
      if (xq && nb >= 32) {  /* whole 32-row groups from the transposed block (a float64 NaN
                              * rounds to a float32 NaN, anything else to a non-NaN) */
        r = nb & ~(int64_t)31;
        tc_qsame(xq + 32 * T->q_feat[c], 32 * nf, r, p, q, gs, nan_code);
      }
#endif
#if TC_QARM
      if (xq && nb >= 32) {
        r = nb & ~(int64_t)31;
        tc_nqsame(xq + 32 * T->q_feat[c], 32 * nf, r, p, q, gs, nan_code);
      }
#endif
      for (; r < nb; ++r) {
        const TC_XT v = x[r * nf];
        TC_QAT(r) = v != v ? nan_code : p[TC_QOFF(r)];
      }
      continue;
    }
#if TC_QARM
    r = FN(nquant_col)(T, c, x, nf, nb, q, gs, xq, xd, nan_code, strict);
#endif
#if TC_QVEC
    if (xq && nb >= 32 &&
        tc_qlanes_col(sizeof(TC_XT) == 4 ? (const float *)u : T->q_thr32 + T->q_off[c],
                      T->q_lvl + 64 * c, xq + 32 * T->q_feat[c], 32 * nf, nb, q, gs,
                      (uint32_t)(nan_code ^ 0x80), (int)P, strict,
                      sizeof(TC_XT) == 8 ? (const double *)u : 0, xd ? xd + 32 * T->q_feat[c] : 0))
      r = nb & ~(int64_t)31;  /* the rows of a short last group: one at a time below */
    if (P >= 16 && sizeof(TC_XT) == 4) {
      /* (rows of a short last group; float32 rows of blocks below 32 rows) two levels of 16:
       * the coarse compare against every 16th threshold (u[16i + 15]) says
       * how many whole 16-blocks send x right; one more compare counts inside the next block.
       * The last entry u[P - 1] is padding, so the coarse count stays below P / 16.
       * float32 only: for float64 the same in doubles (8 compares and movemasks a level) lost
       * to the four interleaved binary searches below (500 LightGBM trees of 63 leaves, 50
       * float64 features: 1,549 -> 1,453 ns/row; 100 trees 787 -> 522; 20 trees 620 -> 261),
       * which in turn lose to the float32 guess that follows. Rows in lanes with a whole
       * binary search by gathers (8 rows a vector, 4 vectors at once, a gather per step):
       * 1.06x-1.08x slower than this (XGBoost binary, sklearn GB); tc_qlanes (levels by
       * broadcasts and permutes, at most 2 gathers) is faster, and takes whole 32-row groups. */
      /* every 16th threshold, NaN past the P / 16 of them (none needed for P = 16): two
       * masked gathers, not 16 scalar copies per call (a single row's quantiser paid those
       * for every column) */
      if (P >= 64 && T->q_lvl && r < nb) {
        /* few rows, P >= 64: the level table's first 7 entries (every P / 8-th threshold,
         * tc_qlanes8) say how many whole P / 8-groups send x right, then the next group's
         * P / 8 thresholds are counted: two levels, no gathers */
        const __m256 l1 = _mm256_loadu_ps(T->q_lvl + 64 * c);
        const uint32_t g1 = P / 8;
        for (; r < nb; ++r) {
          const TC_XT v = x[r * nf];
          const __m256 xv = _mm256_set1_ps((float)v);
          const uint32_t b1 = (uint32_t)__builtin_popcount(
              (uint32_t)_mm256_movemask_ps(strict ? _mm256_cmp_ps(l1, xv, _CMP_LE_OQ)
                                                  : _mm256_cmp_ps(l1, xv, _CMP_LT_OQ)) & 0x7fu);
          const float *g = (const float *)u + g1 * b1;
          uint32_t p = g1 * b1;
          for (uint32_t k = 0; k < g1; k += 8) {
            const __m256 t = _mm256_loadu_ps(g + k);
            p += (uint32_t)__builtin_popcount((uint32_t)_mm256_movemask_ps(
                strict ? _mm256_cmp_ps(t, xv, _CMP_LE_OQ) : _mm256_cmp_ps(t, xv, _CMP_LT_OQ)));
          }
          TC_QAT(r) = v != v ? nan_code : (uint8_t)(p ^ 0x80);
        }
      }
      __m256 spl0 = _mm256_set1_ps(__builtin_nanf("")), spl1 = spl0;
      if (P > 16 && r < nb) {
        const __m256i k = _mm256_set1_epi32((int)(P / 16));
        const __m256i j0 = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
        const __m256i j1 = _mm256_add_epi32(j0, _mm256_set1_epi32(8));
        const __m256i s16 = _mm256_set1_epi32(16), s15 = _mm256_set1_epi32(15);
        spl0 = _mm256_mask_i32gather_ps(spl0, (const float *)u, _mm256_add_epi32(_mm256_mullo_epi32(j0, s16), s15),
                                        _mm256_castsi256_ps(_mm256_cmpgt_epi32(k, j0)), 4);
        spl1 = _mm256_mask_i32gather_ps(spl1, (const float *)u, _mm256_add_epi32(_mm256_mullo_epi32(j1, s16), s15),
                                        _mm256_castsi256_ps(_mm256_cmpgt_epi32(k, j1)), 4);
      }
      for (; r < nb; ++r) {
        const TC_XT v = x[r * nf];
        const uint32_t b1 = P > 16 ? FN(count16v)(spl0, spl1, v, strict) : 0;
        const uint32_t p = 16 * b1 + FN(count16)(u + 16 * b1, v, strict);
        TC_QAT(r) = v != v ? nan_code : (uint8_t)(p ^ 0x80);
      }
    }
    if (sizeof(TC_XT) == 8 && T->q_thr32) {
      /* (rows outside whole 32-row groups, see tc_qlanes8's d64) float64: a first guess in
       * float32, b' = #{j : (float)u_j < (float)x} by the two-level count above, then up by
       * exact double compares to b (usually no step). b' <= b:
       * rounding is monotone, so x <= u (or x < u) implies (float)x <= (float)u, which is not
       * counted; and the counted j form a prefix. The NaN padding at u[P - 1] ends the climb.
       * Against the binary search below, same tables, one process: 0.81x the time on HGB
       * (200 trees, 20 float64 features), 0.93x on LightGBM (500 trees, 50 features). */
      const float *u32 = T->q_thr32 + T->q_off[c];
      if (T->q_lvl && r < nb) {
        /* the same guess from the level table's first 7 entries (every P / 8-th threshold:
         * how many whole P / 8-groups lie below x), then the next group's P / 8 thresholds
         * counted, 8 a compare (not 16 coarse thresholds copied per call: a single row paid
         * that for every column; 500 LightGBM trees, 100 columns, one row, kernel time in
         * one process: 7.5 -> 6.7 us) */
        const __m256 l1 = _mm256_loadu_ps(T->q_lvl + 64 * c);
        const uint32_t g1 = P / 8;  /* P <= 32: the whole table counted */
        for (; r < nb; ++r) {
          const TC_XT v = x[r * nf];
          const float vf = (float)v;
          uint32_t p;
          if (P <= 32) {
            p = tc_count16f(u32, vf) + (P == 32 ? tc_count16f(u32 + 16, vf) : 0);
          } else {
            const __m256 xv = _mm256_set1_ps(vf);
            const uint32_t b1 = (uint32_t)__builtin_popcount(
                (uint32_t)_mm256_movemask_ps(_mm256_cmp_ps(l1, xv, _CMP_LT_OQ)) & 0x7fu);
            p = g1 * b1;
            for (uint32_t k = 0; k < g1; k += 8)  /* within the table: g1 b1 + g1 <= P */
              p += (uint32_t)__builtin_popcount((uint32_t)_mm256_movemask_ps(
                  _mm256_cmp_ps(_mm256_loadu_ps(u32 + g1 * b1 + k), xv, _CMP_LT_OQ)));
          }
          while (strict ? v >= u[p] : v > u[p]) ++p;
          TC_QAT(r) = v != v ? nan_code : (uint8_t)(p ^ 0x80);
        }
      }
      float spl[16];
      for (uint32_t i = 0; i < 16 && r < nb; ++i) spl[i] = i < P / 16 ? u32[16 * i + 15] : __builtin_nanf("");
      for (; r < nb; ++r) {
        const TC_XT v = x[r * nf];
        const float vf = (float)v;
        const uint32_t b1 = P > 16 ? tc_count16f(spl, vf) : 0;
        uint32_t p = 16 * b1 + tc_count16f(u32 + 16 * b1, vf);
        while (strict ? v >= u[p] : v > u[p]) ++p;
        TC_QAT(r) = v != v ? nan_code : (uint8_t)(p ^ 0x80);
      }
    }
#endif
    /* four rows at a time: independent searches overlap their load latencies */
    for (; r + 4 <= nb; r += 4) {
      const TC_XT v0 = x[(r + 0) * nf], v1 = x[(r + 1) * nf], v2 = x[(r + 2) * nf], v3 = x[(r + 3) * nf];
      uint32_t p0 = 0, p1 = 0, p2 = 0, p3 = 0;
      for (uint32_t h = P >> 1; h; h >>= 1) {
        /* padding entries are NaN: never "right", so the count stops at the real thresholds */
        p0 += (strict ? v0 >= u[p0 + h - 1] : v0 > u[p0 + h - 1]) ? h : 0;
        p1 += (strict ? v1 >= u[p1 + h - 1] : v1 > u[p1 + h - 1]) ? h : 0;
        p2 += (strict ? v2 >= u[p2 + h - 1] : v2 > u[p2 + h - 1]) ? h : 0;
        p3 += (strict ? v3 >= u[p3 + h - 1] : v3 > u[p3 + h - 1]) ? h : 0;
      }
      TC_QAT(r + 0) = v0 != v0 ? nan_code : (uint8_t)(p0 ^ 0x80);
      TC_QAT(r + 1) = v1 != v1 ? nan_code : (uint8_t)(p1 ^ 0x80);
      TC_QAT(r + 2) = v2 != v2 ? nan_code : (uint8_t)(p2 ^ 0x80);
      TC_QAT(r + 3) = v3 != v3 ? nan_code : (uint8_t)(p3 ^ 0x80);
    }
    for (; r < nb; ++r) {
      const TC_XT v = x[r * nf];
      uint32_t p = 0;
      for (uint32_t h = P >> 1; h; h >>= 1) p += (strict ? v >= u[p + h - 1] : v > u[p + h - 1]) ? h : 0;
      TC_QAT(r) = v != v ? nan_code : (uint8_t)(p ^ 0x80);
    }
#undef TC_QAT
  }
}

#if TC_QVEC && !defined(TC_QBYTES_ONCE)
/* The byte-only kernels depend on neither the input nor the accumulation dtype: defined once
 * per translation unit (not per instantiation), which keeps the kernel's build time down. */
#define TC_QBYTES_ONCE
/* vpblendvb reads only each mask byte's top bit: spelt in asm so that GCC does not turn a mask
 * used by several blends into a compare with zero first (it did: one vpcmpgtb per mask) */
static inline __attribute__((always_inline)) TC_ATTR __m256i tc_blendv(__m256i a, __m256i b, __m256i m) {
  __m256i r;
  __asm__("vpblendvb %3, %2, %1, %0" : "=x"(r) : "x"(a), "xm"(b), "x"(m));
  return r;
}
/* each row's byte of a table pl of max(16, 2^D) bytes, the row's index in kp (k4 = kp & 15):
 * 16 entries a vpshufb, blends by bits 4.. of kp (the heap walk's level thresholds, and the
 * leaf planes below) */
#define TC_QS1(i) _mm256_shuffle_epi8(_mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(pl + 16 * (i)))), k4)
#define TC_QS2(i) tc_blendv(TC_QS1(i), TC_QS1((i) + 1), b4)
#define TC_QS4(i) tc_blendv(TC_QS2(i), TC_QS2((i) + 2), b5)
#define TC_QS8(i) tc_blendv(TC_QS4(i), TC_QS4((i) + 4), b6)
#define TC_QS16(i) tc_blendv(TC_QS8(i), TC_QS8((i) + 8), b7)
static inline __attribute__((always_inline)) TC_ATTR __m256i tc_qplane(const uint8_t *pl, __m256i k4,
                                                                         __m256i kp, const int D) {
  const __m256i b4 = _mm256_slli_epi16(kp, 3), b5 = _mm256_slli_epi16(kp, 2);
  const __m256i b6 = _mm256_slli_epi16(kp, 1), b7 = kp;
  switch (D) {
    case 0: case 1: case 2: case 3: case 4: return TC_QS1(0);
    case 5: return TC_QS2(0);
    case 6: return TC_QS4(0);
    case 7: return TC_QS8(0);
    default: return TC_QS16(0);
  }
}
#undef TC_QS1
#undef TC_QS2
#undef TC_QS4
#undef TC_QS8
#undef TC_QS16

/* Level l's go-right vector: the 2^l nodes' column bytes muxed down to each row's own node's
 * byte by a balanced tree of blends spelt out by macros (straight-line code, at most l + 1
 * vectors live), compared once with the row's node's threshold byte. co[i] is node i's column
 * offset within the 32-row group (column * 32). Compare first and mux the 2^l results instead
 * (as before): the same blends plus 2^l compares and threshold broadcasts; measured in one
 * process, muxing the bytes takes 0.92x the time on XGBoost depth 6 (binary and 10 classes),
 * 0.74x on depth 8, 0.97x on sklearn GB depth 4. Blending by the oldest decision first instead
 * (each level's offsets stored bit-reversed so that the pair loads still apply), so that only
 * the last blend waits for the previous level's compare: 1.01x the time on XGBoost binary, 1.03x
 * on GB regressor (one process): the mux is bound by its loads and blends, not by that chain. */

#define TC_QX1(i) _mm256_load_si256((const __m256i *)(qg + TC_QCS * co[i]))
#define TC_QX2(i) tc_qx2(qg, co + (i), m0)
#define TC_QX4(i) tc_blendv(TC_QX2(i), TC_QX2((i) + 2), m1)
#define TC_QX8(i) tc_blendv(TC_QX4(i), TC_QX4((i) + 4), m2)
#define TC_QX16(i) tc_blendv(TC_QX8(i), TC_QX8((i) + 8), m3)
#define TC_QX32(i) tc_blendv(TC_QX16(i), TC_QX16((i) + 16), m4)
#define TC_QX64(i) tc_blendv(TC_QX32(i), TC_QX32((i) + 32), m5)
#define TC_QX128(i) tc_blendv(TC_QX64(i), TC_QX64((i) + 64), m6)

/* two sibling nodes' column bytes muxed by bit 0 of k, their (non-negative) offsets read by one
 * 64-bit load: the mux's scalar offset loads competed with its vector loads for the load ports.
 * Measured in one process (kernel with the pair load / without it): XGBoost binary depth 6
 * 0.90x the time, 10 classes 0.83x, depth 8 0.94x, GB regressor 0.95x. Four 16-bit offsets a
 * load (a uint16 copy of the offsets, split by shifts) measured the same as pairs (1.01x). For
 * scale: offsets known at compile time (no offset loads at all; a timing-only build with wrong
 * columns) took 0.75x. */
static inline __attribute__((always_inline)) TC_ATTR __m256i tc_qx2(const uint8_t *qg, const int32_t *c,
                                                                     const __m256i m0) {
  uint64_t w;
  memcpy(&w, c, 8);
  return tc_blendv(_mm256_load_si256((const __m256i *)(qg + TC_QCS * (uint64_t)(uint32_t)w)),
                   _mm256_load_si256((const __m256i *)(qg + TC_QCS * (w >> 32))), m0);
}

static inline __attribute__((always_inline)) TC_ATTR __m256i tc_qlevel(
    const uint8_t *qg, const int32_t *co, const int8_t *tb, const int l, __m256i k,
    const __m256i *d) {
  /* m_b: bit b of every row's position k in each byte's bit 7 (what vpblendvb reads): the
   * decision of level l - 1 - b (d, 0 or -1 a byte; k = 2k + decision), not k shifted */
  const __m256i z = _mm256_setzero_si256();
  const __m256i m0 = l > 0 ? d[l - 1] : z, m1 = l > 1 ? d[l - 2] : z;
  const __m256i m2 = l > 2 ? d[l - 3] : z, m3 = l > 3 ? d[l - 4] : z;
  const __m256i m4 = l > 4 ? d[l - 5] : z, m5 = l > 5 ? d[l - 6] : z;
  const __m256i m6 = l > 6 ? d[l - 7] : z;
  /* each row's node's threshold byte: the level's thresholds 16 a vpshufb, as leaf planes */
  const __m256i t = l ? tc_qplane((const uint8_t *)tb, _mm256_and_si256(k, _mm256_set1_epi8(15)), k, l)
                      : _mm256_set1_epi8(tb[0]);
  switch (l) {
    case 0: return _mm256_cmpgt_epi8(TC_QX1(0), t);
    case 1: return _mm256_cmpgt_epi8(TC_QX2(0), t);
    case 2: return _mm256_cmpgt_epi8(TC_QX4(0), t);
    case 3: return _mm256_cmpgt_epi8(TC_QX8(0), t);
    case 4: return _mm256_cmpgt_epi8(TC_QX16(0), t);
    case 5: return _mm256_cmpgt_epi8(TC_QX32(0), t);
    case 6: return _mm256_cmpgt_epi8(TC_QX64(0), t);
    default: return _mm256_cmpgt_epi8(TC_QX128(0), t);
  }
}
#undef TC_QX1
#undef TC_QX2
#undef TC_QX4
#undef TC_QX8
#undef TC_QX16
#undef TC_QX32
#undef TC_QX64
#undef TC_QX128

/* Levels wider than the model's columns (2^l > C, C = q_ncols rounded up to a power of two,
 * <= 64): each row's node's column index is looked up like its threshold (a byte per slot,
 * h_qcix: 16 a vpshufb), then the C columns' bytes are muxed by its bits: C - 1 blends over
 * loads at fixed offsets, against the node mux's 2^l - 1 blends and 2^l loads at offsets read
 * from memory. Same byte, same compare. Used at depths 7-8 (<= 64 columns) and 5-6 (<= 16).
 * Measured in one process (300 XGBoost trees, against the node mux at every level): depth 8
 * over 12 / 30 / 60 columns 0.56x / 0.72x / 0.85x the time, depth 7 over 30 0.95x, depth 6
 * over 8 / 12 0.95x. (Muxing level 7 over 128 columns measured 1.03x the time.)
 * XGBoost's nodes send NaN either way, so a feature with missing values has two columns (NaN's
 * bin 0 or the count): with q_cnan the mux reads one of them per feature, whose NaN bin is 255
 * (arrays_derived.py, merge_nan_columns: its count is below 255), and a row with bin 255 is sent left
 * where the node's column index byte has bit 7 set; the node mux reads either, as before.
 * A cmpeq, an and and a blend per level: on the bench's depth-8 XGBoost case (30 features, 66
 * columns: the node mux before) 0.84x the time, on 300 depth-8 trees over 40 / 30 / 12
 * features 0.84x / 0.87x / 0.98x (one process, against the two columns and the node mux). */
#define TC_QC1(i) _mm256_load_si256((const __m256i *)(qg + TC_QR * (i)))
#define TC_QC2(i) tc_blendv(TC_QC1(i), TC_QC1((i) + 1), c0)
#define TC_QC4(i) tc_blendv(TC_QC2(i), TC_QC2((i) + 2), c1)
#define TC_QC8(i) tc_blendv(TC_QC4(i), TC_QC4((i) + 4), c2)
#define TC_QC16(i) tc_blendv(TC_QC8(i), TC_QC8((i) + 8), c3)
#define TC_QC32(i) tc_blendv(TC_QC16(i), TC_QC16((i) + 16), c4)
#define TC_QC64(i) tc_blendv(TC_QC32(i), TC_QC32((i) + 32), c5)
static inline __attribute__((always_inline)) TC_ATTR __m256i tc_qlevelc(
    const uint8_t *qg, const uint8_t *cx, const int8_t *tb, const int l, __m256i k, const int C) {
  const __m256i k4 = _mm256_and_si256(k, _mm256_set1_epi8(15));
  const __m256i t = tc_qplane((const uint8_t *)tb, k4, k, l), c = tc_qplane(cx, k4, k, l);
  /* a 16-bit shift brings the low byte's bits 6-7 into the high byte's bits 0-1: bit 7 (the
   * NaN flag below) never reaches a bit 7 that a blend reads */
  const __m256i c0 = _mm256_slli_epi16(c, 7), c1 = _mm256_slli_epi16(c, 6);
  const __m256i c2 = _mm256_slli_epi16(c, 5), c3 = _mm256_slli_epi16(c, 4);
  const __m256i c4 = _mm256_slli_epi16(c, 3), c5 = _mm256_slli_epi16(c, 2);
  const __m256i x = (C & ~1) == 16 ? TC_QC16(0) : (C & ~1) == 32 ? TC_QC32(0) : TC_QC64(0);
  const __m256i r = _mm256_cmpgt_epi8(x, t);
  if (!(C & 1)) return r;
  /* merged NaN columns (arrays_derived.py, merge_nan_columns): bin 255 (0x7F biased) is NaN and goes
   * right, except at nodes whose column index carries bit 7 */
  return tc_blendv(r, _mm256_setzero_si256(), _mm256_and_si256(_mm256_cmpeq_epi8(x, _mm256_set1_epi8(0x7F)), c));
}
#undef TC_QC1
#undef TC_QC2
#undef TC_QC4
#undef TC_QC8
#undef TC_QC16
#undef TC_QC32
#undef TC_QC64

/* Leaf values of 32 rows without gathers (float32 accumulation, width 1): the tree's leaf
 * values are stored as 4 byte planes (lb: plane p = byte p of every leaf, max(16, 2^D) leaves),
 * each looked up with vpshufb (16 leaves per shuffle, blends by bits 4.. of k for deeper
 * trees) and re-interleaved into floats. Only bytes move: the values are bit-identical. k's
 * dwords are first permuted so the interleave comes out in row order. */
static inline __attribute__((always_inline)) TC_ATTR void tc_qleaf32(const uint8_t *lb, int64_t L, __m256i k,
                                                                       float *a, const int D) {
  const __m256i kp = _mm256_permutevar8x32_epi32(k, _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7));
  const __m256i k4 = _mm256_and_si256(kp, _mm256_set1_epi8(15));
  const __m256i p0 = tc_qplane(lb, k4, kp, D), p1 = tc_qplane(lb + L, k4, kp, D);
  const __m256i p2 = tc_qplane(lb + 2 * L, k4, kp, D), p3 = tc_qplane(lb + 3 * L, k4, kp, D);
  const __m256i lo01 = _mm256_unpacklo_epi8(p0, p1), hi01 = _mm256_unpackhi_epi8(p0, p1);
  const __m256i lo23 = _mm256_unpacklo_epi8(p2, p3), hi23 = _mm256_unpackhi_epi8(p2, p3);
  const __m256 v[4] = {_mm256_castsi256_ps(_mm256_unpacklo_epi16(lo01, lo23)),
                       _mm256_castsi256_ps(_mm256_unpackhi_epi16(lo01, lo23)),
                       _mm256_castsi256_ps(_mm256_unpacklo_epi16(hi01, hi23)),
                       _mm256_castsi256_ps(_mm256_unpackhi_epi16(hi01, hi23))};
  for (int q = 0; q < 4; ++q)
    _mm256_storeu_ps(a + 8 * q, _mm256_add_ps(_mm256_loadu_ps(a + 8 * q), v[q]));
}

/* The same for float64 leaves: 8 byte planes, three unpack stages (bytes, words, dwords) that
 * leave each 128-bit lane holding doubles of positions 2j, 2j + 1 (lane 0) and 16 + 2j,
 * 17 + 2j (lane 1) in output vector j / 2 ... so k's 16-bit words are first put in the order
 * 0 2 4 .. 14 | 1 3 5 .. 15 (a shuffle within lanes, then a dword permute across them), and
 * vector j comes out holding rows 4j .. 4j + 3. */
static inline __attribute__((always_inline)) TC_ATTR void tc_qleaf64(const uint8_t *lb, int64_t L, __m256i k,
                                                                       double *a, const int D) {
  const __m256i ev = _mm256_setr_epi8(0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15,
                                      0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15);
  const __m256i kp = _mm256_permutevar8x32_epi32(_mm256_shuffle_epi8(k, ev),
                                                 _mm256_setr_epi32(0, 1, 4, 5, 2, 3, 6, 7));
  const __m256i k4 = _mm256_and_si256(kp, _mm256_set1_epi8(15));
  __m256i p[8], w[8], d[8];
  for (int b = 0; b < 8; ++b) p[b] = tc_qplane(lb + b * L, k4, kp, D);
  for (int b = 0; b < 4; ++b) {  /* 16-bit pairs of bytes (2b, 2b + 1) */
    w[2 * b] = _mm256_unpacklo_epi8(p[2 * b], p[2 * b + 1]);
    w[2 * b + 1] = _mm256_unpackhi_epi8(p[2 * b], p[2 * b + 1]);
  }
  /* dwords: bytes 0..3 (from w0/w2) and 4..7 (w4/w6) of positions 0..3, 4..7 (lo), then 8..15 (hi) */
  d[0] = _mm256_unpacklo_epi16(w[0], w[2]); d[1] = _mm256_unpacklo_epi16(w[4], w[6]);
  d[2] = _mm256_unpackhi_epi16(w[0], w[2]); d[3] = _mm256_unpackhi_epi16(w[4], w[6]);
  d[4] = _mm256_unpacklo_epi16(w[1], w[3]); d[5] = _mm256_unpacklo_epi16(w[5], w[7]);
  d[6] = _mm256_unpackhi_epi16(w[1], w[3]); d[7] = _mm256_unpackhi_epi16(w[5], w[7]);
  for (int j = 0; j < 4; ++j) {
    const __m256d lo = _mm256_castsi256_pd(_mm256_unpacklo_epi32(d[2 * j], d[2 * j + 1]));
    const __m256d hi = _mm256_castsi256_pd(_mm256_unpackhi_epi32(d[2 * j], d[2 * j + 1]));
    _mm256_storeu_pd(a + 8 * j, _mm256_add_pd(_mm256_loadu_pd(a + 8 * j), lo));
    _mm256_storeu_pd(a + 8 * j + 4, _mm256_add_pd(_mm256_loadu_pd(a + 8 * j + 4), hi));
  }
}

/* one heap tree's leaf slots for 32 rows: D levels of mux-and-compare (D a constant per case;
 * called by qheap_vec for trees deeper than it inlines) */
#define TC_QKEYS_CASE(D)                                                                        \
  case D: {                                                                                     \
    __m256i dv[8];                                                                              \
    _Pragma("GCC unroll 8")                                                                     \
    for (int l = 0; l < D; ++l) {                                                               \
      const int o = (1 << l) - 1;                                                               \
      dv[l] = tc_qlevel(qg, co + o, tb + o, l, k, dv);                                          \
      k = _mm256_sub_epi8(_mm256_add_epi8(k, k), dv[l]);                                        \
    }                                                                                           \
    return k;                                                                                   \
  }
static __attribute__((noinline)) TC_ATTR __m256i tc_qkeys(const uint8_t *qg, const int32_t *co,
                                                          const int8_t *tb, int D) {
  __m256i k = _mm256_setzero_si256();  /* go right is -1: k = 2k + 1 */
  switch (D) {
    TC_QKEYS_CASE(1) TC_QKEYS_CASE(2) TC_QKEYS_CASE(3) TC_QKEYS_CASE(4)
    TC_QKEYS_CASE(5) TC_QKEYS_CASE(6) TC_QKEYS_CASE(7) TC_QKEYS_CASE(8)
    default: return k;
  }
}
#undef TC_QKEYS_CASE

/* the same, levels wider than C columns muxed by column (tc_qlevelc) */
#define TC_QKEYSC_CASE(D, C)                                                                    \
  case D * 256 + C: {                                                                           \
    __m256i dv[8];                                                                              \
    _Pragma("GCC unroll 8")                                                                     \
    for (int l = 0; l < D; ++l) {                                                               \
      const int o = (1 << l) - 1;                                                               \
      dv[l] = (1 << l) > (C & ~1) ? tc_qlevelc(qg, cx + o, tb + o, l, k, C)                     \
                                  : tc_qlevel(qg, co + o, tb + o, l, k, dv);                    \
      k = _mm256_sub_epi8(_mm256_add_epi8(k, k), dv[l]);                                        \
    }                                                                                           \
    return k;                                                                                   \
  }
static __attribute__((noinline)) TC_ATTR __m256i tc_qkeysc(const uint8_t *qg, const int32_t *co,
                                                           const int8_t *tb, const uint8_t *cx,
                                                           int D, int C) {
  __m256i k = _mm256_setzero_si256();
  switch (D * 256 + C) {
    TC_QKEYSC_CASE(5, 16) TC_QKEYSC_CASE(6, 16)
    TC_QKEYSC_CASE(7, 16) TC_QKEYSC_CASE(7, 32) TC_QKEYSC_CASE(7, 64)
    TC_QKEYSC_CASE(8, 16) TC_QKEYSC_CASE(8, 32) TC_QKEYSC_CASE(8, 64)
    /* C + 1: with merged NaN columns (q_cnan) */
    TC_QKEYSC_CASE(5, 17) TC_QKEYSC_CASE(6, 17)
    TC_QKEYSC_CASE(7, 17) TC_QKEYSC_CASE(7, 33) TC_QKEYSC_CASE(7, 65)
    TC_QKEYSC_CASE(8, 17) TC_QKEYSC_CASE(8, 33) TC_QKEYSC_CASE(8, 65)
    default: return tc_qkeys(qg, co, tb, D);
  }
}
#undef TC_QKEYSC_CASE

/* go right at a categorical node for 32 category codes: the code's bit in the node's 256-bit
 * set is clear (byte c >> 3 by two in-lane shuffles and a blend, bit c & 7 by a shuffle) */
static inline __attribute__((always_inline)) TC_ATTR __m256i tc_cat_right(__m256i c, const uint8_t *set) {
  const __m256i idx = _mm256_and_si256(_mm256_srli_epi16(c, 3), _mm256_set1_epi8(31));
  const __m256i lo = _mm256_shuffle_epi8(_mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)set)), idx);
  const __m256i hi = _mm256_shuffle_epi8(_mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(set + 16))), idx);
  const __m256i byte = _mm256_blendv_epi8(lo, hi, _mm256_slli_epi16(idx, 3));  /* idx bit 4 */
  const __m256i pow2 = _mm256_setr_epi8(1, 2, 4, 8, 16, 32, 64, -128, 1, 2, 4, 8, 16, 32, 64, -128,
                                        1, 2, 4, 8, 16, 32, 64, -128, 1, 2, 4, 8, 16, 32, 64, -128);
  const __m256i bit = _mm256_shuffle_epi8(pow2, _mm256_and_si256(c, _mm256_set1_epi8(7)));
  return _mm256_cmpeq_epi8(_mm256_and_si256(byte, bit), _mm256_setzero_si256());
}

/* the interval sweep (see bvtree) over G = 1, 2 or 4 32-row groups at once (q0, q0 + gs, ..):
 * independent chains through pos share each node's broadcasts; cat[i] >= 0 marks a categorical
 * node (its set at sets + 32 * cat[i]). One body for the three widths (they were three
 * near-copies; same inner loops; one process: LightGBM 100k rows 0.99x-1.00x, HGB 0.98x,
 * LightGBM batches of 20-70 rows 1.02x-1.04x: the shared call's prologue) */
static inline __attribute__((always_inline)) TC_ATTR void tc_bvsweep_g(
    const uint8_t *q0, int64_t gs, const int32_t *co, const int8_t *tb, const int8_t *lo1,
    const int8_t *hi, const int32_t *cat, const uint8_t *sets, int64_t nn, __m256i *out,
    const int G, const int biased, int8_t bias) {
  __m256i p[4], r[4];
  const __m256i off = _mm256_set1_epi8(-128);  /* biased: below every position */
#pragma GCC unroll 4
  for (int g = 0; g < G; ++g) p[g] = _mm256_set1_epi8(biased ? bias : 0);
  for (int64_t i = 0; i < nn; ++i) {
    if (cat[i] < 0) {
      const __m256i t = _mm256_set1_epi8(tb[i]);
#pragma GCC unroll 4
      for (int g = 0; g < G; ++g)
        r[g] = _mm256_cmpgt_epi8(_mm256_load_si256((const __m256i *)(q0 + g * gs + TC_QCS * co[i])), t);
    } else {
      const uint8_t *st = sets + 32 * (int64_t)cat[i];
#pragma GCC unroll 4
      for (int g = 0; g < G; ++g)
        r[g] = tc_cat_right(_mm256_load_si256((const __m256i *)(q0 + g * gs + TC_QCS * co[i])), st);
    }
    /* lo <= pos  <=>  pos > lo - 1 (signed bytes). Unbiased (<= 128 leaves) every value is
     * in [-1, 127]: a masked-off 0 never raises pos (unsigned max); biased (129-255 leaves,
     * see bvtree) positions are in [-127, 127]: the masked-off value is -128, by two blends
     * (one off the chain through pos: the chain stays compare, blend, max) */
    const __m256i l = _mm256_set1_epi8(lo1[i]), h = _mm256_set1_epi8(hi[i]);
#pragma GCC unroll 4
    for (int g = 0; g < G; ++g) {
      if (biased)
        p[g] = _mm256_max_epi8(p[g], _mm256_blendv_epi8(off, _mm256_blendv_epi8(off, h, r[g]),
                                                        _mm256_cmpgt_epi8(p[g], l)));
      else
        p[g] = _mm256_max_epu8(p[g], _mm256_and_si256(_mm256_and_si256(r[g], h), _mm256_cmpgt_epi8(p[g], l)));
    }
  }
#pragma GCC unroll 4
  for (int g = 0; g < G; ++g) out[g] = p[g];
}
static __attribute__((noinline)) TC_ATTR void tc_bvsweep(
    const uint8_t *q0, int64_t gs, const int32_t *co, const int8_t *tb, const int8_t *lo1,
    const int8_t *hi, const int32_t *cat, const uint8_t *sets, int64_t nn, __m256i *out, int G,
    int8_t bias) {
  if (bias) switch (G) {
    case 4: tc_bvsweep_g(q0, gs, co, tb, lo1, hi, cat, sets, nn, out, 4, 1, bias); break;
    case 2: tc_bvsweep_g(q0, gs, co, tb, lo1, hi, cat, sets, nn, out, 2, 1, bias); break;
    default: tc_bvsweep_g(q0, gs, co, tb, lo1, hi, cat, sets, nn, out, 1, 1, bias); break;
  } else switch (G) {
    case 4: tc_bvsweep_g(q0, gs, co, tb, lo1, hi, cat, sets, nn, out, 4, 0, 0); break;
    case 2: tc_bvsweep_g(q0, gs, co, tb, lo1, hi, cat, sets, nn, out, 2, 0, 0); break;
    default: tc_bvsweep_g(q0, gs, co, tb, lo1, hi, cat, sets, nn, out, 1, 0, 0); break;
  }
}
#endif

#if TC_QVEC == 2 && !defined(TC_Q512_ONCE)
#define TC_Q512_ONCE
/* ---- AVX-512 (F, BW, VL, VBMI) byte kernels: 64 rows a vector -------------------------------
 * The same walks as the AVX2 kernels above, on 64 rows (the AVX-512 unit's blocks hold 64-row
 * groups, TC_QR: one aligned 512-bit load per node; measured in one process against two 256-bit
 * halves of 32-row groups, XGBoost depth 6 0.86x the time). What changes besides the width:
 * a compare writes a mask register (no blend masks made by shifts: the mux's blends take as
 * selectors the earlier levels' decision masks, see tc_zlevel2); a level's <= 64 threshold bytes and a
 * tree's <= 64 leaf planes are looked up by one vpermb each (no 16-entry vpshufb and blends);
 * going right is a masked add. Same bytes, same compares, same leaves, same adds in the same
 * order as the AVX2 and scalar walks. */
static inline __attribute__((always_inline)) TC_ATTR __m512i tc_z64(const uint8_t *qg, int64_t gs, uint32_t off) {
  (void)gs;
  return _mm512_load_si512((const void *)(qg + 2 * (uint64_t)off));  /* column * 64 */
}
/* the first n (<= 64) bytes of p, zeros after: a masked load (never reads past them) */
static inline __attribute__((always_inline)) TC_ATTR __m512i tc_zfirst(const void *p, int n) {
  return _mm512_maskz_loadu_epi8(n >= 64 ? ~(__mmask64)0 : (((__mmask64)1 << n) - 1), p);
}

/* two 64-row groups at once (128 rows: the groups at qg and qg + gs): each node's offsets
 * read once for both, and two independent chains */
typedef struct { __m512i a, b; } tc_zz;
typedef struct { __mmask64 a, b; } tc_zm;
static inline __attribute__((always_inline)) TC_ATTR tc_zz tc_zzb(tc_zm m, tc_zz x, tc_zz y) {
  tc_zz r = {_mm512_mask_blend_epi8(m.a, x.a, y.a), _mm512_mask_blend_epi8(m.b, x.b, y.b)};
  return r;
}
static inline __attribute__((always_inline)) TC_ATTR tc_zz tc_zz1(const uint8_t *qg, int64_t gs, uint32_t off) {
  tc_zz r = {tc_z64(qg, gs, off), tc_z64(qg + gs, gs, off)};
  return r;
}
static inline __attribute__((always_inline)) TC_ATTR tc_zz tc_zz2(const uint8_t *qg, int64_t gs,
                                                                   const int32_t *c, tc_zm m0) {
  uint64_t w;
  memcpy(&w, c, 8);
  return tc_zzb(m0, tc_zz1(qg, gs, (uint32_t)w), tc_zz1(qg, gs, (uint32_t)(w >> 32)));
}
#define TC_ZX1(i) tc_zz1(qg, gs, (uint32_t)co[i])
#define TC_ZX2(i) tc_zz2(qg, gs, co + (i), m0)
#define TC_ZX4(i) tc_zzb(m1, TC_ZX2(i), TC_ZX2((i) + 2))
#define TC_ZX8(i) tc_zzb(m2, TC_ZX4(i), TC_ZX4((i) + 4))
#define TC_ZX16(i) tc_zzb(m3, TC_ZX8(i), TC_ZX8((i) + 8))
#define TC_ZX32(i) tc_zzb(m4, TC_ZX16(i), TC_ZX16((i) + 16))
/* d: the decisions of levels 0 .. l - 1 (their masks): bit b of a row's position k at level l
 * is its decision at level l - 1 - b (k = 2k + decision a level), so the mux's selectors are
 * those masks, not tests of k (vptestmb: 15 a depth-6 tree and group, on the port the
 * compares and permutes use, and on the level's chain) */
static inline __attribute__((always_inline)) TC_ATTR tc_zm tc_zlevel2(
    const uint8_t *qg, int64_t gs, const int32_t *co, __m512i thr, const int l, __m512i ka, __m512i kb,
    const tc_zm *d) {
  const tc_zm z = {0, 0};
  const tc_zm m0 = l > 0 ? d[l - 1] : z, m1 = l > 1 ? d[l - 2] : z, m2 = l > 2 ? d[l - 3] : z;
  const tc_zm m3 = l > 3 ? d[l - 4] : z, m4 = l > 4 ? d[l - 5] : z;
  const __m512i ta = l ? _mm512_permutexvar_epi8(ka, thr) : thr;
  const __m512i tb = l ? _mm512_permutexvar_epi8(kb, thr) : thr;
  tc_zz x;
  switch (l) {
    case 0: x = TC_ZX1(0); break;
    case 1: x = TC_ZX2(0); break;
    case 2: x = TC_ZX4(0); break;
    case 3: x = TC_ZX8(0); break;
    case 4: x = TC_ZX16(0); break;
    default: x = TC_ZX32(0); break;
  }
  tc_zm r = {_mm512_cmpgt_epi8_mask(x.a, ta), _mm512_cmpgt_epi8_mask(x.b, tb)};
  return r;
}
#undef TC_ZX1
#undef TC_ZX2
#undef TC_ZX4
#undef TC_ZX8
#undef TC_ZX16
#undef TC_ZX32

/* each row's entry of a table of n = 2^l (<= 256) bytes at p, the row's index in k: one vpermb
 * (<= 64), one vpermi2b (128: index bit 6 picks the half), two and a blend by bit 7 (256) */
static inline __attribute__((always_inline)) TC_ATTR __m512i tc_zlut(const uint8_t *p, __m512i k, const int n) {
  if (n <= 64) return _mm512_permutexvar_epi8(k, tc_zfirst(p, n));
  const __m512i lo = _mm512_permutex2var_epi8(_mm512_loadu_si512((const void *)p), k,
                                              _mm512_loadu_si512((const void *)(p + 64)));
  if (n == 128) return lo;
  const __m512i hi = _mm512_permutex2var_epi8(_mm512_loadu_si512((const void *)(p + 128)), k,
                                              _mm512_loadu_si512((const void *)(p + 192)));
  return _mm512_mask_blend_epi8(_mm512_movepi8_mask(k), lo, hi);
}
/* a level of a deeper heap (7 or 8 levels) for 64 rows, as tc_zlevel: levels of <= C nodes by
 * the node mux (offsets co), wider ones by the column mux over the first C columns (the row's
 * node's column index from cx, see tc_qlevelc; C odd: merged NaN columns) */
#define TC_ZN1(i) tc_z64(qg, 0, (uint32_t)co[i])
#define TC_ZN2(i) _mm512_mask_blend_epi8(m0, TC_ZN1(i), TC_ZN1((i) + 1))
#define TC_ZN4(i) _mm512_mask_blend_epi8(m1, TC_ZN2(i), TC_ZN2((i) + 2))
#define TC_ZN8(i) _mm512_mask_blend_epi8(m2, TC_ZN4(i), TC_ZN4((i) + 4))
#define TC_ZN16(i) _mm512_mask_blend_epi8(m3, TC_ZN8(i), TC_ZN8((i) + 8))
#define TC_ZN32(i) _mm512_mask_blend_epi8(m4, TC_ZN16(i), TC_ZN16((i) + 16))
#define TC_ZN64(i) _mm512_mask_blend_epi8(m5, TC_ZN32(i), TC_ZN32((i) + 32))
#define TC_ZN128(i) _mm512_mask_blend_epi8(m6, TC_ZN64(i), TC_ZN64((i) + 64))
#define TC_ZC1(i) _mm512_load_si512((const void *)(qg + 64 * (i)))
#define TC_ZC2(i) _mm512_mask_blend_epi8(m0, TC_ZC1(i), TC_ZC1((i) + 1))
#define TC_ZC4(i) _mm512_mask_blend_epi8(m1, TC_ZC2(i), TC_ZC2((i) + 2))
#define TC_ZC8(i) _mm512_mask_blend_epi8(m2, TC_ZC4(i), TC_ZC4((i) + 4))
#define TC_ZC16(i) _mm512_mask_blend_epi8(m3, TC_ZC8(i), TC_ZC8((i) + 8))
#define TC_ZC32(i) _mm512_mask_blend_epi8(m4, TC_ZC16(i), TC_ZC16((i) + 16))
#define TC_ZC64(i) _mm512_mask_blend_epi8(m5, TC_ZC32(i), TC_ZC32((i) + 32))
static inline __attribute__((always_inline)) TC_ATTR __mmask64 tc_zleveld(
    const uint8_t *qg, const int32_t *co, const int8_t *tb, const uint8_t *cx, const int l,
    __m512i k, const int C, const __mmask64 *d) {
  const __m512i t = l ? tc_zlut((const uint8_t *)tb, k, 1 << l) : _mm512_set1_epi8(tb[0]);
  if ((1 << l) <= (C & ~1)) {  /* the node mux's selectors: the earlier levels' decisions d */
    const __mmask64 m0 = l > 0 ? d[l - 1] : 0, m1 = l > 1 ? d[l - 2] : 0;
    const __mmask64 m2 = l > 2 ? d[l - 3] : 0, m3 = l > 3 ? d[l - 4] : 0;
    const __mmask64 m4 = l > 4 ? d[l - 5] : 0, m5 = l > 5 ? d[l - 6] : 0;
    const __mmask64 m6 = l > 6 ? d[l - 7] : 0;
    __m512i x;
    switch (l) {
      case 0: x = TC_ZN1(0); break;
      case 1: x = TC_ZN2(0); break;
      case 2: x = TC_ZN4(0); break;
      case 3: x = TC_ZN8(0); break;
      case 4: x = TC_ZN16(0); break;
      case 5: x = TC_ZN32(0); break;
      case 6: x = TC_ZN64(0); break;
      default: x = TC_ZN128(0); break;
    }
    return _mm512_cmpgt_epi8_mask(x, t);
  }
  const __m512i c = tc_zlut(cx, k, 1 << l);
  const __mmask64 m0 = _mm512_test_epi8_mask(c, _mm512_set1_epi8(1));
  const __mmask64 m1 = _mm512_test_epi8_mask(c, _mm512_set1_epi8(2));
  const __mmask64 m2 = _mm512_test_epi8_mask(c, _mm512_set1_epi8(4));
  const __mmask64 m3 = _mm512_test_epi8_mask(c, _mm512_set1_epi8(8));
  const __mmask64 m4 = _mm512_test_epi8_mask(c, _mm512_set1_epi8(16));
  const __mmask64 m5 = _mm512_test_epi8_mask(c, _mm512_set1_epi8(32));
  const __m512i x = (C & ~1) == 16 ? TC_ZC16(0) : (C & ~1) == 32 ? TC_ZC32(0) : TC_ZC64(0);
  __mmask64 r = _mm512_cmpgt_epi8_mask(x, t);
  if (C & 1)  /* merged NaN columns: code 255 goes left where the index byte has bit 7 */
    r &= ~(_mm512_cmpeq_epi8_mask(x, _mm512_set1_epi8(0x7F)) & _mm512_movepi8_mask(c));
  return r;
}
#undef TC_ZN1
#undef TC_ZN2
#undef TC_ZN4
#undef TC_ZN8
#undef TC_ZN16
#undef TC_ZN32
#undef TC_ZN64
#undef TC_ZN128
#undef TC_ZC1
#undef TC_ZC2
#undef TC_ZC4
#undef TC_ZC8
#undef TC_ZC16
#undef TC_ZC32
#undef TC_ZC64

/* 64 rows' float32 leaves from the tree's 4 byte planes (L bytes each, L <= 64): a vpermb per
 * plane, then byte and word unpacks (within 128-bit lanes) make the floats; k is first put in
 * the order those unpacks undo (output vector q, lane j: rows 16q + 4j ..) */
static inline __attribute__((always_inline)) TC_ATTR void tc_zleaf32(const uint8_t *lb, int L, __m512i k,
                                                                       float *a) {
  const __m512i perm = _mm512_set_epi8(
      63, 62, 61, 60, 47, 46, 45, 44, 31, 30, 29, 28, 15, 14, 13, 12,
      59, 58, 57, 56, 43, 42, 41, 40, 27, 26, 25, 24, 11, 10, 9, 8,
      55, 54, 53, 52, 39, 38, 37, 36, 23, 22, 21, 20, 7, 6, 5, 4,
      51, 50, 49, 48, 35, 34, 33, 32, 19, 18, 17, 16, 3, 2, 1, 0);
  const __m512i kp = _mm512_permutexvar_epi8(perm, k);
  const __m512i p0 = tc_zlut(lb, kp, L), p1 = tc_zlut(lb + L, kp, L);
  const __m512i p2 = tc_zlut(lb + 2 * L, kp, L), p3 = tc_zlut(lb + 3 * L, kp, L);
  const __m512i lo01 = _mm512_unpacklo_epi8(p0, p1), hi01 = _mm512_unpackhi_epi8(p0, p1);
  const __m512i lo23 = _mm512_unpacklo_epi8(p2, p3), hi23 = _mm512_unpackhi_epi8(p2, p3);
  const __m512 v[4] = {_mm512_castsi512_ps(_mm512_unpacklo_epi16(lo01, lo23)),
                       _mm512_castsi512_ps(_mm512_unpackhi_epi16(lo01, lo23)),
                       _mm512_castsi512_ps(_mm512_unpacklo_epi16(hi01, hi23)),
                       _mm512_castsi512_ps(_mm512_unpackhi_epi16(hi01, hi23))};
  for (int q = 0; q < 4; ++q)
    _mm512_storeu_ps(a + 16 * q, _mm512_add_ps(_mm512_loadu_ps(a + 16 * q), v[q]));
}

/* the same for float64 leaves: 8 planes, unpacks of bytes, words, dwords (output vector
 * 2s + h, lane j: rows 16s + 8h + 2j, + 1) */
static inline __attribute__((always_inline)) TC_ATTR void tc_zleaf64(const uint8_t *lb, int L, __m512i k,
                                                                       double *a) {
  const __m512i perm = _mm512_set_epi8(
      63, 62, 55, 54, 47, 46, 39, 38, 31, 30, 23, 22, 15, 14, 7, 6,
      61, 60, 53, 52, 45, 44, 37, 36, 29, 28, 21, 20, 13, 12, 5, 4,
      59, 58, 51, 50, 43, 42, 35, 34, 27, 26, 19, 18, 11, 10, 3, 2,
      57, 56, 49, 48, 41, 40, 33, 32, 25, 24, 17, 16, 9, 8, 1, 0);
  const __m512i kp = _mm512_permutexvar_epi8(perm, k);
  __m512i p[8], w[8], d[8];
  for (int b = 0; b < 8; ++b) p[b] = tc_zlut(lb + b * L, kp, L);
  for (int b = 0; b < 4; ++b) {
    w[2 * b] = _mm512_unpacklo_epi8(p[2 * b], p[2 * b + 1]);
    w[2 * b + 1] = _mm512_unpackhi_epi8(p[2 * b], p[2 * b + 1]);
  }
  /* d[2s]: bytes 0-3 of lane positions 4s .. 4s + 3, d[2s + 1]: bytes 4-7 */
  d[0] = _mm512_unpacklo_epi16(w[0], w[2]); d[1] = _mm512_unpacklo_epi16(w[4], w[6]);
  d[2] = _mm512_unpackhi_epi16(w[0], w[2]); d[3] = _mm512_unpackhi_epi16(w[4], w[6]);
  d[4] = _mm512_unpacklo_epi16(w[1], w[3]); d[5] = _mm512_unpacklo_epi16(w[5], w[7]);
  d[6] = _mm512_unpackhi_epi16(w[1], w[3]); d[7] = _mm512_unpackhi_epi16(w[5], w[7]);
  for (int s = 0; s < 4; ++s) {
    const __m512d lo = _mm512_castsi512_pd(_mm512_unpacklo_epi32(d[2 * s], d[2 * s + 1]));
    const __m512d hi = _mm512_castsi512_pd(_mm512_unpackhi_epi32(d[2 * s], d[2 * s + 1]));
    _mm512_storeu_pd(a + 16 * s, _mm512_add_pd(_mm512_loadu_pd(a + 16 * s), lo));
    _mm512_storeu_pd(a + 16 * s + 8, _mm512_add_pd(_mm512_loadu_pd(a + 16 * s + 8), hi));
  }
}
#endif

#if TC_QVEC == 2 && !defined(TC_ZSWEEP_ONCE)
#define TC_ZSWEEP_ONCE
/* go right at a categorical node for 64 category codes (see tc_cat_right): the set's byte
 * c >> 3 by one vpermb, its bit c & 7 by a vpshufb, tested into a mask */
static inline __attribute__((always_inline)) TC_ATTR __mmask64 tc_zcat_right(__m512i c, __m512i set) {
  const __m512i idx = _mm512_and_si512(_mm512_srli_epi16(c, 3), _mm512_set1_epi8(31));
  const __m512i pow2 = _mm512_broadcast_i32x4(_mm_setr_epi8(1, 2, 4, 8, 16, 32, 64, -128,
                                                            1, 2, 4, 8, 16, 32, 64, -128));
  const __m512i bit = _mm512_shuffle_epi8(pow2, _mm512_and_si512(c, _mm512_set1_epi8(7)));
  return _mm512_testn_epi8_mask(_mm512_permutexvar_epi8(idx, set), bit);
}
/* the interval sweep (see bvtree) over G = 1, 2 or 4 64-row groups at once (q0, q0 + 2 gs, ..):
 * per node a compare into a mask, a masked compare of the positions with lo - 1 and a masked
 * byte max (the AVX2 sweep's compare, and, compare, and, max) */
static inline __attribute__((always_inline)) TC_ATTR void tc_zsweep_g(
    const uint8_t *q0, int64_t gs, const int32_t *co, const int8_t *tb, const int8_t *lo1,
    const int8_t *hi, const int32_t *cat, const uint8_t *sets, int64_t nn, __m512i *out, const int G,
    int8_t bias) {
  __m512i p[4];
  __mmask64 r[4];
#pragma GCC unroll 4
  for (int g = 0; g < G; ++g) p[g] = _mm512_set1_epi8(bias);
  for (int64_t i = 0; i < nn; ++i) {
    if (cat[i] < 0) {
      const __m512i t = _mm512_set1_epi8(tb[i]);
#pragma GCC unroll 4
      for (int g = 0; g < G; ++g) r[g] = _mm512_cmpgt_epi8_mask(tc_z64(q0 + g * gs, gs, (uint32_t)co[i]), t);
    } else {
      const __m512i st = tc_zfirst(sets + 32 * (int64_t)cat[i], 32);
#pragma GCC unroll 4
      for (int g = 0; g < G; ++g) r[g] = tc_zcat_right(tc_z64(q0 + g * gs, gs, (uint32_t)co[i]), st);
    }
    /* lo <= pos  <=>  pos > lo - 1 (biased signed bytes, see bvtree: signed max) */
    const __m512i l = _mm512_set1_epi8(lo1[i]), h = _mm512_set1_epi8(hi[i]);
#pragma GCC unroll 4
    for (int g = 0; g < G; ++g)
      p[g] = _mm512_mask_max_epi8(p[g], _mm512_mask_cmpgt_epi8_mask(r[g], p[g], l), p[g], h);
  }
#pragma GCC unroll 4
  for (int g = 0; g < G; ++g) out[g] = p[g];
}
static __attribute__((noinline)) TC_ATTR void tc_zsweep(
    const uint8_t *q0, int64_t gs, const int32_t *co, const int8_t *tb, const int8_t *lo1,
    const int8_t *hi, const int32_t *cat, const uint8_t *sets, int64_t nn, __m512i *out, int G,
    int8_t bias) {
  switch (G) {
    case 4: tc_zsweep_g(q0, gs, co, tb, lo1, hi, cat, sets, nn, out, 4, bias); break;
    case 2: tc_zsweep_g(q0, gs, co, tb, lo1, hi, cat, sets, nn, out, 2, bias); break;
    default: tc_zsweep_g(q0, gs, co, tb, lo1, hi, cat, sets, nn, out, 1, bias); break;
  }
}
#endif

#if TC_QVEC
/* The heap walk and the leaf adds depend on the accumulation dtype only: defined once per
 * translation unit and TC_AT (AFN: named by TC_AN and the ISA), not again for each input
 * dtype, which halves their share of the kernel's build time */
#define AFN(name) TC_PASTE(name, TC_PASTE(TC_AN, TC_ISA))
#if TC_ABITS == 64 && !defined(TC_QHEAP_ONCE_64)
#define TC_QHEAP_ONCE_64
#define TC_QHEAP_DEFINE
#elif TC_ABITS == 32 && !defined(TC_QHEAP_ONCE_32)
#define TC_QHEAP_ONCE_32
#define TC_QHEAP_DEFINE
#endif
#ifdef TC_QHEAP_DEFINE
/* 32 rows' leaf indices k (bytes) -> their leaf values added into acc (one output, width 1),
 * or stored into lidx (acc NULL); rows at or past nb (a short last group) are dropped */
static inline __attribute__((always_inline)) TC_ATTR void AFN(qleaves)(
    __m256i k, int64_t r, int64_t nb, int32_t *lidx, const TC_AT *lv, TC_AT *acc) {
  const int64_t left = nb - r;
  const __m128i lo = _mm256_castsi256_si128(k), hi = _mm256_extracti128_si256(k, 1);
  __m256i j[4];
  j[0] = _mm256_cvtepu8_epi32(lo);
  j[1] = _mm256_cvtepu8_epi32(_mm_srli_si128(lo, 8));
  j[2] = _mm256_cvtepu8_epi32(hi);
  j[3] = _mm256_cvtepu8_epi32(_mm_srli_si128(hi, 8));
  if (acc && left >= 32) {
    for (int q = 0; q < 4; ++q) {
      TC_AT *a = acc + r + 8 * q;
      if (sizeof(TC_AT) == 4) {
        _mm256_storeu_ps((float *)a, _mm256_add_ps(_mm256_loadu_ps((const float *)a),
                                                   _mm256_i32gather_ps((const float *)lv, j[q], 4)));
      } else {
        _mm256_storeu_pd((double *)a, _mm256_add_pd(_mm256_loadu_pd((const double *)a),
            _mm256_i32gather_pd((const double *)lv, _mm256_castsi256_si128(j[q]), 8)));
        _mm256_storeu_pd((double *)a + 4, _mm256_add_pd(_mm256_loadu_pd((const double *)a + 4),
            _mm256_i32gather_pd((const double *)lv, _mm256_extracti128_si256(j[q], 1), 8)));
      }
    }
  } else {
    int32_t tmp[32];
    for (int q = 0; q < 4; ++q) _mm256_storeu_si256((__m256i *)(tmp + 8 * q), j[q]);
    const int64_t m = left < 32 ? left : 32;
    if (acc) for (int64_t i = 0; i < m; ++i) acc[r + i] += lv[tmp[i]];
    else for (int64_t i = 0; i < m; ++i) lidx[r + i] = tmp[i];
  }
}

/* one heap tree over a block's rows, 32 at a time (nb is rounded up to 32: qb is padded so the
 * extra rows read valid bytes). Trees of depth <= 6 walk inline
 * with D a constant (no call, no dispatch on D, no vectors spilled across a call per 32 rows:
 * these dominated a depth-4 tree's few compares; measured in one process, sklearn GB of 300
 * depth-4 trees 0.74x-0.89x the time, XGBoost depth 6 0.95x-0.97x); deeper ones call tc_qkeys
 * (one copy of the 7- and 8-level muxes per translation unit: the kernel's build time) */
static inline __attribute__((always_inline)) TC_ATTR void AFN(qheap_d)(
    const int32_t *co, const int8_t *tb, const int D, const uint8_t *qb, int64_t gs, int64_t nb,
    int32_t *lidx, const TC_AT *lv, TC_AT *acc, const uint8_t *lb, const int inl, const uint8_t *cx,
    const int C) {
  /* inl 2: a symmetric heap (arrays_derived.oblivious_heaps): every slot of level l reads the
   * column and byte of the level's first slot, so one load and one compare a level give the
   * slot the mux would (as zobl) */
  __m256i ot[8];
  int64_t oo[8];
  if (inl == 2) {
#pragma GCC unroll 8
    for (int l = 0; l < D; ++l) {
      ot[l] = _mm256_set1_epi8(tb[(1 << l) - 1]);
      oo[l] = TC_QCS * (int64_t)co[(1 << l) - 1];
    }
  }
  for (int64_t r = 0; r < nb; r += 32) {
    __m256i k;
    if (inl == 2) {
      const uint8_t *qg = qb + TC_QOFF(r);
      k = _mm256_setzero_si256();
#pragma GCC unroll 8
      for (int l = 0; l < D; ++l)
        k = _mm256_sub_epi8(_mm256_add_epi8(k, k),
                            _mm256_cmpgt_epi8(_mm256_load_si256((const __m256i *)(qg + oo[l])), ot[l]));
    } else if (inl) {
      const uint8_t *qg = qb + TC_QOFF(r);
      k = _mm256_setzero_si256();
      __m256i dv[8];
#pragma GCC unroll 8
      for (int l = 0; l < D; ++l) {
        const int o = (1 << l) - 1;
        dv[l] = tc_qlevel(qg, co + o, tb + o, l, k, dv);
        k = _mm256_sub_epi8(_mm256_add_epi8(k, k), dv[l]);
      }
    } else {
      k = cx ? tc_qkeysc(qb + TC_QOFF(r), co, tb, cx, D, C) : tc_qkeys(qb + TC_QOFF(r), co, tb, D);
    }
    if (lb && nb - r >= 32) {  /* the planes hold TC_AT's bytes (arrays_derived.py leaf_planes) */
      if (sizeof(TC_AT) == 4) tc_qleaf32(lb, D > 4 ? (int64_t)1 << D : 16, k, (float *)(acc + r), D);
      else tc_qleaf64(lb, D > 4 ? (int64_t)1 << D : 16, k, (double *)(acc + r), D);
      continue;
    }
    AFN(qleaves)(k, r, nb, lidx, lv, acc);
  }
}

#if TC_QVEC == 2
/* 64 rows' leaf slots k (bytes) -> their leaf values added into acc, or stored into lidx (acc
 * NULL); rows at or past nb dropped */
static inline __attribute__((always_inline)) TC_ATTR void AFN(zleaves)(
    __m512i k, int64_t r, int64_t nb, int32_t *lidx, const TC_AT *lv, TC_AT *acc) {
  uint8_t tmp[64];
  _mm512_storeu_si512((void *)tmp, k);
  const int64_t m = nb - r < 64 ? nb - r : 64;
  if (acc) for (int64_t i = 0; i < m; ++i) acc[r + i] += lv[tmp[i]];
  else for (int64_t i = 0; i < m; ++i) lidx[r + i] = tmp[i];
}

/* the same, by gathers (16 rows a float32 gather, 8 a float64 one) when all 64 rows count and
 * acc is given; leaves added one per row, as above */
static inline __attribute__((always_inline)) TC_ATTR void AFN(zleavesg)(
    __m512i k, int64_t r, int64_t nb, int32_t *lidx, const TC_AT *lv, TC_AT *acc) {
  if (!acc || nb - r < 64) {
    AFN(zleaves)(k, r, nb, lidx, lv, acc);
    return;
  }
  const __m128i kq[4] = {_mm512_extracti32x4_epi32(k, 0), _mm512_extracti32x4_epi32(k, 1),
                         _mm512_extracti32x4_epi32(k, 2), _mm512_extracti32x4_epi32(k, 3)};
  for (int q = 0; q < 4; ++q) {
    const __m512i j = _mm512_cvtepu8_epi32(kq[q]);
    TC_AT *a = acc + r + 16 * q;
    if (sizeof(TC_AT) == 4) {
      _mm512_storeu_ps((float *)a, _mm512_add_ps(_mm512_loadu_ps((const float *)a),
                                                 _mm512_i32gather_ps(j, (const float *)lv, 4)));
    } else {
      _mm512_storeu_pd((double *)a, _mm512_add_pd(_mm512_loadu_pd((const double *)a),
          _mm512_i32gather_pd(_mm512_castsi512_si256(j), (const double *)lv, 8)));
      _mm512_storeu_pd((double *)a + 8, _mm512_add_pd(_mm512_loadu_pd((const double *)a + 8),
          _mm512_i32gather_pd(_mm512_extracti64x4_epi64(j, 1), (const double *)lv, 8)));
    }
  }
}

/* 64 rows' leaf slots k -> their leaves: from the tree's L byte planes lb (acc given) when all
 * 64 rows count, else as zleavesg */
static inline __attribute__((always_inline)) TC_ATTR void AFN(zleafk)(
    __m512i k, int64_t r, int64_t nb, int32_t *lidx, const TC_AT *lv, TC_AT *acc,
    const uint8_t *lb, const int L) {
  if (lb && nb - r >= 64) {  /* the planes hold TC_AT's bytes (arrays_derived.py leaf_planes) */
    if (sizeof(TC_AT) == 4) tc_zleaf32(lb, L, k, (float *)(acc + r));
    else tc_zleaf64(lb, L, k, (double *)(acc + r));
    return;
  }
  AFN(zleavesg)(k, r, nb, lidx, lv, acc);
}

/* one heap tree of depth D <= 6 over a block's rows, 64 at a time (qb holds whole 64-row
 * groups: run rounds the block up). The level's thresholds are loaded once per tree. */
static inline __attribute__((always_inline)) TC_ATTR void AFN(zheap_d)(
    const int32_t *co, const int8_t *tb, const int D, const uint8_t *qb, int64_t gs, int64_t nb,
    int32_t *lidx, const TC_AT *lv, TC_AT *acc, const uint8_t *lb) {
  __m512i thr[6];
#pragma GCC unroll 6
  for (int l = 0; l < D; ++l)
    thr[l] = l ? tc_zfirst(tb + (1 << l) - 1, 1 << l) : _mm512_set1_epi8(tb[0]);
  const int L = D > 4 ? 1 << D : 16;
  const __m512i one = _mm512_set1_epi8(1);
  int64_t r = 0;
  for (; r + 128 <= nb; r += 128) {
    const uint8_t *qg = qb + (r >> 6) * gs;
    __m512i ka = _mm512_setzero_si512(), kb = ka;
    tc_zm dm[6];
#pragma GCC unroll 6
    for (int l = 0; l < D; ++l) {
      const tc_zm g = tc_zlevel2(qg, gs, co + (1 << l) - 1, thr[l], l, ka, kb, dm);
      dm[l] = g;
      ka = _mm512_add_epi8(ka, ka);
      ka = _mm512_mask_add_epi8(ka, g.a, ka, one);
      kb = _mm512_add_epi8(kb, kb);
      kb = _mm512_mask_add_epi8(kb, g.b, kb, one);
    }
    if (lb) {
      if (sizeof(TC_AT) == 4) {
        tc_zleaf32(lb, L, ka, (float *)(acc + r));
        tc_zleaf32(lb, L, kb, (float *)(acc + r + 64));
      } else {
        tc_zleaf64(lb, L, ka, (double *)(acc + r));
        tc_zleaf64(lb, L, kb, (double *)(acc + r + 64));
      }
      continue;
    }
    AFN(zleavesg)(ka, r, nb, lidx, lv, acc);
    AFN(zleavesg)(kb, r + 64, nb, lidx, lv, acc);
  }
  for (; r < nb; r += 64) {
    const uint8_t *qg = qb + (r >> 6) * gs;
    __m512i k = _mm512_setzero_si512();
    __mmask64 dm[6];
#pragma GCC unroll 6
    for (int l = 0; l < D; ++l) {
      const __mmask64 g = tc_zleveld(qg, co + (1 << l) - 1, tb + (1 << l) - 1, 0, l, k, 128, dm);
      dm[l] = g;
      k = _mm512_add_epi8(k, k);
      k = _mm512_mask_add_epi8(k, g, k, one);
    }
    AFN(zleafk)(k, r, nb, lidx, lv, acc, lb, L);
  }
}
#endif

#if TC_QVEC == 2
/* a heap of depth 7 or 8 over a block's rows, 64 at a time, with the column mux (cx, C) */
static inline __attribute__((always_inline)) TC_ATTR void AFN(zheap_deep)(
    const int32_t *co, const int8_t *tb, const uint8_t *cx, const int C, const int D,
    const uint8_t *qb, int64_t gs, int64_t nb, int32_t *lidx, const TC_AT *lv, TC_AT *acc,
    const uint8_t *lb) {
  const __m512i one = _mm512_set1_epi8(1);
  for (int64_t r = 0; r < nb; r += 64) {
    const uint8_t *qg = qb + (r >> 6) * gs;
    __m512i k = _mm512_setzero_si512();
    __mmask64 dm[8];
#pragma GCC unroll 8
    for (int l = 0; l < D; ++l) {
      const int o = (1 << l) - 1;
      const __mmask64 g = tc_zleveld(qg, co + o, tb + o, cx + o, l, k, C, dm);
      dm[l] = g;
      k = _mm512_add_epi8(k, k);
      k = _mm512_mask_add_epi8(k, g, k, one);
    }
    AFN(zleafk)(k, r, nb, lidx, lv, acc, lb, 1 << D);
  }
}
#endif

#if TC_QVEC == 2
/* a symmetric (oblivious) heap of depth D <= 8 (arrays_derived.oblivious_heaps: every slot of
 * level l reads the column and threshold byte of the level's first slot o = 2^l - 1): per level
 * one load of the column's 64 row bytes, one compare with the broadcast byte, k = 2k + bit. The
 * slot zheap_d / zheap_deep would select holds the same column and byte: the same leaf slot k,
 * the same leaves added in the same order. */
static inline __attribute__((always_inline)) TC_ATTR void AFN(zobl)(
    const int32_t *co, const int8_t *tb, const int D, const uint8_t *qb, int64_t gs, int64_t nb,
    int32_t *lidx, const TC_AT *lv, TC_AT *acc, const uint8_t *lb) {
  __m512i thr[8];
  uint32_t off[8];
#pragma GCC unroll 8
  for (int l = 0; l < D; ++l) {
    thr[l] = _mm512_set1_epi8(tb[(1 << l) - 1]);
    off[l] = (uint32_t)co[(1 << l) - 1];
  }
  const int L = D > 4 ? 1 << D : 16;
  const __m512i one = _mm512_set1_epi8(1);
  for (int64_t r = 0; r < nb; r += 64) {
    const uint8_t *qg = qb + (r >> 6) * gs;
    __m512i k = _mm512_setzero_si512();
#pragma GCC unroll 8
    for (int l = 0; l < D; ++l) {
      const __mmask64 g = _mm512_cmpgt_epi8_mask(tc_z64(qg, gs, off[l]), thr[l]);
      k = _mm512_add_epi8(k, k);
      k = _mm512_mask_add_epi8(k, g, k, one);
    }
    AFN(zleafk)(k, r, nb, lidx, lv, acc, lb, L);
  }
}
#endif

static TC_ATTR void AFN(qheap_vec)(const int32_t *co, const int8_t *tb, int D, const uint8_t *qb,
                                  int64_t gs, int64_t nb, int32_t *lidx, const TC_AT *lv, TC_AT *acc,
                                  const uint8_t *lb, const uint8_t *cx, int C, int obl) {
  (void)obl;
#if TC_QVEC == 2
  switch (obl ? D : 0) {  /* symmetric trees: one column a level */
    case 1: AFN(zobl)(co, tb, 1, qb, gs, nb, lidx, lv, acc, lb); return;
    case 2: AFN(zobl)(co, tb, 2, qb, gs, nb, lidx, lv, acc, lb); return;
    case 3: AFN(zobl)(co, tb, 3, qb, gs, nb, lidx, lv, acc, lb); return;
    case 4: AFN(zobl)(co, tb, 4, qb, gs, nb, lidx, lv, acc, lb); return;
    case 5: AFN(zobl)(co, tb, 5, qb, gs, nb, lidx, lv, acc, lb); return;
    case 6: AFN(zobl)(co, tb, 6, qb, gs, nb, lidx, lv, acc, lb); return;
    case 7: AFN(zobl)(co, tb, 7, qb, gs, nb, lidx, lv, acc, lb); return;
    case 8: AFN(zobl)(co, tb, 8, qb, gs, nb, lidx, lv, acc, lb); return;
    default: break;
  }
  switch (D) {  /* 64 rows a vector (deeper trees: the AVX2 walk below, 32 rows) */
    case 1: AFN(zheap_d)(co, tb, 1, qb, gs, nb, lidx, lv, acc, lb); return;
    case 2: AFN(zheap_d)(co, tb, 2, qb, gs, nb, lidx, lv, acc, lb); return;
    case 3: AFN(zheap_d)(co, tb, 3, qb, gs, nb, lidx, lv, acc, lb); return;
    case 4: AFN(zheap_d)(co, tb, 4, qb, gs, nb, lidx, lv, acc, lb); return;
    case 5: AFN(zheap_d)(co, tb, 5, qb, gs, nb, lidx, lv, acc, lb); return;
    case 6: AFN(zheap_d)(co, tb, 6, qb, gs, nb, lidx, lv, acc, lb); return;
    default: break;
  }
  if (cx && (D == 7 || D == 8)) {  /* deeper: 64 rows too where the column mux applies */
#define TC_ZDEEP(DD, CC) \
    if (D == DD && C == CC) { AFN(zheap_deep)(co, tb, cx, CC, DD, qb, gs, nb, lidx, lv, acc, lb); return; }
    TC_ZDEEP(7, 16) TC_ZDEEP(7, 17) TC_ZDEEP(7, 32) TC_ZDEEP(7, 33) TC_ZDEEP(7, 64) TC_ZDEEP(7, 65)
    TC_ZDEEP(8, 16) TC_ZDEEP(8, 17) TC_ZDEEP(8, 32) TC_ZDEEP(8, 33) TC_ZDEEP(8, 64) TC_ZDEEP(8, 65)
#undef TC_ZDEEP
  }
  if (!cx && D == 7) { AFN(zheap_deep)(co, tb, 0, 256, 7, qb, gs, nb, lidx, lv, acc, lb); return; }
  if (!cx && D == 8) { AFN(zheap_deep)(co, tb, 0, 256, 8, qb, gs, nb, lidx, lv, acc, lb); return; }
#endif
  switch (obl ? D : 0) {  /* symmetric trees: one column a level */
    case 1: AFN(qheap_d)(co, tb, 1, qb, gs, nb, lidx, lv, acc, lb, 2, 0, 0); return;
    case 2: AFN(qheap_d)(co, tb, 2, qb, gs, nb, lidx, lv, acc, lb, 2, 0, 0); return;
    case 3: AFN(qheap_d)(co, tb, 3, qb, gs, nb, lidx, lv, acc, lb, 2, 0, 0); return;
    case 4: AFN(qheap_d)(co, tb, 4, qb, gs, nb, lidx, lv, acc, lb, 2, 0, 0); return;
    case 5: AFN(qheap_d)(co, tb, 5, qb, gs, nb, lidx, lv, acc, lb, 2, 0, 0); return;
    case 6: AFN(qheap_d)(co, tb, 6, qb, gs, nb, lidx, lv, acc, lb, 2, 0, 0); return;
    case 7: AFN(qheap_d)(co, tb, 7, qb, gs, nb, lidx, lv, acc, lb, 2, 0, 0); return;
    case 8: AFN(qheap_d)(co, tb, 8, qb, gs, nb, lidx, lv, acc, lb, 2, 0, 0); return;
    default: break;
  }
  if (cx && (C & ~1) == 16 && (D == 5 || D == 6)) {  /* level 5 by column: the call costs less */
    AFN(qheap_d)(co, tb, D, qb, gs, nb, lidx, lv, acc, lb, 0, cx, C);
    return;
  }
  switch (D) {
    case 1: AFN(qheap_d)(co, tb, 1, qb, gs, nb, lidx, lv, acc, lb, 1, 0, 0); break;
    case 2: AFN(qheap_d)(co, tb, 2, qb, gs, nb, lidx, lv, acc, lb, 1, 0, 0); break;
    case 3: AFN(qheap_d)(co, tb, 3, qb, gs, nb, lidx, lv, acc, lb, 1, 0, 0); break;
    case 4: AFN(qheap_d)(co, tb, 4, qb, gs, nb, lidx, lv, acc, lb, 1, 0, 0); break;
    case 5: AFN(qheap_d)(co, tb, 5, qb, gs, nb, lidx, lv, acc, lb, 1, 0, 0); break;
    case 6: AFN(qheap_d)(co, tb, 6, qb, gs, nb, lidx, lv, acc, lb, 1, 0, 0); break;
    default: AFN(qheap_d)(co, tb, D, qb, gs, nb, lidx, lv, acc, lb, 0, cx, C); break;
  }
}
#undef TC_QHEAP_DEFINE
#endif

/* ---- the interval walk (trees of <= 255 leaves, any shape; see arrays_derived.py bitvec_tables) ----
 * Leaves are numbered left to right; a row going right at a node rules out the leaves of the
 * node's left subtree, an interval [lo, hi). The exit leaf is the first leaf no such interval
 * covers (QuickScorer's observation), so with the tree's nodes sorted by lo, one sweep finds it
 * for 32 rows at once: pos = 0; at each node, if the row goes right and lo <= pos, then
 * pos = max(pos, hi). Every node is evaluated (a byte compare, or a set lookup at categorical
 * nodes; no gathers); the
 * positions are signed bytes: as they are for trees of <= 128 leaves (lo - 1 >= -1), biased by
 * bias = -127 (T->bv_bias) where a tree has 129-255 (pos starts at -127, lo - 1 and hi are
 * biased alike, the leaf is pos + 127). */
/* (Leaves from byte planes, as the heap walk takes them, measured here too: no change on HGB
 * or LightGBM, 1.01x / 1.00x; the sweep's dependency chain sets the pace.) */
static inline __attribute__((always_inline)) TC_ATTR void FN(bvtree)(
    const int32_t *co, const int8_t *tb, const int8_t *lo1, const int8_t *hi, const int32_t *cat,
    const uint8_t *sets, int64_t nn, const uint8_t *qb, int64_t gs, int64_t nb, int32_t *lidx,
    const TC_AT *lv, TC_AT *acc, int8_t bias) {
  /* four 32-row groups at once where the block has them (interval-walk blocks are 4x a tree's
   * nodes: 256 rows for 63-leaf trees), else two, else one. The sweep is a dependency chain
   * through pos (compare, and, max per node): independent chains keep the vector units busy.
   * One process, four against two at once: LightGBM 0.92x-0.98x the time, HGB 0.97x (the
   * per-node broadcasts shared by more rows; still no spills) */
#if TC_QVEC == 2
  if (nb <= 64) {
    /* one 64-row group: its two 32-row halves (column stride TC_QCS * 32) as two 256-bit
     * chains, one for <= 32 rows. The sweep is a chain through pos, and the 256-bit compare,
     * and, max is a shorter chain than the masked 512-bit one: a block of 8 rows twice as fast */
    __m256i p[2];
    const int G = nb > 32 ? 2 : 1;
    tc_bvsweep(qb, 32, co, tb, lo1, hi, cat, sets, nn, p, G, bias);
    for (int k = 0; k < G; ++k)
      AFN(qleaves)(_mm256_sub_epi8(p[k], _mm256_set1_epi8(bias)), 32 * k, nb, lidx, lv, acc);
    return;
  }
  /* 64-row groups (qb holds whole ones: run rounds the block up), 4, 2 or 1 at once */
  for (int64_t r = 0; r < nb;) {
    const int G = nb - r > 192 ? 4 : nb - r > 64 ? 2 : 1;
    __m512i p[4];
    tc_zsweep(qb + (r >> 6) * gs, gs, co, tb, lo1, hi, cat, sets, nn, p, G, bias);
    for (int k = 0; k < G; ++k, r += 64)
      AFN(zleavesg)(_mm512_sub_epi8(p[k], _mm512_set1_epi8(bias)), r, nb, lidx, lv, acc);
  }
  return;
#endif
  for (int64_t r = 0; r < nb;) {
    const int G = nb - r > 96 ? 4 : nb - r > 32 ? 2 : 1;  /* groups holding a row: qb has them */
    __m256i p[4];
    tc_bvsweep(qb + (r >> 5) * gs, gs, co, tb, lo1, hi, cat, sets, nn, p, G, bias);
    for (int k = 0; k < G; ++k, r += 32)
      AFN(qleaves)(_mm256_sub_epi8(p[k], _mm256_set1_epi8(bias)), r, nb, lidx, lv, acc);
  }
}

/* below this many rows the AVX-512 interval walk takes a row at a time (zbvrows_w1): 500
 * LightGBM trees, batches of 10, 16, 20, 24 rows, us: 53.7, 79.5, 97.1, 114.9 against the
 * 64-row sweep's 92.6, 108.9, 85.0, 88.9 (AMD Zen 4, one process) */
#ifndef TC_BVROWS_MAX
#define TC_BVROWS_MAX 17
#endif
/* forests with the lanes table (bv_zl) below this many rows take zbvlanes (500 LightGBM
 * trees: 17 / 24 / 27 / 32 / 40 rows a call 1.46x / 1.11-1.16x / 1.07x / 0.88x / 0.83x
 * against the 64-row sweep; HGB with categorical nodes 16 / 24 rows 1.24x / 1.00x; AMD Zen 4,
 * one process, 2026-11-28) */
#ifndef TC_BVLANES_MAX
#define TC_BVLANES_MAX 28
#endif
/* with categorical nodes (bv_catd) below this many: HGB, 200 trees of 31 leaves, 4 categorical
 * features, us a call of 8, 12, 16 rows: 19.8, 39.1, 48.5 against the 64-row sweep's 23.0,
 * 25.4, 25.5 (AMD Zen 4, one process, 2026-11-28) */
#ifndef TC_BVCROWS_MAX
#define TC_BVCROWS_MAX 9
#endif
/* the largest bv_catw (arrays_derived.py: CAT_ROWS_MAX nodes' bits, 16 bytes past them, a
 * multiple of 64) */
#define TC_CATW_MAX 1088
#if TC_QVEC == 2
/* a row's bytes of its first 128 columns (bin 0 past them) into row[128], the few-row interval
 * walks' lookup table; with cr, the row's categorical decisions too: per category-code column,
 * its code's row of catd (bv_catw bytes; bit k: categorical node k sends the code right) OR-ed
 * into cr */
static inline __attribute__((always_inline)) TC_ATTR void FN(zrowcats)(
    const tc_tables *T, const uint8_t *qg, uint8_t *row, const uint8_t *catd, uint8_t *cr) {
  const int e = T->q_ncols < 128 ? T->q_ncols : 128;
  _mm512_storeu_si512((void *)row, _mm512_set1_epi8((char)0x80));
  _mm512_storeu_si512((void *)(row + 64), _mm512_set1_epi8((char)0x80));
  for (int c = 0; c < e; ++c) row[c] = qg[(int64_t)c * TC_QR];
  if (!cr) return;
  const int64_t W = T->bv_catw;
  for (int64_t k = 0; k < W; k += 64) _mm512_store_si512((void *)(cr + k), _mm512_setzero_si512());
  for (int c = 0, j = 0; c < e; ++c) {
    if (!T->q_kind[c]) continue;
    const uint8_t *d = catd + ((int64_t)j++ * 256 + row[c]) * W;
    for (int64_t k = 0; k < W; k += 64)
      _mm512_store_si512((void *)(cr + k), _mm512_or_si512(_mm512_load_si512((const void *)(cr + k)),
                                                           _mm512_loadu_si512((const void *)(d + k))));
  }
}

/* few rows, AVX-512, interval walk of trees of <= 64 leaves (bv_lmask; the other ISAs and
 * other forests walk the float node tables, compact_trees in arrays_impl.c): per tree one vpermi2b by the nodes' columns (h_qc7) picks the row's byte at each
 * of its <= 63 nodes and one compare with their thresholds gives every node's decision as a
 * mask; the nodes where the row goes right rule out their left subtrees' leaves, so the OR of
 * those nodes' leaf masks (masked loads, 8 nodes a load, the decisions as the load masks)
 * covers every leaf left of the exit leaf and not the exit leaf itself (bitvec_tables): the
 * exit leaf is the lowest clear bit. No chain through the nodes (the sweep's pos) and no
 * loads on a walk's path: the trees' work overlaps. Leaves added in tree order, as the float
 * walk adds them. Measured (AMD EPYC Zen 4, one process, kernel time, one row, 2026-11-24): 500
 * LightGBM trees of 63 leaves, 100 float64 columns: 17.0 us by the float node walk (8 trees in
 * flight over 24-byte records, 744 KB of them), 7.3 us here with the leaf-mask loads in a loop
 * over the tree's node count, 6.7 us with the quantiser's level table (quantise), 5.5 us with
 * the eight loads unrolled (masked-off groups load nothing) and OR-ed as a tree. What bounds it
 * is throughput, not latency: prefetching the tables of the tree 4 ahead made it 0.88x as
 * fast; about 9 ns a tree, about a quarter of the kernel the quantiser (100 columns). */
/* cats: categorical nodes too (bv_catd / bv_catk, arrays_derived.py category_rows): before the
 * trees, the row's codes' rows of bv_catd OR-ed into cr (bit k: categorical node k sends the
 * row right); per tree its nodes' bits [k0, k0 + popcount(kc)) of cr, from two unaligned 8-byte
 * loads, deposited (pdep) at its categorical nodes' positions kc over the byte compares'
 * decisions there. A tree's categorical nodes are consecutive in that numbering, so k0 is its
 * first one's h_qcat. HGB, 200 trees of 31 leaves, 4 categorical features, one row, kernel:
 * 5.68 -> 2.32 us against the float walk (AMD Zen 4, one process, 2026-11-28); a gather of the
 * sets' words per 16 nodes instead: 1.02x. */
static inline __attribute__((always_inline)) TC_ATTR void FN(zbvrows_g)(
    const tc_tables *T, const uint8_t *qb, int64_t gs, int64_t nb, TC_AT *ab, const int cats) {
  const int64_t no = T->n_outputs, nt = T->n_trees;
  const TC_AT *lv = (const TC_AT *)T->bv_leaf;
  _Alignas(64) uint8_t cr[TC_CATW_MAX];  /* a row's categorical decisions (bv_catd) */
  for (int64_t r = 0; r < nb; ++r) {
    const uint8_t *qg = qb + TC_QOFF(r);
    uint8_t row[128];
    FN(zrowcats)(T, qg, row, T->bv_catd, cats ? cr : 0);
    const __m512i q0 = _mm512_loadu_si512((const void *)row);
    const __m512i q1 = _mm512_loadu_si512((const void *)(row + 64));
    TC_AT *a = ab + r * no;
    TC_AT one = a[0];  /* one output: the margin in a register */
    for (int64_t t = 0; t < nt; ++t) {
      const int64_t nn = T->bv_nint[t], n0 = T->tree_node[t];
      uint32_t leaf = 0;
      if (nn > 0) {  /* nn <= 63 */
        const __mmask64 kn = ((__mmask64)1 << nn) - 1;
        const __m512i x = _mm512_permutex2var_epi8(q0, _mm512_maskz_loadu_epi8(kn, T->h_qc7 + n0), q1);
        uint64_t g = (uint64_t)_mm512_mask_cmpgt_epi8_mask(kn, x, _mm512_maskz_loadu_epi8(kn, T->h_qthr + n0));
        if (cats) {  /* categorical nodes: the row's bits [k0, k0 + popcount) at their positions */
          const uint64_t kc = T->bv_catk[t];
          if (kc) {
            const int64_t k0 = T->h_qcat[n0 + __builtin_ctzll(kc)];
            const uint8_t *p = cr + (k0 >> 3);
            uint64_t lo, hi;
            memcpy(&lo, p, 8);
            memcpy(&hi, p + 8, 8);
            const unsigned s = (unsigned)(k0 & 7);
            g = (g & ~kc) | _pdep_u64((lo >> s) | ((hi << 1) << (63 - s)), kc);
          }
        }
        const uint64_t *lm = T->bv_lmask + n0;
#define TC_LM(k) _mm512_maskz_loadu_epi64((__mmask8)(g >> (8 * (k))), lm + 8 * (k))
        const __m512i c = _mm512_or_si512(
            _mm512_or_si512(_mm512_or_si512(TC_LM(0), TC_LM(1)), _mm512_or_si512(TC_LM(2), TC_LM(3))),
            _mm512_or_si512(_mm512_or_si512(TC_LM(4), TC_LM(5)), _mm512_or_si512(TC_LM(6), TC_LM(7))));
#undef TC_LM
        leaf = (uint32_t)__builtin_ctzll(~(uint64_t)_mm512_reduce_or_epi64(c));
      }
      const TC_AT v = lv[T->tree_leaf[t] + leaf];
      if (no == 1) one += v;
      else a[T->tree_out[t]] += v;
    }
    if (no == 1) a[0] = one;
  }
}
/* ---- trees in lanes, interval walk (few rows, AVX-512: bv_zl) ---------------------------------
 * The interval sweep (bvtree) of one row over 64 trees at once, a byte lane a tree: per node
 * slot k of a group of 64 trees (each tree's k-th node in bitvec_tables' order, sorted by lo)
 * one vpermi2b picks the row's byte of each tree's column from the row's 128-byte table
 * (zbvrows_g's), a compare with the thresholds gives the 64 decisions, a masked compare of
 * the positions with lo - 1 and a masked byte max move pos to hi where the row goes right and
 * lo <= pos (tc_zsweep_g's recurrence, the lanes trees instead of rows). A tree shorter than
 * its group's longest is padded with slots that never fire (threshold 127, lo - 1 = 127).
 * After the group's last slot each lane's pos is its tree's exit leaf; the leaf values are
 * then added one by one in tree order (the same adds, in the same order and dtype, as
 * zbvrows_g's). Two groups are swept together (two independent chains through pos). Per node
 * slot of 64 trees: 4 aligned 64-byte loads (256 bytes: 4 bytes a node) and 4 vector
 * instructions, against zbvrows_g's ~10 bytes a node (node bytes, thresholds, 8-byte leaf
 * masks) and per-tree mask work. Measured (AMD EPYC Zen 4 guest, one process, paired against
 * zbvrows_g, thread CPU, 2026-11-28): 500 LightGBM trees of 63 leaves, 50 columns, one row:
 * kernel 5.9 -> 2.5 us, the walk and adds 4.4 -> 1.5 us (TSC pieces: 5,600 cycles for the
 * 124 KB table, ~22 bytes a cycle from L2: the bound; the quantiser 0.8 us is now a third of
 * the kernel). Tried and dropped: four groups at once 0.99x; the previous pair's adds
 * interleaved into the next pair's sweep (two a slot, indices by vector) 0.95-1.01x. Up to
 * TC_BVLANES_MAX - 1 rows: the 64-row sweep costs ~58 us a call up to 32 rows, this ~2.1 us
 * a row (24 rows 1.16x, 32 rows 0.88x).
 * cats: categorical nodes (bv_zcatd / bv_zcatk / bv_zk0, as zbvrows_g's bv_catd with the
 * nodes numbered in (slot, lane) order): their thresholds are 127 (the byte compare never
 * fires), and per slot its categorical lanes' bits [k0, k0 + popcount(kc)) of the row's
 * decisions cr are deposited (pdep) at those lanes. HGB, 200 trees of 31 leaves, 4 categorical
 * features, one row, kernel: 2.34 -> 0.76 us against zbvrows_g (same machine and day). */
#ifndef TC_ZBVL_ONCE
#define TC_ZBVL_ONCE
static inline __attribute__((always_inline)) TC_ATTR __m512i tc_zbvstep(__m512i p, const uint8_t *s,
                                                                        __m512i q0, __m512i q1,
                                                                        __mmask64 cat) {
  const __m512i x = _mm512_permutex2var_epi8(q0, _mm512_load_si512((const void *)s), q1);
  /* right: the byte compare, or a categorical lane's decision (cat) */
  const __mmask64 r = _mm512_cmpgt_epi8_mask(x, _mm512_load_si512((const void *)(s + 64))) | cat;
  /* lo <= pos  <=>  pos > lo - 1 (all values < 128: the signed compare is right) */
  const __mmask64 m = _mm512_mask_cmpgt_epi8_mask(r, p, _mm512_load_si512((const void *)(s + 128)));
  return _mm512_mask_max_epu8(p, m, p, _mm512_load_si512((const void *)(s + 192)));
}
#endif
#ifndef TC_ZBVL_G
#define TC_ZBVL_G 2  /* groups swept at once (4: 0.99x) */
#endif
static inline __attribute__((always_inline)) TC_ATTR void FN(zbvlanes_g)(
    const tc_tables *T, const uint8_t *qb, int64_t gs, int64_t nb, TC_AT *ab, const int cats) {
  const int64_t no = T->n_outputs, nt = T->n_trees, ng = (nt + 63) >> 6;
  const TC_AT *lv = (const TC_AT *)T->bv_leaf;
  const uint8_t *zl = T->bv_zl;
  const int64_t *zo = T->bv_zlo;
  enum { G = TC_ZBVL_G };
  _Alignas(64) uint8_t pos[64 * G];
  _Alignas(64) uint8_t cr[TC_CATW_MAX];  /* a row's categorical decisions (bv_zcatd) */
  for (int64_t r = 0; r < nb; ++r) {
    const uint8_t *qg = qb + TC_QOFF(r);
    uint8_t row[128];
    FN(zrowcats)(T, qg, row, T->bv_zcatd, cats ? cr : 0);
    const __m512i q0 = _mm512_loadu_si512((const void *)row);
    const __m512i q1 = _mm512_loadu_si512((const void *)(row + 64));
    /* slot i's categorical lanes' decisions: its bits [k0, k0 + popcount) of cr deposited at
     * its categorical lanes (their byte compares never fire: threshold 127) */
#define TC_ZBVCAT(i)                                                                            \
  ({                                                                                            \
    const uint64_t kc_ = T->bv_zcatk[i];                                                        \
    uint64_t d_ = 0;                                                                            \
    if (kc_) {                                                                                  \
      const int64_t k0_ = T->bv_zk0[i];                                                         \
      uint64_t lo_, hi_;                                                                        \
      memcpy(&lo_, cr + (k0_ >> 3), 8);                                                         \
      memcpy(&hi_, cr + (k0_ >> 3) + 8, 8);                                                     \
      const unsigned s_ = (unsigned)(k0_ & 7);                                                  \
      d_ = _pdep_u64((lo_ >> s_) | ((hi_ << 1) << (63 - s_)), kc_);                             \
    }                                                                                           \
    (__mmask64)d_;                                                                              \
  })
    TC_AT *a = ab + r * no;
    TC_AT one = a[0];  /* one output: the margin in a register */
    for (int64_t g = 0; g < ng; g += G) {
      /* G groups at once (groups past the last one: no slots) */
      const uint8_t *s[G];
      int64_t ns[G], z[G], m = INT64_MAX;
      __m512i p[G];
#pragma GCC unroll 4
      for (int i = 0; i < G; ++i) {
        const int in = g + i < ng;
        z[i] = zo[in ? g + i : g];
        s[i] = zl + 256 * z[i];
        ns[i] = in ? zo[g + i + 1] - zo[g + i] : 0;
        m = ns[i] < m ? ns[i] : m;
        p[i] = _mm512_setzero_si512();
      }
      int64_t k = 0;
      for (; k < m; ++k) {
#pragma GCC unroll 4
        for (int i = 0; i < G; ++i)
          p[i] = tc_zbvstep(p[i], s[i] + 256 * k, q0, q1, cats ? TC_ZBVCAT(z[i] + k) : 0);
      }
#pragma GCC unroll 4
      for (int i = 0; i < G; ++i) {
        for (int64_t x = k; x < ns[i]; ++x)
          p[i] = tc_zbvstep(p[i], s[i] + 256 * x, q0, q1, cats ? TC_ZBVCAT(z[i] + x) : 0);
        _mm512_store_si512((void *)(pos + 64 * i), p[i]);
      }
      const int64_t t0 = 64 * g, e = nt - t0 < 64 * G ? nt - t0 : 64 * G;
      if (no == 1)
        for (int64_t j = 0; j < e; ++j) one += lv[T->tree_leaf[t0 + j] + pos[j]];
      else
        for (int64_t j = 0; j < e; ++j) a[T->tree_out[t0 + j]] += lv[T->tree_leaf[t0 + j] + pos[j]];
    }
#undef TC_ZBVCAT
    if (no == 1) a[0] = one;
  }
}
static inline __attribute__((always_inline)) TC_ATTR void FN(zbvlanes)(
    const tc_tables *T, const uint8_t *qb, int64_t gs, int64_t nb, TC_AT *ab) {
  if (T->bv_zcatd) FN(zbvlanes_g)(T, qb, gs, nb, ab, 1);
  else FN(zbvlanes_g)(T, qb, gs, nb, ab, 0);
}
static inline __attribute__((always_inline)) TC_ATTR void FN(zbvrows_w1)(
    const tc_tables *T, const uint8_t *qb, int64_t gs, int64_t nb, TC_AT *ab) {
  if (T->bv_catd) FN(zbvrows_g)(T, qb, gs, nb, ab, 1);
  else FN(zbvrows_g)(T, qb, gs, nb, ab, 0);
}
#endif

#if TC_QVEC == 1
/* The lanes walk (zbvlanes) on AVX2: 32 trees a vector, each 64-tree group of bv_zl as its two
 * 32-byte halves (the same table). AVX2 has no 128-byte byte permute: the row's byte at each
 * tree's column comes from its table's 16-byte chunks (those the columns reach), each by a
 * vpshufb whose index is the column with bit 7 set unless the column lies in that chunk (xor
 * the chunk's number into bits 4-6, saturating add 0x70), OR-ed; then the sweep's compare,
 * and, compare, and, max (tc_bvsweep_g). Numeric forests only (bv_zcatd NULL). 500 LightGBM
 * trees of 63 leaves, 50 columns (4 chunks), one row, kernel: 14.5 -> 6.5 us against the float
 * node walk (AMD Zen 4 forced to AVX2, one process, paired, 2026-11-28): ~16 instructions a
 * slot of 32 trees for the lookup against the AVX-512 walk's one vpermi2b. */
#ifndef TC_QBVL_ONCE
#define TC_QBVL_ONCE
static inline __attribute__((always_inline)) TC_ATTR __m256i tc_qbvstep(__m256i p, const uint8_t *s,
                                                                        const __m256i *ch, int nch) {
  const __m256i idx = _mm256_loadu_si256((const __m256i *)s);
  __m256i x = _mm256_shuffle_epi8(ch[0], _mm256_adds_epu8(idx, _mm256_set1_epi8(0x70)));
  for (int j = 1; j < nch; ++j)
    x = _mm256_or_si256(x, _mm256_shuffle_epi8(ch[j], _mm256_adds_epu8(_mm256_xor_si256(idx, _mm256_set1_epi8((char)(j << 4))),
                                                                      _mm256_set1_epi8(0x70))));
  const __m256i r = _mm256_cmpgt_epi8(x, _mm256_loadu_si256((const __m256i *)(s + 64)));
  /* lo <= pos  <=>  pos > lo - 1 (all values < 128: the signed compare is right) */
  const __m256i m = _mm256_and_si256(r, _mm256_cmpgt_epi8(p, _mm256_loadu_si256((const __m256i *)(s + 128))));
  return _mm256_max_epu8(p, _mm256_and_si256(m, _mm256_loadu_si256((const __m256i *)(s + 192))));
}
#endif
static inline __attribute__((always_inline)) TC_ATTR void FN(qbvlanes_n)(
    const tc_tables *T, const uint8_t *qb, int64_t gs, int64_t nb, TC_AT *ab, const int nch) {
  const int64_t no = T->n_outputs, nt = T->n_trees, ng = (nt + 63) >> 6;
  const int NC = T->q_ncols;
  const TC_AT *lv = (const TC_AT *)T->bv_leaf;
  const uint8_t *zl = T->bv_zl;
  const int64_t *zo = T->bv_zlo;
  _Alignas(64) uint8_t pos[64];
  for (int64_t r = 0; r < nb; ++r) {
    const uint8_t *qg = qb + TC_QOFF(r);
    _Alignas(16) uint8_t row[128];
    memset(row, 0x80, sizeof row);
    for (int c = 0, e = NC < 128 ? NC : 128; c < e; ++c) row[c] = qg[(int64_t)c * TC_QR];
    __m256i ch[8];
    for (int j = 0; j < nch; ++j) ch[j] = _mm256_broadcastsi128_si256(_mm_load_si128((const __m128i *)(row + 16 * j)));
    TC_AT *a = ab + r * no;
    TC_AT one = a[0];  /* one output: the margin in a register */
    for (int64_t g = 0; g < ng; ++g) {
      const uint8_t *s = zl + 256 * zo[g];
      __m256i p0 = _mm256_setzero_si256(), p1 = _mm256_setzero_si256();
      for (int64_t k = 0, n = zo[g + 1] - zo[g]; k < n; ++k) {
        p0 = tc_qbvstep(p0, s + 256 * k, ch, nch);
        p1 = tc_qbvstep(p1, s + 256 * k + 32, ch, nch);
      }
      _mm256_store_si256((__m256i *)pos, p0);
      _mm256_store_si256((__m256i *)(pos + 32), p1);
      const int64_t t0 = 64 * g, e = nt - t0 < 64 ? nt - t0 : 64;
      if (no == 1)
        for (int64_t j = 0; j < e; ++j) one += lv[T->tree_leaf[t0 + j] + pos[j]];
      else
        for (int64_t j = 0; j < e; ++j) a[T->tree_out[t0 + j]] += lv[T->tree_leaf[t0 + j] + pos[j]];
    }
    if (no == 1) a[0] = one;
  }
}
static inline __attribute__((always_inline)) TC_ATTR void FN(qbvlanes)(
    const tc_tables *T, const uint8_t *qb, int64_t gs, int64_t nb, TC_AT *ab) {
  /* the row table's chunks the columns reach (q_ncols <= 128), a constant per body */
  switch ((T->q_ncols + 15) >> 4) {
    case 1: FN(qbvlanes_n)(T, qb, gs, nb, ab, 1); break;
    case 2: FN(qbvlanes_n)(T, qb, gs, nb, ab, 2); break;
    case 3: FN(qbvlanes_n)(T, qb, gs, nb, ab, 3); break;
    case 4: FN(qbvlanes_n)(T, qb, gs, nb, ab, 4); break;
    case 5: case 6: FN(qbvlanes_n)(T, qb, gs, nb, ab, 6); break;
    default: FN(qbvlanes_n)(T, qb, gs, nb, ab, 8); break;
  }
}
/* below this many rows (500 LightGBM trees, AVX2, against the 32-row sweep, rows a call 2 / 7 /
 * 12 / 16: 1.97x / 1.39x / 0.83x / 0.59x; the sweep costs ~58 us a call up to 32 rows, this
 * ~5.7 us a row; AMD Zen 4, one process, 2026-11-28) */
#ifndef TC_QBVLANES_MAX
#define TC_QBVLANES_MAX 10
#endif
#endif

/* the trees over one quantised block, interval walk; leaves added per row in tree order.
 * cs > 0: ab is class-major (output o of row r at ab[o * cs + r]; every leaf a scalar), so a
 * tree's leaves go into one contiguous column like a single-output model's */
static TC_ATTR void FN(bvblock)(const tc_tables *T, const uint8_t *qb, int64_t gs, int64_t nb,
                                TC_AT *ab, int32_t *lidx, int64_t cs) {
  const int64_t no = cs ? 1 : T->n_outputs;
#if TC_QVEC == 2
  /* (categorical decisions' rows: a whole number of vectors that the row's buffer holds) */
  const int catw_ok = !T->bv_catd || (T->bv_catw > 0 && T->bv_catw <= TC_CATW_MAX && !(T->bv_catw & 63));
  if (nb < TC_BVLANES_MAX && T->bv_zl && !T->bv_bias && T->q_w1 && !cs && (!T->bv_zcatd || (T->bv_catd && catw_ok))) {
    /* few rows: 64 trees in lanes (zbvlanes) */
    FN(zbvlanes)(T, qb, gs, nb, ab);
    return;
  }
  if (nb < (T->bv_catd ? TC_BVCROWS_MAX : TC_BVROWS_MAX) && T->bv_lmask && T->q_w1 && !cs && catw_ok) {
    /* few rows: see zbvrows_w1 */
    FN(zbvrows_w1)(T, qb, gs, nb, ab);
    return;
  }
#endif
#if TC_QVEC == 1
  if (nb < TC_QBVLANES_MAX && T->bv_zl && !T->bv_bias && !T->bv_zcatd && T->q_w1 && !cs && T->q_ncols <= 128) {
    /* few rows: 32 trees in lanes (qbvlanes) */
    FN(qbvlanes)(T, qb, gs, nb, ab);
    return;
  }
#endif
  for (int64_t t = 0; t < T->n_trees; ++t) {
    const TC_AT *lv = (const TC_AT *)T->bv_leaf + T->tree_leaf[t];
    const int64_t o = cs ? 0 : T->tree_out[t], w = T->tree_width[t];
    TC_AT *a = cs ? ab + T->tree_out[t] * cs : ab;
    const int64_t nn = T->bv_nint[t];
    const int fuse = no == 1 && w == 1;
    if (nn == 0) {
      for (int64_t r = 0; r < nb; ++r) lidx[r] = 0;
    } else {
      const int64_t n0 = T->tree_node[t];
      FN(bvtree)(T->h_qcol + n0, T->h_qthr + n0, T->bv_lo1 + n0, T->bv_hi + n0, T->h_qcat + n0,
                 T->q_cat, nn, qb, gs, nb, lidx, lv, fuse ? a : 0, (int8_t)T->bv_bias);
      if (fuse) continue;
    }
    FN(add_leaves)(lv, lidx, 0, nb, a, no, o, w);
  }
}

#endif

#ifndef TC_QVEC_MIN
#define TC_QVEC_MIN 8
#endif
#ifndef TC_ZROWS_MAX
#define TC_ZROWS_MAX 12
#endif

/* few rows (single-row latency): row by row, four trees walked at once (independent chains
 * overlap their load latencies); leaves still added in tree order. Trees of width 1 only. */
static inline __attribute__((always_inline)) TC_ATTR void FN(qrows_w1)(
    const tc_tables *T, const uint8_t *qb, int64_t gs, int64_t nb, TC_AT *ab) {
  const int64_t no = T->n_outputs, nt = T->n_trees;
  const int32_t *dep = T->tree_depth;
  for (int64_t r = 0; r < nb; ++r) {
    const uint8_t *qg = qb + TC_QOFF(r);
    TC_AT *a = ab + r * no;
    int64_t t = 0;
    for (; t + 4 <= nt; t += 4) {
      const int D = dep[t];
      if (dep[t + 1] != D || dep[t + 2] != D || dep[t + 3] != D) break;
      const int32_t *c0 = T->h_qcol + T->tree_node[t], *c1 = T->h_qcol + T->tree_node[t + 1];
      const int32_t *c2 = T->h_qcol + T->tree_node[t + 2], *c3 = T->h_qcol + T->tree_node[t + 3];
      const int8_t *b0 = T->h_qthr + T->tree_node[t], *b1 = T->h_qthr + T->tree_node[t + 1];
      const int8_t *b2 = T->h_qthr + T->tree_node[t + 2], *b3 = T->h_qthr + T->tree_node[t + 3];
      uint32_t i0 = 0, i1 = 0, i2 = 0, i3 = 0;
      for (int l = 0; l < D; ++l) {
        i0 = 2u * i0 + 1u + ((int8_t)qg[TC_QCS * c0[i0]] > b0[i0]);
        i1 = 2u * i1 + 1u + ((int8_t)qg[TC_QCS * c1[i1]] > b1[i1]);
        i2 = 2u * i2 + 1u + ((int8_t)qg[TC_QCS * c2[i2]] > b2[i2]);
        i3 = 2u * i3 + 1u + ((int8_t)qg[TC_QCS * c3[i3]] > b3[i3]);
      }
      const uint32_t first = (1u << D) - 1u;
      const TC_AT *lv = (const TC_AT *)T->leaf_values;
      a[T->tree_out[t]] += lv[T->tree_leaf[t] + (i0 - first)];
      a[T->tree_out[t + 1]] += lv[T->tree_leaf[t + 1] + (i1 - first)];
      a[T->tree_out[t + 2]] += lv[T->tree_leaf[t + 2] + (i2 - first)];
      a[T->tree_out[t + 3]] += lv[T->tree_leaf[t + 3] + (i3 - first)];
    }
    for (; t < nt; ++t) {  /* the rest (and trees of mixed depths) one at a time */
      const int32_t *co = T->h_qcol + T->tree_node[t];
      const int8_t *tb = T->h_qthr + T->tree_node[t];
      uint32_t i = 0;
      for (int l = 0; l < dep[t]; ++l) i = 2u * i + 1u + ((int8_t)qg[TC_QCS * co[i]] > tb[i]);
      a[T->tree_out[t]] += ((const TC_AT *)T->leaf_values)[T->tree_leaf[t] + (i - ((1u << dep[t]) - 1u))];
    }
  }
}

#if TC_QVEC == 2
/* the decisions of 64 heap slots (those in kn) for the row whose 128-byte table (zrows_w1) is
 * q0:q1, from the slots' 128 aligned bytes z (h_zq: a tree of depth <= 6; h_zq8: a window of a
 * deeper one): their row-table indices, then their thresholds. Bit j set = slot j sends the row
 * right. Aligned copies rather than the heap's own bytes (63 a tree: most 64-byte loads there
 * straddle two cache lines), Zen 4, one row, kernel, one process: the 1000-tree 10-class
 * XGBoost model 4.2 -> 3.65 us, the 500-tree binary one 2.2 -> 2.05, the 300-tree depth-8 one
 * 0.83x. (Plain 64-byte loads of the heap's bytes, padded: 2-3% faster on the binary model, 30%
 * slower on the 10-class one, every tree of depth 6 in both.) */
static inline __attribute__((always_inline)) TC_ATTR __mmask64 FN(zslots)(
    __m512i q0, __m512i q1, const uint8_t *z, __mmask64 kn) {
  const __m512i x = _mm512_permutex2var_epi8(q0, _mm512_loadu_si512((const void *)z), q1);
  return _mm512_mask_cmpgt_epi8_mask(kn, x, _mm512_loadu_si512((const void *)(z + 64)));
}

/* ---- trees in lanes (one row, every tree a heap of depth <= 8: h_zt) -------------------------
 * Sixty-four trees a vector, a byte each: per heap slot s (63 of them) one vpermi2b picks, for
 * each of the group's 64 trees, the row's byte of the column tree t reads at slot s (the
 * row's 128-byte table q0:q1 as in zslots) and one saturating subtract from the slot's
 * threshold bytes gives every tree's decision at s in the byte's sign bit (thr - x < 0 iff
 * x > thr: right, the compare of zslots). A level's decision then comes from its 2^l slots by a
 * binary tree of bitwise selects (vpternlog "d ? r : l") keyed on the earlier levels' decisions,
 * the first level's at the bottom: only the last select waits for the previous level. The six
 * decisions are the leaf's six bits; a tree of depth D < 6 has "always left" bytes (thr 127)
 * below its slots, so its leaf is those bits >> (6 - D). Per 64 trees 63 x (load, permute,
 * load, subtract) + 57 selects + 12 for the bits, against a permute, a compare and a mask moved
 * into a vector per tree, six vector steps per eight trees and the extracts (zrows_w1's groups
 * of eight). The leaf values are then added one by one in tree order (exactness), group g's
 * while group g + 1's decisions are computed. The table (arrays_derived.py, zrow_lanes): per
 * group of 64 trees (the last one padded) 63 slots of 128 bytes, the 64 trees' row-table
 * indices (h_qc7) then their biased thresholds (h_qthr; 127 where a tree has no such slot).
 * Only the deepest tree's levels are walked (h_ztd). In a depth-6 forest the last level comes
 * from each tree's records instead (h_zr, zrow_records: per level-5 node its slot's two bytes
 * and the two leaf values it chooses between, 16 bytes): the vector walk takes levels 0-4 and
 * each tree's add reads its record at the node they reach, one compare picking the leaf. What
 * bounds one row is the bytes it brings from L2 (docs/internals/performance-notes.md, "Single
 * rows: the lanes walk's floor": ~190 a tree at ~31 a cycle on Zen 4); the records bring ~126
 * (levels 0-4's slots and one line): the 500-tree depth-6 XGBoost model's walk and adds
 * 3,509 -> 2,912 cycles a row. Forests of depth 7 and 8 walk the same way, levels 0-5 (0-6 in
 * groups of 127 slots, level 6 depth first: TC_ZLEVEL6) in lanes and the last from records of
 * 64 (128) nodes a tree: one row of 300 depth-8 XGBoost trees 3.2 -> 1.4 us, against the trees
 * one by one through four 64-slot windows (below). */
/* a group's slot bytes in a forest walked over DM levels: levels 0-5 (0-6 where DM is 8) */
#define TC_ZTG(DM) (((DM) == 8 ? 127 : 63) * 128)
#define TC_ZLANES_TAIL 32
#ifndef TC_ZLANES_ONCE
#define TC_ZLANES_ONCE
/* the 64 trees' decisions at the slot whose 128 bytes are at s: sign bit set = right */
static inline __attribute__((always_inline)) TC_ATTR __m512i tc_zdec(const uint8_t *s, __m512i q0,
                                                                     __m512i q1) {
  return _mm512_subs_epi8(_mm512_loadu_si512((const void *)(s + 64)),
                          _mm512_permutex2var_epi8(q0, _mm512_loadu_si512((const void *)s), q1));
}
/* bitwise d ? r : l (the sign bits are what counts) */
static inline __attribute__((always_inline)) TC_ATTR __m512i tc_zsel(__m512i d, __m512i l, __m512i r) {
  return _mm512_ternarylogic_epi32(l, r, d, 0xD8);  /* l is often dead: no copy */
}
/* the first n levels' decisions (sign bits; n = 6 or 7) as a byte's low bits, level l's at bit
 * n - 1 - l (a 16-bit shift keeps each byte's bit 7 in its byte; the mask drops what came from
 * the other byte) */
static inline __attribute__((always_inline)) TC_ATTR __m512i tc_zbitsn(const __m512i *d, const int n) {
  __m512i L = _mm512_and_si512(_mm512_srli_epi16(d[0], 8 - n), _mm512_set1_epi8((char)(1 << (n - 1))));
#pragma GCC unroll 6
  for (int l = 1; l < n; ++l)
    L = _mm512_ternarylogic_epi32(L, _mm512_srli_epi16(d[l], 8 - n + l),
                                  _mm512_set1_epi8((char)(1 << (n - 1 - l))), 0xF8);
  return L;
}
#define tc_zbits(d) tc_zbitsn((d), 6)
#define tc_zbits7(d) tc_zbitsn((d), 7)
#endif
/* level l's decisions (slots 2^l - 1 .. 2^(l + 1) - 2) from d[0 .. l - 1], the levels above:
 * node 2^l - 1 + k, k's bits (most significant first) those levels' decisions; selected by
 * d[0] first, so that only the last select waits for d[l - 1] */
#ifndef TC_ZLEVEL
#define TC_ZLEVEL(l)                                                                            \
  do {                                                                                          \
    const int base_ = (1 << (l)) - 1, half_ = 1 << ((l) - 1);                                   \
    _Pragma("GCC unroll 16") for (int k_ = 0; k_ < half_; ++k_)                                 \
      v[k_] = tc_zsel(d[0], tc_zdec(zt + 128 * (base_ + k_), q0, q1),                           \
                      tc_zdec(zt + 128 * (base_ + k_ + half_), q0, q1));                        \
    _Pragma("GCC unroll 4") for (int j_ = 1; j_ < (l); ++j_) {                                  \
      const int h_ = half_ >> j_;                                                               \
      _Pragma("GCC unroll 8") for (int k_ = 0; k_ < h_; ++k_) v[k_] = tc_zsel(d[j_], v[k_], v[k_ + h_]); \
    }                                                                                           \
    d[l] = v[0];                                                                                \
  } while (0)
#endif
/* level 6's decisions (slots 63 .. 126), depth first: slot j = bit-reversed i, each odd i
 * merged with the partials its trailing ones name (level 0's decision first), so at most
 * seven partials are live (breadth first, as TC_ZLEVEL, would hold 32 and spill) */
#define TC_ZLEVEL6()                                                                             \
  do {                                                                                           \
    __m512i sc_[7];                                                                              \
    _Pragma("GCC unroll 64") for (int i_ = 0; i_ < 64; ++i_) {                                   \
      int j_ = 0;                                                                                \
      _Pragma("GCC unroll 6") for (int b_ = 0; b_ < 6; ++b_) j_ |= ((i_ >> b_) & 1) << (5 - b_); \
      __m512i x_ = tc_zdec(zt + 128 * (63 + j_), q0, q1);                                        \
      const int h_ = __builtin_ctz(~(unsigned)i_);                                               \
      _Pragma("GCC unroll 6") for (int b_ = 0; b_ < 6; ++b_)                                     \
        if (b_ < h_) x_ = tc_zsel(d[b_], sc_[b_], x_);                                           \
      sc_[h_ < 6 ? h_ : 6] = x_;                                                                 \
    }                                                                                            \
    d[6] = sc_[6];                                                                               \
  } while (0)

/* trees t0 .. t0 + n - 1 (n <= 64)'s leaf value indices into li from their six leaf bits L:
 * tree_leaf[t] + (bits >> (6 - depth)), 16 trees at a time (masked loads past n; all 64
 * stored, without a branch: one would let the compiler sink the group's arithmetic below it
 * and keep its 126 loaded vectors on the stack) */
#define TC_ZIDX(q)                                                                              \
  do {                                                                                          \
    const int64_t m_ = n - 16 * (q);                                                            \
    const __mmask16 k_ = m_ >= 16 ? (__mmask16)0xFFFF : m_ <= 0 ? (__mmask16)0                  \
                                                      : (__mmask16)((1u << m_) - 1u);          \
    const __m512i sh_ = _mm512_sub_epi32(_mm512_set1_epi32(6),                                  \
                                         _mm512_maskz_loadu_epi32(k_, T->tree_depth + t0 + 16 * (q))); \
    const __m512i ix_ = _mm512_srlv_epi32(_mm512_cvtepu8_epi32(_mm512_extracti32x4_epi32(L, q)), sh_); \
    _mm512_store_si512((void *)(li + 16 * (q)),                                                 \
                       _mm512_add_epi64(_mm512_cvtepu32_epi64(_mm512_castsi512_si256(ix_)),     \
                                        _mm512_maskz_loadu_epi64((__mmask8)k_, T->tree_leaf + t0 + 16 * (q)))); \
    _mm512_store_si512((void *)(li + 16 * (q) + 8),                                             \
                       _mm512_add_epi64(_mm512_cvtepu32_epi64(_mm512_extracti64x4_epi64(ix_, 1)), \
                                        _mm512_maskz_loadu_epi64((__mmask8)(k_ >> 8), T->tree_leaf + t0 + 16 * (q) + 8))); \
  } while (0)
static inline __attribute__((always_inline)) TC_ATTR void FN(zlanes_idx)(
    const tc_tables *T, const __m512i L, int64_t t0, int64_t n, int64_t *li) {
  TC_ZIDX(0);
  TC_ZIDX(1);
  TC_ZIDX(2);
  TC_ZIDX(3);
}
#undef TC_ZIDX

/* group g's leaf value indices (trees 64 g ..) into li, from the row's table q0:q1, walking
 * levels 0 .. DM - 1 only (DM >= every tree's depth: the levels below hold padding slots only,
 * every tree's decision there "left", a zero bit); between the levels, TC_ZADD(k)
 * adds the previous group's leaves up to its k-th (the adds' chain is the walk's bound: the
 * next group's permutes and selects fill the cycles between its adds), at 4, 8, 16, 32, 48
 * for DM 6 and as much earlier as DM is smaller */
#define TC_ZSTEP(l, DM)                                                                         \
  do {                                                                                          \
    if ((DM) > (l)) {                                                                           \
      TC_ZLEVEL(l);                                                                             \
      TC_ZADD((4 << ((l) - 1 + 6 - (DM))) < 48 ? (4 << ((l) - 1 + 6 - (DM))) : 48);             \
    } else {                                                                                    \
      d[l] = _mm512_setzero_si512();                                                            \
    }                                                                                           \
  } while (0)
#define TC_ZGROUP(g, li, kb, DM, REC)                                                            \
  do {                                                                                           \
    const uint8_t *zt = T->h_zt + TC_ZTG(DM) * (g);                                              \
    __asm__("" : "+r"(zt)); /* its loads stay here (not hoisted out of the row loop, spilled) */ \
    __m512i d[7], v[16];                                                                         \
    d[0] = tc_zdec(zt, q0, q1);                                                                  \
    TC_ZSTEP(1, (REC) ? (DM) - 1 : (DM));                                                        \
    TC_ZSTEP(2, (REC) ? (DM) - 1 : (DM));                                                        \
    TC_ZSTEP(3, (REC) ? (DM) - 1 : (DM));                                                        \
    TC_ZSTEP(4, (REC) ? (DM) - 1 : (DM));                                                        \
    TC_ZSTEP(5, (REC) ? (DM) - 1 : (DM));                                                        \
    if ((DM) == 8) {                                                                             \
      TC_ZLEVEL6();                                                                              \
      TC_ZADD(48);                                                                               \
      _mm512_store_si512((void *)(kb), tc_zbits7(d));                                            \
    } else if (REC) {                                                                            \
      _mm512_store_si512((void *)(kb), tc_zbits(d));                                             \
    } else {                                                                                     \
      FN(zlanes_idx)(T, tc_zbits(d), 64 * (g), nt - 64 * (g) < 64 ? nt - 64 * (g) : 64, li);     \
    }                                                                                            \
  } while (0)

/* = zlanes below, levels 0 .. DM - 1 (DM >= every tree's depth); REC: the last level and the
 * leaves from the trees' records (h_zr), the vector walk's levels one fewer */
static inline __attribute__((always_inline)) TC_ATTR void FN(zlanes_d)(
    const tc_tables *T, __m512i q0, __m512i q1, TC_AT *a, const int64_t nt, const int DM,
    const int REC) {
  const int64_t no = T->n_outputs, ng = (nt + 63) >> 6;
  const TC_AT *lv = (const TC_AT *)T->leaf_values;
  const uint8_t *zr = T->h_zr;
  const int64_t RT = (sizeof(TC_AT) == 4 ? 16 : 32) << (DM - 1);  /* record bytes a tree */
  _Alignas(64) int64_t li[2][64];
  _Alignas(64) uint8_t kb[2][64];
  _Alignas(64) int8_t row[128];
  if (REC) {
    _mm512_store_si512((void *)row, q0);
    _mm512_store_si512((void *)(row + 64), q1);
  }
  TC_AT one = a[0];
  if (nt <= 0) return;
  const int64_t *ix = li[1];
  const uint8_t *kp = kb[1];
  int64_t j = 0, n = 0, t0 = 0;
  /* tree t0 + j's leaf value, of the previous group (its record at the node of kp's bits:
   * DM - 1 levels at bits 5 .. 7 - DM, or 6 .. 0 for DM 8) */
#define TC_ZV(j)                                                                                \
  ((REC) ? FN(zrecv)(zr + (t0 + (j)) * RT, (unsigned)kp[j] >> ((DM) == 8 ? 0 : 7 - (DM)), row) \
         : lv[ix[j]])
  /* the adds of the previous group (its n trees from t0) up to its k-th, in tree order */
#define TC_ZADD(k)                                                                              \
  do {                                                                                          \
    const int64_t e_ = n < (k) ? n : (k);                                                       \
    if (no == 1)                                                                                \
      for (; j < e_; ++j) one += TC_ZV(j);                                                      \
    else                                                                                        \
      for (; j < e_; ++j) a[T->tree_out[t0 + j]] += TC_ZV(j);                                   \
  } while (0)
  for (int64_t g = 0; g <= ng; ++g) {
    if (g < ng) TC_ZGROUP(g, li[g & 1], kb[g & 1], DM, REC);
    const int64_t e_ = n;
    if (no == 1)
      for (; j < e_; ++j) one += TC_ZV(j);
    else
      for (; j < e_; ++j) a[T->tree_out[t0 + j]] += TC_ZV(j);
    /* this group's leaves are added next, while the next group's are found */
    ix = li[g & 1], kp = kb[g & 1], j = 0, t0 = 64 * g, n = nt - t0 < 64 ? nt - t0 : 64;
  }
  if (no == 1) a[0] = one;
}
#undef TC_ZV
#undef TC_ZADD
#undef TC_ZGROUP
#undef TC_ZSTEP
/* one row (its table q0:q1) through trees 0 .. nt - 1, 64 trees in a vector's lanes, as many
 * levels as the deepest tree has (3 at least: a shallower forest is rare); margins at a */
static inline __attribute__((always_inline)) TC_ATTR void FN(zlanes)(const tc_tables *T, __m512i q0,
                                                                    __m512i q1, TC_AT *a, const int64_t nt) {
  switch (T->h_ztd) {
    case 0: case 1: case 2: case 3: FN(zlanes_d)(T, q0, q1, a, nt, 3, 0); return;
    case 4: FN(zlanes_d)(T, q0, q1, a, nt, 4, 0); return;
    case 5: FN(zlanes_d)(T, q0, q1, a, nt, 5, 0); return;
    /* depth 6-8: the last level from the records (zrow1 comes here only with h_zr) */
    case 6: FN(zlanes_d)(T, q0, q1, a, nt, 6, 1); return;
    case 7: FN(zlanes_d)(T, q0, q1, a, nt, 7, 1); return;
    default: FN(zlanes_d)(T, q0, q1, a, nt, 8, 1); return;
  }
}

/* few rows, AVX-512: a row's bytes in a 128-byte table (two vectors): with the column mux
 * (q_cmux <= 64, see tc_qlevelc) the mux columns, then the same with NaN's code 255 made 0 (a
 * merged column's NaN-left slots index this half: h_qc7 bit 6), else the row's <= 128 columns.
 * Per tree of depth <= 6 one vpermi2b by the slots' indices (h_qc7, read from h_zq) picks the row's byte at
 * each of the tree's <= 63 slots and one compare with the slots' thresholds gives every slot's
 * decision as a mask, from which the D steps of the walk are bit tests (no loads left on the
 * walk's chain). Trees of depth 7 and 8 take their 127 / 255 slots' decisions in two / four
 * masks and walk them the same way. Leaves added in tree order.
 * Measured (AMD EPYC Zen 4, one process, one row, kernel time, 2026-11-24): the 300-tree
 * depth-8 XGBoost NaN model (71 columns, 64 after merging NaN twins) walked its deep trees a
 * tree at a time by byte loads: 8.5 us; by four masks per tree 4.0 us with the merged columns'
 * NaN fixed per slot (cmpeq + movepi8_mask + andn: 3 of a window's 8 instructions), 3.2-3.3 us
 * with the table's NaN-left half. Tried and dropped there: eight trees' masks as the qwords
 * of vectors and the eight steps for all at once (as for depth <= 6): 0.90x as fast (32
 * masked broadcasts per group cost more than the per-tree chains, which overlap); the top six
 * levels by one mask and the last two by byte loads: 0.81x (a load chain per level).
 * On the 500-tree depth-6 XGBoost model (eight trees a group): the leaf values by scalar loads
 * of the stored indices instead of a gather, 2.67 -> 2.35 us (min; median of paired ratios
 * 1.07x); the indices then taken out of the vector by extracts instead of a store read back
 * (a 64-byte store forwards badly to 8-byte loads on Zen 4), 2.25 -> 2.18 us; dropped: the
 * leaf values of up to 256 trees gathered (or loaded) into a buffer first and added at the
 * end, off the walk's chain, 2.25 -> 2.57 (2.59 loaded): the adds' chain does not bound it;
 * the steps per tree in scalar registers instead of per group in vectors, 0.77x; the group's masks merged in two chains of four instead of one of eight, 1.00x. What
 * bounds the walk is latency: each group's chain (table loads from L2, permute, compare, mask
 * to vector, six dependent steps, leaf loads) overlaps only the next two or three groups', and
 * the leaf values are added one by one in tree order (exactness: 500 dependent adds, ~0.4 us
 * of the 2.35 alone). */
static inline __attribute__((always_inline)) TC_ATTR void FN(zrow1)(
    const tc_tables *T, const __m512i q0, const __m512i q1, TC_AT *a) {
  const int64_t no = T->n_outputs, nt = T->n_trees;
  const TC_AT *lv = (const TC_AT *)T->leaf_values;
  {
    /* every tree a heap of depth <= 6: 64 trees a vector (zlanes), but a last group of fewer
     * than TC_ZLANES_TAIL trees below, eight at a time and one by one (a group costs its 63
     * slots however few trees it holds: one tree of the 500-tree model alone, kernel, 0.21 us
     * that way against 0.28 in lanes) */
    int64_t t = 0;
    if (T->h_zt && (T->h_ztd < 6 || T->h_zr)) {
      t = nt - ((nt & 63) < TC_ZLANES_TAIL ? (nt & 63) : 0);
      FN(zlanes)(T, q0, q1, a, t);
      if (t == nt) return;
    }
    /* one output: the margin in a register (through memory, each add would wait for the
     * previous one's store to forward) */
    TC_AT one = a[0];
    /* eight trees of depth <= 6 at a time: their decision masks as the qwords of a vector, the
     * six steps and the leaf offsets for all eight at once, one gather of their leaf values;
     * the values then added one by one in tree order */
    for (; t + 8 <= nt; t += 8) {
      const __m256i dep = _mm256_loadu_si256((const __m256i *)(T->tree_depth + t));
      if (_mm256_movemask_epi8(_mm256_cmpgt_epi32(dep, _mm256_set1_epi32(6)))) break;
      __m512i G = _mm512_setzero_si512();
      const uint8_t *z = T->h_zq + 128 * t;
      const int D0 = T->tree_depth[t];
      /* each mask into qword j by a masked broadcast (eight stores read back as one vector
       * would wait for the stores: no forwarding) */
      if (_mm256_movemask_epi8(_mm256_cmpeq_epi32(dep, _mm256_set1_epi32(D0))) == -1) {
        /* eight trees of one depth (the common case): one slot mask for the group, no
         * per-tree depth (the 500-tree XGBoost model's single row 2.05 -> 1.8 us, 10 classes
         * 3.7 -> 3.1) */
        const __mmask64 kn = ((__mmask64)1 << ((1 << D0) - 1)) - 1;
#pragma GCC unroll 8
        for (int j = 0; j < 8; ++j)
          G = _mm512_mask_set1_epi64(G, (__mmask8)(1u << j),
                                     (int64_t)(uint64_t)FN(zslots)(q0, q1, z + 128 * j, kn));
      } else {
#pragma GCC unroll 8
        for (int j = 0; j < 8; ++j) {
          const __mmask64 kn = ((__mmask64)1 << ((1 << T->tree_depth[t + j]) - 1)) - 1;
          G = _mm512_mask_set1_epi64(G, (__mmask8)(1u << j),
                                     (int64_t)(uint64_t)FN(zslots)(q0, q1, z + 128 * j, kn));
        }
      }
      const __m512i one64 = _mm512_set1_epi64(1);
      __m512i iv = _mm512_setzero_si512();
#pragma GCC unroll 6
      for (int l = 0; l < 6; ++l)  /* as below: steps past a tree's depth double i + 1 */
        iv = _mm512_add_epi64(_mm512_add_epi64(_mm512_add_epi64(iv, iv), one64),
                              _mm512_and_si512(_mm512_srlv_epi64(G, iv), one64));
      const __m512i d64 = _mm512_cvtepi32_epi64(dep);
      /* leaf = ((i + 1) >> (6 - D)) - 2^D, at tree_leaf[t] in the leaf values */
      const __m512i leaf = _mm512_sub_epi64(
          _mm512_add_epi64(_mm512_srlv_epi64(_mm512_add_epi64(iv, one64), _mm512_sub_epi64(_mm512_set1_epi64(6), d64)),
                           _mm512_loadu_si512((const void *)(T->tree_leaf + t))),
          _mm512_sllv_epi64(one64, d64));
      /* the eight leaf values by scalar loads, the indices taken out of the vector (one
       * output) or stored and read back (several): a gather here cost more (below) */
      if (no == 1) {
        const __m256i lo = _mm512_castsi512_si256(leaf), hi = _mm512_extracti64x4_epi64(leaf, 1);
        const __m128i q0 = _mm256_castsi256_si128(lo), q1 = _mm256_extracti128_si256(lo, 1);
        const __m128i q2 = _mm256_castsi256_si128(hi), q3 = _mm256_extracti128_si256(hi, 1);
        one += lv[_mm_cvtsi128_si64(q0)];
        one += lv[_mm_extract_epi64(q0, 1)];
        one += lv[_mm_cvtsi128_si64(q1)];
        one += lv[_mm_extract_epi64(q1, 1)];
        one += lv[_mm_cvtsi128_si64(q2)];
        one += lv[_mm_extract_epi64(q2, 1)];
        one += lv[_mm_cvtsi128_si64(q3)];
        one += lv[_mm_extract_epi64(q3, 1)];
      } else {
        int64_t li[8];
        _mm512_storeu_si512((void *)li, leaf);
        for (int j = 0; j < 8; ++j) a[T->tree_out[t + j]] += lv[li[j]];
      }
    }
    for (; t < nt; ++t) {
      const int D = T->tree_depth[t];
      uint32_t i = 0;
      if (D <= 6) {
        const uint64_t G = (uint64_t)FN(zslots)(q0, q1, T->h_zq + 128 * t, ((__mmask64)1 << ((1 << D) - 1)) - 1);
        /* six steps whatever D, no branch on a tree's depth: below the tree's slots (n and
         * up) every bit of g is 0, so each step past D maps i to 2i + 1 (i + 1 doubles) */
#pragma GCC unroll 6
        for (int l = 0; l < 6; ++l) i = 2u * i + 1u + (uint32_t)((G >> i) & 1u);
        i = ((i + 1u) >> (6 - D)) - 1u;
      } else {
        /* depth 7 or 8 (QUANT_MAX_DEPTH): the slots' decisions as four masks, one per window
         * of slots [0, 63), [63, 127), [127, 191), [191, 255) (a level's slots lie in one or
         * two windows), then eight steps by bit tests; a depth-7 tree has no slots past 126
         * (G2 = G3 = 0), so its eighth step maps i to 2i + 1 */
        const uint8_t *z = T->h_zq8 + 512 * t;  /* the four windows' 128 bytes each */
        const uint64_t G0 = (uint64_t)FN(zslots)(q0, q1, z, ((__mmask64)1 << 63) - 1);
        const uint64_t G1 = (uint64_t)FN(zslots)(q0, q1, z + 128, ~(__mmask64)0);
        const uint64_t G2 = D == 8 ? (uint64_t)FN(zslots)(q0, q1, z + 256, ~(__mmask64)0) : 0;
        const uint64_t G3 = D == 8 ? (uint64_t)FN(zslots)(q0, q1, z + 384, ~(__mmask64)0) : 0;
#pragma GCC unroll 6
        for (int l = 0; l < 6; ++l) i = 2u * i + 1u + (uint32_t)((G0 >> i) & 1u);
        i = 2u * i + 1u + (uint32_t)((G1 >> (i - 63u)) & 1u);  /* i in [63, 127) */
        const uint32_t s = i - 127u;                            /* i in [127, 255) */
        i = 2u * i + 1u + (uint32_t)(((s < 64u ? G2 : G3) >> (s & 63u)) & 1u);
        i = ((i + 1u) >> (8 - D)) - 1u;
      }
      const TC_AT v = lv[T->tree_leaf[t] + (i - ((1u << D) - 1u))];
      if (no == 1) one += v;
      else a[T->tree_out[t]] += v;
    }
    if (no == 1) a[0] = one;
  }
}

/* the rows of the block (bytes at qb) through zrow1 */
static inline __attribute__((always_inline)) TC_ATTR void FN(zrows_w1)(
    const tc_tables *T, const uint8_t *qb, int64_t gs, int64_t nb, TC_AT *ab) {
  const int C = T->q_cmux, NC = T->q_ncols;
  const __m512i nan = _mm512_set1_epi8(0x7F), left = _mm512_set1_epi8((char)0x80);
  for (int64_t r = 0; r < nb; ++r) {
    const uint8_t *qg = qb + TC_QOFF(r);
    uint8_t row[128];
    /* columns from q_ncols up to the table's end are never selected: 0x80, what the block's
     * clearing once left there (run clears no block below TC_QVEC_MIN rows) */
    const int W = C ? C : 128;
    _mm512_storeu_si512((void *)row, _mm512_set1_epi8((char)0x80));
    _mm512_storeu_si512((void *)(row + 64), _mm512_set1_epi8((char)0x80));
    for (int c = 0, e = W < NC ? W : NC; c < e; ++c) row[c] = qg[(int64_t)c * TC_QR];
    const __m512i q0 = _mm512_loadu_si512((const void *)row);
    const __m512i q1 = C ? _mm512_mask_blend_epi8(_mm512_cmpeq_epi8_mask(q0, nan), q0, left)
                         : _mm512_loadu_si512((const void *)(row + 64));
    FN(zrow1)(T, q0, q1, ab + r * T->n_outputs);
  }
}

/* the same from the rows' contiguous tables (zq1: row r's column c at rq[128 r + c]; q_ncols <=
 * 128), by masked loads: the bytes past the columns read 0x80 as above */
static TC_ATTR void FN(zrowsq)(const tc_tables *T, const uint8_t *rq, int64_t nb, TC_AT *ab) {
  const int C = T->q_cmux, NC = T->q_ncols;
  const int e = (C ? C : 128) < NC ? (C ? C : 128) : NC;
  const __mmask64 k0 = e >= 64 ? ~(__mmask64)0 : ((__mmask64)1 << e) - 1;
  const __mmask64 k1 = e <= 64 ? 0 : e >= 128 ? ~(__mmask64)0 : ((__mmask64)1 << (e - 64)) - 1;
  const __m512i nan = _mm512_set1_epi8(0x7F), left = _mm512_set1_epi8((char)0x80);
  for (int64_t r = 0; r < nb; ++r) {
    const __m512i q0 = _mm512_mask_loadu_epi8(left, k0, (const void *)(rq + 128 * r));
    const __m512i q1 = C ? _mm512_mask_blend_epi8(_mm512_cmpeq_epi8_mask(q0, nan), q0, left)
                         : _mm512_mask_loadu_epi8(left, k1, (const void *)(rq + 128 * r + 64));
    FN(zrow1)(T, q0, q1, ab + r * T->n_outputs);
  }
}
#endif

/* the trees over one quantised block: leaves added per row in tree order, like block_s
 * (cs: class-major margins, as bvblock) */
static TC_ATTR void FN(qblock)(const tc_tables *T, const uint8_t *qb, int64_t gs, int64_t nb,
                               TC_AT *ab, int32_t *lidx, int64_t cs, const uint8_t *rq) {
  const int64_t no = cs ? 1 : T->n_outputs;
#if TC_QVEC == 2
  if (rq) {  /* the quantiser wrote the rows' contiguous tables, not the block (run) */
    FN(zrowsq)(T, rq, nb, ab);
    return;
  }
#endif
  (void)rq;
#if TC_QVEC == 2
  /* the AVX-512 few-row walk up to TC_ZROWS_MAX - 1 rows: the 64-row vector walk costs about
   * as much for 8 rows as for 64, so the two meet near 12 rows (AMD Zen 4, batches of 10, 12,
   * 16 rows here against the vector walk, us: 500-tree XGBoost 21.5 / 25.9 / 33.4 against
   * 27.5 / 28.0 / 31.1; 300 depth-8 trees 29.6 / 36.0 / 47.3 against 34.5 / 34.9 / 38.9) */
  if (nb < TC_ZROWS_MAX && nb >= TC_QVEC_MIN && T->q_w1 && !cs && T->h_zq) {
    FN(zrows_w1)(T, qb, gs, nb, ab);
    return;
  }
#endif
#if TC_QARM
  /* NEON: every tree a heap of depth <= 8 (7, 8: with records), a row 16 trees in lanes
   * (quant_neon.c, nrows_w1), up to TC_NROWS_MAX - 1 rows (several outputs: from TC_QVEC_MIN
   * rows the class-major margins, cs, and the heap walk) */
  if (nb < TC_NROWS_MAX && T->q_w1 && !cs && T->h_zt && (T->h_ztd < 6 || T->h_zr)) {
    FN(nrows_w1)(T, qb, gs, nb, ab);
    return;
  }
#endif
  if (nb < TC_QVEC_MIN && T->q_w1 && !cs) {
#if TC_QVEC == 2
    if (T->h_zq) {
      FN(zrows_w1)(T, qb, gs, nb, ab);
      return;
    }
#endif
    FN(qrows_w1)(T, qb, gs, nb, ab);
    return;
  }
  /* the column mux's width (tc_qlevelc), + 1 with merged NaN columns; 0: none (at most 64:
   * arrays_derived.py's QCIX_MAX_COLS, and the 64 columns of padding after qb in run) */
  const int cmux = T->h_qcix && T->q_cmux > 0 && T->q_cmux <= 64 ? T->q_cmux | (T->q_cnan ? 1 : 0) : 0;
  (void)cmux;
  for (int64_t t = 0; t < T->n_trees; ++t) {
    const TC_AT *lv = (const TC_AT *)T->leaf_values + T->tree_leaf[t];
    const int64_t o = cs ? 0 : T->tree_out[t], w = T->tree_width[t];
    TC_AT *const a = cs ? ab + T->tree_out[t] * cs : ab;
    const int D = T->tree_depth[t];
    const int32_t *co = T->h_qcol + T->tree_node[t];
    const int8_t *tb = (const int8_t *)T->h_qthr + T->tree_node[t];
    const int fuse = no == 1 && w == 1;
    int64_t r = 0;
#if TC_QVEC || TC_QARM
    /* a vector evaluates 32 rows whatever nb is: below TC_QVEC_MIN rows the scalar walk wins */
    if (nb >= TC_QVEC_MIN) {
      AFN(qheap_vec)(co, tb, D, qb, gs, nb, lidx, lv, fuse ? a : 0,
                    fuse && T->q_leafb ? T->q_leafb + T->q_leafb_off[t] : 0,
                    cmux ? T->h_qcix + T->tree_node[t] : 0, cmux, T->h_qobl ? T->h_qobl[t] : 0);
      if (fuse) continue;
      r = nb;
    }
#endif
    (void)fuse;
    const uint32_t first = (1u << D) - 1u;
    for (; r + 4 <= nb; r += 4) {  /* r is a multiple of 4: the 4 rows share a 32-row group */
      const uint8_t *qg = qb + TC_QOFF(r);
      uint32_t i0 = 0, i1 = 0, i2 = 0, i3 = 0;
      for (int l = 0; l < D; ++l) {
        i0 = 2u * i0 + 1u + ((int8_t)qg[TC_QCS * co[i0] + 0] > tb[i0]);
        i1 = 2u * i1 + 1u + ((int8_t)qg[TC_QCS * co[i1] + 1] > tb[i1]);
        i2 = 2u * i2 + 1u + ((int8_t)qg[TC_QCS * co[i2] + 2] > tb[i2]);
        i3 = 2u * i3 + 1u + ((int8_t)qg[TC_QCS * co[i3] + 3] > tb[i3]);
      }
      lidx[r] = (int32_t)(i0 - first); lidx[r + 1] = (int32_t)(i1 - first);
      lidx[r + 2] = (int32_t)(i2 - first); lidx[r + 3] = (int32_t)(i3 - first);
    }
    for (; r < nb; ++r) {
      uint32_t i = 0;
      const uint8_t *qg = qb + TC_QOFF(r);
      for (int l = 0; l < D; ++l) i = 2u * i + 1u + ((int8_t)qg[TC_QCS * co[i]] > tb[i]);
      lidx[r] = (int32_t)(i - first);
    }
    FN(add_leaves)(lv, lidx, 0, nb, a, no, o, w);
  }
}
