// grouped_mm inputs, drawn in the code domain: element codes and scales straight from Philox bits, offsets from the
// problem, defects applied.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>

#include "families/grouped_mm/grouped_mm.hpp"
#include "numerics/rng.hpp"
#include "refimpl/quant.hpp"

namespace opcts::grouped_mm {

namespace {

// Philox streams of the inputs (seed = the case's seed).
enum Stream : uint32_t { kA = 1, kB, kAScale, kBScale, kAScaleExp, kBScaleExp };

// Element codes of a whole tensor: bf16 ±(1 + f/128)·2^e, e ∈ [-3, 0] (16 bits of each 32-bit
// lane: sign, 2 exponent bits, 7 fraction bits); e4m3fn ±(1 + f/8)·2^e, e ∈ [-4, 3] (one byte a
// code: sign, 3 exponent bits, 3 fraction bits; the exponent field stays in [3, 10], never NaN);
// e4m3fnuz the same bytes, ±(1 + f/8)·2^(e-1) (never 0x80, its NaN).
HostTensor random_codes(DType t, std::vector<int64_t> shape, uint64_t seed, uint32_t stream) {
  HostTensor x(t, std::move(shape));
  if (t == DType::bf16) {
    fill_block_codes(reinterpret_cast<uint16_t*>(x.data()), x.numel(), seed, stream, [](uint16_t bits) {
      const uint32_t sign = bits & 1, e = bits >> 1 & 3, f = bits >> 3 & 0x7F;
      return static_cast<uint16_t>(sign << 15 | (127 - 3 + e) << 7 | f);
    });
    return x;
  }
  // A byte's code by table: sign (bit 0), exponent field 3 + e (bits 1-3), fraction (bits 4-6).
  static const std::array<uint8_t, 256> byte_code = [] {
    std::array<uint8_t, 256> c{};
    for (uint32_t bits = 0; bits < 256; ++bits) {
      const uint32_t sign = bits & 1, e = bits >> 1 & 7, f = bits >> 4 & 7;
      c[bits] = static_cast<uint8_t>(sign << 7 | (3 + e) << 3 | f);
    }
    return c;
  }();
  fill_block_codes(reinterpret_cast<uint8_t*>(x.data()), x.numel(), seed, stream,
                   [](uint8_t bits) { return byte_code[bits]; });
  return x;
}

// Rowwise fp32 scales factor·(1 + f)·2^e, a 23-bit f and e ∈ [-4, -1], factor 1 or 2: exact in fp32.
HostTensor rowwise_scales(std::vector<int64_t> shape, uint64_t seed, uint32_t stream, uint32_t exp_stream,
                          double factor) {
  HostTensor s(DType::fp32, std::move(shape));
  for (int64_t i = 0; i < s.numel(); ++i) {
    const double f = std::floor(uniform01(seed, stream, static_cast<uint64_t>(i)) * 8388608.0) / 8388608.0;
    const int e = static_cast<int>(uniform01(seed, exp_stream, static_cast<uint64_t>(i)) * 4) - 4;
    s.set(i, factor * std::ldexp(1.0 + f, e));
  }
  return s;
}

// mxfp8 e8m0 scales 2^e, e ∈ [-4, 0], one per block of every group, placed by mx_layout;
// padding holds code 0, as torch's F.pad leaves it.
HostTensor mx_scales(const Problem& p, char which, uint64_t seed, uint32_t stream) {
  const MxLayout l = mx_layout(p, which);
  HostTensor s(DType::e8m0fnu, {l.count});            // zero bytes: code 0 in the padding
  auto* code = reinterpret_cast<uint8_t*>(s.data());  // one byte a scale, contiguous
  for (int64_t g = 0; g < p.groups; ++g) {
    const GroupView v = group_view(p, g);
    const int64_t rows = which == 'a' ? v.rows : v.cols, cols = l.cols[static_cast<size_t>(g)];
    // Each scale is drawn at its own index: rows fill in parallel (117 M scales at 2d_3d g256).
#pragma omp parallel for schedule(static) if (rows * cols > (1 << 14))
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c) {
        const int64_t at = l.index(g, r, c);
        const int e = static_cast<int>(uniform01(seed, stream, static_cast<uint64_t>(at)) * 5) - 4;
        code[at] = static_cast<uint8_t>(127 + e);
      }
  }
  return s;
}

// A negative case's scale tensor: the same codes, one short, flattened.
HostTensor one_short(const HostTensor& s) {
  HostTensor t(s.dtype(), {s.numel() - 1});
  for (int64_t i = 0; i + 1 < s.numel(); ++i) t.set_code(i, s.code(i));
  return t;
}

HostTensor offs_tensor(const Problem& p) {
  std::vector<int64_t> e = group_ends(p);
  switch (p.defect) {
    case Defect::offs_decreasing:
      for (size_t g = 0; g + 1 < e.size(); ++g)
        if (e[g] != e[g + 1]) {
          std::swap(e[g], e[g + 1]);
          break;
        }
      break;
    case Defect::offs_out_of_range: e.back() = p.split_total() + p.tail + offset_multiple(p); break;
    case Defect::offs_count: e.pop_back(); break;
    default: break;
  }
  HostTensor t(DType::int32, {static_cast<int64_t>(e.size())});
  for (size_t g = 0; g < e.size(); ++g) t.set(static_cast<int64_t>(g), static_cast<double>(e[g]));
  return t;
}

}  // namespace

int64_t MxLayout::index(int64_t g, int64_t r, int64_t c) const {
  const size_t gi = static_cast<size_t>(g);
  const int64_t f = static_cast<int64_t>(
      quant::swizzled_offset(static_cast<size_t>(r), static_cast<size_t>(c), static_cast<size_t>(cols[gi])));
  if (kind != k_split) return start[gi] + f;
  const int64_t cg = (cols[gi] + 3) / 4 * 4;
  return f / cg * width + start[gi] + f % cg;
}

MxLayout mx_layout(const Problem& p, char which) {
  auto up = [](int64_t x, int64_t a) { return (x + a - 1) / a * a; };
  MxLayout l;
  const bool row_split = (which == 'a' && p.mode == Mode::m2d_3d) || (which == 'b' && p.mode == Mode::m3d_2d);
  l.kind = p.mode == Mode::m2d_2d ? MxLayout::k_split : row_split ? MxLayout::row_split : MxLayout::batched;
  const int64_t G = p.groups;
  int64_t at = 0;
  for (int64_t g = 0; g < G; ++g) {
    const GroupView v = group_view(p, g);
    const int64_t rows = which == 'a' ? v.rows : v.cols, c = v.depth / 32;
    l.start.push_back(at);
    l.cols.push_back(c);
    switch (l.kind) {
      case MxLayout::batched: at += up(rows, 128) * up(c, 4); break;
      case MxLayout::row_split: at += up(rows, 128) * up(c, 4); break;
      case MxLayout::k_split: at += up(c, 4); break;
    }
  }
  const int64_t cp = up(p.k / 32, 4);
  switch (l.kind) {
    case MxLayout::batched: l.count = at; break;
    case MxLayout::row_split: l.count = (p.split_total() + p.tail + 128 * G) * cp; break;
    case MxLayout::k_split:
      l.width = (p.k + p.tail) / 32 + 4 * G;
      l.count = up(which == 'a' ? p.m : p.n, 128) * l.width;
      break;
  }
  return l;
}

TensorMap make_inputs(const Problem& p, uint64_t seed) {
  // rowwise_fnuz: rowwise's code bits as e4m3fnuz (half the value) and its scales doubled
  // (families/grouped_mm/grouped_mm.hpp): the same dequantized operands.
  const DType elem = element_dtype(p.recipe);
  TensorMap in;
  in.emplace("a", random_codes(elem, a_shape(p), seed, kA));
  in.emplace("b", random_codes(elem, b_shape(p), seed, kB));
  if (p.has_offs()) in.emplace("offs", offs_tensor(p));
  if (!p.scaled()) return in;
  HostTensor as, bs;
  if (is_rowwise(p.recipe)) {
    const double bias_factor = p.recipe == Recipe::rowwise_fnuz ? 2.0 : 1.0;
    as = rowwise_scales(
        p.mode == Mode::m2d_3d ? std::vector<int64_t>{p.m + p.tail} : std::vector<int64_t>{p.groups, p.m}, seed,
        kAScale, kAScaleExp, bias_factor);
    bs = rowwise_scales(
        p.mode == Mode::m3d_2d ? std::vector<int64_t>{p.n + p.tail} : std::vector<int64_t>{p.groups, p.n}, seed,
        kBScale, kBScaleExp, bias_factor);
  } else {
    as = mx_scales(p, 'a', seed, kAScaleExp);
    bs = mx_scales(p, 'b', seed, kBScaleExp);
  }
  in.emplace("a_scale", p.defect == Defect::a_scale_count ? one_short(as) : std::move(as));
  in.emplace("b_scale", p.defect == Defect::b_scale_count ? one_short(bs) : std::move(bs));
  return in;
}

}  // namespace opcts::grouped_mm
