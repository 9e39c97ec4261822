// execute_case's trust check (MISTRUSTED), --bitwise and failure artifacts, with tiny test families.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <limits>

#include "runner/artifacts.hpp"
#include "runner/compare.hpp"
#include "runner/execute.hpp"
#include "runner/trust.hpp"
#include "test_util.hpp"

namespace opcts {
namespace {

namespace fs = std::filesystem;

// n values of 0.25 + i/(4n), every k-th one zero (k = 0: none): within atol 1 of zero, so
// only the trust check can tell an all-zero output from a right one.
struct TrustProblem {
  int64_t n = 64;
  int64_t zero_every = 0;
};

class TrustFamily final : public Family {
 public:
  std::string_view name() const override { return "trustme"; }
  ProblemPtr parse(const YAML::Node&) const override { throw std::logic_error("not parsed"); }
  std::string problem_id(const Problem& p) const override {
    const auto& t = p.as<TrustProblem>();
    return "n" + std::to_string(t.n) + "_z" + std::to_string(t.zero_every);
  }
  ProblemPtr parse_id(std::string_view) const override { throw std::logic_error("not parsed"); }
  std::string describe_fields() const override { return "n, zero_every"; }
  bool equal(const Problem& a, const Problem& b) const override {
    return a.as<TrustProblem>().n == b.as<TrustProblem>().n &&
           a.as<TrustProblem>().zero_every == b.as<TrustProblem>().zero_every;
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
  References reference(const Problem&, const TensorMap& in) const override {
    References r;
    r.exact["y"] = in.at("x").to_f64();
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
  bool deterministic(const Problem&) const override { return det_; }
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
                    "    atol: 1.0\n    rtol: 0\n    why: loose on purpose, so that zeros pass the bound\n");
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
  ResultRecord run(Behaviour b, int64_t zero_every = 0, ExecOptions opts = {}, bool det = true, int64_t n = 64) {
    const ProblemPtr p = make_problem(TrustProblem{.n = n, .zero_every = zero_every});
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

TEST(TrustCheck, Rules) {
  EXPECT_FALSE(trust_check("y", 20, 0, 0, 0.3));
  EXPECT_TRUE(trust_check("y", 20, 20, 0, 1.0));    // all zero while the reference is not: even at 100%
  EXPECT_FALSE(trust_check("y", 20, 20, 20, 0.3));  // the reference is zero too
  EXPECT_FALSE(trust_check("y", 9, 9, 0, 0.0));     // < 10 elements
  EXPECT_FALSE(trust_check("y", 20, 7, 0, 0.3));    // 35% zeros: 30% and one element
  EXPECT_TRUE(trust_check("y", 20, 8, 0, 0.3));     // 40%
  EXPECT_FALSE(trust_check("y", 20, 7, 0, 0.4));
  EXPECT_FALSE(trust_check("y", 20, 7, 7, 0.0));    // as many zeros as the reference
  EXPECT_FALSE(trust_check("y", 20, 8, 7, 0.0));   // one zero more: the margin's one element
  EXPECT_TRUE(trust_check("y", 20, 9, 7, 0.0));
  EXPECT_FALSE(trust_check("y", 37, 1, 0, 0.0));   // a bf16 sum that cancels to 0 (call Q)
  EXPECT_TRUE(trust_check("y", 37, 2, 0, 0.0));
  EXPECT_TRUE(trust_check("y", 1000, 11, 0, 0.0));  // 1% of 1000 is 10 elements
  EXPECT_FALSE(trust_check("y", 1000, 10, 0, 0.0));
  const auto why = trust_check("O", 20, 8, 0, 0.3);
  ASSERT_TRUE(why);
  EXPECT_NE(why->find("8/20 zeros"), std::string::npos) << *why;
}

// compare_output counts the zeros the trust check judges: +0 and -0, not NaN.
TEST(TrustCheck, CompareCountsSignedZerosNotNaN) {
  HostTensor got(DType::fp32, {4});
  got.set(0, 0.0);
  got.set(1, -0.0);
  got.set(2, std::numeric_limits<double>::quiet_NaN());
  got.set(3, 1.0);
  Tolerance t;
  t.metric = Metric::allclose;
  std::vector<WorstElement> worst;
  const OutputStats s = compare_output("y", got, {0.0, 1.0, 0.0, 1.0}, nullptr, t, worst);
  EXPECT_EQ(s.zeros, 2);
  EXPECT_EQ(s.ref_zeros, 2);
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

TEST_F(ExecuteTrust, SmallOutputsAreNotJudged) {
  EXPECT_EQ(run(Behaviour::zeros, 0, {}, true, 8).raw_outcome, Outcome::PASS);
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
  EXPECT_NE(text.find("seed     0x"), std::string::npos) << text;
  EXPECT_NE(text.find("arch     host"), std::string::npos) << text;
  // 64 elements after a 128-byte header (10 bytes + the dict, padded to a multiple of 64).
  EXPECT_EQ(fs::file_size(d / "out_y.npy"), 128u + 64u * 4u);
  EXPECT_EQ(fs::file_size(d / "ref_y.npy"), 128u + 64u * 8u);
  // A passing case leaves none.
  const ResultRecord ok = run(Behaviour::copy, 2, o);
  EXPECT_FALSE(fs::exists(fs::path(o.artifacts_dir) / sanitize_id(ok.id)));
}

}  // namespace
}  // namespace opcts
