// SDPA backward: the fp64 gradients against central finite differences of the forward
// reference for every variant, fully masked rows and poison, GQA sums, the same-precision
// reference and its floors (exact zeros, underflow), host.flash's backward within the
// tolerances, drop_rowsum caught, cuda.flash's determinism per problem, and every catalog
// backward problem's forward twin.
#include <gtest/gtest.h>

#include <cmath>

#include <map>

#include "app/builtins.hpp"
#include "families/sdpa/sdpa.hpp"
#include "families/sdpa/tests/test_sdpa_util.hpp"
#include "judge/trust.hpp"
#include "runner/catalog.hpp"

namespace opcts {
namespace {

using sdpa::Mask;
using sdpatest::family;
using sdpatest::inputs_of;
using sdpatest::make;

sdpa::Problem bwd(sdpa::Problem p) {
  p.direction = sdpa::Direction::backward;
  return p;
}

// L = Σ O ⊙ dO through the fp64 forward reference (the forward problem of p).
double loss(const sdpa::Problem& p, const TensorMap& in) {
  auto f = p;
  f.direction = sdpa::Direction::forward;
  const References r = sdpa::reference(f, in);
  const auto d_o = in.at("dO").to_f64();
  double l = 0;
  for (size_t e = 0; e < d_o.size(); ++e) l += r.exact.at("O")[e] * d_o[e];
  return l;
}

class SdpaBackwardFd : public ::testing::TestWithParam<sdpa::Problem> {};

// dL/dx by central differences: x ± h stored in fp32 inputs, divided by the difference of the
// values actually stored (so rounding the perturbation costs nothing); h = 2^-10 gives a
// truncation error of O(h²·|x'''|) ≈ 1e-6 on these unit-scale inputs.
TEST_P(SdpaBackwardFd, GradientsAreFiniteDifferencesOfTheForward) {
  const sdpa::Problem p = GetParam();
  ASSERT_EQ(p.dtype, DType::fp32);
  const TensorMap in = inputs_of(p);
  const References r = family().reference(p, in);
  double scale = 0;
  for (const char* g : {"dQ", "dK", "dV"})
    for (double x : r.exact.at(g)) scale = std::max(scale, std::fabs(x));
  ASSERT_GT(scale, 0);
  const double h = std::ldexp(1.0, -10);
  std::vector<std::pair<const char*, const char*>> grads{{"q", "dQ"}, {"k", "dK"}, {"v", "dV"}};
  if (p.sinks) grads.emplace_back("sinks", "dsinks");     // the sinks' gradient too, summed over the batch
  if (p.dbias) grads.emplace_back("attn_mask", "dbias");  // summed where the mask broadcasts
  for (const auto& [name, grad] : grads) {
    const HostTensor& x = in.at(name);
    for (int64_t e = 0; e < x.numel(); ++e) {
      const double x0 = x.get(e);
      if (std::isnan(x0) || std::isinf(x0)) {  // poison, a masked bias: no gradient flows there
        EXPECT_EQ(r.exact.at(grad)[e], 0.0) << grad << "[" << e << "]";
        continue;
      }
      TensorMap plus = in, minus = in;
      plus.at(name).set(e, x0 + h);
      minus.at(name).set(e, x0 - h);
      const double fd = (loss(p, plus) - loss(p, minus)) / (plus.at(name).get(e) - minus.at(name).get(e));
      EXPECT_NEAR(r.exact.at(grad)[e], fd, 2e-5 * scale) << grad << "[" << e << "] of " << sdpa::problem_id(p);
    }
  }
  for (const auto* refs : {&r.exact, &r.lowp})
    for (const auto& [n, v] : *refs)
      for (double z : v) ASSERT_TRUE(std::isfinite(z)) << n;
}

// Every variant backward; those with an additive mask also with dbias.
std::vector<sdpa::Problem> with_dbias(std::vector<sdpa::Problem> v) {
  const size_t n = v.size();
  for (size_t i = 0; i < n; ++i)
    if (v[i].mask_tensor == sdpa::MaskTensor::additive) {
      v.push_back(v[i]);
      v.back().dbias = true;
    }
  return v;
}

std::vector<sdpa::Problem> fd_problems() {
  std::vector<sdpa::Problem> v;
  for (auto p : sdpatest::variants(DType::fp32)) v.push_back(bwd(p));
  return with_dbias(v);
}

INSTANTIATE_TEST_SUITE_P(Variants, SdpaBackwardFd, ::testing::ValuesIn(fd_problems()),
                         [](const auto& info) { return sdpa::problem_id(info.param); });

// A backward case compares dQ, dK and dV only: O and lse of its problem are compared where the
// catalog has the same problem forward, which must run no later (tier) than the backward. A
// negative case compares nothing, so it needs none.
TEST(SdpaCatalog, EveryBackwardProblemHasItsForwardTwin) {
  const auto entries = load_catalogs(builtin_registry(), {std::string(OPCTS_SOURCE_DIR) + "/cases/sdpa.yaml"});
  std::map<std::string, Tier> forward;
  for (const auto& e : entries)
    if (e.problem->as<sdpa::Problem>().direction == sdpa::Direction::forward) forward[e.problem_id] = e.tier;
  size_t backward = 0;
  for (const auto& e : entries) {
    auto p = e.problem->as<sdpa::Problem>();
    if (p.direction != sdpa::Direction::backward || !e.family->expected_error(*e.problem).empty()) continue;
    ++backward;
    p.direction = sdpa::Direction::forward;
    const auto it = forward.find(e.family->problem_id(Problem(p)));
    EXPECT_TRUE(it != forward.end() && it->second <= e.tier)
        << e.problem_id << " (" << e.source << ") has no forward twin in its tier";
  }
  EXPECT_GT(backward, 100u);
}

TEST(SdpaBackward, FullyMaskedRowsHaveZeroGradients) {
  // Rows 0..1 see no key (lower-right, Sq > Sk); rows i ≡ 3 (mod 8) of the mask see none.
  auto lr = bwd(make(DType::bf16, 1, 2, 1, 6, 4, 8, Mask::causal_lower_right));
  auto bm = bwd(make(DType::fp16, 1, 2, 1, 20, 9, 8, Mask::none));
  bm.mask_tensor = sdpa::MaskTensor::additive;
  for (const auto& p : {lr, bm}) {
    const References r = family().reference(p, inputs_of(p));
    for (const auto* refs : {&r.exact, &r.lowp}) {
      for (const auto& [n, v] : *refs)
        for (double z : v) ASSERT_TRUE(std::isfinite(z)) << n;
      for (int64_t h = 0; h < 2; ++h)
        for (int64_t i = 0; i < p.seq_q; ++i) {
          const bool empty = p.mask_tensor == sdpa::MaskTensor::none ? i < 2 : i % 8 == 3;
          double norm = 0;
          for (int64_t d = 0; d < 8; ++d) norm += std::fabs(refs->at("dQ")[(h * p.seq_q + i) * 8 + d]);
          if (empty) EXPECT_EQ(norm, 0.0) << sdpa::problem_id(p) << " row " << i;
          // Rows with two keys or more have a gradient (a row with one key has dQ = 0 exactly).
          if (p.mask_tensor == sdpa::MaskTensor::none && p.keys_of_row(i) >= 2)
            EXPECT_GT(norm, 0.0) << sdpa::problem_id(p) << " row " << i;
        }
    }
    EXPECT_EQ(sdpatest::mismatches_of("host.flash", p), 0) << sdpa::problem_id(p);
  }
}

TEST(SdpaBackward, KeysNobodySeesHaveZeroDkDv) {
  auto p = bwd(make(DType::bf16, 1, 4, 2, 5, 12, 8, Mask::causal_upper_left));
  p.poison_masked = true;
  const References r = family().reference(p, inputs_of(p));
  for (int64_t h = 0; h < 2; ++h)
    for (int64_t j = 0; j < 12; ++j)
      for (int64_t d = 0; d < 8; ++d) {
        const double dk = r.exact.at("dK")[(h * 12 + j) * 8 + d], dv = r.exact.at("dV")[(h * 12 + j) * 8 + d];
        if (j >= 5) EXPECT_TRUE(dk == 0 && dv == 0) << j;
        else EXPECT_NE(dv, 0) << j;
      }
  EXPECT_EQ(sdpatest::mismatches_of("host.flash", p), 0);
}

TEST(SdpaBackward, GqaSumsTheGroupsGradients) {
  // dK, dV of Hkv = 2 under Hq = 4 equal the sums over head pairs of Hkv = 4 with each KV
  // head repeated (repeat_interleave's backward).
  const auto p = bwd(make(DType::fp32, 1, 4, 2, 5, 7, 8, Mask::causal_upper_left));
  const TensorMap in = inputs_of(p);
  auto wide = p;
  wide.heads_kv = 4;
  TensorMap in2;
  in2.emplace("q", in.at("q"));
  in2.emplace("dO", in.at("dO"));
  for (const char* name : {"k", "v"}) {
    HostTensor t(DType::fp32, {1, 4, 7, 8});
    for (int64_t h = 0; h < 4; ++h)
      for (int64_t e = 0; e < 56; ++e) t.set(h * 56 + e, in.at(name).get((h / 2) * 56 + e));
    in2.emplace(name, t);
  }
  const References a = family().reference(p, in), b = family().reference(wide, in2);
  EXPECT_EQ(a.exact.at("dQ"), b.exact.at("dQ"));
  for (const char* g : {"dK", "dV"})
    for (int64_t hk = 0; hk < 2; ++hk)
      for (int64_t e = 0; e < 56; ++e)
        EXPECT_NEAR(a.exact.at(g)[hk * 56 + e], b.exact.at(g)[(2 * hk) * 56 + e] + b.exact.at(g)[(2 * hk + 1) * 56 + e],
                    1e-12);
}

TEST(SdpaBackward, SamePrecisionReferenceIsCloseButNotExact) {
  // The lowp pipeline's error against fp64 is what the dtype costs: nonzero for bf16, within a
  // few percent of max|grad|, and tiny for fp32.
  for (DType t : {DType::bf16, DType::fp32}) {
    const auto p = bwd(make(t, 1, 4, 2, 33, 70, 64, Mask::causal_lower_right));
    const References r = family().reference(p, inputs_of(p));
    for (const char* g : {"dQ", "dK", "dV"}) {
      double err = 0, mx = 0;
      for (size_t e = 0; e < r.exact.at(g).size(); ++e) {
        err = std::max(err, std::fabs(r.exact.at(g)[e] - r.lowp.at(g)[e]));
        mx = std::max(mx, std::fabs(r.exact.at(g)[e]));
      }
      if (t == DType::bf16) {
        EXPECT_GT(err, 1e-4 * mx) << g;
        EXPECT_LT(err, 5e-2 * mx) << g;
      } else {
        EXPECT_LT(err, 1e-5 * mx) << g;
      }
    }
  }
}

// A (0, 0) window shows each row one key: P = 1, dP = D, so dQ and dK are exactly 0, where a
// kernel's fp32 rounding of dP − D leaves ~1e-7. The reference's floor bounds that (never 0)
// and stays at fp32 level: an error of 2^-10 there fails.
TEST(SdpaBackward, OneKeyRowsHaveZeroGradientsAndAnFp32Floor) {
  auto p = bwd(make(DType::bf16, 1, 4, 2, 40, 40, 64, Mask::none));
  p.window_left = 0, p.window_right = 0;
  const TensorMap in = inputs_of(p);
  const References r = family().reference(p, in);
  double floor_max = 0, dv_max = 0;
  for (size_t e = 0; e < r.exact.at("dQ").size(); ++e) {
    ASSERT_EQ(r.exact.at("dQ")[e], 0.0) << e;
    EXPECT_GT(r.bound.at("dQ")[e], 0.0) << e;
    floor_max = std::max(floor_max, r.bound.at("dQ")[e]);
  }
  for (double x : r.exact.at("dK")) ASSERT_EQ(x, 0.0);
  for (double x : r.exact.at("dV")) dv_max = std::max(dv_max, std::fabs(x));
  EXPECT_LT(floor_max, 1e-4 * dv_max);
  std::string why;
  EXPECT_EQ(sdpatest::mismatches_of("host.flash", p, &why), 0) << why;
  const ArchInfo host{"host", "host"};
  TensorMap out = builtin_registry().impl("host.flash")->run(p, in, RunContext{&host, -1});
  out.at("dQ").set(17, std::ldexp(1.0, -10));
  EXPECT_EQ(sdpatest::compare_all("host.flash", p, r, out).at("dQ").mismatches, 1);
}

// Near one-hot rows: gradients of barely attended keys are far below what fp16 holds; a kernel
// that returns 0 there is right, and the trust check counts the reference rounded to fp16.
TEST(SdpaBackward, UnderflowingGradientsAreTrusted) {
  auto p = bwd(make(DType::fp16, 1, 4, 2, 64, 512, 64, Mask::none));
  p.scale = 2.0;
  const TensorMap in = inputs_of(p);
  const References r = family().reference(p, in);
  const ArchInfo host{"host", "host"};
  const TensorMap out = builtin_registry().impl("host.flash")->run(p, in, RunContext{&host, -1});
  for (const auto& [name, s] : sdpatest::compare_all("host.flash", p, r, out)) {
    EXPECT_EQ(s.mismatches, 0) << name;
    int64_t fp64_zeros = 0;
    for (double x : r.exact.at(name)) fp64_zeros += x == 0.0;
    EXPECT_GE(s.ref_zeros, fp64_zeros) << name;
    EXPECT_FALSE(trust_check(s)) << name << ": " << s.zeros << " zeros, " << s.ref_zeros << " in the rounded reference";
  }
}

// Issue 43, shapes from public SDPA bug reports: one query row and scale 4 put most of P's mass
// on few keys, so many dQ entries are a few fp16 subnormals; host.flash rounds 37.5% of dQ to 0
// where the rounded reference keeps a subnormal. Each such zero lies within its element's own
// bound: a right answer, which the trust check no longer counts. Zeros written where the
// reference exceeds twice its element's own bound still fail the case.
TEST(SdpaBackward, SubnormalGradientsRoundedToZeroAreTrusted) {
  for (int64_t d : {128, 64}) {
    auto p = bwd(make(DType::fp16, 1, 8, 8, 1, 128, d, Mask::none));
    p.scale = 4.0;
    const TensorMap in = inputs_of(p);
    const References r = family().reference(p, in);
    const ArchInfo host{"host", "host"};
    TensorMap out = builtin_registry().impl("host.flash")->run(p, in, RunContext{&host, -1});
    const auto stats = sdpatest::compare_all("host.flash", p, r, out);
    const OutputStats& dq = stats.at("dQ");
    EXPECT_EQ(dq.mismatches, 0);
    EXPECT_GT(dq.zeros, dq.ref_zeros) << "the problem no longer shows the issue";
    EXPECT_EQ(dq.unexplained_zeros, 0);
    for (const auto& [name, s] : stats) EXPECT_FALSE(trust_check(s)) << name << ": " << *trust_check(s);
    const std::vector<double>& want = r.exact.at("dQ");
    const std::vector<double>& own = r.bound.at("dQ");
    int64_t zeroed = 0;
    for (size_t e = 0; e < want.size(); ++e)
      if (std::fabs(want[e]) > 2 * own[e]) {
        out.at("dQ").set(static_cast<int64_t>(e), 0.0);
        ++zeroed;
      }
    ASSERT_GT(zeroed, 0);
    const OutputStats s = sdpatest::compare_all("host.flash", p, r, out).at("dQ");
    EXPECT_EQ(s.unexplained_zeros, zeroed);
    EXPECT_TRUE(s.mismatches > 0 || trust_check(s)) << zeroed << " zeroed";
  }
}

#if OPCTS_HAVE_CUDA
// cuda.flash declares what its dQ atomics imply (no GPU needed), per tactic: the forward is
// reproducible, the backward while every row's keys span at most two key blocks (64 keys on the
// tensor-core kernel, tactics tc and tc2; 32 on the FMA kernel, tactic fma, the only one softcap
// takes), since 0 + a + b = 0 + b + a.
TEST(SdpaBackward, CudaFlashDeterminismFollowsItsDqAtomics) {
  const Impl& flash = *builtin_registry().impl("cuda.flash");
  EXPECT_TRUE(flash.deterministic(make(DType::bf16, 1, 4, 2, 64, 4096, 64, Mask::none), ""));
  EXPECT_TRUE(flash.deterministic(bwd(make(DType::bf16, 1, 4, 2, 64, 128, 64, Mask::none)), "tc"));
  EXPECT_FALSE(flash.deterministic(bwd(make(DType::bf16, 1, 4, 2, 64, 128, 64, Mask::none)), "fma"));
  EXPECT_FALSE(flash.deterministic(bwd(make(DType::bf16, 1, 4, 2, 64, 129, 64, Mask::none)), "tc"));
  auto diag = bwd(make(DType::bf16, 1, 4, 2, 300, 300, 64, Mask::none));
  diag.window_left = 0, diag.window_right = 0;  // one key per row: one block
  EXPECT_TRUE(flash.deterministic(diag, "tc"));
  EXPECT_TRUE(flash.deterministic(diag, "fma"));
  auto capped = bwd(make(DType::bf16, 1, 4, 2, 64, 100, 64, Mask::none));
  capped.softcap = 30;  // FMA kernel: 100 keys span 4 blocks of 32
  EXPECT_EQ(flash.tactics(capped), std::vector<std::string>{"fma"});
  EXPECT_FALSE(flash.deterministic(capped, "fma"));
  EXPECT_TRUE(builtin_registry()
                  .impl("cuda.math")
                  ->deterministic(bwd(make(DType::bf16, 1, 4, 2, 64, 4096, 64, Mask::none)), ""));
}
#endif

class SdpaBackwardHostFlash : public ::testing::TestWithParam<sdpa::Problem> {};

TEST_P(SdpaBackwardHostFlash, PassesAndDropRowsumFails) {
  const sdpa::Problem p = GetParam();
  std::string why;
  EXPECT_EQ(sdpatest::mismatches_of("host.flash", p, &why), 0) << why;
  const ArchInfo host{"host", "host"};
  ASSERT_TRUE(builtin_registry().impl("host.flash_drop_rowsum")->supports(p, host).ok);
  EXPECT_GT(sdpatest::mismatches_of("host.flash_drop_rowsum", p), 0) << sdpa::problem_id(p);
}

std::vector<sdpa::Problem> host_problems() {
  std::vector<sdpa::Problem> v;
  for (DType t : {DType::bf16, DType::fp16, DType::fp32})
    for (const auto& p : sdpatest::variants(t)) v.push_back(bwd(p));
  v.push_back(bwd(make(DType::bf16, 2, 6, 2, 130, 65, 128, Mask::causal_upper_left)));
  v.push_back(bwd(make(DType::fp16, 1, 12, 1, 65, 200, 64, Mask::none)));
  return with_dbias(v);
}

INSTANTIATE_TEST_SUITE_P(Variants, SdpaBackwardHostFlash, ::testing::ValuesIn(host_problems()),
                         [](const auto& info) { return sdpa::problem_id(info.param); });

}  // namespace
}  // namespace opcts
