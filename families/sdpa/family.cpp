// The sdpa family wired into the registry: outputs and their rows, costs, the inputs (inputs.cpp) and the references
// (reference.cpp, backward_reference.cpp) behind make_inputs and reference; its plugin ABI bytes.
#include <algorithm>
#include <limits>

#include "core/abi_impl.hpp"
#include "core/kit_family.hpp"
#include "families/sdpa/sdpa.hpp"

namespace opcts {

namespace {

using sdpa::Problem;

// Consecutive rows (storage order: a head's queries or keys; heads of one position in BSHD)
// that share one same-precision statistic in the ref_relative bound (SdpaFamily::outputs).
constexpr int64_t kTileRows = 16;

class SdpaFamily final : public KitFamily<Problem> {
 public:
  std::vector<std::string> edge_classes() const override { return sdpa::edge_classes(); }
  std::vector<std::string> edge_classes_of(const opcts::Problem& p) const override {
    return sdpa::edge_classes_of(get(p));
  }
  // The batch entries of a dense layout: q, k, v, dO, O, lse, dQ, dK, dV and the per-batch
  // masks, slopes and descales lead with them (the default cut). A packed batch's sequences share
  // their rows' dimension (cu_seqlens), which invariance_cut.cpp cuts by sequence; the packing
  // axis moves a batch between the dense and varlen layouts.
  int64_t Problem::*batch_field() const override { return &Problem::batch; }
  InvarianceCut invariance_cut(const opcts::Problem& p, const TensorMap& inputs, InvarianceAxis axis) const override {
    const bool batch_axis = axis == InvarianceAxis::batch_size || axis == InvarianceAxis::batch_position;
    if (axis == InvarianceAxis::packing || (batch_axis && get(p).packed()))
      return sdpa::invariance_cut(get(p), inputs, axis);
    return Family::invariance_cut(p, inputs, axis);
  }
  std::string_view name() const override { return "sdpa"; }
  const kit::FieldTable<Problem>& fields() const override { return sdpa::fields(); }

  std::string expected_error(const opcts::Problem& p) const override {
    const auto v = sdpa::contract_violation(get(p));
    return v ? v->argument : std::string();
  }

  Cost cost(const opcts::Problem& pp) const override {
    const auto& p = get(pp);
    // Forward: S = Q·Kᵀ (2·Dqk flops per score) and O = P·V (2·Dv) per (batch, query head);
    // masked tiles are not subtracted. Backward: 2.5× (FlashAttention-2's count: five GEMMs
    // of the two forward ones' size, recomputed S included).
    // Varlen: the sum over the sequences of their Sq_b·Sk_b.
    double pairs = static_cast<double>(p.batch) * p.seq_q * p.seq_k;
    if (p.packed()) {
      pairs = 0;
      for (int64_t b = 0; b < p.batch; ++b) pairs += static_cast<double>(p.seqlens_q[b]) * p.seqlens_k[b];
    }
    const double fwd = 2.0 * p.heads_q * pairs * static_cast<double>(p.head_dim + p.head_dim_v);
    const bool bwd = p.direction == sdpa::Direction::backward;
    // A paged cache is read where its sequences' keys are; it holds more (unowned pages, tails).
    const double q = static_cast<double>(p.heads_q) * p.total_q(), kv = static_cast<double>(p.heads_kv) * p.total_k();
    // q, k, v, O; backward adds dO, dQ, dK, dV (cu_seqlens are noise beside them).
    // fp8: q (qkv), k and v one byte an element (the descales are noise too).
    double bytes = q * p.head_dim * storage_bytes(p.q_dtype()) + q * p.head_dim_v * storage_bytes(p.dtype) +
                   kv * (p.head_dim + p.head_dim_v) * storage_bytes(p.kv_dtype());
    if (bwd) bytes *= 2;
    if (p.mask_tensor != sdpa::MaskTensor::none) {
      double m = 1;
      for (int64_t x : sdpa::mask_shape(p)) m *= static_cast<double>(x);
      bytes += m * (p.mask_tensor == sdpa::MaskTensor::boolean ? 1.0 : storage_bytes(p.dtype)) * (p.dbias ? 2 : 1);
    }
    if (p.block_sparse()) {
      double m = 1;
      for (int64_t x : sdpa::block_mask_shape(p)) m *= static_cast<double>(x);
      bytes += m;
    }
    return {bwd ? 2.5 * fwd : fwd, bytes};
  }

  std::vector<OutputSpec> outputs(const opcts::Problem& pp) const override {
    const auto& p = get(pp);
    // The rows of the ref_relative bound (judge/compare.hpp), the units whose largest
    // same-precision error before rounding is the yardstick: kTileRows consecutive rows of
    // O, dQ, dK or dV, and each lse alone (bounded by its floor). One row of D values can
    // carry as few as one independent rounding: dQ_i of a row with two keys moves along
    // k_1 − k_2 by dS_i1's rounding (Σ_j dS_ij = 0), dK_j and dV_j of a key one row sees by
    // that row's, O_i of a near one-hot row by its second key's P. The largest error of one
    // such row is one sample, and another kernel's sample exceeds twice it with probability
    // ~0.3 (two half-normals); a tile of 16 rows holds 16 or more (under 2% for 16
    // independent samples, and every element adds an independent rounding of its own).
    // dsinks: each head's sum over every row of every sequence, an element alone.
    if (p.direction == sdpa::Direction::backward) {
      std::vector<OutputSpec> out{{"dQ", p.dtype, sdpa::q_shape(p), kTileRows * p.head_dim},
                                  {"dK", p.dtype, sdpa::k_shape(p), kTileRows * p.head_dim},
                                  {"dV", p.dtype, sdpa::v_shape(p), kTileRows * p.head_dim_v}};
      if (p.sinks) out.push_back({"dsinks", DType::fp32, {p.heads_q}, 1});
      // dbias: kTileRows rows of the mask (a row: its Sk keys), as dQ's rows are tiled.
      if (p.dbias) out.push_back({"dbias", p.dtype, sdpa::mask_shape(p), kTileRows * p.seq_k});
      return out;
    }
    return {{"O", p.o_dtype(), sdpa::o_shape(p), kTileRows * p.head_dim_v},
            {"lse", DType::fp32, sdpa::lse_shape(p), 1}};
  }

  std::vector<unsigned char> abi_params(const opcts::Problem& p) const override { return sdpa::abi_params(get(p)); }

  TensorMap make_inputs(const opcts::Problem& p, uint64_t seed) const override {
    return sdpa::make_inputs(get(p), seed);
  }

  References reference(const opcts::Problem& pp, const TensorMap& inputs) const override {
    const auto& p = get(pp);
    if (p.packed()) return sdpa::varlen_reference(p, inputs);
    return p.direction == sdpa::Direction::backward ? sdpa::backward_reference(p, inputs) : sdpa::reference(p, inputs);
  }

  // The varlen layout came with ABI 1.1, the paged KV cache with 1.2, varlen padding rows with
  // seqused_k with 1.3, chunked-local attention with 1.4, sinks with 1.5, ALiBi with 1.6, dbias
  // and the query-broadcast attn_mask with 1.7, block masks with 1.8, fp8 with 1.9 (include/opcts/plugin.h): an impl
  // built before reads layout THD or PAGED as BHSD, a padded segment's rows as keys, no chunk, no sink, no bias,
  // a mask of one row as Sq rows, writes no dbias, reads every key block, and fp8 codes as the dtype.
  uint32_t abi_minor(const opcts::Problem& pp) const override {
    const auto& p = get(pp);
    if (p.fp8 != sdpa::Fp8::none) return 9;
    if (p.block_sparse()) return 8;
    if (p.dbias || !p.mask_per_query) return 7;
    if (p.alibi != sdpa::Alibi::none) return 6;
    if (p.sinks) return 5;
    if (p.chunk > 0) return 4;
    return p.varlen() && p.pad_k > 0 ? 3 : p.paged() ? 2 : p.varlen() ? 1 : 0;
  }
  std::string abi_minor_feature(const opcts::Problem& pp) const override {
    const auto& p = get(pp);
    if (p.fp8 == sdpa::Fp8::qkv) return "fp8 attention (fp8 q, k, v with descales)";
    if (p.fp8 == sdpa::Fp8::kv) return "an fp8 KV cache (fp8 k, v with descales)";
    if (p.block_sparse()) return "block-sparse attention (block_mask)";
    if (p.dbias) return "the additive mask's gradient (dbias)";
    if (!p.mask_per_query) return "an attn_mask broadcast over the queries ([.., 1, seq_k])";
    if (p.alibi != sdpa::Alibi::none) return "ALiBi (alibi_slopes)";
    if (p.sinks) return "attention sinks (sinks, dsinks)";
    if (p.chunk > 0) return "chunked-local attention (attention_chunk)";
    if (p.varlen() && p.pad_k > 0) return "varlen keys with padding rows and seqused_k";
    if (p.paged()) return "the paged KV cache with a block table";
    return p.varlen() ? "the varlen (THD) layout with cu_seqlens" : "";
  }

  // Bump when sdpa::reference or make_inputs changes: cached references are then recomputed.
  std::string reference_version() const override { return "sdpa-ref-18"; }

  // Inputs and outputs in the problem's dtype (the boolean mask as bytes), lse in fp32.
  double device_bytes(const opcts::Problem& pp) const override {
    const auto& p = get(pp);
    const double lse = static_cast<double>(p.total_q()) * p.heads_q * 4;
    double cache = 0;  // the paged cache beyond the keys it holds
    if (p.paged())
      cache = (static_cast<double>(sdpa::paged_geometry(p).num_pages) * p.page_size - p.total_k()) * p.heads_kv *
              (p.head_dim + p.head_dim_v) * storage_bytes(p.kv_dtype());
    return cost(pp).bytes + lse + cache;
  }
};

}  // namespace

void register_sdpa_family(Registry& reg) { reg.add(std::make_unique<SdpaFamily>()); }

}  // namespace opcts

// The plugin ABI's parameter bytes of a problem (include/opcts/plugin.h).
namespace opcts::sdpa {

std::vector<unsigned char> abi_params(const Problem& p) {
  opcts_sdpa_params c{};
  c.struct_size = sizeof c;
  c.dtype = abi_dtype(p.dtype);
  c.batch = p.batch;
  c.heads_q = p.heads_q;
  c.heads_kv = p.heads_kv;
  c.seq_q = p.seq_q;
  c.seq_k = p.seq_k;
  c.head_dim = p.head_dim;
  c.head_dim_v = p.head_dim_v;
  c.scale = p.effective_scale();
  c.mask = abi_value(p.mask);
  c.window_left = p.window_left;
  c.window_right = p.window_right;
  c.attention_chunk = p.chunk;
  c.sinks = p.sinks;
  c.alibi = abi_value(p.alibi);
  c.softcap = p.softcap;
  c.attn_mask = abi_value(p.mask_tensor);
  c.mask_per_batch = p.mask_per_batch;
  c.mask_per_head = p.mask_per_head;
  c.mask_query_broadcast = !p.mask_per_query;
  c.dbias = p.dbias;
  c.block_mask_q = p.block_q;
  c.block_mask_k = p.block_k;
  c.fp8 = abi_value(p.fp8);
  c.fp8_format = abi_dtype(p.fp8_format);
  c.descale = abi_value(p.descale);
  c.fp8_out = p.fp8_out;
  c.layout = abi_value(p.layout);
  c.direction = abi_value(p.direction);
  if (p.paged()) {
    const PagedGeometry g = paged_geometry(p);
    c.page_size = p.page_size;
    c.num_pages = g.num_pages;
    c.max_pages_per_seq = g.max_pages_per_seq;
    c.kv_layout = abi_value(p.kv_layout);
  }
  return abi_bytes(c);
}

}  // namespace opcts::sdpa
