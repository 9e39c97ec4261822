// Planted-bug variants of host.flash (Impl::planted): each carries one bug class that real
// attention kernels shipped, and the sdpa catalog must make each FAIL (`opcts run --arch host
// --include-planted --filter 'sdpa.host_flash_*'`). Each supports only the problems that
// exercise its bug, so every case it has is one that must fail.
//   host.flash_window_off_by_one  the left window bound keeps one key too many (cuDNN's
//                                 left bound is FlashAttention's + 1: the classic mix-up)
//   host.flash_chunk_off_by_one   chunked-local attention: a chunk's first key taken one early,
//                                 so a row also sees the previous chunk's last key
//   host.flash_gqa_modulo         query head h reads KV head h % Hkv, not h / (Hq / Hkv)
//   host.flash_drop_rowsum        backward without rowsum(dO ⊙ O): dS = P ⊙ dP
//   host.flash_masked_row_nan     a row that sees no key gives 0/0 = NaN (PyTorch < 2.5)
//   host.flash_pv_in_dtype        the P·V accumulator rounded to the input dtype after every
//                                 key tile (a 16-bit accumulator register)
//   host.flash_rowsum_in_dtype    the softmax row sum l rounded to the input dtype after
//                                 every key tile
//   host.flash_lse_plus_log2      logsumexp = m + log(2·l), off by log 2 (visible only against
//                                 a reference that keeps scores in fp32 when logits are large)
//   host.flash_varlen_key_offset  varlen: sequence b >= 1 starts one key early, at its
//                                 neighbour's last key (it attends across the boundary)
//   host.flash_varlen_max_alignment varlen: lower-right mask and window aligned by
//                                 max_seqlen_k − max_seqlen_q, not each sequence's lengths
//   host.flash_varlen_seqused_ignored varlen with padding rows: each sequence's whole
//                                 cu_seqlens_k segment read as keys (seqused_k ignored)
//   host.flash_paged_page_offset  paged: each page read from its block-table entry + 1
//   host.flash_paged_tail_read    paged: each sequence's whole last page read as keys
//   host.flash_splitkv_combine_log2 paged split-KV: partials combined in base 2, not e
//   host.flash_sink_lse_omitted   sinks: lse without the sink's term (O keeps it), so the
//                                 backward's P = exp(s − lse) and dsinks miss it too
//   host.flash_sink_denominator_omitted sinks: O normalised without the sink's term (lse
//                                 keeps it)
//   host.flash_dsinks_last_batch  sinks, backward: each batch entry's dsink share stored over
//                                 the previous ones' (a store where an atomic add was due)
//   host.flash_dsinks_in_dtype    sinks, backward: dsinks summed in the input dtype, rounded
//                                 after every row's term (a 16-bit gradient buffer)
//   host.flash_alibi_upper_left   ALiBi's distance |i − j|, not FlashAttention-2's lower-right
//                                 |i + Sk − Sq − j|
//   host.flash_alibi_kv_head      ALiBi: query head h reads its KV head's slope (GQA)
//   host.flash_amask_kv_head      attn_mask per head: query head h reads its KV head's mask
//   host.flash_amask_transposed   attn_mask read transposed: score (i, j) takes element (j, i)
//   host.flash_dbias_last_term    dbias: each term of a broadcast axis's sum stored over the
//                                 previous one (a store where an atomic add was due)
//   host.flash_dbias_in_dtype     dbias summed in the input dtype over a broadcast axis (a
//                                 16-bit buffer accumulated in place)
//   host.flash_dbias_capped       dbias taken after the softcap's derivative (the raw scores'
//                                 gradient), where the bias enters after the softcap
//   host.flash_block_last_dropped block-sparse: each query block's last kept key block skipped
//   host.flash_block_one_past     block-sparse: the key block after each kept run read too
//   host.flash_fp8_descale_twice  fp8: q's descale (k's under an fp8 KV cache) applied twice
//   host.flash_fp8_descale_swapped fp8: k's and v's descales swapped
//   host.flash_fp8_descale_head0  fp8, descales per (batch, KV head): entry [0, 0] read for all
//   host.flash_fp8_p_in_e4m3      fp8 KV cache: P rounded to e4m3 for P·V where the dtype is due
//   host.flash_fp8_out_scale_inverted fp8 output: O divided by o_scale where it is multiplied
//   host.flash_fp8_out_nonsaturating fp8 output: O·o_scale past 448 stored as NaN, not ±448
//   host.flash_batch_variant_tiles forward: a batch of one entry runs 32-key tiles, a larger
//                                 batch 64, while the impl declares batch_size invariance
//                                 (only --invariance sees it: every result is within its bounds)
//   host.flash_packed_variant_tiles forward: the varlen layout runs 32-key tiles, the dense 64,
//                                 while the impl declares packing invariance (only --invariance)
#include "families/sdpa/host/sdpa_blind_spot.hpp"
#include "families/sdpa/host/sdpa_flash.hpp"
#include "gpu/host/host_impls.hpp"

namespace opcts {

namespace {

using host_sdpa::Plant;

class HostSdpaPlanted final : public Impl {
 public:
  explicit HostSdpaPlanted(Plant plant) : plant_(plant) {}
  std::string_view family() const override { return "sdpa"; }
  std::string_view name() const override {
    switch (plant_) {
      case Plant::window_off_by_one: return "host.flash_window_off_by_one";
      case Plant::chunk_off_by_one: return "host.flash_chunk_off_by_one";
      case Plant::gqa_modulo: return "host.flash_gqa_modulo";
      case Plant::drop_rowsum: return "host.flash_drop_rowsum";
      case Plant::masked_row_nan: return "host.flash_masked_row_nan";
      case Plant::pv_in_dtype: return "host.flash_pv_in_dtype";
      case Plant::rowsum_in_dtype: return "host.flash_rowsum_in_dtype";
      case Plant::lse_plus_log2: return "host.flash_lse_plus_log2";
      case Plant::varlen_key_offset: return "host.flash_varlen_key_offset";
      case Plant::varlen_max_alignment: return "host.flash_varlen_max_alignment";
      case Plant::varlen_seqused_ignored: return "host.flash_varlen_seqused_ignored";
      case Plant::paged_page_offset: return "host.flash_paged_page_offset";
      case Plant::paged_tail_read: return "host.flash_paged_tail_read";
      case Plant::splitkv_combine_log2: return "host.flash_splitkv_combine_log2";
      case Plant::sink_lse_omitted: return "host.flash_sink_lse_omitted";
      case Plant::sink_denominator_omitted: return "host.flash_sink_denominator_omitted";
      case Plant::dsinks_last_batch: return "host.flash_dsinks_last_batch";
      case Plant::dsinks_in_dtype: return "host.flash_dsinks_in_dtype";
      case Plant::alibi_upper_left: return "host.flash_alibi_upper_left";
      case Plant::alibi_kv_head: return "host.flash_alibi_kv_head";
      case Plant::amask_kv_head: return "host.flash_amask_kv_head";
      case Plant::amask_transposed: return "host.flash_amask_transposed";
      case Plant::dbias_last_term: return "host.flash_dbias_last_term";
      case Plant::dbias_capped: return "host.flash_dbias_capped";
      case Plant::dbias_in_dtype: return "host.flash_dbias_in_dtype";
      case Plant::block_last_dropped: return "host.flash_block_last_dropped";
      case Plant::block_one_past: return "host.flash_block_one_past";
      case Plant::fp8_descale_twice: return "host.flash_fp8_descale_twice";
      case Plant::fp8_descale_swapped: return "host.flash_fp8_descale_swapped";
      case Plant::fp8_descale_head0: return "host.flash_fp8_descale_head0";
      case Plant::fp8_p_in_e4m3: return "host.flash_fp8_p_in_e4m3";
      case Plant::fp8_out_scale_inverted: return "host.flash_fp8_out_scale_inverted";
      case Plant::fp8_out_nonsaturating: return "host.flash_fp8_out_nonsaturating";
      case Plant::batch_variant_tiles: return "host.flash_batch_variant_tiles";
      case Plant::packed_variant_tiles: return "host.flash_packed_variant_tiles";
      case Plant::fp8_p_unscaled:  // host.normalised_p_fp8's (sdpa_normalised_p.cpp)
      case Plant::none: break;
    }
    return "host.flash_planted";
  }
  std::string_view backend() const override { return "host"; }
  bool planted() const override { return true; }

  Support supports(const Problem& pp, const ArchInfo&) const override {
    const std::string why = sdpa::planted_bug_cannot_show(pp.as<sdpa::Problem>(), plant_);
    return why.empty() ? Support::yes() : Support::no(why);
  }

  TensorMap run(const Problem& pp, const TensorMap& in, const RunContext&) const override {
    return host_sdpa::flash_run(pp.as<sdpa::Problem>(), in, plant_);
  }

  // The variant-tile plants claim what host.flash claims, and break it.
  std::vector<InvarianceAxis> invariant_axes(const Problem&) const override {
    if (plant_ == Plant::batch_variant_tiles) return {InvarianceAxis::batch_size};
    if (plant_ == Plant::packed_variant_tiles) return {InvarianceAxis::packing};
    return {};
  }
  bool bug_needs_invariance() const override {
    return plant_ == Plant::batch_variant_tiles || plant_ == Plant::packed_variant_tiles;
  }

  // The precision plants' extra roundings are of the size of those a correct kernel makes: where
  // they fit within what the checks leave a correct kernel (sdpa_blind_spot.hpp).
  std::string blind_spot(const Problem& pp, const CaseEvidence& evidence) const override {
    switch (plant_) {
      case Plant::pv_in_dtype:
      case Plant::rowsum_in_dtype:
      case Plant::dsinks_in_dtype:
      case Plant::dbias_in_dtype:
        return host_sdpa::precision_blind_spot(pp.as<sdpa::Problem>(), evidence, plant_, family_def().outputs(pp));
      case Plant::batch_variant_tiles:
      case Plant::packed_variant_tiles:
        return host_sdpa::tiles_blind_spot(pp.as<sdpa::Problem>(), evidence.inputs, plant_);
      case Plant::amask_transposed:
      case Plant::fp8_out_nonsaturating:
        return host_sdpa::unchanged_blind_spot(pp.as<sdpa::Problem>(), evidence.inputs, plant_);
      default: return "";
    }
  }

 private:
  Plant plant_;
};

}  // namespace

void register_host_sdpa_planted(Registry& reg) {
  for (Plant p : {Plant::window_off_by_one,    Plant::chunk_off_by_one,       Plant::gqa_modulo,
                  Plant::drop_rowsum,          Plant::masked_row_nan,         Plant::pv_in_dtype,
                  Plant::rowsum_in_dtype,      Plant::lse_plus_log2,          Plant::varlen_key_offset,
                  Plant::varlen_max_alignment, Plant::varlen_seqused_ignored, Plant::paged_page_offset,
                  Plant::paged_tail_read,      Plant::splitkv_combine_log2,   Plant::sink_lse_omitted,
                  Plant::dsinks_last_batch,    Plant::dsinks_in_dtype,        Plant::alibi_upper_left,
                  Plant::alibi_kv_head,        Plant::amask_kv_head,          Plant::dbias_last_term,
                  Plant::dbias_capped,         Plant::dbias_in_dtype,         Plant::block_last_dropped,
                  Plant::block_one_past,       Plant::fp8_descale_twice,      Plant::fp8_descale_swapped,
                  Plant::fp8_descale_head0,    Plant::fp8_p_in_e4m3,          Plant::fp8_out_scale_inverted,
                  Plant::batch_variant_tiles,  Plant::packed_variant_tiles,   Plant::sink_denominator_omitted,
                  Plant::amask_transposed,     Plant::fp8_out_nonsaturating})
    reg.add(std::make_unique<HostSdpaPlanted>(p));
}

}  // namespace opcts
