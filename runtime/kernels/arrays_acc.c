/*
 * arrays_acc.c -- one input dtype's kernels (a fragment included by arrays_isa.c): arrays_impl.c
 * under both accumulation dtypes, as run_<TC_XN>_f64_<TC_ISA> and run_<TC_XN>_f32_<TC_ISA>.
 * Parameters: TC_VEC, TC_XT (input C type), TC_XN (its name: f32 / f64), TC_NODE, TC_NTHR,
 * TC_NCAT. Undefines them at the end. Defines TC_AN (f64 / f32) and TC_ABITS (64 / 32) beside
 * TC_AT for the fragments defined once per accumulation dtype.
 */
#define TC_AT double
#define TC_AN f64
#define TC_ABITS 64
#define TC_SFX TC_CAT3(TC_XN, f64, TC_ISA)
#include "kernels/arrays_impl.c"
#undef TC_AT
#undef TC_AN
#undef TC_ABITS
#undef TC_SFX
#define TC_AT float
#define TC_AN f32
#define TC_ABITS 32
#define TC_SFX TC_CAT3(TC_XN, f32, TC_ISA)
#include "kernels/arrays_impl.c"
#undef TC_AT
#undef TC_AN
#undef TC_ABITS
#undef TC_SFX
#undef TC_XT
#undef TC_XN
#undef TC_NODE
#undef TC_NTHR
#undef TC_NCAT
#undef TC_VEC
