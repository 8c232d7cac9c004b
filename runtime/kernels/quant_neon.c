/*
 * quant_neon.c -- the byte walks' NEON (Advanced SIMD) kernels, aarch64's counterparts of
 * quant_impl.c's AVX2 ones (a fragment included by quant_impl.c inside its FN() namespace where
 * TC_QARM is set: 1 in the NEON unit, 2 in the SVE unit, whose kernels (quant_sve.c, included
 * below) take over where its vectors are wider than 128 bits and leave these the rest).
 *
 * The same walks on the same tables and the same block layout as the AVX2 kernels (32-row
 * groups, column c's 32 bytes at c * 32: two 16-byte vectors), the same byte compares, the same
 * leaves and the same float adds in the same order (tree order, one add per row and tree, in
 * TC_AT, -ffp-contract=off: no fmadd), so every path returns the scalar path's bits. What
 * changes with the instruction set:
 * - the heap walk's node mux selects with BSL under full byte masks, and those masks are the
 *   earlier levels' compare results themselves (bit b of a row's position at level l is its
 *   decision at level l - 1 - b), where AVX2 shifts each bit of the position to bit 7 first;
 * - a level's <= 128 threshold bytes, a heap's <= 256 leaf bytes per plane and a category set's
 *   32 bytes are looked up by TBL / TBX (vqtbl1q .. vqtbl4q, vqtbx4q: 16 to 64 bytes a
 *   lookup, 16 rows at once), vpshufb's and vpermb's counterpart;
 * - leaf planes are re-interleaved into floats by ZIP1 / ZIP2, which (unlike AVX2's unpacks
 *   within 128-bit lanes) come out in row order;
 * - no gathers: the quantiser's rows-in-lanes count looks its second level up by TBL and reads
 *   each lane's last window of thresholds with one 16-byte load per lane; leaf values of the
 *   interval sweep (bv_leaf) and of the fallback paths are read a row at a time.
 * The float heap walk (layout "heap") and the deep path's top walk keep the portable code here
 * (their AVX2 forms gather floats from rows).
 */
#if !defined(TC_QNEON_ONCE)
#define TC_QNEON_ONCE
#define TC_NI static inline __attribute__((always_inline)) TC_ATTR

/* a 32-row group's bytes of one column (rows 0-15 in a, 16-31 in b), and 32 rows' masks */
typedef struct { int8x16_t a, b; } tc_nv;
typedef struct { uint8x16_t a, b; } tc_nm;

TC_NI tc_nv tc_nld(const uint8_t *p) {
  const tc_nv r = {vld1q_s8((const int8_t *)p), vld1q_s8((const int8_t *)p + 16)};
  return r;
}
TC_NI tc_nv tc_ndup(int8_t v) {
  const tc_nv r = {vdupq_n_s8(v), vdupq_n_s8(v)};
  return r;
}
/* m ? x : y, per byte */
TC_NI tc_nv tc_nsel(tc_nm m, tc_nv x, tc_nv y) {
  const tc_nv r = {vbslq_s8(m.a, x.a, y.a), vbslq_s8(m.b, x.b, y.b)};
  return r;
}
/* x > t (the bytes are biased by 0x80: a signed compare, as AVX2's) */
TC_NI tc_nm tc_ngt(tc_nv x, tc_nv t) {
  const tc_nm r = {vcgtq_s8(x.a, t.a), vcgtq_s8(x.b, t.b)};
  return r;
}
/* k = 2k + (went right): a go-right mask byte is -1 */
TC_NI tc_nv tc_nstep(tc_nv k, tc_nm g) {
  const tc_nv r = {vsubq_s8(vaddq_s8(k.a, k.a), vreinterpretq_s8_u8(g.a)),
                   vsubq_s8(vaddq_s8(k.b, k.b), vreinterpretq_s8_u8(g.b))};
  return r;
}

/* each lane's entry k (< n) of the n-byte table p (n a power of two <= 256; p readable for
 * max(n, 16) bytes): TBL of one, two or four registers, TBX for each further 64 */
TC_NI int8x16_t tc_nlut(const int8_t *p, uint8x16_t k, const int n) {
  if (n <= 16) return vqtbl1q_s8(vld1q_s8(p), k);
  if (n == 32) {
    const int8x16x2_t t = {{vld1q_s8(p), vld1q_s8(p + 16)}};
    return vqtbl2q_s8(t, k);
  }
  const int8x16x4_t t0 = {{vld1q_s8(p), vld1q_s8(p + 16), vld1q_s8(p + 32), vld1q_s8(p + 48)}};
  int8x16_t r = vqtbl4q_s8(t0, k);
#pragma GCC unroll 3
  for (int i = 1; i < n / 64; ++i) {
    const int8_t *q = p + 64 * i;
    const int8x16x4_t t = {{vld1q_s8(q), vld1q_s8(q + 16), vld1q_s8(q + 32), vld1q_s8(q + 48)}};
    r = vqtbx4q_s8(r, t, vsubq_u8(k, vdupq_n_u8((uint8_t)(64 * i))));
  }
  return r;
}
TC_NI tc_nv tc_nlut2(const int8_t *p, tc_nv k, const int n) {
  const tc_nv r = {tc_nlut(p, vreinterpretq_u8_s8(k.a), n), tc_nlut(p, vreinterpretq_u8_s8(k.b), n)};
  return r;
}

/* Level l's column bytes of each row's own node: the 2^l nodes' bytes (co[i]: node i's column
 * offset in the group) muxed by a balanced tree of BSLs, m0 the last level's decisions (bit 0
 * of the row's position), m1 the one before, ... as quant_impl.c's tc_qlevel muxes them */
#define TC_NX1(i) tc_nld(qg + co[i])
#define TC_NX2(i) tc_nsel(m0, TC_NX1((i) + 1), TC_NX1(i))
#define TC_NX4(i) tc_nsel(m1, TC_NX2((i) + 2), TC_NX2(i))
#define TC_NX8(i) tc_nsel(m2, TC_NX4((i) + 4), TC_NX4(i))
#define TC_NX16(i) tc_nsel(m3, TC_NX8((i) + 8), TC_NX8(i))
#define TC_NX32(i) tc_nsel(m4, TC_NX16((i) + 16), TC_NX16(i))
#define TC_NX64(i) tc_nsel(m5, TC_NX32((i) + 32), TC_NX32(i))
#define TC_NX128(i) tc_nsel(m6, TC_NX64((i) + 64), TC_NX64(i))
TC_NI tc_nv tc_nmux(const uint8_t *qg, const int32_t *co, const int l, tc_nm m0, tc_nm m1,
                    tc_nm m2, tc_nm m3, tc_nm m4, tc_nm m5, tc_nm m6) {
  switch (l) {
    case 0: return TC_NX1(0);
    case 1: return TC_NX2(0);
    case 2: return TC_NX4(0);
    case 3: return TC_NX8(0);
    case 4: return TC_NX16(0);
    case 5: return TC_NX32(0);
    case 6: return TC_NX64(0);
    default: return TC_NX128(0);
  }
}
#undef TC_NX1
#undef TC_NX2
#undef TC_NX4
#undef TC_NX8
#undef TC_NX16
#undef TC_NX32
#undef TC_NX64
#undef TC_NX128

/* the same by column (quant_impl.c, tc_qlevelc: levels wider than the model's C columns): each
 * row's node's column index c looked up like its threshold, the C columns' bytes muxed by c's
 * bits (CMTST masks); with merged NaN columns (C odd) code 255 (0x7F biased) goes left where c
 * has bit 7. Returns the go-right masks. */
#define TC_NC1(i) tc_nld(qg + 32 * (i))
#define TC_NC2(i) tc_nsel(c0, TC_NC1((i) + 1), TC_NC1(i))
#define TC_NC4(i) tc_nsel(c1, TC_NC2((i) + 2), TC_NC2(i))
#define TC_NC8(i) tc_nsel(c2, TC_NC4((i) + 4), TC_NC4(i))
#define TC_NC16(i) tc_nsel(c3, TC_NC8((i) + 8), TC_NC8(i))
#define TC_NC32(i) tc_nsel(c4, TC_NC16((i) + 16), TC_NC16(i))
#define TC_NC64(i) tc_nsel(c5, TC_NC32((i) + 32), TC_NC32(i))
TC_NI tc_nm tc_nbit(tc_nv c, int b) {
  const tc_nm r = {vtstq_s8(c.a, vdupq_n_s8((int8_t)(1 << b))), vtstq_s8(c.b, vdupq_n_s8((int8_t)(1 << b)))};
  return r;
}
TC_NI tc_nm tc_nlevelc(const uint8_t *qg, const uint8_t *cx, tc_nv t, tc_nv k, const int l, const int C) {
  const tc_nv c = tc_nlut2((const int8_t *)cx, k, 1 << l);
  const tc_nm c0 = tc_nbit(c, 0), c1 = tc_nbit(c, 1), c2 = tc_nbit(c, 2), c3 = tc_nbit(c, 3);
  const tc_nm c4 = (C & ~1) >= 32 ? tc_nbit(c, 4) : c3, c5 = (C & ~1) >= 64 ? tc_nbit(c, 5) : c3;
  const tc_nv x = (C & ~1) == 16 ? TC_NC16(0) : (C & ~1) == 32 ? TC_NC32(0) : TC_NC64(0);
  tc_nm r = tc_ngt(x, t);
  if (C & 1) {
    r.a = vbicq_u8(r.a, vandq_u8(vceqq_s8(x.a, vdupq_n_s8(0x7F)), vcltzq_s8(c.a)));
    r.b = vbicq_u8(r.b, vandq_u8(vceqq_s8(x.b, vdupq_n_s8(0x7F)), vcltzq_s8(c.b)));
  }
  return r;
}
#undef TC_NC1
#undef TC_NC2
#undef TC_NC4
#undef TC_NC8
#undef TC_NC16
#undef TC_NC32
#undef TC_NC64

/* 32 rows' leaf slots of a heap of depth D (a constant): D levels of mux and compare; levels
 * wider than C columns by column when cx is given (C as tc_qkeysc's) */
TC_NI tc_nv tc_nkeys_g(const uint8_t *qg, const int32_t *co, const int8_t *tb, const uint8_t *cx,
                       const int D, const int C) {
  const tc_nm z = {vdupq_n_u8(0), vdupq_n_u8(0)};
  tc_nm g[8];
  tc_nv k = tc_ndup(0);
#pragma GCC unroll 8
  for (int l = 0; l < D; ++l) {
    const int o = (1 << l) - 1;
    const tc_nv t = l ? tc_nlut2(tb + o, k, 1 << l) : tc_ndup(tb[0]);
    if (cx && (1 << l) > (C & ~1)) {
      g[l] = tc_nlevelc(qg, cx + o, t, k, l, C);
    } else {
      const tc_nv x = tc_nmux(qg, co + o, l, l > 0 ? g[l - 1] : z, l > 1 ? g[l - 2] : z,
                              l > 2 ? g[l - 3] : z, l > 3 ? g[l - 4] : z, l > 4 ? g[l - 5] : z,
                              l > 5 ? g[l - 6] : z, l > 6 ? g[l - 7] : z);
      g[l] = tc_ngt(x, t);
    }
    k = tc_nstep(k, g[l]);
  }
  return k;
}

/* the same, not inlined: heaps of depth 7 and 8 (and 5, 6 over <= 16 columns) walk here, one
 * copy of each per translation unit (the kernel's build time) */
#define TC_NKEYS_CASE(D, C) \
  case D * 256 + C: return tc_nkeys_g(qg, co, tb, cx, D, C);
static __attribute__((noinline)) TC_ATTR tc_nv tc_nkeys(const uint8_t *qg, const int32_t *co,
                                                        const int8_t *tb, const uint8_t *cx,
                                                        int D, int C) {
  if (cx) {
    switch (D * 256 + C) {
      TC_NKEYS_CASE(5, 16) TC_NKEYS_CASE(6, 16)
      TC_NKEYS_CASE(7, 16) TC_NKEYS_CASE(7, 32) TC_NKEYS_CASE(7, 64)
      TC_NKEYS_CASE(8, 16) TC_NKEYS_CASE(8, 32) TC_NKEYS_CASE(8, 64)
      TC_NKEYS_CASE(5, 17) TC_NKEYS_CASE(6, 17)
      TC_NKEYS_CASE(7, 17) TC_NKEYS_CASE(7, 33) TC_NKEYS_CASE(7, 65)
      TC_NKEYS_CASE(8, 17) TC_NKEYS_CASE(8, 33) TC_NKEYS_CASE(8, 65)
      default: break;
    }
  }
  switch (D) {  /* the node mux at every level */
    case 1: return tc_nkeys_g(qg, co, tb, 0, 1, 0);
    case 2: return tc_nkeys_g(qg, co, tb, 0, 2, 0);
    case 3: return tc_nkeys_g(qg, co, tb, 0, 3, 0);
    case 4: return tc_nkeys_g(qg, co, tb, 0, 4, 0);
    case 5: return tc_nkeys_g(qg, co, tb, 0, 5, 0);
    case 6: return tc_nkeys_g(qg, co, tb, 0, 6, 0);
    case 7: return tc_nkeys_g(qg, co, tb, 0, 7, 0);
    case 8: return tc_nkeys_g(qg, co, tb, 0, 8, 0);
    default: return tc_ndup(0);  /* a one-leaf tree (D = 0): every row at slot 0, as tc_qkeys */
  }
}
#undef TC_NKEYS_CASE

/* each lane's entry of the n-byte table p for two 16-row halves (ka, kb) at once: the table's
 * registers loaded once for both (as tc_nlut: TBL of one, two or four, TBX for each further 64) */
TC_NI void tc_nlutx(const int8_t *p, uint8x16_t ka, uint8x16_t kb, const int n, int8x16_t *ra,
                    int8x16_t *rb) {
  if (n <= 16) {
    const int8x16_t t = vld1q_s8(p);
    *ra = vqtbl1q_s8(t, ka);
    *rb = vqtbl1q_s8(t, kb);
    return;
  }
  if (n == 32) {
    const int8x16x2_t t = vld1q_s8_x2(p);
    *ra = vqtbl2q_s8(t, ka);
    *rb = vqtbl2q_s8(t, kb);
    return;
  }
  const int8x16x4_t t0 = vld1q_s8_x4(p);
  int8x16_t a = vqtbl4q_s8(t0, ka), b = vqtbl4q_s8(t0, kb);
#pragma GCC unroll 3
  for (int i = 1; i < n / 64; ++i) {
    const int8x16x4_t t = vld1q_s8_x4(p + 64 * i);
    const uint8x16_t d = vdupq_n_u8((uint8_t)(64 * i));
    a = vqtbx4q_s8(a, t, vsubq_u8(ka, d));
    b = vqtbx4q_s8(b, t, vsubq_u8(kb, d));
  }
  *ra = a;
  *rb = b;
}

/* 16 rows' float32 leaves from their 4 looked-up byte planes p: byte and halfword zips (in row
 * order) make the floats, added into a[0..16) one add per row */
TC_NI void tc_nleaf32p(const uint8x16_t *p, float *a) {
  const uint16x8_t l01 = vreinterpretq_u16_u8(vzip1q_u8(p[0], p[1])), h01 = vreinterpretq_u16_u8(vzip2q_u8(p[0], p[1]));
  const uint16x8_t l23 = vreinterpretq_u16_u8(vzip1q_u8(p[2], p[3])), h23 = vreinterpretq_u16_u8(vzip2q_u8(p[2], p[3]));
  const float32x4_t v0 = vreinterpretq_f32_u16(vzip1q_u16(l01, l23));
  const float32x4_t v1 = vreinterpretq_f32_u16(vzip2q_u16(l01, l23));
  const float32x4_t v2 = vreinterpretq_f32_u16(vzip1q_u16(h01, h23));
  const float32x4_t v3 = vreinterpretq_f32_u16(vzip2q_u16(h01, h23));
  vst1q_f32(a, vaddq_f32(vld1q_f32(a), v0));
  vst1q_f32(a + 4, vaddq_f32(vld1q_f32(a + 4), v1));
  vst1q_f32(a + 8, vaddq_f32(vld1q_f32(a + 8), v2));
  vst1q_f32(a + 12, vaddq_f32(vld1q_f32(a + 12), v3));
}

/* the same for float64 leaves: 8 planes, zips of bytes, halfwords and words */
TC_NI void tc_nleaf64p(const uint8x16_t *p, double *a) {
  uint16x8_t w[8];
  uint32x4_t d[8];
#pragma GCC unroll 4
  for (int b = 0; b < 4; ++b) {  /* bytes (2b, 2b + 1) of rows 0-7 (w[2b]), 8-15 (w[2b + 1]) */
    w[2 * b] = vreinterpretq_u16_u8(vzip1q_u8(p[2 * b], p[2 * b + 1]));
    w[2 * b + 1] = vreinterpretq_u16_u8(vzip2q_u8(p[2 * b], p[2 * b + 1]));
  }
#pragma GCC unroll 2
  for (int h = 0; h < 2; ++h) {  /* bytes 0-3 and 4-7 of rows 8h .. 8h + 3 (d[4h], d[4h + 1]), + 4 .. */
    d[4 * h] = vreinterpretq_u32_u16(vzip1q_u16(w[h], w[2 + h]));
    d[4 * h + 1] = vreinterpretq_u32_u16(vzip1q_u16(w[4 + h], w[6 + h]));
    d[4 * h + 2] = vreinterpretq_u32_u16(vzip2q_u16(w[h], w[2 + h]));
    d[4 * h + 3] = vreinterpretq_u32_u16(vzip2q_u16(w[4 + h], w[6 + h]));
  }
#pragma GCC unroll 4
  for (int j = 0; j < 4; ++j) {  /* rows 4j .. 4j + 3 */
    const float64x2_t lo = vreinterpretq_f64_u32(vzip1q_u32(d[2 * j], d[2 * j + 1]));
    const float64x2_t hi = vreinterpretq_f64_u32(vzip2q_u32(d[2 * j], d[2 * j + 1]));
    vst1q_f64(a + 4 * j, vaddq_f64(vld1q_f64(a + 4 * j), lo));
    vst1q_f64(a + 4 * j + 2, vaddq_f64(vld1q_f64(a + 4 * j + 2), hi));
  }
}

/* 32 rows' leaves (slots ka: rows 0-15, kb: 16-31) from a tree's byte planes lb (L bytes each,
 * L = max(16, 2^D)), added into a[0..32): each plane's table loaded once for both halves */
TC_NI void tc_nleaf32x(const uint8_t *lb, const int L, int8x16_t ka, int8x16_t kb, float *a) {
  uint8x16_t pa[4], pb[4];
#pragma GCC unroll 4
  for (int b = 0; b < 4; ++b) {
    int8x16_t x, y;
    tc_nlutx((const int8_t *)lb + b * L, vreinterpretq_u8_s8(ka), vreinterpretq_u8_s8(kb), L, &x, &y);
    pa[b] = vreinterpretq_u8_s8(x);
    pb[b] = vreinterpretq_u8_s8(y);
  }
  tc_nleaf32p(pa, a);
  tc_nleaf32p(pb, a + 16);
}
TC_NI void tc_nleaf64x(const uint8_t *lb, const int L, int8x16_t ka, int8x16_t kb, double *a) {
  uint8x16_t pa[8], pb[8];
#pragma GCC unroll 8
  for (int b = 0; b < 8; ++b) {
    int8x16_t x, y;
    tc_nlutx((const int8_t *)lb + b * L, vreinterpretq_u8_s8(ka), vreinterpretq_u8_s8(kb), L, &x, &y);
    pa[b] = vreinterpretq_u8_s8(x);
    pb[b] = vreinterpretq_u8_s8(y);
  }
  tc_nleaf64p(pa, a);
  tc_nleaf64p(pb, a + 16);
}

/* The heap walk of depth D <= 6 for 32 rows (two 16-row halves sharing each node's column
 * offset), every value in a register (the node mux of tc_nkeys_g spilled: GCC hoisted a level's
 * 2 x 32 loads above its selects, against 32 registers holding 2 x 6 masks besides). Level l's
 * 2^l node bytes are muxed depth first: the nodes in bit-reversed order (i's l bits reversed),
 * each loaded, then merged with the pending partials while i's low bits are set, partial b by
 * the decisions of level b (bit l - 1 - b of a row's node index is its level-b decision). So at
 * most l + 1 partials per half are live, and the newest level's mask is needed only by the last
 * select (the level's other selects need not wait for it). The level's offsets are read two a
 * load, its thresholds looked up by one TBL per half; the same bytes, the same compares as
 * tc_nkeys_g, so the same leaf slots. The empty asm with a memory clobber after every second
 * node keeps the compiler from hoisting later loads above the merges; it emits nothing (an
 * out-of-order core overlaps the nodes anyway). llvm-mca (LLVM 19) of the 32-row loop with the
 * leaf planes, depth 6, float32: Neoverse N1 260 -> 133 cycles, V1 136 -> 76 (the node mux's
 * 2 x 57 BSLs now bound N1: 2 vector pipes). */
#define TC_NFENCE() __asm__ volatile("" ::: "memory")
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
#define TC_NHI 0  /* of two int32 read as one uint64: the first in the high half */
#else
#define TC_NHI 1
#endif
TC_NI tc_nv tc_nwalk(const uint8_t *qg, const int32_t *co, const int8_t *tb, const int D) {
  const int8_t *qa = (const int8_t *)qg, *qh = (const int8_t *)qg + 16;
  __asm__("" : "+r"(qh));  /* opaque: qh + offset, not (qa + offset) + 16 (an add per node) */
  uint8x16_t ga[6], gb[6];
  int8x16_t ka = vdupq_n_s8(0), kb = vdupq_n_s8(0);
#pragma GCC unroll 6
  for (int l = 0; l < D; ++l) {
    const int o = (1 << l) - 1, n = 1 << l;
    int8x16_t ta, tc;
    if (l == 0) ta = tc = vld1q_dup_s8(tb);
    else tc_nlutx(tb + o, vreinterpretq_u8_s8(ka), vreinterpretq_u8_s8(kb), n, &ta, &tc);
    int8x16_t sa[7], sb[7];
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
      int8x16_t xa = vld1q_s8(qa + off), xb = vld1q_s8(qh + off);
      const int h = __builtin_ctz(~(unsigned)i);  /* i's low set bits: the merges due */
#pragma GCC unroll 6
      for (int b = 0; b < 6; ++b) {
        if (b < h && b < l) {
          xa = vbslq_s8(ga[b], xa, sa[b]);
          xb = vbslq_s8(gb[b], xb, sb[b]);
        }
      }
      sa[h < l ? h : l] = xa;
      sb[h < l ? h : l] = xb;
      if (i & 1) TC_NFENCE();
    }
    ga[l] = vcgtq_s8(sa[l], ta);
    gb[l] = vcgtq_s8(sb[l], tc);
    /* k = 2k + (went right) by one SABA, k + |k - g| (g 0 or -1, k < 64): as tc_nstep */
    ka = vabaq_s8(ka, ka, vreinterpretq_s8_u8(ga[l]));
    kb = vabaq_s8(kb, kb, vreinterpretq_s8_u8(gb[l]));
  }
  const tc_nv r = {ka, kb};
  return r;
}

/* go right at a categorical node for 32 category codes (quant_impl.c, tc_cat_right): the code's
 * bit in the node's 32-byte set st is clear (its byte c >> 3 by a two-register TBL, its bit
 * c & 7 by a one-register one) */
TC_NI uint8x16_t tc_ncat1(int8x16_t c8, uint8x16x2_t st) {
  const uint8x16_t c = vreinterpretq_u8_s8(c8);
  const uint8x16_t pow2 = {1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128};
  const uint8x16_t byte = vqtbl2q_u8(st, vshrq_n_u8(c, 3));
  const uint8x16_t bit = vqtbl1q_u8(pow2, vandq_u8(c, vdupq_n_u8(7)));
  return vceqzq_u8(vandq_u8(byte, bit));
}

/* the interval sweep (quant_impl.c, bvtree) over G = 1, 2 or 4 32-row groups at once (q0,
 * q0 + gs, ..): per node a compare (or a set lookup), a compare of the positions with lo - 1,
 * two ands and an unsigned max; the positions stay below 128 (the signed compare is right) */
TC_NI void tc_nsweep_g(const uint8_t *q0, int64_t gs, const int32_t *co, const int8_t *tb,
                       const int8_t *lo1, const int8_t *hi, const int32_t *cat,
                       const uint8_t *sets, int64_t nn, tc_nv *out, const int G) {
  int8x16_t p[8];
  uint8x16_t r[8];
#pragma GCC unroll 8
  for (int g = 0; g < 2 * G; ++g) p[g] = vdupq_n_s8(0);
  for (int64_t i = 0; i < nn; ++i) {
    const uint8_t *qc = q0 + co[i];
    if (cat[i] < 0) {
      const int8x16_t t = vdupq_n_s8(tb[i]);
#pragma GCC unroll 8
      for (int g = 0; g < 2 * G; ++g)
        r[g] = vcgtq_s8(vld1q_s8((const int8_t *)(qc + (g >> 1) * gs + 16 * (g & 1))), t);
    } else {
      const uint8_t *s = sets + 32 * (int64_t)cat[i];
      const uint8x16x2_t st = {{vld1q_u8(s), vld1q_u8(s + 16)}};
#pragma GCC unroll 8
      for (int g = 0; g < 2 * G; ++g)
        r[g] = tc_ncat1(vld1q_s8((const int8_t *)(qc + (g >> 1) * gs + 16 * (g & 1))), st);
    }
    const int8x16_t l = vdupq_n_s8(lo1[i]), h = vdupq_n_s8(hi[i]);
#pragma GCC unroll 8
    for (int g = 0; g < 2 * G; ++g)
      p[g] = vreinterpretq_s8_u8(vmaxq_u8(vreinterpretq_u8_s8(p[g]),
                                          vandq_u8(vandq_u8(r[g], vreinterpretq_u8_s8(h)), vcgtq_s8(p[g], l))));
  }
#pragma GCC unroll 4
  for (int g = 0; g < G; ++g) {
    out[g].a = p[2 * g];
    out[g].b = p[2 * g + 1];
  }
}
static __attribute__((noinline)) TC_ATTR void tc_nsweep(
    const uint8_t *q0, int64_t gs, const int32_t *co, const int8_t *tb, const int8_t *lo1,
    const int8_t *hi, const int32_t *cat, const uint8_t *sets, int64_t nn, tc_nv *out, int G) {
  switch (G) {
    case 4: tc_nsweep_g(q0, gs, co, tb, lo1, hi, cat, sets, nn, out, 4); break;
    case 2: tc_nsweep_g(q0, gs, co, tb, lo1, hi, cat, sets, nn, out, 2); break;
    default: tc_nsweep_g(q0, gs, co, tb, lo1, hi, cat, sets, nn, out, 1); break;
  }
}

/* ---- the quantiser (quant_impl.c, quantise) -------------------------------------------------
 * Whole 32-row groups take the rows-in-lanes count of tc_qlanes8 (4 rows a vector, from the
 * transposed block): level 1 by 7 compares with the column's level table's broadcast entries,
 * level 2 by the tables j looked up by each lane's level-1 count (TBL over the 8 floats' 32
 * bytes), and the last g2 <= 4 thresholds of each lane's window by one load per lane and
 * compares counted by pairwise adds (no gathers). Same counts as the binary search, so the same
 * bins; float64 rows: that count of the rounded values as the first guess, then the exact
 * climb. Rows outside whole groups: a row at a time, the level table's entries then the
 * thresholds of the row's group compared 4 a vector. The level-2 tables are loaded where they
 * are used and 8 rows are counted at a time (held in registers, the 7 tables and a group's 8
 * vectors at once spilled); llvm-mca (LLVM 19), a column of 256 thresholds, 32 rows: Neoverse
 * N1 296 -> 236 cycles, V1 152 -> 130 (P = 16 .. 128: 0.73x-0.86x). */
#define TC_NQCMP(t, x) (s ? vcleq_f32((t), (x)) : vcltq_f32((t), (x)))
TC_NI uint32x4_t tc_nqlanes4(const float *u, const float32x4_t *l1, const float *lv,
                             const float32x4_t v, const int P, const int strict, const double *ud,
                             const double *xd, const int d64) {
  const int g1 = P / 8, g2 = g1 / 8 > 1 ? g1 / 8 : 1, s = d64 ? 0 : strict;
  uint32x4_t b1 = vdupq_n_u32(0);
#pragma GCC unroll 7
  for (int i = 0; i < 7; ++i) b1 = vsubq_u32(b1, TC_NQCMP(l1[i], v));  /* a compare is -1 */
  /* each lane's bytes of entry b1 of an 8-float table: 4 b1 + (0, 1, 2, 3) */
  const uint8x16_t bi = vreinterpretq_u8_u32(vmlaq_n_u32(vdupq_n_u32(0x03020100u), b1, 0x04040404u));
  uint32x4_t b2 = vdupq_n_u32(0);
#pragma GCC unroll 7
  for (int j = 0; j < g1 / g2 - 1; ++j)
    b2 = vsubq_u32(b2, TC_NQCMP(vreinterpretq_f32_u8(vqtbl2q_u8(vld1q_u8_x2((const uint8_t *)(lv + 8 + 8 * j)), bi)), v));
  uint32x4_t p = vaddq_u32(vmulq_n_u32(b1, (uint32_t)g1), vmulq_n_u32(b2, (uint32_t)g2));
  if (g2 > 1) {  /* the window u[p .. p + g2) of each lane: one load per lane (g2 = 2 or 4) */
    const uint32x4_t keep = g2 == 4 ? vdupq_n_u32(~0u) : (uint32x4_t){~0u, ~0u, 0, 0};
    uint32_t pi[4];  /* the lanes' window starts through memory: a store and four loads, not
                      * four UMOVs (Neoverse N1: one a cycle, on a vector pipe) */
    vst1q_u32(pi, p);
    __asm__("" : : "r"(pi) : "memory");
#define TC_NQWIN(i)                                                                           \
    vandq_u32(TC_NQCMP(g2 == 4 ? vld1q_f32(u + pi[i])                          \
                               : vcombine_f32(vld1_f32(u + pi[i]), vdup_n_f32(0.0f)), \
                       vdupq_laneq_f32(v, i)), keep)
    const uint32x4_t m[4] = {TC_NQWIN(0), TC_NQWIN(1), TC_NQWIN(2), TC_NQWIN(3)};
#undef TC_NQWIN
    /* lane i: how many of lane i's window send it right (each a -1) */
    const uint32x4_t c = vpaddq_u32(vpaddq_u32(m[0], m[1]), vpaddq_u32(m[2], m[3]));
    p = vsubq_u32(p, c);
  }
  if (d64) {  /* usually no step: each lane's next threshold in doubles, compared exactly */
    const float64x2_t x0 = vld1q_f64(xd), x1 = vld1q_f64(xd + 2);
    for (;;) {
      const float64x2_t t0 = vcombine_f64(vld1_f64(ud + vgetq_lane_u32(p, 0)), vld1_f64(ud + vgetq_lane_u32(p, 1)));
      const float64x2_t t1 = vcombine_f64(vld1_f64(ud + vgetq_lane_u32(p, 2)), vld1_f64(ud + vgetq_lane_u32(p, 3)));
      const uint64x2_t m0 = strict ? vcleq_f64(t0, x0) : vcltq_f64(t0, x0);
      const uint64x2_t m1 = strict ? vcleq_f64(t1, x1) : vcltq_f64(t1, x1);
      const uint32x4_t m = vcombine_u32(vmovn_u64(m0), vmovn_u64(m1));
      if (!vmaxvq_u32(m)) break;
      p = vsubq_u32(p, m);
    }
  }
  return p;
}
#undef TC_NQCMP

/* a column's bins over the whole 32-row groups of a block: u its P sorted thresholds (float32,
 * or float64 rounded: ud the exact ones), lv its 64-float level table, x its feature in the first
 * group of the transposed block (groups xs floats apart; d64: xd the same in doubles) */
TC_NI void tc_nqlanes(const float *u, const float *lv, const float *x, int64_t xs, int64_t nb,
                      uint8_t *q, int64_t gs, uint32_t nan_code, const int P, const int strict,
                      const double *ud, const double *xd, const int d64) {
  float32x4_t l1[7];
#pragma GCC unroll 7
  for (int i = 0; i < 7; ++i) l1[i] = vdupq_n_f32(lv[i]);
  const uint32x4_t nanc = vdupq_n_u32(nan_code);
  for (int64_t r = 0; r + 32 <= nb; r += 32) {
    const float *xr = x + (r >> 5) * xs;
    const double *dr = d64 ? xd + (r >> 5) * xs : 0;
    uint16x8_t h[4];
#pragma GCC unroll 4
    for (int i = 0; i < 4; ++i) {
      uint32x4_t b[2];
#pragma GCC unroll 2
      for (int j = 0; j < 2; ++j) {
        const int o = 8 * i + 4 * j;
        const float32x4_t v = vld1q_f32(xr + o);
        const uint32x4_t p = tc_nqlanes4(u, l1, lv, v, P, strict, ud, d64 ? dr + o : 0, d64);
        b[j] = vbslq_u32(vmvnq_u32(vceqq_f32(v, v)), nanc, p);  /* NaN: the column's code */
        if (j) TC_NFENCE();  /* 8 rows at a time: the group's 8 vectors interleaved spilled */
      }
      h[i] = vuzp1q_u16(vreinterpretq_u16_u32(b[0]), vreinterpretq_u16_u32(b[1]));  /* <= 255 */
    }
    const uint8x16_t lo = vuzp1q_u8(vreinterpretq_u8_u16(h[0]), vreinterpretq_u8_u16(h[1]));
    const uint8x16_t hi = vuzp1q_u8(vreinterpretq_u8_u16(h[2]), vreinterpretq_u8_u16(h[3]));
    uint8_t *o = q + (r >> 5) * gs;
    vst1q_u8(o, veorq_u8(lo, vdupq_n_u8(0x80)));
    vst1q_u8(o + 16, veorq_u8(hi, vdupq_n_u8(0x80)));
  }
}

#define TC_NQLANES_CASE(PP)                                                                   \
  case PP:                                                                                    \
    if (ud && strict) tc_nqlanes(u, lv, x, xs, nb, q, gs, nan_code, PP, 1, ud, xd, 1);       \
    else if (ud) tc_nqlanes(u, lv, x, xs, nb, q, gs, nan_code, PP, 0, ud, xd, 1);             \
    else if (strict) tc_nqlanes(u, lv, x, xs, nb, q, gs, nan_code, PP, 1, 0, 0, 0);           \
    else tc_nqlanes(u, lv, x, xs, nb, q, gs, nan_code, PP, 0, 0, 0, 0);                       \
    return 1;
/* the rows-in-lanes quantiser over a column's whole 32-row groups; 0: P not handled */
static TC_ATTR int tc_nqlanes_col(const float *u, const float *lv, const float *x, int64_t xs,
                                  int64_t nb, uint8_t *q, int64_t gs, uint32_t nan_code, int P,
                                  int strict, const double *ud, const double *xd) {
  switch (P) {
    TC_NQLANES_CASE(16) TC_NQLANES_CASE(32) TC_NQLANES_CASE(64) TC_NQLANES_CASE(128)
    TC_NQLANES_CASE(256)
    default: return 0;
  }
}
#undef TC_NQLANES_CASE

/* how many of the P sorted float32 thresholds u (NaN padding after them) are below x (strict:
 * at or below), x a float32 value: P <= 32 all counted, 4 a compare; else the level table's
 * first 7 entries (every P / 8-th threshold) say how many whole P / 8-groups lie below x, and
 * that group's next P / 8 are counted (quant_impl.c's few-row count, 4 a vector) */
static inline TC_ATTR uint32_t tc_ncount(const float *u, const float *lv, int P, float x, int strict) {
  const float32x4_t xv = vdupq_n_f32(x);
  uint32x4_t m = vdupq_n_u32(0);
  const float *g = u;
  int n = P;
  if (P > 32) {
    const uint32x4_t keep = {~0u, ~0u, ~0u, 0};
    const float32x4_t a = vld1q_f32(lv), b = vld1q_f32(lv + 4);
    m = strict ? vaddq_u32(vcleq_f32(a, xv), vandq_u32(vcleq_f32(b, xv), keep))
               : vaddq_u32(vcltq_f32(a, xv), vandq_u32(vcltq_f32(b, xv), keep));
    const uint32_t b1 = (uint32_t)-(int32_t)vaddvq_u32(m);
    n = P / 8;
    g = u + (int64_t)n * b1;
    m = vdupq_n_u32(0);
    const uint32_t base = (uint32_t)n * b1;
    for (int k = 0; k < n; k += 4) {
      const float32x4_t t = vld1q_f32(g + k);
      m = vaddq_u32(m, strict ? vcleq_f32(t, xv) : vcltq_f32(t, xv));
    }
    return base - vaddvq_u32(m);
  }
  for (int k = 0; k < n; k += 4) {
    const float32x4_t t = vld1q_f32(g + k);
    m = vaddq_u32(m, strict ? vcleq_f32(t, xv) : vcltq_f32(t, xv));
  }
  return (uint32_t)-(int32_t)vaddvq_u32(m);
}

/* a column of the other NaN direction (q_src) over whole 32-row groups (nr rows): the source
 * column's bytes p with NaN rows' replaced by nan_code (quant_impl.c, tc_qsame) */
static TC_ATTR void tc_nqsame(const float *x, int64_t xs, int64_t nr, const uint8_t *p, uint8_t *q,
                              int64_t gs, uint8_t nan_code) {
  const uint8x16_t nc = vdupq_n_u8(nan_code);
  for (int64_t g = 0; g < nr; g += 32, x += xs) {
    uint16x8_t h[4];
#pragma GCC unroll 4
    for (int i = 0; i < 4; ++i) {
      const float32x4_t v0 = vld1q_f32(x + 8 * i), v1 = vld1q_f32(x + 8 * i + 4);
      h[i] = vuzp1q_u16(vreinterpretq_u16_u32(vmvnq_u32(vceqq_f32(v0, v0))),
                        vreinterpretq_u16_u32(vmvnq_u32(vceqq_f32(v1, v1))));
    }
    const uint8x16_t m0 = vuzp1q_u8(vreinterpretq_u8_u16(h[0]), vreinterpretq_u8_u16(h[1]));
    const uint8x16_t m1 = vuzp1q_u8(vreinterpretq_u8_u16(h[2]), vreinterpretq_u8_u16(h[3]));
    const int64_t o = (g >> 5) * gs;
    vst1q_u8(q + o, vbslq_u8(m0, nc, vld1q_u8(p + o)));
    vst1q_u8(q + o + 16, vbslq_u8(m1, nc, vld1q_u8(p + o + 16)));
  }
}

/* the block's whole 32-row groups transposed for tc_nqlanes (quant_impl.c, tc_xpose): xq +
 * g * 32 * nf + f * 32 holds feature f of rows 32 g .. 32 g + 31; 4 x 4 tiles by TRN1 / TRN2 of
 * words, then of doublewords; only features some column reads (xu: a flag per 4 features) */
static TC_ATTR void tc_nxpose(const float *x, int64_t nf, int64_t nb, float *xq, const uint8_t *xu) {
  for (int64_t r = 0; r + 32 <= nb; r += 32) {
    float *xg = xq + r * nf;
    for (int64_t i = 0; i < 32; i += 4) {
      const float *xr = x + (r + i) * nf;
      int64_t f = 0;
      for (; f + 4 <= nf; f += 4) {
        if (!xu[f >> 2]) continue;
        const float32x4_t a0 = vld1q_f32(xr + f), a1 = vld1q_f32(xr + nf + f);
        const float32x4_t a2 = vld1q_f32(xr + 2 * nf + f), a3 = vld1q_f32(xr + 3 * nf + f);
        const float64x2_t t0 = vreinterpretq_f64_f32(vtrn1q_f32(a0, a1));
        const float64x2_t t1 = vreinterpretq_f64_f32(vtrn2q_f32(a0, a1));
        const float64x2_t t2 = vreinterpretq_f64_f32(vtrn1q_f32(a2, a3));
        const float64x2_t t3 = vreinterpretq_f64_f32(vtrn2q_f32(a2, a3));
        vst1q_f32(xg + f * 32 + i, vreinterpretq_f32_f64(vtrn1q_f64(t0, t2)));
        vst1q_f32(xg + (f + 1) * 32 + i, vreinterpretq_f32_f64(vtrn1q_f64(t1, t3)));
        vst1q_f32(xg + (f + 2) * 32 + i, vreinterpretq_f32_f64(vtrn2q_f64(t0, t2)));
        vst1q_f32(xg + (f + 3) * 32 + i, vreinterpretq_f32_f64(vtrn2q_f64(t1, t3)));
      }
      for (; f < nf; ++f)
        if (xu[f >> 2])
          for (int k = 0; k < 4; ++k) xg[f * 32 + i + k] = xr[k * nf + f];
    }
  }
}

/* float64 rows' whole 32-row groups transposed like tc_nxpose, twice: exact into xd, rounded to
 * float32 into xq (FCVTN: to nearest, as the scalar cast); 2 x 2 tiles */
static TC_ATTR void tc_nxpose64(const double *x, int64_t nf, int64_t nb, float *xq, double *xd,
                                const uint8_t *xu) {
  for (int64_t r = 0; r + 32 <= nb; r += 32) {
    float *xg = xq + r * nf;
    double *dg = xd + r * nf;
    for (int64_t i = 0; i < 32; i += 4) {
      const double *xr = x + (r + i) * nf;
      int64_t f = 0;
      for (; f + 2 <= nf; f += 2) {
        if (!xu[f >> 2]) continue;
        const float64x2_t a0 = vld1q_f64(xr + f), a1 = vld1q_f64(xr + nf + f);
        const float64x2_t a2 = vld1q_f64(xr + 2 * nf + f), a3 = vld1q_f64(xr + 3 * nf + f);
        const float64x2_t c0 = vtrn1q_f64(a0, a1), c1 = vtrn1q_f64(a2, a3);  /* feature f */
        const float64x2_t e0 = vtrn2q_f64(a0, a1), e1 = vtrn2q_f64(a2, a3);  /* f + 1 */
        vst1q_f64(dg + f * 32 + i, c0);
        vst1q_f64(dg + f * 32 + i + 2, c1);
        vst1q_f64(dg + (f + 1) * 32 + i, e0);
        vst1q_f64(dg + (f + 1) * 32 + i + 2, e1);
        vst1q_f32(xg + f * 32 + i, vcvt_high_f32_f64(vcvt_f32_f64(c0), c1));
        vst1q_f32(xg + (f + 1) * 32 + i, vcvt_high_f32_f64(vcvt_f32_f64(e0), e1));
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
/* ---- one row, trees in lanes (the few-row walk: nrows_w1) -----------------------------------
 * Sixteen trees a vector, a byte each, for forests whose every tree is a heap of depth <= 6
 * (h_zt, the AVX-512 zlanes table: per group of 64 trees, slot s's 64 row-table indices at
 * 128 s and their biased thresholds at 128 s + 64; a group's 16 trees j at + 16 j). Per level l
 * the lanes' node bytes are muxed out of the level's 2^l slots by BSL under the earlier
 * levels' decisions, both the row-table index and the threshold (tc_nwalk's order: nodes in
 * bit-reversed order, level 0's mask first, so at most l + 1 partials are live and only the
 * last select waits for level l - 1), then one lookup of the row's byte (TBL of four registers,
 * 64 bytes; a second for a 128-byte table) and one signed compare: the level's decisions as
 * byte masks. The six decisions are the leaf slot's six bits (SLI); a slot past a tree's
 * depth holds index 0 and threshold 127, which no byte exceeds, so a tree of depth D < 6 ends
 * at its leaf << (6 - D). Per 16 trees 2 x 63 loads, 2 x 57 BSLs and 6 lookups, against the
 * portable walk's 6 dependent load chains per tree (qrows_w1). llvm-mca (LLVM 19) of the 16-tree
 * loop with the leaf adds, float32, 64-byte table: Neoverse N1 115 cycles, V1 73 (the 500-tree
 * depth-6 model's walk: ~3,600 / ~2,300 cycles a row against qrows_w1's 12,150 / 10,720). */
TC_NI uint8x16_t tc_nrowlut(uint8x16x4_t q0, uint8x16x4_t q1, uint8x16_t c, const int wide) {
  if (!wide) return vqtbl4q_u8(q0, c);  /* indices < 64 */
  /* an index >= 64 is out of q0's range (0) and c ^ 64 < 64 in q1's; below 64 the reverse */
  return vorrq_u8(vqtbl4q_u8(q0, c), vqtbl4q_u8(q1, veorq_u8(c, vdupq_n_u8(64))));
}
/* levels 0 .. DM - 1 only (DM <= 7 where called; DM >= every tree's depth, or the walk's levels
 * before the records' level: the slots below are padding), so the leaf slot has DM bits */
TC_NI uint8x16_t tc_nlanes16(const uint8_t *z, uint8x16x4_t q0, uint8x16x4_t q1, const int wide,
                             const int DM) {
  uint8x16_t g[8];  /* (sized for DM 8 too: nrow1's DM 8 copy compiles a walk it never runs) */
  uint8x16_t k = vdupq_n_u8(0);
#pragma GCC unroll 7
  for (int l = 0; l < DM; ++l) {
    const int o = (1 << l) - 1, n = 1 << l;
    uint8x16_t sc[9], st[9];
#pragma GCC unroll 64
    for (int i = 0; i < n; ++i) {
      int j = 0;  /* the slot: i's l bits reversed */
#pragma GCC unroll 8
      for (int b = 0; b < 8; ++b)
        if (b < l) j |= ((i >> b) & 1) << (l - 1 - b);
      const uint8_t *s = z + 128 * (o + j);
      uint8x16_t xc = vld1q_u8(s), xt = vld1q_u8(s + 64);
      const int h = __builtin_ctz(~(unsigned)i);  /* i's low set bits: the merges due */
#pragma GCC unroll 8
      for (int b = 0; b < 8; ++b) {
        if (b < h && b < l) {
          xc = vbslq_u8(g[b], xc, sc[b]);
          xt = vbslq_u8(g[b], xt, st[b]);
        }
      }
      sc[h < l ? h : l] = xc;
      st[h < l ? h : l] = xt;
      if (i & 1) TC_NFENCE();
    }
    g[l] = vcgtq_s8(vreinterpretq_s8_u8(tc_nrowlut(q0, q1, sc[l], wide)), vreinterpretq_s8_u8(st[l]));
    k = vsliq_n_u8(g[l], k, 1);  /* k = 2k + (went right) */
  }
  return k;
}
#undef TC_NI
#endif /* TC_QNEON_ONCE */

/* ---- per accumulation dtype (AFN: named by TC_AN and the ISA) -------------------------------- */
#ifndef AFN
#define AFN(name) TC_PASTE(name, TC_PASTE(TC_AN, TC_ISA))
#endif
#if TC_ABITS == 64 && !defined(TC_NHEAP_ONCE_64)
#define TC_NHEAP_ONCE_64
#define TC_NHEAP_DEFINE
#elif TC_ABITS == 32 && !defined(TC_NHEAP_ONCE_32)
#define TC_NHEAP_ONCE_32
#define TC_NHEAP_DEFINE
#endif
#ifdef TC_NHEAP_DEFINE
/* 32 rows' leaf indices k (bytes) -> their leaf values added into acc (one output, width 1),
 * or stored into lidx (acc NULL); rows at or past nb (a short last group) are dropped */
static inline __attribute__((always_inline)) TC_ATTR void AFN(nleaves)(
    tc_nv k, int64_t r, int64_t nb, int32_t *lidx, const TC_AT *lv, TC_AT *acc) {
  uint8_t tmp[32];
  vst1q_u8(tmp, vreinterpretq_u8_s8(k.a));
  vst1q_u8(tmp + 16, vreinterpretq_u8_s8(k.b));
  const int64_t m = nb - r < 32 ? nb - r : 32;
  if (acc) for (int64_t i = 0; i < m; ++i) acc[r + i] += lv[tmp[i]];
  else for (int64_t i = 0; i < m; ++i) lidx[r + i] = tmp[i];
}

/* 32 rows' leaf slots k -> their leaves: from the tree's byte planes lb (L bytes each) when all
 * 32 rows count and acc is given, else as nleaves */
static inline __attribute__((always_inline)) TC_ATTR void AFN(nleafk)(
    tc_nv k, int64_t r, int64_t nb, int32_t *lidx, const TC_AT *lv, TC_AT *acc,
    const uint8_t *lb, const int L) {
  if (lb && nb - r >= 32) {  /* the planes hold TC_AT's bytes (arrays_derived.py leaf_planes) */
    if (sizeof(TC_AT) == 4) tc_nleaf32x(lb, L, k.a, k.b, (float *)(acc + r));
    else tc_nleaf64x(lb, L, k.a, k.b, (double *)(acc + r));
    return;
  }
  AFN(nleaves)(k, r, nb, lidx, lv, acc);
}

/* one heap tree over a block's rows, 32 at a time (quant_impl.c, qheap_d): inl 1 the walk of
 * depth D <= 6 inline, 2 a symmetric heap (one column and byte a level), 0 by tc_nkeys */
static inline __attribute__((always_inline)) TC_ATTR void AFN(nheap_d)(
    const int32_t *co, const int8_t *tb, const int D, const uint8_t *qb, int64_t gs, int64_t nb,
    int32_t *lidx, const TC_AT *lv, TC_AT *acc, const uint8_t *lb, const int inl, const uint8_t *cx,
    const int C) {
  const int L = D > 4 ? 1 << D : 16;
  tc_nv ot[8];
  int64_t oo[8];
  if (inl == 2) {
#pragma GCC unroll 8
    for (int l = 0; l < D; ++l) {
      ot[l] = tc_ndup(tb[(1 << l) - 1]);
      oo[l] = co[(1 << l) - 1];
    }
  }
  for (int64_t r = 0; r < nb; r += 32) {
    const uint8_t *qg = qb + (r >> 5) * gs;
    tc_nv k;
    if (inl == 2) {
      k = tc_ndup(0);
#pragma GCC unroll 8
      for (int l = 0; l < D; ++l) k = tc_nstep(k, tc_ngt(tc_nld(qg + oo[l]), ot[l]));
    } else if (inl) {
      k = tc_nwalk(qg, co, tb, D);
    } else {
      k = tc_nkeys(qg, co, tb, cx, D, C);
    }
    AFN(nleafk)(k, r, nb, lidx, lv, acc, lb, L);
  }
}

#if TC_QARM == 2  /* the SVE kernels (sheap_vec), which use nleafk */
#include "kernels/quant_sve.c"
#endif

/* = quant_impl.c's qheap_vec (the same arguments and choices): symmetric heaps one column a
 * level; depth 5 and 6 over <= 16 columns and 7, 8 over <= 64 by the column mux; else the node
 * mux, inline up to depth 6 */
static TC_ATTR void AFN(qheap_vec)(const int32_t *co, const int8_t *tb, int D, const uint8_t *qb,
                                   int64_t gs, int64_t nb, int32_t *lidx, const TC_AT *lv, TC_AT *acc,
                                   const uint8_t *lb, const uint8_t *cx, int C, int obl) {
#ifdef TC_SHEAP  /* the SVE unit's walks where they apply (quant_sve.c) */
  if (tc_swide() && AFN(sheap_vec)(co, tb, D, qb, gs, nb, lidx, lv, acc, lb, cx, C, obl)) return;
#endif
  switch (obl ? D : 0) {
    case 1: AFN(nheap_d)(co, tb, 1, qb, gs, nb, lidx, lv, acc, lb, 2, 0, 0); return;
    case 2: AFN(nheap_d)(co, tb, 2, qb, gs, nb, lidx, lv, acc, lb, 2, 0, 0); return;
    case 3: AFN(nheap_d)(co, tb, 3, qb, gs, nb, lidx, lv, acc, lb, 2, 0, 0); return;
    case 4: AFN(nheap_d)(co, tb, 4, qb, gs, nb, lidx, lv, acc, lb, 2, 0, 0); return;
    case 5: AFN(nheap_d)(co, tb, 5, qb, gs, nb, lidx, lv, acc, lb, 2, 0, 0); return;
    case 6: AFN(nheap_d)(co, tb, 6, qb, gs, nb, lidx, lv, acc, lb, 2, 0, 0); return;
    case 7: AFN(nheap_d)(co, tb, 7, qb, gs, nb, lidx, lv, acc, lb, 2, 0, 0); return;
    case 8: AFN(nheap_d)(co, tb, 8, qb, gs, nb, lidx, lv, acc, lb, 2, 0, 0); return;
    default: break;
  }
  if (cx && (C & ~1) == 16 && (D == 5 || D == 6)) {
    AFN(nheap_d)(co, tb, D, qb, gs, nb, lidx, lv, acc, lb, 0, cx, C);
    return;
  }
  switch (D) {
    case 1: AFN(nheap_d)(co, tb, 1, qb, gs, nb, lidx, lv, acc, lb, 1, 0, 0); break;
    case 2: AFN(nheap_d)(co, tb, 2, qb, gs, nb, lidx, lv, acc, lb, 1, 0, 0); break;
    case 3: AFN(nheap_d)(co, tb, 3, qb, gs, nb, lidx, lv, acc, lb, 1, 0, 0); break;
    case 4: AFN(nheap_d)(co, tb, 4, qb, gs, nb, lidx, lv, acc, lb, 1, 0, 0); break;
    case 5: AFN(nheap_d)(co, tb, 5, qb, gs, nb, lidx, lv, acc, lb, 1, 0, 0); break;
    case 6: AFN(nheap_d)(co, tb, 6, qb, gs, nb, lidx, lv, acc, lb, 1, 0, 0); break;
    default: AFN(nheap_d)(co, tb, D, qb, gs, nb, lidx, lv, acc, lb, 0, cx, C); break;
  }
}
#undef TC_NHEAP_DEFINE
#endif

/* ---- per instantiation (FN) ------------------------------------------------------------------ */
/* quantise's per-column body for numeric columns (q_src < 0): bins of the block's rows into q;
 * returns the rows done (all of them) */
static inline __attribute__((always_inline)) TC_ATTR int64_t FN(nquant_col)(
    const tc_tables *T, int32_t c, const TC_XT *x, int64_t nf, int64_t nb, uint8_t *q, int64_t gs,
    const float *xq, const double *xd, uint8_t nan_code, const int strict) {
  const TC_XT *u = (const TC_XT *)T->q_thr + T->q_off[c];
  const int P = T->q_len[c];
  const float *u32 = sizeof(TC_XT) == 4 ? (const float *)u : T->q_thr32 ? T->q_thr32 + T->q_off[c] : 0;
  const float *lv = T->q_lvl ? T->q_lvl + 64 * c : 0;
  int64_t r = 0;
  if (xq && nb >= 32 && lv && u32 &&
      tc_nqlanes_col(u32, lv, xq + 32 * T->q_feat[c], 32 * nf, nb, q, gs, (uint32_t)(nan_code ^ 0x80),
                     P, strict, sizeof(TC_XT) == 8 ? (const double *)u : 0,
                     xd ? xd + 32 * T->q_feat[c] : 0))
    r = nb & ~(int64_t)31;  /* the rows of a short last group: one at a time below */
  if (!lv || !u32) return r;
  for (; r < nb; ++r) {
    const TC_XT v = x[r * nf];
    uint32_t p;
    if (sizeof(TC_XT) == 4) {
      p = tc_ncount(u32, lv, P, (float)v, strict);
    } else {  /* the count of the rounded values, a first guess below b, then the exact climb */
      p = tc_ncount(u32, lv, P, (float)v, 0);
      while (strict ? v >= u[p] : v > u[p]) ++p;
    }
    q[(r >> 5) * gs + (r & 31)] = v != v ? nan_code : (uint8_t)(p ^ 0x80);
  }
  return r;
}

/* one row (its table q0:q1, q1 read only when wide) through the trees of h_zt, 16 at a time in
 * lanes (tc_nlanes16, DM levels: the deepest tree's, 3 at least); each tree's leaf value added
 * in tree order, as qrows_w1 adds them (the same values, the same adds, the same order);
 * margins at a. Inlined once per table width and DM, so that the 64-byte walk keeps q1's four
 * registers free (both in one loop spilled the mux's partials) */
static inline __attribute__((always_inline)) TC_ATTR void FN(nrow1)(
    const tc_tables *T, const uint8x16x4_t q0, const uint8x16x4_t q1, TC_AT *a, const int wide,
    const int DM, const int8_t *rowt) {
  const int64_t no = T->n_outputs, nt = T->n_trees;
  const TC_AT *lv = (const TC_AT *)T->leaf_values;
  TC_AT one = a[0];  /* one output: the margin in a register */
  for (int64_t t = 0; t < nt; t += 16) {
    /* a group's slots: levels 0-5 (0-6 in a depth-8 forest) */
    const uint8_t *z = T->h_zt + (DM == 8 ? 127 : 63) * 128 * (t >> 6) + 16 * ((t >> 4) & 3);
    __asm__("" : "+r"(z)); /* the slots' loads as offsets from one register */
    if (rowt) {  /* depth 6-8 with records (h_zr): levels 0 .. DM - 2 in lanes, the last from a
                  * record */
      uint8_t kb[16];
      vst1q_u8(kb, tc_nlanes16(z, q0, q1, wide, DM - 1));
      const int64_t RT = (sizeof(TC_AT) == 4 ? 16 : 32) << (DM - 1);  /* record bytes a tree */
      const uint8_t *r = T->h_zr + t * RT;
      if (nt - t >= 16 && no == 1) {
#pragma GCC unroll 16
        for (int j = 0; j < 16; ++j) one += FN(zrecv)(r + j * RT, kb[j], rowt);
      } else {
        for (int64_t j = 0; j < 16 && j < nt - t; ++j) {
          const TC_AT v = FN(zrecv)(r + j * RT, kb[j], rowt);
          if (no == 1) one += v;
          else a[T->tree_out[t + j]] += v;
        }
      }
      continue;
    }
    uint8x16_t k = tc_nlanes16(z, q0, q1, wide, DM);
    const int64_t *tl = T->tree_leaf + t;
    if (nt - t >= 16) {
      /* leaf = k >> (DM - depth), 16 trees by one USHL (a negative count shifts right) */
      const int32_t *dp = T->tree_depth + t;
      const uint16x8_t d0 = vuzp1q_u16(vreinterpretq_u16_s32(vld1q_s32(dp)),
                                       vreinterpretq_u16_s32(vld1q_s32(dp + 4)));
      const uint16x8_t d1 = vuzp1q_u16(vreinterpretq_u16_s32(vld1q_s32(dp + 8)),
                                       vreinterpretq_u16_s32(vld1q_s32(dp + 12)));
      k = vshlq_u8(k, vsubq_s8(vreinterpretq_s8_u8(vuzp1q_u8(vreinterpretq_u8_u16(d0),
                                                             vreinterpretq_u8_u16(d1))),
                               vdupq_n_s8(DM)));
      const uint64_t k0 = vgetq_lane_u64(vreinterpretq_u64_u8(k), 0);
      const uint64_t k1 = vgetq_lane_u64(vreinterpretq_u64_u8(k), 1);
      if (no == 1) {
#pragma GCC unroll 8
        for (int j = 0; j < 8; ++j) one += lv[tl[j] + (int64_t)((k0 >> (8 * j)) & 0xFF)];
#pragma GCC unroll 8
        for (int j = 0; j < 8; ++j) one += lv[tl[8 + j] + (int64_t)((k1 >> (8 * j)) & 0xFF)];
      } else {
        for (int j = 0; j < 8; ++j) a[T->tree_out[t + j]] += lv[tl[j] + (int64_t)((k0 >> (8 * j)) & 0xFF)];
        for (int j = 0; j < 8; ++j) a[T->tree_out[t + 8 + j]] += lv[tl[8 + j] + (int64_t)((k1 >> (8 * j)) & 0xFF)];
      }
    } else {  /* the last trees (fewer than 16): the lanes past them are not read */
      uint8_t kb[16];
      vst1q_u8(kb, k);
      for (int64_t j = 0; j < nt - t; ++j) {
        const TC_AT v = lv[tl[j] + (kb[j] >> (DM - T->tree_depth[t + j]))];
        if (no == 1) one += v;
        else a[T->tree_out[t + j]] += v;
      }
    }
  }
  if (no == 1) a[0] = one;
}

/* the rows below which a block of such a forest takes nrows_w1 rather than the 32-row heap walk
 * (qheap_vec): bench/arm_cost.py, the 500-tree depth-6 XGBoost model, cycles a row, the heap
 * walk -> nrows_w1 at 8 / 12 / 16 rows: Neoverse N1 (neon) 11,902 -> 6,016, 8,732 -> 5,974,
 * 7,146 -> 5,955; V1 (sve, auto's pick there) 7,264 -> 4,777, 5,465 -> 4,748, 4,566 -> 4,733 */
#ifndef TC_NROWS_MAX
#define TC_NROWS_MAX 16
#endif
/* few rows (below TC_NROWS_MAX), every tree a heap of depth <= 6 (h_zt): each row's bytes in a
 * 64- or 128-byte table (as quant_impl.c's zrows_w1: with the column mux the mux columns, then
 * the same with NaN's code made "left" for a merged column's NaN-left slots; else the row's
 * <= 128 columns), then the trees 16 at a time in lanes (nrow1) */
static TC_ATTR void FN(nrows_w1)(const tc_tables *T, const uint8_t *qb, int64_t gs, int64_t nb,
                                 TC_AT *ab) {
  const int C = T->q_cmux, NC = T->q_ncols;
  const int W = C ? C : 128, e = W < NC ? W : NC;
  /* a table past 64 bytes: merged NaN-left slots (index bit 6) or more than 64 columns */
  const int wide = C ? T->q_cnan != 0 : NC > 64;
  for (int64_t r = 0; r < nb; ++r) {
    const uint8_t *qg = qb + TC_QOFF(r);
    uint8_t row[128];
    memset(row, 0x80, sizeof row);  /* columns past the last: never selected */
    for (int c = 0; c < e; ++c) row[c] = qg[(int64_t)c * TC_QR];
    const uint8x16x4_t q0 = vld1q_u8_x4(row);
    uint8x16x4_t q1 = vld1q_u8_x4(row + 64);
    if (C) {
      const uint8x16_t nan = vdupq_n_u8(0x7F), left = vdupq_n_u8(0x80);
      q1.val[0] = vbslq_u8(vceqq_u8(q0.val[0], nan), left, q0.val[0]);
      q1.val[1] = vbslq_u8(vceqq_u8(q0.val[1], nan), left, q0.val[1]);
      q1.val[2] = vbslq_u8(vceqq_u8(q0.val[2], nan), left, q0.val[2]);
      q1.val[3] = vbslq_u8(vceqq_u8(q0.val[3], nan), left, q0.val[3]);
    }
    TC_AT *a = ab + r * T->n_outputs;
    if (T->h_zr) {  /* depth 6-8 with records: the last level by the row's table in memory */
      _Alignas(64) int8_t rowt[128];
      vst1q_u8_x4((uint8_t *)rowt, q0);
      vst1q_u8_x4((uint8_t *)rowt + 64, q1);
      switch (T->h_ztd * 2 + wide) {
        case 12: FN(nrow1)(T, q0, q1, a, 0, 6, rowt); break;
        case 13: FN(nrow1)(T, q0, q1, a, 1, 6, rowt); break;
        case 14: FN(nrow1)(T, q0, q1, a, 0, 7, rowt); break;
        case 15: FN(nrow1)(T, q0, q1, a, 1, 7, rowt); break;
        case 16: FN(nrow1)(T, q0, q1, a, 0, 8, rowt); break;
        default: FN(nrow1)(T, q0, q1, a, 1, 8, rowt);
      }
      continue;
    }
    switch (T->h_ztd * 2 + wide) {  /* the walk's levels: the deepest tree's (3 at least) */
      case 8: FN(nrow1)(T, q0, q1, a, 0, 4, 0); break;
      case 9: FN(nrow1)(T, q0, q1, a, 1, 4, 0); break;
      case 10: FN(nrow1)(T, q0, q1, a, 0, 5, 0); break;
      case 11: FN(nrow1)(T, q0, q1, a, 1, 5, 0); break;
      default:  /* (depth 6 and deeper come with records: above) */
        if (wide) FN(nrow1)(T, q0, q1, a, 1, 3, 0);
        else FN(nrow1)(T, q0, q1, a, 0, 3, 0);
    }
  }
}

/* the interval walk over one quantised block (quant_impl.c, bvblock and bvtree: the same
 * choices, 32-row groups four, two or one at a time) */
static TC_ATTR void FN(bvblock)(const tc_tables *T, const uint8_t *qb, int64_t gs, int64_t nb,
                                TC_AT *ab, int32_t *lidx, int64_t cs) {
  const int64_t no = cs ? 1 : T->n_outputs;
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
      for (int64_t r = 0; r < nb;) {
        const int G = nb - r > 96 ? 4 : nb - r > 32 ? 2 : 1;  /* groups holding a row: qb has them */
        tc_nv p[4];
        tc_nsweep(qb + (r >> 5) * gs, gs, T->h_qcol + n0, T->h_qthr + n0, T->bv_lo1 + n0,
                  T->bv_hi + n0, T->h_qcat + n0, T->q_cat, nn, p, G);
        for (int k = 0; k < G; ++k, r += 32) AFN(nleaves)(p[k], r, nb, lidx, lv, fuse ? a : 0);
      }
      if (fuse) continue;
    }
    FN(add_leaves)(lv, lidx, 0, nb, a, no, o, w);
  }
}
