// Counter-based random inputs (Random123 Philox4x32-10): one case id gives the same inputs everywhere.
#pragma once

#include <array>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "core/tensor.hpp"

namespace opcts {

/// 64-bit FNV-1a hash of the text: the seed of a case is seed_of(family + "/" + problem id),
/// so every impl of a problem sees the same inputs (and shares its reference).
uint64_t seed_of(std::string_view text);
/// "0x" followed by 16 hex digits.
std::string seed_hex(uint64_t seed);

/// Fills t (row-major element i) with values uniform in [lo, hi), rounded to t's dtype (a value
/// that rounds up to hi becomes the dtype's largest value below hi, so hi is never reached).
/// Element i of stream `stream` under `seed` is a pure function of (seed, stream, i):
/// Philox4x32-10 keyed by the seed, counter (i/4, stream, 0, 0), lane i%4, so the values
/// do not depend on the order of generation, the thread count or the machine.
void fill_uniform(HostTensor& t, uint64_t seed, uint32_t stream, double lo, double hi);

/// Fills t with standard normal values times `sigma` (Box-Muller on two Philox lanes).
void fill_normal(HostTensor& t, uint64_t seed, uint32_t stream, double sigma);

/// The uniform [0,1) double of (seed, stream, i) (32 random bits); what fill_uniform maps to [lo, hi).
double uniform01(uint64_t seed, uint32_t stream, uint64_t i);

/// The four 32-bit lanes of Philox block `block` of `stream` under `seed`: 128 random bits per
/// call, for generators that need many bits cheaply (int4 codes: 32 per block). uniform01(i)
/// reads lane i % 4 of block i / 4 of the same sequence.
std::array<uint32_t, 4> random_block(uint64_t seed, uint32_t stream, uint64_t block);

/// n codes of an unsigned integer type Code (1, 2, 4 or 8 bytes) at `out`, straight from Philox
/// bits: block b's 16 bytes (random_block, little-endian) are codes b·(16 / sizeof(Code))
/// onward, each passed through `map` (Code → Code: where a generator confines its codes); a
/// whole block is stored with one 16-byte copy, the last, partial one with its codes only.
/// OpenMP over blocks. For inputs of up to billions of codes (index_select's self, grouped_mm's
/// weights).
template <class Code, class Map>
void fill_block_codes(Code* out, int64_t n, uint64_t seed, uint32_t stream, Map map) {
  constexpr int64_t kLanes = 16 / static_cast<int64_t>(sizeof(Code));
  const int64_t blocks = (n + kLanes - 1) / kLanes;
#pragma omp parallel for schedule(static) if (n > (1 << 16))
  for (int64_t b = 0; b < blocks; ++b) {
    const std::array<uint32_t, 4> r = random_block(seed, stream, static_cast<uint64_t>(b));
    Code c[kLanes];
    std::memcpy(c, r.data(), 16);  // little-endian hosts only
    for (Code& x : c) x = map(x);
    const int64_t count = n - b * kLanes < kLanes ? n - b * kLanes : kLanes;
    std::memcpy(out + b * kLanes, c, static_cast<size_t>(count) * sizeof(Code));
  }
}

}  // namespace opcts
