// The tolerance table (cases/tolerances.yaml): a metric and bounds per family × output × dtype.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "judge/compare.hpp"
#include "judge/manifest.hpp"
#include "numerics/dtype.hpp"

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
  // "path:line:column" of the rule and of its narrowing keys (empty when absent), for errors
  // found after loading (rules_name_problems).
  std::string at, output_at, dtype_at, problem_at;
};

/// What a RuleCheck finds wrong with a rule: the YAML key at fault and why.
struct RuleProblem {
  std::string key;
  std::string why;
};
/// A check of each rule as it loads (the Suite's: its family, impl and arch globs name something).
using RuleCheck = std::function<std::optional<RuleProblem>(const ToleranceRule&)>;

/// One output of one catalog problem, as a rule's `output:`, `dtype:` and `problem:` see it.
struct RuleTarget {
  std::string problem_id, output, dtype;
};

class ToleranceTable {
 public:
  /// Loads `{tolerances: [rule...]}`; every rule needs a `why:` deriving it. `accumulator:`
  /// (judge/accumulator.hpp) and `false_alarm:` belong to the bounded metric. Throws YamlError
  /// (file:line:column), also at the key a `check` names.
  static ToleranceTable load(const std::string& path, const RuleCheck& check = {});
  /// The last rule that matches (later rules refine earlier ones), then the manifest's
  /// tolerance entry for the case, if any, overrides its fields; `provisional` when the rule's
  /// accumulator is a stand-in and no manifest entry states one. Throws std::runtime_error
  /// when no rule covers the output: an output without a tolerance is a catalog bug.
  Tolerance resolve(const std::string& family, const std::string& output, DType dtype, const std::string& impl,
                    const std::string& arch, const std::string& case_id, const Manifest* manifest) const;
  const std::vector<ToleranceRule>& rules() const { return rules_; }
  /// Checks that every rule's `problem:` glob, `output:` and `dtype:` together name at least
  /// one output of a loaded problem of its family (`targets`: family name → every output of
  /// every catalog problem). A rule that can apply to nothing would leave a wider rule in force
  /// (`output: outt` silently loosened scatter_add): a YamlError at the key at fault. Families
  /// without a loaded problem are not checked (nothing to check against).
  void check_targets(const std::map<std::string, std::vector<RuleTarget>>& targets) const;

 private:
  std::vector<ToleranceRule> rules_;
};

}  // namespace opcts
