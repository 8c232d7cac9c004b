/*
 * arrays.h -- the table format the model-independent "arrays" kernel walks.
 *
 * treecomp/backends/arrays.py flattens a forest into these struct-of-arrays tables (and mirrors
 * tc_tables with ctypes); runtime/kernels/arrays.c evaluates them. The kernel is compiled once
 * per machine, never per model. Every index in the tables is validated in Python before a
 * pointer reaches this code (a corrupt artifact raises ArtifactError, never crashes).
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
#ifndef TC_ARRAYS_H
#define TC_ARRAYS_H
#include <stdint.h>

#define TC_ARRAYS_ABI 1
#define TC_FF_FEAT 0x3fffffffu
#define TC_FF_CAT 0x40000000u
#define TC_FF_NANR 0x80000000u

#define TC_ISA_SCALAR 0
#define TC_ISA_AVX2 1
#define TC_ISA_AVX512 2

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
} tc_tables;

#endif
