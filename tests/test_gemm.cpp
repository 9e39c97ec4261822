// The references' GEMM at every ISA level this CPU supports (refimpl/gemm.hpp): bit-identical
// where every partial sum is exact, within γ_K·Σ|a||b| of the exact product otherwise, for
// every transpose and for accumulation; and a family reference (scaled_mm) that does not
// depend on the level where it is exact and stays within its reduction statistic where not.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "app/builtins.hpp"
#include "families/scaled_mm/scaled_mm.hpp"
#include "refimpl/gemm.hpp"
#include "refimpl/reduction_gemm.hpp"

namespace opcts {
namespace {

using ref::IsaLevel;

// Restores the process's level when a test is done with it.
struct LevelGuard {
  IsaLevel saved = ref::gemm_isa_level();
  ~LevelGuard() { ref::set_gemm_isa_level(saved); }
};

struct Mat {
  int64_t rows, cols;
  std::vector<double> v;
  double at(int64_t i, int64_t j, bool t) const { return t ? v[j * cols + i] : v[i * cols + j]; }
};

// op(A)[m, k] (stored [k, m] when ta) with entries from `draw`.
template <class Draw>
Mat make(int64_t rows, int64_t cols, Draw draw) {
  Mat x{rows, cols, std::vector<double>(static_cast<size_t>(rows * cols))};
  for (auto& e : x.v) e = draw();
  return x;
}

// C[m, n] = op(A)·op(B) at the current level, in T.
template <class T>
std::vector<T> product(const Mat& a, bool ta, const Mat& b, bool tb, int64_t m, int64_t n, int64_t k,
                       const std::vector<T>* acc = nullptr) {
  const std::vector<T> at(a.v.begin(), a.v.end()), bt(b.v.begin(), b.v.end());
  std::vector<T> c = acc ? *acc : std::vector<T>(static_cast<size_t>(m * n), T(7));  // 7: overwritten unless acc
  ref::gemm<T>(m, n, k, {at.data(), a.cols, ta}, {bt.data(), b.cols, tb}, c.data(), n, acc != nullptr);
  return c;
}

// The exact product (long double: 64-bit significand, products of doubles rounded at 2^-64)
// and Σ|a||b| per element.
struct Exact {
  std::vector<long double> c, abs;
};
Exact exact_product(const Mat& a, bool ta, const Mat& b, bool tb, int64_t m, int64_t n, int64_t k) {
  Exact e{std::vector<long double>(static_cast<size_t>(m * n)), std::vector<long double>(static_cast<size_t>(m * n))};
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j)
      for (int64_t l = 0; l < k; ++l) {
        const long double t = static_cast<long double>(a.at(i, l, ta)) * b.at(l, j, tb);
        e.c[i * n + j] += t;
        e.abs[i * n + j] += std::fabs(t);
      }
  return e;
}

double gamma(int64_t k, double u) { return static_cast<double>(k) * u / (1 - static_cast<double>(k) * u); }

// How many elements of `c` are farther from the exact product than γ_K(u)·Σ|a||b| plus the
// long-double reference's own error (γ_K(2^-64)·Σ|a||b|).
template <class T>
int64_t outside_bound(const std::vector<T>& c, const Exact& e, int64_t k) {
  const double u = std::ldexp(1.0, -std::numeric_limits<T>::digits);
  const double coef = gamma(k, u) + gamma(k + 1, std::ldexp(1.0, -64));
  int64_t bad = 0;
  for (size_t i = 0; i < c.size(); ++i) bad += std::fabs(static_cast<long double>(c[i]) - e.c[i]) > coef * e.abs[i];
  return bad;
}

TEST(RefGemm, LevelsParseAndBaseIsAlwaysThere) {
  const auto levels = ref::supported_isa_levels();
  ASSERT_FALSE(levels.empty());
  EXPECT_EQ(levels.front(), IsaLevel::base);
  EXPECT_EQ(ref::parse_isa_level("v3"), IsaLevel::v3);
  EXPECT_EQ(ref::parse_isa_level("x86-64-v4"), IsaLevel::v4);
  EXPECT_THROW(ref::parse_isa_level("avx9"), std::invalid_argument);
  // The dispatcher picks the best level unless told otherwise.
  if (!std::getenv("OPCTS_REF_ISA")) {
    LevelGuard g;
    EXPECT_EQ(g.saved, levels.back());
  }
}

// Integer entries: every product and partial sum is an integer below 2^24, exact in fp32 and
// fp64, so every level, order and fusing gives the same bits.
TEST(RefGemm, ExactSumsAreBitIdenticalAtEveryLevel) {
  LevelGuard guard;
  std::mt19937_64 rng(5);
  std::uniform_int_distribution<int> small(-8, 8);
  const int64_t m = 67, n = 45, k = 300;  // not multiples of any kernel's tile
  for (const bool ta : {false, true})
    for (const bool tb : {false, true}) {
      const Mat a = make(ta ? k : m, ta ? m : k, [&] { return small(rng); });
      const Mat b = make(tb ? n : k, tb ? k : n, [&] { return small(rng); });
      const Exact e = exact_product(a, ta, b, tb, m, n, k);
      std::vector<double> want(e.c.begin(), e.c.end());
      for (IsaLevel l : ref::supported_isa_levels()) {
        SCOPED_TRACE(std::string(to_string(l)) + (ta ? " Aᵀ" : " A") + (tb ? " Bᵀ" : " B"));
        ref::set_gemm_isa_level(l);
        EXPECT_EQ(product<double>(a, ta, b, tb, m, n, k), want);
        const auto f = product<float>(a, ta, b, tb, m, n, k);
        EXPECT_EQ(std::vector<double>(f.begin(), f.end()), want);
        const std::vector<double> acc(static_cast<size_t>(m * n), 3.0);
        std::vector<double> want_acc = want;
        for (auto& x : want_acc) x += 3.0;
        EXPECT_EQ(product<double>(a, ta, b, tb, m, n, k, &acc), want_acc);
      }
    }
}

// N(0, 1) entries: rounding happens; each level is within γ_K·Σ|a||b| of the exact product.
TEST(RefGemm, RoundedSumsStayWithinTheClassicBoundAtEveryLevel) {
  LevelGuard guard;
  std::mt19937_64 rng(11);
  std::normal_distribution<double> normal;
  const int64_t m = 96, n = 80, k = 1000;
  for (const bool ta : {false, true}) {
    const bool tb = !ta;
    const Mat a = make(ta ? k : m, ta ? m : k, [&] { return normal(rng); });
    const Mat b = make(tb ? n : k, tb ? k : n, [&] { return normal(rng); });
    const Exact e = exact_product(a, ta, b, tb, m, n, k);
    for (IsaLevel l : ref::supported_isa_levels()) {
      SCOPED_TRACE(to_string(l));
      ref::set_gemm_isa_level(l);
      EXPECT_EQ(outside_bound(product<double>(a, ta, b, tb, m, n, k), e, k), 0);
      EXPECT_EQ(outside_bound(product<float>(a, ta, b, tb, m, n, k), e, k), 0);
    }
  }
}

// The two checks above can fail: one ulp off is not bit-identical, and an error the size of the
// bound's own margin lands outside it.
TEST(RefGemm, TheChecksCatchAPlantedError) {
  std::mt19937_64 rng(3);
  std::normal_distribution<double> normal;
  const int64_t m = 8, n = 8, k = 64;
  const Mat a = make(m, k, [&] { return normal(rng); }), b = make(k, n, [&] { return normal(rng); });
  const Exact e = exact_product(a, false, b, false, m, n, k);
  std::vector<double> c = product<double>(a, false, b, false, m, n, k);
  ASSERT_EQ(outside_bound(c, e, k), 0);
  std::vector<double> one_ulp = c;
  one_ulp[5] = std::nextafter(one_ulp[5], 1e300);
  EXPECT_NE(one_ulp, c);
  // A planted error of 2·γ_K(u)·Σ|a||b| (the size of a product that dropped half of its
  // guard against rounding) is caught.
  std::vector<double> planted = c;
  planted[9] += 2 * gamma(k, std::ldexp(1.0, -53)) * static_cast<double>(e.abs[9]);
  EXPECT_EQ(outside_bound(planted, e, k), 1);
}

TEST(RefGemm, EmptySumsGiveZeroAndEmptyOutputsAreLeftAlone) {
  std::vector<double> c(6, 5.0);
  const double one = 1;
  ref::gemm<double>(2, 3, 0, {&one, 0}, {&one, 3}, c.data(), 3);
  EXPECT_EQ(c, std::vector<double>(6, 0.0));
  c.assign(6, 5.0);
  ref::gemm<double>(2, 3, 0, {&one, 0}, {&one, 3}, c.data(), 3, true);
  EXPECT_EQ(c, std::vector<double>(6, 5.0));
  ref::gemm<double>(0, 3, 4, {&one, 4}, {&one, 3}, c.data(), 3);
  EXPECT_EQ(c, std::vector<double>(6, 5.0));
}

// scaled_mm's exact fill: every partial sum is exact in fp64 (and Σ|t|'s in fp32), so the
// reference is the same at every level; its random fill differs between levels by at most
// 2γ_K·S (S = its abs_sum statistic, the |·| sum each level's rounding is bounded by).
TEST(RefGemm, ScaledMmReferenceIsTheSameAtEveryLevel) {
  LevelGuard guard;
  const Family& f = *builtin_registry().family("scaled_mm");
  for (const auto fill : {scaled_mm::Fill::exact, scaled_mm::Fill::random}) {
    const scaled_mm::Problem p{.m = 70, .n = 130, .k = 512, .fill = fill};
    const TensorMap in = f.make_inputs(p, 17);
    ref::set_gemm_isa_level(IsaLevel::base);
    const References base = f.reference(p, in);
    for (IsaLevel l : ref::supported_isa_levels()) {
      SCOPED_TRACE(std::string(to_string(l)) + (fill == scaled_mm::Fill::exact ? " exact" : " random"));
      ref::set_gemm_isa_level(l);
      const References r = f.reference(p, in);
      const auto &d = r.exact.at("d"), &d0 = base.exact.at("d");
      const auto& s = base.reduction.at("d").abs_sum;
      if (fill == scaled_mm::Fill::exact) {
        EXPECT_EQ(d, d0);
        EXPECT_EQ(r.reduction.at("d").abs_sum, s);
        continue;
      }
      // d is rounded to bf16 once, so the unrounded GEMM outputs are compared: the magnitude
      // |Σt| (signed sums), each level within γ_K·S of the exact, so 2γ_K·S apart; and S
      // itself, an upper bound of Σ|t| within 2γ_{K+4} at fp32's u (refimpl/reduction_gemm.hpp)
      // at every level.
      const double coef = 2 * gamma(p.k, std::ldexp(1.0, -53)), coef_s = 2.05 * gamma(p.k + 4, std::ldexp(1.0, -24));
      const auto &mag = r.reduction.at("d").magnitude, &mag0 = base.reduction.at("d").magnitude;
      int64_t bad = 0;
      for (size_t i = 0; i < s.size(); ++i) {
        bad += std::fabs(r.reduction.at("d").abs_sum[i] - s[i]) > coef_s * s[i];
        bad += std::fabs(mag[i] - mag0[i]) > coef * s[i];
      }
      EXPECT_EQ(bad, 0);
    }
  }
}

// gemm_flops() counts 2·m·n·k a call, fp64 and fp32 apart (the suite bench's "gemm" column).
TEST(RefGemm, FlopsAreCountedByType) {
  std::vector<double> a(6 * 5, 1.0), b(5 * 4, 1.0), c(6 * 4);
  std::vector<float> af(3 * 7, 1.0f), bf(7 * 2, 1.0f), cf(3 * 2);
  const ref::GemmFlops f0 = ref::gemm_flops();
  ref::gemm<double>(6, 4, 5, {a.data(), 5}, {b.data(), 4}, c.data(), 4);
  ref::gemm<float>(3, 2, 7, {af.data(), 7}, {bf.data(), 2}, cf.data(), 2);
  ref::gemm<float>(3, 2, 7, {af.data(), 7}, {bf.data(), 2}, cf.data(), 2, true);
  const ref::GemmFlops f1 = ref::gemm_flops();
  EXPECT_EQ(f1.f64 - f0.f64, 2u * 6 * 4 * 5);
  EXPECT_EQ(f1.f32 - f0.f32, 2u * 2 * 3 * 2 * 7);
}

// reduction_products' magnitudes and squares (refimpl/reduction_gemm.hpp): upper bounds of
// Σ|t| and Σt² within a relative 2γ_{K+4} (fp32's u) where it takes fp32, the fp64 products
// exactly where it does not.
struct Stats {
  std::vector<double> value, abs_sum, sq_sum;
};
Stats stats_of(const RowMajorF64& a, const RowMajorF64& bt) {
  const int64_t R = a.rows(), C = bt.rows();
  Stats s{std::vector<double>(R * C), std::vector<double>(R * C), std::vector<double>(R * C)};
  reduction_products(a, bt, {s.value.data(), s.abs_sum.data(), s.sq_sum.data(), C});
  return s;
}

// Entries ±(2^20 + r)·2^(e − 20), r < 2^20, e in [-2, 2]: 21 significant bits (exact in fp32),
// so |a||b| has 42 and fp32 rounds the products, while long double (64 bits) sums K = 1000 of
// them (exponents within 2^8 of each other) exactly.
RowMajorF64 wide_operand(int64_t rows, int64_t k, std::mt19937_64& rng) {
  RowMajorF64 x(rows, k);
  std::uniform_int_distribution<int64_t> r(0, (int64_t{1} << 20) - 1);
  std::uniform_int_distribution<int> e(-2, 2), sign(0, 1);
  for (int64_t i = 0; i < x.size(); ++i)
    x.data()[i] = (sign(rng) ? -1.0 : 1.0) * std::ldexp(static_cast<double>((int64_t{1} << 20) + r(rng)), e(rng) - 20);
  return x;
}

TEST(ReductionProducts, Fp32StatisticsBoundTheSumsFromAbove) {
  std::mt19937_64 rng(5);
  const int64_t R = 80, C = 72, K = 1000;
  const RowMajorF64 a = wide_operand(R, K, rng), bt = wide_operand(C, K, rng);
  const Stats s = stats_of(a, bt);
  const double u = std::ldexp(1.0, -24), inflate = reduction_detail::fp32_sum_inflation(K + 4);
  const double slack = 2.05 * gamma(K + 4, u);
  int64_t below = 0, above = 0, raw_below = 0;
  for (int64_t i = 0; i < R; ++i)
    for (int64_t j = 0; j < C; ++j) {
      long double abs = 0, sq = 0;
      for (int64_t l = 0; l < K; ++l) {
        const long double t = static_cast<long double>(a(i, l)) * bt(j, l);
        abs += std::fabs(t);  // exact: 42-bit products, sums within 64 bits
        sq += t * t;          // rounded at 2^-64 per step: γ_{2K}(2^-64) relative at most
      }
      const long double sq_lo = sq * (1 - gamma(2 * K, std::ldexp(1.0, -64)));
      const size_t at = static_cast<size_t>(i * C + j);
      below += s.abs_sum[at] < abs || s.sq_sum[at] < sq_lo;
      above += s.abs_sum[at] > abs * (1 + slack) || s.sq_sum[at] > sq * (1 + slack);
      // Without the inflation the fp32 sums fall below the true ones: what the test must catch.
      raw_below += s.abs_sum[at] / inflate < abs;
    }
  EXPECT_EQ(below, 0);
  EXPECT_EQ(above, 0);
  EXPECT_GT(raw_below, R * C / 10);
}

TEST(ReductionProducts, Fp64WhereFp32CouldUnderflowOrTheProductIsSkinny) {
  std::mt19937_64 rng(6);
  const auto fp64_abs = [](const RowMajorF64& a, const RowMajorF64& bt) {
    const RowMajorF64 aa = a.cwiseAbs(), ba = bt.cwiseAbs();
    std::vector<double> c(static_cast<size_t>(a.rows() * bt.rows()));
    ref::gemm<double>(a.rows(), bt.rows(), a.cols(), {aa.data(), a.cols()}, {ba.data(), a.cols(), true}, c.data(),
                      bt.rows());
    return c;
  };
  // One magnitude below 2^-30 (its square could leave fp32's normal range): fp64 throughout.
  RowMajorF64 a = wide_operand(70, 64, rng), bt = wide_operand(66, 64, rng);
  a(3, 5) = 0x1p-31;
  EXPECT_EQ(stats_of(a, bt).abs_sum, fp64_abs(a, bt));
  a(3, 5) = 0x1p26;  // above 2^25
  EXPECT_EQ(stats_of(a, bt).abs_sum, fp64_abs(a, bt));
  a(3, 5) = 0x1p-30;  // in range: fp32, inflated, so not fp64's
  EXPECT_NE(stats_of(a, bt).abs_sum, fp64_abs(a, bt));
  // Fewer than 64 rows: fp64.
  const RowMajorF64 skinny = wide_operand(63, 64, rng);
  EXPECT_EQ(stats_of(skinny, bt).abs_sum, fp64_abs(skinny, bt));
  // Zeros are exact in both and keep the fp32 path; an all-zero row gives exact zeros.
  a(3, 5) = 0;
  a.row(7).setZero();
  const Stats z = stats_of(a, bt);
  for (int64_t j = 0; j < bt.rows(); ++j) EXPECT_EQ(z.abs_sum[static_cast<size_t>(7 * bt.rows() + j)], 0.0);
}

}  // namespace
}  // namespace opcts
