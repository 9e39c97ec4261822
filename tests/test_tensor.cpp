// fingerprint(): what the harness relies on to catch an impl that writes into its inputs
// (runner/execute.cpp) and to key the reference disk cache: any flipped bit, and any other
// dtype, shape or strides over the same bytes, gives another value.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <set>

#include "core/tensor.hpp"

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
  const HostTensor flat = bytes_tensor(1000), rows = bytes_tensor(1000, {10, 100}), cols = bytes_tensor(1000, {100, 10});
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

}  // namespace
}  // namespace opcts
