// Running one case in this process: inputs, reference, impl, comparison → a result record.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "core/family.hpp"
#include "core/result.hpp"
#include "runner/ref_disk_cache.hpp"
#include "runner/suite.hpp"

namespace opcts {

/// What a run asks of execute_case beyond the case (`opcts run` flags, passed to workers).
struct ExecOptions {
  std::string artifacts_dir;  // --artifacts: failure folders go here ("" = none)
  bool bitwise = false;       // --bitwise: run deterministic impls twice, require equal bytes
  bool invariance = false;    // --invariance: check the axes each impl declares invariant (runner/invariance.hpp)
  bool capture = false;       // --capture: record each run and replay it on fresh inputs (runner/capture.hpp)
  std::string ref_cache_dir;  // --ref-cache: the on-disk reference cache ("" = off)
  std::uint64_t ref_cache_max_bytes = kDefaultRefCacheMaxBytes;  // --ref-cache-max-gib: its size cap (LRU eviction)
  bool operator==(const ExecOptions&) const = default;
};

/// One ExecOptions field as a worker flag. The table below is the one place a field meets its
/// flag: the supervisor writes a worker's argv from it (exec_worker_args) and the worker's
/// command line reads it (app/cli_parse.cpp), so a field a run sets cannot be dropped on the
/// way to the workers (a --bitwise lost there would let every determinism check pass unseen).
struct ExecFlag {
  const char* flag;
  std::variant<std::string ExecOptions::*, bool ExecOptions::*, std::uint64_t ExecOptions::*> field;
};
inline const std::array<ExecFlag, 6> kExecFlags{{{"--artifacts", &ExecOptions::artifacts_dir},
                                                 {"--bitwise", &ExecOptions::bitwise},
                                                 {"--invariance", &ExecOptions::invariance},
                                                 {"--capture", &ExecOptions::capture},
                                                 {"--ref-cache", &ExecOptions::ref_cache_dir},
                                                 {"--ref-cache-max-bytes", &ExecOptions::ref_cache_max_bytes}}};

/// The worker arguments that carry `e`: a flag for each true bool, "flag value" for each
/// non-empty string and every number.
std::vector<std::string> exec_worker_args(const ExecOptions& e);

/// Keeps the inputs and reference of the last problem, so that the impls of one problem,
/// run one after another, generate and compute them once; with a disk folder, references
/// are also loaded from and stored to the on-disk cache (ref_disk_cache.hpp).
class ReferenceCache {
 public:
  struct Entry {
    std::string key;
    TensorMap inputs;
    References refs;
    double inputs_ms = 0, ref_ms = 0;  // what making them took (ref_ms: computing or loading)
    // Each input's fingerprint (numerics/tensor.hpp) as made, once for all the problem's impls:
    // after each run the inputs must still match it (impls must not write into them).
    std::vector<std::pair<std::string, uint64_t>> input_fingerprints;
  };
  /// Time spent making references (computing or loading) and where they came from.
  struct Stats {
    double ref_ms = 0;
    int computed = 0, loaded = 0;
  };
  explicit ReferenceCache(std::string disk_dir = "", std::uint64_t disk_max_bytes = kDefaultRefCacheMaxBytes)
      : disk_(std::move(disk_dir), disk_max_bytes) {}
  /// The entry of c's problem; `fresh` (when given) says whether this call made it.
  const Entry& get(const Case& c, bool* fresh = nullptr);
  const Stats& stats() const { return stats_; }
  /// Drops the kept entry (after an impl wrote into its inputs), so the next get makes it again.
  void forget() { last_.reset(); }

 private:
  RefDiskCache disk_;
  Stats stats_;
  std::unique_ptr<Entry> last_;
};

/// Runs a case that passed the skip checks and returns its raw result (PASS, FAIL, ERROR or
/// MISTRUSTED; SKIP for a negative case whose impl refused it otherwise than the contract asks
/// and whose supports() declines it; outcome == raw_outcome), a FAIL with its failure kinds
/// (ResultRecord::failures). Throws DeviceLost when the device context died.
ResultRecord execute_case(const Suite& suite, const Case& c, int device, ReferenceCache& cache,
                          const ExecOptions& opts = {});

}  // namespace opcts
