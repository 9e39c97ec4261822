// Element-wise error statistics and bounds of every metric, the bounded metric's bias check and
// the zero counts of the trust check.
#include "judge/compare.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "core/output_guard.hpp"
#include "core/spellings.hpp"

namespace opcts {

constexpr Spellings<Metric, 5> kMetrics{{{Metric::bitexact, "bitexact"},
                                         {Metric::exact, "exact"},
                                         {Metric::allclose, "allclose"},
                                         {Metric::ref_relative, "ref_relative"},
                                         {Metric::bounded, "bounded"}}};

std::string_view to_string(Metric m) { return kMetrics.of(m); }

Metric parse_metric(std::string_view s) {
  if (const auto m = kMetrics.parse(s)) return *m;
  throw std::invalid_argument("unknown metric '" + std::string(s) + "' (expected " + kMetrics.joined(" or ") + ")");
}

namespace {

// Same special value in the same place: both NaN, or both the same infinity.
bool specials_agree(double g, double w) {
  if (std::isnan(g) || std::isnan(w)) return std::isnan(g) && std::isnan(w);
  if (std::isinf(g) || std::isinf(w)) return g == w;
  return true;
}

// The reference value is 0 in the output dtype: it rounds to 0 there, or lies below fp32's
// smallest normal, which GPU kernels built with flush-to-zero (FlashAttention's
// --use_fast_math) may flush in their fp32 intermediates. Only tiny values call round_to.
bool zero_in(DType t, double w) {
  constexpr double kFp32MinNormal = 0x1p-126;
  const double a = std::fabs(w);
  if (!(a < std::max(dtype_info(t).min_normal, kFp32MinNormal))) return a == 0;
  return a < kFp32MinNormal || round_to(t, w) == 0;
}

struct Candidate {
  double key;  // larger is worse; +inf for special-value mismatches
  int64_t index;
};

// The order of the worst elements: the larger error first, then the lower index (a total
// order, so which elements are listed never depends on how the work was split).
bool worse(const Candidate& a, const Candidate& b) { return a.key != b.key ? a.key > b.key : a.index < b.index; }

// Keeps the max_worst worst candidates; returns the least key kept (0 when none are kept).
double keep_worst(std::vector<Candidate>& c, size_t max_worst) {
  if (max_worst == 0) {
    c.clear();
    return INFINITY;  // nothing can enter
  }
  if (c.size() > max_worst) {
    std::nth_element(c.begin(), c.begin() + static_cast<std::ptrdiff_t>(max_worst - 1), c.end(), worse);
    c.resize(max_worst);
  }
  double least = INFINITY;
  for (const Candidate& k : c) least = std::min(least, k.key);
  return c.size() == max_worst ? least : 0.0;
}

// Elements per chunk of the comparison, and the output size from which it runs in parallel.
constexpr int64_t kChunk = int64_t{1} << 15;
constexpr int64_t kParallelMin = int64_t{1} << 16;

// One chunk's share of OutputStats (merged in chunk order).
struct ChunkStats {
  double max_abs_err = 0, max_rel_err = 0, max_ratio = 0, bound = 0, worst_ratio = 0, largest_bound = 0;
  int64_t mismatches = 0, zeros = 0, ref_zeros = 0, unexplained_zeros = 0;
  // The failure kinds' counts (output_failures) and the largest ratio over finite pairs.
  int64_t nonfinite = 0, untouched = 0, specials_mismatch = 0;
  double finite_ratio = 0;
  SlopeAccumulator slope;
  std::vector<Candidate> cands;
  double least_kept = 0;  // once max_worst candidates are kept: the least of their keys
};

}  // namespace

OutputStats compare_output(const std::string& name, const HostTensor& got, const OutputReference& ref,
                           const Tolerance& tol, std::vector<WorstElement>& worst, size_t max_worst) {
  const std::vector<double>& want = ref.want;
  const std::vector<double>*lowp = ref.lowp, *bound = ref.bound, *bound_below = ref.bound_below;
  const ReductionStats* reduction = ref.reduction;
  const int64_t row = ref.row;
  const int64_t n = got.numel();
  if (static_cast<int64_t>(want.size()) != n)
    throw std::invalid_argument("output '" + name + "': " + std::to_string(n) + " elements, reference has " +
                                std::to_string(want.size()));
  if (tol.metric == Metric::ref_relative && (!lowp || static_cast<int64_t>(lowp->size()) != n))
    throw std::invalid_argument("output '" + name + "': ref_relative needs a same-precision reference");
  // bounded: the reduction statistics under the impl's model when the reference gives them,
  // else the reference's own per-element bound.
  const ReductionStats* st = tol.metric == Metric::bounded ? reduction : nullptr;
  const std::vector<double>* fixed = tol.metric == Metric::bounded && !st ? bound : nullptr;
  const auto sized = [n](const std::vector<double>& v, bool may_be_empty) {
    return static_cast<int64_t>(v.size()) == n || (may_be_empty && v.empty());
  };
  if (st && !(sized(st->abs_sum, false) && sized(st->sq_sum, false) && sized(st->magnitude, true) &&
              sized(st->offset, true) && sized(st->unsaturated, true)))
    throw std::invalid_argument("output '" + name + "': reduction statistics of another size");
  if (tol.metric == Metric::bounded && !st && (!fixed || static_cast<int64_t>(fixed->size()) != n))
    throw std::invalid_argument("output '" + name +
                                "': bounded needs the reference's per-element bound or reduction statistics");
  const std::vector<double>* below = fixed ? bound_below : nullptr;
  if (below && static_cast<int64_t>(below->size()) != n)
    throw std::invalid_argument("output '" + name + "': the reference's bound below has the wrong size");
  if (fixed && !(tol.accumulator == AccumulatorModel{}))
    throw std::invalid_argument("output '" + name +
                                "': its reference gives a fixed bound, which no accumulator model (" +
                                to_string(tol.accumulator) + ", " + tol.source + ") changes");
  AccumulationBound acc = st ? accumulation_bound(tol.accumulator, *st, tol.false_alarm) : AccumulationBound{};
  // A provisional model is a stand-in, the loosest a path may have (judge/tolerance.hpp): a path
  // that truncates less, or rounds to nearest, drifts less than a truncating adder's least drift
  // D_lo, so the bias check's interval reaches up to no drift at all there.
  if (tol.provisional) acc.drift_lo = 0;
  // factor·E of element i (the model's, or the reference's bound).
  auto allowed = [&](int64_t i) {
    return tol.factor * (st ? acc.element(*st, static_cast<size_t>(i)) : (*fixed)[static_cast<size_t>(i)]);
  };
  // factor·E below want of element i (the same as above unless the reference gives a side).
  auto allowed_below = [&](int64_t i, double above) {
    return below ? tol.factor * (*below)[static_cast<size_t>(i)] : above;
  };
  if (tol.metric == Metric::ref_relative && bound && static_cast<int64_t>(bound->size()) != n)
    throw std::invalid_argument("output '" + name + "': the reference's bound has the wrong size");

  const std::vector<double> g = got.to_f64();
  OutputStats s;
  s.out = name;
  s.metric = std::string(to_string(tol.metric));
  s.elements = n;

  double max_ref = 0;
#pragma omp parallel for schedule(static) reduction(max : max_ref) if (n > kParallelMin)
  for (int64_t i = 0; i < n; ++i)
    if (std::isfinite(want[i])) max_ref = std::max(max_ref, std::fabs(want[i]));
  const double floor = tol.atol + tol.atol_eps * dtype_info(got.dtype()).epsilon * max_ref;

  // ref_relative: the same-precision reference's largest error over each row, so that one
  // row's error does not set every row's bound (Family::outputs says what a row is).
  const int64_t row_len = row > 0 ? row : std::max<int64_t>(n, 1);
  std::vector<double> row_lp;
  if (tol.metric == Metric::ref_relative) {
    const int64_t rows = (n + row_len - 1) / row_len;
    row_lp.assign(static_cast<size_t>(rows), 0.0);
    double lowp_err = 0;
#pragma omp parallel for schedule(static) reduction(max : lowp_err) if (n > kParallelMin && rows > 1)
    for (int64_t r = 0; r < rows; ++r) {
      double m = 0;
      for (int64_t i = r * row_len; i < std::min(n, (r + 1) * row_len); ++i)
        if (std::isfinite(want[i]) && std::isfinite((*lowp)[i])) m = std::max(m, std::fabs((*lowp)[i] - want[i]));
      row_lp[static_cast<size_t>(r)] = m;
      lowp_err = std::max(lowp_err, m);
    }
    s.lowp_err = lowp_err;
  } else if (tol.metric == Metric::allclose) {
    s.bound = floor;  // the per-element bound adds rtol·|want|
  }

  const DType out_t = got.dtype();
  const double maxf = dtype_info(out_t).max_finite;
  // The ABI backends' poison in this dtype's code, where no arithmetic gives it: a NaN of
  // 16 bits or more with every payload bit set (GPUs write the canonical 0x7FFF / 0x7FC0 /
  // 0x7FFFFFFF, x86 0xFFC00000), so such an element was never written (FailureKind::untouched).
  // An 8-bit float's 0xFF is its own negative NaN, which a conversion gives; in integers and
  // fp4/fp6 it is a value: there an unwritten element shows as what it is (nonfinite, exceeds_bound).
  static_assert(kOutputPoison == 0xFF, "the poison's code below is all ones");
  const int bits = dtype_info(out_t).bits;
  const uint64_t poison = bits >= 64 ? ~uint64_t{0} : (uint64_t{1} << bits) - 1;
  const bool poison_is_nan = bits >= 16 && std::isnan(decode(out_t, poison));
  // ref_relative into a format that saturates (e4m3fn's RN satfinite, numerics/codec.hpp): the
  // reference stays unrounded, and an exact value past the largest finite one is stored as ±max
  // by a correct kernel whose v lies past it too (below: `past`).
  const bool saturates = tol.metric == Metric::ref_relative && default_overflow(out_t) == Overflow::satfinite;
  // The elements in fixed chunks, each with its own statistics, merged in chunk order: the
  // result depends on the chunk size only, not on the number of threads (the bias check's sums
  // are added in one fixed order).
  const int64_t chunks = (n + kChunk - 1) / kChunk;
  std::vector<ChunkStats> part(static_cast<size_t>(chunks));
#pragma omp parallel for schedule(dynamic, 1) if (n > kParallelMin)
  for (int64_t c = 0; c < chunks; ++c) {
    ChunkStats p;  // on this thread's stack: neighbouring chunks run on other threads
    for (int64_t i = c * kChunk; i < std::min(n, (c + 1) * kChunk); ++i) {
      const double gi = g[i];
      double wi = want[i], past = 0;
      if (saturates && std::isfinite(wi) && std::fabs(wi) > maxf) {
        past = std::fabs(wi) - maxf;
        wi = std::copysign(maxf, wi);  // what a correct kernel stores, unless its error exceeds `past`
      }
      p.zeros += gi == 0.0;  // +0 and -0; NaN is not zero
      p.ref_zeros += zero_in(out_t, wi);
      // bounded: a reference value beyond the output's range is stored unrounded (x, not inf;
      // families/scaled_mm/reference.cpp), because a result within E of x may round to the
      // largest finite value or overflow. The device's inf is right when x + E reaches the
      // overflow threshold max + spacing(max)/2 (IEEE 754 round-to-nearest overflow rule).
      if (tol.metric == Metric::bounded && std::isinf(gi) && std::isfinite(wi) &&
          std::signbit(gi) == std::signbit(wi)) {
        const double e = std::signbit(wi) ? allowed_below(i, allowed(i)) : allowed(i);  // the side away from 0
        if (std::fabs(wi) + e >= maxf + spacing_at(out_t, maxf) / 2) continue;
      }
      if (!specials_agree(gi, wi)) {
        ++p.mismatches;
        if (!std::isfinite(wi)) ++p.specials_mismatch;
        else if (poison_is_nan && got.code(i) == poison) ++p.untouched;
        else ++p.nonfinite;
        p.max_ratio = INFINITY;
        p.cands.push_back({INFINITY, i});
        continue;
      }
      if (!std::isfinite(wi)) continue;
      const double err = std::fabs(gi - wi);
      p.max_abs_err = std::max(p.max_abs_err, err);
      if (wi != 0) p.max_rel_err = std::max(p.max_rel_err, err / std::fabs(wi));
      bool bad = false;
      double bi = 0;  // this element's bound (0 for the exact metrics)
      switch (tol.metric) {
        case Metric::bitexact: bad = gi != wi || std::signbit(gi) != std::signbit(wi); break;
        case Metric::exact: bad = gi != wi; break;
        // Written as !(err <= bound) so that a NaN bound fails every element instead of none.
        case Metric::allclose:
          bi = floor + tol.rtol * std::fabs(wi);
          bad = !(err <= bi);
          break;
        case Metric::ref_relative: {
          // lowp is the same-precision result before its output rounding: a correct result v
          // within e of want may round to the output dtype by half a spacing at |want| + e.
          // The accumulation error: the larger of the statistic and the reference's bound (its
          // model of what the statistic cannot show, e.g. where a row holds one rounding).
          const double acc = std::max(tol.factor * row_lp[i / row_len], bound ? (*bound)[i] : 0.0), e = acc + floor;
          double b = e + spacing_at(out_t, std::fabs(wi) + e) / 2;
          // x lies `past` beyond ±max (saturates): a correct v within acc of x converts to ±max
          // exactly unless acc > past, when it may reach back into the range by acc − past and
          // round there by half a spacing — the bounded metric's rule below.
          if (past > 0) {
            const double reach = std::max(0.0, acc - past);
            b = reach + floor + (reach > 0 ? spacing_at(out_t, std::fabs(maxf - reach)) / 2 : 0.0);
          }
          p.largest_bound = std::max(p.largest_bound, b);
          p.worst_ratio = std::max(p.worst_ratio, b > 0 ? err / b : (err > 0 ? INFINITY : 0.0));
          bi = b;
          bad = !(err <= b);
          break;
        }
        case Metric::bounded: {
          // factor·E is the accumulation error the model allows around the exact, unrounded x;
          // a correct device rounds its v (|v − x| <= E) once to nearest in the output dtype:
          // |RN(v) − x| <= E + spacing(|x| + E)/2. E = 0 (exact fills) leaves the rounding of x
          // itself: the result must be RN(x) (either neighbour only at a tie).
          const double e_hi = allowed(i), e = below ? std::max(e_hi, allowed_below(i, e_hi)) : e_hi;
          double rounding = e > 0 ? spacing_at(out_t, std::fabs(wi) + e) / 2 : std::fabs(round_to(out_t, wi) - wi);
          bi = e + floor + rounding;
          // A saturating output's element whose exact x lies `past` beyond the range: want is
          // ±max, and a correct v within e of x converts to ±max exactly unless e > past, when it
          // may reach back into the range by e − past and round there by half a spacing
          // (ReductionStats::unsaturated). Without this, an e far above the range (out_scale 16
          // over a large K) passes any value for a result that must be ±max.
          const double past = st && !st->unsaturated.empty() ? std::fabs(st->unsaturated[i]) - maxf : 0.0;
          if (past > 0) {
            const double reach = std::max(0.0, e - past);
            bi = reach + floor + (reach > 0 ? spacing_at(out_t, std::fabs(maxf - reach)) / 2 : 0.0);
          }
          p.bound = std::max(p.bound, bi);  // reported: the largest per-element bound
          if (below && e > 0) {
            // A reference that gives the two sides apart (References::bound_below): the side got
            // lies on, and RN being monotone, a result within [want − e_lo, want + e_hi] rounds
            // to within half a spacing at that end.
            const double side = gi < wi ? allowed_below(i, e_hi) : e_hi;
            rounding = spacing_at(out_t, std::fabs(gi < wi ? wi - side : wi + side)) / 2;
            bi = side + floor + rounding;
          }
          bad = !(err <= bi);
          // The bias check takes the elements the output rounds normally (a value beyond the
          // output's range is kept unrounded, or saturated), each with its noise (accumulator.hpp).
          if (st && e > 0 && std::fabs(wi) <= maxf && !(past > 0)) {
            const double sp = spacing_at(out_t, std::fabs(wi));
            p.slope.add(wi, gi - wi, tol.factor * tol.factor * acc.variance(*st, static_cast<size_t>(i)) + sp * sp / 4,
                        acc.expected(*st, static_cast<size_t>(i), wi));
          }
          break;
        }
      }
      if (bad) ++p.mismatches;
      // The trust check's zeros (judge/trust.hpp): a zero the reference explains is a right
      // answer there — the reference rounds to 0 in the output dtype (zero_in), or 0 lies within
      // the element's own bound (the rounding model of ref_relative's reference, without the row
      // statistic that a row's large elements set; bounded's per-element bound), where a correct
      // result rounds to 0 as a one-subnormal fp16 dQ entry does. allclose, exact and bitexact
      // carry no error model, so there only the rounded reference explains a zero.
      if (gi == 0.0 && !zero_in(out_t, wi)) {
        double reach = 0;
        if (tol.metric == Metric::bounded) reach = bi;
        if (tol.metric == Metric::ref_relative) {
          const double own = (bound ? (*bound)[i] : 0.0) + floor;
          reach = own + spacing_at(out_t, std::fabs(wi) + own) / 2;
        }
        p.unexplained_zeros += !(std::fabs(wi) <= reach);
      }
      // NaN-safe: a NaN ratio (a NaN bound) counts as the worst.
      const double ratio = err == 0 && !bad ? 0.0 : bi > 0 ? err / bi : INFINITY;
      p.max_ratio = std::isnan(ratio) ? INFINITY : std::max(p.max_ratio, ratio);
      p.finite_ratio = std::isnan(ratio) ? INFINITY : std::max(p.finite_ratio, ratio);
      // Keep the candidate list short: only the largest errors matter. Once max_worst are
      // kept, an error no larger than the least of them cannot enter (elements come in
      // increasing index, and a tie goes to the lower index).
      if (err > 0 && err > p.least_kept) p.cands.push_back({err, i});
      if (p.cands.size() > 4 * max_worst + 64) p.least_kept = keep_worst(p.cands, max_worst);
    }
    part[static_cast<size_t>(c)] = std::move(p);
  }
  double worst_ratio = 0, largest_bound = 0;
  SlopeAccumulator slope;
  std::vector<Candidate> cands;
  for (const ChunkStats& p : part) {
    s.zeros += p.zeros;
    s.ref_zeros += p.ref_zeros;
    s.unexplained_zeros += p.unexplained_zeros;
    s.mismatches += p.mismatches;
    s.max_abs_err = std::max(s.max_abs_err, p.max_abs_err);
    s.max_rel_err = std::max(s.max_rel_err, p.max_rel_err);
    s.max_ratio = std::max(s.max_ratio, p.max_ratio);
    s.nonfinite += p.nonfinite;
    s.untouched += p.untouched;
    s.specials_mismatch += p.specials_mismatch;
    s.finite_ratio = std::max(s.finite_ratio, p.finite_ratio);
    if (tol.metric == Metric::bounded) s.bound = std::max(s.bound, p.bound);
    worst_ratio = std::max(worst_ratio, p.worst_ratio);
    largest_bound = std::max(largest_bound, p.largest_bound);
    slope.merge(p.slope);
    cands.insert(cands.end(), p.cands.begin(), p.cands.end());
  }
  if (tol.metric == Metric::ref_relative) s.bound = worst_ratio > 0 ? s.max_abs_err / worst_ratio : largest_bound;
  if (tol.metric == Metric::bounded) {
    const SlopeCheck c = slope.finish(acc);
    s.slope = c.slope;
    s.slope_lo = c.lo;
    s.slope_hi = c.hi;
  }
  std::sort(cands.begin(), cands.end(), worse);
  for (size_t k = 0; k < cands.size() && k < max_worst; ++k)
    worst.push_back({name, got.unravel(cands[k].index), g[cands[k].index], want[cands[k].index]});
  return s;
}

std::vector<Failure> output_failures(const OutputStats& s) {
  std::vector<Failure> out;
  const int64_t finite_bad = s.mismatches - s.nonfinite - s.untouched - s.specials_mismatch;
  // Every element zero where the reference is not explains the elements beyond their bound.
  const bool all_zero = s.elements > 0 && s.zeros == s.elements && s.ref_zeros < s.elements;
  if (finite_bad > 0) {
    if (all_zero) out.push_back({s.out, FailureKind::all_zero, finite_bad, 0});
    else out.push_back({s.out, FailureKind::exceeds_bound, finite_bad, s.finite_ratio});
  }
  if (s.biased()) out.push_back({s.out, FailureKind::biased, 0, 0});
  if (s.nonfinite > 0) out.push_back({s.out, FailureKind::nonfinite, s.nonfinite, 0});
  if (s.specials_mismatch > 0) out.push_back({s.out, FailureKind::specials_mismatch, s.specials_mismatch, 0});
  if (s.untouched > 0) out.push_back({s.out, FailureKind::untouched, s.untouched, 0});
  if (s.conservation_off > 0) out.push_back({s.out, FailureKind::not_conserved, s.conservation_off, 0});
  if (s.energy_ratio > 1) out.push_back({s.out, FailureKind::excess_energy, 0, s.energy_ratio});
  return out;
}

}  // namespace opcts
