/*
 * arrays_impl.c -- the kernel body (a fragment, not a translation unit), included by arrays.c once per (input dtype, accumulation
 * dtype, instruction set). Parameters (macros defined by the includer):
 *   TC_XT    float | double     comparison precision (rows are cast to it, like the library)
 *   TC_AT    float | double     accumulation dtype
 *   TC_NODE  tc_node_f32 | tc_node_f64
 *   TC_NTHR(p), TC_NCAT(p)      threshold / category set of a compact record
 *   TC_SFX   name suffix        e.g. f32_f64_avx2
 *   TC_ATTR  function attributes (target("avx2") ...)
 *   TC_VEC   0, 8 (AVX2) or 16 (AVX-512): explicit-intrinsics heap walk (float input only)
 *   TC_QVEC  0, 1: the AVX2 byte kernels of the quantised walks (any input dtype), 2: also
 *            the AVX-512 ones (64-row groups: quant_impl.c, TC_QR)
 *   TC_QARM  0, 1: aarch64's NEON byte kernels (quant_neon.c), 2: also the SVE ones
 *
 * Floating point: go_right = (x > t) for "<=" and (x >= t) for "<" (both false on NaN), OR
 * (x is NaN AND the node sends NaN right): exactly the interpreter's rule. Margins start at
 * the base score and add each tree's leaf vector in tree order in TC_AT, then divide by n_trees
 * once when averaging: the interpreter's summation order. Built with -ffp-contract=off and
 * without -ffast-math (NaN compares must stay IEEE).
 */
#define TC_PASTE2(a, b) a##_##b
#define TC_PASTE(a, b) TC_PASTE2(a, b)
#define FN(name) TC_PASTE(name, TC_SFX)
#define TC_GROUP 8    /* rows walked together in the scalar heap walk */
#define TC_CGROUP 8   /* rows in flight in the compact walk (memory-level parallelism) */
#define TC_FEW 4      /* below this many rows a block walks several trees per row at once */
#define TC_FEWTREES 8  /* ... that many trees (walks in flight) */
#define TC_DG 8       /* rows walked in lockstep by the deep path (arrays_derived.py DEEP_GROUP) */

/* categorical split: 1 = go right. Valid values (ir.py CATEGORY_RULES, T->cat_rule):
 * 0 nonneg 0 <= x < nbits; 1 trunc -1 < x < nbits; 2 integral 0 <= x < nbits and x integral.
 * A valid value's category is trunc(x) (the C cast); invalid ones go cat_other_left. */
static inline TC_ATTR uint32_t FN(cat_right)(const tc_tables *T, int32_t set, TC_XT v, uint32_t ff) {
  if (v != v) return ff >> 31;
  const int32_t nbits = T->cat_nbits[set];
  int valid = (T->cat_rule == 1 ? v > (TC_XT)-1 : v >= 0) && v < (TC_XT)nbits;
  if (valid && T->cat_rule == 2) valid = v == (TC_XT)(int32_t)v;
  uint32_t left;
  if (valid) {
    const int32_t c = (int32_t)v;  /* truncation toward zero, like the interpreter */
    left = (T->cat_words[T->cat_off[set] + (c >> 5)] >> (c & 31)) & 1u;
  } else {
    left = T->cat_other_left[set] ? 1u : 0u;
  }
  return left ^ 1u;
}

static inline __attribute__((always_inline)) TC_ATTR uint32_t FN(num_right)(TC_XT v, TC_XT t, uint32_t ff, const int strict) {
  const uint32_t gr = strict ? (v >= t) : (v > t);
  return gr | ((uint32_t)(v != v) & (ff >> 31));
}

/* ---- heap layout: D branch-free steps ----------------------------------------------------- */
#if TC_VEC && !defined(TC_LUT8_ONCE)
/* 8 lanes of a level's table entries by in-register permutes while the level has <= 32
 * entries (depth <= 5), gathers below: shared by the AVX2 heap walk and the deep path's top walk
 * (both builds), so defined once per translation unit */
#define TC_LUT8_ONCE
static inline __attribute__((always_inline)) TC_ATTR __m256i tc_lut8(const int32_t *tab, __m256i j, int l) {
  if (l <= 3) return _mm256_permutevar8x32_epi32(_mm256_loadu_si256((const __m256i *)tab), j);
  if (l <= 5) {
    const __m256 m3 = _mm256_castsi256_ps(_mm256_slli_epi32(j, 28));  /* bit 3 -> sign */
    __m256 lo = _mm256_blendv_ps(
        _mm256_castsi256_ps(_mm256_permutevar8x32_epi32(_mm256_loadu_si256((const __m256i *)tab), j)),
        _mm256_castsi256_ps(_mm256_permutevar8x32_epi32(_mm256_loadu_si256((const __m256i *)(tab + 8)), j)), m3);
    if (l == 4) return _mm256_castps_si256(lo);
    const __m256 hi = _mm256_blendv_ps(
        _mm256_castsi256_ps(_mm256_permutevar8x32_epi32(_mm256_loadu_si256((const __m256i *)(tab + 16)), j)),
        _mm256_castsi256_ps(_mm256_permutevar8x32_epi32(_mm256_loadu_si256((const __m256i *)(tab + 24)), j)), m3);
    return _mm256_castps_si256(_mm256_blendv_ps(lo, hi, _mm256_castsi256_ps(_mm256_slli_epi32(j, 27))));
  }
  return _mm256_i32gather_epi32(tab, j, 4);
}
#endif

#if TC_VEC == 8
/* AVX2, float input: 8 rows per vector, 4 vectors interleaved (32 rows). A row's position is
 * tracked within its level (j; child = 2j + go_right). The level's node words and thresholds
 * are looked up with in-register permutes while the level has <= 32 nodes (depth <= 5), which
 * avoids two of the three gathers per step (gathers are slow on many x86 cores); deeper
 * levels gather. Tables are padded (arrays_tables.py / arrays_derived.py) so the 8-wide loads never leave them. */

#define TC_V8_STEP(j, rowoff)                                                                   \
  do {                                                                                          \
    const __m256i f_ = tc_lut8(fl, j, l);                                                       \
    const __m256 t_ = _mm256_castsi256_ps(tc_lut8(tl, j, l));                                   \
    const __m256 x_ = _mm256_i32gather_ps(xb, _mm256_add_epi32(rowoff, _mm256_and_si256(f_, featmask)), 4); \
    const __m256 g_ = strict ? _mm256_cmp_ps(x_, t_, _CMP_GE_OQ) : _mm256_cmp_ps(x_, t_, _CMP_GT_OQ); \
    const __m256 n_ = _mm256_and_ps(_mm256_cmp_ps(x_, x_, _CMP_UNORD_Q),                       \
                                    _mm256_castsi256_ps(_mm256_srai_epi32(f_, 31)));             \
    /* go right is an all-ones lane (-1): j = 2j - (-1) */                                      \
    j = _mm256_sub_epi32(_mm256_add_epi32(j, j), _mm256_castps_si256(_mm256_or_ps(g_, n_)));   \
  } while (0)

/* leaf index vector -> lidx, or (acc != 0: one output, scalar leaves) straight into the margins:
 * the same single add per row and tree as the scalar loop, in TC_AT */
#define TC_V8_OUT(j, k)                                                                         \
  do {                                                                                          \
    if (acc) {                                                                                  \
      TC_AT *a_ = acc + r + 8 * (k);                                                            \
      if (sizeof(TC_AT) == 4) {                                                                 \
        _mm256_storeu_ps((float *)a_, _mm256_add_ps(_mm256_loadu_ps((const float *)a_),         \
                                                    _mm256_i32gather_ps((const float *)lv, j, 4))); \
      } else {                                                                                  \
        _mm256_storeu_pd((double *)a_, _mm256_add_pd(_mm256_loadu_pd((const double *)a_),      \
            _mm256_i32gather_pd((const double *)lv, _mm256_castsi256_si128(j), 8)));             \
        _mm256_storeu_pd((double *)a_ + 4, _mm256_add_pd(_mm256_loadu_pd((const double *)a_ + 4), \
            _mm256_i32gather_pd((const double *)lv, _mm256_extracti128_si256(j, 1), 8)));        \
      }                                                                                         \
    } else {                                                                                    \
      _mm256_storeu_si256((__m256i *)(lidx + r + 8 * (k)), j);                                  \
    }                                                                                           \
  } while (0)

static inline __attribute__((always_inline)) TC_ATTR int64_t FN(heap_vec)(
    const int32_t *ff, const float *th, int D, const float *xb, int32_t nf, int64_t nb,
    int32_t *lidx, const int strict, const TC_AT *lv, TC_AT *acc) {
  const __m256i featmask = _mm256_set1_epi32((int32_t)TC_FF_FEAT);
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const __m256i vnf = _mm256_set1_epi32(nf);
  const __m256i step8 = _mm256_set1_epi32(8 * nf);
  int64_t r = 0;
  for (; r + 32 <= nb; r += 32) {
    const __m256i o0 = _mm256_mullo_epi32(_mm256_add_epi32(lane, _mm256_set1_epi32((int32_t)r)), vnf);
    const __m256i o1 = _mm256_add_epi32(o0, step8);
    const __m256i o2 = _mm256_add_epi32(o1, step8);
    const __m256i o3 = _mm256_add_epi32(o2, step8);
    __m256i j0 = _mm256_setzero_si256(), j1 = j0, j2 = j0, j3 = j0;
    for (int l = 0; l < D; ++l) {
      const int32_t *fl = ff + ((1 << l) - 1), *tl = (const int32_t *)th + ((1 << l) - 1);
      TC_V8_STEP(j0, o0);
      TC_V8_STEP(j1, o1);
      TC_V8_STEP(j2, o2);
      TC_V8_STEP(j3, o3);
    }
    TC_V8_OUT(j0, 0);
    TC_V8_OUT(j1, 1);
    TC_V8_OUT(j2, 2);
    TC_V8_OUT(j3, 3);
  }
  return r;
}
#undef TC_V8_STEP
#undef TC_V8_OUT
#elif TC_VEC == 16
/* AVX-512F, float input: 16 rows per vector, 4 vectors interleaved (64 rows). Same scheme as
 * the AVX2 walk: in-register lookups up to 64 nodes per level (depth <= 6: one permutexvar
 * for <= 16 nodes, one permutex2var for 32, two and a blend for 64), gathers below. */
static inline __attribute__((always_inline)) TC_ATTR __m512i FN(lut)(const int32_t *tab, __m512i j, int l) {
  if (l <= 4) return _mm512_permutexvar_epi32(j, _mm512_loadu_si512((const void *)tab));
  if (l == 5) return _mm512_permutex2var_epi32(_mm512_loadu_si512((const void *)tab), j,
                                               _mm512_loadu_si512((const void *)(tab + 16)));
  if (l == 6) {
    const __m512i lo = _mm512_permutex2var_epi32(_mm512_loadu_si512((const void *)tab), j,
                                                 _mm512_loadu_si512((const void *)(tab + 16)));
    const __m512i hi = _mm512_permutex2var_epi32(_mm512_loadu_si512((const void *)(tab + 32)), j,
                                                 _mm512_loadu_si512((const void *)(tab + 48)));
    return _mm512_mask_blend_epi32(_mm512_test_epi32_mask(j, _mm512_set1_epi32(32)), lo, hi);
  }
  return _mm512_i32gather_epi32(j, tab, 4);
}

#define TC_V16_STEP(j, rowoff)                                                                  \
  do {                                                                                          \
    const __m512i f_ = FN(lut)(fl, j, l);                                                       \
    const __m512 t_ = _mm512_castsi512_ps(FN(lut)(tl, j, l));                                   \
    const __m512 x_ = _mm512_i32gather_ps(_mm512_add_epi32(rowoff, _mm512_and_si512(f_, featmask)), xb, 4); \
    __mmask16 g_ = strict ? _mm512_cmp_ps_mask(x_, t_, _CMP_GE_OQ) : _mm512_cmp_ps_mask(x_, t_, _CMP_GT_OQ); \
    g_ |= _mm512_cmp_ps_mask(x_, x_, _CMP_UNORD_Q) & _mm512_cmplt_epi32_mask(f_, zero);         \
    const __m512i s_ = _mm512_add_epi32(j, j);                                                  \
    j = _mm512_mask_add_epi32(s_, g_, s_, one);                                                 \
  } while (0)

#define TC_V16_OUT(j, k)                                                                        \
  do {                                                                                          \
    if (acc) {                                                                                  \
      TC_AT *a_ = acc + r + 16 * (k);                                                           \
      if (sizeof(TC_AT) == 4) {                                                                 \
        _mm512_storeu_ps((float *)a_, _mm512_add_ps(_mm512_loadu_ps((const float *)a_),         \
                                                    _mm512_i32gather_ps(j, (const float *)lv, 4))); \
      } else {                                                                                  \
        _mm512_storeu_pd((double *)a_, _mm512_add_pd(_mm512_loadu_pd((const double *)a_),      \
            _mm512_i32gather_pd(_mm512_castsi512_si256(j), (const double *)lv, 8)));             \
        _mm512_storeu_pd((double *)a_ + 8, _mm512_add_pd(_mm512_loadu_pd((const double *)a_ + 8), \
            _mm512_i32gather_pd(_mm512_extracti64x4_epi64(j, 1), (const double *)lv, 8)));       \
      }                                                                                         \
    } else {                                                                                    \
      _mm512_storeu_si512((void *)(lidx + r + 16 * (k)), j);                                    \
    }                                                                                           \
  } while (0)

static inline __attribute__((always_inline)) TC_ATTR int64_t FN(heap_vec)(
    const int32_t *ff, const float *th, int D, const float *xb, int32_t nf, int64_t nb,
    int32_t *lidx, const int strict, const TC_AT *lv, TC_AT *acc) {
  const __m512i featmask = _mm512_set1_epi32((int32_t)TC_FF_FEAT);
  const __m512i one = _mm512_set1_epi32(1);
  const __m512i zero = _mm512_setzero_si512();
  const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  const __m512i vnf = _mm512_set1_epi32(nf);
  const __m512i step16 = _mm512_set1_epi32(16 * nf);
  int64_t r = 0;
  for (; r + 64 <= nb; r += 64) {
    const __m512i o0 = _mm512_mullo_epi32(_mm512_add_epi32(lane, _mm512_set1_epi32((int32_t)r)), vnf);
    const __m512i o1 = _mm512_add_epi32(o0, step16);
    const __m512i o2 = _mm512_add_epi32(o1, step16);
    const __m512i o3 = _mm512_add_epi32(o2, step16);
    __m512i j0 = zero, j1 = zero, j2 = zero, j3 = zero;
    for (int l = 0; l < D; ++l) {
      const int32_t *fl = ff + ((1 << l) - 1), *tl = (const int32_t *)th + ((1 << l) - 1);
      TC_V16_STEP(j0, o0);
      TC_V16_STEP(j1, o1);
      TC_V16_STEP(j2, o2);
      TC_V16_STEP(j3, o3);
    }
    TC_V16_OUT(j0, 0);
    TC_V16_OUT(j1, 1);
    TC_V16_OUT(j2, 2);
    TC_V16_OUT(j3, 3);
  }
  return r;
}
#undef TC_V16_STEP
#undef TC_V16_OUT
#endif

/* returns how many leading rows were already added into the margins (fused vector path) */
static inline __attribute__((always_inline)) TC_ATTR int64_t FN(heap_s)(
    const tc_tables *T, int64_t t, const TC_XT *xb, int64_t nb, int32_t *lidx, const int strict,
    const TC_AT *lv, TC_AT *acc) {
  const int D = T->tree_depth[t];
  const int64_t nf = T->n_features;
  const int32_t *ff = T->h_ff + T->tree_node[t];
  const TC_XT *th = (const TC_XT *)T->h_thr + T->tree_node[t];
  const uint32_t first = (1u << D) - 1u;
  int64_t r = 0, fused = 0;
#if TC_VEC
  /* row offsets are int32 lanes: only when a block's values fit (checked once per call) */
  if (nb * nf < 0x7fffffffLL) {
    r = FN(heap_vec)(ff, th, D, xb, (int32_t)nf, nb, lidx, strict, lv, acc);
    if (acc) fused = r;
  }
#else
  (void)lv; (void)acc;
#endif
  for (; r + TC_GROUP <= nb; r += TC_GROUP) {
    uint32_t idx[TC_GROUP];
    const TC_XT *x = xb + r * nf;
    for (int k = 0; k < TC_GROUP; ++k) idx[k] = 0;
    for (int l = 0; l < D; ++l) {
      /* fully unrolled (also at -O2) so the TC_GROUP positions live in registers */
#pragma GCC unroll 8
      for (int k = 0; k < TC_GROUP; ++k) {
        const uint32_t f = (uint32_t)ff[idx[k]];
        idx[k] = 2u * idx[k] + 1u + FN(num_right)(x[k * nf + (f & TC_FF_FEAT)], th[idx[k]], f, strict);
      }
    }
    for (int k = 0; k < TC_GROUP; ++k) lidx[r + k] = (int32_t)(idx[k] - first);
  }
  for (; r < nb; ++r) {
    const TC_XT *x = xb + r * nf;
    uint32_t i = 0;
    for (int l = 0; l < D; ++l) {
      const uint32_t f = (uint32_t)ff[i];
      i = 2u * i + 1u + FN(num_right)(x[f & TC_FF_FEAT], th[i], f, strict);
    }
    lidx[r] = (int32_t)(i - first);
  }
  return fused;
}

/* ---- compact layout: explicit children, TC_GROUP rows in flight ---------------------------- */
static inline __attribute__((always_inline)) TC_ATTR int32_t FN(cstep)(
    const tc_tables *T, const TC_NODE *p, const TC_XT *x, const int strict) {
  const uint32_t f = (uint32_t)p->ff;
  const TC_XT v = x[f & TC_FF_FEAT];
  uint32_t gr;
  if (__builtin_expect((f & TC_FF_CAT) != 0, 0)) gr = FN(cat_right)(T, TC_NCAT(p), v, f);
  else gr = FN(num_right)(v, TC_NTHR(p), f, strict);
  return p->child[gr];
}

static inline __attribute__((always_inline)) TC_ATTR void FN(compact_s)(
    const tc_tables *T, int64_t t, const TC_XT *xb, int64_t nb, int32_t *lidx, const int strict) {
  const TC_NODE *nodes = (const TC_NODE *)T->c_nodes;
  const int64_t nf = T->n_features;
  const int32_t root = (int32_t)T->tree_node[t];
  if (root < 0) {
    for (int64_t r = 0; r < nb; ++r) lidx[r] = ~root;
    return;
  }
  /* TC_CGROUP independent walks in flight; a slot whose row reached its leaf takes the next
   * row at once, so every slot keeps a memory access outstanding (rows differ in depth). */
  int32_t nd[TC_CGROUP];
  int64_t row[TC_CGROUP];
  int64_t next = 0;
  int k0 = 0;
  for (; k0 < TC_CGROUP && next < nb; ++k0) { row[k0] = next++; nd[k0] = root; }
  int live = k0;
  while (live == TC_CGROUP) {
    for (int k = 0; k < TC_CGROUP; ++k) {
      const int32_t c = FN(cstep)(T, nodes + nd[k], xb + row[k] * nf, strict);
      if (c < 0) {
        lidx[row[k]] = ~c;
        if (next < nb) { row[k] = next++; nd[k] = root; }
        else { nd[k] = c; --live; }
      } else {
        nd[k] = c;
      }
    }
  }
  /* drain: the remaining slots finish one by one */
  for (int k = 0; k < k0; ++k) {
    int32_t n = nd[k];
    if (n < 0) continue;
    while (n >= 0) n = FN(cstep)(T, nodes + n, xb + row[k] * nf, strict);
    lidx[row[k]] = ~n;
  }
}

/* ---- compact trees, deep path (float input): top heap + lockstep walk over leaf records ----
 * Used for compact trees without categorical splits (or NaN thresholds) when arrays_derived.py derived
 * the d_* tables (_deep_tables). Measured on rf-deep (20 sklearn trees of ~3.8k nodes, depth
 * ~29, 13.3 steps per row and tree; AMD EPYC, AVX2): compact_s 947 ns/row -> this path ~420.
 * 1. The tree's top K levels (each at least half internal, K <= arrays_derived.py's DEEP_TOP_MAX) are
 *    a heap walked branch-free like the heap layout, on order keys (top_vec where the ISA has
 *    vectors: ~6% faster than the heap layout's float walk here, as its level 0 needs no
 *    gather; a row at a time otherwise, much slower: isa="scalar" ~750 ns/row on rf-deep).
 *    A leaf above depth K is padding down to the leftmost exit below it, which holds the
 *    leaf's record: lidx[r] = the row's exit slot at depth K.
 * 2. From the exit's node, TC_DG rows walk together in lockstep: one step of each row per
 *    round, no branch per row, until every row sits in a leaf record (a leaf record points to
 *    itself on both sides, so finished rows stay put). Rows of a group finish at different
 *    depths (~12 rounds for 7.4 useful steps on rf-deep); the wasted steps still cost less than
 *    the mispredicted "is this a leaf" branch of the slot walk (compact_s) they replace.
 *    Children are byte offsets and the rows' values sit feature-major per group, so a step is
 *    a handful of loads and one integer compare of order keys (fkey), exact for every non-NaN
 *    value; `nan` = 1 (the block holds a NaN) adds the NaN rule, i.e. num_right's semantics.
 * Tried and dropped (measured, same process): AVX2 gathers over 8 walks (gathers cost ~1
 * cycle per element on this CPU: no gain), finishing a group's last 1-3 rows one by one
 * (slower: a lone walk is latency-bound), 16 rows per group (same speed), prefetching both
 * children (much slower). */

/* float32 bits -> an int32 whose signed order is the floats' order, for every non-NaN value
 * once -0.0 is read as +0.0 (so that equal floats have equal keys); arrays_derived.py computes the
 * thresholds' keys the same way. A NaN's key lies above +inf's or below -inf's. */
static inline __attribute__((always_inline)) TC_ATTR int32_t FN(fkey)(float v) {
  uint32_t b;
  memcpy(&b, &v, 4);
  if (b == 0x80000000u) b = 0;
  return (int32_t)(b >> 31 ? b ^ 0x7fffffffu : b);
}
#define TC_KEY_NAN(k) (((k) > (int32_t)0x7f800000) | ((k) < (int32_t)0x807fffff))

#if TC_VEC
/* The deep path's top walk, AVX2 (also inside the AVX-512 path): 4 groups of 8 rows at a time
 * (32 rows), on the groups' feature-major keys (xt) and the top's threshold keys. At level 0
 * every row of a group is at the root: its feature is one vector load, no gather; levels 1..3
 * load the level's few features and blend (dsel); levels 4..5 gather. Nodes are looked up in
 * registers (as the heap walk does). Same rule
 * as the scalar top walk: key compare, or (nan blocks) the NaN direction for a NaN key. */

/* the rows' keys at level l <= 3 without a gather: the level's 2^l features are plain loads,
 * each row's picked by blends on the bits of its position j */
static inline __attribute__((always_inline)) TC_ATTR __m256i FN(dsel)(const int32_t *xg, const int32_t *fl,
                                                                       __m256i j, int l) {
#define TC_LD(i) _mm256_castsi256_ps(_mm256_loadu_si256( \
    (const __m256i *)(xg + 8 * (int64_t)((uint32_t)fl[i] & TC_FF_FEAT))))
  const __m256 b0 = _mm256_castsi256_ps(_mm256_slli_epi32(j, 31));
  const __m256 a = _mm256_blendv_ps(TC_LD(0), TC_LD(1), b0);
  if (l == 1) return _mm256_castps_si256(a);
  const __m256 b1 = _mm256_castsi256_ps(_mm256_slli_epi32(j, 30));
  const __m256 lo = _mm256_blendv_ps(a, _mm256_blendv_ps(TC_LD(2), TC_LD(3), b0), b1);
  if (l == 2) return _mm256_castps_si256(lo);
  const __m256 hi = _mm256_blendv_ps(_mm256_blendv_ps(TC_LD(4), TC_LD(5), b0),
                                     _mm256_blendv_ps(TC_LD(6), TC_LD(7), b0), b1);
  return _mm256_castps_si256(_mm256_blendv_ps(lo, hi, _mm256_castsi256_ps(_mm256_slli_epi32(j, 29))));
#undef TC_LD
}

#define TC_DT_STEP(j, xg)                                                                      \
  do {                                                                                         \
    const __m256i f_ = tc_lut8(fl, j, l);                                                     \
    const __m256i t_ = tc_lut8(tl, j, l);                                                     \
    const __m256i x_ = l == 0 ? _mm256_loadu_si256((const __m256i *)((xg) + 8 * (int64_t)f0))  \
        : l <= lsel ? FN(dsel)((xg), fl, j, l)                                                  \
        : _mm256_i32gather_epi32((xg), _mm256_add_epi32(_mm256_slli_epi32(_mm256_and_si256(f_, featmask), 3), lane), 4); \
    __m256i g_ = strict ? _mm256_xor_si256(_mm256_cmpgt_epi32(t_, x_), ones) : _mm256_cmpgt_epi32(x_, t_); \
    if (nan) {                                                                                 \
      const __m256i n_ = _mm256_or_si256(_mm256_cmpgt_epi32(x_, pinf), _mm256_cmpgt_epi32(ninf, x_)); \
      g_ = _mm256_blendv_epi8(g_, _mm256_srai_epi32(f_, 31), n_);                              \
    }                                                                                          \
    j = _mm256_sub_epi32(_mm256_add_epi32(j, j), g_);                                          \
  } while (0)

static inline __attribute__((always_inline)) TC_ATTR int64_t FN(top_vec)(
    const int32_t *tff, const int32_t *ttk, int K, const int32_t *xt, int64_t nf, int64_t nb,
    int32_t *lidx, const int strict, const int nan) {
  const __m256i featmask = _mm256_set1_epi32((int32_t)TC_FF_FEAT);
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const __m256i ones = _mm256_set1_epi32(-1);
  const __m256i pinf = _mm256_set1_epi32(0x7f800000), ninf = _mm256_set1_epi32((int32_t)0x807fffff);
  const int64_t f0 = (int64_t)((uint32_t)tff[0] & TC_FF_FEAT);
  /* levels 1..3 by loads and blends: (ns/row on rf-deep, same process) gathers from level 1
   * on 478, blends to level 2 459, to level 3 447 */
  const int lsel = 3;
  int64_t r = 0;
  if (K > 6 || 32 * nf >= 0x7fffffffLL) return 0;
  for (; r + 32 <= nb; r += 32) {
    const int32_t *x0 = xt + r * nf, *x1 = x0 + 8 * nf, *x2 = x1 + 8 * nf, *x3 = x2 + 8 * nf;
    __m256i j0 = _mm256_setzero_si256(), j1 = j0, j2 = j0, j3 = j0;
    for (int l = 0; l < K; ++l) {
      const int32_t *fl = tff + ((1 << l) - 1), *tl = ttk + ((1 << l) - 1);
      TC_DT_STEP(j0, x0);
      TC_DT_STEP(j1, x1);
      TC_DT_STEP(j2, x2);
      TC_DT_STEP(j3, x3);
    }
    _mm256_storeu_si256((__m256i *)(lidx + r), j0);
    _mm256_storeu_si256((__m256i *)(lidx + r + 8), j1);
    _mm256_storeu_si256((__m256i *)(lidx + r + 16), j2);
    _mm256_storeu_si256((__m256i *)(lidx + r + 24), j3);
  }
  return r;
}
#undef TC_DT_STEP
#endif

static inline __attribute__((always_inline)) TC_ATTR void FN(deep_s)(
    const tc_tables *T, int64_t t, const float *xb, const int32_t *xt, int64_t nb, int32_t *lidx,
    const int strict, const int nan) {
  const int K = T->d_topd[t];
  const int64_t nf = T->n_features;
  const int32_t *tff = T->d_top_ff + T->d_topoff[t];
  const int32_t *ttk = T->d_top_tk + T->d_topoff[t];
  const int32_t *ex = T->d_exit + T->d_exitoff[t];
  const char *base = (const char *)T->d_recs;
  const uint8_t *nanr = T->d_nanr;
  /* a power of two: leaf records lie at byte offsets [lim, 2 lim), internal ones below */
  const int32_t lim = (int32_t)(T->d_nint * (int64_t)sizeof(tc_drec));
  const int32_t l0 = (int32_t)T->d_leaf0[t];
  const uint32_t first = (1u << K) - 1u;
  int64_t r = 0;
#if TC_VEC
  r = FN(top_vec)(tff, ttk, K, xt, nf, nb, lidx, strict, nan);
#endif
  for (; r < nb; ++r) {  /* the top walk, a row at a time (padding: key INT32_MAX, goes left) */
    const float *x = xb + r * nf;
    uint32_t i = 0;
    for (int l = 0; l < K; ++l) {
      const uint32_t f = (uint32_t)tff[i];
      const int32_t v = FN(fkey)(x[f & TC_FF_FEAT]);
      int gr = strict ? (v >= ttk[i]) : (v > ttk[i]);
      gr = TC_KEY_NAN(v) ? (int)(f >> 31) : gr;
      i = 2u * i + 1u + (uint32_t)gr;
    }
    lidx[r] = (int32_t)(i - first);
  }
  /* groups of TC_DG rows: xt holds their keys feature-major (xt + r * nf: feature f of the
   * group's row k at byte f * 4 * TC_DG + 4 * k) and a record's ff is that byte offset, so a
   * row's value is one load at a constant displacement; the comparison is an integer one */
  for (r = 0; r + TC_DG <= nb; r += TC_DG) {
    const char *xg = (const char *)(xt + r * nf);
    int32_t nd[TC_DG];
    for (int k = 0; k < TC_DG; ++k) nd[k] = ex[lidx[r + k]];
    for (;;) {
      int32_t all = -1;
#pragma GCC unroll 8
      for (int k = 0; k < TC_DG; ++k) {
        const tc_drec *p = (const tc_drec *)(base + nd[k]);
        const int32_t v = *(const int32_t *)(xg + p->ff + 4 * k);
#if TC_X86
        if (!nan) {
          /* both children load beside the compare and a cmov picks one: the next record's
           * address does not wait for a flag-to-index step and a load after the compare */
          int32_t c = p->child[0];
          if (strict)
            __asm__("cmpl %[t], %[v]\n\tcmovge %[r], %[c]" : [c] "+r"(c)
                    : [v] "r"(v), [t] "m"(p->tk), [r] "m"(p->child[1]) : "cc");
          else
            __asm__("cmpl %[t], %[v]\n\tcmovg %[r], %[c]" : [c] "+r"(c)
                    : [v] "r"(v), [t] "m"(p->tk), [r] "m"(p->child[1]) : "cc");
          nd[k] = c;
          all &= c;
          continue;
        }
#endif
        int gr = strict ? (v >= p->tk) : (v > p->tk);
        if (nan) gr = TC_KEY_NAN(v) ? nanr[(uint32_t)nd[k] / sizeof(tc_drec)] : gr;
        nd[k] = p->child[gr];
        all &= nd[k];
      }
      if (all & lim) break;  /* every row is at a leaf record */
    }
    for (int k = 0; k < TC_DG; ++k) lidx[r + k] = (int32_t)((uint32_t)nd[k] / sizeof(tc_drec)) - l0;
  }
  for (; r < nb; ++r) {  /* the block's last rows (fewer than a group): from xb */
    const float *x = xb + r * nf;
    int32_t n = ex[lidx[r]];
    while (n < lim) {
      const tc_drec *p = (const tc_drec *)(base + n);
      const int32_t v = FN(fkey)(x[p->ff / (4 * TC_DG)]);
      int gr = strict ? (v >= p->tk) : (v > p->tk);
      gr = TC_KEY_NAN(v) ? nanr[(uint32_t)n / sizeof(tc_drec)] : gr;
      n = p->child[gr];
    }
    lidx[r] = (int32_t)((uint32_t)n / sizeof(tc_drec)) - l0;
  }
}

/* ---- one block of rows, tree-major ---------------------------------------------------------- */
/* one tree's leaf vectors (lidx: each row's leaf) added into the margins of rows [r0, nb) */
static inline __attribute__((always_inline)) TC_ATTR void FN(add_leaves)(
    const TC_AT *lv, const int32_t *lidx, int64_t r0, int64_t nb, TC_AT *ab, int64_t no, int64_t o,
    int64_t w) {
  if (w == 1) {
    for (int64_t r = r0; r < nb; ++r) ab[r * no + o] += lv[lidx[r]];
  } else {
    for (int64_t r = r0; r < nb; ++r) {
      const TC_AT *v = lv + (int64_t)lidx[r] * w;
      TC_AT *a = ab + r * no + o;
      for (int64_t j = 0; j < w; ++j) a[j] += v[j];
    }
  }
}

/* heap trees [t0, t0 + k) (k <= TC_FEWTREES) for each of nb (< TC_FEW, or a quantised model's
 * < float_rows: float_few) rows: the k walks of a row in flight together, level by level (each tree's walk is one chain of dependent loads:
 * node word, the row's value, threshold), then the row's leaves added in tree order (per row
 * the interpreter's summation order: rows are independent). Also what a few rows of a
 * quantised model over many columns take (run: float_few), where binning every column a
 * row has would cost more than the walks. */
static inline __attribute__((always_inline)) TC_ATTR void FN(heap_trees)(
    const tc_tables *T, int64_t t0, int64_t k, const TC_XT *xb, int64_t nb, TC_AT *ab,
    const int strict) {
  const int64_t nf = T->n_features, no = T->n_outputs;
  int dmax = 0;
  for (int64_t j = 0; j < k; ++j)
    if (T->tree_depth[t0 + j] > dmax) dmax = T->tree_depth[t0 + j];
  for (int64_t r = 0; r < nb; ++r) {
    const TC_XT *x = xb + r * nf;
    uint32_t idx[TC_FEWTREES];
    for (int j = 0; j < TC_FEWTREES; ++j) idx[j] = 0;
    for (int l = 0; l < dmax; ++l) {
      for (int64_t j = 0; j < k; ++j) {
        const int64_t t = t0 + j;
        if (l < T->tree_depth[t]) {
          const uint32_t f = (uint32_t)T->h_ff[T->tree_node[t] + idx[j]];
          const TC_XT th = ((const TC_XT *)T->h_thr)[T->tree_node[t] + idx[j]];
          idx[j] = 2u * idx[j] + 1u + FN(num_right)(x[f & TC_FF_FEAT], th, f, strict);
        }
      }
    }
    for (int64_t j = 0; j < k; ++j) {
      const int64_t t = t0 + j;
      const int32_t li = (int32_t)(idx[j] - ((1u << T->tree_depth[t]) - 1u));
      FN(add_leaves)((const TC_AT *)T->leaf_values + T->tree_leaf[t], &li, 0, 1, ab + r * no,
                     no, T->tree_out[t], T->tree_width[t]);
    }
  }
}

/* trees [t0, t0 + k) (compact, k <= TC_FEWTREES) for each of nb rows: the k walks of a row in
 * flight together; leaves then added in tree order (the interpreter's summation order).
 * Tried (single rows, one process, against this): a slot whose walk ends takes the row's next
 * tree at once (no lockstep rounds: 500 LightGBM trees of 63 leaves take 7.2 steps a tree but
 * 11.7 rounds per 8 trees): 10% faster on LightGBM and rf-deep, 10% slower on 200 HGB trees
 * (short walks, categorical splits); 12 or 16 walks in flight instead of 8: no change; lockstep
 * without the branch per walk (finished walks parked on a self-looping record): 1.3x slower;
 * one row's walks of 8 trees at once, a tree per AVX2 lane (masked gathers of node words,
 * thresholds and the row's values): 1.13x slower on rf-deep and ET (float32 nodes); on
 * XGBoost's float heaps 1.8x faster than the scalar heap walk but still 2x slower than the byte
 * walk a single row takes there (gathers are slow on this core).
 * Forests of the interval walk (trees of <= 64 leaves, numeric, <= 128 columns) take a byte
 * walk below 17 rows on AVX-512 instead (quant_impl.c, zbvrows_w1: 500 LightGBM trees, one
 * row, 17.0 -> 5.5 us): this walk is left to bigger trees (random forests, ExtraTrees), the
 * scalar and AVX2 paths and forests with categorical nodes. What bounds it: one node record's
 * load per step of each of the 8 chains (float64 records: 24 bytes, LightGBM's 31,000 nodes
 * 744 KB, beyond L1 and most of L2), and the steps' own instructions: with the walks' nodes in
 * an array each step stored its node and the next round loaded it back (a store-to-load
 * forwarding on every chain's step); for 8 trees the nodes now live in registers (one row,
 * kernel, AMD Zen 4, one process, 2026-11-24: ExtraTrees 1.46 -> 1.13 us, rf-deep 0.81 -> 0.65,
 * HGB 7.6 -> 5.4 and LightGBM 16.2 -> 13.7 where they take this walk (AVX2)). Branch-free
 * steps on top (finished walks stepping a dummy node) were slower again: 1.03x, 0.95x. An
 * AVX-512 interval walk deciding categorical nodes one by one (12 a tree on HGB's model) lost
 * to it too: 6.6 against 5.9 us. */
/* the exit leaves nd[0..k) (~leaf) of trees [t0, t0 + k) added into a row's margins a, in
 * tree order (the interpreter's summation order) */
static inline __attribute__((always_inline)) TC_ATTR void FN(tree_leaves)(
    const tc_tables *T, int64_t t0, int64_t k, const int32_t *nd, TC_AT *a) {
  for (int64_t j = 0; j < k; ++j) {
    const int64_t t = t0 + j, w = T->tree_width[t];
    const TC_AT *v = (const TC_AT *)T->leaf_values + T->tree_leaf[t] + (int64_t)(~nd[j]) * w;
    for (int64_t c = 0; c < w; ++c) a[T->tree_out[t] + c] += v[c];
  }
}

static inline __attribute__((always_inline)) TC_ATTR void FN(compact_trees)(
    const tc_tables *T, int64_t t0, int64_t k, const TC_XT *xb, int64_t nb, TC_AT *ab,
    const int strict) {
  const TC_NODE *nodes = (const TC_NODE *)T->c_nodes;
  const int64_t nf = T->n_features, no = T->n_outputs;
  for (int64_t r = 0; r < nb; ++r) {
    const TC_XT *x = xb + r * nf;
    int32_t nd[TC_FEWTREES];
    if (k == 8) {  /* (TC_FEWTREES) the eight walks' nodes in registers, not in nd[] */
      int32_t n0 = (int32_t)T->tree_node[t0], n1 = (int32_t)T->tree_node[t0 + 1];
      int32_t n2 = (int32_t)T->tree_node[t0 + 2], n3 = (int32_t)T->tree_node[t0 + 3];
      int32_t n4 = (int32_t)T->tree_node[t0 + 4], n5 = (int32_t)T->tree_node[t0 + 5];
      int32_t n6 = (int32_t)T->tree_node[t0 + 6], n7 = (int32_t)T->tree_node[t0 + 7];
#define TC_CT_STEP(n) if (n >= 0) n = FN(cstep)(T, nodes + n, x, strict)
      while ((n0 & n1 & n2 & n3 & n4 & n5 & n6 & n7) >= 0) {
        TC_CT_STEP(n0); TC_CT_STEP(n1); TC_CT_STEP(n2); TC_CT_STEP(n3);
        TC_CT_STEP(n4); TC_CT_STEP(n5); TC_CT_STEP(n6); TC_CT_STEP(n7);
      }
#undef TC_CT_STEP
      nd[0] = n0; nd[1] = n1; nd[2] = n2; nd[3] = n3; nd[4] = n4; nd[5] = n5; nd[6] = n6; nd[7] = n7;
    } else {
      int live = 0;
      for (int64_t j = 0; j < k; ++j) {
        nd[j] = (int32_t)T->tree_node[t0 + j];
        live += nd[j] >= 0;
      }
      while (live) {
        live = 0;
        for (int64_t j = 0; j < k; ++j) {
          if (nd[j] >= 0) {
            nd[j] = FN(cstep)(T, nodes + nd[j], x, strict);
            live += nd[j] >= 0;
          }
        }
      }
    }
    FN(tree_leaves)(T, t0, k, nd, ab + r * no);
  }
}

/* compact_trees' plain form: trees [t0, t0 + k) (k <= TC_PLAINTREES) of a forest without
 * categorical nodes (T->c_plain) for rows without NaN. A step is the node's feature as 16
 * bits, the row's value, one compare (no NaN rule to apply) and the child: about half
 * cstep's instructions, so more walks fit in flight (registers, -1 where k < TC_PLAINTREES).
 * One row, kernel (native_call_ns, min of 5), AMD Zen 4, 2026-11-24, against compact_trees'
 * eight walks: rf-deep (20 trees, mean depth 24) 0.67 -> 0.41 us, ExtraTrees (50 trees, depth
 * 10, 5 classes) 1.17 -> 0.79. Ten walks beat 8 (0.58, 0.99 with the plain steps), 12 (0.44,
 * 0.85) and 16 (0.48, 0.83): past ten the chains spill registers. The general steps keep
 * eight: ten cost HGB's categorical forest 20% more. */
#define TC_PLAINTREES 10 /* (TC_PL_LIST names that many walks) */
#define TC_PL_LIST(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9)
static inline __attribute__((always_inline)) TC_ATTR void FN(plain_trees)(
    const tc_tables *T, int64_t t0, int64_t k, const TC_XT *xb, int64_t nb, TC_AT *ab,
    const int strict) {
  const TC_NODE *nodes = (const TC_NODE *)T->c_nodes;
  const int64_t nf = T->n_features, no = T->n_outputs;
  for (int64_t r = 0; r < nb; ++r) {
    const TC_XT *x = xb + r * nf;
    int32_t nd[TC_PLAINTREES];
#define TC_PL_DECL(j) int32_t n##j = j < k ? (int32_t)T->tree_node[t0 + j] : -1;
#define TC_PL_AND(j) & n##j
#define TC_PL_STEP(j)                                                                      \
  if (n##j >= 0) {                                                                         \
    const TC_NODE *p = nodes + n##j;                                                       \
    const TC_XT v = x[(uint16_t)p->ff];                                                    \
    n##j = p->child[strict ? v >= TC_NTHR(p) : v > TC_NTHR(p)];                            \
  }
#define TC_PL_OUT(j) nd[j] = n##j;
    TC_PL_LIST(TC_PL_DECL)
    while ((-1 TC_PL_LIST(TC_PL_AND)) >= 0) {
      TC_PL_LIST(TC_PL_STEP)
    }
    TC_PL_LIST(TC_PL_OUT)
#undef TC_PL_DECL
#undef TC_PL_AND
#undef TC_PL_STEP
#undef TC_PL_OUT
    FN(tree_leaves)(T, t0, k, nd, ab + r * no);
  }
}
#undef TC_PL_LIST

static inline __attribute__((always_inline)) TC_ATTR void FN(block_s)(
    const tc_tables *T, const TC_XT *xb, int64_t nb, TC_AT *ab, int32_t *lidx, int32_t *xt,
    const int strict) {
  const int64_t no = T->n_outputs;
  int nan = -1;  /* unknown yet */
  int plain = 0;  /* few rows: plain_trees' steps apply (no NaN in the rows) */
  int64_t run_end = 0;  /* plain: the end of the run of compact trees being walked */
  if (nb < TC_FEW && T->c_plain) {
    int any = 0;
    for (int64_t k = 0; k < nb * T->n_features; ++k) any |= xb[k] != xb[k];
    plain = !any;
  }
  for (int64_t t = 0; t < T->n_trees; ++t) {
    /* few rows (a quantised model's here: float_few): TC_FEWTREES heap walks at once */
    if ((nb < TC_FEW || T->quant) && T->tree_layout[t] == 0) {
      int64_t t1 = t + 1;
      while (t1 < T->n_trees && t1 - t < TC_FEWTREES && T->tree_layout[t1] == 0) ++t1;
      FN(heap_trees)(T, t, t1 - t, xb, nb, ab, strict);
      t = t1 - 1;
      continue;
    }
    if (nb < TC_FEW && T->tree_layout[t] == 1) {
      /* few rows (single-row latency): a row's walks down up to TC_FEWTREES (plain steps:
       * TC_PLAINTREES) consecutive compact trees at once, independent chains in flight */
      int64_t t1 = t + 1;
      if (plain) {  /* the run of compact trees from t in equal batches of <= TC_PLAINTREES */
        if (t >= run_end)
          for (run_end = t + 1; run_end < T->n_trees && T->tree_layout[run_end] == 1;) ++run_end;
        const int64_t left = run_end - t, batches = (left + TC_PLAINTREES - 1) / TC_PLAINTREES;
        t1 = t + (left + batches - 1) / batches;
      } else {
        while (t1 < T->n_trees && t1 - t < TC_FEWTREES && T->tree_layout[t1] == 1) ++t1;
      }
      if (plain) FN(plain_trees)(T, t, t1 - t, xb, nb, ab, strict);
      else FN(compact_trees)(T, t, t1 - t, xb, nb, ab, strict);
      t = t1 - 1;
      continue;
    }
    const TC_AT *lv = (const TC_AT *)T->leaf_values + T->tree_leaf[t];
    const int64_t o = T->tree_out[t], w = T->tree_width[t];
    int64_t done = 0;
    if (T->tree_layout[t] == 0) {
      done = FN(heap_s)(T, t, xb, nb, lidx, strict, lv, no == 1 && w == 1 ? ab : 0);
    } else if (xt && T->d_topd[t] > 0) {
      const int64_t nf = T->n_features;
      if (nan < 0) {  /* once per block: transpose the groups of rows, look for NaN */
        int any = 0;
        for (int64_t k = 0; k < nb * nf; ++k) any |= xb[k] != xb[k];
        nan = any;
        for (int64_t r = 0; r + TC_DG <= nb; r += TC_DG)
          for (int64_t f = 0; f < nf; ++f)
            for (int k = 0; k < TC_DG; ++k)
              xt[(r * nf + f * TC_DG) + k] = FN(fkey)((float)xb[(r + k) * nf + f]);
      }
      if (nan) FN(deep_s)(T, t, (const float *)xb, xt, nb, lidx, strict, 1);
      else FN(deep_s)(T, t, (const float *)xb, xt, nb, lidx, strict, 0);
    } else {
      FN(compact_s)(T, t, xb, nb, lidx, strict);
    }
    FN(add_leaves)(lv, lidx, done, nb, ab, no, o, w);
  }
}

static TC_ATTR void FN(block)(const tc_tables *T, const TC_XT *xb, int64_t nb, TC_AT *ab, int32_t *lidx,
                              int32_t *xt) {
  if (T->strict) FN(block_s)(T, xb, nb, ab, lidx, xt, 1);
  else FN(block_s)(T, xb, nb, ab, lidx, xt, 0);
}

/* ---- the quantised heap walk (runtime/kernels/quant_impl.c) --------------------------------- */
#include "kernels/quant_impl.c"

/* ---- the naive baseline: one row at a time, one tree at a time, branchy node walk ----------- */
static TC_ATTR void FN(naive)(const tc_tables *T, const TC_XT *xb, int64_t nb, TC_AT *ab) {
  const TC_NODE *nodes = (const TC_NODE *)T->c_nodes;
  const int64_t nf = T->n_features, no = T->n_outputs;
  for (int64_t r = 0; r < nb; ++r) {
    const TC_XT *x = xb + r * nf;
    TC_AT *a = ab + r * no;
    for (int64_t t = 0; t < T->n_trees; ++t) {
      int32_t n = (int32_t)T->tree_node[t];
      while (n >= 0) {
        const TC_NODE *p = nodes + n;
        const uint32_t f = (uint32_t)p->ff;
        const TC_XT v = x[f & TC_FF_FEAT];
        int right;
        if (v != v) right = (int)(f >> 31);
        else if (f & TC_FF_CAT) right = (int)FN(cat_right)(T, TC_NCAT(p), v, f);
        else if (T->strict) right = !(v < TC_NTHR(p));
        else right = !(v <= TC_NTHR(p));
        n = right ? p->child[1] : p->child[0];
      }
      const int64_t w = T->tree_width[t];
      const TC_AT *v = (const TC_AT *)T->leaf_values + T->tree_leaf[t] + (int64_t)(~n) * w;
      for (int64_t j = 0; j < w; ++j) a[T->tree_out[t] + j] += v[j];
    }
  }
}

/* does a few rows' call of a quantised model walk its float heaps (heap_trees, a row at a
 * time: measured faster than heap_s's rows in lanes up to 15 rows) instead of binning the rows?
 * Per row, binning costs every column the tables have (q_ncols), the float walk a dependent
 * step per level of every tree (TC_FEWTREES walks in flight) where the byte walk after binning
 * takes a cheaper one. Prices fitted on one row (AVX-512, Zen 4 guest, 2026-11-28, the
 * -DTC_TIMING pieces of bench/row_pieces.py, 100 XGBoost trees of depth 8): binning ~7.5 ns a
 * column (27 cycles; 90 columns 680 ns, 968 columns 3.7 us), a float step ~4.1 ns (800 steps
 * 3.3 us), a byte step ~1.4 ns (1.1 us): the float walk pays where q_ncols x 7.5 > steps x
 * (4.1 - 1.4), q_ncols x 2.8 > steps; rounded: q_ncols x TC_FLOATFEW_COL (3) > the trees' depths
 * summed, from TC_FLOATFEW_MINCOLS columns (below, the sum is not worth taking). Both sides
 * grow with the rows until the quantiser bins rows in lanes, where binning a column costs a
 * fraction per row: the row count where that starts bounds the rule (float_rows, and on
 * AVX-512 TC_FLOATFEW_ZQ). One row, 100 trees of depth 8 over 968 / 2,000 features: kernel
 * 9.3 / 10.4 us through the byte walk (its quantiser 3.7 / 8-23 us of it), 2.3 / 2.5 through
 * the float walk; 90 features keep the byte walk (1.9 us against 3.3). */
#ifndef TC_FLOATFEW_MINCOLS
#define TC_FLOATFEW_MINCOLS 128
#endif
#ifndef TC_FLOATFEW_COL
#define TC_FLOATFEW_COL 3
#endif
/* the rows below which a call can take the float walks (paired in one process against the byte
 * walk, 100 trees of depth 8 over 968 / 2,000 features, Zen 4 guest, 2026-11-28): AVX2: 32 (rows
 * from 32 are binned in lanes from a transposed block: 31 rows float 1.02x / 1.9x faster, 32
 * rows 2.1x / 1.3x slower); the portable path bins a row at a time however many: float faster
 * at 8-48 rows (1.2x-2.2x), up to one block (64); AVX-512 and aarch64 16 (AVX-512: zq1 below,
 * and see float_few) */
static TC_ATTR int64_t FN(float_rows)(void) {
#ifdef TC_FLOATFEW_ROWS
  return TC_FLOATFEW_ROWS;
#elif TC_QVEC == 1
  return 32;
#elif TC_QVEC == 2 || TC_QARM
  return 16;
#else
  return 64;
#endif
}
/* AVX-512, float32 rows from TC_ZQ_MINROWS (8): tc_zquant bins the block's rows in lanes for
 * about a price a column whatever the rows (~22-26 ns: 968 / 1,631 columns 25 / 35 us a call
 * of 8-15 rows, the byte walk included), the float walk ~2.8-3.1 ns a step and row (rows in
 * cache): the float walk while rows x steps < q_ncols x TC_FLOATFEW_ZQ (25 ns / 3 ns ~ 8;
 * 7 from the crossovers measured with the rows in cache: 968 columns ~9.5 rows, 7.9; 1,631
 * ~13.5 rows, 6.6). Rows streamed from memory move them (the float walk's reads of the rows
 * miss): 968 ~10 rows, 1,631 below 8. */
#ifndef TC_FLOATFEW_ZQ
#define TC_FLOATFEW_ZQ 7
#endif
static TC_ATTR int FN(float_few)(const tc_tables *T, int64_t n) {
  if (!T->quant || T->naive || T->q_ncols < TC_FLOATFEW_MINCOLS || n >= FN(float_rows)()) return 0;
  /* the trees' depths summed only up to the bound (a call of few rows on a model of many
   * trees stops as soon as the float walk cannot pay) */
  const int64_t lim = (int64_t)T->q_ncols * TC_FLOATFEW_COL;
  int64_t steps = 0;
  for (int64_t t = 0; t < T->n_trees; ++t)
    if ((steps += T->tree_depth[t]) >= lim) return 0;
#if TC_QVEC == 2
  if (n >= TC_ZQ_MINROWS && sizeof(TC_XT) == 4 && T->q_lvl && FN(zquant_pays)(T))
    return n * steps < (int64_t)T->q_ncols * TC_FLOATFEW_ZQ;
#endif
  return 1;
}

/* ---- driver: cast blocks of rows to TC_XT, start from the base score, average ------------- */
#ifndef TC_STACK_SCRATCH
#define TC_STACK_SCRATCH 16384 /* bytes of stack for a few rows' buffers (run) */
#endif
#if defined(TC_TIMING) && !defined(__x86_64__)
#error "TC_TIMING (a measurement build: bench/row_pieces.py) reads the x86-64 time stamp counter"
#endif
#if defined(TC_TIMING) && !defined(TC_TIMING_ONCE)
/* a measurement build only (bench/row_pieces.py): run adds the time stamp counter's ticks per
 * piece, [0] before the quantiser, [1] in it, [2] in the byte walk (qblock / bvblock: the walk
 * and the in-order leaf adds), [3] the count of blocks that took the byte walks, [4] the rest
 * (after the last byte walk; the whole call where none ran: the float walks); tc_timing_read
 * copies and clears them. Not thread-safe, and absent from every normal build. */
#define TC_TIMING_ONCE
#include <x86intrin.h>
#if TC_PART == -1 || TC_PART == 0  /* one copy for the library's parts */
uint64_t tc_tim[8];
TC_EXPORT void tc_timing_read(uint64_t *o) {
  for (int i = 0; i < 8; ++i) o[i] = tc_tim[i], tc_tim[i] = 0;
}
#else
extern uint64_t tc_tim[8];
#endif
#endif
TC_ATTR int32_t FN(run)(const tc_tables *T, const void *X, int32_t x_bits, int64_t n,
                               void *out) {
#ifdef TC_TIMING
  uint64_t tt0 = __rdtsc();
#endif
  const int64_t nf = T->n_features, no = T->n_outputs;
  /* rows per block: the buffers below are sized for a block, so never more than n (a single
   * row must not allocate and clear a full block's buffers) */
  const int64_t B0 = T->block_rows > 0 ? T->block_rows : 64, B = n < B0 ? (n > 0 ? n : 1) : B0;
  const TC_AT *base = (const TC_AT *)T->base;
  const int64_t B32 = (B + 31) / 32 * 32;              /* whole 32-row groups */
  /* bytes per group of TC_QR rows (quant_impl.c: 32, or 64 in the AVX-512 unit) */
  const int64_t gs = (TC_QVEC == 2 ? 64 : 32) * (int64_t)(T->q_ncols > 0 ? T->q_ncols : 1);
  /* the block's buffers, sized here and carved from one allocation (64-byte aligned pieces):
   * on the stack up to TC_STACK_SCRATCH bytes (a few rows: malloc / aligned_alloc and free of
   * a few KB cost a small model's whole single row, glibc consolidating its fast bins before
   * an aligned block), one aligned_alloc beyond */
  /* the deep path's feature-major keys of a block (float input only) */
  const size_t n_xt = sizeof(TC_XT) == 4 && T->d_topd && !T->naive ? (size_t)(B * nf) : 0;
  const size_t n_buf = x_bits != (int32_t)(8 * sizeof(TC_XT)) ? (size_t)(B * nf) : 0;
  /* the byte walks: quantised heaps (any path), the interval walk (vector paths only) */
  const int use_bv = T->bitvec && (TC_QVEC || (TC_QARM && !T->bv_bias));
  /* a multiple of 32 (aligned_alloc's rule); plus 64 columns: the column mux (tc_qlevelc)
   * loads all of a power of two of columns, past the last group's own */
  const size_t qn = (T->quant || use_bv) && !T->naive && !FN(float_few)(T, n)
                    ? (size_t)((TC_QVEC == 2 ? (B + 63) / 64 : B32 / 32) * gs) + 64 * (TC_QVEC == 2 ? 64 : 32)
                    : 0;
  /* bins 32 rows at once (quant_impl.c, tc_qlanes) read the block transposed: as float32 at
   * xq and, for float64 rows, exact at xd; xu: per 4 features, does a numeric column read one
   * (only those are moved) */
#if TC_QVEC == 2
  /* asked only for blocks of 32 rows or more (use_xq needs B >= 32): zquant_pays reads every
   * column's table length, which a single row paid on every call (one row, kernel, paired
   * against the earlier build: 1.01-1.03x on xgb-binary, xgb-d8-968, xgb-d8-2000) */
  const int zq = B >= 32 && sizeof(TC_XT) == 4 && T->q_lvl && FN(zquant_pays)(T);  /* no transposed copy */
#else
  const int zq = 0;
#endif
  const int use_xq = (TC_QVEC || TC_QARM) && qn && T->q_lvl && B >= 32 && nf > 0 && !zq;
  /* several outputs, every leaf a scalar (XGBoost / LightGBM multiclass: a tree per class and
   * round): the byte walks add into class-major margins (a column of the block's rows per
   * output), so each tree's leaves go into contiguous values, 8 rows a vector add, as for one
   * output; copied back to row-major at the block's end. Same adds in the same order. */
  const int use_cm = qn && no > 1 && T->q_w1 && B >= TC_QVEC_MIN;
#define TC_A64(b) (((size_t)(b) + 63) & ~(size_t)63)
  const size_t o_lidx = 0, o_xt = o_lidx + TC_A64(sizeof(int32_t) * (size_t)B32),
               o_buf = o_xt + TC_A64(sizeof(int32_t) * n_xt),
               o_qb = o_buf + TC_A64(sizeof(TC_XT) * n_buf), o_xq = o_qb + TC_A64(qn),
               o_xu = o_xq + (use_xq ? TC_A64((sizeof(float) + (sizeof(TC_XT) == 8 ? 8 : 0)) * (size_t)(B32 * nf)) : 0),
               o_cm = o_xu + (use_xq ? TC_A64((size_t)(nf / 4 + 2)) : 0),
               total = o_cm + (use_cm ? TC_A64(sizeof(TC_AT) * (size_t)(B * no)) : 0);
#undef TC_A64
  _Alignas(64) uint8_t stk[TC_STACK_SCRATCH];
#if TC_QVEC == 2
  /* below TC_QVEC_MIN rows the AVX-512 few-row walk's contiguous row tables (quant_impl.c,
   * zrowsq): the quantiser writes them, not the block */
  _Alignas(64) uint8_t zrq[TC_QVEC_MIN * 128];
#endif
  uint8_t *const mem = total <= sizeof stk ? stk : (uint8_t *)aligned_alloc(64, total);
  if (!mem) return -2;
  int32_t *const lidx = (int32_t *)(mem + o_lidx);
  int32_t *const xt = n_xt ? (int32_t *)(mem + o_xt) : 0;
  TC_XT *const buf = n_buf ? (TC_XT *)(mem + o_buf) : 0;
  uint8_t *const qb = qn ? mem + o_qb : 0;
  /* rows past the end of a short block read bin 0. Below TC_QVEC_MIN rows no walk reads a
   * byte the quantiser did not write (the few-row walks read the block's rows' bytes of the
   * tables' columns only: qblock), so a single row skips clearing the block (~7 KB); but the
   * x86 interval sweep takes blocks from TC_FEW rows (below) and reads whole groups */
  if (qb && (B >= TC_QVEC_MIN || (TC_QVEC && !T->quant && B >= TC_FEW))) memset(qb, 0x80, qn);
  float *const xq = use_xq ? (float *)(mem + o_xq) : 0;
  double *const xd = use_xq && sizeof(TC_XT) == 8 ? (double *)(xq + B32 * nf) : 0;  /* B32 * nf * 4: a multiple of 32 */
  uint8_t *const xu = use_xq ? mem + o_xu : 0;
  if (xu) {
    memset(xu, 0, (size_t)(nf / 4 + 2));
    for (int32_t c = 0; c < T->q_ncols; ++c)
      if (!T->q_kind[c]) xu[T->q_feat[c] >> 2] = 1;
  }
  TC_AT *const cm = use_cm ? (TC_AT *)(mem + o_cm) : 0;
  for (int64_t r0 = 0; r0 < n; r0 += B) {
    const int64_t nb = n - r0 < B ? n - r0 : B;
    const TC_XT *xb;
    if (buf) {  /* round to nearest, like numpy's astype */
      if (x_bits == 32) { const float *s = (const float *)X + r0 * nf;
        for (int64_t k = 0; k < nb * nf; ++k) buf[k] = (TC_XT)s[k]; }
      else { const double *s = (const double *)X + r0 * nf;
        for (int64_t k = 0; k < nb * nf; ++k) buf[k] = (TC_XT)s[k]; }
      xb = buf;
    } else {
      xb = (const TC_XT *)X + r0 * nf;
    }
    TC_AT *ab = (TC_AT *)out + r0 * no;
    for (int64_t r = 0; r < nb; ++r)
      for (int64_t k = 0; k < no; ++k) ab[r * no + k] = base[k];
    if (T->naive) FN(naive)(T, xb, nb, ab);
    /* the byte walks: quantised heaps always; the interval walk from TC_QVEC_MIN rows (x86:
     * from TC_FEW, where the float walk goes a tree at a time: HGB 200 x 31 leaves, AVX2, 4 and
     * 7 rows 44.6 / 75.7 us a call against 8 rows' sweep 11.8; LightGBM 500 x 63 leaves 138 /
     * 236 against 58; AMD Zen 4, 2026-11-28), or below where the AVX-512 few-row interval walk
     * takes the block (zbvrows_w1, zbvlanes), or on AVX2 the lanes walk of numeric forests
     * (qbvlanes) */
    else if (qb && (T->quant || nb >= TC_QVEC_MIN || (TC_QVEC && nb >= TC_FEW)
                    || (TC_QVEC == 2 && (T->bv_lmask || T->bv_zl) && T->q_w1)
                    || (TC_QVEC == 1 && T->bv_zl && !T->bv_zcatd && T->q_w1))) {
      uint8_t *rq = 0;
#if TC_QVEC == 2
      if (nb < TC_QVEC_MIN && nb < TC_ZQ1_ROWS && T->quant && T->q_w1 && T->h_zq && T->q_ncols <= 128)
        rq = zrq;
#endif
#ifdef TC_TIMING
      const uint64_t tt1 = __rdtsc();
#endif
      if (T->strict) FN(quantise)(T, xb, nb, qb, gs, xq, xd, xu, 1, rq);
      else FN(quantise)(T, xb, nb, qb, gs, xq, xd, xu, 0, rq);
#ifdef TC_TIMING
      const uint64_t tt2 = __rdtsc();
      tc_tim[0] += tt1 - tt0, tc_tim[1] += tt2 - tt1;
#endif
      const int64_t cs = cm && nb >= TC_QVEC_MIN ? nb : 0;  /* class stride, or row-major */
      TC_AT *const acc = cs ? cm : ab;
      if (cs)
        for (int64_t k = 0; k < no; ++k)
          for (int64_t r = 0; r < nb; ++r) cm[k * cs + r] = base[k];
      if (T->quant) FN(qblock)(T, qb, gs, nb, acc, lidx, cs, rq);
#if TC_QVEC || TC_QARM
      else FN(bvblock)(T, qb, gs, nb, acc, lidx, cs);
#endif
#ifdef TC_TIMING
      const uint64_t tt3 = __rdtsc();
      tc_tim[2] += tt3 - tt2, tc_tim[3] += 1, tt0 = tt3;
#endif
      if (cs)
        for (int64_t r = 0; r < nb; ++r)
          for (int64_t k = 0; k < no; ++k) ab[r * no + k] = cm[k * cs + r];
    }
    else FN(block)(T, xb, nb, ab, lidx, xt);
    if (T->average) {
      const TC_AT d = (TC_AT)T->n_trees;
      for (int64_t k = 0; k < nb * no; ++k) ab[k] /= d;
    }
  }
  if (mem != stk) free(mem);
#ifdef TC_TIMING
  tc_tim[4] += __rdtsc() - tt0;
#endif
  return 0;
}

#undef TC_GROUP
#undef TC_CGROUP
#undef TC_FEW
#undef TC_FEWTREES
#undef TC_DG
#undef FN
#undef AFN
#undef TC_PASTE
#undef TC_PASTE2
