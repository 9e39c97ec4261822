// cuBLASLt adapter for the scaled GEMM: validates opcts's row-major problem, maps it onto cuBLASLt's TN call and runs
// it.
//
// Row-major D[M,N] = A·B with A K-major and B given as Bᵀ (N rows of K) is, read column-major,
// D_cm[N,M] = Bᵀ_cm^T · A_cm: cuBLASLt's "A" operand is our B (K×N, ld = ldb, TRANSA = T) and
// its "B" is our A (K×M, ld = lda, TRANSB = N), with cuBLASLt m = N, n = M. Every per-operand
// attribute swaps with them: A_SCALE_* carries our b_scale, B_SCALE_* our a_scale (an
// OUTER_VEC A-vector then has N entries, the B-vector M, as cuBLASLt expects), and the bias,
// one per row of D_cm, is our bias[n].
#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>

#include "core/spellings.hpp"
#include "families/scaled_mm/cuda/scaled_mm_kernels.hpp"
#include "gpu/cuda/cuda_error.hpp"
#include "gpu/cuda/tactic_rank.hpp"
#include "gpu/cuda/warm_up.hpp"

namespace opcts::cuda {

namespace {

constexpr size_t kWorkspaceBytes = 32u << 20;

// The kernel parameters' names, for the message that names a combination cuBLASLt refuses.
constexpr Spellings<MmElem, 3> kElems{{{MmElem::e4m3, "e4m3"}, {MmElem::e5m2, "e5m2"}, {MmElem::e2m1, "e2m1"}}};
constexpr Spellings<MmScaleMode, 6> kScaleModes{{{MmScaleMode::scalar_f32, "scalar_f32"},
                                                 {MmScaleMode::outer_vec_f32, "outer_vec_f32"},
                                                 {MmScaleMode::vec128_f32, "vec128_f32"},
                                                 {MmScaleMode::blk128x128_f32, "blk128x128_f32"},
                                                 {MmScaleMode::vec32_ue8m0, "vec32_ue8m0"},
                                                 {MmScaleMode::vec16_ue4m3, "vec16_ue4m3"}}};
constexpr Spellings<MmOut, 4> kOuts{
    {{MmOut::bf16, "bf16"}, {MmOut::fp16, "fp16"}, {MmOut::fp32, "fp32"}, {MmOut::e4m3, "e4m3"}}};
std::string elem_name(MmElem e) { return std::string(kElems.of(e)); }
std::string mode_name(MmScaleMode m) { return std::string(kScaleModes.of(m)); }
std::string out_name(MmOut o) { return std::string(kOuts.of(o)); }

cudaDataType_t elem_type(MmElem e) {
  switch (e) {
    case MmElem::e4m3: return CUDA_R_8F_E4M3;
    case MmElem::e5m2: return CUDA_R_8F_E5M2;
    case MmElem::e2m1: return CUDA_R_4F_E2M1;
  }
  return CUDA_R_8F_E4M3;
}

cudaDataType_t out_type(MmOut o) {
  switch (o) {
    case MmOut::bf16: return CUDA_R_16BF;
    case MmOut::fp16: return CUDA_R_16F;
    case MmOut::fp32: return CUDA_R_32F;
    case MmOut::e4m3: return CUDA_R_8F_E4M3;
  }
  return CUDA_R_16BF;
}

int64_t out_bytes(MmOut o) { return o == MmOut::fp32 ? 4 : o == MmOut::e4m3 ? 1 : 2; }

int32_t lt_mode(MmScaleMode m) {
  switch (m) {
    case MmScaleMode::scalar_f32: return CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F;
    case MmScaleMode::outer_vec_f32: return CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F;
    case MmScaleMode::vec128_f32: return CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F;
    case MmScaleMode::blk128x128_f32: return CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F;
    case MmScaleMode::vec32_ue8m0: return CUBLASLT_MATMUL_MATRIX_SCALE_VEC32_UE8M0;
    case MmScaleMode::vec16_ue4m3: return CUBLASLT_MATMUL_MATRIX_SCALE_VEC16_UE4M3;
  }
  return CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F;
}

bool is_block_mx(MmScaleMode m) { return m == MmScaleMode::vec32_ue8m0 || m == MmScaleMode::vec16_ue4m3; }

void require(bool ok, const char* arg, const std::string& why) {
  if (!ok) throw MmArgumentError(arg, std::string("scaled_mm_cublaslt: ") + why);
}

void cuda_check(cudaError_t e, const char* what) {
  if (e != cudaSuccess)
    throw std::runtime_error(std::string("scaled_mm_cublaslt: ") + what + ": " + cuda_error_text(e));
}

std::string combination(const ScaledMmParams& p) {
  return std::string("A ") + elem_name(p.a_elem) + "/" + mode_name(p.a_scale_mode) + ", B " + elem_name(p.b_elem) +
         "/" + mode_name(p.b_scale_mode) + ", out " + out_name(p.out) + (p.bias ? ", bias" : "") +
         (p.fast_accum ? ", fast_accum" : "") + ", M=" + std::to_string(p.m) + " N=" + std::to_string(p.n) +
         " K=" + std::to_string(p.k);
}

// 15 (NOT_SUPPORTED) and 7 (INVALID_VALUE) are cuBLASLt's ways of refusing a combination;
// anything else is a failure of the call itself.
void lt_check(cublasStatus_t s, const char* call, const ScaledMmParams& p) {
  if (s == CUBLAS_STATUS_SUCCESS) return;
  const std::string msg = std::string("scaled_mm_cublaslt: ") + call + " returned " + cublasLtGetStatusName(s) + " (" +
                          std::to_string(static_cast<int>(s)) + ") for " + combination(p);
  if (s == CUBLAS_STATUS_NOT_SUPPORTED || s == CUBLAS_STATUS_INVALID_VALUE)
    throw MmLibraryRefusal(static_cast<int>(s), msg);
  throw std::runtime_error(msg);
}

// One handle and one workspace per device, created on first use and kept for the process.
// Calls on several streams of one device share the workspace, so they must not overlap.
struct DeviceState {
  cublasLtHandle_t handle = nullptr;
  void* workspace = nullptr;
};

DeviceState& device_state() {
  static std::mutex mu;
  static std::map<int, DeviceState> states;
  int dev = 0;
  cuda_check(cudaGetDevice(&dev), "cudaGetDevice");
  std::lock_guard<std::mutex> lock(mu);
  DeviceState& st = states[dev];
  if (!st.handle) {
    cublasLtHandle_t h = nullptr;
    const cublasStatus_t s = cublasLtCreate(&h);
    if (s != CUBLAS_STATUS_SUCCESS)
      throw std::runtime_error(std::string("scaled_mm_cublaslt: cublasLtCreate returned ") + cublasLtGetStatusName(s));
    void* ws = nullptr;
    const cudaError_t e = cudaMalloc(&ws, kWorkspaceBytes);
    if (e != cudaSuccess) {
      cublasLtDestroy(h);
      cuda_check(e, "cudaMalloc(workspace)");
    }
    st.handle = h;
    st.workspace = ws;
  }
  return st;
}

// RAII for the per-call cuBLASLt descriptors.
struct Lt {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr, d = nullptr;
  cublasLtMatmulPreference_t pref = nullptr;
  ~Lt() {
    if (pref) cublasLtMatmulPreferenceDestroy(pref);
    if (d) cublasLtMatrixLayoutDestroy(d);
    if (c) cublasLtMatrixLayoutDestroy(c);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (desc) cublasLtMatmulDescDestroy(desc);
  }
};

// Stream-ordered scratch (cudaMallocAsync) released on the same stream after the matmul.
struct StreamBuffer {
  void* ptr = nullptr;
  cudaStream_t stream = nullptr;
  StreamBuffer(size_t bytes, cudaStream_t s) : stream(s) {
    cuda_check(cudaMallocAsync(&ptr, bytes, s), "cudaMallocAsync");
  }
  ~StreamBuffer() {
    if (ptr) cudaFreeAsync(ptr, stream);
  }
  StreamBuffer(const StreamBuffer&) = delete;
  StreamBuffer& operator=(const StreamBuffer&) = delete;
};

void validate(const ScaledMmParams& p) {
  require(p.m >= 0, "M", "M must be >= 0");
  require(p.n >= 0, "N", "N must be >= 0");
  require(p.k >= 0, "K", "K must be >= 0");
  require(p.a_k_major && p.b_k_major, "layout",
          "cuBLASLt FP8 needs the TN layout (A row-major, B column-major, i.e. both K-major)");
  require(!(p.a_elem == MmElem::e5m2 && p.b_elem == MmElem::e5m2), "b_elem", "e5m2 x e5m2 is not supported");
  const bool a4 = p.a_elem == MmElem::e2m1, b4 = p.b_elem == MmElem::e2m1;
  require(a4 == b4, "b_elem", "e2m1 cannot be mixed with an 8-bit element type");
  require(!a4 || is_block_mx(p.a_scale_mode), "a_scale_mode", "e2m1 A needs vec32_ue8m0 or vec16_ue4m3 scales");
  require(!b4 || is_block_mx(p.b_scale_mode), "b_scale_mode", "e2m1 B needs vec32_ue8m0 or vec16_ue4m3 scales");
  require(p.a_scale_mode != MmScaleMode::vec16_ue4m3 || a4, "a_scale_mode", "vec16_ue4m3 (NVFP4) needs e2m1 A");
  require(p.b_scale_mode != MmScaleMode::vec16_ue4m3 || b4, "b_scale_mode", "vec16_ue4m3 (NVFP4) needs e2m1 B");
  require(is_block_mx(p.a_scale_mode) == is_block_mx(p.b_scale_mode), "b_scale_mode",
          "MX/NVFP4 block scales must be used on both operands");
  if (is_block_mx(p.a_scale_mode)) require(p.k % 32 == 0, "K", "MX/NVFP4 need K % 32 == 0");
  require(p.k % 16 == 0, "K", "FP8 needs K % 16 == 0 (16-byte aligned K rows)");
  const int64_t elem_bits = a4 ? 4 : 8;
  require(p.lda >= p.k && (p.lda * elem_bits / 8) % 16 == 0 && (p.lda * elem_bits) % 8 == 0, "lda",
          "lda must be >= K and a multiple of 16 bytes");
  require(p.ldb >= p.k && (p.ldb * elem_bits / 8) % 16 == 0 && (p.ldb * elem_bits) % 8 == 0, "ldb",
          "ldb must be >= K and a multiple of 16 bytes");
  require(p.ldd >= p.n && (p.ldd * out_bytes(p.out)) % 16 == 0, "ldd", "ldd must be >= N and a multiple of 16 bytes");
  require(!(p.bias && p.out == MmOut::e4m3), "bias", "bias is not supported with an e4m3 output");
  require(!(p.bias && p.out == MmOut::fp32), "bias", "bias is not supported when the output is fp32");
  if (p.m == 0 || p.n == 0 || p.k == 0) return;
  require(p.a && reinterpret_cast<uintptr_t>(p.a) % 16 == 0, "a", "A must be non-null and 16-byte aligned");
  require(p.b && reinterpret_cast<uintptr_t>(p.b) % 16 == 0, "b", "B must be non-null and 16-byte aligned");
  require(p.d && reinterpret_cast<uintptr_t>(p.d) % 16 == 0, "d", "D must be non-null and 16-byte aligned");
  require(p.a_scale != nullptr, "a_scale", "a_scale is null");
  require(p.b_scale != nullptr, "b_scale", "b_scale is null");
}

template <typename T>
void set_attr(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr, const T& v, const ScaledMmParams& p) {
  lt_check(cublasLtMatmulDescSetAttribute(desc, attr, &v, sizeof(v)), "cublasLtMatmulDescSetAttribute", p);
}

// An e4m3 D's C: bf16 with rows padded to 8 elements (16 bytes).
int64_t e4m3_ldc(const ScaledMmParams& p) { return (p.n + 7) / 8 * 8; }

// The matmul descriptor, layouts and preference of `p`, with the scale pointers given (the
// repacked BLK128x128 ones, or a stand-in when only the heuristic is wanted).
void build_descriptors(Lt& lt, const ScaledMmParams& p, const void* a_scale, const void* b_scale) {
  lt_check(cublasLtMatmulDescCreate(&lt.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F), "cublasLtMatmulDescCreate", p);
  set_attr(lt.desc, CUBLASLT_MATMUL_DESC_TRANSA, static_cast<int32_t>(CUBLAS_OP_T), p);
  set_attr(lt.desc, CUBLASLT_MATMUL_DESC_TRANSB, static_cast<int32_t>(CUBLAS_OP_N), p);
  set_attr(lt.desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, b_scale, p);
  set_attr(lt.desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, a_scale, p);
  set_attr(lt.desc, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, lt_mode(p.b_scale_mode), p);
  set_attr(lt.desc, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, lt_mode(p.a_scale_mode), p);
  set_attr(lt.desc, CUBLASLT_MATMUL_DESC_FAST_ACCUM, static_cast<int8_t>(p.fast_accum ? 1 : 0), p);
  if (p.out == MmOut::e4m3 && p.d_scale) set_attr(lt.desc, CUBLASLT_MATMUL_DESC_D_SCALE_POINTER, p.d_scale, p);
  if (p.bias) {
    set_attr(lt.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, static_cast<int32_t>(CUBLASLT_EPILOGUE_BIAS), p);
    set_attr(lt.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, p.bias, p);
    set_attr(lt.desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, static_cast<int32_t>(out_type(p.out)), p);
  }
  const uint64_t m = static_cast<uint64_t>(p.n), n = static_cast<uint64_t>(p.m), k = static_cast<uint64_t>(p.k);
  lt_check(cublasLtMatrixLayoutCreate(&lt.a, elem_type(p.b_elem), k, m, p.ldb), "cublasLtMatrixLayoutCreate(A)", p);
  lt_check(cublasLtMatrixLayoutCreate(&lt.b, elem_type(p.a_elem), k, n, p.lda), "cublasLtMatrixLayoutCreate(B)", p);
  lt_check(cublasLtMatrixLayoutCreate(&lt.d, out_type(p.out), m, n, p.ldd), "cublasLtMatrixLayoutCreate(D)", p);
  // An e4m3 D needs a 16-bit C type, and C = D with another descriptor is refused (status 7).
  if (p.out == MmOut::e4m3)
    lt_check(cublasLtMatrixLayoutCreate(&lt.c, CUDA_R_16BF, m, n, e4m3_ldc(p)), "cublasLtMatrixLayoutCreate(C)", p);
  else lt_check(cublasLtMatrixLayoutCreate(&lt.c, out_type(p.out), m, n, p.ldd), "cublasLtMatrixLayoutCreate(C)", p);
  lt_check(cublasLtMatmulPreferenceCreate(&lt.pref), "cublasLtMatmulPreferenceCreate", p);
  const uint64_t ws = kWorkspaceBytes;
  lt_check(cublasLtMatmulPreferenceSetAttribute(lt.pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)),
           "cublasLtMatmulPreferenceSetAttribute", p);
}

// Everything the heuristic sees of a call: the device, the sizes, types, layouts, scale modes
// and flags of the descriptors build_descriptors makes, and which optional pointers are set (the
// heuristic reads no data pointer; alignment is the preference's default of 256 bytes).
std::string heuristic_key(const ScaledMmParams& p) {
  int dev = 0;
  cuda_check(cudaGetDevice(&dev), "cudaGetDevice");
  std::string k;
  for (int64_t v :
       {static_cast<int64_t>(dev), p.m, p.n, p.k, p.lda, p.ldb, p.ldd, static_cast<int64_t>(p.a_elem),
        static_cast<int64_t>(p.b_elem), static_cast<int64_t>(p.a_scale_mode), static_cast<int64_t>(p.b_scale_mode),
        static_cast<int64_t>(p.out), static_cast<int64_t>(p.a_k_major), static_cast<int64_t>(p.b_k_major),
        static_cast<int64_t>(p.fast_accum), static_cast<int64_t>(p.bias != nullptr),
        static_cast<int64_t>(p.out == MmOut::e4m3 && p.d_scale != nullptr)})
    k += std::to_string(v) + ',';
  return k;
}

// The heuristic's algorithms per key, best first (or its refusal, status 15 / 7: cuBLASLt's
// answer for those parameters), kept for the process: the query may wait for the device, so the
// rows' preparation asks it before the backend holds the stream (scaled_mm_cublaslt_plan). The
// whole list is kept because each of the row's tactics runs one rank of it.
struct CachedAlgos {
  cublasLtMatmulAlgo_t algos[kMaxHeuristicTactics]{};
  int found = 0;
  std::exception_ptr refused;
};

// cuBLASLt's list for `p`: up to kMaxHeuristicTactics algorithms "in the order of increasing
// estimated compute time" (cuBLASLt docs, cublasLtMatmulAlgoGetHeuristic), so rank 0 is its
// first choice. A result counts only where its state is CUBLAS_STATUS_SUCCESS (cuBLASLt docs,
// cublasLtMatmulHeuristicResult_t: its other fields are valid only then). None is a refusal.
CachedAlgos ask_heuristic(DeviceState& st, const Lt& lt, const ScaledMmParams& p) {
  CachedAlgos e;
  try {
    cublasLtMatmulHeuristicResult_t heur[kMaxHeuristicTactics]{};
    int returned = 0;
    lt_check(cublasLtMatmulAlgoGetHeuristic(st.handle, lt.desc, lt.a, lt.b, lt.c, lt.d, lt.pref, kMaxHeuristicTactics,
                                            heur, &returned),
             "cublasLtMatmulAlgoGetHeuristic", p);
    for (int i = 0; i < returned && i < kMaxHeuristicTactics; ++i)
      if (heur[i].state == CUBLAS_STATUS_SUCCESS) e.algos[e.found++] = heur[i].algo;
    if (e.found == 0) lt_check(CUBLAS_STATUS_NOT_SUPPORTED, "cublasLtMatmulAlgoGetHeuristic (no algorithm)", p);
  } catch (const MmLibraryRefusal&) {
    e.refused = std::current_exception();
  }
  return e;
}

// The list for `p`'s key, asked once per process. `asked`, when given, is set when this call
// asked the heuristic (the key was new to the process).
CachedAlgos cached_algos(DeviceState& st, const Lt& lt, const ScaledMmParams& p, bool* asked = nullptr) {
  static std::mutex mu;
  static std::map<std::string, CachedAlgos> lists;
  const std::string key = heuristic_key(p);
  {
    std::lock_guard<std::mutex> lock(mu);
    if (const auto it = lists.find(key); it != lists.end()) {
      if (it->second.refused) std::rethrow_exception(it->second.refused);
      return it->second;
    }
  }
  if (asked) *asked = true;
  const CachedAlgos e = ask_heuristic(st, lt, p);
  std::lock_guard<std::mutex> lock(mu);
  lists.emplace(key, e);
  if (e.refused) std::rethrow_exception(e.refused);
  return e;
}

// The algorithm of rank p.heuristic_rank in `p`'s list. A rank past its end is one this device
// does not offer (RankAbsent: the row's tactic is a SKIP), not a failure.
cublasLtMatmulAlgo_t cached_algo(DeviceState& st, const Lt& lt, const ScaledMmParams& p) {
  if (p.heuristic_rank < 0 || p.heuristic_rank >= kMaxHeuristicTactics)
    throw std::logic_error("scaled_mm_cublaslt: heuristic rank " + std::to_string(p.heuristic_rank) +
                           " is outside 0.." + std::to_string(kMaxHeuristicTactics - 1));
  const CachedAlgos list = cached_algos(st, lt, p);
  if (p.heuristic_rank >= list.found)
    throw RankAbsent(p.heuristic_rank, list.found,
                     "cuBLASLt's heuristic returned " + std::to_string(list.found) +
                         (list.found == 1 ? " algorithm" : " algorithms") + " for " + combination(p) +
                         " on this device; tactic h" + std::to_string(p.heuristic_rank) + " is rank " +
                         std::to_string(p.heuristic_rank));
  return list.algos[p.heuristic_rank];
}

// Bytes of `rows` × `k` elements of `bits` bits at leading dimension ld.
size_t operand_bytes(int64_t rows, int64_t ld, int64_t bits) { return static_cast<size_t>(rows * ld * bits / 8); }

// More than any scale mode's tensor for `rows` rows and K = k needs (a float per 16 elements of
// a row, per row, plus a block row of padding), so the warm-up needs no mode-by-mode sizes.
size_t scale_bytes_bound(int64_t rows, int64_t k) { return static_cast<size_t>((rows + 128) * (k / 16 + 8) * 4); }

// One call of the matmul `shape` describes with each of the heuristic's first `ranks`
// algorithms, on zeroed operands of its sizes (warm_up.hpp): one scratch for them all, and each
// call in its own try, so that an algorithm that fails leaves the others warmed.
void warm_up_cublaslt(const ScaledMmParams& shape, bool bias, bool d_scale, int ranks) {
  const int64_t bits = shape.a_elem == MmElem::e2m1 ? 4 : 8;
  const std::vector<size_t> sizes{operand_bytes(shape.m, shape.lda, bits),
                                  operand_bytes(shape.n, shape.ldb, bits),
                                  static_cast<size_t>(shape.m * shape.ldd * out_bytes(shape.out)),
                                  scale_bytes_bound(shape.m, shape.k),
                                  scale_bytes_bound(shape.n, shape.k),
                                  static_cast<size_t>(shape.n * 4),
                                  4};
  run_on_zeroed_scratch(sizes, [&](const std::vector<void*>& at, cudaStream_t s) {
    ScaledMmParams p = shape;
    p.a = at[0], p.b = at[1], p.d = at[2], p.a_scale = at[3], p.b_scale = at[4];
    p.bias = bias ? at[5] : nullptr;
    p.d_scale = d_scale ? static_cast<const float*>(at[6]) : nullptr;
    for (p.heuristic_rank = 0; p.heuristic_rank < ranks; ++p.heuristic_rank) {
      try {
        scaled_mm_cublaslt(p, s);
      } catch (...) {
        // The run of that tactic calls it again and reports what failed.
      }
    }
  });
}

}  // namespace

void scaled_mm_cublaslt_prepare() { device_state(); }

void scaled_mm_cublaslt_plan(const ScaledMmParams& shape, bool bias, bool d_scale) noexcept {
  try {
    DeviceState& st = device_state();
    // Stand-ins for the pointers (aligned, non-null, never read): the descriptors only record
    // them; which optional ones are set is part of the problem.
    ScaledMmParams p = shape;
    p.a = p.b = p.a_scale = p.b_scale = st.workspace;
    p.d = st.workspace;
    p.bias = bias ? st.workspace : nullptr;
    p.d_scale = d_scale ? static_cast<const float*>(st.workspace) : nullptr;
    validate(p);
    if (p.m == 0 || p.n == 0 || p.k == 0) return;
    Lt lt;
    build_descriptors(lt, p, p.a_scale, p.b_scale);
    bool asked = false;
    const int found = cached_algos(st, lt, p, &asked).found;
    // cuBLASLt loads a kernel (cuLibraryLoadData) at its first use in the process, whatever
    // CUDA_MODULE_LOADING says, and the load waits for the device: under the backend's stream
    // gate the first call of each kernel waited out the gate's whole timeout (160 of the 255
    // cuda.cublaslt cases of the default tier that run, on the H200; 0 with this warm-up,
    // docs/status/sm90.md 2026-12-02 afternoon). One call on zeroed operands of the same shape,
    // here, loads it. Every algorithm of the list is called, once per shape in the process: each
    // may be a kernel of its own, and a shape's other tactics (ranks) are cases of the same
    // problem, which a shard keeps together, so they mostly run in this worker next.
    if (asked) warm_up_cublaslt(shape, bias, d_scale, found);
  } catch (...) {
    // Left to the run, which asks again and reports what failed.
  }
}

void scaled_mm_cublaslt(const ScaledMmParams& p, CUstream_st* stream) {
  validate(p);
  if (p.m == 0 || p.n == 0) return;
  // No reduction: D = bias or 0, which the portable kernel writes without touching A, B or scales
  // (cuBLASLt rejects k = 0).
  if (p.k == 0) {
    scaled_mm_mx_kernel(p, stream);
    return;
  }
  cudaStream_t s = stream;
  DeviceState& st = device_state();

  // cuBLAS's BLK128x128 layout pads each row of K-blocks to a multiple of 4 (PyTorch's L4,
  // pytorch#166752); opcts passes it unpadded, so such scales are repacked for the call.
  const void* a_scale = p.a_scale;
  const void* b_scale = p.b_scale;
  std::unique_ptr<StreamBuffer> repacked[2];
  const int64_t kb = (p.k + 127) / 128, kb4 = (kb + 3) / 4 * 4;
  auto repack = [&](const void* src, int64_t rows, int slot) -> const void* {
    const int64_t rb = (rows + 127) / 128;
    repacked[slot] = std::make_unique<StreamBuffer>(static_cast<size_t>(rb * kb4) * sizeof(float), s);
    void* dst = repacked[slot]->ptr;
    cuda_check(cudaMemsetAsync(dst, 0, static_cast<size_t>(rb * kb4) * sizeof(float), s), "cudaMemsetAsync");
    cuda_check(cudaMemcpy2DAsync(dst, kb4 * sizeof(float), src, kb * sizeof(float), kb * sizeof(float), rb,
                                 cudaMemcpyDeviceToDevice, s),
               "cudaMemcpy2DAsync(blk128 scales)");
    return dst;
  };
  if (kb != kb4) {
    if (p.a_scale_mode == MmScaleMode::blk128x128_f32) a_scale = repack(p.a_scale, p.m, 0);
    if (p.b_scale_mode == MmScaleMode::blk128x128_f32) b_scale = repack(p.b_scale, p.n, 1);
  }

  Lt lt;
  build_descriptors(lt, p, a_scale, b_scale);
  const cublasLtMatmulAlgo_t algo = cached_algo(st, lt, p);
  // beta = 0, so C is never read; it aliases D with D's layout (the in-place form cuBLASLt
  // accepts), except for an e4m3 D (build_descriptors: a 16-bit C of its own).
  std::unique_ptr<StreamBuffer> c_buf;
  void* c_ptr = p.d;
  if (p.out == MmOut::e4m3) {
    c_buf = std::make_unique<StreamBuffer>(static_cast<size_t>(e4m3_ldc(p) * p.m) * 2, s);
    c_ptr = c_buf->ptr;
  }

  const float alpha = p.global_scale, beta = 0.0f;
  lt_check(cublasLtMatmul(st.handle, lt.desc, &alpha, p.b, lt.a, p.a, lt.b, &beta, c_ptr, lt.c, p.d, lt.d, &algo,
                          st.workspace, kWorkspaceBytes, s),
           "cublasLtMatmul", p);
}

}  // namespace opcts::cuda
