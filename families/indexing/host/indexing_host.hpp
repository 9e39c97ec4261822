// What the host device's indexing impls share: index reads and the index check every impl runs first.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>

#include "core/errors.hpp"
#include "numerics/tensor.hpp"

namespace opcts::host_indexing {

/// Index element i of an int32 or int64 index tensor, sign-extended.
inline int64_t index_at(const HostTensor& index, int64_t i) {
  int64_t v = 0;
  std::memcpy(&v, index.data() + i * storage_bytes(index.dtype()), static_cast<size_t>(storage_bytes(index.dtype())));
  return index.dtype() == DType::int32 ? static_cast<int32_t>(v) : v;  // sign of an int32 index
}

/// Throws InvalidArgument("index") naming the first element outside [0, n).
inline void check_index(const HostTensor& index, int64_t n) {
  for (int64_t i = 0; i < index.numel(); ++i) {
    const int64_t v = index_at(index, i);
    if (v < 0 || v >= n)
      throw InvalidArgument("index", "index element " + std::to_string(i) + " is " + std::to_string(v) +
                                         ", outside [0, " + std::to_string(n) + ")");
  }
}

}  // namespace opcts::host_indexing
