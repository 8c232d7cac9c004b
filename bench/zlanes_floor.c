/* The AVX-512 one-row walk with 64 trees in a vector's lanes (quant_impl.c, zlanes) reduced to
 * its memory traffic (bench, not part of the kernel): per 64-tree group, 63 slots of 128 bytes
 * (two 64-byte loads, a two-table byte permute by the first, a saturating subtract from the
 * second, a select into one of eight accumulators: the kernel's per-slot work) and 64 leaf
 * values added one by one in tree order (float32, each from its tree's 256-byte leaf table at
 * an index read from memory, as the kernel's adds). Eight groups: the 500-tree depth-6 model's
 * shape. Each variant runs the slots of G distinct groups (G = 8: 64 KB a row, past a 32 KB
 * first-level cache; G = 1: the same 8 KB eight times) and the leaves of L distinct trees (512:
 * 128 KB; 64: 16 KB), walk and adds together, the walk alone, the adds alone. Cycles per
 * slot (one tree-slot of 64 trees ~ one tree's share of a row) from the thread's CPU time and
 * the core's clock (a dependent add chain: the guest has no cycle counters).
 *   cc -O2 -o /tmp/zlanes_floor bench/zlanes_floor.c && /tmp/zlanes_floor
 * See docs/internals/performance-notes.md ("Single rows: the lanes walk's floor"). */
#include <immintrin.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#define TC_ATTR __attribute__((target("avx512f,avx512bw,avx512vl,avx512vbmi,avx2")))
#define NG 8

static double cpu_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* the core's clock: 80M dependent adds, one cycle each */
static double core_ghz(void) {
  uint64_t x = 1;
  const double t0 = cpu_s();
  for (int64_t i = 0; i < 80000000; ++i) __asm__ volatile("add $1, %0" : "+r"(x));
  return 8e7 / (cpu_s() - t0) / 1e9;
}

static float *lv;
static int64_t ix[NG * 64];

/* n rows; ZG distinct slot groups, walk and / or adds (constants: one function each) */
static inline __attribute__((always_inline)) TC_ATTR float run_(const uint8_t *tab, int zg, long n,
                                                                const int walk, const int adds,
                                                                __m512i *out) {
  const __m512i q0 = _mm512_set1_epi8(3), q1 = _mm512_set1_epi8(5);
  __m512i acc[8];
  for (int i = 0; i < 8; i++) acc[i] = _mm512_setzero_si512();
  float one = 0.0f;
  for (long r = 0; r < n; r++) {
    for (int g = 0; g < NG; g++) {
      const uint8_t *s = tab + 63 * 128 * (g % zg);
      const int64_t *ixp = ix + 64 * g;
      __asm__("" : "+r"(s), "+r"(ixp));
#pragma GCC unroll 64
      for (int k = 0; k < 64; k++) {
        if (walk && k < 63) {
          __m512i x = _mm512_permutex2var_epi8(q0, _mm512_loadu_si512(s + 128 * k), q1);
          x = _mm512_subs_epi8(_mm512_loadu_si512(s + 128 * k + 64), x);
          acc[k & 7] = _mm512_ternarylogic_epi32(acc[k & 7], x, q0, 0xD8);
        }
        if (adds) one += lv[ixp[k]];
      }
    }
  }
  __m512i a = acc[0];
  for (int i = 1; i < 8; i++) a = _mm512_xor_si512(a, acc[i]);
  *out = a;
  return one;
}
static __attribute__((noinline)) TC_ATTR float run_both(const uint8_t *t, int zg, long n, __m512i *o) {
  return run_(t, zg, n, 1, 1, o);
}
static __attribute__((noinline)) TC_ATTR float run_walk(const uint8_t *t, int zg, long n, __m512i *o) {
  return run_(t, zg, n, 1, 0, o);
}
static __attribute__((noinline)) TC_ATTR float run_adds(const uint8_t *t, int zg, long n, __m512i *o) {
  return run_(t, zg, n, 0, 1, o);
}
static float run(const uint8_t *t, int zg, long n, int v, __m512i *o) {
  return v == 0 ? run_both(t, zg, n, o) : v == 1 ? run_walk(t, zg, n, o) : run_adds(t, zg, n, o);
}

int main(void) {
  uint8_t *tab = aligned_alloc(64, 63 * 128 * NG);
  for (int i = 0; i < 63 * 128 * NG; i++) tab[i] = (uint8_t)rand();
  lv = aligned_alloc(64, sizeof(float) * 64 * 512);
  for (int i = 0; i < 64 * 512; i++) lv[i] = 0.0f;
  const double ghz = core_ghz();
  printf("core %.2f GHz; cycles per tree-slot (63 slots + 64 adds per 64-tree group, 8 groups a row)\n", ghz);
  printf("%-36s %8s %8s %8s\n", "slots / leaves", "both", "walk", "adds");
  const int zgs[2] = {8, 1}, lts[2] = {512, 64};
  for (int a = 0; a < 2; a++)
    for (int b = 0; b < 2; b++) {
      srand(7);
      for (int i = 0; i < NG * 64; i++) ix[i] = 64 * (i % lts[b]) + (rand() & 63);
      char name[64];
      snprintf(name, sizeof name, "%d KB slots, %d KB leaves", 8 * zgs[a], lts[b] / 4);
      printf("%-36s", name);
      for (int v = 0; v < 3; v++) {
        __m512i o;
        const long n = 20000;
        run(tab, zgs[a], 200, v, &o);
        double best = 1e30;
        for (int rep = 0; rep < 5; rep++) {
          const double t0 = cpu_s();
          volatile float f = run(tab, zgs[a], n, v, &o);
          (void)f;
          const double t = cpu_s() - t0;
          if (t < best) best = t;
        }
        printf(" %8.2f", best * ghz * 1e9 / ((double)n * NG * 64));
      }
      printf("\n");
    }
  return 0;
}
