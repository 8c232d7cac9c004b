/*
 * quant_sve.c -- the byte walks' SVE kernels (a fragment included by quant_neon.c in the SVE
 * unit, TC_QARM 2, inside its per-accumulation-dtype heap walk block; every function with
 * TC_ATTR's target("+sve")). Where a kernel here does not apply, the SVE path runs quant_neon.c's
 * NEON kernels compiled for SVE.
 *
 * The heap walk of depth <= 6 (sheap_vec): where SVE's vectors hold at least 32 bytes (svcntb()
 * >= 32: Neoverse V1 / Graviton 3 at 256 bits, A64FX and QEMU's `max` at 512), a 32-row group's
 * column is one vector: the NEON walk's two 16-byte halves become one load, one select and one
 * compare, on the first 32 lanes (predicate VL32: the same instructions at every length from 256
 * bits up; lanes past 32 are never stored). The block layout is the NEON unit's (32-row groups,
 * TC_QR 32), so nothing else changes. The decisions are predicates (16 predicate registers: the
 * six levels' masks need no vector registers), the node mux is SEL under them (tc_nwalk's order:
 * node bits reversed, the newest level's mask last), a level's thresholds one TBL. The leaf slots
 * then go through the NEON unit's leaf planes (tc_nleaf32x / tc_nleaf64x): the same bins, the
 * same decisions, the same leaves and adds as the NEON and scalar walks. At 128 bits (Neoverse
 * N2, V2) tc_swide() is 0 and the NEON kernels run.
 */
#if !defined(TC_QSVE_ONCE)
#define TC_QSVE_ONCE
#define TC_SHEAP 1
#define TC_SI static inline __attribute__((always_inline)) TC_ATTR

/* the SVE heap walk applies: 32-byte vectors or wider */
TC_SI int tc_swide(void) { return svcntb() >= 32; }

/* 32 rows' leaf slots (bytes, stored at ks) of a heap of depth D <= 6 over the 32-row group at
 * qg: as tc_nwalk, one 32-lane vector per node. (SVE values cannot be array elements: the
 * levels' masks g0..g5 and the mux's pending partials s0..s6 are named, picked by constant
 * indices once the loops are unrolled.) */
#define TC_SG(b) ((b) == 0 ? g0 : (b) == 1 ? g1 : (b) == 2 ? g2 : (b) == 3 ? g3 : (b) == 4 ? g4 : g5)
#define TC_SS(b) ((b) == 0 ? s0 : (b) == 1 ? s1 : (b) == 2 ? s2 : (b) == 3 ? s3 : (b) == 4 ? s4 : (b) == 5 ? s5 : s6)
TC_SI void tc_swalk(const uint8_t *qg, const int32_t *co, const int8_t *tb, const int D, int8_t *ks) {
  const svbool_t pg = svptrue_pat_b8(SV_VL32);
  const int8_t *q = (const int8_t *)qg;
  svbool_t g0 = svpfalse_b(), g1 = g0, g2 = g0, g3 = g0, g4 = g0, g5 = g0;
  svint8_t k = svdup_n_s8(0);
#pragma GCC unroll 6
  for (int l = 0; l < D; ++l) {
    const int o = (1 << l) - 1, n = 1 << l;
    const svint8_t t = l ? svtbl_s8(svld1_s8(svwhilelt_b8_s32(0, n), tb + o), svreinterpret_u8_s8(k))
                         : svdup_n_s8(tb[0]);
    svint8_t s0 = k, s1 = k, s2 = k, s3 = k, s4 = k, s5 = k, s6 = k;
    uint64_t w[16];  /* the level's column offsets, two a load (TC_NHI: which is high) */
#pragma GCC unroll 16
    for (int m = 0; m < n / 2; ++m) memcpy(&w[m], co + o + 2 * m, 8);
#pragma GCC unroll 32
    for (int i = 0; i < n; ++i) {
      int j = 0;  /* the node: i's l bits reversed */
#pragma GCC unroll 6
      for (int b = 0; b < 6; ++b)
        if (b < l) j |= ((i >> b) & 1) << (l - 1 - b);
      const uint64_t wj = w[j >> 1];
      const int32_t off = l == 0 ? co[0] : (int32_t)((j & 1) == TC_NHI ? wj >> 32 : wj);
      svint8_t x = svld1_s8(pg, q + off);
      const int h = __builtin_ctz(~(unsigned)i);  /* i's low set bits: the merges due */
#pragma GCC unroll 6
      for (int b = 0; b < 6; ++b)
        if (b < h && b < l) x = svsel_s8(TC_SG(b), x, TC_SS(b));
      switch (h < l ? h : l) {
        case 0: s0 = x; break;
        case 1: s1 = x; break;
        case 2: s2 = x; break;
        case 3: s3 = x; break;
        case 4: s4 = x; break;
        case 5: s5 = x; break;
        default: s6 = x; break;
      }
      if (i & 1) TC_NFENCE();
    }
    const svbool_t d = svcmpgt_s8(pg, TC_SS(l), t);
    switch (l) {
      case 0: g0 = d; break;
      case 1: g1 = d; break;
      case 2: g2 = d; break;
      case 3: g3 = d; break;
      case 4: g4 = d; break;
      default: g5 = d; break;
    }
    k = svadd_n_s8_m(d, svadd_s8_x(pg, k, k), 1);  /* k = 2k + (went right) */
  }
  svst1_s8(pg, ks, k);
}
#undef TC_SG
#undef TC_SS
#undef TC_SI
#endif /* TC_QSVE_ONCE */

/* ---- per accumulation dtype (in quant_neon.c's TC_NHEAP_DEFINE block) ---- */
/* one heap tree of depth D <= 6 over a block's rows, 32 at a time, by tc_swalk */
static inline __attribute__((always_inline)) TC_ATTR void AFN(sheap_d)(
    const int32_t *co, const int8_t *tb, const int D, const uint8_t *qb, int64_t gs, int64_t nb,
    int32_t *lidx, const TC_AT *lv, TC_AT *acc, const uint8_t *lb) {
  const int L = D > 4 ? 1 << D : 16;
  int8_t ks[32] __attribute__((aligned(32)));
  for (int64_t r = 0; r < nb; r += 32) {
    tc_swalk(qb + (r >> 5) * gs, co, tb, D, ks);
    const tc_nv k = {vld1q_s8(ks), vld1q_s8(ks + 16)};
    AFN(nleafk)(k, r, nb, lidx, lv, acc, lb, L);
  }
}

/* = qheap_vec's choices where the SVE walk applies (a heap of depth 1-6 walked by the node mux:
 * not symmetric, not the column mux); 0: not handled here */
static TC_ATTR int AFN(sheap_vec)(const int32_t *co, const int8_t *tb, int D, const uint8_t *qb,
                                  int64_t gs, int64_t nb, int32_t *lidx, const TC_AT *lv, TC_AT *acc,
                                  const uint8_t *lb, const uint8_t *cx, int C, int obl) {
  if (obl || (cx && (C & ~1) == 16 && (D == 5 || D == 6))) return 0;
  switch (D) {
    case 1: AFN(sheap_d)(co, tb, 1, qb, gs, nb, lidx, lv, acc, lb); return 1;
    case 2: AFN(sheap_d)(co, tb, 2, qb, gs, nb, lidx, lv, acc, lb); return 1;
    case 3: AFN(sheap_d)(co, tb, 3, qb, gs, nb, lidx, lv, acc, lb); return 1;
    case 4: AFN(sheap_d)(co, tb, 4, qb, gs, nb, lidx, lv, acc, lb); return 1;
    case 5: AFN(sheap_d)(co, tb, 5, qb, gs, nb, lidx, lv, acc, lb); return 1;
    case 6: AFN(sheap_d)(co, tb, 6, qb, gs, nb, lidx, lv, acc, lb); return 1;
    default: return 0;
  }
}
