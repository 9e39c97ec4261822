// Outputs compared byte for byte (runner/output_bytes.hpp).
#include "runner/output_bytes.hpp"

#include <sstream>

namespace opcts {

bool same_bytes(const TensorMap& a, const TensorMap& b) {
  if (a.size() != b.size()) return false;
  for (const auto& [name, t] : a) {
    const auto it = b.find(name);
    if (it == b.end() || fingerprint(t) != fingerprint(it->second)) return false;
  }
  return true;
}

bool constant_outputs(const TensorMap& out) {
  for (const auto& [name, t] : out)
    for (int64_t i = 1; i < t.numel(); ++i)
      if (t.code(i) != t.code(0)) return false;
  return true;
}

std::string element_name(const std::string& name, const HostTensor& t, int64_t i) {
  std::string s = name + "[";
  const auto idx = t.unravel(i);
  for (size_t k = 0; k < idx.size(); ++k) {
    if (k) s += ',';  // two appends, not "," + to_string(...): GCC 12 warns on that (-Wrestrict, a false positive)
    s += std::to_string(idx[k]);
  }
  return s + "]";
}

std::string element_value(const HostTensor& t, int64_t i) {
  std::ostringstream m;
  m.precision(9);
  m << t.get(i) << " (bits 0x" << std::hex << t.code(i) << ")";
  return m.str();
}

std::string first_bit_difference(
    const TensorMap& a, const TensorMap& b,
    const std::function<std::string(const std::string&, const std::string&, const std::string&)>& say,
    std::string* output) {
  for (const auto& [name, x] : a) {
    const auto differs = [&, &name = name](std::string why) {
      if (output) *output = name;
      return why;
    };
    const auto it = b.find(name);
    if (it == b.end()) return differs("output '" + name + "' is in the first but not in the second");
    const HostTensor& y = it->second;
    if (x.numel() != y.numel()) return differs("output '" + name + "' has another size in the second");
    for (int64_t i = 0; i < x.numel(); ++i)
      if (x.code(i) != y.code(i))
        return differs(say(element_name(name, x, i), element_value(x, i), element_value(y, i)));
  }
  return "";
}

}  // namespace opcts
