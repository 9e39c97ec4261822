// PyTorch-math-backend-style SDPA, forward and backward: cuBLAS GEMMs for the four products
// (Q·Kᵀ, P·V, and in the backward dO·Vᵀ, Pᵀ·dO, dS·K, dSᵀ·Q), CUDA kernels for the masked
// softmax, the column scan that finds keys no query sees, dS, and strided copies.
//
// Precision follows PyTorch's math backend as it runs by default: fp16/bf16 inputs are upcast
// to fp32 (q, k, v, an additive mask, and in the backward the forward's O and dO), the whole
// pipeline below runs in fp32, and each output is rounded to the dtype once
// (pytorch/pytorch#128922, "Always use high precision for SDPA math backend"; the opt-out
// torch.backends.cuda.allow_fp16_bf16_reduction_math_sdp(True) of #135964 restores the
// in-dtype pipeline, which this impl no longer models: rounding S to the dtype costs
// |s|·2^-8 in every logit, more than any flash kernel loses). The fp32 pipeline: S, P, dP
// and dS materialised in fp32, every GEMM fp32 with TF32 DISABLED (compute type
// CUBLAS_COMPUTE_32F, not CUBLAS_COMPUTE_32F_FAST_TF32; math mode CUBLAS_DEFAULT_MATH, not
// CUBLAS_TF32_TENSOR_OP_MATH, as PyTorch's default matmul precision); the softmax, the
// softcap, the additive mask, rowsum(dO ⊙ O) and dS in fp32; the logsumexp fp32, natural
// log. The GQA sums of dK and dV accumulate in an fp32 scratch (beta = 1 over the query heads
// of a group, in a fixed order, so the backward is deterministic).
//
// Head mapping. cuBLAS strided-batched GEMMs need one stride per batch index, so every GEMM
// loops over (b, c) with b the batch (folded into the batched dimension when every operand's
// batch stride is Hkv times its per-index stride, e.g. contiguous BHSD) and c ∈ [0, Hq/Hkv),
// and batches over r ∈ [0, Hkv): query head h = hbase(c) + r·hstep reads KV head r, with
//   PyTorch / FA2 GQA (h → h / group):  hbase = c,       hstep = group  (h = r·group + c);
//   planted gqa_modulo (h → h % Hkv):   hbase = c·Hkv,   hstep = 1      (h = c·Hkv + r).
// A Q-space operand (Q, O, S, P, dO, dQ) at (b, c, r) is base + b·sB + hbase·sH + r·(hstep·sH);
// a KV-space operand (K, V, dK, dV) is base + b·sB + r·sH. A KV-space output (dK, dV) gets
// beta = 0 for c = 0 and beta = 1 after, which sums the group's query heads.
//
// Row-major ↔ column-major. A row-major matrix X[r, c] with row stride ld is, to cuBLAS, the
// column-major Xᵀ[c, r] with leading dimension ld. So row-major C[M,N] = op(A)[M,K]·op(B)[K,N]
// is the column-major Cᵀ[N,M] = op(B)ᵀ·op(A)ᵀ: cublasGemm(opB, opA, m = N, n = M, k = K,
// B, ldb, A, lda, C, ldc), where opX = CUBLAS_OP_T exactly when X is stored transposed, and
// every ld is the row stride of the stored row-major matrix (≥ its column count, which is
// exactly what cuBLAS requires in each of the four op cases). See gemm_rm below.
// Host sanity check of the Q·Kᵀ call (transA = N, transB = T): Q = [[1, 1]] (Sq = 1, D = 2),
// K = [[1, 2], [3, 4]] (Sk = 2), so S = [q·k0, q·k1] = [3, 7]. cuBLAS gets (OP_T, OP_N,
// m = 2, n = 1, k = 2, K, ld 2, Q, ld 2): K's memory [1, 2, 3, 4] as column-major 2×2 is
// [[1, 3], [2, 4]], transposed [[1, 2], [3, 4]], times Q's column [1, 1]ᵀ gives [3, 7],
// stored as column-major 2×1 with ldc = Sk = 2: memory [3, 7], the row S[0, :]. ✓
// Pᵀ·dO (transA = T, transB = N): P = [[a, b]] (Sq = 1, Sk = 2), dO = [[x]] (Dv = 1):
// cuBLAS (OP_N, OP_T, m = 1, n = 2, k = 1, dO, ld 1, P, ld 2): P's memory as column-major
// n×k = 2×1 is [a, b]ᵀ, op T gives the 1×2 [a, b]; [x]·[a, b] = [ax, bx], memory [ax, bx]
// = row-major dV[2, 1] = Pᵀ·dO. ✓
// Softmax sanity: scores [0, ln 3] → max ln 3, Σ exp(s − max) = 1/3 + 1 = 4/3, P = [1/4, 3/4],
// lse = ln 3 + ln(4/3) = ln 4 = ln(e^0 + e^{ln 3}). ✓ Softcap derivative: d(c·tanh(s/c))/ds =
// 1 − tanh²(s/c); at s = 0 it is 1 (the softcap is the identity near 0). ✓
//
// Keys no query sees (poisoned K/V rows). Masked scores are never read by the softmax (the
// kernels test the mask before loading S), so NaN in a K row only reaches S entries nobody
// reads. NaN in a V row would leak through P·V (0 · NaN = NaN in the GEMM), and NaN in a K row
// through dQ = dS·K, so whenever any mask is active the kernels find, per (batch, KV head),
// the keys whose P column is zero for every query row of every query head reading that KV
// head, and the GEMMs use contiguous copies V' (and K' in the backward) with those rows set
// to 0. That is exact: such a row only ever multiplies P = 0 / dS = 0 entries. dS is written
// as 0 where masked (a select, not a multiply), so NaN in dP at masked keys is dropped too.
#include "sdpa_kernels.hpp"

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <mutex>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace opcts::cuda {
namespace {

// ---------------------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------------------

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

void check_cuda(cudaError_t err, const char* fn, const char* what) {
  if (err != cudaSuccess) throw std::runtime_error(std::string(fn) + ": " + what + ": " + cudaGetErrorString(err));
}

void check_cublas(cublasStatus_t st, const char* fn, const char* what) {
  if (st != CUBLAS_STATUS_SUCCESS)
    throw std::runtime_error(std::string(fn) + ": " + what + ": " + cublas_status_name(st));
}

[[noreturn]] void bad_arg(const char* fn, const std::string& msg) {
  throw std::invalid_argument(std::string(fn) + ": " + msg);
}

// Product of non-negative extents as size_t, throwing instead of wrapping.
size_t checked_count(std::initializer_list<int64_t> dims, const char* fn, const char* what) {
  size_t n = 1;
  for (int64_t d : dims) {
    if (d < 0) bad_arg(fn, std::string(what) + ": negative extent");
    if (__builtin_mul_overflow(n, static_cast<size_t>(d), &n))
      bad_arg(fn, std::string(what) + ": element count overflows size_t");
  }
  return n;
}

// ---------------------------------------------------------------------------------------
// cuBLAS handle and scratch memory
// ---------------------------------------------------------------------------------------

// One cuBLAS handle per device, created on first use and kept for the process lifetime
// (creating a handle costs milliseconds; destroying at exit races with driver teardown).
// A handle is not safe to share between host threads, so a call holds the lock for all of
// its cuBLAS work (cublasSetStream + the GEMMs it enqueues).
std::mutex& cublas_mutex() {
  static std::mutex mu;
  return mu;
}

cublasHandle_t handle_for_current_device(const char* fn) {  // cublas_mutex() held
  static std::vector<cublasHandle_t> handles;
  int dev = 0;
  check_cuda(cudaGetDevice(&dev), fn, "cudaGetDevice");
  if (static_cast<size_t>(dev) >= handles.size()) handles.resize(dev + 1, nullptr);
  if (!handles[dev]) {
    cublasHandle_t h = nullptr;
    check_cublas(cublasCreate(&h), fn, "cublasCreate");
    // Default math: no TF32 for fp32 inputs, matching PyTorch's default matmul precision
    // (torch.backends.cuda.matmul.allow_tf32 = False).
    check_cublas(cublasSetMathMode(h, CUBLAS_DEFAULT_MATH), fn, "cublasSetMathMode");
    handles[dev] = h;
  }
  return handles[dev];
}

// Stream-ordered scratch: cudaMallocAsync on the call's stream, cudaFreeAsync after the
// work that uses it is enqueued (or when an exception unwinds).
class Scratch {
 public:
  Scratch(cudaStream_t s, const char* fn) : s_(s), fn_(fn) {}
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  ~Scratch() {
    for (void* p : ptrs_) cudaFreeAsync(p, s_);
  }
  template <typename U>
  U* alloc(size_t count, const char* what) {
    if (count == 0) return nullptr;
    size_t bytes = 0;
    if (__builtin_mul_overflow(count, sizeof(U), &bytes))
      bad_arg(fn_, std::string(what) + ": scratch size overflows size_t");
    void* p = nullptr;
    check_cuda(cudaMallocAsync(&p, bytes, s_), fn_, what);
    ptrs_.push_back(p);
    return static_cast<U*>(p);
  }
  void release() {
    std::vector<void*> ptrs;
    ptrs.swap(ptrs_);
    for (void* p : ptrs) check_cuda(cudaFreeAsync(p, s_), fn_, "cudaFreeAsync(scratch)");
  }

 private:
  cudaStream_t s_;
  const char* fn_;
  std::vector<void*> ptrs_;
};

// ---------------------------------------------------------------------------------------
// Device helpers
// ---------------------------------------------------------------------------------------

template <typename T>
__device__ __forceinline__ float to_f(T x) {
  return static_cast<float>(x);
}
template <typename T>
__device__ __forceinline__ T from_f(float x) {
  return static_cast<T>(x);
}

// Block-wide max or sum; every thread gets the result. blockDim.x is a multiple of 32.
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

// Everything a row kernel needs to decide which keys row i sees and what its score is.
struct MaskCtx {
  int64_t Hq, Sq, Sk;
  int causal;        // 0 none, 1 upper-left (j <= i), 2 lower-right (j <= i + Sk - Sq)
  int64_t wl, wr;    // window, -1 = unbounded (normalised on the host)
  int window_plant;  // SdpaPlant::window_off_by_one: the left bound keeps one key more
  float softcap;     // 0 = off
  int kind;          // 0 none, 1 boolean (uint8), 2 additive (input dtype)
  const void* mask;
  int64_t mB, mH, mS;  // element strides of the mask; the key dimension is contiguous
};

// Keys j in [lo, hi) pass the causal mask and the window of row i (hi <= lo: none).
__device__ __forceinline__ void row_range(const MaskCtx& c, int64_t i, int64_t& lo, int64_t& hi) {
  const int64_t diag = i + c.Sk - c.Sq;  // the bottom-right aligned diagonal
  lo = 0;
  hi = c.Sk;
  if (c.causal == 1) hi = min(hi, i + 1);
  else if (c.causal == 2) hi = min(hi, diag + 1);
  if (c.wl >= 0) lo = max(lo, diag - c.wl - (c.window_plant ? 1 : 0));
  if (c.wr >= 0) hi = min(hi, diag + c.wr + 1);
  if (hi < lo) hi = lo;
}

// Whether key j (inside the row range) survives the explicit mask; `add` is the additive
// mask value (0 without one). An additive -inf masks the key outright, so a poisoned (NaN)
// score under it is never read (NaN + -inf would be NaN).
template <typename T>
__device__ __forceinline__ bool tensor_mask_keeps(const MaskCtx& c, int64_t moff, int64_t j, float& add) {
  add = 0.f;
  if (c.kind == 1) return static_cast<const uint8_t*>(c.mask)[moff + j] != 0;
  if (c.kind == 2) {
    add = to_f(static_cast<const T*>(c.mask)[moff + j]);
    return !(isinf(add) && add < 0.f);
  }
  return true;
}

// Final score of a visible key: softcap of the stored score, then the additive mask.
template <typename T>
__device__ __forceinline__ bool score_at(const MaskCtx& c, const T* srow, int64_t moff, int64_t j, float& s) {
  float add;
  if (!tensor_mask_keeps<T>(c, moff, j, add)) return false;
  float v = to_f(srow[j]);
  if (c.softcap > 0.f) v = c.softcap * tanhf(v / c.softcap);
  s = v + add;
  return true;
}

// ---------------------------------------------------------------------------------------
// Kernels
// ---------------------------------------------------------------------------------------

// One block per row of S ([rows = B·Hq·Sq, Sk] contiguous), grid-stride over rows. Writes
// P (may alias S: each thread reads S[j] before writing P[j], after both reductions) and,
// when lse is not null, the logsumexp. A row with no visible key gets P = 0 and lse = -inf
// (P = NaN with the masked_row_nan plant, its 0/0).
template <typename T>
__global__ void __launch_bounds__(256)
    masked_softmax_kernel(const T* S, T* P, float* lse, int64_t rows, MaskCtx c, int nan_plant) {
  __shared__ float red[32];
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const int64_t i = row % c.Sq;
    const int64_t bh = row / c.Sq;
    const int64_t h = bh % c.Hq, b = bh / c.Hq;
    const T* srow = S + row * c.Sk;
    T* prow = P + row * c.Sk;
    const int64_t moff = b * c.mB + h * c.mH + i * c.mS;
    int64_t lo, hi;
    row_range(c, i, lo, hi);

    float mx = -INFINITY;
    for (int64_t j = lo + threadIdx.x; j < hi; j += blockDim.x) {
      float s;
      if (score_at<T>(c, srow, moff, j, s)) mx = fmaxf(mx, s);
    }
    mx = block_reduce(mx, true, red);
    // An infinite max (nothing visible, or an overflowed fp16 score) must not give inf - inf.
    const float base = isinf(mx) ? (mx > 0.f ? mx : 0.f) : mx;

    float sum = 0.f;
    for (int64_t j = lo + threadIdx.x; j < hi; j += blockDim.x) {
      float s;
      if (score_at<T>(c, srow, moff, j, s)) sum += expf(s - base);
    }
    sum = block_reduce(sum, false, red);

    // sum == 0: no visible key (or every visible score -inf). A NaN sum (NaN data in a
    // visible key) propagates, as it does in the reference.
    const bool empty = sum == 0.f;
    const bool nan_row = nan_plant && empty;
    const float inv = empty ? 0.f : 1.f / sum;
    for (int64_t j = threadIdx.x; j < c.Sk; j += blockDim.x) {
      float pv = 0.f;
      if (nan_row) {
        pv = NAN;
      } else if (j >= lo && j < hi) {
        float s;
        if (score_at<T>(c, srow, moff, j, s)) pv = expf(s - base) * inv;
      }
      prow[j] = from_f<T>(pv);
    }
    if (lse != nullptr && threadIdx.x == 0) lse[row] = empty ? -INFINITY : base + logf(sum);
  }
}

// seen[(b·Hkv + kv)·Sk + j] = 1 when some query row of some query head reading KV head kv
// has P[., j] != 0 (NaN counts as seen), else 0. One thread per (b, kv, j): consecutive
// threads read consecutive j of a P row (coalesced); a thread stops at its first hit.
template <typename T>
__global__ void seen_keys_kernel(const T* P, uint8_t* seen, int64_t B, int64_t Hq, int64_t Hkv, int64_t Sq, int64_t Sk,
                                 int modulo) {
  const int64_t group = Hq / Hkv;
  const int64_t n = B * Hkv * Sk;
  for (int64_t idx = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; idx < n; idx += int64_t(gridDim.x) * blockDim.x) {
    const int64_t j = idx % Sk;
    const int64_t t = idx / Sk;
    const int64_t kv = t % Hkv, b = t / Hkv;
    uint8_t any = 0;
    for (int64_t cg = 0; cg < group && !any; ++cg) {
      const int64_t h = modulo ? cg * Hkv + kv : kv * group + cg;
      const T* col = P + (b * Hq + h) * Sq * Sk + j;
      for (int64_t i = 0; i < Sq; ++i)
        if (to_f(col[i * Sk]) != 0.f) {
          any = 1;
          break;
        }
    }
    seen[idx] = any;
  }
}

struct Bhsd {
  int64_t b, h, s, d;
};
struct Dims4 {
  int64_t B, H, S, D;
  /// The (b, h, s, d) of element idx of a [B, H, S, D] walk, d fastest.
  __device__ Bhsd at(int64_t idx) const {
    const int64_t d = idx % D, bhs = idx / D;
    const int64_t s = bhs % S, bh = bhs / S;
    return {bh / H, bh % H, s, d};
  }
};

// dst[b,h,s,d] = src[b,h,s,d] converted, or 0 where keep[(b·H + h)·S + s] == 0 (a select:
// a NaN source element is not propagated). Any strides on both sides.
template <typename Tin, typename Tout>
__global__ void copy_bhsd_kernel(const Tin* src, SdpaStrides ss, Tout* dst, SdpaStrides ds, Dims4 n,
                                 const uint8_t* keep) {
  const int64_t total = n.B * n.H * n.S * n.D;
  for (int64_t idx = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; idx < total;
       idx += int64_t(gridDim.x) * blockDim.x) {
    const auto [b, h, s, d] = n.at(idx);
    float v = 0.f;
    if (keep == nullptr || keep[(b * n.H + h) * n.S + s] != 0)
      v = to_f(src[b * ss.batch + h * ss.head + s * ss.seq + d]);
    dst[b * ds.batch + h * ds.head + s * ds.seq + d] = from_f<Tout>(v);
  }
}

template <typename T>
__global__ void fill_bhsd_kernel(T* dst, SdpaStrides ds, Dims4 n, float value) {
  const int64_t total = n.B * n.H * n.S * n.D;
  for (int64_t idx = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; idx < total;
       idx += int64_t(gridDim.x) * blockDim.x) {
    const auto [b, h, s, d] = n.at(idx);
    dst[b * ds.batch + h * ds.head + s * ds.seq + d] = from_f<T>(value);
  }
}

__global__ void fill_f32_kernel(float* x, int64_t n, float value) {
  for (int64_t idx = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; idx < n; idx += int64_t(gridDim.x) * blockDim.x)
    x[idx] = value;
}

// Backward, one block per row (b, h, i), grid-stride: D_i = Σ_d dO[i,d]·O[i,d] (fp32; 0 with
// the drop_rowsum plant), then in place over dP: dS[i,j] = P·(dP − D_i) [· (1 − tanh²(s/cap))
// with the softcap, s the stored pre-cap score], and 0 for every masked key (a select).
template <typename T>
__global__ void __launch_bounds__(256)
    softmax_backward_kernel(const T* S, const T* P, T* dPdS, const T* O, SdpaStrides os, const T* dO, SdpaStrides dos,
                            int64_t Dv, int64_t rows, MaskCtx c, int drop_rowsum) {
  __shared__ float red[32];
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const int64_t i = row % c.Sq;
    const int64_t bh = row / c.Sq;
    const int64_t h = bh % c.Hq, b = bh / c.Hq;
    float dsum = 0.f;
    if (!drop_rowsum) {
      const T* orow = O + b * os.batch + h * os.head + i * os.seq;
      const T* drow = dO + b * dos.batch + h * dos.head + i * dos.seq;
      for (int64_t d = threadIdx.x; d < Dv; d += blockDim.x) dsum += to_f(drow[d]) * to_f(orow[d]);
    }
    dsum = block_reduce(dsum, false, red);  // every thread calls it (uniform control flow)

    const int64_t moff = b * c.mB + h * c.mH + i * c.mS;
    int64_t lo, hi;
    row_range(c, i, lo, hi);
    const T* prow = P + row * c.Sk;
    const T* srow = S + row * c.Sk;
    T* grow = dPdS + row * c.Sk;
    for (int64_t j = threadIdx.x; j < c.Sk; j += blockDim.x) {
      float g = 0.f;
      float add;
      if (j >= lo && j < hi && tensor_mask_keeps<T>(c, moff, j, add)) {
        g = to_f(prow[j]) * (to_f(grow[j]) - dsum);
        if (c.softcap > 0.f) {
          const float t = tanhf(to_f(srow[j]) / c.softcap);
          g *= 1.f - t * t;
        }
      }
      grow[j] = from_f<T>(g);
    }
  }
}

// ---------------------------------------------------------------------------------------
// Host helpers
// ---------------------------------------------------------------------------------------

// cuBLAS's name of a GEMM operand type: only fp32 reaches cuBLAS (16-bit inputs are upcast).
template <typename T>
struct TypeOf;
template <>
struct TypeOf<float> {
  static constexpr cudaDataType_t cuda = CUDA_R_32F;
};

constexpr int kCopyThreads = 256;

unsigned grid_for(int64_t work_items, int threads) {
  const int64_t blocks = (work_items + threads - 1) / threads;
  return static_cast<unsigned>(std::max<int64_t>(1, std::min<int64_t>(blocks, int64_t(1) << 20)));
}
unsigned row_grid(int64_t rows) {
  return static_cast<unsigned>(std::max<int64_t>(1, std::min<int64_t>(rows, int64_t(1) << 20)));
}
int row_threads(int64_t width) { return width >= 1024 ? 256 : 128; }

// Strides with the size-1 dimensions made harmless: a size-1 batch has stride 0; a size-1
// head dimension takes the batch stride (so a [B, 1, S, D] tensor still folds into one
// batched GEMM); a sequence of length <= 1 gets row stride max(D, 1).
SdpaStrides normalise(SdpaStrides s, int64_t B, int64_t H, int64_t S, int64_t D) {
  if (B <= 1) s.batch = 0;
  if (H <= 1) s.head = s.batch;
  if (S <= 1) s.seq = std::max<int64_t>(D, 1);
  return s;
}

// Whether cuBLAS can read/write the (normalised) tensor in place: non-negative batch and
// head strides (cuBLAS batch strides), and an int row stride >= max(D, 1) (its lda rule).
bool addressable(const SdpaStrides& s, int64_t D) {
  return s.batch >= 0 && s.head >= 0 && s.seq >= std::max<int64_t>(D, 1) && s.seq <= INT_MAX;
}

SdpaStrides contiguous(int64_t H, int64_t S, int64_t D) { return contiguous_bhsd(H, S, D); }

// One GEMM operand: a [B, H, rows, cols] family of row-major matrices.
struct Operand {
  const void* ptr;
  int64_t sB, sH;  // element strides of batch and head (of its own head space)
  int64_t ld;      // row stride in elements
  bool q_space;    // indexed by query head (Q, O, S, P, dO, dQ) or by KV head (K, V, dK, dV)
  cudaDataType_t type;
  size_t esize;
};

template <typename T>
Operand operand_of(const void* ptr, const SdpaStrides& s, bool q_space) {
  return {ptr, s.batch, s.head, s.seq, q_space, TypeOf<T>::cuda, sizeof(T)};
}

struct HeadMap {
  int64_t B, Hkv, group;
  bool modulo;  // the gqa_modulo plant
};

// Row-major C[M,N] = alpha·op(A)[M,K]·op(B)[K,N] (+ beta·C) for every (batch, query head),
// through cublasGemmStridedBatchedEx (column-major Cᵀ = op(B)ᵀ·op(A)ᵀ, see the file
// comment). A KV-space C sums the group's query heads (beta = 1 after the first). M or N
// may be 0 (nothing to do); K must be > 0 (the callers handle K == 0 themselves).
void gemm_rm(cublasHandle_t handle, const HeadMap& m, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K,
             float alpha, const Operand& A, const Operand& Bm, const Operand& C, const char* fn, const char* what) {
  if (M == 0 || N == 0 || m.B == 0 || m.Hkv == 0 || m.group == 0) return;
  if (K <= 0) bad_arg(fn, std::string(what) + ": inner dimension 0 reached cuBLAS");
  if (M > INT_MAX || N > INT_MAX || K > INT_MAX || A.ld > INT_MAX || Bm.ld > INT_MAX || C.ld > INT_MAX ||
      m.Hkv > INT_MAX)
    bad_arg(fn, std::string(what) + ": dimension or leading dimension exceeds cuBLAS's int");
  const int64_t hstep = m.modulo ? 1 : m.group;
  auto stride_of = [&](const Operand& X) { return X.q_space ? hstep * X.sH : X.sH; };
  // Fold the batch into the batched dimension when index b·Hkv + r addresses every operand.
  bool fold = m.B == 1;
  if (!fold && m.B * m.Hkv <= INT_MAX)
    fold = A.sB == m.Hkv * stride_of(A) && Bm.sB == m.Hkv * stride_of(Bm) && C.sB == m.Hkv * stride_of(C);
  const int64_t nbatch = fold ? m.B * m.Hkv : m.Hkv;
  const bool accumulate = !C.q_space;
  const float zero = 0.f, one = 1.f;
  for (int64_t b = 0; b < (fold ? 1 : m.B); ++b) {
    for (int64_t c = 0; c < m.group; ++c) {
      const int64_t hbase = m.modulo ? c * m.Hkv : c;
      auto at = [&](const Operand& X) {
        const int64_t off = b * X.sB + (X.q_space ? hbase * X.sH : 0);
        return static_cast<const char*>(X.ptr) + off * static_cast<int64_t>(X.esize);
      };
      const float* beta = accumulate && c > 0 ? &one : &zero;
      check_cublas(
          cublasGemmStridedBatchedEx(
              handle, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, static_cast<int>(N),
              static_cast<int>(M), static_cast<int>(K), &alpha, at(Bm), Bm.type, static_cast<int>(Bm.ld), stride_of(Bm),
              at(A), A.type, static_cast<int>(A.ld), stride_of(A), beta, const_cast<char*>(at(C)), C.type,
              static_cast<int>(C.ld), stride_of(C), static_cast<int>(nbatch), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
          fn, what);
    }
  }
}

template <typename Tin, typename Tout>
void launch_copy(const Tin* src, const SdpaStrides& ss, Tout* dst, const SdpaStrides& ds, Dims4 n, const uint8_t* keep,
                 cudaStream_t s, const char* fn, const char* what) {
  const int64_t total = n.B * n.H * n.S * n.D;  // fits: the callers' buffers are checked
  if (total == 0) return;
  copy_bhsd_kernel<Tin, Tout><<<grid_for(total, kCopyThreads), kCopyThreads, 0, s>>>(src, ss, dst, ds, n, keep);
  check_cuda(cudaGetLastError(), fn, what);
}

template <typename T>
void launch_fill(void* dst, const SdpaStrides& ds, Dims4 n, float value, cudaStream_t s, const char* fn,
                 const char* what) {
  const int64_t total = n.B * n.H * n.S * n.D;
  if (total == 0) return;
  fill_bhsd_kernel<T><<<grid_for(total, kCopyThreads), kCopyThreads, 0, s>>>(static_cast<T*>(dst), ds, n, value);
  check_cuda(cudaGetLastError(), fn, what);
}

void launch_fill_f32(float* x, int64_t n, float value, cudaStream_t s, const char* fn, const char* what) {
  if (n == 0) return;
  fill_f32_kernel<<<grid_for(n, kCopyThreads), kCopyThreads, 0, s>>>(x, n, value);
  check_cuda(cudaGetLastError(), fn, what);
}

// A GEMM input: the tensor itself when cuBLAS can address it and no rows are to be zeroed,
// else a contiguous BHSD copy in scratch (with the rows keep[] marks 0 set to 0).
template <typename T>
Operand input_operand(const void* ptr, const SdpaStrides& st, Dims4 n, bool q_space, const uint8_t* keep,
                      Scratch& scratch, cudaStream_t s, const char* fn, const char* what) {
  if (keep == nullptr && addressable(st, n.D)) return operand_of<T>(ptr, st, q_space);
  T* buf = scratch.alloc<T>(checked_count({n.B, n.H, n.S, n.D}, fn, what), what);
  const SdpaStrides cs = contiguous(n.H, n.S, n.D);
  launch_copy<T, T>(static_cast<const T*>(ptr), st, buf, cs, n, keep, s, fn, what);
  SdpaStrides ops = normalise(cs, n.B, n.H, n.S, n.D);
  return operand_of<T>(buf, ops, q_space);
}

// A GEMM output: the tensor itself when addressable, else contiguous scratch that
// finish_output() scatters into the tensor's strides.
template <typename T>
Operand output_operand(void* ptr, const SdpaStrides& st, Dims4 n, bool q_space, Scratch& scratch, const char* fn,
                       const char* what) {
  if (addressable(st, n.D)) return operand_of<T>(ptr, st, q_space);
  T* buf = scratch.alloc<T>(checked_count({n.B, n.H, n.S, n.D}, fn, what), what);
  return operand_of<T>(buf, normalise(contiguous(n.H, n.S, n.D), n.B, n.H, n.S, n.D), q_space);
}

template <typename T>
void finish_output(const Operand& op, void* ptr, const SdpaStrides& st, Dims4 n, cudaStream_t s, const char* fn,
                   const char* what) {
  if (op.ptr == ptr) return;
  launch_copy<T, T>(static_cast<const T*>(op.ptr), contiguous(n.H, n.S, n.D), static_cast<T*>(ptr), st, n, nullptr, s,
                    fn, what);
}

// The validated and normalised view of SdpaParams the implementations use.
struct Geometry {
  int64_t B, Hq, Hkv, Sq, Sk, Dk, Dv, group;
  SdpaStrides q, k, v, o;
  MaskCtx ctx;
  bool any_mask;  // some key may be hidden from some row
  HeadMap map;
};

Geometry validate(const SdpaParams& p, const char* fn, bool need_lse) {
  switch (p.dtype) {
    case SdpaDType::fp16:
    case SdpaDType::bf16:
    case SdpaDType::fp32: break;
    default: bad_arg(fn, "dtype: unknown SdpaDType");
  }
  const std::pair<const char*, int64_t> dims[] = {
      {"batch", p.batch}, {"heads_q", p.heads_q},   {"heads_kv", p.heads_kv},    {"seq_q", p.seq_q},
      {"seq_k", p.seq_k}, {"head_dim", p.head_dim}, {"head_dim_v", p.head_dim_v}};
  for (const auto& [name, v] : dims)
    if (v < 0) bad_arg(fn, std::string(name) + " must be >= 0, got " + std::to_string(v));
  if (p.heads_kv == 0) bad_arg(fn, "heads_kv must be > 0");
  if (p.heads_q % p.heads_kv != 0)
    bad_arg(fn, "heads_q (" + std::to_string(p.heads_q) + ") must be a multiple of heads_kv (" +
                    std::to_string(p.heads_kv) + ")");
  switch (p.mask) {
    case SdpaMask::none:
    case SdpaMask::causal_upper_left:
    case SdpaMask::causal_lower_right: break;
    default: bad_arg(fn, "mask: unknown SdpaMask");
  }
  switch (p.mask_kind) {
    case SdpaMaskTensor::none:
    case SdpaMaskTensor::boolean:
    case SdpaMaskTensor::additive: break;
    default: bad_arg(fn, "mask_kind: unknown SdpaMaskTensor");
  }
  switch (p.plant) {
    case SdpaPlant::none:
    case SdpaPlant::window_off_by_one:
    case SdpaPlant::gqa_modulo:
    case SdpaPlant::drop_rowsum:
    case SdpaPlant::masked_row_nan: break;
    default: bad_arg(fn, "plant: unknown SdpaPlant");
  }
  if (p.window_left < -1)
    bad_arg(fn, "window_left must be >= -1 (-1 = unbounded), got " + std::to_string(p.window_left));
  if (p.window_right < -1)
    bad_arg(fn, "window_right must be >= -1 (-1 = unbounded), got " + std::to_string(p.window_right));
  if (!std::isfinite(p.softcap) || p.softcap < 0.f) bad_arg(fn, "softcap must be finite and >= 0 (0 = off)");

  Geometry g{};
  g.B = p.batch;
  g.Hq = p.heads_q;
  g.Hkv = p.heads_kv;
  g.Sq = p.seq_q;
  g.Sk = p.seq_k;
  g.Dk = p.head_dim;
  g.Dv = p.head_dim_v;
  g.group = g.Hq / g.Hkv;
  const size_t q_elems = checked_count({g.B, g.Hq, g.Sq, g.Dk}, fn, "q");
  const size_t k_elems = checked_count({g.B, g.Hkv, g.Sk, g.Dk}, fn, "k");
  const size_t v_elems = checked_count({g.B, g.Hkv, g.Sk, g.Dv}, fn, "v");
  const size_t o_elems = checked_count({g.B, g.Hq, g.Sq, g.Dv}, fn, "o");
  const size_t rows = checked_count({g.B, g.Hq, g.Sq}, fn, "logsumexp");
  checked_count({g.B, g.Hq, g.Sq, g.Sk}, fn, "scores B·Hq·Sq·Sk");
  if (q_elems && !p.q) bad_arg(fn, "q is null");
  if (k_elems && !p.k) bad_arg(fn, "k is null");
  if (v_elems && !p.v) bad_arg(fn, "v is null");
  if (o_elems && !p.o) bad_arg(fn, "o is null");
  if (need_lse && rows && !p.lse) bad_arg(fn, "lse is null");
  if (p.mask_kind != SdpaMaskTensor::none && rows && g.Sk && !p.attn_mask)
    bad_arg(fn, "attn_mask is null but mask_kind is not none");

  g.q = normalise(p.q_strides, g.B, g.Hq, g.Sq, g.Dk);
  g.k = normalise(p.k_strides, g.B, g.Hkv, g.Sk, g.Dk);
  g.v = normalise(p.v_strides, g.B, g.Hkv, g.Sk, g.Dv);
  g.o = normalise(p.o_strides, g.B, g.Hq, g.Sq, g.Dv);

  // A window bound of Sq + Sk or more cannot clip any key: treat it as unbounded (this also
  // keeps i + Sk - Sq - window_left far from int64 overflow).
  const int64_t far = g.Sq + g.Sk;
  const int64_t wl = p.window_left >= far ? -1 : p.window_left;
  const int64_t wr = p.window_right >= far ? -1 : p.window_right;

  MaskCtx& c = g.ctx;
  c.Hq = g.Hq;
  c.Sq = g.Sq;
  c.Sk = g.Sk;
  c.causal = p.mask == SdpaMask::causal_upper_left ? 1 : p.mask == SdpaMask::causal_lower_right ? 2 : 0;
  c.wl = wl;
  c.wr = wr;
  c.window_plant = p.plant == SdpaPlant::window_off_by_one ? 1 : 0;
  c.softcap = p.softcap;
  c.kind = p.mask_kind == SdpaMaskTensor::boolean ? 1 : p.mask_kind == SdpaMaskTensor::additive ? 2 : 0;
  c.mask = p.attn_mask;
  c.mB = p.mask_strides.batch;
  c.mH = p.mask_strides.head;
  c.mS = p.mask_strides.seq;
  g.any_mask = c.causal != 0 || wl >= 0 || wr >= 0 || c.kind != 0;
  g.map = {g.B, g.Hkv, g.group, p.plant == SdpaPlant::gqa_modulo};
  return g;
}

// S = scale·Q·Kᵀ into the contiguous [B, Hq, Sq, Sk] scratch `S` (zeros when Dqk = 0), then
// the masked softmax into P (may be S). lse may be null.
template <typename T>
void scores_and_softmax(const Geometry& g, const SdpaParams& p, cublasHandle_t handle, const Operand& q,
                        const Operand& k, T* S, T* P, float* lse, cudaStream_t s, const char* fn) {
  const int64_t rows = g.B * g.Hq * g.Sq;
  const size_t s_bytes = checked_count({rows, g.Sk, int64_t(sizeof(T))}, fn, "S");
  const SdpaStrides sc = normalise(contiguous(g.Hq, g.Sq, g.Sk), g.B, g.Hq, g.Sq, g.Sk);
  const Operand so = operand_of<T>(S, sc, true);
  if (g.Dk == 0) check_cuda(cudaMemsetAsync(S, 0, s_bytes, s), fn, "cudaMemsetAsync(S)");
  else
    // S[Sq,Sk] = scale · Q[Sq,Dqk] · K[Sk,Dqk]ᵀ  →  cublas(OP_T, OP_N, m=Sk, n=Sq, k=Dqk,
    // K (ld k.seq), Q (ld q.seq), S (ld Sk)).
    gemm_rm(handle, g.map, false, true, g.Sq, g.Sk, g.Dk, p.scale, q, k, so, fn,
            "cublasGemmStridedBatchedEx(S = scale*Q*K^T)");
  masked_softmax_kernel<T><<<row_grid(rows), row_threads(g.Sk), 0, s>>>(S, P, lse, rows, g.ctx,
                                                                        p.plant == SdpaPlant::masked_row_nan ? 1 : 0);
  check_cuda(cudaGetLastError(), fn, "masked_softmax_kernel launch");
}

// seen[B, Hkv, Sk] from P, or null when no mask can hide a key (then every key is seen).
template <typename T>
const uint8_t* seen_keys(const Geometry& g, const T* P, Scratch& scratch, cudaStream_t s, const char* fn) {
  if (!g.any_mask) return nullptr;
  const size_t n = checked_count({g.B, g.Hkv, g.Sk}, fn, "seen keys");
  uint8_t* seen = scratch.alloc<uint8_t>(n, "cudaMallocAsync(seen keys)");
  seen_keys_kernel<T>
      <<<grid_for(int64_t(n), 128), 128, 0, s>>>(P, seen, g.B, g.Hq, g.Hkv, g.Sq, g.Sk, g.map.modulo ? 1 : 0);
  check_cuda(cudaGetLastError(), fn, "seen_keys_kernel launch");
  return seen;
}

// ---------------------------------------------------------------------------------------
// Forward
// ---------------------------------------------------------------------------------------

template <typename T>
void forward_impl(const SdpaParams& p, const Geometry& g, cudaStream_t s) {
  const char* fn = "sdpa_math_forward";
  if (g.B == 0 || g.Hq == 0 || g.Sq == 0) return;  // O and lse are empty
  const int64_t rows = g.B * g.Hq * g.Sq;
  const Dims4 on{g.B, g.Hq, g.Sq, g.Dv};
  const bool nan_plant = p.plant == SdpaPlant::masked_row_nan;

  if (g.Sk == 0) {  // every row sees no key: O = 0 (NaN planted), lse = -inf; no cuBLAS
    launch_fill<T>(p.o, g.o, on, nan_plant ? NAN : 0.f, s, fn, "fill_bhsd_kernel(o)");
    launch_fill_f32(p.lse, rows, -INFINITY, s, fn, "fill_f32_kernel(lse)");
    return;
  }

  std::lock_guard<std::mutex> lock(cublas_mutex());
  cublasHandle_t handle = handle_for_current_device(fn);
  check_cublas(cublasSetStream(handle, s), fn, "cublasSetStream");
  Scratch scratch(s, fn);

  const Operand q = input_operand<T>(p.q, g.q, {g.B, g.Hq, g.Sq, g.Dk}, true, nullptr, scratch, s, fn, "pack q");
  const Operand k = input_operand<T>(p.k, g.k, {g.B, g.Hkv, g.Sk, g.Dk}, false, nullptr, scratch, s, fn, "pack k");
  T* S = scratch.alloc<T>(checked_count({rows, g.Sk}, fn, "S"), "cudaMallocAsync(S)");
  scores_and_softmax<T>(g, p, handle, q, k, S, S, p.lse, s, fn);  // P in place of S

  if (g.Dv > 0) {
    const uint8_t* seen = seen_keys<T>(g, S, scratch, s, fn);
    const Operand v = input_operand<T>(p.v, g.v, {g.B, g.Hkv, g.Sk, g.Dv}, false, seen, scratch, s, fn,
                                       seen ? "copy v (unseen rows zeroed)" : "pack v");
    const Operand o = output_operand<T>(p.o, g.o, on, true, scratch, fn, "cudaMallocAsync(o)");
    const SdpaStrides pc = normalise(contiguous(g.Hq, g.Sq, g.Sk), g.B, g.Hq, g.Sq, g.Sk);
    // O[Sq,Dv] = P[Sq,Sk] · V'[Sk,Dv]  →  cublas(OP_N, OP_N, m=Dv, n=Sq, k=Sk,
    // V' (ld v.seq), P (ld Sk), O (ld o.seq)).
    gemm_rm(handle, g.map, false, false, g.Sq, g.Dv, g.Sk, 1.f, operand_of<T>(S, pc, true), v, o, fn,
            "cublasGemmStridedBatchedEx(O = P*V)");
    finish_output<T>(o, p.o, g.o, on, s, fn, "scatter o");
  }
  scratch.release();
}

// ---------------------------------------------------------------------------------------
// Backward
// ---------------------------------------------------------------------------------------

template <typename T>
void backward_impl(const SdpaBackwardParams& bp, const Geometry& g, cudaStream_t s) {
  const char* fn = "sdpa_math_backward";
  const SdpaParams& p = bp.fwd;
  const Dims4 qn{g.B, g.Hq, g.Sq, g.Dk}, kn{g.B, g.Hkv, g.Sk, g.Dk}, vn{g.B, g.Hkv, g.Sk, g.Dv},
      on{g.B, g.Hq, g.Sq, g.Dv};
  const SdpaStrides dq = normalise(bp.dq_strides, g.B, g.Hq, g.Sq, g.Dk);
  const SdpaStrides dk = normalise(bp.dk_strides, g.B, g.Hkv, g.Sk, g.Dk);
  const SdpaStrides dv = normalise(bp.dv_strides, g.B, g.Hkv, g.Sk, g.Dv);
  const SdpaStrides dos = normalise(bp.do_strides, g.B, g.Hq, g.Sq, g.Dv);

  if (g.B == 0) return;  // every gradient is empty
  if (g.Hq == 0 || g.Sq == 0 || g.Sk == 0) {
    // No (query, key) pair: dK = dV = 0 (nothing reads them) and dQ = 0 (no key); no cuBLAS.
    launch_fill<T>(bp.d_q, dq, qn, 0.f, s, fn, "fill_bhsd_kernel(dq)");
    launch_fill<T>(bp.d_k, dk, kn, 0.f, s, fn, "fill_bhsd_kernel(dk)");
    launch_fill<T>(bp.d_v, dv, vn, 0.f, s, fn, "fill_bhsd_kernel(dv)");
    return;
  }
  const int64_t rows = g.B * g.Hq * g.Sq;
  const size_t s_elems = checked_count({rows, g.Sk}, fn, "S");

  std::lock_guard<std::mutex> lock(cublas_mutex());
  cublasHandle_t handle = handle_for_current_device(fn);
  check_cublas(cublasSetStream(handle, s), fn, "cublasSetStream");
  Scratch scratch(s, fn);

  // 1. Recompute S and P as the forward (lse not written: the forward's stays as it is).
  //    With the softcap, S (pre-cap) is kept for the derivative: P gets its own buffer.
  const Operand q = input_operand<T>(p.q, g.q, qn, true, nullptr, scratch, s, fn, "pack q");
  const Operand k_raw = input_operand<T>(p.k, g.k, kn, false, nullptr, scratch, s, fn, "pack k");
  T* S = scratch.alloc<T>(s_elems, "cudaMallocAsync(S)");
  T* P = g.ctx.softcap > 0.f ? scratch.alloc<T>(s_elems, "cudaMallocAsync(P)") : S;
  scores_and_softmax<T>(g, p, handle, q, k_raw, S, P, nullptr, s, fn);
  const SdpaStrides sc = normalise(contiguous(g.Hq, g.Sq, g.Sk), g.B, g.Hq, g.Sq, g.Sk);
  const Operand po = operand_of<T>(P, sc, true);

  // 2. K' and V' with the keys no query sees zeroed (when a mask can hide keys).
  const uint8_t* seen = seen_keys<T>(g, P, scratch, s, fn);
  const Operand k =
      seen ? input_operand<T>(p.k, g.k, kn, false, seen, scratch, s, fn, "copy k (unseen rows zeroed)") : k_raw;
  const Operand v =
      input_operand<T>(p.v, g.v, vn, false, seen, scratch, s, fn, seen ? "copy v (unseen rows zeroed)" : "pack v");
  const Operand d_o = input_operand<T>(bp.d_o, dos, on, true, nullptr, scratch, s, fn, "pack dO");

  // 3. dV = Σ_group Pᵀ·dO in fp32: dV[Sk,Dv] = P[Sq,Sk]ᵀ · dO[Sq,Dv]  →  cublas(OP_N, OP_T,
  //    m=Dv, n=Sk, k=Sq, dO (ld do.seq), P (ld Sk), dV32 (ld Dv)), beta = 1 after c = 0.
  float* dv32 = scratch.alloc<float>(checked_count({g.B, g.Hkv, g.Sk, g.Dv}, fn, "dV"), "cudaMallocAsync(dV fp32)");
  if (g.Dv > 0) {
    const SdpaStrides c32 = normalise(contiguous(g.Hkv, g.Sk, g.Dv), g.B, g.Hkv, g.Sk, g.Dv);
    gemm_rm(handle, g.map, true, false, g.Sk, g.Dv, g.Sq, 1.f, po, d_o,
            {dv32, c32.batch, c32.head, c32.seq, false, CUDA_R_32F, sizeof(float)}, fn,
            "cublasGemmStridedBatchedEx(dV = P^T*dO)");
  }

  // 4. dP = dO·V'ᵀ: dP[Sq,Sk] = dO[Sq,Dv] · V'[Sk,Dv]ᵀ  →  cublas(OP_T, OP_N, m=Sk, n=Sq,
  //    k=Dv, V' (ld v.seq), dO (ld do.seq), dP (ld Sk)); zeros when Dv = 0.
  T* dP = scratch.alloc<T>(s_elems, "cudaMallocAsync(dP)");
  if (g.Dv > 0)
    gemm_rm(handle, g.map, false, true, g.Sq, g.Sk, g.Dv, 1.f, d_o, v, operand_of<T>(dP, sc, true), fn,
            "cublasGemmStridedBatchedEx(dP = dO*V^T)");
  else check_cuda(cudaMemsetAsync(dP, 0, s_elems * sizeof(T), s), fn, "cudaMemsetAsync(dP)");

  // 5. dS = P ⊙ (dP − rowsum(dO ⊙ O)) [⊙ (1 − tanh²)], 0 where masked, in place over dP.
  softmax_backward_kernel<T><<<row_grid(rows), row_threads(g.Sk), 0, s>>>(
      S, P, dP, static_cast<const T*>(p.o), g.o, static_cast<const T*>(bp.d_o), dos, g.Dv, rows, g.ctx,
      p.plant == SdpaPlant::drop_rowsum ? 1 : 0);
  check_cuda(cudaGetLastError(), fn, "softmax_backward_kernel launch");
  const Operand dso = operand_of<T>(dP, sc, true);

  if (g.Dk > 0) {
    // 6. dQ = scale·dS·K': dQ[Sq,Dqk] = dS[Sq,Sk] · K'[Sk,Dqk]  →  cublas(OP_N, OP_N, m=Dqk,
    //    n=Sq, k=Sk, K' (ld k.seq), dS (ld Sk), dQ (ld dq.seq)).
    const Operand dqo = output_operand<T>(bp.d_q, dq, qn, true, scratch, fn, "cudaMallocAsync(dq)");
    gemm_rm(handle, g.map, false, false, g.Sq, g.Dk, g.Sk, p.scale, dso, k, dqo, fn,
            "cublasGemmStridedBatchedEx(dQ = scale*dS*K)");
    finish_output<T>(dqo, bp.d_q, dq, qn, s, fn, "scatter dq");

    // 7. dK = scale·Σ_group dSᵀ·Q in fp32: dK[Sk,Dqk] = dS[Sq,Sk]ᵀ · Q[Sq,Dqk]  →
    //    cublas(OP_N, OP_T, m=Dqk, n=Sk, k=Sq, Q (ld q.seq), dS (ld Sk), dK32 (ld Dqk)).
    float* dk32 = scratch.alloc<float>(checked_count({g.B, g.Hkv, g.Sk, g.Dk}, fn, "dK"), "cudaMallocAsync(dK fp32)");
    const SdpaStrides c32 = normalise(contiguous(g.Hkv, g.Sk, g.Dk), g.B, g.Hkv, g.Sk, g.Dk);
    gemm_rm(handle, g.map, true, false, g.Sk, g.Dk, g.Sq, p.scale, dso, q,
            {dk32, c32.batch, c32.head, c32.seq, false, CUDA_R_32F, sizeof(float)}, fn,
            "cublasGemmStridedBatchedEx(dK = scale*dS^T*Q)");
    launch_copy<float, T>(dk32, contiguous(g.Hkv, g.Sk, g.Dk), static_cast<T*>(bp.d_k), dk, kn, nullptr, s, fn,
                          "convert dk");
  }
  launch_copy<float, T>(dv32, contiguous(g.Hkv, g.Sk, g.Dv), static_cast<T*>(bp.d_v), dv, vn, nullptr, s, fn,
                        "convert dv");
  scratch.release();
}

// ---------------------------------------------------------------------------------------
// fp16/bf16: upcast to fp32, the fp32 pipeline, one rounding of each output
// ---------------------------------------------------------------------------------------

// A contiguous fp32 BHSD copy of a T tensor in scratch (NaN copied as NaN), and its strides.
template <typename T>
float* upcast(const void* src, const SdpaStrides& st, Dims4 n, SdpaStrides* contiguous_out, Scratch& scratch,
              cudaStream_t s, const char* fn, const char* what) {
  float* dst = scratch.alloc<float>(checked_count({n.B, n.H, n.S, n.D}, fn, what), what);
  *contiguous_out = contiguous(n.H, n.S, n.D);
  launch_copy<T, float>(static_cast<const T*>(src), st, dst, *contiguous_out, n, nullptr, s, fn, what);
  return dst;
}

// The fp32 view of a T problem: q, k, v (and an additive mask) upcast in scratch; `o` (fp32
// scratch, contiguous) takes the output. The boolean mask and lse are used as they are.
template <typename T>
SdpaParams upcast_params(const SdpaParams& p, const Geometry& g, Scratch& scratch, cudaStream_t s, const char* fn) {
  SdpaParams f = p;
  f.dtype = SdpaDType::fp32;
  f.q = upcast<T>(p.q, g.q, {g.B, g.Hq, g.Sq, g.Dk}, &f.q_strides, scratch, s, fn, "upcast q");
  f.k = upcast<T>(p.k, g.k, {g.B, g.Hkv, g.Sk, g.Dk}, &f.k_strides, scratch, s, fn, "upcast k");
  f.v = upcast<T>(p.v, g.v, {g.B, g.Hkv, g.Sk, g.Dv}, &f.v_strides, scratch, s, fn, "upcast v");
  f.o = scratch.alloc<float>(checked_count({g.B, g.Hq, g.Sq, g.Dv}, fn, "o"), "cudaMallocAsync(o fp32)");
  f.o_strides = contiguous(g.Hq, g.Sq, g.Dv);
  if (p.mask_kind == SdpaMaskTensor::additive && p.attn_mask) {
    // [Bm, Hm, Sm, Sk] with stride 0 where the mask broadcasts (Sm = 1: one row for every
    // query): copy the stored extent only.
    const int64_t bm = p.mask_strides.batch != 0 ? g.B : 1, hm = p.mask_strides.head != 0 ? g.Hq : 1;
    const int64_t sm = p.mask_strides.seq != 0 ? g.Sq : 1;
    SdpaStrides cs{};
    f.attn_mask = upcast<T>(p.attn_mask, p.mask_strides, {bm, hm, sm, g.Sk}, &cs, scratch, s, fn, "upcast attn_mask");
    f.mask_strides = {bm > 1 ? cs.batch : 0, hm > 1 ? cs.head : 0, sm > 1 ? cs.seq : 0};
  }
  return f;
}

// PyTorch's math backend as it runs by default on fp16/bf16 inputs: q, k, v upcast to fp32,
// the whole pipeline in fp32, the output rounded once (pytorch/pytorch#128922; the opt-out is
// torch.backends.cuda.allow_fp16_bf16_reduction_math_sdp, #135964).
template <typename T>
void upcast_forward(const SdpaParams& p, const Geometry& g, cudaStream_t s) {
  const char* fn = "sdpa_math_forward";
  if (g.B == 0 || g.Hq == 0 || g.Sq == 0) return;  // O and lse are empty
  Scratch scratch(s, fn);
  const SdpaParams f = upcast_params<T>(p, g, scratch, s, fn);
  forward_impl<float>(f, validate(f, fn, true), s);
  launch_copy<float, T>(static_cast<const float*>(f.o), f.o_strides, static_cast<T*>(p.o), g.o, {g.B, g.Hq, g.Sq, g.Dv},
                        nullptr, s, fn, "convert o");
  scratch.release();
}

// The backward likewise: q, k, v, the forward's O and dO upcast, fp32 gradients rounded once.
template <typename T>
void upcast_backward(const SdpaBackwardParams& bp, const Geometry& g, cudaStream_t s) {
  const char* fn = "sdpa_math_backward";
  if (g.B == 0) return;  // every gradient is empty
  Scratch scratch(s, fn);
  SdpaBackwardParams f = bp;
  f.fwd = upcast_params<T>(bp.fwd, g, scratch, s, fn);
  const Dims4 qn{g.B, g.Hq, g.Sq, g.Dk}, kn{g.B, g.Hkv, g.Sk, g.Dk}, vn{g.B, g.Hkv, g.Sk, g.Dv},
      on{g.B, g.Hq, g.Sq, g.Dv};
  f.fwd.o = upcast<T>(bp.fwd.o, g.o, on, &f.fwd.o_strides, scratch, s, fn, "upcast o");
  const SdpaStrides dos = normalise(bp.do_strides, g.B, g.Hq, g.Sq, g.Dv);
  f.d_o = upcast<T>(bp.d_o, dos, on, &f.do_strides, scratch, s, fn, "upcast dO");
  const auto fp32_gradient = [&](void*& dst, SdpaStrides& st, Dims4 n) {
    dst = scratch.alloc<float>(checked_count({n.B, n.H, n.S, n.D}, fn, "gradient"), "cudaMallocAsync(gradient fp32)");
    st = contiguous(n.H, n.S, n.D);
  };
  fp32_gradient(f.d_q, f.dq_strides, qn);
  fp32_gradient(f.d_k, f.dk_strides, kn);
  fp32_gradient(f.d_v, f.dv_strides, vn);
  backward_impl<float>(f, validate(f.fwd, fn, false), s);
  const auto round_gradient = [&](const void* src, void* dst, const SdpaStrides& st, Dims4 n) {
    launch_copy<float, T>(static_cast<const float*>(src), contiguous(n.H, n.S, n.D), static_cast<T*>(dst),
                          normalise(st, n.B, n.H, n.S, n.D), n, nullptr, s, fn, "convert gradient");
  };
  round_gradient(f.d_q, bp.d_q, bp.dq_strides, qn);
  round_gradient(f.d_k, bp.d_k, bp.dk_strides, kn);
  round_gradient(f.d_v, bp.d_v, bp.dv_strides, vn);
  scratch.release();
}

}  // namespace

void sdpa_math_prepare() {
  std::lock_guard<std::mutex> lock(cublas_mutex());
  handle_for_current_device("sdpa_math_prepare");
}

void sdpa_math_forward(const SdpaParams& p, CUstream_st* stream) {
  sdpa_check_arguments(p);
  const Geometry g = validate(p, "sdpa_math_forward", true);
  switch (p.dtype) {
    case SdpaDType::fp16: upcast_forward<__half>(p, g, stream); break;
    case SdpaDType::bf16: upcast_forward<__nv_bfloat16>(p, g, stream); break;
    case SdpaDType::fp32: forward_impl<float>(p, g, stream); break;
  }
}

void sdpa_math_backward(const SdpaBackwardParams& p, CUstream_st* stream) {
  sdpa_check_arguments(p.fwd);
  const char* fn = "sdpa_math_backward";
  const Geometry g = validate(p.fwd, fn, false);
  if (checked_count({g.B, g.Hq, g.Sq, g.Dv}, fn, "d_o") && !p.d_o) bad_arg(fn, "d_o is null");
  if (checked_count({g.B, g.Hq, g.Sq, g.Dk}, fn, "d_q") && !p.d_q) bad_arg(fn, "d_q is null");
  if (checked_count({g.B, g.Hkv, g.Sk, g.Dk}, fn, "d_k") && !p.d_k) bad_arg(fn, "d_k is null");
  if (checked_count({g.B, g.Hkv, g.Sk, g.Dv}, fn, "d_v") && !p.d_v) bad_arg(fn, "d_v is null");
  switch (p.fwd.dtype) {
    case SdpaDType::fp16: upcast_backward<__half>(p, g, stream); break;
    case SdpaDType::bf16: upcast_backward<__nv_bfloat16>(p, g, stream); break;
    case SdpaDType::fp32: backward_impl<float>(p, g, stream); break;
  }
}

}  // namespace opcts::cuda
