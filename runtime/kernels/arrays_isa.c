/*
 * arrays_isa.c -- one instruction set's kernels (a fragment included by arrays.c): arrays_impl.c
 * instantiated for the four (input dtype, accumulation dtype) pairs as run_<x>_<acc>_<TC_ISA>.
 * Parameters: TC_ATTR (function attributes), TC_ISA (name suffix), TC_VEC_F32 (the float heap
 * walk's vector width for float input: 0, 8 or 16; float64 input always walks scalar floats),
 * TC_QVEC (the byte walks' AVX2 kernels; 2: and the AVX-512 ones), TC_QARM (aarch64's: 1 NEON,
 * 2 NEON and SVE; 0 where not defined). Undefines them all at the end.
 */
#ifndef TC_QARM
#define TC_QARM 0
#endif
#define TC_CAT3_(a, b, c) a##_##b##_##c
#define TC_CAT3(a, b, c) TC_CAT3_(a, b, c)

#define TC_VEC TC_VEC_F32
#define TC_XT float
#define TC_XN f32
#define TC_NODE tc_node_f32
#define TC_NTHR TC_NTHR32
#define TC_NCAT TC_NCAT32
#include "kernels/arrays_acc.c"

#define TC_VEC 0
#define TC_XT double
#define TC_XN f64
#define TC_NODE tc_node_f64
#define TC_NTHR TC_NTHR64
#define TC_NCAT TC_NCAT64
#include "kernels/arrays_acc.c"

#undef TC_CAT3
#undef TC_CAT3_
#undef TC_ATTR
#undef TC_ISA
#undef TC_VEC_F32
#undef TC_QVEC
#undef TC_QARM
