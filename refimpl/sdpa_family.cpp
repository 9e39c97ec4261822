// The sdpa family: YAML problems, ids, inputs and references wired into the registry.
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <limits>

#include "harness/rng.hpp"
#include "harness/yaml_util.hpp"
#include "refimpl/sdpa.hpp"

namespace opcts {

namespace {

using sdpa::Problem;

// `heads: 12` or `heads: {q: 32, kv: 8}`; likewise `seq`.
std::pair<int64_t, int64_t> pair_field(const YAML::Node& n, const char* field, const char* a, const char* b) {
  const YAML::Node v = n[field];
  if (!v) throw std::runtime_error(std::string("missing field '") + field + "'");
  if (v.IsScalar()) {
    const auto x = field_as<int64_t>(n, field);
    return {x, x};
  }
  if (!v.IsMap() || !v[a] || !v[b])
    throw std::runtime_error(std::string("field '") + field + "' must be a number or {" + a + ": N, " + b + ": N}");
  for (const auto& kv : v) {
    const auto k = kv.first.as<std::string>();
    if (k != a && k != b)
      throw std::runtime_error(std::string("field '") + field + "': unknown key '" + k + "' (expected " + a + ", " + b + ")");
  }
  return {field_as<int64_t>(v, a), field_as<int64_t>(v, b)};
}

bool bool_field(const YAML::Node& n, const char* field) { return field_as<bool>(n, field); }

// Consecutive rows (storage order: a head's queries or keys; heads of one position in BSHD)
// that share one same-precision statistic in the ref_relative bound (SdpaFamily::outputs).
constexpr int64_t kTileRows = 16;

constexpr const char* kFields[] = {"dtype",  "batch",     "heads",  "seq",           "head_dim", "mask",
                                   "scale",  "window",    "softcap", "attn_mask",    "poison_masked",
                                   "layout", "direction", "expect_error"};

// The boolean rule of the attn_mask inputs (sdpa.hpp): row i ≡ 3 (mod 8) fully masked, every
// other element kept with probability 0.8, element e of the mask tensor drawing stream 4.
bool mask_keeps(uint64_t seed, int64_t e, int64_t row) { return row % 8 != 3 && uniform01(seed, 4, e) < 0.8; }

class SdpaFamily final : public Family {
 public:
  std::string_view name() const override { return "sdpa"; }

  // Fields: dtype; batch (default 1); heads (N or {q, kv}); seq (N or {q, k}); head_dim (N or
  // {qk, v}); mask none | causal_upper_left | causal_lower_right; scale; window {left, right}
  // (-1 = unbounded, either may be left out) or none; softcap; attn_mask none | bool | additive
  // or {kind: bool | additive, per_batch, per_head}; poison_masked; layout bhsd | bshd;
  // direction forward | backward; expect_error (a negative case: the argument impls must refuse).
  ProblemPtr parse(const YAML::Node& n) const override {
    if (!n.IsMap()) throw std::runtime_error("an sdpa problem must be a map");
    for (const auto& kv : n) {
      const auto k = kv.first.as<std::string>();
      bool ok = false;
      for (const char* f : kFields) ok = ok || k == f;
      if (!ok)
        throw std::runtime_error("unknown sdpa field '" + k +
                                 "' (expected dtype, batch, heads, seq, head_dim, mask, scale, window, softcap, "
                                 "attn_mask, poison_masked, layout, direction, expect_error)");
    }
    auto p = std::make_shared<Problem>();
    if (!n["dtype"]) throw std::runtime_error("missing field 'dtype'");
    p->dtype = parse_dtype(field_as<std::string>(n, "dtype"));
    p->batch = n["batch"] ? field_as<int64_t>(n, "batch") : 1;
    std::tie(p->heads_q, p->heads_kv) = pair_field(n, "heads", "q", "kv");
    std::tie(p->seq_q, p->seq_k) = pair_field(n, "seq", "q", "k");
    if (!n["head_dim"]) throw std::runtime_error("missing field 'head_dim'");
    std::tie(p->head_dim, p->head_dim_v) = pair_field(n, "head_dim", "qk", "v");
    p->mask = n["mask"] ? sdpa::parse_mask(field_as<std::string>(n, "mask")) : sdpa::Mask::none;
    if (n["scale"]) p->scale = field_as<double>(n, "scale");
    if (const YAML::Node w = n["window"]) {
      if (w.IsScalar() && w.Scalar() == "none") {
      } else if (w.IsMap()) {
        for (const auto& kv : w) {
          const auto k = kv.first.as<std::string>();
          if (k != "left" && k != "right") throw std::runtime_error("field 'window': unknown key '" + k + "' (expected left, right)");
        }
        if (w["left"]) p->window_left = field_as<int64_t>(w, "left");
        if (w["right"]) p->window_right = field_as<int64_t>(w, "right");
      } else {
        throw std::runtime_error("field 'window' must be {left: L, right: R} (-1 = unbounded) or none");
      }
    }
    if (n["softcap"]) p->softcap = field_as<double>(n, "softcap");
    if (const YAML::Node m = n["attn_mask"]) {
      auto kind = [&](const std::string& k) {
        if (k == "none") return sdpa::MaskTensor::none;
        if (k == "bool" || k == "boolean") return sdpa::MaskTensor::boolean;
        if (k == "additive") return sdpa::MaskTensor::additive;
        throw std::runtime_error("field 'attn_mask': unknown kind '" + k + "' (expected none, bool or additive)");
      };
      if (m.IsScalar()) {
        p->mask_tensor = kind(m.Scalar());
      } else if (m.IsMap()) {
        for (const auto& kv : m) {
          const auto k = kv.first.as<std::string>();
          if (k != "kind" && k != "per_batch" && k != "per_head")
            throw std::runtime_error("field 'attn_mask': unknown key '" + k + "' (expected kind, per_batch, per_head)");
        }
        if (!m["kind"]) throw std::runtime_error("field 'attn_mask': missing 'kind' (bool or additive)");
        p->mask_tensor = kind(field_as<std::string>(m, "kind"));
        if (m["per_batch"]) p->mask_per_batch = bool_field(m, "per_batch");
        if (m["per_head"]) p->mask_per_head = bool_field(m, "per_head");
      } else {
        throw std::runtime_error("field 'attn_mask' must be none, bool, additive or {kind, per_batch, per_head}");
      }
    }
    if (n["poison_masked"]) p->poison_masked = bool_field(n, "poison_masked");
    if (n["layout"]) {
      const auto l = field_as<std::string>(n, "layout");
      if (l == "bhsd") p->layout = sdpa::Layout::bhsd;
      else if (l == "bshd") p->layout = sdpa::Layout::bshd;
      else throw std::runtime_error("field 'layout': unknown layout '" + l + "' (expected bhsd or bshd)");
    }
    if (n["direction"]) {
      const auto d = field_as<std::string>(n, "direction");
      if (d == "forward") p->direction = sdpa::Direction::forward;
      else if (d == "backward") p->direction = sdpa::Direction::backward;
      else throw std::runtime_error("field 'direction': unknown direction '" + d + "' (expected forward or backward)");
    }
    try {
      p->validate();
    } catch (const std::invalid_argument& e) {
      throw std::runtime_error(e.what());
    }
    const std::string expect = n["expect_error"] ? field_as<std::string>(n, "expect_error") : "";
    const auto v = sdpa::contract_violation(*p);
    if (v && expect != v->argument)
      throw std::runtime_error("the problem breaks the argument contract (" + v->why + "): it needs expect_error: " +
                               v->argument);
    if (!v && !expect.empty()) throw std::runtime_error("expect_error: " + expect + " given, but the problem is valid");
    return p;
  }

  std::string problem_id(const opcts::Problem& p) const override { return sdpa::problem_id(get(p)); }

  ProblemPtr parse_id(std::string_view id) const override {
    return std::make_shared<Problem>(sdpa::parse_problem_id(id));
  }

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
    // The rows of the ref_relative bound (harness/compare.hpp), the units whose largest
    // same-precision error before rounding is the yardstick: kTileRows consecutive rows of
    // O, dQ, dK or dV, and each lse alone (bounded by its floor). One row of D values can
    // carry as few as one independent rounding: dQ_i of a row with two keys moves along
    // k_1 − k_2 by dS_i1's rounding (Σ_j dS_ij = 0), dK_j and dV_j of a key one row sees by
    // that row's, O_i of a near one-hot row by its second key's P. The largest error of one
    // such row is one sample, and another kernel's sample exceeds twice it with probability
    // ~0.3 (two half-normals); a tile of 16 rows holds 16 or more (under 2% for 16
    // independent samples, and every element adds an independent rounding of its own).
    if (p.direction == sdpa::Direction::backward)
      return {{"dQ", p.dtype, kTileRows * p.head_dim},
              {"dK", p.dtype, kTileRows * p.head_dim},
              {"dV", p.dtype, kTileRows * p.head_dim_v}};
    return {{"O", p.dtype, kTileRows * p.head_dim_v}, {"lse", DType::fp32, 1}};
  }

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
      HostTensor m(boolean ? DType::fp32 : p.dtype, sdpa::mask_shape(p));
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
  std::string reference_version() const override { return "sdpa-ref-5"; }

  // Exact zeros that a correct result has by construction: O and dQ rows of query rows that
  // see no key (causal_lower_right with Sq > Sk, windows, attn_mask rows i ≡ 3 mod 8), dK and
  // dV rows of keys that no row sees. Nothing else is exactly 0 with N(0, 1) inputs beyond
  // chance (the trust check also allows the reference's own zeros); lse is -inf there, never 0.
  double max_zero_fraction(const opcts::Problem& pp, const std::string& output) const override {
    const auto& p = get(pp);
    if (output == "O" || output == "dQ") {
      if (p.seq_q == 0) return 0;
      int64_t empty = 0;
      for (int64_t i = 0; i < p.seq_q; ++i)
        empty += p.keys_of_row(i) == 0 || (p.mask_tensor != sdpa::MaskTensor::none && i % 8 == 3);
      return static_cast<double>(empty) / static_cast<double>(p.seq_q);
    }
    if (output == "dK" || output == "dV") {
      if (p.seq_k == 0) return 0;
      const auto unseen = sdpa::unseen_keys(p);
      return static_cast<double>(std::count(unseen.begin(), unseen.end(), 1)) / static_cast<double>(p.seq_k);
    }
    return 0;
  }

  // Inputs and outputs in the problem's dtype (the boolean mask as bytes), lse in fp32.
  double device_bytes(const opcts::Problem& pp) const override {
    const auto& p = get(pp);
    const double lse = static_cast<double>(p.batch) * p.heads_q * p.seq_q * 4;
    return cost(p).bytes + lse;
  }

 private:
  static const Problem& get(const opcts::Problem& p) { return dynamic_cast<const Problem&>(p); }
};

}  // namespace

void register_sdpa_family(Registry& reg) { reg.add(std::make_unique<SdpaFamily>()); }

}  // namespace opcts
