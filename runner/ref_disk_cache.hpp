// The on-disk reference cache: one file per problem and reference version, written atomically.
#pragma once

#include <optional>
#include <string>

#include "core/family.hpp"

namespace opcts {

/// The default folder: $XDG_CACHE_HOME/opcts, else $HOME/.cache/opcts, else "" (no cache).
std::string default_ref_cache_dir();

/// References stored under `dir`, keyed by "<family>/<problem id>@<reference_version>#<inputs>",
/// <inputs> the fingerprint of the generated inputs (core/tensor.hpp fingerprint over every
/// tensor), so that a changed input generator can never reuse a reference of other inputs.
/// Each file holds a header with the magic, a format version and the full key, then the
/// exact, lowp and bound vectors, then a checksum; a file whose key differs (a hash
/// collision), that is truncated or corrupt is ignored and rewritten. Writes go to a temp
/// file renamed into place, so concurrent shards never read half a file.
class RefDiskCache {
 public:
  explicit RefDiskCache(std::string dir) : dir_(std::move(dir)) {}
  bool enabled() const { return !dir_.empty(); }
  /// The full key of a problem and the inputs it was computed from.
  static std::string key(const Family& f, const Problem& p, const TensorMap& inputs);
  /// The file that holds `key`.
  std::string path_of(const std::string& key) const;
  /// The stored references of `key`, or nullopt (absent, another key, truncated, corrupt).
  std::optional<References> load(const std::string& key) const;
  /// Stores them (not above 64 MiB of values); a failure to write (read-only disk, full disk) is silently a cache miss
  /// next time, never a failed case.
  void store(const std::string& key, const References& refs) const;

 private:
  std::string dir_;
};

}  // namespace opcts
