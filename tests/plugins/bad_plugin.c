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
 *  10 unstable       an fp32 scatter_add impl that claims determinism and sums each destination's
 *                    terms forwards on one call and backwards on the next: every result is
 *                    within its bound, but two runs give other bytes (only --bitwise sees it)
 *  11 replay_cache   an fp32 scatter_add impl that keeps its last result with its problem and the
 *                    addresses of its src and out buffers and, called again there, copies the kept
 *                    result out instead of computing: a result computed at capture and replayed
 *                    (only --capture, which refills the same buffers, sees it)
 *  12 tactics        an fp32 scatter_add impl with three tactics (ABI 1.11): "forwards" (right),
 *                    "drops_last" (loses each row's last update: a fast-but-wrong tactic) and
 *                    "absent" (OPCTS_TACTIC_UNAVAILABLE: a SKIP)
 *  13 tactic_names   the same impl listing "forwards" and "Not-A-Name" (its cases are ERRORs)
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
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

static int32_t fp32_scatter(const void* impl, const void* params, const opcts_arch* arch, char* reason, size_t size) {
  const opcts_scatter_add_params* p = (const opcts_scatter_add_params*)params;
  (void)impl;
  (void)arch;
  if (p->dtype.code != OPCTS_DL_FLOAT || p->dtype.bits != 32) {
    snprintf(reason, size, "fp32 only");
    return 0;
  }
  return 1;
}

static int32_t claims_determinism(const void* impl, const void* params) {
  (void)impl;
  (void)params;
  return 1;
}

static const opcts_tensor* tensor_named(const opcts_run_args* a, const char* name) {
  for (int32_t i = 0; i < a->n_tensors; ++i)
    if (strcmp(a->tensors[i].name, name) == 0) return &a->tensors[i];
  return NULL;
}

/* out = self; out[o, index[o, j, k], k] += src[o, j, k], over j forwards or backwards
 * (contiguous tensors, as opcts passes them). */
static opcts_status scatter(const opcts_run_args* a, opcts_report* r, int forwards) {
  const opcts_scatter_add_params* p = (const opcts_scatter_add_params*)a->params;
  const opcts_tensor *self = tensor_named(a, "self"), *src = tensor_named(a, "src"), *index = tensor_named(a, "index"),
                     *out = tensor_named(a, "out");
  if (!self || !src || !index || !out) {
    snprintf(r->message, sizeof r->message, "missing one of the tensors self, src, index, out");
    return OPCTS_INTERNAL;
  }
  const int wide = p->index.bits == 64;
  for (int64_t e = 0; e < p->outer * p->m * p->inner; ++e) {
    const int64_t t = wide ? ((const int64_t*)index->data)[e] : ((const int32_t*)index->data)[e];
    if (t < 0 || t >= p->n) {
      snprintf(r->argument, sizeof r->argument, "index");
      snprintf(r->message, sizeof r->message, "index %lld outside [0, %lld)", (long long)t, (long long)p->n);
      return OPCTS_INVALID_ARGUMENT;
    }
  }
  float* y = (float*)out->data;
  const float* x = (const float*)src->data;
  memcpy(y, self->data, (size_t)(p->outer * p->n * p->inner) * sizeof(float));
  for (int64_t o = 0; o < p->outer; ++o)
    for (int64_t jj = 0; jj < p->m; ++jj) {
      const int64_t j = forwards ? jj : p->m - 1 - jj;
      for (int64_t k = 0; k < p->inner; ++k) {
        const int64_t e = (o * p->m + j) * p->inner + k;
        const int64_t t = wide ? ((const int64_t*)index->data)[e] : ((const int32_t*)index->data)[e];
        y[(o * p->n + t) * p->inner + k] += x[e];
      }
    }
  return OPCTS_OK;
}

/* Forwards on odd calls, backwards on even ones. */
static opcts_status unstable_scatter(const void* impl, const opcts_run_args* a, opcts_report* r) {
  static int calls = 0;
  (void)impl;
  return scatter(a, r, ++calls % 2);
}

/* Forwards, but a call with the problem and the src and out buffers of the last call returns
 * that call's result. */
static opcts_status replay_cache(const void* impl, const opcts_run_args* a, opcts_report* r) {
  static const void *kept_src = NULL, *kept_out = NULL;
  static float* kept = NULL;
  static opcts_scatter_add_params kept_params;
  const opcts_scatter_add_params* p = (const opcts_scatter_add_params*)a->params;
  const opcts_tensor *src = tensor_named(a, "src"), *out = tensor_named(a, "out");
  (void)impl;
  const size_t bytes = (size_t)(p->outer * p->n * p->inner) * sizeof(float);
  if (kept && src && out && src->data == kept_src && out->data == kept_out &&
      memcmp(p, &kept_params, sizeof kept_params) == 0) {
    memcpy(out->data, kept, bytes);
    return OPCTS_OK;
  }
  const opcts_status s = scatter(a, r, 1);
  if (s != OPCTS_OK) return s;
  free(kept);
  kept = (float*)malloc(bytes ? bytes : 1);
  if (!kept) return OPCTS_OK;
  memcpy(kept, out->data, bytes);
  kept_src = src->data;
  kept_out = out->data;
  memcpy(&kept_params, p, sizeof kept_params);
  return OPCTS_OK;
}

/* Variants 12 and 13: the tactics. */
static int32_t list_tactics(const void* impl, const void* params, char* names, size_t size) {
  (void)impl;
  (void)params;
  const char* list = OPCTS_BAD_VARIANT == 12 ? "forwards\ndrops_last\nabsent" : "forwards\nNot-A-Name";
  snprintf(names, size, "%s", list);
  return OPCTS_BAD_VARIANT == 12 ? 3 : 2;
}

static opcts_status tactic_scatter(const void* impl, const opcts_run_args* a, opcts_report* r) {
  (void)impl;
  const char* t = a->struct_size >= sizeof(opcts_run_args) ? a->tactic : NULL;
  if (!t) {
    snprintf(r->message, sizeof r->message, "no tactic handed to run");
    return OPCTS_INTERNAL;
  }
  if (strcmp(t, "absent") == 0) {
    snprintf(r->message, sizeof r->message, "this machine offers no such tactic");
    return OPCTS_TACTIC_UNAVAILABLE;
  }
  const opcts_status s = scatter(a, r, 1);
  if (s != OPCTS_OK || strcmp(t, "drops_last") != 0) return s;
  /* Take back each outer row's last update (j = m - 1). */
  const opcts_scatter_add_params* p = (const opcts_scatter_add_params*)a->params;
  const opcts_tensor *src = tensor_named(a, "src"), *index = tensor_named(a, "index"), *out = tensor_named(a, "out");
  const int wide = p->index.bits == 64;
  for (int64_t o = 0; o < p->outer && p->m > 0; ++o)
    for (int64_t k = 0; k < p->inner; ++k) {
      const int64_t e = (o * p->m + p->m - 1) * p->inner + k;
      const int64_t d = wide ? ((const int64_t*)index->data)[e] : ((const int32_t*)index->data)[e];
      ((float*)out->data)[(o * p->n + d) * p->inner + k] -= ((const float*)src->data)[e];
    }
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
  d.family = OPCTS_BAD_VARIANT == 3    ? "no_such_family"
             : OPCTS_BAD_VARIANT == 7  ? "cast"
             : OPCTS_BAD_VARIANT == 10 ? "scatter_add"
             : OPCTS_BAD_VARIANT >= 10 ? "scatter_add"
                                       : "sdpa";
  d.name = OPCTS_BAD_VARIANT == 2    ? "host.flash"
           : OPCTS_BAD_VARIANT == 4  ? "bad.crash"
           : OPCTS_BAD_VARIANT == 7  ? "bad.lazy_cast"
           : OPCTS_BAD_VARIANT == 9  ? "bad.crash_supports"
           : OPCTS_BAD_VARIANT == 10 ? "bad.unstable_scatter"
           : OPCTS_BAD_VARIANT == 11 ? "bad.replay_cache"
           : OPCTS_BAD_VARIANT >= 12 ? "bad.tactics"
                                     : "bad.scribble";
  d.backend = "host";
  d.supports = OPCTS_BAD_VARIANT == 7 ? any_cast : OPCTS_BAD_VARIANT >= 10 ? fp32_scatter : yes;
  d.run = OPCTS_BAD_VARIANT == 4    ? crash
          : OPCTS_BAD_VARIANT == 7  ? lazy
          : OPCTS_BAD_VARIANT == 10 ? unstable_scatter
          : OPCTS_BAD_VARIANT == 11 ? replay_cache
          : OPCTS_BAD_VARIANT >= 12 ? tactic_scatter
                                    : scribble;
  if (OPCTS_BAD_VARIANT >= 12) d.list_tactics = list_tactics;
  if (OPCTS_BAD_VARIANT >= 10) d.deterministic = claims_determinism;
  char error[256];
  return reg->add_impl(reg->ctx, &d, error, sizeof error) == 0 ? 0 : 3;
}
#endif
