// The sdpa family: YAML problems, ids, inputs and references wired into the registry; its plugin ABI bytes.
#include <algorithm>
#include <limits>

#include "core/abi_impl.hpp"
#include "core/kit_family.hpp"
#include "families/sdpa/sdpa.hpp"
#include "numerics/rng.hpp"

namespace opcts {

namespace {

using sdpa::Problem;

// Consecutive rows (storage order: a head's queries or keys; heads of one position in BSHD)
// that share one same-precision statistic in the ref_relative bound (SdpaFamily::outputs).
constexpr int64_t kTileRows = 16;

// The boolean rule of the attn_mask inputs (sdpa.hpp): row i ≡ 3 (mod 8) fully masked, every
// other element kept with probability 0.8, element e of the mask tensor drawing stream 4.
bool mask_keeps(uint64_t seed, int64_t e, int64_t row) { return row % 8 != 3 && uniform01(seed, 4, e) < 0.8; }

class SdpaFamily final : public KitFamily<Problem> {
 public:
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
    const double fwd = 2.0 * p.batch * p.heads_q * p.seq_q * p.seq_k * static_cast<double>(p.head_dim + p.head_dim_v);
    const bool bwd = p.direction == sdpa::Direction::backward;
    const double q = static_cast<double>(p.heads_q) * p.seq_q, kv = static_cast<double>(p.heads_kv) * p.seq_k;
    // q, k, v, O; backward adds dO, dQ, dK, dV.
    double elems = q * (p.head_dim + p.head_dim_v) + kv * (p.head_dim + p.head_dim_v);
    if (bwd) elems *= 2;
    elems *= static_cast<double>(p.batch);
    double bytes = elems * storage_bytes(p.dtype);
    if (p.mask_tensor != sdpa::MaskTensor::none) {
      double m = 1;
      for (int64_t x : sdpa::mask_shape(p)) m *= static_cast<double>(x);
      bytes += m * (p.mask_tensor == sdpa::MaskTensor::boolean ? 1.0 : storage_bytes(p.dtype));
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
    if (p.direction == sdpa::Direction::backward)
      return {{"dQ", p.dtype, sdpa::q_shape(p), kTileRows * p.head_dim},
              {"dK", p.dtype, sdpa::k_shape(p), kTileRows * p.head_dim},
              {"dV", p.dtype, sdpa::v_shape(p), kTileRows * p.head_dim_v}};
    return {{"O", p.dtype, sdpa::o_shape(p), kTileRows * p.head_dim_v}, {"lse", DType::fp32, sdpa::lse_shape(p), 1}};
  }

  std::vector<unsigned char> abi_params(const opcts::Problem& p) const override { return sdpa::abi_params(get(p)); }

  TensorMap make_inputs(const opcts::Problem& pp, uint64_t seed) const override {
    const auto& p = get(pp);
    TensorMap in;
    in.emplace("q", HostTensor(p.dtype, sdpa::q_shape(p)));
    in.emplace("k", HostTensor(p.dtype, sdpa::k_shape(p)));
    in.emplace("v", HostTensor(p.dtype, sdpa::v_shape(p)));
    // Standard normal q, k, v: with the default scale the scores are about N(0, 1), as in
    // trained models' attention, and V rows of unit size keep O's error visible.
    fill_normal(in.at("q"), seed, 0, 1.0);
    fill_normal(in.at("k"), seed, 1, 1.0);
    fill_normal(in.at("v"), seed, 2, 1.0);
    if (p.direction == sdpa::Direction::backward) {
      in.emplace("dO", HostTensor(p.dtype, sdpa::o_shape(p)));
      fill_normal(in.at("dO"), seed, 3, 1.0);
    }
    if (p.mask_tensor != sdpa::MaskTensor::none) {
      const bool boolean = p.mask_tensor == sdpa::MaskTensor::boolean;
      HostTensor m(boolean ? DType::bool8 : p.dtype, sdpa::mask_shape(p));
      if (!boolean) fill_normal(m, seed, 5, 1.0);
      const int64_t n = m.numel();
      for (int64_t e = 0; e < n; ++e) {
        const int64_t row = (e / std::max<int64_t>(p.seq_k, 1)) % std::max<int64_t>(p.seq_q, 1);
        const bool keep = mask_keeps(seed, e, row);
        if (boolean) m.set(e, keep ? 1.0 : 0.0);
        else if (!keep) m.set(e, -std::numeric_limits<double>::infinity());
      }
      in.emplace("attn_mask", std::move(m));
    }
    if (p.poison_masked) {
      const auto unseen = sdpa::unseen_keys(p);
      const double nan = std::numeric_limits<double>::quiet_NaN();
      const sdpa::Strides ks = sdpa::k_strides(p), vs = sdpa::v_strides(p);
      for (int64_t b = 0; b < p.batch; ++b)
        for (int64_t h = 0; h < p.heads_kv; ++h)
          for (int64_t j = 0; j < p.seq_k; ++j) {
            if (!unseen[j]) continue;
            for (int64_t d = 0; d < p.head_dim; ++d) in.at("k").set(ks.at(b, h, j) + d, nan);
            for (int64_t d = 0; d < p.head_dim_v; ++d) in.at("v").set(vs.at(b, h, j) + d, nan);
          }
    }
    return in;
  }

  References reference(const opcts::Problem& pp, const TensorMap& inputs) const override {
    const auto& p = get(pp);
    return p.direction == sdpa::Direction::backward ? sdpa::backward_reference(p, inputs) : sdpa::reference(p, inputs);
  }

  // Bump when sdpa::reference or make_inputs changes: cached references are then recomputed.
  std::string reference_version() const override { return "sdpa-ref-9"; }

  // Inputs and outputs in the problem's dtype (the boolean mask as bytes), lse in fp32.
  double device_bytes(const opcts::Problem& pp) const override {
    const auto& p = get(pp);
    const double lse = static_cast<double>(p.batch) * p.heads_q * p.seq_q * 4;
    return cost(pp).bytes + lse;
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
  c.softcap = p.softcap;
  c.attn_mask = abi_value(p.mask_tensor);
  c.mask_per_batch = p.mask_per_batch;
  c.mask_per_head = p.mask_per_head;
  c.layout = abi_value(p.layout);
  c.direction = abi_value(p.direction);
  return abi_bytes(c);
}

}  // namespace opcts::sdpa
