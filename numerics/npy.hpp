// NumPy .npy writer (format 1.0) for failure artifacts: header, little-endian data, capped size.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "numerics/tensor.hpp"

namespace opcts {

/// The .npy element types we write.
enum class NpyType { f2, f4, f8, u1 };  // '<f2', '<f4', '<f8', '|u1'

/// The full header of a format-1.0 file: magic "\x93NUMPY", version 1.0, a little-endian
/// uint16 length and the dict {'descr', 'fortran_order': False, 'shape'} padded with spaces
/// and a newline so that the data starts at a multiple of 64 bytes.
std::string npy_header(NpyType type, const std::vector<int64_t>& shape);

/// Writes header + `bytes` of little-endian element data (C order) to `path`; throws
/// std::runtime_error naming the path when it cannot.
void write_npy(const std::string& path, NpyType type, const std::vector<int64_t>& shape, const void* data,
               size_t bytes);

/// A tensor as .npy: fp64 as '<f8', fp32 as '<f4', fp16 as '<f2' (its bits), every other
/// dtype (bf16, fp8/fp6/fp4, e8m0, int4) as its decoded values in '<f4' (all decode exactly
/// to float32). At most `max_elements` elements, the first in row-major order; a truncated
/// tensor is written 1-D. Returns whether it was truncated.
bool write_tensor_npy(const std::string& path, const HostTensor& t, int64_t max_elements);

/// fp64 values (a reference) as '<f8' with `shape`, capped like write_tensor_npy.
bool write_values_npy(const std::string& path, const std::vector<double>& values, const std::vector<int64_t>& shape,
                      int64_t max_elements);

}  // namespace opcts
