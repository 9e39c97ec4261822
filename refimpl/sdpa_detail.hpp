// Helpers shared by the SDPA forward and backward references (refimpl only; the host impls
// do not use them): one (batch, head) slice gathered from storage order into a matrix, the
// masked scores and the softmax of one head, in double (fp64 reference) or float (the
// same-precision pipeline, rounding to the dtype where a math backend stores a tensor).
#pragma once

#include <cmath>
#include <limits>
#include <vector>

#include <Eigen/Dense>

#include "refimpl/sdpa.hpp"

namespace opcts::sdpa::detail {

template <typename T>
using RowMajor = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

/// The [S, D] slice (b, h) of a tensor decoded in storage order; rows flagged in `zero_rows`
/// (keys no query row sees, where poison_masked put NaN) become 0, so that no 0·NaN of a GEMM
/// leaks NaN into rows that never look at them. Masking is explicit everywhere else too.
template <typename T>
RowMajor<T> gather(const std::vector<double>& buf, const Strides& st, int64_t b, int64_t h, int64_t seq, int64_t d,
                   const std::vector<char>* zero_rows = nullptr) {
  RowMajor<T> m(seq, d);
  for (int64_t s = 0; s < seq; ++s) {
    const bool zero = zero_rows && (*zero_rows)[s];
    const double* src = buf.data() + st.at(b, h, s);
    for (int64_t x = 0; x < d; ++x) m(s, x) = zero ? T(0) : static_cast<T>(src[x]);
  }
  return m;
}

/// Writes m into the (b, h) slice of a storage-order output.
template <typename T, typename Round>
void scatter(std::vector<double>& out, const Strides& st, int64_t b, int64_t h, const RowMajor<T>& m, Round round) {
  for (int64_t s = 0; s < m.rows(); ++s) {
    double* dst = out.data() + st.at(b, h, s);
    for (int64_t x = 0; x < m.cols(); ++x) dst[x] = round(static_cast<double>(m(s, x)));
  }
}

/// The attn_mask of a problem, decoded (storage order [Bm, Hm, Sq, Sk]); empty when none.
struct MaskView {
  const Problem* p = nullptr;
  std::vector<double> values;
  Strides st{0, 0, 0};
  /// The mask element for query head h (the mask is indexed by query heads).
  double at(int64_t b, int64_t h, int64_t i, int64_t j) const { return values[st.at(b, h, i) + j]; }
};

inline MaskView mask_view(const Problem& p, const TensorMap& inputs) {
  MaskView m;
  m.p = &p;
  if (p.mask_tensor != MaskTensor::none) {
    m.values = inputs.at("attn_mask").to_f64();
    m.st = mask_strides(p);
  }
  return m;
}

/// One head's probabilities. Scores arrive as S = Q·Kᵀ (unscaled GEMM result in T); this
/// applies the scale, the softcap, the additive mask and -inf for keys outside the causal
/// range, the window or the boolean mask, then a softmax per row:
///   P (normalised; rows that see no key are 0), lse (-inf there) and, when softcap > 0,
///   dcap = 1 − tanh²(x / softcap), the softcap's derivative.
/// `rnd` rounds an intermediate to the dtype (identity for the fp64 reference); it is applied
/// where a math backend stores: the scaled scores, the capped scores, the masked sum and P.
template <typename T, typename Round>
void softmax_head(const Problem& p, const MaskView& mask, int64_t b, int64_t h, RowMajor<T>& s, std::vector<T>& lse,
                  RowMajor<T>* dcap, Round rnd) {
  const T neg_inf = -std::numeric_limits<T>::infinity();
  const T scale = static_cast<T>(p.effective_scale());
  const T cap = static_cast<T>(p.softcap);
  const bool capped = p.softcap > 0;
  if (capped && dcap) dcap->setZero(p.seq_q, p.seq_k);
  lse.assign(static_cast<size_t>(p.seq_q), neg_inf);
  for (int64_t i = 0; i < p.seq_q; ++i) {
    const int64_t first = p.first_key(i), last = p.last_key(i);
    T m = neg_inf;
    for (int64_t j = 0; j < p.seq_k; ++j) {
      bool keep = j >= first && j <= last;
      if (keep && p.mask_tensor == MaskTensor::boolean) keep = mask.at(b, h, i, j) != 0;
      if (!keep) {
        s(i, j) = neg_inf;
        continue;
      }
      T x = rnd(scale * s(i, j));
      if (capped) {
        const T y = rnd(std::tanh(x / cap));
        if (dcap) (*dcap)(i, j) = T(1) - y * y;
        x = rnd(cap * y);
      }
      if (p.mask_tensor == MaskTensor::additive) x = rnd(x + static_cast<T>(mask.at(b, h, i, j)));
      s(i, j) = x;
      m = std::max(m, x);
    }
    if (m == neg_inf) {  // no key (or every key at -inf): O = 0, lse = -inf
      s.row(i).setZero();
      continue;
    }
    T l = 0;
    for (int64_t j = 0; j < p.seq_k; ++j) {
      const T e = s(i, j) == neg_inf ? T(0) : std::exp(s(i, j) - m);
      s(i, j) = e;
      l += e;
    }
    lse[i] = m + std::log(l);
    for (int64_t j = 0; j < p.seq_k; ++j) s(i, j) = rnd(s(i, j) / l);
  }
}

}  // namespace opcts::sdpa::detail
