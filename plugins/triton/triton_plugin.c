/* libopcts_triton: the Triton SDPA forward kernel of sdpa_fwd.py, compiled ahead of time by
 * build.sh, registered as the opcts impl triton.sdpa through include/opcts/plugin.h.
 *
 * It takes fp16 and bf16, head dims up to 128 (q, k and v alike), no mask or causal upper-left or
 * lower-right, GQA, BHSD and BSHD; it computes the forward only. Everything else is a SKIP with
 * the reason; heads_q not a multiple of heads_kv is refused (OPCTS_INVALID_ARGUMENT, "heads_kv").
 * The kernel runs on the stream opcts hands it (CUDA driver API, the primary context the opcts
 * worker made current); its modules are loaded on the first run in each process.
 */
#include <cuda.h>
#include <stdio.h>
#include <string.h>

#include "opcts/plugin.h"

#include "triton_launch.h" /* generated: the variants' launchers, sdpa_launch, OPCTS_TRITON_BLOCK_M */

struct sdpa_variant {
  int bf16;
  int head_dim;
  sdpa_launch launch;
  void (*load)(void);
};
#include "triton_variants.h"

enum { kVariants_n = sizeof kVariants / sizeof kVariants[0] };

static int is_dtype(opcts_dtype t, int code, int bits) { return t.code == code && t.bits == bits && t.lanes == 1; }

static const struct sdpa_variant* variant_for(const opcts_sdpa_params* p) {
  const int bf16 = is_dtype(p->dtype, OPCTS_DL_BFLOAT, 16);
  const struct sdpa_variant* best = NULL;
  for (int i = 0; i < kVariants_n; ++i)
    if (kVariants[i].bf16 == bf16 && kVariants[i].head_dim >= p->head_dim &&
        (!best || kVariants[i].head_dim < best->head_dim))
      best = &kVariants[i];
  return best;
}

static int32_t say(char* reason, size_t size, const char* why) {
  snprintf(reason, size, "%s", why);
  return 0;
}

static int32_t supports(const void* data, const void* params, const opcts_arch* arch, char* reason, size_t size) {
  (void)data;
  (void)arch; /* used only when OPCTS_TRITON_CC is known */
  const opcts_sdpa_params* p = (const opcts_sdpa_params*)params;
#if OPCTS_TRITON_CC
  /* The cubins run on the compute capability they were built for; loading them elsewhere would
   * end the worker (the generated loader exits on an error). */
  if (arch->compute_major * 10 + arch->compute_minor != OPCTS_TRITON_CC) {
    snprintf(reason, size, "triton.sdpa was compiled for sm_%d (plugins/triton/build.sh on that GPU)", OPCTS_TRITON_CC);
    return 0;
  }
#endif
  if (p->direction != OPCTS_SDPA_FORWARD) return say(reason, size, "triton.sdpa computes the forward only");
  if (!is_dtype(p->dtype, OPCTS_DL_FLOAT, 16) && !is_dtype(p->dtype, OPCTS_DL_BFLOAT, 16))
    return say(reason, size, "triton.sdpa is compiled for fp16 and bf16");
  if (p->head_dim != p->head_dim_v) return say(reason, size, "triton.sdpa takes one head dim for q, k and v");
  if (!variant_for(p)) return say(reason, size, "triton.sdpa is compiled for head dims up to 128");
  if (p->window_left != -1 || p->window_right != -1) return say(reason, size, "triton.sdpa has no sliding window");
  if (p->softcap != 0) return say(reason, size, "triton.sdpa has no softcap");
  if (p->attn_mask != OPCTS_SDPA_ATTN_MASK_NONE) return say(reason, size, "triton.sdpa takes no attn_mask");
  if (p->batch * p->heads_q * p->seq_q >= ((int64_t)1 << 31))
    return say(reason, size, "triton.sdpa indexes lse with 32-bit offsets (B * Hq * Sq < 2^31)");
  if (p->batch * p->heads_q > 0x7FFFFFFF || (p->seq_q + OPCTS_TRITON_BLOCK_M - 1) / OPCTS_TRITON_BLOCK_M > 65535)
    return say(reason, size, "triton.sdpa's grid is (B * Hq, ceil(Sq / 64)): at most 2^31 - 1 by 65535");
  return 1;
}

static const opcts_tensor* find(const opcts_run_args* a, const char* name) {
  for (int32_t i = 0; i < a->n_tensors; ++i)
    if (strcmp(a->tensors[i].name, name) == 0) return &a->tensors[i];
  return NULL;
}

/* The [B, H, S] strides of a stored BHSD or BSHD tensor, in elements. */
static void bhs_strides(const opcts_tensor* t, int32_t layout, int64_t s[3]) {
  s[0] = t->strides[0];
  s[1] = layout == OPCTS_SDPA_BSHD ? t->strides[2] : t->strides[1];
  s[2] = layout == OPCTS_SDPA_BSHD ? t->strides[1] : t->strides[2];
}

static opcts_status fail(opcts_report* r, opcts_status s, const char* argument, const char* message) {
  snprintf(r->argument, sizeof r->argument, "%s", argument);
  snprintf(r->message, sizeof r->message, "%s", message);
  return s;
}

static opcts_status run(const void* data, const opcts_run_args* a, opcts_report* r) {
  (void)data;
  static int loaded = 0;
  const opcts_sdpa_params* p = (const opcts_sdpa_params*)a->params;
  if (p->heads_kv <= 0 || p->heads_q % p->heads_kv != 0)
    return fail(r, OPCTS_INVALID_ARGUMENT, "heads_kv", "heads_q must be a multiple of heads_kv");
  const opcts_tensor *q = find(a, "q"), *k = find(a, "k"), *v = find(a, "v"), *o = find(a, "O"), *lse = find(a, "lse");
  if (!q || !k || !v || !o || !lse) return fail(r, OPCTS_INTERNAL, "", "missing one of the tensors q, k, v, O, lse");
  const struct sdpa_variant* var = variant_for(p);
  if (!var) return fail(r, OPCTS_UNSUPPORTED, "", "no compiled variant for this dtype and head dim");
  if (!loaded) {
    for (int i = 0; i < kVariants_n; ++i) kVariants[i].load();
    loaded = 1;
  }
  int64_t sq[3], sk[3], sv[3], so[3];
  bhs_strides(q, p->layout, sq);
  bhs_strides(k, p->layout, sk);
  bhs_strides(v, p->layout, sv);
  bhs_strides(o, p->layout, so);
  const int32_t mask = p->mask == OPCTS_SDPA_CAUSAL_UPPER_LEFT ? 1 : p->mask == OPCTS_SDPA_CAUSAL_LOWER_RIGHT ? 2 : 0;
  const int32_t grid_m = (int32_t)((p->seq_q + OPCTS_TRITON_BLOCK_M - 1) / OPCTS_TRITON_BLOCK_M);
  const int32_t grid_bh = (int32_t)(p->batch * p->heads_q);
  /* An empty problem has nothing to write (Sk = 0 is not empty: its rows get O = 0, lse = -inf),
   * and Triton's launcher returns no status for an empty grid. */
  if (grid_m == 0 || grid_bh == 0) return OPCTS_OK;
  const float scale = (float)p->scale;
  int32_t scale_bits;
  memcpy(&scale_bits, &scale, sizeof scale_bits);
  const CUresult rc =
      var->launch((CUstream)a->stream, (CUdeviceptr)q->data, (CUdeviceptr)k->data, (CUdeviceptr)v->data,
                  (CUdeviceptr)o->data, (CUdeviceptr)lse->data, sq[0], sq[1], sq[2], sk[0], sk[1], sk[2], sv[0], sv[1],
                  sv[2], so[0], so[1], so[2], (int32_t)p->heads_q, (int32_t)(p->heads_q / p->heads_kv),
                  (int32_t)p->seq_q, (int32_t)p->seq_k, (int32_t)p->head_dim, scale_bits, mask, grid_m, grid_bh);
  if (rc != CUDA_SUCCESS) {
    const char* what = NULL;
    cuGetErrorString(rc, &what);
    char message[256];
    snprintf(message, sizeof message, "the Triton launcher returned %d (%s)", (int)rc, what ? what : "?");
    return fail(r, OPCTS_INTERNAL, "", message);
  }
  return OPCTS_OK;
}

__attribute__((visibility("default"))) int32_t opcts_plugin_init(uint32_t abi_version, const opcts_registrar* reg) {
  if (abi_version != OPCTS_PLUGIN_ABI_VERSION) return 1;
  static const char* const caps[] = {"mma_sync_bf16"};
  opcts_impl_desc d;
  memset(&d, 0, sizeof d);
  d.struct_size = sizeof d;
  d.family = "sdpa";
  d.name = "triton.sdpa";
  d.backend = "cuda";
  d.caps = caps;
  d.n_caps = 1;
  d.supports = supports;
  d.run = run;
  char error[256] = {0};
  if (reg->add_impl(reg->ctx, &d, error, sizeof error) != 0) {
    fprintf(stderr, "libopcts_triton: triton.sdpa not registered: %s\n", error);
    return 1;
  }
  return 0;
}
