/* Plugins that go wrong in one way each, for tests/test_plugins.cpp. Built once per variant with
 * OPCTS_BAD_VARIANT set:
 *   1 wrong_abi      speaks only ABI version 99: its entry point refuses version 1
 *   2 duplicate      registers a name a built-in impl has (host.flash)
 *   3 unknown_family registers an impl of a family opcts does not have
 *   4 crash          an sdpa impl whose run dereferences a null pointer
 *   5 scribble       an sdpa impl that writes into its input q, then returns zeros
 *   6 no_entry       exports no entry point at all
 *   7 lazy_cast      a cast impl that writes nothing: its outputs keep the bytes they arrived with
 *   8 crash_init     whose entry point dereferences a null pointer (in the probe process)
 *   9 crash_supports an sdpa impl whose supports() dereferences a null pointer on problems of
 *                    seq_q 4 (testutil::kTinyB) and answers the others, running like scribble
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "opcts/plugin.h"

static int32_t yes(const void* impl, const void* params, const opcts_arch* arch, char* reason, size_t size) {
  const opcts_sdpa_params* p = (const opcts_sdpa_params*)params;
  (void)impl;
  (void)arch;
  if (OPCTS_BAD_VARIANT == 9 && p->seq_q == 4) {
    volatile int* nowhere = (volatile int*)(uintptr_t)(p->seq_q - 4);
    *nowhere = 1;
  }
  if (p->direction != OPCTS_SDPA_FORWARD || p->dtype.bits != 32 || p->attn_mask != OPCTS_SDPA_ATTN_MASK_NONE) {
    snprintf(reason, size, "fp32 forward without attn_mask only");
    return 0;
  }
  return 1;
}

static opcts_status crash(const void* impl, const opcts_run_args* a, opcts_report* r) {
  (void)impl;
  (void)r;
  volatile int* nowhere = (volatile int*)(uintptr_t)(a->n_tensors - a->n_tensors);
  *nowhere = 1;
  return OPCTS_OK;
}

static opcts_status scribble(const void* impl, const opcts_run_args* a, opcts_report* r) {
  (void)impl;
  (void)r;
  for (int32_t i = 0; i < a->n_tensors; ++i) {
    const opcts_tensor* t = &a->tensors[i];
    int64_t n = 1;
    for (int32_t d = 0; d < t->ndim; ++d) n *= t->shape[d];
    if (strcmp(t->name, "q") == 0) ((float*)t->data)[0] += 1.0f;
    if (t->is_output) memset(t->data, 0, (size_t)n * 4);
  }
  return OPCTS_OK;
}

static int32_t any_cast(const void* impl, const void* params, const opcts_arch* arch, char* reason, size_t size) {
  (void)impl;
  (void)params;
  (void)arch;
  (void)reason;
  (void)size;
  return 1;
}

static opcts_status lazy(const void* impl, const opcts_run_args* a, opcts_report* r) {
  (void)impl;
  (void)a;
  (void)r;
  return OPCTS_OK;
}

#if OPCTS_BAD_VARIANT != 6
int32_t opcts_plugin_init(uint32_t abi_version, const opcts_registrar* reg) {
  if (OPCTS_BAD_VARIANT == 1 && abi_version != 99) return 7;
  if (OPCTS_BAD_VARIANT == 8) {
    volatile int* nowhere = (volatile int*)(uintptr_t)(abi_version - OPCTS_PLUGIN_ABI_VERSION);
    *nowhere = 1;
  }
  opcts_impl_desc d = {0};
  d.struct_size = sizeof d;
  d.family = OPCTS_BAD_VARIANT == 3 ? "no_such_family" : OPCTS_BAD_VARIANT == 7 ? "cast" : "sdpa";
  d.name = OPCTS_BAD_VARIANT == 2   ? "host.flash"
           : OPCTS_BAD_VARIANT == 4 ? "bad.crash"
           : OPCTS_BAD_VARIANT == 7 ? "bad.lazy_cast"
           : OPCTS_BAD_VARIANT == 9 ? "bad.crash_supports"
                                    : "bad.scribble";
  d.backend = "host";
  d.supports = OPCTS_BAD_VARIANT == 7 ? any_cast : yes;
  d.run = OPCTS_BAD_VARIANT == 4 ? crash : OPCTS_BAD_VARIANT == 7 ? lazy : scribble;
  char error[256];
  return reg->add_impl(reg->ctx, &d, error, sizeof error) == 0 ? 0 : 3;
}
#endif
