// fingerprint(): what the harness relies on to catch an impl that writes into its inputs
// (runner/execute.cpp) and to key the reference disk cache: any flipped bit, and any other
// dtype, shape or strides over the same bytes, gives another value. to_f64's table and fp32
// paths: decode() of every element, whatever the storage.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <set>
#include <stdexcept>
#include <vector>

#include "numerics/dtype.hpp"

#include "numerics/tensor.hpp"

namespace opcts {
namespace {

HostTensor bytes_tensor(int64_t n, std::vector<int64_t> shape = {}) {
  HostTensor t(DType::e4m3fn, shape.empty() ? std::vector<int64_t>{n} : shape);
  for (int64_t i = 0; i < n; ++i) t.set_code(i, static_cast<uint64_t>((i * 131 + 7) & 0xFF));
  return t;
}

TEST(Fingerprint, EveryFlippedBitChangesIt) {
  // Behind the 32 bytes of a 1-D tensor's dtype, rank, shape and strides: 33 to 1,032 bytes
  // hashed, on XXH3's 17-128, 129-240 and longer paths, with tails that are not whole 8-byte words.
  for (int64_t n : {1, 7, 61, 200, 1000}) {
    HostTensor t = bytes_tensor(n);
    const uint64_t h = fingerprint(t);
    std::set<uint64_t> seen{h};
    for (int64_t i = 0; i < n; ++i)
      for (int b = 0; b < 8; ++b) {
        const uint64_t c = t.code(i);
        t.set_code(i, c ^ (uint64_t{1} << b));
        EXPECT_TRUE(seen.insert(fingerprint(t)).second) << "n " << n << " byte " << i << " bit " << b;
        t.set_code(i, c);
      }
    EXPECT_EQ(fingerprint(t), h);
  }
}

TEST(Fingerprint, TheDtypeShapeAndStridesCountNotOnlyTheBytes) {
  const HostTensor flat = bytes_tensor(1000), rows = bytes_tensor(1000, {10, 100}),
                   cols = bytes_tensor(1000, {100, 10});
  HostTensor other_dtype(DType::e5m2, {1000});
  for (int64_t i = 0; i < 1000; ++i) other_dtype.set_code(i, flat.code(i));
  HostTensor transposed(DType::e4m3fn, {10, 100}, {1, 10}, 1000);  // the same storage read column-major
  std::memcpy(transposed.data(), rows.data(), 1000);
  ASSERT_EQ(std::memcmp(transposed.data(), flat.data(), 1000), 0);
  const std::set<uint64_t> all{fingerprint(flat), fingerprint(rows), fingerprint(cols), fingerprint(other_dtype),
                               fingerprint(transposed)};
  EXPECT_EQ(all.size(), 5u);
  EXPECT_EQ(fingerprint(HostTensor(DType::fp32, {0})), fingerprint(HostTensor(DType::fp32, {0})));
  EXPECT_NE(fingerprint(HostTensor(DType::fp32, {0})), fingerprint(HostTensor(DType::fp16, {0})));
}

// Every code of the 8- and 16-bit dtypes (NaN codes too, bit for bit), fp32 patterns
// (subnormals, infinities, NaN payloads) and the generic paths (4-bit, int32, a strided view)
// against decode() of each element.
TEST(ToF64, EveryElementIsDecodeOfItsCode) {
  const auto same_bits = [](const HostTensor& t) {
    const std::vector<double> v = t.to_f64();
    int64_t bad = 0;
    for (int64_t i = 0; i < t.numel(); ++i) {
      const double d = decode(t.dtype(), t.code(i));
      bad += std::memcmp(&d, &v[static_cast<size_t>(i)], sizeof d) != 0;
    }
    return bad;
  };
  for (DType d : {DType::bf16, DType::fp16, DType::e4m3fn, DType::e5m2, DType::e8m0fnu, DType::bool8}) {
    const int64_t n = int64_t{1} << dtype_info(d).bits;
    HostTensor t(d, {3 * n});  // every code, three times: past the parallel threshold for 16 bits
    for (int64_t i = 0; i < t.numel(); ++i) t.set_code(i, static_cast<uint64_t>((i * 40503) % n));
    EXPECT_EQ(same_bits(t), 0) << name(d);
  }
  HostTensor f(DType::fp32, {200000});
  for (int64_t i = 0; i < f.numel(); ++i)
    f.set_code(i, static_cast<uint32_t>(i * 2654435761u) ^ (i % 7 == 0 ? 0x7f800000u : 0u));
  EXPECT_EQ(same_bits(f), 0);
  HostTensor q(DType::e2m1fn, {33});
  for (int64_t i = 0; i < q.numel(); ++i) q.set_code(i, static_cast<uint64_t>(i % 16));
  EXPECT_EQ(same_bits(q), 0);
  HostTensor w(DType::int32, {5});
  for (int64_t i = 0; i < w.numel(); ++i) w.set_code(i, static_cast<uint32_t>(-3 + i));
  EXPECT_EQ(same_bits(w), 0);
  HostTensor strided(DType::bf16, {4, 3}, {1, 4}, 12);  // the transpose of a [3, 4] buffer
  for (int64_t i = 0; i < 12; ++i) strided.set_code(i, static_cast<uint64_t>(0x3f80 + i));
  EXPECT_EQ(same_bits(strided), 0);
  EXPECT_EQ(strided.to_f64()[1], decode(DType::bf16, 0x3f80 + 1));
  EXPECT_THROW(decode_table(DType::fp32), std::invalid_argument);  // 2^32 entries: not a table
}

// spacing_at reads the binade from the double's exponent field: the same value as
// 2^(frexp's exponent − 1)·epsilon on every binade of every dtype, its edges included.
TEST(SpacingAt, IsEpsilonTimesTheBinadeOfY) {
  for (DType d : {DType::fp64, DType::fp32, DType::bf16, DType::fp16, DType::e4m3fn, DType::e5m2, DType::e2m1fn}) {
    const DTypeInfo& info = dtype_info(d);
    for (int e = -1074; e <= 1023; ++e)
      for (double f : {1.0, 1.5, 2.0 - 0x1p-52}) {
        const double y = std::ldexp(f, e);
        double want = info.min_normal * info.epsilon;
        const double c = std::min(y, info.max_finite);
        if (c >= info.min_normal) {
          int ex = 0;
          std::frexp(c, &ex);
          want = std::ldexp(info.epsilon, ex - 1);
        }
        ASSERT_EQ(spacing_at(d, y), want) << name(d) << " y = " << y;
      }
    EXPECT_EQ(spacing_at(d, -1.0), info.min_normal * info.epsilon);
    EXPECT_EQ(spacing_at(d, INFINITY), spacing_at(d, info.max_finite));
  }
}

}  // namespace
}  // namespace opcts
