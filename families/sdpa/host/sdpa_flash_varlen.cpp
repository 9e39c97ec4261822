// host.flash on the varlen layout, as FlashAttention-2's varlen kernels index it: the sequence
// boundaries come from the cu_seqlens tensors (not from the problem), each sequence's rows run
// as a dense [1, S, H, D] problem with its own lengths, and its outputs land at its rows of the
// packed O [Tq, Hq, Dv], logsumexp [Hq, Tq], dQ, dK and dV. With a seqused_k input (int32 [B],
// FlashAttention's), sequence b's keys are the first seqused_k[b] rows of its cu_seqlens_k
// segment; the rest are padding it never reads, and their dK, dV rows stay 0 (no output depends
// on them).
//
// The planted varlen bugs (host.flash_varlen_*): key_offset starts sequence b >= 1 at
// cu_seqlens_k[b] − 1, one key of its neighbour's included (and its dK, dV row not written
// back); max_alignment aligns the lower-right mask and the window by max_seqlen_k −
// max_seqlen_q (the problem's seq_k − seq_q) instead of the sequence's own lengths;
// seqused_ignored reads each whole segment as keys. The variant-tile plants run the forward's key
// tiles of 32 (sdpa::kBatchVariantTile) where host.flash runs 64: packed_variant_tiles always,
// batch_variant_tiles in a batch of one sequence.
#include "families/sdpa/host/sdpa_flash.hpp"
#include "families/sdpa/host/sdpa_packed.hpp"

namespace opcts::host_sdpa {

namespace {

// Each sequence's key count: seqused_k where the inputs give it (checked against its segment of
// cu_seqlens_k), else the whole segment.
std::vector<int64_t> keys_in_use(const TensorMap& in, const std::vector<int64_t>& cu_k, int64_t batch) {
  std::vector<int64_t> segment(static_cast<size_t>(batch));
  for (int64_t b = 0; b < batch; ++b) segment[b] = cu_k[b + 1] - cu_k[b];
  const auto it = in.find("seqused_k");
  return it == in.end() ? segment : read_seqused_k(it->second, segment, "its rows of cu_seqlens_k");
}

}  // namespace

TensorMap flash_run_varlen(const sdpa::Problem& p, const TensorMap& in, Plant plant, bool unrounded) {
  const HostTensor &q = in.at("q"), &k = in.at("k"), &v = in.at("v");
  const int64_t B = p.batch;
  const std::vector<int64_t> cu_q = read_cu_seqlens(in, "cu_seqlens_q", B, q.dim(0));
  const std::vector<int64_t> cu_k = read_cu_seqlens(in, "cu_seqlens_k", B, k.dim(0));
  const std::vector<int64_t> used = keys_in_use(in, cu_k, B);
  const bool backward = p.direction == sdpa::Direction::backward;
  const int64_t Tq = q.dim(0), Hq = p.heads_q;

  TensorMap out;
  if (backward) {
    const DType grad_t = unrounded ? DType::fp32 : p.dtype;
    out.emplace("dQ", HostTensor(grad_t, q.shape()));
    out.emplace("dK", HostTensor(grad_t, k.shape()));
    out.emplace("dV", HostTensor(grad_t, v.shape()));
    if (p.sinks) out.emplace("dsinks", HostTensor(DType::fp32, {Hq}));  // zeros, the sequences' added
  } else {
    out.emplace("O", HostTensor(unrounded ? DType::fp32 : p.dtype, {Tq, Hq, p.head_dim_v}));
    out.emplace("lse", HostTensor(DType::fp32, {Hq, Tq}));
  }
  const bool dense_plant = plant != Plant::varlen_key_offset && plant != Plant::varlen_max_alignment &&
                           plant != Plant::varlen_seqused_ignored && plant != Plant::batch_variant_tiles &&
                           plant != Plant::packed_variant_tiles;
  // The variant-tile plants' tiles follow the packed batch (each sequence runs as a batch of one).
  const bool small_tiles = plant == Plant::packed_variant_tiles || (plant == Plant::batch_variant_tiles && B == 1);
  for (int64_t b = 0; b < B; ++b) {
    int64_t k0 = cu_k[b], lk = plant == Plant::varlen_seqused_ignored ? cu_k[b + 1] - cu_k[b] : used[b];
    const int64_t q0 = cu_q[b], lq = cu_q[b + 1] - cu_q[b];
    int64_t foreign = 0;  // leading keys that belong to the previous sequence (key_offset)
    if (plant == Plant::varlen_key_offset && b > 0 && k0 > 0) --k0, ++lk, foreign = 1;
    const sdpa::Problem s = dense_sequence(p, lq, lk);
    TensorMap sin;
    sin.emplace("q", rows_of(q, q0, lq));
    sin.emplace("k", rows_of(k, k0, lk));
    sin.emplace("v", rows_of(v, k0, lk));
    if (backward) sin.emplace("dO", rows_of(in.at("dO"), q0, lq));
    add_sequence_extras(p, in, b, sin, plant == Plant::fp8_descale_head0 ? 0 : b);
    DenseOptions opt;
    opt.unrounded = unrounded;
    if (small_tiles) opt.key_tile = sdpa::kBatchVariantTile;
    if (plant == Plant::varlen_max_alignment) opt.align = p.seq_k - p.seq_q;
    const TensorMap r = flash_run_dense(s, sin, dense_plant ? plant : Plant::none, opt);
    if (backward) {
      put_rows(out.at("dQ"), r.at("dQ"), q0, 0);
      put_rows(out.at("dK"), r.at("dK"), k0, foreign);
      put_rows(out.at("dV"), r.at("dV"), k0, foreign);
      // A sequence's share added (dsinks_last_batch: stored over the others'; dsinks_in_dtype: the
      // sum rounded to the dtype).
      for (int64_t h = 0; p.sinks && h < Hq; ++h) {
        double sum = r.at("dsinks").get(h) + (plant == Plant::dsinks_last_batch ? 0.0 : out.at("dsinks").get(h));
        if (plant == Plant::dsinks_in_dtype) sum = round_to(p.dtype, static_cast<float>(sum));
        out.at("dsinks").set(h, sum);
      }
      continue;
    }
    put_rows(out.at("O"), r.at("O"), q0, 0);
    const HostTensor& lse = r.at("lse");  // [1, Hq, lq]
    for (int64_t h = 0; h < Hq; ++h)
      for (int64_t i = 0; i < lq; ++i) out.at("lse").set(h * Tq + q0 + i, lse.get(h * lq + i));
  }
  return out;
}

}  // namespace opcts::host_sdpa
