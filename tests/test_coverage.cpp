// The coverage report (reports/coverage.hpp) and the families' edge classes: each problem counted
// once per family whatever its impls, samples told apart by their catalog source, negative cases
// as "invalid arguments", and the classes no problem reaches listed; the catalogs' own samples
// reach what their grids cannot (cast's empty conversion).
#include <gtest/gtest.h>

#include <algorithm>

#include "app/builtins.hpp"
#include "reports/coverage.hpp"
#include "runner/suite.hpp"
#include "tests/test_util.hpp"

namespace opcts {
namespace {

bool has(const std::vector<std::string>& v, const std::string& x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

std::vector<std::string> classes_of(const std::string& family, const std::string& id) {
  const Family& f = *builtin_registry().family(family);
  return f.edge_classes_of(*f.parse_id(id));
}

TEST(Coverage, FamiliesNameTheClassesTheirProblemsReach) {
  // Lower-right causal with Sq > Sk: the first Sq − Sk rows see no key; GQA 12/4 = 3.
  const auto lr = classes_of("sdpa", "bf16_b1_hq12_hkv4_sq70_sk33_d64_causal_lr");
  EXPECT_TRUE(has(lr, "fully-masked row"));
  EXPECT_TRUE(has(lr, "causal alignment"));
  EXPECT_TRUE(has(lr, "GQA ratio not a power of two"));
  EXPECT_TRUE(has(lr, "partial tiles"));
  const auto plain = classes_of("sdpa", "bf16_b1_hq4_hkv4_sq128_sk128_d64_nomask");
  EXPECT_TRUE(plain.empty()) << plain.front();
  for (const auto& c : lr) EXPECT_TRUE(has(builtin_registry().family("sdpa")->edge_classes(), c)) << c;
  const Family& mm = *builtin_registry().family("scaled_mm");
  for (const Family* f : builtin_registry().families())
    for (const auto& c : f->edge_classes()) EXPECT_NE(c, "invalid arguments") << f->name();  // the report's own
  EXPECT_FALSE(mm.edge_classes().empty());
}

// Every family declares its classes; the conversions' and the indexing ops' follow their inputs
// (cast: what each input kind holds; indexing: 16-bit destinations, piled-up indices).
TEST(Coverage, ConversionsAndIndexingOpsNameTheirClasses) {
  for (const Family* f : builtin_registry().families()) EXPECT_FALSE(f->edge_classes().empty()) << f->name();
  const auto fnuz = classes_of("cast", "bf16_to_e4m3fnuz_satfinite_exhaustive");
  for (const char* c : {"overflow and saturation", "tie and double rounding", "subnormals", "signed zero and FNUZ NaN"})
    EXPECT_TRUE(has(fnuz, c)) << c;
  EXPECT_FALSE(has(fnuz, "scale rounding mode"));
  EXPECT_FALSE(has(fnuz, "partial tiles"));  // 65536 codes: whole blocks of 256
  const auto e8m0 = classes_of("cast", "bf16_to_e8m0fnu_ceil_nonsaturating_exhaustive");
  EXPECT_TRUE(has(e8m0, "scale rounding mode"));
  EXPECT_TRUE(has(e8m0, "NaN/Inf through block scales"));
  EXPECT_FALSE(has(e8m0, "subnormals"));  // no mantissa: no subnormal

  // 301 terms on 37 rows of bf16: sums of several terms, an odd destination (37 elements).
  const auto piled = classes_of("scatter_add", "bf16_i32_n37_m301_alllast");
  for (const char* c : {"16-bit atomics at edges", "nondeterministic sums", "partial tiles"})
    EXPECT_TRUE(has(piled, c)) << c;
  const auto gather = classes_of("index_select", "bf16_i32_b2_n29_m61_h7_alllast");
  EXPECT_FALSE(has(gather, "nondeterministic sums"));
  EXPECT_FALSE(has(builtin_registry().family("index_select")->edge_classes(), "16-bit atomics at edges"));
  EXPECT_TRUE(has(builtin_registry().family("index_add")->edge_classes(), "16-bit atomics at edges"));
}

Case make_case(const std::string& family, const std::string& impl, const std::string& id, const std::string& source) {
  const Family& f = *builtin_registry().family(family);
  Case c;
  c.family = &f;
  c.impl = builtin_registry().impl(impl);
  c.problem = f.parse_id(id);
  c.id = case_id(f, *c.impl, *c.problem);
  c.source = source;
  return c;
}

TEST(Coverage, CountsProblemsOnceAndListsWhatNoneReaches) {
  std::vector<Case> cases;
  cases.push_back(make_case("sdpa", "host.flash", "bf16_b1_hq12_hkv4_sq70_sk33_d64_causal_lr", "cases/sdpa.yaml:3"));
  cases.push_back(
      make_case("sdpa", "host.flash_gqa_modulo", "bf16_b1_hq12_hkv4_sq70_sk33_d64_causal_lr", "cases/sdpa.yaml:3"));
  cases.push_back(make_case("sdpa", "host.flash", "bf16_b2_hq4_hkv4_sq64_sk64_d64_nomask_win8x0",
                            "cases/sdpa.yaml:9 (sample 'x' draw 0)"));
  const auto rows = coverage(cases);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].problems, 2u);  // the first problem under two impls counts once
  EXPECT_EQ(rows[0].sampled, 1u);
  EXPECT_TRUE(rows[0].declared);
  auto count = [&](const std::string& name) {
    for (const auto& k : rows[0].classes)
      if (k.name == name) return std::make_pair(k.problems, k.sampled);
    return std::make_pair(size_t{99}, size_t{99});
  };
  EXPECT_EQ(count("causal alignment"), std::make_pair(size_t{1}, size_t{0}));
  EXPECT_EQ(count("window bounds"), std::make_pair(size_t{1}, size_t{1}));
  EXPECT_EQ(count("invalid arguments"), std::make_pair(size_t{0}, size_t{0}));
  const std::string md = coverage_markdown(rows);
  EXPECT_NE(md.find("## sdpa: 2 problems (1 sampled)"), std::string::npos) << md;
  EXPECT_NE(md.find("| window bounds | 1 | 1 |"), std::string::npos) << md;
  EXPECT_NE(md.find("Never reached: masked-value isolation"), std::string::npos) << md;
  EXPECT_NE(md.find("zero-size dimensions"), std::string::npos) << md;
}

// Per impl: the problems each runs (the predicate, Suite::pre_run in `list --coverage`) and the
// classes the family's problems reach that none of its running problems does.
TEST(Coverage, ImplsListTheClassesTheyNeverRun) {
  std::vector<Case> cases;
  const std::string lr = "bf16_b1_hq12_hkv4_sq70_sk33_d64_causal_lr",
                    win = "bf16_b2_hq4_hkv4_sq64_sk64_d64_nomask_win8x0";
  for (const char* impl : {"host.flash", "host.flash_gqa_modulo"})
    for (const std::string& id : {lr, win}) cases.push_back(make_case("sdpa", impl, id, "cases/sdpa.yaml:3"));
  // The GQA plant runs only the GQA problem; host.flash runs both.
  const auto rows = coverage(cases, [](const Case& c) {
    return std::string(c.impl->name()) == "host.flash" ||
           c.family->problem_id(*c.problem).find("_hq12_") != std::string::npos;
  });
  ASSERT_EQ(rows.size(), 1u);
  ASSERT_EQ(rows[0].impls.size(), 2u);
  EXPECT_EQ(rows[0].impls[0].impl, "host.flash");
  EXPECT_EQ(rows[0].impls[0].problems, 2u);
  EXPECT_EQ(rows[0].impls[1].problems, 1u);
  const std::string md = coverage_markdown(rows);
  EXPECT_NE(md.find("| host.flash | 2 | — |"), std::string::npos) << md;
  EXPECT_NE(md.find("| host.flash_gqa_modulo | 1 | window bounds |"), std::string::npos) << md;
  // Without a predicate, no impl table.
  EXPECT_TRUE(coverage(cases)[0].impls.empty());
}

// cast's grids convert a fixed set of values each; its `random_encodings` sample draws the count
// log-uniformly from 0, so the default tier reaches the zero-size class (draw 10 of seed 1).
TEST(Coverage, CastSamplesReachTheEmptyConversionInTheDefaultTier) {
  const Suite suite(builtin_registry(), SuiteOptions{testutil::cases_dir().string(), {}, "host", ""});
  std::vector<Case> cases;
  for (const Case& c : suite.all_cases())
    if (c.family->name() == "cast" && c.tier <= Tier::default_) cases.push_back(c);
  const auto rows = coverage(cases);
  ASSERT_EQ(rows.size(), 1u);
  for (const auto& k : rows[0].classes)
    if (k.name == "zero-size dimensions") {
      EXPECT_EQ(k.problems, 1u);
      EXPECT_EQ(k.sampled, 1u);
    }
  const std::string md = coverage_markdown(rows);
  EXPECT_EQ(md.find("Never reached: zero-size"), std::string::npos) << md;
  EXPECT_NE(md.find("| zero-size dimensions | 1 | 1 |"), std::string::npos) << md;
}

}  // namespace
}  // namespace opcts
