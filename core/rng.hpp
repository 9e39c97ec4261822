// Counter-based random inputs (Random123 Philox4x32-10): one case id gives the same inputs everywhere.
#pragma once

#include <array>
#include <cstdint>
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

}  // namespace opcts
