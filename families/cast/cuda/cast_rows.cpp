// The CUDA cast rows: cuda.cvt, the planted cuda.cvt_ties_up and cuda.cvt_sync_in_run (every
// build; rows.hpp).
#include "families/cast/cast.hpp"
#include "families/cast/cuda/cast_launch.hpp"
#include "gpu/cuda/rows.hpp"

namespace opcts {

void register_cuda_cast(Registry& reg) {
  using namespace cuda;
  Row planted =
      row("cast", "cuda.cvt_ties_up", OPCTS_CUDA_ONLY(cvt_ties_up_supports), OPCTS_CUDA_ONLY(cvt_ties_up_run));
  planted.cannot_show = [](const Problem& pp) -> std::string {
    const auto& p = pp.as<cast::Problem>();
    if (p.decoding() || p.from != DType::fp32 || p.to == DType::e8m0fnu)
      return "the bug is planted in fp32 → fp8/fp6/fp4 encoding only";
    // Its cases must FAIL; random inputs hit an exact tie only by chance (6 random cases
    // passed on the H200).
    if (p.input == cast::Input::random) return "random inputs need not hold an exact tie";
    return "";
  };
  // Waits for its stream inside run: correct bytes, and without --capture only the stream gate's
  // note ("stream check not applied"), so it SKIPs there; recorded into a graph it cannot be.
  Row sync = row("cast", "cuda.cvt_sync_in_run", OPCTS_CUDA_ONLY(cvt_supports), OPCTS_CUDA_ONLY(cvt_sync_in_run));
  sync.cannot_show = [](const Problem&) { return std::string(); };
  sync.bug_needs_capture = true;
  add_rows(reg, {with_hip_twin(row("cast", "cuda.cvt", OPCTS_CUDA_ONLY(cvt_supports), OPCTS_CUDA_ONLY(cvt_run))),
                 planted, sync});
}

}  // namespace opcts
