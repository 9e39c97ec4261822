// The accumulator probe's experiments and how a model is read off their answers.
#include "runner/accumulator_probe.hpp"

#include <cmath>
#include <cstdio>
#include <stdexcept>

namespace opcts {

namespace {

constexpr double kBig = 256.0;                  // 2^8: the product every small one is added to
const double kSmallestB = std::ldexp(1.0, -9);  // e4m3fn's smallest subnormal, for b[k]
constexpr int kMaxE = 23;                       // bits experiment: 2^(8−e) for e = 1..23 (fp32 holds 2^8 + 2^-15)
constexpr int kPositions = 8;                   // ... at k = 1..8, so 8 interleaved accumulators meet 2^8

std::string fmt(const char* f, double a, double b = 0, double c = 0) {
  char buf[256];
  std::snprintf(buf, sizeof buf, f, a, b, c);
  return buf;
}

// Runs `batch` and checks that the path answered every row.
std::vector<double> answers(const ProbeRun& run, const ProbeBatch& batch) {
  std::vector<double> got = run(batch);
  if (got.size() != batch.a.size())
    throw std::runtime_error("the probe's runner returned " + std::to_string(got.size()) + " sums for " +
                             std::to_string(batch.a.size()) + " rows");
  return got;
}

ProbeBatch batch_of(int64_t k_len) {
  ProbeBatch b;
  b.k_len = k_len;
  b.b.assign(static_cast<size_t>(k_len), 0.0);
  return b;
}

std::vector<double>& new_row(ProbeBatch& b) {
  b.a.emplace_back(static_cast<size_t>(b.k_len), 0.0);
  return b.a.back();
}

// Round half to even of a small positive multiple of 1/4.
double rne(double f) {
  const double r = std::nearbyint(f);  // the default rounding mode: to nearest, ties to even
  return r;
}

}  // namespace

ProbeFinding probe_accumulator(const ProbeRun& run, int64_t k_len) {
  if (k_len < 16) throw std::invalid_argument("the accumulator probe needs K >= 16");
  ProbeFinding f;
  // 1. bits: 2^8 + 2^(8−e), the small product a[p]·b[p] at each p = 1..kPositions (a path of
  // interleaved accumulators meets 2^8 at one of them), b[p] = 1 for e <= 16 (a[p] >= 2^-8) and
  // b[p] = 2^-9 for e >= 14 (a[p] <= 2^3); the overlap e = 14..16 must agree. Two products sum
  // alike in any order, and fp32 holds 2^8 + 2^(8−e) up to e = 23.
  // state[e][p]: 1 kept, 0 lost, -1 not run.
  std::vector<std::vector<int>> state(kMaxE + 1, std::vector<int>(kPositions + 1, -1));
  std::string odd;
  for (int part = 0; part < 2; ++part) {
    ProbeBatch b = batch_of(k_len);
    b.b[0] = 1;
    for (int p = 1; p <= kPositions; ++p) b.b[static_cast<size_t>(p)] = part == 0 ? 1.0 : kSmallestB;
    const int lo = part == 0 ? 1 : 14, hi = part == 0 ? 16 : kMaxE;
    for (int e = lo; e <= hi; ++e)
      for (int p = 1; p <= kPositions; ++p) {
        auto& r = new_row(b);
        r[0] = kBig, r[static_cast<size_t>(p)] = std::ldexp(1.0, 8 - e) / b.b[static_cast<size_t>(p)];
      }
    const std::vector<double> got = answers(run, b);
    size_t i = 0;
    for (int e = lo; e <= hi; ++e)
      for (int p = 1; p <= kPositions; ++p) {
        const double g = got[i++], small = std::ldexp(1.0, 8 - e);
        const int s = g == kBig + small ? 1 : g == kBig ? 0 : -2;
        if (s == -2 && odd.empty()) odd = fmt("2^8 + 2^%g at k = %g gave %.9g", 8 - e, p, g);
        int& st = state[static_cast<size_t>(e)][static_cast<size_t>(p)];
        if (st >= 0 && st != s && odd.empty())
          odd = fmt("2^8 + 2^%g at k = %g gave different answers with the small product split two ways", 8 - e, p);
        st = s;
      }
  }
  if (!odd.empty()) {
    f.unexplained = "bits: " + odd;
    return f;
  }
  auto lost_at = [&](int e) {  // the first position where 2^(8−e) was lost, 0 if none
    for (int p = 1; p <= kPositions; ++p)
      if (state[static_cast<size_t>(e)][static_cast<size_t>(p)] == 0) return p;
    return 0;
  };
  int bits = 0;  // the first e lost
  for (int e = 1; e <= kMaxE && !bits; ++e)
    if (lost_at(e)) bits = e;
  for (int e = 1; e <= kMaxE; ++e)
    if (bits && (lost_at(e) == 0) != (e < bits)) {
      f.unexplained = fmt("bits: 2^8 + 2^%g was kept at every k although a larger product was lost", 8 - e);
      return f;
    }
  const int pos = bits ? lost_at(bits) : 1;  // where the small product meets 2^8's accumulator
  if (bits == 1) {
    f.unexplained = "bits: even 2^8 + 2^7 was lost";
    return f;
  }
  if (bits == 0) {
    // 2^8 + 2^-16 rounds to 2^8 in the fp32 output whatever the adder kept: read as IEEE fp32,
    // whose rounding an fp32 output cannot show either (a truncating fp32 adder is not a real
    // path; its bound would be twice rne's).
    f.evidence.push_back(
        fmt("bits: 2^8 + 2^(8−e) kept for e = 1..%g, all an fp32 output shows: an adder at "
            "least as wide as fp32's, read as IEEE fp32",
            kMaxE));
    f.evidence.push_back("rounding: not readable through an fp32 output at 24 bits: round to nearest even (IEEE)");
    f.evidence.push_back("promote_every: none to read: chunk sums added in fp32 are no wider than a 24-bit adder");
    f.model = AccumulatorModel{};
    return f;
  }
  f.evidence.push_back(
      fmt("bits: 2^8 + 2^(8−e) kept for e <= %g, lost from e = %g (small product at k = %g)", bits - 1, bits, pos) +
      ": " + std::to_string(bits) + " significant bits");

  // 2. rounding: ±(2^8 + f·u) with u = 2^(9−bits) the adder's spacing at 2^8, the small product at
  // k = pos placed by b[pos] = 2^m: truncation toward zero keeps ⌊f⌋·u, round-to-nearest-even
  // rne(f)·u.
  const double u = std::ldexp(1.0, 9 - bits);
  const int m = std::max(9 - bits, -9);
  const double fs[] = {0.75, 1.5, 1.75};
  AccRounding rounding = AccRounding::rne;
  {
    ProbeBatch b = batch_of(k_len);
    b.b[0] = 1, b.b[static_cast<size_t>(pos)] = std::ldexp(1.0, m);
    for (double sign : {1.0, -1.0})
      for (double x : fs) {
        auto& r = new_row(b);
        r[0] = sign * kBig, r[static_cast<size_t>(pos)] = sign * x * u / b.b[static_cast<size_t>(pos)];
      }
    const std::vector<double> got = answers(run, b);
    bool trunc = true, near = true;
    std::string seen;
    size_t i = 0;
    for (double sign : {1.0, -1.0})
      for (double x : fs) {
        const double g = (got[i++] - sign * kBig) / u;  // what was kept of the small product, in spacings
        trunc = trunc && g == sign * std::floor(x);
        near = near && g == sign * rne(x);
        seen += fmt("%+g·u -> %g·u; ", sign * x, g);
      }
    if (trunc == near) {
      f.unexplained = "rounding: neither truncation toward zero nor round-to-nearest-even explains " + seen;
      return f;
    }
    rounding = trunc ? AccRounding::truncate : AccRounding::rne;
    f.evidence.push_back("rounding: " + seen + (trunc ? "truncation toward zero" : "round to nearest, ties to even"));
  }

  // 3. promote_every: 2^8 at k = 0 and half a spacing h = u/2 at k = j (b[j] = c): an adder that
  // meets h next to 2^8 loses it (it truncates, or ties to even), while a chunk without 2^8 sums
  // h exactly and fp32 adds it to 2^8 (fp32 holds 2^8 + h for bits <= 23).
  int64_t promote = 0;
  {
    const double h = u / 2;
    const double c = std::max(h, kSmallestB);
    ProbeBatch b = batch_of(k_len);
    b.b[0] = 1;
    for (int64_t j = 1; j < k_len; ++j) b.b[static_cast<size_t>(j)] = c;
    for (int64_t j = 1; j < k_len; ++j) {
      auto& r = new_row(b);
      r[0] = kBig, r[static_cast<size_t>(j)] = h / c;
    }
    const std::vector<double> got = answers(run, b);
    int64_t first_kept = 0, kept = 0;
    for (int64_t j = 1; j < k_len; ++j) {
      const double g = got[static_cast<size_t>(j - 1)];
      if (g != kBig + h && g != kBig) {
        f.unexplained = fmt("promote_every: 2^8 and half a spacing at k = %g gave %.9g", static_cast<double>(j), g);
        return f;
      }
      if (g == kBig + h) {
        ++kept;
        if (!first_kept) first_kept = j;
      }
    }
    if (kept == 0) {
      f.evidence.push_back(fmt("promote_every: half a spacing after 2^8 lost at every k < %g: never promoted",
                               static_cast<double>(k_len)));
    } else if (kept == k_len - first_kept) {
      promote = first_kept;
      f.evidence.push_back(
          fmt("promote_every: half a spacing after 2^8 lost at k = 1..%g, kept from k = %g on: "
              "chunks of %g",
              static_cast<double>(first_kept - 1), static_cast<double>(first_kept), static_cast<double>(first_kept)));
    } else if (rounding == AccRounding::rne) {
      f.evidence.push_back(
          fmt("promote_every: half a spacing after 2^8 kept at %g of %g positions in no chunk "
              "pattern (another summation order); rne's bound holds for any order",
              static_cast<double>(kept), static_cast<double>(k_len - 1)));
    } else {
      f.unexplained =
          fmt("promote_every: half a spacing after 2^8 kept at %g of %g positions, first at k = %g, in no "
              "chunk pattern",
              static_cast<double>(kept), static_cast<double>(k_len - 1), static_cast<double>(first_kept));
      return f;
    }
  }
  f.model = AccumulatorModel{.bits = bits, .rounding = rounding, .promote_every = promote};
  return f;
}

}  // namespace opcts
