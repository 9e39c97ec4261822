// HostTensor storage and element access.
#include "numerics/tensor.hpp"

#include <cstring>
#include <stdexcept>

#define XXH_INLINE_ALL
#include <xxhash.h>

namespace opcts {

std::vector<int64_t> contiguous_strides(const std::vector<int64_t>& shape) {
  std::vector<int64_t> s(shape.size());
  int64_t acc = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    s[i] = acc;
    acc *= shape[i];
  }
  return s;
}

namespace {
int64_t product(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (auto d : shape) {
    if (d < 0) throw std::invalid_argument("negative tensor dimension " + std::to_string(d));
    n *= d;
  }
  return n;
}
}  // namespace

HostTensor::HostTensor(DType dtype, std::vector<int64_t> shape)
    : HostTensor(dtype, shape, contiguous_strides(shape), product(shape)) {}

HostTensor::HostTensor(DType dtype, std::vector<int64_t> shape, std::vector<int64_t> strides, int64_t storage_elements)
    : dtype_(dtype), shape_(std::move(shape)), strides_(std::move(strides)), numel_(product(shape_)) {
  if (strides_.size() != shape_.size()) throw std::invalid_argument("strides and shape differ in rank");
  bytes_ = ZeroedBytes(static_cast<size_t>(storage_bytes_for(dtype_, storage_elements)));
}

bool HostTensor::is_contiguous() const { return strides_ == contiguous_strides(shape_); }

int64_t HostTensor::offset(int64_t i) const {
  int64_t pos = 0;
  for (size_t d = shape_.size(); d-- > 0;) {
    pos += (i % shape_[d]) * strides_[d];
    i /= shape_[d];
  }
  return pos;
}

std::vector<int64_t> HostTensor::unravel(int64_t i) const {
  std::vector<int64_t> idx(shape_.size());
  for (size_t d = shape_.size(); d-- > 0;) {
    idx[d] = i % shape_[d];
    i /= shape_[d];
  }
  return idx;
}

// 4-bit types pack element 2i in the low nibble of byte i (MX FP4 order: torchao pack_uint4).
uint64_t HostTensor::raw(int64_t pos) const {
  if (dtype_info(dtype_).bits == 4) {
    const auto byte = static_cast<uint8_t>(bytes_[static_cast<size_t>(pos / 2)]);
    return pos % 2 ? byte >> 4 : byte & 0xF;
  }
  uint64_t bits = 0;
  const int nb = storage_bytes(dtype_);
  std::memcpy(&bits, bytes_.data() + pos * nb, nb);  // little-endian hosts only
  return bits;
}

void HostTensor::put_raw(int64_t pos, uint64_t bits) {
  if (dtype_info(dtype_).bits == 4) {
    auto& byte = bytes_[static_cast<size_t>(pos / 2)];
    const auto b = static_cast<uint8_t>(byte);
    const uint8_t nib = bits & 0xF;
    byte = std::byte(pos % 2 ? (b & 0x0F) | (nib << 4) : (b & 0xF0) | nib);
    return;
  }
  const int nb = storage_bytes(dtype_);
  std::memcpy(bytes_.data() + pos * nb, &bits, nb);
}

double HostTensor::get(int64_t i) const { return decode(dtype_, raw(offset(i))); }

void HostTensor::set(int64_t i, double x) { put_raw(offset(i), encode(dtype_, x)); }

namespace {

// out[i] = table[code of element i] for a contiguous tensor of Code-sized elements: the
// comparison converts every output (up to ~10^8 elements) this way, and a lookup in a table of
// decode()'s values gives decode()'s doubles exactly.
template <class Code>
void decode_by_table(const std::byte* bytes, int64_t n, const std::vector<double>& table, double* out) {
#pragma omp parallel for schedule(static) if (n > (int64_t{1} << 16))
  for (int64_t i = 0; i < n; ++i) {
    Code c;
    std::memcpy(&c, bytes + i * static_cast<int64_t>(sizeof(Code)), sizeof(Code));  // little-endian hosts only
    out[i] = table[c];
  }
}

}  // namespace

std::vector<double> HostTensor::to_f64() const {
  std::vector<double> out(static_cast<size_t>(numel_));
  if (numel_ == 0) return out;
  if (!is_contiguous()) {
    for (int64_t i = 0; i < numel_; ++i) out[i] = get(i);
    return out;
  }
  const int bits = dtype_info(dtype_).bits;
  if (dtype_ == DType::fp64) {
    std::memcpy(out.data(), bytes_.data(), out.size() * sizeof(double));
  } else if (dtype_ == DType::fp32) {
    const std::byte* b = bytes_.data();
#pragma omp parallel for schedule(static) if (numel_ > (int64_t{1} << 16))
    for (int64_t i = 0; i < numel_; ++i) {
      float f;
      std::memcpy(&f, b + i * 4, 4);
      out[i] = f;  // exact, NaN payloads kept as decode does for fp32
    }
  } else if (bits == 8 || bits == 16) {
    const std::vector<double> table = decode_table(dtype_);
    if (bits == 8) decode_by_table<uint8_t>(bytes_.data(), numel_, table, out.data());
    else decode_by_table<uint16_t>(bytes_.data(), numel_, table, out.data());
  } else {
    for (int64_t i = 0; i < numel_; ++i) out[i] = get(i);
  }
  return out;
}

uint64_t fingerprint(const HostTensor& t) {
  // XXH3 (xxHash 0.8, Debian's libxxhash-dev, inlined: no library to carry to the GPU machine)
  // over the dtype, shape and strides, then the bytes. The harness fingerprints every input
  // after every run (execute.cpp: an impl must not write into its inputs), a quarter of a GB for
  // the largest scaled_mm weights: the splitmix64 fold this replaces ran at ~1.1 GB/s (a chain of
  // dependent multiplies), XXH3 at 4-9 GB/s at the x86-64 baseline (measured here, 235 MiB).
  XXH3_state_t st;
  XXH3_64bits_reset(&st);
  const uint64_t dtype_rank[2] = {static_cast<uint64_t>(t.dtype()), t.shape().size()};
  XXH3_64bits_update(&st, dtype_rank, sizeof dtype_rank);
  XXH3_64bits_update(&st, t.shape().data(), t.shape().size() * sizeof(int64_t));
  XXH3_64bits_update(&st, t.strides().data(), t.strides().size() * sizeof(int64_t));
  XXH3_64bits_update(&st, t.data(), t.nbytes());
  return XXH3_64bits_digest(&st);
}

}  // namespace opcts
