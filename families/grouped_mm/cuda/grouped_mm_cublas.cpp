// cuda.cublas_grouped: bf16 grouped GEMMs through cuBLAS's grouped batched GEMM (cublasGemmGroupedBatchedEx), plus the
// per-group cublasGemmEx loop the benchmark compares against.
//
// cuBLAS takes the groups' shapes in host arrays, so this impl copies the offsets to the host
// (on a stream of its own: the stream handed in is held behind the ABI backend's gate until the
// call returns, and a pageable copy on it would wait for the gate). Row-major out[m, n] =
// Σ_k A[m, k]·B[k, n] is column-major outᵀ = Bᵀ·Aᵀ: cuBLAS's A is mat2 (K contiguous, so op T,
// lda = mat2's column stride), its B is mat_a (op N, ldb = lda), C is out (ldc = ldo).
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <climits>
#include <cstdint>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include "families/grouped_mm/cuda/grouped_mm_args.cuh"
#include "gpu/cuda/cuda_error.hpp"

namespace opcts::cuda {

namespace {

constexpr int64_t kWorkspaceBytes = 32ll << 20;
using bf16_bits = uint16_t;

void cuda_check(cudaError_t e, const char* what) {
  if (e != cudaSuccess)
    throw std::runtime_error(std::string("cuda.cublas_grouped: ") + what + ": " + cuda_error_text(e));
}

void cublas_check(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS)
    throw std::runtime_error(std::string("cuda.cublas_grouped: ") + what + " returned " + cublasGetStatusName(s) +
                             " (" + std::to_string(static_cast<int>(s)) + ")");
}

// One group's GEMM in cuBLAS's column-major terms (the file comment).
struct Gemm {
  int m = 0, n = 0, k = 0;  // cuBLAS m = the group's out columns, n = its rows
  const void* a = nullptr;  // mat2's group
  const void* b = nullptr;  // mat_a's group
  void* c = nullptr;        // out's group
};

struct Plan {
  std::vector<Gemm> gemms;  // groups with rows, columns and K
  std::vector<Gemm> zero;   // groups with rows and columns but no K: their out is zeroed
  int lda = 0, ldb = 0, ldc = 0;
};

int narrow(int64_t v, const char* arg) {
  if (v > INT_MAX)
    throw GroupedArgumentError(arg, "cuda.cublas_grouped: " + std::to_string(v) + " exceeds cuBLAS's int sizes");
  return static_cast<int>(v);
}

std::vector<int32_t> host_offsets(const GroupedMmParams& p) {
  std::vector<int32_t> offs(static_cast<size_t>(p.offs_count));
  if (offs.empty()) return offs;
  cudaStream_t s = nullptr;
  cuda_check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
  cudaError_t e = cudaMemcpyAsync(offs.data(), p.offs, offs.size() * sizeof(int32_t), cudaMemcpyDeviceToHost, s);
  const cudaError_t sync = cudaStreamSynchronize(s);
  cudaStreamDestroy(s);
  cuda_check(e != cudaSuccess ? e : sync, "offsets to the host");
  return offs;
}

Plan plan_of(const GroupedMmParams& p, const grouped::Shape& s, const std::vector<int32_t>& offs) {
  Plan plan;
  plan.lda = narrow(s.ldb, "mat_b"), plan.ldb = narrow(s.lda, "mat_a"), plan.ldc = narrow(s.ldo, "out");
  const auto* a = static_cast<const bf16_bits*>(p.a);
  const auto* b = static_cast<const bf16_bits*>(p.b);
  auto* out = static_cast<bf16_bits*>(p.out);
  for (int64_t g = 0; g < p.groups; ++g) {
    const int64_t start = g && !offs.empty() ? offs[g - 1] : 0, end = offs.empty() ? 0 : offs[g];
    Gemm x;
    switch (p.mode) {
      case GroupedMode::m2d_3d:
        x = {narrow(s.n, "N"), narrow(end - start, "offs"), narrow(s.k, "K"),
             b + g * s.b_bs,   a + start * s.lda,           out + start * s.ldo};
        break;
      case GroupedMode::m3d_3d:
        x = {narrow(s.n, "N"), narrow(s.m, "M"), narrow(s.k, "K"), b + g * s.b_bs, a + g * s.a_bs, out + g * s.o_bs};
        break;
      case GroupedMode::m2d_2d:
        x = {narrow(s.n, "N"), narrow(s.m, "M"), narrow(end - start, "offs"), b + start, a + start, out + g * s.o_bs};
        break;
      case GroupedMode::m3d_2d:
        x = {narrow(end - start, "offs"), narrow(s.m, "M"), narrow(s.k, "K"),
             b + start * s.ldb,           a + g * s.a_bs,   out + start};
        break;
    }
    if (x.m == 0 || x.n == 0) continue;
    (x.k == 0 ? plan.zero : plan.gemms).push_back(x);
  }
  return plan;
}

// Validates p (the offsets' values on the host copy) and plans its GEMMs; zeroes the groups
// without K on `stream`.
Plan prepare(const GroupedMmParams& p, cudaStream_t stream, const char* who) {
  if (p.recipe != GroupedRecipe::bf16)
    throw GroupedArgumentError("recipe", std::string(who) + ": bf16 only (cuBLAS has no scaled grouped GEMM)");
  const grouped::Shape s = grouped::validate(p, who);
  const std::vector<int32_t> offs = host_offsets(p);
  const int64_t multiple = grouped_offs_multiple(p.mode, p.recipe);
  grouped::refuse_offs(grouped::find_offs_fault(offs, s.split, multiple), s.split, multiple, who);
  Plan plan = plan_of(p, s, offs);
  for (const Gemm& z : plan.zero)
    cuda_check(cudaMemset2DAsync(z.c, static_cast<size_t>(plan.ldc) * 2, 0, static_cast<size_t>(z.m) * 2,
                                 static_cast<size_t>(z.n), stream),
               "cudaMemset2DAsync (a group without K)");
  return plan;
}

// One group's GEMM through cublasGemmEx, which sees its pointers on the host.
void gemm_ex(CublasGroupedContext& ctx, const Plan& plan, const Gemm& x) {
  const float alpha = 1.0f, beta = 0.0f;
  cublas_check(
      cublasGemmEx(ctx.handle, CUBLAS_OP_T, CUBLAS_OP_N, x.m, x.n, x.k, &alpha, x.a, CUDA_R_16BF, plan.lda, x.b,
                   CUDA_R_16BF, plan.ldb, &beta, x.c, CUDA_R_16BF, plan.ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
      "cublasGemmEx");
}

bool aligned16(const void* ptr) { return reinterpret_cast<uintptr_t>(ptr) % 16 == 0; }

void bind(CublasGroupedContext& ctx, cudaStream_t stream) {
  cublas_check(cublasSetStream(ctx.handle, stream), "cublasSetStream");
  cublas_check(cublasSetWorkspace(ctx.handle, ctx.workspace, static_cast<size_t>(ctx.workspace_bytes)),
               "cublasSetWorkspace");
}

}  // namespace

bool cublas_grouped_takes(GroupedMode, GroupedRecipe recipe) { return recipe == GroupedRecipe::bf16; }

CublasGroupedContext& cublas_grouped_context() {
  static std::mutex mu;
  static std::map<int, CublasGroupedContext> contexts;
  int dev = 0;
  cuda_check(cudaGetDevice(&dev), "cudaGetDevice");
  std::lock_guard<std::mutex> lock(mu);
  CublasGroupedContext& ctx = contexts[dev];
  if (!ctx.handle) {
    cublasHandle_t h = nullptr;
    cublas_check(cublasCreate(&h), "cublasCreate");
    void* ws = nullptr;
    const cudaError_t e = cudaMalloc(&ws, kWorkspaceBytes);
    if (e != cudaSuccess) {
      cublasDestroy(h);
      cuda_check(e, "cudaMalloc(workspace)");
    }
    ctx = CublasGroupedContext{h, ws, kWorkspaceBytes};
  }
  return ctx;
}

void grouped_mm_cublas(const GroupedMmParams& p, CUstream_st* stream, CublasGroupedContext& ctx) {
  Plan plan = prepare(p, stream, "cuda.cublas_grouped");
  // cuBLAS's grouped GEMM reads the groups' pointers from device arrays it cannot inspect: a
  // group starting off a 16-byte boundary (a K or N split at an odd offset) crashed it with a
  // misaligned address on the H200 (2026-12-01: 2d_2d, 16 groups of skewed K). Such groups go
  // through cublasGemmEx, which sees its pointers and picks a kernel for their alignment.
  std::vector<Gemm> unaligned;
  std::erase_if(plan.gemms, [&](const Gemm& x) {
    const bool off = !aligned16(x.a) || !aligned16(x.b) || !aligned16(x.c);
    if (off) unaligned.push_back(x);
    return off;
  });
  if (!unaligned.empty()) {
    bind(ctx, stream);
    for (const Gemm& x : unaligned) gemm_ex(ctx, plan, x);
  }
  if (plan.gemms.empty()) return;
  // One cuBLAS group per GEMM (each has its own shape); the pointer arrays live on the device.
  const size_t count = plan.gemms.size();
  std::vector<cublasOperation_t> ta(count, CUBLAS_OP_T), tb(count, CUBLAS_OP_N);
  std::vector<int> m(count), n(count), k(count), lda(count, plan.lda), ldb(count, plan.ldb), ldc(count, plan.ldc),
      size(count, 1);
  std::vector<float> alpha(count, 1.0f), beta(count, 0.0f);
  std::vector<const void*> ptrs(3 * count);
  for (size_t i = 0; i < count; ++i) {
    const Gemm& x = plan.gemms[i];
    m[i] = x.m, n[i] = x.n, k[i] = x.k;
    ptrs[i] = x.a, ptrs[count + i] = x.b, ptrs[2 * count + i] = x.c;
  }
  // The pointer arrays go up on a stream of our own (a pageable copy on the gated stream would
  // wait for the gate) and are freed on `stream` after the GEMMs.
  cudaStream_t up = nullptr;
  cuda_check(cudaStreamCreateWithFlags(&up, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
  void* d = nullptr;
  cudaError_t e = cudaMallocAsync(&d, ptrs.size() * sizeof(void*), up);
  if (e == cudaSuccess) e = cudaMemcpyAsync(d, ptrs.data(), ptrs.size() * sizeof(void*), cudaMemcpyHostToDevice, up);
  const cudaError_t sync = cudaStreamSynchronize(up);
  cudaStreamDestroy(up);
  if (e == cudaSuccess) e = sync;
  if (e != cudaSuccess) {
    if (d) cudaFree(d);
    cuda_check(e, "pointer arrays to the device");
  }
  auto** dp = static_cast<void**>(d);
  bind(ctx, stream);
  const cublasStatus_t st = cublasGemmGroupedBatchedEx(
      ctx.handle, ta.data(), tb.data(), m.data(), n.data(), k.data(), alpha.data(), const_cast<const void* const*>(dp),
      CUDA_R_16BF, lda.data(), const_cast<const void* const*>(dp + count), CUDA_R_16BF, ldb.data(), beta.data(),
      dp + 2 * count, CUDA_R_16BF, ldc.data(), static_cast<int>(count), size.data(), CUBLAS_COMPUTE_32F);
  cudaFreeAsync(d, stream);
  cublas_check(st, "cublasGemmGroupedBatchedEx");
}

void grouped_mm_cublas_loop(const GroupedMmParams& p, CUstream_st* stream, CublasGroupedContext& ctx) {
  const Plan plan = prepare(p, stream, "cublas per-group loop");
  bind(ctx, stream);
  for (const Gemm& x : plan.gemms) gemm_ex(ctx, plan, x);
}

}  // namespace opcts::cuda
