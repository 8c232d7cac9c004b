/* The AVX-512 depth-6 byte walk's node steps alone, against its floor (bench, not part of the
 * kernel): 500 random heap trees of depth 6 over a 512-row quantised block of 50 columns (the
 * xgb-binary case's shape), leaf slots only (no quantiser, no leaf values). The walks, the
 * same slots: the node mux with its selectors tested from the rows' positions (vptestmb, as
 * before 2026-11-28), the same over four 64-row groups at once, the kernel's node mux whose
 * selectors are the earlier levels' decisions (tc_zlevel2d here: tc_zlevel2 in
 * runtime/kernels/quant_impl.c, copied), a walk by node decision masks (every slot's
 * compare into a mask, the rows at each slot tracked as 64-bit masks in scalar registers), and
 * the kernel's walk with its float32 leaves from byte planes (tc_zleaf32, copied too).
 *   cc -O2 -o /tmp/zwalk_floor bench/zwalk_floor.c && /tmp/zwalk_floor
 * Cycles from a dependent add chain (the guest has no cycle counters); CPU time of the thread.
 * See docs/internals/performance-notes.md ("The byte walk's floor"). */
#include <immintrin.h>
#include <stdint.h>
#include <string.h>
#define TC_ATTR __attribute__((target("avx512f,avx512bw,avx512vl,avx512vbmi,avx2,popcnt")))
static inline __attribute__((always_inline)) TC_ATTR __m512i tc_z64(const uint8_t *qg, int64_t gs, uint32_t off) {
  (void)gs;
  return _mm512_load_si512((const void *)(qg + 2 * (uint64_t)off));
}
static inline __attribute__((always_inline)) TC_ATTR __m512i tc_zfirst(const void *p, int n) {
  return _mm512_maskz_loadu_epi8(n >= 64 ? ~(__mmask64)0 : (((__mmask64)1 << n) - 1), p);
}
static inline __attribute__((always_inline)) TC_ATTR __m512i tc_zlut(const uint8_t *p, __m512i k, const int n) {
  if (n <= 64) return _mm512_permutexvar_epi8(k, tc_zfirst(p, n));
  const __m512i lo = _mm512_permutex2var_epi8(_mm512_loadu_si512((const void *)p), k,
                                              _mm512_loadu_si512((const void *)(p + 64)));
  if (n == 128) return lo;
  const __m512i hi = _mm512_permutex2var_epi8(_mm512_loadu_si512((const void *)(p + 128)), k,
                                              _mm512_loadu_si512((const void *)(p + 192)));
  return _mm512_mask_blend_epi8(_mm512_movepi8_mask(k), lo, hi);
}
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
static inline __attribute__((always_inline)) TC_ATTR tc_zm tc_zmb(__m512i ka, __m512i kb, int b) {
  tc_zm r = {_mm512_test_epi8_mask(ka, _mm512_set1_epi8((char)(1 << b))),
             _mm512_test_epi8_mask(kb, _mm512_set1_epi8((char)(1 << b)))};
  return r;
}
#define TC_ZX1(i) tc_zz1(qg, gs, (uint32_t)co[i])
#define TC_ZX2(i) tc_zz2(qg, gs, co + (i), m0)
#define TC_ZX4(i) tc_zzb(m1, TC_ZX2(i), TC_ZX2((i) + 2))
#define TC_ZX8(i) tc_zzb(m2, TC_ZX4(i), TC_ZX4((i) + 4))
#define TC_ZX16(i) tc_zzb(m3, TC_ZX8(i), TC_ZX8((i) + 8))
#define TC_ZX32(i) tc_zzb(m4, TC_ZX16(i), TC_ZX16((i) + 16))
static inline __attribute__((always_inline)) TC_ATTR tc_zm tc_zlevel2(
    const uint8_t *qg, int64_t gs, const int32_t *co, __m512i thr, const int l, __m512i ka, __m512i kb) {
  const tc_zm m0 = tc_zmb(ka, kb, 0), m1 = tc_zmb(ka, kb, 1), m2 = tc_zmb(ka, kb, 2);
  const tc_zm m3 = tc_zmb(ka, kb, 3), m4 = tc_zmb(ka, kb, 4);
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
/* d: the decisions of levels 0 .. l - 1 (their masks): bit b of a row's position k at level l
 * is its decision at level l - 1 - b (k = 2k + decision a level), so the mux's selectors are
 * those masks, not tests of k (vptestmb: 15 a depth-6 tree and group, on the port the
 * compares and permutes use, and on the level's chain) */
static inline __attribute__((always_inline)) TC_ATTR tc_zm tc_zlevel2d(
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
/* 128 rows' leaf slots (two 64-row groups, at qg and qg + gs) of a heap of depth D <= 6 by node
 * decision masks: each slot's column compared with its threshold byte for the 64 rows of a group
 * (one load and compare into a mask register), the rows at each slot tracked as 64-bit masks in
 * scalar registers (the rows p at slot n: its children 2n + 1 and 2n + 2 get p & ~d and p & d),
 * the slot index's bit of level l the OR over the level's slots of the rows going right. Slots
 * in depth-first order (one pending right child a level live, not a whole level's masks). The
 * same compare of the same byte as the node mux (tc_zlevel2) decides each row: the same slot.
 * No byte blends and no chain through the levels' vectors: a slot's work waits only on its
 * parent's mask. */
typedef struct { uint64_t a[6], b[6]; } tc_zbits;
static inline __attribute__((always_inline)) TC_ATTR void tc_zm_node(
    const uint8_t *qg, int64_t gs, const int32_t *co, const int8_t *tb, const int n, const int l,
    uint64_t pa, uint64_t pb, uint64_t *la, uint64_t *lb, uint64_t *ra, uint64_t *rb, tc_zbits *s) {
  const __m512i t = _mm512_set1_epi8((char)tb[n]);
  const uint32_t off = (uint32_t)co[n];
  uint64_t da = _cvtmask64_u64(_mm512_cmpgt_epi8_mask(tc_z64(qg, gs, off), t));
  uint64_t db = _cvtmask64_u64(_mm512_cmpgt_epi8_mask(tc_z64(qg + gs, gs, off), t));
  /* the mask algebra in scalar registers (in C, gcc moves it to k registers and back) */
  uint64_t xa, xb, ya, yb, ba = s->a[l], bb = s->b[l];
  __asm__("mov %[pa], %[xa]\n\tand %[da], %[xa]\n\tnot %[da]\n\tmov %[pa], %[ya]\n\t"
          "and %[da], %[ya]\n\tor %[xa], %[ba]\n\t"
          "mov %[pb], %[xb]\n\tand %[db], %[xb]\n\tnot %[db]\n\tmov %[pb], %[yb]\n\t"
          "and %[db], %[yb]\n\tor %[xb], %[bb]"
          : [xa] "=&r"(xa), [ya] "=&r"(ya), [xb] "=&r"(xb), [yb] "=&r"(yb), [da] "+r"(da),
            [db] "+r"(db), [ba] "+r"(ba), [bb] "+r"(bb)
          : [pa] "r"(pa), [pb] "r"(pb) : "cc");
  *ra = xa;
  *rb = xb;
  *la = ya;
  *lb = yb;
  s->a[l] = ba;
  s->b[l] = bb;
}
#define TC_ZM_LEVEL(L, NEXT)                                                                      \
  static inline __attribute__((always_inline)) TC_ATTR void tc_zm##L(                            \
      const uint8_t *qg, int64_t gs, const int32_t *co, const int8_t *tb, const int n,          \
      uint64_t pa, uint64_t pb, const int D, tc_zbits *s) {                                     \
    uint64_t la, lb, ra, rb;                                                                    \
    tc_zm_node(qg, gs, co, tb, n, L, pa, pb, &la, &lb, &ra, &rb, s);                            \
    if (L + 1 < D) {                                                                            \
      NEXT(qg, gs, co, tb, 2 * n + 1, la, lb, D, s);                                            \
      NEXT(qg, gs, co, tb, 2 * n + 2, ra, rb, D, s);                                            \
    }                                                                                           \
  }
static inline __attribute__((always_inline)) TC_ATTR void tc_zm6(
    const uint8_t *qg, int64_t gs, const int32_t *co, const int8_t *tb, const int n, uint64_t pa,
    uint64_t pb, const int D, tc_zbits *s) {
  (void)qg; (void)gs; (void)co; (void)tb; (void)n; (void)pa; (void)pb; (void)D; (void)s;
}
TC_ZM_LEVEL(5, tc_zm6)
TC_ZM_LEVEL(4, tc_zm5)
TC_ZM_LEVEL(3, tc_zm4)
TC_ZM_LEVEL(2, tc_zm3)
TC_ZM_LEVEL(1, tc_zm2)
TC_ZM_LEVEL(0, tc_zm1)
#undef TC_ZM_LEVEL
static inline __attribute__((always_inline)) TC_ATTR void tc_zmasks2(
    const uint8_t *qg, int64_t gs, const int32_t *co, const int8_t *tb, const int D,
    __m512i *ka, __m512i *kb) {
  tc_zbits s;
  for (int l = 0; l < 6; ++l) s.a[l] = s.b[l] = 0;
  tc_zm0(qg, gs, co, tb, 0, ~(uint64_t)0, ~(uint64_t)0, D, &s);
  const __m512i one = _mm512_set1_epi8(1);
  __m512i a = _mm512_setzero_si512(), b = a;
#pragma GCC unroll 6
  for (int l = 0; l < D; ++l) {
    a = _mm512_add_epi8(a, a);
    a = _mm512_mask_add_epi8(a, _cvtu64_mask64(s.a[l]), a, one);
    b = _mm512_add_epi8(b, b);
    b = _mm512_mask_add_epi8(b, _cvtu64_mask64(s.b[l]), b, one);
  }
  *ka = a;
  *kb = b;
}
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#define NT 500
#define NF 50
#define NG 8
static TC_ATTR void walk_old(const uint8_t *qb, int64_t gs, const int32_t *co, const int8_t *tb, uint8_t *out) {
  const __m512i one = _mm512_set1_epi8(1);
  for (int t = 0; t < NT; ++t) {
    const int32_t *c = co + 64 * t; const int8_t *b = tb + 64 * t;
    __m512i thr[6];
    for (int l = 0; l < 6; ++l) thr[l] = l ? _mm512_maskz_loadu_epi8(((__mmask64)1 << (1 << l)) - 1, b + (1 << l) - 1) : _mm512_set1_epi8(b[0]);
    for (int g = 0; g < NG; g += 2) {
      const uint8_t *qg = qb + g * gs;
      __m512i ka = _mm512_setzero_si512(), kb = ka;
#pragma GCC unroll 6
      for (int l = 0; l < 6; ++l) {
        const tc_zm m = tc_zlevel2(qg, gs, c + (1 << l) - 1, thr[l], l, ka, kb);
        ka = _mm512_add_epi8(ka, ka); ka = _mm512_mask_add_epi8(ka, m.a, ka, one);
        kb = _mm512_add_epi8(kb, kb); kb = _mm512_mask_add_epi8(kb, m.b, kb, one);
      }
      __m512i o = _mm512_loadu_si512(out + 64 * g);
      _mm512_storeu_si512(out + 64 * g, _mm512_xor_si512(o, ka));
      o = _mm512_loadu_si512(out + 64 * g + 64);
      _mm512_storeu_si512(out + 64 * g + 64, _mm512_xor_si512(o, kb));
    }
  }
}
static TC_ATTR void walk_new(const uint8_t *qb, int64_t gs, const int32_t *co, const int8_t *tb, uint8_t *out) {
  for (int t = 0; t < NT; ++t) {
    const int32_t *c = co + 64 * t; const int8_t *b = tb + 64 * t;
    for (int g = 0; g < NG; g += 2) {
      __m512i ka, kb;
      tc_zmasks2(qb + g * gs, gs, c, b, 6, &ka, &kb);
      __m512i o = _mm512_loadu_si512(out + 64 * g);
      _mm512_storeu_si512(out + 64 * g, _mm512_xor_si512(o, ka));
      o = _mm512_loadu_si512(out + 64 * g + 64);
      _mm512_storeu_si512(out + 64 * g + 64, _mm512_xor_si512(o, kb));
    }
  }
}
static TC_ATTR void walk_old4(const uint8_t *qb, int64_t gs, const int32_t *co, const int8_t *tb, uint8_t *out) {
  const __m512i one = _mm512_set1_epi8(1);
  for (int t = 0; t < NT; ++t) {
    const int32_t *c = co + 64 * t; const int8_t *b = tb + 64 * t;
    __m512i thr[6];
    for (int l = 0; l < 6; ++l) thr[l] = l ? _mm512_maskz_loadu_epi8(((__mmask64)1 << (1 << l)) - 1, b + (1 << l) - 1) : _mm512_set1_epi8(b[0]);
    for (int g = 0; g < NG; g += 4) {
      const uint8_t *qg = qb + g * gs;
      __m512i ka = _mm512_setzero_si512(), kb = ka, kc = ka, kd = ka;
#pragma GCC unroll 6
      for (int l = 0; l < 6; ++l) {
        const tc_zm m = tc_zlevel2(qg, gs, c + (1 << l) - 1, thr[l], l, ka, kb);
        const tc_zm n = tc_zlevel2(qg + 2 * gs, gs, c + (1 << l) - 1, thr[l], l, kc, kd);
        ka = _mm512_add_epi8(ka, ka); ka = _mm512_mask_add_epi8(ka, m.a, ka, one);
        kb = _mm512_add_epi8(kb, kb); kb = _mm512_mask_add_epi8(kb, m.b, kb, one);
        kc = _mm512_add_epi8(kc, kc); kc = _mm512_mask_add_epi8(kc, n.a, kc, one);
        kd = _mm512_add_epi8(kd, kd); kd = _mm512_mask_add_epi8(kd, n.b, kd, one);
      }
      __m512i k4[4] = {ka, kb, kc, kd};
      for (int q = 0; q < 4; ++q) {
      __m512i o = _mm512_loadu_si512(out + 64 * (g + q));
      _mm512_storeu_si512(out + 64 * (g + q), _mm512_xor_si512(o, k4[q]));
      }
    }
  }
}
static float acc[64 * NG];
static uint8_t *planes;
static TC_ATTR void walk_leaf(const uint8_t *qb, int64_t gs, const int32_t *co, const int8_t *tb, uint8_t *out) {
  const __m512i one = _mm512_set1_epi8(1);
  for (int t = 0; t < NT; ++t) {
    const int32_t *c = co + 64 * t; const int8_t *b = tb + 64 * t;
    __m512i thr[6];
    for (int l = 0; l < 6; ++l) thr[l] = l ? _mm512_maskz_loadu_epi8(((__mmask64)1 << (1 << l)) - 1, b + (1 << l) - 1) : _mm512_set1_epi8(b[0]);
    for (int g = 0; g < NG; g += 2) {
      const uint8_t *qg = qb + g * gs;
      __m512i ka = _mm512_setzero_si512(), kb = ka;
#pragma GCC unroll 6
      for (int l = 0; l < 6; ++l) {
        const tc_zm m = tc_zlevel2(qg, gs, c + (1 << l) - 1, thr[l], l, ka, kb);
        ka = _mm512_add_epi8(ka, ka); ka = _mm512_mask_add_epi8(ka, m.a, ka, one);
        kb = _mm512_add_epi8(kb, kb); kb = _mm512_mask_add_epi8(kb, m.b, kb, one);
      }
      tc_zleaf32(planes + 256 * t, 64, ka, acc + 64 * g);
      tc_zleaf32(planes + 256 * t, 64, kb, acc + 64 * g + 64);
    }
  }
  (void)out;
}
static TC_ATTR void walk_dm(const uint8_t *qb, int64_t gs, const int32_t *co, const int8_t *tb, uint8_t *out) {
  const __m512i one = _mm512_set1_epi8(1);
  for (int t = 0; t < NT; ++t) {
    const int32_t *c = co + 64 * t; const int8_t *b = tb + 64 * t;
    __m512i thr[6];
    for (int l = 0; l < 6; ++l) thr[l] = l ? _mm512_maskz_loadu_epi8(((__mmask64)1 << (1 << l)) - 1, b + (1 << l) - 1) : _mm512_set1_epi8(b[0]);
    for (int g = 0; g < NG; g += 2) {
      const uint8_t *qg = qb + g * gs;
      __m512i ka = _mm512_setzero_si512(), kb = ka;
      tc_zm dm[6];
#pragma GCC unroll 6
      for (int l = 0; l < 6; ++l) {
        const tc_zm m = tc_zlevel2d(qg, gs, c + (1 << l) - 1, thr[l], l, ka, kb, dm);
        dm[l] = m;
        ka = _mm512_add_epi8(ka, ka); ka = _mm512_mask_add_epi8(ka, m.a, ka, one);
        kb = _mm512_add_epi8(kb, kb); kb = _mm512_mask_add_epi8(kb, m.b, kb, one);
      }
      __m512i o = _mm512_loadu_si512(out + 64 * g);
      _mm512_storeu_si512(out + 64 * g, _mm512_xor_si512(o, ka));
      o = _mm512_loadu_si512(out + 64 * g + 64);
      _mm512_storeu_si512(out + 64 * g + 64, _mm512_xor_si512(o, kb));
    }
  }
}
static double now(void) { struct timespec a; clock_gettime(CLOCK_THREAD_CPUTIME_ID, &a); return a.tv_sec * 1e9 + a.tv_nsec; }
static int cmpd(const void *x, const void *y) { double d = *(const double *)x - *(const double *)y; return d < 0 ? -1 : d > 0; }
typedef void (*walk_fn)(const uint8_t *, int64_t, const int32_t *, const int8_t *, uint8_t *);
int main(void) {
  double ghz;
  { uint64_t x = 0; double t0 = now();
    for (long i = 0; i < 100000000; i += 8)
      __asm__ volatile("add $1,%0\n\tadd $1,%0\n\tadd $1,%0\n\tadd $1,%0\n\tadd $1,%0\n\tadd $1,%0\n\tadd $1,%0\n\tadd $1,%0" : "+r"(x));
    ghz = 1e8 / (now() - t0); }
  const int64_t gs = 64 * NF;
  uint8_t *qb = aligned_alloc(64, gs * NG);
  int32_t *co = malloc(4 * 64 * NT); int8_t *tb = malloc(64 * NT);
  srand(1);
  for (int64_t i = 0; i < gs * NG; ++i) qb[i] = rand() & 0x7f;
  for (int i = 0; i < 64 * NT; ++i) { co[i] = 32 * (rand() % NF); tb[i] = rand() & 0x7f; }
  static const char *name[5] = {"node mux, selectors by tests", "node mux, 4 groups", "decision masks, 2 groups", "node mux + float32 leaves", "node mux, selectors = decisions (kernel)"};
  walk_fn fn[5] = {walk_old, walk_old4, walk_new, walk_leaf, walk_dm};
  planes = aligned_alloc(64, 256 * NT);
  for (int i = 0; i < 256 * NT; ++i) planes[i] = rand();
  static uint8_t o[5][64 * NG];
  for (int v = 0; v < 5; ++v) fn[v](qb, gs, co, tb, o[v]);
  printf("same slots: %d %d %d\n", !memcmp(o[0], o[1], sizeof o[0]), !memcmp(o[0], o[2], sizeof o[0]), !memcmp(o[0], o[4], sizeof o[0]));
  double t[5][15];
  for (int r = 0; r < 15; ++r)
    for (int v = 0; v < 5; ++v) {
      double a = now();
      for (int i = 0; i < 20; ++i) fn[v](qb, gs, co, tb, o[v]);
      t[v][r] = (now() - a) / 20 / (64 * NG);
    }
  printf("core %.2f GHz; %d trees of depth 6, %d rows (%d columns), walk only (no quantiser, no leaves)\n", ghz, NT, 64 * NG, NF);
  for (int v = 0; v < 5; ++v) {
    qsort(t[v], 15, 8, cmpd);
    printf("  %-30s %7.1f ns/row  %5.2f cycles per tree-row\n", name[v], t[v][7], t[v][7] * ghz / NT);
  }
  return 0;
}
