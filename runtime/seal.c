/*
 * seal.c -- linked into every shared library treecomp writes as a model artifact
 * (treecomp.toolchain.SEAL_UNIT): the seal (TREECOMP_SEAL_MARKER, then the sha256 of the whole
 * file computed with these 32 bytes zeroed, which toolchain.seal writes after linking) and
 * treecomp_verify(), the library checking its own file against the seal it was loaded with.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* dladdr */
#endif
#include <dlfcn.h>
#define TREECOMP_CHECK_IMPLEMENTATION
#include "treecomp.h"

/* volatile: the digest is written into the file after compiling, so the compiler must not
   assume the zeros it was compiled with */
static const volatile unsigned char tc_seal[TREECOMP_SEAL_MARKER_SIZE + 32]
    __attribute__((used, aligned(16))) = TREECOMP_SEAL_MARKER;

__attribute__((visibility("default"))) int32_t treecomp_verify(void) {
  Dl_info info;
  if (!dladdr((const void *)&treecomp_verify, &info) || !info.dli_fname || !info.dli_fname[0])
    return TREECOMP_EIO;
  unsigned char loaded[32];
  for (int i = 0; i < 32; ++i) loaded[i] = tc_seal[TREECOMP_SEAL_MARKER_SIZE + i];
  return treecomp_check_sealed_file_(info.dli_fname, loaded);
}
