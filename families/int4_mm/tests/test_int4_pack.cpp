// The int4 packings (families/int4_mm/int4_pack.hpp): pack∘unpack is the identity for every format, and hand-worked
// bytes for each.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>

#include "families/int4_mm/int4_pack.hpp"

namespace opcts::int4 {
namespace {

Codes random_codes(int64_t rows, int64_t cols, uint32_t seed) {
  std::mt19937 g(seed);
  Codes q(static_cast<size_t>(rows * cols));
  for (auto& c : q) c = static_cast<uint8_t>(g() & 0xF);
  return q;
}

// The 32-bit word at word index w of a packed tensor (little-endian, as a kernel reads it).
uint32_t word(const HostTensor& t, int64_t w) {
  const auto* b = reinterpret_cast<const uint8_t*>(t.data()) + 4 * w;
  return static_cast<uint32_t>(b[0]) | static_cast<uint32_t>(b[1]) << 8 | static_cast<uint32_t>(b[2]) << 16 |
         static_cast<uint32_t>(b[3]) << 24;
}

uint8_t byte(const HostTensor& t, int64_t i) { return reinterpret_cast<const uint8_t*>(t.data())[i]; }

TEST(Int4Pack, EveryFormatRoundTrips) {
  for (const auto& [n, k] : {std::pair<int64_t, int64_t>{16, 128}, {64, 512}, {48, 384}}) {
    const Codes q = random_codes(n, k, static_cast<uint32_t>(n * k));
    for (int ikt : {2, 4, 8}) {
      if (k % (16 * ikt)) continue;
      EXPECT_EQ(unpack_tinygemm(pack_tinygemm(q, n, k, ikt), n, k, ikt), q) << n << "x" << k << " ikt " << ikt;
      EXPECT_EQ(
          unpack_tinygemm(pack_tinygemm(q, n, k, ikt, TinygemmTarget::rocm_n16), n, k, ikt, TinygemmTarget::rocm_n16),
          q);
    }
    EXPECT_EQ(unpack_tinygemm_unpacked(pack_tinygemm_unpacked(q, n, k), n, k), q);
    EXPECT_EQ(unpack_awq(pack_awq(q, n, k), n, k), q);
    EXPECT_EQ(unpack_gptq(pack_gptq(q, n, k), n, k), q);
    std::vector<uint16_t> d(static_cast<size_t>(n * (k / 32)));
    for (size_t i = 0; i < d.size(); ++i) d[i] = static_cast<uint16_t>(0x3C00 + i);
    const Q4_0 back = unpack_q4_0(pack_q4_0(q, d, n, k), n, k);
    EXPECT_EQ(back.q, q);
    EXPECT_EQ(back.d_bits, d);
    const Codes z = random_codes(k / 32, n, 7);
    EXPECT_EQ(unpack_awq_zeros(pack_awq_zeros(z, k / 32, n), k / 32, n), z);
    std::vector<int> zg(z.size());
    for (size_t i = 0; i < z.size(); ++i) zg[i] = z[i] + 1;  // z ∈ [1, 16]
    EXPECT_EQ(unpack_gptq_zeros(pack_gptq_zeros(zg, k / 32, n), k / 32, n), zg);
  }
  // The unpacked layout takes an N that is not a multiple of 8.
  const Codes q = random_codes(13, 64, 3);
  EXPECT_EQ(unpack_tinygemm_unpacked(pack_tinygemm_unpacked(q, 13, 64), 13, 64), q);
}

TEST(Int4Pack, UnpackedTinygemmPutsTheEvenElementHigh) {
  const HostTensor t = pack_tinygemm_unpacked({1, 2, 3, 4}, 1, 4);
  EXPECT_EQ(byte(t, 0), 0x12);
  EXPECT_EQ(byte(t, 1), 0x34);
}

// q(n, k) = (k + 3n) mod 16 on an 8×32 weight, innerKTiles 2: one word per lane.
Codes tinygemm_fixture() {
  Codes q(8 * 32);
  for (int n = 0; n < 8; ++n)
    for (int k = 0; k < 32; ++k) q[static_cast<size_t>(n * 32 + k)] = static_cast<uint8_t>((k + 3 * n) % 16);
  return q;
}

TEST(Int4Pack, TiledTinygemmHandWorkedWords) {
  const HostTensor t = pack_tinygemm(tinygemm_fixture(), 8, 32, 2);
  // Lane 0 (column 0, k offset 0): nibbles hold k = 0, 8, 16, 24, 1, 9, 17, 25 → 0 8 0 8 1 9 1 9.
  EXPECT_EQ(word(t, 0), 0x91918080u);
  // Lane 5 (column 1, k offset 2): k = 2, 10, 18, 26, 3, 11, 19, 27, plus 3 → 5 D 5 D 6 E 6 E.
  EXPECT_EQ(word(t, 5), 0xE6E6D5D5u);
}

// PyTorch's matrix_to_m16n8k16_Bint4_layout, written out from the kernel: the word of
// (nTile, kOuterTile, lane t, innerKTile pair j) from the unpacked bytes in[n][k / 2].
uint32_t torch_tiled_word(const HostTensor& in, int64_t k, int nt, int ko, int t, int j, int ikt, bool rocm) {
  const int n0 = rocm ? nt * 16 + t % 16 : nt * 8 + t / 4;
  const int kb0 = (ko * ikt + 2 * j) * 16 / 2, kb1 = kb0 + 8;
  int ks[4];
  if (rocm) {
    ks[0] = kb0 + (t / 16) * 2, ks[1] = ks[0] + 1, ks[2] = kb1 + (t / 16) * 2, ks[3] = ks[2] + 1;
  } else {
    ks[0] = kb0 + t % 4, ks[1] = ks[0] + 4, ks[2] = kb1 + t % 4, ks[3] = ks[2] + 4;
  }
  uint32_t v[4];
  for (int i = 0; i < 4; ++i) v[i] = byte(in, n0 * (k / 2) + ks[i]);
  return (v[3] & 0xF) << 28 | (v[2] & 0xF) << 24 | (v[1] & 0xF) << 20 | (v[0] & 0xF) << 16 | (v[3] & 0xF0) << 8 |
         (v[2] & 0xF0) << 4 | (v[1] & 0xF0) | (v[0] & 0xF0) >> 4;
}

TEST(Int4Pack, TiledTinygemmMatchesPyTorchsPackingKernel) {
  const int64_t n = 32, k = 256;
  const Codes q = random_codes(n, k, 11);
  const HostTensor in = pack_tinygemm_unpacked(q, n, k);
  for (bool rocm : {false, true})
    for (int ikt : {2, 4, 8}) {
      const HostTensor t = pack_tinygemm(q, n, k, ikt, rocm ? TinygemmTarget::rocm_n16 : TinygemmTarget::cuda_n8);
      const int lanes = rocm ? 64 : 32, tiles = static_cast<int>(n / (rocm ? 16 : 8)),
                ko_n = static_cast<int>(k / (16 * ikt));
      int64_t w = 0;
      for (int nt = 0; nt < tiles; ++nt)
        for (int ko = 0; ko < ko_n; ++ko)
          for (int lane = 0; lane < lanes; ++lane)
            for (int j = 0; j < ikt / 2; ++j, ++w)
              ASSERT_EQ(word(t, w), torch_tiled_word(in, k, nt, ko, lane, j, ikt, rocm))
                  << (rocm ? "rocm" : "cuda") << " ikt " << ikt << " word " << w;
    }
}

TEST(Int4Pack, AwqInterleavesColumns) {
  Codes q(8);
  for (int c = 0; c < 8; ++c)
    q[static_cast<size_t>(c)] = static_cast<uint8_t>(c);  // [N = 8, K = 1]: column c has code c
  EXPECT_EQ(word(pack_awq(q, 8, 1), 0), 0x75316420u);     // nibbles 0 2 4 6 1 3 5 7
  EXPECT_EQ(word(pack_awq_zeros(q, 1, 8), 0), 0x75316420u);
}

TEST(Int4Pack, GptqIsSequentialAndStoresZMinusOne) {
  EXPECT_EQ(word(pack_gptq({1, 2, 3, 4, 5, 6, 7, 8}, 1, 8), 0), 0x87654321u);  // k = i in nibble i
  EXPECT_EQ(word(pack_gptq_zeros({1, 2, 3, 4, 5, 6, 7, 8}, 1, 8), 0), 0x76543210u);
  // z = 0 is stored as 15 and comes back as 16: the v1 format cannot hold it.
  const HostTensor z0 = pack_gptq_zeros({0, 16, 1, 1, 1, 1, 1, 1}, 1, 8);
  EXPECT_EQ(word(z0, 0) & 0xFF, 0xFFu);
  EXPECT_EQ(unpack_gptq_zeros(z0, 1, 8)[0], 16);
}

TEST(Int4Pack, Q4_0PairsElementJWithJPlus16) {
  Codes q(32);
  for (int j = 0; j < 16; ++j) {
    q[static_cast<size_t>(j)] = static_cast<uint8_t>(j);
    q[static_cast<size_t>(j + 16)] = static_cast<uint8_t>(15 - j);
  }
  const HostTensor t = pack_q4_0(q, {0x3C00}, 1, 32);  // d = 1.0
  EXPECT_EQ(t.nbytes(), 18u);
  EXPECT_EQ(byte(t, 0), 0x00);
  EXPECT_EQ(byte(t, 1), 0x3C);
  EXPECT_EQ(byte(t, 2), 0xF0);   // qs[0] = q(16) << 4 | q(0)
  EXPECT_EQ(byte(t, 3), 0xE1);   // qs[1]
  EXPECT_EQ(byte(t, 17), 0x0F);  // qs[15] = q(31) << 4 | q(15)
}

TEST(Int4Pack, RefusesShapesTheLayoutCannotHold) {
  const Codes q = random_codes(12, 64, 1);
  EXPECT_THROW(pack_tinygemm(q, 12, 64, 2), std::invalid_argument);  // N % 8
  EXPECT_THROW(pack_awq(q, 12, 64), std::invalid_argument);
  EXPECT_THROW(pack_tinygemm(random_codes(8, 96, 1), 8, 96, 8), std::invalid_argument);  // K % 128
  EXPECT_THROW(pack_tinygemm(random_codes(8, 64, 1), 8, 64, 3), std::invalid_argument);
  EXPECT_THROW(pack_q4_0(random_codes(8, 48, 1), std::vector<uint16_t>(8), 8, 48), std::invalid_argument);
}

}  // namespace
}  // namespace opcts::int4
