// execute_case's trust check (MISTRUSTED), --bitwise and failure artifacts, with tiny test families.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <limits>

#include "judge/compare.hpp"
#include "judge/trust.hpp"
#include "runner/artifacts.hpp"
#include "runner/execute.hpp"
#include "test_util.hpp"

namespace opcts {
namespace {

namespace fs = std::filesystem;
using testutil::contains_all;

// n values of 0.25 + i/(4n), every k-th one zero (k = 0: none): within atol 1 of zero, so
// only the trust check can tell an all-zero output from a right one. own_bound > 0 judges y
// under ref_relative instead (the rule narrowed to `*_own*` ids): the same-precision reference
// errs by 1 at element 0, so the row statistic admits 0 for every element, and the reference's
// own per-element bound is own_bound.
struct TrustProblem {
  int64_t n = 64;
  int64_t zero_every = 0;
  double own_bound = 0;
};

class TrustFamily final : public Family {
 public:
  std::string_view name() const override { return "trustme"; }
  ProblemPtr parse(const YAML::Node&) const override { throw std::logic_error("not parsed"); }
  std::string problem_id(const Problem& p) const override {
    const auto& t = p.as<TrustProblem>();
    return "n" + std::to_string(t.n) + "_z" + std::to_string(t.zero_every) +
           (t.own_bound > 0 ? "_own" + std::to_string(t.own_bound) : "");
  }
  ProblemPtr parse_id(std::string_view) const override { throw std::logic_error("not parsed"); }
  std::string describe_fields() const override { return "n, zero_every"; }
  bool equal(const Problem& a, const Problem& b) const override {
    return a.as<TrustProblem>().n == b.as<TrustProblem>().n &&
           a.as<TrustProblem>().zero_every == b.as<TrustProblem>().zero_every &&
           a.as<TrustProblem>().own_bound == b.as<TrustProblem>().own_bound;
  }
  Cost cost(const Problem&) const override { return {}; }
  std::vector<OutputSpec> outputs(const Problem&) const override { return {{"y", DType::fp32}}; }
  TensorMap make_inputs(const Problem& p, uint64_t) const override {
    const auto& t = p.as<TrustProblem>();
    HostTensor x(DType::fp32, {t.n});
    for (int64_t i = 0; i < t.n; ++i)
      x.set(i, t.zero_every && i % t.zero_every == 0 ? 0.0 : 0.25 + static_cast<double>(i) / (4.0 * t.n));
    return {{"x", x}};
  }
  References reference(const Problem& p, const TensorMap& in) const override {
    References r;
    r.exact["y"] = in.at("x").to_f64();
    if (const double own = p.as<TrustProblem>().own_bound; own > 0) {
      r.lowp["y"] = r.exact["y"];
      r.lowp["y"][0] += 1.0;
      r.bound["y"].assign(r.exact["y"].size(), own);
    }
    return r;
  }
};

enum class Behaviour { copy, zeros, half_zeros, drifting };

class TestImpl final : public Impl {
 public:
  TestImpl(Behaviour b, bool deterministic) : b_(b), det_(deterministic) {}
  std::string_view family() const override { return "trustme"; }
  std::string_view name() const override { return "host.test"; }
  std::string_view backend() const override { return "host"; }
  Support supports(const Problem&, const ArchInfo&) const override { return Support::yes(); }
  bool deterministic(const Problem&, std::string_view) const override { return det_; }
  TensorMap run(const Problem&, const TensorMap& in, const RunContext&) const override {
    HostTensor y = in.at("x");
    for (int64_t i = 0; i < y.numel(); ++i) {
      if (b_ == Behaviour::zeros || (b_ == Behaviour::half_zeros && i % 2 == 0)) y.set(i, 0.0);
      // Element 5 changes by one fp32 ulp on every call: a run-dependent reduction order.
      if (b_ == Behaviour::drifting && i == 5) y.set_code(i, y.code(i) + static_cast<uint64_t>(calls_ % 2));
    }
    ++calls_;
    return {{"y", y}};
  }

 private:
  Behaviour b_;
  bool det_;
  mutable int calls_ = 0;
};

class ExecuteTrust : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testutil::temp_dir();
    fs::create_directories(fs::path(dir_) / "cases");
    fs::copy_file(testutil::cases_dir() / "archs.yaml", fs::path(dir_) / "cases" / "archs.yaml");
    testutil::write(dir_ + "/cases", "tolerances.yaml",
                    "tolerances:\n  - family: trustme\n    output: y\n    dtype: [fp32]\n    metric: allclose\n"
                    "    atol: 1.0\n    rtol: 0\n    why: loose on purpose, so that zeros pass the bound\n"
                    "  - family: trustme\n    problem: '*_own*'\n    metric: ref_relative\n    factor: 1\n"
                    "    why: a row statistic of 1 admits zeros; the reference's own bound decides\n");
    SuiteOptions o;
    o.cases_dir = dir_ + "/cases";
    o.arch = "host";
    o.load_catalogs = false;
    // The suite's registry holds the test's family, so that its tolerance rule names a known one.
    auto family = std::make_unique<TrustFamily>();
    family_ = family.get();
    registry_.add(std::move(family));
    suite_ = std::make_unique<Suite>(registry_, o);
  }
  ResultRecord run(Behaviour b, int64_t zero_every = 0, ExecOptions opts = {}, bool det = true, int64_t n = 64,
                   double own_bound = 0) {
    const ProblemPtr p = make_problem(TrustProblem{.n = n, .zero_every = zero_every, .own_bound = own_bound});
    impl_ = std::make_unique<TestImpl>(b, det);
    Case c;
    c.family = family_;
    c.impl = impl_.get();
    c.problem = p;
    c.id = "trustme.host_test/" + family_->problem_id(*p);
    ReferenceCache cache;
    return execute_case(*suite_, c, -1, cache, opts);
  }
  std::string dir_;
  Registry registry_;
  const TrustFamily* family_ = nullptr;
  std::unique_ptr<TestImpl> impl_;
  std::unique_ptr<Suite> suite_;
};

// Zero counts as compare_output takes them: n elements, z zeros, u of them unexplained.
OutputStats zeros_of(int64_t n, int64_t z, int64_t u) {
  OutputStats s;
  s.out = "y";
  s.elements = n;
  s.zeros = z;
  s.unexplained_zeros = u;
  return s;
}

TEST(TrustCheck, Rules) {
  EXPECT_FALSE(trust_check(zeros_of(20, 0, 0)));
  EXPECT_FALSE(trust_check(zeros_of(20, 20, 0)));  // all zero, every zero explained by the reference
  EXPECT_TRUE(trust_check(zeros_of(20, 20, 1)));   // all zero, one of them not: even within the margin
  EXPECT_TRUE(trust_check(zeros_of(1, 1, 1)));     // at any size (benchdnn judged only >= 10 elements)
  EXPECT_TRUE(trust_check(zeros_of(9, 9, 9)));
  EXPECT_FALSE(trust_check(zeros_of(9, 8, 1)));  // the margin's one element
  EXPECT_TRUE(trust_check(zeros_of(9, 8, 2)));
  EXPECT_FALSE(trust_check(zeros_of(20, 19, 1)));  // explained zeros are right answers, however many
  EXPECT_TRUE(trust_check(zeros_of(20, 2, 2)));
  EXPECT_FALSE(trust_check(zeros_of(37, 1, 1)));     // a bf16 sum that cancels to 0 (call Q)
  EXPECT_TRUE(trust_check(zeros_of(1000, 11, 11)));  // 1% of 1000 is 10 elements
  EXPECT_FALSE(trust_check(zeros_of(1000, 500, 10)));
  const auto why = trust_check(zeros_of(20, 8, 3));
  ASSERT_TRUE(why);
  EXPECT_NE(why->find("8/20 zeros"), std::string::npos) << *why;
  EXPECT_NE(why->find("3 of them"), std::string::npos) << *why;
}

// compare_output counts the zeros the trust check judges: +0 and -0, not NaN; without an error
// model (allclose) only the reference's own zeros explain one.
TEST(TrustCheck, CompareCountsSignedZerosNotNaN) {
  HostTensor got(DType::fp32, {4});
  got.set(0, 0.0);
  got.set(1, -0.0);
  got.set(2, std::numeric_limits<double>::quiet_NaN());
  got.set(3, 1.0);
  Tolerance t;
  t.metric = Metric::allclose;
  t.atol = 2;  // every zero within tolerance
  std::vector<WorstElement> worst;
  const OutputStats s = compare_output("y", got, {.want = {0.0, 1.0, 0.0, 1.0}}, t, worst);
  EXPECT_EQ(s.zeros, 2);
  EXPECT_EQ(s.ref_zeros, 2);
  EXPECT_EQ(s.unexplained_zeros, 1);  // element 1: the reference is 1, and allclose's atol is no model
}

// ref_relative: a zero is explained where 0 lies within the element's own bound (the
// reference's model plus one output rounding), not where only the row statistic admits it.
TEST(TrustCheck, RefRelativeExplainsZerosByTheElementsOwnBound) {
  HostTensor got(DType::fp16, {4});
  for (int64_t i = 0; i < 4; ++i) got.set(i, 0.0);
  const std::vector<double> want = {0x1p-26, 3e-7, 1e-3, 0.5};  // below fp16's half subnormal, then up
  std::vector<double> lowp = want;
  lowp[3] += 1.0;  // the row statistic admits 0 everywhere
  const std::vector<double> own = {0.0, 4e-7, 1e-4, 1e-4};
  Tolerance t;
  t.metric = Metric::ref_relative;
  t.factor = 1;
  std::vector<WorstElement> worst;
  const OutputStats s = compare_output("dQ", got, {.want = want, .lowp = &lowp, .bound = &own}, t, worst);
  EXPECT_EQ(s.mismatches, 0);
  EXPECT_EQ(s.ref_zeros, 1);
  EXPECT_EQ(s.unexplained_zeros, 2);  // 1e-3 and 0.5: beyond their own bound 1e-4
}

// bounded: the per-element bound is the element's own, so a zero within it is explained.
TEST(TrustCheck, BoundedExplainsZerosWithinTheElementsBound) {
  HostTensor got(DType::fp32, {3});
  for (int64_t i = 0; i < 3; ++i) got.set(i, 0.0);
  const std::vector<double> want = {1e-6, 2e-6, 1.0};
  const std::vector<double> bound = {2e-6, 1e-6, 1e-6};
  Tolerance t;
  t.metric = Metric::bounded;
  t.factor = 1;
  std::vector<WorstElement> worst;
  const OutputStats s = compare_output("y", got, {.want = want, .bound = &bound}, t, worst);
  EXPECT_EQ(s.unexplained_zeros, 2);
  EXPECT_EQ(s.mismatches, 2);  // under bounded an unexplained zero is also a mismatch
}

TEST_F(ExecuteTrust, RightOutputPasses) { EXPECT_EQ(run(Behaviour::copy).raw_outcome, Outcome::PASS); }

TEST_F(ExecuteTrust, ZerosWithinToleranceAreMistrustedNotPass) {
  const ResultRecord r = run(Behaviour::zeros);
  EXPECT_EQ(r.raw_outcome, Outcome::MISTRUSTED) << r.message;
  EXPECT_NE(r.message.find("all zeros"), std::string::npos) << r.message;
  EXPECT_EQ(run(Behaviour::half_zeros).raw_outcome, Outcome::MISTRUSTED);
}

TEST_F(ExecuteTrust, ZerosTheReferenceHoldsAreTrusted) {
  // Half the reference is zero: an output with exactly those zeros passes.
  EXPECT_EQ(run(Behaviour::copy, 2).raw_outcome, Outcome::PASS);
}

TEST_F(ExecuteTrust, SmallOutputsAreJudgedToo) {
  EXPECT_EQ(run(Behaviour::zeros, 0, {}, true, 8).raw_outcome, Outcome::MISTRUSTED);
  EXPECT_EQ(run(Behaviour::copy, 0, {}, true, 8).raw_outcome, Outcome::PASS);
}

// Issue 43: zeros the reference's own bound admits are right answers (a correct fp16 kernel
// rounds a few-subnormal gradient to 0); zeros well beyond it stay MISTRUSTED, even where a
// row statistic lets them pass the comparison.
TEST_F(ExecuteTrust, ZerosWithinTheOwnBoundAreTrustedBeyondItMistrusted) {
  for (Behaviour b : {Behaviour::zeros, Behaviour::half_zeros}) {
    const ResultRecord within = run(b, 0, {}, true, 64, 1.0);
    EXPECT_EQ(within.raw_outcome, Outcome::PASS) << within.message;
    const ResultRecord beyond = run(b, 0, {}, true, 64, 1e-6);
    EXPECT_EQ(beyond.raw_outcome, Outcome::MISTRUSTED) << beyond.message;
    EXPECT_EQ(beyond.outputs.at(0).mismatches, 0);  // the comparison alone passes it
  }
}

TEST_F(ExecuteTrust, BitwiseFailsADeterministicImplThatDrifts) {
  ExecOptions o;
  EXPECT_EQ(run(Behaviour::drifting, 0, o).raw_outcome, Outcome::PASS);  // one run is within tolerance
  o.bitwise = true;
  const ResultRecord r = run(Behaviour::drifting, 0, o);
  EXPECT_EQ(r.raw_outcome, Outcome::FAIL);
  EXPECT_NE(r.message.find("y[5]"), std::string::npos) << r.message;
  EXPECT_EQ(run(Behaviour::copy, 0, o).raw_outcome, Outcome::PASS);
  // An impl that declares itself nondeterministic is not held to identical bytes.
  EXPECT_EQ(run(Behaviour::drifting, 0, o, false).raw_outcome, Outcome::PASS);
}

TEST_F(ExecuteTrust, MistrustedAndFailedCasesLeaveArtifacts) {
  ExecOptions o;
  o.artifacts_dir = dir_ + "/artifacts";
  const ResultRecord r = run(Behaviour::zeros, 0, o);
  ASSERT_EQ(r.raw_outcome, Outcome::MISTRUSTED);
  const fs::path d = fs::path(o.artifacts_dir) / sanitize_id(r.id);
  EXPECT_EQ(sanitize_id(r.id), "trustme.host_test_n64_z0");
  for (const char* f : {"repro.txt", "worst.txt", "in_x.npy", "ref_y.npy", "out_y.npy"})
    EXPECT_TRUE(fs::exists(d / f)) << f;
  std::ifstream in(d / "repro.txt");
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_TRUE(contains_all(text, {"seed     0x", "arch     host"}));
  // 64 elements after a 128-byte header (10 bytes + the dict, padded to a multiple of 64).
  EXPECT_EQ(fs::file_size(d / "out_y.npy"), 128u + 64u * 4u);
  EXPECT_EQ(fs::file_size(d / "ref_y.npy"), 128u + 64u * 8u);
  // A passing case leaves none.
  const ResultRecord ok = run(Behaviour::copy, 2, o);
  EXPECT_FALSE(fs::exists(fs::path(o.artifacts_dir) / sanitize_id(ok.id)));
}

}  // namespace
}  // namespace opcts
