// The per-element bounds of the SDPA references (References::bound, refimpl only): what a
// correct flash kernel's accumulation may err by where the same-precision reference's own
// error says little — its roundings to the dtype where a row holds few of them (a near one-hot
// row, a row with two keys) and its fp32 arithmetic where the reference is exact (a row with one
// key, an exact 0). judge/compare.hpp bounds each element by the larger of this and factor ×
// the reference's largest error over the element's tile, plus one output rounding.
//
// Modelled roundings: a kernel rounds each P (forward and backward) and each dS to the dtype
// once, at a grid position of its own (P relative to its running max); the error of one
// rounding of x is uniform on [-b, b] with b = u_in·|x| (u_in the dtype's unit roundoff), or
// half the smallest subnormal below the normal range, and 0 for x = 0 and x = 1 (exp(0) in
// the row's max tile: exact in every kernel). A sum Σ_j c_j·X_j of independent such errors
// exceeds λ·√(Σ_j (c_j·b_j)²) with probability at most 2·exp(−3λ²/2) (Hoeffding's bound with
// the uniform's variance proxy b²/3: the uniform is strictly sub-Gaussian); λ = 4 gives 8e-11
// per element, and a single dominant rounding is bounded outright (|X| <= b <= λ·b).
//   O_id:  g_i·λ·(√(Σ_j (b(e_ij)·(1 + ε_ij)·v_jd)²) + √(Σ_j (ε_ij·e_ij·(v_jd − O_id))²)) / l_i
//          (e_ij = exp(s_ij − m_i), the P·V product's input; ε_ij a bound on its fp32 relative
//          error, below, independent across keys; O_id fp64's O). The second term is exact in
//          form: a kernel takes ẽ_ij = e_ij·(1 + ε_ij) into both P·V and the row sum l (every
//          flash kernel and the math path sum the fp32 e they multiply), so its O differs by
//          Σ_j P_ij·ε_ij·(v_j − O_i)/(1 + ε̄_i), ε̄_i = Σ_j P_ij·ε_ij: the softmax is invariant to a
//          shift of the row's scores, so an error common to them — the row max's own, a
//          truncating accumulator's bias shared by the row's large scores — moves nothing, and
//          a row held by one key (v_j ≈ O_i, large logits) is charged little for its score's
//          error, which is what such a row shows. g_i = 1/(1 − Σ_j P_ij·ε_ij) bounds the
//          1/(1 + ε̄_i) and the l in the first term's denominator; √(x + y)² <= √x² + √y²
//          (Minkowski) joins the two terms without assuming them independent.
//          A sink is a key with v = 0 that P·V never reads: its e_s = exp(sink − m_i) enters l
//          only, so its fp32 error ε_s moves O by −P_s·ε_s·O_i, the second term's form with
//          v_s = 0 (ε_s: expm1 of u·(|sink| + |sink − m| + 4): the log2(e) product, the
//          subtraction, exp's 2 ulp and the product, m the keys' max, from which a kernel that
//          adds the sink after its last tile subtracts it (FlashAttention 4's epilogue), or the
//          row max with the sink, whichever is further); l then has n_i + 1 terms.
//   dV_jd: λ·√(Σ_{h,i} (b(P_ij)·dO_id)²);  dQ_id: λ·scale·√(Σ_j (b(dS_ij)·k_jd)²);
//   dK_jd: λ·scale·√(Σ_{h,i} (b(dS_ij)·q_id)²).
//   FP8 (forward): the same terms over the inputs' values (codes times descales, exact in fp32:
//   sdpa.hpp's fp8_descale), with P's rounding at the format P takes into P·V (Problem::p_dtype):
//   e4m3fn under fp8 qkv, u = 2^-4 and, below its smallest normal 2^-6, half its subnormal
//   spacing 2^-10 (a P under 2^-10 may round to 0: b = |P| then, within 2^-10) — the largest
//   term, 16× bf16's per P; an fp8 KV cache's P stays in the dtype. The descales add fp32
//   roundings only: two of each score (folded into the softmax scale) and one of O (v's descale
//   on the result), score_extra_roundings and normalisation_roundings (detail.hpp). A bound that
//   takes P at bf16's unit under fp8 qkv fails host.flash (SdpaFp8 tests): P's rounding is the term.
//
// fp32 floors, u = 2^-23 per fp32 operation (one ulp: round-to-nearest costs 2^-24, a
// truncating tensor-core accumulator up to 2^-23):
//   O_id:   (4 + λ·√n_i)·u·Σ_j p_ij·|v_jd|: the normalisation (a reciprocal and a product),
//           the rescale by exp(m_old − m_new) and the conversion, each at most one ulp of a
//           value no larger than Σ_j p_ij·|v_jd| (≥ |O_id|), and the row sum l's relative error
//           (n_i positive terms summed in fp32 with round-to-nearest: Σ_k δ_k·S_k with
//           |S_k| <= l, so λ·√n_i·u by the bound above), common to the row.
//   ε_ij, e_ij's relative error in fp32: expm1 (<= x + x²) of the sum x of the score's (D + 4)·u·scale·Σ_d |q_id·k_jd|
//           ((D + 6) under fp8)
//           (see families/sdpa/lse_floor.hpp), the subtraction s − m (u·|s_ij − m_i|, the
//           pipeline's own s − m) and 4u for exp (≤ 2 ulp) and the product by it; with ALiBi
//           2u·|bias_ij| more (the product slope·distance and the addition, each at most one ulp
//           of a value no larger than |bias_ij| + scale·Σ_d |q_id·k_jd|, whose second part the
//           score's term already counts).
//   lse_i:  its floor is its whole bound (families/sdpa/lse_floor.hpp); P's error below takes
//           the per-key one, which holds for any impl.
//   E_ij, dS_ij's fp32 cancellation (dQ and dK are exactly 0 in a row with one key: dP = D):
//           dP_ij − D_i takes two Dv-long fp32 dot products and a subtraction:
//           P_ij·|dcap_ij|·(Dv + 2)·u·(Σ_d |dO_id||v_jd| + Σ_d |dO_id||O_id|) (γ_Dv each,
//           Higham §3.1).
//   ε_ij, P_ij's relative error in fp32: the recomputed score's (D + 4)·u·scale·Σ_d|q_id k_jd|,
//           lse_i's floor, and 4u for exp and the products; it moves dS_ij and P_ij's
//           contributions by ε_ij times themselves.
//   D's rounding: a kernel's D_i reads its own stored O, which may round each element to the
//           other neighbour of the reference's, one spacing <= 2·u_out·|O_id| away, unless it
//           is exact in the dtype (one key: O = v_j), which a correct kernel stores exactly:
//           |ΔD_i| <= B_i = 2·u_out·Σ_d |dO_id||O_id| over the inexact O_id, moving dS_ij by
//           P_ij·dcap_ij·ΔD_i: dQ_i along the signed Σ_j P_ij·dcap_ij·k_j (small where P is
//           spread, |k_argmax| where it is one-hot), dK_j by Σ_i P_ij·|dcap_ij|·B_i·|q_i|.
//   dQ_id = scale·(Σ_j F_ij·|k_jd| + B_i·|Σ_j P_ij·dcap_ij·k_jd|),
//   dK_jd = scale·Σ_{h,i} (F_ij + B_i·P_ij·|dcap_ij|)·|q_id| with F = E + (4u + ε)·|dS|
//           (first order: an error of dS_ij reaches dQ and dK through one product each),
//   dV_jd = Σ_{h,i} (4u + ε_ij)·P_ij·|dO_id|.
//   dbias (the additive mask's gradient, dS′ = P ⊙ (dP − D) before the softcap's derivative):
//           per term the fp32 floor F′_ij = P_ij·(Dv + 2)·u·(Σ_d |dO_id||v_jd| + Σ_d |dO_id||O_id|)
//           + (4u + ε_ij)·|dS′_ij| (F's fp32 parts without dcap), summed outright over the terms
//           an element adds (batch entries, heads, queries where the mask broadcasts); D's error
//           −P_ij·ΔD_i, independent across the rows an element sums, in a root: Λ·√(Σ P_ij²·
//           var(ΔD_i)) (Azuma–Hoeffding at the lse floor's Λ; var as sink_gradient_parts takes it:
//           O's roundings and its forward P roundings; outright, as dQ's B_i, it grew as n and hid
//           a sum accumulated in the dtype); an element of two terms or more adds λ·√(Σ b(dS′)²)
//           (a kernel may sum dS′ rounded to the dtype, as it feeds the MMAs) and its fp32 sum's
//           roundings (backward_reference.cpp's finish_dbias); "dbias@fp32_terms", for kernels
//           that declare unrounded fp32 terms, leaves the roundings of the terms out.
#pragma once

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>
#include <vector>

#include "core/family.hpp"
#include "families/sdpa/detail.hpp"
#include "families/sdpa/lse_floor.hpp"
#include "numerics/dtype.hpp"

namespace opcts::sdpa::detail {

/// The accumulation an impl declares for O (cases/tolerances.yaml) to be judged under the
/// model this file derives, with its error-energy check: "O@flash_fp32" holds the same
/// per-element bound as "O" and the energy check (judge/error_energy.hpp) beside it. An impl
/// that declares nothing is judged per element only: its arithmetic may round more (PyTorch's
/// math backend rounds S and the softmax to the dtype), which the ref_relative factor absorbs.
inline constexpr const char* kFlashModel = "flash_fp32";
/// The same pipeline with its fp32 sums rounded to nearest (FMA chains and CPU float, not a
/// tensor core's accumulator): "O@flash_fp32_rn", the same per-element bound, an energy check
/// whose fp32 sums are mean-zero sources instead of worst cases (the comment before o_bound).
inline constexpr const char* kFlashModelRn = "flash_fp32_rn";

/// The accumulation a dbias kernel declares when it sums dS′ in fp32 without rounding a term to
/// the dtype (host.flash, cuda.flash): "dbias@fp32_terms" drops the terms' modelled roundings,
/// which a kernel that sums dS′ rounded (PyTorch's grad_bias, summed by autograd) needs.
inline constexpr const char* kDbiasFp32Terms = "fp32_terms";

/// λ of the modelled roundings (the file comment).
constexpr double kRoundingSigmas = 4;

/// The O model of an fp8 graph that rounds the normalised P (cuDNN's: frontend
/// node/scaled_dot_product_flash_attention.h, softmax → AMAX → MUL scale_s → cast to Q's fp8
/// type → matmul_fp8 with descale_s): "O@fp8_p_normalised", under fp8 qkv only. P_ij = e_ij/l_i
/// times scale_s is rounded to the inputs' fp8 format: relative u as before, but the subnormal
/// floor, half its spacing in code units, is least/scale_s in P's units and least·l_i/scale_s in
/// e's, and e = 1 is no longer exact (1/l_i·scale_s need not be a code). A kernel that rounds
/// e·scale_s relative to its running max instead has the floor least/scale_s <= least·l_i/scale_s:
/// the model holds for both. The division e/l (one rounding per P, at most u·Σ_j P_ij·|v_jd| on O,
/// the normalisation's floor) and the products by descale_s (2^-8: exact), descale_v and scale_o
/// take no more fp32 roundings than the running-max pipeline's normalisation does. Like every O
/// model here it takes Q·Kᵀ and P·V summed in fp32; an fp8 MMA's adder keeps fewer bits (about
/// 14 on sm90), which lse's floor does not hold (cases/manifests/sm90.yaml) and O's bound, whose
/// P rounding at 2^-4 dominates, has held on the H200 (at most 0.60; docs/status/sm90.md (p)).
/// scale_s is sdpa.hpp's kFp8ScaleS (2^8, the cuda.cudnn adapter's).
inline constexpr const char* kFp8PNormalised = "fp8_p_normalised";

/// b of one rounding of x to the dtype, and b² (the file comment): 0 for x = 0 and x = 1.
template <typename T>
struct Rounding {
  T unit, least;  // u_in, and half the smallest subnormal spacing
  explicit Rounding(DType t)
      : unit(static_cast<T>(dtype_info(t).epsilon / 2)),
        least(static_cast<T>(dtype_info(t).min_normal * dtype_info(t).epsilon / 2)) {}
  T bound(T x) const {
    const T a = std::fabs(x);
    return a == T(0) || a == T(1) ? T(0) : std::max(unit * a, least);
  }
  /// b of x's rounding where x is taken into the format as x·c (kFp8PNormalised: c =
  /// scale_s/l_i): the floor is least/c and 1 is not exact.
  T bound_scaled(T x, T c) const {
    const T a = std::fabs(x);
    return a == T(0) ? T(0) : std::max(unit * a, least / c);
  }
  T sq(T x) const {
    const T b = bound(x);
    return b * b;
  }
};

/// O's error-energy terms (judge/error_energy.hpp) summed over row blocks: the P and output
/// roundings, the scores' fp32 errors, and Σ w·f² of the parts bounded outright (the comment
/// before o_bound).
struct OEnergy {
  ErrorEnergy::Source rounding, scores;
  ErrorEnergy::Source sums;  // flash_fp32_rn: the fp32 sums' roundings, mean-zero
  double fixed_sq = 0;
  double fixed_rn_sq = 0;  // flash_fp32_rn: what stays outright
  void add(const OEnergy& o) {
    for (auto [a, b] : {std::pair{&rounding, &o.rounding}, std::pair{&scores, &o.scores}, std::pair{&sums, &o.sums}}) {
      a->trace += b->trace;
      a->trace_sq += b->trace_sq;
      a->spectral = std::max(a->spectral, b->spectral);
    }
    fixed_sq += o.fixed_sq;
    fixed_rn_sq += o.fixed_rn_sq;
  }
  ErrorEnergy energy(std::vector<double> weight) const {
    return {{rounding, scores}, std::sqrt(fixed_sq), std::move(weight)};
  }
  ErrorEnergy energy_rn(std::vector<double> weight) const {
    return {{rounding, scores, sums}, std::sqrt(fixed_rn_sq), std::move(weight)};
  }
};

/// Whether energy_row forms each row's Dv × Dv matrices (keys·Dv² products each): for outputs
/// of at most 4096 rows and 2^31 such products; above, the trace bounds ‖C‖ <= tr C and
/// tr C² <= (tr C)², which lose little where an output has many rows (the limit's excess over
/// tr C shrinks as 1/√rows: ≈ 11% at 4096) and keep the reference's cost (forming them took
/// 0.34 s more for 8,192 rows of 128 keys and Dv = 64 on two cores, 3× the case's time).
inline bool o_energy_exact(const Problem& p) {
  const double rows = static_cast<double>(p.batch) * p.heads_q * p.seq_q;
  return rows <= 4096 && rows * p.seq_k * p.head_dim_v * p.head_dim_v <= 0x1p31;
}

/// One row's quadratic form of a source, C = w·YᵀY + diag(h) (Y keys × Dv, h per element;
/// `trace` its trace, known): tr C, and upper bounds of tr C² and ‖C‖ — formed, tr C² itself
/// and for ‖C‖ the smaller of its Frobenius norm and its largest absolute row sum (no
/// eigenvalues: a row's weight 1/‖C‖ needs only an upper bound); else the trace bounds
/// ‖C‖ <= tr C and tr C² <= (tr C)².
struct RowForm {
  double trace = 0, trace_sq = 0, spectral = 0;
};

template <typename T>
RowForm energy_row(double trace, bool exact, const RowMajor<T>& y, double w, const Eigen::ArrayXd* h) {
  if (!exact) return {trace, trace * trace, trace};
  Eigen::MatrixXd c = (y.transpose() * y).template cast<double>() * w;
  if (h) c.diagonal() += h->matrix();
  return {trace, c.squaredNorm(), std::min(c.norm(), c.cwiseAbs().rowwise().sum().maxCoeff())};
}

/// Adds a row's form, weighted by α (every element of the row weighs α), to a source's sums.
inline void add_row(ErrorEnergy::Source& s, const RowForm& f, double alpha) {
  s.trace += alpha * f.trace;
  s.trace_sq += alpha * alpha * f.trace_sq;
  s.spectral = std::max(s.spectral, alpha * f.spectral);
}

/// The bound of O for one row block of a head from the fp32 pipeline's forward `f`, the
/// block's slices of q, k and v and its rows of the fp64 O (`o`, the centre of the score
/// errors' term: the file comment), before the storage-order scatter; with `energy`, adds the
/// block's error-energy terms to it and sets `weight` (rows × Dv) to each element's weight.
//
// The error energy of a row (judge/error_energy.hpp) takes the same modelled errors as
// sources of a quadratic form instead of bounding each element at λ:
//   roundings: C_i = (g_i/l_i)²·Σ_j (b(e_ij)·(1 + ε_ij))²/3 · v_j·v_jᵀ + diag(h_id²/3), P's
//     roundings (uniform on [−b, b]: variance proxy b²/3, the uniform being strictly
//     sub-Gaussian) and O's own rounding to the dtype (half a spacing h_id at |O_id| plus its
//     bound), independent of each other and across rows;
//   scores: (g_i/l_i)²·Σ_j (ε_ij·e_ij)² · (v_j − O_i)(v_j − O_i)ᵀ, each e's fp32 error bounded
//     by ε_ij·e_ij (Hoeffding's proxy a² for an error bounded by a);
//   outright: f_id = ((4 + 3·n_i)·u·Σ_j p_ij·|v_jd| + √(Σ_j a_ij²)·u_T·|O_id|·g_i) / l_i — the
//     normalisation's roundings, the row sum's and the P·V sum's fp32 errors at their worst
//     (n_i additions each, in any order and any rounding mode: a truncating tensor-core
//     accumulator is not mean-zero), a rescale of the accumulator per key at most, and O's
//     own rounding to T. At their worst these grow as n_i while the roundings' root grows as
//     √n_i: past a few hundred keys in fp16 (a thousand in bf16) they dominate the limit and the
//     check sees little more than the per-element bounds do.
//   flash_fp32_rn, for kernels whose fp32 sums round to nearest (FMA chains, CPU float): the
//     sums' roundings become sources, independent and mean-zero as the lse floor takes fp32
//     round-to-nearest errors (lse_floor.hpp), each bounded by h = u/2 of its partial (Hoeffding's
//     proxy a², not the uniform's a²/3): P·V, 2·n_i roundings per element (the sum and a product
//     an FMA would not round), each partial at most pv_id = Σ_j e_ij·|v_jd|, so a diagonal
//     w·2n_i·h²·pv_id²; the row sum, n_i roundings of partials at most l_i, moving O by −O·δl/l,
//     rank one: grow²·n_i·h²·O_i·O_iᵀ. Outright: the normalisation's kNormalisationRoundings,
//     the rescales of the accumulator (2.5u of it each: the exponential's 2 ulp and the product)
//     at the records of the running max — at most R(n_i), the records' Chernoff bound at
//     P = 2e^-24 (running_max_records) — and O's rounding inside the scores' term, as above.
// Each row weighs α_i = 1/N_i, N_i >= ‖C_i‖ the upper bound energy_row gives for its roundings'
// form (0 for a row without keys): a row held by one or two keys has a form of rank one whose
// whole trace a single direction carries, and unweighted it would set ‖C‖ for the output, the
// limit's 2·‖C‖·t; weighted, each row counts about its effective dimensions tr C_i/N_i and
// ‖C‖ <= 1. The weights depend on the inputs only.
// An fp8 output (Problem::fp8_out) stores e4m3fn(O·o_scale): O's own rounding is then e4m3fn's
// half spacing at |O_id|·o_scale, given here in O's units (÷ o_scale) like every other term; the
// reference scales the whole form by o_scale afterwards (reference.cpp).
// p_scale > 0: P is rounded as kFp8PNormalised says, normalised and times p_scale.
template <typename T>
RowMajor<T> o_bound(const Problem& p, const ForwardHead<T>& f, const RowMajor<T>& qh, const RowMajor<T>& kh,
                    const RowMajor<T>& vh, const RowMajor<T>& o, DType p_round, OEnergy* energy = nullptr,
                    RowMajor<T>* weight = nullptr, double o_scale = 1, double p_scale = 0) {
  const T u = static_cast<T>(kAccUnit), scale = static_cast<T>(p.effective_scale());
  const T lambda = static_cast<T>(kRoundingSigmas);
  const T score_ops = static_cast<T>(p.head_dim) + static_cast<T>(score_extra_roundings(p));
  const T n_norm = static_cast<T>(normalisation_roundings(p));
  const RowMajor<T> qk = mul<T>(qh.cwiseAbs(), false, kh.cwiseAbs(), true);  // Σ_d |q_id||k_jd|
  const Rounding<T> rounding(p_round);
  const int64_t rows = f.e.rows(), cols = f.e.cols(), dv = vh.cols();
  RowMajor<T> b2(rows, cols), a(rows, cols);  // (b(e_ij)·(1 + ε_ij))², and ε_ij·e_ij
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) {
      const T e = f.e(i, j);
      // The error x of s − m moves e by a factor within exp(±x): |ε| <= expm1(x) <= x + x² for
      // x <= 1 (the series), without an expm1 per element.
      const T x = e > 0 ? u * (score_ops * scale * qk(i, j) - f.shift(i, j) + 4 + 2 * alibi_bias(f, i, j)) : T(0);
      const T eps = x <= 1 ? x + x * x : std::numeric_limits<T>::infinity();
      const T b =
          (p_scale > 0 ? rounding.bound_scaled(e, static_cast<T>(p_scale) / f.l[i]) : rounding.bound(e)) * (1 + eps);
      b2(i, j) = b * b;
      a(i, j) = eps * e;
    }
  const RowMajor<T> p2 = mul<T>(b2, false, vh.cwiseAbs2(), false);  // Σ_j (b(e_ij)·(1 + ε_ij))²·v_jd²
  RowMajor<T> bound = p2.cwiseSqrt() * lambda;
  const RowMajor<T> pv = mul<T>(f.e, false, vh.cwiseAbs(), false);
  const bool exact = energy && o_energy_exact(p);
  RowMajor<T> y;  // a row's keys × Dv factor of an energy source
  if (weight) weight->setZero(rows, dv);
  Eigen::Array<T, 1, Eigen::Dynamic> centred(dv);
  for (int64_t i = 0; i < rows; ++i) {
    if (f.keys[i] == 0) {  // O = 0 exactly (a row of the sink alone too): nothing to round
      bound.row(i).setZero();
      continue;
    }
    // Σ_j (ε_ij·e_ij)²·(v_jd − O_id)², directly: expanded into products it would cancel where
    // one key holds the row (v_j ≈ O), which is where this term is small.
    centred.setZero();
    T a_sum = 0, a_sq = 0;
    for (int64_t j = 0; j < cols; ++j) {
      const T aij = a(i, j);
      if (aij == 0) continue;
      centred += (aij * aij) * (vh.row(j) - o.row(i)).array().square();
      a_sum += aij;
      a_sq += aij * aij;
    }
    T a_sink = 0;  // ε_s·e_s, the sink's (the comment above)
    if (f.sink_e[i] > 0) {
      T top = -std::numeric_limits<T>::infinity();  // m_keys − m_i, the keys' max in the row max's frame
      for (int64_t j = 0; j < cols; ++j)
        if (f.e(i, j) > 0) top = std::max(top, f.shift(i, j));
      const T m = f.lse[i] - std::log(f.l[i]), to_keys = f.sink - m - top;
      const T x = u * (std::fabs(f.sink) + std::max(std::fabs(f.sink - m), std::fabs(to_keys)) + 4);
      a_sink = (x <= 1 ? x + x * x : std::numeric_limits<T>::infinity()) * f.sink_e[i];
      centred += (a_sink * a_sink) * o.row(i).array().square();
      a_sum += a_sink;
      a_sq += a_sink * a_sink;
    }
    // o is fp64's O rounded to T: its own rounding moves each |v_jd − O_id| by at most
    // u_T·|O_id|, which √(Σ_j a_ij²) carries.
    const T u_t = std::numeric_limits<T>::epsilon() / 2;
    const RowMajor<T> scores_term =
        ((centred.sqrt() + std::sqrt(a_sq) * u_t * o.row(i).array().abs()) * lambda).matrix();
    const T mean_eps = a_sum / f.l[i];  // Ē_i = Σ_j P_ij·ε_ij >= |ε̄_i|
    const T grow = mean_eps < 1 ? 1 / (1 - mean_eps) : std::numeric_limits<T>::infinity();
    const T l_err = lambda * std::sqrt(static_cast<T>(f.keys[i] + (f.sink_e[i] > 0 ? 1 : 0))) * u;
    bound.row(i) = ((bound.row(i) + scores_term) * grow + (n_norm * u + l_err) * pv.row(i)) / f.l[i];
    // A row whose g is unbounded has an infinite bound: left to it (weight 0).
    if (!energy || !std::isfinite(grow)) continue;
    const double w = static_cast<double>(grow) * grow / (static_cast<double>(f.l[i]) * f.l[i]);
    Eigen::ArrayXd h(dv);
    for (int64_t d = 0; d < dv; ++d) {
      const double at = (std::fabs(static_cast<double>(o(i, d))) + bound(i, d)) * o_scale;
      const double half = spacing_at(p.o_dtype(), at) / (2 * o_scale);
      h[d] = half * half / 3;
    }
    const double n_sum = static_cast<double>(n_norm) + 3.0 * f.keys[i];
    const double n_rn = static_cast<double>(n_norm) + 2.5 * running_max_records(f.keys[i]);
    const double hh = static_cast<double>(u) * static_cast<double>(u) / 4, keys = static_cast<double>(f.keys[i]);
    double fixed_sq = 0, fixed_rn_sq = 0, pv_sq = 0, pv_max = 0, o_sq = 0;
    for (int64_t d = 0; d < dv; ++d) {
      const double o_round = std::sqrt(a_sq) * u_t * std::fabs(o(i, d)) * grow;
      const double fd = (n_sum * u * pv(i, d) + o_round) / f.l[i];
      const double fd_rn = (n_rn * u * pv(i, d) + o_round) / f.l[i];
      fixed_sq += fd * fd;
      fixed_rn_sq += fd_rn * fd_rn;
      const double x = static_cast<double>(pv(i, d));
      pv_sq += x * x;
      pv_max = std::max(pv_max, x * x);
      o_sq += static_cast<double>(o(i, d)) * o(i, d);
    }
    // flash_fp32_rn's sums: a diagonal plus a rank-one form; tr C² <= ‖C‖·tr C.
    const double g2 = static_cast<double>(grow) * grow;
    const double sums_trace = w * 2 * keys * hh * pv_sq + g2 * keys * hh * o_sq;
    const double sums_norm = w * 2 * keys * hh * pv_max + g2 * keys * hh * o_sq;
    if (exact) y = (b2.row(i).transpose().cwiseSqrt().asDiagonal() * vh).eval();
    const RowForm rounding = energy_row(w / 3 * p2.row(i).template cast<double>().sum() + h.sum(), exact, y, w / 3, &h);
    if (exact) {
      y.resize(cols + 1, dv);  // the keys' rows, then the sink's (v = 0)
      y.topRows(cols) = a.row(i).transpose().asDiagonal() * (vh.rowwise() - o.row(i));
      y.row(cols) = -a_sink * o.row(i);
    }
    const RowForm scores = energy_row(w * centred.template cast<double>().sum(), exact, y, w, nullptr);
    const double alpha = rounding.spectral > 0 ? 1 / rounding.spectral : 0;
    add_row(energy->rounding, rounding, alpha);
    add_row(energy->scores, scores, alpha);
    add_row(energy->sums, RowForm{sums_trace, sums_norm * sums_trace, sums_norm}, alpha);
    energy->fixed_sq += alpha * fixed_sq;
    energy->fixed_rn_sq += alpha * fixed_rn_sq;
    if (weight) weight->row(i).setConstant(static_cast<T>(alpha));
  }
  return bound;
}

/// The gradients' bounds of one (batch, KV head), accumulated over the query heads of its
/// group from the fp32 pipeline's backward (the file comment).
template <typename T>
class GradientBounds {
 public:
  GradientBounds(const Problem& p, int64_t sk)
      : p_(p),
        dk_(RowMajor<T>::Zero(sk, p.head_dim)),
        dk_sq_(RowMajor<T>::Zero(sk, p.head_dim)),
        dv_(RowMajor<T>::Zero(sk, p.head_dim_v)),
        dv_sq_(RowMajor<T>::Zero(sk, p.head_dim_v)) {}

  /// Adds row block `blk` of a query head's terms (g, from the block's rows of q and dO and its
  /// keys' rows of k and v) to dK's and dV's rows of its keys and returns its rows' dQ bound.
  /// With `dbias_floor` and `dbias_var` ([rows, keys]), also dS′'s fp32 floor per element (F's
  /// fp32 parts without the softcap's derivative: the bias enters after it) and the variance proxy
  /// of D's error through it, P_ij²·var(ΔD_i) (the file comment's dbias).
  RowMajor<T> add_head(const RowBlock& blk, const BackwardHead<T>& g, const RowMajor<T>& qh, const RowMajor<T>& kh,
                       const RowMajor<T>& vh, const RowMajor<T>& doh, RowMajor<T>* dbias_floor = nullptr,
                       RowMajor<T>* dbias_var = nullptr) {
    const T u = static_cast<T>(kAccUnit), u_out = static_cast<T>(dtype_info(p_.dtype).epsilon / 2);
    const T n_round = static_cast<T>(kNormalisationRoundings), lambda = static_cast<T>(kRoundingSigmas);
    const T scale = static_cast<T>(p_.effective_scale());
    const int64_t sq = g.p.rows(), sk = g.p.cols(), dv = vh.cols();
    const RowMajor<T> ado = doh.cwiseAbs(), aq = qh.cwiseAbs(), ak = kh.cwiseAbs();
    const std::vector<LseFloor> lf = lse_floors(p_, g.f, qh, kh);
    const RowMajor<T> qk = mul(aq, false, ak, true);          // Σ_d |q_id||k_jd|
    RowMajor<T> f = mul<T>(ado, false, vh.cwiseAbs(), true);  // Σ_d |dO_id||v_jd|, then F
    RowMajor<T> pd(sq, sk), pe(sq, sk);                       // P ⊙ dcap; P ⊙ (4u + ε)
    std::vector<T> od(static_cast<size_t>(sq));               // B_i
    if (dbias_floor) dbias_floor->resize(sq, sk), dbias_var->resize(sq, sk);
    for (int64_t i = 0; i < sq; ++i) {
      const T o_terms = ado.row(i).dot(g.o.row(i).cwiseAbs());
      T inexact = 0;
      for (int64_t d = 0; d < dv; ++d)
        if (g.o(i, d) != g.f.o(i, d)) inexact += ado(i, d) * std::fabs(g.o(i, d));
      od[i] = 2 * u_out * inexact;
      for (int64_t j = 0; j < sk; ++j) {
        const T pij = g.p(i, j);
        const T dcap = p_.softcap > 0 ? g.f.dcap(i, j) : T(1);
        const T eps =
            u * ((static_cast<T>(p_.head_dim) + static_cast<T>(score_extra_roundings(p_))) * scale * qk(i, j) + 4 +
                 2 * alibi_bias(g.f, i, j)) +
            static_cast<T>(lf[i].under(1));
        pd(i, j) = pij * dcap;
        pe(i, j) = pij * (n_round * u + eps);
        const T cancel = pij * (static_cast<T>(dv) + 2) * u * (f(i, j) + o_terms);
        f(i, j) = std::fabs(dcap) * cancel + (n_round * u + eps) * std::fabs(g.ds(i, j));
        if (dbias_floor) (*dbias_floor)(i, j) = cancel + (n_round * u + eps) * std::fabs(g.bias_grad()(i, j));
      }
      if (dbias_floor) {
        const T var = d_error_var(g, i, doh);
        for (int64_t j = 0; j < sk; ++j) (*dbias_var)(i, j) = g.p(i, j) * g.p(i, j) * var;
      }
    }
    const Rounding<T> rounding(p_.dtype);
    const auto rsq = [&](T x) { return rounding.sq(x); };
    const RowMajor<T> ds2 = g.ds.unaryExpr(rsq), p2 = g.p.unaryExpr(rsq);
    RowMajor<T> dq = mul(f, false, ak, false) + lambda * mul<T>(ds2, false, kh.cwiseAbs2(), false).cwiseSqrt();
    const RowMajor<T> pdk = mul(pd, false, kh, false);  // Σ_j P_ij·dcap_ij·k_jd, signed: D's error moves dQ_i along it
    for (int64_t i = 0; i < sq; ++i) {
      dq.row(i) += od[i] * pdk.row(i).cwiseAbs();
      f.row(i) += od[i] * pd.row(i).cwiseAbs();
    }
    add_mul_rows(dk_, blk.k0, f, true, aq, false);
    add_mul_rows<T>(dk_sq_, blk.k0, ds2, true, qh.cwiseAbs2(), false);
    add_mul_rows(dv_, blk.k0, pe, true, ado, false);
    add_mul_rows<T>(dv_sq_, blk.k0, p2, true, doh.cwiseAbs2(), false);
    return dq * scale;
  }

  /// var(ΔD_i), the variance proxy of a kernel's D_i = rowsum(dO_i ⊙ O_i) over its own stored O
  /// against fp64's (sink_gradient_parts' model): O's rounding to the dtype, uniform on ±u_out·|O_id|
  /// per element, and P's roundings in the forward, Σ_j δe_ij·dP_ij / l_i, each uniform on
  /// ±b(e_ij): Σ b²/3 over both.
  T d_error_var(const BackwardHead<T>& g, int64_t i, const RowMajor<T>& doh) const {
    const T u_out = static_cast<T>(dtype_info(p_.dtype).epsilon / 2);
    const Rounding<T> rounding(p_.dtype);
    T rv = 0;
    for (int64_t d = 0; d < doh.cols(); ++d) {
      const T x = u_out * doh(i, d) * g.o(i, d);
      rv += x * x;
    }
    if (g.f.l[i] > 0)
      for (int64_t j = 0; j < g.p.cols(); ++j) {
        const T x = rounding.bound(g.f.e(i, j)) * g.dp(i, j) / g.f.l[i];
        rv += x * x;
      }
    return rv / 3;
  }

  RowMajor<T> dk() const {
    return (dk_ + static_cast<T>(kRoundingSigmas) * dk_sq_.cwiseSqrt()) * static_cast<T>(p_.effective_scale());
  }
  RowMajor<T> dv() const { return dv_ + static_cast<T>(kRoundingSigmas) * dv_sq_.cwiseSqrt(); }

 private:
  const Problem& p_;
  RowMajor<T> dk_, dk_sq_, dv_, dv_sq_;  // floors and sums of squared modelled roundings
};

/// The sinks' gradient's bound parts of one head (SinkGradients, sdpa.hpp), from the fp32
/// pipeline's backward of its row blocks. dsink_h = −Σ_i t_i with t_i = P_s,i·D_i, P_s,i =
/// exp(sink − lse_i): a kernel's t_i differs from fp64's through
///   - its D_i, which reads its own stored O: O's rounding to the dtype, uniform on [−b, b] with
///     b = u_out·|O_id| (half a spacing) per element, and O's forward error from P's roundings,
///     Σ_j δe_ij·v_j / l_i, which moves D_i by Σ_j δe_ij·dP_ij / l_i (dP_ij = dO_i·v_j), δe_ij
///     uniform on [−b(e_ij), b(e_ij)] — the file comment's modelled roundings, independent across
///     rows, keys and elements, each of variance proxy b²/3 (strictly sub-Gaussian). A kernel's D
///     over its own O is one such sample; charging each element a whole spacing outright instead
///     (the dQ bound's B_i) made the bound 14% of dsinks on a bf16 row block of 26 rows, 35× its
///     error;
///   - fp32 errors of each row, mean-zero and independent across rows, each bounded (proxy a²): the
///     scores' errors through O (a = Σ_j P_ij·ε_ij·|dP_ij − D_i|, ε_ij as o_bound's: the shift
///     invariance of the first order, taken per key in the root as o_bound takes them), D's dot
///     product (Dv roundings of partials up to Σ_d |dO_id·O_id|, u/2 each) and O's normalisation
///     (kNormalisationRoundings·u of it). Summed outright over the rows they grew as n, and made
///     the bound miss a dsinks summed in fp16 (a 16-bit buffer: 29 of 36 problems passed);
///   - all of the above at Λ·√(Σ proxies) (Azuma–Hoeffding, Λ = √48 of the lse floor: P <= 2e^-24);
///   - outright: P_s's relative error — lse_i's floor, the subtraction sink − lse_i, exp's 2 ulp
///     and the products, u·(|sink| + |sink − lse_i| + 4) — counted twice (P_s of the sum, and e_s's
///     share of O's l: −P_s·ε_s·D_i); lse's floor holds errors common to the rows (its drift);
///   - the sum over the rows (and batch entries, in any order: atomics), each fp32 addition
///     rounding to nearest by at most u/2 of a partial no larger than Σ_i |t_i|, mean-zero:
///     Λ·(u/2)·√n·Σ_i |t_i| (Azuma–Hoeffding, Λ of the lse floor; SinkGradients::finish adds it).
template <typename T>
void sink_gradient_parts(const Problem& p, const BackwardHead<T>& g, const RowMajor<T>& qh, const RowMajor<T>& kh,
                         const RowMajor<T>& doh, double& lowp, double& var, double& outright, double& terms,
                         double& abs_sum) {
  const double u = kAccUnit, u_out = dtype_info(p.dtype).epsilon / 2, scale = p.effective_scale();
  const RowMajor<T> qk = mul<T>(qh.cwiseAbs(), false, kh.cwiseAbs(), true);  // Σ_d |q_id||k_jd|
  const std::vector<LseFloor> lf = lse_floors(p, g.f, qh, kh);
  const Rounding<T> rounding(p.dtype);
  const int64_t rows = g.p.rows(), cols = g.p.cols(), dv = doh.cols();
  for (int64_t i = 0; i < rows; ++i) {
    if (g.f.sink_e[i] == 0) continue;
    const double l = g.f.l[i], ps = g.f.sink_e[i] / l, d = g.d[i], lse = g.f.lse[i];
    const double t = ps * d;
    lowp -= t;
    terms += 1;
    abs_sum += std::fabs(t);
    double rv = 0, sv = 0;  // Σ b² of the modelled roundings (÷ 3 below); Σ a² of the fp32 errors
    for (int64_t j = 0; j < cols; ++j) {
      const double e = g.f.e(i, j);
      if (e == 0) continue;
      const double dp = g.dp(i, j), b = rounding.bound(static_cast<T>(e)) * dp / l;
      rv += b * b;
      const double x = u * ((static_cast<double>(p.head_dim) + score_extra_roundings(p)) * scale * qk(i, j) -
                            g.f.shift(i, j) + 4 + 2 * alibi_bias(g.f, i, j));
      const double a = e / l * (x <= 1 ? x + x * x : HUGE_VAL) * std::fabs(dp - d);
      sv += a * a;
    }
    double o_terms = 0;
    for (int64_t d2 = 0; d2 < dv; ++d2) {
      const double od = static_cast<double>(doh(i, d2)) * g.o(i, d2);
      o_terms += std::fabs(od);
      rv += (u_out * od) * (u_out * od);
    }
    const double dot = u / 2 * o_terms, norm = kNormalisationRoundings * u * o_terms;
    sv += static_cast<double>(dv) * dot * dot + norm * norm;
    var += ps * ps * (rv / 3 + sv);
    const double sink = g.f.sink;
    const double eps_s = lf[i].under(1) + u * (std::fabs(sink) + std::fabs(sink - lse) + 4);
    outright += ps * 2 * eps_s * std::fabs(d);
  }
}

}  // namespace opcts::sdpa::detail
