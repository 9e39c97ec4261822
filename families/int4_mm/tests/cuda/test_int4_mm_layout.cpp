// The CUDA int4 kernels' per-thread code (families/int4_mm/cuda/int4_mm_layout.cuh) run on the CPU for every thread of
// every block, against the reference.
//
// cuda.int4_gemv's gemv_item and cuda.int4_mm's mm_tile_part are plain C++ over raw pointers:
// here they read the host tensors a case would upload, every (unit, item, lane) of the gemv and
// every (tile, thread) of the mma kernel's weight tiles is executed, the partial sums are added
// in fp32 and the result is judged by the bounded metric like a device result. What is left to
// the GPU is the shuffles, barriers, mma instructions and stores of the .cu files. The launchers'
// argument checks (int4_mm_args.cu, host code) run on every negative case of the catalog.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "app/builtins.hpp"
#include "families/int4_mm/cuda/int4_gemv_tiny.cuh"
#include "families/int4_mm/cuda/int4_mm_args.cuh"
#include "families/int4_mm/cuda/int4_mm_layout.cuh"
#include "families/int4_mm/cuda/int4_mm_prepared.hpp"
#include "judge/compare.hpp"
#include "runner/catalog.hpp"
#include "tests/test_family_util.hpp"
#include "tests/test_util.hpp"

namespace opcts {
namespace {

using cuda::Int4Format;
using cuda::Int4Plant;
namespace k4 = cuda::int4mm;

const Family& family() { return *builtin_registry().family("int4_mm"); }

constexpr int kMT = 16;  // rows per thread: every M <= 16, rows past M skipped

template <Int4Format F, class T, bool P>
std::vector<float> emulate_gemv(const k4::Args& a) {
  using Code = k4::Code<F, T, P>;
  std::vector<float> y(static_cast<size_t>(a.m * a.n), 0.0f);
  for (int64_t unit = 0; unit < Code::units(a); ++unit)
    for (int64_t item = 0; item < Code::items(a); ++item)
      for (int lane = 0; lane < k4::kLanes; ++lane) {
        float acc[kMT][Code::kCols] = {};
        Code::template gemv_item<kMT>(a, unit, item, lane, acc);
        for (int m = 0; m < a.m; ++m)
          for (int c = 0; c < Code::kCols; ++c) {
            const int64_t col = Code::column(unit, lane, c);
            if (col < a.n) y[static_cast<size_t>(m * a.n + col)] += acc[m][c];
            else EXPECT_EQ(acc[m][c], 0.0f) << "a lane past N accumulated";
          }
      }
  return y;
}

template <Int4Format F, class T, bool P>
std::vector<float> emulate_mm(const k4::Args& a) {
  using Code = k4::Code<F, T, P>;
  std::vector<float> y(static_cast<size_t>(a.m * a.n), 0.0f);
  const T* x = static_cast<const T*>(a.x);
  std::vector<T> tile(static_cast<size_t>(k4::kTileN * k4::kTileLd));
  for (int64_t n0 = 0; n0 < a.n; n0 += k4::kTileN)
    for (int64_t k0 = 0; k0 < a.k_end; k0 += k4::kTileK) {
      for (int tid = 0; tid < k4::kThreads; ++tid) Code::mm_tile_part(a, n0, k0, tid, tile.data());
      for (int64_t m = 0; m < a.m; ++m)
        for (int64_t nl = 0; nl < k4::kTileN && n0 + nl < a.n; ++nl) {
          float s = 0;
          for (int kl = 0; kl < k4::kTileK; ++kl)
            s += k4::to_float(x[m * a.k + k0 + kl]) * k4::to_float(tile[static_cast<size_t>(nl * k4::kTileLd + kl)]);
          y[static_cast<size_t>(m * a.n + n0 + nl)] += s;
        }
    }
  return y;
}

// cuda.int4_gemv's fast tinygemm path (int4_gemv_tiny.cuh) run as its kernel runs it, with wk
// warps per n-tile, a batch of b super-tiles per lane and chunks of `chunk` super-tiles: per
// chunk every thread of the block stages its share of x (the other slots hold NaN, so a read
// of one shows), then warp sub of the tile loads and uses batches sub, sub + wk, ...; the
// quad's lanes and the tile's warps are added as the kernel adds them.
template <class T, bool OneGroup>
std::vector<float> emulate_tiny_groups(const k4::Args& a, int wk, int b, int64_t chunk) {
  struct Acc {
    float v[kMT][2];
  };
  constexpr int kBlockThreads = 256;
  const int64_t ld = 128 * chunk, items = a.k / 128;
  std::vector<float> xs(static_cast<size_t>(kMT * ld)), y(static_cast<size_t>(a.m * a.n), 0.0f);
  for (int64_t unit = 0; unit < a.n / 8; ++unit) {
    std::vector<Acc> acc(static_cast<size_t>(wk * k4::kLanes), Acc{});
    for (int64_t ic = 0; ic < items; ic += chunk) {
      std::fill(xs.begin(), xs.end(), std::nanf(""));
      const int64_t ie = std::min(items, ic + chunk);
      for (int tid = 0; tid < kBlockThreads; ++tid)
        k4::tiny::stage_x<T>(a, 128 * ic, 128 * (ie - ic), kMT, ld, xs.data(), tid, kBlockThreads);
      for (int sub = 0; sub < wk; ++sub)
        for (int64_t ib = ic + int64_t{sub} * b; ib < ie; ib += int64_t{b} * wk)
          for (int64_t item = ib; item < std::min(ib + b, ie); ++item)
            for (int lane = 0; lane < k4::kLanes; ++lane)
              k4::tiny::use<T, kMT, OneGroup>(a, k4::tiny::load<OneGroup>(k4::tiny::source(a, unit, lane), item),
                                              xs.data() + 128 * (item - ic), ld, lane,
                                              acc[static_cast<size_t>(sub * k4::kLanes + lane)].v);
    }
    for (int m = 0; m < a.m; ++m)
      for (int c = 0; c < 8; ++c) {
        float t = 0;
        for (int sub = 0; sub < wk; ++sub) {
          float q = 0;
          for (int l = 4 * c; l < 4 * c + 4; ++l)
            q += acc[static_cast<size_t>(sub * k4::kLanes + l)].v[m][0] +
                 acc[static_cast<size_t>(sub * k4::kLanes + l)].v[m][1];
          t += q;
        }
        y[static_cast<size_t>(m * a.n + 8 * unit + c)] = t;
      }
  }
  return y;
}

// The fast path on tensor cores (tiny_mma_kernel) as its kernel runs it: a warp per pair of
// n-tiles, the mma staging per chunk (the other slots NaN), each lane's operands of each word
// from tiny::mma_operands, the m16n8k16 products by mma_tile.cuh's emulation over the warp's 32
// lanes (the fragments the hardware would exchange) into two accumulator sets (k-tile 2w + j into
// set j; rows 8..15 of x into a second pair of sets), the sets and then the pair's warps added in
// the kernel's order, columns past N dropped.
template <class T, bool OneGroup>
std::vector<float> emulate_tiny_mma_groups(const k4::Args& a, int wk, int b, int64_t chunk) {
  struct Acc {
    float c[2][4], c16[2][4];
  };
  constexpr int kBlockThreads = 256;
  const int64_t ld = 128 * chunk, items = a.k / 128, pairs = (a.n / 8 + 1) / 2;
  std::vector<T> xs(static_cast<size_t>(16 * ld)), zeros(128, k4::round_to<T>(0.0f));
  std::vector<float> y(static_cast<size_t>(a.m * a.n), 0.0f);
  for (int64_t pair = 0; pair < pairs; ++pair) {
    std::vector<Acc> acc(static_cast<size_t>(wk * k4::kLanes), Acc{});
    for (int64_t ic = 0; ic < items; ic += chunk) {
      std::fill(xs.begin(), xs.end(), k4::round_to<T>(std::nanf("")));
      const int64_t ie = std::min(items, ic + chunk);
      for (int tid = 0; tid < kBlockThreads; ++tid)
        k4::tiny::stage_x_mma<T>(a, 128 * ic, 128 * (ie - ic), ld, xs.data(), tid, kBlockThreads);
      for (int sub = 0; sub < wk; ++sub)
        for (int64_t ib = ic + int64_t{sub} * b; ib < ie; ib += int64_t{b} * wk)
          for (int64_t item = ib; item < std::min(ib + b, ie); ++item)
            for (int w = 0; w < 4; ++w) {
              k4::tiny::MmaOperands op[k4::kLanes][2];
              uint32_t hi[k4::kLanes][2][2];
              for (int lane = 0; lane < k4::kLanes; ++lane) {
                const auto f = k4::tiny::load<OneGroup>(k4::tiny::pair_source(a, pair, lane), item);
                const auto x = k4::tiny::x_rows<T>(a, xs.data(), ld, zeros.data(), lane);
                if (a.m > 8)
                  k4::tiny::mma_operands<T, true, OneGroup>(a, f, x, static_cast<uint32_t>(item - ic), w, op[lane],
                                                            hi[lane]);
                else
                  k4::tiny::mma_operands<T, false, OneGroup>(a, f, x, static_cast<uint32_t>(item - ic), w, op[lane],
                                                             hi[lane]);
              }
              for (int j = 0; j < 2; ++j)
                for (int lane = 0; lane < k4::kLanes; ++lane) {
                  Acc& s = acc[static_cast<size_t>(sub * k4::kLanes + lane)];
                  gpu::mma::mma_emulated<T>(s.c[j], lane,
                                            [&](int r, int l) { return r < 4 ? op[l][j].a[r] : op[l][j].b[r - 4]; });
                  if (a.m > 8)
                    gpu::mma::mma_emulated<T>(s.c16[j], lane,
                                              [&](int r, int l) { return r < 4 ? op[l][j].a[r] : hi[l][j][r - 4]; });
                }
            }
    }
    for (int m = 0; m < a.m; ++m)
      for (int col = 0; col < 16 && 16 * pair + col < a.n; ++col) {
        const int lane = 4 * (col % 8) + (m % 8) / 2, e = (col >= 8 ? 2 : 0) + m % 2;  // c[e] of lane (g, t)
        float t = 0;
        for (int sub = 0; sub < wk; ++sub) {
          const Acc& s = acc[static_cast<size_t>(sub * k4::kLanes + lane)];
          t += m >= 8 ? s.c16[0][e] + s.c16[1][e] : s.c[0][e] + s.c[1][e];
        }
        y[static_cast<size_t>(m * a.n + 16 * pair + col)] = t;
      }
  }
  return y;
}

template <class T>
std::vector<float> emulate_tiny(const k4::Args& a, int wk, int b, int64_t chunk, bool mma) {
  if (mma)
    return a.group_shift >= 7 ? emulate_tiny_mma_groups<T, true>(a, wk, b, chunk)
                              : emulate_tiny_mma_groups<T, false>(a, wk, b, chunk);
  return a.group_shift >= 7 ? emulate_tiny_groups<T, true>(a, wk, b, chunk)
                            : emulate_tiny_groups<T, false>(a, wk, b, chunk);
}

// The kernel a launcher would pick: format F, dtype T, planted or not.
template <Int4Format F, class T>
std::vector<float> emulate_format(const k4::Args& a, bool gemv) {
  if (a.plant != Int4Plant::none) return gemv ? emulate_gemv<F, T, true>(a) : emulate_mm<F, T, true>(a);
  return gemv ? emulate_gemv<F, T, false>(a) : emulate_mm<F, T, false>(a);
}

template <class T>
std::vector<float> emulate(Int4Format f, const k4::Args& a, bool gemv) {
  switch (f) {
    case Int4Format::tinygemm: return emulate_format<Int4Format::tinygemm, T>(a, gemv);
    case Int4Format::tinygemm_unpacked: return emulate_format<Int4Format::tinygemm_unpacked, T>(a, gemv);
    case Int4Format::awq: return emulate_format<Int4Format::awq, T>(a, gemv);
    case Int4Format::gptq: return emulate_format<Int4Format::gptq, T>(a, gemv);
    case Int4Format::q4_0: return emulate_format<Int4Format::q4_0, T>(a, gemv);
  }
  return {};
}

// Failures of the emulated kernel (gemv or mm; with tiny = {wk, b, chunk, mma}, the gemv's
// fast tinygemm path) against the reference, as the runner judges the CUDA row on the host:
// its mismatches, plus one when the bias check fails.
struct Tiny {
  int wk = 0, b = 0;
  int64_t chunk = 0;
  bool mma = false;
};
int64_t mismatches(const int4_mm::Problem& p, bool gemv, Int4Plant plant, Tiny tiny = {}) {
  const TensorMap in = family().make_inputs(p, case_seed(family(), p));
  const References ref = family().reference(p, in);
  cuda::Int4MmParams params = int4_params(p, in, plant);
  HostTensor got(p.dtype, {p.m, p.n});
  params.y = got.data();  // not written: the emulation sums on the host
  k4::validate(params, "emulated");
  const k4::Args a = k4::make_args(params);
  const bool bf16 = p.dtype == DType::bf16;
  const std::vector<float> y = tiny.wk > 0
                                   ? (bf16 ? emulate_tiny<__nv_bfloat16>(a, tiny.wk, tiny.b, tiny.chunk, tiny.mma)
                                           : emulate_tiny<__half>(a, tiny.wk, tiny.b, tiny.chunk, tiny.mma))
                               : bf16 ? emulate<__nv_bfloat16>(params.format, a, gemv)
                                      : emulate<__half>(params.format, a, gemv);
  for (int64_t i = 0; i < p.m * p.n; ++i) got.set(i, y[static_cast<size_t>(i)]);
  std::vector<WorstElement> worst;
  const Impl& row = *builtin_registry().impl(gemv ? "cuda.int4_gemv" : "cuda.int4_mm");
  const Tolerance t = testutil::host_tolerance(family(), row, p, "y", p.dtype);
  const OutputStats s =
      compare_output("y", got, {.want = ref.exact.at("y"), .reduction = &ref.reduction.at("y")}, t, worst);
  return s.mismatches + (s.biased() ? 1 : 0);
}

std::vector<CatalogEntry> smoke() {
  std::vector<CatalogEntry> out;
  for (auto& e : load_catalogs(builtin_registry(), {(testutil::cases_dir() / "int4_mm.yaml").string()}))
    if (e.tier == Tier::smoke) out.push_back(std::move(e));
  return out;
}

TEST(Int4KernelCode, GemvAndMmTileMatchTheReferenceOnEverySmokeProblem) {
  int gemv = 0, mm = 0;
  for (const auto& e : smoke()) {
    const auto& p = (*e.problem).as<int4_mm::Problem>();
    if (!p.expect_error.empty()) continue;
    if (p.m <= cuda::kInt4GemvMaxM) {
      EXPECT_EQ(mismatches(p, true, Int4Plant::none), 0) << "gemv " << e.problem_id;
      ++gemv;
    }
    EXPECT_EQ(mismatches(p, false, Int4Plant::none), 0) << "mm " << e.problem_id;
    ++mm;
  }
  EXPECT_GE(gemv, 150);
  EXPECT_GE(mm, 200);
}

// The fast path runs tinygemm at innerKTiles 8 for every M <= 16, on tensor cores and in FMA:
// warps per n-tile and batches the launcher can pick, with chunks of the whole K, of a multiple
// of the batch and of neither.
TEST(Int4KernelCode, GemvTinygemmFastPathMatchesTheReferenceOnEverySmokeProblem) {
  int n = 0;
  for (const auto& e : smoke()) {
    const auto& p = (*e.problem).as<int4_mm::Problem>();
    if (!p.expect_error.empty() || p.format != int4_mm::Format::tinygemm || p.inner_k_tiles != 8 ||
        p.m > cuda::kInt4GemvMaxM)
      continue;
    for (const bool mma : {false, true})  // the mma kernel's warps take one item at a time (its ring's order)
      for (const Tiny t : {Tiny{1, mma ? 1 : 4, 64, mma}, Tiny{4, mma ? 1 : 4, 32, mma}, Tiny{2, mma ? 1 : 2, 3, mma},
                           Tiny{8, 1, 4, mma}})
        EXPECT_EQ(mismatches(p, true, Int4Plant::none, t), 0) << (mma ? "mma" : "fma") << " wk " << t.wk << " batch "
                                                              << t.b << " chunk " << t.chunk << ": " << e.problem_id;
    ++n;
  }
  EXPECT_GE(n, 10);
}

// The staged x's slots: a permutation of each 32-k block, and the eight slots a lane reads for
// a word hold the k its nibbles i (pairs i, i + 4) hold in Code<tinygemm>::gemv_use's table.
TEST(Int4KernelCode, GemvTinygemmStagedSlotsAreTheNibblesK) {
  std::vector<int> seen(64, 0);
  for (int64_t kk = 0; kk < 64; ++kk) ++seen[static_cast<size_t>(k4::tiny::x_slot(kk))];
  for (int s : seen) EXPECT_EQ(s, 1);
  for (int q = 0; q < 4; ++q)
    for (int i = 0; i < 8; ++i) {
      const int64_t k = 8 * (i % 4) + 2 * q + i / 4;     // nibble i of a lane with lane % 4 = q, word offset 0
      const int64_t slot = 8 * q + 2 * (i % 4) + i / 4;  // what tiny::use multiplies nibble i with
      EXPECT_EQ(k4::tiny::x_slot(k), slot) << "q " << q << " nibble " << i;
    }
}

// The mma staging's slots: a permutation of each 128-k super-tile, and the 16 bytes lane (g, t)
// reads for word w (slots 32t + 8(w ^ t/2) .. + 7) hold k-tile 2w + j's A registers a[0] (k 2t,
// 2t + 1) and a[2] (k 2t + 8, 2t + 9) at positions 4j + 2h + e (mma_tile.cuh's fragment table);
// lanes t and t + 2 read different banks.
TEST(Int4KernelCode, GemvTinygemmMmaSlotsAreTheFragmentsK) {
  std::vector<int> seen(256, 0);
  for (int64_t kk = 0; kk < 256; ++kk) ++seen[static_cast<size_t>(k4::tiny::mma_slot(kk))];
  for (int s : seen) EXPECT_EQ(s, 1);
  for (int t = 0; t < 4; ++t)
    for (int w = 0; w < 4; ++w)
      for (int j = 0; j < 2; ++j)
        for (int h = 0; h < 2; ++h)
          for (int e = 0; e < 2; ++e) {
            const int64_t k = 16 * (2 * w + j) + 8 * h + 2 * t + e;
            EXPECT_EQ(k4::tiny::mma_slot(128 + k), 128 + 32 * t + 8 * (w ^ (t / 2)) + 4 * j + 2 * h + e)
                << "t " << t << " w " << w << " j " << j;
          }
  for (int w = 0; w < 4; ++w) {  // 16-byte loads of lanes t = 0..3: four distinct 16-byte bank groups (of 8)
    std::vector<int> group(8, 0);
    for (int t = 0; t < 4; ++t) ++group[static_cast<size_t>((k4::tiny::mma_slot(16 * (2 * w) + 2 * t) * 2 / 16) % 8)];
    for (int c : group) EXPECT_LE(c, 1) << "w " << w;
  }
}

// The planted variants of the CUDA impls go through the same per-thread code with a plant set:
// each must fail every smoke problem its impl takes.
TEST(Int4KernelCode, EveryPlantFailsWhereItsImplRunsIt) {
  struct Case {
    const char* impl;
    bool gemv;
    Int4Plant plant;
    int4_mm::PlantedBug bug;
  };
  using Bug = int4_mm::PlantedBug;
  for (const Case c :
       {Case{"cuda.int4_gemv_group0_scale", true, Int4Plant::group0_scale, Bug::group0_scale},
        Case{"cuda.int4_gemv_nibble_swap", true, Int4Plant::nibble_swap, Bug::nibble_swap},
        Case{"cuda.int4_gemv_gptq_z", true, Int4Plant::gptq_z, Bug::gptq_z},
        Case{"cuda.int4_mm_zero_before_scale", false, Int4Plant::zero_before_scale, Bug::zero_before_scale},
        Case{"cuda.int4_mm_drop_partial_k", false, Int4Plant::drop_partial_k, Bug::drop_partial_k}}) {
    const Impl* impl = builtin_registry().impl(c.impl);
    ASSERT_TRUE(impl && impl->planted()) << c.impl;
    int n = 0;
    for (const auto& e : smoke()) {
      const auto& p = (*e.problem).as<int4_mm::Problem>();
      const std::string why = int4_mm::planted_bug_cannot_show(p, c.bug);
      if (!why.empty() || (c.gemv && p.m > cuda::kInt4GemvMaxM)) continue;
      EXPECT_GT(mismatches(p, c.gemv, c.plant), 0) << c.impl << " passed " << e.problem_id;
      ++n;
    }
    EXPECT_GE(n, 10) << c.impl;
  }
}

// The launchers' checks (host code) refuse every negative case of the catalog by the argument
// its expect_error names, from the tensors the case hands in.
TEST(Int4KernelArgs, EveryNegativeCaseIsRefusedByName) {
  int n = 0;
  for (const auto& e : smoke()) {
    const auto& p = (*e.problem).as<int4_mm::Problem>();
    if (p.expect_error.empty()) continue;
    const TensorMap in = family().make_inputs(p, case_seed(family(), p));
    HostTensor y(p.dtype, {p.m, p.n});
    cuda::Int4MmParams params = int4_params(p, in, Int4Plant::none);
    params.y = y.data();
    try {
      k4::validate(params, "cuda.int4");
      ADD_FAILURE() << e.problem_id << ": accepted";
    } catch (const cuda::Int4ArgumentError& err) {
      EXPECT_EQ(err.argument, p.expect_error) << e.problem_id << ": " << err.what();
    }
    ++n;
  }
  EXPECT_GE(n, 12);
}

}  // namespace
}  // namespace opcts
