/*
 * arrays.c -- the model-independent kernel of the "arrays" backend (compiled once per machine).
 *
 * arrays_impl.c (a fragment included here, not a translation unit of its own; both files end in
 * .c so that the package data pattern for runtime/kernels ships them) is instantiated for every
 * (input dtype, accumulation dtype) pair and, on x86-64, for three instruction sets through
 * function target attributes (so one translation unit built with the portable default flags
 * holds all of them): the x86-64 baseline, AVX2 and
 * AVX-512 (F, BW, VL and VBMI: tc_arrays_isa_mask requires all four). On aarch64 the three are
 * the baseline, NEON (Advanced SIMD, part of every ARMv8-A: quant_neon.c) and SVE (a function
 * target, +sve: quant_sve.c). The path is chosen per call: TC_ISA_* forced by the caller, or the
 * best one the CPU reports (tc_arrays_isa_mask: __builtin_cpu_supports, getauxval on Linux
 * aarch64). No FMA target is enabled and the build uses -ffp-contract=off: the kernel only
 * compares and adds, and every add must round alone (aarch64 would fuse them into fmadd).
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/*
 * The table format. treecomp/backends/arrays_tables.py flattens a forest into these struct-of-arrays
 * tables (and mirrors tc_tables and the node records with ctypes / numpy). Every index in the
 * tables is validated in Python before a pointer reaches this code (a corrupt artifact raises ArtifactError, never crashes).
 *
 * Two layouts per tree:
 *   heap     (layout 0) a complete binary tree of depth D: node i has children 2i+1, 2i+2;
 *            2^D - 1 internal slots (h_ff, h_thr at tree_node[t]) and 2^D leaf slots. A walk
 *            is exactly D branch-free steps  i = 2*i + 1 + go_right.  Padding slots have
 *            threshold NaN and NaN-goes-left, so every row goes left (x > NaN and x >= NaN are
 *            false); leaves above depth D are duplicated into every slot below them.
 *   compact  (layout 1) explicit children, one packed record per internal node (tc_node_f32 /
 *            tc_node_f64, one cache line access per step); child >= 0 is a global node index,
 *            child < 0 is ~(leaf index within the tree). tree_node[t] is the root (or ~0 for a
 *            single-leaf tree). Children always have a larger index than their parent, so
 *            every walk terminates.
 * ff (feature word): bits 0..29 feature index, bit 30 categorical split, bit 31 NaN goes right.
 */
#define TC_ARRAYS_ABI 4
#define TC_FF_FEAT 0x3fffffffu
#define TC_FF_CAT 0x40000000u
#define TC_FF_NANR 0x80000000u

#define TC_ISA_SCALAR 0
#define TC_ISA_AVX2 1
#define TC_ISA_AVX512 2
#define TC_ISA_NEON 3     /* aarch64 (arrays/native.py NATIVE_ISAS: the index is the name's) */
#define TC_ISA_SVE 4
#define TC_ISA_LAST TC_ISA_SVE

typedef struct {
  int32_t ff;
  union { float t; int32_t cat; } u;  /* threshold, or the category set of a categorical node */
  int32_t child[2];                   /* [go left, go right] */
} tc_node_f32;

typedef struct {
  int32_t ff;
  int32_t cat;
  int32_t child[2];
  double t;
} tc_node_f64;

typedef struct {
  int64_t n_trees;
  int32_t n_features, n_outputs;
  int32_t x_bits, acc_bits;     /* 32 or 64: comparison precision, accumulation dtype */
  int32_t strict;               /* 1: go left iff x < t; 0: iff x <= t */
  int32_t average;              /* divide by n_trees at the end */
  int32_t naive;                /* walk row by row, tree by tree (the benchmark's baseline) */
  int32_t block_rows;           /* rows per tree-major block */
  int32_t cat_rule;             /* 0 nonneg, 1 trunc, 2 integral (ir.py CATEGORY_RULES) */
  const int32_t *tree_layout;   /* 0 heap, 1 compact */
  const int32_t *tree_depth;    /* heap depth D */
  const int64_t *tree_node;     /* heap: offset into h_ff/h_thr; compact: root (see above) */
  const int64_t *tree_leaf;     /* offset into leaf_values (in values) */
  const int32_t *tree_out;      /* first output column */
  const int32_t *tree_width;    /* leaf vector length */
  const int32_t *h_ff;
  const void *h_thr;            /* x dtype */
  const void *c_nodes;          /* tc_node_f32 / tc_node_f64 */
  const uint32_t *cat_words;
  const int64_t *cat_off;       /* per set: offset into cat_words */
  const int32_t *cat_nbits;     /* per set: 32 * n_words */
  const uint8_t *cat_other_left;
  const void *leaf_values;      /* accumulation dtype */
  const void *base;             /* accumulation dtype, n_outputs */
  /* quantised walk (quant_impl.c): every tree is a heap; rows become one byte per column */
  int32_t quant;                /* 1: use it */
  int32_t q_ncols;
  const int32_t *q_feat;        /* per column: feature */
  const uint8_t *q_nanc;        /* per column: NaN's bin (0, q_count, or 255: see q_cnan) */
  const int64_t *q_off;         /* per column: offset into q_thr */
  const int32_t *q_len;         /* per column: table length, a power of two > q_count */
  const int32_t *q_count;       /* per column: real thresholds (<= 255), then NaN padding */
  const int32_t *q_src;         /* per column: an earlier column with the same bins but NaN's
                                 * (copied, see quantise), or -1 */
  const void *q_thr;            /* x dtype, sorted ascending per column */
  const int32_t *h_qcol;        /* per heap slot: column */
  const int8_t *h_qthr;         /* per heap slot: threshold index ^ 0x80 (127: always left) */
  const uint8_t *q_leafb;       /* or NULL: leaves as byte planes, 4 or 8 (see tc_qleaf32/64) */
  const int64_t *q_leafb_off;   /* per tree: offset into q_leafb */
  int32_t q_w1;                 /* every tree's leaves are scalars (width 1) */
  /* interval walk (quant_impl.c): compact trees of <= 255 leaves; h_qcol / h_qthr then hold
   * the compact nodes' columns and thresholds, each tree's nodes sorted by bv_lo1 */
  int32_t bitvec;
  const int64_t *bv_nint;       /* per tree: internal nodes */
  const int8_t *bv_lo1;         /* per node: first leaf of its left subtree, minus 1 (+ bv_bias) */
  const int8_t *bv_hi;          /* per node: one past the last leaf of its left subtree (+ bv_bias) */
  const void *bv_leaf;          /* accumulation dtype: leaf vectors in left-to-right order */
  const uint8_t *q_kind;        /* per column: 0 threshold bins, 1 category codes */
  const int32_t *h_qcat;        /* per node: its row of q_cat, or -1 (a numeric node) */
  const uint8_t *q_cat;         /* 32 bytes per categorical node: the codes that go left */
  /* appended: the deep-tree path of compact trees (arrays_impl.c, deep_s). Float32 input only;
   * d_topd == NULL turns it off. Derived at load time (arrays_derived.py, _deep_tables), never stored. */
  const void *d_recs;           /* tc_drec: the internal records (c_nodes order), then one
                                 * self-looping record per leaf */
  const int32_t *d_topd;        /* per tree: depth K of its top heap, 0: the tree takes compact_s */
  const int64_t *d_topoff;      /* per tree: offset into d_top_ff / d_top_tk (2^K - 1 slots) */
  const int64_t *d_exitoff;     /* per tree: offset into d_exit (2^K entries) */
  const int64_t *d_leaf0;       /* per tree: leaf index = record index - d_leaf0[t] */
  const int32_t *d_top_ff;      /* top heaps (complete levels only), padded like h_ff */
  const int32_t *d_top_tk;      /* threshold keys (fkey); padding INT32_MAX: every row goes left */
  const int32_t *d_exit;        /* byte offset into d_recs of the node below each top exit */
  int64_t d_nint;               /* first leaf record, a power of two above the internal ones
                                 * (the leaf records end below 2 * d_nint) */
  const uint8_t *d_nanr;        /* per record: NaN goes right (leaf records: 0) */
  /* appended: float64 thresholds' bin tables rounded to float32 (NaN padding kept), or NULL:
   * the quantiser's first guess (quant_impl.c). Derived at load time, never stored. */
  const float *q_thr32;
  /* appended: the bin tables' level tables, 64 floats a column (quant_impl.c, tc_qlanes8;
   * arrays_derived.py, quant_levels): of q_thr, or of q_thr32 for float64 thresholds; or NULL.
   * Derived at load time, never stored. */
  const float *q_lvl;
  /* appended: per heap slot its column's index as a byte (padded by 32), or NULL: the deep
   * heap levels' column mux (quant_impl.c, tc_qlevelc); set when <= 64 columns. Derived. */
  const uint8_t *h_qcix;
  /* appended: the column mux's width (16, 32, 64: the first q_cmux columns hold every column
   * index of h_qcix), or 0; q_cnan: some columns there send NaN (bin 255) right at some nodes
   * and left at others (h_qcix bit 7: left). Derived (arrays_derived.py, merge_nan_columns). */
  int32_t q_cmux;
  int32_t q_cnan;
  /* appended: per tree 1 where the heap's every level reads one column and one threshold byte
   * (symmetric trees: the AVX-512 walk zobl), or NULL. Derived (arrays_derived.oblivious_heaps). */
  const uint8_t *h_qobl;
  /* appended: per heap slot an index (0..127) into a row's 128-byte table of the AVX-512
   * few-row walk (quant_impl.c, zrows_w1), padded by 64, or NULL. With the column mux
   * (q_cmux): bits 0-5 the mux column, bit 6 set at a merged column's NaN-left slot (the
   * table's upper half: the row's mux bytes with NaN's code 255 made 0, left of every node);
   * else (q_ncols <= 128) the column; for the interval walk's nodes (zbvrows_w1) the column.
   * Derived (arrays.py, pack_arrays). */
  const uint8_t *h_qc7;
  /* appended: per interval-walk node its left subtree's leaves [lo, hi) as bits (trees of <= 64
   * leaves, <= 128 columns, categorical nodes only with bv_catd; padded by 8), or NULL: the AVX-512 few-row
   * interval walk (quant_impl.c, zbvrows_w1). Derived (arrays_derived.py, interval_masks). */
  const uint64_t *bv_lmask;
  /* appended: 1 where some tree is compact, no compact node is categorical and every feature
   * index is below 2^16: the few-row walk's plain steps (arrays_impl.c, plain_trees) then apply
   * to rows without NaN. Derived (arrays.py, pack_arrays). */
  int32_t c_plain;
  /* appended: per tree 128 bytes, 64-byte aligned: its heap slots' h_qc7 bytes, then their
   * h_qthr bytes, each padded to 64 (trees of depth <= 6), or NULL: the AVX-512 few-row walk's
   * aligned loads (quant_impl.c, zslots; zrows_w1 runs where it is set). Derived
   * (arrays_derived.py, zrow_slots). */
  const uint8_t *h_zq;
  /* appended: the same for trees of depth 7 and 8, 512 bytes a tree: four windows of 64 slots
   * (from slots 0 (63 of them), 63, 127, 191), each its h_qc7 then its h_qthr bytes, or NULL
   * (no such tree). Derived (arrays_derived.py, zrow_slots). */
  const uint8_t *h_zq8;
  /* appended: where every tree is a heap of depth <= 6 (single-value leaves), the one-row walk
   * with 64 trees in a vector's lanes (quant_impl.c, zlanes): per group of 64 trees, 63 slots of
   * 128 bytes (the trees' h_qc7 bytes, then their h_qthr bytes; 127 past a tree's slots), or
   * NULL. Derived (arrays_derived.py, zrow_lanes). */
  const uint8_t *h_zt;
  /* appended: the AVX-512 few-row interval walk's categorical decisions (with bv_lmask; NULL
   * where no node is categorical or where there are too many): per category-code column and
   * code a row of bv_catw bytes (a multiple of 64, <= TC_CATW_MAX) whose bit k is set where
   * categorical node k (h_qcat) reads that column and sends the code right, and per tree the
   * mask of its categorical nodes (bit i: node tree_node + i). Derived (arrays_derived.py,
   * category_rows). */
  const uint8_t *bv_catd;
  const uint64_t *bv_catk;
  int64_t bv_catw;
  /* appended: the AVX-512 one-row interval walk with 64 trees in a vector's lanes (quant_impl.c,
   * zbvlanes; forests of >= 32 trees of <= 128 leaves, <= 128 columns (categorical nodes: with bv_catd),
   * scalar leaves), or NULL: per group of 64 trees as many 256-byte node slots as its largest
   * tree has nodes (slot k: the 64 trees' k-th nodes' h_qc7, h_qthr, bv_lo1, bv_hi bytes; padded
   * with slots that never fire), 64-byte aligned; bv_zlo: per group its first slot (groups + 1).
   * Derived (arrays_derived.py, interval_lanes). */
  const uint8_t *bv_zl;
  const int64_t *bv_zlo;
  /* appended: with bv_zl and bv_catd, the lanes walk's categorical decisions (their thresholds
   * 127 in bv_zl): bv_catd's rows with the categorical nodes numbered in (slot, lane) order
   * (bv_catw bytes a row), per slot the mask of its categorical lanes and its first node's
   * number; or NULL (no categorical node). Derived (arrays_derived.py, interval_lanes). */
  const uint8_t *bv_zcatd;
  const uint64_t *bv_zcatk;
  const int64_t *bv_zk0;
  /* appended: the interval walk's bias (bv_lo1, bv_hi and the positions): 0 where every tree
   * has <= 128 leaves, -127 where one has 129-255 (quant_impl.c, bvtree); the NEON unit's
   * sweep takes unbiased tables only (else the float walk) */
  int32_t bv_bias;
  /* appended: with h_zt, the deepest tree's depth (0-8): the lanes walk's levels (quant_impl.c,
   * zlanes; h_zt's groups hold 127 slots where it is 8, else 63); 0 without h_zt. Derived
   * (arrays.py, pack_arrays). */
  int32_t h_ztd;
  /* appended: with h_zt and h_ztd D >= 6, the lanes walk's last level and leaves (quant_impl.c,
   * zlanes): per tree 2^(D - 1) records of 16 bytes (float32 leaves; 32 for float64): slot
   * 2^(D - 1) - 1 + k's row-table index and biased threshold bytes, then leaf values (2k) and
   * (2k + 1) >> (D - depth) at 8; or NULL (then a forest of depth >= 6 does not take the lanes
   * walks). Derived (arrays_derived.py, zrow_records). */
  const uint8_t *h_zr;
} tc_tables;

/* a deep-path record: 16 bytes, children as byte offsets into d_recs (no scaling in the walk);
 * a leaf record points to itself on both sides, so a finished walk stays put. ff is the byte
 * offset of the feature in a feature-major group of rows: feature * 4 * TC_DG (arrays_impl.c) */
typedef struct {
  int32_t ff;
  int32_t tk;                   /* the threshold's order key (arrays_impl.c, fkey) */
  int32_t child[2];
} tc_drec;


#define TC_EXPORT __attribute__((visibility("default")))

#if defined(__x86_64__) || defined(__i386__)
#define TC_X86 1
#include <immintrin.h>
#else
#define TC_X86 0
#endif
#if defined(__aarch64__)
#define TC_ARM 1
#include <arm_neon.h>
#else
#define TC_ARM 0
#endif
/* the SVE unit: Linux (the run-time check reads getauxval) and a compiler whose function target
 * "+sve" takes arm_sve.h's intrinsics (GCC 10+: checked with aarch64-linux-gnu-gcc 12) */
#if TC_ARM && defined(__linux__) && defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 10
#define TC_SVE_OK 1
#else
#define TC_SVE_OK 0
#endif

#define TC_NTHR32(p) ((p)->u.t)
#define TC_NCAT32(p) ((p)->u.cat)
#define TC_NTHR64(p) ((p)->t)
#define TC_NCAT64(p) ((p)->cat)

/* TC_PART selects what a translation unit holds; arrays_native.py compiles the three parts in parallel
 * (one object each) and links them: 0 = baseline instantiations + the exported entry points,
 * 1 = AVX2 (aarch64: NEON), 2 = AVX-512 (F, BW, VL, VBMI; aarch64: SVE). Without TC_PART (a
 * plain `cc -shared arrays.c`) one unit holds the baseline and AVX2 (NEON) paths (see
 * TC_WITH512, TC_WITHSVE).
 * The float heap walk is vectorised for float input only; the quantised walk (quant_impl.c)
 * works on bytes, so its AVX2 kernel serves float64 input too. */
#ifndef TC_PART
#define TC_PART -1
#endif
/* The AVX-512 unit's byte walks use their own block layout (quant_impl.c, TC_QR: 64-row
 * groups), so its byte kernels cannot share a unit with the AVX2 ones (they are defined once
 * per unit): a single-unit build holds the baseline and AVX2 paths only. */
#define TC_WITH512 (TC_X86 && TC_PART != -1)
#define TC_WITHSVE (TC_SVE_OK && TC_PART != -1)
#define TC_RUN_PROTO(sfx) \
  int32_t run_##sfx(const tc_tables *T, const void *X, int32_t x_bits, int64_t n, void *out);

/* one instruction set's four (input dtype, accumulation dtype) instantiations: see
 * kernels/arrays_isa.c (TC_ATTR, TC_ISA: the name suffix, TC_VEC_F32: the float heap walk's
 * vector width, TC_QVEC: the byte walks' AVX2 kernels, 2: and the AVX-512 ones) */
#if TC_PART == -1 || TC_PART == 0
#define TC_ATTR
#define TC_ISA scalar
#define TC_VEC_F32 0
#define TC_QVEC 0
#include "kernels/arrays_isa.c"
#endif

#if TC_X86 && (TC_PART == -1 || TC_PART == 1)
#define TC_ATTR __attribute__((target("avx2")))
#define TC_ISA avx2
#define TC_VEC_F32 8
#define TC_QVEC 1
#include "kernels/arrays_isa.c"
#endif

#if TC_WITH512 && TC_PART == 2
#define TC_ATTR __attribute__((target("avx512f,avx512bw,avx512vl,avx512vbmi,avx2,popcnt,bmi2")))
#define TC_ISA avx512
#define TC_VEC_F32 16
#define TC_QVEC 2
#include "kernels/arrays_isa.c"
#endif

/* aarch64: TC_QARM 1 the NEON byte kernels (quant_neon.c), 2 also the SVE ones (quant_sve.c);
 * the float walks keep the portable code there (no gathers in NEON) */
#if TC_ARM && (TC_PART == -1 || TC_PART == 1)
#define TC_ATTR
#define TC_ISA neon
#define TC_VEC_F32 0
#define TC_QVEC 0
#define TC_QARM 1
#include "kernels/arrays_isa.c"
#endif

#if TC_WITHSVE && TC_PART == 2
#include <arm_sve.h>
#define TC_ATTR __attribute__((target("+sve")))
#define TC_ISA sve
#define TC_VEC_F32 0
#define TC_QVEC 0
#define TC_QARM 2
#include "kernels/arrays_isa.c"
/* SVE's vector length in bytes on this thread (svcntb: 16 .. 256; tc_arrays_auto_mask) */
__attribute__((target("+sve"))) int32_t tc_sve_bytes(void) { return (int32_t)svcntb(); }
#endif

#if TC_PART == -1 || TC_PART == 0
#if TC_X86
TC_RUN_PROTO(f32_f32_avx2)
TC_RUN_PROTO(f32_f64_avx2)
TC_RUN_PROTO(f64_f32_avx2)
TC_RUN_PROTO(f64_f64_avx2)
#endif
#if TC_WITH512
TC_RUN_PROTO(f32_f32_avx512)
TC_RUN_PROTO(f32_f64_avx512)
TC_RUN_PROTO(f64_f32_avx512)
TC_RUN_PROTO(f64_f64_avx512)
#endif
#if TC_ARM
TC_RUN_PROTO(f32_f32_neon)
TC_RUN_PROTO(f32_f64_neon)
TC_RUN_PROTO(f64_f32_neon)
TC_RUN_PROTO(f64_f64_neon)
#endif
#if TC_WITHSVE
int32_t tc_sve_bytes(void);
TC_RUN_PROTO(f32_f32_sve)
TC_RUN_PROTO(f32_f64_sve)
TC_RUN_PROTO(f64_f32_sve)
TC_RUN_PROTO(f64_f64_sve)
#endif

typedef int32_t (*tc_run_fn)(const tc_tables *, const void *, int32_t, int64_t, void *);

/* [isa][x is f64][acc is f64] */
static const tc_run_fn tc_table[TC_ISA_LAST + 1][2][2] = {
  {{run_f32_f32_scalar, run_f32_f64_scalar}, {run_f64_f32_scalar, run_f64_f64_scalar}},
#if TC_X86
  {{run_f32_f32_avx2, run_f32_f64_avx2}, {run_f64_f32_avx2, run_f64_f64_avx2}},
#else
  {{0, 0}, {0, 0}},
#endif
#if TC_WITH512
  {{run_f32_f32_avx512, run_f32_f64_avx512}, {run_f64_f32_avx512, run_f64_f64_avx512}},
#else
  {{0, 0}, {0, 0}},
#endif
#if TC_ARM
  {{run_f32_f32_neon, run_f32_f64_neon}, {run_f64_f32_neon, run_f64_f64_neon}},
#else
  {{0, 0}, {0, 0}},
#endif
#if TC_WITHSVE
  {{run_f32_f32_sve, run_f32_f64_sve}, {run_f64_f32_sve, run_f64_f64_sve}},
#else
  {{0, 0}, {0, 0}},
#endif
};

TC_EXPORT int32_t tc_arrays_abi(void) { return TC_ARRAYS_ABI; }

#if TC_ARM
/* NEON and SVE as Linux reports them (AT_HWCAP: HWCAP_ASIMD, HWCAP_SVE; Advanced SIMD is part
 * of every ARMv8-A profile Linux runs on, checked all the same); elsewhere (macOS: every Apple
 * core has NEON and none SVE) NEON only. The SVE path also needs the build's SVE unit. */
#if defined(__linux__)
#include <sys/auxv.h>
#endif
static int32_t tc_arm_isa_bits(void) {
#if defined(__linux__)
  const unsigned long hw = getauxval(16 /* AT_HWCAP */);
  int32_t m = 0;
  if (hw & (1ul << 1)) m |= 1 << TC_ISA_NEON;                     /* HWCAP_ASIMD */
  if (TC_WITHSVE && (hw & (1ul << 1)) && (hw & (1ul << 22))) m |= 1 << TC_ISA_SVE;  /* HWCAP_SVE */
  return m;
#else
  return 1 << TC_ISA_NEON;
#endif
}
#endif

/* What the package build (setup.py) embeds: the sha256 of the kernel sources
 * (arrays_native.kernel_source_hash()) and the compiler flags, so that treecomp loads its
 * prebuilt kernel only when it was built from these sources with these flags. "" in a kernel
 * built at run time (its cache key already holds both). */
#ifndef TC_SOURCE_HASH
#define TC_SOURCE_HASH ""
#endif
#ifndef TC_BUILD_CFLAGS
#define TC_BUILD_CFLAGS ""
#endif
TC_EXPORT const char *tc_arrays_source_hash(void) { return TC_SOURCE_HASH; }
TC_EXPORT const char *tc_arrays_build_cflags(void) { return TC_BUILD_CFLAGS; }

TC_EXPORT int32_t tc_arrays_sizeof_tables(void) { return (int32_t)sizeof(tc_tables); }
TC_EXPORT int32_t tc_arrays_sizeof_node(int32_t bits) {
  return bits == 32 ? (int32_t)sizeof(tc_node_f32) : (int32_t)sizeof(tc_node_f64);
}

/* bit i set: TC_ISA i can run on this CPU */
TC_EXPORT int32_t tc_arrays_isa_mask(void) {
  int32_t m = 1 << TC_ISA_SCALAR;
#if TC_X86
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx2")) m |= 1 << TC_ISA_AVX2;
  if (TC_WITH512 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw")
      && __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vbmi")
      && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("popcnt")
      && __builtin_cpu_supports("bmi2"))
    m |= 1 << TC_ISA_AVX512;
#endif
#if TC_ARM
  m |= tc_arm_isa_bits();
#endif
  return m;
}

/* bit i set: isa="auto" (and an arrays .so's own choice) may pick TC_ISA i on this CPU: the
 * isa mask less the paths that gain nothing here. aarch64's sve only where SVE's vectors hold
 * 32 bytes or more (Neoverse V1 / Graviton 3 at 256 bits, A64FX at 512): there its heap walk
 * (quant_sve.c) runs, which bench/arm_cost.py counts cheaper than neon's; at 128 bits (Neoverse
 * N2, V2) the SVE unit runs the NEON kernels compiled for SVE, and auto takes neon. (The vector
 * length is read on the calling thread; the kernel checks it again on every call.) */
TC_EXPORT int32_t tc_arrays_auto_mask(void) {
  int32_t m = tc_arrays_isa_mask();
#if TC_WITHSVE
  if (((m >> TC_ISA_SVE) & 1) && tc_sve_bytes() < 32) m &= ~(1 << TC_ISA_SVE);
#endif
  return m;
}

/*
 * The libraries' inverse links, in place on n rows of `no` margins, computed as the library
 * computes them and with this process's libm (the one the library itself calls: XGBoost's expf,
 * scipy.special.expit's and LightGBM's exp), so the outputs are the library's bit for bit.
 * kind (treecomp/outputs.py NATIVE_TRANSFORMS; 0: leave the margins):
 *   1 float sigmoid, XGBoost's src/common/math.h:  1.0f / ((expf(min(-x, 88.7f)) + 1.0f) + 1e-16f)
 *   2 float exp (XGBoost count:poisson, reg:gamma, ...):  expf(x)
 *   3 float softmax, XGBoost's:  fmaxf row max, e = expf(x - max), the e summed in DOUBLE in class
 *     order, each e divided by (float)sum
 *   4 double sigmoid (expit):  1 / (1 + exp(-x))
 *   5 double sigmoid of 2x (sklearn's exponential loss):  1 / (1 + exp(-(2 * x)))
 *   6 double exp (LightGBM poisson, gamma, tweedie):  exp(x)
 *   7 double softmax, LightGBM's Common::Softmax:  row max, e = exp(x - max) summed left to
 *     right from 0, each e divided by the sum
 *   8 float exp taken in double (XGBoost survival:aft):  (float)exp((double)x)
 * Built with -ffp-contract=off and no fast-math: every operation rounds alone, in this order.
 */
static void tc_transform(int32_t kind, void *out, int64_t n, int32_t no) {
  const int64_t m = n * no;
  float *f = (float *)out;
  double *d = (double *)out;
  switch (kind) {
  case 1:
    for (int64_t i = 0; i < m; ++i) {
      float v = -f[i];
      v = (88.7f < v) ? 88.7f : v;  /* std::min(-x, 88.7f): NaN stays NaN */
      f[i] = 1.0f / ((expf(v) + 1.0f) + 1e-16f);
    }
    break;
  case 2:
    for (int64_t i = 0; i < m; ++i) f[i] = expf(f[i]);
    break;
  case 3:
    for (int64_t r = 0; r < n; ++r) {
      float *a = f + r * no;
      float mx = a[0];
      for (int32_t k = 1; k < no; ++k) mx = fmaxf(a[k], mx);
      double s = 0;
      for (int32_t k = 0; k < no; ++k) { a[k] = expf(a[k] - mx); s += a[k]; }
      const float fs = (float)s;
      for (int32_t k = 0; k < no; ++k) a[k] /= fs;
    }
    break;
  case 4:
    for (int64_t i = 0; i < m; ++i) d[i] = 1.0 / (1.0 + exp(-d[i]));
    break;
  case 5:
    for (int64_t i = 0; i < m; ++i) d[i] = 1.0 / (1.0 + exp(-(d[i] * 2.0)));
    break;
  case 6:
    for (int64_t i = 0; i < m; ++i) d[i] = exp(d[i]);
    break;
  case 7:
    for (int64_t r = 0; r < n; ++r) {
      double *a = d + r * no;
      double mx = a[0];
      for (int32_t k = 1; k < no; ++k) mx = (a[k] < mx) ? mx : a[k];  /* std::max(a[k], mx) */
      double s = 0;
      for (int32_t k = 0; k < no; ++k) { a[k] = exp(a[k] - mx); s += a[k]; }
      for (int32_t k = 0; k < no; ++k) a[k] /= s;
    }
    break;
  case 8:
    for (int64_t i = 0; i < m; ++i) f[i] = (float)exp((double)f[i]);
    break;
  default:
    break;
  }
}

/* A binary classifier's probabilities as the libraries return them: the n outputs p in `out`
 * become n rows (1 - p, p) in place (out holds 2n values), 1 - p rounded in p's dtype. */
#define TC_PAIRS 0x100
static void tc_pairs(void *out, int64_t n, int32_t acc_bits) {
  if (acc_bits == 32) {
    float *a = (float *)out;
    for (int64_t i = n - 1; i >= 0; --i) { const float v = a[i]; a[2 * i + 1] = v; a[2 * i] = 1.0f - v; }
  } else {
    double *a = (double *)out;
    for (int64_t i = n - 1; i >= 0; --i) { const double v = a[i]; a[2 * i + 1] = v; a[2 * i] = 1.0 - v; }
  }
}

/* returns 0, -1 for bad arguments, -2 when out of memory. `transform`: tc_transform's kind
 * applied to the margins afterwards (0: raw margins), plus TC_PAIRS: then `out` receives
 * tc_pairs' 2 values per row (a single-output model only) */
TC_EXPORT int32_t tc_arrays_predict(const tc_tables *T, const void *X, int32_t x_bits, int64_t n_rows,
                                    void *out, int32_t isa, int32_t transform) {
  if (!T || (x_bits != 32 && x_bits != 64) || n_rows < 0 || (n_rows > 0 && (!X || !out)))
    return -1;
  /* the CPU's mask, asked once per process (a benign race: every thread stores the same value) */
  static int32_t isa_mask = 0;
  int32_t m = __atomic_load_n(&isa_mask, __ATOMIC_RELAXED);
  if (!m) __atomic_store_n(&isa_mask, m = tc_arrays_isa_mask(), __ATOMIC_RELAXED);
  if (isa < 0 || isa > TC_ISA_LAST || !((m >> isa) & 1)) return -1;
  if ((T->x_bits != 32 && T->x_bits != 64) || (T->acc_bits != 32 && T->acc_bits != 64)) return -1;
  const tc_run_fn fn = tc_table[isa][T->x_bits == 64][T->acc_bits == 64];
  if (!fn) return -1;
  const int32_t kind = transform & 0xff, pairs = transform & TC_PAIRS;
  /* kinds 1-3 and 8 transform float margins, 4-7 double ones */
  const int32_t kind32 = kind <= 3 || kind == 8;
  if ((transform & ~(0xff | TC_PAIRS)) || kind > 8 || (kind != 0 && kind32 != (T->acc_bits == 32))
      || (pairs && T->n_outputs != 1))
    return -1;
  const int32_t rc = fn(T, X, x_bits, n_rows, out);
  if (rc != 0) return rc;
  if (kind) tc_transform(kind, out, n_rows, T->n_outputs);
  if (pairs) tc_pairs(out, n_rows, T->acc_bits);
  return 0;
}
#endif /* TC_PART 0 */

#include "kernels/shap.c"  /* SHAP contributions (treecomp/shap.py): every part */
#if TC_PART == -1 || TC_PART == 0
#include "kernels/linear.c"  /* linear leaves (treecomp/linear.py) */
#endif
