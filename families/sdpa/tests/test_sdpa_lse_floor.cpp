// The lse floor's parts (families/sdpa/lse_floor.hpp): the top-mass bounds against sorted sums,
// the tree lemma behind the row sum's term on random trees, the weighted records' bound
// against simulated running maxima, the softmax structures' floors and the tolerance rules
// that declare them, and a per-key online softmax in fp32 (the model's worst kernel) within
// the per-key floor while a rescale off by 2^-16 per record is not.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>
#include <random>
#include <vector>

#include "families/sdpa/bound.hpp"
#include "families/sdpa/lse_floor.hpp"
#include "families/sdpa/tests/test_sdpa_util.hpp"

namespace opcts {
namespace {

using namespace sdpa::detail;

std::vector<double> sorted_desc(std::vector<double> e) {
  std::sort(e.begin(), e.end(), std::greater<>());
  return e;
}

// Weights of a row of n scores N(0, sigma²) against their max.
std::vector<double> row_weights(int n, double sigma, std::mt19937_64& rng) {
  std::normal_distribution<double> z(0, sigma);
  std::vector<double> s(n);
  for (double& x : s) x = z(rng);
  const double m = *std::max_element(s.begin(), s.end());
  for (double& x : s) x = std::exp(x - m);
  return s;
}

TEST(LseFloor, TopMassBoundsTheSortedSumsWithinAnEighth) {
  std::mt19937_64 rng(7);
  for (double sigma : {0.3, 1.0, 3.0, 10.0}) {
    const std::vector<double> e = row_weights(300, sigma, rng), d = sorted_desc(e);
    TopMass tops;
    for (double x : e) tops.add(x);
    std::vector<int64_t> ms(d.size() + 1);
    std::iota(ms.begin(), ms.end(), 0);
    std::vector<double> got;
    tops.top(ms, got);
    double exact = 0, sq = 0;
    for (size_t m = 0; m <= d.size(); ++m) {
      if (m > 0) exact += d[m - 1];
      if (m >= 2) sq += exact * exact;
      EXPECT_GE(got[m], exact * (1 - 1e-12)) << "sigma " << sigma << " m " << m;
      EXPECT_LE(got[m], 1.125 * exact + 1e-300) << "sigma " << sigma << " m " << m;
    }
    EXPECT_GE(tops.sum_sq_tops(), sq * (1 - 1e-12));
    EXPECT_LE(tops.sum_sq_tops(), 1.125 * 1.125 * sq);
  }
}

// The row sum's term: in any binary tree over positive terms, the sum over the additions of
// their results squared is at most Σ_{m=2..n} P_m² (the file comment's lemma).
TEST(LseFloor, AnyTreeOfAdditionsStaysWithinTheTopMassSum) {
  std::mt19937_64 rng(11);
  for (int trial = 0; trial < 200; ++trial) {
    const int n = 2 + static_cast<int>(rng() % 60);
    std::vector<double> e = row_weights(n, trial % 2 ? 0.5 : 4.0, rng);
    const std::vector<double> d = sorted_desc(e);
    double bound = 0, prefix = d[0];
    for (int m = 2; m <= n; ++m) prefix += d[m - 1], bound += prefix * prefix;
    // A random tree: repeatedly add two random partials (sequential, pairwise and largest-first
    // orders are among these), plus the largest-first chain, which attains the bound.
    std::vector<double> parts = e;
    double got = 0;
    while (parts.size() > 1) {
      const size_t a = rng() % parts.size();
      std::swap(parts[a], parts.back());
      const double x = parts.back();
      parts.pop_back();
      const size_t b = rng() % parts.size();
      parts[b] += x;
      got += parts[b] * parts[b];
    }
    EXPECT_LE(got, bound * (1 + 1e-12)) << "trial " << trial;
    double chain = d[0], chain_sq = 0;
    for (int m = 1; m < n; ++m) chain += d[m], chain_sq += chain * chain;
    EXPECT_NEAR(chain_sq, bound, 1e-9 * bound);
  }
}

// W = Σ over the records of a running max (keys in a random order) of the mass read before
// the record, in units of l: its bound at P = 7.5e-11 lies above every one of 20,000 orders,
// and below the unweighted bound on the number of records, which it refines.
TEST(LseFloor, WeightedRecordsBoundSimulatedRunningMaxima) {
  std::mt19937_64 rng(3);
  for (double sigma : {0.5, 1.0, 2.0, 6.0}) {
    for (int n : {8, 64, 256}) {
      const std::vector<double> e = row_weights(n, sigma, rng);
      const double l = std::accumulate(e.begin(), e.end(), 0.0);
      TopMass tops;
      for (double x : e) tops.add(x);
      const double bound = weighted_records(tops, l);
      EXPECT_LE(bound, running_max_records(n) * 1.5) << "sigma " << sigma << " n " << n;
      std::vector<double> order = e;
      double worst = 0;
      for (int t = 0; t < 20000; ++t) {
        std::shuffle(order.begin(), order.end(), rng);
        double best = order[0], before = order[0], w = 0;
        for (int k = 1; k < n; ++k) {
          if (order[k] > best) best = order[k], w += before / l;
          before += order[k];
        }
        worst = std::max(worst, w);
      }
      EXPECT_GT(bound, worst) << "sigma " << sigma << " n " << n;
    }
  }
}

// The search weighted_records replaced (2026-12-03): every range, single positions too, by its
// integral bound, and a 16-point golden-section search over ln θ in [ln 0.05, ln 100].
double weighted_records_by_golden_section(const TopMass& tops, double l) {
  const int64_t n = tops.count();
  if (n < 2) return 0;
  std::vector<int64_t> lo, hi, ms;
  std::vector<double> w;
  for (int64_t a = 2; a <= n;) {
    const int64_t b = a < 16 ? a : std::min(n, a + a / 4);
    lo.push_back(a), hi.push_back(b), ms.push_back(b - 1);
    a = b + 1;
  }
  tops.top(ms, w);
  for (double& x : w) x = std::min(1.0, x / l);
  const double log_inv_p = -std::log(kLseFalseAlarm);
  const auto g = [](double a, double b, double y) {
    return b * std::log1p(y / b) - a * std::log1p(y / a) + y * std::log1p((b - a) / (a + y));
  };
  const auto bound_at = [&](double theta) {
    double log_mgf = 0;
    for (size_t r = 0; r < w.size(); ++r) {
      const double y = std::expm1(theta * w[r]);
      if (y > 0) log_mgf += g(static_cast<double>(lo[r]) - 0.5, static_cast<double>(hi[r]) + 0.5, y);
    }
    return (log_mgf + log_inv_p) / theta;
  };
  double a = std::log(0.05), b = std::log(100.0);
  const double phi = 0.6180339887498949;
  double c = b - phi * (b - a), d = a + phi * (b - a), fc = bound_at(std::exp(c)), fd = bound_at(std::exp(d));
  for (int it = 0; it < 14; ++it) {
    if (fc < fd) b = d, d = c, fd = fc, c = b - phi * (b - a), fc = bound_at(std::exp(c));
    else a = c, c = d, fc = fd, d = a + phi * (b - a), fd = bound_at(std::exp(d));
  }
  return std::min({static_cast<double>(n - 1), fc, fd});
}

// The root of the bound's derivative gives a bound no looser than the golden-section search
// did (its single positions are exact, and the root is the least value over θ), on rows of
// 2 to 3000 keys from flat to sharp; and within 5% of it, since only the single positions
// changed the bound itself.
TEST(LseFloor, WeightedRecordsAtTheRootNoLooserThanTheGoldenSectionSearch) {
  std::mt19937_64 rng(5);
  int tighter = 0, rows = 0;
  for (double sigma : {0.05, 0.5, 1.0, 2.0, 4.0, 8.0, 20.0}) {
    for (int n : {2, 3, 5, 9, 16, 17, 40, 128, 587, 1000, 3000}) {
      const std::vector<double> e = row_weights(n, sigma, rng);
      const double l = std::accumulate(e.begin(), e.end(), 0.0);
      TopMass tops;
      for (double x : e) tops.add(x);
      const double now = weighted_records(tops, l), before = weighted_records_by_golden_section(tops, l);
      EXPECT_LE(now, before * (1 + 1e-9)) << "sigma " << sigma << " n " << n;
      EXPECT_GE(now, before * 0.95) << "sigma " << sigma << " n " << n;
      tighter += now < before * (1 - 1e-6);
      ++rows;
    }
  }
  EXPECT_GT(tighter, rows / 4);  // the exact single positions show
}

TEST(LseFloor, StructuresOrderTheFloor) {
  LseFloor f;
  f.base = 10 * kAccUnit, f.rescales = 6.5, f.span = 200, f.shift = 3 * kAccUnit;
  EXPECT_EQ(f.under(0), f.base);  // two passes: no rescale
  EXPECT_DOUBLE_EQ(f.under(1), f.base + kAccUnit * 2.5 * 6.5 + f.shift);
  EXPECT_DOUBLE_EQ(f.under(64), f.base + kAccUnit * 2.5 * 4 + f.shift);  // ceil(199 / 64)
  EXPECT_DOUBLE_EQ(f.under(256), f.base + kAccUnit * 2.5 + f.shift);
  for (int64_t b = 1; b < 512; ++b) EXPECT_GE(f.under(b), f.under(b + 1)) << b;
  // Split-KV: one rescale of each split's sum, weights summing to at most 1, however many
  // records the keys set (a sharp row: W below 1 does not lower it).
  EXPECT_DOUBLE_EQ(f.under(kSplitKvBlock), f.base + kAccUnit * 2.5 + f.shift);
  f.rescales = 0.25;
  EXPECT_DOUBLE_EQ(f.under(kSplitKvBlock), f.base + kAccUnit * 2.5 + f.shift);
  EXPECT_LT(f.under(1), f.under(kSplitKvBlock));
  f.span = 1;  // one key: nothing to rescale
  EXPECT_EQ(f.under(1), f.base);
  EXPECT_EQ(f.under(kSplitKvBlock), f.base);
}

// Every `accumulation:` an sdpa rule declares names a bound the reference makes (O's the flash
// model's, with its energy check; lse's a softmax structure's), and lse's order as their
// structures do.
TEST(LseFloor, DeclaredStructuresNameBoundsOfTheReference) {
  const sdpa::Problem p = sdpatest::make(DType::bf16, 1, 2, 1, 40, 300, 64, sdpa::Mask::causal_lower_right);
  const References r = sdpatest::family().reference(p, sdpatest::inputs_of(p));
  sdpa::Problem db = p;  // a backward with dbias, for its declared sums
  db.direction = sdpa::Direction::backward, db.mask_tensor = sdpa::MaskTensor::additive, db.dbias = true;
  const References rb = sdpatest::family().reference(db, sdpatest::inputs_of(db));
  int declared = 0;
  for (const auto& rule : sdpatest::tolerances().rules()) {
    if (rule.family != "sdpa" || rule.tol.accumulation.empty()) continue;
    const std::string key = bound_key(rule.output, rule.tol.accumulation);
    if (rule.output == "dbias") {
      EXPECT_EQ(rule.tol.accumulation, "fp32_terms") << rule.tol.source;
      EXPECT_TRUE(rb.bound.count(key)) << rule.tol.source << ": " << key;
      continue;
    }
    if (rule.output == "O" && rule.tol.accumulation == sdpa::detail::kFp8PNormalised) {
      sdpa::Problem q8 = p;  // the model of fp8 q, k, v only, per element (no energy check)
      q8.fp8 = sdpa::Fp8::qkv;
      const References r8 = sdpatest::family().reference(q8, sdpatest::inputs_of(q8));
      EXPECT_TRUE(r8.bound.count(key)) << rule.tol.source << ": " << key;
      EXPECT_FALSE(r8.energy.count(key)) << rule.tol.source;
      EXPECT_FALSE(r.bound.count(key)) << rule.tol.source << ": " << key << " without fp8";
      continue;
    }
    EXPECT_TRUE(r.bound.count(key)) << rule.tol.source << ": " << key;
    if (rule.output == "O") {
      EXPECT_TRUE(rule.tol.accumulation == "flash_fp32" || rule.tol.accumulation == "flash_fp32_rn") << rule.tol.source;
      EXPECT_TRUE(r.energy.count(key)) << rule.tol.source;
      continue;
    }
    ++declared;
    EXPECT_EQ(rule.output, "lse") << rule.tol.source;
  }
  EXPECT_GE(declared, 3);
  const std::vector<double>& key = r.bound.at("lse");
  const std::vector<double>& b32 = r.bound.at("lse@online_block32");
  const std::vector<double>& b128 = r.bound.at("lse@online_block128");
  const std::vector<double>& two = r.bound.at("lse@two_pass");
  ASSERT_EQ(key.size(), two.size());
  bool smaller = false;
  for (size_t i = 0; i < key.size(); ++i) {
    EXPECT_GE(key[i], b32[i]);
    EXPECT_GE(b32[i], b128[i]);
    EXPECT_GE(b128[i], two[i]);
    EXPECT_GT(two[i], 0);
    smaller = smaller || two[i] < key[i];
  }
  EXPECT_TRUE(smaller);
  for (const char* impl : {"cuda.flash", "cuda.flash_lse_plus_log2", "hip.flash"})
    EXPECT_EQ(sdpatest::tolerances().resolve("sdpa", "lse", DType::fp32, impl, "sm90", "", nullptr).accumulation,
              "online_block32")
        << impl;
  EXPECT_EQ(sdpatest::tolerances().resolve("sdpa", "lse", DType::fp32, "cuda.math", "sm90", "", nullptr).accumulation,
            "two_pass");
  EXPECT_EQ(sdpatest::tolerances().resolve("sdpa", "lse", DType::fp32, "cuda.cudnn", "sm90", "", nullptr).accumulation,
            "");  // undeclared: per key
  // O: the flash kernels declare the bound's model (and its energy check); the others nothing.
  EXPECT_EQ(sdpatest::tolerances().resolve("sdpa", "O", DType::bf16, "cuda.flash", "sm90", "", nullptr).accumulation,
            "flash_fp32");
  EXPECT_EQ(sdpatest::tolerances().resolve("sdpa", "O", DType::bf16, "cuda.math", "sm90", "", nullptr).accumulation,
            "");
  EXPECT_EQ(sdpatest::tolerances().resolve("sdpa", "O", DType::bf16, "cuda.cudnn", "sm90", "", nullptr).accumulation,
            "");
}

// The model's worst kernel: a running max updated at every key, in fp32, keys in index order
// (the inputs' order, independent of the data), the row sum added sequentially, lse = m +
// log(l). Its lse stays within the per-key floor ("lse"), and a rescale that errs by 2^-16 per
// record exceeds it on a quarter of the rows or more (those whose records come late enough to
// scale much of the sum).
TEST(LseFloor, PerKeyOnlineSoftmaxWithinTheFloorAndABadRescaleNot) {
  sdpa::Problem p = sdpatest::make(DType::fp32, 1, 1, 1, 64, 256, 64, sdpa::Mask::none);
  const TensorMap in = sdpatest::inputs_of(p);
  const References r = sdpatest::family().reference(p, in);
  const std::vector<double> q = in.at("q").to_f64(), k = in.at("k").to_f64();
  const float scale = static_cast<float>(p.effective_scale());
  int64_t over_good = 0, over_bad = 0;
  for (int64_t i = 0; i < p.seq_q; ++i) {
    std::vector<float> s(p.seq_k);
    for (int64_t j = 0; j < p.seq_k; ++j) {
      float acc = 0;
      for (int64_t d = 0; d < p.head_dim; ++d)
        acc += static_cast<float>(q[i * p.head_dim + d]) * static_cast<float>(k[j * p.head_dim + d]);
      s[j] = acc * scale;
    }
    for (int bad = 0; bad < 2; ++bad) {
      float m = -INFINITY, l = 0;
      for (float x : s) {
        if (x > m) {
          float alpha = std::exp(m - x);
          if (bad) alpha *= 1 + 0x1p-16f;
          l *= alpha;
          m = x;
        }
        l += std::exp(x - m);
      }
      const double lse = static_cast<double>(m + std::log(l));
      const double err = std::fabs(lse - r.exact.at("lse")[i]);
      (bad ? over_bad : over_good) += err > r.bound.at("lse")[i];
    }
  }
  EXPECT_EQ(over_good, 0);
  EXPECT_GE(over_bad, p.seq_q / 4) << over_bad;
}

}  // namespace
}  // namespace opcts
