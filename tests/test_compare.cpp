// compare_output: every metric's bounds (ref_relative per row, with floors and one output rounding),
// NaN/Inf position rules, worst elements, argument checks and the trust check's zero counts.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <stdexcept>
#include <vector>

#include <omp.h>

#include "core/family.hpp"
#include "judge/compare.hpp"
#include "judge/conservation.hpp"

namespace opcts {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

HostTensor tensor(DType t, std::vector<int64_t> shape, const std::vector<double>& values) {
  HostTensor h(t, std::move(shape));
  for (size_t i = 0; i < values.size(); ++i) h.set(static_cast<int64_t>(i), values[i]);
  return h;
}

Tolerance tol_of(Metric m, double atol = 0, double rtol = 0, double factor = 0, double atol_eps = 0) {
  Tolerance t;
  t.metric = m;
  t.atol = atol;
  t.rtol = rtol;
  t.factor = factor;
  t.atol_eps = atol_eps;
  return t;
}

OutputStats run(const HostTensor& got, const std::vector<double>& want, const Tolerance& tol,
                const std::vector<double>* lowp = nullptr) {
  std::vector<WorstElement> worst;
  return compare_output("O", got, {.want = want, .lowp = lowp}, tol, worst);
}

TEST(CompareExact, PassesOnEqualAndSignedZeroFailsOnOneUlp) {
  const std::vector<double> want = {1.0, -2.5, 0.0, 1024.0};
  auto s = run(tensor(DType::fp32, {4}, {1.0, -2.5, -0.0, 1024.0}), want, tol_of(Metric::exact));
  EXPECT_EQ(s.mismatches, 0);
  EXPECT_EQ(s.max_abs_err, 0.0);
  EXPECT_EQ(s.metric, "exact");
  EXPECT_EQ(s.elements, 4);

  auto f = run(tensor(DType::fp32, {4}, {1.0, -2.5, 0.0, 1024.0 + 1.0 / 8192}), want, tol_of(Metric::exact));
  EXPECT_EQ(f.mismatches, 1);
  EXPECT_EQ(f.max_abs_err, 1.0 / 8192);
}

TEST(CompareAllclose, AtolBoundsAbsoluteError) {
  const std::vector<double> want = {0.0, 0.0, 0.0};
  EXPECT_EQ(run(tensor(DType::fp64, {3}, {0.0, 0.01, -0.01}), want, tol_of(Metric::allclose, 0.01)).mismatches, 0);
  EXPECT_EQ(run(tensor(DType::fp64, {3}, {0.0, 0.0101, -0.0101}), want, tol_of(Metric::allclose, 0.01)).mismatches, 2);
}

TEST(CompareAllclose, RtolScalesWithEachElement) {
  // Dyadic values keep every error and bound exact.
  const std::vector<double> want = {128.0, 1.0};
  const auto t = tol_of(Metric::allclose, 0, 1.0 / 64);
  EXPECT_EQ(run(tensor(DType::fp64, {2}, {130.0, 1.0 + 1.0 / 64}), want, t).mismatches, 0);  // on the bound
  // 0.5 off is fine at 128 but not at 1: the bound is per element.
  auto s = run(tensor(DType::fp64, {2}, {128.5, 1.5}), want, t);
  EXPECT_EQ(s.mismatches, 1);
  EXPECT_EQ(s.max_rel_err, 0.5);
  EXPECT_EQ(s.max_abs_err, 0.5);
  EXPECT_EQ(run(tensor(DType::fp64, {2}, {130.0 + 1.0 / 256, 1.0}), want, t).mismatches, 1);
}

TEST(CompareAllclose, AtolEpsCountsOutputDtypeRoundingsAtMaxReference) {
  // fp16 output: eps = 2^-10; max|want| = 512, so atol_eps = 1 gives a floor of 0.5.
  const std::vector<double> want = {512.0, 3.0};
  const auto t = tol_of(Metric::allclose, 0, 0, 0, 1.0);
  auto ok = run(tensor(DType::fp16, {2}, {512.0, 3.5}), want, t);
  EXPECT_EQ(ok.mismatches, 0);
  EXPECT_DOUBLE_EQ(ok.bound, 0.5);
  auto bad = run(tensor(DType::fp16, {2}, {512.0, 3.75}), want, t);
  EXPECT_EQ(bad.mismatches, 1);
  // The same errors in fp32 get a floor 2^13 times smaller.
  EXPECT_EQ(run(tensor(DType::fp32, {2}, {512.0, 3.5}), want, t).mismatches, 1);
}

// ref_relative into e4m3fn, which saturates at 448: a want far past the range must come back as
// ±448 exactly (one code below, 416, or a NaN fails), and one that lies past the range by less
// than the accumulation error may come back inside it, within the error that reaches back and half
// a spacing there. Elements inside the range keep the usual bound.
TEST(CompareRefRelative, ASaturatingOutputMustHoldTheLargestFiniteValue) {
  const std::vector<double> want = {1000.0, -2000.0, 450.0, 100.0}, lowp = {1000.0, -2000.0, 410.0, 100.0};
  const auto t = tol_of(Metric::ref_relative, 0, 0, 1.0);  // acc = max|lowp − want| over the row: 40
  EXPECT_EQ(run(tensor(DType::e4m3fn, {4}, {448, -448, 448, 100}), want, t, &lowp).mismatches, 0);
  // 450 is 2 past the range and acc = 40: a v down to 410 is right, stored as 448 or 416 (RN).
  EXPECT_EQ(run(tensor(DType::e4m3fn, {4}, {448, -448, 416, 100}), want, t, &lowp).mismatches, 0);
  EXPECT_EQ(run(tensor(DType::e4m3fn, {4}, {448, -448, 384, 100}), want, t, &lowp).mismatches, 1);
  const auto below = run(tensor(DType::e4m3fn, {4}, {416, -448, 448, 100}), want, t, &lowp);
  EXPECT_EQ(below.mismatches, 1);  // 1000 is 552 past: only 448 is right
  EXPECT_EQ(below.max_abs_err, 32);
  EXPECT_EQ(run(tensor(DType::e4m3fn, {4}, {448, kNaN, 448, 100}), want, t, &lowp).mismatches, 1);
  // Inside the range the usual bound: 40 + half of 16 (the spacing at 140).
  EXPECT_EQ(run(tensor(DType::e4m3fn, {4}, {448, -448, 448, 144}), want, t, &lowp).mismatches, 0);
  EXPECT_EQ(run(tensor(DType::e4m3fn, {4}, {448, -448, 448, 160}), want, t, &lowp).mismatches, 1);
}

TEST(CompareRefRelative, BoundIsFactorTimesLowpErrorPlusFloor) {
  // fp64 output: the half spacing of the output rounding is ~1e-16 here.
  const std::vector<double> want = {1.0, 2.0, 4.0};
  const std::vector<double> lowp = {1.0, 2.0 + 1.0 / 128, 4.0 - 1.0 / 64};  // max|lowp - want| = 1/64
  const auto t = tol_of(Metric::ref_relative, 1.0 / 1024, 0, 2.0);
  const double bound = 2.0 / 64 + 1.0 / 1024;
  auto ok = run(tensor(DType::fp64, {3}, {1.0 + bound, 2.0, 4.0 - bound}), want, t, &lowp);  // errors on the bound
  EXPECT_EQ(ok.lowp_err, 1.0 / 64);
  EXPECT_NEAR(ok.bound, bound, 1e-15);
  EXPECT_EQ(ok.mismatches, 0);
  EXPECT_EQ(ok.metric, "ref_relative");
  auto bad = run(tensor(DType::fp64, {3}, {1.0 + bound + 1.0 / 4096, 2.0 - 1.0 / 16, 4.0}), want, t, &lowp);
  EXPECT_EQ(bad.mismatches, 2);
  EXPECT_EQ(bad.max_abs_err, 1.0 / 16);
  // The reported bound makes max_abs_err / bound the worst element's error ÷ its bound.
  EXPECT_NEAR(bad.max_abs_err / bad.bound, (1.0 / 16) / bound, 1e-12);
  // A larger factor admits the same output.
  EXPECT_EQ(run(tensor(DType::fp64, {3}, {1.0 + bound + 1.0 / 4096, 2.0 - 1.0 / 16, 4.0}), want,
                tol_of(Metric::ref_relative, 1.0 / 1024, 0, 4.0), &lowp)
                .mismatches,
            0);
}

TEST(CompareRefRelative, ExactLowpLeavesTheFloorAndOneRounding) {
  const std::vector<double> want = {256.0, 1.0};
  const std::vector<double> lowp = want;                        // lowp error 0
  const auto t = tol_of(Metric::ref_relative, 0, 0, 2.0, 0.5);  // floor 0.5 · 2^-7 · 256 = 1 in bf16
  // Element 1: e = 1, plus half a bf16 spacing at |1| + 1 = 2, i.e. 2^-7.
  auto ok = run(tensor(DType::bf16, {2}, {256.0, 2.0}), want, t, &lowp);
  EXPECT_DOUBLE_EQ(ok.bound, 1.0 + 1.0 / 128);
  EXPECT_EQ(ok.mismatches, 0);
  EXPECT_EQ(run(tensor(DType::bf16, {2}, {256.0, 2.5}), want, t, &lowp).mismatches, 1);
}

// lowp is the same-precision result before its output rounding: a kernel may round once to
// either side of a value it computed exactly, never further.
TEST(CompareRefRelative, OneOutputRoundingIsAllowedNotTwo) {
  const std::vector<double> want = {1.0 + 3.0 / 1024};  // bf16 neighbours 1 and 1 + 2^-7
  const auto t = tol_of(Metric::ref_relative, 0, 0, 2.0);
  EXPECT_EQ(run(tensor(DType::bf16, {1}, {1.0}), want, t, &want).mismatches, 0);              // 3/1024 <= 2^-8
  EXPECT_EQ(run(tensor(DType::bf16, {1}, {1.0 + 1.0 / 128}), want, t, &want).mismatches, 1);  // 5/1024 > 2^-8
}

// Each row is bounded by its own same-precision error: a row whose reference is nearly exact
// does not borrow the bound of a row whose reference errs (a global maximum would).
TEST(CompareRefRelative, RowsAreBoundedByTheirOwnLowpError) {
  const std::vector<double> want = {1.0, 1.0, 1.0, 1.0};
  const std::vector<double> lowp = {1.0 + 1.0 / 8, 1.0, 1.0, 1.0 + 1.0 / 1024};  // rows of 2: 1/8, 1/1024
  const auto t = tol_of(Metric::ref_relative, 0, 0, 2.0);
  const HostTensor got = tensor(DType::fp64, {4}, {1.0 + 1.0 / 8, 1.0, 1.0 + 1.0 / 256, 1.0});
  std::vector<WorstElement> worst;
  const OutputStats rows = compare_output("O", got, {.want = want, .lowp = &lowp, .row = 2}, t, worst);
  EXPECT_EQ(rows.mismatches, 1);  // element 2: 1/256 > 2 · 1/1024
  EXPECT_EQ(compare_output("O", got, {.want = want, .lowp = &lowp}, t, worst).mismatches, 0);  // one row: 2 · 1/8
}

// The reference's per-element bound (References::bound) replaces the statistic where it is
// larger, so an exact 0 whose terms cancel in fp32 is not bound by 0.
TEST(CompareRefRelative, ReferenceBoundsArePerElementAndTheLargerTermWins) {
  const std::vector<double> want = {0.0, 0.0}, floors = {2e-6, 0.0};
  const auto t = tol_of(Metric::ref_relative, 0, 0, 2.0);
  const HostTensor got = tensor(DType::fp32, {2}, {1e-6, 1e-6});
  std::vector<WorstElement> worst;
  const OutputStats s = compare_output("O", got, {.want = want, .lowp = &want, .bound = &floors}, t, worst);
  EXPECT_EQ(s.mismatches, 1);  // element 1 has no floor: its bound is half fp32's smallest spacing
  EXPECT_LT(s.bound, 1e-44);
  const std::vector<double> short_floors = {1.0};
  EXPECT_THROW(compare_output("O", got, {.want = want, .lowp = &want, .bound = &short_floors}, t, worst),
               std::invalid_argument);
  // max(2 · 1/64, 1/16) = 1/16 bounds element 0, max(2 · 1/64, 0) = 1/32 element 1: not their sum.
  const std::vector<double> w = {1.0, 1.0}, lp = {1.0 + 1.0 / 64, 1.0}, b = {1.0 / 16, 0.0};
  EXPECT_EQ(compare_output("O", tensor(DType::fp64, {2}, {1.0 + 1.0 / 16, 1.0 + 1.0 / 32}),
                           {.want = w, .lowp = &lp, .bound = &b}, t, worst)
                .mismatches,
            0);
  EXPECT_EQ(compare_output("O", tensor(DType::fp64, {2}, {1.0 + 1.0 / 16 + 1.0 / 1024, 1.0 + 1.0 / 32 + 1.0 / 1024}),
                           {.want = w, .lowp = &lp, .bound = &b}, t, worst)
                .mismatches,
            2);
}

// The trust check's reference zeros are counted after rounding to the output dtype: a value
// that underflows there, or lies below fp32's smallest normal (flushed by GPU kernels), is a
// correct 0.
TEST(CompareTrustZeros, ReferenceZerosAreCountedAfterRoundingToTheOutput) {
  const std::vector<double> want = {1e-9, -3e-8, 1e-3, 0.0, 5e-39};
  const auto t = tol_of(Metric::allclose, 1.0);
  // fp16: 1e-9 < 2^-25 rounds to 0, 3e-8 > 2^-25 rounds to 2^-24, 5e-39 < 2^-126.
  EXPECT_EQ(run(tensor(DType::fp16, {5}, {0, 0, 0, 0, 0}), want, t).ref_zeros, 3);
  // bf16 holds 1e-9 and 3e-8; 5e-39 is below fp32's smallest normal.
  EXPECT_EQ(run(tensor(DType::bf16, {5}, {0, 0, 0, 0, 0}), want, t).ref_zeros, 2);
}

TEST(CompareSpecials, NaNAtTheSamePositionPasses) {
  const std::vector<double> want = {1.0, kNaN, 3.0};
  auto s = run(tensor(DType::fp32, {3}, {1.0, kNaN, 3.0}), want, tol_of(Metric::exact));
  EXPECT_EQ(s.mismatches, 0);
  EXPECT_EQ(s.max_abs_err, 0.0);
}

TEST(CompareSpecials, NaNAtDifferentPositionsFailsAndIsListedFirst) {
  const std::vector<double> want = {1.0, kNaN, 3.0, 4.0};
  std::vector<WorstElement> worst;
  // Element 3 is off by 100, far more than anything else, yet the NaN mismatches come first.
  const HostTensor got = tensor(DType::fp32, {2, 2}, {kNaN, 2.0, 3.0, 104.0});
  auto s = compare_output("O", got, {.want = want}, tol_of(Metric::allclose, 1e-3), worst);
  EXPECT_EQ(s.mismatches, 3);  // NaN at 0, NaN missing at 1, element 3
  ASSERT_EQ(worst.size(), 3u);
  EXPECT_TRUE(std::isnan(worst[0].got));
  EXPECT_EQ(worst[0].index, (std::vector<int64_t>{0, 0}));
  EXPECT_TRUE(std::isnan(worst[1].want));
  EXPECT_EQ(worst[1].index, (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(worst[2].index, (std::vector<int64_t>{1, 1}));
  EXPECT_EQ(worst[2].got, 104.0);
  EXPECT_EQ(worst[0].out, "O");
}

TEST(CompareSpecials, InfinitiesMustMatchInSign) {
  const std::vector<double> want = {kInf, -kInf};
  EXPECT_EQ(run(tensor(DType::fp32, {2}, {kInf, -kInf}), want, tol_of(Metric::exact)).mismatches, 0);
  EXPECT_EQ(run(tensor(DType::fp32, {2}, {-kInf, -kInf}), want, tol_of(Metric::exact)).mismatches, 1);
  EXPECT_EQ(run(tensor(DType::fp32, {2}, {kInf, kInf}), want, tol_of(Metric::allclose, 1e9)).mismatches, 1);
  // A finite value where the reference is infinite (and the reverse) is a mismatch too.
  EXPECT_EQ(run(tensor(DType::fp32, {2}, {1e30, -kInf}), want, tol_of(Metric::allclose, 1e38)).mismatches, 1);
  EXPECT_EQ(
      run(tensor(DType::fp32, {2}, {kInf, 0.0}), std::vector<double>{kInf, 0.0}, tol_of(Metric::exact)).mismatches, 0);
  EXPECT_EQ(run(tensor(DType::fp32, {2}, {kInf, kInf}), std::vector<double>{kInf, 0.0}, tol_of(Metric::allclose, 1e38))
                .mismatches,
            1);
}

TEST(CompareWorst, SortedByErrorWithMultiIndicesAndCapped) {
  // Shape [2,3,4]; errors placed at a few linear indices.
  std::vector<double> want(24, 1.0), got = want;
  got[23] += 0.5;  // [1,2,3]
  got[5] += 4.0;   // [0,1,1]
  got[14] -= 2.0;  // [1,0,2]
  got[0] += 1.0;   // [0,0,0]
  got[9] += 0.25;  // [0,2,1]
  got[17] += 3.0;  // [1,1,1]
  std::vector<WorstElement> worst;
  auto s = compare_output("lse", tensor(DType::fp64, {2, 3, 4}, got), {.want = want}, tol_of(Metric::exact), worst, 4);
  EXPECT_EQ(s.mismatches, 6);
  EXPECT_EQ(s.max_abs_err, 4.0);
  ASSERT_EQ(worst.size(), 4u);
  EXPECT_EQ(worst[0].index, (std::vector<int64_t>{0, 1, 1}));
  EXPECT_EQ(worst[1].index, (std::vector<int64_t>{1, 1, 1}));
  EXPECT_EQ(worst[2].index, (std::vector<int64_t>{1, 0, 2}));
  EXPECT_EQ(worst[3].index, (std::vector<int64_t>{0, 0, 0}));
  EXPECT_EQ(worst[0].got, 5.0);
  EXPECT_EQ(worst[0].want, 1.0);
  EXPECT_EQ(worst[2].got, -1.0);
  EXPECT_EQ(worst[0].out, "lse");
}

TEST(CompareWorst, KeepsTheLargestErrorsOfALongOutput) {
  // More candidates than the internal pruning threshold: the largest must survive.
  const int n = 10000;
  std::vector<double> want(n, 0.0), got(n);
  for (int i = 0; i < n; ++i) got[i] = 1e-3 * ((i * 7919) % n);  // a permutation of error sizes
  std::vector<WorstElement> worst;
  compare_output("O", tensor(DType::fp64, {n}, got), {.want = want}, tol_of(Metric::exact), worst, 3);
  ASSERT_EQ(worst.size(), 3u);
  EXPECT_DOUBLE_EQ(worst[0].got, 1e-3 * (n - 1));
  EXPECT_DOUBLE_EQ(worst[1].got, 1e-3 * (n - 2));
  EXPECT_DOUBLE_EQ(worst[2].got, 1e-3 * (n - 3));
}

TEST(CompareArgs, SizeMismatchAndMissingLowpThrow) {
  const HostTensor got = tensor(DType::fp32, {3}, {1, 2, 3});
  std::vector<WorstElement> worst;
  EXPECT_THROW(compare_output("O", got, {.want = {1, 2}}, tol_of(Metric::exact), worst), std::invalid_argument);
  EXPECT_THROW(compare_output("O", got, {.want = {1, 2, 3}}, tol_of(Metric::ref_relative, 0, 0, 2), worst),
               std::invalid_argument);
  const std::vector<double> short_lowp = {1, 2};
  EXPECT_THROW(
      compare_output("O", got, {.want = {1, 2, 3}, .lowp = &short_lowp}, tol_of(Metric::ref_relative, 0, 0, 2), worst),
      std::invalid_argument);
  EXPECT_NO_THROW(compare_output("O", got, {.want = {1, 2, 3}}, tol_of(Metric::allclose), worst));
}

// bounded: a reference beyond the output's range is stored unrounded; the device may give
// the largest finite value (when within the bound) or inf (when x + E reaches the overflow
// threshold 65504 + 16 of fp16), but not a saturated value far below x.
TEST(CompareBounded, OverflowNearTheEdgeMayRoundEitherWay) {
  auto t = tol_of(Metric::bounded);
  t.factor = 1;
  std::vector<WorstElement> worst;
  // One term of magnitude 2^26 under the default fp32 model: E = γ_2(2^-24)·2^26 + γ_5·X,
  // just over 8 (judge/accumulator.hpp).
  ReductionStats st;
  st.terms = 1;
  st.abs_sum.assign(3, 0x1p26);
  st.sq_sum.assign(3, 0.0);
  const auto cmp = [&](std::vector<double> got, std::vector<double> want) {
    st.magnitude = {std::fabs(want[0]), std::fabs(want[1]), std::fabs(want[2])};
    return compare_output("d", tensor(DType::fp16, {3}, got), {.want = want, .reduction = &st}, t, worst).mismatches;
  };
  EXPECT_EQ(cmp({65504, kInf, -kInf}, {65525, 65525, -65515}), 0);  // 65525 ∓ 8 straddles 65520; 65515 + 8 >= 65520
  // 65530 − 8 >= 65520 must overflow; a saturated 1e6; -65500 + 8 cannot overflow.
  EXPECT_EQ(cmp({65504, 65504, -kInf}, {65530, 1e6, -65500}), 3);
  EXPECT_EQ(cmp({kInf, 65504, 65504}, {-65530, 65504, 65504}), 1);  // wrong sign
}

// bounded with the reference's own per-element bound (the indexing families): factor·bound[i] plus one output
// rounding; an accumulator model cannot apply to it.
TEST(CompareBounded, ReferenceBoundPerElement) {
  HostTensor got(DType::fp32, {2});
  got.set(0, 1.5);
  got.set(1, 10.0);
  const std::vector<double> want{1.0, 10.0}, bound{0.5, 0.0};
  auto t = tol_of(Metric::bounded);
  t.factor = 1;
  std::vector<WorstElement> w;
  EXPECT_EQ(compare_output("d", got, {.want = want, .bound = &bound}, t, w).mismatches, 0);
  got.set(1, 10.5);
  EXPECT_EQ(compare_output("d", got, {.want = want, .bound = &bound}, t, w).mismatches, 1);
  EXPECT_THROW(compare_output("d", got, {.want = want}, t, w), std::invalid_argument);  // no bound given
  t.accumulator = {14, AccRounding::truncate, 128};
  EXPECT_THROW(compare_output("d", got, {.want = want, .bound = &bound}, t, w), std::invalid_argument);
}

// A fixed bound with two sides (References::bound_below): the side got lies on, its rounding
// at that end. bf16 around 3000 (spacing 16): 3000 − 2744 = 256 is the floor, half a spacing
// at 256 below it (1); above, 100 and half a spacing at 3100 (8).
TEST(CompareBounded, TwoSidedBoundTakesTheSideGotLiesOn) {
  const std::vector<double> want{3000}, above{100}, below{2744};
  auto t = tol_of(Metric::bounded);
  t.factor = 1;
  std::vector<WorstElement> w;
  auto mismatches = [&](double got) {
    HostTensor g(DType::bf16, {1});
    g.set(0, got);
    return compare_output("d", g, {.want = want, .bound = &above, .bound_below = &below}, t, w).mismatches;
  };
  EXPECT_EQ(mismatches(256), 0);
  EXPECT_EQ(mismatches(255), 0);
  EXPECT_EQ(mismatches(254), 1);  // more than the floor's rounding below it
  EXPECT_EQ(mismatches(1), 1);    // a lost duplicate
  EXPECT_EQ(mismatches(3104), 0);
  EXPECT_EQ(mismatches(3120), 1);
  const std::vector<double> wrong{1, 2};
  EXPECT_THROW(compare_output("d", tensor(DType::bf16, {1}, {3000}),
                              {.want = want, .bound = &above, .bound_below = &wrong}, t, w),
               std::invalid_argument);
}

// bounded around the exact x: one rounding to nearest passes, a truncating conversion (the far
// neighbour on about half the elements: up to a whole spacing) fails, as does any result a whole
// spacing off — the full-spacing allowance around RN(x) that this replaced admitted both.
TEST(CompareBounded, HalfASpacingCatchesATruncatingConversion) {
  const int n = 1000;
  std::vector<double> want(n), bound(n, 1e-30);
  HostTensor rn(DType::bf16, {n}), rz(DType::bf16, {n});
  for (int i = 0; i < n; ++i) {
    want[i] = 1 + (i + 0.5) / n;  // never a bf16 value
    rn.set(i, want[i]);
    const double lo = round_to(DType::bf16, want[i]);  // the neighbour toward zero
    rz.set(i, lo > want[i] ? lo - spacing_at(DType::bf16, want[i]) : lo);
  }
  auto t = tol_of(Metric::bounded);
  t.factor = 1;
  std::vector<WorstElement> w;
  EXPECT_EQ(compare_output("d", rn, {.want = want, .bound = &bound}, t, w).mismatches, 0);
  EXPECT_GT(compare_output("d", rz, {.want = want, .bound = &bound}, t, w).mismatches, n / 3);
}

// Each failing output gets its kinds (core/failure_kind.hpp) from how its elements fail: a
// finite error beyond the bound (with the largest ratio), NaN/Inf where the reference is finite,
// the backends' poison left in place, a special of the reference not reproduced, all zeros.
TEST(CompareFailureKinds, EachFailingOutputSaysHowItFails) {
  using K = FailureKind;
  const Tolerance tol = tol_of(Metric::allclose, 0.125);
  const std::vector<double> want = {1.0, 2.0, 3.0, 4.0, kNaN, kInf};
  auto kinds = [&](const HostTensor& got) { return output_failures(run(got, want, tol)); };
  EXPECT_TRUE(kinds(tensor(DType::bf16, {6}, {1.0, 2.0, 3.0, 4.0, kNaN, kInf})).empty());
  // Two finite elements 0.5 and 1 beyond a bound of 0.125: ratio 8, two elements.
  EXPECT_EQ(kinds(tensor(DType::bf16, {6}, {1.5, 2.0, 4.0, 4.0, kNaN, kInf})),
            (std::vector<Failure>{{"O", K::exceeds_bound, 2, 8.0}}));
  // A computed NaN where 2 is due, and a finite value where the reference holds Inf.
  EXPECT_EQ(kinds(tensor(DType::bf16, {6}, {1.0, kNaN, 3.0, 4.0, kNaN, 7.0})),
            (std::vector<Failure>{{"O", K::nonfinite, 1, 0}, {"O", K::specials_mismatch, 1, 0}}));
  // The poison (bf16 0xFFFF) left in elements 2 and 3: untouched, told from the computed NaN.
  HostTensor poisoned = tensor(DType::bf16, {6}, {1.0, kNaN, 3.0, 4.0, kNaN, kInf});
  poisoned.set_code(2, 0xFFFF);
  poisoned.set_code(3, 0xFFFF);
  EXPECT_EQ(kinds(poisoned), (std::vector<Failure>{{"O", K::nonfinite, 1, 0}, {"O", K::untouched, 2, 0}}));
  // Zeros everywhere where the reference is not: all_zero, not exceeds_bound.
  EXPECT_EQ(output_failures(run(tensor(DType::fp32, {3}, {0.0, 0.0, 0.0}), {1.0, 0.0, 2.0}, tol)),
            (std::vector<Failure>{{"O", K::all_zero, 2, 0}}));
  // Every element within its bound, but 3 groups' sums off (set by runner/execute.cpp from the
  // conservation check): not_conserved, with the count of groups; alone, it still fails.
  OutputStats lost = run(tensor(DType::bf16, {6}, {1.0, 2.0, 3.0, 4.0, kNaN, kInf}), want, tol);
  lost.conservation_off = 3;
  EXPECT_EQ(output_failures(lost), (std::vector<Failure>{{"O", K::not_conserved, 3, 0}}));
  // e4m3fn's 0xFF is its negative NaN, which a conversion writes: nonfinite, not untouched.
  HostTensor e4 = tensor(DType::e4m3fn, {2}, {1.0, 2.0});
  e4.set_code(1, 0xFF);
  EXPECT_EQ(output_failures(run(e4, {1.0, 2.0}, tol)), (std::vector<Failure>{{"O", K::nonfinite, 1, 0}}));
  // fp4's all-ones code is a value (-6), so it is no poison: a plain error beyond the bound.
  HostTensor fp4 = tensor(DType::e2m1fn, {2}, {1.0, 2.0});
  fp4.set_code(1, 0xF);
  EXPECT_EQ(output_failures(run(fp4, {1.0, 2.0}, tol)), (std::vector<Failure>{{"O", K::exceeds_bound, 1, 64.0}}));
  // The bias check's slope outside its interval is its own kind.
  OutputStats biased;
  biased.out = "d";
  biased.slope = 0.01, biased.slope_lo = -0.001, biased.slope_hi = 0.001;
  EXPECT_EQ(output_failures(biased), (std::vector<Failure>{{"d", K::biased, 0, 0}}));
}

TEST(CompareMetric, ParseAndPrintRoundTrip) {
  for (Metric m : {Metric::exact, Metric::allclose, Metric::ref_relative}) EXPECT_EQ(parse_metric(to_string(m)), m);
  EXPECT_THROW(parse_metric("close"), std::invalid_argument);
}

// The key of References::bound that the references write and execute_case reads.
TEST(BoundKey, OutputAtAccumulationOrTheOutputAlone) {
  EXPECT_EQ(bound_key("lse", ""), "lse");
  EXPECT_EQ(bound_key("lse", "online_block64"), "lse@online_block64");
  EXPECT_EQ(bound_key("out", "per_add"), "out@per_add");
}

// The comparison splits a long output into chunks compared in parallel: its statistics and
// worst elements must not depend on the number of threads, the worst elements must be the
// largest errors with ties going to the lower index (across chunks too), and NaN mismatches in
// any chunk come first.
TEST(CompareChunks, SameResultOnAnyNumberOfThreads) {
  const int64_t n = 300000;  // ~9 chunks of 2^15
  std::vector<double> want(n), lowp(n);
  HostTensor got(DType::bf16, {n});
  ReductionStats st;
  st.terms = 256;
  st.zero_mean = true;
  st.abs_sum.resize(n);
  st.sq_sum.resize(n);
  st.magnitude.resize(n);
  for (int64_t i = 0; i < n; ++i) {
    want[i] = std::ldexp(1.0 + (i * 2654435761u % 1000) / 1000.0, static_cast<int>(i % 9) - 4) * (i % 2 ? -1 : 1);
    lowp[i] = want[i] * (1 + 1e-4 * ((i * 7) % 5 - 2));
    st.abs_sum[i] = 20 * std::fabs(want[i]);
    st.sq_sum[i] = 4 * want[i] * want[i];
    st.magnitude[i] = std::fabs(want[i]);
    got.set(i, want[i]);
  }
  // 300 equal errors in every chunk (ties), two NaN mismatches far apart, one large error.
  for (int64_t i = 17; i < n; i += 1000) want[i] = got.get(i) + 0.5;
  got.set(199999, NAN);
  got.set(3, NAN);
  want[150001] = got.get(150001) - 3;
  for (Metric m : {Metric::bounded, Metric::ref_relative, Metric::allclose, Metric::exact}) {
    Tolerance t = tol_of(m, 0, 1e-3, 2);
    t.false_alarm = m == Metric::bounded ? 1e-6 : 0;
    std::vector<OutputStats> s;
    std::vector<std::vector<WorstElement>> w;
    for (int threads : {1, 2, 5}) {
      omp_set_num_threads(threads);
      w.emplace_back();
      s.push_back(compare_output(
          "O", got, {.want = want, .lowp = &lowp, .row = 1000, .reduction = m == Metric::bounded ? &st : nullptr}, t,
          w.back()));
    }
    omp_set_num_threads(omp_get_num_procs());
    SCOPED_TRACE(std::string(to_string(m)));
    for (size_t k = 1; k < s.size(); ++k) {
      EXPECT_EQ(s[k].mismatches, s[0].mismatches);
      EXPECT_EQ(s[k].max_abs_err, s[0].max_abs_err);
      EXPECT_EQ(s[k].max_rel_err, s[0].max_rel_err);
      EXPECT_EQ(s[k].max_ratio, s[0].max_ratio);
      EXPECT_EQ(s[k].bound, s[0].bound);
      EXPECT_EQ(s[k].lowp_err, s[0].lowp_err);
      EXPECT_EQ(s[k].zeros, s[0].zeros);
      EXPECT_EQ(s[k].ref_zeros, s[0].ref_zeros);
      EXPECT_EQ(s[k].slope, s[0].slope);
      EXPECT_EQ(s[k].slope_lo, s[0].slope_lo);
      EXPECT_EQ(s[k].slope_hi, s[0].slope_hi);
      ASSERT_EQ(w[k].size(), w[0].size());
      for (size_t i = 0; i < w[k].size(); ++i) EXPECT_EQ(w[k][i].index, w[0][i].index);
    }
    ASSERT_EQ(w[0].size(), 5u);
    EXPECT_EQ(w[0][0].index, std::vector<int64_t>{3});  // NaN mismatches first, lower index first
    EXPECT_EQ(w[0][1].index, std::vector<int64_t>{199999});
    EXPECT_EQ(w[0][2].index, std::vector<int64_t>{150001});
    EXPECT_EQ(w[0][3].index, std::vector<int64_t>{17});  // the ties of 0.5: the two lowest indices
    EXPECT_EQ(w[0][4].index, std::vector<int64_t>{1017});
    EXPECT_GE(s[0].mismatches, 2);
    if (m == Metric::bounded) EXPECT_NE(s[0].slope_hi, 0.0);
  }
}

// The check itself: groups of `group` elements in order, the interval's two sides and the
// tolerance's factor, non-finite sums left to the per-element comparison, sizes checked.
TEST(ConservationCheck, GroupsSidesFactorAndErrors) {
  HostTensor got(DType::fp32, {2, 3});
  for (int i = 0; i < 6; ++i) got.set(i, i);  // groups of 3: sums 3 and 12
  Conservation c;
  c.group = 3;
  c.sum = {3.5, 12};
  c.below = {0.5, 0};
  c.above = {0, 0};
  c.total_sum = 15.5, c.total_below = 0.5, c.total_above = 0;
  EXPECT_FALSE(check_conservation("o", got, c).failed());
  c.below[0] = 0.25;  // 3 is 0.5 below 3.5
  ConservationStats s = check_conservation("o", got, c);
  EXPECT_EQ(s.groups_off, 1);
  EXPECT_FALSE(s.total_off);
  EXPECT_NE(s.first.find("group 0 of 2 (o[0,0] to o[0,2]): sum 3, due 3.5"), std::string::npos) << s.first;
  EXPECT_FALSE(check_conservation("o", got, c, 2).failed());  // the factor scales the interval
  c.total_below = 0;
  c.below[0] = 0.5;
  s = check_conservation("o", got, c);
  EXPECT_TRUE(s.total_off);
  EXPECT_NE(s.first.find("the whole output"), std::string::npos);
  got.set(4, NAN);  // group 1 and the total are left to the per-element comparison
  c.total_below = 0;
  s = check_conservation("o", got, c);
  EXPECT_FALSE(s.failed());
  EXPECT_EQ(s.groups, 1);
  c.sum.pop_back();
  EXPECT_THROW(check_conservation("o", got, c), std::invalid_argument);
}

}  // namespace
}  // namespace opcts
