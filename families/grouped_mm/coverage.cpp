// The edge classes of docs/coverage.md that grouped_mm's problems reach (`opcts list --coverage`).
#include <algorithm>
#include <string>
#include <vector>

#include "families/grouped_mm/grouped_mm.hpp"

namespace opcts::grouped_mm {

std::vector<std::string> edge_classes() {
  return {"empty group",   "one group holding all", "group sizes not multiples of 16", "rows after the last offset",
          "partial tiles", "zero-size dimensions"};
}

std::vector<std::string> edge_classes_of(const Problem& p) {
  std::vector<std::string> out;
  const std::vector<int64_t> sizes = group_sizes(p);
  const int64_t total = p.split_total();
  if (std::count(sizes.begin(), sizes.end(), 0) > 0) out.push_back("empty group");
  if (p.groups > 1 && total > 0 && std::count(sizes.begin(), sizes.end(), total) == 1)
    out.push_back("one group holding all");
  if (std::any_of(sizes.begin(), sizes.end(), [](int64_t s) { return s % 16 != 0; }))
    out.push_back("group sizes not multiples of 16");
  if (p.tail > 0) out.push_back("rows after the last offset");
  if (p.n % 128 != 0 || p.k % 128 != 0 || p.m % 128 != 0) out.push_back("partial tiles");
  if (p.m == 0 || p.n == 0 || p.k == 0 || p.groups == 0) out.push_back("zero-size dimensions");
  return out;
}

}  // namespace opcts::grouped_mm
