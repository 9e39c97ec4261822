// Launch interface of the grouped GEMMs (cuda.grouped_kernel, cuda.cublas_grouped); no harness types.
//
// torch._grouped_mm / torch._scaled_grouped_mm semantics (aten/src/ATen/native/cuda/GroupedBlas.cpp,
// and PyTorch's grouped tests in test/test_matmul_cuda.py). `offs` holds int32 cumulative END offsets
// along the split dimension: group g spans [offs[g-1], offs[g]) with offs[-1] = 0, and
// offs[G-1] may be smaller than the split dimension's size. Per mode (sizes as PyTorch's
// tensor sizes; every A is row-major, "not transposed"; every B is PyTorch's "transposed" mat2,
// i.e. K contiguous: logical B[k, n] at b + n·ldb + k, within group g at + g·b_batch_stride):
//   m2d_3d  A [ΣM, K] split along rows by offs; B [G, K, N]; out [ΣM, N].
//           out rows ≥ offs[G-1] are left untouched (PyTorch documents them as undefined).
//   m3d_3d  A [G, M, K]; B [G, K, N]; out [G, M, N]; no offsets (offs null, count 0).
//   m2d_2d  A [M, ΣK] split along columns; B [ΣK, N] split along rows; out [G, M, N]. A group
//           with an empty K range yields zeros (never a stale or unwritten tile). Columns of A /
//           rows of B past offs[G-1] are not read.
//   m3d_2d  A [G, M, K]; B [K, ΣN] split along columns; out [M, ΣN] (column group g of out is
//           A[g]·B[:, offs[g-1]:offs[g]]); out columns ≥ offs[G-1] are left untouched.
// Out is bf16, row-major with leading dimension ldo (elements); a 3-d out has batch stride
// out_batch_stride. Rows/columns not owned by any group are never written; a group's stores are
// masked at its M and N ends (no spill into the next row or group).
//
// Recipes and their scales (x ≈ code · scale: the dequant scales of torch._scaled_grouped_mm):
//   bf16         A, B bf16; no scales (a_scale, b_scale null, counts 0).
//   fp8_rowwise  A, B e4m3fn codes (1 byte); fp32 scales, one per row of A and per column of B,
//                per group (PyTorch's test_scaled_grouped_gemm_* layouts):
//                  m2d_3d  scale_a [ΣM] (row r of A),           scale_b [G, N]
//                  m3d_3d  scale_a [G, M],                      scale_b [G, N]
//                  m2d_2d  scale_a [G, M] (flat G·M),           scale_b [G, N] (flat G·N)
//                  m3d_2d  scale_a [G, M],                      scale_b [ΣN] (column n of out)
//   mxfp8        A, B e4m3fn codes; e8m0 scales (1 byte, 2^(e−127), 0xFF = NaN), one per 32
//                consecutive K elements of a row of A / a column of B, each group's scale
//                matrix [R, ceil(K_g/32)] stored in the cuBLAS 128×4 swizzled ("blocked") layout
//                (torch/testing/_internal/common_quantized.py to_blocked: offset 512·(tr·ceil(C/4) + tc) +
//                (r%32)·16 + ((r%128)/32)·4 + c%4 for r = row in the group's matrix,
//                tr = r/128, tc = c/4, C = its column count), padded per group. The per-group
//                placement is torchao's (torchao/prototype/moe_training/kernels/mxfp8:
//                torch_to_blocked_2d_M_groups, _2d_K_groups, _per_group_3d), which PyTorch's
//                MXFP8 grouped tests feed to _scaled_grouped_mm:
//                  3-d operand (A of 3d_*, B of *_3d), R = M or N rows, C = ceil(K/32):
//                      [G, Rp·Cp] with Rp = round_up(R, 128), Cp = round_up(C, 4); group g at
//                      g·Rp·Cp.
//                  M/N-split operand (A of 2d_3d, B of 3d_2d): a [rows + 128·G, Cp] matrix
//                      (rows = ΣM resp. ΣN allocated), flat (rows + 128·G)·Cp bytes; group g's
//                      blocked block starts at row Σ_{h<g} round_up(M_h, 128), i.e. byte
//                      Σ_{h<g} round_up(M_h, 128)·Cp; an empty group takes no rows.
//                  K-split operand (A and B of 2d_2d), R = M (A) or N (B): a row-major
//                      [Rp, W] matrix, W = ΣK/32 + 4·G (ΣK = A's column count); group g's
//                      blocked data (Rp·Cg bytes, Cg = round_up(K_g/32, 4)) is laid out as an
//                      [Rp, Cg] slab at columns [c_g, c_g + Cg), c_g = Σ_{h<g} Cg_h: its flat
//                      blocked offset f lands at (f / Cg)·W + c_g + f % Cg.
// Accumulation (cuda.grouped_kernel): products exact, sums in fp32 on tensor cores;
// fp8_rowwise applies (acc·scale_a[m])·scale_b[n] in fp32 once per output in the epilogue;
// mxfp8 sums each 32-deep K block in a fresh fp32 accumulator, multiplies it by
// 2^(ea−127)·2^(eb−127) (exact, a power of two) and adds it to the running fp32 sum; out is
// one rounding of the fp32 result to bf16 (round to nearest even).
//
// Argument checks (GroupedArgumentError, before any output is written): the sizes against the
// mode (A, B, out shapes; G vs B's or A's first dimension: "groups"; K of A vs K of B), offsets
// present iff a 2-d operand is ("offs"), offs_count == G ("offs"), scale element counts
// ("scale_a", "scale_b"), mxfp8 K % 32 on 3-d/fixed K ("K"), ΣK % 32 for mxfp8 2d_2d ("K").
// The offsets' values are checked on the device by one small kernel on a stream of the
// launcher's own, which it synchronises to read the result back (never the stream handed in:
// the ABI backend holds that one behind a gate until the call returns): every offs[g] in
// [0, split size], non-decreasing, and a multiple of grouped_offs_multiple(mode, recipe) → "offs".
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

#include "include/opcts/plugin.h"

struct CUstream_st;
struct cublasContext;  // cublasHandle_t

namespace opcts::cuda {

/// The mode, spelled with the ABI's constants as grouped_mm::Mode is (one vocabulary).
enum class GroupedMode : int32_t {
  m2d_3d = OPCTS_GROUPED_2D_3D,
  m3d_3d = OPCTS_GROUPED_3D_3D,
  m2d_2d = OPCTS_GROUPED_2D_2D,
  m3d_2d = OPCTS_GROUPED_3D_2D,
};
/// What the kernels decode: one fp8_rowwise for both rowwise recipes of the ABI (e4m3fn and
/// e4m3fnuz have one argument contract); the rows map grouped_mm::Recipe onto it by a table.
enum class GroupedRecipe { bf16, fp8_rowwise, mxfp8 };
/// A deliberately wrong variant for the planted impls (none for the real ones); each shows only
/// on problems that exercise it.
enum class GroupedPlant {
  none,
  stale_empty_group,       // 2d_2d: a group with an empty K range writes nothing (stale output)
  write_past_last_offset,  // 2d_3d / 3d_2d: the last group runs to the end of the split dimension
  offsets_as_starts,       // offs[g] read as group g's START (group g = [offs[g], offs[g+1]), the last to the end)
  next_group_scales,       // group g applies group (g+1) % G's scales (fp8_rowwise, mxfp8; B's per-group scales)
  spill_past_n,            // stores not masked at the group's N: a tile's columns past it (their sums, 0) are
                           // stored too, landing on the next row (or the next group's / the guard columns in
                           // 3d_2d), never past the output tensor; deterministic when N fits one 64-column tile
};

/// One grouped GEMM. Shapes are the sizes of the tensors the glue was handed (PyTorch order);
/// strides are in elements. A 2-d operand has *_batch = 0.
struct GroupedMmParams {
  GroupedMode mode = GroupedMode::m2d_3d;
  GroupedRecipe recipe = GroupedRecipe::bf16;
  int64_t groups = 0;  // G
  // A: [a_batch, a_rows, a_cols] (3-d) or [a_rows, a_cols]; element (r, c) of batch g at
  // a + g·a_batch_stride + r·lda + c. 0 strides mean contiguous.
  const void* a = nullptr;
  int64_t a_batch = 0, a_rows = 0, a_cols = 0;
  int64_t lda = 0, a_batch_stride = 0;
  // B (mat2, logical [b_batch, K = b_rows, N = b_cols]): element (k, n) of batch g at
  // b + g·b_batch_stride + n·ldb + k (K contiguous). 0 strides mean contiguous.
  const void* b = nullptr;
  int64_t b_batch = 0, b_rows = 0, b_cols = 0;
  int64_t ldb = 0, b_batch_stride = 0;
  // offs: device int32 [offs_count] cumulative ends; null with count 0 for 3d_3d.
  const int32_t* offs = nullptr;
  int64_t offs_count = 0;
  // Scales (recipe table above): element counts of the buffers handed in.
  const void* a_scale = nullptr;
  int64_t a_scale_count = 0;
  const void* b_scale = nullptr;
  int64_t b_scale_count = 0;
  // out: bf16 [out_batch, out_rows, out_cols] or [out_rows, out_cols], leading dimension ldo,
  // batch stride out_batch_stride (0 = contiguous).
  void* out = nullptr;
  int64_t out_batch = 0, out_rows = 0, out_cols = 0;
  int64_t ldo = 0, out_batch_stride = 0;
  GroupedPlant plant = GroupedPlant::none;
};

/// An argument the implementation refuses: `argument` names it ("groups", "offs", "K", "N",
/// "mat_a", "mat_b", "out", "scale_a", "scale_b", "recipe"). Thrown before any output is written.
struct GroupedArgumentError : std::invalid_argument {
  GroupedArgumentError(std::string arg, const std::string& message)
      : std::invalid_argument(message), argument(std::move(arg)) {}
  std::string argument;
};

/// The multiple every offset must be of, for a mode and recipe (1: none): fp8_rowwise 2d_2d
/// splits K, which the fp8 tensor-core contract needs in multiples of 16 (PyTorch's K % 16);
/// mxfp8 needs 32 along every split (an MX block never straddles two groups along K, and
/// PyTorch's MXFP8 grouped tests use jagged offsets that are multiples of 32 along M too).
constexpr int64_t grouped_offs_multiple(GroupedMode mode, GroupedRecipe recipe) {
  if (mode == GroupedMode::m3d_3d) return 1;
  if (recipe == GroupedRecipe::mxfp8) return 32;
  if (recipe == GroupedRecipe::fp8_rowwise && mode == GroupedMode::m2d_2d) return 16;
  return 1;
}

/// What cuda.grouped_kernel takes (its `supports`): every mode and every recipe, on sm_80+
/// (mma.sync bf16); nothing else is a SKIP. True for every (mode, recipe).
bool grouped_kernel_takes(GroupedMode mode, GroupedRecipe recipe);
/// What cuda.cublas_grouped takes: recipe bf16 only, every mode; fp8/mx recipes are a SKIP
/// ("cuBLAS grouped GEMM has no scaled recipe").
bool cublas_grouped_takes(GroupedMode mode, GroupedRecipe recipe);

/// Both impls are deterministic: fixed reduction orders, no atomics (cuBLAS: bit-identical on
/// one GPU model and SM count, cuBLAS's documented reproducibility).
constexpr bool kGroupedKernelDeterministic = true;
constexpr bool kCublasGroupedDeterministic = true;

/// cuda.grouped_kernel: opcts's own kernel (mma.sync m16n8k16 with fp32 accumulation: bf16
/// operands as they are, e4m3 codes widened exactly to fp16 in shared memory). Tiles of 64×64
/// outputs map to groups on the device by scanning `offs` (no host copy of the offsets).
/// Validates as described above (the offsets' values on a stream of its own), then launches on
/// `stream`. Throws GroupedArgumentError, or std::runtime_error for a CUDA failure.
void grouped_mm_kernel(const GroupedMmParams& p, CUstream_st* stream);

/// The cuBLAS handle and workspace cuda.cublas_grouped runs with, created by the caller (in the
/// row's `supports`, before any stream is held: creation may synchronize the device) with
/// cublas_grouped_create and kept for the process.
struct CublasGroupedContext {
  cublasContext* handle = nullptr;
  void* workspace = nullptr;  // device memory, workspace_bytes
  int64_t workspace_bytes = 0;
};
/// The current device's context (made on first call, kept for the process). Throws
/// std::runtime_error if cuBLAS cannot be initialised.
CublasGroupedContext& cublas_grouped_context();

/// cuda.cublas_grouped: bf16 only. cublasGemmGroupedBatchedEx (CUDA ≥ 12.5; bf16 in, bf16 out,
/// CUBLAS_COMPUTE_32F) with one cuBLAS group per distinct problem shape; it needs the offsets
/// on the host, so it copies them (cudaMemcpyAsync + stream synchronize: allowed for this impl,
/// unlike cuda.grouped_kernel). Groups with an empty K (2d_2d) are zeroed with a memset, empty
/// M/N groups are skipped; a group whose pointers are not 16-byte aligned runs through
/// cublasGemmEx instead (the grouped call crashed on them). Validates the offsets' values on
/// the host after the copy. Throws
/// GroupedArgumentError, or std::runtime_error naming the cuBLAS status.
void grouped_mm_cublas(const GroupedMmParams& p, CUstream_st* stream, CublasGroupedContext& ctx);

/// The baseline of families/grouped_mm/bench/grouped_mm_bench.cpp (not a row): the same problem as one cublasGemmEx
/// per group (bf16, CUBLAS_COMPUTE_32F) on `stream`, with grouped_mm_cublas's checks.
void grouped_mm_cublas_loop(const GroupedMmParams& p, CUstream_st* stream, CublasGroupedContext& ctx);

}  // namespace opcts::cuda
