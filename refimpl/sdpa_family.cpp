// The sdpa family: YAML problems, ids, inputs and references wired into the registry.
#include <yaml-cpp/yaml.h>

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
  return {field_as<int64_t>(v, a), field_as<int64_t>(v, b)};
}

class SdpaFamily final : public Family {
 public:
  std::string_view name() const override { return "sdpa"; }

  ProblemPtr parse(const YAML::Node& n) const override {
    if (!n.IsMap()) throw std::runtime_error("an sdpa problem must be a map");
    for (const auto& kv : n) {
      const auto k = kv.first.as<std::string>();
      if (k != "dtype" && k != "batch" && k != "heads" && k != "seq" && k != "head_dim" && k != "mask" && k != "scale")
        throw std::runtime_error("unknown sdpa field '" + k +
                                 "' (expected dtype, batch, heads, seq, head_dim, mask, scale)");
    }
    auto p = std::make_shared<Problem>();
    if (!n["dtype"]) throw std::runtime_error("missing field 'dtype'");
    p->dtype = parse_dtype(field_as<std::string>(n, "dtype"));
    p->batch = n["batch"] ? field_as<int64_t>(n, "batch") : 1;
    std::tie(p->heads_q, p->heads_kv) = pair_field(n, "heads", "q", "kv");
    std::tie(p->seq_q, p->seq_k) = pair_field(n, "seq", "q", "k");
    if (!n["head_dim"]) throw std::runtime_error("missing field 'head_dim'");
    p->head_dim = field_as<int64_t>(n, "head_dim");
    p->mask = n["mask"] ? sdpa::parse_mask(field_as<std::string>(n, "mask")) : sdpa::Mask::none;
    if (n["scale"]) p->scale = field_as<double>(n, "scale");
    p->validate();
    return p;
  }

  std::string problem_id(const opcts::Problem& p) const override { return sdpa::problem_id(get(p)); }

  ProblemPtr parse_id(std::string_view id) const override {
    return std::make_shared<Problem>(sdpa::parse_problem_id(id));
  }

  Cost cost(const opcts::Problem& pp) const override {
    const auto& p = get(pp);
    // Two GEMMs of Sq×Sk×D per (batch, query head); masked tiles are not subtracted.
    const double flops = 4.0 * p.batch * p.heads_q * p.seq_q * p.seq_k * p.head_dim;
    const double elems = static_cast<double>(p.batch) * (2 * p.heads_q * p.seq_q + 2 * p.heads_kv * p.seq_k) * p.head_dim;
    return {flops, elems * storage_bytes(p.dtype)};
  }

  std::vector<OutputSpec> outputs(const opcts::Problem& pp) const override {
    return {{"O", get(pp).dtype}, {"lse", DType::fp32}};
  }

  TensorMap make_inputs(const opcts::Problem& pp, uint64_t seed) const override {
    const auto& p = get(pp);
    TensorMap in;
    in.emplace("q", HostTensor(p.dtype, sdpa::q_shape(p)));
    in.emplace("k", HostTensor(p.dtype, sdpa::kv_shape(p)));
    in.emplace("v", HostTensor(p.dtype, sdpa::kv_shape(p)));
    // Standard normal q, k, v: with the default scale the scores are about N(0, 1), as in
    // trained models' attention, and V rows of unit size keep O's error visible.
    fill_normal(in.at("q"), seed, 0, 1.0);
    fill_normal(in.at("k"), seed, 1, 1.0);
    fill_normal(in.at("v"), seed, 2, 1.0);
    return in;
  }

  References reference(const opcts::Problem& p, const TensorMap& inputs) const override {
    return sdpa::reference(get(p), inputs);
  }

  // Bump when sdpa::reference or make_inputs changes: cached references are then recomputed.
  std::string reference_version() const override { return "sdpa-ref-1"; }

  // O is exactly zero only in rows that see no key (causal_lower_right with Sq > Sk): that
  // fraction of the rows, and nothing more (O is a convex combination of N(0, 1) V rows, never
  // exactly 0 otherwise). lse is -inf there, never 0.
  double max_zero_fraction(const opcts::Problem& pp, const std::string& output) const override {
    const auto& p = get(pp);
    if (output != "O" || p.seq_q == 0) return 0;
    int64_t empty = 0;
    for (int64_t i = 0; i < p.seq_q; ++i) empty += p.keys_of_row(i) == 0;
    return static_cast<double>(empty) / static_cast<double>(p.seq_q);
  }

  // q, k, v and O in the problem's dtype, lse in fp32.
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
