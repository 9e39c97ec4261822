// Host tensors: a dtype, a shape, element strides and the encoded bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "numerics/dtype.hpp"
#include "numerics/zeroed_bytes.hpp"

namespace opcts {

/// A dense host buffer viewed through shape and strides (both in elements). The bytes hold
/// elements in their storage encoding (fp16 bits, e4m3fn codes, ...), ready to upload;
/// 4-bit types pack two elements per byte, element 2i in the low nibble.
/// Elements are addressed by a linear index in row-major order over the shape; `offset`
/// maps that to the storage position through the strides.
class HostTensor {
 public:
  HostTensor() = default;
  /// A contiguous row-major tensor of zeros.
  HostTensor(DType dtype, std::vector<int64_t> shape);
  /// A tensor with explicit strides over a buffer of `storage_elements` elements.
  HostTensor(DType dtype, std::vector<int64_t> shape, std::vector<int64_t> strides, int64_t storage_elements);

  DType dtype() const { return dtype_; }
  const std::vector<int64_t>& shape() const { return shape_; }
  const std::vector<int64_t>& strides() const { return strides_; }
  int64_t numel() const { return numel_; }
  int64_t dim(size_t i) const { return shape_.at(i); }
  bool is_contiguous() const;

  /// Storage position (in elements) of the row-major linear index i.
  int64_t offset(int64_t i) const;
  /// Element i (row-major linear index) decoded to double.
  double get(int64_t i) const;
  /// Stores x rounded to the dtype (round to nearest even, default_overflow) at linear index i.
  void set(int64_t i, double x);
  /// The storage code of element i, and storing a code directly.
  uint64_t code(int64_t i) const { return raw(offset(i)); }
  void set_code(int64_t i, uint64_t bits) { put_raw(offset(i), bits); }

  /// Every element decoded to double, row-major.
  std::vector<double> to_f64() const;
  /// The multi-index of linear index i.
  std::vector<int64_t> unravel(int64_t i) const;

  std::byte* data() { return bytes_.data(); }
  const std::byte* data() const { return bytes_.data(); }
  size_t nbytes() const { return bytes_.size(); }

 private:
  uint64_t raw(int64_t storage_pos) const;
  void put_raw(int64_t storage_pos, uint64_t bits);

  DType dtype_ = DType::fp32;
  std::vector<int64_t> shape_, strides_;
  int64_t numel_ = 0;
  ZeroedBytes bytes_;  // calloc'd: a large tensor's pages are first touched by its fill
};

/// Named tensors: a case's inputs ("q", "k", "v") or outputs ("O", "lse").
using TensorMap = std::map<std::string, HostTensor>;

/// A 64-bit fingerprint of a tensor's dtype, shape, strides and bytes (not cryptographic): equal
/// tensors give equal fingerprints, and a changed byte changes it with overwhelming probability.
uint64_t fingerprint(const HostTensor& t);

/// Contiguous row-major strides of a shape.
std::vector<int64_t> contiguous_strides(const std::vector<int64_t>& shape);

}  // namespace opcts
