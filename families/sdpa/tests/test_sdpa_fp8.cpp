// SDPA with fp8 q, k, v or an fp8 KV cache (issue 38's FP8 attention): ids and YAML, the inputs'
// codes and descales, the reference against a naive forward over values dequantized here, host.flash
// under the derived bound, a bound one rounding too tight (P's e4m3 rounding left out) failing it,
// and the planted fp8 bugs caught exactly where they can show.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "app/builtins.hpp"
#include "families/sdpa/bound.hpp"
#include "families/sdpa/detail.hpp"
#include "families/sdpa/host/sdpa_flash.hpp"
#include "families/sdpa/sdpa.hpp"
#include "families/sdpa/tests/test_sdpa_util.hpp"
#include "judge/error_energy.hpp"

namespace opcts {
namespace {

using sdpa::Descale;
using sdpa::Fp8;
using sdpa::Mask;
using sdpatest::expect_caught;
using sdpatest::family;
using sdpatest::inputs_of;
using sdpatest::make;
using sdpatest::parse_error;

sdpa::Problem fp8(sdpa::Problem p, Fp8 tensors, DType format = DType::e4m3fn, Descale d = Descale::per_head) {
  p.fp8 = tensors;
  p.fp8_format = format;
  p.descale = d;
  return p;
}

TEST(SdpaFp8, IdsAndYaml) {
  const auto base = make(DType::bf16, 2, 4, 2, 48, 80, 64, Mask::causal_lower_right);
  const auto qkv = fp8(base, Fp8::qkv);
  EXPECT_EQ(sdpa::problem_id(qkv), "bf16_b2_hq4_hkv2_sq48_sk80_d64_causal_lr_fp8qkvh");
  const auto kv = fp8(base, Fp8::kv, DType::e5m2, Descale::per_tensor);
  EXPECT_EQ(sdpa::problem_id(kv), "bf16_b2_hq4_hkv2_sq48_sk80_d64_causal_lr_fp8kve5m2");
  for (const auto& p :
       {qkv, kv, fp8(base, Fp8::kv, DType::e5m2), fp8(base, Fp8::qkv, DType::e4m3fn, Descale::per_tensor)})
    EXPECT_EQ(sdpa::parse_problem_id(sdpa::problem_id(p)), p) << sdpa::problem_id(p);
  const std::string shape = "{dtype: bf16, heads: 4, seq: 8, head_dim: 64, mask: none, ";
  EXPECT_EQ(sdpa::problem_id(family()
                                 .parse(YAML::Load(shape + "fp8: {tensors: kv, format: e5m2, descale: per_head}}"))
                                 ->as<sdpa::Problem>()),
            "bf16_b1_hq4_hkv4_sq8_sk8_d64_nomask_fp8kve5m2h");
  EXPECT_NE(parse_error(shape + "fp8: {format: e5m2}}").find("missing 'tensors'"), std::string::npos);
  EXPECT_NE(parse_error(shape + "fp8: {tensors: q}}").find("expected qkv or kv"), std::string::npos);
  EXPECT_NE(parse_error(shape + "fp8: {tensors: qkv, format: e4m3fnuz}}").find("e4m3fn or e5m2"), std::string::npos);
  EXPECT_NE(parse_error(shape + "fp8: {tensors: qkv, descale: per_row}}").find("per_tensor or per_head"),
            std::string::npos);
  EXPECT_NE(parse_error(shape + "fp8: {tensors: qkv}, direction: backward}").find("forward only"), std::string::npos);
  EXPECT_NE(
      parse_error("{dtype: fp32, heads: 4, seq: 8, head_dim: 64, mask: none, fp8: {tensors: kv}}").find("bf16 or fp16"),
      std::string::npos);
  EXPECT_THROW(sdpa::parse_problem_id("bf16_b1_hq4_hkv4_sq8_sk8_d64_nomask_fp8kvx"), std::invalid_argument);
  auto out = qkv;
  out.fp8_out = true;
  EXPECT_EQ(sdpa::problem_id(out), "bf16_b2_hq4_hkv2_sq48_sk80_d64_causal_lr_fp8qkvho");
  EXPECT_EQ(sdpa::parse_problem_id(sdpa::problem_id(out)), out);
  EXPECT_NE(parse_error(shape + "fp8: {tensors: qkv, out: e5m2}}").find("expected e4m3fn"), std::string::npos);
}

// The inputs: codes of the format in the fp8 tensors (q in the dtype under kv), and the descales
// of each role and (batch, KV head) as fp8_descale gives them, dyadic so that code·descale is exact.
TEST(SdpaFp8, InputsHoldCodesAndTheirDescales) {
  const auto p = fp8(make(DType::fp16, 2, 4, 2, 5, 7, 16, Mask::none), Fp8::kv, DType::e5m2);
  const TensorMap in = inputs_of(p);
  EXPECT_EQ(in.at("q").dtype(), DType::fp16);
  EXPECT_EQ(in.at("k").dtype(), DType::e5m2);
  EXPECT_EQ(in.at("v").dtype(), DType::e5m2);
  EXPECT_EQ(in.count("q_descale"), 0u);
  ASSERT_EQ(in.at("k_descale").numel(), 4);
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t h = 0; h < 2; ++h) {
      const double k = in.at("k_descale").get(b * 2 + h), v = in.at("v_descale").get(b * 2 + h);
      EXPECT_EQ(k, sdpa::fp8_descale(p, 'k', b, h));
      EXPECT_EQ(v, sdpa::fp8_descale(p, 'v', b, h));
      EXPECT_NE(k, v);                 // each role its own: a swapped descale is a wrong value
      for (const double x : {k, v}) {  // a multiple of 2^-10 below 2^-4: at most 6 significant bits
        EXPECT_EQ(std::ldexp(x, 10), std::floor(std::ldexp(x, 10)));
        EXPECT_LT(std::ldexp(x, 10), 64);
      }
    }
  EXPECT_NE(in.at("k_descale").get(0), in.at("k_descale").get(1));  // per (batch, KV head)
}

// The reference is the attention of the dequantized values: a naive forward over values
// dequantized here (code times the descale of the element's batch entry and KV head) gives its O
// and lse.
TEST(SdpaFp8, ReferenceIsTheAttentionOfTheDequantizedValues) {
  auto bshd = fp8(make(DType::bf16, 2, 6, 3, 9, 13, 8, Mask::causal_lower_right), Fp8::qkv);
  bshd.layout = sdpa::Layout::bshd;
  for (const auto& p :
       {bshd, fp8(make(DType::fp16, 2, 4, 2, 11, 7, 8, Mask::none), Fp8::kv, DType::e5m2, Descale::per_tensor)}) {
    const TensorMap in = inputs_of(p);
    sdpa::Problem plain = p;
    plain.fp8 = Fp8::none;
    TensorMap values;
    const int64_t group = p.heads_q / p.heads_kv;
    for (const char t : {'q', 'k', 'v'}) {
      const HostTensor& codes = in.at(std::string(1, t));
      HostTensor x(DType::fp64, codes.shape());
      const bool q = t == 'q';
      const int64_t heads = q ? p.heads_q : p.heads_kv, seq = q ? p.seq_q : p.seq_k;
      const int64_t dim = t == 'v' ? p.head_dim_v : p.head_dim;
      const bool scaled = !q || p.fp8 == Fp8::qkv;
      for (int64_t b = 0; b < p.batch; ++b)
        for (int64_t h = 0; h < heads; ++h)
          for (int64_t s = 0; s < seq; ++s)
            for (int64_t d = 0; d < dim; ++d) {
              const int64_t e = sdpatest::at(p, heads, seq, dim, b, h, s, d);
              const int64_t hk = q ? h / group : h;
              const double f = !scaled ? 1.0
                                       : in.at(std::string(1, t) + "_descale")
                                             .get(p.descale == Descale::per_head ? b * p.heads_kv + hk : 0);
              x.set(e, codes.get(e) * f);
            }
      values.emplace(std::string(1, t), std::move(x));
    }
    const sdpatest::Naive n = sdpatest::naive_forward(plain, values);
    const References r = family().reference(p, in);
    for (size_t e = 0; e < n.o.size(); ++e) ASSERT_NEAR(r.exact.at("O")[e], n.o[e], 1e-12) << sdpa::problem_id(p);
    for (size_t e = 0; e < n.lse.size(); ++e) {
      if (std::isinf(n.lse[e])) EXPECT_EQ(r.exact.at("lse")[e], n.lse[e]);
      else ASSERT_NEAR(r.exact.at("lse")[e], n.lse[e], 1e-12) << sdpa::problem_id(p);
    }
  }
}

// host.flash passes under the bound, and fails a bound that takes P at bf16's unit under fp8 qkv —
// one rounding too tight: the e4m3 rounding of P is the term the bound must carry. Under an fp8 KV
// cache the dtype's P is the model, and host.flash passes it.
TEST(SdpaFp8, ABoundWithoutPsE4m3RoundingFailsACorrectHostFlash) {
  const ArchInfo host{"host", "host"};
  for (const DType t : {DType::bf16, DType::fp16}) {
    const auto p = fp8(make(t, 2, 4, 2, 48, 200, 64, Mask::causal_lower_right), Fp8::qkv);
    const TensorMap in = inputs_of(p);
    const TensorMap out = builtin_registry().impl("host.flash")->run(p, in, RunContext{&host, -1});
    const auto fair = sdpatest::compare_all("host.flash", p, family().reference(p, in), out);
    EXPECT_EQ(fair.at("O").mismatches, 0) << sdpa::problem_id(p) << " err " << fair.at("O").max_abs_err;
    EXPECT_EQ(fair.at("lse").mismatches, 0) << sdpa::problem_id(p);
    const auto tight = sdpatest::compare_all("host.flash", p, sdpa::reference(p, in, t), out);
    EXPECT_GT(tight.at("O").mismatches, 0) << sdpa::problem_id(p) << ": a bf16 P's bound passed e4m3 P";
    const auto kv = fp8(make(t, 2, 8, 2, 26, 300, 64, Mask::causal_lower_right), Fp8::kv);
    EXPECT_EQ(sdpatest::mismatches_of("host.flash", kv), 0) << sdpa::problem_id(kv);
  }
}

// cuDNN's fp8 graph rounds P = e/l times scale_s to Q's fp8 type (bound.hpp, kFp8PNormalised).
// host.normalised_p_fp8, that arithmetic on the host, e4m3fn and e5m2 on rows of 4096 keys,
// passes the rule cuda.cudnn and it declare under fp8 qkv and the normalised model's derived bound
// per element, and fails a bound one rounding tighter (P at bf16's unit): the rounding is the
// term. Its planted twin, P cast without scale_s, fails under e4m3fn, where P ≈ 2^-12 falls in the
// subnormal range; under e5m2, normal down to 2^-14, most such P round alike either way, so the
// plant is asserted under e4m3fn only (docs/status/host.md (q) lists where it passes, and why).
TEST(SdpaFp8, HostNormalisedPPassesCudnnsModelAndFailsOneRoundingTighter) {
  const ArchInfo host{"host", "host"};
  for (const DType format : {DType::e4m3fn, DType::e5m2}) {
    const auto p = fp8(make(DType::bf16, 1, 2, 1, 64, 4096, 64, Mask::none), Fp8::qkv, format, Descale::per_tensor);
    const TensorMap in = inputs_of(p);
    const TensorMap out = builtin_registry().impl("host.normalised_p_fp8")->run(p, in, RunContext{&host, -1});
    const References r = family().reference(p, in);
    ASSERT_EQ(r.bound.count("O@fp8_p_normalised"), 1u);
    for (const char* impl : {"host.normalised_p_fp8", "cuda.cudnn"}) {
      const auto stats = sdpatest::compare_all(impl, p, r, out);
      EXPECT_EQ(stats.at("O").mismatches, 0)
          << impl << " " << sdpa::problem_id(p) << " err " << stats.at("O").max_abs_err;
      EXPECT_EQ(stats.at("lse").mismatches, 0) << impl << " " << sdpa::problem_id(p);
    }
    // Per element against the derived bound alone (the judge also allows twice the same-precision
    // reference's error): the error beside the output's rounding, |got − want| − spacing/2.
    const std::vector<double>&want = r.exact.at("O"), &normalised = r.bound.at("O@fp8_p_normalised");
    for (int64_t e = 0; e < out.at("O").numel(); ++e)
      ASSERT_LE(std::fabs(out.at("O").get(e) - want[e]) - spacing_at(DType::bf16, std::fabs(want[e])) / 2,
                normalised[e])
          << sdpa::problem_id(p) << " element " << e;
    const auto tight = sdpatest::compare_all("host.flash", p, sdpa::reference(p, in, DType::bf16), out);
    EXPECT_GT(tight.at("O").mismatches, 0) << sdpa::problem_id(p) << ": a bf16 P's bound passed fp8 P";
    if (format == DType::e4m3fn) sdpatest::expect_planted_caught("host.normalised_p_fp8_unscaled", p);
  }
}

// The emulation takes every dense fp8-q, k, v forward (the model's domain, wider than the cuDNN
// graph's: per-head descales and a bottom-right mask here), and SKIPs the rest with the reason;
// its plant SKIPs rows of one key without a sink (P = 1 either way) and takes one with a sink
// (P = 1/(1 + e^(sink − s)) < 1).
TEST(SdpaFp8, HostNormalisedPTakesDenseFp8QkvForwards) {
  const ArchInfo host{"host", "host"};
  const Impl &impl = *builtin_registry().impl("host.normalised_p_fp8"),
             &plant = *builtin_registry().impl("host.normalised_p_fp8_unscaled");
  EXPECT_FALSE(impl.planted());
  EXPECT_TRUE(plant.planted());
  const auto base = make(DType::bf16, 2, 4, 2, 26, 80, 64, Mask::causal_lower_right);
  EXPECT_TRUE(impl.supports(fp8(base, Fp8::qkv), host).ok);
  EXPECT_NE(impl.supports(base, host).reason.find("fp8 q, k and v"), std::string::npos);
  EXPECT_NE(impl.supports(fp8(base, Fp8::kv), host).reason.find("fp8 q, k and v"), std::string::npos);
  auto packed = fp8(make(DType::bf16, 4, 4, 2, 20, 40, 64, Mask::causal_lower_right), Fp8::qkv);
  packed.layout = sdpa::Layout::varlen;
  packed.seqlens_q = {1, 20, 0, 12}, packed.seqlens_k = {33, 40, 9, 6};
  EXPECT_NE(impl.supports(packed, host).reason.find("dense layouts"), std::string::npos);
  EXPECT_THROW(host_sdpa::flash_run_normalised_p(packed, inputs_of(packed), host_sdpa::Plant::none), InvalidArgument);
  const auto one = fp8(make(DType::bf16, 1, 4, 2, 1, 1, 64, Mask::none), Fp8::qkv);
  EXPECT_FALSE(plant.supports(one, host).ok);
  auto sink = one;
  sink.sinks = true;
  EXPECT_TRUE(plant.supports(sink, host).ok);
  std::string why;
  EXPECT_EQ(sdpatest::mismatches_of("host.normalised_p_fp8", sink, &why), 0) << why;
}

// Rounding::bound_scaled, the normalised model's per-P bound in e's units, against the format's
// own rounding of e·c (c = 2^8/l) over a sweep of e and row sums l: never exceeded, attained
// within 10% in the subnormal floor, and the running-max bound (floor least, unscaled) is exceeded
// there once l > 2^8: the floor must grow with l, as the model says.
TEST(SdpaFp8, TheNormalisedPsRoundingBoundHoldsAndTheFloorGrowsWithTheRowSum) {
  for (const DType format : {DType::e4m3fn, DType::e5m2}) {
    const sdpa::detail::Rounding<double> r(format);
    for (const double l : {1.0, 3.0, 100.0, 4096.0, 1e5}) {
      const double c = sdpa::kFp8ScaleS / l;
      double floor_ratio = 0, running_max_over = 0;
      for (double e = 1; e > 1e-14; e *= 0.9973) {
        const double err = std::fabs(round_to(format, e * c) / c - e), b = r.bound_scaled(e, c);
        ASSERT_LE(err, b * (1 + 1e-12)) << name(format) << " l " << l << " e " << e;
        if (e * c < dtype_info(format).min_normal) floor_ratio = std::max(floor_ratio, err / b);
        running_max_over = std::max(running_max_over, err / r.bound(e));
      }
      EXPECT_GT(floor_ratio, 0.9) << name(format) << " l " << l;
      if (l > sdpa::kFp8ScaleS) EXPECT_GT(running_max_over, 1) << name(format) << " l " << l;
    }
  }
}

// An fp8 output holds e4m3fn codes of O·o_scale: the references are the dtype output's times the
// scale, host.flash passes under them (e4m3fn's half spacing is the output's rounding)
// and a scale taken as a descale (O / o_scale) fails.
TEST(SdpaFp8, AnFp8OutputIsOTimesItsScale) {
  auto p = fp8(make(DType::bf16, 2, 4, 2, 26, 80, 64, Mask::causal_lower_right), Fp8::qkv);
  auto out = p;
  out.fp8_out = true;
  const TensorMap in = inputs_of(out);
  ASSERT_EQ(in.at("o_scale").get(0), sdpa::kFp8OutScale);
  EXPECT_EQ(family().outputs(out)[0].dtype, DType::e4m3fn);
  const References r = family().reference(out, in), plain = family().reference(p, in);
  for (size_t e = 0; e < r.exact.at("O").size(); ++e)
    ASSERT_EQ(r.exact.at("O")[e], plain.exact.at("O")[e] * sdpa::kFp8OutScale);
  EXPECT_EQ(r.exact.at("lse"), plain.exact.at("lse"));
  EXPECT_EQ(r.energy.count("O@flash_fp32_rn"), 1u);  // kept, at e4m3fn's spacing (below)
  std::string why;
  EXPECT_EQ(sdpatest::mismatches_of("host.flash", out, &why), 0) << why;
  expect_caught("host.flash_fp8_out_scale_inverted", out);
  EXPECT_FALSE(builtin_registry().impl("host.flash_fp8_out_scale_inverted")->supports(p, ArchInfo{"host", "host"}).ok);
  auto packed = out;
  packed.layout = sdpa::Layout::varlen;
  packed.seqlens_q = {26, 26}, packed.seqlens_k = {80, 80};
  EXPECT_THROW(packed.validate(), std::invalid_argument);
}

// An o_scale the values have outgrown (the catalog's fp8_out_saturating: 400 under per-head
// descales, 4096 and 1024 under per-tensor): O·o_scale passes 448 on some elements, which
// host.flash stores as ±448 (satfinite) and the judge takes as right; an output that overflows to
// NaN where 448 is sure, or stops one code short (416), fails there. O's energy check keeps the
// other elements. The id carries the scale (o400); the default's digits are refused, so that one
// problem has one id.
TEST(SdpaFp8, ASaturatingFp8OutputHoldsTheLargestFiniteValue) {
  auto p = fp8(make(DType::bf16, 2, 4, 2, 26, 80, 64, Mask::causal_lower_right), Fp8::qkv);
  p.fp8_out = true;
  p.fp8_out_scale = 400;
  EXPECT_EQ(sdpa::problem_id(p), "bf16_b2_hq4_hkv2_sq26_sk80_d64_causal_lr_fp8qkvho400");
  EXPECT_EQ(sdpa::parse_problem_id(sdpa::problem_id(p)), p);
  EXPECT_THROW(sdpa::parse_problem_id("bf16_b2_hq4_hkv2_sq26_sk80_d64_causal_lr_fp8qkvho40"), std::invalid_argument);
  EXPECT_THROW(sdpa::parse_problem_id("bf16_b2_hq4_hkv2_sq26_sk80_d64_causal_lr_fp8qkvho0400"), std::invalid_argument);
  const std::string shape = "{dtype: bf16, heads: 4, seq: 8, head_dim: 64, mask: none, ";
  EXPECT_NE(parse_error(shape + "fp8: {tensors: qkv, out_scale: 400}}").find("out: e4m3fn"), std::string::npos);
  EXPECT_NE(parse_error(shape + "fp8: {tensors: qkv, out: e4m3fn, out_scale: -3}}").find("positive integer"),
            std::string::npos);
  EXPECT_EQ(inputs_of(p).at("o_scale").get(0), 400.0);
  // The catalog's fp8_out_saturating scales: per-head at 400, per-tensor (|O| about 0.1) at 4096
  // and 1024; each fill must put some of O past 448 by more than any accumulation error.
  auto per_tensor = p;
  per_tensor.descale = Descale::per_tensor;
  for (auto [q, scale] : {std::pair{p, 400}, std::pair{per_tensor, 4096}, std::pair{per_tensor, 1024}}) {
    q.fp8_out_scale = scale;
    const TensorMap in = inputs_of(q);
    const References r = family().reference(q, in);
    // Surely saturated: past 448 by more than the element's allowed accumulation error (the
    // judge's: the larger of twice the same-precision error over its row and its bound), where
    // only ±448 is right.
    const double max = dtype_info(DType::e4m3fn).max_finite;
    const std::vector<double>&x = r.exact.at("O"), &lp = r.lowp.at("O"), &b = r.bound.at("O");
    const auto row = static_cast<size_t>(family().outputs(q)[0].row);
    std::vector<char> sure(x.size(), 0);
    int64_t past = 0;
    for (size_t r0 = 0; r0 < x.size(); r0 += row) {
      double row_lp = 0;
      for (size_t i = r0; i < std::min(x.size(), r0 + row); ++i) row_lp = std::max(row_lp, std::fabs(lp[i] - x[i]));
      for (size_t i = r0; i < std::min(x.size(), r0 + row); ++i)
        past += sure[i] = std::fabs(x[i]) - max > std::max(2 * row_lp, b[i]);
    }
    ASSERT_GT(past, 0) << sdpa::problem_id(q) << ": the fill no longer saturates";
    // The energy check stays, without the elements that may saturate (their weight 0).
    const std::vector<double>& w = r.energy.at("O@flash_fp32_rn").weight;
    ASSERT_EQ(w.size(), x.size());
    for (size_t i = 0; i < x.size(); ++i)
      if (sure[i]) ASSERT_EQ(w[i], 0.0) << sdpa::problem_id(q) << " element " << i;
    EXPECT_GT(std::count_if(w.begin(), w.end(), [](double v) { return v > 0; }), 0) << sdpa::problem_id(q);
    std::string why;
    EXPECT_EQ(sdpatest::mismatches_of("host.flash", q, &why), 0) << sdpa::problem_id(q) << ": " << why;
    const ArchInfo host{"host", "host"};
    const TensorMap out = builtin_registry().impl("host.flash")->run(q, in, RunContext{&host, -1});
    for (const double stored : {std::nan(""), 416.0}) {
      TensorMap bad = out;
      HostTensor& o = bad.at("O");
      for (int64_t e = 0; e < o.numel(); ++e)
        if (sure[e]) o.set(e, std::copysign(stored, o.get(e)));
      EXPECT_EQ(sdpatest::compare_all("host.flash", q, r, bad).at("O").mismatches, past)
          << sdpa::problem_id(q) << " " << stored;
    }
    expect_caught("host.flash_fp8_out_scale_inverted", q);
    expect_caught("host.flash_fp8_out_nonsaturating", q);  // NaN where 448 is due
  }
  // At the default scale no O·o_scale passes 448: the nonsaturating store changes no byte.
  auto usual = p;
  usual.fp8_out_scale = static_cast<int64_t>(sdpa::kFp8OutScale);
  EXPECT_EQ(sdpatest::mismatches_of("host.flash_fp8_out_nonsaturating", usual), 0);
}

// Each fp8 plant fails where it runs, and SKIPs exactly where it cannot show: no fp8 tensor, one
// descale for every head (head0), P already e4m3 under fp8 qkv or rows of one key (p_in_e4m3).
TEST(SdpaFp8, PlantedBugsAreCaughtWhereTheyShow) {
  const ArchInfo host{"host", "host"};
  const auto base = make(DType::bf16, 2, 4, 2, 26, 80, 64, Mask::causal_lower_right);
  for (const Fp8 t : {Fp8::qkv, Fp8::kv}) {
    const auto p = fp8(base, t);
    expect_caught("host.flash_fp8_descale_twice", p);
    expect_caught("host.flash_fp8_descale_swapped", p);
    expect_caught("host.flash_fp8_descale_head0", p);
    const auto one = fp8(make(DType::fp16, 1, 4, 2, 1, 1, 64, Mask::none), t, DType::e5m2, Descale::per_tensor);
    expect_caught("host.flash_fp8_descale_twice", one);  // one key: lse = s moves
    expect_caught("host.flash_fp8_descale_swapped", one);
    EXPECT_FALSE(builtin_registry().impl("host.flash_fp8_descale_head0")->supports(one, host).ok);
  }
  expect_caught("host.flash_fp8_p_in_e4m3", fp8(base, Fp8::kv));
  expect_caught("host.flash_fp8_p_in_e4m3", fp8(make(DType::fp16, 2, 8, 2, 1, 300, 64, Mask::none), Fp8::kv));
  const Impl& p_e4m3 = *builtin_registry().impl("host.flash_fp8_p_in_e4m3");
  EXPECT_FALSE(p_e4m3.supports(fp8(base, Fp8::qkv), host).ok);
  EXPECT_FALSE(p_e4m3.supports(fp8(make(DType::bf16, 1, 4, 2, 1, 1, 64, Mask::none), Fp8::kv), host).ok);
  for (const char* impl : {"host.flash_fp8_descale_twice", "host.flash_fp8_descale_swapped",
                           "host.flash_fp8_descale_head0", "host.flash_fp8_p_in_e4m3"})
    EXPECT_FALSE(builtin_registry().impl(impl)->supports(base, host).ok) << impl;
}

// Packed batches: each sequence gets its own row of per-(sequence, KV head) descales, in the
// references and host.flash alike (varlen with fp8 q, k, v; a paged fp8 KV cache over three
// split-KV splits); the plants show per sequence.
TEST(SdpaFp8, PackedBatchesPassAndThePlantsShowPerSequence) {
  auto varlen = fp8(make(DType::bf16, 4, 4, 2, 20, 40, 64, Mask::causal_lower_right), Fp8::qkv);
  varlen.layout = sdpa::Layout::varlen;
  varlen.seqlens_q = {1, 20, 0, 12}, varlen.seqlens_k = {33, 40, 9, 6};
  varlen.pad_k = 3;
  auto paged = fp8(make(DType::fp16, 3, 8, 2, 4, 600, 64, Mask::causal_lower_right), Fp8::kv);
  paged.layout = sdpa::Layout::paged;
  paged.seqlens_q = {1, 1, 4}, paged.seqlens_k = {600, 40, 9};
  paged.page_size = 16;
  for (const auto& p : {varlen, paged}) {
    std::string why;
    EXPECT_EQ(sdpatest::mismatches_of("host.flash", p, &why), 0) << sdpa::problem_id(p) << ": " << why;
    sdpatest::expect_planted_caught("host.flash_fp8_descale_head0", p);
    sdpatest::expect_planted_caught("host.flash_fp8_descale_swapped", p);
  }
  sdpatest::expect_planted_caught("host.flash_fp8_p_in_e4m3", paged);
  // One KV head a sequence: entry [0, 0] misread is sequence 0's descale read by sequence 1, which
  // the packed runners once hid by handing each sequence its own row (the plant then had nothing
  // to misread and SKIPped). A second sequence with no key left is all the plant cannot change.
  for (auto p : {varlen, paged}) {
    p.heads_q = 2, p.heads_kv = 1;
    sdpatest::expect_planted_caught("host.flash_fp8_descale_head0", p);
    p.batch = 2, p.seqlens_q = {1, 3}, p.seqlens_k = {9, 0};
    p.pad_k = 0;
    std::string why;
    EXPECT_EQ(sdpatest::mismatches_of("host.flash", p, &why), 0) << sdpa::problem_id(p) << ": " << why;
    EXPECT_FALSE(builtin_registry().impl("host.flash_fp8_descale_head0")->supports(p, ArchInfo{"host", "host"}).ok)
        << sdpa::problem_id(p);
  }
}

// An fp8 output keeps O's error-energy check, its output rounding at e4m3fn's half spacing and the
// form scaled by o_scale (reference.cpp): host.flash passes it, and O·(1 + β) before the store —
// a relative bias — fails it. Measured (bf16, Sq 26, Sk 80, D 64): at β = 2^-5 every element
// passes its bound (at most 0.96 of it) while the energy check fails (1.02 of its limit); at 2^-4
// both fail. On larger problems and under an fp8 KV cache the per-element bounds see a bias first
// (at 2^-7 there), so the check adds what it adds only on small outputs: kept, it costs nothing.
TEST(SdpaFp8, AnFp8OutputsEnergyCheckSeesABiasItsBoundsPass) {
  auto out = fp8(make(DType::bf16, 2, 4, 2, 26, 80, 64, Mask::causal_lower_right), Fp8::qkv);
  out.fp8_out = true;
  const TensorMap in = inputs_of(out);
  const References r = family().reference(out, in);
  const std::string key = "O@flash_fp32";
  ASSERT_TRUE(r.energy.count(key));
  const TensorMap exact = host_sdpa::flash_run(out, in, sdpa::PlantedBug::none, true);  // O·o_scale, unrounded
  const auto biased = [&](double beta) {
    TensorMap got = builtin_registry().impl("host.flash")->run(out, in, RunContext{nullptr, -1});
    HostTensor& o = got.at("O");
    for (int64_t i = 0; i < o.numel(); ++i) o.set(i, exact.at("O").get(i) * (1 + beta));  // set() rounds to e4m3fn
    return std::pair{sdpatest::compare_all("host.flash", out, r, got).at("O").mismatches,
                     check_error_energy("O", o, r.exact.at("O"), r.energy.at(key)).ratio()};
  };
  const auto [correct_bad, correct_energy] = biased(0);
  EXPECT_EQ(correct_bad, 0);
  EXPECT_LT(correct_energy, 0.8);
  const auto [small_bad, small_energy] = biased(0x1p-5);
  EXPECT_EQ(small_bad, 0) << "the bounds pass a 2^-5 bias";
  EXPECT_GT(small_energy, 1) << "the energy check sees it";
  const auto [large_bad, large_energy] = biased(0x1p-4);
  EXPECT_GT(large_bad, 0);
  EXPECT_GT(large_energy, 1);
}

}  // namespace
}  // namespace opcts
