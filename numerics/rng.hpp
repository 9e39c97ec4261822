// Counter-based random inputs (Random123 Philox4x32-10): one case id gives the same inputs everywhere.
#pragma once

#include <array>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "numerics/tensor.hpp"

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

/// Fills t (row-major element i) with normal values of standard deviation `sigma`. Float dtypes
/// of at most 16 bits get codes drawn in the code domain: element i is
/// normal_code_sampler(dtype, sigma) (numerics/normal_codes.hpp) of lane i % 4 of Philox block i / 4,
/// so the codes have RN_satfinite(σ·z)'s exact probabilities (up to 2^-32 each). fp32, fp64 and
/// integer dtypes get Box-Muller on lanes (2j, 2j + 1) of the same blocks, rounded to the dtype.
/// sigma = 0 gives zeros (+0 in the 16-bit dtypes); a 16-bit fill throws std::invalid_argument
/// for a negative or non-finite sigma (NormalCodeSampler).
void fill_normal(HostTensor& t, uint64_t seed, uint32_t stream, double sigma);

/// The uniform [0,1) double of (seed, stream, i) (32 random bits); what fill_uniform maps to [lo, hi).
double uniform01(uint64_t seed, uint32_t stream, uint64_t i);
/// uniform01's value from its 32 bits (lane i % 4 of block i / 4: random_block, random_blocks).
double uniform01_of_bits(uint32_t bits);

/// The four 32-bit lanes of Philox block `block` of `stream` under `seed`: 128 random bits per
/// call, for generators that need many bits cheaply (int4 codes: 32 per block). uniform01(i)
/// reads lane i % 4 of block i / 4 of the same sequence.
std::array<uint32_t, 4> random_block(uint64_t seed, uint32_t stream, uint64_t block);

/// Blocks first .. first + count − 1 of `stream` under `seed`, block b's four lanes at
/// out[4·(b − first)] (out holds 4·count words): exactly random_block's bits, computed 8 (AVX2)
/// or 4 × 16 (AVX-512) blocks at a time on x86 CPUs that have them (numerics/philox_blocks.cpp):
/// 2.3× and 4.5× the rate of one random_block call after another on the development machine
/// (7.6 → 3.3 and 1.7 ns a block). For generators of millions of codes.
void random_blocks(uint64_t seed, uint32_t stream, uint64_t first, int64_t count, uint32_t* out);

/// f(b0, nb, bits) for runs of consecutive Philox blocks [b0, b0 + nb) of `stream` under `seed`
/// that cover blocks 0 .. blocks − 1: `bits` holds the run's 4·nb lanes (random_blocks), nb at
/// most kBlockRun (4 KiB of bits, in L1). Runs in parallel (OpenMP) past 2^14 blocks, so f must
/// write only its own run's elements. The loop of every fill below.
constexpr int64_t kBlockRun = 256;
template <class F>
void for_each_block_run(uint64_t seed, uint32_t stream, int64_t blocks, F f) {
  const int64_t runs = (blocks + kBlockRun - 1) / kBlockRun;
#pragma omp parallel for schedule(static) if (blocks > (1 << 14))
  for (int64_t run = 0; run < runs; ++run) {
    uint32_t bits[4 * kBlockRun];
    const int64_t b0 = run * kBlockRun, nb = blocks - b0 < kBlockRun ? blocks - b0 : kBlockRun;
    random_blocks(seed, stream, static_cast<uint64_t>(b0), nb, bits);
    f(b0, nb, static_cast<const uint32_t*>(bits));
  }
}

/// n codes of an unsigned integer type Code (1, 2, 4 or 8 bytes) at `out`, straight from Philox
/// bits: block b's 16 bytes (random_block, little-endian) are codes b·(16 / sizeof(Code))
/// onward, each passed through `map` (Code → Code: where a generator confines its codes); the
/// last, partial block gives only its first codes. For inputs of up to billions of codes
/// (index_select's self, grouped_mm's weights).
template <class Code, class Map>
void fill_block_codes(Code* out, int64_t n, uint64_t seed, uint32_t stream, Map map) {
  constexpr int64_t kLanes = 16 / static_cast<int64_t>(sizeof(Code));
  for_each_block_run(seed, stream, (n + kLanes - 1) / kLanes, [&](int64_t b0, int64_t nb, const uint32_t* bits) {
    Code c[kLanes * kBlockRun];
    std::memcpy(c, bits, static_cast<size_t>(16 * nb));  // little-endian hosts only
    const int64_t count = n - b0 * kLanes < nb * kLanes ? n - b0 * kLanes : nb * kLanes;
    for (int64_t j = 0; j < count; ++j) out[b0 * kLanes + j] = map(c[j]);
  });
}

}  // namespace opcts
