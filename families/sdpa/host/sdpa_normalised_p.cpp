// host.normalised_p_fp8: the P arithmetic of cuDNN's fp8 SDPA forward on the host (cudnn-frontend
// node/scaled_dot_product_flash_attention.h: softmax, MUL scale_s, cast to Q's fp8 type, P·V with
// descale_s), host.flash's kernel with flash_run_normalised_p's rows. It is the correct impl under
// the model cuda.cudnn declares for fp8 q, k, v ("O@fp8_p_normalised", families/sdpa/bound.hpp), so
// that model is proven on the host as host.flash proves its own: passed by this impl, failed by
// host.normalised_p_fp8_unscaled (P cast without scale_s: the subnormal floor the model charges at
// least·l/scale_s is least·l there). The model is stated for every fp8-q, k, v forward, so this impl
// takes every dense one, variants the cuDNN graph itself declines among them (per-head descales, a
// 16-bit O, masks, ALiBi, softcaps, sinks as host.flash adds them: to l after the keys' max); the
// cuda.cudnn adapter's own gates decide what the GPU runs (sdpa_cudnn.hpp). Like the model it sums
// Q·Kᵀ and P·V in fp32: the fp8 MMA's narrower adder, which cuDNN's lse does not hold on an H200
// (docs/status/sm90.md (p)), is not emulated.
#include <memory>

#include "families/sdpa/host/sdpa_blind_spot.hpp"
#include "families/sdpa/host/sdpa_flash.hpp"
#include "gpu/host/host_impls.hpp"

namespace opcts {

namespace {

using host_sdpa::Plant;

// Why this emulation does not take p (the normalised P is a model of fp8 q, k, v forwards; the
// packed layouts' runners are host.flash's), or "".
std::string outside_the_graph(const sdpa::Problem& p) {
  if (p.fp8 != sdpa::Fp8::qkv) return "cuDNN's fp8 graph takes fp8 q, k and v";
  if (p.direction != sdpa::Direction::forward) return "cuDNN's fp8 graph is emulated as a forward only";
  if (p.layout != sdpa::Layout::bhsd && p.layout != sdpa::Layout::bshd)
    return "cuDNN's fp8 graph is emulated on the dense layouts (bhsd, bshd)";
  return "";
}

class HostSdpaNormalisedP final : public Impl {
 public:
  explicit HostSdpaNormalisedP(Plant plant) : plant_(plant) {}
  std::string_view family() const override { return "sdpa"; }
  std::string_view name() const override {
    return plant_ == Plant::fp8_p_unscaled ? "host.normalised_p_fp8_unscaled" : "host.normalised_p_fp8";
  }
  std::string_view backend() const override { return "host"; }
  bool planted() const override { return plant_ != Plant::none; }

  Support supports(const Problem& pp, const ArchInfo&) const override {
    const auto& p = pp.as<sdpa::Problem>();
    std::string why = outside_the_graph(p);
    if (why.empty() && plant_ != Plant::none) why = sdpa::planted_bug_cannot_show(p, plant_);
    return why.empty() ? Support::yes() : Support::no(why);
  }

  TensorMap run(const Problem& pp, const TensorMap& in, const RunContext&) const override {
    return host_sdpa::flash_run_normalised_p(pp.as<sdpa::Problem>(), in, plant_);
  }

  // Each row runs alone, in an order that depends on nothing but the row.
  std::vector<InvarianceAxis> invariant_axes(const Problem&) const override {
    if (plant_ != Plant::none) return {};
    return {InvarianceAxis::batch_size, InvarianceAxis::batch_position};
  }

  // Scaling by 2^8 moves no normal P's rounding: the plant shows only through the P below the
  // format's least normal. Where there are none it changes no byte; where they are few their
  // error may fit within what the per-element check leaves a correct kernel (sdpa_blind_spot.hpp).
  std::string blind_spot(const Problem& pp, const CaseEvidence& evidence) const override {
    if (plant_ == Plant::none) return "";
    const auto& p = pp.as<sdpa::Problem>();
    const std::string unchanged = host_sdpa::unchanged_blind_spot(p, evidence.inputs, plant_);
    if (!unchanged.empty()) return unchanged;
    return host_sdpa::precision_blind_spot(p, evidence, plant_, family_def().outputs(pp));
  }

 private:
  Plant plant_;
};

}  // namespace

void register_host_sdpa_normalised_p(Registry& reg) {
  reg.add(std::make_unique<HostSdpaNormalisedP>(Plant::none));
  reg.add(std::make_unique<HostSdpaNormalisedP>(Plant::fp8_p_unscaled));
}

}  // namespace opcts
