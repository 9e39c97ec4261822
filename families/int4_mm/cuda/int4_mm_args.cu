// The int4 kernels' argument checks: the parameter struct and the sizes of the tensors it describes, refused by name
// before any launch.
#include <cstdint>
#include <string>

#include "families/int4_mm/cuda/int4_mm_args.cuh"

namespace opcts::cuda::int4mm {

namespace {

void require(bool ok, const char* who, const char* arg, const std::string& why) {
  if (!ok) throw Int4ArgumentError(arg, std::string(who) + ": " + why);
}

bool aligned(const void* p, uintptr_t a) { return reinterpret_cast<uintptr_t>(p) % a == 0; }

std::string num(int64_t v) { return std::to_string(v); }

}  // namespace

bool takes(Int4Format f, int64_t g) {
  return f == Int4Format::q4_0 ? g == 32 : g == 32 || g == 64 || g == 128 || g == 256;
}

void validate(const Int4MmParams& p, const char* who) {
  require(p.m >= 0 && p.n >= 0 && p.k >= 1, who, p.m < 0 ? "M" : p.n < 0 ? "N" : "K", "M, N >= 0 and K >= 1");
  const int64_t g = p.group_size;
  require(
      takes(p.format, g), who, "group_size",
      "group size " + num(g) + (p.format == Int4Format::q4_0 ? " (Q4_0 blocks are 32)" : " is not 32, 64, 128 or 256"));
  require(p.k % g == 0, who, "K", "K = " + num(p.k) + " is not a multiple of the group size " + num(g));
  const bool tiled = p.format == Int4Format::tinygemm,
             words = tiled || p.format == Int4Format::awq || p.format == Int4Format::gptq;
  if (tiled) {
    require(p.inner_k_tiles == 2 || p.inner_k_tiles == 4 || p.inner_k_tiles == 8, who, "inner_k_tiles",
            "must be 2, 4 or 8");
    require(p.k % (16 * p.inner_k_tiles) == 0, who, "K", "K = " + num(p.k) + " is not a multiple of 16·inner_k_tiles");
  }
  require(!words || p.n % 8 == 0, who, "N",
          "N = " + num(p.n) + " is not a multiple of 8 (8 columns per packed tile or word)");
  require(p.x_rows == p.m && p.x_cols == p.k, who, "x",
          "x is [" + num(p.x_rows) + ", " + num(p.x_cols) + "], not [M, K]");
  const int64_t wbytes = p.format == Int4Format::q4_0 ? p.n * (p.k / 32) * 18 : p.n * p.k / 2;
  require(p.weight_bytes == wbytes, who, "weight",
          "the packed weight holds " + num(p.weight_bytes) + " bytes, not " + num(wbytes));
  const int64_t groups = p.k / g;
  if (p.format != Int4Format::q4_0) {
    const char* arg =
        p.format == Int4Format::tinygemm || p.format == Int4Format::tinygemm_unpacked ? "scale_and_zero" : "scales";
    require(p.scale_groups == groups && p.scale_cols == p.n, who, arg,
            "the scales are [" + num(p.scale_groups) + ", " + num(p.scale_cols) + "], not [K/g, N] = [" + num(groups) +
                ", " + num(p.n) + "]");
  }
  if (p.format == Int4Format::awq || p.format == Int4Format::gptq)
    require(p.zero_groups == groups && p.zero_cols == p.n / 8, who, "qzeros",
            "the zero points are [" + num(p.zero_groups) + ", " + num(p.zero_cols) + "] words, not [K/g, N/8] = [" +
                num(groups) + ", " + num(p.n / 8) + "]");
  require(p.ldy >= p.n, who, "y", "ldy < N");
  if (p.m == 0 || p.n == 0) return;
  require(p.x, who, "x", "null x");
  require(p.weight, who, "weight", "null weight");
  require(p.y, who, "y", "null y");
  require(p.format == Int4Format::q4_0 || p.scales, who, "scales", "null scales");
  require(!(p.format == Int4Format::awq || p.format == Int4Format::gptq) || p.zeros, who, "qzeros", "null zero points");
  // Vector loads: 16 bytes of weight words, 4 bytes of x pairs, 2 bytes of Q4_0 blocks.
  require(aligned(p.weight, 16) && aligned(p.x, 16) && aligned(p.scales, 16), who, "weight",
          "buffers must be 16-byte aligned");
}

}  // namespace opcts::cuda::int4mm
