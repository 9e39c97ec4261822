// int4_mm inputs, drawn in the code domain: activations N(0, 1), 4-bit codes packed in the format's own storage, and
// per-group scales and zero points from Philox (int4_mm.hpp, file comment).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>

#include "families/int4_mm/int4_mm.hpp"
#include "families/int4_mm/int4_pack.hpp"
#include "numerics/rng.hpp"

namespace opcts::int4_mm {

namespace {

int64_t round_up(int64_t a, int64_t b) { return (a + b - 1) / b * b; }

// Philox streams of the inputs (seed = the case's seed). kGroupDraws took the place of the
// scale's mantissa, exponent, zero point and sign streams (2, 3, 4, 6); the others keep their
// numbers, so the all_codes and extreme_zeros fills draw what they drew.
enum Stream : uint32_t { kX = 0, kCodes, kGroupDraws, kPermutation = 5, kExtreme = 7 };

// The padded shape the packers take: a negative case's N or K need not fit the packing, and its
// impls must refuse it from the problem's sizes before they read these tensors.
struct Shape {
  int64_t n, k, groups, scale_groups, zero_groups;
};

Shape shape_of(const Problem& p) {
  Shape s;
  s.n = round_up(p.n, packing_n_tile(p));
  s.k = round_up(p.k, packing_k_tile(p));
  s.groups = (s.k + p.group - 1) / p.group;
  const int64_t wide = (s.k + 4 * p.group - 1) / (4 * p.group);  // the groups of 4g
  s.scale_groups = p.defect == Defect::scale_groups ? wide : s.groups;
  s.zero_groups = p.defect == Defect::zero_groups ? wide : s.groups;
  return s;
}

// Codes [N, K] (padded shape); columns at or past p.n and k at or past p.k stay 0.
int4::Codes make_codes(const Problem& p, const Shape& s, uint64_t seed) {
  int4::Codes q(static_cast<size_t>(s.n * s.k), 0);
  const int64_t total = p.n * p.k;  // the codes of the real [N, K], 32 per Philox block
#pragma omp parallel for schedule(static) if (total > (1 << 16))
  for (int64_t b = 0; b < (total + 31) / 32; ++b) {
    const auto r = random_block(seed, kCodes, static_cast<uint64_t>(b));
    for (int64_t i = 32 * b; i < std::min(total, 32 * b + 32); ++i) {
      const int j = static_cast<int>(i - 32 * b);
      const int64_t at = s.k == p.k ? i : (i / p.k) * s.k + i % p.k;  // a padded K only in negative cases
      q[static_cast<size_t>(at)] = static_cast<uint8_t>(r[j / 8] >> (4 * (j % 8)) & 0xF);
    }
  }
  if (p.fill == Fill::all_codes) {
    // j ↦ (a·j + c) mod 16 with a odd is a permutation of 0..15: the group's first 16 codes.
    const int64_t groups = p.k / p.group;
#pragma omp parallel for schedule(static) if (p.n * p.k > (1 << 16))
    for (int64_t n = 0; n < p.n; ++n)
      for (int64_t g = 0; g < groups; ++g) {
        const uint64_t at = static_cast<uint64_t>(2 * (n * groups + g));
        const int a = 2 * static_cast<int>(uniform01(seed, kPermutation, at) * 8) + 1;
        const int c = static_cast<int>(uniform01(seed, kPermutation, at + 1) * 16);
        for (int j = 0; j < 16 && j < p.group; ++j)
          q[static_cast<size_t>(n * s.k + g * p.group + j)] = static_cast<uint8_t>((a * j + c) % 16);
      }
  }
  return q;
}

// The packed weight of a problem whose codes are uniform and i.i.d. (the default fill) at a shape
// the packing takes as is: its storage (int4_pack.hpp) filled with random bytes straight from
// Philox, byte 16b + j the j-th little-endian byte of block b of kCodes — uniform codes in the
// format's own order, one block per 32 codes like make_codes but without its bytes per code or
// the packer's gather (with group_draws and the codec's exact powers of two, a 14336 × 4096
// tinygemm problem's inputs went from 532 to 102 ms on one core, docs/status/sm90.md). Q4_0's d
// are written over bytes 0 and 1 of each block afterwards (make_inputs).
HostTensor random_storage(const Problem& p, uint64_t seed) {
  HostTensor t = p.format == Format::tinygemm            ? int4::tinygemm_storage(p.n, p.k, p.inner_k_tiles)
                 : p.format == Format::tinygemm_unpacked ? int4::tinygemm_unpacked_storage(p.n, p.k)
                 : p.format == Format::awq               ? int4::awq_storage(p.n, p.k)
                 : p.format == Format::gptq              ? int4::gptq_storage(p.n, p.k)
                                                         : int4::q4_0_storage(p.n, p.k);
  fill_block_codes(reinterpret_cast<uint8_t*>(t.data()), static_cast<int64_t>(t.nbytes()), seed, kCodes,
                   [](uint8_t x) { return x; });
  return t;
}

// Whether the packed weight is drawn straight into storage (random_storage): the default fill
// (all_codes places codes by (n, k)) at the problem's own shape (a negative case's packing may
// need a padded one, whose extra codes stay 0).
bool direct_codes(const Problem& p, const Shape& s) { return p.fill != Fill::all_codes && s.n == p.n && s.k == p.k; }

// The four uniform [0, 1) draws of (group, column) `at` from one Philox block of kGroupDraws
// (a call each would cost four blocks): the scale's mantissa, its exponent, the zero point and
// Q4_0's sign.
struct GroupDraws {
  double mantissa, exponent, zero, sign;
};
GroupDraws group_draws(const uint32_t* r) {
  const auto u = [](uint32_t v) { return static_cast<double>(v) * 0x1p-32; };  // exact
  return {u(r[0]), u(r[1]), u(r[2]), u(r[3])};
}

// f(at, group_draws of block `at`) for at in [0, total), from runs of Philox blocks
// (for_each_block_run: in parallel past 2^14 groups; a random_block call per group was 6% of
// int4_mm's input time, perf, 2026-12-03).
template <class F>
void for_each_group(uint64_t seed, int64_t total, F f) {
  for_each_block_run(seed, kGroupDraws, total, [&](int64_t b0, int64_t nb, const uint32_t* bits) {
    for (int64_t b = b0; b < b0 + nb; ++b) f(b, group_draws(bits + 4 * (b - b0)));
  });
}

// A scale of (group, column): m·2^(e + b(K) + scale_exp) in the scale dtype (file comment of
// int4_mm.hpp); Q4_0's d gets a random sign.
double scale_value(const Problem& p, const GroupDraws& d) {
  int kbits = 0;
  while ((int64_t{1} << kbits) < p.k) ++kbits;
  const int base = -2 - (kbits + 1) / 2;
  const int e = static_cast<int>(d.exponent * 4) - 3;
  double s = std::ldexp(1.0 + d.mantissa, e + base + p.scale_exp);
  if (p.format == Format::q4_0 && d.sign < 0.5) s = -s;
  return round_to(p.scale_dtype(), s);
}

// An integer zero point p ∈ [0, 15] (tinygemm: the real p its float zero stands for).
double zero_point(const Problem& p, uint64_t seed, uint64_t at, const GroupDraws& d, bool integer) {
  if (p.fill == Fill::extreme_zeros) return uniform01(seed, kExtreme, at) < 0.5 ? 0.0 : 15.0;
  return integer ? std::floor(d.zero * 16) : d.zero * 15;
}

}  // namespace

TensorMap make_inputs(const Problem& p, uint64_t seed) {
  const Shape s = shape_of(p);
  TensorMap in;
  HostTensor x(p.dtype, {p.m, p.k});
  fill_normal(x, seed, kX, 1.0);
  in.emplace("x", std::move(x));
  const bool direct = direct_codes(p, s);
  const int4::Codes q = direct ? int4::Codes{} : make_codes(p, s, seed);
  const int64_t G = s.scale_groups, N = s.n;

  switch (p.format) {
    case Format::tinygemm:
    case Format::tinygemm_unpacked: {
      in.emplace("weight", direct                         ? random_storage(p, seed)
                           : p.format == Format::tinygemm ? int4::pack_tinygemm(q, N, s.k, p.inner_k_tiles)
                                                          : int4::pack_tinygemm_unpacked(q, N, s.k));
      HostTensor sz(p.dtype, {G, N, 2});
      for_each_group(seed, G * N, [&](int64_t i, const GroupDraws& d) {
        const double sc = scale_value(p, d);
        sz.set(2 * i, sc);
        sz.set(2 * i + 1, (8 - zero_point(p, seed, static_cast<uint64_t>(i), d, false)) * sc);  // zero, rounded once
      });
      in.emplace("scale_and_zero", std::move(sz));
      break;
    }
    case Format::awq:
    case Format::gptq: {
      in.emplace("weight", direct                    ? random_storage(p, seed)
                           : p.format == Format::awq ? int4::pack_awq(q, N, s.k)
                                                     : int4::pack_gptq(q, N, s.k));
      // The scale and the zero point of (group, column) from one draw; a negative case may give
      // them different group counts.
      const int64_t GZ = s.zero_groups, both = std::max(G, GZ) * N;
      HostTensor sc(p.dtype, {G, N});
      std::vector<int> z(static_cast<size_t>(GZ * N));  // zero point (g, n) at g·N + n
      for_each_group(seed, both, [&](int64_t i, const GroupDraws& d) {
        if (i < G * N) sc.set(i, scale_value(p, d));
        if (i < GZ * N)
          z[static_cast<size_t>(i)] = static_cast<int>(zero_point(p, seed, static_cast<uint64_t>(i), d, true));
      });
      in.emplace("scales", std::move(sc));
      if (p.format == Format::awq) in.emplace("qzeros", int4::pack_awq_zeros(int4::Codes(z.begin(), z.end()), GZ, N));
      else {  // the stored code is drawn; the zero point is stored + 1
        for (int& v : z) ++v;
        in.emplace("qzeros", int4::pack_gptq_zeros(z, GZ, N));
      }
      break;
    }
    case Format::q4_0: {
      std::vector<uint16_t> d(static_cast<size_t>(N * (s.k / 32)));
      for_each_group(seed, static_cast<int64_t>(d.size()), [&](int64_t i, const GroupDraws& g) {
        d[static_cast<size_t>(i)] = static_cast<uint16_t>(encode(DType::fp16, scale_value(p, g)));
      });
      if (direct) {
        HostTensor w = random_storage(p, seed);
        int4::put_q4_0_d(w, d);
        in.emplace("weight", std::move(w));
      } else in.emplace("weight", int4::pack_q4_0(q, d, N, s.k));
      break;
    }
  }
  return in;
}

}  // namespace opcts::int4_mm
