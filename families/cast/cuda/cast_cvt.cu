// Conversion kernels, one element per thread: under CUDA, CUDA's own fp8/fp6/fp4/e8m0 intrinsics;
// under HIP (5.2 has no narrow-float conversions) numerics/minifloat_bits.hpp's integer codecs, from
// fp32 (fp16 and bf16 inputs widen exactly, so one rounding either way).
#include "gpu/portable/gpu.hpp"
#if !OPCTS_GPU_HIP
#include <cuda_fp4.h>
#include <cuda_fp6.h>
#include <cuda_fp8.h>
#endif

#include <stdexcept>
#include <string>

#include "families/cast/cuda/cast_kernels.hpp"
#include "numerics/minifloat_bits.hpp"

namespace opcts::cuda {

namespace {

constexpr int kThreads = 256;

#if OPCTS_GPU_HIP
struct Sat {
  bool satfinite;
};
using Rm = bits::ScaleRound;
struct Bf16Raw {
  unsigned short x;
};
constexpr Sat kSatFinite{true}, kNoSat{false};
constexpr Rm kRoundZero = bits::kFloor, kRoundPosInf = bits::kCeil;

__device__ __forceinline__ uint8_t encode_fp32_bits(uint32_t u, CvtNarrow to, Sat sat, Rm rm) {
  switch (to) {
    case CvtNarrow::e4m3: return static_cast<uint8_t>(bits::encode_fp32(u, bits::kE4m3fn, sat.satfinite));
    case CvtNarrow::e5m2: return static_cast<uint8_t>(bits::encode_fp32(u, bits::kE5m2, sat.satfinite));
    case CvtNarrow::e8m0: return static_cast<uint8_t>(bits::encode_e8m0_fp32(u, rm, sat.satfinite));
    case CvtNarrow::e2m3: return static_cast<uint8_t>(bits::encode_fp32(u, bits::kE2m3, true));
    case CvtNarrow::e3m2: return static_cast<uint8_t>(bits::encode_fp32(u, bits::kE3m2, true));
    case CvtNarrow::e2m1: return static_cast<uint8_t>(bits::encode_fp32(u, bits::kE2m1, true));
  }
  return 0;
}
__device__ __forceinline__ uint8_t encode_one(float x, CvtNarrow to, Sat sat, Rm rm) {
  return encode_fp32_bits(__float_as_uint(x), to, sat, rm);
}
__device__ __forceinline__ uint8_t encode_one(__half_raw x, CvtNarrow to, Sat sat, Rm rm) {
  return encode_fp32_bits(__float_as_uint(__half2float(__half(x))), to, sat, rm);
}
__device__ __forceinline__ uint8_t encode_one(Bf16Raw x, CvtNarrow to, Sat sat, Rm rm) {
  return encode_fp32_bits(uint32_t{x.x} << 16, to, sat, rm);
}

__device__ __forceinline__ float decode_one(uint8_t c, CvtNarrow from) {
  switch (from) {
    case CvtNarrow::e4m3: return __uint_as_float(bits::decode_to_fp32(c, bits::kE4m3fn));
    case CvtNarrow::e5m2: return __uint_as_float(bits::decode_to_fp32(c, bits::kE5m2));
    case CvtNarrow::e8m0: return __uint_as_float(bits::decode_e8m0_to_fp32(c));
    case CvtNarrow::e2m3: return __uint_as_float(bits::decode_to_fp32(c, bits::kE2m3));
    case CvtNarrow::e3m2: return __uint_as_float(bits::decode_to_fp32(c, bits::kE3m2));
    case CvtNarrow::e2m1: return __uint_as_float(bits::decode_to_fp32(c, bits::kE2m1));
  }
  return 0.f;
}
#else
using Sat = __nv_saturation_t;
using Rm = cudaRoundMode;
using Bf16Raw = __nv_bfloat16_raw;
constexpr Sat kSatFinite = __NV_SATFINITE, kNoSat = __NV_NOSAT;
constexpr Rm kRoundZero = cudaRoundZero, kRoundPosInf = cudaRoundPosInf;

__device__ __forceinline__ uint8_t encode_one(float x, CvtNarrow to, Sat sat, Rm rm) {
  switch (to) {
    case CvtNarrow::e4m3: return __nv_cvt_float_to_fp8(x, sat, __NV_E4M3);
    case CvtNarrow::e5m2: return __nv_cvt_float_to_fp8(x, sat, __NV_E5M2);
    case CvtNarrow::e8m0: return __nv_cvt_float_to_e8m0(x, sat, rm);
    case CvtNarrow::e2m3: return __nv_cvt_float_to_fp6(x, __NV_E2M3, cudaRoundNearest);
    case CvtNarrow::e3m2: return __nv_cvt_float_to_fp6(x, __NV_E3M2, cudaRoundNearest);
    case CvtNarrow::e2m1: return __nv_cvt_float_to_fp4(x, __NV_E2M1, cudaRoundNearest);
  }
  return 0;
}

__device__ __forceinline__ uint8_t encode_one(__half_raw x, CvtNarrow to, Sat sat, Rm rm) {
  switch (to) {
    case CvtNarrow::e4m3: return __nv_cvt_halfraw_to_fp8(x, sat, __NV_E4M3);
    case CvtNarrow::e5m2: return __nv_cvt_halfraw_to_fp8(x, sat, __NV_E5M2);
    case CvtNarrow::e8m0: return __nv_cvt_float_to_e8m0(__half2float(__half(x)), sat, rm);  // exact widening
    case CvtNarrow::e2m3: return __nv_cvt_halfraw_to_fp6(x, __NV_E2M3, cudaRoundNearest);
    case CvtNarrow::e3m2: return __nv_cvt_halfraw_to_fp6(x, __NV_E3M2, cudaRoundNearest);
    case CvtNarrow::e2m1: return __nv_cvt_halfraw_to_fp4(x, __NV_E2M1, cudaRoundNearest);
  }
  return 0;
}

__device__ __forceinline__ uint8_t encode_one(Bf16Raw x, CvtNarrow to, Sat sat, Rm rm) {
  switch (to) {
    case CvtNarrow::e4m3: return __nv_cvt_bfloat16raw_to_fp8(x, sat, __NV_E4M3);
    case CvtNarrow::e5m2: return __nv_cvt_bfloat16raw_to_fp8(x, sat, __NV_E5M2);
    case CvtNarrow::e8m0: return __nv_cvt_bfloat16raw_to_e8m0(x, sat, rm);
    case CvtNarrow::e2m3: return __nv_cvt_bfloat16raw_to_fp6(x, __NV_E2M3, cudaRoundNearest);
    case CvtNarrow::e3m2: return __nv_cvt_bfloat16raw_to_fp6(x, __NV_E3M2, cudaRoundNearest);
    case CvtNarrow::e2m1: return __nv_cvt_bfloat16raw_to_fp4(x, __NV_E2M1, cudaRoundNearest);
  }
  return 0;
}

__device__ __forceinline__ float decode_one(uint8_t c, CvtNarrow from) {
  switch (from) {
    case CvtNarrow::e4m3: return __half2float(__half(__nv_cvt_fp8_to_halfraw(c, __NV_E4M3)));
    case CvtNarrow::e5m2: return __half2float(__half(__nv_cvt_fp8_to_halfraw(c, __NV_E5M2)));
    case CvtNarrow::e8m0: return __bfloat162float(__nv_bfloat16(__nv_cvt_e8m0_to_bf16raw(c)));
    case CvtNarrow::e2m3: return __half2float(__half(__nv_cvt_fp6_to_halfraw(c, __NV_E2M3)));
    case CvtNarrow::e3m2: return __half2float(__half(__nv_cvt_fp6_to_halfraw(c, __NV_E3M2)));
    case CvtNarrow::e2m1: return __half2float(__half(__nv_cvt_fp4_to_halfraw(c, __NV_E2M1)));
  }
  return 0.f;
}
#endif

template <typename T>
__global__ void encode_kernel(const T* in, uint8_t* out, size_t n, CvtNarrow to, Sat sat, Rm rm) {
  const size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) out[i] = encode_one(in[i], to, sat, rm);
}

__global__ void decode_kernel(const uint8_t* in, float* out, size_t n, CvtNarrow from) {
  const size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  out[i] = decode_one(in[i], from);
}

__global__ void encode_ties_up_kernel(const float* in, uint8_t* out, size_t n, bits::MiniFormat f, bool sat) {
  const size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) out[i] = static_cast<uint8_t>(bits::encode_fp32(__float_as_uint(in[i]), f, sat, /*ties_up=*/true));
}

// Two 4-bit codes a byte, element 2i in the low nibble (the storage of e2m1 tensors), from and to
// one code a byte (what the conversion kernels read and write).
__global__ void pack_nibbles_kernel(const uint8_t* in, uint8_t* out, size_t n) {
  const size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
  if (2 * i >= n) return;
  const uint8_t hi = 2 * i + 1 < n ? static_cast<uint8_t>(in[2 * i + 1] & 0xF) : 0;
  out[i] = static_cast<uint8_t>((in[2 * i] & 0xF) | (hi << 4));
}

__global__ void unpack_nibbles_kernel(const uint8_t* in, uint8_t* out, size_t n) {
  const size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
  if (i < n) out[i] = i % 2 ? in[i / 2] >> 4 : in[i / 2] & 0xF;
}

unsigned blocks_for(size_t n) { return static_cast<unsigned>((n + kThreads - 1) / kThreads); }

void check_launch(const char* what) {
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}

}  // namespace

void cvt_encode(CvtWide from, CvtNarrow to, bool satfinite, CvtScaleRound rounding, const void* in, uint8_t* out,
                size_t n, CUstream_st* stream) {
  if (n == 0) return;
  const Sat sat = satfinite ? kSatFinite : kNoSat;
  const Rm rm = rounding == CvtScaleRound::floor ? kRoundZero : kRoundPosInf;
  switch (from) {
    case CvtWide::fp32:
      encode_kernel<<<blocks_for(n), kThreads, 0, stream>>>(static_cast<const float*>(in), out, n, to, sat, rm);
      break;
    case CvtWide::fp16:
      encode_kernel<<<blocks_for(n), kThreads, 0, stream>>>(static_cast<const __half_raw*>(in), out, n, to, sat, rm);
      break;
    case CvtWide::bf16:
      encode_kernel<<<blocks_for(n), kThreads, 0, stream>>>(static_cast<const Bf16Raw*>(in), out, n, to, sat, rm);
      break;
  }
  check_launch("cvt_encode");
}

void cvt_decode(CvtNarrow from, const uint8_t* in, float* out, size_t n, CUstream_st* stream) {
  if (n == 0) return;
  decode_kernel<<<blocks_for(n), kThreads, 0, stream>>>(in, out, n, from);
  check_launch("cvt_decode");
}

void cvt_pack_nibbles(const uint8_t* in, uint8_t* out, size_t n, CUstream_st* stream) {
  if (n == 0) return;
  pack_nibbles_kernel<<<blocks_for((n + 1) / 2), kThreads, 0, stream>>>(in, out, n);
  check_launch("cvt_pack_nibbles");
}

void cvt_unpack_nibbles(const uint8_t* in, uint8_t* out, size_t n, CUstream_st* stream) {
  if (n == 0) return;
  unpack_nibbles_kernel<<<blocks_for(n), kThreads, 0, stream>>>(in, out, n);
  check_launch("cvt_unpack_nibbles");
}

void cvt_encode_ties_up(CvtNarrow to, bool satfinite, const float* in, uint8_t* out, size_t n, CUstream_st* stream) {
  if (n == 0) return;
  bits::MiniFormat f{};
  switch (to) {
    case CvtNarrow::e4m3: f = bits::kE4m3fn; break;
    case CvtNarrow::e5m2: f = bits::kE5m2; break;
    case CvtNarrow::e2m3: f = bits::kE2m3; break;
    case CvtNarrow::e3m2: f = bits::kE3m2; break;
    case CvtNarrow::e2m1: f = bits::kE2m1; break;
    case CvtNarrow::e8m0: throw std::invalid_argument("cvt_encode_ties_up: e8m0 has no ties of this kind");
  }
  encode_ties_up_kernel<<<blocks_for(n), kThreads, 0, stream>>>(in, out, n, f, satfinite);
  check_launch("cvt_encode_ties_up");
}

}  // namespace opcts::cuda
