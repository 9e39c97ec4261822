// The edge classes of docs/coverage.md that int4_mm's problems reach (`opcts list --coverage`).
#include <string>
#include <vector>

#include "families/int4_mm/int4_mm.hpp"

namespace opcts::int4_mm {

std::vector<std::string> edge_classes() {
  return {"M = 1 decode", "partial tiles", "K and group divisibility", "zero-size dimensions", "extreme codes"};
}

std::vector<std::string> edge_classes_of(const Problem& p) {
  std::vector<std::string> out;
  if (p.m == 1) out.push_back("M = 1 decode");
  if (p.m % 16 != 0 || p.n % 128 != 0 || p.k % 128 != 0) out.push_back("partial tiles");
  // K that leaves a partial quantization group, or a group other than the common 128.
  if (p.group > 0 && (p.k % p.group != 0 || p.group != 128)) out.push_back("K and group divisibility");
  if (p.m == 0 || p.n == 0 || p.k == 0) out.push_back("zero-size dimensions");
  if (p.fill != Fill::random) out.push_back("extreme codes");  // zero points at the ends, every code
  return out;
}

}  // namespace opcts::int4_mm
