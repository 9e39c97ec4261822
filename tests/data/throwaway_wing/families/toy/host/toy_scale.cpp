// host.toy: y = x · 2^shift with ldexpf; host.toy_tail_unscaled, the same leaving the last
// element unscaled (a tail bug the suite must catch wherever shift != 0).
#include <bit>
#include <cmath>
#include <memory>

#include "families/toy/toy.hpp"

namespace opcts {

namespace {

class HostToy final : public Impl {
 public:
  explicit HostToy(bool tail_bug) : tail_bug_(tail_bug) {}
  std::string_view family() const override { return "toy"; }
  std::string_view name() const override { return tail_bug_ ? "host.toy_tail_unscaled" : "host.toy"; }
  std::string_view backend() const override { return "host"; }
  bool planted() const override { return tail_bug_; }
  Support supports(const Problem& pp, const ArchInfo&) const override {
    if (tail_bug_ && pp.as<toy::Problem>().shift == 0)
      return Support::no("an unscaled element is right when shift is 0");
    return Support::yes();
  }
  TensorMap run(const Problem& pp, const TensorMap& in, const RunContext&) const override {
    const auto& p = pp.as<toy::Problem>();
    const HostTensor& x = in.at("x");
    TensorMap out;
    HostTensor& y = out.emplace("y", HostTensor(DType::fp32, {p.n})).first->second;
    for (int64_t i = 0; i < p.n; ++i) {
      const float v = std::bit_cast<float>(static_cast<uint32_t>(x.code(i)));
      const bool skip = tail_bug_ && i == p.n - 1;
      y.set_code(i, std::bit_cast<uint32_t>(skip ? v : std::ldexp(v, static_cast<int>(p.shift))));
    }
    return out;
  }

 private:
  bool tail_bug_;
};

}  // namespace

void register_host_toy(Registry& reg) {
  reg.add(std::make_unique<HostToy>(false));
  reg.add(std::make_unique<HostToy>(true));
}

}  // namespace opcts
