// Philox-based tensor fills.
#include "numerics/rng.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

#include <Random123/philox.h>
#include <Random123/uniform.hpp>

#include "numerics/codec.hpp"
#include "numerics/normal_codes.hpp"

namespace opcts {

namespace {

r123::Philox4x32::ctr_type draw(uint64_t seed, uint32_t stream, uint64_t block) {
  r123::Philox4x32 gen;
  r123::Philox4x32::key_type key = {{static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)}};
  r123::Philox4x32::ctr_type ctr = {{static_cast<uint32_t>(block), static_cast<uint32_t>(block >> 32), stream, 0}};
  return gen(ctr, key);
}

}  // namespace

uint64_t seed_of(std::string_view text) {
  uint64_t h = 14695981039346656037ull;
  for (unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

std::string seed_hex(uint64_t seed) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%016llx", static_cast<unsigned long long>(seed));
  return buf;
}

double uniform01_of_bits(uint32_t bits) {
  return 1.0 - r123::u01<double>(bits);  // u01 is (0, 1]; 1 − u01 is [0, 1)
}

double uniform01(uint64_t seed, uint32_t stream, uint64_t i) {
  return uniform01_of_bits(draw(seed, stream, i / 4)[i % 4]);
}

std::array<uint32_t, 4> random_block(uint64_t seed, uint32_t stream, uint64_t block) {
  const auto r = draw(seed, stream, block);
  return {r[0], r[1], r[2], r[3]};
}

void fill_uniform(HostTensor& t, uint64_t seed, uint32_t stream, double lo, double hi) {
  const int64_t n = t.numel();
#pragma omp parallel for schedule(static) if (n > (1 << 16))
  for (int64_t b = 0; b < (n + 3) / 4; ++b) {
    const auto r = draw(seed, stream, static_cast<uint64_t>(b));
    for (int lane = 0; lane < 4 && b * 4 + lane < n; ++lane) {
      const double u = 1.0 - r123::u01<double>(r[lane]);  // as uniform01: [0, 1)
      double x = round_to(t.dtype(), lo + (hi - lo) * u);
      if (x >= hi) x = next_below(t.dtype(), hi);
      t.set(b * 4 + lane, x);
    }
  }
}

void fill_normal(HostTensor& t, uint64_t seed, uint32_t stream, double sigma) {
  const int64_t n = t.numel(), blocks = (n + 3) / 4;
  const DTypeInfo& info = dtype_info(t.dtype());
  if (!info.is_integer && info.bits <= 16) {
    if (sigma == 0) {  // N(0, 0): every element +0 (a bias of a K = 0 GEMM, whose σ scales with √K)
#pragma omp parallel for schedule(static) if (n > (1 << 16))
      for (int64_t i = 0; i < n; ++i) t.set(i, 0.0);
      return;
    }
    // In the code domain: element i is the code the sampler gives lane i % 4 of block i / 4.
    const NormalCodeSampler& sampler = normal_code_sampler(t.dtype(), sigma);
    uint16_t* h16 = info.bits == 16 && t.is_contiguous() ? reinterpret_cast<uint16_t*>(t.data()) : nullptr;
    for_each_block_run(seed, stream, blocks, [&](int64_t b0, int64_t nb, const uint32_t* bits) {
      const int64_t i0 = 4 * b0, count = std::min(4 * nb, n - i0);
      if (h16)
        for (int64_t j = 0; j < count; ++j) h16[i0 + j] = sampler.from_bits(bits[j]);
      else
        for (int64_t j = 0; j < count; ++j) t.set_code(i0 + j, sampler.from_bits(bits[j]));
    });
    return;
  }
  // fp32 and fp64 (and integer dtypes, rounded by set()): Box-Muller on lane pairs. A contiguous
  // fp32 tensor (quantizers' inputs: hundreds of millions of elements) is written in place: a
  // finite in-range value's fp32 encoding is its round-to-nearest cast, as set() does.
  float* f32 = t.dtype() == DType::fp32 && t.is_contiguous() ? reinterpret_cast<float*>(t.data()) : nullptr;
  for_each_block_run(seed, stream, blocks, [&](int64_t b0, int64_t nb, const uint32_t* bits) {
    const int64_t i0 = 4 * b0, count = std::min(4 * nb, n - i0);
    for (int64_t j = 0; j < count; j += 2) {
      const double u1 = r123::u01<double>(bits[j]);  // (0,1]: log is finite
      const double u2 = r123::u01<double>(bits[j + 1]);
      const double rad = std::sqrt(-2.0 * std::log(u1));
      const double z[2] = {rad * std::cos(2 * M_PI * u2), rad * std::sin(2 * M_PI * u2)};
      for (int k = 0; k < 2 && j + k < count; ++k) {
        const double v = sigma * z[k];
        if (f32 && std::fabs(v) <= std::numeric_limits<float>::max()) f32[i0 + j + k] = static_cast<float>(v);
        else t.set(i0 + j + k, v);
      }
    }
  });
}

}  // namespace opcts
