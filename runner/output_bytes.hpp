// Outputs compared byte for byte: the checks of `opcts run --bitwise`, `--invariance` and
// `--capture`, which ask for the very same bytes where a comparison against the reference asks
// only for a bounded error.
#pragma once

#include <functional>
#include <string>

#include "numerics/tensor.hpp"

namespace opcts {

/// Whether two maps hold the same names with the same bytes (dtype, shape and strides included).
bool same_bytes(const TensorMap& a, const TensorMap& b);

/// Whether every tensor holds one code throughout (all zero, all NaN): outputs that legitimately
/// do not depend on the inputs, so a check that other inputs give other bytes says nothing there.
bool constant_outputs(const TensorMap& out);

/// Element i of t as a message names it: "o[1,0,3]".
std::string element_name(const std::string& name, const HostTensor& t, int64_t i);

/// Element i of t's value and stored bits: "0.5 (bits 0x3800)".
std::string element_value(const HostTensor& t, int64_t i);

/// The first element whose stored bits differ between a and b (in a's order), described by
/// `say(element_name, a's element_value, b's element_value)`; a tensor of a missing from b, or
/// of another size there, is described plainly. "" when every tensor's bits agree. `output`, when
/// given, receives the name of the tensor that differs (left as it was when none does).
std::string first_bit_difference(
    const TensorMap& a, const TensorMap& b,
    const std::function<std::string(const std::string&, const std::string&, const std::string&)>& say,
    std::string* output = nullptr);

}  // namespace opcts
