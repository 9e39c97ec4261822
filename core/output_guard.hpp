// Guard bytes around every output an ABI backend hands an impl: where the tensor sits in its allocation, what the
// guards hold, and which guard byte a run changed.
//
// Both ABI backends (core/abi_impl.cpp's host backend, gpu/cuda/abi_backend.cpp) allocate
// each output as [guard | misalign | tensor | guard] (kGuardBytes each side; misalign from
// OutputSpec::misalign_bytes, so a 16-bit tensor can start 2- but not 4-byte aligned) and fill
// the guards with a canary that no write leaves unchanged in the cases that matter: -0.0 in every
// element-sized slot for fp16/bf16/fp32/fp64 outputs, kGuardByte (0x5A) bytes for the rest.
// Why -0.0: a paired 16-bit atomic (atomicAdd on __half2 / __nv_bfloat162) adds +0 to the element
// past the tensor's end, which leaves any other value unchanged bit for bit (x + +0 = x), so only
// a canary of -0.0 sees it (-0 + +0 = +0 in round-to-nearest, IEEE 754 §6.3). After the run every
// guard byte must still hold its canary.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "core/family.hpp"

namespace opcts {

constexpr size_t kGuardBytes = 256;
/// The canary byte of the guards of integer and other non-float outputs.
constexpr unsigned char kGuardByte = 0x5A;
/// The byte both ABI backends fill every output with before a run (0xFF: a NaN in fp64, fp32,
/// fp16, bf16 and the 8-bit float formats), so an element an impl never writes cannot pass,
/// and the comparison can tell it from a computed NaN (FailureKind::untouched).
constexpr unsigned char kOutputPoison = 0xFF;

/// Byte offsets of one guarded output: the tensor starts at `before` and is `tensor` bytes long;
/// `after` guard bytes follow.
struct GuardLayout {
  size_t before = 0, tensor = 0, after = 0;
  size_t total() const { return before + tensor + after; }
};

/// The layout of an output of `tensor_bytes`; throws std::logic_error when misalign_bytes is
/// negative or not a multiple of the element size (a misaligned element would fault).
GuardLayout guard_layout(const OutputSpec& o, size_t tensor_bytes);

/// The whole allocation's initial bytes: the canary in the guards (see the file comment) and
/// `poison` in the tensor.
std::vector<unsigned char> guarded_image(DType t, const GuardLayout& g, unsigned char poison);

/// "" when every guard byte of `buffer` (the allocation, g.total() bytes) holds its canary;
/// otherwise which bytes changed, relative to the tensor ("bytes [+0, +2) past the end of 'out'
/// hold 00 00, not the guard's 00 80").
std::string guard_breach(const std::string& output, DType t, const unsigned char* buffer, const GuardLayout& g);

}  // namespace opcts
