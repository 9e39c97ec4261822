// What the host emulations of scaled_mm share: the argument checks, reading codes and scales from the device buffers,
// the fp32 epilogue.
//
// Written against the operator's buffers (strided codes, scales in the recipe's layout: the
// table of families/scaled_mm/cuda/scaled_mm_kernels.hpp) with their own index arithmetic,
// independent of refimpl's reader.
#pragma once

#include <Eigen/Dense>

#include "families/scaled_mm/scaled_mm.hpp"
#include "numerics/tensor.hpp"

namespace opcts::host_mm {

using MatF = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

/// Refuses what the operator's contract forbids, judged from the tensors given, with
/// InvalidArgument naming the argument cuBLASLt would ("K", "lda", "ldb", "layout",
/// "a_scale", "b_scale").
void check_arguments(const scaled_mm::Problem& p, const TensorMap& in);

/// Code values of the [R, K] operand "a" or "b" as fp32 (every fp8/fp4 value is an fp32 value).
MatF code_values(const HostTensor& t, int64_t R, int64_t K);

/// The scale of operand `which` ('a' or 'b') for row r and K block kb, read from its buffer;
/// `transposed` exchanges the layout's row and column roles (a planted bug).
float scale(const scaled_mm::Problem& p, const TensorMap& in, char which, int64_t r, int64_t kb,
            bool transposed = false);

/// Whether reading the scales with the layout's roles exchanged (`scale`'s `transposed`) reads
/// another storage position for some (row, K block) of either operand: where it does not (one
/// K block, one row, a scalar), the transposed-read bug changes nothing.
bool transposed_read_differs(const scaled_mm::Problem& p);

/// The epilogue of D = out(os·(g·acc + bias)) in fp32 with one rounding to the output dtype
/// (e4m3fn: satfinite); `out_scale` false ignores the output scale (a planted bug).
TensorMap epilogue(const scaled_mm::Problem& p, const TensorMap& in, const MatF& acc, bool out_scale = true);

}  // namespace opcts::host_mm
