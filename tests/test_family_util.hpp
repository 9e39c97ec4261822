// Test helpers shared by the families' tests: an impl judged by the bounded metric, and the two
// catalog-wide checks every family with negative cases and planted impls runs.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/errors.hpp"
#include "core/family.hpp"
#include "runner/catalog.hpp"
#include "runner/compare.hpp"

namespace opcts::testutil {

inline const ArchInfo& host_arch() {
  static const ArchInfo h{"host", "host"};
  return h;
}

/// Mismatches of `impl`'s output `out` on problem p against the family's reference, bounded
/// metric with factor 1 (the family's own derived bound).
inline int64_t bounded_mismatches(const Family& f, const Impl& impl, const Problem& p, const std::string& out) {
  const TensorMap in = f.make_inputs(p, case_seed(f, p));
  const References ref = f.reference(p, in);
  const TensorMap got = impl.run(p, in, RunContext{&host_arch(), -1});
  std::vector<WorstElement> worst;
  Tolerance t;
  t.metric = Metric::bounded;
  t.factor = 1;
  return compare_output(out, got.at(out), ref.exact.at(out), nullptr, t, worst, 5, &ref.bound.at(out)).mismatches;
}

/// Every negative case of `entries` makes `impl` throw InvalidArgument naming the argument
/// Family::expected_error names; at least `at_least` of them.
inline void expect_negative_cases_refused(const Family& f, const Impl& impl, const std::vector<CatalogEntry>& entries,
                                          int at_least) {
  int n = 0;
  for (const auto& e : entries) {
    const std::string want = f.expected_error(*e.problem);
    if (want.empty()) continue;
    const TensorMap in = f.make_inputs(*e.problem, case_seed(f, *e.problem));
    try {
      impl.run(*e.problem, in, RunContext{&host_arch(), -1});
      ADD_FAILURE() << e.problem_id << ": accepted";
    } catch (const InvalidArgument& err) {
      EXPECT_EQ(err.argument, want) << e.problem_id << ": " << err.what();
    }
    ++n;
  }
  EXPECT_GE(n, at_least);
}

/// The planted impl `name` fails (bounded metric) on every smoke problem of `entries` it takes
/// (it SKIPs those that do not probe its bug), and takes at least `at_least` of them.
inline void expect_planted_fails_on_smoke(const Family& f, const Impl* planted, const std::vector<CatalogEntry>& entries,
                                          const std::string& out, int at_least) {
  ASSERT_TRUE(planted && planted->planted());
  int n = 0;
  for (const auto& e : entries) {
    if (e.tier != Tier::smoke || !planted->supports(*e.problem, host_arch()).ok) continue;
    EXPECT_GT(bounded_mismatches(f, *planted, *e.problem, out), 0) << planted->name() << " passed " << e.problem_id;
    ++n;
  }
  EXPECT_GE(n, at_least) << planted->name();
}

}  // namespace opcts::testutil
