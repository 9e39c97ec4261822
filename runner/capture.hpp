// `opcts run --capture`: each impl's run recorded once and replayed on fresh inputs
// (Impl::run_captured: a CUDA graph on the GPU backends, the same buffers called again on the
// host), the contract kernels meet when a serving stack or a training step captures them
// (PyTorch's torch.cuda.graph, vLLM's and TensorRT-LLM's decode graphs): a replay must compute
// from what its buffers hold at replay time, not from what they held when it was recorded.
#pragma once

#include <string>

#include "core/family.hpp"

namespace opcts {

/// Records `impl`'s run of p with the problem's inputs of another seed (capture_seed) in its
/// buffers, replays it on them, copies `inputs` (the case's) into the same buffers and replays it
/// twice; then checks, throwing ContractBreach with the element and both values:
///  - stale_capture: the replay on `inputs` gave the very bytes of the replay on the capture-time
///    inputs, although the inputs differ and the outputs are not constant;
///  - replay_differs (an impl deterministic on p): the first replay's bytes differ from `plain`,
///    a plain run's outputs on `inputs`, or from the second replay's.
/// Returns the first replay's outputs, which the caller judges as the case's (for an impl that is
/// not deterministic, the only check of the replay's values). A check that cannot apply is said in
/// `note` (appended). Throws what run_captured throws (not_capturable, off_stream, wrote_input).
TensorMap check_capture(const Family& family, const Impl& impl, const Problem& p, const TensorMap& inputs,
                        const TensorMap& plain, const RunContext& ctx, std::string& note);

}  // namespace opcts
