// NumPy .npy format 1.0 writing (https://numpy.org/doc/stable/reference/generated/numpy.lib.format.html).
#include "numerics/npy.hpp"

#include <bit>
#include <cstring>
#include <fstream>
#include <stdexcept>

namespace opcts {

// Element data is written as it sits in memory: .npy files here are little-endian.
static_assert(std::endian::native == std::endian::little);

namespace {

const char* descr(NpyType t) {
  switch (t) {
    case NpyType::f2: return "<f2";
    case NpyType::f4: return "<f4";
    case NpyType::f8: return "<f8";
    case NpyType::u1: return "|u1";
  }
  return "|u1";
}

std::string shape_tuple(const std::vector<int64_t>& shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + (shape.size() == 1 ? ",)" : ")");
}

// The shape to write and the element count: the tensor's own, or 1-D [max] when capped.
std::pair<std::vector<int64_t>, int64_t> capped(const std::vector<int64_t>& shape, int64_t numel, int64_t max) {
  if (numel <= max) return {shape, numel};
  return {{max}, max};
}

}  // namespace

std::string npy_header(NpyType type, const std::vector<int64_t>& shape) {
  std::string dict =
      std::string("{'descr': '") + descr(type) + "', 'fortran_order': False, 'shape': " + shape_tuple(shape) + ", }";
  const size_t prefix = 10;                 // magic (6) + version (2) + header length (2)
  size_t total = prefix + dict.size() + 1;  // + '\n'
  dict.append((64 - total % 64) % 64, ' ');
  dict += '\n';
  const auto len = static_cast<uint16_t>(dict.size());
  std::string h = "\x93NUMPY";
  h += '\x01';
  h += '\x00';
  h += static_cast<char>(len & 0xFF);
  h += static_cast<char>(len >> 8);
  return h + dict;
}

void write_npy(const std::string& path, NpyType type, const std::vector<int64_t>& shape, const void* data,
               size_t bytes) {
  std::ofstream f(path, std::ios::binary);
  const std::string h = npy_header(type, shape);
  f.write(h.data(), static_cast<std::streamsize>(h.size()));
  f.write(static_cast<const char*>(data), static_cast<std::streamsize>(bytes));
  if (!f) throw std::runtime_error(path + ": cannot write .npy file");
}

bool write_tensor_npy(const std::string& path, const HostTensor& t, int64_t max_elements) {
  const auto [shape, n] = capped(t.shape(), t.numel(), max_elements);
  if (t.dtype() == DType::fp64) {
    std::vector<double> v(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) v[i] = t.get(i);
    write_npy(path, NpyType::f8, shape, v.data(), v.size() * sizeof(double));
  } else if (t.dtype() == DType::fp16) {
    std::vector<uint16_t> v(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) v[i] = static_cast<uint16_t>(t.code(i));
    write_npy(path, NpyType::f2, shape, v.data(), v.size() * sizeof(uint16_t));
  } else {
    std::vector<float> v(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) v[i] = static_cast<float>(t.get(i));
    write_npy(path, NpyType::f4, shape, v.data(), v.size() * sizeof(float));
  }
  return n < t.numel();
}

bool write_values_npy(const std::string& path, const std::vector<double>& values, const std::vector<int64_t>& shape,
                      int64_t max_elements) {
  const auto [sh, n] = capped(shape, static_cast<int64_t>(values.size()), max_elements);
  write_npy(path, NpyType::f8, sh, values.data(), static_cast<size_t>(n) * sizeof(double));
  return n < static_cast<int64_t>(values.size());
}

}  // namespace opcts
