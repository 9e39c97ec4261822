// Planted scaled_mm bugs: where each can show, and the inputs it hands an impl.
#include "families/scaled_mm/planted.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "numerics/dtype.hpp"
#include "numerics/rng.hpp"

namespace opcts::scaled_mm {

namespace {

// e4m3fnuz's largest finite value (AMD's FNUZ fp8, as on MI300), what saturate_at_240 clamps to.
constexpr double kFnuzMax = 240.0;

// The terms one accumulator chain holds under the sm90 models these planted rows are judged by:
// all of K under FAST_ACCUM, else the promotion interval, 128 (judge/accumulator.cpp).
double chain_terms(const Problem& p) { return static_cast<double>(p.fast_accum ? p.k : std::min<int64_t>(p.k, 128)); }

// Why the bias check cannot be relied on to see a relative error `size` on p's output under
// the sm90 models these planted rows are judged by (14 bits, truncation, promotion every 128 or
// none: judge/accumulator.cpp), or "". Its interval reaches D_hi + ε + λ·σ_β below (and λ·σ_β
// above) the predicted drift, σ_β² = Σ w²·v / (Σ w²)² with v = c_var·Q + s²/4: over E elements
// of Q ≈ w² (and Σ w⁴ ≈ 3·Σ Q² for a near-normal w) σ_β² <= (c_var + 3·2^-2p_out)/E, s/2 <=
// 2^-p_out·|w| for p_out significant output bits and c_var = 2n·u_p², u_p = 2^-13; D_hi <=
// (½c·min(√n, 2^(1−δ)·n) + ½c·√32 + ¼c·√n + ½ + ¼c)·u_p (c = 1/(2 ln 2), δ = 14 − the
// products' bits). The slope of the bug itself varies by σ_β too, so it shows for sure only
// where size >= D_hi + ε + (λ + 3)·σ_β (λ = 7.53 at the rules' false_alarm 1e-12).
//
// A saturating output (e4m3fn) gives the check only the elements inside ±448 (judge/compare.cpp),
// whose w² may be far below their Q when most results saturate: there σ_β comes from the
// problem's own inputs and reference instead (saturating_sigma).
double saturating_sigma(const Problem& p, double c_var);
double doubled_slope(const Problem& p);

std::string slope_too_noisy(const Problem& p, double size) {
  const double c = 1 / (2 * std::log(2.0)), up = 0x1p-13;
  const double n = chain_terms(p);
  const int out_bits = dtype_info(p.out).format.mantissa_bits + 1;
  const int term_bits = dtype_info(p.a_elem).format.mantissa_bits + dtype_info(p.b_elem).format.mantissa_bits + 2;
  const double d_hi = (c / 2 * std::min(std::sqrt(n), std::ldexp(n, 1 - (14 - term_bits))) + c / 2 * std::sqrt(32.0) +
                       c / 4 * std::sqrt(n) + 0.5 + c / 4) *
                      up;
  const double sigma =
      p.out == DType::e4m3fn
          ? saturating_sigma(p, 2 * n * up * up)
          : std::sqrt((2 * n * up * up + 3 * std::ldexp(1.0, -2 * out_bits)) / static_cast<double>(p.m * p.n));
  const double reach = d_hi + 5 * 0x1p-24 + (7.5265 + 3) * sigma;
  if (size >= reach) return "";
  char text[200];
  std::snprintf(text, sizeof text, "%lld elements of %s: the bias check's band reaches %.2g, beyond the %.2g slope",
                static_cast<long long>(p.m * p.n), std::string(name(p.out)).c_str(), reach, size);
  return text;
}

// The results the bias check takes on a saturating output (|x| <= max, not saturated: w and Q),
// from the case's own inputs (its seed, core/family.cpp's case_seed) and reference, computed once
// per problem.
struct Unsaturated {
  std::vector<double> w, q;
  double largest = 0;                  // the largest |result| of all, saturated or not
  double smallest = INFINITY;          // the smallest nonzero |result| (x, before a saturating clamp)
  std::vector<double> row0_w, row0_q;  // row 0's results and Q, saturated or not
};
const Unsaturated& unsaturated(const Problem& p) {
  static std::mutex mutex;
  static std::map<std::string, std::unique_ptr<Unsaturated>> memo;
  const std::string id = problem_id(p);
  const std::lock_guard<std::mutex> lock(mutex);
  std::unique_ptr<Unsaturated>& u = memo[id];
  if (u) return *u;
  const References r = reference(p, make_inputs(p, seed_of("scaled_mm/" + id)));
  const std::vector<double>& w = r.exact.at("d");
  const ReductionStats& st = r.reduction.at("d");
  u = std::make_unique<Unsaturated>();
  for (size_t i = 0; i < w.size(); ++i) {
    u->largest = std::max(u->largest, std::fabs(w[i]));
    // x itself, before a saturating output's clamp (ReductionStats::unsaturated holds it there)
    const double x = st.unsaturated.empty() ? w[i] : st.unsaturated[i];
    if (x != 0) u->smallest = std::min(u->smallest, std::fabs(x));
    if (static_cast<int64_t>(i) < p.n) u->row0_w.push_back(w[i]), u->row0_q.push_back(st.sq_sum[i]);
    if (std::fabs(x) <= dtype_info(p.out).max_finite) u->w.push_back(w[i]), u->q.push_back(st.sq_sum[i]);
  }
  return *u;
}

// σ_β² = Σ w²·v / (Σ w²)² over those elements, v = c_var·Q + s²/4 with s the output's spacing at
// |w|; infinite when none is left.
double saturating_sigma(const Problem& p, double c_var) {
  const Unsaturated& u = unsaturated(p);
  double sw2 = 0, sw2v = 0;
  for (size_t i = 0; i < u.w.size(); ++i) {
    const double s = spacing_at(p.out, std::fabs(u.w[i]));
    sw2 += u.w[i] * u.w[i];
    sw2v += u.w[i] * u.w[i] * (c_var * u.q[i] + s * s / 4);
  }
  return sw2 > 0 ? std::sqrt(sw2v) / sw2 : INFINITY;
}

// The slope the bias check sees on a saturating output when the results `doubled` are doubled:
// Σ_doubled w·(sat(2w) − w) / Σ w², the denominator over the elements it takes (u.w); a result
// past max/2 doubles only up to max, and a saturated one (±max) not at all.
double doubled_slope(const Problem& p, const std::vector<double>& doubled) {
  const Unsaturated& u = unsaturated(p);
  const double max_out = dtype_info(p.out).max_finite;
  double sw2 = 0, swe = 0;
  for (const double w : u.w) sw2 += w * w;
  for (const double w : doubled) swe += w * (std::clamp(2 * w, -max_out, max_out) - w);
  return sw2 > 0 ? swe / sw2 : 0.0;
}
// Every result doubled (out_times_2; a tensorwise recipe's one scale doubled).
double doubled_slope(const Problem& p) { return doubled_slope(p, unsaturated(p).w); }

// Whether every result of an fp16 output is 0 or lies past twice fp16's overflow threshold
// (65,520: the first value that rounds to ±inf), so that a doubled result or one off by 2^-8
// either way is the same ±inf (or 0) as the right one. Decided from the problem's own results: on
// the overflow edge (data shifted up by scale_exp) most results are ±inf, but any left finite
// moves, and there a plant runs.
bool overflows_fp16(const Problem& p) {
  return p.out == DType::fp16 && p.scale_exp > 0 && unsaturated(p).smallest >= 2 * 65520.0;
}

// Whether an e4m3fn output is scaled up (out_scale > 1): most results saturate at ±448 and the
// rest may lie inside the accumulation bound, which is absolute, about (λ·√(2n) + 2.45·√n)·
// 2^-13·os·√Q (n = 128: 0.018·os·√Q, judge/accumulator.cpp), so a doubled result is either
// saturated as the right one is or inside the bound. On the smoke tier's rowwise m64 n64 k256
// os64 problem the bound is near 1,000 at every |want| <= 448 and a doubling changes no verdict.
// out_times_2, and block_scale_doubled under a tensorwise recipe (its one scale doubles every
// result), are decided from the problem's own results (doubled_slope, saturating_sigma): a
// doubling whose slope lies inside the bias check's band there changes no verdict of any element
// either. block_scale_doubled elsewhere (one row's first K block) runs on every such output; under
// a rowwise recipe, whose row scale covers all of K, row0_doubling_hidden derives where the bound
// may not see row 0 doubled. A blockwise first block can move a result by more than the result
// itself (its partial sum may exceed the total), so none is derived there: a pass is a defect.
bool saturates_e4m3(const Problem& p) { return p.out == DType::e4m3fn && p.out_scale > 1; }

// The per-element bound ÷ √Q under the sm90 models these planted rows are judged by (14 bits,
// truncation, promotion every 128 or none): λ·√(2n)·2^-13 + 2.45·√n·2^-13 plus the output's half
// spacing 2^-p_out (judge/accumulator.cpp).
double element_bound(const Problem& p) {
  const double n = chain_terms(p);
  return (7.5265 * std::sqrt(2 * n) + 2.45 * std::sqrt(n)) * 0x1p-13 +
         std::ldexp(1.0, -(dtype_info(p.out).format.mantissa_bits + 1));
}

// Why row 0 doubled (block_scale_doubled under a rowwise recipe: row 0's one scale, over all of
// K) may pass on a scaled-up e4m3fn output, or "": every result of row 0 it moves stays inside
// its per-element bound (|sat(2w) − w| <= element_bound·√Q + half the spacing at |w|; a saturated
// result stays saturated), and the slope row 0 gives the bias check is inside its band
// (slope_too_noisy).
std::string row0_doubling_hidden(const Problem& p) {
  const Unsaturated& u = unsaturated(p);
  const double max_out = dtype_info(p.out).max_finite, e = element_bound(p);
  double moved_max = 0;
  for (size_t j = 0; j < u.row0_w.size(); ++j) {
    const double w = u.row0_w[j], moved = std::fabs(std::clamp(2 * w, -max_out, max_out) - w);
    const double bound = e * std::sqrt(u.row0_q[j]) + spacing_at(p.out, std::fabs(w)) / 2;
    if (std::fabs(w) < max_out && moved > bound) return "";
    moved_max = std::max(moved_max, moved);
  }
  const std::string slope = slope_too_noisy(p, doubled_slope(p, u.row0_w));
  if (slope.empty()) return "";
  char text[300];
  std::snprintf(text, sizeof text, "row 0 doubled moves no result past its per-element bound (at most %.3g) and %s",
                moved_max, slope.c_str());
  return text;
}

// The scale tensor's element `index` times `factor`, in its own dtype (fp32, e8m0fnu, ue4m3).
void scale_by(HostTensor& t, int64_t index, double factor) {
  const double v = t.get(index);
  t.set(index, v * factor);
}

}  // namespace

std::string_view to_string(PlantedBug b) {
  switch (b) {
    case PlantedBug::none: return "none";
    case PlantedBug::block_scale_doubled: return "block_scale_doubled";
    case PlantedBug::k_block_scale_zeroed: return "k_block_scale_zeroed";
    case PlantedBug::no_out_scale: return "no_out_scale";
    case PlantedBug::scale_error: return "scale_error";
    case PlantedBug::no_bias: return "no_bias";
    case PlantedBug::half_k: return "half_k";
    case PlantedBug::out_times_2: return "out_times_2";
    case PlantedBug::product_low: return "product_low";
    case PlantedBug::product_high: return "product_high";
    case PlantedBug::drop_last_k_step: return "drop_last_k_step";
    case PlantedBug::saturate_at_240: return "saturate_at_240";
  }
  return "?";
}

const std::vector<PlantedBug>& planted_bugs() {
  static const std::vector<PlantedBug> all = {PlantedBug::block_scale_doubled,
                                              PlantedBug::k_block_scale_zeroed,
                                              PlantedBug::no_out_scale,
                                              PlantedBug::scale_error,
                                              PlantedBug::no_bias,
                                              PlantedBug::half_k,
                                              PlantedBug::out_times_2,
                                              PlantedBug::product_low,
                                              PlantedBug::product_high,
                                              PlantedBug::drop_last_k_step,
                                              PlantedBug::saturate_at_240};
  return all;
}

std::string planted_bug_cannot_show(const Problem& p, PlantedBug bug) {
  if (!p.expect_error.empty()) return "planted impls run valid problems only";
  if (p.m * p.n == 0 || p.k == 0) return "an empty product has nothing to get wrong";
  switch (bug) {
    case PlantedBug::none: return "not a planted bug";
    // Row 0's scale of K block 0 and K block 0's scales exist in every recipe (a tensorwise
    // GEMM's one scale is its only block): they change the output everywhere.
    // Under other recipes block_scale_doubled doubles row 0's first K block only, which can bring
    // an overflowing result back into the range (a partial sum of the other sign): it runs.
    case PlantedBug::block_scale_doubled:
      if (p.recipe != Recipe::tensorwise) return "";
      [[fallthrough]];
    case PlantedBug::out_times_2:
      return overflows_fp16(p) ? "every result is 0 or past twice fp16's range: a doubled one is the same ±inf" : "";
    case PlantedBug::k_block_scale_zeroed: return "";
    case PlantedBug::no_out_scale:
      return p.out == DType::e4m3fn && p.out_scale != 1.0 ? "" : "no output scale other than 1 to ignore";
    case PlantedBug::scale_error:
    case PlantedBug::product_low:
    case PlantedBug::product_high:
      if (p.block_scaled()) return "e8m0 / ue4m3 scales cannot be off by 2^-8";
      if (overflows_fp16(p)) return "every result is 0 or past twice fp16's range: one off by 2^-8 is the same ±inf";
      return "";
    case PlantedBug::no_bias: return p.bias ? "" : "no bias to drop";
    // The plant moves every result that rounds past 240 (from 248, the midpoint to e4m3fn's next
    // value 256, on), saturated ones included.
    case PlantedBug::saturate_at_240: {
      if (p.out != DType::e4m3fn) return "only an e4m3fn output saturates";
      if (unsaturated(p).largest >= kFnuzMax + spacing_at(DType::e4m3fn, kFnuzMax) / 2) return "";
      char text[120];
      std::snprintf(text, sizeof text, "no result reaches 248: the largest is %.4g, which rounds to 240 or less",
                    unsaturated(p).largest);
      return text;
    }
    case PlantedBug::half_k: return p.k >= 2 ? "" : "K too short to halve";
    case PlantedBug::drop_last_k_step: return "";
  }
  return "";
}

std::string planted_bug_blind_spot(const Problem& p, PlantedBug bug) {
  if (!planted_bug_cannot_show(p, bug).empty()) return "";
  switch (bug) {
    // A tensorwise GEMM's one scale doubles every result, as out_times_2 does: on a saturating
    // output the bias check sees the slope the doubling gives the results left inside the range
    // (doubled_slope), wherever its band is narrower.
    case PlantedBug::out_times_2: return saturates_e4m3(p) ? slope_too_noisy(p, doubled_slope(p)) : "";
    case PlantedBug::block_scale_doubled:
      if (!saturates_e4m3(p)) return "";
      if (p.recipe == Recipe::tensorwise) return slope_too_noisy(p, doubled_slope(p));
      return p.recipe == Recipe::rowwise ? row0_doubling_hidden(p) : "";
    case PlantedBug::scale_error:
    case PlantedBug::product_low:
    case PlantedBug::product_high: return slope_too_noisy(p, bug == PlantedBug::scale_error ? 0x1p-7 : 0x1p-8);
    case PlantedBug::drop_last_k_step: {
      // Exact fills compare bit for bit: any change shows. The random fill draws each 32-wide K
      // chunk at a scale of its own, so the dropped products hold a share s of Σt² that may be
      // far below 32/K (random_fill_k_share); per element the drop is then about N(0, s·Q),
      // against a bound of e·√Q under the sm90 models these rows are judged by (14 bits,
      // truncation, promotion every 128 or none: e = λ·√(2n)·2^-13 + 2.45·√n·2^-13 + the
      // output's half spacing 2^-p_out, judge/accumulator.cpp). With E elements it shows
      // somewhere with probability 1 − 1e-6 once E·P(|z| > t) >= 14, t = e/√s, i.e. s >= (e/t)²
      // for t with erfc(t/√2) = 14/E; its slope −s is inside the drift band below that.
      if (p.fill == Fill::exact) return "";
      const double share = random_fill_k_share(p, seed_of("scaled_mm/" + problem_id(p)), p.k - kPlantedKStep, p.k);
      const double e = element_bound(p);
      const double tail = std::min(1.0, 14 / static_cast<double>(p.m * p.n));
      double lo = 0, hi = 40;  // t with erfc(t/√2) = tail, by bisection
      for (int i = 0; i < 100; ++i) (std::erfc((lo + hi) / 2 / std::sqrt(2.0)) > tail ? lo : hi) = (lo + hi) / 2;
      const double need = (e / lo) * (e / lo);
      if (share >= need) return "";
      char text[200];
      std::snprintf(text, sizeof text,
                    "the fill's last %lld K elements hold %.2g of the products' squares, below the %.2g a drop must "
                    "hold to show in %lld elements",
                    static_cast<long long>(std::min(p.k, kPlantedKStep)), share, need,
                    static_cast<long long>(p.m * p.n));
      return text;
    }
    default: return "";
  }
}

TensorMap planted_inputs(const Problem& p, const TensorMap& inputs, PlantedBug bug) {
  TensorMap in = inputs;
  HostTensor& as = in.at("a_scale");
  switch (bug) {
    case PlantedBug::none: break;
    case PlantedBug::block_scale_doubled: scale_by(as, scale_index(p, 'a', 0, 0), 2.0); break;
    case PlantedBug::k_block_scale_zeroed:
      // fp32 and ue4m3 scales become 0; e8m0, which has no zero, its smallest value 2^-127.
      for (int64_t r = 0; r < p.m; ++r) scale_by(as, scale_index(p, 'a', r, 0), 0.0);
      break;
    case PlantedBug::no_out_scale: in.at("out_scale").set(0, 1.0); break;
    case PlantedBug::scale_error:
      for (const char* name : {"a_scale", "b_scale"}) {
        HostTensor& t = in.at(name);
        for (int64_t i = 0; i < t.numel(); ++i) scale_by(t, i, 1 + 0x1p-8);
      }
      break;
    case PlantedBug::no_bias: in.erase("bias"); break;
    case PlantedBug::half_k: {
      HostTensor& a = in.at("a");
      for (int64_t r = 0; r < p.m; ++r)
        for (int64_t k = p.k / 2; k < p.k; ++k) a.set(r * p.k + k, 0.0);
      break;
    }
    case PlantedBug::out_times_2:
      if (in.count("global_scale")) scale_by(in.at("global_scale"), 0, 2.0);
      else
        for (int64_t i = 0; i < as.numel(); ++i) scale_by(as, i, 2.0);
      break;
    case PlantedBug::product_low:
    case PlantedBug::product_high:
      for (int64_t i = 0; i < as.numel(); ++i)
        scale_by(as, i, bug == PlantedBug::product_low ? 1 - 0x1p-8 : 1 + 0x1p-8);
      break;
    case PlantedBug::drop_last_k_step: {
      HostTensor& a = in.at("a");
      for (int64_t r = 0; r < p.m; ++r)
        for (int64_t k = std::max<int64_t>(0, p.k - kPlantedKStep); k < p.k; ++k) a.set(r * p.k + k, 0.0);
      break;
    }
    case PlantedBug::saturate_at_240: break;  // an output bug: planted_outputs
  }
  return in;
}

TensorMap planted_outputs(const Problem& p, TensorMap outputs, PlantedBug bug) {
  if (bug != PlantedBug::saturate_at_240 || p.out != DType::e4m3fn) return outputs;
  HostTensor& d = outputs.at("d");
  for (int64_t i = 0; i < d.numel(); ++i) {
    const double v = d.get(i);
    if (std::fabs(v) > kFnuzMax) d.set(i, std::copysign(kFnuzMax, v));
  }
  return outputs;
}

}  // namespace opcts::scaled_mm
