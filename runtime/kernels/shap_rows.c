/* shap_rows.c -- SHAP contributions of several rows at once, a row per vector lane (a fragment
 * included by shap.c once per instruction set). Parameters: TC_ATTR (function attributes),
 * TC_ISA (name suffix), TC_SHAP_L (rows per group = lanes of the GCC vector type). Undefines
 * them at the end.
 *
 * Linear TreeSHAP's work per node (tc_shap_linear_nq) is the same for every row except for
 * "does the row follow this node" (on, a 0 / 1 per lane): the tree's structure, zero fractions,
 * quadrature points and 1 / g tables are shared, so each scalar operation of the one-row kernel
 * becomes one vector operation over TC_SHAP_L rows, in the same order: every lane computes
 * exactly the one-row kernel's float64 values (no FMA: -ffp-contract=off), and contributions are
 * accumulated per lane in tree order, so tc_shap_rows_<isa> returns the one-row path's values
 * bit for bit (tests/test_shap.py checks). Table trees run the one-row code per lane.
 */
#define TC_SHAP_CAT_(a, b) a##_##b
#define TC_SHAP_CAT(a, b) TC_SHAP_CAT_(a, b)
#define TC_SV TC_SHAP_CAT(tc_shap_vd, TC_ISA)
#define TC_SM TC_SHAP_CAT(tc_shap_vm, TC_ISA)

typedef double TC_SV __attribute__((vector_size(8 * TC_SHAP_L)));
typedef int64_t TC_SM __attribute__((vector_size(8 * TC_SHAP_L)));

/* m ? a : b per lane (m: all ones or zero) */
static inline __attribute__((always_inline)) TC_ATTR TC_SV TC_SHAP_CAT(tc_shap_sel, TC_ISA)(
    TC_SM m, TC_SV a, TC_SV b) {
  return (TC_SV)(((TC_SM)a & m) | ((TC_SM)b & ~m));
}
#define TC_SEL TC_SHAP_CAT(tc_shap_sel, TC_ISA)
/* the loops over quadrature points unrolled (their count is a constant here) */
#define TC_SHAP_UNROLL _Pragma("GCC unroll 8")

/* one Linear TreeSHAP tree (tree_nq > 0) for one group of rows, xv[feature] their values (a
 * row per lane): tc_shap_linear_nq with a row per lane; contributions added into
 * phiv[output x (nf + 1)] (vectors) */
static inline __attribute__((always_inline)) TC_ATTR void TC_SHAP_CAT(tc_shap_vlin_nq, TC_ISA)(
    const tc_shap_model *M, int64_t t, const TC_SV *xv, TC_SV *phiv, TC_SV *ON,
    TC_SV *G, TC_SV *IG, TC_SV *S, const int nq) {
  const int64_t n0 = M->node0[t], nn = M->node0[t + 1] - n0, nf = M->n_features;
  const int w = M->tree_width[t];
  const double *U = M->quad_u + M->tree_qoff[t], *W = M->quad_w + M->tree_qoff[t];
  const int32_t *left = M->left + n0, *right = M->right + n0, *prev = M->n_prev + n0;
  const int32_t *feat = M->feat + n0, *cat = M->cat + n0;
  const double *zn = M->n_z + n0, *thr = M->thr + n0;
  const uint8_t *dleft = M->dleft + n0;
  const double *inv = M->tree_ioff[t] >= 0 ? M->n_inv + M->tree_ioff[t] : NULL;
  const TC_SV one = (TC_SV){0} + 1.0, zero = (TC_SV){0};
  TC_SHAP_UNROLL
  for (int p = 0; p < nq; p++) G[p] = one;
  ON[0] = one;
  for (int64_t j = 0; j < nn; j++) {
    if (left[j] < 0) continue;
    const int32_t f = feat[j];
    const TC_SV x = xv[f];
    TC_SM gl;
    if (cat[j] < 0) {  /* the numeric split of tc_shap_go_left, per lane */
      const TC_SV th = zero + thr[j];
      const TC_SM lt = M->strict ? (TC_SM)(x < th) : (TC_SM)(x <= th);
      gl = lt | ((TC_SM)(x != x) & ((TC_SM){0} - (int64_t)dleft[j]));
    } else {
      for (int l = 0; l < TC_SHAP_L; l++) gl[l] = -(int64_t)tc_shap_go_left(M, n0 + j, x[l]);
    }
    const TC_SV *Gj = G + j * nq;
    for (int side = 0; side < 2; side++) {
      const int64_t c = side ? right[j] : left[j];
      const int32_t pv = prev[c];
      const TC_SV onp = pv < 0 ? one : ON[pv];
      const TC_SV oc = TC_SEL(side ? ~gl : gl, onp, zero);   /* (pv < 0 || on[pv]) && goes */
      const double z = zn[c];
      const TC_SV oz = oc - z;
      const TC_SM ocm = (TC_SM)(oc != zero);
      TC_SV *Gc = G + c * nq, *IGc = IG + c * nq;
      ON[c] = oc;
      if (inv) {  /* 1 / g from the model */
        const double *i0 = inv + 2 * c * nq, *i1 = i0 + nq;
        TC_SHAP_UNROLL
        for (int p = 0; p < nq; p++) IGc[p] = TC_SEL(ocm, zero + i1[p], zero + i0[p]);
      } else {    /* ... or computed for these rows */
        TC_SHAP_UNROLL
        for (int p = 0; p < nq; p++) {
          const TC_SV g = z + oz * U[p];
          IGc[p] = TC_SEL((TC_SM)(g != zero), 1.0 / g, zero);
        }
      }
      if (pv < 0) {
        TC_SHAP_UNROLL
        for (int p = 0; p < nq; p++) Gc[p] = Gj[p] * (z + oz * U[p]);
      } else {
        const TC_SV *IGp = IG + pv * nq;
        TC_SHAP_UNROLL
        for (int p = 0; p < nq; p++) Gc[p] = Gj[p] * (z + oz * U[p]) * IGp[p];
      }
      if (z == 0.0) {  /* a zero-cover leaf a row does not reach: adds nothing for that row */
        TC_SHAP_UNROLL
        for (int p = 0; p < nq; p++) Gc[p] = TC_SEL(ocm, Gc[p], zero);
      }
    }
  }
  if (w == 1) S = G;  /* the up pass reads G at the leaves only: S may overwrite it */
  for (int q = 0; q < w; q++) {  /* one bottom-up pass per output of a vector-leaf tree */
    for (int64_t l = M->leaf0[t]; l < M->leaf0[t + 1]; l++) {
      const int64_t c = M->leaf_node[l];
      const double v = M->values[M->leaf_voff[l] + q] * M->scale;
      TC_SHAP_UNROLL
      for (int p = 0; p < nq; p++) S[c * nq + p] = W[p] * (v * G[c * nq + p]);  /* weighted */
    }
    TC_SV *phi = phiv + q * (nf + 1);
    for (int64_t j = nn - 1; j >= 0; j--) {
      if (left[j] < 0) continue;
      TC_SV acc = zero, *Sj = S + j * nq;
      for (int side = 0; side < 2; side++) {
        const int64_t c = side ? right[j] : left[j];
        const int32_t pv = prev[c];
        const TC_SV *Sc = S + c * nq, *IGc = IG + c * nq, oz = ON[c] - zn[c];
        if (pv < 0) {
          TC_SHAP_UNROLL
          for (int p = 0; p < nq; p++) acc += oz * IGc[p] * Sc[p];
        } else {
          const TC_SV *IGp = IG + pv * nq, ozp = ON[pv] - zn[pv];
          TC_SHAP_UNROLL
          for (int p = 0; p < nq; p++) acc += (oz * IGc[p] - ozp * IGp[p]) * Sc[p];
        }
        if (side) {
          TC_SHAP_UNROLL
          for (int p = 0; p < nq; p++) Sj[p] += Sc[p];
        } else {
          TC_SHAP_UNROLL
          for (int p = 0; p < nq; p++) Sj[p] = Sc[p];
        }
      }
      phi[feat[j]] += acc;
    }
  }
}

static TC_ATTR void TC_SHAP_CAT(tc_shap_vlin, TC_ISA)(
    const tc_shap_model *M, int64_t t, const TC_SV *xv, TC_SV *phiv, TC_SV *ON,
    TC_SV *G, TC_SV *IG, TC_SV *S) {
  switch (M->tree_nq[t]) {
#define TC_SHAP_NQ(k) \
    case k: TC_SHAP_CAT(tc_shap_vlin_nq, TC_ISA)(M, t, xv, phiv, ON, G, IG, S, k); return;
    TC_SHAP_NQ(1) TC_SHAP_NQ(2) TC_SHAP_NQ(3) TC_SHAP_NQ(4) TC_SHAP_NQ(5) TC_SHAP_NQ(6)
    TC_SHAP_NQ(7) TC_SHAP_NQ(8)
#undef TC_SHAP_NQ
    default: TC_SHAP_CAT(tc_shap_vlin_nq, TC_ISA)(M, t, xv, phiv, ON, G, IG, S, M->tree_nq[t]);
  }
}

/* = tc_shap_rows (same arguments, same values) with TC_SHAP_L rows per group; returns 0 or -2
 * (out of memory) */
TC_ATTR int32_t TC_SHAP_CAT(tc_shap_rows, TC_ISA)(const tc_shap_model *M, const double *X,
                                                  int64_t n_rows, double *out) {
  const int64_t nf = M->n_features, width = M->n_outputs * (nf + 1);
  /* rows in blocks of up to 128 (whole groups; fewer where the block's contributions, and as
   * many rows, would pass ~256 KB each), trees outside groups within a block: a tree is read
   * once per block */
  int64_t block = (32768 / width) / TC_SHAP_L * TC_SHAP_L;
  if (block > 128) block = 128;
  if (block < TC_SHAP_L) block = TC_SHAP_L;
  const size_t nodes = (size_t)M->max_nodes + 1, lin = nodes * (size_t)(M->max_nq + 1);
  void *mem = NULL;
  const size_t ngb = (size_t)(block / TC_SHAP_L);
  if (posix_memalign(&mem, 64, sizeof(TC_SV) * (3 * lin + nodes + ngb * (size_t)(width + nf))))
    return -2;
  uint64_t *pat = malloc(sizeof(uint64_t) * nodes);
  if (!pat) { free(mem); return -2; }
  TC_SV *G = mem, *IG = G + lin, *S = IG + lin, *ON = S + lin, *phiv = ON + nodes;
  TC_SV *xt = phiv + ngb * (size_t)width;  /* the block's rows by group, feature, lane */
  for (int64_t r0 = 0; r0 < n_rows; r0 += block) {
    const int64_t nb = n_rows - r0 < block ? n_rows - r0 : block;
    const int64_t ng = (nb + TC_SHAP_L - 1) / TC_SHAP_L;
    memset(phiv, 0, sizeof(TC_SV) * (size_t)(ng * width));
    for (int64_t i = 0; i < ng * TC_SHAP_L; i++) {  /* lanes past the last row repeat it */
      const int64_t r = r0 + i < n_rows ? r0 + i : n_rows - 1;
      double *dst = (double *)(xt + i / TC_SHAP_L * nf) + i % TC_SHAP_L;
      for (int64_t f = 0; f < nf; f++) dst[f * TC_SHAP_L] = X[r * nf + f];
    }
    for (int64_t t = 0; t < M->n_trees; t++) {
      if (M->node0[t + 1] - M->node0[t] < 2) continue;
      for (int64_t gi = 0; gi < ng; gi++) {
        TC_SV *phi_t = phiv + gi * width + (int64_t)M->tree_out[t] * (nf + 1);
        if (M->tree_nq[t] > 0) {
          TC_SHAP_CAT(tc_shap_vlin, TC_ISA)(M, t, xt + gi * nf, phi_t, ON, G, IG, S);
        } else {
          for (int l = 0; l < TC_SHAP_L && r0 + gi * TC_SHAP_L + l < n_rows; l++)
            tc_shap_table_row(M, t, X + (r0 + gi * TC_SHAP_L + l) * nf, pat, (double *)phi_t + l,
                              TC_SHAP_L);
        }
      }
    }
    for (int64_t i = 0; i < nb; i++) {  /* lane i % L of group i / L is row r0 + i */
      const double *src = (const double *)(phiv + i / TC_SHAP_L * width) + i % TC_SHAP_L;
      double *dst = out + (r0 + i) * width;
      for (int64_t k = 0; k < width; k++) dst[k] += src[k * TC_SHAP_L];
    }
  }
  free(mem);
  free(pat);
  return 0;
}

#undef TC_SEL
#undef TC_SHAP_UNROLL
#undef TC_SV
#undef TC_SM
#undef TC_SHAP_CAT
#undef TC_SHAP_CAT_
#undef TC_ATTR
#undef TC_ISA
#undef TC_SHAP_L
