/*
 * quant_sve.c -- a place for the byte walks' SVE kernels (a fragment included by quant_neon.c
 * in the SVE unit, TC_QARM 2, every function with TC_ATTR's target("+sve")). It holds none
 * yet: the SVE path ("sve") runs quant_neon.c's NEON kernels compiled for SVE, which
 * bench/arm_cost.py counts as costly as the NEON path, so isa="auto" passes over it
 * (arrays/native.py, AUTO_SKIP). What would pay here: the heap walk over 64-row groups (the
 * AVX-512 block layout, TC_QR 64) at SVE's run-time vector length (docs/benchmarks.md, "ARM").
 */
