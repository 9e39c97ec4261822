// The .npy writer: header bytes, data layout, capping, and (when numpy exists) that NumPy loads it.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "numerics/npy.hpp"
#include "test_util.hpp"

namespace opcts {
namespace {

using testutil::read_file;

TEST(Npy, HeaderIsFormat10AndAligned) {
  for (const auto& shape : std::vector<std::vector<int64_t>>{{}, {7}, {2, 3}, {1, 2, 3, 4000000}}) {
    const std::string h = npy_header(NpyType::f4, shape);
    ASSERT_GE(h.size(), 11u);
    EXPECT_EQ(h.substr(0, 6), "\x93NUMPY");
    EXPECT_EQ(h[6], 1);
    EXPECT_EQ(h[7], 0);
    const size_t len = static_cast<unsigned char>(h[8]) | (static_cast<unsigned char>(h[9]) << 8);
    EXPECT_EQ(len + 10, h.size());
    EXPECT_EQ(h.size() % 64, 0u);
    EXPECT_EQ(h.back(), '\n');
  }
  const std::string h = npy_header(NpyType::f8, {2, 3});
  EXPECT_NE(h.find("{'descr': '<f8', 'fortran_order': False, 'shape': (2, 3), }"), std::string::npos) << h;
  EXPECT_NE(npy_header(NpyType::f2, {5}).find("'shape': (5,)"), std::string::npos);  // a 1-tuple has its comma
  EXPECT_NE(npy_header(NpyType::u1, {}).find("'descr': '|u1'"), std::string::npos);
  EXPECT_NE(npy_header(NpyType::u1, {}).find("'shape': ()"), std::string::npos);
}

TEST(Npy, TensorsAreWrittenAsDocumented) {
  const std::string dir = testutil::temp_dir();
  HostTensor b(DType::bf16, {2, 3});
  for (int i = 0; i < 6; ++i) b.set(i, 0.5 * i - 1);
  ASSERT_FALSE(write_tensor_npy(dir + "/b.npy", b, 100));
  const std::string s = read_file(dir + "/b.npy");
  const std::string h = npy_header(NpyType::f4, {2, 3});  // bf16 → decoded float32
  ASSERT_EQ(s.size(), h.size() + 6 * 4);
  EXPECT_EQ(s.substr(0, h.size()), h);
  float v[6];
  std::memcpy(v, s.data() + h.size(), sizeof v);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(v[i], 0.5f * i - 1) << i;

  HostTensor f16(DType::fp16, {4});
  f16.set(1, 1.0);
  ASSERT_FALSE(write_tensor_npy(dir + "/h.npy", f16, 100));
  const std::string sh = read_file(dir + "/h.npy");
  uint16_t bits[4];
  std::memcpy(bits, sh.data() + npy_header(NpyType::f2, {4}).size(), sizeof bits);
  EXPECT_EQ(bits[1], 0x3C00);  // fp16 keeps its own bits as '<f2'

  HostTensor big(DType::fp32, {10, 10});
  EXPECT_TRUE(write_tensor_npy(dir + "/cap.npy", big, 32));  // capped: first 32, written 1-D
  EXPECT_EQ(read_file(dir + "/cap.npy").size(), npy_header(NpyType::f4, {32}).size() + 32 * 4);
  EXPECT_NE(read_file(dir + "/cap.npy").find("'shape': (32,)"), std::string::npos);
}

TEST(Npy, NumpyLoadsIt) {
  if (std::system("python3 -c 'import numpy' >/dev/null 2>&1") != 0) GTEST_SKIP() << "python3 with numpy not found";
  const std::string dir = testutil::temp_dir();
  HostTensor t(DType::e4m3fn, {3, 5});
  for (int i = 0; i < 15; ++i) t.set(i, i * 0.25);
  write_tensor_npy(dir + "/t.npy", t, 1000);
  write_values_npy(dir + "/r.npy", t.to_f64(), {3, 5}, 1000);
  const std::string py = "python3 -c \"import numpy as np; t=np.load('" + dir + "/t.npy'); r=np.load('" + dir +
                         "/r.npy'); assert t.dtype==np.float32 and t.shape==(3,5) and r.dtype==np.float64, (t.dtype,"
                         " t.shape); assert (t==r).all() and t[2,4]==3.5\"";
  EXPECT_EQ(std::system(py.c_str()), 0) << py;
}

}  // namespace
}  // namespace opcts
