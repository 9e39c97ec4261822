// The tolerance table (cases/tolerances.yaml): a metric and bounds per family × output × dtype.
#pragma once

#include <functional>
#include <optional>
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
  // `provisional: true`: the rule's accumulator is a stand-in, the loosest model the family's
  // paths are known to have, for an arch whose manifest measured none (`opcts probe
  // accumulators` prints the entry); a case judged under it is reported provisional.
  bool provisional = false;
};

/// What a RuleCheck finds wrong with a rule: the YAML key at fault and why.
struct RuleProblem {
  std::string key;
  std::string why;
};
/// A check of each rule as it loads (the Suite's: its family, impl and arch globs name something).
using RuleCheck = std::function<std::optional<RuleProblem>(const ToleranceRule&)>;

class ToleranceTable {
 public:
  /// Loads `{tolerances: [rule...]}`; every rule needs a `why:` deriving it. `accumulator:`
  /// (runner/accumulator.hpp) and `false_alarm:` belong to the bounded metric. Throws YamlError
  /// (file:line:column), also at the key a `check` names.
  static ToleranceTable load(const std::string& path, const RuleCheck& check = {});
  /// The last rule that matches (later rules refine earlier ones), then the manifest's
  /// tolerance entry for the case, if any, overrides its fields; `provisional` when the rule's
  /// accumulator is a stand-in and no manifest entry states one. Throws std::runtime_error
  /// when no rule covers the output: an output without a tolerance is a catalog bug.
  Tolerance resolve(const std::string& family, const std::string& output, DType dtype, const std::string& impl,
                    const std::string& arch, const std::string& case_id, const Manifest* manifest) const;
  const std::vector<ToleranceRule>& rules() const { return rules_; }

 private:
  std::vector<ToleranceRule> rules_;
};

}  // namespace opcts
