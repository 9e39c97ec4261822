// SDPA forward references: fp64 (Eigen, OpenMP) and the same-precision reference of the ref_relative metric.
#include <cmath>
#include <limits>

#include <Eigen/Dense>

#include "refimpl/sdpa.hpp"

namespace opcts::sdpa {

namespace {

template <typename T>
using RowMajor = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

// Views one head's [S, D] slice of a contiguous BHSD buffer as a matrix.
template <typename T>
Eigen::Map<const RowMajor<T>> head(const std::vector<T>& buf, int64_t b, int64_t h, int64_t heads, int64_t seq,
                                   int64_t d) {
  return Eigen::Map<const RowMajor<T>>(buf.data() + ((b * heads + h) * seq) * d, seq, d);
}

// Softmax of the visible prefix of each score row, in T, writing P (zeros past the prefix),
// the row sums and logsumexp. Every mask of this family keeps a prefix j < keys_of_row(i).
template <typename T, typename Round>
void masked_softmax(const Problem& p, RowMajor<T>& s, std::vector<T>& rowsum, T* lse, Round round_p) {
  const T neg_inf = -std::numeric_limits<T>::infinity();
  for (int64_t i = 0; i < p.seq_q; ++i) {
    const int64_t n = p.keys_of_row(i);
    if (n == 0) {
      s.row(i).setZero();
      rowsum[i] = 0;
      lse[i] = neg_inf;
      continue;
    }
    T m = neg_inf;
    for (int64_t j = 0; j < n; ++j) m = std::max(m, s(i, j));
    T l = 0;
    for (int64_t j = 0; j < n; ++j) {
      s(i, j) = std::exp(s(i, j) - m);
      l += s(i, j);
    }
    for (int64_t j = n; j < p.seq_k; ++j) s(i, j) = 0;
    rowsum[i] = l;
    lse[i] = m + std::log(l);
    round_p(s, i, l);
  }
}

}  // namespace

References reference(const Problem& p, const TensorMap& inputs) {
  const int64_t B = p.batch, Hq = p.heads_q, Hkv = p.heads_kv, Sq = p.seq_q, Sk = p.seq_k, D = p.head_dim;
  const int64_t group = Hq / Hkv;
  const std::vector<double> q = inputs.at("q").to_f64(), k = inputs.at("k").to_f64(), v = inputs.at("v").to_f64();
  const std::vector<float> qf(q.begin(), q.end()), kf(k.begin(), k.end()), vf(v.begin(), v.end());
  const DType t = p.dtype;
  const double scale = p.effective_scale();
  const float scale_f = static_cast<float>(scale);

  References r;
  auto& o = r.exact["O"];
  auto& lse = r.exact["lse"];
  auto& o_lp = r.lowp["O"];
  auto& lse_lp = r.lowp["lse"];
  o.assign(B * Hq * Sq * D, 0.0);
  lse.assign(B * Hq * Sq, 0.0);
  o_lp.assign(o.size(), 0.0);
  lse_lp.assign(lse.size(), 0.0);

#pragma omp parallel for collapse(2) schedule(dynamic)
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t h = 0; h < Hq; ++h) {
      const int64_t hk = h / group;  // GQA: consecutive query heads share a KV head
      const int64_t row0 = (b * Hq + h) * Sq;
      // fp64: the mathematical value on the rounded inputs.
      {
        RowMajor<double> s = (head(q, b, h, Hq, Sq, D) * head(k, b, hk, Hkv, Sk, D).transpose()) * scale;
        std::vector<double> l(Sq);
        masked_softmax<double>(p, s, l, lse.data() + row0, [](RowMajor<double>&, int64_t, double) {});
        RowMajor<double> out = s * head(v, b, hk, Hkv, Sk, D);
        for (int64_t i = 0; i < Sq; ++i)
          for (int64_t d = 0; d < D; ++d) o[(row0 + i) * D + d] = l[i] > 0 ? out(i, d) / l[i] : 0.0;
      }
      // Same precision, as a math backend computes it in the input dtype: S rounded to the
      // dtype after an fp32 GEMM, softmax in fp32, P normalised and rounded to the dtype,
      // O = P·V accumulated in fp32 and rounded to the dtype (FlashAttention's attention_ref
      // with upcast=False; PyTorch's "[Note] Fused Tolerances" lp_ref).
      {
        RowMajor<float> s = head(qf, b, h, Hq, Sq, D) * head(kf, b, hk, Hkv, Sk, D).transpose();
        for (int64_t i = 0; i < s.size(); ++i)
          s.data()[i] = static_cast<float>(round_to(t, static_cast<double>(scale_f * s.data()[i])));
        std::vector<float> l(Sq);
        std::vector<float> lse_row(Sq);
        masked_softmax<float>(p, s, l, lse_row.data(), [&](RowMajor<float>& m, int64_t i, float sum) {
          for (int64_t j = 0; j < m.cols(); ++j) m(i, j) = static_cast<float>(round_to(t, m(i, j) / sum));
        });
        RowMajor<float> out = s * head(vf, b, hk, Hkv, Sk, D);
        for (int64_t i = 0; i < Sq; ++i) {
          lse_lp[row0 + i] = lse_row[i];
          for (int64_t d = 0; d < D; ++d) o_lp[(row0 + i) * D + d] = round_to(t, out(i, d));
        }
      }
    }
  }
  return r;
}

}  // namespace opcts::sdpa
