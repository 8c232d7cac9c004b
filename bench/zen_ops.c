/* Throughput of the instructions the AVX-512 byte walks are made of, on this core (bench, not
 * part of the kernel): eight independent instructions a loop iteration, cycles per instruction
 * from a dependent add chain's clock (the guest has no cycle counters).
 *   cc -O2 -mavx512f -mavx512bw -mavx512vbmi -o /tmp/zen_ops bench/zen_ops.c && /tmp/zen_ops
 * See docs/internals/performance-notes.md ("The byte walk's floor"). */
#include <stdint.h>
#include <stdio.h>
#include <time.h>
#include <immintrin.h>
static double now(void){struct timespec a; clock_gettime(CLOCK_THREAD_CPUTIME_ID,&a); return a.tv_sec*1e9+a.tv_nsec;}
static _Alignas(64) uint8_t buf[64*64];
#define N 20000000
#define REP8(x) x x x x x x x x
#define T(name, n_per_iter, ...) { double t0=now(); for (long i=0;i<N;i++){ __VA_ARGS__; } double t=now()-t0; printf("%-28s %.3f cyc/instr\n", name, t*ghz/((double)N*n_per_iter)); }
int main(){
  double ghz; { uint64_t x=0; double t0=now(); for(long i=0;i<100000000;i+=8) __asm__ volatile(REP8("add $1,%0\n\t"):"+r"(x)); ghz=1e8/(now()-t0);} printf("ghz %.3f\n",ghz);
  const uint8_t *p=buf;
  T("zmm load (8 indep)", 8, __asm__ volatile(
    "vmovdqa64 0(%0),%%zmm0\n\tvmovdqa64 64(%0),%%zmm1\n\tvmovdqa64 128(%0),%%zmm2\n\tvmovdqa64 192(%0),%%zmm3\n\t"
    "vmovdqa64 256(%0),%%zmm4\n\tvmovdqa64 320(%0),%%zmm5\n\tvmovdqa64 384(%0),%%zmm6\n\tvmovdqa64 448(%0),%%zmm7\n\t"::"r"(p):"xmm0","xmm1","xmm2","xmm3","xmm4","xmm5","xmm6","xmm7"));
  T("ymm load (8 indep)", 8, __asm__ volatile(
    "vmovdqa 0(%0),%%ymm0\n\tvmovdqa 64(%0),%%ymm1\n\tvmovdqa 128(%0),%%ymm2\n\tvmovdqa 192(%0),%%ymm3\n\t"
    "vmovdqa 256(%0),%%ymm4\n\tvmovdqa 320(%0),%%ymm5\n\tvmovdqa 384(%0),%%ymm6\n\tvmovdqa 448(%0),%%ymm7\n\t"::"r"(p):"xmm0","xmm1","xmm2","xmm3","xmm4","xmm5","xmm6","xmm7"));
  T("vpblendmb zmm reg (8 indep)", 8, __asm__ volatile(
    "vpblendmb %%zmm8,%%zmm9,%%zmm0%{%%k1%}\n\tvpblendmb %%zmm8,%%zmm9,%%zmm1%{%%k1%}\n\tvpblendmb %%zmm8,%%zmm9,%%zmm2%{%%k1%}\n\tvpblendmb %%zmm8,%%zmm9,%%zmm3%{%%k1%}\n\t"
    "vpblendmb %%zmm8,%%zmm9,%%zmm4%{%%k1%}\n\tvpblendmb %%zmm8,%%zmm9,%%zmm5%{%%k1%}\n\tvpblendmb %%zmm8,%%zmm9,%%zmm6%{%%k1%}\n\tvpblendmb %%zmm8,%%zmm9,%%zmm7%{%%k1%}\n\t":::"xmm0","xmm1","xmm2","xmm3","xmm4","xmm5","xmm6","xmm7"));
  T("vpblendmb zmm mem (8 indep)", 8, __asm__ volatile(
    "vpblendmb 0(%0),%%zmm9,%%zmm0%{%%k1%}\n\tvpblendmb 64(%0),%%zmm9,%%zmm1%{%%k1%}\n\tvpblendmb 128(%0),%%zmm9,%%zmm2%{%%k1%}\n\tvpblendmb 192(%0),%%zmm9,%%zmm3%{%%k1%}\n\t"
    "vpblendmb 256(%0),%%zmm9,%%zmm4%{%%k1%}\n\tvpblendmb 320(%0),%%zmm9,%%zmm5%{%%k1%}\n\tvpblendmb 384(%0),%%zmm9,%%zmm6%{%%k1%}\n\tvpblendmb 448(%0),%%zmm9,%%zmm7%{%%k1%}\n\t"::"r"(p):"xmm0","xmm1","xmm2","xmm3","xmm4","xmm5","xmm6","xmm7"));
  T("vpblendmb ymm reg (8 indep)", 8, __asm__ volatile(
    "vpblendmb %%ymm8,%%ymm9,%%ymm0%{%%k1%}\n\tvpblendmb %%ymm8,%%ymm9,%%ymm1%{%%k1%}\n\tvpblendmb %%ymm8,%%ymm9,%%ymm2%{%%k1%}\n\tvpblendmb %%ymm8,%%ymm9,%%ymm3%{%%k1%}\n\t"
    "vpblendmb %%ymm8,%%ymm9,%%ymm4%{%%k1%}\n\tvpblendmb %%ymm8,%%ymm9,%%ymm5%{%%k1%}\n\tvpblendmb %%ymm8,%%ymm9,%%ymm6%{%%k1%}\n\tvpblendmb %%ymm8,%%ymm9,%%ymm7%{%%k1%}\n\t":::"xmm0","xmm1","xmm2","xmm3","xmm4","xmm5","xmm6","xmm7"));
  T("vptestmb zmm (8 indep)", 8, __asm__ volatile(
    "vptestmb %%zmm8,%%zmm9,%%k1\n\tvptestmb %%zmm8,%%zmm9,%%k2\n\tvptestmb %%zmm8,%%zmm9,%%k3\n\tvptestmb %%zmm8,%%zmm9,%%k4\n\t"
    "vptestmb %%zmm8,%%zmm9,%%k5\n\tvptestmb %%zmm8,%%zmm9,%%k6\n\tvptestmb %%zmm8,%%zmm9,%%k7\n\tvptestmb %%zmm8,%%zmm9,%%k1\n\t":::"k1","k2","k3","k4","k5","k6","k7"));
  T("vpcmpgtb zmm->k (8 indep)", 8, __asm__ volatile(
    "vpcmpgtb %%zmm8,%%zmm9,%%k1\n\tvpcmpgtb %%zmm8,%%zmm9,%%k2\n\tvpcmpgtb %%zmm8,%%zmm9,%%k3\n\tvpcmpgtb %%zmm8,%%zmm9,%%k4\n\t"
    "vpcmpgtb %%zmm8,%%zmm9,%%k5\n\tvpcmpgtb %%zmm8,%%zmm9,%%k6\n\tvpcmpgtb %%zmm8,%%zmm9,%%k7\n\tvpcmpgtb %%zmm8,%%zmm9,%%k1\n\t":::"k1","k2","k3","k4","k5","k6","k7"));
  T("vpermb zmm (8 indep)", 8, __asm__ volatile(
    "vpermb %%zmm8,%%zmm9,%%zmm0\n\tvpermb %%zmm8,%%zmm9,%%zmm1\n\tvpermb %%zmm8,%%zmm9,%%zmm2\n\tvpermb %%zmm8,%%zmm9,%%zmm3\n\t"
    "vpermb %%zmm8,%%zmm9,%%zmm4\n\tvpermb %%zmm8,%%zmm9,%%zmm5\n\tvpermb %%zmm8,%%zmm9,%%zmm6\n\tvpermb %%zmm8,%%zmm9,%%zmm7\n\t":::"xmm0","xmm1","xmm2","xmm3","xmm4","xmm5","xmm6","xmm7"));
  T("vpermi2b zmm (8 indep)", 8, __asm__ volatile(
    "vmovdqa64 %%zmm10,%%zmm0\n\tvpermi2b %%zmm8,%%zmm9,%%zmm0\n\tvmovdqa64 %%zmm10,%%zmm1\n\tvpermi2b %%zmm8,%%zmm9,%%zmm1\n\tvmovdqa64 %%zmm10,%%zmm2\n\tvpermi2b %%zmm8,%%zmm9,%%zmm2\n\tvmovdqa64 %%zmm10,%%zmm3\n\tvpermi2b %%zmm8,%%zmm9,%%zmm3\n\t"
    "vmovdqa64 %%zmm10,%%zmm4\n\tvpermi2b %%zmm8,%%zmm9,%%zmm4\n\tvmovdqa64 %%zmm10,%%zmm5\n\tvpermi2b %%zmm8,%%zmm9,%%zmm5\n\tvmovdqa64 %%zmm10,%%zmm6\n\tvpermi2b %%zmm8,%%zmm9,%%zmm6\n\tvmovdqa64 %%zmm10,%%zmm7\n\tvpermi2b %%zmm8,%%zmm9,%%zmm7\n\t":::"xmm0","xmm1","xmm2","xmm3","xmm4","xmm5","xmm6","xmm7"));
  T("vpaddb zmm (8 indep)", 8, __asm__ volatile(
    "vpaddb %%zmm8,%%zmm9,%%zmm0\n\tvpaddb %%zmm8,%%zmm9,%%zmm1\n\tvpaddb %%zmm8,%%zmm9,%%zmm2\n\tvpaddb %%zmm8,%%zmm9,%%zmm3\n\t"
    "vpaddb %%zmm8,%%zmm9,%%zmm4\n\tvpaddb %%zmm8,%%zmm9,%%zmm5\n\tvpaddb %%zmm8,%%zmm9,%%zmm6\n\tvpaddb %%zmm8,%%zmm9,%%zmm7\n\t":::"xmm0","xmm1","xmm2","xmm3","xmm4","xmm5","xmm6","xmm7"));
  T("vpcmpeqb ymm->ymm (8 indep)", 8, __asm__ volatile(
    "vpcmpeqb %%ymm8,%%ymm9,%%ymm0\n\tvpcmpeqb %%ymm8,%%ymm9,%%ymm1\n\tvpcmpeqb %%ymm8,%%ymm9,%%ymm2\n\tvpcmpeqb %%ymm8,%%ymm9,%%ymm3\n\t"
    "vpcmpeqb %%ymm8,%%ymm9,%%ymm4\n\tvpcmpeqb %%ymm8,%%ymm9,%%ymm5\n\tvpcmpeqb %%ymm8,%%ymm9,%%ymm6\n\tvpcmpeqb %%ymm8,%%ymm9,%%ymm7\n\t":::"xmm0","xmm1","xmm2","xmm3","xmm4","xmm5","xmm6","xmm7"));
  T("vpblendvb ymm (8 indep)", 8, __asm__ volatile(
    "vpblendvb %%ymm10,%%ymm8,%%ymm9,%%ymm0\n\tvpblendvb %%ymm10,%%ymm8,%%ymm9,%%ymm1\n\tvpblendvb %%ymm10,%%ymm8,%%ymm9,%%ymm2\n\tvpblendvb %%ymm10,%%ymm8,%%ymm9,%%ymm3\n\t"
    "vpblendvb %%ymm10,%%ymm8,%%ymm9,%%ymm4\n\tvpblendvb %%ymm10,%%ymm8,%%ymm9,%%ymm5\n\tvpblendvb %%ymm10,%%ymm8,%%ymm9,%%ymm6\n\tvpblendvb %%ymm10,%%ymm8,%%ymm9,%%ymm7\n\t":::"xmm0","xmm1","xmm2","xmm3","xmm4","xmm5","xmm6","xmm7"));
  T("kmov+korq (4+4)", 8, __asm__ volatile(
    "korq %%k1,%%k2,%%k3\n\tkorq %%k1,%%k2,%%k4\n\tkorq %%k1,%%k2,%%k5\n\tkorq %%k1,%%k2,%%k6\n\t"
    "kandq %%k1,%%k2,%%k3\n\tkandq %%k1,%%k2,%%k4\n\tkandq %%k1,%%k2,%%k5\n\tkandq %%k1,%%k2,%%k6\n\t":::"k3","k4","k5","k6"));
  T("vpshufb zmm (8 indep)", 8, __asm__ volatile(
    "vpshufb %%zmm8,%%zmm9,%%zmm0\n\tvpshufb %%zmm8,%%zmm9,%%zmm1\n\tvpshufb %%zmm8,%%zmm9,%%zmm2\n\tvpshufb %%zmm8,%%zmm9,%%zmm3\n\t"
    "vpshufb %%zmm8,%%zmm9,%%zmm4\n\tvpshufb %%zmm8,%%zmm9,%%zmm5\n\tvpshufb %%zmm8,%%zmm9,%%zmm6\n\tvpshufb %%zmm8,%%zmm9,%%zmm7\n\t":::"xmm0","xmm1","xmm2","xmm3","xmm4","xmm5","xmm6","xmm7"));
  T("scalar mov load (8 indep)", 8, __asm__ volatile(
    "mov 0(%0),%%rax\n\tmov 8(%0),%%rbx\n\tmov 16(%0),%%rcx\n\tmov 24(%0),%%rdx\n\t"
    "mov 32(%0),%%rsi\n\tmov 40(%0),%%rdi\n\tmov 48(%0),%%r8\n\tmov 56(%0),%%r9\n\t"::"r"(p):"rax","rbx","rcx","rdx","rsi","rdi","r8","r9"));
  T("mix: 2 zmm load+1 blend", 3, __asm__ volatile(
    "vmovdqa64 0(%0),%%zmm0\n\tvpblendmb 64(%0),%%zmm0,%%zmm1%{%%k1%}\n\tvmovdqa64 128(%0),%%zmm2\n\tvpblendmb 192(%0),%%zmm2,%%zmm3%{%%k1%}\n\t"
    "vpblendmb %%zmm1,%%zmm3,%%zmm4%{%%k2%}\n\t"::"r"(p):"xmm0","xmm1","xmm2","xmm3","xmm4"));
  return 0;
}
