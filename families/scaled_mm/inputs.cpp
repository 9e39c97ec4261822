// scaled_mm inputs, made in the code domain: the random fill (normal codes under per-block scales) and the exact fill
// (integer codes under power-of-two scales), placed in the problem's layouts, with the negative cases' defective
// scales, the global and output scales and the bias (scaled_mm.hpp, file comment).
#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstring>
#include <numeric>
#include <stdexcept>

#include "families/scaled_mm/scaled_mm.hpp"
#include "numerics/codec.hpp"
#include "numerics/normal_codes.hpp"
#include "numerics/rng.hpp"

namespace opcts::scaled_mm {

namespace {

// A row-major [rows, cols] scale tensor rewritten in the layout the device reads.
HostTensor in_layout(const HostTensor& rm, quant::ScaleLayout layout) {
  switch (layout) {
    case quant::ScaleLayout::row_major: return rm;
    case quant::ScaleLayout::swizzled: return quant::swizzle(rm);
    case quant::ScaleLayout::column_major: {
      const int64_t rows = rm.dim(0), cols = rm.dim(1);
      HostTensor t(rm.dtype(), {rows, cols}, {1, rows}, rows * cols);
      const int bits = dtype_info(rm.dtype()).bits;
      if (bits % 8 || !rm.is_contiguous()) {
        for (int64_t i = 0; i < rows * cols; ++i) t.set_code(i, rm.code(i));
        return t;
      }
      const auto size = static_cast<size_t>(bits / 8);  // whole-byte codes (every scale dtype's): copied as bytes
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < cols; ++c)
          std::memcpy(t.data() + size * static_cast<size_t>(c * rows + r),
                      rm.data() + size * static_cast<size_t>(r * cols + c), size);
      return t;
    }
  }
  return rm;
}

struct Operand {
  HostTensor codes;  // [R, K] row-major
  HostTensor scale;  // in the device layout
  double global = 1.0;
};

// Random operand, made in the code domain (no float tensor is quantized): element (r, k) stands
// for a value of typical size 2^E, E = e_r + e_c + scale_exp with e_r and e_c uniform in 0..3
// per row and per 32-wide K chunk (so neighbouring scale blocks of every recipe get different
// scales, as outlier channels do in real activations). Each scale block takes its largest E,
// E_b, and a scale s_b of 2^E_b·(1 + u_b)/σ (u_b uniform in [0, 1), rounded to fp32) for the fp32
// recipes (σ = the element's largest value / 4: the block's largest codes near 4σ), 2^(E_b + 2 −
// emax_elem) for mx (OCP's shared exponent of an amax near 2^(E_b + 2)), and the ue4m3 code
// nearest 2^E_b·(1 + u_b)/(1.5·g) for nvfp4 (g = 2^(E_max + 2)/2688 over the tensor, or 1
// without the global scale); each code is drawn as RN_satfinite(z·σ·2^(E − E_b)), z ~ N(0, 1)
// (numerics/normal_codes.hpp; mx: σ = 2^(emax_elem − 2)). The values code·s_b·g are exact.
Operand random_operand(const Problem& p, const quant::Scheme& s, quant::ScaleLayout layout, int64_t R, uint64_t seed,
                       uint32_t stream) {
  const int64_t K = p.k;
  std::vector<int> ec(static_cast<size_t>((K + 31) / 32)), er(static_cast<size_t>(R));
  for (size_t c = 0; c < ec.size(); ++c) ec[c] = static_cast<int>(uniform01(seed, stream + 200, c) * 4);
  for (int64_t r = 0; r < R; ++r)
    er[static_cast<size_t>(r)] = static_cast<int>(uniform01(seed, stream + 100, static_cast<uint64_t>(r)) * 4);
  const quant::ScaleGrid g = quant::scale_grid(s, R, K);
  const DType sd = quant::scale_dtype(s);
  const bool mx = s.recipe == quant::Recipe::mx, nvfp4 = s.recipe == quant::Recipe::nvfp4;
  const double sigma = mx      ? std::ldexp(1.0, quant::mx_emax(s.element) - 2)
                       : nvfp4 ? 1.5
                               : dtype_info(s.element).max_finite / 4;

  Operand o;
  int e_max = 0;
  for (int x : er) e_max = std::max(e_max, x);
  int ec_max = 0;
  for (int x : ec) ec_max = std::max(ec_max, x);
  e_max += ec_max + p.scale_exp;
  const float global = nvfp4 && s.global_scale ? static_cast<float>(std::ldexp(1.0, e_max + 2) / 2688.0) : 1.0f;
  if (nvfp4) o.global = global;

  // Each block's E_b and scale. A block column's chunk exponent is the same in every row of
  // blocks; each row of blocks draws its u_b from one run of Philox blocks (u_b is
  // uniform01(seed, stream + 400, b): lane b % 4 of block b / 4) and writes its scale codes
  // straight into the row-major tensor (fp32: the float's bits, as HostTensor::set stores them).
  HostTensor rm(sd, {g.rows, g.cols});
  std::vector<int> block_e(static_cast<size_t>(g.rows * g.cols), 0), chunk_e(static_cast<size_t>(g.cols), 0);
  for (int64_t bc = 0; bc < g.cols; ++bc)
    for (int64_t c = bc * g.block_cols / 32; c * 32 < std::min(K, (bc + 1) * g.block_cols); ++c)
      chunk_e[static_cast<size_t>(bc)] = std::max(chunk_e[static_cast<size_t>(bc)], ec[static_cast<size_t>(c)]);
  const int scale_bits = dtype_info(sd).bits;
  if (scale_bits != 8 && scale_bits != 32) throw std::logic_error("random_operand: scales of 8 or 32 bits");
#pragma omp parallel if (g.rows * g.cols > (1 << 14))
  {
    std::vector<uint32_t> bits;
#pragma omp for schedule(static)
    for (int64_t br = 0; br < g.rows; ++br) {
      int row_e = 0;
      for (int64_t r = br * g.block_rows; r < std::min(R, (br + 1) * g.block_rows); ++r)
        row_e = std::max(row_e, er[static_cast<size_t>(r)]);
      const int64_t b_first = br * g.cols, first = b_first / 4, blocks = (b_first + g.cols - 1) / 4 - first + 1;
      bits.resize(static_cast<size_t>(4 * blocks));
      random_blocks(seed, stream + 400, static_cast<uint64_t>(first), blocks, bits.data());
      for (int64_t bc = 0; bc < g.cols; ++bc) {
        const int64_t b = b_first + bc;
        const int e_b = row_e + chunk_e[static_cast<size_t>(bc)] + p.scale_exp;
        block_e[static_cast<size_t>(b)] = e_b;
        const double u = uniform01_of_bits(bits[static_cast<size_t>(b - 4 * first)]);
        if (mx) {
          reinterpret_cast<uint8_t*>(rm.data())[b] =
              encode_e8m0(std::ldexp(1.0, e_b + 2 - quant::mx_emax(s.element)), ScaleRounding::floor);
        } else if (nvfp4) {
          const double want = std::ldexp(1 + u, e_b) / (sigma * static_cast<double>(global));
          reinterpret_cast<uint8_t*>(rm.data())[b] =
              static_cast<uint8_t>(encode(DType::ue4m3, std::clamp(want, 0x1p-6, 448.0), Overflow::satfinite));
        } else {
          const auto f = static_cast<float>(std::ldexp(1 + u, e_b) / sigma);
          std::memcpy(rm.data() + 4 * b, &f, 4);
        }
      }
    }
  }
  o.scale = in_layout(rm, layout);

  // The codes: one sampler per binade below the block's largest E (0..6).
  std::vector<const NormalCodeSampler*> samplers;
  for (int d = 0; d <= 6; ++d) samplers.push_back(&normal_code_sampler(s.element, std::ldexp(sigma, -d)));
  o.codes = HostTensor(s.element, {R, K});
  const bool bytes = dtype_info(s.element).bits == 8;
  // 4-bit codes go two to a byte, element 2i in the low nibble (HostTensor's packing): with K
  // even each row packs into its own K/2 bytes from a row of byte codes per thread; an odd K
  // packs the whole tensor once every code is drawn.
  const bool row_packs = !bytes && K % 2 == 0;
  std::vector<uint8_t> codes(bytes || row_packs ? 0 : static_cast<size_t>(R * K));
  auto* out = bytes ? reinterpret_cast<uint8_t*>(o.codes.data()) : codes.data();
  const int64_t cols_per_block = g.block_cols;
  // Runs of columns in one 32-wide K chunk and one scale block share their binade offset d.
  const int64_t run = cols_per_block >= K ? std::min<int64_t>(32, K) : std::gcd<int64_t>(32, cols_per_block);
#pragma omp parallel if (R * K > (1 << 16))
  {
    std::vector<uint32_t> bits;  // the row's Philox blocks: element i takes lane i % 4 of block i / 4
    std::vector<uint8_t> row_codes(row_packs ? static_cast<size_t>(K) : 0);
#pragma omp for schedule(static)
    for (int64_t r = 0; r < R; ++r) {
      const int64_t br = r / g.block_rows, first = r * K / 4, blocks = (r * K + K - 1) / 4 - first + 1;
      bits.resize(static_cast<size_t>(4 * blocks));
      random_blocks(seed, stream + 300, static_cast<uint64_t>(first), blocks, bits.data());
      const uint32_t* row_bits =
          bits.data() + (r * K - 4 * first);  // uniform01(seed, stream + 300, r·K + k)'s 32 bits at k
      uint8_t* row_out = row_packs ? row_codes.data() : out + r * K;
      for (int64_t k0 = 0; k0 < K; k0 += run) {
        const int e = er[static_cast<size_t>(r)] + ec[static_cast<size_t>(k0 / 32)] + p.scale_exp;
        const int d = block_e[static_cast<size_t>(br * g.cols + k0 / cols_per_block)] - e;
        const NormalCodeSampler& sampler = *samplers[static_cast<size_t>(d)];
        const int64_t end = std::min(K, k0 + run);
        for (int64_t k = k0; k < end; ++k) row_out[k] = static_cast<uint8_t>(sampler.from_bits(row_bits[k]));
      }
      if (row_packs) {
        auto* packed = reinterpret_cast<uint8_t*>(o.codes.data()) + r * K / 2;
        for (int64_t j = 0; j < K / 2; ++j)
          packed[j] = static_cast<uint8_t>(row_out[2 * j] | (row_out[2 * j + 1] << 4));
      }
    }
  }
  if (!bytes && !row_packs) {
    auto* packed = reinterpret_cast<uint8_t*>(o.codes.data());
    const int64_t n = R * K;
#pragma omp parallel for schedule(static) if (n > (1 << 16))
    for (int64_t j = 0; j < n / 2; ++j)
      packed[j] =
          static_cast<uint8_t>(codes[static_cast<size_t>(2 * j)] | (codes[static_cast<size_t>(2 * j + 1)] << 4));
    if (n % 2) o.codes.set_code(n - 1, codes[static_cast<size_t>(n - 1)]);
  }
  return o;
}

// Exact operand: integer codes in [-max, max] and scales 2^e, e in [lo, lo + span], per block.
Operand exact_operand(const Problem& p, const quant::Scheme& s, quant::ScaleLayout layout, int64_t R, int max_code,
                      const ExactRanges& er, uint64_t seed, uint32_t stream) {
  Operand o;
  o.codes = HostTensor(s.element, {R, p.k});
  const int64_t n = R * p.k;
  for (int64_t i = 0; i < n; ++i) {
    const double u = uniform01(seed, stream, static_cast<uint64_t>(i));
    o.codes.set(i, std::floor(u * (2 * max_code + 1)) - max_code);
  }
  const quant::ScaleGrid g = quant::scale_grid(s, R, p.k);
  HostTensor rm(quant::scale_dtype(s), {g.rows, g.cols});
  for (int64_t i = 0; i < g.rows * g.cols; ++i) {
    const double u = uniform01(seed, stream + 10, static_cast<uint64_t>(i));
    rm.set(i, std::ldexp(1.0, er.exp_lo + static_cast<int>(u * (er.exp_span + 1))));
  }
  o.scale = in_layout(rm, layout);
  return o;
}

// Codes [R, K] row-major placed in a device buffer: K contiguous (strides (ld, 1)) or R
// contiguous (strides (1, ld)).
HostTensor place(HostTensor codes, bool k_major, int64_t ld) {
  const int64_t R = codes.dim(0), K = codes.dim(1);
  if (k_major && ld == K) return codes;  // already the device layout: strides (K, 1), R·K codes
  HostTensor t = k_major ? HostTensor(codes.dtype(), {R, K}, {ld, 1}, std::max<int64_t>(R * ld, 0))
                         : HostTensor(codes.dtype(), {R, K}, {1, ld}, std::max<int64_t>(K * ld, 0));
  if (dtype_info(codes.dtype()).bits == 8) {  // one byte a code: copy bytes, not decoded values
    const auto* src = reinterpret_cast<const uint8_t*>(codes.data());
    auto* dst = reinterpret_cast<uint8_t*>(t.data());
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < R; ++r)
      for (int64_t k = 0; k < K; ++k) dst[k_major ? r * ld + k : k * ld + r] = src[r * K + k];
    return t;
  }
  // 4-bit codes, storage position o in byte o / 2 (low nibble when o is even; HostTensor's
  // packing): the bytes as they are where the layout is the codes' own; else nibble by nibble,
  // rows (K-major) or columns in parallel where each starts on a byte (ld even). Per-element
  // set_code was 45% of an nvfp4 operand's inputs (perf, 2026-12-02).
  const auto* src = reinterpret_cast<const uint8_t*>(codes.data());
  auto* dst = reinterpret_cast<uint8_t*>(t.data());
  const int64_t outer = k_major ? R : K, inner = k_major ? K : R;
#pragma omp parallel for schedule(static) if (ld % 2 == 0 && R * K > (1 << 16))
  for (int64_t a = 0; a < outer; ++a)
    for (int64_t b = 0; b < inner; ++b) {
      const int64_t r = k_major ? a : b, k = k_major ? b : a, i = r * K + k, at = a * ld + b;
      const int v = src[i / 2] >> (4 * (i % 2)) & 0xF, shift = 4 * static_cast<int>(at % 2);
      dst[at / 2] = static_cast<uint8_t>((dst[at / 2] & ~(0xF << shift)) | v << shift);
    }
  return t;
}

// A negative case's scale tensor: one scale too many, or fp32 scales given as bf16 and
// e8m0 / ue4m3 scales given as fp32 (the usual mistake).
HostTensor defective(const HostTensor& s, bool shape) {
  if (shape) {
    HostTensor t(s.dtype(), {s.numel() + 1});
    for (int64_t i = 0; i < s.numel(); ++i) t.set_code(i, s.code(i));
    return t;
  }
  HostTensor t(s.dtype() == DType::fp32 ? DType::bf16 : DType::fp32, s.shape());
  for (int64_t i = 0; i < s.numel(); ++i) t.set(i, s.get(i));
  return t;
}

}  // namespace

double random_fill_k_share(const Problem& p, uint64_t seed, int64_t k0, int64_t k1) {
  // random_operand's chunk exponents: ec[c] = ⌊4·uniform01(seed, stream + 200, c)⌋, stream 0 for
  // A and 1 for B.
  const auto chunk_e = [&](uint32_t stream, int64_t c) {
    return static_cast<int>(uniform01(seed, stream + 200, static_cast<uint64_t>(c)) * 4);
  };
  double part = 0, all = 0;
  for (int64_t c = 0; 32 * c < p.k; ++c) {
    const double w = std::ldexp(1.0, 2 * (chunk_e(0, c) + chunk_e(1, c)));
    const int64_t lo = 32 * c, hi = std::min(p.k, lo + 32);
    all += w * static_cast<double>(hi - lo);
    part += w * static_cast<double>(std::max<int64_t>(0, std::min(hi, k1) - std::max(lo, k0)));
  }
  return all > 0 ? part / all : 0.0;
}

TensorMap make_inputs(const Problem& p, uint64_t seed) {
  Operand a, b;
  if (p.fill == Fill::exact) {
    const ExactRanges er = exact_ranges(p);
    a = exact_operand(p, p.a_scheme(), p.a_scale_layout(), p.m, er.a_max, er, seed, 3);
    b = exact_operand(p, p.b_scheme(), p.b_scale_layout(), p.n, er.b_max, er, seed, 4);
    if (p.recipe == Recipe::nvfp4) {  // powers of two, so g = g_A·g_B is exact
      a.global = std::ldexp(1.0, p.scale_exp - 1);
      b.global = 0.5;
    }
  } else {
    a = random_operand(p, p.a_scheme(), p.a_scale_layout(), p.m, seed, 0);
    b = random_operand(p, p.b_scheme(), p.b_scale_layout(), p.n, seed, 1);
  }
  TensorMap in;
  in.emplace("a", place(std::move(a.codes), p.a_layout == Layout::row, p.eff_lda()));
  in.emplace("b", place(std::move(b.codes), p.b_layout == Layout::col, p.eff_ldb()));
  const bool a_def = p.defect == Defect::a_scale_shape || p.defect == Defect::a_scale_dtype;
  const bool b_def = p.defect == Defect::b_scale_shape || p.defect == Defect::b_scale_dtype;
  const bool shape_def = p.defect == Defect::a_scale_shape || p.defect == Defect::b_scale_shape;
  in.emplace("a_scale", a_def ? defective(a.scale, shape_def) : std::move(a.scale));
  in.emplace("b_scale", b_def ? defective(b.scale, shape_def) : std::move(b.scale));
  if (p.recipe == Recipe::nvfp4) {
    HostTensor g(DType::fp32, {1});
    g.set(0, static_cast<double>(static_cast<float>(a.global) * static_cast<float>(b.global)));  // cuBLASLt alpha, fp32
    in.emplace("global_scale", std::move(g));
  }
  if (p.out == DType::e4m3fn) {
    HostTensor os(DType::fp32, {1});
    os.set(0, p.out_scale);
    in.emplace("out_scale", std::move(os));
  }
  if (p.bias) {
    HostTensor bias(p.out, {p.n});
    if (p.fill == Fill::exact) {
      // Integers in [-8, 8] times the quantum of the sum (2^(2·exp_lo)·g): exact in the bias
      // dtype and in the fp32 epilogue (exact_ranges keeps a bit of headroom for it).
      const ExactRanges er = exact_ranges(p);
      const double g = p.recipe == Recipe::nvfp4 ? in.at("global_scale").get(0) : 1.0;
      for (int64_t j = 0; j < p.n; ++j)
        bias.set(j, (std::floor(uniform01(seed, 2, static_cast<uint64_t>(j)) * 17) - 8) * std::ldexp(g, 2 * er.exp_lo));
    } else {
      // As large as a typical output, as a layer's bias is: x = Σ_k a_k·b_k with each operand's
      // values of typical size 2^(r + c + scale_exp), r and c uniform in 0..3 (random_operand),
      // has E[x²] ≈ K·(4^scale_exp·E[4^r]·E[4^c])² with E[4^r] = 85/4 (the fp32 recipes' random
      // scale factors 1 + u add E[(1 + u)²]² = (7/3)² to it).
      const double rms =
          std::ldexp(1.0, 2 * p.scale_exp) * (85.0 / 4) * (85.0 / 4) * std::sqrt(static_cast<double>(p.k));
      fill_normal(bias, seed, 2, rms);
    }
    in.emplace("bias", std::move(bias));
  }
  return in;
}

}  // namespace opcts::scaled_mm
