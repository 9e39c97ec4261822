// ToleranceTable: loading, last-matching-rule resolution with dtype/impl/arch filters, manifest overrides, errors.
#include <gtest/gtest.h>

#include "tests/test_util.hpp"

#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>

#include "core/yaml_util.hpp"
#include "judge/tolerance.hpp"

namespace opcts {
namespace {

namespace fs = std::filesystem;
using testutil::contains_all;
using testutil::points_at;
using testutil::temp_dir;
using testutil::write;

const fs::path kCases = testutil::cases_dir();

const char* kTable =
    "tolerances:\n"                                         // 1
    "  - family: sdpa\n"                                    // 2
    "    metric: allclose\n"                                // 3
    "    atol: 0.5\n"                                       // 4
    "    why: catch-all for every output\n"                 // 5
    "  - family: sdpa\n"                                    // 6
    "    output: O\n"                                       // 7
    "    dtype: [bf16, fp16]\n"                             // 8
    "    metric: ref_relative\n"                            // 9
    "    factor: 2\n"                                       // 10
    "    atol_eps: 0.5\n"                                   // 11
    "    why: 16-bit outputs against the lowp reference\n"  // 12
    "  - family: sdpa\n"                                    // 13
    "    output: O\n"                                       // 14
    "    dtype: bf16\n"                                     // 15
    "    impl: \"cuda.*\"\n"                                // 16
    "    arch: \"sm9*\"\n"                                  // 17
    "    metric: ref_relative\n"                            // 18
    "    factor: 3\n"                                       // 19
    "    atol: 0.001\n"                                     // 20
    "    why: another blocking on Hopper\n"                 // 21
    "  - family: gemm\n"                                    // 22
    "    output: D\n"                                       // 23
    "    metric: exact\n"                                   // 24
    "    why: integer inputs make products exact\n";        // 25

class ToleranceFixture : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = temp_dir();
    path_ = write(dir_, "tolerances.yaml", kTable);
    table_ = ToleranceTable::load(path_);
  }
  Tolerance resolve(const std::string& output, DType dt, const std::string& impl, const std::string& arch,
                    const Manifest* m = nullptr, const std::string& id = "sdpa.x/y") const {
    return table_.resolve("sdpa", output, dt, impl, arch, id, m);
  }
  std::string dir_, path_;
  ToleranceTable table_;
};

TEST_F(ToleranceFixture, LoadsEveryRule) {
  ASSERT_EQ(table_.rules().size(), 4u);
  const auto& r = table_.rules()[1];
  EXPECT_EQ(r.family, "sdpa");
  EXPECT_EQ(r.output, "O");
  EXPECT_EQ(r.dtypes, (std::vector<std::string>{"bf16", "fp16"}));
  EXPECT_EQ(r.tol.metric, Metric::ref_relative);
  EXPECT_EQ(r.tol.factor, 2.0);
  EXPECT_EQ(r.tol.atol_eps, 0.5);
  EXPECT_EQ(r.tol.source, path_ + ":6");
  EXPECT_EQ(table_.rules()[2].dtypes, (std::vector<std::string>{"bf16"}));
  EXPECT_EQ(table_.rules()[3].why, "integer inputs make products exact");
}

TEST_F(ToleranceFixture, LastMatchingRuleWins) {
  // lse matches only the catch-all.
  const Tolerance lse = resolve("lse", DType::fp32, "cuda.flash", "sm90");
  EXPECT_EQ(lse.metric, Metric::allclose);
  EXPECT_EQ(lse.atol, 0.5);
  EXPECT_EQ(lse.source, path_ + ":2");
  // fp16 O: rule 2 refines the catch-all.
  const Tolerance o16 = resolve("O", DType::fp16, "cuda.flash", "sm90");
  EXPECT_EQ(o16.metric, Metric::ref_relative);
  EXPECT_EQ(o16.factor, 2.0);
  EXPECT_EQ(o16.atol, 0.0);  // a rule's unset fields are 0, not inherited from earlier rules
  // bf16 O on a CUDA impl on sm90: rule 3 refines rule 2.
  const Tolerance o_bf = resolve("O", DType::bf16, "cuda.flash", "sm90");
  EXPECT_EQ(o_bf.factor, 3.0);
  EXPECT_EQ(o_bf.atol, 0.001);
  EXPECT_EQ(o_bf.source, path_ + ":13");
}

TEST_F(ToleranceFixture, DtypeImplAndArchFilters) {
  EXPECT_EQ(resolve("O", DType::fp32, "cuda.flash", "sm90").metric, Metric::allclose);  // fp32 not in rule 2
  EXPECT_EQ(resolve("O", DType::bf16, "host.flash", "host").factor, 2.0);               // impl glob misses
  EXPECT_EQ(resolve("O", DType::bf16, "cuda.math", "sm80").factor, 2.0);                // arch glob misses
  EXPECT_EQ(resolve("O", DType::bf16, "cuda.math", "sm90a").factor, 3.0);
  EXPECT_EQ(resolve("O", DType::fp16, "cuda.math", "sm90").factor, 2.0);  // dtype misses rule 3
}

TEST_F(ToleranceFixture, ManifestToleranceOverridesOnlyItsFields) {
  const std::string mpath = write(dir_, "sm90.yaml",
                                  "arch: sm90\n"
                                  "tolerance:\n"
                                  "  - match: \"sdpa.cuda_flash/bf16_*\"\n"
                                  "    reason: split-k summation order\n"
                                  "    output: O\n"
                                  "    factor: 8\n");
  const Manifest m = Manifest::load(mpath);
  const std::string id = "sdpa.cuda_flash/bf16_b1_hq1_hkv1_sq1_sk1_d64_nomask";
  const Tolerance t = resolve("O", DType::bf16, "cuda.flash", "sm90", &m, id);
  EXPECT_EQ(t.metric, Metric::ref_relative);
  EXPECT_EQ(t.factor, 8.0);
  EXPECT_EQ(t.atol, 0.001);  // kept from the table
  EXPECT_EQ(t.atol_eps, 0.0);
  EXPECT_TRUE(contains_all(t.source, {path_ + ":13", mpath + ":3"}));
  // Another output or another case keeps the table's value.
  EXPECT_EQ(resolve("lse", DType::fp32, "cuda.flash", "sm90", &m, id).atol, 0.5);
  EXPECT_EQ(resolve("O", DType::bf16, "cuda.flash", "sm90", &m, "sdpa.cuda_math/bf16_x").factor, 3.0);
}

TEST_F(ToleranceFixture, NoRuleThrowsNamingTheOutput) {
  try {
    table_.resolve("gemm", "C", DType::fp32, "cuda.cublas", "sm90", "gemm.x/y", nullptr);
    FAIL() << "resolve did not throw";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("'C'"), std::string::npos) << e.what();
  }
  EXPECT_THROW(table_.resolve("conv", "O", DType::fp32, "cuda.x", "sm90", "conv.x/y", nullptr), std::runtime_error);
  EXPECT_EQ(table_.resolve("gemm", "D", DType::fp32, "cuda.cublas", "sm90", "gemm.x/y", nullptr).metric, Metric::exact);
}

std::string load_error(const std::string& path) {
  return testutil::yaml_error_of([&] { ToleranceTable::load(path); });
}

TEST(ToleranceErrors, RuleWithoutWhyNamesItsLine) {
  const std::string dir = temp_dir();
  const std::string p = write(dir, "t.yaml",
                              "tolerances:\n"
                              "  - family: sdpa\n"
                              "    metric: exact\n"
                              "    why: fine\n"
                              "  - family: sdpa\n"
                              "    output: O\n"
                              "    metric: exact\n");
  const std::string err = load_error(p);
  EXPECT_TRUE(points_at(err, p, 5, "why"));
}

TEST(ToleranceErrors, BadFieldsNameTheirLine) {
  const std::string dir = temp_dir();
  const std::string unknown =
      write(dir, "u.yaml", "tolerances:\n  - family: sdpa\n    metric: exact\n    why: w\n    fator: 2\n");
  EXPECT_TRUE(points_at(load_error(unknown), unknown, 5));
  const std::string dtype =
      write(dir, "d.yaml", "tolerances:\n  - family: sdpa\n    dtype: fp8\n    metric: exact\n    why: w\n");
  EXPECT_TRUE(points_at(load_error(dtype), dtype, 2, "'fp8'"));
  const std::string rr = write(dir, "r.yaml", "tolerances:\n  - family: sdpa\n    metric: ref_relative\n    why: w\n");
  EXPECT_TRUE(points_at(load_error(rr), rr, 2));
  const std::string empty = write(dir, "e.yaml", "rules: []\n");
  EXPECT_NE(load_error(empty).find("tolerances"), std::string::npos) << load_error(empty);
}

TEST(ToleranceAccumulator, RulesAndManifestEntriesCarryAModel) {
  const std::string dir = temp_dir();
  const std::string table = write(dir, "t.yaml",
                                  "tolerances:\n"
                                  "  - family: mm\n"
                                  "    metric: bounded\n"
                                  "    factor: 1\n"
                                  "    false_alarm: 1.0e-12\n"
                                  "    why: fp32 by default\n"
                                  "  - family: mm\n"
                                  "    impl: \"cuda.*\"\n"
                                  "    problem: \"*_fast_*\"\n"
                                  "    metric: bounded\n"
                                  "    factor: 1\n"
                                  "    accumulator: {bits: 14, rounding: truncate}\n"
                                  "    why: never promoted\n");
  const ToleranceTable t = ToleranceTable::load(table);
  const Tolerance plain = t.resolve("mm", "d", DType::bf16, "cuda.x", "sm90", "mm.cuda_x/slow_y", nullptr);
  EXPECT_EQ(plain.accumulator, AccumulatorModel{});
  EXPECT_EQ(plain.false_alarm, 1e-12);
  const Tolerance fast = t.resolve("mm", "d", DType::bf16, "cuda.x", "sm90", "mm.cuda_x/a_fast_y", nullptr);
  EXPECT_EQ(fast.accumulator, (AccumulatorModel{14, AccRounding::truncate, 0}));
  EXPECT_EQ(fast.false_alarm, 0.0);  // a rule's unset fields are its defaults
  EXPECT_EQ(t.resolve("mm", "d", DType::bf16, "host.x", "host", "mm.host_x/a_fast_y", nullptr).accumulator,
            AccumulatorModel{});  // the impl glob misses

  const Manifest m = Manifest::load(write(dir, "sm90.yaml",
                                          "arch: sm90\n"
                                          "tolerance:\n"
                                          "  - match: \"mm.cuda_x/*\"\n"
                                          "    reason: measured\n"
                                          "    accumulator: {bits: 14, rounding: truncate, promote_every: 128}\n"));
  const Tolerance over = t.resolve("mm", "d", DType::bf16, "cuda.x", "sm90", "mm.cuda_x/slow_y", &m);
  EXPECT_EQ(over.accumulator, (AccumulatorModel{14, AccRounding::truncate, 128}));
  EXPECT_EQ(over.false_alarm, 1e-12);  // kept from the table
  EXPECT_NE(over.source.find("sm90.yaml:3"), std::string::npos) << over.source;
}

TEST(ToleranceAccumulator, ErrorsNameTheirLine) {
  const std::string dir = temp_dir();
  const std::string not_bounded = write(dir, "a.yaml",
                                        "tolerances:\n  - family: sdpa\n    metric: exact\n    why: w\n"
                                        "    accumulator: {bits: 14}\n");
  EXPECT_NE(load_error(not_bounded).find("only apply to the bounded metric"), std::string::npos)
      << load_error(not_bounded);
  const std::string bad_p = write(dir, "p.yaml",
                                  "tolerances:\n  - family: mm\n    metric: bounded\n    factor: 1\n    why: w\n"
                                  "    false_alarm: 2\n");
  EXPECT_TRUE(points_at(load_error(bad_p), bad_p, 6));
  const std::string bad_bits = write(dir, "b.yaml",
                                     "tolerances:\n  - family: mm\n    metric: bounded\n    factor: 1\n    why: w\n"
                                     "    accumulator: {bits: 40}\n");
  EXPECT_NE(load_error(bad_bits).find("2..24"), std::string::npos) << load_error(bad_bits);
  const std::string manifest = write(dir, "m.yaml",
                                     "arch: x\ntolerance:\n  - match: \"a/*\"\n    reason: r\n"
                                     "    accumulator: {rounding: down}\n");
  const std::string err = testutil::yaml_error_of([&] { Manifest::load(manifest); });
  EXPECT_NE(err.find("'down'"), std::string::npos) << err;
}

// A manifest entry declares a plugin's accumulation (its rules cannot name plugin impls): it
// selects the reference's bound "<output>@<name>" for ref_relative and bounded outputs only, and
// tolerance rules take `accumulation:` on those two metrics only.
TEST(ToleranceAccumulation, RulesAndManifestEntriesDeclareIt) {
  const std::string dir = temp_dir();
  const ToleranceTable t =
      ToleranceTable::load(write(dir, "t.yaml",
                                 "tolerances:\n"
                                 "  - family: sdpa\n    metric: ref_relative\n    factor: 2\n    why: w\n"
                                 "  - family: sdpa\n    output: lse\n    impl: \"cuda.*\"\n"
                                 "    metric: ref_relative\n    factor: 2\n    accumulation: two_pass\n"
                                 "    why: w\n"
                                 "  - family: cast\n    metric: exact\n    why: w\n"));
  EXPECT_EQ(t.resolve("sdpa", "lse", DType::fp32, "cuda.math", "sm90", "sdpa.cuda_math/p", nullptr).accumulation,
            "two_pass");
  EXPECT_EQ(t.resolve("sdpa", "O", DType::bf16, "cuda.math", "sm90", "sdpa.cuda_math/p", nullptr).accumulation, "");
  const Manifest m = Manifest::load(write(dir, "sm90.yaml",
                                          "arch: sm90\n"
                                          "tolerance:\n"
                                          "  - match: \"sdpa.aten_math/*\"\n"
                                          "    output: lse\n"
                                          "    accumulation: two_pass\n"
                                          "    reason: at::logsumexp\n"
                                          "  - match: \"cast.aten_cast/*\"\n"
                                          "    accumulation: once\n"
                                          "    reason: wrong metric\n"));
  EXPECT_EQ(t.resolve("sdpa", "lse", DType::fp32, "aten.math", "sm90", "sdpa.aten_math/p", &m).accumulation,
            "two_pass");
  EXPECT_EQ(t.resolve("sdpa", "O", DType::bf16, "aten.math", "sm90", "sdpa.aten_math/p", &m).accumulation, "");
  EXPECT_THROW(t.resolve("cast", "y", DType::bf16, "aten.cast", "sm90", "cast.aten_cast/p", &m), std::runtime_error);
  const std::string exact =
      write(dir, "e.yaml", "tolerances:\n  - family: cast\n    metric: exact\n    accumulation: once\n    why: w\n");
  EXPECT_NE(load_error(exact).find("bounded and ref_relative only"), std::string::npos) << load_error(exact);
}

// The models cases/ gives scaled_mm: IEEE fp32 by default, Hopper's for its emulation and for
// cuBLASLt (and its planted variants) on sm90, no promotion for fast_accum.
TEST(ToleranceBuiltin, ScaledMmModels) {
  const ToleranceTable t = ToleranceTable::load((kCases / "tolerances.yaml").string());
  const Manifest sm90 = Manifest::load((kCases / "manifests" / "sm90.yaml").string());
  const Manifest sm100 = Manifest::load((kCases / "manifests" / "sm100.yaml").string());
  const AccumulatorModel fp32, hopper{14, AccRounding::truncate, 128}, fast{14, AccRounding::truncate, 0};
  const auto tol = [&](const std::string& impl, const std::string& problem, const std::string& arch,
                       const Manifest& m) {
    std::string tok = impl;
    for (char& c : tok) c = c == '.' ? '_' : c;
    const Tolerance r = t.resolve("scaled_mm", "d", DType::bf16, impl, arch, "scaled_mm." + tok + "/" + problem, &m);
    EXPECT_EQ(r.metric, Metric::bounded);
    EXPECT_EQ(r.false_alarm, 1e-12);
    return r;
  };
  const auto model = [&](const std::string& impl, const std::string& problem, const std::string& arch,
                         const Manifest& m) { return tol(impl, problem, arch, m).accumulator; };
  const auto provisional = [&](const std::string& impl, const std::string& problem, const std::string& arch,
                               const Manifest& m) { return tol(impl, problem, arch, m).provisional; };
  const std::string slow = "tensorwise_e4m3fn_e4m3fn_tn_m1_n1_k16_out_bf16_random";
  const std::string quick = "tensorwise_e4m3fn_e4m3fn_tn_m1_n1_k16_out_bf16_fastacc_random";
  EXPECT_EQ(model("cuda.mx_kernel", quick, "sm90", sm90), fp32);
  EXPECT_EQ(model("host.emulated", quick, "host", Manifest::empty("host")), fp32);
  EXPECT_EQ(model("host.emulated_hopper", slow, "host", Manifest::empty("host")), hopper);
  EXPECT_EQ(model("host.emulated_hopper_no_bias", quick, "host", Manifest::empty("host")), fast);
  EXPECT_EQ(model("cuda.cublaslt", slow, "sm90", sm90), hopper);
  EXPECT_EQ(model("cuda.cublaslt_scale_error", slow, "sm90", sm90), hopper);
  EXPECT_EQ(model("cuda.cublaslt", quick, "sm90", sm90), fast);
  // Not measured on sm100: the loosest model known (FAST_ACCUM's), reported provisional.
  EXPECT_EQ(model("cuda.cublaslt", slow, "sm100", sm100), fast);
  EXPECT_EQ(model("cuda.cublaslt", quick, "sm100", sm100), fast);
  EXPECT_TRUE(provisional("cuda.cublaslt", slow, "sm100", sm100));
  EXPECT_TRUE(provisional("cuda.cublaslt", quick, "sm100", sm100));
  EXPECT_FALSE(provisional("cuda.cublaslt", slow, "sm90", sm90));  // sm90's manifest states the measured model
  EXPECT_FALSE(provisional("cuda.cublaslt", quick, "sm90", sm90));
  EXPECT_FALSE(provisional("cuda.mx_kernel", slow, "sm100", sm100));  // fp32 FMA by construction
}

TEST(ToleranceAccumulator, ProvisionalMarksAStandInModel) {
  const std::string dir = temp_dir();
  const std::string table = write(dir, "t.yaml",
                                  "tolerances:\n"
                                  "  - family: mm\n"
                                  "    metric: bounded\n"
                                  "    factor: 1\n"
                                  "    accumulator: {bits: 14, rounding: truncate, promote_every: 0}\n"
                                  "    provisional: true\n"
                                  "    why: the loosest known until measured\n");
  const std::string manifest = write(dir, "m.yaml",
                                     "arch: sm89\n"
                                     "tolerance:\n"
                                     "  - match: \"mm.cuda_x/*_measured\"\n"
                                     "    accumulator: {bits: 22, rounding: truncate, promote_every: 32}\n"
                                     "    reason: probed\n");
  const ToleranceTable t = ToleranceTable::load(table);
  const Manifest m = Manifest::load(manifest);
  const Tolerance stand_in = t.resolve("mm", "d", DType::fp32, "cuda.x", "sm89", "mm.cuda_x/p", &m);
  EXPECT_TRUE(stand_in.provisional);
  const Tolerance measured = t.resolve("mm", "d", DType::fp32, "cuda.x", "sm89", "mm.cuda_x/p_measured", &m);
  EXPECT_FALSE(measured.provisional);
  EXPECT_EQ(measured.accumulator.bits, 22);
  const std::string bad = write(dir, "b.yaml",
                                "tolerances:\n  - family: mm\n    metric: bounded\n    factor: 1\n    why: w\n"
                                "    provisional: true\n");
  EXPECT_TRUE(points_at(load_error(bad), bad, 6));
}

TEST(ToleranceBuiltin, CoversSdpaOutputsForEveryInputDtype) {
  const ToleranceTable t = ToleranceTable::load((kCases / "tolerances.yaml").string());
  for (DType dt : {DType::bf16, DType::fp16, DType::fp32}) {
    SCOPED_TRACE(std::string(name(dt)));
    for (const char* impl : {"cuda.flash", "cuda.math", "host.flash"}) {
      const Tolerance o = t.resolve("sdpa", "O", dt, impl, "sm90", "sdpa.x/y", nullptr);
      EXPECT_EQ(o.metric, Metric::ref_relative);
      EXPECT_GT(o.factor, 0.0);
      // lse is fp32 whatever the input dtype.
      const Tolerance lse = t.resolve("sdpa", "lse", DType::fp32, impl, "sm90", "sdpa.x/y", nullptr);
      EXPECT_GT(lse.factor, 0.0);
    }
  }
  for (const auto& r : t.rules()) EXPECT_FALSE(r.why.empty()) << r.tol.source;
}

}  // namespace
}  // namespace opcts
