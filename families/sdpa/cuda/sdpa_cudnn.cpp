// cuDNN 9 backend-API SDPA: the composite flash-attention graphs of cudnn-frontend 1.x, built
// descriptor by descriptor. The graph shapes, op order and data types are documented in
// sdpa_cudnn.hpp; each helper below names the frontend node it mirrors.
#include "families/sdpa/cuda/sdpa_cudnn.hpp"
#include "gpu/cuda/cuda_error.hpp"
#include "gpu/cuda/stream_scratch.cuh"
#include "gpu/cuda/warm_up.hpp"

#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <deque>
#include <exception>
#include <limits>
#include <map>
#include <mutex>
#include <vector>

namespace opcts::cuda {

namespace {

// ------------------------------------------------------------------ errors

std::string last_error_text() {
  char buf[2048] = {0};
  cudnnGetLastErrorString(buf, sizeof buf);
  return buf;
}

std::string status_text(cudnnStatus_t s) {
  std::string msg = std::string(cudnnGetErrorString(s)) + " (" + std::to_string(static_cast<int>(s)) + ")";
  const std::string last = last_error_text();
  if (!last.empty()) msg += ": " + last;
  return msg;
}

bool is_refusal(cudnnStatus_t s) { return static_cast<int>(s) / 1000 == 3; }  // CUDNN_STATUS_NOT_SUPPORTED_*

void check(cudnnStatus_t s, const std::string& what) {
  if (s == CUDNN_STATUS_SUCCESS) return;
  const std::string msg = "sdpa_cudnn: " + what + ": " + status_text(s);
  if (is_refusal(s)) throw SdpaCudnnRefusal(static_cast<int>(s), msg);
  throw std::runtime_error(msg);
}

void cuda_check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string("sdpa_cudnn: ") + what + ": " + cuda_error_text(e));
}

void require(bool ok, const char* arg, const std::string& why) {
  if (!ok) throw SdpaCudnnArgumentError(arg, std::string("sdpa_cudnn: ") + why);
}

// ------------------------------------------------------------------ handles

cudnnHandle_t device_handle() {
  static std::mutex mu;
  static std::map<int, cudnnHandle_t> handles;
  int dev = 0;
  cuda_check(cudaGetDevice(&dev), "cudaGetDevice");
  std::lock_guard<std::mutex> lock(mu);
  cudnnHandle_t& h = handles[dev];
  if (!h) check(cudnnCreate(&h), "cudnnCreate");
  return h;
}

// Deprecated in the 9.x headers but still what cudnn-frontend sets; spelled by value so the
// build stays free of deprecation warnings.
constexpr auto kOpGraphHandle = static_cast<cudnnBackendAttributeName_t>(800);  // OPERATIONGRAPH_HANDLE
constexpr auto kPlanHandle = static_cast<cudnnBackendAttributeName_t>(400);     // EXECUTION_PLAN_HANDLE

struct Desc {
  cudnnBackendDescriptor_t d = nullptr;
  explicit Desc(cudnnBackendDescriptorType_t t) {
    check(cudnnBackendCreateDescriptor(t, &d), "cudnnBackendCreateDescriptor");
  }
  ~Desc() {
    if (d) cudnnBackendDestroyDescriptor(d);
  }
  Desc(const Desc&) = delete;
  Desc& operator=(const Desc&) = delete;
};

void set(cudnnBackendDescriptor_t d, cudnnBackendAttributeName_t a, cudnnBackendAttributeType_t t, int64_t n,
         const void* v, const char* what) {
  check(cudnnBackendSetAttribute(d, a, t, n, v), std::string("set ") + what);
}

// ------------------------------------------------------------------ engine configs

// A plan's workspace in bytes.
int64_t workspace_of(cudnnBackendDescriptor_t plan) {
  int64_t ws = 0, n = 0;
  check(cudnnBackendGetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1, &n, &ws),
        "plan workspace size");
  return ws;
}

// The global index of the engine `cfg` configures, or -1 where cuDNN does not say (it only
// names the engine in the plan's description).
int64_t engine_id_of(cudnnBackendDescriptor_t cfg) {
  int64_t engine_id = -1, n = 0;
  Desc eng(CUDNN_BACKEND_ENGINE_DESCRIPTOR);
  cudnnBackendDescriptor_t e = eng.d;
  if (cudnnBackendGetAttribute(cfg, CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &n, &e) ==
      CUDNN_STATUS_SUCCESS)
    cudnnBackendGetAttribute(e, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &n, &engine_id);
  return engine_id;
}

// What a build of `rank` throws where only `count` (> 0) engine configs finalize.
RankAbsent config_absent(int rank, int count) {
  return RankAbsent(rank, count,
                    "cuDNN's heuristics (mode A) gave " + std::to_string(count) +
                        (count == 1 ? " engine config" : " engine configs") +
                        " that finalize a plan for this graph on this device; tactic c" + std::to_string(rank) +
                        " is rank " + std::to_string(rank) + " [cuDNN " + std::to_string(cudnnGetVersion()) + "]");
}

// ------------------------------------------------------------------ graph builder

struct Tensor {
  cudnnBackendDescriptor_t desc = nullptr;
  int64_t uid = 0;
  std::vector<int64_t> dims, strides;
  cudnnDataType_t type = CUDNN_DATA_FLOAT;
};

std::vector<int64_t> packed(const std::vector<int64_t>& dims) {
  std::vector<int64_t> s(dims.size(), 1);
  for (int i = static_cast<int>(dims.size()) - 2; i >= 0; --i) s[i] = s[i + 1] * dims[i + 1];
  return s;
}

// MATMUL's GEMM M/N/K override tensors (per-sequence lengths: the padding mask), and whether
// the rows and columns past them read as 0 (frontend Matmul_attributes::set_padding(0.0)).
struct Overrides {
  const Tensor* m = nullptr;
  const Tensor* n = nullptr;
  const Tensor* k = nullptr;
  bool pad_zero = false;
};

class Graph {
 public:
  explicit Graph(cudnnHandle_t h) : handle_(h) {}

  /// `ragged`: the tensor's per-batch element offsets ([B + 1] int32; frontend set_ragged_offset).
  Tensor tensor(cudnnDataType_t t, std::vector<int64_t> dims, std::vector<int64_t> strides, bool is_virtual,
                int64_t uid = 0, bool by_value = false, const Tensor* ragged = nullptr) {
    Tensor r;
    r.uid = uid ? uid : next_virtual_uid_++;
    r.dims = std::move(dims);
    r.strides = std::move(strides);
    r.type = t;
    auto& d = keep(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
    const int64_t align = 16, nd = static_cast<int64_t>(r.dims.size());
    set(d.d, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &t, "tensor data type");
    set(d.d, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, nd, r.dims.data(), "tensor dims");
    set(d.d, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, nd, r.strides.data(), "tensor strides");
    set(d.d, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &r.uid, "tensor uid");
    set(d.d, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &align, "tensor alignment");
    set(d.d, CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &is_virtual, "tensor is_virtual");
    if (by_value) set(d.d, CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, 1, &by_value, "tensor is_by_value");
    if (ragged)
      set(d.d, CUDNN_ATTR_TENSOR_RAGGED_OFFSET_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &ragged->desc,
          "tensor ragged offset");
    check(cudnnBackendFinalize(d.d), "finalize tensor uid " + std::to_string(r.uid));
    r.desc = d.d;
    return r;
  }
  Tensor virt(cudnnDataType_t t, std::vector<int64_t> dims, std::vector<int64_t> strides = {}) {
    if (strides.empty()) strides = packed(dims);
    return tensor(t, std::move(dims), std::move(strides), true);
  }
  /// A by-value scalar (frontend: std::make_shared<Tensor_attributes>(value)); its host copy
  /// goes into the variant pack.
  Tensor scalar_f(float v) {
    floats_.push_back(v);
    Tensor t = tensor(CUDNN_DATA_FLOAT, {1, 1, 1, 1}, {1, 1, 1, 1}, false, next_scalar_uid_++, true);
    scalars_.push_back({t.uid, &floats_.back()});
    return t;
  }
  Tensor scalar_i(int32_t v) {
    ints_.push_back(v);
    Tensor t = tensor(CUDNN_DATA_INT32, {1, 1, 1, 1}, {1, 1, 1, 1}, false, next_scalar_uid_++, true);
    scalars_.push_back({t.uid, &ints_.back()});
    return t;
  }

  /// OPERATION_POINTWISE: y = mode(x[, b][, t]); `compute` is the descriptor's MATH_PREC.
  Tensor pw(cudnnPointwiseMode_t mode, const Tensor& x, const Tensor* b, const Tensor* t, Tensor y,
            cudnnDataType_t compute = CUDNN_DATA_FLOAT, int64_t axis = -1) {
    auto& pd = keep(CUDNN_BACKEND_POINTWISE_DESCRIPTOR);
    set(pd.d, CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode, "pointwise mode");
    set(pd.d, CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &compute, "pointwise math prec");
    if (axis >= 0) set(pd.d, CUDNN_ATTR_POINTWISE_AXIS, CUDNN_TYPE_INT64, 1, &axis, "pointwise axis");
    check(cudnnBackendFinalize(pd.d), "finalize pointwise descriptor (mode " + std::to_string(mode) + ")");
    auto& op = keep(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR);
    set(op.d, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &pd.d, "pw desc");
    if (mode == CUDNN_POINTWISE_TANH_BWD) {
      // Activation backward (frontend pointwise node): IN_0 = dy, IN_1 = x, OUT_0 = dx.
      set(op.d, CUDNN_ATTR_OPERATION_POINTWISE_DYDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x.desc, "pw dy");
      set(op.d, CUDNN_ATTR_OPERATION_POINTWISE_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &b->desc, "pw x");
      set(op.d, CUDNN_ATTR_OPERATION_POINTWISE_DXDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y.desc, "pw dx");
    } else {
      set(op.d, CUDNN_ATTR_OPERATION_POINTWISE_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x.desc, "pw x");
      if (b) set(op.d, CUDNN_ATTR_OPERATION_POINTWISE_BDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &b->desc, "pw b");
      if (t) set(op.d, CUDNN_ATTR_OPERATION_POINTWISE_TDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &t->desc, "pw t");
      set(op.d, CUDNN_ATTR_OPERATION_POINTWISE_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y.desc, "pw y");
    }
    check(cudnnBackendFinalize(op.d), "finalize pointwise op (mode " + std::to_string(mode) + ")");
    ops_.push_back(op.d);
    return y;
  }
  /// A pointwise op whose output is a virtual tensor shaped like `like`.
  Tensor pwv(cudnnPointwiseMode_t mode, const Tensor& x, const Tensor* b, const Tensor& like,
             cudnnDataType_t out = CUDNN_DATA_FLOAT, cudnnDataType_t compute = CUDNN_DATA_FLOAT,
             const Tensor* t = nullptr, int64_t axis = -1) {
    return pw(mode, x, b, t, virt(out, like.dims, like.strides), compute, axis);
  }

  Tensor matmul(const Tensor& a, const Tensor& b, Tensor c, Overrides ov = {}) {
    auto& md = keep(CUDNN_BACKEND_MATMUL_DESCRIPTOR);
    const cudnnDataType_t comp = CUDNN_DATA_FLOAT;
    set(md.d, CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &comp, "matmul comp type");
    if (ov.pad_zero) {
      const double zero = 0.0;
      set(md.d, CUDNN_ATTR_MATMUL_PADDING_VALUE, CUDNN_TYPE_DOUBLE, 1, &zero, "matmul padding value");
    }
    check(cudnnBackendFinalize(md.d), "finalize matmul descriptor");
    auto& op = keep(CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR);
    set(op.d, CUDNN_ATTR_OPERATION_MATMUL_ADESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &a.desc, "matmul a");
    set(op.d, CUDNN_ATTR_OPERATION_MATMUL_BDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &b.desc, "matmul b");
    set(op.d, CUDNN_ATTR_OPERATION_MATMUL_CDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &c.desc, "matmul c");
    set(op.d, CUDNN_ATTR_OPERATION_MATMUL_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &md.d, "matmul desc");
    if (ov.m)
      set(op.d, CUDNN_ATTR_OPERATION_MATMUL_GEMM_M_OVERRIDE_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &ov.m->desc,
          "m override");
    if (ov.n)
      set(op.d, CUDNN_ATTR_OPERATION_MATMUL_GEMM_N_OVERRIDE_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &ov.n->desc,
          "n override");
    if (ov.k)
      set(op.d, CUDNN_ATTR_OPERATION_MATMUL_GEMM_K_OVERRIDE_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &ov.k->desc,
          "k override");
    check(cudnnBackendFinalize(op.d), "finalize matmul op");
    ops_.push_back(op.d);
    return c;
  }

  Tensor reduction(cudnnReduceTensorOp_t mode, const Tensor& x, Tensor y) {
    auto& rd = keep(CUDNN_BACKEND_REDUCTION_DESCRIPTOR);
    const cudnnDataType_t comp = CUDNN_DATA_FLOAT;
    set(rd.d, CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, 1, &mode, "reduction operator");
    set(rd.d, CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &comp, "reduction comp type");
    check(cudnnBackendFinalize(rd.d), "finalize reduction descriptor");
    auto& op = keep(CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR);
    set(op.d, CUDNN_ATTR_OPERATION_REDUCTION_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x.desc, "reduction x");
    set(op.d, CUDNN_ATTR_OPERATION_REDUCTION_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y.desc, "reduction y");
    set(op.d, CUDNN_ATTR_OPERATION_REDUCTION_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &rd.d, "reduction desc");
    check(cudnnBackendFinalize(op.d), "finalize reduction op");
    ops_.push_back(op.d);
    return y;
  }

  /// OPERATION_PAGED_CACHE_LOAD (frontend PagedCacheLoadNode): y [B, H, S, D] (or its
  /// transpose) gathered from `container` [num_pages, H, page_size, D] through `table`
  /// [B, 1, pages, 1] for `seq_len` [B, 1, 1, 1] keys.
  Tensor paged_load(const Tensor& container, const Tensor& seq_len, const Tensor& table, Tensor y) {
    auto& op = keep(CUDNN_BACKEND_OPERATION_PAGED_CACHE_LOAD_DESCRIPTOR);
    set(op.d, CUDNN_ATTR_OPERATION_PAGED_CACHE_LOAD_CONTAINER_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &container.desc,
        "paged load container");
    set(op.d, CUDNN_ATTR_OPERATION_PAGED_CACHE_LOAD_PAGE_TABLE_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &table.desc,
        "paged load page table");
    set(op.d, CUDNN_ATTR_OPERATION_PAGED_CACHE_LOAD_SEQUENCE_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &seq_len.desc,
        "paged load sequence lengths");
    set(op.d, CUDNN_ATTR_OPERATION_PAGED_CACHE_LOAD_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y.desc, "paged load y");
    check(cudnnBackendFinalize(op.d), "finalize paged cache load op");
    ops_.push_back(op.d);
    return y;
  }

  Tensor reshape(const Tensor& x, Tensor y) {
    auto& op = keep(CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR);
    set(op.d, CUDNN_ATTR_OPERATION_RESHAPE_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x.desc, "reshape x");
    set(op.d, CUDNN_ATTR_OPERATION_RESHAPE_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y.desc, "reshape y");
    check(cudnnBackendFinalize(op.d), "finalize reshape op");
    ops_.push_back(op.d);
    return y;
  }

  /// OPERATIONGRAPH → ENGINEHEUR (mode A) → the ENGINECFG of rank `rank`: the rank-th (from 0),
  /// in the heuristics' order, whose EXECUTION_PLAN finalizes (rank 0: the first). A config that
  /// does not finalize has no rank: cuDNN cannot run it for this graph here. None finalizing is a
  /// refusal whatever the rank (the graph is not supported); fewer than rank + 1 is
  /// RankAbsent. The configs past the rank's are not tried.
  void finalize_plan(int rank, std::string* description, int64_t* workspace) {
    const std::vector<cudnnBackendDescriptor_t> cfgs = heuristic_configs(finalize_graph());
    std::string failures;
    cudnnStatus_t last = CUDNN_STATUS_NOT_SUPPORTED;
    int finalized = 0;
    for (size_t i = 0; i < cfgs.size(); ++i) {
      std::unique_ptr<Desc> plan = finalized_plan(cfgs[i], i, &last, &failures);
      if (!plan) continue;
      if (finalized++ < rank) continue;  // a lower rank's config
      *workspace = workspace_of(plan->d);
      *description = "engine " + std::to_string(engine_id_of(cfgs[i])) + " (config " + std::to_string(i + 1) + " of " +
                     std::to_string(cfgs.size()) + ", rank " + std::to_string(rank) + "), workspace " +
                     std::to_string(*workspace) + " B, " + std::to_string(ops_.size()) + " ops";
      plan_ = std::move(plan);
      return;
    }
    if (finalized > 0) throw config_absent(rank, finalized);
    const std::string msg = "sdpa_cudnn: no engine config of " + std::to_string(cfgs.size()) +
                            " (heuristics mode A) finalized an execution plan" + failures;
    throw SdpaCudnnRefusal(static_cast<int>(last), msg);  // every config refused: the graph is not supported
  }

  cudnnBackendDescriptor_t plan() const { return plan_->d; }
  cudnnHandle_t handle() const { return handle_; }
  const std::vector<std::pair<int64_t, void*>>& scalars() const { return scalars_; }

 private:
  Desc& keep(cudnnBackendDescriptorType_t t) {
    keep_.push_back(std::make_unique<Desc>(t));
    return *keep_.back();
  }

  // The operation graph of the ops added so far, finalized.
  cudnnBackendDescriptor_t finalize_graph() {
    auto& g = keep(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
    set(g.d, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, static_cast<int64_t>(ops_.size()),
        ops_.data(), "graph ops");
    set(g.d, kOpGraphHandle, CUDNN_TYPE_HANDLE, 1, &handle_, "graph handle");
    check(cudnnBackendFinalize(g.d), "finalize operation graph (" + std::to_string(ops_.size()) + " ops)");
    return g.d;
  }

  // The engine configs heuristics mode A gives for `graph`, in its order (kept with the graph's
  // descriptors); none is a refusal.
  std::vector<cudnnBackendDescriptor_t> heuristic_configs(cudnnBackendDescriptor_t graph) {
    auto& heur = keep(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
    const cudnnBackendHeurMode_t mode = CUDNN_HEUR_MODE_A;
    set(heur.d, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &graph, "heur graph");
    set(heur.d, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode, "heur mode");
    check(cudnnBackendFinalize(heur.d), "finalize engine heuristics (mode A)");
    int64_t count = 0;
    check(cudnnBackendGetAttribute(heur.d, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count,
                                   nullptr),
          "heuristics result count");
    if (count == 0)
      throw SdpaCudnnRefusal(static_cast<int>(CUDNN_STATUS_NOT_SUPPORTED),
                             "sdpa_cudnn: heuristics (mode A) returned no engine config for the graph" +
                                 (last_error_text().empty() ? std::string() : ": " + last_error_text()));
    std::vector<cudnnBackendDescriptor_t> cfgs;
    for (int64_t i = 0; i < count; ++i) cfgs.push_back(keep(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR).d);
    int64_t got = 0;
    check(cudnnBackendGetAttribute(heur.d, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, count, &got,
                                   cfgs.data()),
          "heuristics results");
    cfgs.resize(static_cast<size_t>(std::min(got, count)));
    return cfgs;
  }

  // The execution plan of config `index`, `cfg`, finalized; null where cuDNN refuses it, its
  // status then in `last` and added to `failures` (the refusal's message when none finalizes).
  std::unique_ptr<Desc> finalized_plan(cudnnBackendDescriptor_t cfg, size_t index, cudnnStatus_t* last,
                                       std::string* failures) {
    auto plan = std::make_unique<Desc>(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
    set(plan->d, kPlanHandle, CUDNN_TYPE_HANDLE, 1, &handle_, "plan handle");
    set(plan->d, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &cfg, "plan config");
    const cudnnStatus_t s = cudnnBackendFinalize(plan->d);
    if (s == CUDNN_STATUS_SUCCESS) return plan;
    *last = s;
    if (failures->size() < 1500) *failures += "; config " + std::to_string(index) + ": " + status_text(s);
    return nullptr;
  }

  cudnnHandle_t handle_;
  std::vector<std::unique_ptr<Desc>> keep_;
  std::vector<cudnnBackendDescriptor_t> ops_;
  std::unique_ptr<Desc> plan_;
  std::deque<float> floats_;
  std::deque<int32_t> ints_;
  std::vector<std::pair<int64_t, void*>> scalars_;
  int64_t next_virtual_uid_ = 100000;
  int64_t next_scalar_uid_ = 500;
};

// ------------------------------------------------------------------ problem → graph choices

enum Uid : int64_t {
  kQ = 1,
  kK = 2,
  kV = 3,
  kO = 4,
  kStats = 5,
  kDO = 6,
  kDQ = 7,
  kDK = 8,
  kDV = 9,
  kBias = 10,
  kSoftmaxSum = 11,
  kDQAccum = 12,
  kSeqLenQ = 13,
  kSeqLenKV = 14,
  kRaggedQ = 15,  // element offsets of each sequence's first row (Q and dQ, K and dK, V and dV, O and dO)
  kRaggedK = 16,
  kRaggedV = 17,
  kRaggedO = 18,
  kPageTable = 19,  // K's and V's (one block table for both)
  kSinks = 20,      // fp32 [1, Hq, 1, 1] (frontend SINK_TOKEN)
  kDSinks = 21,     // fp32 [1, Hq, 1, 1] (frontend DSINK_TOKEN)
  kSlopes = 22,     // ALiBi's fp32 [1, Hq, 1, 1] (frontend alibi_slopes)
  kDBias = 23,      // the mask's shape, in the dtype
  // fp8 (frontend sdpa fp8 inputs and outputs): fp32 [1, 1, 1, 1] each
  kDescaleQ = 24,
  kDescaleK = 25,
  kDescaleV = 26,
  kDescaleS = 27,  // 1 / scale_s, the plan's constant
  kScaleS = 28,    // kCudnnFp8ScaleS, the plan's constant
  kScaleO = 29,    // the problem's o_scale
  kAmaxS = 30,     // outputs the graph must have, to scratch
  kAmaxO = 31,
};

cudnnDataType_t fp8_type(uint8_t format) {
  return format == OPCTS_DL_FLOAT8_E5M2 ? CUDNN_DATA_FP8_E5M2 : CUDNN_DATA_FP8_E4M3;
}

enum class Align { top_left, bottom_right };

struct Band {
  bool right = false, left = false;
  int64_t right_bound = 0;  // cuDNN right bound: keep j <= i (+ Sk - Sq) + right_bound
  int64_t left_bound = 0;   // cuDNN left bound (exclusive): keep j > i (+ Sk - Sq) - left_bound
  Align align = Align::top_left;
};

cudnnDataType_t io_type(SdpaDType t) { return t == SdpaDType::fp16 ? CUDNN_DATA_HALF : CUDNN_DATA_BFLOAT16; }

bool is_causal(const SdpaParams& p) { return p.mask != SdpaMask::none; }
bool is_paged(const SdpaParams& p) { return p.page_size > 0; }
// Packed sequences of their own lengths (varlen THD, or paged): Q and O ragged, a padding mask.
bool is_packed(const SdpaParams& p) { return p.varlen || is_paged(p); }
// The keys' dimension of the graph: a paged graph's is the block table's capacity (cuDNN's
// PAGED_CACHE_LOAD takes a table of exactly ceil(s_kv / page_size) pages).
int64_t graph_seq_k(const SdpaParams& p) { return is_paged(p) ? p.max_pages_per_seq * p.page_size : p.seq_k; }
bool has_window(const SdpaParams& p) { return p.window_left >= 0 || p.window_right >= 0; }

Band band_of(const SdpaParams& p) {
  Band b;
  const bool causal = is_causal(p);
  b.right = causal || p.window_right >= 0;
  if (b.right)
    b.right_bound = causal ? (p.window_right >= 0 ? std::min<int64_t>(0, p.window_right) : 0) : p.window_right;
  b.left = p.window_left >= 0;
  if (b.left) b.left_bound = p.window_left + 1;  // FlashAttention-2's inclusive left → cuDNN's exclusive
  // Packed: each sequence has its own lengths, so only causal_upper_left (no window) is top-left.
  if ((!is_packed(p) && p.seq_q == p.seq_k) || (p.mask == SdpaMask::causal_upper_left && !has_window(p)))
    b.align = Align::top_left;
  else b.align = Align::bottom_right;
  return b;
}

// Sinks, ALiBi and dbias as the frontend builds them (sdpa_support_surface.h, softmax.h,
// utils/attn_score_modifiers.h alibi_mask, the composite backward's dBias reduction).
std::string variant_why_not(const SdpaParams& p, bool backward, bool dbias, int64_t v) {
  if (p.has_sinks) {
    if (v < 91300) return "cuDNN " + std::to_string(v) + " < 9.13.0: the sink token needs 9.13.0 (frontend)";
    if (is_packed(p)) return "sinks: the adapter gives cuDNN's sink token to the dense layouts only";
    if (p.seq_q == 1) return "cuDNN (frontend support surface): decode (s_q = 1) is not supported with a sink token";
  }
  if (p.alibi != SdpaAlibi::none) {
    // alibi_mask adds (j − i)·slope under a top-left causal mask (right bound 0, no bottom-right
    // alignment): FlashAttention-2's −slope·|i + Sk − Sq − j| is that only for Sq = Sk.
    if (p.alibi == SdpaAlibi::per_batch_head) return "ALiBi per (batch, head): cuDNN's slopes are [1, H, 1, 1]";
    if (is_packed(p)) return "ALiBi: the adapter's ragged and paged graphs take no ALiBi bias";
    if (p.mask == SdpaMask::none || p.window_right > 0)
      return "cuDNN (frontend support surface): ALiBi needs a causal mask (right bound 0)";
    if (p.seq_q != p.seq_k)
      return "cuDNN's ALiBi is (j - i)·slope from the top-left diagonal: FlashAttention-2's lower-right distance "
             "equals it only for seq_q == seq_k";
  }
  // A one-row mask's dBias, reduced over the queries onto [.., 1, Sk]: measured on an H200 with
  // cuDNN 9.14.0 (2026-12-07, docs/status/sm90.md (p)), the backward wrote outside its outputs
  // (into the case's q, k, v and mask) and twice lost the device (illegal address), whichever
  // layout the bias took.
  if (backward && dbias && p.mask_strides.seq == 0)
    return "dbias of a bias broadcast over the queries ([.., 1, Sk]): cuDNN 9.14.0 wrote outside its outputs "
           "and lost the device on an H200 (docs/status/sm90.md, 2026-12-07 (p)); the adapter does not build it";
  if (backward && dbias) {
    if (v < 90500) return "cuDNN " + std::to_string(v) + " < 9.5.0: dBias needs s_q, s_kv multiples of 64 (frontend)";
    if (p.mask_kind != SdpaMaskTensor::additive) return "dbias is the gradient of an additive mask";
  }
  return {};
}

// The fp8 graph as cudnn-frontend builds it for per-tensor scaling (sdpa_support_surface.h: cuDNN
// >= 9.1.0, not 9.10.0 (why_not refuses it for every graph), Hopper or newer (the glue's
// supports), no bias, head dims multiples of 16 up to 256 on sm90, an fp8 O before Blackwell with
// 9.13.0, no bottom-right causal mask before Blackwell). The adapter builds the graph every arch
// from sm90 takes: an fp8 O, top-left masks.
std::string fp8_why_not(const SdpaParams& p, bool backward, int64_t v) {
  if (p.fp8 == SdpaFp8::none) return p.fp8_out ? "an fp8 output needs fp8 q, k and v (cuDNN's fp8 graph)" : "";
  if (p.fp8 == SdpaFp8::kv) return "an fp8 KV cache under 16-bit queries: cuDNN's fp8 SDPA takes q, k and v all fp8";
  if (backward) return "fp8 backward: the adapter builds the fp8 forward only (frontend sdpa_fp8_backward not built)";
  if (v < 90100) return "cuDNN " + std::to_string(v) + " < 9.1.0: fp8 SDPA needs 9.1.0 (frontend)";
  if (p.descale_per_head) return "descales per (batch, KV head): cuDNN's fp8 SDPA takes per-tensor descales";
  if (!p.fp8_out)
    return "a 16-bit O from fp8 inputs: the adapter builds the fp8-O graph, the one cuDNN takes before Blackwell "
           "(a 16-bit O needs Blackwell and 9.13.0: frontend)";
  if (p.head_dim % 16 != 0 || p.head_dim_v % 16 != 0)
    return "cuDNN (frontend support surface): fp8 SDPA head dims must be multiples of 16";
  if (is_packed(p)) return "fp8: the adapter's fp8 graph is dense (no ragged or paged layout)";
  if (p.mask_kind != SdpaMaskTensor::none) return "cuDNN (frontend support surface): SDPA FP8 does not support bias";
  if (p.has_sinks || p.alibi != SdpaAlibi::none || p.softcap > 0)
    return "fp8: the adapter's fp8 graph takes no sink token, ALiBi or softcap";
  if ((is_causal(p) || has_window(p)) && band_of(p).align == Align::bottom_right)
    return "a bottom-right diagonal alignment with fp8: the adapter builds the top-left graph, the one cuDNN takes "
           "before Blackwell (frontend support surface)";
  return {};
}

std::string why_not(const SdpaParams& p, bool backward, bool dbias) {
  const int64_t v = sdpa_cudnn_version();
  if (v < 90000) return "cuDNN " + std::to_string(v) + " < 9.0: this adapter uses the cuDNN 9 backend API";
  if (v == 91000 || v == 91001) return "cuDNN 9.10.0/9.10.1 fp16/bf16 SDPA has known bugs (cudnn-frontend blocks it)";
  if (p.dtype == SdpaDType::fp32) return "cuDNN SDPA takes fp16/bf16 only (dtype fp32)";
  if (p.plant != SdpaPlant::none) return "cuDNN has no planted-bug variants";
  if (p.head_dim % 8 != 0 || p.head_dim_v % 8 != 0) return "cuDNN SDPA needs head dims (qk and v) multiples of 8";
  if (p.head_dim > 256 || p.head_dim_v > 256) return "cuDNN SDPA head dims are limited to 256 (sm90)";
  if (p.heads_kv <= 0 || p.heads_q % p.heads_kv != 0) return "cuDNN GQA needs heads_q % heads_kv == 0";
  if (p.chunk > 0) return "chunked-local attention: cuDNN's masks are diagonal bands, without chunks";
  if (p.block_q > 0) return "block-sparse masks: the adapter builds no block mask";
  if (const std::string w = fp8_why_not(p, backward, v); !w.empty()) return w;
  if (const std::string w = variant_why_not(p, backward, dbias, v); !w.empty()) return w;
  if (p.mask_kind == SdpaMaskTensor::boolean)
    return "the adapter takes additive masks only (convert a boolean mask to 0 / -inf first)";
  const bool mask_tensor = p.mask_kind == SdpaMaskTensor::additive;
  if (p.softcap > 0 && (is_causal(p) || has_window(p)))
    return "cuDNN (frontend support surface): a score modifier (softcap) disables causal and window masks";
  if (p.mask == SdpaMask::causal_upper_left && has_window(p) && (p.seq_q != p.seq_k || is_packed(p)))
    return "causal_upper_left with a bottom-right window and seq_q != seq_k needs two diagonal alignments; "
           "cuDNN's band mask has one";
  if (is_packed(p)) {
    // cudnn-frontend sdpa_support_surface.h: ragged offsets need the padding mask; GQA with
    // ragged tensors in the backward needs 9.6.0; paged caches with ragged offsets 9.7.0, with
    // head dims over 128 past 9.9.
    if (v < 90600) return "cuDNN < 9.6.0: the adapter's ragged (THD) graphs need 9.6.0";
    if (p.softcap > 0)
      return "cuDNN (frontend support surface): a score modifier (softcap) disables the padding mask a ragged "
             "or paged graph needs";
    if (mask_tensor) return "the adapter's ragged and paged graphs take no attn_mask";
    if (is_paged(p)) {
      if (backward) return "cuDNN's paged caches are forward only";
      if (v < 90700) return "cuDNN < 9.7.0: paged caches do not combine with ragged offsets";
      // cuDNN 9.14.0 on the H200 (2026-12-06): CUDNN_STATUS_BAD_PARAM from the paged cache load
      // op, "block size needs to be non-zero and a power of 2".
      if ((p.page_size & (p.page_size - 1)) != 0)
        return "cuDNN's paged cache load takes power-of-two page sizes only (page_size " + std::to_string(p.page_size) +
               ")";
      if ((p.head_dim > 128 || p.head_dim_v > 128) && v <= 90900)
        return "cuDNN <= 9.9: paged caches need head dims <= 128";
    }
    return {};
  }
  const Band b = band_of(p);
  if ((b.right || b.left) && b.align == Align::bottom_right) {
    if (p.seq_q > p.seq_k) return "cuDNN (frontend support surface): bottom-right masks do not support seq_q > seq_k";
    if (mask_tensor) return "cuDNN (frontend support surface): bottom-right masks are not supported with a bias";
    if (v < 90600 && (p.seq_q % 64 != 0 || p.seq_k % 64 != 0))
      return "cuDNN < 9.6.0: bottom-right masks need seq_q and seq_k multiples of 64";
  }
  (void)backward;
  return {};
}

void validate(const SdpaParams& p) {
  sdpa_check_arguments(p);  // the operator's contract: heads_kv, window_left/right, softcap
  require(p.batch > 0, "batch", "batch must be positive");
  require(p.heads_q > 0 && p.heads_kv > 0, "heads", "heads must be positive");
  require(p.heads_q % p.heads_kv == 0, "heads_kv", "heads_q must be a multiple of heads_kv");
  require(p.seq_q > 0 && p.seq_k > 0, "seq", "sequence lengths must be positive");
  require(p.head_dim > 0 && p.head_dim_v > 0, "head_dim", "head dims must be positive");
  require(p.window_left >= -1 && p.window_right >= -1, "window", "window bounds are -1 (unbounded) or >= 0");
  require(p.dtype != SdpaDType::fp32, "dtype", "cuDNN SDPA takes fp16 or bf16");
  require(p.mask_kind != SdpaMaskTensor::boolean, "attn_mask", "boolean masks must be converted to additive");
}

// [B, H, S, D] strides of an ABI tensor of `seq` rows a batch. A packed (THD) tensor's batch
// stride is 0 in SdpaStrides: cuDNN reads each sequence from its ragged offset instead, and is
// given a padded batch's stride.
int64_t batch_stride(const SdpaStrides& s, int64_t seq) { return s.batch ? s.batch : seq * s.seq; }
std::vector<int64_t> bhsd_strides(const SdpaStrides& s, int64_t seq) {
  return {batch_stride(s, seq), s.head, s.seq, 1};
}
// K as Kᵀ [B, H, D, S] (the backend's bmm1 B operand; frontend: "maps the K->KT").
std::vector<int64_t> transposed_strides(const SdpaStrides& s, int64_t seq) {
  return {batch_stride(s, seq), s.head, 1, s.seq};
}

// The packed graph's per-sequence tensors (sdpa_cudnn_ragged_meta's order): lengths [B, 1, 1, 1]
// and element offsets [B + 1, 1, 1, 1] (int32); K's and V's offsets only without pages.
struct Sequences {
  Tensor len_q, len_kv, off_q, off_k, off_v, off_o;
};

Sequences sequences(Graph& g, int64_t B, bool paged) {
  auto lens = [&](int64_t uid) { return g.tensor(CUDNN_DATA_INT32, {B, 1, 1, 1}, {1, 1, 1, 1}, false, uid); };
  auto offsets = [&](int64_t uid) { return g.tensor(CUDNN_DATA_INT32, {B + 1, 1, 1, 1}, {1, 1, 1, 1}, false, uid); };
  Sequences s;
  s.len_q = lens(kSeqLenQ);
  s.len_kv = lens(kSeqLenKV);
  s.off_q = offsets(kRaggedQ);
  s.off_o = offsets(kRaggedO);
  if (!paged) {
    s.off_k = offsets(kRaggedK);
    s.off_v = offsets(kRaggedV);
  }
  return s;
}

// A paged cache as PAGED_CACHE_LOAD's container [num_pages, Hkv, page_size, d]: HND storage as
// is, NHD ([num_pages, page_size, Hkv, d]) by its strides.
Tensor cache_container(Graph& g, const SdpaParams& p, int64_t d, int64_t uid) {
  const int64_t P = p.page_size, H = p.heads_kv;
  const std::vector<int64_t> strides =
      p.kv_hnd ? std::vector<int64_t>{H * P * d, P * d, d, 1} : std::vector<int64_t>{P * H * d, d, H * d, 1};
  return g.tensor(io_type(p.dtype), {p.num_pages, H, P, d}, strides, false, uid);
}

// ------------------------------------------------------------------ shared subgraphs

// CompositeDiagonalBandMaskNode for one bound (right or left), then BINARY_SELECT with -inf.
Tensor band_mask(Graph& g, const Tensor& score, const SdpaParams& p, const Band& b, bool right, const Tensor* seq_len_q,
                 const Tensor* seq_len_kv) {
  Tensor row = g.pwv(CUDNN_POINTWISE_GEN_INDEX, score, nullptr, score, CUDNN_DATA_INT32, CUDNN_DATA_FLOAT, nullptr, 2);
  Tensor col = g.pwv(CUDNN_POINTWISE_GEN_INDEX, score, nullptr, score, CUDNN_DATA_INT32, CUDNN_DATA_FLOAT, nullptr, 3);
  Tensor keep;
  const bool br = b.align == Align::bottom_right;
  if (right) {
    if (br) {
      const Tensor skv = seq_len_kv ? *seq_len_kv : g.scalar_i(static_cast<int32_t>(p.seq_k));
      const Tensor sq = seq_len_q ? *seq_len_q : g.scalar_i(static_cast<int32_t>(p.seq_q));
      row = g.pwv(CUDNN_POINTWISE_ADD, row, &skv, score, CUDNN_DATA_INT32, CUDNN_DATA_INT32);
      row = g.pwv(CUDNN_POINTWISE_SUB, row, &sq, score, CUDNN_DATA_INT32, CUDNN_DATA_INT32);
    }
    if (b.right_bound != 0) {
      const Tensor shift = g.scalar_i(static_cast<int32_t>(b.right_bound));
      row = g.pwv(CUDNN_POINTWISE_ADD, row, &shift, score, CUDNN_DATA_INT32, CUDNN_DATA_INT32);
    }
    keep = g.pwv(CUDNN_POINTWISE_CMP_GE, row, &col, score, CUDNN_DATA_BOOLEAN, CUDNN_DATA_BOOLEAN);
  } else {
    if (!br) {
      const Tensor l = g.scalar_f(static_cast<float>(b.left_bound));
      col = g.pwv(CUDNN_POINTWISE_ADD, col, &l, score, CUDNN_DATA_FLOAT, CUDNN_DATA_FLOAT);
    } else if (!seq_len_q && !seq_len_kv) {
      const Tensor l = g.scalar_f(static_cast<float>(b.left_bound - p.seq_k + p.seq_q));
      col = g.pwv(CUDNN_POINTWISE_ADD, col, &l, score, CUDNN_DATA_FLOAT, CUDNN_DATA_FLOAT);
    } else {
      const Tensor l = g.scalar_i(static_cast<int32_t>(b.left_bound));
      col = g.pwv(CUDNN_POINTWISE_ADD, col, &l, score, CUDNN_DATA_INT32, CUDNN_DATA_INT32);
      col = g.pwv(CUDNN_POINTWISE_SUB, col, seq_len_kv, score, CUDNN_DATA_INT32, CUDNN_DATA_INT32);
      col = g.pwv(CUDNN_POINTWISE_ADD, col, seq_len_q, score, CUDNN_DATA_INT32, CUDNN_DATA_INT32);
    }
    keep = g.pwv(CUDNN_POINTWISE_CMP_GT, col, &row, score, CUDNN_DATA_BOOLEAN, CUDNN_DATA_BOOLEAN);
  }
  const Tensor neg_inf = g.scalar_f(-std::numeric_limits<float>::infinity());
  return g.pwv(CUDNN_POINTWISE_BINARY_SELECT, score, &neg_inf, score, CUDNN_DATA_FLOAT, CUDNN_DATA_FLOAT, &keep);
}

Tensor band_masks(Graph& g, Tensor score, const SdpaParams& p, const Tensor* sq, const Tensor* skv) {
  const Band b = band_of(p);
  if (b.right) score = band_mask(g, score, p, b, true, sq, skv);
  if (b.left) score = band_mask(g, score, p, b, false, sq, skv);
  return score;
}

// utils/attn_score_modifiers.h padding_mask: rows past seq_len_q and columns past seq_len_kv
// are -inf (packed problems, and the backward's pre-9.16 workaround).
Tensor padding_mask(Graph& g, const Tensor& score, const Tensor& sq, const Tensor& skv) {
  Tensor row = g.pwv(CUDNN_POINTWISE_GEN_INDEX, score, nullptr, score, CUDNN_DATA_INT32, CUDNN_DATA_INT32, nullptr, 2);
  Tensor col = g.pwv(CUDNN_POINTWISE_GEN_INDEX, score, nullptr, score, CUDNN_DATA_INT32, CUDNN_DATA_INT32, nullptr, 3);
  Tensor rm = g.pwv(CUDNN_POINTWISE_CMP_LT, row, &sq, score, CUDNN_DATA_BOOLEAN, CUDNN_DATA_BOOLEAN);
  Tensor cm = g.pwv(CUDNN_POINTWISE_CMP_LT, col, &skv, score, CUDNN_DATA_BOOLEAN, CUDNN_DATA_BOOLEAN);
  Tensor m = g.pwv(CUDNN_POINTWISE_LOGICAL_AND, rm, &cm, score, CUDNN_DATA_BOOLEAN, CUDNN_DATA_BOOLEAN);
  const Tensor neg_inf = g.scalar_f(-std::numeric_limits<float>::infinity());
  return g.pwv(CUDNN_POINTWISE_BINARY_SELECT, score, &neg_inf, score, CUDNN_DATA_FLOAT, CUDNN_DATA_FLOAT, &m);
}

// The mask's dims, each broadcast axis (stride 0: batch, heads, or the queries of a one-row mask)
// a dimension of 1: the forward's bias and dBias's shape (bias_tensor says where the backward's
// bias differs).
std::vector<int64_t> bias_dims(const SdpaParams& p) {
  return {p.mask_strides.batch == 0 ? 1 : p.batch, p.mask_strides.head == 0 ? 1 : p.heads_q,
          p.mask_strides.seq == 0 ? 1 : p.seq_q, p.seq_k};
}

// The bias input: a broadcast batch or head axis is a dimension of 1, as is a one-row mask's
// query axis in the forward (measured on an H100 with cuDNN 9.14.0: 12 PASS, docs/status/sm90.md
// (o)). In the backward graph that axis is Sq rows at a stride of 0, as torch's expand() hands
// it over: as a dimension of 1 the gradients were wrong (H100, stride Sk: up to 3.8 where the
// bounds were 0.004-0.011; H200, stride 0: 200-750× the bounds), as Sq rows at stride 0 they
// passed (H200, 3 of 3; docs/status/sm90.md (p)).
Tensor bias_tensor(Graph& g, const SdpaParams& p, bool backward) {
  std::vector<int64_t> dims = bias_dims(p);
  std::vector<int64_t> strides = {p.mask_strides.batch, p.mask_strides.head, p.mask_strides.seq, 1};
  if (strides[2] == 0 && backward) dims[2] = p.seq_q;  // stride 0 kept
  else if (strides[2] == 0) strides[2] = p.seq_k;      // a dimension of 1: its stride is unread
  if (strides[1] == 0) strides[1] = dims[2] * (strides[2] ? strides[2] : p.seq_k);
  if (strides[0] == 0) strides[0] = dims[1] * strides[1];
  return g.tensor(io_type(p.dtype), dims, strides, false, kBias);
}

// utils/attn_score_modifiers.h alibi_mask: S + (col − row)·slope_h, the slopes fp32 [1, Hq, 1, 1].
Tensor alibi(Graph& g, const Tensor& s, const SdpaParams& p) {
  const Tensor row = g.pwv(CUDNN_POINTWISE_GEN_INDEX, s, nullptr, s, CUDNN_DATA_INT32, CUDNN_DATA_INT32, nullptr, 2);
  const Tensor col = g.pwv(CUDNN_POINTWISE_GEN_INDEX, s, nullptr, s, CUDNN_DATA_INT32, CUDNN_DATA_INT32, nullptr, 3);
  const Tensor d = g.pwv(CUDNN_POINTWISE_SUB, col, &row, s, CUDNN_DATA_INT32, CUDNN_DATA_INT32);
  const Tensor slopes = g.tensor(CUDNN_DATA_FLOAT, {1, p.heads_q, 1, 1}, {p.heads_q, 1, 1, 1}, false, kSlopes);
  const Tensor bias = g.pwv(CUDNN_POINTWISE_MUL, d, &slopes, s);
  return g.pwv(CUDNN_POINTWISE_ADD, s, &bias, s);
}

// The sink tensor, fp32 [1, Hq, 1, 1].
Tensor sink_tensor(Graph& g, const SdpaParams& p, int64_t uid) {
  return g.tensor(CUDNN_DATA_FLOAT, {1, p.heads_q, 1, 1}, {p.heads_q, 1, 1, 1}, false, uid);
}

// The scores as the frontend's composite nodes build them, shared by the forward and the
// backward graph (the same ops in the same order): S = Q·Kᵀ (fp32), MUL scale, with a
// softcap DIV cap, TANH_FWD, MUL cap (Softcap::forward), with an additive mask ADD bias.
// The backward reuses the scale and cap scalars and the DIV's result (Softcap::backward).
struct Scores {
  Tensor s, scale, cap, pre_tanh;
};

Scores scores(Graph& g, const Tensor& q, const Tensor& kt, const SdpaParams& p, Overrides ov, bool backward) {
  Scores r;
  r.s = g.matmul(q, kt, g.virt(CUDNN_DATA_FLOAT, {p.batch, p.heads_q, p.seq_q, graph_seq_k(p)}), ov);
  r.scale = g.scalar_f(p.scale);
  r.s = g.pwv(CUDNN_POINTWISE_MUL, r.s, &r.scale, r.s);
  if (p.softcap > 0) {
    r.cap = g.scalar_f(p.softcap);
    r.pre_tanh = g.pwv(CUDNN_POINTWISE_DIV, r.s, &r.cap, r.s);
    r.s = g.pwv(CUDNN_POINTWISE_TANH_FWD, r.pre_tanh, nullptr, r.s);
    r.s = g.pwv(CUDNN_POINTWISE_MUL, r.s, &r.cap, r.s);
  }
  if (p.mask_kind == SdpaMaskTensor::additive) {
    const Tensor bias = bias_tensor(g, p, backward);
    r.s = g.pwv(CUDNN_POINTWISE_ADD, r.s, &bias, r.s);
  }
  if (p.alibi != SdpaAlibi::none) r.s = alibi(g, r.s, p);  // after the bias, as the frontend adds it
  return r;
}

}  // namespace

// ------------------------------------------------------------------ plan

struct SdpaCudnnPlan::Impl {
  std::unique_ptr<Graph> graph;
  std::string description;
  int64_t workspace_bytes = 0;
  bool backward = false;
  bool has_bias = false;
  bool has_sinks = false;  // sinks (forward and backward: the sink tensor; backward: dsinks)
  bool has_alibi = false;
  bool has_dbias = false;
  bool packed = false;  // varlen or paged: per-sequence tensors computed per run, Stats padded
  bool paged = false;
  // Backward scratch tensors (frontend workspace): softmax_sum and dQ_accum, allocated per run
  // on its stream; seq_len q / kv, constant per plan, uploaded when the plan is built.
  size_t softmax_sum_bytes = 0;
  size_t dq_accum_bytes = 0;
  // 2·B int32 on the device: seq_len_q then seq_len_kv (null: no padding mask). A copy from
  // pageable host memory at run time may synchronise with the stream (CUDA runtime API, "API
  // synchronization behavior"), the stream the backend holds behind its gate.
  int32_t* seq_len = nullptr;
  int64_t batch = 0;
  bool memset_dq_accum = false;
  // fp8: scale_s and descale_s on the device (kCudnnFp8ScaleS), constant per plan.
  bool fp8 = false;
  float* fp8_consts = nullptr;

  Impl() = default;
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;
  ~Impl() {
    if (seq_len) cudaFree(seq_len);
    if (fp8_consts) cudaFree(fp8_consts);
  }

  void execute(std::vector<int64_t> uids, std::vector<void*> ptrs, void* workspace, CUstream_st* stream) {
    for (const auto& [uid, host] : graph->scalars()) {
      uids.push_back(uid);
      ptrs.push_back(host);
    }
    check(cudnnSetStream(graph->handle(), reinterpret_cast<cudaStream_t>(stream)), "cudnnSetStream");
    Desc vp(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);
    set(vp.d, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, static_cast<int64_t>(uids.size()), uids.data(),
        "variant pack uids");
    set(vp.d, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, static_cast<int64_t>(ptrs.size()),
        ptrs.data(), "variant pack pointers");
    set(vp.d, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &workspace, "variant pack workspace");
    check(cudnnBackendFinalize(vp.d), "finalize variant pack");
    check(cudnnBackendExecute(graph->handle(), graph->plan(), vp.d), "cudnnBackendExecute");
  }

  /// The inputs a variant adds: the additive mask, the sinks, ALiBi's slopes.
  void bind_variants(const SdpaParams& p, std::vector<int64_t>& uids, std::vector<void*>& ptrs) const {
    if (has_bias) {
      require(p.attn_mask != nullptr, "attn_mask", "null mask pointer");
      uids.push_back(kBias);
      ptrs.push_back(const_cast<void*>(p.attn_mask));
    }
    if (has_sinks) {
      require(p.sinks != nullptr, "sinks", "null sinks pointer");
      uids.push_back(kSinks);
      ptrs.push_back(const_cast<float*>(p.sinks));
    }
    if (has_alibi) {
      require(p.alibi_slopes != nullptr, "alibi_slopes", "null alibi_slopes pointer");
      uids.push_back(kSlopes);
      ptrs.push_back(const_cast<float*>(p.alibi_slopes));
    }
  }

  /// A packed problem's per-sequence tensors, computed on the stream from p's cu_seqlens and
  /// seqused_k into `scratch`, appended to the variant pack.
  void bind_sequences(const SdpaParams& p, StreamScratch& scratch, CUstream_st* stream, std::vector<int64_t>& uids,
                      std::vector<void*>& ptrs) const {
    require(p.cu_seqlens_q != nullptr, "cu_seqlens_q", "a packed layout needs cu_seqlens_q");
    require(paged || p.cu_seqlens_k != nullptr, "cu_seqlens_k", "the varlen layout needs cu_seqlens_k");
    require(!paged || (p.block_table && p.seqused_k), "block_table",
            "the paged layout needs block_table and seqused_k");
    // The ragged offsets are int32 element offsets (sdpa_cudnn_ragged_meta).
    const int64_t widest = std::max(p.head_dim, p.head_dim_v);
    if (p.total_q * p.heads_q * widest > INT32_MAX || (!paged && p.total_k * p.heads_kv * widest > INT32_MAX))
      throw SdpaCudnnRefusal(static_cast<int>(CUDNN_STATUS_NOT_SUPPORTED),
                             "sdpa_cudnn: the packed tensors' element offsets exceed int32 (the adapter's ragged "
                             "offsets are int32)");
    const int64_t B = p.batch;
    auto* meta = static_cast<int32_t*>(
        scratch.alloc(static_cast<size_t>(sdpa_cudnn_ragged_meta_size(B)) * 4, "sequence lengths and offsets"));
    sdpa_cudnn_ragged_meta(p, meta, stream);
    int32_t* offsets = meta + 2 * B;
    uids.insert(uids.end(), {kSeqLenQ, kSeqLenKV, kRaggedQ, kRaggedO});
    ptrs.insert(ptrs.end(), {meta, meta + B, offsets, offsets + 3 * (B + 1)});
    if (paged) {
      uids.push_back(kPageTable);
      ptrs.push_back(const_cast<int32_t*>(p.block_table));
    } else {
      uids.insert(uids.end(), {kRaggedK, kRaggedV});
      ptrs.insert(ptrs.end(), {offsets + (B + 1), offsets + 2 * (B + 1)});
    }
  }
};

SdpaCudnnPlan::SdpaCudnnPlan(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
SdpaCudnnPlan::~SdpaCudnnPlan() = default;
const std::string& SdpaCudnnPlan::description() const { return impl_->description; }

int64_t sdpa_cudnn_version() { return static_cast<int64_t>(cudnnGetVersion()); }

void sdpa_cudnn_prepare() { device_handle(); }

bool sdpa_cudnn_supports(const SdpaParams& p, bool backward, std::string* why, bool dbias) {
  const std::string w = why_not(p, backward, dbias);
  if (why) *why = w;
  return w.empty();
}

namespace {
void refuse_if_unsupported(const SdpaParams& p, bool backward, bool dbias = false) {
  const std::string w = why_not(p, backward, dbias);
  if (!w.empty()) throw SdpaCudnnRefusal(static_cast<int>(CUDNN_STATUS_NOT_SUPPORTED), "sdpa_cudnn: " + w);
}

// A rank outside the tactics' is the caller's bug, not cuDNN's answer (the plan cache keeps no
// std::logic_error).
void check_rank(int rank) {
  if (rank < 0 || rank >= kMaxCudnnEngineConfigs)
    throw std::logic_error("sdpa_cudnn: engine config rank " + std::to_string(rank) + " is outside 0.." +
                           std::to_string(kMaxCudnnEngineConfigs - 1));
}
}  // namespace

std::unique_ptr<SdpaCudnnPlan> SdpaCudnnPlan::forward(const SdpaParams& p, int rank) {
  check_rank(rank);
  validate(p);
  refuse_if_unsupported(p, false);
  auto im = std::make_unique<Impl>();
  im->graph = std::make_unique<Graph>(device_handle());
  im->packed = is_packed(p);
  im->paged = is_paged(p);
  Graph& g = *im->graph;
  const cudnnDataType_t io = io_type(p.dtype);
  const int64_t B = p.batch, Hq = p.heads_q, Hk = p.heads_kv, Sq = p.seq_q, Sk = graph_seq_k(p), D = p.head_dim,
                Dv = p.head_dim_v;

  // Packed: the per-sequence lengths (padding mask, GEMM overrides) and ragged offsets.
  Sequences seqs;
  const Tensor *len_q = nullptr, *len_kv = nullptr;
  if (im->packed) {
    seqs = sequences(g, B, im->paged);
    len_q = &seqs.len_q;
    len_kv = &seqs.len_kv;
  }
  auto ragged = [&](const Tensor& off) { return im->packed ? &off : nullptr; };
  // fp8 (the frontend's per-tensor fp8 graph): q, k, v codes of one fp8 type, O e4m3 codes.
  im->fp8 = p.fp8 == SdpaFp8::qkv;
  const cudnnDataType_t in = im->fp8 ? fp8_type(p.fp8_format) : io;
  const cudnnDataType_t out = p.fp8_out ? CUDNN_DATA_FP8_E4M3 : io;
  const Tensor q = g.tensor(in, {B, Hq, Sq, D}, bhsd_strides(p.q_strides, Sq), false, kQ, false, ragged(seqs.off_q));
  Tensor kt, v;
  if (im->paged) {
    // PAGED_CACHE_LOAD gathers each sequence's pages into K (as Kᵀ) and V (frontend CompositeSDPANode).
    const int64_t pages = p.max_pages_per_seq;
    const Tensor table = g.tensor(CUDNN_DATA_INT32, {B, 1, pages, 1}, {pages, pages, 1, 1}, false, kPageTable);
    kt = g.paged_load(cache_container(g, p, D, kK), seqs.len_kv, table,
                      g.virt(io, {B, Hk, D, Sk}, {D * Sk * Hk, D * Sk, 1, D}));
    v = g.paged_load(cache_container(g, p, Dv, kV), seqs.len_kv, table, g.virt(io, {B, Hk, Sk, Dv}));
  } else {
    kt = g.tensor(in, {B, Hk, D, Sk}, transposed_strides(p.k_strides, Sk), false, kK, false, ragged(seqs.off_k));
    v = g.tensor(in, {B, Hk, Sk, Dv}, bhsd_strides(p.v_strides, Sk), false, kV, false, ragged(seqs.off_v));
  }
  const Tensor o = g.tensor(out, {B, Hq, Sq, Dv}, bhsd_strides(p.o_strides, Sq), false, kO, false, ragged(seqs.off_o));
  // Stats [B, Hq, Sq, 1]: padded for a packed problem too (moved to [Hq, total_q] after the run).
  const Tensor stats = g.tensor(CUDNN_DATA_FLOAT, {B, Hq, Sq, 1}, {Hq * Sq, Sq, 1, 1}, false, kStats);

  // bmm1, attn_scale, score modifier, bias; with a padding mask, the GEMM's rows and columns
  // past the lengths read as 0 (frontend: bmm1 set_padding(0.0))
  Tensor s = scores(g, q, kt, p, {len_q, len_kv, nullptr, im->packed}, false).s;
  auto unit = [&](int64_t uid) { return g.tensor(CUDNN_DATA_FLOAT, {1, 1, 1, 1}, {1, 1, 1, 1}, false, uid); };
  if (im->fp8) {  // after attn_scale, as the frontend multiplies them
    const Tensor dq = unit(kDescaleQ), dk = unit(kDescaleK);
    s = g.pwv(CUDNN_POINTWISE_MUL, s, &dq, s);
    s = g.pwv(CUDNN_POINTWISE_MUL, s, &dk, s);
  }
  im->has_bias = p.mask_kind == SdpaMaskTensor::additive;
  im->has_alibi = p.alibi != SdpaAlibi::none;
  if (im->packed) s = padding_mask(g, s, *len_q, *len_kv);
  s = band_masks(g, s, p, len_q, len_kv);
  // CompositeSoftmaxNode with Stats; with a sink token (softmax.h) the row max takes the sink
  // too, and the sum its exp(sink − max): a row without keys gets Stats = sink, P = 0.
  const Tensor row_max =
      g.reduction(CUDNN_REDUCE_TENSOR_MAX, s, g.virt(CUDNN_DATA_FLOAT, {B, Hq, Sq, 1}, {Hq * Sq, Sq, 1, 1}));
  im->has_sinks = p.has_sinks;
  Tensor sink;
  if (p.has_sinks) sink = sink_tensor(g, p, kSinks);
  const Tensor max = p.has_sinks ? g.pwv(CUDNN_POINTWISE_MAX, row_max, &sink, row_max) : row_max;
  const Tensor sub = g.pwv(CUDNN_POINTWISE_SUB, s, &max, s);
  const Tensor e = g.pwv(CUDNN_POINTWISE_EXP, sub, nullptr, s);
  Tensor sum = g.reduction(CUDNN_REDUCE_TENSOR_ADD, e, g.virt(CUDNN_DATA_FLOAT, {B, Hq, Sq, 1}, {Hq * Sq, Sq, 1, 1}));
  if (p.has_sinks) {
    const Tensor sub_sink = g.pwv(CUDNN_POINTWISE_SUB, sink, &max, max);
    const Tensor exp_sink = g.pwv(CUDNN_POINTWISE_EXP, sub_sink, nullptr, max);
    sum = g.pwv(CUDNN_POINTWISE_ADD, sum, &exp_sink, max);
  }
  const Tensor lg = g.pwv(CUDNN_POINTWISE_LOG, sum, nullptr, sum);
  g.pw(CUDNN_POINTWISE_ADD, max, &lg, nullptr, stats);
  if (im->fp8) {
    // softmax → AMAX (Amax_S) → MUL scale_s, cast to Q's fp8 type (bmm2's A type) → matmul_fp8:
    // MUL descale_s, MUL descale_v, (AMAX: Amax_O) MUL scale_o → O.
    const Tensor prob = g.pwv(CUDNN_POINTWISE_DIV, e, &sum, s);
    g.reduction(CUDNN_REDUCE_TENSOR_AMAX, prob, unit(kAmaxS));
    const Tensor scale_s = unit(kScaleS), descale_s = unit(kDescaleS), descale_v = unit(kDescaleV),
                 scale_o = unit(kScaleO);
    const Tensor p8 = g.pwv(CUDNN_POINTWISE_MUL, prob, &scale_s, s, in);
    Tensor acc = g.matmul(p8, v, g.virt(CUDNN_DATA_FLOAT, {B, Hq, Sq, Dv}), {len_q, nullptr, len_kv});
    acc = g.pwv(CUDNN_POINTWISE_MUL, acc, &descale_s, acc);
    acc = g.pwv(CUDNN_POINTWISE_MUL, acc, &descale_v, acc);
    g.pw(CUDNN_POINTWISE_MUL, acc, &scale_o, nullptr, o);
    g.reduction(CUDNN_REDUCE_TENSOR_AMAX, acc, unit(kAmaxO));
    // Each in a 16-byte slot of its own: every tensor declares 16-byte alignment.
    const float consts[8] = {kCudnnFp8ScaleS, 0, 0, 0, 1.f / kCudnnFp8ScaleS, 0, 0, 0};
    cuda_check(cudaMalloc(reinterpret_cast<void**>(&im->fp8_consts), sizeof consts), "cudaMalloc(fp8 scales)");
    cuda_check(cudaMemcpy(im->fp8_consts, consts, sizeof consts, cudaMemcpyHostToDevice), "cudaMemcpy(fp8 scales)");
  } else {
    const Tensor prob = g.pwv(CUDNN_POINTWISE_DIV, e, &sum, s, io);  // P in the input dtype (bmm2's A type)
    // bmm2 (frontend: m_override seq_len_q, k_override seq_len_kv)
    g.matmul(prob, v, o, {len_q, nullptr, len_kv});
  }

  g.finalize_plan(rank, &im->description, &im->workspace_bytes);
  return std::unique_ptr<SdpaCudnnPlan>(new SdpaCudnnPlan(std::move(im)));
}

std::unique_ptr<SdpaCudnnPlan> SdpaCudnnPlan::backward(const SdpaBackwardParams& bp, int rank) {
  check_rank(rank);
  const SdpaParams& p = bp.fwd;
  validate(p);
  refuse_if_unsupported(p, true, bp.dbias);
  auto im = std::make_unique<Impl>();
  im->backward = true;
  im->packed = is_packed(p);  // varlen only: why_not refuses a paged backward
  im->graph = std::make_unique<Graph>(device_handle());
  Graph& g = *im->graph;
  const cudnnDataType_t io = io_type(p.dtype);
  const int64_t B = p.batch, Hq = p.heads_q, Hk = p.heads_kv, Sq = p.seq_q, Sk = p.seq_k, D = p.head_dim,
                Dv = p.head_dim_v;
  const int64_t version = sdpa_cudnn_version();

  // The padding mask: a packed problem's per-sequence lengths, or the frontend's pre-9.16
  // workaround for s_kv % 128 != 0 (full lengths, uploaded once below).
  const bool workaround_padding = !im->packed && Sk % 128 != 0 && version <= 91500;
  Sequences seqs;
  const Tensor* sq = nullptr;
  const Tensor* skv = nullptr;
  if (im->packed) {
    seqs = sequences(g, B, false);
  } else if (workaround_padding) {
    seqs.len_q = g.tensor(CUDNN_DATA_INT32, {B, 1, 1, 1}, {1, 1, 1, 1}, false, kSeqLenQ);
    seqs.len_kv = g.tensor(CUDNN_DATA_INT32, {B, 1, 1, 1}, {1, 1, 1, 1}, false, kSeqLenKV);
  }
  if (im->packed || workaround_padding) {
    sq = &seqs.len_q;
    skv = &seqs.len_kv;
  }
  auto ragged = [&](const Tensor& off) { return im->packed ? &off : nullptr; };

  const Tensor q = g.tensor(io, {B, Hq, Sq, D}, bhsd_strides(p.q_strides, Sq), false, kQ, false, ragged(seqs.off_q));
  const Tensor kt =
      g.tensor(io, {B, Hk, D, Sk}, transposed_strides(p.k_strides, Sk), false, kK, false, ragged(seqs.off_k));
  const Tensor vt =
      g.tensor(io, {B, Hk, Dv, Sk}, transposed_strides(p.v_strides, Sk), false, kV, false, ragged(seqs.off_v));
  const Tensor o = g.tensor(io, {B, Hq, Sq, Dv}, bhsd_strides(p.o_strides, Sq), false, kO, false, ragged(seqs.off_o));
  const Tensor stats = g.tensor(CUDNN_DATA_FLOAT, {B, Hq, Sq, 1}, {Hq * Sq, Sq, 1, 1}, false, kStats);
  const Tensor d_o =
      g.tensor(io, {B, Hq, Sq, Dv}, bhsd_strides(bp.do_strides, Sq), false, kDO, false, ragged(seqs.off_o));
  const Tensor dq =
      g.tensor(io, {B, Hq, Sq, D}, bhsd_strides(bp.dq_strides, Sq), false, kDQ, false, ragged(seqs.off_q));
  const Tensor dk =
      g.tensor(io, {B, Hk, Sk, D}, bhsd_strides(bp.dk_strides, Sk), false, kDK, false, ragged(seqs.off_k));
  const Tensor dv =
      g.tensor(io, {B, Hk, Sk, Dv}, bhsd_strides(bp.dv_strides, Sk), false, kDV, false, ragged(seqs.off_v));

  // "dO * O => softmax_sum"
  Tensor t = g.pw(CUDNN_POINTWISE_MUL, d_o, &o, nullptr,
                  g.virt(CUDNN_DATA_FLOAT, {B, Hq, Sq, Dv}, {Hq * Sq * Dv, Sq * Dv, Hq * Dv, 1}));
  t = g.reduction(CUDNN_REDUCE_TENSOR_ADD, t, g.virt(CUDNN_DATA_FLOAT, {B, Hq, Sq, 1}, {Hq * Sq, Sq, 1, 1}));
  im->has_sinks = p.has_sinks;
  if (p.has_sinks) {  // dSink = reduce(exp(sink − Stats) ⊙ rowsum(dO ⊙ O)) over batch and rows (frontend)
    const Tensor sink = sink_tensor(g, p, kSinks);
    const Tensor sub_sink = g.pwv(CUDNN_POINTWISE_SUB, sink, &stats, t);
    const Tensor exp_sink = g.pwv(CUDNN_POINTWISE_EXP, sub_sink, nullptr, t);
    const Tensor per_row = g.pwv(CUDNN_POINTWISE_MUL, exp_sink, &t, t);
    g.reduction(CUDNN_REDUCE_TENSOR_ADD, per_row, sink_tensor(g, p, kDSinks));
  }
  const Tensor one = g.scalar_f(1.0f);
  const Tensor softmax_sum = g.pw(CUDNN_POINTWISE_MUL, t, &one, nullptr,
                                  g.tensor(CUDNN_DATA_FLOAT, {B, Hq, Sq, 1}, {Hq * Sq, Sq, 1, 1}, false, kSoftmaxSum));

  // "Q @ KT => exp_softmax => dV"
  const Scores sc = scores(g, q, kt, p, {sq, skv, nullptr}, true);
  const Tensor &scale = sc.scale, &cap = sc.cap, &before_tanh = sc.pre_tanh;
  Tensor s = sc.s;
  im->has_bias = p.mask_kind == SdpaMaskTensor::additive;
  im->has_alibi = p.alibi != SdpaAlibi::none;
  s = g.pwv(CUDNN_POINTWISE_SUB, s, &stats, s);
  if (sq) s = padding_mask(g, s, *sq, *skv);
  s = band_masks(g, s, p, sq, skv);
  const Tensor exp_s = g.pwv(CUDNN_POINTWISE_EXP, s, nullptr, s);
  const Tensor pt = g.reshape(exp_s, g.virt(io, {B, Hq, Sk, Sq}, {Hq * Sq * Sk, Sq * Sk, 1, Sk}));
  if (Hq == Hk) {
    g.matmul(pt, d_o, dv, {skv, nullptr, sq});
  } else {
    const Tensor full =
        g.matmul(pt, d_o, g.virt(io, {B, Hq, Sk, Dv}, {Hq * Sk * Dv, Sk * Dv, Dv, 1}), {skv, nullptr, sq});
    g.reduction(CUDNN_REDUCE_TENSOR_ADD, full, dv);
  }

  // "dO @ VT => dS => dK"
  Tensor dp = g.matmul(d_o, vt, g.virt(CUDNN_DATA_FLOAT, {B, Hq, Sq, Sk}), {sq, skv, nullptr});
  dp = g.pwv(CUDNN_POINTWISE_SUB, dp, &softmax_sum, dp);
  dp = g.pwv(CUDNN_POINTWISE_MUL, dp, &exp_s, dp);
  im->has_dbias = bp.dbias;
  if (bp.dbias) {  // dBias = reduce(dS′) over the mask's broadcast axes, before the softcap's bprop
    const std::vector<int64_t> dims = bias_dims(p);
    g.reduction(CUDNN_REDUCE_TENSOR_ADD, dp, g.tensor(io, dims, packed(dims), false, kDBias));
  }
  if (p.softcap > 0) {  // Softcap::backward
    dp = g.pwv(CUDNN_POINTWISE_MUL, dp, &cap, dp);
    dp = g.pwv(CUDNN_POINTWISE_TANH_BWD, dp, &before_tanh, dp);
    dp = g.pwv(CUDNN_POINTWISE_DIV, dp, &cap, dp);
  }
  const Tensor ds = g.pwv(CUDNN_POINTWISE_MUL, dp, &scale, dp);
  const Tensor dst = g.reshape(ds, g.virt(io, {B, Hq, Sk, Sq}, {Hq * Sq * Sk, Sq * Sk, 1, Sk}));
  if (Hq == Hk) {
    g.matmul(dst, q, dk, {skv, nullptr, sq});
  } else {
    const Tensor full = g.matmul(dst, q, g.virt(io, {B, Hq, Sk, D}, {Hq * Sk * D, Sk * D, D, 1}), {skv, nullptr, sq});
    g.reduction(CUDNN_REDUCE_TENSOR_ADD, full, dk);
  }

  // "dS @ K => dQ" through the fp32 dQ_accum; with dBias straight into dQ (the frontend's dP
  // workspace implementation, the only one with dBias)
  const Tensor k = g.reshape(kt, g.virt(io, {B, Hk, Sk, D}, bhsd_strides(p.k_strides, Sk)));
  if (bp.dbias) {
    g.matmul(ds, k, dq, {sq, nullptr, skv});
  } else {
    const Tensor dq_accum =
        g.matmul(ds, k, g.tensor(CUDNN_DATA_FLOAT, {B, Hq, Sq, D}, {Hq * Sq * D, Sq * D, D, 1}, false, kDQAccum),
                 {sq, nullptr, skv});
    g.pw(CUDNN_POINTWISE_IDENTITY, dq_accum, nullptr, nullptr, dq);
  }

  g.finalize_plan(rank, &im->description, &im->workspace_bytes);
  im->softmax_sum_bytes = static_cast<size_t>(B * Hq * Sq) * 4;
  im->dq_accum_bytes = bp.dbias ? 0 : static_cast<size_t>(B * Hq * Sq * D) * 4;
  im->memset_dq_accum = !bp.dbias && version < 90600;  // the frontend memsets dQ_accum only before 9.6.0
  im->batch = B;
  if (workaround_padding) {
    std::vector<int32_t> lens(static_cast<size_t>(2 * B));
    for (int64_t b = 0; b < B; ++b) {
      lens[static_cast<size_t>(b)] = static_cast<int32_t>(Sq);
      lens[static_cast<size_t>(B + b)] = static_cast<int32_t>(Sk);
    }
    cuda_check(cudaMalloc(reinterpret_cast<void**>(&im->seq_len), lens.size() * 4), "cudaMalloc(seq_len)");
    cuda_check(cudaMemcpy(im->seq_len, lens.data(), lens.size() * 4, cudaMemcpyHostToDevice), "cudaMemcpy(seq_len)");
    im->description += ", workaround padding mask (s_kv % 128 != 0, cuDNN <= 9.15)";
  }
  return std::unique_ptr<SdpaCudnnPlan>(new SdpaCudnnPlan(std::move(im)));
}

void SdpaCudnnPlan::run(const SdpaParams& p, CUstream_st* stream) {
  if (impl_->backward) throw std::logic_error("sdpa_cudnn: a backward plan run with forward parameters");
  require(p.q && p.k && p.v, "q", "null input pointer");
  require(p.o && p.lse, "o", "null output pointer");
  StreamScratch scratch(reinterpret_cast<cudaStream_t>(stream));
  // A packed problem's Stats go to a padded scratch, moved to lse [Hq, total_q] after the run.
  float* stats = p.lse;
  if (impl_->packed)
    stats = static_cast<float*>(scratch.alloc(static_cast<size_t>(p.batch * p.heads_q * p.seq_q) * 4, "Stats"));
  std::vector<int64_t> uids = {kQ, kK, kV, kO, kStats};
  std::vector<void*> ptrs = {const_cast<void*>(p.q), const_cast<void*>(p.k), const_cast<void*>(p.v), p.o, stats};
  impl_->bind_variants(p, uids, ptrs);
  if (impl_->packed) impl_->bind_sequences(p, scratch, stream, uids, ptrs);
  if (impl_->fp8) {
    require(p.q_descale && p.k_descale && p.v_descale, "q_descale", "null descale pointer");
    require(p.o_scale != nullptr, "o_scale", "null o_scale pointer");
    auto* amax = static_cast<float*>(scratch.alloc(8 * sizeof(float), "Amax_S and Amax_O"));  // 16-byte slots
    uids.insert(uids.end(), {kDescaleQ, kDescaleK, kDescaleV, kScaleS, kDescaleS, kScaleO, kAmaxS, kAmaxO});
    ptrs.insert(ptrs.end(),
                {const_cast<float*>(p.q_descale), const_cast<float*>(p.k_descale), const_cast<float*>(p.v_descale),
                 impl_->fp8_consts, impl_->fp8_consts + 4, const_cast<float*>(p.o_scale), amax, amax + 4});
  }
  void* workspace = scratch.alloc(static_cast<size_t>(impl_->workspace_bytes), "workspace");
  impl_->execute(std::move(uids), std::move(ptrs), workspace, stream);
  if (impl_->packed) sdpa_cudnn_stats_to_lse(p, stats, stream);
}

void SdpaCudnnPlan::run(const SdpaBackwardParams& bp, CUstream_st* stream) {
  if (!impl_->backward) throw std::logic_error("sdpa_cudnn: a forward plan run with backward parameters");
  const SdpaParams& p = bp.fwd;
  require(p.q && p.k && p.v, "q", "null input pointer");
  require(p.o && p.lse, "o", "backward needs the forward's O and logsumexp");
  require(bp.d_o != nullptr, "dO", "null dO pointer");
  require(bp.d_q && bp.d_k && bp.d_v, "dQ", "null gradient pointer");
  const cudaStream_t s = reinterpret_cast<cudaStream_t>(stream);
  StreamScratch scratch(s);
  void* workspace = scratch.alloc(static_cast<size_t>(impl_->workspace_bytes), "workspace");
  void* softmax_sum = scratch.alloc(impl_->softmax_sum_bytes, "softmax_sum");
  void* dq_accum = impl_->dq_accum_bytes > 0 ? scratch.alloc(impl_->dq_accum_bytes, "dQ_accum") : nullptr;
  float* stats = p.lse;
  if (impl_->packed) {
    stats = static_cast<float*>(scratch.alloc(static_cast<size_t>(p.batch * p.heads_q * p.seq_q) * 4, "Stats"));
    sdpa_cudnn_lse_to_stats(p, stats, stream);
  }
  std::vector<int64_t> uids = {kQ, kK, kV, kO, kStats, kDO, kDQ, kDK, kDV, kSoftmaxSum};
  std::vector<void*> ptrs = {const_cast<void*>(p.q),
                             const_cast<void*>(p.k),
                             const_cast<void*>(p.v),
                             p.o,
                             stats,
                             const_cast<void*>(bp.d_o),
                             bp.d_q,
                             bp.d_k,
                             bp.d_v,
                             softmax_sum};
  if (impl_->dq_accum_bytes > 0) {  // none with dBias: dQ comes straight from its matmul
    uids.push_back(kDQAccum);
    ptrs.push_back(dq_accum);
  }
  impl_->bind_variants(p, uids, ptrs);
  if (impl_->has_sinks) {
    require(bp.d_sinks != nullptr, "dsinks", "null dsinks pointer");
    uids.push_back(kDSinks);
    ptrs.push_back(bp.d_sinks);
  }
  if (impl_->has_dbias) {
    require(bp.d_bias != nullptr, "dbias", "null dbias pointer");
    uids.push_back(kDBias);
    ptrs.push_back(bp.d_bias);
  }
  if (impl_->seq_len) {
    uids.push_back(kSeqLenQ);
    ptrs.push_back(impl_->seq_len);
    uids.push_back(kSeqLenKV);
    ptrs.push_back(impl_->seq_len + impl_->batch);
  }
  if (impl_->packed) {
    impl_->bind_sequences(p, scratch, stream, uids, ptrs);
    // cuDNN writes the rows of each sequence's keys; the rows no sequence reads as a key (the
    // padding seqused_k leaves out) have zero gradients, as the contract says.
    const size_t keys = static_cast<size_t>(p.total_k * p.heads_kv);
    cuda_check(cudaMemsetAsync(bp.d_k, 0, keys * static_cast<size_t>(p.head_dim) * 2, s), "cudaMemsetAsync(dK)");
    cuda_check(cudaMemsetAsync(bp.d_v, 0, keys * static_cast<size_t>(p.head_dim_v) * 2, s), "cudaMemsetAsync(dV)");
  }
  if (impl_->memset_dq_accum)
    cuda_check(cudaMemsetAsync(dq_accum, 0, impl_->dq_accum_bytes, s), "cudaMemsetAsync(dQ_accum)");
  impl_->execute(std::move(uids), std::move(ptrs), workspace, stream);
}

// ------------------------------------------------------------------ plan cache

namespace {

// Everything SdpaCudnnPlan::forward / backward build a plan from, without the pointers, and
// the device: equal keys build the same graph, and cuDNN's heuristics give the same configs, of
// which `rank` picks the plan (a plan per rank: each tactic's).
std::string plan_key(const SdpaParams& p, const SdpaBackwardParams* b, int rank) {
  int dev = 0;
  cuda_check(cudaGetDevice(&dev), "cudaGetDevice");
  std::string k;
  auto put = [&](int64_t v) { k += std::to_string(v) + ','; };
  auto put_strides = [&](const SdpaStrides& s) {
    put(s.batch);
    put(s.head);
    put(s.seq);
  };
  auto put_float = [&](float f) {
    uint32_t bits;
    std::memcpy(&bits, &f, 4);
    put(bits);
  };
  put(dev);
  put(rank);
  put(b ? 1 : 0);
  put(static_cast<int64_t>(p.dtype));
  for (int64_t v : {p.batch, p.heads_q, p.heads_kv, p.seq_q, p.seq_k, p.head_dim, p.head_dim_v}) put(v);
  put_float(p.scale);
  put_float(p.softcap);
  put(static_cast<int64_t>(p.mask));
  put(p.window_left);
  put(p.window_right);
  put(static_cast<int64_t>(p.mask_kind));
  for (const SdpaStrides& s : {p.mask_strides, p.q_strides, p.k_strides, p.v_strides, p.o_strides}) put_strides(s);
  for (int64_t v : {int64_t{p.varlen}, p.page_size, p.num_pages, p.max_pages_per_seq, int64_t{p.kv_hnd}}) put(v);
  for (int64_t v : {int64_t{p.has_sinks}, static_cast<int64_t>(p.alibi), p.chunk, p.block_q, p.block_k}) put(v);
  for (int64_t v :
       {static_cast<int64_t>(p.fp8), int64_t{p.fp8_format}, int64_t{p.descale_per_head}, int64_t{p.fp8_out}})
    put(v);
  if (b) {
    for (const SdpaStrides& s : {b->do_strides, b->dq_strides, b->dk_strides, b->dv_strides}) put_strides(s);
    put(b->dbias ? 1 : 0);
  }
  return k;
}

// The plans of the last kCachedPlans keys, and what a build refused: an argument error, a
// refusal or an absent rank is the adapter's or cuDNN's answer for those parameters, found again
// by the run. Other failures are not kept (the run builds again and reports its own). Plans are
// dropped only by the preparation (before the gate): destroying one may wait for the device.
constexpr size_t kCachedPlans = 16;
// The preparation of a backward problem keeps its forward's plan and the backward's of every
// rank; none of them may drop another before the run finds it.
static_assert(1 + kMaxCudnnEngineConfigs <= kCachedPlans, "a problem's plans fit the cache");

struct CachedPlan {
  std::shared_ptr<SdpaCudnnPlan> plan;
  std::exception_ptr refused;
};

struct PlanCache {
  std::mutex mu;
  std::map<std::string, CachedPlan> plans;
  std::deque<std::string> order;  // oldest first
};

PlanCache& plan_cache() {
  static PlanCache c;
  return c;
}

// Moves `key`, which the cache holds, to the newest end of the eviction order: the plans a
// preparation finds are its problem's, which its run is about to look up.
void touch(PlanCache& c, const std::string& key) {
  c.order.erase(std::find(c.order.begin(), c.order.end(), key));
  c.order.push_back(key);
}

// The cache's entry for `key`, built now where it has none (`built`, when given, is then set:
// the key was new to the process). `evict`: the preparation's lookup, which refreshes the
// key's place and drops the oldest keys past kCachedPlans.
template <class Build>
CachedPlan cached_entry(const std::string& key, Build build, bool evict, bool* built = nullptr) {
  PlanCache& c = plan_cache();
  std::unique_lock<std::mutex> lock(c.mu);
  auto it = c.plans.find(key);
  if (it == c.plans.end()) {
    if (built) *built = true;
    lock.unlock();
    CachedPlan e;
    try {
      e.plan = build();
    } catch (const SdpaArgumentError&) {
      e.refused = std::current_exception();
    } catch (const SdpaCudnnArgumentError&) {
      e.refused = std::current_exception();
    } catch (const SdpaCudnnRefusal&) {
      e.refused = std::current_exception();
    } catch (const RankAbsent&) {
      e.refused = std::current_exception();
    }
    lock.lock();
    const auto [at, inserted] = c.plans.emplace(key, std::move(e));
    if (inserted) c.order.push_back(key);
    it = at;
  } else if (evict) {
    touch(c, key);
  }
  const CachedPlan found = it->second;
  if (evict)
    while (c.order.size() > kCachedPlans) {
      c.plans.erase(c.order.front());
      c.order.pop_front();
    }
  return found;
}

// The entry's plan, or what its build refused, thrown again.
std::shared_ptr<SdpaCudnnPlan> plan_of(const CachedPlan& e) {
  if (e.refused) std::rethrow_exception(e.refused);
  return e.plan;
}

CachedPlan forward_entry(const SdpaParams& p, int rank, bool evict, bool* built = nullptr) {
  return cached_entry(
      plan_key(p, nullptr, rank), [&] { return std::shared_ptr<SdpaCudnnPlan>(SdpaCudnnPlan::forward(p, rank)); },
      evict, built);
}

CachedPlan backward_entry(const SdpaBackwardParams& p, int rank, bool evict, bool* built = nullptr) {
  return cached_entry(
      plan_key(p.fwd, &p, rank), [&] { return std::shared_ptr<SdpaCudnnPlan>(SdpaCudnnPlan::backward(p, rank)); },
      evict, built);
}

// Elements a [b, h, s, d] tensor with these strides (d contiguous; a broadcast dimension's
// stride is 0) spans from its first element.
int64_t span(int64_t b, int64_t h, int64_t s, int64_t d, const SdpaStrides& st) {
  if (b <= 0 || h <= 0 || s <= 0 || d <= 0) return 0;
  return (b - 1) * st.batch + (h - 1) * st.head + (s - 1) * st.seq + d;
}

// Runs each of `plans` once on zeroed tensors of the sizes `bp` describes (warm_up.hpp): cuDNN
// loads a runtime-compiled engine's kernels at the plan's first execution (cuLibraryLoadData
// inside cudnnBackendExecute; all 8 of cuda.cudnn's gate losses in the default tier on the H200,
// 2026-12-02, before this), and each rank's engine may have kernels of its own. One scratch for
// them all, each run in its own try, so that a plan that fails leaves the others warmed.
// Failures are left to the run, which executes the plan again.
// A packed problem's sequences are all empty there (zeroed cu_seqlens, seqused_k and table).
void warm_up(const std::vector<std::shared_ptr<SdpaCudnnPlan>>& plans, SdpaBackwardParams bp, bool backward) noexcept {
  if (plans.empty()) return;
  SdpaParams& p = bp.fwd;
  const int64_t B = p.batch, Hq = p.heads_q, Hk = p.heads_kv, Sq = p.seq_q, Sk = p.seq_k, D = p.head_dim,
                Dv = p.head_dim_v;
  const bool paged = is_paged(p), packed = is_packed(p);
  const int64_t cache_slots = p.num_pages * p.page_size * Hk;
  const int64_t elems[] = {
      span(B, Hq, Sq, D, p.q_strides), paged ? cache_slots * D : span(B, Hk, Sk, D, p.k_strides),
      paged ? cache_slots * Dv : span(B, Hk, Sk, Dv, p.v_strides), span(B, Hq, Sq, Dv, p.o_strides),
      2 * B * Hq * Sq,  // lse: fp32, two 16-bit slots a value
      p.mask_kind == SdpaMaskTensor::none ? 0 : span(B, Hq, Sq, Sk, p.mask_strides),
      backward ? span(B, Hq, Sq, Dv, bp.do_strides) : 0, backward ? span(B, Hq, Sq, D, bp.dq_strides) : 0,
      backward ? span(B, Hk, Sk, D, bp.dk_strides) : 0, backward ? span(B, Hk, Sk, Dv, bp.dv_strides) : 0,
      // int32 cu_seqlens_q, cu_seqlens_k, seqused_k, block_table: two slots a value
      packed ? 2 * (B + 1) : 0, packed ? 2 * (B + 1) : 0, packed ? 2 * B : 0, paged ? 2 * B * p.max_pages_per_seq : 0,
      // fp32 sinks, ALiBi slopes and dsinks [Hq]; dbias shaped as the mask
      p.has_sinks ? 2 * Hq : 0, p.alibi != SdpaAlibi::none ? 2 * Hq : 0, backward && p.has_sinks ? 2 * Hq : 0,
      backward && bp.dbias ? span(B, Hq, Sq, Sk, p.mask_strides) : 0,
      // fp32 q, k, v descales and o_scale, one each in a 16-byte slot (the graph's are per tensor)
      p.fp8 != SdpaFp8::none || p.fp8_out ? 32 : 0};
  std::vector<size_t> bytes;
  for (int64_t e : elems) bytes.push_back(static_cast<size_t>(e) * 2);  // 16-bit elements
  run_on_zeroed_scratch(bytes, [&](const std::vector<void*>& at, cudaStream_t s) {
    p.q = at[0], p.k = at[1], p.v = at[2], p.o = at[3];
    p.lse = static_cast<float*>(at[4]);
    p.attn_mask = p.mask_kind == SdpaMaskTensor::none ? nullptr : at[5];
    bp.d_o = at[6], bp.d_q = at[7], bp.d_k = at[8], bp.d_v = at[9];
    if (packed) {
      p.cu_seqlens_q = static_cast<const int32_t*>(at[10]);
      p.cu_seqlens_k = static_cast<const int32_t*>(at[11]);
      p.seqused_k = static_cast<const int32_t*>(at[12]);
      p.block_table = paged ? static_cast<const int32_t*>(at[13]) : nullptr;
      p.total_q = p.total_k = 0;
    }
    p.sinks = p.has_sinks ? static_cast<const float*>(at[14]) : nullptr;
    p.alibi_slopes = p.alibi != SdpaAlibi::none ? static_cast<const float*>(at[15]) : nullptr;
    bp.d_sinks = static_cast<float*>(at[16]);
    bp.d_bias = at[17];
    const auto* scales = static_cast<const float*>(at[18]);
    p.q_descale = scales, p.k_descale = scales + 4, p.v_descale = scales + 8, p.o_scale = scales + 12;
    for (const std::shared_ptr<SdpaCudnnPlan>& plan : plans) {
      try {
        backward ? plan->run(bp, s) : plan->run(p, s);
      } catch (...) {
        // The run of that rank executes it again and reports what failed.
      }
    }
  });
}

// The preparation of a forward problem: its plan of `rank`, warmed when built now.
void prepare_forward(const SdpaBackwardParams& p, int rank) {
  bool built = false;
  const CachedPlan e = forward_entry(p.fwd, rank, true, &built);
  if (built && !e.refused) warm_up({e.plan}, p, false);
}

// The preparation of a backward problem: the forward's plan of rank 0, which makes the
// backward's O and lse whatever the tactic (sdpa_cudnn_row_run), then the backward's of `rank`.
// A refused forward stops every run before its backward, which then needs no plan.
void prepare_backward(const SdpaBackwardParams& p, int rank) {
  bool fwd_built = false;
  const CachedPlan fwd = forward_entry(p.fwd, 0, true, &fwd_built);
  if (fwd.refused) return;
  if (fwd_built) warm_up({fwd.plan}, p, false);
  bool built = false;
  const CachedPlan e = backward_entry(p, rank, true, &built);
  if (built && !e.refused) warm_up({e.plan}, p, true);
}

}  // namespace

void sdpa_cudnn_prepare_plans(const SdpaBackwardParams& p, bool backward, int rank) noexcept {
  try {
    sdpa_cudnn_prepare();
    backward ? prepare_backward(p, rank) : prepare_forward(p, rank);
  } catch (...) {
    // Left to the run, which builds the plan again and reports what failed.
  }
}

void sdpa_cudnn_forward(const SdpaParams& p, CUstream_st* stream, int rank) {
  plan_of(forward_entry(p, rank, false))->run(p, stream);
}

void sdpa_cudnn_backward(const SdpaBackwardParams& p, CUstream_st* stream, int rank) {
  plan_of(backward_entry(p, rank, false))->run(p, stream);
}

}  // namespace opcts::cuda
