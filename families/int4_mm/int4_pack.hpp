// Packers and unpackers of the int4 weight formats users ship: tinygemm (tiled and unpacked), AWQ, GPTQ, llama.cpp
// Q4_0.
//
// A weight W is [N, K] (N output channels, K input features; y = x·Wᵀ), quantized along K in
// groups of g. Codes q ∈ [0, 15] are given as a `Codes` array, q(n, k) at n·K + k. Packed tensors
// are HostTensors of dtype uint4 whose bytes are exactly the buffer a kernel reads: 32-bit words
// are little-endian, so nibble i of a word (bits 4i..4i+3) is uint4 element i of the word's last
// axis of 8 (HostTensor keeps element 2j in the low nibble of byte j). Layouts and sources:
//
// tinygemm, tiled (PyTorch `_convert_weight_to_int4pack` / `_weight_int4pack_mm`,
//   aten/src/ATen/native/cuda/int4mm.cu, matrix_to_m16n8k16_Bint4_layout): int32
//   [N/8][K/(16·ikt)][32][ikt/2], ikt ("innerKTiles") ∈ {2, 4, 8}, K % (16·ikt) == 0, N % 8 == 0.
//   Word (nt, ko, t, w) holds k-tiles kt = ko·ikt + 2w and kt + 1 (16 k each) of column
//   n = 8·nt + t/4 — the m16n8k16 B fragment of lane t. Nibble i ∈ [0, 8) holds
//       k = 16·kt + 16·((i % 4) / 2) + 8·(i % 2) + 2·(t % 4) + i / 4,
//   so the word converts to bf16 pairs {nibble j, nibble j + 4} = b0/b1 of both k-tiles.
//   Dequant: w = (q − 8)·scale + zero, scale_and_zero [K/g][N][2] = (scale, zero).
//   ROCm (same file, USE_ROCM): the tensor keeps the CUDA shape, but the kernel reads it as
//   [N/16][K/(16·ikt)][64][ikt/2] with column n = 16·nt + t % 16 and
//       k = 16·kt + 16·((i % 4) / 2) + 2·(i % 2) + 4·(t / 16) + i / 4
//   (the m16n16k16 MFMA B layout of a 64-lane wavefront); N % 16 == 0. `TinygemmTarget::rocm_n16`.
// tinygemm, unpacked: the input of `_convert_weight_to_int4pack` since PyTorch PR #129940:
//   uint8 [N][K/2], byte j of row n = (q(n, 2j) << 4) | q(n, 2j + 1) — the even element in the
//   HIGH nibble, the opposite of the MX FP4 / HostTensor convention. Tensor shape [N, K/2, 2]:
//   element (n, j, 0) is the low nibble q(n, 2j + 1), (n, j, 1) the high one q(n, 2j).
// AWQ (AutoAWQ `WQLinear_GEMM.from_linear`; vLLM awq_triton.py AWQ_REVERSE_ORDER): qweight int32
//   [K][N/8]: word (k, c) packs columns 8c..8c+7 of row k in the interleaved order
//   [0, 2, 4, 6, 1, 3, 5, 7] — nibble i holds column 8c + kAwqOrder[i]; qzeros int32 [K/g][N/8]
//   the same way; scales [K/g][N]. Dequant: w = (q − z)·scale, z ∈ [0, 15] as stored.
// GPTQ (AutoGPTQ QuantLinear `pack`, v1 checkpoints; exllama / cuda kernels): qweight int32
//   [K/8][N], word (r, n) holds k = 8r + i in nibble i (sequential); qzeros int32 [K/g][N/8],
//   word (g, c) holds column 8c + i in nibble i, storing z − 1 (mod 16); scales [K/g][N].
//   Dequant: w = (q − (stored + 1))·scale, so z ∈ [1, 16]: a zero point of 0 is stored as 15
//   (−1 mod 16) and read back as 16 — the wrap that broke GPTQ repacks.
// Q4_0 (llama.cpp ggml-common.h block_q4_0, ggml-quants.c dequantize_row_q4_0): row n of W is
//   K/32 blocks of 18 bytes {fp16 d; uint8 qs[16]}; qs[j] = q(j) | q(j + 16) << 4 (element j in
//   the low nibble, j + 16 in the high one — not adjacent pairs). Dequant: w = (q − 8)·d,
//   symmetric, g = 32, d may be negative. Tensor shape [N, K/32, 36] (36 nibbles = 18 bytes).
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "numerics/tensor.hpp"

namespace opcts::int4 {

/// Codes q(n, k) ∈ [0, 15] of an [N, K] weight (or zero points [G, N]), row-major.
using Codes = std::vector<uint8_t>;

/// AWQ's nibble order: nibble i of a word holds column kAwqOrder[i] of its 8.
inline constexpr std::array<int, 8> kAwqOrder = {0, 2, 4, 6, 1, 3, 5, 7};

enum class TinygemmTarget { cuda_n8, rocm_n16 };

/// The tiled tinygemm weight [N/8, K/(16·ikt), 32, ikt/2, 8] (uint4); throws
/// std::invalid_argument unless ikt ∈ {2, 4, 8}, K % (16·ikt) == 0 and N is a multiple of the
/// target's N tile (8 CUDA, 16 ROCm).
HostTensor pack_tinygemm(const Codes& q, int64_t n, int64_t k, int inner_k_tiles,
                         TinygemmTarget target = TinygemmTarget::cuda_n8);
Codes unpack_tinygemm(const HostTensor& packed, int64_t n, int64_t k, int inner_k_tiles,
                      TinygemmTarget target = TinygemmTarget::cuda_n8);

/// tinygemm's unpacked input [N, K/2, 2] (uint4, high nibble first); K even.
HostTensor pack_tinygemm_unpacked(const Codes& q, int64_t n, int64_t k);
Codes unpack_tinygemm_unpacked(const HostTensor& packed, int64_t n, int64_t k);

/// AWQ qweight [K, N/8, 8] from codes [N, K]; N % 8 == 0.
HostTensor pack_awq(const Codes& q, int64_t n, int64_t k);
Codes unpack_awq(const HostTensor& packed, int64_t n, int64_t k);
/// AWQ qzeros [G, N/8, 8] from zero points z(g, n) ∈ [0, 15] at g·N + n.
HostTensor pack_awq_zeros(const Codes& z, int64_t groups, int64_t n);
Codes unpack_awq_zeros(const HostTensor& packed, int64_t groups, int64_t n);

/// GPTQ qweight [K/8, N, 8] from codes [N, K]; K % 8 == 0.
HostTensor pack_gptq(const Codes& q, int64_t n, int64_t k);
Codes unpack_gptq(const HostTensor& packed, int64_t n, int64_t k);
/// GPTQ qzeros [G, N/8, 8] from true zero points z(g, n) (stored as (z − 1) mod 16); N % 8 == 0.
/// The unpacker returns stored + 1 ∈ [1, 16] at g·N + n: every z ∈ [1, 16] round-trips, z = 0
/// comes back as 16.
HostTensor pack_gptq_zeros(const std::vector<int>& z, int64_t groups, int64_t n);
std::vector<int> unpack_gptq_zeros(const HostTensor& packed, int64_t groups, int64_t n);

/// Q4_0 blocks [N, K/32, 36] from codes [N, K] and the fp16 bits of each block's d at
/// n·(K/32) + b; K % 32 == 0.
HostTensor pack_q4_0(const Codes& q, const std::vector<uint16_t>& d_bits, int64_t n, int64_t k);
/// Writes the fp16 bits of each block's d (at n·(K/32) + b, bytes 0 and 1 of the 18-byte block,
/// little-endian) into Q4_0 blocks, leaving their codes; throws std::invalid_argument on a count
/// that is not one per block.
void put_q4_0_d(HostTensor& packed, const std::vector<uint16_t>& d_bits);
struct Q4_0 {
  Codes q;
  std::vector<uint16_t> d_bits;
};
Q4_0 unpack_q4_0(const HostTensor& packed, int64_t n, int64_t k);

/// The packers' tensors for an [N, K] weight, zeroed, with the packers' checks: for writing codes
/// in storage order directly. Every nibble of them is one code, except Q4_0's d (bytes 0 and 1
/// of each 18-byte block), so uniform random bytes in them are uniform i.i.d. codes in whatever
/// order the format stores them.
HostTensor tinygemm_storage(int64_t n, int64_t k, int inner_k_tiles, TinygemmTarget target = TinygemmTarget::cuda_n8);
HostTensor tinygemm_unpacked_storage(int64_t n, int64_t k);
HostTensor awq_storage(int64_t n, int64_t k);
HostTensor gptq_storage(int64_t n, int64_t k);
HostTensor q4_0_storage(int64_t n, int64_t k);

}  // namespace opcts::int4
