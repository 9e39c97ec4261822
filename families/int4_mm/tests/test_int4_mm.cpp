// The int4_mm family: ids, inputs in the code domain, the reference on hand-worked cases and against the old
// bound (its oracle), host.int4 against the bound on the smoke tier and at model K, negative cases, and each
// planted bug failing where it is probed.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <set>

#include "app/builtins.hpp"
#include "core/errors.hpp"
#include "core/family.hpp"
#include "families/int4_mm/int4_mm.hpp"
#include "families/int4_mm/int4_pack.hpp"
#include "judge/accumulator.hpp"
#include "judge/compare.hpp"
#include "runner/catalog.hpp"
#include "tests/test_family_util.hpp"
#include "tests/test_util.hpp"

namespace opcts {
namespace {

using int4_mm::Format;
using int4_mm::Problem;

const Family& family() { return *builtin_registry().family("int4_mm"); }

std::vector<CatalogEntry> catalog() {
  return load_catalogs(builtin_registry(), {(testutil::cases_dir() / "int4_mm.yaml").string()});
}

const ArchInfo& host() { return testutil::host_arch(); }

bool fails(const Impl& impl, const Problem& p) { return testutil::bounded_fails(family(), impl, p, "y"); }

const Impl& impl_named(const char* name) { return *builtin_registry().impl(name); }

// E of element i under `impl`'s accumulator model (its tolerance rule on the host).
double element_bound(const Impl& impl, const Problem& p, const References& r, size_t i) {
  const ReductionStats& st = r.reduction.at("y");
  const Tolerance t = testutil::host_tolerance(family(), impl, p, "y", p.dtype);
  return t.factor * accumulation_bound(t.accumulator, st, t.false_alarm).element(st, i);
}

// The per-element bound before the reduction statistics, kept as the oracle the derived one
// must not exceed: |Δ| + (γ_K(2^-23) + 4·γ_K(2^-53))·Σ|x||ŵ| + K·2^-149.
double old_bound(const ReductionStats& st, size_t i) {
  const double K = static_cast<double>(st.terms);
  const auto gamma = [K](double u) { return K * u / (1 - K * u); };
  return std::fabs(st.offset[i]) + (gamma(0x1p-23) + 4 * gamma(0x1p-53)) * st.abs_sum[i] + K * 0x1p-149;
}

TEST(Int4MmId, SpellsTheOptionalTokens) {
  ASSERT_GE(catalog().size(), 300u);
  EXPECT_EQ(int4_mm::fields().id(Problem{.m = 1, .n = 4096, .k = 4096}), "tinygemm_bf16_m1_n4096_k4096_g128_ikt8");
  EXPECT_EQ(int4_mm::fields().id(Problem{.format = Format::gptq,
                                         .dtype = DType::fp16,
                                         .m = 3,
                                         .n = 64,
                                         .k = 512,
                                         .group = 32,
                                         .fill = int4_mm::Fill::extreme_zeros,
                                         .scale_exp = -8}),
            "gptq_fp16_m3_n64_k512_g32_zeroext_sexpm8");
  EXPECT_EQ(int4_mm::fields().parse_yaml(YAML::Load("{format: q4_0, dtype: fp16, m: 1, nk: {n: 8, k: 64}}")).group, 32);
}

TEST(Int4MmId, ValidationNamesTheRule) {
  testutil::expect_invalid([](const std::string& id) { int4_mm::fields().parse_id(id); },
                           {
                               {"tinygemm_bf16_m1_n64_k96_g64_ikt2", "expect_error: K"},
                               {"awq_fp16_m1_n12_k256_g128", "expect_error: N"},
                               {"awq_fp16_m1_n64_k192_g48", "expect_error: group_size"},
                               {"q4_0_fp16_m1_n64_k256_g32_zeroext", "no zero points"},
                               {"awq_fp32_m1_n64_k256_g128", "bf16 or fp16"},
                               {"awq_fp16_m1_n64_k256_g128_expect_K", "valid"},
                               {"awq_fp16_m1_n64_k256_g128_sexp9", "scale_exp"},
                           });
}

TEST(Int4MmInputs, DeterministicAndDrawnInTheCodeDomain) {
  const Problem p{.format = Format::awq, .dtype = DType::fp16, .m = 2, .n = 64, .k = 512, .group = 64};
  const TensorMap a = int4_mm::make_inputs(p, 42), b = int4_mm::make_inputs(p, 42), c = int4_mm::make_inputs(p, 43);
  for (const auto& [name, t] : a) {
    ASSERT_EQ(t.nbytes(), b.at(name).nbytes());
    EXPECT_EQ(std::memcmp(t.data(), b.at(name).data(), t.nbytes()), 0) << name;
    EXPECT_NE(std::memcmp(t.data(), c.at(name).data(), t.nbytes()), 0) << name;
  }
  EXPECT_EQ(a.at("weight").shape(), (std::vector<int64_t>{512, 8, 8}));
  EXPECT_EQ(a.at("scales").shape(), (std::vector<int64_t>{8, 64}));
  EXPECT_EQ(a.at("qzeros").shape(), (std::vector<int64_t>{8, 8, 8}));
  // Codes cover 0..15 and scales vary per group (so a group-0-scale bug has something to miss).
  const int4::Codes q = int4::unpack_awq(a.at("weight"), 64, 512);
  EXPECT_EQ(std::set<uint8_t>(q.begin(), q.end()).size(), 16u);
  std::set<double> scales;
  for (int64_t g = 0; g < 8; ++g) scales.insert(a.at("scales").get(g * 64));
  EXPECT_GE(scales.size(), 6u);
}

// The random fill's codes are the packed weight's random bytes (random_storage): every format's
// codes, read back through its unpacker, are uniform over 0..15 (Pearson's χ² over 65,536 codes,
// 15 degrees of freedom: 37.7 is P = 0.001; a fixed seed, so it cannot flake), and Q4_0's d
// written over its blocks are the scales, not random bytes (finite, within the scale range).
TEST(Int4MmInputs, DirectCodesAreUniformInEveryFormat) {
  for (const Format f : int4_mm::all_formats()) {
    const Problem p{
        .format = f, .dtype = DType::fp16, .m = 1, .n = 64, .k = 1024, .group = f == Format::q4_0 ? 32 : 128};
    const TensorMap in = int4_mm::make_inputs(p, 7);
    const HostTensor& w = in.at("weight");
    int4::Codes q;
    switch (f) {
      case Format::tinygemm: q = int4::unpack_tinygemm(w, 64, 1024, p.inner_k_tiles); break;
      case Format::tinygemm_unpacked: q = int4::unpack_tinygemm_unpacked(w, 64, 1024); break;
      case Format::awq: q = int4::unpack_awq(w, 64, 1024); break;
      case Format::gptq: q = int4::unpack_gptq(w, 64, 1024); break;
      case Format::q4_0: {
        const int4::Q4_0 u = int4::unpack_q4_0(w, 64, 1024);
        q = u.q;
        for (uint16_t d : u.d_bits) {
          const double v = std::fabs(decode(DType::fp16, d));
          EXPECT_TRUE(v > 0 && v < 1) << int4_mm::to_string(f) << " d " << v;
        }
        break;
      }
    }
    ASSERT_EQ(q.size(), 65536u);
    double count[16] = {};
    for (uint8_t c : q) ++count[c];
    double chi2 = 0;
    for (double c : count) chi2 += (c - 4096) * (c - 4096) / 4096;
    EXPECT_LT(chi2, 37.7) << int4_mm::to_string(f);
  }
}

// The storages the direct fill writes are the packers' tensors (shape, dtype), so an impl sees
// the same layout whichever way a problem's weight was made.
TEST(Int4Pack, StoragesAreThePackersTensors) {
  const int4::Codes q(64 * 1024, 3);
  const std::vector<uint16_t> d(64 * 32, 0x3C00);
  const auto same = [](const HostTensor& a, const HostTensor& b) {
    return a.shape() == b.shape() && a.dtype() == b.dtype();
  };
  EXPECT_TRUE(same(int4::tinygemm_storage(64, 1024, 8), int4::pack_tinygemm(q, 64, 1024, 8)));
  EXPECT_TRUE(same(int4::tinygemm_storage(64, 1024, 2), int4::pack_tinygemm(q, 64, 1024, 2)));
  EXPECT_TRUE(same(int4::tinygemm_unpacked_storage(64, 1024), int4::pack_tinygemm_unpacked(q, 64, 1024)));
  EXPECT_TRUE(same(int4::awq_storage(64, 1024), int4::pack_awq(q, 64, 1024)));
  EXPECT_TRUE(same(int4::gptq_storage(64, 1024), int4::pack_gptq(q, 64, 1024)));
  EXPECT_TRUE(same(int4::q4_0_storage(64, 1024), int4::pack_q4_0(q, d, 64, 1024)));
  HostTensor t = int4::q4_0_storage(64, 1024);
  int4::put_q4_0_d(t, d);
  EXPECT_EQ(int4::unpack_q4_0(t, 64, 1024).d_bits, d);
  EXPECT_THROW(int4::put_q4_0_d(t, std::vector<uint16_t>(3)), std::invalid_argument);
}

TEST(Int4MmInputs, ExtremeZerosAndAllCodes) {
  const Problem z{.format = Format::gptq,
                  .dtype = DType::fp16,
                  .m = 1,
                  .n = 64,
                  .k = 512,
                  .group = 64,
                  .fill = int4_mm::Fill::extreme_zeros};
  const TensorMap in = int4_mm::make_inputs(z, 1);
  std::set<int> seen;
  for (int zp : int4::unpack_gptq_zeros(in.at("qzeros"), 8, 64)) seen.insert(zp);
  EXPECT_EQ(seen, (std::set<int>{1, 16}));  // stored 0 and 15: 16 is the wrap of a true 0
  const Problem a{
      .format = Format::tinygemm_unpacked, .m = 1, .n = 16, .k = 256, .group = 64, .fill = int4_mm::Fill::all_codes};
  const int4::Codes q = int4::unpack_tinygemm_unpacked(int4_mm::make_inputs(a, 2).at("weight"), 16, 256);
  for (int64_t n = 0; n < 16; ++n)
    for (int64_t g = 0; g < 4; ++g) {
      std::set<uint8_t> group(q.begin() + n * 256 + g * 64, q.begin() + n * 256 + g * 64 + 16);
      EXPECT_EQ(group.size(), 16u) << n << " " << g;
    }
}

// AWQ, N = 8, K = 32, g = 32, M = 1, by hand: x = 1 everywhere, every code 9, zero point z(n) = n,
// scale 0.5 for column n: y(n) = 32·(9 − n)·0.5. Exact in bf16, so the bound is one ulp of
// accumulation around an exact value and host.int4 matches it.
TEST(Int4MmReference, HandWorkedAwq) {
  const Problem p{.format = Format::awq, .m = 1, .n = 8, .k = 32, .group = 32};
  TensorMap in;
  HostTensor x(DType::bf16, {1, 32});
  for (int k = 0; k < 32; ++k) x.set(k, 1.0);
  in.emplace("x", x);
  in.emplace("weight", int4::pack_awq(int4::Codes(8 * 32, 9), 8, 32));
  HostTensor sc(DType::bf16, {1, 8});
  for (int n = 0; n < 8; ++n) sc.set(n, 0.5);
  in.emplace("scales", sc);
  int4::Codes z(8);
  for (int n = 0; n < 8; ++n) z[static_cast<size_t>(n)] = static_cast<uint8_t>(n);
  in.emplace("qzeros", int4::pack_awq_zeros(z, 1, 8));
  const References r = int4_mm::reference(p, in);
  const TensorMap out = impl_named("host.int4").run(p, in, RunContext{&host(), -1});
  const ReductionStats& st = r.reduction.at("y");
  EXPECT_EQ(st.terms, 32);
  EXPECT_EQ(st.term_bits, 16);        // bf16 × bf16
  EXPECT_TRUE(st.magnitude.empty());  // no epilogue
  for (int n = 0; n < 8; ++n) {
    const auto i = static_cast<size_t>(n);
    EXPECT_EQ(r.exact.at("y")[i], 16.0 * (9 - n)) << n;
    EXPECT_EQ(st.offset[i], 0.0);  // exact dequant: Δ = 0
    EXPECT_EQ(st.abs_sum[i], 32 * std::fabs(9.0 - n) * 0.5);
    EXPECT_EQ(st.sq_sum[i], 32 * (9.0 - n) * (9.0 - n) * 0.25);
    EXPECT_LT(element_bound(impl_named("host.int4"), p, r, i), 1e-3);
    EXPECT_EQ(out.at("y").get(n), 16.0 * (9 - n)) << n;
  }
}

// tinygemm's dequant (q − 8)·scale + zero rounded once to bf16: with scale 1 + 2^-7 and zero
// 2^-9, (q − 8)·scale + zero needs more than bf16's 8 bits, so Δ ≠ 0 enters the bound.
TEST(Int4MmReference, DequantRoundingEntersTheBound) {
  const Problem p{.format = Format::tinygemm_unpacked, .m = 1, .n = 1, .k = 32, .group = 32};
  TensorMap in;
  HostTensor x(DType::bf16, {1, 32});
  x.set(0, 1.0);  // y = ŵ(q(0)) exactly: one product
  in.emplace("x", x);
  int4::Codes q(32, 8);
  q[0] = 13;  // w = 5·(1 + 2^-7) + 2^-9 = 5.0390625 + 0.001953125
  in.emplace("weight", int4::pack_tinygemm_unpacked(q, 1, 32));
  HostTensor sz(DType::bf16, {1, 1, 2});
  sz.set(0, 1.0 + std::ldexp(1.0, -7));
  sz.set(1, std::ldexp(1.0, -9));
  in.emplace("scale_and_zero", sz);
  const References r = int4_mm::reference(p, in);
  const double w = 5 * (1 + std::ldexp(1.0, -7)) + std::ldexp(1.0, -9);
  const double wr = round_to(DType::bf16, w);
  EXPECT_EQ(r.exact.at("y")[0], w);                         // unrounded: the metric adds the one output rounding
  EXPECT_EQ(r.reduction.at("y").offset[0], wr - w);         // Δ, signed and exact
  for (const char* impl : {"host.int4", "cuda.int4_mm"}) {  // IEEE fp32 and the truncating default
    const double e = element_bound(impl_named(impl), p, r, 0);
    EXPECT_GE(e, std::fabs(wr - w)) << impl;
    EXPECT_LT(e, std::fabs(wr - w) + 1e-4) << impl;  // + the sum of one term's roundings ≈ 2e-5
  }
}

// The derived bound never exceeds the old formula (its oracle) on any element of any smoke
// problem, under host.int4's IEEE fp32 model and the undeclared impls' truncating one, and is
// far below it at long K: under a third at K >= 4096 (the hand grids' model shapes reach about
// 0.2, the smoke tier's sampled gptq bf16 M 2 N 168 K 4096 g64 0.28: few elements and groups of
// 64 leave more of the per-group terms).
TEST(Int4MmReference, NeverLooserThanTheOldBound) {
  int problems = 0;
  for (const auto& e : catalog()) {
    const auto& p = (*e.problem).as<Problem>();
    if (e.tier != Tier::smoke || !p.expect_error.empty()) continue;
    const TensorMap in = int4_mm::make_inputs(p, case_seed(family(), p));
    const References r = int4_mm::reference(p, in);
    const ReductionStats& st = r.reduction.at("y");
    double ratio = 0;
    for (const char* impl : {"host.int4", "cuda.int4_mm"})
      for (size_t i = 0; i < st.abs_sum.size(); ++i) {
        const double now = element_bound(impl_named(impl), p, r, i), old = old_bound(st, i);
        EXPECT_LE(now, old) << e.problem_id << " " << impl << " element " << i;
        ratio = std::max(ratio, now / old);
      }
    if (p.k >= 4096) EXPECT_LT(ratio, 1.0 / 3) << e.problem_id;
    ++problems;
  }
  EXPECT_GE(problems, 200);
}

TEST(Int4MmHost, WithinTheBoundOnEverySmokeProblem) {
  const Impl* impl = builtin_registry().impl("host.int4");
  int n = 0;
  for (const auto& e : catalog()) {
    const auto& p = (*e.problem).as<Problem>();
    if (e.tier != Tier::smoke || !p.expect_error.empty()) continue;
    EXPECT_FALSE(fails(*impl, p)) << e.problem_id;
    ++n;
  }
  EXPECT_GE(n, 200);
}

// At model K (Llama-3-8B's down projection, K = 14336, and a K = 4096 one) host.int4's largest
// error is within a fifth of its bound (the old worst case left it 8-89× below), and each
// planted precision bug fails there.
TEST(Int4MmHost, AtModelKTheBoundIsTightAndThePrecisionBugsFail) {
  for (const Problem& p : {Problem{.format = Format::awq, .dtype = DType::fp16, .m = 2, .n = 4096, .k = 14336},
                           Problem{.format = Format::tinygemm, .dtype = DType::bf16, .m = 1, .n = 6144, .k = 4096}}) {
    const TensorMap in = int4_mm::make_inputs(p, case_seed(family(), p));
    const References r = int4_mm::reference(p, in);
    const std::string id = int4_mm::fields().id(p);
    const OutputStats s = testutil::judge_bounded(family(), impl_named("host.int4"), p, in, r, "y");
    EXPECT_EQ(s.mismatches, 0) << id;
    EXPECT_FALSE(s.biased()) << id << ": " << s.slope << " in [" << s.slope_lo << ", " << s.slope_hi << "]";
    std::printf("%s: host.int4 bound / error %.3g, slope %.3g in [%.3g, %.3g]\n", id.c_str(), 1 / s.max_ratio, s.slope,
                s.slope_lo, s.slope_hi);
    EXPECT_GT(s.max_ratio, 0.2) << id;
    for (const char* bug : {"host.int4_drop_last_k", "host.int4_fp16_as_bf16", "host.int4_sum_in_dtype_64",
                            "host.int4_split_k4_in_dtype"}) {
      if (!impl_named(bug).supports(p, host()).ok) continue;
      const OutputStats b = testutil::judge_bounded(family(), impl_named(bug), p, in, r, "y");
      std::printf("  %s: %lld mismatches, max err/bound %.3g, slope %.3g in [%.3g, %.3g]\n", bug,
                  static_cast<long long>(b.mismatches), b.max_ratio, b.slope, b.slope_lo, b.slope_hi);
      EXPECT_TRUE(b.mismatches > 0 || b.biased()) << bug << " passed " << id;
    }
  }
}

TEST(Int4MmNegative, EveryNegativeCaseRaisesTheNamedArgument) {
  testutil::expect_negative_cases_refused(family(), *builtin_registry().impl("host.int4"), catalog(), 12);
}

void expect_planted_fails(const char* impl, int at_least) {
  testutil::expect_planted_fails_on_smoke(family(), builtin_registry().impl(impl), catalog(), "y", at_least);
}

TEST(Int4MmPlanted, GroupZerosScaleForEveryGroupAtM1Fails) { expect_planted_fails("host.int4_group0_scale", 40); }
TEST(Int4MmPlanted, SwappedNibblesFail) { expect_planted_fails("host.int4_nibble_swap", 200); }
TEST(Int4MmPlanted, ZeroPointBeforeTheScaleFails) { expect_planted_fails("host.int4_zero_before_scale", 150); }
TEST(Int4MmPlanted, GptqZMinusOneNotUndoneFails) { expect_planted_fails("host.int4_gptq_z", 40); }
TEST(Int4MmPlanted, DroppingThePartialKTileFails) { expect_planted_fails("host.int4_drop_partial_k", 15); }
TEST(Int4MmPlanted, DroppingTheLastKElementFails) { expect_planted_fails("host.int4_drop_last_k", 200); }
TEST(Int4MmPlanted, Fp16ComputedInBf16Fails) { expect_planted_fails("host.int4_fp16_as_bf16", 70); }
TEST(Int4MmPlanted, TheSumRoundedToTheDtypeEvery64Fails) { expect_planted_fails("host.int4_sum_in_dtype_64", 200); }
TEST(Int4MmPlanted, SplitKPartialsInTheDtypeFail) { expect_planted_fails("host.int4_split_k4_in_dtype", 200); }

// The new precision bugs are left out only where they change no output value.
TEST(Int4MmPlanted, PrecisionBugsRunWhereverTheyChangeTheOutput) {
  using int4_mm::PlantedBug;
  const Problem bf16{.m = 1, .n = 4096, .k = 4096},
      fp16{.format = Format::awq, .dtype = DType::fp16, .m = 1, .n = 4096, .k = 4096};
  for (PlantedBug b : {PlantedBug::drop_last_k, PlantedBug::sum_in_dtype_64, PlantedBug::split_k4_in_dtype}) {
    EXPECT_EQ(int4_mm::planted_bug_cannot_show(bf16, b), "");
    EXPECT_EQ(int4_mm::planted_bug_cannot_show(fp16, b), "");
  }
  EXPECT_EQ(int4_mm::planted_bug_cannot_show(fp16, PlantedBug::fp16_as_bf16), "");
  EXPECT_NE(int4_mm::planted_bug_cannot_show(bf16, PlantedBug::fp16_as_bf16), "");  // bf16 already
  EXPECT_NE(
      int4_mm::planted_bug_cannot_show(Problem{.m = 1, .n = 8, .k = 64, .group = 64}, PlantedBug::sum_in_dtype_64), "");
}

}  // namespace
}  // namespace opcts
