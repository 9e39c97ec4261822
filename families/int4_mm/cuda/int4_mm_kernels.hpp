// Launch interface of opcts's int4 weight-only matmuls (cuda.int4_gemv, cuda.int4_mm); no harness types.
//
// y[M, N] = x[M, K] · Ŵᵀ, Ŵ[n, k] the int4 weight dequantized with one rounding to the
// activation dtype and the products summed in fp32; y rounded once to the dtype. Buffers (the
// layouts are documented in families/int4_mm/int4_pack.hpp, with their sources):
//   x       [M, K] bf16 or fp16, row-major (ldx = K)
//   weight  the packed weight: tinygemm int32 [N/8][K/(16·ikt)][32][ikt/2]; tinygemm_unpacked
//           uint8 [N][K/2] (even k in the high nibble); awq int32 [K][N/8] (nibble order
//           0 2 4 6 1 3 5 7); gptq int32 [K/8][N]; q4_0 18-byte blocks [N][K/32] {fp16 d; qs[16]}
//   scales  tinygemm: [G][N][2] (scale, zero) in the dtype; awq, gptq: [G][N] in the dtype;
//           q4_0: none (d is in the blocks). G = K / group_size.
//   zeros   awq, gptq: int32 [G][N/8] (awq interleaved; gptq sequential, storing z − 1)
//   y       [M, N] in the dtype, leading dimension ldy (elements)
// The launchers validate the parameter struct — the sizes the glue read from the tensors it
// was handed (weight_bytes, scale_groups, scale_cols, zero_groups, zero_cols) against M, N, K
// and the group size — and throw Int4ArgumentError naming the argument before any launch.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

#include "include/opcts/plugin.h"

struct CUstream_st;

namespace opcts::cuda {

/// The packing, spelled with the ABI's constants as int4_mm::Format is (one vocabulary).
enum class Int4Format : int32_t {
  tinygemm = OPCTS_INT4_TINYGEMM,
  tinygemm_unpacked = OPCTS_INT4_TINYGEMM_UNPACKED,
  awq = OPCTS_INT4_AWQ,
  gptq = OPCTS_INT4_GPTQ,
  q4_0 = OPCTS_INT4_Q4_0,
};
enum class Int4Act { bf16, fp16 };
/// A deliberately wrong variant for the planted impls (none for the real ones).
enum class Int4Plant {
  none,
  group0_scale,       // gemv, M = 1: group 0's scale and zero for every group
  nibble_swap,        // the two nibbles of every weight byte exchanged
  zero_before_scale,  // tinygemm (q − 8 + zero)·scale; awq/gptq q·scale − z
  gptq_z,             // GPTQ's stored z − 1 used as the zero point
  drop_partial_k,     // K walked in tiles of 128, a partial last tile dropped
  // cuda.int4_mm only (mm_kernel's planted instantiation):
  drop_last_k,        // x[:, K − 1] read as 0: the last K element dropped
  fp16_as_bf16,       // x and the dequantized weights rounded to bf16 (an fp16 problem computed in bf16)
  sum_in_dtype_64,    // the fp32 accumulators rounded to the dtype after every 64 K elements
  split_k4_in_dtype,  // K in 4 slices, each slice's fp32 sums rounded to the dtype, then added
};

struct Int4MmParams {
  int64_t m = 0, n = 0, k = 0;
  int64_t group_size = 128;
  int inner_k_tiles = 8;  // tinygemm
  Int4Format format = Int4Format::tinygemm;
  Int4Act act = Int4Act::bf16;
  const void* x = nullptr;
  int64_t x_rows = 0, x_cols = 0;  // the shape of the x buffer handed in
  const void* weight = nullptr;
  int64_t weight_bytes = 0;  // bytes of the weight buffer handed in
  const void* scales = nullptr;
  int64_t scale_groups = 0, scale_cols = 0;  // its first two dimensions
  const void* zeros = nullptr;
  int64_t zero_groups = 0, zero_cols = 0;  // its first two dimensions (int32 words: N/8)
  void* y = nullptr;
  int64_t ldy = 0;
  void* workspace = nullptr;  // int4_gemv only: int4_gemv_workspace_bytes(params)
  int64_t workspace_bytes = 0;
  Int4Plant plant = Int4Plant::none;
};

/// An argument the kernel refuses: `argument` names it ("group_size", "K", "N", "M", "x",
/// "weight", "scale_and_zero", "scales", "qzeros", "workspace", ...). Thrown before any launch.
struct Int4ArgumentError : std::invalid_argument {
  Int4ArgumentError(std::string arg, const std::string& message)
      : std::invalid_argument(message), argument(std::move(arg)) {}
  std::string argument;
};

/// What a kernel takes (its `supports`): formats and group sizes; every other valid problem is
/// a SKIP naming this table. Both kernels take every format of the contract and its group
/// sizes (32, 64, 128, 256; q4_0 32); cuda.int4_gemv takes M <= kInt4GemvMaxM only.
constexpr int64_t kInt4GemvMaxM = 16;
bool int4_gemv_takes(Int4Format f, int64_t group_size);
bool int4_mm_takes(Int4Format f, int64_t group_size);

/// What a probe run of cuda.int4_gemv's mma fast path leaves out (opcts_bench_int4_mm only; its
/// y is wrong): loads_only streams the weight and its scales through the ring and multiplies
/// nothing, math_only multiplies what the first loads brought without loading more. Each time
/// bounds what the kernel's memory side and its arithmetic reach alone (g >= 128, M <= 8, at a
/// ring of 2; elsewhere the probe is ignored).
enum class Int4GemvProbe { none, loads_only, math_only };

/// How cuda.int4_gemv spreads its work. The impls run the default; the benchmark
/// (families/int4_mm/bench/int4_mm_bench.cpp) times the others in the same run. Every setting computes the same
/// sums (fp32, each lane's products in K order; lanes, warps and slices added in a fixed order),
/// except a probe's.
struct Int4GemvTuning {
  int warps_per_sm = 24;  // K is split over blocks until the grid holds this many warps per SM (mma fast path: also the
                          // most it places)
  bool batch = true;      // each lane loads Code::kBatch items before it computes (false: one; M = 1 only)
  // tinygemm at innerKTiles 8 without a plant: the staged-x kernel (int4_gemv_tiny.cuh; it
  // reads warps_per_sm, mma, stages and tiny_wk, not batch); false: the generic kernel for it too.
  bool fast = true;
  bool mma = true;  // the fast path on tensor cores (CUDA; HIP always takes fp32 FMA)
  int stages = 2;  // the mma path's ring of items per warp (S − 1 in flight): 2, or 3 or 4 at M <= 8, g >= 128 (else 4)
  int tiny_wk =
      0;  // the fast path's warps per n-tile (mma: pair of n-tiles; fma 1, 2, 4, 8; mma up to 24); 0: the planner's
  bool fixed_blocks =
      false;  // the mma path in 8-warp blocks (wk 1, 2, 4, 8 as fma) instead of the planner's blocks of any bw
  Int4GemvProbe probe = Int4GemvProbe::none;
};

/// cuda.int4_gemv: M <= 16, memory-bound. One pass over the packed weight: each warp owns a
/// column unit of its format and a strided share of a contiguous slice of K (the warps of a
/// unit within a block, the slices across blocks: split-K only where the units alone leave the
/// GPU short of warps); a lane loads several items' packed words (16 bytes each for tinygemm,
/// unpacked and Q4_0) and their group parameters before it dequantizes them in registers and
/// accumulates all M rows in fp32 FMA. One slice writes y directly; several write fp32 partial
/// sums to `workspace` and a second kernel adds them in slice order, so the result is
/// deterministic. tinygemm at innerKTiles 8 (no plant, x 16-byte aligned) takes a fast path
/// (int4_gemv.cu, int4_gemv_tiny.cuh: x staged once per chunk in shared memory; on CUDA the
/// weight streamed through a cp.async ring and multiplied on tensor cores (mma.sync m16n8k16,
/// fp32 accumulation), on HIP in fp32 FMA; the same dequantization, fp32 sums in another order).
/// Throws Int4ArgumentError.
void int4_gemv(const Int4MmParams& p, CUstream_st* stream, const Int4GemvTuning& tuning = {});
/// The workspace int4_gemv needs for `p` on the current device (fp32 partial sums; 0 when K is
/// not split).
int64_t int4_gemv_workspace_bytes(const Int4MmParams& p, const Int4GemvTuning& tuning = {});

/// cuda.int4_mm: tensor cores (mma.sync m16n8k16, fp32 accumulation; under HIP the emulated
/// m16n8k16 of gpu/portable/mma_tile.cuh). 64×64 output tiles; each 32-deep K slice of the weight is
/// dequantized into shared memory as bf16/fp16, x staged beside it. Throws Int4ArgumentError.
void int4_mm(const Int4MmParams& p, CUstream_st* stream);

}  // namespace opcts::cuda
