// grouped_mm reference: per group, exact dequantization and three Eigen GEMMs (values; magnitudes and squares,
// refimpl/reduction_gemm.hpp), the exact unrounded result, and the reduction statistics.
//
// Each group's block of the output is x = Σ_k t_k over the group's K, t_k = deq(a_k)·deq(b_k)
// (bf16 values, or e4m3fn / e4m3fnuz codes times an fp32 or 2^e scale: exact in double), unrounded (the
// bounded metric allows the device's one rounding to bf16). Like scaled_mm (families/scaled_mm/reference.cpp) the
// reference does not know how an impl accumulates, so it gives per element S = Σ|t_k|, Q = Σ t_k² and X = |Σ t_k| (no
// bias, no output scale), from which judge/accumulator.hpp derives each impl's bound; the fills' terms are independent
// and symmetric about zero (random signs), so zero_mean holds. `terms` is the largest group's K: the bound only grows
// with the reduction length, so it holds for every group (loosest for the shortest). Elements no group writes (rows or
// columns past the last offset) hold NaN, the poison the ABI backends fill outputs with (grouped_mm.hpp); their
// statistics are 0. A group of zero K gives exact zeros (S = 0: the bound is 0).
//
// reduction_shape and reference_element give the same model one element at a time, for
// families/grouped_mm/bench/grouped_mm_bench.cpp, which hashes DeepSeek-V3-sized operands on the
// device and judges sampled elements as the family judges every one (judge/compare.hpp).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>

#include "families/grouped_mm/grouped_mm.hpp"
#include "refimpl/reduction_gemm.hpp"

namespace opcts::grouped_mm {

namespace {

using RowMajor = RowMajorF64;

// An operand's codes and scales, with their decoded values (built once, used by every group).
struct Operand {
  const HostTensor* codes = nullptr;
  const HostTensor* scale = nullptr;  // nullptr for bf16
  std::vector<double> value;          // per code
  std::vector<double> scale_value;    // mxfp8: per e8m0 scale code
  bool contiguous = false;            // codes (and scales) read straight from storage
  int code_bytes = 0;                 // 1 or 2 when contiguous
  uint64_t code(int64_t i) const {
    if (!contiguous) return codes->code(i);
    const std::byte* b = codes->data();
    if (code_bytes == 1) return static_cast<uint8_t>(b[i]);
    uint16_t c;
    std::memcpy(&c, b + 2 * i, 2);  // little-endian hosts only
    return c;
  }
  double mx_scale(int64_t i) const {
    return contiguous ? scale_value[static_cast<uint8_t>(scale->data()[i])] : scale->get(i);
  }
};

Operand operand(const Problem& p, const TensorMap& in, char which) {
  Operand o;
  o.codes = &in.at(which == 'a' ? "a" : "b");
  o.value = decode_table(o.codes->dtype());
  o.scale = p.scaled() ? &in.at(which == 'a' ? "a_scale" : "b_scale") : nullptr;
  o.code_bytes = storage_bytes(o.codes->dtype());
  o.contiguous = o.codes->is_contiguous() && o.code_bytes <= 2 && dtype_info(o.codes->dtype()).bits >= 8;
  if (p.recipe == Recipe::mxfp8) {
    o.scale_value = decode_table(o.scale->dtype());
    o.contiguous = o.contiguous && o.scale->is_contiguous() && dtype_info(o.scale->dtype()).bits == 8;
  }
  return o;
}

// One operand of one group, dequantized: `rows` rows from row0 of matrix `mat` of the codes
// (a 2-D tensor is one matrix), K columns [k0, k0 + depth), each code times its scale.
// `mx`: the operand's mxfp8 scale layout.
RowMajor dequantized(const Problem& p, const Operand& o, char which, int64_t g, const GroupView& v,
                     const MxLayout& mx) {
  const HostTensor& codes = *o.codes;
  const int64_t rows = which == 'a' ? v.rows : v.cols, mat = which == 'a' ? v.a_mat : v.b_mat;
  const int64_t row0 = which == 'a' ? v.a_row0 : v.b_row0;
  const int64_t ld = codes.shape().back(), mat_stride = codes.shape().size() == 3 ? codes.dim(1) * ld : 0;
  // rowwise: a scale per row of the 2-D operand that spans every group (2d_3d's A, 3d_2d's B),
  // else one row of scales per group.
  const bool global_rows = (which == 'a' && p.mode == Mode::m2d_3d) || (which == 'b' && p.mode == Mode::m3d_2d);
  const bool mxfp8 = p.recipe == Recipe::mxfp8;
  RowMajor x(rows, v.depth);
#pragma omp parallel for schedule(static) if (rows * v.depth > (1 << 16))
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t at = mat * mat_stride + (row0 + r) * ld + v.k0;
    const double row_scale = !is_rowwise(p.recipe) ? 1.0 : o.scale->get(global_rows ? row0 + r : g * rows + r);
    double* out = x.data() + r * v.depth;
    // mxfp8: one scale per block of 32 K elements, looked up once a block.
    const int64_t block = mxfp8 ? 32 : v.depth;
    for (int64_t k0 = 0; k0 < v.depth; k0 += block) {
      const double s = mxfp8 ? o.mx_scale(mx.index(g, r, k0 / 32)) : row_scale;
      for (int64_t k = k0; k < std::min(v.depth, k0 + block); ++k) out[k] = o.value[o.code(at + k)] * s;
    }
  }
  return x;
}

}  // namespace

ReductionStats reduction_shape(const Problem& p) {
  ReductionStats st;
  st.zero_mean = true;
  st.ragged = true;  // each element sums its own group's K; terms is the largest
  for (int64_t g = 0; g < p.groups; ++g) st.terms = std::max(st.terms, group_view(p, g).depth);
  // The products a tensor core's adder receives: bf16 × bf16 (8 + 8 significant bits), e4m3 ×
  // e4m3 codes (4 + 4; the scales multiply the sums, mxfp8's powers of two per 32-deep block).
  st.term_bits = p.recipe == Recipe::bf16 ? 16 : 8;
  return st;
}

ElementReference reference_element(int64_t depth, const std::function<double(int64_t)>& a,
                                   const std::function<double(int64_t)>& b) {
  ElementReference e;
  for (int64_t k = 0; k < depth; ++k) {
    const double t = a(k) * b(k);  // exact: two dequantized values (file comment)
    e.want += t;
    e.abs_sum += std::fabs(t);
    e.sq_sum += t * t;
  }
  e.magnitude = std::fabs(e.want);
  return e;
}

References reference(const Problem& p, const TensorMap& in) {
  const std::vector<int64_t> shape = out_shape(p);
  const size_t count = static_cast<size_t>(shape[0] * shape[1] * (shape.size() == 3 ? shape[2] : 1));
  References r;
  auto& want = r.exact["out"];
  ReductionStats& st = r.reduction["out"];
  st = reduction_shape(p);
  want.assign(count, NAN);
  st.abs_sum.assign(count, 0.0);
  st.sq_sum.assign(count, 0.0);
  st.magnitude.assign(count, 0.0);
  const bool mx = p.recipe == Recipe::mxfp8;
  const MxLayout a_mx = mx ? mx_layout(p, 'a') : MxLayout{}, b_mx = mx ? mx_layout(p, 'b') : MxLayout{};
  const Operand a = operand(p, in, 'a'), b = operand(p, in, 'b');
  for (int64_t g = 0; g < p.groups; ++g) {
    const GroupView v = group_view(p, g);
    if (v.rows == 0 || v.cols == 0) continue;
    // The group's block of the output, written in place (unrounded: the bounded metric adds
    // the one output rounding).
    reduction_products(dequantized(p, a, 'a', g, v, a_mx), dequantized(p, b, 'b', g, v, b_mx),
                       {want.data() + v.out0, st.abs_sum.data() + v.out0, st.sq_sum.data() + v.out0, v.ld});
#pragma omp parallel for schedule(static) if (v.rows * v.cols > (1 << 14))
    for (int64_t i = 0; i < v.rows; ++i)
      for (int64_t j = 0; j < v.cols; ++j) {
        const size_t at = static_cast<size_t>(v.out0 + i * v.ld + j);
        st.magnitude[at] = std::fabs(want[at]);
      }
  }
  return r;
}

}  // namespace opcts::grouped_mm
