/* An example opcts plugin in plain C: CPU impls of sdpa (forward) and scaled_mm (tensorwise and
 * rowwise FP8), registered through include/opcts/plugin.h. It is how docs/plugins.md starts, and
 * CI loads it to prove the ABI end to end:
 *
 *   build/cuda/bin/opcts run --arch host --tier smoke --plugin build/cuda/bin/libopcts_example_plugin.so \
 *       --filter 'sdpa.example_*' --filter 'scaled_mm.example_*'
 *
 * Both impls accumulate in fp32 and round each output once (round to nearest even), as a device
 * kernel would; they refuse invalid arguments themselves (a negative case passes only on such a
 * refusal) and SKIP, with a reason, what they do not implement.
 */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "opcts/plugin.h"

/* ---- numbers ------------------------------------------------------------------------------ */

static float bits_to_float(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}

static uint32_t float_to_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}

static float bf16_to_float(uint16_t h) { return bits_to_float((uint32_t)h << 16); }

static float fp16_to_float(uint16_t h) {
  const uint32_t sign = (uint32_t)(h & 0x8000) << 16, e = (h >> 10) & 0x1f, m = h & 0x3ff;
  if (e == 0x1f) return bits_to_float(sign | 0x7f800000 | (m << 13));
  if (e == 0) return (sign ? -1.0f : 1.0f) * ldexpf((float)m, -24);
  return bits_to_float(sign | ((e + 112) << 23) | (m << 13));
}

/* Round to nearest even. */
static uint16_t float_to_bf16(float f) {
  const uint32_t u = float_to_bits(f);
  if ((u & 0x7fffffff) > 0x7f800000) return 0x7fc0;
  return (uint16_t)((u + 0x7fff + ((u >> 16) & 1)) >> 16);
}

static uint16_t float_to_fp16(float f) {
  const uint32_t u = float_to_bits(f), sign = (u >> 16) & 0x8000, a = u & 0x7fffffff;
  if (a > 0x7f800000) return (uint16_t)(sign | 0x7e00);
  if (a >= 0x477ff000) return (uint16_t)(sign | 0x7c00); /* >= 65520 rounds to inf */
  if (a < 0x38800000) {                                  /* below 2^-14: subnormal, unit 2^-24 */
    const float scaled = bits_to_float(a) * 16777216.0f; /* exact: a power-of-two scaling */
    return (uint16_t)(sign | (uint32_t)nearbyintf(scaled));
  }
  const uint32_t r = a - 0x38000000; /* rebias the exponent by 127 - 15 */
  return (uint16_t)(sign | ((r + 0x0fff + ((r >> 13) & 1)) >> 13));
}

static float e4m3fn_to_float(uint8_t b) {
  const int e = (b >> 3) & 15, m = b & 7;
  const float s = (b & 0x80) ? -1.0f : 1.0f;
  if (e == 15 && m == 7) return NAN;
  if (e == 0) return s * ldexpf((float)m, -9);
  return s * ldexpf(1.0f + (float)m / 8.0f, e - 7);
}

static float e5m2_to_float(uint8_t b) {
  const int e = (b >> 2) & 31, m = b & 3;
  const float s = (b & 0x80) ? -1.0f : 1.0f;
  if (e == 31) return m ? NAN : s * INFINITY;
  if (e == 0) return s * ldexpf((float)m, -16);
  return s * ldexpf(1.0f + (float)m / 4.0f, e - 15);
}

static int is_dtype(opcts_dtype t, int code, int bits) { return t.code == code && t.bits == bits && t.lanes == 1; }

/* Element i of a tensor of fp32, bf16 or fp16 as float. */
static float load(const opcts_tensor* t, int64_t i) {
  if (t->dtype.bits == 32) return ((const float*)t->data)[i];
  const uint16_t h = ((const uint16_t*)t->data)[i];
  return t->dtype.code == OPCTS_DL_BFLOAT ? bf16_to_float(h) : fp16_to_float(h);
}

static void store(const opcts_tensor* t, int64_t i, float x) {
  if (t->dtype.bits == 32) ((float*)t->data)[i] = x;
  else ((uint16_t*)t->data)[i] = t->dtype.code == OPCTS_DL_BFLOAT ? float_to_bf16(x) : float_to_fp16(x);
}

static int64_t numel(const opcts_tensor* t) {
  int64_t n = 1;
  for (int32_t d = 0; d < t->ndim; ++d) n *= t->shape[d];
  return n;
}

static const opcts_tensor* find(const opcts_run_args* a, const char* name) {
  for (int32_t i = 0; i < a->n_tensors; ++i)
    if (strcmp(a->tensors[i].name, name) == 0) return &a->tensors[i];
  return NULL;
}

static opcts_status refuse(opcts_report* r, const char* argument, const char* why) {
  snprintf(r->argument, sizeof r->argument, "%s", argument);
  snprintf(r->message, sizeof r->message, "%s", why);
  return OPCTS_INVALID_ARGUMENT;
}

static int32_t no(char* reason, size_t size, const char* why) {
  snprintf(reason, size, "%s", why);
  return 0;
}

/* ---- sdpa forward ------------------------------------------------------------------------- */

/* A scalar loop costs about a nanosecond a multiply-add on one core: leave the real-model
 * shapes (seconds to minutes each) to faster impls. */
static const double kSdpaMaxWork = 268435456.0; /* 2^28 multiply-adds */

static int32_t sdpa_supports(const void* impl, const void* params, const opcts_arch* arch, char* reason, size_t size) {
  const opcts_sdpa_params* p = (const opcts_sdpa_params*)params;
  (void)impl;
  (void)arch;
  if (p->direction != OPCTS_SDPA_FORWARD) return no(reason, size, "computes the forward only");
  const double work = (double)p->batch * p->heads_q * p->seq_q * p->seq_k * (p->head_dim + p->head_dim_v);
  if (work > kSdpaMaxWork)
    return no(reason, size, "a scalar CPU loop: problems over 2^28 multiply-adds are left to faster impls");
  if (p->seq_k > 4096) return no(reason, size, "a row of scores on the stack: seq_k > 4096 is left to other impls");
  return 1;
}

/* Element offset of (b, h, s) in a stored tensor of `heads`, `seq`, `dim` (BHSD or BSHD); THD
 * (varlen, ABI 1.1, and a paged problem's queries): token `base` + s of the packed [T, heads, dim]
 * tensor, base = cu_seqlens[b]. */
static int64_t at(const opcts_sdpa_params* p, int64_t heads, int64_t seq, int64_t dim, int64_t b, int64_t h, int64_t s,
                  int64_t base) {
  if (p->layout == OPCTS_SDPA_THD || p->layout == OPCTS_SDPA_PAGED) return ((base + s) * heads + h) * dim;
  if (p->layout == OPCTS_SDPA_BSHD) return ((b * seq + s) * heads + h) * dim;
  return ((b * heads + h) * seq + s) * dim;
}

/* cu_seqlens[b] of a varlen problem; b * seq for the dense layouts (unused there). */
static int64_t cu_at(const opcts_tensor* cu, int64_t b, int64_t seq) {
  return cu ? (int64_t)((const int32_t*)cu->data)[b] : b * seq;
}

/* Element offset of key (or value) j of sequence b, KV head hk: paged (ABI 1.2) through the block
 * table, slot j % page_size of page block_table[b][j / page_size] in the NHD or HND cache; else
 * as `at`, from the sequence's first key row k0. */
static int64_t key_at(const opcts_sdpa_params* p, const opcts_tensor* table, int64_t dim, int64_t b, int64_t hk,
                      int64_t j, int64_t k0) {
  if (p->layout != OPCTS_SDPA_PAGED) return at(p, p->heads_kv, p->seq_k, dim, b, hk, j, k0);
  const int64_t page = ((const int32_t*)table->data)[b * p->max_pages_per_seq + j / p->page_size];
  const int64_t slot = j % p->page_size;
  if (p->kv_layout == OPCTS_SDPA_KV_HND) return ((page * p->heads_kv + hk) * p->page_size + slot) * dim;
  return ((page * p->page_size + slot) * p->heads_kv + hk) * dim;
}

static opcts_status sdpa_run(const void* impl, const opcts_run_args* a, opcts_report* r) {
  const opcts_sdpa_params* p = (const opcts_sdpa_params*)a->params;
  (void)impl;
  if (p->heads_kv <= 0 || p->heads_q % p->heads_kv != 0)
    return refuse(r, "heads_kv", "heads_q must be a multiple of heads_kv");
  if (p->window_left < -1) return refuse(r, "window_left", "window_left must be >= -1");
  if (p->window_right < -1) return refuse(r, "window_right", "window_right must be >= -1");
  if (p->softcap < 0) return refuse(r, "softcap", "softcap must be >= 0");
  const int varlen = p->layout == OPCTS_SDPA_THD, paged = p->layout == OPCTS_SDPA_PAGED, packed = varlen || paged;
  const opcts_tensor *q = find(a, "q"), *k = find(a, paged ? "k_cache" : "k"), *v = find(a, paged ? "v_cache" : "v"),
                     *o = find(a, "O"), *lse = find(a, "lse");
  const opcts_tensor* mask = find(a, "attn_mask");
  if (!q || !k || !v || !o || !lse) {
    snprintf(r->message, sizeof r->message, "missing one of the tensors q, k, v, O, lse");
    return OPCTS_INTERNAL;
  }
  const opcts_tensor *cu_q = packed ? find(a, "cu_seqlens_q") : NULL, *cu_k = varlen ? find(a, "cu_seqlens_k") : NULL;
  /* seqused_k: the paged layout's key counts, or (ABI 1.3) a varlen segment's keys before its padding. */
  const opcts_tensor *used = packed ? find(a, "seqused_k") : NULL, *table = paged ? find(a, "block_table") : NULL;
  if (packed && (!cu_q || cu_q->shape[0] != p->batch + 1))
    return refuse(r, "cu_seqlens_q", "must be int32 [batch + 1]");
  if (varlen && (!cu_k || cu_k->shape[0] != p->batch + 1))
    return refuse(r, "cu_seqlens_k", "must be int32 [batch + 1]");
  if (paged && (!used || used->shape[0] != p->batch)) return refuse(r, "seqused_k", "must be int32 [batch]");
  if (paged && (!table || table->shape[0] != p->batch || table->shape[1] != p->max_pages_per_seq))
    return refuse(r, "block_table", "must be int32 [batch, max_pages_per_seq]");
  /* Every boundary checked before any is used: 0 first, non-decreasing, ending at the tokens. */
  for (int w = 0; packed && w < 2; ++w) {
    const opcts_tensor* cu = w ? cu_k : cu_q;
    if (!cu) continue; /* paged: no cu_seqlens_k */
    const int64_t tokens = (w ? k : q)->shape[0];
    int ok = cu_at(cu, 0, 0) == 0 && cu_at(cu, p->batch, 0) == tokens;
    for (int64_t b = 0; ok && b < p->batch; ++b) ok = cu_at(cu, b + 1, 0) >= cu_at(cu, b, 0);
    if (!ok) return refuse(r, w ? "cu_seqlens_k" : "cu_seqlens_q", "not 0, non-decreasing, ending at the tokens");
  }
  /* Each sequence's key count within its segment (varlen) or the table's capacity (paged), and
   * every page it reads a page of the cache. */
  for (int64_t b = 0; used && b < p->batch; ++b) {
    const int64_t n = ((const int32_t*)used->data)[b];
    const int64_t cap = paged ? p->max_pages_per_seq * p->page_size : cu_at(cu_k, b + 1, 0) - cu_at(cu_k, b, 0);
    if (n < 0 || n > cap) return refuse(r, "seqused_k", "a key count past its segment or block table");
    for (int64_t j = 0; paged && j < n; j += p->page_size) {
      const int32_t page = ((const int32_t*)table->data)[b * p->max_pages_per_seq + j / p->page_size];
      if (page < 0 || page >= p->num_pages) return refuse(r, "block_table", "a page index out of range");
    }
  }
  const int64_t Hq = p->heads_q, Hkv = p->heads_kv, D = p->head_dim, Dv = p->head_dim_v;
  const int64_t Tq = packed ? q->shape[0] : 0; /* lse is [Hq, Tq] for varlen and paged */
  const int64_t group = Hq / Hkv;
  float s[4096];
  if (p->seq_k > 4096) {
    snprintf(r->message, sizeof r->message, "seq_k > 4096 is not handled by this example");
    return OPCTS_UNSUPPORTED;
  }
  for (int64_t b = 0; b < p->batch; ++b) {
    /* A varlen sequence's own lengths; the dense layouts' are the problem's. */
    const int64_t q0 = cu_at(cu_q, b, p->seq_q), k0 = cu_at(cu_k, b, p->seq_k);
    const int64_t Sq = packed ? cu_at(cu_q, b + 1, 0) - q0 : p->seq_q, Sk = used     ? ((const int32_t*)used->data)[b]
                                                                            : varlen ? cu_at(cu_k, b + 1, 0) - k0
                                                                                     : p->seq_k;
    if (Sk > 4096) return refuse(r, "cu_seqlens_k", "a sequence longer than max_seqlen_k");
    const int64_t off = Sk - Sq; /* bottom-right alignment of windows and lower-right causal */
    for (int64_t h = 0; h < Hq; ++h)
      for (int64_t i = 0; i < Sq; ++i) {
        int64_t first = 0, last = Sk - 1;
        if (p->window_left >= 0 && i + off - p->window_left > first) first = i + off - p->window_left;
        if (p->mask == OPCTS_SDPA_CAUSAL_UPPER_LEFT && i < last) last = i;
        if (p->mask == OPCTS_SDPA_CAUSAL_LOWER_RIGHT && i + off < last) last = i + off;
        if (p->window_right >= 0 && i + off + p->window_right < last) last = i + off + p->window_right;
        const int64_t qo = at(p, Hq, Sq, D, b, h, i, q0);
        float m = -INFINITY;
        for (int64_t j = 0; j < Sk; ++j) {
          s[j] = -INFINITY;
          if (j < first || j > last) continue;
          int64_t mi = 0;
          if (mask)
            mi = ((p->mask_per_batch ? b : 0) * (p->mask_per_head ? Hq : 1) + (p->mask_per_head ? h : 0)) * Sq * Sk +
                 i * Sk + j;
          if (mask && p->attn_mask == OPCTS_SDPA_ATTN_MASK_BOOL && ((const uint8_t*)mask->data)[mi] == 0) continue;
          const int64_t ko = key_at(p, table, D, b, h / group, j, k0);
          float dot = 0;
          for (int64_t d = 0; d < D; ++d) dot += load(q, qo + d) * load(k, ko + d);
          float x = (float)p->scale * dot;
          if (p->softcap > 0) x = (float)p->softcap * tanhf(x / (float)p->softcap);
          if (mask && p->attn_mask == OPCTS_SDPA_ATTN_MASK_ADDITIVE) x += load(mask, mi);
          s[j] = x;
          if (x > m) m = x;
        }
        float l = 0;
        for (int64_t j = 0; j < Sk; ++j) {
          s[j] = m == -INFINITY || s[j] == -INFINITY ? 0.0f : expf(s[j] - m);
          l += s[j];
        }
        const int64_t oo = at(p, Hq, Sq, Dv, b, h, i, q0);
        for (int64_t d = 0; d < Dv; ++d) {
          float acc = 0;
          if (l > 0)
            for (int64_t j = 0; j < Sk; ++j)
              if (s[j] != 0) acc += s[j] * load(v, key_at(p, table, Dv, b, h / group, j, k0) + d);
          store(o, oo + d, l > 0 ? acc / l : 0.0f);
        }
        const int64_t li = packed ? h * Tq + q0 + i : (b * Hq + h) * Sq + i;
        ((float*)lse->data)[li] = l > 0 ? m + logf(l) : -INFINITY;
      }
  }
  return OPCTS_OK;
}

/* ---- scaled_mm, tensorwise and rowwise FP8 ------------------------------------------------- */

static int32_t mm_supports(const void* impl, const void* params, const opcts_arch* arch, char* reason, size_t size) {
  const opcts_scaled_mm_params* p = (const opcts_scaled_mm_params*)params;
  (void)impl;
  (void)arch;
  if (p->recipe != OPCTS_MM_TENSORWISE && p->recipe != OPCTS_MM_ROWWISE)
    return no(reason, size, "takes the tensorwise and rowwise recipes only");
  for (int w = 0; w < 2; ++w) {
    const opcts_dtype t = w ? p->b_elem : p->a_elem;
    if (!is_dtype(t, OPCTS_DL_FLOAT8_E4M3FN, 8) && !is_dtype(t, OPCTS_DL_FLOAT8_E5M2, 8))
      return no(reason, size, "takes e4m3fn and e5m2 elements only");
  }
  if (!(is_dtype(p->out, OPCTS_DL_FLOAT, 32) || is_dtype(p->out, OPCTS_DL_BFLOAT, 16) ||
        is_dtype(p->out, OPCTS_DL_FLOAT, 16)))
    return no(reason, size, "writes bf16, fp16 or fp32 outputs only");
  if (!p->a_row_major || !p->b_col_major) return no(reason, size, "takes K-major operands only (the TN layout)");
  if ((double)p->m * p->n * p->k > 268435456.0) return no(reason, size, "a scalar CPU loop: over 2^28 multiply-adds");
  return 1;
}

/* Its tactics (ABI 1.11): the K loop in one pass, or in two halves whose fp32 sums are added at
 * the end (split-K, as a GPU kernel hands the halves to two blocks). Either is an fp32 sum of the
 * same products, so one bound judges both; each is a case of its own ("<case id>/k_two_halves"). */
static int32_t mm_list_tactics(const void* impl, const void* params, char* names, size_t size) {
  const opcts_scaled_mm_params* p = (const opcts_scaled_mm_params*)params;
  (void)impl;
  if (p->k < 2) return snprintf(names, size, "k_one_pass") < 0 ? -1 : 1;
  return snprintf(names, size, "k_one_pass\nk_two_halves") < 0 ? -1 : 2;
}

/* The tactic opcts hands run: args->tactic exists from ABI 1.11 (struct_size says), NULL for none. */
static int two_halves(const opcts_run_args* args) {
  if (args->struct_size < offsetof(opcts_run_args, tactic) + sizeof args->tactic || !args->tactic) return 0;
  return strcmp(args->tactic, "k_two_halves") == 0;
}

static opcts_status mm_run(const void* impl, const opcts_run_args* args, opcts_report* r) {
  const opcts_scaled_mm_params* p = (const opcts_scaled_mm_params*)args->params;
  (void)impl;
  const opcts_tensor *a = find(args, "a"), *b = find(args, "b"), *sa = find(args, "a_scale"),
                     *sb = find(args, "b_scale");
  const opcts_tensor *d = find(args, "d"), *bias = find(args, "bias");
  if (!a || !b || !sa || !sb || !d) {
    snprintf(r->message, sizeof r->message, "missing one of the tensors a, b, a_scale, b_scale, d");
    return OPCTS_INTERNAL;
  }
  /* The argument contract of FP8 GEMMs (cuBLASLt, torch._scaled_mm), checked here. */
  if (p->k % 16 != 0) return refuse(r, "K", "K must be a multiple of 16");
  if (p->lda < p->k || p->lda % 16 != 0) return refuse(r, "lda", "lda must be >= K and a multiple of 16");
  if (p->ldb < p->k || p->ldb % 16 != 0) return refuse(r, "ldb", "ldb must be >= K and a multiple of 16");
  const int64_t na = p->recipe == OPCTS_MM_ROWWISE ? p->m : 1, nb = p->recipe == OPCTS_MM_ROWWISE ? p->n : 1;
  if (!is_dtype(sa->dtype, OPCTS_DL_FLOAT, 32)) return refuse(r, "a_scale", "scales must be fp32");
  if (!is_dtype(sb->dtype, OPCTS_DL_FLOAT, 32)) return refuse(r, "b_scale", "scales must be fp32");
  if (numel(sa) != na) return refuse(r, "a_scale", "wrong number of scales");
  if (numel(sb) != nb) return refuse(r, "b_scale", "wrong number of scales");
  const uint8_t *A = (const uint8_t*)a->data, *B = (const uint8_t*)b->data;
  const float *SA = (const float*)sa->data, *SB = (const float*)sb->data;
  const int a5 = a->dtype.code == OPCTS_DL_FLOAT8_E5M2, b5 = b->dtype.code == OPCTS_DL_FLOAT8_E5M2;
  const int64_t half = two_halves(args) ? p->k / 2 : p->k;
  for (int64_t i = 0; i < p->m; ++i)
    for (int64_t j = 0; j < p->n; ++j) {
      float acc = 0, rest = 0; /* products of two 8-bit codes are exact in fp32; each sum is rounded at each step */
      for (int64_t kk = 0; kk < p->k; ++kk) {
        const float x = a5 ? e5m2_to_float(A[i * p->lda + kk]) : e4m3fn_to_float(A[i * p->lda + kk]);
        const float y = b5 ? e5m2_to_float(B[j * p->ldb + kk]) : e4m3fn_to_float(B[j * p->ldb + kk]);
        if (kk < half) acc += x * y;
        else rest += x * y;
      }
      if (half < p->k) acc += rest;
      float out = acc * (SA[na == 1 ? 0 : i] * SB[nb == 1 ? 0 : j]);
      if (bias) out += load(bias, j);
      store(d, i * p->n + j, out);
    }
  return OPCTS_OK;
}

/* ---- registration ------------------------------------------------------------------------- */

/* Both impls compute each output row alone, in a fixed order, whatever the batch around it: they
 * declare the invariance contracts (ABI 1.10), which `opcts run --invariance` checks by running a
 * batch entry (an sdpa batch entry, a row of A) alone and the batch reversed. */
static uint32_t invariant(const void* impl, const void* params) {
  (void)impl;
  (void)params;
  return OPCTS_INVARIANT_BATCH_SIZE | OPCTS_INVARIANT_BATCH_POSITION;
}

int32_t opcts_plugin_init(uint32_t abi_version, const opcts_registrar* reg) {
  if (abi_version != OPCTS_PLUGIN_ABI_VERSION) return 1; /* built for another ABI */
  opcts_impl_desc sdpa = {0};
  sdpa.struct_size = sizeof sdpa;
  sdpa.family = "sdpa";
  sdpa.name = "example.sdpa";
  sdpa.backend = "host";
  sdpa.supports = sdpa_supports;
  sdpa.run = sdpa_run;
  sdpa.abi_minor = 3; /* varlen (ABI 1.1), the paged cache (1.2), varlen padding rows (1.3) */
  sdpa.invariance = invariant;
  opcts_impl_desc mm = sdpa;
  mm.abi_minor = 0;
  mm.family = "scaled_mm";
  mm.name = "example.scaled_mm";
  mm.supports = mm_supports;
  mm.run = mm_run;
  mm.list_tactics = mm_list_tactics;
  char error[256];
  if (reg->add_impl(reg->ctx, &sdpa, error, sizeof error) != 0) return 2;
  if (reg->add_impl(reg->ctx, &mm, error, sizeof error) != 0) return 2;
  return 0;
}
