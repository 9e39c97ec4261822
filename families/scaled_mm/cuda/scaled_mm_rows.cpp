// The CUDA scaled_mm rows: cuda.cublaslt, cuda.mx_kernel and the planted cuda.cublaslt_<bug>
// (every build; rows.hpp). cuda.cublaslt runs each algorithm of cuBLASLt's heuristic list as a
// tactic, h0..h7 (heuristic_tactics below).
//
// Planted (must FAIL): cuda.cublaslt_<bug> makes the same cuBLASLt call with the bug applied to
// the inputs it is given (families/scaled_mm/planted.hpp: a block scale doubled, one K block's
// scales zeroed, the output scale dropped, every scale off by 2^-8, the bias dropped, half of K
// dropped, the result doubled, every product 2^-8 low or high, the last 32 K elements dropped;
// one bug, e4m3fn results clamped to ±240, is applied to the outputs it returns),
// so the suite proves it catches each under the arch's accumulator model of cuBLASLt itself.
#include "families/scaled_mm/cuda/scaled_mm_launch.hpp"
#include "families/scaled_mm/planted.hpp"
#include "families/scaled_mm/scaled_mm.hpp"
#include "gpu/cuda/rows.hpp"
#include "gpu/cuda/tactic_rank.hpp"

namespace opcts {

namespace {

// cuda.mx_kernel's invariance contracts (opcts_impl_desc.invariance): each output element is one
// thread's fp32 FMA chain over K in slices of 32, the same whatever M is or where the row sits
// (scaled_mm_mx_kernel.cu). cuBLASLt declares none: its heuristic picks kernels by M.
uint32_t rows_alone(const void*, const void*) { return OPCTS_INVARIANT_BATCH_SIZE | OPCTS_INVARIANT_BATCH_POSITION; }

// cuda.cublaslt's tactics (Row::tactics): h<i> runs rank i of the list cuBLASLt's heuristic
// returns (ScaledMmParams::heuristic_rank), h0 its first choice. Every rank up to
// kMaxHeuristicTactics whatever the device, so that ids are stable: a rank this device's
// heuristic does not return is a SKIP (OPCTS_TACTIC_UNAVAILABLE). None where cuBLASLt is not
// called: a negative problem (refused before the call) or M, N or K = 0 (nothing to compute, or
// D = bias from the portable kernel). Reads the problem only: this file builds without CUDA.
std::vector<std::string> heuristic_tactics(const Problem& problem) {
  const auto& p = problem.as<scaled_mm::Problem>();
  if (!p.expect_error.empty() || p.m == 0 || p.n == 0 || p.k == 0) return {};
  return cuda::rank_tactics('h', cuda::kMaxHeuristicTactics);
}

}  // namespace

void register_cuda_scaled_mm(Registry& reg) {
  using namespace cuda;
  static constexpr ScaledMmRow kCublaslt{true}, kMxKernel{false};
  // The planted rows' names outlive the registry (the descriptors keep char pointers).
  static const std::vector<std::string> planted_names = [] {
    std::vector<std::string> v;
    for (scaled_mm::PlantedBug b : scaled_mm::planted_bugs())
      v.push_back("cuda.cublaslt_" + std::string(scaled_mm::to_string(b)));
    return v;
  }();
  auto mm_row = [](const char* name, const ScaledMmRow* data) {
    Row r = row("scaled_mm", name, OPCTS_CUDA_ONLY(scaled_mm_row_supports), OPCTS_CUDA_ONLY(scaled_mm_row_run), nullptr,
                data);
    r.prepare = OPCTS_CUDA_ONLY(scaled_mm_row_prepare);
    return r;
  };
  Row mx = mm_row("cuda.mx_kernel", &kMxKernel);
  mx.desc.invariance = rows_alone;
  Row lt = mm_row("cuda.cublaslt", &kCublaslt);
  lt.tactics = heuristic_tactics;  // not the planted rows': each bug is shown once, on h0's algorithm
  std::vector<Row> rows = {std::move(lt), with_hip_twin(std::move(mx))};
  for (size_t i = 0; i < planted_names.size(); ++i) {
    const scaled_mm::PlantedBug bug = scaled_mm::planted_bugs()[i];
    rows.push_back(mm_row(planted_names[i].c_str(), &kCublaslt));
    rows.back().cannot_show = [bug](const Problem& p) {
      return scaled_mm::planted_bug_cannot_show(p.as<scaled_mm::Problem>(), bug);
    };
    rows.back().plant_inputs = [bug](const Problem& p, const TensorMap& in) {
      return scaled_mm::planted_inputs(p.as<scaled_mm::Problem>(), in, bug);
    };
    rows.back().blind_spot = [bug](const Problem& p, const CaseEvidence&) {
      return scaled_mm::planted_bug_blind_spot(p.as<scaled_mm::Problem>(), bug);
    };
    rows.back().plant_outputs = [bug](const Problem& p, TensorMap out) {
      return scaled_mm::planted_outputs(p.as<scaled_mm::Problem>(), std::move(out), bug);
    };
  }
  add_rows(reg, std::move(rows));
}

}  // namespace opcts
