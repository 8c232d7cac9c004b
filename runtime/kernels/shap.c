/* SHAP contributions: exact path-dependent TreeSHAP (Lundberg et al. 2020, Algorithm 2) over
 * per-leaf path tables prepared by treecomp/shap.py. Included by arrays.c (part 0); plain C99.
 *
 * For one leaf with d distinct features on its root path, feature k has a zero fraction z_k
 * (the product of cover(child) / cover(parent) over the path's nodes on k) and a one fraction
 * o_k (1 iff the row takes the path's way at every one of those nodes). The leaf's Shapley
 * values depend on the row only through which of its path's nodes the row does not follow, so
 * for paths of up to treecomp.shap.TABLE_MAX_D nodes every such pattern's coefficients are
 * computed once per model (tc_shap_tables) and a row costs d multiply-adds per leaf (the idea
 * of Fast TreeSHAP v2, Yang 2021); the table is indexed by the depths at which the row turns
 * away, computed for all leaves in one pass over the tree's nodes. Longer paths compute the
 * coefficients per row, in closed form (tc_shap_leaf). Everything is float64.
 */

typedef struct {
  int64_t n_trees, n_features, n_outputs, strict, cat_rule, max_nodes, max_d;
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
  double scale;                            /* 1 / n_trees for averaged forests, else 1 */
} tc_shap_model;

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

/* wd: the weights of d (tc_shap_weights), or NULL to compute them into sc */
static void tc_shap_leaf(int d, const double *z, const uint8_t *o, double *sc, double *coef,
                         const double *wd) {
  double *e = sc, *ei = sc + d + 1, *zo = sc + 3 * d + 3;
  const double *w = wd;
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
  if (!w) {
    tc_shap_weights(d, sc + 2 * d + 2);
    w = sc + 2 * d + 2;
  }
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

/* the coefficients of the leaves with a table (leaf_toff >= 0), for every pattern of the path
 * nodes the row does not follow (bit = the node's depth) */
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
      tc_shap_leaf(d, M->u_z + M->leaf_uoff[l], o, pw, tables + M->leaf_toff[l] + pat * d, NULL);
    }
  }
  return 0;
}

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

/* contributions of n_rows rows of X (float64, already rounded to the model's input dtype)
 * added into out (n_rows, n_outputs, n_features + 1), the bias column left to the caller */
TC_EXPORT int32_t tc_shap_rows(const tc_shap_model *M, const double *X, int64_t n_rows, double *out) {
  const int64_t nf = M->n_features, stride = M->n_outputs * (nf + 1);
  uint8_t *go = malloc((size_t)M->max_nodes + 1);
  uint64_t *pat = malloc(sizeof(uint64_t) * ((size_t)M->max_nodes + 1));
  double *scratch = malloc(sizeof(double) * (size_t)(5 * M->max_d + 5));
  uint8_t *o = malloc((size_t)M->max_d + 1);
  if (!go || !pat || !scratch || !o) { free(go); free(pat); free(scratch); free(o); return -2; }
  double *pw = scratch, *coef = scratch + 4 * M->max_d + 4;
  double wtab[65][64];  /* the Shapley weights of d = 1..64 */
  for (int d = 1; d <= 64; d++) tc_shap_weights(d, wtab[d]);
  /* rows in blocks, trees outside rows within a block: a tree's tables are read from memory
   * once per block (128 rows: X, contributions and one depth-6 tree's tables fit in L2) */
  for (int64_t r0 = 0; r0 < n_rows; r0 += 128)
  for (int64_t t = 0; t < M->n_trees; t++)
    for (int64_t r = r0; r < n_rows && r < r0 + 128; r++) {
      const double *x = X + r * nf;
      double *phi_row = out + r * stride;
      const int64_t n0 = M->node0[t], nn = M->node0[t + 1] - n0;
      /* per node: the depths on its path where the row goes the other way (children > parent) */
      pat[0] = 0;
      for (int64_t j = 0; j < nn; j++) {
        const int64_t g = n0 + j;
        if (M->left[g] < 0) continue;
        const int gl = tc_shap_go_left(M, g, x[M->feat[g]]);
        const uint64_t bit = M->depth[g] < 64 ? (uint64_t)1 << M->depth[g] : 0;
        go[j] = (uint8_t)gl;
        pat[M->left[g]] = pat[j] | (gl ? 0 : bit);
        pat[M->right[g]] = pat[j] | (gl ? bit : 0);
      }
      const int w = M->tree_width[t];
      double *phi_t = phi_row + (int64_t)M->tree_out[t] * (nf + 1);
      for (int64_t l = M->leaf0[t]; l < M->leaf0[t + 1]; l++) {
        const int d = M->leaf_d[l];
        if (d == 0) continue;
        const int64_t p0 = M->leaf_poff[l], p1 = p0 + M->leaf_plen[l], u0 = M->leaf_uoff[l];
        const double *v = M->values + M->leaf_voff[l];
        const double *c;
        if (M->leaf_toff[l] >= 0) {
          c = M->tables + M->leaf_toff[l] + (int64_t)pat[M->leaf_node[l]] * d;
        } else {
          memset(o, 1, (size_t)d);
          for (int64_t p = p0; p < p1; p++)
            if (go[M->p_node[p]] != M->p_left[p]) o[M->p_slot[p]] = 0;
          tc_shap_leaf(d, M->u_z + u0, o, pw, coef, d <= 64 ? wtab[d] : NULL);
          c = coef;
        }
        for (int q = 0; q < w; q++) {
          const double vq = v[q] * M->scale;
          double *phi = phi_t + q * (nf + 1);
          for (int k = 0; k < d; k++) phi[M->u_feat[u0 + k]] += c[k] * vq;
        }
      }
    }
  free(go); free(pat); free(scratch); free(o);
  return 0;
}
