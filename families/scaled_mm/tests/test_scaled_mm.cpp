// The scaled_mm family: ids, the reference on a hand-checked case, exact fills that fit 14-bit adders, the
// host emulations (fp32 and Hopper's 14-bit accumulator) against their models on the smoke and default tiers,
// negative cases, and each planted bug failing where it is probed.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "app/builtins.hpp"
#include "core/errors.hpp"
#include "core/family.hpp"
#include "families/scaled_mm/scaled_mm.hpp"
#include "judge/compare.hpp"
#include "judge/tolerance.hpp"
#include "runner/catalog.hpp"
#include "tests/test_family_util.hpp"
#include "tests/test_util.hpp"

namespace opcts {
namespace {

const Family& family() { return *builtin_registry().family("scaled_mm"); }

std::vector<CatalogEntry> catalog() {
  return load_catalogs(builtin_registry(), {(testutil::cases_dir() / "scaled_mm.yaml").string()});
}

const ArchInfo& host() { return testutil::host_arch(); }

// The tolerance a case gets on the host device: cases/tolerances.yaml and manifests/host.yaml,
// as the runner resolves it.
Tolerance tolerance_of(const Impl& impl, const scaled_mm::Problem& p) {
  static const ToleranceTable table = ToleranceTable::load((testutil::cases_dir() / "tolerances.yaml").string());
  static const Manifest manifest = Manifest::load((testutil::cases_dir() / "manifests" / "host.yaml").string());
  return table.resolve("scaled_mm", "d", p.out, std::string(impl.name()), "host", case_id(family(), impl, p),
                       &manifest);
}

struct Judged {
  OutputStats stats;
  bool failed() const { return stats.mismatches > 0 || stats.biased(); }
};

Judged judge(const Impl& impl, const scaled_mm::Problem& p, const TensorMap& in, const References& ref,
             std::string_view tactic = {}) {
  RunContext ctx{&host(), -1};
  ctx.tactic = tactic;
  const TensorMap out = impl.run(p, in, ctx);
  std::vector<WorstElement> worst;
  return {compare_output("d", out.at("d"), {.want = ref.exact.at("d"), .reduction = &ref.reduction.at("d")},
                         tolerance_of(impl, p), worst)};
}

// Every catalog id round-trips in tests/test_family_kit.cpp (KitRoundTrip); here, a spelling.
TEST(ScaledMmId, SpellsTheOptionalTokens) {
  ASSERT_GE(catalog().size(), 300u);
  const scaled_mm::Problem p{.m = 128, .n = 256, .k = 512, .bias = true, .fill = scaled_mm::Fill::exact};
  EXPECT_EQ(scaled_mm::problem_id(p), "tensorwise_e4m3fn_e4m3fn_tn_m128_n256_k512_out_bf16_bias_exact");
}

TEST(ScaledMmId, ValidationNamesTheRule) {
  testutil::expect_invalid([](const std::string& id) { scaled_mm::parse_problem_id(id); },
                           {
                               {"tensorwise_e4m3fn_e4m3fn_tn_m1_n1_k40_out_bf16_random", "expect_error: K"},
                               {"mxfp4_e4m3fn_e4m3fn_tn_m1_n1_k64_floor_out_bf16_random", "e2m1fn"},
                               {"tensorwise_e4m3fn_e4m3fn_tn_m1_n1_k16_out_fp32_bias_random", "bias"},
                               {"tensorwise_e4m3fn_e4m3fn_xy_m1_n1_k16_out_bf16_random", "xy"},
                               {"tensorwise_e4m3fn_e4m3fn_tn_m1_n1_k16_out_bf16_random_expect_K", "valid"},
                           });
}

TEST(ScaledMmReference, HandCheckedTensorwise) {
  // A = [[1, 2]] ... padded to K = 16 with zeros; scales 0.5 and 4: D = 0.5·4·(1·3 + 2·(-1)) = 2.
  scaled_mm::Problem p;
  p.m = 1;
  p.n = 1;
  p.k = 16;
  p.out = DType::fp32;
  TensorMap in;
  HostTensor a(DType::e4m3fn, {1, 16}), b(DType::e4m3fn, {1, 16});
  a.set(0, 1);
  a.set(1, 2);
  b.set(0, 3);
  b.set(1, -1);
  HostTensor as(DType::fp32, {1, 1}), bs(DType::fp32, {1, 1});
  as.set(0, 0.5);
  bs.set(0, 4);
  in.emplace("a", a);
  in.emplace("b", b);
  in.emplace("a_scale", as);
  in.emplace("b_scale", bs);
  const References r = scaled_mm::reference(p, in);
  EXPECT_EQ(r.exact.at("d").at(0), 2.0);
  // Terms 0.5·4·(1·3) = 6 and 0.5·4·(2·(-1)) = -4: S = 10, Q = 52, X = |6 - 4| = 2.
  const ReductionStats& st = r.reduction.at("d");
  EXPECT_EQ(st.terms, 16);
  EXPECT_EQ(st.abs_sum.at(0), 10.0);
  EXPECT_EQ(st.sq_sum.at(0), 52.0);
  EXPECT_EQ(st.magnitude.at(0), 2.0);
  EXPECT_TRUE(st.zero_mean);
  EXPECT_EQ(st.exact_term_bits, -1);  // a random fill (as far as the problem says)
  for (const char* impl : {"host.emulated", "host.emulated_hopper"}) {
    const TensorMap out = builtin_registry().impl(impl)->run(p, in, RunContext{&host(), -1});
    EXPECT_EQ(out.at("d").get(0), 2.0) << impl;
  }
}

// The problems the emulations are checked on here: every smoke problem and the default tier's
// with up to 2^20 operand elements (its larger ones — decode against weights of 4096 × 14336,
// fast_accum at K = 4096 — take seconds per impl: `opcts run --arch host --tier default` runs them).
bool checked_here(const CatalogEntry& e) {
  const auto& p = (*e.problem).as<scaled_mm::Problem>();
  return e.tier == Tier::smoke || (e.tier == Tier::default_ && (p.m + p.n) * p.k <= (int64_t{1} << 20));
}

TEST(ScaledMmReference, ExactFillsFit14BitAddersAndEmulationsMatchBitForBit) {
  const AccumulatorModel fp32, hopper{14, AccRounding::truncate, 128}, fast{14, AccRounding::truncate, 0},
      too_narrow{13, AccRounding::truncate, 128};
  int n = 0, narrow_inexact = 0;
  for (const auto& e : catalog()) {
    const auto& p = (*e.problem).as<scaled_mm::Problem>();
    if (e.tier != Tier::smoke || p.fill != scaled_mm::Fill::exact || !p.expect_error.empty()) continue;
    const TensorMap in = family().make_inputs(p, case_seed(family(), p));
    const References ref = family().reference(p, in);
    const ReductionStats& st = ref.reduction.at("d");
    ASSERT_GE(st.exact_term_bits, 0) << e.problem_id;
    EXPECT_TRUE(accumulation_bound(fp32, st, 1e-12).exact) << e.problem_id;
    EXPECT_TRUE(accumulation_bound(p.fast_accum ? fast : hopper, st, 1e-12).exact) << e.problem_id;
    narrow_inexact += !accumulation_bound(too_narrow, st, 1e-12).exact;  // the check can say no
    for (const char* name : {"host.emulated", "host.emulated_hopper"}) {
      const Impl* impl = builtin_registry().impl(name);
      if (!impl->supports(p, host()).ok) continue;
      // Under the impl's own model E = 0: each element's bound is the rounding of the exact x
      // itself, |RN(x) − x| (the result must be RN(x)), and the impl meets it.
      const OutputStats s = judge(*impl, p, in, ref).stats;
      EXPECT_EQ(s.mismatches, 0) << name << " " << e.problem_id;
      EXPECT_LE(s.max_abs_err, s.bound) << name << " " << e.problem_id;
    }
    ++n;
  }
  EXPECT_GE(n, 25);
  EXPECT_GT(narrow_inexact, 0);
}

// Every correct emulation passes (per element and the bias check) and, with `planted`, every
// planted one fails on each problem of the tier it takes, under the model the tables give it,
// except where it derives a blind spot of the bound (Impl::blind_spot), where it may pass; each
// planted impl takes at least a few smoke problems. The largest error ÷ bound of the correct
// ones and the planted counts are printed.
void emulations_on_tier(Tier tier, bool planted) {
  std::map<std::string, int> ran;
  int caught = 0, missed = 0, hidden = 0, claimed = 0;
  std::map<std::string, std::vector<double>> ratios;
  for (const auto& e : catalog()) {
    const auto& p = (*e.problem).as<scaled_mm::Problem>();
    if (e.tier != tier || !checked_here(e) || !p.expect_error.empty()) continue;
    const TensorMap in = family().make_inputs(p, case_seed(family(), p));
    const References ref = family().reference(p, in);
    for (const Impl* impl : builtin_registry().impls_of("scaled_mm")) {
      if (impl->backend() != "host" || (impl->planted() && !planted) || !impl->supports(p, host()).ok) continue;
      // Within every bound on a plain run: --invariance's and --capture's (tests/test_invariance.cpp,
      // tests/test_capture.cpp).
      if (impl->bug_needs_invariance() || impl->bug_needs_capture()) continue;
      // Each tactic is a case of its own (Impl::tactics; one without a tactic where it lists none).
      std::vector<std::string> tactics = impl->tactics(p);
      if (tactics.empty()) tactics.emplace_back();
      for (const std::string& tactic : tactics) {
        const Judged j = judge(*impl, p, in, ref, tactic);
        const std::string name = std::string(impl->name()) + (tactic.empty() ? "" : "/" + tactic);
        ++ran[std::string(impl->name())];
        if (impl->planted()) {
          // Caught everywhere but where the plant derives why the bound may not see its bug.
          const std::string blind = impl->blind_spot(p, CaseEvidence{in, ref, {}});
          if (blind.empty()) EXPECT_TRUE(j.failed()) << name << " passed " << e.problem_id;
          ++(j.failed() ? caught : blind.empty() ? missed : hidden);
          claimed += !blind.empty();
        } else {
          EXPECT_FALSE(j.failed()) << name << " failed " << e.problem_id << ": " << j.stats.mismatches
                                   << " mismatches, max err/bound " << j.stats.max_ratio << ", slope " << j.stats.slope
                                   << " in [" << j.stats.slope_lo << ", " << j.stats.slope_hi << "]";
          if (j.stats.bound > 0) ratios[std::string(impl->name())].push_back(j.stats.max_ratio);
        }
      }
    }
  }
  for (const Impl* impl : builtin_registry().impls_of("scaled_mm"))
    if (impl->backend() == "host" && impl->planted() && planted && !impl->bug_needs_invariance() &&
        !impl->bug_needs_capture())
      EXPECT_GE(ran[std::string(impl->name())], 2) << impl->name() << " ran too few smoke problems";
  for (auto& [name, r] : ratios) {
    std::sort(r.begin(), r.end());
    std::printf("%s on %s: %zu bounded cases, error/bound median %.3g, max %.3g\n", name.c_str(),
                std::string(to_string(tier)).c_str(), r.size(), r[r.size() / 2], r.back());
  }
  EXPECT_GE(ran["host.emulated_hopper"], 20);
  if (planted)
    std::printf("planted: %d caught, %d passed in a derived blind spot, %d missed; %d blind spots claimed\n", caught,
                hidden, missed, claimed);
  EXPECT_EQ(missed, 0);
  // The blind spots come from the planted impls' own derivations (planted.cpp), so a derivation
  // that claimed one everywhere would make every pass above look excused. The counts are held
  // here instead: on the smoke tier 76 of the planted runs claim one and 34 of those pass (the
  // bias check's band on few or saturating e4m3fn results, row 0 doubled under a rowwise recipe,
  // the FAST_ACCUM step's share: docs/status/host.md, 2026-12-06 (h)). More claims, or more passes
  // in them, must be argued for by changing these numbers.
  if (planted && tier == Tier::smoke) {
    EXPECT_LE(claimed, 76);
    EXPECT_LE(hidden, 34);
  }
}

TEST(ScaledMmEmulated, SmokeTierCorrectPassPlantedFail) { emulations_on_tier(Tier::smoke, true); }
// The planted impls on the default tier: `opcts run --arch host --tier default --include-planted
// --filter 'scaled_mm.host_*'` (minutes on a 16-core host).
TEST(ScaledMmEmulated, DefaultTierUpTo2To20OperandElementsCorrectPass) { emulations_on_tier(Tier::default_, false); }

TEST(ScaledMmNegative, EveryNegativeCaseRaisesTheNamedArgument) {
  for (const char* name : {"host.emulated", "host.emulated_hopper"})
    testutil::expect_negative_cases_refused(family(), *builtin_registry().impl(name), catalog(), 10);
}

// The planted bugs the issue names, each caught by the bound or the bias check on a problem
// made for it (model-shape K = 4096, random fill), under Hopper's model.
TEST(ScaledMmPlanted, HopperBugsCaughtAtModelK) {
  scaled_mm::Problem p;
  p.m = 64;
  p.n = 128;
  p.k = 4096;
  p.recipe = scaled_mm::Recipe::blockwise_1x128_128x128;
  const TensorMap in = family().make_inputs(p, case_seed(family(), p));
  const References ref = family().reference(p, in);
  EXPECT_FALSE(judge(*builtin_registry().impl("host.emulated_hopper"), p, in, ref).failed());
  for (const char* bug : {"block_scale_doubled", "k_block_scale_zeroed", "scale_error", "half_k", "out_times_2",
                          "product_low", "product_high", "drop_last_k_step"}) {
    const Impl* impl = builtin_registry().impl(std::string("host.emulated_hopper_") + bug);
    ASSERT_TRUE(impl && impl->supports(p, host()).ok) << bug;
    const Judged j = judge(*impl, p, in, ref);
    EXPECT_TRUE(j.failed()) << bug;
    std::printf("%s: %lld mismatches, max err/bound %.3g, slope %.3g in [%.3g, %.3g]\n", bug,
                static_cast<long long>(j.stats.mismatches), j.stats.max_ratio, j.stats.slope, j.stats.slope_lo,
                j.stats.slope_hi);
  }
  // The 2^-8 scale errors are aggregate findings: the bias check sees them, on either side.
  for (const char* bug : {"scale_error", "product_low", "product_high"})
    EXPECT_TRUE(judge(*builtin_registry().impl(std::string("host.emulated_hopper_") + bug), p, in, ref).stats.biased())
        << bug;
}

// FAST_ACCUM at model K (the default tier's fast_accum grid: K = 4096, never promoted): the
// emulation passes and a dropped last MMA step (32 K elements) fails, under the model the
// tolerance table gives the emulation there. A product 2^-8 off runs too, though the derived
// band (ĉ = 1, the largest: families/scaled_mm/planted.cpp) reaches past 2^-8 at K = 4096 with a
// bf16 output (D_hi alone is 36·u_p = 4.4e-3 at ĉ = 1): a blind spot, named as such, where a pass
// is allowed (the check sees it anyway: the drift the data gives is smaller than D_hi).
TEST(ScaledMmPlanted, FastAccumBugsCaughtAtModelK) {
  for (const scaled_mm::Recipe r : {scaled_mm::Recipe::tensorwise, scaled_mm::Recipe::rowwise}) {
    scaled_mm::Problem p;
    p.recipe = r;
    p.m = 128;
    p.n = 1024;
    p.k = 4096;
    p.fast_accum = true;
    const TensorMap in = family().make_inputs(p, case_seed(family(), p));
    const References ref = family().reference(p, in);
    const std::string id = scaled_mm::problem_id(p);
    const Judged ok = judge(*builtin_registry().impl("host.emulated_hopper"), p, in, ref);
    EXPECT_FALSE(ok.failed()) << id << ": slope " << ok.stats.slope << " in [" << ok.stats.slope_lo << ", "
                              << ok.stats.slope_hi << "]";
    for (const char* bug : {"drop_last_k_step", "product_low", "product_high"}) {
      const Impl& impl = *builtin_registry().impl(std::string("host.emulated_hopper_") + bug);
      ASSERT_TRUE(impl.supports(p, host()).ok) << bug;  // its bug changes the output: it runs
      // The fill's last step too light to show, or the drift band too wide
      // (families/scaled_mm/planted.cpp): a pass is allowed there.
      const std::string blind = impl.blind_spot(p, CaseEvidence{in, ref, {}});
      if (std::string(bug) == "drop_last_k_step") EXPECT_EQ(!blind.empty(), r == scaled_mm::Recipe::rowwise) << blind;
      else EXPECT_NE(blind.find("the bias check's band reaches"), std::string::npos) << blind;
      const Judged j = judge(impl, p, in, ref);
      std::printf("%s %s: %lld mismatches, slope %.3g in [%.3g, %.3g]%s\n", id.c_str(), bug,
                  static_cast<long long>(j.stats.mismatches), j.stats.slope, j.stats.slope_lo, j.stats.slope_hi,
                  blind.empty() ? "" : " (a derived blind spot)");
      if (blind.empty()) EXPECT_TRUE(j.failed()) << bug << " passed " << id;
    }
  }
}

}  // namespace
}  // namespace opcts
