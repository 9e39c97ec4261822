// The coverage report: which edge classes where shipped kernels broke (docs/coverage.md) the
// selected problems of each family reach, from its grids and edges and from its samples.
#pragma once

#include <string>
#include <vector>

#include "core/family.hpp"

namespace opcts {

/// One family's edge class: how many distinct selected problems reach it, and how many of
/// those came from a catalog's `samples:` block.
struct CoverageClass {
  std::string name;
  size_t problems = 0, sampled = 0;
};

/// One family: its distinct selected problems (sampled among them), each class it declares
/// (Family::edge_classes, then "invalid arguments" for its negative cases) with its counts,
/// in declaration order; `declared` is false for a family that declares none.
struct CoverageRow {
  std::string family;
  size_t problems = 0, sampled = 0;
  bool declared = false;
  std::vector<CoverageClass> classes;
};

/// Rows in family order over the cases (each problem counted once, whatever its impls).
std::vector<CoverageRow> coverage(const std::vector<Case>& cases);

/// Markdown: per family, a table of its classes with counts, then the classes no selected
/// problem reaches ("never reached: ..."), or that it declares none.
std::string coverage_markdown(const std::vector<CoverageRow>& rows);

}  // namespace opcts
