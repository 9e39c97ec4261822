// Test helpers shared by the families' tests: an impl judged by the bounded metric as the runner judges it on the host,
// and the two catalog-wide checks every family with negative cases and planted impls runs.
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "core/abi_enum.hpp"
#include "core/errors.hpp"
#include "core/family.hpp"
#include "core/fields.hpp"
#include "judge/compare.hpp"
#include "judge/manifest.hpp"
#include "judge/tolerance.hpp"
#include "runner/catalog.hpp"
#include "tests/test_util.hpp"

namespace opcts::testutil {

/// One vocabulary: every enumerator of E, by its name in E's table, goes string → enum (the
/// family's field table parses `base_yaml` with `key: <name>`) → ABI (the family's abi_params,
/// read back as the struct C's `abi_member`) → enum (from_abi) → string (enum_name, and the same
/// id). `base_yaml` is a valid problem's map without `key`.
template <class P, class C, class E>
void expect_vocabulary_round_trip(const kit::FieldTable<P>& table, const std::string& key, E P::*member,
                                  int32_t C::*abi_member, std::vector<unsigned char> (*abi_params)(const P&),
                                  const std::string& base_yaml, const std::function<void(YAML::Node&, E)>& needs = {}) {
  static_assert(abi_distinct<E>());
  ASSERT_FALSE(names_of<E>().empty());
  for (const auto& n : names_of<E>()) {
    SCOPED_TRACE(key + ": " + std::string(n.yaml));
    YAML::Node m = YAML::Load(base_yaml);
    m[key] = std::string(n.yaml);
    if (needs) needs(m, n.value);  // the fields a value requires (sdpa's paged layout: a page size)
    const P p = table.parse_yaml(m);
    ASSERT_EQ(p.*member, n.value);
    const std::vector<unsigned char> bytes = abi_params(p);
    C c{};
    ASSERT_EQ(bytes.size(), sizeof c);
    std::memcpy(&c, bytes.data(), sizeof c);
    EXPECT_EQ(c.*abi_member, abi_value(n.value));
    const E back = from_abi<E>(c.*abi_member, key);
    EXPECT_EQ(back, n.value);
    EXPECT_EQ(enum_name(back), n.yaml);
    P q = p;
    q.*member = back;
    EXPECT_EQ(table.id(q), table.id(p));
    if (!n.id.empty()) EXPECT_NE(table.id(p).find(std::string(n.id)), std::string::npos) << table.id(p);
  }
}

inline const ArchInfo& host_arch() {
  static const ArchInfo h{"host", "host"};
  return h;
}

/// The tolerance a case gets on the host device (cases/tolerances.yaml, manifests/host.yaml), as
/// the runner resolves it.
inline Tolerance host_tolerance(const Family& f, const Impl& impl, const Problem& p, const std::string& out,
                                DType dtype) {
  static const ToleranceTable table = ToleranceTable::load((cases_dir() / "tolerances.yaml").string());
  static const Manifest manifest = Manifest::load((cases_dir() / "manifests" / "host.yaml").string());
  return table.resolve(std::string(f.name()), out, dtype, std::string(impl.name()), "host", case_id(f, impl, p),
                       &manifest);
}

/// `impl`'s output `out` on problem p (inputs `in`, reference `ref`) judged as the runner judges
/// it on the host device: the bounded metric under the impl's tolerance rule, from the
/// reference's reduction statistics or its own per-element bound.
inline OutputStats judge_bounded(const Family& f, const Impl& impl, const Problem& p, const TensorMap& in,
                                 const References& ref, const std::string& out) {
  const TensorMap got = impl.run(p, in, RunContext{&host_arch(), -1});
  std::vector<WorstElement> worst;
  const Tolerance t = host_tolerance(f, impl, p, out, got.at(out).dtype());
  const auto bound = ref.bound.find(out);
  const auto reduction = ref.reduction.find(out);
  return compare_output(out, got.at(out),
                        {.want = ref.exact.at(out),
                         .bound = bound == ref.bound.end() ? nullptr : &bound->second,
                         .reduction = reduction == ref.reduction.end() ? nullptr : &reduction->second},
                        t, worst);
}

/// Whether `impl` fails on problem p: any element outside the bound, or the bias check.
inline bool bounded_fails(const Family& f, const Impl& impl, const Problem& p, const std::string& out) {
  const TensorMap in = f.make_inputs(p, case_seed(f, p));
  const OutputStats s = judge_bounded(f, impl, p, in, f.reference(p, in), out);
  return s.mismatches > 0 || s.biased();
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
inline void expect_planted_fails_on_smoke(const Family& f, const Impl* planted,
                                          const std::vector<CatalogEntry>& entries, const std::string& out,
                                          int at_least) {
  ASSERT_TRUE(planted && planted->planted());
  int n = 0;
  for (const auto& e : entries) {
    if (e.tier != Tier::smoke || !planted->supports(*e.problem, host_arch()).ok) continue;
    EXPECT_TRUE(bounded_fails(f, *planted, *e.problem, out)) << planted->name() << " passed " << e.problem_id;
    ++n;
  }
  EXPECT_GE(n, at_least) << planted->name();
}

}  // namespace opcts::testutil
