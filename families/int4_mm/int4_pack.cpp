// The int4 layouts as one coordinate map per format, run in both directions (pack and unpack).
//
// Each word-packed format is written once as "nibble of the packed buffer → (n, k)" (layouts and
// sources in int4_pack.hpp); pack and unpack walk the packed buffer in storage order and copy
// each nibble one way or the other, so they are inverse by construction, and the tests check the
// map itself against hand-worked bytes and PyTorch's packing kernel. Q4_0's 18-byte blocks are
// one loop each way.
#include "families/int4_mm/int4_pack.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace opcts::int4 {

namespace {

uint8_t get_nibble(const std::byte* bytes, int64_t i) {
  const auto b = static_cast<uint8_t>(bytes[i / 2]);
  return i % 2 ? b >> 4 : b & 0xF;
}

void put_nibble(std::byte* bytes, int64_t i, uint8_t v) {
  auto& b = reinterpret_cast<uint8_t&>(bytes[i / 2]);
  b = i % 2 ? static_cast<uint8_t>((b & 0x0F) | (v & 0xF) << 4) : static_cast<uint8_t>((b & 0xF0) | (v & 0xF));
}

void require(bool ok, const std::string& why) {
  if (!ok) throw std::invalid_argument("int4 packing: " + why);
}

void require_codes(const Codes& q, int64_t rows, int64_t cols) {
  require(static_cast<int64_t>(q.size()) == rows * cols,
          std::to_string(q.size()) + " codes for a " + std::to_string(rows) + "×" + std::to_string(cols) + " tensor");
}

void require_packed(const HostTensor& t, int64_t nibbles) {
  require(t.dtype() == DType::uint4 && t.is_contiguous() && t.numel() == nibbles,
          "a packed tensor of " + std::to_string(nibbles) + " uint4 elements, got " + std::to_string(t.numel()) +
              " of " + std::string(name(t.dtype())));
}

// Walks a packed tensor of `nibbles` elements in storage order a 32-bit word (8 nibbles, 4 whole
// bytes, so threads never share a byte) at a time; `where(w, at)` gives the position
// (row·cols + col) of the code each nibble 8w + i holds, computed once per word.
template <class Where>
void pack_walk(std::byte* packed, const uint8_t* codes, int64_t nibbles, Where where) {
#pragma omp parallel for schedule(static) if (nibbles > (1 << 16))
  for (int64_t w = 0; w < (nibbles + 7) / 8; ++w) {
    int64_t at[8];
    where(w, at);
    for (int64_t i = 8 * w; i < std::min(nibbles, 8 * w + 8); ++i) put_nibble(packed, i, codes[at[i - 8 * w]]);
  }
}

template <class Where>
void unpack_walk(const std::byte* packed, uint8_t* codes, int64_t nibbles, Where where) {
#pragma omp parallel for schedule(static) if (nibbles > (1 << 16))
  for (int64_t w = 0; w < (nibbles + 7) / 8; ++w) {
    int64_t at[8];
    where(w, at);
    for (int64_t i = 8 * w; i < std::min(nibbles, 8 * w + 8); ++i) codes[at[i - 8 * w]] = get_nibble(packed, i);
  }
}

// tinygemm's tiled map (int4_pack.hpp): nibble i of word (nt, ko, t, w) → (n, k).
struct TinygemmMap {
  int64_t k;
  int ikt;
  TinygemmTarget target;
  void operator()(int64_t word, int64_t (&at)[8]) const {
    const int lanes = target == TinygemmTarget::cuda_n8 ? 32 : 64;
    const int64_t k_outer = k / (16 * ikt);
    const int w = static_cast<int>(word % (ikt / 2));
    const int t = static_cast<int>((word / (ikt / 2)) % lanes);
    const int64_t tile = word / (static_cast<int64_t>(lanes) * (ikt / 2));  // nt·k_outer + ko
    const int64_t nt = tile / k_outer, ko = tile % k_outer;
    const int64_t kt = ko * ikt + 2 * w;
    const bool cuda = target == TinygemmTarget::cuda_n8;
    const int64_t n = cuda ? 8 * nt + t / 4 : 16 * nt + t % 16;
    for (int i = 0; i < 8; ++i)
      at[i] = n * k + 16 * kt + 16 * ((i % 4) / 2) + i / 4 +
              (cuda ? 8 * (i % 2) + 2 * (t % 4) : 2 * (i % 2) + 4 * (t / 16));
  }
};

void check_tinygemm(int64_t n, int64_t k, int ikt, TinygemmTarget target) {
  require(ikt == 2 || ikt == 4 || ikt == 8, "inner_k_tiles must be 2, 4 or 8, not " + std::to_string(ikt));
  require(k % (16 * ikt) == 0, "tinygemm K = " + std::to_string(k) + " is not a multiple of 16·inner_k_tiles");
  const int tile = target == TinygemmTarget::cuda_n8 ? 8 : 16;
  require(n % tile == 0, "tinygemm N = " + std::to_string(n) + " is not a multiple of " + std::to_string(tile));
}

// Unpacked tinygemm: byte j of row n holds q(n, 2j) high and q(n, 2j + 1) low.
struct UnpackedMap {
  void operator()(int64_t word, int64_t (&at)[8]) const {
    for (int i = 0; i < 8; ++i) at[i] = 8 * word + (i % 2 ? i - 1 : i + 1);
  }
};

// AWQ: nibble i of word (r, c) of an [R, C/8] word array holds column 8c + kAwqOrder[i] of row r.
struct AwqMap {
  int64_t cols;  // N
  void operator()(int64_t word, int64_t (&at)[8]) const {
    const int64_t words_per_row = cols / 8;
    for (int i = 0; i < 8; ++i) at[i] = (word / words_per_row) * cols + 8 * (word % words_per_row) + kAwqOrder[i];
  }
};

// GPTQ qweight: nibble i of word (r, n) holds k = 8r + i of column n; codes are [N, K].
struct GptqMap {
  int64_t n, k;
  void operator()(int64_t word, int64_t (&at)[8]) const {
    for (int i = 0; i < 8; ++i) at[i] = (word % n) * k + 8 * (word / n) + i;
  }
};

// Q4_0: byte 2 + j of block (n, b) holds code j of the block in its low nibble and j + 16 in
// its high one; the block's codes are k = 32b .. 32b + 31 of row n.
constexpr int64_t kQ4Block = 18;

}  // namespace

HostTensor tinygemm_storage(int64_t n, int64_t k, int ikt, TinygemmTarget target) {
  check_tinygemm(n, k, ikt, target);
  return HostTensor(DType::uint4, {n / 8, k / (16 * ikt), 32, ikt / 2, 8});
}

HostTensor pack_tinygemm(const Codes& q, int64_t n, int64_t k, int ikt, TinygemmTarget target) {
  HostTensor t = tinygemm_storage(n, k, ikt, target);
  require_codes(q, n, k);
  pack_walk(t.data(), q.data(), t.numel(), TinygemmMap{k, ikt, target});
  return t;
}

Codes unpack_tinygemm(const HostTensor& packed, int64_t n, int64_t k, int ikt, TinygemmTarget target) {
  check_tinygemm(n, k, ikt, target);
  require_packed(packed, n * k);
  Codes q(static_cast<size_t>(n * k));
  unpack_walk(packed.data(), q.data(), packed.numel(), TinygemmMap{k, ikt, target});
  return q;
}

HostTensor tinygemm_unpacked_storage(int64_t n, int64_t k) {
  require(k % 2 == 0, "unpacked tinygemm K must be even");
  return HostTensor(DType::uint4, {n, k / 2, 2});
}

HostTensor pack_tinygemm_unpacked(const Codes& q, int64_t n, int64_t k) {
  HostTensor t = tinygemm_unpacked_storage(n, k);
  require_codes(q, n, k);
  pack_walk(t.data(), q.data(), t.numel(), UnpackedMap{});
  return t;
}

Codes unpack_tinygemm_unpacked(const HostTensor& packed, int64_t n, int64_t k) {
  require(k % 2 == 0, "unpacked tinygemm K must be even");
  require_packed(packed, n * k);
  Codes q(static_cast<size_t>(n * k));
  unpack_walk(packed.data(), q.data(), packed.numel(), UnpackedMap{});
  return q;
}

namespace {

// [rows, cols] → [cols, rows] (AWQ's qweight is [K, N/8] words over the transposed codes), in
// tiles of 16 rows × 256 columns, written column by column: few pages and cache lines per tile
// on both sides (measured fastest of 8..64-square and 16 × 256 tiles on a 14336 × 4096 weight).
Codes transpose(const Codes& q, int64_t rows, int64_t cols) {
  constexpr int64_t kRows = 16, kCols = 256;
  Codes t(q.size());
#pragma omp parallel for schedule(static) if (rows * cols > (1 << 16))
  for (int64_t r0 = 0; r0 < rows; r0 += kRows)
    for (int64_t c0 = 0; c0 < cols; c0 += kCols) {
      const int64_t r1 = std::min(rows, r0 + kRows), c1 = std::min(cols, c0 + kCols);
      for (int64_t c = c0; c < c1; ++c)
        for (int64_t r = r0; r < r1; ++r) t[static_cast<size_t>(c * rows + r)] = q[static_cast<size_t>(r * cols + c)];
    }
  return t;
}

// AWQ words over a row-major [R, N] array of codes (qweight: R = K over the transposed
// weight; qzeros: R = G): [R, N/8, 8].
HostTensor pack_awq_rows(const Codes& rows, int64_t r, int64_t n) {
  require(n % 8 == 0, "AWQ N = " + std::to_string(n) + " is not a multiple of 8");
  require_codes(rows, r, n);
  HostTensor t(DType::uint4, {r, n / 8, 8});
  pack_walk(t.data(), rows.data(), t.numel(), AwqMap{n});
  return t;
}

Codes unpack_awq_rows(const HostTensor& packed, int64_t r, int64_t n) {
  require(n % 8 == 0, "AWQ N = " + std::to_string(n) + " is not a multiple of 8");
  require_packed(packed, r * n);
  Codes rows(static_cast<size_t>(r * n));
  unpack_walk(packed.data(), rows.data(), packed.numel(), AwqMap{n});
  return rows;
}

}  // namespace

HostTensor awq_storage(int64_t n, int64_t k) {
  require(n % 8 == 0, "AWQ N = " + std::to_string(n) + " is not a multiple of 8");
  return HostTensor(DType::uint4, {k, n / 8, 8});
}

HostTensor pack_awq(const Codes& q, int64_t n, int64_t k) {
  require_codes(q, n, k);
  return pack_awq_rows(transpose(q, n, k), k, n);
}

Codes unpack_awq(const HostTensor& packed, int64_t n, int64_t k) {
  return transpose(unpack_awq_rows(packed, k, n), k, n);
}

HostTensor pack_awq_zeros(const Codes& z, int64_t groups, int64_t n) { return pack_awq_rows(z, groups, n); }

Codes unpack_awq_zeros(const HostTensor& packed, int64_t groups, int64_t n) {
  return unpack_awq_rows(packed, groups, n);
}

HostTensor gptq_storage(int64_t n, int64_t k) {
  require(k % 8 == 0, "GPTQ K = " + std::to_string(k) + " is not a multiple of 8");
  return HostTensor(DType::uint4, {k / 8, n, 8});
}

HostTensor pack_gptq(const Codes& q, int64_t n, int64_t k) {
  HostTensor t = gptq_storage(n, k);
  require_codes(q, n, k);
  pack_walk(t.data(), q.data(), t.numel(), GptqMap{n, k});
  return t;
}

Codes unpack_gptq(const HostTensor& packed, int64_t n, int64_t k) {
  require(k % 8 == 0, "GPTQ K = " + std::to_string(k) + " is not a multiple of 8");
  require_packed(packed, n * k);
  Codes q(static_cast<size_t>(n * k));
  unpack_walk(packed.data(), q.data(), packed.numel(), GptqMap{n, k});
  return q;
}

HostTensor pack_gptq_zeros(const std::vector<int>& z, int64_t groups, int64_t n) {
  require(n % 8 == 0, "GPTQ N = " + std::to_string(n) + " is not a multiple of 8");
  require(static_cast<int64_t>(z.size()) == groups * n, "zero points of the wrong count");
  // Sequential: nibble i of word (g, c) holds column 8c + i, so nibble g·N + 8c + i of the
  // tensor is zero point (g, 8c + i) — storage order is the zero points' own order.
  HostTensor t(DType::uint4, {groups, n / 8, 8});
  for (int64_t i = 0; i < t.numel(); ++i)
    put_nibble(t.data(), i, static_cast<uint8_t>((z[static_cast<size_t>(i)] - 1) & 0xF));
  return t;
}

std::vector<int> unpack_gptq_zeros(const HostTensor& packed, int64_t groups, int64_t n) {
  require(n % 8 == 0, "GPTQ N = " + std::to_string(n) + " is not a multiple of 8");
  require_packed(packed, groups * n);
  std::vector<int> z(static_cast<size_t>(groups * n));
  for (int64_t i = 0; i < packed.numel(); ++i) z[static_cast<size_t>(i)] = get_nibble(packed.data(), i) + 1;
  return z;
}

HostTensor q4_0_storage(int64_t n, int64_t k) {
  require(k % 32 == 0, "Q4_0 K = " + std::to_string(k) + " is not a multiple of 32");
  return HostTensor(DType::uint4, {n, k / 32, 36});
}

void put_q4_0_d(HostTensor& packed, const std::vector<uint16_t>& d_bits) {
  const int64_t blocks = packed.numel() / 36;
  require(packed.dtype() == DType::uint4 && packed.numel() % 36 == 0 && static_cast<int64_t>(d_bits.size()) == blocks,
          "one d per 32-element block");
  auto* bytes = reinterpret_cast<uint8_t*>(packed.data());
  for (int64_t b = 0; b < blocks; ++b) {
    bytes[kQ4Block * b] = static_cast<uint8_t>(d_bits[static_cast<size_t>(b)] & 0xFF);  // little-endian fp16
    bytes[kQ4Block * b + 1] = static_cast<uint8_t>(d_bits[static_cast<size_t>(b)] >> 8);
  }
}

HostTensor pack_q4_0(const Codes& q, const std::vector<uint16_t>& d_bits, int64_t n, int64_t k) {
  HostTensor t = q4_0_storage(n, k);
  require_codes(q, n, k);
  put_q4_0_d(t, d_bits);
  auto* bytes = reinterpret_cast<uint8_t*>(t.data());
#pragma omp parallel for schedule(static) if (n * k > (1 << 16))
  for (int64_t b = 0; b < n * (k / 32); ++b) {  // block b holds codes 32b .. 32b + 31 of the row-major [N, K]
    uint8_t* blk = bytes + kQ4Block * b;
    for (int64_t j = 0; j < 16; ++j)
      blk[2 + j] =
          static_cast<uint8_t>(q[static_cast<size_t>(32 * b + j)] | q[static_cast<size_t>(32 * b + j + 16)] << 4);
  }
  return t;
}

Q4_0 unpack_q4_0(const HostTensor& packed, int64_t n, int64_t k) {
  require(k % 32 == 0, "Q4_0 K = " + std::to_string(k) + " is not a multiple of 32");
  require_packed(packed, n * (k / 32) * 36);
  Q4_0 r{Codes(static_cast<size_t>(n * k)), std::vector<uint16_t>(static_cast<size_t>(n * (k / 32)))};
  const auto* bytes = reinterpret_cast<const uint8_t*>(packed.data());
#pragma omp parallel for schedule(static) if (n * k > (1 << 16))
  for (int64_t b = 0; b < n * (k / 32); ++b) {
    const uint8_t* blk = bytes + kQ4Block * b;
    r.d_bits[static_cast<size_t>(b)] = static_cast<uint16_t>(blk[0] | blk[1] << 8);
    for (int64_t j = 0; j < 16; ++j) {
      r.q[static_cast<size_t>(32 * b + j)] = blk[2 + j] & 0xF;
      r.q[static_cast<size_t>(32 * b + j + 16)] = blk[2 + j] >> 4;
    }
  }
  return r;
}

}  // namespace opcts::int4
