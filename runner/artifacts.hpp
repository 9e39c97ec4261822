// Failure artifacts: a folder per failed case with its repro line, worst elements and .npy dumps.
#pragma once

#include <string>

#include "core/family.hpp"
#include "core/result.hpp"

namespace opcts {

/// Elements kept per dumped tensor: 1 MiB of float32.
constexpr int64_t kArtifactMaxElements = int64_t{1} << 18;

/// The folder name of a case id: characters other than [A-Za-z0-9._-] become '_'.
std::string sanitize_id(const std::string& id);

/// Writes `<dir>/<sanitize_id(r.id)>/`: repro.txt (outcome, repro line, seed, arch, device,
/// message), worst.txt (the worst elements), in_<name>.npy per input, ref_<out>.npy (the fp64
/// reference, '<f8') and out_<out>.npy per output (see write_tensor_npy for dtypes), each
/// capped at kArtifactMaxElements. Returns the folder. Throws std::runtime_error when it
/// cannot write.
std::string write_failure_artifacts(const std::string& dir, const ResultRecord& r, const TensorMap& inputs,
                                    const References& refs, const TensorMap& outputs);

}  // namespace opcts
