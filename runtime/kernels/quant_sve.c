/*
 * quant_sve.c -- the byte walks' SVE kernels (a fragment included by quant_neon.c in the SVE
 * unit, TC_QARM 2, every function with TC_ATTR's target("+sve")).
 */
