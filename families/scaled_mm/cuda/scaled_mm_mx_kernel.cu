// opcts's portable scaled GEMM: dequantizes fp8/fp4 codes × block scales into shared memory and accumulates in fp32
// FMA.
//
// One block computes a 128×128 tile of D with 256 threads (8×8 outputs each), walking K in
// slices of 32. Each slice is fetched as raw codes into registers while the previous slice is
// being multiplied, then decoded (shared-memory tables, exact for every code, NaN and Inf
// included) and multiplied by the element's block scale before it is stored in shared memory,
// so the inner loop is plain fp32 FMA on already-dequantized values. This trades the tensor
// cores for generality: any scale mode with any element type and layout, any M, N, K.
// Only portable constructs (no inline PTX, no wmma): hipcc builds it (gpu/portable/gpu.hpp).
#include "gpu/portable/gpu.hpp"
#if !OPCTS_GPU_HIP
#include <cuda_fp8.h>
#endif

#include <cstdint>
#include <string>

#include "families/scaled_mm/cuda/scaled_mm_kernels.hpp"
#include "numerics/minifloat_bits.hpp"

namespace opcts::cuda {

namespace {

constexpr int kBM = 128, kBN = 128, kBK = 32, kPad = 4, kThreads = 256;
constexpr int kTileLd = kBM + kPad;  // keeps float4 alignment (132·4 B) and spreads banks

// How an operand's codes sit in memory: K-contiguous 8-bit, outer-dim-contiguous 8-bit,
// K-contiguous packed e2m1.
enum OperandKind { kKMajor8 = 0, kOuterMajor8 = 1, kKMajor4 = 2 };

struct Operand {
  const uint8_t* p;
  int64_t ld;    // elements
  int64_t rows;  // M for A, N for B
  MmScaleMode mode;
  const void* scale;
  bool vec;  // the fast path's vector loads are aligned (base and ld)
};

__device__ float decode_e4m3(unsigned c) {
  const unsigned e = (c >> 3) & 15u, m = c & 7u;
  float v;
  if ((c & 0x7Fu) == 0x7Fu) v = __int_as_float(0x7FC00000);
  else if (e == 0) v = ldexpf(static_cast<float>(m), -9);
  else v = ldexpf(1.0f + static_cast<float>(m) / 8.0f, static_cast<int>(e) - 7);
  return (c & 0x80u) ? -v : v;
}

__device__ float decode_e5m2(unsigned c) {
  const unsigned e = (c >> 2) & 31u, m = c & 3u;
  float v;
  if (e == 31) v = m == 0 ? __int_as_float(0x7F800000) : __int_as_float(0x7FC00000);
  else if (e == 0) v = ldexpf(static_cast<float>(m), -16);
  else v = ldexpf(1.0f + static_cast<float>(m) / 4.0f, static_cast<int>(e) - 15);
  return (c & 0x80u) ? -v : v;
}

__device__ float decode_e2m1(unsigned c) {
  const unsigned e = (c >> 1) & 3u, m = c & 1u;
  const float v =
      e == 0 ? 0.5f * static_cast<float>(m) : ldexpf(1.0f + 0.5f * static_cast<float>(m), static_cast<int>(e) - 1);
  return (c & 8u) ? -v : v;
}

__device__ float decode_elem(MmElem t, unsigned c) {
  switch (t) {
    case MmElem::e4m3: return decode_e4m3(c);
    case MmElem::e5m2: return decode_e5m2(c);
    case MmElem::e2m1: return decode_e2m1(c & 15u);
  }
  return 0.0f;
}

// e8m0: 2^(c-127), 0xFF is NaN; code 0 is 2^-127, an fp32 subnormal that ldexpf produces exactly.
__device__ float decode_e8m0(unsigned c) {
  return c == 0xFFu ? __int_as_float(0x7FC00000) : ldexpf(1.0f, static_cast<int>(c) - 127);
}

// cuBLAS "1D block scaling factors layout": 128×4 tiles of 512 contiguous bytes.
__device__ int64_t swizzled_offset(int64_t r, int64_t c, int64_t scale_cols) {
  const int64_t padded_cols = (scale_cols + 3) / 4 * 4;
  return ((r / 128) * (padded_cols / 4) + c / 4) * 512 + (r % 32) * 16 + ((r % 128) / 32) * 4 + (c % 4);
}

// The dequant scale of element (r, k) of an operand with `rows` rows and K columns.
__device__ float load_scale(const Operand& op, int64_t r, int64_t k, int64_t K, const float* tab_ue4m3) {
  const float* f = static_cast<const float*>(op.scale);
  const uint8_t* b = static_cast<const uint8_t*>(op.scale);
  switch (op.mode) {
    case MmScaleMode::scalar_f32: return f[0];
    case MmScaleMode::outer_vec_f32: return f[r];
    case MmScaleMode::vec128_f32: return f[r + (k / 128) * op.rows];
    case MmScaleMode::blk128x128_f32: return f[(r / 128) * ((K + 127) / 128) + k / 128];
    case MmScaleMode::vec32_ue8m0: return decode_e8m0(b[swizzled_offset(r, k / 32, (K + 31) / 32)]);
    case MmScaleMode::vec16_ue4m3: return tab_ue4m3[b[swizzled_offset(r, k / 16, (K + 15) / 16)]];
  }
  return 0.0f;
}

// One thread's share of a 32-deep K slice: 16 codes (raw bytes) and, for K-major operands,
// the one scale they share (16 consecutive k at a multiple of 16 lie in one block of every mode).
struct Fetched {
  uint4 raw;
  float scale;
};

__device__ uint8_t raw_byte(const uint4& v, int i) {
  const unsigned w = i < 4 ? v.x : i < 8 ? v.y : i < 12 ? v.z : v.w;
  return static_cast<uint8_t>(w >> (8 * (i & 3)));
}

__device__ void set_raw_byte(uint4& v, int i, uint8_t b) {
  unsigned& w = i < 4 ? v.x : i < 8 ? v.y : i < 12 ? v.z : v.w;
  const int sh = 8 * (i & 3);
  w = (w & ~(0xFFu << sh)) | (static_cast<unsigned>(b) << sh);
}

// K-major: thread t covers row (t % 128), k = k0 + 16·(t / 128) .. +16.
// Outer-major: thread t covers k = k0 + t / 8 and rows (t % 8)·16 .. +16.
template <int KIND>
__device__ void fetch(const Operand& op, int64_t row0, int64_t k0, int64_t K, const float* tab_ue4m3, Fetched& f) {
  const int t = threadIdx.x;
  f.raw = make_uint4(0, 0, 0, 0);
  f.scale = 0.0f;
  if (KIND == kOuterMajor8) {
    const int64_t k = k0 + t / 8, r = row0 + (t % 8) * 16;
    if (k >= K) return;
    const uint8_t* src = op.p + k * op.ld + r;
    if (op.vec && r + 16 <= op.rows) {
      f.raw = *reinterpret_cast<const uint4*>(src);
    } else {
#pragma unroll
      for (int j = 0; j < 16; ++j)
        if (r + j < op.rows) set_raw_byte(f.raw, j, src[j]);
    }
    return;
  }
  const int64_t r = row0 + t % 128, k = k0 + (t / 128) * 16;
  if (r >= op.rows || k >= K) return;
  f.scale = load_scale(op, r, k, K, tab_ue4m3);
  if (KIND == kKMajor8) {
    const uint8_t* src = op.p + r * op.ld + k;
    if (op.vec && k + 16 <= K) {
      f.raw = *reinterpret_cast<const uint4*>(src);
    } else {
#pragma unroll
      for (int j = 0; j < 16; ++j)
        if (k + j < K) set_raw_byte(f.raw, j, src[j]);
    }
  } else {
    const uint8_t* src = op.p + (r * op.ld + k) / 2;  // ld and k are even
    if (op.vec && k + 16 <= K) {
      const uint2 v = *reinterpret_cast<const uint2*>(src);
      f.raw.x = v.x;
      f.raw.y = v.y;
    } else {
#pragma unroll
      for (int j = 0; j < 8; ++j)
        if (k + 2 * j < K) set_raw_byte(f.raw, j, src[j]);
    }
  }
}

// Decodes the fetched codes, applies the scales and stores the slice as tile[k][row].
// Out-of-range elements become 0 without touching their scale (padding may hold anything).
template <int KIND>
__device__ void commit(const Operand& op, const Fetched& f, int64_t row0, int64_t k0, int64_t K, const float* tab,
                       const float* tab_ue4m3, float (*tile)[kTileLd]) {
  const int t = threadIdx.x;
  if (KIND == kOuterMajor8) {
    const int kl = t / 8, c0 = (t % 8) * 16;
    const int64_t k = k0 + kl;
    // scalar and 128×128 scales are uniform over these 16 rows (16-aligned inside a 128 block);
    // the other modes vary per row. Not unrolled: the per-row scale switch would bloat registers.
    const bool uniform = op.mode == MmScaleMode::scalar_f32 || op.mode == MmScaleMode::blk128x128_f32;
    const bool any = k < K && row0 + c0 < op.rows;
    const float s0 = any && uniform ? load_scale(op, row0 + c0, k, K, tab_ue4m3) : 0.0f;
    for (int j = 0; j < 16; ++j) {
      const int64_t r = row0 + c0 + j;
      float v = 0.0f;
      if (k < K && r < op.rows) v = tab[raw_byte(f.raw, j)] * (uniform ? s0 : load_scale(op, r, k, K, tab_ue4m3));
      tile[kl][c0 + j] = v;
    }
    return;
  }
  const int rl = t % 128, kl0 = (t / 128) * 16;
  const int64_t r = row0 + rl, k = k0 + kl0;
  const bool row_ok = r < op.rows;
#pragma unroll
  for (int j = 0; j < 16; ++j) {
    float v = 0.0f;
    if (row_ok && k + j < K) {
      const unsigned code = KIND == kKMajor8 ? raw_byte(f.raw, j) : (raw_byte(f.raw, j / 2) >> (4 * (j & 1))) & 15u;
      v = tab[code] * f.scale;
    }
    tile[kl0 + j][rl] = v;
  }
}

struct Epilogue {
  MmOut out;
  void* d;
  int64_t ldd;
  float global_scale;
  const float* global_scale_dev;  // when set, the scale (read on the device at run time)
  const float* d_scale;
  const void* bias;
};

__device__ float bias_at(const Epilogue& e, int64_t n) {
  if (!e.bias) return 0.0f;
  if (e.out == MmOut::bf16) return __bfloat162float(static_cast<const __nv_bfloat16*>(e.bias)[n]);
  return __half2float(static_cast<const __half*>(e.bias)[n]);
}

// x to e4m3fn, RNE, satfinite (HIP 5.2 has no fp8 conversion: numerics/minifloat_bits.hpp's, the
// same rounding and specials).
__device__ uint8_t to_e4m3_satfinite(float x) {
#if OPCTS_GPU_HIP
  return static_cast<uint8_t>(bits::encode_fp32(__float_as_uint(x), bits::kE4m3fn, /*satfinite=*/true));
#else
  return __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3);
#endif
}

__device__ void store(const Epilogue& e, int64_t m, int64_t n, float v, float dscale) {
  const int64_t at = m * e.ldd + n;
  switch (e.out) {
    case MmOut::bf16: static_cast<__nv_bfloat16*>(e.d)[at] = __float2bfloat16_rn(v); break;
    case MmOut::fp16: static_cast<__half*>(e.d)[at] = __float2half_rn(v); break;
    case MmOut::fp32: static_cast<float*>(e.d)[at] = v; break;
    case MmOut::e4m3: static_cast<uint8_t*>(e.d)[at] = to_e4m3_satfinite(dscale * v); break;
  }
}

template <int KA, int KB>
__global__ void OPCTS_LAUNCH_BOUNDS(kThreads, 2)
    scaled_mm_tile_kernel(Operand A, MmElem a_elem, Operand B, MmElem b_elem, int64_t K, Epilogue ep) {
  __shared__ __align__(16) float As[kBK][kTileLd];
  __shared__ __align__(16) float Bs[kBK][kTileLd];
  __shared__ float tab_a[256], tab_b[256], tab_ue4m3[256];

  const int t = threadIdx.x;
  tab_a[t] = decode_elem(a_elem, t);
  tab_b[t] = decode_elem(b_elem, t);
  tab_ue4m3[t] = decode_e4m3(t);
  __syncthreads();

  const int64_t m0 = static_cast<int64_t>(blockIdx.y) * kBM, n0 = static_cast<int64_t>(blockIdx.x) * kBN;
  const int tx = t % 16, ty = t / 16;
  float acc[8][8];
#pragma unroll
  for (int i = 0; i < 8; ++i)
#pragma unroll
    for (int j = 0; j < 8; ++j) acc[i][j] = 0.0f;

  const int64_t slices = (K + kBK - 1) / kBK;
  Fetched fa, fb;
  if (slices > 0) {
    fetch<KA>(A, m0, 0, K, tab_ue4m3, fa);
    fetch<KB>(B, n0, 0, K, tab_ue4m3, fb);
  }
  for (int64_t s = 0; s < slices; ++s) {
    const int64_t k0 = s * kBK;
    __syncthreads();  // the previous slice's FMAs are done with As/Bs
    commit<KA>(A, fa, m0, k0, K, tab_a, tab_ue4m3, As);
    commit<KB>(B, fb, n0, k0, K, tab_b, tab_ue4m3, Bs);
    __syncthreads();
    if (s + 1 < slices) {  // next slice's loads overlap this slice's FMAs
      fetch<KA>(A, m0, k0 + kBK, K, tab_ue4m3, fa);
      fetch<KB>(B, n0, k0 + kBK, K, tab_ue4m3, fb);
    }
#pragma unroll 8
    for (int kk = 0; kk < kBK; ++kk) {
      const float4 a0 = *reinterpret_cast<const float4*>(&As[kk][ty * 4]);
      const float4 a1 = *reinterpret_cast<const float4*>(&As[kk][64 + ty * 4]);
      const float4 b0 = *reinterpret_cast<const float4*>(&Bs[kk][tx * 4]);
      const float4 b1 = *reinterpret_cast<const float4*>(&Bs[kk][64 + tx * 4]);
      const float a[8] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
      const float b[8] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w};
#pragma unroll
      for (int i = 0; i < 8; ++i)
#pragma unroll
        for (int j = 0; j < 8; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
    }
  }

  const float dscale = (ep.out == MmOut::e4m3 && ep.d_scale) ? *ep.d_scale : 1.0f;
  const float global_scale = ep.global_scale_dev ? *ep.global_scale_dev : ep.global_scale;
  // fully unrolled so that acc stays in registers
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    const int64_t n = n0 + (j < 4 ? tx * 4 + j : 64 + tx * 4 + j - 4);
    if (n >= B.rows) continue;
    const float bias = bias_at(ep, n);
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const int64_t m = m0 + (i < 4 ? ty * 4 + i : 64 + ty * 4 + i - 4);
      if (m < A.rows) store(ep, m, n, acc[i][j] * global_scale + bias, dscale);
    }
  }
}

int operand_kind(MmElem e, bool k_major) {
  if (e == MmElem::e2m1) return kKMajor4;
  return k_major ? kKMajor8 : kOuterMajor8;
}

template <int KA, int KB>
void launch(const Operand& A, MmElem ae, const Operand& B, MmElem be, int64_t K, const Epilogue& ep, dim3 grid,
            cudaStream_t s) {
  scaled_mm_tile_kernel<KA, KB><<<grid, kThreads, 0, s>>>(A, ae, B, be, K, ep);
}

template <int KA>
void launch_b(int kb, const Operand& A, MmElem ae, const Operand& B, MmElem be, int64_t K, const Epilogue& ep,
              dim3 grid, cudaStream_t s) {
  switch (kb) {
    case kKMajor8: launch<KA, kKMajor8>(A, ae, B, be, K, ep, grid, s); break;
    case kOuterMajor8: launch<KA, kOuterMajor8>(A, ae, B, be, K, ep, grid, s); break;
    default: launch<KA, kKMajor4>(A, ae, B, be, K, ep, grid, s); break;
  }
}

bool aligned(const void* p, uintptr_t a) { return reinterpret_cast<uintptr_t>(p) % a == 0; }

void require(bool ok, const char* arg, const std::string& why) {
  if (!ok) throw MmArgumentError(arg, std::string("scaled_mm_mx_kernel: ") + why);
}

}  // namespace

void scaled_mm_mx_kernel(const ScaledMmParams& p, CUstream_st* stream) {
  require(p.m >= 0, "M", "M must be >= 0");
  require(p.n >= 0, "N", "N must be >= 0");
  require(p.k >= 0, "K", "K must be >= 0");
  require(p.a_elem != MmElem::e2m1 || p.a_k_major, "layout", "e2m1 A must be K-major (packed along K)");
  require(p.b_elem != MmElem::e2m1 || p.b_k_major, "layout", "e2m1 B must be K-major (packed along K)");
  require(p.a_elem != MmElem::e2m1 || p.lda % 2 == 0, "lda", "e2m1 lda must be even (two codes per byte)");
  require(p.b_elem != MmElem::e2m1 || p.ldb % 2 == 0, "ldb", "e2m1 ldb must be even (two codes per byte)");
  // The operator's contract (torch._scaled_mm, as the cuBLASLt adapter checks it): this kernel
  // could compute such shapes, but an impl of the operator refuses what the operator refuses.
  const bool block = p.a_scale_mode == MmScaleMode::vec32_ue8m0 || p.a_scale_mode == MmScaleMode::vec16_ue4m3;
  require(!block || p.k % 32 == 0, "K", "MX / NVFP4 need K % 32 == 0");
  require(p.k % 16 == 0, "K", "FP8 needs K % 16 == 0 (16-byte aligned K rows)");
  const auto row_bytes_ok = [](int64_t ld, MmElem e) { return (e == MmElem::e2m1 ? ld / 2 : ld) % 16 == 0; };
  require(row_bytes_ok(p.lda, p.a_elem), "lda", "lda must be a multiple of 16 bytes");
  require(row_bytes_ok(p.ldb, p.b_elem), "ldb", "ldb must be a multiple of 16 bytes");
  require(p.lda >= (p.a_k_major ? p.k : p.m), "lda", "lda is smaller than the contiguous extent");
  require(p.ldb >= (p.b_k_major ? p.k : p.n), "ldb", "ldb is smaller than the contiguous extent");
  require(p.ldd >= p.n, "ldd", "ldd must be >= N");
  require(!p.bias || p.out == MmOut::bf16 || p.out == MmOut::fp16, "bias",
          "bias is supported for bf16/fp16 outputs only (PyTorch: none with fp32 out; none with e4m3 out)");
  if (p.m == 0 || p.n == 0) return;
  require(p.d != nullptr, "d", "D is null");
  if (p.k > 0) {
    require(p.a != nullptr, "a", "A is null");
    require(p.b != nullptr, "b", "B is null");
    require(p.a_scale != nullptr, "a_scale", "a_scale is null");
    require(p.b_scale != nullptr, "b_scale", "b_scale is null");
  }
  const int64_t grid_y = (p.m + kBM - 1) / kBM, grid_x = (p.n + kBN - 1) / kBN;
  require(grid_y <= 65535, "M", "M is too large for the grid (max 65535·128)");
  require(grid_x <= 0x7FFFFFFF, "N", "N is too large for the grid");

  // Vector loads need 16-byte (8-bit codes) or 8-byte (e2m1, 16 codes) aligned slices.
  auto make = [&](const void* ptr, int64_t ld, int64_t rows, MmElem e, MmScaleMode mode, const void* scale) {
    const bool fp4 = e == MmElem::e2m1;
    const bool vec = fp4 ? aligned(ptr, 8) && (ld / 2) % 8 == 0 : aligned(ptr, 16) && ld % 16 == 0;
    return Operand{static_cast<const uint8_t*>(ptr), ld, rows, mode, scale, vec};
  };
  const Operand A = make(p.a, p.lda, p.m, p.a_elem, p.a_scale_mode, p.a_scale);
  const Operand B = make(p.b, p.ldb, p.n, p.b_elem, p.b_scale_mode, p.b_scale);
  const Epilogue ep{p.out, p.d, p.ldd, p.global_scale, p.global_scale_dev, p.d_scale, p.bias};
  const dim3 grid(static_cast<unsigned>(grid_x), static_cast<unsigned>(grid_y));
  cudaStream_t s = stream;
  const int kb = operand_kind(p.b_elem, p.b_k_major);
  switch (operand_kind(p.a_elem, p.a_k_major)) {
    case kKMajor8: launch_b<kKMajor8>(kb, A, p.a_elem, B, p.b_elem, p.k, ep, grid, s); break;
    case kOuterMajor8: launch_b<kOuterMajor8>(kb, A, p.a_elem, B, p.b_elem, p.k, ep, grid, s); break;
    default: launch_b<kKMajor4>(kb, A, p.a_elem, B, p.b_elem, p.k, ep, grid, s); break;
  }
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess)
    throw std::runtime_error(std::string("scaled_mm_mx_kernel launch: ") + cudaGetErrorName(e) + " (" +
                             cudaGetErrorString(e) + ")");
}

}  // namespace opcts::cuda
