// The coverage report: which edge classes where shipped kernels broke (docs/coverage.md) the
// selected problems of each family reach, from its grids and edges and from its samples.
#pragma once

#include <functional>
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

/// One impl of a family: the distinct selected problems it runs (not SKIP) and how many of them
/// reach each of the family's classes, in the family's order.
struct CoverageImpl {
  std::string impl;
  size_t problems = 0;
  std::vector<size_t> reached;
};

/// One family: its distinct selected problems (sampled among them), each class it declares
/// (Family::edge_classes, then "invalid arguments" for its negative cases) with its counts,
/// in declaration order; `declared` is false for a family that declares none; with a `runs`
/// predicate, its impls in name order.
struct CoverageRow {
  std::string family;
  size_t problems = 0, sampled = 0;
  bool declared = false;
  std::vector<CoverageClass> classes;
  std::vector<CoverageImpl> impls;
};

/// Rows in family order over the cases (each problem counted once, whatever its impls); with
/// `runs` (whether a case runs rather than SKIPs: Suite::pre_run), each family's impls too.
std::vector<CoverageRow> coverage(const std::vector<Case>& cases,
                                  const std::function<bool(const Case&)>& runs = nullptr);

/// Markdown: per family, a table of its classes with counts, then the classes no selected
/// problem reaches ("never reached: ..."), or that it declares none; where impls were counted, a
/// table of each impl's problems and the classes the family's problems reach that none it runs
/// does.
std::string coverage_markdown(const std::vector<CoverageRow>& rows);

}  // namespace opcts
