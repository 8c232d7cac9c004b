/* Linear leaves (LightGBM linear_tree): what each tree adds for each row, given the leaf the
 * row reached in it (found by a compiled leaf-id kernel; treecomp/linear.py). Included by
 * arrays.c (part 0); plain C99, built with -ffp-contract=off (no FMA: LightGBM's sums are
 * unfused).
 *
 * LightGBM (4.7, Tree::LinearModelLeafOutput via its C API): a row whose value of any of the
 * leaf's features is NaN gets the plain leaf value; otherwise leaf_const + coeff_0 * x_f0 +
 * coeff_1 * x_f1 + ... in float64, in the leaf's feature order, where |x| <= 1e-35 reads as 0
 * (the C API drops such values as sparse zeros). inf * 0 or inf - inf make NaN as there.
 */

/* The raw margins acc (n, n_outputs; float64) of rows r < n: base, then each tree's output in
 * tree order, added to its output tree_out[t]. leaves: (n, n_trees) node indices local to each
 * tree (as float64, what the leaf-id kernel writes); node0: the tree's first global node; ptr:
 * per global node, its features' range in feat / coeff (n_nodes + 1). Returns -1 (rows left
 * half written) on a leaf index outside its tree. */
TC_EXPORT int32_t tc_linear_margins(const double *X, int64_t n, int64_t nf, const double *leaves,
                                    int64_t n_trees, const int64_t *node0, const int32_t *tree_out,
                                    int64_t n_outputs, const double *base, const double *plain,
                                    const double *cnst, const int64_t *ptr, const int32_t *feat,
                                    const double *coeff, double zero, double *acc) {
  for (int64_t r = 0; r < n; ++r) {
    const double *x = X + r * nf, *lv = leaves + r * n_trees;
    double *a = acc + r * n_outputs;
    for (int64_t o = 0; o < n_outputs; ++o) a[o] = base[o];
    for (int64_t t = 0; t < n_trees; ++t) {
      const double l = lv[t];
      if (!(l >= 0) || l >= (double)(node0[t + 1] - node0[t])) return -1;
      const int64_t node = node0[t] + (int64_t)l;
      double s = cnst[node];
      for (int64_t k = ptr[node]; k < ptr[node + 1]; ++k) {
        double v = x[feat[k]];
        if (isnan(v)) {
          s = plain[node];
          break;
        }
        if (fabs(v) <= zero) v = 0.0;
        s += v * coeff[k];
      }
      a[tree_out[t]] += s;
    }
  }
  return 0;
}
