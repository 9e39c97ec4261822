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
  // The cases folder is not the default one: the line names it, so it runs from anywhere.
  EXPECT_EQ(r.repro, "opcts repro 'echo.host_echo/n4' --arch host --cases-dir '" + suite_->options().cases_dir + "'");
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

// Options of a host suite over a fresh cases folder: the echo family's one small problem (n = 4),
// an empty manifest and one tolerance entry for echo whose keys after `family` are `entry`.
SuiteOptions one_echo_problem(const std::string& entry) {
  const std::string cases = testutil::temp_dir() + "/cases";
  std::filesystem::create_directories(cases + "/manifests");
  testutil::write(cases, "archs.yaml", "archs:\n  host: {backend: host, caps: []}\n");
  testutil::write(cases, "tolerances.yaml", "tolerances:\n  - family: echo\n" + entry);
  testutil::write(cases, "echo.yaml", "family: echo\nedges:\n  - {name: small, tier: smoke, problem: {n: 4}, why: w}\n");
  testutil::write(cases + "/manifests", "host.yaml", "arch: host\n");
  SuiteOptions o;
  o.cases_dir = cases;
  o.arch = "host";
  return o;
}

// An impl whose run says, through RunContext::note, that a check did not apply to it (as the
// CUDA backend does when a run waits out its stream gate); `wrong` makes its output wrong.
class NotedEchoImpl final : public Impl {
 public:
  explicit NotedEchoImpl(bool wrong) : wrong_(wrong) {}
  std::string_view family() const override { return "echo"; }
  std::string_view name() const override { return wrong_ ? "host.noted_wrong" : "host.noted"; }
  std::string_view backend() const override { return "host"; }
  Support supports(const Problem&, const ArchInfo&) const override { return Support::yes(); }
  TensorMap run(const Problem&, const TensorMap& in, const RunContext& ctx) const override {
    if (ctx.note) *ctx.note = "stream check not applied: a test's note";
    HostTensor y = in.at("x");
    if (wrong_) y.set(0, 2 * y.get(0));
    return {{"y", y}};
  }

 private:
  bool wrong_;
};

// A pass that a backend check did not cover says so in its message; a failure keeps its own
// message (the manifest's message patterns match that), without the note.
TEST(RunNote, APassCarriesTheNoteAndAFailureKeepsItsMessage) {
  Registry reg;
  reg.add(std::make_unique<EchoFamily>());
  reg.add(std::make_unique<NotedEchoImpl>(false));
  reg.add(std::make_unique<NotedEchoImpl>(true));
  const Suite suite(reg, one_echo_problem("    metric: exact\n    why: an echo is exact\n"));
  ASSERT_EQ(suite.all_cases().size(), 2u);
  ReferenceCache cache;
  for (const Case& c : suite.all_cases()) {
    const ResultRecord r = execute_case(suite, c, -1, cache);
    if (c.id == "echo.host_noted/n4") {
      EXPECT_EQ(r.raw_outcome, Outcome::PASS);
      EXPECT_EQ(r.message, "stream check not applied: a test's note");
      EXPECT_EQ(parse_json_line(to_json_line(r)).message, r.message);
    } else {
      EXPECT_EQ(c.id, "echo.host_noted_wrong/n4");
      EXPECT_EQ(r.raw_outcome, Outcome::FAIL);
      EXPECT_EQ(r.message.find("stream check"), std::string::npos) << r.message;
      EXPECT_FALSE(r.message.empty());
    }
  }
}

// A declared accumulation the reference has no bound for stops the case with an ERROR that
// names it, rather than judging the output with no bound at all.
TEST(RunDeclaredAccumulation, AnUnknownModelIsAnErrorNamingIt) {
  Registry reg;
  reg.add(std::make_unique<EchoFamily>());
  reg.add(std::make_unique<EchoImpl>());
  const Suite suite(reg, one_echo_problem("    metric: ref_relative\n    factor: 2\n    accumulation: per_tile\n"
                                           "    why: a model the echo reference knows nothing of\n"));
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
