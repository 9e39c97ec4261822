// `opcts cache verify`: a sample of the on-disk reference cache recomputed and compared bit for
// bit, so an entry that lies (rewritten with other values and a valid checksum, or left by a
// reference changed without a new key) is found before it judges a case.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "core/family.hpp"
#include "runner/ref_disk_cache.hpp"

namespace opcts {

/// What verify_ref_cache found.
struct CacheVerdict {
  size_t files = 0;                // .ref files in the folder
  size_t this_build = 0;           // of them, keyed for this build's references (reference_version + build digest)
  size_t checked = 0;              // sampled and recomputed
  size_t mismatched = 0;           // recomputed and different, or keyed for inputs the problem does not make: removed
  size_t unreadable = 0;           // truncated, corrupt or of an unknown family or problem: removed
  std::vector<std::string> lines;  // one per finding, "path: key: why"
  bool passed() const { return mismatched == 0; }
};

/// Recomputes up to `sample` entries of `cache` that this build would load (chosen at random;
/// every one when `sample` is 0 or larger than their count): the problem rebuilt from the key,
/// its inputs made and fingerprinted (the key's), the reference computed, and every value
/// compared bit for bit with the stored one. A mismatching or unreadable entry is removed, so
/// the next run computes it. Entries of other builds (another digest) are counted, not checked.
CacheVerdict verify_ref_cache(const Registry& reg, const RefDiskCache& cache, size_t sample);

}  // namespace opcts
