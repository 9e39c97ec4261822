// Architectures and their capabilities (cases/archs.yaml).
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

namespace opcts {

/// One row of cases/archs.yaml. `backend` is "cuda", "hip" or "host"; impls of a backend
/// run on the archs of that backend. `caps` are capability names that impls require
/// (e.g. "mma_sync", "fp8_ocp"); a missing one makes a case SKIP with the capability named.
struct ArchInfo {
  std::string name;  // "sm90", "gfx942", "host"
  std::string backend;
  std::string description;
  std::set<std::string> caps;
  int compute_major = 0, compute_minor = 0;  // CUDA compute capability; 0 elsewhere
  int smem_per_block_kib = 0;                // opt-in shared memory per block
  int warp_size = 0;

  bool has(const std::string& cap) const { return caps.count(cap) > 0; }
};

/// The capability table.
class ArchTable {
 public:
  /// Loads a YAML file `{archs: {name: {backend, caps: [...], ...}}}`; throws
  /// std::runtime_error naming the file and line of a malformed entry.
  static ArchTable load(const std::string& path);
  /// Throws std::invalid_argument listing the known archs when `name` is not one.
  const ArchInfo& get(const std::string& name) const;
  bool contains(const std::string& name) const { return archs_.count(name) > 0; }
  std::vector<std::string> names() const;

 private:
  std::map<std::string, ArchInfo> archs_;
};

}  // namespace opcts
