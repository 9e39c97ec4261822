// PyTorch-math-backend-style SDPA forward: cuBLAS Q·Kᵀ, masked fp32 softmax kernel, cuBLAS P·V.
//
// Precision follows PyTorch's math backend at the input dtype: the score matrix S and the
// probabilities P are materialised in the input dtype (the GEMMs accumulate in fp32), the
// softmax reduces in fp32, and the logsumexp is computed in fp32 from the stored scores.
#include "sdpa_kernels.hpp"

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <climits>
#include <cmath>
#include <cstdint>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

namespace opcts::cuda {
namespace {

const char* cublas_status_name(cublasStatus_t s) {
  switch (s) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR: return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    case CUBLAS_STATUS_LICENSE_ERROR: return "CUBLAS_STATUS_LICENSE_ERROR";
    default: return "unknown cublasStatus_t";
  }
}

void check_cuda(cudaError_t err, const char* what) {
  if (err != cudaSuccess)
    throw std::runtime_error(std::string("sdpa_math_forward: ") + what + ": " +
                             cudaGetErrorString(err));
}

void check_cublas(cublasStatus_t st, const char* what) {
  if (st != CUBLAS_STATUS_SUCCESS)
    throw std::runtime_error(std::string("sdpa_math_forward: ") + what + ": " +
                             cublas_status_name(st));
}

// One cuBLAS handle per device, created on first use and kept for the process lifetime
// (creating a handle costs milliseconds; destroying at exit races with driver teardown).
cublasHandle_t handle_for_current_device() {
  static std::mutex mu;
  static std::vector<cublasHandle_t> handles;
  int dev = 0;
  check_cuda(cudaGetDevice(&dev), "cudaGetDevice");
  std::lock_guard<std::mutex> lock(mu);
  if (static_cast<size_t>(dev) >= handles.size()) handles.resize(dev + 1, nullptr);
  if (!handles[dev]) {
    cublasHandle_t h = nullptr;
    check_cublas(cublasCreate(&h), "cublasCreate");
    // Default math: no TF32 for fp32 inputs, matching PyTorch's default matmul precision.
    check_cublas(cublasSetMathMode(h, CUBLAS_DEFAULT_MATH), "cublasSetMathMode");
    handles[dev] = h;
  }
  return handles[dev];
}

template <typename T>
__device__ __forceinline__ float to_f(T x) {
  return static_cast<float>(x);
}
template <typename T>
__device__ __forceinline__ T from_f(float x) {
  return static_cast<T>(x);
}

__device__ __forceinline__ float block_reduce(float v, bool is_max, float* scratch) {
  for (int off = 16; off > 0; off >>= 1) {
    const float o = __shfl_xor_sync(0xffffffffu, v, off);
    v = is_max ? fmaxf(v, o) : v + o;
  }
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int nwarps = blockDim.x / 32;
  __syncthreads();  // scratch may still be read by a previous reduction
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < nwarps ? scratch[lane] : (is_max ? -INFINITY : 0.f);
  for (int off = 16; off > 0; off >>= 1) {
    const float o = __shfl_xor_sync(0xffffffffu, v, off);
    v = is_max ? fmaxf(v, o) : v + o;
  }
  return v;
}

// One block per row of S ([rows = B*Hq*Sq, Sk], in place -> P). Keys j >= `visible` are
// masked; a row with no visible key becomes all zeros with lse = -inf.
template <typename T>
__global__ void masked_softmax_kernel(T* sp, float* lse, int64_t seq_q, int64_t seq_k,
                                      int mask, int64_t diag_offset) {
  __shared__ float scratch[32];
  const int64_t row = blockIdx.x;
  const int64_t i = row % seq_q;
  T* r = sp + row * seq_k;
  int64_t visible = seq_k;
  if (mask != 0) {
    const int64_t lim = i + diag_offset + 1;
    visible = lim < 0 ? 0 : (lim < seq_k ? lim : seq_k);
  }

  float mx = -INFINITY;
  for (int64_t j = threadIdx.x; j < visible; j += blockDim.x) mx = fmaxf(mx, to_f(r[j]));
  mx = block_reduce(mx, true, scratch);

  // An infinite max (all masked, or an overflowed fp16 score) must not produce inf-inf.
  const float base = isinf(mx) ? (mx > 0 ? mx : 0.f) : mx;
  float sum = 0.f;
  for (int64_t j = threadIdx.x; j < visible; j += blockDim.x) sum += expf(to_f(r[j]) - base);
  sum = block_reduce(sum, false, scratch);

  const float inv = sum > 0.f ? 1.f / sum : 0.f;
  for (int64_t j = threadIdx.x; j < seq_k; j += blockDim.x)
    r[j] = from_f<T>(j < visible ? expf(to_f(r[j]) - base) * inv : 0.f);
  if (threadIdx.x == 0) lse[row] = visible == 0 ? -INFINITY : base + logf(sum);
}

// Sk = 0: O = 0 is a memset; the lse rows still need -inf.
__global__ void fill_neg_inf_kernel(float* lse, int64_t n) {
  const int64_t idx = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx < n) lse[idx] = -INFINITY;
}

bool is_contiguous(const SdpaStrides& s, int64_t heads, int64_t seq, int64_t head_dim,
                   int64_t batch) {
  const SdpaStrides c = contiguous_bhsd(heads, seq, head_dim);
  // A stride of a size-1 dimension never moves the pointer, so it may be anything.
  return (batch <= 1 || s.batch == c.batch) && (heads <= 1 || s.head == c.head) &&
         (seq <= 1 || s.seq == c.seq);
}

size_t dtype_size(SdpaDType t) { return t == SdpaDType::fp32 ? 4 : 2; }

cudaDataType_t cuda_type(SdpaDType t) {
  switch (t) {
    case SdpaDType::fp16: return CUDA_R_16F;
    case SdpaDType::bf16: return CUDA_R_16BF;
    default: return CUDA_R_32F;
  }
}

template <typename T>
void launch_softmax(void* sp, float* lse, int64_t rows, int64_t seq_q, int64_t seq_k, int mask,
                    int64_t diag_offset, cudaStream_t s) {
  const int threads = seq_k >= 1024 ? 256 : 128;
  masked_softmax_kernel<T><<<static_cast<unsigned>(rows), threads, 0, s>>>(
      static_cast<T*>(sp), lse, seq_q, seq_k, mask, diag_offset);
}

}  // namespace

void sdpa_math_forward(const SdpaParams& p, CUstream_st* stream) {
  if (p.batch < 0 || p.heads_q < 0 || p.heads_kv < 0 || p.seq_q < 0 || p.seq_k < 0 ||
      p.head_dim < 0)
    throw std::invalid_argument("sdpa_math_forward: negative dimension");
  if (p.dtype != SdpaDType::fp16 && p.dtype != SdpaDType::bf16 && p.dtype != SdpaDType::fp32)
    throw std::invalid_argument("sdpa_math_forward: unknown dtype");
  if (p.heads_kv <= 0 || p.heads_q % p.heads_kv != 0)
    throw std::invalid_argument(
        "sdpa_math_forward: heads_q must be a multiple of heads_kv (heads_kv > 0)");
  if (!is_contiguous(p.q_strides, p.heads_q, p.seq_q, p.head_dim, p.batch) ||
      !is_contiguous(p.o_strides, p.heads_q, p.seq_q, p.head_dim, p.batch) ||
      !is_contiguous(p.k_strides, p.heads_kv, p.seq_k, p.head_dim, p.batch) ||
      !is_contiguous(p.v_strides, p.heads_kv, p.seq_k, p.head_dim, p.batch))
    throw std::invalid_argument("sdpa_math_forward: needs contiguous BHSD q, k, v and o");

  if (p.batch == 0 || p.heads_q == 0 || p.seq_q == 0) return;
  const cudaStream_t s = stream;
  const int64_t rows = p.batch * p.heads_q * p.seq_q;
  const size_t esize = dtype_size(p.dtype);

  if (p.seq_k == 0) {
    check_cuda(cudaMemsetAsync(p.o, 0, size_t(rows) * size_t(p.head_dim) * esize, s),
               "cudaMemsetAsync(o)");
    fill_neg_inf_kernel<<<static_cast<unsigned>((rows + 255) / 256), 256, 0, s>>>(p.lse, rows);
    check_cuda(cudaGetLastError(), "fill_neg_inf_kernel launch");
    return;
  }

  // Q of one (b, kv head) is the [group*Sq, D] matrix of its consecutive query heads.
  const int64_t group = p.heads_q / p.heads_kv;
  const int64_t m_rows = group * p.seq_q;
  const int64_t batches = p.batch * p.heads_kv;
  if (m_rows > INT_MAX || p.seq_k > INT_MAX || p.head_dim > INT_MAX || batches > INT_MAX ||
      rows > INT_MAX)
    throw std::invalid_argument("sdpa_math_forward: dimension exceeds cuBLAS int range");
  const int M = static_cast<int>(m_rows), N = static_cast<int>(p.seq_k),
            Dk = static_cast<int>(p.head_dim), nb = static_cast<int>(batches);

  cublasHandle_t h = handle_for_current_device();
  check_cublas(cublasSetStream(h, s), "cublasSetStream");

  void* sp = nullptr;
  const size_t s_bytes = size_t(rows) * size_t(p.seq_k) * esize;
  check_cuda(cudaMallocAsync(&sp, s_bytes, s), "cudaMallocAsync(S)");
  try {
    const cudaDataType_t ty = cuda_type(p.dtype);
    const float alpha = p.scale, one = 1.f, zero = 0.f;
    // Row-major S[M, Sk] = Q[M, D]·K[Sk, D]ᵀ is column-major Sᵀ[Sk, M] = K·Qᵀ, i.e.
    // op(A) = Kᵀ-view transposed (lda = D) and op(B) = Q as a column-major [D, M].
    if (Dk == 0) check_cuda(cudaMemsetAsync(sp, 0, s_bytes, s), "cudaMemsetAsync(S)");
    else
      check_cublas(cublasGemmStridedBatchedEx(
                       h, CUBLAS_OP_T, CUBLAS_OP_N, N, M, Dk, &alpha, p.k, ty, Dk,
                       p.seq_k * p.head_dim, p.q, ty, Dk, m_rows * p.head_dim, &zero, sp, ty, N,
                       m_rows * p.seq_k, nb, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                   "cublasGemmStridedBatchedEx(Q*K^T)");

    const int mask = p.mask == SdpaMask::none ? 0 : 1;
    const int64_t diag = p.mask == SdpaMask::causal_lower_right ? p.seq_k - p.seq_q : 0;
    switch (p.dtype) {
      case SdpaDType::fp16:
        launch_softmax<__half>(sp, p.lse, rows, p.seq_q, p.seq_k, mask, diag, s);
        break;
      case SdpaDType::bf16:
        launch_softmax<__nv_bfloat16>(sp, p.lse, rows, p.seq_q, p.seq_k, mask, diag, s);
        break;
      default:
        launch_softmax<float>(sp, p.lse, rows, p.seq_q, p.seq_k, mask, diag, s);
        break;
    }
    check_cuda(cudaGetLastError(), "masked_softmax_kernel launch");

    // Row-major O[M, D] = P[M, Sk]·V[Sk, D] is column-major Oᵀ[D, M] = Vᵀ·Pᵀ.
    if (Dk > 0)
      check_cublas(cublasGemmStridedBatchedEx(
                       h, CUBLAS_OP_N, CUBLAS_OP_N, Dk, M, N, &one, p.v, ty, Dk,
                       p.seq_k * p.head_dim, sp, ty, N, m_rows * p.seq_k, &zero, p.o, ty, Dk,
                       m_rows * p.head_dim, nb, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                   "cublasGemmStridedBatchedEx(P*V)");
  } catch (...) {
    cudaFreeAsync(sp, s);
    throw;
  }
  check_cuda(cudaFreeAsync(sp, s), "cudaFreeAsync(S)");
}

}  // namespace opcts::cuda
