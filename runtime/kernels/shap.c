/* SHAP contributions: exact path-dependent TreeSHAP (Lundberg et al. 2020, Algorithm 2) over
 * per-leaf path tables prepared by treecomp/shap.py. Included by arrays.c in every part: the
 * model struct and the one-row helpers in each, the exported functions and the one-row path in
 * part 0, the several-row kernels (kernels/shap_rows.c) in the AVX2 and AVX-512 parts.
 *
 * For one leaf with d distinct features on its root path, feature k has a zero fraction z_k
 * (the product of cover(child) / cover(parent) over the path's nodes on k) and a one fraction
 * o_k (1 iff the row takes the path's way at every one of those nodes). The leaf's Shapley
 * values depend on the row only through which of its path's nodes the row does not follow, so
 * for trees whose paths have up to treecomp.shap.TABLE_MAX_D nodes every such pattern's
 * coefficients are computed once per model (tc_shap_tables) and a row costs d multiply-adds
 * per leaf (the idea of Fast TreeSHAP v2, Yang 2021); the table is indexed by the depths at
 * which the row turns away, computed for all leaves in one pass over the tree's nodes. The
 * other trees run Linear TreeSHAP (tc_shap_linear). Everything is float64.
 *
 * tc_shap_rows runs a row at a time (TC_ISA_SCALAR, portable) or, with AVX2 / AVX-512, Linear
 * TreeSHAP for 4 / 8 rows at once, a row per vector lane (shap_rows.c): the same operations in
 * the same order per lane, so the same bits, 4-5x faster (the bench's 500-tree XGBoost model,
 * 512 rows, one thread, AMD EPYC Zen 4, 2026-11-24: 0.54-0.59 ms/row one row at a time, AVX2
 * 0.12-0.14, AVX-512 0.10-0.11). Tried there and dropped: 8 rows per group with AVX2 and 16
 * with AVX-512 (GCC splits the wider vectors: 2x slower); keeping (o - z) / g per node for the
 * up pass (one multiply fewer per term, one more array: no gain); the loops compiled for 9-12
 * quadrature points as well (LightGBM's deepest trees: no measurable gain). Kept: the point
 * loops unrolled (5-10%), each block's rows transposed to a vector per feature, the up pass's
 * sums written over the products. With the several-row kernels, Linear TreeSHAP beats the
 * tables from depth 3 on (treecomp.shap.TABLES: tables on the one-row path only).
 */

typedef struct {
  int64_t n_trees, n_features, n_outputs, strict, cat_rule, max_nodes, max_nq;
  const int64_t *node0, *leaf0;            /* per tree: first node / first leaf (T+1 each) */
  const int32_t *tree_out, *tree_width;    /* per tree */
  const int32_t *feat, *left, *right, *cat; /* per node (children local to the tree) */
  const double *thr;
  const uint8_t *dleft;
  const uint32_t *cat_words;               /* category sets: words, offsets, widths */
  const int64_t *cat_off;
  const int32_t *cat_nw;
  const uint8_t *cat_other_left;
  const int32_t *leaf_d, *leaf_plen;       /* per leaf: distinct features, path length */
  const int64_t *leaf_poff, *leaf_uoff, *leaf_toff, *leaf_voff;
  const int32_t *p_node;                   /* path entries: local node, wanted way, slot */
  const uint8_t *p_left;
  const int32_t *p_slot;
  const int32_t *u_feat;                   /* per leaf slot: feature, zero fraction */
  const double *u_z;
  const double *values;                    /* leaf values (width per tree) */
  const double *tables;                    /* per table leaf: 2^plen x d coefficients */
  const int32_t *depth, *leaf_node, *p_pos; /* node depth, leaf's node, path entry's depth */
  const int32_t *tree_nq;                  /* per tree: quadrature points, 0 = table tree */
  const int64_t *tree_qoff;                /* per tree: offset of its points in quad_u/w */
  const double *quad_u, *quad_w;           /* Gauss-Legendre points and weights on [0, 1] */
  int32_t *n_prev;                         /* per node (filled by tc_shap_tables): the node */
  double *n_z;                             /* below the previous split on the same feature on
                                            * its path (-1: none); the feature's zero fraction
                                            * (in: cover(node) / cover(parent)) */
  const int64_t *tree_ioff;                /* per tree: its n_inv offset, -1: none */
  double *n_inv;                           /* per node of those trees (by tc_shap_tables):
                                            * 1 / g at each point, for o = 0 then o = 1 */
  double scale;                            /* 1 / n_trees for averaged forests, else 1 */
} tc_shap_model;

static inline int tc_shap_go_left(const tc_shap_model *M, int64_t g, double x) {
  if (x != x) return M->dleft[g];
  const int32_t c = M->cat[g];
  if (c < 0) return M->strict ? x < M->thr[g] : x <= M->thr[g];
  const double hi = 32.0 * M->cat_nw[c];
  int valid;
  if (M->cat_rule == 1) valid = x > -1.0 && x < hi;                 /* trunc */
  else if (M->cat_rule == 2) valid = x >= 0.0 && x < hi && x == (double)(int64_t)x; /* integral */
  else valid = x >= 0.0 && x < hi;                                  /* nonneg */
  if (!valid) return M->cat_other_left[c];
  const int64_t b = (int64_t)x;
  return (int)(M->cat_words[M->cat_off[c] + (b >> 5)] >> (b & 31) & 1u);
}

/* one table tree (tree_nq == 0) for one row: the depths on each node's path where the row goes
 * the other way (children > parent), then d multiply-adds per leaf into phi_t[(output x
 * (nf + 1) + feature) x stride]; pat: max_nodes scratch */
static inline void tc_shap_table_row(const tc_shap_model *M, int64_t t, const double *x,
                                     uint64_t *pat, double *phi_t, int64_t stride) {
  const int64_t n0 = M->node0[t], nn = M->node0[t + 1] - n0, nf = M->n_features;
  pat[0] = 0;
  for (int64_t j = 0; j < nn; j++) {
    const int64_t g = n0 + j;
    if (M->left[g] < 0) continue;
    const int gl = tc_shap_go_left(M, g, x[M->feat[g]]);
    const uint64_t bit = M->depth[g] < 64 ? (uint64_t)1 << M->depth[g] : 0;
    pat[M->left[g]] = pat[j] | (gl ? 0 : bit);
    pat[M->right[g]] = pat[j] | (gl ? bit : 0);
  }
  const int w = M->tree_width[t];
  for (int64_t l = M->leaf0[t]; l < M->leaf0[t + 1]; l++) {
    const int d = M->leaf_d[l];
    if (d == 0) continue;
    const int64_t u0 = M->leaf_uoff[l];
    const double *v = M->values + M->leaf_voff[l];
    const double *c = M->tables + M->leaf_toff[l] + (int64_t)pat[M->leaf_node[l]] * d;
    for (int q = 0; q < w; q++) {
      const double vq = v[q] * M->scale;
      double *phi = phi_t + q * (nf + 1) * stride;
      for (int k = 0; k < d; k++) phi[M->u_feat[u0 + k] * stride] += c[k] * vq;
    }
  }
}

#if TC_PART == -1 || TC_PART == 0
TC_EXPORT int32_t tc_shap_sizeof_model(void) { return (int32_t)sizeof(tc_shap_model); }

/* coef[k] such that the leaf adds coef[k] * value to feature k's contribution; sc: 4 d + 4.
 *
 * With O the features the row follows (q of them), Zc the product of the other features' z
 * and w(k) = k! (d - k - 1)! / d! (the Shapley weights), Algorithm 2's sums are
 *   k not in O:  -Zc * sum_{k <= q} w(k) e_{q-k}(z_O)
 *   k in O:      (1 - z_k) * Zc * sum_{k < q} w(k) e_{q-1-k}(z_O without z_k)
 * (e_m: elementary symmetric polynomials; every feature not followed has the same value):
 * O(d + q^2) per leaf instead of the recurrences' O(d^2). */
static void tc_shap_weights(int d, double *w) {
  w[0] = 1.0 / d;
  for (int k = 0; k + 1 < d; k++) w[k + 1] = w[k] * (k + 1) / (double)(d - k - 1);
}

static void tc_shap_leaf(int d, const double *z, const uint8_t *o, double *sc, double *coef) {
  double *e = sc, *ei = sc + d + 1, *w = sc + 2 * d + 2, *zo = sc + 3 * d + 3;
  double zc = 1.0;
  int q = 0;
  for (int k = 0; k < d; k++) {
    if (o[k]) zo[q++] = z[k];
    else zc *= z[k];
  }
  if (zc == 0.0) {  /* a feature not followed has zero cover: the leaf is never reached */
    for (int k = 0; k < d; k++) coef[k] = 0.0;
    return;
  }
  e[0] = 1.0;
  for (int t = 0; t < q; t++) {
    e[t + 1] = 0.0;
    for (int m = t + 1; m >= 1; m--) e[m] += zo[t] * e[m - 1];
  }
  tc_shap_weights(d, w);
  double off = 0.0;
  if (q < d) {
    for (int k = 0; k <= q; k++) off += w[k] * e[q - k];
    off *= -zc;
  }
  for (int k = 0; k < d; k++) {
    if (!o[k]) {
      coef[k] = off;
      continue;
    }
    const double zk = z[k];
    double a = 0.0;
    ei[0] = 1.0;
    for (int m = 1; m < q; m++) ei[m] = e[m] - zk * ei[m - 1];
    for (int j = 0; j < q; j++) a += w[j] * ei[q - 1 - j];
    coef[k] = (1.0 - zk) * zc * a;
  }
}

/* per node of every tree: n_prev and n_z (the zero fraction of the feature split on by the
 * node's parent, over its path down to the node), by a depth-first walk that keeps each
 * feature's latest node on the current path: O(nodes + features) per tree, no recursion */
static int32_t tc_shap_prev(const tc_shap_model *M) {
  const int64_t nn_max = M->max_nodes;
  int32_t *last = malloc(sizeof(int32_t) * (size_t)(M->n_features + 1));
  int32_t *parent = malloc(sizeof(int32_t) * (size_t)(nn_max + 1));
  int64_t *stack = malloc(sizeof(int64_t) * (size_t)(2 * nn_max + 2));
  if (!last || !parent || !stack) { free(last); free(parent); free(stack); return -2; }
  for (int64_t f = 0; f < M->n_features; f++) last[f] = -1;
  for (int64_t t = 0; t < M->n_trees; t++) {
    const int64_t n0 = M->node0[t], nn = M->node0[t + 1] - n0;
    const int32_t *left = M->left + n0, *right = M->right + n0, *feat = M->feat + n0;
    int32_t *prev = M->n_prev + n0;
    double *z = M->n_z + n0;
    for (int64_t j = 0; j < nn; j++)
      if (left[j] >= 0) parent[left[j]] = parent[right[j]] = (int32_t)j;
    prev[0] = -1;
    z[0] = 1.0;
    int64_t sp = 0;
    if (nn > 1) { stack[sp++] = right[0]; stack[sp++] = left[0]; }
    while (sp) {
      const int64_t e = stack[--sp];
      if (e < 0) {  /* leaving node ~e: its feature's latest node is the one before it */
        const int64_t c = ~e;
        last[feat[parent[c]]] = prev[c];
        continue;
      }
      const int32_t f = feat[parent[e]];
      if (f < 0 || f >= M->n_features) { free(last); free(parent); free(stack); return -1; }
      const int32_t pv = last[f];
      prev[e] = pv;
      z[e] *= pv >= 0 ? z[pv] : 1.0;  /* z[e] came in as the cover ratio */
      last[f] = (int32_t)e;
      stack[sp++] = ~e;
      if (left[e] >= 0) { stack[sp++] = right[e]; stack[sp++] = left[e]; }
    }
  }
  free(last); free(parent); free(stack);
  /* the inverses 1 / (z + (o - z) u) of every node of the trees that keep them (0 for g = 0:
   * a zero-cover leaf the row does not reach) */
  for (int64_t t = 0; t < M->n_trees; t++) {
    if (M->tree_ioff[t] < 0 || M->tree_nq[t] <= 0) continue;
    const int64_t n0 = M->node0[t], nn = M->node0[t + 1] - n0;
    const int nq = M->tree_nq[t];
    const double *U = M->quad_u + M->tree_qoff[t];
    double *inv = M->n_inv + M->tree_ioff[t];
    for (int64_t j = 0; j < nn; j++)
      for (int o = 0; o < 2; o++)
        for (int p = 0; p < nq; p++) {
          const double z = M->n_z[n0 + j], g = z + ((double)o - z) * U[p];
          inv[(2 * j + o) * nq + p] = g != 0.0 ? 1.0 / g : 0.0;
        }
  }
  return 0;
}

/* the coefficients of the leaves with a table (leaf_toff >= 0), for every pattern of the path
 * nodes the row does not follow (bit = the node's depth); then tc_shap_prev */
TC_EXPORT int32_t tc_shap_tables(const tc_shap_model *M, int64_t n_leaves) {
  double pw[4 * 64 + 4];
  uint8_t o[64];
  double *tables = (double *)M->tables;
  for (int64_t l = 0; l < n_leaves; l++) {
    const int d = M->leaf_d[l], plen = M->leaf_plen[l];
    if (M->leaf_toff[l] < 0 || d == 0) continue;
    if (plen > 24 || d > 64) return -1;
    const int64_t p0 = M->leaf_poff[l];
    for (int64_t pat = 0; pat < ((int64_t)1 << plen); pat++) {
      memset(o, 1, (size_t)d);
      for (int p = 0; p < plen; p++)
        if (pat >> M->p_pos[p0 + p] & 1) o[M->p_slot[p0 + p]] = 0;
      tc_shap_leaf(d, M->u_z + M->leaf_uoff[l], o, pw, tables + M->leaf_toff[l] + pat * d);
    }
  }
  return tc_shap_prev(M);
}

/* one tree without tables (tree_nq > 0), Linear TreeSHAP's form of Algorithm 2 (Bifet et al.
 * 2022): with g_k(u) = o_k u + z_k (1 - u) for the features on a leaf's path, the leaf adds
 *   value * (o_k - z_k) * integral_0^1 prod_{i != k} g_i(u) du
 * to feature k (the same sum of Shapley weights as tc_shap_leaf), a polynomial of degree < d
 * that tree_nq >= d / 2 Gauss-Legendre points integrate exactly. Top-down, G(node) = the
 * product of the g of the features on its path (a repeated feature's factor replaced);
 * bottom-up, S(node) = the sum of value * G over the leaves below; the term of a feature
 * splits into one per node on it, (o - z) / g there minus the same at the previous node on
 * that feature (telescoping to the leaf's), each times S: O(nodes x points) per row, against
 * O(leaves x d^2) for the recurrences. on/G/IG/S: max_nodes x max_nq scratch. */
static inline __attribute__((always_inline)) void tc_shap_linear_nq(
    const tc_shap_model *M, int64_t t, const double *x, double *phi_t, uint8_t *on, double *G,
    double *IGrow, const double **IG, double *S, const int nq) {
  const int64_t n0 = M->node0[t], nn = M->node0[t + 1] - n0, nf = M->n_features;
  const int w = M->tree_width[t];
  const double *U = M->quad_u + M->tree_qoff[t], *W = M->quad_w + M->tree_qoff[t];
  const int32_t *left = M->left + n0, *right = M->right + n0, *prev = M->n_prev + n0;
  const double *zn = M->n_z + n0;
  const double *inv = M->tree_ioff[t] >= 0 ? M->n_inv + M->tree_ioff[t] : NULL;
  for (int p = 0; p < nq; p++) G[p] = 1.0;
  on[0] = 1;
  for (int64_t j = 0; j < nn; j++) {
    if (left[j] < 0) continue;
    const int gl = tc_shap_go_left(M, n0 + j, x[M->feat[n0 + j]]);
    const double *Gj = G + j * nq;
    for (int side = 0; side < 2; side++) {
      const int64_t c = side ? right[j] : left[j];
      const int32_t pv = prev[c];
      const int oc = (pv < 0 || on[pv]) && gl != side;
      const double z = zn[c], oz = (double)oc - z;
      double *Gc = G + c * nq;
      on[c] = (uint8_t)oc;
      if (inv) {  /* 1 / g from the model */
        IG[c] = inv + (2 * c + oc) * nq;
      } else {    /* ... or computed for this row */
        double *ig = IGrow + c * nq;
        for (int p = 0; p < nq; p++) {
          const double g = z + oz * U[p];
          ig[p] = g != 0.0 ? 1.0 / g : 0.0;
        }
        IG[c] = ig;
      }
      if (!oc && z == 0.0) {  /* a zero-cover leaf the row does not reach: adds nothing */
        for (int p = 0; p < nq; p++) Gc[p] = 0.0;
      } else if (pv < 0) {
        for (int p = 0; p < nq; p++) Gc[p] = Gj[p] * (z + oz * U[p]);
      } else {
        const double *IGp = IG[pv];
        for (int p = 0; p < nq; p++) Gc[p] = Gj[p] * (z + oz * U[p]) * IGp[p];
      }
    }
  }
  for (int q = 0; q < w; q++) {  /* one bottom-up pass per output of a vector-leaf tree */
    for (int64_t l = M->leaf0[t]; l < M->leaf0[t + 1]; l++) {
      const int64_t c = M->leaf_node[l];
      const double v = M->values[M->leaf_voff[l] + q] * M->scale;
      for (int p = 0; p < nq; p++) S[c * nq + p] = W[p] * (v * G[c * nq + p]);  /* weighted */
    }
    double *phi = phi_t + q * (nf + 1);
    for (int64_t j = nn - 1; j >= 0; j--) {
      if (left[j] < 0) continue;
      double acc = 0.0, *Sj = S + j * nq;
      for (int side = 0; side < 2; side++) {
        const int64_t c = side ? right[j] : left[j];
        const int32_t pv = prev[c];
        const double *Sc = S + c * nq, *IGc = IG[c], oz = (double)on[c] - zn[c];
        if (pv < 0) {
          for (int p = 0; p < nq; p++) acc += oz * IGc[p] * Sc[p];
        } else {
          const double *IGp = IG[pv], ozp = (double)on[pv] - zn[pv];
          for (int p = 0; p < nq; p++) acc += (oz * IGc[p] - ozp * IGp[p]) * Sc[p];
        }
        if (side) for (int p = 0; p < nq; p++) Sj[p] += Sc[p];
        else for (int p = 0; p < nq; p++) Sj[p] = Sc[p];
      }
      phi[M->feat[n0 + j]] += acc;
    }
  }
}

/* the kernel compiled for the common numbers of points (loops of known length), else generic */
static void tc_shap_linear(const tc_shap_model *M, int64_t t, const double *x, double *phi_t,
                           uint8_t *on, double *G, double *IGrow, const double **IG, double *S) {
  switch (M->tree_nq[t]) {
#define TC_SHAP_NQ(k) case k: tc_shap_linear_nq(M, t, x, phi_t, on, G, IGrow, IG, S, k); return;
    TC_SHAP_NQ(1) TC_SHAP_NQ(2) TC_SHAP_NQ(3) TC_SHAP_NQ(4) TC_SHAP_NQ(5) TC_SHAP_NQ(6)
    TC_SHAP_NQ(7) TC_SHAP_NQ(8) TC_SHAP_NQ(9) TC_SHAP_NQ(10) TC_SHAP_NQ(11) TC_SHAP_NQ(12)
#undef TC_SHAP_NQ
    default: tc_shap_linear_nq(M, t, x, phi_t, on, G, IGrow, IG, S, M->tree_nq[t]);
  }
}

/* the one-row path of tc_shap_rows (TC_ISA_SCALAR) */
static int32_t tc_shap_rows_scalar(const tc_shap_model *M, const double *X, int64_t n_rows,
                                   double *out) {
  const int64_t nf = M->n_features, stride = M->n_outputs * (nf + 1);
  uint8_t *go = malloc((size_t)M->max_nodes + 1);
  uint64_t *pat = malloc(sizeof(uint64_t) * ((size_t)M->max_nodes + 1));
  const size_t lin = (size_t)(M->max_nodes + 1) * (size_t)(M->max_nq + 1);
  double *scratch = malloc(sizeof(double) * 3 * lin);
  const double **igp = malloc(sizeof(double *) * ((size_t)M->max_nodes + 1));
  if (!go || !pat || !scratch || !igp) { free(go); free(pat); free(scratch); free(igp); return -2; }
  double *G = scratch, *IG = G + lin, *S = IG + lin;
  /* rows in blocks, trees outside rows within a block: a tree's tables are read from memory
   * once per block (128 rows: X, contributions and one depth-6 tree's tables fit in L2) */
  for (int64_t r0 = 0; r0 < n_rows; r0 += 128)
  for (int64_t t = 0; t < M->n_trees; t++)
    for (int64_t r = r0; r < n_rows && r < r0 + 128; r++) {
      const double *x = X + r * nf;
      double *phi_row = out + r * stride;
      const int64_t n0 = M->node0[t], nn = M->node0[t + 1] - n0;
      if (nn < 2) continue;
      if (M->tree_nq[t] > 0) {
        tc_shap_linear(M, t, x, phi_row + (int64_t)M->tree_out[t] * (nf + 1), go, G, IG, igp, S);
        continue;
      }
      tc_shap_table_row(M, t, x, pat, phi_row + (int64_t)M->tree_out[t] * (nf + 1), 1);
    }
  free(go); free(pat); free(scratch); free(igp);
  return 0;
}

#if TC_X86
int32_t tc_shap_rows_avx2(const tc_shap_model *M, const double *X, int64_t n_rows, double *out);
#endif
#if TC_WITH512
int32_t tc_shap_rows_avx512(const tc_shap_model *M, const double *X, int64_t n_rows, double *out);
#endif
#if TC_ARM
int32_t tc_shap_rows_neon(const tc_shap_model *M, const double *X, int64_t n_rows, double *out);
#endif

/* contributions of n_rows rows of X (float64, already rounded to the model's input dtype)
 * added into out (n_rows, n_outputs, n_features + 1), the bias column left to the caller;
 * isa: TC_ISA_SCALAR (a row at a time), TC_ISA_AVX2 (4 rows per group) or TC_ISA_AVX512 (8),
 * the same values bit for bit where out starts at zero (tc_arrays_isa_mask: what this CPU runs).
 * Returns 0, -1 (an isa this build or CPU lacks), -2 (out of memory). */
TC_EXPORT int32_t tc_shap_rows(const tc_shap_model *M, const double *X, int64_t n_rows, double *out,
                               int32_t isa) {
  if (isa < 0 || isa > TC_ISA_LAST || !(tc_arrays_isa_mask() >> isa & 1)) return -1;
#if TC_ARM  /* 4 rows per group; the SVE path takes the NEON kernel (its lanes are 128 bits) */
  if (isa == TC_ISA_NEON || isa == TC_ISA_SVE) return tc_shap_rows_neon(M, X, n_rows, out);
#endif
#if TC_X86
  if (isa == TC_ISA_AVX2) return tc_shap_rows_avx2(M, X, n_rows, out);
#endif
#if TC_WITH512
  if (isa == TC_ISA_AVX512) return tc_shap_rows_avx512(M, X, n_rows, out);
#endif
  return tc_shap_rows_scalar(M, X, n_rows, out);
}
#endif /* TC_PART 0 */

/* the several-row kernels, one per vector instruction set (kernels/shap_rows.c) */
#if TC_X86 && (TC_PART == -1 || TC_PART == 1)
#define TC_ATTR __attribute__((target("avx2")))
#define TC_ISA avx2
#define TC_SHAP_L 4
#include "kernels/shap_rows.c"
#endif
#if TC_WITH512 && TC_PART == 2
#define TC_ATTR __attribute__((target("avx512f,avx512bw,avx512vl,avx512vbmi,avx2,popcnt")))
#define TC_ISA avx512
#define TC_SHAP_L 8
#include "kernels/shap_rows.c"
#endif
#if TC_ARM && (TC_PART == -1 || TC_PART == 1)
/* 4 rows a group: two 128-bit halves per operation, independent chains for a wide core (by
 * bench/arm_cost.py --call shap: Neoverse V1 1.31x fewer cycles a row than 2 rows a group,
 * N1 the same; 1.85x / 1.31x below the portable path) */
#define TC_ATTR
#define TC_ISA neon
#define TC_SHAP_L 4
#include "kernels/shap_rows.c"
#endif
