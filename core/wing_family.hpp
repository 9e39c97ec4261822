// A KitFamily whose inputs, references, negative cases and plugin ABI bytes are the wing's own
// free functions of its problem, so that a wing's family class states only what differs
// (name, field table, cost, outputs, versions) instead of forwarding each part by hand.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/family.hpp"
#include "core/kit_family.hpp"

namespace opcts {

namespace wing_calls {

// Called from outside the family class: inside it the unqualified names would find the class's
// own members and stop there, while here they are looked up in the problem's namespace (ADL).
template <class P>
TensorMap inputs_of(const P& p, uint64_t seed) {
  return make_inputs(p, seed);
}
template <class P>
References reference_of(const P& p, const TensorMap& inputs) {
  return reference(p, inputs);
}
template <class P>
std::vector<unsigned char> abi_params_of(const P& p) {
  return abi_params(p);
}

}  // namespace wing_calls

/// A family whose problem P (in the wing's namespace) comes with the wing's free functions
/// `make_inputs(const P&, uint64_t seed)`, `reference(const P&, const TensorMap&)` and
/// `abi_params(const P&)`, and whose negative cases name their refused argument in
/// `P::expect_error`. The wing's class adds name, fields, cost and outputs.
template <class P>
class WingFamily : public KitFamily<P> {
 public:
  TensorMap make_inputs(const Problem& p, uint64_t seed) const override {
    return wing_calls::inputs_of(this->get(p), seed);
  }
  References reference(const Problem& p, const TensorMap& inputs) const override {
    return wing_calls::reference_of(this->get(p), inputs);
  }
  std::vector<unsigned char> abi_params(const Problem& p) const override {
    return wing_calls::abi_params_of(this->get(p));
  }
  std::string expected_error(const Problem& p) const override { return this->get(p).expect_error; }
};

}  // namespace opcts
