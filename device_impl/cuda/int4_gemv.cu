// cuda.int4_gemv: M <= 16 weight-only int4 matmul in one pass over the packed weight, split-K partial sums added in a fixed order.
//
// Grid (column units, K slices); each block of kWarps warps reads its unit's packed words for
// its slice coalesced (int4_mm_layout.cuh's table: 16-byte tinygemm fragments, 16-byte rows of
// unpacked bytes, 32-byte runs of AWQ words, 128-byte runs of GPTQ words, consecutive Q4_0
// blocks), dequantizes in registers and accumulates every row of x in fp32 FMA. Lanes sharing
// a column are summed with a butterfly over the lane bits that differ, warps through shared
// memory in warp order, and slices by a second kernel in slice order: no atomics, the same
// bytes on every run. Portable: no inline PTX; the shuffle is the only warp primitive.
#include <cuda_runtime.h>

#include <algorithm>
#include <stdexcept>
#include <string>

#include "device_impl/cuda/int4_mm_args.cuh"
#include "device_impl/cuda/int4_mm_layout.cuh"

namespace opcts::cuda {

namespace {

using int4mm::Args;
using int4mm::kLanes;
using int4mm::kThreads;
using int4mm::kWarps;

__device__ __forceinline__ float lane_xor(float v, int offset) {
#if defined(__HIP_PLATFORM_AMD__)
  return __shfl_xor(v, offset, kLanes);
#else
  return __shfl_xor_sync(0xFFFFFFFFu, v, offset, kLanes);
#endif
}

// The slot of a representative lane (Code::representative) in the shared buffer.
template <Int4Format F>
constexpr int kReps = F == Int4Format::gptq ? kLanes : F == Int4Format::tinygemm || F == Int4Format::awq ? 8 : 1;

template <Int4Format F>
__device__ __forceinline__ int rep_slot(int lane) {
  return F == Int4Format::tinygemm ? lane / 4 : F == Int4Format::awq || F == Int4Format::gptq ? lane : 0;
}

template <Int4Format F, class T, int MT, bool Planted>
__global__ void __launch_bounds__(kThreads) gemv_kernel(Args a, int64_t items, int64_t per_slice, float* ws) {
  using Code = int4mm::Code<F, T, Planted>;
  constexpr int C = Code::kCols;
  __shared__ float part[kWarps][kReps<F>][MT][C];
  const int warp = static_cast<int>(threadIdx.x) / kLanes, lane = static_cast<int>(threadIdx.x) % kLanes;
  const int64_t unit = blockIdx.x;
  const int64_t i0 = static_cast<int64_t>(blockIdx.y) * per_slice, i1 = i0 + per_slice < items ? i0 + per_slice : items;

  float acc[MT][C];
#pragma unroll
  for (int m = 0; m < MT; ++m)
#pragma unroll
    for (int c = 0; c < C; ++c) acc[m][c] = 0.0f;
  for (int64_t item = i0 + warp; item < i1; item += kWarps) Code::template gemv_item<MT>(a, unit, item, lane, acc);

#pragma unroll
  for (int off = 1; off < kLanes; off <<= 1)
    if (Code::kShareMask & off)
#pragma unroll
      for (int m = 0; m < MT; ++m)
#pragma unroll
        for (int c = 0; c < C; ++c) acc[m][c] += lane_xor(acc[m][c], off);

  if (Code::representative(lane))
#pragma unroll
    for (int m = 0; m < MT; ++m)
#pragma unroll
      for (int c = 0; c < C; ++c) part[warp][rep_slot<F>(lane)][m][c] = acc[m][c];
  __syncthreads();
  if (warp != 0 || !Code::representative(lane)) return;
  for (int m = 0; m < MT && m < a.m; ++m)
    for (int c = 0; c < C; ++c) {
      const int64_t col = Code::column(unit, lane, c);
      if (col >= a.n) continue;
      float s = part[0][rep_slot<F>(lane)][m][c];
      for (int w = 1; w < kWarps; ++w) s += part[w][rep_slot<F>(lane)][m][c];
      ws[(static_cast<int64_t>(blockIdx.y) * a.m + m) * a.n + col] = s;
    }
}

template <class T>
__global__ void gemv_finalize(const float* ws, int64_t slices, int64_t m, int64_t n, T* y, int64_t ldy) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < m * n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    float s = ws[i];
    for (int64_t sl = 1; sl < slices; ++sl) s += ws[sl * m * n + i];
    y[(i / n) * ldy + i % n] = int4mm::round_to<T>(s);
  }
}

struct Plan {
  int64_t units, items, slices, per_slice;
};

template <Int4Format F>
Plan plan_format(const Args& a, int sms) {
  using Code = int4mm::Code<F, __half, false>;  // the work split does not depend on T
  Plan p{Code::units(a), Code::items(a), 1, 1};
  // About 8 blocks (32 warps) per SM keep enough loads in flight for the memory system; a slice
  // keeps at least one item per warp.
  const int64_t want = (8 * static_cast<int64_t>(sms) + p.units - 1) / p.units;
  p.slices = std::max<int64_t>(1, std::min<int64_t>({want, (p.items + kWarps - 1) / kWarps, 65535}));
  p.per_slice = (p.items + p.slices - 1) / p.slices;
  p.slices = (p.items + p.per_slice - 1) / p.per_slice;
  return p;
}

Plan plan(const Args& a, Int4Format format) {
  int dev = 0, sms = 132;
  if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess) {
    cudaGetLastError();
    sms = 132;
  }
  switch (format) {
    case Int4Format::tinygemm: return plan_format<Int4Format::tinygemm>(a, sms);
    case Int4Format::tinygemm_unpacked: return plan_format<Int4Format::tinygemm_unpacked>(a, sms);
    case Int4Format::awq: return plan_format<Int4Format::awq>(a, sms);
    case Int4Format::gptq: return plan_format<Int4Format::gptq>(a, sms);
    case Int4Format::q4_0: return plan_format<Int4Format::q4_0>(a, sms);
  }
  return {};
}

template <Int4Format F, class T>
void launch_rows(const Args& a, const Plan& pl, float* ws, cudaStream_t s) {
  const dim3 grid(static_cast<unsigned>(pl.units), static_cast<unsigned>(pl.slices));
  // Rows of x held per thread: the next power of two >= M (rows past M are skipped). Planted
  // variants take two row counts only (1 and 16), so the real kernels carry no plant test.
  if (a.plant != Int4Plant::none) {
    if (a.m <= 1) gemv_kernel<F, T, 1, true><<<grid, kThreads, 0, s>>>(a, pl.items, pl.per_slice, ws);
    else gemv_kernel<F, T, 16, true><<<grid, kThreads, 0, s>>>(a, pl.items, pl.per_slice, ws);
  } else if (a.m <= 1) gemv_kernel<F, T, 1, false><<<grid, kThreads, 0, s>>>(a, pl.items, pl.per_slice, ws);
  else if (a.m <= 2) gemv_kernel<F, T, 2, false><<<grid, kThreads, 0, s>>>(a, pl.items, pl.per_slice, ws);
  else if (a.m <= 4) gemv_kernel<F, T, 4, false><<<grid, kThreads, 0, s>>>(a, pl.items, pl.per_slice, ws);
  else if (a.m <= 8) gemv_kernel<F, T, 8, false><<<grid, kThreads, 0, s>>>(a, pl.items, pl.per_slice, ws);
  else gemv_kernel<F, T, 16, false><<<grid, kThreads, 0, s>>>(a, pl.items, pl.per_slice, ws);
}

template <class T>
void launch_format(Int4Format format, const Args& a, const Plan& pl, float* ws, cudaStream_t s) {
  switch (format) {
    case Int4Format::tinygemm: launch_rows<Int4Format::tinygemm, T>(a, pl, ws, s); break;
    case Int4Format::tinygemm_unpacked: launch_rows<Int4Format::tinygemm_unpacked, T>(a, pl, ws, s); break;
    case Int4Format::awq: launch_rows<Int4Format::awq, T>(a, pl, ws, s); break;
    case Int4Format::gptq: launch_rows<Int4Format::gptq, T>(a, pl, ws, s); break;
    case Int4Format::q4_0: launch_rows<Int4Format::q4_0, T>(a, pl, ws, s); break;
  }
}

template <class T>
void finalize(const Int4MmParams& p, const Plan& pl, cudaStream_t s) {
  const int64_t total = p.m * p.n;
  const unsigned blocks = static_cast<unsigned>(std::min<int64_t>((total + 255) / 256, 4096));
  gemv_finalize<T><<<blocks, 256, 0, s>>>(static_cast<const float*>(p.workspace), pl.slices, p.m, p.n, static_cast<T*>(p.y), p.ldy);
}

void check_launch(const char* what) {
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess)
    throw std::runtime_error(std::string("cuda.int4_gemv ") + what + ": " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")");
}

}  // namespace

bool int4_gemv_takes(Int4Format f, int64_t group_size) { return int4mm::takes(f, group_size); }

int64_t int4_gemv_workspace_bytes(const Int4MmParams& p) {
  if (p.m <= 0 || p.n <= 0 || p.k <= 0) return 0;
  return plan(int4mm::make_args(p), p.format).slices * p.m * p.n * static_cast<int64_t>(sizeof(float));
}

void int4_gemv(const Int4MmParams& p, CUstream_st* stream) {
  int4mm::validate(p, "cuda.int4_gemv");
  if (p.m > kInt4GemvMaxM) throw Int4ArgumentError("M", "cuda.int4_gemv: M = " + std::to_string(p.m) + " > 16");
  if (p.m == 0 || p.n == 0) return;
  const Args a = int4mm::make_args(p);
  const Plan pl = plan(a, p.format);
  const int64_t need = pl.slices * p.m * p.n * static_cast<int64_t>(sizeof(float));
  if (!p.workspace || p.workspace_bytes < need)
    throw Int4ArgumentError("workspace", "cuda.int4_gemv: needs " + std::to_string(need) + " bytes of workspace, got " +
                                             std::to_string(p.workspace_bytes));
  float* ws = static_cast<float*>(p.workspace);
  if (p.act == Int4Act::bf16) {
    launch_format<__nv_bfloat16>(p.format, a, pl, ws, stream);
    check_launch("launch");
    finalize<__nv_bfloat16>(p, pl, stream);
  } else {
    launch_format<__half>(p.format, a, pl, ws, stream);
    check_launch("launch");
    finalize<__half>(p, pl, stream);
  }
  check_launch("finalize");
}

}  // namespace opcts::cuda
