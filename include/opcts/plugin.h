/* The opcts plugin ABI: how a shared library hands implementations (impls) to opcts.
 *
 * A plugin exports one function, OPCTS_PLUGIN_ENTRY ("opcts_plugin_init"), which opcts calls
 * once after dlopen with the ABI version it speaks and a registrar. The plugin checks the
 * version (return non-zero to refuse) and adds one opcts_impl_desc per impl. opcts then treats
 * those impls like built-in ones: they appear in `opcts list`, are judged by the same
 * references, tolerances and manifests, and are reported in JUnit and the gate.
 *
 * Only C types cross this boundary. Every struct starts with its size in bytes so that a later
 * minor version can append fields; the major version (OPCTS_PLUGIN_ABI_VERSION) changes when a
 * field changes meaning or moves. The built-in CUDA impls use these same structs.
 *
 * Tensors are DLPack-style descriptors: a data pointer (device memory for "cuda" and "hip"
 * impls, host memory for "host" impls), a dtype in DLPack's (code, bits, lanes) form, a shape
 * and strides in ELEMENTS (not bytes), exactly as opcts stores the tensor. Sub-byte types
 * declare their packing. Inputs must not be written; outputs arrive filled with NaN bytes
 * (0xFF), so an element an impl skips cannot pass. Every output lies between guard bytes (256
 * before, 256 after; -0.0 in every element slot for float dtypes, 0x5A bytes otherwise): a run
 * that writes any of them fails, naming the offset. Work goes on the stream in opcts_run_args
 * (a cudaStream_t / hipStream_t that is NOT the legacy default stream); opcts synchronises it.
 * `run` enqueues and returns without waiting for that stream: opcts holds it until run returns
 * (2 s at most; a run that waits for it loses that time, and its case the stream check). Inputs
 * are on the device before `run` is called. Make library handles (cuBLAS, cuDNN, ...) in
 * OPCTS_PLUGIN_ENTRY, which every worker process calls, not in `run` (where a first use waits
 * on the held stream) nor in `supports`, which runs in the parent process, not where `run` runs.
 *
 * Which tensors a family passes, their names, shapes and dtypes, and what its parameter struct
 * means: docs/plugins.md, and the comments on each opcts_<family>_params below.
 */
#ifndef OPCTS_PLUGIN_H
#define OPCTS_PLUGIN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define OPCTS_PLUGIN_ABI_VERSION 1u
/* The minor version: what a later header appended (docs/plugins.md, "ABI versions"). 1: sdpa's
 * varlen (THD) layout; 2: sdpa's paged KV cache; 3: sdpa's varlen padding rows with seqused_k; 4:
 * sdpa's chunked-local attention (opcts_sdpa_params.attention_chunk); 5: sdpa's attention sinks
 * (opcts_sdpa_params.sinks); 6: sdpa's ALiBi (opcts_sdpa_params.alibi); 7: sdpa's dbias and
 * attn_mask broadcast over the queries (opcts_sdpa_params.dbias, mask_query_broadcast); 8: sdpa's
 * block-sparse masks (opcts_sdpa_params.block_mask_q, block_mask_k); 9: sdpa's fp8 attention and
 * fp8 KV caches (opcts_sdpa_params.fp8, fp8_format, descale); 10: the invariance contracts
 * (opcts_impl_desc.invariance; no new problems); 11: tactics (opcts_impl_desc.list_tactics,
 * opcts_run_args.tactic); 12: the invariance axes OPCTS_INVARIANT_PACKING and _TACTIC (no new
 * problems). An
 * impl sets opcts_impl_desc.abi_minor to the minor it handles; opcts gives it no problem that needs
 * a later one (a SKIP naming the version). */
#define OPCTS_PLUGIN_ABI_MINOR 12u
#define OPCTS_PLUGIN_ENTRY "opcts_plugin_init"

/* ---- Status ------------------------------------------------------------------------------ */

typedef enum opcts_status {
  OPCTS_OK = 0,
  /* The impl refuses an argument (a negative case's right answer): set `argument` to its name
   * ("heads_kv", "K", "a_scale", ...) and say why in `message`. */
  OPCTS_INVALID_ARGUMENT = 1,
  /* The impl (or its library) cannot run this valid problem: `message` says why. */
  OPCTS_UNSUPPORTED = 2,
  /* Anything else that went wrong (a failed allocation, a library error). */
  OPCTS_INTERNAL = 3,
  /* ABI 1.11: the case's tactic (opcts_run_args.tactic) is one the impl listed for the problem
   * but cannot run here (its library's heuristic offers fewer algorithms on this device): the
   * case is a SKIP quoting `message`. */
  OPCTS_TACTIC_UNAVAILABLE = 4
} opcts_status;

/* What a run callback reports besides its status: fixed buffers opcts owns. */
typedef struct opcts_report {
  char argument[64]; /* OPCTS_INVALID_ARGUMENT: the argument's name, NUL-terminated */
  char message[512]; /* any status: a human-readable explanation, NUL-terminated */
} opcts_report;

/* ---- Tensors ----------------------------------------------------------------------------- */

/* DLPack's DLDataTypeCode (dlpack.h v1.1) where it has the type. */
enum {
  OPCTS_DL_INT = 0,
  OPCTS_DL_UINT = 1,
  OPCTS_DL_FLOAT = 2,
  OPCTS_DL_BFLOAT = 4,
  OPCTS_DL_BOOL = 6,
  OPCTS_DL_FLOAT8_E4M3FN = 10,
  OPCTS_DL_FLOAT8_E4M3FNUZ = 11,
  OPCTS_DL_FLOAT8_E5M2 = 12,
  OPCTS_DL_FLOAT8_E5M2FNUZ = 13,
  OPCTS_DL_FLOAT8_E8M0FNU = 14,
  OPCTS_DL_FLOAT6_E2M3FN = 15,
  OPCTS_DL_FLOAT6_E3M2FN = 16,
  OPCTS_DL_FLOAT4_E2M1FN = 17,
  /* Not in DLPack: the unsigned e4m3 of NVFP4 block scales (OCP e4m3fn without the sign). */
  OPCTS_DL_OPCTS_UE4M3 = 200
};

typedef struct opcts_dtype {
  uint8_t code;   /* OPCTS_DL_* */
  uint8_t bits;   /* 64, 32, 16, 8, 6 (one per byte, low 6 bits), 4 */
  uint16_t lanes; /* always 1 */
} opcts_dtype;

/* How sub-byte elements sit in bytes. */
enum {
  OPCTS_PACKING_NONE = 0,             /* one element per byte or more */
  OPCTS_PACKING_NIBBLES_LOW_FIRST = 1 /* two 4-bit elements per byte, element 2i in the low nibble */
};

typedef struct opcts_tensor {
  const char* name; /* "q", "k", "O", "a_scale", ...: the family's names (docs/plugins.md) */
  void* data;       /* device memory for cuda/hip impls, host memory for host impls */
  opcts_dtype dtype;
  int32_t ndim;
  const int64_t* shape;   /* ndim extents */
  const int64_t* strides; /* ndim strides in elements */
  int32_t packing;        /* OPCTS_PACKING_* */
  int32_t is_output;      /* 1: the impl writes it (filled with 0xFF bytes beforehand) */
} opcts_tensor;

/* ---- Where an impl runs ------------------------------------------------------------------- */

typedef struct opcts_arch {
  uint32_t struct_size;
  const char* name;                     /* "sm90", "gfx942", "host" */
  const char* backend;                  /* "cuda", "hip", "host" */
  int32_t compute_major, compute_minor; /* CUDA compute capability; 0 elsewhere */
  int32_t warp_size;
  int32_t smem_per_block_kib;
  const char* const* caps; /* capability names of cases/archs.yaml */
  int32_t n_caps;
} opcts_arch;

typedef struct opcts_run_args {
  uint32_t struct_size;
  const void* params;    /* the family's parameter struct (opcts_<family>_params) */
  opcts_tensor* tensors; /* inputs then outputs, each named */
  int32_t n_tensors;
  void* stream;   /* cudaStream_t / hipStream_t; NULL for host impls */
  int32_t device; /* GPU ordinal, made current by opcts; -1 on the host */
  const opcts_arch* arch;
  /* ABI 1.11: the case's tactic, one of the names list_tactics gave for this problem; NULL for an
   * impl without list_tactics (or one that listed none). */
  const char* tactic;
} opcts_run_args;

/* ---- An impl ----------------------------------------------------------------------------- */

/* Whether the impl runs a problem on an arch: non-zero = yes; 0 = no, with the reason in
 * `reason` (a SKIP in the report, after the impl's name: "computes the forward only" reads
 * "example.sdpa: computes the forward only"). Called in the parent process, never in the worker
 * that calls `run`; must not touch the device beyond queries. */
typedef int32_t (*opcts_supports_fn)(const void* impl_data, const void* params, const opcts_arch* arch, char* reason,
                                     size_t reason_size);
/* Runs the problem on the tensors, on args->stream. */
typedef opcts_status (*opcts_run_fn)(const void* impl_data, const opcts_run_args* args, opcts_report* report);
/* Whether two runs on the same inputs give the same output bytes (`opcts run --bitwise`
 * checks it): non-zero = yes. NULL in the descriptor means always. With list_tactics (ABI
 * 1.11) the claim is held for every tactic of the problem: answer 0 if any tactic reduces in a
 * run-dependent order. */
typedef int32_t (*opcts_deterministic_fn)(const void* impl_data, const void* params);
/* ABI 1.10: the axes of a problem over which the impl's outputs are invariant bit for bit, as a
 * bitmask of OPCTS_INVARIANT_* (`opcts run --invariance` checks them: docs/cli.md).
 * OPCTS_INVARIANT_BATCH_SIZE: an entry of the batch (an sdpa batch entry; a row of A in the
 * GEMMs) gives the same bytes computed alone; OPCTS_INVARIANT_BATCH_POSITION: the same bytes at
 * another position of a batch of the same size; OPCTS_INVARIANT_PACKING (ABI 1.12): the same
 * sequences in the family's other batch layout give the same bytes (sdpa: a dense bhsd/bshd batch
 * packed as varlen sequences with cu_seqlens, a varlen batch of equal lengths as a dense bshd one);
 * OPCTS_INVARIANT_TACTIC (ABI 1.12): every tactic list_tactics gives for the problem gives the same
 * bytes (a split-K or split-KV count, a tile, an algorithm that leaves the result alone).
 * 0, or a NULL callback, declares none. */
enum {
  OPCTS_INVARIANT_BATCH_SIZE = 1,
  OPCTS_INVARIANT_BATCH_POSITION = 2,
  OPCTS_INVARIANT_PACKING = 4,
  OPCTS_INVARIANT_TACTIC = 8
};
typedef uint32_t (*opcts_invariance_fn)(const void* impl_data, const void* params);
/* ABI 1.11: the tactics the impl can run a problem with (a library's algorithms, a kernel's
 * variants), its default first: each becomes a case "<case id>/<tactic>" that run receives in
 * opcts_run_args.tactic. Writes the names into `names` separated by '\n' and NUL-terminated
 * (opcts hands OPCTS_TACTIC_NAMES_SIZE bytes) and returns how many; 0 for none (one case without
 * a tactic part), negative on an error (the impl's cases of that problem are ERRORs, quoting what
 * `names` then holds, NUL-terminated, as the reason: write why there, or nothing). A name is 1
 * to 32 of a-z, 0-9 and '_', a letter first, and must depend on the problem only — never on the
 * device — so that case ids are stable: a tactic this device turns out not to offer returns
 * OPCTS_TACTIC_UNAVAILABLE from run. Called in the parent process (a probe), like supports. */
#define OPCTS_TACTIC_NAMES_SIZE 4096
typedef int32_t (*opcts_list_tactics_fn)(const void* impl_data, const void* params, char* names, size_t names_size);

typedef struct opcts_impl_desc {
  uint32_t struct_size;    /* sizeof(opcts_impl_desc) */
  const char* family;      /* "sdpa", "scaled_mm", "cast", ... */
  const char* name;        /* unique over all impls, "<prefix>.<name>": "aten.sdpa_flash", "triton.sdpa";
                              case ids spell it with '.' as '_' (letters, digits, '.', '_' only) */
  const char* backend;     /* "cuda", "hip" or "host": the archs it runs on */
  const char* const* caps; /* capabilities it needs on every problem (cases/archs.yaml) */
  int32_t n_caps;
  int32_t planted; /* 1: a deliberately wrong impl that must FAIL (docs/architecture.md) */
  opcts_supports_fn supports;
  opcts_run_fn run;
  opcts_deterministic_fn deterministic; /* may be NULL */
  const void* impl_data;                /* handed back to the callbacks */
  /* ABI 1.1: the minor version whose problems the impl handles, written as a number (1 for
   * varlen): OPCTS_PLUGIN_ABI_MINOR would claim whatever a later header adds once rebuilt against
   * it. 0, or a descriptor of ABI 1.0's size, gets only 1.0's problems. */
  uint32_t abi_minor;
  /* ABI 1.10: the axes the outputs are invariant over (above); may be NULL (none). */
  opcts_invariance_fn invariance;
  /* ABI 1.11: the impl's tactics per problem (above); may be NULL (none). */
  opcts_list_tactics_fn list_tactics;
} opcts_impl_desc;

/* What opcts gives the plugin's entry point. add_impl copies the strings it needs; it returns
 * 0, or non-zero with the reason in `error` (a duplicate name, an unknown family, ...). */
typedef struct opcts_registrar {
  uint32_t struct_size;
  void* ctx;
  int32_t (*add_impl)(void* ctx, const opcts_impl_desc* desc, char* error, size_t error_size);
} opcts_registrar;

/* The entry point: return 0 on success; non-zero (e.g. for an ABI version it does not speak)
 * makes opcts refuse the plugin with a message naming it. */
typedef int32_t (*opcts_plugin_init_fn)(uint32_t abi_version, const opcts_registrar* registrar);

/* ---- Family parameter structs -------------------------------------------------------------- */

/* sdpa: scaled dot-product attention, forward (O, lse) or backward (dQ, dK, dV).
 * Tensors (shapes as stored: layout BHSD [B, H, S, D], BSHD [B, S, H, D]; contiguous; THD below):
 *   inputs  q [.., Hq, Sq, Dqk], k [.., Hkv, Sk, Dqk], v [.., Hkv, Sk, Dv] in `dtype`;
 *           attn_mask [B or 1, Hq or 1, Sq, Sk] when attn_mask != NONE (bool: one byte per
 *           element, 1 = attend, dtype {OPCTS_DL_BOOL, 8}; additive: `dtype`, added to the scores);
 *           backward: dO [.., Hq, Sq, Dv]
 *   outputs forward: O [.., Hq, Sq, Dv] in `dtype`, lse [B, Hq, Sq] fp32 (natural log; -inf for a
 *           row that sees no key, where O = 0); backward: dQ, dK, dV shaped as q, k, v.
 * Varlen (layout THD, ABI 1.1): `batch` sequences packed token-major, seq_q / seq_k their largest
 *   lengths (FlashAttention's max_seqlen_q / max_seqlen_k): q [Tq, Hq, Dqk], k [Tk, Hkv, Dqk],
 *   v [Tk, Hkv, Dv], O [Tq, Hq, Dv], dO, dQ, dK, dV likewise, lse [Hq, Tq] fp32; cu_seqlens_q and
 *   cu_seqlens_k int32 [batch + 1] (sequence b is rows [cu[b], cu[b + 1])). Masks, windows and
 *   the lower-right alignment apply per sequence, with its own lengths; no attn_mask. ABI 1.3:
 *   a seqused_k input, int32 [batch] (FlashAttention's), when a sequence's rows of k and v hold
 *   padding after its keys: sequence b's keys are the first seqused_k[b] rows of its segment
 *   [cu_seqlens_k[b], cu_seqlens_k[b + 1]); the padding rows hold NaN, are never read, and their
 *   rows of dK and dV are 0. seq_k is then the largest seqused_k.
 * Paged (layout PAGED, ABI 1.2; FlashAttention's flash_attn_with_kvcache): q, O, lse and
 *   cu_seqlens_q as THD; the keys and values in pages of `page_size` tokens: k_cache
 *   [num_pages, page_size, Hkv, Dqk] (kv_layout NHD) or [num_pages, Hkv, page_size, Dqk] (HND),
 *   v_cache likewise with Dv; block_table int32 [batch, max_pages_per_seq] (sequence b's token j
 *   is slot j % page_size of page block_table[b][j / page_size]; sequences may share pages, a
 *   cached prefix); seqused_k int32 [batch], each
 *   sequence's key count. Forward only. Entries past a sequence's pages, slots past its last
 *   key and pages no sequence owns hold no data a correct kernel reads (opcts puts NaN there).
 * Semantics: families/sdpa/sdpa.hpp (GQA: query head h reads KV head h / (Hq / Hkv); windows are
 * FlashAttention-2's window_size, bottom-right aligned, inclusive, -1 = unbounded). */
enum { OPCTS_SDPA_MASK_NONE = 0, OPCTS_SDPA_CAUSAL_UPPER_LEFT = 1, OPCTS_SDPA_CAUSAL_LOWER_RIGHT = 2 };
enum { OPCTS_SDPA_ATTN_MASK_NONE = 0, OPCTS_SDPA_ATTN_MASK_BOOL = 1, OPCTS_SDPA_ATTN_MASK_ADDITIVE = 2 };
enum { OPCTS_SDPA_BHSD = 0, OPCTS_SDPA_BSHD = 1, OPCTS_SDPA_THD = 2, OPCTS_SDPA_PAGED = 3 };
enum { OPCTS_SDPA_KV_NHD = 0, OPCTS_SDPA_KV_HND = 1 };
enum { OPCTS_SDPA_FORWARD = 0, OPCTS_SDPA_BACKWARD = 1 };
enum { OPCTS_SDPA_ALIBI_NONE = 0, OPCTS_SDPA_ALIBI_PER_HEAD = 1, OPCTS_SDPA_ALIBI_PER_BATCH_HEAD = 2 };
enum { OPCTS_SDPA_FP8_NONE = 0, OPCTS_SDPA_FP8_QKV = 1, OPCTS_SDPA_FP8_KV = 2 };
enum { OPCTS_SDPA_DESCALE_PER_TENSOR = 0, OPCTS_SDPA_DESCALE_PER_HEAD = 1 };
typedef struct opcts_sdpa_params {
  uint32_t struct_size;
  opcts_dtype dtype; /* of q, k, v, O (fp16, bf16, fp32); of O (and q under an fp8 KV cache) with fp8 */
  int64_t batch, heads_q, heads_kv, seq_q, seq_k, head_dim, head_dim_v;
  double scale;                          /* the scale applied to q·k (the default 1/sqrt(head_dim) resolved) */
  int32_t mask;                          /* OPCTS_SDPA_MASK_* */
  int64_t window_left, window_right;     /* -1 = unbounded; < -1 is invalid (refuse it) */
  double softcap;                        /* 0 = off; s = softcap·tanh(s / softcap); < 0 is invalid */
  int32_t attn_mask;                     /* OPCTS_SDPA_ATTN_MASK_* */
  int32_t mask_per_batch, mask_per_head; /* attn_mask's first two dims are B / Hq (1: broadcast) */
  int32_t layout;                        /* OPCTS_SDPA_BHSD / BSHD / THD (ABI 1.1) / PAGED (1.2) */
  int32_t direction;                     /* OPCTS_SDPA_FORWARD / BACKWARD */
  /* ABI 1.2, layout PAGED (0 otherwise): */
  int64_t page_size, num_pages, max_pages_per_seq;
  int32_t kv_layout; /* OPCTS_SDPA_KV_NHD / HND */
  /* ABI 1.4: chunked-local attention (FlashAttention 3's attention_chunk; 0 = off): row i sees only
   * keys of the chunk [⌊a / C⌋·C, ⌊a / C⌋·C + C) holding its position a = i + seq_k − seq_q
   * (per sequence when packed), intersected with the causal mask and the window. */
  int64_t attention_chunk;
  /* ABI 1.5: attention sinks (gpt-oss; FlashAttention 4's learnable_sink, FlashInfer's sink): 1
   * gives an input `sinks`, fp32 [Hq], one logit per query head in the units of the final scores
   * (after scale and softcap, natural log), that joins every row's softmax denominator and holds
   * no value: O_i = Σ_j e^(s_ij)·v_j / (e^(sink_h) + Σ_j e^(s_ij)), lse_i = ln(e^(sink_h) + Σ_j
   * e^(s_ij)) (a row that sees no key: O = 0, lse = sink_h). Backward adds an output `dsinks`,
   * fp32 [Hq]: dsink_h = −Σ_(b,i) e^(sink_h − lse_i)·rowsum(dO_i ⊙ O_i), over every batch entry
   * (sequence) and row of head h; the impl writes all of it (opcts poisons it first). */
  int32_t sinks;
  /* ABI 1.6: ALiBi (Press et al. 2022; FlashAttention-2's alibi_slopes): OPCTS_SDPA_ALIBI_* gives an
   * input `alibi_slopes`, fp32 [Hq] (PER_HEAD) or [batch, Hq] (PER_BATCH_HEAD), and adds
   * −slope·|i + seq_k − seq_q − j| to the score of query i and key j (per sequence when packed),
   * after the scale and the softcap, before the additive mask and the masks. No gradient: the
   * slopes are constants. */
  int32_t alibi;
  /* ABI 1.7: 1 when attn_mask holds one row for every query, [B or 1, Hq or 1, 1, seq_k] (a
   * key-padding mask or a bias per key, broadcast over the queries). */
  int32_t mask_query_broadcast;
  /* ABI 1.7, backward with an additive attn_mask: 1 adds an output `dbias` in `dtype`, shaped as
   * attn_mask: dbias = P ⊙ (dP − rowsum(dO ⊙ O)) (dS before the softcap's derivative: the mask is
   * added after the softcap) summed over the axes the mask broadcasts (batch, heads, queries).
   * The impl writes all of it (opcts poisons it first). */
  int32_t dbias;
  /* ABI 1.8: block-sparse attention (FlexAttention's BlockMask; 0 = off, else both > 0): query rows
   * in blocks of block_mask_q, keys in blocks of block_mask_k, and an input `block_mask`, one byte
   * per element {OPCTS_DL_BOOL, 8}, [batch, Hq, ceil(seq_q / block_mask_q), ceil(seq_k /
   * block_mask_k)]: 1 = the query block reads the key block. A row sees only keys of the blocks its
   * block reads (within the causal mask, the window, the chunk and attn_mask); a block no query
   * block reads holds NaN in k and v. Dense layouts only. */
  int64_t block_mask_q, block_mask_k;
  /* ABI 1.9, forward, every layout: fp8 attention (FlashAttention 3's fp8 forward, cuDNN's fp8
   * SDPA: OPCTS_SDPA_FP8_QKV) or an fp8 KV cache under `dtype` queries (FlashInfer's and vLLM's:
   * OPCTS_SDPA_FP8_KV). q (QKV only), k and v hold codes of fp8_format (e4m3fn or e5m2), with
   * fp32 inputs q_descale (QKV only), k_descale and v_descale, [1] (PER_TENSOR) or [batch,
   * heads_kv] (PER_HEAD, per sequence when packed; q's too is per KV head, as FlashAttention 3's):
   * the value of an element is code·descale of its (batch, KV head). O stays in `dtype`, lse in
   * fp32, unless fp8_out: then O holds e4m3fn codes of O·o_scale (round to nearest, saturating),
   * o_scale an fp32 input [1] (cuDNN's scale_o). */
  int32_t fp8; /* OPCTS_SDPA_FP8_* */
  opcts_dtype fp8_format;
  int32_t descale; /* OPCTS_SDPA_DESCALE_* */
  int32_t fp8_out;
} opcts_sdpa_params;

/* scaled_mm: D[M, N] = out(os · (g · Σ_k deq(A)[m, k] · deq(B)[k, n] + bias[n])), one rounding.
 * A negative case may hand a scale tensor of the wrong shape or dtype: nothing in this struct
 * says so, the impl must find it in the tensor (as a library checking its arguments would).
 * Tensors: a codes [M, K] with strides (lda, 1) when A is row-major, (1, lda) when column-major;
 *   b = Bᵀ codes [N, K], strides (ldb, 1) when B is column-major, (1, ldb) when row-major;
 *   e2m1 codes pack two per byte (OPCTS_PACKING_NIBBLES_LOW_FIRST); a_scale, b_scale in the
 *   recipe's dtype and layout (below); global_scale fp32 [1] (nvfp4); out_scale fp32 [1]
 *   (e4m3fn output); bias [N] in the output dtype; output d [M, N] row-major contiguous.
 * Scale layouts per recipe, for an operand of R rows and K columns: tensorwise fp32 [1];
 *   rowwise fp32 [R]; blockwise 1x128 fp32 [R, ceil(K/128)] strides (1, R); blockwise 128x128 (B
 *   of BLOCKWISE_1X128_128X128) fp32 [ceil(R/128), ceil(K/128)] row-major; mx (e8m0, 1x32) and
 *   nvfp4 (ue4m3, 1x16) in cuBLAS's swizzled 128x4 tiles, or row-major [R, blocks] when
 *   scale_layout says so. Semantics: families/scaled_mm/scaled_mm.hpp. */
enum {
  OPCTS_MM_TENSORWISE = 0,
  OPCTS_MM_ROWWISE = 1,
  OPCTS_MM_BLOCKWISE_1X128_128X128 = 2,
  OPCTS_MM_BLOCKWISE_1X128_1X128 = 3,
  OPCTS_MM_MXFP8 = 4,
  OPCTS_MM_MXFP4 = 5,
  OPCTS_MM_NVFP4 = 6
};
enum { OPCTS_MM_SCALES_SWIZZLED = 0, OPCTS_MM_SCALES_ROW_MAJOR = 1 };
typedef struct opcts_scaled_mm_params {
  uint32_t struct_size;
  int64_t m, n, k;
  opcts_dtype a_elem, b_elem; /* element codes of a and b */
  opcts_dtype out;            /* of d (bf16, fp16, fp32, e4m3fn) */
  int32_t bias;               /* 1: a bias tensor is given */
  int32_t recipe;             /* OPCTS_MM_* */
  int32_t a_row_major;        /* 1: A row-major (K contiguous, "T"); 0: column-major */
  int32_t b_col_major;        /* 1: B column-major (K contiguous, "N"); 0: row-major */
  int64_t lda, ldb;           /* leading dimensions in elements (as the a / b strides say) */
  int32_t scale_layout;       /* OPCTS_MM_SCALES_* (mx and nvfp4 recipes) */
  int32_t mx_rceil;           /* mx recipes: 1 if the scales were chosen by RCEIL, 0 by FLOOR (information only) */
  int32_t fast_accum;         /* 1: the caller allows accumulation without periodic promotion */
} opcts_scaled_mm_params;

/* cast: y = convert(x) element-wise, x of the input dtype to y of the output dtype.
 * Tensors: x [n] (inputs) and y [n] (output), dtypes as the descriptors say. Encoding rounds to
 * nearest even; `satfinite` clamps overflow to ±max, otherwise to Inf (or NaN where the format
 * has no Inf); e8m0 targets round by `e8m0_rounding`. Decoding (a narrow x, fp32 y) is exact. */
enum { OPCTS_E8M0_RNE = 0, OPCTS_E8M0_FLOOR = 1, OPCTS_E8M0_CEIL = 2 };
typedef struct opcts_cast_params {
  uint32_t struct_size;
  opcts_dtype from, to;  /* of x and y */
  int32_t satfinite;     /* 1: saturate to the largest finite value; 0: nonsaturating */
  int32_t e8m0_rounding; /* OPCTS_E8M0_* (e8m0fnu outputs) */
  int64_t n;             /* elements of x and y; 0 is valid (empty tensors: launch nothing) */
} opcts_cast_params;

/* int4_mm: weight-only int4 matmul, y[M, N] = x[M, K] · Ŵᵀ with Ŵ[n, k] the int4 weight
 * dequantized per group of `group_size` consecutive k: tinygemm w = (q − 8)·scale + zero,
 * awq / gptq w = (q − z)·scale, q4_0 w = (q − 8)·d. Tensors (layouts and sources in
 * families/int4_mm/int4_pack.hpp): x [M, K] in `dtype`; weight the packed words as 4-bit codes
 * (dtype {OPCTS_DL_UINT, 4}, OPCTS_PACKING_NIBBLES_LOW_FIRST: the bytes are the buffer a kernel
 * reads; its shape spells the format's layout); scale_and_zero [K/g, N, 2] (tinygemm) or scales
 * [K/g, N] (awq, gptq) in `dtype`; qzeros (awq, gptq) as 4-bit codes [K/g, N/8, 8]; output y
 * [M, N] in `dtype`. A negative case may hand scales or zeros of another group count: the impl
 * must find it in the tensor's shape. */
enum {
  OPCTS_INT4_TINYGEMM = 0,          /* PyTorch _weight_int4pack_mm's tiled packing (CUDA N-tile 8) */
  OPCTS_INT4_TINYGEMM_UNPACKED = 1, /* uint8 [N][K/2], even k in the high nibble */
  OPCTS_INT4_AWQ = 2,
  OPCTS_INT4_GPTQ = 3,
  OPCTS_INT4_Q4_0 = 4
};
typedef struct opcts_int4_mm_params {
  uint32_t struct_size;
  opcts_dtype dtype; /* of x, the scales and y: bf16 or fp16 */
  int64_t m, n, k;
  int64_t group_size;
  int32_t format;        /* OPCTS_INT4_* */
  int32_t inner_k_tiles; /* tinygemm: 2, 4 or 8 */
} opcts_int4_mm_params;

/* The indexing families (semantics: families/indexing/indexing.hpp). Every tensor is the contiguous view
 * [outer, size along dim, inner] of a PyTorch tensor whose middle dimension is the op's dim; n is
 * self's (input's) size along dim, m the index's. Value dtypes fp64, fp32, fp16, bf16, int32,
 * int64; index dtypes int32, int64. out may sit at a base that is 2-byte but not 4-byte aligned
 * (16-bit dtypes): paired 16-bit atomics must not reach the element before or after it (the
 * guard bytes see a +0 added there). An index value outside [0, n) — a negative case: n, -1, or
 * an int64 2^32 + i that a 32-bit narrowing would read as the valid i — must be refused with
 * OPCTS_INVALID_ARGUMENT and argument "index", found in the index tensor by the impl itself
 * (checked before launch, or flagged by its kernel): never garbage, never a dead context.
 * Summation order and precision are the impl's; cases/tolerances.yaml declares each built-in
 * impl's accumulation model (per_add, grouped, once), whose bound the comparison applies. */

/* scatter_add: out = self; out[o, index[o, j, k], k] += src[o, j, k] for every (o, j, k)
 * (self.scatter_add_(dim, index, src)).
 * Tensors: inputs self [outer, n, inner] and src [outer, m, inner] in `dtype`, index
 * [outer, m, inner] in `index`; output out [outer, n, inner] in `dtype`, every element written
 * (self's copy plus the sums: out arrives poisoned, not holding self). */
typedef struct opcts_scatter_add_params {
  uint32_t struct_size;
  opcts_dtype dtype; /* of self, src and out */
  opcts_dtype index; /* of index: int32 or int64 */
  int64_t outer, n, m, inner;
} opcts_scatter_add_params;

/* index_add: out = self; out[o, index[j], k] += alpha * source[o, j, k]
 * (self.index_add_(dim, index, source, alpha=alpha)).
 * Tensors: inputs self [outer, n, inner] and source [outer, m, inner] in `dtype`, index [m] in
 * `index`; output out [outer, n, inner] in `dtype`, every element written. alpha is exact in
 * `dtype` (an integer for integer dtypes). */
typedef struct opcts_index_add_params {
  uint32_t struct_size;
  opcts_dtype dtype; /* of self, source and out */
  opcts_dtype index; /* of index: int32 or int64 */
  int64_t outer, n, m, inner;
  double alpha;
} opcts_index_add_params;

/* index_select: out[o, j, k] = input[o, index[j], k] (torch.index_select(input, dim, index)).
 * Tensors: input [outer, n, inner] in `dtype`, index [m] in `index`; output out
 * [outer, m, inner] in `dtype`, a bit-exact copy. input may hold more than 2^32 elements:
 * offsets need 64 bits. */
typedef struct opcts_index_select_params {
  uint32_t struct_size;
  opcts_dtype dtype; /* of input and out */
  opcts_dtype index; /* of index: int32 or int64 */
  int64_t outer, n, m, inner;
} opcts_index_select_params;

/* grouped_mm: the grouped GEMMs of mixture-of-experts layers (torch._grouped_mm,
 * torch._scaled_grouped_mm), output bf16; semantics, layouts and sources: families/grouped_mm/grouped_mm.hpp.
 * Modes: 2D_3D a [m, K] split along M by offs, b = Bᵀ [G, N, K] → out [m, N]; 3D_3D a [G, M, K],
 *   b [G, N, K] → out [G, M, N] (no offs); 2D_2D a [M, k], b = Bᵀ [N, k], both split along K →
 *   out [G, M, N]; 3D_2D a [G, M, K], b = Bᵀ [n, K] split along N → out [M, n].
 * m (2D_3D), k (2D_2D) and n (3D_2D) are the tensors' extents: the groups' sizes are in offs
 *   alone (int32 [G], cumulative END offsets, group g spanning [offs[g-1], offs[g]), offs[-1] = 0),
 *   and rows (columns) past offs[G-1] must be left untouched (out arrives as 0xFF bytes, NaN;
 *   K past it is never read). A group of zero K (2D_2D) writes zeros.
 * Tensors: a, b (K contiguous; bf16, e4m3fn or, for ROWWISE_FNUZ, e4m3fnuz codes), offs (not for
 *   3D_3D), a_scale and b_scale (ROWWISE and ROWWISE_FNUZ: fp32, per row of A and per column of
 *   B, per group; MXFP8: e8m0 per 32 K elements,
 *   each group's scales in the swizzled 128x4 layout, groups concatenated), out bf16 row-major.
 * A negative case hands defective tensors: refuse with OPCTS_INVALID_ARGUMENT naming "offs"
 *   (length other than `groups`, decreasing, last past the extent, an offset not a multiple of
 *   16 for fp8 K or N splits or of 32 for mxfp8 K splits), "a_scale" / "b_scale" (a scale count
 *   other than the offsets imply), "K" or "N" (not a multiple of 16; mxfp8 K: 32). Check offs
 *   before the scales whose count it fixes. */
enum { OPCTS_GROUPED_2D_3D = 0, OPCTS_GROUPED_3D_3D = 1, OPCTS_GROUPED_2D_2D = 2, OPCTS_GROUPED_3D_2D = 3 };
/* ROWWISE_FNUZ is ROWWISE over gfx942's e4m3fnuz (bias 8, 0x80 the only NaN); an impl refuses
 * (OPCTS_UNSUPPORTED) any recipe it does not know, since later versions may add more. */
enum { OPCTS_GROUPED_BF16 = 0, OPCTS_GROUPED_ROWWISE = 1, OPCTS_GROUPED_MXFP8 = 2, OPCTS_GROUPED_ROWWISE_FNUZ = 3 };
typedef struct opcts_grouped_mm_params {
  uint32_t struct_size;
  int32_t mode;    /* OPCTS_GROUPED_2D_3D ... */
  int32_t recipe;  /* OPCTS_GROUPED_BF16, _ROWWISE, _MXFP8, _ROWWISE_FNUZ */
  int64_t groups;  /* G: the 3-D operand's first dimension; 2D_2D: out's */
  int64_t m, n, k; /* the tensors' extents (above) */
} opcts_grouped_mm_params;

#ifdef __cplusplus
}
#endif

#endif /* OPCTS_PLUGIN_H */
