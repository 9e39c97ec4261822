// cuda.int4_mm: weight-only int4 matmul on tensor cores (mma.sync m16n8k16, fp32 accumulation), the weight dequantized
// tile by tile into shared memory.
//
// A block of 4 warps computes a 64×64 tile of y. Per 32-deep K slice it stages x[64][32] and
// the dequantized weight Ŵ[64 columns][32 k] (int4_mm_layout.cuh, mm_tile_part: one rounding
// per weight, as the reference's model) in shared memory, K contiguous with a row stride of 40
// elements (the fragment loads of a warp hit 32 distinct banks), in two stages: the next
// slice's x and packed words are read while the current one is multiplied. Each warp loads its
// fragments for 16 k with ldmatrix (2 A and 2 × 2 B, once each) and runs 2 × 4 m16n8k16 MMAs
// over its 32×32 quarter (gpu/portable/mma_tile.cuh's warp tile). The planted
// instantiation (Planted = true, the cuda.int4_mm_* rows) also carries the plants that live in
// this kernel's structure: x's last K element dropped, x and Ŵ rounded to bf16, the
// accumulators rounded to the dtype every 64 K or per quarter of K. Where mma.sync is
// missing (HIP) the tile header loads the same fragments with 32-bit loads and emulates the
// MMAs with fp32 FMA, so the kernel builds everywhere with one numerical model: exact products,
// fp32 sums.
#include "gpu/portable/gpu.hpp"

#include <stdexcept>
#include <string>

#include "families/int4_mm/cuda/int4_mm_args.cuh"
#include "families/int4_mm/cuda/int4_mm_layout.cuh"
#include "gpu/portable/mma_tile.cuh"

namespace opcts::cuda {

namespace {

using int4mm::Args;
using int4mm::kLanes;
using int4mm::kThreads;
using int4mm::kTileK;
using int4mm::kTileLd;
using int4mm::kTileN;

constexpr int kTileM = 64;
constexpr auto kLoad = gpu::mma::Load::ldmatrix;

// x[m0 .. m0 + 64)[k0 .. k0 + 32) for As (rows past M as 0): thread tid reads 16 elements of
// row tid / 2 as two 16-byte loads (K is a multiple of 32, rows are 64-byte aligned) and
// store_x_tile writes them.
template <class T>
__device__ __forceinline__ void load_x_tile(const Args& a, int64_t m0, int64_t k0, int tid, int4mm::Words4 (&v)[2]) {
  const int r = tid / 2, c = 16 * (tid % 2);
  v[0] = v[1] = int4mm::Words4{};
  if (m0 + r < a.m) {
    const auto* src = reinterpret_cast<const int4mm::Words4*>(static_cast<const T*>(a.x) + (m0 + r) * a.k + k0 + c);
    v[0] = src[0];
    v[1] = src[1];
  }
}

template <class T>
__device__ __forceinline__ void store_x_tile(const int4mm::Words4 (&v)[2], int tid, T* As) {
  const int r = tid / 2, c = 16 * (tid % 2);
  auto* dst = reinterpret_cast<int4mm::Words4*>(As + r * kTileLd + c);  // 80-byte rows, 32-byte offsets
  dst[0] = v[0];
  dst[1] = v[1];
}

__device__ __forceinline__ uint16_t bits_of(__nv_bfloat16 v) { return __bfloat16_as_ushort(v); }
__device__ __forceinline__ uint16_t bits_of(__half v) { return __half_as_ushort(v); }

// A T value's bits rounded to bf16 and back (the fp16_as_bf16 plant; exact for bf16 itself).
template <class T>
__device__ __forceinline__ uint16_t via_bf16(uint16_t bits) {
  const float f = int4mm::to_float(int4mm::round_to<__nv_bfloat16>(int4mm::bits_to_float<T>(bits)));
  return bits_of(int4mm::round_to<T>(f));
}

// The planted kernel's change to a thread's x words of slice k0 (load_x_tile's v): drop_last_k
// zeroes x[:, K − 1], fp16_as_bf16 rounds every x to bf16. Element e of 32-bit word w of v[h]
// is x[., k0 + c + 8h + 2w + e] (little-endian halves).
template <class T>
__device__ __forceinline__ void plant_x(const Args& a, int64_t k0, int tid, int4mm::Words4 (&v)[2]) {
  const int c = 16 * (tid % 2);
  for (int h = 0; h < 2; ++h)
    for (int w = 0; w < 4; ++w)
      for (int e = 0; e < 2; ++e) {
        uint32_t& word = v[h].w[w];
        uint16_t bits = static_cast<uint16_t>(word >> (16 * e));
        if (a.plant == Int4Plant::drop_last_k && k0 + c + 8 * h + 2 * w + e == a.k - 1) bits = 0;
        if (a.plant == Int4Plant::fp16_as_bf16) bits = via_bf16<T>(bits);
        word = (word & ~(0xFFFFu << (16 * e))) | static_cast<uint32_t>(bits) << (16 * e);
      }
}

// The fp16_as_bf16 plant on a dequantized weight tile in shared memory (after a barrier).
template <class T>
__device__ __forceinline__ void plant_tile_bf16(int tid, T* Bs) {
  for (int i = tid; i < kTileN * kTileLd; i += kThreads) {
    const uint16_t b = via_bf16<T>(bits_of(Bs[i]));
    Bs[i] = int4mm::round_to<T>(int4mm::bits_to_float<T>(b));
  }
}

// A warp tile's accumulators rounded to T (the sum_in_dtype_64 and split_k4_in_dtype plants).
template <class T>
__device__ __forceinline__ void round_acc(float (&v)[2][4][4]) {
  for (int mi = 0; mi < 2; ++mi)
    for (int ni = 0; ni < 4; ++ni)
      for (int e = 0; e < 4; ++e) v[mi][ni][e] = int4mm::to_float(int4mm::round_to<T>(v[mi][ni][e]));
}

template <Int4Format F, class T, bool Planted>
__global__ void __launch_bounds__(kThreads) mm_kernel(Args a, T* y, int64_t ldy) {
  using Code = int4mm::Code<F, T, Planted>;
  // Two stages: while the warps multiply slice k0 out of one, the next slice's x and packed
  // words are read into registers, then dequantized into the other (one barrier per slice).
  __shared__ __align__(16) T As[2][kTileM * kTileLd];
  __shared__ __align__(16) T Bs[2][kTileN * kTileLd];
  const int tid = static_cast<int>(threadIdx.x), warp = tid / kLanes, lane = tid % kLanes;  // mma lanes: 32
  const int64_t m0 = static_cast<int64_t>(blockIdx.y) * kTileM, n0 = static_cast<int64_t>(blockIdx.x) * kTileN;
  const int wr = 32 * (warp / 2), wc = 32 * (warp % 2);  // this warp's quarter of the tile
  float acc[2][4][4] = {};
  // The planted structures (the real kernel, Planted = false, has none of this): split_k4's
  // sum of the rounded slices and the end of the current slice.
  [[maybe_unused]] float total[2][4][4] = {};
  [[maybe_unused]] int64_t slice_end = (a.k + 3) / 4;
  int4mm::Words4 xv[2];
  typename Code::MmWord wv[2];
  if (a.k_end > 0) {
    load_x_tile<T>(a, m0, 0, tid, xv);
    if constexpr (Planted) plant_x<T>(a, 0, tid, xv);
    store_x_tile(xv, tid, As[0]);
    Code::mm_tile_part(a, n0, 0, tid, Bs[0]);
    if constexpr (Planted)
      if (a.plant == Int4Plant::fp16_as_bf16) {
        __syncthreads();
        plant_tile_bf16<T>(tid, Bs[0]);
      }
  }
  __syncthreads();
  int cur = 0;
  for (int64_t k0 = 0; k0 < a.k_end; k0 += kTileK, cur ^= 1) {
    const bool more = k0 + kTileK < a.k_end;
    if (more) {
      load_x_tile<T>(a, m0, k0 + kTileK, tid, xv);
      if constexpr (Planted) plant_x<T>(a, k0 + kTileK, tid, xv);
      for (int r = 0; r < 2; ++r) wv[r] = Code::mm_load(a, n0, k0 + kTileK, tid, r);
    }
    const T* at = As[cur];
    const T* bt = Bs[cur];
#pragma unroll
    for (int kk = 0; kk < kTileK; kk += 16) {
      // The warp's fragments for this kk loaded once each (2 A, 2 × 2 B), then its 8 MMAs.
      uint32_t af[2][4], bf[2][4];
#pragma unroll
      for (int mi = 0; mi < 2; ++mi) gpu::mma::load_a<kLoad, kTileLd>(af[mi], at, wr + 16 * mi, kk, lane);
#pragma unroll
      for (int nj = 0; nj < 2; ++nj) gpu::mma::load_b2<kLoad, kTileLd>(bf[nj], bt, wc + 16 * nj, kk, lane);
#pragma unroll
      for (int mi = 0; mi < 2; ++mi)
#pragma unroll
        for (int ni = 0; ni < 4; ++ni)
          gpu::mma::mma_m16n8k16<T>(acc[mi][ni], af[mi], bf[ni / 2][2 * (ni % 2)], bf[ni / 2][2 * (ni % 2) + 1]);
    }
    if constexpr (Planted) {
      if (a.plant == Int4Plant::sum_in_dtype_64 && (k0 + kTileK) % 64 == 0) round_acc<T>(acc);
      if (a.plant == Int4Plant::split_k4_in_dtype && (k0 + kTileK >= slice_end || !more)) {
        round_acc<T>(acc);
        for (int mi = 0; mi < 2; ++mi)
          for (int ni = 0; ni < 4; ++ni)
            for (int e = 0; e < 4; ++e) {
              total[mi][ni][e] += acc[mi][ni][e];
              acc[mi][ni][e] = 0;
            }
        slice_end += (a.k + 3) / 4;
      }
    }
    if (more) {  // the other stage was last read before the previous barrier
      store_x_tile(xv, tid, As[cur ^ 1]);
      for (int r = 0; r < 2; ++r) Code::mm_store(a, wv[r], n0, k0 + kTileK, tid, r, Bs[cur ^ 1]);
      if constexpr (Planted)
        if (a.plant == Int4Plant::fp16_as_bf16) {
          __syncthreads();
          plant_tile_bf16<T>(tid, Bs[cur ^ 1]);
        }
    }
    __syncthreads();
  }
  if constexpr (Planted)
    if (a.plant == Int4Plant::split_k4_in_dtype)
      for (int mi = 0; mi < 2; ++mi)
        for (int ni = 0; ni < 4; ++ni)
          for (int e = 0; e < 4; ++e) acc[mi][ni][e] = total[mi][ni][e];
  // mma_tile.cuh's each_acc walk written out: through its lambda nvcc compiles this kernel to
  // other sm_90 code (the header keeps the code the kernel had).
  const int g = lane / 4, t = lane % 4;
#pragma unroll
  for (int mi = 0; mi < 2; ++mi)
#pragma unroll
    for (int ni = 0; ni < 4; ++ni)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int64_t m = m0 + wr + 16 * mi + g + 8 * (e / 2), n = n0 + wc + 8 * ni + 2 * t + e % 2;
        if (m < a.m && n < a.n) y[m * ldy + n] = int4mm::round_to<T>(acc[mi][ni][e]);
      }
}

template <Int4Format F, class T>
void launch_planted(const Args& a, T* y, int64_t ldy, dim3 grid, cudaStream_t s) {
  if (a.plant != Int4Plant::none) mm_kernel<F, T, true><<<grid, kThreads, 0, s>>>(a, y, ldy);
  else mm_kernel<F, T, false><<<grid, kThreads, 0, s>>>(a, y, ldy);
}

template <class T>
void launch_format(Int4Format f, const Args& a, T* y, int64_t ldy, dim3 grid, cudaStream_t s) {
  switch (f) {
    case Int4Format::tinygemm: launch_planted<Int4Format::tinygemm>(a, y, ldy, grid, s); break;
    case Int4Format::tinygemm_unpacked: launch_planted<Int4Format::tinygemm_unpacked>(a, y, ldy, grid, s); break;
    case Int4Format::awq: launch_planted<Int4Format::awq>(a, y, ldy, grid, s); break;
    case Int4Format::gptq: launch_planted<Int4Format::gptq>(a, y, ldy, grid, s); break;
    case Int4Format::q4_0: launch_planted<Int4Format::q4_0>(a, y, ldy, grid, s); break;
  }
}

}  // namespace

bool int4_mm_takes(Int4Format f, int64_t group_size) { return int4mm::takes(f, group_size); }

void int4_mm(const Int4MmParams& p, CUstream_st* stream) {
  int4mm::validate(p, "cuda.int4_mm");
  if (p.m == 0 || p.n == 0) return;
  const int64_t gy = (p.m + kTileM - 1) / kTileM, gx = (p.n + kTileN - 1) / kTileN;
  if (gy > 65535) throw Int4ArgumentError("M", "cuda.int4_mm: M = " + std::to_string(p.m) + " exceeds 65535 row tiles");
  const Args a = int4mm::make_args(p);
  const dim3 grid(static_cast<unsigned>(gx), static_cast<unsigned>(gy));
  if (p.act == Int4Act::bf16)
    launch_format<__nv_bfloat16>(p.format, a, static_cast<__nv_bfloat16*>(p.y), p.ldy, grid, stream);
  else launch_format<__half>(p.format, a, static_cast<__half*>(p.y), p.ldy, grid, stream);
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess)
    throw std::runtime_error(std::string("cuda.int4_mm launch: ") + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) +
                             ")");
}

}  // namespace opcts::cuda
