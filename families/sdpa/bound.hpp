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
//   dV_jd: λ·√(Σ_{h,i} (b(P_ij)·dO_id)²);  dQ_id: λ·scale·√(Σ_j (b(dS_ij)·k_jd)²);
//   dK_jd: λ·scale·√(Σ_{h,i} (b(dS_ij)·q_id)²).
//
// fp32 floors, u = 2^-23 per fp32 operation (one ulp: round-to-nearest costs 2^-24, a
// truncating tensor-core accumulator up to 2^-23):
//   O_id:   (4 + λ·√n_i)·u·Σ_j p_ij·|v_jd|: the normalisation (a reciprocal and a product),
//           the rescale by exp(m_old − m_new) and the conversion, each at most one ulp of a
//           value no larger than Σ_j p_ij·|v_jd| (≥ |O_id|), and the row sum l's relative error
//           (n_i positive terms summed in fp32 with round-to-nearest: Σ_k δ_k·S_k with
//           |S_k| <= l, so λ·√n_i·u by the bound above), common to the row.
//   ε_ij, e_ij's relative error in fp32: expm1 (<= x + x²) of the sum x of the score's (D + 4)·u·scale·Σ_d |q_id·k_jd|
//           (see families/sdpa/lse_floor.hpp), the subtraction s − m (u·|s_ij − m_i|, the
//           pipeline's own s − m) and 4u for exp (≤ 2 ulp) and the product by it.
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
#pragma once

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "families/sdpa/detail.hpp"
#include "families/sdpa/lse_floor.hpp"

namespace opcts::sdpa::detail {

/// λ of the modelled roundings (the file comment).
constexpr double kRoundingSigmas = 4;

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
  T sq(T x) const {
    const T b = bound(x);
    return b * b;
  }
};

/// The bound of O for one row block of a head from the fp32 pipeline's forward `f`, the
/// block's slices of q, k and v and its rows of the fp64 O (`o`, the centre of the score
/// errors' term: the file comment), before the storage-order scatter.
template <typename T>
RowMajor<T> o_bound(const Problem& p, const ForwardHead<T>& f, const RowMajor<T>& qh, const RowMajor<T>& kh,
                    const RowMajor<T>& vh, const RowMajor<T>& o) {
  const T u = static_cast<T>(kAccUnit), scale = static_cast<T>(p.effective_scale());
  const T lambda = static_cast<T>(kRoundingSigmas);
  const RowMajor<T> qk = mul<T>(qh.cwiseAbs(), false, kh.cwiseAbs(), true);  // Σ_d |q_id||k_jd|
  const Rounding<T> rounding(p.dtype);
  const int64_t rows = f.e.rows(), cols = f.e.cols(), dv = vh.cols();
  RowMajor<T> b2(rows, cols), a(rows, cols);  // (b(e_ij)·(1 + ε_ij))², and ε_ij·e_ij
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) {
      const T e = f.e(i, j);
      // The error x of s − m moves e by a factor within exp(±x): |ε| <= expm1(x) <= x + x² for
      // x <= 1 (the series), without an expm1 per element.
      const T x = e > 0 ? u * ((static_cast<T>(p.head_dim) + 4) * scale * qk(i, j) - f.shift(i, j) + 4) : T(0);
      const T eps = x <= 1 ? x + x * x : std::numeric_limits<T>::infinity();
      const T b = rounding.bound(e) * (1 + eps);
      b2(i, j) = b * b;
      a(i, j) = eps * e;
    }
  RowMajor<T> bound = mul<T>(b2, false, vh.cwiseAbs2(), false).cwiseSqrt() * lambda;
  const RowMajor<T> pv = mul<T>(f.e, false, vh.cwiseAbs(), false);
  Eigen::Array<T, 1, Eigen::Dynamic> centred(dv);
  for (int64_t i = 0; i < rows; ++i) {
    if (f.l[i] == 0) {
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
    // o is fp64's O rounded to T: its own rounding moves each |v_jd − O_id| by at most
    // u_T·|O_id|, which √(Σ_j a_ij²) carries.
    const T u_t = std::numeric_limits<T>::epsilon() / 2;
    const RowMajor<T> scores_term =
        ((centred.sqrt() + std::sqrt(a_sq) * u_t * o.row(i).array().abs()) * lambda).matrix();
    const T mean_eps = a_sum / f.l[i];  // Ē_i = Σ_j P_ij·ε_ij >= |ε̄_i|
    const T grow = mean_eps < 1 ? 1 / (1 - mean_eps) : std::numeric_limits<T>::infinity();
    const T l_err = lambda * std::sqrt(static_cast<T>(f.keys[i])) * u;
    bound.row(i) =
        ((bound.row(i) + scores_term) * grow + (static_cast<T>(kNormalisationRoundings) * u + l_err) * pv.row(i)) /
        f.l[i];
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
  RowMajor<T> add_head(const RowBlock& blk, const BackwardHead<T>& g, const RowMajor<T>& qh, const RowMajor<T>& kh,
                       const RowMajor<T>& vh, const RowMajor<T>& doh) {
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
    for (int64_t i = 0; i < sq; ++i) {
      const T o_terms = ado.row(i).dot(g.o.row(i).cwiseAbs());
      T inexact = 0;
      for (int64_t d = 0; d < dv; ++d)
        if (g.o(i, d) != g.f.o(i, d)) inexact += ado(i, d) * std::fabs(g.o(i, d));
      od[i] = 2 * u_out * inexact;
      for (int64_t j = 0; j < sk; ++j) {
        const T pij = g.p(i, j);
        const T dcap = p_.softcap > 0 ? g.f.dcap(i, j) : T(1);
        const T eps = u * ((static_cast<T>(p_.head_dim) + 4) * scale * qk(i, j) + 4) + static_cast<T>(lf[i].under(1));
        pd(i, j) = pij * dcap;
        pe(i, j) = pij * (n_round * u + eps);
        f(i, j) = pij * std::fabs(dcap) * (static_cast<T>(dv) + 2) * u * (f(i, j) + o_terms) +
                  (n_round * u + eps) * std::fabs(g.ds(i, j));
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

  RowMajor<T> dk() const {
    return (dk_ + static_cast<T>(kRoundingSigmas) * dk_sq_.cwiseSqrt()) * static_cast<T>(p_.effective_scale());
  }
  RowMajor<T> dv() const { return dv_ + static_cast<T>(kRoundingSigmas) * dv_sq_.cwiseSqrt(); }

 private:
  const Problem& p_;
  RowMajor<T> dk_, dk_sq_, dv_, dv_sq_;  // floors and sums of squared modelled roundings
};

}  // namespace opcts::sdpa::detail
