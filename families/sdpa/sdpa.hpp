// SDPA forward and backward: the problem type, its id and YAML forms, and the fp64 /
// same-precision references.
//
// Semantics (PyTorch scaled_dot_product_attention docs, FlashAttention-2 flash_attn_func; the same
// contract as families/sdpa/cuda/sdpa_kernels.hpp):
// s = scale·q_i·k_j; softcap > 0 gives s = softcap·tanh(s/softcap); an additive mask is
// added; keys outside the causal mask, the window or a boolean mask get s = -inf;
// O = softmax(s)·V per (batch, query head); query head h reads KV head h / (Hq/Hkv) (GQA,
// PyTorch enable_gqa). logsumexp is the natural log of Σ_j exp(s_ij) over the keys row i
// sees, fp32, [B, Hq, Sq]. A row that sees no key gives O = 0 and logsumexp = -inf
// (PyTorch ≥ 2.5 _safe_softmax, FlashAttention-3) and zero gradients.
// Window: FlashAttention-2's window_size (left, right), bottom-right aligned, inclusive:
// keeps j ∈ [i + Sk − Sq − left, i + Sk − Sq + right]; −1 = unbounded; intersects with the
// causal mask. cuDNN's left bound is left + 1 (cudnn-frontend test/python/test_mhas.py).
// Backward (direction backward): inputs q, k, v, dO; outputs dQ, dK, dV from
// dP = dO·Vᵀ, dS = P ⊙ (dP − rowsum(dO ⊙ O)), dQ = scale·dS·K, dK = scale·dSᵀ·Q,
// dV = Pᵀ·dO (FlashAttention-2, Dao 2023, Algorithm 2), with GQA heads summed into dK, dV.
// Layout: logical Q [B, Hq, Sq, Dqk]; K [B, Hkv, Sk, Dqk]; V [B, Hkv, Sk, Dv];
// O [B, Hq, Sq, Dv]; stored BHSD, or BSHD ([B, S, H, D]) when layout is bshd.
// Varlen (layout varlen; FlashAttention-2 flash_attn_varlen_func, FlashInfer's ragged
// prefill, cuDNN's ragged offsets): B sequences of their own lengths Sq_b, Sk_b packed
// token-major (THD): Q [Tq, Hq, Dqk], K [Tk, Hkv, Dqk], V [Tk, Hkv, Dv], O [Tq, Hq, Dv] with
// Tq = Σ Sq_b, Tk = Σ Sk_b; sequence b holds tokens [cu_seqlens_q[b], cu_seqlens_q[b + 1]) of
// Q (int32 [B + 1], exclusive prefix sums; likewise cu_seqlens_k); logsumexp [Hq, Tq]
// (FlashAttention-2's varlen softmax_lse). Each sequence is its own attention problem: the
// masks, windows and alignments above apply with its own Sq_b and Sk_b (lower-right causal
// per sequence), and no sequence sees another's keys. seq_q and seq_k are the largest
// lengths (FlashAttention's max_seqlen_q, max_seqlen_k).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/abi_enum.hpp"
#include "core/errors.hpp"
#include "core/family.hpp"
#include "core/fields.hpp"
#include "include/opcts/plugin.h"

namespace opcts::sdpa {

// The problem's enumerations are valued by the ABI's constants (opcts_sdpa_params), each with its
// one name table (YAML name, id token; "" leaves the default out of ids); the kernels' SdpaMask
// and SdpaMaskTensor are spelled with the same constants.
enum class Mask : int32_t {
  none = OPCTS_SDPA_MASK_NONE,
  causal_upper_left = OPCTS_SDPA_CAUSAL_UPPER_LEFT,  // keep j <= i (PyTorch is_causal)
  causal_lower_right =
      OPCTS_SDPA_CAUSAL_LOWER_RIGHT,  // keep j <= i + Sk - Sq (FlashAttention-2 causal, cuDNN BOTTOM_RIGHT)
};
inline constexpr std::array<EnumName<Mask>, 3> kMaskNames{{
    {Mask::none, "none", "nomask"},
    {Mask::causal_upper_left, "causal_upper_left", "causal_ul"},
    {Mask::causal_lower_right, "causal_lower_right", "causal_lr"},
}};
constexpr const auto& enum_names(Mask) { return kMaskNames; }
constexpr std::string_view to_string(Mask m) { return enum_name(m); }

/// An explicit attn_mask input: boolean (true = attend) or additive (in the input dtype). The id
/// token is the prefix the attn_mask field adds b and h to.
enum class MaskTensor : int32_t {
  none = OPCTS_SDPA_ATTN_MASK_NONE,
  boolean = OPCTS_SDPA_ATTN_MASK_BOOL,
  additive = OPCTS_SDPA_ATTN_MASK_ADDITIVE,
};
inline constexpr std::array<EnumName<MaskTensor>, 3> kMaskTensorNames{{
    {MaskTensor::none, "none", ""},
    {MaskTensor::boolean, "bool", "bmask"},
    {MaskTensor::additive, "additive", "amask"},
}};
constexpr const auto& enum_names(MaskTensor) { return kMaskTensorNames; }
constexpr std::string_view to_string(MaskTensor m) { return enum_name(m); }

enum class Layout : int32_t {
  bhsd = OPCTS_SDPA_BHSD,
  bshd = OPCTS_SDPA_BSHD,
  varlen = OPCTS_SDPA_THD,
  paged = OPCTS_SDPA_PAGED
};
inline constexpr std::array<EnumName<Layout>, 4> kLayoutNames{{{Layout::bhsd, "bhsd", ""},
                                                               {Layout::bshd, "bshd", "bshd"},
                                                               {Layout::varlen, "varlen", "varlen"},
                                                               {Layout::paged, "paged", "paged"}}};
constexpr const auto& enum_names(Layout) { return kLayoutNames; }
constexpr std::string_view to_string(Layout l) { return enum_name(l); }

enum class Direction : int32_t { forward = OPCTS_SDPA_FORWARD, backward = OPCTS_SDPA_BACKWARD };
inline constexpr std::array<EnumName<Direction>, 2> kDirectionNames{
    {{Direction::forward, "forward", ""}, {Direction::backward, "backward", "bwd"}}};
constexpr const auto& enum_names(Direction) { return kDirectionNames; }
constexpr std::string_view to_string(Direction d) { return enum_name(d); }

/// The order of a page of the paged KV cache: [page_size, Hkv, D] (FlashAttention's
/// flash_attn_with_kvcache, FlashInfer's NHD) or [Hkv, page_size, D] (FlashInfer's HND, vLLM's
/// value cache).
enum class KvLayout : int32_t { nhd = OPCTS_SDPA_KV_NHD, hnd = OPCTS_SDPA_KV_HND };
inline constexpr std::array<EnumName<KvLayout>, 2> kKvLayoutNames{
    {{KvLayout::nhd, "nhd", ""}, {KvLayout::hnd, "hnd", "hnd"}}};
constexpr const auto& enum_names(KvLayout) { return kKvLayoutNames; }
constexpr std::string_view to_string(KvLayout l) { return enum_name(l); }

/// ALiBi (Press et al. 2022, "Train Short, Test Long"; FlashAttention-2's alibi_slopes: BLOOM,
/// MPT): an input `alibi_slopes`, fp32 [Hq] (per_head) or [B, Hq] (per_batch_head), and the bias
/// −slope·|i + Sk − Sq − j| added to each score after the scale and the softcap (the lower-right
/// distance, per sequence when packed). The id token is the field's value.
enum class Alibi : int32_t {
  none = OPCTS_SDPA_ALIBI_NONE,
  per_head = OPCTS_SDPA_ALIBI_PER_HEAD,
  per_batch_head = OPCTS_SDPA_ALIBI_PER_BATCH_HEAD
};
inline constexpr std::array<EnumName<Alibi>, 3> kAlibiNames{{{Alibi::none, "none", ""},
                                                             {Alibi::per_head, "per_head", "alibi"},
                                                             {Alibi::per_batch_head, "per_batch_head", "alibib"}}};
constexpr const auto& enum_names(Alibi) { return kAlibiNames; }
constexpr std::string_view to_string(Alibi a) { return enum_name(a); }

/// FP8 attention: which of q, k, v hold fp8 codes. qkv: all three (FlashAttention 3's fp8 forward,
/// cuDNN's fp8 SDPA, TransformerEngine); kv: an fp8 KV cache under queries in the dtype
/// (FlashInfer's and vLLM's kv_cache_dtype fp8). The id token is the prefix the fp8 field adds the
/// format and the descale's form to.
enum class Fp8 : int32_t { none = OPCTS_SDPA_FP8_NONE, qkv = OPCTS_SDPA_FP8_QKV, kv = OPCTS_SDPA_FP8_KV };
inline constexpr std::array<EnumName<Fp8>, 3> kFp8Names{
    {{Fp8::none, "none", ""}, {Fp8::qkv, "qkv", "fp8qkv"}, {Fp8::kv, "kv", "fp8kv"}}};
constexpr const auto& enum_names(Fp8) { return kFp8Names; }
constexpr std::string_view to_string(Fp8 f) { return enum_name(f); }

/// The fp8 tensors' descales: one fp32 per tensor ([1]) or one per (batch entry, KV head)
/// ([B, Hkv]; FlashAttention 3's q_descale, k_descale, v_descale — q's too is per KV head).
enum class Descale : int32_t { per_tensor = OPCTS_SDPA_DESCALE_PER_TENSOR, per_head = OPCTS_SDPA_DESCALE_PER_HEAD };
inline constexpr std::array<EnumName<Descale>, 2> kDescaleNames{
    {{Descale::per_tensor, "per_tensor", ""}, {Descale::per_head, "per_head", "h"}}};
constexpr const auto& enum_names(Descale) { return kDescaleNames; }
constexpr std::string_view to_string(Descale d) { return enum_name(d); }

static_assert(abi_distinct<Mask>() && abi_distinct<MaskTensor>() && abi_distinct<Layout>() &&
              abi_distinct<Direction>() && abi_distinct<KvLayout>() && abi_distinct<Alibi>() && abi_distinct<Fp8>() &&
              abi_distinct<Descale>());

/// A packed problem's negative case written into its index inputs (make_inputs): the tensor
/// named is malformed and every impl must refuse it by that name. block_table: one entry a
/// sequence uses points past the cache (= num_pages); seqused_k: sequence 0 holds one key more
/// than its table's pages (paged) or than its rows of K (varlen with pad_k); cu_seqlens_q /
/// cu_seqlens_k: not non-decreasing (entry 1 one past entry 2).
enum class Corrupt { none, block_table, seqused_k, cu_seqlens_q, cu_seqlens_k };
inline constexpr std::array<std::string_view, 5> kCorruptNames{"none", "block_table", "seqused_k", "cu_seqlens_q",
                                                               "cu_seqlens_k"};

/// The fp8 output's default scale (o_scale, Problem::fp8_out_scale): O·40 keeps the inputs' |O|
/// (up to about 3) well inside e4m3fn's 448, and a scale taken as a descale (O/40) is a gross error.
constexpr double kFp8OutScale = 40;

struct Problem {
  DType dtype = DType::bf16;
  int64_t batch = 1;
  int64_t heads_q = 1;
  int64_t heads_kv = 1;
  int64_t seq_q = 1;
  int64_t seq_k = 1;
  int64_t head_dim = 64;        // Dqk
  int64_t head_dim_v = 64;      // Dv (YAML `head_dim: {qk: 192, v: 128}`; a number sets both)
  std::optional<double> scale;  // unset: 1/sqrt(head_dim)
  Mask mask = Mask::none;
  int64_t window_left = -1;   // -1: unbounded
  int64_t window_right = -1;  // -1: unbounded
  /// Chunked-local attention (Llama 4; FlashAttention 3's attention_chunk, hopper/mask.h): row i
  /// sees only keys of the chunk of `chunk` keys that holds its position a = i + Sk − Sq (the
  /// lower-right alignment), [⌊a / C⌋·C, ⌊a / C⌋·C + C), intersected with the causal mask and the
  /// window. 0: off.
  int64_t chunk = 0;
  /// Attention sinks (gpt-oss; FlashAttention 4's learnable_sink, FlashInfer's sink, cuDNN's
  /// sink token): an input `sinks`, fp32 [Hq], a logit per query head in the final scores' units
  /// (after scale, softcap and the additive mask; natural log) that joins each row's softmax
  /// denominator with no value of its own: P_ij = e^(s_ij) / (e^(sink_h) + Σ_j e^(s_ij)), lse_i =
  /// ln(e^(sink_h) + Σ_j e^(s_ij)); a row with no key has O = 0 and lse = sink_h. Backward adds
  /// the output `dsinks`, fp32 [Hq]: −Σ_(b,i) P_sink,i·D_i with P_sink,i = e^(sink_h − lse_i) and
  /// D_i = rowsum(dO_i ⊙ O_i) (the gradient of Σ dO ⊙ O; FlashAttention 4's dsink).
  bool sinks = false;
  /// ALiBi slopes (Alibi above): none, per query head, or per (batch entry, query head).
  Alibi alibi = Alibi::none;
  double softcap = 0;  // 0: off
  MaskTensor mask_tensor = MaskTensor::none;
  bool mask_per_batch = false;  // attn_mask is [B or 1, Hq or 1, Sq or 1, Sk]
  bool mask_per_head = false;
  /// false: the attn_mask holds one row of Sk for every query ([.., 1, Sk]: a key-padding mask or
  /// a bias per key, broadcast over the queries as PyTorch broadcasts attn_mask).
  bool mask_per_query = true;
  /// Backward with an additive attn_mask (a post-scale bias): the output `dbias`, the bias's
  /// gradient in the dtype, shaped as attn_mask: dS'_ij = P_ij·(dP_ij − D_i) — dS before the
  /// softcap's derivative, the bias being added after the softcap — summed over the axes the mask
  /// broadcasts (batch, query heads, queries). cuDNN's dBias (cudnn-frontend's sdpa_backward
  /// dBias), TransformerEngine's and PyTorch's efficient-attention grad_bias.
  bool dbias = false;
  /// Block-sparse attention (FlexAttention's BlockMask, FlashAttention 4's block sparsity,
  /// FlashInfer's BSR masks): query rows in blocks of block_q, keys in blocks of block_k, and an
  /// input `block_mask`, bool8 [B, Hq, ⌈Sq/block_q⌉, ⌈Sk/block_k⌉] (1 = the query block reads the
  /// key block): a row sees only keys of the blocks its block reads, within its causal range,
  /// window, chunk and attn_mask. The pattern is block_kept's (a function of the problem), and the
  /// keys no query block reads hold NaN (unseen_keys). 0: off (both or neither).
  int64_t block_q = 0, block_k = 0;
  /// FP8 attention (forward): q (qkv only), k and v hold codes of fp8_format
  /// (e4m3fn or e5m2) with fp32 inputs q_descale (qkv only), k_descale, v_descale, [1] or [B, Hkv]
  /// (descale; a packed batch's entry is its sequence); an element's value is code·descale of its
  /// (batch entry, KV head). O stays in the dtype (bf16 or fp16; q's too with kv), lse in fp32.
  /// The scores, softmax and O are those of the values; what a kernel rounds is its model (p_dtype).
  Fp8 fp8 = Fp8::none;
  DType fp8_format = DType::e4m3fn;
  Descale descale = Descale::per_tensor;
  /// FP8 with an fp8 output (cuDNN's fp8 SDPA and TransformerEngine's O with scale_o): O is stored
  /// as e4m3fn codes of O·o_scale (RN, saturating at 448), o_scale an fp32 input [1]; lse as before.
  bool fp8_out = false;
  /// fp8_out's o_scale (an integer): kFp8OutScale, or one large enough that O·o_scale passes 448
  /// on some elements, which a correct kernel stores as ±448 (a scale from an amax history that
  /// the values have outgrown; the edge class "overflow and saturation" of fp8 outputs).
  int64_t fp8_out_scale = static_cast<int64_t>(kFp8OutScale);
  bool poison_masked = false;  // NaN written into K/V rows that no query may see
  Layout layout = Layout::bhsd;
  Direction direction = Direction::forward;
  /// Layout varlen: the length of each sequence (batch entries each; seq_q and seq_k are their
  /// largest). Empty for the dense layouts.
  std::vector<int64_t> seqlens_q, seqlens_k;
  /// Layout paged: tokens per page of the KV cache and the order inside a page.
  int64_t page_size = 0;
  KvLayout kv_layout = KvLayout::nhd;
  /// Layout paged: every sequence's first shared_prefix keys sit on the same pages (prefix
  /// caching, vLLM's and SGLang's: whole pages, so a multiple of page_size; 0 = none).
  int64_t shared_prefix = 0;
  /// Layout varlen: padding rows after each sequence's keys in the packed K and V (FlashAttention's
  /// seqused_k: cu_seqlens_k counts Sk_b + pad_k rows per sequence, seqused_k int32 [B] says Sk_b
  /// of them are keys; the rest hold NaN). 0 = none, and no seqused_k input.
  int64_t pad_k = 0;
  /// A negative case in the index inputs (Corrupt above).
  Corrupt corrupt = Corrupt::none;

  bool varlen() const { return layout == Layout::varlen; }
  bool paged() const { return layout == Layout::paged; }
  /// Queries packed token-major with per-sequence lengths: varlen or paged.
  bool packed() const { return varlen() || paged(); }
  bool block_sparse() const { return block_q > 0; }
  /// The stored dtype of q and of k and v (fp8_format where they hold fp8 codes).
  DType q_dtype() const { return fp8 == Fp8::qkv ? fp8_format : dtype; }
  DType kv_dtype() const { return fp8 == Fp8::none ? dtype : fp8_format; }
  /// The format P takes into the P·V product in the bound's model: e4m3fn under fp8 qkv (an fp8
  /// MMA's operand: FlashAttention 3 rounds P to e4m3 whatever the inputs' format; cuDNN's graph
  /// casts the normalised P to Q's type instead, its own model "O@fp8_p_normalised", bound.hpp),
  /// else the dtype (an fp8 KV cache's V is widened to the queries' dtype, as FlashInfer does).
  DType p_dtype() const { return fp8 == Fp8::qkv ? DType::e4m3fn : dtype; }
  /// The stored dtype of O: e4m3fn with fp8_out, else the dtype.
  DType o_dtype() const { return fp8_out ? DType::e4m3fn : dtype; }
  /// Packed tokens of Q (and O) and of K (and V): Σ Sq_b and Σ Sk_b for varlen, B·Sq and B·Sk
  /// otherwise.
  int64_t total_q() const;
  int64_t total_k() const;
  /// Sequence b of a varlen problem as the dense problem it is: batch 1, its own lengths, BSHD
  /// storage (the THD rows of one sequence are exactly a [1, S, H, D] tensor), no lists, pages or
  /// corrupted index inputs, the rest as p.
  /// A dense problem's sequence b is the problem with batch 1.
  Problem sequence(int64_t b) const;

  double effective_scale() const;
  /// The keys row i may see under the causal mask, the window and the chunk: the inclusive range
  /// [first_key(i), last_key(i)], clamped to [0, Sk − 1]; empty when last_key(i) < first_key(i).
  /// (A window makes the range start after 0; a boolean or additive attn_mask is data, applied
  /// by the references and impls on top of this range.) Negative windows count as unbounded.
  /// Dense problems only: a varlen problem's rows are its sequences' (sequence(b)).
  int64_t first_key(int64_t i) const;
  int64_t last_key(int64_t i) const;
  /// Whether key j is visible to query row i under the causal mask and the window.
  bool visible(int64_t i, int64_t j) const;
  /// The number of keys of row i: sum over j of visible(i, j), in O(1).
  int64_t keys_of_row(int64_t i) const;
  /// Throws std::invalid_argument naming the field for a malformed problem (negative sizes,
  /// head dims <= 0, fp64, a non-finite scale or softcap, attn_mask flags without a mask,
  /// poison_masked where every key is visible to some row). A broken argument contract
  /// (contract_violation below) is not malformed: it is a negative case.
  void validate() const;
  bool operator==(const Problem&) const = default;
};

/// cu_seqlens of a varlen problem (families/sdpa/varlen.cpp): the exclusive prefix sums of the
/// lengths, B + 1 entries starting at 0.
std::vector<int64_t> cu_seqlens(const std::vector<int64_t>& lens);
/// A packed problem's cu_seqlens_k: the prefix sums of Sk_b + pad_k, each sequence's keys and its
/// padding rows (sequence b's keys are rows [cu[b], cu[b] + Sk_b) of K and V; pad_k is 0 but
/// for varlen).
std::vector<int64_t> cu_seqlens_k(const Problem& p);

/// The paged KV cache of a paged problem (families/sdpa/paged.cpp): sequence b reads
/// ceil(Sk_b / page_size) pages, the first shared_prefix / page_size of them (`shared`) the same
/// pages for every sequence; the cache holds the owned pages and owned / 4 + 1 pages no sequence
/// owns; the block table has max_pages_per_seq columns (at least 1).
struct PagedGeometry {
  std::vector<int64_t> pages;  // per sequence
  int64_t shared = 0, owned = 0, num_pages = 0, max_pages_per_seq = 0;
};
PagedGeometry paged_geometry(const Problem& p);
/// Element index of key token j (slot j % page_size of page `page`), head h, element d in a
/// cache of `dim` per head (NHD: [pages, page_size, Hkv, dim]; HND: [pages, Hkv, page_size, dim]).
int64_t cache_index(const Problem& p, int64_t page, int64_t slot, int64_t h, int64_t d, int64_t dim);

/// The invariance cuts of a packed problem and the packing axis of any (families/sdpa/
/// invariance_cut.cpp; Family::invariance_cut): a varlen batch's sequence 0 alone or its sequences
/// reversed, and p in its other batch layout (dense bhsd/bshd ↔ varlen). The dense layouts'
/// batch_size and batch_position are the family default's.
InvarianceCut invariance_cut(const Problem& p, const TensorMap& inputs, InvarianceAxis axis);
/// Why the packing axis cannot cut p ("" when it can): a paged cache, a varlen batch of unequal
/// lengths or with padding rows, a dense problem with what the varlen layout takes none of.
std::string packing_uncut(const Problem& p);

/// The plugin ABI's opcts_sdpa_params for a problem, as bytes (families/sdpa/family.cpp).
std::vector<unsigned char> abi_params(const Problem& p);

/// The field table (families/sdpa/fields.cpp): YAML keys dtype; batch (default 1); heads (N or
/// {q, kv}); seq (N or {q, k}; varlen {q: [L, ...], k: [L, ...]}, an item "LrN" N sequences of
/// length L, which set batch); head_dim (N or {qk, v}); mask none | causal_upper_left |
/// causal_lower_right; scale; window {left, right} (-1 = unbounded) or none; softcap;
/// attn_mask none | bool | additive or {kind, per_batch, per_head, per_query}; dbias; poison_masked; layout
/// bhsd | bshd | varlen (scalar lengths: every sequence that long); direction forward |
/// backward; expect_error (a negative case). The id below.
const kit::FieldTable<Problem>& fields();

/// A break of the operator's argument contract that a user can write and every impl must
/// refuse with opcts::InvalidArgument naming `argument` (Family::expected_error):
///   "heads_kv"      heads_q % heads_kv != 0 (PyTorch enable_gqa, FlashAttention-2, cuDNN)
///   "window_left"   window_left < -1 (FlashAttention-2 takes -1 as unbounded, nothing lower)
///   "window_right"  window_right < -1
///   "softcap"       softcap < 0 (0 is off)
///   "block_table", "seqused_k", "cu_seqlens_q", "cu_seqlens_k"   corrupt (the inputs say it)
/// A wrongly broadcast attn_mask cannot be written: per_batch / per_head are flags and the
/// mask's shape follows from them. YAML negative cases say `expect_error: <argument>`.
using opcts::Violation;
std::optional<Violation> contract_violation(const Problem& p);
/// Throws opcts::InvalidArgument for contract_violation(p); every impl calls it first.
void check_contract(const Problem& p);

/// The bug classes of the planted impls (host.flash_* and cuda.flash_*; the kernels'
/// twin is families/sdpa/cuda/sdpa_kernels.hpp's SdpaPlant); none for the real impls.
enum class PlantedBug {
  none,
  window_off_by_one,  // the left window bound keeps one key too many
  chunk_off_by_one,   // a chunk's first key taken one too early: the last key of the previous chunk seen
  gqa_modulo,         // query head h reads KV head h % Hkv instead of h / (Hq / Hkv)
  drop_rowsum,        // backward: dS = P ⊙ dP, without subtracting rowsum(dO ⊙ O)
  masked_row_nan,     // a row that sees no key divides 0 by 0 (O = NaN) instead of O = 0
  pv_in_dtype,        // the P·V accumulator is rounded to the input dtype after every key tile
  rowsum_in_dtype,    // the softmax row sum l is rounded to the input dtype after every key tile
  lse_plus_log2,      // logsumexp = m + log(2·l): off by log 2 (a log2/ln domain slip)
  // Varlen: sequence b >= 1 reads its keys from cu_seqlens_k[b] − 1, one token of its
  // neighbour's before its own (an off-by-one in the sequence start: it attends across the
  // boundary; Sk_b + 1 keys, aligned by them).
  varlen_key_offset,
  // Varlen: the lower-right mask and the window aligned by max_seqlen_k − max_seqlen_q, the
  // batch's, instead of each sequence's Sk_b − Sq_b (a dense kernel's offset kept for packed
  // batches).
  varlen_max_alignment,
  // Varlen with seqused_k (pad_k): each sequence's keys taken as its whole cu_seqlens_k segment,
  // Sk_b + pad_k of them (the padding rows read, the alignment by that length): seqused_k ignored.
  varlen_seqused_ignored,
  // Paged: page j / page_size of sequence b read from block_table[b][j / page_size] + 1, the
  // next physical page (an index off by one).
  paged_page_offset,
  // Paged: each sequence's keys taken as its whole last page, ceil(Sk_b / page_size)·page_size
  // of them (the tail slots past seqused_k read, the alignment by that length).
  paged_tail_read,
  // Paged split-KV: the splits' partial results combined with exp2 and log2 of their natural-log
  // logsumexps (a log-base slip in the combine step).
  splitkv_combine_log2,
  // Sinks: lse computed without the sink (O keeps it in its denominator): the forward's lse is
  // too low, and a backward that recomputes P = exp(s − lse) from it leaves the sink out of P.
  sink_lse_omitted,
  // Sinks: O normalised by the keys' sum alone (the sink left out of O's denominator, as a
  // kernel that adds it for lse only does): every row with a key has O too large by
  // 1 / (1 − P_sink); lse keeps the sink, and the backward's D = dO·O follows O.
  sink_denominator_omitted,
  // Sinks, backward: each batch entry's (sequence's) dsink share stored over the previous
  // ones instead of added to them (a store where an atomic add was due): the last one's remains.
  dsinks_last_batch,
  // Sinks, backward: dsinks summed in the input dtype (each head's running sum rounded to it after
  // every row's term and every batch entry's share: a 16-bit gradient buffer accumulated in
  // place), where fp32 was due.
  dsinks_in_dtype,
  // ALiBi: the distance taken as |i − j| (upper-left) where FlashAttention-2's is the lower-right
  // |i + Sk − Sq − j|: a shift common to a row's keys where they all sit on one side of both
  // diagonals (lse moves, P does not), and a different bias between them.
  alibi_upper_left,
  // ALiBi: query head h reads the slope of its KV head h / (Hq / Hkv), not its own (the bias
  // broadcast over the wrong head axis).
  alibi_kv_head,
  // Additive attn_mask per head: query head h reads the mask of head h / (Hq / Hkv), its KV
  // head's index (a bias broadcast over the wrong head axis).
  amask_kv_head,
  // attn_mask read transposed: score (i, j) takes the mask's element (j, i), its row and column
  // strides swapped (a square Sq = Sk mask with a row per query; elsewhere the read would leave
  // the tensor). dbias is written where it belongs.
  amask_transposed,
  // dbias: where it sums over an axis the mask broadcasts (batch, heads, queries), each term
  // stored over the previous instead of added to it (a store where an atomic add was due): the
  // last term remains.
  dbias_last_term,
  // dbias taken as dS after the softcap's derivative (the raw scores' gradient, which dQ and dK
  // use) where the bias, added after the softcap, takes dS before it.
  dbias_capped,
  // dbias summed in the input dtype where it sums over a broadcast axis (the running sum rounded
  // to it after every term: a 16-bit dbias buffer accumulated in place), where fp32 was due.
  dbias_in_dtype,
  // Block-sparse: each query block's last kept key block skipped (a kv_num_blocks one short).
  block_last_dropped,
  // Block-sparse: the key block after each kept one read too (an index one past its run): a block
  // no query reads holds NaN.
  block_one_past,
  // FP8: the first fp8 tensor's descale (q's under qkv, k's under kv) applied twice (folded into
  // the softmax scale and into the dequantized tensor both).
  fp8_descale_twice,
  // FP8: k's and v's descales swapped (each tensor dequantized with the other's).
  fp8_descale_swapped,
  // FP8, descales per (batch, KV head): every head dequantized with entry [0, 0] (the descale
  // broadcast as if per tensor).
  fp8_descale_head0,
  // FP8 KV cache: P rounded to e4m3 for P·V (an fp8 MMA) where the queries' dtype is due.
  fp8_p_in_e4m3,
  // FP8 output: O divided by o_scale where it is multiplied (the descale convention for a scale).
  fp8_out_scale_inverted,
  // FP8 output: O·o_scale converted without saturation (cvt without .satfinite, OCP's
  // nonsaturating policy): a value past 448 becomes NaN where a correct store gives ±448.
  fp8_out_nonsaturating,
  // FP8 q, k, v under cuDNN's normalised P (host.normalised_p_fp8): P = e/l cast to the fp8 format
  // without scale_s first (and O not divided by it), so every P below the format's least normal
  // (2^-6 in e4m3fn, 2^-14 in e5m2) rounds on the subnormal grid: long rows lose their small P.
  fp8_p_unscaled,
  // Forward, dense or varlen: a batch of one entry (one sequence) runs key tiles of 32 where a
  // larger batch runs 64 (a tile chosen by the batch, for occupancy), so a row's online-softmax
  // rescalings fall elsewhere and its bytes depend on the batch around it; the impl declares
  // batch_size invariance, so only `opcts run --invariance` can see it (every result stays within
  // the bounds).
  batch_variant_tiles,
  // Forward: the varlen layout runs key tiles of 32 where the dense layouts run 64 (a varlen
  // kernel of its own, tuned apart), while the impl declares packing invariance: a sequence's
  // bytes depend on whether its batch came padded or packed. Only `opcts run --invariance` sees it.
  packed_variant_tiles,
};
/// The key tile batch_variant_tiles runs a batch of one entry with, and packed_variant_tiles the
/// varlen layout.
inline constexpr int64_t kBatchVariantTile = 32;
/// The host paged impl's split-KV chunk: a sequence of more keys runs in splits of this many
/// keys, combined by their logsumexps (FlashAttention's split-KV decode); splitkv_combine_log2
/// shows on rows that see keys of two splits or more.
constexpr int64_t kPagedSplitKeys = 256;
/// Why a problem cannot show the planted bug (so the planted impl SKIPs it and each of its
/// cases must FAIL), or "" when it can: negative cases, empty problems, rows that see no
/// key, no key left of a window, no GQA, the wrong direction; for the precision bugs fp32
/// inputs (rounding to fp32 changes nothing) and rows of one key (kPlantedPrecisionKeys).
std::string planted_bug_cannot_show(const Problem& p, PlantedBug bug);
/// The precision bugs change the output of a forward problem with 16-bit inputs wherever a row
/// sees two keys or more: a row of one key has P = exp(0) = 1 and l = 1, and its accumulator
/// P·v = v, all exact in the dtype, so rounding them changes nothing. Where a row is longer the
/// rounded accumulator or row sum moves O (and lse) whether or not the bound sees it: a problem
/// where the bound cannot is an XPASS, the bound's blind spot (docs/status/host.md lists them),
/// never a SKIP. (pv_in_dtype once skipped rows of up to three 64-key tiles, where one to three
/// roundings of the accumulator hide in the bound: that hid the blind spot instead of showing it.)
constexpr int64_t kPlantedPrecisionKeys = 2;

/// The scale_s of an fp8 graph that rounds the normalised P (cuDNN's SDPA fp8 forward, cudnn-frontend
/// node/scaled_dot_product_flash_attention.h: softmax, MUL scale_s, cast to Q's fp8 type; its
/// descale_s on P·V): 2^8 keeps P·scale_s <= 256, below e4m3fn's 448 and e5m2's 57344, and its
/// descale exact. The cuda.cudnn adapter gives the graph this value (sdpa_cudnn.hpp
/// kCudnnFp8ScaleS, which cannot include this header; the glue test asserts they are equal);
/// O's model "O@fp8_p_normalised" (bound.hpp) and host.normalised_p_fp8, which emulates the
/// model's arithmetic, take it from here.
constexpr double kFp8ScaleS = 256;
/// The shape of each fp8 descale input: [1] per tensor, [B, Hkv] per (batch, KV head).
std::vector<int64_t> descale_shape(const Problem& p);
/// The descale of `tensor` ('q', 'k' or 'v') for batch entry b and KV head hk: a role factor
/// (q 3/2, k 3/4, v 5/4) over 64, times (4 + (b + 2·hk) mod 4)/4 per (batch, KV head): dyadic, of
/// at most 6 significant bits, so that code·descale (4 of e4m3fn, 3 of e5m2) is exact in fp32 and
/// in fp16 (families/sdpa/inputs.cpp).
double fp8_descale(const Problem& p, char tensor, int64_t b, int64_t hk);

/// Keys that no query row can see under the causal mask, the window and, block-sparse, the block
/// mask's key blocks that no query block of any batch entry or head reads (1 = unseen), Sk
/// entries, of a dense problem (a varlen one's are its sequences', unseen_keys(p.sequence(b))).
/// poison_masked and block sparsity write NaN into exactly these rows of K and V.
std::vector<char> unseen_keys(const Problem& p);

/// The block mask of a block-sparse problem (families/sdpa/problem.cpp): [B, Hq, ⌈Sq/block_q⌉,
/// ⌈Sk/block_k⌉], and whether query block qb of (b, h) reads key block kb — a fixed pseudo-random
/// pattern keeping about 3 blocks in 5, with every key block kb ≡ 3 (mod 4) read by no query
/// block (NaN there: a kernel that reads a skipped block fails) and every query block qb ≡ 2
/// (mod 5) reading none (rows that see no key).
std::vector<int64_t> block_mask_shape(const Problem& p);
bool block_kept(const Problem& p, int64_t b, int64_t h, int64_t qb, int64_t kb);

/// The id: DTYPE_bB_hqHQ_hkvHKV_sqSQ_skSK_dD[vDV]_MASK, then optional tokens, each only when
/// its field is not the default, in this order:
///   _scaleX        scale set (X: shortest round-trip decimal, 'p' = '.', 'm' = '-')
///   _winLxR        window (left L, right R; m for minus: _win4095xm1 = (4095, -1))
///   _chunkC        chunked-local attention, C keys a chunk
///   _sink          attention sinks
///   _alibi, _alibib ALiBi slopes per head, per (batch, head)
///   _capX          softcap X > 0 (or a negative one: a negative case), written like scale
///   _bmask[b][h]   boolean attn_mask; b: per batch, h: per head (neither: broadcast over B, H)
///   _amask[b][h]   additive attn_mask, likewise; either then k when it is one row of keys
///                  broadcast over the queries (per_query false): _amaskbk = [B, 1, 1, Sk]
///   _dbias         the additive mask's gradient dbias (backward)
///   _blkQxK        block-sparse, blocks of Q query rows and K keys
///   _fp8qkv[F][h][o], _fp8kv[F][h][o]  fp8 q, k, v or an fp8 KV cache; F the format when not
///                  e4m3fn (e5m2), h for descales per (batch, KV head), o for an e4m3fn output
///   _poison        NaN in the K/V rows no query row can see
///   _bshd          BSHD storage
///   _varlen        the varlen layout; SQ and SK then list the lengths: joined by 'x', a run of
///                  N sequences of length L as LrN, no sequence as 0r0 (sq1r3x40 = 1, 1, 1, 40)
///   _pageN, _hnd, _prefixN   the paged layout's page size, page order and shared prefix
///   _padkN         N padding rows after each varlen sequence's keys (seqused_k)
///   _bwd           backward
/// "bf16_b2_hq32_hkv8_sq4096_sk4096_d128_causal_lr" (problems of the forward-only era keep
/// their ids), "bf16_b1_hq16_hkv8_sq512_sk512_d256_causal_lr_win4095x0_cap50_bwd",
/// "bf16_b1_hq128_hkv128_sq256_sk256_d192v128_causal_lr". MASK: nomask | causal_ul | causal_lr.
/// Only lowercase letters, digits and '_': a valid gtest name.
std::string problem_id(const Problem& p);
/// Inverse of problem_id; throws std::invalid_argument naming the token it cannot read (and
/// any id that is not the canonical spelling of its problem, so the round trip is exact).
Problem parse_problem_id(std::string_view id);

/// Shapes of the tensors as stored (row-major, contiguous): [B, H, S, D] for bhsd,
/// [B, S, H, D] for bshd and [T, H, D] for varlen (T = total_q or total_k). q: [.., Hq, Sq, Dqk]; k: [.., Hkv, Sk,
/// Dqk]; v: [.., Hkv, Sk, Dv]; O and dO: [.., Hq, Sq, Dv]; dQ, dK, dV have the shapes of q, k, v.
std::vector<int64_t> q_shape(const Problem& p);
std::vector<int64_t> k_shape(const Problem& p);
std::vector<int64_t> kv_shape(const Problem& p);  // = k_shape (K; V has head_dim_v)
std::vector<int64_t> v_shape(const Problem& p);
std::vector<int64_t> o_shape(const Problem& p);
/// [B, Hq, Sq], fp32, for the dense layouts; [Hq, Tq] for varlen.
std::vector<int64_t> lse_shape(const Problem& p);
/// The attn_mask input: [B or 1, Hq or 1, Sq or 1, Sk] (per_batch, per_head, per_query),
/// contiguous; dbias has its shape.
std::vector<int64_t> mask_shape(const Problem& p);

/// Element strides of a stored tensor for the logical (batch, head, seq) indices, D contiguous
/// (the same numbers as families/sdpa/cuda/sdpa_kernels.hpp's SdpaStrides). Varlen: batch 0,
/// seq the packed token index (cu_seqlens[b] + s).
struct Strides {
  int64_t batch, head, seq;
  int64_t at(int64_t b, int64_t h, int64_t s) const { return b * batch + h * head + s * seq; }
};
Strides q_strides(const Problem& p);  // also dQ
Strides k_strides(const Problem& p);  // also dK
Strides v_strides(const Problem& p);  // also dV
Strides o_strides(const Problem& p);  // also dO
/// attn_mask strides (batch, head, seq): 0 where the mask broadcasts.
Strides mask_strides(const Problem& p);

/// Inputs (families/sdpa/inputs.cpp), a pure function of (problem, seed):
///   q, k, v (and dO for backward): N(0, 1) in the dtype and the layout.
///   attn_mask boolean: bool8 holding 1 (attend) or 0; each element kept with probability 0.8
///     (Philox uniform < 0.8), and every row i ≡ 3 (mod 8) fully masked (PyTorch's
///     test_fully_masked_out_rows class) where the mask has a row per query. Read it with get(i), nonzero = attend.
///   attn_mask additive: in the dtype, N(0, 1) where the boolean rule keeps the element and
///     -inf exactly where it masks it.
///   poison_masked: K and V rows of unseen_keys(p) are NaN (every batch and KV head; varlen:
///     each sequence's own unseen keys, at its packed rows).
///   varlen: cu_seqlens_q and cu_seqlens_k, int32 [B + 1] (cu_seqlens, cu_seqlens_k above); with
///     pad_k > 0 also seqused_k, int32 [B] (each Sk_b), and NaN in every padding row of K and V.
///   sinks: "sinks", fp32 [Hq]: c + N(0, 2²) on stream 7, rounded to fp32, c the log of a row's
///     typical denominator (ln Sk + σ²/2, or σ·√(2 ln Sk) for sharp rows; σ = scale·√Dqk, at most
///     the softcap): about as heavy as a row's keys, P_sink from ~0.02 to ~0.98 over the heads.
///   block-sparse: "block_mask", bool8 block_mask_shape(p) from block_kept, and NaN in the K and V
///     rows of unseen_keys(p).
///   alibi: "alibi_slopes", fp32 [Hq] or [B, Hq]: BLOOM's and MPT's geometric slopes 2^(−8(h + 1)/Hq)
///     for head h, times (1 + b/2) for batch entry b when per (batch, head).
///   fp8: q (qkv), k and v as codes RN_satfinite(48·z) of the format (z ~ N(0, 1): e4m3fn's 448 is
///     9σ, so saturation is rare), and "q_descale" (qkv), "k_descale", "v_descale" fp32
///     descale_shape(p): fp8_descale's values, each role its own so that a descale in the wrong role
///     is a gross error; with fp8_out "o_scale", fp32 [1], Problem::fp8_out_scale (kFp8OutScale
///     unless the problem says otherwise).
/// The stored dtypes are q_dtype() and kv_dtype() (dO: the dtype).
/// Outputs: forward "O" (dtype, o_shape) and "lse" (fp32, lse_shape); backward "dQ", "dK",
/// "dV" (dtype, shapes of q, k, v), with sinks "dsinks" (fp32 [Hq]) and with dbias "dbias"
/// (dtype, mask_shape).
TensorMap make_inputs(const Problem& p, uint64_t seed);

/// The forward references on inputs q, k, v (any dtype; their rounded values are used),
/// families/sdpa/reference.cpp: `exact` the fp64 values (scores, softmax and both products in
/// double with Eigen, (batch, head) pairs in parallel with OpenMP, a fixed summation order);
/// `lowp` the ideal low-precision flash kernel (fp32 scores and accumulation, P rounded to the
/// dtype for P·V) before its output rounding; `bound` the ref_relative floors. Outputs "O"
/// and "lse", row-major in storage order.
References reference(const Problem& p, const TensorMap& inputs);
/// reference with P rounded to `p_round` for P·V in the same-precision pipeline and in O's bound,
/// where reference takes p.p_dtype(): a test's bound one rounding too tight (P at bf16's unit
/// under fp8 qkv, where e4m3's is the model).
References reference(const Problem& p, const TensorMap& inputs, DType p_round);
/// The backward references (families/sdpa/backward_reference.cpp): fp64 gradients dQ, dK, dV
/// of the forward above at dO, the ideal low-precision flash backward (O, P and dS rounded
/// where a flash backward rounds them) before its output rounding as `lowp`, and the floors.
References backward_reference(const Problem& p, const TensorMap& inputs);
/// The sinks' gradient of a backward problem by parts (families/sdpa/bound.hpp's
/// sink_gradient_parts), so that the varlen reference adds its sequences' before the bound is
/// formed: per head, the fp64 and same-precision dsinks, and the bound's mean-zero Σ c² (`var`),
/// its outright part, and the count and Σ|t_i| of the terms the final fp32 sum adds.
struct SinkGradients {
  std::vector<double> exact, lowp, var, outright, terms, abs_sum;
  explicit SinkGradients(int64_t heads = 0);
  void add(const SinkGradients& o);
  /// "dsinks" into r.exact, r.lowp and r.bound: Λ·(√var + (u/2)·√terms·abs_sum) + outright (Λ the
  /// lse floor's √48; var holds each error's variance proxy, b²/3 for the uniform roundings).
  void finish(References& r) const;
};
/// backward_reference with the sinks' gradient left in `*sinks` (not finished into the result).
References backward_reference(const Problem& p, const TensorMap& inputs, SinkGradients* sinks);

/// The varlen and paged references (families/sdpa/varlen_reference.cpp): each sequence's dense
/// forward or backward references (above) on its rows (a paged sequence's keys gathered by the
/// block table), placed at its rows of the packed outputs.
References varlen_reference(const Problem& p, const TensorMap& inputs);

/// The edge classes of docs/coverage.md that apply to this family, in report order, and those
/// `p` reaches (families/sdpa/coverage.cpp; Family::edge_classes).
std::vector<std::string> edge_classes();
std::vector<std::string> edge_classes_of(const Problem& p);

}  // namespace opcts::sdpa

namespace opcts {
/// Registers the sdpa family (problem parsing, ids, inputs, references).
void register_sdpa_family(Registry& reg);
}  // namespace opcts
