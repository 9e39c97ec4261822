// The run pipeline's pure parts (FLAKE table, records, judging) and a Suite over an injected,
// fake registry: the runner needs no built-in family.
#include <gtest/gtest.h>

#include "core/kit_family.hpp"
#include "runner/execute.hpp"
#include "runner/run.hpp"
#include "test_util.hpp"

namespace opcts {
namespace {

TEST(RunFlake, DisagreeingRunsAreAFlakeAndRepeatsAreNot) {
  struct Row {
    std::vector<Outcome> runs;
    const char* flake;  // nullptr: not a flake
  };
  const Row rows[] = {
      {{Outcome::FAIL}, nullptr},
      {{Outcome::FAIL, Outcome::FAIL, Outcome::FAIL}, nullptr},  // a failure that repeats stays what it was
      {{Outcome::CRASH, Outcome::PASS}, "runs gave CRASH, PASS"},
      {{Outcome::FAIL, Outcome::FAIL, Outcome::ERROR}, "runs gave FAIL, FAIL, ERROR"},
      {{Outcome::TIMEOUT, Outcome::CRASH}, "runs gave TIMEOUT, CRASH"},
      {{}, nullptr},
  };
  for (const Row& r : rows) {
    const auto f = flake_of(r.runs);
    if (r.flake) {
      ASSERT_TRUE(f.has_value());
      EXPECT_EQ(*f, r.flake);
    } else {
      EXPECT_FALSE(f.has_value());
    }
  }
}

// A family of one integer field and one impl that echoes its input, in a registry of its own.
struct Echo {
  int64_t n = 1;
  bool operator==(const Echo&) const = default;
};

class EchoFamily final : public KitFamily<Echo> {
 public:
  std::string_view name() const override { return "echo"; }
  const kit::FieldTable<Echo>& fields() const override {
    static const kit::FieldTable<Echo> t("echo", {kit::int_always<Echo>("n", &Echo::n, "n", "N", true)},
                                         [](const Echo& e) {
                                           if (e.n < 1) throw std::invalid_argument("n must be >= 1");
                                         });
    return t;
  }
  Cost cost(const Problem& p) const override { return {static_cast<double>(get(p).n), 0}; }
  std::vector<OutputSpec> outputs(const Problem&) const override { return {{"y", DType::fp32}}; }
  TensorMap make_inputs(const Problem& p, uint64_t) const override {
    HostTensor x(DType::fp32, {get(p).n});
    for (int64_t i = 0; i < x.numel(); ++i) x.set(i, 1.0 + static_cast<double>(i));
    return {{"x", x}};
  }
  References reference(const Problem&, const TensorMap& in) const override {
    References r;
    r.exact["y"] = in.at("x").to_f64();
    return r;
  }
};

class EchoImpl final : public Impl {
 public:
  std::string_view family() const override { return "echo"; }
  std::string_view name() const override { return "host.echo"; }
  std::string_view backend() const override { return "host"; }
  Support supports(const Problem& p, const ArchInfo&) const override {
    return p.as<Echo>().n > 100 ? Support::no("host.echo takes n <= 100") : Support::yes();
  }
  TensorMap run(const Problem&, const TensorMap& in, const RunContext&) const override { return {{"y", in.at("x")}}; }
};

class RunOnAFakeRegistry : public testing::Test {
 protected:
  void SetUp() override {
    reg_.add(std::make_unique<EchoFamily>());
    reg_.add(std::make_unique<EchoImpl>());
    const std::string dir = testutil::temp_dir();
    const std::string cases = dir + "/cases";
    std::filesystem::create_directories(cases + "/manifests");
    testutil::write(cases, "archs.yaml", "archs:\n  host: {backend: host, caps: []}\n");
    testutil::write(cases, "tolerances.yaml",
                    "tolerances:\n  - family: echo\n    metric: exact\n    why: an echo is exact\n");
    testutil::write(cases, "echo.yaml",
                    "family: echo\nedges:\n"
                    "  - {name: small, tier: smoke, problem: {n: 4}, why: a few values}\n"
                    "  - {name: big, tier: smoke, problem: {n: 200}, why: more than the impl takes}\n");
    testutil::write(cases + "/manifests", "host.yaml",
                    "arch: host\nxfail:\n  - match: 'echo.host_echo/n4'\n    reason: pretend it fails\n    expect: FAIL\n");
    SuiteOptions o;
    o.cases_dir = cases;
    o.arch = "host";
    suite_ = std::make_unique<Suite>(reg_, o);
  }
  Registry reg_;
  std::unique_ptr<Suite> suite_;
};

TEST_F(RunOnAFakeRegistry, LoadsItsCatalogAndJudgesItsRecords) {
  ASSERT_EQ(suite_->all_cases().size(), 2u);
  const Case& big = suite_->all_cases()[0];
  const Case& small = suite_->all_cases()[1];
  EXPECT_EQ(big.id, "echo.host_echo/n200");
  EXPECT_EQ(suite_->skip_reason(big).value_or(""), "host.echo takes n <= 100");
  EXPECT_FALSE(suite_->skip_reason(small).has_value());

  ReferenceCache cache;
  ResultRecord r = execute_case(*suite_, small, -1, cache);
  const ResultRecord base = base_record(*suite_, small, -1);
  EXPECT_EQ(r.id, base.id);
  EXPECT_EQ(r.seed, base.seed);
  EXPECT_EQ(r.repro, "opcts repro 'echo.host_echo/n4' --arch host");
  EXPECT_EQ(r.raw_outcome, Outcome::PASS);
  judge(*suite_, r);  // a pass under a strict xfail
  EXPECT_EQ(r.outcome, Outcome::XPASS);
  EXPECT_NE(r.expectation.find("pretend it fails"), std::string::npos) << r.expectation;
  r.raw_outcome = Outcome::ERROR;  // a failure of another kind than the entry expects
  r.message = "boom";
  judge(*suite_, r);
  EXPECT_EQ(r.outcome, Outcome::ERROR);
  EXPECT_NE(r.expectation.find("expects FAIL, got ERROR"), std::string::npos) << r.expectation;
}

// A declared accumulation the reference has no bound for stops the case with an ERROR that
// names it, rather than judging the output with no bound at all.
TEST(RunDeclaredAccumulation, AnUnknownModelIsAnErrorNamingIt) {
  Registry reg;
  reg.add(std::make_unique<EchoFamily>());
  reg.add(std::make_unique<EchoImpl>());
  const std::string cases = testutil::temp_dir() + "/cases";
  std::filesystem::create_directories(cases + "/manifests");
  testutil::write(cases, "archs.yaml", "archs:\n  host: {backend: host, caps: []}\n");
  testutil::write(cases, "tolerances.yaml",
                  "tolerances:\n  - family: echo\n    metric: ref_relative\n    factor: 2\n"
                  "    accumulation: per_tile\n    why: a model the echo reference knows nothing of\n");
  testutil::write(cases, "echo.yaml", "family: echo\nedges:\n  - {name: small, tier: smoke, problem: {n: 4}, why: w}\n");
  testutil::write(cases + "/manifests", "host.yaml", "arch: host\n");
  SuiteOptions o;
  o.cases_dir = cases;
  o.arch = "host";
  const Suite suite(reg, o);
  ReferenceCache cache;
  const ResultRecord r = execute_case(suite, suite.all_cases().at(0), -1, cache);
  EXPECT_EQ(r.raw_outcome, Outcome::ERROR);
  EXPECT_NE(r.message.find("no bound for accumulation 'per_tile'"), std::string::npos) << r.message;
}

// The record says where its time went: the case that made the problem's inputs and references
// carries their times, a second case of the same problem shares them (0), and the phases come
// back from the results line.
TEST_F(RunOnAFakeRegistry, RecordsThePhasesOfItsTime) {
  const Case& small = suite_->all_cases()[1];
  ReferenceCache cache;
  const ResultRecord first = execute_case(*suite_, small, -1, cache);
  const ResultRecord again = execute_case(*suite_, small, -1, cache);
  EXPECT_GT(first.inputs_ms + first.ref_ms, 0.0);
  EXPECT_GT(first.device_ms, 0.0);
  EXPECT_LE(first.inputs_ms + first.ref_ms + first.device_ms + first.compare_ms, first.ms);
  EXPECT_EQ(again.inputs_ms, 0.0);
  EXPECT_EQ(again.ref_ms, 0.0);
  EXPECT_GT(again.device_ms, 0.0);
  const ResultRecord back = parse_json_line(to_json_line(first));
  EXPECT_EQ(back.inputs_ms, first.inputs_ms);
  EXPECT_EQ(back.ref_ms, first.ref_ms);
  EXPECT_EQ(back.device_ms, first.device_ms);
  EXPECT_EQ(back.compare_ms, first.compare_ms);
}

}  // namespace
}  // namespace opcts
