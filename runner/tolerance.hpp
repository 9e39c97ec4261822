// The tolerance table (cases/tolerances.yaml): a metric and bounds per family × output × dtype.
#pragma once

#include <string>
#include <vector>

#include "runner/compare.hpp"
#include "core/dtype.hpp"
#include "runner/manifest.hpp"

namespace opcts {

/// One row: which outputs it covers (empty field = any) and the tolerance it gives.
struct ToleranceRule {
  std::string family;
  std::string output;               // "" = every output
  std::vector<std::string> dtypes;  // output dtypes; empty = any
  std::string impl;                 // glob over impl names ("cuda.*"); "" = any
  std::string arch;                 // glob over arch names; "" = any
  std::string problem;              // glob over problem ids (the case id after '/'); "" = any
  Tolerance tol;
  std::string why;
};

class ToleranceTable {
 public:
  /// Loads `{tolerances: [rule...]}`; every rule needs a `why:` deriving it. `accumulator:`
  /// (runner/accumulator.hpp) and `false_alarm:` belong to the bounded metric. Throws YamlError.
  static ToleranceTable load(const std::string& path);
  /// The last rule that matches (later rules refine earlier ones), then the manifest's
  /// tolerance entry for the case, if any, overrides its fields. Throws std::runtime_error
  /// when no rule covers the output: an output without a tolerance is a catalog bug.
  Tolerance resolve(const std::string& family, const std::string& output, DType dtype, const std::string& impl,
                    const std::string& arch, const std::string& case_id, const Manifest* manifest) const;
  const std::vector<ToleranceRule>& rules() const { return rules_; }

 private:
  std::vector<ToleranceRule> rules_;
};

}  // namespace opcts
