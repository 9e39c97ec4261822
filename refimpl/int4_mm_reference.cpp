// int4_mm reference: the weights unpacked and dequantized exactly, fp64 Eigen GEMMs over column blocks (OpenMP; dispatched per ISA level), and the error bound.
//
// Exact value. Every dequantized weight — (q − 8)·scale + zero, (q − z)·scale or (q − 8)·d with
// 4-bit codes and 8- or 11-bit scales and zeros — is exact in fp64 (the generated zeros lie
// within a few binades of their scales, so the sum needs < 30 bits), and y = Σ_k x_k·w_k is an
// fp64 GEMM (Higham's γ_K with u = 2^-53, far below anything compared).
//
// The bound ("y" in References::bound, metric `bounded`), for the arithmetic of opcts's kernels
// and of tinygemm: each weight is dequantized with ONE rounding to the activation dtype,
// ŵ = RN_dtype(w) (tinygemm's __hfma2 in bf16; AWQ/GPTQ's exact (q − z) times the scale, rounded
// once; Q4_0's (q − 8)·d rounded once), multiplied by x_k (the product of two 8- or 11-bit
// significands is exact in fp32) and summed in fp32 in any order (FMA chains, tensor-core MMAs,
// split-K partial sums), each addition with relative error at most u_acc = 2^-23 — one full
// fp32 ulp, so the truncating adders of tensor cores (Fasi et al., "Numerical behavior of NVIDIA
// tensor cores", PeerJ CS 2021) are covered as well as round to nearest. With
//     y_lowp = Σ_k x_k·ŵ_k   (exact: what an exact accumulator would return from the ŵ),
// the device's fp32 value v before its output rounding satisfies (Higham §3.1, any order)
//     |v − y| <= |y_lowp − y| + γ_K(u_acc)·Σ_k |x_k|·|ŵ_k| + K·2^-149,
// the last term for fp32 underflow. The reference computes Δ = y_lowp − y = X·(Ŵ − W) directly
// (Ŵ − W is exact in fp64) and Mag = |X|·|Ŵ|; its own fp64 errors (γ_K(2^-53) times sums no
// larger than 2·Mag) are absorbed by adding 4·γ_K(2^-53) to the coefficient:
//     E = |Δ| + (γ_K(2^-23) + 4·γ_K(2^-53))·Mag + K·2^-149,
// and the metric adds the one output rounding around the unrounded y (|RN(v) − y| <= E + ulp_out(|y| + E)/2).
// An impl that dequantizes to fp32 instead (no rounding to the dtype) has |v − y| <=
// γ_{K+1}(2^-24)·Σ|x||w|, below γ_K(2^-23)·Mag for every K >= 2: it passes too. A dequantized
// weight rounded twice (tinygemm's (q − 8)·scale rounded, then + zero rounded) is outside the
// model and may fail: that is a different arithmetic, for a different bound.
#include <cmath>

#include <Eigen/Dense>

#include "refimpl/gemm.hpp"
#include "refimpl/int4_mm.hpp"
#include "refimpl/int4_pack.hpp"

namespace opcts::int4_mm {

namespace {

using RowMajor = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using ColMajor = Eigen::MatrixXd;

constexpr int64_t kColumnBlock = 64;
constexpr int64_t kDirectRows = 8;

double gamma(int64_t n, double u) { return static_cast<double>(n) * u / (1 - static_cast<double>(n) * u); }

// The codes [N, K] and, per (group, column), what turns a code into its exact weight.
struct Unpacked {
  int4::Codes q;
  std::vector<double> scale, zero;  // [G, N]: tinygemm (scale, zero); awq/gptq (scale, z); q4_0 (d, 8)
};

Unpacked unpack(const Problem& p, const TensorMap& in) {
  const int64_t N = p.n, K = p.k, G = p.groups();
  const HostTensor& w = in.at("weight");
  Unpacked u;
  u.scale.resize(static_cast<size_t>(G * N));
  u.zero.resize(u.scale.size());
  switch (p.format) {
    case Format::tinygemm:
    case Format::tinygemm_unpacked: {
      u.q = p.format == Format::tinygemm ? int4::unpack_tinygemm(w, N, K, p.inner_k_tiles) : int4::unpack_tinygemm_unpacked(w, N, K);
      const HostTensor& sz = in.at("scale_and_zero");
      for (int64_t i = 0; i < G * N; ++i) {
        u.scale[static_cast<size_t>(i)] = sz.get(2 * i);
        u.zero[static_cast<size_t>(i)] = sz.get(2 * i + 1);
      }
      break;
    }
    case Format::awq:
    case Format::gptq: {
      u.q = p.format == Format::awq ? int4::unpack_awq(w, N, K) : int4::unpack_gptq(w, N, K);
      const HostTensor& sc = in.at("scales");
      for (int64_t i = 0; i < G * N; ++i) u.scale[static_cast<size_t>(i)] = sc.get(i);
      if (p.format == Format::awq) {
        const int4::Codes z = int4::unpack_awq_zeros(in.at("qzeros"), G, N);
        for (size_t i = 0; i < z.size(); ++i) u.zero[i] = z[i];
      } else {
        const std::vector<int> z = int4::unpack_gptq_zeros(in.at("qzeros"), G, N);
        for (size_t i = 0; i < z.size(); ++i) u.zero[i] = z[i];
      }
      break;
    }
    case Format::q4_0: {
      int4::Q4_0 b = int4::unpack_q4_0(w, N, K);
      u.q = std::move(b.q);
      for (int64_t n = 0; n < N; ++n)  // d of block (n, g) to the [G, N] order
        for (int64_t g = 0; g < G; ++g) {
          u.scale[static_cast<size_t>(g * N + n)] = decode(DType::fp16, b.d_bits[static_cast<size_t>(n * G + g)]);
          u.zero[static_cast<size_t>(g * N + n)] = 8;
        }
      break;
    }
  }
  return u;
}

// The exact weight of code q given its group's scale and zero (the table of int4_mm.hpp).
double weight(Format f, int q, double scale, double zero) {
  return f == Format::tinygemm || f == Format::tinygemm_unpacked ? (q - 8) * scale + zero : (q - zero) * scale;
}

}  // namespace

References reference(const Problem& p, const TensorMap& in) {
  const int64_t M = p.m, N = p.n, K = p.k, G = p.groups(), g = p.group;
  const Unpacked u = unpack(p, in);
  // x's 16-bit codes decoded through a table: M·K reaches tens of millions at prefill sizes.
  const std::vector<double> value = decode_table(p.dtype);
  const auto* codes = reinterpret_cast<const uint16_t*>(in.at("x").data());  // contiguous [M, K]
  RowMajor x(M, K);
#pragma omp parallel for schedule(static) if (M * K > (1 << 16))
  for (int64_t i = 0; i < M; ++i)
    for (int64_t k = 0; k < K; ++k) x(i, k) = value[codes[i * K + k]];
  const RowMajor ax = x.cwiseAbs();

  RowMajor y(M, N), delta(M, N), mag(M, N);
  const int64_t blocks = (N + kColumnBlock - 1) / kColumnBlock;
  // Threads only where there is work for them: small problems pay for parallel regions.
#pragma omp parallel for schedule(dynamic) if (blocks > 1 && (M + 2) * N * K > (1 << 20))
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t n0 = b * kColumnBlock, nb = std::min(kColumnBlock, N - n0);
    // Decode rows (M <= kDirectRows) take the three dot products weight by weight; larger M
    // fills the block's dequantized columns once and hands them to three GEMMs.
    const bool direct = M <= kDirectRows;
    ColMajor w(direct ? 0 : K, nb), d(direct ? 0 : K, nb), a(direct ? 0 : K, nb);  // column j: weight column n0 + j
    for (int64_t j = 0; j < nb; ++j) {
      const int64_t n = n0 + j;
      double sy[kDirectRows] = {}, sd[kDirectRows] = {}, sm[kDirectRows] = {};
      for (int64_t gi = 0; gi < G; ++gi) {
        double exact[16], diff[16], abs_rounded[16];  // the group's 16 possible weights
        const size_t sz = static_cast<size_t>(gi * N + n);
        for (int q = 0; q < 16; ++q) {
          exact[q] = weight(p.format, q, u.scale[sz], u.zero[sz]);
          const double rounded = round_to(p.dtype, exact[q]);
          diff[q] = rounded - exact[q];
          abs_rounded[q] = std::fabs(rounded);
        }
        const uint8_t* qn = u.q.data() + n * K;
        for (int64_t k = gi * g; k < std::min(K, gi * g + g); ++k) {
          const int q = qn[k];
          if (direct) {
            for (int64_t i = 0; i < M; ++i) {
              sy[i] += x(i, k) * exact[q];
              sd[i] += x(i, k) * diff[q];
              sm[i] += ax(i, k) * abs_rounded[q];
            }
          } else {
            w(k, j) = exact[q];
            d(k, j) = diff[q];
            a(k, j) = abs_rounded[q];
          }
        }
      }
      for (int64_t i = 0; direct && i < M; ++i) {
        y(i, n) = sy[i];
        delta(i, n) = sd[i];
        mag(i, n) = sm[i];
      }
    }
    if (direct) continue;
    // Columns n0.. of the outputs at the CPU's best ISA level (refimpl/gemm.hpp): a column-major
    // [K, nb] block is its transpose stored row-major.
    const auto product = [&](const RowMajor& lhs, const ColMajor& block, RowMajor& out) {
      ref::gemm<double>(M, nb, K, {lhs.data(), K}, {block.data(), K, true}, out.data() + n0, N);
    };
    product(x, w, y);
    product(x, d, delta);
    product(ax, a, mag);
  }

  const double coef = gamma(K, std::ldexp(1.0, -23)) + 4 * gamma(K, std::ldexp(1.0, -53));
  const double underflow = static_cast<double>(K) * std::ldexp(1.0, -149);
  References r;
  auto& want = r.exact["y"];
  auto& bound = r.bound["y"];
  want.resize(static_cast<size_t>(M * N));
  bound.resize(want.size());
#pragma omp parallel for schedule(static) if (M * N > (1 << 14))
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      const size_t at = static_cast<size_t>(i * N + j);
      // Unrounded: the bounded metric allows half an output spacing around it (and decides,
      // beyond the output's range, whether the largest finite value or inf is right).
      want[at] = y(i, j);
      bound[at] = std::fabs(delta(i, j)) + coef * mag(i, j) + underflow;
    }
  return r;
}

}  // namespace opcts::int4_mm
