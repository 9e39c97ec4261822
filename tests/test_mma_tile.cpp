// gpu/portable/mma_tile.cuh's m16n8k16 tile run on the CPU for every lane of a warp: the fragment loads, the
// emulated product (the HIP path) and the accumulator walk, against an fp64 GEMM.
//
// The kernels' warp quarter (32×32 of C, 2 × 4 products per 16 k, K = 32) is computed here as
// the lanes would: each lane loads its fragments from the shared-memory tiles (load_a_words,
// load_b_words), mma_emulated reads the other lanes' registers where the GPU shuffles, and
// each_acc names the row and column of every accumulator. ldmatrix's addressing (the CUDA
// int4 kernel's loads) is checked to give the same registers as the 32-bit loads. The judge is
// the fp64 product with the bound of an fp32 sum of exact products (derived below); a plausible
// layout bug (rows g + 8 and k + 8 exchanged in A's fragment) is shown to exceed it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <utility>
#include <vector>

#include "gpu/portable/mma_tile.cuh"

namespace {

namespace mma = opcts::gpu::mma;

constexpr int kLd = 40;  // the kernels' row stride: 32 k + 8 padding elements
constexpr int kRows = 64, kK = 32, kLanes = 32;

template <class T>
T from_float(float f);
template <>
__half from_float(float f) {
  return __float2half_rn(f);
}
template <>
__nv_bfloat16 from_float(float f) {
  return __float2bfloat16_rn(f);
}
float to_float(__half v) { return __half2float(v); }
float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }

// A tile of kRows K-contiguous rows of random T values in [-2, 2).
template <class T>
std::vector<T> random_tile(std::mt19937& rng) {
  std::uniform_real_distribution<float> u(-2.0f, 2.0f);
  std::vector<T> t(static_cast<size_t>(kRows * kLd));
  for (auto& v : t) v = from_float<T>(u(rng));
  return t;
}

struct Quarter {
  double c[32][32];  // C of the warp quarter, rows wr.., columns wc..
};

// The warp quarter at (wr, wc) as the 32 lanes compute it. `swap_a` plants a fragment-layout
// bug: registers a[1] (row g + 8) and a[2] (k + 8) exchanged in every lane.
template <class T>
Quarter emulate_quarter(const T* As, const T* Bs, int wr, int wc, bool swap_a) {
  float acc[kLanes][2][4][4] = {};
  for (int kk = 0; kk < kK; kk += 16) {
    uint32_t af[kLanes][2][4], bf[kLanes][4][2];
    for (int l = 0; l < kLanes; ++l) {
      for (int mi = 0; mi < 2; ++mi) {
        mma::load_a_words<kLd>(af[l][mi], As, wr + 16 * mi, kk, l);
        if (swap_a) std::swap(af[l][mi][1], af[l][mi][2]);
      }
      for (int ni = 0; ni < 4; ++ni) mma::load_b_words<kLd>(bf[l][ni], Bs, wc + 8 * ni, kk, l);
    }
    for (int l = 0; l < kLanes; ++l)
      for (int mi = 0; mi < 2; ++mi)
        for (int ni = 0; ni < 4; ++ni)
          mma::mma_emulated<T>(acc[l][mi][ni], l,
                               [&](int r, int src) { return r < 4 ? af[src][mi][r] : bf[src][ni][r - 4]; });
  }
  Quarter q{};
  int seen[32][32] = {};
  for (int l = 0; l < kLanes; ++l)
    mma::each_acc(0, 0, l, [&](int mi, int ni, int e, int r, int c) {
      q.c[r][c] = acc[l][mi][ni][e];
      ++seen[r][c];
    });
  for (int r = 0; r < 32; ++r)
    for (int c = 0; c < 32; ++c)
      EXPECT_EQ(seen[r][c], 1) << "each_acc names C(" << r << ", " << c << ") " << seen[r][c] << " times";
  return q;
}

// The largest |C − C_ref| / bound over the quarter, with C_ref = Σ_k A[r][k]·B[c][k] in fp64
// and bound = γ_31 · Σ_k |A[r][k]·B[c][k]| (+ the smallest subnormal, for all-zero rows):
// every product of two fp16 or bf16 values is exact in fp32 (at most 11 + 11 significand bits),
// and the 32 products are added to 0 by fp32 FMAs one at a time, the first exactly, so 31
// roundings of unit u = 2^-24 bound the error (Higham, "Accuracy and Stability of Numerical
// Algorithms", 2nd ed., §4.2, eq. (4.4): recursive summation, γ_n = nu / (1 − nu)).
template <class T>
double worst_ratio(const Quarter& q, const T* As, const T* Bs, int wr, int wc, float* sequential_mismatch) {
  const double u = std::ldexp(1.0, -24), gamma = 31 * u / (1 - 31 * u);
  double worst = 0;
  *sequential_mismatch = 0;
  for (int r = 0; r < 32; ++r)
    for (int c = 0; c < 32; ++c) {
      double ref = 0, mag = 0;
      float seq = 0;  // the same sum in fp32, k in order: what the emulation must equal bit for bit
      for (int k = 0; k < kK; ++k) {
        const float a = to_float(As[(wr + r) * kLd + k]), b = to_float(Bs[(wc + c) * kLd + k]);
        ref += static_cast<double>(a) * b;
        mag += std::fabs(static_cast<double>(a) * b);
        seq = std::fma(a, b, seq);
      }
      const double bound = gamma * mag + std::ldexp(1.0, -149);
      worst = std::max(worst, std::fabs(q.c[r][c] - ref) / bound);
      if (static_cast<float>(q.c[r][c]) != seq) *sequential_mismatch = 1;
    }
  return worst;
}

template <class T>
void check_tile(bool swap_a, bool expect_pass) {
  std::mt19937 rng(swap_a ? 1515 : 15);
  const auto As = random_tile<T>(rng), Bs = random_tile<T>(rng);
  for (int wr : {0, 32})
    for (int wc : {0, 32}) {
      const Quarter q = emulate_quarter<T>(As.data(), Bs.data(), wr, wc, swap_a);
      float mismatch = 0;
      const double worst = worst_ratio<T>(q, As.data(), Bs.data(), wr, wc, &mismatch);
      if (expect_pass) {
        EXPECT_LE(worst, 1.0) << "quarter (" << wr << ", " << wc << ") exceeds the fp32-sum bound";
        EXPECT_EQ(mismatch, 0.0f) << "quarter (" << wr << ", " << wc << ") is not the fp32 sum over k in order";
      } else {
        EXPECT_GT(worst, 1.0) << "the planted layout bug passes the bound in quarter (" << wr << ", " << wc << ")";
      }
    }
}

TEST(MmaTile, EmulatedWarpQuarterIsTheGemmHalf) { check_tile<__half>(false, true); }
TEST(MmaTile, EmulatedWarpQuarterIsTheGemmBf16) { check_tile<__nv_bfloat16>(false, true); }
TEST(MmaTile, TheBoundCatchesAFragmentLayoutBugHalf) { check_tile<__half>(true, false); }
TEST(MmaTile, TheBoundCatchesAFragmentLayoutBugBf16) { check_tile<__nv_bfloat16>(true, false); }

// ldmatrix .x4: lane l receives in register j the 32-bit pair at row l / 4, columns 2(l % 4) of
// matrix j, whose row ρ lane 8j + ρ addresses (PTX ISA, "ldmatrix"). With the addresses
// ldmatrix_a_at / ldmatrix_b_at give, that is the 32-bit loads' fragment, register for register.
TEST(MmaTile, LdmatrixAddressesGiveTheWordFragments) {
  std::mt19937 rng(16);
  const auto tile = random_tile<__half>(rng);
  const auto ldmatrix = [&](int l, int j, mma::At (*at)(int, int, int), int base, int kk) {
    const mma::At row = at(base, kk, 8 * j + l / 4);
    return mma::word_at<kLd>(tile.data(), row.row, row.k + 2 * (l % 4));
  };
  for (int kk : {0, 16})
    for (int base : {0, 16, 32, 48})
      for (int l = 0; l < kLanes; ++l) {
        uint32_t a[4], b0[2], b1[2];
        mma::load_a_words<kLd>(a, tile.data(), base, kk, l);
        mma::load_b_words<kLd>(b0, tile.data(), base, kk, l);
        mma::load_b_words<kLd>(b1, tile.data(), base + 8, kk, l);
        const uint32_t b[4] = {b0[0], b0[1], b1[0], b1[1]};
        for (int j = 0; j < 4; ++j) {
          EXPECT_EQ(ldmatrix(l, j, mma::ldmatrix_a_at, base, kk), a[j]) << "A: lane " << l << " register " << j;
          EXPECT_EQ(ldmatrix(l, j, mma::ldmatrix_b_at, base, kk), b[j]) << "B: lane " << l << " register " << j;
        }
      }
}

}  // namespace
