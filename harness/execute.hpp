// Running one case in this process: inputs, reference, impl, comparison → a result record.
#pragma once

#include <memory>
#include <string>

#include "harness/family.hpp"
#include "harness/result.hpp"
#include "harness/suite.hpp"

namespace opcts {

/// Keeps the inputs and reference of the last problem, so that the impls of one problem,
/// run one after another, generate and compute them once.
class ReferenceCache {
 public:
  struct Entry {
    std::string key;
    TensorMap inputs;
    References refs;
  };
  const Entry& get(const Case& c);

 private:
  std::unique_ptr<Entry> last_;
};

/// Runs a case that passed the skip checks and returns its raw result (PASS, FAIL or
/// ERROR; outcome == raw_outcome). Throws DeviceLost when the device context died.
ResultRecord execute_case(const Suite& suite, const Case& c, int device, ReferenceCache& cache);

}  // namespace opcts
