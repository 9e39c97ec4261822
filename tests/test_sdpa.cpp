// SDPA family: id round trips, mask geometry, the fp64 reference on hand-checkable cases,
// host.flash against it, and that the tolerance catches the classic kernel bugs.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "harness/compare.hpp"
#include "harness/family.hpp"
#include "harness/rng.hpp"
#include "harness/tolerance.hpp"
#include "refimpl/sdpa.hpp"

namespace opcts {
namespace {

using sdpa::Mask;

sdpa::Problem make(DType t, int64_t b, int64_t hq, int64_t hkv, int64_t sq, int64_t sk, int64_t d, Mask m) {
  sdpa::Problem p;
  p.dtype = t;
  p.batch = b;
  p.heads_q = hq;
  p.heads_kv = hkv;
  p.seq_q = sq;
  p.seq_k = sk;
  p.head_dim = d;
  p.mask = m;
  return p;
}

const Family& family() { return *builtin_registry().family("sdpa"); }

TensorMap inputs_of(const sdpa::Problem& p) { return family().make_inputs(p, case_seed(family(), p)); }

TEST(SdpaId, RoundTripsEveryField) {
  for (Mask m : {Mask::none, Mask::causal_upper_left, Mask::causal_lower_right}) {
    for (DType t : {DType::bf16, DType::fp16, DType::fp32}) {
      sdpa::Problem p = make(t, 2, 32, 8, 4096, 17, 128, m);
      for (std::optional<double> s : {std::optional<double>{}, std::optional<double>{0.125},
                                      std::optional<double>{-1e-5}, std::optional<double>{3.0}}) {
        p.scale = s;
        const std::string id = sdpa::problem_id(p);
        const sdpa::Problem q = sdpa::parse_problem_id(id);
        EXPECT_EQ(sdpa::problem_id(q), id);
        EXPECT_EQ(q.dtype, p.dtype);
        EXPECT_EQ(q.mask, p.mask);
        EXPECT_EQ(q.seq_k, 17);
        EXPECT_EQ(q.scale, p.scale) << id;
        EXPECT_EQ(id.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789_"), std::string::npos) << id;
      }
    }
  }
  EXPECT_EQ(sdpa::problem_id(make(DType::bf16, 2, 32, 8, 4096, 4096, 128, Mask::causal_lower_right)),
            "bf16_b2_hq32_hkv8_sq4096_sk4096_d128_causal_lr");
}

TEST(SdpaId, BadIdsNameTheToken) {
  try {
    sdpa::parse_problem_id("bf16_b2_hq32_hkvX_sq1_sk1_d64_nomask");
    FAIL() << "accepted a bad id";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("hkvX"), std::string::npos) << e.what();
  }
  EXPECT_THROW(sdpa::parse_problem_id("bf16_b2_hq32_hkv8_sq1_sk1_d64_causal_xx"), std::invalid_argument);
  EXPECT_THROW(sdpa::parse_problem_id("bf16_b2_hq30_hkv8_sq1_sk1_d64_nomask"), std::invalid_argument);  // GQA
  EXPECT_THROW(sdpa::parse_problem_id("bf16_b2"), std::invalid_argument);
}

TEST(SdpaMask, KeysOfRowMatchesVisible) {
  for (Mask m : {Mask::none, Mask::causal_upper_left, Mask::causal_lower_right}) {
    for (auto [sq, sk] : {std::pair{6, 4}, {4, 6}, {5, 5}, {1, 9}, {9, 1}, {0, 3}, {3, 0}}) {
      const auto p = make(DType::bf16, 1, 1, 1, sq, sk, 8, m);
      for (int64_t i = 0; i < sq; ++i) {
        int64_t n = 0;
        for (int64_t j = 0; j < sk; ++j) n += p.visible(i, j);
        EXPECT_EQ(p.keys_of_row(i), n) << sdpa::problem_id(p) << " row " << i;
      }
    }
  }
  // PyTorch's LOWER_RIGHT example (3, 4): [[1,1,0,0],[1,1,1,0],[1,1,1,1]].
  const auto lr = make(DType::bf16, 1, 1, 1, 3, 4, 8, Mask::causal_lower_right);
  EXPECT_EQ(lr.keys_of_row(0), 2);
  EXPECT_EQ(lr.keys_of_row(2), 4);
  const auto ul = make(DType::bf16, 1, 1, 1, 3, 4, 8, Mask::causal_upper_left);
  EXPECT_EQ(ul.keys_of_row(0), 1);
}

TEST(SdpaReference, SingleKeyGivesVAndItsScore) {
  const auto p = make(DType::fp32, 1, 2, 1, 3, 1, 4, Mask::none);
  const TensorMap in = inputs_of(p);
  const References r = sdpa::reference(p, in);
  const auto q = in.at("q").to_f64(), k = in.at("k").to_f64(), v = in.at("v").to_f64();
  for (int64_t h = 0; h < 2; ++h)
    for (int64_t i = 0; i < 3; ++i) {
      double s = 0;
      for (int d = 0; d < 4; ++d) s += q[(h * 3 + i) * 4 + d] * k[d];
      EXPECT_NEAR(r.exact.at("lse")[h * 3 + i], s * 0.5, 1e-12);  // scale 1/sqrt(4)
      for (int d = 0; d < 4; ++d) EXPECT_DOUBLE_EQ(r.exact.at("O")[(h * 3 + i) * 4 + d], v[d]);
    }
}

TEST(SdpaReference, TwoKeysByHand) {
  const auto p = make(DType::fp32, 1, 1, 1, 1, 2, 1, Mask::none);
  TensorMap in;
  in.emplace("q", HostTensor(DType::fp32, {1, 1, 1, 1}));
  in.emplace("k", HostTensor(DType::fp32, {1, 1, 2, 1}));
  in.emplace("v", HostTensor(DType::fp32, {1, 1, 2, 1}));
  in.at("q").set(0, 1.0);
  in.at("k").set(0, 0.0);
  in.at("k").set(1, std::log(3.0f));  // scores 0 and ln 3: weights 1/4 and 3/4
  in.at("v").set(0, 2.0);
  in.at("v").set(1, 6.0);
  const References r = sdpa::reference(p, in);
  const double ln3 = static_cast<float>(std::log(3.0f));
  EXPECT_NEAR(r.exact.at("O")[0], (2.0 + 6.0 * std::exp(ln3)) / (1 + std::exp(ln3)), 1e-12);
  EXPECT_NEAR(r.exact.at("lse")[0], std::log(1 + std::exp(ln3)), 1e-12);
}

TEST(SdpaReference, RowsWithoutKeysAreZeroAndMinusInf) {
  const auto p = make(DType::bf16, 1, 2, 2, 6, 4, 16, Mask::causal_lower_right);
  const References r = sdpa::reference(p, inputs_of(p));
  for (const auto* refs : {&r.exact, &r.lowp}) {
    for (int64_t h = 0; h < 2; ++h)
      for (int64_t i = 0; i < 6; ++i) {
        const double lse = refs->at("lse")[h * 6 + i];
        if (i < 2) {
          EXPECT_TRUE(std::isinf(lse) && lse < 0) << "row " << i;
          for (int d = 0; d < 16; ++d) EXPECT_EQ(refs->at("O")[(h * 6 + i) * 16 + d], 0.0);
        } else {
          EXPECT_TRUE(std::isfinite(lse));
        }
      }
  }
}

TEST(SdpaReference, GqaUsesHeadDivRatio) {
  // Hq 4 over Hkv 2 equals Hkv 4 with each KV head repeated (repeat_interleave).
  const auto p = make(DType::fp32, 1, 4, 2, 5, 7, 8, Mask::causal_upper_left);
  const TensorMap in = inputs_of(p);
  auto wide = p;
  wide.heads_kv = 4;
  TensorMap in2;
  in2.emplace("q", in.at("q"));
  for (const char* name : {"k", "v"}) {
    HostTensor t(DType::fp32, {1, 4, 7, 8});
    for (int64_t h = 0; h < 4; ++h)
      for (int64_t e = 0; e < 7 * 8; ++e) t.set(h * 56 + e, in.at(name).get((h / 2) * 56 + e));
    in2.emplace(name, t);
  }
  EXPECT_EQ(sdpa::reference(p, in).exact.at("O"), sdpa::reference(wide, in2).exact.at("O"));
}

// host.flash within its tolerance, and a kernel that drops the last key makes it fail (every
// shape below lets some row see the last key).
class SdpaHostFlash : public ::testing::TestWithParam<sdpa::Problem> {};

TEST_P(SdpaHostFlash, PassesAndDroppedKeyFails) {
  const sdpa::Problem p = GetParam();
  const TensorMap in = inputs_of(p);
  const References r = sdpa::reference(p, in);
  const Impl* impl = builtin_registry().impl("host.flash");
  const ArchInfo host{"host", "host"};
  const TensorMap out = impl->run(p, in, RunContext{&host, -1});
  const auto table = ToleranceTable::load(std::string(OPCTS_SOURCE_CASES_DIR) + "/tolerances.yaml");
  for (const auto& spec : family().outputs(p)) {
    const Tolerance tol = table.resolve("sdpa", spec.name, spec.dtype, "host.flash", "host", "", nullptr);
    std::vector<WorstElement> worst;
    const OutputStats s = compare_output(spec.name, out.at(spec.name), r.exact.at(spec.name),
                                         &r.lowp.at(spec.name), tol, worst);
    EXPECT_EQ(s.mismatches, 0) << spec.name << " err " << s.max_abs_err << " bound " << s.bound;
  }
  // The same kernel over all keys but the last (a dropped partial tile) must be caught.
  auto short_p = p;
  short_p.seq_k = p.seq_k - 1;
  TensorMap short_in;
  short_in.emplace("q", in.at("q"));
  for (const char* name : {"k", "v"}) {
    HostTensor t(p.dtype, sdpa::kv_shape(short_p));
    for (int64_t bh = 0; bh < p.batch * p.heads_kv; ++bh)
      for (int64_t e = 0; e < short_p.seq_k * p.head_dim; ++e)
        t.set(bh * short_p.seq_k * p.head_dim + e, in.at(name).get(bh * p.seq_k * p.head_dim + e));
    short_in.emplace(name, t);
  }
  const TensorMap bad = impl->run(short_p, short_in, RunContext{&host, -1});
  const Tolerance tol = table.resolve("sdpa", "O", p.dtype, "host.flash", "host", "", nullptr);
  std::vector<WorstElement> worst;
  const OutputStats s = compare_output("O", bad.at("O"), r.exact.at("O"), &r.lowp.at("O"), tol, worst);
  EXPECT_GT(s.mismatches, 0) << "a dropped key passed: err " << s.max_abs_err << " bound " << s.bound;
}

INSTANTIATE_TEST_SUITE_P(Shapes, SdpaHostFlash,
                         ::testing::Values(make(DType::bf16, 2, 4, 2, 33, 65, 64, Mask::none),
                                           make(DType::fp16, 1, 6, 2, 70, 129, 128, Mask::causal_lower_right),
                                           make(DType::fp32, 1, 2, 1, 17, 64, 32, Mask::causal_lower_right),
                                           make(DType::bf16, 1, 3, 3, 1, 300, 64, Mask::none)),
                         [](const auto& info) { return sdpa::problem_id(info.param); });

TEST(SdpaInputs, SameIdSameInputs) {
  const auto p = make(DType::bf16, 1, 2, 1, 9, 11, 16, Mask::none);
  const TensorMap a = inputs_of(p), b = inputs_of(p);
  EXPECT_EQ(a.at("q").to_f64(), b.at("q").to_f64());
  EXPECT_NE(a.at("q").to_f64(), a.at("k").to_f64());
  EXPECT_EQ(case_seed(family(), p), seed_of("sdpa/" + sdpa::problem_id(p)));
}

}  // namespace
}  // namespace opcts
