// Sweeps fp32 bit patterns through encode_format and encode_fp32_to_e4m3fn (satfinite), counts disagreements, prints
// values/second.
//
// Usage: opcts_bench_codec [COUNT]   COUNT is a number or 2^K (default 2^32: every pattern).
// Pattern i of the sweep is i·0x9E3779B1 mod 2^32 (odd, so a bijection): the full sweep visits
// every fp32 bit pattern once and a shorter one samples all of them evenly, not just the small
// positive ones. Both paths see the same blocks in the same run; only the conversions are timed.
#include <omp.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "numerics/codec.hpp"
#include "numerics/codec_fast.hpp"

namespace {

constexpr opcts::FloatFormat kE4m3fn{4, 3, 7, opcts::Specials::fn};
constexpr uint64_t kBlock = uint64_t{1} << 22;

// "2^K" or a plain count; 0 for a malformed or out-of-range argument.
uint64_t parse_count(const std::string& s) {
  char* end = nullptr;
  if (s.rfind("2^", 0) == 0) {
    const unsigned long k = std::strtoul(s.c_str() + 2, &end, 10);
    return (*end == '\0' && k <= 32) ? uint64_t{1} << k : 0;
  }
  const unsigned long long n = std::strtoull(s.c_str(), &end, 10);
  return (*end == '\0' && n <= (uint64_t{1} << 32)) ? n : 0;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int main(int argc, char** argv) {
  const uint64_t count = argc > 1 ? parse_count(argv[1]) : uint64_t{1} << 32;
  if (count == 0) {
    std::fprintf(stderr, "usage: %s [COUNT | 2^K]  (1 ≤ COUNT ≤ 2^32)\n", argv[0]);
    return 2;
  }
  const int threads = omp_get_max_threads();
  std::vector<float> in(kBlock);
  std::vector<uint8_t> scalar(kBlock), fast(kBlock), fast1(kBlock);
  double t_scalar = 0, t_fast = 0, t_fast1 = 0;
  uint64_t disagree = 0, disagree1 = 0;
  uint32_t first_bad = 0;
  const auto wall0 = std::chrono::steady_clock::now();
  for (uint64_t start = 0; start < count; start += kBlock) {
    const size_t n = static_cast<size_t>(std::min(kBlock, count - start));
    for (size_t i = 0; i < n; ++i) in[i] = std::bit_cast<float>(static_cast<uint32_t>((start + i) * 0x9E3779B1u));

    auto t0 = std::chrono::steady_clock::now();
    for (size_t i = 0; i < n; ++i)
      scalar[i] = static_cast<uint8_t>(opcts::encode_format(in[i], kE4m3fn, opcts::Overflow::satfinite));
    t_scalar += seconds_since(t0);

    t0 = std::chrono::steady_clock::now();
    opcts::encode_fp32_to_e4m3fn(in.data(), fast.data(), n, opcts::Overflow::satfinite);
    t_fast += seconds_since(t0);

    omp_set_num_threads(1);
    t0 = std::chrono::steady_clock::now();
    opcts::encode_fp32_to_e4m3fn(in.data(), fast1.data(), n, opcts::Overflow::satfinite);
    t_fast1 += seconds_since(t0);
    omp_set_num_threads(threads);

    for (size_t i = 0; i < n; ++i) {
      if (scalar[i] != fast[i] && disagree++ == 0) first_bad = std::bit_cast<uint32_t>(in[i]);
      disagree1 += scalar[i] != fast1[i];
    }
  }
  const double v = static_cast<double>(count);
  std::printf("fp32 -> e4m3fn (satfinite), %llu bit patterns%s\n", static_cast<unsigned long long>(count),
              count == (uint64_t{1} << 32) ? " (all of them)" : "");
  std::printf("  scalar encode_format loop      %8.2f s  %10.3e values/s\n", t_scalar, v / t_scalar);
  std::printf("  encode_fp32_to_e4m3fn, %2d thr  %8.2f s  %10.3e values/s  %6.1fx the scalar loop\n", threads, t_fast,
              v / t_fast, t_scalar / t_fast);
  std::printf("  encode_fp32_to_e4m3fn,  1 thr  %8.2f s  %10.3e values/s  %6.1fx the scalar loop\n", t_fast1,
              v / t_fast1, t_scalar / t_fast1);
  std::printf("  disagreements: %llu (%d threads), %llu (1 thread)", static_cast<unsigned long long>(disagree), threads,
              static_cast<unsigned long long>(disagree1));
  if (disagree) std::printf("; first at fp32 bits 0x%08x", first_bad);
  std::printf("\n  wall time %.1f s\n", seconds_since(wall0));
  return disagree == 0 && disagree1 == 0 ? 0 : 1;
}
